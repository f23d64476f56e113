"""``auto``: the default estimator -- a few cheap candidates, one chosen from the data by a stated rule.

For the reports of one pure frequency oracle every candidate is computed from quantities the
certified maximum-likelihood estimate (MLE) needs anyway, so the estimator costs one MLE fit plus
work linear (or ``k log k``) in the number of cells per candidate; other observations add one
split of the reports and a few EM fits with fixed evaluation budgets. No fit is open-ended: the
MLE runs the engine's certified gap rule under the evaluation budget ``max_iter`` (reaching it is
reported as ``converged=False``), every other fit has a budget of its own, the post-processing
candidates are closed forms or a bounded iteration, and the selection evaluates a fixed, finite
list of candidates.

One pure frequency oracle (k-RR, unary encodings, local hashing, subset selection, ...: reports
of one mechanism with ``p*`` and ``q*``). The unbiased estimate ``f~_v = (C_v/n - q*)/(p* - q*)``
has the covariance (``pi_v = q* + f_v (p* - q*)`` the probability that a report supports ``v``;
every support count is ``Binomial(n, pi_v)``)::

    Sigma = diag(D) - a a^T / n,
    k-RR:   D_v = pi_v / (n (p* - q*)^2),                a = pi / (p* - q*)     (exact: multinomial)
    others: D_v = pi_v (1 - pi_v) / (n (p* - q*)^2) + f_v^2 / n,   a = f         (exact for unary encodings)

with ``pi`` and ``f`` replaced by their estimates (``C/n`` and ``f~`` clipped to ``[0, 1]``). The
candidates ``g(f~)`` are

* ``mle``: the certified MLE (:func:`~localpriv.estimators.ibu.ibu`, ``max_iter`` evaluations at most);
* ``norm-sub``: the Euclidean projection of ``f~`` onto the simplex (Wang et al., NDSS 2020);
* ``base-cut``: the entries above the Bonferroni threshold ``sigma Phi^-1(1 - 0.05/k)``, normalized;
* ``power-ns``: posterior means under the fitted power-law prior, then Norm-Sub (up to
  :data:`POWER_MAX_CELLS` cells, on categorical domains up to :data:`POWER_MAX_CELLS_CATEGORICAL`:
  its integration is a Gauss-Legendre rule of 328 points per cell,
  :func:`~localpriv.estimators.postprocess.power_moments`), and on categorical domains and lines also
  ``power`` (Power's posterior means, normalized);
* on categorical domains: ``shrink-ns``, Norm-Sub shrunk towards the uniform distribution,
  ``(1 - l) g_NS + l / k``, with ``l`` in ``[0, 1]`` minimizing its SURE (a quadratic in ``l``:
  ``J = (1 - l) J_NS``; the estimate that ignores the data is the limit where the reports say
  little, as the Dirichlet MAP's shrinkage was);
* on ordered domains (an integer line, a planar grid): ``smooth-ns(h)``, the heat-kernel smoothing
  ``S_h f~`` of EMS's smoother (:func:`~localpriv.estimators.regularized.smooth`, reflecting edges)
  projected onto the simplex, for bandwidths ``h`` on a log grid (:data:`BANDWIDTHS_PER_DECADE`
  per decade from :data:`MIN_BANDWIDTH` cells to half the longest side), the bandwidth with the
  smallest SURE.

* on an integer line of at most :data:`CDF_MAX_CELLS` cells also ``norm-cut`` (Norm-Cut, normalized);

and the one with the smallest Stein unbiased risk estimate (Stein, Ann. Statist. 9:1135-1151,
1981) of its squared error is returned::

    SURE(g) = ||g(f~) - f~||^2 - tr(Sigma) + 2 tr(Sigma J_g),    J_g = dg / df~,

an unbiased estimate of ``E ||g(f~) - f||^2`` when ``f~`` is Gaussian with covariance ``Sigma``
(``f~`` is a sum of ``n`` independent reports, so it is close to Gaussian at the sizes where the
choice matters). The divergences are closed forms: Norm-Sub is ``f~ + delta`` on its support ``S``
(``J = I_S - 1_S 1_S^T / |S|``, divergence ``|S| - 1`` under ``Sigma = I``); Base-Cut with its
normalization ``h / sum h`` (``h = f~ 1_S``) has ``J = diag(1_S)/H - h 1_S^T / H^2``; PowerNS is
Norm-Sub after the per-cell posterior mean ``m(f~_v)``, whose derivative is the posterior
variance over ``sigma^2`` (Tweedie's formula); ``smooth-ns(h)`` is ``J_NS S_h`` with ``S_h``
symmetric, so ``tr(Sigma J)`` needs the diagonal of ``S_h`` (an FFT of the kernel's eigenvalues)
and one smoothing of ``1_S``. The MLE is charged as a projection onto its support (``J`` of
Norm-Sub with ``S`` the MLE's positive cells): where the MLE is interior it equals ``f~`` (a square
invertible channel) and the formula is exact; on a face it is the usual degrees-of-freedom
approximation. Base-Cut's hard threshold adds the jump ``T_v / H`` at ``f~_v = T_v`` to the
divergence: ``Sigma_vv (T_v / H) p_v(T_v)`` with the density ``p_v`` of ``f~_v`` estimated by a
normal density of variance ``Sigma_vv`` centred on ``f~_v`` (without it hard thresholding's SURE
is optimistic).

On categorical domains (scored in total variation) the candidate returned is instead the one with
the smallest::

    TV-SURE(g) = (1/2) sum_v sqrt(max(R_v, 0)),
    R_v = (g_v - f~_v)^2 - Sigma_vv + 2 (Sigma J_g)_vv        (:func:`cell_risks`, :func:`tv_risk`),

``R_v`` Stein's unbiased estimate of the squared error of cell ``v`` (the ``R_v`` sum to SURE).
Since ``E|e_v| <= sqrt(E e_v^2)``, with ``E|e_v| = sqrt(2/pi) sqrt(E e_v^2)`` for a centred normal
error, the criterion estimates a bound on the expected total variation ``(1/2) sum_v E|g_v - f_v|``
that exceeds it by a factor between 1 and ``sqrt(pi/2)`` (1.25) where the errors are of constant
size or centred normal; the plug-in ``sqrt(max(R_v, 0))`` is biased upwards by ``0.34 sqrt(Sigma_vv)``
in a cell a candidate sets to its true value 0. The squared error sums the cells' errors squared,
so it favours an estimate that spreads small errors over many rare cells (Norm-Sub, shrinkage
towards uniform), which the total variation charges in full. ``extra["auto"]["scores"]`` keeps the
squared-error SURE of every candidate and ``extra["auto"]["tv_scores"]`` the criterion.

On an integer line of at most :data:`CDF_MAX_CELLS` cells the loss is instead the squared error of
the cumulative distribution, ``||A (g - f)||^2`` with ``A`` the ``(k-1) x k`` partial sums (the
earth mover's distance on a line is ``||A (g - f)||_1``, so this loss ranks candidates as the metric
of ordered data does, where the squared error of the frequencies favoured PowerNS and heavy
smoothing on spiky data), and the candidate with the smallest::

    CDF-SURE(g) = ||A (g - f~)||^2 - tr(A Sigma A^T) + 2 tr(A J_g Sigma A^T)

is returned (:func:`cdf_sure`; computed in ``O(k)`` per candidate from the structure of ``Sigma`` and
``J``, plus ``O(k^2 log k)`` for the smoothing's dense term). The bandwidth
of ``smooth-ns`` is still the one of smallest SURE of the frequencies' squared error (the CDF
criterion barely separates bandwidths, whose effect is on the high frequencies, and its noise then
chose too little smoothing on smooth data). The hard thresholds add their jumps as for Base-Cut,
seen through ``M = A^T A``: ``Sigma_vv p_v(T_v) (T_v / H) (M_vv - (M g)_v)``; for Norm-Cut, when it
dropped positive entries, with ``T_v`` the smallest kept value (an approximation: the cut's
threshold moves with the data).

Other observations (metric mechanisms such as the geometric and planar mechanisms, other finite
channels, reports of several mechanisms). The candidates are the MLE and, on ordered domains, its
smoothings ``S_h theta_MLE`` and EMS; on categorical domains its shrinkages
``(1 - l) theta_MLE + l / k`` towards the uniform distribution (:data:`SHRINKAGE`). The reports are
split once by binomial thinning (each distinct report's count ``c`` into ``Binomial(c, 1/2)`` and
the rest, from ``rng``; equal reports merged, reports and mechanisms sorted first, so the split
does not depend on their order). The MLE of the first half is computed (certified to 0.01 nats in
all, from the uniform start, at most ``min(max_iter, TRAIN_BUDGET)`` evaluations: past the budget
the candidates are built from the budgeted EM iterate, and ``train_converged`` is ``False``) and
every candidate built from it is scored by the log-likelihood of the second half. On ordered domains EMS
(:func:`~localpriv.estimators.regularized.ems`'s smoothed EM) is scored the same way: fitted on the
first half at the bandwidths :data:`EMS_STEPS` times the best smoothing of the MLE, each
warm-started from the previous, stopped at ``max|step| < 1e-7`` or :data:`EMS_BUDGET` evaluations.
If EMS scores best it is fitted on all reports from the smoothed MLE of the first half, stopped at
``max|step| < 1e-7`` or :data:`EMS_FINAL_BUDGET` evaluations, whichever comes first (the stop
reached is stated in ``settings["ems_stop"]``: the smoothed map ascends no objective, so there is
no certificate). Otherwise the MLE of all reports is computed (warm-started from the first half's,
certified; within :data:`FINAL_BUDGET` evaluations when a smoothing won or the first half's
fit reached its budget, the stop stated in ``settings["mle_stop"]``) and the winning smoothing or
shrinkage applied to it.

``converged`` is that of the certified fit the estimate is built from (the MLE of all reports; of
the first half when EMS won): ``False`` when its budget ``max_iter`` was reached. The choice is
recorded in ``extra["auto"]`` (the rule, every candidate's score, the chosen one) and
``settings["choice"]``; ``extra["evaluations"]`` counts the EM evaluations of all fits;
``extra["mle"]`` holds the MLE of all reports when it was computed, and the intervals
(:mod:`localpriv.inference.uncertainty`, ``"anchored"``) use it instead of computing it again.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.domains import CategoricalDomain
from localpriv.estimators.em import DEFAULT_ACCELERATE, DEFAULT_DELTA, SCHEMES, em, log_likelihood
from localpriv.estimators.ibu import ibu
from localpriv.estimators.oracles import pure_parameters, support_counts
from localpriv.estimators.postprocess import (
    DEFAULT_LEVEL,
    cut_threshold,
    noise_variance,
    norm_cut,
    norm_sub,
    power_moments,
)
from localpriv.estimators.registry import Setting, register_estimator
from localpriv.estimators.regularized import EMS_CV_DELTA, SmoothingPenalty, ordered_shape
from localpriv.estimators.result import Fit
from localpriv.mechanisms.krr import KRR
from localpriv.utils.simplex import clip_normalize
from localpriv.utils.validation import LocalPrivError, check_rng

__all__ = ["auto", "AUTO_MAX_ITER", "MAX_CELLS", "MIN_BANDWIDTH", "BANDWIDTHS_PER_DECADE", "SHRINKAGE",
           "POWER_MAX_CELLS", "EMS_STEPS", "EMS_BUDGET", "EMS_FINAL_BUDGET", "TRAIN_BUDGET", "FINAL_BUDGET",
           "sure_terms", "smoothing_diagonal", "heat_smooth", "CDF_MAX_CELLS", "cdf_sure", "cell_risks", "tv_risk",
           "POWER_MAX_CELLS_CATEGORICAL"]

#: evaluation budget of each MLE fit on the default path (the certified gap rule usually stops far
#: earlier: reaching it is reported as converged=False)
AUTO_MAX_ITER = 5000
#: the largest domain the default handles (cells): SURE's smoothing terms are O(k log k) per
#: bandwidth, the MLE's are the engine's
MAX_CELLS = 1 << 20
#: the smallest bandwidth (cells) of the smoothed candidates, and their grid density
MIN_BANDWIDTH = 0.25
BANDWIDTHS_PER_DECADE = 6
#: EMS bandwidths tried on the training half (times the best smoothing of the MLE), the evaluation
#: budget of each of those fits, and of the final EMS fit on all reports
EMS_STEPS = (1.0, 0.5, 0.25, 0.125)
EMS_BUDGET = 150
EMS_FINAL_BUDGET = 300
#: evaluation budget of the training half's MLE on the held-out path, the stated stop of the
#: selection: past it the candidates are built from the budgeted EM iterate (an early-stopped, so
#: regularized, estimate) and the record says ``train_converged=False``. The training fits of the
#: estimator and advisor tests take at most 25 evaluations; planar and exponential reports at LDP
#: level 1 on a 48 x 49 grid did not certify within 5,000 (the certified MLE of all reports took
#: 78,555), which made the selection cost seconds per fit (docs/decisions/0084-default-on-large-grids.md)
TRAIN_BUDGET = 300
#: evaluation budget of the MLE of all reports on an ordered domain when a smoothing of it won the
#: held-out choice or the training half's fit reached TRAIN_BUDGET (the stated stop,
#: ``settings["mle_stop"]``): on those 48 x 49 grids the budgeted estimates had the lower earth
#: mover's error on most data sets, with about a tenth of the evaluations (``make
#: bench-grid-default``; docs/decisions/0084-default-on-large-grids.md)
FINAL_BUDGET = 300
#: PowerNS is a candidate up to this many cells (its integration is a Gauss-Legendre rule of 328 points per cell)
POWER_MAX_CELLS = 256
#: on categorical domains Power and PowerNS are candidates up to this many cells
POWER_MAX_CELLS_CATEGORICAL = 1024
#: on an integer line of at most this many cells the candidates are scored by the SURE of the squared
#: error of their cumulative distribution (O(k) per candidate, and O(k^2 log k) for the smoothing's
#: dense term); above it, and on grids and categorical domains, by the SURE of the squared error of
#: the frequencies (the dense term would take the default past twice the MLE's cost on long lines)
CDF_MAX_CELLS = 256
#: shrinkage weights towards the uniform distribution of the categorical held-out candidates
SHRINKAGE = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
#: cells of the MLE at or below this count as outside its support (the engine's zeros are exact or ~1e-300)
_ZERO = 1e-12


# --------------------------------------------------------------------------------------------
# the smoother (the heat kernel of EMS, applied by the DCT)
# --------------------------------------------------------------------------------------------
def _heat_eigenvalues(m: int, bandwidth: float) -> np.ndarray:
    """``exp(-(h^2/2) 4 sin^2(pi j / 2m))``: the eigenvalues of the path's heat kernel (DCT-II basis)."""
    return np.exp(-2.0 * bandwidth ** 2 * np.sin(np.pi * np.arange(m) / (2.0 * m)) ** 2)


