"""Post-processing of an unbiased frequency estimate (Wang et al., NDSS 2020).

T. Wang, M. Lopuhaä-Zwakenberg, Z. Li, B. Skoric, N. Li, "Locally Differentially Private Frequency
Estimation with Consistency", NDSS 2020, post-process the unbiased estimate ``f~`` of a frequency
oracle, which may have negative entries and need not sum to 1, using the knowledge that the true
frequencies are non-negative and sum to 1. ``f~`` comes from the same dispatch as ``mi-*`` and
``inv-*``: a pure frequency oracle (k-RR, unary encodings, local hashing, ...:
:func:`~localpriv.estimators.oracles.pure_parameters`) gives
``f~_v = (C_v/n - q*) / (p* - q*)`` (:func:`~localpriv.estimators.oracles.mi_vector`); any other
mechanism with a finite, invertible channel gives ``f~ = q M^{-1}``
(:func:`~localpriv.estimators.inv.inverse_vector`).

The methods, with ``d`` the number of cells:

* ``base-pos``: ``f'_v = max(f~_v, 0)``;
* ``base-cut``: ``f'_v = f~_v [f~_v > T_v]``, ``T_v = sigma_v Phi^{-1}(1 - level/d)`` (a one-sided
  significance test per cell with a Bonferroni correction);
* ``norm``: ``f'_v = f~_v + (1 - sum f~)/d``;
* ``norm-mul``: ``f'_v = gamma max(f~_v, 0)``, ``gamma = 1 / sum max(f~, 0)``;
* ``norm-cut``: negatives to 0, and while the rest sums to more than 1 the smallest kept entry to 0;
* ``norm-sub``: ``f'_v = max(f~_v + delta, 0)`` with ``delta`` such that ``sum f' = 1``, found by the
  paper's iteration (the Euclidean projection of ``f~`` onto the simplex);
* ``power``: the posterior mean ``E[f_v | f~_v]`` under a power-law prior ``pi(x) ~ x^{-a}`` on
  ``[1/n, 1]`` fitted to the significant estimates and Gaussian noise ``f~_v ~ N(f_v, sigma_v^2)``;
* ``power-ns``: ``power`` followed by ``norm-sub``.

Our estimators return distributions: where a method's result is not one (``base-pos``,
``base-cut``, ``norm-cut`` and ``power`` need not sum to 1, ``norm`` may keep negative entries), we
normalize at the end: negatives to 0, then divide by the sum (uniform if nothing is positive). The
method's own result is kept in ``extra["unnormalized"]`` and ``f~`` in ``extra["raw_inverse"]``.
As distributions ``base-pos`` and ``norm-mul`` therefore coincide (they are ``mi-n``/``inv-n``),
and ``norm-sub`` is ``mi-p``/``inv-p``.

``sigma_v^2``: for a pure oracle the paper's ``sigma^2 = q*(1 - q*) / (n (p* - q*)^2)`` (the
variance of ``f~_v`` when ``f_v = 0``, Wang et al., USENIX Security 2017); for another finite
channel the plug-in variance of ``f~_v = sum_j q_j W_jv`` (``W = M^{-1}``):
``(sum_j q_j W_jv^2 - f~_v^2) / n`` at the observed ``q``.
"""
from __future__ import annotations

from collections.abc import Callable
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.estimators.inv import inverse_vector
from localpriv.estimators.oracles import exact_loglik, mi_vector, pure_parameters
from localpriv.estimators.registry import Setting, register_estimator
from localpriv.estimators.result import Fit
from localpriv.mechanisms.krr import KRR
from localpriv.utils.simplex import clip_normalize
from localpriv.utils.validation import LocalPrivError

__all__ = ["METHODS", "DEFAULT_LEVEL", "unbiased_estimate", "noise_variance", "base_pos", "base_cut",
           "cut_threshold", "norm", "norm_mul", "norm_cut", "norm_sub", "power", "power_moments", "power_exponent",
           "power_quadrature", "POWER_CHUNK", "POWER_PANELS", "POWER_WINDOW", "POWER_NODES",
           "postprocess"]

