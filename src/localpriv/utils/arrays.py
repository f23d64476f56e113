"""Array routines shared by the layers: the distinct rows of a report array and their counts."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["unique_rows"]


def _one_key(r: np.ndarray) -> np.ndarray | None:
    """Integer rows as one uint64 key each whose order is the rows' lexicographic order: the columns
    shifted to start at 0 and packed in mixed radix, first column most significant. ``None`` when
    the columns span ``2^64`` combinations or more."""
    if r.shape[1] > 64:
        return None  # wide rows (packed bits): the byte keys, without scanning the columns' ranges
    lo = r.min(axis=0).astype(np.int64) if r.dtype.kind == "i" else np.zeros(r.shape[1], dtype=np.int64)
    spans = [int(h) - int(low) + 1 for h, low in zip(r.max(axis=0).tolist(), lo.tolist())]
    if math.prod(spans) >= 2 ** 64:
        return None
    key = np.zeros(r.shape[0], dtype=np.uint64)
    for c in range(r.shape[1]):  # a loop over the few columns, vectorized over rows
        # the offset from the column's minimum, in modular uint64 arithmetic (exact: it is < 2^64)
        col = r[:, c].astype(np.uint64) - np.uint64(int(lo[c]) % 2 ** 64)
        key = key * np.uint64(spans[c]) + col
    return key


def _byte_keys(r: np.ndarray) -> np.ndarray:
    """Each integer row as one opaque key of its bytes whose byte order is the rows' lexicographic
    order: every entry as an unsigned big-endian integer (signed entries with the sign bit flipped)."""
    size = r.dtype.itemsize
    u = r.view(f"u{size}") if r.dtype.kind == "i" else r
    if r.dtype.kind == "i":
        u = u ^ np.array(1 << (8 * size - 1), dtype=f"u{size}")
    b = np.ascontiguousarray(u, dtype=f">u{size}")
    return b.view(np.dtype((np.void, size * r.shape[1]))).ravel()


def unique_rows(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``r`` in lexicographic order and how often each occurs.

    The same result as ``np.unique(r, axis=0, return_counts=True)`` (``axis=None`` for a 1-D ``r``)
    for integer, boolean and float rows, with one sort key per row instead of a structured row
    compared field by field. Integer and boolean rows whose ``k`` columns span
    ``prod_j span_j < 2^64`` values (small output spaces) are one unsigned 64-bit integer each
    (each column shifted to start at 0, packed in mixed radix, first column most significant);
    other integer rows (packed bits of many outputs) are one opaque ``k * itemsize``-byte key each,
    their entries big-endian and unsigned (sign bit flipped) so that the keys' byte order is the
    rows' order. Float rows go to ``np.unique``.

    Parameters
    ----------
    r : numpy.ndarray
        Reports, one per row (2-D), or one per entry (1-D).

    Returns
    -------
    distinct : numpy.ndarray
        The distinct rows, sorted lexicographically (first column first), of ``r``'s dtype.
    counts : numpy.ndarray
        ``int64``: how often each distinct row occurs in ``r``.
    """
    if r.ndim != 2 or r.shape[0] == 0 or r.shape[1] == 0 or r.dtype.kind not in "uib":
        distinct, counts = np.unique(r, axis=0 if r.ndim == 2 else None, return_counts=True)
        return distinct, counts
    rows = r.view(np.uint8) if r.dtype.kind == "b" else r
    key = _one_key(rows)
    if key is not None:
        _, first, counts = np.unique(key, return_index=True, return_counts=True)
        return r[first], counts
    if rows.dtype.itemsize == 1 and rows.dtype.kind == "u":  # bytes: the row's bytes are its key
        rows = np.ascontiguousarray(rows)
        distinct, counts = np.unique(rows.view(np.dtype((np.void, rows.shape[1]))).ravel(), return_counts=True)
        return distinct.view(np.uint8).reshape(-1, rows.shape[1]).view(r.dtype), counts
    _, first, counts = np.unique(_byte_keys(rows), return_index=True, return_counts=True)
    return r[first], counts
