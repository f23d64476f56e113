"""The default estimator ``auto``: its closed forms, its bounded cost and its choice."""
from __future__ import annotations

import numpy as np
import pytest

import localpriv
from localpriv.data.observations import Observations
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.domains.grid import GridDomain
from localpriv.estimators import default_estimator, fit
from localpriv.estimators.auto import (
    AUTO_MAX_ITER,
    EMS_BUDGET,
    EMS_FINAL_BUDGET,
    EMS_STEPS,
    POWER_MAX_CELLS,
    POWER_MAX_CELLS_CATEGORICAL,
    cdf_sure,
    cell_risks,
    heat_smooth,
    smoothing_diagonal,
    sure_terms,
    tv_risk,
)
from localpriv.estimators.oracles import pure_parameters, support_counts
from localpriv.estimators.postprocess import norm_sub, power_moments
from localpriv.estimators.regularized import smooth
from localpriv.inference.metrics import emd_line
from localpriv.inference.simulation import simulate_block


def _obs(spec: str, domain, theta: np.ndarray, n: int, seed: int) -> Observations:
    mech = localpriv.parse(spec, domain)
    return Observations([simulate_block(mech, theta, n, np.random.default_rng(seed))], domain)


@pytest.mark.parametrize("shape", [(7,), (3, 4), (40,)])
@pytest.mark.parametrize("h", [0.3, 1.0, 4.0])
def test_heat_smooth_is_ems_smoother_and_its_diagonal_is_exact(shape, h):
    k = int(np.prod(shape))
    S = np.stack([heat_smooth(np.eye(k)[:, j], shape, h) for j in range(k)], axis=1)
    v = np.random.default_rng(1).random(k)
    np.testing.assert_allclose(heat_smooth(v, shape, h), smooth(v, shape, h), atol=1e-12)
    np.testing.assert_allclose(smoothing_diagonal(shape, h), np.diag(S), atol=1e-12)
    np.testing.assert_allclose(S, S.T, atol=1e-12)
    np.testing.assert_allclose(S.sum(axis=0), 1.0, atol=1e-12)


def test_sure_terms_is_the_trace_of_sigma_j():
    rng = np.random.default_rng(2)
    k, n = 9, 50.0
    D, a, d, u, w = rng.random(k) + 1.0, rng.random(k), rng.random(k), rng.random(k), rng.random(k)
    sigma = np.diag(D) - np.outer(a, a) / n
    J = np.diag(d) - np.outer(u, w)
    assert sure_terms(D, a, n, d, u, w) == pytest.approx(np.trace(sigma @ J), rel=1e-12)


def test_norm_sub_jacobian_is_the_projection_on_its_support():
    """The closed form SURE charges Norm-Sub with: J = I_S - 1_S 1_S^T / |S| (finite differences)."""
    v = np.array([0.5, 0.3, -0.1, 0.25, 0.02, -0.3])
    g = norm_sub(v)
    s = (g > 0).astype(float)
    J = np.diag(s) - np.outer(s, s) / s.sum()
    step = 1e-7
    num = np.stack([(norm_sub(v + step * e) - g) / step for e in np.eye(v.size)], axis=1)
    np.testing.assert_allclose(num, J, atol=1e-6)


def test_default_estimator_is_auto_and_its_intervals_reuse_its_mle():
    dom = IntegerDomain(0, 29)
    theta = np.exp(-0.5 * ((np.arange(30) - 12) / 4.0) ** 2)
    theta /= theta.sum()
    obs = _obs("krr(eps=1.0)", dom, theta, 5000, 3)
    assert default_estimator(dom) == default_estimator(CategoricalDomain(["a", "b"])) == "auto"
    est = localpriv.estimate(obs)
    assert est.estimator == "auto" and est.converged
    unc = est.uncertainty()
    assert unc.method == "anchored" and unc.extra["mle_estimate"] is est.extra["mle"]
    lo, hi = est.ci(0.9)
    assert np.all(lo <= est.distribution + 1e-12) and np.all(hi >= est.distribution - 1e-12)


