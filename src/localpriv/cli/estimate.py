"""``localpriv estimate``: estimate the original distribution from reports or counts (with --ci and
--stat: how sure). :func:`estimator_settings` maps the options to the estimator's settings."""
from __future__ import annotations

import importlib
import importlib.util
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import typer

from localpriv.analysis.files import estimate_files
from localpriv.cli.common import DOMAIN_HELP, console, err, fmt_number, friendly, inputs_text, say, status_of
from localpriv.cli.options import REPORT_FORMAT_HELP, domain_option, report_inputs
from localpriv.data.formats import ESTIMATE_SUFFIXES, IMAGE_SUFFIXES, atomic_output, attribute_of, check_output
from localpriv.domains import Domain, ProductDomain
from localpriv.estimators import REGISTRY, default_estimator, estimator_spec
from localpriv.inference.estimate import Estimate
from localpriv.inference.resolution import MAP_MAX_CELLS
from localpriv.inference.unbiased import has_unbiased_mean
from localpriv.utils.errors import LocalPrivError
from localpriv.utils.optional import available, require
from localpriv.utils.progress import EMProgress

#: the command's options that are estimator settings (option -> setting), declared in the registry
OPTION_SETTINGS = {"--delta": "delta", "--max-iter": "max_iter", "--stop": "stop", "--accelerate": "accelerate",
                   "--plain": "accelerate", "--strength": "strength"}


def takers(setting: str) -> list[str]:
    """The registered estimators that declare ``setting``, in registration order."""
    return [name for name, spec in REGISTRY.items() if any(s.name == setting for s in spec.settings)]


def _declared(setting: str, estimator: str = "ibu") -> Any:
    """The declaration of ``setting`` (by ``estimator``, else by the first estimator declaring it)."""
    for name in (estimator, *takers(setting)):
        for s in estimator_spec(name).settings if name in REGISTRY else ():
            if s.name == setting:
                return s
    raise LocalPrivError(f"no registered estimator declares {setting}")


def option_help(setting: str) -> str:
    """An option's help from the registry's declaration of ``setting``: who takes it, what it is."""
    decl = _declared(setting)
    who = "/".join(takers(setting)) if setting == "strength" else "EM estimators"
    default = "" if decl.default is None else f" (default: the estimator's; ibu's is {decl.default})"
    return f"{who}: {decl.help}{default}"


