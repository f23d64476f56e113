"""Numeric mechanisms: sw, pm, hm, duchi against their papers' formulas.

Every formula is re-derived here from the papers independently of the modules (densities, widths,
variances), samplers are audited against them by chi-square at fixed seeds (Bonferroni, level
1e-6), and unbiasedness is checked with tolerances of 5 standard errors from the variance formulas.
"""
import math

import numpy as np
import pytest
from scipy import stats

from localpriv import datasets, estimate, numeric
from localpriv.data.observations import Observations
from localpriv.domains import IntervalDomain
from localpriv.mechanisms import parse
from localpriv.mechanisms.hybrid import HM_EPS_STAR
from localpriv.utils.validation import LocalPrivError

ALPHA = 1e-6


def centres(k):
    return -1.0 + (2.0 * np.arange(k) + 1.0) / k


def pm_paper(eps):
    """Wang et al. (ICDE 2019), Algorithm 2: C, p (window density), the window of t."""
    s = math.exp(eps / 2)
    C = (s + 1) / (s - 1)
    p = (math.exp(eps) - s) / (2 * s + 2)
    window = lambda t: ((C + 1) / 2 * t - (C - 1) / 2, (C + 1) / 2 * t + (C - 1) / 2)  # noqa: E731
    return C, p, window


def interval_masses(edges, p_in, p_out, lo, hi):
    """Mass of each bin [edges_j, edges_j+1) under density p_in on [lo, hi] and p_out elsewhere."""
    a, b = edges[:-1], edges[1:]
    inside = np.clip(np.minimum(b, hi) - np.maximum(a, lo), 0, None)
    return p_out * (b - a) + (p_in - p_out) * inside


def chi2_p(counts, expected):
    keep = expected > 0
    assert counts[~keep].sum() == 0
    return stats.chisquare(counts[keep], expected[keep] * counts.sum() / expected[keep].sum()).pvalue


# ---- Piecewise: the grid law, its audit against the paper's density, and privacy ---------------
def pm_grid_pmf(mech, x):
    """The discrete Piecewise law re-derived from its integers: every grid point, ``q / W`` in the
    window of cell ``x`` (``a_x = (D + D mod 2)/2 + x D``), ``(1 - q)/(N - W)`` elsewhere."""
    N, W, D = mech.n_points, mech.width, mech.step
    q = mech.keep_threshold / 2 ** 64
    a = (D + D % 2) // 2 + x * D
    i = np.arange(N)
    z = (2 * i - (N - 1)) * (mech.grid / 2)
    inside = (i >= a) & (i < a + W)
    return z, np.where(inside, q / W, (1 - q) / (N - W))


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_pm_reports_follow_the_grid_law_close_to_the_papers_density(eps):
    # (the float reports of the former client had the paper's density but leaked the input through
    # their low bits; the grid law is exact, and within the grid's resolution of the density)
    k, n = 4, 100_000
    mech = parse(f"pm(k={k},eps={eps})")
    C, p, window = pm_paper(eps)
    g = mech.grid
    assert pytest.approx(C, rel=1e-12) == mech.C
    assert g <= min(C - 1, (C + 1) / k) / 1024 and math.log2(g) == int(math.log2(g))
    assert mech.z_max == pytest.approx(C, abs=2 * g)
    assert mech.p_in / g == pytest.approx(p, rel=4 * g / (C - 1) + 4 * g * k / (C + 1))
    edges = np.linspace(-mech.z_max, mech.z_max + 1e-9, 41)
    masses = []
    rng = np.random.default_rng(11)
    pvals = []
    for x, t in enumerate(centres(k)):
        z = mech.sample(np.full(n, x), rng)
        assert np.all(np.abs(z) <= mech.z_max)
        assert np.all((z / g * 2) % 1 == 0)  # grid points (multiples of g/2; of g when N is odd)
        zg, pmf = pm_grid_pmf(mech, x)
        assert pmf.sum() == pytest.approx(1.0, rel=1e-12)
        # the paper's window, to the grid's resolution
        lo, hi = window(t)
        inside = zg[pmf == pmf.max()]
        assert inside.min() == pytest.approx(lo, abs=k * g) and inside.max() == pytest.approx(hi, abs=k * g)
        m = np.histogram(zg, bins=edges, weights=pmf)[0]
        masses.append(m)
        pvals.append(chi2_p(np.histogram(z, bins=edges)[0], m))
        assert z.mean() == pytest.approx(mech.mean_factor * t, abs=5 * math.sqrt(mech.report_variance(t) / n))
        assert float(np.sum(zg * pmf)) == pytest.approx(mech.mean_factor * t, abs=1e-9 * C)
    assert min(pvals) * k > ALPHA
    # privacy: the ratio of the two grid-point probabilities, computed from the integers
    T, N, W = mech.keep_threshold, mech.n_points, mech.width
    level = math.log(T * (N - W) / ((2 ** 64 - T) * W))
    assert mech.epsilon_ldp() == pytest.approx(level, rel=1e-9) and mech.epsilon_ldp() <= eps * (1 + 1e-12)
    assert mech.epsilon_ldp() == pytest.approx(eps, rel=1e-9)
    masses = np.array(masses)
    assert np.max(np.log(masses.max(axis=0) / masses.min(axis=0))) <= eps + 1e-9  # (sums of bins: rounding)


