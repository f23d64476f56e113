"""Accelerated EM (SQUAREM) in the one EM engine."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv.data.observations import Observations
from localpriv.estimators.em import em, log_likelihood
from localpriv.estimators.ibu import ibu
from localpriv.likelihood.structured import ScaledIdentityBlock, linear_geometric_block
from localpriv.mechanisms.krr import KRR, krr_mle
from localpriv.utils.validation import LocalPrivError


def _krr_counts(k, eps, n, seed):
    rng = np.random.default_rng(seed)
    m = KRR(k, eps)
    x = np.minimum(rng.geometric(3.0 / k, size=n) - 1, k - 1)
    return m, np.bincount(m.sample(x, rng), minlength=k)


def _krr_block(m, counts):
    live = np.flatnonzero(counts)
    return ScaledIdentityBlock(m.k, m.p_keep, m.p_other, live, counts[live])


@pytest.mark.parametrize("k,eps,seed", [(10, 1.0, 0), (50, 0.5, 1), (200, 2.0, 2)])
def test_accelerated_and_plain_reach_the_closed_form_maximum(k, eps, seed):
    m, counts = _krr_counts(k, eps, 20_000, seed)
    b = _krr_block(m, counts)
    L_star = log_likelihood([b], krr_mle(counts, eps))
    # pinned: plain EM and SQUAREM on the total-L rule (the engine's former defaults)
    plain = em([b], k, delta=1e-9, max_iter=200_000, accelerate="none", stop="loglik")
    fast = em([b], k, delta=1e-9, max_iter=200_000, accelerate="squarem", stop="loglik")
    assert plain.converged and fast.converged
    # both end within the tolerance's reach of the true maximum; EM's slow tail costs plain a little
    assert fast.loglik >= L_star - 1e-3
    assert plain.loglik >= L_star - 1e-1
    assert fast.loglik >= plain.loglik - 1e-9
    assert fast.iterations <= plain.iterations
    assert np.abs(fast.theta - krr_mle(counts, eps)).max() < 2e-3


@settings(max_examples=15)
@given(k=st.integers(3, 80), eps=st.floats(0.2, 4.0), seed=st.integers(0, 10**6),
       delta=st.sampled_from([1e-3, 1e-6]))
def test_accelerated_never_ends_lower_and_stays_a_distribution(k, eps, seed, delta):
    m, counts = _krr_counts(k, eps, 3000, seed)
    b = _krr_block(m, counts)
    plain = em([b], k, delta=delta, max_iter=50_000, accelerate="none", stop="loglik")
    fast = em([b], k, delta=delta, max_iter=50_000, accelerate="squarem", keep_trace=True, stop="loglik")
    assert fast.theta.min() >= 0 and abs(fast.theta.sum() - 1) < 1e-12
    assert fast.loglik >= plain.loglik - delta
    tr = np.asarray(fast.trace)
    assert np.all(np.diff(tr) >= -1e-9 * np.abs(tr[1:]))  # monotone safeguard


def test_gibu_mixture_same_maximum_with_acceleration():
    rng = np.random.default_rng(7)
    k = 40
    x = np.minimum(rng.geometric(0.08, size=6000) - 1, k - 1)
    blocks = []
    for i, eps in enumerate([0.3, 0.8]):
        a = np.exp(-eps)
        xs = x[i::3]
        z = np.clip(xs + rng.geometric(1 - a, xs.size) - rng.geometric(1 - a, xs.size), 0, k - 1)
        c = np.bincount(z, minlength=k)
        live = np.flatnonzero(c)
        blocks.append(linear_geometric_block(k, eps, live, c[live]))
    m = KRR(k, 2.0)
    c = np.bincount(m.sample(x[2::3], rng), minlength=k)
    blocks.append(_krr_block(m, c))
    plain = em(blocks, k, delta=1e-10, max_iter=300_000, accelerate="none", stop="loglik")
    fast = em(blocks, k, delta=1e-10, max_iter=300_000, accelerate="squarem", stop="loglik")
    assert fast.converged
    assert fast.loglik >= plain.loglik - 1e-9
    assert abs(fast.loglik - plain.loglik) < 1e-2
    assert np.abs(fast.theta - plain.theta).max() < 5e-3
    assert fast.iterations < plain.iterations


def test_max_abs_stopping_rule():
    m, counts = _krr_counts(30, 1.0, 5000, 3)
    b = _krr_block(m, counts)
    res = em([b], 30, delta=1e-8, stop="max_abs", keep_trace=True, max_iter=300_000, accelerate="none")
    res2 = em([b], 30, delta=1e-8, stop="max_abs", accelerate="squarem")
    assert res.converged and res2.converged
    assert res2.loglik >= res.loglik - 1e-9


def test_ibu_settings_record_scheme_and_rule():
    m, counts = _krr_counts(20, 1.0, 4000, 4)
    obs = Observations.from_counts(m, counts)
    old = {"stop": "loglik", "delta": 1e-6, "max_iter": 10_000}  # pinned: the former defaults
    plain = ibu(obs, accelerate="none", **old)
    fast = ibu(obs, accelerate="squarem", **old)
    assert plain.settings["acceleration"] == "none"
    assert fast.settings["acceleration"] == "squarem"
    assert fast.settings["stopping"] == plain.settings["stopping"] == "|L(t)-L(t-1)| < delta"
    assert fast.loglik >= plain.loglik - 1e-6
    assert np.isclose(fast.distribution.sum(), 1.0)


def test_bad_options_raise():
    m, counts = _krr_counts(5, 1.0, 100, 0)
    b = _krr_block(m, counts)
    with pytest.raises(LocalPrivError):
        em([b], 5, accelerate="anderson")
    with pytest.raises(LocalPrivError):
        em([b], 5, stop="theta")


def test_iteration_cap_is_reported():
    m, counts = _krr_counts(50, 0.5, 5000, 9)
    b = _krr_block(m, counts)
    res = em([b], 50, delta=1e-14, max_iter=7, accelerate="squarem", stop="loglik")
    assert not res.converged and res.iterations <= 7
    assert abs(res.theta.sum() - 1) < 1e-12
