"""Heavy hitters of an open vocabulary of strings under LDP: PEM.

The collector does not know the values in advance (place ids, URLs, words): it discovers the
``k`` most frequent strings and estimates their frequencies, with intervals, from one report per
user. Method: the **Prefix Extending Method** (PEM) of Wang, Li, Lin and Jha, "Locally
Differentially Private Heavy Hitter Identification", IEEE TDSC 18(2), 2021, with optimized local
hashing (OLH; Wang et al., "Locally Differentially Private Protocols for Frequency Estimation",
USENIX Security 2017) as the frequency oracle of every round, hashed with the project's stable
hash (:mod:`localpriv.mechanisms.stablehash`, XXH64).

Encoding (:class:`StringEncoding`, public parameters)
-----------------------------------------------------
Every string becomes a bit string of ``m = L * b`` bits: its first ``L = max_length`` symbols,
``b`` bits each, most significant bit first, padded with the symbol 0.

* bytes (default, ``alphabet=None``): the symbols are the string's UTF-8 bytes (``b = 8``);
  strings longer than ``L`` bytes are cut to ``L`` bytes (a multi-byte character may be cut: the
  collector shows it as U+FFFD) and counted (``truncated``; the command line prints one warning
  line). A NUL byte would read as the end of the string, so strings containing one are refused.
* alphabet (``alphabet="0123456789"``): symbol ``i + 1`` is the alphabet's ``i``-th character,
  0 is the padding, ``b = ceil(log2(|A| + 1))`` (4 bits for digits: 7-digit place ids in 28
  bits instead of 56). Strings longer than ``L`` characters are cut and counted; a character
  outside the alphabet is refused with the count of such values.

The collector decodes a candidate by dropping the padding. ``max_length`` and the alphabet must be
fixed before collection (they are part of the protocol, like ``eps``): choosing them from the
data would leak it.

Protocol (client)
-----------------
With ``gamma = start_bits`` and ``eta = bits_per_round``, there are
``G = ceil((m - gamma) / eta)`` groups; a user joins group ``j`` uniformly at random (independent
of her value) and reports the prefix of her bit string of length ``l_j = min(m, gamma + (j+1) eta)``
bits through OLH: with a uniform 64-bit seed ``s``,

    key = K(l_j, prefix)                        (below)
    h   = H_s(key) = XXH64(key, seed=s) mod g   (stablehash.to_range(stablehash.hash_keys(key, s), g))
    y   = h with probability p = e^eps / (e^eps + g - 1), else uniform on the other g - 1 values

with ``g = round(e^eps) + 1``. Her report is ``(j, s, y)``.

**Prefix keys.** A prefix of ``l`` bits is packed into ``w = ceil(l / 64)`` 64-bit words ``u_0 ..
u_{w-1}`` (bit 1 of the prefix is the most significant bit of ``u_0``; the unused low bits of the
last word are 0), and ``K(l, prefix) = k_{w-1}`` with ``k_0 = XXH64(u_0, seed=l)`` and ``k_i =
XXH64(u_i, seed=k_{i-1})`` (:func:`prefix_keys`; every XXH64 here is of a key's 8 little-endian
bytes, :func:`localpriv.mechanisms.stablehash.hash_keys`). The length in the first seed keeps prefixes of
different lengths apart.

**Privacy.** Every user sends exactly one report. ``j`` and ``s`` do not depend on her value and
``y`` is ``g``-ary randomized response on ``h``, so for any two values and any report the ratio of
probabilities is at most ``p / ((1 - p)/(g - 1)) = e^eps``: the protocol is eps-LDP for each user
(whatever the hash function; its quality only affects accuracy). Splitting users into groups
costs no privacy; it costs accuracy (each round hears ``n / G`` users).

Collector
---------
Round ``j`` estimates candidates' frequencies from group ``j`` with OLH's unbiased estimator

    f_v = (C_v / n_j - q*) / (p - q*),   q* = 1/g,   C_v = #{reports of group j : H_s(K(v)) = y}

and keeps the ``keep`` (default ``k``) largest. Round 0's candidates are all ``2^{l_0}`` prefixes;
round ``j`` extends each kept prefix by all ``2^{l_j - l_{j-1}}`` bit patterns. Candidates that no
client can send (a symbol code outside the alphabet, a non-padding symbol after the padding, a
byte sequence that is no UTF-8) are dropped before estimation (``pruned`` in the rounds'
diagnostics). The last round's top ``k`` are the heavy hitters.

**Intervals.** With ``P = q* + f (p - q*)`` the probability that a report of group ``j`` supports
``v``, ``C_v`` is binomial, so ``Var(f_v) = P (1 - P) / (n_j (p - q*)^2)``, the variance of Wang et
al. (2017, ``n q*(1-q*)/(p-q*)^2 + n f (1-p-q*)/(p-q*)`` per count) for a group of ``n_j``
users. The intervals are normal (Wald) intervals ``f_v +- z sqrt(Var)`` with ``f`` replaced by
``f_v`` clipped to [0, 1]. In PEM they are conditional on the candidate: the same reports choose
the top ``k`` and estimate them, so answers near the ``k``-th place (and answers that are no real
value) are biased upward, the winner's curse; measured on Gowalla place ids, far fewer than 95 %
of PEM's answers' intervals hold the truth (docs/heavy-hitters.md). A plan with ``final_group``
(TreeHist's, below) estimates the answers from users who took no part in choosing them.

Scoring ``reports x candidates`` is vectorized in chunks of at most :data:`CHUNK_PAIRS` pairs
(bounded memory); the only Python loops are over rounds, bits of an extension and symbol positions.

TreeHist (``method="treehist"``, :func:`treehist_identify`): the same clients plus one more group
that reports whole strings; the collector keeps the tree nodes whose estimate clears
``threshold`` noise standard deviations (Bassily, Nissim, Stemmer, Thakurta, "Practical Locally
Private Heavy Hitters", NeurIPS 2017, with OLH instead of their Hashtogram) and estimates the
final ``k`` with the extra group, which took no part in choosing them: unbiased, with intervals
free of the winner's curse.

Not done: Apple's SFP.
"""
from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from localpriv.data.formats import atomic_output, check_output
from localpriv.data.reports import iter_values
from localpriv.mechanisms.hashing import grr_sample, olh_g
from localpriv.mechanisms.stablehash import SPEC as HASH_SPEC
from localpriv.mechanisms.stablehash import hash_keys, hits_mod, key_lanes, to_range
from localpriv.utils.errors import SettingError
from localpriv.utils.optional import require
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

