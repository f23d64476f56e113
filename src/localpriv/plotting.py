"""Figures (matplotlib, headless Agg backend)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["plt", "distributions_figure", "estimate_figure", "save"]


def save(fig, path) -> Path:
    """Save ``fig`` as PNG (or the extension's format) atomically: nothing appears at ``path``
    unless the whole image was written (:func:`localpriv.formats.atomic_output`)."""
    from .formats import atomic_output

    path = Path(path)
    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, dpi=120, bbox_inches="tight", format=path.suffix.lstrip(".") or "png")
    finally:
        plt.close(fig)
    return path


def distributions_figure(labels, series: dict[str, np.ndarray], path, title: str = "",
                         xlabel: str = "value", notes: dict[str, str] | None = None) -> Path:
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


def estimate_figure(est, path, level: float | None = None, title: str = "") -> Path:
    """An estimate as bars (labels) or a line (ordered values), with its ``level`` confidence
    intervals as error bars (labels) or a band (ordered values)."""
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
    ax.set_xlabel("value")
    ax.set_ylabel("probability")
    ax.legend(fontsize=8)
    ax.set_title(title or f"{est.estimator} estimate from {int(est.n)} reports", fontsize=10)
    fig.tight_layout()
    return save(fig, path)

