"""Planar mechanisms on a grid of square cells (seed 001 sections 7.2-7.3, seed 003 section 2.3).

Both mechanisms add translation-invariant noise to the true cell and then map the noisy point to
the nearest cell of the finite grid (``X``, a :class:`~localpriv.domains.grid.GridDomain` of side ``s``
km). On a rectangle the nearest cell is obtained by clamping the row and the column separately,
so all mass falling beyond an edge piles up on the edge cells (the planar analogue of seed 001
Eq. 7).

* Planar geometric (seed 003 section 2.3): the noisy point is a cell ``(i, j)`` of the infinite
  grid ``Z^2`` with::

      P((i, j) | x) = lambda exp(-eps d(x, (i, j))),   lambda = 1 / sum_{(i,j) in Z^2} exp(-eps s sqrt(i^2 + j^2)).

* Planar Laplace (Andrés et al., seed 001 ref. [28]): the noisy point is ``x + N`` in R^2 with
  density ``eps^2 / (2 pi) exp(-eps ||N||)`` (radius ``~ Gamma(2, 1/eps)``, angle uniform), then
  the cell holding it (the nearest cell centre).

``eps`` is in km^-1 and ``d`` is the Euclidean distance in km between cell centres.

Channel. Let ``K[di, dj]`` be the probability that the noise moves the point by ``(di, dj)``
cells (``di`` rows north, ``dj`` columns east). For a true cell ``(r, c)`` and an output cell
``(zr, zc)``, the output row collects the row offsets ``{zr - r}`` (interior row), ``{<= -r}``
(row 0) or ``{>= nrows-1-r}`` (last row), and likewise for columns, so ``M[x, z]`` is a sum of
``K`` over a product of an offset and/or a tail in each axis. We precompute the forward and
backward cumulative sums of ``K`` along each axis (sums of positive terms started from the far
tail, so tiny entries keep full relative accuracy, which the computed privacy level needs) and
read each entry once. ``K`` is held on offsets ``|di|, |dj| <= R`` with
``R = max(nrows, ncols) + ceil(45 / (eps s))`` (capped at :data:`MAX_RADIUS`), so the neglected
mass is below ``exp(-45)`` times the smallest channel entry (``~exp(-eps diameter)``) whenever the
cap is not reached, which keeps even the log-ratios of the tiniest entries exact (planar Laplace
neglects nothing: its outer ring holds the rest, below).

* Planar geometric: ``K`` is the exact pmf restricted to that square and renormalized; the sampler
  draws from the same ``K``, so samples and channel agree exactly.
* Planar Laplace: ``K[di, dj]`` is the Laplace mass of the square cell at offset ``(di, dj)``,
  integrated by tensor Gauss-Legendre quadrature (the density is smooth there); the centre cell,
  where the density has a cusp, in polar coordinates (a 1-D integral of the incomplete gamma
  function). The outer ring ``|di| = R`` or ``|dj| = R`` holds *everything at or beyond it* in
  that axis: the strip ``{y >= (R - 1/2) s, x in cell dj}`` and the corner quadrants, integrated
  by Gauss-Legendre panels and Gauss-Laguerre tails. Since ``R`` is at least the grid's extent,
  every offset beyond the ring clamps to the same edge cell as the ring offset, so the channel is
  the mechanism's exactly, whatever ``R`` (the cap bounds memory only), and the kernel sums to 1 to
  round-off. (A former kernel put the tail beyond a capped ``R`` on the centre cell, which made
  the computed LDP level wrong at small eps: 16.8 for ``eps = 0.001`` on the Manhattan grid, where
  it is 0.0106; docs/decisions/0015-planar-laplace-outer-ring.md.)

Privacy computed from the channel (:meth:`_PlanarBase.epsilon_ldp`, :meth:`_PlanarBase.epsilon_geo`), read
from the channel's offset tables (:func:`offset_tables`) without building the ``k x k`` matrix: the
LDP level from window maxima and minima of the tables, the metric level by the displacement between
two cells (``O(k^2)``; docs/decisions/0073-metric-levels-by-displacement.md). The metric level:
for the planar geometric mechanism it equals ``eps`` whenever the grid has an interior cell
(``P(x|x) / P(x|x') = e^{eps d(x,x')}`` exactly); for the planar Laplace mechanism, a
post-processing of an eps-geo-indistinguishable mechanism, it is strictly below ``eps``
(averaging the density over a cell loses a little: about 0.9999 eps at eps = 1 on the
Manhattan grid, the sup being approached by far-apart cells and the edge tails).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.domains import Domain
from localpriv.domains.grid import GridDomain
from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.likelihood.structured import clamped_block_for, clamped_fft_points
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.privacy import (
    OffsetTable,
    checked_epsilon,
    grid_offset_geo_epsilon,
    grid_offset_ldp_epsilon,
)
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

__all__ = ["PlanarGeometric", "PlanarLaplace", "MAX_RADIUS", "clamp_channel", "offset_tables"]

#: Largest kernel half-width (in cells) held in memory.
MAX_RADIUS = 1500
_TAIL = 45.0


def _axis_transform(K: np.ndarray, kind: str, axis: int, lo: int, hi: int) -> np.ndarray:
    """Entries ``lo:hi`` along ``axis`` of ``K`` summed over each clamped tail (or not at all).

    The cumulative sums run from the far tail as over the whole axis, and stop at ``hi`` (or start at
    ``lo``): a cumulative sum adds in sequence, so each entry is the same number, bit for bit, as
    the whole axis's cumulative sum would give, for about half the work."""
    take = [slice(None)] * K.ndim
    if kind == "single":
        take[axis] = slice(lo, hi)
        return K[tuple(take)]
    if kind == "low":  # sum over offsets <= index
        take[axis] = slice(0, hi)
        out = np.cumsum(K[tuple(take)], axis=axis)
        take[axis] = slice(lo, hi)
        return out[tuple(take)]
    if kind == "high":  # sum over offsets >= index
        take[axis] = slice(lo, None)
        out = np.flip(np.cumsum(np.flip(K[tuple(take)], axis=axis), axis=axis), axis=axis)
        take[axis] = slice(0, hi - lo)
        return out[tuple(take)]
    # "all": the whole axis (a 1-cell-wide grid)
    shape = list(K.shape)
    shape[axis] = hi - lo
    return np.broadcast_to(K.sum(axis=axis, keepdims=True), tuple(shape))