__all__ = ["heavy_hitters", "read_strings", "HeavyHitters", "StringEncoding", "PEMPlan", "PEMReports", "pem_perturb",
           "pem_identify", "treehist_identify", "prefix_keys", "olh_g", "ALPHABETS", "FORMAT", "FORMAT_VERSION",
           "METHODS", "HeavyHittersRun", "heavy_hitters_file"]

#: the ``format`` field of the JSON written by :meth:`HeavyHitters.save`
FORMAT = "localpriv-heavy-hitters"
#: its version
FORMAT_VERSION = 1
#: methods of :func:`heavy_hitters`
METHODS = ("pem", "treehist")
#: at most this many (report, candidate) pairs are hashed at once
CHUNK_PAIRS = 1 << 21
#: at most this many candidates in the first round (``2^(start_bits + bits_per_round)``)
MAX_FIRST_CANDIDATES = 1 << 20
#: the most heavy hitters one call may ask for (``k``, and ``keep``/``max_nodes``): a fixed cap
MAX_K = 100_000
#: at most this many candidates scored in one round (``kept x 2^bits_per_round``), checked before
#: they are built
MAX_ROUND_CANDIDATES = 1 << 24
#: longest encoded string, in bits
MAX_BITS = 1024
#: users encoded at once
_ENCODE_ROWS = 1 << 18
_ONE = np.uint64(1)


