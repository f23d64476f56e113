"""Does ``localpriv advise`` predict the error one gets? (``localpriv reproduce advise-check``).

For every *case* -- data set x goal x LDP target x number of users ``n`` -- :func:`localpriv.advice.advisor`
is run as a user holding the data would run it (the prior ``theta`` = the data's empirical
distribution, the library's default number of simulated runs, ``rng`` = the case's seed), and its
recommended mechanism (and, with ``rows_checked > 1``, the next ones) is then *measured*: ``runs``
(>= 20) fresh data sets of ``n`` users drawn i.i.d. from the real data, obfuscated by the
recommended spec and estimated by the estimator the advice names, each scored by the goal's error
to the truth (the empirical distribution), and more in batches of ``runs`` until the 80 % confidence
interval of their median is within +-``precision`` (10 %) of it or ``max_runs`` (100) were drawn.
The measured error is the median over those runs, with its own generator (independent of the
prediction's).

Reading the ratio. Both sides are medians of random errors: the prediction of 5 runs (a simulated
row confirmed by 10 to 15 fresh runs, see :mod:`localpriv.advice.advisor`)
or of 400 normal draws (analytic rows), the measurement of ``runs`` to ``max_runs`` runs. Where one
run's error is spread widely -- EMS at small eps, whose chosen bandwidth sometimes smooths the truth away -- 20 runs
leave either median uncertain by +-15-25 %, so both sides draw runs until their medians are known
to +-10 % (80 % confidence); the JSON keeps every measured run and their number.

Recorded per checked row: the predicted median and range, the measured median and 10th-90th
percentiles, the ratio ``predicted / measured``, whether it is within ``tolerance`` (25 %), and how
many measured runs fall inside the predicted range (``(R-1)/(R+1)`` of them when the range is
right, 67 % for R = 5). With ``default_prior`` the same spec is also predicted with advise's
default prior (what a user without data gets), for comparison.

Data: Adult ages on 0..99 (EMD, mean; :func:`reproductions.accuracy.dataset`) and Adult
education, 16 levels (TV). Output: ``advise-check.json`` and ``advise-check.png`` (predicted against
measured, log-log, with the +-25 % band).

How close can a prediction be? Both medians are Monte-Carlo estimates. For a goal whose error is
a sum over many cells (EMD, TV) one run's error varies by 10-30 % (relative sd), so a 5-run median
is within ~10 % and a 20-run median within ~6 % of its limit, and 25 % leaves room. The error of a
mean is ``|normal|``: its median over ``R`` runs has a relative sd of about ``1.17 / sqrt(R)`` (52 %
at R = 5, 26 % at R = 20), so 25 % agreement there is a matter of luck unless both sides use many
runs (analytic predictions use 400 normal draws).
"""
from __future__ import annotations

import sys
import time
import zlib

import numpy as np

from localpriv.advice.advisor import advise, goal_error, median_precision, simulate_errors
from localpriv.inference.plotting import plt, save
from localpriv.mechanisms import parse
from localpriv.mechanisms.base import LargeEpsilonWarning
from reproductions.accuracy import dataset
from reproductions.runner import Experiment, register_experiment

NAME = "advise-check"

CASES = [
    {"data": "ages", "goal": "emd", "eps_ldp": [0.5, 1.0, 2.0, 4.0], "n": [10_000, 100_000]},
    {"data": "education", "goal": "tv", "eps_ldp": [0.5, 1.0, 2.0, 4.0], "n": [10_000, 100_000]},
    {"data": "ages", "goal": "mean", "eps_ldp": [1.0], "n": [100_000]},
]

#: Keys of a case: ``data`` (ages, education), ``goal``, ``eps_ldp`` (list), ``n`` (list), ``method`` (optional:
#: how predictions are made, default auto),
#: ``mechanisms`` (optional: restrict the candidates, spec names).

DEFAULTS = {
    "cases": CASES,
    "runs": 20,               # measured runs per checked row, at least ...
    "max_runs": 100,          # ... and more, in batches of `runs`, until the median's 80 % CI is
    "precision": 0.1,         # within +-10 % of it (advise.median_precision), at most max_runs
    "predict_runs": 5,        # advise's simulated runs (its default)
    "rows_checked": 1,        # the recommended row (1) or the first few
    "tolerance": 0.25,
    "default_prior": False,   # True: also predict each checked spec with advise's default prior
    "status": True,
}

