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
import numpy.typing as npt
from scipy.stats import chi2 as chi2_dist

from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

__all__ = ["stack_statistic", "flip_probability", "acceptance_rate", "g2_table_grid", "eq77_as_written",
           "lemma_7_3_1"]


def stack_statistic(tables: npt.ArrayLike, statistic: str = "g2") -> np.ndarray:
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


def flip_probability(table: npt.ArrayLike, eps: float, rng: np.random.Generator | int, *, trials: int = 10_000,
                     alpha: float = 0.05, statistic: str = "g2") -> tuple[float, float]:
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


def acceptance_rate(table: npt.ArrayLike, eps: float, rng: np.random.Generator | int, *, trials: int = 1000,
                    alpha: float = 0.05, statistic: str = "chi2") -> float:
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


# ---- section 7.3 as printed: Eq. 7.7 and Lemma 7.3.1 ----------------------------------------------
def lemma_7_3_1(eps: float, k: float = 9.0) -> dict:
    """The numbers of Lemma 7.3.1 (seed 004, section 7.3) recomputed, beside the exact ones.

    The lemma boxes each noise variable ``x_i ~ Lap(0, b)``, ``b = 2/eps``, in ``+- k sigma`` with
    ``k = 9`` and the printed ``sigma = sqrt(2 * 2/eps)``, bounds the mass outside by Chebyshev
    (``P(|x| >= k sigma) <= 1/k^2``) and multiplies the four per-variable bounds. Returned:

    * ``sigma_printed = sqrt(2 b)`` and ``sigma_laplace = sqrt(2) b`` (the standard deviation of
      ``Lap(0, b)``; they differ unless ``b = 2``);
    * ``chebyshev_one = 1 - 1/k^2`` and ``chebyshev_four = (1 - 1/k^2)^4`` (the lemma prints
      ``(0.9876)^4 = 0.9153``; the product is ``0.9515``);
    * ``exact_one_printed_box = 1 - exp(-k sigma_printed / b)`` and ``exact_four_printed_box``
      (its fourth power): the Laplace mass actually inside the box the lemma uses
      (``P(|x| <= a) = 1 - exp(-a/b)``);
    * ``exact_one_laplace_sigma = 1 - exp(-k sqrt 2)``: inside ``+- k`` true standard deviations.
    """
    eps = check_eps(eps)
    b = 2.0 / eps
    sig_p, sig_l = float(np.sqrt(2.0 * b)), float(np.sqrt(2.0) * b)
    cheb = 1.0 - 1.0 / k ** 2
    one_p = float(-np.expm1(-k * sig_p / b))
    return {"eps": eps, "b": b, "k": k, "sigma_printed": sig_p, "sigma_laplace": sig_l,
            "box_printed": k * sig_p, "chebyshev_one": cheb, "chebyshev_four": cheb ** 4,
            "chebyshev_four_printed": 0.9153, "exact_one_printed_box": one_p,
            "exact_four_printed_box": one_p ** 4, "exact_one_laplace_sigma": float(-np.expm1(-k * np.sqrt(2.0)))}


def eq77_as_written(table: npt.ArrayLike, eps: float, k: float = 9.0) -> dict:
    """Seed 004's Eq. 7.7 evaluated as printed, on a 2x2 noisy table ``w`` (``w_1..w_4``)::

        int_{lb}^{ub} prod_i Lap(x_i; 0, b) dx  *  2 sum_i w_i ln(w_i / (w_i - x_i)),   b = 2/eps,

    over Lemma 7.3.1's box ``|x_i| <= k sigma`` (``sigma = sqrt(2 b)`` as printed). Read as the
    integral of the product (the only reading in which ``x_i`` is bound), it separates:
    ``2 sum_i [int f(x) w_i ln(w_i/(w_i - x)) dx] * P_box^3`` with ``P_box = int f``, one
    ``scipy.integrate.quad`` per cell.

    What it shows (``docs/multiattr.md``): the value is defined only when every ``w_i`` exceeds
    the box's half-width (else ``w_i - x_i <= 0`` inside the box and the logarithm is not real;
    the thesis's own experiment starts at ``w_1 = 5`` with a half-width of 56.9 at eps = 0.1), and
    where defined it is an expected ``G^2`` contribution (in units of ``G^2``, growing like
    ``sum_i b^2 / w_i``), not a probability: it cannot be Figure 7.3's y-axis. The probability
    the section is after is :func:`flip_probability`'s.

    Returns ``{"defined": bool, "value": float or nan, "half_width": ..., "box_mass": ...,
    "reason": str}``.
    """
    from scipy.integrate import quad

    eps = check_eps(eps)
    w = np.asarray(table, dtype=float).ravel()
    if w.size != 4 or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise LocalPrivError("eq77_as_written needs a 2x2 table of positive counts")
    b = 2.0 / eps
    half = k * float(np.sqrt(2.0 * b))
    box = float(-np.expm1(-half / b))
    out = {"eps": eps, "b": b, "half_width": half, "box_mass": box, "table": w.tolist()}
    if np.any(w <= half):
        out.update(defined=False, value=float("nan"),
                   reason=f"w_i - x_i <= 0 inside the box for the cells {np.flatnonzero(w <= half).tolist()} "
                          f"(w <= {half:.4g}): ln(w_i / (w_i - x_i)) is not real there")
        return out

    def density(x):
        return np.exp(-abs(x) / b) / (2.0 * b)

    total = 0.0
    for wi in w:
        part, _ = quad(lambda x, wi=wi: density(x) * wi * np.log(wi / (wi - x)), -half, half, points=[0.0],
                       limit=200)
        total += part
    out.update(defined=True, value=float(2.0 * total * box ** 3), reason="")
    return out
