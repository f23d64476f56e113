"""Which estimator is accurate, on evidence (``localpriv reproduce estimator-accuracy``; the evidence
of docs/decisions/0001-default-estimators.md).

For every *cell* -- data set x mechanism x privacy level x number of users ``n`` -- ``runs`` data
sets of ``n`` users are drawn i.i.d. (with replacement) from the empirical distribution of real
data we ship, obfuscated, and estimated by every estimator of the configuration; the error to the
truth (the empirical distribution itself) is summarized by its median and spread over the runs.

Data (:func:`dataset`):

* ``ages`` -- UCI Adult ages on the line 0..99 (48,842 persons; EMD in years);
* ``education`` -- UCI Adult education, 16 levels, categorical (48,842 persons; TV and MSE);
* ``manhattan`` -- Gowalla check-ins on the 20 x 14 grid of 0.5-km cells of seed 001 section 7.2
  (98,061 check-ins; EMD in km);
* ``nyc`` -- Gowalla check-ins of the whole city on a 25 x 24 grid of 2-km cells
  (:func:`localpriv.data.datasets.gowalla_nyc_grid`; 138,957 check-ins; EMD in km).

Mechanisms: the LDP oracles k-RR, OUE, OLH, SS at ``eps`` = each of ``eps_ldp``; the metric ones
(geometric, Laplace rounded to whole years, exponential on the line; planar geometric and planar
Laplace on grids) *calibrated* so that the LDP level computed from their channel
(``mechanism.epsilon_ldp()``) equals each of ``eps_ldp`` (bisection on the metric parameter,
:func:`localpriv.inference.simulation.calibrate`), and also at the seeds' metric levels (``seed_eps``:
0.05 per year, seed 001 Fig. 1; 1.0 per km, Fig. 8).

Reports: finite channels draw the report counts directly, ``Multinomial(n, theta M)`` (the exact
law of ``n`` users drawn from ``theta`` and obfuscated one by one); OUE, OLH and SS draw every
user's report with the mechanism's sampler (both via :func:`localpriv.inference.simulation.simulate_block`).
Reports with the same likelihood column (same support and same ``c(z)``, checked) are merged with
their counts summed when ``k <= 64`` -- exact for every likelihood-based estimator, and it makes
the 16-level education column cheap at any ``n``. Finite channels whose structured likelihood block
offers no Newton finish (the Toeplitz blocks of the linear mechanisms) are estimated through their
dense channel (``matrix`` mechanism, same likelihood) up to ``dense_max`` entries, so that "the
MLE" is the certified maximum wherever the engine can certify one.

Estimators (``estimators``, each called by name through :func:`localpriv.estimators.estimate`
with its settings pinned in the configuration): INV-P (``inv-p``; ``mi-p``, the same inversion on
support counts, where the channel cannot be enumerated), capped IBU (seed 001 Algorithm 1: plain
EM, ``|L(t) - L(t-1)| < 1e-6``, at most 10^4 iterations), the MLE (``ibu`` with the certified
Newton finish, stopped on ``max |theta(t) - theta(t-1)| < 1e-9``), and the regularized candidates
``ems`` (ordered domains only) and ``dirichlet``, with their own defaults (strength chosen by
cross-validation; the split seeded per run). An estimator that is not registered is skipped with
the reason recorded; so is an inapplicable pair (EMS on a categorical domain).

Output: ``estimator-accuracy.json`` (every run's error, per-cell medians and spreads, the claims
about the default estimator, calibration, timings), and next to the figure ``estimator-accuracy.csv``
(one row per cell x estimator x metric), ``estimator-accuracy.md`` (the table) and the figures
``estimator-accuracy.png`` (median error vs ``n`` at ``plot_eps``) and
``estimator-accuracy_by_eps.png`` (median error vs LDP eps at the largest ``n``).

Every cell has its own generator, seeded from the experiment's seed and the cell's name, so a
cell gives the same numbers whatever else the configuration holds (quick, medium and full runs
agree on the cells they share, run for run).
"""
from __future__ import annotations

import json
import math
import sys
import time
import zlib
from functools import cache
from pathlib import Path

import numpy as np

from localpriv.data.datasets import NYC_GRID, adult_ages, adult_education, gowalla_nyc_grid, manhattan_cells
from localpriv.data.formats import atomic_output
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.domains.grid import GridDomain, emd_grid
from localpriv.estimators import available_estimators
from localpriv.inference import estimate
from localpriv.inference.metrics import emd_line, mse, total_variation
from localpriv.inference.plotting import plt, save
from localpriv.inference.simulation import calibrate, dense_twin, simulate_observations
from localpriv.mechanisms import parse
from localpriv.utils.validation import LocalPrivError
from reproductions.runner import Experiment, load_records, merged_sources, register_experiment, to_jsonable

__all__ = ["SETTINGS", "ESTIMATORS", "QUICK", "MEDIUM", "EVIDENCE", "calibrate", "dataset", "derive_shipped_data",
           "merge", "write_tables"]

NAME = "estimator-accuracy"

# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------
#: seed 001's metric levels: Fig. 1 (ages, geometric 0.05 per year; Fig. 9 uses 0.01..0.3 for all
#: three linear mechanisms) and Fig. 8 (Manhattan, planar geometric 1.0 per km; Fig. 9 0.2..6)
LINE_SEED_EPS = [0.05]
GRID_SEED_EPS = [1.0]

SETTINGS = [
    {"data": "ages", "mechanism": "k-RR", "spec": "krr(eps={eps})"},
    {"data": "ages", "mechanism": "OUE", "spec": "oue(eps={eps})"},
    {"data": "ages", "mechanism": "OLH", "spec": "olh(eps={eps})"},
    {"data": "ages", "mechanism": "SS", "spec": "ss(eps={eps})"},
    {"data": "ages", "mechanism": "geometric", "spec": "geometric(eps={eps},lo=0,hi=99)", "metric": True,
     "seed_eps": LINE_SEED_EPS, "dense": True},
    {"data": "ages", "mechanism": "Laplace", "spec": "laplace(eps={eps},bins=1.0,lo=0,hi=99)", "metric": True,
     "seed_eps": LINE_SEED_EPS, "dense": True},
    {"data": "ages", "mechanism": "exponential", "spec": "exponential(eps={eps})", "metric": True,
     "seed_eps": LINE_SEED_EPS, "dense": True},
    {"data": "education", "mechanism": "k-RR", "spec": "krr(eps={eps})"},
    {"data": "education", "mechanism": "OUE", "spec": "oue(eps={eps})"},
    {"data": "education", "mechanism": "OLH", "spec": "olh(eps={eps})"},
    {"data": "education", "mechanism": "SS", "spec": "ss(eps={eps})"},
    # grids: k-RR and the planar mechanisms; OUE/OLH/SS on 280 and 600 cells would cost
    # 75-160 support entries per report (10^8 at n = 10^6) and hours per capped-IBU fit
    {"data": "manhattan", "mechanism": "k-RR", "spec": "krr(eps={eps})"},
    {"data": "manhattan", "mechanism": "planar geometric", "spec": "planar-geometric(eps={eps})", "metric": True,
     "seed_eps": GRID_SEED_EPS},
    {"data": "manhattan", "mechanism": "planar Laplace", "spec": "planar-laplace(eps={eps})", "metric": True,
     "seed_eps": GRID_SEED_EPS},
    {"data": "nyc", "mechanism": "k-RR", "spec": "krr(eps={eps})"},
    {"data": "nyc", "mechanism": "planar geometric", "spec": "planar-geometric(eps={eps})", "metric": True,
     "seed_eps": GRID_SEED_EPS},
    {"data": "nyc", "mechanism": "planar Laplace", "spec": "planar-laplace(eps={eps})", "metric": True,
     "seed_eps": GRID_SEED_EPS},
]

#: Keys of a setting: ``data``, ``mechanism`` (its name in the output), ``spec`` (``{eps}`` is the
#: privacy parameter), ``metric`` (calibrate ``{eps}`` to each LDP level), ``seed_eps`` (metric
#: levels run as given), ``dense`` (estimate through the dense channel, see :func:`_dense_twin`),
#: ``n`` (this setting's own list of numbers of users, instead of the configuration's).

#: the estimators compared. ``settings`` are passed as given (every engine setting pinned: the
#: library's defaults are not what this experiment measures); ``seed_setting`` names the setting
#: that receives a per-run seed; ``fallback`` is used when the mechanism has no finite channel;
#: ``ordered_only`` skips categorical domains; ``candidate`` marks the regularized defaults the
#: claims are about.
ESTIMATORS = [
    {"label": "inv-p", "method": "inv-p", "settings": {}, "fallback": "mi-p"},
    {"label": "ibu-capped", "method": "ibu",
     "settings": {"accelerate": "none", "stop": "loglik", "delta": 1e-6, "max_iter": 10_000}},
    {"label": "mle", "method": "ibu",
     "settings": {"accelerate": "newton", "stop": "max_abs", "delta": 1e-9, "max_iter": 20_000}},
    {"label": "ems", "method": "ems", "settings": {}, "seed_setting": "rng", "ordered_only": True,
     "candidate": True},
    {"label": "dirichlet", "method": "dirichlet", "settings": {}, "seed_setting": "rng", "candidate": True},
]

DEFAULTS = {
    "settings": SETTINGS,
    "eps_ldp": [0.5, 1.0, 2.0, 4.0],
    "seed_eps": True,
    "n": [10_000, 100_000, 1_000_000],
    "runs": 20,
    "estimators": ESTIMATORS,
    "dense_max": 1_000_000,
    "plot_eps": 1.0,
    "status": True,
}


def _pick(data: str, mechanism: str) -> dict:
    return next(s for s in SETTINGS if s["data"] == data and s["mechanism"] == mechanism)


#: ``--quick`` (the tests): every code path (count-level and per-user draws, merging, calibration,
#: a grid, the INV fallback) in well under a minute
QUICK = {
    "settings": [_pick("ages", "k-RR"), {**_pick("ages", "geometric"), "seed_eps": [], "n": [1_000]},
                 _pick("education", "k-RR"), _pick("education", "OUE"), _pick("manhattan", "k-RR")],
    "eps_ldp": [2.0],
    "n": [1_000, 10_000],
    "runs": 2,
}

