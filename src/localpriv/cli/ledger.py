"""``localpriv ledger show FILE``: what a device has released, per collection and per spec, with
totals by basic composition and by the PLD accountant, and what the total means in plain words."""
from __future__ import annotations

from pathlib import Path

import typer
from typer._click.exceptions import UsageError

from localpriv.cli.common import Table, console, fmt_number, friendly, print_json
from localpriv.data.ledger import Ledger


@friendly
def ledger(
    action: str = typer.Argument(..., help="show: print the ledger's totals"),
    file: Path = typer.Argument(..., help="the ledger file (JSON, docs/accounting.md)"),
    delta: float = typer.Option(1e-6, "--delta", min=0.0, max=0.5,
                                help="delta of the PLD accountant's (eps, delta) totals; 0: basic composition only"),
    as_json: bool = typer.Option(False, "--json", help="print JSON (full precision) instead of tables"),
) -> None:
    """Show a privacy ledger: totals per collection, per mechanism spec and overall (basic composition and
    the PLD accountant's (eps, delta)), and what the total means."""
    if action != "show":
        raise UsageError(f"unknown action {action!r}; the one action is: show")
    if not file.exists():
        raise UsageError(f"no ledger at {file}")
    summary = Ledger(file).summary(delta=delta if delta > 0 else None)
    if as_json:
        print_json(summary)
        return
    pld = f"PLD eps (delta {delta:g})"
    for title, rows in (("per collection", summary["collections"]), ("per mechanism spec", summary["specs"]),
                        ("total", {"all releases": summary["total"]})):
        table = Table(title=f"{file}: {title}", title_justify="left")
        table.add_column({"per collection": "collection", "total": ""}.get(title, "spec"), overflow="fold")
        for col in ("releases", "reports", "basic eps") + ((pld,) if delta > 0 else ()):
            table.add_column(col, justify="right")
        for name, part in rows.items():
            cells = [name or "(none)", f"{part['releases']:,}", f"{part['reports']:,}",
                     fmt_number(part["basic_epsilon"])]
            if delta > 0:
                cells.append(fmt_number(part["pld_epsilon"]))
            table.add_row(*cells)
        console.print(table)
    total = summary["total"]
    if delta > 0 and total["accountant"] != "pld":
        console.print(f"PLD not used: {total['accountant']}", highlight=False, soft_wrap=True)
    console.print(summary["meaning"], highlight=False, soft_wrap=True)