#: named alphabets (``alphabet="digits"``)
ALPHABETS = {"digits": "0123456789", "hex": "0123456789abcdef", "lower": "abcdefghijklmnopqrstuvwxyz",
             "alnum": "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}


# ------------------------------------------------------------------------------------------------
# Strings <-> bit strings
# ------------------------------------------------------------------------------------------------
def _as_text(values):
    """``values`` as one Arrow ``large_string`` array (integers as decimal text), converted in C;
    missing values and other types are refused with their count."""
    pa = require("pyarrow")  # the optional group parquet: Arrow string kernels
    pc = require("pyarrow.compute")
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        arr = values
        if pa.types.is_integer(arr.type):
            arr = pc.cast(arr, pa.string())
        if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
            raise LocalPrivError(f"heavy hitters: values must be strings (or integers), got Arrow type {arr.type}")
    else:
        a = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
        if a.ndim != 1:
            raise LocalPrivError(f"heavy hitters: values must be one column of strings, got shape {a.shape}")
        if a.dtype.kind in "iu":
            a = a.astype(str)
        elif a.dtype.kind not in "UO":
            raise LocalPrivError(f"heavy hitters: values must be strings (or integers), got dtype {a.dtype}")
        try:
            arr = pa.array(a, type=pa.large_string())
        except (pa.ArrowTypeError, pa.ArrowInvalid):  # mixed objects: say how many are not text
            kind = np.frompyfunc(lambda v: 0 if isinstance(v, str) else (
                1 if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else 2), 1, 1)(a).astype(np.int8)
            if (kind == 2).any():
                bad = a[np.flatnonzero(kind == 2)[0]]
                raise LocalPrivError(f"heavy hitters: {int((kind == 2).sum()):,} of {a.size:,} values are neither "
                                     f"strings nor integers (e.g. {bad!r}); drop missing values first") from None
            a = a.copy()
            a[kind == 1] = a[kind == 1].astype(str)
            arr = pa.array(a, type=pa.large_string())
    if arr.null_count:
        raise LocalPrivError(f"heavy hitters: {arr.null_count:,} of {len(arr):,} values are missing; drop them first")
    return arr.cast(pa.large_string())


@dataclass(frozen=True)
class StringEncoding:
    """Strings as fixed-length bit strings (see the module docstring): the first ``max_length``
    symbols (UTF-8 bytes, or characters of ``alphabet``), ``symbol_bits`` bits each, padded with 0."""

    max_length: int = 8
    alphabet: str | None = None

    def __post_init__(self):
        check_int(self.max_length, "max_length", minimum=1)
        if isinstance(self.alphabet, str) and self.alphabet in ALPHABETS:
            object.__setattr__(self, "alphabet", ALPHABETS[self.alphabet])
        if self.alphabet is not None:
            a = self.alphabet
            if not isinstance(a, str) or not a:
                raise LocalPrivError("alphabet must be a non-empty string of distinct characters")
            if len(set(a)) != len(a):
                raise LocalPrivError(f"alphabet {a[:40]!r} repeats a character")
            if "\x00" in a:
                raise LocalPrivError("alphabet must not contain the NUL character (it is the padding)")
        if self.total_bits > MAX_BITS:
            raise LocalPrivError(f"max_length {self.max_length} x {self.symbol_bits} bits = {self.total_bits} bits; "
                                 f"at most {MAX_BITS} bits are supported")

    @property
    def symbol_bits(self) -> int:
        return 8 if self.alphabet is None else max(1, math.ceil(math.log2(len(self.alphabet) + 1)))

    @property
    def n_symbols(self) -> int:
        """Codes a client can send per symbol (padding 0 included)."""
        return 256 if self.alphabet is None else len(self.alphabet) + 1

    @property
    def total_bits(self) -> int:
        return int(self.max_length) * self.symbol_bits

    @property
    def words(self) -> int:
        return -(-self.total_bits // 64)

    def describe(self) -> dict:
        return {"kind": "utf-8 bytes" if self.alphabet is None else "alphabet", "max_length": int(self.max_length),
                "alphabet": self.alphabet, "symbol_bits": self.symbol_bits, "total_bits": self.total_bits,
                "padding": "symbol 0 (NUL byte / code 0) after the string"}

    # ---- encode ----------------------------------------------------------------------------------
    def symbols(self, values) -> tuple[np.ndarray, int]:
        """``(n x max_length`` symbol codes, number of values cut to ``max_length)``."""
        pa = require("pyarrow")  # the optional group parquet: Arrow string kernels
        pc = require("pyarrow.compute")
        arr = _as_text(values)
        n, L = len(arr), int(self.max_length)
        if n == 0:
            return np.zeros((0, L), np.uint32), 0
        has_nul = pc.match_substring(arr, "\x00")
        if pc.any(has_nul).as_py():
            bad = int(pc.sum(pc.cast(has_nul, pa.int64())).as_py())
            raise LocalPrivError(f"heavy hitters: {bad:,} of {n:,} values contain a NUL character, which the "
                                 "encoding reads as the end of the string")
        if self.alphabet is None:
            _, off_buf, data_buf = arr.buffers()
            off = np.frombuffer(off_buf, dtype=np.int64)[arr.offset: arr.offset + n + 1]
            data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
            lens = np.diff(off)
            truncated = int((lens > L).sum())
            out = np.zeros((n, L), np.uint32)
            if data.size:
                cols = np.arange(L)
                for a in range(0, n, _ENCODE_ROWS):  # chunks of users: bounded memory
                    b = min(n, a + _ENCODE_ROWS)
                    idx = off[a:b, None] + cols[None, :]
                    inside = cols[None, :] < lens[a:b, None]
                    out[a:b] = np.where(inside, data[np.minimum(idx, data.size - 1)], 0)
            return out, truncated
        truncated = int(pc.sum(pc.cast(pc.greater(pc.utf8_length(arr), L), pa.int64())).as_py() or 0)
        cut = pc.utf8_slice_codeunits(arr, 0, L).to_numpy(zero_copy_only=False)
        cps = np.asarray(cut, dtype=f"<U{L}").view(np.uint32).reshape(n, L)  # code points, 0-padded
        alpha = np.frombuffer(self.alphabet.encode("utf-32-le"), dtype=np.uint32)
        order = np.argsort(alpha, kind="stable")
        srt = alpha[order]
        pos = np.minimum(np.searchsorted(srt, cps), srt.size - 1)
        ok = (srt[pos] == cps) | (cps == 0)
        bad_rows = ~ok.all(axis=1)
        if bad_rows.any():
            first = arr[int(np.flatnonzero(bad_rows)[0])].as_py()
            raise LocalPrivError(f"heavy hitters: {int(bad_rows.sum()):,} of {n:,} values have characters outside "
                                 f"the alphabet {self.alphabet[:40]!r} (e.g. {first[:40]!r})")
        codes = np.where(cps == 0, 0, order[pos] + 1).astype(np.uint32)
        return codes, truncated

    def encode(self, values) -> tuple[np.ndarray, int]:
        """``(n x words`` uint64 bit strings, number of values cut to ``max_length)``."""
        sym, truncated = self.symbols(values)
        return self.pack(sym), truncated

    def pack(self, sym: np.ndarray) -> np.ndarray:
        """Symbol codes ``n x L`` -> ``n x words`` uint64 (MSB first)."""
        n, L = sym.shape
        b, W = self.symbol_bits, self.words
        if b == 8:
            by = np.zeros((n, W * 8), np.uint8)
            by[:, :L] = sym
        else:
            shifts = np.arange(b - 1, -1, -1, dtype=np.uint32)
            bits = np.zeros((n, W * 64), np.uint8)
            bits[:, :L * b] = ((sym[:, :, None] >> shifts) & 1).reshape(n, L * b)
            by = np.packbits(bits, axis=1)
        return np.ascontiguousarray(by).view(">u8").astype(np.uint64).reshape(n, W)

    # ---- decode ----------------------------------------------------------------------------------
    def decode(self, words: np.ndarray) -> list[str]:
        """Full-length bit strings ``c x words`` -> strings (padding dropped)."""
        c = words.shape[0]
        b, L = self.symbol_bits, int(self.max_length)
        codes = np.stack([_get_bits(words, i * b, b) for i in range(L)], axis=1) if c else np.zeros((0, L), np.uint64)
        out = []
        for row in codes:  # the k final candidates only
            row = [int(v) for v in row]
            if 0 in row:
                row = row[:row.index(0)]
            if self.alphabet is None:
                out.append(bytes(row).decode("utf-8", errors="replace"))
            else:
                out.append("".join(self.alphabet[v - 1] if 1 <= v <= len(self.alphabet) else "\ufffd" for v in row))
        return out


def _get_bits(words: np.ndarray, start: int, nbits: int) -> np.ndarray:
    """Bits ``start .. start+nbits-1`` (MSB-first positions) of each row, as uint64 values."""
    out = np.zeros(words.shape[0], np.uint64)
    for t in range(nbits):  # bits of one symbol or extension, vectorized over rows
        pos = start + t
        bit = (words[:, pos // 64] >> np.uint64(63 - pos % 64)) & _ONE
        out = (out << _ONE) | bit
    return out


def _set_bits(words: np.ndarray, start: int, nbits: int, values: np.ndarray) -> None:
    """OR ``values`` (``nbits`` bits each) into positions ``start ..`` of each row, in place."""
    values = np.asarray(values, dtype=np.uint64)
    for t in range(nbits):
        pos = start + t
        bit = (values >> np.uint64(nbits - 1 - t)) & _ONE
        words[:, pos // 64] |= bit << np.uint64(63 - pos % 64)


def _prefix(words: np.ndarray, bits: int) -> np.ndarray:
    """The first ``bits`` bits of each row: ``ceil(bits/64)`` words, unused low bits 0."""
    w = -(-bits // 64)
    out = np.array(words[:, :w], dtype=np.uint64, copy=True)
    r = bits - 64 * (w - 1)
    if r < 64:
        out[:, -1] &= np.uint64(0xFFFFFFFFFFFFFFFF) << np.uint64(64 - r)
    return out


def prefix_keys(prefix_words: np.ndarray, bits: int) -> np.ndarray:
    """The 64-bit key ``K(l, prefix)`` of prefixes of ``l = bits`` bits (module docstring):
    ``k_0 = XXH64(u_0, seed=l)``, ``k_i = XXH64(u_i, seed=k_{i-1})``, the key is the last ``k``."""
    pw = np.asarray(prefix_words, dtype=np.uint64)
    h = hash_keys(pw[:, 0], seed=np.uint64(bits))
    for i in range(1, pw.shape[1]):  # words of one prefix (at most 16)
        h = hash_keys(pw[:, i], seed=h)
    return h


# ------------------------------------------------------------------------------------------------
# The protocol's public parameters
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PEMPlan:
    """PEM's public parameters: privacy level, encoding, prefix lengths (module docstring).

    Defaults: ``start_bits`` 0 for bytes, one symbol for an alphabet; ``bits_per_round`` the
    whole symbols that fit in 8 bits (8 for bytes, 8 = two digits, 5 = one letter of ``lower``).
    The first round enumerates ``2^(start_bits + bits_per_round)`` prefixes, later rounds
    ``keep * 2^bits_per_round`` (fewer after pruning): fewer rounds mean more users per round
    (better accuracy) and more candidates to score (more collector time). ``final_group``: one
    more group of users reports whole strings, and the collector estimates its answers from them
    (unbiased, intervals free of the selection); TreeHist requires it, PEM uses it if present."""

    eps: float
    encoding: StringEncoding = field(default_factory=StringEncoding)
    start_bits: int | None = None
    bits_per_round: int | None = None
    final_group: bool = False

    def __post_init__(self):
        object.__setattr__(self, "eps", check_eps(self.eps))
        b, m = self.encoding.symbol_bits, self.encoding.total_bits
        eta = self.bits_per_round if self.bits_per_round is not None else b * max(1, 8 // b)
        gamma = self.start_bits if self.start_bits is not None else (0 if b >= 8 else b)
        eta = check_int(eta, "bits_per_round", minimum=1, maximum=20)
        gamma = check_int(gamma, "start_bits", minimum=0)
        if gamma + eta > m and gamma >= m:
            raise LocalPrivError(f"start_bits {gamma} must be below the encoding's {m} bits")
        if 2 ** min(gamma + eta, m) > MAX_FIRST_CANDIDATES:
            raise LocalPrivError(f"the first round would enumerate 2^{min(gamma + eta, m)} prefixes; keep "
                                 f"start_bits + bits_per_round <= {int(math.log2(MAX_FIRST_CANDIDATES))}")
        object.__setattr__(self, "start_bits", gamma)
        object.__setattr__(self, "bits_per_round", eta)

    @property
    def groups(self) -> int:
        """``G = ceil((m - gamma) / eta)``: one group of users per round."""
        assert self.start_bits is not None and self.bits_per_round is not None  # set by __post_init__
        return max(1, -(-(self.encoding.total_bits - self.start_bits) // self.bits_per_round))

    @property
    def report_groups(self) -> int:
        """Groups users join: one per round, plus the final group (whole strings) if any."""
        return self.groups + bool(self.final_group)

    def prefix_bits(self, j: int) -> int:
        """``l_j = min(m, gamma + (j + 1) eta)``."""
        assert self.start_bits is not None and self.bits_per_round is not None  # set by __post_init__
        return min(self.encoding.total_bits, self.start_bits + (j + 1) * self.bits_per_round)

    @property
    def g(self) -> int:
        return olh_g(self.eps)

    @property
    def p(self) -> float:
        """GRR keep probability ``e^eps / (e^eps + g - 1)`` (computed in log space)."""
        return float(np.exp(self.eps - np.logaddexp(self.eps, np.log(self.g - 1))))

    @property
    def q_star(self) -> float:
        return 1.0 / self.g

    def describe(self) -> dict:
        return {"eps": self.eps, "olh_g": self.g, "p": self.p, "q_star": self.q_star, "start_bits": self.start_bits,
                "bits_per_round": self.bits_per_round, "groups": self.groups,
                "final_group": bool(self.final_group),
                "prefix_bits": [self.prefix_bits(j) for j in range(self.groups)],
                "encoding": self.encoding.describe(), "hash": HASH_SPEC}


@dataclass
class PEMReports:
    """One report per user: group ``j``, 64-bit OLH seed ``s``, randomized hash ``y``."""

    plan: PEMPlan
    group: np.ndarray
    seed: np.ndarray
    y: np.ndarray
    truncated: int = 0

    def __len__(self) -> int:
        return int(self.group.size)


def pem_perturb(values, plan: PEMPlan, rng) -> PEMReports:
    """The clients of PEM, vectorized: encode, choose a group, hash the group's prefix, randomize.

    Parameters
    ----------
    values : sequence of str (or integers, read as decimal text)
        One value per user.
    plan : PEMPlan
        The public parameters (eps, encoding, prefix lengths).
    rng : numpy.random.Generator
        The clients' randomness (groups, seeds, randomized response).

    Returns
    -------
    PEMReports
        ``truncated`` counts the values cut to the encoding's ``max_length``.
    """
    rng = check_rng(rng)
    words, truncated = plan.encoding.encode(values)
    n = words.shape[0]
    G, g = plan.report_groups, plan.g
    group = rng.integers(0, G, size=n).astype(np.int32)
    seed = rng.integers(0, 2 ** 64, size=n, dtype=np.uint64)
    h = np.empty(n, np.int64)
    for j in range(G):  # one pass per round
        rows = np.flatnonzero(group == j)
        if rows.size:
            bits = plan.prefix_bits(j)
            keys = prefix_keys(_prefix(words[rows], bits), bits)
            h[rows] = to_range(hash_keys(keys, seed=seed[rows]), g)
    y = grr_sample(h, g, plan.p, rng)  # OLH's randomized response, the registered mechanism's draw
    return PEMReports(plan, group, seed, y, truncated)


# ------------------------------------------------------------------------------------------------
# The collector
# ------------------------------------------------------------------------------------------------
def _support_counts(keys: np.ndarray, seed: np.ndarray, y: np.ndarray, g: int,
                    chunk_pairs: int = CHUNK_PAIRS) -> np.ndarray:
    """``C_v = #{reports : H_s(key_v) = y}`` for every candidate key, in chunks of reports."""
    c = keys.size
    counts = np.zeros(c, np.int64)
    if c == 0:
        return counts
    lanes = key_lanes(keys)
    seed = np.asarray(seed, dtype=np.uint64)
    step = max(1, chunk_pairs // c)
    for a in range(0, seed.size, step):  # chunks of reports (bounded memory), vectorized inside
        b = min(seed.size, a + step)
        counts += hits_mod(seed[a:b], lanes, y[a:b], g).sum(axis=0)
    return counts


def _valid(cands: np.ndarray, bits: int, enc: StringEncoding) -> np.ndarray:
    """Candidates a client can send: symbol codes below ``n_symbols`` and nothing but padding
    after the padding (a symbol cut by the prefix end is checked on its known high bits)."""
    b, top = enc.symbol_bits, enc.n_symbols - 1
    ok = np.ones(cands.shape[0], bool)
    prev_pad = np.zeros(cands.shape[0], bool)
    need = np.zeros(cands.shape[0], np.int8)  # bytes: UTF-8 continuation bytes still expected
    for i in range(-(-bits // b)):  # symbol positions
        nb = min(b, bits - i * b)
        hi = _get_bits(cands, i * b, nb)
        low = hi << np.uint64(b - nb)  # the smallest code with these high bits
        ok &= low <= np.uint64(top)
        ok &= ~(prev_pad & (hi != 0))
        if enc.alphabet is None and nb == b:  # a whole byte: UTF-8 structure (a cut at the end is allowed)
            cont = (hi >> np.uint64(6)) == 2
            ok &= np.where(need > 0, cont, ~cont & ((hi < 0xC0) | (hi >= 0xC2)) & (hi < 0xF5))
            ok &= ~((need > 0) & (hi == 0))
            lead = np.select([hi >= 0xF0, hi >= 0xE0, hi >= 0xC2], [3, 2, 1], 0).astype(np.int8)
            need = np.where(need > 0, need - 1, np.where(cont, 0, lead)).astype(np.int8)
        prev_pad = hi == 0 if nb == b else prev_pad & (hi == 0)
    return ok


def _estimate(counts: np.ndarray, n_j: int, plan: PEMPlan) -> np.ndarray:
    p, q = plan.p, plan.q_star
    return (counts / max(n_j, 1) - q) / (p - q)


def _std_error(f: np.ndarray, n_j: int, plan: PEMPlan) -> np.ndarray:
    """``sqrt(P (1 - P) / (n_j (p - q*)^2))`` with ``P = q* + f (p - q*)``, ``f`` clipped to [0, 1]."""
    p, q = plan.p, plan.q_star
    P = q + np.clip(f, 0.0, 1.0) * (p - q)
    return np.sqrt(P * (1 - P) / max(n_j, 1)) / (p - q)


@dataclass
class HeavyHitters:
    """The heavy hitters found: candidates (strings), estimated frequencies (shares of all users)
    with normal intervals, and each round's diagnostics."""

    method: str
    k: int
    n: int
    level: float
    values: list
    estimates: np.ndarray
    std_errors: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    rounds: list
    plan: dict
    truncated: int | None = None
    privacy: str = ""
    seconds: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"HeavyHitters({self.method}, k={self.k}, n={self.n:,}, eps={self.plan.get('eps')}, found {len(self)})"

    def to_frame(self):
        import pandas as pd
        return pd.DataFrame({"rank": np.arange(1, len(self) + 1), "value": self.values, "estimate": self.estimates,
                             "lower": self.lower, "upper": self.upper, "std_error": self.std_errors,
                             "count_estimate": self.estimates * self.n})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``format``, ``version`` (:data:`FORMAT_VERSION`), parameters, candidates, rounds."""
        return {
            "format": FORMAT, "version": FORMAT_VERSION, "method": self.method, "k": self.k, "n": self.n,
            "level": self.level, "interval": "normal (Wald), OLH variance per group; conditional on the candidate",
            "privacy": self.privacy, "plan": self.plan, "truncated": self.truncated,
            "candidates": [{"rank": i + 1, "value": v, "estimate": float(e), "lower": float(lo), "upper": float(hi),
                            "std_error": float(s), "count_estimate": float(e * self.n)}
                           for i, (v, e, lo, hi, s) in enumerate(zip(self.values, self.estimates, self.lower,
                                                                     self.upper, self.std_errors))],
            "rounds": self.rounds, "seconds": self.seconds,
        }

    def save(self, path, extra: dict | None = None) -> Path:
        """Write :meth:`to_dict` (plus ``extra``) as JSON, atomically."""
        d = self.to_dict()
        if extra:
            d.update(extra)
        path = Path(path)
        if path.suffix.lower() != ".json":
            raise LocalPrivError(f"{path}: heavy hitters are written as .json")
        with atomic_output(path, (".json",), what="heavy-hitters file") as tmp:
            tmp.write_text(json.dumps(d, indent=2, allow_nan=False), encoding="utf-8")
        return path


def pem_identify(reports: PEMReports, k: int, *, keep: int | None = None, level: float = 0.95,
                 progress: Callable[[int, int], None] | None = None,
                 chunk_pairs: int = CHUNK_PAIRS) -> HeavyHitters:
    """PEM's collector: the top ``k`` strings, their frequencies and intervals (module docstring).

    Parameters
    ----------
    reports : PEMReports
        The users' reports (:func:`pem_perturb`) and the plan they followed.
    k : int
        How many heavy hitters to return.
    keep : int, optional
        Prefixes kept (and extended) after each intermediate round (default ``k``, as in the paper).
    level : float
        Confidence level of the intervals.
    progress : callable, optional
        ``progress(rounds_done, rounds)`` after each round.
    chunk_pairs : int
        Memory bound: (report, candidate) pairs hashed at once.
    """
    keep = None if keep is None else check_int(keep, "keep", minimum=1)
    return _identify(reports, k, "pem", keep=keep, level=level, progress=progress, chunk_pairs=chunk_pairs)


def treehist_identify(reports: PEMReports, k: int, *, threshold: float = 3.0, max_nodes: int | None = None,
                      level: float = 0.95, progress: Callable[[int, int], None] | None = None,
                      chunk_pairs: int = CHUNK_PAIRS) -> HeavyHitters:
    """TreeHist's collector (Bassily, Nissim, Stemmer, Thakurta, NeurIPS 2017), on PEM's reports.

    The prefix tree is walked level by level as in PEM, but a node survives when its estimate
    clears a threshold, ``f_v >= threshold * sd_0(j)`` with ``sd_0(j) = sqrt(q*(1-q*)) / (sqrt(n_j)
    (p - q*))`` the noise of level ``j`` at ``f = 0`` (our choice of TreeHist's threshold), at most
    ``max_nodes`` (default ``4 k``) of them, at least the ``k`` largest. The ``k`` leaves with the
    largest estimates are the answer, and their frequencies come from the **final group**
    (``plan.final_group``: users who reported their whole string and took no part in the
    selection), so the estimates are unbiased and the intervals unconditional. Our variant uses
    OLH as the frequency oracle (the paper's is Hashtogram) and ``2^bits_per_round``-ary levels.
    """
    if not reports.plan.final_group:
        raise LocalPrivError("treehist needs reports of a plan with final_group=True (a group that reports "
                             "whole strings for the final frequencies)")
    threshold = float(threshold)
    if not np.isfinite(threshold) or threshold < 0:
        raise LocalPrivError(f"threshold must be a number >= 0, got {threshold!r}")
    k = check_int(k, "k", minimum=1)
    max_nodes = 4 * k if max_nodes is None else check_int(max_nodes, "max_nodes", minimum=k)
    return _identify(reports, k, "treehist", keep=max_nodes, threshold=threshold, level=level,
                     progress=progress, chunk_pairs=chunk_pairs)


def _identify(reports: PEMReports, k: int, method: str, *, keep: int | None, threshold: float | None = None,
              level: float = 0.95, progress=None, chunk_pairs: int = CHUNK_PAIRS) -> HeavyHitters:
    k = check_int(k, "k", minimum=1)
    keep = k if keep is None else keep
    n_users = len(reports)
    if k > min(n_users, MAX_K):
        raise LocalPrivError(f"k={k} heavy hitters asked of {n_users} users: k can be at most the number of users "
                             f"and at most {MAX_K:,}")
    if keep > MAX_K * 4:
        raise LocalPrivError(f"{'max_nodes' if threshold is not None else 'keep'}={keep} prefixes kept per round is "
                             f"above the limit of {MAX_K * 4:,}")
    if not 0.0 < float(level) < 1.0:
        raise LocalPrivError(f"level must be strictly between 0 and 1, got {level!r}")
    plan, enc = reports.plan, reports.plan.encoding
    G, g = plan.groups, plan.g
    steps = plan.report_groups
    z = NormalDist().inv_cdf(0.5 + float(level) / 2)
    order = np.argsort(reports.group, kind="stable")
    bounds = np.searchsorted(reports.group[order], np.arange(plan.report_groups + 1))
    rounds: list[dict[str, Any]] = []
    prev_bits = 0
    cands = np.zeros((1, enc.words), np.uint64)  # the empty prefix
    t_all = time.perf_counter()
    est = se = np.zeros(0)
    for j in range(G):  # rounds
        t0 = time.perf_counter()
        bits = plan.prefix_bits(j)
        ext = bits - prev_bits
        if cands.shape[0] * 2 ** ext > MAX_ROUND_CANDIDATES:
            raise LocalPrivError(f"round {j + 1} would score {cands.shape[0]:,} x 2^{ext} candidates, above the limit "
                                 f"of {MAX_ROUND_CANDIDATES:,}; keep fewer prefixes (k, keep) or use fewer "
                                 "bits_per_round")
        raw = np.repeat(cands, 2 ** ext, axis=0)
        _set_bits(raw, prev_bits, ext, np.tile(np.arange(2 ** ext, dtype=np.uint64), cands.shape[0]))
        ok = _valid(raw, bits, enc)
        cand = raw[ok]
        rows = order[bounds[j]:bounds[j + 1]]
        n_j = int(rows.size)
        keys = prefix_keys(_prefix(cand, bits), bits)
        counts = _support_counts(keys, reports.seed[rows], reports.y[rows], g, chunk_pairs)
        f = _estimate(counts, n_j, plan)
        noise = float(_std_error(np.zeros(1), n_j, plan)[0])
        ranked = np.argsort(-f, kind="stable")
        if j == G - 1:
            top = ranked[:k]
        elif threshold is None:
            top = ranked[:keep]
        else:  # TreeHist: the nodes above the threshold, at most `keep`, at least k
            above = int((f >= threshold * noise).sum())
            top = ranked[:min(keep, max(k, above))]
        cands, est = cand[top], f[top]
        se = _std_error(est, n_j, plan)
        rounds.append({"round": j + 1, "prefix_bits": bits, "reports": n_j, "candidates": int(cand.shape[0]),
                       "pruned": int((~ok).sum()), "kept": int(top.size),
                       "kth_estimate": float(est[-1]) if est.size else None, "noise_sd": noise,
                       "seconds": round(time.perf_counter() - t0, 4)})
        prev_bits = bits
        if progress is not None:
            progress(j + 1, steps)
    if plan.final_group and cands.shape[0]:  # frequencies from users who took no part in the selection
        t0 = time.perf_counter()
        rows = order[bounds[G]:bounds[G + 1]]
        n_f = int(rows.size)
        keys = prefix_keys(_prefix(cands, enc.total_bits), enc.total_bits)
        est = _estimate(_support_counts(keys, reports.seed[rows], reports.y[rows], g, chunk_pairs), n_f, plan)
        back = np.argsort(-est, kind="stable")
        cands, est = cands[back], est[back]
        se = _std_error(est, n_f, plan)
        rounds.append({"round": "final", "prefix_bits": enc.total_bits, "reports": n_f,
                       "candidates": int(cands.shape[0]), "pruned": 0, "kept": int(cands.shape[0]),
                       "kth_estimate": float(est[-1]), "noise_sd": float(_std_error(np.zeros(1), n_f, plan)[0]),
                       "seconds": round(time.perf_counter() - t0, 4)})
        if progress is not None:
            progress(steps, steps)
    values = enc.decode(_prefix(cands, enc.total_bits)) if cands.shape[0] else []
    lo, hi = np.clip(est - z * se, 0.0, 1.0), np.clip(est + z * se, 0.0, 1.0)
    return HeavyHitters(method=method, k=k, n=len(reports), level=float(level), values=values, estimates=est,
                        std_errors=se, lower=lo, upper=hi, rounds=rounds, plan=plan.describe(),
                        truncated=reports.truncated, privacy=privacy_text(plan),
                        seconds={"collector": round(time.perf_counter() - t_all, 4)})


def privacy_text(plan: PEMPlan) -> str:
    return (f"eps = {plan.eps:g} per user (local DP): one report per user, OLH with g = {plan.g} "
            f"(p = {plan.p:.4g}, q* = 1/{plan.g}); groups and hash seeds are independent of the values")


def heavy_hitters(values, k: int, eps: float, rng, method: str = "pem", *, max_length: int = 8,
                  alphabet: str | None = None, start_bits: int | None = None, bits_per_round: int | None = None,
                  keep: int | None = None, threshold: float = 3.0, level: float = 0.95,
                  progress: Callable[[int, int], None] | None = None, where: str = "") -> HeavyHitters:
    """Discover the top-``k`` strings of ``values`` under eps-LDP (simulating clients and collector).

    ``f_v = (C_v / n_j - 1/g) / (p - 1/g)`` per round (OLH, Wang et al. USENIX Security 2017);
    prefixes extended round by round (PEM, Wang et al. IEEE TDSC 2021). See the module docstring
    for the encoding, the prefix keys, the privacy argument and the intervals.

    Parameters
    ----------
    values : sequence of str
        One value per user (integers are read as their decimal text).
    k : int
        Number of heavy hitters.
    eps : float
        Each user's LDP level.
    rng : numpy.random.Generator
        The clients' randomness.
    method : str
        ``"pem"`` (:func:`pem_identify`) or ``"treehist"`` (:func:`treehist_identify`: threshold
        pruning and a final group of whole-string reports for unbiased frequencies, one more group
        of users). Apple's SFP is not implemented.
    max_length, alphabet : see :class:`StringEncoding`
    start_bits, bits_per_round : see :class:`PEMPlan` (defaults: 0 and 8 for bytes; for an
        alphabet of ``b``-bit symbols, one symbol to start and ``b * max(1, 8 // b)`` bits per
        round: two digits)
    keep : int, optional
        Prefixes kept per intermediate round (PEM, default ``k``); at most this many nodes above
        the threshold (TreeHist, default ``4 k``).
    threshold : float
        TreeHist: a node survives when its estimate is at least ``threshold`` noise standard
        deviations (default 3).
    level : float
        Confidence level of the intervals (normal).
    progress : callable, optional
        ``progress(rounds_done, rounds)``.
    where : str
        Where the values come from (a file name), for the truncation warning.

    Returns
    -------
    HeavyHitters
        ``truncated`` counts values cut to ``max_length`` (a warning says how many).
    """
    if method not in METHODS:
        raise LocalPrivError(f"unknown heavy-hitter method {method!r}: {', '.join(METHODS)} "
                             "(Apple's SFP is not implemented)")
    enc = StringEncoding(max_length, alphabet)
    plan = PEMPlan(eps, enc, start_bits, bits_per_round, final_group=method == "treehist")
    k = check_int(k, "k", minimum=1)
    t0 = time.perf_counter()
    reports = pem_perturb(values, plan, rng)
    t_client = time.perf_counter() - t0
    if len(reports) == 0:
        raise LocalPrivError("heavy hitters: no values")
    if reports.truncated:
        unit = "bytes" if enc.alphabet is None else "characters"
        head = f"{where}: " if where else ""
        warnings.warn(f"{head}{reports.truncated:,} of {len(reports):,} values are longer than {max_length} {unit} and "
                      f"were cut to their first {max_length} {unit} (raise max_length to keep them whole)",
                      UserWarning, stacklevel=2)
    if method == "pem":
        res = pem_identify(reports, k, keep=keep, level=level, progress=progress)
    else:
        res = treehist_identify(reports, k, threshold=threshold, max_nodes=keep, level=level, progress=progress)
    res.seconds["clients"] = round(t_client, 4)
    return res


class _Text:
    """Stand-in domain for :func:`localpriv.data.reports.iter_values`: keep the values as text."""

    is_numeric = False


def read_strings(path, column: str | None = None, *, header: bool = True,
                 drop_missing: bool = False, fmt: str | None = None, strip: bool = True) -> tuple[Any, dict]:
    """The string values of one column of a CSV, TSV or Parquet file, with the project's refusal
    rules (:func:`localpriv.data.reports.iter_values`): missing values refused with their count and
    rows, or dropped and counted with ``drop_missing``. Integer columns are read as decimal text;
    other non-text columns are refused. Returns ``(values, stats)``: the values as an Arrow
    string array, with ``stats["rows"]`` read and
    ``stats["dropped"]``."""
    stats: dict = {}
    parts = []
    text = _Text()  # duck-typed: iter_values reads only is_numeric
    for vals, first in iter_values(path, column, domain=text, drop_missing=drop_missing,  # type: ignore[arg-type]
                                   stats=stats, header=header, fmt=fmt, strip=strip):
        if vals.ndim != 1:
            raise LocalPrivError(f"{path}: give one column of strings, not {vals.shape[1]}")
        if vals.dtype.kind not in "OUiu":
            raise LocalPrivError(f"{path}: column {column or 1} holds {vals.dtype} values, not strings or integers "
                                 f"(first at row {first})")
        parts.append(_as_text(vals))
    if not parts:
        raise LocalPrivError(f"{path} has no values" + (f" ({stats.get('dropped', 0):,} missing dropped)"
                                                        if stats.get("dropped") else ""))
    pa = require("pyarrow")  # the optional group parquet: Arrow string kernels
    return (parts[0] if len(parts) == 1 else pa.concat_arrays(parts)), stats


@dataclass(frozen=True)
class HeavyHittersRun:
    """What :func:`heavy_hitters_file` found and did: the result, the plan of its rounds, and the
    rows read (``stats``: ``rows``, ``dropped``)."""

    result: HeavyHitters
    plan: PEMPlan
    stats: dict


def heavy_hitters_file(input: str | Path, k: int, eps: float, rng, method: str = "pem", *,
                       column: str | None = None, header: bool = True, drop_missing: bool = False,
                       max_length: int = 8, alphabet: str | None = None, start_bits: int | None = None,
                       bits_per_round: int | None = None, level: float = 0.95, output: str | Path | None = None,
                       extra: dict | None = None, stage: Callable[[str], None] | None = None,
                       progress: Callable[[int, int], None] | None = None, fmt: str | None = None,
                       strip: bool = True) -> HeavyHittersRun:
    """:func:`heavy_hitters` of the strings of a file's column (:func:`read_strings`; users
    simulated from the file; ``fmt`` and ``strip`` as for :func:`localpriv.data.reports.iter_values`),
    the plan checked before reading; with ``output`` the result is
    written as JSON (with ``extra`` and the rows read). ``stage`` is told what runs."""
    if output is not None:
        check_output(output, (".json",), [input], what="heavy-hitters file")
    if method not in METHODS:
        raise SettingError(f"{method!r} is not one of {', '.join(METHODS)}", "method")
    plan = PEMPlan(eps, StringEncoding(max_length, alphabet), start_bits, bits_per_round,
                   final_group=method == "treehist")  # refuse before reading
    values, stats = read_strings(input, column, header=header, drop_missing=drop_missing, fmt=fmt, strip=strip)
    if stage is not None:
        stage(f"{method}: {len(values):,} users")
    res = heavy_hitters(values, k, eps, rng, method, max_length=max_length, alphabet=alphabet, start_bits=start_bits,
                        bits_per_round=bits_per_round, level=level, progress=progress, where=str(input))
    if output is not None:
        res.save(output, extra={**(extra or {}), "rows": stats["rows"], "dropped_missing": stats["dropped"]})
    return HeavyHittersRun(res, plan, stats)
