"""What a device has given away: releases of reports and their composition (the privacy ledger).

A :class:`Release` records reports a device sent: the mechanism's spec, its level computed from
the channel (``epsilon``, :meth:`Mechanism.epsilon_ldp`, decision 0010), the number of reports, the
collection and the time, and, for a mechanism with a permanent (memoized) randomization whose
memo was *reused*, the memo's key and the level of that randomization ``eps_perm``
(:meth:`epsilon_perm` of the longitudinal oracles and RAPPOR). :func:`compose` gives the total.

How each release is modelled
----------------------------
* **Independent reports** (no memo key): ``r`` reports of an ``eps``-LDP mechanism, each drawn
  with fresh randomness, compose to ``r eps`` (basic composition: the likelihood ratios multiply).
* **Reports sharing one memo** (same ``memo_key``): every report is post-processing of the
  memoized value, so together they are ``eps_perm``-LDP whatever their number (RAPPOR's
  ``eps_inf``, Erlingsson et al. 2014). One report alone costs its own ``eps``. ``t >= 2`` cost
  ``min(eps_perm, sum of eps_inst)`` where every release of the memo gives ``eps_inst``, the level
  of one report *given* the memo (:meth:`epsilon_instantaneous`; their joint probability
  ``sum_m P(m | x) prod_i P(z_i | m)`` is a mixture of products of ``t`` such rounds), else
  ``eps_perm`` -- *never* ``min(t eps, eps_perm)``: reports drawn from one memo are correlated, and
  their joint level can exceed ``t eps`` (measured in ``docs/results/accounting.json``, decision
  0051), so the per-report level does not compose for them.
* **(eps, delta) accounting** (``delta > 0`` asked): the privacy loss distributions (PLD) of the
  events are composed by Google's ``dp-accounting`` (``dp_accounting.pld``, pessimistic
  discretization): a k-RR report (``rr_values = k``) by the PLD of k-ary randomized response, any
  other ``eps``-LDP event by the PLD of the dominating pair of ``eps``-DP (binary randomized
  response; ``from_privacy_parameters``), a memo group by the eps-DP one at its cost (above). The answer is
  ``min(PLD, basic)``: both are upper bounds, and the discretization can put the PLD a grid step
  above the basic sum for few, small events. Basic composition is used instead when
  ``dp-accounting`` is not installed, a level is infinite, or the PLD's bounds are passed
  (:data:`MAX_PLD_EVENTS`, :data:`MAX_PLD_CLASSES`, :data:`MAX_PLD_EPSILON`); the result says which.

What a level means (:func:`explain_level`): an ``eps``-LDP release multiplies the odds an
adversary gives to any hypothesis about the device's value against another by at most ``e^eps``
(Bayes: ``P(x|z) / P(x'|z) = [P(z|x) / P(z|x')] [P(x) / P(x')]``, Kasiviswanathan et al. 2011);
with ``delta`` the bound can fail with probability at most ``delta``.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from localpriv.mechanisms.base import Mechanism, Memoized
from localpriv.utils.validation import LocalPrivError

__all__ = ["Release", "Composition", "release_of", "report_charge", "compose", "explain_level", "posterior_bound",
           "pld_available", "RELEASE_KEYS", "MAX_RELEASES", "MAX_REPORTS", "MAX_PLD_EVENTS", "MAX_PLD_CLASSES",
           "MAX_PLD_EPSILON", "PLD_DISCRETIZATION"]

#: Most releases one composition (one ledger) holds.
MAX_RELEASES = 100_000
#: Most reports one release records.
MAX_REPORTS = 10 ** 9
#: Most events (reports, or memo groups) the PLD accountant composes; beyond, basic composition.
MAX_PLD_EVENTS = 10_000
#: Most distinct (model, level) classes the PLD accountant composes; beyond, basic composition.
MAX_PLD_CLASSES = 64
#: Largest level of one event given to the PLD accountant; beyond, basic composition.
MAX_PLD_EPSILON = 50.0
#: Grid of the privacy losses in the PLD (pessimistic: each loss is rounded up to it).
PLD_DISCRETIZATION = 1e-3
#: The keys of a release, in the order of the ledger file (docs/accounting.md).
RELEASE_KEYS = ("spec", "epsilon", "delta", "reports", "collection", "time", "memo_key", "eps_perm", "eps_inst",
                "rr_values")


def _level(value: object, name: str, allow_inf: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LocalPrivError(f"release: {name} must be a number, got {type(value).__name__}")
    v = float(value)
    if math.isnan(v) or v < 0 or (math.isinf(v) and not allow_inf):
        raise LocalPrivError(f"release: {name} must be >= 0{'' if allow_inf else ' and finite'}, got {v}")
    return v


@dataclass(frozen=True)
class Release:
    """Reports one device sent under one mechanism (one entry of the ledger).

    Attributes
    ----------
    spec : str
        The mechanism's spec (``str(mech)``).
    epsilon : float
        The LDP level of ONE report, computed from the channel (:meth:`Mechanism.epsilon_ldp`).
    delta : float
        The ``delta`` of one report (0 for every mechanism of localpriv).
    reports : int
        How many reports (``1 <= reports <= MAX_REPORTS``).
    collection : str
        The collection they went to.
    time : str
        When (ISO 8601, UTC).
    memo_key : str or None
        Set only when the reports reuse a stored permanent randomization: the key naming that memo
        (e.g. a keyed hash of the spec and the value). Releases with the same key form one group,
        bounded by ``eps_perm``.
    eps_perm : float or None
        The level of the permanent randomization (:meth:`epsilon_perm`), needed with ``memo_key``.
    eps_inst : float or None
        The level of one report given the memo (:meth:`epsilon_instantaneous`, where the family has
        it): ``t`` reports of one memo then cost ``min(eps_perm, t eps_inst)``.
    rr_values : int or None
        ``k`` when a report is k-ary randomized response on ``k`` values (then modelled by the RR PLD).
    """

    spec: str
    epsilon: float
    delta: float = 0.0
    reports: int = 1
    collection: str = ""
    time: str = ""
    memo_key: str | None = None
    eps_perm: float | None = None
    eps_inst: float | None = None
    rr_values: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.spec, str) or not self.spec:
            raise LocalPrivError("release: spec must be a non-empty string")
        object.__setattr__(self, "epsilon", _level(self.epsilon, "epsilon"))
        d = _level(self.delta, "delta", allow_inf=False)
        if d >= 1:
            raise LocalPrivError(f"release: delta must be in [0, 1), got {d}")
        object.__setattr__(self, "delta", d)
        r = self.reports
        if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= MAX_REPORTS:
            raise LocalPrivError(f"release: reports must be an integer in 1..{MAX_REPORTS}, got {r!r}")
        for name in ("collection", "time"):
            if not isinstance(getattr(self, name), str):
                raise LocalPrivError(f"release: {name} must be a string")
        if self.memo_key is not None:
            if not isinstance(self.memo_key, str) or not self.memo_key:
                raise LocalPrivError("release: memo_key must be a non-empty string or null")
            if self.eps_perm is None:
                raise LocalPrivError("release: a memo_key needs eps_perm, the level of the memoized randomization")
        for name in ("eps_perm", "eps_inst"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _level(getattr(self, name), name))
        k = self.rr_values
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 2):
            raise LocalPrivError(f"release: rr_values must be an integer >= 2 or null, got {k!r}")

    def to_dict(self) -> dict[str, Any]:
        """The release as the ledger file's JSON object (keys :data:`RELEASE_KEYS`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Release:
        """A release from the ledger file's JSON object; unknown keys are refused."""
        if not isinstance(obj, Mapping):
            raise LocalPrivError(f"release: expected an object, got {type(obj).__name__}")
        unknown = sorted(set(obj) - set(RELEASE_KEYS))
        if unknown:
            raise LocalPrivError(f"release: unknown key(s) {', '.join(map(str, unknown))}; "
                                 f"known: {', '.join(RELEASE_KEYS)}")
        missing = [k for k in ("spec", "epsilon") if k not in obj]
        if missing:
            raise LocalPrivError(f"release: missing key(s) {', '.join(missing)}")
        return cls(**dict(obj))


