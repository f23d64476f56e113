"""The geo mechanisms' likelihood blocks are the structured ones and equal the dense blocks."""
import numpy as np
import pytest

from localpriv.domains.grid import GridDomain
from localpriv.likelihood.structured import ClampedConvBlock, ExpKernelBlock
from localpriv.mechanisms.geometric import Geometric
from localpriv.mechanisms.planar import PlanarGeometric, PlanarLaplace


def _same(block, G, rng):
    theta = rng.dirichlet(np.ones(G.shape[0]))
    w = rng.random(G.shape[1])
    for fast, dense in [(block.forward(theta), theta @ G), (block.backward(w), G @ w)]:
        assert np.abs(fast - dense).max() <= 1e-12 * np.abs(dense).max()


@pytest.mark.parametrize("mech,reports", [
    (Geometric(15, 0.4, 0, 14), np.array([0, 2, 7, 14])),
    (Geometric(15, 1.3, -4, 20), np.arange(25)),
    (Geometric(15, 0.2), np.array([-9, -1, 0, 6, 30])),
])
def test_geometric_block_is_structured_and_equals_dense(mech, reports):
    block = mech.likelihood_block(reports, np.ones(reports.size))
    assert isinstance(block, ExpKernelBlock)
    _same(block, mech.likelihood(reports), np.random.default_rng(0))


def test_geometric_block_when_inputs_exceed_the_output_range():
    # lo > 0, hi < k-1: the end bins are not of Eq. 7's form at every input; exact columns
    m = Geometric(15, 0.4, 3, 10)
    r = np.arange(8)
    block = m.likelihood_block(r, np.ones(8))
    assert isinstance(block, ExpKernelBlock)
    _same(block, m.likelihood(r), np.random.default_rng(1))


@pytest.mark.parametrize("cls,eps,shape", [(PlanarGeometric, 1.0, (5, 6)), (PlanarGeometric, 3.0, (4, 4)),
                                           (PlanarLaplace, 1.5, (4, 5)), (PlanarGeometric, 0.3, (1, 7))])
def test_planar_blocks_are_clamped_convolutions_equal_to_dense(cls, eps, shape, monkeypatch):
    import localpriv.mechanisms.planar as pm

    dom = GridDomain(40.70, -74.02, shape[0], shape[1], 0.5)
    m = cls(eps, domain=dom)
    rng = np.random.default_rng(2)
    reports = np.unique(m.sample(rng.integers(0, m.k, 500), rng))
    small = m.likelihood_block(reports, np.ones(reports.size))
    assert not isinstance(small, ClampedConvBlock)  # small grids: the exact dense block
    _same(small, m.likelihood(reports), rng)
    monkeypatch.setattr(pm, "DENSE_BLOCK_MAX", 0)  # force the FFT path on the same data
    block = m.likelihood_block(reports, np.ones(reports.size))
    assert isinstance(block, ClampedConvBlock)
    _same(block, m.likelihood(reports), rng)
