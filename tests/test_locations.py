"""Locations end to end from the command line.

``bbox(lat0,lon0,lat1,lon1,cell_km)`` domains, ``--outside drop|clamp|error`` with counts, TSV
files without a header (columns by number), estimate outputs with cell-centre latitude and
longitude, GeoJSON export, and the lat/lon heatmap of ``--plot``.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from localpriv import LocalPrivError, PrivacyWarning, aggregate, estimate, parse_domain
from localpriv.data.reports import perturb, perturb_file, read_reports, read_values
from localpriv.domains.grid import KM_PER_DEG_LAT, MAX_CELLS, GridDomain
from localpriv.inference.estimate import Estimate
from localpriv.inference.geo_export import estimate_geojson, write_geojson

SHARED = Path("/work/shared/data")  # the shared data of every dev/CI machine (as in test_accuracy_experiment)
GOWALLA = SHARED / "gowalla_nyc_checkins.tsv.gz"
NYC = "bbox(40.4774,-74.2591,40.9176,-73.7004,1)"
SMALL = "bbox(40.70,-74.02,40.73,-73.98,1)"  # 4 x 4 cells of 1 km


def run_cli(cwd: Path, *args) -> subprocess.CompletedProcess:
    """``localpriv ARGS`` as a real subprocess (real exit codes and stderr)."""
    env = {**os.environ, "COLUMNS": "40", "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "localpriv.cli.main", *map(str, args)], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


# --------------------------------------------------------------------------------------------
# bbox(...) parsing
# --------------------------------------------------------------------------------------------
def test_bbox_whole_nyc_at_1km():
    g = parse_domain(NYC)
    assert isinstance(g, GridDomain)
    assert (g.lat0, g.lon0, g.nrows, g.ncols, g.cell_km) == (40.4774, -74.2591, 49, 48, 1.0)
    lat_e, lon_e = g.edges()
    # the grid covers the box, and one row or column fewer would not
    assert lat_e[-1] >= 40.9176 and lon_e[-1] >= -73.7004
    assert lat_e[-2] < 40.9176 and lon_e[-2] < -73.7004
    # the spec round-trips through the grid syntax
    assert parse_domain(g.spec()) == g


def test_bbox_named_fields_case_and_spaces():
    a = parse_domain(SMALL)
    assert parse_domain("BBox( 40.70 , -74.02, 40.73, -73.98 , 1 )") == a
    assert parse_domain("bbox(lat0=40.70,lon0=-74.02,lat1=40.73,lon1=-73.98,cell_km=1)") == a
    assert parse_domain("bbox(40.70,-74.02,40.73,-73.98,cell_km=1)") == a
    assert (a.nrows, a.ncols) == (4, 4)


@given(lat0=st.floats(-60, 60), lon0=st.floats(-170, 160), dlat=st.floats(0.01, 1.0),
       dlon=st.floats(0.01, 1.0), cell=st.floats(0.2, 5.0))
def test_bbox_covers_its_box_with_fewest_cells(lat0, lon0, dlat, dlon, cell):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        g = GridDomain.covering(lat0, lon0, lat0 + dlat, lon0 + dlon, cell)
    assert (g.lat0, g.lon0) == (lat0, lon0)
    # the box's corners (just inside) lie in the grid; a grid one row/column smaller misses them
    corners = np.array([[lat0, lon0], [lat0 + dlat * (1 - 1e-9), lon0 + dlon * (1 - 1e-9)]])
    assert (g.locate(corners[:, 0], corners[:, 1], outside="drop") >= 0).all()
    x, y = g.to_km(lat0 + dlat, lon0 + dlon)
    assert (g.nrows - 1) * cell < y * (1 + 1e-6) or g.nrows == 1
    assert (g.ncols - 1) * cell < x * (1 + 1e-6) or g.ncols == 1
    assert parse_domain(g.spec()) == g


@pytest.mark.parametrize("text, msg", [
    ("bbox(40,-74,41,-73)", "expected 5 numbers"),
    ("bbox(40,-74,41,-73,1,2)", "expected 5 numbers"),
    ("bbox(40,-74,,-73,1)", "expected 5 numbers"),
    ("bbox 40,-74,41,-73,1", "cannot read domain"),
    ("bbox(40,-74,41,east,1)", "lon1 must be a number, got 'east'"),
    ("bbox(40,-74,41,-73,nan)", "cell_km must be a finite number"),
    ("bbox(40,-74,41,-73,inf)", "cell_km must be a finite number"),
    ("bbox(91,-74,92,-73,1)", "lat0=91 is not a latitude"),
    ("bbox(40,-74,95,-73,1)", "lat1=95 is not a latitude"),
    ("bbox(40,-190,41,-73,1)", "lon0=-190 is not a longitude"),
    ("bbox(40,-74,41,200,1)", "lon1=200 is not a longitude"),
    ("bbox(41,-74,40,-73,1)", "need lat0 < lat1"),
    ("bbox(40,-74,40,-73,1)", "need lat0 < lat1"),
    ("bbox(40,-73,41,-74,1)", "need lon0 < lon1"),
    ("bbox(40,-74,41,-73,0)", "cell_km must be > 0"),
    ("bbox(40,-74,41,-73,-1)", "cell_km must be > 0"),
    ("bbox(40,-74,41,-73,0.01)", "more than the limit of 1,000,000"),
    ("bbox(-89,-74,89.9,-73,1e-4)", "more than the limit"),
    ("bbox(0,0,89.99,10,1000)", "beyond the pole"),
    ("bbox(40,-74,41,-73,size=1)", "unknown field 'size'"),
    ("bbox(lat0=40,lat0=40,41,-73,1)", "lat0 given twice"),
])
def test_bbox_refusals_are_one_line(text, msg):
    with pytest.raises(LocalPrivError, match=msg) as info:
        parse_domain(text)
    assert "\n" not in str(info.value)


def test_bbox_cell_cap_is_the_documented_constant(monkeypatch):
    # 0.1-km cells over a 1 x 1 degree box: 1,106 x 847 cells, under 10^6; 0.09-km cells: over
    g = GridDomain.covering(40, -74, 41, -73, 0.1)
    assert g.size <= MAX_CELLS
    with pytest.raises(LocalPrivError, match="limit"):
        GridDomain.covering(40, -74, 41, -73, 0.09)
    with pytest.raises(LocalPrivError, match="LOCALPRIV_MAX_GRID_CELLS"):  # max_cells only lowers the cap
        GridDomain.covering(40, -74, 41, -73, 0.09, max_cells=2 * MAX_CELLS)
    monkeypatch.setenv("LOCALPRIV_MAX_GRID_CELLS", str(2 * MAX_CELLS))  # the documented way to raise it
    assert GridDomain.covering(40, -74, 41, -73, 0.09).size > MAX_CELLS


def test_bbox_warns_when_the_projection_distorts():
    with pytest.warns(PrivacyWarning, match="east-west distances off by up to"):
        parse_domain("bbox(25,-125,50,-65,50)")  # a continent: cos(lat) varies by 20 % and more
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = parse_domain(NYC)  # a city: no warning
    assert g.distortion() < 0.005


def test_cli_bbox_error_is_one_line(tmp_path):
    pd.DataFrame({"lat": [40.71], "lon": [-74.0]}).to_csv(tmp_path / "p.csv", index=False)
    proc = run_cli(tmp_path, "perturb", "p.csv", "-o", "r.csv", "-m", "planar-geometric(eps=1.0)",
                   "-d", "bbox(40,-74,41,-75,1)", "-c", "lat,lon")
    assert "need lon0 < lon1" in one_error_line(proc)
    assert not (tmp_path / "r.csv").exists()


# --------------------------------------------------------------------------------------------
# cells: decode, centres, edges
# --------------------------------------------------------------------------------------------
def test_decode_gives_cell_centres_and_round_trips():
    g = parse_domain(NYC)
    idx = np.arange(g.size)
    ll = g.decode(idx)
    assert ll.shape == (g.size, 2)
    np.testing.assert_array_equal(g.encode(ll), idx)
    lat, lon = g.centres()
    np.testing.assert_array_equal(ll[:, 0], lat)
    np.testing.assert_array_equal(ll[:, 1], lon)
    row, col = g.rows_cols(idx)
    lat_e, lon_e = g.edges()
    np.testing.assert_allclose(lat, 0.5 * (lat_e[row] + lat_e[row + 1]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(lon, 0.5 * (lon_e[col] + lon_e[col + 1]), rtol=0, atol=1e-12)
    # a cell is cell_km tall: the parallels are cell_km / 110.574 degrees apart
    np.testing.assert_allclose(np.diff(lat_e), g.cell_km / KM_PER_DEG_LAT)
    # estimates stay indexed by cell id
    np.testing.assert_array_equal(g.labels, idx)
    with pytest.raises(LocalPrivError, match="0..2351"):
        g.decode([g.size])


# --------------------------------------------------------------------------------------------
# --outside drop | clamp | error
# --------------------------------------------------------------------------------------------
def _points(g: GridDomain, n_in: int, outside_at: dict[int, tuple[float, float]], rng) -> pd.DataFrame:
    """``n_in + len(outside_at)`` points; row ``i`` of ``outside_at`` holds the given point."""
    lat, lon = g.centres()
    cells = rng.integers(0, g.size, n_in)
    pts = [(lat[c], lon[c]) for c in cells]
    for i in sorted(outside_at):
        pts.insert(i, outside_at[i])
    return pd.DataFrame(pts, columns=["lat", "lon"])


def test_place_drop_clamp_error():
    g = parse_domain(SMALL)
    lat_e, lon_e = g.edges()
    pts = np.array([[40.71, -74.00],                 # inside
                    [lat_e[-1] + 0.01, -74.00],      # north of the grid
                    [lat_e[0] - 0.5, lon_e[0] - 1],  # far south-west
                    [40.715, lon_e[-1] + 0.001]])    # just east
    inside = g.locate(pts[:1, 0], pts[:1, 1])[0]
    cells, out = g.place(pts, "drop")
    np.testing.assert_array_equal(out, [False, True, True, True])
    assert cells[0] == inside and (cells[1:] == -1).all()
    cells, out = g.place(pts, "clamp")
    row, col = g.rows_cols(cells)
    assert out.sum() == 3
    assert row[1] == g.nrows - 1 and col[1] == g.rows_cols(inside)[1]  # straight south onto the top row
    assert (row[2], col[2]) == (0, 0)                                    # the south-west corner cell
    assert col[3] == g.ncols - 1 and row[3] == g.locate([40.715], [-74.0])[0] // g.ncols
    with pytest.raises(LocalPrivError, match="3 of 4 point"):
        g.place(pts, "error")
    with pytest.raises(LocalPrivError, match="not coordinates"):
        g.place(np.array([[np.nan, -74.0]]), "drop")


@pytest.mark.parametrize("outside", ["drop", "clamp"])
def test_perturb_file_counts_points_outside(tmp_path, outside):
    g = parse_domain(SMALL)
    rng = np.random.default_rng(0)
    df = _points(g, 200, {3: (41.5, -74.0), 50: (40.71, -75.0), 120: (40.0, -73.0)}, rng)
    df.to_csv(tmp_path / "p.csv", index=False)
    res = perturb_file(tmp_path / "p.csv", tmp_path / "r.parquet", "krr(eps=1.0)", g,
                       np.random.default_rng(1), column="lat,lon", outside=outside)
    assert (res.rows, res.dropped, res.outside, res.outside_action) == (203, 0, 3, outside)
    assert res.reports == (200 if outside == "drop" else 203)
    n = sum(len(r) for _, parts in read_reports([tmp_path / "r.parquet"], g) for _, _, r, _ in parts)
    assert n == res.reports


def test_perturb_clamped_points_land_in_the_nearest_cell(tmp_path):
    g = parse_domain(SMALL)
    lat_e, lon_e = g.edges()
    df = pd.DataFrame({"lat": [40.715, lat_e[-1] + 1.0, 40.715],
                       "lon": [-74.0, -74.0, lon_e[-1] + 2.0]})
    df.to_csv(tmp_path / "p.csv", index=False)
    # the identity channel (k-RR at a huge eps keeps every value): the reports are the cells
    res = perturb_file(tmp_path / "p.csv", tmp_path / "r.csv", "krr(eps=60.0)", g, np.random.default_rng(2),
                       column="lat,lon", outside="clamp")
    assert res.outside == 2
    reps = pd.read_csv(tmp_path / "r.csv", comment="#")["report"].to_numpy()
    inner = g.locate([40.715], [-74.0])[0]
    assert reps[0] == inner
    assert reps[1] == (g.nrows - 1) * g.ncols + inner % g.ncols
    assert reps[2] == (inner // g.ncols) * g.ncols + g.ncols - 1


def test_perturb_outside_error_counts_every_chunk_and_names_the_first_line(tmp_path, monkeypatch):
    import localpriv.data.reports as reports
    monkeypatch.setattr(reports, "CSV_BLOCK_BYTES", 1 << 10)  # many chunks: the count spans them
    g = parse_domain(SMALL)
    rng = np.random.default_rng(3)
    bad = {100: (41.0, -74.0), 301: (40.71, -80.0), 302: (39.0, -74.0), 455: (40.75, -73.0)}
    df = _points(g, 500, bad, rng)
    df.to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(LocalPrivError) as info:
        perturb_file(tmp_path / "p.csv", tmp_path / "r.csv", "krr(eps=1.0)", g, np.random.default_rng(0),
                     column="lat,lon")
    msg = str(info.value)
    assert "4 of 504 points lie outside the grid" in msg
    assert "the first at lines 102, 303, 304;" in msg  # data row 100 (0-based) is line 102 after the header
    assert "--outside drop|clamp" in msg and "\n" not in msg
    assert not (tmp_path / "r.csv").exists()


def test_outside_refusals(tmp_path):
    g = parse_domain(SMALL)
    pd.DataFrame({"lat": [40.71, "north"], "lon": [-74.0, -74.0]}).to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(LocalPrivError, match="not coordinates.*line 3"):  # text is wrong, not outside
        perturb_file(tmp_path / "t.csv", tmp_path / "r.csv", "krr(eps=1.0)", g, np.random.default_rng(0),
                     column="lat,lon", outside="drop")
    pd.DataFrame({"v": [1, 2]}).to_csv(tmp_path / "v.csv", index=False)
    with pytest.raises(LocalPrivError, match="applies to planar grid domains"):
        perturb_file(tmp_path / "v.csv", tmp_path / "r.csv", "krr(eps=1.0)", parse_domain("0..9"),
                     np.random.default_rng(0), outside="drop")
    with pytest.raises(LocalPrivError, match="one of error, drop, clamp"):
        perturb_file(tmp_path / "t.csv", tmp_path / "r.csv", "krr(eps=1.0)", g, np.random.default_rng(0),
                     column="lat,lon", outside="nearest-ish")
    assert not (tmp_path / "r.csv").exists()


def test_cli_outside_reports_counts_on_stderr(tmp_path):
    g = parse_domain(SMALL)
    df = _points(g, 40, {0: (41.0, -74.0), 7: (40.0, -74.0)}, np.random.default_rng(4))
    df.to_csv(tmp_path / "p.csv", index=False)
    common = ["-m", "planar-geometric(eps=1.0)", "-d", SMALL, "-c", "lat,lon", "--seed", "0"]
    proc = run_cli(tmp_path, "perturb", "p.csv", "-o", "r.csv", *common)
    line = one_error_line(proc)
    assert "2 of 42 points lie outside the grid" in line and "first at lines 2, 9;" in line
    proc = run_cli(tmp_path, "perturb", "p.csv", "-o", "r.csv", *common, "--outside", "drop")
    assert proc.returncode == 0, proc.stderr
    assert "dropped 2 of 42 points outside the grid (p.csv)" in proc.stderr.splitlines()
    assert "wrote 40 reports" in proc.stderr
    proc = run_cli(tmp_path, "perturb", "p.csv", "-o", "r2.csv", *common, "--outside", "clamp")
    assert "moved 2 of 42 points outside the grid to the nearest cell (p.csv)" in proc.stderr.splitlines()
    assert "wrote 42 reports" in proc.stderr


# --------------------------------------------------------------------------------------------
# TSV without a header, columns by number
# --------------------------------------------------------------------------------------------
def _gowalla_like(path: Path, rows: list[tuple[float, float]]) -> None:
    text = "".join(f"{i}\t2010-10-12T00:21:28Z\t{float(lat)!r}\t{float(lon)!r}\t{1000 + i}\n"
                   for i, (lat, lon) in enumerate(rows))
    with gzip.open(path, "wt") as fh:
        fh.write(text)


def test_headerless_tsv_columns_by_number(tmp_path):
    _gowalla_like(tmp_path / "c.tsv.gz", [(40.71, -74.0), (40.72, -73.99), (40.705, -74.01)])
    v = read_values(tmp_path / "c.tsv.gz", "3,4", header=False, domain=parse_domain(SMALL))
    np.testing.assert_array_equal(v, [[40.71, -74.0], [40.72, -73.99], [40.705, -74.01]])
    with pytest.raises(LocalPrivError, match="has 5 column\\(s\\): there is no column 7"):
        read_values(tmp_path / "c.tsv.gz", "3,7", header=False)
    with pytest.raises(LocalPrivError, match="give columns by number"):
        read_values(tmp_path / "c.tsv.gz", "lat,lon", header=False)
    # a TSV with a header reads by name or number
    (tmp_path / "h.tsv").write_text("name\tlat\tlon\na\t40.71\t-74.0\nb\t40.72\t-73.99\n")
    np.testing.assert_array_equal(read_values(tmp_path / "h.tsv", "lat,lon"), read_values(tmp_path / "h.tsv", "2,3"))


def test_headerless_missing_values_are_named_by_line(tmp_path):
    (tmp_path / "m.tsv").write_text("0\tt\t40.71\t-74.0\t1\n1\tt\t\t-74.0\t2\n")
    with pytest.raises(LocalPrivError, match="1 missing value\\(s\\) in column 3,4 at line 2"):
        read_values(tmp_path / "m.tsv", "3,4", header=False, domain=parse_domain(SMALL))


def test_gowalla_whole_nyc_and_manhattan_counts(tmp_path):
    """Every one of the 138,957 check-ins lies in the whole-NYC grid; in a Manhattan bbox the dropped
    count equals the check-ins beyond the grid's edges, counted independently here with pandas."""
    res = perturb_file(GOWALLA, tmp_path / "r.parquet", "planar-geometric(eps=1.0)", parse_domain(NYC),
                       np.random.default_rng(0), column="3,4", header=False)
    assert (res.rows, res.reports, res.outside) == (138_957, 138_957, 0)
    man = parse_domain("bbox(40.7044,-74.0205,40.7942,-73.9374,0.5)")
    res = perturb_file(GOWALLA, tmp_path / "m.parquet", "krr(eps=1.0)", man, np.random.default_rng(0),
                       column="3,4", header=False, outside="drop")
    df = pd.read_csv(GOWALLA, sep="\t", header=None, names=["u", "t", "lat", "lon", "loc"])
    lat_e, lon_e = man.edges()
    beyond = ((df["lat"] < lat_e[0]) | (df["lat"] >= lat_e[-1]) | (df["lon"] < lon_e[0]) | (df["lon"] >= lon_e[-1]))
    assert res.outside == int(beyond.sum()) and res.reports == 138_957 - res.outside


