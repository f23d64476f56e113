"""unique_rows: the same distinct rows, order and counts as np.unique(axis=0) on every integer kind."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv.utils.arrays import unique_rows

DTYPES = (np.uint8, np.int8, np.int16, np.uint32, np.int64, np.uint64, np.bool_)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.sampled_from(DTYPES), st.integers(1, 300), st.integers(1, 24), st.integers(0, 2 ** 31 - 1))
def test_same_as_numpy_unique(dtype: type, n: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype) if dtype is not np.bool_ else None
    lo, hi = (0, 2) if info is None else (int(info.min), int(info.max) + 1)
    span = min(hi - lo, int(rng.choice([2, 3, 17, 2 ** 20, 2 ** 62])))
    start = [lo, hi - span, lo + (hi - lo - span) // 2][int(rng.integers(3))]  # both ends and the middle
    r = (rng.integers(0, span, (n, k), dtype=np.uint64).astype(object) + start).astype(dtype)
    r = np.concatenate([r, r[rng.integers(0, n, n // 2)]])  # repeated rows
    want_rows, want_counts = np.unique(r, axis=0, return_counts=True)
    rows, counts = unique_rows(r)
    assert rows.dtype == r.dtype and np.array_equal(rows, want_rows) and np.array_equal(counts, want_counts)


def test_extreme_values_and_other_shapes() -> None:
    big = np.array([[np.iinfo(np.int64).min, 0], [np.iinfo(np.int64).max, 1], [0, 0]] * 2, dtype=np.int64)
    for r in (big, np.array([[2 ** 64 - 1], [0], [2 ** 64 - 1]], dtype=np.uint64),
              np.array([3, 1, 3, 2]), np.array([[0.5, 1.0], [0.5, 1.0], [-1.0, 2.0]]),
              np.zeros((0, 3), dtype=np.uint8), np.zeros((4, 0), dtype=np.uint8)):
        want = np.unique(r, axis=0 if r.ndim == 2 else None, return_counts=True)
        got = unique_rows(r)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_packed_bits_many_keys() -> None:
    rng = np.random.default_rng(7)
    bits = rng.random((2000, 150)) < 0.1  # 150 outputs: 19 bytes, three 64-bit keys
    r = np.packbits(bits, axis=1)
    r = np.concatenate([r, r[:500]])
    want = np.unique(r, axis=0, return_counts=True)
    got = unique_rows(r)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
