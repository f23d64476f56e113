"""Group release of k-way marginals with CALM's consistency step."""
from __future__ import annotations

import numpy as np
import pytest

from localpriv.multiattr.marginals import all_marginals, make_consistent, release_marginals
from localpriv.utils.errors import LocalPrivError

SHAPE = (5, 3, 4, 2)


def _records(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.integers(0, s, 40_000) for s in SHAPE])
    x[:, 1] = np.minimum(x[:, 0] // 2, 2)  # a dependence between attributes 0 and 1
    return x


def _truth(x: np.ndarray, attrs: tuple[int, ...]) -> np.ndarray:
    t = np.zeros(tuple(SHAPE[j] for j in attrs))
    np.add.at(t, tuple(x[:, j] for j in attrs), 1.0)
    return t / len(x)


def test_marginals_agree_on_shared_attributes() -> None:
    x = _records(0)
    m = release_marginals(x, SHAPE, all_marginals(4, 2), 1.0, np.random.default_rng(11))
    for j in range(4):
        views = [m[a].sum(axis=1 - a.index(j)) for a in m if j in a]
        for v in views[1:]:
            assert np.allclose(v, views[0])
    for a in m:
        assert m[a].sum() == pytest.approx(1.0)


def test_consistency_reduces_error_against_raw() -> None:
    x = _records(1)
    sets = all_marginals(4, 2)
    raw = release_marginals(x, SHAPE, sets, 1.0, np.random.default_rng(12), consistent=False)
    var = {a: 1.0 for a in sets}  # equal group sizes: equal variances suffice to compare
    fixed = make_consistent(raw, var)
    err = [sum(float(((ms[a] - _truth(x, a)) ** 2).sum()) for a in sets) for ms in (raw, fixed)]
    assert err[1] < err[0]  # on this seeded data, consistency + non-negativity lower the error


def test_refusals() -> None:
    with pytest.raises(LocalPrivError, match="outside"):
        all_marginals(3, 4)
    with pytest.raises(LocalPrivError, match="domain"):
        release_marginals(np.array([[5, 0, 0, 0]]), SHAPE, [(0, 1)], 1.0, np.random.default_rng(0))
