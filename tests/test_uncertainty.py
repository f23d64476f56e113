"""Uncertainty of estimates (localpriv.inference.uncertainty): formulas against brute force, and coverage
on small seeded simulations with tolerances from the binomial spread of the coverage itself."""
import json

import numpy as np
import pytest

from localpriv import IntegerDomain, LocalPrivError, Observations, estimate, parse
from localpriv.estimators.em import log_likelihood
from localpriv.inference.uncertainty import _constrained_cov, fisher_information

DOM5 = IntegerDomain(0, 4)
THETA5 = np.array([0.1, 0.3, 0.25, 0.2, 0.15])


def _obs(spec, theta, n, rng, dom=DOM5):
    mech = parse(spec, dom)
    x = np.repeat(np.arange(theta.size), rng.multinomial(n, theta))
    z = mech.sample(x, rng)
    return Observations.from_reports(mech, z, dom)


def test_fisher_information_is_minus_the_hessian(rng):
    """I = sum_j c_j G_j G_j^T / p_j^2 equals -d^2 L by central differences (L is a sum of logs of
    linear forms, so the differences are accurate to ~1e-6 relative at step 1e-4)."""
    obs = _obs("geometric(eps=0.7,lo=0,hi=4)", THETA5, 3000, rng)
    blocks = obs.likelihood_blocks()
    info, grad, n = fisher_information(blocks, THETA5)
    h = 1e-4
    k = THETA5.size
    H = np.zeros((k, k))
    eye = np.eye(k)
    for i in range(k):
        for j in range(k):

            def f(a, b, i=i, j=j):
                return log_likelihood(blocks, THETA5 + a * h * eye[i] + b * h * eye[j])

            H[i, j] = (f(1, 1) - f(1, -1) - f(-1, 1) + f(-1, -1)) / (4 * h * h)
    np.testing.assert_allclose(info, -H, rtol=1e-4)
    # the gradient by central differences too
    g = [(log_likelihood(blocks, THETA5 + h * eye[i]) - log_likelihood(blocks, THETA5 - h * eye[i])) / (2 * h)
         for i in range(k)]
    np.testing.assert_allclose(grad, g, rtol=1e-6)
    assert n == 3000


def test_constrained_covariance_is_the_inverse_on_the_tangent_space(rng):
    """Cov = Z (Z^T I Z)^{-1} Z^T for any basis Z of {d : sum d = 0}."""
    obs = _obs("krr(eps=1.0)", THETA5, 5000, rng)
    info, _, _ = fisher_information(obs.likelihood_blocks(), THETA5)
    cov, *_ = _constrained_cov(info, np.arange(5))
    Z = np.linalg.qr(np.eye(5) - 1 / 5)[0][:, :4]
    ref = Z @ np.linalg.inv(Z.T @ info @ Z) @ Z.T
    np.testing.assert_allclose(cov, ref, atol=1e-12 * np.abs(ref).max() * 1e3)
    np.testing.assert_allclose(cov.sum(axis=1), 0, atol=1e-10 * np.abs(cov).max())


@pytest.mark.parametrize("spec", ["krr(eps=1.0)", "geometric(eps=0.5,lo=0,hi=4)"])
def test_inv_covariance_matches_simulation(spec):
    """The exact covariance of INV's raw inverse against its spread over 400 seeded data sets: the
    sample variance of 400 draws has relative sd sqrt(2/399) = 7 %, so 25 % is > 3.5 sd."""
    rng = np.random.default_rng(7)
    n, R = 2000, 400
    raws, covs = [], []
    for _ in range(R):
        est = estimate(_obs(spec, THETA5, n, rng), "inv-n")
        raws.append(est.extra["raw_inverse"])
        covs.append(est.uncertainty().raw_cov)
    emp = np.var(np.array(raws), axis=0, ddof=1)
    model = np.mean([np.diag(c) for c in covs], axis=0)
    np.testing.assert_allclose(model, emp, rtol=0.25)