def release_of(mech: Mechanism, reports: int = 1, *, collection: str = "", time: str = "",
               memo_key: str | None = None) -> Release:
    """The release of ``reports`` reports of ``mech``, with its levels computed from the channel.

    ``epsilon = mech.epsilon_ldp()``; for a memoized mechanism (the longitudinal oracles,
    RAPPOR) ``eps_perm = mech.epsilon_perm()`` and, where the family has it,
    ``eps_inst = mech.epsilon_instantaneous()``. Give ``memo_key`` only when the reports were drawn
    from a *stored* memo (the same permanent randomization as earlier reports with that key): a
    client that draws a new memo for each submission (as :meth:`Mechanism.sample` does) sends
    independent reports, which compose at ``epsilon`` each.
    """
    if not isinstance(mech, Mechanism):
        raise LocalPrivError(f"release_of: expected a Mechanism, got {type(mech).__name__}")
    perm = getattr(mech, "epsilon_perm", None) if isinstance(mech, Memoized) else None
    eps_perm = float(perm()) if callable(perm) else None
    inst = getattr(mech, "epsilon_instantaneous", None) if isinstance(mech, Memoized) else None
    eps_inst = float(inst()) if callable(inst) else None
    if memo_key is not None and eps_perm is None:
        raise LocalPrivError(f"release_of: {mech} has no memoized randomization, so no memo_key")
    k = getattr(mech, "k", None)
    rr = int(k) if getattr(mech, "spec_name", "") in ("krr", "lgrr") and isinstance(k, int) else None
    return Release(spec=str(mech), epsilon=float(mech.epsilon_ldp()), reports=reports, collection=collection,
                   time=time, memo_key=memo_key, eps_perm=eps_perm, eps_inst=eps_inst, rr_values=rr)


