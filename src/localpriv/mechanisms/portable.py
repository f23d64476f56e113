"""The portable client protocol: word-exact samplers that other languages reproduce bit for bit.

The vectorized samplers of the mechanisms draw from a NumPy ``Generator``, whose algorithms are not
portable. This module defines a small set of primitives on a *word source* (a stream of uniform
32-bit words) and, per mechanism, a scalar sampler ``sample_portable(mech, x, source)`` that
consumes words in a documented order and returns the report in the collector's wire format
(``docs/service.md``: a JSON integer, a lowercase hex bit vector or a float). The JavaScript and
Java clients implement the same functions; ``clients/vectors/vectors-v1.json`` (``make
vectors``) holds the reports they must reproduce. The protocol is specified in ``docs/clients.md``
("The portable protocol"); the choice is recorded in decision 0049.

Word sources:

* :class:`ChaCha20Source` -- the test-only deterministic stream: the ChaCha20 block function of
  RFC 8439 (section 2.3) keyed by ``SHA-256(UTF-8 of a seed string)``, nonce 12 zero bytes, block
  counter from 0, keystream read as consecutive little-endian 32-bit words;
* :class:`SystemSource` -- the operating system's CSPRNG (``secrets``), what real clients use.

Primitives (every sampler is written with these only):

* ``u32()``; ``u64() = lo + 2^32 hi`` (two words, ``lo`` first);
* ``uniform_int(n)``: for ``n <= 2^32`` draw ``w = u32()`` until ``w < 2^32 - (2^32 mod n)``,
  return ``w mod n``; for larger ``n`` the same with as many words per try as ``n - 1`` needs
  (``u64()`` up to ``2^64``);
* ``bernoulli(p)`` for a float64 ``p``: ``U = u64() >> 11``, return ``U < p 2^53`` (the law is
  ``ceil(p 2^53) / 2^53``);
* ``bernoulli_rational(a, b)``, integers ``0 <= a <= b``: exactly ``a / b``, by comparing words with
  the base-``2^32`` digits of ``a / b`` (expected ``1 + 2^-32`` words);
* ``bernoulli_exp(a, b)``: exactly ``exp(-a/b)`` (Canonne, Kamath and Steinke, NeurIPS 2020,
  Algorithm 1) from ``bernoulli_rational``;
* ``discrete_laplace(a, b)``: ``P(Y = y) ∝ exp(-|y| a / b)`` exactly (ibid., Algorithm 2), used
  with ``a / b`` the exact rational value of a float64 ``eps``;
* ``categorical_bisect(n, W)``: an index by ``ceil(log2 n)`` Bernoulli draws on closed-form weights.

Memoized mechanisms (the longitudinal ones and RAPPOR) keep their permanent part in a memo object
the caller holds (:func:`memoize_portable`). :func:`parse_portable` reads spec strings by the
clients' grammar with error codes (:data:`ERROR_CODES`); :func:`perturb_lines` is the client
command's contract (``localpriv client``). Bounds: :func:`uniform_int` up to ``2^1024``, a stream
up to ``2^36`` words, :data:`MAX_CLIENT_LINES` lines per run.
"""
from __future__ import annotations

import hashlib
import math
import re
import secrets
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from localpriv.domains.base import CategoricalDomain, Domain, IntegerDomain
from localpriv.domains.parse import parse_domain
from localpriv.mechanisms.base import Mechanism, parse
from localpriv.mechanisms.duchi import Duchi
from localpriv.mechanisms.geometric import Geometric
from localpriv.mechanisms.hadamard import HadamardResponse
from localpriv.mechanisms.hashing import BLH, OLH, LocalHashing
from localpriv.mechanisms.krr import KRR
from localpriv.mechanisms.longitudinal import LBLH, LGRR, LOLH, LOSUE, LOUE, LSOUE, LSUE
from localpriv.mechanisms.piecewise import Piecewise
from localpriv.mechanisms.planar import PlanarGeometric, PlanarLaplace
from localpriv.mechanisms.rappor import RAPPOR
from localpriv.mechanisms.square_wave import SquareWave
from localpriv.mechanisms.subset import SS
from localpriv.mechanisms.unary import OUE, SUE, UnaryEncoding
from localpriv.utils.validation import LocalPrivError

__all__ = [
    "WordSource", "ChaCha20Source", "SystemSource", "ListSource", "chacha20_block",
    "u32", "u64", "uniform_int", "bernoulli", "bernoulli_rational", "bernoulli_exp", "discrete_laplace",
    "categorical_bisect", "uniform_open", "CELL_MARGIN", "watching",
    "xxh64_le64", "PortableError", "ERROR_CODES", "parse_portable", "portable_domain", "encode_value",
    "sample_portable", "memoize_portable", "portable_parameters", "PORTABLE_SAMPLERS", "PORTABLE_MEMOIZED",
    "PORTABLE_KEYS", "grr_second", "NOT_PORTABLE", "bits_hex", "PROTOCOL_VERSION", "MAX_BLOCKS", "perturb_lines",
    "ClientRun", "MAX_CLIENT_LINES", "perturb_devices", "MAX_DEVICE_ROUNDS",
]

#: the protocol's version (the vectors file is ``vectors-v{PROTOCOL_VERSION}.json``)
PROTOCOL_VERSION = 1
_M32 = 0xFFFFFFFF
_TWO32 = 1 << 32
_TWO53 = 1 << 53
_TWO64 = 1 << 64
#: the largest range of :func:`uniform_int` (32 words per try)
_MAX_UNIFORM = 1 << 1024
#: blocks one ChaCha20 stream may produce (RFC 8439's 32-bit block counter): ``2^36`` words
MAX_BLOCKS = 1 << 32


# --------------------------------------------------------------------------------------------
# Word sources
# --------------------------------------------------------------------------------------------
class WordSource(Protocol):
    """A stream of independent uniform 32-bit words."""

    def u32(self) -> int:
        """The next word, an int in ``0..2^32-1``."""


def _quarter(s: list[int], a: int, b: int, c: int, d: int) -> None:
    """RFC 8439 section 2.1, on the 16-word state ``s`` (mod ``2^32``)."""
    s[a] = (s[a] + s[b]) & _M32
    s[d] ^= s[a]
    s[d] = ((s[d] << 16) | (s[d] >> 16)) & _M32
    s[c] = (s[c] + s[d]) & _M32
    s[b] ^= s[c]
    s[b] = ((s[b] << 12) | (s[b] >> 20)) & _M32
    s[a] = (s[a] + s[b]) & _M32
    s[d] ^= s[a]
    s[d] = ((s[d] << 8) | (s[d] >> 24)) & _M32
    s[c] = (s[c] + s[d]) & _M32
    s[b] ^= s[c]
    s[b] = ((s[b] << 7) | (s[b] >> 25)) & _M32


def chacha20_block(key: bytes, counter: int, nonce: bytes) -> list[int]:
    """The ChaCha20 block function (RFC 8439 section 2.3): 16 little-endian 32-bit output words.

    ``state = constants "expand 32-byte k" | key (8 words) | counter | nonce (3 words)``, 20
    rounds (10 column + diagonal double rounds), then the input state added word by word.

    Parameters
    ----------
    key : bytes
        32 bytes.
    counter : int
        The block counter, ``0..2^32-1``.
    nonce : bytes
        12 bytes.

    Returns
    -------
    list of int
        The block's 16 words (serialized little-endian they are the 64 keystream bytes).
    """
    if len(key) != 32 or len(nonce) != 12 or not 0 <= counter < MAX_BLOCKS:
        raise LocalPrivError("chacha20_block needs a 32-byte key, a 12-byte nonce and a counter in 0..2^32-1")
    init = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574, *struct.unpack("<8I", key), counter,
            *struct.unpack("<3I", nonce)]
    s = list(init)
    for _ in range(10):
        _quarter(s, 0, 4, 8, 12)
        _quarter(s, 1, 5, 9, 13)
        _quarter(s, 2, 6, 10, 14)
        _quarter(s, 3, 7, 11, 15)
        _quarter(s, 0, 5, 10, 15)
        _quarter(s, 1, 6, 11, 12)
        _quarter(s, 2, 7, 8, 13)
        _quarter(s, 3, 4, 9, 14)
    return [(x + y) & _M32 for x, y in zip(s, init)]