def _output_ranges(n: int) -> list[tuple[str, int, int]]:
    """The output rows (or columns) of one clamping kind, as ``(kind, first, last)``."""
    if n == 1:
        return [("all", 0, 0)]
    return [("low", 0, 0)] + ([("single", 1, n - 2)] if n > 2 else []) + [("high", n - 1, n - 1)]


def offset_tables(K: np.ndarray, nrows: int, ncols: int) -> list[OffsetTable]:
    """The clamped channel as offset tables (:data:`localpriv.mechanisms.privacy.OffsetTable`).

    Parameters
    ----------
    K : ndarray, shape (2R+1, 2R+1)
        ``K[R + di, R + dj]`` = probability of the offset ``(di, dj)``; ``R >= max(nrows, ncols) - 1``.
    nrows, ncols : int
        Grid shape.

    Returns
    -------
    list of (zr0, zr1, zc0, zc1, T)
        One entry per kind of output row times kind of output column (interior, first, last, or
        the whole axis of a grid one cell wide): the outputs ``zr0 <= zr <= zr1``,
        ``zc0 <= zc <= zc1`` have ``M[(r, c), (zr, zc)] = T[zr - r + nrows - 1, zc - c + ncols - 1]``,
        where ``T`` is ``K`` summed over the tail of each clamped axis (the forward or backward
        cumulative sum, or the whole axis). :func:`clamp_channel` reads its entries from these
        tables, so both hold the same numbers, bit for bit.
    """
    R = (K.shape[0] - 1) // 2
    if max(nrows, ncols) - 1 > R:
        raise LocalPrivError("clamp_channel: kernel smaller than the grid")
    # the central block of offsets the grid can use
    lo_r, hi_r = R - (nrows - 1), R + nrows
    lo_c, hi_c = R - (ncols - 1), R + ncols
    tables: list[OffsetTable] = []
    for tr, zr0, zr1 in _output_ranges(nrows):
        A = _axis_transform(K, tr, 0, lo_r, hi_r)
        for tc, zc0, zc1 in _output_ranges(ncols):
            tables.append((zr0, zr1, zc0, zc1, _axis_transform(A, tc, 1, lo_c, hi_c)))
    return tables


