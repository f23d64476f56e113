"""Which multi-attribute protocol for a question about several attributes? (``localpriv advise``
on a product domain; decision 0079.)

:func:`advise_protocols` ranks SPL, SMP, RS+FD and RS+RFD (:mod:`localpriv.mechanisms.multiattr`),
each with the k-RR and the OUE oracle, on two things:

* **accuracy**: the predicted error of the one-way marginals, the mean over attributes of the total
  variation ``(1/2) sum_v |hat f_j(v) - f_j(v)|`` of the protocol's unbiased marginal estimate
  projected onto the simplex, simulated: ``runs`` data sets of ``n`` users drawn from ``theta``,
  the median over runs, the interval the smallest to the largest run;
* **attack risk**: the advantage ``(a - 1/d) / (1 - 1/d)`` of the sampled-attribute attack
  (:func:`localpriv.multiattr.attribute_attack.sampled_attribute_attack`, Arcolezi et al., VLDB
  2023), the attacker knowing the marginals of ``theta``: 1 for SMP (the report names the
  attribute), computed for RS+FD and RS+RFD, none for SPL (no attribute is sampled).

Every protocol meets the target by its level computed from the mechanism: ``bind="report"``
(default) bounds the level of the whole report between any two tuples, ``epsilon_ldp()``;
``bind="attribute"`` bounds the level between tuples differing in one attribute,
``epsilon_attribute()`` (the papers' guarantee for RS+FD). The oracle's ``eps`` is found by
bisection on the computed level (monotone in it) and rounded down. RS+RFD's prior is the marginals
of ``theta`` (floored at ``1e-3`` and renormalized: a zero prior cell is refused by the protocol).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import Any

import numpy as np

from localpriv.domains import ProductDomain, parse_domain
from localpriv.mechanisms import parse
from localpriv.mechanisms.multiattr import MultiAttributeMechanism
from localpriv.multiattr.attribute_attack import sampled_attribute_attack
from localpriv.utils.simplex import project_simplex
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

__all__ = ["ProtocolRow", "ProtocolAdvice", "advise_protocols", "PROTOCOLS", "MAX_ADVICE_USERS"]

#: the protocols and oracles ranked, as spec templates (``{eps}``, ``{prior}`` filled)
PROTOCOLS = ("spl(krr(eps={eps}))", "spl(oue(eps={eps}))", "smp(krr(eps={eps}))", "smp(oue(eps={eps}))",
             "rsfd(krr(eps={eps}))", "rsfd(oue(eps={eps}))", "rsrfd(krr(eps={eps}),prior={prior})")
#: the most users simulated per run (and by the attack)
MAX_ADVICE_USERS = 2_000_000
#: the prior floor of RS+RFD
PRIOR_FLOOR = 1e-3


@dataclass
class ProtocolRow:
    """One protocol: its spec, computed levels, predicted error (median, interval) and attack risk
    (``attack_accuracy``, ``attack_advantage``; ``None`` when no attribute is sampled)."""

    protocol: str
    spec: str
    eps_report: float
    eps_attribute: float
    error: float
    lower: float
    upper: float
    attack_accuracy: float | None
    attack_advantage: float | None
    runs: int


@dataclass
class ProtocolAdvice:
    """The rows ranked by predicted error (``rows``) and by attack risk (``by_risk``: lowest
    advantage first, SPL's none first, ties by error), the recommendation and why."""

    domain: str
    n: int
    eps: float
    bind: str
    truth: str
    rows: list[ProtocolRow]
    by_risk: list[ProtocolRow]
    recommended: ProtocolRow
    reason: str
    skipped: dict[str, str] = field(default_factory=dict)
    seed: Any = 0

    def to_dict(self) -> dict:
        """A JSON-able dictionary."""
        out = asdict(self)
        out["recommended"] = asdict(self.recommended)
        return out


def _round_down(x: float, digits: int = 4) -> float:
    d = Decimal(repr(x))
    q = Decimal(1).scaleb(d.adjusted() - digits + 1)
    return float(d.quantize(q, rounding=ROUND_FLOOR))


def _level(mech: MultiAttributeMechanism, bind: str) -> float:
    return float(mech.epsilon_ldp() if bind == "report" else mech.epsilon_attribute())


def _calibrate(template: str, domain: ProductDomain, target: float, bind: str, prior: str) -> MultiAttributeMechanism:
    """The mechanism of ``template`` whose computed level is at most ``target``, the oracle's ``eps``
    the largest such (bisection on ``log eps``, then rounded down to 4 digits)."""
    def build(e: float) -> MultiAttributeMechanism:
        m = parse(template.format(eps=repr(e), prior=prior), domain)
        if not isinstance(m, MultiAttributeMechanism):  # pragma: no cover - the templates are fixed
            raise LocalPrivError(f"{template}: not a multi-attribute protocol")
        return m
    lo, hi = math.log(target) - 8.0, math.log(target) + 1e-12
    if _level(build(math.exp(hi)), bind) <= target * (1 + 1e-12):
        e = math.exp(hi)
    else:
        for _ in range(60):
            mid = (lo + hi) / 2
            if _level(build(math.exp(mid)), bind) <= target:
                lo = mid
            else:
                hi = mid
        e = math.exp(lo)
    e = _round_down(e)
    mech = build(e)
    while _level(mech, bind) > target * (1 + 1e-12):  # rounding down never raises the level; guard anyway
        e = _round_down(e * 0.999)
        mech = build(e)
    return mech


def advise_protocols(domain: ProductDomain | str, *, eps_ldp: float, n: int, theta: Any = None,
                     rng: np.random.Generator | int = 0, runs: int = 5, bind: str = "report",
                     protocols: Iterable[str] | None = None, truth: str | None = None) -> ProtocolAdvice:
    """Rank the multi-attribute protocols meeting ``eps_ldp`` by predicted marginal error and by the
    sampled-attribute attack's advantage (module docstring).

    Parameters
    ----------
    domain
        A :class:`~localpriv.domains.ProductDomain` (or its text, ``product(a=0..9;b=x,y)``).
    eps_ldp
        The target; what it bounds is ``bind``.
    n
        Users per simulated data set (at most :data:`MAX_ADVICE_USERS`).
    theta
        The joint distribution of the users (flat over the product, row-major); default the
        product of the attributes' marginals, each a Zipf law ``1/(i+1)`` (skewed data, where the
        attack has something to exploit).
    rng, runs
        Seed of the simulations; data sets per protocol (at least 2).
    bind
        ``"report"`` (the whole report's level, default) or ``"attribute"`` (one attribute's).
    protocols
        Restrict to these spec names (``spl``, ``smp``, ``rsfd``, ``rsrfd``).
    truth
        How to describe ``theta`` in the output.

    Returns
    -------
    ProtocolAdvice
        Rows ranked by error and by risk, the recommendation (the lowest error) and why, naming the
        lowest-risk row when it differs.
    """
    if isinstance(domain, str):
        domain = parse_domain(domain)  # type: ignore[assignment]
    if not isinstance(domain, ProductDomain):
        raise LocalPrivError("protocol advice needs a product domain of several attributes, e.g. "
                             "'product(age=0..9;sex=F,M)'")
    eps = check_eps(eps_ldp, "eps_ldp")
    n = check_int(n, "n (the number of users)", minimum=1)
    if n > MAX_ADVICE_USERS:
        raise LocalPrivError(f"n = {n:,} is above the limit of {MAX_ADVICE_USERS:,} simulated users")
    runs = check_int(runs, "runs", minimum=2)
    if bind not in ("report", "attribute"):
        raise LocalPrivError(f"bind must be 'report' or 'attribute', got {bind!r}")
    gen = check_rng(rng)
    if theta is None:
        margs = [1.0 / np.arange(1, s + 1) for s in domain.shape]
        margs = [m / m.sum() for m in margs]
        joint = margs[0]
        for m in margs[1:]:
            joint = np.multiply.outer(joint, m)
        p = joint.reshape(-1)
        truth = truth or "independent attributes, each Zipf 1/(i+1)"
    else:
        p = np.asarray(theta, dtype=float).reshape(-1)
        if p.size != domain.size or np.any(p < 0) or not np.isfinite(p).all() or p.sum() <= 0:
            raise LocalPrivError(f"theta needs {domain.size:,} non-negative numbers (the joint), not all zero")
        p = p / p.sum()
        truth = truth or "the given distribution"
    tensor = p.reshape(domain.shape)
    marg = [tensor.sum(axis=tuple(i for i in range(domain.d) if i != j)) for j in range(domain.d)]
    prior_vals = [np.maximum(m, PRIOR_FLOOR) / np.maximum(m, PRIOR_FLOOR).sum() for m in marg]
    prior = "[" + ",".join("[" + ",".join(f"{v:.6g}" for v in pv) + "]" for pv in prior_vals) + "]"
    wanted = None if protocols is None else set(protocols)
    rows: list[ProtocolRow] = []
    skipped: dict[str, str] = {}
    for template in PROTOCOLS:
        name = template.split("(", 1)[0]
        if wanted is not None and name not in wanted:
            continue
        label = template.split("(eps")[0].replace("(", " with ")
        try:
            mech = _calibrate(template, domain, eps, bind, prior)
        except LocalPrivError as exc:
            skipped[label] = str(exc)
            continue
        errors = []
        for _ in range(runs):  # over runs, not users
            x = gen.choice(domain.size, size=n, p=p)
            est = mech.marginal_frequencies(mech.sample(x, gen))
            errors.append(float(np.mean([0.5 * np.abs(project_simplex(f) - t).sum() for f, t in zip(est, marg)])))
        acc = adv = None
        if mech.kind != "spl":
            x = gen.choice(domain.size, size=n, p=p)
            attack = sampled_attribute_attack(mech, x, gen, marginals=marg)
            acc, adv = attack.accuracy, attack.advantage
        e = np.asarray(errors)
        rows.append(ProtocolRow(label, str(mech), float(mech.epsilon_ldp()), float(mech.epsilon_attribute()),
                                float(np.median(e)), float(e.min()), float(e.max()), acc, adv, runs))
    if not rows:
        raise LocalPrivError("no protocol could be evaluated: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    rows.sort(key=lambda r: r.error)
    by_risk = sorted(rows, key=lambda r: (-1.0 if r.attack_advantage is None else r.attack_advantage, r.error))
    best, safest = rows[0], by_risk[0]
    risk = ("no attribute is sampled" if best.attack_advantage is None
            else f"the attack names the sampled attribute with advantage {best.attack_advantage:.2f}")
    reason = f"lowest predicted marginal error ({best.error:.4g} TV); {risk}"
    if safest is not best:
        what = ("samples no attribute" if safest.attack_advantage is None
                else f"has the lowest attack advantage ({safest.attack_advantage:.2f})")
        reason += f"; {safest.protocol} {what} at error {safest.error:.4g}"
    return ProtocolAdvice(domain.spec(), n, eps, bind, truth, rows, by_risk, best, reason, skipped,
                          rng if isinstance(rng, int) else None)
