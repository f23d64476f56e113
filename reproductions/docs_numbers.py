"""The measurements quoted by the documentation (``make docs-numbers``; ``localpriv reproduce docs-numbers``).

House rule: a number in the README or the docs comes from the JSON of a run that a make target
regenerates, with its runs and spread. This experiment recomputes the measured numbers of

* ``docs/convergence.md`` -- EM-map evaluations of SQUAREM alone against ``delta`` and of the
  Newton finish; where the Newton finish runs (evaluations, products, certificate) against SQUAREM
  alone at the default cap; a large grid where it is not offered (certificate after N evaluations);
  the floating-point floor of the certificate; the old default (plain capped EM) against the new;
* ``docs/regularized.md`` -- EMD (or L1) to the truth of INV-P, capped IBU, the certified MLE, EMS
  and the Dirichlet MAP over seeded runs (median, interquartile range, min, max; the chosen
  strengths; supports);
* ``docs/uncertainty.md`` (*Near the boundary*) -- bias of the MLE's mean, Wald and unbiased-inverse
  intervals for the mean and their coverage over seeded data sets, the inverse's cell standard
  errors against the MLE's.

Only deterministic quantities are recorded: evaluation counts, certificates, distances, coverages
(no seconds: timings are benchmarks, see ``benchmarks/``). Counts and certificates are those of this
run; a certificate at the round-off floor, or the iteration at which a ``|dL| < delta`` rule stops,
can move with the BLAS build, which is why every stopping margin is recorded too.

Data:

* ``population`` -- every record of the data set (Adult ages, 48,842 persons; the Gowalla
  check-ins on the Manhattan grid, 98,061) obfuscated once (``tile`` times each when given), drawn at
  the count level: per input value ``x`` with ``N_x`` records, ``Multinomial(N_x, M[x])`` (the exact
  law of obfuscating each record once), or every record's report sampled by the mechanism when the
  channel is too large to tabulate;
* ``resample`` -- ``n`` users drawn with replacement from the data set's empirical distribution and
  obfuscated: ``Multinomial(n, theta M)`` (``localpriv.inference.simulation.simulate_block``; per-user
  sampling for vector mechanisms);
* ``zipf`` -- a synthetic categorical truth ``theta_i ~ i^-s`` on ``k`` labels, resampled as above;
* ``demo`` -- the data of ``make demo`` (``perturb`` + ``aggregate`` of every Adult age under k-RR
  k=100 eps=2 with ``numpy.random.default_rng(demo_seed)``), so the demo's numbers are rechecked.

Every case (and every run of it) has its own generator from the experiment's seed and the case's
name, so a case gives the same numbers whatever else the configuration holds.
"""
from __future__ import annotations

import math
import zlib

import numpy as np

from localpriv.data.aggregate import aggregate
from localpriv.data.datasets import adult_ages, manhattan_cells
from localpriv.data.observations import ObservationBlock, Observations
from localpriv.data.reports import perturb
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.domains.grid import emd_grid
from localpriv.estimators.em import PLAIN_EM, em, gap_bound, log_likelihood
from localpriv.estimators.newton import supports_newton
from localpriv.estimators.regularized import EMS_DELTA, SmoothingPenalty, ordered_shape
from localpriv.inference import estimate
from localpriv.inference.metrics import emd_line, l1
from localpriv.inference.plotting import plt, save
from localpriv.inference.simulation import simulate_block
from localpriv.mechanisms import parse
from localpriv.mechanisms.krr import KRR, krr_mle
from reproductions.runner import Experiment, register_experiment

__all__ = ["DEFAULTS", "QUICK", "NAME"]

NAME = "docs-numbers"

#: unit round-off of float64
U = float(np.finfo(float).eps) / 2
#: channels up to this many entries are tabulated to draw counts at the count level
DENSE_DRAW_MAX = 4_000_000
#: a cell counts as in the support of an estimate above this (localpriv.inference.uncertainty.BOUNDARY)
SUPPORT_THRESHOLD = 1e-9

AGES = {"data": "ages", "sample": "population"}

# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------
KRR_200K = {"name": "k-RR k=100 eps=1, n=200,000", "data": "ages", "sample": "resample", "n": 200_000,
            "mechanism": "krr(eps=1.0)"}
