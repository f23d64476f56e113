"""Privacy amplification by shuffling: the central ``(eps, delta)`` level of ``n`` shuffled reports.

A shuffler between the devices and the collector releases the multiset of the ``n`` reports of an
``eps0``-LDP mechanism. Feldman, McMillan and Talwar [FMT21]_ show that the shuffled release is
``(eps, delta)``-DP with ``eps`` far below ``eps0``. Two bounds are computed here, both from
``eps0``, the level *computed from the mechanism's channel* (:meth:`Mechanism.epsilon_ldp`):

* ``"closed-form"`` -- [FMT21]_ Theorem 3.1: for ``eps0 <= log(n / (16 log(2/delta)))``::

      eps = log(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 log(4/delta)) / sqrt(n) + 8 e^eps0 / n))

* ``"numerical"`` -- the "clones" reduction of [FMT21]_ (Theorem 3.2): with ``q = e^-eps0``,
  ``r = e^eps0 / (e^eps0 + 1)``, ``C ~ Bin(n - 1, q)``, ``A ~ Bin(C, 1/2)``, ``D ~ Bern(r)``, the
  shuffled release is ``(eps, delta)``-DP whenever the hockey-stick divergence
  ``D_{e^eps}(P || Q) = sum_o max(0, P(o) - e^eps Q(o)) <= delta`` between
  ``P = (A + D, C - A + 1 - D)`` and ``Q = (A + 1 - D, C - A + D)`` (the divergence is symmetric:
  swapping the two coordinates swaps ``P`` and ``Q``). An outcome is ``(j, c)`` (``j`` the first
  coordinate, ``c + 1`` the sum) and ``P(j, c) / Q(j, c) = ((c+1-j) + e^eps0 j) / (e^eps0 (c+1-j) + j)``
  increases with ``j``; so for each ``c`` the outcomes with ``P > e^eps Q`` are the tail
  ``j >= m_c``, ``m_c = floor(t_c) + 1``, ``t_c = (c+1) (e^eps - e^-eps0) / ((1 - e^-eps0)(e^eps + 1))``,
  and with ``S = Pr[Bin(c, 1/2) >= m_c]``, ``b = Pr[Bin(c, 1/2) = m_c - 1]``::

      delta(eps) = sum_c Pr[C = c] * ((1 - e^eps) S + (r - e^eps (1 - r)) b)

  exactly -- no sum over ``j``. ``delta(eps)`` decreases in ``eps`` and ``delta(eps0) = 0``; ``eps``
  is found by bisection on ``[0, eps0]`` and the upper end is returned (``delta(eps) <= delta``).

Cost. One evaluation of ``delta(eps)`` takes one binomial tail and one binomial probability per
``c`` (SciPy, vectorized, no overflow: the tails are computed by the regularized incomplete beta
function, never by ``e^eps0`` or factorials); ``c`` runs over the central window of ``Bin(n-1, q)``
holding all but ``tau = 1e-9 delta`` of its mass, and that dropped mass is *added* to ``delta(eps)``
(an upper bound, since ``max(0, P - e^eps Q) <= P``). That is ``O(min(n, sqrt(n q log(1/tau))))``
operations per evaluation -- at most ``O(n)`` -- and ``O(log2(eps0 / tol))`` evaluations.

References
----------
.. [FMT21] V. Feldman, A. McMillan, K. Talwar, "Hiding Among the Clones: A Simple and Nearly
   Optimal Analysis of Privacy Amplification by Shuffling", FOCS 2021 (arXiv:2012.12803),
   Theorems 3.1 and 3.2 and the numerical bound of their section 5 / public calculator.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from localpriv.mechanisms import Mechanism
from localpriv.utils.validation import LocalPrivError, check_int

__all__ = ["shuffle_epsilon", "shuffle_delta", "closed_form_epsilon", "closed_form_applies", "shuffle_report",
           "largest_local_epsilon", "MAX_LOCAL_EPSILON"]

#: Largest number of reports accepted (beyond, the binomial window is still small, but the count
#: of reports of one release is not plausible).
MAX_N = 10 ** 12
#: Tolerance of the bisection on ``eps``.
TOL = 1e-9
#: Largest local level :func:`largest_local_epsilon` searches (beyond it the local level hides
#: practically nothing on its own).
MAX_LOCAL_EPSILON = 20.0
#: Share of ``delta`` left to the dropped tails of ``C`` (added to the computed divergence).
TAIL_SHARE = 1e-9


def _eps0_of(mech_or_eps0: Mechanism | float) -> float:
    """The local level: computed from the mechanism's channel, or a level already computed."""
    if isinstance(mech_or_eps0, Mechanism):
        eps0 = float(mech_or_eps0.epsilon_ldp())
        what = f"the LDP level of {mech_or_eps0} (computed from its channel)"
    elif isinstance(mech_or_eps0, (bool, np.bool_)) or not isinstance(mech_or_eps0, (int, float, np.number)):
        raise LocalPrivError(f"shuffle: expected a mechanism or its computed LDP level, got {mech_or_eps0!r}")
    else:
        eps0 = float(mech_or_eps0)
        what = "eps0"
    if not math.isfinite(eps0) or eps0 < 0:
        raise LocalPrivError(f"shuffle: {what} is {eps0}; amplification needs a finite LDP level >= 0")
    return eps0