@friendly
def estimate(
    inputs: list[str] = typer.Argument(..., help="reports or counts (files, globs, folders; counts are summed)"),
    domain: str | None = typer.Option(
        None, "--domain", "-d",
        help=DOMAIN_HELP + "; omit it for untruncated geometric reports: IBU then runs on the likely "
             "subset of the integers (seed 001 section 8)"),
    estimator: str | None = typer.Option(
        None, "--estimator", "-e",
        help=" | ".join(REGISTRY) + " (`localpriv list estimators` says what each is and takes). "
             "Default: ems on ordered domains (lines, grids), dirichlet on categorical ones (docs/estimators.md)"),
    strength: float | None = typer.Option(
        None, "--strength",
        help="ems/dirichlet: the regularization strength (ems: bandwidth in cells; dirichlet: prior "
             "pseudo-count); default: chosen by 5-fold held-out log-likelihood; 0 gives the MLE"),
    output: Path | None = typer.Option(None, "--out", "-o",
                                          help="estimate file (.csv or .json; on a grid the cells' lat/lon "
                                               "centres are included; .geojson: cell polygons for GIS tools)"),
    plot: Path | None = typer.Option(None, "--plot", help="PNG of the estimate: on ordered values, joint (Bonferroni) "
                                                             "intervals over cells merged to the resolution the data "
                                                             "support, with the mean and median (at --ci, default "
                                                             "0.95); on labels, bars (with --ci, error bars); on a "
                                                             "grid, a lat/lon heatmap and, beside it (same name, "
                                                             ".html), an interactive map, cells whose interval "
                                                             "includes 0 left blank"),
    label: str | None = typer.Option(None, "--label",
                                        help="--plot: the axis label, the column and its unit, e.g. 'age (years)'"),
    delta: float | None = typer.Option(None, help=option_help("delta")),
    stop: str | None = typer.Option(None, "--stop", help=option_help("stop")),
    max_iter: int | None = typer.Option(None, min=1, help=option_help("max_iter")),
    accelerate: bool | None = typer.Option(
        None, "--accelerate/--plain",
        help="IBU variants: --accelerate (default) runs SQUAREM with the certified Newton finish where the "
             "blocks allow it (same maximum, far fewer iterations); --plain runs plain EM (seed 001 "
             "Algorithm 1)"),
    ci: float | None = typer.Option(None, "--ci",
                                       help="confidence level, e.g. 0.95: per-cell intervals (lower, upper) in "
                                            "the output and on the plot"),
    stat: str | None = typer.Option(None, "--stat",
                                       help="statistics with their intervals, e.g. mean,median,p90 "
                                            "(mean, var, sd, median, pNN, qX, mean_unbiased, mean_estimate); "
                                            "for pm, hm, duchi and sw reports the mean of a regularized estimate "
                                            "is the maximum-likelihood mean, and mean also gives the reports' "
                                            "unbiased mean (mean_unbiased)"),
    fmt: str | None = typer.Option(None, "--format", "-f", help=REPORT_FORMAT_HELP),
) -> None:
    """Estimate the original distribution from reports or counts (with --ci and --stat: how sure)."""
    if output is not None:
        check_output(output, ESTIMATE_SUFFIXES, inputs, what="estimate file")
    if plot is not None:
        check_output(plot, IMAGE_SUFFIXES, inputs, what="plot")
        if not available("matplotlib"):  # before the fit: one line naming the group 'plots'
            require("matplotlib")
    if ci is not None and not 0.0 < ci < 1.0:
        raise typer.BadParameter(f"{ci} is not a level strictly between 0 and 1 (e.g. 0.95)", param_hint="'--ci'")
    dom = domain_option(domain)
    inputs = report_inputs(inputs, fmt)
    map_path = None  # on a grid, the interactive map beside the PNG (same name, .html)
    if plot is not None and dom is not None and hasattr(dom, "edges"):
        if importlib.util.find_spec("folium") is None:
            say("note: no interactive map: it needs the optional group 'geo' (pip install 'localpriv[geo]')")
        elif dom.size <= MAP_MAX_CELLS:
            map_path = check_output(plot.with_suffix(".html"), (".html",), inputs, what="map")
        else:
            say(f"note: no interactive map: {dom.size:,} cells is more than the limit of {MAP_MAX_CELLS:,}")
    if output is not None and output.suffix.lower() == ".geojson" and not hasattr(dom, "edges"):
        raise LocalPrivError(f"--out {output}: GeoJSON needs a planar grid domain (--domain bbox(...), grid(...) "
                             "or manhattan); write .csv or .json instead")
    estimator, settings = estimator_settings(dom, estimator, strength=strength, delta=delta, stop=stop,
                                             max_iter=max_iter, accelerate=accelerate)
    est = estimate_files(inputs, dom, estimator,
                         counting=lambda: status_of("estimate", f"counting the reports of {inputs_text(inputs)}"),
                         **settings)
    with ExitStack() as outputs:  # both outputs appear, or neither (a failed plot drops the estimate)
        out_tmp = outputs.enter_context(atomic_output(output)) if output else None
        plot_tmp = outputs.enter_context(atomic_output(plot)) if plot else None
        map_tmp = outputs.enter_context(atomic_output(map_path)) if map_path is not None else None
        # several attributes: each attribute's marginal (with intervals at --ci) beside a CSV estimate
        marg_path = output.with_name(output.stem + ".marginals.csv") \
            if output is not None and output.suffix.lower() == ".csv" and isinstance(dom, ProductDomain) else None
        marg_tmp = outputs.enter_context(atomic_output(marg_path)) if marg_path is not None else None
        stats = est.statistics(stat_names(stat, est), ci if ci is not None else 0.95) if stat else {}
        if out_tmp is not None:
            est.save(out_tmp, ci=ci, stats=list(stats) or None)
        if marg_tmp is not None:
            est.marginals(ci).to_csv(marg_tmp, index=False)
        if plot_tmp is not None:  # matplotlib loads with the plotting module only
            plotting = importlib.import_module("localpriv.inference.plotting")
            plotting.estimate_figure(est, plot_tmp, level=ci, xlabel=label or recorded_attribute(inputs))
            if map_tmp is not None:
                plotting.grid_map_html(est, map_tmp, level=0.95 if ci is None else ci)
    if est.converged is False:
        say(cap_warning(est))
    if not output:
        console.print(estimate_text(est.to_frame(ci)), highlight=False, soft_wrap=True)
        if isinstance(dom, ProductDomain):
            console.print(estimate_text(est.marginals(ci)), highlight=False, soft_wrap=True)
    for name, iv in stats.items():
        console.print(f"{name}: {fmt_number(iv.value)} [{fmt_number(iv.lower)}, {fmt_number(iv.upper)}] "
                      f"({iv.level:.0%}, {iv.method})", highlight=False, soft_wrap=True)
    gap = est.settings.get("gap_reached")
    cert = f"; within {gap:.1g} per report of the maximum log-likelihood" \
        if est.converged and isinstance(gap, float) and gap == gap else ""
    say((f"{est!r}; log-likelihood {est.loglik:.6g}" if est.loglik is not None else repr(est)) + cert)
    wrote = ([f"the estimate ({len(est.distribution):,} values) -> {output}"] if output else []) + \
        ([f"the attributes' marginals -> {marg_path}"] if marg_path else []) + \
        ([f"its plot -> {plot}"] if plot else []) + ([f"its map -> {map_path}"] if map_path else [])
    if wrote:
        say("wrote " + ", ".join(wrote))