def heat_smooth(v: ArrayLike, shape: tuple[int, ...], bandwidth: float) -> np.ndarray:
    """``S_h v``: the heat-kernel smoothing with reflecting edges (as EMS's, by the orthonormal
    DCT-II along each axis: ``S_h = C^T diag(exp(-(h^2/2) 4 sin^2(pi j/2m))) C``).

    Parameters
    ----------
    v : array
        ``prod(shape)`` values (row-major on a grid).
    shape : tuple of int
        ``(k,)`` or ``(nrows, ncols)``.
    bandwidth : float
        The kernel's standard deviation per axis, cells (``>= 0``).

    Returns
    -------
    ndarray
        Same size and sum as ``v``.
    """
    from scipy.fft import dctn, idctn
    x = np.asarray(v, dtype=float).reshape(shape)
    if bandwidth <= 0 or x.size <= 1:
        return x.ravel().copy()
    y = dctn(x, type=2, norm="ortho")
    for axis, m in enumerate(shape):
        lam = _heat_eigenvalues(m, bandwidth)
        y *= lam.reshape([-1 if a == axis else 1 for a in range(len(shape))])
    return np.asarray(idctn(y, type=2, norm="ortho")).ravel()


def smoothing_diagonal(shape: tuple[int, ...], bandwidth: float) -> np.ndarray:
    """The diagonal of ``S_h`` (:func:`heat_smooth`), by one FFT per axis.

    With ``C_jv^2 = (1 + cos(pi j (2v + 1) / m)) / m`` for ``j >= 1`` and ``1/m`` for ``j = 0``,
    ``(S_h)_vv = (sum_j lam_j + Re F_{2v+1} - lam_0) / m`` where ``F_t = sum_j lam_j exp(i pi j t / m)``
    (a length-``2m`` FFT); on a grid the product of the axes' diagonals.
    """
    out = np.ones(1)
    for m in shape:
        lam = _heat_eigenvalues(m, bandwidth)
        F = np.fft.ifft(np.concatenate([lam, np.zeros(m)])) * (2 * m)
        diag = (lam.sum() + F.real[1::2] - lam[0]) / m
        out = np.outer(out, diag).ravel()
    return out


