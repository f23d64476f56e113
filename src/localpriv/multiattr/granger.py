"""Granger causality on multivariate time series (thesis, seed 004 section 6.4), with NumPy/SciPy.

* :func:`granger_test` -- Eqs. 6.1-6.2: the F-test of ``H0: alpha_1 = ... = alpha_q = 0`` in
  ``B_t = c + sum_{l=1..q} beta_l B_{t-l} [+ sum_l alpha_l A_{t-l}] + e_t`` (restricted vs.
  unrestricted OLS), ``F = ((RSS_r - RSS_u) / q) / (RSS_u / (T - k_u))`` against ``F(q, T - k_u)``
  (``T`` usable observations, ``k_u = 1 + 2q`` unrestricted coefficients). The thesis prints the
  equations without the constant; we include it, as every standard implementation does.
  ``given=`` adds the lags of further series to both models (conditional Granger causality);
* :func:`var_lag_order` -- "the maximum-lag order q was selected automatically according to the
  AIC criteria": VAR(p) fitted by OLS for ``p = 0..max_lag`` on the same sample, ``AIC(p) = ln
  det Sigma_p + 2 p K^2 / T`` (Lutkepohl, *New Introduction to Multiple Time Series Analysis*,
  2005, eq. 4.3.2; ``Sigma_p`` the ML residual covariance);
* :func:`adf_test` and :func:`stationarize` -- the thesis's preprocessing: augmented Dickey-Fuller
  test (constant, lagged differences chosen by AIC) at level 0.05, first-differencing each
  non-stationary feature until the test rejects a unit root. Critical values from MacKinnon's
  response surfaces (``tau = b_inf + b_1/T + b_2/T^2``, constant, one variable; MacKinnon 2010,
  "Critical values for cointegration tests", Queen's QED WP 1227, Table 2);
* :func:`granger_matrix` -- Eq. 6.3: ``G[i, j] = 1`` when ``S_i`` Granger-causes ``S_j`` at level
  ``alpha`` (the thesis uses 0.1), every ordered pair;
* :func:`ljung_box` -- ``Q = n (n+2) sum_{k=1..h} r_k^2 / (n - k)`` against ``chi2_h`` (Ljung & Box
  1978 [122]; the thesis's ``h = 20`` check of section 6.5.2).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import chdtrc, fdtrc

from localpriv.utils.validation import LocalPrivError, check_int

__all__ = ["lagged", "ols_rss", "granger_test", "var_lag_order", "adf_test", "stationarize",
           "granger_matrix", "ljung_box", "MACKINNON_C"]

#: MacKinnon (2010) response-surface coefficients (b_inf, b_1, b_2), constant, one variable
MACKINNON_C = {0.01: (-3.43035, -6.5393, -16.786), 0.05: (-2.86154, -2.8903, -4.234),
               0.10: (-2.56677, -1.5384, -2.809)}


def _series(x: npt.ArrayLike, name: str = "series") -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(x)):
        raise LocalPrivError(f"{name} contains NaN or infinite values")
    return x


def lagged(x: npt.ArrayLike, q: int, start: int | None = None) -> np.ndarray:
    """``[x_{t-1}, ..., x_{t-q}]`` for ``t = start..len(x)-1`` (``start`` defaults to ``q``): a
    ``(len(x) - start) x (q * columns)`` matrix, lag-major for a 2-D ``x``."""
    x = np.asarray(x, dtype=float)
    x2 = x[:, None] if x.ndim == 1 else x
    start = q if start is None else start
    if start < q:
        raise LocalPrivError(f"lagged: start {start} below the lag {q}")
    T = x2.shape[0]
    return np.hstack([x2[start - l: T - l] for l in range(1, q + 1)]) if q else np.empty((T - start, 0))


def ols_rss(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Least squares ``y ~ X`` (``X`` already holds the constant column): coefficients and RSS."""
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    r = y - X @ coef
    return coef, float(r @ r)


