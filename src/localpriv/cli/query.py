"""``localpriv query``: marginals and range probabilities of a joint estimate, with intervals when
the joint is fitted here from reports or counts (the logic is :mod:`localpriv.multiattr.query`)."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from localpriv.analysis.files import estimate_files
from localpriv.cli.common import DOMAIN_HELP, friendly, print_json
from localpriv.cli.options import domain_option, report_inputs
from localpriv.data.aggregate import aggregate
from localpriv.data.formats import atomic_output, check_output
from localpriv.domains import ProductDomain
from localpriv.mechanisms.grouped import GroupedMechanism
from localpriv.multiattr.protocols import GroupTables, answer_protocol_queries
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
    direct: bool = typer.Option(False, "--direct", help="reports of calm, hi, hio or hdg: answer from the "
                                                        "protocol's unbiased group tables (CALM consistency, HIO "
                                                        "decompositions) instead of fitting the joint"),
    refine: bool = typer.Option(False, "--refine", help="with --direct on hdg reports: answer from HDG's response "
                                                        "matrices (intervals anchored on the unbiased grid answers)"),
) -> None:
    """Answer marginal and range queries on a joint estimate, with intervals (from reports or counts)."""
    if not 0.0 < ci < 1.0:
        raise typer.BadParameter(f"{ci} is not a level strictly between 0 and 1", param_hint="'--ci'")
    if output is not None:
        check_output(output, (".json",), inputs, what="answers file")
    if refine and not direct:
        raise LocalPrivError("--refine needs --direct (HDG's response matrices are built from its grids)")
    if direct:
        if domain is None:
            raise LocalPrivError("--direct needs --domain (a product domain) and the protocol's reports or counts")
        dom = domain_option(domain)
        if not isinstance(dom, ProductDomain):
            raise LocalPrivError("--direct needs a product domain, e.g. 'product(age=17..90;sex=F,M)'")
        block = aggregate(report_inputs(inputs, fmt), dom).single("--direct")
        if not isinstance(block.mechanism, GroupedMechanism):
            raise LocalPrivError(f"--direct answers reports of calm, hi, hio or hdg, not {block.mechanism.spec_name}")
        tables = GroupTables.from_observed(block.mechanism, block.reports, block.counts)
        answers = answer_protocol_queries(tables, dom, list(marginal), list(range_), ci, refined=refine)
    elif domain is None:
        if len(inputs) != 1:
            raise LocalPrivError("without --domain give one estimate file (.json)")
        answers = answer_queries(JointTable.from_file(inputs[0]), list(marginal), list(range_), ci)
    else:
        est = estimate_files(report_inputs(inputs, fmt), domain_option(domain), estimator)
        answers = answer_queries(JointTable.from_estimate(est), list(marginal), list(range_), ci)
    if output is not None:
        with atomic_output(output) as tmp:
            tmp.write_text(json.dumps(answers, indent=2, default=str))
    print_json(answers)
