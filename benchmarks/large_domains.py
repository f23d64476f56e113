"""Large-domain frequency oracles against pure-LDP: accuracy and clients.

Data: the location ids of 50,000 of the 138,957 Gowalla check-ins around New York
(``../shared/data/gowalla_nyc_checkins.tsv.gz``, column 5; drawn without replacement with seed 0;
their distinct places, about 12,000, are the domain).
For every eps in :data:`EPS` and every mechanism, each library obfuscates the same n values:

* ``hr`` vs ``pure_ldp.frequency_oracles.hadamard_response`` (HadamardResponseClient/Server),
* ``cms`` vs ``pure_ldp.frequency_oracles.apple_cms`` (CMSClient/Server),
* ``hcms`` vs the same classes with ``is_hadamard=True``,

with the same sketch sizes ``m``, ``d`` (pure-LDP calls ``d`` its ``k``). Reported per cell, medians
over ``ROUNDS`` interleaved rounds (round ``r`` runs every cell once, ours first on even rounds and
theirs first on odd ones; seeds ``r``):

* ``mse_*``: mean over the k places of ``(estimate - true frequency)^2``: pure-LDP's own estimator
  (no post-processing) and ours unbiased (``mech.unbiased``, the same debiasing, no
  post-processing); ``ibu_round0``: ours IBU (``localpriv.estimate(obs, "ibu")``, a distribution)
  in round 0 only, for ``hr`` and ``hcms`` (its cost, seconds to minutes at this k, would dominate
  the run; ``cms``'s EM on packed reports is slower still and is not run here);
* ``client_*``: reports per second of CPU time and of wall time, ours ``mech.sample`` on all n
  values at once (one process, ``OPENBLAS_NUM_THREADS=1``), pure-LDP's ``privatise`` once per value
  (their API); ``client_speedup_cpu`` is the ratio of the medians.

``python benchmarks/large_domains.py [--quick] [--rounds R]`` prints the JSON and writes it to
``benchmarks/results-large_domains.json`` (atomically: a temporary file renamed over it). ``--quick``:
2 rounds on 20,000 check-ins (a smoke test; not written). ``--hr-2e20``: the EM feasibility
measurement of ``hr`` at ``k = 2^20`` (:func:`hr_at_2_20`, about 4 minutes of CPU), stored under
``hr_at_2_20`` in the same results file.
"""
from __future__ import annotations

import gzip
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import emit, machine, quick_flag, version  # noqa: E402

from localpriv import estimate  # noqa: E402
from localpriv.data.observations import ObservationBlock, Observations  # noqa: E402
from localpriv.mechanisms import parse  # noqa: E402

DATA = (Path(os.environ.get("LOCALPRIV_SHARED_DATA", HERE.parent.parent / "shared" / "data"))
        / "gowalla_nyc_checkins.tsv.gz")
EPS = (1.0, 4.0)
M, D = 1024, 64          # sketch width and rows (pure-LDP's m and k)
ROUNDS = 5
#: check-ins per round: pure-LDP's per-value clients and its per-place estimates (k d hashes in
#: Python) keep the whole run within a few minutes at this size
N_USERS = 50_000
#: mechanisms whose IBU runs (once, round 0): cms's packed-report EM is left out of the timed run
IBU_FOR = ("hr", "hcms")
OUT = HERE / "results-large_domains.json"


def load_places(limit: int | None = None) -> np.ndarray:
    """Location ids of ``limit`` check-ins drawn without replacement (seed 0) from the file, encoded
    0..k-1 (k = the distinct places among them)."""
    with gzip.open(DATA, "rt") as f:
        ids = np.array([int(line.rsplit("\t", 1)[1]) for line in f], dtype=np.int64)
    if limit is not None and limit < ids.size:
        ids = ids[np.sort(np.random.default_rng(0).choice(ids.size, size=limit, replace=False))]
    _, x = np.unique(ids, return_inverse=True)
    return x.astype(np.int64)


def _mse(est, truth) -> float:
    return float(np.mean((np.asarray(est, dtype=float) - truth) ** 2))


