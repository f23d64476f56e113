"""Planar convolution blocks by real 2-D FFTs (the likelihood of grid mechanisms)."""
from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.utils.validation import LocalPrivError


class _ConvolutionBlock(Protocol):
    """What :meth:`RfftClampedBlock.from_block` reads of a
    :class:`~localpriv.likelihood.structured.ClampedConvBlock` (which imports this module)."""

    @property
    def kernel(self) -> np.ndarray: ...
    @property
    def shape(self) -> tuple[int, int]: ...
    @property
    def P(self) -> tuple[int, int]: ...
    @property
    def outputs(self) -> np.ndarray: ...
    @property
    def counts(self) -> np.ndarray: ...
    @property
    def _N(self) -> tuple[int, int]: ...
    @property
    def _K(self) -> np.ndarray: ...
    @property
    def _Kflip(self) -> np.ndarray: ...

__all__ = ["RfftClampedBlock"]


# --------------------------------------------------------------------------------------------
# The planar FFT block as the EM engine evaluates it
# --------------------------------------------------------------------------------------------
class RfftClampedBlock(LikelihoodBlock):
    """A grid kernel clamped onto an ``R x C`` grid (seed 003 section 2.3), with real 2-D FFTs on
    reused padded buffers: the products of :class:`localpriv.likelihood.structured.ClampedConvBlock` (forward
    floored at the smallest normal float, as the planar mechanisms' block), one real FFT pair each.

    ``P(z | x) = sum_{g: clamp(g) = z} K[g - x]`` for a kernel ``K`` of half-widths ``(P_r, P_c)``.
    With ``N`` the FFT shape (at least ``(R + 2 P_r) x (C + 2 P_c)``, a fast length):

    * ``theta @ G``: ``theta`` is written into the corner of a zeroed ``N`` buffer kept for the
      run, ``F = irfftn(rfftn(buffer) * rfftn(K))`` is the full linear convolution (the inverse taken
      axis by axis, in place, real only on the rows needed: :meth:`_convolve`); the rows above
      and below the grid are summed onto its first and last rows and the columns left and right onto
      its first and last columns, in place in ``F`` (exactly the mass the clamp sends there), and
      the observed cells are gathered from ``F`` directly (no copies of the grid);
    * ``G @ w``: the per-cell sums of ``w`` are written into a second buffer, extended by edge
      replication (``w_ext[g] = w[clamp(g)]``) in place, and correlated with ``K`` (the spectrum of
      the flipped kernel is kept).

    ``scipy.fft`` with ``workers = structured.FFT_WORKERS`` (1 by default).
    A likelihood block in the sense of :class:`localpriv.likelihood.blocks.LikelihoodBlock` (same
    protocol). ``costly_forward`` tells
    the EM engine that a forward product is an FFT pair, so that its SQUAREM
    cycles make one forward product per EM evaluation (:func:`localpriv.estimators.em.em`).
    """

    costly_forward = True
    #: the Newton finish starts small coordinates that EM shrinks at zero (see LikelihoodBlock)
    newton_drop_factor = 1e-4

    def __init__(self, kernel: ArrayLike, shape: tuple[int, int], outputs: ArrayLike, counts: ArrayLike,
                 spectra: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        from scipy import fft as sfft

        K = np.asarray(kernel, dtype=float)
        if K.ndim != 2 or K.shape[0] % 2 == 0 or K.shape[1] % 2 == 0:
            raise LocalPrivError(f"kernel must be a 2-D array of odd sides, got shape {K.shape}")
        R, C = int(shape[0]), int(shape[1])
        if R < 1 or C < 1:
            raise LocalPrivError(f"grid shape must be at least 1 x 1, got {shape}")
        self.shape, self.k, self.kernel = (R, C), R * C, K
        self.P = Pr, Pc = K.shape[0] // 2, K.shape[1] // 2
        self.outputs = np.asarray(outputs, dtype=np.int64).ravel()
        self.counts = np.asarray(counts, dtype=float).ravel()
        if self.outputs.size != self.counts.size:
            raise LocalPrivError(f"planar block: {self.outputs.size} reports but {self.counts.size} counts")
        if self.outputs.size and (self.outputs.min() < 0 or self.outputs.max() >= self.k):
            raise LocalPrivError(f"planar block: report cells must lie in 0..{self.k - 1}")
        self._ext = (R + 2 * Pr, C + 2 * Pc)
        self._N = (sfft.next_fast_len(self._ext[0]), sfft.next_fast_len(self._ext[1], real=True))
        if spectra is None:
            spectra = (sfft.rfftn(K, self._N), sfft.rfftn(K[::-1, ::-1], self._N))
        self._K, self._Kflip = spectra
        self._K2flip: np.ndarray | None = None  # the squared kernel's, for :meth:`hessian_diagonal`
        self._fbuf = np.zeros(self._N)
        self._bbuf = np.zeros(self._N)
        r, c = np.divmod(self.outputs, C)
        self._gather = (Pr + r) * self._N[1] + (Pc + c)
        #: distinct report cells (as the mechanisms' blocks have): G @ w writes w into the grid directly
        self._distinct = np.unique(self.outputs).size == self.outputs.size

    @classmethod
    def from_block(cls, block: _ConvolutionBlock) -> RfftClampedBlock:
        """The same products as a (floored) :class:`~localpriv.likelihood.structured.ClampedConvBlock`, reusing its
        kernel spectra (same FFT shape)."""
        spectra = (block._K, block._Kflip) if tuple(block._N) == cls._fft_shape(block) else None
        return cls(block.kernel, block.shape, block.outputs, block.counts, spectra)

    @staticmethod
    def _fft_shape(block: _ConvolutionBlock) -> tuple[int, int]:
        from scipy import fft as sfft

        (R, C), (Pr, Pc) = block.shape, block.P
        return (sfft.next_fast_len(R + 2 * Pr), sfft.next_fast_len(C + 2 * Pc, real=True))

    @staticmethod
    def _workers() -> int:
        import sys

        structured = sys.modules.get("localpriv.likelihood.structured")
        return int(getattr(structured, "FFT_WORKERS", 1) or 1)

    def _convolve(self, buf: NDArray[np.float64], spectrum: np.ndarray, rows: slice) -> NDArray[np.float64]:
        """Rows ``rows`` of the circular convolution of ``buf`` with the kernel whose spectrum is given:
        ``rfftn``, the product in place, then the inverse axis by axis -- the complex inverse along the
        rows in place (the spectrum is ours), the real inverse only for the rows asked for (``irfftn``
        would copy the spectrum and invert every row)."""
        from scipy import fft as sfft

        workers = self._workers()
        spec = sfft.rfftn(buf, workers=workers)
        spec *= spectrum
        spec = sfft.ifft(spec, axis=0, workers=workers, overwrite_x=True)
        return sfft.irfft(spec[rows], n=self._N[1], axis=1, workers=workers, overwrite_x=True)

    def _full(self, theta: np.ndarray) -> NDArray[np.float64]:
        """``F``: the folded linear convolution, rows ``0..R + 2 P_r - 1`` of the ``N`` grid (the grid's
        cells at offset ``P``)."""
        R, C = self.shape
        Pr, Pc = self.P
        e0, e1 = self._ext
        buf = self._fbuf
        buf[:R, :C] = np.asarray(theta, dtype=float).reshape(R, C)
        F = self._convolve(buf, self._K, slice(0, e0))
        # fold the rows outside the grid onto its border rows, then the columns onto border columns
        F[Pr, :e1] += F[:Pr, :e1].sum(axis=0)
        F[Pr + R - 1, :e1] += F[Pr + R:e0, :e1].sum(axis=0)
        rows = F[Pr:Pr + R]
        rows[:, Pc] += rows[:, :Pc].sum(axis=1)
        rows[:, Pc + C - 1] += rows[:, Pc + C:e1].sum(axis=1)
        return F

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        """``theta @ G``; floored at the smallest normal float when ``theta`` has no negative entry
        (a distribution: a possible report never reads as impossible after the FFT's round-off), exact
        otherwise (the signed directions of the Newton finish's Hessian products, which must stay
        linear)."""
        out = self._full(theta).ravel()[self._gather]
        if np.min(theta) >= 0.0:
            np.maximum(out, np.finfo(float).tiny, out=out)
        return out

    def hessian_diagonal(self, w: np.ndarray) -> NDArray[np.float64]:
        """The Newton finish's preconditioner: ``sum_j w_j K[z_j - x]^2``, the correlation of the
        edge-replicated ``w`` with the squared kernel (one FFT pair, the squared kernel's spectrum kept).

        Equal to the diagonal ``sum_j w_j G[x, j]^2`` of ``G diag(w) G^T`` for reports off the grid's
        border; for a border report, whose ``G[x, j]`` sums the kernel over the folded cells, it is the
        sum of the squares instead of the square of the sum (smaller, positive). The Newton finish uses
        the diagonal only to precondition conjugate gradients and certifies its point by the KKT
        conditions computed from exact products, so the approximation changes speed, never the
        certificate. Floored at the smallest normal float (FFT round-off never makes it non-positive).
        """
        from scipy import fft as sfft

        spec = self._K2flip
        if spec is None:
            K2 = self.kernel ** 2
            spec = self._K2flip = sfft.rfftn(K2[::-1, ::-1], self._N)
        out = self._correlate(w, spec)
        return np.maximum(out, np.finfo(float).tiny, out=out)

    @property
    def sparse_limit(self) -> int:
        """Most cells :meth:`sparse_forward` takes: its cost, ``(2 P_r + 1)(2 P_c + 1)`` per cell,
        stays below one pass over the grid (an FFT pair costs several)."""
        return max(1, self.k // ((2 * self.P[0] + 1) * (2 * self.P[1] + 1)))

    def _window(self, r: int, c: int) -> tuple[slice, slice, NDArray[np.float64]]:
        """The kernel placed at cell ``(r, c)`` and clamped onto the grid: ``(rows, cols, W)`` with
        ``W[i, j] = sum_{g: clamp(g) = (rows.start + i, cols.start + j)} K[g - (r, c)]`` (the rows
        and columns beyond the grid folded onto its border rows and columns)."""
        R, C = self.shape
        Pr, Pc = self.P
        W = self.kernel
        r0, r1, c0, c1 = r - Pr, r + Pr + 1, c - Pc, c + Pc + 1
        if r0 < 0 or r1 > R:
            lo, hi = max(r0, 0), min(r1, R)
            rows = W[lo - r0:hi - r0].copy()
            rows[0] += W[:lo - r0].sum(axis=0)
            rows[-1] += W[hi - r0:].sum(axis=0)
            W, r0, r1 = rows, lo, hi
        if c0 < 0 or c1 > C:
            lo, hi = max(c0, 0), min(c1, C)
            cols = W[:, lo - c0:hi - c0].copy()
            cols[:, 0] += W[:, :lo - c0].sum(axis=1)
            cols[:, -1] += W[:, hi - c0:].sum(axis=1)
            W, c0, c1 = cols, lo, hi
        return slice(r0, r1), slice(c0, c1), W

    def sparse_forward(self, cells: np.ndarray, weights: np.ndarray) -> NDArray[np.float64]:
        """``w @ G`` for a ``w`` that is zero outside ``cells`` (``w[cells] = weights``), by direct
        summation: ``(w @ G)_j = sum_x w_x P(z_j | x)``, each cell's clamped kernel window
        (:meth:`_window`) added onto the grid, then the observed cells gathered. No FFT and no
        round-off of one: used by the EM engine for the few cells where SQUAREM's floor binds
        (:func:`localpriv.estimators.em._squarem`). Cost ``O(len(cells) P_r P_c + m)``."""
        R, C = self.shape
        buf = getattr(self, "_sbuf", None)
        if buf is None:
            buf = self._sbuf = np.zeros((R, C))
        cells = np.asarray(cells, dtype=np.int64).ravel()
        weights = np.asarray(weights, dtype=float).ravel()
        wins = [self._window(*divmod(int(x), C)) for x in cells]
        for (rs, cs, W), wx in zip(wins, weights):
            buf[rs, cs] += wx * W
        out = buf.ravel()[self.outputs]
        for rs, cs, _ in wins:
            buf[rs, cs] = 0.0
        return out

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        return self._correlate(w, self._Kflip)

    def _correlate(self, w: np.ndarray, spectrum: np.ndarray) -> NDArray[np.float64]:
        """The per-cell sums of ``w``, edge-replicated, correlated with the kernel whose flipped
        spectrum is given (``G @ w`` with the kernel's own)."""
        R, C = self.shape
        Pr, Pc = self.P
        e0, e1 = self._ext
        B = self._bbuf
        W = B[Pr:Pr + R, Pc:Pc + C]
        if self._distinct:  # the grid's other cells stay 0: write the reports' weights in place
            B.ravel()[self._gather] = w
        else:
            W[...] = np.bincount(self.outputs, weights=np.asarray(w, dtype=float), minlength=self.k).reshape(R, C)
        B[Pr:Pr + R, :Pc] = W[:, :1]
        B[Pr:Pr + R, Pc + C:e1] = W[:, -1:]
        B[:Pr, :e1] = B[Pr, :e1]
        B[Pr + R:e0, :e1] = B[Pr + R - 1, :e1]
        conv = self._convolve(B, spectrum, slice(2 * Pr, 2 * Pr + R))
        return conv[:, 2 * Pc:2 * Pc + C].ravel()

    def dense(self) -> NDArray[np.float64]:
        """``G`` column by column from unit inputs (small cases only; refused above the dense cap)."""
        check_dense_size(self.k, self.outputs.size, "the planar likelihood")
        unit = np.zeros(self.k)
        G = np.empty((self.k, self.outputs.size))
        for x in range(self.k):
            unit[x] = 1.0
            G[x] = self.forward(unit)
            unit[x] = 0.0
        return G
