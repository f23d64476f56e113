"""Cost curves of every registered frequency estimator through the public call.

Each point is one ``localpriv.estimate(obs, method)`` on observations already aggregated: the
estimator's whole cost, set-up included (likelihood blocks, batching, compiled kernels already
loaded by a warm-up call), CPU time by ``time.process_time`` with BLAS pinned to one thread
(``_common``). Beside every number the JSON records the stopping rule the estimate reports
(``settings["stopping"]``, ``"acceleration"``, ``"max_iter"``), its EM evaluations, whether it
converged and the certificate reached (``gap_reached``), so a time is never read without the rule
that produced it. Three axes:

* ``reports``: the number of distinct reports ``m``: k-RR on ``0..k-1`` (``m = k``), ``k`` from 10
  to 10^4, ``n = 10^6`` users;
* ``mechanisms``: free-will collections (seed 003) of 1 to 10^3 mechanisms, half k-RR (eps in
  [0.5, 5]), half truncated linear geometric (eps in [0.05, 1]), ``k = 100``, 10^5 users each;
* ``n``: k-RR, ``k = 100``, ``n`` from 10^4 to 10^8.

Reports reduce to counts for these mechanisms, so the counts are drawn directly
(``localpriv.data.freewill.simulate_counts``: ``sum_x Multinomial(n_x, A[x])``), never ``n``
reports one by one. Estimators that refuse an input (a pure-oracle estimator on k-RR, a
single-mechanism one on a collection) are recorded with their one-line refusal. A point that took
more than ``--cap`` CPU seconds ends that estimator's curve on that axis (the rest are recorded as
skipped). The default estimator (``auto`` once registered) is included by its registry name.

    python benchmarks/cost_curves.py            # the full curves (quiet machine: ~tens of minutes)
    python benchmarks/cost_curves.py --quick    # a smoke run: small points, not a measurement
    python benchmarks/cost_curves.py --out benchmarks/results-cost_curves.json
    python benchmarks/cost_curves.py --methods inv-n-m,ibu-m --axes reports,mechanisms   # some curves only
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, machine, now  # noqa: E402

K = 100
FULL = {"reports": [10, 100, 1000, 10_000], "mechanisms": [1, 10, 100, 1000],
        "n": [10**4, 10**5, 10**6, 10**7, 10**8]}
QUICK = {"reports": [10, 100], "mechanisms": [1, 10], "n": [10**4, 10**6]}
#: CPU seconds after which the rest of an estimator's curve on an axis is skipped
CAP = 120.0


def _theta(k: int) -> np.ndarray:
    """A bimodal law on ``0..k-1`` (the one of ``benchmarks/gibu.py``, scaled to ``k``)."""
    v = np.arange(k) / k
    t = np.exp(-0.5 * ((v - 0.25) / 0.06) ** 2) + 0.6 * np.exp(-0.5 * ((v - 0.7) / 0.1) ** 2) + 1e-3
    return t / t.sum()


def observations(axis: str, x: int, seed: int = 0):
    """The aggregated observations of one point of ``axis`` at value ``x``."""
    from localpriv.data.freewill import simulate_counts
    from localpriv.domains import IntegerDomain

    rng = np.random.default_rng(seed)
    if axis == "reports":
        dom = IntegerDomain(0, x - 1)
        return simulate_counts(_theta(x), ["krr(eps=1.0)"], [1_000_000], rng, dom)
    dom = IntegerDomain(0, K - 1)
    if axis == "n":
        return simulate_counts(_theta(K), ["krr(eps=1.0)"], [x], rng, dom)
    specs = [f"krr(eps={0.5 + 4.5 * i / x:.4f})" if i % 2 == 0 else
             f"geometric(eps={0.05 + 0.95 * i / x:.4f},lo=0,hi={K - 1})" for i in range(x)]
    return simulate_counts(_theta(K), specs, np.full(x, 100_000), rng, dom)


def point(method: str, obs) -> dict:
    """One public call: CPU and wall time, and the stopping rule beside them."""
    import localpriv
    from localpriv.utils.errors import LocalPrivError

    c0, w0 = time.process_time(), time.perf_counter()
    try:
        est = localpriv.estimate(obs, method)
    except LocalPrivError as e:
        return {"refused": str(e)}
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    s = est.settings
    return {"cpu_seconds": cpu, "wall_seconds": wall, "iterations": est.iterations,
            "converged": est.converged, "stopping": s.get("stopping", "closed form (no iteration)"),
            "acceleration": s.get("acceleration"), "delta": s.get("delta"), "max_iter": s.get("max_iter"),
            "gap_reached": s.get("gap_reached"),
            "cv_fits": (est.extra.get("cv") or {}).get("fits")}  # fits of a strength selection, if any


def frequency_estimators() -> list[str]:
    """Every registered estimator (all estimate a frequency vector), the default first."""
    from localpriv.estimators.registry import REGISTRY

    names = sorted(REGISTRY)
    return (["auto"] if "auto" in names else []) + [n for n in names if n != "auto"]


def run(grid: dict, cap: float = CAP, methods: list[str] | None = None) -> dict:
    from localpriv.utils.errors import PrivacyWarning

    warnings.simplefilter("ignore", PrivacyWarning)  # the collections' geometric members warn of their LDP eps
    methods = methods or frequency_estimators()
    out: dict = {"benchmark": "cost_curves", "started": now(), "machine": machine(), "axes": grid,
                 "cap_cpu_seconds": cap, "methods": methods, "curves": []}
    warm = observations("mechanisms", 2)
    for m in methods:  # compiled kernels and lazy imports outside the measured calls
        point(m, warm)
    for axis, values in grid.items():
        stopped: dict[str, float] = {}
        for x in values:
            obs = observations(axis, x)
            n_reports = int(obs.n)
            distinct = int(sum(b.counts.size for b in obs.blocks))
            for m in methods:
                row = {"axis": axis, "x": x, "method": m, "n": n_reports, "distinct_reports": distinct,
                       "mechanisms": len(obs.blocks)}
                if m in stopped:
                    row["skipped"] = f"previous point took {stopped[m]:.1f} s CPU > cap {cap} s"
                else:
                    row.update(point(m, obs))
                    if row.get("cpu_seconds", 0.0) > cap:
                        stopped[m] = row["cpu_seconds"]
                out["curves"].append(row)
                print(f"# {axis}={x} {m}: {row.get('cpu_seconds', row.get('refused', row.get('skipped')))}",
                      file=sys.stderr, flush=True)
    out["load_after"] = machine()["load"]
    out["finished"] = now()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small points: a smoke run, not a measurement")
    ap.add_argument("--cap", type=float, default=CAP)
    ap.add_argument("--methods", default="", help="comma-separated registry names (default: all)")
    ap.add_argument("--axes", default="", help="comma-separated axes among reports, mechanisms, n (default: all)")
    ap.add_argument("--out", default="", help="write the JSON here (atomically) as well as to stdout")
    args = ap.parse_args()
    grid = QUICK if args.quick else FULL
    axes = [a for a in args.axes.split(",") if a]
    unknown = sorted(set(axes) - set(grid))
    if unknown:
        ap.error(f"unknown axis {unknown[0]!r}; choose among {', '.join(grid)}")
    if axes:
        grid = {a: grid[a] for a in grid if a in axes}
    res = run(grid, args.cap, [m for m in args.methods.split(",") if m] or None)
    res["quick"] = args.quick
    if args.out:
        tmp = Path(args.out).with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1, default=str))
        tmp.replace(args.out)
    emit(res)


if __name__ == "__main__":
    main()
