"""GIBU (seed 003 Algorithm 1) with 10^3 distinct mechanisms over 10^8 aggregated reports.

Domain ``0..k-1`` (k = 100). Half of the mechanisms are k-RR with eps spread over [0.5, 5], half
truncated linear geometric with eps over [0.05, 1] (seed 003's mixtures, scaled up). Each has
10^5 users drawn from a fixed bimodal distribution; their report counts are drawn exactly and in
aggregate (``sum_x Multinomial(n_x, M[x, :])``), i.e. the 10^8 reports never exist one by one --
which is how the estimator sees them anyway. The estimate runs on the structured blocks the
mechanisms return (O(k) for k-RR, O(k + m) exponential-kernel recurrences for geometric),
SQUAREM-accelerated, seed 001 stopping rule (delta = 1e-6 on the total log-likelihood).
The estimate is the public call ``localpriv.estimate(obs, "ibu", ...)``, set-up (the
mechanisms' likelihood blocks, their batching) included; its stopping rule is recorded beside the
times (``settings["stopping"]``). It is timed ``ROUNDS`` times on the same data (CPU ``process_time`` and wall time;
median, min, max); accuracy is the L1 distance to the law the users were drawn from.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import clock, emit, machine, now, peak_rss_gib, quick_flag, rounds_arg, spread  # noqa: E402

K = 100
ROUNDS = 5


def run(quick: bool = False, rounds: int | None = None) -> dict:
    import localpriv
    from localpriv.data.observations import ObservationBlock, Observations
    from localpriv.mechanisms.geometric import Geometric
    from localpriv.mechanisms.krr import KRR

    n_mech = 100 if quick else 1000
    rounds = rounds or (2 if quick else ROUNDS)
    started, mach = now(), machine()
    per = 100_000
    rng = np.random.default_rng(31)
    v = np.arange(K)
    theta = np.exp(-0.5 * ((v - 25) / 6) ** 2) + 0.6 * np.exp(-0.5 * ((v - 70) / 10) ** 2)
    theta /= theta.sum()
    blocks = []
    t0 = time.perf_counter()
    for i in range(n_mech):
        if i % 2 == 0:
            mech = KRR(K, 0.5 + 4.5 * (i / n_mech))
        else:
            mech = Geometric(K, 0.05 + 0.95 * (i / n_mech), 0, K - 1)
        nx = rng.multinomial(per, theta)
        counts = rng.multinomial(nx, mech.channel()).sum(axis=0)
        live = np.flatnonzero(counts)
        blocks.append(ObservationBlock(mech, live, counts[live]))
    t_data = time.perf_counter() - t0
    obs = Observations(blocks)
    cpus, walls = [], []
    for _ in range(rounds):
        # the public call, set-up (likelihood blocks of 10^3 mechanisms, batching) included
        est, c, w = clock(localpriv.estimate, obs, "ibu", accelerate="squarem", stop="loglik", delta=1e-6,
                          max_iter=10_000)
        cpus.append(c)
        walls.append(w)
    return {"benchmark": "gibu", "started": started, "machine": mach, "k": K, "mechanisms": n_mech,
            "reports": int(obs.n), "rounds": rounds, "gibu_cpu": spread(cpus), "gibu_wall": spread(walls),
            "data_seconds": t_data, "gibu_seconds": spread(walls)["median"], "iterations": est.iterations,
            "converged": est.converged, "loglik": est.loglik, "estimator": est.estimator,
            "settings": est.settings,
            "l1_to_truth": float(np.abs(est.distribution - theta).sum()), "peak_rss_gib": peak_rss_gib(),
            "load_after": machine()["load"], "finished": now()}


if __name__ == "__main__":
    emit(run(quick_flag(), rounds_arg(0) or None))
