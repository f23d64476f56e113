"""The one EM engine behind IBU (seed 001 Algorithm 1) and GIBU (seed 003 Algorithm 1).

Observations come as likelihood blocks ``G^A`` (``k x m_A``; ``G^A[x, j] = P(z_j | x)`` for the
distinct reports ``z_j`` of mechanism ``A``, seen ``c_j`` times). One iteration is::

    theta'_x = (1/n) * theta_x * sum_A sum_j c_j G^A[x, j] / (theta @ G^A)_j

which for a single mechanism is exactly IBU's update
``theta'_x = sum_z q_z theta_x M_xz / sum_u theta_u M_uz`` and for many is GIBU's. The engine only
asks each block for ``theta @ G`` and ``G @ w``, so structured channels make it faster without it
knowing why. Its cost per iteration is independent of the number of users ``n``.

The log-likelihood is seed 001 Eq. (2), ``L(theta) = sum_A sum_j c_j log (theta @ G^A)_j``, with
terms of zero count left out (``0 log 0 = 0``). The stopping rule is the seed's:
``|L(theta^t) - L(theta^{t-1})| < delta``, with an iteration cap whose hit is reported.

Acceleration (``accelerate="squarem"``): the SQUAREM scheme of Varadhan and Roland (2008,
Scand. J. Statist. 35:335-353, scheme S3) applied to the EM map ``F``. From ``theta`` one cycle
computes ``theta1 = F(theta)``, ``theta2 = F(theta1)``, ``r = theta1 - theta``,
``v = theta2 - theta1 - r`` and the step ``alpha = -||r|| / ||v||`` (kept in ``[-alpha_max, -1]``;
``alpha = -1`` gives ``theta2``), extrapolates ``theta' = theta - 2 alpha r + alpha^2 v`` and
stabilizes with one more EM step ``F(theta')``. Safeguards (ours):

* feasibility: while ``theta'`` leaves the simplex's relative interior (a coordinate that is
  positive in ``theta`` becomes ``<= 0``), ``alpha`` is moved halfway towards ``-1``;
* monotonicity: if ``L(theta') < L(theta2)`` the cycle falls back to the plain EM iterate
  ``theta2``, so ``L`` never decreases from cycle to cycle and every result is an EM image (a
  distribution);
* same certificate as plain EM: once a cycle changes ``L`` by less than ``delta``, plain EM steps
  follow until one plain step changes ``L`` by less than ``delta`` -- the stopping rule of seed 001
  Algorithm 1 is what the returned estimate satisfies, whichever scheme was used.

``alpha_max`` starts at 4, is multiplied by 4 each time the step reaches it and divided by 4 (not
below 4) after a cycle whose extrapolation was rejected (after at most ``MAX_BACKTRACK`` halvings
of ``alpha`` towards -1); ``theta'`` is floored at ``FLOOR * theta2`` (coordinates heading to 0
stay positive, so none is lost for good) and renormalized. ``iterations`` counts evaluations of the
EM map, so plain and accelerated costs compare directly.

Newton finish (``accelerate="newton"``): SQUAREM cycles as above, and after cycles 8, 32, 128, ...
an attempt of :func:`localpriv.estimators.newton.newton_finish` (an active-set Newton method on
the coordinates that stay positive, certified by the Karush-Kuhn-Tucker conditions of the concave
log-likelihood). A certified point (its ``L`` at least the current one) replaces the iterate and
the finishing phase of plain EM steps follows, so the result is again an EM iterate that meets the
stopping rule; an attempt that fails or runs over its budget of products leaves SQUAREM to go on.
Offered when every block is linear in ``theta`` and has ``hessian_diagonal`` (dense blocks, k-RR,
support counts, support blocks); otherwise the scheme is plain SQUAREM and says so
(``EMResult.scheme``). ``EMResult.products`` counts the Newton finish's products (a forward
or backward product of every block, about half an EM evaluation each).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .._validation import LocalPrivError, check_distribution
from ..mechanisms.base import LikelihoodBlock
from .newton import newton_finish, supports_newton

__all__ = ["EMResult", "Penalty", "em", "log_likelihood", "SCHEMES", "STOPPING_RULE", "STOPPING_RULES"]

#: acceleration schemes accepted by :func:`em` (``None`` means plain EM)
SCHEMES = ("none", "squarem", "newton")
#: SQUAREM cycles after which the "newton" scheme attempts its finish (then every 4x as many)
NEWTON_FIRST = 8
#: the stopping rule of seed 001 Algorithm 1, as written in every estimate's settings
STOPPING_RULE = "|L(t)-L(t-1)| < delta"
#: the stopping rules accepted by :func:`em` and how estimates name them
#: extrapolated coordinates below ``FLOOR * F(F(theta))`` are reset to it (see :func:`em`)
FLOOR = 0.01
#: at most this many step-length halvings per SQUAREM cycle before falling back to plain EM
MAX_BACKTRACK = 6
#: floor of every EM iterate (keeps arithmetic out of subnormal floats; see _em_step)
TINY = 1e-280
STOPPING_RULES = {"loglik": STOPPING_RULE, "max_abs": "max|theta(t)-theta(t-1)| < delta"}


def _stop_value(rule, th_old, th_new, L_old, L_new) -> float:
    if rule == "loglik":
        return abs(L_new - L_old)
    return float(np.max(np.abs(th_new - th_old)))


class Penalty:
    """A regularized form of the EM map, for the estimators of :mod:`localpriv.estimators.regularized`.

    The E-step is the engine's (``grad_x = sum_A sum_j c_j G^A[x, j] / (theta @ G^A)_j``, so that
    ``sum_x theta_x grad_x = n``); a penalty replaces the M-step ``theta_x grad_x / n`` by
    :meth:`mstep` (for a Dirichlet prior, ``(theta_x grad_x + a_x) / (n + sum a)``; for EMS, a
    smoothing of the plain M-step). :meth:`value` is the log-penalty added to ``L`` when the map
    ascends a penalized likelihood (MAP); ``None`` when it ascends none (EMS): then the engine runs
    plain iterations only, stopped on ``max_abs``.
    """

    def mstep(self, theta: np.ndarray, grad: np.ndarray, n: float) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def value(self, theta: np.ndarray) -> float | None:  # pragma: no cover
        return None


@dataclass
class EMResult:
    theta: np.ndarray
    loglik: float
    iterations: int
    converged: bool
    trace: list[float] = field(default_factory=list)
    scheme: str = "none"
    cycles: int = 0
    products: int = 0


def _forward_all(blocks: Sequence[LikelihoodBlock], theta: np.ndarray) -> list[np.ndarray]:
    return [b.forward(theta) for b in blocks]


def _live(b) -> np.ndarray | None:
    """Indices of the reports with a positive count (``None`` when all are), cached on the block."""
    cached = getattr(b, "_em_live", False)
    if cached is False or getattr(b, "_em_live_n", -1) != b.counts.size:
        pos = b.counts > 0
        cached = None if pos.all() else np.flatnonzero(pos)
        try:
            b._em_live, b._em_live_n = cached, b.counts.size
        except AttributeError:  # pragma: no cover - blocks with __slots__
            pass
    return cached


def _loglik_from(blocks, probs) -> float:
    """``sum_j c_j log p_j`` over the reports seen; ``-inf`` if one of them has probability <= 0.

    Callers inside the engine run under ``np.errstate(divide="ignore", invalid="ignore")``: a zero
    probability gives ``log 0 = -inf`` (a negative one ``nan``), both mapped to ``-inf``.
    """
    total = 0.0
    for b, p in zip(blocks, probs):
        live = _live(b)
        c = b.counts if live is None else b.counts[live]
        pl = p if live is None else p[live]
        if pl.size == 0:
            continue
        total += float(c @ np.log(pl))
    return -math.inf if math.isnan(total) else total


def log_likelihood(blocks: Sequence[LikelihoodBlock], theta) -> float:
    """``L(theta)`` of seed 001 Eq. (2) for the observations in ``blocks``."""
    theta = np.asarray(theta, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _loglik_from(blocks, _forward_all(blocks, theta))


def _check_observable(blocks, probs):
    for b, p in zip(blocks, probs):
        impossible = (b.counts > 0) & (p <= 0)
        if impossible.any():
            raise LocalPrivError(
                f"{int(impossible.sum())} observed report(s) have probability 0 under the mechanism "
                "for every input: the reports do not come from this mechanism"
            )


def em_step(blocks, theta, probs, n):
    """One EM (IBU/GIBU) update from ``theta`` and the forward products ``probs``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _em_step(blocks, theta, probs, n)


