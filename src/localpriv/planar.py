"""Planar grid domains (seed 001 section 7.2, seed 003 section 2.3).

A bounding box in latitude/longitude cut into square cells of ``cell_km`` kilometres. The
alphabet is the cells' centres; the metric is the Euclidean distance in km between centres.
Coordinates are projected equirectangularly about the box's mid-latitude (accurate to well under
1% over a city-sized box). Cell ``i`` is at row ``i // ncols`` (south to north) and column
``i % ncols`` (west to east).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import LocalPrivError
from .domains import Domain

__all__ = ["GridDomain", "KM_PER_DEG_LAT", "emd_grid", "manhattan_grid", "manhattan_cells"]

KM_PER_DEG_LAT = 110.574
KM_PER_DEG_LON_EQUATOR = 111.320


@dataclass(frozen=True, eq=True)
class GridDomain(Domain):
    """``nrows x ncols`` square cells of side ``cell_km`` with south-west corner at (lat0, lon0)."""

    lat0: float
    lon0: float
    nrows: int
    ncols: int
    cell_km: float

    def __post_init__(self):
        vals = (self.lat0, self.lon0, self.cell_km)
        if not all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                   and np.isfinite(v) for v in vals):
            raise LocalPrivError(f"grid: lat0, lon0 and cell_km must be finite numbers, got {vals}")
        if not (-90.0 <= self.lat0 <= 90.0 and -180.0 <= self.lon0 <= 360.0):
            raise LocalPrivError(f"grid: lat0={self.lat0}, lon0={self.lon0} is not a position on Earth")
        for name in ("nrows", "ncols"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise LocalPrivError(f"grid: {name} must be a whole number >= 1, got {v!r}")
        if self.cell_km <= 0:
            raise LocalPrivError(f"grid: cell_km must be > 0, got {self.cell_km}")

    @classmethod
    def from_box(cls, lat_min, lat_max, lon_min, lon_max, cell_km) -> "GridDomain":
        """Cover the box with as many whole cells as fit (rounded to the nearest count)."""
        if not (lat_max > lat_min and lon_max > lon_min and cell_km > 0):
            raise LocalPrivError("grid: need lat_min < lat_max, lon_min < lon_max and cell_km > 0")
        mid = 0.5 * (lat_min + lat_max)
        h = (lat_max - lat_min) * KM_PER_DEG_LAT
        w = (lon_max - lon_min) * KM_PER_DEG_LON_EQUATOR * np.cos(np.radians(mid))
        nrows = max(1, int(round(h / cell_km)))
        ncols = max(1, int(round(w / cell_km)))
        return cls(float(lat_min), float(lon_min), nrows, ncols, float(cell_km))

    @property
    def size(self) -> int:
        return self.nrows * self.ncols

    @property
    def is_metric(self) -> bool:
        return True

    @property
    def _km_per_deg_lon(self) -> float:
        mid = self.lat0 + 0.5 * self.nrows * self.cell_km / KM_PER_DEG_LAT
        return KM_PER_DEG_LON_EQUATOR * np.cos(np.radians(mid))

    def to_km(self, lat, lon) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) in km east and north of the south-west corner."""
        x = (np.asarray(lon, dtype=float) - self.lon0) * self._km_per_deg_lon
        y = (np.asarray(lat, dtype=float) - self.lat0) * KM_PER_DEG_LAT
        return x, y

    def centres_km(self) -> np.ndarray:
        """``size x 2`` array of the cells' centres (x, y) in km."""
        r, c = np.divmod(np.arange(self.size), self.ncols)
        return np.column_stack([(c + 0.5) * self.cell_km, (r + 0.5) * self.cell_km])

    def locate(self, lat, lon, outside: str = "error", tolerance_km: float = 0.0) -> np.ndarray:
        """Cell index of each point.

        Points outside the grid raise (``outside="error"``), get -1 (``outside="drop"``: the
        caller removes them and can count them), or go to the nearest cell (``outside="nearest"``).
        ``tolerance_km`` > 0 first assigns points lying at most that far outside the grid to the
        nearest edge cell (whole cells of ``from_box`` may stop a few metres short of the box:
        the 14 columns of 0.5 km of the Manhattan grid cover 7.000 km of a 7.008-km-wide box).
        """
        if outside not in ("error", "drop", "nearest"):
            raise LocalPrivError(f"grid: outside must be 'error', 'drop' or 'nearest', got {outside!r}")
        x, y = self.to_km(lat, lon)
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
            raise LocalPrivError("grid: some coordinates are NaN or infinite")
        w, h = self.ncols * self.cell_km, self.nrows * self.cell_km
        if outside == "nearest":
            tolerance_km = np.inf
        if tolerance_km > 0:
            near_x = (x >= -tolerance_km) & (x <= w + tolerance_km)
            near_y = (y >= -tolerance_km) & (y <= h + tolerance_km)
            x = np.where(near_x, np.clip(x, 0.0, np.nextafter(w, 0.0)), x)
            y = np.where(near_y, np.clip(y, 0.0, np.nextafter(h, 0.0)), y)
        col = np.floor(x / self.cell_km).astype(np.int64)
        row = np.floor(y / self.cell_km).astype(np.int64)
        bad = (col < 0) | (col >= self.ncols) | (row < 0) | (row >= self.nrows)
        if bad.any() and outside == "error":
            raise LocalPrivError(f"grid: {int(bad.sum())} point(s) lie outside the grid "
                                 f"(use outside='drop' to drop and count them)")
        idx = row * self.ncols + col
        idx[bad] = -1
        return idx

    is_numeric = True
    columns = 2

    def invalid(self, values) -> np.ndarray:
        arr = np.asarray(values, dtype=float)
        bad = ~np.isfinite(arr).all(axis=1)
        ok = np.flatnonzero(~bad)
        bad[ok] = self.locate(arr[ok, 0], arr[ok, 1], outside="drop") < 0
        return bad

    def encode(self, values) -> np.ndarray:
        """``values``: an ``n x 2`` array of (lat, lon); points outside the grid are an error."""
        arr = np.asarray(values, dtype=float)
        if arr.size == 0:
            raise LocalPrivError("no values given: the input is empty")
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise LocalPrivError("grid values must be an n x 2 array of (lat, lon)")
        return self.locate(arr[:, 0], arr[:, 1], outside="error")

    def decode(self, index) -> np.ndarray:
        return np.asarray(index, dtype=np.int64)

    def distance_matrix(self) -> np.ndarray:
        c = self.centres_km()
        return np.sqrt(((c[:, None, :] - c[None, :, :]) ** 2).sum(-1))

    def spec(self) -> str:
        return f"grid(lat0={self.lat0},lon0={self.lon0},nrows={self.nrows},ncols={self.ncols},cell_km={self.cell_km})"


