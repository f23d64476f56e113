"""``localpriv mechanism`` and ``localpriv analyze``: a mechanism's channel, privacy level,
identifiability and error bounds (with --consistency, an empirical convergence study; with
--shuffle N --delta D, the central level of N shuffled reports, :mod:`localpriv.analysis.shuffle`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import typer

from localpriv.analysis import analyze_report
from localpriv.analysis.report import analyze_mechanism
from localpriv.analysis.shuffle import shuffle_report
from localpriv.cli.common import DOMAIN_HELP, console, friendly, print_json, report_table, say, status_of
from localpriv.cli.options import domain_option
from localpriv.data.formats import IMAGE_SUFFIXES, check_output
from localpriv.mechanisms import parse
from localpriv.utils.optional import available, require


@friendly
def mechanism(
    spec: str = typer.Argument(..., help="mechanism spec, e.g. 'krr(k=10,eps=1.0)'"),
    domain: str | None = typer.Option(None, "--domain", "-d", help="LO..HI or labels (fills k)"),
    show: bool = typer.Option(False, "--show", help="print the channel matrix too"),
    as_json: bool = typer.Option(False, "--json", help="print JSON (full precision) instead of a table"),
) -> None:
    """Summarize a mechanism's channel and its privacy level computed from it."""
    dom = domain_option(domain)
    mech = parse(spec, dom)
    with status_of("mechanism", f"analyzing {mech}"):
        report = analyze_report(mech, domain=dom)
    if as_json:
        if show:
            report["channel"] = mech.channel()
        print_json(report)
        return
    console.print(report_table(str(mech), report))
    if show:
        with np.printoptions(precision=4, suppress=True, linewidth=160):
            console.print(mech.channel(), highlight=False)


@friendly
def analyze(
    mechanism: str = typer.Option(..., "--mechanism", "-m", help="mechanism spec"),
    domain: str | None = typer.Option(None, "--domain", "-d", help=DOMAIN_HELP),
    consistency: bool = typer.Option(False, "--consistency",
                                     help="also run the empirical convergence study of IBU (error against n)"),
    runs: int = typer.Option(20, "--runs", min=1, help="--consistency: data sets per n"),
    seed: int = typer.Option(0, "--seed", min=0, help="--consistency: seed of the random generator"),
    plot: Path | None = typer.Option(None, "--plot", help="--consistency: PNG of error against n (log-log)"),
    shuffle: int | None = typer.Option(None, "--shuffle", min=1,
                                       help="central (eps, delta) level of this many shuffled reports (FMT 2021)"),
    delta: float | None = typer.Option(None, "--delta", help="--shuffle: the central delta, in (0, 1)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON (full precision) instead of a table"),
) -> None:
    """Privacy level (LDP or metric), identifiability and the error bounds that apply; with
    --consistency, the consistency report of seed 001 section 6 with an empirical study; with
    --shuffle N --delta D, the central level after a shuffler (numerical and closed form)."""
    if plot is not None:
        check_output(plot, IMAGE_SUFFIXES, what="plot")
        if not available("matplotlib"):  # before the analysis: one line naming the group 'plots'
            require("matplotlib")
    if (shuffle is None) != (delta is None):
        raise typer.BadParameter("--shuffle N and --delta D go together", param_hint="'--shuffle'")
    dom = domain_option(domain)
    mech = parse(mechanism, dom)
    with status_of("analyze", f"analyzing {mech}") as status:
        report = analyze_mechanism(mech, dom, consistency=consistency, runs=runs, seed=seed, plot=plot,
                                   stage=status.stage)
        if shuffle is not None and delta is not None:
            report.update(shuffle_report(mech, shuffle, delta))
    if as_json:
        print_json(report)
    else:
        console.print(report_table(str(mech), report))
    if plot is not None and not as_json:  # with --json the report names the plot
        say(f"wrote the convergence plot -> {plot}" if "convergence plot" in report else
            f"no plot written ({plot}): the consistency study has no convergence data"
            + ("" if consistency else "; --plot needs --consistency"))
