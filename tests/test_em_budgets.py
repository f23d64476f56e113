"""Evaluation budgets and certificates of the EM fits, through the public call.

* every IBU-family fit stops within its evaluation budget ``max_iter`` on adversarial inputs
  (a boundary maximum, a nearly non-identifiable channel, a free-will collection), whatever the
  acceleration, and says whether its certificate held;
* the accelerated fits on a small planar grid reach the same certified gap as plain EM: each is
  within ``delta`` per report of the maximum, so their log-likelihoods differ by at most
  ``n delta``.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import localpriv
from localpriv.data.freewill import simulate_counts
from localpriv.data.observations import ObservationBlock, Observations
from localpriv.domains import IntegerDomain
from localpriv.domains.grid import GridDomain
from localpriv.estimators.em import SCHEMES, em
from localpriv.estimators.newton import supports_newton
from localpriv.likelihood.rfft import RfftClampedBlock
from localpriv.likelihood.structured import clamped_block_for, planar_geometric_kernel
from localpriv.mechanisms.planar import PlanarGeometric

K = 30


def _adversarial(kind: str) -> Observations:
    dom = IntegerDomain(0, K - 1)
    rng = np.random.default_rng(7)
    if kind == "boundary":  # every report is one value: the maximum is a vertex of the simplex
        return Observations([ObservationBlock(localpriv.parse("krr(k=30,eps=1.0)"), np.array([3]),
                                              np.array([10_000]))], dom)
    if kind == "flat":  # eps tiny: the channel is nearly non-identifiable, EM crawls
        theta = np.full(K, 1.0 / K)
        return simulate_counts(theta, [f"geometric(eps=0.001,lo=0,hi={K - 1})"], [10_000], rng, dom)
    theta = np.linspace(1.0, 2.0, K)
    specs = [f"krr(eps={e})" for e in (0.5, 2.0, 5.0)] + [f"geometric(eps={e},lo=0,hi={K - 1})" for e in (0.05, 0.2)]
    return simulate_counts(theta / theta.sum(), specs, [5_000] * 5, rng, dom)


OBS = {kind: _adversarial(kind) for kind in ("boundary", "flat", "collection")}


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(sorted(OBS)), scheme=st.sampled_from(SCHEMES),
       method=st.sampled_from(["ibu", "gibu"]), max_iter=st.integers(1, 9))
def test_fit_stops_within_its_evaluation_budget(kind: str, scheme: str, method: str, max_iter: int) -> None:
    est = localpriv.estimate(OBS[kind], method, accelerate=scheme, max_iter=max_iter, delta=1e-15)
    assert est.iterations <= max_iter
    assert est.settings["max_iter"] == max_iter
    assert est.settings["stopping"]  # the rule is stated beside the result
    gap = est.settings["gap_reached"]
    assert est.converged == (gap is not None and gap < 1e-15)


def _planar() -> Observations:
    dom = GridDomain(40.70, -74.02, 7, 6, 0.1)
    mech = PlanarGeometric(10.0, domain=dom)
    rng = np.random.default_rng(3)
    x = rng.choice(dom.size, size=3_000, p=np.linspace(1.0, 3.0, dom.size) / np.linspace(1.0, 3.0, dom.size).sum())
    z, c = np.unique(mech.sample(x, rng), return_counts=True)
    return Observations([ObservationBlock(mech, z, c)], dom)


def test_accelerated_planar_fit_reaches_the_plain_certificate() -> None:
    obs, delta = _planar(), 1e-6
    plain = localpriv.estimate(obs, "ibu", accelerate="none", delta=delta, max_iter=200_000)
    for scheme in ("squarem", "newton"):
        fast = localpriv.estimate(obs, "ibu", accelerate=scheme, delta=delta)
        for est in (plain, fast):
            assert est.converged and est.settings["gap_reached"] < delta
        # both within n * delta of the maximum (the certificate), hence of each other
        assert abs(fast.loglik - plain.loglik) <= obs.n * delta
        assert fast.iterations <= plain.iterations


def test_newton_on_the_planar_fft_block_reaches_plain_ems_certificate() -> None:
    # the FFT block itself (the mechanisms use it above 2^22 likelihood entries): its Newton finish
    # hands its best point to EM, and the result carries the same certificate as plain EM's
    side, eps, delta = 10, 2.0, 1e-5
    rng = np.random.default_rng(11)
    kernel = planar_geometric_kernel(eps, 1.0)
    cells = rng.choice(side * side, size=12, replace=False)
    x = rng.choice(cells, size=4_000)
    block = clamped_block_for(kernel, eps, (side, side), np.arange(side * side), np.ones(side * side))
    p = block.dense()[x]  # rows: P(report | x) for each user's x
    reports = (p.cumsum(axis=1) > rng.random((x.size, 1))).argmax(axis=1)
    z, c = np.unique(reports, return_counts=True)
    block = clamped_block_for(kernel, eps, (side, side), z, c)
    assert isinstance(block, RfftClampedBlock) and supports_newton([block])
    plain = em([block], side * side, accelerate="none", delta=delta, max_iter=100_000)
    fast = em([block], side * side, accelerate="newton", delta=delta)
    assert plain.converged and fast.converged and fast.scheme == "newton"
    assert plain.gap < delta and fast.gap < delta
    assert abs(fast.loglik - plain.loglik) <= c.sum() * delta