def granger_test(cause: npt.ArrayLike, effect: npt.ArrayLike, q: int,
                 given: npt.ArrayLike | None = None) -> dict[str, Any]:
    """Does ``cause`` Granger-cause ``effect`` with ``q`` lags (Eqs. 6.1-6.2)? Returns
    ``{"F", "p", "df": (q, T - k_u), "T"}``; ``given`` is an optional ``T x m`` array of series
    whose lags enter both models."""
    q = check_int(q, "q", minimum=1)
    a, b = _series(cause, "cause"), _series(effect, "effect")
    if a.shape != b.shape or a.ndim != 1:
        raise LocalPrivError(f"granger_test: cause and effect must be equal-length 1-D series, "
                             f"got {a.shape}, {b.shape}")
    T = b.size - q
    const = np.ones((T, 1))
    blocks = [const, lagged(b, q)]
    if given is not None:
        g = _series(given, "given")
        g = g[:, None] if g.ndim == 1 else g
        if g.shape[0] != b.size:
            raise LocalPrivError("granger_test: the conditioning series have another length")
        blocks.append(lagged(g, q))
    Xr = np.hstack(blocks)
    Xu = np.hstack([Xr, lagged(a, q)])
    dfd = T - Xu.shape[1]
    if dfd < 1:
        raise LocalPrivError(f"granger_test: {b.size} observations are too few for {q} lags")
    y = b[q:]
    _, rss_r = ols_rss(Xr, y)
    _, rss_u = ols_rss(Xu, y)
    if rss_u <= 0:
        return {"F": float("inf"), "p": 0.0, "df": (q, dfd), "T": T}
    F = max((rss_r - rss_u) / q, 0.0) / (rss_u / dfd)
    return {"F": float(F), "p": float(fdtrc(q, dfd, F)), "df": (q, dfd), "T": T}


def var_lag_order(Y: npt.ArrayLike, max_lag: int) -> dict[str, Any]:
    """AIC lag order of a VAR on the ``T x K`` array ``Y`` (see module). Every order is fitted
    on observations ``max_lag..T-1`` so that the criteria are comparable. Returns ``{"order",
    "aic": [AIC(0), ..., AIC(max_lag)]}``."""
    Y = _series(Y, "Y")
    Y = Y[:, None] if Y.ndim == 1 else Y
    max_lag = check_int(max_lag, "max_lag", minimum=0)
    T_all, K = Y.shape
    T = T_all - max_lag
    if 1 + K * max_lag >= T:
        raise LocalPrivError(f"var_lag_order: {T_all} observations are too few for {max_lag} lags of {K} series")
    y = Y[max_lag:]
    aic = []
    for p in range(max_lag + 1):
        X = np.hstack([np.ones((T, 1)), lagged(Y, p, start=max_lag)])
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        E = y - X @ coef
        sign, logdet = np.linalg.slogdet(E.T @ E / T)
        aic.append(float(logdet + 2 * p * K * K / T) if sign > 0 else -np.inf)
    return {"order": int(np.argmin(aic)), "aic": aic}


