"""Structured likelihood blocks equal the dense products."""
import numpy as np
import pytest
from _roundoff import U, em_rtol
from hypothesis import given
from hypothesis import strategies as st

from localpriv.likelihood.blocks import DenseBlock
from localpriv.likelihood.structured import (
    ClampedConvBlock,
    ExpKernelBlock,
    ScaledIdentityBlock,
    linear_geometric_block,
    planar_geometric_block,
    planar_geometric_kernel,
)
from localpriv.utils.validation import LocalPrivError

RTOL = 1e-12


def _close(a, b):
    scale = max(np.abs(b).max(), 1e-300)
    assert np.abs(a - b).max() <= RTOL * scale, np.abs(a - b).max() / scale


def _check_products(block, G, rng):
    theta = rng.dirichlet(np.ones(G.shape[0]))
    w = rng.random(G.shape[1]) * 10
    _close(block.forward(theta), theta @ G)
    _close(block.backward(w), G @ w)
    _close(block.dense(), G)


def _dense_geometric(k, eps):
    """Seed 001 Eqs. 6-7 written out entry by entry."""
    a = np.exp(-eps)
    x = np.arange(k)[:, None]
    z = np.arange(k)[None, :]
    c = np.where((z == 0) | (z == k - 1), 1 / (1 + a), (1 - a) / (1 + a))
    return c * a ** np.abs(z - x)


def _dense_planar(K, R, C):
    """Brute force: every offset of the (possibly rectangular) kernel, remapped to the nearest
    (clamped) cell."""
    Pr, Pc = K.shape[0] // 2, K.shape[1] // 2
    di, dj = np.meshgrid(np.arange(-Pr, Pr + 1), np.arange(-Pc, Pc + 1), indexing="ij")
    M = np.zeros((R * C, R * C))
    for x in range(R * C):
        r, c = divmod(x, C)
        z = np.clip(r + di, 0, R - 1) * C + np.clip(c + dj, 0, C - 1)
        M[x] = np.bincount(z.ravel(), weights=K.ravel(), minlength=R * C)
    return M


@given(k=st.integers(2, 40), a=st.floats(0.01, 0.9), b=st.floats(0.001, 0.5), seed=st.integers(0, 10**6))
def test_scaled_identity_equals_dense(k, a, b, seed):
    rng = np.random.default_rng(seed)
    outputs = np.sort(rng.choice(k, size=rng.integers(1, k + 1), replace=False))
    counts = rng.integers(1, 100, outputs.size).astype(float)
    G = np.full((k, k), b)
    np.fill_diagonal(G, a)
    _check_products(ScaledIdentityBlock(k, a, b, outputs, counts), G[:, outputs], rng)


@given(k=st.integers(2, 60), eps=st.floats(0.01, 3.0), seed=st.integers(0, 10**6))
def test_linear_geometric_block_equals_seed_formula(k, eps, seed):
    rng = np.random.default_rng(seed)
    outputs = np.sort(rng.choice(k, size=rng.integers(1, k + 1), replace=False))
    G = _dense_geometric(k, eps)
    assert np.allclose(G.sum(axis=1), 1.0)
    block = linear_geometric_block(k, eps, outputs, np.ones(outputs.size))
    _check_products(block, G[:, outputs], rng)


@pytest.mark.parametrize("R,C,eps,cell", [(1, 1, 1.0, 1.0), (1, 7, 0.8, 1.0), (6, 1, 1.5, 0.5),
                                          (4, 5, 0.9, 1.0), (7, 3, 2.5, 0.5), (5, 5, 0.3, 1.0)])