def _em_step(blocks, theta, probs, n, penalty=None):
    grad = None
    for b, p in zip(blocks, probs):
        live = _live(b)
        if live is None:
            w = b.counts / p
        else:
            w = np.zeros_like(p)
            w[live] = b.counts[live] / p[live]
        g = b.backward(w)
        grad = g if grad is None else grad + g
    if penalty is not None:  # a regularized M-step (MAP, smoothing): see Penalty
        new = np.array(penalty.mstep(theta, grad, n), dtype=float)
    else:
        new = theta * grad
        s = new.sum()
        if s > 0:
            new /= s
        else:
            new /= n
    # coordinates on their way to 0 stop at TINY: below ~1e-308 floats turn subnormal and every
    # product touching them runs ~10-100x slower; the change to L and to theta is < k * 1e-280
    np.maximum(new, TINY, out=new)
    return new


def em(
    blocks: Sequence[LikelihoodBlock],
    k: int,
    *,
    theta0=None,
    delta: float = 1e-6,
    max_iter: int = 10_000,
    callback: Callable[[int, np.ndarray, float], None] | None = None,
    keep_trace: bool = False,
    accelerate: str | None = None,
    stop: str = "loglik",
    penalty: Penalty | None = None,
) -> EMResult:
    """Run EM to a maximum-likelihood estimate.

    Parameters
    ----------
    blocks : sequence of LikelihoodBlock
        The observations, one block per mechanism.
    k : int
        Size of the input domain.
    theta0 : array, optional
        Start; must have full support (seed 001 Algorithm 1). Uniform by default.
    delta : float
        Stop when ``|L(theta^t) - L(theta^{t-1})| < delta`` (total log-likelihood, Eq. 2).
    max_iter : int
        Iteration cap; reaching it sets ``converged=False``.
    callback : callable, optional
        ``callback(t, theta, L)`` after each iteration (progress bars).
    keep_trace : bool
        Keep the log-likelihood of every iterate in ``EMResult.trace``.
    accelerate : {None, "none", "squarem", "newton"}
        ``"squarem"`` runs the monotone SQUAREM scheme described in the module docstring
        (same stopping rule, same guarantees); ``"newton"`` adds the certified Newton finish;
        ``None``/``"none"`` is plain EM.
    stop : {"loglik", "max_abs"}
        ``"loglik"`` (default) is seed 001 Algorithm 1's ``|L(t) - L(t-1)| < delta``;
        ``"max_abs"`` stops when ``max_x |theta_x(t) - theta_x(t-1)| < delta`` (the rule of other
        libraries' IBU, used to compare at the same tolerance; with many reports ``L`` is large
        and a tiny ``delta`` on it is below floating-point resolution).
    penalty : Penalty, optional
        A regularized M-step (see :class:`Penalty`); ``L`` then means the penalized objective
        ``L + penalty.value(theta)``. The Newton finish is not offered; a penalty without an
        objective (``value`` is None) runs plain iterations stopped on ``max_abs``.
    """
    if stop not in STOPPING_RULES:
        raise LocalPrivError(f"unknown stopping rule {stop!r}; choose one of {', '.join(STOPPING_RULES)}")
    scheme = "none" if accelerate is None else str(accelerate).lower()
    if scheme not in SCHEMES:
        raise LocalPrivError(f"unknown acceleration {accelerate!r}; choose one of {', '.join(SCHEMES)}")
    if not blocks:
        raise LocalPrivError("no observations to estimate from")
    if delta <= 0:
        raise LocalPrivError(f"delta must be > 0, got {delta}")
    if max_iter < 1:
        raise LocalPrivError(f"max_iter must be >= 1, got {max_iter}")
    theta = (np.full(k, 1.0 / k) if theta0 is None
             else check_distribution(theta0, k=k, name="starting distribution", full_support=True).copy())
    n = float(sum(b.counts.sum() for b in blocks))
    probs = _forward_all(blocks, theta)
    _check_observable(blocks, probs)
    trace = []
    if penalty is not None:
        if penalty.value(theta) is None:  # no objective: plain iterations of the map, on theta
            scheme, stop = "none", "max_abs"
        elif scheme == "newton":
            scheme = "squarem"
    objective = _objective(blocks, penalty)

    def record(t, th, ll):
        if keep_trace:
            trace.append(ll)
        if callback is not None:
            callback(t, th, ll)

    # one floating-point context for the whole run (zero probabilities are handled explicitly)
    with np.errstate(divide="ignore", invalid="ignore"):
        L = objective(theta, probs)
        if keep_trace:
            trace.append(L)
        if scheme in ("squarem", "newton"):
            newton = scheme == "newton" and supports_newton(blocks)
            return _squarem(blocks, theta, probs, L, n, delta, max_iter, record, trace, stop, newton,
                            penalty, objective)
        theta, L, t, converged = _plain_em(blocks, theta, probs, L, n, delta, max_iter, stop, 0, record,
                                           penalty, objective)
    return EMResult(theta, L, t, converged, trace)