def _clock(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


# ---- ours -----------------------------------------------------------------------------------
def ours(name: str, eps: float, x: np.ndarray, k: int, truth: np.ndarray, seed: int, ibu: bool) -> dict:
    spec = f"hr(k={k},eps={eps})" if name == "hr" else f"{name}(k={k},eps={eps},m={M},d={D})"
    mech = parse(spec)
    if name != "hr":
        mech.hashes.table(spec)  # the collector's hash table: built once, outside the client timing
    rng = np.random.default_rng(seed)
    reports, cpu, wall = _clock(lambda: mech.sample(x, rng))
    uniq, cnt = (np.unique(reports, axis=0, return_counts=True) if reports.ndim == 2
                 else np.unique(reports, return_counts=True))
    unbiased, u_cpu, _ = _clock(lambda: mech.unbiased(uniq, cnt))
    out = {"spec": str(mech), "client_cpu_s": cpu, "client_wall_s": wall, "mse_unbiased": _mse(unbiased, truth),
           "unbiased_cpu_s": u_cpu, "report_bytes": int(reports.shape[1]) if reports.ndim == 2 else 8}
    if ibu:
        est, i_cpu, _ = _clock(lambda: estimate(Observations([ObservationBlock(mech, uniq, cnt)]), "ibu"))
        out.update(mse_ibu=_mse(est.distribution, truth), ibu_cpu_s=i_cpu, ibu_iterations=est.iterations,
                   ibu_converged=bool(est.converged))
    return out


# ---- pure-LDP -------------------------------------------------------------------------------
def _compat_shims() -> None:
    """Two compatibility shims, nothing else of pure-LDP is touched. pure-LDP 1.2.0's
    ``FreqOracleServer`` calls ``np.zeros(None)`` for the sketch servers (whose domain size is None),
    which NumPy 2 refuses; give that module a ``zeros`` that reads ``None`` as 0, as NumPy 1 did."""
    import pure_ldp.core._freq_oracle_server as fos

    class _NP:
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def zeros(shape, *args, **kw):
            return np.zeros(0 if shape is None else shape, *args, **kw)

    fos.np = _NP()

    # pure-LDP hashes ``xxhash.xxh64(str(data), seed)``; python-xxhash >= 2 (4.1.0 is pinned) refuses
    # str, which its 1.x versions hashed as UTF-8: hand pure_ldp.core an xxh64 that encodes first
    import types

    import pure_ldp.core as core
    import xxhash

    def xxh64(data, seed=0):
        return xxhash.xxh64(data.encode() if isinstance(data, str) else data, seed=seed)

    core.xxhash = types.SimpleNamespace(xxh64=xxh64)


def theirs(name: str, eps: float, x: np.ndarray, k: int, truth: np.ndarray, seed: int) -> dict:
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the other library draws from NumPy's global generator
    ident = lambda v: v  # noqa: E731 - our values are already 0..k-1
    if name == "hr":
        from pure_ldp.frequency_oracles.hadamard_response import HadamardResponseClient, HadamardResponseServer
        server = HadamardResponseServer(eps, k, index_mapper=ident)
        client = HadamardResponseClient(eps, k, server.get_hash_funcs(), index_mapper=ident)
    else:
        from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
        _compat_shims()
        server = CMSServer(eps, D, M, is_hadamard=name == "hcms")
        client = CMSClient(eps, server.get_hash_funcs(), M, is_hadamard=name == "hcms")
    values = x.tolist()
    reports, cpu, wall = _clock(lambda: [client.privatise(v) for v in values])
    for r in reports:
        server.aggregate(r)
    n = len(values)
    if name == "hr":
        server.estimate(0, suppress_warnings=True)  # computes every estimate at once
        est = np.asarray(server.estimated_data, dtype=float) / n
    else:
        est = np.array([server.estimate(v, suppress_warnings=True) for v in range(k)]) / n
    return {"client_cpu_s": cpu, "client_wall_s": wall, "mse": _mse(est, truth)}


def run(quick: bool = False, rounds: int = ROUNDS) -> dict:
    x = load_places(20_000 if quick else N_USERS)
    n, k = x.size, int(x.max()) + 1
    truth = np.bincount(x, minlength=k) / n
    rows: dict[str, dict[str, list]] = {}
    t_start = time.perf_counter()
    for r in range(rounds):
        for eps in EPS:
            for name in ("hr", "cms", "hcms"):
                key = f"{name} eps={eps}"
                cell = rows.setdefault(key, {"ours": [], "theirs": []})
                order = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
                for who in order:
                    c0 = time.process_time()
                    if who == "ours":  # IBU once per cell (round 0), hr and hcms: module docstring
                        cell[who].append(ours(name, eps, x, k, truth, r, ibu=r == 0 and name in IBU_FOR))
                    else:
                        cell[who].append(theirs(name, eps, x, k, truth, seed=r))
                    print(f"round {r} {key} {who}: {time.process_time() - c0:.1f} s CPU", file=sys.stderr, flush=True)
    med = lambda v: float(np.median(v))  # noqa: E731
    cells = {}
    for key, cell in rows.items():
        o, t = cell["ours"], cell["theirs"]
        oc, tc = med([c["client_cpu_s"] for c in o]), med([c["client_cpu_s"] for c in t])
        ow, tw = med([c["client_wall_s"] for c in o]), med([c["client_wall_s"] for c in t])
        cells[key] = {
            "spec": o[0]["spec"], "n": n, "k": k,
            "mse_pure_ldp": med([c["mse"] for c in t]),
            "mse_ours_unbiased": med([c["mse_unbiased"] for c in o]),
            "client_reports_per_cpu_s_ours": n / oc, "client_reports_per_cpu_s_pure_ldp": n / tc,
            "client_reports_per_wall_s_ours": n / ow, "client_reports_per_wall_s_pure_ldp": n / tw,
            "client_speedup_cpu": tc / oc, "client_speedup_wall": tw / ow,
            "ours_unbiased_cpu_s": med([c["unbiased_cpu_s"] for c in o]),
            "ibu_round0": ({key2: o[0][key2] for key2 in ("mse_ibu", "ibu_cpu_s", "ibu_iterations", "ibu_converged")}
                           if "mse_ibu" in o[0] else None),
            "ours_report_bytes": o[0]["report_bytes"],
            "per_round": {"mse_pure_ldp": [c["mse"] for c in t], "mse_ours_unbiased": [c["mse_unbiased"] for c in o],
                          },
        }
    return {
        "benchmark": "large_domains", "data": f"{DATA.name}, column 5 (location id)", "n": n, "k": k,
        "eps": list(EPS), "sketch": {"m": M, "d": D}, "rounds": rounds, "statistic": "median over rounds",
        "quick": quick, "total_wall_s": time.perf_counter() - t_start,
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
        "machine": machine(), "pure-ldp": version("pure-ldp"), "cells": cells,
    }


def hr_at_2_20(n: int = 10 ** 6, seed: int = 0) -> dict:
    """EM feasibility of ``hr`` at ``k = 2^20`` (``--hr-2e20``; not part of the timed comparison).

    ``n`` values from a Zipf(1.1) law on ``2^20`` values (seed 0), ``hr(k=2^20,eps=1.0)`` (``K = 2^21``):
    CPU seconds of the client, of one ``forward`` and one ``backward`` of the block (minimum of 3), of
    the closed-form estimator, of 20 plain EM iterations and of the default engine capped at 40
    iterations, with each one's MSE against the inputs' frequencies."""
    from localpriv.estimators.em import em
    from localpriv.utils.simplex import project_simplex

    k = 2 ** 20
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, k + 1) ** 1.1
    x = rng.choice(k, size=n, p=w / w.sum())
    emp = np.bincount(x, minlength=k) / n
    mech = parse(f"hr(k={k},eps=1.0)")
    r, c_cpu, _ = _clock(lambda: mech.sample(x, rng))
    y, cnt = np.unique(r, return_counts=True)
    block = mech.likelihood_block(y, cnt)
    theta = np.full(k, 1.0 / k)
    best = lambda fn: min(_clock(fn)[1] for _ in range(3))  # noqa: E731
    out = {"k": k, "K": mech.K, "n": n, "distinct_reports": int(y.size), "client_cpu_s": c_cpu,
           "forward_cpu_s": best(lambda: block.forward(theta)),
           "backward_cpu_s": best(lambda: block.backward(np.ones(y.size)))}
    u, out["unbiased_cpu_s"], _ = _clock(lambda: mech.unbiased(y, cnt))
    out["mse_unbiased_projected"] = _mse(project_simplex(u), emp)
    for label, kw in (("plain_em_20", dict(accelerate="none", stop="max_abs", delta=1e-300, max_iter=20)),
                      ("default_em_max_iter_40", dict(max_iter=40))):
        res, cpu, wall = _clock(lambda kw=kw: em([block], k, **kw))
        out[label] = {"cpu_s": cpu, "wall_s": wall, "iterations": res.iterations, "converged": bool(res.converged),
                      "mse": _mse(res.theta, emp)}
    return out


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the results from other users
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


if __name__ == "__main__":
    if "--hr-2e20" in sys.argv:  # stored under "hr_at_2_20" in the results file, the rest kept
        big = {"machine": machine(), "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"), **hr_at_2_20()}
        emit(big)
        stored = json.loads(OUT.read_text()) if OUT.exists() else {}
        stored["hr_at_2_20"] = big
        _write_atomic(OUT, json.dumps(stored, indent=2, default=float) + "\n")
        sys.exit(0)
    rounds = ROUNDS
    if "--rounds" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1])
    quick = quick_flag()
    result = run(quick=quick, rounds=2 if quick else rounds)
    emit(result)
    if not quick:  # the separate hr_at_2_20 measurement (--hr-2e20) stays in the file
        previous = json.loads(OUT.read_text()) if OUT.exists() else {}
        if "hr_at_2_20" in previous:
            result["hr_at_2_20"] = previous["hr_at_2_20"]
        _write_atomic(OUT, json.dumps(result, indent=2, default=float) + "\n")