#: ``--quick`` (the tests): education under the four oracles (IBU, simulated) and ages under the
#: pure oracles (the analytic model against per-user simulation), small n
QUICK = {
    "cases": [{"data": "education", "goal": "tv", "eps_ldp": [1.0], "n": [5_000]},
              {"data": "ages", "goal": "emd", "eps_ldp": [2.0], "n": [20_000], "mechanisms": ["oue", "olh", "ss"],
               "method": "analytic"}],
    "runs": 20,
    "default_prior": False,
}


#: a cross-section (``run_experiment(NAME, out, overrides=MEDIUM)``): half the ages cases, ~6 min of
#: CPU where the full configuration takes ~10 (an ages case costs ~60 s of CPU: EMS on 4 mechanisms
#: x 5 runs, up to 15 confirmation runs, 20 to 100 measured runs)
MEDIUM = {
    "cases": [{"data": "ages", "goal": "emd", "eps_ldp": [1.0, 4.0], "n": [10_000, 100_000]},
              {"data": "education", "goal": "tv", "eps_ldp": [0.5, 1.0, 2.0, 4.0], "n": [10_000, 100_000]},
              {"data": "ages", "goal": "mean", "eps_ldp": [1.0], "n": [100_000]}],
    "default_prior": False,
}


def _status(params, msg):
    if params.get("status", True):
        print(f"[{NAME}] {msg}", file=sys.stderr, flush=True)


def _seed(base: int, key: str) -> list[int]:
    return [base, zlib.crc32(key.encode())]


