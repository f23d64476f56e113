"""SHE's discrete Laplace sampler by independent digits (``_sampling.DigitLaplace``).

The law it draws is exact (integer alias tables, units of 2^-80); these tests check the tables
against the target law, the draws against the drawn law (chi-square, fixed seeds), the compiled
kernels against their NumPy twin (same bytes, same generator state afterwards), the PCG64 words
computed in a kernel against ``random_raw``, SHE's level against the drawn law, reproducibility
and block/chunk boundaries.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chisquare

from localpriv import LocalPrivError
from localpriv.mechanisms import _client_kernels, _sampling, parse
from localpriv.mechanisms._sampling import DigitLaplace, digit_laplace

#: rates covering the shapes of the tables: two tables (SHE's default grids: shifts (9, 8) at
#: 2^-10, (9, 7) at 4.9e-4; (9, 10) at 2^-8 takes the general kernel), three (finer grids), one table
#: with many values, one with M = 7, M = 1 with frequent overflows, the largest rate
RATES = [2.0 ** -10, 4.9e-4, 2.0 ** -8, 2.0 ** -13, 0.3, 3.0, 9.0, 20.0]


def test_kernel_shapes():
    shapes = {r: (DigitLaplace(r).J, tuple(int(v) for v in DigitLaplace(r)._shifts)) for r in RATES}
    assert shapes[2.0 ** -10] == (2, (9, 8)) and shapes[4.9e-4] == (2, (9, 7))
    assert shapes[2.0 ** -8] == (2, (9, 10)) and shapes[2.0 ** -13][0] == 3 and shapes[0.3][0] == 1


def _within(count, n, p, k=5.0):
    return abs(count - n * p) <= k * math.sqrt(n * p * (1 - p)) + 1


@pytest.mark.parametrize("rate", RATES)
def test_tables_are_the_target_law_up_to_the_computed_excess(rate):
    s = DigitLaplace(rate)
    for name, units in s._units.items():  # every table draws in units of 2^-80, all of them
        assert sum(units) == 1 << 80, name
    top = 3 * s.B + 5
    d = np.arange(-top, top + 1)
    drawn = np.log(s.drawn_pmf(d))
    target = s.log_pmf(d)
    err = drawn - target
    assert np.all(np.isfinite(drawn))
    assert np.max(np.abs(err)) < 1e-12
    assert 0 <= s.osc < 1e-12 and abs(s.rho) < 1e-12
    rng = np.random.default_rng(int(rate * 1000) + 3)
    i, j = rng.integers(0, d.size, 200_000), rng.integers(0, d.size, 200_000)
    # this check's own float64 logs are off by a few ulp of |log p|
    noise = 4e-15 + 8 * np.finfo(float).eps * (np.abs(target[i]) + np.abs(target[j]))
    assert np.all(err[i] - err[j] <= s.excess(d[i] - d[j]) + noise)
    assert np.exp(drawn).sum() == pytest.approx(1.0, abs=1e-12 + 3 * np.exp(s.log_tail(top + 1)))
    # the overflow (H >= M) has probability e^-(lam B) with lam B in [8, 24] (or lam >= 8, M = 1)
    assert 8.0 <= s.rate * s.B <= 24.0


def test_smallest_rate_tables():
    # lam = 2^-16 (the smallest accepted): three tables, K = 14 low bits, errors ~1e-14
    s = DigitLaplace(2.0 ** -16)
    assert (s.J, s.K, s.M) == (3, 14, 63)
    assert 0 <= s.osc < 1e-12 and abs(s.rho) < 1e-12
    d = np.r_[np.arange(-2000, 2000), np.arange(s.B - 5, s.B + 5), -np.arange(s.B - 5, s.B + 5)]
    assert np.max(np.abs(np.log(s.drawn_pmf(d)) - s.log_pmf(d))) < 1e-12


def _signed_chi2(d, s, n_cells=40):
    """p-value of a chi-square test of signed draws against the drawn law, in cells of about
    equal probability (the mass outside the window joins the end cells)."""
    top = int(40 / s.rate) + 2 * s.B
    grid = np.arange(-top, top + 1)
    p = s.drawn_pmf(grid)
    cdf = np.cumsum(p)
    cell = np.minimum(np.searchsorted(np.linspace(0, 1, n_cells + 1)[1:-1], cdf, side="right"), n_cells - 1)
    probs = np.bincount(cell, weights=p, minlength=n_cells)
    probs[0] += max(0.0, (1.0 - p.sum()) / 2)
    probs[-1] += max(0.0, (1.0 - p.sum()) / 2)
    obs = np.bincount(cell[np.clip(d, -top, top) + top], minlength=n_cells)
    live = probs > 0
    assert obs[~live].sum() == 0
    return chisquare(obs[live], probs[live] / probs[live].sum() * d.size).pvalue


@pytest.mark.parametrize("rate", RATES)
def test_draws_follow_the_drawn_law(rate):
    # 2^19 draws per rate (compiled path: more than 2^14 entries), fixed seed, p > 1e-3; the
    # overflowed draws (|G| >= B) are as many as the law says (5 SE), signs fair (5 SE)
    s = DigitLaplace(rate)
    n = 1 << 19
    d = s.signed(n, np.random.default_rng(int(1 / rate) % 1000 + 7))
    assert _signed_chi2(d, s) > 1e-3
    G = np.where(d < 0, -d - 1, d)
    p_over = float(s.drawn_pmf(np.arange(s.B)).sum() + s.drawn_pmf(-np.arange(1, s.B + 1)).sum())
    assert _within(int((G >= s.B).sum()), n, 1.0 - p_over)
    assert _within(int((d < 0).sum()), n, math.exp(-rate) / (1 + math.exp(-rate)))


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("kind", ["pcg64", "philox"])
def test_compiled_path_equals_numpy_twin(rate, kind, monkeypatch):
    # the same bytes from the same seed, and the generator left in the same state (the same
    # words were drawn: the block's words, one per tie, the overflows' words); several blocks
    monkeypatch.setattr(_sampling, "DIGIT_BLOCK", 1 << 13)  # several blocks, few entries
    s = DigitLaplace(rate)
    k, rows = 37, 3 * ((1 << 13) // 37) + 11
    x = np.random.default_rng(1).integers(0, k, rows)
    outs, gens = [], []
    for flag in ("1", "0"):
        monkeypatch.setenv("LOCALPRIV_NUMBA", flag)
        gen = np.random.Generator(np.random.PCG64(5) if kind == "pcg64" else np.random.Philox(5))
        out = np.empty((rows, k), dtype=np.float32)
        s.rows_into(x, 4, 0.25, 1 << 24, out, gen)
        outs.append(out)
        gens.append(gen)
    assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    assert gens[0].bit_generator.random_raw() == gens[1].bit_generator.random_raw()
    z = outs[0] / 0.25
    assert np.all(z == np.round(z)) and not np.any((outs[0] == 0) & np.signbit(outs[0]))
    z[np.arange(rows), x] -= 4
    assert _signed_chi2(z.astype(np.int64).ravel(), s) > 1e-4


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 8, 1001])
def test_pcg64_words_computed_in_a_kernel_are_random_raw(n):
    kern = _client_kernels.kernels()["pcg64_fill"]
    bg = np.random.default_rng(11 + n).bit_generator
    st0 = bg.state["state"]
    st = np.array([st0["state"] >> 64, st0["state"] & (2 ** 64 - 1), st0["inc"] >> 64,
                   st0["inc"] & (2 ** 64 - 1)], dtype=np.uint64)
    w = np.empty(n, dtype=np.uint64)
    kern(st, _client_kernels.pcg64_jump4(st0["inc"]), w)
    assert np.array_equal(w, bg.random_raw(n))
    assert (int(st[0]) << 64 | int(st[1])) == bg.state["state"]["state"]


def test_block_boundaries_do_not_change_the_draws():
    # the draws of a block depend only on the words drawn for it: two calls split at a block
    # boundary give the bytes of one call, and the rows of a chunk do not depend on later rows
    s = digit_laplace(2.0 ** -10)
    k = 100
    step = _sampling.DIGIT_BLOCK // k
    rows = 2 * step + 17
    x = np.random.default_rng(2).integers(0, k, rows)
    one = np.empty((rows, k), dtype=np.float32)
    s.rows_into(x, 512, 2.0 ** -9, 1 << 24, one, np.random.default_rng(4))
    two = np.empty_like(one)
    gen = np.random.default_rng(4)
    s.rows_into(x[:step], 512, 2.0 ** -9, 1 << 24, two[:step], gen)
    s.rows_into(x[step:], 512, 2.0 ** -9, 1 << 24, two[step:], gen)
    assert np.array_equal(one, two)
    assert not np.array_equal(one[:10], one[step:step + 10])  # the stream moved on
    m = parse("she(k=100,eps=1.0)")  # single-stream calls: a prefix of whole chunks is a prefix
    chunk = (1 << 17) // k
    y = np.random.default_rng(3).integers(0, k, 3 * chunk + 5)
    full = m.sample(y, np.random.default_rng(8))
    assert np.array_equal(m.sample(y[:chunk], np.random.default_rng(8)), full[:chunk])
    assert np.array_equal(m.sample(y, np.random.default_rng(8)), full)
    assert not np.array_equal(full, m.sample(y, np.random.default_rng(9)))


def test_she_level_is_the_level_of_the_drawn_law():
    # she on a coarse grid (g = 1/4, lam = 1/8, s = 4 steps per unit): the largest log-ratio of
    # the drawn law between x = 0 and x = 1 over a window of reports is <= epsilon_ldp, which is
    # eps plus twice the computed excess, and the target part alone would be eps
    m = parse("she(k=2,eps=1.0,grid=0.25)")
    s = m.sampler
    assert isinstance(s, DigitLaplace) and s is digit_laplace(m.rate)
    steps = m.steps_per_unit
    d = np.arange(-3 * s.B, 3 * s.B)
    lp = np.log(s.drawn_pmf(d))
    shifted = np.log(s.drawn_pmf(d - steps))  # the coordinate holding the one-hot
    loss = np.abs(lp - shifted)  # per coordinate; two coordinates change between x = 0 and 1
    assert 2 * loss.max() / 2 <= m.epsilon_ldp()
    level = m.epsilon_ldp()
    assert level == pytest.approx(m.eps + 2 * float(s.excess(steps)), abs=1e-15)
    assert m.eps <= level <= m.eps + 1e-11
    # the worst pair over two coordinates: (z_0, z_1) with z_0 carrying the one-hot for x = 0
    worst = np.max(lp - shifted) + np.max(shifted - lp)
    assert worst <= level + 1e-12


def test_overflow_chain_and_cap():
    # rate 0.05: K = 2 low bits, M = 63, B = 252; overflowed draws continue in memoryless blocks
    # and stop at the cap: G >= 292 means H >= 73, probability A^10 = e^-2 given an overflow
    s = DigitLaplace(0.05)
    assert (s.K, s.M, s.B) == (2, 63, 252)
    n = 20_000
    rng = np.random.default_rng(6)
    low = rng.integers(0, 4, n)
    D = s._overflows(np.arange(n), low, rng, 292)
    assert np.abs(D).max() <= 292
    pos = D >= 0
    assert _within(int((D[pos] == 292).sum()), int(pos.sum()), math.exp(-2.0))
    assert np.all(np.where(pos, D, -D - 1) >= s.B)


def test_bad_arguments():
    with pytest.raises(LocalPrivError):
        DigitLaplace(1e-9)
    with pytest.raises(LocalPrivError):
        DigitLaplace(25.0)
    s = digit_laplace(0.5)
    with pytest.raises(LocalPrivError):
        s.rows_into(np.zeros(2, dtype=np.int64), 0, 1.0, 1 << 24, np.empty((2, 3)), np.random.default_rng(0))
    with pytest.raises(LocalPrivError):
        s.rows_into(np.zeros(3, dtype=np.int64), 0, 1.0, 1 << 24, np.empty((2, 3), np.float32),
                    np.random.default_rng(0))
    with pytest.raises(LocalPrivError):
        s.rows_into(np.zeros(2, dtype=np.int64), 0, 1.0, 3, np.empty((2, 3), np.float32), np.random.default_rng(0))
