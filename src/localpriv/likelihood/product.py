"""Likelihood blocks of multi-attribute reports over a product domain (structured products).

The joint alphabet is ``K = k_1 x ... x k_d`` (row-major flat cells). Two structures cover the
multi-attribute protocols without a dense ``K x m`` matrix:

* :class:`KroneckerBlock` -- ``G[x, r] = prod_j C_j[x_j, r_j]`` (every attribute reported
  independently, SPL): products by one tensor contraction per attribute.
* :class:`AttributeMixtureBlock` -- ``G[x, r] = c_r sum_j A_j[x_j, r]`` (one attribute sampled,
  SMP, RS+FD, RS+RFD): products through the ``d`` marginals of ``theta`` (forward) and sums of
  ``d`` per-attribute vectors broadcast over the joint (backward), ``O(K d + m sum_j k_j)``.
* :class:`GroupedOracleBlock` -- ``G[x, r] = c B_{g(r)}[cell_{g(r)}(x), r]`` (each report from one
  group that reports a coarsening of the joint: CALM's marginals, HIO, hierarchies, grids), each
  group's reports held by a block of its own on the group's cells (a dense block of channel
  columns, or a pure oracle's support block: OUE, OLH): products through each group's table
  ``theta`` summed over its cells, ``O(K G)`` plus the groups' products.

A block is linear algebra and knows no mechanism.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.utils.validation import LocalPrivError

__all__ = ["KroneckerBlock", "AttributeMixtureBlock", "GroupedOracleBlock"]


def _shape_check(shape: Sequence[int], mats: Sequence[np.ndarray], what: str) -> tuple[int, ...]:
    shp = tuple(int(s) for s in shape)
    if len(mats) != len(shp) or any(m.shape[0] != s for m, s in zip(mats, shp)):
        raise LocalPrivError(f"{what}: one matrix per attribute with k_j rows is needed")
    return shp


class KroneckerBlock(LikelihoodBlock):
    """``G[x, r] = prod_j C_j[x_j, r_j]`` for reports ``r`` (flat cells of the output product).

    Parameters
    ----------
    mats
        The per-attribute channels ``C_j`` (``k_j x n_j``).
    reports
        Flat indices of the distinct reports in the row-major product ``n_1 x ... x n_d``.
    counts
        How often each report was seen.

    Notes
    -----
    ``theta @ G`` contracts the tensor ``theta[x_1, ..., x_d]`` with ``C_1``, ..., ``C_d`` in turn
    and reads the reports' cells; ``G @ w`` scatters ``w`` into the output tensor and contracts with
    ``C_j^T``. The output tensor has ``prod_j n_j`` cells (checked against the dense cap).
    """

    def __init__(self, mats: Sequence[np.ndarray], reports: np.ndarray, counts: np.ndarray) -> None:
        self.mats = [np.asarray(m, dtype=float) for m in mats]
        self.shape = _shape_check([m.shape[0] for m in self.mats], self.mats, "Kronecker block")
        self.out_shape = tuple(int(m.shape[1]) for m in self.mats)
        n_out = math.prod(self.out_shape)
        check_dense_size(1, n_out, "the output tensor of a Kronecker likelihood block")
        self.reports = np.asarray(reports, dtype=np.int64)
        self.counts = np.asarray(counts, dtype=float)
        self.k = math.prod(self.shape)
        self._n_out = n_out

    def forward(self, theta: np.ndarray) -> np.ndarray:
        t = np.asarray(theta, dtype=float).reshape(self.shape)
        for m in self.mats:  # contracts the first remaining input axis, appends an output axis
            t = np.tensordot(t, m, axes=([0], [0]))
        return np.asarray(t.reshape(-1)[self.reports])

    def dense(self) -> np.ndarray:
        """``G`` (``K x m``) in closed form: the product of each attribute's rows and columns."""
        check_dense_size(self.k, self.reports.size, f"the likelihood of {self.reports.size} reports")
        codes = np.unravel_index(np.arange(self.k), self.shape)
        outs = np.unravel_index(self.reports, self.out_shape)
        G = np.ones((self.k, self.reports.size))
        for m, xi, zi in zip(self.mats, codes, outs):
            G *= m[xi[:, None], zi[None, :]]
        return G

    def hessian_diagonal(self, w: np.ndarray) -> np.ndarray:
        """``sum_r w_r G[x, r]^2``: the backward product with the squared channels ``C_j^2``."""
        out = np.bincount(self.reports, weights=np.asarray(w, dtype=float), minlength=self._n_out)
        t = out.reshape(self.out_shape)
        for m in self.mats:
            t = np.tensordot(t, (m * m).T, axes=([0], [0]))
        return np.asarray(t.reshape(-1))

    def backward(self, w: np.ndarray) -> np.ndarray:
        out = np.bincount(self.reports, weights=np.asarray(w, dtype=float), minlength=self._n_out)
        t = out.reshape(self.out_shape)
        for m in self.mats:
            t = np.tensordot(t, m.T, axes=([0], [0]))
        return np.asarray(t.reshape(-1))


