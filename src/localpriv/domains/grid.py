"""Planar grid domains (seed 001 section 7.2, seed 003 section 2.3).

A bounding box in latitude/longitude cut into square cells of ``cell_km`` kilometres. The
alphabet is the cells' centres; the metric is the Euclidean distance in km between centres.
Coordinates are projected equirectangularly about the grid's mid-latitude (accurate to well under
1% over a city-sized box). Cell ``i`` is at row ``i // ncols`` (south to north) and column
``i % ncols`` (west to east).

A grid is written on the command line as ``bbox(lat0,lon0,lat1,lon1,cell_km)`` (any box: the grid
starts at its south-west corner and has enough whole cells to cover it, see
:meth:`GridDomain.covering`), ``grid(lat0=..,lon0=..,nrows=..,ncols=..,cell_km=..)`` or
``manhattan[:CELL_KM]`` (:func:`localpriv.domains.parse_domain`). ``decode`` gives the cells'
centres as (lat, lon); :meth:`GridDomain.centres` and :meth:`GridDomain.edges` give the centres and
the cell boundaries in degrees (what maps, CSV outputs and GeoJSON use).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from localpriv.domains.base import Domain
from localpriv.utils.errors import missing_extra
from localpriv.utils.validation import LocalPrivError, PrivacyWarning, env_int

__all__ = ["GridDomain", "KM_PER_DEG_LAT", "MAX_CELLS", "max_grid_cells", "OUTSIDE_CHOICES", "emd_grid",
           "check_emd_grid",
           "manhattan_grid", "MANHATTAN_BOX"]

KM_PER_DEG_LAT = 110.574
KM_PER_DEG_LON_EQUATOR = 111.320
#: The most cells a grid may have (``LOCALPRIV_MAX_GRID_CELLS`` overrides it) (a larger count is nearly always cells
#: given in metres instead of km; the channels and estimators of such grids do not fit in memory).
MAX_CELLS = 1_000_000
#: What to do with points outside a grid: refuse them, drop them (counted), or move them to the
#: nearest cell (counted).
OUTSIDE_CHOICES = ("error", "drop", "clamp")
#: ``bbox`` warns when the equirectangular projection about the grid's mid-latitude stretches or
#: shrinks east-west distances by more than this fraction somewhere in the grid.
DISTORTION_WARN = 0.02


def max_grid_cells() -> int:
    """The most cells any grid may have: ``LOCALPRIV_MAX_GRID_CELLS`` if set, else :data:`MAX_CELLS`."""
    return env_int("LOCALPRIV_MAX_GRID_CELLS", MAX_CELLS, "cells")


def _whole_cells(extent_km: float, cell_km: float) -> int:
    """Whole cells needed to cover ``extent_km`` (a few ulps of rounding do not add a cell)."""
    q = extent_km / cell_km
    return max(1, math.ceil(q - 1e-9 * max(1.0, q)))


@dataclass(frozen=True, eq=True)
class GridDomain(Domain):
    """``nrows x ncols`` square cells of side ``cell_km`` with south-west corner at (lat0, lon0)."""

    lat0: float
    lon0: float
    nrows: int
    ncols: int
    cell_km: float

    def __post_init__(self) -> None:
        vals = (self.lat0, self.lon0, self.cell_km)
        if not all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                   and np.isfinite(v) for v in vals):
            raise LocalPrivError(f"grid: lat0, lon0 and cell_km must be finite numbers, got {vals}")
        if not -90.0 <= self.lat0 <= 90.0:
            raise LocalPrivError(f"grid: lat0={self.lat0} is not a latitude (-90 to 90)")
        if not -180.0 <= self.lon0 <= 180.0:
            raise LocalPrivError(f"grid: lon0={self.lon0} is not a longitude (-180 to 180)")
        for name in ("nrows", "ncols"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise LocalPrivError(f"grid: {name} must be a whole number >= 1, got {v!r}")
        if self.cell_km <= 0:
            raise LocalPrivError(f"grid: cell_km must be > 0, got {self.cell_km}")
        cap = max_grid_cells()
        cells = int(self.nrows) * int(self.ncols)
        if cells > cap:
            raise LocalPrivError(f"grid: {self.nrows} x {self.ncols} = {cells:,} cells is above the limit of {cap:,} "
                                 "(use larger cells, or raise it with the environment variable "
                                 "LOCALPRIV_MAX_GRID_CELLS)")
        top = self.lat0 + int(self.nrows) * self.cell_km / KM_PER_DEG_LAT
        if top > 90.0 + 1e-9:
            raise LocalPrivError(f"grid: {self.nrows} rows of {self.cell_km:g} km from lat {self.lat0:g} reach lat "
                                 f"{top:.4f}, beyond the north pole; use fewer rows or smaller cells")

    @classmethod
    def from_box(cls, lat_min: float, lat_max: float, lon_min: float, lon_max: float,
                 cell_km: float) -> GridDomain:
        """Cover the box with as many whole cells as fit (rounded to the nearest count)."""
        if not (lat_max > lat_min and lon_max > lon_min and cell_km > 0):
            raise LocalPrivError("grid: need lat_min < lat_max, lon_min < lon_max and cell_km > 0")
        mid = 0.5 * (lat_min + lat_max)
        h = (lat_max - lat_min) * KM_PER_DEG_LAT
        w = (lon_max - lon_min) * KM_PER_DEG_LON_EQUATOR * np.cos(np.radians(mid))
        nrows = max(1, int(round(h / cell_km)))
        ncols = max(1, int(round(w / cell_km)))
        return cls(float(lat_min), float(lon_min), nrows, ncols, float(cell_km))

    @classmethod
    def covering(cls, lat0: float, lon0: float, lat1: float, lon1: float, cell_km: float,
                 max_cells: int | None = None) -> GridDomain:
        """The grid of ``bbox(lat0,lon0,lat1,lon1,cell_km)``: the box from the south-west corner
        (lat0, lon0) to the north-east corner (lat1, lon1), cut into square cells of ``cell_km``.

        The grid starts at the south-west corner and has the fewest whole cells that cover the box:
        ``nrows = ceil(height / cell_km)``, ``ncols = ceil(width / cell_km)``, the height and width
        in km of this module's projection (equirectangular about the grid's mid-latitude, as every
        :class:`GridDomain`). It may therefore reach up to one cell beyond the north and east edges,
        so that every point of the box lies in a cell (``from_box`` rounds instead and can stop
        short of the box). Every number is checked (one-line :class:`LocalPrivError`): latitudes in
        [-90, 90], longitudes in [-180, 180], ``lat0 < lat1``, ``lon0 < lon1``, ``cell_km > 0``, at
        most ``max_cells`` cells (at most the global cap :func:`max_grid_cells`). A
        :class:`~localpriv.PrivacyWarning` says when the projection
        distorts east-west distances by more than 2 % somewhere in the grid (a large box): distances,
        and so metric privacy levels per km, are then off by that much there.
        """
        given = "bbox(" + ",".join(f"{v:.15g}" if isinstance(v, (int, float, np.integer, np.floating))
                                   and not isinstance(v, bool) else repr(v)
                                   for v in (lat0, lon0, lat1, lon1, cell_km)) + ")"
        names = ("lat0", "lon0", "lat1", "lon1", "cell_km")
        vals = []
        for name, v in zip(names, (lat0, lon0, lat1, lon1, cell_km)):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(v):
                raise LocalPrivError(f"{given}: {name} must be a finite number, got {v!r}")
            vals.append(float(v))
        lat0, lon0, lat1, lon1, cell_km = vals
        for name, v in (("lat0", lat0), ("lat1", lat1)):
            if not -90.0 <= v <= 90.0:
                raise LocalPrivError(f"{given}: {name}={v:g} is not a latitude (-90 to 90)")
        for name, v in (("lon0", lon0), ("lon1", lon1)):
            if not -180.0 <= v <= 180.0:
                raise LocalPrivError(f"{given}: {name}={v:g} is not a longitude (-180 to 180)")
        if not lat0 < lat1:
            raise LocalPrivError(f"{given}: need lat0 < lat1 (south edge first), got {lat0:g} >= {lat1:g}")
        if not lon0 < lon1:
            raise LocalPrivError(f"{given}: need lon0 < lon1 (west edge first; boxes across the 180th "
                                 f"meridian are not supported), got {lon0:g} >= {lon1:g}")
        if not cell_km > 0:
            raise LocalPrivError(f"{given}: cell_km must be > 0 (the side of a cell in km), got {cell_km:g}")
        cap = max_grid_cells()
        if max_cells is None:
            max_cells = cap
        elif max_cells > cap:
            raise LocalPrivError(f"grid: max_cells={max_cells:,} is above the limit of {cap:,} cells (raise it with "
                                 "the environment variable LOCALPRIV_MAX_GRID_CELLS)")
        height = (lat1 - lat0) * KM_PER_DEG_LAT
        nrows = _whole_cells(height, cell_km)
        if nrows > max_cells:
            raise LocalPrivError(f"{given}: {nrows:,} rows of {cell_km:g}-km cells is more than the limit of "
                                 f"{max_cells:,} cells; use larger cells (cell_km is in km)")
        top = lat0 + nrows * cell_km / KM_PER_DEG_LAT
        if top > 90.0:
            raise LocalPrivError(f"{given}: whole cells of {cell_km:g} km from lat {lat0:g} reach lat "
                                 f"{top:.4f}, beyond the pole; end the box lower or use smaller cells")
        mid = 0.5 * (lat0 + top)
        width = (lon1 - lon0) * KM_PER_DEG_LON_EQUATOR * np.cos(np.radians(mid))
        ncols = _whole_cells(width, cell_km)
        if nrows * ncols > max_cells:
            raise LocalPrivError(f"{given}: {nrows:,} x {ncols:,} = {nrows * ncols:,} cells is more than the "
                                 f"limit of {max_cells:,}; use larger cells (cell_km is in km)")
        grid = cls(lat0, lon0, nrows, ncols, cell_km)
        worst = grid.distortion()
        if worst > DISTORTION_WARN:
            warnings.warn(f"{given}: the grid spans lat {lat0:g} to {top:.4g}; its equirectangular projection "
                          f"about lat {mid:.4g} makes east-west distances off by up to {worst:.0%} at its "
                          f"edges (metric privacy levels per km too); use smaller boxes for exact distances",
                          PrivacyWarning, stacklevel=2)
        return grid

    def distortion(self) -> float:
        """Largest relative error of east-west distances in the grid's projection: the km per degree
        of longitude used everywhere (those of the mid-latitude) against the true ones at the
        southern and northern edges, ``max |cos(mid) / cos(lat) - 1|`` (0 for a one-row grid on
        the equator; 0.5 % for whole-NYC)."""
        mid = np.radians(self.lat0 + 0.5 * self.nrows * self.cell_km / KM_PER_DEG_LAT)
        edges = np.radians(np.array([self.lat0, self.lat0 + self.nrows * self.cell_km / KM_PER_DEG_LAT]))
        true = np.cos(np.clip(edges, -np.pi / 2, np.pi / 2))
        with np.errstate(divide="ignore"):
            ratio = np.where(true > 0, np.cos(mid) / np.where(true > 0, true, 1.0), np.inf)
        return float(np.max(np.abs(ratio - 1.0)))

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

    def to_km(self, lat: npt.ArrayLike, lon: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) in km east and north of the south-west corner."""
        x = (np.asarray(lon, dtype=float) - self.lon0) * self._km_per_deg_lon
        y = (np.asarray(lat, dtype=float) - self.lat0) * KM_PER_DEG_LAT
        return x, y

    def centres_km(self) -> np.ndarray:
        """``size x 2`` array of the cells' centres (x, y) in km."""
        r, c = np.divmod(np.arange(self.size), self.ncols)
        return np.column_stack([(c + 0.5) * self.cell_km, (r + 0.5) * self.cell_km])

    def centres(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lat, lon)``: the centre of every cell in degrees, in cell order (the inverse of the
        projection at :meth:`centres_km`, so ``locate(*centres())`` gives ``0..size-1``)."""
        r, c = np.divmod(np.arange(self.size), self.ncols)
        return self._lat((r + 0.5) * self.cell_km), self._lon((c + 0.5) * self.cell_km)

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lat_edges, lon_edges)``: the ``nrows + 1`` parallels and ``ncols + 1`` meridians (in
        degrees, south to north and west to east) that bound the cells: cell (row, col) spans
        ``lat_edges[row]..lat_edges[row + 1]`` and ``lon_edges[col]..lon_edges[col + 1]``."""
        return (self._lat(np.arange(self.nrows + 1) * self.cell_km),
                self._lon(np.arange(self.ncols + 1) * self.cell_km))

    def describe(self) -> str:
        """One line for messages: ``"49 x 48 cells of 1 km, lat 40.4774 to 40.9205, lon -74.2591 to
        -73.6904"``."""
        lat_e, lon_e = self.edges()
        return (f"{self.nrows} x {self.ncols} cells of {self.cell_km:g} km, lat {lat_e[0]:.6g} to "
                f"{lat_e[-1]:.6g}, lon {lon_e[0]:.6g} to {lon_e[-1]:.6g}")

    def _lat(self, y_km: npt.ArrayLike) -> np.ndarray:
        return self.lat0 + np.asarray(y_km, dtype=float) / KM_PER_DEG_LAT

    def _lon(self, x_km: npt.ArrayLike) -> np.ndarray:
        return self.lon0 + np.asarray(x_km, dtype=float) / self._km_per_deg_lon

    def rows_cols(self, index: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``(row, col)`` of cell indices (row 0 is the southernmost, col 0 the westernmost)."""
        return np.divmod(self._check_index(index), self.ncols)

    def _check_index(self, index: npt.ArrayLike) -> np.ndarray:
        idx = np.asarray(index)
        if idx.dtype.kind not in "iu" or (idx.size and (idx.min() < 0 or idx.max() >= self.size)):
            raise LocalPrivError(f"grid: cell indices must be whole numbers 0..{self.size - 1}")
        return idx.astype(np.int64)

    def locate(self, lat: npt.ArrayLike, lon: npt.ArrayLike, outside: str = "error",
               tolerance_km: float = 0.0) -> np.ndarray:
        """Cell index of each point.

        Points outside the grid raise (``outside="error"``), get -1 (``outside="drop"``: the
        caller removes them and can count them), or go to the nearest cell (``outside="clamp"``,
        also called ``"nearest"``).
        ``tolerance_km`` > 0 first assigns points lying at most that far outside the grid to the
        nearest edge cell (whole cells of ``from_box`` may stop a few metres short of the box:
        the 14 columns of 0.5 km of the Manhattan grid cover 7.000 km of a 7.008-km-wide box).
        """
        if outside not in ("error", "drop", "nearest", "clamp"):
            raise LocalPrivError(f"grid: outside must be 'error', 'drop' or 'clamp', got {outside!r}")
        x, y = self.to_km(lat, lon)
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
            raise LocalPrivError("grid: some coordinates are NaN or infinite")
        w, h = self.ncols * self.cell_km, self.nrows * self.cell_km
        if outside in ("nearest", "clamp"):
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
            raise LocalPrivError(f"{int(bad.sum()):,} of {bad.size:,} point(s) lie outside the grid "
                                 f"({self.describe()}); drop them or move them to the nearest cell, "
                                 "counted (--outside drop|clamp; in Python outside='drop'|'clamp' of perturb_file, "
                                 "GridDomain.place or GridDomain.locate)")
        idx = row * self.ncols + col
        idx[bad] = -1
        return idx

    is_numeric = True
    columns = 2

    @staticmethod
    def _numbers(values: npt.ArrayLike) -> np.ndarray:
        """``values`` as an ``n x 2`` float array; text that is no number becomes NaN."""
        arr = np.asarray(values)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise LocalPrivError(f"grid values must be an n x 2 array of (lat, lon), got shape {arr.shape}")
        if arr.dtype.kind in "OUS":
            import pandas as pd
            return np.column_stack([pd.to_numeric(pd.Series(arr[:, j], dtype=object), errors="coerce")
                                    .to_numpy(dtype=float) for j in range(2)])
        if arr.dtype.kind == "b":
            raise LocalPrivError("grid values are booleans (true/false), not coordinates; is it the right column?")
        if arr.dtype.kind not in "iuf":
            raise LocalPrivError(f"grid: cannot read coordinates of type {arr.dtype}")
        return arr.astype(float, copy=False)

    def unreadable(self, values: npt.ArrayLike) -> np.ndarray:
        """Mask of the points that are no coordinates at all (text, NaN, infinite)."""
        return ~np.isfinite(self._numbers(values)).all(axis=1)

    def invalid(self, values: npt.ArrayLike) -> np.ndarray:
        arr = self._numbers(values)
        bad = ~np.isfinite(arr).all(axis=1)
        ok = np.flatnonzero(~bad)
        bad[ok] = self.locate(arr[ok, 0], arr[ok, 1], outside="drop") < 0
        return bad

    def place(self, values: npt.ArrayLike, outside: str = "error") -> tuple[np.ndarray, np.ndarray]:
        """``(cells, out)``: the cell of each (lat, lon) point and the mask of the points that lie
        outside the grid, which ``outside`` decides on: ``"error"`` refuses them (one line saying
        how many), ``"drop"`` gives them cell -1 (the caller removes and counts them), ``"clamp"``
        moves them to the nearest cell (the caller counts them from ``out``). Points that are no
        coordinates (text, NaN, infinite) are refused whatever ``outside`` is: they are not
        "outside", they are wrong."""
        if outside not in OUTSIDE_CHOICES:
            raise LocalPrivError(f"outside must be one of {', '.join(OUTSIDE_CHOICES)}, got {outside!r}")
        arr = self._numbers(values)
        junk = ~np.isfinite(arr).all(axis=1)
        if junk.any():
            raise LocalPrivError(f"{int(junk.sum()):,} point(s) are not coordinates (text, empty, NaN or infinite)")
        cells = self.locate(arr[:, 0], arr[:, 1], outside="drop")
        out = cells < 0
        if out.any():
            if outside == "error":
                self.locate(arr[:, 0], arr[:, 1], outside="error")  # raises, saying how many
            if outside == "clamp":
                cells[out] = self.locate(arr[out, 0], arr[out, 1], outside="clamp")
        return cells, out

    def encode(self, values: npt.ArrayLike) -> np.ndarray:
        """``values``: an ``n x 2`` array of (lat, lon); points outside the grid are an error."""
        arr = np.asarray(values)
        if arr.size == 0:
            raise LocalPrivError("no values given: the input is empty")
        return self.place(arr, "error")[0]

    def decode(self, index: npt.ArrayLike) -> np.ndarray:
        """The (lat, lon) centres of cells: an ``n x 2`` array for ``n`` indices (a point lying in
        cell ``i`` decodes to the centre of ``i``, so ``encode(decode(i)) == i``)."""
        r, c = self.rows_cols(index)
        return np.stack([self._lat((r + 0.5) * self.cell_km), self._lon((c + 0.5) * self.cell_km)], axis=-1)

    @property
    def labels(self) -> np.ndarray:
        """Cell ids ``0..size-1`` (row-major from the south-west): what estimates are indexed by;
        :meth:`decode` and :meth:`centres` give their coordinates."""
        return np.arange(self.size)

    def distance_matrix(self) -> np.ndarray:
        c = self.centres_km()
        return np.sqrt(((c[:, None, :] - c[None, :, :]) ** 2).sum(-1))

    def spec(self) -> str:
        return f"grid(lat0={self.lat0},lon0={self.lon0},nrows={self.nrows},ncols={self.ncols},cell_km={self.cell_km})"


def check_emd_grid() -> None:
    """Refuse in one line, naming the extra to install, when :func:`emd_grid`'s solver (POT, the
    ``geo`` extra) is not installed."""
    try:
        import ot  # noqa: F401 - only whether it imports
    except ModuleNotFoundError as exc:
        raise missing_extra(exc) or exc from None


def emd_grid(p: npt.ArrayLike, q: npt.ArrayLike, domain: GridDomain | np.ndarray) -> float:
    """Earth mover's distance (km) between two distributions on the cells of a grid.

    ``EMD(p, q) = min_{T >= 0, T 1 = p, T^T 1 = q} sum_{x,y} T[x, y] d(x, y)`` with ``d`` the
    Euclidean distance in km between cell centres (seed 001 section 7.2, footnote 4; seed 003
    section 8, footnote 2). Solved exactly as a transport linear program by POT's network simplex
    (``ot.emd2``; POT comes with the ``geo`` extra, ``pip install 'localpriv[geo]'``). ``p`` and
    ``q`` are normalized to sum 1; ``domain`` may also be the ``k x k`` ground-distance matrix itself.
    """
    try:
        import ot
    except ModuleNotFoundError as exc:
        raise missing_extra(exc) or exc from None

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


#: The box of seed 001 section 7.2 (decimal degrees).
MANHATTAN_BOX = {"lat_min": 40.7044, "lat_max": 40.7942, "lon_min": -74.0205, "lon_max": -73.9374}


def manhattan_grid(cell_km: float = 0.5) -> GridDomain:
    """The 20 x 14 grid of 0.5-km cells over the Manhattan box of seed 001 section 7.2."""
    return GridDomain.from_box(**MANHATTAN_BOX, cell_km=cell_km)
