"""Declarative experiments (the seeds' reproductions) and the one runner that executes them.

An experiment is an :class:`Experiment`: a name, its default parameters (the configuration, all
of it written to the output), the parameters ``--quick`` overrides, a ``compute`` function from
parameters and a generator to JSON-able results, and a ``plot`` function from results to a PNG.
:func:`run_experiment` (``localpriv reproduce NAME``) seeds the generator, runs it with a progress
bar, and writes ``OUT/NAME.json`` (parameters, seed, every number behind the figure, elapsed
time) and ``OUT/NAME.png``.

Each module of this package registers its experiments with :func:`register_experiment`.
"""
from __future__ import annotations

import importlib
import pkgutil

from reproductions.runner import EXPERIMENTS, Experiment, Progress, register_experiment, run_experiment

for _info in pkgutil.iter_modules(__path__):
    if _info.name != "runner":
        importlib.import_module(f"{__name__}.{_info.name}")

__all__ = ["Experiment", "EXPERIMENTS", "Progress", "register_experiment", "run_experiment"]