GEO_03 = {"name": "geometric eps=0.3, Adult ages", **AGES, "mechanism": "geometric(eps=0.3,lo=0,hi=99)"}
DEMO = {"name": "k-RR k=100 eps=2, Adult ages (make demo's data)", "data": "demo",
        "mechanism": "krr(k=100,eps=2.0)"}
GEO_005 = {"name": "Adult ages, geometric eps=0.05", **AGES, "mechanism": "geometric(eps=0.05,lo=0,hi=99)"}
MAN_1 = {"name": "Manhattan 20x14, planar geometric eps=1", "data": "manhattan", "sample": "population",
         "mechanism": "planar-geometric(eps=1.0)"}
MAN_05 = {"name": "Manhattan 20x14, planar geometric eps=0.5", "data": "manhattan", "sample": "population",
          "mechanism": "planar-geometric(eps=0.5)"}
OUE_1E4 = {"name": "OUE k=100 eps=1, n=10,000", "data": "ages", "sample": "resample", "n": 10_000,
           "mechanism": "oue(eps=1.0)"}

DEFAULTS = {
    # docs/convergence.md
    "deltas": [1e-8, 1e-9, 1e-10, 1e-12],
    "squarem_cases": [KRR_200K, GEO_03, DEMO],
    "cap": 100_000,  # the engine's default cap, for the SQUAREM-only runs
    "newton_cases": [
        {**GEO_005, "squarem_only": True},
        {"name": "Adult ages, geometric eps=0.1", **AGES, "mechanism": "geometric(eps=0.1,lo=0,hi=99)"},
        {"name": "Adult ages, geometric eps=0.3", **AGES, "mechanism": "geometric(eps=0.3,lo=0,hi=99)"},
        {"name": "Adult ages, Laplace eps=0.1", **AGES, "mechanism": "laplace(eps=0.1,bins=1.0,lo=0,hi=99)"},
        {"name": "Adult ages, exponential eps=0.1", **AGES, "mechanism": "exponential(eps=0.1)"},
        {**MAN_1, "squarem_only": True},
        {**MAN_05, "squarem_only": True},
        {"name": "Manhattan 20x14, planar Laplace eps=1", "data": "manhattan", "sample": "population",
         "mechanism": "planar-laplace(eps=1.0)"},
    ],
    "large_grid": {"name": "Manhattan 0.1 km, planar geometric eps=1", "data": "manhattan", "cell_km": 0.1,
                   "sample": "population", "mechanism": "planar-geometric(eps=1.0)", "checkpoints": [100, 300]},
    "floor_cases": [KRR_200K, GEO_005, OUE_1E4, MAN_1],
    "floor_deltas": [1e-12, 1e-13, 1e-14, 1e-15],
    "floor_cap": 2_000,
    "old_new_cases": [
        KRR_200K,
        *[{"name": f"k-RR k=100 eps={e:g}, Adult ages tiled 4x", "data": "ages", "sample": "population", "tile": 4,
           "mechanism": f"krr(eps={e!r})", "runs": 2} for e in (1.0, 2.5, 3.0)],
        OUE_1E4,
    ],
    "demo": True,
    "demo_seed": 0,
    # docs/regularized.md
    "regularized_cases": [
        {**GEO_005, "name": "Adult ages, geometric eps=0.05", "runs": 10, "dirichlet_runs": 5},
        {**MAN_1, "runs": 5, "dirichlet_runs": 5},
    ],
    "ems_acceleration": True,
    "categorical_cases": [{"k": 100, "n": 10_000}, {"k": 100, "n": 100_000}, {"k": 2000, "n": 100_000},
                          {"k": 2000, "n": 1_000_000}],
    "categorical_eps": 1.0,
    "zipf_exponent": 1.1,
    "categorical_runs": 5,
    # docs/uncertainty.md, near the boundary
    "boundary_cases": [
        {"name": "k-RR eps=1, n=10^5", "data": "ages", "mechanism": "krr(eps=1.0)", "n": 100_000},
        {"name": "OUE eps=1, n=10^4", "data": "ages", "mechanism": "oue(eps=1.0)", "n": 10_000},
        {"name": "geometric eps=0.05, n=10^5", "data": "ages", "mechanism": "geometric(eps=0.05,lo=0,hi=99)",
         "n": 100_000},
    ],
    "boundary_runs": 100,
    "level": 0.95,
    # --runs N caps every run count above at N (None: the counts above)
    "runs": None,
}

_SMALL_KRR = {"name": "k-RR k=100 eps=1, n=20,000", "data": "ages", "sample": "resample", "n": 20_000,
              "mechanism": "krr(eps=1.0)"}

