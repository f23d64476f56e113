"""Figures (matplotlib, headless Agg backend).

matplotlib is the optional group ``plots``: without it this module still imports, and every
figure function stops with one line naming the group (:func:`pyplot`) before anything is written.
"""
from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from localpriv.data.formats import StrPath, atomic_output
from localpriv.domains.grid import GridDomain
from localpriv.inference.geo_export import estimate_geojson
from localpriv.inference.resolution import (
    MAP_MAX_CELLS,
    MERGE_MAX_CELLS,
    cell_edges,
    indistinguishable_from_zero,
    merge_cells,
)
from localpriv.utils.interval import check_level
from localpriv.utils.optional import available, require
from localpriv.utils.validation import LocalPrivError

if TYPE_CHECKING or available("matplotlib"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from localpriv.inference.estimate import Estimate

__all__ = ["plt", "pyplot", "PLOTS_HINT", "distributions_figure", "estimate_figure",
           "grid_figure", "grid_map_html", "grid_mask",
           "ordered_figure", "save", "MAP_MAX_CELLS"]


#: how to get a figure where matplotlib is missing (one line, printed by the demo)
PLOTS_HINT = ("pip install 'localpriv[plots]' (from a clone: pip install -e '.[plots]', or "
              "pip install -c requirements.lock -r requirements-plots.lock)")


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend, or a one-line :class:`LocalPrivError` naming the
    optional group ``plots`` where matplotlib is not installed."""
    require("matplotlib")
    return plt


def save(fig: Figure, path: StrPath) -> Path:
    """Save ``fig`` as PNG (or the extension's format) atomically: nothing appears at ``path``
    unless the whole image was written (:func:`localpriv.data.formats.atomic_output`)."""

    path = Path(path)
    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, dpi=120, bbox_inches="tight", format=path.suffix.lstrip(".") or "png")
    finally:
        plt.close(fig)
    return path


def distributions_figure(labels: npt.ArrayLike, series: Mapping[str, np.ndarray], path: StrPath,
                         title: str = "", xlabel: str = "value", notes: dict[str, str] | None = None) -> Path:
    """One panel per series (truth, noisy, estimates ...), sharing axes; ``notes`` go in titles."""
    pyplot()  # matplotlib, or one line naming the group 'plots'
    n = len(series)
    fig, axes = plt.subplots(n, 1, figsize=(9, 1.9 * n + 0.6), sharex=True, sharey=True)
    axes = np.atleast_1d(axes)
    x = np.asarray(labels)
    numeric = x.dtype.kind in "iuf"
    pos = x if numeric else np.arange(x.size)
    for ax, (name, dist) in zip(axes, series.items()):
        ax.bar(pos, dist, width=1.0 if numeric else 0.8, color="tab:blue" if name != "truth" else "tab:gray")
        label = name + (f"  ({notes[name]})" if notes and name in notes else "")
        ax.set_title(label, fontsize=9, loc="left")
        ax.set_ylabel("probability", fontsize=8)
    if not numeric:
        axes[-1].set_xticks(pos, [str(v) for v in x], rotation=90, fontsize=6)
    axes[-1].set_xlabel(xlabel)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save(fig, path)


def _has_intervals(est: Estimate) -> bool:
    """Whether the estimate carries what its intervals are computed from (its observations)."""
    return getattr(est, "observations", None) is not None


def estimate_figure(est: Estimate, path: StrPath, level: float | None = None, title: str = "",
                    xlabel: str | None = None) -> Path:
    """An estimate with what is known about it.

    Ordered numeric domains (``LO..HI``, ``interval(...)``): :func:`ordered_figure`, the estimate
    with joint (Bonferroni) intervals over adjacent cells merged to the resolution the data support, above
    the mean and the median with their intervals (at ``level``, default 0.95). Planar grids:
    :func:`grid_figure`. Labels: bars with their ``level`` intervals as error bars (none without
    ``level``). An estimate without its observations is drawn alone. ``xlabel``: the axis label,
    the column and its unit (``"age (years)"``; default ``"value"``).
    """
    pyplot()  # matplotlib, or one line naming the group 'plots'
    if callable(getattr(est.domain, "edges", None)):
        return grid_figure(est, path, level=level, title=title)
    x = np.asarray(est.labels)
    if x.dtype.kind in "iuf" and getattr(est.domain, "columns", 1) == 1:
        return ordered_figure(est, path, level=0.95 if level is None else level, title=title, xlabel=xlabel)
    pos = np.arange(x.size)
    fig, ax = plt.subplots(figsize=(9, 3.2))
    p = est.distribution
    ax.bar(pos, p, width=0.8, color="tab:blue", label=est.estimator)
    if level is not None and _has_intervals(est):
        lo, hi = est.ci(level)
        ax.errorbar(pos, p, yerr=[p - lo, hi - p], fmt="none", ecolor="black", capsize=2, lw=0.8,
                    label=f"{level:.0%} intervals ({est.uncertainty().method})")
    ax.set_xticks(pos, [str(v) for v in x], rotation=90, fontsize=6)
    ax.set_xlabel(xlabel or "value")
    ax.set_ylabel("probability")
    ax.legend(fontsize=8)
    ax.set_title(title or f"{est.estimator} estimate from {int(est.n)} reports", fontsize=10)
    fig.tight_layout()
    return save(fig, path)


def ordered_figure(est: Estimate, path: StrPath, level: float = 0.95, title: str = "",
                   xlabel: str | None = None) -> Path:
    """An estimate on an ordered domain at the resolution its data support, with its statistics.

    Main panel: the estimate of every cell (a thin line) and, over bins of adjacent cells merged
    until each bin's interval is narrower than its mass (:func:`localpriv.inference.resolution.merge_cells`),
    the bin's estimate and its interval, both as probability per cell (the bin's mass divided by
    its number of cells, so that bins of any width share the axis). The bins' intervals are at
    the Bonferroni level that aims at ``level`` jointly over the bins; a remainder that no merging makes
    informative is drawn grey. On domains of more than
    :data:`~localpriv.inference.resolution.MERGE_MAX_CELLS` cells the band is the cells' own
    pointwise intervals, and the legend says so. Panel above it, on the same value axis: the mean
    and the median with their ``level`` intervals (:meth:`Estimate.statistics`). Without
    observations, the estimate alone. The estimate's axes are the figure's first.
    """
    pyplot()  # matplotlib, or one line naming the group 'plots'
    x = np.asarray(est.labels, dtype=float)
    p = np.asarray(est.distribution, dtype=float)
    edges = cell_edges(est.domain, x)
    known = _has_intervals(est)
    fig = plt.figure(figsize=(9, 4.8 if known else 3.4))
    grid = fig.add_gridspec(2, 1, height_ratios=[1.0, 3.2]) if known else fig.add_gridspec(1, 1)
    ax = fig.add_subplot(grid[-1])  # the estimate: the figure's first axes, with the value axis' label
    ax.stairs(p, edges, color="tab:blue", lw=0.8, alpha=0.6, label=f"{est.estimator} estimate per cell")
    if known and p.size <= MERGE_MAX_CELLS:
        bins = merge_cells(est, level)
        left, right = edges[bins.start], edges[bins.stop]
        per = bins.widths.astype(float)
        good = bins.informative
        ax.bar(left[good], ((bins.upper - bins.lower) / per)[good], bottom=(bins.lower / per)[good],
               width=(right - left)[good], align="edge", color="tab:blue", alpha=0.25, lw=0,
               label=f"{level:.0%} joint (Bonferroni) intervals, {bins.size} bins of merged cells ({bins.method})")
        ax.hlines((bins.mass / per)[good], left[good], right[good], color="navy", lw=1.6,
                  label="estimate per bin (probability per cell)")
        if (~good).any():
            ax.bar(left[~good], ((bins.upper - bins.lower) / per)[~good], bottom=(bins.lower / per)[~good],
                   width=(right - left)[~good], align="edge", color="0.85", edgecolor="0.65", lw=0,
                   hatch="///", label="interval of the remainder: not informative even merged")
    elif known:
        lo, hi = est.ci(level)
        ax.fill_between(edges, np.append(lo, lo[-1]), np.append(hi, hi[-1]), step="post", color="tab:blue",
                        alpha=0.25, label=f"{level:.0%} pointwise intervals ({est.uncertainty().method}; "
                                          f"over {MERGE_MAX_CELLS:,} cells: not merged)")
    ax.set_ylabel("probability per cell")
    ax.set_ylim(bottom=0.0)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel(xlabel or "value")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncol=2, frameon=False)
    fig.suptitle(title or f"{est.estimator} estimate from {int(est.n):,} reports", fontsize=10)
    if known:  # above it, on the same value axis: the statistics with their intervals
        low = fig.add_subplot(grid[0], sharex=ax)
        ivs = est.statistics(["mean", "median"], level)
        names = list(ivs)
        for row, name in enumerate(names):
            iv = ivs[name]
            low.errorbar([iv.value], [row], xerr=[[iv.value - iv.lower], [iv.upper - iv.value]], fmt="o",
                         color="black", ms=4, capsize=3, lw=1.2)
            low.annotate(f"{iv.value:.4g} [{iv.lower:.4g}, {iv.upper:.4g}]", (iv.upper, row),
                         xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
        low.set_yticks(range(len(names)), [f"{n} ({level:.0%})" for n in names], fontsize=8)
        low.set_ylim(-0.7, len(names) - 0.3)
        low.grid(axis="x", lw=0.3, alpha=0.5)
        low.tick_params(axis="x", labelbottom=False)
    fig.tight_layout()
    return save(fig, path)


def _grid_of(est: Estimate) -> GridDomain:
    return cast(GridDomain, est.domain)  # a planar grid: it has edges()


def grid_mask(est: Estimate, level: float = 0.95) -> np.ndarray | None:
    """The cells to leave blank on a map: those whose ``level`` interval includes 0
    (:func:`localpriv.inference.resolution.indistinguishable_from_zero`); None without observations."""
    return indistinguishable_from_zero(est, level) if _has_intervals(est) else None


def grid_figure(est: Estimate, path: StrPath, level: float | None = None, title: str = "", log: bool = False,
                dynamic_range: float = 1e4) -> Path:
    """An estimate on a planar grid as a heatmap: longitude on x, latitude on y (degrees, one km
    the same length on both axes), each cell coloured by its estimated share of users, with a
    labelled colour bar.

    Cells whose interval (at ``level``, default 0.95) includes 0 are left blank: nothing
    distinguishes them from no user at all; the colour bar's label gives their number. The colour
    scale is linear from 0 (white-yellow) to the largest share (dark red), so that faint cells look
    faint. ``log=True`` colours on a log scale over ``dynamic_range`` instead (cells below
    ``max / dynamic_range`` get the lowest colour: the bar's arrow). With ``level``, a second panel
    shows the width of each cell's interval at that level (``upper - lower``, linear scale).
    """
    pyplot()  # matplotlib, or one line naming the group 'plots'
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.ticker import MaxNLocator

    grid = _grid_of(est)
    lat_e, lon_e = grid.edges()
    shape = (grid.nrows, grid.ncols)
    share = np.asarray(est.distribution, dtype=float).reshape(shape)
    mask_level = 0.95 if level is None else level
    mask = grid_mask(est, mask_level)
    note = "" if mask is None else \
        f"\n{int(mask.sum()):,} of {mask.size:,} cells left blank: their {mask_level:.0%} interval includes 0"
    shown_share = share if mask is None else np.ma.masked_where(mask.reshape(shape), share)
    panels: list[tuple[np.ndarray, str, bool, str]] = [
        (shown_share, "estimated share of users per cell", log, "magma_r" if log else "YlOrRd")]
    if level is not None:
        lo, hi = est.ci(level)
        width = (np.asarray(hi, dtype=float) - np.asarray(lo, dtype=float)).reshape(shape)
        panels.append((width, f"width of the {level:.0%} interval per cell ({est.uncertainty().method})", False,
                       "Greys"))
    mid = 0.5 * (lat_e[0] + lat_e[-1])
    aspect = 1.0 / np.cos(np.radians(mid))  # degrees of latitude per degree of longitude, in km
    span_x, span_y = lon_e[-1] - lon_e[0], (lat_e[-1] - lat_e[0]) * aspect
    h = 5.5
    w = min(14.0, max(3.0, h * span_x / span_y) + 1.6)  # the map, and room for the colour bar
    fig, axes = plt.subplots(1, len(panels), figsize=(w * len(panels), h + 0.6), squeeze=False)
    for ax, (z, label, logscale, cmap) in zip(axes[0], panels):
        top = float(np.ma.max(z)) if np.ma.count(z) and np.isfinite(np.ma.max(z)) else 0.0
        norm: Normalize
        shown: Any
        if logscale and top > 0:
            floor = top / dynamic_range
            norm, shown, extend = LogNorm(vmin=floor, vmax=top), np.ma.maximum(z, floor), "min"
            label += " (log scale)"
        else:
            norm, shown, extend = Normalize(vmin=0.0, vmax=top if top > 0 else 1.0), z, "neither"
        mesh = ax.pcolormesh(lon_e, lat_e, shown, norm=norm, cmap=cmap, shading="flat")
        bar = fig.colorbar(mesh, ax=ax, extend=extend, fraction=0.046, pad=0.03)
        bar.set_label(label, fontsize=8)
        ax.set_facecolor("white")
        ax.set_aspect(aspect)
        ax.set_xlim(lon_e[0], lon_e[-1])
        ax.set_ylim(lat_e[0], lat_e[-1])
        ax.set_xlabel("longitude (degrees east)")
        ax.set_ylabel("latitude (degrees north)")
        ax.tick_params(labelsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(4))
    fig.suptitle((title or f"{est.estimator} estimate from {int(est.n):,} reports\n{grid.describe()}") + note,
                 fontsize=10)
    fig.tight_layout()
    return save(fig, path)


def grid_map_html(est: Estimate, path: StrPath, level: float = 0.95, title: str = "") -> Path:
    """An interactive map of an estimate on a planar grid: one HTML page (Leaflet through folium).

    The cells whose ``level`` interval excludes 0 are drawn as polygons over OpenStreetMap tiles,
    coloured on the linear scale of :func:`grid_figure` (light for small shares), each with a
    tooltip of its share and interval; cells whose interval includes 0 are left out (their number
    is in the page's legend, and in its ``data-masked-cells`` attribute). Nothing is fetched while
    writing the page: the browser that opens it loads Leaflet and the tiles.

    Raises
    ------
    LocalPrivError
        On a grid of more than :data:`MAP_MAX_CELLS` cells.
    """
    pyplot()  # matplotlib, or one line naming the group 'plots'
    import folium
    from matplotlib import colormaps
    from matplotlib.colors import Normalize, to_hex

    grid = _grid_of(est)
    if grid.size > MAP_MAX_CELLS:
        raise LocalPrivError(f"HTML map: {grid.size:,} cells is more than the limit of {MAP_MAX_CELLS:,} "
                             "(MAP_MAX_CELLS)")
    lv = check_level(level)
    known = _has_intervals(est)
    data = estimate_geojson(est, ci=lv if known else None)
    mask = grid_mask(est, lv)
    masked = np.zeros(grid.size, dtype=bool) if mask is None else mask
    share = np.asarray(est.distribution, dtype=float)
    top = float(share[~masked].max()) if (~masked).any() else 1.0
    norm, cmap = Normalize(0.0, top if top > 0 else 1.0), colormaps["YlOrRd"]
    colours = [to_hex(c) for c in cmap(norm(share))]
    features = []
    for f in data["features"]:  # one dict per cell of the page, built once (no numerics here)
        cell = int(f["properties"]["cell"])
        if masked[cell]:
            continue
        f["properties"]["colour"] = colours[cell]
        features.append(f)
    lat_e, lon_e = grid.edges()
    fmap = folium.Map(location=[float(np.mean(lat_e[[0, -1]])), float(np.mean(lon_e[[0, -1]]))],
                      tiles="OpenStreetMap", control_scale=True)
    fmap.fit_bounds([[float(lat_e[0]), float(lon_e[0])], [float(lat_e[-1]), float(lon_e[-1])]])
    fields = ["cell", "share"] + (["lower", "upper"] if known else [])
    layer = folium.GeoJson(
        {"type": "FeatureCollection", "features": features}, name="estimate",
        style_function=lambda f: {"fillColor": f["properties"]["colour"], "color": "#7f2704", "weight": 0.3,
                                  "fillOpacity": 0.65},
        tooltip=folium.GeoJsonTooltip(fields=fields, aliases=[f"{a}:" for a in fields], localize=True))
    layer.add_to(fmap)
    folium.Rectangle([[float(lat_e[0]), float(lon_e[0])], [float(lat_e[-1]), float(lon_e[-1])]],
                     color="#444444", weight=1, fill=False, dash_array="4").add_to(fmap)
    heading = html.escape(title or f"{est.estimator} estimate from {int(est.n):,} reports")
    legend = (f'<div id="localpriv-legend" data-masked-cells="{int(masked.sum())}" '
              f'data-shown-cells="{len(features)}" style="position:fixed;top:10px;right:10px;z-index:9999;'
              'background:rgba(255,255,255,.92);padding:6px 10px;font:13px sans-serif;border:1px solid #999;'
              f'max-width:360px"><b>{heading}</b><br>{html.escape(grid.describe())}<br>'
              f'{len(features):,} cells shown, coloured by estimated share of users (linear, 0 to {top:.3g}); '
              f'{int(masked.sum()):,} cells left out: their {lv:.0%} interval includes 0.</div>')
    root = cast(Any, fmap.get_root())  # the page (a branca Figure)
    root.html.add_child(folium.Element(legend))
    page = root.render()
    path = Path(path)
    with atomic_output(path) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return path
