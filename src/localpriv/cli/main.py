"""The ``localpriv`` command line: perturb -> aggregate -> estimate, plus inspection and
reproductions. A thin layer: parsing and printing only; the work is done by the library.

Errors are one unwrapped line on stderr (``error: ...``) with exit code 1 for bad input and 2 for
bad usage (unknown option, a value of the wrong type); ``--debug`` shows the traceback instead.
Outputs are written atomically (see :mod:`localpriv.data.formats`): a failed or interrupted command
leaves no output file.
"""
from __future__ import annotations

import re
import sys
import traceback
import warnings
from pathlib import Path
from typing import Optional

import typer

# typer >= 0.25 vendors click: its exceptions live here (no separate click package)
from typer._click.exceptions import UsageError

from localpriv.utils.checkout import load_reproductions
from localpriv.utils.errors import LocalPrivError


class _OnFirstUse:
    """A module imported on first attribute access: ``localpriv --help`` and the other quick paths
    never load NumPy (issue 18, item 5); ``np.isfinite(...)`` in a command imports it then."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        import importlib
        return getattr(importlib.import_module(self._name), attr)


np = _OnFirstUse("numpy")
json = _OnFirstUse("json")
_demo = _OnFirstUse("localpriv.inference.demo")


class _LazyConsole:
    """A ``rich.console.Console`` made on first use (importing Rich's console is a good part of the
    start-up that ``--help`` need not pay); every attribute and ``with`` go to the real one."""

    def __init__(self, **kwargs):
        object.__setattr__(self, "_kwargs", kwargs)
        object.__setattr__(self, "_real", None)

    def _console(self):
        if self._real is None:
            from rich.console import Console
            object.__setattr__(self, "_real", Console(**self._kwargs))
        return self._real

    def __getattr__(self, name):
        return getattr(self._console(), name)

    def __setattr__(self, name, value):
        setattr(self._console(), name, value)

    def __enter__(self):
        return self._console().__enter__()

    def __exit__(self, *exc):
        return self._console().__exit__(*exc)


def Table(*args, **kwargs):  # noqa: N802 - rich.table.Table, imported when a table is drawn
    from rich.table import Table as _Table
    return _Table(*args, **kwargs)

#: placeholders of option values on the --help pages, by the option's Python type
_METAVARS = {"Path": "PATH", "str": "TEXT", "int": "INTEGER", "float": "NUMBER"}


class _Command(typer.core.TyperCommand):
    """A command whose --help page names values the usual way: ``INPUT``, ``--out PATH``, flags
    without a placeholder (typer's defaults print ``{input}``, ``<path>`` and ``<bool>``)."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for p in params:
            if p.metavar is None and p.param_type_name == "option" and not getattr(p, "is_flag", False):
                ann = getattr(getattr(p, "type_descriptor", None), "annotation", None)
                p.metavar = _METAVARS.get(getattr(ann, "__name__", ""), "VALUE")
        return params

    def collect_usage_pieces(self, ctx):
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if p.param_type_name == "argument":
                name = (p.metavar or p.name).upper() + ("..." if p.nargs != 1 else "")
                pieces.append(name if p.required else f"[{name}]")
        return pieces

    def format_options(self, ctx, formatter):
        args, opts = [], []
        for p in self.get_params(ctx):
            rec = p.get_help_record(ctx)
            if rec is None:
                continue
            if p.param_type_name == "argument":
                args.append(((p.metavar or p.name).upper() + ("..." if p.nargs != 1 else ""), rec[1]))
            else:
                opts.append(rec)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class _App(typer.Typer):
    """Every command is a :class:`_Command` (tidy --help pages, whoever adds the command)."""

    def command(self, name=None, *, cls=None, **kwargs):
        return super().command(name, cls=cls or _Command, **kwargs)


# plain (click) help pages: the Rich ones load typer.rich_utils, Markdown and Pygments, which alone
# cost more than the 0.25 s of CPU `localpriv --help` may take (issue 18, item 5)
app = _App(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
           context_settings={"max_content_width": 110},
           help="Local privacy: obfuscate values, aggregate reports, estimate distributions.")
console = _LazyConsole()
err = _LazyConsole(stderr=True, soft_wrap=True)
_STATE = {"debug": False}


def _version(value: bool) -> None:
    if value:
        from localpriv import __version__
        print(f"localpriv {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main_options(debug: bool = typer.Option(False, "--debug", help="show tracebacks of errors"),
                  version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                               help="print the version and exit")):
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


