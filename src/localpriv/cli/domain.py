"""``localpriv domain``: the distinct values of a column, with counts, for the data owner's review."""
from __future__ import annotations

from pathlib import Path

import typer

from localpriv.cli.common import friendly, say
from localpriv.cli.options import FORMAT_HELP, STRIP_HELP, input_format
from localpriv.data.reports import distinct_values, write_labels


@friendly
def domain(
    input: Path = typer.Argument(..., help="CSV, TSV, Parquet or JSON Lines file of raw values (your own data)"),
    column: str | None = typer.Option(None, "--column", "-c",
                                      help="column by name or number (1 = first; default: the first)"),
    header: bool = typer.Option(True, "--header/--no-header",
                                help="--no-header: the CSV/TSV file's first line is data (give --column by number)"),
    fmt: str | None = typer.Option(None, "--format", "-f", help=FORMAT_HELP),
    strip: bool = typer.Option(True, "--strip/--no-strip", help=STRIP_HELP),
    output: Path | None = typer.Option(None, "--out", "-o",
                                       help="write the labels, one per line, for --domain @FILE (review it first)"),
) -> None:
    """List the distinct values of a column with their counts, on the data owner's side: to review and
    write a domain (--out labels.txt for --domain @labels.txt). Never learn a domain from other
    people's data: the set of values is itself information about them (docs/cli.md)."""
    fmt = input_format(input, fmt)
    res = distinct_values(input, column, header=header, fmt=fmt, strip=strip)
    for value, count in res.values:
        typer.echo(f"{count}\t{value}")
    missing = f", {res.missing:,} missing" if res.missing else ""
    if output is not None:
        write_labels([v for v, _ in res.values], output)
        say(f"wrote {len(res.values):,} labels to {output} ({res.rows:,} rows read{missing})")
    else:
        say(f"{len(res.values):,} distinct values in {res.rows:,} rows{missing}")
