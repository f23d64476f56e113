"""Calibration of the intervals (``localpriv reproduce coverage``).

For each mechanism setting and each number of users ``n``, ``runs`` data sets are drawn from real
data we ship (users sampled with replacement from the empirical distribution of Adult ages, or of
the Gowalla check-ins on the Manhattan grid), obfuscated, estimated by the maximum-likelihood
estimator (``ibu`` / ``gibu``, certified Newton finish), and the nominal 90 % and 95 % intervals of
:mod:`localpriv.inference.uncertainty` are checked against the truth (the empirical distribution itself):

* the mean (ages: years; grid: km east of the grid's west edge),
* the median (ages; interpolated quantile, see :meth:`localpriv.inference.estimate.Estimate.quantile`),
* every cell (the share of cells whose interval covers, averaged over runs, and the worst cell).

Finite channels draw the report counts directly, ``Multinomial(n, theta M)`` (the exact law of
``n`` users drawn from ``theta`` and obfuscated one by one); vector-valued mechanisms (OUE, OLH, SS)
draw every user's report with the mechanism's sampler. Free-will mixtures give each mechanism an
equal share of the users (GIBU). Two more settings run the default estimator of ordered domains,
EMS (docs/decisions/0001-default-estimators.md), whose intervals are the MLE's widened to contain the EMS estimate (the
``"anchored"`` method of :mod:`localpriv.inference.uncertainty`; a bootstrap around EMS under-covered, see
docs/uncertainty.md), and two the categorical column of Adult education (16 levels; cells only,
no mean or median): the MLE and the categorical default, the Dirichlet MAP (anchored too).

Every (setting, n) cell has its own generator, derived from the experiment's seed and the cell's
name, so a run split by settings and merged (:func:`merge`) equals one run over all of them. The
EMS settings may run fewer times (``max_runs``; stated in the JSON as each cell's ``runs``).
:func:`table_markdown` renders docs/uncertainty.md's table from the JSON (``make coverage-docs``).
"""
from __future__ import annotations

import json
import time
import zlib
from pathlib import Path

import numpy as np

from localpriv.data.datasets import adult_ages, adult_education, manhattan_cells
from localpriv.data.formats import atomic_output
from localpriv.data.observations import Observations
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.estimators.oracles import pure_parameters
from localpriv.inference import estimate
from localpriv.inference.estimate import quantile_crossing
from localpriv.inference.plotting import plt, save
from localpriv.inference.simulation import simulate_block
from localpriv.mechanisms import parse
from localpriv.utils.validation import LocalPrivError
from reproductions.runner import Experiment, load_records, merged_sources, register_experiment, to_jsonable
from reproductions.table import rewrite_block

#: the vector mechanisms (OUE, OLH, SS) draw every user's report and fit the MLE over ~n distinct
#: reports; with the packed-bit support (mechanisms/_packed.py) a run costs ~1.5 s at n = 10^5 and
#: ~5 s at 10^6 on one core, so they run the full ``runs`` (was
#: 200 / 40 at 10^5 / 10^6 with the sparse support)
#: EMS's intervals are anchored on the MLE (one more certified fit per run, localpriv.inference.uncertainty),
#: and EMS selects its bandwidth by cross-validation (~80 fits): ~1.2 s per run under k-RR and ~6 s
#: under the geometric mechanism (face replicates), whatever n (count-level draws); the committed
#: record ran these many (binomial sd of a 95 % coverage: 1.5 points over 200, 1.8 over 150, 2.8 over 60)
EMS_RUNS = {"10000": 200, "100000": 200, "1000000": 200}
EMS_GEOMETRIC_RUNS = {"10000": 150, "100000": 60, "1000000": 60}

