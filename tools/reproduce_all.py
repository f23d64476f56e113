"""Run every reproduction of docs/reproductions.md's table and regenerate the table.

    python tools/reproduce_all.py [--out docs/results/repro] [--only NAME ...] [--table-only]
                                  [--keep-missing] [--readme docs/reproductions.md]

Each experiment runs with its defaults (the paper's settings) through the one runner, writing
``OUT/NAME.json`` and ``OUT/NAME.png``; then the README's table between its markers is rewritten
from every JSON in OUT (:mod:`reproductions.table`). ``--keep-missing`` keeps the old row,
marked "(not rerun)", for experiments that have no JSON yet.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's reproductions/
from localpriv.utils.validation import LocalPrivError  # noqa: E402
from reproductions import run_experiment  # noqa: E402
from reproductions.table import ROWS, dbsec_tables, freewill_table1, freewill_table2, rewrite_block, rewrite_readme  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/results/repro")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--keep-missing", action="store_true")
    ap.add_argument("--readme", default="docs/reproductions.md")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    names = [n for row in ROWS for n in row.names]
    names = list(dict.fromkeys(names))
    if a.only:
        unknown = sorted(set(a.only) - set(names))
        if unknown:
            print(f"error: not in the table: {', '.join(unknown)}", file=sys.stderr)
            return 2
        names = [n for n in names if n in a.only]
    try:
        if not a.table_only:
            for i, name in enumerate(names, 1):
                t = time.perf_counter()
                print(f"[{i}/{len(names)}] {name}", file=sys.stderr, flush=True)
                run_experiment(name, a.out, seed=a.seed)
                print(f"[{i}/{len(names)}] {name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        rewrite_readme(a.readme, a.out, keep_missing=a.keep_missing)
        for i, render_table in ((1, freewill_table1), (2, freewill_table2)):  # the README's Tables I, II
            path = Path(a.out) / f"freewill-table{i}.json"
            if path.exists():
                rewrite_block(a.readme, f"freewill-table{i}", render_table(json.loads(path.read_text())))
        for name in ("dbsec-one-time", "dbsec-longitudinal"):  # docs/oracles.md's tables
            path = Path(a.out) / f"{name}.json"
            if path.exists():
                rewrite_block(Path(a.readme).parent / "oracles.md", name,
                              dbsec_tables(json.loads(path.read_text())))
    except LocalPrivError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"rewrote the reproduction table of {a.readme} from {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