#: ``--quick`` (the tests): every code path, in well under 30 seconds
QUICK = {
    "deltas": [1e-8, 1e-10],
    "squarem_cases": [_SMALL_KRR],
    "cap": 2_000,
    "newton_cases": [{**GEO_005, "squarem_only": True}],
    "large_grid": None,
    "floor_cases": [_SMALL_KRR],
    "floor_deltas": [1e-12, 1e-15],
    "floor_cap": 200,
    "old_new_cases": [_SMALL_KRR],
    "demo": False,
    "regularized_cases": [{**GEO_005, "runs": 3, "dirichlet_runs": 0}],
    "ems_acceleration": False,
    "categorical_cases": [{"k": 100, "n": 10_000}],
    "categorical_runs": 2,
    "boundary_cases": [DEFAULTS["boundary_cases"][0]],
    "boundary_runs": 10,
}


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------
def _ages():
    dom = IntegerDomain(0, 99)
    x = dom.encode(adult_ages())
    return dom, np.bincount(x, minlength=dom.size)


def _source(case):
    """``(domain, record counts per value)`` of a case's data set."""
    if case["data"] == "ages":
        return _ages()
    if case["data"] == "manhattan":
        dom, cells = manhattan_cells(float(case.get("cell_km", 0.5)))
        return dom, np.bincount(cells, minlength=dom.size)
    raise ValueError(f"{NAME}: unknown data set {case['data']!r}")


def _population_block(mech, counts, rng) -> ObservationBlock:
    """Every record obfuscated once: per value ``x``, ``Multinomial(N_x, M[x])`` (or per record)."""
    n_out = mech.n_outputs
    if n_out is not None and mech.report_kind != "binary" and mech.k * n_out <= DENSE_DRAW_MAX:
        M = mech.channel()
        c = np.zeros(n_out, dtype=np.int64)
        for x in np.flatnonzero(counts):
            row = np.clip(M[x], 0.0, None)
            c += rng.multinomial(int(counts[x]), row / row.sum())
        keep = np.flatnonzero(c)
        return ObservationBlock(mech, keep, c[keep])
    x = np.repeat(np.arange(counts.size), counts)
    z = mech.sample(x, rng)
    if z.ndim == 1:
        u, c = np.unique(z, return_counts=True)
        return ObservationBlock(mech, u, c)
    return ObservationBlock(mech, z, np.ones(z.shape[0]))


def _case_rng(base: int, name: str, run: int = 0) -> np.random.Generator:
    return np.random.default_rng([base, zlib.crc32(name.encode()), int(run)])


def _observations(case, base: int, run: int = 0, demo_seed: int = 0):
    """``(observations, truth)`` of one run of a case (see the module docstring)."""
    if case["data"] == "demo":
        dom, counts = _ages()
        table = perturb(adult_ages(), case["mechanism"], np.random.default_rng(demo_seed), dom)
        return aggregate(table, dom), counts / counts.sum()
    dom, counts = _source(case)
    truth = counts / counts.sum()
    mech = parse(case["mechanism"], dom)
    rng = _case_rng(base, case["name"], run)
    if case.get("sample", "population") == "resample":
        block = simulate_block(mech, truth, int(case["n"]), rng)
    else:
        block = _population_block(mech, counts * int(case.get("tile", 1)), rng)
    return Observations([block], dom), truth


def _runs(params, n: int) -> int:
    cap = params.get("runs")
    return int(n) if cap is None else int(min(n, cap))


def _describe(obs) -> dict:
    blocks = obs.likelihood_blocks()
    return {"n": float(obs.n), "k": int(obs.k), "distinct_reports": int(sum(b.counts.size for b in blocks)),
            "block": "+".join(type(b).__name__ for b in blocks), "newton_offered": bool(supports_newton(blocks))}


def _run(res) -> dict:
    out = {"evaluations": int(res.iterations), "converged": bool(res.converged), "gap": float(res.gap),
           "scheme": res.scheme, "stop": res.stop, "newton_products": int(res.products)}
    return out


def _stop_margin(trace, delta) -> float | None:
    """How far a converged ``|L(t) - L(t-1)| < delta`` stop was from flipping (see tests/_roundoff.py)."""
    d = np.abs(np.diff(np.asarray(trace, dtype=float)[-3:]))
    if d.size < 2:
        return None
    return float(min(delta - d[-1], d[-2] - delta))


