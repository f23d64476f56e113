"""Clients in chunks: scratch memory bounded by the chunk, the exact k-RR draw
of large calls, and the same reports on the compiled and the NumPy paths.

Tolerances: a frequency estimated from ``m`` Bernoulli(``p``) draws has standard error
``sqrt(p (1 - p) / m)``; every check allows 5 of them, with fixed seeds.
"""
import tracemalloc

import numpy as np
import pytest
from randomgen import ChaCha
from scipy.stats import chisquare

from localpriv.mechanisms import parse
from localpriv.mechanisms._sampling import CLIENT_CHUNK, bernoulli_bits, grr_into
from localpriv.utils.validation import LocalPrivError


def _within(freq, p, m, z=5.0):
    return abs(freq - p) <= z * np.sqrt(p * (1 - p) / m) + 1e-12


def _extra_peak(mech, n) -> int:
    """Peak bytes NumPy allocates during ``sample`` beyond the reports themselves."""
    x = np.arange(n, dtype=np.int64) % mech.k
    tracemalloc.start()
    try:
        r = mech.sample(x, np.random.default_rng(0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - r.nbytes


@pytest.mark.parametrize("spec,n", [("krr(k=100,eps=1.0)", 1 << 18), ("oue(k=100,eps=1.0)", 1 << 16),
                                    ("the(k=100,eps=1.0)", 1 << 16), ("ss(k=100,eps=1.0)", 1 << 19),
                                    ("olh(k=100,eps=1.0)", 1 << 18), ("she(k=100,eps=1.0)", 1 << 15)])
def test_scratch_memory_is_bounded_by_the_chunk(spec, n, monkeypatch):
    # 4x the users: the extra peak may grow only by the input check's boolean temporaries
    # (base.Mechanism._check_inputs: at most 3 bytes per user); any n-sized temporary of the
    # sampler itself (8 bytes per user for an int64 one, 4k for a row) would add >= 8 * 3n.
    # One thread: with two, SHE's per-thread scratch (a constant, one chunk per thread) is
    # counted once or twice depending on whether the threads happen to overlap
    monkeypatch.setenv("LOCALPRIV_THREADS", "1")
    mech = parse(spec)
    mech.sample(np.zeros(CLIENT_CHUNK + 1, dtype=np.int64), np.random.default_rng(1))  # lazy tables, JIT
    small, large = _extra_peak(mech, n), _extra_peak(mech, 4 * n)
    assert large - small <= 3 * (3 * n) + (1 << 20), (small, large)


def _legacy_krr(mech, x, rng):
    """The k-RR sampler of earlier versions (one stream for the whole call)."""
    keep = bernoulli_bits(x.size, mech.p_keep, rng)
    small = np.int16 if mech.k <= 1 << 15 else np.int64
    other = rng.integers(0, mech.k - 1, size=x.size, dtype=small).astype(np.int64)
    other += other >= x
    np.copyto(other, x, where=keep)
    return other


def test_small_krr_calls_keep_the_earlier_stream():
    for spec in ("krr(k=100,eps=1.0)", "krr(k=40000,eps=3.0)"):
        mech = parse(spec)
        x = np.arange(CLIENT_CHUNK) % mech.k
        legacy = _legacy_krr(mech, x, np.random.default_rng(5))
        assert np.array_equal(mech.sample(x, np.random.default_rng(5)), legacy)


def test_large_krr_same_reports_compiled_or_numpy(monkeypatch):
    mech = parse("krr(k=100,eps=1.0)")
    x = np.arange(3 * CLIENT_CHUNK + 17) % 100
    a = mech.sample(x, np.random.default_rng(7))
    monkeypatch.setenv("LOCALPRIV_NUMBA", "0")
    b = mech.sample(x, np.random.default_rng(7))
    assert a.dtype == np.int64 and np.array_equal(a, b)
    assert not np.array_equal(a, mech.sample(x, np.random.default_rng(8)))


@pytest.mark.parametrize("numba,bits", [("1", "pcg64"), ("0", "pcg64"), ("1", "chacha")])
def test_large_krr_draws_its_channel(numba, bits, monkeypatch):
    # x = 2 for every user: P(z = 2) = p_keep, every other value (1 - p_keep)/(k - 1); also with
    # the cryptographic bit generator of real deployments (raw words from any bit generator)
    monkeypatch.setenv("LOCALPRIV_NUMBA", numba)
    mech = parse("krr(k=6,eps=1.0)")
    n = 400_000
    rng = np.random.default_rng(11) if bits == "pcg64" else np.random.Generator(ChaCha(seed=11, rounds=20))
    z = mech.sample(np.full(n, 2), rng)
    counts = np.bincount(z, minlength=6)
    assert _within(counts[2] / n, mech.p_keep, n)
    expected = np.full(6, mech.p_other) * n
    expected[2] = mech.p_keep * n
    assert chisquare(counts, expected).pvalue > 1e-6


@pytest.mark.parametrize("numba", ["1", "0"])
def test_grr_rejection_makes_the_replacement_uniform(numba, monkeypatch):
    # s = g - 1 = 3 * 2^30: without Lemire's rejection, r = (l s) >> 32 = floor(3 l / 4) hits the
    # multiples of 3 twice as often (P(r mod 3 = 0) = 1/2); with it, 1/3. x = 0, so z = r + 1.
    monkeypatch.setenv("LOCALPRIV_NUMBA", numba)
    g, n = 3 * (1 << 30) + 1, 3 * CLIENT_CHUNK
    out = np.empty(n, dtype=np.int64)
    grr_into(np.zeros(n, dtype=np.int64), g, 0.01, np.random.default_rng(3), out)
    lie = out != 0
    assert _within(1.0 - lie.mean(), 0.01, n)
    assert np.all(out < g)
    assert _within(((out[lie] - 1) % 3 == 0).mean(), 1 / 3, int(lie.sum()))


class _TieStream:
    """A bit generator whose first words all tie with the keep threshold, then real words."""

    def __init__(self, first):
        self._first, self._rng = first, np.random.default_rng(4)
        self.bit_generator = self

    def random_raw(self, size):
        if self._first is not None:
            out, self._first = self._first, None
            return out
        return self._rng.bit_generator.random_raw(size)


def test_grr_ties_are_refined_exactly():
    # p_keep = (t + 0.3) / 2^32: a word whose top half equals t keeps x with probability 0.3
    t, n = 123_456_789, 40_000
    p = (t + 0.3) / 2.0 ** 32
    words = (np.uint64(t) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
    out = np.empty(n, dtype=np.int64)
    grr_into(np.full(n, 4, dtype=np.int64), 10, p, _TieStream(words), out)
    assert _within((out == 4).mean(), 0.3, n)


def test_grr_into_refuses_bad_arguments():
    out = np.empty(3, dtype=np.int64)
    with pytest.raises(LocalPrivError, match="2 <= g"):
        grr_into(np.zeros(3, dtype=np.int64), 1, 0.5, np.random.default_rng(0), out)
    with pytest.raises(LocalPrivError, match=r"\[0, 1\]"):
        grr_into(np.zeros(3, dtype=np.int64), 5, 1.5, np.random.default_rng(0), out)
    with pytest.raises(LocalPrivError, match="int64 output"):
        grr_into(np.zeros(3, dtype=np.int64), 5, 0.5, np.random.default_rng(0), np.empty(4, dtype=np.int64))


def test_huge_eps_krr_always_keeps():
    mech = parse("krr(k=5,eps=800)")
    x = np.arange(CLIENT_CHUNK + 5) % 5
    assert mech.p_keep == 1.0 and np.array_equal(mech.sample(x, np.random.default_rng(0)), x)

