"""Figures (matplotlib, headless Agg backend)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402

from localpriv.data.formats import StrPath, atomic_output
from localpriv.domains.grid import GridDomain

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from localpriv.inference.estimate import Estimate

__all__ = ["plt", "distributions_figure", "estimate_figure", "grid_figure", "save"]


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


def estimate_figure(est: Estimate, path: StrPath, level: float | None = None, title: str = "",
                    xlabel: str | None = None) -> Path:
    """An estimate as bars (labels) or a line (ordered values), with its ``level`` confidence
    intervals as error bars (labels) or a band (ordered values); on a planar grid, a heatmap with
    longitude and latitude axes (:func:`grid_figure`). ``xlabel``: the axis label, the column and
    its unit (``"age (years)"``; default ``"value"``)."""
    if callable(getattr(est.domain, "edges", None)):
        return grid_figure(est, path, level=level, title=title)
    x = np.asarray(est.labels)
    numeric = x.dtype.kind in "iuf" and getattr(est.domain, "columns", 1) == 1
    pos = x if numeric else np.arange(x.size)
    fig, ax = plt.subplots(figsize=(9, 3.2))
    p = est.distribution
    if level is not None:
        lo, hi = est.ci(level)
    if numeric:
        ax.step(pos, p, where="mid", color="tab:blue", label=est.estimator)
        if level is not None:
            ax.fill_between(pos, lo, hi, step="mid", color="tab:blue", alpha=0.25,
                            label=f"{level:.0%} intervals ({est.uncertainty().method})")
    else:
        ax.bar(pos, p, width=0.8, color="tab:blue", label=est.estimator)
        if level is not None:
            ax.errorbar(pos, p, yerr=[p - lo, hi - p], fmt="none", ecolor="black", capsize=2, lw=0.8,
                        label=f"{level:.0%} intervals ({est.uncertainty().method})")
        ax.set_xticks(pos, [str(v) for v in x], rotation=90, fontsize=6)
    ax.set_xlabel(xlabel or "value")
    ax.set_ylabel("probability")
    ax.legend(fontsize=8)
    ax.set_title(title or f"{est.estimator} estimate from {int(est.n)} reports", fontsize=10)
    fig.tight_layout()
    return save(fig, path)



def grid_figure(est: Estimate, path: StrPath, level: float | None = None, title: str = "", log: bool = True,
                dynamic_range: float = 1e4) -> Path:
    """An estimate on a planar grid as a heatmap: longitude on x, latitude on y (degrees, one km
    the same length on both axes), each cell coloured by its estimated share of users, with a
    labelled colour bar. ``log`` (default) colours on a log scale over ``dynamic_range`` (cells
    below ``max / dynamic_range``, empty ones included, get the lowest colour: the bar's arrow);
    ``log=False`` on a linear scale from 0. With ``level``, a second panel shows the width of
    each cell's interval at that level (``upper - lower``, linear scale)."""
    from matplotlib.colors import LogNorm, Normalize

    grid = cast(GridDomain, est.domain)  # a planar grid: it has edges()
    lat_e, lon_e = grid.edges()
    shape = (grid.nrows, grid.ncols)
    share = np.asarray(est.distribution, dtype=float).reshape(shape)
    panels = [(share, "estimated share of users per cell", log)]
    if level is not None:
        lo, hi = est.ci(level)
        width = (np.asarray(hi, dtype=float) - np.asarray(lo, dtype=float)).reshape(shape)
        panels.append((width, f"width of the {level:.0%} interval per cell ({est.uncertainty().method})", False))
    mid = 0.5 * (lat_e[0] + lat_e[-1])
    aspect = 1.0 / np.cos(np.radians(mid))  # degrees of latitude per degree of longitude, in km
    span_x, span_y = lon_e[-1] - lon_e[0], (lat_e[-1] - lat_e[0]) * aspect
    h = 5.5
    w = min(14.0, max(3.0, h * span_x / span_y) + 1.6)  # the map, and room for the colour bar
    fig, axes = plt.subplots(1, len(panels), figsize=(w * len(panels), h + 0.6), squeeze=False)
    for ax, (z, label, logscale) in zip(axes[0], panels):
        top = float(np.nanmax(z)) if np.isfinite(z).any() else 0.0
        norm: Normalize
        if logscale and top > 0:
            floor = top / dynamic_range
            norm, shown, extend = LogNorm(vmin=floor, vmax=top), np.maximum(z, floor), "min"
            label += " (log scale)"
        else:
            norm, shown, extend = Normalize(vmin=0.0, vmax=top if top > 0 else 1.0), z, "neither"
        mesh = ax.pcolormesh(lon_e, lat_e, shown, norm=norm, cmap="magma" if logscale else "viridis",
                             shading="flat")
        bar = fig.colorbar(mesh, ax=ax, extend=extend, fraction=0.046, pad=0.03)
        bar.set_label(label, fontsize=9)
        ax.set_aspect(aspect)
        ax.set_xlim(lon_e[0], lon_e[-1])
        ax.set_ylim(lat_e[0], lat_e[-1])
        ax.set_xlabel("longitude (degrees east)")
        ax.set_ylabel("latitude (degrees north)")
        ax.tick_params(labelsize=8)
    fig.suptitle(title or f"{est.estimator} estimate from {int(est.n):,} reports\n{grid.describe()}",
                 fontsize=10)
    fig.tight_layout()
    return save(fig, path)
