"""Pure LDP frequency oracles and unary encodings (SUE = basic one-time RAPPOR, OUE).

This module also holds :class:`PureProtocol`, the shared base of every pure frequency oracle
(unary encodings here, local hashing in ``hashing.py``, subset selection in
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

Log space. Each mechanism keeps ``log(r1 / r0)`` exactly (for unary encodings the
difference of the per-bit log-odds ``logit p - logit q``; ``eps/2 - (-eps/2)`` for SUE,
``0 - (-eps)`` for OUE), and :meth:`PureProtocol.likelihood_parts` returns (*) normalized to
``r1 = 1``, ``r0 = exp(-log(r1/r0))``, with ``log c(z)`` from log-probabilities
(``log p = -logaddexp(0, -logit p)``). Nothing overflows for any finite ``eps``; probabilities
below ~1e-308 underflow to 0, and the computed level stays exact. A level that is ``inf`` or
beyond ``log(max float64)`` comes with a :class:`~localpriv.utils.validation.PrivacyWarning`.

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
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size, check_report_bytes
from localpriv.likelihood.packed import PackedSupport, row_popcounts
from localpriv.mechanisms._sampling import bernoulli_bits, client_inputs
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

__all__ = ["PureProtocol", "SupportBlock", "UnaryEncoding", "SUE", "OUE", "ue_epsilon",
           "sue_probabilities", "oue_probabilities", "sue_logits", "oue_logits", "log_bit", "expit",
           "pack_bits", "unpack_bits", "bit_counts"]

#: largest k for which a unary channel (2^k columns) is built densely
DENSE_MAX_K = 12
_CHUNK = 1 << 18  # bits drawn at once when sampling bit matrices (fits in cache)
_CHUNK_ENTRIES = 1 << 22  # support entries built at once for packed supports
#: support matrices with more entries than this are not held dense (PureProtocol.likelihood_block)
DENSE_Z_ENTRIES = 20_000_000
#: above DENSE_Z_ENTRIES, the support is held as packed bits when at least this share of its
#: entries are set (else sparse: 12 bytes per set entry); see docs/decisions/0006-packed-bit-supports.md
PACKED_MIN_DENSITY = 0.02

#: a ``reports x k`` support matrix: a dense array, a ``scipy.sparse`` matrix or a
#: :class:`~localpriv.likelihood.packed.PackedSupport` (duck-typed; SciPy has no type information)
SupportMatrix = Any
#: ``(log c, r0, r1)`` of the form (*); ``r0`` and ``r1`` are scalars or one value per report
LikelihoodParts = tuple[np.ndarray, float | np.ndarray, float | np.ndarray]


def pack_bits(bits: ArrayLike) -> np.ndarray:
    """``n x k`` 0/1 array -> ``n x ceil(k/8)`` uint8 (big-endian bit order)."""
    return np.packbits(np.asarray(bits, dtype=bool), axis=1)


def unpack_bits(packed: ArrayLike, k: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: ``n x ceil(k/8)`` uint8 -> ``n x k`` uint8 of 0/1."""
    r = np.asarray(packed)
    if r.ndim != 2 or r.dtype != np.uint8:
        raise LocalPrivError(f"bit-vector reports must be a 2-D uint8 array (packed bits), got "
                             f"{r.dtype} with shape {r.shape}")
    if r.shape[1] != ceil(k / 8):
        raise LocalPrivError(f"bit-vector reports of a {k}-element domain have {ceil(k / 8)} bytes, "
                             f"got {r.shape[1]}")
    return np.unpackbits(r, axis=1, count=k)


def bit_counts(packed: ArrayLike, k: int) -> np.ndarray:
    """Set bits per row of packed ``n x ceil(k/8)`` reports (bits past ``k`` ignored), without
    unpacking them (a 256-entry popcount table)."""
    r = np.asarray(packed)
    if r.ndim != 2 or r.dtype != np.uint8 or r.shape[1] != ceil(k / 8):
        unpack_bits(r[:0] if r.ndim == 2 else r, k)  # raises the shape/dtype error
    return row_popcounts(r, k)


def expit(logit: float) -> float:
    """``1 / (1 + e^{-logit})``: accurate for every logit (``e^{-logit}`` may overflow to ``inf``,
    giving 0; ``logit = +-inf`` gives 1 and 0)."""
    with np.errstate(over="ignore"):
        return float(1.0 / (1.0 + np.exp(-logit)))


