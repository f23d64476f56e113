"""Privacy that holds for the released bits (Mironov, CCS 2012).

The unbinned linear Laplace mechanism and SHE release values on a grid of powers of two, drawn by
the exact-table discrete Laplace sampler; their computed levels include the sampler's own bound.
Tolerances: an event seen ``c0`` and ``c1`` times in ``n`` draws per input has a log-ratio with
standard error ``sqrt(1/c0 + 1/c1)`` (delta method, Poisson counts); checks allow 5 of them.
"""
import math

import numpy as np
import pytest
from scipy.stats import chisquare

from localpriv.mechanisms import parse
from localpriv.mechanisms._sampling import DiscreteLaplace, default_grid, power_of_two_grid
from localpriv.mechanisms.privacy import ldp_epsilon
from localpriv.utils.validation import LocalPrivError


def _mantissa_events(z: np.ndarray) -> dict:
    """Events on the bits of float reports: the last significand bit (and the last two) in each
    binade [2^j, 2^(j+1)) for j = -4..3, a sign bit on a zero, a value off the dyadic grid 2^-52."""
    if z.dtype == np.float64:
        bits, one = z.view(np.uint64), np.uint64(1)
    else:
        bits, one = z.view(np.uint32), np.uint32(1)
    out = {}
    mag = np.abs(z)
    for j in range(-4, 4):
        inb = (mag >= 2.0 ** j) & (mag < 2.0 ** (j + 1))
        out[f"odd last bit in [2^{j}, 2^{j + 1})"] = inb & ((bits & one) == one)
        out[f"last two bits 01 in [2^{j}, 2^{j + 1})"] = inb & ((bits & (one + one + one)) == one)
        out[f"in [2^{j}, 2^{j + 1})"] = inb  # a legitimate event, as a control
    out["negative zero"] = (z == 0) & np.signbit(z)
    out["not a multiple of 2^-52"] = z * 2.0 ** 52 != np.round(z * 2.0 ** 52)
    return out


def _assert_within_level(events0: dict, events1: dict, level: float, n0: int, n1: int):
    """Every event's log frequency ratio between two inputs lies within ``level`` plus 5 SE; an
    event seen under one input only must be rare enough under the other to be chance (5 SE of a
    Poisson count around ``e^level`` times the count seen)."""
    for name in events0:
        c0, c1 = int(events0[name].sum()), int(events1[name].sum())
        f0, f1 = c0 / n0, c1 / n1
        if c0 == 0 and c1 == 0:
            continue
        if c0 == 0 or c1 == 0:
            seen = max(c0, c1)
            assert seen <= 25, f"{name}: {c0} vs {c1}: possible under one input only"
            continue
        se = math.sqrt(1 / c0 + 1 / c1)
        assert abs(math.log(f0 / f1)) <= level + 5 * se, (name, c0, c1, level)


def test_laplace_mantissa_attack_is_gone():
    # laplace(k=2,eps=0.01): the float64 release x + rng.laplace(0, 100) (the former sampler,
    # rebuilt here as the positive control) shows "report in [0.5, 0.75) with an odd last mantissa
    # bit" about 1.8 times as often from x = 0 as from x = 1 (log-ratio ~0.6 >> 0.01); the grid
    # release (g = 1/16) never sets that bit, and no bit-level event separates the inputs beyond
    # the computed level
    n = 1_000_000
    m = parse("laplace(k=2,eps=0.01)")
    assert m.grid == 2.0 ** -4
    old = [x + np.random.default_rng(40 + x).laplace(0.0, 100.0, n) for x in (0, 1)]
    odd = [int(((z >= 0.5) & (z < 0.75) & ((z.view(np.uint64) & np.uint64(1)) == 1)).sum()) for z in old]
    assert math.log(odd[0] / odd[1]) > 10 * 0.01 + 5 * math.sqrt(1 / odd[0] + 1 / odd[1])  # 10x the level
    new = [m.sample(np.full(n, x), np.random.default_rng(50 + x)) for x in (0, 1)]
    for z in new:
        assert z.dtype == np.float64 and np.all(z / m.grid == np.round(z / m.grid))
        assert int(((z >= 0.5) & (z < 0.75) & ((z.view(np.uint64) & np.uint64(1)) == 1)).sum()) == 0
    level = m.epsilon_geo()
    assert 0.01 <= level <= 0.01 + 1e-9
    _assert_within_level(_mantissa_events(new[0]), _mantissa_events(new[1]), level, n, n)
    # grid-level events: the parity of z/g, and z/g modulo 16 (= one index unit)
    steps = [np.round(z / m.grid).astype(np.int64) for z in new]
    ev = [{f"z/g = {r} mod 16": (s % 16) == r for r in range(16)} | {"z/g odd": (s % 2) == 1} for s in steps]
    _assert_within_level(ev[0], ev[1], level, n, n)


