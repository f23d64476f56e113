"""Cost of a 95 % interval against the point estimate.

k = 100 ages (Adult's empirical distribution on 0..99), n = 10^6 users, k-RR and OUE at eps = 1.
For each mechanism one data set is drawn (seeded); then ``rounds`` interleaved rounds time

* ``point``: the maximum-likelihood estimate (``ibu``, certified Newton finish, settings pinned);
* ``interval``: on that estimate, the uncertainty from scratch (observed information, and for
  these mechanisms the unbiased inverse with its exact covariance) and the 95 % intervals of every
  cell, of the mean and of the median;
* ``bootstrap`` (k-RR only, ``--with-bootstrap``): the parametric bootstrap a user would otherwise
  write (200 replicates, warm-started), for comparison.

Wall and CPU time (``time.process_time``) per step; the ratio interval / point per round, and its
median and range over rounds. BLAS threads are pinned to 1 by ``run_all.py``'s environment or here.

Run: ``python benchmarks/uncertainty.py [--quick]`` (``--quick``: n = 10^5, 3 rounds). Prints JSON.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import emit, machine, now, quick_flag  # noqa: E402

SETTINGS = {"delta": 1e-9, "max_iter": 100_000, "accelerate": "newton", "stop": "loglik"}


def _data(spec: str, n: int, rng):
    from localpriv.data.datasets import adult_ages
    from localpriv.data.observations import Observations
    from localpriv.domains import IntegerDomain
    from localpriv.mechanisms import parse
    dom = IntegerDomain(0, 99)
    x = dom.encode(adult_ages())
    theta = np.bincount(x, minlength=dom.size) / x.size
    mech = parse(spec, dom)
    users = np.repeat(np.arange(dom.size), rng.multinomial(n, theta))
    reports = mech.sample(users, rng)
    return Observations.from_reports(mech, reports, dom)


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def _point(obs):
    from localpriv.inference import estimate
    return estimate(obs, "ibu", **SETTINGS)


def _interval(est):
    est.extra.pop("_uncertainty", None)  # from scratch every round
    lo, hi = est.ci(0.95)
    return lo, hi, est.mean(0.95), est.quantile(0.5, 0.95)


def _bootstrap(est):
    est.extra.pop("_uncertainty", None)
    return est.uncertainty("bootstrap").cell_intervals(0.95)


def run(quick: bool = False, with_bootstrap: bool = False) -> dict:
    n = 10 ** 5 if quick else 10 ** 6
    rounds = 3 if quick else 7
    rng = np.random.default_rng(2026)
    out = {"n": n, "k": 100, "rounds": rounds, "settings": SETTINGS, "started": now(), "load_before": os.getloadavg(),
           "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "mechanisms": {}}
    for spec in ("krr(eps=1.0)", "oue(eps=1.0)"):
        obs = _data(spec, n, rng)
        rows = []
        for _ in range(rounds):  # interleaved: point, interval (, bootstrap) in every round
            est, pw, pc = _timed(lambda obs=obs: _point(obs))
            ivs, iw, ic = _timed(lambda est=est: _interval(est))
            row = {"point_wall": pw, "point_cpu": pc, "interval_wall": iw, "interval_cpu": ic,
                   "ratio_wall": iw / pw, "ratio_cpu": ic / pc}
            if with_bootstrap and spec.startswith("krr"):
                _, bw, bc = _timed(lambda est=est: _bootstrap(est))
                row.update({"bootstrap_wall": bw, "bootstrap_cpu": bc, "bootstrap_ratio_wall": bw / pw})
            rows.append(row)
        mean = ivs[2]
        summary = {key: {"median": float(np.median([r[key] for r in rows])),
                         "min": float(min(r[key] for r in rows)), "max": float(max(r[key] for r in rows))}
                   for key in rows[0]}
        out["mechanisms"][spec] = {"distinct_reports": int(sum(b.counts.size for b in obs.blocks)),
                                   "iterations": est.iterations, "converged": bool(est.converged),
                                   "mean": [mean.value, mean.lower, mean.upper], "mean_method": mean.method,
                                   "summary": summary, "rounds": rows}
    out["load_after"] = os.getloadavg()
    out["finished"] = now()
    return out


if __name__ == "__main__":
    res = run(quick=quick_flag(), with_bootstrap="--with-bootstrap" in sys.argv[1:])
    res["machine"] = machine()
    emit(res)
