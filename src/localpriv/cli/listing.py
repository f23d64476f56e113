"""``localpriv list``: the registered mechanisms, estimators and reproducible experiments."""
from __future__ import annotations

import importlib

import typer

from localpriv.utils.errors import LocalPrivError
from localpriv.mechanisms.base import registered
from localpriv.estimators import available_estimators
from localpriv.cli.common import console, friendly


@friendly
def list_(what: str = typer.Argument("all", help="mechanisms | estimators | experiments | all")) -> None:
    """List the registered mechanisms (spec names), estimators and reproducible experiments."""
    experiments = importlib.import_module("localpriv.experiments").EXPERIMENTS
    groups = {"mechanisms": sorted(registered()), "estimators": available_estimators(),
              "experiments": sorted(experiments)}
    if what != "all" and what not in groups:
        raise LocalPrivError(f"unknown list {what!r}: choose mechanisms, estimators, experiments or all")
    for name, items in groups.items():
        if what in ("all", name):
            console.print(f"[bold]{name}[/] ({len(items)}): " + ", ".join(items), highlight=False)
