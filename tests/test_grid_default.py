"""The default estimator and the advisor on large planar grids: the folded planar kernel, the
exponential mechanism's FFT block, auto's stated budgets, and advise ranking every mechanism."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv import advise
from localpriv.advice import advisor
from localpriv.domains.grid import GridDomain
from localpriv.estimators import auto as auto_module
from localpriv.estimators import fit
from localpriv.inference.simulation import simulate_observations
from localpriv.likelihood.structured import ClampedConvBlock, NormalizedGridKernelBlock, fold_kernel
from localpriv.mechanisms import exponential as exp_module
from localpriv.mechanisms import parse


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@settings(max_examples=10, deadline=None)
@given(nr=st.integers(1, 5), nc=st.integers(1, 5), eps=st.sampled_from([0.2, 0.6, 1.2]),
       name=st.sampled_from(["planar-geometric", "planar-laplace"]))
def test_folded_kernel_gives_the_same_channel(nr, nc, eps, name):
    mech = parse(f"{name}(eps={eps})", GridDomain(40.7, -74.0, nr, nc, 1.0))
    K = mech.kernel()
    F = fold_kernel(K, (nr, nc))
    assert F.shape == (2 * min(K.shape[0] // 2, nr) + 1, 2 * min(K.shape[1] // 2, nc) + 1)
    assert F.sum() == pytest.approx(K.sum(), rel=1e-12)
    # the clamp of the folded kernel is the mechanism's channel (summation order only)
    block = ClampedConvBlock(F, (nr, nc), np.arange(nr * nc), np.ones(nr * nc))
    assert _rel(block.dense(), mech.channel()) < 1e-12


@pytest.mark.parametrize("shape, eps", [((1, 1), 0.5), ((3, 4), 0.5), ((6, 5), 0.05), ((5, 7), 3.0)])
def test_normalized_grid_kernel_block_is_the_exponential_channel(shape, eps):
    nr, nc = shape
    mech = parse(f"exponential(eps={eps})", GridDomain(40.7, -74.0, nr, nc, 0.7))
    M = mech.channel()
    z = np.arange(0, nr * nc, 2)
    i = np.arange(-(nr - 1), nr, dtype=float)[:, None]
    j = np.arange(-(nc - 1), nc, dtype=float)[None, :]
    block = NormalizedGridKernelBlock(np.exp(-0.5 * eps * 0.7 * np.hypot(i, j)), shape, z, np.ones(z.size))
    rng = np.random.default_rng(0)
    theta, w = rng.dirichlet(np.ones(nr * nc)), rng.random(z.size)
    assert _rel(block.dense(), M[:, z]) < 1e-12
    assert _rel(block.forward(theta), theta @ M[:, z]) < 1e-12
    assert _rel(block.backward(w), M[:, z] @ w) < 1e-12


def test_exponential_on_a_grid_estimates_the_same_through_either_block(monkeypatch):
    dom = GridDomain(40.7, -74.0, 6, 5, 1.0)
    mech = parse("exponential(eps=0.8)", dom)
    theta = np.random.default_rng(3).dirichlet(np.ones(30))
    obs = simulate_observations(mech, None, theta, 3000, np.random.default_rng(4), dom)
    dense = fit(obs, "ibu")
    monkeypatch.setattr(exp_module, "DENSE_PER_FFT_POINT", 0)  # force the FFT block on the same counts
    assert isinstance(obs.likelihood_blocks()[0], NormalizedGridKernelBlock)
    fft = fit(obs, "ibu")
    assert dense.converged and fft.converged
    # both certified within delta = 1e-9 nats per report of the same maximum
    assert abs(dense.loglik - fft.loglik) / obs.n < 1e-8


def test_auto_states_its_budgets_where_they_stop_it(monkeypatch):
    dom = GridDomain(40.7, -74.0, 5, 5, 1.0)
    mech = parse("planar-geometric(eps=0.3)", dom)
    theta = np.random.default_rng(5).dirichlet(np.ones(25))
    obs = simulate_observations(mech, None, theta, 2000, np.random.default_rng(6), dom)
    monkeypatch.setattr(auto_module, "TRAIN_BUDGET", 3)
    monkeypatch.setattr(auto_module, "FINAL_BUDGET", 4)
    f = fit(obs, "auto", rng=1)
    info = f.extra["auto"]
    assert info["train_converged"] is False and info["train_iterations"] <= 3
    if info["choice"] != "ems":  # the final fit then had the stated budget
        assert info["final_budget"] == 4
        assert f.extra["mle"].iterations <= 4
        assert f.settings["mle_stop"] == "budget of 4 evaluations reached"


GRID = GridDomain(40.7, -74.0, 4, 4, 1.0)


def test_advise_simulates_grid_metric_mechanisms_above_the_channel_budget(monkeypatch):
    monkeypatch.setattr(advisor, "CHANNEL_BUDGET", 100)  # 16 x 16 channel entries: above it
    adv = advise(GRID, eps_ldp=1.0, n=300, goal="tv", rng=2, runs=2,
                 mechanisms=["planar-geometric", "exponential"])
    assert not adv.skipped
    assert {r.how for r in adv.rows} == {"simulation"} and {r.estimator for r in adv.rows} == {"auto"}


def test_advise_predicts_olh_by_its_model_above_the_per_user_budget(monkeypatch):
    monkeypatch.setattr(advisor, "PER_USER_BUDGET", 10)
    monkeypatch.setattr(advisor, "SIMULATION_BUDGET", {"default": 10})
    adv = advise(GRID, eps_ldp=1.0, n=300, goal="tv", rng=2, runs=2, mechanisms=["olh"])
    assert not adv.skipped
    (row,) = adv.rows
    assert (row.how, row.estimator) == ("analytic", "mi-p") and "XXH64" in row.note