#: the medium run (``run_experiment(NAME, out, overrides=MEDIUM)``):
#: a cross-section that fits in ~10 minutes on 2 shared cores -- LDP eps = 1 and the seeds' metric
#: levels, 3 runs, n = 10^4 (and 10^5 for ages under k-RR and geometric, to see the trend in n)
MEDIUM = {
    "settings": [{**_pick("ages", "k-RR"), "n": [10_000, 100_000]},
                 {**_pick("ages", "geometric"), "n": [10_000, 100_000]},
                 _pick("ages", "Laplace"), _pick("ages", "exponential"), _pick("ages", "OUE"),
                 _pick("education", "k-RR"), _pick("education", "OUE"), _pick("education", "OLH"),
                 _pick("education", "SS"),
                 _pick("manhattan", "k-RR"), _pick("manhattan", "planar geometric"),
                 _pick("nyc", "planar geometric")],
    "eps_ldp": [1.0], "n": [10_000], "runs": 3,
}

#: the evidence run of docs/decisions/0001-default-estimators.md (``make estimator-evidence``): 20 runs
#: per cell at n = 10^4, 10^5 and 10^6 of every setting on ages (k-RR and the metric mechanisms), education
#: (k-RR, OUE, OLH, SS) and the Manhattan grid (k-RR, planar geometric, planar Laplace) and k-RR on
#: the whole-NYC grid, at LDP eps 0.5..4 and the seeds' metric levels; the per-user oracles
#: (OUE, OLH, SS) on ages at n = 10^4 only and planar geometric and planar Laplace on NYC at
#: n = 10^4 and 10^5 only: their capped IBU (10^4 EM iterations over ~n distinct reports, or 600
#: cells) dominates: 770-950 CPU s per per-user oracle for the four levels at 10^4 (~10 s per run),
#: growing about linearly in n.
#: The committed JSON was run in pieces and merged (:func:`merge`; every cell has its own
#: generator, so it equals one run of this configuration). The Dirichlet MAP is run on the categorical
#: data only (on ordered data the medium run and a one-run probe had it at or near the uniform
#: distribution in most cells).
EVIDENCE = {
    "settings": [_pick("ages", "k-RR"), _pick("ages", "geometric"), _pick("ages", "Laplace"),
                 _pick("ages", "exponential"),
                 {**_pick("ages", "OUE"), "n": [10_000]}, {**_pick("ages", "OLH"), "n": [10_000]},
                 {**_pick("ages", "SS"), "n": [10_000]}, _pick("education", "k-RR"),
                 _pick("education", "OUE"),
                 _pick("education", "OLH"), _pick("education", "SS"), _pick("manhattan", "planar geometric"),
                 _pick("manhattan", "planar Laplace"), _pick("manhattan", "k-RR"), _pick("nyc", "k-RR"),
                 {**_pick("nyc", "planar geometric"), "n": [10_000, 100_000]},
                 {**_pick("nyc", "planar Laplace"), "n": [10_000, 100_000]}],
    "eps_ldp": [0.5, 1.0, 2.0, 4.0], "n": [10_000, 100_000, 1_000_000], "runs": 20,
    "estimators": [e if e["label"] != "dirichlet" else {**e, "categorical_only": True} for e in ESTIMATORS],
}

# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------
class _Data:
    """A data set: its domain, true distribution (the empirical one), kind and error metrics."""

    def __init__(self, name, domain, counts, kind, unit, source):
        self.name, self.domain, self.kind, self.unit, self.source = name, domain, kind, unit, source
        counts = np.asarray(counts, dtype=float)
        self.size = int(counts.sum())
        self.theta = counts / counts.sum()
        self.D = domain.distance_matrix() if kind == "grid" else None

    @property
    def ordered(self) -> bool:
        return self.kind in ("line", "grid")

    @property
    def primary(self) -> str:
        return "emd" if self.ordered else "tv"

    def errors(self, est: np.ndarray) -> dict:
        out = {"tv": total_variation(self.theta, est), "mse": mse(self.theta, est)}
        if self.kind == "line":
            out["emd"] = emd_line(self.theta, est)
        elif self.kind == "grid":
            out["emd"] = emd_grid(self.theta, est, self.D)
        return out

    def describe(self) -> dict:
        return {"k": int(self.theta.size), "kind": self.kind, "records": self.size, "emd_unit": self.unit,
                "support": int(np.count_nonzero(self.theta)), "source": self.source}


