"""Write the tables of docs/multiattr.md's "Marginals and ranges" section (between the
``multiattr-queries`` markers, and the grouped protocols and multi-freq-ldpy comparison between the
``multiattr-protocols`` markers) from docs/results/multiattr-queries.json."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from localpriv.data.formats import atomic_output

RESULTS = Path("docs/results/multiattr-queries.json")
DOC = Path("docs/multiattr.md")
BEGIN, END = "<!-- multiattr-queries:begin -->", "<!-- multiattr-queries:end -->"
PBEGIN, PEND = "<!-- multiattr-protocols:begin -->", "<!-- multiattr-protocols:end -->"
MFL = ("spl", "smp", "rsfd")
PCOLS = (("marginal_mse_calm_krr", "2-way: calm k-RR"), ("marginal_mse_calm_rrba", "2-way: calm RRBA"),
         ("proto_range1d_mse_hi", "age: hi"), ("proto_range1d_mse_hio", "age: hio"),
         ("proto_range1d_mse_hio_oue", "age: hio OUE"), ("proto_range1d_mse_hio_olh", "age: hio OLH"),
         ("proto_range1d_mse_hdg", "age: hdg"), ("proto_range1d_mse_hierarchy_helper", "age: hierarchy (OUE)"),
         ("proto_range2d_mse_hio", "age x hours: hio"), ("proto_range2d_mse_hio_oue", "age x hours: hio OUE"),
         ("proto_range2d_mse_hio_olh", "age x hours: hio OLH"), ("proto_range2d_mse_hdg", "age x hours: hdg"),
         ("proto_range2d_mse_hdg_response", "age x hours: hdg response matrix"),
         ("proto_range2d_mse_grid_helper", "age x hours: grid (OUE)"))
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
                 f"random ranges each), {'' if res.get('complete', True) else 'up to '}{runs} run(s) per row, "
                 f"seed {record['seed']}"
                 f"{' (reduced run)' if record['quick'] else ''}; bold: the best 1-D range method. "
                 f"SPL, SMP and RS+FD against multi-freq-ldpy: the next section.")
    cost = cells_line(res)
    if cost:
        lines += ["", cost]
    return "\n".join(lines)


def cells_line(res: dict) -> str:
    """Cells done of planned, and the mean CPU seconds of a cell per n (records with cell files)."""
    by_n = res.get("cells_by_n")
    if not by_n:
        return ""
    parts = [f"n = {int(n):,}: {v['done']} of {v['planned']}"
             + (f", {v['mean_cpu_seconds']:.1f} CPU s per cell" if v["mean_cpu_seconds"] is not None else "")
             for n, v in by_n.items()]
    state = "all done" if res.get("complete") else "the rest not run yet; rows average the runs done"
    return (f"Cells (eps, n, run) done: {res['cells_done']} of {res['cells_planned']} ({state}); "
            + "; ".join(parts) + " (CPU time of the cells' runs, on the machine that ran them).")


def protocols_table(record: dict) -> str:
    """The grouped protocols through their reports, and SPL/SMP/RS+FD against multi-freq-ldpy."""
    rows = record["results"]["summary"]
    lines = ["| eps | n | " + " | ".join(label for _, label in PCOLS) + " |", "|" + "---|" * (len(PCOLS) + 2)]
    for row in rows:
        lines.append(f"| {row['eps']:g} | {row['n']:,} | "
                     + " | ".join(f"{row[k]:.2e}" if k in row else "-" for k, _ in PCOLS) + " |")
    spans = []
    for key, label in (("proto_range2d_mse_hio", "k-RR"), ("proto_range2d_mse_hio_oue", "OUE"),
                       ("proto_range2d_mse_hio_olh", "OLH"), ("proto_range2d_mse_hdg", "hdg (k-RR)")):
        vals = [r[key] for r in rows if key in r]
        if vals:
            spans.append(f"{label} {min(vals):.1e} to {max(vals):.1e}")
    if spans:
        lines.append("")
        lines.append("Age x hours ranges, MSE over the rows: hio with " + ", ".join(spans[:-1])
                     + (f"; {spans[-1]}." if len(spans) > 1 else "."))
        keys = ("proto_range2d_mse_hio_oue", "proto_range2d_mse_hio_olh", "proto_range2d_mse_hdg")
        both = [r for r in rows if all(k in r for k in keys)]
        if both:
            ahead = sum(1 for r in both if r[keys[2]] < min(r[keys[0]], r[keys[1]]))
            lines.append(f"hdg has a lower 2-D range MSE than hio with either pure oracle in {ahead} of "
                         f"{len(both)} rows.")
        pair = [r for r in rows if "proto_range2d_mse_hdg" in r and "proto_range2d_mse_hdg_response" in r]
        if pair:
            ratios = [r["proto_range2d_mse_hdg"] / r["proto_range2d_mse_hdg_response"] for r in pair
                      if r["proto_range2d_mse_hdg_response"] > 0]
            better = sum(1 for r in pair if r["proto_range2d_mse_hdg_response"] < r["proto_range2d_mse_hdg"])
            lines.append(f"HDG's response matrix has a lower 2-D range MSE than its grids alone (same reports) in "
                         f"{better} of {len(pair)} rows"
                         + (f"; the grids' MSE is {min(ratios):.2g}x to {max(ratios):.2g}x the matrix's." if ratios
                            else "."))
    lines.append("")
    if not any("mfl_spl_mse_theirs" in r for r in rows):
        lines.append(f"multi-freq-ldpy: {record['results']['multi_freq_ldpy']}.")
        return "\n".join(lines)
    head = ["eps", "n"] + [f"{p.upper()}: {w}" for p in MFL for w in ("ours", "ours simplex", "theirs")]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"{row[f'mfl_{p}_mse_{w}']:.2e}" for p in MFL for w in ("ours_unbiased", "ours_simplex", "theirs")]
        lines.append(f"| {row['eps']:g} | {row['n']:,} | " + " | ".join(cells) + " |")
    diff = max(row[f"mfl_{p}_maxdiff"] for row in rows for p in MFL)
    pairs = [(row[f"mfl_{p}_mse_theirs"], row[f"mfl_{p}_mse_ours_simplex"]) for row in rows for p in MFL]
    clip_wins = sum(1 for t, o in pairs if t < o)
    lines.append("")
    lines.append(f"On the same reports, multi-freq-ldpy's estimate and ours clipped at 0 and renormalized differ by "
                 f"at most {diff:.1e} in any cell: the same estimator. Its clip-and-renormalize has a lower MSE than "
                 f"our projection onto the simplex in {clip_wins} of {len(pairs)} (protocol, eps, n) cells.")
    lines.append("")
    lines.append(f"MSE per cell of the one-way marginals of the six attributes (age, hours in 10-value bins) for "
                 f"SPL, SMP, RS+FD with k-RR ({record['results']['multi_freq_ldpy']}); the grouped protocols' "
                 f"ranges on age and hours in 2-value bins (37 x 50), oracle k-RR unless named (hio also with OUE "
                 f"and OLH), branching 4; "
                 f"{record['params']['runs']} run(s) per row, seed {record['seed']}"
                 f"{' (reduced run)' if record['quick'] else ''}.")
    return "\n".join(lines)


def main() -> int:
    record = json.loads(RESULTS.read_text())
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        print(f"{DOC}: no {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    new = head + BEGIN + "\n" + table(record) + "\n" + END + rest.split(END, 1)[1]
    if PBEGIN in new and PEND in new:
        head, rest = new.split(PBEGIN, 1)
        new = head + PBEGIN + "\n" + protocols_table(record) + "\n" + PEND + rest.split(PEND, 1)[1]
    with atomic_output(DOC) as tmp:
        Path(tmp).write_text(new)
    print(f"wrote the table of {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
