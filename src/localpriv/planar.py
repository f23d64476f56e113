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

__all__ = ["GridDomain", "KM_PER_DEG_LAT"]

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

    def locate(self, lat, lon, outside: str = "error") -> np.ndarray:
        """Cell index of each point; points outside the grid raise (``outside="error"``) or get -1
        (``outside="drop"``, the caller removes them and can count them)."""
        x, y = self.to_km(lat, lon)
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
            raise LocalPrivError("grid: some coordinates are NaN or infinite")
        col = np.floor(x / self.cell_km).astype(np.int64)
        row = np.floor(y / self.cell_km).astype(np.int64)
        bad = (col < 0) | (col >= self.ncols) | (row < 0) | (row >= self.nrows)
        if bad.any() and outside == "error":
            raise LocalPrivError(f"grid: {int(bad.sum())} point(s) lie outside the grid "
                                 f"(use outside='drop' to drop and count them)")
        idx = row * self.ncols + col
        idx[bad] = -1
        return idx

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
