"""Figures that show what is known: ordered estimates at the resolution the data support (merged
cells with joint (Bonferroni) intervals, mean and median with theirs), grids masked where the interval
includes 0 (PNG and an interactive Leaflet map), and the map in a real headless browser."""
from __future__ import annotations

import json
import os
import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from localpriv import LocalPrivError, aggregate, estimate, parse_domain
from localpriv.cli.main import app
from localpriv.data.reports import perturb
from localpriv.inference import plotting
from localpriv.inference.estimate import Estimate
from localpriv.inference.resolution import MAP_MAX_CELLS, MERGE_MAX_CELLS, merge_cells, range_intervals

GRID = "bbox(40.70,-74.02,40.73,-73.98,1)"  # 4 x 4 cells of 1 km
CHROMIUM = "/usr/bin/chromium"
#: Debian's libjs-leaflet (installed with chromium by `make browser`): the map's Leaflet, offline
LEAFLET = Path("/usr/share/javascript/leaflet")


@pytest.fixture(scope="module")
def ages():
    """An EMS estimate of ages 0..59 from 30,000 geometric reports (fixed seeds)."""
    d = parse_domain("0..59")
    rng = np.random.default_rng(21)
    x = np.clip(rng.normal(30, 8, 30_000).round(), 0, 59).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate(aggregate(perturb(x, "geometric(eps=0.5)", np.random.default_rng(22), d), d))
        est.uncertainty()
    return est


