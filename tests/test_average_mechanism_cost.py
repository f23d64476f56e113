"""[INV]M and [IBU]M without the dense average mechanism where the channels allow it, [INV]M's
dense limit, and the strength selection's folds batched by family: the same estimates as the dense
and per-mechanism evaluations, within the solvers' tolerances."""
import warnings

import numpy as np
import pytest

from localpriv.data.freewill import simulate_counts
from localpriv.domains import IntegerDomain
from localpriv.estimators import combination as comb
from localpriv.estimators import regularized as reg
from localpriv.estimators.em import DEFAULT_DELTA
from localpriv.likelihood.blocks import DenseBlock, WeightedSumBlock
from localpriv.likelihood.structured import ScaledIdentityBlock, linear_geometric_block
from localpriv.utils.errors import LocalPrivError, PrivacyWarning


def _theta(k):
    v = np.arange(k) / k
    t = np.exp(-0.5 * ((v - 0.3) / 0.08) ** 2) + 0.5 * np.exp(-0.5 * ((v - 0.75) / 0.1) ** 2) + 1e-3
    return t / t.sum()


def _obs(specs, k, n=20_000, seed=1):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return simulate_counts(_theta(k), specs, [n] * len(specs), np.random.default_rng(seed),
                               IntegerDomain(0, k - 1))


KRR_MIX = ["krr(eps=0.5)", "krr(eps=1.0)", "krr(eps=3.0)"]
GEO_MIX = ["geometric(eps=0.5,lo=0,hi={hi})", "geometric(eps=1.0,lo=0,hi={hi})", "geometric(eps=2.0,lo=0,hi={hi})"]


def _geo(k):
    return [s.format(hi=k - 1) for s in GEO_MIX]


@pytest.mark.parametrize("post", ["n", "p"])
def test_inv_m_closed_form_is_the_dense_solve(post):
    obs = _obs(KRR_MIX, 40)
    A, counts = comb.average_mechanism(obs)
    dense = np.linalg.solve(A.T, counts / counts.sum())
    est = comb.inv_m(obs, post=post)
    assert est.extra["solver"] == "closed form (scaled identity)"
    # A = b 11^T + d I with condition number 1/d ~ 20 here: both solves are exact to ~1e-14
    np.testing.assert_allclose(est.extra["raw_inverse"], dense, rtol=0, atol=1e-11)


def test_inv_m_dense_inversion_refused_past_its_limit(monkeypatch):
    monkeypatch.setattr(comb, "INV_M_DENSE_MAX", 20)
    with pytest.raises(LocalPrivError, match="exceed the limit of 20") as info:
        comb.inv_m(_obs(_geo(30), 30))
    assert "\n" not in str(info.value)
    # averaged k-RR channels have a closed form at any k
    assert comb.inv_m(_obs(KRR_MIX, 30)).extra["solver"] == "closed form (scaled identity)"


def test_inv_m_closed_form_refuses_a_singular_average():
    with pytest.raises(LocalPrivError, match="singular"):
        comb.inv_m(_obs(["krr(eps=1e-14)"], 30))


def _certified_close(e1, e2, n):
    """Both fits certify ``(L_max - L) / n < delta`` of the same likelihood (that of A[n])."""
    assert e1.converged and e2.converged
    diff = abs(e1.extra["loglik_average_mechanism"] - e2.extra["loglik_average_mechanism"]) / n
    assert diff <= 2 * DEFAULT_DELTA


def test_ibu_m_scaled_identity_block_is_the_dense_average(monkeypatch):
    obs = _obs(KRR_MIX, 60)
    assert isinstance(comb.average_block(obs, "ibu-m"), ScaledIdentityBlock)
    structured = comb.ibu_m(obs)
    monkeypatch.setattr(comb, "scaled_identity_average", lambda _obs: None)
    assert isinstance(comb.average_block(obs, "ibu-m"), DenseBlock)
    _certified_close(structured, comb.ibu_m(obs), obs.n)


def test_ibu_m_weighted_sum_is_the_dense_average(monkeypatch):
    obs = _obs(_geo(50), 50)
    dense = comb.ibu_m(obs)
    monkeypatch.setattr(comb, "IBU_M_DENSE_MAX", 0)
    assert isinstance(comb.average_block(obs, "ibu-m"), WeightedSumBlock)
    _certified_close(comb.ibu_m(obs), dense, obs.n)


def test_weighted_sum_block_products_are_the_weighted_dense_products():
    k, rng = 30, np.random.default_rng(4)
    outputs = np.array([0, 3, 7, 8, 15, 29])
    counts = rng.integers(1, 50, outputs.size).astype(float)
    members = [linear_geometric_block(k, eps, outputs, counts) for eps in (0.3, 1.0, 2.5)]
    w = np.array([0.2, 0.5, 0.3])
    block = WeightedSumBlock(members, w, counts)
    G = sum(wi * m.dense() for wi, m in zip(w, members))
    theta, v = rng.dirichlet(np.ones(k)), rng.random(outputs.size)
    np.testing.assert_allclose(block.forward(theta), theta @ G, rtol=1e-12)
    np.testing.assert_allclose(block.backward(v), G @ v, rtol=1e-12)
    np.testing.assert_allclose(block.dense(), G, rtol=1e-12)
    with pytest.raises(LocalPrivError, match="one weight per member"):
        WeightedSumBlock(members, w[:2], counts)
    with pytest.raises(LocalPrivError, match="same 30 inputs"):
        WeightedSumBlock(members, w, counts[:3])


def test_strength_selection_folds_are_batched_by_family(monkeypatch):
    """6 mechanisms of two families: every fit of the selection sees 2 blocks, and the choice and
    the estimate are those of the per-mechanism folds."""
    k = 12
    obs = _obs(["krr(eps=1.0)", "krr(eps=2.0)", "krr(eps=0.7)"] +
               [f"geometric(eps={e},lo=0,hi={k - 1})" for e in (0.3, 0.9, 1.8)], k, n=2000)
    seen: list[int] = []
    em = reg.em

    def recording(blocks, *args, **kw):
        seen.append(len(blocks))
        return em(blocks, *args, **kw)

    monkeypatch.setattr(reg, "em", recording)
    batched = reg.dirichlet(obs)
    assert seen and max(seen) == 2
    monkeypatch.setattr(reg, "batch_blocks", list)  # the folds as before: one block per mechanism
    seen.clear()
    single = reg.dirichlet(obs)
    assert max(seen) == 6
    assert batched.settings["strength"] == single.settings["strength"]
    np.testing.assert_allclose(batched.extra["cv"]["heldout"], single.extra["cv"]["heldout"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(batched.distribution, single.distribution, rtol=0, atol=1e-6)
