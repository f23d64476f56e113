"""``localpriv heavy-hitters``: the top-k strings of a column under LDP, with their estimated
frequencies and intervals."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from localpriv.cli.common import Table, console, fmt_number, friendly, say, status_of
from localpriv.cli.options import FORMAT_HELP, STRIP_HELP, generator, input_format
from localpriv.heavy_hitters.pem import heavy_hitters_file


@friendly
def heavy_hitters_(
    input: Path = typer.Argument(..., help="CSV, TSV (.tsv, .tsv.gz) or Parquet file of string values, "
                                           "one per user"),
    column: str | None = typer.Option(None, "--column", "-c",
                                         help="column of values by name or number (1 = first; default: the first)"),
    k: int = typer.Option(10, "--k", min=1, help="number of heavy hitters to find"),
    eps: float = typer.Option(..., "--eps", help="each user's LDP level (one report per user)"),
    method: str = typer.Option("pem", "--method",
                               help="pem (prefix extending, Wang et al. IEEE TDSC 2021) or treehist (threshold "
                                    "pruning, final frequencies from a group of its own: Bassily et al. 2017)"),
    max_length: int = typer.Option(8, "--max-length", min=1,
                                   help="symbols kept per value (UTF-8 bytes, or characters with --alphabet); "
                                        "longer values are cut and counted"),
    alphabet: str | None = typer.Option(None, "--alphabet",
                                           help="the values' characters, for a compact encoding: digits, hex, "
                                                "lower, alnum or the characters themselves (default: UTF-8 bytes)"),
    bits_per_round: int | None = typer.Option(None, "--bits-per-round", min=1, max=20,
                                                 help="bits added per round (default: the whole symbols that "
                                                      "fit in 8 bits)"),
    start_bits: int | None = typer.Option(None, "--start-bits", min=0,
                                             help="bits before the first round (default: 0 for bytes, one "
                                                  "symbol for an alphabet)"),
    ci: float = typer.Option(0.95, "--ci", help="confidence level of the intervals"),
    output: Path | None = typer.Option(None, "--out", "-o", help="result file (.json)"),
    seed: int | None = typer.Option(None, "--seed", min=0,
                                       help="seed for a reproducible experiment; without it a cryptographically "
                                            "secure generator seeded by the OS"),
    header: bool = typer.Option(True, "--header/--no-header",
                                help="--no-header: the CSV/TSV file's first line is data (give --column by number)"),
    drop_missing: bool = typer.Option(False, "--drop-missing",
                                      help="drop missing values (counted and reported) instead of failing"),
    fmt: str | None = typer.Option(None, "--format", "-f", help=FORMAT_HELP),
    strip: bool = typer.Option(True, "--strip/--no-strip", help=STRIP_HELP),
) -> None:
    """Find the top-k strings of a column under LDP (users simulated from the file), with their
    estimated frequencies and intervals (docs/heavy-hitters.md)."""
    if not 0.0 < ci < 1.0:
        raise typer.BadParameter(f"{ci} is not a level strictly between 0 and 1 (e.g. 0.95)", param_hint="'--ci'")
    fmt = input_format(input, fmt)
    with status_of("heavy-hitters", f"reading {input}") as status:
        rounds: list[Any] = []  # the task of the rounds' bar, made on the first call

        def progress(done: int, total: int) -> None:
            if not rounds:
                rounds.append(status.task("rounds", total))
            rounds[0].update(done)

        run = heavy_hitters_file(input, k, eps, generator(seed), method, column=column, header=header,
                                 drop_missing=drop_missing, max_length=max_length, alphabet=alphabet,
                                 start_bits=start_bits, bits_per_round=bits_per_round, level=ci, output=output,
                                 extra={"input": str(input), "column": column, "seed": seed},
                                 stage=status.stage, progress=progress, fmt=fmt, strip=strip)
    res, plan, stats = run.result, run.plan, run.stats
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
    say(f"{res!r}: {plan.report_groups} groups, prefixes of {prefixes} bits{final} "
        f"({stats['rows']:,} rows read{dropped})" + (f"; wrote {output}" if output else ""))
