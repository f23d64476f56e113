"""The certified planar MLE against the loose stop, through the public call.

The data of ``benchmarks/planar.py`` (planar geometric, eps = 10 per km on 0.1-km cells, ``n``
users from Gaussian clusters on a ``side x side`` grid). Two runs of
``localpriv.estimate(obs, "ibu", ...)`` on the same observations, set-up included, CPU time by
``process_time`` (BLAS and FFTs on one thread):

* ``loose``: SQUAREM, seed 001's rule ``|L(t) - L(t-1)| < 1e-6 n`` (the rule of the planar
  benchmark's numbers);
* ``certified``: the defaults (``stop="gap"``, ``delta = 1e-9`` per report; SQUAREM with the
  Newton finish, whose best point EM steps then certify), with an evaluation budget ``max_iter`` of
  ``BUDGET_FACTOR`` times the loose run's evaluations (the Newton finish's products, recorded as
  ``products``, come on top).

Every ``--every`` evaluations of the certified run the callback records the evaluations, the CPU
time so far and ``L``; the result records the certificate ``gap_reached`` (per report,
``(L_max - L) / n <= gap``) and ``L`` of both runs, so the distance of the loose stop to the
maximum is bounded by ``gap_reached`` of the certified run plus the difference of ``L``.

    python benchmarks/planar_certified.py --side 300 --out benchmarks/results-planar_certified.json
    python benchmarks/planar_certified.py --quick   # side 60, n = 10^5: a smoke run
    python benchmarks/planar_certified.py --side 1000 --budget-factor 5   # a shorter 1000 x 1000 run
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, machine, now  # noqa: E402
from planar import grid_users  # noqa: E402  (the data of benchmarks/planar.py)

#: the certified run's evaluation budget, in loose runs' evaluations (its Newton products come on top)
BUDGET_FACTOR = 20


def run(side: int, n: int, every: int, budget_factor: int = BUDGET_FACTOR) -> dict:
    import localpriv
    import localpriv.likelihood.structured as structured
    from localpriv.data.observations import ObservationBlock, Observations

    structured.FFT_WORKERS = 1
    rng = np.random.default_rng(side)
    dom, x, mech = grid_users(side, n, rng)
    z, c = np.unique(mech.sample(x, rng), return_counts=True)
    obs = Observations([ObservationBlock(mech, z, c)], dom)
    out: dict = {"benchmark": "planar_certified", "started": now(), "machine": machine(), "side": side,
                 "cells": side * side, "n": n, "distinct_reports": int(z.size), "runs": {}}
    c0 = time.process_time()
    loose = localpriv.estimate(obs, "ibu", accelerate="squarem", stop="loglik", delta=1e-6 * n, max_iter=10_000)
    out["runs"]["loose"] = {"cpu_seconds": time.process_time() - c0, "iterations": loose.iterations,
                            "loglik": loose.loglik, "converged": loose.converged, "settings": loose.settings}
    budget = budget_factor * loose.iterations
    trace: list = []
    c0 = time.process_time()

    def cb(t: int, theta: np.ndarray, L: float) -> None:
        if t % every == 0:
            trace.append([t, time.process_time() - c0, L])

    cert = localpriv.estimate(obs, "ibu", max_iter=budget, callback=cb)
    out["runs"]["certified"] = {"cpu_seconds": time.process_time() - c0, "iterations": cert.iterations,
                                "loglik": cert.loglik, "converged": cert.converged, "settings": cert.settings,
                                "budget": budget, "trace": trace,
                                "products": cert.extra.get("products")}
    out["cpu_ratio_certified_to_loose"] = out["runs"]["certified"]["cpu_seconds"] / out["runs"]["loose"]["cpu_seconds"]
    out["loose_within_per_report"] = (cert.settings["gap_reached"] or 0.0) + max(0.0, (cert.loglik - loose.loglik) / n)
    out["load_after"] = machine()["load"]
    out["finished"] = now()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=300)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="side 60, n = 10^5: a smoke run")
    ap.add_argument("--budget-factor", type=int, default=BUDGET_FACTOR,
                    help="the certified run's evaluation budget in loose runs' evaluations (a smaller smoke run)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    res = run(60, 100_000, 10) if args.quick else run(args.side, args.n, args.every, args.budget_factor)
    res["quick"] = args.quick
    if args.out:
        tmp = Path(args.out).with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1, default=float))
        tmp.replace(args.out)
    emit(res)


if __name__ == "__main__":
    main()
