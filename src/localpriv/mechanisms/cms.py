"""Apple's count-mean sketch (``cms``): an ``m``-bit report for any domain size.

Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning Journal
1(8), 2017, Algorithm "Client-Side CMS". ``h_0, ..., h_{d-1}`` are hash functions onto ``0..m-1``.

Client: draw a row ``j`` uniform on ``0..d-1``, one-hot encode ``h_j(x)`` in ``m`` bits and flip
every bit independently with probability ``1 / (1 + e^{eps/2})`` (so the set bit stays set with
``p = e^{eps/2}/(1 + e^{eps/2})`` and every other bit is set with ``q = 1 - p``: SUE on ``m`` bits,
seed 001 section 4.4). With ``z`` the reported bits and ``|z|`` their number::

    P(j, z | x) = (1/d) q^{|z|} (1-q)^{m-|z|} * (p/q            if z[h_j(x)] = 1,
                                                 (1-p)/(1-q)    otherwise),

the pure-protocol form of :mod:`localpriv.mechanisms.unary` with support ``{x : z[h_j(x)] = 1}``
and ratio ``p(1-q)/(q(1-p)) = e^eps``: the LDP level computed from it is ``eps`` as soon as some
row hashes two inputs apart (otherwise 0).

**Report**: a fixed-size bit-vector report (``report_kind = "binary"``, like the unary encodings):
4 bytes holding ``j`` (big-endian unsigned), then ``z`` packed as by :func:`numpy.packbits` (bit
``l`` is bit ``7 - l % 8`` of byte ``4 + l // 8``): ``4 + ceil(m/8)`` bytes.

Hashes (cross-language, :mod:`localpriv.mechanisms.stablehash`): ``h_j(x) = XXH64(x as 8 little-endian bytes,
seed = j) mod m`` for the domain index ``x``, the same rows as ``hcms``.

Estimators. Apple's debiasing: every report gives ``x~ = (z - q) / (p - q)`` (``= c_eps/2 v + 1/2``
in the paper's ``+-1`` notation, ``c_eps = (e^{eps/2} + 1)/(e^{eps/2} - 1)``), added ``d`` times
to row ``j`` of the sketch ``M``; then::

    f_hat(x) = m / (m - 1) * ( (1/(d n)) sum_j M[j, h_j(x)] - 1/m ),

unbiased over the choice of the hash functions (given them, its mean is ``m/(m-1) (sum_v theta_v
c_xv - 1/m)``, ``c_xv`` the fraction of rows where ``v`` and ``x`` collide:
:meth:`CountMeanSketch.expected_estimate`); its variance is at most
``(m/(m-1))^2 ((1-q)/(p-q))^2 / n`` per value. IBU runs on the exact report likelihood above with
:class:`localpriv.likelihood.structured.CountSketchBlock` (reports kept packed).
"""
from __future__ import annotations

import math
from math import ceil
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

# the blocks live in localpriv.likelihood.structured, which imports this package: bound at call time
from localpriv.likelihood import structured as _st
from localpriv.likelihood.blocks import check_dense_size, check_report_bytes
from localpriv.mechanisms._sampling import bernoulli_bits
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.hcms import DEFAULT_D, DEFAULT_M, SketchHashes, check_sketch
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.mechanisms.unary import expit, log_bit, sue_logits
from localpriv.utils.validation import LocalPrivError, check_eps, check_rng

__all__ = ["CountMeanSketch"]

#: bytes of the row index at the start of a report
ROW_BYTES = 4
#: largest m whose dense channel (d 2^m outputs) may be enumerated
DENSE_MAX_M = 12
_CHUNK = 1 << 20  # bits drawn at once when sampling


