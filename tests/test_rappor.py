"""Bloom-filter RAPPOR with cohorts (Erlingsson, Pihur, Korolova, CCS 2014).

The channel against an independent construction (Bloom bits from the reference ``xxhash``
package, per-bit PRR and IRR matrices), samples against the channel, memoization across rounds,
the computed privacy against the paper's formulas and the dense channel, and the three decoders
against the truth within tolerances derived from each estimator's (asymptotic) covariance.
"""
import itertools
import struct

import numpy as np
import pytest
import xxhash
from scipy import stats

from localpriv.data.aggregate import aggregate
from localpriv.data.reports import perturb, write_reports
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.estimators.rappor import decode
from localpriv.inference import estimate
from localpriv.mechanisms import parse
from localpriv.mechanisms.privacy import ldp_epsilon
from localpriv.mechanisms.rappor import RAPPOR, BitCounts
from localpriv.utils.validation import LocalPrivError

SMALL = "rappor(k=4,m=4,h=2,cohorts=2,f=0.5,p=0.5,q=0.75)"


def _ref_bloom(key: int, cohort: int, h: int, m: int) -> set:
    """Bloom bits of docs/rappor.md from the reference package: XXH64(le64(key), seed=c*h+i) mod m."""
    return {xxhash.xxh64_intdigest(struct.pack("<Q", key), cohort * h + i) % m for i in range(h)}


def _ref_channel(k, m, h, cohorts, f, p, q, keys=None):
    """P(report = c 2^m + sum_j S_j 2^j | x) from the definition, one output at a time."""
    keys = list(range(k)) if keys is None else keys
    prr = np.array([[1 - f / 2, f / 2], [f / 2, 1 - f / 2]])   # [B, B'=0/1]
    irr = np.array([[1 - p, p], [1 - q, q]])                   # [B', S=0/1]
    bit = prr @ irr                                            # [B, S]
    M = np.zeros((k, cohorts << m))
    for x in range(k):
        for c in range(cohorts):
            B = _ref_bloom(keys[x], c, h, m)
            for v in range(1 << m):
                prob = 1.0 / cohorts
                for j in range(m):
                    prob *= bit[int(j in B), (v >> j) & 1]
                M[x, (c << m) | v] = prob
    return M


def test_channel_matches_the_definition():
    mech = parse(SMALL)
    ref = _ref_channel(4, 4, 2, 2, 0.5, 0.5, 0.75)
    np.testing.assert_allclose(mech.channel(), ref, rtol=1e-12, atol=0)
    # the Bloom filters are the reference package's
    B = mech.bloom()
    for c, x in itertools.product(range(2), range(4)):
        assert set(np.flatnonzero(B[c, x])) == _ref_bloom(x, c, 2, 4)
    # s1, s0 as in the paper (q*, p*)
    assert mech.s1 == pytest.approx(0.75 * 0.75 + 0.25 * 0.5) and mech.s0 == pytest.approx(0.25 * 0.75 + 0.75 * 0.5)


def test_samples_follow_the_channel():
    mech = parse(SMALL)
    M = mech.channel()
    rng = np.random.default_rng(1)
    n = 20000
    pvals = []
    for x in range(mech.k):
        obs = np.bincount(mech.sample(np.full(n, x), rng), minlength=M.shape[1])
        pvals.append(stats.chisquare(obs, n * M[x]).pvalue)
    assert min(pvals) * len(pvals) > 1e-6, pvals


def test_rounds_share_the_memoized_prr():
    """Two reports of one user: same cohort; for a set Bloom bit both report bits are 1 with
    probability (1 - f/2) q^2 + (f/2) p^2 (the PRR is drawn once), not s1^2."""
    mech = parse("rappor(k=3,m=8,h=2,cohorts=4,f=0.5,p=0.25,q=0.75)")
    n = 20000
    x = np.zeros(n, dtype=np.int64)
    a, b = mech.sample_rounds(x, np.random.default_rng(2), 2)
    ca, bits_a = mech.decode_reports(a)
    cb, bits_b = mech.decode_reports(b)
    assert np.array_equal(ca, cb)
    B = mech.bloom()[ca, 0].astype(bool)                     # each user's Bloom filter
    both = (bits_a & bits_b).astype(bool)[B]
    f, p, q = mech.f, mech.p, mech.q
    expect = (1 - f / 2) * q * q + (f / 2) * p * p
    assert abs(both.mean() - expect) < 5 * np.sqrt(expect * (1 - expect) / both.size)
    assert abs(expect - mech.s1 ** 2) > 10 * np.sqrt(expect * (1 - expect) / both.size)


