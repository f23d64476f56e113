"""Free-will privacy: GIBU, the combination estimators, bounds, data model."""
import numpy as np
import pyarrow as pa
import pytest
from _roundoff import U, em_rtol, stop_margin
from scipy import stats

import localpriv.estimators.combination as combination
from localpriv.data.aggregate import aggregate
from localpriv.data.freewill import (
    inv_m_krr_bound,
    inv_m_krr_exact,
    krr_average_eps,
    naive_gibu,
    perturb_mixed,
    rap_m_bound,
    rappor_average_eps,
    rappor_observations,
    simulate_counts,
    split_users,
)
from localpriv.data.observations import Observations
from localpriv.domains import IntegerDomain
from localpriv.estimators.combination import combine_results, gibu, ibu_m, inv_m, merge_blocks, rap_m
from localpriv.estimators.ibu import ibu
from localpriv.inference import estimate
from localpriv.likelihood.blocks import DenseBlock
from localpriv.mechanisms import parse
from localpriv.mechanisms.geometric import Geometric
from localpriv.mechanisms.krr import KRR
from localpriv.mechanisms.matrix import MatrixMechanism
from localpriv.mechanisms.unary import SUE, unpack_bits
from localpriv.utils.validation import LocalPrivError


def _binom(k):
    return stats.binom.pmf(np.arange(k), k - 1, 0.5)


def _mixed_obs(rng, k=6, n=(300, 200, 150)):
    theta = _binom(k)
    rand = rng.dirichlet(np.ones(k) * 2, size=k)
    mechs = [KRR(k, 1.0), KRR(k, 2.5), MatrixMechanism(rows=rand.tolist())]
    return theta, mechs, simulate_counts(theta, mechs, n, rng)


# ---------------------------------------------------------------------------------- GIBU
def test_gibu_equals_naive_per_user_iteration(rng):
    theta, mechs, obs = _mixed_obs(rng)
    # expand the aggregated counts back to one column per user for Eq. (18)
    cols = []
    for b in obs.blocks:
        G = b.mechanism.likelihood(b.reports)
        cols.append(np.repeat(G, b.counts.astype(int), axis=1))
    G_users = np.hstack(cols)
    k, n = G_users.shape
    assert n == 650
    m = sum(b.counts.size for b in obs.blocks)  # distinct reports the engine sums over
    delta = 1e-10
    cap = 50_000  # both stop near 8,500 iterations here; the cap only guards the test's data
    naive, it_naive = naive_gibu(G_users, delta=delta, max_iter=cap)
    iterates = []
    # pinned: plain EM on seed 001's rule (the former defaults), as the naive iteration
    est = gibu(obs, delta=delta, max_iter=cap, keep_trace=True, accelerate="none", stop="loglik",
               callback=lambda t, th, L: iterates.append(th.copy()))
    assert est.estimator == "gibu" and est.converged and it_naive < cap

    # (1) The same map, compared after the same number of updates (no stopping test involved):
    # the per-user sums of Eq. (18) and the engine's per-report sums round differently, by at
    # most em_rtol = t * 2 (n + 2k + 4) u relative after t updates (see _roundoff; ~1.3e-9 here,
    # measured ~2e-14 on Haswell, Sandybridge and Prescott kernels).
    same = gibu(obs, delta=1e-300, max_iter=it_naive, accelerate="none", stop="loglik")
    assert same.iterations == it_naive and not same.converged
    np.testing.assert_allclose(same.distribution, naive, rtol=em_rtol(it_naive, k, n), atol=0)

    # (2) The same stopping rule |L(t) - L(t-1)| < delta, read to the resolution of L. Near the stop
    # the change of L shrinks geometrically, dL(t+1) = rho dL(t) (rho from the trace, ~0.99915),
    # i.e. by (1 - rho) delta ~ 8.5e-14 per iteration: less than one unit in the last place of
    # L (|L| ~ 1120, ulp 2.3e-13), so round-off, not the iterate, decides where each code stops
    # (2 to 6 iterations apart, depending on the BLAS kernel). Each code evaluates L with an error
    # e_L <= (max(21, m) + 5) u |L|: the naive sum over 650 users is numpy's pairwise summation
    # (8 accumulators of <= 16 terms, then 3 pairwise levels: <= 21 u |L|), the engine's a dot
    # product over the m = 18 distinct reports (<= m u |L|); each log(theta @ G) adds
    # u |log p| + k u, in total u |L| + n k u < 5 u |L|. A computed |dL(t)| < delta is then
    # certain once the exact change is below delta - 2 e_L and impossible while it is above
    # delta + 2 e_L: both stops lie in a window of W = 4 e_L / ((1 - rho) delta) + 1 iterations
    # (~150 here), and the two estimates differ by at most W of the steps taken there. (The two
    # iterate sequences agree as in (1), which moves the exact dL by far less than e_L.)
    tr = np.asarray(est.extra["trace"])
    dL = np.diff(tr)
    span = min(1000, dL.size - 1)
    rho = (dL[-1] / dL[-1 - span]) ** (1 / span)
    assert 0 < rho < 1
    e_L = (max(21, m) + 5) * U * abs(tr[-1])
    window = int(4 * e_L / ((1 - rho) * delta)) + 1
    assert abs(est.iterations - it_naive) <= window
    steps = np.abs(np.diff(np.asarray(iterates[-window - 1:]), axis=0)).max()
    np.testing.assert_allclose(est.distribution, naive, rtol=0, atol=window * steps)


