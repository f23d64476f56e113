"""The experiment runner: one way to run, record and plot every reproduction."""
from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from localpriv.data.formats import atomic_output
from localpriv.utils.jsonable import to_jsonable
from localpriv.utils.validation import LocalPrivError

__all__ = ["Experiment", "EXPERIMENTS", "Progress", "register_experiment", "run_experiment", "to_jsonable"]


class Progress:
    """What an experiment uses to report progress: ``for x in progress(items, "label"): ...``.

    The CLI plugs a Rich progress bar in; tests use the silent default.
    """

    def __init__(self, factory: Callable | None = None):
        self._factory = factory

    def __call__(self, iterable, description: str = "", total: int | None = None):
        if self._factory is None:
            return iterable
        return self._factory(iterable, description, total)


@dataclass
class Experiment:
    """A reproduction: configuration + compute + plot.

    ``compute(params, rng, progress) -> dict`` must return JSON-able results (NumPy arrays are
    converted). ``plot(results, params, path)`` writes the PNG. ``params["runs"]`` is the number of
    repetitions when the experiment has one (``--runs``).
    """

    name: str
    description: str
    defaults: dict[str, Any]
    compute: Callable[[dict, np.random.Generator, Progress], dict]
    plot: Callable[[dict, dict, Path], Any] | None = None
    quick: dict[str, Any] = field(default_factory=dict)
    reference: str = ""


EXPERIMENTS: dict[str, Experiment] = {}


def register_experiment(exp: Experiment) -> Experiment:
    if exp.name in EXPERIMENTS:
        raise ValueError(f"experiment {exp.name!r} registered twice")
    EXPERIMENTS[exp.name] = exp
    return exp


def load_records(paths, params: tuple[str, ...]) -> list[dict]:
    """Read the JSON records of runs to be merged (``merge`` of an experiment): at least one, all
    of the same experiment, seed and ``quick``, and equal in each parameter of ``params`` (one
    line naming the first difference otherwise)."""
    recs = [json.loads(Path(p).read_text()) for p in paths]
    if not recs:
        raise LocalPrivError("merge: no records given")
    first = recs[0]
    for key in ("name", "seed", "quick"):
        if any(r.get(key) != first.get(key) for r in recs):
            raise LocalPrivError(f"merge: the records differ in {key!r}")
    for key in params:
        if any(r["params"].get(key) != first["params"].get(key) for r in recs):
            raise LocalPrivError(f"merge: the records differ in parameter {key!r}")
    return recs


def merged_sources(recs, paths) -> list[str]:
    """The ``merged_from`` of a merge: each record's own sources when it is itself a merge (so
    merging into a committed record keeps its history), else the record's path."""
    out = []
    for r, p in zip(recs, paths):
        out += [str(x) for x in r.get("merged_from") or [str(p)]]
    return out


def run_experiment(name: str, out, *, runs: int | None = None, seed: int = 0, quick: bool = False,
                   overrides: dict | None = None, progress: Progress | None = None) -> dict:
    """Run experiment ``name``; write ``out/name.json`` and ``out/name.png``; return the record."""
    exp = EXPERIMENTS.get(name)
    if exp is None:
        raise LocalPrivError(f"unknown experiment {name!r}; known: {', '.join(sorted(EXPERIMENTS))}")
    params = dict(exp.defaults)
    if quick:
        params.update(exp.quick)
    if runs is not None:
        if runs < 1:
            raise LocalPrivError("--runs must be >= 1")
        params["runs"] = int(runs)
    if overrides:
        unknown = set(overrides) - set(params)
        if unknown:
            raise LocalPrivError(f"{name}: unknown parameter(s) {', '.join(sorted(unknown))}")
        params.update(overrides)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    results = exp.compute(params, rng, progress or Progress())
    elapsed = time.perf_counter() - t0
    record = {
        "name": name,
        "description": exp.description,
        "reference": exp.reference,
        "params": params,
        "seed": seed,
        "quick": quick,
        "elapsed_seconds": round(elapsed, 3),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "results": results,
    }
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_output(out / f"{name}.json") as tmp:
        tmp.write_text(json.dumps(to_jsonable(record), indent=1))
    if exp.plot is not None:
        exp.plot(results, params, out / f"{name}.png")
    return record