#: the significance level of ``base-cut`` and of the tail of ``power`` (the paper's 0.05)
DEFAULT_LEVEL = 0.05
#: sums within this of 1 count as 1 (``f~`` of k-RR sums to 1 up to rounding)
_ROUNDING = 1e-12
#: grid points of the prior in Power's first integration (log-spaced on [1/n, 1], plus a fine grid around
#: each estimate; ``power_moments`` with ``grid`` or ``near`` given)
_GRID = 1500
#: points of the fine grid around each estimate in ``power``
_NEAR = 400
#: cells integrated together by ``power`` (a ``POWER_CHUNK x 328`` array, or ``x ~1,900`` on the grids)
POWER_CHUNK = 256
#: Power's Gauss-Legendre rule (:func:`power_quadrature`): log-spaced panels of ``[1/n, 1]``, the
#: cuts around each estimate (in units of its noise's standard deviation, each side) and the nodes per panel
POWER_PANELS = 16
POWER_WINDOW = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0)
POWER_NODES = 8
_WINDOW_CUTS = np.concatenate([-np.asarray(POWER_WINDOW)[::-1], [0.0], np.asarray(POWER_WINDOW)])
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(POWER_NODES)


def _is_pure(block: ObservationBlock) -> bool:
    mech = block.mechanism
    return isinstance(mech, KRR) or (getattr(mech, "p_star", None) is not None
                                     and getattr(mech, "q_star", None) is not None)


def unbiased_estimate(block: ObservationBlock) -> np.ndarray:
    """The unbiased frequency estimate ``f~`` of one mechanism's reports, the dispatch of ``mi-*``
    and ``inv-*``: ``(C_v/n - q*)/(p* - q*)`` for a pure oracle, ``q M^{-1}`` otherwise."""
    if _is_pure(block):
        return mi_vector(block)
    return inverse_vector(block.mechanism, block.count_vector())


def noise_variance(block: ObservationBlock, raw: np.ndarray) -> np.ndarray:
    """The variance ``sigma_v^2`` of each entry of ``f~`` (see the module docstring).

    Parameters
    ----------
    block : ObservationBlock
        The reports of one mechanism.
    raw : ndarray
        ``f~`` (:func:`unbiased_estimate`).

    Returns
    -------
    ndarray
        ``q*(1-q*)/(n(p*-q*)^2)`` in every cell for a pure oracle (Wang et al., NDSS 2020, Sec. IV);
        ``(sum_j q_j W_jv^2 - f~_v^2)/n`` with ``W = M^{-1}`` for another finite channel.
    """
    n = float(block.n)
    if _is_pure(block):
        p, q = pure_parameters(block.mechanism)
        return np.full(raw.size, q * (1.0 - q) / (n * (p - q) ** 2))
    M = np.asarray(block.mechanism.channel(), dtype=float)
    c = block.count_vector()
    qhat = c / c.sum()
    W = np.linalg.pinv(M)  # m x k: f~ = q W
    return np.maximum(qhat @ W**2 - raw**2, 0.0) / n


def base_pos(raw: ArrayLike) -> np.ndarray:
    """Base-Pos: ``f'_v = max(f~_v, 0)`` (not normalized)."""
    return np.maximum(np.asarray(raw, dtype=float), 0.0)


def cut_threshold(sigma2: ArrayLike, level: float = DEFAULT_LEVEL) -> np.ndarray:
    """Base-Cut's threshold ``T_v = sigma_v Phi^{-1}(1 - level/d)`` (Wang et al., NDSS 2020, Sec. IV-A)."""
    s2 = np.asarray(sigma2, dtype=float)
    if not 0.0 < level < 1.0:
        raise LocalPrivError(f"base-cut: level must be in (0, 1), got {level!r}")
    return np.sqrt(s2) * NormalDist().inv_cdf(1.0 - level / s2.size)


def base_cut(raw: ArrayLike, sigma2: ArrayLike, level: float = DEFAULT_LEVEL) -> np.ndarray:
    """Base-Cut: ``f'_v = f~_v`` if ``f~_v > T_v`` (:func:`cut_threshold`), else 0 (not normalized)."""
    v = np.asarray(raw, dtype=float)
    return np.where(v > cut_threshold(sigma2, level), v, 0.0)


def norm(raw: ArrayLike) -> np.ndarray:
    """Norm: ``f'_v = f~_v + (1 - sum f~)/d`` (sums to 1, may keep negative entries)."""
    v = np.asarray(raw, dtype=float)
    return v + (1.0 - v.sum()) / v.size


def norm_mul(raw: ArrayLike) -> np.ndarray:
    """Norm-Mul: ``f'_v = max(f~_v, 0) / sum max(f~, 0)`` (uniform if nothing is positive)."""
    return clip_normalize(raw)