def test_computed_privacy():
    mech = parse(SMALL)
    s1, s0 = mech.s1, mech.s0
    logit = lambda v: np.log(v / (1 - v))  # noqa: E731
    # one report: the paper's eps_1 = h (logit q* - logit p*), equal to the dense channel's level
    assert mech.epsilon_ldp() == pytest.approx(2 * (logit(s1) - logit(s0)), rel=1e-12)
    assert mech.epsilon_ldp() == pytest.approx(ldp_epsilon(mech.channel()), rel=1e-12)
    # PRR: eps_inf = 2 h log((1 - f/2)/(f/2)), equal to the level of the memoized response's channel
    f = mech.f
    assert mech.epsilon_perm() == pytest.approx(2 * 2 * np.log((1 - f / 2) / (f / 2)), rel=1e-12)
    perm = _ref_channel(4, 4, 2, 2, f, 0.0, 1.0)              # IRR the identity: the PRR alone
    assert mech.epsilon_perm() == pytest.approx(ldp_epsilon(perm), rel=1e-12)
    # without two disjoint full filters (m = 2 = h) the level is below the formula, still exact
    tight = parse("rappor(k=3,m=2,h=2,cohorts=3,f=0.5,p=0.5,q=0.75)")
    assert tight.epsilon_ldp() == pytest.approx(ldp_epsilon(tight.channel()), rel=1e-12)
    assert tight.epsilon_ldp() < 2 * (logit(s1) - logit(s0)) - 1e-6
    # large m: the structural level, without the channel
    big = parse("rappor(k=200,m=48,h=3,cohorts=16,f=0.25,p=0.25,q=0.75)")
    assert big.n_outputs is None
    assert big.epsilon_ldp() == pytest.approx(3 * (logit(big.s1) - logit(big.s0)), rel=1e-12)


def test_bad_parameters_are_one_line_errors():
    for spec, msg in [("rappor(k=4,m=5000)", "m"), ("rappor(k=4,m=8,h=9)", "h"),
                      ("rappor(k=4,f=1.0)", "0 <= f < 1"), ("rappor(k=4,p=0.8,q=0.5)", "p < q"),
                      ("rappor(k=4,f=0.0,p=0.0,q=1.0)", "random"), ("rappor(k=4,m=60,cohorts=70000)", "cohorts"),
                      ("rappor(k=4,keys=labels)", "domain"), ("rappor(k=4,keys=words)", "index or labels")]:
        with pytest.raises(LocalPrivError, match=msg) as exc:
            parse(spec)
        assert "\n" not in str(exc.value)
    with pytest.raises(LocalPrivError, match="outside"):
        parse(SMALL).output_index(np.array([32]))


# ---- decoders ------------------------------------------------------------------------------
THETA = np.array([0.3, 0.25, 0.18, 0.12, 0.1, 0.05])
DECODE = "rappor(k=6,m=10,h=2,cohorts=4,f=0.25,p=0.25,q=0.75)"
N = 20000


def _bit_model(mech, bloom, theta):
    """Per cohort: pi (m), the per-user bit covariance (m x m) and d pi / d theta (m x K)."""
    s0, s1 = mech.s0, mech.s1
    out = []
    for c in range(mech.cohorts):
        S = s0 + (s1 - s0) * bloom[c].astype(float)           # K x m: P(bit = 1 | x)
        pi = theta @ S
        cov = (S * theta[:, None]).T @ S + np.diag(theta @ (S * (1 - S))) - np.outer(pi, pi)
        np.fill_diagonal(cov, pi * (1 - pi))
        out.append((pi, cov, (s1 - s0) * bloom[c].T.astype(float)))
    return out


def _tangent(K):
    """Orthonormal basis of {v : sum v = 0}."""
    q, _ = np.linalg.qr(np.c_[np.ones(K), np.eye(K)[:, : K - 1]])
    return q[:, 1:]


