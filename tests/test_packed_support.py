"""Packed-bit support matrices (mechanisms/_packed.py): the pure protocols' likelihood products
from 1 bit per entry agree with the sparse and dense forms, compiled or not."""
import os

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import localpriv.mechanisms.unary as U
from localpriv import estimate
from localpriv.data.observations import ObservationBlock, Observations
from localpriv.estimators.combination import BatchedSupportBlock
from localpriv.inference.uncertainty import fisher_information
from localpriv.likelihood.packed import PackedSupport, row_popcounts
from localpriv.mechanisms import parse


def _dense_case(rng, m, k, density):
    Z = rng.random((m, k)) < density
    return Z, PackedSupport(np.packbits(Z, axis=1), k)


@pytest.mark.parametrize("compiled", ["1", "0"])
@settings(max_examples=25, deadline=None)
@given(m=st.integers(0, 60), k=st.integers(1, 30), density=st.floats(0.0, 1.0), seed=st.integers(0, 2**32 - 1))
def test_products_match_dense(compiled, m, k, density, seed):
    old = os.environ.get("LOCALPRIV_NUMBA")
    os.environ["LOCALPRIV_NUMBA"] = compiled
    try:
        _check_products(m, k, density, seed)
    finally:
        if old is None:
            os.environ.pop("LOCALPRIV_NUMBA")
        else:
            os.environ["LOCALPRIV_NUMBA"] = old