def test_pm_refuses_reports_off_its_grid():
    mech = parse("pm(k=4,eps=1.0)")
    z = mech.sample(np.arange(4), np.random.default_rng(0))
    mech.likelihood(z)
    with pytest.raises(LocalPrivError, match="points of its grid"):
        mech.likelihood(z + mech.grid / 8)
    with pytest.raises(LocalPrivError, match="above 2\\^52.*eps <= 56"):
        parse("pm(k=4,eps=60.0)")


# ---- Hybrid: atoms plus Piecewise, the mixture weight -------------------------------------------
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_hm_reports_follow_the_mixture(eps):
    k, n = 4, 100_000
    mech = parse(f"hm(k={k},eps={eps})")
    assert pytest.approx(0.61, abs=0.005) == HM_EPS_STAR
    alpha = 1 - math.exp(-eps / 2) if eps > HM_EPS_STAR else 0.0
    assert mech.alpha == pytest.approx(alpha, rel=1e-12)
    B = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    rng = np.random.default_rng(12)
    pvals = []
    for x, t in enumerate(centres(k)):
        z = mech.sample(np.full(n, x), rng)
        atom = np.abs(z) == mech.duchi.B
        assert pytest.approx(B, rel=1e-12) == mech.duchi.B
        plus = 0.5 + t * (math.exp(eps) - 1) / (2 * (math.exp(eps) + 1))
        if alpha > 0:
            edges = np.linspace(-mech.pm.z_max, mech.pm.z_max + 1e-9, 31)
            zg, pmf = pm_grid_pmf(mech.pm, x)
            assert not np.any(np.abs(zg) == B)  # the atoms are off the grid
            cont = alpha * np.histogram(zg, bins=edges, weights=pmf)[0]
            hist = np.histogram(z[~atom], bins=edges)[0]
        else:
            cont, hist = np.zeros(0), np.zeros(0, int)
            assert atom.all()
        expected = np.r_[(1 - alpha) * (1 - plus), (1 - alpha) * plus, cont]
        counts = np.r_[np.sum(z == -mech.duchi.B), np.sum(z == mech.duchi.B), hist]
        pvals.append(chi2_p(counts, expected))
        u = mech.unbiased(z)
        assert u.mean() == pytest.approx(t, abs=5 * math.sqrt(mech.report_variance(t) / n))
    assert min(pvals) * k > ALPHA
    assert mech.epsilon_ldp() <= eps * (1 + 1e-12)
    if alpha > 0:
        assert mech.epsilon_ldp() == pytest.approx(eps, rel=1e-9)