def rich_progress(status=None):
    """An experiments' progress callable (what ``reproductions.runner.Progress`` wraps): every
    ``progress(items, "label")`` of an experiment becomes a counted task of ``status`` (a
    :class:`localpriv.utils.progress.Status`: a bar on a terminal, a status line every ~10 s otherwise);
    without one, each loop gets its own."""

    def progress(iterable, description="", total=None):
        if status is not None:
            yield from status.track(iterable, description, total)
            return
        with _status(description or "progress") as own:
            yield from own.track(iterable, description, total)
    return progress


DOMAIN_HELP = ("LO..HI, comma-separated labels, bbox(lat0,lon0,lat1,lon1,cell_km) (a grid of cell_km-km cells "
               "covering a lat/lon box), manhattan[:CELL_KM] or grid(lat0=..,lon0=..,nrows=..,ncols=..,cell_km=..)")


def _domain(text: Optional[str]):
    from localpriv.domains import parse_domain
    return None if text is None else parse_domain(text)


def _status(label: str, stage: str = ""):
    """Progress of a long command on stderr: a Rich display on a terminal (after 1.5 s), one status
    line about every 10 s otherwise (:class:`localpriv.utils.progress.Status`)."""
    from localpriv.utils.progress import Status
    return Status(label, stage, console=err)


def _inputs_text(inputs) -> str:
    return str(inputs[0]) if len(inputs) == 1 else f"{len(inputs)} inputs"


def _rows_hint(path) -> Optional[int]:
    """Rows of a Parquet file from its footer (the bar's total); None for text files."""
    if str(path).lower().endswith(".parquet"):
        try:
            import pyarrow.parquet as pq
            return int(pq.ParquetFile(path).metadata.num_rows)
        except Exception:  # noqa: BLE001 - only a hint; reading the file reports real problems
            return None
    return None


def _generator(seed: Optional[int]):
    """``--seed`` gives a reproducible PCG64 stream (experiments); without it, a cryptographically
    secure generator seeded from the operating system (what a real client must use)."""
    from localpriv.utils.rng import make_generator
    return make_generator(seed)


@app.command()
@friendly
def perturb(
    input: Path = typer.Argument(..., help="CSV, TSV (.tsv, .tsv.gz) or Parquet file of raw values"),
    output: Path = typer.Option(..., "--out", "-o", help="report file (.parquet or .csv)"),
    mechanism: Optional[str] = typer.Option(None, "--mechanism", "-m",
                                            help="mechanism spec of every row, e.g. 'krr(eps=2.0)'"),
    domain: str = typer.Option(..., "--domain", "-d", help=DOMAIN_HELP),
    mechanism_column: Optional[str] = typer.Option(
        None, "--mechanism-column",
        help="free will: the column holding each row's own mechanism spec (e.g. krr(eps=0.5)); rows are "
             "grouped by spec and the report file names each report's mechanism"),
    policy: Optional[Path] = typer.Option(
        None, "--policy",
        help="free will: a .json/.toml file mapping the values of a group column to specs (keys: column, specs, "
             "default, version; docs/freewill.md)"),
    column: Optional[str] = typer.Option(None, "--column", "-c",
                                         help="column of values by name or number (1 = first; default: the "
                                              "first); two for a grid, latitude first: 'lat,lon' or '3,4'"),
    header: bool = typer.Option(True, "--header/--no-header",
                                help="--no-header: the CSV/TSV file's first line is data (give --column by number)"),
    outside: str = typer.Option("error", "--outside",
                                help="grid domains: points outside the grid are an error (error), dropped (drop) "
                                     "or moved to the nearest cell (clamp); dropped or moved points are counted"),
    seed: Optional[int] = typer.Option(None, "--seed", min=0,
                                       help="seed for a reproducible experiment; without it a cryptographically "
                                            "secure generator seeded by the OS (use that for real users)"),
    drop_missing: bool = typer.Option(False, "--drop-missing",
                                      help="drop missing values (counted and reported) instead of failing"),
):
    """Obfuscate a column of values: one report per value (streamed in bounded memory); with
    --mechanism-column or --policy each row applies its own mechanism (free will)."""
    from localpriv.data.formats import REPORT_SUFFIXES, check_output
    check_output(output, REPORT_SUFFIXES, [input], what="report file")
    if outside not in ("error", "drop", "clamp"):
        raise typer.BadParameter(f"{outside!r} is not one of error, drop, clamp", param_hint="'--outside'")
    given = [flag for flag, v in (("--mechanism", mechanism), ("--mechanism-column", mechanism_column),
                                  ("--policy", policy)) if v is not None]
    if len(given) != 1:
        raise UsageError("give one of --mechanism (every row), --mechanism-column or --policy (each row its own)"
                         + (f", not {' and '.join(given)}" if given else ""))
    dom = _domain(domain)
    with _status("perturb", f"reading {input}") as status:
        rows = status.task("rows", _rows_hint(input), "read")
        if mechanism is not None:
            from localpriv.data.reports import perturb_file
            res = perturb_file(input, output, mechanism, dom, _generator(seed), column=column,
                               drop_missing=drop_missing, header=header, outside=outside, progress=rows.update)
        else:
            from localpriv.data.freewill import perturb_file_mixed
            res = perturb_file_mixed(input, output, dom, _generator(seed), mechanism_column=mechanism_column,
                                     policy=policy, column=column, drop_missing=drop_missing, header=header,
                                     outside=outside, progress=rows.update)
    if res.outside:
        did, to = ("dropped", "") if res.outside_action == "drop" else ("moved", " to the nearest cell")
        _say(f"{did} {res.outside:,} of {res.rows - res.dropped:,} points outside the grid{to} ({input})")
    dropped = f", {res.dropped:,} missing value(s) dropped" if res.dropped else ""
    what = res.mechanism
    if res.by_mechanism and len(res.by_mechanism) > 1:
        shown = sorted(res.by_mechanism.items(), key=lambda kv: -kv[1])
        what = f"{len(shown)} mechanisms (" + ", ".join(f"{n:,} {m}" for m, n in shown[:4]) + \
            (f", {len(shown) - 4} more" if len(shown) > 4 else "") + ")"
    _say(f"wrote {res.reports:,} reports of {what} to {res.path} ({res.rows:,} rows read{dropped})")