def _check_products(m, k, density, seed):
    rng = np.random.default_rng(seed)
    Z, P = _dense_case(rng, m, k, density)
    theta, w = rng.random(k), rng.random(m)
    Zf = Z.astype(float)
    assert P.shape == (m, k) and P.nnz == int(Z.sum())
    np.testing.assert_allclose(P @ theta, Zf @ theta, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(P.T @ w, Zf.T @ w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(P.gram(w), (Zf * w[:, None]).T @ Zf, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(P.toarray(), Zf)
    csr = P.tocsr()
    assert sp.isspmatrix_csr(csr) and csr.shape == (m, k) and csr.nnz == int(Z.sum())
    np.testing.assert_array_equal(csr.toarray(), Zf)
    np.testing.assert_array_equal(P.row_sums(), Z.sum(axis=1))


def test_padding_bits_never_count():
    rng = np.random.default_rng(3)
    Z, _ = _dense_case(rng, 50, 13, 0.5)
    raw = np.packbits(Z, axis=1)
    raw[:, -1] |= np.uint8(0b00000111)  # the 3 padding bits of a 13-bit row, all set
    P = PackedSupport(raw, 13)
    theta, w = rng.random(13), rng.random(50)
    np.testing.assert_allclose(P @ theta, Z @ theta, rtol=1e-12)
    np.testing.assert_allclose(P.T @ w, Z.T.astype(float) @ w, rtol=1e-12)
    assert P.nnz == Z.sum()
    assert np.all(U.bit_counts(raw, 13) == Z.sum(axis=1))
    assert np.all(row_popcounts(raw, 13) == Z.sum(axis=1))  # the raw rows, padding still set
    np.testing.assert_array_equal(P.tocsr().toarray(), Z)


def test_bad_width_refused():
    with pytest.raises(ValueError, match="2 bytes per row"):
        PackedSupport(np.zeros((3, 3), dtype=np.uint8), 13)


@pytest.mark.parametrize("spec", ["oue(k=21,eps=1.0)", "sue(k=16,eps=0.7)", "ss(k=19,eps=1.5)", "olh(k=23,eps=1.0)",
                                  "the(k=17,eps=1.0)", "blh(k=20,eps=1.0)"])
def test_block_packed_equals_unpacked(monkeypatch, spec):
    """Above the dense cap the block holds packed bits; forward, backward, the Hessian diagonal,
    the Gram matrix and the log-likelihood equal those of the dense block on the same reports."""
    mech = parse(spec)
    rng = np.random.default_rng(7)
    z = mech.sample(rng.integers(0, mech.k, 3000), rng)
    c = rng.integers(1, 4, z.shape[0]).astype(float)
    dense = mech.likelihood_block(z, c)
    assert not isinstance(dense.Z, PackedSupport)
    monkeypatch.setattr(U, "DENSE_Z_ENTRIES", 0)
    monkeypatch.setattr(U, "PACKED_MIN_DENSITY", 0.0)
    packed = mech.likelihood_block(z, c)
    assert isinstance(packed.Z, PackedSupport)
    theta = rng.dirichlet(np.ones(mech.k))
    w = rng.random(z.shape[0])
    np.testing.assert_allclose(packed.forward(theta), dense.forward(theta), rtol=1e-12)
    np.testing.assert_allclose(packed.backward(w), dense.backward(w), rtol=1e-12)
    np.testing.assert_allclose(packed.hessian_diagonal(w), dense.hessian_diagonal(w), rtol=1e-12)
    np.testing.assert_allclose(packed.gram(w), dense.gram(w), rtol=1e-12)
    np.testing.assert_allclose(packed.dense(), dense.dense(), rtol=1e-12)


def test_sparse_below_density(monkeypatch):
    """A sparse support (few set entries) stays a sparse matrix above the dense cap."""
    mech = parse("oue(k=40,eps=6.0)")  # q ~ 0.0025: ~0.1 set bits per report besides the true one
    rng = np.random.default_rng(2)
    z = mech.sample(rng.integers(0, 40, 2000), rng)
    monkeypatch.setattr(U, "DENSE_Z_ENTRIES", 0)
    block = mech.likelihood_block(z, np.ones(z.shape[0]))
    assert sp.issparse(block.Z)
    monkeypatch.undo()
    below = mech.likelihood_block(z, np.ones(z.shape[0]))  # under the cap: built from the support directly
    np.testing.assert_array_equal(block.Z.toarray(), below.Z.toarray() if sp.issparse(below.Z) else below.Z)


def test_olh_support_and_packed_support_agree():
    """Local hashing builds its sparse and its packed support from the same chunks of hashes."""
    mech = parse("olh(k=37,eps=1.0)")
    rng = np.random.default_rng(5)
    z = mech.sample(rng.integers(0, 37, 500), rng)
    S = mech.support(z)
    np.testing.assert_array_equal(np.unpackbits(mech.packed_support(z), axis=1, count=37), S.toarray())
    np.testing.assert_array_equal(mech.support_counts(z), np.asarray(S.sum(axis=0)).ravel())
    assert mech.packed_support(z[:0]).shape == (0, 5) and mech.support(z[:0]).shape == (0, 37)


def test_batched_block_mixes_packed_sparse_and_dense(monkeypatch):
    """A batch of members whose supports are packed, sparse and dense is stacked as one sparse
    matrix; its products equal the members' own."""
    rng = np.random.default_rng(9)
    k = 30
    members = []
    for spec, cap, dens in (("oue(k=30,eps=1.0)", 0, 0.0), ("oue(k=30,eps=7.0)", 0, 0.5),
                            ("ss(k=30,eps=1.0)", None, None)):
        mech = parse(spec)
        z = mech.sample(rng.integers(0, k, 800), rng)
        with monkeypatch.context() as mp:
            if cap is not None:
                mp.setattr(U, "DENSE_Z_ENTRIES", cap)
                mp.setattr(U, "PACKED_MIN_DENSITY", dens)
            members.append(mech.likelihood_block(z, rng.integers(1, 3, z.shape[0]).astype(float)))
    assert isinstance(members[0].Z, PackedSupport) and sp.issparse(members[1].Z)
    assert isinstance(members[2].Z, np.ndarray)
    batch = BatchedSupportBlock(members)
    assert sp.issparse(batch.Z)
    theta = rng.dirichlet(np.ones(k))
    w = rng.random(batch.counts.size)
    np.testing.assert_allclose(batch.forward(theta), np.concatenate([b.forward(theta) for b in members]), rtol=1e-12)
    cuts = np.cumsum([b.counts.size for b in members])[:-1]
    np.testing.assert_allclose(batch.backward(w), sum(b.backward(x) for b, x in zip(members, np.split(w, cuts))),
                               rtol=1e-12)


def test_estimates_and_intervals_unchanged(monkeypatch):
    """The MLE and its Fisher interval computed on the packed block equal the dense block's (to
    the engine's tolerance), for one mechanism and for a mixture (stacked packed members)."""
    rng = np.random.default_rng(11)
    theta = rng.dirichlet(np.ones(24) * 2)
    blocks = []
    for spec in ("oue(k=24,eps=1.0)", "ss(k=24,eps=1.0)"):
        mech = parse(spec)
        z = mech.sample(rng.choice(24, 4000, p=theta), rng)
        blocks.append(ObservationBlock(mech, z, np.ones(z.shape[0])))
    for obs in (Observations(blocks[:1]), Observations(blocks)):
        a = estimate(obs, "ibu", accelerate="newton")
        info_a, _, _ = fisher_information(obs.likelihood_blocks(), a.distribution)
        lo_a, hi_a = a.ci(0.95)
        monkeypatch.setattr(U, "DENSE_Z_ENTRIES", 0)
        monkeypatch.setattr(U, "PACKED_MIN_DENSITY", 0.0)
        assert all(isinstance(b.Z, PackedSupport) for b in obs.likelihood_blocks())
        b = estimate(obs, "ibu", accelerate="newton")
        info_b, _, _ = fisher_information(obs.likelihood_blocks(), a.distribution)
        np.testing.assert_allclose(info_b, info_a, rtol=1e-10)
        np.testing.assert_allclose(b.distribution, a.distribution, atol=1e-6)
        lo_b, hi_b = b.ci(0.95)
        np.testing.assert_allclose(lo_b, lo_a, atol=1e-5)
        np.testing.assert_allclose(hi_b, hi_a, atol=1e-5)
        monkeypatch.undo()
