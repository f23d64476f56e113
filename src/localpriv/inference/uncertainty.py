"""How sure an estimate is: standard errors, confidence intervals and derived statistics.

One module computes the uncertainty of every estimator's :class:`~localpriv.inference.estimate.Estimate`;
the estimate's methods (``est.ci()``, ``est.std_error()``, ``est.mean()``, ``est.quantile(q)``,
``est.cdf()``, ``est.top_k(k)``, ``est.functional(w)``) call it. The method depends on the
estimator, and each states its assumptions (``Uncertainty.assumptions``):

``"fisher"`` -- maximum-likelihood estimates (``ibu``, ``gibu``, ``ibu-exact``, ``ibu-likely``).
    The observed information of the log-likelihood ``L(theta) = sum_j c_j log (theta @ G)_j``
    (seed 001 Eq. 2) is ``I = sum_j c_j G_j G_j^T / p_j^2`` with ``p_j = theta @ G_j``. On the face
    ``S`` of the simplex where the estimate is positive, with the constraint ``sum theta = 1``, the
    asymptotic covariance is ``Cov_S = B - (B 1)(B 1)^T / (1^T B 1)`` with ``B = I_SS^{-1}``
    (the constrained inverse information). Cells on the boundary (estimate 0) get a one-sided
    interval ``[0, u]`` from the quadratic model of the profile log-likelihood: moving mass ``t`` to
    the cell, the others re-optimized, lowers ``L`` by ``lambda t + t^2 / (2 V)``, where
    ``lambda = n - dL/dtheta_x >= 0`` is the cell's Karush-Kuhn-Tucker multiplier and ``V`` its
    variance on the face ``S + {x}``; ``u`` solves ``lambda u + u^2/(2V) = z_{1-a}^2 / 2``
    (at the boundary the likelihood-ratio statistic is a 50:50 mixture of chi^2_0 and chi^2_1,
    Self and Liang 1987, so the one-sided quantile applies). Positive cells get Wald intervals
    ``theta_x +- z sqrt(Cov_xx)`` clipped to ``[0, 1]``. When the MLE sits on a low-dimensional
    face (at most :data:`FACE_MAX_SHARE` of its cells positive, finite channels) the face's
    covariance misstates the spread of functionals such as CDF values (the face changes between
    data sets), and those functionals take the standard deviation of a parametric bootstrap of
    the MLE instead (:meth:`Uncertainty.face_replicates`).
``"linear"`` -- the inversion estimators INV (seed 001 section 7) and MI / Rappor (seed 002). The
    raw inverse ``v`` is linear in the report frequencies, so its covariance is exact:
    ``Cov(v) = M^{-T} (diag(q) - q q^T) M^{-1} / n`` for INV (``q`` the report frequencies) and
    ``Cov(v) = Cov(s) / (n (p* - q*)^2)`` for MI with ``s`` a report's support indicator vector
    (its covariance read from the distinct reports themselves; Wang et al., USENIX Security 2017,
    give its diagonal). Normalization (N) or projection (P) is not linear: intervals come from the
    percentiles of ``post(v*)`` over Gaussian draws ``v* ~ N(v, Cov(v))`` (a parametric bootstrap
    of the post-processing).
``"anchored"`` -- the regularized estimators (``ems``, ``dirichlet``), the default ``auto`` and the
    post-processings of the unbiased estimate (:data:`POSTPROCESSED`: ``norm-sub``, ``base-cut``,
    ``power-ns``, ...). Their bias is
    the price of their accuracy, so an interval centred on them (a bootstrap around the
    regularized fit) under-covers (measured: docs/uncertainty.md, Calibration). Instead the
    maximum-likelihood estimate of the same observations is computed (``ibu``, certified; ``auto``
    computes it on the way and keeps it in ``extra["mle"]``, which is used as is) with its
    ``"fisher"`` intervals, and every interval is widened just enough to contain the regularized
    value: ``[min(l, f(theta_reg)), max(u, f(theta_reg))]`` with ``[l, u]`` the MLE's interval of
    the same quantity ``f``. It contains the MLE's interval, so it covers at least as often, and it
    always contains the reported estimate. Standard errors are the MLE's.
``"profile"`` -- on request (``est.uncertainty("profile")``), for any estimator but the linear ones: an
    anchored uncertainty whose cell intervals are the MLE's profile-likelihood intervals on the
    simplex (:meth:`Uncertainty.profile_cells`, every cell up to :data:`PROFILE_MAX_CELLS`) widened
    to contain the estimate; functionals are the anchored ones. Near 0 the simplex's constraint
    makes them narrower than the Wald or inversion interval (measured: docs/uncertainty.md,
    *Every estimator's intervals*).
``"bootstrap"`` -- every other estimator: a parametric bootstrap. Counts are redrawn from the
    fitted model per mechanism (multinomial over the outputs of a finite channel; otherwise users
    are drawn from the estimate and their reports sampled by the mechanism), the estimator is run
    again (warm-started where it can be), and intervals are percentiles of the replicates.

Derived statistics are linear functionals ``w @ theta`` (mean, CDF values, cell sums) with
variance ``w^T Cov w`` (or their replicates), the variance of the values (delta method), and
quantiles on ordered domains by inverting the confidence band of the CDF: the ``q``-quantile of a
distribution on ``lo..hi`` is read off the CDF interpolated linearly between the points
``x - 1/2`` and ``x + 1/2`` around each value (so quantiles are real numbers, and the true one of a
distribution is defined the same way), and its interval is where the band crosses ``q``.

Cells where the Wald (or inversion) interval is not trusted -- estimate at or within
:data:`BOUNDARY` of ``0`` or ``1``, an unclipped interval reaching outside ``(0, 1)``, a standard
error of 0, or fewer than :data:`SMALL_N` reports -- get profile-likelihood bounds instead
(:func:`profile_bounds`: ``{t: 2 (L_max - max_{theta_x = t} L) <= chi2_1(level)}``, found by
bisection with a constrained EM, a bounded number of EM steps per cell). Intervals of linear
functionals (mean, CDF values) are clipped to ``[min w, max w]``, the range a distribution allows;
quantile intervals lie between the domain's edges by construction. The uncertainty carries
``flags`` (and warns once, :class:`IntervalWarning`) when ``n < SMALL_N`` or when the reports are
improbable under the fitted model (:func:`lack_of_fit`, a G-test with the fit's degrees of freedom).

All intervals are asymptotic (large ``n``); ``localpriv reproduce coverage`` measures how well they
cover on real data, ``localpriv reproduce coverage-small`` at n = 10 to 1,000 on sparse and
concentrated truths.
"""
from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.estimators import estimator_settings
from localpriv.estimators import fit as run
from localpriv.estimators.em_rows import ROWS_MAX_ENTRIES, em_rows
from localpriv.estimators.inv import inverse_vector
from localpriv.estimators.oracles import mi_vector, pure_parameters, support_counts
from localpriv.estimators.result import Fit
from localpriv.likelihood.blocks import LikelihoodBlock
from localpriv.likelihood.packed import PackedSupport
from localpriv.mechanisms import KRR, Mechanism
from localpriv.mechanisms.unary import weighted_gram
from localpriv.utils.interval import Interval, check_level
from localpriv.utils.simplex import clip_normalize, project_simplex
from localpriv.utils.validation import LocalPrivError

__all__ = ["Interval", "Uncertainty", "uncertainty", "fisher_information", "BOUNDARY", "IntervalWarning",
           "profile_bounds", "lack_of_fit", "INTERVAL_REFUSALS", "interval_refusal"]

