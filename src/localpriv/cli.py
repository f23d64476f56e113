"""The ``localpriv`` command line: perturb -> aggregate -> estimate, plus inspection and
reproductions. Errors print one clear line and exit non-zero (no traceback)."""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ._validation import LocalPrivError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Local privacy: obfuscate values, aggregate reports, estimate distributions.")
console = Console()
err = Console(stderr=True)


def friendly(func):
    """Turn library errors into one line on stderr and exit code 1."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (LocalPrivError, FileNotFoundError, PermissionError, OSError) as exc:
            err.print(f"[bold red]error:[/] {exc}", highlight=False)
            raise typer.Exit(1)
    return wrapper


def rich_progress():
    """A Progress adapter (see localpriv.experiments.runner.Progress) drawing Rich bars."""
    from .experiments.runner import Progress as _P

    def factory(iterable, description, total):
        items = list(iterable) if total is None and not hasattr(iterable, "__len__") else iterable
        total_ = total if total is not None else len(items)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=err, transient=True,
                      disable=not err.is_terminal) as bar:
            task = bar.add_task(description, total=total_)
            for item in items:
                yield item
                bar.advance(task)
    return _P(factory)


DOMAIN_HELP = "LO..HI, comma-separated labels, manhattan[:CELL_KM] or grid(lat0=..,lon0=..,nrows=..,ncols=..,cell_km=..)"


def _domain(text: Optional[str]):
    from .domains import parse_domain
    return None if text is None else parse_domain(text)


@app.command()
@friendly
def perturb(
    input: Path = typer.Argument(..., help="CSV or Parquet file of raw values"),
    output: Path = typer.Option(..., "--out", "-o", help="report file (.parquet or .csv)"),
    mechanism: str = typer.Option(..., "--mechanism", "-m", help="mechanism spec, e.g. 'krr(eps=2.0)'"),
    domain: str = typer.Option(..., "--domain", "-d", help=DOMAIN_HELP),
    column: Optional[str] = typer.Option(None, "--column", "-c",
                                         help="column of values (default: first); 'lat,lon' for a grid"),
    seed: int = typer.Option(..., "--seed", help="seed of the random generator (reproducibility)"),
):
    """Obfuscate a column of values: one report per value."""
    from .reports import perturb as _perturb, read_values, write_reports
    dom = _domain(domain)
    values = read_values(input, column)
    table = _perturb(values, mechanism, np.random.default_rng(seed), dom)
    write_reports(table, output)
    err.print(f"wrote {table.num_rows} reports of {table.column('mechanism')[0]} to {output}")


@app.command()
@friendly
def aggregate(
    inputs: list[Path] = typer.Argument(..., help="report files (Parquet or CSV)"),
    output: Path = typer.Option(..., "--out", "-o", help="counts file (.csv or .parquet)"),
    memory_limit: str = typer.Option("2GB", help="DuckDB memory limit"),
):
    """Count reports per (mechanism, report) with DuckDB (streams files larger than memory)."""
    from .aggregate import DuckDBAggregator
    df = DuckDBAggregator(memory_limit=memory_limit).counts([str(p) for p in inputs])
    output.parent.mkdir(parents=True, exist_ok=True)
    if output.suffix == ".parquet":
        df.to_parquet(output, index=False)
    else:
        df.to_csv(output, index=False)
    err.print(f"{int(df['count'].sum())} reports, {df['mechanism'].nunique()} mechanism(s), "
              f"{len(df)} distinct (mechanism, report) pairs -> {output}")


@app.command()
@friendly
def estimate(
    input: Path = typer.Argument(..., help="reports (Parquet/CSV with mechanism, report) or counts (with a count column)"),
    domain: Optional[str] = typer.Option(
        None, "--domain", "-d",
        help=DOMAIN_HELP + "; omit it for untruncated geometric reports: IBU then runs on the likely "
             "subset of the integers (seed 001 section 8)"),
    estimator: str = typer.Option("ibu", "--estimator", "-e",
                                  help="inv-n | inv-p | ibu | gibu | mi-n | ibu-exact | ibu-r | ... "
                                       "(see docs)"),
    output: Optional[Path] = typer.Option(None, "--out", "-o", help="estimate file (.csv or .json)"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="PNG bar chart of the estimate"),
    delta: float = typer.Option(1e-6, help="IBU: tolerance of the stopping rule (see --stop)"),
    stop: str = typer.Option("loglik", "--stop",
                             help="IBU stopping rule: loglik (seed 001: |L(t)-L(t-1)| < delta) or max_abs "
                                  "(max|theta(t)-theta(t-1)| < delta)"),
    max_iter: int = typer.Option(10_000, help="IBU: iteration cap"),
    accelerate: bool = typer.Option(False, "--accelerate/--plain",
                                    help="IBU: SQUAREM acceleration with the certified Newton finish where the "
                                         "blocks allow it (same maximum, far fewer iterations)"),
):
    """Estimate the original distribution from reports or counts."""
    import pandas as pd

    from .aggregate import aggregate as _aggregate
    from .estimators import estimate as _estimate
    from .observations import Observations
    if not input.exists():
        raise LocalPrivError(f"input file {input} not found")
    if input.suffix == ".csv":
        is_counts = "count" in pd.read_csv(input, nrows=1).columns
    else:
        import pyarrow.parquet as pq
        is_counts = "count" in pq.read_schema(input).names
    is_ibu = estimator in ("ibu", "gibu")
    kwargs = {"delta": delta, "max_iter": max_iter} if is_ibu else {}
    if accelerate:
        if not is_ibu:
            raise LocalPrivError(f"--accelerate applies to ibu/gibu, not to {estimator}")
        kwargs["accelerate"] = "newton"
    if stop != "loglik":
        if not is_ibu:
            raise LocalPrivError(f"--stop applies to ibu/gibu, not to {estimator}")
        kwargs["stop"] = stop
    with Progress(TextColumn(estimator), BarColumn(), TextColumn("iteration {task.completed}"),
                  TimeElapsedColumn(), console=err, transient=True,
                  disable=not (is_ibu and err.is_terminal)) as bar:
        task = bar.add_task(estimator, total=max_iter)
        if is_ibu:
            kwargs["callback"] = lambda t, theta, L: bar.update(task, completed=t)
        if domain is None:
            est = _estimate_unbounded(input, is_counts, estimator, kwargs)
        else:
            dom = _domain(domain)
            obs = Observations.load(input, dom) if is_counts else _aggregate(input, dom)
            est = _estimate(obs, estimator, **kwargs)
    if output:
        est.save(output)
    if plot:
        from .plotting import distributions_figure
        distributions_figure(est.labels, {est.estimator: est.distribution}, plot,
                             title=f"{est.estimator} estimate from {int(est.n)} reports")
    if est.converged is False:
        err.print(f"[yellow]warning:[/] {est.estimator} stopped at the iteration cap ({est.iterations}) "
                  "before meeting its tolerance")
    if not output:
        console.print(est.to_frame().to_string(index=False))
    err.print(f"{est!r}; log-likelihood {est.loglik:.6g}")


def _estimate_unbounded(path: Path, is_counts: bool, estimator: str, kwargs: dict):
    """No domain given: only untruncated geometric reports can be estimated, on the likely subset
    ``[min z, max z]`` of the integers (seed 001 Proposition 8.2, Theorem 8.1)."""
    import pandas as pd

    from .aggregate import DuckDBAggregator
    from .analysis.likely import estimate_unbounded_integers
    from .mechanisms import parse
    if estimator != "ibu":
        raise LocalPrivError("without --domain only ibu applies (on the likely subset of the integers); "
                             "give --domain for other estimators")
    if is_counts:
        df = pd.read_parquet(path) if path.suffix != ".csv" else pd.read_csv(path)
    else:
        df = DuckDBAggregator().counts([str(path)])
    from .mechanisms.geometric import Geometric
    eps_values = set()
    for spec in df["mechanism"].unique():
        mech = parse(spec)
        if not isinstance(mech, Geometric) or mech.truncated:
            raise LocalPrivError(f"--domain is required for {spec}: only untruncated geometric reports "
                                 "can be estimated without a declared domain")
        eps_values.add(mech.eps)
    if len(eps_values) != 1:
        raise LocalPrivError("without --domain all reports must come from one geometric(eps=..) mechanism")
    reports = np.repeat(df["report"].to_numpy(np.int64), df["count"].to_numpy(np.int64))
    kw = {k: v for k, v in kwargs.items() if k in ("delta", "max_iter", "accelerate", "stop")}
    return estimate_unbounded_integers(reports, eps_values.pop(), **kw)


@app.command()
@friendly
def mechanism(
    spec: str = typer.Argument(..., help="mechanism spec, e.g. 'krr(k=10,eps=1.0)'"),
    domain: Optional[str] = typer.Option(None, "--domain", "-d", help="LO..HI or labels (fills k)"),
    show: bool = typer.Option(False, "--show", help="print the channel matrix too"),
):
    """Summarize a mechanism's channel and its privacy level computed from it."""
    from .analysis import analyze_report
    from .mechanisms import parse
    mech = parse(spec, _domain(domain))
    report = analyze_report(mech, domain=_domain(domain))
    table = Table(title=str(mech), show_header=False)
    for k, v in report.items():
        table.add_row(k, str(v))
    console.print(table)
    if show:
        with np.printoptions(precision=4, suppress=True, linewidth=160):
            console.print(mech.channel())