def test_gibu_equals_ibu_for_one_mechanism(rng):
    k = 8
    obs = simulate_counts(_binom(k), [KRR(k, 1.5)], [2000], rng)
    a, b = gibu(obs), ibu(obs)
    np.testing.assert_array_equal(a.distribution, b.distribution)
    assert a.loglik == b.loglik


def test_gibu_loglik_never_decreases(rng):
    _, _, obs = _mixed_obs(rng)
    est = gibu(obs, keep_trace=True, delta=1e-12, max_iter=500, accelerate="none", stop="loglik")
    tr = np.asarray(est.extra["trace"])
    assert tr.size > 5
    assert np.all(np.diff(tr) >= -1e-9 * np.abs(tr[1:]))


def test_gibu_registered_and_many_mechanisms_share_engine(rng):
    _, _, obs = _mixed_obs(rng)
    old = {"accelerate": "none", "stop": "loglik", "delta": 1e-6, "max_iter": 10_000}  # pinned
    a = estimate(obs, "gibu", **old)
    b = ibu(obs, keep_trace=True, **old)
    assert a.settings["merge"] is True and b.converged
    # merged blocks: the same iterations, summed in another order (rounding only). Both stop at
    # the same iteration because this stop is far from the boundary: the last two changes of L
    # are further from delta = 1e-6 than the two evaluations of L can disagree, 2 e_L with
    # e_L <= (m + 5) u |L| (m distinct reports; see test_gibu_equals_naive_per_user_iteration).
    # The margin is ~5000 ulps of L for this seed; a seed whose stop were closer would fail here.
    k, m = obs.k, sum(blk.counts.size for blk in obs.blocks)
    assert stop_margin(b.extra["trace"], 1e-6) > 2 * (m + 5) * U * abs(b.loglik)
    assert a.iterations == b.iterations
    np.testing.assert_allclose(a.distribution, b.distribution, rtol=em_rtol(b.iterations, k, m), atol=0)
    # merge=False is ibu itself: the very same operations, bit for bit
    np.testing.assert_array_equal(gibu(obs, merge=False, **old).distribution, b.distribution)