def _check(n: object, delta: object) -> tuple[int, float]:
    n_ = check_int(n, "n (number of shuffled reports)", minimum=1, maximum=MAX_N)
    if isinstance(delta, (bool, np.bool_)) or not isinstance(delta, (int, float, np.number)):
        raise LocalPrivError(f"shuffle: delta must be a number in (0, 1), got {delta!r}")
    d = float(delta)
    if not 0.0 < d < 1.0:
        raise LocalPrivError(f"shuffle: delta must be in (0, 1), got {d}")
    return n_, d


def shuffle_delta(eps0: float, n: int, eps: float, tail: float = 0.0) -> float:
    """The hockey-stick divergence ``D_{e^eps}(P || Q)`` of the clones reduction [FMT21]_.

    ``delta(eps) = sum_c Pr[C = c] ((1 - e^eps) S_c + (r - e^eps (1 - r)) b_c)`` with
    ``C ~ Bin(n-1, e^-eps0)``, ``r = e^eps0/(e^eps0+1)``, ``S_c = Pr[Bin(c, 1/2) >= m_c]``,
    ``b_c = Pr[Bin(c, 1/2) = m_c - 1]``, ``m_c = floor((c+1)(e^eps - e^-eps0)/((1-e^-eps0)(e^eps+1))) + 1``
    (module docstring).

    Parameters
    ----------
    eps0 : float
        Local level (>= 0, finite).
    n : int
        Number of shuffled reports (>= 1).
    eps : float
        Candidate central level (>= 0).
    tail : float, default 0
        With ``tail > 0``, ``c`` runs over the central window of ``Bin(n-1, q)`` leaving out at most
        ``tail`` of its mass on each side, and the mass left out is added (the result stays an upper
        bound); with 0, every ``c`` in ``0..n-1`` (cost ``O(n)``).

    Returns
    -------
    float
        ``delta(eps)`` (an upper bound within ``tail``; exact up to rounding with ``tail = 0``).
    """
    if eps0 <= 0.0 or eps >= eps0:
        return 0.0  # P = Q for eps0 = 0; P/Q <= e^eps0 always
    q = math.exp(-eps0)
    r = 1.0 / (1.0 + q)
    dropped = 0.0
    lo, hi = 0, n - 1
    if tail > 0.0 and n > 1:
        c_dist = stats.binom(n - 1, q)
        lo = max(0, int(c_dist.ppf(tail)) - 1)
        # Bernstein's bound caps the upper end: SciPy's isf gives n - 1 for tails it cannot
        # bracket (1e-17 at n = 10^6, q = 4.5e-5), which made the window the whole range
        mu, lt = (n - 1) * q, math.log(1.0 / tail)
        bern = int(math.ceil(mu + lt / 3.0 + math.sqrt((lt / 3.0) ** 2 + 2.0 * mu * lt))) + 1
        hi = min(n - 1, int(c_dist.isf(tail)) + 1, bern)
        dropped = float(c_dist.cdf(lo - 1)) + float(c_dist.sf(hi))
    c = np.arange(lo, hi + 1, dtype=np.float64)
    w = stats.binom.pmf(c, n - 1, q)
    e = math.exp(eps)
    t = (c + 1.0) * (e - q) / ((1.0 - q) * (e + 1.0))
    m = np.floor(t) + 1.0
    s = stats.binom.sf(m - 1.0, c, 0.5)        # Pr[Bin(c, 1/2) >= m]
    b = stats.binom.pmf(m - 1.0, c, 0.5)       # Pr[Bin(c, 1/2) = m - 1]
    term = np.maximum((1.0 - e) * s + (r - e * (1.0 - r)) * b, 0.0)
    return float(np.dot(w, term)) + dropped


