"""Coverage of every kind of estimator's cell intervals on sparse truths (``make coverage-estimators``).

For each setting (a Zipf truth ``f_i ~ i^-1.1`` over ``k`` values, k-RR at ``eps``, ``n`` users),
``runs`` data sets are drawn at the count level, ``Multinomial(n, f M)`` (the exact law of ``n``
users drawn from ``f`` and obfuscated), and every (estimator, interval method) below computes its
nominal 95 % cell intervals (:meth:`localpriv.inference.uncertainty.Uncertainty.cell_intervals`):

* ``ibu`` -- the certified MLE, ``fisher`` (Wald, inversion and profile bounds where the Wald
  interval is not trusted);
* ``auto`` (the default), ``norm-sub``, ``base-cut``, ``power-ns`` -- ``anchored`` (the MLE's
  intervals widened to contain the estimate), ``profile`` (the MLE's profile-likelihood interval of
  every cell, widened to contain the estimate) and, for the post-processings, ``bootstrap`` (the
  percentiles of a parametric bootstrap of the estimator itself, which was their default; PowerNS's
  only up to :data:`BOOTSTRAP_POWER_MAX_K` cells).

The anchored and profile intervals of the post-processings are computed from the default's MLE
(``auto`` keeps it): by definition they are the MLE's intervals widened to contain each estimate,
which is what ``est.uncertainty("anchored")`` and ``est.uncertainty("profile")`` return on the same
MLE (they refit it, certified to the same tolerance).

Recorded per (setting, estimator, method): the share of cells whose interval covers the true
frequency, averaged over runs (with its binomial sd over the runs' cells), the worst cell's
coverage, and the mean width over all cells and over the cells whose true frequency is below
:data:`SMALL` (the sparse tail). Only deterministic quantities (coverages, widths); no timings.
Every setting has its own generator (seed, setting name), so settings can be run apart.

Usage: ``python -m reproductions.coverage_estimators [--runs R] [--settings NAME ...] [-o PATH]``.
"""
from __future__ import annotations

import argparse
import json
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from localpriv.data.formats import atomic_output
from localpriv.data.observations import ObservationBlock, Observations
from localpriv.domains import CategoricalDomain
from localpriv.inference import estimate
from localpriv.inference.uncertainty import IntervalWarning
from localpriv.mechanisms import parse
from reproductions.table import rewrite_block

#: name -> (k, mechanism spec, n)
SETTINGS: dict[str, tuple[int, str, int]] = {
    "zipf-200 krr eps=1 n=10^4": (200, "krr(eps=1)", 10_000),
    "zipf-50 krr eps=2 n=10^4": (50, "krr(eps=2)", 10_000),
    "zipf-20 krr eps=1 n=10^3": (20, "krr(eps=1)", 1_000),
}
#: (estimator, interval method) pairs measured
PAIRS = (("ibu", "fisher"), ("auto", "anchored"), ("auto", "profile"),
         ("norm-sub", "bootstrap"), ("norm-sub", "anchored"), ("norm-sub", "profile"),
         ("base-cut", "bootstrap"), ("base-cut", "anchored"),
         ("power-ns", "bootstrap"), ("power-ns", "anchored"))
ZIPF = 1.1
SMALL = 0.005
#: PowerNS integrates ~1,900 points per cell per fit: its bootstrap (200 refits) runs up to this k only
BOOTSTRAP_POWER_MAX_K = 20
RUNS = 30
SEED = 20261128
OUT = Path("docs/results/coverage-estimators.json")


def zipf(k: int) -> np.ndarray:
    """The Zipf law ``f_i ~ i^-ZIPF`` over ``k`` values."""
    w = np.arange(1, k + 1, dtype=float) ** -ZIPF
    return w / w.sum()