def test_mi_covariance_matches_simulation():
    """MI on OUE: the covariance read from the reports' supports against 300 data sets."""
    rng = np.random.default_rng(11)
    n, R = 3000, 300
    raws, covs = [], []
    for _ in range(R):
        est = estimate(_obs("oue(eps=1.0)", THETA5, n, rng), "mi-n")
        raws.append(est.extra["raw_inverse"])
        covs.append(est.uncertainty().raw_cov)
    raws = np.array(raws)
    emp = np.cov(raws.T)
    model = np.mean(covs, axis=0)
    np.testing.assert_allclose(np.diag(model), np.diag(emp), rtol=0.3)
    # off-diagonal terms: -(p-q)^2 f_u f_v / (n (p-q)^2) = -f_u f_v / n, small; compare the sum
    assert abs(model.sum() - emp.sum()) < 0.3 * np.abs(np.diag(emp)).sum()


@pytest.mark.parametrize("spec, method", [("krr(eps=1.0)", "ibu"), ("geometric(eps=0.6,lo=0,hi=4)", "ibu"),
                                          ("krr(eps=1.0)", "inv-p"), ("oue(eps=1.0)", "mi-n")])
def test_coverage_of_the_mean_and_cells(spec, method):
    """Nominal 90 % intervals on 200 seeded data sets: coverage within 3 binomial sds of 0.90
    (sd = sqrt(0.9 * 0.1 / 200) = 2.1 points) for the mean, and on average over cells."""
    rng = np.random.default_rng(3)
    R, n, level = 200, 4000, 0.90
    x = np.arange(5.0)
    from localpriv.inference.estimate import quantile_crossing
    true_median = quantile_crossing(x, np.cumsum(THETA5), 0.5)
    hit_mean, hit_median, hit_cells = 0, 0, np.zeros(5)
    for _ in range(R):
        est = estimate(_obs(spec, THETA5, n, rng), method, **({"accelerate": "newton"} if method == "ibu" else {}))
        m = est.mean(level)
        hit_mean += m.lower <= THETA5 @ x <= m.upper
        med = est.quantile(0.5, level)
        hit_median += med.lower <= true_median <= med.upper
        lo, hi = est.ci(level)
        hit_cells += (lo <= THETA5) & (hi >= THETA5)
    sd = np.sqrt(level * (1 - level) / R)
    assert abs(hit_mean / R - level) < 3 * sd + 0.01
    assert abs(hit_median / R - level) < 3 * sd + 0.01
    assert abs(hit_cells.mean() / R - level) < 3 * sd + 0.01


def test_boundary_cells_get_one_sided_intervals(rng):
    """A value nobody has: the MLE puts it at 0; its interval is [0, u] with u > 0, shorter than the
    two-sided Wald half-width would be, and 0 covers the truth."""
    theta = np.array([0.4, 0.3, 0.3, 0.0, 0.0])
    obs = _obs("krr(eps=2.0)", theta, 20000, rng)
    est = estimate(obs, "ibu", accelerate="newton")
    u = est.uncertainty()
    lo, hi = est.ci(0.95)
    zero = est.distribution < 1e-9
    assert zero.any()
    assert np.all(lo[zero] == 0) and np.all(hi[zero] > 0) and np.all(hi[zero] < 0.05)
    assert np.all(u.kkt >= 0)
    # the rest of the mass sums to one within the intervals
    assert lo.sum() <= 1 <= hi.sum()


def test_quantiles_are_interpolated_and_bracketed(rng):
    obs = _obs("krr(eps=2.0)", THETA5, 50000, rng)
    est = estimate(obs, "ibu", accelerate="newton")
    med = est.quantile(0.5)
    # the interpolated median: the CDF is linear between x - 1/2 and x + 1/2
    F = np.cumsum(est.distribution)
    x = int(np.searchsorted(F, 0.5))
    below = F[x - 1] if x else 0.0
    assert med.value == pytest.approx(x - 0.5 + (0.5 - below) / est.distribution[x], abs=1e-12)
    assert med.lower < med.value < med.upper
    # a distribution's own median, e.g. of THETA5: F(1.5) = 0.4, F(2.5) = 0.65 -> 1.9
    from localpriv.inference.estimate import quantile_crossing
    assert quantile_crossing(np.arange(5.0), np.cumsum(THETA5), 0.5) == pytest.approx(1.9)
    band = est.cdf(0.95)
    assert np.all(band["lower"] <= band["cdf"]) and np.all(band["cdf"] <= band["upper"])
    with pytest.raises(LocalPrivError, match="strictly between"):
        est.quantile(1.0)


