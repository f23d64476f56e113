"""Pure LDP frequency oracles and unary encodings (SUE = basic one-time RAPPOR, OUE).

This module also holds :class:`PureProtocol`, the shared base of every frequency oracle of
issue 4 (unary encodings here, local hashing in ``hashing.py``, subset selection in
``subset.py``, histogram encodings in ``histogram.py``, the longitudinal versions in
``longitudinal.py``).

Pure protocols (seed 002, "Pure eps-LDP", after Wang et al. 2017)
-----------------------------------------------------------------
A protocol is *pure* when there are ``0 < q* < p* < 1`` and a support function ``S(z)`` with
``P[v in S(M(v))] = p*`` and ``P[v in S(M(v'))] = q*`` for ``v != v'``. The support counts
``C_v = #{i : v in S(z_i)}`` then give the unbiased matrix-inversion (MI) estimate
``f_v = (C_v / n - q*) / (p* - q*)`` (seed 002, "LDP distribution estimation: MI and IBU").

Every mechanism of this family also has an *exact* report likelihood of the form::

    P(z | x) = c(z) * (r0 + (r1 - r0) [x in S(z)])                      (*)

(for unary encodings this is seed 001 Lemma 4.4: the bits are independent, so
``P(z|x) = prod_y P(z_y | [y == x])`` and only the bit ``z_x`` depends on ``x``). The EM engine
therefore gets O(nnz) products from a sparse ``reports x k`` support matrix
(:class:`SupportBlock`), and the LDP level is computed from (*) exactly:
``eps = log(r1 / r0)`` as soon as some report has a support that is neither empty nor all of the
domain (for unary encodings: any ``k >= 2``).

Unary encodings
---------------
The input ``x`` is one-hot encoded in ``k`` bits and every bit is flipped independently:
``P(z_y = 1) = p1`` if ``y == x`` and ``q1`` otherwise. SUE (basic one-time RAPPOR, seed 001
section 4.4): ``p1 = e^{eps/2} / (1 + e^{eps/2})``, ``q1 = 1 - p1``. OUE (Wang et al. 2017):
``p1 = 1/2``, ``q1 = 1 / (e^eps + 1)``. ``S(z) = {y : z_y = 1}``, ``p* = p1``, ``q* = q1``.
Reports are bit vectors packed with :func:`numpy.packbits` (``n x ceil(k/8)`` uint8, bit ``y`` of
the vector is bit ``7 - y % 8`` of byte ``y // 8``, NumPy's big-endian bit order).
"""
from __future__ import annotations

from math import ceil

import numpy as np
import scipy.sparse as sp

from .._validation import LocalPrivError, check_eps, check_int, check_rng
from ._sampling import bernoulli_bits
from .base import LikelihoodBlock, Mechanism, register

__all__ = ["PureProtocol", "SupportBlock", "UnaryEncoding", "SUE", "OUE", "ue_epsilon",
           "sue_probabilities", "oue_probabilities", "pack_bits", "unpack_bits"]

#: largest k for which a unary channel (2^k columns) is built densely
DENSE_MAX_K = 12
_CHUNK = 1 << 18  # bits drawn at once when sampling bit matrices (fits in cache)


def pack_bits(bits: np.ndarray) -> np.ndarray:
    """``n x k`` 0/1 array -> ``n x ceil(k/8)`` uint8 (big-endian bit order)."""
    return np.packbits(np.asarray(bits, dtype=bool), axis=1)