def log_bit(logit: float) -> tuple[float, float]:
    """``(log p, log(1 - p))`` of a bit with log-odds ``logit = log(p / (1 - p))``, exactly."""
    return float(-np.logaddexp(0.0, -logit)), float(-np.logaddexp(0.0, logit))


def _logit(p: float) -> float:
    with np.errstate(divide="ignore"):
        return float(np.log(p) - np.log1p(-p))


def sue_logits(eps: float) -> tuple[float, float]:
    """SUE's per-bit log-odds ``(logit p, logit q) = (eps/2, -eps/2)``."""
    return eps / 2.0, -eps / 2.0


def oue_logits(eps: float) -> tuple[float, float]:
    """OUE's per-bit log-odds ``(logit 1/2, logit 1/(e^eps+1)) = (0, -eps)``."""
    return 0.0, -float(eps)


def sue_probabilities(eps: float) -> tuple[float, float]:
    """SUE / basic RAPPOR: ``p = e^{eps/2}/(1+e^{eps/2})``, ``q = 1 - p`` (seed 001 section 4.4)."""
    a, b = sue_logits(eps)
    return expit(a), expit(b)


def oue_probabilities(eps: float) -> tuple[float, float]:
    """OUE: ``p = 1/2``, ``q = 1/(e^eps + 1)`` (Wang et al. 2017, seed 002)."""
    a, b = oue_logits(eps)
    return expit(a), expit(b)


def ue_epsilon(p: float, q: float) -> float:
    """LDP level of a unary encoding with per-bit probabilities ``p`` (true bit) and ``q``.

    From the factorized likelihood (seed 001 Lemma 4.4) the ratio ``P(z|x)/P(z|x')`` only involves
    bits ``x`` and ``x'``: ``[P(z_x|1) P(z_x'|0)] / [P(z_x|0) P(z_x'|1)]``, maximal for
    ``z_x = 1, z_x' = 0``: ``eps = log(p (1 - q) / (q (1 - p))) = logit p - logit q`` (in absolute
    value; ``inf`` when ``p`` or ``q`` is 0 or 1).
    """
    return float(abs(_logit(p) - _logit(q)))


def _times(n: ArrayLike, log_v: float) -> np.ndarray:
    """``n * log_v`` with ``0 * (-inf) = 0`` (a factor raised to the power 0)."""
    n = np.asarray(n)
    with np.errstate(invalid="ignore"):
        return np.where(n == 0, 0.0, n * log_v)


# --------------------------------------------------------------------------------------------
# The likelihood block shared by every pure protocol: G[x, j] = c_j (r0 + (r1 - r0) Z[j, x])
# --------------------------------------------------------------------------------------------
#: rows of a sparse support matrix turned dense at a time by :func:`weighted_gram`
_GRAM_CHUNK = 2_000_000


