"""Stable, cross-language hashing: XXH64 of strings and of 64-bit keys (issue 20, item 4).

Every hash a client computes and the collector must recompute (sketch rows, Bloom-filter bits,
heavy-hitter prefixes, string keys) goes through this module, so a client written in another
language reproduces localpriv's reports from the published definition alone:

* ``hash_strings(values, seed)`` is XXH64 (Collet, xxHash specification v0.1.1) of each value's
  UTF-8 bytes with the 64-bit ``seed``: the same number as ``xxhash.xxh64_intdigest(s.encode(),
  seed)`` in Python, ``XXH64(buf, len, seed)`` in C, ``xxhash.Sum64`` (seeded variant) in Go.
* ``hash_keys(keys, seed)`` is XXH64 of the 8 little-endian bytes of each unsigned 64-bit key,
  with the 64-bit ``seed``; keys and seeds broadcast, so one call hashes every (user, seed) pair.
* ``to_range(h, m)`` maps a 64-bit hash onto ``{0, ..., m-1}`` as ``h mod m``; its bias is below
  ``m / 2^64`` (at most ``2^-34`` for ``m <= 2^30``).

Test vectors (checked by the test suite against the reference ``xxhash`` package) are in
``docs/hashing.md`` and :data:`TEST_VECTORS`.

The string hash is a compiled loop over the Arrow buffers (numba; one pass over the bytes, no
Python loop over values); ``hash_keys`` is eleven NumPy passes.
"""
from __future__ import annotations

import numpy as np

from ._validation import LocalPrivError

__all__ = ["hash_strings", "hash_keys", "to_range", "TEST_VECTORS", "SPEC"]

#: name recorded in file metadata for reports whose meaning depends on this module's hashes
SPEC = "xxh64"

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)

#: (input, seed, XXH64) triples; strings are hashed as UTF-8, ints as 8 little-endian bytes
TEST_VECTORS = (
    ("", 0, 0xEF46DB3751D8E999),
    ("a", 0, 0xD24EC4F1A98C6E5B),
    ("abc", 0, 0x44BC2CF5AD770999),
    ("localpriv", 0, 0xBC9B2A840F326CBE),
    ("Manhattan, NY", 2 ** 32 + 7, 0xB1A9DF76D03E0A3F),
    ("é中", 1, 0x520C1C60B04CC982),
    ("The quick brown fox jumps over the lazy dog", 0, 0x0B242D361FDA71BC),
    (0, 0, 0x34C96ACDCADB1BBB),
    (1, 0, 0x9F29CB17A2A49995),
    (2 ** 64 - 1, 12345, 0x839A4A94D61AB9F8),
)


def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc, lane):
    acc = acc + lane * _P2
    return _rotl(acc, 31) * _P1


def _avalanche(h):
    h = h ^ (h >> np.uint64(33))
    h = h * _P2
    h = h ^ (h >> np.uint64(29))
    h = h * _P3
    return h ^ (h >> np.uint64(32))


def hash_keys(keys, seed=0) -> np.ndarray:
    """XXH64 of each key's 8 little-endian bytes with ``seed`` (keys and seeds broadcast).

    For an 8-byte input XXH64 reduces to ``h = seed + P5 + 8``, ``h ^= round(0, key)``,
    ``h = rotl(h, 27) * P1 + P4`` and the final avalanche (all arithmetic mod ``2^64``).
    """
    k = np.asarray(keys)
    s = np.asarray(seed)
    for name, a in (("keys", k), ("seed", s)):
        if a.dtype.kind not in "ui":
            raise LocalPrivError(f"hash_keys: {name} must be integers, got dtype {a.dtype}")
        if a.dtype.kind == "i" and a.size and int(a.min()) < 0:
            raise LocalPrivError(f"hash_keys: {name} must be >= 0 (unsigned 64-bit)")
    k = k.astype(np.uint64, copy=False)
    s = s.astype(np.uint64, copy=False)
    with np.errstate(over="ignore"):
        h = s + (_P5 + np.uint64(8))
        h = h ^ _round(np.uint64(0), k)
        h = _rotl(h, 27) * _P1 + _P4
        return _avalanche(h)