def test_sure_path_beats_the_mle_where_the_audit_found_the_old_default_lost():
    """A skewed categorical truth (one value ~90%, 40 rare ones) under k-RR: the choice is not the
    MLE, and its squared error is below the MLE's (fixed seed; the gap is several-fold)."""
    k = 41
    theta = np.full(k, 0.1 / (k - 1))
    theta[0] = 0.9
    dom = CategoricalDomain([f"c{i}" for i in range(k)])
    obs = _obs("krr(eps=1.0)", dom, theta, 10_000, 4)
    est, mle = fit(obs, "auto"), fit(obs, "ibu")
    assert est.extra["auto"]["choice"] != "mle"
    assert np.sum((est.distribution - theta) ** 2) < 0.5 * np.sum((mle.distribution - theta) ** 2)


def test_smooth_truth_on_a_line_is_smoothed():
    dom = IntegerDomain(0, 73)
    theta = np.exp(-0.5 * ((np.arange(74) - 25) / 9.0) ** 2)
    theta /= theta.sum()
    obs = _obs("oue(eps=1.0)", dom, theta, 5000, 5)
    est, mle = fit(obs, "auto"), fit(obs, "ibu")
    assert est.extra["auto"]["choice"] == "smooth-ns" and est.extra["auto"]["bandwidth"] > 1
    assert np.sum((est.distribution - theta) ** 2) < 0.5 * np.sum((mle.distribution - theta) ** 2)


def test_every_fit_has_a_budget_on_adversarial_cases():
    """k-RR on 1,000 values at low eps (the MLE on a face, a flat risk curve) and the geometric
    mechanism on 300 values at eps 0.02 (where EMS's selection chose almost no smoothing and ran
    tens of thousands of evaluations): the evaluations stay within the declared budgets."""
    k = 1000
    theta = 1.0 / np.arange(1, k + 1) ** 1.1
    theta /= theta.sum()
    obs = _obs("krr(eps=0.5)", CategoricalDomain([f"v{i}" for i in range(k)]), theta, 10_000, 6)
    est = fit(obs, "auto")
    assert est.extra["evaluations"] <= AUTO_MAX_ITER
    dom = IntegerDomain(0, 299)
    theta = np.exp(-0.5 * ((np.arange(300) - 100) / 30.0) ** 2)
    theta /= theta.sum()
    obs = _obs("geometric(eps=0.02)", dom, theta, 20_000, 7)
    est = fit(obs, "auto")
    bound = 2 * AUTO_MAX_ITER + len(EMS_STEPS) * EMS_BUDGET + EMS_FINAL_BUDGET  # MLEs of a half and of all
    assert est.extra["evaluations"] <= bound
    # a budget reached is reported, never hidden
    low = fit(obs, "auto", max_iter=2)
    assert low.converged is False and low.extra["evaluations"] <= 2 * 2 + len(EMS_STEPS) * EMS_BUDGET \
        + EMS_FINAL_BUDGET


