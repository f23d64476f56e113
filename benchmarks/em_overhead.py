"""EM per-evaluation overhead and batched GIBU. Prints one JSON object.

* ``ibu_k100``: k-RR counts at k = 100 (``benchmarks/ibu.py``'s data: n = 10^6, eps = 1, users
  from a truncated geometric law). Per-evaluation time of plain EM (2,000 evaluations, no stopping
  decision) through the NumPy engine (``LOCALPRIV_NUMBA=0``) and the compiled loops; end-to-end
  IBU to ``max|dtheta| < 1e-12`` (the IBU benchmark's rule) with each scheme, median of ``REPEAT``
  (the per-evaluation times with the kernels from the first evaluation, ``COMPILED_AFTER = 0``;
  the end-to-end runs with the default);
  multi-freq-ldpy's jitted IBU on the same counts when it is installed (``make bench``'s venv).
* ``jit``: first-call cost of the compiled kernels in a fresh process with an empty numba cache
  (``NUMBA_CACHE_DIR`` set to a new directory: compile), then again with that cache (load), both
  including ``import numba``.
* ``gibu_1000``: ``benchmarks/gibu.py``'s mixture (k = 100, 500 k-RR with eps 0.5-5, 500 truncated
  geometric with eps 0.05-1), per-evaluation time of the batched blocks against one block per
  mechanism (the engine before the batched GIBU): the time of 25 plain EM evaluations minus that of 5
  (the run's setup, batching included, cancels; reported apart), and the largest relative
  difference of the two iterates after 25.

    python benchmarks/em_overhead.py [--quick]
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, machine, quick_flag  # noqa: E402

REPEAT = 5
#: what the ``seconds`` fields of this benchmark are
STATISTIC = f"median of {REPEAT} wall times (perf_counter), one process"


def _best(fn, repeat=REPEAT):
    """(median wall time of ``repeat`` calls, result of the last call)."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), out


def _krr_counts(k, n, eps, rng):
    x = np.minimum(rng.geometric(min(0.5, 5.0 / k), size=n) - 1, k - 1)
    e = np.exp(eps)
    a, b = e / (k - 1 + e), 1 / (k - 1 + e)
    keep = rng.random(n) < a
    other = rng.integers(0, k - 1, n)
    other += other >= x
    return a, b, np.bincount(np.where(keep, x, other), minlength=k).astype(float)


def ibu_k100(quick: bool) -> dict:
    importlib.import_module("localpriv.estimators.em")
    from localpriv.likelihood.structured import ScaledIdentityBlock
    em_mod = sys.modules["localpriv.estimators.em"]

    k, n = 100, 1_000_000
    a, b, counts = _krr_counts(k, n, 1.0, np.random.default_rng(2026))
    block = ScaledIdentityBlock(k, a, b, np.arange(k), counts)
    evals = 500 if quick else 2000
    out = {"k": k, "n": n, "eps": 1.0, "plain_evaluations": evals, "statistic": STATISTIC}
    em_mod.em([block], k, accelerate="squarem", stop="max_abs", delta=1e-12, max_iter=10_000)  # warm-up/JIT
    for path, flag in (("numpy", "0"), ("compiled", "1")):
        os.environ["LOCALPRIV_NUMBA"] = flag
        after, em_mod.COMPILED_AFTER = em_mod.COMPILED_AFTER, 0  # the per-evaluation cost of each path alone
        t, res = _best(lambda: em_mod.em([block], k, accelerate="none", stop="max_abs", delta=1e-300,
                                         max_iter=evals))
        em_mod.COMPILED_AFTER = after
        row = {"plain_us_per_evaluation": 1e6 * t / res.iterations}
        for scheme in ("none", "squarem", "newton"):
            t, res = _best(lambda scheme=scheme: em_mod.em([block], k, accelerate=scheme, stop="max_abs",
                                                            delta=1e-12, max_iter=10_000))
            row[scheme] = {"seconds": t, "iterations": res.iterations, "converged": res.converged,
                           "loglik": res.loglik}
        out[path] = row
    os.environ.pop("LOCALPRIV_NUMBA", None)
    for scheme in ("none", "squarem", "newton"):
        out[f"speedup_{scheme}"] = out["numpy"][scheme]["seconds"] / out["compiled"][scheme]["seconds"]
    out["same_iterates"] = all(out["numpy"][s]["iterations"] == out["compiled"][s]["iterations"]
                               and out["numpy"][s]["loglik"] == out["compiled"][s]["loglik"]
                               for s in ("none", "squarem", "newton"))
    try:
        from multi_freq_ldpy.estimators.Histogram_estimator import IBU
    except ImportError:
        out["mfl"] = "not installed"
        return out
    A = np.full((k, k), b)
    np.fill_diagonal(A, a)
    IBU(10, np.full((10, 10), 0.1) + 0.4 * np.eye(10), np.full(10, 0.1), 10, 1e-12, "max_abs")  # JIT
    t, _ = _best(lambda: IBU(k, A, counts / counts.sum(), 10_000, 1e-12, "max_abs"))
    out["mfl"] = {"seconds": t}
    for scheme in ("none", "squarem", "newton"):
        out[f"vs_mfl_{scheme}"] = t / out["compiled"][scheme]["seconds"]
    return out


