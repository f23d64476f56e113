"""Large domains: Hadamard response ``hr``, count-mean sketches ``cms``, ``hcms``.

Fixed seeds; every statistical tolerance is ``Z`` standard deviations of the quantity tested, the
standard deviation from the estimator's exact variance (or a proven bound on it), ``Z`` the normal
quantile at ``1e-6 / (2 k)`` (Bonferroni over the values).
"""
import math
import warnings

import numpy as np
import pytest
import xxhash
from scipy import stats

from localpriv import estimate
from localpriv.data.observations import Observations
from localpriv.estimators.em import em
from localpriv.likelihood.structured import fwht
from localpriv.mechanisms import parse
from localpriv.mechanisms.privacy import ldp_epsilon
from localpriv.mechanisms.stablehash import hash_keys, to_range
from localpriv.utils.validation import LocalPrivError, PrivacyWarning

ALPHA = 1e-6


def z_for(k: int) -> float:
    return float(stats.norm.isf(ALPHA / (2 * k)))


def all_reports(mech):
    """Every output of a small mechanism, in channel order, as reports."""
    idx = np.arange(mech.n_outputs)
    if mech.report_kind != "binary":
        return idx
    bits = (idx % 2 ** mech.m)[:, None] >> np.arange(mech.m)[None, :] & 1
    return mech.encode(idx // 2 ** mech.m, bits)


# ---- the transform ------------------------------------------------------------------------------
def test_fwht_is_the_sylvester_matrix():
    from scipy.linalg import hadamard

    a = np.random.default_rng(0).normal(size=(3, 64))
    assert np.allclose(fwht(a), a @ hadamard(64), rtol=0, atol=1e-12)
    assert np.array_equal(fwht(np.eye(8)), hadamard(8).astype(float))
    with pytest.raises(LocalPrivError, match="power of two"):
        fwht(np.ones(6))


# ---- Hadamard response -----------------------------------------------------------------------------
def test_hr_construction_and_sizes():
    m = parse("hr(k=100,eps=0.5)")
    assert (m.blocks, m.width, m.K) == (1, 128, 128)   # high privacy: K = smallest power of 2 > k
    m = parse("hr(k=127,eps=1.0)")
    assert m.K == 128
    m = parse("hr(k=128,eps=1.0)")
    assert m.K == 256                                  # K >= k + 1: row 0 is not used
    m = parse("hr(k=100,eps=3.0)")                     # B = 2^floor(log2 e^3) = 16, b: 16 (b-1) >= 100
    assert (m.blocks, m.width, m.K) == (16, 8, 128)
    m = parse("hr(k=3,eps=9.0)")                       # B capped by 2k = 6 -> 4, b = 2
    assert (m.blocks, m.width) == (4, 2)
    assert str(parse("hr(k=10,eps=2.0,blocks=2)")) == "hr(k=10,eps=2.0,blocks=2)"
    # the channel is the paper's: e^eps on C_x, 1 elsewhere, normalized
    m = parse("hr(k=6,eps=1.0)")
    M = m.channel()
    H = fwht(np.eye(8))
    expect = np.where(H[1:7] > 0, math.e, 1.0) / (4 * math.e + 4)
    assert np.allclose(M, expect, rtol=1e-14, atol=0)


@pytest.mark.parametrize("spec", ["hr(k=5,eps=0.5)", "hr(k=20,eps=2.0)", "hr(k=13,eps=4.0,blocks=2)",
                                  "hr(k=9,eps=30.0)"])
@pytest.mark.filterwarnings("ignore::localpriv.mechanisms.base.LargeEpsilonWarning")
def test_hr_fast_block_equals_dense(spec):
    m = parse(spec)
    rng = np.random.default_rng(1)
    y = np.sort(rng.choice(m.K, size=min(m.K, 40), replace=False))
    counts = rng.integers(1, 9, size=y.size).astype(float)
    block = m.likelihood_block(y, counts)
    G = m.likelihood(y)
    assert np.array_equal(block.dense(), G)
    theta = rng.dirichlet(np.ones(m.k))
    w = rng.random(y.size)
    for got, want in ((block.forward(theta), theta @ G), (block.backward(w), G @ w),
                      (block.hessian_diagonal(w), (G * G) @ w)):
        assert np.max(np.abs(got - want) / np.abs(want)) <= 1e-12
    assert (np.max(np.abs(m.output_probabilities(theta) - theta @ m.channel()))
            <= 1e-12 * theta @ m.channel().max(axis=1))
    assert m.epsilon_ldp() == pytest.approx(ldp_epsilon(m.channel()), rel=1e-12)


@pytest.mark.parametrize("spec", ["hr(k=7,eps=1.0)", "hr(k=12,eps=3.0)", "hr(k=10,eps=2.0,blocks=8)"])
def test_hr_unbiased_exactly_and_in_samples(spec):
    m = parse(spec)
    rng = np.random.default_rng(2)
    theta = rng.dirichlet(np.ones(m.k))
    M = m.channel()
    # the estimator is linear in the reports: L[y] is one report's contribution
    L = np.array([m.inverse_counts(np.eye(m.K)[y]) for y in range(m.K)])
    q = theta @ M
    assert np.max(np.abs(q @ L - theta)) <= 1e-13                     # unbiased, exactly
    assert np.allclose(q @ L ** 2 - theta ** 2, m.variance(theta, 1), rtol=1e-12, atol=1e-15)
    n = 50_000
    x = rng.choice(m.k, size=n, p=theta)
    est = m.unbiased(m.sample(x, rng))
    emp = np.bincount(x, minlength=m.k) / n                           # condition on the inputs drawn
    sd = np.sqrt(m.variance(emp, n))
    assert np.all(np.abs(est - emp) <= z_for(m.k) * sd)


def test_hr_samples_follow_the_channel_at_a_larger_k():
    m = parse("hr(k=40,eps=2.5)")
    rng = np.random.default_rng(3)
    M = m.channel()
    pvals = []
    for xv in (0, 7, 39):  # first, middle and last block
        y = m.sample(np.full(40_000, xv), rng)
        obs = np.bincount(y, minlength=m.K)
        pvals.append(stats.chisquare(obs, M[xv] * y.size).pvalue)
    assert min(pvals) * len(pvals) > ALPHA


def test_hr_estimators_through_the_public_api():
    k = 50
    rng = np.random.default_rng(4)
    theta = rng.dirichlet(np.full(k, 0.5))
    m = parse(f"hr(k={k},eps=2.0)")
    x = rng.choice(k, size=40_000, p=theta)
    obs = Observations.from_reports(m, m.sample(x, rng))
    emp = np.bincount(x, minlength=k) / x.size
    sd = np.sqrt(m.variance(emp, x.size))
    inv = estimate(obs, "inv-n")
    raw = inv.extra["raw_inverse"]                                    # the closed form, via inverse_counts
    assert np.all(np.abs(raw - emp) <= z_for(k) * sd)
    ibu = estimate(obs, "ibu")
    # the MLE is asymptotically efficient: no worse than the unbiased estimator's spread
    assert np.all(np.abs(ibu.distribution - emp) <= z_for(k) * sd)
    assert ibu.loglik >= inv.loglik


# ---- sketches: hashes, reports ---------------------------------------------------------------------
def test_sketch_hashes_are_xxh64_of_the_index():
    m = parse("hcms(k=1000,eps=1.0,m=64,d=5)")
    c = parse("cms(k=1000,eps=1.0,m=100,d=5)")
    for x, j in ((0, 0), (1, 3), (999, 4), (517, 2)):
        ref = xxhash.xxh64_intdigest(int(x).to_bytes(8, "little"), seed=j)
        assert m.hashes.table("t")[j, x] == ref % 64
        assert c.hashes.table("t")[j, x] == ref % 100
        assert int(to_range(hash_keys(np.uint64(x), np.uint64(j)), 64)) == ref % 64


def test_cms_report_layout():
    m = parse("cms(k=10,eps=1.0,m=12,d=300)")
    bits = np.zeros((2, 12), dtype=np.uint8)
    bits[0, [0, 11]] = 1
    r = m.encode([258, 1], bits)
    assert r.shape == (2, 4 + 2) and r.dtype == np.uint8
    assert r[0].tolist() == [0, 0, 1, 2, 0b10000000, 0b00010000]   # row big-endian, bits as packbits
    rows, packed = m.decode(r)
    assert rows.tolist() == [258, 1] and np.array_equal(np.unpackbits(packed, axis=1, count=12), bits)
    bad = r.copy()
    bad[0, :4] = [0, 0, 1, 44]                                        # row 300 >= d
    with pytest.raises(LocalPrivError, match="rows outside"):
        m.decode(bad)
    bad = r.copy()
    bad[1, -1] |= 1                                                    # a bit beyond m
    with pytest.raises(LocalPrivError, match="beyond bit 11"):
        m.decode(bad)
    z = m.sample(np.arange(10), np.random.default_rng(0))
    assert z.shape == (10, 6)
    h = parse("hcms(k=10,eps=1.0,m=8,d=3)")
    j, l, s = h.decode(h.sample(np.arange(10), np.random.default_rng(0)))
    assert j.max() < 3 and l.max() < 8 and set(np.unique(s)) <= {-1, 1}


# ---- sketches: estimators and blocks -----------------------------------------------------------------
SKETCHES = ["hcms(k=6,eps=1.0,m=4,d=3)", "hcms(k=9,eps=3.0,m=8,d=2)", "cms(k=6,eps=2.0,m=4,d=3)",
            "cms(k=5,eps=1.0,m=3,d=2)"]


@pytest.mark.parametrize("spec", SKETCHES)
def test_sketch_estimator_mean_and_variance_exactly(spec):
    m = parse(spec)
    rng = np.random.default_rng(5)
    theta = rng.dirichlet(np.ones(m.k))
    reps = all_reports(m)
    M = m.channel()
    L = np.array([m.unbiased(reps[i:i + 1]) for i in range(reps.shape[0])])
    q = theta @ M
    mean = q @ L
    assert np.max(np.abs(mean - m.expected_estimate(theta))) <= 1e-13
    assert np.max(q @ L ** 2 - mean ** 2) <= m.variance_bound(1) * (1 + 1e-12)
    # unbiased over the hash functions: E[c_xv] = 1/m for v != x, so the mean is theta
    coll = np.full((m.k, m.k), 1.0 / m.m)
    np.fill_diagonal(coll, 1.0)
    assert np.allclose(m.m / (m.m - 1) * (coll @ theta - 1 / m.m), theta, rtol=0, atol=1e-15)


@pytest.mark.parametrize("spec", ["hcms(k=30,eps=2.0,m=64,d=16)", "cms(k=30,eps=2.0,m=64,d=16)"])
def test_sketch_estimator_in_samples(spec):
    m = parse(spec)
    rng = np.random.default_rng(6)
    theta = rng.dirichlet(np.ones(m.k))
    n = 30_000
    x = rng.choice(m.k, size=n, p=theta)
    emp = np.bincount(x, minlength=m.k) / n
    est = m.unbiased(m.sample(x, rng))
    assert np.all(np.abs(est - m.expected_estimate(emp)) <= z_for(m.k) * math.sqrt(m.variance_bound(n)))


@pytest.mark.parametrize("spec", ["hcms(k=20,eps=1.5,m=16,d=4)", "cms(k=20,eps=1.5,m=16,d=4)",
                                  "cms(k=20,eps=1.5,m=13,d=4)", "cms(k=3,eps=40.0,m=9,d=2)"])
@pytest.mark.filterwarnings("ignore::localpriv.mechanisms.base.LargeEpsilonWarning")
def test_sketch_fast_block_equals_dense(spec):
    m = parse(spec)
    rng = np.random.default_rng(7)
    z = m.sample(rng.integers(0, m.k, size=300), rng)
    uz, cz = np.unique(z, axis=0, return_counts=True) if z.ndim == 2 else np.unique(z, return_counts=True)
    block = m.likelihood_block(uz, cz)
    G = m.likelihood(uz)
    theta = rng.dirichlet(np.ones(m.k))
    w = rng.random(cz.size)
    for got, want in ((block.forward(theta), theta @ G), (block.backward(w), G @ w),
                      (block.hessian_diagonal(w), (G * G) @ w)):
        assert np.max(np.abs(got - want) / np.abs(want)) <= 1e-12
    assert np.allclose(block.dense(), G, rtol=1e-12, atol=0)


@pytest.mark.parametrize("spec", ["hcms(k=24,eps=2.0,m=32,d=8)", "cms(k=24,eps=2.0,m=32,d=8)"])
def test_ibu_on_sketch_reports_recovers_the_distribution(spec):
    m = parse(spec)
    rng = np.random.default_rng(8)
    theta = rng.dirichlet(np.ones(m.k))
    n = 20_000
    x = rng.choice(m.k, size=n, p=theta)
    emp = np.bincount(x, minlength=m.k) / n
    obs = Observations.from_reports(m, m.sample(x, rng))
    est = estimate(obs, "ibu")
    # the exact-likelihood MLE is consistent (no collision bias) and asymptotically efficient:
    # within the unbiased estimator's standard deviation bound
    assert est.converged
    assert np.all(np.abs(est.distribution - emp) <= z_for(m.k) * math.sqrt(m.variance_bound(n)))
    # the same engine on the block directly
    res = em([obs.blocks[0].likelihood_block()], m.k)
    assert np.allclose(res.theta, est.distribution, atol=1e-6)


def test_sketch_privacy_computed_from_the_likelihood():
    for spec in ("hcms(k=5,eps=1.3,m=8,d=2)", "cms(k=5,eps=1.3,m=4,d=2)"):
        m = parse(spec)
        assert m.epsilon_ldp() == pytest.approx(ldp_epsilon(m.channel()), rel=1e-12)
        assert m.epsilon_ldp() == pytest.approx(1.3, rel=1e-12)
    # one row that hashes both inputs to the same bucket: reports carry no information
    for spec in ("hcms(k=2,eps=1.0,m=2,d=1)", "cms(k=2,eps=1.0,m=2,d=1)"):
        m = parse(spec)
        h = m.hashes.table("t")
        expect = 0.0 if h[0, 0] == h[0, 1] else 1.0
        assert m.epsilon_ldp() == pytest.approx(expect, abs=1e-12)
        assert m.epsilon_ldp() == pytest.approx(ldp_epsilon(m.channel()), abs=1e-12)


# ---- refusals and extremes -----------------------------------------------------------------------
@pytest.mark.parametrize("spec,match", [
    ("hr(k=1,eps=1.0)", "k must be >= 2"),
    ("hr(k=10,eps=0.0)", "eps must be a finite number > 0"),
    ("hr(k=10,eps=2.0,blocks=3)", "power of two"),
    ("hr(k=10,eps=2.0,blocks=0)", "blocks must be >= 1"),
    ("hcms(k=10,eps=1.0,m=6)", "power of two"),
    ("hcms(k=10,eps=1.0,m=8,d=0)", "d must be >= 1"),
    ("cms(k=10,eps=1.0,m=1)", "m must be >= 2"),
    ("cms(k=10,eps=-1.0)", "eps must be"),
    ("cms(k=10,eps=1.0,m=65536,d=65536)", "above the (limit|cap)"),
    ("cms(k=10,eps=1.0,w=3)", "unknown parameter"),
])
def test_bad_parameters_are_refused(spec, match):
    with pytest.raises(LocalPrivError, match=match) as info:
        parse(spec)
    assert "\n" not in str(info.value)


def test_bad_reports_are_refused():
    hr = parse("hr(k=10,eps=1.0)")
    with pytest.raises(LocalPrivError, match="outside the output space"):
        hr.likelihood_block(np.array([16]), np.array([1.0]))
    with pytest.raises(LocalPrivError, match="counts over 16 outputs"):
        hr.inverse_counts(np.ones(5))
    h = parse("hcms(k=10,eps=1.0,m=8,d=2)")
    with pytest.raises(LocalPrivError, match="outside the output space"):
        h.unbiased(np.array([32]))
    c = parse("cms(k=10,eps=1.0,m=8,d=2)")
    with pytest.raises(LocalPrivError, match="5-byte vectors"):
        c.unbiased(np.zeros((3, 4), dtype=np.uint8))


@pytest.mark.parametrize("name", ["hr", "hcms", "cms"])
@pytest.mark.parametrize("eps", [1e-12, 50.0, 1e300])
def test_extreme_eps(name, eps):
    spec = f"hr(k=3,eps={eps!r})" if name == "hr" else f"{name}(k=3,eps={eps!r},m=8,d=4)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        m = parse(spec)
        level = m.epsilon_ldp()
    assert level in (0.0, eps) or level == pytest.approx(eps, rel=1e-12)
    z = m.sample(np.arange(6) % 3, np.random.default_rng(0))
    uz = np.unique(z, axis=0) if z.ndim == 2 else np.unique(z)
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        f = m.likelihood_block(uz, np.ones(uz.shape[0])).forward(np.full(3, 1 / 3))
    assert np.all(np.isfinite(f)) and np.all(f >= 0)


def test_hr_large_k_builds_without_a_dense_channel():
    m = parse("hr(k=1000000,eps=1.0)")
    assert m.K == 2 ** 20 and m.epsilon_ldp() == 1.0
    z = m.sample(np.array([0, 999_999]), np.random.default_rng(0))
    f = m.likelihood_block(np.unique(z), np.ones(np.unique(z).size)).forward(np.full(m.k, 1e-6))
    assert np.all(f > 0)
    with pytest.raises(LocalPrivError, match="dense matrix"):
        m.channel()


def test_cms_reports_of_a_large_domain_go_through_files_and_aggregation(tmp_path):
    # a sketch report does not grow with k: 4 + m/8 bytes, fewer than k/8 (reports.py reads the
    # mechanism's stated width instead of refusing them)
    import localpriv as lp
    dom = lp.IntegerDomain(0, 999)
    rng = np.random.default_rng(11)
    x = rng.integers(0, 1000, 3000)
    table = lp.perturb(x, "cms(eps=2.0,m=64,d=8)", rng, dom)
    path = tmp_path / "r.parquet"
    lp.write_reports(table, path)
    obs = lp.aggregate(str(path), dom)
    assert obs.n == 3000 and obs.blocks[0].mechanism.report_bytes == 12


def test_structured_imports_first_without_a_cycle():
    # localpriv.likelihood.structured imports the mechanisms package, whose sketch modules use its blocks
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c",
                        "import localpriv.likelihood.structured as s; print(s.HadamardBlock.__name__)"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "HadamardBlock"
