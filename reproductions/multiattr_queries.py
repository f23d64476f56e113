"""Marginals and range queries on UCI Adult: MSE of 2-way marginals (group release with and without
CALM's consistency step) and of random ranges of volume 0.1..0.9 (hierarchy with constrained
inference, flat OUE, the 2-D grid, and the MLE of the existing EM engine on the finest grid),
over eps and n. The records are drawn with replacement from adult.data; the error is against the
drawn records."""
from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np

from localpriv.data.observations import Observations
from localpriv.domains import IntegerDomain, ProductDomain
from localpriv.inference import estimate
from localpriv.mechanisms import parse
from localpriv.multiattr.marginals import all_marginals, release_marginals
from localpriv.multiattr.ranges import grid_granularity, grid_ranges, hierarchical_ranges
from localpriv.utils.errors import LocalPrivError
from reproductions.runner import Experiment, Progress, register_experiment

#: Adult columns used: (name, column index in adult.data)
COLUMNS = (("age", 0), ("education", 3), ("occupation", 6), ("race", 8), ("sex", 9), ("hours", 12))


def adult_path() -> Path:
    """adult.data: ``LOCALPRIV_ADULT`` if set, else ``shared/data/adult.data`` beside an ancestor
    of the working directory."""
    env = os.environ.get("LOCALPRIV_ADULT")
    if env:
        return Path(env)
    for d in (Path.cwd(), *Path.cwd().parents):
        p = d / "shared" / "data" / "adult.data"
        if p.exists():
            return p
    raise LocalPrivError("adult.data not found: set LOCALPRIV_ADULT")


def adult_records() -> tuple[np.ndarray, tuple[int, ...], list[str]]:
    """Coded records (n x 6): age - 17 (0..73), education, occupation, race, sex (codes in sorted
    label order), hours - 1 (0..98)."""
    rows = [line.split(",") for line in adult_path().read_text().splitlines() if line.count(",") >= 13]
    cols = []
    shape = []
    for name, j in COLUMNS:
        vals = [r[j].strip() for r in rows]
        if name == "age":
            x = np.clip(np.array(vals, dtype=int) - 17, 0, 73)
            size = 74
        elif name == "hours":
            x = np.clip(np.array(vals, dtype=int) - 1, 0, 98)
            size = 99
        else:
            labels = sorted(set(vals))
            x = np.searchsorted(np.array(labels), np.array(vals))
            size = len(labels)
        cols.append(x.astype(np.int64))
        shape.append(size)
    return np.column_stack(cols), tuple(shape), [c for c, _ in COLUMNS]


def _coarse(x: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, tuple[int, ...]]:
    """Age and hours in 10-value bins for the marginals (8 and 10 bins)."""
    y = x.copy()
    y[:, 0] //= 10
    y[:, 5] //= 10
    return y, (8, *shape[1:5], 10)


def _truth(x: np.ndarray, shape: tuple[int, ...], attrs: tuple[int, ...]) -> np.ndarray:
    sub = tuple(shape[j] for j in attrs)
    return np.bincount(np.ravel_multi_index(x[:, list(attrs)].T, sub), minlength=int(np.prod(sub))).reshape(sub) \
        / x.shape[0]