def closed_form_applies(eps0: float, n: int, delta: float) -> bool:
    """Whether [FMT21]_ Theorem 3.1 applies: ``eps0 <= log(n / (16 log(2/delta)))``."""
    bound = n / (16.0 * math.log(2.0 / delta))
    return bound > 1.0 and eps0 <= math.log(bound)


def closed_form_epsilon(eps0: float, n: int, delta: float) -> float:
    """[FMT21]_ Theorem 3.1, ``log(1 + (e^eps0-1)/(e^eps0+1) (8 sqrt(e^eps0 log(4/delta))/sqrt(n) + 8 e^eps0/n))``.

    Refuses (one line) when ``eps0 > log(n / (16 log(2/delta)))``; there ``e^eps0 < n``, so no
    overflow. Never above ``eps0``: the smaller of the two is returned.
    """
    if not closed_form_applies(eps0, n, delta):
        raise LocalPrivError(
            f"shuffle: the closed form (FMT Theorem 3.1) needs eps0 <= log(n / (16 log(2/delta))); "
            f"eps0 = {eps0:.6g}, n = {n}, delta = {delta:g}; use method='numerical'")
    e0 = math.exp(eps0)
    inner = 8.0 * math.sqrt(e0 * math.log(4.0 / delta)) / math.sqrt(n) + 8.0 * e0 / n
    return min(eps0, math.log1p(math.tanh(eps0 / 2.0) * inner))  # (e^x - 1)/(e^x + 1) = tanh(x/2)