@app.command()
@friendly
def analyze(
    mechanism: str = typer.Option(..., "--mechanism", "-m", help="mechanism spec"),
    domain: Optional[str] = typer.Option(None, "--domain", "-d", help=DOMAIN_HELP),
    consistency: bool = typer.Option(False, "--consistency",
                                     help="also run the empirical convergence study of IBU (error against n)"),
    runs: int = typer.Option(20, "--runs", help="--consistency: data sets per n"),
    seed: int = typer.Option(0, "--seed", help="--consistency: seed of the random generator"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="--consistency: PNG of error against n (log-log)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
):
    """Privacy level (LDP or metric), identifiability and the error bounds that apply; with
    --consistency, the consistency report of seed 001 section 6 with an empirical study."""
    from .analysis import analyze_report
    from .mechanisms import parse
    dom = _domain(domain)
    mech = parse(mechanism, dom)
    report = analyze_report(mech, domain=dom)
    if consistency:
        from .analysis.consistency import consistency_report
        cons = consistency_report(mech, runs=runs, rng=np.random.default_rng(seed))
        study = cons.get("convergence", {})
        report["consistency verdict"] = cons["verdict"]
        if study:
            report["convergence study"] = {key: study[key] for key in study
                                           if key in ("n", "mse", "mse_se", "runs", "slope", "slope_se",
                                                      "not_converged", "asymptotic_error")}
        if plot and study:
            _plot_convergence(study, plot, str(mech))
            report["convergence plot"] = str(plot)
    if as_json:
        console.print_json(json.dumps(report, default=_jsonable))
    else:
        for k, v in report.items():
            console.print(f"{k}: {v}", highlight=False)


def _jsonable(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def _plot_convergence(study: dict, path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
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
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@app.command()
@friendly
def reproduce(
    name: str = typer.Argument(..., help="experiment name, or 'list' to list them all"),
    out: Path = typer.Option(Path("results"), "--out", "-o", help="output folder"),
    runs: Optional[int] = typer.Option(None, "--runs", "-r", help="repetitions (default: the experiment's)"),
    seed: int = typer.Option(0, "--seed", help="seed of the random generator"),
    quick: bool = typer.Option(False, "--quick", help="small, fast configuration (used by the tests)"),
):
    """Rerun one of the seeds' experiments: writes OUT/NAME.json and OUT/NAME.png."""
    from .experiments import EXPERIMENTS, run_experiment
    if name == "list":
        for n, e in sorted(EXPERIMENTS.items()):
            console.print(f"{n:24s} {e.description}", highlight=False)
        return
    rec = run_experiment(name, out, runs=runs, seed=seed, quick=quick, progress=rich_progress())
    err.print(f"{name}: {rec['elapsed_seconds']:.1f} s -> {out / (name + '.json')}, {out / (name + '.png')}")


@app.command()
@friendly
def demo(out: Path = typer.Option(Path("out/demo"), "--out", "-o"), seed: int = typer.Option(0, "--seed")):
    """The main job: UCI Adult ages under k-RR eps=2, estimated by INV-N, INV-P and IBU."""
    from .experiments import run_experiment
    rec = run_experiment("demo", out, seed=seed, progress=rich_progress())
    res = rec["results"]
    table = Table(title=f"UCI Adult ages (n={res['n']}), {rec['params']['mechanism']}, seed {seed}")
    table.add_column("distribution")
    table.add_column("EMD to truth (years)", justify="right")
    table.add_column("log-likelihood", justify="right")
    table.add_column("iterations", justify="right")
    for k, v in res["emd"].items():
        d = res.get("details", {}).get(k, {})
        table.add_row(k, f"{v:.4f}", "" if d.get("loglik") is None else f"{d['loglik']:.2f}",
                      "" if d.get("iterations") is None else str(d["iterations"]))
    console.print(table)
    console.print(f"figure: {out / 'demo.png'}   numbers: {out / 'demo.json'}  ({rec['elapsed_seconds']:.1f} s)")


@app.command("list")
@friendly
def list_(what: str = typer.Argument("all", help="mechanisms | estimators | experiments | all")):
    """List the registered mechanisms (spec names), estimators and reproducible experiments."""
    from .estimators import available_estimators
    from .experiments import EXPERIMENTS
    from .mechanisms.base import registered
    groups = {"mechanisms": sorted(registered()), "estimators": available_estimators(),
              "experiments": sorted(EXPERIMENTS)}
    if what != "all" and what not in groups:
        raise LocalPrivError(f"unknown list {what!r}: choose mechanisms, estimators, experiments or all")
    for name, items in groups.items():
        if what in ("all", name):
            console.print(f"[bold]{name}[/] ({len(items)}): " + ", ".join(items), highlight=False)


def main():  # entry point
    app()


if __name__ == "__main__":
    main()
