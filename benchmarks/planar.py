"""Planar IBU on square grids (sides 100, 300, 1000: 10^4 to 10^6 cells), planar geometric reports.

Each size runs in its own process so that its peak memory (``ru_maxrss``) is its own. Users
(``n = 10^6``) are drawn from a mixture of Gaussian clusters on the grid, obfuscated by the planar
geometric mechanism of seed 003 section 2.3 (eps = 10 per km on 0.1 km cells: decay 1 per cell),
aggregated, and IBU (SQUAREM-accelerated, seed 001 stopping rule with delta = 1e-6 * n, i.e. 1e-6
per report, on L) runs on the
:class:`localpriv.likelihood.structured.ClampedConvBlock` the mechanism returns. Time = aggregation excluded,
block construction + IBU included, CPU time (``process_time``) and wall time. The FFTs run on
``FFT_WORKERS`` threads (``LOCALPRIV_BENCH_FFT_WORKERS``, default 1: the same single-thread setting
as BLAS in every benchmark, and as ``benchmarks/em_suite.py``'s old/new comparison). ``ROUNDS``
rounds (sizes interleaved: 100, 300, 1000, 100, ...), each a fresh process; median, min, max.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import clock, emit, machine, now, peak_rss_gib, quick_flag, rounds_arg, spread  # noqa: E402

EPS, CELL, N = 10.0, 0.1, 1_000_000
#: seed 001's rule |L(t) - L(t-1)| < delta with delta = 1e-6 per report (L is a sum over reports)
DELTA_PER_REPORT = 1e-6
FFT_WORKERS = int(os.environ.get("LOCALPRIV_BENCH_FFT_WORKERS", "1"))
ROUNDS = 3


def grid_users(side: int, n: int, rng):
    """The benchmark's data: ``n`` users from 8 Gaussian clusters on a ``side x side`` grid of
    0.1 km cells, and the planar geometric mechanism at ``EPS`` per km (also benchmarks/planar_cpu.py)."""
    from localpriv.domains.grid import GridDomain
    from localpriv.mechanisms.planar import PlanarGeometric

    dom = GridDomain(40.70, -74.02, side, side, CELL)
    centres = rng.random((8, 2)) * side
    comp = rng.integers(0, 8, n)
    pts = centres[comp] + rng.normal(scale=side / 20, size=(n, 2))
    rc = np.clip(np.round(pts).astype(np.int64), 0, side - 1)
    return dom, rc[:, 0] * side + rc[:, 1], PlanarGeometric(EPS, domain=dom)


def one(side: int, n: int = N, max_iter: int = 10_000) -> dict:
    import localpriv
    import localpriv.likelihood.structured as structured
    from localpriv.data.observations import ObservationBlock, Observations

    structured.FFT_WORKERS = FFT_WORKERS
    rng = np.random.default_rng(side)
    dom, x, mech = grid_users(side, n, rng)
    t0 = time.perf_counter()
    reports = mech.sample(x, rng)
    t_sample = time.perf_counter() - t0
    z, c = np.unique(reports, return_counts=True)
    obs = Observations([ObservationBlock(mech, z, c)], dom)
    # the public call, the loose stop (its rule is in "settings"; the certified default:
    # benchmarks/planar_certified.py)
    est, c_ibu, t_ibu = clock(localpriv.estimate, obs, "ibu", accelerate="squarem", stop="loglik",
                              max_iter=max_iter, delta=DELTA_PER_REPORT * n)
    truth = np.bincount(x, minlength=side * side) / n
    return {"side": side, "cells": side * side, "n": n, "eps_per_km": EPS, "cell_km": CELL,
            "distinct_reports": int(z.size), "sample_seconds": t_sample, "ibu_seconds": t_ibu,
            "ibu_cpu_seconds": c_ibu, "fft_workers": FFT_WORKERS,
            "iterations": est.iterations, "converged": est.converged, "loglik": est.loglik,
            "settings": est.settings, "stopping": est.settings["stopping"],
            "l1_to_truth": float(np.abs(est.distribution - truth).sum()),
            "peak_rss_gib": peak_rss_gib()}


def run(quick: bool = False, rounds: int | None = None) -> dict:
    sides = [100, 300] if quick else [100, 300, 1000]
    rounds = rounds or (1 if quick else ROUNDS)
    res = {"benchmark": "planar", "started": now(), "machine": machine(), "rounds": rounds,
           "fft_workers": FFT_WORKERS, "quick": quick}
    runs: dict = {side: [] for side in sides}
    for _ in range(rounds):
        for side in sides:
            cmd = [sys.executable, __file__, "--one", str(side)] + (["--quick"] if quick else [])
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                runs[side].append({"side": side, "error": out.stderr[-500:]})
            else:
                runs[side].append(json.loads(out.stdout))
    rows = []
    for side, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        row = dict(ok[-1]) if ok else {"side": side}
        row["rounds"] = len(ok)
        for key in ("ibu_seconds", "ibu_cpu_seconds", "iterations", "peak_rss_gib", "l1_to_truth"):
            row[key + "_spread"] = spread(r.get(key) for r in ok)
        errs = [r["error"] for r in rs if "error" in r]
        if errs:
            row["error"] = errs[-1]
        rows.append(row)
    res["rows"] = rows
    res["load_after"] = machine()["load"]
    res["finished"] = now()
    return res


if __name__ == "__main__":
    if "--one" in sys.argv:
        side = int(sys.argv[sys.argv.index("--one") + 1])
        emit(one(side, n=100_000 if quick_flag() else N))
    else:
        emit(run(quick_flag(), rounds_arg(0) or None))
