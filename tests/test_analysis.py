"""Theory as tools: L(theta), strict concavity, identifiability, bounds, likely subsets."""
import numpy as np
import pytest
from scipy import stats

from localpriv.analysis import analyze_report
from localpriv.analysis.bounds import (
    geometric_inv_lower_bound,
    inv_expected_squared_error,
    inv_squared_error_monte_carlo,
    krr_inv_upper_bound,
    rappor_concavity_frequency,
    rappor_concavity_lower_bound,
    rappor_likelihood_matrix,
    rappor_sample,
    worked_example,
)
from localpriv.analysis.concavity import (
    concavity_witness,
    identifiable,
    rank_test,
    section51_counterexample,
    strictly_concave,
)
from localpriv.analysis.examples import basic_rappor_channel, planar_geometric_truncated_channel, section64_mechanism
from localpriv.analysis.likelihood import EQ4, eq4_mechanism, eq12_mechanism, loglik, simplex_grid
from localpriv.analysis.likely import (
    dominance_likely,
    estimate_unbounded_integers,
    ibu_on_subset,
    likely_lattice_planar,
    likely_subset_krr,
    likely_subset_linear,
    likely_subset_planar,
)
from localpriv.data.observations import Observations
from localpriv.estimators.em import em, log_likelihood
from localpriv.estimators.ibu import ibu
from localpriv.likelihood.blocks import DenseBlock
from localpriv.mechanisms import parse
from localpriv.mechanisms.geometric import Geometric, two_sided_geometric
from localpriv.mechanisms.krr import KRR
from localpriv.utils.validation import LocalPrivError

#: plain EM on seed 001's rule, the former defaults (pinned where a test relies on them)
PLAIN = {"accelerate": "none", "stop": "loglik"}


# ---------------------------------------------------------------- L(theta), Eq. 2
def test_loglik_matches_em_engine():
    mech = eq4_mechanism()
    reports = np.array([1, 0, 1, 2, 2, 2])
    theta = np.array([0.2, 0.5, 0.3])
    obs = Observations.from_reports(mech, reports)
    assert loglik(mech, reports, theta) == pytest.approx(log_likelihood(obs.likelihood_blocks(), theta))
    # Eq. 2 by hand: sum_i log sum_x theta_x M[x, z_i]
    assert loglik(mech, reports, theta) == pytest.approx(np.log(theta @ EQ4[:, reports]).sum())
    grid = simplex_grid(10)
    assert np.allclose(grid.sum(1), 1) and grid.min() >= 0 and grid.shape[0] == 66
    assert loglik(mech, reports, grid).shape == (66,)


# ---------------------------------------------------------------- Theorem 4.1 / 6.1
def test_eq4_observations_classified_as_in_the_seed():
    # Fig. 3 (a): reports {2} -> not strictly concave; (b): {2, 1} -> strictly concave
    assert not strictly_concave(EQ4[:, [1]]).holds
    assert strictly_concave(EQ4[:, [1, 0]]).holds
    w = concavity_witness(EQ4[:, [1]])
    assert abs(w.sum()) < 1e-12 and np.abs(w @ EQ4[:, [1]]).max() < 1e-12 and np.linalg.norm(w) == pytest.approx(1)
    assert concavity_witness(EQ4[:, [1, 0]]) is None
    # L is constant along (1,0,0) -> (0,0,1) with {2}
    seg = np.linspace(0, 1, 7)[:, None] * [1, 0, 0] + np.linspace(1, 0, 7)[:, None] * [0, 0, 1]
    assert np.ptp(loglik(eq4_mechanism(), [1], seg)) < 1e-12
    assert identifiable(eq4_mechanism()).holds


