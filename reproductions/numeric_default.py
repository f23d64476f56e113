"""Which mean does ``localpriv estimate --stat mean`` report for numeric reports (``make numeric-default-evidence``)?

For every numeric mechanism (``pm``, ``hm``, ``duchi``, ``sw``) at every LDP level ``eps`` and
number of users ``n``, ``runs`` data sets of ``n`` users are drawn with replacement from UCI Adult
ages on ``interval(16.5,90.5,37)`` (the users are the same for every mechanism in a run, so runs
are paired across mechanisms and estimators), every user's report is sampled by the mechanism, and
the users' mean is estimated by

* ``unbiased`` -- the mechanism's classic unbiased mean of the reports
  (:func:`localpriv.inference.unbiased.unbiased_mean`, normal interval);
* ``ibu``, ``auto`` -- the mean of that estimator's distribution with its default interval
  (:meth:`localpriv.inference.estimate.Estimate.mean`; the default estimator is ``auto``);
* ``ems`` on Square Wave only (its pairing in Li et al., SIGMOD 2020; EMS's cross-validation costs
  seconds per run on the real-valued reports of the others, see :func:`pairs`).

The truth is the population's mean of the cells' centres (what every estimator targets: the users
are drawn from the population). Recorded per (mechanism, eps, n, estimator): the mean squared error
of the mean and its standard error over runs, the coverage of the nominal 95 % interval with its
binomial standard deviation, and the mean interval width; per (mechanism, eps, n): paired
comparisons of the squared errors of every estimator against the best one of the same reports
(mean difference, its standard error and the t statistic ``mean / se``), and against the
mechanism's estimator in its paper (:data:`CLASSIC`); per (eps, n): the same
against the best (mechanism, estimator) pair of the run's users. A difference is beyond noise when its
t exceeds ``t_noise``, the one-sided 5 % quantile of Student's t, Bonferroni-corrected over the
(mechanism, eps, n) comparisons. Only deterministic quantities
(errors, coverages, widths) are recorded: no timings. Writes the JSON atomically.

Usage: ``python -m reproductions.numeric_default [--runs R] [--first F] [--n N ...] [--eps E ...] [-o PATH]``
(the JSON is rewritten after every run, with the per-run records); ``--merge A.json B.json -o PATH``
joins runs split by ``eps``, ``n`` or run ranges. Every (eps, n, run) has its own generator, so a
split run merged equals one run.
"""
from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from localpriv.data.datasets import adult_ages
from localpriv.data.formats import atomic_output
from localpriv.data.observations import Observations
from localpriv.domains import parse_domain
from localpriv.inference import estimate
from localpriv.inference.unbiased import unbiased_mean
from localpriv.inference.uncertainty import IntervalWarning
from localpriv.mechanisms import parse
from reproductions.table import rewrite_block

DOMAIN = "interval(16.5,90.5,37)"
MECHANISMS = ("pm", "hm", "duchi", "sw")
ESTIMATORS = ("unbiased", "ibu", "auto")
#: each mechanism's estimator in its paper: the unbiased mean (Piecewise, Hybrid: Wang et al., ICDE
#: 2019; Duchi et al., JASA 2018) and EMS (Square Wave: Li et al., SIGMOD 2020)
CLASSIC = {"pm": "unbiased", "hm": "unbiased", "duchi": "unbiased", "sw": "ems"}
EPS = (0.5, 1.0, 2.0, 4.0)
NS = (10_000,)
RUNS = 20
SEED = 20261128
OUT = Path("docs/results/numeric-default.json")