@pytest.mark.parametrize("eps", [0.5, 4.0])
def test_she_bit_level_events(eps):
    # SHE's former float32 sampler put the noise near 0 on a 2^-18 lattice but its tail (past
    # 11 ln2 * 2/eps) at full float32 resolution: "coordinate 0 in [cut, cut + 1) off the 2^-18
    # lattice" was seen 0 times from x = 0 and 49 times from x = 1 in 2 x 10^6 reports (eps = 0.5),
    # an unbounded loss. Now every coordinate is a multiple of the grid, +0.0 is the only zero, and
    # no event on the bits of a coordinate separates x = 0 from x = 1 beyond the computed level
    n = 400_000
    m = parse(f"she(k=2,eps={eps})")
    level = m.epsilon_ldp()
    assert eps <= level <= eps + 1e-9
    z = [m.vectors(m.sample(np.full(n, x), np.random.default_rng(60 + x))).astype(np.float32) for x in (0, 1)]
    for v in z:
        assert np.all(v / m.grid == np.round(v / m.grid))
        assert not np.any((v == 0) & np.signbit(v))
    for col in (0, 1):
        _assert_within_level(_mantissa_events(z[0][:, col]), _mantissa_events(z[1][:, col]), level, n, n)
        cut = (2.0 / eps) * 11 * math.log(2)
        ev = [{"past the old tail cut": (v[:, col] >= cut) & (v[:, col] < cut + 1),
               "off the 2^-18 lattice": v[:, col] * 2.0 ** 18 != np.round(v[:, col] * 2.0 ** 18)} for v in z]
        _assert_within_level(ev[0], ev[1], level, n, n)


def test_she_reports_are_bytes_of_exact_floats():
    # the layout is unchanged: n x 4k uint8, little-endian float32; the values are the integers
    # [y = x]/g + D_y times g, exactly
    m = parse("she(k=5,eps=1.0)")
    x = np.arange(5).repeat(200)
    r = m.sample(x, np.random.default_rng(1))
    assert r.dtype == np.uint8 and r.shape == (1000, 20)
    v = r.view("<f4")
    steps = v.astype(np.float64) / m.grid
    assert np.all(steps == np.round(steps)) and np.all(np.abs(steps) <= m.CLAMP)
    assert np.array_equal(r, m.sample(x, np.random.default_rng(1)))


# ---- the sampler's law, its bound, and the mechanisms' channels ----------------------------------

@pytest.mark.parametrize("rate", [2.0 ** -10, 0.01, 0.3, 2.5, 20.0, 2.0 ** -16])
def test_discrete_laplace_excess_bounds_the_drawn_law(rate):
    # the exact law the tables draw (drawn_pmf) against the target, over a window covering the
    # table, the first tail blocks and both signs: for every pair (d, d') the log-ratio exceeds the
    # target's by at most excess(|d - d'|), and the relative error per point is ~1e-10 or less
    s = DiscreteLaplace(rate)
    top = 3 * s.B + 5
    d = np.arange(-top, top + 1)
    drawn = np.log(s.drawn_pmf(d))
    err = drawn - s.log_pmf(d)
    assert np.all(np.isfinite(drawn))
    assert np.max(np.abs(err)) < 1e-9
    assert s.osc >= 0 and s.osc < 1e-9 and abs(s.rho) < 1e-9
    rng = np.random.default_rng(int(rate * 1000) + 1)
    i = rng.integers(0, d.size, 200_000)
    j = rng.integers(0, d.size, 200_000)
    gap = err[i] - err[j]
    assert np.all(gap <= s.excess(d[i] - d[j]) + 1e-15)
    missing = 3 * np.exp(s.log_tail(top + 1))  # both tails beyond the window, with room
    assert np.exp(drawn).sum() == pytest.approx(1.0, abs=1e-12 + missing)


