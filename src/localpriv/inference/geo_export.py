"""GeoJSON export of estimates on planar grids, for GIS tools (QGIS, geopandas, web maps).

An estimate on a :class:`~localpriv.domains.grid.GridDomain` becomes a GeoJSON ``FeatureCollection``
(RFC 7946) with one ``Feature`` per cell: a ``Polygon`` whose exterior ring runs counterclockwise
through the cell's south-west, south-east, north-east and north-west corners and back (positions
``[longitude, latitude]`` in decimal degrees, WGS 84, rounded to 7 decimals, about 1 cm), and the
properties

* ``cell`` (the cell id, the ``value`` of CSV outputs), ``row`` (0 = southernmost), ``col``
  (0 = westernmost), ``lat``, ``lon`` (the cell's centre);
* ``share``: the estimated share of users in the cell (the shares of all cells sum to 1);
* ``lower``, ``upper``: the cell's confidence interval, when a level is given.

Every cell is written, empty or not, so that the file is the whole estimate. The collection also
holds ``bbox`` (west, south, east, north of the grid) and a ``localpriv`` member (estimator,
number of reports, grid spec, interval level and method) that GIS tools ignore.

Adjacent cells share their corner coordinates exactly (the corners come from one array of
meridians and one of parallels, :meth:`~localpriv.domains.grid.GridDomain.edges`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Protocol, SupportsFloat, cast

import numpy as np

from localpriv.data.formats import StrPath, atomic_output
from localpriv.domains import Domain
from localpriv.domains.grid import GridDomain
from localpriv.inference.uncertainty import Uncertainty
from localpriv.utils.validation import LocalPrivError

__all__ = ["estimate_geojson", "write_geojson", "GEOJSON_SUFFIXES"]

GEOJSON_SUFFIXES = (".geojson",)
#: Decimals kept in coordinates (1e-7 degree is about 1 cm).
PRECISION = 7


class GridEstimate(Protocol):
    """What the export reads of an :class:`~localpriv.inference.estimate.Estimate` (which imports
    this module)."""

    domain: Domain | None
    distribution: np.ndarray
    estimator: str
    n: float

    def ci(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]: ...

    def uncertainty(self) -> Uncertainty: ...


def _grid_of(est: GridEstimate) -> GridDomain:
    dom = getattr(est, "domain", None)
    if dom is None or not callable(getattr(dom, "edges", None)):
        where = "no domain" if dom is None else dom.spec()
        raise LocalPrivError(f"GeoJSON needs an estimate on a planar grid (--domain bbox(...), grid(...) or "
                             f"manhattan), not on {where}; write .csv or .json instead")
    return cast(GridDomain, dom)  # a planar grid: it has edges()


def _number(v: SupportsFloat) -> float | None:
    v = float(v)
    return v if math.isfinite(v) else None


def estimate_geojson(est: GridEstimate, ci: float | None = None) -> dict[str, Any]:
    """The estimate as a GeoJSON ``FeatureCollection`` (a dict, ready for :func:`json.dumps`);
    ``ci`` adds each cell's interval at that level (``lower``, ``upper``)."""
    grid = _grid_of(est)
    p = np.asarray(est.distribution, dtype=float)
    if p.shape != (grid.size,):
        raise LocalPrivError(f"the estimate has {p.size} entries but its grid has {grid.size} cells")
    lat_e, lon_e = (np.round(e, PRECISION) for e in grid.edges())
    lat_c, lon_c = (np.round(c, PRECISION) for c in grid.centres())
    row, col = grid.rows_cols(np.arange(grid.size))
    lo = hi = None
    if ci is not None:
        lo, hi = est.ci(ci)
    features = []
    for i in range(grid.size):
        r, c = int(row[i]), int(col[i])
        s, n, w, e = float(lat_e[r]), float(lat_e[r + 1]), float(lon_e[c]), float(lon_e[c + 1])
        props: dict[str, Any] = {"cell": i, "row": r, "col": c, "lat": float(lat_c[i]), "lon": float(lon_c[i]),
                 "share": _number(p[i])}
        if lo is not None and hi is not None:
            props["lower"], props["upper"] = _number(lo[i]), _number(hi[i])
        features.append({"type": "Feature", "id": i,
                         "geometry": {"type": "Polygon",
                                      "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]},
                         "properties": props})
    meta: dict[str, Any] = {"estimator": est.estimator, "n": _number(est.n), "domain": grid.spec(),
            "cell_km": grid.cell_km, "share": "estimated share of users per cell (sums to 1)"}
    if ci is not None:
        meta.update({"level": float(ci), "interval_method": est.uncertainty().method})
    return {"type": "FeatureCollection",
            "bbox": [float(lon_e[0]), float(lat_e[0]), float(lon_e[-1]), float(lat_e[-1])],
            "localpriv": meta, "features": features}


def write_geojson(est: GridEstimate, path: StrPath, ci: float | None = None) -> Path:
    """Write :func:`estimate_geojson` to ``path`` (``.geojson``), atomically: one feature a line."""

    path = Path(path)
    doc = estimate_geojson(est, ci)  # before the file is opened: a refused estimate leaves nothing
    features = doc.pop("features")
    head = json.dumps(doc, allow_nan=False, separators=(",", ":"))[:-1]  # without the closing brace
    with atomic_output(path, GEOJSON_SUFFIXES, what="GeoJSON file") as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(head + ',"features":[\n')
        fh.write(",\n".join(json.dumps(f, allow_nan=False, separators=(",", ":")) for f in features))
        fh.write("\n]}\n")
    return path