def measure(name: str, runs: int) -> dict[str, Any]:
    """One setting: coverage and widths of every pair of :data:`PAIRS` over ``runs`` data sets."""
    k, spec, n = SETTINGS[name]
    truth = zipf(k)
    dom = CategoricalDomain([f"v{i}" for i in range(k)])
    mech = parse(spec, dom)
    p = truth @ mech.channel()
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    pairs = [pair for pair in PAIRS if k <= BOOTSTRAP_POWER_MAX_K or pair != ("power-ns", "bootstrap")]
    cover = {pair: np.zeros(k) for pair in pairs}
    width = {pair: 0.0 for pair in pairs}
    small_width = {pair: 0.0 for pair in pairs}
    small = truth < SMALL
    for _ in range(runs):  # one data set per run (counts, never a loop over users)
        c = rng.multinomial(n, p / p.sum())
        keep = np.flatnonzero(c)
        obs = Observations([ObservationBlock(mech, keep, c[keep])], dom)
        fits = {e: estimate(obs, e) for e in {e for e, _ in pairs}}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IntervalWarning)
            # one MLE and its profile bounds serve every anchored pair (the default's own MLE)
            prof = fits["auto"].uncertainty("profile")
            inner = prof.extra["mle"]
            mle_ci = inner.cell_intervals(0.95)
            prof_ci = (prof.cell_intervals(0.95)[0], prof.cell_intervals(0.95)[1])
            # the MLE's profile bounds before widening: auto's widened ones are min/max with auto's point,
            # so recompute them on the MLE for the other estimators
            raw_prof = prof.profile_cells(0.95)
        for pair in pairs:
            e, method = pair
            theta = fits[e].distribution
            if e == "ibu":
                lo, hi = mle_ci
            elif e == "auto" and method == "profile":
                lo, hi = prof_ci
            elif method == "anchored":
                lo, hi = np.minimum(mle_ci[0], theta), np.maximum(mle_ci[1], theta)
            elif method == "profile":
                lo, hi = np.minimum(raw_prof[0], theta), np.maximum(raw_prof[1], theta)
            else:
                lo, hi = fits[e].uncertainty(method, rng=np.random.default_rng(0)).cell_intervals(0.95)
            cover[pair] += (lo <= truth) & (truth <= hi)
            width[pair] += float(np.mean(hi - lo)) / runs
            small_width[pair] += float(np.mean((hi - lo)[small])) / runs if small.any() else 0.0
    out: dict[str, Any] = {"k": k, "mechanism": spec, "n": n, "runs": runs, "zipf": ZIPF,
                           "small_cells": int(small.sum()), "small_mean_truth": float(truth[small].mean()),
                           "pairs": {}}
    for pair in pairs:
        share = cover[pair] / runs
        out["pairs"][f"{pair[0]} {pair[1]}"] = {
            "estimator": pair[0], "method": pair[1], "cells_coverage95": float(share.mean()),
            "cells_coverage_sd": float(np.sqrt(0.95 * 0.05 / (runs * k))),
            "worst_cell": float(share.min()), "mean_width": width[pair], "small_width": small_width[pair]}
    return out


def table_markdown(record: dict[str, Any]) -> str:
    """The coverage table of docs/uncertainty.md (*Every estimator's intervals*) from the JSON."""
    rows = ["| setting | runs | estimator | intervals | cells covered at 95 % (sd) | worst cell | mean width | "
            "mean width, cells below 0.005 |", "|---|---|---|---|---|---|---|---|"]
    for name, rec in record.items():
        for pr in rec["pairs"].values():
            rows.append(f"| {name} | {rec['runs']} | {pr['estimator']} | {pr['method']} | "
                        f"{pr['cells_coverage95']:.3f} ({pr['cells_coverage_sd']:.3f}) | {pr['worst_cell']:.2f} | "
                        f"{pr['mean_width']:.3f} | "
                        + (f"{pr['small_width']:.3f} |" if rec["small_cells"] else "- |"))
    return "\n".join(rows)


def rewrite_docs(record_path: str = str(OUT), doc: str = "docs/uncertainty.md") -> None:
    """Regenerate the table between docs/uncertainty.md's ``coverage-estimators`` markers."""
    rewrite_block(doc, "coverage-estimators", table_markdown(json.loads(Path(record_path).read_text())))


def main(argv: list[str] | None = None) -> None:
    """Command line: measure the settings and write (merge into) the JSON atomically."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=RUNS)
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    ap.add_argument("--merge", type=Path, nargs="+", help="merge these outputs of runs split by setting (no run)")
    a = ap.parse_args(argv)
    res: dict[str, Any] = json.loads(a.output.read_text()) if a.output.exists() else {}
    for part in a.merge or []:
        res.update(json.loads(part.read_text()))
    for name in [] if a.merge else a.settings:
        res[name] = measure(name, a.runs)
        print(name, json.dumps(res[name]["pairs"], indent=1), flush=True)
    with atomic_output(a.output) as tmp:
        tmp.write_text(json.dumps(res, indent=1))
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