#: cells below this estimate are treated as on the boundary of the simplex
BOUNDARY = 1e-9
#: a linear functional of a maximum-likelihood estimate takes the interval of the unbiased inverse
#: when that interval is at most this many times wider than the Fisher (Wald) interval
INVERSION_MAX_RATIO = 4.0
#: domains up to this size get the inversion intervals (the covariance is k x k)
INVERSION_MAX_K = 2000
#: observations from up to this many mechanisms get them (one k x k covariance per mechanism)
INVERSION_MAX_BLOCKS = 16
#: draws of the Gaussian / bootstrap replicates by default
DRAWS = 2000
BOOT_REPLICATES = 200
#: the MLE sits on a low-dimensional face of the simplex (a few spikes) when at most this share of
#: its cells is positive; there the face's Fisher standard deviations of functionals are replaced
#: by those of a parametric bootstrap of the MLE (``Uncertainty.face_replicates``)
FACE_MAX_SHARE = 0.25
#: refits of that bootstrap (each a certified MLE of counts redrawn from the estimate)
FACE_REPLICATES = 60
#: profile-likelihood bounds (:func:`profile_bounds`): bisection steps per end, EM steps per point,
#: the EM's stopping gain (log-likelihood units) and the most cells profiled in one call
PROFILE_EVALS = 12
PROFILE_ITERS = 40
PROFILE_TOL = 1e-6
PROFILE_MAX_CELLS = 2000
#: the profiles of all cells are searched at once, one row of a matrix per cell, when the blocks'
#: dense matrices hold at most this many entries (8 MiB); the rows' probabilities are computed in
#: chunks of at most this many entries too. Larger problems search one cell after the other.
PROFILE_DENSE_MAX = 2**20
#: fewer reports than this: asymptotic intervals are not trusted (every cell gets profile bounds
#: and the uncertainty carries the ``small_n`` flag)
SMALL_N = 100
#: the lack-of-fit test (:func:`lack_of_fit`) flags the fit below this p-value
LACK_OF_FIT_P = 1e-3
#: outputs expected fewer times than this are pooled into one cell for that test
LACK_OF_FIT_MIN_EXPECTED = 5.0


#: every way intervals are refused (a one-line LocalPrivError), as a pattern of its message -> when
#: (docs/uncertainty.md, *Every estimator's intervals*); any other failure is a bug
INTERVAL_REFUSALS: dict[str, str] = {
    r"^this estimate does not carry its observations; pass obs=":
        "an estimate built without its observations (Estimate.from_fit of a Fit made by hand)",
    r"^no record of how \S+ was computed; run it through localpriv\.estimate":
        "a bootstrap of an estimate not computed by localpriv.estimate (no record of its call)",
    r"^intervals for \S+ need the reports' supports; use ibu":
        "mi-n / mi-p on reports of a pure oracle that exposes no support function",
    r"^the estimate gives probability 0 to an observed report: no information":
        "an MLE (or the MLE an interval is anchored on) that gives an observed report probability 0",
}


def interval_refusal(message: str) -> str | None:
    """When a refusal with this (one-line) message happens, from :data:`INTERVAL_REFUSALS`; None
    for a message that is not a documented refusal."""
    if "\n" in message:
        return None
    for pattern, when in INTERVAL_REFUSALS.items():
        if re.search(pattern, message):
            return when
    return None


class IntervalWarning(UserWarning):
    """Intervals that may not hold their nominal coverage: too few reports for asymptotic
    intervals, or observations improbable under the fitted model (one line; the same text is in
    ``Uncertainty.flags``)."""


