"""Hierarchical intervals for range queries: consistency, decomposition, unbiasedness, coverage."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv.multiattr.ranges import consistent_tree, grid_granularity, grid_ranges, hierarchical_ranges
from localpriv.utils.errors import LocalPrivError


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return np.random.default_rng(0).binomial(99, 0.4, size=60_000)


@pytest.mark.parametrize("b", [2, 4, 5])
def test_nodes_are_consistent(data: np.ndarray, b: int) -> None:
    est = hierarchical_ranges(data, 100, 1.0, np.random.default_rng(1), b)
    assert est.nodes[0].sum() == pytest.approx(1.0)
    for lvl in range(est.height - 1):
        assert np.allclose(est.nodes[lvl], est.nodes[lvl + 1].reshape(-1, b).sum(axis=1))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 99), st.integers(0, 99), st.sampled_from([2, 3, 4, 8]))
def test_decomposition_is_a_minimal_exact_cover(a: int, c: int, b: int) -> None:
    lo, hi = min(a, c), max(a, c)
    est = hierarchical_ranges(np.arange(100), 100, 1.0, np.random.default_rng(0), b)
    covered: list[int] = []
    for lvl, i in est.decompose(lo, hi):
        w = b ** (est.height - lvl)
        covered.extend(range(i * w, (i + 1) * w))
    assert sorted(covered) == list(range(lo, hi + 1))
    assert len(est.decompose(lo, hi)) <= 2 * (b - 1) * est.height


def test_consistency_is_least_squares_on_a_small_tree() -> None:
    # b = 2, two levels: the consistent estimate is the projection of the raw nodes onto the
    # consistent ones (equal weights), with the root fixed at 1
    rng = np.random.default_rng(3)
    raw = [rng.normal(0.5, 0.1, 2), rng.normal(0.25, 0.1, 4)]
    got = consistent_tree(raw, 2)
    A = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])
    y = np.concatenate(raw)
    # minimise |A l - y|^2 subject to sum(l) = 1 (KKT system)
    K = np.block([[A.T @ A, np.ones((4, 1))], [np.ones((1, 4)), np.zeros((1, 1))]])
    leaves = np.linalg.solve(K, np.concatenate([A.T @ y, [1.0]]))[:4]
    assert np.allclose(got[1], leaves)


def test_range_intervals_cover_at_about_their_level(data: np.ndarray) -> None:
    truth = ((data >= 30) & (data <= 45)).mean()
    hits, runs = 0, 60
    for seed in range(runs):
        iv = hierarchical_ranges(data, 100, 1.0, np.random.default_rng(seed), 4).range(30, 45)
        hits += iv.lower <= truth <= iv.upper
    # conservative 95% intervals: coverage >= 0.95 expected; allow 3 binomial sd below
    assert hits / runs >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / runs)


def test_refusals(data: np.ndarray) -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(LocalPrivError, match="0..99"):
        hierarchical_ranges(np.array([100]), 100, 1.0, rng)
    with pytest.raises(LocalPrivError, match="branching"):
        hierarchical_ranges(data, 100, 1.0, rng, 1)
    with pytest.raises(LocalPrivError, match="limit"):
        hierarchical_ranges(np.array([0, 1]), 1 << 23, 1.0, rng, 2)
    est = hierarchical_ranges(data, 100, 1.0, rng)
    with pytest.raises(LocalPrivError, match="not within"):
        est.range(5, 100)


def test_grid_is_a_distribution_and_exact_on_whole_cells() -> None:
    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 40, 50_000), rng.integers(0, 30, 50_000)
    est = grid_ranges(x, y, (40, 30), 2.0, rng, side=4)
    assert est.cells.shape == (4, 4) and np.all(est.cells >= 0) and est.cells.sum() == pytest.approx(1.0)
    whole = est.range((0, 0), (39, 29))
    assert whole.value == pytest.approx(1.0)
    # a range made of whole cells has no uniformity bias: the noise interval holds it (loosely)
    iv = est.range((0, 0), (9, 14))
    truth = ((x <= 9) & (y <= 14)).mean()
    assert abs(iv.value - truth) < 3 * (iv.upper - iv.lower)


def test_grid_granularity_grows_with_n_and_eps() -> None:
    assert grid_granularity(10**4, 1.0) <= grid_granularity(10**6, 1.0) <= grid_granularity(10**6, 4.0)
    with pytest.raises(LocalPrivError, match="0..9"):
        grid_ranges(np.array([10]), np.array([0]), (10, 10), 1.0, np.random.default_rng(0))
