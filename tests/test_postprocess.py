"""Wang et al.'s (NDSS 2020) post-processing estimators: each method's defining property on small
hand-made vectors, the Fit they return, and their bias on simulated k-RR data."""
from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest
from scipy.integrate import quad

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.estimators import fit
from localpriv.estimators.oracles import mi_vector
from localpriv.estimators.postprocess import (
    METHODS,
    base_cut,
    base_pos,
    cut_threshold,
    noise_variance,
    norm,
    norm_cut,
    norm_mul,
    norm_sub,
    power,
    power_exponent,
    power_moments,
    unbiased_estimate,
)
from localpriv.mechanisms import parse
from localpriv.mechanisms.krr import KRR
from localpriv.utils.simplex import clip_normalize, project_simplex
from localpriv.utils.validation import LocalPrivError

RAW = np.array([0.52, 0.31, 0.24, -0.06, 0.02, -0.03])


def _krr_obs(theta: np.ndarray, eps: float, n: int, rng: np.random.Generator) -> Observations:
    """k-RR reports of ``n`` users drawn from ``theta``, as counts (multinomial on the output law)."""
    k = theta.size
    mech = KRR(k, eps)
    counts = rng.multinomial(n, mech.channel().T @ theta)
    keep = counts > 0
    return Observations([ObservationBlock(mech, np.arange(k)[keep], counts[keep])],
                        CategoricalDomain([f"v{i}" for i in range(k)]))


# --- the defining properties on hand-made vectors ---------------------------------------------

def test_base_pos_clips_negatives_only():
    assert np.array_equal(base_pos(RAW), np.maximum(RAW, 0))


def test_base_cut_zeroes_exactly_the_entries_below_the_threshold():
    s2 = np.full(RAW.size, 0.01**2)
    T = 0.01 * NormalDist().inv_cdf(1 - 0.05 / RAW.size)  # about 0.029
    assert np.allclose(cut_threshold(s2), T)
    out = base_cut(RAW, s2)
    assert np.array_equal(out, np.where(RAW > T, RAW, 0.0))
    assert out[4] == 0 and out[2] == RAW[2]  # 0.02 < T is cut, 0.24 kept
    # a stricter level raises the threshold
    assert np.all(cut_threshold(s2, 0.001) > T)


def test_norm_adds_one_constant_to_sum_one():
    out = norm(RAW)
    assert out.sum() == pytest.approx(1.0)
    assert np.allclose(out - RAW, (1 - RAW.sum()) / RAW.size)


def test_norm_mul_is_proportional_to_the_positive_part():
    out = norm_mul(RAW)
    assert out.sum() == pytest.approx(1.0)
    pos = np.maximum(RAW, 0)
    assert np.allclose(out, pos / pos.sum())


def test_norm_cut_keeps_the_largest_entries():
    # positive part sums to 1.09: 0.52 + 0.31 + 0.24 = 1.07 > 1, so only the two largest are kept
    out = norm_cut(RAW)
    assert np.array_equal(out, [0.52, 0.31, 0, 0, 0, 0])
    # a positive part summing to at most 1 is kept whole
    small = np.array([0.4, 0.3, -0.1, 0.1])
    assert np.array_equal(norm_cut(small), [0.4, 0.3, 0, 0.1])
    # the largest entry is kept even when it alone exceeds 1
    assert np.array_equal(norm_cut(np.array([1.3, 0.2, -0.5])), [1.3, 0, 0])


def test_norm_sub_is_the_euclidean_projection_onto_the_simplex():
    assert np.allclose(norm_sub(RAW), project_simplex(RAW))
    rng = np.random.default_rng(3)
    for _ in range(50):
        v = rng.normal(0.1, 0.3, size=rng.integers(2, 12))
        out = norm_sub(v)
        assert out.sum() == pytest.approx(1.0) and np.all(out >= 0)
        assert np.allclose(out, project_simplex(v), atol=1e-12)
        # one constant subtracted from every kept entry
        kept = out > 0
        assert np.ptp(out[kept] - v[kept]) < 1e-12


def test_power_exponent_is_the_power_law_mle_of_the_tail():
    rng = np.random.default_rng(5)
    xmin, a = 1e-3, 2.5
    tail = xmin * rng.random(20000) ** (-1 / (a - 1))  # Pareto with density ~ x^-a above xmin
    s2 = np.full(tail.size, (xmin / NormalDist().inv_cdf(1 - 0.05 / tail.size)) ** 2)  # threshold = xmin
    assert power_exponent(tail, s2) == pytest.approx(a, rel=0.03)
    assert power_exponent(np.full(4, -0.1), np.full(4, 1e-4)) == 0.0  # nothing significant: flat prior


