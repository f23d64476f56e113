"""Independence tests on noisy contingency tables (thesis, seed 004 sections 4.6 and 4.7.3).

* :func:`chi2_test` / :func:`g2_statistic` -- the classical tests of ``A ⊥ B | C`` on a table of
  counts (Eqs. 4.8-4.9; for ``C`` empty, plain independence), with
  ``m[a,b,c] = T[a,.,c] T[.,b,c] / T[.,.,c]`` and ``(|A|-1)(|B|-1)|C|`` degrees of freedom;
* :func:`two_step_table` -- step one of the two-step MLE: Eq. 4.10,
  ``min gamma ||T - T_hat||_1 + (1-gamma) ||T - T_hat||_2^2`` s.t. ``sum T_hat = n``,
  ``T_hat >= 0``; separable but for the total, so solved exactly: for a multiplier ``lam`` each
  cell is ``max(0, t + sign(lam) max(|lam| - gamma, 0) / (2 (1-gamma)))`` and ``lam`` is found by
  bisection on the total;
* :func:`mc_independence_test` -- the Monte Carlo test of section 4.7.3: ``l > 1/alpha`` tables
  drawn from the fitted null, pushed through the *same* noise process and two-step fit; reject
  when the observed statistic exceeds the ``ceil((l+1)(1-alpha))``-th smallest simulated one;
* noise processes: :func:`rrba_noisy_counts` (an RRBA round on a table of counts, read back by
  Eq. 4.3) and :func:`laplace_noisy_counts` (``Lap(2/eps)`` per cell, the baseline).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.stats import chi2 as chi2_dist

from localpriv.utils.validation import LocalPrivError, check_eps, check_rng

__all__ = ["expected_counts", "chi2_statistic", "g2_statistic", "chi2_test", "two_step_table",
           "rrba_noisy_counts", "laplace_noisy_counts", "TestResult", "mc_independence_test",
           "noisy_chi2_test"]


def _split(table, a, b):
    t = np.asarray(table, dtype=float)
    if t.ndim < 2:
        raise LocalPrivError("an independence test needs a table with at least 2 attributes")
    rest = [i for i in range(t.ndim) if i not in (a, b)]
    return np.transpose(t, [a, b] + rest).reshape(t.shape[a], t.shape[b], -1)


def expected_counts(table: npt.ArrayLike, a: int = 0, b: int = 1) -> np.ndarray:
    """MLE of the cell counts under ``A ⊥ B | rest`` (Eq. 4.9 per stratum), shape ``(|A|,|B|,|C|)``."""
    t = _split(table, a, b)
    ra = t.sum(axis=1, keepdims=True)
    cb = t.sum(axis=0, keepdims=True)
    tot = t.sum(axis=(0, 1), keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, ra * cb / tot, 0.0)


def chi2_statistic(table: npt.ArrayLike, a: int = 0, b: int = 1) -> float:
    """Pearson's ``sum (T - m)^2 / m`` over cells with ``m > 0`` (Eq. 4.8)."""
    t = _split(table, a, b)
    m = expected_counts(table, a, b)
    live = m > 0
    return float(((t[live] - m[live]) ** 2 / m[live]).sum())


def g2_statistic(table: npt.ArrayLike, a: int = 0, b: int = 1) -> float:
    """``G^2 = 2 sum T ln(T / m)`` (the likelihood-ratio statistic of chapter 7)."""
    t = _split(table, a, b)
    m = expected_counts(table, a, b)
    live = (t > 0) & (m > 0)
    return float(2 * (t[live] * np.log(t[live] / m[live])).sum())


def _dof(table, a, b):
    t = np.asarray(table)
    rest = int(np.prod([t.shape[i] for i in range(t.ndim) if i not in (a, b)]))
    return (t.shape[a] - 1) * (t.shape[b] - 1) * rest


def chi2_test(table: npt.ArrayLike, alpha: float = 0.05, a: int = 0, b: int = 1, min_cell: float = 0.0,
              statistic: str = "chi2") -> bool:
    """``True`` when ``H0: A ⊥ B | rest`` is rejected at level ``alpha``.

    ``min_cell``: the thesis's rule of thumb accepts ``H0`` when a cell is below 5 (pass 5).
    """
    stat = chi2_statistic(table, a, b) if statistic == "chi2" else g2_statistic(table, a, b)
    if min_cell and np.asarray(table).min() < min_cell:
        return False
    return bool(stat > chi2_dist.ppf(1 - alpha, _dof(table, a, b)))


def two_step_table(noisy: npt.ArrayLike, n: float, gamma: float = 0.01, tol: float = 1e-10,
                   stacked: bool = False) -> np.ndarray:
    """Step one of the two-step MLE: the non-negative table of total ``n`` nearest the noisy one
    in the elastic-net sense of Eq. 4.10 (exact solution, see the module docstring).

    ``noisy`` is one table of any shape, or with ``stacked=True`` a ``(tables, cells)`` array
    (``n`` a scalar or one total per table).
    """
    if not 0 <= gamma < 1:
        raise LocalPrivError(f"gamma must be in [0, 1), got {gamma}")
    t = np.asarray(noisy, dtype=float)
    shape = t.shape
    if stacked:
        if t.ndim != 2:
            raise LocalPrivError("stacked tables must be a (tables, cells) array")
        flat = t
    else:
        flat = t.reshape(1, -1)
    nn = np.broadcast_to(np.asarray(n, dtype=float), (flat.shape[0],)).copy()
    if np.any(nn <= 0):
        raise LocalPrivError("the total n must be positive")
    scale = 2 * (1 - gamma)

    def fill(lam):
        shift = np.sign(lam) * np.maximum(np.abs(lam) - gamma, 0) / scale
        return np.maximum(flat + shift[:, None], 0)

    lo = np.full(flat.shape[0], -1.0)
    hi = np.full(flat.shape[0], 1.0)
    while np.any(fill(lo).sum(1) > nn):
        lo = np.where(fill(lo).sum(1) > nn, lo * 2, lo)
    while np.any(fill(hi).sum(1) < nn):
        hi = np.where(fill(hi).sum(1) < nn, hi * 2, hi)
    for _ in range(200):
        mid = (lo + hi) / 2
        s = fill(mid).sum(1)
        lo = np.where(s < nn, mid, lo)
        hi = np.where(s >= nn, mid, hi)
        if np.all(hi - lo < tol * np.maximum(1, np.abs(hi))):
            break
    out = fill(hi)
    out *= (nn / np.where(out.sum(1) > 0, out.sum(1), 1))[:, None]
    return out.reshape(shape)


