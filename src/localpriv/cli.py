"""The ``localpriv`` command line: perturb -> aggregate -> estimate, plus inspection and
reproductions. A thin layer: parsing and printing only; the work is done by the library.

Errors are one unwrapped line on stderr (``error: ...``) with exit code 1 for bad input and 2 for
bad usage (unknown option, a value of the wrong type); ``--debug`` shows the traceback instead.
Outputs are written atomically (see :mod:`localpriv.formats`): a failed or interrupted command
leaves no output file.
"""
from __future__ import annotations

import json
import re
import sys
import traceback
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

# typer >= 0.25 vendors click: its exceptions live here (no separate click package)
from typer._click.exceptions import UsageError

from ._validation import LocalPrivError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Local privacy: obfuscate values, aggregate reports, estimate distributions.")
console = Console()
err = Console(stderr=True, soft_wrap=True)
_STATE = {"debug": False}


@app.callback()
def _main_options(debug: bool = typer.Option(False, "--debug", help="show tracebacks of errors")):
    """Local privacy: obfuscate values, aggregate reports, estimate distributions."""
    _STATE["debug"] = debug


def friendly(func):
    """Turn every error of a command into one line on stderr and exit code 1 (the traceback with
    ``--debug``); usage errors (exit 2) are handled by :func:`main`."""
    import functools

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, UsageError):
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line
            if _STATE["debug"]:
                traceback.print_exc()
            _say(f"error: {_message(exc)}")
            raise typer.Exit(1) from None
    return wrapper


def _message(exc: BaseException) -> str:
    if isinstance(exc, LocalPrivError):
        return str(exc)
    if isinstance(exc, OSError):
        return _os_message(exc)
    if isinstance(exc, MemoryError):
        return "out of memory"
    return f"internal error ({type(exc).__name__}: {exc}); rerun with --debug for the traceback"


def _say(text: str) -> None:
    """One line on stderr, never wrapped (whatever the terminal width)."""
    sys.stderr.write(re.sub(r"\s*\n\s*", " ", text).rstrip() + "\n")
    sys.stderr.flush()


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


def _generator(seed: Optional[int]):
    """``--seed`` gives a reproducible PCG64 stream (experiments); without it, a cryptographically
    secure generator seeded from the operating system (what a real client must use)."""
    from .rng import make_generator
    return make_generator(seed)


@app.command()
@friendly
def perturb(
    input: Path = typer.Argument(..., help="CSV or Parquet file of raw values"),
    output: Path = typer.Option(..., "--out", "-o", help="report file (.parquet or .csv)"),
    mechanism: str = typer.Option(..., "--mechanism", "-m", help="mechanism spec, e.g. 'krr(eps=2.0)'"),
    domain: str = typer.Option(..., "--domain", "-d", help=DOMAIN_HELP),
    column: Optional[str] = typer.Option(None, "--column", "-c",
                                         help="column of values (default: first); 'lat,lon' for a grid"),
    seed: Optional[int] = typer.Option(None, "--seed", min=0,
                                       help="seed for a reproducible experiment; without it a cryptographically "
                                            "secure generator seeded by the OS (use that for real users)"),
    drop_missing: bool = typer.Option(False, "--drop-missing",
                                      help="drop missing values (counted and reported) instead of failing"),
):
    """Obfuscate a column of values: one report per value (streamed in bounded memory)."""
    from .formats import REPORT_SUFFIXES, check_output
    from .reports import perturb_file
    check_output(output, REPORT_SUFFIXES, [input], what="report file")
    dom = _domain(domain)
    res = perturb_file(input, output, mechanism, dom, _generator(seed), column=column,
                       drop_missing=drop_missing)
    dropped = f", {res.dropped} missing value(s) dropped" if res.dropped else ""
    _say(f"wrote {res.reports} reports of {res.mechanism} to {res.path} ({res.rows} rows read{dropped})")