def _chacha20_blocks(key: bytes, counter: int, nonce: bytes, n: int) -> list[int]:
    """The words of ``n`` consecutive blocks from ``counter``: :func:`chacha20_block` vectorized
    over the counters (NumPy ``uint32`` arithmetic wraps mod ``2^32``), block after block."""
    const = np.array([0x61707865, 0x3320646E, 0x79622D32, 0x6B206574, *struct.unpack("<8I", key), 0,
                      *struct.unpack("<3I", nonce)], dtype=np.uint32)
    init = np.repeat(const[:, None], n, axis=1)
    init[12] = np.arange(counter, counter + n, dtype=np.uint64).astype(np.uint32)
    x = [init[i].copy() for i in range(16)]

    def qr(a: int, b: int, c: int, d: int) -> None:
        x[a] += x[b]
        x[d] ^= x[a]
        x[d] = (x[d] << np.uint32(16)) | (x[d] >> np.uint32(16))
        x[c] += x[d]
        x[b] ^= x[c]
        x[b] = (x[b] << np.uint32(12)) | (x[b] >> np.uint32(20))
        x[a] += x[b]
        x[d] ^= x[a]
        x[d] = (x[d] << np.uint32(8)) | (x[d] >> np.uint32(24))
        x[c] += x[d]
        x[b] ^= x[c]
        x[b] = (x[b] << np.uint32(7)) | (x[b] >> np.uint32(25))

    for _ in range(10):
        qr(0, 4, 8, 12)
        qr(1, 5, 9, 13)
        qr(2, 6, 10, 14)
        qr(3, 7, 11, 15)
        qr(0, 5, 10, 15)
        qr(1, 6, 11, 12)
        qr(2, 7, 8, 13)
        qr(3, 4, 9, 14)
    out = np.stack(x) + init  # 16 x n
    return [int(w) for w in out.T.ravel()]


class ChaCha20Source:
    """The test-only deterministic word stream of the vectors: ChaCha20 (RFC 8439) keyed by
    ``SHA-256(seed.encode("utf-8"))``, nonce 12 zero bytes, block counter 0, 1, 2, ...; the words
    are the keystream read as consecutive little-endian uint32 (block ``c``'s 16 output words, in
    order). At most :data:`MAX_BLOCKS` blocks (``2^36`` words). Never for real users: anyone who
    knows the seed string knows every word. Blocks are computed 64 at a time (the same words as
    :func:`chacha20_block`, tested)."""

    #: blocks computed per refill
    BATCH = 64

    def __init__(self, seed: str) -> None:
        if not isinstance(seed, str):
            raise LocalPrivError(f"a ChaCha20 seed is a string, got {type(seed).__name__}")
        self.key = hashlib.sha256(seed.encode("utf-8")).digest()
        self.nonce = bytes(12)
        self.counter = 0
        self._buf: list[int] = []
        self._pos = 0
        self._base = 0  # words consumed before the current buffer

    @property
    def used(self) -> int:
        """Words consumed so far."""
        return self._base + self._pos

    def u32(self) -> int:
        if self._pos == len(self._buf):
            n = min(self.BATCH, MAX_BLOCKS - self.counter)
            if n <= 0:
                raise LocalPrivError(f"ChaCha20 stream exhausted after {MAX_BLOCKS} blocks (2^36 words)")
            self._base += len(self._buf)
            self._buf = _chacha20_blocks(self.key, self.counter, self.nonce, n)
            self.counter += n
            self._pos = 0
        w = self._buf[self._pos]
        self._pos += 1
        return w


class SystemSource:
    """Words from the operating system's CSPRNG (``secrets.token_bytes``, 256 words per read):
    the source of real reports."""

    def __init__(self) -> None:
        self._buf: tuple[int, ...] = ()
        self._pos = 0

    def u32(self) -> int:
        if self._pos == len(self._buf):
            self._buf = struct.unpack("<256I", secrets.token_bytes(1024))
            self._pos = 0
        w = self._buf[self._pos]
        self._pos += 1
        return w


class ListSource:
    """Words from a list (the primitive vectors; refuses to run past its end)."""

    def __init__(self, words: list[int]) -> None:
        self.words = [int(w) & _M32 for w in words]
        self.used = 0

    def u32(self) -> int:
        if self.used >= len(self.words):
            raise LocalPrivError(f"word list of {len(self.words)} words exhausted")
        w = self.words[self.used]
        self.used += 1
        return w


# --------------------------------------------------------------------------------------------
# Primitives
# --------------------------------------------------------------------------------------------
#: an observer of bernoulli thresholds, ``(U, p)``; the vectors' generator installs one to find
#: draws that lie too close to their threshold (see :func:`bernoulli`)
_BERNOULLI_WATCH: list[Callable[[int, float], None]] = []
#: observers of the float cell coordinates ``v`` of planar Laplace (the vectors' generator checks
#: that ``v + 1/2`` keeps :data:`CELL_MARGIN` from the integers)
_POSITION_WATCH: list[Callable[[float], None]] = []


@contextmanager
def watching(on_bernoulli: Callable[[int, float], None],
             on_position: Callable[[float], None] | None = None) -> Iterator[None]:
    """Within the block, every :func:`bernoulli` draw calls ``on_bernoulli(U, p)`` and every planar
    Laplace point ``on_position(v)`` (each cell coordinate): the vectors' generator keeps the draws
    away from their thresholds with these."""
    _BERNOULLI_WATCH.append(on_bernoulli)
    if on_position is not None:
        _POSITION_WATCH.append(on_position)
    try:
        yield
    finally:
        _BERNOULLI_WATCH.remove(on_bernoulli)
        if on_position is not None:
            _POSITION_WATCH.remove(on_position)


def u32(src: WordSource) -> int:
    """One word."""
    return src.u32()


def u64(src: WordSource) -> int:
    """``lo + 2^32 hi`` from two consecutive words, ``lo`` first."""
    lo = src.u32()
    return lo + (src.u32() << 32)


