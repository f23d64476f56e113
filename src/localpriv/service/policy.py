"""A collection's policy: which mechanisms its users may choose, and at which privacy.

Every submitted spec is parsed as untrusted data (``parse(spec, domain, trusted=False)``: specs
naming files, ``matrix(file=...)``, are refused) and judged by its **computed** privacy level,
never by a parameter: ``Mechanism.epsilon_ldp()`` (``max_z max_{x,x'} log(M[x,z] / M[x',z])``,
:mod:`localpriv.mechanisms.privacy`) and, when the policy caps it, ``Mechanism.epsilon_geo()`` on the
domain's metric. Both are computed within a fixed budget of dense entries
(:func:`~localpriv.mechanisms.base.ldp_level_within_budget`): a spec whose level would need more is
refused in one line before any channel is built, so admission costs bounded time and memory.
A level within ``1e-9`` (relative) of a bound counts as within it, so
``krr(eps=2.0)``, computed 1.9999999999999996, meets ``max_eps = 2``.
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field

from localpriv.mechanisms import parse
from localpriv.mechanisms.base import (
    SPEC_RE,
    geo_level_within_budget,
    ldp_level_within_budget,
    registered,
    short_spec,
)
from localpriv.utils.errors import LocalPrivError

__all__ = ["AdmissionPolicy"]

_TOL = 1e-9
_KEYS = {"mechanisms", "max_eps", "min_eps", "max_eps_geo"}


@dataclass(frozen=True)
class AdmissionPolicy:
    """Allowed mechanism families (spec names, e.g. ``["krr", "oue"]``) and bounds on the computed
    LDP level (``min_eps <= epsilon_ldp <= max_eps``) and, optionally, on the computed
    geo-indistinguishability level (``epsilon_geo <= max_eps_geo``, per unit of the domain's metric)."""

    mechanisms: tuple[str, ...]
    max_eps: float | None = None
    min_eps: float = 0.0
    max_eps_geo: float | None = None
    _levels: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, data) -> AdmissionPolicy:
        """From JSON data (data, never instructions: unknown keys and wrong types are refused)."""
        if not isinstance(data, dict):
            raise LocalPrivError("policy must be an object with mechanisms and max_eps")
        unknown = set(data) - _KEYS
        if unknown:
            raise LocalPrivError(f"policy: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                                 f"known: {', '.join(sorted(_KEYS))}")
        mechs = data.get("mechanisms")
        if not isinstance(mechs, list) or not mechs or not all(isinstance(m, str) for m in mechs):
            raise LocalPrivError("policy: mechanisms must be a non-empty list of spec names, e.g. [\"krr\"]")
        known = registered()
        bad = [m for m in mechs if m not in known]
        if bad:
            raise LocalPrivError(f"policy: unknown mechanism(s) {', '.join(bad[:5])}; "
                                 f"known: {', '.join(sorted(known))}")

        def num(key, default):
            v = data.get(key, default)
            if v is None and default is None:  # an optional cap left out (min_eps has a default: never null)
                return None
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise LocalPrivError(f"policy: {key} must be a finite number >= 0, got {v!r}")
            return float(v)
        max_eps, min_eps, max_geo = num("max_eps", None), num("min_eps", 0.0), num("max_eps_geo", None)
        if max_eps is None and max_geo is None:
            raise LocalPrivError("policy: give max_eps (a cap on the computed LDP level) and/or max_eps_geo")
        if max_eps is not None and min_eps > max_eps:
            raise LocalPrivError(f"policy: min_eps {min_eps} is above max_eps {max_eps}")
        return cls(tuple(dict.fromkeys(mechs)), max_eps, min_eps, max_geo)

    @classmethod
    def from_json(cls, text: str) -> AdmissionPolicy:
        return cls.from_dict(json.loads(text))

    def to_dict(self) -> dict:
        return {"mechanisms": list(self.mechanisms), "max_eps": self.max_eps, "min_eps": self.min_eps,
                "max_eps_geo": self.max_eps_geo}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def admit(self, spec: str, domain):
        """The mechanism of ``spec`` on ``domain`` if the policy allows it; else a one-line
        :class:`LocalPrivError` saying why. Levels are computed once per spec and remembered."""
        if not isinstance(spec, str) or not spec.strip():
            raise LocalPrivError("a report group has no mechanism spec")
        m = SPEC_RE.match(spec)
        name = m.group(1) if m else None
        if name not in self.mechanisms:
            raise LocalPrivError(f"mechanism {short_spec(spec)} is not allowed by the collection's policy "
                                 f"(allowed: {', '.join(self.mechanisms)})")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mech = parse(spec, domain, trusted=False)
        key = str(mech)
        levels = self._levels.get(key)
        if levels is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:  # bounded: a level that would need more than the budget is refused, never computed
                    eps = (ldp_level_within_budget(mech) if (self.max_eps is not None or self.min_eps > 0)
                           else None)
                    geo = geo_level_within_budget(mech) if self.max_eps_geo is not None else None
                except LocalPrivError as exc:
                    raise LocalPrivError(f"{key}: its privacy level cannot be computed here: {exc}") from None
            levels = (eps, geo)
            if len(self._levels) > 1024:
                self._levels.clear()
            self._levels[key] = levels
        eps, geo = levels
        if eps is not None:
            if self.max_eps is not None and not eps <= self.max_eps * (1 + _TOL):
                raise LocalPrivError(f"{key}: computed epsilon {eps:.6g} is above the collection's cap "
                                     f"max_eps={self.max_eps:g}")
            if not eps >= self.min_eps * (1 - _TOL):
                raise LocalPrivError(f"{key}: computed epsilon {eps:.6g} is below the collection's "
                                     f"min_eps={self.min_eps:g}")
        if geo is not None and self.max_eps_geo is not None and not geo <= self.max_eps_geo * (1 + _TOL):
            raise LocalPrivError(f"{key}: computed geo-indistinguishability level {geo:.6g} is above the "
                                 f"collection's cap max_eps_geo={self.max_eps_geo:g}")
        return mech