@cache
def dataset(name: str) -> _Data:
    """The data set ``name`` (ages, education, manhattan, nyc) as shipped with the package."""
    if name == "ages":
        dom = IntegerDomain(0, 99)
        return _Data(name, dom, np.bincount(dom.encode(adult_ages()), minlength=dom.size), "line", "years",
                     "UCI Adult ages (adult.data + adult.test), alphabet 0..99")
    if name == "education":
        labels, counts = adult_education()
        return _Data(name, CategoricalDomain(labels), counts, "categorical", None,
                     "UCI Adult education (column 4), 16 levels")
    if name == "manhattan":
        grid, cells = manhattan_cells(0.5)
        return _Data(name, grid, np.bincount(cells, minlength=grid.size), "grid", "km",
                     "Gowalla check-ins in the Manhattan box, 20 x 14 cells of 0.5 km (seed 001 section 7.2)")
    if name == "nyc":
        grid, counts = gowalla_nyc_grid(2.0)
        return _Data(name, grid, counts, "grid", "km",
                     "Gowalla check-ins of New York (SNAP subset), 25 x 24 cells of 2 km")
    raise LocalPrivError(f"{NAME}: unknown data set {name!r}; known: ages, education, manhattan, nyc")


def derive_shipped_data(shared_dir="/work/shared/data", out_dir=None) -> dict[str, str]:
    """The text of the two count files this experiment ships, derived from the reference copies.

    * ``adult_education.csv``: ``education,education_num,count`` for the 16 levels, from columns 4
      and 5 of every complete row (15 fields) of ``adult.data`` and ``adult.test`` (48,842 persons);
    * ``gowalla_nyc_grid.csv``: ``row,col,count`` of the non-empty cells of the 100 x 96 grid of
      0.5-km cells :data:`localpriv.data.datasets.NYC_GRID` for every check-in of
      ``gowalla_nyc_checkins.tsv.gz`` (138,957; all inside the grid).

    With ``out_dir`` the files are written there as well.
    """
    import pandas as pd

    shared = Path(shared_dir)
    counts: dict[tuple[str, int], int] = {}
    for fname in ("adult.data", "adult.test"):
        with open(shared / fname) as fh:
            for line in fh:
                parts = [p.strip() for p in line.split(",")]
                if len(parts) < 15:
                    continue
                key = (parts[3], int(parts[4]))
                counts[key] = counts.get(key, 0) + 1
    edu = "education,education_num,count\n" + "".join(
        f"{lab},{num},{c}\n" for (lab, num), c in sorted(counts.items(), key=lambda kv: kv[0][1]))
    df = pd.read_csv(shared / "gowalla_nyc_checkins.tsv.gz", sep="\t", header=None,
                     names=["user", "time", "lat", "lon", "location"])
    grid = GridDomain(**NYC_GRID)
    cells = grid.locate(df["lat"].to_numpy(), df["lon"].to_numpy(), outside="error")
    c = np.bincount(cells, minlength=grid.size)
    nz = np.flatnonzero(c)
    nyc = "row,col,count\n" + "".join(f"{i // grid.ncols},{i % grid.ncols},{c[i]}\n" for i in nz)
    files = {"adult_education.csv": edu, "gowalla_nyc_grid.csv": nyc}
    if out_dir is not None:
        for name, text in files.items():
            (Path(out_dir) / name).write_text(text)
    return files


# --------------------------------------------------------------------------------------------
# mechanisms: specs at a parameter
# --------------------------------------------------------------------------------------------
def _spec(fmt: str, eps: float) -> str:
    return fmt.format(eps=repr(float(eps)))


# --------------------------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------------------------
def _status(params, msg):
    if params.get("status", True):
        print(f"[{NAME}] {msg}", file=sys.stderr, flush=True)


def _plan(params) -> list[dict]:
    """Every (setting, privacy level) of the configuration, calibrated; cells are these x n."""
    levels = []
    for s in params["settings"]:
        data = dataset(s["data"])
        for target in params["eps_ldp"]:
            lv = {"setting": s, "calibration": "ldp", "eps_ldp_target": float(target)}
            if s.get("metric"):
                e, computed = calibrate(s["spec"], data.domain, float(target))
                lv.update(eps_metric=e, eps_ldp=computed)
            else:
                lv.update(eps_metric=None, eps_ldp=None)
                e = float(target)
            lv["spec"] = _spec(s["spec"], e)
            levels.append(lv)
        if params.get("seed_eps", True):
            for e in s.get("seed_eps", []):
                levels.append({"setting": s, "calibration": "seed metric", "eps_ldp_target": None,
                               "eps_metric": float(e), "eps_ldp": None, "spec": _spec(s["spec"], e)})
    for lv in levels:
        if lv["eps_ldp"] is None:
            lv["eps_ldp"] = float(parse(lv["spec"], dataset(lv["setting"]["data"]).domain).epsilon_ldp())
    return levels


def _summary(values) -> dict:
    a = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if a.size == 0:
        return {"median": None, "q10": None, "q25": None, "q75": None, "q90": None, "mean": None, "ok": 0}
    q = np.quantile(a, [0.1, 0.25, 0.5, 0.75, 0.9])
    return {"median": float(q[2]), "q10": float(q[0]), "q25": float(q[1]), "q75": float(q[3]),
            "q90": float(q[4]), "mean": float(a.mean()), "ok": int(a.size)}