def _loglik_rounding(obs, loglik) -> float:
    """First-order worst-case rounding of a difference of two evaluations of ``L``: each is a sum of
    ``m`` terms ``c_j log p_j`` (``(m - 1) u |L|``) whose ``p_j`` are sums of ``k`` positive terms
    (``log`` moves by ``(k + 1) u`` per report: ``n (k + 2) u`` in all); twice that for the difference.
    A ``|dL| < delta`` stop whose margin is below it may move to another iteration with the BLAS build."""
    m = sum(b.counts.size for b in obs.blocks)
    return 2 * (m * U * abs(float(loglik)) + float(obs.n) * (obs.k + 2) * U)


def _plain_stop(obs, res, delta) -> dict:
    margin = _stop_margin(res.trace, delta) if res.converged else None
    bound = _loglik_rounding(obs, res.loglik)
    return {"stop_margin": margin, "stop_rounding_bound": bound,
            "stop_within_rounding": None if margin is None else bool(margin <= bound)}


def _spread(values) -> dict:
    a = np.asarray([v for v in values if v is not None], dtype=float)
    if a.size == 0:
        return {"runs": 0}
    q25, med, q75 = np.percentile(a, [25, 50, 75])
    return {"runs": int(a.size), "median": float(med), "q25": float(q25), "q75": float(q75),
            "min": float(a.min()), "max": float(a.max())}


class _Certificates:
    """An engine callback that keeps the certificate of every recorded point."""

    em_progress = True

    def __init__(self):
        self.points: list[tuple[int, float, str]] = []

    def begin(self, **_):
        pass

    def __call__(self, t, theta, loglik, gap=math.nan, phase="em"):
        self.points.append((int(t), float(gap), phase))


# --------------------------------------------------------------------------------------------
# docs/convergence.md
# --------------------------------------------------------------------------------------------
def _squarem_by_delta(params, base, progress):
    out = []
    deltas = [float(d) for d in params["deltas"]]
    for case in progress(params["squarem_cases"], "SQUAREM against delta"):
        obs, _ = _observations(case, base, demo_seed=params.get("demo_seed", 0))
        blocks, k = obs.likelihood_blocks(), obs.k
        rec = {"case": case["name"], **_describe(obs), "squarem": {}, "newton": {}}
        for d in deltas:
            rec["squarem"][repr(d)] = _run(em(blocks, k, delta=d, accelerate="squarem", stop="gap"))
            rec["newton"][repr(d)] = _run(em(blocks, k, delta=d, accelerate="newton", stop="gap"))
        ev = {d: rec["squarem"][repr(d)]["evaluations"] for d in deltas}
        if 1e-9 in ev:
            rec["ratio_1e-9_to"] = {repr(d): ev[1e-9] / ev[d] for d in deltas if d != 1e-9}
        out.append(rec)
    return out


def _newton_finish(params, base, progress):
    out = []
    cap = int(params["cap"])
    for case in progress(params["newton_cases"], "Newton finish"):
        obs, _ = _observations(case, base)
        blocks, k = obs.likelihood_blocks(), obs.k
        rec = {"case": case["name"], **_describe(obs), "default": _run(em(blocks, k))}
        if case.get("squarem_only"):
            rec["squarem_only"] = {**_run(em(blocks, k, accelerate="squarem", max_iter=cap)), "cap": cap}
        out.append(rec)
    return out


def _large_grid(params, base, progress):
    case = params.get("large_grid")
    if not case:
        return None
    obs, _ = _observations(case, base)
    blocks, k = obs.likelihood_blocks(), obs.k
    checkpoints = sorted(int(c) for c in case["checkpoints"])
    rec_cb = _Certificates()
    res = em(blocks, k, max_iter=checkpoints[-1], callback=rec_cb)
    gaps = {}
    for c in checkpoints:
        before = [(t, g) for t, g, _ in rec_cb.points if t <= c and math.isfinite(g)]
        gaps[str(c)] = {"evaluations": before[-1][0], "gap": before[-1][1]} if before else None
    return {"case": case["name"], **_describe(obs), "scheme": res.scheme, "gap_after": gaps,
            "final": _run(res), "cells": int(k)}