def test_merge_blocks_same_products_and_chunks(rng, monkeypatch):
    k = 14
    theta = _binom(k)
    mechs = [KRR(k, 1.0), KRR(k, 3.0), Geometric(k, 0.4, 0, k - 1), SUE(k, 2.0)]
    obs = simulate_counts(theta, mechs[:3], [400, 300, 300], rng)
    obs = Observations(obs.blocks + rappor_observations(theta, [2.0], [200], rng).blocks)
    merged = sorted(merge_blocks(obs.blocks), key=lambda b: not isinstance(b, DenseBlock))
    # the three finite channels form one dense chunk; SUE on 14 bits (no finite channel) stays
    assert len(merged) == 2 and isinstance(merged[0], DenseBlock) and not isinstance(merged[1], DenseBlock)
    assert merged[0].counts.size == sum(b.counts.size for b in obs.blocks[:3])
    native = obs.likelihood_blocks()
    th = rng.dirichlet(np.ones(k))
    np.testing.assert_allclose(np.concatenate([b.forward(th) for b in merged]),
                               np.concatenate([b.forward(th) for b in native]), rtol=1e-13)
    w = [rng.random(b.counts.size) for b in native]
    np.testing.assert_allclose(merged[0].backward(np.concatenate(w[:3])) + merged[1].backward(w[3]),
                               sum(b.backward(wi) for b, wi in zip(native, w)), rtol=1e-12)
    # small chunk limit: several chunks, same estimate
    monkeypatch.setattr(combination, "MERGE_CHUNK_MAX", 2 * k * k)
    assert len(merge_blocks(obs.blocks)) == 3
    # compared after a fixed number of updates: at delta = 1e-9 both runs stop where the last change
    # of L is within a few ulps of delta, so round-off could stop them an iteration apart (a step
    # there is ~8e-10, above any tolerance that would still test the chunks)
    n_it = 500
    a = gibu(obs, delta=1e-300, max_iter=n_it, accelerate="none", stop="loglik")
    b = gibu(obs, merge=False, delta=1e-300, max_iter=n_it, accelerate="none", stop="loglik")
    assert a.iterations == b.iterations == n_it and not a.converged and not b.converged
    m = sum(blk.counts.size for blk in obs.blocks)
    np.testing.assert_allclose(a.distribution, b.distribution, rtol=em_rtol(n_it, k, m), atol=0)


# ------------------------------------------------------------------ Eq. 14: [IBU]M fails
def test_eq14_half_A_half_Aprime_ibu_m_fails_gibu_succeeds(rng):
    A = MatrixMechanism(rows=[[0.75, 0.25], [0.25, 0.75]])
    Ap = MatrixMechanism(rows=[[0.25, 0.75], [0.75, 0.25]])
    theta = np.array([0.8, 0.2])
    obs = simulate_counts(theta, [A, Ap], [50_000, 50_000], rng)
    # the average mechanism is uniform: [INV]M is undefined and says what applies
    with pytest.raises(LocalPrivError, match="gibu"):
        inv_m(obs)
    bad = ibu_m(obs)
    good = gibu(obs)
    # A[n] is non-informative: [IBU]M cannot move from its (uniform) start
    np.testing.assert_allclose(bad.distribution, [0.5, 0.5], atol=1e-12)
    # GIBU's error: 5 sigma of the MLE (Fisher information of the two halves)
    m = 0.25 + 0.5 * theta[0]  # P(report 0) under A (and of report 1 under A')
    sd = np.sqrt(m * (1 - m) / (0.25 * 100_000))  # 1/sqrt(n I), I = (a-b)^2 / (m(1-m))
    assert abs(good.distribution[0] - 0.8) < 5 * sd
    assert good.loglik > bad.loglik


# ---------------------------------------------------------------------- combinations
def test_combine_results_is_weighted_average(rng):
    theta, mechs, obs = _mixed_obs(rng)
    r = combine_results(obs, "inv-p")
    parts = [estimate(Observations([b]), "inv-p").distribution for b in obs.blocks]
    w = np.array([b.n for b in obs.blocks]) / obs.n
    np.testing.assert_allclose(r.distribution, w @ np.asarray(parts))
    assert estimate(obs, "ibu-r").estimator == "ibu-r"
    assert r.distribution.sum() == pytest.approx(1.0)


