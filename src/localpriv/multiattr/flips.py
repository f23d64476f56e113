"""How often Laplace noise flips an independence verdict (thesis, seed 004 chapter 7).

The thesis integrates the Laplace density over the regions where ``G^2 - G^2_c`` changes sign
(Eq. 7.7, done in Mathematica, with a Chebyshev bound on the integration box, Lemma 7.3.1). We
estimate the same probability by Monte Carlo instead: draw ``trials`` noisy copies
``T' = T + Lap(2/eps)`` (independent per cell), recompute the statistic on each and count how
often the verdict at level ``alpha`` differs from the verdict on ``T``. The estimate carries its
binomial standard error; no box truncation is needed.

Negative noisy cells are set to 0 before the statistic (a count table cannot be negative; the
thesis leaves this case undefined, its ``ln(w / (w - x))`` is not real there).
"""
from __future__ import annotations

import numpy as np
from scipy.stats import chi2 as chi2_dist

from .._validation import LocalPrivError, check_eps, check_int, check_rng

__all__ = ["stack_statistic", "flip_probability", "acceptance_rate", "g2_table_grid"]


def stack_statistic(tables, statistic: str = "g2") -> np.ndarray:
    """``G^2`` or Pearson ``chi^2`` of ``A ⊥ B | C`` for a stack ``(trials, |A|, |B|[, |C|])``."""
    t = np.asarray(tables, dtype=float)
    if t.ndim == 3:
        t = t[..., None]
    if t.ndim != 4:
        raise LocalPrivError("tables must be (trials, |A|, |B|) or (trials, |A|, |B|, |C|)")
    ra = t.sum(axis=2, keepdims=True)
    cb = t.sum(axis=1, keepdims=True)
    tot = t.sum(axis=(1, 2), keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.where(tot > 0, ra * cb / tot, 0.0)
        if statistic == "g2":
            terms = np.where((t > 0) & (m > 0), t * np.log(t / np.where(m > 0, m, 1)), 0.0)
            return 2 * terms.sum(axis=(1, 2, 3))
        if statistic == "chi2":
            terms = np.where(m > 0, (t - m) ** 2 / np.where(m > 0, m, 1), 0.0)
            return terms.sum(axis=(1, 2, 3))
    raise LocalPrivError(f"statistic must be 'g2' or 'chi2', got {statistic!r}")


def _dof(shape):
    c = shape[2] if len(shape) == 3 else 1
    return (shape[0] - 1) * (shape[1] - 1) * c


def flip_probability(table, eps: float, rng, *, trials: int = 10_000, alpha: float = 0.05,
                     statistic: str = "g2") -> tuple[float, float]:
    """Monte Carlo probability that ``Lap(2/eps)`` noise changes the verdict on ``table``.

    Returns ``(probability, standard error)``. ``table`` is ``(|A|, |B|)`` or ``(|A|, |B|, |C|)``.
    """
    eps = check_eps(eps)
    rng = check_rng(rng)
    trials = check_int(trials, "trials", minimum=1)
    t = np.asarray(table, dtype=float)
    crit = chi2_dist.ppf(1 - alpha, _dof(t.shape))
    truth = stack_statistic(t[None], statistic)[0] > crit
    noisy = np.clip(t[None] + rng.laplace(0, 2 / eps, size=(trials,) + t.shape), 0, None)
    verdict = stack_statistic(noisy, statistic) > crit
    p = float(np.mean(verdict != truth))
    return p, float(np.sqrt(max(p * (1 - p), 1e-12) / trials))


def acceptance_rate(table, eps: float, rng, *, trials: int = 1000, alpha: float = 0.05,
                    statistic: str = "chi2") -> float:
    """Fraction of ``Lap(2/eps)``-noised copies of ``table`` on which ``H0`` is accepted."""
    eps = check_eps(eps)
    rng = check_rng(rng)
    t = np.asarray(table, dtype=float)
    crit = chi2_dist.ppf(1 - alpha, _dof(t.shape))
    noisy = np.clip(t[None] + rng.laplace(0, 2 / eps, size=(trials,) + t.shape), 0, None)
    return float(np.mean(stack_statistic(noisy, statistic) <= crit))


def g2_table_grid(n: int, steps: int = 40, max_shift: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """2x2 tables of total ``n`` with all margins ``n/2`` and growing dependence:
    ``[[n/4 + s, n/4 - s], [n/4 - s, n/4 + s]]`` for ``s`` from 0 to ``max_shift``
    (default ``n/16``). Returns ``(tables (steps, 2, 2), their G^2)`` (Figure 7.3's x-axis)."""
    n = check_int(n, "n", minimum=8)
    s = np.linspace(0, n / 16 if max_shift is None else max_shift, steps)
    q = n / 4
    tables = np.stack([np.stack([q + s, q - s], -1), np.stack([q - s, q + s], -1)], 1)
    return tables, stack_statistic(tables, "g2")