def report_charge(mech: Mechanism, level: float | None = None) -> float:
    """What one report of ``mech`` must be charged when the charger cannot see memo groups.

    A collector sees reports, not whether a device's value (and so its memo) changed between them.
    For a mechanism without memo the charge is its one-report level ``epsilon_ldp``. For a
    memoized one it is ``c = max(eps_1, min(eps_perm, eps_inst))`` (``eps_inst = inf`` where the
    family has no instantaneous level): ``t`` reports of one memo then cost ``t c >= min(eps_perm,
    t eps_inst)``, which bounds their joint level, and reports of different memos compose. The
    one-report level ``eps_1`` alone is *not* a valid charge: two reports of one memo can reveal
    more than ``2 eps_1`` (``docs/accounting.md``).

    Parameters
    ----------
    mech : Mechanism
        The mechanism of the report.
    level : float, optional
        Its one-report level, when the caller already computed it (else ``mech.epsilon_ldp()``).
    """
    one = float(mech.epsilon_ldp()) if level is None else float(level)
    if not isinstance(mech, Memoized):
        return one
    perm = getattr(mech, "epsilon_perm", None)
    inst = getattr(mech, "epsilon_instantaneous", None)
    eps_perm = float(perm()) if callable(perm) else math.inf
    eps_inst = float(inst()) if callable(inst) else math.inf
    return max(one, min(eps_perm, eps_inst))