def norm_cut(raw: ArrayLike) -> np.ndarray:
    """Norm-Cut: negatives to 0; while the kept entries sum to more than 1, the smallest kept one
    to 0 (the largest entry is always kept; sums within 1e-12 of 1 count as 1). Sums to at most 1
    when the largest entry is <= 1."""
    p = np.maximum(np.asarray(raw, dtype=float), 0.0)
    if p.sum() <= 1.0 + _ROUNDING:
        return p
    order = np.argsort(-p, kind="stable")
    csum = np.cumsum(p[order])
    keep = max(int(np.searchsorted(csum, 1.0 + _ROUNDING, side="right")), 1)  # the top entries summing to <= 1
    out = np.zeros_like(p)
    out[order[:keep]] = p[order[:keep]]
    return out


def norm_sub(raw: ArrayLike, max_iter: int | None = None) -> np.ndarray:
    """Norm-Sub: ``f'_v = max(f~_v + delta, 0)`` with ``sum f' = 1``, by the paper's iteration.

    Starting from every cell, ``delta = (1 - sum_{v in S} f~_v) / |S|`` over the kept set ``S``,
    cells with ``f~_v + delta <= 0`` leave ``S``, repeated until none does (at most ``d`` rounds).
    The fixed point is the Euclidean projection of ``f~`` onto the probability simplex
    (Wang et al., NDSS 2020, Sec. IV-B; equal to Constrained Least Squares, Sec. IV-C).
    """
    v = np.asarray(raw, dtype=float)
    keep = np.ones(v.size, dtype=bool)
    for _ in range(max_iter or v.size):
        delta = (1.0 - v[keep].sum()) / keep.sum()
        drop = keep & (v + delta <= 0.0)
        if not drop.any():
            break
        keep &= ~drop
    return np.where(keep, np.maximum(v + delta, 0.0), 0.0)


def power_exponent(raw: ArrayLike, sigma2: ArrayLike, level: float = DEFAULT_LEVEL) -> float:
    """The exponent ``a`` of the power-law prior, fitted to the tail: the continuous power-law
    maximum-likelihood estimate ``a = 1 + m / sum_i ln(f~_i / x_min)`` (Clauset, Shalizi, Newman,
    SIAM Review 2009, Eq. 3.1) over the ``m`` estimates above ``x_min = max_v T_v``, Base-Cut's
    threshold (:func:`cut_threshold`). ``0`` (a flat prior) when no estimate is significant."""
    v = np.asarray(raw, dtype=float)
    xmin = float(np.max(cut_threshold(sigma2, level)))
    tail = v[v > xmin]
    if tail.size == 0 or xmin <= 0.0:
        return 0.0
    logs = float(np.log(tail / xmin).sum())
    return 1.0 + tail.size / logs if logs > 0 else 0.0