def test_power_shrinks_towards_zero_and_keeps_large_entries():
    s2 = np.full(RAW.size, 0.01**2)
    out, a = power(RAW, s2, n=10_000)
    assert a > 1 and np.all(out > 0)
    assert np.all(np.diff(out[np.argsort(RAW)]) >= 0)  # monotone in the estimate
    assert np.allclose(out[:3], RAW[:3], atol=0.01)  # significant entries barely move
    assert np.all(out[3:] < 0.02)  # noise-level entries shrunk to the prior's small values
    # a flat prior and tiny noise give back the estimate inside [1/n, 1]
    flat, _ = power(RAW, np.full(RAW.size, 1e-10), n=10_000, exponent=0.0)
    assert np.allclose(flat[:3], RAW[:3], atol=1e-4)


def _power_reference(f: float, sd: float, a: float, n: float) -> tuple[float, float]:
    """Power's posterior mean and variance of one cell by adaptive quadrature (scipy's QUADPACK)."""
    lo = 1.0 / n
    pts = [p for p in (f, f - 3 * sd, f + 3 * sd, 10 * lo, 100 * lo) if lo < p < 1]
    z = [quad(lambda x, m=m: x ** (m - a) * np.exp(-0.5 * (f - x) ** 2 / sd ** 2), lo, 1.0, points=pts,
              limit=500, epsabs=0.0, epsrel=1e-12)[0] for m in (0, 1, 2)]
    return z[1] / z[0], z[2] / z[0] - (z[1] / z[0]) ** 2


@pytest.mark.parametrize("f, sd, a, n", [
    (0.05, 0.1, 1.5, 1e4), (-0.3, 0.1, 2.0, 1e4), (0.5, 0.003, 1.1, 1e5), (1.2, 0.05, 3.0, 1e6),
    (5e-4, 1e-3, 2.0, 1e6), (0.02, 0.01, 0.0, 1e3), (-0.12, 0.01, 1.5, 1e5), (0.999, 0.02, 0.5, 1e4)])
def test_power_quadrature_is_at_least_as_accurate_as_powers_grid(f, sd, a, n):
    """The Gauss-Legendre rule's posterior moments agree with adaptive quadrature to 1e-8 (means)
    and 1e-6 (variances), relative, and never err more than the 1,900-point grid."""
    ref_m, ref_v = _power_reference(f, sd, a, n)
    m, v, _ = power_moments([f], [sd ** 2], n, exponent=a)
    gm, gv, _ = power_moments([f], [sd ** 2], n, exponent=a, grid=1500, near=400)
    assert abs(m[0] - ref_m) <= 1e-8 * ref_m
    assert abs(v[0] - ref_v) <= 1e-6 * ref_v
    assert abs(m[0] - ref_m) <= abs(gm[0] - ref_m) + 1e-12 * ref_m
    assert abs(v[0] - ref_v) <= abs(gv[0] - ref_v) + 1e-10 * ref_v


# --- the registered estimators ----------------------------------------------------------------

@pytest.fixture(scope="module")
def krr_obs():
    theta = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04, 0, 0])
    return _krr_obs(theta, 1.0, 3000, np.random.default_rng(11))


@pytest.mark.parametrize("method", list(METHODS))
def test_fit_keeps_the_raw_estimate_and_normalizes_the_method_result(krr_obs, method):
    est = fit(krr_obs, method)
    raw = mi_vector(krr_obs.single())
    assert est.estimator == method and est.n == krr_obs.n
    assert np.allclose(est.extra["raw_inverse"], raw)
    assert np.allclose(est.distribution, clip_normalize(est.extra["unnormalized"]))
    assert est.distribution.sum() == pytest.approx(1.0) and np.all(est.distribution >= 0)


def test_registered_methods_are_the_functions(krr_obs):
    raw = mi_vector(krr_obs.single())
    s2 = noise_variance(krr_obs.single(), raw)
    # k-RR: sigma^2 = q(1-q)/(n(p-q)^2) = (e^eps + k - 2)/(n (e^eps - 1)^2)
    e = np.exp(1.0)
    assert np.allclose(s2, (e + 8 - 2) / (krr_obs.n * (e - 1) ** 2))
    assert np.allclose(fit(krr_obs, "norm-sub").distribution, project_simplex(raw))
    assert np.allclose(fit(krr_obs, "norm-mul").distribution, fit(krr_obs, "mi-n").distribution)
    assert np.allclose(fit(krr_obs, "base-pos").distribution, fit(krr_obs, "norm-mul").distribution)
    assert np.array_equal(fit(krr_obs, "base-cut", level=0.2).extra["unnormalized"], base_cut(raw, s2, 0.2))
    assert np.array_equal(fit(krr_obs, "norm-cut").extra["unnormalized"], norm_cut(raw))
    p, _ = power(raw, s2, krr_obs.n)
    assert np.allclose(fit(krr_obs, "power").extra["unnormalized"], p)
    assert np.allclose(fit(krr_obs, "power-ns").distribution, norm_sub(p))
    assert fit(krr_obs, "power", exponent=1.5).extra["exponent"] == 1.5
    assert fit(krr_obs, "norm", loglik=True).loglik is not None