@app.command()
@friendly
def aggregate(
    inputs: list[str] = typer.Argument(..., help="report or counts files, globs, folders or hive-partitioned "
                                                 "Parquet datasets (counts files are summed)"),
    output: Path = typer.Option(..., "--out", "-o", help="counts file (.csv or .parquet)"),
    memory_limit: str = typer.Option("2GB", help="DuckDB memory limit (e.g. 512MB, 2GB)"),
    engine: str = typer.Option("duckdb", "--engine", help="duckdb (default, bounded memory) or numpy"),
):
    """Count reports per (mechanism, report); counts files among the inputs are summed."""
    from .aggregate import DuckDBAggregator, NumpyAggregator, check_memory_limit, write_counts
    from .formats import REPORT_SUFFIXES, check_output
    check_output(output, REPORT_SUFFIXES, inputs, what="counts file")
    if engine == "duckdb":
        try:
            agg = DuckDBAggregator(memory_limit=check_memory_limit(memory_limit))
        except LocalPrivError as exc:
            raise typer.BadParameter(str(exc), param_hint="'--memory-limit'") from None
    elif engine == "numpy":
        agg = NumpyAggregator()
    else:
        raise typer.BadParameter(f"unknown engine {engine!r}: duckdb or numpy", param_hint="'--engine'")
    df = agg.counts(inputs)
    write_counts(df, output, inputs)
    _say(f"{int(df['count'].sum())} reports, {df['mechanism'].nunique()} mechanism(s), "
         f"{len(df)} distinct (mechanism, report) pairs -> {output}")


@app.command()
@friendly
def estimate(
    inputs: list[str] = typer.Argument(..., help="reports or counts (files, globs, folders; counts are summed)"),
    domain: Optional[str] = typer.Option(
        None, "--domain", "-d",
        help=DOMAIN_HELP + "; omit it for untruncated geometric reports: IBU then runs on the likely "
             "subset of the integers (seed 001 section 8)"),
    estimator: Optional[str] = typer.Option(
        None, "--estimator", "-e",
        help="ems | ibu | dirichlet | inv-p | inv-n | mi-p | ibu-exact | ... (`localpriv list estimators`). "
             "Default: ems on ordered domains (lines, grids), ibu on categorical ones (docs/estimators.md)"),
    strength: Optional[float] = typer.Option(
        None, "--strength",
        help="ems/dirichlet: the regularization strength (ems: bandwidth in cells; dirichlet: prior "
             "pseudo-count); default: chosen by 5-fold held-out log-likelihood; 0 gives the MLE"),
    output: Optional[Path] = typer.Option(None, "--out", "-o", help="estimate file (.csv or .json)"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="PNG of the estimate (with --ci, its intervals as a band or error bars)"),
    delta: Optional[float] = typer.Option(
        None, help="IBU variants: tolerance of the stopping rule (default 1e-9: with --stop gap, the "
                   "per-report log-likelihood is within DELTA of the maximum)"),
    stop: Optional[str] = typer.Option(
        None, "--stop",
        help="IBU variants: stopping rule. gap (default; certified: max_x g_x - 1 < delta with g the EM "
             "multiplier, which bounds the per-report distance to the maximum log-likelihood), loglik "
             "(seed 001: |L(t)-L(t-1)| < delta, total log-likelihood) or max_abs "
             "(max|theta(t)-theta(t-1)| < delta)"),
    max_iter: Optional[int] = typer.Option(None, min=1,
                                           help="IBU variants: cap on EM evaluations (default 100000)"),
    accelerate: Optional[bool] = typer.Option(
        None, "--accelerate/--plain",
        help="IBU variants: --accelerate (default) runs SQUAREM with the certified Newton finish where the "
             "blocks allow it (same maximum, far fewer iterations); --plain runs plain EM (seed 001 "
             "Algorithm 1)"),
    ci: Optional[float] = typer.Option(None, "--ci",
                                       help="confidence level, e.g. 0.95: per-cell intervals (lower, upper) in "
                                            "the output and on the plot"),
    stat: Optional[str] = typer.Option(None, "--stat",
                                       help="statistics with their intervals, e.g. mean,median,p90 "
                                            "(mean, var, sd, median, pNN, qX)"),
):
    """Estimate the original distribution from reports or counts (with --ci and --stat: how sure)."""
    from .aggregate import aggregate as _aggregate
    from .estimators import estimate as _estimate
    from .formats import ESTIMATE_SUFFIXES, IMAGE_SUFFIXES, check_output
    if output is not None:
        check_output(output, ESTIMATE_SUFFIXES, inputs, what="estimate file")
    if plot is not None:
        check_output(plot, IMAGE_SUFFIXES, inputs, what="plot")
    if ci is not None and not 0.0 < ci < 1.0:
        raise typer.BadParameter(f"{ci} is not a level strictly between 0 and 1 (e.g. 0.95)", param_hint="'--ci'")
    if stop is not None and stop not in STOP_CHOICES:
        raise typer.BadParameter(f"unknown stopping rule {stop!r}: {', '.join(STOP_CHOICES)}", param_hint="'--stop'")
    if delta is not None and (not np.isfinite(delta) or delta <= 0):
        raise typer.BadParameter(f"{delta} is not a number > 0", param_hint="'--delta'")
    if strength is not None and (not np.isfinite(strength) or strength < 0):
        raise typer.BadParameter(f"{strength} is not a number >= 0", param_hint="'--strength'")
    dom = None if domain is None else _domain(domain)
    if estimator is None:
        from .estimators import default_estimator
        estimator = default_estimator(dom)
    is_em = estimator in EM_ESTIMATORS
    given = {"delta": delta, "max_iter": max_iter, "stop": stop,
             "accelerate": None if accelerate is None else ("newton" if accelerate else "none"),
             "strength": strength}
    flags = {"delta": "--delta", "max_iter": "--max-iter", "stop": "--stop",
             "accelerate": "--accelerate" if accelerate else "--plain", "strength": "--strength"}
    for key, value in given.items():
        if value is not None and (not is_em or (key == "strength" and estimator not in REGULARIZED)):
            takers = REGULARIZED if key == "strength" else EM_ESTIMATORS
            raise LocalPrivError(f"{flags[key]} applies to {'/'.join(takers)}, not to {estimator}")
    # the library's defaults for what is not given (the certified, accelerated maximum)
    kwargs = {key: value for key, value in given.items() if value is not None}
    if is_em:  # progress of long estimates: a bar on a terminal, a status line every ~10 s otherwise
        from .progress import EMProgress
        kwargs["progress"] = EMProgress(estimator, console=err)
    if dom is None:
        est = _estimate_unbounded(inputs, estimator, kwargs)
    else:
        est = _estimate(_aggregate(inputs, dom), estimator, **kwargs)
    from contextlib import ExitStack

    from .formats import atomic_output
    with ExitStack() as outputs:  # both outputs appear, or neither (a failed plot drops the estimate)
        out_tmp = outputs.enter_context(atomic_output(output)) if output else None
        plot_tmp = outputs.enter_context(atomic_output(plot)) if plot else None
        stats = est.statistics(stat, ci if ci is not None else 0.95) if stat else {}
        if out_tmp is not None:
            est.save(out_tmp, ci=ci, stats=list(stats) or None)
        if plot_tmp is not None:
            from .plotting import estimate_figure
            estimate_figure(est, plot_tmp, level=ci)
    if est.converged is False:
        _say(_cap_warning(est))
    if not output:
        console.print(est.to_frame(ci).to_string(index=False), highlight=False, soft_wrap=True)
    for name, iv in stats.items():
        console.print(f"{name}: {iv.value:.6g} [{iv.lower:.6g}, {iv.upper:.6g}] ({iv.level:.0%}, {iv.method})",
                      highlight=False, soft_wrap=True)
    gap = est.settings.get("gap_reached")
    cert = f"; within {gap:.1g} per report of the maximum log-likelihood" \
        if est.converged and isinstance(gap, float) and gap == gap else ""
    _say((f"{est!r}; log-likelihood {est.loglik:.6g}" if est.loglik is not None else repr(est)) + cert)