def clamp_channel(K: np.ndarray, nrows: int, ncols: int) -> np.ndarray:
    """Channel of "add an offset drawn from ``K``, then clamp row and column to the grid".

    Parameters
    ----------
    K : ndarray, shape (2R+1, 2R+1)
        ``K[R + di, R + dj]`` = probability of the offset ``(di, dj)``; ``R >= max(nrows, ncols) - 1``.
    nrows, ncols : int
        Grid shape; cell ``i`` is row ``i // ncols``, column ``i % ncols``.

    Returns
    -------
    ndarray, shape (nrows*ncols, nrows*ncols)
        ``M[x, z] = T_{type(zr), type(zc)}[zr - r + R, zc - c + R]`` where ``type`` is "single"
        for interior rows/columns, "low"/"high" for the first/last (tail sums) and "all" for a
        grid one cell wide (the tables of :func:`offset_tables`).
    """
    k = nrows * ncols
    r = np.arange(nrows)
    c = np.arange(ncols)
    M4 = np.empty((nrows, ncols, nrows, ncols))
    for zr0, zr1, zc0, zc1, T in offset_tables(K, nrows, ncols):
        rows_z = np.arange(zr0, zr1 + 1)
        cols_z = np.arange(zc0, zc1 + 1)
        ir = rows_z[None, :] - r[:, None] + nrows - 1  # (nrows, |rows_z|)
        ic = cols_z[None, :] - c[:, None] + ncols - 1  # (ncols, |cols_z|)
        M4[:, :, zr0:zr1 + 1, zc0:zc1 + 1] = T[ir[:, None, :, None], ic[None, :, None, :]]
    return M4.reshape(k, k)


def _radius(eps: float, s: float, nrows: int, ncols: int) -> int:
    return int(max(max(nrows, ncols), min(MAX_RADIUS, max(nrows, ncols) + np.ceil(_TAIL / (eps * s)))))


#: largest ``k x (distinct reports)`` likelihood block built densely (32 MB of float64)
DENSE_BLOCK_MAX = 1 << 22
#: ... and only while it has at most this many entries per point of the padded FFT grid of the
#: (cropped, folded) kernel: measured on the shared machine, the dense products were 3x faster at
#: 39 entries per point (a 20 x 20 grid, all cells reported) and the FFT products 5x faster at 178
#: (48 x 49, 1,700 cells reported); the crossover is near 70
DENSE_PER_FFT_POINT = 64