class AttributeMixtureBlock(LikelihoodBlock):
    """``G[x, r] = c_r sum_j A_j[x_j, r]`` over the joint cells ``x = (x_1, ..., x_d)``.

    Parameters
    ----------
    shape
        ``(k_1, ..., k_d)``.
    mats
        ``A_j`` (``k_j x m``): attribute ``j``'s part of each report's likelihood.
    scale
        ``c`` (``m``), or a scalar.
    counts
        How often each report was seen.

    Notes
    -----
    ``(theta @ G)_r = c_r sum_j (theta_j @ A_j)_r`` with ``theta_j`` the ``j``-th marginal of
    ``theta``; ``(G @ w)[x] = sum_j (A_j @ (c w))[x_j]``.
    """

    def __init__(self, shape: Sequence[int], mats: Sequence[np.ndarray], scale: np.ndarray | float,
                 counts: np.ndarray) -> None:
        self.mats = [np.asarray(m, dtype=float) for m in mats]
        self.shape = _shape_check(shape, self.mats, "attribute-mixture block")
        self.counts = np.asarray(counts, dtype=float)
        if any(m.shape[1] != self.counts.size for m in self.mats):
            raise LocalPrivError("attribute-mixture block: every A_j needs one column per report")
        self.scale = np.broadcast_to(np.asarray(scale, dtype=float), self.counts.shape)
        self.k = math.prod(self.shape)

    def _marginals(self, theta: np.ndarray) -> list[np.ndarray]:
        t = np.asarray(theta, dtype=float).reshape(self.shape)
        d = len(self.shape)
        return [t.sum(axis=tuple(i for i in range(d) if i != j)) for j in range(d)]

    def forward(self, theta: np.ndarray) -> np.ndarray:
        p = np.zeros(self.counts.size)
        for marg, m in zip(self._marginals(theta), self.mats):
            p += marg @ m
        return np.asarray(self.scale * p)

    def dense(self) -> np.ndarray:
        """``G`` (``K x m``) in closed form: ``c_r sum_j A_j[x_j, r]``."""
        check_dense_size(self.k, self.counts.size, f"the likelihood of {self.counts.size} reports")
        codes = np.unravel_index(np.arange(self.k), self.shape)
        G = np.zeros((self.k, self.counts.size))
        for m, xi in zip(self.mats, codes):
            G += m[xi]
        return np.asarray(G * self.scale[None, :])

    def hessian_diagonal(self, w: np.ndarray) -> np.ndarray:
        """``sum_r w_r G[x, r]^2 = sum_{i, j} (A_i diag(w c^2) A_j^T)[x_i, x_j]``: ``d^2`` small
        matrices broadcast over the joint."""
        v = np.asarray(w, dtype=float) * self.scale ** 2
        d = len(self.shape)
        out = np.zeros(self.shape)
        for i in range(d):
            for j in range(i, d):
                pair = (self.mats[i] * v) @ self.mats[j].T  # k_i x k_j
                view = [1] * d
                if i == j:
                    view[i] = self.shape[i]
                    out += np.diagonal(pair).reshape(view)
                else:
                    view[i], view[j] = self.shape[i], self.shape[j]
                    out += 2.0 * pair.reshape(view)
        return np.asarray(out.reshape(-1))

    def backward(self, w: np.ndarray) -> np.ndarray:
        v = self.scale * np.asarray(w, dtype=float)
        d = len(self.shape)
        out = np.zeros(self.shape)
        for j, m in enumerate(self.mats):
            view = [1] * d
            view[j] = self.shape[j]
            out += (m @ v).reshape(view)
        return np.asarray(out.reshape(-1))