def _floor(params, base, progress):
    """The certificate's round-off floor: its value at the closed-form k-RR maximum, and which
    tolerances below the default the engine still certifies (``em`` with ``delta`` in
    ``floor_deltas``, at most ``floor_cap`` evaluations), against the first-order rounding bound
    ``2 (m + 2k + 4) u`` of the two sums the certificate subtracts (tests/_roundoff.py)."""
    out = []
    cap = int(params["floor_cap"])
    for case in progress(params["floor_cases"], "round-off floor"):
        obs, _ = _observations(case, base)
        blocks, k = obs.likelihood_blocks(), obs.k
        m = int(sum(b.counts.size for b in blocks))
        rec = {"case": case["name"], **_describe(obs), "default": _run(em(blocks, k)),
               "rounding_bound": 2 * (m + 2 * k + 4) * U, "cap": cap, "by_delta": {}}
        mech = obs.blocks[0].mechanism
        if isinstance(mech, KRR) and len(obs.blocks) == 1:
            closed = krr_mle(obs.blocks[0].count_vector(), mech.eps)
            rec["gap_at_closed_form_mle"] = gap_bound(blocks, closed)
        for d in params["floor_deltas"]:
            rec["by_delta"][repr(float(d))] = _run(em(blocks, k, delta=float(d), max_iter=cap))
        out.append(rec)
    return out


def _old_new(params, base, progress):
    out = []
    for case in progress(params["old_new_cases"], "old default against new"):
        for run in range(_runs(params, case.get("runs", 1))):
            obs, _ = _observations(case, base, run)
            blocks, k = obs.likelihood_blocks(), obs.k
            n = float(obs.n)
            mech = obs.blocks[0].mechanism
            if isinstance(mech, KRR):
                ref, ref_kind = krr_mle(obs.blocks[0].count_vector(), mech.eps), "closed-form k-RR MLE"
                ref_gap = gap_bound(blocks, ref)
            else:
                r = em(blocks, k, delta=1e-12)
                ref, ref_kind, ref_gap = r.theta, "certified run at delta 1e-12", float(r.gap)
            L_ref = log_likelihood(blocks, ref)
            old = em(blocks, k, keep_trace=True, **PLAIN_EM)
            new = em(blocks, k)
            rec = {"case": case["name"], "run": run, **_describe(obs), "reference": ref_kind,
                   "reference_gap": float(ref_gap),
                   "old": {**_run(old), "settings": dict(PLAIN_EM),
                           "max_abs_distance": float(np.max(np.abs(old.theta - ref))),
                           "loglik_deficit_per_report": (L_ref - old.loglik) / n,
                           **_plain_stop(obs, old, PLAIN_EM["delta"])},
                   "new": {**_run(new), "max_abs_distance": float(np.max(np.abs(new.theta - ref))),
                           "loglik_deficit_per_report": (L_ref - new.loglik) / n}}
            out.append(rec)
    return out


def _demo_check(params):
    if not params.get("demo"):
        return None
    obs, truth = _observations(DEMO, 0, demo_seed=params.get("demo_seed", 0))
    est = estimate(obs, "ibu", **PLAIN_EM)
    res = em(obs.likelihood_blocks(), obs.k, keep_trace=True, **PLAIN_EM)
    return {"settings": dict(PLAIN_EM), "iterations": int(est.iterations), "converged": bool(est.converged),
            "emd_years": emd_line(truth, est.distribution), "loglik": float(est.loglik),
            "same_as_engine_run": bool(np.array_equal(est.distribution, res.theta)),
            **_plain_stop(obs, res, PLAIN_EM["delta"]), "n": float(obs.n)}


# --------------------------------------------------------------------------------------------
# docs/regularized.md
# --------------------------------------------------------------------------------------------
CAPPED = dict(PLAIN_EM)  # seed 001 Algorithm 1: plain EM, |dL| < 1e-6, at most 10^4 iterations


