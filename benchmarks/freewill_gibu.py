"""GIBU (seed 003 Algorithm 1) on 10^7 reports from 100 distinct mechanisms, k = 100.

The issue's acceptance: "GIBU on 10^7 reports from 100 distinct mechanisms (k=100) finishes in
seconds after aggregation". Domain ``0..99``, values binomial(99, 0.5) (seed 003's linear setting),
10^5 users per mechanism. Two mixes: ``krr+geo`` (50 k-RR with eps in [3, 8], 50 truncated linear
geometric with eps in [0.02, 0.87], the ranges of seed 003 Tables V-VI) and ``geo`` (100 truncated
geometric). Aggregated counts are drawn exactly per mechanism
(:func:`localpriv.data.freewill.simulate_counts`), i.e. what aggregation returns; only the estimation
is timed (wall and CPU). Plain EM (Algorithm 1, no acceleration), two stopping rules:

* ``normalized``: seed 003 Algorithm 1's, ``|L/n(t) - L/n(t-1)| < 1e-6``, passed to the engine as
  ``delta = 1e-6 * n`` on the total log-likelihood;
* ``absolute``: seed 001's ``|L(t) - L(t-1)| < 1e-6`` on the total log-likelihood;

each with the mechanisms' blocks merged into dense chunks (``gibu``'s default) and per mechanism
(``merge=False``: structured blocks, one product per mechanism). Prints JSON; ``--quick`` runs the
normalized rule only. Never run by the tests.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, machine, quick_flag  # noqa: E402

K = 100
PER = 100_000
N_MECH = 100


def mechanisms(mix: str) -> list[str]:
    geo = [f"geometric(eps={e:.4f},lo=0,hi={K - 1})"
           for e in np.geomspace(0.02, 0.869, N_MECH // 2 if mix == "krr+geo" else N_MECH)]
    if mix == "geo":
        return geo
    return [f"krr(eps={e:.4f})" for e in np.linspace(3.0, 8.08, N_MECH // 2)] + geo


def run(quick: bool = False) -> dict:
    from localpriv.data.freewill import simulate_counts
    from localpriv.domains import IntegerDomain
    from localpriv.estimators.combination import gibu
    from localpriv.inference.metrics import emd_line

    dom = IntegerDomain(0, K - 1)
    theta = stats.binom.pmf(np.arange(K), K - 1, 0.5)
    rules = {"normalized": lambda n: 1e-6 * n} if quick else {"normalized": lambda n: 1e-6 * n,
                                                               "absolute": lambda n: 1e-6}
    out = {"benchmark": "freewill_gibu", "k": K, "mechanisms": N_MECH, "users_per_mechanism": PER,
           "load_start": os.getloadavg(), "runs": []}
    for mix in ("krr+geo", "geo"):
        rng = np.random.default_rng(5)
        t0 = time.perf_counter()
        obs = simulate_counts(theta, mechanisms(mix), np.full(N_MECH, PER), rng, dom)
        data_s = time.perf_counter() - t0
        for rule, delta in rules.items():
            for merge in (True, False):
                w0, c0 = time.perf_counter(), time.process_time()
                est = gibu(obs, merge=merge, delta=delta(obs.n), max_iter=100_000, stop="loglik", accelerate="none")
                wall, cpu = time.perf_counter() - w0, time.process_time() - c0
                out["runs"].append({
                    "mix": mix, "rule": rule, "delta": delta(obs.n), "merged": merge, "reports": int(obs.n),
                    "distinct_mechanisms": len(obs.blocks), "data_seconds": round(data_s, 3),
                    "wall_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
                    "iterations": est.iterations, "ms_per_iteration": round(1e3 * wall / est.iterations, 3),
                    "converged": est.converged, "emd": emd_line(theta, est.distribution),
                    "load": os.getloadavg()})
                print(f"# {mix} {rule} merged={merge}: {wall:.2f} s wall, {cpu:.2f} s CPU, "
                      f"{est.iterations} iterations", file=sys.stderr, flush=True)
    out["machine"] = machine()
    return out


if __name__ == "__main__":
    emit(run(quick_flag()))
