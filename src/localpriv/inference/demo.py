"""The main job end to end (``localpriv demo``, ``make demo``): the ages of UCI Adult under k-RR,
estimated by INV-N, INV-P and IBU.

Values -> reports (:func:`localpriv.data.reports.perturb`) -> counts
(:func:`localpriv.data.aggregate.aggregate`) -> estimates (:func:`localpriv.inference.estimate`),
on the Adult ages bundled with the package, so it runs wherever the library is installed.
:func:`run_demo` writes ``OUT/demo.json`` (the parameters, the seed and every number) and
``OUT/demo.png`` (the distributions).
"""
from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from localpriv.data.aggregate import aggregate
from localpriv.data.datasets import adult_ages
from localpriv.data.formats import atomic_output
from localpriv.data.reports import perturb
from localpriv.domains import IntegerDomain
from localpriv.inference import estimate
from localpriv.inference.metrics import emd_line
from localpriv.inference.plotting import distributions_figure
from localpriv.utils.jsonable import to_jsonable
from localpriv.utils.optional import available

__all__ = ["DEMO_DEFAULTS", "DEMO_DESCRIPTION", "DEMO_REFERENCE", "compute_demo", "plot_demo", "run_demo"]

DEMO_DESCRIPTION = "Ages of the 48,842 persons of UCI Adult, k-RR eps=2, INV-N / INV-P / IBU"
DEMO_REFERENCE = "seed 001 sections 3.2 and 7"
#: the demo's parameters; IBU is pinned to plain EM with seed 001 Algorithm 1's rule (the library's
#: default before EMS became the default), so the demo's numbers do not move with the library's defaults
DEMO_DEFAULTS: dict[str, Any] = {
    "mechanism": "krr(k=100,eps=2.0)", "lo": 0, "hi": 99,
    "estimators": ["inv-n", "inv-p", "ibu"],
    "settings": {"ibu": {"accelerate": "none", "stop": "loglik", "delta": 1e-6, "max_iter": 10_000}},
}

#: ``progress(items, "label")`` yields the items (a progress display may count them)
ProgressFn = Callable[..., Iterable]


def _silent(iterable: Iterable, description: str = "", total: int | None = None) -> Iterable:
    return iterable


def compute_demo(params: dict, rng: np.random.Generator, progress: ProgressFn = _silent) -> dict:
    """Perturb every Adult age, aggregate the reports and estimate the distribution.

    Parameters
    ----------
    params : dict
        :data:`DEMO_DEFAULTS` or a variant: ``mechanism`` spec, domain ``lo..hi``, ``estimators``
        and their ``settings``.
    rng : numpy.random.Generator
        Source of randomness of the reports.
    progress : callable
        ``progress(items, "label")`` over the estimators.

    Returns
    -------
    dict
        ``truth``, ``noisy`` (the reports' histogram), ``estimates`` and ``details`` per estimator,
        ``emd`` to the truth of each, and ``n``.
    """
    domain = IntegerDomain(params["lo"], params["hi"])
    ages = adult_ages()
    x = domain.encode(ages)
    truth = np.bincount(x, minlength=domain.size) / x.size
    table = perturb(ages, params["mechanism"], rng, domain)          # values -> reports
    obs = aggregate(table, domain)                  # reports -> counts (DuckDB where installed, else NumPy)
    noisy = obs.blocks[0].count_vector() / obs.n
    out: dict[str, Any] = {"truth": truth, "noisy": noisy, "emd": {"noisy": emd_line(truth, noisy)}, "estimates": {}}
    for name in progress(params["estimators"], "estimators"):
        est = estimate(obs, name, **params.get("settings", {}).get(name, {}))  # counts -> estimate
        out["estimates"][name] = est.distribution
        out["emd"][name] = emd_line(truth, est.distribution)
        out.setdefault("details", {})[name] = est.summary()
    out["n"] = int(x.size)
    return out


def plot_demo(results: dict, params: dict, path: Path) -> None:
    """Draw the true, noisy and estimated distributions of :func:`compute_demo` to ``path`` (PNG).

    Parameters
    ----------
    results : dict
        What :func:`compute_demo` returned.
    params : dict
        Its parameters.
    path : pathlib.Path
        The figure's file.
    """
    domain = IntegerDomain(params["lo"], params["hi"])
    series = {"truth": results["truth"], "noisy": results["noisy"], **results["estimates"]}
    notes = {k: f"EMD to truth {results['emd'][k]:.3f} years" for k in results["emd"]}
    distributions_figure(domain.labels, {k: np.asarray(v) for k, v in series.items()}, path,
                         title=f"UCI Adult ages (n={results['n']}) under {params['mechanism']}",
                         xlabel="age (years)", notes=notes)


def run_demo(out: str | Path, seed: int = 0, progress: ProgressFn = _silent) -> dict:
    """Run the demo with ``numpy.random.default_rng(seed)``; write ``out/demo.json`` and ``out/demo.png``
    (the figure only where matplotlib, the optional group ``plots``, is installed: the numbers are
    the same without it).

    Parameters
    ----------
    out : str or pathlib.Path
        Output folder (created if missing).
    seed : int
        Seed of the generator: the same seed gives the same numbers.
    progress : callable
        ``progress(items, "label")`` over the estimators.

    Returns
    -------
    dict
        The record written to ``demo.json``: ``name``, ``description``, ``reference``, ``params``,
        ``seed``, ``quick``, ``elapsed_seconds``, ``machine`` and ``results``
        (:func:`compute_demo`).
    """
    params = dict(DEMO_DEFAULTS)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    results = compute_demo(params, rng, progress)
    elapsed = time.perf_counter() - t0
    record = {
        "name": "demo",
        "description": DEMO_DESCRIPTION,
        "reference": DEMO_REFERENCE,
        "params": params,
        "seed": seed,
        "quick": False,
        "elapsed_seconds": round(elapsed, 3),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "results": results,
    }
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_output(out / "demo.json") as tmp:
        tmp.write_text(json.dumps(to_jsonable(record), indent=1))
    if available("matplotlib"):
        plot_demo(results, params, out / "demo.png")
    return record