def _regularized(params, base, progress):
    out = []
    for case in params["regularized_cases"]:
        runs = _runs(params, case["runs"])
        d_runs = _runs(params, case.get("dirichlet_runs", runs))
        dom, counts = _source(case)
        truth = counts / counts.sum()
        if case["data"] == "ages":
            dist, unit = (lambda est, truth=truth: emd_line(truth, est)), "years"
        else:
            D = dom.distance_matrix()
            dist, unit = (lambda est, D=D, truth=truth: emd_grid(truth, est, D)), "km"
        per = {name: [] for name in ("inv-p", "ibu-capped", "mle", "ems", "dirichlet")}
        extra = {"ems_bandwidth": [], "ems_cv_fits": [], "ems_support": [], "mle_support": [],
                 "capped_converged": [], "dirichlet_a": [], "dirichlet_cv_fits": [], "dirichlet_evaluations": [],
                 "dirichlet_tau": []}
        for run in progress(range(runs), case["name"]):
            obs, _ = _observations(case, base, run)
            per["inv-p"].append(dist(estimate(obs, "inv-p").distribution))
            cap = estimate(obs, "ibu", **CAPPED)
            per["ibu-capped"].append(dist(cap.distribution))
            extra["capped_converged"].append(bool(cap.converged))
            mle = estimate(obs, "ibu")
            per["mle"].append(dist(mle.distribution))
            extra["mle_support"].append(int(np.sum(mle.distribution > SUPPORT_THRESHOLD)))
            ems = estimate(obs, "ems")
            per["ems"].append(dist(ems.distribution))
            extra["ems_bandwidth"].append(float(ems.settings["strength"]))
            extra["ems_cv_fits"].append(int(ems.extra["cv"]["fits"]))
            extra["ems_support"].append(int(np.sum(ems.distribution > SUPPORT_THRESHOLD)))
            if run == 0:
                cv = ems.extra["cv"]
                extra["ems_cv_run0"] = {"strengths": list(cv["strengths"]), "heldout": list(cv["heldout"]),
                                        "chosen": float(cv["strength"])}
            if run < d_runs:
                dr = estimate(obs, "dirichlet")
                per["dirichlet"].append(dist(dr.distribution))
                a = float(dr.settings["strength"])
                extra["dirichlet_a"].append(a)
                extra["dirichlet_tau"].append(a * obs.k / obs.n)
                extra["dirichlet_cv_fits"].append(int(dr.extra["cv"]["fits"]))
                extra["dirichlet_evaluations"].append(int(dr.iterations))
        ems_v, mle_v, cap_v = (np.asarray(per[x]) for x in ("ems", "mle", "ibu-capped"))
        rec = {"case": case["name"], "mechanism": case["mechanism"], "unit": unit, "records": int(counts.sum()),
               "k": int(truth.size), "truth_support": int(np.count_nonzero(truth)), "runs": runs,
               "dirichlet_runs": d_runs, "distance": f"EMD in {unit}", "per_run": per,
               "summary": {name: _spread(v) for name, v in per.items()}, **extra,
               "ems_vs_mle_ratio": _spread(mle_v / ems_v), "ems_vs_capped_ratio": _spread(cap_v / ems_v),
               "ems_below_mle_runs": int(np.sum(ems_v < mle_v)),
               "ems_below_capped_runs": int(np.sum(ems_v < cap_v)),
               "capped_below_mle_runs": int(np.sum(cap_v < mle_v))}
        if d_runs:
            dv = np.asarray(per["dirichlet"])
            rec["dirichlet_below_mle_runs"] = int(np.sum(dv < mle_v[:d_runs]))
            rec["dirichlet_below_ems_runs"] = int(np.sum(dv < ems_v[:d_runs]))
        if params.get("ems_acceleration") and runs:
            rec["ems_acceleration"] = _ems_acceleration(case, base, extra["ems_bandwidth"][0])
        out.append(rec)
    return out


def _ems_acceleration(case, base, h):
    """EM-map evaluations of one EMS fit (run 0, its chosen bandwidth): plain iterations against
    SQUAREM on the residual (the engine's default for EMS), both stopped on max_abs < 1e-7."""
    obs, _ = _observations(case, base, 0)
    blocks, k = obs.likelihood_blocks(), obs.k
    pen = SmoothingPenalty(ordered_shape(obs.domain), h)
    plain = em(blocks, k, delta=EMS_DELTA, stop="max_abs", accelerate="none", penalty=pen)
    acc = em(blocks, k, delta=EMS_DELTA, stop="max_abs", accelerate="newton", penalty=pen)
    return {"bandwidth": h, "delta": EMS_DELTA, "plain": _run(plain), "accelerated": _run(acc),
            "max_abs_difference": float(np.max(np.abs(plain.theta - acc.theta)))}