# --------------------------------------------------------------------------------------------
# estimate outputs: lat/lon columns, GeoJSON
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_estimate():
    """An IBU estimate on the 4 x 4 grid from 20,000 reports (fixed seeds): 60 % of the users in
    one cell, the rest uniform."""
    g = parse_domain(SMALL)
    rng = np.random.default_rng(11)
    cells = np.where(rng.random(20_000) < 0.6, 5, rng.integers(0, g.size, 20_000))
    reports = perturb(g.decode(cells), "planar-geometric(eps=2.0)", np.random.default_rng(12), g)
    return g, cells, estimate(aggregate(reports, g), "ibu")


def test_estimate_frame_and_dict_carry_cell_centres(small_estimate):
    g, cells, est = small_estimate
    df = est.to_frame()
    assert list(df.columns) == ["value", "probability", "row", "col", "lat", "lon"]
    lat, lon = g.centres()
    np.testing.assert_array_equal(df["lat"], lat)
    np.testing.assert_array_equal(df["lon"], lon)
    np.testing.assert_array_equal(df["value"], np.arange(g.size))
    np.testing.assert_array_equal(df["row"] * g.ncols + df["col"], df["value"])
    # the estimate finds the crowded cell (seeded; truth 0.6 + 0.4/16 = 0.625)
    assert int(df["probability"].idxmax()) == 5
    assert df["probability"][5] == pytest.approx(np.mean(cells == 5), abs=0.03)
    d = est.to_dict()
    assert d["lat"] == lat.tolist() and d["lon"] == lon.tolist() and d["labels"] == list(range(g.size))
    with_ci = est.to_frame(0.9)
    assert list(with_ci.columns) == ["value", "probability", "lower", "upper", "row", "col", "lat", "lon"]
    assert (with_ci["lower"] <= with_ci["probability"] + 1e-12).all()
    assert (with_ci["probability"] <= with_ci["upper"] + 1e-12).all()