def test_eq12_section51_counterexample():
    out = section51_counterexample()
    assert not out["identifiable"] and not out["concave_a"] and not out["concave_b"]
    assert np.ptp(out["L_a_on_segment"]) < 1e-12 and np.ptp(out["L_b_on_segment"]) < 1e-12
    mech = eq12_mechanism()
    # (a) {2,2,2,2}: the MLE (0,1,0) is unique although L is not strictly concave
    obs = Observations.from_reports(mech, [1, 1, 1, 1])
    for t0 in ([1 / 3] * 3, [0.7, 0.1, 0.2], [0.05, 0.05, 0.9]):
        est = ibu(obs, theta0=t0, delta=1e-12, max_iter=20000, **PLAIN)
        assert est.distribution[1] > 1 - 1e-3
    # (b) adding 1 and 3: a segment of MLEs; IBU ends at different points with the same L
    obs = Observations.from_reports(mech, [1, 1, 1, 1, 0, 2])
    e1 = ibu(obs, theta0=[0.6, 0.3, 0.1], delta=1e-13, max_iter=20000, **PLAIN)
    e2 = ibu(obs, theta0=[0.1, 0.3, 0.6], delta=1e-13, max_iter=20000, **PLAIN)
    assert e1.loglik == pytest.approx(e2.loglik, abs=1e-8)
    assert abs(e1.distribution[0] - e2.distribution[0]) > 0.1
    assert e1.distribution[1] == pytest.approx(17 / 24, abs=1e-4)  # theta_2 = 0.7083 on every MLE


def test_rank_test_tolerance_and_scaling():
    # columns of wildly different scale: rank decided after normalization
    A = np.array([[1.0, 1e-30], [2.0, 3e-30]])
    assert rank_test(A).rank == 2
    # a rank-1 matrix plus rounding-level noise is rank 1; a clear perturbation is rank 2 but flagged
    B = np.outer([1.0, 2.0, 3.0], [1.0, 1.0])
    assert rank_test(B + 1e-17).rank == 1
    r = rank_test(B + np.array([[0, 1e-13], [0, 0], [0, 0]]))
    assert r.rank == 2 and r.fragile
    r = rank_test(B + np.array([[0, 1e-3], [0, 0], [0, 0]]))
    assert r.rank == 2 and not r.fragile
    with pytest.raises(LocalPrivError):
        rank_test(np.array([[np.nan, 1.0]]))


def test_identifiability_of_standard_mechanisms():
    assert identifiable(KRR(20, 0.5)).holds
    assert identifiable(Geometric(30, 0.1, lo=0, hi=29)).holds
    unb = identifiable(Geometric(30, 0.1))  # unbounded outputs: certificate on finitely many columns
    assert unb.holds and "columns" in unb.method
    r64 = identifiable(section64_mechanism())
    assert not r64.holds and r64.rank == 16 and r64.required == 25


# ---------------------------------------------------------------- Prop. 7.6 and exact INV error
def test_worked_example_numbers():
    out = worked_example()
    assert out["krr_upper_coefficient"] == pytest.approx(277.28, abs=0.01)
    assert out["geometric_lower_coefficient"] == pytest.approx(7818.55, abs=0.01)
    assert out["krr_exact_coefficient"] <= out["krr_upper_coefficient"]
    assert out["geometric_exact_coefficient"] >= out["geometric_lower_coefficient"]
    assert "277.28" in out["statement"] and "7238" in out["statement"]
    with pytest.raises(LocalPrivError):
        geometric_inv_lower_bound(1.0)  # e^-1 < 1/2: the proposition does not apply


@pytest.mark.parametrize("mech", [KRR(8, 1.0), Geometric(8, 0.4, lo=0, hi=7), eq4_mechanism()],
                         ids=["krr", "tgeo", "eq4"])
def test_exact_inv_error_matches_monte_carlo(mech):
    theta = np.random.default_rng(3).dirichlet(np.ones(mech.k))
    n = 400
    exact = inv_expected_squared_error(mech, theta, n)
    mean, se = inv_squared_error_monte_carlo(mech, theta, n, runs=20000, rng=np.random.default_rng(7))
    assert abs(mean - exact) < 5 * se


def test_prop76_bounds_hold_for_many_thetas():
    rng = np.random.default_rng(0)
    k = 30
    krr, geo = KRR(k, 1.5), Geometric(k, 0.2, lo=0, hi=k - 1)
    for _ in range(20):
        th = rng.dirichlet(np.full(k, 0.3))
        assert inv_expected_squared_error(krr, th) <= krr_inv_upper_bound(k, 1.5) + 1e-9
        assert inv_expected_squared_error(geo, th) >= geometric_inv_lower_bound(0.2) - 1e-9
    with pytest.raises(LocalPrivError):
        inv_expected_squared_error(eq12_mechanism(), [1 / 3] * 3)  # not invertible


