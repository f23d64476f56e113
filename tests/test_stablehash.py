"""The stable hash: XXH64 as published, checked against the reference package."""
import numpy as np
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv.mechanisms.stablehash import TEST_VECTORS, hash_keys, hash_strings, to_range
from localpriv.utils.validation import LocalPrivError


def _ref(value, seed):
    data = value.encode("utf-8") if isinstance(value, str) else int(value).to_bytes(8, "little")
    return xxhash.xxh64_intdigest(data, seed)


def test_published_vectors():
    for value, seed, expected in TEST_VECTORS:
        assert _ref(value, seed) == expected
        got = hash_strings([value], seed) if isinstance(value, str) else hash_keys(
            np.array([value], dtype=np.uint64), seed)
        assert int(got[0]) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=20), st.integers(0, 2 ** 64 - 1))
def test_strings_match_reference(values, seed):
    assert [int(h) for h in hash_strings(values, seed)] == [_ref(v, seed) for v in values]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2 ** 64 - 1), min_size=1, max_size=20), st.integers(0, 2 ** 64 - 1))
def test_keys_match_reference(keys, seed):
    got = hash_keys(np.array(keys, dtype=np.uint64), np.uint64(seed))
    assert [int(h) for h in got] == [_ref(k, seed) for k in keys]


def test_keys_and_seeds_broadcast():
    keys = np.arange(5, dtype=np.uint64)
    seeds = np.array([3, 9], dtype=np.uint64)
    table = hash_keys(keys[None, :], seeds[:, None])
    assert table.shape == (2, 5)
    assert int(table[1, 4]) == _ref(4, 9)


def test_sliced_and_chunked_arrow_input():
    arr = pa.chunked_array([["ab", "cd"], ["efg", "h", "ijkl"]]).combine_chunks().slice(1, 3)
    assert [int(h) for h in hash_strings(arr, 5)] == [_ref(v, 5) for v in ["cd", "efg", "h"]]


def test_refusals():
    with pytest.raises(LocalPrivError, match="1 of 3 values are missing"):
        hash_strings(["a", None, "b"])
    with pytest.raises(LocalPrivError, match="must be strings"):
        hash_strings([1, 2])
    with pytest.raises(LocalPrivError, match=">= 0"):
        hash_keys(np.array([-1]))
    with pytest.raises(LocalPrivError, match="m must be"):
        to_range(np.zeros(2, dtype=np.uint64), 0)


def test_to_range_is_near_uniform():
    h = hash_keys(np.arange(200_000, dtype=np.uint64), 11)
    counts = np.bincount(to_range(h, 10), minlength=10)
    # multinomial sd of each count: sqrt(2e5 * 0.1 * 0.9) = 134; 6 sd
    assert np.all(np.abs(counts - 20_000) < 6 * 134)


def test_compiled_and_numpy_paths_agree():
    from localpriv.mechanisms import stablehash
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 2 ** 63, size=5000, dtype=np.int64).astype(np.uint64)
    seeds = rng.integers(0, 2 ** 63, size=40, dtype=np.int64).astype(np.uint64)
    big = hash_keys(keys[None, :], seeds[:, None])             # 200,000 hashes: compiled
    assert big.size >= stablehash.COMPILED_MIN
    for i in (0, 17, 39):                                      # 5,000 hashes: NumPy passes
        assert np.array_equal(big[i], hash_keys(keys, seeds[i]))
    assert int(big[5, 7]) == _ref(int(keys[7]), int(seeds[5]))
    for m in (2, 7, 2 ** 30 + 3):
        fused = stablehash.hash_to_range(keys[None, :], seeds[:, None], m)
        assert fused.dtype == np.int64 and np.array_equal(fused, to_range(big, m))
        flat = stablehash.hash_to_range(np.tile(keys, 4), np.repeat(seeds[:4], 5000), m)
        assert np.array_equal(flat, to_range(big[:4].ravel(), m))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=90), max_size=25), st.integers(0, 2 ** 64 - 1))
def test_strings_numpy_twin_matches_reference(values, seed):
    """Without numba (the optional fast group) strings are hashed by length in NumPy: the same numbers."""
    from localpriv.mechanisms.stablehash import xxh64_strings_numpy
    arr = pa.array(values, pa.large_string())
    _, off, data = arr.buffers()
    offsets = np.frombuffer(off, dtype=np.int64)[: len(arr) + 1]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    assert [int(h) for h in xxh64_strings_numpy(offsets, raw, seed)] == [_ref(v, seed) for v in values]


def test_without_numba_every_path_is_numpy(monkeypatch):
    from localpriv.mechanisms import stablehash
    monkeypatch.setenv("LOCALPRIV_NUMBA", "0")
    monkeypatch.setattr(stablehash, "_kernels", lambda: pytest.fail("compiled kernels loaded"))
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2 ** 63, size=(1, 3000), dtype=np.int64).astype(np.uint64)
    seeds = rng.integers(0, 2 ** 63, size=(8, 1), dtype=np.int64).astype(np.uint64)
    big = hash_keys(keys, seeds)                                # 24,000 >= COMPILED_MIN hashes
    assert big.size >= stablehash.COMPILED_MIN and int(big[3, 9]) == _ref(int(keys[0, 9]), int(seeds[3, 0]))
    assert np.array_equal(stablehash.hash_to_range(keys, seeds, 97), to_range(big, 97))
    words = ["localpriv", "", "é中" * 20, "Manhattan, NY"] * 10
    assert [int(h) for h in hash_strings(words, 11)] == [_ref(w, 11) for w in words]
