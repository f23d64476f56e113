"""Planar grid helpers (edge handling, Manhattan cells) and the exact grid EMD."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linprog

from localpriv.data.datasets import manhattan_cells
from localpriv.domains.grid import GridDomain, emd_grid, manhattan_grid
from localpriv.inference.metrics import emd_line
from localpriv.utils.validation import LocalPrivError

GRID = GridDomain(40.0, -74.0, 2, 2, 1.0)


def test_emd_hand_computed():
    # cells: 0 (0.5, 0.5), 1 (1.5, 0.5), 2 (0.5, 1.5), 3 (1.5, 1.5) km
    assert emd_grid([1, 0, 0, 0], [0, 0, 0, 1], GRID) == pytest.approx(np.sqrt(2))
    assert emd_grid([0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5], GRID) == pytest.approx(1.0)
    # half the mass moves one cell east, a quarter moves diagonally
    assert emd_grid([0.75, 0, 0, 0.25], [0.25, 0.5, 0, 0.25], GRID) == pytest.approx(0.5)
    assert emd_grid([0.2, 0.3, 0.1, 0.4], [0.2, 0.3, 0.1, 0.4], GRID) == pytest.approx(0.0, abs=1e-12)
    # unnormalized inputs are normalized
    assert emd_grid([2, 0, 0, 0], [0, 0, 0, 5], GRID) == pytest.approx(np.sqrt(2))


def lp_emd(p, q, D):
    k = p.size
    A_eq = np.vstack([np.kron(np.eye(k), np.ones(k)), np.kron(np.ones(k), np.eye(k))])
    res = linprog(D.ravel(), A_eq=A_eq, b_eq=np.r_[p, q], bounds=(0, None), method="highs")
    assert res.status == 0
    return res.fun


@given(st.integers(1, 3), st.integers(1, 3), st.integers(0, 10_000))
def test_emd_matches_linear_program(nrows, ncols, seed):
    grid = GridDomain(40.0, -74.0, nrows, ncols, 0.7)
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(grid.size))
    q = rng.dirichlet(np.ones(grid.size))
    assert emd_grid(p, q, grid) == pytest.approx(lp_emd(p, q, grid.distance_matrix()), abs=1e-9)


def test_emd_on_one_row_is_the_line_emd():
    grid = GridDomain(40.0, -74.0, 1, 7, 1.0)
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(7)), rng.dirichlet(np.ones(7))
    assert emd_grid(p, q, grid) == pytest.approx(emd_line(p, q), abs=1e-9)


def test_emd_errors():
    with pytest.raises(LocalPrivError):
        emd_grid([1, 0], [0, 1], GRID)
    with pytest.raises(LocalPrivError):
        emd_grid([1, -1, 1, 0], [0, 0, 0, 1], GRID)


def test_locate_edges():
    g = GridDomain(40.0, -74.0, 2, 2, 1.0)
    lat_top = 40.0 + 2.0 / 110.574  # exactly the north edge
    with pytest.raises(LocalPrivError):
        g.locate([lat_top], [-73.9999])
    assert g.locate([lat_top], [-73.9999], outside="drop")[0] == -1
    # the top edge belongs to the last row within a tolerance, and "nearest" clamps anything
    assert g.locate([lat_top], [-73.9999], tolerance_km=0.01)[0] == 2
    assert g.locate([41.0], [-73.9999], outside="drop", tolerance_km=0.01)[0] == -1
    assert g.locate([41.0], [-73.9999], outside="nearest")[0] == 2
    with pytest.raises(LocalPrivError):
        g.locate([40.0], [-74.0], outside="clip")


def test_manhattan_cells():
    grid, cells = manhattan_cells()
    assert (grid.nrows, grid.ncols, grid.cell_km) == (20, 14, 0.5)
    assert grid == manhattan_grid()
    assert cells.size == 98_061 and cells.min() >= 0 and cells.max() < 280
    # only the 2 check-ins in the last 8 m east of the grid needed the tolerance
    from localpriv.data.datasets import gowalla_manhattan

    df = gowalla_manhattan()
    strict = grid.locate(df["lat"].to_numpy(), df["lon"].to_numpy(), outside="drop")
    assert int((strict < 0).sum()) == 2
    assert np.all(cells[strict >= 0] == strict[strict >= 0])
    assert np.all(cells[strict < 0] % grid.ncols == grid.ncols - 1)
