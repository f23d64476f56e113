"""Geo-indistinguishability mechanisms (linear geometric/Laplace, exponential, planar)."""
import numpy as np
import pytest
from scipy import integrate, stats

from localpriv.analysis import analyze_report
from localpriv.data.observations import Observations
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.domains.grid import GridDomain
from localpriv.estimators.ibu import ibu
from localpriv.mechanisms import parse
from localpriv.mechanisms.exponential import Exponential
from localpriv.mechanisms.geometric import Geometric, two_sided_geometric
from localpriv.mechanisms.laplace import Laplace, laplace_interval_prob
from localpriv.mechanisms.planar import PlanarGeometric, PlanarLaplace, clamp_channel
from localpriv.utils.validation import LocalPrivError

P_MIN = 1e-4


def chi2_pvalue(observed_outputs, probs):
    """Chi-square goodness of fit of integer outputs 0..len(probs)-1 to ``probs`` (cells with an
    expected count below 5 are pooled)."""
    n = observed_outputs.size
    counts = np.bincount(observed_outputs, minlength=probs.size).astype(float)
    assert counts.size == probs.size, "samples outside the output space"
    exp = probs * n
    small = exp < 5
    if small.any():
        counts = np.r_[counts[~small], counts[small].sum()]
        exp = np.r_[exp[~small], exp[small].sum()]
        if exp[-1] == 0:
            assert counts[-1] == 0
            counts, exp = counts[:-1], exp[:-1]
    return stats.chisquare(counts, exp).pvalue


def check_samples_match_channel(mech, inputs, n=40_000, seed=7):
    M = mech.channel()
    rng = np.random.default_rng(seed)
    for x in inputs:
        z = mech.sample(np.full(n, x), rng)
        assert z.dtype == np.int64
        assert chi2_pvalue(z, M[x]) > P_MIN, (str(mech), x)


def line_distance(k):
    i = np.arange(k, dtype=float)
    return np.abs(i[:, None] - i[None, :])


SMALL_GRID = GridDomain(40.0, -74.0, 5, 4, 1.0)


# ------------------------------------------------------------------------------------------
# linear geometric
# ------------------------------------------------------------------------------------------
def test_two_sided_geometric_pmf():
    eps, n = 0.4, 200_000
    N = two_sided_geometric(eps, n, np.random.default_rng(1))
    a = np.exp(-eps)
    support = np.arange(-30, 31)
    p = (1 - a) / (1 + a) * a ** np.abs(support)
    probs = np.r_[p, 1 - p.sum()]
    idx = np.where(np.abs(N) > 30, support.size, N + 30)
    assert chi2_pvalue(idx, probs) > P_MIN


def test_truncated_geometric_is_eq7():
    eps, lo, hi = 0.3, 0, 11
    m = Geometric(12, eps, lo, hi)
    a = np.exp(-eps)
    x = np.arange(12)[:, None]
    z = np.arange(lo, hi + 1)[None, :]
    cz = np.where((z == lo) | (z == hi), 1.0, 1 - a) / (1 + a)
    np.testing.assert_allclose(m.channel(), cz * a ** np.abs(z - x), rtol=1e-12)


@pytest.mark.parametrize("spec", ["geometric(eps=0.3,lo=0,hi=11)", "geometric(eps=0.8,lo=-3,hi=14)",
                                  "geometric(eps=0.5,lo=3,hi=8)"])
def test_truncated_geometric_samples_and_level(spec):
    m = parse(spec, IntegerDomain(0, 11))
    M = m.channel()
    np.testing.assert_allclose(M.sum(axis=1), 1.0, atol=1e-12)
    check_samples_match_channel(m, [0, 5, 11])
    assert m.epsilon_geo() == pytest.approx(m.eps, rel=1e-9)
    assert m.epsilon_geo(line_distance(12)) == pytest.approx(m.eps, rel=1e-9)
    assert str(parse(str(m))) == str(m)