def _paired(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Mean of ``a - b`` (squared errors of two estimators on the same runs), its standard error and t."""
    d = np.asarray(a, float) - np.asarray(b, float)
    se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")
    mean = float(d.mean())
    # estimators equal up to the engine's certificate (the MLE's mean of Duchi's one bit is the
    # unbiased mean) differ by round-off: no t statistic from round-off
    tiny = 1e-9 * max(float(np.mean(a)), float(np.mean(b)), 1e-300)
    return {"mean_diff": mean, "se": se, "t": mean / se if se > tiny else 0.0}


def pairs() -> list[tuple[str, str]]:
    """The (mechanism, estimator) pairs measured: every estimator of :data:`ESTIMATORS` on every
    mechanism, and EMS (cross-validated, the costly one) on Square Wave's buckets, its pairing in
    Li et al. (SIGMOD 2020)."""
    return [(m, e) for m in MECHANISMS for e in ESTIMATORS] + [("sw", "ems")]


def measure_run(n: int, eps: float, r: int, cells: np.ndarray) -> dict[str, list[float]]:
    """One run: ``{"mechanism estimator": [value, lower, upper]}`` of the nominal 95 % mean."""
    dom = parse_domain(DOMAIN)
    rng = np.random.default_rng([SEED, n, int(round(eps * 100)), r])
    x = cells[rng.integers(0, cells.size, n)]
    out: dict[str, list[float]] = {}
    obs_of: dict[str, Observations] = {}
    for m, e in pairs():
        if m not in obs_of:
            mech = parse(f"{m}(eps={eps})", dom)
            obs_of[m] = Observations.from_reports(mech, mech.sample(x, rng), dom)
        obs = obs_of[m]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)
            iv = unbiased_mean(obs, dom) if e == "unbiased" else estimate(obs, e).mean(0.95)
        out[f"{m} {e}"] = [iv.value, iv.lower, iv.upper]
    return out


def summarize(raw: dict[str, Any]) -> dict[str, Any]:
    """Per (mechanism, eps, n, estimator) from the per-run records (see the module docstring)."""
    truth = raw["truth_mean"]
    cases: dict[str, Any] = {}
    groups: dict[tuple[int, float], list[dict[str, list[float]]]] = {}
    for key, rec in raw["runs_raw"].items():
        n, eps, _ = key.split("/")
        groups.setdefault((int(n), float(eps)), []).append(rec)
    names = [f"{m} {e}" for m, e in pairs()]
    for (n, eps), recs in sorted(groups.items()):
        runs = len(recs)
        sq = {k: np.array([(rec[k][0] - truth) ** 2 for rec in recs]) for k in names}
        best_overall = min(names, key=lambda k: float(sq[k].mean()))
        for m in MECHANISMS:
            own = [k for k in names if k.startswith(m + " ")]
            best = min(own, key=lambda k: float(sq[k].mean()))
            for k in own:
                cover = float(np.mean([rec[k][1] <= truth <= rec[k][2] for rec in recs]))
                cases[f"{m} eps={eps:g} n={n} {k.split()[1]}"] = {
                    "mechanism": m, "eps": eps, "n": n, "estimator": k.split()[1], "runs": runs,
                    "mse": float(sq[k].mean()),
                    "mse_se": float(sq[k].std(ddof=1) / np.sqrt(runs)) if runs > 1 else float("nan"),
                    "coverage95": cover, "coverage_sd": float(np.sqrt(0.95 * 0.05 / runs)),
                    "width": float(np.mean([rec[k][2] - rec[k][1] for rec in recs])),
                    "best_of_mechanism": best.split()[1], "vs_best_of_mechanism": _paired(sq[k], sq[best]),
                    "classic": CLASSIC[m], "vs_classic": _paired(sq[k], sq[f"{m} {CLASSIC[m]}"]),
                    "best_overall": best_overall.replace(" ", "/"),
                    "vs_best_overall": _paired(sq[k], sq[best_overall])}
    out = {key: val for key, val in raw.items() if key != "runs_raw"}
    # "beyond noise": one-sided paired t test, Bonferroni over the (mechanism, eps, n) comparisons
    tests = len(MECHANISMS) * len(groups)
    runs_min = min(len(recs) for recs in groups.values()) if groups else 2
    out["t_noise"] = float(stats.t.ppf(1 - 0.05 / max(tests, 1), max(runs_min - 1, 1)))
    out["pooled_coverage95"] = {e: float(np.mean([c["coverage95"] for c in cases.values() if c["estimator"] == e]))
                                for e in {c["estimator"] for c in cases.values()}}
    out["cases"] = cases
    out["runs_raw"] = raw["runs_raw"]
    return out


def run(runs: int = RUNS, ns: tuple[int, ...] = NS, eps_list: tuple[float, ...] = EPS,
        first: int = 0, output: Path | None = None) -> dict[str, Any]:
    """Measure runs ``first .. first + runs - 1`` of every (eps, n); with ``output``, the records so
    far are written (atomically) after every run, so an interrupted run keeps what it measured."""
    dom = parse_domain(DOMAIN)
    cells = dom.encode(adult_ages().astype(float))
    centres = np.asarray(dom.labels, dtype=float)
    raw: dict[str, Any] = {"domain": DOMAIN, "data": "UCI Adult ages (48,842 persons)",
                           "truth_mean": float(centres[cells].mean()), "seed": SEED, "level": 0.95,
                           "runs_raw": {}}
    for n in ns:
        for eps in eps_list:
            for r in range(first, first + runs):  # one data set per run (never a loop over users)
                raw["runs_raw"][f"{n}/{eps:g}/{r}"] = measure_run(n, eps, r, cells)
                if output is not None:
                    _write(summarize(raw), output)
            print(f"n={n} eps={eps:g} done", flush=True)
    return summarize(raw)


def _write(res: dict[str, Any], path: Path) -> None:
    with atomic_output(path) as tmp:
        tmp.write_text(json.dumps(res, indent=1))


def merge(paths: list[Path]) -> dict[str, Any]:
    """The outputs of runs split by ``eps``, ``n`` or run ranges as one: every (eps, n, run) has its
    own generator, so the merge equals one run over all of them."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    if len({p["seed"] for p in parts}) != 1:
        raise SystemExit("the parts differ in seed")
    raw = dict(parts[0])
    raw["runs_raw"] = {key: val for p in parts for key, val in p["runs_raw"].items()}
    return summarize(raw)


def table_markdown(record: dict[str, Any]) -> str:
    """docs/numeric.md's table (*Which mean*) from the JSON: per mechanism and eps, every estimator's
    MSE of the mean (its se), the paired difference to the best estimator of the same reports in
    units of its se (t), and the 95 % coverage."""
    first = record["cases"][next(iter(record["cases"]))]
    rows = [f"| mechanism | eps | n | estimator | runs | MSE of the mean (se) | t vs the paper's estimator | "
            f"t vs best of mechanism | t vs best overall | coverage 95 % (sd {first['coverage_sd']:.3f}) | width |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for rec in record["cases"].values():
        rows.append(f"| {rec['mechanism']} | {rec['eps']:g} | {rec['n']:,} | {rec['estimator']} | {rec['runs']} | "
                    f"{rec['mse']:.4f} ({rec['mse_se']:.4f}) | {rec['vs_classic']['t']:.1f} ({rec['classic']}) | "
                    f"{rec['vs_best_of_mechanism']['t']:.1f} | "
                    f"{rec['vs_best_overall']['t']:.1f} ({rec['best_overall']}) | {rec['coverage95']:.2f} | "
                    f"{rec['width']:.2f} |")
    pooled = ", ".join(f"{e} {c:.3f}" for e, c in sorted(record["pooled_coverage95"].items()))
    rows.append("")
    rows.append(f"Beyond noise: t above {record['t_noise']:.2f} (one-sided 5 %, Bonferroni over the "
                f"{len(MECHANISMS) * len({(c['eps'], c['n']) for c in record['cases'].values()})} (mechanism, eps, n) "
                f"comparisons). Coverage of the nominal 95 % interval pooled over every case: {pooled}.")
    return "\n".join(rows)


def rewrite_docs(record_path: str = str(OUT), doc: str = "docs/numeric.md") -> None:
    """Regenerate the table between docs/numeric.md's ``numeric-default`` markers."""
    rewrite_block(doc, "numeric-default", table_markdown(json.loads(Path(record_path).read_text())))


def main(argv: list[str] | None = None) -> None:
    """Command line: run and write the JSON atomically."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=RUNS)
    ap.add_argument("--n", type=int, nargs="+", default=list(NS))
    ap.add_argument("--eps", type=float, nargs="+", default=list(EPS))
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    ap.add_argument("--first", type=int, default=0, help="the first run's number (split runs across processes)")
    ap.add_argument("--merge", type=Path, nargs="+", help="merge these outputs of split runs (no run)")
    a = ap.parse_args(argv)
    res = merge(a.merge) if a.merge else run(a.runs, tuple(a.n), tuple(a.eps), a.first, a.output)
    _write(res, a.output)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
