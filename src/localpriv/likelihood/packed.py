"""Support matrices held as packed bits: the pure protocols' ``Z`` at 1 bit per entry
(docs/decisions/0006-packed-bit-supports.md).

The pure protocols' likelihood (:class:`localpriv.mechanisms.unary.SupportBlock`) needs two
products per EM evaluation with the ``m x k`` 0/1 support matrix ``Z`` of the distinct reports:
``Z @ theta`` and ``Z.T @ w``. Unary encodings and subset selection *report* packed bits, so ``Z``
is the reports themselves (``ceil(k/8)`` bytes per report); held as a sparse matrix it costs 12
bytes per set bit (27 set bits per OUE report at ``eps = 1``, ``k = 100``: 324 MB per pass over
10^6 reports, 24 ms per product, memory bound).

:class:`PackedSupport` computes both products from the bytes (``B = ceil(k/8)`` per row):

* ``Z @ theta``: a table ``T[b, byte] = sum of theta over the bits set in byte`` for each byte
  position ``b`` (``B x 256``, built from ``theta`` per call), then ``(Z theta)_j = sum_b
  T[b, P[j, b]]``: ``B`` lookups per report;
* ``Z.T @ w``: per byte position the histogram ``H[b, byte] = sum of w_j over reports j with that
  byte`` (``B`` scatter-adds per report), then ``(Z^T w)_{8b+t} = sum over bytes with bit t of
  H[b, byte]``: a ``B x 256`` by ``256 x 8`` product.

Both are ``O(m B)`` with ``B = k/8``, whatever the density, on a ``13 MB`` array at ``m = 10^6``.
The loops are compiled with numba (cached on disk like the engine's kernels,
:mod:`localpriv.estimators._kernels`); ``LOCALPRIV_NUMBA=0`` uses NumPy's gathers and ``bincount``
(same sums, a different order: equal to round-off). The weighted Gram matrix ``Z^T diag(w) Z`` (the
observed information, :mod:`localpriv.inference.uncertainty`) unpacks chunks of rows and uses BLAS.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from localpriv.utils.jit import numba_enabled

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["PackedSupport", "BIT_TABLE", "POPCOUNT", "last_byte_mask", "row_popcounts"]

#: ``BIT_TABLE[byte, t]`` = bit ``t`` of ``byte`` in NumPy's big-endian ``packbits`` order
BIT_TABLE = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(float)
#: set bits per byte value
POPCOUNT = BIT_TABLE.sum(axis=1).astype(np.int64)

#: rows unpacked at a time for the Gram matrix and ``toarray`` chunks (memory by chunk)
_CHUNK_ENTRIES = 1 << 22

_KERNELS: dict[str, Callable[..., None]] | None = None


def last_byte_mask(k: int) -> np.uint8:
    """The bits of a row's last byte that belong to a ``k``-element domain (the rest is padding)."""
    pad = -(-int(k) // 8) * 8 - int(k)
    return np.uint8(0xFF ^ ((1 << pad) - 1))


def row_popcounts(P: np.ndarray, k: int) -> np.ndarray:
    """Set bits per row of packed ``m x ceil(k/8)`` uint8 rows, padding bits ignored (int64), without
    unpacking or copying the rows."""
    if not P.shape[1]:
        return np.zeros(P.shape[0], dtype=np.int64)
    out = POPCOUNT[P[:, -1] & last_byte_mask(k)]
    if P.shape[1] > 1:
        out = out + POPCOUNT[P[:, :-1]].sum(axis=1)
    return out


def _matvec(P: NDArray[np.uint8], table: NDArray[np.float64], out: NDArray[np.float64]) -> None:
    m, B = P.shape
    for j in range(m):
        s = 0.0
        for b in range(B):
            s += table[b, P[j, b]]
        out[j] = s


def _histograms(P: NDArray[np.uint8], w: NDArray[np.float64], H: NDArray[np.float64]) -> None:
    m, B = P.shape
    for j in range(m):
        wj = w[j]
        for b in range(B):
            H[b, P[j, b]] += wj


def _kernels() -> dict[str, Callable[..., None]]:
    global _KERNELS
    if _KERNELS is None:
        import numba

        def jit(f: Callable[..., None]) -> Callable[..., None]:
            try:
                return numba.njit(cache=True, nogil=True)(f)
            except (RuntimeError, OSError):  # no writable cache location: compile in memory
                return numba.njit(cache=False, nogil=True)(f)

        _KERNELS = {"matvec": jit(_matvec), "histograms": jit(_histograms)}
    return _KERNELS


def _compiled() -> bool:
    return numba_enabled()


class _Transposed:
    """``Z.T`` of a :class:`PackedSupport`: supports ``Z.T @ w`` only."""

    def __init__(self, parent: PackedSupport) -> None:
        self.parent = parent
        self.shape = parent.shape[::-1]

    def __matmul__(self, w: np.ndarray) -> NDArray[np.float64]:
        return self.parent.rmatvec(w)


class PackedSupport:
    """An ``m x k`` 0/1 matrix stored as ``m x ceil(k/8)`` packed bytes (NumPy ``packbits`` order).

    Bits at positions ``>= k`` (padding of the last byte) are ignored. Offers what
    :class:`~localpriv.mechanisms.unary.SupportBlock` uses: ``Z @ theta``, ``Z.T @ w``,
    :meth:`gram` (``Z^T diag(w) Z``), :meth:`toarray`, :meth:`tocsr`, ``shape``, ``nnz`` and :meth:`vstack`.
    """

    #: entries are 0 or 1, so ``Z * Z == Z`` (the Newton finish's Hessian diagonal uses it)
    binary = True

    def __init__(self, packed: np.ndarray, k: int) -> None:
        P = np.ascontiguousarray(packed, dtype=np.uint8)
        k = int(k)
        if P.ndim != 2 or P.shape[1] != -(-k // 8):
            raise ValueError(f"packed support of a {k}-element domain needs {-(-k // 8)} bytes per row, "
                             f"got shape {P.shape}")
        mask = last_byte_mask(k)
        if P.shape[0] and P.shape[1] and np.any(P[:, -1] & ~mask):
            P = P.copy()
            P[:, -1] &= mask  # padding bits never count
        self.P = P
        self.k = k
        self.shape = (P.shape[0], k)
        self._nnz: int | None = None

    @property
    def nnz(self) -> int:
        if self._nnz is None:
            self._nnz = int(POPCOUNT[self.P].sum())
        return self._nnz

    def row_sums(self) -> np.ndarray:
        """Set bits per row (int64)."""
        return row_popcounts(self.P, self.k)

    @property
    def T(self) -> _Transposed:
        return _Transposed(self)

    def _table(self, theta: np.ndarray) -> NDArray[np.float64]:
        B = self.P.shape[1]
        t = np.zeros(B * 8)
        t[: self.k] = theta
        return t.reshape(B, 8) @ BIT_TABLE.T  # B x 256: sum of theta over each byte's set bits

    def matvec(self, theta: np.ndarray) -> NDArray[np.float64]:
        """``Z @ theta`` (length ``m``)."""
        theta = np.asarray(theta, dtype=float).ravel()
        table = self._table(theta)
        m = self.P.shape[0]
        if _compiled():
            out = np.empty(m)
            _kernels()["matvec"](self.P, table, out)
            return out
        out = np.zeros(m)
        for b in range(self.P.shape[1]):  # one gather per byte position (B = k/8), never per report
            out += table[b, self.P[:, b]]
        return out

    def rmatvec(self, w: np.ndarray) -> NDArray[np.float64]:
        """``Z.T @ w`` (length ``k``)."""
        w = np.asarray(w, dtype=float).ravel()
        B = self.P.shape[1]
        if _compiled():
            H = np.zeros((B, 256))
            _kernels()["histograms"](self.P, w, H)
        else:
            H = np.stack([np.bincount(self.P[:, b], weights=w, minlength=256) for b in range(B)]) if B else \
                np.zeros((0, 256))
        return (H @ BIT_TABLE).ravel()[: self.k]

    def __matmul__(self, theta: np.ndarray) -> NDArray[np.float64]:
        theta = np.asarray(theta)
        if theta.ndim == 2:  # a few columns at a time (tests, dense fallbacks)
            return np.column_stack([self.matvec(theta[:, i]) for i in range(theta.shape[1])])
        return self.matvec(theta)

    def chunks(self) -> Iterator[tuple[int, NDArray[np.float64]]]:
        """``(start, dense float rows)`` in chunks of at most ~4M entries."""
        step = max(1, _CHUNK_ENTRIES // max(self.k, 1))
        for s in range(0, self.P.shape[0], step):
            yield s, np.unpackbits(self.P[s:s + step], axis=1, count=self.k).astype(float)

    def gram(self, w: np.ndarray) -> NDArray[np.float64]:
        """``Z^T diag(w) Z`` (``k x k``), by chunks of unpacked rows (BLAS)."""
        w = np.asarray(w, dtype=float)
        out = np.zeros((self.k, self.k))
        for s, D in self.chunks():
            out += (D * w[s:s + D.shape[0], None]).T @ D
        return out

    def toarray(self) -> NDArray[np.float64]:
        return np.unpackbits(self.P, axis=1, count=self.k).astype(float)

    def tocsr(self) -> sp.csr_matrix:
        """The same matrix as SciPy CSR (float), unpacked by chunks (memory: one chunk + the result)."""
        import scipy.sparse as sp

        parts = [sp.csr_matrix(D) for _, D in self.chunks()]
        return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, self.k))

    @staticmethod
    def vstack(parts: Iterable[PackedSupport]) -> PackedSupport:
        parts = list(parts)
        return PackedSupport(np.vstack([p.P for p in parts]), parts[0].k)
