"""Write the table of docs/multiattr.md's "Marginals and ranges" section (between the
``multiattr-queries`` markers) from docs/results/multiattr-queries.json."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from localpriv.data.formats import atomic_output

RESULTS = Path("docs/results/multiattr-queries.json")
DOC = Path("docs/multiattr.md")
BEGIN, END = "<!-- multiattr-queries:begin -->", "<!-- multiattr-queries:end -->"
COLS = (("marginal_mse_groups_raw", "2-way: groups"), ("marginal_mse_calm", "2-way: CALM"),
        ("range1d_mse_flat_oue", "age: flat OUE"), ("range1d_mse_hierarchy", "age: hierarchy b=4"),
        ("range1d_mse_mle_oue", "age: OUE + IBU"), ("range2d_mse_grid", "age x hours: grid"),
        ("range2d_mse_mle_spl_krr", "age x hours: SPL k-RR + IBU"))


def table(record: dict) -> str:
    """The Markdown table: one row per (eps, n), the MSE of each method."""
    res = record["results"]
    head = "| eps | n | " + " | ".join(label for _, label in COLS) + " |"
    lines = [head, "|" + "---|" * (len(COLS) + 2)]
    for row in res["summary"]:
        best_1d = min(("range1d_mse_flat_oue", "range1d_mse_hierarchy", "range1d_mse_mle_oue"),
                      key=lambda k: row.get(k, float("inf")))
        cells = [(f"**{row[k]:.2e}**" if k == best_1d else f"{row[k]:.2e}") if k in row else "-" for k, _ in COLS]
        lines.append(f"| {row['eps']:g} | {row['n']:,} | " + " | ".join(cells) + " |")
    runs = record["params"]["runs"]
    rows = res["summary"]
    wins = [r for r in rows if r["range1d_mse_mle_oue"] < min(r["range1d_mse_hierarchy"], r["range1d_mse_flat_oue"])]
    lines.append("")
    if wins:
        ratios = [min(r["range1d_mse_hierarchy"], r["range1d_mse_flat_oue"]) / r["range1d_mse_mle_oue"] for r in wins]
        lines.append(f"On age ranges the MLE (OUE + IBU) has the lowest MSE in {len(wins)} of {len(rows)} rows; "
                     f"there the better of hierarchy and flat OUE has {min(ratios):.1f}x to "
                     f"{max(ratios):.1f}x its MSE.")
    else:
        lines.append(f"On age ranges the MLE (OUE + IBU) has the lowest MSE in none of the {len(rows)} rows.")
    lines.append("")
    lines.append(f"MSE per cell (marginals) and per query (ranges of volume "
                 f"{', '.join(str(v) for v in record['params']['volumes'])}, {record['params']['queries']} "
                 f"random ranges each), {runs} run(s) per row, seed {record['seed']}"
                 f"{' (reduced run)' if record['quick'] else ''}; bold: the best 1-D range method. "
                 f"multi-freq-ldpy: {res['multi_freq_ldpy']}.")
    return "\n".join(lines)


def main() -> int:
    record = json.loads(RESULTS.read_text())
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        print(f"{DOC}: no {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    new = head + BEGIN + "\n" + table(record) + "\n" + END + rest.split(END, 1)[1]
    with atomic_output(DOC) as tmp:
        Path(tmp).write_text(new)
    print(f"wrote the table of {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