# ---- Duchi et al.: the channel, its level, and the level for t = +-1 ---------------------------
def test_duchi_channel_and_level():
    eps = 1.0
    for k in (2, 5, 10_000):
        mech = parse(f"duchi(k={k},eps={eps})")
        t = centres(k)
        plus = 0.5 + t * (math.exp(eps) - 1) / (2 * (math.exp(eps) + 1))
        assert np.allclose(mech.channel(), np.column_stack([1 - plus, plus]), rtol=1e-13, atol=0)
        level = math.log(plus[-1] / plus[0])  # the extreme centres, both columns by symmetry
        assert mech.epsilon_ldp() == pytest.approx(level, rel=1e-12)
        assert mech.epsilon_ldp() < eps
    assert mech.epsilon_ldp() == pytest.approx(eps, abs=1e-3)  # centres +-(1 - 1/k) -> +-1


# ---- classic mean estimators: unbiased, with the papers' variances ------------------------------
@pytest.mark.parametrize("spec", ["pm(k=16,eps=1.0)", "hm(k=16,eps=1.0)", "hm(k=16,eps=0.4)", "duchi(k=16,eps=1.0)"])
def test_mean_estimators_are_unbiased_with_the_variance_formula(spec):
    mech = parse(spec)
    rng = np.random.default_rng(13)
    theta = np.linspace(1, 3, 16) ** 2
    x = rng.choice(16, size=200_000, p=theta / theta.sum())
    t = centres(16)[x]
    z = mech.sample(x, rng)
    sd = math.sqrt(np.mean(mech.report_variance(t)) / x.size)
    iv = mech.estimate_mean(z)
    assert abs(iv.value - t.mean()) < 5 * sd
    # the interval's half-width is z_0.975 s / sqrt(n), s^2 the reports' sample variance, which
    # estimates E[Var(z | t)] + Var(t) (the formula's noise plus the users' own spread)
    total = math.sqrt((np.mean(mech.report_variance(t)) + t.var()) / x.size)
    assert (iv.upper - iv.lower) / 2 == pytest.approx(1.959964 * total, rel=0.02)
    # the per-report variance formula at fixed t: sample variance within 5 of its standard errors
    for xv in (0, 7, 15):
        zt = mech.unbiased(mech.sample(np.full(100_000, xv), rng))
        s2 = zt.var(ddof=1)
        m4 = np.mean((zt - zt.mean()) ** 4)
        assert s2 == pytest.approx(float(mech.report_variance(centres(16)[xv])),
                                   abs=5 * math.sqrt((m4 - s2 ** 2) / zt.size))


def test_mean_in_domain_units_on_adult_ages():
    """Real data: the 48,842 Adult ages on 2-year cells centred on odd/even pairs; the unbiased means
    of pm/hm/duchi at eps = 1 lie within 5 standard errors (formula) of the cells' true mean."""
    dom = IntervalDomain(16.5, 90.5, 37)
    ages = datasets.adult_ages()
    x = dom.encode(ages)
    truth = dom.decode(x).mean()
    for spec in ("pm(eps=1.0)", "hm(eps=1.0)", "duchi(eps=1.0)"):
        mech = parse(spec, dom)
        z = mech.sample(x, np.random.default_rng(14))
        iv = mech.estimate_mean(z, dom)
        sd_t = math.sqrt(np.mean(mech.report_variance(centres(dom.size)[x])) / x.size)
        sd = sd_t * (dom.hi - dom.lo) / 2  # t in [-1, 1] -> ages
        assert abs(iv.value - truth) < 5 * sd
        assert iv.lower < iv.value < iv.upper


# ---- Square Wave: the bucketized channel against the continuous mechanism -----------------------
def sw_paper(eps):
    """Li et al. (SIGMOD 2020), section 4: b, p, q, straight from the paper's expressions."""
    e = math.exp(eps)
    b = (eps * e - e + 1) / (2 * e * (e - 1 - eps))
    return b, e / (2 * b * e + 1), 1 / (2 * b * e + 1)


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_sw_width_and_densities(eps):
    b, p, q = sw_paper(eps)
    mech = parse(f"sw(k=4,eps={eps},buckets=12)")
    assert mech.b == pytest.approx(b, rel=1e-9) and mech.p == pytest.approx(p, rel=1e-9)
    assert 2 * b * mech.p + mech.q == pytest.approx(1.0, rel=1e-12)