@app.command()
@friendly
def aggregate(
    inputs: list[str] = typer.Argument(..., help="report or counts files, globs, folders or hive-partitioned "
                                                 "Parquet datasets (counts files are summed)"),
    output: Path = typer.Option(..., "--out", "-o", help="counts file (.csv or .parquet)"),
    memory_limit: str = typer.Option("2GB", help="DuckDB memory limit (e.g. 512MB, 2GB)"),
    engine: str = typer.Option("duckdb", "--engine", help="duckdb (default, bounded memory), numpy, or spark "
                                                         "(pip install 'localpriv[spark]'; docs/scale.md)"),
    master: str = typer.Option("local[2]", "--master", help="Spark master with --engine spark: local[N], "
                                                            "spark://host:7077, yarn..."),
    domain: Optional[str] = typer.Option(
        None, "--domain", "-d",
        help="the values' domain, for reports whose mechanism spec leaves it out (planar mechanisms "
             "perturbed with --domain bbox(...), grid(...) or manhattan): " + DOMAIN_HELP),
):
    """Count reports per (mechanism, report); counts files among the inputs are summed."""
    if engine == "spark":  # pyspark is imported here only
        from localpriv.extras.spark import aggregate_command
        return aggregate_command(inputs, output, master, _domain(domain), _status, _say)
    from localpriv.data.aggregate import DuckDBAggregator, NumpyAggregator, check_memory_limit, write_counts
    from localpriv.data.formats import REPORT_SUFFIXES, check_output
    check_output(output, REPORT_SUFFIXES, inputs, what="counts file")
    dom = _domain(domain)
    if engine == "duckdb":
        try:
            agg = DuckDBAggregator(memory_limit=check_memory_limit(memory_limit), domain=dom)
        except LocalPrivError as exc:
            raise typer.BadParameter(str(exc), param_hint="'--memory-limit'") from None
    elif engine == "numpy":
        agg = NumpyAggregator(domain=dom)
    else:
        raise typer.BadParameter(f"unknown engine {engine!r}: duckdb, numpy or spark", param_hint="'--engine'")
    with _status("aggregate", f"counting the reports of {_inputs_text(inputs)}") as status:
        df = agg.counts(inputs)
        status.stage(f"writing {output}")
        write_counts(df, output, inputs)
    _say(f"{int(df['count'].sum()):,} reports, {df['mechanism'].nunique():,} mechanism(s), "
         f"{len(df):,} distinct (mechanism, report) pairs -> {output}")


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
             "Default: ems on ordered domains (lines, grids), dirichlet on categorical ones (docs/estimators.md)"),
    strength: Optional[float] = typer.Option(
        None, "--strength",
        help="ems/dirichlet: the regularization strength (ems: bandwidth in cells; dirichlet: prior "
             "pseudo-count); default: chosen by 5-fold held-out log-likelihood; 0 gives the MLE"),
    output: Optional[Path] = typer.Option(None, "--out", "-o",
                                          help="estimate file (.csv or .json; on a grid the cells' lat/lon "
                                               "centres are included; .geojson: cell polygons for GIS tools)"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="PNG of the estimate (with --ci, its intervals as a band "
                                                             "or error bars; on a grid a lat/lon heatmap)"),
    label: Optional[str] = typer.Option(None, "--label",
                                        help="--plot: the axis label, the column and its unit, e.g. 'age (years)'"),
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
    from localpriv.data.aggregate import aggregate as _aggregate
    from localpriv.inference import estimate as _estimate
    from localpriv.data.formats import ESTIMATE_SUFFIXES, IMAGE_SUFFIXES, check_output
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
    if output is not None and output.suffix.lower() == ".geojson" and not hasattr(dom, "edges"):
        raise LocalPrivError(f"--out {output}: GeoJSON needs a planar grid domain (--domain bbox(...), grid(...) "
                             "or manhattan); write .csv or .json instead")
    if estimator is None:
        from localpriv.estimators import default_estimator
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
        from localpriv.utils.progress import EMProgress
        kwargs["progress"] = EMProgress(estimator, console=err)
    if dom is None:
        est = _estimate_unbounded(inputs, estimator, kwargs)
    else:
        with _status("estimate", f"counting the reports of {_inputs_text(inputs)}"):
            obs = _aggregate(inputs, dom)
        est = _estimate(obs, estimator, **kwargs)
    from contextlib import ExitStack

    from localpriv.data.formats import atomic_output
    with ExitStack() as outputs:  # both outputs appear, or neither (a failed plot drops the estimate)
        out_tmp = outputs.enter_context(atomic_output(output)) if output else None
        plot_tmp = outputs.enter_context(atomic_output(plot)) if plot else None
        stats = est.statistics(stat, ci if ci is not None else 0.95) if stat else {}
        if out_tmp is not None:
            est.save(out_tmp, ci=ci, stats=list(stats) or None)
        if plot_tmp is not None:
            from localpriv.inference.plotting import estimate_figure
            estimate_figure(est, plot_tmp, level=ci, xlabel=label or _recorded_attribute(inputs))
    if est.converged is False:
        _say(_cap_warning(est))
    if not output:
        console.print(_estimate_text(est.to_frame(ci)), highlight=False, soft_wrap=True)
    for name, iv in stats.items():
        console.print(f"{name}: {fmt_number(iv.value)} [{fmt_number(iv.lower)}, {fmt_number(iv.upper)}] "
                      f"({iv.level:.0%}, {iv.method})", highlight=False, soft_wrap=True)
    gap = est.settings.get("gap_reached")
    cert = f"; within {gap:.1g} per report of the maximum log-likelihood" \
        if est.converged and isinstance(gap, float) and gap == gap else ""
    _say((f"{est!r}; log-likelihood {est.loglik:.6g}" if est.loglik is not None else repr(est)) + cert)
    wrote = ([f"the estimate ({len(est.distribution):,} values) -> {output}"] if output else []) + \
        ([f"its plot -> {plot}"] if plot else [])
    if wrote:
        _say("wrote " + ", ".join(wrote))


