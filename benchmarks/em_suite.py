"""The EM engine's measurements in one run (``make bench-em``) -> ``benchmarks/results-em.json``.

* ``em_overhead``: ``benchmarks/em_overhead.py`` (EM per evaluation at k = 100, NumPy engine vs
  the compiled loops, end-to-end IBU against multi-freq-ldpy, JIT cost, batched GIBU with 1,000
  mechanisms), one process.
* ``planar``: ``benchmarks/planar_cpu.py --side 1000`` with the block before the real-FFT one (``old``)
  and the real-FFT block (``new``), one FFT worker, ``ROUNDS`` interleaved rounds (old, new, old,
  new, ...), each a process of its own; medians and the ratio of medians of CPU and wall time.

The machine and its load before and after are recorded: run it when nothing else runs.

    python benchmarks/em_suite.py [--rounds 5] [--quick] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import load, machine  # noqa: E402

OUT = HERE / "results-em.json"


def _run(args) -> dict:
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True)
    return json.loads(r.stdout[r.stdout.index("{"):])  # emit() prints one indented object


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--side", type=int, default=None, help="planar grid side (default 1000; --quick 100)")
    ap.add_argument("--quick", action="store_true", help="smoke test: em_overhead --quick, side 100")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    a.side = a.side or (100 if a.quick else 1000)
    env_ok = os.environ.get("OPENBLAS_NUM_THREADS") == "1"
    out = {"benchmark": "em_suite", "machine": machine(), "blas_pinned": env_ok,
           "load_before": os.getloadavg(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print("em_overhead ...", file=sys.stderr, flush=True)
    out["em_overhead"] = _run([str(HERE / "em_overhead.py")] + (["--quick"] if a.quick else []))
    out["quick"] = a.quick
    runs = {"old": [], "new": []}
    for i in range(a.rounds):
        for mode in ("old", "new"):
            print(f"planar {a.side}x{a.side} {mode}, round {i + 1}/{a.rounds} ...", file=sys.stderr, flush=True)
            runs[mode].append(_run([str(HERE / "planar_cpu.py"), "--side", str(a.side), "--mode", mode,
                                    "--workers", "1"]))
    med = {mode: {key: statistics.median(r[key] for r in rs) for key in ("cpu_seconds", "wall_seconds",
                                                                         "fft_pairs_per_evaluation", "peak_rss_gib")}
           for mode, rs in runs.items()}
    rng = {mode: {key: [min(r[key] for r in rs), max(r[key] for r in rs)] for key in ("cpu_seconds", "wall_seconds")}
           for mode, rs in runs.items()}
    out["planar"] = {"side": a.side, "rounds": a.rounds, "runs": runs, "median": med, "range": rng,
                     "ratio_cpu_new_to_old": med["new"]["cpu_seconds"] / med["old"]["cpu_seconds"],
                     "ratio_wall_new_to_old": med["new"]["wall_seconds"] / med["old"]["wall_seconds"],
                     # both stop on the same certified rule; SQUAREM's steps differ (docs/performance.md)
                     "max_rel_loglik_difference": max(abs(n["loglik"] - o["loglik"]) / abs(o["loglik"])
                                                      for n, o in zip(runs["new"], runs["old"]))}
    out["load_after"] = load()
    out["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    dest = Path(a.out)
    tmp = dest.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=1))
    tmp.replace(dest)
    print(json.dumps({k: out[k] for k in ("load_before", "load_after")} | {"planar": out["planar"]["median"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
