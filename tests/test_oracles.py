"""Frequency oracles: channels, privacy, p*/q*, likelihood blocks, estimators, pipeline."""
import itertools

import numpy as np
import pytest
from scipy import stats

from localpriv.data.aggregate import aggregate
from localpriv.data.observations import Observations
from localpriv.data.reports import report_table
from localpriv.estimators.em import log_likelihood
from localpriv.estimators.oracles import exact_loglik, ibu_exact, ibu_support, mi, mi_vector, rappor
from localpriv.inference import estimate
from localpriv.mechanisms import parse
from localpriv.mechanisms.hashing import hash_values
from localpriv.mechanisms.privacy import ldp_epsilon
from localpriv.utils.validation import LocalPrivError

SMALL = [
    "sue(k=4,eps=1.0)", "oue(k=3,eps=2.0)", "ss(k=4,eps=1.0)", "ss(k=5,eps=0.5)", "the(k=3,eps=1.5)",
    "blh(k=4,eps=1.0,n_seeds=8)", "olh(k=4,eps=2.0,n_seeds=8)",
    "lgrr(k=4,eps_perm=2.0,eps_1=1.0)", "lsue(k=3,eps_perm=2.0,eps_1=1.0)", "loue(k=3,eps_perm=3.0,eps_1=1.0)",
    "lsoue(k=3,eps_perm=2.0,eps_1=0.5)", "losue(k=3,eps_perm=2.0,eps_1=1.0)",
    "lblh(k=4,eps_perm=2.0,eps_1=1.0,n_seeds=8)", "lolh(k=4,eps_perm=3.0,eps_1=1.0,n_seeds=8)",
]
ONE_TIME_EPS = {"sue": 1.0, "oue": 2.0, "ss": None, "blh": 1.0, "olh": 2.0}


@pytest.mark.parametrize("spec", SMALL)
def test_samples_match_channel(spec):
    """Chi-square of the reports of each input against the channel row (p > 1e-4)."""
    m = parse(spec)
    C = m.channel()
    assert np.allclose(C.sum(axis=1), 1.0)
    rng = np.random.default_rng(7)
    n = 4000
    for x in range(m.k):
        idx = m.output_index(m.sample(np.full(n, x), rng))
        obs = np.bincount(idx, minlength=C.shape[1])
        live = C[x] > 0
        assert obs[~live].sum() == 0
        p = stats.chisquare(obs[live], n * C[x, live]).pvalue
        assert p > 1e-4, (spec, x, p)


@pytest.mark.parametrize("spec", SMALL)
def test_epsilon_from_structure_equals_dense_channel(spec):
    m = parse(spec)
    assert m.epsilon_ldp() == pytest.approx(ldp_epsilon(m.channel()), abs=1e-9)


@pytest.mark.parametrize("k", [3, 4])
@pytest.mark.parametrize("name,eps", [("sue", 0.7), ("oue", 1.3)])
def test_unary_promise_and_bruteforce_product_channel(name, eps, k):
    """Independent brute force: P(z|x) = prod_y P(z_y | [y == x]) over all 2^k vectors."""
    m = parse(f"{name}(k={k},eps={eps})")
    p, q = m.p_star, m.q_star
    C = np.zeros((k, 2 ** k))
    for bits in itertools.product([0, 1], repeat=k):
        col = sum(b << y for y, b in enumerate(bits))
        for x in range(k):
            C[x, col] = np.prod([(p if y == x else q) if b else (1 - (p if y == x else q)) for y, b in enumerate(bits)])
    assert np.allclose(C, m.channel())
    assert ldp_epsilon(C) == pytest.approx(eps, abs=1e-9)
    assert m.epsilon_ldp() == pytest.approx(eps, abs=1e-9)


def test_one_time_promises():
    for spec, eps in [("sue(k=100,eps=1.0)", 1.0), ("oue(k=100,eps=2.0)", 2.0), ("ss(k=100,eps=1.5)", 1.5),
                      ("blh(k=100,eps=1.0)", 1.0), ("olh(k=100,eps=3.0)", 3.0), ("krr(k=100,eps=1.0)", 1.0)]:
        assert parse(spec).epsilon_ldp() == pytest.approx(eps, abs=1e-9)
    the = parse("the(k=50,eps=1.0)")
    assert 0 < the.epsilon_ldp() <= 1.0 + 1e-12  # thresholding is post-processing of SHE
    assert parse("she(k=10,eps=1.0)").epsilon_ldp() == pytest.approx(1.0)