def test_statistics_need_an_ordered_domain(rng):
    from localpriv import CategoricalDomain
    dom = CategoricalDomain(["a", "b", "c"])
    mech = parse("krr(eps=1.0)", dom)
    obs = Observations.from_reports(mech, mech.sample(rng.integers(0, 3, 500), rng), dom)
    est = estimate(obs, "ibu")
    with pytest.raises(LocalPrivError, match="ordered numeric domain"):
        est.mean()
    top = est.top_k(2)
    assert list(top["rank"]) == [1, 2] and np.all((top["in_top_k"] >= 0) & (top["in_top_k"] <= 1))
    assert est.functional([1, 0, 0]).lower <= est.distribution[0] <= est.functional([1, 0, 0]).upper


def test_bootstrap_fallback_for_other_estimators(rng):
    obs = _obs("krr(eps=1.0)", THETA5, 3000, rng)
    est = estimate(obs, "inv-n")
    u = est.uncertainty(method="bootstrap")
    assert u.replicates.shape == (200, 5)
    lo, hi = u.cell_intervals(0.9)
    assert np.all(lo <= est.distribution) and np.all(est.distribution <= hi)
    with pytest.raises(LocalPrivError, match="between 0 and 1"):
        est.ci(1.5)


@pytest.mark.parametrize("spec, dom", [
    ("krr(eps=1.0)", DOM5), ("oue(eps=1.0)", DOM5), ("olh(eps=1.0)", DOM5), ("ss(eps=1.0)", DOM5),
    ("she(eps=1.0)", DOM5), ("geometric(eps=0.5,lo=0,hi=4)", DOM5), ("laplace(eps=0.5)", DOM5),
    ("planar-geometric(eps=1.0)", "grid"),
])
def test_gram_of_every_block_kind_matches_the_dense_product(spec, dom, rng):
    """G diag(w) G^T by each block's own method (or k products) equals the dense computation."""
    from localpriv.domains.grid import GridDomain
    from localpriv.inference.uncertainty import _gram
    if dom == "grid":
        dom = GridDomain(40.70, -74.02, 3, 4, 0.5)
    mech = parse(spec, dom)
    z = mech.sample(rng.integers(0, dom.size, 400), rng)
    block = Observations.from_reports(mech, z, dom).likelihood_blocks()[0]
    w = rng.random(block.counts.size)
    G = block.dense()
    ref = (G * w) @ G.T
    np.testing.assert_allclose(_gram(block, w), ref, rtol=1e-10, atol=1e-14 * np.abs(ref).max())


def test_coverage_experiment_quick(tmp_path, monkeypatch):
    """`localpriv reproduce coverage --quick` writes every coverage as a share in [0, 1] and a PNG
    (few bootstrap refits for the geometric MLE's face: this checks the record, not calibration)."""
    from localpriv.inference import uncertainty
    from reproductions import run_experiment
    monkeypatch.setattr(uncertainty, "FACE_REPLICATES", 5)
    monkeypatch.setattr(uncertainty, "PROFILE_MAX_CELLS", 0)  # no profile bounds: tested on their own
    rec = run_experiment("coverage", tmp_path, quick=True)
    settings = rec["results"]["settings"]
    assert set(settings) == {"k-RR", "geometric"}
    for s in settings.values():
        for cell in s["by_n"].values():
            for cov in cell["coverage"].values():
                assert 0.0 <= cov["mean"] <= 1.0 and 0.0 <= cov["cells_worst"] <= cov["cells_average"] <= 1.0
                assert cov["mean_width"] > 0
    assert (tmp_path / "coverage.png").stat().st_size > 0


def test_cli_estimate_with_intervals_and_statistics(tmp_path):
    import json
    import subprocess
    import sys

    import pandas as pd
    pd.DataFrame({"age": np.random.default_rng(0).integers(20, 60, 3000)}).to_csv(tmp_path / "v.csv", index=False)

    def run(*a):
        return subprocess.run([sys.executable, "-m", "localpriv.cli.main", *a], capture_output=True, text=True)

    assert run("perturb", str(tmp_path / "v.csv"), "-o", str(tmp_path / "r.parquet"), "-m", "krr(eps=2.0)",
               "-d", "0..99", "--seed", "1").returncode == 0
    r = run("estimate", str(tmp_path / "r.parquet"), "-d", "0..99", "--accelerate", "--ci", "0.9",
            "--stat", "mean,median", "-o", str(tmp_path / "e.json"), "--plot", str(tmp_path / "e.png"))
    assert r.returncode == 0, r.stderr
    assert "mean:" in r.stdout and "median:" in r.stdout
    d = json.loads((tmp_path / "e.json").read_text())
    lo, hi, p = np.array(d["ci"]["lower"]), np.array(d["ci"]["upper"]), np.array(d["distribution"])
    assert d["ci"]["level"] == 0.9 and np.all(lo <= p) and np.all(p <= hi)
    m = d["statistics"]["mean"]
    assert m["lower"] <= m["value"] <= m["upper"] and 20 <= m["value"] <= 60
    assert (tmp_path / "e.png").stat().st_size > 0
    bad = run("estimate", str(tmp_path / "r.parquet"), "-d", "0..99", "--ci", "1.5")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stderr.startswith("error:")