# ---------------------------------------------------------------- Theorem 4.4 (Rappor)
def test_rappor_bound_values_and_empirical_frequency():
    b = rappor_concavity_lower_bound(10, 1.0, np.array([5, 10, 25, 100]))
    assert b[0] == 0 and b[1] == 0 and 0.99 < b[2] < 1 and b[3] == pytest.approx(1)
    assert np.all(np.diff(rappor_concavity_lower_bound(10, 2.0, np.arange(10, 80))) >= 0)
    rng = np.random.default_rng(11)
    runs = 200
    for eps, n in ((1.0, 15), (2.0, 25), (0.5, 12)):
        bound = rappor_concavity_lower_bound(10, eps, n)
        freq = rappor_concavity_frequency(10, eps, n, runs, rng)
        assert freq >= bound - 5 * np.sqrt(max(bound * (1 - bound), 1e-12) / runs)


def test_basic_rappor_channel_lemma43_and_samples():
    k, eps = 4, 1.2
    M = basic_rappor_channel(k, eps)
    assert np.allclose(M.sum(1), 1)
    codes = np.arange(2 ** k)
    bits = ((codes[:, None] >> np.arange(k)) & 1).astype(np.uint8)
    assert np.allclose(rappor_likelihood_matrix(bits, eps), M)  # Lemma 4.3
    rng = np.random.default_rng(5)
    x = np.repeat(np.arange(k), 20000)
    rep = rappor_sample(x, k, eps, rng)
    code = (rep.astype(np.int64) << np.arange(k)).sum(1)
    for v in range(k):
        obs = np.bincount(code[x == v], minlength=2 ** k)
        assert stats.chisquare(obs, 20000 * M[v]).pvalue > 1e-4
    assert parse(f"matrix(rows={M.tolist()})").epsilon_ldp() == pytest.approx(eps)


def test_section64_channel_agrees_with_planar_geometric():
    from localpriv.domains.grid import GridDomain
    from localpriv.mechanisms.planar import PlanarGeometric

    dom = GridDomain(40.7, -74.0, 5, 5, 1.0)
    ours = planar_geometric_truncated_channel(0.5, 5, 5, 5, 5, 1.0)
    assert np.allclose(ours, PlanarGeometric(0.5, dom).channel(), rtol=1e-9, atol=1e-15)
    M = planar_geometric_truncated_channel(0.5)
    assert M.shape == (25, 16) and np.allclose(M.sum(1), 1)


# ---------------------------------------------------------------- section 8: likely subsets
def test_likely_linear_equals_full_alphabet_ibu():
    rng = np.random.default_rng(2)
    k = 80
    mech = Geometric(k, 0.3)
    x = rng.integers(25, 45, 1500)
    obs = Observations.from_reports(mech, mech.sample(x, rng))
    lo, hi = likely_subset_linear(obs.blocks[0].reports, 0, k - 1)
    assert lo > 0 and hi < k - 1
    G = mech.likelihood(obs.blocks[0].reports)
    mask = dominance_likely(G)
    assert not mask[:lo].any() and not mask[hi + 1:].any()  # outside = unlikely (Definition 2)
    full = ibu(obs, delta=1e-8, max_iter=30000, **PLAIN)
    sub = ibu_on_subset(obs, np.arange(lo, hi + 1), delta=1e-8, max_iter=30000, **PLAIN)
    assert sub.loglik >= full.loglik - 1e-5
    assert full.distribution[:lo].sum() + full.distribution[hi + 1:].sum() < 1e-6
    assert np.abs(full.distribution - sub.distribution).sum() < 1e-2


def test_likely_krr_equals_full_alphabet_ibu():
    rng = np.random.default_rng(4)
    k = 40
    mech = KRR(k, 6.0)  # few noisy reports: some values are never reported
    x = rng.integers(0, 5, 300)
    obs = Observations.from_reports(mech, mech.sample(x, rng))
    S = likely_subset_krr(obs.blocks[0].reports)
    assert S.size < k
    mask = dominance_likely(mech.likelihood(obs.blocks[0].reports))
    assert not mask[np.setdiff1d(np.arange(k), S)].any()
    full = ibu(obs, delta=1e-10, max_iter=50000, **PLAIN)
    sub = ibu_on_subset(obs, S, delta=1e-10, max_iter=50000, **PLAIN)
    assert sub.loglik >= full.loglik - 1e-6
    assert np.abs(full.distribution - sub.distribution).sum() < 1e-2