@register
class CountMeanSketch(Mechanism):
    """Apple's count-mean sketch (module docstring).

    Parameters
    ----------
    k : int
        Domain size.
    eps : float
        LDP level (the level computed from the likelihood equals it when some row separates inputs).
    m : int, optional
        Bits per report (default 1024).
    d : int, optional
        Number of hash rows (default 256).
    """

    spec_name = "cms"
    size_products = (("d", "m"), ("k", "d"))  # the sketch; every candidate's hash in every row
    size_defaults = {"m": DEFAULT_M, "d": DEFAULT_D}
    examples = (dict(spec="cms(k=5,eps=2.0,m=4,d=3)", eps_ldp=2.0, tight=True),)
    report_kind = "binary"

    def __init__(self, k: int, eps: float, m: int = DEFAULT_M, d: int = DEFAULT_D) -> None:
        self.eps = check_eps(eps)
        self.k, self.m, self.d = check_sketch(k, m, d, "cms", power_of_two=False)
        if self.d > 2 ** 32:
            raise LocalPrivError(f"cms: d must fit in 32 bits, got {self.d}")
        self.hashes = SketchHashes(self.k, self.m, self.d)
        self.logit_p, self.logit_q = sue_logits(self.eps)
        self.log_p, self.log_1mp = log_bit(self.logit_p)
        self.log_q, self.log_1mq = log_bit(self.logit_q)
        self.p, self.q = expit(self.logit_p), expit(self.logit_q)
        self.nbytes = ceil(self.m / 8)
        #: bytes of one report
        self.report_bytes = ROW_BYTES + self.nbytes

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "m": self.m, "d": self.d}

    @property
    def n_outputs(self) -> int | None:
        return self.d * 2 ** self.m if self.m <= DENSE_MAX_M and self.d * 2 ** self.m <= 1 << 16 else None

    def output_space_size(self) -> int:
        return self.d * 2 ** self.m

    # ---- reports ------------------------------------------------------------------------
    def encode(self, rows: ArrayLike, bits: ArrayLike) -> np.ndarray:
        """``(j, n x m 0/1 bits)`` -> ``n x (4 + ceil(m/8))`` uint8 reports."""
        rows = np.asarray(rows, dtype=">u4").reshape(-1, 1).view(np.uint8)
        return np.ascontiguousarray(np.hstack([rows, np.packbits(np.asarray(bits, dtype=bool), axis=1)]))

    def decode(self, reports: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``reports -> (j, packed bits)``; refuses reports of the wrong shape or row."""
        r = np.asarray(reports)
        if r.ndim != 2 or r.dtype != np.uint8 or r.shape[1] != self.report_bytes:
            raise LocalPrivError(f"{self}: reports are {self.report_bytes}-byte vectors (uint8 rows), got "
                                 f"{r.dtype} with shape {r.shape}")
        rows = np.ascontiguousarray(r[:, :ROW_BYTES]).view(">u4").ravel().astype(np.int64)
        packed = r[:, ROW_BYTES:]
        if np.any(rows >= self.d):
            raise LocalPrivError(f"{self}: report rows outside 0..{self.d - 1}: "
                                 f"{np.unique(rows[rows >= self.d])[:5].tolist()}")
        if self.m % 8 and np.any(packed[:, -1] & ((1 << (8 - self.m % 8)) - 1)):
            raise LocalPrivError(f"{self}: reports have bits set beyond bit {self.m - 1}")
        return rows, np.ascontiguousarray(packed)

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        if self.n_outputs is None:
            raise LocalPrivError(f"{self}: {self.d} x 2^{self.m} outputs have no index (m <= {DENSE_MAX_M} only)")
        rows, packed = self.decode(reports)
        bits = np.unpackbits(packed, axis=1, count=self.m).astype(np.int64)
        return rows * 2 ** self.m + bits @ (1 << np.arange(self.m))

    # ---- sampling -----------------------------------------------------------------------
    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        x = self._check_inputs(x)
        rng = check_rng(rng)
        n = x.size
        check_report_bytes(n, self.report_bytes, f"{self} reports")
        rows = rng.integers(0, self.d, size=n, dtype=np.int64)
        true = self.hashes.of(x, rows)
        out = np.empty((n, self.report_bytes), dtype=np.uint8)
        step = max(1, _CHUNK // self.m)
        for s in range(0, n, step):  # chunks of users: bounded memory
            e = min(n, s + step)
            bits = bernoulli_bits((e - s, self.m), self.q, rng)
            bits[np.arange(e - s), true[s:e]] = rng.random(e - s) < self.p  # the hashed bit: p
            out[s:e] = self.encode(rows[s:e], bits)
        return out

    # ---- likelihood -----------------------------------------------------------------------
    def log_parts(self, reports: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, packed, log c)``: ``P(j, z | x) = c (r0 + (1 - r0) z[h_j(x)])``, ``r0 = e^{-eps}``,
        ``c = (1/d) p q^{|z|-1} (1-q)^{m-|z|}`` (the probability when the hashed bit is set)."""
        rows, packed = self.decode(reports)
        ones = np.bitwise_count(packed).sum(axis=1, dtype=np.int64)
        log_c = (-math.log(self.d) + self.log_p - self.log_q + ones * self.log_q
                 + (self.m - ones) * self.log_1mq)
        return rows, packed, log_c

    @property
    def r0(self) -> float:
        """``(1-p)(q) / (p(1-q)) = e^{-eps}`` (the not-set factor relative to the set one)."""
        return math.exp(-(self.logit_p - self.logit_q))

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        rows, packed, log_c = self.log_parts(reports)
        check_dense_size(self.k, rows.size, f"{self} likelihood of {rows.size} reports")
        bits = np.unpackbits(packed, axis=1, count=self.m)
        hit = bits[np.arange(rows.size)[:, None], self.hashes.table(str(self))[rows]]  # reports x k
        with np.errstate(under="ignore"):
            log_g = log_c[:, None] + np.where(hit == 1, 0.0, -(self.logit_p - self.logit_q))
            return np.exp(log_g).T

    def channel(self) -> np.ndarray:
        n = self.n_outputs
        if n is None:
            raise LocalPrivError(f"{self}: the dense channel is only built for d 2^m <= 65536 outputs")
        check_dense_size(self.k, n, f"{self} channel")
        idx = np.arange(n)
        bits = (idx % 2 ** self.m)[:, None] >> np.arange(self.m)[None, :] & 1
        return self.likelihood(self.encode(idx // 2 ** self.m, bits))

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> _st.CountSketchBlock:
        """:class:`~localpriv.likelihood.structured.CountSketchBlock` on the packed reports."""
        rows, packed, log_c = self.log_parts(reports)
        return _st.CountSketchBlock(self.hashes.hashing(str(self)), log_c, self.r0, rows, packed, counts)

    def epsilon_ldp(self) -> float:
        """``log(p (1-q) / (q (1-p))) = eps`` (exact in log-odds) if some row hashes two inputs apart,
        else 0 (every report is then equally likely under every input)."""
        level = self.logit_p - self.logit_q
        return checked_epsilon(level if self.hashes.separates() else 0.0, str(self))

    # ---- Apple's estimator ----------------------------------------------------------------
    def bit_counts(self, reports: ArrayLike, counts: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(N_j, B[j, l])``: reports per row and set bits per (row, bit), weighted by ``counts``."""
        rows, packed = self.decode(reports)
        w = np.ones(rows.size) if counts is None else np.asarray(counts, dtype=float)
        N = np.bincount(rows, weights=w, minlength=self.d)
        B = np.zeros((self.d, self.nbytes * 8))
        step = max(1, _CHUNK // self.m)
        for s in range(0, rows.size, step):  # chunks of reports: bounded memory
            bits = np.unpackbits(packed[s:s + step], axis=1).astype(float)
            B += np.asarray(_row_sum(rows[s:s + step], bits * w[s:s + step, None], self.d))
        return N, B[:, :self.m]

    def unbiased(self, reports: ArrayLike, counts: ArrayLike | None = None) -> np.ndarray:
        """Apple's estimate of every frequency (may be negative)."""
        N, B = self.bit_counts(reports, counts)
        n = N.sum()
        if not n > 0:
            raise LocalPrivError(f"{self}: no reports")
        M = self.d * (B - self.q * N[:, None]) / (self.p - self.q)  # the debiased sketch, d x m
        mean = self.hashes.hashing(str(self)).gather(M) / (self.d * n)
        return self.m / (self.m - 1) * (mean - 1.0 / self.m)

    def expected_estimate(self, theta: ArrayLike) -> np.ndarray:
        """The mean of :meth:`unbiased` given the hash functions (small ``k``)."""
        return self.m / (self.m - 1) * (self.hashes.collisions() @ np.asarray(theta, dtype=float) - 1.0 / self.m)

    def variance_bound(self, n: float) -> float:
        """``(m/(m-1))^2 ((1-q)/(p-q))^2 / n``: each report adds ``(z - q)/(p - q)`` in
        ``[-q/(p-q), (1-q)/(p-q)]`` to every value's mean."""
        return (self.m / (self.m - 1)) ** 2 * ((1 - self.q) / (self.p - self.q)) ** 2 / float(n)


def _row_sum(rows: np.ndarray, values: np.ndarray, d: int) -> np.ndarray:
    """``out[j] = sum_{i: rows_i = j} values[i]`` (``d x width``) without a loop over reports."""
    import scipy.sparse as sp

    onehot = sp.csr_matrix((np.ones(rows.size), (rows, np.arange(rows.size))), shape=(d, rows.size))
    return onehot @ values
