"""Run (resumably, in chunks) and report the multiattr-queries evidence (reproductions/multiattr_queries.py).

    python tools/multiattr_queries_cells.py run [--quick] [--chunk i/m] [--cells DIR]
    python tools/multiattr_queries_cells.py report [--quick] [--cells DIR ...] [--out docs/results]

Each finished cell (eps, n, run) is a file of the cell folder (default out/multiattr-queries-cells/);
a rerun skips the cells there, and several ``run --chunk i/m`` processes (i = 0..m-1) may share
one folder. ``make multiattr-queries-evidence`` runs the full grid (MAQ_CHUNK=i/m: one chunk) and
writes the record and the tables of docs/multiattr.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's reproductions/
from reproductions.multiattr_queries import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