def adf_test(x: npt.ArrayLike, max_lag: int | None = None, level: float = 0.05) -> dict[str, Any]:
    """Augmented Dickey-Fuller test with a constant: ``dx_t = c + g x_{t-1} + sum_{i=1..m} d_i
    dx_{t-i} + e_t``, ``m <= max_lag`` chosen by AIC (default ``max_lag = floor(12 (T/100)^(1/4))``,
    Schwert's rule), statistic = the t-ratio of ``g``; a unit root is rejected (``stationary``)
    when it is below MacKinnon's critical value for the regression's sample size."""
    x = _series(x, "x")
    if level not in MACKINNON_C:
        raise LocalPrivError(f"adf_test: level must be one of {sorted(MACKINNON_C)}, got {level}")
    if x.size < 10:
        raise LocalPrivError(f"adf_test: {x.size} observations are too few")
    dx = np.diff(x)
    if max_lag is None:
        max_lag = int(12 * (x.size / 100) ** 0.25)
    max_lag = max(0, min(int(max_lag), dx.size // 3))
    start = max_lag  # same sample for every m
    y = dx[start:]
    T = y.size
    best: tuple[float, int, np.ndarray, np.ndarray, float] | None = None
    for m in range(max_lag + 1):
        X = np.hstack([np.ones((T, 1)), x[start: start + T, None], lagged(dx, m, start=start)])
        coef, rss = ols_rss(X, y)
        aic = T * np.log(max(rss, 1e-300) / T) + 2 * X.shape[1]
        if best is None or aic < best[0]:
            best = (aic, m, X, coef, rss)
    assert best is not None  # max_lag >= 0: the loop ran at least once
    m = best[1]  # refit with the chosen number of lagged differences on its longest sample
    y = dx[m:]
    T = y.size
    X = np.hstack([np.ones((T, 1)), x[m: m + T, None], lagged(dx, m, start=m)])
    coef, rss = ols_rss(X, y)
    dof = T - X.shape[1]
    s2 = rss / max(dof, 1)
    cov = s2 * np.linalg.pinv(X.T @ X)
    tstat = float(coef[1] / np.sqrt(max(cov[1, 1], 1e-300)))
    b0, b1, b2 = MACKINNON_C[level]
    crit = b0 + b1 / T + b2 / T ** 2
    return {"stat": tstat, "critical": float(crit), "lags": int(m), "stationary": bool(tstat < crit), "T": T}


def stationarize(Y: npt.ArrayLike, level: float = 0.05, max_diff: int = 2) -> tuple[np.ndarray, list[int]]:
    """Difference each column of ``Y`` until :func:`adf_test` rejects a unit root (at most
    ``max_diff`` times), then drop the first rows so that all columns have the same length.
    Returns the array and the number of differences of each column."""
    Y = _series(Y, "Y")
    Y = Y[:, None] if Y.ndim == 1 else Y
    cols, nd = [], []
    for j in range(Y.shape[1]):
        c, k = Y[:, j], 0
        while k < max_diff and np.ptp(c) > 0 and not adf_test(c, level=level)["stationary"]:
            c, k = np.diff(c), k + 1
        cols.append(c)
        nd.append(k)
    L = min(c.size for c in cols)
    return np.column_stack([c[c.size - L:] for c in cols]), nd


def granger_matrix(Y: npt.ArrayLike, *, q: int | None = None, max_lag: int = 5, alpha: float = 0.1,
                   conditional: bool = False) -> dict[str, Any]:
    """Eq. 6.3 for the ``T x K`` array ``Y`` (already stationary): ``G[i, j] = 1`` when
    ``p(S_i => S_j) < alpha``. The lag ``q`` is the VAR's AIC order (at least 1) unless given;
    ``conditional=True`` puts the lags of the other ``K - 2`` series in both models (the test
    inside the full VAR) instead of the thesis's pairwise Eqs. 6.1-6.2."""
    Y = _series(Y, "Y")
    if Y.ndim != 2 or Y.shape[1] < 2:
        raise LocalPrivError("granger_matrix: Y must be T x K with K >= 2")
    K = Y.shape[1]
    if q is None:
        q = max(var_lag_order(Y, max_lag)["order"], 1)
    P = np.full((K, K), np.nan)
    for i in range(K):
        for j in range(K):
            if i != j:
                given = np.delete(Y, [i, j], axis=1) if conditional and K > 2 else None
                P[i, j] = granger_test(Y[:, i], Y[:, j], q, given=given)["p"]
    G = np.zeros((K, K), dtype=bool)
    off = ~np.eye(K, dtype=bool)
    G[off] = P[off] < alpha
    return {"G": G, "p": P, "q": int(q)}


def ljung_box(x: npt.ArrayLike, h: int = 20) -> dict[str, Any]:
    """Ljung-Box portmanteau test of no autocorrelation up to lag ``h`` (see module)."""
    x = _series(x, "x")
    h = check_int(h, "h", minimum=1)
    n = x.size
    if n <= h + 1:
        raise LocalPrivError(f"ljung_box: {n} observations are too few for h = {h}")
    c = x - x.mean()
    denom = c @ c
    if denom == 0:
        return {"Q": 0.0, "p": 1.0}
    r = np.array([c[k:] @ c[:-k] for k in range(1, h + 1)]) / denom
    Q = float(n * (n + 2) * np.sum(r ** 2 / (n - np.arange(1, h + 1))))
    return {"Q": Q, "p": float(chdtrc(h, Q))}
