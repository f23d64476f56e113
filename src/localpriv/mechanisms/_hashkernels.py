"""Compiled XXH64 kernels behind :mod:`localpriv.mechanisms.stablehash` (numba; imported on first use).

Module-level functions so that numba can cache their machine code between processes
(``cache=True``: next to this file, or in numba's user-wide cache where that is read-only).
"""
from __future__ import annotations

import numba
import numpy as np
from numpy.typing import NDArray

U = np.uint64
P1 = U(0x9E3779B185EBCA87)
P2 = U(0xC2B2AE3D27D4EB4F)
P3 = U(0x165667B19E3779F9)
P4 = U(0x85EBCA77C2B2AE63)
P5 = U(0x27D4EB2F165667C5)


@numba.njit(inline="always")
def _rotl(x: np.uint64, r: int) -> np.uint64:
    return (x << U(r)) | (x >> U(64 - r))


@numba.njit(inline="always")
def _round(acc: np.uint64, lane: np.uint64) -> np.uint64:
    acc = acc + lane * P2
    return _rotl(acc, 31) * P1


@numba.njit(inline="always")
def _merge(acc: np.uint64, v: np.uint64) -> np.uint64:
    acc = acc ^ _round(U(0), v)
    return acc * P1 + P4


@numba.njit(inline="always")
def _avalanche(h: np.uint64) -> np.uint64:
    h = h ^ (h >> U(33))
    h = h * P2
    h = h ^ (h >> U(29))
    h = h * P3
    return h ^ (h >> U(32))


@numba.njit(inline="always")
def _read64(data: NDArray[np.uint8], i: int | np.int64) -> np.uint64:
    v = U(0)
    for b in range(8):
        v |= U(data[i + b]) << U(8 * b)
    return v


@numba.njit(inline="always")
def _read32(data: NDArray[np.uint8], i: int | np.int64) -> np.uint64:
    v = U(0)
    for b in range(4):
        v |= U(data[i + b]) << U(8 * b)
    return v


@numba.njit(inline="always")
def _key(key: np.uint64, seed: np.uint64) -> np.uint64:
    """XXH64 of the 8 little-endian bytes of ``key`` with ``seed``."""
    h = seed + P5 + U(8)
    h = h ^ _round(U(0), key)
    h = _rotl(h, 27) * P1 + P4
    return _avalanche(h)


@numba.njit(nogil=True, cache=True)
def xxh64_strings(offsets: NDArray[np.int64], data: NDArray[np.uint8], seed: np.uint64,
                  out: NDArray[np.uint64]) -> None:
    """XXH64 of every string of an Arrow (offsets, data) pair with one ``seed``."""
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
                v1 = _round(v1, _read64(data, p))
                v2 = _round(v2, _read64(data, p + 8))
                v3 = _round(v3, _read64(data, p + 16))
                v4 = _round(v4, _read64(data, p + 24))
                p += 32
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            h = _merge(h, v1)
            h = _merge(h, v2)
            h = _merge(h, v3)
            h = _merge(h, v4)
        else:
            h = seed + P5
        h = h + U(n)
        while p + 8 <= end:
            h = h ^ _round(U(0), _read64(data, p))
            h = _rotl(h, 27) * P1 + P4
            p += 8
        if p + 4 <= end:
            h = h ^ (_read32(data, p) * P1)
            h = _rotl(h, 23) * P2 + P3
            p += 4
        while p < end:
            h = h ^ (U(data[p]) * P5)
            h = _rotl(h, 11) * P1
            p += 1
        out[j] = _avalanche(h)


@numba.njit(nogil=True, cache=True)
def xxh64_keys(keys: NDArray[np.uint64], seeds: NDArray[np.uint64], out: NDArray[np.uint64]) -> None:
    """``out[i] = XXH64(le64(keys[i]), seeds[i])`` over equal-length 1-D arrays."""
    for i in range(out.size):
        out[i] = _key(keys[i], seeds[i])


@numba.njit(nogil=True, cache=True)
def xxh64_keys_mod(keys: NDArray[np.uint64], seeds: NDArray[np.uint64], m: np.uint64,
                   out: NDArray[np.int64]) -> None:
    """``out[i] = XXH64(le64(keys[i]), seeds[i]) mod m`` (int64) over equal-length 1-D arrays."""
    for i in range(out.size):
        out[i] = np.int64(_key(keys[i], seeds[i]) % m)


@numba.njit(nogil=True, cache=True)
def xxh64_outer_mod(keys: NDArray[np.uint64], seeds: NDArray[np.uint64], m: np.uint64,
                    out: NDArray[np.int64]) -> None:
    """``out[i, j] = XXH64(le64(keys[j]), seeds[i]) mod m``: the reports x values table."""
    for i in range(seeds.size):
        s = seeds[i]
        for j in range(keys.size):
            out[i, j] = np.int64(_key(keys[j], s) % m)