def test_likely_planar_excludes_only_dominated_points():
    rng = np.random.default_rng(8)
    reports = rng.normal(0, 1.5, size=(40, 2)).round()  # lattice points, step 1
    ij = likely_lattice_planar(reports, 1.0)
    # a big window of the lattice: every lattice point outside the likely set must be dominated
    g = np.arange(-15, 16)
    cand = np.array(np.meshgrid(g, g, indexing="ij")).reshape(2, -1).T.astype(float)
    inside = likely_subset_planar(reports, cand, 1 / np.sqrt(2))
    assert {tuple(p) for p in ij} == {tuple(p) for p in cand[inside].astype(int)}
    d = np.linalg.norm(cand[:, None, :] - reports[None, :, :], axis=2)
    G = np.exp(-0.7 * d)  # planar geometric likelihood (any strictly decreasing function works)
    assert not dominance_likely(G)[~inside].any()
    assert inside.sum() < cand.shape[0] / 2
    # degenerate hulls (one point, collinear points) still work
    assert likely_subset_planar([[0, 0]], cand, 0.5).sum() == 1
    assert likely_subset_planar([[0, 0], [3, 0], [5, 0]], cand, 0.5).sum() >= 6


def test_unbounded_integers_support_found():
    rng = np.random.default_rng(9)
    incomes = np.r_[rng.normal(45, 8, 3000).round(), rng.normal(230, 4, 1000).round()].astype(np.int64)
    reports = incomes + two_sided_geometric(0.3, incomes.size, rng)
    est = estimate_unbounded_integers(reports, 0.3)
    lab = est.labels
    assert lab[0] <= incomes.min() and lab[-1] >= incomes.max()  # support never declared
    high = est.distribution[lab > 150].sum()
    assert abs(high - 0.25) < 5 * np.sqrt(0.25 * 0.75 / incomes.size) + 0.01
    assert est.distribution[(lab > 100) & (lab < 200)].sum() < 0.02
    with pytest.raises(LocalPrivError):
        estimate_unbounded_integers([1.5, 2.0], 0.3)


# ---------------------------------------------------------------- analyze_report
def test_analyze_report_keys():
    r = analyze_report(KRR(100, 2.0))
    assert r["epsilon_ldp (from channel)"] == pytest.approx(2.0)
    assert r["identifiable (|X| independent columns)"] is True and r["channel rank"] == 100
    assert r["INV error bound (Prop. 7.6, k-RR): n*E||v-theta||^2 <="] == pytest.approx(277.28, abs=0.01)
    assert r["INV exact n*E||v-theta||^2, uniform theta"] <= 277.29
    g = analyze_report(Geometric(100, 0.05))
    assert g["outputs"] == "unbounded" and g["identifiable (|X| independent columns)"] is True
    assert g["epsilon_geo (from channel)"] == pytest.approx(0.05)
    assert g["INV error bound (Prop. 7.6, linear geometric): n*E||v-theta||^2 >="] == pytest.approx(7818.55, abs=0.01)
    e = analyze_report(eq12_mechanism())
    assert e["identifiable (|X| independent columns)"] is False
    assert e["MLE consistency (seed 001 Lemma 6.1)"].startswith("NOT")
    s = analyze_report(parse("sue(k=8,eps=1.0)"))
    assert s["identifiable (|X| independent columns)"] is True
    assert s["MLE consistency (seed 001 Lemma 6.1)"].startswith("consistent")


def test_em_on_subset_uses_shared_engine():
    # ibu_on_subset with the whole alphabet is plain IBU
    mech = eq4_mechanism()
    obs = Observations.from_reports(mech, [0, 1, 1, 2, 2, 2])
    a = ibu_on_subset(obs, [0, 1, 2], delta=1e-12, max_iter=10_000, **PLAIN)
    b = em([DenseBlock(EQ4[:, [0, 1, 2]], [1, 2, 3])], 3, delta=1e-12, max_iter=10_000, **PLAIN)
    assert np.allclose(a.distribution, b.theta)