#: the estimators run by the EM engine, which take --delta, --stop, --max-iter, --accelerate/--plain
EM_ESTIMATORS = ("ibu", "gibu", "ibu-exact", "ibu-support", "ibu-m", "ibu-r", "ems", "dirichlet")
#: ... of which these are regularized and take --strength
REGULARIZED = ("ems", "dirichlet")
STOP_CHOICES = ("gap", "loglik", "max_abs")


def _recorded_attribute(inputs) -> Optional[str]:
    """The values' column that the report files record (format version 2), as a plot label
    (``$`` escaped: a label is text, never mathtext)."""
    from localpriv.data.formats import attribute_of
    name = attribute_of(inputs)
    return None if name is None else name.replace("$", r"\$")


def _estimate_text(df) -> str:
    """An estimate table for people: probabilities and bounds to 4 significant digits, cell
    centres to 6 decimals (about 0.1 m), the files keep full precision."""
    formatters = {col: (lambda v: f"{v:.6f}") for col in ("lat", "lon") if col in df.columns}
    for col in ("probability", "lower", "upper"):
        if col in df.columns:
            formatters[col] = lambda v: fmt_number(v)
    if "value" in df.columns and df["value"].dtype.kind == "f":
        formatters["value"] = lambda v: fmt_number(v, 6)
    return df.to_string(index=False, formatters=formatters)


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
    from localpriv.data.aggregate import DuckDBAggregator
    from localpriv.analysis.likely import estimate_unbounded_integers
    from localpriv.mechanisms import parse
    from localpriv.mechanisms.geometric import Geometric
    if estimator != "ibu":
        raise LocalPrivError("without --domain only ibu applies (on the likely subset of the integers); "
                             "give --domain for other estimators")
    with _status("estimate", f"counting the reports of {_inputs_text(inputs)}"):
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
    as_json: bool = typer.Option(False, "--json", help="print JSON (full precision) instead of a table"),
):
    """Summarize a mechanism's channel and its privacy level computed from it."""
    from localpriv.analysis import analyze_report
    from localpriv.mechanisms import parse
    dom = _domain(domain)
    mech = parse(spec, dom)
    with _status("mechanism", f"analyzing {mech}"):
        report = analyze_report(mech, domain=dom)
    if as_json:
        if show:
            report["channel"] = mech.channel()
        _print_json(report)
        return
    console.print(_report_table(str(mech), report))
    if show:
        with np.printoptions(precision=4, suppress=True, linewidth=160):
            console.print(mech.channel(), highlight=False)


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
    as_json: bool = typer.Option(False, "--json", help="print JSON (full precision) instead of a table"),
):
    """Privacy level (LDP or metric), identifiability and the error bounds that apply; with
    --consistency, the consistency report of seed 001 section 6 with an empirical study."""
    from localpriv.analysis import analyze_report
    from localpriv.data.formats import IMAGE_SUFFIXES, check_output
    from localpriv.mechanisms import parse
    if plot is not None:
        check_output(plot, IMAGE_SUFFIXES, what="plot")
    dom = _domain(domain)
    mech = parse(mechanism, dom)
    with _status("analyze", f"analyzing {mech}") as status:
        report = analyze_report(mech, domain=dom)
        if consistency:
            from localpriv.analysis.consistency import consistency_report
            status.stage(f"consistency study of {mech} ({runs} data sets per n)")
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
        _print_json(report)
    else:
        console.print(_report_table(str(mech), report))
    if plot is not None and not as_json:  # with --json the report names the plot
        _say(f"wrote the convergence plot -> {plot}" if "convergence plot" in report else
             f"no plot written ({plot}): the consistency study has no convergence data"
             + ("" if consistency else "; --plot needs --consistency"))


