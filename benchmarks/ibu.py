"""IBU on counts: localpriv (structured O(k) block; plain EM, SQUAREM, SQUAREM + certified Newton
finish) against multi-freq-ldpy, timed in interleaved rounds, with accuracy against the truth.

Inputs: ``n = 10^6`` users drawn from a geometric law truncated to ``0..k-1`` (success probability
``min(0.5, 5/k)``); k-RR counts, or OUE support counts (drawn exactly: ``Binomial(n_x, 1/2) +
Binomial(n - n_x, q)`` per item, the "ibu-support" pseudo-likelihood both libraries maximise);
eps = 1. Round ``r`` draws its own data set (seed ``2026 + r``) and runs every contender on it, in
the same order each round (interleaved: a change of load hits all alike). Every contender stops on
the same rule, ``max|theta_t - theta_{t-1}| < 1e-12`` or 10^4 iterations (multi-freq-ldpy's rule;
localpriv's ``stop="max_abs"``).

Reported per row: CPU time (``process_time``) and wall time, median / min / max over the rounds,
and the ratios of medians (multi-freq-ldpy / ours); the log-likelihood of every result, evaluated
by the same function (seed 001 Eq. 2 on the same counts), and the difference ``L(ours) -
L(theirs)`` (how much better the estimate fits the reports -- a statement about the optimiser,
*not* about accuracy); and accuracy against the truth: L1 and MSE to the users' histogram
``n_x / n`` (the quantity a frequency oracle estimates), median / min / max over the data sets.
A maximum of the likelihood is not the closest point to the truth: an EM stopped early (at the
iteration cap) is smoothed towards its uniform start and can be closer on these data.

localpriv's k-RR rows run the public call ``localpriv.estimate(obs, "ibu", ...)`` on the aggregated
reports, set-up (the likelihood block) included; its OUE rows call the EM engine on the support-count
block (``localpriv.estimators.em.em``: the library has no public observation of support counts
alone), and their JSON rows say which (``call``).

multi-freq-ldpy's IBU is its numba-jitted ``Histogram_estimator.IBU`` on the dense ``k x k``
channel, compiled before the first round; not run at k = 10^4 (an 800 MB dense channel).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, interleaved, machine, now, quick_flag, rounds_arg, spread, strip_results  # noqa: E402

import localpriv  # noqa: E402
from localpriv.data.observations import ObservationBlock, Observations  # noqa: E402
from localpriv.domains import IntegerDomain  # noqa: E402
from localpriv.estimators.em import em, log_likelihood  # noqa: E402
from localpriv.likelihood.structured import ScaledIdentityBlock  # noqa: E402
from localpriv.mechanisms.krr import KRR  # noqa: E402

TOL, MAX_ITER, EPS, N = 1e-12, 10_000, 1.0, 1_000_000
ROUNDS = 5
SCHEMES = ("none", "squarem", "newton")
MFL_MAX_K = 2000


def _data(mech: str, k: int, n: int, rng):
    """(keep probability a, other probability b, counts, users' histogram) for one data set."""
    x = np.minimum(rng.geometric(min(0.5, 5.0 / k), size=n) - 1, k - 1)
    nx = np.bincount(x, minlength=k)
    e = np.exp(EPS)
    if mech == "krr":
        a, b = e / (k - 1 + e), 1 / (k - 1 + e)
        keep = rng.random(n) < a
        other = rng.integers(0, k - 1, n)
        other += other >= x
        counts = np.bincount(np.where(keep, x, other), minlength=k).astype(float)
    else:  # OUE support counts
        a, b = 0.5, 1 / (e + 1)
        counts = (rng.binomial(nx, a) + rng.binomial(n - nx, b)).astype(float)
    return a, b, counts, nx / n


def _mfl_ibu(k, a, b, counts):
    from multi_freq_ldpy.estimators.Histogram_estimator import IBU

    A = np.full((k, k), b)
    np.fill_diagonal(A, a)
    return np.asarray(IBU(k, A, counts / counts.sum(), MAX_ITER, TOL, "max_abs"), dtype=float)


def _have_mfl() -> bool:
    try:
        import multi_freq_ldpy  # noqa: F401
    except ImportError:
        return False
    _mfl_ibu(10, 0.5, 0.1, np.ones(10))  # JIT compile before any round
    return True


def one_row(mech: str, k: int, n: int, rounds: int, have_mfl: bool) -> dict:
    def setup(r):
        a, b, counts, truth = _data(mech, k, n, np.random.default_rng(2026 + r))
        d = {"block": ScaledIdentityBlock(k, a, b, np.arange(k), counts), "truth": truth, "a": a, "b": b,
             "counts": counts}
        if mech == "krr":  # the aggregated reports, as localpriv.estimate reads them
            live = np.flatnonzero(counts)
            d["obs"] = Observations([ObservationBlock(KRR(k, EPS), live, counts[live])], IntegerDomain(0, k - 1))
        return d

    def ours(scheme):
        def fn(d):
            if "obs" in d:  # the public call, set-up (the likelihood block) included
                est = localpriv.estimate(d["obs"], "ibu", delta=TOL, max_iter=MAX_ITER, stop="max_abs",
                                         accelerate=scheme)
                return {"theta": np.asarray(est.distribution), "iterations": est.iterations,
                        "converged": bool(est.converged), "products": est.extra.get("products"),
                        "stopping": est.settings["stopping"]}
            res = em([d["block"]], k, delta=TOL, max_iter=MAX_ITER, stop="max_abs", accelerate=scheme)
            return {"theta": np.asarray(res.theta), "iterations": res.iterations, "converged": bool(res.converged),
                    "products": getattr(res, "products", None)}
        return fn

    def theirs(d):
        return {"theta": _mfl_ibu(k, d["a"], d["b"], d["counts"]), "iterations": None, "converged": None}

    contenders = {f"ours_{s}": ours(s) for s in SCHEMES}
    if have_mfl and k <= MFL_MAX_K:
        contenders["mfl"] = theirs
    # keep every round's results (accuracy and L per data set), not just the last one
    per_round: dict = {name: [] for name in contenders}

    raw: dict = {name: [] for name in contenders}

    def recording(name, fn):
        def wrapped(d):
            raw[name].append((d, fn(d)))  # scored after the timing
        return wrapped

    timing = interleaved({name: recording(name, fn) for name, fn in contenders.items()}, rounds=rounds,
                         reference="mfl" if "mfl" in contenders else None, setup=setup)
    for name, items in raw.items():
        for d, out in items:
            theta = out["theta"]
            per_round[name].append({
                "loglik": float(log_likelihood([d["block"]], theta)),
                "l1": float(np.abs(theta - d["truth"]).sum()),
                "mse": float(np.mean((theta - d["truth"]) ** 2)),
                "iterations": out["iterations"], "converged": out["converged"], "products": out.get("products")})
    row = {"mechanism": mech, "k": k, "n": n, "eps": EPS, "tol": TOL, "max_iter": MAX_ITER, "rounds": rounds,
           "stopping": "max|theta(t)-theta(t-1)| < 1e-12 or 10^4 evaluations (every contender)",
           "call": ('localpriv.estimate(obs, "ibu", ...), set-up included' if mech == "krr" else
                    "localpriv.estimators.em.em on the support-count block"),
           "timing": strip_results(timing), "contenders": {}}
    for name, recs in per_round.items():
        row["contenders"][name] = {
            "cpu": timing["contenders"][name]["cpu"], "wall": timing["contenders"][name]["wall"],
            "l1_to_truth": spread(r["l1"] for r in recs), "mse_to_truth": spread(r["mse"] for r in recs),
            "iterations": spread(r["iterations"] for r in recs),
            "converged_rounds": sum(bool(r["converged"]) for r in recs) if name != "mfl" else None,
            "loglik_each": [r["loglik"] for r in recs], "l1_each": [r["l1"] for r in recs],
            "mse_each": [r["mse"] for r in recs]}
        if name == "ours_newton":
            row["contenders"][name]["newton_products"] = spread(r["products"] for r in recs)
        if "error" in timing["contenders"][name]:
            row["contenders"][name]["error"] = timing["contenders"][name]["error"]
    if "mfl" in contenders and per_round["mfl"]:
        m = per_round["mfl"]
        for name in contenders:
            if name == "mfl":
                continue
            o = per_round[name]
            row["contenders"][name]["vs_mfl"] = {
                "speedup_cpu": timing["ratios"][name]["cpu"], "speedup_wall": timing["ratios"][name]["wall"],
                # log-likelihood difference: fit to the reports, not accuracy
                "loglik_minus_mfl": spread(a["loglik"] - b["loglik"] for a, b in zip(o, m)),
                # accuracy: positive = ours closer to the truth
                "l1_mfl_minus_ours": spread(b["l1"] - a["l1"] for a, b in zip(o, m)),
                "rounds_ours_closer_l1": sum(a["l1"] < b["l1"] for a, b in zip(o, m))}
    elif have_mfl:
        row["mfl_not_run"] = "dense 10^4 x 10^4 channel (800 MB) and ~25x the k=2000 time"
    return row


def run(quick: bool = False, rounds: int | None = None) -> dict:
    ks = [100, 1000] if quick else [100, 1000, 2000, 10000]
    n = 100_000 if quick else N
    rounds = rounds or (3 if quick else ROUNDS)
    out = {"benchmark": "ibu", "started": now(), "machine": machine(), "n": n, "eps": EPS, "rounds": rounds,
           "tol": TOL, "max_iter": MAX_ITER, "quick": quick}
    have_mfl = _have_mfl()
    warm = _data("krr", 100, 10_000, np.random.default_rng(0))
    em([ScaledIdentityBlock(100, warm[0], warm[1], np.arange(100), warm[2])], 100, delta=TOL, max_iter=MAX_ITER,
       stop="max_abs", accelerate="none")  # numba kernels: compiled or loaded from the cache before round 1
    out["mfl_installed"] = have_mfl
    out["rows"] = []
    for mech in ["krr", "oue"]:
        for k in ks:
            out["rows"].append(one_row(mech, k, n, rounds, have_mfl))
            print(f"# ibu {mech} k={k} done", file=sys.stderr, flush=True)
    out["load_after"] = machine()["load"]
    out["finished"] = now()
    return out


if __name__ == "__main__":
    emit(run(quick_flag(), rounds_arg(0) or None))
