"""Range queries on one ordered attribute by a hierarchy of intervals (Cormode, Kulkarni and
Srivastava, VLDB 2019; constrained inference of Hay, Rastogi, Miklau and Suciu, VLDB 2010).

The domain ``0..D-1`` is padded to ``b^h`` leaves; level ``l = 1..h`` splits it into ``b^l``
intervals of ``b^(h-l)`` values. Each user is assigned one level uniformly at random and reports
the interval holding her value through optimized unary encoding (OUE, Wang et al., USENIX Security
2017: ``p = 1/2``, ``q = 1/(e^eps + 1)``), whose variance does not depend on the number of
intervals, so every level's node estimates have the same variance
``Var = q(1 - q) / (n_l (p - q)^2)`` (at frequency 0; the plug-in adds ``f (1 - p - q)/(n_l (p - q))``).

Consistency (Hay et al. section 4): a bottom-up weighted average, for a node of height ``i``
(leaves: ``i = 1``),

``z_v = (b^i - b^(i-1)) / (b^i - 1) x_v + (b^(i-1) - 1) / (b^i - 1) sum_{c child of v} z_c``,

then top-down mean consistency from the known total ``1``,
``h_v = z_v + (h_parent - sum_{u sibling of v, incl. v} z_u) / b``. The result is the least-squares
(best linear unbiased) estimate under equal level variances; every node equals the sum of its
children, so a range's answer is the sum of its leaves. The stated interval is conservative: the
normal interval with the variance of the raw (unadjusted) minimal decomposition of the range into
nodes, which is an upper bound on the consistent estimate's variance (the BLUE's variance is at most
that of any linear unbiased estimate).

Reports are simulated in aggregate: given the true counts ``c`` of a level's users on its
intervals, the OUE support count of an interval is ``Binomial(c, p) + Binomial(n_l - c, q)``, the
same distribution as the sum of the users' bits (bits are independent across intervals given the
values). Memory is one integer per user (the level assignment) plus the nodes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from localpriv.mechanisms.grouped import hierarchy_height
from localpriv.utils.errors import LocalPrivError
from localpriv.utils.interval import Interval
from localpriv.utils.simplex import project_simplex

__all__ = ["ALPHA_2D", "MAX_BRANCHING", "MAX_GRID_SIDE", "MAX_RANGE_LEAVES", "MAX_RANGE_USERS", "GridEstimate",
           "HierarchyEstimate", "grid_granularity", "grid_ranges", "hierarchical_ranges",
           "consistent_tree", "decompose_interval", "hierarchy_cover"]

#: the most leaves (padded domain size ``b^h``) of a hierarchy
MAX_RANGE_LEAVES = 1 << 22
#: the largest fan-out (``b = D`` is one level: flat OUE on every user)
MAX_BRANCHING = 4096
#: the most simulated users in one call
MAX_RANGE_USERS = 50_000_000



def hierarchy_cover(lo: int, hi: int, size: int, branching: int) -> list[tuple[int, int]]:
    """The nodes ``(level, index)``, levels ``1..h``, of the ``b``-ary hierarchy over ``0..size-1``
    (padded to ``b^h`` leaves, ``h = ceil(log_b size)``) that cover ``lo..hi`` below the root: at
    most ``2(b - 1)`` per level, none where the range spans the whole padded domain."""
    if not 0 <= lo <= hi < size:
        raise LocalPrivError(f"range {lo}..{hi} is not within 0..{size - 1}")
    h = hierarchy_height(size, branching)
    out: list[tuple[int, int]] = []
    a, e = lo, hi + 1  # half-open over leaves
    for level in range(h, 0, -1):
        width = branching ** (h - level)
        parent = width * branching
        while a < e and a % parent != 0:
            out.append((level, a // width))
            a += width
        while e > a and e % parent != 0:
            out.append((level, e // width - 1))
            e -= width
    return out


def decompose_interval(lo: int, hi: int, size: int, branching: int) -> list[tuple[int, int]]:
    """The minimal nodes ``(level, index)`` covering ``lo..hi``: ``[(0, 0)]`` (the root) for the whole
    domain, else :func:`hierarchy_cover` (which then covers the whole range: a remainder above level
    1 would be a multiple of ``b^h`` at both ends, i.e. the whole domain with ``size = b^h``)."""
    if not 0 <= lo <= hi < size:
        raise LocalPrivError(f"range {lo}..{hi} is not within 0..{size - 1}")
    if lo == 0 and hi == size - 1:
        return [(0, 0)]
    return hierarchy_cover(lo, hi, size, branching)


@dataclass(frozen=True)
class HierarchyEstimate:
    """Node frequency estimates of a hierarchy: ``raw[l-1]`` and consistent ``nodes[l-1]`` hold the
    ``b^l`` intervals of level ``l``; ``variance[l-1]`` is one raw node estimate's variance there."""

    size: int
    branching: int
    raw: tuple[np.ndarray, ...]
    nodes: tuple[np.ndarray, ...]
    variance: np.ndarray

    @property
    def height(self) -> int:
        """The number of levels below the root."""
        return len(self.nodes)

    @property
    def leaves(self) -> np.ndarray:
        """The consistent estimate of each value ``0..size-1`` (padding dropped)."""
        return self.nodes[-1][: self.size]

    def decompose(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The minimal set of nodes ``(level, index)`` covering values ``lo..hi`` (inclusive)."""
        if not 0 <= lo <= hi < self.size:
            raise LocalPrivError(f"range {lo}..{hi} is not within 0..{self.size - 1}")
        # what is left (the whole padded domain) is the root: known total, no variance
        return hierarchy_cover(lo, hi, self.size, self.branching)

    def range(self, lo: int, hi: int, level: float = 0.95) -> Interval:
        """The estimated fraction of users with values in ``lo..hi`` with a conservative interval."""
        if not 0.0 < level < 1.0:
            raise LocalPrivError(f"level {level} is not strictly between 0 and 1")
        value = float(self.leaves[lo: hi + 1].sum()) if 0 <= lo <= hi < self.size else None
        if value is None:
            raise LocalPrivError(f"range {lo}..{hi} is not within 0..{self.size - 1}")
        parts = self.decompose(lo, hi)
        var = float(sum(self.variance[lv - 1] for lv, _ in parts))
        half = _z(level) * math.sqrt(var)
        return Interval(value, min(max(0.0, value - half), value), max(min(1.0, value + half), value),
                        level, "hierarchy: normal, variance of the raw decomposition (conservative)")


def _z(level: float) -> float:
    """Two-sided standard normal quantile."""
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def consistent_tree(raw: list[np.ndarray] | tuple[np.ndarray, ...], branching: int,
                    total: float = 1.0) -> tuple[np.ndarray, ...]:
    """Hay et al.'s constrained inference for equal level variances: bottom-up weighted averages,
    then top-down mean consistency from the known ``total`` (see the module docstring)."""
    b, h = int(branching), len(raw)
    z: list[np.ndarray] = [np.asarray(x, dtype=float) for x in raw]
    for lvl in range(h - 2, -1, -1):  # level lvl+1 (0-based lvl), height i = h - lvl
        i = h - lvl
        kids = z[lvl + 1].reshape(-1, b).sum(axis=1)
        bi, bi1 = float(b) ** i, float(b) ** (i - 1)
        z[lvl] = (bi - bi1) / (bi - 1) * z[lvl] + (bi1 - 1) / (bi - 1) * kids
    out: list[np.ndarray] = []
    parent = np.array([float(total)])
    for lvl in range(h):
        sib = z[lvl].reshape(-1, b)
        node = sib + ((parent - sib.sum(axis=1)) / b)[:, None]
        parent = node.ravel()
        out.append(parent)
    return tuple(out)


def hierarchical_ranges(values: npt.ArrayLike, size: int, eps: float, rng: np.random.Generator,
                        branching: int = 4) -> HierarchyEstimate:
    """Simulate the hierarchical-interval protocol on integer ``values`` in ``0..size-1`` at level
    ``eps`` and estimate every node, raw and consistent.

    Parameters
    ----------
    values
        One value per user, integers in ``0..size-1``.
    size
        The domain size ``D``; padded to ``b^h`` leaves with ``h = ceil(log_b D)``.
    eps
        Each user's LDP level (one report per user: her level's interval through OUE).
    rng
        The randomness (level assignment and reports).
    branching
        The fan-out ``b`` (2..:data:`MAX_BRANCHING`); Cormode et al. find ``b`` around 4 to 8 best for OUE/OLH.
    """
    x = np.asarray(values)
    if x.ndim != 1 or x.size == 0 or not np.issubdtype(x.dtype, np.integer):
        raise LocalPrivError("hierarchical ranges: values must be a non-empty 1-D array of integers")
    if x.size > MAX_RANGE_USERS:
        raise LocalPrivError(f"hierarchical ranges: {x.size:,} users is above the limit of {MAX_RANGE_USERS:,}")
    if not 2 <= branching <= MAX_BRANCHING:
        raise LocalPrivError(f"branching {branching} is outside 2..{MAX_BRANCHING}")
    if not (math.isfinite(eps) and eps > 0):
        raise LocalPrivError(f"eps {eps} must be positive and finite")
    if size < 2 or int(x.min()) < 0 or int(x.max()) >= size:
        raise LocalPrivError(f"hierarchical ranges: values must lie in 0..{size - 1} (size >= 2)")
    h = hierarchy_height(size, branching)
    if branching ** h > MAX_RANGE_LEAVES:
        raise LocalPrivError(f"hierarchical ranges: {branching}^{h} leaves is above the limit of {MAX_RANGE_LEAVES:,}")
    p, q = 0.5, 1.0 / (math.exp(eps) + 1.0)
    assign = rng.integers(0, h, size=x.size)
    raw: list[np.ndarray] = []
    var = np.empty(h)
    for lvl in range(h):  # over levels, not users
        m = branching ** (lvl + 1)
        mine = x[assign == lvl] // (branching ** (h - lvl - 1))
        n_l = max(int(mine.size), 1)
        c = np.bincount(mine, minlength=m)
        support = rng.binomial(c, p) + rng.binomial(mine.size - c, q)
        raw.append((support / n_l - q) / (p - q))
        var[lvl] = q * (1 - q) / (n_l * (p - q) ** 2)
    return HierarchyEstimate(int(size), int(branching), tuple(raw), consistent_tree(raw, branching), var)


#: the non-uniformity constant of the 2-D granularity guideline (Yang et al., VLDB 2021: alpha_2)
ALPHA_2D = 0.03
#: the most cells per side of a 2-D grid
MAX_GRID_SIDE = 1024


def grid_granularity(n: int, eps: float, alpha: float = ALPHA_2D) -> int:
    """The side ``g`` of a 2-D grid for ``n`` users at ``eps``: the ``g`` balancing the noise of the
    cells a range covers against the non-uniformity error of the cells its border cuts,
    ``g = (4 alpha^2 (e^eps - 1)^2 n / e^eps)^(1/4)`` (Yang et al., VLDB 2021, the 2-D guideline
    with one grid), rounded, at least 2."""
    e = math.exp(eps)
    g = (4.0 * alpha * alpha * (e - 1.0) ** 2 * n / e) ** 0.25
    return int(min(MAX_GRID_SIDE, max(2, round(g))))


@dataclass(frozen=True)
class GridEstimate:
    """A 2-D grid estimate: ``cells[i, j]`` the fraction of users in row ``i``, column ``j``
    (non-negative, summing to 1), the grid's ``edges`` on each attribute (value boundaries, row
    ``i`` holds values ``edges[0][i] .. edges[0][i+1]-1``) and one raw cell's ``variance``."""

    sizes: tuple[int, int]
    edges: tuple[np.ndarray, np.ndarray]
    cells: np.ndarray
    variance: float

    def range(self, lo: tuple[int, int], hi: tuple[int, int], level: float = 0.95) -> Interval:
        """The fraction of users in ``lo[0]..hi[0]`` x ``lo[1]..hi[1]`` (inclusive), values spread
        uniformly within a cell; the interval is normal with the raw cells' variance times the sum
        of squared coverage fractions (before the projection onto the simplex): it covers the noise, not
        the bias of assuming uniform values within a cell that the range cuts."""
        if not 0.0 < level < 1.0:
            raise LocalPrivError(f"level {level} is not strictly between 0 and 1")
        fr = []
        for a in range(2):
            if not 0 <= lo[a] <= hi[a] < self.sizes[a]:
                raise LocalPrivError(f"range {lo[a]}..{hi[a]} is not within 0..{self.sizes[a] - 1}")
            e = self.edges[a]
            overlap = np.clip(np.minimum(e[1:], hi[a] + 1) - np.maximum(e[:-1], lo[a]), 0, None)
            fr.append(overlap / np.diff(e))
        w = np.outer(fr[0], fr[1])
        value = float((w * self.cells).sum())
        half = _z(level) * math.sqrt(self.variance * float((w * w).sum()))
        return Interval(value, min(max(0.0, value - half), value), max(min(1.0, value + half), value), level,
                        "grid: normal, noise only (excludes the within-cell uniformity bias)")