def test_inv_m_for_krr_matches_eq12(rng):
    k = 10
    eps = [1.0, 2.0, 3.5]
    obs = simulate_counts(_binom(k), [KRR(k, e) for e in eps], [400, 300, 300], rng)
    est = inv_m(obs, post="n")
    en = krr_average_eps(eps, k, weights=[400, 300, 300])
    q = sum(b.count_vector() for b in obs.blocks) / obs.n
    eq12 = (np.exp(en) + k - 1) / (np.exp(en) - 1) * q - 1 / (np.exp(en) - 1)
    np.testing.assert_allclose(est.extra["raw_inverse"], eq12, atol=1e-10)
    # and A[n] is the k-RR of level eps[n] (Eq. 11)
    assert inv_m(obs, post="p").distribution.sum() == pytest.approx(1.0)


def test_inv_m_and_ibu_m_refuse_different_alphabets(rng):
    k = 3
    M = MatrixMechanism(rows=[[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1], [0.1, 0.1, 0.1, 0.7]])
    obs = simulate_counts(np.full(k, 1 / 3), [KRR(k, 1.0), M], [100, 100], rng)
    for name in ("inv-n-m", "inv-p-m", "ibu-m"):
        with pytest.raises(LocalPrivError, match="gibu"):
            estimate(obs, name)
    with pytest.raises(LocalPrivError, match="gibu"):
        estimate(obs, "rap-n-m")
    assert estimate(obs, "gibu").distribution.sum() == pytest.approx(1.0)


def test_rap_m_matches_eq17_and_rap_r(rng):
    k = 6
    eps = [0.5, 1.0, 4.0]
    obs = rappor_observations(_binom(k), eps, [500, 500, 1000], rng)
    est = rap_m(obs, post="n")
    en = rappor_average_eps(eps, weights=[500, 500, 1000])
    s = sum(b.counts @ unpack_bits(b.reports, k).astype(float) for b in obs.blocks) / obs.n
    h = np.exp(en / 2)
    np.testing.assert_allclose(est.extra["raw_inverse"], (h + 1) / (h - 1) * s - 1 / (h - 1), atol=1e-10)
    # one mechanism: [RAP]M is RAP
    one = Observations([obs.blocks[2]])
    np.testing.assert_allclose(estimate(one, "rap-p-m").distribution, estimate(one, "rap-p").distribution)
    assert estimate(obs, "rap-p-r").distribution.sum() == pytest.approx(1.0)


def test_rap_refuses_non_unary(rng):
    obs = simulate_counts(np.full(4, 0.25), [KRR(4, 1.0)], [100], rng)
    with pytest.raises(LocalPrivError, match="gibu"):
        estimate(obs, "rap-n")


# ---------------------------------------------------------------------- bounds (Props 5.2, 5.4)
def test_prop52_bound_holds_and_matches_simulation(rng):
    k = 5
    theta = _binom(k)
    eps, w = np.array([0.8, 1.5, 3.0]), np.array([200, 300, 500])
    exact = inv_m_krr_exact(theta, eps, w)
    bound = inv_m_krr_bound(theta, eps, weights=w)
    assert bound >= exact
    # equality for equal levels
    assert inv_m_krr_bound(theta, [1.2] * 3, weights=w) == pytest.approx(
        inv_m_krr_exact(theta, [1.2] * 3, w), rel=1e-12)
    mechs = [KRR(k, e) for e in eps]
    errs = np.array([np.sum((inv_m(simulate_counts(theta, mechs, w, rng)).extra["raw_inverse"] - theta) ** 2)
                     for _ in range(400)])
    se = errs.std(ddof=1) / np.sqrt(errs.size)
    assert abs(errs.mean() - exact) < 5 * se
    assert errs.mean() < bound + 5 * se