def test_discrete_laplace_tail_masses_and_cap():
    # P(D >= m) of the target law is the geometric sum of its pmf; a cap stops the magnitudes,
    # and the capped fraction is P(|D| >= cap) (5 SE)
    s = DiscreteLaplace(0.05)
    for mm in (1, 7, 300):
        tail = np.exp(s.log_pmf(np.arange(mm, mm + 3000))).sum()
        assert tail == pytest.approx(np.exp(s.log_tail(mm)), rel=1e-9)
    cap = s.B + 40
    d = s.signed(2_000_000, np.random.default_rng(3), cap=cap)
    assert d.dtype == np.int32 and np.abs(d).max() <= cap
    p = 2 * math.exp(-0.05 * cap) / (1 + math.exp(-0.05))
    hits = int((np.abs(d) == cap).sum())
    assert abs(hits - d.size * p) <= 5 * math.sqrt(d.size * p)


@pytest.mark.parametrize("spec", ["laplace(k=3,eps=0.7,grid=0.25)", "laplace(k=4,eps=1.5,grid=1.0)"])
def test_grid_laplace_samples_match_the_pmf(spec):
    # coarse grids (few outputs per unit) so that a chi-square test over the grid points is sharp;
    # every row of the pmf sums to 1 over the grid
    m = parse(spec)
    pts = np.arange(-int(45 / m.rate), int(45 / m.rate) + m.k * m.steps_per_unit) * m.grid
    G = m.likelihood(pts)
    np.testing.assert_allclose(G.sum(axis=1), 1.0, atol=1e-12)
    rng = np.random.default_rng(9)
    for x in range(m.k):
        z = m.sample(np.full(100_000, x), rng)
        idx = np.round((z - pts[0]) / m.grid).astype(np.int64)
        assert idx.min() >= 0 and idx.max() < pts.size
        obs = np.bincount(idx, minlength=pts.size).astype(float)
        exp = G[x] * z.size
        keep = exp >= 5
        pooled = chisquare(np.r_[obs[keep], obs[~keep].sum()], np.r_[exp[keep], exp[~keep].sum()])
        assert pooled.pvalue > 1e-4
    assert m.eps <= m.epsilon_geo() <= m.eps * (1 + 1e-9)
    assert m.epsilon_ldp() == pytest.approx(m.eps * (m.k - 1), rel=1e-9)
    # the level from the dense likelihood on a window agrees with the structural one
    dist = np.abs(np.arange(m.k)[:, None] - np.arange(m.k)[None, :]).astype(float)
    assert m.epsilon_geo(dist) == pytest.approx(m.epsilon_geo(), rel=1e-12)


def test_she_likelihood_is_the_law_of_the_reports():
    # SHE on a coarse grid (g = 1/4, lam = 1/8): the likelihood sums to 1 over all report pairs
    # (k = 2, |z/g| <= 500: the rest is below 1e-25), and each coordinate's samples match its
    # marginal (chi-square)
    m = parse("she(k=2,eps=1.0,grid=0.25)")
    steps = np.arange(-500, 501)
    zz = np.stack(np.meshgrid(steps, steps, indexing="ij"), axis=-1).reshape(-1, 2) * m.grid
    reports = zz.astype("<f4").view(np.uint8)
    G = m.likelihood(reports)
    np.testing.assert_allclose(G.sum(axis=1), 1.0, atol=1e-12)
    x = np.zeros(200_000, dtype=int)
    v = m.vectors(m.sample(x, np.random.default_rng(2)))
    marg = G[0].reshape(steps.size, steps.size)
    for col, p in ((0, marg.sum(axis=1)), (1, marg.sum(axis=0))):
        obs = np.bincount(np.round(v[:, col] / m.grid).astype(int) + 500, minlength=steps.size).astype(float)
        exp = p * x.size
        keep = exp >= 5
        assert chisquare(np.r_[obs[keep], obs[~keep].sum()], np.r_[exp[keep], exp[~keep].sum()]).pvalue > 1e-4
    # the clamped end values have the tail masses
    log_c, log_r = m._log_parts(np.array([[m.CLAMP * m.grid, 0.0]]))
    assert log_c[0] == pytest.approx(m.sampler.log_tail(m.CLAMP) + m.sampler.log_pmf(0), rel=1e-12)
    assert log_r[0, 0] == pytest.approx(m.rate * m.steps_per_unit, rel=1e-12)


