"""IBU on counts: localpriv (structured O(k) block; plain, SQUAREM, SQUAREM + certified Newton
finish) against multi-freq-ldpy.

Same inputs for both: ``n`` users drawn from a truncated geometric distribution over ``k`` values,
k-RR counts or OUE support counts (drawn exactly: ``Binomial(n_x, p) + Binomial(n - n_x, q)`` per
item), eps = 1; same tolerance (``max|theta_t - theta_{t-1}| < 1e-12``, at most 10^4 iterations,
multi-freq-ldpy's rule, which localpriv's em() offers as ``stop="max_abs"``); the log-likelihood of
both results is evaluated by the same function (seed 001 Eq. 2 on the same counts). Times are the
best of three runs for both libraries.
multi-freq-ldpy's IBU is its numba-jitted ``Histogram_estimator.IBU`` on the dense channel, timed
after a JIT warm-up.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, quick_flag, timed  # noqa: E402

from localpriv.estimators.em import em, log_likelihood  # noqa: E402
from localpriv.structured import ScaledIdentityBlock  # noqa: E402

TOL, MAX_ITER, EPS, N = 1e-12, 10_000, 1.0, 1_000_000
REPEAT = 3  # best of 3 wall times, for both libraries (single runs of ~0.1 s vary by +-50%)


def _data(mech: str, k: int, rng):
    x = np.minimum(rng.geometric(min(0.5, 5.0 / k), size=N) - 1, k - 1)
    nx = np.bincount(x, minlength=k)
    e = np.exp(EPS)
    if mech == "krr":
        a, b = e / (k - 1 + e), 1 / (k - 1 + e)
        keep = rng.random(N) < a
        other = rng.integers(0, k - 1, N)
        other += other >= x
        counts = np.bincount(np.where(keep, x, other), minlength=k).astype(float)
    else:  # OUE support counts
        a, b = 0.5, 1 / (e + 1)
        counts = (rng.binomial(nx, a) + rng.binomial(N - nx, b)).astype(float)
    return a, b, counts


def _mfl_ibu(k, a, b, counts):
    from multi_freq_ldpy.estimators.Histogram_estimator import IBU

    A = np.full((k, k), b)
    np.fill_diagonal(A, a)
    return IBU(k, A, counts / counts.sum(), MAX_ITER, TOL, "max_abs")


def run(quick: bool = False) -> dict:
    ks = [100, 1000] if quick else [100, 1000, 2000, 10000]
    rng = np.random.default_rng(2026)
    try:
        import multi_freq_ldpy  # noqa: F401
        have_mfl = True
        _mfl_ibu(10, 0.5, 0.1, np.ones(10))  # JIT warm-up
    except ImportError:
        have_mfl = False
    rows = []
    for mech in ["krr", "oue"]:
        for k in ks:
            a, b, counts = _data(mech, k, rng)
            block = ScaledIdentityBlock(k, a, b, np.arange(k), counts)
            row = {"mechanism": mech, "k": k, "n": N, "eps": EPS, "tol": TOL}
            for scheme in ["none", "squarem", "newton"]:
                t, res = timed(em, [block], k, delta=TOL, max_iter=MAX_ITER, stop="max_abs", accelerate=scheme,
                               repeat=REPEAT)
                row[f"ours_{scheme}"] = {"seconds": t, "iterations": res.iterations,
                                         "converged": res.converged, "loglik": res.loglik}
                if scheme == "newton":
                    row["ours_newton"]["newton_products"] = res.products
            if have_mfl and k <= 2000:
                t, theta = timed(_mfl_ibu, k, a, b, counts, repeat=REPEAT)
                row["mfl"] = {"seconds": t, "loglik": log_likelihood([block], np.asarray(theta))}
                row["speedup_newton"] = t / row["ours_newton"]["seconds"]
                row["speedup_squarem"] = t / row["ours_squarem"]["seconds"]
                row["speedup_plain"] = t / row["ours_none"]["seconds"]
                row["loglik_gain"] = row["ours_newton"]["loglik"] - row["mfl"]["loglik"]
                row["loglik_gain_squarem"] = row["ours_squarem"]["loglik"] - row["mfl"]["loglik"]
            elif have_mfl:
                row["mfl"] = "not run: dense 10^4 x 10^4 channel (800 MB) and ~25x the k=2000 time"
            rows.append(row)
    return {"benchmark": "ibu", "rows": rows}


if __name__ == "__main__":
    emit(run(quick_flag()))