# --------------------------------------------------------------------------------------------
# Stein's unbiased risk estimate with a structured covariance
# --------------------------------------------------------------------------------------------
def sure_terms(D: np.ndarray, a: np.ndarray, n: float, d: np.ndarray, u: np.ndarray, w: np.ndarray) -> float:
    """``tr(Sigma J)`` for ``Sigma = diag(D) - a a^T / n`` and ``J = diag(d) - u w^T``.

    ``tr(Sigma J) = sum_v (D_v - a_v^2/n) d_v - (sum_v D_v u_v w_v - (a.u)(a.w)/n)``.
    """
    return float(np.dot(D - a * a / n, d) - (np.dot(D * u, w) - np.dot(a, u) * np.dot(a, w) / n))


def _ns_support(g: np.ndarray) -> np.ndarray:
    return (g > 0).astype(float)


def _sure(g: np.ndarray, raw: np.ndarray, trace_sigma: float, tr_sj: float) -> float:
    return float(np.sum((g - raw) ** 2) - trace_sigma + 2.0 * tr_sj)


def _ns_candidate(raw: np.ndarray, g: np.ndarray, D: np.ndarray, a: np.ndarray, n: float, tr: float) -> float:
    """SURE of a projection onto the simplex with support ``g > 0``: ``J = I_S - 1_S 1_S^T/|S|``."""
    s = _ns_support(g)
    m = max(s.sum(), 1.0)
    return _sure(g, raw, tr, sure_terms(D, a, n, s, s / m, s))