def test_mixtures_and_grids_take_the_held_out_path():
    theta = np.array([8, 6, 4, 3, 2, 1], dtype=float)
    theta /= theta.sum()
    cat = CategoricalDomain(list("abcdef"))
    rng = np.random.default_rng(8)
    blocks = [simulate_block(localpriv.parse(s, cat), theta, 1500, rng) for s in ("krr(eps=1.0)", "oue(eps=2.0)")]
    est = fit(Observations(blocks, cat), "auto")
    assert est.extra["auto"]["rule"].startswith("largest held-out") and "shrinkage" in est.extra["auto"]
    assert abs(est.distribution.sum() - 1.0) < 1e-9
    grid = GridDomain(40.0, -74.0, 8, 8, 0.5)
    cells = np.exp(-0.5 * ((np.arange(64) % 8 - 3) ** 2 + (np.arange(64) // 8 - 4) ** 2) / 4.0)
    obs = _obs("planar-geometric(eps=1.0)", grid, cells / cells.sum(), 3000, 9)
    est = fit(obs, "auto")
    assert est.extra["auto"]["choice"] in ("mle", "smooth", "ems") and "bandwidth" in est.extra["auto"]
    assert est.distribution.shape == (64,) and abs(est.distribution.sum() - 1.0) < 1e-9


def test_power_posterior_variance_is_the_slope_of_the_mean():
    """Tweedie's formula, which SURE charges PowerNS with: d E[f | f~] / d f~ = Var[f | f~] / sigma^2."""
    raw = np.array([0.002, 0.01, 0.05, 0.2, -0.01])
    s2 = np.full(raw.size, 1e-4)
    mean, var, a = power_moments(raw, s2, 1e5, exponent=1.5)
    step = 1e-6
    up, _, _ = power_moments(raw + step, s2, 1e5, exponent=1.5)
    np.testing.assert_allclose((up - mean) / step, var / s2, rtol=2e-2, atol=1e-3)
    assert a == 1.5


def test_refuses_domains_past_its_bound_in_one_line(monkeypatch):
    import localpriv.estimators.auto as auto_module
    monkeypatch.setattr(auto_module, "MAX_CELLS", 5)
    theta = np.full(6, 1 / 6)
    obs = _obs("krr(eps=1.0)", CategoricalDomain(list("abcdef")), theta, 500, 10)
    with pytest.raises(localpriv.LocalPrivError, match="at most 5 cells") as err:
        fit(obs, "auto")
    assert "\n" not in str(err.value)


def _partial_sums(k: int) -> np.ndarray:
    """``A``: the ``(k-1) x k`` partial sums (rows ``r = 0..k-2``)."""
    return np.tril(np.ones((k, k)))[:-1]


def test_cdf_sure_terms_are_the_dense_formula():
    rng = np.random.default_rng(6)
    k, n = 12, 80.0
    D, a = rng.random(k) + 1.0, rng.random(k)
    sigma = np.diag(D) - np.outer(a, a) / n
    J = rng.standard_normal((k, k))
    g, raw = rng.random(k), rng.random(k)
    A = _partial_sums(k)
    r = A @ (g - raw)
    want = r @ r - np.trace(A @ sigma @ A.T) + 2.0 * (np.trace(A @ J @ sigma @ A.T) + 0.25)
    assert cdf_sure(g, raw, sigma, J, jump=0.25) == pytest.approx(want, rel=1e-10)


def test_cdf_sure_is_unbiased_for_a_linear_smoother():
    """``f~ ~ N(f, Sigma)``, ``g = S_h f~`` (``J = S_h``): the mean of the estimate over draws is the
    mean squared error of the cumulative distribution, within 4 standard errors of the difference."""
    rng = np.random.default_rng(7)
    k, h = 15, 1.5
    f = np.exp(-0.5 * ((np.arange(k) - 6) / 3.0) ** 2)
    f /= f.sum()
    D = 0.002 + 0.01 * f
    sigma = np.diag(D) - np.outer(f, f) * 0.002
    S = np.stack([heat_smooth(np.eye(k)[:, j], (k,), h) for j in range(k)], axis=1)
    A = _partial_sums(k)
    L = np.linalg.cholesky(sigma)
    draws = f[None, :] + rng.standard_normal((2000, k)) @ L.T
    est = np.array([cdf_sure(S @ x, x, sigma, S) for x in draws])
    loss = np.sum(((draws @ S.T - f) @ A.T) ** 2, axis=1)
    diff = est - loss
    assert abs(diff.mean()) < 4.0 * diff.std() / np.sqrt(diff.size)


def test_a_spiky_line_is_not_smoothed_and_the_rule_is_the_cdf_one():
    """A spiky truth on a line (47 % on one value, four smaller spikes), k-RR at eps 4: the rule is the
    SURE of the cumulative distribution, the choice is not a smoothing, and its EMD is at most the
    heat-kernel smoothing's (fixed seed)."""
    k = 60
    theta = np.full(k, 0.1 / k)
    for v, m in ((30, 0.47), (20, 0.1), (40, 0.13), (45, 0.1), (50, 0.1)):
        theta[v] += m
    theta /= theta.sum()
    dom = IntegerDomain(0, k - 1)
    obs = _obs("krr(eps=4.0)", dom, theta, 100_000, 8)
    est = fit(obs, "auto")
    info = est.extra["auto"]
    assert "cumulative distribution" in info["rule"] and info["choice"] != "smooth-ns"
    assert set(info["cdf_scores"]) >= {"mle", "norm-sub", "norm-cut", "base-cut", "power", "power-ns", "smooth-ns"}
    smoothed = norm_sub(heat_smooth(est.extra["mle"].distribution, (k,), info["bandwidth"]))
    assert emd_line(est.distribution, theta) <= emd_line(smoothed, theta)


def test_categorical_data_choose_by_the_tv_bound_of_the_cells_sure():
    """On categorical data the choice minimizes (1/2) sum_v sqrt(max(R_v, 0)) over the candidates,
    Power among them, and each candidate's cell estimates R_v sum to its squared-error SURE."""
    dom = CategoricalDomain([f"c{i}" for i in range(8)])
    theta = np.array([0.4, 0.2, 0.15, 0.1, 0.08, 0.05, 0.015, 0.005])
    obs = _obs("krr(eps=1.0)", dom, theta, 5000, 9)
    info = fit(obs, "auto").extra["auto"]
    assert "total variation" in info["rule"] and "cdf_scores" not in info and "norm-cut" not in info["scores"]
    assert set(info["tv_scores"]) == {"mle", "norm-sub", "shrink-ns", "base-cut", "power", "power-ns"}
    assert info["choice"] == min(info["tv_scores"], key=info["tv_scores"].get)
    block = obs.blocks[0]
    p, q = pure_parameters(block.mechanism)
    n = float(block.n)
    raw = (support_counts(block) / n - q) / (p - q)
    pi = q + (p - q) * raw
    D, a = pi / (n * (p - q) ** 2), pi / (p - q)
    g = norm_sub(raw)
    s = (g > 0).astype(float)
    r = cell_risks(g, raw, D, a, n, s, s / s.sum(), s)
    assert info["tv_scores"]["norm-sub"] == pytest.approx(tv_risk(r), rel=1e-12)
    assert float(r.sum()) == pytest.approx(info["scores"]["norm-sub"], rel=1e-9, abs=1e-15)
    # every candidate's cells are its SURE split by cell: the halved root-sum is at least half the
    # root of the SURE (concavity), so the two scores are tied by sqrt(SURE)/2 <= TV score
    for name, tv in info["tv_scores"].items():
        assert tv >= 0.5 * np.sqrt(max(info["scores"][name], 0.0)) - 1e-12


def test_cell_risks_are_unbiased_for_a_linear_shrinkage():
    """For g = c f~ (J = c I) and Gaussian f~ with covariance diag(D) - a a^T / n, the mean of each
    cell's estimate over draws is that cell's squared error (tolerance: 5 standard errors)."""
    rng = np.random.default_rng(11)
    k, n, c = 5, 50.0, 0.6
    f = np.array([0.5, 0.3, 0.1, 0.1, 0.0])
    D = np.array([0.02, 0.015, 0.01, 0.01, 0.008])
    a = np.array([0.3, 0.2, 0.1, 0.1, 0.05])
    cov = np.diag(D) - np.outer(a, a) / n
    draws = rng.multivariate_normal(f, cov, size=4000)
    est = np.array([cell_risks(c * x, x, D, a, n, np.full(k, c), np.zeros(k), np.zeros(k)) for x in draws])
    truth = (c - 1.0) ** 2 * f ** 2 + c ** 2 * np.diag(cov)
    se = est.std(axis=0) / np.sqrt(draws.shape[0])
    assert np.all(np.abs(est.mean(axis=0) - truth) <= 5 * se)


def test_a_sparse_skewed_truth_is_not_spread_over_the_rare_cells():
    """One value with 90 % of the mass and 40 rare ones under k-RR at eps 0.5 (the native-country
    shape): the choice is Power or PowerNS, whose TV is below Norm-Sub's (fixed seed; by a third)."""
    k = 41
    theta = np.full(k, 0.1 / (k - 1))
    theta[0] = 0.9
    dom = CategoricalDomain([f"c{i}" for i in range(k)])
    obs = _obs("krr(eps=0.5)", dom, theta, 10_000, 4)
    est, ns = fit(obs, "auto"), fit(obs, "norm-sub")
    assert est.extra["auto"]["choice"] in ("power", "power-ns")
    tv = 0.5 * np.abs(est.distribution - theta).sum()
    assert tv < 0.8 * (0.5 * np.abs(ns.distribution - theta).sum())


def test_power_is_a_candidate_on_categorical_data_past_the_line_bound():
    k = POWER_MAX_CELLS + 44
    theta = 1.0 / np.arange(1, k + 1) ** 1.1
    theta /= theta.sum()
    dom = CategoricalDomain([f"v{i}" for i in range(k)])
    info = fit(_obs("krr(eps=4.0)", dom, theta, 20_000, 5), "auto").extra["auto"]
    assert {"power", "power-ns"} <= set(info["tv_scores"])
    assert POWER_MAX_CELLS < k <= POWER_MAX_CELLS_CATEGORICAL


def test_power_moments_equal_the_per_cell_integration():
    """The chunked integration equals Power's quadrature cell by cell (merged grids, weights of the
    distinct points), including fine grids clipped at 1/n or at 1 and a cell of zero variance."""
    n = 1e4
    raw = np.array([0.0, 1e-5, 0.3, 0.999, -0.2, 1.3, 0.05])
    s2 = np.array([1e-4, 1e-4, 4e-3, 1e-4, 1e-4, 1e-2, 0.0])
    mean, var, a = power_moments(raw, s2, n, exponent=1.3, grid=200, near=50)
    lo = 1.0 / n
    base = np.geomspace(lo, 1.0, 200)
    for v, t, m, w2 in zip(raw, s2, mean, var):
        if t == 0:
            assert m == min(max(v, lo), 1.0) and w2 == 0
            continue
        sd = np.sqrt(t)
        near = (np.linspace(max(lo, v - 8 * sd), min(1.0, v + 8 * sd), 50)
                if v + 8 * sd > lo and v - 8 * sd < 1.0 else np.empty(0))
        x = np.unique(np.concatenate([base, near]))
        lw = np.log(np.gradient(x)) - 1.3 * np.log(x) - 0.5 * (v - x) ** 2 / t
        wt = np.exp(lw - lw.max())
        ref = float((wt * x).sum() / wt.sum())
        assert m == pytest.approx(ref, rel=1e-10)
        assert w2 == pytest.approx(float((wt * (x - ref) ** 2).sum() / wt.sum()), rel=1e-8, abs=1e-300)
    assert a == 1.3


def test_line_scores_equal_the_dense_cdf_sure():
    """The structured ``O(k)`` scores of the line's rule equal :func:`cdf_sure` with dense ``Sigma``
    and ``J`` (k-RR: ``Sigma = diag(pi) / (n (p-q)^2) - pi pi^T / (n (p-q)^2)``)."""
    k, n = 30, 20_000
    theta = np.exp(-0.5 * ((np.arange(k) - 11) / 4.0) ** 2)
    theta /= theta.sum()
    dom = IntegerDomain(0, k - 1)
    obs = _obs("krr(eps=1.0)", dom, theta, n, 10)
    info = fit(obs, "auto").extra["auto"]
    block = obs.blocks[0]
    p, q = pure_parameters(block.mechanism)
    raw = (support_counts(block) / n - q) / (p - q)
    pi = q + (p - q) * raw
    sigma = (np.diag(pi) - np.outer(pi, pi)) / (n * (p - q) ** 2)
    g = norm_sub(raw)
    s = (g > 0).astype(float)
    proj = np.diag(s) - np.outer(s, s) / s.sum()
    assert info["cdf_scores"]["norm-sub"] == pytest.approx(cdf_sure(g, raw, sigma, proj), rel=1e-9, abs=1e-15)
    S = np.stack([heat_smooth(np.eye(k)[:, j], (k,), info["bandwidth"]) for j in range(k)], axis=1)
    gs = norm_sub(heat_smooth(raw, (k,), info["bandwidth"]))
    ss = (gs > 0).astype(float)
    J = ss[:, None] * S - np.outer(ss, ss @ S) / ss.sum()
    assert info["cdf_scores"]["smooth-ns"] == pytest.approx(cdf_sure(gs, raw, sigma, J), rel=1e-9, abs=1e-15)
