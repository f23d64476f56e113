"""Benchmark of the LDP frequency oracles (issue 4): client throughput, estimator time and MSE,
side by side with multi-freq-ldpy and pure-ldp when they are importable (dev/bench dependencies,
installed by ``make bench``; not in the main venv).

``python benchmarks/oracles.py [--quick]`` prints JSON. ``run(quick=False) -> dict`` is what
``benchmarks/run_all.py`` calls. Settings: k = 100, eps = 1, n = 10^6 (quick: 10^5), inputs drawn
from a fixed Gaussian-shaped distribution.

The other libraries randomize one user per Python call, so their client throughput is measured on
``n_other`` users (20,000; quick 5,000) and reported per second; ratios are ours / theirs.
"MSE on the same reports": for GRR and the unary encodings we feed OUR reports to their
aggregators (formats are compatible after unpacking); for hashing and SS their aggregators need
their own report formats, so their MSE is measured on their own reports of the same inputs.
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

from localpriv.estimators.em import em
from localpriv.estimators.oracles import pure_parameters
from localpriv.experiments.oracles import _DiagBlock
from localpriv.mechanisms import parse
from localpriv.mechanisms.unary import unpack_bits
from localpriv.projection import clip_normalize

K, EPS = 100, 1.0
MECHANISMS = {"GRR": "krr", "SUE": "sue", "OUE": "oue", "SS": "ss", "THE": "the", "BLH": "blh", "OLH": "olh"}


def _truth(k):
    f = np.exp(-0.5 * ((np.arange(k) - k / 2) / (k / 8)) ** 2)
    return f / f.sum()


def _mse(a, b):
    return float(np.mean((np.asarray(a, dtype=float) - b) ** 2))


def _ours(name, spec, x, f, rng):
    mech = parse(f"{spec}(k={K},eps={EPS})")
    t0 = time.perf_counter()
    r = mech.sample(x, rng)
    t_client = time.perf_counter() - t0
    t0 = time.perf_counter()  # aggregation: support counts straight from the reports
    C = np.bincount(r, minlength=K).astype(float) if name == "GRR" else mech.support_counts(r)
    t_agg = time.perf_counter() - t0
    p, q = pure_parameters(mech)
    t0 = time.perf_counter()
    est_mi = clip_normalize((C / x.size - q) / (p - q))
    t_mi = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = em([_DiagBlock(p, q, C)], K, max_iter=100_000, accelerate="none", stop="loglik", delta=1e-6)  # as in the dbsec reproductions
    t_ibu = time.perf_counter() - t0
    return mech, r, {
        "client_reports_per_s": x.size / t_client, "aggregate_s": t_agg, "mi_s": t_mi,
        "ibu_support_s": t_ibu, "ibu_support_iterations": res.iterations,
        "mse_mi_n": _mse(est_mi, f), "mse_ibu_support": _mse(res.theta, f),
    }


def _multi_freq_ldpy(name, mech, reports, x, f, n_other):
    import multi_freq_ldpy.pure_frequency_oracles as pfo  # noqa: F401
    out = {}
    if name == "GRR":
        from multi_freq_ldpy.pure_frequency_oracles import GRR as mod
        client = lambda v: mod.GRR_Client(int(v), K, EPS)
        agg = getattr(mod, "GRR_Aggregator_MI", None) or getattr(mod, "GRR_Aggregator")
        theirs_on_ours = lambda: agg(np.asarray(reports), K, EPS)
    elif name in ("SUE", "OUE"):
        from multi_freq_ldpy.pure_frequency_oracles import UE as mod
        opt = name == "OUE"
        client = lambda v: mod.UE_Client(int(v), K, EPS, opt)
        agg = getattr(mod, "UE_Aggregator_MI", None) or getattr(mod, "UE_Aggregator")
        bits = unpack_bits(reports, K).astype(float)
        theirs_on_ours = lambda: agg(bits, EPS, opt)
    else:
        return {"skipped": f"{name}: not compared (report formats differ)"}
    t0 = time.perf_counter()
    for v in x[:n_other]:  # their client is per user by design
        client(v)
    out["client_reports_per_s"] = n_other / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    est = theirs_on_ours()
    out["mi_s"] = time.perf_counter() - t0
    out["mse_mi_on_our_reports"] = _mse(est, f)
    return out


def _pure_ldp(name, mech, reports, x, f, n_other):
    if name == "GRR":
        from pure_ldp.frequency_oracles.direct_encoding import DEClient as C, DEServer as S
        kw = {}
    elif name in ("SUE", "OUE"):
        from pure_ldp.frequency_oracles.unary_encoding import UEClient as C, UEServer as S
        kw = {"use_oue": name == "OUE"}
    elif name in ("BLH", "OLH"):
        from pure_ldp.frequency_oracles.local_hashing import LHClient as C, LHServer as S
        kw = {"use_olh": name == "OLH"}
    else:
        return {"skipped": f"{name}: not in pure-ldp"}
    client = C(EPS, K, **kw)  # every pure-ldp client takes (epsilon, d, ...)
    server = S(EPS, K, **kw)
    xs = x[:n_other]
    t0 = time.perf_counter()
    privs = [client.privatise(int(v) + 1) for v in xs]  # pure-ldp items are 1..k by default
    out = {"client_reports_per_s": xs.size / (time.perf_counter() - t0)}
    t0 = time.perf_counter()
    for p in privs:
        server.aggregate(p)
    est = np.array([server.estimate(i + 1, suppress_warnings=True) for i in range(K)]) / xs.size
    out["estimate_s"] = time.perf_counter() - t0
    fx = np.bincount(xs, minlength=K) / xs.size
    out["mse_on_own_reports_of_first_users"] = _mse(est, fx)
    out["n_users"] = int(xs.size)
    return out


def run(quick: bool = False) -> dict:
    """Per mechanism: our client throughput, estimator times and MSE, and the other libraries'."""
    n = 100_000 if quick else 1_000_000
    n_other = 5_000 if quick else 20_000
    rng = np.random.default_rng(0)
    f_true = _truth(K)
    x = rng.choice(K, size=n, p=f_true)
    f = np.bincount(x, minlength=K) / n
    result = {"k": K, "eps": EPS, "n": n, "n_other": n_other, "mechanisms": {}}
    for name, spec in MECHANISMS.items():
        mech, reports, ours = _ours(name, spec, x, f, rng)
        row = {"localpriv": ours}
        for lib, fn in (("multi-freq-ldpy", _multi_freq_ldpy), ("pure-ldp", _pure_ldp)):
            try:
                row[lib] = fn(name, mech, reports, x, f, n_other)
                theirs = row[lib].get("client_reports_per_s")
                if theirs:
                    row[lib]["client_throughput_ratio_ours_over_theirs"] = ours["client_reports_per_s"] / theirs
            except ImportError:
                row[lib] = {"skipped": f"{lib} not importable"}
            except Exception as exc:  # a bench must report, not crash, on another library's API drift
                row[lib] = {"error": f"{type(exc).__name__}: {exc}"}
        result["mechanisms"][name] = row
    return result


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