@pytest.fixture(scope="module")
def grid_est():
    """An IBU estimate on a 4 x 4 grid: 60 % of 3,000 users in cell 5, the rest uniform."""
    g = parse_domain(GRID)
    rng = np.random.default_rng(11)
    cells = np.where(rng.random(3_000) < 0.6, 5, rng.integers(0, g.size, 3_000))
    reports = perturb(g.decode(cells), "planar-geometric(eps=1.0)", np.random.default_rng(12), g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate(aggregate(reports, g), "ibu")
        est.ci(0.95)
    return est


def _capture(monkeypatch):
    """The figures handed to plotting.save (kept open; closed at the end of the test)."""
    figs = []
    original = plotting.save

    def keep(fig, path):
        figs.append(fig)
        return Path(path)

    monkeypatch.setattr(plotting, "save", keep)
    return figs, original


# --------------------------------------------------------------------------------------------
# merged cells
# --------------------------------------------------------------------------------------------
def test_merged_bins_partition_the_domain_and_are_informative(ages):
    bins = merge_cells(ages, 0.95)
    k = ages.distribution.size
    assert bins.start[0] == 0 and bins.stop[-1] == k
    np.testing.assert_array_equal(bins.start[1:], bins.stop[:-1])
    assert (bins.widths >= 1).all()
    assert bins.informative[:-1].all()  # only a remainder at the end may fail the rule
    ok = bins.informative
    assert ((bins.upper - bins.lower)[ok] < bins.mass[ok]).all()
    assert (bins.lower <= bins.mass).all() and (bins.mass <= bins.upper).all()
    assert bins.bin_level == pytest.approx(1 - 0.05 / bins.size)
    assert 1 < bins.size < k  # this data set supports some resolution, not every cell
    # the masses are the estimate's sums over the bins
    sums = np.add.reduceat(ages.distribution, bins.start)
    np.testing.assert_allclose(bins.mass, sums, rtol=1e-12, atol=1e-15)


def test_more_reports_support_finer_bins():
    d = parse_domain("0..29")
    rng = np.random.default_rng(3)
    sizes = []
    for n in (2_000, 200_000):
        x = np.clip(rng.normal(15, 5, n).round(), 0, 29).astype(int)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = estimate(aggregate(perturb(x, "krr(eps=1.0)", np.random.default_rng(n), d), d), "ibu")
        sizes.append(merge_cells(est, 0.9).size)
    assert sizes[0] < sizes[1]


@settings(max_examples=15, deadline=None)
@given(a=st.integers(0, 58), w=st.integers(1, 20), level=st.floats(0.5, 0.999))
def test_range_intervals_contain_the_mass(ages, a, w, level):
    b = min(60, a + w)
    mass, lo, hi = range_intervals(ages.uncertainty(), ages.distribution, np.array([a]), np.array([b]), level)
    assert 0.0 <= lo[0] <= mass[0] <= hi[0] <= 1.0
    assert mass[0] == pytest.approx(ages.distribution[a:b].sum(), rel=1e-12, abs=1e-15)


def test_merging_refuses_past_its_bound():
    k = MERGE_MAX_CELLS + 1
    est = Estimate(np.full(k, 1.0 / k), parse_domain(f"0..{k - 1}"), "ibu", n=10)
    with pytest.raises(LocalPrivError, match="MERGE_MAX_CELLS") as exc:
        merge_cells(est)
    assert "\n" not in str(exc.value)


# --------------------------------------------------------------------------------------------
# the ordered figure
# --------------------------------------------------------------------------------------------
def test_ordered_figure_shows_merged_intervals_and_the_statistics(ages, monkeypatch, tmp_path):
    figs, original = _capture(monkeypatch)
    plotting.estimate_figure(ages, tmp_path / "a.png", xlabel="age (years)")
    fig = figs[0]
    main, stats = fig.axes
    assert main.get_xlabel() == "age (years)" and main.get_ylabel() == "probability per cell"
    labels = [t.get_text() for t in main.get_legend().get_texts()]
    bins = merge_cells(ages, 0.95)
    assert any(f"95% joint (Bonferroni) intervals, {bins.size} bins of merged cells" in t for t in labels), labels
    # one interval box and one estimate segment per informative bin, spanning the bin's cells
    boxes = [p for c in main.containers for p in c.patches]
    assert len(boxes) == bins.size
    lefts = sorted(round(p.get_x(), 9) for p in boxes)
    np.testing.assert_allclose(lefts, bins.start - 0.5)
    segments = [c for c in main.collections if type(c).__name__ == "LineCollection"]
    assert sum(len(c.get_segments()) for c in segments) == int(bins.informative.sum())
    # above: mean and median at 95 %, their values written beside their intervals
    assert [t.get_text() for t in stats.get_yticklabels()] == ["mean (95%)", "median (95%)"]
    ivs = ages.statistics(["mean", "median"], 0.95)
    texts = [t.get_text() for t in stats.texts]
    for iv in ivs.values():
        assert any(t.startswith(f"{iv.value:.4g} [") for t in texts), texts
    out = original(fig, tmp_path / "a.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ordered_figure_without_observations_is_the_estimate_alone(monkeypatch, tmp_path):
    figs, original = _capture(monkeypatch)
    est = Estimate(np.full(10, 0.1), parse_domain("0..9"), "ibu", n=10)
    plotting.estimate_figure(est, tmp_path / "line.png")
    (ax,) = figs[0].axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("value", "probability per cell")
    assert not ax.containers
    original(figs[0], tmp_path / "line.png")


def test_label_figure_has_bars_with_their_intervals(monkeypatch, tmp_path):
    d = parse_domain("a,b,c,d")
    x = np.array(list("abcd"))[np.random.default_rng(8).integers(0, 4, 3_000)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimate(aggregate(perturb(x, "krr(eps=2.0)", np.random.default_rng(9), d), d))
    figs, original = _capture(monkeypatch)
    plotting.estimate_figure(est, tmp_path / "c.png", level=0.9, xlabel="letter")
    (ax,) = figs[0].axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c", "d"]
    assert len(ax.patches) == 4 and ax.get_xlabel() == "letter"
    assert any(t.get_text().startswith("90% intervals") for t in ax.get_legend().get_texts())
    original(figs[0], tmp_path / "c.png")


# --------------------------------------------------------------------------------------------
# grids: the PNG and the interactive map
# --------------------------------------------------------------------------------------------
def test_grid_figure_masks_cells_whose_interval_includes_zero(grid_est, monkeypatch, tmp_path):
    figs, original = _capture(monkeypatch)
    plotting.estimate_figure(grid_est, tmp_path / "g.png")
    fig = figs[0]
    lo, _ = grid_est.ci(0.95)
    masked = int((lo <= 0).sum())
    assert 0 < masked < lo.size
    mesh = next(c for c in fig.axes[0].collections if type(c).__name__ == "QuadMesh")
    arr = mesh.get_array()
    assert int(np.ma.count_masked(arr)) == masked
    assert mesh.norm.vmin == 0.0 and type(mesh.norm).__name__ == "Normalize"  # linear from 0
    assert mesh.cmap.name == "YlOrRd"
    assert f"{masked} of {lo.size} cells left blank: their 95% interval includes 0" in fig._suptitle.get_text()
    original(fig, tmp_path / "g.png")


def _features(page: str) -> list[dict]:
    """The GeoJSON features folium put in the page (the estimate's layer)."""
    m = re.search(r'_add\((\{"features": .*?\})\);\n', page)
    assert m, "no GeoJSON layer in the page"
    return json.loads(m.group(1))["features"]


def test_html_map_has_a_leaflet_div_and_leaves_out_the_masked_cells(grid_est, tmp_path):
    out = plotting.grid_map_html(grid_est, tmp_path / "g.html")
    page = out.read_text()
    lo, _ = grid_est.ci(0.95)
    masked = int((lo <= 0).sum())
    assert re.search(r'<div class="folium-map" id="map_[0-9a-f]+"', page)
    assert f'data-masked-cells="{masked}"' in page and f"{masked:,} cells left out" in page
    feats = _features(page)
    assert len(feats) == lo.size - masked
    assert {f["properties"]["cell"] for f in feats} == set(np.flatnonzero(lo > 0).tolist())
    assert all(f["properties"]["lower"] > 0 for f in feats)


def test_html_map_refuses_past_its_bound(monkeypatch, grid_est, tmp_path):
    monkeypatch.setattr(plotting, "MAP_MAX_CELLS", 15)
    with pytest.raises(LocalPrivError, match="MAP_MAX_CELLS") as exc:
        plotting.grid_map_html(grid_est, tmp_path / "g.html")
    assert "\n" not in str(exc.value) and not (tmp_path / "g.html").exists()
    assert MAP_MAX_CELLS >= 10_000


def test_cli_plot_on_a_grid_writes_the_map_beside_the_png(grid_est, tmp_path):
    grid_est.observations.save(tmp_path / "counts.csv")
    res = CliRunner().invoke(app, ["estimate", str(tmp_path / "counts.csv"), "-d", GRID, "-e", "ibu",
                                   "--plot", str(tmp_path / "map.png")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 'class="folium-map"' in (tmp_path / "map.html").read_text()
    assert "its map ->" in res.output


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
           "--disable-background-networking", "--disable-component-update", "--hide-scrollbars",
           "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing leaves the machine: no tiles, no CDN
           "--allow-file-access-from-files", f"--user-data-dir={profile}", "--window-size=900,700",
           "--virtual-time-budget=3000", *args]
    return subprocess.run(cmd, capture_output=True, timeout=120)


def test_html_map_in_headless_chromium(grid_est, tmp_path):
    """The map page in a real browser, with Debian's Leaflet in place of the CDN's (the test runs
    offline): Leaflet draws one SVG path per shown cell (and the grid's outline), the legend is
    text in the page, and the screenshot has the cells' colours."""
    assert os.path.exists(CHROMIUM), "chromium is missing: run `make browser` (the test target installs it)"
    assert (LEAFLET / "leaflet.js").is_file(), "libjs-leaflet is missing: run `make browser`"
    from PIL import Image
    page = plotting.grid_map_html(grid_est, tmp_path / "g.html").read_text()
    local = re.sub(r"https://[^\"']*/leaflet@[^\"']*/dist/leaflet\.(js|css)",
                   lambda m: (LEAFLET / f"leaflet.{m.group(1)}").as_uri(), page)
    assert local != page
    (tmp_path / "local.html").write_text(local)
    url = (tmp_path / "local.html").as_uri()
    dom = _chromium(["--dump-dom", url], tmp_path / "p1").stdout.decode()
    lo, _ = grid_est.ci(0.95)
    shown = int((lo > 0).sum())
    assert "leaflet-container" in dom  # Leaflet ran and took the map div
    assert dom.count("<path ") == shown + 1
    assert f"{lo.size - shown:,} cells left out: their 95% interval includes 0." in dom
    shot = tmp_path / "map.png"
    res = _chromium([f"--screenshot={shot}", url], tmp_path / "p2")
    assert shot.exists(), res.stderr.decode(errors="replace")[-2000:]
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert img.std() > 10
    r, b = img[..., 0], img[..., 2]
    warm = (r > 120) & (r - b > 40)  # the YlOrRd cells over the grey (tile-less) map
    assert warm.sum() > 2000, warm.sum()


# --------------------------------------------------------------------------------------------
# the service's dashboard: the policy as a table, the value axis named after the collection
# --------------------------------------------------------------------------------------------
def test_dashboard_shows_the_policy_as_a_table(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from localpriv.service.app import create_app
    from localpriv.service.core import Collector
    from localpriv.service.storage import open_store
    admin = "figures-admin-token-0123456789"
    collector = Collector(open_store(str(tmp_path / "d.sqlite")), admin, estimate_wait=300)
    try:
        tc = TestClient(create_app(collector))
        r = tc.post("/v1/collections", headers={"Authorization": f"Bearer {admin}"}, json={
            "name": "ages", "domain": "0..9", "policy": {"mechanisms": ["krr", "oue"], "max_eps": 2.0}})
        assert r.status_code == 201, r.text
        page = tc.get("/dashboard", params={"token": admin}).text
        table = re.search(r'<table class="policy">(.*?)</table>', page, flags=re.S)
        assert table, page
        rows = dict(re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", table.group(1)))
        assert rows == {"allowed mechanisms": "krr, oue", "largest LDP level ε": "2.0",
                        "smallest LDP level ε": "0.0", "largest geo-indistinguishability level ε": "none"}
        assert '{"mechanisms"' not in page and "&quot;mechanisms&quot;" not in page
    finally:
        collector.store.close()


def test_service_figure_names_the_value_axis_after_the_collection(monkeypatch):
    from localpriv.service.core import compute_estimate
    d = parse_domain("0..9")
    x = np.random.default_rng(5).binomial(9, 0.4, 2_000)
    obs = aggregate(perturb(x, "krr(eps=2.0)", np.random.default_rng(6), d), d)
    seen = []
    original = plotting.save

    def keep(fig, path):
        seen.append(fig.axes[0].get_xlabel())
        return original(fig, path)

    monkeypatch.setattr(plotting, "save", keep)
    out = compute_estimate(obs, "ems", {}, 0.95, (), {"collection": "age_years", "counts_version": 1},
                           "{estimator} from {n} reports")
    assert out["figure"][:8] == b"\x89PNG\r\n\x1a\n"
    assert seen == ["age_years"]
