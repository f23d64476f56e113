"""What an estimate knows, at the resolution its data support: adjacent cells of an ordered domain
merged until each merged cell's interval is informative, and joint (Bonferroni) intervals over the
merged cells; on planar grids, the cells whose interval includes 0.

The figures (:mod:`localpriv.inference.plotting`) draw these; the rules are those of
``docs/decisions/0047-figures-at-the-resolution-the-data-support.md``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from localpriv.inference.uncertainty import Uncertainty
from localpriv.utils.interval import check_level
from localpriv.utils.validation import LocalPrivError

if TYPE_CHECKING:
    from localpriv.estimators.result import Fit

__all__ = ["MAP_MAX_CELLS", "MERGE_MAX_CELLS", "MergedCells", "cell_edges", "indistinguishable_from_zero",
           "merge_cells", "range_intervals"]

#: the largest ordered domain whose cells :func:`merge_cells` merges (each step evaluates a few
#: functionals of a ``k x k`` covariance: about ``2 k^3`` operations in all)
MERGE_MAX_CELLS = 2000
#: the largest planar grid drawn as an interactive map (one polygon per shown cell in the page)
MAP_MAX_CELLS = 50_000


@dataclass(frozen=True)
class MergedCells:
    """Adjacent cells merged into bins, each with its probability mass and a joint (Bonferroni) interval.

    Bin ``b`` holds the cells ``start[b] .. stop[b] - 1``; ``mass[b]`` is their estimated total
    probability, ``[lower[b], upper[b]]`` its interval at ``bin_level``, the Bonferroni level
    ``1 - (1 - level) / m`` over the ``m`` bins, the level at which all ``m`` intervals would hold
    together with probability at least ``level`` (Bonferroni; see :func:`merge_cells`).
    ``informative[b]`` is True when the interval's width is below the mass (the rule the bins
    were merged by); only the last bin can fail it.
    """

    start: np.ndarray
    stop: np.ndarray
    mass: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    informative: np.ndarray
    level: float
    bin_level: float
    method: str

    @property
    def size(self) -> int:
        """The number of bins."""
        return int(self.start.size)

    @property
    def widths(self) -> np.ndarray:
        """The number of cells in each bin."""
        return self.stop - self.start


def cell_edges(domain: object, labels: np.ndarray) -> np.ndarray:
    """The ``k + 1`` edges of an ordered domain's cells: the domain's own (``cell_edges()`` of a
    real interval domain), else half-way between integer values, ``x -+ 1/2``."""
    own = getattr(domain, "cell_edges", None)
    if callable(own):
        return np.asarray(own(), dtype=float)
    x = np.asarray(labels, dtype=float)
    return np.concatenate([[x[0] - 0.5], x + 0.5])


def range_intervals(u: Uncertainty, theta: np.ndarray, start: np.ndarray, stop: np.ndarray,
                    level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mass ``sum_{start <= x < stop} theta_x`` of each range with its ``level`` interval.

    Each range is the linear functional ``w @ theta`` with ``w`` the range's indicator: Gaussian
    methods give ``c +- z sd`` (:meth:`Uncertainty.gaussian`: the inverse's interval where it
    applies, the bootstrap sd on a low-dimensional face), replicate methods the percentiles of the
    replicates' sums; the interval is clipped to ``[0, 1]`` and widened to contain the estimate (as
    :meth:`Uncertainty.functional`). A cell on the boundary of the simplex has sd 0 there, so its
    interval is ``[0, mass]`` at most: never narrower than its mass. (Per-cell profile bounds,
    :meth:`Uncertainty.cell_intervals`, are not used: they cost a profile per level.)

    Returns ``(mass, lower, upper)``, one entry per range.
    """
    lv = check_level(level)
    start, stop = np.asarray(start, dtype=np.int64), np.asarray(stop, dtype=np.int64)
    idx = np.arange(theta.size)
    W = ((idx >= start[:, None]) & (idx < stop[:, None])).astype(float)
    mass = W @ theta
    if u.method in ("fisher", "anchored"):
        c, sd, _ = u.gaussian(W)
        z = stats.norm.ppf(0.5 + lv / 2)
        lo, hi = c - z * sd, c + z * sd
    else:
        assert u.replicates is not None  # the linear and bootstrap methods set them
        a = (1 - lv) / 2
        lo, hi = np.quantile(u.replicates @ W.T, [a, 1 - a], axis=0)
    lo = np.minimum(np.clip(lo, 0.0, 1.0), mass)
    hi = np.maximum(np.clip(hi, 0.0, 1.0), mass)
    return mass, lo, hi


