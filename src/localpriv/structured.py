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
  Laplace with unit bins or grid reports (seed 001 section 7.3; issue 15), truncated ends as exact
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

import numpy as np
from scipy import fft as sfft
from scipy.signal import lfilter

from ._validation import LocalPrivError, check_eps, check_int
from .mechanisms.base import LikelihoodBlock

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
]

#: threads used by each FFT (scipy.fft ``workers``); 1 by default, benchmarks on 2 cores set 2
FFT_WORKERS = 1

#: the largest kernel half-width a :class:`ClampedConvBlock` accepts (memory guard)
MAX_HALF_WIDTH = 4096


def _as_outputs(outputs, counts, n_out: int, what: str):
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

    def __init__(self, k: int, a: float, b: float, outputs, counts):
        self.k = check_int(k, "k", minimum=1)
        self.a, self.b = float(a), float(b)
        self.outputs, self.counts = _as_outputs(outputs, counts, self.k, "scaled-identity block")
        # every output observed, in order (support counts, k-RR with all values seen): no gathers
        self._all = self.outputs.size == self.k and bool(np.all(self.outputs == np.arange(self.k)))

    def forward(self, theta):
        theta = np.asarray(theta, dtype=float)
        out = theta * (self.a - self.b) if self._all else (self.a - self.b) * theta[self.outputs]
        out += self.b * theta.sum()
        return out

    def backward(self, w):
        w = np.asarray(w, dtype=float)
        if self._all:
            out = w * (self.a - self.b)
        else:
            out = np.bincount(self.outputs, weights=(self.a - self.b) * w, minlength=self.k)
        out += self.b * w.sum()
        return out

    def hessian_diagonal(self, w):
        """``sum_j w_j G[x, j]^2 = b^2 sum(w) + (a^2 - b^2) sum_{j: z_j = x} w_j``."""
        w = np.asarray(w, dtype=float)
        d2 = self.a * self.a - self.b * self.b
        if self._all:
            out = w * d2
        else:
            out = np.bincount(self.outputs, weights=d2 * w, minlength=self.k)
        out += self.b * self.b * w.sum()
        return out

    def dense(self):
        G = np.full((self.k, self.outputs.size), self.b)
        G[self.outputs, np.arange(self.outputs.size)] = self.a
        return G


def linear_geometric_block(k: int, eps: float, outputs, counts) -> ExpKernelBlock:
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
    (as :class:`localpriv.planar.GridDomain`).

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

    def __init__(self, kernel, shape, outputs, counts):
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

    def full_forward(self, theta) -> np.ndarray:
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

    def forward(self, theta):
        return self.full_forward(theta)[self.outputs]

    def backward(self, w):
        R, C = self.shape
        Pr, Pc = self.P
        W = np.bincount(self.outputs, weights=np.asarray(w, dtype=float), minlength=self.k).reshape(R, C)
        Wext = np.pad(W, ((Pr, Pr), (Pc, Pc)), mode="edge")
        spec = sfft.rfft2(Wext, self._N, workers=FFT_WORKERS) * self._Kflip
        conv = sfft.irfft2(spec, self._N, workers=FFT_WORKERS)
        return conv[2 * Pr:2 * Pr + R, 2 * Pc:2 * Pc + C].ravel()

    def dense(self):
        R, C = self.shape
        eye = np.zeros(self.k)
        cols = []
        for x in range(self.k):  # small cases only
            eye[x] = 1.0
            cols.append(self.full_forward(eye)[self.outputs])
            eye[x] = 0.0
        return np.vstack(cols)


def planar_geometric_kernel(eps: float, cell: float = 1.0, tol: float = 1e-17) -> np.ndarray:
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


def planar_geometric_block(shape, eps: float, cell: float, outputs, counts, tol: float = 1e-17):
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

    def forward(self, theta):
        return np.maximum(super().forward(theta), np.finfo(float).tiny)