def emd_grid(p, q, domain: "GridDomain | np.ndarray") -> float:
    """Earth mover's distance (km) between two distributions on the cells of a grid.

    ``EMD(p, q) = min_{T >= 0, T 1 = p, T^T 1 = q} sum_{x,y} T[x, y] d(x, y)`` with ``d`` the
    Euclidean distance in km between cell centres (seed 001 section 7.2, footnote 4; seed 003
    section 8, footnote 2). Solved exactly as a transport linear program by POT's network simplex
    (``ot.emd2``). ``p`` and ``q`` are normalized to sum 1; ``domain`` may also be the ``k x k``
    ground-distance matrix itself.
    """
    import ot

    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    D = domain.distance_matrix() if isinstance(domain, GridDomain) else np.asarray(domain, dtype=float)
    k = D.shape[0]
    if p.shape != (k,) or q.shape != (k,):
        raise LocalPrivError(f"emd_grid: distributions must have {k} entries, got {p.shape} and {q.shape}")
    if np.any(p < 0) or np.any(q < 0) or p.sum() <= 0 or q.sum() <= 0:
        raise LocalPrivError("emd_grid: distributions must be non-negative with positive mass")
    p = p / p.sum()
    q = q / q.sum()
    return float(ot.emd2(p, q, D, numItermax=10_000_000))


def manhattan_grid(cell_km: float = 0.5) -> GridDomain:
    """The 20 x 14 grid of 0.5-km cells over the Manhattan box of seed 001 section 7.2."""
    from .datasets import MANHATTAN_BOX

    return GridDomain.from_box(**MANHATTAN_BOX, cell_km=cell_km)


def manhattan_cells(cell_km: float = 0.5) -> tuple[GridDomain, np.ndarray]:
    """The grid and the cell index of each of the 98,061 Gowalla check-ins in the Manhattan box.

    The box is 7.008 km wide and the grid's 14 whole columns cover 7.000 km, so 2 check-ins lie
    within 8 m east of the last column: they are assigned to it (``tolerance_km=0.05``) rather
    than dropped, keeping every check-in of the box.
    """
    from .datasets import gowalla_manhattan

    grid = manhattan_grid(cell_km)
    df = gowalla_manhattan()
    cells = grid.locate(df["lat"].to_numpy(), df["lon"].to_numpy(), outside="error", tolerance_km=0.05)
    return grid, cells
