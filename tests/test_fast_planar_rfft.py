"""Planar FFT blocks as the EM engine evaluates them."""
import sys

import numpy as np
import pytest

from localpriv.estimators.em import em
from localpriv.likelihood.rfft import RfftClampedBlock
from localpriv.likelihood.structured import ClampedConvBlock, clamped_block_for, planar_geometric_kernel

EM = sys.modules["localpriv.estimators.em"]


def _block(shape, eps, seed, n=4000):
    rng = np.random.default_rng(seed)
    k = shape[0] * shape[1]
    x = rng.integers(0, k, n)
    z, c = np.unique(np.clip(x + rng.integers(-2, 3, n), 0, k - 1), return_counts=True)
    return clamped_block_for(planar_geometric_kernel(eps, 1.0), eps, shape, z, c)


@pytest.mark.parametrize("shape,eps", [((7, 5), 1.0), ((1, 9), 2.0), ((9, 1), 0.7), ((12, 11), 0.5)])
def test_rfft_block_equals_the_clamped_block(shape, eps):
    old = _block(shape, eps, 1)
    new = RfftClampedBlock.from_block(old)
    rng = np.random.default_rng(2)
    for _ in range(3):  # the padded buffers are reused: repeated products stay exact
        theta = rng.dirichlet(np.ones(old.k))
        w = rng.random(old.counts.size)
        f0, f1 = old.forward(theta), new.forward(theta)
        b0, b1 = old.backward(w), new.backward(w)
        assert np.abs(f1 - f0).max() <= 1e-12 * np.abs(f0).max()
        assert np.abs(b1 - b0).max() <= 1e-12 * np.abs(b0).max()
    assert np.abs(new.dense() - old.dense()).max() <= 1e-12 * old.dense().max()
    # against a block built from scratch (own kernel spectra)
    fresh = RfftClampedBlock(old.kernel, old.shape, old.outputs, old.counts)
    assert np.abs(fresh.forward(theta) - f0).max() <= 1e-12 * np.abs(f0).max()


def test_engine_uses_the_rfft_block_and_one_forward_per_evaluation(monkeypatch):
    block = _block((20, 18), 2.0, 3, n=20_000)
    calls = {"f": 0, "b": 0}
    f, b = RfftClampedBlock.forward, RfftClampedBlock.backward

    def fwd(self, theta):
        calls["f"] += 1
        return f(self, theta)

    def bwd(self, w):
        calls["b"] += 1
        return b(self, w)

    monkeypatch.setattr(RfftClampedBlock, "forward", fwd)
    monkeypatch.setattr(RfftClampedBlock, "backward", bwd)
    res = em([block], block.k, accelerate="squarem", stop="gap", delta=1e-5, keep_trace=True)
    assert res.converged and res.gap < 1e-5
    assert res.cycles > 0 and calls["b"] == res.iterations  # every EM evaluation: one backward product ...
    # ... and one forward product, plus the start, backtracking trials and fallbacks to theta2
    assert res.iterations <= calls["f"] <= res.iterations + 2 + 7 * res.cycles
    trace = np.asarray(res.trace)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))  # L never decreases (to rounding)


def test_lazy_squarem_reaches_the_certified_maximum():
    block = _block((15, 14), 2.5, 4, n=30_000)
    n = block.counts.sum()
    fast = em([block], block.k, accelerate="squarem", stop="gap", delta=1e-6)
    ref_block = ClampedConvBlock(block.kernel, block.shape, block.outputs, block.counts)  # not replaced
    ref = em([ref_block], block.k, accelerate="squarem", stop="gap", delta=1e-6)
    assert fast.converged and ref.converged
    # both certified within delta per report of the same maximum
    assert abs(fast.loglik - ref.loglik) <= 2e-6 * n