def clamped_block_for(kernel, scale: float, shape, outputs, counts) -> ClampedConvBlock:
    """A :class:`ClampedConvBlock` for a planar mechanism's ``(2R+1) x (2R+1)`` kernel.

    The kernel (e.g. :meth:`localpriv.mechanisms.planar_mechanisms.PlanarGeometric.kernel`, whose
    ``R`` covers the whole grid so that tiny channel entries keep full relative accuracy for the
    privacy computation) is cropped to the half-width ``P = ceil(48 / scale)`` (``scale = eps * s``,
    the decay rate per cell), beyond which both the planar geometric and the planar Laplace kernels
    hold less than ``(1 + 48) e^{-48} < 1e-19`` of their mass: the products change by less than that,
    relative, while the FFTs shrink from ``(R_grid + 2R)^2`` to ``(R_grid + 2P)^2``.
    """
    K = np.asarray(kernel, dtype=float)
    R = K.shape[0] // 2
    P = min(R, int(math.ceil(_CROP_U / scale)))
    return _FlooredClampedConvBlock(K[R - P:R + P + 1, R - P:R + P + 1], shape, outputs, counts)


def _clamped_line_block(mech, outputs, counts, interior_weight, diag, end_prob):
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


def geometric_block_for(mech, outputs, counts):
    """An :class:`ExpKernelBlock` for a :class:`~localpriv.mechanisms.geometric.Geometric`.

    ``P(z | x) = c a^{|z - x|}``, ``c = (1 - a)/(1 + a)``, ``a = e^{-eps}`` (seed 001 Eq. 6) for
    every report of the untruncated mechanism and every interior report of the truncated one;
    the end bins ``lo``, ``hi`` of the truncated mechanism (the clamped tails, seed 001 Eq. 7 when
    ``lo <= x <= hi``) are exact columns. Any ``lo``, ``hi`` and any report range: ``O(k + m)``.
    """
    return _clamped_line_block(mech, outputs, counts, math.tanh(0.5 * mech.eps), None, mech._prob)


def laplace_block_for(mech, outputs, counts):
    """A structured block for a :class:`~localpriv.mechanisms.laplace.Laplace`, or ``None``.

    Grid reports (``bins=None``, issue 15): ``z = x + g D`` with ``D`` discrete Laplace, so
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


def discrete_laplace_block(k: int, eps: float, step: float, positions, counts, exact_columns=None):
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
    """

    def __init__(self, k: int, rate: float, positions, weights, counts, diag=None, exact_columns=None):
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
            keep = ~np.isin(self._diag_idx, self._fix_idx)
            self._diag_idx = self._diag_idx[keep]
            if diag is not None:
                self._diag_x, self._diag_val = self._diag_x[keep], self._diag_val[keep]

    def _rec(self, v, reverse=False):
        v = v[::-1] if reverse else v
        out = lfilter([1.0], [1.0, -self._r], v)
        return out[::-1] if reverse else out

    def forward(self, theta):
        theta = np.asarray(theta, dtype=float)
        A = self._rec(theta)
        B = self._rec(theta, reverse=True)
        with np.errstate(under="ignore"):  # terms below 1e-308 may round to 0: harmless
            out = A[self._tl] * self._left + B[self._tr] * self._right
        if self._diag_idx.size:
            out[self._diag_idx] += self._diag_val * theta[self._diag_x]
        if self._fix_idx.size:
            out[self._fix_idx] = theta @ self._fix_cols
        return out

    def backward(self, w):
        w = np.asarray(w, dtype=float)
        with np.errstate(under="ignore"):  # terms below 1e-308 may round to 0: harmless
            u = np.bincount(self._tl, weights=w * self._left, minlength=self.k)
            v = np.bincount(self._tr, weights=w * self._right, minlength=self.k)
        out = self._rec(u, reverse=True) + self._rec(v)
        if self._diag_idx.size:
            out += np.bincount(self._diag_x, weights=self._diag_val * w[self._diag_idx], minlength=self.k)
        if self._fix_idx.size:
            out += self._fix_cols @ w[self._fix_idx]
        return out

    def dense(self):
        x = np.arange(self.k)[:, None]
        G = self.weights[None, :] * np.exp(-self.rate * np.abs(self.positions[None, :] - x))
        if self._diag_idx.size:
            G[self._diag_x, self._diag_idx] = self._diag_val
        if self._fix_idx.size:
            G[:, self._fix_idx] = self._fix_cols
        return G