def _sd_nnls(mech, bloom, theta, n_c):
    """Standard deviations of the unconstrained least-squares fit (NNLS off the boundary)."""
    model = _bit_model(mech, bloom, theta)
    A = np.vstack([n_c[c] * D / (mech.s1 - mech.s0) for c, (_, _, D) in enumerate(model)])
    covb = np.zeros((A.shape[0], A.shape[0]))
    m = mech.m
    for c, (_, cov, _) in enumerate(model):
        covb[c * m:(c + 1) * m, c * m:(c + 1) * m] = n_c[c] * cov / (mech.s1 - mech.s0) ** 2
    inv = np.linalg.inv(A.T @ A)
    return np.sqrt(np.diag(inv @ A.T @ covb @ A @ inv))


def _sd_composite(mech, bloom, theta, n_c):
    """Sandwich standard deviations of the bitwise composite-likelihood maximum on the simplex."""
    model = _bit_model(mech, bloom, theta)
    K = theta.size
    H, J = np.zeros((K, K)), np.zeros((K, K))
    for c, (pi, cov, D) in enumerate(model):
        W = 1.0 / (pi * (1 - pi))
        H += n_c[c] * (D * W[:, None]).T @ D
        J += n_c[c] * (D * W[:, None]).T @ cov @ (D * W[:, None])
    P = _tangent(K)
    Hi = np.linalg.inv(P.T @ H @ P)
    return np.sqrt(np.diag(P @ Hi @ (P.T @ J @ P) @ Hi @ P.T))


def _sd_exact(mech, theta, n):
    """Standard deviations of the exact MLE from the Fisher information of the enumerated channel."""
    M = mech.channel()
    prob = theta @ M
    live = prob > 0
    info = n * (M[:, live] / prob[live]) @ M[:, live].T
    P = _tangent(theta.size)
    return np.sqrt(np.diag(P @ np.linalg.inv(P.T @ info @ P) @ P.T))


@pytest.fixture(scope="module")
def collected():
    mech = parse(DECODE)
    rng = np.random.default_rng(20)
    x = rng.choice(mech.k, N, p=THETA)
    obs = aggregate(perturb(x, mech, rng))                  # through the Arrow table and DuckDB
    return mech, obs


def test_decoders_recover_the_distribution(collected):
    mech, obs = collected
    b = obs.blocks[0]
    bc = mech.bit_counts(b.reports, b.counts)
    assert bc.n.sum() == N and bc.ones.shape == (4, 10)
    bloom = mech.bloom()
    got = {m: decode(mech, b.reports, b.counts, method=m) for m in ("nnls", "em", "em-exact")}
    sds = {"nnls": _sd_nnls(mech, bloom, THETA, bc.n), "em": _sd_composite(mech, bloom, THETA, bc.n),
           "em-exact": _sd_exact(mech, THETA, N)}
    for method, res in got.items():
        err = np.abs(res.coef - THETA)
        assert np.all(err < 5 * sds[method]), (method, res.coef, err / sds[method])
        assert res.distribution.sum() == pytest.approx(1.0)
    # the exact MLE is what the generic IBU finds on the same observations
    ibu = estimate(obs, "ibu")
    np.testing.assert_allclose(got["em-exact"].distribution, ibu.distribution, atol=2e-5)
    # bit counts alone are enough for nnls and em (and give the same answer)
    alone = decode(mech, bit_counts=BitCounts(bc.n, bc.ones), method="em")
    np.testing.assert_allclose(alone.coef, got["em"].coef, atol=1e-10)
    with pytest.raises(LocalPrivError, match="em-exact needs"):
        decode(mech, bit_counts=bc, method="em-exact")


def test_default_decoder_is_the_mle_when_the_reports_fit(collected, monkeypatch):
    mech, obs = collected
    b = obs.blocks[0]
    auto = decode(mech, b.reports, b.counts)
    assert auto.method == "em-exact"
    np.testing.assert_array_equal(auto.coef, decode(mech, b.reports, b.counts, method="em-exact").coef)
    assert decode(mech, bit_counts=mech.bit_counts(b.reports, b.counts)).method == "ridge"  # no reports
    assert decode(mech, b.reports, b.counts, penalty=0.1).method == "ridge"  # a penalty is the regression's
    # a likelihood above the dense cap falls back to the regression instead of refusing
    monkeypatch.setenv("LOCALPRIV_MAX_DENSE_ENTRIES", str(mech.k * b.reports.shape[0] - 1))
    assert decode(mech, b.reports, b.counts).method == "ridge"
    with pytest.raises(LocalPrivError, match="dense matrix"):
        decode(mech, b.reports, b.counts, method="em-exact")


