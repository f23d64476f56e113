"""ProductDomain: flat cells, marginals, bounds."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv.domains import CategoricalDomain, IntegerDomain, ProductDomain
from localpriv.utils.validation import LocalPrivError


def _dom() -> ProductDomain:
    return ProductDomain([IntegerDomain(18, 20), CategoricalDomain(["a", "b"]), IntegerDomain(0, 3)],
                         ["age", "edu", "hours"])


def test_shape_size_and_row_major_cells() -> None:
    dom = _dom()
    assert dom.shape == (3, 2, 4) and dom.size == 24 and dom.d == 3
    cells = dom.index(np.array([[18, "a", 0], [20, "b", 3], [19, "a", 1]], dtype=object))
    assert cells.tolist() == [0, 23, 9]
    assert dom.unravel(cells).tolist() == [[0, 0, 0], [2, 1, 3], [1, 0, 1]]
    assert dom.decode(cells)[1].tolist() == [20, "b", 3]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 23), min_size=1, max_size=50))
def test_ravel_unravel_roundtrip(flat: list[int]) -> None:
    dom = _dom()
    arr = np.asarray(flat)
    assert np.array_equal(dom.ravel(dom.unravel(arr)), arr)


def test_marginal_domain_and_vector() -> None:
    dom = _dom()
    p = np.random.default_rng(0).dirichlet(np.ones(dom.size))
    t = p.reshape(dom.shape)
    assert dom.marginal(["hours", "age"]).shape == (4, 3)
    assert np.allclose(dom.marginalize(p, ["hours", "age"]), t.sum(axis=1).T.reshape(-1))
    assert np.allclose(dom.marginalize(p, "edu"), t.sum(axis=(0, 2)))
    assert np.allclose(dom.marginalize(np.stack([p, p]), [0, 2])[1], t.sum(axis=1).reshape(-1))


def test_refusals_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALPRIV_MAX_PRODUCT_CELLS", "10")
    with pytest.raises(LocalPrivError, match="above the limit of 10") as exc:
        _dom()
    assert "\n" not in str(exc.value)
    monkeypatch.delenv("LOCALPRIV_MAX_PRODUCT_CELLS")
    dom = _dom()
    with pytest.raises(LocalPrivError, match="attribute 'age'"):
        dom.index(np.array([[17, "a", 0]], dtype=object))
    with pytest.raises(LocalPrivError, match="no attribute"):
        dom.marginal(["nope"])
    with pytest.raises(LocalPrivError, match="distinct"):
        ProductDomain([IntegerDomain(0, 1), IntegerDomain(0, 1)], ["x", "x"])


def test_parse_domain_round_trips_a_product() -> None:
    from localpriv.domains import parse_domain

    dom = parse_domain("product(age=18..20; edu=a,b ;hours=0..3)")
    assert isinstance(dom, ProductDomain) and dom.names == ("age", "edu", "hours") and dom.shape == (3, 2, 4)
    assert parse_domain(dom.spec()) == dom
    with pytest.raises(LocalPrivError, match="NAME=DOMAIN"):
        parse_domain("product(18..20)")