def weighted_gram(Z: SupportMatrix, w: ArrayLike) -> np.ndarray:
    """``Z^T diag(w) Z`` (k x k) for a dense or sparse ``reports x k`` matrix.

    A sparse ``Z`` is densified by chunks of ``_GRAM_CHUNK`` entries and multiplied by BLAS: the
    sparse-sparse product was 6x slower (10^6 OUE reports at k = 100) and memory stays bounded by a
    chunk. A :class:`~localpriv.likelihood.packed.PackedSupport` unpacks its own chunks."""
    w = np.asarray(w, dtype=float)
    if isinstance(Z, PackedSupport):
        return Z.gram(w)
    if not sp.issparse(Z):
        Z = np.asarray(Z, dtype=float)
        return (Z * w[:, None]).T @ Z
    Z = Z.tocsr()
    m, k = Z.shape
    out = np.zeros((k, k))
    step = max(1, _GRAM_CHUNK // max(k, 1))
    for s in range(0, m, step):
        D = Z[s:s + step].toarray().astype(float, copy=False)
        out += (D * w[s:s + step, None]).T @ D
    return out


class SupportBlock(LikelihoodBlock):
    """``G[x, j] = c_j * (r0_j + (r1_j - r0_j) * Z[j, x])`` with ``Z`` the sparse support matrix.

    ``r0``, ``r1`` are scalars or one value per report. With ``u = c r0`` and ``v = c (r1 - r0)``
    (per report): ``forward(theta) = u * sum(theta) + v * (Z @ theta)`` and
    ``backward(w) = u @ w + Z.T @ (v * w)``: O(nnz(Z) + k + m) each.
    ``Z`` may also be a dense array (histogram encodings, where it holds per-report ratios) or a
    :class:`~localpriv.likelihood.packed.PackedSupport` (many reports: 1 bit per entry).
    """

    def __init__(self, k: int, log_c: ArrayLike, r0: ArrayLike, r1: ArrayLike, Z: SupportMatrix,
                 counts: ArrayLike) -> None:
        self.k = int(k)
        self.counts = np.asarray(counts, dtype=float)
        log_c = np.asarray(log_c, dtype=float)
        if Z.shape != (self.counts.size, self.k) or log_c.size != self.counts.size:
            raise LocalPrivError(f"support block: {Z.shape} support matrix for {self.counts.size} "
                                 f"reports on {self.k} inputs")
        if isinstance(Z, np.ndarray) and not np.all(np.isfinite(Z)):
            raise LocalPrivError("support block: the likelihood ratios overflow float64 at this eps")
        # columns whose probabilities would underflow are rescaled (EM is invariant to a
        # per-report factor); the log-likelihood lost that way is kept in ``log_offset``
        shift = np.where(np.isfinite(log_c) & (np.abs(log_c) > 600.0), log_c, 0.0)
        self.log_offset = float(self.counts @ shift)
        self.c = np.exp(log_c - shift)
        r0 = np.asarray(r0, dtype=float)
        r1 = np.asarray(r1, dtype=float)
        self.r0: float | np.ndarray
        self.r1: float | np.ndarray
        self.r0, self.r1 = (float(r0), float(r1)) if r0.ndim == 0 and r1.ndim == 0 else (r0, r1)
        self.u = self.c * r0
        self.v = self.c * (r1 - r0)
        self.Z = Z
        if np.any(self.c <= 0) or np.any(self.u + np.maximum(self.v, 0.0) <= 0):
            raise LocalPrivError("some reports have probability 0 under the mechanism for every input")
        if not (np.all(np.isfinite(self.u)) and np.all(np.isfinite(self.v))):
            raise LocalPrivError("support block: the report probabilities overflow float64")

    def forward(self, theta: np.ndarray) -> np.ndarray:
        return self.u * theta.sum() + self.v * (self.Z @ theta)

    def backward(self, w: np.ndarray) -> np.ndarray:
        return self.u @ w + self.Z.T @ (self.v * w)

    def hessian_diagonal(self, w: np.ndarray) -> np.ndarray:
        """``sum_j w_j G[x, j]^2`` with ``G[x, j]^2 = (u_j + v_j Z[j, x])^2``."""
        if getattr(self.Z, "binary", False):  # 0/1 entries: Z * Z == Z, one product
            return (self.u * self.u) @ w + self.Z.T @ ((2.0 * self.u + self.v) * self.v * w)
        Z2 = getattr(self, "_Z2", None)
        if Z2 is None:
            Z2 = self._Z2 = self.Z.multiply(self.Z).tocsr() if sp.issparse(self.Z) else self.Z * self.Z
        return (self.u * self.u) @ w + 2.0 * (self.Z.T @ (self.u * self.v * w)) + Z2.T @ (self.v * self.v * w)

    def gram(self, w: ArrayLike) -> np.ndarray:
        """``G diag(w) G^T = sum(w u^2) 1 1^T + a 1^T + 1 a^T + Z^T diag(w v^2) Z`` with
        ``a = Z^T (w u v)``: the observed information's building block, ``O(nnz(Z) k)``."""
        w = np.asarray(w, dtype=float)
        a = np.asarray(self.Z.T @ (w * self.u * self.v), dtype=float).ravel()
        wv2 = w * self.v * self.v
        ZtZ = weighted_gram(self.Z, wv2)
        return float(w @ (self.u * self.u)) + a[:, None] + a[None, :] + ZtZ

    def dense(self) -> np.ndarray:
        """``G = u + Z^T * v`` in one vectorized expression (refused above the dense-size cap)."""
        m = self.counts.size
        check_dense_size(self.k, m, f"the likelihood of {m} reports")
        Zt = self.Z.toarray().T if hasattr(self.Z, "toarray") else np.asarray(self.Z).T
        return self.u[None, :] + Zt * self.v[None, :]


class PureProtocol(Mechanism):
    """Base of the pure LDP frequency oracles.

    Subclasses define ``p_star``, ``q_star``, :meth:`support` (sparse boolean ``reports x k``
    matrix of ``S(z)``) and :meth:`likelihood_parts` (``log c(z)``, ``r0``, ``r1`` of (*)).
    """

    if TYPE_CHECKING:  # read-only, defined by every subclass
        @property
        def p_star(self) -> float:
            """P[v in S(M(v))]."""

        @property
        def q_star(self) -> float:
            """P[v in S(M(v'))], v != v'."""

    def support(self, reports: ArrayLike) -> sp.csr_matrix:  # pragma: no cover - abstract
        """Sparse boolean matrix ``reports x k`` with entry ``(j, v)`` set iff ``v in S(z_j)``."""
        raise NotImplementedError

    def support_counts(self, reports: ArrayLike, counts: ArrayLike | None = None) -> np.ndarray:
        """``C_v = sum_j counts_j [v in S(z_j)]`` (seed 002, MI input)."""
        S = self.support(reports)
        c = np.ones(S.shape[0]) if counts is None else np.asarray(counts, dtype=float)
        return np.asarray(S.T @ c, dtype=float).ravel()

    def likelihood_parts(self, reports: ArrayLike) -> LikelihoodParts:  # pragma: no cover - abstract
        """``(log_c, r0, r1)`` with ``P(z_j|x) = c_j (r0 + (r1-r0)[x in S(z_j)])``, normalized so
        that ``r1 = 1`` and ``r0 = exp(-log_level())`` (``r0``/``r1`` may be per-report arrays)."""
        raise NotImplementedError

    def log_level(self) -> float:  # pragma: no cover - abstract
        """``log(r1 / r0)`` of (*), computed exactly from the mechanism's parameters in log space."""
        raise NotImplementedError

    def packed_support(self, reports: ArrayLike) -> np.ndarray:
        """The support matrix as packed bits (``reports x ceil(k/8)`` uint8, :func:`pack_bits`
        order), built by chunks of rows. Protocols whose reports are packed bits return them."""
        r = np.asarray(reports)
        out = np.empty((r.shape[0], ceil(self.k / 8)), dtype=np.uint8)
        step = max(1, _CHUNK_ENTRIES // max(self.k, 1))
        for s in range(0, r.shape[0], step):
            out[s:s + step] = np.packbits(self.support(r[s:s + step]).toarray().astype(bool), axis=1)
        return out

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> LikelihoodBlock:
        """(*) as a :class:`SupportBlock`. ``Z`` is held dense (BLAS products) up to
        ``DENSE_Z_ENTRIES`` entries when at least 5 % are set; above that as packed bits
        (:class:`~localpriv.likelihood.packed.PackedSupport`, ``O(m k / 8)`` per product, 1 bit
        per entry) when at least ``PACKED_MIN_DENSITY`` of the entries are set, else sparse."""
        log_c, r0, r1 = self.likelihood_parts(reports)
        m = np.asarray(counts).size
        if m * self.k > DENSE_Z_ENTRIES:
            P = PackedSupport(self.packed_support(reports), self.k)
            if P.nnz >= PACKED_MIN_DENSITY * m * self.k:
                return SupportBlock(self.k, log_c, r0, r1, P, counts)
            Z = P.tocsr()
        else:
            Z = self.support(reports).astype(float)
        if Z.nnz > 0.05 * m * self.k and m * self.k <= DENSE_Z_ENTRIES:
            Z = np.ascontiguousarray(Z.toarray())  # dense BLAS products beat sparse ones here
        return SupportBlock(self.k, log_c, r0, r1, Z, counts)

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """Dense ``G[x, j] = exp(log c_j + log r_{[x in S(z_j)]})``, computed in log space."""
        m = np.shape(reports)[0]
        check_dense_size(self.k, m, f"{self} likelihood of {m} reports")
        log_c, r0, r1 = self.likelihood_parts(reports)
        Z = self.support(reports).toarray().T  # k x m
        with np.errstate(divide="ignore"):
            log_r0, log_r1 = np.log(np.broadcast_to(r0, (m,))), np.log(np.broadcast_to(r1, (m,)))
        return np.exp(np.asarray(log_c, dtype=float)[None, :] + np.where(Z, log_r1[None, :], log_r0[None, :]))

    def epsilon_ldp(self) -> float:
        """``log(r1 / r0)`` of the exact likelihood (*), computed in log space from the structure
        (:meth:`log_level`; attained for ``k >= 2`` by a report whose support is neither empty nor
        the whole domain). Never builds the channel."""
        return checked_epsilon(self.log_level(), str(self))

    def rank_from_structure(self) -> tuple[int, str] | None:
        """Pure protocols are identifiable: ``E[1{v in S(z)}] = q* + (p* - q*) theta_v`` is
        injective in ``theta`` when ``p* > q*`` (i.e. ``log(r1/r0) > 0``), so the channel has rank
        ``k`` (seed 001 Theorem 6.1; rows sum to 1, so ``w M = 0`` forces ``sum(w) = 0``)."""
        if self.log_level() > 0:
            return self.k, "exact: pure protocol, E[1{v in S(z)}] = q* + (p*-q*) theta_v with p* > q* is injective"
        return None


@register
class UnaryEncoding(PureProtocol):
    """Unary encoding with per-bit probabilities ``p`` (true bit) and ``q`` (other bits).

    ``P(z | x) = prod_y p^{z_y}(1-p)^{1-z_y} if y == x else q^{z_y}(1-q)^{1-z_y}``
    (seed 001 Lemma 4.4 with general p, q), i.e. form (*) with
    ``c(z) = q^{|z|} (1-q)^{k-|z|}``, ``r1 = p/q``, ``r0 = (1-p)/(1-q)``.
    """

    spec_name = "ue"
    # eps_ldp = log(0.7 * 0.8 / (0.3 * 0.2))
    examples = (dict(spec="ue(k=4,p=0.7,q=0.2)", eps_ldp=2.2335922215070942, tight=True),)
    report_kind = "binary"

    def __init__(self, k: int, p: float, q: float) -> None:
        self.k = check_int(k, "k", minimum=2)
        try:
            p, q = float(p), float(q)
        except (TypeError, ValueError):
            raise LocalPrivError(f"unary encoding: p and q must be numbers, got p={p!r}, q={q!r}") from None
        if not (0.0 <= q < p <= 1.0):
            raise LocalPrivError(f"unary encoding needs 0 <= q < p <= 1, got p={p}, q={q}")
        self._set_logits(_logit(p), _logit(q))
        self.p1, self.q1 = p, q  # exactly as given

    def _set_logits(self, logit_p: float, logit_q: float) -> None:
        """The per-bit law by its log-odds: ``logit p = log(p/(1-p))`` (true bit), ``logit q``."""
        if not logit_q <= logit_p:
            raise LocalPrivError(f"{type(self).__name__}: the true bit must be more likely set than the others")
        self.logit_p, self.logit_q = float(logit_p), float(logit_q)
        self.log_p, self.log_1mp = log_bit(self.logit_p)
        self.log_q, self.log_1mq = log_bit(self.logit_q)
        self.p1, self.q1 = expit(self.logit_p), expit(self.logit_q)
        if self.logit_q == -self.logit_p and 1.0 - self.p1 >= 2.0 ** -20:
            self.q1 = 1.0 - self.p1  # symmetric (SUE): q = 1 - p to the last bit, as before

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "p": self.p1, "q": self.q1}

    def log_level(self) -> float:
        """``logit p - logit q = log(p(1-q) / (q(1-p)))`` (:func:`ue_epsilon`, exact in log-odds)."""
        return self.logit_p - self.logit_q

    @property
    def p_star(self) -> float:
        return self.p1

    @property
    def q_star(self) -> float:
        return self.q1

    # ---- outputs ------------------------------------------------------------------------
    @property
    def n_outputs(self) -> int | None:
        return 2 ** self.k if self.k <= DENSE_MAX_K else None

    def output_space_size(self) -> int:
        return 2 ** self.k

    def channel(self) -> np.ndarray:
        """Dense ``k x 2^k`` channel (only for ``k <= 12``); column ``i`` is the vector with
        bit ``y`` equal to ``(i >> y) & 1``."""
        if self.k > DENSE_MAX_K:
            raise LocalPrivError(f"{self}: the output space has 2^{self.k} elements; the dense channel "
                                 f"is only built for k <= {DENSE_MAX_K}")
        check_dense_size(self.k, 2 ** self.k, f"{self} channel")
        bits = (np.arange(2 ** self.k)[:, None] >> np.arange(self.k)[None, :]) & 1  # 2^k x k
        return self.likelihood(pack_bits(bits))

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        bits = unpack_bits(reports, self.k).astype(np.int64)
        if self.k > DENSE_MAX_K:
            raise LocalPrivError(f"{self}: no output index for k > {DENSE_MAX_K}")
        return bits @ (1 << np.arange(self.k))

    # ---- sampling -----------------------------------------------------------------------
    def _flip(self, n: int, p: float, q: float, rng: np.random.Generator, x: np.ndarray | None = None,
              truth: np.ndarray | None = None) -> np.ndarray:
        """Packed ``n x k`` bit matrix, bit ``(i, y)`` = 1 with probability ``p`` if ``y`` is true
        for user ``i`` and ``q`` otherwise, all bits independent.

        The true bits are given either as one value per user (``x``, one-hot: the fast path) or as
        a boolean ``n x k`` matrix (``truth``, e.g. the memoized bits of a longitudinal report).
        Drawn by chunks of users with :func:`bernoulli_bits`.
        """
        k = self.k
        check_report_bytes(n, ceil(k / 8), f"{self} reports")
        out = np.empty((n, ceil(k / 8)), dtype=np.uint8)
        step = max(1, _CHUNK // k)
        for s in range(0, n, step):  # chunks of users: bounded memory, cache-sized arrays
            e = min(n, s + step)
            if x is not None:
                bits = bernoulli_bits((e - s, k), q, rng)
                bits[np.arange(e - s), x[s:e]] = rng.random(e - s) < p  # the true bit: p
            else:
                assert truth is not None  # one of x and truth is given
                bits = bernoulli_bits((e - s, k), q, rng, p_true=p, truth=truth[s:e])
            out[s:e] = pack_bits(bits)
        return out

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        x = client_inputs(self, x)
        rng = check_rng(rng)
        return self._flip(x.size, self.p1, self.q1, rng, x=x)

    # ---- estimation ingredients --------------------------------------------------------
    def support(self, reports: ArrayLike) -> sp.csr_matrix:
        return sp.csr_matrix(unpack_bits(reports, self.k).astype(bool))

    def packed_support(self, reports: ArrayLike) -> np.ndarray:
        """The reports themselves: ``S(z)`` is the set bits of ``z``."""
        bit_counts(np.asarray(reports)[:0], self.k)  # checks dtype and width
        return np.asarray(reports)

    def support_counts(self, reports: ArrayLike, counts: ArrayLike | None = None) -> np.ndarray:
        """``C_v = sum_j counts_j z_{j,v}``, by chunks of unpacked bit rows (dense, fast)."""
        r = np.asarray(reports)
        c = np.ones(r.shape[0]) if counts is None else np.asarray(counts, dtype=float)
        out = np.zeros(self.k)
        step = max(1, _CHUNK // self.k)
        for s in range(0, r.shape[0], step):
            out += c[s:s + step] @ unpack_bits(r[s:s + step], self.k)
        return out

    def likelihood_parts(self, reports: ArrayLike) -> LikelihoodParts:
        """(*) with ``r1 = 1``: for a report with ``s >= 1`` set bits
        ``c(z) = P(z | x in S(z)) = p q^{s-1} (1-q)^{k-s}`` and ``r0 = q(1-p) / (p(1-q))``; the
        all-zero report has ``P(z|x) = (1-p)(1-q)^{k-1}`` for every ``x`` (``r0 = r1 = 1``)."""
        ones = bit_counts(reports, self.k)
        some = ones > 0
        log_c = np.where(some,
                         self.log_p + _times(ones - 1, self.log_q) + _times(self.k - ones, self.log_1mq),
                         self.log_1mp + _times(self.k - 1, self.log_1mq))
        r0 = np.where(some, np.exp(-self.log_level()), 1.0)
        return log_c, r0, np.ones(ones.size)


@register
class SUE(UnaryEncoding):
    """Symmetric unary encoding = basic one-time RAPPOR (seed 001 section 4.4, Lemma 4.4)."""

    spec_name = "sue"
    examples = (dict(spec="sue(k=4,eps=1.0)", eps_ldp=1.0, tight=True),)

    def __init__(self, k: int, eps: float) -> None:
        self.k = check_int(k, "k", minimum=2)
        self.eps = check_eps(eps)
        self._set_logits(*sue_logits(self.eps))

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps}


@register
class OUE(UnaryEncoding):
    """Optimized unary encoding (Wang et al. 2017): ``p = 1/2``, ``q = 1/(e^eps+1)``."""

    spec_name = "oue"
    examples = (dict(spec="oue(k=4,eps=1.0)", eps_ldp=1.0, tight=True),)

    def __init__(self, k: int, eps: float) -> None:
        self.k = check_int(k, "k", minimum=2)
        self.eps = check_eps(eps)
        self._set_logits(*oue_logits(self.eps))

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps}
