"""``localpriv perturb``: obfuscate a column of values into a report file (one mechanism, or each
row its own: free will)."""
from __future__ import annotations

from pathlib import Path

import typer
from typer._click.exceptions import UsageError

from localpriv.cli.common import DOMAIN_HELP, friendly, say, status_of
from localpriv.cli.options import FORMAT_HELP, STRIP_HELP, domain_option, generator, input_format, rows_hint
from localpriv.data.formats import require_parquet
from localpriv.data.freewill import perturb_values_file
from localpriv.data.ledger import Ledger, file_release


@friendly
def perturb(
    input: Path = typer.Argument(..., help="CSV, TSV (.tsv, .tsv.gz), Parquet or JSON Lines file of raw values"),
    output: Path = typer.Option(..., "--out", "-o", help="report file (.parquet or .csv)"),
    mechanism: str | None = typer.Option(None, "--mechanism", "-m", "--protocol",
                                            help="mechanism spec of every row, e.g. 'krr(eps=2.0)'; on a product "
                                                 "domain a multi-attribute protocol (--protocol), e.g. "
                                                 "'smp(oue(eps=1.0))' (docs/multiattr.md)"),
    domain: str = typer.Option(..., "--domain", "-d", help=DOMAIN_HELP),
    mechanism_column: str | None = typer.Option(
        None, "--mechanism-column",
        help="free will: the column holding each row's own mechanism spec (e.g. krr(eps=0.5)); rows are "
             "grouped by spec and the report file names each report's mechanism"),
    policy: Path | None = typer.Option(
        None, "--policy",
        help="free will: a .json/.toml file mapping the values of a group column to specs (keys: column, specs, "
             "default, version; docs/freewill.md)"),
    column: str | None = typer.Option(None, "--column", "-c", "--columns",
                                         help="column of values by name or number (1 = first; default: the "
                                              "first); two for a grid, latitude first: 'lat,lon' or '3,4'; one "
                                              "per attribute of a product domain (default: its names), e.g. "
                                              "--columns age,education,hours"),
    header: bool = typer.Option(True, "--header/--no-header",
                                help="--no-header: the CSV/TSV file's first line is data (give --column by number)"),
    outside: str = typer.Option("error", "--outside",
                                help="grid domains: points outside the grid are an error (error), dropped (drop) "
                                     "or moved to the nearest cell (clamp); dropped or moved points are counted"),
    seed: int | None = typer.Option(None, "--seed", min=0,
                                       help="seed for a reproducible experiment; without it a cryptographically "
                                            "secure generator seeded by the OS (use that for real users)"),
    drop_missing: bool = typer.Option(False, "--drop-missing",
                                      help="drop missing values (counted and reported) instead of failing"),
    fmt: str | None = typer.Option(None, "--format", "-f", help=FORMAT_HELP),
    strip: bool = typer.Option(True, "--strip/--no-strip", help=STRIP_HELP),
    ledger: Path | None = typer.Option(None, "--ledger",
                                          help="privacy ledger (JSON, docs/accounting.md): the reports are recorded "
                                               "there before anything is perturbed; with --mechanism only"),
    budget: float | None = typer.Option(None, "--budget", min=0.0,
                                           help="with --ledger: refuse (before perturbing) if the ledger's total eps "
                                                "(basic composition) would exceed this"),
) -> None:
    """Obfuscate a column of values: one report per value (streamed in bounded memory); with
    --mechanism-column or --policy each row applies its own mechanism (free will)."""
    given = [flag for flag, v in (("--mechanism", mechanism), ("--mechanism-column", mechanism_column),
                                  ("--policy", policy)) if v is not None]
    if len(given) != 1:
        raise UsageError("give one of --mechanism (every row), --mechanism-column or --policy (each row its own)"
                         + (f", not {' and '.join(given)}" if given else ""))
    if budget is not None and ledger is None:
        raise UsageError("--budget needs --ledger (the file of what has been released)")
    if ledger is not None and mechanism is None:
        raise UsageError("--ledger works with --mechanism (one mechanism for every row)")
    if output.suffix.lower() == ".parquet":  # without pyarrow: one line before the ledger records anything
        require_parquet(output)
    dom = domain_option(domain)
    fmt = input_format(input, fmt)
    if ledger is not None and mechanism is not None:
        book = Ledger(ledger)
        total = book.record(file_release(input, mechanism, dom, collection=output.name, column=column,
                                         drop_missing=drop_missing, header=header, fmt=fmt, strip=strip), budget)
        say(f"recorded in {ledger}: the ledger now totals eps {total.epsilon:.6g} (basic composition)"
            + (f", budget {budget:g}" if budget is not None else ""))
    with status_of("perturb", f"reading {input}") as status:
        rows = status.task("rows", rows_hint(input), "read")
        res = perturb_values_file(input, output, dom, generator(seed), mechanism=mechanism,
                                  mechanism_column=mechanism_column, policy=policy, column=column,
                                  drop_missing=drop_missing, header=header, outside=outside, progress=rows.update,
                                  fmt=fmt, strip=strip)
    if res.outside:
        did, to = ("dropped", "") if res.outside_action == "drop" else ("moved", " to the nearest cell")
        say(f"{did} {res.outside:,} of {res.rows - res.dropped:,} points outside the grid{to} ({input})")
    dropped = f", {res.dropped:,} missing value(s) dropped" if res.dropped else ""
    what = res.mechanism
    if res.by_mechanism and len(res.by_mechanism) > 1:
        shown = sorted(res.by_mechanism.items(), key=lambda kv: -kv[1])
        what = f"{len(shown)} mechanisms (" + ", ".join(f"{n:,} {m}" for m, n in shown[:4]) + \
            (f", {len(shown) - 4} more" if len(shown) > 4 else "") + ")"
    say(f"wrote {res.reports:,} reports of {what} to {res.path} ({res.rows:,} rows read{dropped})")