SETTINGS = [
    {"name": "k-RR", "data": "ages", "mechanisms": ["krr(eps=1.0)"]},
    {"name": "OUE", "data": "ages", "mechanisms": ["oue(eps=1.0)"]},
    {"name": "OLH", "data": "ages", "mechanisms": ["olh(eps=1.0)"]},
    {"name": "SS", "data": "ages", "mechanisms": ["ss(eps=1.0)"]},
    {"name": "geometric", "data": "ages", "mechanisms": ["geometric(eps=0.05,lo=0,hi=99)"]},
    {"name": "planar geometric", "data": "manhattan", "mechanisms": ["planar-geometric(eps=1.0)"]},
    {"name": "free-will k-RR mix", "data": "ages", "mechanisms": ["krr(eps=0.5)", "krr(eps=1.0)", "krr(eps=4.0)"]},
    # the default estimator on ordered domains (docs/decisions/0001-default-estimators.md): EMS,
    # intervals anchored on the MLE (one more fit per run: fewer runs, EMS_RUNS)
    {"name": "EMS k-RR", "data": "ages", "mechanisms": ["krr(eps=1.0)"], "estimator": "ems",
     "max_runs": EMS_RUNS},
    {"name": "EMS geometric", "data": "ages", "mechanisms": ["geometric(eps=0.05,lo=0,hi=99)"], "estimator": "ems",
     "max_runs": EMS_GEOMETRIC_RUNS},
    # the default estimator on categorical domains: the Dirichlet MAP, intervals anchored
    # on the MLE, on the 16 Adult education levels; the MLE on the same column beside it (cells
    # only: a categorical domain has no mean or median)
    {"name": "k-RR education", "data": "education", "mechanisms": ["krr(eps=1.0)"]},
    {"name": "Dirichlet k-RR education", "data": "education", "mechanisms": ["krr(eps=1.0)"],
     "estimator": "dirichlet"},
]


#: the small-n calibration (``localpriv reproduce coverage-small``, ``make coverage-small``):
#: synthetic truths on 0..99 at the boundary of the simplex, where Wald intervals fail:
#: ``sparse``, five values of mass 0.2 (10, 30, 50, 70, 90) and 95 zero cells; ``concentrated``,
#: 0.9 on the value 40 and 0.001 on every value; under k-RR, OUE and the geometric mechanism, at
#: n = 10, 100 and 1,000 (every (setting, n) cell its own generator: a run split by setting or by
#: n and merged equals one run); two estimators, the MLE by SQUAREM without the Newton finish (at
#: n = 10 the finish takes ~1,000 face solves per refit of the face bootstrap: ~100 s per run)
#: and the default on this ordered domain, EMS (intervals anchored on the MLE). The profile bounds
#: search all cells at once (one row per cell) and the geometric block takes its products from its
#: dense 100 x 100 matrix; the face bootstrap's 60 SQUAREM refits of a geometric run go as the rows
#: of one matrix (localpriv.estimators.em_rows, compiled per row), the same refits without the
#: engine's per-call overhead, which dominated a geometric run when they went one at a time.
#: ``cell_seconds`` (default None: every cell runs ``runs`` times) stops a cell after the run during
#: which its wall time passes that budget: its ``runs`` in the JSON are the runs done, the first runs
#: of its generator, so a rerun with ``max_runs`` set to them reproduces the cell
SMALL_MECHANISMS = (("k-RR", "krr(eps=2.0)"), ("OUE", "oue(eps=2.0)"), ("geometric", "geometric(eps=0.2,lo=0,hi=99)"))
SMALL_SETTINGS = [
    {"name": f"{mech} {truth}", "data": truth, "mechanisms": [spec], "fit": {"accelerate": "squarem"}}
    for truth in ("sparse", "concentrated") for mech, spec in SMALL_MECHANISMS
] + [
    {"name": f"EMS {mech} {truth}", "data": truth, "mechanisms": [spec], "estimator": "ems"}
    for truth in ("sparse", "concentrated") for mech, spec in SMALL_MECHANISMS
]
ORDERED = ("ages", "sparse", "concentrated")


