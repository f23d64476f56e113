"""Which mean does ``localpriv estimate --stat mean`` report for numeric reports (``make numeric-default-evidence``)?

For every numeric mechanism (``pm``, ``hm``, ``duchi``, ``sw``) at every LDP level ``eps`` and
number of users ``n``, ``runs`` data sets of ``n`` users are drawn with replacement from UCI Adult
ages on ``interval(16.5,90.5,37)`` (the users are the same for every mechanism in a run, so runs
are paired across mechanisms and estimators), every user's report is sampled by the mechanism, and
the users' mean is estimated by

* ``unbiased`` -- the mechanism's classic unbiased mean of the reports
  (:func:`localpriv.inference.unbiased.unbiased_mean`, normal interval);
* ``ibu``, ``ems``, ``auto`` -- the mean of that estimator's distribution with its default interval
  (:meth:`localpriv.inference.estimate.Estimate.mean`; the default estimator is ``auto``).

The truth is the population's mean of the cells' centres (what every estimator targets: the users
are drawn from the population). Recorded per (mechanism, eps, n, estimator): the mean squared error
of the mean and its standard error over runs, the coverage of the nominal 95 % interval with its
binomial standard deviation, and the mean interval width; per (mechanism, eps, n): paired
comparisons of the squared errors of every estimator against the best one of the same reports
(mean difference, its standard error and the t statistic ``mean / se``); per (eps, n): the same
against the best (mechanism, estimator) pair of the run's users. Only deterministic quantities
(errors, coverages, widths) are recorded: no timings. Writes the JSON atomically.

Usage: ``python -m reproductions.numeric_default [--runs R] [--n N ...] [--eps E ...] [-o PATH]``;
``--merge A.json B.json -o PATH`` joins runs split by ``eps`` or ``n``. Every (eps, n, run) has its
own generator, so a split run merged equals one run.
"""
from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

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
ESTIMATORS = ("unbiased", "ibu", "ems", "auto")
EPS = (0.5, 1.0, 2.0, 4.0)
NS = (10_000,)
RUNS = 20
SEED = 20261128
OUT = Path("docs/results/numeric-default.json")
#: a paired difference counts as beyond noise when its t statistic exceeds this (two-sided ~5 %)
T_NOISE = 2.0


def _paired(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Mean of ``a - b`` (squared errors of two estimators on the same runs), its standard error and t."""
    d = np.asarray(a, float) - np.asarray(b, float)
    se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")
    mean = float(d.mean())
    return {"mean_diff": mean, "se": se, "t": mean / se if se > 0 else 0.0}


def run(runs: int = RUNS, ns: tuple[int, ...] = NS, eps_list: tuple[float, ...] = EPS) -> dict[str, Any]:
    """Measure every (mechanism, eps, n, estimator); see the module docstring."""
    dom = parse_domain(DOMAIN)
    ages = adult_ages().astype(float)
    cells = dom.encode(ages)
    centres = np.asarray(dom.labels, dtype=float)
    truth = float(centres[cells].mean())
    out: dict[str, Any] = {"domain": DOMAIN, "data": "UCI Adult ages (48,842 persons)", "truth_mean": truth,
                           "runs": runs, "seed": SEED, "level": 0.95, "t_noise": T_NOISE, "cases": {}}
    for n in ns:
        for eps in eps_list:
            sq: dict[tuple[str, str], list[float]] = {}
            for r in range(runs):  # one data set per run (never a loop over users)
                rng = np.random.default_rng([SEED, n, int(eps * 100), r])
                x = cells[rng.integers(0, cells.size, n)]
                for m in MECHANISMS:
                    mech = parse(f"{m}(eps={eps})", dom)
                    obs = Observations.from_reports(mech, mech.sample(x, rng), dom)
                    for e in ESTIMATORS:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", IntervalWarning)
                            iv = unbiased_mean(obs, dom) if e == "unbiased" else estimate(obs, e).mean(0.95)
                        key = (m, e)
                        sq.setdefault(key, []).append((iv.value - truth) ** 2)
                        rec = out["cases"].setdefault(f"{m} eps={eps:g} n={n} {e}", {"cover": 0, "width": 0.0})
                        rec["cover"] += int(iv.lower <= truth <= iv.upper)
                        rec["width"] += (iv.upper - iv.lower) / runs
            best_overall = min(sq, key=lambda k: float(np.mean(sq[k])))
            for m in MECHANISMS:
                best = min(ESTIMATORS, key=lambda e: float(np.mean(sq[(m, e)])))
                for e in ESTIMATORS:
                    rec = out["cases"][f"{m} eps={eps:g} n={n} {e}"]
                    s = np.asarray(sq[(m, e)])
                    cov = rec.pop("cover") / runs
                    rec.update({"mechanism": m, "eps": eps, "n": n, "estimator": e,
                                "mse": float(s.mean()), "mse_se": float(s.std(ddof=1) / np.sqrt(runs)),
                                "coverage95": cov, "coverage_sd": float(np.sqrt(0.95 * 0.05 / runs)),
                                "best_of_mechanism": best,
                                "vs_best_of_mechanism": _paired(s, np.asarray(sq[(m, best)])),
                                "best_overall": "/".join(best_overall),
                                "vs_best_overall": _paired(s, np.asarray(sq[best_overall]))})
            print(f"n={n} eps={eps:g}: best {best_overall}", flush=True)
    return out


def merge(paths: list[Path]) -> dict[str, Any]:
    """The outputs of runs split by ``eps`` or ``n`` (the same runs and seed) as one: each (mechanism,
    eps, n) has its own generator, so the merge equals one run over all of them."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    if len({(p["runs"], p["seed"]) for p in parts}) != 1:
        raise SystemExit("the parts differ in runs or seed")
    out = dict(parts[0])
    out["cases"] = {key: val for p in parts for key, val in p["cases"].items()}
    return out


def table_markdown(record: dict[str, Any]) -> str:
    """docs/numeric.md's table (*Which mean*) from the JSON: per mechanism and eps, every estimator's
    MSE of the mean (its se), the paired difference to the best estimator of the same reports in
    units of its se (t), and the 95 % coverage."""
    rows = [f"| mechanism | eps | n | estimator | MSE of the mean (se) | t vs best of mechanism | t vs best overall "
            f"| coverage 95 % (sd {record['cases'][next(iter(record['cases']))]['coverage_sd']:.3f}) | width |",
            "|---|---|---|---|---|---|---|---|---|"]
    for rec in record["cases"].values():
        rows.append(f"| {rec['mechanism']} | {rec['eps']:g} | {rec['n']:,} | {rec['estimator']} | "
                    f"{rec['mse']:.4f} ({rec['mse_se']:.4f}) | {rec['vs_best_of_mechanism']['t']:.1f} | "
                    f"{rec['vs_best_overall']['t']:.1f} ({rec['best_overall']}) | {rec['coverage95']:.2f} | "
                    f"{rec['width']:.2f} |")
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
    ap.add_argument("--merge", type=Path, nargs="+", help="merge these outputs of runs split by eps or n (no run)")
    a = ap.parse_args(argv)
    res = merge(a.merge) if a.merge else run(a.runs, tuple(a.n), tuple(a.eps))
    with atomic_output(a.output) as tmp:
        tmp.write_text(json.dumps(res, indent=1))
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
