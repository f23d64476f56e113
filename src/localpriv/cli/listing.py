"""``localpriv list``: the registered mechanisms, estimators and reproducible experiments."""
from __future__ import annotations

import typer

from localpriv.cli.common import console, friendly
from localpriv.estimators import available_estimators, describe_estimators
from localpriv.mechanisms.base import registered
from localpriv.utils.checkout import load_reproductions
from localpriv.utils.errors import LocalPrivError


@friendly
def list_(what: str = typer.Argument("all", help="mechanisms | estimators | experiments | all")) -> None:
    """List the registered mechanisms (spec names), estimators and reproducible experiments."""
    try:  # the reproductions of a source checkout; none in an installed package
        experiments = sorted(load_reproductions("localpriv list experiments").EXPERIMENTS)
    except LocalPrivError:
        experiments = []
    groups = {"mechanisms": sorted(registered()), "estimators": available_estimators(),
              "experiments": experiments}
    if what != "all" and what not in groups:
        raise LocalPrivError(f"unknown list {what!r}: choose mechanisms, estimators, experiments or all")
    if what == "estimators":  # each with its summary and settings, from the registry's declarations
        for spec in describe_estimators():
            settings = ", ".join(s["name"] for s in spec["settings"] if s["text"]) or "none"
            console.print(f"[bold]{spec['name']}[/]: {spec['summary']} (settings: {settings})", highlight=False)
        return
    for name, items in groups.items():
        if what in ("all", name):
            console.print(f"[bold]{name}[/] ({len(items)}): " + ", ".join(items), highlight=False)
