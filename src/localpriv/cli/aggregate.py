"""``localpriv aggregate``: count reports per (mechanism, report) into a counts file."""
from __future__ import annotations

from pathlib import Path

import typer

from localpriv.cli.common import DOMAIN_HELP, friendly, inputs_text, say, status_of
from localpriv.cli.options import REPORT_FORMAT_HELP, domain_option, report_inputs
from localpriv.data.aggregate import count_files


@friendly
def aggregate(
    inputs: list[str] = typer.Argument(..., help="report or counts files, globs, folders or hive-partitioned "
                                                 "Parquet datasets (counts files are summed)"),
    output: Path = typer.Option(..., "--out", "-o", help="counts file (.csv or .parquet)"),
    memory_limit: str = typer.Option("2GB", help="DuckDB memory limit (e.g. 512MB, 2GB)"),
    engine: str | None = typer.Option(None, "--engine",
                                      help="duckdb (bounded memory; the default where installed: pip install "
                                           "'localpriv[duckdb]'), numpy (the default without DuckDB), or spark "
                                           "(pip install 'localpriv[spark]'; docs/scale.md)"),
    master: str = typer.Option("local[2]", "--master", help="Spark master with --engine spark: local[N], "
                                                            "spark://host:7077, yarn..."),
    domain: str | None = typer.Option(
        None, "--domain", "-d",
        help="the values' domain, for reports whose mechanism spec leaves it out (planar mechanisms "
             "perturbed with --domain bbox(...), grid(...) or manhattan): " + DOMAIN_HELP),
    fmt: str | None = typer.Option(None, "--format", "-f", help=REPORT_FORMAT_HELP),
) -> None:
    """Count reports per (mechanism, report); counts files among the inputs are summed."""
    dom = domain_option(domain)
    inputs = report_inputs(inputs, fmt)
    stage = f"counting the reports with Spark ({master})" if engine == "spark" else \
        f"counting the reports of {inputs_text(inputs)}"
    with status_of("aggregate", stage) as status:
        res = count_files(inputs, output, engine=engine, memory_limit=memory_limit, domain=dom, master=master,
                          stage=status.stage)
    say(f"{res.reports:,} reports, {res.mechanisms:,} mechanism(s), {res.pairs:,} distinct (mechanism, report) "
        f"pairs -> {output}" + (f" (Spark {master})" if engine == "spark" else ""))
