"""The evidence behind the figures' merged cells (decision 0047; ``make figure-evidence``).

On ``0..39`` with a discretized normal truth (mean 20, sd 6), users report through the geometric
mechanism at eps 0.5 per unit and the default estimator (``ems``) or the MLE (``ibu``) fits the
counts; the figure's bins (:func:`localpriv.inference.resolution.merge_cells` at 95 %) are then
compared with the truth: how many bins the data support, and how often all the bins' intervals
hold the true bin masses together (the simultaneous coverage the Bonferroni level aims at) and
one by one.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from localpriv import estimate
from localpriv.domains import parse_domain
from localpriv.inference.resolution import merge_cells
from localpriv.inference.simulation import simulate_observations
from localpriv.mechanisms import parse as parse_mechanism

DOMAIN = "0..39"
MECHANISM = "geometric(eps=0.5)"
SIZES = (2_000, 20_000, 200_000)
ESTIMATORS = ("ems", "ibu")
REPS = 200
LEVEL = 0.95
OUT = Path("docs/results/figures.json")
DOC = Path("docs/decisions/0047-figures-at-the-resolution-the-data-support.md")


def truth() -> np.ndarray:
    """The true distribution: a normal (mean 20, sd 6) integrated over the cells ``x -+ 1/2``."""
    x = np.arange(40)
    p = np.diff(stats.norm.cdf(np.append(x - 0.5, 39.5), 20, 6))
    return p / p.sum()


def run(out: Path = OUT, reps: int = REPS, sizes: tuple[int, ...] = SIZES, seed: int = 47) -> dict:
    """Run the experiment and write its JSON record to ``out``."""
    d = parse_domain(DOMAIN)
    mech = parse_mechanism(MECHANISM, d)
    theta = truth()
    rng = np.random.default_rng(seed)
    rows = []
    for name, n in [(e, n) for e in ESTIMATORS for n in sizes]:
        bins, informative, joint, single = [], [], [], []
        for _ in range(reps):
            obs = simulate_observations(mech, None, theta, n, rng, d)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = estimate(obs, name)
                b = merge_cells(est, LEVEL)
            true_mass = np.add.reduceat(theta, b.start)
            hold = (b.lower <= true_mass) & (true_mass <= b.upper)
            bins.append(b.size)
            informative.append(float(b.informative.mean()))
            joint.append(bool(hold.all()))
            single.append(float(hold.mean()))
        k = len(joint)
        cov = float(np.mean(joint))
        rows.append({"estimator": name, "n": n, "reps": k, "bins_mean": float(np.mean(bins)),
                     "bins_min": int(np.min(bins)), "bins_max": int(np.max(bins)),
                     "informative_share": float(np.mean(informative)),
                     "simultaneous_coverage": cov, "coverage_se": float(np.sqrt(cov * (1 - cov) / k)),
                     "per_bin_coverage": float(np.mean(single))})
    record = {"name": "figure-resolution", "domain": DOMAIN, "mechanism": MECHANISM, "estimators": list(ESTIMATORS),
              "truth": "normal(20, 6) on the cells x -+ 1/2", "level": LEVEL, "seed": seed, "results": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(out)
    return record


def table_markdown(record: dict) -> str:
    """The record as the decision's table."""
    lines = ["| estimator | n | bins (mean, range) | informative bins | all bins' intervals hold (simultaneous) | "
             "each bin's interval holds |", "|---|---|---|---|---|---|"]
    for r in record["results"]:
        lines.append(f"| {r['estimator']} | {r['n']:,} | {r['bins_mean']:.1f} ({r['bins_min']}-{r['bins_max']}) | "
                     f"{r['informative_share']:.0%} | {r['simultaneous_coverage']:.0%} "
                     f"(+-{1.96 * r['coverage_se']:.0%}, {r['reps']} data sets) | {r['per_bin_coverage']:.1%} |")
    return "\n".join(lines)


def rewrite_docs(record_path: Path = OUT, doc: Path = DOC) -> None:
    """Rewrite the decision's table (between its ``figure-resolution`` markers) from the JSON."""
    from reproductions.table import rewrite_block
    rewrite_block(doc, "figure-resolution", table_markdown(json.loads(Path(record_path).read_text())))


if __name__ == "__main__":
    run()
    rewrite_docs()