@pytest.mark.parametrize("eps", [0.01, 0.05, 0.3, 1.0])
def test_levels_exact_on_ages_domain(eps):
    """k = 100: end columns hold entries down to e^{-99 eps}; no cancellation may spoil the level."""
    dom = IntegerDomain(0, 99)
    for spec in [f"geometric(eps={eps},lo=0,hi=99)", f"laplace(eps={eps},bins=1.0,lo=0,hi=99)"]:
        assert parse(spec, dom).epsilon_geo() == pytest.approx(eps, rel=1e-9), spec
    assert parse(f"exponential(eps={eps})", dom).epsilon_geo() <= eps * (1 + 1e-12)


def test_untruncated_geometric_likelihood_and_samples():
    m = parse("geometric(eps=0.5)", IntegerDomain(0, 9))
    assert m.n_outputs is None
    with pytest.raises(LocalPrivError):
        m.channel()
    reports = np.arange(-60, 70)
    G = m.likelihood(reports)
    np.testing.assert_allclose(G.sum(axis=1), 1.0, atol=1e-12)  # tails beyond +-60 are < 1e-12
    a = np.exp(-0.5)
    np.testing.assert_allclose(G[4, 60 + 7], (1 - a) / (1 + a) * a ** 3)
    rng = np.random.default_rng(3)
    for x in [0, 9]:
        z = m.sample(np.full(50_000, x), rng)
        assert z.dtype == np.int64 and z.min() < 0 and z.max() > 9
        idx = np.clip(z, -60, 69) + 60
        assert chi2_pvalue(idx, G[x] / G[x].sum()) > P_MIN
    # the privacy level from the likelihood equals eps; the LDP level is eps (k - 1)
    assert m.epsilon_geo() == pytest.approx(0.5, rel=1e-9)
    assert m.epsilon_ldp() == pytest.approx(0.5 * 9, rel=1e-9)


def test_geometric_errors():
    with pytest.raises(LocalPrivError):
        Geometric(10, 0.5, lo=0)
    with pytest.raises(LocalPrivError):
        Geometric(10, 0.5, lo=5, hi=5)
    with pytest.raises(LocalPrivError):
        Geometric(10, -1.0)
    with pytest.raises(LocalPrivError):
        Geometric(10, 0.5, 0, 9).likelihood([10])
    with pytest.raises(LocalPrivError):
        Geometric(10, 0.5).likelihood([0.5])


def test_ibu_recovers_distribution_under_truncated_geometric():
    k = 20
    theta = stats.binom.pmf(np.arange(k), k - 1, 0.35)
    m = Geometric(k, 0.4, 0, k - 1)
    errs = []
    for n in [2_000, 100_000, 2_000_000]:
        e = []
        for seed in range(2):
            rng = np.random.default_rng(seed)
            x = rng.choice(k, size=n, p=theta)
            obs = Observations.from_counts(m, np.bincount(m.sample(x, rng), minlength=k))
            est = ibu(obs, delta=1e-9, max_iter=10_000, accelerate="none", stop="loglik")  # pinned
            e.append(np.abs(est.distribution - theta).sum())
        errs.append(np.mean(e))
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 0.05
    # with the expected counts (n -> infinity) the MLE is theta itself
    est = ibu(Observations.from_counts(m, 1e6 * (theta @ m.channel())), delta=1e-10, max_iter=50_000,
              accelerate="none", stop="loglik")
    assert np.abs(est.distribution - theta).sum() < 1e-3


def test_ibu_on_untruncated_geometric_reports():
    k = 10
    theta = np.r_[np.full(5, 0.16), np.full(5, 0.04)]
    m = Geometric(k, 1.0)
    rng = np.random.default_rng(11)
    x = rng.choice(k, size=100_000, p=theta)
    obs = Observations.from_reports(m, m.sample(x, rng))
    est = ibu(obs, delta=1e-9, max_iter=10_000, accelerate="none", stop="loglik")  # pinned
    assert np.abs(est.distribution - theta).sum() < 0.05