def rrba_noisy_counts(counts: npt.ArrayLike, p: float, rng: np.random.Generator | int, T=None) -> np.ndarray:
    """One RRBA round on tables of true counts, read back by Eq. 4.3 (times ``n``, Eq. 4.5).

    ``counts`` is ``(cells,)`` or ``(tables, cells)``. Each user keeps its cell w.p. ``p``
    (``Binomial(count, p)`` per cell) and the others' fakes are ``Multinomial(fakes, T)``
    (uniform ``T`` by default, Eq. 4.1). Returns ``(o - (1-p) n T) / p``.
    """
    rng = check_rng(rng)
    c = np.atleast_2d(np.asarray(counts)).astype(np.int64)
    k = c.shape[1]
    T = np.full(k, 1.0 / k) if T is None else np.asarray(T, dtype=float).ravel()
    kept = rng.binomial(c, p)
    fakes = rng.multinomial(c.sum(1) - kept.sum(1), T)
    o = kept + fakes
    n = c.sum(1, keepdims=True)
    out = (o - (1 - p) * n * T) / p
    return out.reshape(np.shape(counts))


def laplace_noisy_counts(counts: npt.ArrayLike, eps: float, rng: np.random.Generator | int) -> np.ndarray:
    """Counts plus independent ``Lap(2/eps)`` noise per cell (the thesis's baseline)."""
    eps = check_eps(eps)
    rng = check_rng(rng)
    c = np.asarray(counts, dtype=float)
    return c + rng.laplace(0.0, 2.0 / eps, size=c.shape)


@dataclass
class TestResult:
    reject: bool
    statistic: float
    threshold: float
    fitted: np.ndarray


def mc_independence_test(noisy: npt.ArrayLike, n: int, noise: Callable, rng: np.random.Generator | int, *, shape=None,
                         alpha: float = 0.05, l: int | None = None, gamma: float = 0.01, a: int = 0, b: int = 1,
                         min_cell: float = 0.0) -> TestResult:
    """Monte Carlo independence test on a noisy table (section 4.7.3).

    1. two-step fit ``T_hat`` of the noisy table (Eq. 4.10), null MLE ``m`` from ``T_hat``
       (Eq. 4.9) and the statistic ``chi2(T_hat)``;
    2. ``l`` tables ``~ Multinomial(n, m/n)``, each through ``noise(counts (l, cells), rng)`` and the
       same two-step fit, giving ``l`` null statistics;
    3. reject when the statistic exceeds the ``ceil((l+1)(1-alpha))``-th smallest of them.

    ``min_cell`` > 0 applies the thesis's "accept when a fitted cell < 5" rule.
    """
    rng = check_rng(rng)
    shape = np.shape(noisy) if shape is None else tuple(shape)
    l = int(np.ceil(1 / alpha)) * 2 if l is None else int(l)
    if l <= 1 / alpha:
        raise LocalPrivError(f"l must exceed 1/alpha = {1 / alpha:g}")
    fit = two_step_table(np.asarray(noisy, dtype=float).ravel(), n, gamma).reshape(shape)
    stat = chi2_statistic(fit, a, b)
    m = expected_counts(fit, a, b)                          # (|A|, |B|, |C|)
    # back to the table's axis order
    axes = [a, b] + [i for i in range(len(shape)) if i not in (a, b)]
    m_full = np.transpose(m.reshape([shape[i] for i in axes]), np.argsort(axes))
    probs = m_full.ravel() / m_full.sum()
    sims = rng.multinomial(int(n), probs, size=l)
    noisy_sims = noise(sims, rng)
    fits = two_step_table(noisy_sims, n, gamma, stacked=True)
    null = np.array([chi2_statistic(f.reshape(shape), a, b) for f in fits])
    rank = int(np.ceil((l + 1) * (1 - alpha)))
    thr = float(np.sort(null)[min(rank, l) - 1])
    reject = stat > thr
    if min_cell and fit.min() < min_cell:
        reject = False
    return TestResult(bool(reject), stat, thr, fit)


def noisy_chi2_test(noisy: npt.ArrayLike, n: int, *, alpha: float = 0.05, gamma: float = 0.01, a: int = 0,
                    b: int = 1, min_cell: float = 0.0) -> TestResult:
    """Two-step fit, then the classical chi-square critical value (ignores the noise)."""
    fit = two_step_table(np.asarray(noisy, dtype=float).ravel(), n, gamma).reshape(np.shape(noisy))
    stat = chi2_statistic(fit, a, b)
    thr = float(chi2_dist.ppf(1 - alpha, _dof(fit, a, b)))
    reject = stat > thr and not (min_cell and fit.min() < min_cell)
    return TestResult(bool(reject), stat, thr, fit)
