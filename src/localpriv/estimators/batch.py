"""Batched likelihood blocks: many blocks of one family evaluated as one (fewer, larger products).

The EM engine batches the blocks of a free-will mixture by family -- scaled-identity channels
(k-RR and its kin), exponential kernels (geometric mechanisms) and 0/1 supports (unary encodings,
subset selection, local hashing) -- so that ``theta @ G`` and ``G @ w`` over hundreds of
mechanisms cost a few vectorized products instead of one per mechanism. Results equal the
unbatched evaluation to round-off.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from localpriv.estimators import _kernels
from localpriv.estimators.newton import DENSE_DIAGONAL_MAX
from localpriv.likelihood.blocks import LikelihoodBlock
from localpriv.likelihood.packed import PackedSupport
from localpriv.likelihood.structured import ExpKernelBlock, ScaledIdentityBlock
from localpriv.mechanisms.unary import SupportBlock

__all__ = ["batch_blocks", "family", "BatchedScaledIdentityBlock", "BatchedExpKernelBlock", "BatchedSupportBlock"]


def family(b: LikelihoodBlock) -> str | None:
    """The batchable family of likelihood block ``b`` (exact types only: subclasses may change the
    products), or ``None``."""

    t = type(b)
    if t is ScaledIdentityBlock:
        return "scaled-identity"
    if t is ExpKernelBlock:
        return "exp-kernel"
    if t is SupportBlock:
        return "support"
    return None


def batch_blocks(blocks: Iterable[LikelihoodBlock]) -> list[LikelihoodBlock]:
    """``blocks`` with the blocks of each family batched into one block (the engine calls this).

    GIBU's E-step is a sum over mechanisms (seed 003 Algorithm 1); per mechanism, a structured
    block costs a few NumPy calls whatever its size (48 us per mechanism and evaluation, measured),
    so 1,000 mechanisms cost ~48 ms per EM evaluation. Blocks of one family with the same ``k`` are
    stacked into one block whose columns are the members' columns in order (counts concatenated), with
    products vectorized over all of them:

    * k-RR and other scaled-identity channels (:class:`BatchedScaledIdentityBlock`);
    * exponential kernels -- linear geometric, Laplace with unit bins or grid reports -- with
      different rates (:class:`BatchedExpKernelBlock`);
    * support blocks of the pure protocols (unary encodings, local hashing, subset selection;
      :class:`BatchedSupportBlock`).

    Every product equals the members' products up to floating-point rounding (the forward
    products of scaled-identity batches are the members' own operations, bit for bit), so EM's
    iterates are the same up to rounding. Blocks with no reports, lone members
    and other blocks are returned unchanged; batched blocks take the place of their first member.
    """
    groups: dict[tuple[str, int], list[Any]] = {}  # (family, k) -> its blocks (the family's exact type)
    order: list[tuple[str, int] | LikelihoodBlock] = []
    for b in blocks:
        fam = family(b) if b.size else None
        key = None if fam is None else (fam, int(b.k))
        if key is None or key not in groups:
            order.append(key if key is not None else b)
            if key is not None:
                groups[key] = []
        if key is not None:
            groups[key].append(b)
    out: list[LikelihoodBlock] = []
    for item in order:
        if not isinstance(item, tuple):
            out.append(item)
            continue
        members = groups[item]
        if len(members) == 1:
            out.append(members[0])
        elif item[0] == "scaled-identity":
            out.append(BatchedScaledIdentityBlock(members))
        elif item[0] == "exp-kernel":
            out.append(BatchedExpKernelBlock(members))
        else:
            out.append(BatchedSupportBlock(members))
    return out


def _segment_ids(sizes: ArrayLike) -> tuple[NDArray[np.int64], np.ndarray]:
    sizes = np.asarray(sizes, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.repeat(np.arange(sizes.size), sizes), starts


class BatchedScaledIdentityBlock(LikelihoodBlock):
    """Scaled-identity blocks ``G^A[x, j] = b_A + (a_A - b_A) [x == z^A_j]`` of ``M`` mechanisms
    (k-RR with different eps, seed 001 Eq. 5; support-count channels, seed 002) as one block.

    With ``d_A = a_A - b_A``, over the concatenated columns (member ``A(j)`` of column ``j``)::

        (theta @ G)_j = d_{A(j)} theta[z_j] + b_{A(j)} sum(theta)
        (G @ w)_x     = sum_{j: z_j = x} d_{A(j)} w_j + sum_A b_A sum_{j in A} w_j

    ``O(k + sum_A m_A)`` in a few vector operations whatever ``M``. When every member observed
    all ``k`` outputs in order, the columns form an ``M x k`` matrix and ``G @ w`` is
    ``d @ W + b . W 1`` (two matrix-vector products).
    """

    hessian_diagonal = None  # set per instance below

    def __init__(self, members: Iterable[ScaledIdentityBlock]) -> None:
        self.members = list(members)
        self.k = int(self.members[0].k)
        a = np.array([m.a for m in self.members])
        b = np.array([m.b for m in self.members])
        sizes = [m.outputs.size for m in self.members]
        seg, self._starts = _segment_ids(sizes)
        self._a, self._b, self._d = a, b, a - b
        self.outputs = np.concatenate([m.outputs for m in self.members])
        self.counts = np.concatenate([np.asarray(m.counts, dtype=float) for m in self.members])
        self._seg = seg
        self._dcol = self._d[seg]
        self._bcol = self._b[seg]
        self._matrix = all(getattr(m, "_all", False) for m in self.members)
        self._M = len(self.members)
        self._d2 = a * a - b * b
        self._d2col = self._d2[seg]
        self.hessian_diagonal = self._hessian_diagonal

    def _segsum(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        if self._matrix:
            return w.reshape(self._M, self.k).sum(axis=1)
        return np.add.reduceat(w, self._starts)

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        theta = np.asarray(theta, dtype=float)
        S = theta.sum()
        if self._matrix:
            out = (self._d[:, None] * theta[None, :]).ravel()
        else:
            out = self._dcol * theta[self.outputs]
        out += self._bcol * S
        return out

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        w = np.asarray(w, dtype=float)
        if self._matrix:
            out = self._d @ w.reshape(self._M, self.k)
        else:
            out = np.bincount(self.outputs, weights=self._dcol * w, minlength=self.k)
        out += float(self._b @ self._segsum(w))
        return out

    def _hessian_diagonal(self, w: np.ndarray) -> NDArray[np.float64]:
        """``sum_j w_j G[x, j]^2 = sum_{j: z_j = x} (a^2 - b^2)_{A(j)} w_j + sum_A b_A^2 sum_{j in A} w_j``."""
        w = np.asarray(w, dtype=float)
        if self._matrix:
            out = self._d2 @ w.reshape(self._M, self.k)
        else:
            out = np.bincount(self.outputs, weights=self._d2col * w, minlength=self.k)
        out += float((self._b * self._b) @ self._segsum(w))
        return out

    def dense(self) -> NDArray[np.float64]:
        return np.hstack([m.dense() for m in self.members])


class BatchedExpKernelBlock(LikelihoodBlock):
    """Exponential-kernel blocks ``G^A[x, j] = a_j e^{-rate_A |p_j - x|}`` of ``M`` mechanisms with
    different rates (linear geometric, seed 001 Eqs. 6-7; Laplace with unit bins or on a grid) as
    one block.

    For member ``A`` with ``r_A = e^{-rate_A}`` the recurrences of
    :class:`~localpriv.likelihood.structured.ExpKernelBlock` (``A_t = r_A A_{t-1} + theta_t``,
    ``B_t = r_A B_{t+1} + theta_t``) are run for all members at once on an ``M x k`` array by a
    compiled kernel (:mod:`localpriv.estimators._kernels`; a NumPy loop over ``k`` when numba is
    disabled), then gathered per column; ``G @ w`` scatters the columns' weights into ``M x k``
    arrays and sums the transposed recurrences over the members. Diagonal entries and exact
    columns (the clamped end bins) are vectorized over all members. ``O(M k + sum_A m_A)``.

    ``hessian_diagonal`` (``sum_j w_j G[x, j]^2``, for the Newton finish) is offered when every
    member is small enough for the finish to have tabulated it (``k m_A <=
    newton.DENSE_DIAGONAL_MAX``), so that batching never changes which scheme runs: ``G^2`` is the
    same kernel with ``r_A^2`` and squared weights, diagonal entries and exact columns.
    """

    hessian_diagonal = None

    def __init__(self, members: Iterable[ExpKernelBlock]) -> None:

        self.members = list(members)
        k = self.k = int(self.members[0].k)
        self._M = len(self.members)
        sizes = [m.counts.size for m in self.members]
        seg, starts = _segment_ids(sizes)
        self.counts = np.concatenate([np.asarray(m.counts, dtype=float) for m in self.members])
        self._r = np.array([m._r for m in self.members])
        rowoff = seg * k
        self._il = rowoff + np.concatenate([m._tl for m in self.members])
        self._ir = rowoff + np.concatenate([m._tr for m in self.members])
        self._left = np.concatenate([m._left for m in self.members])
        self._right = np.concatenate([m._right for m in self.members])
        self._diag_idx = np.concatenate([st + m._diag_idx for st, m in zip(starts, self.members)])
        self._diag_x = np.concatenate([m._diag_x if m._diag_idx.size else np.zeros(0, dtype=np.int64)
                                       for m in self.members]).astype(np.int64)
        self._diag_val = np.concatenate([m._diag_val if m._diag_idx.size else np.zeros(0)
                                         for m in self.members])
        self._fix_idx = np.concatenate([st + m._fix_idx for st, m in zip(starts, self.members)])
        cols = [m._fix_cols for m in self.members if m._fix_idx.size]
        self._fix_cols = np.ascontiguousarray(np.hstack(cols)) if cols else np.zeros((k, 0))
        if all(k * s <= DENSE_DIAGONAL_MAX for s in sizes):
            self.hessian_diagonal = self._hessian_diagonal
        self._sq: tuple[np.ndarray, ...] | None = None

    # ---- recurrences over all members ----------------------------------------------------
    @staticmethod
    def _rows(r: NDArray[np.float64], theta: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:

        if _kernels.enabled():
            return _kernels.kernels()["exp_rows"](r, theta)
        M, k = r.size, theta.size
        A, B = np.empty((M, k)), np.empty((M, k))
        a = np.zeros(M)
        for t in range(k):
            a = theta[t] + r * a
            A[:, t] = a
        a = np.zeros(M)
        for t in range(k - 1, -1, -1):
            a = theta[t] + r * a
            B[:, t] = a
        return A, B

    @staticmethod
    def _rows_back(r: NDArray[np.float64], U: np.ndarray, V: np.ndarray) -> NDArray[np.float64]:

        if _kernels.enabled():
            return _kernels.kernels()["exp_rows_back"](r, U, V)
        M, k = U.shape
        out = np.zeros(k)
        a = np.zeros(M)
        for t in range(k - 1, -1, -1):
            a = U[:, t] + r * a
            out[t] += a.sum()
        a = np.zeros(M)
        for t in range(k):
            a = V[:, t] + r * a
            out[t] += a.sum()
        return out

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        theta = np.ascontiguousarray(theta, dtype=float)
        A, B = self._rows(self._r, theta)
        with np.errstate(under="ignore"):
            out = A.ravel()[self._il] * self._left + B.ravel()[self._ir] * self._right
        if self._diag_idx.size:
            out[self._diag_idx] += self._diag_val * theta[self._diag_x]
        if self._fix_idx.size:
            out[self._fix_idx] = theta @ self._fix_cols
        return out

    def _back(self, w: NDArray[np.float64], r: np.ndarray, left: np.ndarray, right: np.ndarray, diag_val: np.ndarray,
              fix_cols: np.ndarray) -> NDArray[np.float64]:
        size = self._M * self.k
        with np.errstate(under="ignore"):
            U = np.bincount(self._il, weights=w * left, minlength=size).reshape(self._M, self.k)
            V = np.bincount(self._ir, weights=w * right, minlength=size).reshape(self._M, self.k)
        out = self._rows_back(r, U, V)
        if self._diag_idx.size:
            out += np.bincount(self._diag_x, weights=diag_val * w[self._diag_idx], minlength=self.k)
        if self._fix_idx.size:
            out += fix_cols @ w[self._fix_idx]
        return out

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        return self._back(np.asarray(w, dtype=float), self._r, self._left, self._right, self._diag_val,
                          self._fix_cols)

    def _hessian_diagonal(self, w: np.ndarray) -> NDArray[np.float64]:
        """``sum_j w_j G[x, j]^2``: the same recurrences with ``r^2`` and squared entries."""
        if self._sq is None:
            with np.errstate(under="ignore"):
                self._sq = (self._r * self._r, self._left * self._left, self._right * self._right,
                            self._diag_val * self._diag_val, self._fix_cols * self._fix_cols)
        return self._back(np.asarray(w, dtype=float), *self._sq)

    def dense(self) -> NDArray[np.float64]:
        return np.hstack([m.dense() for m in self.members])


def _as_csr(Z: Any) -> Any:
    """A member's support matrix as CSR (packed bits unpacked by chunks)."""
    import scipy.sparse as sp

    return Z.tocsr() if isinstance(Z, PackedSupport) else sp.csr_matrix(Z)