def _check_row(row, data, goal, n, params, base, key):
    """Measure one advised row: ``runs`` data sets through its spec and estimator."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LargeEpsilonWarning)
        mech = parse(row.spec, data.domain)
    error = goal_error(goal, data.domain, data.theta)
    t0 = time.perf_counter()
    gen = np.random.default_rng(_seed(base, f"measure|{key}|{row.spec}"))
    runs = int(params["runs"])
    measured = simulate_errors(mech, data.domain, data.theta, n, error, row.estimator, runs, gen)
    while (measured.size < int(params.get("max_runs", runs))
           and median_precision(measured) > float(params.get("precision", 0.0))):
        measured = np.concatenate([measured, simulate_errors(mech, data.domain, data.theta, n, error, row.estimator,
                                                       runs, gen)])
    q10, med, q90 = (float(v) for v in np.quantile(measured, [0.1, 0.5, 0.9]))
    ratio = row.error / med if med > 0 else float("inf")
    inside = int(np.sum((measured >= row.lower) & (measured <= row.upper)))
    return {"name": row.name, "spec": row.spec, "estimator": row.estimator, "how": row.how,
            "eps_ldp": row.eps_ldp, "eps_metric": row.eps_metric,
            "predicted": row.error, "predicted_range": [row.lower, row.upper], "predicted_runs": row.runs,
            "measured": med, "measured_runs": int(measured.size), "measured_q10": q10, "measured_q90": q90,
            "measured_values": measured,
            "ratio": ratio, "within_tolerance": bool(abs(ratio - 1.0) <= params["tolerance"]),
            "measured_inside_range": inside, "seconds_measured": round(time.perf_counter() - t0, 3)}


def _compute(params, rng, progress):
    base = int(rng.integers(2 ** 32))
    plan = [(c, eps, n) for c in params["cases"] for eps in c["eps_ldp"] for n in c["n"]]
    cases = []
    for c, eps, n in progress(plan, NAME):
        data = dataset(c["data"])
        key = f"{c['data']}|{c['goal']}|eps={eps}|n={n}"
        t0 = time.perf_counter()
        adv = advise(data.domain, eps_ldp=float(eps), n=int(n), goal=c["goal"], theta=data.theta,
                     rng=int(np.random.default_rng(_seed(base, f"advise|{key}")).integers(2 ** 31)),
                     runs=int(params["predict_runs"]), mechanisms=c.get("mechanisms"),
                     method=c.get("method", "auto"), truth=f"the empirical distribution of {c['data']}")
        t_adv = time.perf_counter() - t0
        checked = [_check_row(r, data, c["goal"], int(n), params, base, key)
                   for r in adv.rows[: int(params["rows_checked"])]]
        if params.get("default_prior"):
            for rec in checked:
                spec_name = rec["spec"].split("(")[0]
                uni = advise(data.domain, eps_ldp=float(eps), n=int(n), goal=c["goal"], theta=None, rng=0,
                             runs=int(params["predict_runs"]), mechanisms=[spec_name])
                rec["predicted_default_prior"] = uni.rows[0].error if uni.rows[0].spec == rec["spec"] else None
        case = {"key": key, "data": c["data"], "goal": c["goal"], "eps_ldp": float(eps), "n": int(n),
                "unit": adv.unit, "recommended": adv.recommended.spec, "reason": adv.reason,
                "rows": [{"name": r.name, "spec": r.spec, "error": r.error, "lower": r.lower, "upper": r.upper,
                          "how": r.how, "estimator": r.estimator, "eps_ldp": r.eps_ldp, "eps_metric": r.eps_metric,
                          "seconds": r.seconds} for r in adv.rows],
                "skipped": adv.skipped, "checked": checked, "seconds_advise": round(t_adv, 3)}
        cases.append(case)
        _status(params, f"{key}: {adv.recommended.spec} predicted {checked[0]['predicted']:.4g}, measured "
                        f"{checked[0]['measured']:.4g} (ratio {checked[0]['ratio']:.3f}); advise {t_adv:.1f} s")
    rows = [r for c in cases for r in c["checked"]]
    ratios = np.array([r["ratio"] for r in rows], dtype=float)
    by_goal = {}
    for c in cases:
        g = by_goal.setdefault(c["goal"], {"checked": 0, "within_tolerance": 0, "max_abs_deviation": 0.0})
        for r in c["checked"]:
            g["checked"] += 1
            g["within_tolerance"] += int(r["within_tolerance"])
            g["max_abs_deviation"] = max(g["max_abs_deviation"], abs(r["ratio"] - 1.0))
    return {
        "cases": cases,
        "summary": {"checked": len(rows), "within_tolerance": int(sum(r["within_tolerance"] for r in rows)),
                    "tolerance": params["tolerance"],
                    "median_ratio": float(np.median(ratios)) if rows else None,
                    "max_abs_deviation": float(np.max(np.abs(ratios - 1.0))) if rows else None,
                    "share_measured_inside_range": (float(sum(r["measured_inside_range"] for r in rows))
                                                    / (len(rows) * int(params["runs"]))) if rows else None,
                    "by_goal": by_goal},
        "truth_note": "truth = the empirical distribution of the data set; users drawn i.i.d. from it at every n; "
                      "predictions with that distribution as the prior",
    }


def _plot(results, params, path):
    rows = [(c, r) for c in results["cases"] for r in c["checked"]]
    fig, ax = plt.subplots(figsize=(5.5, 5))
    styles = {"emd": ("tab:blue", "o"), "tv": ("tab:green", "s"), "mean": ("tab:red", "^"),
              "quantiles": ("tab:purple", "D"), "topk": ("tab:orange", "v")}
    seen = set()
    for c, r in rows:
        color, marker = styles.get(c["goal"], ("k", "x"))
        label = f"{c['data']} {c['goal']}"
        ax.errorbar(r["measured"], r["predicted"],
                    yerr=[[r["predicted"] - r["predicted_range"][0]], [r["predicted_range"][1] - r["predicted"]]],
                    xerr=[[r["measured"] - r["measured_q10"]], [r["measured_q90"] - r["measured"]]],
                    fmt=marker, color=color, mfc="none" if r["how"] == "analytic" else color, ms=6, elinewidth=0.6,
                    capsize=2, label=None if label in seen else label)
        seen.add(label)
    vals = [v for _, r in rows for v in (r["measured"], r["predicted"]) if v > 0]
    if vals:
        lo, hi = min(vals) / 2, max(vals) * 2
        t = np.geomspace(lo, hi, 50)
        tol = params["tolerance"]
        ax.plot(t, t, "-", color="grey", lw=1)
        ax.fill_between(t, t * (1 - tol), t * (1 + tol), color="grey", alpha=0.15, label=f"+-{tol:.0%}")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"measured median error ({params['runs']} runs; bars: 10-90 %)")
    ax.set_ylabel("predicted error (bars: predicted range; hollow: analytic)")
    s = results["summary"]
    ax.set_title(f"{NAME}: {s['within_tolerance']}/{s['checked']} within {params['tolerance']:.0%}", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)


register_experiment(Experiment(
    name=NAME,
    description="localpriv advise: predicted against measured error of the recommended mechanisms on Adult "
                "ages (EMD, mean) and education (TV), LDP eps 0.5..4, n 1e4..1e5",
    defaults=DEFAULTS,
    quick=QUICK,
    compute=_compute,
    plot=_plot,
    reference="the advisor's predictions against simulation (docs/decisions/0020)",
))