def _categorical(params, base, progress):
    out = []
    eps, s = float(params["categorical_eps"]), float(params["zipf_exponent"])
    runs = _runs(params, params["categorical_runs"])
    for case in progress(params["categorical_cases"], "categorical k-RR"):
        k, n = int(case["k"]), int(case["n"])
        truth = np.arange(1, k + 1, dtype=float) ** -s
        truth /= truth.sum()
        dom = CategoricalDomain([f"v{i}" for i in range(k)])
        mech = parse(f"krr(eps={eps!r})", dom)
        name = f"zipf k={k} n={n}"
        per = {"inv-p": [], "mle": [], "dirichlet": []}
        tau = []
        for run in range(runs):
            obs = Observations([simulate_block(mech, truth, n, _case_rng(base, name, run))], dom)
            per["inv-p"].append(l1(truth, estimate(obs, "inv-p").distribution))
            per["mle"].append(l1(truth, estimate(obs, "ibu").distribution))
            dr = estimate(obs, "dirichlet")
            per["dirichlet"].append(l1(truth, dr.distribution))
            tau.append(float(dr.settings["strength"]) * k / n)
        d, m, i = (np.asarray(per[x]) for x in ("dirichlet", "mle", "inv-p"))
        out.append({"case": name, "k": k, "n": n, "eps": eps, "zipf_exponent": s, "runs": runs, "distance": "L1",
                    "uniform_l1": l1(truth, np.full(k, 1.0 / k)), "per_run": per,
                    "summary": {x: _spread(v) for x, v in per.items()}, "dirichlet_tau": tau,
                    "dirichlet_below_mle_runs": int(np.sum(d < m)), "dirichlet_below_inv_runs": int(np.sum(d < i))})
    return out


# --------------------------------------------------------------------------------------------
# docs/uncertainty.md, near the boundary
# --------------------------------------------------------------------------------------------
def _boundary(params, base, progress):
    from scipy import stats
    lv = float(params["level"])
    z = float(stats.norm.ppf(0.5 + lv / 2))
    runs = _runs(params, params["boundary_runs"])
    out = []
    for case in params["boundary_cases"]:
        dom, counts = _source(case)
        truth = counts / counts.sum()
        values = dom.labels.astype(float)
        true_mean = float(values @ truth)
        mech = parse(case["mechanism"], dom)
        rows = {x: [] for x in ("mle_mean", "fisher_sd", "wald_covers", "inv_mean", "inv_sd", "inv_covers",
                                "library_covers", "library_inversion", "evaluations", "ratio_min",
                                "ratio_median", "ratio_max")}
        noise = None
        for run in progress(range(runs), case["name"]):
            rng = _case_rng(base, case["name"], run)
            obs = Observations([simulate_block(mech, truth, int(case["n"]), rng)], dom)
            est = estimate(obs, "ibu")
            u = est.uncertainty()
            m = float(values @ est.distribution)
            sd_f = float(np.sqrt(max(values @ u.cov @ values, 0.0)))
            v, C = u.extra["inverse_blocks"][0]
            m_inv = float(values @ v)
            sd_inv = float(np.sqrt(max(values @ C @ values, 0.0)))
            lib = u.functional(values, lv)
            rows["mle_mean"].append(m)
            rows["fisher_sd"].append(sd_f)
            rows["wald_covers"].append(bool(abs(m - true_mean) <= z * sd_f))
            rows["inv_mean"].append(m_inv)
            rows["inv_sd"].append(sd_inv)
            rows["inv_covers"].append(bool(abs(m_inv - true_mean) <= z * sd_inv))
            rows["library_covers"].append(bool(lib.lower <= true_mean <= lib.upper))
            rows["library_inversion"].append(lib.method.startswith("inversion"))
            rows["evaluations"].append(int(est.iterations))
            se_f = u.std_error_fisher()
            se_inv = np.sqrt(np.clip(np.diag(C), 0.0, None))
            ok = se_f > 0
            ratio = se_inv[ok] / se_f[ok]
            rows["ratio_min"].append(float(ratio.min()))
            rows["ratio_median"].append(float(np.median(ratio)))
            rows["ratio_max"].append(float(ratio.max()))
            if run == 0:
                pos = truth > 0
                noise = float(np.median(se_inv[pos] / truth[pos]))
        R = len(rows["mle_mean"])

        def share(x, rows=rows):
            return float(np.mean(rows[x]))
        out.append({
            "case": case["name"], "mechanism": case["mechanism"], "n": int(case["n"]), "runs": R, "level": lv,
            "true_mean": true_mean, "binomial_sd": float(np.sqrt(lv * (1 - lv) / R)),
            "mle_mean_average": float(np.mean(rows["mle_mean"])),
            "mle_mean_sd": float(np.std(rows["mle_mean"], ddof=1)) if R > 1 else None,
            "fisher_sd_average": float(np.mean(rows["fisher_sd"])),
            "wald_coverage": share("wald_covers"),
            "inv_mean_average": float(np.mean(rows["inv_mean"])),
            "inv_mean_sd": float(np.std(rows["inv_mean"], ddof=1)) if R > 1 else None,
            "inv_sd_average": float(np.mean(rows["inv_sd"])),
            "inv_coverage": share("inv_covers"),
            "library_coverage": share("library_covers"), "library_inversion_share": share("library_inversion"),
            "cell_se_ratio_inverse_to_fisher": {"run0": {"min": rows["ratio_min"][0],
                                                         "median": rows["ratio_median"][0],
                                                         "max": rows["ratio_max"][0]},
                                                "median_over_runs": _spread(rows["ratio_median"]),
                                                "max_over_runs": _spread(rows["ratio_max"])},
            "cell_noise_to_signal_run0": noise,
            "per_run": rows})
    return out


