"""RAPPOR's ridge-penalized regression with a penalty chosen from the data.

``decode(..., method="ridge")``: the estimate against the truth within its bias plus five
standard deviations of the ridge sandwich from the exact per-user bit covariance; the
leave-one-cohort-out shortcut against explicit refits; the chosen penalty going to 0 (and the
estimate to ``nnls``'s) as the noise vanishes; refusals.
"""
import numpy as np
import pytest

from localpriv.estimators.rappor import RIDGE_GRID, decode
from localpriv.estimators.rappor import ridge_criteria as _ridge_criteria
from localpriv.mechanisms import parse
from localpriv.mechanisms.rappor import BitCounts
from localpriv.utils.validation import LocalPrivError

THETA = np.array([0.3, 0.25, 0.18, 0.12, 0.1, 0.05])
SPEC = "rappor(k=6,m=10,h=2,cohorts=4,f=0.5,p=0.5,q=0.75)"
N = 20000


def _design(mech, n_c):
    """``A[(c, j), x] = n[c] [j in B_c(x)]`` and the exact covariance of ``T`` (block per cohort:
    ``n[c]`` times the per-user covariance of the report bits, over ``(s1 - s0)^2``)."""
    s0, s1, m = mech.s0, mech.s1, mech.m
    bloom = mech.bloom().astype(float)                           # cohorts x K x m
    A = np.vstack([n_c[c] * bloom[c].T for c in range(mech.cohorts)])
    cov = np.zeros((A.shape[0], A.shape[0]))
    for c in range(mech.cohorts):
        S = s0 + (s1 - s0) * bloom[c]                            # K x m: P(bit = 1 | x)
        pi = THETA @ S
        per_user = (S * THETA[:, None]).T @ S - np.outer(pi, pi)
        np.fill_diagonal(per_user, pi * (1 - pi))
        cov[c * m:(c + 1) * m, c * m:(c + 1) * m] = n_c[c] * per_user / (s1 - s0) ** 2
    return A, cov


def _expected_counts(mech, n_c):
    pi = mech.s0 + (mech.s1 - mech.s0) * np.einsum("x,cxj->cj", THETA, mech.bloom().astype(float))
    return n_c[:, None] * pi


@pytest.fixture(scope="module")
def collected():
    mech = parse(SPEC)
    rng = np.random.default_rng(2020)
    reports = mech.sample(rng.choice(mech.k, N, p=THETA), rng)
    return mech, mech.bit_counts(reports)


@pytest.mark.parametrize("selection", ["cv", "gcv", "sure"])
def test_ridge_recovers_the_distribution(collected, selection):
    mech, bc = collected
    res = decode(mech, bit_counts=bc, method="ridge", penalty=selection)
    assert res.extra["selection"] == selection and res.extra["penalty"] in res.extra["grid"]
    assert res.distribution.sum() == pytest.approx(1.0) and np.all(res.coef >= 0)
    # off the boundary the fit is linear: E theta = G^-1 A^T A theta, Cov = G^-1 A^T Cov(T) A G^-1
    A, cov = _design(mech, bc.n)
    assert np.all(res.coef > 0)
    G_inv = np.linalg.inv(A.T @ A + res.extra["lambda"] * np.eye(mech.k))
    bias = G_inv @ A.T @ A @ THETA - THETA
    sd = np.sqrt(np.diag(G_inv @ A.T @ cov @ A @ G_inv))
    assert np.all(np.abs(res.coef - THETA) < np.abs(bias) + 5 * sd), (res.coef, bias, sd)
    # the default decoder is this one
    assert decode(mech, bit_counts=bc).method == "ridge"


@pytest.mark.parametrize("spec", [SPEC, "rappor(k=12,m=8,h=2,cohorts=5,f=0.5,p=0.5,q=0.75)"])
def test_cohort_cross_validation_is_the_refit_without_the_cohort(spec):
    """CV(lam) = sum_c ||(I - H_cc)^-1 r_c||^2 equals the residuals of explicit refits (both the
    m x m solve, k >= m, and the Woodbury form, k < m)."""
    mech = parse(spec)
    rng = np.random.default_rng(11)
    bc = mech.bit_counts(mech.sample(rng.integers(0, mech.k, N), rng))
    A = np.vstack([bc.n[c] * mech.bloom()[c].T.astype(float) for c in range(mech.cohorts)])
    T = mech.debiased(bc).ravel()
    lam = 0.05 * np.einsum("ij,ij->", A, A) / mech.k
    coef = np.linalg.solve(A.T @ A + lam * np.eye(mech.k), A.T @ T)
    assert np.all(coef > 0)  # the active set is every candidate: the refits are plain ridge fits
    got = _ridge_criteria(A, T, np.ones_like(T), coef, lam, mech.cohorts, mech.m, bc.n > 0)
    m, want = mech.m, 0.0
    for c in range(mech.cohorts):
        rows = np.r_[c * m:(c + 1) * m]
        keep = np.setdiff1d(np.arange(A.shape[0]), rows)
        refit = np.linalg.solve(A[keep].T @ A[keep] + lam * np.eye(mech.k), A[keep].T @ T[keep])
        want += np.sum((T[rows] - A[rows] @ refit) ** 2)
    assert got["cv"] == pytest.approx(want, rel=1e-9)
    r = T - A @ coef
    df = np.trace(A @ np.linalg.solve(A.T @ A + lam * np.eye(mech.k), A.T))
    assert got["gcv"] == pytest.approx(A.shape[0] * (r @ r) / (A.shape[0] - df) ** 2, rel=1e-9)


