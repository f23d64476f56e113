"""Profile one cell of the multiattr-queries reproduction (cProfile, CPU time of this process).

    python benchmarks/multiattr_cell_profile.py [--eps 1.0] [--n 1000000] [--out out/multiattr-cell-profile.json]

Runs the cell ``(eps, n, run 0)`` of the full configuration into a scratch cell folder and writes
the functions with the most cumulative and own CPU seconds (``--top`` of each) and the cell's total
to ``--out``. The first cell of a process includes the one-time compilation of the JIT kernels.
Timings: run on a quiet machine (``make multiattr-queries-profile``).
"""
from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's reproductions/
from localpriv.data.formats import atomic_output  # noqa: E402
from reproductions import run_experiment  # noqa: E402


def _rows(stats: pstats.Stats, key: str, top: int) -> list[dict]:
    raw = stats.stats  # type: ignore[attr-defined]
    items = sorted(raw.items(), key=lambda kv: -kv[1][3 if key == "cumulative" else 2])[:top]
    return [{"function": f"{Path(f).name}:{line}({name})", "calls": int(v[1]),
             "own_cpu_seconds": round(float(v[2]), 3), "cumulative_cpu_seconds": round(float(v[3]), 3)}
            for (f, line, name), v in items]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="profile one multiattr-queries cell")
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", default="out/multiattr-cell-profile.json")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        prof = cProfile.Profile(time.process_time)
        t0 = time.process_time()
        prof.enable()
        run_experiment("multiattr-queries", tmp, overrides={"eps": [a.eps], "n": [a.n], "runs": 1,
                                                            "cells_dir": str(Path(tmp) / "cells")})
        prof.disable()
        total = time.process_time() - t0
    stats = pstats.Stats(prof)
    rec = {"eps": a.eps, "n": a.n, "cpu_seconds": round(total, 3),
           "cumulative": _rows(stats, "cumulative", a.top), "own": _rows(stats, "own", a.top)}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(Path(a.out)) as path:
        Path(path).write_text(json.dumps(rec, indent=1))
    print(f"{a.out}: {total:.1f} CPU s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
