"""Reproductions of seed 003 (free-will privacy): Tables I and II with Figures 2-14 behind them.

``freewill-table1``: 10 mechanisms per scenario (Tables V-VIII of the seed: k-RR + k-RR,
geometric + geometric, k-RR + geometric, Shokri + Shokri), users split equally between them,
on the linear alphabet {0..99} (binomial, alpha = 0.5) and on a planar grid. Estimators: [INV]R
(N, P) and [IBU]R (Figs. 3-6, linear), [INV]M (N, P) and [IBU]M against GIBU (Figs. 7-13, linear
and planar). ``freewill-table2``: 10 basic-RAPPOR mechanisms on {0..19} (Table IV, high and low
privacy): [RAP]R and [RAP]M (N, P) against GIBU (Figs. 2 and 14).

Deviations (see docs/freewill.md): the planar alphabet is the Gowalla *Manhattan* grid (0.5 km
cells) in place of San Francisco, whose check-ins we do not have; Shokri's planar mechanisms are
solved on 1 km cells (the LP has k^3 non-zeros: 70 cells instead of 280); aggregated counts are
drawn directly per mechanism (:func:`localpriv.data.freewill.simulate_counts`, the exact law of the
aggregated reports); the sample sizes of the seed's figures are not stated, we sweep ``ns``.
The error is the earth mover's distance (seed 003 section 7): |x - y| on the line, km on the grid.
Verdicts, per space: ratio of an estimator's mean EMD to GIBU's at the largest n: <= 1.25
Excellent, <= 2 Good, else Bad (the better post-processing of N/P is used for INV and RAP); NA
when the estimator does not apply (singular channel). Every ratio carries its 95 % run-to-run
interval (paired runs, :mod:`reproductions.spread`); a verdict whose interval straddles
1.25 or 2 is reported as ``undecided (...)``, the point verdict kept beside it.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import ot
from scipy import stats

from localpriv.data.datasets import gowalla_manhattan
from localpriv.data.freewill import rappor_observations, simulate_counts, split_users
from localpriv.domains import IntegerDomain
from localpriv.domains.grid import MANHATTAN_BOX, GridDomain
from localpriv.estimators.combination import combine_results, gibu, ibu_m, inv_m, rap_m
from localpriv.inference.metrics import emd_line
from localpriv.inference.plotting import plt, save
from localpriv.mechanisms import parse
from localpriv.utils.validation import LocalPrivError
from reproductions.runner import Experiment, register_experiment
from reproductions.spread import banded_verdict, ratio_interval

# ---- the seed's mechanism tables (Appendix A) -------------------------------------------------
TABLE_IV = {"high": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
            "low": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]}
TABLE_V = {"linear": [3.00, 3.54, 3.96, 4.34, 4.69, 5.06, 5.46, 5.93, 6.60, 8.08],
           "planar": [3.05, 4.19, 4.81, 5.27, 5.67, 6.05, 6.44, 6.87, 7.40, 8.20]}
TABLE_VI = {"linear": [0.020, 0.025, 0.031, 0.039, 0.050, 0.065, 0.088, 0.131, 0.236, 0.869],
            "planar": [0.190, 0.244, 0.310, 0.390, 0.493, 0.632, 0.835, 1.159, 1.762, 3.124]}
TABLE_VII = {"linear": ([0.065, 0.088, 0.131, 0.236, 0.869], [3.00, 3.54, 3.96, 4.34, 4.69]),
             "planar": ([0.632, 0.835, 1.159, 1.762, 3.124], [3.05, 4.19, 4.81, 5.27, 5.67])}
TABLE_VIII = {"linear": [1.0, 4.0, 7.0, 10.0, 13.0, 16.0, 19.0, 22.0, 24.5, 28.0],
              "planar": [0.3, 0.6, 0.9, 1.2, 1.5, 1.8, 2.1, 2.4, 2.7, 3.0]}

#: Table I of the seed (rows: scenarios; columns: estimators), for the side-by-side table.
PAPER_TABLE1 = {
    "krr+krr": {"[INV]R": "Bad", "[IBU]R": "Bad", "[INV]M": "Excellent", "[IBU]M": "Good", "GIBU": "Excellent"},
    "geo+geo": {"[INV]R": "Bad", "[IBU]R": "Bad", "[INV]M": "Bad", "[IBU]M": "Bad", "GIBU": "Excellent"},
    "krr+geo": {"[INV]R": "Bad", "[IBU]R": "Bad", "[INV]M": "Bad", "[IBU]M": "Bad", "GIBU": "Excellent"},
    "shokri": {"[INV]R": "NA", "[IBU]R": "Bad", "[INV]M": "NA", "[IBU]M": "Bad", "GIBU": "Excellent"},
}
PAPER_TABLE2 = {"high": {"[RAP]R": "Bad", "[RAP]M": "Excellent", "GIBU": "Excellent"},
                "low": {"[RAP]R": "Bad", "[RAP]M": "Good", "GIBU": "Excellent"}}
FIGURES1 = {"krr+krr": {"R": 3, "INV-M": 7, "IBU-M": 10}, "geo+geo": {"R": 5, "INV-M": 8, "IBU-M": 11},
            "krr+geo": {"R": 4, "INV-M": 9, "IBU-M": 12}, "shokri": {"R": 6, "IBU-M": 13}}


def verdict(ratio) -> str:
    """Excellent (<= 1.25 x GIBU's EMD), Good (<= 2 x), Bad (> 2 x); NA when not applicable."""
    if ratio is None or not np.isfinite(ratio):
        return "NA"
    return "Excellent" if ratio <= 1.25 else ("Good" if ratio <= 2.0 else "Bad")


def _specs(scenario: str, space: str, k: int) -> list[str]:
    if scenario == "krr+krr":
        return [f"krr(eps={e})" for e in TABLE_V[space]]
    geo = (lambda e: f"geometric(eps={e},lo=0,hi={k - 1})") if space == "linear" else \
        (lambda e: f"planar-geometric(eps={e})")
    if scenario == "geo+geo":
        return [geo(e) for e in TABLE_VI[space]]
    if scenario == "krr+geo":
        g, r = TABLE_VII[space]
        return [geo(e) for e in g] + [f"krr(eps={e})" for e in r]
    if scenario == "shokri":
        return [f"shokri(q={q})" for q in TABLE_VIII[space]]
    raise LocalPrivError(f"unknown scenario {scenario!r}")


def _grid(cell_km):
    b = MANHATTAN_BOX
    return GridDomain.from_box(b["lat_min"], b["lat_max"], b["lon_min"], b["lon_max"], cell_km)


def _planar_truth(grid: GridDomain) -> np.ndarray:
    df = gowalla_manhattan()
    idx = grid.locate(df["lat"].to_numpy(), df["lon"].to_numpy(), outside="drop")
    idx = idx[idx >= 0]
    return np.bincount(idx, minlength=grid.size) / idx.size


@lru_cache(maxsize=4)
def _planar(cell_km: float):
    """Grid, truth and distances of one cell size, built once per process (shared by settings)."""
    dom = _grid(cell_km)
    return dom, _planar_truth(dom), dom.distance_matrix()


def _setting(space, params, scenario):
    """``(domain, theta, distance matrix, EMD function)`` of one space."""
    if space == "linear":
        k = params["k_linear"]
        dom = IntegerDomain(0, k - 1)
        theta = stats.binom.pmf(np.arange(k), k - 1, 0.5)
        return dom, theta, dom.distance_matrix(), lambda p, q: emd_line(p, q)
    dom, theta, D = _planar(float(params["shokri_cell_km"] if scenario == "shokri" else params["cell_km"]))
    return dom, theta, D, lambda p, q: float(ot.emd2(np.asarray(p, float), np.asarray(q, float) / np.sum(q), D))


def _run_estimators(obs, names, n, delta_norm, max_iter, accelerate="none", stop="loglik"):
    """EMD-ready estimates; ``None`` where the estimator does not apply (recorded as NA).

    The EM-based estimators run plain EM stopped on ``|L(t) - L(t-1)| < delta_norm * n`` (seed 001
    Algorithm 1's rule, per report), pinned whatever the library's defaults.
    """
    out = {}
    it_kw = {"max_iter": max_iter, "accelerate": accelerate, "stop": stop}
    nb = len(obs.blocks)
    for name in names:
        try:
            if name == "gibu":
                est = gibu(obs, delta=delta_norm * n, **it_kw)
            elif name == "ibu-m":
                est = ibu_m(obs, delta=delta_norm * n, **it_kw)
            elif name == "ibu-r":
                est = combine_results(obs, "ibu", delta=delta_norm * n / nb, **it_kw)
            elif name in ("inv-n-r", "inv-p-r", "rap-n-r", "rap-p-r"):
                est = combine_results(obs, name[:-2])
            elif name in ("inv-n-m", "inv-p-m"):
                est = inv_m(obs, post=name[4])
            elif name in ("rap-n-m", "rap-p-m"):
                est = rap_m(obs, post=name[4])
            else:
                raise LocalPrivError(f"unknown estimator {name}")
            out[name] = est.distribution
        except LocalPrivError as exc:
            out[name] = None
            out.setdefault("_errors", {})[name] = str(exc)
    return out


R_NAMES = ["inv-n-r", "inv-p-r", "ibu-r"]
M_NAMES = ["inv-n-m", "inv-p-m", "ibu-m", "gibu"]


VERDICT_BANDS = [(1.25, "Excellent"), (2.0, "Good"), (float("inf"), "Bad")]


def _verdict_cell(runs: dict, names) -> dict:
    """Ratio of the better of ``names`` (lower mean EMD over the runs) to GIBU's, with its
    run-to-run interval (:func:`reproductions.spread.ratio_interval`, paired runs) and
    the verdict of the whole interval; ``undecided (...)`` when it straddles 1.25 or 2."""
    means = {nm: _mean_or_none(runs[nm]) for nm in names if nm in runs}
    means = {nm: v for nm, v in means.items() if v is not None}
    if not means:
        return {"ratio": None, "lo": None, "hi": None, "runs": 0, "verdict": "NA", "verdict_point": "NA"}
    best = min(means, key=means.get)
    iv = ratio_interval(runs[best], runs["gibu"])
    return {**iv, "estimator": best, "verdict": banded_verdict(iv, VERDICT_BANDS),
            "verdict_point": verdict(iv["ratio"])}


def _mean_or_none(vals):
    vals = [v for v in vals if v is not None]
    return float(np.mean(vals)) if vals else None


def _compute1(params, rng, progress):
    ns = [int(n) for n in params["ns"]]
    results = {"emd": {}, "emd_runs": {}, "errors": {}, "privacy": {}, "table": {}, "paper": PAPER_TABLE1}
    jobs = [(sc, sp) for sc in params["scenarios"] for sp in params["spaces"]]
    for scenario, space in progress(jobs, "scenarios"):
        dom, theta, D, dist = _setting(space, params, scenario)
        # mechanisms (and their channels, Shokri's LPs) are built once and shared by all runs
        mechs = [parse(s, dom) for s in _specs(scenario, space, dom.size)]
        with np.errstate(invalid="ignore", divide="ignore"):  # privacy computed from each channel
            results["privacy"][f"{scenario}/{space}"] = [
                {"spec": str(m), "eps_ldp": m.epsilon_ldp(), "eps_geo": m.epsilon_geo(D)} for m in mechs]
        names = (R_NAMES if space == "linear" else []) + M_NAMES
        table = {name: [[None] * params["runs"] for _ in ns] for name in names}
        for i, n in enumerate(ns):
            for r in range(params["runs"]):
                obs = simulate_counts(theta, mechs, split_users(n, len(mechs)), rng, dom)
                ests = _run_estimators(obs, names, n, params["delta_norm"], params["max_iter"],
                                       params["accelerate"], params["stop"])
                for name in names:
                    if ests.get(name) is not None:
                        table[name][i][r] = dist(theta, ests[name])
                for name, msg in ests.get("_errors", {}).items():
                    results["errors"][f"{scenario}/{space}/{name}"] = msg
        results["emd"][f"{scenario}/{space}"] = {
            name: [_mean_or_none(row) for row in rows] for name, rows in table.items()}
        # every run's EMD at the largest n: the verdicts' intervals
        results["emd_runs"][f"{scenario}/{space}"] = {name: rows[-1] for name, rows in table.items()}
    # verdicts at the largest n, per space (R columns: linear only, as in the seed's Figs. 3-6)
    for scenario in params["scenarios"]:
        row = {}
        for col, names, spaces in (("[INV]R", ["inv-n-r", "inv-p-r"], ["linear"]), ("[IBU]R", ["ibu-r"], ["linear"]),
                                   ("[INV]M", ["inv-n-m", "inv-p-m"], params["spaces"]),
                                   ("[IBU]M", ["ibu-m"], params["spaces"]), ("GIBU", ["gibu"], params["spaces"])):
            cell = {}
            for sp in spaces:
                e = results["emd_runs"].get(f"{scenario}/{sp}")
                if e is None:
                    continue
                cell[sp] = _verdict_cell(e, names)
            row[col] = cell
        results["table"][scenario] = row
    results["ns"] = ns
    return results


def _loglog(ax, title, ylabel, fontsize=7):
    """Log-log axes of one figure panel (mean EMD against n)."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=fontsize + 1)
    ax.set_xlabel("n (users)", fontsize=fontsize)
    ax.set_ylabel(ylabel, fontsize=fontsize)
    ax.legend(fontsize=fontsize - 1)


def _save_figure(fig, title, path):
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    save(fig, path)


def _plot1(results, params, path):
    ns = results["ns"]
    panels = []
    for sc in params["scenarios"]:
        figs = FIGURES1[sc]
        if "linear" in params["spaces"]:
            panels.append((f"Fig. {figs['R']}: {sc}, linear ([e]R)", f"{sc}/linear", R_NAMES + ["gibu"]))
        for sp in params["spaces"]:
            if "INV-M" in figs:
                panels.append((f"Fig. {figs['INV-M']}: {sc}, {sp} ([INV]M)", f"{sc}/{sp}",
                               ["inv-n-m", "inv-p-m", "gibu"]))
            panels.append((f"Fig. {figs['IBU-M']}: {sc}, {sp} ([IBU]M)", f"{sc}/{sp}", ["ibu-m", "gibu"]))
    ncols = 3
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(13, 3.0 * nrows), squeeze=False)
    for ax, (title, key, names) in zip(axes.ravel(), panels):
        e = results["emd"].get(key, {})
        for nm in names:
            ys = e.get(nm)
            if ys is None or all(y is None for y in ys):
                continue
            ax.plot(ns, [np.nan if y is None else y for y in ys], marker="o", label=nm)
        _loglog(ax, title, "EMD" + (" (km)" if "planar" in key else ""))
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    _save_figure(fig, "seed 003 Table I: mean EMD to the truth (ours)", path)


register_experiment(Experiment(
    name="freewill-table1",
    description="Seed 003 Table I (Figs. 3-13): [INV]R, [IBU]R, [INV]M, [IBU]M vs GIBU under mixtures of "
                "k-RR, geometric and Shokri mechanisms (linear {0..99}; planar Gowalla Manhattan grid)",
    defaults={"scenarios": ["krr+krr", "geo+geo", "krr+geo", "shokri"], "spaces": ["linear", "planar"],
              "ns": [1000, 10000, 100000], "runs": 100, "k_linear": 100, "cell_km": 0.5, "shokri_cell_km": 1.0,
              "delta_norm": 1e-7, "max_iter": 10000, "accelerate": "none", "stop": "loglik"},
    quick={"ns": [20000], "runs": 1, "k_linear": 30, "cell_km": 2.0, "shokri_cell_km": 2.0,
           "scenarios": ["krr+krr", "geo+geo", "shokri"]},
    compute=_compute1,
    plot=_plot1,
    reference="seed 003 sections 7-8, Table I, Figs. 3-13, Tables V-VIII",
))


# ------------------------------------------------------------------------------ Table II
T2_NAMES = ["rap-n-r", "rap-p-r", "rap-n-m", "rap-p-m", "gibu"]


def _compute2(params, rng, progress):
    k = params["k"]
    theta = stats.binom.pmf(np.arange(k), k - 1, 0.5)
    ns = [int(n) for n in params["ns"]]
    results = {"emd": {}, "emd_runs": {}, "table": {}, "paper": PAPER_TABLE2, "ns": ns}
    for regime in progress(params["regimes"], "regimes"):
        eps = TABLE_IV[regime]
        table = {name: [[] for _ in ns] for name in T2_NAMES}
        for i, n in enumerate(ns):
            for _ in range(params["runs"]):
                obs = rappor_observations(theta, eps, split_users(n, len(eps)), rng)
                ests = _run_estimators(obs, T2_NAMES, n, params["delta_norm"], params["max_iter"],
                                       params["accelerate"], params["stop"])
                for name in T2_NAMES:
                    table[name][i].append(emd_line(theta, ests[name]))
        results["emd"][regime] = {name: [float(np.mean(r)) for r in rows] for name, rows in table.items()}
        results["emd_runs"][regime] = {name: rows[-1] for name, rows in table.items()}
        row = {}
        for col, names in (("[RAP]R", ["rap-n-r", "rap-p-r"]), ("[RAP]M", ["rap-n-m", "rap-p-m"]), ("GIBU", ["gibu"])):
            row[col] = _verdict_cell(results["emd_runs"][regime], names)
        results["table"][regime] = row
    return results


def _plot2(results, params, path):
    ns = results["ns"]
    regimes = list(results["emd"])
    fig, axes = plt.subplots(len(regimes), 2, figsize=(10, 3.2 * len(regimes)), squeeze=False)
    for row, regime in zip(axes, regimes):
        e = results["emd"][regime]
        for ax, (fig_no, names) in zip(row, ((2, ["rap-n-r", "rap-p-r", "gibu"]),
                                             (14, ["rap-n-m", "rap-p-m", "gibu"]))):
            for nm in names:
                ax.plot(ns, e[nm], marker="o", label=nm)
            _loglog(ax, f"Fig. {fig_no}{'a' if regime == 'high' else 'b'}: {regime} privacy", "EMD", fontsize=8)
    _save_figure(fig, "seed 003 Table II: 10 basic-RAPPOR mechanisms on {0..19} (ours)", path)


register_experiment(Experiment(
    name="freewill-table2",
    description="Seed 003 Table II (Figs. 2, 14): [RAP]R, [RAP]M vs GIBU under 10 basic-RAPPOR mechanisms "
                "on {0..19}, high (eps 0.1..1) and low (eps 1..10) privacy",
    defaults={"regimes": ["high", "low"], "ns": [1000, 10000, 100000], "runs": 20, "k": 20,
              "delta_norm": 1e-9, "max_iter": 100000, "accelerate": "none", "stop": "loglik"},
    quick={"ns": [5000], "runs": 1, "k": 10},
    compute=_compute2,
    plot=_plot2,
    reference="seed 003 sections 5.4, 7, 8.3, Table II, Figs. 2 and 14, Table IV",
))