def fmt_number(value, digits: int = 4) -> str:
    """A number for people: ``digits`` significant digits (epsilons and error bounds), thousands
    grouped, no float noise (0.05000000000000071 -> 0.05, 1.9999999999999996 -> 2), exponent
    notation below 0.001 and from 10^6; integers exact; booleans yes/no."""
    import math
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu"):
        return f"{int(value):,}"
    v = float(value)
    if not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    a = abs(v)
    if 1e-3 <= a < 1e6:
        decimals = max(0, digits - 1 - math.floor(math.log10(a)))
        text = f"{round(v, decimals):,.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{v:.{digits}g}"


def _fmt_value(value) -> str:
    """A report value for a table: numbers by :func:`fmt_number`, lists of numbers element-wise."""
    if isinstance(value, (bool, int, float)) or hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0:
        return fmt_number(value)
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else list(value)
        return "[" + ", ".join(_fmt_value(v) for v in items) + "]"
    return str(value)


def _report_table(title: str, report: dict):
    """Key/value rows (nested dicts as indented rows) as a Rich table."""
    table = Table(title=title, show_header=False, title_justify="left", expand=False)
    table.add_column("what", style="bold", overflow="fold", max_width=48)
    table.add_column("value", overflow="fold")
    for key, value in report.items():
        if isinstance(value, dict):
            table.add_row(key, "")
            for sub, v in value.items():
                table.add_row(f"  {sub}", _fmt_value(v))
        else:
            table.add_row(key, _fmt_value(value))
    return table


def _print_json(report: dict) -> None:
    """Valid JSON on stdout, full precision (non-finite numbers as the strings inf, -inf, nan)."""
    sys.stdout.write(json.dumps(_finite(report), indent=2, default=_jsonable, allow_nan=False) + "\n")
    sys.stdout.flush()