def uniform_int(src: WordSource, n: int) -> int:
    """Uniform on ``0..n-1`` for ``n >= 1``, by rejection (no bias).

    With ``L = max(1, ceil(bitlength(n - 1) / 32))`` words per try (1 for ``n <= 2^32``, 2 for
    ``n <= 2^64``): ``w = w_0 + 2^32 w_1 + ... + 2^(32(L-1)) w_(L-1)`` (words in order, the first
    the lowest), tried until ``w < 2^(32L) - (2^(32L) mod n)``; returns ``w mod n``. For ``L = 2``
    a try is ``u64()``. At least one word is drawn even for ``n = 1``; expected tries below 2."""
    if n < 1 or n > _MAX_UNIFORM:
        raise LocalPrivError(f"uniform_int: n must be in 1..2^1024, got {n}")
    words = max(1, -(-(n - 1).bit_length() // 32))
    span = 1 << (32 * words)
    lim = span - span % n
    while True:
        w = 0
        for i in range(words):
            w |= src.u32() << (32 * i)
        if w < lim:
            return w % n


def bernoulli(src: WordSource, p: float) -> bool:
    """``True`` with probability ``ceil(p 2^53) / 2^53`` (``p`` a float64 in ``[0, 1]``): ``U =
    u64() >> 11`` (53 bits), ``U < p 2^53`` (an exact comparison: ``p 2^53`` is an exact float).
    Always two words. Used only for categorical choices; a 1-ulp difference of ``p`` between
    languages changes the outcome only when ``U`` lies within 1 of ``p 2^53`` (probability
    ``2^-52`` per draw), and the vectors are generated with no draw that close."""
    if not 0.0 <= p <= 1.0:
        raise LocalPrivError(f"bernoulli: p must lie in [0, 1], got {p!r}")
    U = u64(src) >> 11
    for watch in _BERNOULLI_WATCH:
        watch(U, p)
    return math.ldexp(p, 53) > U


def bernoulli_rational(src: WordSource, a: int, b: int) -> bool:
    """``True`` with probability exactly ``a / b`` (integers ``0 <= a <= b``, ``b >= 1``).

    A uniform real ``V = 0.w1 w2 ...`` (base ``2^32``, one word per digit) is compared with
    ``a / b``: digit ``d = floor(2^32 a / b)``, remainder ``a <- 2^32 a - d b``; ``w < d``:
    ``True``; ``w > d``: ``False``; ``w = d``: ``False`` if the remainder is 0, else the next
    digit. ``a = b`` is ``True`` and ``a = 0`` is ``False`` without a word."""
    if not (0 <= a <= b and b >= 1):
        raise LocalPrivError(f"bernoulli_rational: need 0 <= a <= b, b >= 1, got {a}/{b}")
    if a == b:
        return True
    while a:
        d, a = divmod(a << 32, b)
        w = src.u32()
        if w != d:
            return w < d
    return False


def bernoulli_exp(src: WordSource, a: int, b: int) -> bool:
    """``True`` with probability exactly ``exp(-a/b)`` (integers ``a >= 0``, ``b >= 1``).

    Canonne, Kamath and Steinke (2020), Algorithm 1: for ``g = a/b <= 1``, ``K = 1``; while
    ``bernoulli_rational(a, b K)``: ``K += 1``; return ``K`` odd. For ``g > 1``: ``floor(g)`` draws
    of ``exp(-1)`` (that algorithm with ``a = b = 1``), returning ``False`` at the first ``False``,
    then one of ``exp(-(a mod b)/b)``."""
    if a < 0 or b < 1:
        raise LocalPrivError(f"bernoulli_exp: need a >= 0, b >= 1, got {a}/{b}")
    whole, rest = divmod(a, b)
    for _ in range(whole):
        if not _bernoulli_exp_unit(src, 1, 1):
            return False
    return _bernoulli_exp_unit(src, rest, b)


def _bernoulli_exp_unit(src: WordSource, a: int, b: int) -> bool:
    k = 1
    while bernoulli_rational(src, a, b * k):
        k += 1
    return k % 2 == 1


def discrete_laplace(src: WordSource, a: int, b: int) -> int:
    """``Y`` with ``P(Y = y) = (1 - r)/(1 + r) r^|y|``, ``r = exp(-a/b)`` (integers ``a, b >= 1``,
    ``b <= 2^1024``): Canonne, Kamath and Steinke (2020), Algorithm 2 with ``s = a``, ``t = b``::

        loop: U = uniform_int(b); if not bernoulli_exp(U, b): continue
              V = 0; while bernoulli_exp(1, 1): V += 1
              X = U + b V; Y = X div a; B = bernoulli_rational(1, 2)
              if B and Y == 0: continue
              return -Y if B else Y
    """
    if a < 1 or not 1 <= b <= _MAX_UNIFORM:
        raise LocalPrivError(f"discrete_laplace: need a >= 1 and 1 <= b <= 2^1024, got {a}/{b}")
    while True:
        U = uniform_int(src, b)
        if not bernoulli_exp(src, U, b):
            continue
        V = 0
        while bernoulli_exp(src, 1, 1):
            V += 1
        Y = (U + b * V) // a
        neg = bernoulli_rational(src, 1, 2)
        if neg and Y == 0:
            continue
        return -Y if neg else Y


# --------------------------------------------------------------------------------------------
# Hashing: XXH64 of an 8-byte little-endian key (docs/hashing.md)
# --------------------------------------------------------------------------------------------
_M64 = (1 << 64) - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotl64(v: int, r: int) -> int:
    return ((v << r) | (v >> (64 - r))) & _M64


def xxh64_le64(key: int, seed: int) -> int:
    """XXH64 of the 8 little-endian bytes of the unsigned 64-bit ``key`` with the 64-bit ``seed``
    (Collet's specification for an 8-byte input, all arithmetic mod ``2^64``)::

        acc = seed + P5 + 8
        acc ^= rotl(key P2, 31) P1
        acc = rotl(acc, 27) P1 + P4
        acc ^= acc >> 33; acc *= P2; acc ^= acc >> 29; acc *= P3; acc ^= acc >> 32

    The same number as :func:`localpriv.mechanisms.stablehash.hash_keys` (tested)."""
    acc = (seed + _P5 + 8) & _M64
    acc ^= (_rotl64((key * _P2) & _M64, 31) * _P1) & _M64
    acc = (_rotl64(acc, 27) * _P1 + _P4) & _M64
    acc ^= acc >> 33
    acc = (acc * _P2) & _M64
    acc ^= acc >> 29
    acc = (acc * _P3) & _M64
    return acc ^ (acc >> 32)


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------
def bits_hex(bits: list[bool] | list[int]) -> str:
    """The wire form of a bit vector: bit ``y`` is bit ``7 - y mod 8`` of byte ``y div 8`` (most
    significant first, as ``numpy.packbits``), unused bits 0, bytes in lowercase hex."""
    out = bytearray((len(bits) + 7) // 8)
    for y, bit in enumerate(bits):
        if bit:
            out[y >> 3] |= 0x80 >> (y & 7)
    return out.hex()


def _grr(src: WordSource, x: int, g: int, p: float) -> int:
    """GRR on ``0..g-1``: ``bernoulli(p)`` keeps ``x``; else ``r = uniform_int(g - 1)``,
    reported as ``r + [r >= x]``."""
    if bernoulli(src, p):
        return x
    r = uniform_int(src, g - 1)
    return r + (r >= x)


# ---- the float64 parameters, by the formulas of docs/clients.md (math, not NumPy: one libm)
_EXP_MAX = 709.782712893384  # log of the largest double


def _exp(v: float) -> float:
    """``e^v`` with overflow to ``inf`` (``math.exp`` raises instead)."""
    return math.inf if v > _EXP_MAX else math.exp(v)


def _grr_p(level: float, g: int) -> float:
    """GRR's keep probability on ``g`` values: ``1 / (1 + (g - 1) exp(-level))``."""
    return 1.0 / (1.0 + (g - 1) * _exp(-level))


def _expit(logit: float) -> float:
    """``1 / (1 + exp(-logit))``."""
    return 1.0 / (1.0 + _exp(-logit))


def _log_expm1(v: float) -> float:
    """``log(e^v - 1)`` for ``v > 0``: ``v + log(-expm1(-v))`` above 1, else ``log(expm1(v))``."""
    return v + math.log(-math.expm1(-v)) if v > 1.0 else math.log(math.expm1(v))


def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    hi, lo = max(a, b), min(a, b)
    return hi + math.log1p(math.exp(lo - hi))


def grr_second(l1: float, t: float, g: int) -> float:
    """``L2(l1, t, g)``: the second level of two chained GRRs on ``g`` values whose chained level is
    ``t``: ``logaddexp(LE(t + l1), log(g - 2) + LE(t)) - t - LE(l1 - t)``, ``LE(v) = log(e^v - 1)``
    (``log(g - 2) = -inf`` for ``g = 2``)."""
    lg2 = math.log(g - 2.0) if g > 2 else -math.inf
    return _logaddexp(_log_expm1(t + l1), lg2 + _log_expm1(t)) - t - _log_expm1(l1 - t)


_UE_LOGITS: dict[str, Callable[[float], tuple[float, float]]] = {
    "sue": lambda e: (e / 2.0, -e / 2.0),
    "oue": lambda e: (0.0, -e),
}
#: the (first, second) unary rounds of the longitudinal unary encodings
_LUE_ROUNDS = {"lsue": ("sue", "sue"), "loue": ("oue", "oue"), "lsoue": ("sue", "oue"), "losue": ("oue", "sue")}


def _th(mech: Mechanism) -> dict[str, Any]:
    """The float64 parameters of ``mech``'s portable sampler (:func:`portable_parameters`), cached."""
    cached = mech.__dict__.get("_portable_th")
    if cached is None:
        cached = portable_parameters(mech)
        mech.__dict__["_portable_th"] = cached
    return cached


def _krr(mech: Mechanism, x: int, src: WordSource) -> Any:
    assert isinstance(mech, KRR)
    return _grr(src, x, mech.k, _th(mech)["p"])


def _unary(mech: Mechanism, x: int, src: WordSource) -> Any:
    assert isinstance(mech, UnaryEncoding)
    th = _th(mech)
    p, q = th["p"], th["q"]
    return bits_hex([bernoulli(src, p if y == x else q) for y in range(mech.k)])


def _local_hashing(mech: Mechanism, x: int, src: WordSource) -> Any:
    assert isinstance(mech, LocalHashing)
    s = uniform_int(src, mech.n_seeds)
    h = xxh64_le64(x, s) % mech.g
    return s * mech.g + _grr(src, h, mech.g, _th(mech)["p"])


def _subset(src: WordSource, size: int, m: int) -> list[int]:
    """A uniform ``m``-subset of ``0..size-1`` (Floyd's algorithm): for ``j = size - m .. size - 1``,
    ``t = uniform_int(j + 1)``; add ``j`` if ``t`` is already in, else ``t``. Sorted."""
    chosen: set[int] = set()
    for j in range(size - m, size):
        t = uniform_int(src, j + 1)
        chosen.add(j if t in chosen else t)
    return sorted(chosen)


def _ss(mech: Mechanism, x: int, src: WordSource) -> Any:
    assert isinstance(mech, SS)
    include = bernoulli(src, _th(mech)["p"])
    others = _subset(src, mech.k - 1, mech.omega - include)
    bits = [False] * mech.k
    for p in others:
        bits[p + (p >= x)] = True  # position p of the values other than x
    bits[x] = include
    return bits_hex(bits)


def _hr(mech: Mechanism, x: int, src: WordSource) -> Any:
    assert isinstance(mech, HadamardResponse)
    if bernoulli(src, _th(mech)["p_uniform"]):
        return uniform_int(src, mech.K)
    b = mech.width
    block, t = divmod(x, b - 1)
    t += 1
    j = uniform_int(src, b)
    if bin(t & j).count("1") % 2:  # H_b[t, j] = -1: flip t's lowest set bit in j
        j ^= t & -t
    return block * b + j


def _geometric(mech: Mechanism, x: int, src: WordSource) -> Any:
    assert isinstance(mech, Geometric)
    a, b = mech.eps.as_integer_ratio()
    z = x + discrete_laplace(src, a, b)
    if mech.lo is not None and mech.hi is not None:
        z = min(max(z, mech.lo), mech.hi) - mech.lo
    return z


def _duchi(mech: Mechanism, x: int, src: WordSource) -> Any:
    assert isinstance(mech, Duchi)
    return int(bernoulli(src, _duchi_p(mech, x)))


def _duchi_p(mech: Duchi, x: int) -> float:
    t = (2.0 * x + 1.0) / mech.k - 1.0
    return 0.5 + 0.5 * t * math.tanh(0.5 * mech.eps)


def pm_keep(mech: Piecewise) -> float:
    """The portable Piecewise's window probability ``1 / (1 + ((N - W) / W) e^-eps)`` (within a
    few ulps of the mechanism's ``T / 2^64``)."""
    N, W = mech.n_points, mech.width
    return 1.0 / (1.0 + ((N - W) / W) * _exp(-mech.eps))


def _pm(mech: Mechanism, x: int, src: WordSource) -> Any:
    assert isinstance(mech, Piecewise)
    N, W, D = mech.n_points, mech.width, mech.step
    a = (D + D % 2) // 2 + x * D
    if N == W or bernoulli(src, _th(mech)["keep"]):
        i = a + uniform_int(src, W)
    else:
        u = uniform_int(src, N - W)
        i = u if u < a else u + W
    return float(2 * i - (N - 1)) * (0.5 * mech.grid)


def categorical_bisect(src: WordSource, n: int, weight: Callable[[int, int], float]) -> int:
    """An index of ``0..n-1`` drawn with probability proportional to its weight, by bisection:
    with ``lo = 0``, ``hi = n``, while ``hi - lo > 1``: ``mid = lo + (hi - lo) div 2``, go to
    ``[lo, mid)`` if ``bernoulli(weight(lo, mid) / weight(lo, hi))``, else to ``[mid, hi)``.
    ``weight(lo, hi)`` is the (float64) weight of the indices ``lo..hi-1``, computed by a closed
    form (never by summing); ``ceil(log2 n)`` Bernoulli draws."""
    lo, hi = 0, n
    while hi - lo > 1:
        mid = lo + (hi - lo) // 2
        if bernoulli(src, min(1.0, weight(lo, mid) / weight(lo, hi))):
            hi = mid
        else:
            lo = mid
    return lo


def _sw(mech: Mechanism, x: int, src: WordSource) -> Any:
    """The bucket of Square Wave by :func:`categorical_bisect` on the channel row: the weight of
    buckets ``lo..hi-1`` is ``q (e_hi - e_lo) + (p - q) overlap``, ``e_j = -b + j (1 + 2b) / B``
    the bucket edges and ``overlap`` the length of ``[e_lo, e_hi]`` inside ``[v - b, v + b]``,
    ``v = (x + 1/2) / k``."""
    assert isinstance(mech, SquareWave)
    b, p, q, B = mech.b, mech.p, mech.q, mech.buckets
    v = (x + 0.5) / mech.k
    width = (1.0 + 2.0 * b) / B

    def weight(lo: int, hi: int) -> float:
        e_lo, e_hi = -b + lo * width, -b + hi * width
        overlap = max(0.0, min(e_hi, v + b) - max(e_lo, v - b))
        return q * (e_hi - e_lo) + (p - q) * overlap

    return categorical_bisect(src, B, weight)


def _planar_geometric(mech: Mechanism, x: int, src: WordSource) -> Any:
    """Offsets by rejection: a proposal of two independent discrete Laplace draws at the rational
    rate ``c = a / 2^32 <= eps s / sqrt(2)`` (so ``c (|di| + |dj|) <= eps s sqrt(di^2 + dj^2)``),
    accepted with ``bernoulli(exp(-(eps s sqrt(di^2 + dj^2) - c (|di| + |dj|))))`` and refused
    beyond the kernel's radius ``R``; then the cell is clamped to the grid."""
    assert isinstance(mech, PlanarGeometric)
    es = mech.eps * mech.s
    a = planar_rate(es)
    c = a / _TWO32
    R = mech.R
    while True:
        di = discrete_laplace(src, a, _TWO32)
        dj = discrete_laplace(src, a, _TWO32)
        p = min(1.0, math.exp(-(es * math.sqrt(di * di + dj * dj) - c * (abs(di) + abs(dj)))))
        if bernoulli(src, p) and abs(di) <= R and abs(dj) <= R:
            break
    nr, nc = mech.domain.nrows, mech.domain.ncols
    r, col = divmod(x, nc)
    return min(max(r + di, 0), nr - 1) * nc + min(max(col + dj, 0), nc - 1)


#: the least distance, in cells, between a vector's planar Laplace point and a cell edge
CELL_MARGIN = 2.0 ** -20
_TWO_PI = 6.283185307179586


def uniform_open(src: WordSource) -> float:
    """A float64 in ``(0, 1]``: ``((u64() >> 11) + 1) 2^-53`` (exact)."""
    lo = src.u32()
    return ((((src.u32() << 32) | lo) >> 11) + 1) * 2.0 ** -53


def _planar_laplace(mech: Mechanism, x: int, src: WordSource) -> Any:
    """Continuous planar Laplace noise, then the cell: ``r = -(log U1 + log U2) / eps``
    (``Gamma(2, 1/eps)``, ``U1``, ``U2`` by :func:`uniform_open`), angle ``2 pi U3`` with
    ``U3 = (u64() >> 11) 2^-53``; offsets ``di = floor(r sin(angle) / s + 1/2)``,
    ``dj = floor(r cos(angle) / s + 1/2)``; then clamped to the grid. The one sampler whose
    outcome depends on float functions (``log``, ``sin``, ``cos``) beyond a Bernoulli threshold:
    only the cell is released, and a difference of a few ulps moves the point across a cell edge
    only when it lies within about ``1e-12`` cells of it (decision 0050)."""
    assert isinstance(mech, PlanarLaplace)
    u1 = uniform_open(src)
    u2 = uniform_open(src)
    lo = src.u32()
    u3 = (((src.u32() << 32) | lo) >> 11) * 2.0 ** -53
    r = -(math.log(u1) + math.log(u2)) / mech.eps
    angle = _TWO_PI * u3
    vi = r * math.sin(angle) / mech.s
    vj = r * math.cos(angle) / mech.s
    for watch in _POSITION_WATCH:
        watch(vi)
        watch(vj)
    di, dj = math.floor(vi + 0.5), math.floor(vj + 0.5)
    nr, nc = mech.domain.nrows, mech.domain.ncols
    row, col = divmod(x, nc)
    return min(max(row + di, 0), nr - 1) * nc + min(max(col + dj, 0), nc - 1)


def planar_rate(es: float) -> int:
    """``a = floor(2^32 eps s / sqrt(2)) - 1`` (float64 products; at least 1): the proposal's
    rate ``a / 2^32`` of the portable planar geometric sampler, below ``eps s / sqrt(2)``."""
    if not es <= _MAX_RATE:
        raise PortableError("spec.bad_value", f"planar-geometric: eps * cell_km = {es!r} is above the portable "
                            "sampler's largest rate 2^20")
    a = math.floor(math.ldexp(es * _SQRT_HALF, 32)) - 1
    if a < 1:
        raise PortableError("spec.bad_value", f"planar-geometric: eps * cell_km = {es!r} is below the portable "
                            "sampler's least rate 2^-31")
    return a


_SQRT_HALF = 0.7071067811865476
#: the largest ``eps * cell_km`` of the portable planar geometric sampler (``a < 2^52``: exact floats)
_MAX_RATE = float(1 << 20)


# ---- memoized mechanisms: the memo is a small JSON object the caller keeps per user and value
def _memo_lgrr(mech: Mechanism, x: int, src: WordSource) -> dict[str, Any]:
    assert isinstance(mech, LGRR)
    return {"value": _grr(src, x, mech.k, _th(mech)["p1"])}


def _round_lgrr(mech: Mechanism, memo: dict[str, Any], src: WordSource) -> Any:
    assert isinstance(mech, LGRR)
    return _grr(src, _memo_int(memo, "value", mech.k), mech.k, _th(mech)["p2"])


_LUE_CLASSES = (LSUE, LOUE, LSOUE, LOSUE)
_LLH_CLASSES = (LBLH, LOLH)


def _memo_lue(mech: Mechanism, x: int, src: WordSource) -> dict[str, Any]:
    assert isinstance(mech, _LUE_CLASSES)
    p, q = _th(mech)["p1"], _th(mech)["q1"]
    return {"bits": bits_hex([bernoulli(src, p if y == x else q) for y in range(mech.k)])}


def _round_lue(mech: Mechanism, memo: dict[str, Any], src: WordSource) -> Any:
    assert isinstance(mech, _LUE_CLASSES)
    p, q = _th(mech)["p2"], _th(mech)["q2"]
    bits = _memo_bits(memo, "bits", mech.k)
    return bits_hex([bernoulli(src, p if b else q) for b in bits])


def _memo_llh(mech: Mechanism, x: int, src: WordSource) -> dict[str, Any]:
    assert isinstance(mech, _LLH_CLASSES)
    s = uniform_int(src, mech.n_seeds)
    h = xxh64_le64(x, s) % mech.g
    return {"seed": s, "value": _grr(src, h, mech.g, _th(mech)["p1"])}


def _round_llh(mech: Mechanism, memo: dict[str, Any], src: WordSource) -> Any:
    assert isinstance(mech, _LLH_CLASSES)
    s = _memo_int(memo, "seed", mech.n_seeds)
    y = _grr(src, _memo_int(memo, "value", mech.g), mech.g, _th(mech)["p2"])
    return s * mech.g + y


def _memo_rappor(mech: Mechanism, x: int, src: WordSource) -> dict[str, Any]:
    """The cohort ``c = uniform_int(cohorts)``, then per filter bit ``j = 0..m-1`` the permanent bit
    ``bernoulli(1 - f/2)`` where the Bloom filter of ``x`` in cohort ``c`` is set, else
    ``bernoulli(f/2)``."""
    assert isinstance(mech, RAPPOR)
    c = uniform_int(src, mech.cohorts)
    bloom = {xxh64_le64(x, c * mech.h + i) % mech.m for i in range(mech.h)}
    half = mech.f / 2.0
    prr = [bernoulli(src, 1.0 - half if j in bloom else half) for j in range(mech.m)]
    return {"cohort": c, "bits": bits_hex(prr)}


def _round_rappor(mech: Mechanism, memo: dict[str, Any], src: WordSource) -> Any:
    """Per bit ``j``: ``bernoulli(q)`` where the permanent bit is set, else ``bernoulli(p)``;
    reported as ``c 2^m + sum_j bit_j 2^j``, or for wide filters as the bit vector of 2 + ceil(m/8)
    bytes (cohort little-endian, then bit ``j`` at bit ``j mod 8`` of byte ``2 + j div 8``)."""
    assert isinstance(mech, RAPPOR)
    c = _memo_int(memo, "cohort", mech.cohorts)
    prr = _memo_bits(memo, "bits", mech.m)
    bits = [bernoulli(src, mech.q if b else mech.p) for b in prr]
    if not mech.wide:
        return (c << mech.m) | sum(1 << j for j, b in enumerate(bits) if b)
    out = bytearray(2 + (mech.m + 7) // 8)
    out[0], out[1] = c & 0xFF, c >> 8
    for j, b in enumerate(bits):
        if b:
            out[2 + (j >> 3)] |= 1 << (j & 7)
    return out.hex()


def _memo_int(memo: dict[str, Any], key: str, bound: int) -> int:
    v = memo.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < bound:
        raise PortableError("memo.invalid", f"memo field {key!r} must be an integer in 0..{bound - 1}")
    return v


def _memo_bits(memo: dict[str, Any], key: str, width: int) -> list[bool]:
    v = memo.get(key)
    n = (width + 7) // 8
    if not isinstance(v, str) or not re.fullmatch(f"[0-9a-f]{{{2 * n}}}", v):
        raise PortableError("memo.invalid", f"memo field {key!r} must be {2 * n} lowercase hex digits")
    raw = bytes.fromhex(v)
    bits = [bool(raw[y >> 3] & (0x80 >> (y & 7))) for y in range(8 * n)]
    if any(bits[width:]):
        raise PortableError("memo.invalid", f"memo field {key!r} has padding bits set")
    return bits[:width]


#: the memoized portable mechanisms: (draw the memo, draw one report from it), by spec name
PORTABLE_MEMOIZED: dict[str, tuple[Callable[[Mechanism, int, WordSource], dict[str, Any]],
                                   Callable[[Mechanism, dict[str, Any], WordSource], Any]]] = {
    "lgrr": (_memo_lgrr, _round_lgrr),
    "lsue": (_memo_lue, _round_lue),
    "loue": (_memo_lue, _round_lue),
    "lsoue": (_memo_lue, _round_lue),
    "losue": (_memo_lue, _round_lue),
    "lblh": (_memo_llh, _round_llh),
    "lolh": (_memo_llh, _round_llh),
    "rappor": (_memo_rappor, _round_rappor),
}


def memoize_portable(mech: Mechanism, x: int, source: WordSource) -> dict[str, Any]:
    """The permanent part of a memoized mechanism for input index ``x``, as the memo object the
    caller keeps: ``{"mechanism": canonical spec, "index": x, "memo": {...}}`` (fields per
    mechanism in ``docs/clients.md``). Drawn once per user and value."""
    pair = PORTABLE_MEMOIZED.get(mech.spec_name)
    if pair is None:
        raise PortableError("spec.unknown_mechanism", f"{mech.spec_name} is not a memoized portable mechanism")
    _check_index(mech, x)
    return {"mechanism": str(mech), "index": x, "memo": pair[0](mech, x, source)}


def _check_index(mech: Mechanism, x: object) -> None:
    if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < mech.k:
        raise PortableError("value.out_of_domain", f"input index {x!r} outside 0..{mech.k - 1}")


#: the portable sampler of each portable mechanism, by spec name
PORTABLE_SAMPLERS: dict[str, Callable[[Mechanism, int, WordSource], Any]] = {
    "krr": _krr,
    "oue": _unary,
    "sue": _unary,
    "olh": _local_hashing,
    "blh": _local_hashing,
    "ss": _ss,
    "hr": _hr,
    "geometric": _geometric,
    "duchi": _duchi,
    "pm": _pm,
    "planar-geometric": _planar_geometric,
    "sw": _sw,
    "planar-laplace": _planar_laplace,
}

def portable_parameters(mech: Mechanism) -> dict[str, Any]:
    """The parameters a client computes from the spec, by the formulas of ``docs/clients.md``
    (float64 with ``math``'s functions; structural sizes from the mechanism): what the samplers
    use, and what the vectors list beside each case (``derived``) so that a client can compare its
    intermediate values."""
    out: dict[str, Any] = {}
    name = mech.spec_name
    if isinstance(mech, KRR):
        out["p"] = _grr_p(mech.eps, mech.k)
    elif isinstance(mech, LGRR):
        eps_2 = grr_second(mech.eps_perm, mech.eps_1, mech.k)
        out.update(eps_2=eps_2, p1=_grr_p(mech.eps_perm, mech.k), p2=_grr_p(eps_2, mech.k))
    elif isinstance(mech, _LUE_CLASSES):
        first, second = _LUE_ROUNDS[name]
        lp1, lq1 = _UE_LOGITS[first](mech.eps_perm)
        lp2, lq2 = _UE_LOGITS[second](mech.eps_2)
        out.update(eps_2=mech.eps_2, p1=_expit(lp1), q1=_expit(lq1), p2=_expit(lp2), q2=_expit(lq2))
    elif isinstance(mech, _LLH_CLASSES):
        eps_2 = grr_second(mech.eps_perm, mech.eps_1, mech.g)
        out.update(g=mech.g, eps_2=eps_2, p1=_grr_p(mech.eps_perm, mech.g), p2=_grr_p(eps_2, mech.g))
    elif isinstance(mech, OUE):
        out.update(p=0.5, q=1.0 / (1.0 + _exp(mech.eps)))
    elif isinstance(mech, SUE):
        p = _expit(mech.eps / 2.0)
        out.update(p=p, q=1.0 - p if 1.0 - p >= 2.0 ** -20 else _expit(-mech.eps / 2.0))
    elif isinstance(mech, (OLH, BLH)):
        out.update(g=mech.g, p=_grr_p(mech.eps, mech.g))
    elif isinstance(mech, SS):
        out.update(omega=mech.omega, p=1.0 / (1.0 + ((mech.k - mech.omega) / mech.omega) * _exp(-mech.eps)))
    elif isinstance(mech, HadamardResponse):
        B = mech.blocks
        out.update(blocks=B, width=mech.width, K=mech.K, p_uniform=2.0 * B / (2.0 * B - 1.0 + _exp(mech.eps)))
    elif isinstance(mech, Geometric):
        a, b = mech.eps.as_integer_ratio()
        out.update(a=str(a), b=str(b))
    elif isinstance(mech, Duchi):
        out["p_plus"] = [_duchi_p(mech, x) for x in range(min(mech.k, 8))]
    elif isinstance(mech, Piecewise):
        out.update(grid=mech.grid, N=mech.n_points, W=mech.width, D=mech.step, keep=pm_keep(mech))
    elif isinstance(mech, SquareWave):
        out.update(b=mech.b, p=mech.p, q=mech.q, buckets=mech.buckets)
    elif isinstance(mech, PlanarGeometric):
        out.update(R=mech.R, a=planar_rate(mech.eps * mech.s), b=_TWO32)
    elif isinstance(mech, RAPPOR):
        out.update(prr_set=1.0 - mech.f / 2.0, prr_clear=mech.f / 2.0, wide=mech.wide)
    return out


#: registered mechanisms without a portable sampler, and why (docs/clients.md's table)
NOT_PORTABLE: dict[str, str] = {
    "ue": "general p, q: use oue or sue",
    "the": "thresholded histogram encoding: float Laplace noise per bit before the threshold",
    "she": "summation histogram encoding: float32 reports of grid Laplace noise (digit sampler)",
    "laplace": "grid-released Laplace: its digit sampler is not specified in the protocol",
    "hm": "hybrid of pm and duchi: not in protocol version 1",
    "exponential": "dense channel on arbitrary domains",
    "matrix": "a channel given as a matrix (trusted specs only)",
    "shokri": "optimal remapping solved by a linear program",
    "rrba": "one RRBA report as a dense mechanism",
    "cms": "count-mean sketch: not in protocol version 1",
    "hcms": "Hadamard count-mean sketch: not in protocol version 1",
    "spl": "multi-attribute reports: not in protocol version 1",
    "smp": "multi-attribute reports: not in protocol version 1",
    "rsfd": "multi-attribute reports: not in protocol version 1",
    "rsrfd": "multi-attribute reports: not in protocol version 1",
    "calm": "multi-attribute reports: not in protocol version 1",
    "hi": "multi-attribute reports: not in protocol version 1",
    "hio": "multi-attribute reports: not in protocol version 1",
    "hdg": "multi-attribute reports: not in protocol version 1",
}

def sample_portable(mech: Mechanism, x: int, source: WordSource, memo: dict[str, Any] | None = None) -> Any:
    """One report of ``mech`` for the input index ``x``, drawn from ``source`` by the portable
    protocol (``docs/clients.md``), in the wire format of the collector (an int, a lowercase hex
    bit vector or a float).

    Parameters
    ----------
    mech : Mechanism
        A mechanism with a portable sampler (:data:`PORTABLE_SAMPLERS`, :data:`PORTABLE_MEMOIZED`).
    x : int
        The input's domain index, ``0..k-1``.
    source : WordSource
        :class:`SystemSource` for real reports; :class:`ChaCha20Source` for tests.
    memo : dict, optional
        Memoized mechanisms only: the user's memo for ``x`` (:func:`memoize_portable`); drawn
        first, from ``source``, when left out. A memo of another mechanism or input is
        ``memo.invalid``.

    Returns
    -------
    int, str or float
        The report.
    """
    _check_index(mech, x)
    pair = PORTABLE_MEMOIZED.get(mech.spec_name)
    if pair is not None:
        if memo is None:
            memo = memoize_portable(mech, x, source)
        if not isinstance(memo, dict) or set(memo) != {"mechanism", "index", "memo"} \
                or not isinstance(memo["memo"], dict):
            raise PortableError("memo.invalid", "a memo is {\"mechanism\", \"index\", \"memo\"}")
        index = memo["index"]
        if memo["mechanism"] != str(mech) or isinstance(index, bool) or not isinstance(index, int) or index != x:
            raise PortableError("memo.invalid", f"the memo is for {str(memo['mechanism'])[:80]!r}, input "
                                f"{str(memo['index'])[:20]}, not {mech}, input {x}")
        return pair[1](mech, memo["memo"], source)
    fn = PORTABLE_SAMPLERS.get(mech.spec_name)
    if fn is None:
        raise PortableError("spec.unknown_mechanism", f"{mech.spec_name} has no portable sampler")
    if memo is not None:
        raise PortableError("memo.invalid", f"{mech.spec_name} keeps no memo")
    return fn(mech, x, source)


# --------------------------------------------------------------------------------------------
# Spec strings (the grammar clients implement) and error codes
# --------------------------------------------------------------------------------------------
#: the error codes of the protocol (every refusal of a client carries one)
ERROR_CODES = {
    "spec.syntax": "the spec does not match NAME(key=value,...)",
    "spec.unknown_mechanism": "the name is not a portable mechanism",
    "spec.unknown_key": "a key the mechanism does not take",
    "spec.duplicate_key": "a key given twice",
    "spec.missing_key": "a required key is absent (k may come from the domain)",
    "spec.bad_value": "a value of the wrong type or outside its range",
    "domain.syntax": "the domain string is not lo..hi or a label list",
    "value.out_of_domain": "an input value that is not in the domain",
    "memo.invalid": "a memo of another mechanism or input, or with bad fields",
}


class PortableError(LocalPrivError):
    """A refusal of the portable protocol, with its error ``code`` (:data:`ERROR_CODES`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


_INT = "int"
_NUM = "number"
_WORD = "word"
#: keys of each portable mechanism and their value types (the order is the canonical spec order)
PORTABLE_KEYS: dict[str, dict[str, str]] = {
    "krr": {"k": _INT, "eps": _NUM},
    "oue": {"k": _INT, "eps": _NUM},
    "sue": {"k": _INT, "eps": _NUM},
    "olh": {"k": _INT, "eps": _NUM, "n_seeds": _INT, "hash": _WORD},
    "blh": {"k": _INT, "eps": _NUM, "n_seeds": _INT, "hash": _WORD},
    "ss": {"k": _INT, "eps": _NUM, "omega": _INT},
    "hr": {"k": _INT, "eps": _NUM, "blocks": _INT},
    "geometric": {"k": _INT, "eps": _NUM, "lo": _INT, "hi": _INT},
    "duchi": {"k": _INT, "eps": _NUM},
    "pm": {"k": _INT, "eps": _NUM},
    "sw": {"k": _INT, "eps": _NUM, "buckets": _INT},
    "planar-geometric": {"eps": _NUM, "nrows": _INT, "ncols": _INT, "cell_km": _NUM, "k": _INT},
    "planar-laplace": {"eps": _NUM, "nrows": _INT, "ncols": _INT, "cell_km": _NUM, "k": _INT},
    "lgrr": {"k": _INT, "eps_perm": _NUM, "eps_1": _NUM},
    "lsue": {"k": _INT, "eps_perm": _NUM, "eps_1": _NUM},
    "loue": {"k": _INT, "eps_perm": _NUM, "eps_1": _NUM},
    "lsoue": {"k": _INT, "eps_perm": _NUM, "eps_1": _NUM},
    "losue": {"k": _INT, "eps_perm": _NUM, "eps_1": _NUM},
    "lblh": {"k": _INT, "eps_perm": _NUM, "eps_1": _NUM, "n_seeds": _INT, "hash": _WORD},
    "lolh": {"k": _INT, "eps_perm": _NUM, "eps_1": _NUM, "n_seeds": _INT, "hash": _WORD},
    "rappor": {"k": _INT, "m": _INT, "h": _INT, "cohorts": _INT, "f": _NUM, "p": _NUM, "q": _NUM, "keys": _WORD},
}
#: keys every spec of the mechanism must give (``k`` may come from the domain instead)
_REQUIRED: dict[str, tuple[str, ...]] = {name: ("k", "eps") for name in PORTABLE_KEYS}
_REQUIRED["planar-geometric"] = _REQUIRED["planar-laplace"] = ("eps", "nrows", "ncols")
for _name in ("lgrr", "lsue", "loue", "lsoue", "losue", "lblh", "lolh"):
    _REQUIRED[_name] = ("k", "eps_perm", "eps_1")
_REQUIRED["rappor"] = ("k",)

_WS = " \t\r\n"
_SPEC = re.compile(r"[ \t\r\n]*([a-z][a-z0-9-]*)[ \t\r\n]*\((.*)\)[ \t\r\n]*", re.S)
_VALUE = re.compile(r"[^ \t\r\n,()=]+")
_KEY = re.compile(r"[a-z_][a-z0-9_]*")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_NUM_RE = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _spec_fields(spec: str) -> tuple[str, dict[str, str]]:
    m = _SPEC.fullmatch(spec)
    if not m:
        raise PortableError("spec.syntax", f"cannot read {spec[:80]!r}: expected NAME(key=value,...)")
    name, body = m.group(1), m.group(2)
    pairs: list[tuple[str, str]] = []
    if body.strip(_WS):
        for part in body.split(","):
            key, eq, value = part.partition("=")
            key, value = key.strip(_WS), value.strip(_WS)
            if not eq or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value):
                raise PortableError("spec.syntax", f"cannot read argument {part.strip()[:40]!r}: expected key=value")
            pairs.append((key, value))
    if name not in PORTABLE_KEYS:
        raise PortableError("spec.unknown_mechanism", f"{name!r} is not a portable mechanism; known: "
                            f"{', '.join(sorted(PORTABLE_KEYS))}")
    fields: dict[str, str] = {}
    for key, value in pairs:
        if key not in PORTABLE_KEYS[name]:
            raise PortableError("spec.unknown_key", f"{name}: unknown key {key!r}; accepted: "
                                f"{', '.join(PORTABLE_KEYS[name])}")
        if key in fields:
            raise PortableError("spec.duplicate_key", f"{name}: {key} given twice")
        fields[key] = value
    return name, fields


def _typed(name: str, key: str, text: str) -> int | float | str:
    kind = PORTABLE_KEYS[name][key]
    if kind == _INT:
        if not _INT_RE.fullmatch(text):
            raise PortableError("spec.bad_value", f"{name}: {key} must be an integer, got {text[:40]!r}")
        return int(text)
    if kind == _NUM:
        if not _NUM_RE.fullmatch(text):
            raise PortableError("spec.bad_value", f"{name}: {key} must be a number, got {text[:40]!r}")
        v = float(text)
        if not math.isfinite(v):
            raise PortableError("spec.bad_value", f"{name}: {key} must be finite, got {text[:40]!r}")
        return v
    if not _WORD_RE.fullmatch(text):
        raise PortableError("spec.bad_value", f"{name}: {key} must be a word, got {text[:40]!r}")
    return text


def _check_ranges(name: str, v: dict[str, Any]) -> None:
    """The ranges every client checks itself; the mechanisms' own checks (``omega < k``, ``lo <
    hi``, ...) follow in :func:`localpriv.mechanisms.parse` and are ``spec.bad_value`` too."""
    for key in ("eps", "eps_perm", "eps_1", "cell_km", "f", "p", "q"):
        if key in v and not (v[key] > 0 or (key in ("f", "p", "q") and v[key] == 0)):
            raise PortableError("spec.bad_value", f"{name}: {key} must be > 0, got {v[key]!r}")
    if "k" in v and not 2 <= v["k"] <= 1_000_000_000:
        raise PortableError("spec.bad_value", f"{name}: k must be in 2..10^9, got {v['k']}")
    if "n_seeds" in v and not 1 <= v["n_seeds"] <= _TWO32:
        raise PortableError("spec.bad_value", f"{name}: n_seeds must be in 1..2^32, got {v['n_seeds']}")
    if name == "planar-geometric" and "eps" in v:
        planar_rate(v["eps"] * v.get("cell_km", 0.5))
    if "keys" in v and v["keys"] != "index":
        raise PortableError("spec.bad_value", f"{name}: keys must be index in the portable protocol, got {v['keys']!r}")
    if "hash" in v and v["hash"] != "xxh64":
        raise PortableError("spec.bad_value", f"{name}: hash must be xxh64 in the portable protocol, got {v['hash']!r}")


def parse_portable(spec: str, domain: Domain | str | None = None) -> Mechanism:
    """Read a spec string as a client does (the grammar of ``docs/clients.md``): refusals carry an
    error code (:class:`PortableError`). ``k`` left out is the domain's size; a ``k`` that differs
    from the domain's size is ``spec.bad_value``.

    Parameters
    ----------
    spec : str
        ``NAME(key=value,...)`` of a portable mechanism.
    domain : Domain or str, optional
        The input domain (``lo..hi`` or a label list), which fills ``k``.

    Returns
    -------
    Mechanism
        The mechanism, built by :func:`localpriv.mechanisms.parse` from the checked values.
    """
    if not isinstance(spec, str):
        raise PortableError("spec.syntax", f"a spec is a string, got {type(spec).__name__}")
    name, fields = _spec_fields(spec)
    values = {key: _typed(name, key, text) for key, text in fields.items()}
    dom = portable_domain(domain) if isinstance(domain, str) else domain
    if dom is not None:
        if "k" in values and values["k"] != dom.size:
            raise PortableError("spec.bad_value", f"{name}: k={values['k']} but the domain has {dom.size} values")
        values["k"] = dom.size
    missing = [key for key in _REQUIRED[name] if key not in values]
    if missing:
        raise PortableError("spec.missing_key", f"{name}: missing {', '.join(missing)}")
    _check_ranges(name, values)
    ordered = {key: values[key] for key in PORTABLE_KEYS[name] if key in values}
    text = f"{name}({','.join(f'{key}={_show(val)}' for key, val in ordered.items())})"
    try:
        return parse(text)
    except LocalPrivError as exc:
        raise PortableError("spec.bad_value", str(exc)) from None


def _show(v: int | float | str) -> str:
    return repr(v) if isinstance(v, float) else str(v)


# --------------------------------------------------------------------------------------------
# Domains clients support
# --------------------------------------------------------------------------------------------
#: the blanks removed around values, labels and domains (ASCII only, the same in every language)
_BLANKS = " \t\r\n"
#: the most labels a client's label-list domain may hold
MAX_CLIENT_LABELS = 1 << 20


def portable_domain(text: str) -> Domain:
    """The domains clients support: an integer range ``lo..hi`` (``lo <= hi``, both within
    ``+-2^53``) or a label list ``a,b,c`` (labels trimmed, distinct, non-empty, no comma). Anything
    else is ``domain.syntax``."""
    t = text.strip(_BLANKS)
    m = re.fullmatch(r"([+-]?[0-9]+)\.\.([+-]?[0-9]+)", t)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        if not (-_TWO53 <= lo <= hi <= _TWO53):
            raise PortableError("domain.syntax", f"domain {t[:60]!r}: need lo <= hi within +-2^53")
        if hi - lo + 1 > 1_000_000_000:
            raise PortableError("domain.syntax", f"domain {t[:60]!r}: more than 10^9 values")
        dom = parse_domain(t)
        assert isinstance(dom, IntegerDomain)
        return dom
    labels = [s.strip(_BLANKS) for s in t.split(",")]
    if len(labels) < 2 or any(not s for s in labels) or len(set(labels)) != len(labels) \
            or len(labels) > MAX_CLIENT_LABELS or ".." in t:
        raise PortableError("domain.syntax", f"cannot read domain {t[:60]!r}: expected lo..hi or distinct "
                            "labels a,b,c")
    return CategoricalDomain(labels)


def encode_value(domain: Domain, line: str) -> int:
    """The domain index of one input line (surrounding blanks removed): ``v - lo`` for an integer
    range (the line a decimal integer), the label's position for a label list."""
    v = line.strip(_BLANKS)
    if isinstance(domain, IntegerDomain):
        if not _INT_RE.fullmatch(v) or not domain.lo <= int(v) <= domain.hi:
            raise PortableError("value.out_of_domain", f"{v[:40]!r} is not an integer in {domain.lo}..{domain.hi}")
        return int(v) - domain.lo
    if isinstance(domain, CategoricalDomain):
        index = _label_index(domain)
        if v not in index:
            raise PortableError("value.out_of_domain", f"{v[:40]!r} is not one of the domain's labels")
        return index[v]
    raise PortableError("domain.syntax", f"domain {domain} is not a client domain")


def _label_index(domain: CategoricalDomain) -> dict[str, int]:
    cached = getattr(domain, "_portable_index", None)
    if cached is None:
        cached = {str(label): i for i, label in enumerate(domain.labels)}
        object.__setattr__(domain, "_portable_index", cached)
    return cached



# --------------------------------------------------------------------------------------------
# The client command's library function
# --------------------------------------------------------------------------------------------
#: the most input lines one run of the client command perturbs (reports are written only when
#: every line is valid, so they are held in memory)
MAX_CLIENT_LINES = 1_000_000
#: the most reports of one simulated device (:func:`perturb_devices`)
MAX_DEVICE_ROUNDS = 1_000


@dataclass
class ClientRun:
    """What :func:`perturb_lines` returns: the mechanism, one report per line and the memos."""

    mechanism: Mechanism
    reports: list[Any]
    memos: list[dict[str, Any]]


def perturb_lines(spec: str, domain: str, lines: Iterable[str], source: WordSource,
                  memos: list[dict[str, Any]] | None = None) -> ClientRun:
    """The client command's contract: one report per input line, by the portable protocol.

    Each line (its line break removed; surrounding blanks removed) is a value of ``domain``
    (:func:`encode_value`). Memoized mechanisms use the memo of ``(canonical spec, index)`` from
    ``memos`` when there is one, else draw one and add it (the caller stores them). Every line is
    checked before any report is drawn: a bad line refuses the whole input.

    Parameters
    ----------
    spec : str
        A portable spec (:func:`parse_portable`).
    domain : str
        ``lo..hi`` or a label list (:func:`portable_domain`).
    lines : iterable of str
        The values, one per line; at most :data:`MAX_CLIENT_LINES`.
    source : WordSource
        :class:`SystemSource` (real reports) or :class:`ChaCha20Source` (tests).
    memos : list of dict, optional
        Memo objects from earlier runs (:func:`memoize_portable`).

    Returns
    -------
    ClientRun
    """
    dom = portable_domain(domain)
    mech = parse_portable(spec, dom)
    idx: list[int] = []
    for number, line in enumerate(lines, 1):
        if number > MAX_CLIENT_LINES:
            raise LocalPrivError(f"more than {MAX_CLIENT_LINES:,} input lines in one run; split the input")
        try:
            idx.append(encode_value(dom, line.rstrip("\r\n")))
        except PortableError as exc:
            raise PortableError(exc.code, f"line {number}: {str(exc).partition(': ')[2]}") from None
    kept = list(memos or [])
    if mech.spec_name not in PORTABLE_MEMOIZED:
        return ClientRun(mech, [sample_portable(mech, x, source) for x in idx], kept)
    canon = str(mech)
    by_index: dict[int, dict[str, Any]] = {}
    for memo in kept:
        if isinstance(memo, dict) and memo.get("mechanism") == canon and isinstance(memo.get("index"), int):
            by_index[memo["index"]] = memo
    reports = []
    for x in idx:
        if x not in by_index:
            by_index[x] = memoize_portable(mech, x, source)
            kept.append(by_index[x])
        reports.append(sample_portable(mech, x, source, by_index[x]))
    return ClientRun(mech, reports, kept)


def perturb_devices(spec: str, domain: str, lines: Sequence[str], rounds: int, source: WordSource) -> ClientRun:
    """Many simulated devices in one run (``localpriv client --reports-per-device``, audits).

    Each line is one new device, with no memo, that reports its value ``rounds`` times through
    :func:`perturb_lines`, the function one device's run calls: its memos live for its own reports
    only. Every line is checked before any report is drawn.

    Parameters
    ----------
    spec, domain : str
        As :func:`perturb_lines`.
    lines : sequence of str
        One value per device.
    rounds : int
        Reports per device, ``1..``:data:`MAX_DEVICE_ROUNDS`; ``len(lines) * rounds`` is at most
        :data:`MAX_CLIENT_LINES`.
    source : WordSource
        Shared by the devices, one after the other.

    Returns
    -------
    ClientRun
        ``rounds`` reports per line, device after device; no memos (none outlives its device).
    """
    if not 1 <= rounds <= MAX_DEVICE_ROUNDS:
        raise LocalPrivError(f"reports per device must be an integer in 1..{MAX_DEVICE_ROUNDS:,}, got {rounds}")
    if len(lines) * rounds > MAX_CLIENT_LINES:
        raise LocalPrivError(f"{len(lines):,} devices x {rounds} reports is more than {MAX_CLIENT_LINES:,} reports "
                             "in one run; split the input")
    dom = portable_domain(domain)
    mech = parse_portable(spec, dom)
    for number, line in enumerate(lines, 1):  # every line checked before any report is drawn
        try:
            encode_value(dom, line.rstrip("\r\n"))
        except PortableError as exc:
            raise PortableError(exc.code, f"line {number}: {str(exc).partition(': ')[2]}") from None
    reports: list[Any] = []
    for line in lines:  # one device after the other: the loop is over devices, each one run of its own
        reports.extend(perturb_lines(spec, domain, [line] * rounds, source).reports)
    return ClientRun(mech, reports, [])