def cell_risks(g: np.ndarray, raw: np.ndarray, D: np.ndarray, a: np.ndarray, n: float, d: np.ndarray,
               u: np.ndarray, w: np.ndarray, jump: ArrayLike = 0.0) -> np.ndarray:
    """Stein's unbiased estimate of each cell's squared error ``E (g_v - f_v)^2``.

    ``R_v = (g_v - f~_v)^2 - Sigma_vv + 2 (Sigma J)_vv`` for ``Sigma = diag(D) - a a^T / n`` and
    ``J = diag(d) - u w^T``, with ``(Sigma J)_vv = D_v d_v - D_v u_v w_v - a_v^2 d_v / n
    + a_v (a.u) w_v / n``; ``jump`` (per cell) is added to ``(Sigma J)_vv`` (a hard threshold's
    jump). The cells' estimates sum to the SURE of :func:`sure_terms`.

    Parameters
    ----------
    g, raw : ndarray
        The candidate ``g(f~)`` and ``f~`` (``k`` cells).
    D, a : ndarray
        ``Cov(f~) = diag(D) - a a^T / n``.
    n : float
        The number of reports.
    d, u, w : ndarray
        ``J = dg / df~ = diag(d) - u w^T``.
    jump : float or ndarray
        Added to each cell's ``(Sigma J)_vv``.

    Returns
    -------
    ndarray
        ``R_v`` for every cell (may be negative: each is unbiased, not each non-negative).
    """
    diag = D * d - D * u * w - a * a * d / n + a * float(np.dot(a, u)) * w / n
    return np.asarray((g - raw) ** 2 - (D - a * a / n) + 2.0 * (diag + np.asarray(jump, dtype=float)))


def tv_risk(risks: ArrayLike) -> float:
    """The TV-matched criterion of categorical data: ``(1/2) sum_v sqrt(max(R_v, 0))``.

    With ``e_v = g_v - f_v`` the error of a cell, ``E |e_v| <= sqrt(E e_v^2)`` (Jensen), with
    equality when ``|e_v|`` is constant, and ``E |e_v| = sqrt(2/pi) sqrt(E e_v^2)`` when ``e_v`` is a
    centred normal; so ``(1/2) sum_v sqrt(E e_v^2)`` bounds the expected total variation
    ``(1/2) sum_v E |e_v|`` and exceeds it by a factor in ``[1, sqrt(pi/2)] = [1, 1.25]`` where the
    errors are centred normal or of constant size. ``R_v`` (:func:`cell_risks`) is Stein's unbiased
    estimate of ``E e_v^2``; its noise (standard deviation ``~ sqrt(2) Sigma_vv`` per cell) and the
    truncation at 0 make the plug-in biased upwards where ``E e_v^2 << Sigma_vv``, by
    ``0.34 sqrt(Sigma_vv)`` per cell (``E sqrt(max(Sigma_vv (z^2 - 1), 0))``, ``z ~ N(0, 1)``) for a cell
    that a candidate sets to its true value 0. Unlike the squared error, the criterion charges an
    estimate that spreads small errors over many cells (Norm-Sub, shrinkage towards uniform on a
    sparse truth) what the total variation does.

    Parameters
    ----------
    risks : array
        ``R_v`` of every cell (:func:`cell_risks`).

    Returns
    -------
    float
        ``(1/2) sum_v sqrt(max(R_v, 0))``.
    """
    r = np.asarray(risks, dtype=float)
    return 0.5 * float(np.sum(np.sqrt(np.maximum(r, 0.0))))


def cdf_sure(g: np.ndarray, raw: np.ndarray, sigma: np.ndarray, J: np.ndarray, jump: float = 0.0) -> float:
    """SURE of the squared error of the cumulative distribution on a line of ``k`` cells.

    With ``A`` the ``(k-1) x k`` matrix of partial sums (``(A x)_r = x_0 + ... + x_r``; the earth
    mover's distance is ``||A (g - f)||_1``), the loss ``||A (g(f~) - f)||^2`` has the unbiased
    estimate (Stein's identity with ``M = A^T A``, ``f~ ~ N(f, Sigma)``)::

        ||A (g - f~)||^2 - tr(A Sigma A^T) + 2 tr(A J Sigma A^T),

    computed as ``sum((A J) * (A Sigma))`` for the trace (``O(k^2)``).

    Parameters
    ----------
    g, raw : ndarray
        The candidate ``g(f~)`` and ``f~`` (``k`` cells).
    sigma : ndarray
        ``Cov(f~)``, ``k x k``.
    J : ndarray
        ``dg / df~``, ``k x k``.
    jump : float
        The part of ``tr(M J Sigma)`` from a discontinuity of ``g`` (Base-Cut's threshold), added
        to the trace.

    Returns
    -------
    float
    """
    r = np.cumsum(np.asarray(g, dtype=float) - np.asarray(raw, dtype=float))[:-1]
    a_sigma = np.cumsum(sigma, axis=0)[:-1]
    a_j = np.cumsum(J, axis=0)[:-1]
    tr_m_sigma = float(np.trace(np.cumsum(a_sigma, axis=1)[:, :-1]))
    return float(r @ r) - tr_m_sigma + 2.0 * (float(np.sum(a_j * a_sigma)) + jump)


def _cdf_sure_lowrank(g: np.ndarray, raw: np.ndarray, D: np.ndarray, a: np.ndarray, n: float, d: np.ndarray,
                      u: np.ndarray, w: np.ndarray, jump: float = 0.0, extra: float = 0.0) -> float:
    """:func:`cdf_sure` for ``Sigma = diag(D) - a a^T / n`` and ``J = diag(d) - u w^T`` in ``O(k)``:
    with ``M = A^T A``, ``tr(M Sigma) = sum_v M_vv D_v - a.(M a)/n`` and
    ``tr(M J Sigma) = sum_v M_vv d_v D_v - a.M(d a)/n - (w D).(M u) + (w.a) a.(M u)/n``;
    ``extra`` is added to ``tr(M J Sigma)`` (the dense part of a smoother's Jacobian)."""
    k = raw.size
    mvv = np.maximum(k - 1 - np.arange(k), 0).astype(float)
    r = np.cumsum(g - raw)[:-1]
    ma, mu = _m_times(a), _m_times(u)
    tr_m_sigma = float(np.dot(mvv, D) - np.dot(a, ma) / n)
    tr_mj_sigma = float(np.dot(mvv, d * D) - np.dot(a, _m_times(d * a)) / n - np.dot(w * D, mu)
                        + np.dot(w, a) * np.dot(a, mu) / n) + extra
    return float(r @ r) - tr_m_sigma + 2.0 * (tr_mj_sigma + jump)