def to_range(h, m: int) -> np.ndarray:
    """``h mod m`` as int64: a 64-bit hash onto ``{0, ..., m-1}`` (bias below ``m / 2^64``)."""
    if not 1 <= int(m) <= 2 ** 62:
        raise LocalPrivError(f"to_range: m must be in 1..2^62, got {m}")
    return (np.asarray(h, dtype=np.uint64) % np.uint64(m)).astype(np.int64)


_KERNEL = None


def _kernel():
    """The compiled XXH64 over Arrow (offsets, data) buffers; built on first use."""
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    import numba

    P1, P2, P3, P4, P5 = _P1, _P2, _P3, _P4, _P5
    U = np.uint64

    @numba.njit(inline="always")
    def rotl(x, r):
        return (x << U(r)) | (x >> U(64 - r))

    @numba.njit(inline="always")
    def rnd(acc, lane):
        acc = acc + lane * P2
        return rotl(acc, 31) * P1

    @numba.njit(inline="always")
    def merge(acc, v):
        acc = acc ^ rnd(U(0), v)
        return acc * P1 + P4

    @numba.njit(inline="always")
    def read64(data, i):
        v = U(0)
        for b in range(8):
            v |= U(data[i + b]) << U(8 * b)
        return v

    @numba.njit(inline="always")
    def read32(data, i):
        v = U(0)
        for b in range(4):
            v |= U(data[i + b]) << U(8 * b)
        return v

    @numba.njit(nogil=True, cache=False)
    def xxh64_all(offsets, data, seed, out):
        for j in range(out.size):
            p = np.int64(offsets[j])
            end = np.int64(offsets[j + 1])
            n = end - p
            if n >= 32:
                v1 = seed + P1 + P2
                v2 = seed + P2
                v3 = seed
                v4 = seed - P1
                limit = end - 32
                while p <= limit:
                    v1 = rnd(v1, read64(data, p))
                    v2 = rnd(v2, read64(data, p + 8))
                    v3 = rnd(v3, read64(data, p + 16))
                    v4 = rnd(v4, read64(data, p + 24))
                    p += 32
                h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)
                h = merge(h, v1)
                h = merge(h, v2)
                h = merge(h, v3)
                h = merge(h, v4)
            else:
                h = seed + P5
            h = h + U(n)
            while p + 8 <= end:
                h = h ^ rnd(U(0), read64(data, p))
                h = rotl(h, 27) * P1 + P4
                p += 8
            if p + 4 <= end:
                h = h ^ (read32(data, p) * P1)
                h = rotl(h, 23) * P2 + P3
                p += 4
            while p < end:
                h = h ^ (U(data[p]) * P5)
                h = rotl(h, 11) * P1
                p += 1
            h = h ^ (h >> U(33))
            h = h * P2
            h = h ^ (h >> U(29))
            h = h * P3
            out[j] = h ^ (h >> U(32))

    _KERNEL = xxh64_all
    return _KERNEL


def hash_strings(values, seed: int = 0) -> np.ndarray:
    """XXH64 of each string's UTF-8 bytes with ``seed``, as uint64 (one compiled pass).

    ``values``: a sequence or array of ``str`` (or a pyarrow string array). Missing values are
    refused with their count; non-strings are refused (hash their decimal text explicitly).
    """
    import pyarrow as pa

    if not 0 <= int(seed) < 2 ** 64:
        raise LocalPrivError(f"hash_strings: seed must be in 0..2^64-1, got {seed}")
    try:
        arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(
            np.asarray(values, dtype=object) if not isinstance(values, list) else values,
            type=pa.large_string())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise LocalPrivError(f"hash_strings: values must be strings ({str(exc).splitlines()[0]})") from None
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise LocalPrivError(f"hash_strings: values must be strings, got Arrow type {arr.type}")
    arr = arr.cast(pa.large_string())
    if arr.null_count:
        raise LocalPrivError(f"hash_strings: {arr.null_count} of {len(arr)} values are missing")
    out = np.empty(len(arr), dtype=np.uint64)
    if len(arr) == 0:
        return out
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[arr.offset: arr.offset + len(arr) + 1]
    data = (np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None
            else np.zeros(0, dtype=np.uint8))
    _kernel()(offsets, data, np.uint64(int(seed)), out)
    return out
