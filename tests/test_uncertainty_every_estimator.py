"""Intervals of every estimator: the profile-likelihood cells anchored on the MLE, refusals in one line."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import localpriv
from localpriv.data.observations import Observations
from localpriv.domains import CategoricalDomain
from localpriv.inference import estimate
from localpriv.inference.simulation import simulate_block
from localpriv.inference.uncertainty import IntervalWarning, uncertainty
from localpriv.utils.validation import LocalPrivError


def _sparse_obs(seed: int = 3) -> tuple[Observations, np.ndarray]:
    k = 12
    theta = np.zeros(k)
    theta[:3] = [0.6, 0.3, 0.1]
    dom = CategoricalDomain([f"v{i}" for i in range(k)])
    mech = localpriv.parse("krr(eps=2)", dom)
    return Observations([simulate_block(mech, theta, 3000, np.random.default_rng(seed))], dom), theta


def test_profile_cells_contain_the_estimate_and_lie_in_the_unit_range():
    obs, _ = _sparse_obs()
    for name in ("auto", "norm-sub", "ibu"):
        est = estimate(obs, name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)
            u = est.uncertainty("profile")
            lo, hi = u.cell_intervals(0.95)
        p = est.distribution
        assert u.method == "anchored" and "profile-likelihood" in u.assumptions
        assert np.all(lo <= p + 1e-12) and np.all(p <= hi + 1e-12), name
        assert np.all(lo >= 0.0) and np.all(hi <= 1.0), name
        # the unwidened profile intervals contain the MLE they profile
        plo, phi = u.profile_cells(0.95)
        mle = u.extra["mle_estimate"].distribution
        assert np.all(plo <= mle + 1e-12) and np.all(mle <= phi + 1e-12), name


def test_profile_cells_of_a_sparse_truth_are_narrower_at_the_zeros_than_the_anchored_wald():
    obs, theta = _sparse_obs()
    est = estimate(obs, "auto")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntervalWarning)
        lo_a, hi_a = est.uncertainty("anchored").cell_intervals(0.95)
        lo_p, hi_p = est.uncertainty("profile").cell_intervals(0.95)
    zeros = theta == 0
    # the profile keeps the simplex's constraint: it is never wider on the cells the truth has at 0
    # summed over them (a statement about this seeded data set, not a rate)
    assert float(np.sum((hi_p - lo_p)[zeros])) <= float(np.sum((hi_a - lo_a)[zeros]))
    # functionals stay the MLE's (anchored)
    w = np.arange(theta.size, dtype=float)
    assert est.uncertainty("profile").functional(w).lower == est.uncertainty("anchored").functional(w).lower


def test_profile_and_anchored_refuse_the_linear_estimators_in_one_line():
    obs, _ = _sparse_obs()
    est = estimate(obs, "inv-n")
    for method in ("profile", "anchored"):
        with pytest.raises(LocalPrivError, match=f"^the {method} method applies to every estimator but") as info:
            uncertainty(est, obs, method=method)
        assert "\n" not in str(info.value)


def test_the_mean_statistic_of_numeric_reports_is_the_mle_mean():
    dom = localpriv.IntervalDomain(0.0, 10.0, 10)
    mech = localpriv.parse("duchi(eps=1)", dom)
    theta = np.array([0.3, 0.2, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.1])
    obs = Observations([simulate_block(mech, theta, 4000, np.random.default_rng(5))], dom)
    est = estimate(obs, "auto")
    stats = est.statistics("mean,mean_estimate,mean_unbiased")
    mle = est.uncertainty().extra["mle_estimate"]
    centres = np.asarray(dom.labels, dtype=float)
    assert stats["mean"].value == pytest.approx(float(centres @ mle.distribution), abs=1e-12)
    assert stats["mean"].method.startswith("maximum likelihood")
    assert stats["mean"].lower <= stats["mean"].value <= stats["mean"].upper
    assert stats["mean_estimate"].value == est.mean().value
    # on Duchi's one bit only the mean is identified: the MLE's mean is the unbiased one (to the
    # engine's certificate, far below the interval's half-width)
    half = stats["mean_unbiased"].upper - stats["mean_unbiased"].value
    assert abs(stats["mean"].value - stats["mean_unbiased"].value) < 1e-3 * half
    # an MLE keeps its own mean
    ibu = estimate(obs, "ibu")
    assert ibu.statistics("mean")["mean"].value == ibu.mean().value