def _objective(blocks, penalty):
    """``(theta, probs) -> L``, or the penalized ``L + penalty.value(theta)``."""
    if penalty is None:
        return lambda theta, probs: _loglik_from(blocks, probs)

    def penalized(theta, probs):
        v = penalty.value(theta)
        return _loglik_from(blocks, probs) + (0.0 if v is None else float(v))
    return penalized


def _plain_em(blocks, theta, probs, L, n, delta, max_iter, stop, t, record, penalty=None, objective=None):
    """Plain EM steps from iteration ``t`` until the stopping rule holds or ``max_iter``."""
    objective = objective or _objective(blocks, None)
    while t < max_iter:
        old = theta
        theta = _em_step(blocks, theta, probs, n, penalty)
        t += 1
        probs = _forward_all(blocks, theta)
        L_new = objective(theta, probs)
        record(t, theta, L_new)
        done = _stop_value(stop, old, theta, L, L_new) < delta
        L = L_new
        if done:
            return theta, L, t, True
    return theta, L, t, False


def _squarem(blocks, theta, probs, L, n, delta, max_iter, record, trace, stop, newton=False,
             penalty=None, objective=None) -> EMResult:
    """SQUAREM-accelerated EM (see the module docstring); ``iterations`` = EM-map evaluations."""
    t = 0
    cycles = 0
    alpha_max = 4.0
    products = 0
    next_newton = NEWTON_FIRST if newton else None

    # ---- accelerated phase -------------------------------------------------------------------
    while t + 2 <= max_iter:
        th1 = _em_step(blocks, theta, probs, n, penalty)
        p1 = _forward_all(blocks, th1)
        th2 = _em_step(blocks, th1, p1, n, penalty)
        p2 = _forward_all(blocks, th2)
        t += 2
        L2 = objective(th2, p2)
        r = th1 - theta
        v = th2 - th1 - r
        nr, nv = math.sqrt(r @ r), math.sqrt(v @ v)
        new, pnew, Lnew = th2, p2, L2
        if nv > 0 and nr > 0 and t < max_iter:
            alpha = max(-nr / nv, -alpha_max)
            if alpha <= -alpha_max:
                alpha_max *= 4.0  # the step reached its cap: allow longer steps next cycle
            accepted = False
            # backtracking: move alpha halfway towards -1 until L(theta') >= L(theta2)
            for trial in range(MAX_BACKTRACK):
                if alpha >= -1.0:
                    break
                cand = theta - 2.0 * alpha * r + alpha * alpha * v
                # coordinates pushed (nearly) out of the simplex are heading to 0: put them at a
                # fraction of their plain-EM value (keeps the support: no coordinate lost for good)
                cand = np.maximum(cand, FLOOR * th2)
                cand /= cand.sum()
                pc = _forward_all(blocks, cand)
                Lc = objective(cand, pc)
                if Lc >= L2:  # -inf (an impossible report) never passes
                    th3 = _em_step(blocks, cand, pc, n, penalty)
                    p3 = _forward_all(blocks, th3)
                    L3 = objective(th3, p3)
                    t += 1
                    if L3 >= L2:  # always true for EM from cand (Lc >= L2); kept as a guard
                        new, pnew, Lnew = th3, p3, L3
                        accepted = True
                        if trial:  # a shorter step was needed: cap the next ones there
                            alpha_max = max(4.0, -alpha)
                    break
                alpha = (alpha - 1.0) / 2.0
                if alpha > -1.0 - 1e-3:
                    alpha = -1.0
            if not accepted:
                alpha_max = max(4.0, alpha_max / 4.0)
        cycles += 1
        done = _stop_value(stop, theta, new, L, Lnew) < delta
        theta, probs, L = new, pnew, Lnew
        record(t, theta, L)
        if done:
            break
        if next_newton is not None and cycles >= next_newton:
            next_newton *= 4
            fin = newton_finish(blocks, theta, n)
            products += fin.products
            if fin.certified and fin.loglik >= L:  # EM steps from it verify the stopping rule
                theta, probs, L = fin.theta, _forward_all(blocks, fin.theta), fin.loglik
                break
    # ---- finishing phase: plain EM until one plain step meets the seed's rule ---------------
    theta, L, t, converged = _plain_em(blocks, theta, probs, L, n, delta, max_iter, stop, t, record,
                                       penalty, objective)
    return EMResult(theta, L, t, converged, trace, scheme="newton" if newton else "squarem", cycles=cycles,
                    products=products)