# ------------------------------------------------------------------------------------------
# linear Laplace
# ------------------------------------------------------------------------------------------
def test_laplace_interval_prob():
    eps = 0.7
    F = stats.laplace(scale=1 / eps).cdf
    for u, v in [(-3.0, -1.0), (-1.0, 2.0), (0.5, 4.0), (-np.inf, -2.0), (1.0, np.inf), (-np.inf, np.inf)]:
        assert laplace_interval_prob(u, v, eps) == pytest.approx(F(v) - F(u), rel=1e-12, abs=1e-15)
    # far tails keep relative accuracy
    assert laplace_interval_prob(200.0, 201.0, 1.0) == pytest.approx(0.5 * np.exp(-200) * (1 - np.exp(-1)), rel=1e-12)


def test_continuous_laplace():
    # the unbinned version releases z = x + g D on the grid g = 2^-9 (eps = 0.3),
    # D discrete Laplace: samples on the grid, chi-square against the pmf (40 cells of equal
    # probability; the grid points beyond +-60/eps, mass e^-60, join the end cells)
    m = parse("laplace(eps=0.3)", IntegerDomain(0, 9))
    assert m.n_outputs is None and m.report_kind == "float64" and m.grid == 2.0 ** -9
    rng = np.random.default_rng(5)
    z = m.sample(np.full(20_000, 4), rng)
    assert z.dtype == np.float64 and np.all(z / m.grid == np.round(z / m.grid))
    pts = 4 + np.arange(-200 * 512, 200 * 512 + 1) * m.grid
    cdf = np.cumsum(m.likelihood(pts)[4])
    cell = np.minimum(np.searchsorted(np.linspace(0, 1, 41)[1:-1], cdf, side="right"), 39)
    probs = np.bincount(cell, weights=m.likelihood(pts)[4], minlength=40)
    idx = cell[np.clip(np.round((z - pts[0]) / m.grid).astype(int), 0, pts.size - 1)]
    assert chi2_pvalue(idx, probs) > P_MIN
    # the law is the Laplace law at the grid's resolution (KS at the same seed)
    assert stats.kstest(z, stats.laplace(loc=4, scale=1 / 0.3).cdf).pvalue > P_MIN
    # the likelihood is the pmf: it sums to 1 over the grid for every input
    for x in [0, 9]:
        assert m.likelihood(x + np.arange(-200 * 512, 200 * 512 + 1) * m.grid)[x].sum() == pytest.approx(1.0, abs=1e-12)
    assert m.epsilon_geo() == pytest.approx(0.3, rel=1e-9)
    with pytest.raises(LocalPrivError):
        m.channel()
    with pytest.raises(LocalPrivError, match="multiples of the grid"):
        m.likelihood(np.array([0.1]))  # not a report of this mechanism


@pytest.mark.parametrize("spec", ["laplace(eps=0.3,bins=1.0,lo=0,hi=9)", "laplace(eps=0.6,bins=2.5,lo=-2,hi=5)"])
def test_binned_laplace_samples_and_level(spec):
    m = parse(spec, IntegerDomain(0, 9))
    np.testing.assert_allclose(m.channel().sum(axis=1), 1.0, atol=1e-12)
    check_samples_match_channel(m, [0, 4, 9])
    assert m.epsilon_geo() == pytest.approx(m.eps, rel=1e-9)
    assert str(parse(str(m))) == str(m)


def test_untruncated_binned_laplace():
    m = Laplace(10, 0.5, bins=1.0)
    G = m.likelihood(np.arange(-80, 90))
    np.testing.assert_allclose(G.sum(axis=1), 1.0, atol=1e-12)
    z = m.sample(np.full(30_000, 2), np.random.default_rng(2))
    assert chi2_pvalue(np.clip(z, -80, 89) + 80, G[2] / G[2].sum()) > P_MIN
    assert m.epsilon_geo() == pytest.approx(0.5, rel=1e-9)
    with pytest.raises(LocalPrivError):
        Laplace(10, 0.5, lo=0, hi=9)  # truncation needs bins