def test_string_candidates_and_a_decoy():
    """keys=labels: Bloom bits of XXH64(UTF-8 label); decoding over candidates that include a
    string no user holds gives it a share within 5 standard deviations of 0."""
    labels = ["apple", "banana", "cherry", "date", "elderberry"]
    dom = CategoricalDomain(labels)
    mech = parse("rappor(m=12,h=2,cohorts=4,f=0.25,p=0.25,q=0.75,keys=labels)", dom)
    assert str(mech) == "rappor(k=5,m=12,h=2,cohorts=4,f=0.25,p=0.25,q=0.75,keys=labels)"
    key = xxhash.xxh64_intdigest(b"cherry", 0)
    assert set(np.flatnonzero(mech.bloom()[3, 2])) == _ref_bloom(key, 3, 2, 12)
    theta = np.array([0.35, 0.25, 0.2, 0.12, 0.08])
    rng = np.random.default_rng(21)
    r = mech.sample(rng.choice(5, N, p=theta), rng)
    cands = labels + ["zucchini"]
    res = decode(mech, r, candidates=cands, method="nnls")
    bc = mech.bit_counts(r)
    from localpriv.mechanisms.rappor import candidate_keys
    sd = _sd_nnls(mech, mech.bloom(candidate_keys(cands)), np.r_[theta, 0.0], bc.n)
    assert np.all(np.abs(res.coef - np.r_[theta, 0.0]) < 5 * sd), (res.coef, sd)


def test_reports_through_files(tmp_path):
    """int64 reports in CSV and Parquet, aggregated back to the same observations."""
    mech = parse("rappor(k=6,m=24,h=2,cohorts=8)", IntegerDomain(0, 5))
    rng = np.random.default_rng(3)
    table = perturb(rng.integers(0, 6, 2000), mech, rng)
    ref = aggregate(table)
    for suffix in (".csv", ".parquet"):
        write_reports(table, tmp_path / f"r{suffix}")
        obs = aggregate(tmp_path / f"r{suffix}")
        assert obs.mechanisms == [mech]
        np.testing.assert_array_equal(obs.blocks[0].reports, ref.blocks[0].reports)
        np.testing.assert_array_equal(obs.blocks[0].counts, ref.blocks[0].counts)
    assert isinstance(aggregate(tmp_path / "r.csv").mechanisms[0], RAPPOR)


def test_documented_bloom_vectors():
    """docs/hashing.md's RAPPOR vectors (m = 32, h = 2): index 37 in cohort 5, "apple" in cohort 3."""
    mech = parse("rappor(k=100,m=32,h=2,cohorts=8)")
    assert set(np.flatnonzero(mech.bloom()[5, 37])) == {13, 30} == _ref_bloom(37, 5, 2, 32)
    from localpriv.mechanisms.rappor import candidate_keys
    key = candidate_keys(["apple"])
    assert int(key[0]) == 6379808199001010847
    assert set(np.flatnonzero(mech.bloom(key)[3, 0])) == {17, 20} == _ref_bloom(int(key[0]), 3, 2, 32)