# --------------------------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------------------------
def _compute(params, rng, progress):
    base = int(rng.integers(2**63))
    return {
        "convergence": {
            "squarem_by_delta": _squarem_by_delta(params, base, progress),
            "newton_finish": _newton_finish(params, base, progress),
            "large_grid": _large_grid(params, base, progress),
            "floor": _floor(params, base, progress),
            "old_vs_new": _old_new(params, base, progress),
            "demo": _demo_check(params),
        },
        "regularized": {
            "ordered": _regularized(params, base, progress),
            "categorical": _categorical(params, base, progress),
        },
        "boundary": _boundary(params, base, progress),
    }


def _plot(results, params, path):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for rec in results["convergence"]["squarem_by_delta"]:
        ds = sorted(rec["squarem"], key=float, reverse=True)
        line, = ax.plot([float(d) for d in ds], [rec["squarem"][d]["evaluations"] for d in ds], marker="o",
                        label=rec["case"])
        ax.plot([float(d) for d in ds], [rec["newton"][d]["evaluations"] for d in ds], ls="--", marker="x",
                color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("delta (certified gap per report)")
    ax.set_ylabel("EM-map evaluations")
    ax.set_title("SQUAREM alone (o) and with the Newton finish (x)", fontsize=9)
    ax.legend(fontsize=6)

    ax = axes[1]
    ordered = results["regularized"]["ordered"]
    if ordered:
        rec = ordered[0]
        names = [x for x in rec["per_run"] if rec["per_run"][x]]
        ax.boxplot([rec["per_run"][x] for x in names])
        ax.set_xticks(range(1, len(names) + 1), names)
        ax.set_yscale("log")
        ax.set_ylabel(f"EMD to the truth ({rec['unit']})")
        runs = ", ".join(f"{x} {len(rec['per_run'][x])}" for x in names
                         if len(rec["per_run"][x]) != rec["runs"])
        ax.set_title(f"{rec['case']}: {rec['runs']} runs" + (f" ({runs})" if runs else ""), fontsize=9)
        ax.tick_params(axis="x", labelsize=7)

    ax = axes[2]
    bnd = results["boundary"]
    if bnd:
        x = np.arange(len(bnd))
        ax.bar(x - 0.2, [r["wald_coverage"] for r in bnd], 0.4, label="Wald (MLE)")
        ax.bar(x + 0.2, [r["inv_coverage"] for r in bnd], 0.4, label="unbiased inverse")
        lv = bnd[0]["level"]
        ax.axhline(lv, color="grey", lw=0.8)
        ax.set_xticks(x)
        ax.set_xticklabels([r["case"] for r in bnd], fontsize=7)
        ax.set_ylim(min(0.5, min(min(r["wald_coverage"], r["inv_coverage"]) for r in bnd) - 0.05), 1.0)
        ax.set_ylabel("coverage of the true mean")
        ax.set_title(f"nominal {lv:.0%} intervals for the mean, {bnd[0]['runs']} data sets each", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)


register_experiment(Experiment(
    name=NAME,
    description="The measured numbers of docs/convergence.md, docs/regularized.md and docs/uncertainty.md",
    defaults=DEFAULTS,
    quick=QUICK,
    compute=_compute,
    plot=_plot,
    reference="house rule: numbers in the docs come from the JSON of a run regenerated by `make docs-numbers`",
))