def _applicable(spec: dict, data: _Data, registered: set) -> str | None:
    """Why estimator ``spec`` is skipped on ``data`` (``None``: it runs)."""
    if spec["method"] not in registered:
        return f"estimator {spec['method']!r} is not registered (localpriv.estimators.available_estimators())"
    if spec.get("ordered_only") and not data.ordered:
        return "ordered domains only (by rule): the data set is categorical"
    if spec.get("categorical_only") and data.ordered:
        return "categorical domains only (by this configuration): the data set is ordered"
    return None


def _cell_rng(base: int, key: str) -> np.random.Generator:
    return np.random.default_rng([base, zlib.crc32(key.encode())])


def _run_cell(lv, n, params, base, registered):
    s = lv["setting"]
    data = dataset(s["data"])
    mech = parse(lv["spec"], data.domain)
    twin = dense_twin(mech, int(params["dense_max"]), bool(s.get("dense")))
    key = f"{s['data']}|{s['mechanism']}|{lv['spec']}|n={n}"
    rng = _cell_rng(base, key)
    specs = params["estimators"]
    skipped, methods = {}, {}
    for e in specs:
        why = _applicable(e, data, registered)
        if why:
            skipped[e["label"]] = why
        method = e["method"]
        if e.get("fallback") and mech.n_outputs is None:
            method = e["fallback"]
            if method not in registered:
                skipped[e["label"]] = f"fallback {method!r} is not registered"
        methods[e["label"]] = method
    live = [e for e in specs if e["label"] not in skipped]
    metrics = ["emd", "tv", "mse"] if data.ordered else ["tv", "mse"]
    values = {e["label"]: {m: [] for m in metrics} for e in live}
    info = {e["label"]: {"seconds": 0.0, "failed": 0, "not_converged": 0, "iterations": [], "strength": [],
                         "first_error": None, "settings_used": None} for e in live}
    t_draw, t0, last = 0.0, time.perf_counter(), time.perf_counter()
    for r in range(int(params["runs"])):
        t = time.perf_counter()
        obs = simulate_observations(mech, twin, data.theta, int(n), rng, data.domain)
        t_draw += time.perf_counter() - t
        for e in live:
            lab = e["label"]
            kw = dict(e.get("settings", {}))
            if e.get("seed_setting"):
                kw[e["seed_setting"]] = int(rng.integers(2 ** 31))
            t = time.perf_counter()
            try:
                est = estimate(obs, methods[lab], **kw)
            except LocalPrivError as exc:
                info[lab]["failed"] += 1
                info[lab]["first_error"] = info[lab]["first_error"] or str(exc)[:300]
                for m in metrics:
                    values[lab][m].append(None)
                continue
            finally:
                info[lab]["seconds"] += time.perf_counter() - t
            for m, v in data.errors(est.distribution).items():
                values[lab][m].append(v)
            info[lab]["not_converged"] += int(est.converged is False)
            if est.iterations is not None:
                info[lab]["iterations"].append(int(est.iterations))
            if "strength" in est.settings:
                info[lab]["strength"].append(float(est.settings["strength"]))
            if info[lab]["settings_used"] is None:
                info[lab]["settings_used"] = {k: v for k, v in est.settings.items()
                                              if isinstance(v, (str, int, float, bool, type(None)))}
        if time.perf_counter() - last > 10.0:
            last = time.perf_counter()
            _status(params, f"  {key}: run {r + 1}/{params['runs']}, {last - t0:.0f} s")
    est_out = {}
    for e in live:
        lab = e["label"]
        i = info[lab]
        est_out[lab] = {
            "method": methods[lab], "summary": {m: _summary(values[lab][m]) for m in metrics},
            "values": values[lab], "seconds": round(i["seconds"], 3), "failed": i["failed"],
            "first_error": i["first_error"], "not_converged": i["not_converged"],
            "median_iterations": float(np.median(i["iterations"])) if i["iterations"] else None,
            "max_iterations": int(max(i["iterations"])) if i["iterations"] else None,
            "median_strength": float(np.median(i["strength"])) if i["strength"] else None,
            "settings_used": i["settings_used"]}
    return {"key": key, "data": s["data"], "kind": data.kind, "mechanism": s["mechanism"], "spec": lv["spec"],
            "calibration": lv["calibration"], "eps_ldp_target": lv["eps_ldp_target"], "eps_ldp": lv["eps_ldp"],
            "eps_metric": lv["eps_metric"], "n": int(n), "runs": int(params["runs"]),
            "primary": data.primary, "estimation_channel": "dense (matrix)" if twin is not None else "native",
            "estimators": est_out, "skipped": skipped,
            "seconds": {"draw": round(t_draw, 3), "total": round(time.perf_counter() - t0, 3)}}