# ------------------------------------------------------------------------------------------
# exponential
# ------------------------------------------------------------------------------------------
def test_exponential_on_integers():
    m = parse("exponential(eps=0.4)", IntegerDomain(0, 14))
    d = line_distance(15)
    W = np.exp(-0.2 * d)
    np.testing.assert_allclose(m.channel(), W / W.sum(axis=1, keepdims=True), rtol=1e-12)
    check_samples_match_channel(m, [0, 7, 14])
    level = m.epsilon_geo()
    # brute force: max over x != x', z of log ratio / d
    L = np.log(m.channel())
    off = ~np.eye(15, dtype=bool)
    brute = ((L[:, None, :] - L[None, :, :]).max(axis=2)[off] / d[off]).max()
    assert level == pytest.approx(brute, rel=1e-12)
    assert level <= 0.4 + 1e-12 and level > 0.3


def test_exponential_on_categories_and_grid():
    cat = CategoricalDomain(list("abcde"))
    m = parse("exponential(eps=2.0)", cat)
    assert m.epsilon_geo() == pytest.approx(1.0, rel=1e-12)  # discrete metric: eps / 2 exactly
    assert m.epsilon_ldp() == pytest.approx(1.0, rel=1e-12)
    g = parse("exponential(eps=1.5)", SMALL_GRID)
    check_samples_match_channel(g, [0, 9, 19])
    assert g.epsilon_geo() <= 1.5 + 1e-12
    with pytest.raises(LocalPrivError):
        Exponential(4, 1.0, domain=cat)


# ------------------------------------------------------------------------------------------
# planar
# ------------------------------------------------------------------------------------------
def brute_planar_geometric(grid, eps, R=60):
    """The truncated planar geometric channel by explicit enumeration of offsets (test oracle)."""
    nr, nc, s = grid.nrows, grid.ncols, grid.cell_km
    di, dj = np.meshgrid(np.arange(-R, R + 1), np.arange(-R, R + 1), indexing="ij")
    w = np.exp(-eps * s * np.hypot(di, dj))
    w /= w.sum()
    M = np.zeros((grid.size, grid.size))
    for x in range(grid.size):
        r, c = divmod(x, nc)
        z = np.clip(r + di, 0, nr - 1) * nc + np.clip(c + dj, 0, nc - 1)
        M[x] = np.bincount(z.ravel(), weights=w.ravel(), minlength=grid.size)
    return M


