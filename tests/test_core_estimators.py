"""INV-N, INV-P, IBU on aggregated counts; the closed-form k-RR MLE as an independent check."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import minimize

from localpriv.data.observations import Observations
from localpriv.domains import IntegerDomain
from localpriv.estimators import ibu, inv, log_likelihood
from localpriv.inference import estimate
from localpriv.mechanisms import KRR, MatrixMechanism, krr_mle
from localpriv.utils.simplex import clip_normalize, project_simplex
from localpriv.utils.validation import LocalPrivError


def krr_counts(k, eps, n, rng, theta=None):
    theta = np.full(k, 1.0 / k) if theta is None else theta
    x = rng.choice(k, size=n, p=theta)
    return np.bincount(KRR(k, eps).sample(x, rng), minlength=k)


@pytest.mark.parametrize("k,eps,n,zeros", [(2, 1.0, 500, 0), (10, 2.0, 3000, 3), (100, 2.0, 20000, 30)])
def test_ibu_equals_closed_form_krr_mle(k, eps, n, zeros):
    rng = np.random.default_rng(k)
    theta = rng.dirichlet(np.ones(k) * 0.3)
    counts = krr_counts(k, eps, n, rng, theta).astype(float)
    counts[rng.choice(k, size=zeros, replace=False)] = 0  # outputs never observed
    obs = Observations.from_counts(KRR(k, eps), counts)
    # plain IBU (Algorithm 1's update), stopped on the change in theta: a delta on L this small
    # would be below the floating-point resolution of L (|L| ~ 1e5 here)
    est = ibu(obs, delta=1e-11, max_iter=500_000, stop="max_abs", accelerate="none")
    mle = krr_mle(counts, eps)
    assert est.converged
    assert est.settings["stopping"].startswith("max|theta")
    assert np.abs(est.distribution - mle).max() < 1e-6
    # the closed form really is the maximum: its likelihood is at least IBU's
    L_mle = log_likelihood(obs.likelihood_blocks(), mle)
    assert L_mle >= est.loglik - 1e-6
    assert L_mle - est.loglik < 1e-6


def test_ibu_output_is_distribution_and_loglik_never_decreases():
    rng = np.random.default_rng(1)
    M = rng.dirichlet(np.ones(7), size=5)
    counts = rng.integers(0, 50, size=7)
    obs = Observations.from_counts(MatrixMechanism(rows=M), counts)
    est = ibu(obs, delta=1e-12, max_iter=2000, keep_trace=True, accelerate="none", stop="loglik")
    assert np.all(est.distribution >= 0) and est.distribution.sum() == pytest.approx(1.0, abs=1e-12)
    trace = est.extra["trace"]
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[:-1]))
    assert est.loglik == pytest.approx(trace[-1])


def test_ibu_flags_the_iteration_cap():
    rng = np.random.default_rng(2)
    counts = krr_counts(50, 0.5, 2000, rng)
    est = ibu(Observations.from_counts(KRR(50, 0.5), counts), delta=1e-14, max_iter=5, accelerate="none",
              stop="loglik")
    assert est.iterations == 5 and est.converged is False
    assert "NOT converged" in repr(est)


def test_ibu_start_must_have_full_support():
    obs = Observations.from_counts(KRR(3, 1.0), [5, 3, 2])
    with pytest.raises(LocalPrivError, match="full support"):
        ibu(obs, theta0=[0.5, 0.5, 0.0])
    est = ibu(obs, theta0=[0.2, 0.3, 0.5], delta=1e-12)
    assert est.settings["start"] == "given"


def test_inv_recovers_exact_distribution_from_expected_counts():
    k, eps = 8, 1.0
    theta = np.linspace(1, 2, k)
    theta /= theta.sum()
    m = KRR(k, eps)
    counts = m.output_probabilities(theta) * 1e6
    for post in ("n", "p"):
        assert np.allclose(inv(Observations.from_counts(m, counts), post=post).distribution, theta, atol=1e-12)
    gen = MatrixMechanism(rows=m.channel())  # generic solve path
    assert np.allclose(inv(Observations.from_counts(gen, counts)).distribution, theta, atol=1e-10)


def test_inv_on_singular_channel_says_use_ibu():
    M = [[0.5, 0.5], [0.5, 0.5]]
    with pytest.raises(LocalPrivError, match="use ibu"):
        inv(Observations.from_counts(MatrixMechanism(rows=M), [3, 4]))


def _qp_projection(v):
    k = v.size
    res = minimize(lambda p: 0.5 * np.sum((p - v) ** 2), np.full(k, 1 / k), jac=lambda p: p - v,
                   bounds=[(0, None)] * k, constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1,
                                                          "jac": lambda p: np.ones(k)}],
                   method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    return res.x


@given(arrays(float, st.integers(1, 8), elements=st.floats(-3, 3, allow_nan=False)))
def test_projection_is_the_exact_simplex_projection(v):
    p = project_simplex(v)
    assert np.all(p >= 0) and p.sum() == pytest.approx(1.0, abs=1e-12)
    # KKT: p = max(v - tau, 0) with one tau: v - p is constant on the support, and >= that elsewhere
    supp = p > 0
    tau = (v - p)[supp]
    assert np.ptp(tau) < 1e-9
    assert np.all(v[~supp] <= tau[0] + 1e-9)
    assert np.allclose(p, _qp_projection(v), atol=1e-5)


def test_clip_normalize():
    assert np.allclose(clip_normalize([0.5, -0.2, 1.5]), [0.25, 0, 0.75])
    assert np.allclose(clip_normalize([-1, -2]), [0.5, 0.5])


@pytest.mark.parametrize("bad,msg", [([1, 2], "2 entries but 3"), ([0, 0, 0], "sum to zero"),
                                     ([1, -1, 3], "negative"), ([1, np.nan, 2], "NaN"), ([], "0 entries but 3")])
def test_mismatched_or_bad_counts(bad, msg):
    with pytest.raises(LocalPrivError, match=msg):
        Observations.from_counts(KRR(3, 1.0), bad)


def test_estimate_dispatch_and_estimate_object(tmp_path):
    obs = Observations.from_counts(KRR(4, 1.0), [10, 20, 30, 40], IntegerDomain(10, 13))
    for name in ("inv-n", "inv-p", "ibu"):
        e = estimate(obs, name)
        assert e.estimator == name and e.n == 100
        assert e.labels.tolist() == [10, 11, 12, 13]
        assert np.isfinite(e.loglik)
        e.save(tmp_path / f"{name}.json")
        e.save(tmp_path / f"{name}.csv")
    with pytest.raises(LocalPrivError, match="unknown estimator"):
        estimate(obs, "magic")