@pytest.mark.parametrize("spec", ["lgrr(k=50,eps_perm=2.0,eps_1=0.5)", "lsue(k=50,eps_perm=4.0,eps_1=1.0)",
                                  "loue(k=50,eps_perm=2.0,eps_1=1.0)", "lsoue(k=50,eps_perm=2.0,eps_1=1.0)",
                                  "losue(k=50,eps_perm=2.0,eps_1=1.0)", "lblh(k=50,eps_perm=2.0,eps_1=1.0)",
                                  "lolh(k=50,eps_perm=4.0,eps_1=2.0)"])
def test_longitudinal_bounds(spec):
    m = parse(spec)
    assert m.epsilon_ldp() == pytest.approx(m.eps_1, abs=1e-8)
    assert m.epsilon_perm() == pytest.approx(m.eps_perm, abs=1e-8)
    # memoization: many rounds from one memoized value never reveal more than the memoized value
    rounds = m.sample_rounds(np.arange(50), 3, rounds=3)
    assert len(rounds) == 3


def test_longitudinal_needs_eps1_below_eps_perm():
    with pytest.raises(LocalPrivError):
        parse("lsue(k=10,eps_perm=1.0,eps_1=1.0)")


@pytest.mark.parametrize("spec", ["sue(k=30,eps=1.0)", "oue(k=30,eps=2.0)", "ss(k=30,eps=1.0)", "the(k=30,eps=2.0)",
                                  "blh(k=30,eps=1.0)", "olh(k=30,eps=2.0)", "lsue(k=30,eps_perm=2.0,eps_1=1.0)",
                                  "losue(k=30,eps_perm=2.0,eps_1=1.0)", "lolh(k=30,eps_perm=3.0,eps_1=1.0)",
                                  "lgrr(k=30,eps_perm=2.0,eps_1=1.0)"])
def test_support_rates_match_p_q(spec):
    """P[x in S(z)] = p* for the true x and q* for other values (5-sigma binomial bounds)."""
    m = parse(spec)
    rng = np.random.default_rng(3)
    n = 20000
    x = rng.integers(0, m.k, n)
    S = m.support(m.sample(x, rng))
    hit = np.asarray(S[np.arange(n), x]).ravel().astype(float)
    other = (np.asarray(S.sum(axis=1)).ravel() - hit) / (m.k - 1)
    p, q = m.p_star, m.q_star
    assert abs(hit.mean() - p) < 5 * np.sqrt(p * (1 - p) / n)
    assert abs(other.mean() - q) < 5 * np.sqrt(q * (1 - q) / n)  # conservative: averages of k-1 bits


@pytest.mark.parametrize("spec", ["sue(k=6,eps=1.0)", "ss(k=6,eps=1.0)", "olh(k=6,eps=2.0)", "she(k=5,eps=1.0)",
                                  "lsoue(k=6,eps_perm=2.0,eps_1=1.0)", "lgrr(k=6,eps_perm=2.0,eps_1=1.0)"])
def test_likelihood_block_products(spec):
    m = parse(spec)
    rng = np.random.default_rng(5)
    r = m.sample(rng.integers(0, m.k, 300), rng)
    obs = Observations.from_reports(m, r)
    b = obs.blocks[0]
    G = m.likelihood(b.reports)
    blk = b.likelihood_block()
    theta, w = rng.dirichlet(np.ones(m.k)), rng.random(b.counts.size)
    assert np.allclose(blk.forward(theta), theta @ G, rtol=1e-10, atol=0)
    assert np.allclose(blk.backward(w), G @ w, rtol=1e-10, atol=0)


def test_hash_family_is_near_universal():
    seeds = np.arange(200000)
    h = hash_values(seeds[:, None], np.array([[3, 17]]), 5)
    assert abs((h[:, 0] == h[:, 1]).mean() - 0.2) < 5 * np.sqrt(0.2 * 0.8 / seeds.size)
    assert np.all(np.bincount(h[:, 0], minlength=5) > 0)


@pytest.mark.parametrize("spec", ["sue(k=8,eps=1.0)", "oue(k=8,eps=1.0)", "olh(k=8,eps=1.0)", "ss(k=8,eps=1.0)",
                                  "she(k=8,eps=1.0)", "lsue(k=8,eps_perm=2.0,eps_1=1.0)", "krr(k=8,eps=1.0)"])
def test_mi_is_unbiased(spec):
    m = parse(spec)
    f = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
    ests = []
    for seed in range(30):
        rng = np.random.default_rng(100 + seed)
        x = rng.choice(8, 2000, p=f)
        ests.append(mi_vector(Observations.from_reports(m, m.sample(x, rng)).blocks[0]))
    ests = np.array(ests)
    se = ests.std(axis=0, ddof=1) / np.sqrt(len(ests))
    assert np.all(np.abs(ests.mean(axis=0) - f) < 4 * se + 1e-12)


