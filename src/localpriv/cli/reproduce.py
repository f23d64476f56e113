"""``localpriv reproduce`` and ``localpriv demo``: rerun the seeds' experiments."""
from __future__ import annotations

from pathlib import Path

import typer

from localpriv.cli.common import Table, console, fmt_number, friendly, rich_progress, say, status_of
from localpriv.inference.demo import run_demo
from localpriv.inference.plotting import PLOTS_HINT
from localpriv.utils.checkout import load_reproductions
from localpriv.utils.optional import available


@friendly
def reproduce(
    name: str = typer.Argument(..., help="experiment name, or 'list' to list them all"),
    out: Path = typer.Option(Path("results"), "--out", "-o", help="output folder"),
    runs: int | None = typer.Option(None, "--runs", "-r", min=1, help="repetitions (default: the experiment's)"),
    seed: int = typer.Option(0, "--seed", min=0, help="seed of the random generator"),
    quick: bool = typer.Option(False, "--quick", help="small, fast configuration (used by the tests)"),
) -> None:
    """Rerun one of the seeds' experiments: writes OUT/NAME.json and OUT/NAME.png.

    Runs from a source checkout: the experiments live in its reproductions/, which is not installed."""
    repro = load_reproductions("localpriv reproduce")
    if name == "list":
        for n, e in sorted(repro.EXPERIMENTS.items()):
            console.print(f"{n:24s} {e.description}", highlight=False)
        return
    with status_of(f"reproduce {name}") as status:
        rec = repro.run_experiment(name, out, runs=runs, seed=seed, quick=quick,
                                   progress=repro.Progress(rich_progress(status)))
    say(f"{name}: {rec['elapsed_seconds']:.1f} s; wrote {_written(out, name)}")


@friendly
def demo(out: Path = typer.Option(Path("out/demo"), "--out", "-o",
                                  help="folder of the outputs (demo.json: every number; demo.png: the figure)"),
         seed: int = typer.Option(0, "--seed", min=0,
                                  help="seed of the random generator (same seed, same numbers)")) -> None:
    """The main job: UCI Adult ages under k-RR eps=2, estimated by INV-N, INV-P and IBU."""
    with status_of("demo") as status:
        rec = run_demo(out, seed=seed, progress=rich_progress(status))
    res = rec["results"]
    table = Table(title=f"UCI Adult ages (n={res['n']:,}), {rec['params']['mechanism']}, seed {seed}")
    table.add_column("distribution")
    table.add_column("EMD to truth (years)", justify="right")
    table.add_column("log-likelihood", justify="right")
    table.add_column("iterations", justify="right")
    for k, v in res["emd"].items():
        d = res.get("details", {}).get(k, {})
        table.add_row(k, fmt_number(v), "" if d.get("loglik") is None else f"{d['loglik']:,.2f}",
                      "" if d.get("iterations") is None else f"{d['iterations']:,}")
    console.print(table)
    say(f"demo: {rec['elapsed_seconds']:.1f} s; wrote {_written(out, 'demo')}")
    if not available("matplotlib"):
        say(f"demo: no figure (matplotlib is not installed); for demo.png: {PLOTS_HINT}, or make demo-plots")


def _written(out: Path, name: str) -> str:
    """The files an experiment wrote: ``out/name.json`` (numbers) and, if drawn, ``out/name.png``."""
    drawn = (out / f"{name}.png").exists() and available("matplotlib")
    files = [out / f"{name}.json"] + ([out / f"{name}.png"] if drawn else [])
    return ", ".join(f"{f} ({'numbers' if f.suffix == '.json' else 'figure'})" for f in files)
