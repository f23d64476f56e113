"""Array routines shared by the layers: the distinct rows of a report array and their counts."""
from __future__ import annotations

import numpy as np

__all__ = ["unique_rows"]


def _column_keys(r: np.ndarray) -> list[np.ndarray] | None:
    """Integer rows as a few uint64 keys whose lexicographic order is the rows' order: the columns
    shifted to start at 0 and packed, as many to a key as fit in 64 bits (mixed radix, first
    column most significant). ``None`` when one column alone does not fit."""
    lo = r.min(axis=0).astype(np.int64) if r.dtype.kind == "i" else np.zeros(r.shape[1], dtype=np.int64)
    hi = r.max(axis=0)
    spans = [int(h) - int(low) + 1 for h, low in zip(hi.tolist(), lo.tolist())]
    if any(s > 2 ** 63 for s in spans):
        return None
    keys: list[np.ndarray] = []
    j = 0
    while j < r.shape[1]:
        end, cap = j, 1
        while end < r.shape[1] and cap * spans[end] <= 2 ** 64:
            cap *= spans[end]
            end += 1
        key = np.zeros(r.shape[0], dtype=np.uint64)
        for c in range(j, end):  # a loop over the few columns of a key, vectorized over rows
            col = r[:, c].astype(np.int64) - lo[c] if lo[c] else r[:, c]
            key = key * np.uint64(spans[c]) + col.astype(np.uint64)
        keys.append(key)
        j = end
    return keys


def unique_rows(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``r`` in lexicographic order and how often each occurs.

    The same result as ``np.unique(r, axis=0, return_counts=True)`` (``axis=None`` for a 1-D ``r``)
    for integer, boolean and float rows. Integer and boolean rows of ``k`` columns are compared as
    ``ceil(sum_j log2(span_j) / 64)`` unsigned 64-bit keys (each column shifted to start at 0,
    the columns of a key packed in mixed radix), one key sorted by ``np.unique`` and several by
    ``np.lexsort``: ``O(n log n)`` comparisons of machine words instead of field-by-field
    comparisons of structured rows. Packed bits of ``d`` outputs (``ceil(d / 8)`` bytes) take
    ``ceil(d / 64)`` keys. Other rows (floats) go to ``np.unique``.

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
    if r.ndim != 2 or r.shape[0] == 0 or r.dtype.kind not in "uib":
        distinct, counts = np.unique(r, axis=0 if r.ndim == 2 else None, return_counts=True)
        return distinct, counts
    rows = r.view(np.uint8) if r.dtype.kind == "b" else r
    keys = _column_keys(rows) if rows.shape[1] else None
    if keys is None:
        distinct, counts = np.unique(r, axis=0, return_counts=True)
        return distinct, counts
    if len(keys) == 1:
        _, first, counts = np.unique(keys[0], return_index=True, return_counts=True)
        return r[first], counts
    order = np.lexsort(keys[::-1])  # lexsort's last key is the primary one
    sk = [k[order] for k in keys]
    new = np.ones(r.shape[0], dtype=bool)
    change = np.zeros(r.shape[0] - 1, dtype=bool)
    for k in sk:
        change |= k[1:] != k[:-1]
    new[1:] = change
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, r.shape[0]))
    return r[order[starts]], counts.astype(np.int64)
