"""Run every benchmark once and print one JSON document (``make bench``; ``--quick`` for a short run).

Benchmarks: ``clients`` (client throughput vs multi-freq-ldpy and pure-ldp), ``ibu`` (IBU vs
multi-freq-ldpy's at the same tolerance), ``planar`` (planar IBU on 10^4..10^6 cells, time and
memory), ``gibu`` (10^3 mechanisms, 10^8 reports), ``oracles`` and ``memory`` (peak
memory of perturb and aggregate at 10^7 and 10^8 values), ``uncertainty`` (cost of a 95 % interval
against the point estimate, k = 100, n = 10^6) and ``import_time`` (CPU and wall time of
``import localpriv`` and ``localpriv --help`` in fresh processes) and ``spark`` (DuckDB path vs hand-written
DuckDB SQL vs Spark local[2] at 10^7 and 10^8 reports, and EM over Spark partitions).
The document is also written to ``benchmarks/results.json`` (``results-NAMES[-quick].json`` for a
subset or a quick run), with the machine, its load average before and after, and the start and end
times; ``benchmarks/report.py`` renders ``RESULTS.md`` from it and the other ``results-*.json``
(``make bench`` runs both). BLAS / OpenMP pools are pinned to one thread (``_common``). Run it on a
quiet machine. Never run by the tests.
"""
from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import emit, load, machine, now, quick_flag  # noqa: E402

NAMES = ["clients", "ibu", "planar", "gibu", "oracles", "memory", "uncertainty", "import_time", "spark"]


def main() -> dict:
    quick = quick_flag()
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = {"machine": machine(), "quick": quick, "started": now(), "load_before": load(), "results": {}}
    for name in only or NAMES:
        if not (HERE / f"{name}.py").exists():
            continue
        t = time.perf_counter()
        try:
            mod = importlib.import_module(name)
            res = mod.run(quick=quick)
        except Exception:
            res = {"error": traceback.format_exc()[-2000:]}
        res["wall_seconds"] = time.perf_counter() - t
        res.setdefault("load_after", load())
        out["results"][name] = res
        print(f"# {name} done in {res['wall_seconds']:.1f} s", file=sys.stderr, flush=True)
    out["load_after"] = load()
    out["finished"] = now()
    stem = "results" + ("-" + "-".join(only) if only else "") + ("-quick" if quick else "")
    tmp = HERE / f"{stem}.json.tmp"
    tmp.write_text(json.dumps(out, indent=2, default=float))
    tmp.replace(HERE / f"{stem}.json")
    return out


if __name__ == "__main__":
    emit(main())
