"""Structured likelihood blocks: the two products EM needs, without a dense channel.

The EM engine (:mod:`localpriv.estimators.em`, seed 001 Algorithm 1 / seed 003 Algorithm 1) only
asks an observation block for ``forward(theta) = theta @ G`` (the probability of each distinct
report under ``theta``) and ``backward(w) = G @ w``, where ``G[x, j] = P(report_j | x)``
(seed 001 Definition 1). When the channel has structure these products cost far less than the
``O(k m)`` of a dense matrix:

* :class:`ScaledIdentityBlock` -- ``G[x, j] = b + (a - b) [x == z_j]``: k-RR (seed 001 Eq. 5) and the
  support-count channels of unary encodings, local hashing and subset selection (seed 002): ``O(k + m)``.
* :class:`ExpKernelBlock` -- ``G[x, j] = a_j e^{-eps |p_j - x|}`` (optionally ``d_j`` at
  ``x = p_j``): the linear geometric mechanism (seed 001 Eqs. 6-7, seed 003 Eq. 2) and linear
  Laplace with unit bins or grid reports (seed 001 section 7.3), truncated ends as exact
  columns: two first-order recurrences, ``O(k + m)``, exact to a few ulps (no FFT round-off).
* :class:`ClampedConvBlock` -- a translation-invariant kernel on the infinite grid ``Z^2`` (or ``Z``)
  whose draws are remapped to the nearest cell of a bounded ``R x C`` grid (the truncation of
  seed 003 section 2.3): 2-D FFT convolution in which everything that falls outside the grid is
  *folded exactly* onto the border cells it is remapped to. ``O(N log N)`` with
  ``N = (R + 2P)(C + 2P)`` for a kernel of half-width ``P``.

All blocks are tested equal to the dense products (1e-12 relative) on small cases
(``tests/test_fast_structured.py``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import fft as sfft

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.likelihood.rfft import RfftClampedBlock
from localpriv.utils.validation import LocalPrivError, check_eps, check_int

__all__ = [
    "ScaledIdentityBlock",
    "ClampedConvBlock",
    "ExpKernelBlock",
    "linear_geometric_block",
    "geometric_block_for",
    "laplace_block_for",
    "discrete_laplace_block",
    "planar_geometric_kernel",
    "planar_geometric_block",
    "fold_kernel",
    "clamped_fft_points",
    "clamped_block_for",
]

#: threads used by each FFT (scipy.fft ``workers``); 1 by default, benchmarks on 2 cores set 2
FFT_WORKERS = 1
#: an :class:`ExpKernelBlock` with at most this many entries ``k m`` keeps its dense ``k x m``
#: matrix (512 KiB) and takes its products from it: at ``k = m = 100`` a product costs ~5 us
#: instead of the ~100 us of the recurrences' four filter calls (call overhead, not arithmetic)
EXP_KERNEL_DENSE_MAX = 65_536

#: the largest kernel half-width a :class:`ClampedConvBlock` accepts (memory guard)
MAX_HALF_WIDTH = 4096


def _as_outputs(outputs: ArrayLike, counts: ArrayLike, n_out: int,
                what: str) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    z = np.asarray(outputs, dtype=np.int64).ravel()
    c = np.asarray(counts, dtype=float).ravel()
    if z.size != c.size:
        raise LocalPrivError(f"{what}: {z.size} reports but {c.size} counts")
    if z.size and (z.min() < 0 or z.max() >= n_out):
        raise LocalPrivError(f"{what}: report indices must lie in 0..{n_out - 1}")
    return z, c


# --------------------------------------------------------------------------------------------
# Scaled identity plus a constant
# --------------------------------------------------------------------------------------------
class ScaledIdentityBlock(LikelihoodBlock):
    """``G[x, j] = b + (a - b) [x == z_j]`` for distinct outputs ``z_j`` in ``0..k-1``.

    k-RR (seed 001 Eq. 5) has ``a = e^eps / (k - 1 + e^eps)``, ``b = 1 / (k - 1 + e^eps)``. The
    support-count channels of seed 002 (unary encoding ``a = p, b = q``; local hashing
    ``a = p, b = 1/g``; subset selection) have the same shape (their rows need not sum to 1: EM
    normalizes every iterate). Products::

        (theta @ G)_j = b * sum(theta) + (a - b) * theta[z_j]
        (G @ w)_x     = b * sum(w)     + (a - b) * sum_{j: z_j = x} w_j

    both ``O(k + m)``.

    Parameters
    ----------
    k : int
        Input domain size.
    a, b : float
        Diagonal and off-diagonal entries.
    outputs : array of int
        The distinct observed outputs (indices in ``0..k-1``).
    counts : array of float
        How often each was seen.
    """

    def __init__(self, k: int, a: float, b: float, outputs: ArrayLike, counts: ArrayLike) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.a, self.b = float(a), float(b)
        self.outputs, self.counts = _as_outputs(outputs, counts, self.k, "scaled-identity block")
        # every output observed, in order (support counts, k-RR with all values seen): no gathers
        self._all = self.outputs.size == self.k and bool(np.all(self.outputs == np.arange(self.k)))

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        theta = np.asarray(theta, dtype=float)
        out = theta * (self.a - self.b) if self._all else (self.a - self.b) * theta[self.outputs]
        out += self.b * theta.sum()
        return out

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        w = np.asarray(w, dtype=float)
        if self._all:
            out: np.ndarray = w * (self.a - self.b)
        else:
            out = np.bincount(self.outputs, weights=(self.a - self.b) * w, minlength=self.k)
        out += self.b * w.sum()
        return out

    def hessian_diagonal(self, w: np.ndarray) -> NDArray[np.float64]:
        """``sum_j w_j G[x, j]^2 = b^2 sum(w) + (a^2 - b^2) sum_{j: z_j = x} w_j``."""
        w = np.asarray(w, dtype=float)
        d2 = self.a * self.a - self.b * self.b
        if self._all:
            out: np.ndarray = w * d2
        else:
            out = np.bincount(self.outputs, weights=d2 * w, minlength=self.k)
        out += self.b * self.b * w.sum()
        return out

    def dense(self) -> NDArray[np.float64]:
        G = np.full((self.k, self.outputs.size), self.b)
        G[self.outputs, np.arange(self.outputs.size)] = self.a
        return G


def linear_geometric_block(k: int, eps: float, outputs: ArrayLike, counts: ArrayLike) -> ExpKernelBlock:
    """The truncated linear geometric mechanism on ``0..k-1`` as an :class:`ExpKernelBlock`.

    Seed 001 Eqs. (6)-(7) (seed 003 Eq. 2)::

        P(z | x) = c_z e^{-eps |z - x|},
        c_z = 1 / (1 + e^{-eps})                   if z in {0, k-1}
              (1 - e^{-eps}) / (1 + e^{-eps})      otherwise

    exact, no truncation, ``O(k + m)`` products.
    """
    k = check_int(k, "k", minimum=2)
    eps = check_eps(eps)
    z = np.asarray(outputs, dtype=np.int64).ravel()
    if z.size and (z.min() < 0 or z.max() > k - 1):
        raise LocalPrivError(f"linear geometric block: outputs must lie in 0..{k - 1}")
    r = math.exp(-eps)
    c = np.where((z == 0) | (z == k - 1), 1 / (1 + r), -math.expm1(-eps) / (1 + r))
    return ExpKernelBlock(k, eps, z, c, counts)


# --------------------------------------------------------------------------------------------
# Clamped 2-D convolution (planar mechanisms on a bounded grid)
# --------------------------------------------------------------------------------------------
class ClampedConvBlock(LikelihoodBlock):
    """A translation-invariant grid kernel, remapped (clamped) onto a bounded ``R x C`` grid.

    The mechanism draws an offset ``(i, j)`` with probability ``K[i, j]`` (``|i| <= P_r``,
    ``|j| <= P_c``; the kernel sums to 1), moves the true cell ``x = (x_r, x_c)`` by it on the
    infinite grid, and reports the nearest grid cell: for an axis-aligned box of cells that is the
    coordinate-wise clamp (seed 003 section 2.3, "remapping each of them to its nearest point in
    X"). Hence ``P(z | x) = sum_{g: clamp(g) = z} K[g - x]``. Cells are indexed ``row * C + col``
    (as :class:`localpriv.domains.grid.GridDomain`).

    Products, with ``N = (R + 2P_r) x (C + 2P_c)`` padded FFTs:

    * ``theta @ M``: full linear convolution ``theta * K`` over the padded grid, then every row
      above/below the grid is *summed onto* the first/last row, and likewise for columns --
      exactly the probability mass the clamp sends there;
    * ``M @ w``: ``w`` is extended to the padded grid by edge replication (``w_ext[g] =
      w[clamp(g)]``), then correlated with ``K`` (valid part).

    Both are exact for the kernel given; a kernel truncated to a box (such as
    :func:`planar_geometric_kernel`) drops less than its ``tol`` of mass.

    Parameters
    ----------
    kernel : 2-D array ``(2 P_r + 1) x (2 P_c + 1)``
        ``kernel[P_r + i, P_c + j] = K(i, j)``.
    shape : (R, C)
        Grid shape (``R = 1`` gives a 1-D clamped convolution).
    outputs, counts : arrays
        Distinct observed cells (indices ``0..R*C-1``) and their counts.
    """

    def __init__(self, kernel: ArrayLike, shape: tuple[int, int], outputs: ArrayLike, counts: ArrayLike) -> None:
        K = np.asarray(kernel, dtype=float)
        if K.ndim != 2 or K.shape[0] % 2 == 0 or K.shape[1] % 2 == 0:
            raise LocalPrivError(f"kernel must be a 2-D array of odd sides, got shape {K.shape}")
        R, C = (check_int(shape[0], "rows", minimum=1), check_int(shape[1], "columns", minimum=1))
        self.shape = (R, C)
        self.k = R * C
        self.kernel = K
        self.P = (K.shape[0] // 2, K.shape[1] // 2)
        self.outputs, self.counts = _as_outputs(outputs, counts, self.k, "clamped-convolution block")
        Pr, Pc = self.P
        self._ext = (R + 2 * Pr, C + 2 * Pc)
        self._N = (sfft.next_fast_len(self._ext[0]), sfft.next_fast_len(self._ext[1], real=True))
        self._K = sfft.rfft2(K, self._N)
        self._Kflip = sfft.rfft2(K[::-1, ::-1], self._N)

    def full_forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        """``theta @ M`` over all ``R * C`` cells (flattened)."""
        R, C = self.shape
        Pr, Pc = self.P
        T = np.asarray(theta, dtype=float).reshape(R, C)
        spec = sfft.rfft2(T, self._N, workers=FFT_WORKERS) * self._K
        F = sfft.irfft2(spec, self._N, workers=FFT_WORKERS)[:self._ext[0], :self._ext[1]]
        # fold rows outside the grid onto the border rows, then columns onto border columns
        G = F[Pr:Pr + R].copy()
        G[0] += F[:Pr].sum(axis=0)
        G[-1] += F[Pr + R:].sum(axis=0)
        out = G[:, Pc:Pc + C].copy()
        out[:, 0] += G[:, :Pc].sum(axis=1)
        out[:, -1] += G[:, Pc + C:].sum(axis=1)
        return out.ravel()

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        return self.full_forward(theta)[self.outputs]

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        R, C = self.shape
        Pr, Pc = self.P
        W = np.bincount(self.outputs, weights=np.asarray(w, dtype=float), minlength=self.k).reshape(R, C)
        Wext = np.pad(W, ((Pr, Pr), (Pc, Pc)), mode="edge")
        spec = sfft.rfft2(Wext, self._N, workers=FFT_WORKERS) * self._Kflip
        conv = sfft.irfft2(spec, self._N, workers=FFT_WORKERS)
        return conv[2 * Pr:2 * Pr + R, 2 * Pc:2 * Pc + C].ravel()

    def dense(self) -> NDArray[np.float64]:
        R, C = self.shape
        eye = np.zeros(self.k)
        cols = []
        for x in range(self.k):  # small cases only
            eye[x] = 1.0
            cols.append(self.full_forward(eye)[self.outputs])
            eye[x] = 0.0
        return np.vstack(cols)


def planar_geometric_kernel(eps: float, cell: float = 1.0, tol: float = 1e-17) -> NDArray[np.float64]:
    """The planar geometric kernel of seed 003 section 2.3 on a box of cell offsets.

    ``K(i, j) = lambda e^{-eps s sqrt(i^2 + j^2)}`` with ``s`` the cell side and
    ``lambda = 1 / sum_{(i,j) in Z^2} e^{-eps s sqrt(i^2+j^2)}``. The box half-width ``P`` is the
    smallest with ``(1 + aP) e^{-aP} <= tol`` (``a = eps s``), a bound on the relative mass outside
    the disc of radius ``P`` (``int_P^inf 2 pi r e^{-a r} dr / (2 pi / a^2)``), so dropping the
    outside changes no probability by more than ``tol`` relative; the kernel is normalized over
    the box.

    Raises
    ------
    LocalPrivError
        When ``P`` would exceed :data:`MAX_HALF_WIDTH` (``eps * cell`` too small for a grid kernel).
    """
    eps = check_eps(eps)
    if not cell > 0:
        raise LocalPrivError(f"cell side must be > 0, got {cell}")
    a = eps * float(cell)
    # solve (1 + aP) e^{-aP} <= tol for u = aP by a few fixed-point steps
    u = -math.log(tol)
    for _ in range(50):
        u = -math.log(tol) + math.log1p(u)
    P = int(math.ceil(u / a))
    if P > MAX_HALF_WIDTH:
        raise LocalPrivError(f"planar geometric kernel with eps*cell={a:g} needs half-width {P} > "
                             f"{MAX_HALF_WIDTH}: use a coarser grid or larger eps")
    i = np.arange(-P, P + 1, dtype=float)
    K = np.exp(-a * np.hypot(i[:, None], i[None, :]))
    return K / K.sum()


def planar_geometric_block(shape: tuple[int, int], eps: float, cell: float, outputs: ArrayLike, counts: ArrayLike,
                           tol: float = 1e-17) -> ClampedConvBlock:
    """Planar geometric mechanism (seed 003 section 2.3) on an ``R x C`` grid as a
    :class:`ClampedConvBlock` (``eps`` per unit of ``cell``, e.g. per km with ``cell`` in km)."""
    return ClampedConvBlock(planar_geometric_kernel(eps, cell, tol), shape, outputs, counts)


# --------------------------------------------------------------------------------------------
# Builders used by the mechanisms' likelihood_block overrides
# --------------------------------------------------------------------------------------------
#: a kernel is cropped where ``(1 + u) e^{-u}`` (``u = eps * s * radius``) falls below 1e-19
_CROP_U = 48.0


class _FlooredClampedConvBlock(ClampedConvBlock):
    """:class:`ClampedConvBlock` whose forward products are floored at the smallest normal float:
    FFT round-off (``~1e-16`` of the largest entry) can make a truly tiny probability read as
    ``<= 0``, which would turn a possible report into an impossible one."""

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        return np.maximum(super().forward(theta), np.finfo(float).tiny)


class _RfftClampedConvBlock(RfftClampedBlock, ClampedConvBlock):
    """The planar mechanisms' FFT block: the products of :class:`localpriv.likelihood.rfft.RfftClampedBlock`
    (real FFTs on reused buffers, forward floored at the smallest normal float, one FFT pair per
    product), typed as a :class:`ClampedConvBlock` (whose ``full_forward`` it keeps); built by
    :func:`clamped_block_for`. :class:`_FlooredClampedConvBlock` is the reference it is tested against."""


def clamped_block_for(kernel: ArrayLike, scale: float, shape: tuple[int, int], outputs: ArrayLike,
                      counts: ArrayLike) -> ClampedConvBlock:
    """A :class:`ClampedConvBlock` for a planar mechanism's ``(2R+1) x (2R+1)`` kernel, evaluated by
    :class:`localpriv.likelihood.rfft.RfftClampedBlock` (real FFTs on reused buffers).

    The kernel (e.g. :meth:`localpriv.mechanisms.planar.PlanarGeometric.kernel`, whose
    ``R`` covers the whole grid so that tiny channel entries keep full relative accuracy for the
    privacy computation) is cropped to the half-width ``P = ceil(48 / scale)`` (``scale = eps * s``,
    the decay rate per cell), beyond which both the planar geometric and the planar Laplace kernels
    hold less than ``(1 + 48) e^{-48} < 1e-19`` of their mass: the products change by less than that,
    relative, while the FFTs shrink from ``(R_grid + 2R)^2`` to ``(R_grid + 2P)^2``.

    A kernel wider than the grid is then folded (:func:`fold_kernel`): every offset of ``nrows`` rows
    or more lands outside the grid from every cell and is clamped to the same border row, so those
    rows of the kernel are summed onto the offset ``+-nrows`` (likewise the columns). The channel is
    unchanged (the same masses, added in another order) and the FFTs are at most
    ``3 nrows x 3 ncols`` whatever the kernel's reach: on a 48 x 49 grid with a kernel of half-width
    1,500 (a planar mechanism at LDP level 1), a product of ~150 x 150 points instead of ~3,000 x 3,000.
    """
    K = np.asarray(kernel, dtype=float)
    R = K.shape[0] // 2
    P = min(R, int(math.ceil(_CROP_U / scale)))
    return _RfftClampedConvBlock(fold_kernel(K[R - P:R + P + 1, R - P:R + P + 1], shape), shape, outputs, counts)


def clamped_fft_points(half_width: int, scale: float, shape: tuple[int, int]) -> int:
    """Points of the padded grid on which :func:`clamped_block_for` evaluates a kernel of half-width
    ``half_width`` (``scale = eps * s``) on an ``nrows x ncols`` grid: ``(nrows + 2 P_r)(ncols + 2 P_c)``
    with ``P_r = min(half_width, ceil(48 / scale), nrows)`` (cropped, then folded) and likewise
    ``P_c``; the FFTs run on the next fast lengths. A planar mechanism compares it with the entries
    of its dense block to choose the cheaper product."""
    P = min(int(half_width), int(math.ceil(_CROP_U / scale)))
    nr, nc = int(shape[0]), int(shape[1])
    return (nr + 2 * min(P, nr)) * (nc + 2 * min(P, nc))


def fold_kernel(kernel: ArrayLike, shape: tuple[int, int]) -> NDArray[np.float64]:
    """A grid kernel folded to half-widths at most ``(nrows, ncols)`` without changing its clamped channel.

    Under the clamp of :class:`ClampedConvBlock`, a cell ``x`` moved by a row offset ``i >= nrows``
    lands on row ``x_r + i >= nrows`` for every ``x_r >= 0`` and is reported on the last row, as it is
    for ``i = nrows``; the same holds for ``i <= -nrows`` and the first row. So
    ``K'[+-nrows, :] = sum_{+-i >= nrows} K[i, :]`` (and the rows in between unchanged) gives the same
    channel ``P(z | x) = sum_{g: clamp(g) = z} K'[g - x]``; then the same along the columns. A kernel
    already within those half-widths is returned as it is.

    Parameters
    ----------
    kernel : 2-D array ``(2 P_r + 1) x (2 P_c + 1)``
        ``kernel[P_r + i, P_c + j] = K(i, j)``.
    shape : (nrows, ncols)
        The grid.

    Returns
    -------
    ndarray
        ``(2 min(P_r, nrows) + 1) x (2 min(P_c, ncols) + 1)``, the same total mass.
    """
    K = np.asarray(kernel, dtype=float)
    for axis, m in enumerate((int(shape[0]), int(shape[1]))):
        P = K.shape[axis] // 2
        if m >= P:
            continue
        K = np.moveaxis(K, axis, 0)
        folded = K[P - m:P + m + 1].copy()
        folded[0] += K[:P - m].sum(axis=0)
        folded[-1] += K[P + m + 1:].sum(axis=0)
        K = np.moveaxis(folded, 0, axis)
    return np.ascontiguousarray(K)


# ``mech`` below is a mechanism (:mod:`localpriv.mechanisms`, the layer above this one, which this module
# cannot import): typed ``Any``.
def _clamped_line_block(mech: Any, outputs: ArrayLike, counts: ArrayLike, interior_weight: float,
                        diag: float | None, end_prob: Callable[[np.ndarray, np.ndarray], np.ndarray]
                        ) -> ExpKernelBlock:
    """An :class:`ExpKernelBlock` for a line mechanism ``z = clamp(x + N)`` (or unclamped).

    ``outputs``: output indices (truncated: ``0..hi-lo``, value ``lo + index``) or integer values
    (untruncated). Interior reports follow the kernel; the two clamped end bins of a truncated
    mechanism are exact columns ``end_prob(x, value)``.
    """
    z = np.asarray(outputs, dtype=np.int64).ravel()
    k = mech.k
    if not mech.truncated:
        return ExpKernelBlock(k, mech.eps, z, interior_weight, counts, diag=diag)
    values = z + mech.lo
    ends = np.flatnonzero((values == mech.lo) | (values == mech.hi))
    cols = end_prob(np.arange(k)[:, None], values[ends][None, :])
    return ExpKernelBlock(k, mech.eps, values, interior_weight, counts, diag=diag,
                          exact_columns=(ends, cols))


def geometric_block_for(mech: Any, outputs: ArrayLike, counts: ArrayLike) -> ExpKernelBlock:
    """An :class:`ExpKernelBlock` for a :class:`~localpriv.mechanisms.geometric.Geometric`.

    ``P(z | x) = c a^{|z - x|}``, ``c = (1 - a)/(1 + a)``, ``a = e^{-eps}`` (seed 001 Eq. 6) for
    every report of the untruncated mechanism and every interior report of the truncated one;
    the end bins ``lo``, ``hi`` of the truncated mechanism (the clamped tails, seed 001 Eq. 7 when
    ``lo <= x <= hi``) are exact columns. Any ``lo``, ``hi`` and any report range: ``O(k + m)``.
    """
    return _clamped_line_block(mech, outputs, counts, math.tanh(0.5 * mech.eps), None, mech._prob)


def laplace_block_for(mech: Any, outputs: ArrayLike, counts: ArrayLike) -> ExpKernelBlock | None:
    """A structured block for a :class:`~localpriv.mechanisms.laplace.Laplace`, or ``None``.

    Grid reports (``bins=None``): ``z = x + g D`` with ``D`` discrete Laplace, so
    ``P(z | x) = tanh(eps g / 2) e^{-eps |z - x|}``: the geometric kernel
    (:func:`discrete_laplace_block`) with positions ``z``; the two clamped end values
    ``+-2^53 g`` (tail masses), if ever observed, are exact columns. Unit bins (``bins=1``): bin
    ``j`` holds ``x + N`` rounded to the nearest integer (seed 001 section 7.3), so with
    ``a = e^{-eps}``::

        P(j | x) = P(j - x - 1/2 <= N < j - x + 1/2) = sinh(eps/2) a^{|j - x|}   (j != x),
        P(x | x) = 1 - e^{-eps/2},

    an :class:`ExpKernelBlock` with a diagonal entry; when truncated, the two end bins (the
    clamped tails) are exact columns. Other bin widths: ``None`` (the dense block).
    """
    if mech.continuous:
        z = np.asarray(outputs, dtype=float).ravel()
        ends = np.flatnonzero(np.abs(z) >= mech.CLAMP * mech.grid)
        exact = None
        if ends.size:
            steps = (z[ends] / mech.grid)[None, :]
            exact = (ends, np.exp(mech._grid_log_prob(np.arange(mech.k)[:, None], steps)))
        return discrete_laplace_block(mech.k, mech.eps, mech.grid, z, counts, exact_columns=exact)
    if mech.bins != 1.0:
        return None
    half = 0.5 * mech.eps
    return _clamped_line_block(mech, outputs, counts, math.sinh(half), -math.expm1(-half),
                               mech._bin_prob)


def discrete_laplace_block(k: int, eps: float, step: float, positions: ArrayLike, counts: ArrayLike,
                           exact_columns: tuple[ArrayLike, ArrayLike] | None = None) -> ExpKernelBlock:
    """The discrete Laplace (two-sided geometric) kernel on a grid as an :class:`ExpKernelBlock`.

    A report ``z = x + step * D`` with ``P(D = d) = tanh(lam/2) e^{-lam |d|}``, ``lam = eps * step``,
    has ``P(z | x) = tanh(eps step / 2) e^{-eps |z - x|}`` for ``z`` on the grid (seed 001 Eq. 6
    for ``step = 1``, where ``tanh(eps/2) = (1 - a)/(1 + a)``, the interior weight of
    :func:`geometric_block_for`): positions ``z``, weights ``tanh(eps step / 2)``. Used by the
    grid version of the linear Laplace mechanism; ``O(k + m)`` products.
    """
    eps = check_eps(eps)
    return ExpKernelBlock(k, eps, positions, math.tanh(0.5 * eps * float(step)), counts,
                          exact_columns=exact_columns)


class ExpKernelBlock(LikelihoodBlock):
    """A two-sided exponential kernel on a line: ``G[x, j] = a_j e^{-rate |p_j - x|}``.

    Inputs ``x = 0..k-1``; report ``j`` sits at position ``p_j`` (any real) with weight ``a_j``.
    With ``diag``, the entry at the input on an integer position is ``d_j`` instead
    (``G[p_j, j] = d_j``), e.g. the central bin of a rounded Laplace. ``exact_columns``
    (indices, ``k x r`` array) replace whole columns (the clamped end bins of a truncated
    mechanism).

    With ``r = e^{-rate}`` the two one-sided sums are first-order recurrences
    (``scipy.signal.lfilter``)::

        A_t = r A_{t-1} + theta_t,   B_t = r B_{t+1} + theta_t,
        (theta @ G)_j = a_j (A_{l_j} e^{-rate (p_j - l_j)} + B_{u_j} e^{-rate (u_j - p_j)})
                        [+ d_j theta_{p_j}],

    with ``l_j`` the nearest input at or below ``p_j`` and ``u_j = l_j + 1`` (with a diagonal:
    ``l_j = p_j - 1``, ``u_j = p_j + 1``); terms outside ``0..k-1`` are 0. ``G @ w`` is the
    transposed pair over the per-input sums of ``w``: ``O(k + m)`` each. Every term is positive,
    so there is no cancellation and no FFT round-off: each entry comes out to a few ulps
    whatever the kernel's dynamic range (an FFT convolution carries an absolute error of ~1e-16
    of the largest term). The linear geometric mechanism (seed 001 Eqs. 6-7) and linear Laplace
    with unit bins or grid reports (seed 001 section 7.3) all have this form
    (:func:`geometric_block_for`, :func:`laplace_block_for`, :func:`discrete_laplace_block`).
    Small blocks (``k m`` at most :data:`EXP_KERNEL_DENSE_MAX`) take their products from the dense
    matrix instead (:meth:`dense`, kept on the block): sums of the same positive entries, without
    the filter calls' overhead, which dominates an EM at ``k = 100``.
    """

    def __init__(self, k: int, rate: float, positions: ArrayLike, weights: ArrayLike, counts: ArrayLike,
                 diag: ArrayLike | None = None, exact_columns: tuple[ArrayLike, ArrayLike] | None = None) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.rate = check_eps(rate)
        p = np.asarray(positions, dtype=float).ravel()
        self.counts = np.asarray(counts, dtype=float).ravel()
        if p.size != self.counts.size:
            raise LocalPrivError(f"exponential-kernel block: {p.size} reports but {self.counts.size} counts")
        if not np.all(np.isfinite(p)):
            raise LocalPrivError("exponential-kernel block: report positions must be finite")
        self.positions = p
        self.weights = np.broadcast_to(np.asarray(weights, dtype=float), p.shape).copy()
        self._r = math.exp(-self.rate)
        lo = np.clip(np.floor(p), -1, self.k - 1)  # nearest input at or below (-1: none)
        up = lo + 1
        self._diag_idx = np.zeros(0, dtype=np.int64)
        if diag is not None:
            on = (p >= 0) & (p <= self.k - 1)
            if np.any(on & (p != np.round(p))):
                raise LocalPrivError("exponential-kernel block: a diagonal entry needs an integer position")
            self._diag_idx = np.flatnonzero(on)
            self._diag_x = p[on].astype(np.int64)
            self._diag_val = np.broadcast_to(np.asarray(diag, dtype=float), p.shape)[on].copy()
            lo[on] = p[on] - 1  # the kernel covers the inputs strictly below and above
            up[on] = p[on] + 1
        has_lo, has_up = lo >= 0, up <= self.k - 1
        with np.errstate(under="ignore", over="ignore"):  # overflows only where has_lo/has_up is False
            self._left = np.where(has_lo, self.weights * np.exp(-self.rate * (p - lo)), 0.0)
            self._right = np.where(has_up, self.weights * np.exp(-self.rate * (up - p)), 0.0)
        self._tl = np.clip(lo, 0, self.k - 1).astype(np.int64)
        self._tr = np.clip(up, 0, self.k - 1).astype(np.int64)
        self._fix_idx = np.zeros(0, dtype=np.int64)
        if exact_columns is not None:
            idx, cols = exact_columns
            self._fix_idx = np.asarray(idx, dtype=np.int64).ravel()
            self._fix_cols = np.asarray(cols, dtype=float).reshape(self.k, self._fix_idx.size)
            if self._fix_idx.size and (self._fix_idx.min() < 0 or self._fix_idx.max() >= p.size):
                raise LocalPrivError(f"exact columns must lie in 0..{p.size - 1}")
            # the exact columns replace the kernel's: zero its factors there
            self._left[self._fix_idx] = 0.0
            self._right[self._fix_idx] = 0.0
            if self._diag_idx.size:  # (np.isin costs ~0.1 ms even on empty arrays: GIBU builds 10^3 blocks)
                keep = ~np.isin(self._diag_idx, self._fix_idx)
                self._diag_idx = self._diag_idx[keep]
                self._diag_x, self._diag_val = self._diag_x[keep], self._diag_val[keep]

    def _rec(self, v: np.ndarray, reverse: bool = False) -> NDArray[np.float64]:
        v = v[::-1] if reverse else v
        from scipy.signal import lfilter  # ~1 s to import: only where a recursion runs

        out = lfilter([1.0], [1.0, -self._r], v)
        return out[::-1] if reverse else out

    def _small(self) -> NDArray[np.float64] | None:
        """The dense matrix of a small block (at most :data:`EXP_KERNEL_DENSE_MAX` entries), kept
        on the block after its first use; ``None`` for larger blocks (the recurrences)."""
        if self.k * self.positions.size > EXP_KERNEL_DENSE_MAX:
            return None
        G = self.__dict__.get("_dense_cache")
        if G is None:
            with np.errstate(under="ignore"):
                G = self.dense()
            self._dense_cache = G
        return G

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        theta = np.asarray(theta, dtype=float)
        G = self._small()
        if G is not None:  # a sum of positive terms: each entry to a few ulps, as the recurrences
            return theta @ G
        A = self._rec(theta)
        B = self._rec(theta, reverse=True)
        with np.errstate(under="ignore"):  # terms below 1e-308 may round to 0: harmless
            out = A[self._tl] * self._left + B[self._tr] * self._right
        if self._diag_idx.size:
            out[self._diag_idx] += self._diag_val * theta[self._diag_x]
        if self._fix_idx.size:
            out[self._fix_idx] = theta @ self._fix_cols
        return out

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        w = np.asarray(w, dtype=float)
        G = self._small()
        if G is not None:
            return G @ w
        with np.errstate(under="ignore"):  # terms below 1e-308 may round to 0: harmless
            u = np.bincount(self._tl, weights=w * self._left, minlength=self.k)
            v = np.bincount(self._tr, weights=w * self._right, minlength=self.k)
        out = self._rec(u, reverse=True) + self._rec(v)
        if self._diag_idx.size:
            out += np.bincount(self._diag_x, weights=self._diag_val * w[self._diag_idx], minlength=self.k)
        if self._fix_idx.size:
            out += self._fix_cols @ w[self._fix_idx]
        return out

    def dense(self) -> NDArray[np.float64]:
        x = np.arange(self.k)[:, None]
        with np.errstate(under="ignore"):
            G = self.weights[None, :] * np.exp(-self.rate * np.abs(self.positions[None, :] - x))
        if self._diag_idx.size:
            G[self._diag_x, self._diag_idx] = self._diag_val
        if self._fix_idx.size:
            G[:, self._fix_idx] = self._fix_cols
        return G


# --------------------------------------------------------------------------------------------
# Large domains: Hadamard response and the hashed sketches
# --------------------------------------------------------------------------------------------
def fwht(a: ArrayLike) -> NDArray[np.float64]:
    """The Walsh-Hadamard transform of ``a`` along its last axis: ``a @ H_b`` (a new array).

    ``H_b`` is the ``b x b`` Sylvester Hadamard matrix, ``H[i, j] = (-1)^{popcount(i & j)}``
    (symmetric, ``H H = b I``), ``b`` a power of two. ``log2 b`` butterfly passes
    ``(x, y) -> (x + y, x - y)`` on NumPy views: ``O(b log b)`` per row, no Python loop over the
    entries (one per pass). Every output is a sum of ``b`` inputs with signs, so its rounding error
    is at most ``log2(b)`` ulps of ``sum |a|``.
    """
    out = np.array(a, dtype=float, copy=True)
    b = out.shape[-1]
    if b & (b - 1):
        raise LocalPrivError(f"Walsh-Hadamard transform: length {b} is not a power of two")
    lead = out.shape[:-1]
    tmp = np.empty(out.size // 2)
    h = 1
    while h < b:  # log2(b) passes over the whole array
        v = out.reshape(*lead, b // (2 * h), 2, h)
        x, y = v[..., 0, :], v[..., 1, :]
        t = tmp.reshape(x.shape)
        np.add(x, y, out=t)
        np.subtract(x, y, out=y)
        x[...] = t
        h *= 2
    return out


def _popcount_parity(v: ArrayLike) -> NDArray[np.int64]:
    """``popcount(v) mod 2`` for non-negative int64 arrays."""
    return (np.bitwise_count(np.asarray(v, dtype=np.int64)) & 1).astype(np.int64)


class HadamardBlock(LikelihoodBlock):
    """Hadamard response (Acharya, Sun and Zhang, AISTATS 2019) as a likelihood block.

    Outputs ``y`` in ``0..K-1``, ``K = B b``, are ``B`` blocks of ``b`` positions (``b`` a power of
    two); input ``x`` sits in block ``p(x) = x // (b-1)`` at position ``t(x) = x mod (b-1) + 1`` and
    its set is ``C_x = {y : y // b = p(x), H_b[t(x), y mod b] = +1}`` (``b/2`` outputs). Then
    ``G[x, j] = lo + (hi - lo) [y_j in C_x]`` and, with ``Theta`` the ``B x b`` array holding
    ``theta_x`` at ``(p(x), t(x))`` and zeros elsewhere,

        sum_x theta_x [y in C_x] = (S_p + (Theta_p H_b)[y mod b]) / 2,   S_p = sum(Theta_p),  p = y // b

    because ``[H[t, j] = +1] = (1 + H[t, j]) / 2``. So ``forward`` is one Walsh-Hadamard transform
    of ``Theta`` (:func:`fwht`) and ``backward`` one of the ``B x b`` array of ``w`` summed per
    output: ``O(K log b)`` each, ``K <= 4k``. ``hessian_diagonal`` is ``backward`` with ``lo^2``,
    ``hi^2``. Entries are exact to a few ulps of ``lo sum(theta)`` (every product is at least that).
    """

    def __init__(self, k: int, blocks: int, width: int, lo: float, hi: float, outputs: ArrayLike,
                 counts: ArrayLike) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.B = check_int(blocks, "blocks", minimum=1)
        self.b = check_int(width, "block width", minimum=2)
        if self.b & (self.b - 1) or self.B * (self.b - 1) < self.k:
            raise LocalPrivError(f"Hadamard block: {self.B} blocks of width {self.b} cannot hold {self.k} inputs")
        self.lo, self.hi = float(lo), float(hi)
        self.K = self.B * self.b
        self.outputs, self.counts = _as_outputs(outputs, counts, self.K, "Hadamard block")
        x = np.arange(self.k)
        self._cell = (x // (self.b - 1)) * self.b + x % (self.b - 1) + 1  # (p, t) flattened
        self._p = self.outputs // self.b
        self._j = self.outputs % self.b

    def _in_set_mass(self, theta: np.ndarray) -> NDArray[np.float64]:
        """``sum_x theta_x [y_j in C_x]`` for every observed output ``y_j``."""
        T: NDArray[np.float64] = np.zeros(self.K)
        T[self._cell] = theta
        T = T.reshape(self.B, self.b)
        F = fwht(T)
        return 0.5 * (F[self._p, 0] + F[self._p, self._j])  # F[:, 0] is the row sum S_p

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        theta = np.asarray(theta, dtype=float)
        return self.lo * theta.sum() + (self.hi - self.lo) * self._in_set_mass(theta)

    def _set_sums(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        """``sum_j w_j [y_j in C_x]`` for every input ``x``."""
        W = np.bincount(self.outputs, weights=w, minlength=self.K).reshape(self.B, self.b)
        F = fwht(W).ravel()
        return 0.5 * (F[self._cell - self._cell % self.b] + F[self._cell])

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        w = np.asarray(w, dtype=float)
        return self.lo * w.sum() + (self.hi - self.lo) * self._set_sums(w)

    def hessian_diagonal(self, w: np.ndarray) -> NDArray[np.float64]:
        """``sum_j w_j G[x, j]^2 = lo^2 sum(w) + (hi^2 - lo^2) sum_j w_j [y_j in C_x]``."""
        w = np.asarray(w, dtype=float)
        return self.lo ** 2 * w.sum() + (self.hi ** 2 - self.lo ** 2) * self._set_sums(w)

    def dense(self) -> NDArray[np.float64]:

        check_dense_size(self.k, self.outputs.size, f"the likelihood of {self.outputs.size} reports")
        p, t = self._cell // self.b, self._cell % self.b
        inset = (p[:, None] == self._p[None, :]) & (_popcount_parity(t[:, None] & self._j[None, :]) == 0)
        return np.where(inset, self.hi, self.lo)


class RowHashing:
    """``d`` hash rows ``h_j: {0..k-1} -> {0..m-1}`` held as a ``d x k`` table, with the two
    reductions the sketch blocks need, ``O(d k)`` each:

    * :meth:`bucket`: ``Phi[j, l] = sum_{x : h_j(x) = l} theta_x`` (``d x m``);
    * :meth:`gather`: ``sum_j U[j, h_j(x)]`` for every input ``x`` (``U`` is ``d x m``).
    """

    def __init__(self, table: ArrayLike, m: int) -> None:
        table = np.asarray(table, dtype=np.int64)
        self.d, self.k = table.shape
        self.m = int(m)
        self.flat = table + (np.arange(self.d, dtype=np.int64) * self.m)[:, None]  # index in d*m

    def bucket(self, theta: ArrayLike) -> np.ndarray:
        weights = np.broadcast_to(np.asarray(theta, dtype=float), (self.d, self.k)).ravel()
        return np.bincount(self.flat.ravel(), weights=weights, minlength=self.d * self.m).reshape(self.d, self.m)

    def gather(self, U: ArrayLike) -> NDArray[np.float64]:
        return np.asarray(U, dtype=float).ravel()[self.flat].sum(axis=0)


class HadamardSketchBlock(LikelihoodBlock):
    """Hadamard count-mean sketch (``hcms``) reports as a likelihood block.

    A report is ``(j, l, s)``: row ``j``, Hadamard coefficient ``l`` and a sign ``s = +-1`` that
    equals ``H_m[l, h_j(x)]`` with the larger probability. ``G[x, i] = lo + (hi - lo)
    [H_m[l_i, h_{j_i}(x)] = s_i]``. With ``Phi = bucket(theta)`` (``d x m``) and
    ``F = fwht(Phi)`` (``F[j, l] = sum_x theta_x H[l, h_j(x)]``)::

        sum_x theta_x [H[l_i, h_{j_i}(x)] = s_i] = (sum(theta) + s_i F[j_i, l_i]) / 2,

    and ``G @ w`` transposes it: ``Psi[j, l] = sum_{i: (j_i, l_i) = (j, l)} w_i s_i``,
    ``U = fwht(Psi)``, ``sum_i w_i [...]  = (sum(w) + sum_j U[j, h_j(x)]) / 2``.
    ``O(d k + d m log m + reports)`` per product.
    """

    def __init__(self, hashing: RowHashing, lo: float, hi: float, rows: ArrayLike, coefs: ArrayLike,
                 signs: ArrayLike, counts: ArrayLike) -> None:
        self.h = hashing
        self.k, self.d, self.m = hashing.k, hashing.d, hashing.m
        self.lo, self.hi = float(lo), float(hi)
        self.counts = np.asarray(counts, dtype=float).ravel()
        self._jl = np.asarray(rows, dtype=np.int64) * self.m + np.asarray(coefs, dtype=np.int64)
        self._s = np.asarray(signs, dtype=float)
        if self._jl.size != self.counts.size:
            raise LocalPrivError(f"Hadamard sketch block: {self._jl.size} reports but {self.counts.size} counts")

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        theta = np.asarray(theta, dtype=float)
        S = theta.sum()
        F = fwht(self.h.bucket(theta)).ravel()
        return self.lo * S + (self.hi - self.lo) * 0.5 * (S + self._s * F[self._jl])

    def _agree(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        Psi = np.bincount(self._jl, weights=w * self._s, minlength=self.d * self.m).reshape(self.d, self.m)
        return 0.5 * (w.sum() + self.h.gather(fwht(Psi)))

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        w = np.asarray(w, dtype=float)
        return self.lo * w.sum() + (self.hi - self.lo) * self._agree(w)

    def hessian_diagonal(self, w: np.ndarray) -> NDArray[np.float64]:
        w = np.asarray(w, dtype=float)
        return self.lo ** 2 * w.sum() + (self.hi ** 2 - self.lo ** 2) * self._agree(w)


#: bit ``i`` (big-endian, NumPy's packbits order) of every byte value: ``256 x 8``
_BYTE_BITS = ((np.arange(256)[:, None] >> (7 - np.arange(8))[None, :]) & 1).astype(float)


class CountSketchBlock(LikelihoodBlock):
    """Count-mean sketch (``cms``) reports as a likelihood block.

    A report is ``(j, z)``: row ``j`` and ``m`` bits ``z``, the one-hot ``h_j(x)`` with every bit
    flipped independently. ``G[x, i] = c_i (r0 + (1 - r0) z_i[h_{j_i}(x)])`` (the true bit's
    factor normalized to 1, ``r0 = e^{-eps}``, ``c_i`` the report's probability when its bit at
    ``h_j(x)`` is set). With ``Phi = bucket(theta)``::

        (theta @ G)_i = c_i (r0 sum(theta) + (1 - r0) sum_l z_i[l] Phi[j_i, l]),
        (G @ w)_x     = r0 sum(c w) + (1 - r0) sum_j Psi[j, h_j(x)],  Psi[j, l] = sum_{i: j_i = j} c_i w_i z_i[l].

    The reports stay packed (``ceil(m/8)`` bytes each): ``sum_l z_i[l] Phi[j_i, l]`` is a sum over
    the report's bytes of a ``d x ceil(m/8) x 256`` table of byte sums of ``Phi``, and ``Psi`` is a
    weighted count of (row, byte position, byte value) triples times the bits of each byte value:
    ``O(reports * m / 8 + d m * 32 + d k)`` per product. Reports whose ``log c_i`` is below -600
    are rescaled (EM is invariant to a per-report factor; the log-likelihood lost is ``log_offset``).
    """

    def __init__(self, hashing: RowHashing, log_c: ArrayLike, r0: float, rows: ArrayLike, packed: ArrayLike,
                 counts: ArrayLike) -> None:
        self.h = hashing
        self.k, self.d, self.m = hashing.k, hashing.d, hashing.m
        self.counts = np.asarray(counts, dtype=float).ravel()
        packed = np.asarray(packed, dtype=np.uint8)
        self.nb = packed.shape[1]
        if packed.shape[0] != self.counts.size or self.nb * 8 < self.m:
            raise LocalPrivError(f"count-sketch block: {packed.shape} packed reports for {self.counts.size} counts")
        log_c = np.asarray(log_c, dtype=float)
        shift = np.where(np.abs(log_c) > 600.0, log_c, 0.0)
        self.log_offset = float(self.counts @ shift)
        self.c = np.exp(log_c - shift)
        self.r0 = float(r0)
        rows = np.asarray(rows, dtype=np.int64)
        self._rows = rows
        base = (np.arange(self.nb)[:, None] + rows[None, :] * self.nb) * 256
        self._idx = base + packed.T  # (bytes x reports) indices into the d * nb * 256 table
        self._packed = packed

    def _phi_pad(self, theta: np.ndarray) -> NDArray[np.float64]:
        Phi = self.h.bucket(theta)
        if self.nb * 8 != self.m:
            Phi = np.pad(Phi, ((0, 0), (0, self.nb * 8 - self.m)))
        return Phi

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        theta = np.asarray(theta, dtype=float)
        table = self._phi_pad(theta).reshape(self.d, self.nb, 8) @ _BYTE_BITS.T  # d x nb x 256
        dot = table.ravel()[self._idx].sum(axis=0)  # over the bytes: whole-row additions
        return self.c * (self.r0 * theta.sum() + (1.0 - self.r0) * dot)

    def _spread(self, v: NDArray[np.float64]) -> NDArray[np.float64]:
        """``sum_j Psi[j, h_j(x)]`` with ``Psi[j, l] = sum_{i: j_i = j} v_i z_i[l]``."""
        acc = np.bincount(self._idx.ravel(), weights=np.tile(v, self.nb), minlength=self.d * self.nb * 256)
        Psi = (acc.reshape(self.d, self.nb, 256) @ _BYTE_BITS).reshape(self.d, self.nb * 8)[:, :self.m]
        return self.h.gather(Psi)

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        cw = self.c * np.asarray(w, dtype=float)
        return self.r0 * cw.sum() + (1.0 - self.r0) * self._spread(cw)

    def hessian_diagonal(self, w: np.ndarray) -> NDArray[np.float64]:
        """``sum_i w_i c_i^2 (r0 + (1 - r0) z)^2 = r0^2 sum(w c^2) + (1 - r0^2) sum_i w_i c_i^2 z_i[h(x)]``."""
        c2w = self.c * self.c * np.asarray(w, dtype=float)
        return self.r0 ** 2 * c2w.sum() + (1.0 - self.r0 ** 2) * self._spread(c2w)

    def dense(self) -> NDArray[np.float64]:

        n = self.counts.size
        check_dense_size(self.k, n, f"the likelihood of {n} reports")
        bits = np.unpackbits(self._packed, axis=1)  # n x nb*8
        table = (self.h.flat - (np.arange(self.d) * self.m)[:, None])  # d x k hash values
        hit = bits[np.arange(n)[:, None], table[self._rows]]  # n x k
        return (self.c[:, None] * (self.r0 + (1.0 - self.r0) * hit)).T


__all__ += ["fwht", "HadamardBlock", "RowHashing", "HadamardSketchBlock", "CountSketchBlock"]


# --------------------------------------------------------------------------------------------
# A translation kernel normalized per input on a grid (the exponential mechanism on a grid)
# --------------------------------------------------------------------------------------------
class NormalizedGridKernelBlock(LikelihoodBlock):
    """``M[x, z] = K[z - x] / C(x)`` on an ``R x C`` grid, with ``C(x) = sum_z K[z - x]`` over the grid.

    The channel of the exponential mechanism on a grid of square cells (McSherry and Talwar, FOCS
    2007; ``K[i, j] = exp(-eps s sqrt(i^2 + j^2) / 2)``, ``s`` the cell side): the distance between
    two cell centres depends on their displacement only, so every row is the same kernel, cut to
    the grid and normalized. Products by real 2-D FFTs of ``(2R - 1 + R) x (2C - 1 + C)`` points
    at most, with no ``k x k`` matrix:

    * ``theta @ M``: the linear convolution of ``theta / C`` with ``K``, read on the grid (floored at
      the smallest normal float, so that FFT round-off never makes a possible report impossible);
    * ``M @ w``: the correlation of the per-cell sums of ``w`` with ``K``, divided by ``C``.

    ``C`` is the correlation of the all-ones grid with ``K``. Equal to the dense channel up to FFT
    round-off (``~1e-16`` of the largest entry).

    Parameters
    ----------
    kernel : 2-D array ``(2 R - 1) x (2 C - 1)``
        ``kernel[R - 1 + i, C - 1 + j] = K(i, j)``, positive.
    shape : (R, C)
        The grid.
    outputs, counts : arrays
        Distinct observed cells (indices ``0..R*C-1``) and their counts.
    """

    costly_forward = True

    def __init__(self, kernel: ArrayLike, shape: tuple[int, int], outputs: ArrayLike, counts: ArrayLike) -> None:
        R, C = (check_int(shape[0], "rows", minimum=1), check_int(shape[1], "columns", minimum=1))
        K = np.asarray(kernel, dtype=float)
        if K.shape != (2 * R - 1, 2 * C - 1):
            raise LocalPrivError(f"kernel of a {R} x {C} grid must be {2 * R - 1} x {2 * C - 1}, got {K.shape}")
        self.shape, self.k, self.kernel = (R, C), R * C, K
        self.outputs, self.counts = _as_outputs(outputs, counts, self.k, "normalized grid-kernel block")
        self._N = (sfft.next_fast_len(3 * R - 2), sfft.next_fast_len(3 * C - 2, real=True))
        self._K = sfft.rfft2(K, self._N)
        self._Kflip = sfft.rfft2(K[::-1, ::-1], self._N)
        self.norm = self._correlate(np.ones((R, C)))

    def _convolve(self, T: np.ndarray) -> NDArray[np.float64]:
        R, C = self.shape
        F = sfft.irfft2(sfft.rfft2(T, self._N, workers=FFT_WORKERS) * self._K, self._N, workers=FFT_WORKERS)
        return np.asarray(F[R - 1:2 * R - 1, C - 1:2 * C - 1])

    def _correlate(self, W: np.ndarray) -> NDArray[np.float64]:
        R, C = self.shape
        F = sfft.irfft2(sfft.rfft2(W, self._N, workers=FFT_WORKERS) * self._Kflip, self._N, workers=FFT_WORKERS)
        return np.asarray(F[R - 1:2 * R - 1, C - 1:2 * C - 1]).ravel()

    def full_forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        """``theta @ M`` over all ``R * C`` cells (flattened)."""
        T = (np.asarray(theta, dtype=float) / self.norm).reshape(self.shape)
        return np.maximum(self._convolve(T).ravel(), np.finfo(float).tiny)

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        return self.full_forward(theta)[self.outputs]

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        W = np.bincount(self.outputs, weights=np.asarray(w, dtype=float), minlength=self.k).reshape(self.shape)
        return self._correlate(W) / self.norm

    def dense(self) -> NDArray[np.float64]:
        check_dense_size(self.k, self.outputs.size, "normalized grid-kernel block")
        R, C = self.shape
        r, c = np.divmod(np.arange(self.k), C)
        zr, zc = np.divmod(self.outputs, C)
        M = self.kernel[(zr[None, :] - r[:, None]) + R - 1, (zc[None, :] - c[:, None]) + C - 1]
        return np.asarray(M / self.norm[:, None])


__all__ += ["NormalizedGridKernelBlock"]