def _claims(cells, specs) -> dict:
    """The claims about the default estimator, per candidate: on ordered domains (median EMD), in how many cells it
    beats both capped IBU and the MLE, and in how many it loses to INV-P by more than INV-P's
    run-to-run spread (interquartile range); the same counts on TV for categorical cells."""
    out = {"rule": {
        "beats": "median(candidate) < median(ibu-capped) and median(candidate) < median(mle), same cell",
        "loses_to_inv_p": "median(candidate) - median(inv-p) > q75(inv-p) - q25(inv-p) (INV-P's run-to-run IQR)",
        "ordered": "metric emd, cells of line and grid data; categorical: metric tv"},
        "candidates": {}}
    for e in specs:
        if not e.get("candidate"):
            continue
        c = e["label"]
        rec = {}
        for group, metric, pick in (("ordered", "emd", lambda x: x["kind"] != "categorical"),
                                    ("categorical", "tv", lambda x: x["kind"] == "categorical")):
            g = {"cells": 0, "beats_capped_and_mle": 0, "beats_capped": 0, "beats_mle": 0,
                 "compared_to_inv_p": 0, "loses_to_inv_p_beyond_spread": 0, "losing_cells": [],
                 "not_beating_both": [], "skipped_cells": 0, "by_calibration": {}}
            for cell in cells:
                if not pick(cell):
                    continue
                ests = cell["estimators"]
                med = {k: v["summary"][metric]["median"] for k, v in ests.items()}
                if med.get(c) is None or med.get("ibu-capped") is None or med.get("mle") is None:
                    g["skipped_cells"] += 1
                    continue
                g["cells"] += 1
                bc, bm = med[c] < med["ibu-capped"], med[c] < med["mle"]
                g["beats_capped"] += int(bc)
                g["beats_mle"] += int(bm)
                g["beats_capped_and_mle"] += int(bc and bm)
                if not (bc and bm):
                    g["not_beating_both"].append(cell["key"])
                bcal = g["by_calibration"].setdefault(cell["calibration"], {"cells": 0, "beats_capped_and_mle": 0})
                bcal["cells"] += 1
                bcal["beats_capped_and_mle"] += int(bc and bm)
                if med.get("inv-p") is not None:
                    s = ests["inv-p"]["summary"][metric]
                    g["compared_to_inv_p"] += 1
                    if med[c] - s["median"] > s["q75"] - s["q25"]:
                        g["loses_to_inv_p_beyond_spread"] += 1
                        g["losing_cells"].append(cell["key"])
            g["share_beats_capped_and_mle"] = g["beats_capped_and_mle"] / g["cells"] if g["cells"] else None
            rec[group] = g
        out["candidates"][c] = rec
    return out


def _compute(params, rng, progress):
    base = int(rng.integers(2 ** 32))
    registered = set(available_estimators())
    t0 = time.perf_counter()
    levels = _plan(params)
    _status(params, f"{len(levels)} privacy levels calibrated in {time.perf_counter() - t0:.1f} s")
    plan = [(lv, n) for lv in levels for n in lv["setting"].get("n", params["n"])]
    cells = []
    for i, (lv, n) in enumerate(progress(plan, NAME)):
        cell = _run_cell(lv, n, params, base, registered)
        cells.append(cell)
        prim = cell["primary"]
        meds = ", ".join(f"{k} {v['summary'][prim]['median']:.4g}" for k, v in cell["estimators"].items()
                         if v["summary"][prim]["median"] is not None)
        _status(params, f"{i + 1}/{len(plan)} {cell['data']} {cell['mechanism']} eps_ldp={cell['eps_ldp']:.3g} "
                        f"n={n}: {cell['seconds']['total']:.1f} s; median {prim}: {meds}")
    skipped = {}
    for cell in cells:
        for lab, why in cell["skipped"].items():
            skipped.setdefault(lab, {}).setdefault(why, 0)
            skipped[lab][why] += 1
    return {
        "datasets": {name: dataset(name).describe() for name in sorted({s["data"] for s in params["settings"]})},
        "levels": [{"data": lv["setting"]["data"], "mechanism": lv["setting"]["mechanism"], "spec": lv["spec"],
                    "calibration": lv["calibration"], "eps_ldp_target": lv["eps_ldp_target"],
                    "eps_ldp": lv["eps_ldp"], "eps_metric": lv["eps_metric"]} for lv in levels],
        "registered_estimators": sorted(registered),
        "skipped": skipped,
        "cells": cells,
        "claims": _claims(cells, params["estimators"]),
        "truth_note": "truth = the empirical distribution of the data set; users drawn i.i.d. from it "
                      "(with replacement) at every n",
    }