def _skewed(k):
    """An ages-like distribution on 0..k-1: a skewed bump with a long thin tail (many small cells)."""
    x = np.arange(k)
    w = x ** 2 * np.exp(-x / (k / 8))
    return w / w.sum()


def test_mean_covers_where_the_mle_is_pulled_to_the_uniform():
    """k-RR at eps = 1 on 40 values with a thin tail: most cells are below their noise, the MLE is
    biased towards the uniform, and the mean's interval is the unbiased inverse's (exact
    covariance); its coverage of nominal 90 % on 200 seeded data sets is within 3 binomial sds."""
    rng = np.random.default_rng(17)
    k, R, n, level = 40, 200, 10_000, 0.90
    dom = IntegerDomain(0, k - 1)
    theta = _skewed(k)
    x = np.arange(float(k))
    mech = parse("krr(eps=1.0)", dom)
    p = theta @ mech.channel()
    hits, methods = 0, set()
    for _ in range(R):
        obs = Observations.from_counts(mech, rng.multinomial(n, p), dom)
        est = estimate(obs, "ibu", accelerate="newton")
        m = est.mean(level)
        methods.add(m.method)
        hits += m.lower <= theta @ x <= m.upper
    assert methods == {"inversion (exact covariance)"}
    sd = np.sqrt(level * (1 - level) / R)
    assert abs(hits / R - level) < 3 * sd + 0.01


def test_inversion_interval_is_the_inverses_and_wald_is_kept_where_the_inverse_is_too_wide(rng):
    """The mean's inversion interval is INV's exact one (kept in [min w, max w], containing the
    estimate); under a geometric mechanism at small eps the cells whose inverse is more than
    INVERSION_MAX_RATIO times noisier keep their Wald intervals, the others take the inverse's."""
    from scipy import stats

    from localpriv.inference.uncertainty import INVERSION_MAX_RATIO
    dom = IntegerDomain(0, 29)
    theta = _skewed(30)
    x = np.arange(30.0)
    obs = _obs("krr(eps=1.0)", theta, 20_000, rng, dom)
    est = estimate(obs, "ibu", accelerate="newton")
    u = est.uncertainty()
    inv = estimate(obs, "inv-n").uncertainty()
    z = stats.norm.ppf(0.975)
    centre, sd = x @ inv.raw, np.sqrt(x @ inv.raw_cov @ x)
    m = est.mean(0.95)
    assert m.method == "inversion (exact covariance)"
    assert m.lower == pytest.approx(min(max(centre - z * sd, 0.0), m.value), rel=1e-9)
    assert m.upper == pytest.approx(max(min(centre + z * sd, 29.0), m.value), rel=1e-9)
    wald = est.uncertainty("wald").functional(x, 0.95)
    assert wald.method == "fisher (delta)" and wald.upper - wald.lower < m.upper - m.lower
    assert u.raw is not None
    # geometric at eps = 0.05 over 30 values: the inverse's cells are far noisier than the MLE's
    obs = _obs("geometric(eps=0.05,lo=0,hi=29)", theta, 20_000, rng, dom)
    est = estimate(obs, "ibu", accelerate="newton")
    u = est.uncertainty()
    se_inv, se_f = np.sqrt(np.diag(u.raw_cov)), u.std_error_fisher()
    use = se_inv <= INVERSION_MAX_RATIO * se_f
    assert use.any() and not use.all()  # both kinds of cells in this setting
    np.testing.assert_array_equal(est.std_error(), np.where(use, se_inv, se_f))
    lo, hi = est.ci(0.95)
    wlo, whi = est.uncertainty("wald").cell_intervals(0.95)
    np.testing.assert_array_equal(lo[~use], wlo[~use])
    np.testing.assert_array_equal(hi[~use], whi[~use])