def _numerical(eps0: float, n: int, delta: float) -> float:
    tail = TAIL_SHARE * delta

    def f(eps: float) -> float:
        return shuffle_delta(eps0, n, eps, tail=tail)

    if eps0 == 0.0 or f(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, eps0  # f(lo) > delta >= f(hi) = 0
    while hi - lo > TOL * max(1.0, eps0):
        mid = 0.5 * (lo + hi)
        if f(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def shuffle_epsilon(mech_or_eps0: Mechanism | float, n: int, delta: float, method: str = "numerical") -> float:
    """Central ``eps`` of ``n`` shuffled reports of an ``eps0``-LDP mechanism, at ``delta`` [FMT21]_.

    ``method="numerical"``: the smallest ``eps`` (within ``1e-9 max(1, eps0)``, rounded up) with
    ``D_{e^eps}(P || Q) <= delta`` for the clones reduction (Theorem 3.2; :func:`shuffle_delta`),
    ``O(min(n, sqrt(n e^-eps0 log(1/delta))))`` per evaluation, ``O(log(eps0/1e-9))`` evaluations.
    ``method="closed-form"``: Theorem 3.1,
    ``eps = log(1 + (e^eps0 - 1)/(e^eps0 + 1) (8 sqrt(e^eps0 log(4/delta))/sqrt(n) + 8 e^eps0/n))``,
    valid for ``eps0 <= log(n / (16 log(2/delta)))``. The numerical bound is never above the
    closed form (it bounds the same divergence without the concentration inequalities).

    Parameters
    ----------
    mech_or_eps0 : Mechanism or float
        The local mechanism -- its level is *computed* from its channel (``mech.epsilon_ldp()``) --
        or such a computed level.
    n : int
        Number of shuffled reports, ``1 <= n <= 10^12``.
    delta : float
        Central ``delta``, in ``(0, 1)``.
    method : {"numerical", "closed-form"}
        Which bound.

    Returns
    -------
    float
        The central ``eps`` (never above ``eps0``).

    Raises
    ------
    LocalPrivError
        ``n``, ``delta`` or ``eps0`` out of range (infinite level, e.g.), an unknown method, or the
        closed form outside its range.

    References
    ----------
    .. [FMT21] Feldman, McMillan, Talwar, "Hiding Among the Clones", FOCS 2021.

    Examples
    --------
    >>> round(shuffle_epsilon(4.0, 10**5, 1e-6), 2)
    0.17
    """
    if method not in ("numerical", "closed-form"):
        raise LocalPrivError(f"shuffle: method must be 'numerical' or 'closed-form', got {method!r}")
    n_, d = _check(n, delta)
    eps0 = _eps0_of(mech_or_eps0)
    if method == "closed-form":
        return closed_form_epsilon(eps0, n_, d)
    return _numerical(eps0, n_, d)


def shuffle_report(mech: Mechanism, n: int, delta: float) -> dict[str, Any]:
    """Both central levels of ``n`` shuffled reports of ``mech`` (what ``localpriv analyze --shuffle`` prints).

    Keys: the local level computed from the channel, the numerical bound and the closed form of
    [FMT21]_ side by side (the closed form as a sentence where Theorem 3.1 does not apply).
    """
    n_, d = _check(n, delta)
    eps0 = _eps0_of(mech)
    out: dict[str, Any] = {"shuffle: n reports": n_, "shuffle: delta": d, "shuffle: eps0 (local, from channel)": eps0}
    out["shuffled central eps (numerical, FMT21)"] = _numerical(eps0, n_, d)
    if closed_form_applies(eps0, n_, d):
        out["shuffled central eps (closed form, FMT21 Thm 3.1)"] = closed_form_epsilon(eps0, n_, d)
    else:
        out["shuffled central eps (closed form, FMT21 Thm 3.1)"] = (
            "does not apply (needs eps0 <= log(n / (16 log(2/delta))))")
    return out


def largest_local_epsilon(n: int, central_eps: float, delta: float, tol: float = 1e-4) -> float:
    """The largest local level ``eps0`` whose ``n`` shuffled reports are ``(central_eps, delta)``-DP
    by the numerical bound of [FMT21]_ (:func:`shuffle_epsilon`), searched up to
    ``min(MAX_LOCAL_EPSILON, max(2 central_eps, log(n) + 2))``.

    ``eps0`` meets the target when ``delta(central_eps) <= delta`` for ``eps0``
    (:func:`shuffle_delta`, the dropped tail mass added): one evaluation, the same test as
    ``shuffle_epsilon(eps0, n, delta) <= central_eps``. The central level never exceeds ``eps0``, so
    ``eps0 = central_eps`` always meets it; bisection between that and the upper end (beyond
    ``log(n)`` a report has fewer than one expected clone and amplification fades) to ``tol``
    (relative) returns the end that meets the target. ``O(log(1 / tol))`` evaluations, each
    ``O(min(n, sqrt(n e^-eps0 log(1/delta))))``.
    """
    n_, d = _check(n, delta)
    target = _eps0_of(central_eps)
    if not target > 0.0:
        raise LocalPrivError(f"shuffle: the central target must be a level > 0, got {central_eps!r}")
    tail = TAIL_SHARE * d

    def meets(eps0: float) -> bool:
        return shuffle_delta(eps0, n_, target, tail=tail) <= d

    top = min(MAX_LOCAL_EPSILON, max(2.0 * target, math.log(n_) + 2.0))
    if target >= top:
        return target
    if meets(top):
        return top
    lo, hi = target, top  # meets at lo, not at hi
    while hi - lo > tol * lo:
        mid = 0.5 * (lo + hi)
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return lo
