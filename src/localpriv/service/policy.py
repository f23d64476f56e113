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

A policy may also carry a privacy **budget** per device and period (:class:`Budget`: per collection,
and across the collections of a device group) and **rate limits** per token (:class:`RateLimit`);
how the service charges and enforces them: ``docs/service.md`` and decision records 0053, 0054.
"""
from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import dataclass, field

from localpriv.mechanisms import parse
from localpriv.mechanisms.accounting import report_charge
from localpriv.mechanisms.base import (
    SPEC_RE,
    geo_level_within_budget,
    ldp_level_within_budget,
    registered,
    short_spec,
)
from localpriv.utils.errors import LocalPrivError

__all__ = ["AdmissionPolicy", "Budget", "RateLimit", "GROUP", "MIN_PERIOD", "MAX_PERIOD", "MAX_RATE"]

_TOL = 1e-9
_KEYS = {"mechanisms", "max_eps", "min_eps", "max_eps_geo", "budget", "rate_limit"}
_BUDGET_KEYS = {"period", "eps", "group", "group_eps", "devices_only"}
_RATE_KEYS = {"period", "requests", "reports"}
#: Periods of budgets and rate limits, in seconds: 1 s to 366 days.
MIN_PERIOD, MAX_PERIOD = 1, 366 * 86400
#: Rate limits count at most this many requests or reports per period.
MAX_RATE = 10 ** 12
#: Device group names: as collection names (1-64 ASCII letters, digits, ``_`` or ``-``).
GROUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def _period(where: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not MIN_PERIOD <= v <= MAX_PERIOD:
        raise LocalPrivError(f"policy: {where}.period must be whole seconds from {MIN_PERIOD} to {MAX_PERIOD} "
                             f"(366 days), got {v!r}")
    return int(v)


def _known(where: str, data: object, keys: set[str]) -> dict:
    if not isinstance(data, dict):
        raise LocalPrivError(f"policy: {where} must be an object with the keys {', '.join(sorted(keys))}")
    unknown = set(data) - keys
    if unknown:
        raise LocalPrivError(f"policy: {where}: unknown key(s) {', '.join(sorted(map(str, unknown)))[:200]}; "
                             f"known: {', '.join(sorted(keys))}")
    return data


def _cap(where: str, v: object) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise LocalPrivError(f"policy: {where} must be a finite number > 0 (or null: no cap), got {v!r}")
    return float(v)


@dataclass(frozen=True)
class Budget:
    """A privacy budget per device and period (basic composition: the sum of the computed levels
    of a device's reports, ``docs/service.md``).

    Parameters
    ----------
    period : int
        Seconds; periods are fixed windows ``[j * period, (j + 1) * period)`` of Unix time, and a
        batch is charged to the window in which the server commits it.
    eps : float or None
        Cap on a device's spending in this collection per period.
    group : str or None
        The device group: collections naming the same group share device identities (a device
        token registered in one works in all) and the cross-collection cap ``group_eps``; without a
        group a device belongs to its collection only.
    group_eps : float or None
        Cap on a device's spending summed over the collections of its group, per period. Every
        collection of a group must state the same ``period`` and ``group_eps``.
    devices_only : bool
        Refuse batches posted with the collection's shared ingest token (they are charged to no
        device).
    """

    period: int
    eps: float | None = None
    group: str | None = None
    group_eps: float | None = None
    devices_only: bool = False

    @classmethod
    def from_dict(cls, data: object) -> Budget:
        """From JSON data; unknown keys and wrong types refused (one-line :class:`LocalPrivError`)."""
        d = _known("budget", data, _BUDGET_KEYS)
        period = _period("budget", d.get("period"))
        eps, group_eps = _cap("budget.eps", d.get("eps")), _cap("budget.group_eps", d.get("group_eps"))
        group = d.get("group")
        if group is not None and (not isinstance(group, str) or GROUP.fullmatch(group) is None):
            raise LocalPrivError("policy: budget.group must be 1-64 ASCII letters, digits, _ or -, starting with "
                                 "a letter or digit")
        if group_eps is not None and group is None:
            raise LocalPrivError("policy: budget.group_eps needs budget.group (the collections it spans)")
        only = d.get("devices_only", False)
        if not isinstance(only, bool):
            raise LocalPrivError(f"policy: budget.devices_only must be true or false, got {only!r}")
        return cls(period, eps, group, group_eps, only)

    def to_dict(self) -> dict:
        return {"period": self.period, "eps": self.eps, "group": self.group, "group_eps": self.group_eps,
                "devices_only": self.devices_only}

    def over(self, spent: float, cap: float | None) -> bool:
        """Is ``spent`` above ``cap`` (``1e-9`` relative tolerance, as the admission bounds)?"""
        return cap is not None and not spent <= cap * (1 + _TOL)


@dataclass(frozen=True)
class RateLimit:
    """Requests and reports per token and period (each device token, enrollment token and the
    shared ingest token has its own count); past either, the service answers 429 with
    ``Retry-After`` (the end of the window).

    Parameters
    ----------
    period : int
        Seconds; fixed windows of Unix time.
    requests : int or None
        Requests per token and period (ingest and registration).
    reports : int or None
        Reports per token and period; a batch with more reports than this is refused (422).
    """

    period: int
    requests: int | None = None
    reports: int | None = None

    @classmethod
    def from_dict(cls, data: object) -> RateLimit:
        """From JSON data; unknown keys and wrong types refused (one-line :class:`LocalPrivError`)."""
        d = _known("rate_limit", data, _RATE_KEYS)
        period = _period("rate_limit", d.get("period"))

        def count(key: str) -> int | None:
            v = d.get(key)
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_RATE:
                raise LocalPrivError(f"policy: rate_limit.{key} must be a whole number from 1 to {MAX_RATE:.0e} "
                                     f"(or null: no limit), got {v!r}")
            return int(v)
        requests, reports = count("requests"), count("reports")
        if requests is None and reports is None:
            raise LocalPrivError("policy: rate_limit needs requests and/or reports (per token and period)")
        return cls(period, requests, reports)

    def to_dict(self) -> dict:
        return {"period": self.period, "requests": self.requests, "reports": self.reports}


@dataclass(frozen=True)
class AdmissionPolicy:
    """Allowed mechanism families (spec names, e.g. ``["krr", "oue"]``) and bounds on the computed
    LDP level (``min_eps <= epsilon_ldp <= max_eps``) and, optionally, on the computed
    geo-indistinguishability level (``epsilon_geo <= max_eps_geo``, per unit of the domain's metric)."""

    mechanisms: tuple[str, ...]
    max_eps: float | None = None
    min_eps: float = 0.0
    max_eps_geo: float | None = None
    budget: Budget | None = None
    rate_limit: RateLimit | None = None
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
        budget = None if data.get("budget") is None else Budget.from_dict(data["budget"])
        rate = None if data.get("rate_limit") is None else RateLimit.from_dict(data["rate_limit"])
        return cls(tuple(dict.fromkeys(mechs)), max_eps, min_eps, max_geo, budget, rate)

    @classmethod
    def from_json(cls, text: str) -> AdmissionPolicy:
        return cls.from_dict(json.loads(text))

    def to_dict(self) -> dict:
        out: dict = {"mechanisms": list(self.mechanisms), "max_eps": self.max_eps, "min_eps": self.min_eps,
                     "max_eps_geo": self.max_eps_geo}
        if self.budget is not None:  # left out when absent: a policy without them reads as before
            out["budget"] = self.budget.to_dict()
        if self.rate_limit is not None:
            out["rate_limit"] = self.rate_limit.to_dict()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def level(self, mech) -> float:
        """The computed LDP level ``epsilon_ldp`` of an admitted mechanism (what a report of it is
        charged), computed within the dense-entry budget and remembered; a level that cannot be
        computed here is refused (one-line :class:`LocalPrivError`)."""
        key = ("ldp", str(mech))
        eps = self._levels.get(key)
        if eps is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    eps = ldp_level_within_budget(mech)
                except LocalPrivError as exc:
                    raise LocalPrivError(f"{mech}: its privacy level cannot be computed here: {exc}") from None
            if len(self._levels) > 1024:
                self._levels.clear()
            self._levels[key] = eps
        return float(eps)

    def charge(self, mech) -> float:
        """What one report of an admitted mechanism is charged against a device's budget:
        :func:`~localpriv.mechanisms.accounting.report_charge` of its computed level (its
        one-report level, or for a memoized mechanism ``min(eps_perm, eps_inst)`` at least), since
        the service cannot see which reports share a memo; remembered per spec."""
        key = ("charge", str(mech))
        c = self._levels.get(key)
        if c is None:
            level = self.level(mech)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c = report_charge(mech, level)
            if len(self._levels) > 1024:
                self._levels.clear()
            self._levels[key] = c
        return float(c)

    def admit(self, spec: str, domain):
        """The mechanism of ``spec`` on ``domain`` if the policy allows it; else a one-line
        :class:`LocalPrivError` saying why. Parsed specs and their levels are computed once and remembered."""
        if not isinstance(spec, str) or not spec.strip():
            raise LocalPrivError("a report group has no mechanism spec")
        m = SPEC_RE.match(spec)
        name = m.group(1) if m else None
        if name not in self.mechanisms:
            raise LocalPrivError(f"mechanism {short_spec(spec)} is not allowed by the collection's policy "
                                 f"(allowed: {', '.join(self.mechanisms)})")
        parsed_key = ("spec", spec, None if domain is None else domain.spec())
        mech = self._levels.get(parsed_key)  # a parsed spec, remembered (mechanisms are immutable)
        if mech is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mech = parse(spec, domain, trusted=False)
            if len(self._levels) > 1024:
                self._levels.clear()
            self._levels[parsed_key] = mech
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
