"""Subset selection (SS; Ye & Barg 2018, Wang et al. 2016; seed 002).

The user reports a subset ``z`` of ``omega`` domain elements: with probability
``omega e^eps / (omega e^eps + k - omega)`` it contains her value ``x`` plus ``omega - 1``
elements drawn uniformly from the others, otherwise ``omega`` elements drawn uniformly from the
elements other than ``x``. The optimal size is ``omega = max(1, round(k / (e^eps + 1)))``.

With ``Omega = omega e^eps + k - omega`` the exact likelihood is::

    P(z | x) = k / (Omega * C(k, omega)) * (e^eps if x in z else 1)

(form (*) of :mod:`localpriv.mechanisms.unary` with ``r1 = e^eps``, ``r0 = 1``), so the computed
LDP level is ``eps``, ``S(z) = z``, ``p* = omega e^eps / Omega`` and
``q* = omega ((omega - 1) e^eps + k - omega) / (Omega (k - 1))``.

Reports are the subset's indicator vector, bit-packed like unary encodings.

Log space: ``log(e^eps / Omega) = -logaddexp(log omega, log(k - omega) - eps)`` never
overflows, and the level is read from the structure: the two weights ``e^eps`` and ``1`` share
the normalizer ``Omega C(k, omega) / k`` in every row, and a report of ``omega`` elements
(``1 <= omega <= k-1``) holds both, so ``eps_LDP = eps`` exactly.
"""
from __future__ import annotations

from functools import lru_cache
from math import ceil
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size, check_report_bytes
from localpriv.mechanisms._sampling import bernoulli_bits, client_inputs
from localpriv.mechanisms.base import register
from localpriv.mechanisms.unary import (
    DENSE_MAX_K,
    LikelihoodParts,
    PureProtocol,
    UnaryEncoding,
    bit_counts,
    pack_bits,
    unpack_bits,
)
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng


def gammaln(*args: Any, **kwargs: Any) -> Any:
    """``scipy.special.gammaln``, imported on first use (keeps ``import localpriv`` quick)."""
    from scipy.special import gammaln as _f
    return _f(*args, **kwargs)


__all__ = ["SS", "optimal_subset_size"]


def optimal_subset_size(k: int, eps: float) -> int:
    """``omega = round(k / (e^eps + 1))`` clipped to ``1..k-1`` (``1/(e^eps+1)`` in log space)."""
    return int(min(k - 1, max(1, int(np.rint(k * np.exp(-np.logaddexp(0.0, eps)))))))