def stat_names(stat: str, est: Estimate) -> list[str]:
    """``--stat`` as names; ``mean`` brings ``mean_unbiased`` beside it when the reports are those
    of one mechanism with a classic unbiased mean (pm, hm, duchi, sw)."""
    names = [t.strip() for t in stat.split(",") if t.strip()]
    low = [n.lower() for n in names]
    if "mean" in low and "mean_unbiased" not in low and est.observations is not None \
            and has_unbiased_mean(est.observations):
        names.insert(low.index("mean") + 1, "mean_unbiased")
    return names


def estimator_settings(domain: Domain | None, estimator: str | None, *, strength: float | None = None,
                       delta: float | None = None, stop: str | None = None, max_iter: int | None = None,
                       accelerate: bool | None = None) -> tuple[str, dict[str, Any]]:
    """The estimator (default: the domain's) and its settings from the estimate command's options;
    options an estimator does not take are refused. What is not given keeps the library's defaults
    (the certified, accelerated maximum). EM estimators get a progress display."""
    for flag, value in (("--stop", stop), ("--delta", delta), ("--strength", strength)):
        if value is not None:  # a value no estimator could take is bad usage (exit 2)
            try:
                _declared(OPTION_SETTINGS[flag]).check(flag.lstrip("-"), value)
            except LocalPrivError as exc:
                raise typer.BadParameter(str(exc).split(": ", 1)[-1], param_hint=f"'{flag}'") from None
    if estimator is None:
        estimator = default_estimator(domain)
    declared = {s.name for s in estimator_spec(estimator).settings} if estimator in REGISTRY else set()
    given = {"delta": delta, "max_iter": max_iter, "stop": stop,
             "accelerate": None if accelerate is None else ("newton" if accelerate else "none"),
             "strength": strength}
    flags = {"delta": "--delta", "max_iter": "--max-iter", "stop": "--stop",
             "accelerate": "--accelerate" if accelerate else "--plain", "strength": "--strength"}
    for key, value in given.items():
        if value is not None and key not in declared:
            raise LocalPrivError(f"{flags[key]} applies to {'/'.join(takers(key))}, not to {estimator}")
    settings: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    if "progress" in declared:  # progress of long estimates: a bar on a terminal, a status line every ~10 s otherwise
        settings["progress"] = EMProgress(estimator, console=err)
    return estimator, settings


def recorded_attribute(inputs: list[str]) -> str | None:
    """The values' column that the report files record (format version 2), as a plot label
    (``$`` escaped: a label is text, never mathtext)."""
    name = attribute_of(inputs)
    return None if name is None else name.replace("$", r"\$")


def estimate_text(df: Any) -> str:
    """An estimate table for people: probabilities and bounds to 4 significant digits, cell
    centres to 6 decimals (about 0.1 m), the files keep full precision."""
    formatters = {col: (lambda v: f"{v:.6f}") for col in ("lat", "lon") if col in df.columns}
    for col in ("probability", "lower", "upper"):
        if col in df.columns:
            formatters[col] = lambda v: fmt_number(v)
    if "value" in df.columns and df["value"].dtype.kind == "f":
        formatters["value"] = lambda v: fmt_number(v, 6)
    return df.to_string(index=False, formatters=formatters)


def cap_warning(est: Estimate) -> str:
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