@dataclass(frozen=True)
class Composition:
    """The total of a set of releases (:func:`compose`).

    Attributes
    ----------
    epsilon : float
        Pure ``eps`` by basic composition, memo groups capped (``inf`` if a level is).
    delta : float
        The sum of the releases' own ``delta`` (0 for pure releases): the total is
        ``(epsilon, delta)``-DP.
    pld_epsilon : float or None
        ``eps`` at ``pld_delta`` (``min(PLD, basic)``); ``None`` when no ``delta`` was asked.
    pld_delta : float or None
        The target ``delta`` of ``pld_epsilon`` (plus the releases' own ``delta``).
    accountant : str
        ``"pld"`` (dp-accounting's PLD), or ``"basic: <why>"`` when the PLD was not used.
    events : int
        Events composed: independent reports, plus one per memo group of two or more reports.
    models : list of dict
        One row per (model, level) class: ``model`` (``"rr"``, ``"eps-dp"``, ``"memo"``),
        ``epsilon``, ``delta``, ``count`` (events), ``releases``.
    """

    epsilon: float
    delta: float
    pld_epsilon: float | None
    pld_delta: float | None
    accountant: str
    events: int
    models: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dictionary."""
        return asdict(self)


def _events(releases: list[Release]) -> dict[tuple[str, float, float, int], list[int]]:
    """Classes ``(model, eps, delta, k) -> [events, releases]`` (module docstring)."""
    classes: dict[tuple[str, float, float, int], list[int]] = {}
    groups: dict[str, list[Release]] = {}
    for r in releases:  # releases (records of a device), not users
        if r.memo_key is not None:
            groups.setdefault(r.memo_key, []).append(r)
            continue
        model = ("rr", r.rr_values) if r.rr_values is not None and r.delta == 0 else ("eps-dp", 0)
        c = classes.setdefault((model[0], r.epsilon, r.delta, model[1]), [0, 0])
        c[0] += r.reports
        c[1] += 1
    for key, members in groups.items():
        perms = {m.eps_perm for m in members}
        if len(perms) > 1:
            raise LocalPrivError(f"releases of memo {key!r} disagree on eps_perm ({sorted(map(str, perms))}): "
                                 "one memo has one permanent level")
        n = sum(m.reports for m in members)
        if n == 1:  # one report alone: its own level
            m = members[0]
            model = ("rr", m.rr_values) if m.rr_values is not None and m.delta == 0 else ("eps-dp", 0)
            c = classes.setdefault((model[0], m.epsilon, m.delta, model[1]), [0, 0])
        else:  # min(eps_perm, sum of the instantaneous levels) when every release gives its own
            cap = float(members[0].eps_perm or 0.0)
            if all(m.eps_inst is not None for m in members):
                cap = min(cap, math.fsum(m.reports * float(m.eps_inst or 0.0) for m in members))
            c = classes.setdefault(("memo", cap, 0.0, 0), [0, 0])
            n = 1
        c[0] += n
        c[1] += len(members)
    return classes


def pld_available() -> bool:
    """Whether Google's ``dp-accounting`` (the PLD accountant) can be imported here."""
    import importlib.util
    return importlib.util.find_spec("dp_accounting") is not None


def _pld_epsilon(classes: Mapping[tuple[str, float, float, int], list[int]], delta: float) -> tuple[float | None, str]:
    """``eps`` at ``delta`` of the composed PLDs of the classes, or ``(None, why not)``."""
    events = sum(c[0] for c in classes.values())
    live = {k: v for k, v in classes.items() if k[1] > 0 or k[2] > 0}
    if any(math.isinf(k[1]) for k in live):
        return None, "basic: a level is infinite"
    if events > MAX_PLD_EVENTS:
        return None, f"basic: {events:,} events exceed the PLD's limit of {MAX_PLD_EVENTS:,}"
    if len(live) > MAX_PLD_CLASSES:
        return None, f"basic: {len(live)} distinct levels exceed the PLD's limit of {MAX_PLD_CLASSES}"
    if any(k[1] > MAX_PLD_EPSILON for k in live):
        return None, f"basic: a level above {MAX_PLD_EPSILON:g} (the PLD's limit)"
    if not live:
        return 0.0, "pld"
    if not pld_available():
        return None, "basic: dp-accounting is not installed"
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld
    total = None
    for (model, eps, d, k), (count, _) in sorted(live.items()):  # sorted: the same answer in any order
        if model == "rr":
            base = pld.from_randomized_response(k / (math.exp(eps) + k - 1.0), k,
                                                value_discretization_interval=PLD_DISCRETIZATION)
        else:
            base = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, d),
                                               value_discretization_interval=PLD_DISCRETIZATION)
        part = base.self_compose(count) if count > 1 else base
        total = part if total is None else total.compose(part)
    assert total is not None
    return float(total.get_epsilon_for_delta(delta)), "pld"


