"""Shokri et al.'s optimal mechanism (seed 003 section 8.2.4): LP solution checks."""
import numpy as np
import pytest
from scipy import stats

from localpriv.domains import IntegerDomain
from localpriv.domains.grid import GridDomain
from localpriv.mechanisms import parse
from localpriv.mechanisms.shokri import ShokriMechanism, adversary_loss, quality_loss, shokri_lp
from localpriv.utils.validation import LocalPrivError


def _line(k):
    x = np.arange(k, dtype=float)
    return np.abs(x[:, None] - x[None, :])


@pytest.mark.parametrize("Q", [0.5, 1.0, 2.5])
def test_lp_solution_meets_bound_and_is_stochastic(Q):
    k = 12
    rng = np.random.default_rng(1)
    pi = rng.dirichlet(np.ones(k) * 3)
    L = _line(k)
    A = shokri_lp(pi, L, Q)
    assert A.min() >= 0
    np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-12)
    assert quality_loss(A, pi, L) <= Q + 1e-7
    # the identity (reporting the truth) is feasible and gives the adversary nothing
    assert adversary_loss(np.eye(k), pi, L) == pytest.approx(0.0)
    assert adversary_loss(A, pi, L) > 0


def test_lp_methods_reach_the_same_optimum():
    """The optimum is not unique; HiGHS's methods may return different channels of equal value."""
    k = 15
    pi, L = np.full(k, 1.0 / k), _line(k)
    a, b = shokri_lp(pi, L, 2.0), shokri_lp(pi, L, 2.0, method="highs-ipm")
    assert adversary_loss(a, pi, L) == pytest.approx(adversary_loss(b, pi, L), rel=1e-6)
    assert quality_loss(b, pi, L) <= 2.0 + 1e-7
    np.testing.assert_allclose(b.sum(axis=1), 1.0, atol=1e-12)


def test_lp_solution_beats_feasible_perturbations():
    k = 10
    rng = np.random.default_rng(2)
    pi = rng.dirichlet(np.ones(k) * 2)
    L = _line(k)
    Q = 1.5
    A = shokri_lp(pi, L, Q)
    best = adversary_loss(A, pi, L)
    tried = 0
    for _ in range(200):
        B = rng.dirichlet(np.ones(k) * 0.5, size=k)
        for t in (0.02, 0.1, 0.3):
            C = (1 - t) * A + t * B
            ql = quality_loss(C, pi, L)
            if ql > Q:  # pull back into the feasible set by mixing with the identity (loss 0)
                s = Q / ql
                C = s * C + (1 - s) * np.eye(k)
            assert quality_loss(C, pi, L) <= Q + 1e-9
            assert adversary_loss(C, pi, L) <= best + 1e-9
            tried += 1
    assert tried == 600


def test_lp_rejects_infeasible_and_bad_inputs():
    L = _line(4)
    with pytest.raises(LocalPrivError, match="infeasible"):
        shokri_lp(np.full(4, 0.25), L + 1.0, 0.5)  # every report costs >= 1
    with pytest.raises(LocalPrivError):
        shokri_lp(np.full(4, 0.25), -L, 1.0)
    with pytest.raises(LocalPrivError):
        shokri_lp(np.full(4, 0.25), L, float("nan"))


def test_spec_on_linear_domain_samples_match_channel():
    dom = IntegerDomain(0, 7)
    m = parse("shokri(q=1.5)", dom)
    assert isinstance(m, ShokriMechanism)
    assert str(m) == "shokri(q=1.5)"
    assert parse(str(m), dom) == m
    C = m.channel()
    assert m.quality_loss() <= 1.5 + 1e-7
    rng = np.random.default_rng(3)
    x = np.repeat(np.arange(8), 3000)
    z = m.sample(x, rng)
    for xi in range(8):
        c = np.bincount(z[x == xi], minlength=8)
        live = C[xi] > 0
        assert c[~live].sum() == 0
        if live.sum() > 1:
            assert stats.chisquare(c[live], 3000 * C[xi, live] / C[xi, live].sum()).pvalue > 1e-4
    # privacy computed from the channel, never claimed: zeros in a column make eps-LDP infinite
    eps = m.epsilon_ldp()
    assert eps == np.inf or eps > 0
    if np.all(C > 0):
        assert np.isfinite(m.epsilon_geo())


def test_planar_domain_and_prior():
    g = GridDomain(40.70, -74.02, 3, 3, 1.0)
    m = ShokriMechanism(0.8, domain=g)
    assert m.k == 9
    assert m.quality_loss() <= 0.8 + 1e-7
    # the optimum of the uniform-prior, loss = distance case: adversary loss equals Q when Q binds
    assert m.adversary_loss() <= m.quality_loss() + 1e-7
    pri = [0.3] + [0.7 / 8] * 8
    m2 = ShokriMechanism(0.8, domain=g, prior=pri)
    assert "prior" in str(m2)
    with pytest.raises(LocalPrivError, match="metric domain"):
        ShokriMechanism(1.0, domain=None)