class _PlanarBase(Mechanism):
    """Shared parts: grid bookkeeping, kernel, channel, inverse-CDF sampling of offsets."""

    def __init__(self, eps: float, domain: Domain | None = None, k: int | None = None, nrows: int | None = None,
                 ncols: int | None = None, cell_km: float | None = None) -> None:

        self.eps = check_eps(eps)
        shape = (nrows, ncols, cell_km)
        self._grid_in_spec = domain is None and any(v is not None for v in shape)
        if self._grid_in_spec:
            # a grid given by its shape alone (e.g. on the command line, which has no grid
            # domain syntax): only the metric matters for the channel and the privacy level
            if nrows is None or ncols is None:
                raise LocalPrivError(f"{self.spec_name}: give nrows and ncols (and cell_km, default 0.5)")
            domain = GridDomain(0.0, 0.0, check_int(nrows, "nrows", minimum=1), check_int(ncols, "ncols", minimum=1),
                                check_eps(0.5 if cell_km is None else cell_km, "cell_km"))
        elif domain is not None and any(v is not None for v in shape):
            given = (nrows if nrows is not None else domain.nrows if isinstance(domain, GridDomain) else None,
                     ncols if ncols is not None else getattr(domain, "ncols", None),
                     float(cell_km) if cell_km is not None else getattr(domain, "cell_km", None))
            if not isinstance(domain, GridDomain) or given != (domain.nrows, domain.ncols, domain.cell_km):
                raise LocalPrivError(f"{self.spec_name}: nrows/ncols/cell_km disagree with the grid domain")
        if not isinstance(domain, GridDomain):
            raise LocalPrivError(f"{self.spec_name}: needs a planar grid domain (GridDomain), got "
                                 f"{type(domain).__name__}; or give the grid in the spec, e.g. "
                                 f"{self.spec_name}(eps={self.eps},nrows=20,ncols=14,cell_km=0.5)")
        self.domain = domain
        self.k = domain.size
        if k is not None and check_int(k, "k") != self.k:
            raise LocalPrivError(f"{self.spec_name}: k={k} but the grid has {self.k} cells")
        self.s = float(domain.cell_km)
        self.R = _radius(self.eps, self.s, domain.nrows, domain.ncols)
        self._K: np.ndarray | None = None
        self._M: np.ndarray | None = None

    def params(self) -> dict[str, Any]:
        if self._grid_in_spec:
            d = self.domain
            return {"eps": self.eps, "nrows": d.nrows, "ncols": d.ncols, "cell_km": d.cell_km}
        return {"eps": self.eps}

    @property
    def n_outputs(self) -> int:
        return self.k

    def kernel(self) -> np.ndarray:
        """``(2R+1) x (2R+1)`` offset probabilities ``K[R + di, R + dj]`` (sums to 1)."""
        if self._K is None:
            self._K = self._make_kernel()
        return self._K

    def _make_kernel(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def channel(self) -> np.ndarray:
        if self._M is None:
            check_dense_size(self.k, self.k, f"{self} channel")
            self._M = clamp_channel(self.kernel(), self.domain.nrows, self.domain.ncols)
        return self._M

    def epsilon_ldp(self) -> float:
        """LDP level computed from the channel, ``max_z log(max_x M[x,z] / min_x M[x,z])``, read from
        :func:`offset_tables` (:func:`localpriv.mechanisms.privacy.grid_offset_ldp_epsilon`: each
        column is a window of a table; no ``k x k`` matrix built). Refused in one line above the
        dense-size cap on ``k x k``, as the channel it stands for.
        """
        d = self.domain
        check_dense_size(self.k, self.k, f"{self} channel")
        level = grid_offset_ldp_epsilon(offset_tables(self.kernel(), d.nrows, d.ncols), d.nrows, d.ncols)
        return checked_epsilon(level, str(self))

    def epsilon_geo(self, distance: ArrayLike | None = None) -> float:
        """Geo-indistinguishability level (per km) computed from the channel.

        With the grid's own metric (``distance`` left out), the dense maximum
        ``max_z max_{x != x'} log(M[x,z] / M[x',z]) / d(x,x')`` regrouped by the displacement
        between the two cells (:func:`localpriv.mechanisms.privacy.grid_offset_geo_epsilon` on
        :func:`offset_tables`): the channel's own entries, ``O(k^2)`` instead of ``O(k^3)``, no
        ``k x k`` matrix built. Refused in one line above the dense-size cap on ``k x k`` (the
        work grows as ``k^2``, like the channel it stands for). An explicit ``distance`` matrix
        takes the dense formula.
        """
        if distance is not None:
            return super().epsilon_geo(distance)
        d = self.domain
        check_dense_size(self.k, self.k, f"{self} metric level")
        level = grid_offset_geo_epsilon(offset_tables(self.kernel(), d.nrows, d.ncols), d.nrows, d.ncols, self.s)
        return checked_epsilon(level, str(self), kind="epsilon_geo")

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> LikelihoodBlock:
        """Fast products by 2-D FFT convolution with exact border folding:
        :class:`localpriv.likelihood.structured.ClampedConvBlock` on this mechanism's kernel, cropped to the
        half-width beyond which it holds less than 1e-19 of its mass and folded to at most the
        grid's sides (:func:`localpriv.likelihood.structured.fold_kernel`: the same channel).

        Small problems (``k x m`` channel columns up to ``DENSE_BLOCK_MAX`` entries and at most
        ``DENSE_PER_FFT_POINT`` per point of the padded FFT grid, e.g. the 280-cell Manhattan grid)
        use the exact dense block instead, where a matrix product is the cheaper of the two.
        """

        outputs = self.output_index(reports)
        entries = self.k * np.unique(outputs).size
        d = self.domain
        fft = clamped_fft_points(self.R, self.eps * self.s, (d.nrows, d.ncols))
        if entries <= DENSE_BLOCK_MAX and entries <= DENSE_PER_FFT_POINT * fft:
            return super().likelihood_block(reports, np.asarray(counts))
        return clamped_block_for(self.kernel(), self.eps * self.s, (self.domain.nrows, self.domain.ncols),
                                 outputs, counts)

    def _clamp(self, x: np.ndarray, di: np.ndarray, dj: np.ndarray) -> np.ndarray:
        nr, nc = self.domain.nrows, self.domain.ncols
        r, c = np.divmod(x, nc)
        zr = np.clip(r + di, 0, nr - 1)
        zc = np.clip(c + dj, 0, nc - 1)
        return (zr * nc + zc).astype(np.int64)


@register
class PlanarGeometric(_PlanarBase):
    """Planar geometric mechanism truncated to the grid (seed 003 section 2.3), eps in km^-1.

    Parameters
    ----------
    eps : float
        Geo-indistinguishability parameter (per km).
    domain : GridDomain
        The grid (cell side ``s = domain.cell_km``).
    k : int, optional
        Must equal the number of cells if given.
    nrows, ncols, cell_km : optional
        The grid by its shape when no ``domain`` is given (``cell_km`` defaults to 0.5), e.g.
        ``planar-geometric(eps=1.0,nrows=20,ncols=14,cell_km=0.5)`` on the command line.
    """

    spec_name = "planar-geometric"
    examples = (dict(spec="planar-geometric(eps=1.0)", eps_geo=1.0,
                     domain="grid(lat0=40.7,lon0=-74.0,nrows=2,ncols=2,cell_km=1.0)"),)

    def _make_kernel(self) -> np.ndarray:
        R = self.R
        i = np.arange(-R, R + 1, dtype=float)
        logw = -self.eps * self.s * np.sqrt(i[:, None] ** 2 + i[None, :] ** 2)
        w = np.exp(logw)
        return w / w.sum()

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """Offset drawn from the kernel by one binary search per user, then clamped to the grid."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        if getattr(self, "_cdf", None) is None:
            cdf = np.cumsum(self.kernel().ravel())
            self._cdf = cdf / cdf[-1]
        j = np.minimum(np.searchsorted(self._cdf, rng.random(x.size), side="right"), self._cdf.size - 1)
        di, dj = np.divmod(j, 2 * self.R + 1)
        return self._clamp(x, di - self.R, dj - self.R)


def _gauss_legendre(q: int) -> tuple[np.ndarray, np.ndarray]:
    t, w = np.polynomial.legendre.leggauss(q)
    return 0.5 * t, 0.5 * w  # nodes and weights on [-1/2, 1/2]


def _tail_rule(lo: float, T: float, rate: ArrayLike, panel: int, laguerre: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and log-weights for ``int_lo^inf g(t) dt``, one row per entry of ``rate`` (shape
    ``(m,)``; result ``(m, N)``): Gauss-Legendre (``panel`` nodes) on panels doubling from ``lo``
    to ``T`` (where the integrand varies on the scale of ``t``), then Gauss-Laguerre (``laguerre``
    nodes) in ``u = rate (t - T)``, exact for ``e^{-u}`` times a polynomial: ``g`` must decay at
    least like ``e^{-rate t}`` beyond ``T`` so that ``e^{rate (t - T)} g(t)`` stays bounded."""
    edges = [lo]
    while edges[-1] < T:
        edges.append(min(T, 2.0 * edges[-1]) if edges[-1] > 0 else T)
    t, w = np.polynomial.legendre.leggauss(panel)
    pn = [0.5 * (b - a) * t + 0.5 * (a + b) for a, b in zip(edges[:-1], edges[1:])]
    pw = [np.log(0.5 * (b - a) * w) for a, b in zip(edges[:-1], edges[1:])]
    u, W = np.polynomial.laguerre.laggauss(laguerre)
    rate = np.asarray(rate, dtype=float).reshape(-1, 1)
    nodes = T + u[None, :] / rate
    logw = np.log(W)[None, :] + u[None, :] - np.log(rate)
    if pn:
        m = rate.shape[0]
        nodes = np.hstack([np.broadcast_to(np.concatenate(pn), (m, panel * len(pn))), nodes])
        logw = np.hstack([np.broadcast_to(np.concatenate(pw), (m, panel * len(pw))), logw])
    return nodes, logw


@register
class PlanarLaplace(_PlanarBase):
    """Planar Laplace mechanism (continuous noise in km, then the nearest grid cell), eps in km^-1.

    Parameters are those of :class:`PlanarGeometric` (``eps`` per km; the grid as a ``domain`` or
    by ``nrows``, ``ncols``, ``cell_km``).
    """

    spec_name = "planar-laplace"
    examples = (dict(spec="planar-laplace(eps=1.0)", eps_geo=1.0,
                     domain="grid(lat0=40.7,lon0=-74.0,nrows=2,ncols=2,cell_km=1.0)"),)

    #: Gauss-Legendre nodes per axis and per cell for the kernel
    QUAD = 10
    #: offsets (in cells, per axis) refined by splitting, and the split factor
    NEAR, NEAR_SPLIT = 3, 16

    def _make_kernel(self) -> np.ndarray:
        R, s, eps = self.R, self.s, self.eps
        t, w = _gauss_legendre(self.QUAD)
        # density eps^2/(2 pi) exp(-eps r) (km^-2) times the cell area s^2, the constant in log
        # space so that no eps overflows (eps^2 is inf beyond 1e154)
        log_scale = 2.0 * np.log(s * eps) - np.log(2 * np.pi)
        # the density and the Gauss-Legendre nodes are symmetric in both axes: integrate the
        # quadrant di, dj >= 0 and mirror it (4x less work, exactly symmetric kernel)
        off = np.arange(0, R + 1, dtype=float)
        ys = (off[:, None] + t[None, :]) * s  # nodes of every offset: (R+1, q)
        Q = np.empty((R + 1, R + 1))
        ww = np.outer(w, w)
        step = max(1, int(2e6 // ((R + 1) * self.QUAD ** 2)))
        for a in range(0, R + 1, step):  # chunks of rows, to bound memory
            yy = ys[a:a + step]                                   # (b, q)
            rr = np.sqrt(yy[:, None, :, None] ** 2 + ys[None, :, None, :] ** 2)  # (b, R+1, q, q)
            Q[a:a + step] = np.einsum("bcij,ij->bc", np.exp(log_scale - eps * rr), ww)
        mirror = np.abs(np.arange(-R, R + 1))
        K = Q[mirror[:, None], mirror[None, :]]
        # cells next to the origin: the density's cusp slows quadrature down, so split them into
        # NEAR_SPLIT^2 sub-cells each integrated with the same rule
        m = self.NEAR_SPLIT
        sub = (np.arange(m) + 0.5) / m - 0.5
        tt = (sub[:, None] + t[None, :] / m).ravel()                # nodes on [-1/2, 1/2]
        wt = np.tile(w / m, m)
        wn = np.outer(wt, wt)
        for di in range(-self.NEAR, self.NEAR + 1):
            for dj in range(-self.NEAR, self.NEAR + 1):
                if (di, dj) != (0, 0) and abs(di) < R and abs(dj) < R:
                    rr = np.hypot((di + tt)[:, None] * s, (dj + tt)[None, :] * s)
                    K[R + di, R + dj] = float((np.exp(log_scale - eps * rr) * wn).sum())
        strips, corner = self._ring(R)
        ring = strips[np.abs(np.arange(-(R - 1), R))]
        K[0, 1:-1] = K[-1, 1:-1] = K[1:-1, 0] = K[1:-1, -1] = ring
        K[0, 0] = K[0, -1] = K[-1, 0] = K[-1, -1] = corner
        K[R, R] = self._centre()
        return K

    def _centre(self) -> float:
        """The mass of the centre cell, where the density has its cusp, in polar coordinates: the
        mass within radius ``rho`` is ``P(2, eps rho) = 1 - (1 + eps rho) e^{-eps rho}`` (the
        regularized incomplete gamma function, accurate for small arguments), so by the square's
        eight symmetric triangles ``(4 / pi) int_0^{pi/4} P(2, eps s / (2 cos theta)) d theta``, a
        smooth integral (Gauss-Legendre). Computed directly, not as ``1 - sum(others)``, which
        loses all its digits when the cell's mass is below the others' rounding (small eps)."""
        from scipy.special import gammainc

        t, w = np.polynomial.legendre.leggauss(40)
        theta = (t + 1.0) * np.pi / 8.0  # nodes on [0, pi/4]
        return float(0.5 * (w @ gammainc(2.0, self.eps * self.s / (2.0 * np.cos(theta)))))

    #: Gauss-Laguerre nodes for the tails beyond the held square, Gauss-Legendre nodes per panel
    LAGUERRE, PANEL = 48, 20
    #: Gauss-Laguerre starts where the exponent ``eps t`` reaches this (panels before)
    TAIL_START = 8.0

    def _tail_start(self, lo: float) -> float:
        """Where Gauss-Laguerre takes over on ``[lo, inf)``: ``lo``, or where ``eps t`` reaches
        ``TAIL_START``."""
        return lo if self.eps * lo >= self.TAIL_START else self.TAIL_START / self.eps

    def _ring(self, R: int) -> tuple[np.ndarray, float]:
        """The masses of what lies at or beyond offset ``R`` in an axis: the strip
        ``{y >= a, x in cell dj}`` (``a = (R - 1/2) s``) for ``dj = 0..R-1`` (iterated integrals of
        the density: ``x`` by Gauss-Legendre per cell, ``y`` by :func:`_tail_rule` at the slowest
        decay rate of ``e^{-eps r}`` in ``y`` beyond the Laguerre start, ``eps T / r(x, T)``, as
        ``r`` is convex in ``y``; in log space, so no ``eps`` overflows or underflows early) and
        the corner ``{x, y >= a}`` (:meth:`_corner`)."""
        from scipy.special import logsumexp  # lazily, like the module's other SciPy uses

        s, eps = self.s, self.eps
        a = (R - 0.5) * s
        log_c = 2.0 * np.log(eps) - np.log(2 * np.pi)  # the density's constant, km^-2
        T = self._tail_start(a)
        t, w = _gauss_legendre(self.QUAD)
        x = ((np.arange(R, dtype=float)[:, None] + t[None, :]) * s).ravel()   # (R q,) nodes by cell
        y, lw = _tail_rule(a, T, eps * T / np.hypot(x, T), self.PANEL, self.LAGUERRE)
        with np.errstate(divide="ignore"):  # all-underflowed rows: log 0 = -inf, mass 0
            inner = logsumexp(lw + log_c - eps * np.hypot(x[:, None], y), axis=1)  # log int_a^inf f dy
        strips = (np.exp(inner).reshape(R, -1) * (w * s)[None, :]).sum(axis=1)
        return strips, self._corner(a)

    def _corner(self, a: float) -> float:
        """The mass of ``{x, y >= a}`` in polar coordinates: along the ray at angle ``theta`` the
        mass beyond radius ``rho`` is ``Q(2, eps rho) = (1 + eps rho) e^{-eps rho}``, the region
        starts at ``rho = a / cos theta`` for ``theta`` in ``[pi/4, pi/2]`` (twice, by symmetry),
        and ``v = tan theta`` gives ``(1 / pi) int_1^inf Q(2, eps a sqrt(1 + v^2)) / (1 + v^2) dv``:
        Gauss-Legendre on panels doubling from 1 up to ``8 / (eps a)`` (the algebraic part; none
        when ``eps a >= 8``), then Gauss-Laguerre at the exponent's slope there (it is convex in
        ``v``), by :func:`_tail_rule`."""
        b = self.eps * a
        V = 1.0 if b >= self.TAIL_START else self.TAIL_START / b
        v, lw = _tail_rule(1.0, V, np.array([b * V / np.hypot(1.0, V)]), self.PANEL, self.LAGUERRE)
        v, lw = v[0], lw[0]
        z = b * np.hypot(1.0, v)
        return float(np.exp(lw + np.log1p(z) - z - np.log1p(v * v)).sum() / np.pi)

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """Noise of radius ``Gamma(2, 1/eps)`` and uniform angle added to the cell centre, then the
        cell holding the point (clamped to the grid)."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        rad = rng.gamma(2.0, 1.0 / self.eps, x.size)
        ang = rng.uniform(0.0, 2.0 * np.pi, x.size)
        # offset in cells from the centre of the true cell: the nearest centre is the rounded one
        di = np.floor(rad * np.sin(ang) / self.s + 0.5).astype(np.int64)
        dj = np.floor(rad * np.cos(ang) / self.s + 0.5).astype(np.int64)
        return self._clamp(x, di, dj)