def _cdf_smooth_extra(k: int, bandwidth: float, s: np.ndarray, D: np.ndarray, a: np.ndarray, n: float) -> float:
    """``tr(M diag(s) S_h Sigma)``: the part of ``tr(M J Sigma)`` of ``J = J_NS S_h`` that is not of
    the form ``diag(d) - u w^T`` (``D^T (M o S_h) s - (M a).(s o S_h a)/n``; dense ``S_h``, ``O(k^2 log k)``)."""
    S = _dense_smoother(k, bandwidth)
    idx = np.arange(k)
    M = np.maximum(k - 1 - np.maximum.outer(idx, idx), 0).astype(float)
    return float(D @ ((M * S) @ s) - np.dot(_m_times(a), s * heat_smooth(a, (k,), bandwidth)) / n)


def _normal_mass(raw: np.ndarray, t: ArrayLike, var: np.ndarray) -> np.ndarray:
    """``Sigma_vv p_v(t_v)``: the variance times the normal density (mean ``f~_v``, variance
    ``Sigma_vv``) at the threshold ``t_v``."""
    sd = np.sqrt(np.maximum(var, 1e-300))
    return np.asarray(sd * np.exp(-0.5 * ((raw - t) / sd) ** 2) / math.sqrt(2 * math.pi))


def _m_times(x: np.ndarray) -> np.ndarray:
    """``M x = A^T A x`` (``A``: the ``(k-1) x k`` partial sums of :func:`cdf_sure`)."""
    y = np.cumsum(x)[:-1]
    return np.concatenate([np.cumsum(y[::-1])[::-1], [0.0]])