def _finite(obj):
    import math
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return _finite(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if obj != obj else ("inf" if obj > 0 else "-inf")
    return obj


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
    from localpriv.inference.plotting import save
    save(fig, path)


@app.command()
@friendly
def advise(
    domain: str = typer.Option(..., "--domain", "-d", help=DOMAIN_HELP),
    n: int = typer.Option(..., "--n", min=1, help="number of users"),
    eps: Optional[float] = typer.Option(None, "--eps",
                                        help="LDP target: each spec's LDP eps, computed from the mechanism, is at most "
                                             "this"),
    metric_eps: Optional[float] = typer.Option(None, "--metric-eps",
                                               help="metric target per unit of distance (per value on LO..HI, per km "
                                                    "on a grid); with --eps both hold"),
    goal: str = typer.Option("emd", "--goal", help="what the estimate is for: emd | tv | mean | quantiles | topk"),
    values: Optional[Path] = typer.Option(None, "--values",
                                          help="a file of values like yours (CSV, TSV or Parquet): predictions assume "
                                               "their distribution (default: Zipf on labels, a bell on "
                                               "LO..HI and grids)"),
    column: Optional[str] = typer.Option(None, "--column", "-c",
                                         help="--values: the column by name or number (default: the first); "
                                              "'lat,lon' for a grid"),
    top: int = typer.Option(10, "--top", min=1, help="--goal topk: how many of the most frequent values"),
    runs: int = typer.Option(5, "--runs", min=2, help="simulated data sets per mechanism"),
    method: str = typer.Option("auto", "--method",
                               help="auto (simulate where affordable, else analytic) | simulation | analytic"),
    seed: int = typer.Option(0, "--seed", min=0, help="seed of the simulations"),
    as_json: bool = typer.Option(False, "--json", help="print JSON (full precision) instead of a table"),
):
    """Rank the mechanisms that meet a privacy target by predicted error; recommend one and say why."""
    from localpriv.advice.advisor import advise as _advise
    dom = _domain(domain)
    theta = truth = None
    if values is not None:
        from localpriv.data.reports import read_values
        idx = dom.encode(read_values(values, column, domain=dom))
        theta = np.bincount(idx, minlength=dom.size) / idx.size
        truth = f"the distribution of {values} ({idx.size:,} values)"
    with _status("advise", "calibrating and simulating") as status:
        adv = _advise(dom, eps_ldp=eps, eps_metric=metric_eps, n=n, goal=goal, theta=theta, rng=seed, runs=runs,
                      top=top, method=method, truth=truth, progress=status.track)
    if as_json:
        _print_json(adv.to_dict())
        return
    unit = f" ({adv.unit})" if adv.unit else ""
    table = Table(title=f"{goal} error{unit} for n={adv.n:,}; truth: {adv.truth}", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("mechanism spec", overflow="fold")
    table.add_column("LDP eps", justify="right")
    if adv.metric_unit is not None:
        table.add_column(f"metric eps /{adv.metric_unit}", justify="right")
    table.add_column("predicted", justify="right")
    table.add_column(f"{adv.level:.0%} range", justify="right")
    table.add_column("estimator")
    table.add_column("how")
    for i, r in enumerate(adv.rows, 1):
        cells = [str(i), r.spec, fmt_number(r.eps_ldp)]
        if adv.metric_unit is not None:
            cells.append(fmt_number(r.eps_metric))
        cells += [fmt_number(r.error), f"{fmt_number(r.lower)}-{fmt_number(r.upper)}", r.estimator,
                  f"{r.how} ({r.runs})"]
        table.add_row(*cells)
    console.print(table)
    for name, why in adv.skipped.items():
        console.print(f"not evaluated: {name} ({why})", highlight=False, soft_wrap=True)
    console.print(f"recommended: {adv.recommended.spec} -- {adv.reason}", highlight=False, soft_wrap=True)


@app.command()
@friendly
def reproduce(
    name: str = typer.Argument(..., help="experiment name, or 'list' to list them all"),
    out: Path = typer.Option(Path("results"), "--out", "-o", help="output folder"),
    runs: Optional[int] = typer.Option(None, "--runs", "-r", min=1, help="repetitions (default: the experiment's)"),
    seed: int = typer.Option(0, "--seed", min=0, help="seed of the random generator"),
    quick: bool = typer.Option(False, "--quick", help="small, fast configuration (used by the tests)"),
):
    """Rerun one of the seeds' experiments: writes OUT/NAME.json and OUT/NAME.png.

    Runs from a source checkout: the experiments live in its reproductions/, which is not installed."""
    repro = load_reproductions("localpriv reproduce")
    if name == "list":
        for n, e in sorted(repro.EXPERIMENTS.items()):
            console.print(f"{n:24s} {e.description}", highlight=False)
        return
    with _status(f"reproduce {name}") as status:
        rec = repro.run_experiment(name, out, runs=runs, seed=seed, quick=quick,
                                   progress=repro.Progress(rich_progress(status)))
    _say(f"{name}: {rec['elapsed_seconds']:.1f} s; wrote {_written(out, name)}")


@app.command()
@friendly
def demo(out: Path = typer.Option(Path("out/demo"), "--out", "-o",
                                  help="folder of the outputs (demo.json: every number; demo.png: the figure)"),
         seed: int = typer.Option(0, "--seed", min=0, help="seed of the random generator (same seed, same numbers)")):
    """The main job: UCI Adult ages under k-RR eps=2, estimated by INV-N, INV-P and IBU."""
    with _status("demo") as status:
        rec = _demo.run_demo(out, seed=seed, progress=rich_progress(status))
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
    _say(f"demo: {rec['elapsed_seconds']:.1f} s; wrote {_written(out, 'demo')}")


def _written(out: Path, name: str) -> str:
    """The files an experiment wrote: ``out/name.json`` (numbers) and, if drawn, ``out/name.png``."""
    files = [out / f"{name}.json"] + ([out / f"{name}.png"] if (out / f"{name}.png").exists() else [])
    return ", ".join(f"{f} ({'numbers' if f.suffix == '.json' else 'figure'})" for f in files)


@app.command()
@friendly
def serve(db: str = typer.Option("localpriv-collector.sqlite", "--db",
                                 help="postgresql://... or an SQLite file (created if missing)"),
          host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (default: loopback only)"),
          port: int = typer.Option(8000, "--port", help="TCP port"),
          max_body: int = typer.Option(8 << 20, "--max-body", help="bytes: larger request bodies are refused (413)"),
          admin_token_file: Optional[Path] = typer.Option(
              None, "--admin-token-file", help="file holding the admin token (default: $LOCALPRIV_ADMIN_TOKEN, "
                                               "else a new token printed once)")):
    """Run the collector service: HTTP API, counts in SQLite or PostgreSQL, estimates, a dashboard
    (docs/service.md)."""
    from localpriv.service import serve as _serve  # FastAPI and uvicorn load here only
    token = None
    if admin_token_file is not None:
        token = admin_token_file.read_text(encoding="utf-8").strip()
    _serve(db, host, port, token, max_body)


@app.command("heavy-hitters")
@friendly
def heavy_hitters_(
    input: Path = typer.Argument(..., help="CSV, TSV (.tsv, .tsv.gz) or Parquet file of string values, "
                                           "one per user"),
    column: Optional[str] = typer.Option(None, "--column", "-c",
                                         help="column of values by name or number (1 = first; default: the first)"),
    k: int = typer.Option(10, "--k", min=1, help="number of heavy hitters to find"),
    eps: float = typer.Option(..., "--eps", help="each user's LDP level (one report per user)"),
    method: str = typer.Option("pem", "--method",
                               help="pem (prefix extending, Wang et al. IEEE TDSC 2021) or treehist (threshold "
                                    "pruning, final frequencies from a group of its own: Bassily et al. 2017)"),
    max_length: int = typer.Option(8, "--max-length", min=1,
                                   help="symbols kept per value (UTF-8 bytes, or characters with --alphabet); "
                                        "longer values are cut and counted"),
    alphabet: Optional[str] = typer.Option(None, "--alphabet",
                                           help="the values' characters, for a compact encoding: digits, hex, "
                                                "lower, alnum or the characters themselves (default: UTF-8 bytes)"),
    bits_per_round: Optional[int] = typer.Option(None, "--bits-per-round", min=1, max=20,
                                                 help="bits added per round (default: the whole symbols that "
                                                      "fit in 8 bits)"),
    start_bits: Optional[int] = typer.Option(None, "--start-bits", min=0,
                                             help="bits before the first round (default: 0 for bytes, one "
                                                  "symbol for an alphabet)"),
    ci: float = typer.Option(0.95, "--ci", help="confidence level of the intervals"),
    output: Optional[Path] = typer.Option(None, "--out", "-o", help="result file (.json)"),
    seed: Optional[int] = typer.Option(None, "--seed", min=0,
                                       help="seed for a reproducible experiment; without it a cryptographically "
                                            "secure generator seeded by the OS"),
    header: bool = typer.Option(True, "--header/--no-header",
                                help="--no-header: the CSV/TSV file's first line is data (give --column by number)"),
    drop_missing: bool = typer.Option(False, "--drop-missing",
                                      help="drop missing values (counted and reported) instead of failing"),
):
    """Find the top-k strings of a column under LDP (users simulated from the file), with their
    estimated frequencies and intervals (docs/heavy-hitters.md)."""
    from localpriv.data.formats import check_output
    from localpriv.heavy_hitters.pem import PEMPlan, StringEncoding, heavy_hitters, read_strings
    if output is not None:
        check_output(output, (".json",), [input], what="heavy-hitters file")
    if not 0.0 < ci < 1.0:
        raise typer.BadParameter(f"{ci} is not a level strictly between 0 and 1 (e.g. 0.95)", param_hint="'--ci'")
    from localpriv.heavy_hitters.pem import METHODS
    if method not in METHODS:
        raise typer.BadParameter(f"{method!r} is not one of {', '.join(METHODS)}", param_hint="'--method'")
    plan = PEMPlan(eps, StringEncoding(max_length, alphabet), start_bits, bits_per_round,
                   final_group=method == "treehist")  # refuse before reading
    with _status("heavy-hitters", f"reading {input}") as status:
        values, stats = read_strings(input, column, header=header, drop_missing=drop_missing)
        status.stage(f"{method}: {len(values):,} users")
        rounds = status.task("rounds", plan.report_groups)
        res = heavy_hitters(values, k, eps, _generator(seed), method, max_length=max_length, alphabet=alphabet,
                            start_bits=start_bits, bits_per_round=bits_per_round, level=ci,
                            progress=lambda done, total: rounds.update(done), where=str(input))
        if output is not None:
            res.save(output, extra={"input": str(input), "column": column, "rows": stats["rows"],
                                    "dropped_missing": stats["dropped"], "seed": seed})
    table = Table(title=f"top {k} by {method}, eps {fmt_number(eps)}, {res.n:,} users", title_justify="left")
    for name, just in (("#", "right"), ("value", "left"), ("estimate", "right"),
                       (f"{ci:.0%} interval", "right"), ("users (est.)", "right")):
        table.add_column(name, justify=just, overflow="fold")
    for i, (v, e, lo, hi) in enumerate(zip(res.values, res.estimates, res.lower, res.upper)):
        table.add_row(str(i + 1), v, fmt_number(float(e)), f"[{fmt_number(float(lo))}, {fmt_number(float(hi))}]",
                      f"{e * res.n:,.0f}")
    console.print(table, highlight=False, soft_wrap=True)
    dropped = f", {stats['dropped']:,} missing value(s) dropped" if stats["dropped"] else ""
    final = " + a final group of whole strings" if plan.final_group else ""
    prefixes = ", ".join(map(str, plan.describe()["prefix_bits"]))
    _say(f"{res!r}: {plan.report_groups} groups, prefixes of {prefixes} bits{final} "
         f"({stats['rows']:,} rows read{dropped})" + (f"; wrote {output}" if output else ""))


@app.command("list")
@friendly
def list_(what: str = typer.Argument("all", help="mechanisms | estimators | experiments | all")):
    """List the registered mechanisms (spec names), estimators and reproducible experiments."""
    from localpriv.estimators import available_estimators
    from localpriv.mechanisms.base import registered
    try:  # the reproductions of a source checkout; none in an installed package
        experiments = sorted(load_reproductions("localpriv list experiments").EXPERIMENTS)
    except LocalPrivError:
        experiments = []
    groups = {"mechanisms": sorted(registered()), "estimators": available_estimators(),
              "experiments": experiments}
    if what != "all" and what not in groups:
        raise LocalPrivError(f"unknown list {what!r}: choose mechanisms, estimators, experiments or all")
    for name, items in groups.items():
        if what in ("all", name):
            console.print(f"[bold]{name}[/] ({len(items)}): " + ", ".join(items), highlight=False)


def main(argv=None):  # entry point
    """Run the command line: one-line errors, exit 1 for bad input and 2 for bad usage."""
    from localpriv.utils.signals import interrupt_cleanly, pending_exit
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
        if type(exc).__name__ == "NoArgsIsHelpError":  # `localpriv` alone: the help page, as it is
            sys.stdout.write(exc.format_message().rstrip() + "\n")
            sys.exit(2)
        if debug:
            traceback.print_exc()
        hint = f" (see localpriv {exc.ctx.info_name} --help)" if exc.ctx is not None and \
            exc.ctx.info_name not in (None, "localpriv") else " (see localpriv --help)"
        _say(f"error: {_usage_message(exc)}{hint}")
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


def _usage_message(exc: UsageError) -> str:
    """The usage error in words: several files where a command reads one say so."""
    msg = exc.format_message()
    m = re.match(r"Got unexpected extra argument(?:\(s\)|s)? \((.*)\)$", msg)
    name = exc.ctx.info_name if exc.ctx is not None else None
    if m and name == "perturb":
        extra = m.group(1).split()
        return (f"perturb reads one values file, but {len(extra) + 1} were given (also: {', '.join(extra[:3])}"
                f"{', ...' if len(extra) > 3 else ''}); perturb each into its own report file, then aggregate or "
                "estimate them together (those take many files and globs)")
    return msg


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
