"""Structured likelihood blocks: the two products EM needs, without a dense channel.

The EM engine (:mod:`localpriv.estimators.em`, seed 001 Algorithm 1 / seed 003 Algorithm 1) only
asks an observation block for ``forward(theta) = theta @ G`` (the probability of each distinct
report under ``theta``) and ``backward(w) = G @ w``, where ``G[x, j] = P(report_j | x)``
(seed 001 Definition 1). When the channel has structure these products cost far less than the
``O(k m)`` of a dense matrix:

* :class:`ScaledIdentityBlock` -- ``G[x, j] = b + (a - b) [x == z_j]``: k-RR (seed 001 Eq. 5) and the
  support-count channels of unary encodings, local hashing and subset selection (seed 002): ``O(k + m)``.
* :class:`ToeplitzBlock` -- ``G[x, z] = s_z h(z - x)`` over contiguous integer reports: the linear
  (truncated) geometric mechanism (seed 001 Eqs. 6-7, seed 003 Eq. 2) and any other translation
  invariant kernel with per-output scaling: FFT convolution, ``O((k + |Z|) log(k + |Z|))``.
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
    "ToeplitzBlock",
    "ClampedConvBlock",
    "linear_geometric_block",
    "laplace_block_for",
    "LaplaceDensityBlock",
    "planar_geometric_kernel",
    "planar_geometric_block",
]

#: threads used by each FFT (scipy.fft ``workers``); 1 by default, benchmarks on 2 cores set 2
FFT_WORKERS = 1

#: smallest kernel entry (relative to the largest) for which laplace_block_for uses the FFT
FFT_RANGE = 1e-12

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


# --------------------------------------------------------------------------------------------
# Toeplitz (1-D convolution) with per-output scaling
# --------------------------------------------------------------------------------------------
class ToeplitzBlock(LikelihoodBlock):
    """``G[x, z] = s_z h(z - x)`` for inputs ``x in 0..k-1`` and outputs ``z in 0..n_out-1``.

    ``h`` is given on the offsets ``d = -(k-1) .. n_out-1`` (``kernel[d + k - 1] = h(d)``), ``s``
    (``col_scale``, default 1) on the outputs. The products are convolutions computed by FFT::

        (theta @ G)_z = s_z * sum_x theta_x h(z - x)      = s_z * (theta * h)[z + k - 1]
        (G @ w)_x     = sum_z h(z - x) s_z w_z             (a correlation)

    each ``O(L log L)`` with ``L = 2k + n_out``. The linear geometric mechanism of seed 001
    Eqs. (6)-(7) is ``h(d) = e^{-eps |d|}`` with ``s_z = c_z`` (see :func:`linear_geometric_block`).

    Parameters
    ----------
    kernel : array, length ``k + n_out - 1``
    k, n_out : int
    outputs, counts : arrays
        Distinct observed outputs (indices ``0..n_out-1``) and their counts.
    col_scale : array of length ``n_out``, optional
    exact_columns : (indices, k x r array), optional
        Output columns whose entries are not of the Toeplitz form (e.g. the clamped end bins of a
        truncated Laplace mechanism): given exactly; the products use them instead of the
        convolution, at an extra ``O(k r)``.
    """

    def __init__(self, kernel, k: int, n_out: int, outputs, counts, col_scale=None, exact_columns=None):
        self.k = check_int(k, "k", minimum=1)
        self.n_out = check_int(n_out, "n_out", minimum=1)
        h = np.asarray(kernel, dtype=float).ravel()
        if h.size != self.k + self.n_out - 1:
            raise LocalPrivError(f"Toeplitz kernel needs k + n_out - 1 = {self.k + self.n_out - 1} "
                                 f"entries, got {h.size}")
        self.scale = (np.ones(self.n_out) if col_scale is None
                      else np.asarray(col_scale, dtype=float).ravel())
        if self.scale.size != self.n_out:
            raise LocalPrivError(f"col_scale needs {self.n_out} entries, got {self.scale.size}")
        self.outputs, self.counts = _as_outputs(outputs, counts, self.n_out, "Toeplitz block")
        self.kernel = h
        if exact_columns is None:
            self._fix_idx, self._fix_cols = np.zeros(0, dtype=np.int64), np.zeros((self.k, 0))
        else:
            idx, cols = exact_columns
            self._fix_idx = np.asarray(idx, dtype=np.int64).ravel()
            self._fix_cols = np.asarray(cols, dtype=float).reshape(self.k, self._fix_idx.size)
            if self._fix_idx.size and (self._fix_idx.min() < 0 or self._fix_idx.max() >= self.n_out):
                raise LocalPrivError(f"exact columns must lie in 0..{self.n_out - 1}")
        self._N = sfft.next_fast_len(max(self.k, self.n_out) + h.size - 1, real=True)
        self._H = sfft.rfft(h, self._N)
        self._Hrev = sfft.rfft(h[::-1], self._N)

    def full_forward(self, theta) -> np.ndarray:
        """``theta @ M`` over all ``n_out`` outputs."""
        theta = np.asarray(theta, dtype=float)
        conv = sfft.irfft(sfft.rfft(theta, self._N) * self._H, self._N)
        out = self.scale * conv[self.k - 1:self.k - 1 + self.n_out]
        if self._fix_idx.size:
            out[self._fix_idx] = theta @ self._fix_cols
        return out

    def forward(self, theta):
        return self.full_forward(theta)[self.outputs]

    def backward(self, w):
        u = np.bincount(self.outputs, weights=np.asarray(w, dtype=float), minlength=self.n_out)
        fixed = u[self._fix_idx]
        u[self._fix_idx] = 0.0
        u *= self.scale
        conv = sfft.irfft(sfft.rfft(u, self._N) * self._Hrev, self._N)
        out = conv[self.n_out - 1:self.n_out - 1 + self.k]
        if self._fix_idx.size:
            out = out + self._fix_cols @ fixed
        return out

    def dense(self):
        x = np.arange(self.k)[:, None]
        z = self.outputs[None, :]
        G = self.scale[z] * self.kernel[z - x + self.k - 1]
        for i, col in zip(self._fix_idx, self._fix_cols.T):
            G[:, self.outputs == i] = col[:, None]
        return G


def linear_geometric_block(k: int, eps: float, outputs, counts) -> ToeplitzBlock:
    """The truncated linear geometric mechanism on ``0..k-1`` as a :class:`ToeplitzBlock`.

    Seed 001 Eqs. (6)-(7) (seed 003 Eq. 2)::

        P(z | x) = c_z e^{-eps |z - x|},
        c_z = 1 / (1 + e^{-eps})                   if z in {0, k-1}
              (1 - e^{-eps}) / (1 + e^{-eps})      otherwise

    i.e. a Toeplitz kernel ``h(d) = e^{-eps |d|}`` with column scaling ``c_z``: exact, no truncation.
    """
    k = check_int(k, "k", minimum=2)
    eps = check_eps(eps)
    d = np.arange(-(k - 1), k)
    h = np.exp(-eps * np.abs(d))
    r = math.exp(-eps)
    c = np.full(k, (1 - r) / (1 + r))
    c[0] = c[-1] = 1 / (1 + r)
    return ToeplitzBlock(h, k, k, outputs, counts, col_scale=c)


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


def geometric_block_for(mech, outputs, counts):
    """A :class:`ToeplitzBlock` for a :class:`~localpriv.mechanisms.geometric.Geometric`, or ``None``.

    * truncated with ``lo <= 0`` and ``hi >= k-1`` (every input inside the output range): seed 001
      Eq. 7 holds, ``G[x, z] = c_z e^{-eps |z + lo - x|}``;
    * untruncated: ``G[x, z] = c e^{-eps |z - x|}`` on the contiguous range spanned by the reports,
      used when that range is at most ``8 (k + m)`` long (otherwise the dense block is cheaper).
    """
    k, eps = mech.k, mech.eps
    a = math.exp(-eps)
    outputs = np.asarray(outputs, dtype=np.int64)
    if mech.truncated:
        lo, hi = mech.lo, mech.hi
        if lo > 0 or hi < k - 1:
            return None
        n_out = hi - lo + 1
        d = np.arange(-(k - 1), n_out) + lo
        c = np.full(n_out, (1 - a) / (1 + a))
        c[0] = c[-1] = 1 / (1 + a)
        if n_out == 1:
            c[0] = 1.0
        return ToeplitzBlock(np.exp(-eps * np.abs(d)), k, n_out, outputs, counts, col_scale=c)
    if outputs.size == 0:
        return None
    zmin, zmax = int(outputs.min()), int(outputs.max())
    n_out = zmax - zmin + 1
    if n_out > 8 * (k + outputs.size):
        return None
    d = np.arange(-(k - 1), n_out) + zmin
    h = -math.expm1(-eps) / (1 + a) * np.exp(-eps * np.abs(d))
    return ToeplitzBlock(h, k, n_out, outputs - zmin, counts)


def laplace_block_for(mech, outputs, counts):
    """A structured block for a :class:`~localpriv.mechanisms.laplace.Laplace`, or ``None``.

    Continuous reports: :class:`LaplaceDensityBlock` (``O(k + m)``). Unit bins (``bins=1``): a
    :class:`ToeplitzBlock`; other bin widths: ``None`` (the dense block).

    Bin ``j`` holds ``x + N`` rounded to the nearest integer, so ``P(j | x) = h(j - x)`` with
    ``h(d) = P(d - 1/2 <= N < d + 1/2)`` (seed 001 section 7.3): a Toeplitz kernel. Truncated
    (``lo..hi``), the two end bins collect the tails; they are passed as exact columns. Untruncated,
    the block spans the contiguous range of the reports when it is at most ``8 (k + m)`` long.
    When the kernel spans more than 12 orders of magnitude (``eps`` times the range beyond ~27),
    FFT round-off would swamp the smallest probabilities, and the dense block is used instead.
    """
    from .mechanisms.laplace import laplace_interval_prob

    if mech.continuous:
        return LaplaceDensityBlock(mech.k, mech.eps, outputs, counts)
    if mech.bins != 1.0:
        return None
    k = mech.k
    outputs = np.asarray(outputs).astype(np.int64)
    if mech.truncated:
        base, n_out = mech.lo, mech.hi - mech.lo + 1
        ends = np.array([0, n_out - 1])
        cols = mech._bin_prob(np.arange(k)[:, None], ends[None, :] + base)
        exact = (ends, cols)
    else:
        if outputs.size == 0:
            return None
        base = int(outputs.min())
        n_out = int(outputs.max()) - base + 1
        if n_out > 8 * (k + outputs.size):
            return None
        outputs = outputs - base
        exact = None
    d = (np.arange(-(k - 1), n_out) + base).astype(float)
    h = laplace_interval_prob(d - 0.5, d + 0.5, mech.eps)
    if h.min() < FFT_RANGE * h.max():
        return None  # FFT round-off (~1e-16 of the largest term) would swamp the smallest terms
    return ToeplitzBlock(h, k, n_out, outputs, counts, exact_columns=exact)


class LaplaceDensityBlock(LikelihoodBlock):
    """Continuous linear Laplace reports: ``G[x, j] = (eps/2) exp(-eps |z_j - x|)``, ``x = 0..k-1``.

    Seed 001 section 7.3's density for real reports ``z_j`` (one column per distinct report, so
    a dense block costs ``k x m`` memory: 8 GB for ``k = 1000``, ``m = 10^6``). With
    ``r = e^{-eps}`` and ``t_j = floor(z_j)`` clipped to ``-1..k-1``, the two one-sided sums are
    first-order recurrences (``scipy.signal.lfilter``)::

        A_t = r A_{t-1} + theta_t,   B_t = r B_{t+1} + theta_t,
        (theta @ G)_j = (eps/2) (A_{t_j} e^{-eps (z_j - t_j)} + B_{t_j+1} e^{-eps (t_j + 1 - z_j)}),

    (terms with ``t`` outside ``0..k-1`` are 0), and ``G @ w`` is the transposed pair of
    recurrences over the per-``t`` sums of ``w``: ``O(k + m)`` each, no FFT round-off.
    """

    def __init__(self, k: int, eps: float, reports, counts):
        self.k = check_int(k, "k", minimum=1)
        self.eps = check_eps(eps)
        z = np.asarray(reports, dtype=float).ravel()
        self.counts = np.asarray(counts, dtype=float).ravel()
        if z.size != self.counts.size:
            raise LocalPrivError(f"Laplace density block: {z.size} reports but {self.counts.size} counts")
        if not np.all(np.isfinite(z)):
            raise LocalPrivError("Laplace density block: reports must be finite")
        self.z = z
        t = np.clip(np.floor(z), -1, self.k - 1).astype(np.int64)
        self._t = t
        self._r = math.exp(-self.eps)
        self._left = np.exp(-self.eps * (z - t))  # to the nearest input at or below z (t >= 0)
        self._right = np.exp(-self.eps * (t + 1 - z))  # to the nearest input above z (t + 1 <= k-1)
        self._has_left = t >= 0
        self._has_right = t + 1 <= self.k - 1

    def _rec(self, v, reverse=False):
        v = v[::-1] if reverse else v
        out = lfilter([1.0], [1.0, -self._r], v)
        return out[::-1] if reverse else out

    def forward(self, theta):
        theta = np.asarray(theta, dtype=float)
        A = self._rec(theta)
        B = self._rec(theta, reverse=True)
        t = self._t
        left = np.where(self._has_left, A[np.maximum(t, 0)] * self._left, 0.0)
        right = np.where(self._has_right, B[np.minimum(t + 1, self.k - 1)] * self._right, 0.0)
        return 0.5 * self.eps * (left + right)

    def backward(self, w):
        w = np.asarray(w, dtype=float)
        t = self._t
        u = np.bincount(t[self._has_left], weights=(w * self._left)[self._has_left], minlength=self.k)
        v = np.bincount((t + 1)[self._has_right], weights=(w * self._right)[self._has_right],
                        minlength=self.k)
        return 0.5 * self.eps * (self._rec(u, reverse=True) + self._rec(v))

    def dense(self):
        x = np.arange(self.k)[:, None]
        return 0.5 * self.eps * np.exp(-self.eps * np.abs(self.z[None, :] - x))

