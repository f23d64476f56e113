"""A mechanism's analysis as ``localpriv analyze`` prints it: :func:`localpriv.analysis.analyze_report`
and, on request, the consistency report of seed 001 section 6 with its empirical convergence study
(and a log-log figure of the error against ``n``)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from localpriv.analysis import analyze_report
from localpriv.analysis.consistency import consistency_report
from localpriv.data.formats import atomic_output
from localpriv.domains import Domain
from localpriv.inference.plotting import pyplot
from localpriv.mechanisms import Mechanism

__all__ = ["analyze_mechanism", "plot_convergence"]

#: the keys of the convergence study kept in the report
STUDY_KEYS = ("n", "mse", "mse_se", "runs", "slope", "slope_se", "not_converged", "asymptotic_error")


def analyze_mechanism(mech: Mechanism, domain: Domain | None = None, *, consistency: bool = False,
                      runs: int = 20, seed: int = 0, plot: str | Path | None = None,
                      stage: Callable[[str], None] | None = None) -> dict:
    """:func:`analyze_report` of ``mech``; with ``consistency``, also the consistency verdict and
    the convergence study (``runs`` data sets per ``n``, seeded by ``seed``), drawn to ``plot``
    when given and the study has data (the report then names the plot)."""
    report = analyze_report(mech, domain=domain)
    if consistency:
        if stage is not None:
            stage(f"consistency study of {mech} ({runs} data sets per n)")
        cons = consistency_report(mech, runs=runs, rng=np.random.default_rng(seed))
        study = cons.get("convergence", {})
        report["consistency verdict"] = cons["verdict"]
        if study:
            report["convergence study"] = {key: study[key] for key in study if key in STUDY_KEYS}
        if plot and study:
            plot_convergence(study, plot, str(mech))
            report["convergence plot"] = str(plot)
    return report


def plot_convergence(study: dict, path: str | Path, title: str) -> Path:
    """The convergence study as a log-log PNG: IBU's mean squared error (±2 SE) against ``n``,
    with a slope -1 guide; written atomically."""
    plt = pyplot()  # matplotlib (the optional group 'plots'), or one line naming it
    n = np.asarray(study["n"], dtype=float)
    mse = np.asarray(study["mse"], dtype=float)
    se = np.asarray(study.get("mse_se", np.zeros_like(mse)), dtype=float)
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.errorbar(n, mse, yerr=2 * se, marker="o", capsize=3, label="IBU, mean squared error (±2 SE)")
    ax.plot(n, mse[0] * n[0] / n, "--", color="grey", label="slope -1")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (reports)")
    ax.set_ylabel("||theta_hat - theta||^2")
    slope = study.get("slope")
    ax.set_title(f"{title}" + (f"\nfitted slope {slope:.2f}" if slope is not None else ""), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    try:
        with atomic_output(path) as tmp:
            fig.savefig(tmp, dpi=120, bbox_inches="tight", format=path.suffix.lstrip(".") or "png")
    finally:
        plt.close(fig)
    return path