def _greedy(u: Uncertainty, theta: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Bins from left to right: each the shortest run of cells from the previous bin's end whose
    interval at ``level`` is narrower than its mass; the rest of the domain when none is."""
    k = theta.size
    starts, stops = [], []
    i, reach = 0, 4
    while i < k:  # one step per bin (at most k), never per report
        while True:
            cand = np.arange(i + 1, min(k, i + reach) + 1)
            mass, lo, hi = range_intervals(u, theta, np.full(cand.size, i), cand, level)
            ok = (hi - lo) < mass
            if ok.any():
                j = int(cand[int(np.argmax(ok))])
                break
            if cand[-1] == k:
                j = k
                break
            reach *= 4
        starts.append(i)
        stops.append(j)
        reach = max(4, 2 * (j - i))
        i = j
    return np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64)


def merge_cells(est: Fit, level: float = 0.95, u: Uncertainty | None = None) -> MergedCells:
    """Adjacent cells of an ordered domain merged until each merged cell's interval is informative.

    Rule: scanning from the first cell, a bin is the shortest run of adjacent cells whose interval
    is narrower than the bin's estimated mass, ``upper - lower < sum theta`` (the mass is then
    known to within about half of itself, and the interval excludes 0); a final run that never
    becomes informative is one bin, flagged. The rule runs twice: at ``level``, giving ``m1``
    bins, then at the Bonferroni level ``1 - (1 - level) / m1``, giving ``m <= m1`` bins. The
    bins' intervals are reported at ``1 - (1 - level) / m`` (narrower than those the second pass
    merged by, so the rule still holds). If each bin's interval held at its level, all would hold
    together with probability at least ``level`` (Bonferroni's inequality); the bins are chosen
    from the same data and the per-bin intervals are asymptotic, so the joint coverage is
    measured, not guaranteed (``make figure-evidence``, decision 0047: below ``level`` at the
    settings measured there).

    Parameters
    ----------
    est
        An estimate with observations (a :class:`~localpriv.inference.estimate.Estimate`).
    level
        The joint confidence level aimed at, strictly between 0 and 1.
    u
        Its uncertainty, when already computed (default: computed from ``est``).

    Returns
    -------
    MergedCells
        The bins, their masses and their Bonferroni intervals.

    Raises
    ------
    LocalPrivError
        On a domain of more than :data:`MERGE_MAX_CELLS` cells.
    """
    lv = check_level(level)
    theta = np.asarray(est.distribution, dtype=float)
    k = theta.size
    if k > MERGE_MAX_CELLS:
        raise LocalPrivError(f"merging cells: {k:,} cells is more than the limit of {MERGE_MAX_CELLS:,} "
                             "(MERGE_MAX_CELLS)")
    if u is None:
        obs = getattr(est, "observations", None)
        unc = getattr(est, "uncertainty", None)
        if obs is None or not callable(unc):
            raise LocalPrivError("merging cells needs an estimate that carries its observations")
        u = unc()
    assert u is not None
    starts, stops = _greedy(u, theta, lv)
    if starts.size > 1:  # again at the Bonferroni level of those bins: wider intervals, fewer bins
        starts, stops = _greedy(u, theta, 1.0 - (1.0 - lv) / starts.size)
    bonf = 1.0 - (1.0 - lv) / starts.size
    mass, lo, hi = range_intervals(u, theta, starts, stops, bonf)
    return MergedCells(starts, stops, mass, lo, hi, (hi - lo) < mass, lv, bonf, u.method)


def indistinguishable_from_zero(est: Fit, level: float = 0.95) -> np.ndarray:
    """The cells whose interval at ``level`` includes 0 (``lower <= 0``): their estimate cannot be
    told apart from no user at all."""
    ci = getattr(est, "ci", None)
    if not callable(ci):
        raise LocalPrivError("masking cells needs an estimate with intervals")
    lo, _hi = ci(check_level(level))
    return np.asarray(lo, dtype=float) <= 0.0