def test_free_will_mixture_combines_the_mechanisms_inverses():
    """Three k-RR mechanisms (eps 0.5, 1, 4) in one GIBU estimate: each block's inverse is unbiased,
    combined per functional by inverse-variance weights; the mean's coverage of nominal 90 % on
    200 seeded data sets is within 3 binomial sds, and its variance is the weighted one."""
    rng = np.random.default_rng(23)
    k, R, level = 40, 200, 0.90
    dom = IntegerDomain(0, k - 1)
    theta = _skewed(k)
    x = np.arange(float(k))
    mechs = [parse(f"krr(eps={e})", dom) for e in (0.5, 1.0, 4.0)]
    hits = 0
    for r in range(R):
        from localpriv.data.observations import ObservationBlock
        blocks = []
        for m in mechs:
            c = rng.multinomial(3000, theta @ m.channel())
            keep = np.flatnonzero(c)
            blocks.append(ObservationBlock(m, keep, c[keep]))
        est = estimate(Observations(blocks, dom), "gibu", accelerate="newton")
        mean = est.mean(level)
        hits += mean.lower <= theta @ x <= mean.upper
        if r == 0:
            u = est.uncertainty()
            parts = u.extra["inverse_blocks"]
            assert len(parts) == 3 and mean.method == "inversion (exact covariance)"
            var = 1.0 / sum(1.0 / (x @ C @ x) for _, C in parts)
            c, sd, use = u.gaussian(x[None, :])
            assert use[0] and sd[0] == pytest.approx(np.sqrt(var), rel=1e-12)
    sd = np.sqrt(level * (1 - level) / R)
    assert abs(hits / R - level) < 3 * sd + 0.01


def test_coverage_runs_split_by_setting_merge_into_the_whole_run(tmp_path, monkeypatch):
    from localpriv.inference import uncertainty
    from reproductions import coverage as C
    from reproductions import run_experiment
    monkeypatch.setattr(uncertainty, "FACE_REPLICATES", 5)  # the record's bookkeeping, not calibration
    monkeypatch.setattr(uncertainty, "PROFILE_MAX_CELLS", 0)
    S = [C.SETTINGS[0], C.SETTINGS[4]]
    kw = {"n": [500], "runs": 3}
    whole = run_experiment("coverage", tmp_path / "w", overrides={"settings": S, **kw})
    run_experiment("coverage", tmp_path / "a", overrides={"settings": S[:1], **kw})
    run_experiment("coverage", tmp_path / "b", overrides={"settings": S[1:], **kw})
    merged = C.merge([tmp_path / "a" / "coverage.json", tmp_path / "b" / "coverage.json"], tmp_path / "m")
    for name in (s["name"] for s in S):
        assert merged["results"]["settings"][name]["by_n"]["500"]["coverage"] == \
            json.loads(json.dumps(whole["results"]["settings"][name]["by_n"]["500"]["coverage"]))
    assert (tmp_path / "m" / "coverage.png").exists()
    with pytest.raises(LocalPrivError, match="more than one record"):
        C.merge([tmp_path / "a" / "coverage.json", tmp_path / "a" / "coverage.json"], tmp_path / "x")


@pytest.mark.parametrize("spec", ["oue(eps=1.0)", "ss(eps=1.0)", "geometric(eps=0.5,lo=0,hi=7)"])
def test_bootstrap_redraws_reports_of_every_kind(spec):
    """The parametric bootstrap redraws bit-vector reports (OUE, SS) as reports, not as channel
    column indices (a regression: 'reports are bit vectors, got int64 values')."""
    import localpriv as lp
    from localpriv.data.observations import Observations
    from localpriv.domains import IntegerDomain
    from localpriv.inference.uncertainty import _bootstrap
    dom = IntegerDomain(0, 7)
    rng = np.random.default_rng(3)
    mech = lp.parse(spec, dom)
    obs = Observations.from_reports(mech, mech.sample(rng.integers(0, 8, 2000), rng), dom)
    est = lp.estimate(obs, "ibu")
    u = _bootstrap(est, obs, np.random.default_rng(4), replicates=5)
    assert u.replicates.shape == (5, 8) and np.allclose(u.replicates.sum(axis=1), 1.0)
    assert np.all(u.replicates.std(axis=0) > 0)  # really redrawn, not copies of the estimate