def test_planar_geometric_channel_samples_level():
    m = parse("planar-geometric(eps=0.9)", SMALL_GRID)
    M = m.channel()
    np.testing.assert_allclose(M, brute_planar_geometric(SMALL_GRID, 0.9), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(M.sum(axis=1), 1.0, atol=1e-12)
    check_samples_match_channel(m, [0, 6, 19])
    assert m.epsilon_geo() == pytest.approx(0.9, rel=1e-9)
    assert str(m) == "planar-geometric(eps=0.9)"


def test_planar_geometric_interior_is_seed003():
    """Interior outputs: P(z|x) = lambda exp(-eps d(x, z)) (seed 003 section 2.3)."""
    m = PlanarGeometric(1.3, SMALL_GRID)
    i = np.arange(-200, 201)
    lam = 1 / np.exp(-1.3 * 1.0 * np.hypot(i[:, None], i[None, :])).sum()
    D = SMALL_GRID.distance_matrix()
    interior = [5, 6, 9, 10, 13, 14]  # rows 1..3, columns 1..2
    np.testing.assert_allclose(m.channel()[:, interior], lam * np.exp(-1.3 * D[:, interior]), rtol=1e-12)


def test_planar_laplace_channel_samples_level():
    m = parse("planar-laplace(eps=0.8)", SMALL_GRID)
    M = m.channel()
    np.testing.assert_allclose(M.sum(axis=1), 1.0, atol=1e-12)
    check_samples_match_channel(m, [0, 6, 19], n=60_000)
    # an interior entry against 2-D adaptive quadrature of the density over the cell

    def f(y, x):
        return 0.8 ** 2 / (2 * np.pi) * np.exp(-0.8 * np.hypot(x, y))

    mass, _ = integrate.dblquad(f, 0.5, 1.5, 0.5, 1.5, epsabs=1e-13)  # offset (1, 1) cells
    assert M[5, 10] == pytest.approx(mass, rel=1e-8)
    level = m.epsilon_geo()
    assert level <= 0.8 * (1 + 1e-9)
    assert level > 0.7


@pytest.mark.parametrize("eps", [0.2, 6.0])
def test_planar_levels_at_the_ends_of_fig9(eps):
    grid = GridDomain(40.0, -74.0, 6, 5, 0.5)
    assert PlanarGeometric(eps, grid).epsilon_geo() == pytest.approx(eps, rel=1e-9)
    assert PlanarLaplace(eps, grid).epsilon_geo() <= eps * (1 + 1e-9)


def test_clamp_channel_one_cell_wide():
    grid = GridDomain(40.0, -74.0, 1, 4, 1.0)
    m = PlanarGeometric(0.7, grid)
    np.testing.assert_allclose(m.channel(), brute_planar_geometric(grid, 0.7), rtol=1e-9, atol=1e-15)
    with pytest.raises(LocalPrivError):
        clamp_channel(np.ones((3, 3)) / 9, 4, 4)


def test_planar_needs_grid():
    with pytest.raises(LocalPrivError):
        parse("planar-geometric(eps=1.0)", IntegerDomain(0, 9))
    with pytest.raises(LocalPrivError):
        PlanarLaplace(1.0, SMALL_GRID, k=3)


def test_perturb_all_checkins_vectorized():
    from localpriv.data.datasets import manhattan_cells

    grid, cells = manhattan_cells()
    for spec in ["planar-geometric(eps=1.0)", "planar-laplace(eps=1.0)"]:
        m = parse(spec, grid)
        z = m.sample(cells, np.random.default_rng(0))
        assert z.shape == cells.shape and z.min() >= 0 and z.max() < grid.size
        # the noisy histogram matches theta @ M within 5 sigma per cell
        theta = np.bincount(cells, minlength=grid.size) / cells.size
        p = theta @ m.channel()
        q = np.bincount(z, minlength=grid.size) / cells.size
        assert np.all(np.abs(q - p) <= 5 * np.sqrt(p * (1 - p) / cells.size) + 1e-12)


@pytest.mark.parametrize("spec", ["geometric(eps=0.05)", "geometric(eps=0.05,lo=0,hi=99)", "laplace(eps=0.05)",
                                  "laplace(eps=0.05,bins=1.0,lo=0,hi=99)", "exponential(eps=0.05)"])
def test_analyze_accepts_linear_specs(spec):
    dom = IntegerDomain(0, 99)
    rep = analyze_report(parse(spec, dom), dom)
    assert rep["inputs"] == 100
    if "lo=" in spec or "exponential" in spec:
        assert rep["epsilon_geo (from channel)"] <= 0.05 + 1e-12


@pytest.mark.parametrize("spec", ["planar-geometric(eps=1.0)", "planar-laplace(eps=1.0)"])
def test_analyze_accepts_planar_specs(spec):
    rep = analyze_report(parse(spec, SMALL_GRID), SMALL_GRID)
    assert rep["outputs"] == 20
    assert rep["epsilon_geo (from channel)"] <= 1.0 + 1e-9


def test_planar_grid_in_spec_for_the_cli():
    m = parse("planar-geometric(eps=1.0,nrows=5,ncols=4,cell_km=1.0)")
    assert str(m) == "planar-geometric(eps=1.0,nrows=5,ncols=4,cell_km=1.0)" and m.k == 20
    assert str(parse(str(m))) == str(m)
    np.testing.assert_allclose(m.channel(), PlanarGeometric(1.0, SMALL_GRID).channel())
    # consistent with a grid domain it is accepted; otherwise refused
    assert parse("planar-laplace(eps=1.0,nrows=5,ncols=4,cell_km=1.0)", SMALL_GRID).k == 20
    with pytest.raises(LocalPrivError):
        parse("planar-laplace(eps=1.0,nrows=6,ncols=4)", SMALL_GRID)
    with pytest.raises(LocalPrivError):
        parse("planar-laplace(eps=1.0,nrows=6)")
    with pytest.raises(LocalPrivError):
        parse("planar-laplace(eps=1.0)")
    rep = analyze_report(m)
    assert rep["epsilon_geo (from channel)"] == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("spec", ["laplace(eps=1.0)", "geometric(eps=1.0)", "laplace(eps=1.0,bins=1.0)"])
def test_unbounded_reports_through_the_pipeline(spec):
    """perturb -> aggregate (DuckDB) -> IBU on float and unbounded integer reports."""
    from localpriv.data.aggregate import aggregate
    from localpriv.data.reports import perturb
    from localpriv.inference import estimate

    dom = IntegerDomain(0, 9)
    theta = np.r_[np.full(5, 0.16), np.full(5, 0.04)]
    values = np.random.default_rng(0).choice(10, size=5_000, p=theta)
    obs = aggregate(perturb(values, spec, np.random.default_rng(1), dom), dom)
    est = estimate(obs, "ibu", delta=1e-6, max_iter=3_000, accelerate="none", stop="loglik")
    assert np.abs(est.distribution - theta).sum() < 0.25


# --- planar Laplace kernel when its half-width is capped (MAX_RADIUS) ------------------------
def test_planar_laplace_ring_holds_everything_beyond_the_cap(monkeypatch):
    """With the kernel's half-width capped, its outer ring holds the strips and corners beyond it
    (every offset there clamps to the same edge cell) and the centre is integrated directly: the
    kernel sums to 1, each ring entry equals adaptive quadrature of the density over its region,
    the computed LDP level stays under the geo-indistinguishability bound eps x diameter and grows
    with eps, and the sampler (exact Gamma radius, then clamping) draws the channel. Before, the
    tail beyond the cap was put on the centre cell: planar-laplace(eps=0.001) on the Manhattan
    grid claimed an LDP level of 16.8 (the bound is 0.012)."""
    import localpriv.mechanisms.planar as PM

    monkeypatch.setattr(PM, "MAX_RADIUS", 12)
    grid = SMALL_GRID  # 5 x 4 cells of 1 km
    diam = np.hypot(4.0, 3.0)
    levels = []
    for eps in (1e-6, 1e-4, 1e-2, 0.1, 0.5, 1.0, 3.0):
        m = PlanarLaplace(eps, grid)
        K = m.kernel()
        assert abs(K.sum() - 1.0) < 1e-13, eps
        lv = m.epsilon_ldp()
        assert lv <= eps * diam * (1 + 1e-9), (eps, lv)
        levels.append(lv)
    assert np.all(np.diff(levels) > 0)
    m = PlanarLaplace(0.3, grid)
    R = m.R
    assert R == 12  # capped: the ring starts at a = 11.5 km, well inside the density's bulk
    K = m.kernel()

    def f(y, x):
        return 0.3 ** 2 / (2 * np.pi) * np.exp(-0.3 * np.hypot(x, y))

    a = R - 0.5
    for dj in (0, 5, R - 1):  # strips {y >= a, x in cell dj}
        mass, _ = integrate.dblquad(f, dj - 0.5, dj + 0.5, a, np.inf, epsabs=0, epsrel=1e-11)
        assert K[0, R + dj] == pytest.approx(mass, rel=1e-9)
        assert K[-1, R - dj] == K[0, R + dj] == K[R + dj, -1]
    corner, _ = integrate.dblquad(f, a, np.inf, a, np.inf, epsabs=0, epsrel=1e-11)
    assert K[0, 0] == pytest.approx(corner, rel=1e-9) and K[-1, -1] == K[0, 0]
    centre, _ = integrate.dblquad(f, -0.5, 0.5, -0.5, 0.5, epsabs=0, epsrel=1e-12)
    assert K[R, R] == pytest.approx(centre, rel=1e-9)
    check_samples_match_channel(m, [0, 7, 19], n=80_000)