#: the estimators run by the EM engine, which take --delta, --stop, --max-iter, --accelerate/--plain
EM_ESTIMATORS = ("ibu", "gibu", "ibu-exact", "ibu-support", "ibu-m", "ibu-r", "ems", "dirichlet")
#: ... of which these are regularized and take --strength
REGULARIZED = ("ems", "dirichlet")
STOP_CHOICES = ("gap", "loglik", "max_abs")


def _cap_warning(est) -> str:
    """One line: the estimate stopped at its cap, and what to do about it."""
    s = est.settings
    cap = s.get("max_iter", est.iterations)
    gap = s.get("gap_reached")
    where = f" (certified only to {gap:.2g} per report)" if isinstance(gap, float) and gap == gap else ""
    if s.get("acceleration", "none") == "none":
        todo = "drop --plain (accelerated EM converges in far fewer iterations) or raise --max-iter"
    else:
        todo = f"raise --max-iter (now {cap}) or loosen --delta"
    return (f"warning: {est.estimator} stopped at the iteration cap ({est.iterations} EM evaluations) before "
            f"meeting its tolerance{where}: NOT converged; {todo}")


def _estimate_unbounded(inputs, estimator: str, kwargs: dict):
    """No domain given: only untruncated geometric reports can be estimated, on the likely subset
    ``[min z, max z]`` of the integers (seed 001 Proposition 8.2, Theorem 8.1)."""
    from .aggregate import DuckDBAggregator
    from .analysis.likely import estimate_unbounded_integers
    from .mechanisms import parse
    from .mechanisms.geometric import Geometric
    if estimator != "ibu":
        raise LocalPrivError("without --domain only ibu applies (on the likely subset of the integers); "
                             "give --domain for other estimators")
    df = DuckDBAggregator().counts(inputs)
    eps_values = set()
    for spec in df["mechanism"].unique():
        mech = parse(spec, trusted=False)
        if not isinstance(mech, Geometric) or mech.truncated:
            raise LocalPrivError(f"--domain is required for {spec}: only untruncated geometric reports "
                                 "can be estimated without a declared domain")
        eps_values.add(mech.eps)
    if len(eps_values) != 1:
        raise LocalPrivError("without --domain all reports must come from one geometric(eps=..) mechanism")
    grouped = df.groupby("report", sort=True)["count"].sum()
    kw = {k: v for k, v in kwargs.items() if k in ("delta", "max_iter", "accelerate", "stop", "progress")}
    return estimate_unbounded_integers(grouped.index.to_numpy(np.int64), eps_values.pop(),
                                       counts=grouped.to_numpy(np.int64), **kw)


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
    runs: int = typer.Option(20, "--runs", min=1, help="--consistency: data sets per n"),
    seed: int = typer.Option(0, "--seed", min=0, help="--consistency: seed of the random generator"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="--consistency: PNG of error against n (log-log)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
):
    """Privacy level (LDP or metric), identifiability and the error bounds that apply; with
    --consistency, the consistency report of seed 001 section 6 with an empirical study."""
    from .analysis import analyze_report
    from .formats import IMAGE_SUFFIXES, check_output
    from .mechanisms import parse
    if plot is not None:
        check_output(plot, IMAGE_SUFFIXES, what="plot")
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
    fig.tight_layout()
    from .plotting import save
    save(fig, path)