def test_grid_spec_round_trip_and_validation():
    for spec in ["laplace(k=5,eps=0.3)", "laplace(k=5,eps=0.3,grid=0.125)", "she(k=4,eps=2.0)",
                 "she(k=4,eps=2.0,grid=0.5)"]:
        m = parse(spec)
        assert str(m) == spec and parse(str(m)) == m
    assert parse("laplace(k=5,eps=1.0)").grid == 2.0 ** -10
    assert parse("she(k=5,eps=1.0)").grid == 2.0 ** -9  # noise scale 2/eps
    assert default_grid(1e9, -30) == 1.0 and default_grid(1e-12, -30) == 2.0 ** -30
    assert power_of_two_grid(0.5, "g", -30) == 0.5
    for bad in ["laplace(k=5,eps=1.0,grid=0.3)", "laplace(k=5,eps=1.0,grid=2.0)",
                "laplace(k=5,eps=1.0,grid=0)",
                "laplace(k=5,eps=1.0,bins=1.0,grid=0.5)", "she(k=5,eps=1.0,grid=0.75)",
                "laplace(k=5,eps=1e-9)", "she(k=5,eps=1e-9)", "laplace(k=5,eps=100.0,grid=1.0)"]:
        with pytest.raises(LocalPrivError):
            parse(bad)
    m = parse("laplace(k=5,eps=1.0)")
    with pytest.raises(LocalPrivError, match="multiples of the grid"):
        m.likelihood(np.array([0.1]))
    she = parse("she(k=2,eps=1.0)")
    with pytest.raises(LocalPrivError, match="multiples of the grid"):
        she.likelihood(np.array([[0.1, 0.0]], dtype="<f4").view(np.uint8))


def test_unit_bins_are_drawn_exactly():
    # laplace(bins=1.0): j - x = round(N) is drawn by the table sampler with kappa = e^{eps/2};
    # its law matches the channel's interior entries (1e-9 relative, even where they are e^-97),
    # with no tail cut (numpy's float Laplace sampler never goes past 52 ln 2 / eps ~ 36.04 bins at
    # eps = 1, so bins 37..99 would be impossible from x = 0 although the channel allows them);
    # samples match the channel and the levels include the sampler's bound
    m = parse("laplace(k=100,eps=1.0,bins=1.0,lo=0,hi=99)")
    assert m.sampler is not None and m.sampler.kappa == pytest.approx(math.exp(0.5))
    M = m.channel()
    d = np.arange(1, 99)
    drawn = m.sampler.drawn_pmf(d)
    assert np.all(drawn > 0)
    np.testing.assert_allclose(drawn, M[0, 1:99], rtol=1e-9)
    assert m.sampler.drawn_pmf(0) == pytest.approx(M[50, 50], rel=1e-12)
    rng = np.random.default_rng(11)
    for x in (0, 50, 99):
        z = m.sample(np.full(60_000, x), rng)
        obs = np.bincount(z, minlength=100).astype(float)
        exp = M[x] * z.size
        keep = exp >= 5
        assert obs[~keep].sum() <= 25
        assert chisquare(np.r_[obs[keep], obs[~keep].sum()], np.r_[exp[keep], exp[~keep].sum()]).pvalue > 1e-4
    assert 1.0 <= m.epsilon_geo() <= 1.0 + 1e-9
    level = ldp_epsilon(M)  # the truncated channel's level (end bins hold the tails)
    assert level <= m.epsilon_ldp() <= level + 1e-9
    # other widths (and rates beyond the table sampler) keep numpy's sampler, documented
    assert parse("laplace(k=5,eps=0.5,bins=2.5)").sampler is None
    assert parse("laplace(k=5,eps=25.0,bins=1.0)").sampler is None
