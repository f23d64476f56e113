"""GIBU with many mechanisms of one family: batched blocks."""
import sys

import numpy as np
import pytest

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.estimators.combination import (
    BatchedExpKernelBlock,
    BatchedScaledIdentityBlock,
    BatchedSupportBlock,
    batch_blocks,
    gibu,
    merge_blocks,
)
from localpriv.estimators.em import em
from localpriv.mechanisms import parse
from localpriv.mechanisms.geometric import Geometric
from localpriv.mechanisms.krr import KRR

EM = sys.modules["localpriv.estimators.em"]
K = 24


def _theta():
    v = np.arange(K)
    t = np.exp(-0.5 * ((v - 6) / 3) ** 2) + 0.5 * np.exp(-0.5 * ((v - 17) / 2) ** 2)
    return t / t.sum()


def _obs(mechs, n=3000, seed=0):
    rng = np.random.default_rng(seed)
    blocks = []
    for m in mechs:
        x = rng.choice(K, size=n, p=_theta())
        z, c = np.unique(m.sample(x, rng), return_counts=True, axis=0)
        blocks.append(ObservationBlock(m, z, c))
    return Observations(blocks)


def _mixture():
    mechs = []
    for i in range(4):
        mechs.append(KRR(K, 0.4 + 0.5 * i))
        mechs.append(Geometric(K, 0.1 + 0.1 * i, 0, K - 1))      # truncated: exact end columns
        mechs.append(Geometric(K, 0.2 + 0.05 * i))               # untruncated: any report range
        mechs.append(parse(f"laplace(eps={0.1 + 0.05 * i:.2f},bins=1.0,lo=0,hi={K - 1})"))  # diagonal entries
    return mechs


def _members_check(batched, blocks, rng):
    idx = [i for i, b in enumerate(blocks) if any(b is m for m in batched.members)]
    theta = rng.dirichlet(np.ones(K))
    ws = {i: rng.random(blocks[i].counts.size) * 3 for i in idx}
    want_f = np.concatenate([blocks[i].forward(theta) for i in idx])
    want_b = sum(blocks[i].backward(ws[i]) for i in idx)
    w = np.concatenate([ws[i] for i in idx])
    got_f, got_b = batched.forward(theta), batched.backward(w)
    assert np.abs(got_f - want_f).max() <= 1e-12 * np.abs(want_f).max()
    assert np.abs(got_b - want_b).max() <= 1e-12 * np.abs(want_b).max()
    G = np.hstack([blocks[i].dense() for i in idx])
    assert np.array_equal(batched.dense(), G)
    if batched.hessian_diagonal is not None:
        want_h = (G * G) @ w
        assert np.abs(batched.hessian_diagonal(w) - want_h).max() <= 1e-12 * np.abs(want_h).max()
    return idx


def test_batched_products_equal_the_members():
    obs = _obs(_mixture())
    blocks = obs.likelihood_blocks()
    batched = batch_blocks(blocks)
    assert [type(b) for b in batched] == [BatchedScaledIdentityBlock, BatchedExpKernelBlock]
    rng = np.random.default_rng(1)
    seen = []
    for b in batched:
        seen += _members_check(b, blocks, rng)
    assert sorted(seen) == list(range(len(blocks)))
    assert batched[1].hessian_diagonal is not None  # every member small: the finish is offered as before


def test_scaled_identity_batch_with_unobserved_outputs_and_support_blocks():
    rng = np.random.default_rng(2)
    # k-RR with few users: some outputs never seen (the gather path, not the M x k matrix path)
    obs = _obs([KRR(K, 3.0), KRR(K, 1.0), KRR(K, 2.0)], n=15, seed=2)
    blocks = obs.likelihood_blocks()
    assert any(b.counts.size < K for b in blocks)
    (batched,) = batch_blocks(blocks)
    assert not batched._matrix
    _members_check(batched, blocks, rng)
    # unary encodings, local hashing: support blocks stacked
    obs = _obs([parse("oue(k=24,eps=1.0)"), parse("oue(k=24,eps=2.0)"), parse("olh(k=24,eps=1.5)")], n=400)
    blocks = obs.likelihood_blocks()
    (batched,) = batch_blocks(blocks)
    assert isinstance(batched, BatchedSupportBlock)
    _members_check(batched, blocks, rng)
    assert batched.log_offset == pytest.approx(sum(b.log_offset for b in blocks))


def test_numpy_recurrences_equal_the_compiled_ones(monkeypatch):
    obs = _obs([Geometric(K, 0.3, 0, K - 1), Geometric(K, 1.1), Geometric(K, 7.0, 0, K - 1)], n=500)
    (batched,) = batch_blocks(obs.likelihood_blocks())
    rng = np.random.default_rng(3)
    theta, w = rng.dirichlet(np.ones(K)), rng.random(batched.counts.size)
    f1, b1, h1 = batched.forward(theta), batched.backward(w), batched.hessian_diagonal(w)
    monkeypatch.setenv("LOCALPRIV_NUMBA", "0")
    f0, b0, h0 = batched.forward(theta), batched.backward(w), batched.hessian_diagonal(w)
    for x, y in ((f1, f0), (b1, b0), (h1, h0)):
        assert np.abs(x - y).max() <= 1e-12 * np.abs(y).max()


def test_gibu_batched_equals_per_block_evaluation():
    obs = _obs(_mixture(), seed=4)
    blocks = obs.likelihood_blocks()
    k = obs.k
    start = np.full(k, 1.0 / k)
    # the same EM iterates: 150 plain steps (no stopping decision involved)
    got = em(blocks, k, accelerate="none", stop="max_abs", delta=1e-300, max_iter=150)
    want = EM._em(list(blocks), k, start.copy(), 1e-300, 150, None, False, "none", "max_abs", None)
    assert got.iterations == want.iterations == 150
    assert np.abs(got.theta - want.theta).max() <= 1e-12 * want.theta.max()
    assert got.loglik == pytest.approx(want.loglik, rel=1e-12)
    # the default, certified run: the same maximum
    got = em(blocks, k)
    want = EM._em(list(blocks), k, start.copy(), 1e-9, 100_000, None, False, "newton", "gap", None)
    assert got.converged and want.converged and got.scheme == want.scheme
    assert np.abs(got.theta - want.theta).max() <= 1e-9 * want.theta.max()
    assert got.loglik >= want.loglik - 1e-9 * obs.n


def test_merge_keeps_batchable_blocks_structured_and_gibu_agrees():
    mechs = [KRR(K, 1.0), KRR(K, 2.0), Geometric(K, 0.3, 0, K - 1), parse("exponential(k=24,eps=0.5)"),
             parse("exponential(k=24,eps=0.3)")]
    obs = _obs(mechs, seed=5)
    assert [type(b).__name__ for b in merge_blocks(obs.blocks)] == ["DenseBlock"]  # the default: one chunk
    merged = merge_blocks(obs.blocks, keep_batchable=True)  # what gibu uses
    names = [type(b).__name__ for b in merged]
    assert names == ["ScaledIdentityBlock", "ScaledIdentityBlock", "ExpKernelBlock", "DenseBlock"]
    a = gibu(obs)
    b = gibu(obs, merge=False)
    assert a.converged and b.converged
    assert np.abs(a.distribution - b.distribution).max() <= 1e-9


def test_lone_and_empty_blocks_pass_through():
    obs = _obs([KRR(K, 1.0), Geometric(K, 0.5, 0, K - 1)])
    blocks = obs.likelihood_blocks()
    assert batch_blocks(blocks) == blocks