@app.command()
@friendly
def reproduce(
    name: str = typer.Argument(..., help="experiment name, or 'list' to list them all"),
    out: Path = typer.Option(Path("results"), "--out", "-o", help="output folder"),
    runs: Optional[int] = typer.Option(None, "--runs", "-r", min=1, help="repetitions (default: the experiment's)"),
    seed: int = typer.Option(0, "--seed", min=0, help="seed of the random generator"),
    quick: bool = typer.Option(False, "--quick", help="small, fast configuration (used by the tests)"),
):
    """Rerun one of the seeds' experiments: writes OUT/NAME.json and OUT/NAME.png."""
    from .experiments import EXPERIMENTS, run_experiment
    if name == "list":
        for n, e in sorted(EXPERIMENTS.items()):
            console.print(f"{n:24s} {e.description}", highlight=False)
        return
    rec = run_experiment(name, out, runs=runs, seed=seed, quick=quick, progress=rich_progress())
    _say(f"{name}: {rec['elapsed_seconds']:.1f} s -> {out / (name + '.json')}, {out / (name + '.png')}")


@app.command()
@friendly
def demo(out: Path = typer.Option(Path("out/demo"), "--out", "-o"), seed: int = typer.Option(0, "--seed", min=0)):
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


def main(argv=None):  # entry point
    """Run the command line: one-line errors, exit 1 for bad input and 2 for bad usage."""
    from ._signals import interrupt_cleanly, pending_exit
    interrupt_cleanly()
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    if not debug:
        warnings.showwarning = _show_warning
    try:
        # without standalone mode, click *returns* the code of a typer.Exit instead of raising it
        code = app(args=argv, standalone_mode=False, prog_name="localpriv")
        if pending_exit() is not None:  # interrupted, but the exception was swallowed somewhere
            _say("error: interrupted")
            sys.exit(pending_exit())
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            sys.exit(code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except UsageError as exc:
        if debug:
            traceback.print_exc()
        hint = f" (see localpriv {exc.ctx.info_name} --help)" if exc.ctx is not None and \
            exc.ctx.info_name not in (None, "localpriv") else " (see localpriv --help)"
        _say(f"error: {exc.format_message()}{hint}")
        sys.exit(2)
    except typer.Abort:
        _say("error: interrupted")
        sys.exit(130)
    except KeyboardInterrupt:
        _say("error: interrupted")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - outside a command (e.g. at start-up): still one line
        if debug:
            traceback.print_exc()
        _say(f"error: {_message(exc)}")
        sys.exit(1)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning is one line on stderr too (``warning: ...``), without the source line."""
    where = f" ({category.__name__}, {Path(filename).name}:{lineno})" if not issubclass(category, UserWarning) \
        else ""
    _say(f"warning: {message}{where}")


def _os_message(exc: OSError) -> str:
    name = getattr(exc, "filename", None)
    why = exc.strerror or str(exc)
    return f"{name}: {why}" if name else why


if __name__ == "__main__":
    main()