@pytest.mark.parametrize("spec", ["oue(k=10,eps=1.0)", "olh(k=10,eps=1.0)", "ss(k=10,eps=1.0)",
                                  "lsue(k=10,eps_perm=2.0,eps_1=1.0)"])
def test_exact_ibu_increases_loglik_and_beats_support_ibu(spec):
    m = parse(spec)
    rng = np.random.default_rng(11)
    f = np.linspace(1, 3, 10) ** 2
    f /= f.sum()
    obs = Observations.from_reports(m, m.sample(rng.choice(10, 3000, p=f), rng))
    old = {"accelerate": "none", "stop": "loglik", "max_iter": 10_000}  # pinned: the former defaults
    ex = ibu_exact(obs, keep_trace=True, delta=1e-7, **old)
    trace = ex.extra["trace"]
    assert np.all(np.diff(trace) >= -1e-9)
    su = ibu_support(obs, delta=1e-7, **old)
    assert ex.loglik >= su.loglik - 1e-6
    assert ex.loglik >= exact_loglik(obs, mi(obs).distribution)
    assert ex.loglik == pytest.approx(exact_loglik(obs, ex.distribution))


def test_support_ibu_equals_exact_for_grr():
    m = parse("krr(k=6,eps=1.0)")
    rng = np.random.default_rng(2)
    obs = Observations.from_reports(m, m.sample(rng.integers(0, 6, 2000), rng))
    old = {"accelerate": "none", "stop": "loglik", "max_iter": 10_000}  # pinned: the former defaults
    a, b = ibu_support(obs, delta=1e-9, **old), ibu_exact(obs, delta=1e-9, **old)
    assert np.allclose(a.distribution, b.distribution, atol=1e-6)


def test_rappor_estimator_and_registry():
    m = parse("sue(k=10,eps=2.0)")
    rng = np.random.default_rng(4)
    obs = Observations.from_reports(m, m.sample(rng.integers(0, 10, 5000), rng))
    est = estimate(obs, "rappor-p")
    assert est.estimator == "rappor-p" and est.distribution.sum() == pytest.approx(1.0)
    assert np.allclose(rappor(obs, post="n").distribution, mi(obs, post="n").distribution)
    for name in ["mi-n", "mi-p", "ibu-support", "ibu-exact"]:
        assert estimate(obs, name).distribution.min() >= 0
    with pytest.raises(LocalPrivError):
        rappor(Observations.from_reports(parse("oue(k=10,eps=2.0)"), m.sample(np.zeros(10, int), rng)))


@pytest.mark.parametrize("spec", ["sue(k=20,eps=1.0)", "ss(k=20,eps=1.0)", "olh(k=20,eps=1.0)",
                                  "lsue(k=20,eps_perm=2.0,eps_1=1.0)", "she(k=6,eps=1.0)"])
def test_reports_through_duckdb_end_to_end(spec):
    """2-D uint8 reports -> fixed-size binary -> DuckDB GROUP BY -> Observations -> same counts."""
    m = parse(spec)
    rng = np.random.default_rng(9)
    r = m.sample(rng.integers(0, m.k, 3000), rng)
    obs = aggregate(report_table(m, r))
    ref = Observations.from_reports(m, r)
    assert obs.n == 3000 and obs.mechanisms[0] == m
    a, b = obs.blocks[0], ref.blocks[0]
    assert np.allclose(m.support_counts(a.reports, a.counts), m.support_counts(b.reports, b.counts))
    assert log_likelihood(obs.likelihood_blocks(), np.full(m.k, 1 / m.k)) == pytest.approx(
        log_likelihood(ref.likelihood_blocks(), np.full(m.k, 1 / m.k)))


def test_spec_round_trip_and_errors():
    for spec in SMALL + ["she(k=5,eps=1.0)", "olh(k=100,eps=1.0)"]:
        assert str(parse(str(parse(spec)))) == str(parse(spec))
    with pytest.raises(LocalPrivError):
        parse("sue(k=4,eps=1.0)").support(np.zeros((2, 3), dtype=np.uint8))
    with pytest.raises(LocalPrivError):
        parse("olh(k=4,eps=1.0,n_seeds=4)").support(np.array([10 ** 6]))
    with pytest.raises(LocalPrivError):
        parse("ss(k=4,eps=1.0,omega=4)")