def _ring_area(ring) -> float:
    xy = np.asarray(ring)
    return 0.5 * float(np.sum(xy[:-1, 0] * xy[1:, 1] - xy[1:, 0] * xy[:-1, 1]))


def test_geojson_is_valid_and_complete(small_estimate, tmp_path):
    g, _, est = small_estimate
    path = write_geojson(est, tmp_path / "e.geojson", ci=0.95)
    doc = json.loads(path.read_text())
    assert doc["type"] == "FeatureCollection" and len(doc["features"]) == g.size
    lat_e, lon_e = g.edges()
    assert doc["bbox"] == pytest.approx([lon_e[0], lat_e[0], lon_e[-1], lat_e[-1]], abs=1e-7)
    shares = []
    corners = {}
    for f in doc["features"]:
        assert f["type"] == "Feature" and f["geometry"]["type"] == "Polygon"
        rings = f["geometry"]["coordinates"]
        assert len(rings) == 1 and len(rings[0]) == 5 and rings[0][0] == rings[0][-1]  # closed
        assert _ring_area(rings[0]) > 0  # counterclockwise exterior ring (RFC 7946 section 3.1.6)
        p = f["properties"]
        r, c = p["row"], p["col"]
        # positions are [longitude, latitude]: the first corner is the cell's south-west one
        assert rings[0][0] == pytest.approx([lon_e[c], lat_e[r]], abs=1e-7)
        assert rings[0][2] == pytest.approx([lon_e[c + 1], lat_e[r + 1]], abs=1e-7)
        assert min(x for x, _ in rings[0]) < p["lon"] < max(x for x, _ in rings[0])
        assert min(y for _, y in rings[0]) < p["lat"] < max(y for _, y in rings[0])
        assert p["cell"] == r * g.ncols + c and p["share"] == est.distribution[p["cell"]]
        assert p["lower"] <= p["share"] + 1e-12 and p["share"] <= p["upper"] + 1e-12
        shares.append(p["share"])
        corners[(r, c)] = rings[0]
    assert sum(shares) == pytest.approx(1.0, abs=1e-9)
    # neighbours share their edges exactly (no slivers or overlaps in a GIS)
    assert corners[(0, 0)][1] == corners[(0, 1)][0] and corners[(0, 0)][2] == corners[(1, 0)][1]
    assert doc["localpriv"]["level"] == 0.95 and doc["localpriv"]["domain"] == g.spec()