def _data(name: str):
    """(domain, true distribution, values for the mean) of a shipped data set or a synthetic truth
    (values ``None``: a categorical domain, cells only)."""
    if name in ("sparse", "concentrated"):
        dom = IntegerDomain(0, 99)
        theta = np.zeros(dom.size)
        if name == "sparse":
            theta[[10, 30, 50, 70, 90]] = 0.2
        else:
            theta[:] = 0.001
            theta[40] += 0.9
        return dom, theta, dom.labels.astype(float)
    if name == "education":
        labels, counts = adult_education()
        counts = np.asarray(counts, dtype=float)
        return CategoricalDomain(labels), counts / counts.sum(), None
    if name == "ages":
        dom = IntegerDomain(0, 99)
        x = dom.encode(adult_ages())
        return dom, np.bincount(x, minlength=dom.size) / x.size, dom.labels.astype(float)
    dom, cells = manhattan_cells(0.5)
    return dom, np.bincount(cells, minlength=dom.size) / cells.size, dom.centres_km()[:, 0]


def _one(setting, dom, theta, values, n, levels, rng, true_median):
    mechs = [parse(s, dom) for s in setting["mechanisms"]]
    shares = np.full(len(mechs), n // len(mechs))
    shares[: n - shares.sum()] += 1
    obs = Observations([simulate_block(m, theta, int(s), rng) for m, s in zip(mechs, shares)], dom)
    method = setting.get("estimator", "ibu")
    est = estimate(obs, method, **(setting.get("fit", {"accelerate": "newton"}) if method == "ibu" else {}))
    out = {}
    for lv in levels:
        lo, hi = est.ci(lv)
        rec = {"cells": (lo <= theta) & (theta <= hi), "cells_width": float(np.mean(hi - lo))}
        if values is not None:
            m = est.functional(values, lv)
            rec.update(mean=bool(m.lower <= values @ theta <= m.upper), mean_width=m.upper - m.lower)
        if true_median is not None:
            med = est.quantile(0.5, lv)
            rec["median"] = bool(med.lower <= true_median <= med.upper)
            rec["median_width"] = med.upper - med.lower
        out[lv] = rec
    return out, bool(est.converged)


def _cell_rng(base: int, name: str, n: int) -> np.random.Generator:
    """The generator of one (setting, n) cell: from the experiment's seed and the cell's name, so a
    cell gives the same numbers whatever else runs (runs can be split by setting and merged)."""
    return np.random.default_rng([base, zlib.crc32(name.encode()), int(n)])


def _compute(params, rng, progress):
    levels = [float(v) for v in params["levels"]]
    base = int(rng.integers(2**63))
    results = {"settings": {}}
    for setting in progress(params["settings"], "settings"):
        dom, theta, values = _data(setting["data"])
        ordered = setting["data"] in ORDERED
        has_mean = values is not None
        true_median = quantile_crossing(values, np.cumsum(theta), 0.5) if ordered else None
        per_n = {}
        for n in params["n"]:
            t0 = time.perf_counter()
            R = int(min(params["runs"], setting.get("max_runs", {}).get(str(int(n)), params["runs"])))
            if R < 1:
                continue  # this setting does not run at this n (max_runs 0)
            cell_rng = _cell_rng(base, setting["name"], n)
            hits = {lv: {"mean": 0, "median": 0, "cells": np.zeros(theta.size), "mean_width": 0.0,
                         "median_width": 0.0, "cells_width": 0.0} for lv in levels}
            not_conv = 0
            budget = params.get("cell_seconds")
            done = 0
            for _ in progress(range(R), f"{setting['name']} n={n}"):
                if budget is not None and done and time.perf_counter() - t0 >= float(budget):
                    break  # the cell's time budget is spent: its first `done` runs (stated as its runs)
                done += 1
                rec, conv = _one(setting, dom, theta, values, int(n), levels, cell_rng, true_median)
                not_conv += not conv
                for lv in levels:
                    h = hits[lv]
                    h["cells"] += rec[lv]["cells"]
                    h["cells_width"] += rec[lv]["cells_width"]
                    if has_mean:
                        h["mean"] += rec[lv]["mean"]
                        h["mean_width"] += rec[lv]["mean_width"]
                    if ordered:
                        h["median"] += rec[lv]["median"]
                        h["median_width"] += rec[lv]["median_width"]
            R = done
            cell = {}
            for lv in levels:
                h = hits[lv]
                cov_cells = h["cells"] / R
                cell[str(lv)] = {
                    "mean": h["mean"] / R if has_mean else None, "median": h["median"] / R if ordered else None,
                    "cells_average": float(cov_cells.mean()), "cells_worst": float(cov_cells.min()),
                    "cells_worst_value": to_jsonable(dom.labels[int(np.argmin(cov_cells))])
                    if ordered or not has_mean else int(np.argmin(cov_cells)),
                    "cells_under_nominal_by_3sd": int(np.sum(cov_cells < lv - 3 * np.sqrt(lv * (1 - lv) / R))),
                    "mean_width": h["mean_width"] / R if has_mean else None,
                    "cells_width": h["cells_width"] / R,  # the cells' interval width, averaged
                    "median_width": h["median_width"] / R if ordered else None,
                    "binomial_sd": float(np.sqrt(lv * (1 - lv) / R)),
                }
            per_n[str(n)] = {"coverage": cell, "runs": R, "not_converged": not_conv,
                             "seconds": round(time.perf_counter() - t0, 2)}
        results["settings"][setting["name"]] = {"mechanisms": setting["mechanisms"], "data": setting["data"],
                                                "k": int(theta.size), "by_n": per_n,
                                                "estimator": setting.get("estimator", "ibu")}
    results["targets"] = TARGETS
    results["missed_targets"] = check_targets(results)
    return results


#: the calibration targets: mean and median within 1.5 points of nominal, cells within 3 on average
TARGETS = {"mean": 0.015, "median": 0.015, "cells_average": 0.03}


#: a miss is *significant* when the coverage lies beyond the target band by more than this many
#: binomial sds (two-sided 95 %): the band is about +-1.1 sd at 90 % over 500 runs, so a quarter
#: of perfectly calibrated cells would miss it by chance alone
SIGNIFICANT_Z = 1.96


def check_targets(results: dict) -> list[dict]:
    """One row per (setting, n, level, statistic) that misses its target (``TARGETS``), with the
    deviation from nominal, the binomial sd of the coverage at that number of runs, the
    direction: ``under`` (intervals too short) or ``over`` (conservative), and whether the miss is
    ``significant``: beyond the band by more than ``SIGNIFICANT_Z`` binomial sds (else the
    run-to-run noise of the coverage estimate can explain it)."""
    misses = []
    for name, s in results["settings"].items():
        for n, cell in s["by_n"].items():
            for lv, cov in cell["coverage"].items():
                for stat, tol in TARGETS.items():
                    v = cov.get(stat)
                    if v is None:
                        continue
                    dev = v - float(lv)
                    if abs(dev) > tol:
                        sd = float(cov["binomial_sd"])
                        misses.append({"setting": name, "n": int(n), "level": float(lv), "statistic": stat,
                                       "coverage": v, "deviation": round(dev, 4), "runs": cell["runs"],
                                       "binomial_sd": sd, "direction": "under" if dev < 0 else "over",
                                       "significant": bool(abs(dev) - tol > SIGNIFICANT_Z * sd)})
    return misses


def merge(paths, out, replace: bool = False) -> dict:
    """Merge the JSON records of runs over disjoint (setting, n) cells (same seed, levels and
    runs; each cell as its record ran it) into ``out/NAME.json`` and ``out/NAME.png``, ``NAME`` the
    records' experiment (``coverage`` or ``coverage-small``).
    Every cell has its own generator (:func:`_cell_rng`), so the merge equals one run over all the
    cells, cell by cell. A cell in two records is refused, unless ``replace``: then the later
    record's cell replaces the earlier one (e.g. the same cell rerun with more runs; its runs are
    in the record) and the replacement is listed in ``merged_replaced``. Merging into a merged record
    keeps its history: its ``merged_from`` and ``merged_replaced`` entries come first."""
    recs = load_records(paths, ("runs", "levels"))
    first = recs[0]
    settings, results, replaced = [], {"settings": {}}, []
    for r in recs:
        for name, res in r["results"]["settings"].items():
            have = results["settings"].get(name)
            if have is None:
                results["settings"][name] = {**res, "by_n": dict(res["by_n"])}
                continue
            if have["mechanisms"] != res["mechanisms"] or have.get("estimator", "ibu") != res.get("estimator", "ibu"):
                raise LocalPrivError(f"merge: setting {name!r} differs between records")
            for n, cell in res["by_n"].items():
                if n in have["by_n"]:
                    if not replace:
                        raise LocalPrivError(f"merge: setting {name!r} at n = {n} appears in more than one record")
                    replaced.append({"setting": name, "n": int(n), "runs_before": have["by_n"][n]["runs"],
                                     "runs_after": cell["runs"]})
                have["by_n"][n] = cell
            have["by_n"] = dict(sorted(have["by_n"].items(), key=lambda kv: int(kv[0])))
        settings += [st for st in r["params"]["settings"] if all(t["name"] != st["name"] for t in settings)]
    # what each setting ran: its max_runs restated from the merged cells' own run counts
    full = int(first["params"]["runs"])
    for i, st in enumerate(settings):
        ran = results["settings"].get(st["name"], {}).get("by_n", {})
        mr = {**st.get("max_runs", {}), **{n: int(c["runs"]) for n, c in ran.items() if int(c["runs"]) < full}}
        for n in ran:
            if int(ran[n]["runs"]) >= full:
                mr.pop(n, None)
        settings[i] = {**{k: v for k, v in st.items() if k != "max_runs"}, **({"max_runs": mr} if mr else {})}
    record = dict(first)
    ns = sorted({int(n) for r in recs for n in r["params"]["n"]})
    record["params"] = {**first["params"], "settings": settings, "n": ns}
    results["targets"] = TARGETS
    results["missed_targets"] = check_targets(results)
    record["results"] = results
    record["elapsed_seconds"] = round(sum(r["elapsed_seconds"] for r in recs), 3)
    record["merged_from"] = merged_sources(recs, paths)
    replaced = [x for r in recs for x in r.get("merged_replaced", [])] + replaced  # earlier merges' too
    record.pop("merged_replaced", None)
    if replaced:
        record["merged_replaced"] = replaced
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    name = str(first.get("name") or "coverage")
    with atomic_output(out / f"{name}.json") as tmp:
        tmp.write_text(json.dumps(to_jsonable(record), indent=1))
    _plot(results, record["params"], out / f"{name}.png")
    return record


def mc_se(coverage: float, runs: int) -> float:
    """The Monte-Carlo standard error of a coverage measured over ``runs`` runs,
    ``sqrt(c (1 - c) / runs)``, with ``c`` kept within ``[1 / runs, 1 - 1 / runs]`` (a coverage of
    0 or 1 gets the error of one run the other way, not 0). For the cells' average (an average of
    correlated hits per run) it is an upper bound: a variable in ``[0, 1]`` with mean ``c`` has
    variance at most ``c (1 - c)``."""
    r = max(int(runs), 1)
    c = min(max(float(coverage), 1.0 / r), 1.0 - 1.0 / r) if r > 1 else 0.5
    return float(np.sqrt(c * (1.0 - c) / r))


def _pm(v: float, runs: int) -> str:
    return f"{v:.3f} ±{mc_se(v, runs):.3f}"


def _cov(c: dict, stat: str, runs: int) -> str:
    a, b = c["0.95"].get(stat), c["0.9"].get(stat)
    return "-" if a is None else f"{_pm(a, runs)} / {_pm(b, runs)}"


def table_markdown(record: dict) -> str:
    """The coverage table of docs/uncertainty.md, rendered from a ``coverage`` record: one row per
    (setting, n) with its runs, the coverage of the nominal 95 % / 90 % intervals of the mean and
    the median, the cells' average (worst cell) and the mean width of the 95 % interval of the mean.
    Every coverage carries its Monte-Carlo standard error over the row's runs (:func:`mc_se`).
    Misses of the targets (:data:`TARGETS`) are marked ``under`` or ``over``, and
    ``(significant)`` when beyond the band by more than the coverage's own noise
    (:func:`check_targets`)."""
    units = {"ages": "years", "manhattan": "km", "sparse": "", "concentrated": ""}
    miss_dirs: dict = {}
    for m in record["results"].get("missed_targets", []):
        miss_dirs.setdefault((m["setting"], int(m["n"])), set()).add(
            f"{m['statistic'].replace('cells_average', 'cells')} {int(round(100 * m['level']))} {m['direction']}"
            + (" **(significant)**" if m.get("significant") else ""))
    lines = ["| setting | estimator | n | runs | mean 95 / 90 (± MC se) | median 95 / 90 (± MC se) | "
             "cells avg 95 ± MC se (worst) | cells avg 90 ± MC se | mean width 95 | misses of the targets |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    ran = {st["name"]: st for st in record.get("params", {}).get("settings", [])}
    for name, s in record["results"]["settings"].items():
        estimator = s.get("estimator") or ran.get(name, {}).get("estimator", "ibu")
        for n, cell in s["by_n"].items():
            c = cell["coverage"]
            R = int(cell["runs"])
            width = c["0.95"].get("mean_width")
            miss = ", ".join(sorted(miss_dirs.get((name, int(n)), ()))) or "none"
            lines.append(
                f"| {name} | {estimator} | {int(n):,} | {R} | "
                f"{_cov(c, 'mean', R)} | {_cov(c, 'median', R)} | {_pm(c['0.95']['cells_average'], R)} "
                f"({c['0.95']['cells_worst']:.2f}) | {_pm(c['0.9']['cells_average'], R)} | "
                f"{'-' if width is None else f'{width:.3g} ' + units.get(s['data'], '')} | {miss} |")
    return "\n".join(lines)


def plugin_table_markdown(record: dict) -> str:
    """The plug-in check's table (``coverage-small-plugin``): per setting, the coverage of the
    mean and the median at 95 / 90 % with the inverse's covariance read from the reports (the
    library) and exact under the truth, on the same data sets, each with its Monte-Carlo se."""
    lines = ["| setting | n | runs | mean's interval the inverse's | mean 95 / 90, plug-in | mean 95 / 90, exact | "
             "median 95 / 90, plug-in | median 95 / 90, exact |", "|---|---|---|---|---|---|---|---|"]
    for name, s in record["results"]["settings"].items():
        for n, cell in s["by_n"].items():
            R, c = int(cell["runs"]), cell["coverage"]

            def pair(how: str, stat: str, R: int = R, c: dict = c) -> str:
                return f"{_pm(c[f'{how} {stat} 0.95'], R)} / {_pm(c[f'{how} {stat} 0.9'], R)}"
            lines.append(f"| {name} | {int(n):,} | {R} | {cell['inverse_used_for_mean']:.2f} | "
                         f"{pair('plugin', 'mean')} | {pair('exact', 'mean')} | {pair('plugin', 'median')} | "
                         f"{pair('exact', 'median')} |")
    return "\n".join(lines)


def rewrite_docs(record_path="docs/results/coverage.json", doc="docs/uncertainty.md",
                 small_path="docs/results/coverage-small.json",
                 plugin_path="docs/results/coverage-small-plugin.json") -> None:
    """Regenerate docs/uncertainty.md's coverage tables (between its ``coverage``,
    ``coverage-small`` and ``coverage-small-plugin`` markers) from the committed JSON records
    (``make coverage-docs``)."""
    rewrite_block(doc, "coverage", table_markdown(json.loads(Path(record_path).read_text())))
    if Path(small_path).exists():
        rewrite_block(doc, "coverage-small", table_markdown(json.loads(Path(small_path).read_text())))
    if Path(plugin_path).exists():
        rewrite_block(doc, "coverage-small-plugin", plugin_table_markdown(json.loads(Path(plugin_path).read_text())))


#: the plot's vertical range; coverages below it are drawn on its lower edge with their value
_PLOT_FLOOR = 0.84


def _plot(results, params, path):
    """Coverage against n: one row per nominal level, one column per statistic (mean, median,
    cells' average); error bars +-1.96 binomial sd of the coverage itself, the grey band the
    target (+-1.5 points for mean and median, +-3 for the cells). EMS and Dirichlet settings dashed; values
    below the plotted range sit on its lower edge as down-pointing triangles, labelled."""
    names = list(results["settings"])
    levels = sorted((str(v) for v in params["levels"]), key=float, reverse=True)
    stats = ("mean", "median", "cells_average")
    fig, axes = plt.subplots(len(levels), 3, figsize=(15, 3.6 * len(levels)), sharex=True, squeeze=False)
    colors = plt.get_cmap("tab20").colors
    for row, lv in enumerate(levels):
        nominal = float(lv)
        for col, what in enumerate(stats):
            ax = axes[row][col]
            for i, name in enumerate(names):
                by_n = results["settings"][name]["by_n"]
                ns = [n for n in sorted(by_n, key=float) if lv in by_n[n]["coverage"]]
                ys = np.array([np.nan if by_n[n]["coverage"][lv].get(what) is None else by_n[n]["coverage"][lv][what]
                               for n in ns], dtype=float)
                if not ns or np.all(np.isnan(ys)):
                    continue
                sd = np.array([by_n[n]["coverage"][lv]["binomial_sd"] for n in ns])
                x = np.array([float(n) for n in ns]) * (1.0 + 0.03 * (i - len(names) / 2))  # dodge
                style = "--" if name.startswith(("EMS", "Dirichlet")) else "-"
                low = ys < _PLOT_FLOOR
                shown = np.where(low, np.nan, ys)
                ax.errorbar(x, shown, yerr=1.96 * sd, marker="o", ms=4, lw=1, ls=style, capsize=2,
                            color=colors[i % len(colors)], label=name)
                for xi, yi in zip(x[low], ys[low]):
                    ax.plot([xi], [_PLOT_FLOOR + 0.004], marker="v", color=colors[i % len(colors)], ms=7)
                    ax.annotate(f"{yi:.2f}", (xi, _PLOT_FLOOR + 0.01 + 0.012 * (i % 3)), fontsize=7,
                                ha="center", color=colors[i % len(colors)])
            tol = TARGETS[what]
            ax.axhspan(nominal - tol, nominal + tol, color="grey", alpha=0.2)
            ax.axhline(nominal, color="grey", lw=0.8)
            ax.set_ylim(_PLOT_FLOOR, 1.0)
            ax.set_xscale("log")
            ax.set_title(f"{what.replace('_', ' ')}: coverage of nominal {nominal:.0%}", fontsize=9)
            if row == len(levels) - 1:
                ax.set_xlabel("n (users)")
        axes[row][0].set_ylabel("empirical coverage")
    legend = {}  # every setting once, whichever panel drew it (categorical ones have no mean)
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(lab, h)
    labels, handles = [lab for lab in names if lab in legend], [legend[lab] for lab in names if lab in legend]
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.04 + 0.02 * ((len(labels) - 1) // 6), 1, 1))
    save(fig, path)


#: the plug-in check (``localpriv reproduce coverage-small-plugin``, ``make coverage-small-plugin``):
#: where the MLE's mean and median take the unbiased inverse's interval, its covariance is read from
#: the n reports (plug-in). Each run computes the intervals twice on the same data: as the library
#: does, and with the inverse's exact covariance under the truth (everything else unchanged), so a
#: gap between the two coverages is the plug-in's share of the miss
PLUGIN_SETTINGS = [s for s in SMALL_SETTINGS if "estimator" not in s and not s["name"].startswith("k-RR")]


def _exact_inverse_cov(mech, theta: np.ndarray, n: int, family: str) -> np.ndarray:
    """The covariance of the unbiased raw inverse of ``n`` reports drawn from ``theta``: the
    library's formula (``uncertainty._raw_inverse``) with the report law's moments under the truth
    instead of those read from the reports. ``"mi"``: ``Cov(s) / (n (p - q)^2)`` with ``E[s_y] =
    q + theta_y (p - q)`` and, for ``y != z``, ``E[s_y s_z] = q^2 + (theta_y + theta_z) q (p - q)``;
    ``"inv"``: ``W^T (diag(f) - f f^T) W / n`` with ``f = theta M`` and ``W`` the channel's inverse."""
    if family == "mi":
        p, q = pure_parameters(mech)
        m1 = q + theta * (p - q)
        S2 = q * q + (theta[:, None] + theta[None, :]) * q * (p - q)
        np.fill_diagonal(S2, m1)
        return (S2 - np.outer(m1, m1)) / (n * (p - q) ** 2)
    M = mech.channel()
    f = theta @ M
    W = np.linalg.pinv(M)
    return W.T @ ((np.diag(f) - np.outer(f, f)) / n) @ W


def _plugin_compute(params, rng, progress):
    levels = [float(v) for v in params["levels"]]
    base = int(rng.integers(2**63))
    out = {"settings": {}}
    for setting in progress(params["settings"], "settings"):
        dom, theta, values = _data(setting["data"])
        true_median = quantile_crossing(values, np.cumsum(theta), 0.5)
        true_mean = float(values @ theta)
        per_n = {}
        for n in params["n"]:
            cell_rng = _cell_rng(base, "plugin " + setting["name"], n)
            mech = parse(setting["mechanisms"][0], dom)
            family = "inv" if setting["mechanisms"][0].startswith("geometric") else "mi"
            exact = _exact_inverse_cov(mech, theta, int(n), family)
            hits = {f"{how} {stat} {lv}": 0 for how in ("plugin", "exact") for stat in ("mean", "median")
                    for lv in levels}
            inverse_used = 0
            R = int(params["runs"])
            for _ in progress(range(R), f"{setting['name']} n={n}"):
                obs = Observations([simulate_block(mech, theta, int(n), cell_rng)], dom)
                est = estimate(obs, "ibu", **setting["fit"])
                u = est.uncertainty()
                blocks = u.extra.get("inverse_blocks")
                for how in ("plugin", "exact"):
                    if how == "exact" and blocks:
                        u.extra["inverse_blocks"] = [(blocks[0][0], exact)]
                    for lv in levels:
                        m = est.functional(values, lv)
                        med = est.quantile(0.5, lv)
                        hits[f"{how} mean {lv}"] += int(m.lower <= true_mean <= m.upper)
                        hits[f"{how} median {lv}"] += int(med.lower <= true_median <= med.upper)
                    if how == "plugin":
                        inverse_used += int("inversion" in est.functional(values, levels[0]).method)
            per_n[str(n)] = {"runs": R, "inverse_used_for_mean": inverse_used / R,
                             "coverage": {key: v / R for key, v in hits.items()}}
        out["settings"][setting["name"]] = {"mechanisms": setting["mechanisms"], "data": setting["data"],
                                           "by_n": per_n}
    return out


register_experiment(Experiment(
    name="coverage",
    description=("Coverage of the 90%/95% intervals (mean, median, cells) of the MLE and the regularized defaults, "
                 "real data"),
    defaults={"settings": SETTINGS, "n": [10_000, 100_000, 1_000_000], "runs": 500, "levels": [0.9, 0.95]},
    quick={"settings": [SETTINGS[0], SETTINGS[4]], "n": [10_000], "runs": 8},
    compute=_compute,
    plot=_plot,
    reference="calibration of localpriv.inference.uncertainty (docs/uncertainty.md)",
))

register_experiment(Experiment(
    name="coverage-small",
    description=("Coverage of the 90%/95% intervals (mean, median, cells) of the MLE at small n on sparse and "
                 "concentrated truths (the boundary of the simplex)"),
    defaults={"settings": SMALL_SETTINGS, "n": [10, 100, 1000], "runs": 100, "levels": [0.9, 0.95],
              "cell_seconds": None},
    quick={"settings": SMALL_SETTINGS[:1], "n": [100], "runs": 8},
    compute=_compute,
    plot=_plot,
    reference="calibration of the profile-likelihood bounds (docs/decisions/0031-profile-bounds-at-the-boundary.md)",
))

register_experiment(Experiment(
    name="coverage-small-plugin",
    description=("Coverage of the MLE's mean and median at n = 10 with the inverse's covariance read from the "
                 "reports (as the library) and exact under the truth, on the same data"),
    defaults={"settings": PLUGIN_SETTINGS, "n": [10], "runs": 100, "levels": [0.9, 0.95]},
    quick={"settings": PLUGIN_SETTINGS[:1], "n": [10], "runs": 4},
    compute=_plugin_compute,
    reference="the plug-in covariance of the unbiased inverse at small n (docs/uncertainty.md)",
))