def test_a_finite_channel_that_is_not_a_pure_oracle_uses_the_inverse():
    domain = IntegerDomain(0, 5)
    mech = parse("exponential(eps=1.0)", domain)
    rng = np.random.default_rng(2)
    z = mech.sample(rng.choice(6, size=4000, p=[0.3, 0.25, 0.2, 0.15, 0.1, 0.0]), rng)
    uniq, cnt = np.unique(z, return_counts=True)
    obs = Observations([ObservationBlock(mech, uniq, cnt)], domain)
    block = obs.single()
    raw = unbiased_estimate(block)
    assert np.allclose(fit(obs, "norm-sub").extra["raw_inverse"], raw)
    assert np.allclose(fit(obs, "norm-sub").distribution, fit(obs, "inv-p").distribution)
    s2 = noise_variance(block, raw)
    assert s2.shape == (6,) and np.all(s2 > 0)
    assert fit(obs, "base-cut").distribution.sum() == pytest.approx(1.0)


def test_refuses_mixtures_and_bad_levels(krr_obs):
    two = Observations(list(krr_obs.blocks) * 2, krr_obs.domain)
    with pytest.raises(LocalPrivError, match="base-cut"):
        fit(two, "base-cut")
    with pytest.raises(LocalPrivError, match="level"):
        fit(krr_obs, "base-cut", level=1.5)


# --- bias on simulated k-RR data --------------------------------------------------------------

@pytest.fixture(scope="module")
def replicates():
    """200 k-RR data sets (k = 5, eps = 2, n = 20,000) from a distribution with one empty cell."""
    theta = np.array([0.35, 0.3, 0.2, 0.15, 0.0])
    rng = np.random.default_rng(20)
    runs = [_krr_obs(theta, 2.0, 20_000, rng) for _ in range(200)]
    return theta, runs


def _means(runs, method, key=None):
    ests = np.array([fit(o, method).extra[key] if key else fit(o, method).distribution for o in runs])
    return ests.mean(axis=0), ests.std(axis=0, ddof=1) / np.sqrt(len(runs))


def test_norm_is_unbiased_on_krr(replicates):
    # the paper: Norm keeps the unbiasedness of f~ (for k-RR sum f~ = 1, so Norm is f~ itself)
    theta, runs = replicates
    mean, se = _means(runs, "norm", "unnormalized")
    assert np.all(np.abs(mean - theta) < 4 * se + 1e-12)


@pytest.mark.parametrize("method", ["norm-sub", "norm-mul", "base-pos", "power-ns"])
def test_cells_far_from_zero_are_unbiased_ish(replicates, method):
    # away from 0 the constraints rarely bind: the bias of the large cells is within the noise of
    # one report set (sigma ~ 0.004 here), far below sigma for norm-sub / norm-mul / base-pos
    theta, runs = replicates
    sigma = np.sqrt(noise_variance(runs[0].single(), theta))[0]
    mean, se = _means(runs, method)
    assert np.all(np.abs(mean[:4] - theta[:4]) < 4 * se[:4] + sigma)


def test_base_pos_is_biased_upwards_on_an_empty_cell(replicates):
    # the paper's point: clipping at 0 moves the mean of a zero-frequency cell to about sigma/sqrt(2 pi)
    theta, runs = replicates
    mean, se = _means(runs, "base-pos", "unnormalized")
    sigma = np.sqrt(noise_variance(runs[0].single(), theta))[0]
    assert mean[4] > 4 * se[4]
    assert mean[4] == pytest.approx(sigma / np.sqrt(2 * np.pi), rel=0.25)


def test_the_plug_in_variance_of_a_finite_channel_matches_simulation():
    domain = IntegerDomain(0, 5)
    mech = parse("exponential(eps=1.0)", domain)
    theta = np.array([0.3, 0.25, 0.2, 0.15, 0.1, 0.0])
    out = mech.channel().T @ theta
    rng = np.random.default_rng(8)
    raws, s2 = [], None
    for _ in range(2000):
        counts = rng.multinomial(5000, out)
        keep = counts > 0
        block = ObservationBlock(mech, np.arange(6)[keep], counts[keep])
        raws.append(unbiased_estimate(block))
        if s2 is None:
            s2 = noise_variance(block, raws[-1])
    assert np.allclose(s2, np.var(raws, axis=0, ddof=1), rtol=0.15)