@register
class SS(PureProtocol):
    """Subset selection on ``k`` inputs at level ``eps`` (subset size ``omega``, optimal by default)."""

    spec_name = "ss"
    examples = (dict(spec="ss(k=4,eps=1.0)", eps_ldp=1.0, tight=True),)
    report_kind = "binary"

    def __init__(self, k: int, eps: float, omega: int | None = None) -> None:
        self.k = check_int(k, "k", minimum=2)
        self.eps = check_eps(eps)
        self.omega = (optimal_subset_size(self.k, self.eps) if omega is None
                      else check_int(omega, "omega", minimum=1, maximum=self.k - 1))
        self._omega_given = omega is not None
        w, k = self.omega, self.k
        #: ``log(e^eps / Omega)`` with ``Omega = omega e^eps + k - omega``, without overflow
        self.log_keep_share = float(-np.logaddexp(np.log(w), np.log(k - w) - self.eps))

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "omega": self.omega if self._omega_given else None}

    @property
    def p_star(self) -> float:
        """``omega e^eps / Omega``."""
        return float(np.exp(np.log(self.omega) + self.log_keep_share))

    @property
    def q_star(self) -> float:
        """``omega ((omega-1) e^eps + k - omega) / (Omega (k-1))``, in log space."""
        w, k = self.omega, self.k
        with np.errstate(divide="ignore"):  # log(omega - 1) = -inf for omega = 1
            inner = np.logaddexp(np.log(w - 1.0), np.log(k - w) - self.eps)
        return float(np.exp(np.log(w) - np.log(k - 1.0) + inner + self.log_keep_share))

    @property
    def n_outputs(self) -> int | None:
        return 2 ** self.k if self.k <= DENSE_MAX_K else None

    def output_space_size(self) -> int:
        return 2 ** self.k

    def channel(self) -> np.ndarray:
        """Dense ``k x 2^k`` channel for ``k <= 12`` (columns of the wrong size are zero)."""
        if self.k > DENSE_MAX_K:
            raise LocalPrivError(f"{self}: dense channel only for k <= {DENSE_MAX_K}")
        check_dense_size(self.k, 2 ** self.k, f"{self} channel")
        bits = (np.arange(2 ** self.k)[:, None] >> np.arange(self.k)[None, :]) & 1
        return self.likelihood(pack_bits(bits))

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        if self.k > DENSE_MAX_K:
            raise LocalPrivError(f"{self}: no output index for k > {DENSE_MAX_K}")
        return unpack_bits(reports, self.k).astype(np.int64) @ (1 << np.arange(self.k))

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """Exact SS reports, vectorized over users (no loop over users).

        Per user: ``include ~ Bernoulli(p*)`` (:func:`bernoulli_bits`, exact), then a uniform
        subset of size ``m = omega - include`` of the ``K = k - 1`` other values, then the true
        value ``x`` is added when ``include``. The uniform ``m``-subsets are drawn in a work layout
        whose bits ``0..K-1`` are "the others" (bit ``K = k - 1`` clear) by
        :func:`_ss_uniform_subsets`: iid Bernoulli bits, kept only when their count is close to
        ``m``, then a symmetric fix-up to exactly ``m`` (see there for why the result is exactly
        uniform). Each user then maps position ``p`` of the others to the value ``p``, except
        position ``x`` which goes to value ``K``: a bijection from ``0..K-1`` onto the values
        other than ``x``, so the image of a uniform ``m``-subset is a uniform ``m``-subset of
        them; bit ``x`` is finally set to ``include``. In bits: copy bit ``x`` to bit ``K``, then
        write ``include`` into bit ``x`` (for ``x = K`` the copy moves a clear bit).
        Users go in chunks of about 4 MB of work rows (bounded memory, cache-sized arrays).
        """
        x = client_inputs(self, x)
        rng = check_rng(rng)
        k, omega, big_k = self.k, self.omega, self.k - 1
        n_bytes, stride = ceil(k / 8), _ss_stride(k)
        row = np.dtype((np.void, stride))
        k_byte, k_bit = big_k >> 3, np.uint8(0x80 >> (big_k & 7))
        check_report_bytes(x.size, n_bytes, f"{self} reports")
        out = np.empty((x.size, n_bytes), dtype=np.uint8)
        chunk = _ss_chunk_rows(k)
        for s in range(0, x.size, chunk):
            xs = x[s:s + chunk]
            size = xs.size
            include = bernoulli_bits((size,), self.p_star, rng)
            work = np.empty(size, dtype=row)
            with_x, without_x = np.flatnonzero(include), np.flatnonzero(~include)
            work[with_x] = _ss_uniform_subsets(with_x.size, k, omega - 1, rng)
            work[without_x] = _ss_uniform_subsets(without_x.size, k, omega, rng)
            bits = work.view(np.uint8).reshape(size, stride)
            flat = bits.reshape(-1)
            at = np.arange(0, size * stride, stride) + (xs >> 3)  # the byte and bit of x
            bit_x = (0x80 >> (xs & 7)).astype(np.uint8)
            bits[:, k_byte] |= k_bit * ((flat[at] & bit_x) != 0)  # position x -> value K
            byte = flat[at]  # again: x may share its byte with K
            flat[at] = (byte & ~bit_x) | (bit_x * include)
            out[s:s + size] = bits[:, :n_bytes]
        return out

    def support(self, reports: ArrayLike) -> sp.csr_matrix:
        return sp.csr_matrix(unpack_bits(reports, self.k).astype(bool))

    def packed_support(self, reports: ArrayLike) -> np.ndarray:
        return UnaryEncoding.packed_support(self, reports)  # type: ignore[arg-type]  # borrowed: uses only k

    def support_counts(self, reports: ArrayLike, counts: ArrayLike | None = None) -> np.ndarray:
        return UnaryEncoding.support_counts(self, reports, counts)  # type: ignore[arg-type]  # borrowed: uses only k

    def _log_c(self) -> float:
        """``log(k e^eps / (Omega C(k, omega)))``: the probability of a report holding ``x``."""
        log_binom = gammaln(self.k + 1) - gammaln(self.omega + 1) - gammaln(self.k - self.omega + 1)
        return float(np.log(self.k) - log_binom + self.log_keep_share)

    def likelihood_parts(self, reports: ArrayLike) -> LikelihoodParts:
        """(*) with ``r1 = 1``, ``r0 = e^-eps``; reports of the wrong size have probability 0."""
        sizes = bit_counts(reports, self.k)
        log_c = np.where(sizes == self.omega, self._log_c(), -np.inf)
        return log_c, float(np.exp(-self.eps)), 1.0

    def log_level(self) -> float:
        """``log(e^eps / 1) - (log norm - log norm) = eps``: the weights of reports with and without
        ``x`` over the normalizer ``Omega C(k, omega) / k`` shared by every row (module doc)."""
        log_w_in, log_w_out = self.eps, 0.0
        return log_w_in - log_w_out

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> LikelihoodBlock:
        sizes = bit_counts(reports, self.k)
        if np.any(sizes != self.omega):
            raise LocalPrivError(f"{self}: reports must hold exactly {self.omega} elements; "
                                 f"got sizes {np.unique(sizes[sizes != self.omega])[:5].tolist()}")
        return super().likelihood_block(reports, counts)