def compose(releases: Iterable[Release], delta: float | None = None) -> Composition:
    """The total level of ``releases`` (module docstring: how each release is modelled).

    Basic composition [DR14]_ (Theorem 3.16): ``eps = sum_i r_i eps_i`` over independent releases
    plus, per memo group of two or more reports, ``min(eps_perm, sum_i r_i eps_inst_i)`` (or
    ``eps_perm`` where a release lacks ``eps_inst``; one report alone: its ``eps``), and
    ``delta = sum_i r_i delta_i``. With ``delta`` given, also the PLD accountant's ``eps`` at that
    ``delta`` (``min(PLD, basic)``; basic when the PLD does not apply, as ``accountant`` says).

    Parameters
    ----------
    releases : iterable of Release
        At most :data:`MAX_RELEASES`.
    delta : float, optional
        Target ``delta`` in ``(0, 1)`` for the ``(eps, delta)`` total.

    Returns
    -------
    Composition
        The same for any order of ``releases``.

    References
    ----------
    .. [DR14] C. Dwork, A. Roth, "The Algorithmic Foundations of Differential Privacy", 2014.
    """
    rel = list(releases)
    if len(rel) > MAX_RELEASES:
        raise LocalPrivError(f"compose: {len(rel):,} releases exceed the limit of {MAX_RELEASES:,}")
    for r in rel:
        if not isinstance(r, Release):
            raise LocalPrivError(f"compose: expected Release records, got {type(r).__name__}")
    if delta is not None:
        delta = _level(delta, "delta", allow_inf=False)
        if not 0 < delta < 1:
            raise LocalPrivError(f"compose: delta must be in (0, 1), got {delta}")
    classes = _events(rel)
    basic = math.fsum(c[0] * k[1] for k, c in classes.items() if k[1] > 0)  # fsum: exact, any order
    own_delta = min(1.0, math.fsum(c[0] * k[2] for k, c in classes.items()))
    events = sum(c[0] for c in classes.values())
    models = [{"model": m, "epsilon": e, "delta": d, "rr_values": k or None, "count": c[0], "releases": c[1]}
              for (m, e, d, k), c in sorted(classes.items())]
    if delta is None:
        return Composition(basic, own_delta, None, None, "basic", events, models)
    pld_eps, how = _pld_epsilon(classes, delta)
    best = basic if own_delta <= delta else math.inf  # basic holds at its own delta and above only
    if pld_eps is not None:
        best = min(best, pld_eps)
    return Composition(basic, own_delta, best, delta, how, events, models)


def posterior_bound(prior: float, eps: float) -> float:
    """The largest posterior probability of a hypothesis of prior probability ``prior`` after an
    ``eps``-LDP release: odds multiplied by at most ``e^eps``, so
    ``p' <= p e^eps / (p e^eps + 1 - p) = 1 / (1 + (1 - p) e^-eps / p)``."""
    if not 0 < prior < 1:
        raise LocalPrivError(f"prior must be in (0, 1), got {prior}")
    eps = _level(eps, "eps")
    if math.isinf(eps):
        return 1.0
    return 1.0 / (1.0 + (1.0 - prior) / prior * math.exp(-eps))


def _pct(p: float) -> str:
    if p >= 0.9995:
        return "almost 100%" if p < 1 else "100%"
    return f"{100 * p:.3g}%"


def explain_level(eps: float, delta: float = 0.0) -> str:
    """What an ``(eps, delta)`` level means, in plain words (one paragraph, no line breaks).

    An ``eps``-LDP release multiplies the odds an adversary gives to one value of yours against
    another by at most ``e^eps`` (Bayes' rule on ``P(z|x) <= e^eps P(z|x')``), whatever the
    adversary knew before: a suspicion held at 1% or 50% rises to at most
    :func:`posterior_bound` of it. With ``delta > 0`` the bound may fail with probability at most
    ``delta``.
    """
    eps = _level(eps, "eps")
    delta = _level(delta, "delta", allow_inf=False)
    if delta >= 1:
        raise LocalPrivError(f"delta must be in [0, 1), got {delta}")
    tail = (f" This holds except with probability at most {delta:.3g} (delta), in which case nothing is promised."
            if delta > 0 else "")
    if math.isinf(eps):
        return ("No bound: eps is infinite, so some report can rule a value out and an observer may learn the value "
                "for sure." + tail)
    if eps == 0:
        return "Nothing is revealed: eps = 0, so what was sent does not depend on the value at all." + tail
    odds = math.exp(eps) if eps < 709 else math.inf
    odds_text = f"{odds:.3g}" if odds < 1000 or odds >= 1e9 else f"{odds:,.0f}"
    text = (f"Level eps = {eps:.4g}: whoever sees what was sent can multiply the odds they give to any guess about "
            f"your value (against any other) by at most e^eps = {odds_text}. A guess they held at 1% becomes at "
            f"most {_pct(posterior_bound(0.01, eps))}, and one at 50% at most {_pct(posterior_bound(0.5, eps))}.")
    if eps > 10:
        text += " At this level the bound protects practically nothing."
    return text + tail