def test_planar_geometric_clamped_conv_equals_brute_force(R, C, eps, cell):
    rng = np.random.default_rng(R * 100 + C)
    K = planar_geometric_kernel(eps, cell)
    G = _dense_planar(K, R, C)
    assert np.allclose(G.sum(axis=1), 1.0, atol=1e-12)
    outputs = np.sort(rng.choice(R * C, size=max(1, R * C // 2), replace=False))
    block = planar_geometric_block((R, C), eps, cell, outputs, np.ones(outputs.size))
    _check_products(block, G[:, outputs], rng)


def test_clamped_conv_any_kernel_and_rectangular_half_widths():
    rng = np.random.default_rng(3)
    K = rng.random((5, 9))
    K /= K.sum()
    R, C = 4, 6
    G = _dense_planar(K, R, C)  # brute force with rectangular offsets
    _check_products(ClampedConvBlock(K, (R, C), np.arange(R * C), np.ones(R * C)), G, rng)


def test_planar_kernel_tail_bound_and_normalization():
    K = planar_geometric_kernel(1.0, 1.0, tol=1e-17)
    P = K.shape[0] // 2
    assert abs(K.sum() - 1) < 1e-14
    assert (1 + P) * np.exp(-P) <= 1e-17  # the documented tail bound holds at the chosen radius
    # neighbouring cells differ by exactly e^{-eps s d}: the seed's kernel
    assert np.isclose(K[P, P + 1] / K[P, P], np.exp(-1.0), rtol=1e-12)
    assert np.isclose(K[P + 1, P + 1] / K[P, P], np.exp(-np.sqrt(2)), rtol=1e-12)


def test_errors_are_clear():
    with pytest.raises(LocalPrivError):
        ScaledIdentityBlock(3, 0.5, 0.25, [0, 5], [1, 1])
    with pytest.raises(LocalPrivError):
        ScaledIdentityBlock(3, 0.5, 0.25, [0, 1], [1])
    with pytest.raises(LocalPrivError):
        ClampedConvBlock(np.ones((2, 3)), (3, 3), [0], [1])
    with pytest.raises(LocalPrivError):
        planar_geometric_kernel(1e-5, 1.0)


def test_dense_block_reference_agrees_with_structured_in_em():
    from localpriv.estimators.em import em

    rng = np.random.default_rng(5)
    k = 30
    G = _dense_geometric(k, 0.4)
    x = rng.integers(0, k, 5000)
    # sample through the dense rows (inverse CDF), aggregate
    cdf = np.cumsum(G, axis=1)
    z = np.minimum((rng.random(x.size)[:, None] >= cdf[x]).sum(axis=1), k - 1)
    counts = np.bincount(z, minlength=k)
    live = np.flatnonzero(counts)
    # the same iteration, compared after a fixed number of updates (never at a stop, which round-off
    # may move; at delta = 1e-10, ~30 ulps of |L| ~ 1.7e4, these runs would not even stop before
    # the cap). The recurrences sum <= k positive terms twice per product (<= (2k + 3) u relative,
    # the dense sums <= k u), so em_rtol with doubled term counts bounds the difference (see _roundoff)
    n_it = 2000
    plain = {"accelerate": "none", "stop": "loglik"}  # pinned: plain EM on both (the library's defaults differ)
    dense = em([DenseBlock(G[:, live], counts[live])], k, delta=1e-300, max_iter=n_it, **plain)
    fast = em([linear_geometric_block(k, 0.4, live, counts[live])], k, delta=1e-300, max_iter=n_it, **plain)
    assert dense.iterations == fast.iterations == n_it and not dense.converged and not fast.converged
    np.testing.assert_allclose(fast.theta, dense.theta, rtol=em_rtol(n_it, 2 * k, 2 * live.size), atol=0)


@pytest.mark.parametrize("k,eps,lo,hi", [(6, 0.7, 0, 5), (8, 0.3, -3, 10), (9, 1.1, 2, 6), (5, 0.5, 0, 1),
                                         (7, 0.9, None, None)])
def test_laplace_unit_bins_block_equals_exact_likelihood(k, eps, lo, hi):
    from localpriv.likelihood.structured import laplace_block_for
    from localpriv.mechanisms.laplace import Laplace

    rng = np.random.default_rng(k)
    mech = Laplace(k, eps, bins=1.0, lo=lo, hi=hi)
    reports = np.unique(mech.sample(rng.integers(0, k, 400), rng))
    block = mech.likelihood_block(reports, np.ones(reports.size))
    assert isinstance(block, ExpKernelBlock)
    G = mech.likelihood(reports)  # the seed's interval probabilities, entry by entry
    _check_products(block, G, rng)
    # other bin widths keep the dense block
    other = Laplace(k, eps, bins=0.5, lo=0, hi=2 * k)
    assert laplace_block_for(other, other.output_index(other.sample(np.arange(k), rng)), np.ones(k)) is None


@given(k=st.integers(1, 80), eps=st.floats(0.05, 40.0), seed=st.integers(0, 10**6),
       kind=st.sampled_from(["geometric", "geometric-trunc", "laplace-bins", "laplace-trunc", "laplace"]))
def test_exp_kernel_blocks_exact_entry_by_entry(k, eps, seed, kind):
    # every entry of G, however small next to the largest (e^{-40 * 80} ~ 1e-1390 underflows;
    # e^{-700} does not), is reproduced to 1e-12 relative by the recurrences: forward(e_x) is row
    # x, backward(e_j) column j. An FFT convolution would get only the entries above ~1e-16 of
    # the largest right.
    from localpriv.mechanisms.geometric import Geometric
    from localpriv.mechanisms.laplace import Laplace

    rng = np.random.default_rng(seed)
    lo, hi = int(rng.integers(-3, 3)), k - 1 + int(rng.integers(-3, 3))
    lo, hi = min(lo, hi - 1), max(hi, lo + 1)
    mech = {"geometric": lambda: Geometric(max(k, 2), eps),
            "geometric-trunc": lambda: Geometric(max(k, 2), eps, lo, hi + 1),
            "laplace-bins": lambda: Laplace(k, eps, bins=1.0),
            "laplace-trunc": lambda: Laplace(k, eps, bins=1.0, lo=lo, hi=hi),
            "laplace": lambda: Laplace(k, eps)}[kind]()
    reports = np.unique(mech.sample(rng.integers(0, mech.k, 60), rng))
    if kind in ("geometric", "laplace-bins"):
        reports = np.unique(np.concatenate([reports, [-5, mech.k + 7]]))
    block = mech.likelihood_block(reports, np.ones(reports.size))
    assert isinstance(block, ExpKernelBlock)
    G = mech.likelihood(reports)
    eye_x, eye_j = np.eye(mech.k), np.eye(reports.size)
    rows = np.array([block.forward(e) for e in eye_x])
    cols = np.column_stack([block.backward(e) for e in eye_j])
    for got in (rows, cols):
        ok = G > 1e-290
        assert np.all(np.abs(got[ok] - G[ok]) <= 1e-12 * G[ok])
        assert np.all(np.abs(got[~ok]) <= 1e-280)


def test_exp_kernel_block_validates():
    with pytest.raises(LocalPrivError):
        ExpKernelBlock(3, 1.0, [0.0, 1.0], 1.0, [1.0])
    with pytest.raises(LocalPrivError):
        ExpKernelBlock(3, 1.0, [0.5], 1.0, [1.0], diag=0.2)  # a diagonal entry at a non-integer
    with pytest.raises(LocalPrivError):
        ExpKernelBlock(3, 1.0, [np.inf], 1.0, [1.0])
    with pytest.raises(LocalPrivError):
        ExpKernelBlock(3, 1.0, [1.0], 1.0, [1.0], exact_columns=([1], np.ones((3, 1))))


@given(k=st.integers(1, 30), eps=st.floats(0.05, 5.0), seed=st.integers(0, 10**6))
def test_laplace_density_block_equals_the_density(k, eps, seed):
    # grid reports anywhere on the line (inside, between, below and above the inputs:
    # the reports are multiples of the grid, <= 2^-5 here), and the two clamped end values
    from localpriv.mechanisms.laplace import Laplace

    rng = np.random.default_rng(seed)
    mech = Laplace(k, eps)
    z = np.concatenate([mech.sample(rng.integers(0, k, 40), rng), [-3.5, 0.0, k - 1.0, k + 2.25]])
    block = mech.likelihood_block(z, np.ones(z.size))
    assert isinstance(block, ExpKernelBlock)
    _check_products(block, mech.likelihood(z), rng)
    ends = np.array([-1.0, 1.0]) * mech.CLAMP * mech.grid
    _check_products(mech.likelihood_block(np.r_[z, ends], np.ones(z.size + 2)),
                    mech.likelihood(np.r_[z, ends]), rng)


def test_laplace_density_block_in_ibu_and_errors():
    from localpriv.estimators.em import em
    from localpriv.likelihood.structured import discrete_laplace_block
    from localpriv.mechanisms.laplace import Laplace

    rng = np.random.default_rng(1)
    mech = Laplace(40, 0.4)
    z = mech.sample(np.minimum(rng.geometric(0.1, 3000) - 1, 39), rng)
    # the same iteration after a fixed number of updates (not at a stop: round-off may move a stop).
    # Products of either block: <= 2 x 40 terms per forward entry, <= 2 z.size per backward one,
    # so the iterates agree to rtol = em_rtol (see _roundoff) and L, a sum of c_j log p_j, to
    # n rtol plus each evaluation's own rounding, <= (m + 1) u |L| + n (2k + 3) u
    n_it = 200
    plain = {"accelerate": "none", "stop": "loglik"}  # pinned: plain EM on both (the library's defaults differ)
    fast = em([mech.likelihood_block(z, np.ones(z.size))], 40, delta=1e-300, max_iter=n_it, **plain)
    slow = em([DenseBlock(mech.likelihood(z), np.ones(z.size))], 40, delta=1e-300, max_iter=n_it, **plain)
    assert fast.iterations == slow.iterations == n_it and not fast.converged and not slow.converged
    rtol = em_rtol(n_it, 2 * 40, 2 * z.size)
    np.testing.assert_allclose(fast.theta, slow.theta, rtol=rtol, atol=0)
    e_L = (z.size + 1) * U * abs(slow.loglik) + z.size * (2 * 40 + 3) * U
    assert abs(fast.loglik - slow.loglik) <= z.size * rtol + 2 * e_L
    with pytest.raises(LocalPrivError):
        discrete_laplace_block(3, 1.0, 0.5, [0.5, np.nan], [1, 1])
    with pytest.raises(LocalPrivError):
        discrete_laplace_block(3, 1.0, 0.5, [0.5], [1, 1])
