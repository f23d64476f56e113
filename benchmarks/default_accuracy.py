"""Accuracy of the default estimator against the former default and the post-processings (correctness
level: errors only, no timings).

For each data set (Adult ages on 17..90, Adult hours-per-week on 1..99, Adult native-country over
its 42 labels, a Zipf(1.1) distribution over 1,000 values), mechanism (k-RR, OUE), LDP level
(0.5, 1, 4) and number of reports (10^4, 10^5): ``--runs`` data sets are simulated with fixed
seeds and estimated by

* ``auto`` (the default), ``old-default`` (``ems`` on the ordered domains, ``dirichlet`` on the
  categorical ones), ``ibu`` (the certified MLE), ``norm-sub``, ``base-cut``, ``power-ns``,

and the mean squared error per cell, the total variation distance and (ordered domains) the earth
mover's distance to the truth are averaged over the runs. The former default costs up to minutes
per fit on OUE reports (exact likelihood over every distinct report, inside 5-fold
cross-validation), so it is run on OUE cells only up to ``--old-max-oue`` reports (recorded as
skipped beyond). Results go to ``benchmarks/results-default-accuracy.json``, rewritten after every
cell. Run with BLAS pinned to one thread (``make bench-default-accuracy``).

``--merge A.json,B.json`` writes the cells of partial runs (e.g. one per mechanism, run side by
side) to ``--out``; ``--render DOC`` rewrites the table between ``<!-- default-accuracy:begin`` and
``<!-- default-accuracy:end -->`` in ``DOC`` from the JSON (no run).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import localpriv
from localpriv.data.observations import Observations
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.estimators import fit
from localpriv.inference.metrics import emd_line, mse, total_variation
from localpriv.inference.simulation import simulate_block

OUT = Path(__file__).resolve().parent / "results-default-accuracy.json"
METHODS = ("auto", "old-default", "ibu", "norm-sub", "base-cut", "power-ns")


def datasets(adult: Path) -> dict[str, tuple[object, np.ndarray, bool]]:
    """name -> (domain, true distribution, ordered)."""
    with open(adult, newline="") as fh:
        rows = [r for r in csv.reader(fh) if len(r) == 15]
    ages = np.array([int(r[0]) for r in rows])
    hours = np.array([int(r[12]) for r in rows])
    countries = [r[13].strip() for r in rows]
    labels = sorted(set(countries))
    index = {lab: i for i, lab in enumerate(labels)}
    zipf = 1.0 / np.arange(1, 1001) ** 1.1
    return {
        "adult-ages": (IntegerDomain(17, 90), np.bincount(ages - 17, minlength=74) / ages.size, True),
        "adult-hours": (IntegerDomain(1, 99), np.bincount(hours - 1, minlength=99) / hours.size, True),
        "adult-country": (CategoricalDomain(labels), np.bincount([index[c] for c in countries],
                                                                 minlength=len(labels)) / len(countries), False),
        "zipf-1.1-1000": (CategoricalDomain([f"v{i}" for i in range(1000)]), zipf / zipf.sum(), False),
    }


def _write(record: dict, out: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(record, fh, indent=1)
    os.replace(tmp, out)


LABELS = {"auto": "auto", "old-default": "former", "ibu": "MLE", "norm-sub": "Norm-Sub", "base-cut": "Base-Cut",
          "power-ns": "PowerNS"}
BEGIN, END = "<!-- default-accuracy:begin", "<!-- default-accuracy:end -->"


def render(record: dict) -> str:
    """The cells as a Markdown table: mean squared error per cell (x 10^-6) of every method, the best
    in bold, then TV (and EMD on ordered domains) of ``auto`` and the former default; and a summary."""
    head = ("| data | mech. | eps | n | " + " | ".join(LABELS[m] for m in METHODS)
            + " | TV auto / former | EMD auto / former |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    wins = ties = losses = 0
    ratios = []
    for c in record["cells"]:
        have = [m for m in METHODS if m in c]
        best = min(have, key=lambda m: c[m]["mse"])
        vals = []
        for m in METHODS:
            if m not in c:
                vals.append("--")
                continue
            v = f"{c[m]['mse'] * 1e6:.3g}"
            vals.append(f"**{v}**" if m == best else v)
        old = c.get("old-default")
        tv = f"{c['auto']['tv']:.3f} / {old['tv']:.3f}" if old else f"{c['auto']['tv']:.3f} / --"
        emd = (f"{c['auto']['emd']:.3g} / {old['emd']:.3g}" if old else f"{c['auto']['emd']:.3g} / --") \
            if "emd" in c["auto"] else ""
        lines.append(f"| {c['data']} | {c['mechanism']} | {c['eps']:g} | {c['n']:.0e} | " + " | ".join(vals)
                     + f" | {tv} | {emd} |")
        if old:
            r = c["auto"]["mse"] / old["mse"]
            ratios.append(r)
            wins += r < 0.95
            losses += r > 1.05
            ties += 0.95 <= r <= 1.05
    p = record["params"]
    summary = (f"\n{len(record['cells'])} cells, {p['runs']} runs each (`{Path(OUT).name}`). Against the former "
               f"default (where it ran, {len(ratios)} cells): auto's MSE lower by more than 5 % in {wins}, within 5 % "
               f"in {ties}, higher by more than 5 % in {losses}; MSE ratio auto / former: median "
               f"{np.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}." if ratios else "")
    return "\n".join(lines) + "\n" + summary + "\n"


def rewrite(doc: Path, record: dict) -> None:
    """Replace the generated table in ``doc`` (between the markers) by :func:`render` of ``record``."""
    text = doc.read_text()
    i, j = text.index(BEGIN), text.index(END)
    i = text.index("\n", i) + 1
    doc.write_text(text[:i] + render(record) + text[j:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adult", type=Path, default=Path("/work/shared/data/adult.data"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--eps", default="0.5,1,4")
    ap.add_argument("--n", default="10000,100000")
    ap.add_argument("--data", default="adult-ages,adult-country,adult-hours,zipf-1.1-1000")
    ap.add_argument("--mechanisms", default="krr,oue")
    ap.add_argument("--old-max-oue", type=float, default=1e4, help="run the former default on OUE up to this n")
    ap.add_argument("--old-max-k", type=int, default=100, help="... and on OUE up to this many values")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--render", type=Path, default=None, help="rewrite this document's table from --out; no run")
    ap.add_argument("--merge", default=None, help="comma-separated JSON files of partial runs: their cells to --out")
    args = ap.parse_args(argv)
    if args.merge is not None:
        parts = [json.loads(Path(f).read_text()) for f in args.merge.split(",")]
        merged = {"params": {**parts[0]["params"], "merged": args.merge}, "methods": parts[0]["methods"],
                  "cells": [c for part in parts for c in part["cells"]]}
        _write(merged, args.out)
        return 0
    if args.render is not None:
        rewrite(args.render, json.loads(args.out.read_text()))
        return 0
    data = datasets(args.adult)
    record: dict = {"params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                    "methods": list(METHODS), "cells": []}
    for mname in args.mechanisms.split(","):
        for name in args.data.split(","):
            domain, theta, ordered = data[name]
            old = "ems" if ordered else "dirichlet"
            for eps in (float(e) for e in args.eps.split(",")):
                mech = localpriv.parse(f"{mname}(eps={eps:g})", domain)
                for n in (int(float(x)) for x in args.n.split(",")):
                    skip_old = mname == "oue" and (n > args.old_max_oue or theta.size > args.old_max_k)
                    errs: dict[str, list[list[float]]] = {m: [] for m in METHODS}
                    choices = []
                    for r in range(args.runs):
                        rng = np.random.default_rng([r, int(eps * 10), n, len(name), len(mname)])
                        obs = Observations([simulate_block(mech, theta, n, rng)], domain)
                        for m in METHODS:
                            if m == "old-default" and skip_old:
                                continue
                            est = fit(obs, old if m == "old-default" else m)
                            p = np.asarray(est.distribution, dtype=float)
                            row = [mse(p, theta), total_variation(p, theta)]
                            if ordered:
                                row.append(emd_line(p, theta))
                            errs[m].append(row)
                            if m == "auto":
                                choices.append(est.settings["choice"])
                    cell = {"data": name, "mechanism": mname, "eps": eps, "n": n, "runs": args.runs,
                            "k": int(theta.size), "auto_choices": choices,
                            "skipped": ["old-default"] if skip_old else []}
                    for m, rows in errs.items():
                        if rows:
                            a = np.asarray(rows)
                            cell[m] = {"mse": float(a[:, 0].mean()), "tv": float(a[:, 1].mean())}
                            if ordered:
                                cell[m]["emd"] = float(a[:, 2].mean())
                    record["cells"].append(cell)
                    _write(record, args.out)
                    best = min((m for m in METHODS if m in cell), key=lambda m: cell[m]["mse"])
                    print(f"{name} {mname} eps={eps:g} n={n}: auto mse {cell['auto']['mse']:.3g}, "
                          f"best {best} {cell[best]['mse']:.3g}, choices {choices}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