def unpack_bits(packed: np.ndarray, k: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: ``n x ceil(k/8)`` uint8 -> ``n x k`` uint8 of 0/1."""
    r = np.asarray(packed)
    if r.ndim != 2 or r.dtype != np.uint8:
        raise LocalPrivError(f"bit-vector reports must be a 2-D uint8 array (packed bits), got "
                             f"{r.dtype} with shape {r.shape}")
    if r.shape[1] != ceil(k / 8):
        raise LocalPrivError(f"bit-vector reports of a {k}-element domain have {ceil(k / 8)} bytes, "
                             f"got {r.shape[1]}")
    return np.unpackbits(r, axis=1, count=k)


def sue_probabilities(eps: float) -> tuple[float, float]:
    """SUE / basic RAPPOR: ``p = e^{eps/2}/(1+e^{eps/2})``, ``q = 1 - p`` (seed 001 section 4.4)."""
    p = 1.0 / (1.0 + np.exp(-eps / 2.0))
    return float(p), float(1.0 - p)


def oue_probabilities(eps: float) -> tuple[float, float]:
    """OUE: ``p = 1/2``, ``q = 1/(e^eps + 1)`` (Wang et al. 2017, seed 002)."""
    return 0.5, float(1.0 / (np.exp(eps) + 1.0))


def ue_epsilon(p: float, q: float) -> float:
    """LDP level of a unary encoding with per-bit probabilities ``p`` (true bit) and ``q``.

    From the factorized likelihood (seed 001 Lemma 4.4) the ratio ``P(z|x)/P(z|x')`` only involves
    bits ``x`` and ``x'``: ``[P(z_x|1) P(z_x'|0)] / [P(z_x|0) P(z_x'|1)]``, maximal for
    ``z_x = 1, z_x' = 0``: ``eps = log(p (1 - q) / (q (1 - p)))`` (in absolute value).
    """
    return float(abs(np.log(p) + np.log1p(-q) - np.log(q) - np.log1p(-p)))


# --------------------------------------------------------------------------------------------
# The likelihood block shared by every pure protocol: G[x, j] = c_j (r0 + (r1 - r0) Z[j, x])
# --------------------------------------------------------------------------------------------
class SupportBlock(LikelihoodBlock):
    """``G[x, j] = c_j * (r0 + (r1 - r0) * Z[j, x])`` with ``Z`` the sparse support matrix.

    ``forward(theta) = c * (r0 * sum(theta) + (r1 - r0) * Z @ theta)`` and
    ``backward(w) = r0 * (c @ w) + (r1 - r0) * Z.T @ (c * w)``: O(nnz(Z) + k + m) each.
    ``Z`` may also be a dense array (histogram encodings, where it holds per-report ratios).
    """

    def __init__(self, k, log_c, r0, r1, Z, counts):
        self.k = int(k)
        self.counts = np.asarray(counts, dtype=float)
        log_c = np.asarray(log_c, dtype=float)
        # columns whose probabilities would underflow are rescaled (EM is invariant to a
        # per-report factor); the log-likelihood lost that way is kept in ``log_offset``
        shift = np.where(np.isfinite(log_c) & (log_c < -600.0), log_c, 0.0)
        self.log_offset = float(self.counts @ shift) if shift.size == self.counts.size else 0.0
        self.c = np.exp(log_c - shift)
        self.r0, self.r1 = float(r0), float(r1)
        self.Z = Z
        if Z.shape != (self.counts.size, self.k) or self.c.size != self.counts.size:
            raise LocalPrivError(f"support block: {Z.shape} support matrix for {self.counts.size} "
                                 f"reports on {self.k} inputs")
        if np.any(self.c <= 0):
            raise LocalPrivError("some reports have probability 0 under the mechanism for every input")

    def forward(self, theta):
        return self.c * (self.r0 * theta.sum() + (self.r1 - self.r0) * (self.Z @ theta))

    def backward(self, w):
        cw = self.c * w
        return self.r0 * cw.sum() + (self.r1 - self.r0) * (self.Z.T @ cw)

    def hessian_diagonal(self, w):
        """``sum_j w_j G[x, j]^2`` with ``G[x, j]^2 = c_j^2 (r0 + d Z[j, x])^2``, ``d = r1 - r0``."""
        Z2 = getattr(self, "_Z2", None)
        if Z2 is None:
            Z2 = self._Z2 = self.Z.multiply(self.Z).tocsr() if sp.issparse(self.Z) else self.Z * self.Z
        c2w = self.c * self.c * w
        d = self.r1 - self.r0
        return (self.r0 * self.r0 * c2w.sum() + 2.0 * self.r0 * d * (self.Z.T @ c2w)
                + d * d * (Z2.T @ c2w))


class PureProtocol(Mechanism):
    """Base of the pure LDP frequency oracles.

    Subclasses define ``p_star``, ``q_star``, :meth:`support` (sparse boolean ``reports x k``
    matrix of ``S(z)``) and :meth:`likelihood_parts` (``log c(z)``, ``r0``, ``r1`` of (*)).
    """

    #: P[v in S(M(v))] and P[v in S(M(v'))], v != v'
    p_star: float
    q_star: float

    def support(self, reports) -> sp.csr_matrix:  # pragma: no cover - abstract
        """Sparse boolean matrix ``reports x k`` with entry ``(j, v)`` set iff ``v in S(z_j)``."""
        raise NotImplementedError

    def support_counts(self, reports, counts=None) -> np.ndarray:
        """``C_v = sum_j counts_j [v in S(z_j)]`` (seed 002, MI input)."""
        S = self.support(reports)
        c = np.ones(S.shape[0]) if counts is None else np.asarray(counts, dtype=float)
        return np.asarray(S.T @ c, dtype=float).ravel()

    def likelihood_parts(self, reports):  # pragma: no cover - abstract
        """``(log_c, r0, r1)`` with ``P(z_j|x) = c_j (r0 + (r1-r0)[x in S(z_j)])``."""
        raise NotImplementedError

    def likelihood_block(self, reports, counts) -> LikelihoodBlock:
        log_c, r0, r1 = self.likelihood_parts(reports)
        Z = self.support(reports).astype(float)
        m = Z.shape[0]
        if Z.nnz > 0.05 * m * self.k and m * self.k <= 2e7:
            Z = np.ascontiguousarray(Z.toarray())  # dense BLAS products beat sparse ones here
        return SupportBlock(self.k, log_c, r0, r1, Z, counts)

    def likelihood(self, reports) -> np.ndarray:
        log_c, r0, r1 = self.likelihood_parts(reports)
        Z = self.support(reports).toarray().T  # k x m
        return np.exp(log_c)[None, :] * (r0 + (r1 - r0) * Z)

    def epsilon_ldp(self) -> float:
        """``log(r1 / r0)`` from the exact likelihood (*) (attained for k >= 2)."""
        _, r0, r1 = self.likelihood_parts(self._witness_report())
        return float(abs(np.log(r1) - np.log(r0)))

    def _witness_report(self):
        """One report whose support is a non-empty proper subset of the domain."""
        raise NotImplementedError  # pragma: no cover


@register
class UnaryEncoding(PureProtocol):
    """Unary encoding with per-bit probabilities ``p`` (true bit) and ``q`` (other bits).

    ``P(z | x) = prod_y p^{z_y}(1-p)^{1-z_y} if y == x else q^{z_y}(1-q)^{1-z_y}``
    (seed 001 Lemma 4.4 with general p, q), i.e. form (*) with
    ``c(z) = q^{|z|} (1-q)^{k-|z|}``, ``r1 = p/q``, ``r0 = (1-p)/(1-q)``.
    """

    spec_name = "ue"
    report_kind = "binary"

    def __init__(self, k: int, p: float, q: float):
        self.k = check_int(k, "k", minimum=2)
        self.p1, self.q1 = float(p), float(q)
        if not (0.0 < self.q1 < self.p1 < 1.0):
            raise LocalPrivError(f"unary encoding needs 0 < q < p < 1, got p={p}, q={q}")

    def params(self):
        return {"k": self.k, "p": self.p1, "q": self.q1}

    @property
    def p_star(self) -> float:
        return self.p1

    @property
    def q_star(self) -> float:
        return self.q1

    # ---- outputs ------------------------------------------------------------------------
    @property
    def n_outputs(self):
        return 2 ** self.k if self.k <= DENSE_MAX_K else None

    def channel(self) -> np.ndarray:
        """Dense ``k x 2^k`` channel (only for ``k <= 12``); column ``i`` is the vector with
        bit ``y`` equal to ``(i >> y) & 1``."""
        if self.k > DENSE_MAX_K:
            raise LocalPrivError(f"{self}: the output space has 2^{self.k} elements; the dense channel "
                                 f"is only built for k <= {DENSE_MAX_K}")
        bits = (np.arange(2 ** self.k)[:, None] >> np.arange(self.k)[None, :]) & 1  # 2^k x k
        return self.likelihood(pack_bits(bits))

    def output_index(self, reports) -> np.ndarray:
        bits = unpack_bits(reports, self.k).astype(np.int64)
        if self.k > DENSE_MAX_K:
            raise LocalPrivError(f"{self}: no output index for k > {DENSE_MAX_K}")
        return bits @ (1 << np.arange(self.k))

    # ---- sampling -----------------------------------------------------------------------
    def _flip(self, n, p, q, rng, x=None, truth=None):
        """Packed ``n x k`` bit matrix, bit ``(i, y)`` = 1 with probability ``p`` if ``y`` is true
        for user ``i`` and ``q`` otherwise, all bits independent.

        The true bits are given either as one value per user (``x``, one-hot: the fast path) or as
        a boolean ``n x k`` matrix (``truth``, e.g. the memoized bits of a longitudinal report).
        Drawn by chunks of users with :func:`bernoulli_bits`.
        """
        k = self.k
        out = np.empty((n, ceil(k / 8)), dtype=np.uint8)
        step = max(1, _CHUNK // k)
        for s in range(0, n, step):  # chunks of users: bounded memory, cache-sized arrays
            e = min(n, s + step)
            if x is not None:
                bits = bernoulli_bits((e - s, k), q, rng)
                bits[np.arange(e - s), x[s:e]] = rng.random(e - s) < p  # the true bit: p
            else:
                bits = bernoulli_bits((e - s, k), q, rng, p_true=p, truth=truth[s:e])
            out[s:e] = pack_bits(bits)
        return out

    def sample(self, x, rng) -> np.ndarray:
        x = self._check_inputs(x)
        rng = check_rng(rng)
        return self._flip(x.size, self.p1, self.q1, rng, x=x)

    # ---- estimation ingredients --------------------------------------------------------
    def support(self, reports) -> sp.csr_matrix:
        return sp.csr_matrix(unpack_bits(reports, self.k).astype(bool))

    def support_counts(self, reports, counts=None) -> np.ndarray:
        """``C_v = sum_j counts_j z_{j,v}``, by chunks of unpacked bit rows (dense, fast)."""
        r = np.asarray(reports)
        c = np.ones(r.shape[0]) if counts is None else np.asarray(counts, dtype=float)
        out = np.zeros(self.k)
        step = max(1, _CHUNK // self.k)
        for s in range(0, r.shape[0], step):
            out += c[s:s + step] @ unpack_bits(r[s:s + step], self.k)
        return out

    def likelihood_parts(self, reports):
        ones = unpack_bits(reports, self.k).sum(axis=1, dtype=np.int64)
        log_c = ones * np.log(self.q1) + (self.k - ones) * np.log1p(-self.q1)
        return log_c, (1 - self.p1) / (1 - self.q1), self.p1 / self.q1

    def _witness_report(self):
        return pack_bits(np.eye(self.k, dtype=bool)[:1])

    def epsilon_ldp(self) -> float:
        """Exact level from the per-bit channel: ``log(p(1-q) / (q(1-p)))`` (:func:`ue_epsilon`)."""
        return ue_epsilon(self.p1, self.q1)


@register
class SUE(UnaryEncoding):
    """Symmetric unary encoding = basic one-time RAPPOR (seed 001 section 4.4, Lemma 4.4)."""

    spec_name = "sue"

    def __init__(self, k: int, eps: float):
        self.eps = check_eps(eps)
        super().__init__(k, *sue_probabilities(self.eps))

    def params(self):
        return {"k": self.k, "eps": self.eps}


@register
class OUE(UnaryEncoding):
    """Optimized unary encoding (Wang et al. 2017): ``p = 1/2``, ``q = 1/(e^eps+1)``."""

    spec_name = "oue"

    def __init__(self, k: int, eps: float):
        self.eps = check_eps(eps)
        super().__init__(k, *oue_probabilities(self.eps))

    def params(self):
        return {"k": self.k, "eps": self.eps}