def test_geojson_needs_a_grid():
    est = Estimate(np.array([0.5, 0.5]), parse_domain("0..1"), "ibu")
    with pytest.raises(LocalPrivError, match="GeoJSON needs an estimate on a planar grid"):
        estimate_geojson(est)


def test_cli_locations_end_to_end(tmp_path):
    """perturb (headerless TSV) -> aggregate -> estimate to CSV, GeoJSON and a heatmap."""
    g = parse_domain(SMALL)
    rng = np.random.default_rng(5)
    lat, lon = g.centres()
    cells = rng.integers(0, g.size, 3000)
    _gowalla_like(tmp_path / "c.tsv.gz", list(zip(lat[cells], lon[cells])) + [(41.0, -74.0)])
    proc = run_cli(tmp_path, "perturb", "c.tsv.gz", "--no-header", "--column", "3,4", "--domain", SMALL,
                   "--mechanism", "planar-geometric(eps=1.0)", "--outside", "drop", "--seed", "0",
                   "--out", "r.parquet")
    assert proc.returncode == 0, proc.stderr
    assert "dropped 1 of 3,001 points outside the grid (c.tsv.gz)" in proc.stderr
    proc = run_cli(tmp_path, "aggregate", "r.parquet", "--domain", SMALL, "--out", "counts.csv")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli(tmp_path, "estimate", "counts.csv", "--domain", SMALL, "--estimator", "ibu",
                   "--out", "est.geojson", "--plot", "map.png", "--ci", "0.9")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "est.geojson").read_text())
    assert len(doc["features"]) == g.size
    assert sum(f["properties"]["share"] for f in doc["features"]) == pytest.approx(1.0)
    assert (tmp_path / "map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    proc = run_cli(tmp_path, "estimate", "counts.csv", "--domain", SMALL, "--estimator", "ibu", "--out", "est.csv")
    assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(tmp_path / "est.csv")
    np.testing.assert_allclose(df["lat"], lat, rtol=0, atol=1e-12)
    np.testing.assert_allclose(df["lon"], lon, rtol=0, atol=1e-12)
    # GeoJSON of a non-grid estimate: refused in one line before any work, nothing written
    proc = run_cli(tmp_path, "estimate", "counts.csv", "--domain", "0..15", "--out", "x.geojson")
    assert "GeoJSON needs a planar grid domain" in one_error_line(proc)
    assert not (tmp_path / "x.geojson").exists()


# --------------------------------------------------------------------------------------------
# --plot: a heatmap with lat/lon axes
# --------------------------------------------------------------------------------------------
def _captured_figures(monkeypatch):
    import localpriv.inference.plotting as plotting
    seen = []
    original = plotting.save

    def capture(fig, path):
        seen.append([(ax.get_xlabel(), ax.get_ylabel(), ax.get_xlim(), ax.get_ylim(),
                      [type(c).__name__ for c in ax.collections],
                      [c.get_array().size for c in ax.collections if type(c).__name__ == "QuadMesh"])
                     for ax in fig.axes])
        return original(fig, path)
    monkeypatch.setattr(plotting, "save", capture)
    return plotting, seen


def test_grid_plot_is_a_lat_lon_heatmap(small_estimate, tmp_path, monkeypatch):
    g, _, est = small_estimate
    plotting, seen = _captured_figures(monkeypatch)
    out = plotting.estimate_figure(est, tmp_path / "map.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lat_e, lon_e = g.edges()
    axes = seen[0]
    maps = [a for a in axes if "longitude" in a[0]]
    bars = [a for a in axes if a not in maps]  # the colour bars (their label is on the y axis)
    assert len(maps) == 1 and len(bars) == 1
    xlabel, ylabel, xlim, ylim, _, sizes = maps[0]
    assert "longitude" in xlabel and "latitude" in ylabel
    assert xlim == pytest.approx((lon_e[0], lon_e[-1])) and ylim == pytest.approx((lat_e[0], lat_e[-1]))
    assert sizes == [g.size]
    assert "estimated share of users per cell" in bars[0][1]  # the colour bar's label
    # with intervals: a second map of their widths
    plotting.estimate_figure(est, tmp_path / "map-ci.png", level=0.9)
    axes = seen[1]
    labels = [a[1] for a in axes if "longitude" not in a[0]]
    assert sum("longitude" in a[0] and "latitude" in a[1] and a[5] == [g.size] for a in axes) == 2
    assert any("share of users" in lab for lab in labels) and any("width of the 90% interval" in lab for lab in labels)


def test_non_grid_plot_is_not_a_heatmap(tmp_path, monkeypatch):
    plotting, seen = _captured_figures(monkeypatch)
    est = Estimate(np.full(10, 0.1), parse_domain("0..9"), "ibu", n=10)
    plotting.estimate_figure(est, tmp_path / "line.png")
    (xlabel, ylabel, *_rest), = seen[0]
    assert (xlabel, ylabel) == ("value", "probability per cell")
    assert "QuadMesh" not in seen[0][0][4]