def merge(paths, out) -> dict:
    """Merge the JSON records of runs over disjoint (setting, level, n) cells -- e.g. the same
    configuration split by setting or by ``n`` -- into ``out/estimator-accuracy.{json,csv,md,png}``.

    Every cell has its own generator, derived from the experiment's seed and the cell's key
    (:func:`_cell_rng`: data, mechanism, spec and ``n``), so the merge equals one run over all the
    cells, number for number. The records must agree on the seed, ``quick``, runs, estimators and
    the data-set's truth; a cell present in two records is refused. Claims and the skipped
    summary are recomputed over the merged cells.
    """
    recs = load_records(paths, ("runs", "estimators", "dense_max"))
    first = recs[0]
    cells, keys, levels, datasets, settings = [], set(), [], {}, []
    for r in recs:
        for cell in r["results"]["cells"]:
            if cell["key"] in keys:
                raise LocalPrivError(f"merge: cell {cell['key']!r} appears in more than one record")
            keys.add(cell["key"])
            cells.append(cell)
        for lv in r["results"]["levels"]:
            if lv not in levels:
                levels.append(lv)
        for name, desc in r["results"]["datasets"].items():
            if datasets.setdefault(name, desc) != desc:
                raise LocalPrivError(f"merge: the records describe data set {name!r} differently")
        for s in r["params"]["settings"]:
            base = {k: v for k, v in s.items() if k != "n"}
            if all({k: v for k, v in t.items() if k != "n"} != base for t in settings):
                settings.append(base)
    order = {(s["data"], s["mechanism"]): i for i, s in enumerate(settings)}
    cells.sort(key=lambda c: (order[(c["data"], c["mechanism"])], c["calibration"] != "ldp",
                              c["eps_ldp_target"] or 0.0, c["eps_metric"] or 0.0, c["n"]))
    skipped = {}
    for cell in cells:
        for lab, why in cell["skipped"].items():
            skipped.setdefault(lab, {}).setdefault(why, 0)
            skipped[lab][why] += 1
    all_n = sorted({int(c["n"]) for c in cells})
    for i, st in enumerate(settings):  # a setting that ran at fewer n says which
        ran = sorted({int(c["n"]) for c in cells if (c["data"], c["mechanism"]) == (st["data"], st["mechanism"])})
        if ran != all_n:
            settings[i] = {**st, "n": ran}
    params = {**first["params"], "settings": settings,
              "n": all_n,
              "eps_ldp": sorted({float(e) for r in recs for e in r["params"]["eps_ldp"]})}
    results = {**first["results"], "datasets": datasets, "levels": levels, "skipped": skipped, "cells": cells,
               "claims": _claims(cells, params["estimators"])}
    record = {**first, "params": params, "results": results,
              "elapsed_seconds": round(sum(r["elapsed_seconds"] for r in recs), 3),
              "merged_from": merged_sources(recs, paths)}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_output(out / f"{NAME}.json") as tmp:
        tmp.write_text(json.dumps(to_jsonable(record), indent=1))
    _plot(results, params, out / f"{NAME}.png")
    return record


# --------------------------------------------------------------------------------------------
# table, CSV and figures
# --------------------------------------------------------------------------------------------
def _eps_label(cell) -> str:
    if cell["calibration"] == "ldp":
        return f"LDP {cell['eps_ldp_target']:g}" + ("" if cell["eps_metric"] is None
                                                    else f" (metric {cell['eps_metric']:.4g})")
    return f"metric {cell['eps_metric']:g} (LDP {cell['eps_ldp']:.3g})"