def _ranges_1d(size: int, vols: list[float], count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    out = []
    for v in vols:
        length = max(1, round(v * size))
        starts = rng.integers(0, size - length + 1, count)
        out += [(int(s), int(s) + length - 1) for s in starts]
    return out


def _compute(params: dict, rng: np.random.Generator, progress: Progress) -> dict:
    data, shape, names = adult_records()
    vols = [float(v) for v in params["volumes"]]
    cells: list[dict[str, Any]] = []
    grid = list(itertools.product(params["eps"], params["n"], range(int(params["runs"]))))
    for eps, n, _run in progress(grid, "multiattr queries"):
        x = data[rng.integers(0, data.shape[0], int(n))]
        cell: dict[str, Any] = {"eps": float(eps), "n": int(n)}
        # 2-way marginals of the six attributes (age, hours in 10-value bins)
        xc, sc = _coarse(x, shape)
        sets = all_marginals(6, 2)
        truth = {a: _truth(xc, sc, a) for a in sets}
        for label, cons in (("groups_raw", False), ("calm", True)):
            m = release_marginals(xc, sc, sets, float(eps), rng, consistent=cons)
            cell[f"marginal_mse_{label}"] = float(np.mean(np.concatenate(
                [((m[a] - truth[a]) ** 2).ravel() for a in sets])))
        # 1-D ranges on age
        age = x[:, 0]
        qs = _ranges_1d(74, vols, int(params["queries"]), rng)
        true_r = np.array([((age >= lo) & (age <= hi)).mean() for lo, hi in qs])
        h = hierarchical_ranges(age, 74, float(eps), rng, int(params["branching"]))
        cell["range1d_mse_hierarchy"] = float(np.mean((np.array([h.range(lo, hi).value for lo, hi in qs])
                                                        - true_r) ** 2))
        flat = hierarchical_ranges(age, 74, float(eps), rng, 74)  # one level: flat OUE on all users
        flat_leaf = np.cumsum(np.concatenate([[0.0], flat.raw[-1][:74]]))
        cell["range1d_mse_flat_oue"] = float(np.mean((np.array([flat_leaf[hi + 1] - flat_leaf[lo]
                                                                 for lo, hi in qs]) - true_r) ** 2))
        dom = IntegerDomain(0, 73)
        mech = parse(f"oue(eps={float(eps)})", dom)
        fit = estimate(Observations.from_reports(mech, mech.sample(age, rng), domain=dom), "ibu")
        mle = np.cumsum(np.concatenate([[0.0], np.asarray(fit.distribution)]))
        cell["range1d_mse_mle_oue"] = float(np.mean((np.array([mle[hi + 1] - mle[lo] for lo, hi in qs])
                                                     - true_r) ** 2))
        # 2-D ranges on age x hours: each side sqrt(volume) of its attribute
        hours = x[:, 5]
        q2 = []
        for v in vols:
            side = v ** 0.5
            la, lh = max(1, round(side * 74)), max(1, round(side * 99))
            for a0, h0 in zip(rng.integers(0, 74 - la + 1, int(params["queries"])),
                              rng.integers(0, 99 - lh + 1, int(params["queries"]))):
                q2.append(((int(a0), int(h0)), (int(a0) + la - 1, int(h0) + lh - 1)))
        t2 = np.array([((age >= lo[0]) & (age <= hi[0]) & (hours >= lo[1]) & (hours <= hi[1])).mean()
                       for lo, hi in q2])
        g = grid_ranges(age, hours, (74, 99), float(eps), rng)
        cell["grid_side"] = grid_granularity(int(n), float(eps))
        cell["range2d_mse_grid"] = float(np.mean((np.array([g.range(lo, hi).value for lo, hi in q2]) - t2) ** 2))
        if params["mle_2d"]:
            pdom = ProductDomain([IntegerDomain(0, 73), IntegerDomain(0, 98)], ["age", "hours"])
            pm = parse(f"spl(krr(eps={float(eps)}))", pdom)
            pf = estimate(Observations.from_reports(pm, pm.sample(age * 99 + hours, rng), domain=pdom), "ibu")
            joint = np.asarray(pf.distribution).reshape(74, 99)
            cs = np.pad(joint.cumsum(0).cumsum(1), ((1, 0), (1, 0)))
            est2 = np.array([cs[hi[0] + 1, hi[1] + 1] - cs[lo[0], hi[1] + 1] - cs[hi[0] + 1, lo[1]] + cs[lo[0], lo[1]]
                             for lo, hi in q2])
            cell["range2d_mse_mle_spl_krr"] = float(np.mean((est2 - t2) ** 2))
        cells.append(cell)
    keys = sorted({k for c in cells for k in c if "mse" in k})
    summary = []
    for eps, n in itertools.product(params["eps"], params["n"]):
        mine = [c for c in cells if c["eps"] == float(eps) and c["n"] == int(n)]
        summary.append({"eps": float(eps), "n": int(n), **{k: float(np.mean([c[k] for c in mine if k in c]))
                                                              for k in keys}})
    return {"attributes": names, "shape": list(shape), "cells": cells, "summary": summary,
            "multi_freq_ldpy": "not installed (requirements-bench.lock); not compared"}


register_experiment(Experiment(
    name="multiattr-queries",
    description="Adult: MSE of 2-way marginals (groups, CALM consistency) and of ranges of volume 0.1..0.9 "
                "(hierarchy, flat OUE, OUE + IBU MLE; 2-D grid, SPL k-RR + IBU MLE) over eps and n",
    defaults={"eps": [0.5, 1.0, 2.0, 4.0], "n": [10_000, 100_000, 1_000_000], "runs": 5, "queries": 40,
              "volumes": [0.1, 0.3, 0.5, 0.7, 0.9], "branching": 4, "mle_2d": True},
    quick={"eps": [0.5, 1.0, 2.0, 4.0], "n": [10_000, 100_000], "runs": 1, "queries": 20, "mle_2d": True},
    compute=_compute,
    reference="CALM (Zhang et al., CCS 2018); Cormode et al. (VLDB 2019); Hay et al. (VLDB 2010); "
              "Yang et al. (VLDB 2021)",
))