def jit_cost() -> dict:
    code = ("import time; t = time.perf_counter(); c = time.process_time()\n"
            "import numpy as np\n"
            "from localpriv.estimators import _kernels\n"
            "K = _kernels.kernels()\n"
            "r = np.array([0.5]); K['exp_rows'](r, np.ones(3))\n"
            "K['exp_rows_back'](r, np.ones((1, 3)), np.ones((1, 3)))\n"
            "th = np.ones(3) / 3; live = np.zeros(0, dtype=np.int64); z = np.arange(3); c3 = np.ones(3)\n"
            "p = np.full(3, 1 / 3)\n"
            "K['plain_em'](th, p, -1e300, 0.5, 0.1, z, c3, live, 3.0, 1, 1e-9, 0, 5, 1e-280)\n"
            "K['squarem'](th, p, -1e300, 0.5, 0.1, z, c3, live, 3.0, 1, 1e-9, 0, 5, 0, 4.0, np.nan, 1 << 62, 1e-280,"
            " 0.01, 6)\n"
            "print(time.perf_counter() - t, time.process_time() - c)\n")
    base = ("import time; t = time.perf_counter(); c = time.process_time()\n"
            "import numpy as np\nfrom localpriv.estimators import _kernels\n"
            "print(time.perf_counter() - t, time.process_time() - c)\n")
    out = {}
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, NUMBA_CACHE_DIR=d)
        for name, src in (("imports_only", base), ("compile", code), ("cached", code)):
            res = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=env)
            wall, cpu = map(float, res.stdout.split())
            out[name] = {"wall_seconds": wall, "cpu_seconds": cpu}
    return out


def gibu_1000(quick: bool) -> dict:
    importlib.import_module("localpriv.estimators.em")
    from localpriv.data.observations import ObservationBlock, Observations
    from localpriv.mechanisms.geometric import Geometric
    from localpriv.mechanisms.krr import KRR
    em_mod = sys.modules["localpriv.estimators.em"]

    K, n_mech, per = 100, (100 if quick else 1000), 100_000
    rng = np.random.default_rng(31)  # benchmarks/gibu.py's data
    v = np.arange(K)
    theta = np.exp(-0.5 * ((v - 25) / 6) ** 2) + 0.6 * np.exp(-0.5 * ((v - 70) / 10) ** 2)
    theta /= theta.sum()
    blocks = []
    for i in range(n_mech):
        mech = KRR(K, 0.5 + 4.5 * (i / n_mech)) if i % 2 == 0 else Geometric(K, 0.05 + 0.95 * (i / n_mech), 0, K - 1)
        nx = rng.multinomial(per, theta)
        counts = rng.multinomial(nx, mech.channel()).sum(axis=0)
        live = np.flatnonzero(counts)
        blocks.append(ObservationBlock(mech, live, counts[live]))
    lbs = Observations(blocks).likelihood_blocks()
    evals = 20
    start = np.full(K, 1.0 / K)
    em_mod.em(lbs, K, accelerate="none", max_iter=2)  # warm-up (kernels)

    def batched(m):
        return em_mod.em(lbs, K, accelerate="none", stop="max_abs", delta=1e-300, max_iter=m)

    def per_block(m):
        return em_mod._em(list(lbs), K, start.copy(), 1e-300, m, None, False, "none", "max_abs", None)

    # per evaluation: the difference of 5 and 5 + evals evaluations (the run's setup, batching
    # included, cancels); the setup: the 5-evaluation run minus 5 evaluations
    t5b, _ = _best(lambda: batched(5))
    t_b, rb = _best(lambda: batched(5 + evals))
    t5u, _ = _best(lambda: per_block(5))
    t_u, ru = _best(lambda: per_block(5 + evals))
    setup_b, setup_u = t5b - 5 * (t_b - t5b) / evals, t5u - 5 * (t_u - t5u) / evals
    t_b, t_u = t_b - t5b, t_u - t5u
    t_full, est = _best(lambda: em_mod.em(lbs, K, accelerate="squarem", stop="loglik", delta=1e-6, max_iter=10_000),
                        repeat=1)
    return {"k": K, "mechanisms": n_mech, "evaluations": evals, "statistic": STATISTIC,
            "batched_ms_per_evaluation": 1e3 * t_b / evals, "per_block_ms_per_evaluation": 1e3 * t_u / evals,
            "speedup": t_u / t_b, "batched_setup_ms": 1e3 * setup_b, "per_block_setup_ms": 1e3 * setup_u,
            "max_rel_diff_after_25": float(np.abs(rb.theta - ru.theta).max() / ru.theta.max()),
            "squarem_loglik_rule_seconds": t_full, "squarem_iterations": est.iterations,
            "batched_blocks": [type(b).__name__ for b in em_mod._prepare(lbs)]}


if __name__ == "__main__":
    quick = quick_flag()
    emit({"benchmark": "em_overhead", "machine": machine(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                      time.gmtime()),
          "load_average": os.getloadavg(), "ibu_k100": ibu_k100(quick), "jit": jit_cost(),
          "gibu_1000": gibu_1000(quick)})
