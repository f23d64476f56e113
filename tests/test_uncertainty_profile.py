"""Profile-likelihood bounds of cells at the boundary of the simplex, statistics kept inside the
values' range, and the small-n / lack-of-fit warnings (localpriv.inference.uncertainty)."""
import numpy as np
import pytest
from scipy import stats

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.domains import IntegerDomain
from localpriv.inference import estimate
from localpriv.inference import uncertainty as uncertainty_module
from localpriv.inference.simulation import simulate_block
from localpriv.inference.uncertainty import IntervalWarning, lack_of_fit
from localpriv.mechanisms import parse

DOM = IntegerDomain(0, 99)


def _identical(n, eps=2.0, cell=7):
    mech = parse(f"krr(eps={eps})", DOM)
    return mech, Observations([ObservationBlock(mech, np.array([cell]), np.array([n]))], DOM)


def _krr_upper(mech, n, level):
    """Closed-form profile bound under k-RR when all n reports name one cell y: the profile at
    theta_x = t (x != y) puts 1 - t on y, L_p(t) = n log(a - (a - b) t), L_max = n log a, and the
    drop reaches chi2_1(level) / 2 at t = a (1 - exp(-c / (2 n))) / (a - b)."""
    a, b = mech.p_keep, mech.p_other
    c = stats.chi2.ppf(level, 1)
    return a * (1 - np.exp(-c / (2 * n))) / (a - b)


@pytest.mark.parametrize("n", [1, 100_000])
def test_identical_reports_get_the_likelihood_ratio_bound(n):
    mech, obs = _identical(n)
    with pytest.warns(IntervalWarning):
        est = estimate(obs, "ibu")
        lo, hi = est.ci(0.95)
    want = _krr_upper(mech, n, 0.95)
    others = np.delete(np.arange(DOM.size), 7)
    # the bisection returns the excluded end of its bracket: never below, at most 1 % above
    assert np.all(hi[others] >= want * (1 - 1e-6))
    assert np.all(hi[others] <= want * 1.01)
    assert np.all(lo[others] == 0.0)
    assert hi[7] == 1.0
    # the reported cell: the profile at theta_y = t is n log(b + (a - b) t)
    a, b = mech.p_keep, mech.p_other
    low = (a * np.exp(-stats.chi2.ppf(0.95, 1) / (2 * n)) - b) / (a - b)
    assert lo[7] == pytest.approx(max(low, 0.0), rel=0.01, abs=1e-9)


def test_statistics_stay_inside_the_values_range():
    _, obs = _identical(1)
    with pytest.warns(IntervalWarning):
        est = estimate(obs, "ibu")
        for level in (0.9, 0.95):
            for name, iv in est.statistics("mean,median,p90", level).items():
                assert 0.0 <= iv.lower <= iv.value <= iv.upper <= 99.0, name
            band = est.cdf(level)
            assert (band["lower"] >= 0).all() and (band["upper"] <= 1).all()


def test_zero_cells_cover_on_a_sparse_truth():
    """Cells of true mass 0.05 (which the MLE often puts at 0) must not get bounds of 1e-10
    (seeded: over 20 data sets, the 95 % intervals of the 20 cells of mass 0.05 miss at most 5 %
    of the 400 times plus 3 binomial sds; no zero-mass cell gets an upper bound below 1e-6)."""
    mech = parse("krr(eps=2)", DOM)
    theta = np.zeros(DOM.size)
    theta[::5] = 0.05
    rng = np.random.default_rng(5)
    missed = tried = 0
    for _ in range(20):
        obs = Observations([simulate_block(mech, theta, 1000, rng)], DOM)
        est = estimate(obs, "ibu")
        lo, hi = est.ci(0.95)
        heavy = theta > 0
        tried += int(heavy.sum())
        missed += int(np.sum(heavy & ((hi < theta) | (lo > theta))))
        assert np.all(hi[theta == 0] > 1e-6)  # no bound of the order of 1e-12 any more
    assert tried == 400
    assert missed <= 0.05 * tried + 3 * np.sqrt(0.05 * 0.95 * tried)


#: the mechanisms of ``localpriv reproduce coverage-small`` (reproductions/coverage.py)
SMALL_SPECS = ["krr(eps=2)", "oue(eps=2)", "geometric(eps=0.2,lo=0,hi=99)"]


@pytest.mark.parametrize("spec", SMALL_SPECS)
@pytest.mark.parametrize("method", ["ibu", "ems"])
def test_small_n_is_flagged(spec, method):
    # every row of the small-n table under 100 reports carries the warning, whatever the
    # mechanism, for the MLE and for the default of an ordered domain (anchored on the MLE)
    mech = parse(spec, DOM)
    obs = Observations([simulate_block(mech, np.full(DOM.size, 0.01), 20, np.random.default_rng(1))], DOM)
    with pytest.warns(IntervalWarning, match="only 20 reports"):
        u = estimate(obs, method).uncertainty()
    assert "small_n" in u.flags


@pytest.mark.parametrize("spec", SMALL_SPECS)
def test_profile_rows_equal_the_one_cell_search(spec, monkeypatch):
    # all cells searched at once (rows of a matrix) take the same brackets as one cell after the
    # other: the same points, the same decisions (equal up to the products' round-off)
    theta = np.zeros(DOM.size)
    theta[[10, 30, 50, 70, 90]] = 0.2
    obs = Observations([simulate_block(parse(spec, DOM), theta, 40, np.random.default_rng(4))], DOM)
    with pytest.warns(IntervalWarning):
        u = estimate(obs, "ibu", accelerate="squarem").uncertainty()
    blocks, cells = u.extra["profile"]["blocks"], np.arange(0, DOM.size, 3)
    assert uncertainty_module._row_likelihood(blocks) is not None
    rows = uncertainty_module.profile_bounds(blocks, u.theta, cells, 0.9)
    monkeypatch.setattr(uncertainty_module, "PROFILE_DENSE_MAX", 0)
    assert uncertainty_module._row_likelihood(blocks) is None
    one = uncertainty_module.profile_bounds(blocks, u.theta, cells, 0.9)
    for got, want in zip(rows, one):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-300)


def test_data_from_another_mechanism_are_flagged():
    """Reports of k-RR at eps = 6 on a concentrated truth, read as k-RR at eps = 0.5: no theta
    explains them (the fit's reports are nearly uniform), the G-test rejects."""
    theta = np.zeros(DOM.size)
    theta[40] = 1.0
    obs6 = Observations([simulate_block(parse("krr(eps=6)", DOM), theta, 5000, np.random.default_rng(2))], DOM)
    wrong = Observations([ObservationBlock(parse("krr(eps=0.5)", DOM), b.reports, b.counts) for b in obs6.blocks], DOM)
    with pytest.warns(IntervalWarning, match="improbable"):
        u = estimate(wrong, "ibu").uncertainty()
    assert "lack_of_fit" in u.flags
    # the right model on the same reports passes the test
    right = estimate(obs6, "ibu")
    g = lack_of_fit(obs6, right.distribution)
    assert g is None or g[2] > 1e-3