class BatchedSupportBlock(LikelihoodBlock):
    """Support blocks of ``M`` pure protocols (unary encodings, local hashing, subset selection;
    seed 002) as one: ``G[x, j] = u_j + v_j Z[j, x]`` over the stacked reports.

    ``u``, ``v`` concatenated, the support matrices ``Z`` stacked (sparse when any member's is);
    ``forward(theta) = u sum(theta) + v (Z theta)``, ``backward(w) = u . w + Z^T (v w)``:
    one sparse (or dense) product for all mechanisms. ``log_offset`` is the members' sum.
    """

    def __init__(self, members: Iterable[SupportBlock]) -> None:
        import scipy.sparse as sp

        self.members = list(members)
        self.k = int(self.members[0].k)
        self.counts = np.concatenate([np.asarray(m.counts, dtype=float) for m in self.members])
        self.u = np.concatenate([np.broadcast_to(m.u, m.counts.shape) for m in self.members])
        self.v = np.concatenate([np.broadcast_to(m.v, m.counts.shape) for m in self.members])
        self.log_offset = float(sum(m.log_offset for m in self.members))
        Zs = [m.Z for m in self.members]
        packed = [isinstance(Z, PackedSupport) for Z in Zs]
        #: a PackedSupport, a SciPy sparse matrix or a dense array (the same products)
        self.Z: Any
        if all(packed):
            self.Z = PackedSupport.vstack(Zs)
        elif any(packed) or any(sp.issparse(Z) for Z in Zs):
            self.Z = sp.vstack([_as_csr(Z) for Z in Zs], format="csr")
        else:
            self.Z = np.ascontiguousarray(np.vstack(Zs))
        self._Z2: Any = None

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        return self.u * theta.sum() + self.v * (self.Z @ theta)

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        return self.u @ w + self.Z.T @ (self.v * w)

    def hessian_diagonal(self, w: np.ndarray) -> NDArray[np.float64]:
        """``sum_j w_j (u_j + v_j Z[j, x])^2``."""
        import scipy.sparse as sp

        if getattr(self.Z, "binary", False):  # 0/1 entries: Z * Z == Z
            return (self.u * self.u) @ w + self.Z.T @ ((2.0 * self.u + self.v) * self.v * w)
        if self._Z2 is None:
            self._Z2 = self.Z.multiply(self.Z).tocsr() if sp.issparse(self.Z) else self.Z * self.Z
        return (self.u * self.u) @ w + 2.0 * (self.Z.T @ (self.u * self.v * w)) + self._Z2.T @ (self.v * self.v * w)

    def dense(self) -> NDArray[np.float64]:
        return np.hstack([m.dense() for m in self.members])


# --------------------------------------------------------------------------------------------
# RAP (single unary-encoding mechanism) and the unary statistics it needs
# --------------------------------------------------------------------------------------------
