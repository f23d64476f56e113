"""Planar FFT blocks: SQUAREM trials without FFTs.

The engine gets the forward products of SQUAREM's trial points from the products it already has
(they are linear in theta) plus a direct sum over the few cells where the floor binds
(``RfftClampedBlock.sparse_forward``); these tests check those products against FFT products and
that the runs reach the same certified maximum with fewer FFTs.
"""
import sys

import numpy as np
import pytest

from localpriv.estimators.em import em
from localpriv.likelihood.rfft import RfftClampedBlock
from localpriv.likelihood.structured import ClampedConvBlock, clamped_block_for, planar_geometric_kernel

EM = sys.modules["localpriv.estimators.em"]


def _block(shape, eps, seed, n=4000, spread=2):
    rng = np.random.default_rng(seed)
    k = shape[0] * shape[1]
    x = rng.integers(0, k, n)
    z, c = np.unique(np.clip(x + rng.integers(-spread, spread + 1, n), 0, k - 1), return_counts=True)
    return clamped_block_for(planar_geometric_kernel(eps, 1.0), eps, shape, z, c)


@pytest.mark.parametrize("shape,eps", [((7, 5), 1.0), ((1, 9), 2.0), ((9, 1), 0.7), ((30, 26), 1.5)])
def test_sparse_forward_equals_the_fft_product(shape, eps):
    b = _block(shape, eps, 1)
    assert isinstance(b, RfftClampedBlock) and isinstance(b, ClampedConvBlock)
    rng = np.random.default_rng(5)
    k = b.k
    # corners and edges (where the kernel is folded) and random interior cells
    cells = np.unique(np.r_[0, k - 1, shape[1] - 1, k - shape[1], rng.integers(0, k, 4)])
    w = rng.random(cells.size)
    theta = np.zeros(k)
    theta[cells] = w
    f = b.forward(theta)
    for _ in range(2):  # its buffer is reused: a second call gives the same
        s = b.sparse_forward(cells, w)
        assert np.abs(s - f).max() <= 1e-12 * f.max()
    assert np.array_equal(b.sparse_forward(cells[:0], w[:0]), np.zeros(b.counts.size))


def test_path_products_equal_fft_products(monkeypatch):
    monkeypatch.setattr(RfftClampedBlock, "sparse_limit", 10**9)  # every floored cell summed directly
    b = _block((40, 36), 1.2, 2, n=20_000)
    blocks = [b]
    n = float(b.counts.sum())
    rng = np.random.default_rng(3)
    theta = rng.dirichlet(np.ones(b.k) * 0.3)
    with np.errstate(divide="ignore", invalid="ignore"):
        p0 = EM._forward_all(blocks, theta)
        th1, _ = EM._em_update(blocks, theta, p0, n)
        p1 = EM._forward_all(blocks, th1)
        th2, _ = EM._em_update(blocks, th1, p1, n)
    r, v = th1 - theta, th2 - 2 * th1 + theta
    path = EM._Path(blocks, p0, p1)
    checked = 0
    for alpha in (-3.0, -2.0, -1.5):
        raw = theta - 2 * alpha * r + alpha * alpha * v
        cand = np.maximum(raw, EM.FLOOR * th2)
        s = cand.sum()
        d = cand - raw
        cand /= s
        got = path.products(cand, d, s, alpha)[0]
        want = b.forward(cand)
        assert np.abs(got - want).max() <= 1e-12 * want.max()
        checked += path.mv is not None
    assert path.ffts == 1 and path.derived == 2 and checked == 3  # one FFT, then derived
    want2 = b.forward(th2)
    assert np.abs(path.theta2(th2)[0] - want2).max() <= 1e-12 * want2.max()


def _counting(monkeypatch):
    calls = {"f": 0, "b": 0}
    f, bw = RfftClampedBlock.forward, RfftClampedBlock.backward

    def fwd(self, theta):
        calls["f"] += 1
        return f(self, theta)

    def bwd(self, w):
        calls["b"] += 1
        return bw(self, w)

    monkeypatch.setattr(RfftClampedBlock, "forward", fwd)
    monkeypatch.setattr(RfftClampedBlock, "backward", bwd)
    return calls


def test_fewer_ffts_same_certified_maximum(monkeypatch):
    block = _block((24, 22), 1.0, 4, n=40_000, spread=1)
    n = float(block.counts.sum())
    calls = _counting(monkeypatch)
    fast = em([block], block.k, accelerate="squarem", stop="gap", delta=1e-6, keep_trace=True)
    with_path = dict(calls)
    calls.update(f=0, b=0)
    monkeypatch.delattr(RfftClampedBlock, "sparse_forward")  # every trial by FFT
    slow = em([block], block.k, accelerate="squarem", stop="gap", delta=1e-6)
    assert fast.converged and slow.converged and fast.gap < 1e-6 and slow.gap < 1e-6
    assert abs(fast.loglik - slow.loglik) <= 2e-6 * n  # both within delta per report of the maximum
    assert with_path["b"] == fast.iterations
    assert with_path["f"] - with_path["b"] <= calls["f"] - calls["b"]  # FFTs beyond one per evaluation
    trace = np.asarray(fast.trace)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))  # L never decreases (to rounding)


def test_gibu_of_two_planar_mechanisms_reaches_the_reference_maximum():
    blocks = [_block((16, 15), 1.0, 6, n=15_000), _block((16, 15), 2.0, 7, n=15_000)]
    n = float(sum(b.counts.sum() for b in blocks))
    fast = em(blocks, blocks[0].k, accelerate="squarem", stop="gap", delta=1e-7)
    ref = em([ClampedConvBlock(b.kernel, b.shape, b.outputs, b.counts) for b in blocks], blocks[0].k,
             accelerate="squarem", stop="gap", delta=1e-7)
    assert fast.converged and ref.converged
    assert abs(fast.loglik - ref.loglik) <= 2e-7 * n



def test_repeated_report_cells_give_the_same_products():
    b = _block((9, 8), 1.1, 10)
    outputs = np.r_[b.outputs, b.outputs[:5]]  # a cell listed twice: its weights add up
    counts = np.r_[b.counts, np.arange(1.0, 6.0)]
    new = RfftClampedBlock(b.kernel, b.shape, outputs, counts)
    ref = ClampedConvBlock(b.kernel, b.shape, outputs, counts)
    rng = np.random.default_rng(11)
    for _ in range(2):
        theta, w = rng.dirichlet(np.ones(b.k)), rng.random(outputs.size)
        assert np.abs(new.forward(theta) - ref.forward(theta)).max() <= 1e-12 * ref.forward(theta).max()
        assert np.abs(new.backward(w) - ref.backward(w)).max() <= 1e-12 * ref.backward(w).max()