# ---- the SS client: exact uniform subsets from Bernoulli bits and a symmetric fix-up ----------

# Cost model (ns, measured on a 2-core x86) used only to choose the sampler's parameters (speed,
# never the law): a candidate row of ``w`` 64-bit words built from ``r`` random words per word
# costs ``_SS_COST_ROW + w (r _SS_COST_DIGIT + _SS_COST_WORD)``, one fix-up try ``_SS_COST_TRY``.
_SS_COST_ROW, _SS_COST_WORD, _SS_COST_DIGIT, _SS_COST_TRY = 10.0, 3.0, 4.5, 20.0
_SS_MAX_DIGITS = 6  # Bernoulli probabilities j / 2^r with r <= 6
_SS_CHUNK_BYTES = 1 << 22  # work rows per chunk of users: cache-sized arrays ...
_SS_CHUNK_ROWS = (1 << 12, 1 << 18)  # ... within these bounds (few vectorized rounds per chunk)


def _ss_stride(k: int) -> int:
    """Bytes per work row: ``ceil(k/8)`` rounded up to 1, 2, 4 or a multiple of 8, so that a row
    is a whole number of unsigned words (fast popcounts) with room for every bit ``0..k-1``."""
    s = ceil(k / 8)
    return 1 << (s - 1).bit_length() if s <= 8 else 8 * ceil(s / 8)


def _ss_unit(stride: int) -> type[np.unsignedinteger]:
    """The unsigned word type that tiles a work row."""
    units: dict[int, type[np.unsignedinteger]] = {1: np.uint8, 2: np.uint16, 4: np.uint32}
    return units.get(stride, np.uint64)