def test_prop54_bound_holds_by_simulation(rng):
    k = 4
    theta = _binom(k)
    eps, w = [0.5, 2.0], [150, 150]
    bound = rap_m_bound(theta, eps, weights=w)
    equal = rap_m_bound(theta, [1.0, 1.0], weights=w)
    errs, errs_eq = [], []
    for _ in range(300):
        errs.append(np.sum((rap_m(rappor_observations(theta, eps, w, rng)).extra["raw_inverse"] - theta) ** 2))
        errs_eq.append(np.sum((rap_m(rappor_observations(theta, [1.0, 1.0], w, rng)).extra["raw_inverse"]
                               - theta) ** 2))
    errs, errs_eq = np.asarray(errs), np.asarray(errs_eq)
    assert errs.mean() < bound + 5 * errs.std(ddof=1) / np.sqrt(errs.size)
    # equal levels: the bound is the exact expected error
    assert abs(errs_eq.mean() - equal) < 5 * errs_eq.std(ddof=1) / np.sqrt(errs_eq.size)


def test_average_eps_of_equal_levels():
    assert krr_average_eps([2.0, 2.0], 10) == pytest.approx(2.0)
    assert rappor_average_eps([3.0, 3.0, 3.0]) == pytest.approx(3.0)
    assert krr_average_eps([1.0, 5.0], 10) < 5.0


# ---------------------------------------------------------------------- data model
def test_perturb_mixed_and_aggregate(rng):
    dom = IntegerDomain(0, 9)
    n = 3000
    values = rng.integers(0, 10, n)
    specs = np.array(["krr(k=10,eps=1.0)", "krr(k=10,eps=3.0)", "matrix(rows=" + str(np.eye(10).tolist()) + ")"])
    who = rng.integers(0, 3, n)
    table = perturb_mixed(values, specs[who], rng, dom)
    assert table.num_rows == n
    obs = aggregate(table, dom)
    assert len(obs.blocks) == 3
    by = {str(b.mechanism): b.n for b in obs.blocks}
    assert sorted(by.values()) == sorted(np.bincount(who, minlength=3).tolist())
    # the identity mechanism's counts are the true values of its users
    ident = [b for b in obs.blocks if str(b.mechanism).startswith("matrix")][0]
    np.testing.assert_array_equal(ident.count_vector(), np.bincount(values[who == 2], minlength=10))
    # mixed tables concatenated after the fact aggregate the same way
    t2 = pa.concat_tables([table, table])
    assert aggregate(t2, dom).n == 2 * n


def test_perturb_mixed_rejects_length_mismatch(rng):
    with pytest.raises(LocalPrivError, match="specs"):
        perturb_mixed(np.arange(3), ["krr(k=3,eps=1.0)"] * 2, rng, IntegerDomain(0, 2))


def test_split_users():
    assert split_users(10, 3).tolist() == [4, 3, 3]
    assert split_users(10, 3, np.random.default_rng(0), random=True).sum() == 10


def test_simulate_counts_law(rng):
    """Counts drawn per mechanism follow theta @ A (chi-square, p > 1e-4)."""
    k = 5
    rand = MatrixMechanism(rows=rng.dirichlet(np.ones(k), size=k).tolist())
    theta = _binom(k)
    obs = simulate_counts(theta, [rand], [20_000], rng)
    c = obs.blocks[0].count_vector()
    p = theta @ rand.channel()
    assert stats.chisquare(c, 20_000 * p).pvalue > 1e-4


def test_rappor_observations_are_basic_rappor(rng):
    """Seed 003 Eq. 15 with the library's sue: bits kept w.p. e^{eps/2}/(1+e^{eps/2}); counts match."""
    k, eps = 3, 1.2
    theta = np.array([0.5, 0.3, 0.2])
    obs = rappor_observations(theta, [eps, 4.0], [30_000, 10], rng)
    b = obs.blocks[0]
    assert b.mechanism == parse(f"sue(k={k},eps={eps})") and b.n == 30_000
    p = np.exp(eps / 2) / (1 + np.exp(eps / 2))
    assert b.mechanism.p_star == pytest.approx(p) and b.mechanism.q_star == pytest.approx(1 - p)
    assert b.mechanism.epsilon_ldp() == pytest.approx(eps)
    assert len(np.unique(b.reports, axis=0)) == b.counts.size  # identical reports grouped
    c = b.count_vector()
    assert stats.chisquare(c, 30_000 * (theta @ b.mechanism.channel())).pvalue > 1e-4