def _quad(W: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``diag(W C W^T)``: the variances of the functionals in the rows of ``W`` (by BLAS)."""
    return np.einsum("ij,ij->i", W @ C, W)


# --------------------------------------------------------------------------------------------
# Observed information
# --------------------------------------------------------------------------------------------
def _gram(block: LikelihoodBlock, w: np.ndarray) -> np.ndarray:
    """``G diag(w) G^T`` (k x k) for one likelihood block: its own method where it has one, else
    ``k`` forward and backward products (one per input)."""
    own = getattr(block, "gram", None)
    if own is not None:
        return np.asarray(own(w), dtype=float)
    G = getattr(block, "G", None)
    if G is not None:
        return (G * w[None, :]) @ G.T
    k = block.k
    out = np.empty((k, k))
    e = np.zeros(k)
    for x in range(k):  # one product per input (k), never per report
        e[x] = 1.0
        out[:, x] = block.backward(w * block.forward(e))
        e[x] = 0.0
    return 0.5 * (out + out.T)


def fisher_information(blocks: Iterable[LikelihoodBlock], theta: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, float]:
    """``(I, g, n)``: the observed information ``I = sum_j c_j G_j G_j^T / p_j^2``, the gradient
    ``g = sum_j c_j G_j / p_j`` of the log-likelihood at ``theta`` and the number of reports."""
    theta = np.asarray(theta, dtype=float)
    k = theta.size
    info = np.zeros((k, k))
    grad = np.zeros(k)
    n = 0.0
    for b in blocks:
        p = b.forward(theta)
        c = b.counts
        live = c > 0
        if np.any(p[live] <= 0):
            raise LocalPrivError("the estimate gives probability 0 to an observed report: no information")
        w1 = np.zeros_like(p)
        w1[live] = c[live] / p[live]
        w2 = np.zeros_like(p)
        w2[live] = c[live] / p[live] ** 2
        grad += b.backward(w1)
        info += _gram(b, w2)
        n += float(c.sum())
    return info, grad, n


def _constrained_cov(info: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Covariance on the face ``S`` under ``sum theta = 1``; also ``B = I_SS^+``, ``a = B 1``, ``1^T B 1``."""
    A = info[np.ix_(S, S)]
    B = np.linalg.pinv(0.5 * (A + A.T), hermitian=True)
    a = B.sum(axis=1)
    beta = float(a.sum())
    cov = B - np.outer(a, a) / beta if beta > 0 else B
    return cov, B, beta, a


# --------------------------------------------------------------------------------------------
# Profile-likelihood bounds of single cells
# --------------------------------------------------------------------------------------------
def _loglik_grad(blocks: list[LikelihoodBlock], theta: np.ndarray) -> tuple[float, np.ndarray]:
    """``(L(theta), dL/dtheta)`` summed over the blocks."""
    total, grad = 0.0, np.zeros(theta.size)
    for b in blocks:
        value, g = b.loglik_and_grad(theta)
        total += value
        grad += g
    return total, grad


def _fixed_em(blocks: list[LikelihoodBlock], start: np.ndarray, x: int, t: float,
              iters: int) -> tuple[float, np.ndarray]:
    """``max L(theta)`` subject to ``theta_x = t`` by at most ``iters`` EM steps from ``start``.

    The E-step is the engine's (``r = theta * dL/dtheta``, the expected counts per input); the
    constrained M-step keeps ``theta_x = t`` and gives the other cells ``theta_y = (1 - t) r_y /
    sum_{z != x} r_z`` (the maximizer of ``sum_y r_y log theta_y`` on that slice), so every step
    raises ``L`` (Dempster, Laird and Rubin 1977). Stops when a step gains less than
    :data:`PROFILE_TOL`. Returns the log-likelihood reached (a lower bound of the profile) and theta.
    """
    th = np.asarray(start, dtype=float).copy()
    th[x] = 0.0
    rest = th.sum()
    if rest <= 0:
        th[:] = 1.0
        th[x] = 0.0
        rest = th.sum()
    th *= (1.0 - t) / rest
    th[x] = t
    prev = -np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(iters):  # a bounded number of EM steps (never a loop over reports)
            value, grad = _loglik_grad(blocks, th)
            if not np.isfinite(value) or value - prev < PROFILE_TOL or t >= 1.0:
                prev = max(prev, value) if np.isfinite(value) else prev
                break
            prev = value
            r = th * np.where(np.isfinite(grad), grad, 0.0)
            r[x] = 0.0
            s = r.sum()
            if s <= 0:
                break
            th = r * ((1.0 - t) / s)
            th[x] = t
        else:
            prev = max(prev, _loglik_grad(blocks, th)[0])
    return prev, th


class _RowLikelihood:
    """``(L(theta_i), dL/dtheta_i)`` for the rows ``theta_i`` of a matrix, from the blocks' dense
    matrices restricted to the seen reports (``P = Theta G``, ``L = log(P) c``,
    ``grad = (c / P) G^T``): the same sums as :func:`_loglik_grad`, one matrix product per block
    for all rows instead of one forward and backward product per row."""

    def __init__(self, blocks: list[LikelihoodBlock]) -> None:
        self.parts = []
        for b in blocks:
            c = np.asarray(b.counts, dtype=float)
            live = np.flatnonzero(c > 0)
            self.parts.append((np.ascontiguousarray(np.asarray(b.dense(), dtype=float)[:, live]), c[live]))
        self.width = max(1, sum(G.shape[1] for G, _ in self.parts))

    def __call__(self, Th: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        value = np.zeros(Th.shape[0])
        grad = np.zeros_like(Th)
        with np.errstate(divide="ignore", invalid="ignore"):
            for G, c in self.parts:
                P = Th @ G
                value += np.log(P) @ c
                grad += (c / P) @ G.T
        return value, grad


def _row_likelihood(blocks: list[LikelihoodBlock]) -> _RowLikelihood | None:
    """The row-wise log-likelihood of ``blocks`` when their dense matrices fit
    :data:`PROFILE_DENSE_MAX` entries (and every block builds one), else ``None``."""
    if not blocks or sum(b.k * b.counts.size for b in blocks) > PROFILE_DENSE_MAX:
        return None
    try:
        return _RowLikelihood(blocks)
    except (LocalPrivError, NotImplementedError):  # a block without a dense matrix
        return None


def _fixed_em_rows(lg: _RowLikelihood, start: np.ndarray, xs: np.ndarray, t: np.ndarray,
                   iters: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_fixed_em` for many cells at once: row ``i`` maximizes ``L`` subject to
    ``theta[xs[i]] = t[i]`` from ``start[i]``, with the same steps and the same stopping rules
    per row (a row that stops is left as it stopped while the others go on)."""
    rows = np.arange(xs.size)
    th = np.array(start, dtype=float)
    th[rows, xs] = 0.0
    rest = th.sum(axis=1)
    empty = rest <= 0
    if empty.any():
        th[empty] = 1.0
        th[rows[empty], xs[empty]] = 0.0
        rest = th.sum(axis=1)
    th *= ((1.0 - t) / rest)[:, None]
    th[rows, xs] = t
    prev = np.full(xs.size, -np.inf)
    active = np.ones(xs.size, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(iters):  # a bounded number of EM steps for all rows (never a loop over reports)
            idx = np.flatnonzero(active)
            if idx.size == 0:
                break
            value, grad = lg(th[idx])
            stop = ~np.isfinite(value) | (value - prev[idx] < PROFILE_TOL) | (t[idx] >= 1.0)
            fin = stop & np.isfinite(value)
            prev[idx[fin]] = np.maximum(prev[idx[fin]], value[fin])
            active[idx[stop]] = False
            go = ~stop
            gi = idx[go]
            prev[gi] = value[go]
            r = th[gi] * np.where(np.isfinite(grad[go]), grad[go], 0.0)
            r[np.arange(gi.size), xs[gi]] = 0.0
            tot = r.sum(axis=1)
            bad = tot <= 0
            active[gi[bad]] = False
            ok = ~bad
            oi = gi[ok]
            th[oi] = r[ok] * ((1.0 - t[oi]) / tot[ok])[:, None]
            th[oi, xs[oi]] = t[oi]
        left = np.flatnonzero(active)  # ran every step: the value of the last iterate
        if left.size:
            prev[left] = np.maximum(prev[left], lg(th[left])[0])
    return prev, th


def _mid(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The next point of the bisection: geometric while the bracket spans more than a factor 4."""
    with np.errstate(invalid="ignore"):
        return np.where(b > 4.0 * a, np.sqrt(a * b), 0.5 * (a + b))


def _profile_rows(lg: _RowLikelihood, theta: np.ndarray, cells: np.ndarray,
                  target: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`profile_bounds`' searches for all ``cells`` at once (one row per cell, the same
    brackets, points and stopping rules as the one-cell search)."""
    r = cells.size
    base = np.broadcast_to(theta, (r, theta.size))
    top = float(lg(theta[None, :])[0][0])
    tx = theta[cells]
    lo, hi = np.zeros(r), np.ones(r)
    best = np.full(r, top)
    l1, _ = _fixed_em_rows(lg, base, cells, np.ones(r), 1)
    up = np.flatnonzero(top - l1 > target)
    if up.size:  # upper ends: bracket [tx, 1]
        a, b, warm = np.maximum(tx[up], 1e-14), np.ones(up.size), base[up]
        for _ in range(PROFILE_EVALS):
            mid = _mid(a, b)
            val, warm = _fixed_em_rows(lg, warm, cells[up], mid, PROFILE_ITERS)
            best[up] = np.maximum(best[up], val)
            out = best[up] - val > target
            a, b = np.where(out, a, mid), np.where(out, mid, b)
        hi[up] = b
    low = np.flatnonzero(tx > BOUNDARY)
    if low.size:  # lower ends: bracket [0, tx]
        l0, _ = _fixed_em_rows(lg, base[low], cells[low], np.zeros(low.size), PROFILE_ITERS)
        best[low] = np.maximum(best[low], l0)
        need = low[best[low] - l0 > target]
        if need.size:
            a, b, warm = np.full(need.size, 1e-14), tx[need], base[need]
            for _ in range(PROFILE_EVALS):
                mid = _mid(a, b)
                val, warm = _fixed_em_rows(lg, warm, cells[need], mid, PROFILE_ITERS)
                out = best[need] - val > target
                a, b = np.where(out, mid, a), np.where(out, b, mid)
            lo[need] = a
    return lo, np.maximum(hi, lo)


def profile_bounds(blocks: list[LikelihoodBlock], theta: npt.ArrayLike, cells: npt.ArrayLike,
                   level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Profile-likelihood (likelihood-ratio) confidence bounds of single cells.

    For a cell ``x`` the profile ``L_p(t) = max {L(theta): theta_x = t}`` of the log-likelihood
    ``L(theta) = sum_j c_j log (theta @ G)_j`` (seed 001 Eq. 2) is concave in ``t``; the interval is
    ``{t: 2 (L(theta_hat) - L_p(t)) <= chi2_1(level)}`` (Wilks 1938; Venzon and Moolgavkar 1988
    for profile bounds). Each end is found by geometric bisection between the estimate and
    ``1`` (upper) or ``10^-14`` (lower; ``0`` when ``L_p(0)`` is inside), every ``L_p(t)`` by the
    EM steps of :func:`_fixed_em` warm-started at the previous point, and the end returned is the
    excluded side of the final bracket (so the interval errs on the wide side, by the bracket's
    width: geometric steps while the bracket spans more than a factor 4, then halving). Unlike the
    Wald interval it needs no quadratic model: it stays honest for cells at or near ``0`` or ``1`` and
    at small ``n``.

    Cost: at most ``2 (PROFILE_EVALS + 1) PROFILE_ITERS`` forward and backward products per cell
    (:data:`PROFILE_EVALS` = 12, :data:`PROFILE_ITERS` = 40: 1,040), and at most
    :data:`PROFILE_MAX_CELLS` cells per call. When the blocks' dense matrices hold at most
    :data:`PROFILE_DENSE_MAX` entries, all cells are searched at once (one row of a matrix per
    cell, the same steps per row: one matrix product per EM step for all cells, in chunks of
    at most :data:`PROFILE_DENSE_MAX` probabilities). Measured on ``k = 100`` with every cell profiled
    (n = 50): 0.8 s under k-RR, 4 s under the geometric mechanism (dense channel); ``est.ci()``
    under k-RR at n = 1,000 on a sparse truth (about 80 cells profiled): 1.3 s (2 busy cores).
    """
    lv = check_level(level)
    theta = np.asarray(theta, dtype=float)
    target = 0.5 * float(stats.chi2.ppf(lv, 1))
    top, _ = _loglik_grad(blocks, theta)
    cells = np.asarray(cells, dtype=int)
    lg = _row_likelihood(blocks) if cells.size else None
    if lg is not None:
        step = max(1, PROFILE_DENSE_MAX // max(lg.width, theta.size))
        parts = [_profile_rows(lg, theta, cells[s:s + step], target) for s in range(0, cells.size, step)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    lo = np.zeros(cells.size)
    hi = np.ones(cells.size)
    for i, x in enumerate(cells):  # one bounded search per cell
        tx = float(theta[x])
        best = top
        # upper end: bracket [tx, 1]
        l1, _ = _fixed_em(blocks, theta, int(x), 1.0, 1)
        if top - l1 > target:
            a, b, warm = max(tx, 1e-14), 1.0, theta
            for _ in range(PROFILE_EVALS):
                mid = float(np.sqrt(a * b)) if b > 4.0 * a else 0.5 * (a + b)
                val, warm = _fixed_em(blocks, warm, int(x), mid, PROFILE_ITERS)
                best = max(best, val)
                if best - val > target:
                    b = mid
                else:
                    a = mid
            hi[i] = b
        # lower end: bracket [0, tx]
        if tx > BOUNDARY:
            l0, w0 = _fixed_em(blocks, theta, int(x), 0.0, PROFILE_ITERS)
            best = max(best, l0)
            if best - l0 > target:
                a, b, warm = 1e-14, tx, theta
                for _ in range(PROFILE_EVALS):
                    mid = float(np.sqrt(a * b)) if b > 4.0 * a else 0.5 * (a + b)
                    val, warm = _fixed_em(blocks, warm, int(x), mid, PROFILE_ITERS)
                    if best - val > target:
                        a = mid
                    else:
                        b = mid
                lo[i] = a
    return lo, np.maximum(hi, lo)


@dataclass
class Uncertainty:
    """The spread of one estimate: a covariance (Gaussian methods) or replicates (bootstrap)."""

    method: str
    theta: np.ndarray
    assumptions: str
    cov: np.ndarray | None = None           # k x k; zero rows/columns on boundary cells
    boundary: np.ndarray | None = None      # bool, cells at 0 (fisher)
    kkt: np.ndarray | None = None           # lambda per boundary cell (fisher)
    face_var: np.ndarray | None = None      # V per boundary cell (fisher)
    raw: np.ndarray | None = None           # the raw inverse v (linear)
    raw_cov: np.ndarray | None = None       # Cov(v) (linear)
    post: str | None = None                 # "n" / "p" post-processing (linear)
    replicates: np.ndarray | None = None    # R x k (linear: post(v*); bootstrap: refits)
    extra: dict[str, Any] = field(default_factory=dict)
    #: reasons not to trust the intervals' nominal coverage (``small_n``, ``lack_of_fit``): name -> one line
    flags: dict[str, str] = field(default_factory=dict)

    # ---- Gaussian intervals of functionals (fisher: the Wald or the inversion interval) --------
    def gaussian(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Centres, standard deviations and which rows use the inversion interval, for the linear
        functionals in the rows of ``W`` (Gaussian methods only).

        A functional of a maximum-likelihood estimate is centred on the estimate with its Fisher
        standard deviation, unless the unbiased inverse ``v`` is available (one mechanism with an
        invertible channel or a support function) and its standard deviation for that functional
        is at most :data:`INVERSION_MAX_RATIO` times the Fisher one: then the interval is the
        inverse's, ``w @ v +- z sqrt(w^T Cov(v) w)``. Near the boundary of the simplex the MLE is
        biased (the positivity constraint pulls it towards the uniform distribution when the noise
        is large) and a Wald interval around it does not cover; the inverse is unbiased whatever
        the truth, its covariance exact (see ``docs/uncertainty.md`` for the measurements). On a
        low-dimensional face the rows that keep the MLE's interval take the sd of
        :meth:`face_replicates` instead of the face's Fisher sd.
        """
        W = np.atleast_2d(np.asarray(W, dtype=float))
        if self.method == "anchored":
            return self.extra["mle"].gaussian(W)
        if self.method != "fisher":
            raise LocalPrivError("Gaussian functionals need the fisher method")
        assert self.cov is not None  # the fisher method sets it
        centre = W @ self.theta
        sd = np.sqrt(np.clip(_quad(W, self.cov), 0, None))
        use = np.zeros(W.shape[0], dtype=bool)
        inv = self._inverse(lambda v, C: (W @ v, _quad(W, C)))
        if inv is not None:
            c_inv, sd_inv = inv
            use = (sd > 0) & (sd_inv <= INVERSION_MAX_RATIO * sd)
            centre = np.where(use, c_inv, centre)
            sd = np.where(use, sd_inv, sd)
        reps = None if use.all() else self.face_replicates()
        if reps is not None:  # on a low-dimensional face: the bootstrap's sd for the MLE's own rows
            sd = np.where(use, sd, (reps @ W.T).std(axis=0, ddof=1))
        return centre, sd, use

    def face_replicates(self) -> np.ndarray | None:
        """Refits of a parametric bootstrap of the MLE where it sits on a low-dimensional face, else None.

        When at most :data:`FACE_MAX_SHARE` of the MLE's cells are positive (metric mechanisms at
        small eps: a few spikes), its face changes from one data set to the next and the Fisher
        covariance *on the face of this data set* misstates the spread of a functional that is not
        smooth across cells (a CDF value between two spikes has Fisher sd 0 from the cells it skips).
        There the sd of the functionals that keep the MLE's interval (``use`` False in
        :meth:`gaussian`) is the sd over :data:`FACE_REPLICATES` refits of the MLE to counts redrawn
        from it, ``c* ~ Multinomial(n, theta_hat M)`` per mechanism (Efron's parametric bootstrap;
        the refits land on their own faces, so the face's randomness is in the sd); the interval
        stays centred on the MLE. Computed once, on first use, only for finite channels whose
        reports are their output indices (a refit then costs the same at any n).
        """
        plan = self.extra.get("face_bootstrap")
        if plan is None:
            return None
        if "replicates" not in plan:
            plan["replicates"] = _refits(plan["obs"], self.theta, plan["call"], plan["rng"], FACE_REPLICATES)
        return plan["replicates"]

    def _inverse(self, moments: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
                 ) -> tuple[np.ndarray, np.ndarray] | None:
        """``(centres, sds)`` of functionals of the unbiased inverse, or None without one.

        ``moments(v, C)`` gives one mechanism's centres ``W v`` and variances ``diag(W C W^T)``.
        With several mechanisms (free-will mixtures) each block's inverse is unbiased on its own;
        they are combined per functional with inverse-variance weights,
        ``f = sum_A f_A / s_A^2 / sum_A 1 / s_A^2`` with variance ``1 / sum_A 1 / s_A^2``.
        """
        parts = self.extra.get("inverse_blocks")
        if not parts:
            return None
        if len(parts) == 1:
            c, var = moments(*parts[0])
            return c, np.sqrt(np.clip(var, 0, None))
        num: Any = 0.0  # then the arrays of the weighted sums
        den: Any = 0.0
        for v, C in parts:
            c, var = moments(v, C)
            w = 1.0 / np.maximum(var, 1e-300)
            num, den = num + w * c, den + w
        return num / den, np.sqrt(1.0 / den)

    def _inverse_cells(self) -> tuple[np.ndarray, np.ndarray] | None:
        return self._inverse(lambda v, C: (v, np.diag(C)))

    # ---- per cell ---------------------------------------------------------------------------
    def std_error(self) -> np.ndarray:
        """Standard error per cell (boundary cells: ``sqrt(V)``, the curvature scale there)."""
        if self.method == "anchored":
            return self.extra["mle"].std_error()
        if self.method == "fisher":
            se = self.std_error_fisher()
            inv = self._inverse_cells()
            if inv is not None:  # the cells whose interval is the inverse's (see gaussian)
                se_inv = inv[1]
                use = se_inv <= INVERSION_MAX_RATIO * se
                se = np.where(use, se_inv, se)
            return se
        assert self.replicates is not None  # the linear and bootstrap methods set them
        return self.replicates.std(axis=0, ddof=1)

    def std_error_fisher(self) -> np.ndarray:
        """The Fisher standard error per cell (boundary cells: ``sqrt(V)``), before any inversion."""
        assert self.cov is not None  # the fisher method sets it
        se = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        if self.boundary is not None and self.boundary.any():
            assert self.face_var is not None  # set with boundary cells
            se[self.boundary] = np.sqrt(self.face_var)
        return se

    def cell_intervals(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Per-cell intervals ``(lower, upper)`` at ``level``.

        Fisher method: Wald (or inversion, see :meth:`gaussian`) intervals where they are
        accurate; profile-likelihood bounds (:func:`profile_bounds`) for the cells where they are
        not (:meth:`profiled_cells`): at or near the boundary of the simplex, an interval that
        leaves ``[0, 1]`` or has width 0, or fewer than :data:`SMALL_N` reports. A profiled cell
        gets the union of the two intervals (the profile widens, never narrows).
        """
        lv = check_level(level)
        if self.method == "anchored":
            if self.extra.get("cells") == "profile":
                lo, hi = self.profile_cells(lv)
            else:
                lo, hi = self.extra["mle"].cell_intervals(lv)
            return np.minimum(lo, self.theta), np.maximum(hi, self.theta)
        if self.method == "fisher":
            cache = self.extra.setdefault("cell_intervals", {})
            if lv not in cache:
                cache[lv] = self._fisher_cells(lv)
            lo, hi = cache[lv]
            return lo.copy(), hi.copy()
        a = (1 - lv) / 2
        assert self.replicates is not None  # the linear and bootstrap methods set them
        lo, hi = np.quantile(self.replicates, [a, 1 - a], axis=0)
        return np.minimum(lo, self.theta), np.maximum(hi, self.theta)

    def profile_cells(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """The MLE's profile-likelihood intervals of every cell (an anchored uncertainty), before
        they are widened to contain the estimate.

        Each is ``{t: 2 (L(theta_hat) - L_p(t)) <= chi2_1(level)}`` with ``L_p`` the profile of the
        log-likelihood on the simplex (:func:`profile_bounds`; Wilks 1938). The first
        :data:`PROFILE_MAX_CELLS` cells are profiled, any further cell keeps the MLE's own interval.
        """
        lv = check_level(level)
        cache = self.extra.setdefault("profile_cells", {})
        if lv not in cache:
            inner: Uncertainty = self.extra["mle"]
            k = inner.theta.size
            cells = np.arange(min(k, PROFILE_MAX_CELLS))
            plo, phi = profile_bounds(inner.extra["profile"]["blocks"], inner.theta, cells, lv)
            if k > PROFILE_MAX_CELLS:
                lo, hi = inner.cell_intervals(lv)
                lo[cells], hi[cells] = plo, phi
            else:
                lo, hi = plo, phi
            cache[lv] = (lo, hi)
        lo, hi = cache[lv]
        return lo.copy(), hi.copy()

    def _fisher_cells(self, lv: float) -> tuple[np.ndarray, np.ndarray]:
        z = stats.norm.ppf(0.5 + lv / 2)
        assert self.cov is not None and self.boundary is not None  # the fisher method sets them
        se = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        raw_lo, raw_hi = self.theta - z * se, self.theta + z * se
        if self.boundary.any():
            c = stats.norm.ppf(lv) ** 2  # one-sided at the boundary (chi^2 mixture)
            lam, V = self.kkt, self.face_var
            assert lam is not None and V is not None  # set with boundary cells
            with np.errstate(over="ignore", invalid="ignore"):
                u = V * (-lam + np.sqrt(lam * lam + c / V))
            raw_lo[self.boundary] = 0.0
            raw_hi[self.boundary] = np.nan_to_num(u, nan=1.0)
        inv = self._inverse_cells()
        if inv is not None:  # inversion intervals where they apply (see gaussian)
            se_f = self.std_error_fisher()
            c_inv, se_inv = inv
            use = se_inv <= INVERSION_MAX_RATIO * se_f
            raw_lo = np.where(use, c_inv - z * se_inv, raw_lo)
            raw_hi = np.where(use, c_inv + z * se_inv, raw_hi)
            se = np.where(use, se_inv, se)
        lo = np.minimum(np.clip(raw_lo, 0.0, 1.0), self.theta)
        hi = np.maximum(np.clip(raw_hi, 0.0, 1.0), self.theta)
        cells = self.profiled_cells(raw_lo, raw_hi, se)
        plan = self.extra.get("profile")
        if cells.size and plan is not None:
            cells = cells[:PROFILE_MAX_CELLS]
            plo, phi = profile_bounds(plan["blocks"], self.theta, cells, lv)
            # the union with the Wald / inversion interval: the profile widens, never narrows (with
            # k nuisance cells and n ~ k the profile itself under-covers a spike, see docs)
            lo[cells], hi[cells] = np.minimum(plo, lo[cells]), np.maximum(phi, hi[cells])
        return lo, hi

    def profiled_cells(self, raw_lo: np.ndarray, raw_hi: np.ndarray, se: np.ndarray) -> np.ndarray:
        """The cells whose Wald (or inversion) interval ``[raw_lo, raw_hi]`` is not trusted: every
        cell under :data:`SMALL_N` reports, else those at or within :data:`BOUNDARY` of ``0`` or
        ``1``, with an unclipped interval reaching outside ``(0, 1)``, or with standard error 0
        (a plug-in variance of 0, e.g. no report of an output)."""
        plan = self.extra.get("profile")
        k = self.theta.size
        if plan is not None and plan["n"] < SMALL_N:
            return np.arange(k)
        near = (self.theta < BOUNDARY) | (self.theta > 1.0 - BOUNDARY)
        bad = near | (raw_lo <= 0.0) | (raw_hi >= 1.0) | ~(se > 0)
        return np.flatnonzero(bad)

    # ---- functionals ------------------------------------------------------------------------
    def functional(self, w: npt.ArrayLike, level: float = 0.95, name: str = "functional") -> Interval:
        """``w @ theta`` with its interval (``w`` a length-k vector)."""
        lv = check_level(level)
        w = np.asarray(w, dtype=float)
        if w.shape != self.theta.shape or not np.all(np.isfinite(w)):
            raise LocalPrivError(f"weights must be a finite vector of length {self.theta.size}")
        value = float(w @ self.theta)
        if self.method == "anchored":
            iv = self.extra["mle"].functional(w, lv, name)
            return Interval(value, min(iv.lower, value), max(iv.upper, value), lv,
                            f"anchored on the MLE: {iv.method}")
        if self.method == "fisher":
            c, sd, use = self.gaussian(w[None, :])
            z = stats.norm.ppf(0.5 + lv / 2)
            lo, hi = float(c[0] - z * sd[0]), float(c[0] + z * sd[0])
            # kept within what a distribution allows: w @ theta lies in [min w, max w] (clipped)
            lo, hi = max(lo, float(w.min())), min(hi, float(w.max()))
            if use[0]:  # the inverse's interval
                return Interval(value, min(lo, value), max(hi, value), lv, "inversion (exact covariance)")
            how = "fisher (delta)" if self.face_replicates() is None else "fisher, bootstrap sd (low-dimensional face)"
            return Interval(value, lo, hi, lv, how)
        assert self.replicates is not None  # the linear and bootstrap methods set them
        vals = self.replicates @ w
        a = (1 - lv) / 2
        lo, hi = np.quantile(vals, [a, 1 - a])
        return Interval(value, float(min(lo, value)), float(max(hi, value)), lv, self.method)

    def functional_sd(self, W: np.ndarray) -> np.ndarray:
        """Standard deviations of several functionals (rows of ``W``)."""
        if self.method in ("fisher", "anchored"):
            return self.gaussian(W)[1]
        assert self.replicates is not None  # the linear and bootstrap methods set them
        return (self.replicates @ W.T).std(axis=0, ddof=1)

    def samples(self, rng: np.random.Generator, size: int = DRAWS) -> np.ndarray:
        """Draws that spread like the estimate (replicates, or Gaussian draws projected to the simplex)."""
        if self.method == "anchored":
            return self.extra["mle"].samples(rng, size)
        if self.replicates is not None:
            return self.replicates
        k = self.theta.size
        assert self.cov is not None  # the fisher method sets it
        vals, vecs = np.linalg.eigh(0.5 * (self.cov + self.cov.T))
        root = vecs * np.sqrt(np.clip(vals, 0, None))
        draws = self.theta + rng.standard_normal((size, k)) @ root.T
        return np.apply_along_axis(project_simplex, 1, draws) if k <= 2000 else np.clip(draws, 0, None)


# --------------------------------------------------------------------------------------------
# Methods
# --------------------------------------------------------------------------------------------
def _fisher(est: Fit, obs: Observations, inversion: bool = True,
            rng: np.random.Generator | None = None) -> Uncertainty:
    theta = np.asarray(est.distribution, dtype=float)
    blocks = obs.likelihood_blocks()
    info, grad, n = fisher_information(blocks, theta)
    k = theta.size
    boundary = theta < BOUNDARY
    S = np.flatnonzero(~boundary)
    cov_S, B, beta, a = _constrained_cov(info, S)
    cov = np.zeros((k, k))
    cov[np.ix_(S, S)] = cov_S
    Z = np.flatnonzero(boundary)
    kkt = face_var = None
    if Z.size:
        # V_x on the face S + {x} by the Schur complement, all boundary cells at once
        I_SZ = info[np.ix_(S, Z)]
        U = B @ I_SZ                                   # |S| x |Z|
        s = np.diag(info)[Z] - np.einsum("sz,sz->z", I_SZ, U)
        s = np.maximum(s, 1e-300)
        r = 1.0 - I_SZ.T @ a                           # (A^{-1} 1)_x * s_x
        with np.errstate(over="ignore", invalid="ignore"):
            tot = beta + r * r / s
            face_var = np.nan_to_num(np.maximum(1.0 / s - (r / s) ** 2 / tot, 1e-300), nan=1.0, posinf=1.0)
        kkt = np.maximum(n - grad[Z], 0.0)
    text = ("asymptotic normality of the MLE on its support face (observed information, sum-to-one "
            "constraint); cells at 0: one-sided quadratic profile-likelihood bound; large n")
    raw = raw_cov = None
    extra: dict[str, Any] = {"support": int(S.size)}
    call = est.extra.get("call")
    if (rng is not None and S.size <= FACE_MAX_SHARE * k and k <= INVERSION_MAX_K and call is not None
            and call[0] in FISHER
            and all(_multinomial(b.mechanism) for b in obs.blocks)):
        extra["face_bootstrap"] = {"obs": obs, "rng": rng, "call": call}
        text += (f"; on a low-dimensional face ({S.size} of {k} cells positive): standard deviations of "
                 f"functionals from a parametric bootstrap of the MLE ({FACE_REPLICATES} refits of redrawn "
                 "counts) instead of the face's information")
    inverse = _unbiased_inverse(obs) if inversion else None
    if inverse is not None:
        families = sorted({f.upper() for _, _, f in inverse})
        extra["inverse_blocks"] = [(v, C) for v, C, _ in inverse]
        if len(inverse) == 1:
            raw, raw_cov = inverse[0][0], inverse[0][1]
        text += ("; functionals whose unbiased-inverse interval is at most "
                 f"{INVERSION_MAX_RATIO:g}x wider take that interval instead ({'/'.join(families)}: exact "
                 "covariance, normal approximation"
                 + ("; mechanisms combined per functional by inverse-variance weights" if len(inverse) > 1
                    else "") + ")")
    extra["profile"] = {"blocks": blocks, "n": n}
    text += ("; profile-likelihood bounds (chi^2_1) for cells at or near 0 or 1, whose Wald interval leaves "
             f"[0, 1] or has width 0, and for every cell under {SMALL_N} reports")
    flags = {}
    if n < SMALL_N:
        flags["small_n"] = (f"only {n:g} reports: asymptotic intervals may not hold their nominal coverage "
                            "(cells get profile-likelihood bounds)")
    # cells within 3 sds of 0 may be 0 in truth: they count as constraints, not parameters (their
    # share of the chi-bar-square mixture is bounded by the larger df: a conservative p-value)
    clear = int(np.sum((theta >= BOUNDARY) & (theta > 3.0 * np.sqrt(np.clip(np.diag(cov), 0, None)))))
    fit = lack_of_fit(obs, theta, max(clear, 1))
    if fit is not None and fit[2] < LACK_OF_FIT_P:
        flags["lack_of_fit"] = (f"the reports are improbable under the fitted model (G = {fit[0]:.1f} on "
                                f"{fit[1]} df, p = {fit[2]:.1e}): wrong mechanism or parameters? intervals "
                                "assume the model")
    return Uncertainty("fisher", theta, text, cov=cov, boundary=boundary, kkt=kkt, face_var=face_var,
                       raw=raw, raw_cov=raw_cov, extra=extra, flags=flags)


def lack_of_fit(obs: Observations, theta: npt.ArrayLike, support: int | None = None,
                ) -> tuple[float, int, float] | None:
    """``(G, df, p)``: the G-test of the observed report counts against the fitted report
    distribution, or None where no block has a finite channel.

    Per mechanism with a finite channel ``M`` (reports that are its output indices), the expected
    counts are ``e = n_b theta M``; outputs expected fewer than :data:`LACK_OF_FIT_MIN_EXPECTED`
    times are pooled into one cell (Cochran's rule) and ``G = 2 sum_j o_j log(o_j / e_j)`` over the
    cells. The degrees of freedom are those of the fit: ``sum_b (cells_b - 1) - (s - 1)`` with
    ``s`` the number of positive cells of ``theta`` (the free parameters of the MLE on its face;
    the uncertainty passes the cells more than 3 standard deviations above 0, so that cells the
    truth may have at 0 count as degrees of freedom: at the boundary ``G`` follows a chi-bar-square
    mixture whose quantiles are at most those of the larger df, a conservative p-value);
    ``p = P(chi^2_df > G)`` (Wilks 1938; Agresti, Categorical Data Analysis, 2013, section 1.5).
    Blocks without a finite channel are left out; under 1 degree of freedom there is no test.
    """
    theta = np.asarray(theta, dtype=float)
    s = int(np.sum(theta >= BOUNDARY)) if support is None else int(support)
    G, cells_df, tested = 0.0, 0, False
    for b in obs.blocks:
        if not _multinomial(b.mechanism):
            continue
        o = b.count_vector().astype(float)
        e = b.n * np.clip(theta @ b.mechanism.channel(), 0.0, None)
        small = e < LACK_OF_FIT_MIN_EXPECTED
        oo = np.append(o[~small], o[small].sum()) if small.any() else o
        ee = np.append(e[~small], e[small].sum()) if small.any() else e
        keep = ee > 0
        if np.any(oo[~keep] > 0):
            return float("inf"), max(1, int(keep.sum()) - 1), 0.0  # a report the fit says is impossible
        oo, ee = oo[keep], ee[keep]
        pos = oo > 0
        G += 2.0 * float(np.sum(oo[pos] * np.log(oo[pos] / ee[pos])))
        cells_df += oo.size - 1
        tested = True
    df = cells_df - (s - 1)
    if not tested or df < 1:
        return None
    return G, int(df), float(stats.chi2.sf(G, df))


def _post(v: np.ndarray, post: str) -> np.ndarray:
    return clip_normalize(v) if post == "n" else project_simplex(v)


def _linear(est: Fit, obs: Observations, rng: np.random.Generator) -> Uncertainty:
    name = est.estimator
    post = name.rsplit("-", 1)[-1]
    block = obs.single(name)
    v, cov, text = _raw_inverse(block, "inv" if name.startswith("inv") else "mi", name)
    draws = rng.multivariate_normal(v, 0.5 * (cov + cov.T), size=DRAWS, method="eigh")
    reps = np.apply_along_axis(_post, 1, draws, post)
    return Uncertainty("linear", np.asarray(est.distribution, float),
                       text + f"; {'normalization' if post == 'n' else 'projection'} by Gaussian draws",
                       raw=v, raw_cov=cov, post=post, replicates=reps)


def _raw_inverse(block: ObservationBlock, family: str,
                 name: str = "this estimator") -> tuple[np.ndarray, np.ndarray, str]:
    """The unbiased raw inverse ``v`` of one mechanism's reports, its exact covariance, and the
    assumptions: ``family="inv"`` (``v = q M^-1``) or ``"mi"`` (support counts, pure protocols)."""
    mech = block.mechanism
    n = block.n
    if family == "inv":
        counts = block.count_vector()
        q = counts / counts.sum()
        v = inverse_vector(mech, counts)
        own = getattr(mech, "inverse_counts", None)
        if isinstance(mech, KRR):  # closed form: v = (q - b) / (a - b)
            a_, b_ = mech.p_keep, mech.p_other
            Cq = (np.diag(q) - np.outer(q, q)) / n
            cov = Cq / (a_ - b_) ** 2
        else:
            if own is not None:  # the mechanism's own unbiased inverse (Hadamard response): v = q @ W
                W = np.empty((counts.size, mech.k))
                e = np.zeros(counts.size)
                for y in range(counts.size):  # one row per output (never per report)
                    e[y] = 1.0
                    W[y] = own(e)
                    e[y] = 0.0
            else:
                M = mech.channel()
                W = np.linalg.pinv(M)                  # v = q @ W  (M^{-1} or least squares)
            Cq = (np.diag(q) - np.outer(q, q)) / n
            cov = W.T @ Cq @ W
        text = "multinomial report counts; exact covariance of the raw inverse; normal approximation"
    else:
        p, qs = pure_parameters(mech)
        v = mi_vector(block)
        S2 = _support_second_moment(block)             # E[s s^T] over the reports
        if S2 is None:
            raise LocalPrivError(f"intervals for {name} need the reports' supports; use ibu")
        m1 = _support_mean(block)
        cov = (S2 - np.outer(m1, m1)) / (n * (p - qs) ** 2)
        text = ("independent reports; exact covariance of the support counts read from the reports; "
                "normal approximation")
    return v, cov, text


def _unbiased_inverse(obs: Observations) -> list[tuple[np.ndarray, np.ndarray, str]] | None:
    """``[(v, Cov(v), family)]`` per mechanism block: the unbiased raw inverse of each, or None where
    one block has none (no finite invertible channel nor support function) or the domain is too large."""
    if obs.k > INVERSION_MAX_K or len(obs.blocks) > INVERSION_MAX_BLOCKS:
        return None
    out: list[tuple[np.ndarray, np.ndarray, str]] = []
    for block in obs.blocks:
        one = _block_inverse(block)
        if one is None:
            return None
        out.append(one)
    return out


def _block_inverse(block: ObservationBlock) -> tuple[np.ndarray, np.ndarray, str] | None:
    mech = block.mechanism
    try:
        pure_parameters(mech)
        family = "inv" if isinstance(mech, KRR) else "mi"
    except LocalPrivError:
        family = "inv"
    if family == "inv":
        n_out = getattr(mech, "n_outputs", None)
        if n_out is None or (not hasattr(mech, "inverse_counts") and mech.k * n_out > 4_000_000):
            return None
    try:
        v, cov, _ = _raw_inverse(block, family)
    except LocalPrivError:  # singular or numerically singular channel: no unbiased inverse
        return None
    if not (np.all(np.isfinite(v)) and np.all(np.isfinite(cov))):
        return None
    return v, cov, family


def _support_mean(block: ObservationBlock) -> np.ndarray:
    return support_counts(block) / block.n


def _support_second_moment(block: ObservationBlock) -> np.ndarray | None:
    """``(1/n) sum_j c_j s_j s_j^T`` with ``s_j`` the support indicator (or vector) of report j."""
    mech = block.mechanism
    if isinstance(mech, KRR):
        return np.diag(block.count_vector() / block.n)
    vectors = getattr(mech, "vectors", None)       # SHE: the noisy vectors themselves
    packed = getattr(mech, "packed_support", None)  # pure protocols: 0/1 support rows, packed bits
    supports = getattr(mech, "support", None)
    if vectors is None and supports is None:
        return None
    k = mech.k
    out = np.zeros((k, k))
    step = max(1, 2_000_000 // max(k, 1))
    for s in range(0, block.counts.size, step):  # chunks of distinct reports: memory by chunk
        c = block.counts[s:s + step]
        if vectors is not None:
            Z = vectors(block.reports[s:s + step])
            out += (Z * c[:, None]).T @ Z
        elif packed is not None:
            out += PackedSupport(packed(block.reports[s:s + step]), k).gram(c)
        else:
            assert supports is not None  # checked above: vectors or supports
            out += weighted_gram(supports(block.reports[s:s + step]), c)
    return out / block.n


def _refits(obs: Observations, theta: np.ndarray, call: tuple[str, Mapping[str, Any]], rng: np.random.Generator,
            replicates: int) -> np.ndarray:
    """``replicates`` refits of the recorded estimator ``call = (method, settings)`` to observations
    redrawn from ``theta`` (:func:`_redraw`), warm-started near ``theta`` with full support."""
    method, settings = call
    settings = {key: val for key, val in settings.items() if key not in ("callback", "theta0")}
    if "theta0" in _accepted(method):
        settings["theta0"] = 0.5 * theta + 0.5 / theta.size
    if _rows_refit(obs, method, settings, replicates):
        return _refits_rows(obs, theta, settings, rng, replicates)
    reps = np.empty((replicates, theta.size))
    for r in range(replicates):  # one refit per replicate (never a loop over reports)
        reps[r] = run(_redraw(obs, theta, rng), method, **settings).distribution
    return reps


#: the settings of an ``ibu`` / ``gibu`` refit that :func:`_refits_rows` runs as the rows of one
#: matrix (:func:`localpriv.estimators.em_rows.em_rows`): the schemes it follows step for step
ROWS_SETTINGS = frozenset({"theta0", "delta", "max_iter", "accelerate", "stop"})


def _rows_refit(obs: Observations, method: str, settings: Mapping[str, Any], replicates: int) -> bool:
    """Whether the refits of ``method`` with ``settings`` run as rows of one matrix: the plain or
    SQUAREM maximum-likelihood EM with the certified rule (the Newton finish and other estimators
    run one refit at a time), every mechanism a finite channel redrawn as counts, and the matrices
    within :data:`~localpriv.estimators.em_rows.ROWS_MAX_ENTRIES`."""
    if method not in ("ibu", "gibu") or not set(settings) <= ROWS_SETTINGS:
        return False
    if settings.get("stop", "gap") != "gap" or settings.get("accelerate", "newton") not in ("squarem", "none", None):
        return False
    if not all(_multinomial(b.mechanism) for b in obs.blocks):
        return False
    width = 0
    for b in obs.blocks:
        n_out = b.mechanism.n_outputs
        assert n_out is not None  # _multinomial: a finite channel
        width += int(n_out)
    return max(replicates, obs.k) * width <= ROWS_MAX_ENTRIES


def _refits_rows(obs: Observations, theta: np.ndarray, settings: Mapping[str, Any], rng: np.random.Generator,
                 replicates: int) -> np.ndarray:
    """:func:`_refits` of the maximum-likelihood EM as the rows of one matrix: the counts are drawn
    as :func:`_redraw` draws them (replicate by replicate, mechanism by mechanism: the same
    generator stream), and every refit follows the steps of its one-at-a-time run
    (:func:`localpriv.estimators.em_rows.em_rows`)."""
    mats = [np.asarray(b.mechanism.channel(), dtype=float) for b in obs.blocks]
    probs = []
    for M in mats:
        p = np.clip(theta @ M, 0, None)
        probs.append(p / p.sum())
    counts = [np.empty((replicates, M.shape[1])) for M in mats]
    for r in range(replicates):  # the draws of _redraw, in its order (never a loop over reports)
        for b, (block, p) in enumerate(zip(obs.blocks, probs)):
            counts[b][r] = rng.multinomial(int(round(block.n)), p)
    start = settings.get("theta0")
    res = em_rows(mats, counts, np.full(theta.size, 1.0 / theta.size) if start is None else start,
                  **{key: settings[key] for key in ("delta", "max_iter", "accelerate") if key in settings})
    return res.theta


def _bootstrap(est: Fit, obs: Observations, rng: np.random.Generator, replicates: int = BOOT_REPLICATES) -> Uncertainty:
    call = est.extra.get("call")
    if call is None:
        raise LocalPrivError(f"no record of how {est.estimator} was computed; run it through "
                             "localpriv.estimate(obs, name) to get intervals")
    theta = np.asarray(est.distribution, dtype=float)
    reps = _refits(obs, theta, call, rng, replicates)
    return Uncertainty("bootstrap", theta,
                       f"parametric bootstrap, {replicates} replicates redrawn from the fitted model; "
                       "percentile intervals", replicates=reps)


def _anchored(est: Fit, obs: Observations, cells: str = "wald") -> Uncertainty:
    """The MLE's fisher uncertainty, widened to contain the regularized estimate (module docstring);
    ``cells="profile"``: every cell's interval is the MLE's profile-likelihood interval instead."""
    settings = dict((est.extra.get("call") or (None, {}))[1])
    keep = {key: settings[key] for key in ("delta", "stop", "max_iter", "accelerate") if key in settings}
    known = est.extra.get("mle")  # an estimator that computed the certified MLE on the way keeps it
    mle = (est if est.estimator in FISHER else known if isinstance(known, Fit) and known.estimator in FISHER
           else run(obs, "ibu", **keep))
    inner = uncertainty(mle, obs)
    theta = np.asarray(est.distribution, dtype=float)
    gap = float(np.abs(theta - mle.distribution).sum())
    text = (f"the maximum-likelihood estimate's intervals ({inner.method}: {inner.assumptions}), each widened "
            f"to contain this {est.estimator} estimate (L1 distance to the MLE {gap:.3g}); covers at least "
            "as often as the MLE's")
    if cells == "profile":
        text += ("; cells: the MLE's profile-likelihood intervals on the simplex (chi^2_1), widened to "
                 "contain this estimate")
    return Uncertainty("anchored", theta, text, extra={"mle": inner, "mle_estimate": mle,
                                                         "mle_converged": mle.converged, "cells": cells},
                       flags=dict(inner.flags))


def _accepted(method: str) -> set[str]:
    """The settings the estimator ``method`` declares in the registry (none for an unknown name)."""
    try:
        return {s.name for s in estimator_settings(method)}
    except LocalPrivError:
        return set()


def _reports_are_indices(mech: Mechanism, n_out: int) -> bool:
    """Whether a report *is* its column of the channel (then counts can be drawn per column);
    bit vectors, floats and shifted integers are drawn as reports by the mechanism instead."""
    if getattr(mech, "report_kind", "int64") != "int64":
        return False
    cols = np.arange(n_out, dtype=np.int64)
    try:
        return bool(np.array_equal(mech.output_index(cols), cols))
    except LocalPrivError:
        return False


def _multinomial(mech: Mechanism) -> bool:
    """Whether a mechanism's reports can be redrawn as counts over its outputs (a finite channel of
    at most 4*10^6 entries whose reports are their column indices)."""
    try:
        n_out = mech.n_outputs
    except LocalPrivError:
        return False
    return n_out is not None and mech.k * n_out <= 4_000_000 and _reports_are_indices(mech, n_out)


def _redraw(obs: Observations, theta: np.ndarray, rng: np.random.Generator) -> Observations:
    """New observations of the same size per mechanism, drawn from the fitted ``theta``."""
    blocks: list[ObservationBlock] = []
    for b in obs.blocks:
        mech, n = b.mechanism, int(round(b.n))
        n_out = None
        try:
            n_out = mech.n_outputs
        except LocalPrivError:
            n_out = None
        if n_out is not None and mech.k * n_out <= 4_000_000 and _reports_are_indices(mech, n_out):
            p = theta @ mech.channel()
            p = np.clip(p, 0, None)
            c = rng.multinomial(n, p / p.sum())
            keep = np.flatnonzero(c)
            blocks.append(ObservationBlock(mech, keep, c[keep]))
        else:
            x = np.repeat(np.arange(theta.size), rng.multinomial(n, theta / theta.sum()))
            z = mech.sample(x, rng)
            u, c = np.unique(z, axis=0, return_counts=True) if np.ndim(z) > 1 else np.unique(z, return_counts=True)
            blocks.append(ObservationBlock(mech, u, c))
    return Observations(blocks, obs.domain)


FISHER = ("ibu", "gibu", "ibu-exact", "ibu-likely")
#: the post-processings of the unbiased estimate (Wang et al., NDSS 2020): anchored too, since a
#: bootstrap of a post-processing that sets cells to 0 under-covers them (measured: docs/uncertainty.md,
#: *Every estimator's intervals*: Base-Cut's bootstrap covered 1 % to 85 % of cells at nominal 95 %)
POSTPROCESSED = ("norm", "norm-cut", "norm-mul", "norm-sub", "base-pos", "base-cut", "power", "power-ns")
ANCHORED = ("ems", "dirichlet", "auto") + POSTPROCESSED
LINEAR = ("inv-n", "inv-p", "mi-n", "mi-p", "rappor-n", "rappor-p")


def uncertainty(est: Fit, obs: Observations | None = None, *, rng: np.random.Generator | None = None,
                method: str | None = None) -> Uncertainty:
    """The :class:`Uncertainty` of ``est`` (computed from the observations it was estimated from).

    ``method``: ``"fisher"``, ``"linear"``, ``"anchored"``, ``"profile"`` (anchored, with the MLE's
    profile-likelihood interval for every cell) or ``"bootstrap"``; by default the one
    that fits the estimator (see the module docstring). ``rng`` drives the draws of the linear and bootstrap
    methods (default: ``numpy.random.default_rng(0)``, so results are reproducible).
    """
    obs = obs if obs is not None else getattr(est, "observations", None)
    if obs is None:
        raise LocalPrivError("this estimate does not carry its observations; pass obs=")
    rng = np.random.default_rng(0) if rng is None else rng
    name = est.estimator
    if method is None:
        method = ("fisher" if name in FISHER else "linear" if name in LINEAR else
                  "anchored" if name in ANCHORED else "bootstrap")
    if method in ("fisher", "wald"):
        if method == "wald" and name not in FISHER:
            raise LocalPrivError(f"the wald method applies to {', '.join(FISHER)}, not {name}")
        out = _fisher(est, obs, inversion=method == "fisher", rng=rng if method == "fisher" else None)
        for text in out.flags.values():  # one line each, once per computed uncertainty
            warnings.warn(text, IntervalWarning, stacklevel=2)
        return out
    if method == "linear":
        if name not in LINEAR:
            raise LocalPrivError(f"the linear method applies to {', '.join(LINEAR)}, not {name}")
        return _linear(est, obs, rng)
    if method in ("anchored", "profile"):
        if name in LINEAR:
            raise LocalPrivError(f"the {method} method applies to every estimator but {', '.join(LINEAR)}")
        return _anchored(est, obs, "profile" if method == "profile" else "wald")
    if method == "bootstrap":
        return _bootstrap(est, obs, rng)
    raise LocalPrivError(f"unknown uncertainty method {method!r}: fisher, wald, linear, anchored, profile "
                         "or bootstrap")