def _ss_chunk_rows(k: int) -> int:
    lo, hi = _SS_CHUNK_ROWS
    return max(lo, min(hi, _SS_CHUNK_BYTES // _ss_stride(k)))


@lru_cache(maxsize=256)
def _ss_plan(k: int, m: int) -> tuple[int, int, int, int, float]:
    """Parameters ``(j, r, lo, hi, q)`` of :func:`_ss_uniform_subsets` on ``K = k - 1`` bits.

    Candidates draw the ``K`` bits iid with ``P(1) = pi = j / 2^r`` and are kept when their
    count ``c`` is in ``lo..hi`` (probability ``q``); the fix-up then needs on average
    ``sum_{i=c}^{m-1} K/(K-i)`` tries (``c < m``) or ``sum_{i=m+1}^{c} K/i`` (``c > m``). For each
    ``pi`` the best window is a prefix of the counts sorted by that cost (an interval around
    ``m``), the expected cost per kept row being ``(B + sum_window P(c) tries(c)) / P(window)``
    with ``B`` the cost of a candidate; the cheapest ``pi`` wins. Only the speed depends on this.
    """
    big_k = k - 1
    words = _ss_stride(k) / 8
    c = np.arange(big_k + 1)
    up = np.concatenate([[0.0], np.cumsum(big_k / (big_k - c[:-1]))])  # tries 0 -> c, adding
    down = np.concatenate([[0.0], np.cumsum(big_k / np.maximum(c[1:], 1))])  # removing c -> 0
    tries = np.where(c < m, up[m] - up[c], down[c] - down[m]) * _SS_COST_TRY
    order = np.argsort(tries, kind="stable")
    log_binom = gammaln(big_k + 1) - gammaln(c + 1) - gammaln(big_k - c + 1)
    best: tuple[float, int, int, int, int, float] | None = None
    for r in range(_SS_MAX_DIGITS + 1):
        for j in ((0, 1) if r == 0 else range(1, 1 << r, 2)):
            pi = j / (1 << r)
            if pi in (0.0, 1.0):
                pmf = (c == round(pi * big_k)).astype(float)
            else:
                pmf = np.exp(log_binom + c * np.log(pi) + (big_k - c) * np.log1p(-pi))
            cost_row = _SS_COST_ROW + words * (r * _SS_COST_DIGIT + _SS_COST_WORD)
            kept = np.cumsum(pmf[order])
            cost = (cost_row + np.cumsum((pmf * tries)[order])) / np.maximum(kept, 1e-12)
            cost[kept <= 1e-12] = np.inf
            i = int(np.argmin(cost))
            if best is None or cost[i] < best[0]:
                window = order[:i + 1]
                best = (cost[i], j, r, int(window.min()), int(window.max()), float(kept[i]))
    assert best is not None  # r = 0 always sets it
    return best[1:]


def _ss_bernoulli_rows(n: int, k: int, j: int, r: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` work rows whose bits ``0..k-2`` are iid Bernoulli(``j / 2^r``) (other bits clear).

    For ``j`` odd, ``j / 2^r = 0.b_1 ... b_r`` in binary (``b_r = 1``). A uniform
    ``U = 0.u_1 u_2 ...`` is below it iff ``u_i < b_i`` at the first digit where they differ, so
    with ``a_i = [0.u_i u_{i+1} ... < 0.b_i ... b_r]``: ``a_r = [u_r = 0]`` and
    ``a_i = [u_i = 0] or a_{i+1}`` if ``b_i = 1``, ``[u_i = 0] and a_{i+1}`` if ``b_i = 0``; and
    ``P(a_1) = j / 2^r`` exactly. The ``[u_i = 0]`` are iid fair bits, so ``r`` random words
    combined by ``|`` and ``&`` give 64 such Bernoulli bits at once. ``j = 0`` and ``j = 2^r``
    give all-clear and all-set rows.
    """
    stride = _ss_stride(k)
    n_words = -(-n * stride // 8)
    if j == 0 or j == 1 << r:
        words = np.full(n_words, 0 if j == 0 else 2**64 - 1, dtype=np.uint64)
    else:
        words = rng.bit_generator.random_raw(n_words)
        for i in range(1, r):  # the digits of j from the second-to-last one up
            if (j >> i) & 1:
                words |= rng.bit_generator.random_raw(n_words)
            else:
                words &= rng.bit_generator.random_raw(n_words)
    rows = words.view(np.uint8)[:n * stride].reshape(n, stride)
    mask = np.zeros(stride, dtype=np.uint8)  # keep bits 0..k-2 (big-endian bits, as pack_bits)
    mask[:(k - 1) // 8] = 0xFF
    mask[(k - 1) // 8] |= (0xFF00 >> ((k - 1) % 8)) & 0xFF
    unit = _ss_unit(stride)
    rows.view(unit)[...] &= mask.view(unit)
    return rows


def _ss_row_counts(rows: np.ndarray) -> np.ndarray:
    """Number of set bits of each row (int32)."""
    per_word = np.bitwise_count(rows.view(_ss_unit(rows.shape[1])))
    counts = per_word[:, 0].astype(np.int32)
    for i in range(1, per_word.shape[1]):  # a short axis: column adds beat .sum(axis=1)
        counts += per_word[:, i]
    return counts


def _ss_fix_counts(flat: np.ndarray, starts: np.ndarray, need: np.ndarray, add: bool,
                   big_k: int, rng: np.random.Generator) -> None:
    """Symmetric fix-up, in place: each listed row (first byte ``starts``) gets ``need`` more
    (``add``) or fewer set bits among positions ``0..big_k-1``. Each round every unfinished row
    tries one uniform position (``rng.integers``, exact) and flips it if it is clear (``add``) or
    set (otherwise); rows leave the active set when done. The rows are distinct, so the writes of
    one round never collide."""
    shift = big_k.bit_length()  # key = start << shift | tries still needed (need <= big_k)
    key = (starts.astype(np.int64) << shift) | need
    low = (1 << shift) - 1
    dtype = np.uint16 if big_k <= 1 << 16 else np.uint32
    while key.size:
        pos = rng.integers(0, big_k, key.size, dtype=dtype)
        at = (key >> shift) + (pos >> 3)
        bit = np.right_shift(np.uint16(0x80), pos & 7).astype(np.uint8)
        byte = flat[at]
        flip = (~byte if add else byte) & bit  # nonzero iff this try changes the row
        flat[at] = byte ^ flip
        key -= flip != 0
        key = np.compress((key & low) != 0, key)


def _ss_uniform_subsets(n: int, k: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` independent uniform ``m``-subsets of ``0..k-2``, as work rows (void, one per row).

    1. Candidates: the ``K = k - 1`` bits iid Bernoulli(``pi``) (:func:`_ss_bernoulli_rows`);
       a candidate is kept iff its count ``c`` lies in a window ``lo..hi`` around ``m``, and the
       first ``n`` kept ones are used (rejection sampling: they are iid, each distributed as the
       Bernoulli rows conditioned on ``c`` in the window).
    2. Fix-up (:func:`_ss_fix_counts`): while ``c < m`` set a uniformly chosen position if it is
       clear; while ``c > m`` clear a uniformly chosen position if it is set.

    Why exactly uniform: both steps commute with every permutation of the ``K`` positions. The
    kept-candidate law only depends on the count, so it is invariant under permutations; the
    fix-up chooses positions uniformly and decides on a bit and the count only, so permuting its
    input permutes its output in law. Hence the output law is permutation-invariant; it is
    carried by the ``m``-subsets (the fix-up stops at exactly ``m``), and the permutations act
    transitively on those, so every ``m``-subset has the same probability ``1 / C(K, m)``.
    ``pi``, the window and the chunking (:func:`_ss_plan`) only affect the speed.
    """
    stride = _ss_stride(k)
    row = np.dtype((np.void, stride))
    if n == 0:
        return np.empty(0, dtype=row)
    j, r, lo, hi, q = _ss_plan(k, m)
    kept, counts, have = [], [], 0
    while have < n:
        size = min(int((n - have) / q * 1.02) + 64, 4 * _ss_chunk_rows(k))
        cand = _ss_bernoulli_rows(size, k, j, r, rng)
        c = _ss_row_counts(cand)
        ok = (c >= lo) & (c <= hi)
        kept.append(np.compress(ok, cand.view(row).reshape(size)))
        counts.append(np.compress(ok, c))
        have += kept[-1].size
    rows = (kept[0] if len(kept) == 1 else np.concatenate(kept))[:n]
    c = (counts[0] if len(counts) == 1 else np.concatenate(counts))[:n]
    flat = rows.view(np.uint8)
    diff = m - c
    starts = np.arange(0, n * stride, stride)
    for add in (True, False):
        todo = np.flatnonzero(diff > 0 if add else diff < 0)
        if todo.size:
            _ss_fix_counts(flat, starts[todo], np.abs(diff[todo]), add, k - 1, rng)
    return rows
