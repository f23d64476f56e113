"""Stable, cross-language hashing: XXH64 of strings and of 64-bit keys.

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

The string hash is a compiled loop over the Arrow buffers (numba, :mod:`localpriv.mechanisms._hashkernels`,
machine code cached between processes; one pass over the bytes, no Python loop over values);
``hash_keys`` and :func:`hash_to_range` are eleven NumPy passes on small inputs and one compiled
pass from :data:`COMPILED_MIN` hashes on. Without numba (it is the optional ``fast`` group, or
``LOCALPRIV_NUMBA=0``) every hash takes its NumPy twin, the same numbers: strings are hashed by
length, all strings of one length at once (:func:`xxh64_strings_numpy`).
"""
from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike

from localpriv.utils.jit import numba_enabled
from localpriv.utils.optional import available
from localpriv.utils.validation import LocalPrivError

__all__ = ["hash_strings", "hash_keys", "to_range", "hash_to_range", "key_lanes", "hits_mod", "TEST_VECTORS", "SPEC",
           "xxh64_strings_numpy"]

#: name recorded in file metadata for reports whose meaning depends on this module's hashes
SPEC = "xxh64"

P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
P4 = np.uint64(0x85EBCA77C2B2AE63)
P5 = np.uint64(0x27D4EB2F165667C5)

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


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray | np.uint64, lane: np.ndarray) -> np.ndarray:
    acc = acc + lane * P2
    return _rotl(acc, 31) * P1