def power_moments(raw: ArrayLike, sigma2: ArrayLike, n: float, exponent: float | None = None,
                  level: float = DEFAULT_LEVEL, grid: int | None = None,
                  near: int | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """Posterior means and variances of each frequency under Power's prior (see :func:`power`).

    ``E[f_v | f~_v]`` and ``Var[f_v | f~_v]`` under ``pi(x) ~ x^{-a}`` on ``[1/n, 1]`` and Gaussian
    noise ``f~_v ~ N(f_v, sigma_v^2)``: the ratios ``Z_1/Z_0`` and ``Z_2/Z_0 - (Z_1/Z_0)^2`` of
    ``Z_m = int_{1/n}^1 x^{m-a} exp(-(f~_v - x)^2 / (2 sigma_v^2)) dx``.

    By default (``grid`` and ``near`` both ``None``) each cell's integrals are a composite
    Gauss-Legendre rule in ``t = ln x`` (:func:`power_quadrature`): :data:`POWER_PANELS` log-spaced
    panels of ``[1/n, 1]`` split further at ``c_v +- h_v u`` for ``u`` in :data:`POWER_WINDOW`
    (``c_v`` the estimate clipped to ``[1/n, 1]``, ``h_v = sigma_v``, or ``sigma_v^2 / |f~_v - c_v|``
    where the estimate lies more than ``sigma_v`` outside), :data:`POWER_NODES` nodes per panel:
    328 points per cell, whose means agree with an adaptive quadrature (:func:`scipy.integrate.quad`)
    within ``1e-8`` relative (variances ``1e-6``; ``tests/test_postprocess.py``). Given ``grid`` or
    ``near``, the integrals are instead sums on the union of ``grid`` log-spaced points and ``near``
    points over ``f~_v +- 8 sigma_v`` (weights: :func:`numpy.gradient` of the distinct points):
    Power's first integration (1,500 and 400 points when only one is given), the reference whose
    error the tests bound the rule's by. Either way :data:`POWER_CHUNK` cells are integrated at a
    time (memory bounded by the chunk). By Tweedie's formula the derivative of the posterior mean in ``f~_v`` is
    ``Var[f_v | f~_v] / sigma_v^2``.

    Parameters
    ----------
    raw, sigma2 : array
        ``f~`` and the variance ``sigma_v^2`` of each entry.
    n : float
        The number of reports (the prior's support starts at ``1/n``).
    exponent : float, optional
        The prior's exponent ``a``; ``None``: :func:`power_exponent`.
    level : float
        The significance level of the tail the exponent is fitted to.
    grid, near : int, optional
        Points of the log-spaced grid and of the fine grid around each estimate (at least 3 each);
        both ``None``: the Gauss-Legendre rule.

    Returns
    -------
    (ndarray, ndarray, float)
        The posterior means, the posterior variances and the exponent ``a``.
    """
    v = np.asarray(raw, dtype=float)
    s2 = np.asarray(sigma2, dtype=float)
    a = power_exponent(v, s2, level) if exponent is None else float(exponent)
    lo = min(1.0 / max(float(n), 1.0), 0.5)
    quadrature = grid is None and near is None
    grid = _GRID if grid is None else grid
    near = _NEAR if near is None else near
    if grid < 3 or near < 3:
        raise LocalPrivError(f"power: the grids need at least 3 points each, got {grid} and {near}")
    mean = np.empty(v.size)
    var = np.zeros(v.size)
    sd = np.sqrt(np.maximum(s2, 0.0))
    flat = sd <= 0.0
    mean[flat] = np.clip(v[flat], lo, 1.0)
    if quadrature:
        rows = np.flatnonzero(~flat)
        for start in range(0, rows.size, POWER_CHUNK):
            idx = rows[start:start + POWER_CHUNK]
            mean[idx], var[idx] = power_quadrature(v[idx], s2[idx], lo, a)
        return mean, var, a
    base = np.geomspace(lo, 1.0, grid)
    left, right = v - 8 * sd, v + 8 * sd
    close = ~flat & (right > lo) & (left < 1.0)
    for rows in (np.flatnonzero(close), np.flatnonzero(~flat & ~close)):
        for start in range(0, rows.size, POWER_CHUNK):
            idx = rows[start:start + POWER_CHUNK]
            mean[idx], var[idx] = _posterior_moments(v[idx], s2[idx], base, a, np.maximum(lo, left[idx]),
                                                     np.minimum(1.0, right[idx]), near if close[idx[0]] else 0)
    return mean, var, a


def power_quadrature(raw: np.ndarray, sigma2: np.ndarray, lo: float, exponent: float) -> tuple[np.ndarray, np.ndarray]:
    """Posterior means and variances of Power's prior by a composite Gauss-Legendre rule, per cell.

    With ``t = ln x`` the integrals of :func:`power_moments` are
    ``Z_m = int_{ln lo}^0 exp((1 + m - a) t - (f~_v - e^t)^2 / (2 sigma_v^2)) dt``. The interval is cut
    at :data:`POWER_PANELS` ``+ 1`` log-spaced points of ``[lo, 1]`` (the prior's scale) and at
    ``c_v + h_v u`` for ``u`` in ``0`` and ``+-`` :data:`POWER_WINDOW` (the likelihood's scale:
    ``c_v`` is ``f~_v`` clipped to ``[lo, 1]``, ``h_v = sigma_v`` when ``|f~_v - c_v| <= sigma_v``,
    else ``sigma_v^2 / |f~_v - c_v|``, the scale of the likelihood's decay at the end of the
    support), the cuts clipped to ``[lo, 1]``; every panel gets the :data:`POWER_NODES`-point
    Gauss-Legendre rule in ``t`` (exact for polynomials of degree ``2 q - 1``; Abramowitz and
    Stegun 25.4.29). The log-weights are shifted by their maximum before exponentiation, so no
    ``Z_m`` under- or overflows. Vectorized over the cells (``cells x 328`` arrays).

    Parameters
    ----------
    raw, sigma2 : ndarray
        ``f~_v`` and ``sigma_v^2 > 0`` of the cells.
    lo : float
        The prior's lower end ``1/n`` (in ``(0, 1)``).
    exponent : float
        The prior's exponent ``a``.

    Returns
    -------
    (ndarray, ndarray)
        ``E[f_v | f~_v]`` and ``Var[f_v | f~_v]``.
    """
    v = np.asarray(raw, dtype=float)
    s2 = np.asarray(sigma2, dtype=float)
    sd = np.sqrt(s2)
    c = np.clip(v, lo, 1.0)
    out = np.abs(v - c)
    h = np.where(out > sd, s2 / np.where(out > sd, out, 1.0), sd)
    cuts = np.concatenate([np.broadcast_to(np.geomspace(lo, 1.0, POWER_PANELS + 1), (v.size, POWER_PANELS + 1)),
                           c[:, None] + h[:, None] * _WINDOW_CUTS[None, :]], axis=1)
    t = np.log(np.sort(np.clip(cuts, lo, 1.0), axis=1))
    half = (t[:, 1:] - t[:, :-1]) / 2.0
    mid = (t[:, 1:] + t[:, :-1]) / 2.0
    tt = (mid[:, :, None] + half[:, :, None] * _GL_NODES).reshape(v.size, -1)
    ww = (half[:, :, None] * _GL_WEIGHTS).reshape(v.size, -1)
    x = np.exp(tt)
    with np.errstate(divide="ignore"):  # empty panels (cuts that coincide) have weight 0
        logw = np.log(ww) + (1.0 - exponent) * tt - 0.5 * (v[:, None] - x) ** 2 / s2[:, None]
    return _weighted_moments(x, logw)


def _weighted_moments(x: np.ndarray, logw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance along each row of the points ``x`` with log weights ``logw`` (normalized
    per row, the largest weight taken out first so that no row underflows)."""
    logw = logw - logw.max(axis=1, keepdims=True)
    wt = np.exp(logw)
    tot = wt.sum(axis=1)
    mean = (wt * x).sum(axis=1) / tot
    var = np.maximum((wt * (x - mean[:, None]) ** 2).sum(axis=1) / tot, 0.0)
    return mean, var


def _posterior_moments(fv: np.ndarray, s2v: np.ndarray, base: np.ndarray, a: float, start: np.ndarray,
                       stop: np.ndarray, near: int) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and variance of a chunk of cells (rows) on the grid of :func:`power_moments`.

    The merged grid of a row is ``base`` and ``near`` points (none if ``0``) from ``start`` to
    ``stop``, sorted. An interior value present twice gets the weights ``(x_i - x_{i-1})/2`` and
    ``(x_{i+2} - x_i)/2``, which sum to the weight of the value once: the integral is that of the
    distinct points; a value twice at an end (the fine grid clipped at ``lo`` or at 1) is given the
    end weight of the distinct points."""
    if near:
        t = np.linspace(0.0, 1.0, near)
        fine = start[:, None] + (stop - start)[:, None] * t[None, :]
        fine[:, -1] = stop
        x = np.sort(np.concatenate([np.broadcast_to(base, (fv.size, base.size)), fine], axis=1), axis=1)
    else:
        x = np.broadcast_to(base, (fv.size, base.size))
    w = np.gradient(x, axis=1)
    head = x[:, 0] == x[:, 1]
    w[head, 0] += (x[head, 2] - x[head, 0]) / 2.0
    tail = x[:, -1] == x[:, -2]
    w[tail, -1] += (x[tail, -1] - x[tail, -3]) / 2.0
    with np.errstate(divide="ignore"):
        logw = np.log(w) - a * np.log(x) - 0.5 * (fv[:, None] - x) ** 2 / s2v[:, None]
    return _weighted_moments(x, logw)


def power(raw: ArrayLike, sigma2: ArrayLike, n: float, exponent: float | None = None,
          level: float = DEFAULT_LEVEL) -> tuple[np.ndarray, float]:
    """Power: the posterior mean of each frequency under a power-law prior (not normalized).

    ``f'_v = int x pi(x) phi((f~_v - x)/sigma_v) dx / int pi(x) phi((f~_v - x)/sigma_v) dx`` with
    ``pi(x) ~ x^{-a}`` on ``[1/n, 1]`` and ``phi`` the standard normal density: the estimate
    minimizing the expected squared error given ``f~_v`` (Wang et al., NDSS 2020, Sec. IV-E).
    Integrated by a composite Gauss-Legendre rule adapted to each estimate (:func:`power_moments`).

    Returns
    -------
    (ndarray, float)
        The posterior means and the exponent ``a`` (:func:`power_exponent` unless given).
    """
    mean, _var, a = power_moments(raw, sigma2, n, exponent, level)
    return mean, a


#: the method names and their one-line summaries
METHODS: dict[str, str] = {
    "base-pos": "negatives of the unbiased estimate set to 0, then normalized",
    "base-cut": "entries of the unbiased estimate below the significance threshold set to 0, then normalized",
    "norm": "a constant added to the unbiased estimate so it sums to 1 (negatives then clipped)",
    "norm-mul": "negatives of the unbiased estimate clipped, the rest multiplied to sum 1",
    "norm-cut": "negatives clipped, the smallest entries set to 0 until the rest sums to at most 1",
    "norm-sub": "a constant subtracted and negatives clipped so the sum is 1 (projection onto the simplex)",
    "power": "posterior means under a power-law prior fitted to the tail, then normalized",
    "power-ns": "posterior means under a power-law prior, then Norm-Sub",
}


def postprocess(obs: Observations, *, method: str, level: float = DEFAULT_LEVEL, exponent: float | None = None,
                loglik: bool = False) -> Fit:
    """One of Wang et al.'s post-processing methods on the unbiased estimate of one mechanism.

    Parameters
    ----------
    obs : Observations
        The reports of one mechanism with an unbiased estimator (a pure frequency oracle, or a
        finite invertible channel).
    method : str
        One of :data:`METHODS`.
    level : float
        The significance level of Base-Cut's threshold (and of the tail Power fits).
    exponent : float, optional
        Power's prior exponent ``a``; ``None``: fitted (:func:`power_exponent`).
    loglik : bool
        Also compute the exact log-likelihood of the reports at the estimate.

    Returns
    -------
    Fit
        ``extra["raw_inverse"]`` holds ``f~``, ``extra["unnormalized"]`` the method's own result
        (before the final normalization), ``extra["variance"]`` ``sigma_v^2`` where it is used.
    """
    if method not in METHODS:
        raise LocalPrivError(f"unknown post-processing {method!r}; choose one of {', '.join(METHODS)}")
    block = obs.single(method)
    raw = unbiased_estimate(block)
    extra: dict[str, Any] = {"raw_inverse": raw}
    settings: dict[str, Any] = {}
    if method in ("base-cut", "power", "power-ns"):
        s2 = noise_variance(block, raw)
        extra["variance"] = s2
        settings["level"] = level
    if method == "base-pos":
        out = base_pos(raw)
    elif method == "base-cut":
        extra["threshold"] = cut_threshold(s2, level)
        out = base_cut(raw, s2, level)
    elif method == "norm":
        out = norm(raw)
    elif method == "norm-mul":
        out = norm_mul(raw)
    elif method == "norm-cut":
        out = norm_cut(raw)
    elif method == "norm-sub":
        out = norm_sub(raw)
    else:
        out, a = power(raw, s2, obs.n, exponent, level)
        extra["exponent"] = a
        settings["exponent"] = exponent
        if method == "power-ns":
            out = norm_sub(out)
    extra["unnormalized"] = out
    theta = clip_normalize(out)
    return Fit(theta, obs.domain, method, settings, loglik=exact_loglik(obs, theta) if loglik else None,
               n=obs.n, extra=extra)


_LOGLIK = Setting("loglik", "bool", False, "also compute the exact log-likelihood of the reports at the estimate")
_LEVEL = Setting("level", "float", DEFAULT_LEVEL, "significance level of the cut threshold "
                 "sigma Phi^-1(1 - level/d)", low=0.0, high=1.0, low_open=True, high_open=True)
_EXPONENT = Setting("exponent", "float", None, "exponent a of the power-law prior x^-a; none: fitted to the "
                    "estimates above the cut threshold", low=0.0, nullable=True)
_SETTINGS: dict[str, tuple[Setting, ...]] = {
    "base-cut": (_LEVEL, _LOGLIK), "power": (_LEVEL, _EXPONENT, _LOGLIK), "power-ns": (_LEVEL, _EXPONENT, _LOGLIK)}


def _estimator(method: str) -> Callable[..., Fit]:
    def run(obs: Observations, **settings: Any) -> Fit:
        return postprocess(obs, method=method, **settings)
    run.__name__ = method.replace("-", "_")
    run.__doc__ = f"{method}: {METHODS[method]} (Wang et al., NDSS 2020)."
    return run


for _name, _summary in METHODS.items():
    register_estimator(_name, _estimator(_name), summary=f"{_summary} (Wang et al. NDSS 2020; one mechanism)",
                       tags={"single-mechanism"}, settings=_SETTINGS.get(_name, (_LOGLIK,)))