def grid_ranges(x: npt.ArrayLike, y: npt.ArrayLike, sizes: tuple[int, int], eps: float,
                rng: np.random.Generator, side: int | None = None) -> GridEstimate:
    """Simulate a 2-D grid protocol on two integer attributes (``x`` in ``0..sizes[0]-1``, ``y`` in
    ``0..sizes[1]-1``): every user reports her grid cell by OUE at ``eps``; the estimate is
    projected onto the simplex (non-negative, sums to 1). ``side`` defaults to
    :func:`grid_granularity` (capped at the attributes' sizes)."""
    a, b = np.asarray(x), np.asarray(y)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise LocalPrivError("grid ranges: x and y must be non-empty 1-D arrays of one length")
    if a.size > MAX_RANGE_USERS:
        raise LocalPrivError(f"grid ranges: {a.size:,} users is above the limit of {MAX_RANGE_USERS:,}")
    if not (math.isfinite(eps) and eps > 0):
        raise LocalPrivError(f"eps {eps} must be positive and finite")
    for v, s in ((a, sizes[0]), (b, sizes[1])):
        if not np.issubdtype(v.dtype, np.integer) or int(v.min()) < 0 or int(v.max()) >= s:
            raise LocalPrivError(f"grid ranges: values must be integers in 0..{s - 1}")
    g = grid_granularity(a.size, eps) if side is None else int(side)
    if not 1 <= g <= MAX_GRID_SIDE:
        raise LocalPrivError(f"grid side {g} is outside 1..{MAX_GRID_SIDE}")
    gs = (min(g, sizes[0]), min(g, sizes[1]))
    edges = tuple(np.unique(np.round(np.linspace(0, s, k + 1)).astype(np.int64)) for s, k in zip(sizes, gs))
    rows = np.searchsorted(edges[0], a, side="right") - 1
    cols = np.searchsorted(edges[1], b, side="right") - 1
    shape = (edges[0].size - 1, edges[1].size - 1)
    c = np.bincount(rows * shape[1] + cols, minlength=shape[0] * shape[1])
    p, q = 0.5, 1.0 / (math.exp(eps) + 1.0)
    support = rng.binomial(c, p) + rng.binomial(a.size - c, q)
    raw = (support / a.size - q) / (p - q)
    cells = project_simplex(raw).reshape(shape)
    return GridEstimate((int(sizes[0]), int(sizes[1])), (edges[0], edges[1]), cells,
                        q * (1 - q) / (a.size * (p - q) ** 2))
