"""The certified Newton finish of the EM engine (accelerate="newton")."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv.data.observations import Observations
from localpriv.estimators.em import em, log_likelihood
from localpriv.estimators.ibu import ibu
from localpriv.estimators.newton import newton_finish, supports_newton
from localpriv.likelihood.blocks import DenseBlock
from localpriv.likelihood.structured import ScaledIdentityBlock, linear_geometric_block
from localpriv.mechanisms import parse
from localpriv.mechanisms.krr import KRR, krr_mle


def _krr_counts(k, eps, n, seed):
    rng = np.random.default_rng(seed)
    m = KRR(k, eps)
    x = np.minimum(rng.geometric(min(0.5, 3.0 / k), size=n) - 1, k - 1)
    return m, np.bincount(m.sample(x, rng), minlength=k)


def _factors(blocks, theta):
    n = sum(b.counts.sum() for b in blocks)
    g = sum(b.backward(np.where(b.counts > 0, b.counts / b.forward(theta), 0.0)) for b in blocks)
    return g / n


def _hdiag_dense(G, w):
    return (G * G) @ w


# ---- the Hessian diagonals equal the dense formula -----------------------------------------
@given(k=st.integers(2, 30), seed=st.integers(0, 10**6), all_out=st.booleans())
def test_hessian_diagonal_of_scaled_identity_blocks(k, seed, all_out):
    rng = np.random.default_rng(seed)
    outputs = np.arange(k) if all_out else np.sort(rng.choice(k, size=rng.integers(1, k + 1), replace=False))
    counts = rng.integers(1, 50, outputs.size).astype(float)
    a, b = 0.3 + rng.random() * 0.5, 0.01 + rng.random() * 0.2
    w = rng.random(outputs.size) * 5
    block = ScaledIdentityBlock(k, a, b, outputs, counts)
    want = _hdiag_dense(block.dense(), w)
    assert np.allclose(block.hessian_diagonal(w), want, rtol=1e-12, atol=0)


@pytest.mark.parametrize("spec", ["oue(k=7, eps=1.0)", "sue(k=6, eps=0.7)", "olh(k=9, eps=1.5)",
                                  "ss(k=8, eps=1.0)", "she(k=5, eps=1.0)"])
def test_hessian_diagonal_of_support_blocks(spec):
    rng = np.random.default_rng(3)
    m = parse(spec)
    reports = m.sample(rng.integers(0, m.k, 300), rng)
    block = Observations.from_reports(m, reports).likelihood_blocks()[0]
    assert supports_newton([block])
    G = block.dense()
    w = rng.random(G.shape[1])
    want = _hdiag_dense(G, w)
    assert np.abs(block.hessian_diagonal(w) - want).max() <= 1e-12 * np.abs(want).max()


def test_dense_block_hessian_diagonal_and_unsupported_blocks(monkeypatch):
    rng = np.random.default_rng(0)
    G = rng.random((5, 7))
    w = rng.random(7)
    assert np.allclose(DenseBlock(G, np.ones(7)).hessian_diagonal(w), _hdiag_dense(G, w), rtol=1e-13)
    geo = linear_geometric_block(6, 1.0, np.arange(6), np.ones(6))
    # a block without a closed-form diagonal takes part only while its dense G is small
    assert supports_newton([geo])
    monkeypatch.setattr("localpriv.estimators.newton.DENSE_DIAGONAL_MAX", 6 * 6 - 1)
    assert not supports_newton([geo])


# ---- the finish reaches the certified maximum ----------------------------------------------
@pytest.mark.parametrize("k,eps,seed", [(2, 1.0, 0), (10, 1.0, 1), (100, 0.5, 2), (500, 2.0, 3)])
def test_newton_reaches_closed_form_krr_mle(k, eps, seed):
    m, counts = _krr_counts(k, eps, 50_000, seed)
    live = np.flatnonzero(counts)
    block = ScaledIdentityBlock(k, m.p_keep, m.p_other, live, counts[live])
    star = krr_mle(counts, eps)
    res = em([block], k, delta=1e-12, stop="max_abs", accelerate="newton")
    assert res.converged and res.scheme == "newton"
    assert np.abs(res.theta - star).max() < 1e-9
    assert res.loglik >= log_likelihood([block], star) - 1e-6
    squarem = em([block], k, delta=1e-12, stop="max_abs", accelerate="squarem")
    assert res.loglik >= squarem.loglik - 1e-6


def test_finish_certificate_holds_at_the_result():
    m, counts = _krr_counts(300, 1.0, 100_000, 5)
    block = ScaledIdentityBlock(300, m.p_keep, m.p_other, np.arange(300), counts)
    start = em([block], 300, max_iter=30, accelerate="squarem", stop="loglik", delta=1e-6).theta
    fin = newton_finish([block], start, counts.sum())
    assert fin.certified and fin.loglik >= log_likelihood([block], start)
    f = _factors([block], fin.theta)
    zero = fin.theta == 0
    assert zero.any()  # the maximum is on the boundary here: that is the point of the finish
    assert f[zero].max() <= 1 + 1e-9
    assert np.abs(f[~zero] - 1).max() <= 1e-9
    assert abs(fin.theta.sum() - 1) < 1e-12


def test_gibu_mixture_of_dense_and_structured_blocks():
    rng = np.random.default_rng(11)
    k = 30
    x = np.minimum(rng.geometric(0.1, size=4500) - 1, k - 1)
    blocks = []
    for i, spec in enumerate(["krr(k=30, eps=0.5)", "oue(k=30, eps=1.0)", "exponential(k=30, eps=0.4)"]):
        m = parse(spec)
        obs = Observations.from_reports(m, m.sample(x[i::3], rng))
        blocks += obs.likelihood_blocks()
    assert supports_newton(blocks)
    # pinned: the total-L rule (the engine's former default)
    plain = em(blocks, k, delta=1e-9, max_iter=400_000, accelerate="none", stop="loglik")
    fast = em(blocks, k, delta=1e-9, accelerate="newton", stop="loglik", max_iter=10_000)
    assert fast.converged and fast.scheme == "newton" and fast.products > 0
    assert fast.loglik >= plain.loglik - 1e-7
    assert fast.iterations < plain.iterations


def test_unsupported_blocks_fall_back_to_squarem(monkeypatch):
    # blocks without hessian_diagonal whose dense G is too large for the finish to tabulate
    monkeypatch.setattr("localpriv.estimators.newton.DENSE_DIAGONAL_MAX", 0)
    rng = np.random.default_rng(2)
    z = np.clip(rng.integers(0, 20, 2000) + rng.integers(-2, 3, 2000), 0, 19)
    c = np.bincount(z, minlength=20)
    block = linear_geometric_block(20, 1.0, np.arange(20), c)
    res = em([block], 20, delta=1e-9, accelerate="newton", stop="loglik", max_iter=10_000)
    ref = em([block], 20, delta=1e-9, accelerate="squarem", stop="loglik", max_iter=10_000)
    assert res.scheme == "squarem" and res.products == 0
    assert res.loglik == ref.loglik


def test_non_identifiable_channel_does_not_break_the_engine():
    # 3 inputs, 2 outputs: -H is singular on any face with 3 free coordinates
    G = np.array([[0.7, 0.3], [0.3, 0.7], [0.5, 0.5]])
    block = DenseBlock(G, np.array([600.0, 400.0]))
    # delta well above the resolution of L (|L| ~ 673, one ulp 1.1e-13; an evaluation of L rounds
    # by <= (m + k + 2) u |L| ~ 3.5 ulps): at 1e-12 (~9 ulps) "converged" would depend on round-off
    res = em([block], 3, delta=1e-10, accelerate="newton", stop="loglik", max_iter=10_000)
    ref = em([block], 3, delta=1e-10, accelerate="squarem", stop="loglik", max_iter=10_000)
    assert res.converged
    assert res.loglik >= ref.loglik - 1e-9
    assert abs(res.theta.sum() - 1) < 1e-12 and res.theta.min() >= 0


@settings(max_examples=20, deadline=None)
@given(k=st.integers(3, 60), eps=st.floats(0.2, 4.0), seed=st.integers(0, 10**6),
       delta=st.sampled_from([1e-3, 1e-6, 1e-10]))
def test_newton_never_ends_lower_and_stays_a_distribution(k, eps, seed, delta):
    m, counts = _krr_counts(k, eps, 3000, seed)
    live = np.flatnonzero(counts)
    block = ScaledIdentityBlock(k, m.p_keep, m.p_other, live, counts[live])
    plain = em([block], k, delta=delta, max_iter=50_000, accelerate="none", stop="loglik")
    fast = em([block], k, delta=delta, max_iter=50_000, accelerate="newton", stop="loglik")
    assert fast.theta.min() >= 0 and abs(fast.theta.sum() - 1) < 1e-12
    assert fast.loglik >= plain.loglik - delta
    assert fast.converged


def test_ibu_records_newton_scheme():
    m, counts = _krr_counts(40, 1.0, 8000, 4)
    est = ibu(Observations.from_counts(m, counts), accelerate="newton", stop="loglik", delta=1e-6, max_iter=10_000)
    assert est.settings["acceleration"] == "newton"
    assert np.isclose(est.distribution.sum(), 1.0)


def test_newton_reaches_the_support_count_maximum_on_the_boundary():
    # OUE support counts at small eps and sparse data: 145 of 200 coordinates of the maximum are 0;
    # SQUAREM stops ~1e-5 away, the certified finish lands on seed 002's closed form (support_mle)
    from localpriv.estimators.oracles import support_mle

    rng = np.random.default_rng(4)
    k = 200
    m = parse("oue(k=200, eps=0.5)")
    x = np.minimum(rng.geometric(0.05, size=20_000) - 1, k - 1)
    C = m.support_counts(m.sample(x, rng))
    star = support_mle(C, m.p_star, m.q_star)
    block = ScaledIdentityBlock(k, m.p_star, m.q_star, np.arange(k), C)
    # delta well above the resolution of L: |L| ~ 1.5e6 (one ulp 2.3e-10) and an evaluation of L
    # (a 200-term dot product) rounds by <= (m + k + 2) u |L| ~ 7e-8; at delta = 1e-9 (~4 ulps)
    # whether the finishing EM step "converges" would be decided by round-off
    res = em([block], k, delta=1e-6, accelerate="newton", stop="loglik", max_iter=10_000)
    assert (star == 0).sum() > k // 2
    assert res.converged and res.products > 0
    assert np.abs(res.theta - star).max() < 1e-9


def test_newton_best_point_revives_the_zeros_it_got_wrong():
    # an uncertified attempt's best point hands EM its zeros at TINY, except those whose EM factor
    # there exceeds 1 + WARM_REVIVE (the attempt dropped a cell the maximum needs): they restart at
    # the EM iterate's value; L stays above the iterate's
    import importlib
    import math

    from localpriv.estimators.newton import NewtonFinish
    from localpriv.likelihood.blocks import total_loglik

    em_mod = importlib.import_module("localpriv.estimators.em")
    k, keep = 4, 0.6
    G = np.full((k, k), (1.0 - keep) / (k - 1))
    np.fill_diagonal(G, keep)
    block = DenseBlock(G, np.array([50.0, 30.0, 20.0, 0.0]))
    n = block.total
    theta = np.full(k, 0.25)
    best = np.array([0.62, 0.38, 0.0, 0.0])
    f_best = _factors([block], best)
    assert f_best[2] > 1.0 + em_mod.WARM_REVIVE and f_best[3] < 1.0  # a wrong zero and a right one
    L0 = total_loglik([block], [block.forward(theta)])
    fin = NewtonFinish(None, -math.inf, 0, 0, 0, best, total_loglik([block], [block.forward(best)]))
    th, probs, L = em_mod._newton_warm([block], fin, theta, [block.forward(theta)], L0, n)
    assert th[2] == pytest.approx(0.25 / 1.25, rel=1e-12)  # restarted at the iterate's value
    assert th[3] <= 2 * em_mod.TINY  # the right zero stays at TINY
    assert th.sum() == pytest.approx(1.0, abs=1e-12)
    assert L > L0
    assert total_loglik([block], probs) == L  # the same products, recomputed
