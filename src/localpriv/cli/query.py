"""``localpriv query``: marginals and range probabilities of a joint estimate, with intervals when
the joint is fitted here from reports or counts (the logic is :mod:`localpriv.multiattr.query`)."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from localpriv.analysis.files import estimate_files
from localpriv.cli.common import DOMAIN_HELP, friendly, print_json
from localpriv.cli.options import domain_option, report_inputs
from localpriv.data.formats import atomic_output, check_output
from localpriv.multiattr.query import JointTable, answer_queries
from localpriv.utils.errors import LocalPrivError


@friendly
def query(
    inputs: list[str] = typer.Argument(..., help="an estimate file (.json, from localpriv estimate --out), or "
                                                 "reports or counts with --domain (then answers carry intervals)"),
    marginal: list[str] = typer.Option([], "--marginal", "-m", help="attributes of a marginal, e.g. age,sex "
                                                                    "(repeatable)"),
    range_: list[str] = typer.Option([], "--range", "-r", help="a range, e.g. 'age=30..45,hours=50..99' "
                                                               "(inclusive; one label: sex=F; repeatable)"),
    domain: str | None = typer.Option(None, "--domain", "-d", help=DOMAIN_HELP + " (for reports or counts)"),
    estimator: str = typer.Option("ibu", "--estimator", "-e", help="estimator for reports or counts (default: "
                                                                   "ibu, the MLE)"),
    ci: float = typer.Option(0.95, "--ci", help="confidence level of the intervals"),
    output: Path | None = typer.Option(None, "--out", "-o", help="write the answers as JSON here"),
    fmt: str | None = typer.Option(None, "--format", "-f", help="report format (for reports)"),
) -> None:
    """Answer marginal and range queries on a joint estimate, with intervals (from reports or counts)."""
    if not 0.0 < ci < 1.0:
        raise typer.BadParameter(f"{ci} is not a level strictly between 0 and 1", param_hint="'--ci'")
    if output is not None:
        check_output(output, (".json",), inputs, what="answers file")
    if domain is None:
        if len(inputs) != 1:
            raise LocalPrivError("without --domain give one estimate file (.json)")
        table = JointTable.from_file(inputs[0])
    else:
        est = estimate_files(report_inputs(inputs, fmt), domain_option(domain), estimator)
        table = JointTable.from_estimate(est)
    answers = answer_queries(table, list(marginal), list(range_), ci)
    if output is not None:
        with atomic_output(output) as tmp:
            tmp.write_text(json.dumps(answers, indent=2, default=str))
    print_json(answers)