def test_sw_channel_is_the_bucketized_continuous_mechanism():
    """An independent continuous Square Wave sampler (window w.p. 2bp, else the rest of [-b, 1+b]),
    bucketized, follows the channel's rows (chi-square per input)."""
    eps, k, buckets, n = 1.0, 4, 10, 100_000
    b, p, q = sw_paper(eps)
    mech = parse(f"sw(k={k},eps={eps},buckets={buckets})")
    M = mech.channel()
    edges = np.linspace(-b, 1 + b, buckets + 1)
    rng = np.random.default_rng(15)
    pvals = []
    for x in range(k):
        v = (x + 0.5) / k
        inwin = rng.random(n) < 2 * b * p
        w = rng.random(n)
        left = v - b - (-b)  # length of [-b, v - b)
        rest = w * (1.0)  # the rest has length 1 + 2b - 2b = 1
        out = np.where(rest < left, -b + rest, v + b + (rest - left))
        z = np.where(inwin, v - b + 2 * b * w, out)
        counts = np.histogram(z, bins=edges)[0]
        pvals.append(chi2_p(counts, M[x]))
    assert min(pvals) * k > ALPHA
    assert mech.epsilon_ldp() == pytest.approx(eps, rel=1e-9)       # fine buckets: some lie in one window only
    assert parse("sw(k=4,eps=1.0,buckets=1)").epsilon_ldp() == 0.0  # one bucket says nothing


def test_sw_ems_beats_the_raw_report_histogram_and_gives_statistics():
    """EMS through the EM engine on sw reports of Beta(2, 5) values: closer to the truth (EMD) than
    the reports' own histogram mapped onto the cells; mean, variance and quantiles with intervals."""
    dom = IntervalDomain(0.0, 1.0, 32)
    rng = np.random.default_rng(16)
    values = rng.beta(2, 5, 20_000)
    x = dom.encode(values)
    truth = np.bincount(x, minlength=32) / x.size
    mech = parse("sw(eps=2.0)", dom)
    z = mech.sample(x, rng)
    obs = Observations.from_reports(mech, z, dom)
    est = estimate(obs, "ems")
    raw = np.bincount(np.clip(((mech.bucket_edges()[z] + mech.bucket_edges()[z + 1]) / 2 * 32).astype(int), 0, 31),
                      minlength=32) / z.size
    emd = lambda a, c: np.abs(np.cumsum(a - c)).sum() * dom.width  # noqa: E731
    assert emd(est.distribution, truth) < 0.5 * emd(raw, truth)
    mean = est.mean()
    assert mean.lower <= mean.value <= mean.upper
    med = numeric.quantile(est, 0.5)
    assert med.lower <= med.value <= med.upper and 0 < med.value < 1
    var = est.var()
    assert var.lower <= var.value <= var.upper


def test_numeric_quantile_interpolates_over_the_cells_width():
    dom = IntervalDomain(10.0, 20.0, 5)  # cells of width 2
    mech = parse("krr(eps=8.0)", dom)
    z = mech.sample(np.repeat(np.arange(5), 2000), np.random.default_rng(17))
    est = estimate(Observations.from_reports(mech, z, dom), "ibu")
    F = np.r_[0.0, np.cumsum(est.distribution)]
    expect = np.interp(0.5, F, dom.cell_edges())  # the CDF linear within every cell
    med = numeric.quantile(est, 0.5)
    assert med.value == pytest.approx(expect, rel=1e-9)
    assert med.lower <= med.value <= med.upper
    # Estimate.quantile (and so --stat median) interpolates over the same widths
    same = est.quantile(0.5)
    assert (same.value, same.lower, same.upper) == (med.value, med.lower, med.upper)
    assert 10.0 <= same.lower <= same.upper <= 20.0