def _covariance(block: ObservationBlock, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(D, a, pi)`` of ``Cov(f~) = diag(D) - a a^T / n`` (module docstring)."""
    p, q = pure_parameters(block.mechanism)
    n = float(block.n)
    pi = np.clip(q + (p - q) * raw, 0.0, 1.0)  # = C/n for the support counts
    scale = n * (p - q) ** 2
    if isinstance(block.mechanism, KRR):
        return pi / scale, pi / (p - q), pi
    f = np.clip(raw, 0.0, 1.0)
    return pi * (1.0 - pi) / scale + f * f / n, f, pi


def _pure(obs: Observations) -> ObservationBlock | None:
    if len(obs.blocks) != 1:
        return None
    mech = obs.blocks[0].mechanism
    if isinstance(mech, KRR):
        return obs.blocks[0]
    if getattr(mech, "p_star", None) is None or getattr(mech, "q_star", None) is None:
        return None
    if not hasattr(mech, "support_counts"):
        return None
    return obs.blocks[0]


def _bandwidths(shape: tuple[int, ...]) -> np.ndarray:
    top = max(max(shape) / 2.0, MIN_BANDWIDTH)
    num = max(2, int(math.ceil(math.log10(top / MIN_BANDWIDTH) * BANDWIDTHS_PER_DECADE)) + 1)
    return np.geomspace(MIN_BANDWIDTH, top, num)


def _dense_smoother(k: int, bandwidth: float) -> np.ndarray:
    """``S_h`` of :func:`heat_smooth` on a line of ``k`` cells as a dense matrix (``O(k^2 log k)``)."""
    from scipy.fft import dct, idct
    if bandwidth <= 0 or k <= 1:
        return np.eye(k)
    C = dct(np.eye(k), type=2, norm="ortho", axis=0)
    return np.asarray(idct(_heat_eigenvalues(k, bandwidth)[:, None] * C, type=2, norm="ortho", axis=0))


def _sure_path(obs: Observations, block: ObservationBlock, mle: Fit, level: float) -> tuple[np.ndarray, dict[str, Any]]:
    """The candidates of one pure frequency oracle, scored by SURE (module docstring)."""
    p, q = pure_parameters(block.mechanism)
    n = float(block.n)
    raw = (support_counts(block) / n - q) / (p - q)
    D, a, _pi = _covariance(block, raw)
    tr = float(np.sum(D - a * a / n))
    k = raw.size
    ordered = obs.domain is not None and not isinstance(obs.domain, CategoricalDomain)
    shape = ordered_shape(obs.domain, "auto") if ordered else (k,)
    # on a short enough line: the SURE of the cumulative distribution's squared error decides
    line = ordered and len(shape) == 1 and k <= CDF_MAX_CELLS
    mvv = np.maximum(k - 1 - np.arange(k), 0).astype(float)  # the diagonal of M = A^T A
    cands: dict[str, np.ndarray] = {}
    scores: dict[str, float] = {}
    cdf: dict[str, float] = {}
    # on categorical data: each cell's SURE, for the TV-matched criterion (tv_risk)
    cells: dict[str, np.ndarray] = {}
    # the MLE: a projection onto its support
    theta = np.asarray(mle.distribution, dtype=float)
    s = (theta > _ZERO).astype(float)
    scores["mle"] = _sure(theta, raw, tr, sure_terms(D, a, n, s, s / max(s.sum(), 1.0), s))
    cands["mle"] = theta
    if not ordered:
        cells["mle"] = cell_risks(theta, raw, D, a, n, s, s / max(s.sum(), 1.0), s)
    if line:
        cdf["mle"] = _cdf_sure_lowrank(theta, raw, D, a, n, s, s / max(s.sum(), 1.0), s)
    # Norm-Sub
    g = norm_sub(raw)
    cands["norm-sub"], scores["norm-sub"] = g, _ns_candidate(raw, g, D, a, n, tr)
    if line:
        s = _ns_support(g)
        cdf["norm-sub"] = _cdf_sure_lowrank(g, raw, D, a, n, s, s / max(s.sum(), 1.0), s)
    lam = 0.0
    if not ordered:
        # Norm-Sub shrunk towards the uniform distribution, (1 - l) g + l u: SURE is quadratic in l
        # (J = (1 - l) J_NS), its minimum over [0, 1] in closed form
        s = _ns_support(g)
        t_ns = sure_terms(D, a, n, s, s / max(s.sum(), 1.0), s)
        u = np.full(k, 1.0 / k)
        du = u - g
        denom = float(np.dot(du, du))
        lam = min(max((t_ns - float(np.dot(g - raw, du))) / denom, 0.0), 1.0) if denom > 0 else 0.0
        gs = (1.0 - lam) * g + lam * u
        cands["shrink-ns"], scores["shrink-ns"] = gs, _sure(gs, raw, tr, (1.0 - lam) * t_ns)
        cells["norm-sub"] = cell_risks(g, raw, D, a, n, s, s / max(s.sum(), 1.0), s)
        cells["shrink-ns"] = cell_risks(gs, raw, D, a, n, (1.0 - lam) * s, s / max(s.sum(), 1.0), (1.0 - lam) * s)
    # Base-Cut, normalized
    s2 = noise_variance(block, raw)
    thr = cut_threshold(s2, level)
    keep = (raw > thr).astype(float)
    h = raw * keep
    H = float(h.sum())
    if H > 0:
        g = h / H
        # the jump of T_v at the threshold: Sigma_vv (T_v / H) times the density of f~_v at T_v,
        # estimated by a normal density centred on f~_v
        dens = _normal_mass(raw, thr, D - a * a / n)  # Sigma_vv p_v(T_v)
        jump = float(np.sum(dens * (thr / H)))
        scores["base-cut"] = _sure(g, raw, tr, sure_terms(D, a, n, keep / H, h / H ** 2, keep) + jump)
        if not ordered:
            cells["base-cut"] = cell_risks(g, raw, D, a, n, keep / H, h / H ** 2, keep, dens * (thr / H))
        if line:
            # the jump (T_v / H)(e_v - g) seen through M = A^T A: (T_v / H)(M_vv - (M g)_v)
            cdf["base-cut"] = _cdf_sure_lowrank(g, raw, D, a, n, keep / H, h / H ** 2, keep,
                                                float(np.sum(dens * (thr / H) * (mvv - _m_times(g)))))
    else:
        g = np.full(k, 1.0 / k)
        scores["base-cut"] = _sure(g, raw, tr, 0.0)
        if not ordered:
            zero = np.zeros(k)
            cells["base-cut"] = cell_risks(g, raw, D, a, n, zero, zero, zero)
        if line:
            zero = np.zeros(k)
            cdf["base-cut"] = _cdf_sure_lowrank(g, raw, D, a, n, zero, zero, zero)
    cands["base-cut"] = g
    # Norm-Cut, normalized, on a line: h / sum h on the kept set S (negatives and the smallest entries
    # past a sum of 1 dropped), J as Base-Cut's; where entries were dropped, the jump of the cut is
    # charged as Base-Cut's with the threshold at the smallest kept value t
    if line:
        g = norm_cut(raw)
        keep = (g > 0).astype(float)
        H = float(g.sum())
        if H > 0:
            jump = 0.0
            if (raw > 0).sum() > keep.sum():
                t = float(g[g > 0].min())
                jump = float(np.sum(_normal_mass(raw, t, D - a * a / n) * (t / H) * (mvv - _m_times(g / H))))
            cands["norm-cut"] = g / H
            scores["norm-cut"] = _sure(g / H, raw, tr, sure_terms(D, a, n, keep / H, g / H ** 2, keep))
            cdf["norm-cut"] = _cdf_sure_lowrank(g / H, raw, D, a, n, keep / H, g / H ** 2, keep, jump)
    # Power (normalized) and PowerNS: J = diag(m') / P - m m'^T / P^2 and J_NS diag(m'), m' = posterior
    # variance / sigma^2 (Tweedie)
    if k <= POWER_MAX_CELLS or (not ordered and k <= POWER_MAX_CELLS_CATEGORICAL):
        mean, var, _a = power_moments(raw, s2, n, level=level)
        slope = np.where(s2 > 0, var / np.where(s2 > 0, s2, 1.0), 0.0)
        P = float(mean.sum())
        if (line or not ordered) and P > 0:  # Power, normalized: on a line and on categorical data
            cands["power"] = mean / P
            scores["power"] = _sure(mean / P, raw, tr, sure_terms(D, a, n, slope / P, mean / P ** 2, slope))
            if line:
                cdf["power"] = _cdf_sure_lowrank(mean / P, raw, D, a, n, slope / P, mean / P ** 2, slope)
            else:
                cells["power"] = cell_risks(mean / P, raw, D, a, n, slope / P, mean / P ** 2, slope)
        g = norm_sub(mean)
        sg = _ns_support(g)
        cands["power-ns"] = g
        scores["power-ns"] = _sure(g, raw, tr, sure_terms(D, a, n, sg * slope, sg / max(sg.sum(), 1.0),
                                                          sg * slope))
        if not ordered:
            cells["power-ns"] = cell_risks(g, raw, D, a, n, sg * slope, sg / max(sg.sum(), 1.0), sg * slope)
        if line:
            cdf["power-ns"] = _cdf_sure_lowrank(g, raw, D, a, n, sg * slope, sg / max(sg.sum(), 1.0), sg * slope)
    # smoothed, then Norm-Sub, on ordered domains
    info: dict[str, Any] = {} if ordered else {"shrinkage": lam}
    if ordered:
        curve: list[tuple[float, float, np.ndarray]] = []
        for bw in _bandwidths(shape):
            sm = heat_smooth(raw, shape, float(bw))
            g = norm_sub(sm)
            sg = _ns_support(g)
            m = max(sg.sum(), 1.0)
            diag = smoothing_diagonal(shape, float(bw))
            Sa = heat_smooth(a, shape, float(bw))
            S1 = heat_smooth(sg, shape, float(bw))
            tr_sj = (float(np.dot(sg, diag * D - a * Sa / n))
                     - (float(np.dot(S1, D * sg)) - float(np.dot(sg, Sa)) * float(np.dot(a, sg)) / n) / m)
            curve.append((float(bw), _sure(g, raw, tr, tr_sj), g))
        # the bandwidth by the SURE of the squared error (on a line the CDF criterion then judges this
        # smoothing against the other candidates; choosing the bandwidth by it measured worse)
        best_h, best_s, best_g = min(curve, key=lambda t: t[1])
        cands["smooth-ns"], scores["smooth-ns"] = best_g, best_s
        info = {"bandwidth": best_h, "bandwidths": [t[0] for t in curve], "bandwidth_sure": [t[1] for t in curve]}
        if line:  # J = diag(s) S_h - s (S_h s)^T / |S|
            sg = _ns_support(best_g)
            cdf["smooth-ns"] = _cdf_sure_lowrank(best_g, raw, D, a, n, np.zeros(k), sg / max(sg.sum(), 1.0),
                                                 heat_smooth(sg, (k,), best_h),
                                                 extra=_cdf_smooth_extra(k, best_h, sg, D, a, n))
    if line:
        choice = min(cdf, key=lambda name: cdf[name])
        rule = ("smallest Stein unbiased risk estimate of the squared error of the cumulative distribution "
                "of f~'s post-processing")
        info["cdf_scores"] = cdf
    elif not ordered:
        tv = {name: tv_risk(r) for name, r in cells.items()}
        choice = min(tv, key=lambda name: tv[name])
        rule = ("smallest half-sum of the square roots of each cell's Stein unbiased risk estimate (a bound on "
                "the total variation) of f~'s post-processing")
        info["tv_scores"] = tv
    else:
        choice = min(scores, key=lambda name: scores[name])
        rule = "smallest Stein unbiased risk estimate of the squared error of f~'s post-processing"
    return cands[choice], {"rule": rule, "scores": scores, "choice": choice, "trace_sigma": tr, **info}


def _merged(block: ObservationBlock) -> tuple[np.ndarray, np.ndarray]:
    """The block's distinct reports (sorted) and their total counts: the split's canonical order."""
    r = np.asarray(block.reports)
    c = np.asarray(block.counts, dtype=float)
    if r.ndim > 1:
        u, inv = np.unique(r, axis=0, return_inverse=True)
    else:
        u, inv = np.unique(r, return_inverse=True)
    return u, np.bincount(np.asarray(inv).ravel(), weights=c, minlength=len(u))


def _heldout_path(obs: Observations, rng: int | np.random.Generator, delta: float, max_iter: int,
                  accelerate: str | None) -> tuple[np.ndarray, dict[str, Any], Fit | None]:
    """The candidates of other observations, scored by held-out log-likelihood (module docstring).

    Returns the estimate, the record of the choice and the MLE of all reports when it was computed
    (the choice is the MLE or one of its smoothings or shrinkages; not when EMS won)."""
    gen = check_rng(rng)
    train_blocks, test_blocks = [], []
    for b in sorted(obs.blocks, key=lambda blk: (str(blk.mechanism), blk.n)):  # a canonical order
        u, c = _merged(b)
        if np.any(c != np.round(c)):
            raise LocalPrivError("auto splits the reports in two, so the counts must be whole numbers; "
                                 "use ibu for weighted counts")
        tr = gen.binomial(np.round(c).astype(np.int64), 0.5).astype(float)
        te = c - tr
        if tr.sum() > 0:
            train_blocks.append(ObservationBlock(b.mechanism, u[tr > 0], tr[tr > 0]))
        if te.sum() > 0:
            test_blocks.append(ObservationBlock(b.mechanism, u[te > 0], te[te > 0]))
    if not train_blocks or not test_blocks:
        mle = ibu(obs, delta=delta, max_iter=max_iter, accelerate=accelerate)
        return mle.distribution, {"rule": "too few reports to split: the MLE", "choice": "mle"}, mle
    train = Observations(train_blocks, obs.domain)
    test = Observations(test_blocks, obs.domain).likelihood_blocks()
    k = obs.k
    # the MLE of the training half, from the uniform start (a start from the MLE of all reports would
    # carry the held-out half into it), certified to 0.01 nats in all
    tfit = ibu(train, delta=max(delta, 0.01 / max(train.n, 1.0)), max_iter=min(max_iter, TRAIN_BUDGET),
               accelerate=accelerate)
    th = np.asarray(tfit.distribution, dtype=float)
    scores: dict[float, float] = {}
    ordered = obs.domain is not None and not isinstance(obs.domain, CategoricalDomain)
    if ordered:
        shape = ordered_shape(obs.domain, "auto")
        strengths = [0.0, *(float(h) for h in _bandwidths(shape))]

        def make(s: float, base: np.ndarray) -> np.ndarray:
            return clip_normalize(heat_smooth(base, shape, s)) if s > 0 else base
    else:
        strengths = list(SHRINKAGE)

        def make(s: float, base: np.ndarray) -> np.ndarray:
            return (1.0 - s) * base + s / k
    for s in strengths:
        scores[s] = log_likelihood(test, make(s, th))
    best = max(scores, key=lambda s: scores[s])
    what = "bandwidth" if ordered else "shrinkage"
    info: dict[str, Any] = {
        "rule": "largest held-out log-likelihood, one binomial-thinning split in halves",
        "choice": "mle" if best == 0 else ("smooth" if ordered else "shrink"), what: best,
        "strengths": strengths, "heldout": [scores[s] for s in strengths],
        "train_converged": tfit.converged, "train_iterations": tfit.iterations}
    evaluations = tfit.iterations or 0
    if ordered:
        # EMS on the training half, from the best smoothing down, each fit warm-started from the last
        train_lb = train.likelihood_blocks()
        top = best if best > 0 else MIN_BANDWIDTH
        start = _floored(make(top, th))
        ems_scores: dict[float, float] = {}
        for step in EMS_STEPS:
            bw = float(top * step)
            res = em(train_lb, k, theta0=start, penalty=SmoothingPenalty(shape, bw), stop="max_abs",
                     delta=EMS_CV_DELTA, max_iter=EMS_BUDGET)  # a budget each
            evaluations += res.iterations
            ems_scores[bw] = log_likelihood(test, res.theta)
            start = _floored(res.theta)
        info["ems_bandwidths"] = list(ems_scores)
        info["ems_heldout"] = list(ems_scores.values())
        h_ems = max(ems_scores, key=lambda b: ems_scores[b])
        if ems_scores[h_ems] > scores[best]:
            # EMS won: one fit on all reports from the smoothed training MLE, within a budget
            res = em(obs.likelihood_blocks(), k, theta0=_floored(make(h_ems, th)),
                     penalty=SmoothingPenalty(shape, h_ems), stop="max_abs", delta=EMS_CV_DELTA,
                     max_iter=EMS_FINAL_BUDGET)
            evaluations += res.iterations
            info.update(choice="ems", bandwidth=h_ems, ems_converged=res.converged, ems_iterations=res.iterations,
                        evaluations=evaluations)
            return res.theta, info, None
    # the MLE of all reports (warm-started from the training half's), smoothed or shrunk as chosen;
    # within FINAL_BUDGET evaluations on an ordered domain when a smoothing won (it discards what
    # more evaluations of a flat likelihood would change) or the winner was the training half's
    # budgeted iterate (an early-stopped EM, not a certified MLE)
    budget = min(max_iter, FINAL_BUDGET) if ordered and (best > 0 or not tfit.converged) else max_iter
    mle = ibu(obs, theta0=_floored(th), delta=delta, max_iter=budget, accelerate=accelerate)
    if budget < max_iter:
        info["final_budget"] = budget
    info["evaluations"] = evaluations
    return make(best, np.asarray(mle.distribution, dtype=float)), info, mle


def _seed_label(rng: int | np.random.Generator) -> int | str:
    return int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else "generator"


def _floored(theta: np.ndarray) -> np.ndarray:
    """A full-support start for EM: every cell at least ``1e-6 / k``, renormalized."""
    t = np.maximum(np.asarray(theta, dtype=float), 1e-6 / theta.size)
    return t / t.sum()


def auto(obs: Observations, *, delta: float = DEFAULT_DELTA, max_iter: int = AUTO_MAX_ITER,
         rng: int | np.random.Generator = 0, level: float = DEFAULT_LEVEL,
         accelerate: str | None = DEFAULT_ACCELERATE) -> Fit:
    """The default estimator: the MLE and a few post-processings or smoothings of it, one chosen by
    a stated rule (see the module docstring).

    Parameters
    ----------
    obs : Observations
        The aggregated reports (any mechanisms, any domain).
    delta : float
        Tolerance of the MLE's certified gap rule (per-report log-likelihood within ``delta`` of the
        maximum; default ``1e-9``).
    max_iter : int
        Evaluation budget of each MLE fit (default :data:`AUTO_MAX_ITER`); reaching it gives
        ``converged=False``.
    rng : int or Generator
        Seed of the held-out split (observations that are not of one pure frequency oracle).
    level : float
        Significance level of Base-Cut's and PowerNS's threshold (the one pure-oracle path).
    accelerate : {"newton", "squarem", "none"}
        The acceleration of the MLE fits (the engine's; default ``"newton"``).

    Returns
    -------
    Fit
        ``extra["auto"]``: the rule, every candidate's score, the choice; ``extra["mle"]``: the MLE
        (the anchor of the intervals).
    """
    if obs.k > MAX_CELLS:
        raise LocalPrivError(f"auto handles domains of at most {MAX_CELLS} cells, got {obs.k}; use ibu")
    block = _pure(obs)
    mle: Fit | None
    if block is not None:
        mle = ibu(obs, delta=delta, max_iter=max_iter, accelerate=accelerate)
        theta, info = _sure_path(obs, block, mle, level)
    else:
        theta, info, mle = _heldout_path(obs, rng, delta, max_iter, accelerate)
    theta = clip_normalize(np.asarray(theta, dtype=float))
    settings: dict[str, Any] = {"delta": delta, "max_iter": max_iter, "rule": info["rule"], "choice": info["choice"]}
    extra: dict[str, Any] = {"auto": info,
                             "call": ("auto", {"delta": delta, "max_iter": max_iter, "rng": rng, "level": level,
                                       "accelerate": accelerate})}
    if block is None:
        settings["seed"] = _seed_label(rng)
    evaluations = int(info.get("evaluations", 0))
    if mle is not None:
        mle.observations = obs  # what fit(obs, "ibu", ...) records: the anchor of the intervals
        budget = int(info.get("final_budget", max_iter))
        mle.extra["call"] = ("ibu", {"delta": delta, "max_iter": budget, "accelerate": accelerate})
        extra["mle"] = mle
        evaluations += mle.iterations or 0
        settings["mle_stop"] = ("certified: per-report log-likelihood within delta of the maximum" if mle.converged
                                else f"budget of {budget} evaluations reached")
        # converged: the certified fit's (the MLE every candidate is built from or compared with)
        converged = bool(mle.converged)
    else:  # EMS won: its map ascends no objective; its stop is stated
        settings["bandwidth"] = info["bandwidth"]
        settings["ems_stop"] = (f"max|step| < {EMS_CV_DELTA:g}" if info["ems_converged"]
                                else f"budget of {EMS_FINAL_BUDGET} evaluations reached")
        converged = bool(info["train_converged"])
    extra["evaluations"] = evaluations
    return Fit(theta, obs.domain, "auto", settings, loglik=log_likelihood(obs.likelihood_blocks(), theta),
               iterations=evaluations, converged=converged, n=obs.n, extra=extra)


register_estimator(
    "auto", auto, summary="the default: the certified MLE and a few post-processings or smoothings of it, one chosen "
                          "by Stein's unbiased risk estimate (one pure oracle) or a held-out split",
    tags={"mixture"},
    settings=(
        Setting("delta", "float", DEFAULT_DELTA, "tolerance of the MLE's certified gap rule (per report)",
                low=0.0, low_open=True),
        Setting("max_iter", "int", AUTO_MAX_ITER, "evaluation budget of each MLE fit (reaching it: "
                "converged=False)", low=1),
        Setting("rng", "rng", 0, "seed or generator of the held-out split (observations other than one pure oracle)"),
        Setting("level", "float", DEFAULT_LEVEL, "significance level of the Base-Cut and PowerNS thresholds",
                low=0.0, high=1.0, low_open=True, high_open=True),
        Setting("accelerate", "str", DEFAULT_ACCELERATE, "acceleration of the MLE fits: newton (SQUAREM with the "
                "certified Newton finish), squarem, none (plain EM; None: plain EM)", choices=SCHEMES, nullable=True,
                noun="acceleration"),
    ))
