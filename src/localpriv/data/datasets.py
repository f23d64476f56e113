"""Real data bundled with the package (small derived files; provenance in docs/DATA.md).

* :func:`adult_ages` -- the age column of the UCI Adult census extract (``adult.data`` +
  ``adult.test``: 48,842 persons, ages 17..90). Becker & Kohavi (1996), UCI Machine Learning
  Repository, CC BY 4.0.
* :func:`adult_education` -- the education column (column 4, with its rank ``education-num``,
  column 5) of the same 48,842 persons, as counts of its 16 levels (``adult_education.csv``).
* :func:`gowalla_nyc_grid` -- the 138,957 Gowalla check-ins of the New York subset (SNAP
  ``loc-gowalla_totalCheckins``, Cho, Myers, Leskovec, KDD 2011) counted on a grid over the whole
  city (``gowalla_nyc_grid.csv``: 0.5-km cells, only the non-empty ones).

The two count files were derived from the shared reference copies by
``reproductions.accuracy.derive_shipped_data`` of a source checkout (nothing dropped, no rounding).
"""
from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from localpriv.domains.grid import MANHATTAN_BOX, GridDomain, manhattan_grid
from localpriv.utils.validation import LocalPrivError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["adult_ages", "adult_education", "data_path", "gowalla_manhattan", "gowalla_nyc_grid",
           "manhattan_cells", "MANHATTAN_BOX", "NYC_BOX", "NYC_GRID"]


def data_path(name: str) -> Traversable:
    """Path of a bundled data file."""
    return resources.files("localpriv") / "data" / "bundled" / name


def adult_ages() -> np.ndarray:
    """Ages of the 48,842 persons of UCI Adult (train + test), as int64."""
    with data_path("adult_age.csv").open() as fh:
        return np.loadtxt(fh, skiprows=1, dtype=np.int64)


#: The Manhattan bounding box of seed 001 section 7.2 (latitude, longitude).


def gowalla_manhattan() -> pd.DataFrame:
    """Gowalla check-ins inside the Manhattan box: a DataFrame with columns user, lat, lon.

    98,061 check-ins from SNAP ``loc-gowalla_totalCheckins`` (Cho, Myers, Leskovec, KDD 2011),
    New York subset, filtered to lat 40.7044..40.7942, lon -74.0205..-73.9374.
    """
    import pandas as pd

    with data_path("gowalla_manhattan.csv.gz").open("rb") as fh:
        return pd.read_csv(fh, compression="gzip")


def adult_education() -> tuple[list[str], np.ndarray]:
    """The education levels of UCI Adult (train + test) and their counts, in the order of
    ``education-num`` (Preschool, 1st-4th, ..., Doctorate): 16 labels, counts summing to 48,842."""
    import csv

    with data_path("adult_education.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    rows.sort(key=lambda r: int(r["education_num"]))
    return [r["education"] for r in rows], np.array([int(r["count"]) for r in rows], dtype=np.int64)


#: The bounding box of New York City's five boroughs (latitude, longitude); every check-in of the
#: SNAP New York subset lies inside it.
NYC_BOX = {"lat_min": 40.4774, "lat_max": 40.9176, "lon_min": -74.2591, "lon_max": -73.7004}


class _GridSpec(TypedDict):
    """The arguments of a :class:`GridDomain`, by name."""

    lat0: float
    lon0: float
    nrows: int
    ncols: int
    cell_km: float


#: The grid of ``gowalla_nyc_grid.csv``: south-west corner at the box's, 100 rows x 96 columns of
#: 0.5-km cells (50 km x 48 km, covering the 48.7 km x 47.1 km box).
NYC_GRID: _GridSpec = {"lat0": 40.4774, "lon0": -74.2591, "nrows": 100, "ncols": 96, "cell_km": 0.5}


def gowalla_nyc_grid(cell_km: float = 2.0) -> tuple[GridDomain, np.ndarray]:
    """``(grid, counts)``: the 138,957 Gowalla check-ins of New York on a whole-city grid.

    ``cell_km`` is 0.5 (the shipped 100 x 96 grid), 1 (50 x 48) or 2 (25 x 24, the default);
    coarser cells are unions of 0.5-km cells (the grids share their corner and extent, so a cell
    of the coarse grid holds exactly the check-ins it would locate directly).
    """
    import csv


    factor = {0.5: 1, 1.0: 2, 2.0: 4}.get(float(cell_km))
    if factor is None:
        raise LocalPrivError(f"gowalla_nyc_grid: cell_km must be 0.5, 1 or 2, got {cell_km!r}")
    g = NYC_GRID
    fine = np.zeros((g["nrows"], g["ncols"]), dtype=np.int64)
    with data_path("gowalla_nyc_grid.csv").open() as fh:
        for r in csv.DictReader(fh):
            fine[int(r["row"]), int(r["col"])] = int(r["count"])
    nr, nc = g["nrows"] // factor, g["ncols"] // factor
    counts = fine.reshape(nr, factor, nc, factor).sum(axis=(1, 3)).ravel()
    return GridDomain(g["lat0"], g["lon0"], nr, nc, float(cell_km)), counts


def manhattan_cells(cell_km: float = 0.5) -> tuple[GridDomain, np.ndarray]:
    """The grid and the cell index of each of the 98,061 Gowalla check-ins in the Manhattan box.

    The box is 7.008 km wide and the grid's 14 whole columns cover 7.000 km, so 2 check-ins lie
    within 8 m east of the last column: they are assigned to it (``tolerance_km=0.05``) rather
    than dropped, keeping every check-in of the box.
    """
    grid = manhattan_grid(cell_km)
    df = gowalla_manhattan()
    cells = grid.locate(df["lat"].to_numpy(), df["lon"].to_numpy(), outside="error", tolerance_km=0.05)
    return grid, cells