@pytest.mark.parametrize("selection", ["cv", "gcv"])
def test_penalty_vanishes_with_the_noise(collected, selection):
    """Fixed noise pattern scaled by eps -> 0: the chosen penalty is non-increasing and 0 for
    noiseless counts, where the estimate is the truth (and nnls's)."""
    mech, bc = collected
    exact = _expected_counts(mech, bc.n)
    noise = bc.ones - exact                                      # one realized noise pattern
    chosen = []
    for eps in (1.0, 0.1, 0.01, 0.0):
        counts = BitCounts(bc.n, exact + eps * noise)
        res = decode(mech, bit_counts=counts, method="ridge", penalty=selection)
        chosen.append(res.extra["penalty"])
        nn = decode(mech, bit_counts=counts, method="nnls")
    assert all(a >= b for a, b in zip(chosen, chosen[1:])), chosen
    assert chosen[0] > 0 and chosen[-1] == 0.0, chosen
    np.testing.assert_allclose(res.coef, THETA, atol=1e-9)
    np.testing.assert_allclose(res.coef, nn.coef, atol=1e-9)


def test_more_reports_less_penalty():
    """The binomial-risk choice (sure) at 1e3 and 1e6 reports: the penalty falls, and the ridge
    estimate approaches nnls's relative to nnls's own error."""
    mech = parse(SPEC)
    rng = np.random.default_rng(7)
    out = {}
    for n in (1_000, 1_000_000):
        bc = mech.bit_counts(mech.sample(rng.choice(mech.k, n, p=THETA), rng))
        ridge = decode(mech, bit_counts=bc, method="ridge", penalty="sure")
        nn = decode(mech, bit_counts=bc, method="nnls")
        out[n] = (ridge.extra["penalty"], np.abs(ridge.coef - nn.coef).max() / np.abs(nn.coef - THETA).max())
    assert out[1_000_000][0] < out[1_000][0], out
    assert out[1_000_000][1] < 0.5, out


def test_given_penalty_and_one_cohort():
    mech = parse(SPEC)
    rng = np.random.default_rng(8)
    bc = mech.bit_counts(mech.sample(rng.choice(mech.k, 5000, p=THETA), rng))
    zero = decode(mech, bit_counts=bc, method="ridge", penalty=0)
    np.testing.assert_allclose(zero.coef, decode(mech, bit_counts=bc, method="nnls").coef, atol=1e-12)
    strong = decode(mech, bit_counts=bc, method="ridge", penalty=10.0)
    assert strong.extra["selection"] == "given" and strong.coef.sum() < zero.coef.sum()
    # every report in one cohort: nothing to hold out, so cv falls back to gcv
    one = BitCounts(np.r_[bc.n.sum(), 0, 0, 0], np.vstack([bc.ones.sum(axis=0), np.zeros((3, mech.m))]))
    assert decode(mech, bit_counts=one, method="ridge").extra["selection"] == "gcv"
    assert set(RIDGE_GRID[:1]) == {0.0}


def test_bad_input_is_refused_in_one_line(collected):
    mech, bc = collected
    bad = [(dict(method="ridge", penalty=-0.1), ">= 0"), (dict(method="ridge", penalty="aic"), "one of cv"),
           (dict(method="ridge", penalty=float("nan")), "finite"), (dict(method="nnls", penalty=0.1), "ridge only"),
           (dict(method="lasso"), "method must be")]
    for kwargs, msg in bad:
        with pytest.raises(LocalPrivError, match=msg) as exc:
            decode(mech, bit_counts=bc, **kwargs)
        assert "\n" not in str(exc.value)
    for counts, msg in [(BitCounts(bc.n, bc.ones + bc.n[:, None]), "0 <= ones"),
                        (BitCounts(bc.n, np.where(bc.ones > 0, np.nan, 0.0)), "finite"),
                        (BitCounts(np.zeros(4), np.zeros((4, mech.m))), "no reports"),
                        (BitCounts(bc.n[:3], bc.ones[:3]), "shape")]:
        with pytest.raises(LocalPrivError, match=msg) as exc:
            decode(mech, bit_counts=counts, method="ridge")
        assert "\n" not in str(exc.value)