def write_tables(results: dict, params: dict, out_dir, name: str = NAME) -> tuple[Path, Path]:
    """Write ``NAME.csv`` (one row per cell x estimator x metric) and ``NAME.md`` (the table:
    median [q25, q75] of the primary metric per estimator, best median in bold, and the claims)."""
    import csv
    out_dir = Path(out_dir)
    labels = [e["label"] for e in params["estimators"]]
    csv_path, md_path = out_dir / f"{name}.csv", out_dir / f"{name}.md"
    cols = ["data", "mechanism", "spec", "calibration", "eps_ldp_target", "eps_ldp", "eps_metric", "n", "runs",
            "estimator", "method", "metric", "median", "q10", "q25", "q75", "q90", "mean", "ok_runs", "failed",
            "not_converged", "median_iterations", "median_strength", "seconds", "skipped"]
    with open(csv_path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for c in results["cells"]:
            head = [c["data"], c["mechanism"], c["spec"], c["calibration"], c["eps_ldp_target"], c["eps_ldp"],
                    c["eps_metric"], c["n"], c["runs"]]
            for lab in labels:
                if lab in c["skipped"]:
                    w.writerow(head + [lab, "", "", "", "", "", "", "", "", 0, "", "", "", "", "", c["skipped"][lab]])
                    continue
                e = c["estimators"][lab]
                for m, s in e["summary"].items():
                    w.writerow(head + [lab, e["method"], m, s["median"], s["q10"], s["q25"], s["q75"], s["q90"],
                                       s["mean"], s["ok"], e["failed"], e["not_converged"], e["median_iterations"],
                                       e["median_strength"], e["seconds"], ""])
    lines = [f"# {name}: median error [q25, q75] over {params['runs']} runs",
             "", "EMD in years (ages) or km (grids); TV for the categorical education column. "
             "Best median of each row in bold; '-' = skipped (see the JSON for the reason).", ""]
    lines.append("| data | mechanism | eps | n | metric | " + " | ".join(labels) + " |")
    lines.append("|" + "---|" * (5 + len(labels)))
    for c in results["cells"]:
        m = c["primary"]
        meds = {lab: c["estimators"][lab]["summary"][m]["median"] for lab in labels
                if lab in c["estimators"] and c["estimators"][lab]["summary"][m]["median"] is not None}
        best = min(meds.values()) if meds else None
        row = []
        for lab in labels:
            if lab not in meds:
                row.append("-")
                continue
            s = c["estimators"][lab]["summary"][m]
            txt = f"{s['median']:.4g} [{s['q25']:.3g}, {s['q75']:.3g}]"
            row.append(f"**{txt}**" if s["median"] == best else txt)
        lines.append(f"| {c['data']} | {c['mechanism']} | {_eps_label(c)} | {c['n']:,} | {m} | "
                     + " | ".join(row) + " |")
    lines += ["", "## Claims", ""]
    for cand, rec in results["claims"]["candidates"].items():
        for group, g in rec.items():
            if g["cells"] == 0:
                continue
            lines.append(f"- **{cand}**, {group} cells: beats both capped IBU and the MLE in median in "
                         f"{g['beats_capped_and_mle']} of {g['cells']} (capped IBU: {g['beats_capped']}, MLE: "
                         f"{g['beats_mle']}); loses to INV-P by more than INV-P's IQR in "
                         f"{g['loses_to_inv_p_beyond_spread']} of {g['compared_to_inv_p']}.")
    md_path.write_text("\n".join(lines) + "\n")
    return csv_path, md_path


_STYLE = {"inv-p": ("tab:green", "s"), "ibu-capped": ("tab:blue", "o"), "mle": ("tab:red", "v"),
          "ems": ("tab:purple", "D"), "dirichlet": ("tab:orange", "^")}


def _panels(results):
    out = {}
    for c in results["cells"]:
        out.setdefault((c["data"], c["mechanism"]), []).append(c)
    return out


def _figure(results, params, path, xkey):
    """One panel per (data, mechanism): median error (band q25-q75) of every estimator against
    ``n`` at LDP eps ``plot_eps`` (``xkey="n"``), or against the LDP eps at the largest ``n``
    (``xkey="eps"``; the seeds' metric levels as hollow markers at their computed LDP eps)."""
    panels = _panels(results)
    labels = [e["label"] for e in params["estimators"]]
    ncols = min(4, max(1, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.3 * nrows), squeeze=False)
    for ax, ((data, mech), cells) in zip(axes.ravel(), panels.items()):
        ldp = [c for c in cells if c["calibration"] == "ldp"]
        extra = []
        if xkey == "n":
            eps_avail = sorted({c["eps_ldp_target"] for c in ldp})
            eps = params["plot_eps"] if params["plot_eps"] in eps_avail else (eps_avail[0] if eps_avail else None)
            sel = [c for c in ldp if c["eps_ldp_target"] == eps] if eps is not None else cells
            title = f"{data}: {mech}, LDP eps={eps:g}" if eps is not None else f"{data}: {mech}"
            x_of = lambda c: c["n"]  # noqa: E731
        else:
            nmax = max(c["n"] for c in cells)
            sel = [c for c in ldp if c["n"] == nmax]
            extra = [c for c in cells if c["calibration"] != "ldp" and c["n"] == nmax]
            title = f"{data}: {mech}, n={nmax:,}"
            x_of = lambda c: c["eps_ldp_target"] if c["calibration"] == "ldp" else c["eps_ldp"]  # noqa: E731
        sel = sorted(sel, key=x_of)
        metric = cells[0]["primary"]
        for lab in labels:
            color, marker = _STYLE.get(lab, (None, "x"))
            for group, hollow in ((sel, False), (extra, True)):
                pts = [(x_of(c), c["estimators"][lab]["summary"][metric]) for c in group
                       if lab in c["estimators"] and c["estimators"][lab]["summary"][metric]["median"] is not None]
                if not pts:
                    continue
                xs = np.array([p[0] for p in pts])
                med = np.array([p[1]["median"] for p in pts])
                err = np.array([med - [p[1]["q25"] for p in pts], [p[1]["q75"] for p in pts] - med])
                ax.errorbar(xs, med, yerr=np.maximum(err, 0), marker=marker, color=color, ms=4, capsize=2,
                            lw=0 if hollow else 1.2, elinewidth=0.8, mfc="none" if hollow else color,
                            label=None if hollow else lab)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("n (users)" if xkey == "n" else "LDP eps (hollow: the seeds' metric eps)", fontsize=8)
        unit = dataset(data).unit
        ax.set_ylabel(f"median {metric.upper()}" + (f" ({unit})" if metric == "emd" and unit else ""), fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    if panels:
        axes.ravel()[0].legend(fontsize=7)
    fig.suptitle(f"{NAME}: median error (bars: q25-q75) over {params['runs']} runs", fontsize=10)
    fig.tight_layout()
    save(fig, path)


def _plot(results, params, path):
    path = Path(path)
    write_tables(results, params, path.parent, path.stem)
    _figure(results, params, path, "n")
    _figure(results, params, path.with_name(f"{path.stem}_by_eps.png"), "eps")


register_experiment(Experiment(
    name=NAME,
    description="Accuracy of INV-P, capped IBU, the MLE, EMS and Dirichlet MAP on real data (ages, education, "
                "Manhattan, NYC) under 9 mechanisms, LDP eps 0.5..4 and the seeds' metric eps, n 1e4..1e6",
    defaults=DEFAULTS,
    quick=QUICK,
    compute=_compute,
    plot=_plot,
    reference="evidence for the default estimator (docs/decisions/0001)",
))