def _avalanche(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * P2
    h = h ^ (h >> np.uint64(29))
    h = h * P3
    return h ^ (h >> np.uint64(32))


def hash_keys(keys: ArrayLike, seed: ArrayLike = 0) -> np.ndarray:
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
    shape = np.broadcast_shapes(k.shape, s.shape)
    if int(np.prod(shape)) >= COMPILED_MIN and numba_enabled():  # one compiled pass, not eleven NumPy passes
        kb, sb = (np.ascontiguousarray(np.broadcast_to(a, shape)).ravel() for a in (k, s))
        out = np.empty(kb.size, dtype=np.uint64)
        _kernels().xxh64_keys(kb, sb, out)
        return out.reshape(shape)
    with np.errstate(over="ignore"):
        h = s + (P5 + np.uint64(8))
        h = h ^ _round(np.uint64(0), k)
        h = _rotl(h, 27) * P1 + P4
        return _avalanche(h)


def to_range(h: ArrayLike, m: int) -> np.ndarray:
    """``h mod m`` as int64: a 64-bit hash onto ``{0, ..., m-1}`` (bias below ``m / 2^64``)."""
    if not 1 <= int(m) <= 2 ** 62:
        raise LocalPrivError(f"to_range: m must be in 1..2^62, got {m}")
    return (np.asarray(h, dtype=np.uint64) % np.uint64(m)).astype(np.int64)


def hash_to_range(keys: ArrayLike, seed: ArrayLike, m: int) -> np.ndarray:
    """``to_range(hash_keys(keys, seed), m)`` fused in one compiled pass where the table is large
    (the ``seeds[:, None]`` x ``keys[None, :]`` table of an exact likelihood: no 64-bit
    temporaries). Same numbers as the two steps."""
    if not 1 <= int(m) <= 2 ** 62:
        raise LocalPrivError(f"to_range: m must be in 1..2^62, got {m}")
    k, s = np.asarray(keys), np.asarray(seed)
    shape = np.broadcast_shapes(k.shape, s.shape)
    if int(np.prod(shape)) < COMPILED_MIN or not numba_enabled() or k.dtype.kind not in "ui" \
            or s.dtype.kind not in "ui" \
            or (k.dtype.kind == "i" and k.size and int(k.min()) < 0) \
            or (s.dtype.kind == "i" and s.size and int(s.min()) < 0):
        return to_range(hash_keys(k, s), m)
    k, s = k.astype(np.uint64, copy=False), s.astype(np.uint64, copy=False)
    mm = np.uint64(int(m))
    if len(shape) == 2 and s.shape == (shape[0], 1) and k.shape == (1, shape[1]):
        out: np.ndarray = np.empty(shape, dtype=np.int64)
        _kernels().xxh64_outer_mod(np.ascontiguousarray(k[0]), np.ascontiguousarray(s[:, 0]), mm, out)
        return out
    kb, sb = (np.ascontiguousarray(np.broadcast_to(a, shape)).ravel() for a in (k, s))
    out = np.empty(kb.size, dtype=np.int64)
    _kernels().xxh64_keys_mod(kb, sb, mm, out)
    return out.reshape(shape)


#: below this many hashes the NumPy passes are used (no compile, no import of numba)
COMPILED_MIN = 1 << 14


def key_lanes(keys: np.ndarray) -> np.ndarray:
    """The key's part of XXH64 of 8-byte keys (for :func:`hits_mod`):
    ``round(0, key) = rotl(key * P2, 31) * P1``."""
    with np.errstate(over="ignore"):
        k = np.asarray(keys, dtype=np.uint64) * P2
        return ((k << np.uint64(31)) | (k >> np.uint64(33))) * P1


def hits_mod(seed: np.ndarray, lanes: np.ndarray, y: np.ndarray, g: int) -> np.ndarray:
    """``[H_s(key_v) = y]`` for every (report, candidate) pair, ``reports x candidates``.

    The same number as ``to_range(hash_keys(key, seed=s), g) == y`` (tested): XXH64 of 8 bytes
    ``h = seed + P5 + 8; h ^= round(0, key); h = rotl(h, 27) * P1 + P4``, then the avalanche, with
    the key's and the seed's parts computed once each and the pair's steps done in place."""
    with np.errstate(over="ignore"):
        h = np.bitwise_xor((seed + (P5 + np.uint64(8)))[:, None], lanes[None, :])
        t = h >> np.uint64(37)
        h <<= np.uint64(27)
        h |= t
        h *= P1
        h += P4
        for shift, mult in ((33, P2), (29, P3), (32, None)):  # the avalanche
            np.right_shift(h, np.uint64(shift), out=t)
            h ^= t
            if mult is not None:
                h *= mult
        np.remainder(h, np.uint64(g), out=t)
        return t == y.astype(np.uint64)[:, None]


def _kernels() -> ModuleType:
    # the compiled backend imports numba (seconds to load): loaded by name on first use only
    return importlib.import_module("localpriv.mechanisms._hashkernels")


def hash_strings(values: ArrayLike, seed: int = 0) -> np.ndarray:
    """XXH64 of each string's UTF-8 bytes with ``seed``, as uint64 (one compiled pass).

    ``values``: a sequence or array of ``str`` (or a pyarrow string array). Missing values are
    refused with their count; non-strings are refused (hash their decimal text explicitly).
    """
    if not 0 <= int(seed) < 2 ** 64:
        raise LocalPrivError(f"hash_strings: seed must be in 0..2^64-1, got {seed}")
    if not available("pyarrow"):
        offsets, data = _utf8_buffers(values)
        return _hash_buffers(offsets, data, int(seed))
    import pyarrow as pa

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
    if len(arr) == 0:
        return np.empty(0, dtype=np.uint64)
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[arr.offset: arr.offset + len(arr) + 1]
    data = (np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None
            else np.zeros(0, dtype=np.uint8))
    return _hash_buffers(offsets, data, int(seed))


def _hash_buffers(offsets: np.ndarray, data: np.ndarray, seed: int) -> np.ndarray:
    """XXH64 of the strings ``data[offsets[i]:offsets[i + 1]]``, compiled or NumPy."""
    out = np.empty(len(offsets) - 1, dtype=np.uint64)
    if not out.size:
        return out
    if numba_enabled():
        _kernels().xxh64_strings(offsets, data, np.uint64(seed), out)
    else:
        out[:] = xxh64_strings_numpy(offsets, data, seed)
    return out


def _utf8_buffers(values: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Strings -> (int64 offsets, UTF-8 bytes), as Arrow lays out a string array (without pyarrow)."""
    vals: list = values.tolist() if isinstance(values, np.ndarray) else list(values)  # type: ignore[arg-type]
    kinds = set(map(type, vals))
    if type(None) in kinds:
        missing = sum(v is None for v in vals)
        raise LocalPrivError(f"hash_strings: {missing} of {len(vals)} values are missing")
    if not all(issubclass(k, str) for k in kinds):
        other = sorted(k.__name__ for k in kinds if not issubclass(k, str))
        raise LocalPrivError(f"hash_strings: values must be strings, got {', '.join(other)}")
    encoded = list(map(str.encode, vals))
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    return offsets, np.frombuffer(b"".join(encoded), dtype=np.uint8)


#: bytes of string data hashed per NumPy pass (memory: a few times this)
STRINGS_BLOCK_BYTES = 1 << 24


def _read_le(block: np.ndarray, at: int, width: int) -> np.ndarray:
    """The little-endian unsigned ``width``-byte words at column ``at`` of an ``n x L`` byte block."""
    dtype = np.dtype("<u8") if width == 8 else np.dtype("<u4")
    return np.ascontiguousarray(block[:, at:at + width]).view(dtype).ravel().astype(np.uint64)


def _xxh64_fixed(block: np.ndarray, seed: np.uint64) -> np.ndarray:
    """XXH64 of the ``n`` rows of an ``n x L`` byte block (every string of length ``L``), vectorized
    over the rows; the loops run over the ``L`` bytes' positions (the specification's steps)."""
    n, length = block.shape
    p = 0
    with np.errstate(over="ignore"):
        if length >= 32:
            v = [np.full(n, seed + P1 + P2), np.full(n, seed + P2), np.full(n, seed), np.full(n, seed - P1)]
            while p + 32 <= length:
                v = [_round(v[i], _read_le(block, p + 8 * i, 8)) for i in range(4)]
                p += 32
            h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
            for lane in v:
                h = (h ^ _round(np.uint64(0), lane)) * P1 + P4
        else:
            h = np.full(n, seed + P5)
        h = h + np.uint64(length)
        while p + 8 <= length:
            h = h ^ _round(np.uint64(0), _read_le(block, p, 8))
            h = _rotl(h, 27) * P1 + P4
            p += 8
        if p + 4 <= length:
            h = h ^ (_read_le(block, p, 4) * P1)
            h = _rotl(h, 23) * P2 + P3
            p += 4
        while p < length:
            h = h ^ (block[:, p].astype(np.uint64) * P5)
            h = _rotl(h, 11) * P1
            p += 1
        return _avalanche(h)


def xxh64_strings_numpy(offsets: np.ndarray, data: np.ndarray, seed: int) -> np.ndarray:
    """XXH64 (Collet, xxHash specification v0.1.1) of every string of an Arrow (offsets, data)
    pair with one ``seed``, in NumPy: the strings are grouped by length and each group hashed at
    once (:func:`_xxh64_fixed`), in blocks of about :data:`STRINGS_BLOCK_BYTES` bytes; the same
    numbers as the compiled kernel and as ``xxhash.xxh64_intdigest``."""
    offsets = np.asarray(offsets, dtype=np.int64)
    data = np.asarray(data, dtype=np.uint8)
    n = offsets.size - 1
    out = np.empty(n, dtype=np.uint64)
    lengths = np.diff(offsets)
    order = np.argsort(lengths, kind="stable")
    sorted_len = lengths[order]
    cuts = np.flatnonzero(np.diff(sorted_len)) + 1
    s = np.uint64(seed)
    for group in np.split(order, cuts):
        if not group.size:
            continue
        length = int(lengths[group[0]])
        step = max(1, STRINGS_BLOCK_BYTES // max(length, 1))
        for lo in range(0, group.size, step):
            rows = group[lo:lo + step]
            block = data[offsets[rows][:, None] + np.arange(length)] if length else np.zeros((rows.size, 0), np.uint8)
            out[rows] = _xxh64_fixed(block, s)
    return out