class GroupedOracleBlock(LikelihoodBlock):
    """``G[x, r] = c B_g[cell_g(x), r]`` with ``B_g`` a likelihood block on group ``g``'s ``m_g`` cells.

    Parameters
    ----------
    cellmaps
        Per group, the cell of every joint input (``K`` integers in ``0..m_g-1``).
    blocks
        Per group, the block of its reports on its cells (``None`` for a group without reports).
    positions
        Per group, the positions of its reports among all reports (disjoint, covering them).
    scale
        ``c``: the probability of a group (``1/G`` for a uniform assignment).
    counts
        How often each report was seen.

    Notes
    -----
    ``(theta @ G)_r = c (T_g @ B_g)_r`` with ``T_g[u] = sum_{x: cell_g(x) = u} theta[x]``;
    ``(G @ w)[x] = c sum_g (B_g @ w_g)[cell_g(x)]``; the Hessian's diagonal is
    ``c^2 sum_g diag_g(w_g)[cell_g(x)]`` (one group per report). ``log_offset`` is the groups' sum.
    """

    def __init__(self, cellmaps: Sequence[np.ndarray], blocks: Sequence[LikelihoodBlock | None],
                 positions: Sequence[np.ndarray], scale: float, counts: np.ndarray) -> None:
        self.cellmaps = [np.asarray(c, dtype=np.int64) for c in cellmaps]
        self.blocks = list(blocks)
        self.positions = [np.asarray(p, dtype=np.int64) for p in positions]
        self.counts = np.asarray(counts, dtype=float)
        if not (len(self.cellmaps) == len(self.blocks) == len(self.positions)) or not self.cellmaps:
            raise LocalPrivError("grouped oracle block: one cell map, block and position list per group")
        self.k = int(self.cellmaps[0].size)
        check_dense_size(self.k, len(self.cellmaps), "the cell maps of a grouped likelihood block")
        for c, b, p in zip(self.cellmaps, self.blocks, self.positions):
            size = 0 if b is None else b.counts.size
            if c.size != self.k or size != p.size or (b is not None and c.size and int(c.max()) >= b.k):
                raise LocalPrivError("grouped oracle block: a group's cell map, block and positions disagree")
        if sum(p.size for p in self.positions) != self.counts.size:
            raise LocalPrivError("grouped oracle block: the groups' reports do not cover the counts")
        self.scale = float(scale)
        self.log_offset = float(sum(b.log_offset for b in self.blocks if b is not None))
        if all(b is None or b.hessian_diagonal is not None for b in self.blocks):
            self.hessian_diagonal = self._hessian_diagonal

    def forward(self, theta: np.ndarray) -> np.ndarray:
        t = np.asarray(theta, dtype=float)
        p = np.zeros(self.counts.size)
        for c, b, pos in zip(self.cellmaps, self.blocks, self.positions):  # over groups
            if b is not None:
                p[pos] = b.forward(np.bincount(c, weights=t, minlength=b.k))
        return np.asarray(self.scale * p)

    def backward(self, w: np.ndarray) -> np.ndarray:
        v = np.asarray(w, dtype=float) * self.scale
        out = np.zeros(self.k)
        for c, b, pos in zip(self.cellmaps, self.blocks, self.positions):
            if b is not None:
                out += np.asarray(b.backward(v[pos]))[c]
        return out

    def _hessian_diagonal(self, w: np.ndarray) -> np.ndarray:
        """``sum_r w_r G[x, r]^2 = c^2 sum_g diag_g(w_g)[cell_g(x)]``."""
        v = np.asarray(w, dtype=float) * self.scale ** 2
        out = np.zeros(self.k)
        for c, b, pos in zip(self.cellmaps, self.blocks, self.positions):
            if b is not None and b.hessian_diagonal is not None:
                out += np.asarray(b.hessian_diagonal(v[pos]))[c]
        return out

    def dense(self) -> np.ndarray:
        """``G`` (``K x m``): ``c B_g.dense()[cell_g(x)]``."""
        check_dense_size(self.k, self.counts.size, f"the likelihood of {self.counts.size} reports")
        G = np.zeros((self.k, self.counts.size))
        for c, b, pos in zip(self.cellmaps, self.blocks, self.positions):
            if b is not None:
                G[:, pos] = b.dense()[c]
        return G * self.scale