def test_wide_filters_are_bit_vector_reports_through_files_and_estimators(tmp_path):
    # the paper's m = 128 with 64 cohorts does not fit one int64: 2 + 16 bytes per report
    import localpriv as lp
    from localpriv.estimators.rappor import decode
    dom = lp.IntegerDomain(0, 9)
    mech = lp.parse("rappor(k=10,m=128,h=2,cohorts=64)", dom)
    assert mech.report_kind == "binary" and mech.report_bytes == 18
    rng = np.random.default_rng(5)
    truth = np.array([0.3, 0.2, 0.15, 0.1, 0.08, 0.06, 0.05, 0.03, 0.02, 0.01])
    x = rng.choice(10, size=20_000, p=truth)
    rep = mech.sample(x, rng)
    assert rep.shape == (20_000, 18) and rep.dtype == np.uint8
    cohort, bits = mech.decode_reports(rep)
    assert cohort.max() < 64 and bits.shape == (20_000, 128)
    # the IRR bit frequencies match s1 on the users' Bloom bits and s0 elsewhere
    B = mech.bloom()[cohort, x]
    for on, s in ((True, mech.s1), (False, mech.s0)):
        sel = on == B
        freq = bits[sel].mean()
        assert abs(freq - s) < 5 * np.sqrt(s * (1 - s) / sel.sum())
    # privacy computed from the structure is the paper's eps_1 for h = 2
    eps1 = 2 * (np.log(mech.s1 / mech.s0) - np.log((1 - mech.s1) / (1 - mech.s0)))
    assert abs(mech.epsilon_ldp() - eps1) < 1e-12
    # through a file, aggregation and the exact-likelihood EM
    table = lp.perturb(x, mech, rng, dom)
    path = tmp_path / "r.parquet"
    lp.write_reports(table, path)
    obs = lp.aggregate(str(path), dom)
    est = lp.estimate(obs, "ibu")
    # 20,000 reports: every cell within 0.05 of the truth (the MLE's sd is below 0.012 here)
    assert np.max(np.abs(est.distribution - truth)) < 0.05
    dec = decode(mech, obs.blocks[0].reports, obs.blocks[0].counts, method="nnls")
    assert np.max(np.abs(dec.distribution - truth)) < 0.08
    # a report naming a cohort beyond 63, or setting no-such bits, is refused with one line
    bad = rep[:3].copy()
    bad[1, 0] = 200
    with pytest.raises(lp.LocalPrivError, match="cohorts outside 0..63"):
        mech.check_binary_reports(bad)


def test_external_bloom_design():
    """decode(bloom=...) decodes reports made with ANOTHER client's Bloom design (e.g. pure-LDP's
    hash functions): positions or filters, every method; our own design passed in changes nothing."""
    mech = parse(DECODE)
    rng = np.random.default_rng(22)
    pos = rng.integers(0, mech.m, size=(mech.cohorts, mech.k, mech.h))      # a foreign design
    foreign = np.zeros((mech.cohorts, mech.k, mech.m), dtype=bool)
    foreign[np.arange(mech.cohorts)[:, None, None], np.arange(mech.k)[None, :, None], pos] = True
    x = rng.choice(mech.k, N, p=THETA)
    cohort = rng.integers(0, mech.cohorts, N)
    # one report per user: PRR then IRR is, per bit, P(S = 1) = s1 if the bit is set else s0
    bits = rng.random((N, mech.m)) < np.where(foreign[cohort, x], mech.s1, mech.s0)
    r = mech._encode(cohort, bits)
    bc = mech.bit_counts(r)
    sds = {"nnls": _sd_nnls(mech, foreign, THETA, bc.n), "em": _sd_composite(mech, foreign, THETA, bc.n)}
    for method, sd in sds.items():
        res = decode(mech, r, bloom=pos, method=method)
        assert np.all(np.abs(res.coef - THETA) < 5 * sd), (method, res.coef, sd)
        np.testing.assert_array_equal(res.coef, decode(mech, r, bloom=foreign, method=method).coef)
        # the test has power: our own design on these reports is far off
        assert np.any(np.abs(decode(mech, r, method=method).coef - THETA) > 5 * sd), method
    # the exact likelihood uses the design too: the MLE beats the uniform distribution by a lot
    exact = decode(mech, r, bloom=pos, method="em-exact")
    assert np.abs(exact.coef - THETA).max() < 0.5 * np.abs(THETA - 1 / mech.k).max()
    # our own design passed explicitly: identical results
    own = mech.bloom()
    for method in ("ridge", "nnls", "em"):
        np.testing.assert_array_equal(decode(mech, r, bloom=own, method=method).coef,
                                      decode(mech, r, method=method).coef)
    with pytest.raises(LocalPrivError, match="either candidates or an external bloom"):
        decode(mech, r, bloom=pos, candidates=[0, 1, 2])
    with pytest.raises(LocalPrivError, match="bloom must be"):
        decode(mech, r, bloom=pos[:2])
    with pytest.raises(LocalPrivError, match="positions must be in"):
        decode(mech, r, bloom=pos + mech.m)
    with pytest.raises(LocalPrivError, match="m=10 bits"):
        decode(mech, r, bloom=foreign[:, :, :8])
    with pytest.raises(LocalPrivError, match="pass 0/1 filters as bool"):
        decode(mech, r, bloom=foreign.astype(np.uint8))
