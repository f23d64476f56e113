"""Marginals and range queries on UCI Adult: MSE of 2-way marginals (group release with and without
CALM's consistency step) and of random ranges of volume 0.1..0.9 (hierarchy with constrained
inference, flat OUE, the 2-D grid, and the MLE of the existing EM engine on the finest grid),
over eps and n. The records are drawn with replacement from adult.data; the error is against the
drawn records.

The registered grouped protocols (``calm``, ``hi``, ``hio``, ``hdg``; ``calm`` with the thesis's RRBA
as its oracle) run on the same records through their reports, and SPL, SMP and RS+FD with k-RR are
compared with multi-freq-ldpy's aggregators (``SPL_GRR_Aggregator_MI``, ``SMP_GRR_Aggregator_MI``,
``RSpFD_GRR_Aggregator_MI``) on the SAME reports: per protocol the MSE of the one-way marginals of
our unbiased estimate, of its projection onto the simplex and of theirs (clipped at 0 and
renormalized), and the largest difference between theirs and ours clipped and renormalized the same
way (0 up to round-off when both implement the same estimator)."""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
import zlib
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from localpriv.data.formats import atomic_output
from localpriv.data.observations import Observations
from localpriv.domains import IntegerDomain, ProductDomain
from localpriv.inference import estimate
from localpriv.mechanisms import parse
from localpriv.multiattr.marginals import all_marginals, release_marginals
from localpriv.multiattr.protocols import GroupTables
from localpriv.multiattr.ranges import grid_granularity, grid_ranges, hierarchical_ranges
from localpriv.utils.errors import LocalPrivError
from localpriv.utils.simplex import project_simplex
from reproductions.runner import Experiment, Progress, register_experiment, run_experiment, to_jsonable

NAME = "multiattr-queries"
#: The most cells a grid may have (eps x n x runs)
MAX_CELLS = 1000
#: The parameters a cell's numbers depend on (with the base seed and its key)
CONFIG_KEYS = ("volumes", "queries", "branching", "mle_2d", "protocols", "mfl")

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
    label order), hours - 1 (0..98); read once per file."""
    data, shape, names = _adult_records_of(adult_path())
    return data.copy(), shape, list(names)


@cache
def _adult_records_of(path: Path) -> tuple[np.ndarray, tuple[int, ...], tuple[str, ...]]:
    rows = [line.split(",") for line in path.read_text().splitlines() if line.count(",") >= 13]
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
    return np.column_stack(cols), tuple(shape), tuple(c for c, _ in COLUMNS)


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


def _truth_1d(v: np.ndarray, size: int, qs: list[tuple[int, int]]) -> np.ndarray:
    """The share of ``v`` in each range ``lo..hi`` of ``qs``, from the cumulative counts: the same
    numbers as ``((v >= lo) & (v <= hi)).mean()`` (whole counts over n) in one pass over ``v``."""
    cs = np.concatenate([[0], np.cumsum(np.bincount(v, minlength=size))])
    lo, hi = (np.array(c, dtype=np.int64).reshape(-1) for c in zip(*qs)) if qs else (np.zeros(0, int),) * 2
    return (cs[hi + 1] - cs[lo]) / v.shape[0]


def _truth_2d(a: np.ndarray, b: np.ndarray, sizes: tuple[int, int],
              qs: list[tuple[tuple[int, int], tuple[int, int]]]) -> np.ndarray:
    """The share of the pairs ``(a, b)`` in each rectangle ``((lo_a, lo_b), (hi_a, hi_b))`` of ``qs``,
    from the 2-D cumulative counts (whole counts over n, as the mean of the rectangle's indicator)."""
    cnt = np.bincount(a * sizes[1] + b, minlength=sizes[0] * sizes[1]).reshape(sizes)
    cs = np.pad(cnt.cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    q = np.array([(lo[0], lo[1], hi[0], hi[1]) for lo, hi in qs], dtype=np.int64).reshape(-1, 4)
    inside = cs[q[:, 2] + 1, q[:, 3] + 1] - cs[q[:, 0], q[:, 3] + 1] - cs[q[:, 2] + 1, q[:, 1]] + cs[q[:, 0], q[:, 1]]
    return inside / a.shape[0]


def _ranges_1d(size: int, vols: list[float], count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    out = []
    for v in vols:
        length = max(1, round(v * size))
        starts = rng.integers(0, size - length + 1, count)
        out += [(int(s), int(s) + length - 1) for s in starts]
    return out


def plan(params: dict) -> list[dict[str, Any]]:
    """The cells of a grid: one per (eps, n, run), key ``eps=E|n=N|run=R``, smallest n first."""
    grid = [(float(e), int(n), r) for n in params["n"] for e in params["eps"] for r in range(int(params["runs"]))]
    if len(grid) > MAX_CELLS:
        raise LocalPrivError(f"{NAME}: {len(grid)} cells, above the bound of {MAX_CELLS}")
    return [{"key": f"eps={e!r}|n={n}|run={r}", "eps": e, "n": n, "run": r} for e, n, r in grid]


def in_chunk(key: str, spec: str) -> bool:
    """Whether the cell ``key`` belongs to chunk ``"i/m"`` (``crc32(key) % m == i``)."""
    try:
        i, m = (int(v) for v in str(spec).split("/"))
    except ValueError:
        raise LocalPrivError(f"{NAME}: chunk must be 'i/m' with 0 <= i < m, got {spec!r}") from None
    if not 0 <= i < m:
        raise LocalPrivError(f"{NAME}: chunk must be 'i/m' with 0 <= i < m, got {spec!r}")
    return zlib.crc32(key.encode()) % m == i


def cell_config(params: dict, base: int) -> dict[str, Any]:
    """What a cell's numbers depend on besides its key: a cell file with another configuration is
    run again."""
    return {"base": int(base), **{k: params[k] for k in CONFIG_KEYS}}


def cell_generator(base: int, key: str) -> np.random.Generator:
    """The cell's own generator, from the run's base seed and the cell's key: chunks, resumes and
    one uninterrupted run draw the same numbers."""
    return np.random.default_rng([int(base), zlib.crc32(key.encode())])


def _cell_path(cells_dir: Path, key: str) -> Path:
    slug = "".join(ch if ch.isalnum() or ch in "-=." else "_" for ch in key)
    return Path(cells_dir) / f"{slug}.json"


def _read_cell(path: Path) -> dict | None:
    try:
        rec = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return rec if isinstance(rec, dict) else None


def run_cell(data: np.ndarray, shape: tuple[int, ...], eps: float, n: int, params: dict,
             rng: np.random.Generator) -> dict[str, Any]:
    """One cell: ``n`` records drawn with replacement from ``data``, every method's MSE at ``eps``."""
    vols = [float(v) for v in params["volumes"]]
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
    true_r = _truth_1d(age, 74, qs)
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
    t2 = _truth_2d(age, hours, (74, 99), q2)
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
    if params.get("protocols"):
        cell.update(_protocols(x, xc, sc, float(eps), vols, int(params["queries"]), rng))
    if params.get("mfl"):
        cell.update(_against_mfl(xc, sc, float(eps), rng))
    return cell


def run_cells(params: dict, base: int, progress: Progress) -> dict[str, int]:
    """Run the cells of ``params["chunk"]`` that ``params["cells_dir"]`` lacks (or holds with another
    configuration), writing each cell's record there atomically as soon as it is done; returns the
    counts of cells planned, reused and run."""
    cells_dir = Path(params["cells_dir"])
    cells_dir.mkdir(parents=True, exist_ok=True)
    config = cell_config(params, base)
    mine = [c for c in plan(params) if in_chunk(c["key"], params["chunk"])]
    todo = [c for c in mine if (_read_cell(_cell_path(cells_dir, c["key"])) or {}).get("config") != config]
    done = {"cells": len(mine), "reused": len(mine) - len(todo), "ran": 0}
    if not todo:
        return done
    data, shape, _ = adult_records()
    for c in progress(todo, "multiattr queries"):
        t0 = time.process_time()
        res = run_cell(data, shape, c["eps"], c["n"], params, cell_generator(base, c["key"]))
        rec = {"key": c["key"], "run": c["run"], "config": config,
               "cpu_seconds": round(time.process_time() - t0, 3), "results": res}
        with atomic_output(_cell_path(cells_dir, c["key"])) as tmp:
            Path(tmp).write_text(json.dumps(to_jsonable(rec)))
        done["ran"] += 1
    return done


def assemble(params: dict, base: int, cells_dirs: list[str] | None = None) -> dict[str, Any]:
    """The record from the cell files of ``cells_dirs`` (default: ``params["cells_dir"]``; several
    folders: the chunks of machines run apart) that belong to the grid ``params`` and its
    configuration: every cell, and per (eps, n) the mean over runs of each MSE (the largest
    ``maxdiff``)."""
    config = cell_config(params, base)
    want = {c["key"]: c for c in plan(params)}
    found: dict[str, dict] = {}
    for folder in cells_dirs or [params["cells_dir"]]:
        for path in sorted(Path(folder).glob("*.json")):
            rec = _read_cell(path)
            if rec is not None and rec.get("key") in want and rec.get("config") == config:
                found[rec["key"]] = rec
    cells = [found[k]["results"] for k in want if k in found]
    cpu = [found[k]["cpu_seconds"] for k in want if k in found]
    keys = sorted({k for c in cells for k in c if "mse" in k or "maxdiff" in k})
    summary = []
    for eps, n in itertools.product(params["eps"], params["n"]):
        mine = [c for c in cells if c["eps"] == float(eps) and c["n"] == int(n)]
        if mine:
            summary.append({"eps": float(eps), "n": int(n), "runs": len(mine),
                            **{k: float((np.max if "maxdiff" in k else np.mean)([c[k] for c in mine if k in c]))
                               for k in keys if any(k in c for c in mine)}})
    _, shape, names = adult_records()
    by_n = {str(n): [s for c, s in zip(cells, cpu) if c["n"] == int(n)] for n in params["n"]}
    return {"attributes": names, "shape": list(shape), "complete": len(cells) == len(want),
            "cells_planned": len(want), "cells_done": len(cells), "cell_cpu_seconds": float(np.sum(cpu)),
            "cells_by_n": {n: {"planned": sum(c["n"] == int(n) for c in want.values()), "done": len(v),
                               "mean_cpu_seconds": float(np.mean(v)) if v else None} for n, v in by_n.items()},
            "cells": cells, "summary": summary, "multi_freq_ldpy": _mfl_version()}


def _compute(params: dict, rng: np.random.Generator, progress: Progress) -> dict:
    base = int(rng.integers(2 ** 32))
    done = run_cells(params, base, progress) if params.get("compute", True) else {}
    out = assemble(params, base)
    out["this_run"] = done
    return out


def _mfl_version() -> str:
    try:
        from importlib.metadata import version
        return f"multi-freq-ldpy {version('multi-freq-ldpy')}"
    except Exception:  # noqa: BLE001 - any failure means: not installed
        return "not installed (requirements-bench.lock); not compared"


def _clip_norm(f: np.ndarray) -> np.ndarray:
    c = np.clip(f, 0.0, None)
    return c / c.sum() if c.sum() > 0 else c


def _against_mfl(xc: np.ndarray, sc: tuple[int, ...], eps: float, rng: np.random.Generator) -> dict[str, float]:
    """SPL, SMP, RS+FD with k-RR: our one-way marginal estimates and multi-freq-ldpy's on the same reports."""
    try:
        from multi_freq_ldpy.mdim_freq_est.RSpFD_solution import RSpFD_GRR_Aggregator_MI
        from multi_freq_ldpy.mdim_freq_est.SMP_solution import SMP_GRR_Aggregator_MI
        from multi_freq_ldpy.mdim_freq_est.SPL_solution import SPL_GRR_Aggregator_MI
    except ImportError:
        return {}
    d = len(sc)
    flat = np.ravel_multi_index(xc.T, sc)
    truth = [np.bincount(xc[:, j], minlength=s) / xc.shape[0] for j, s in enumerate(sc)]
    ks = [int(s) for s in sc]
    out: dict[str, float] = {}
    for proto in ("spl", "smp", "rsfd"):
        mech: Any = parse(f"{proto}(oracle=krr(eps={eps!r}),shape={list(ks)})")  # a MultiAttributeMechanism
        reports = mech.sample(flat, rng)
        ours = mech.marginal_frequencies(reports)
        z, att = mech.decode_reports(reports)
        if proto == "spl":
            theirs = SPL_GRR_Aggregator_MI(z, ks, d, eps)
        elif proto == "smp":
            theirs = SMP_GRR_Aggregator_MI([(int(a), int(v[a])) for a, v in zip(att, z)], ks, d, eps)
        else:
            theirs = RSpFD_GRR_Aggregator_MI(z, ks, d, eps)
        theirs = [np.asarray(t, dtype=float) for t in theirs]

        def mse(est: list[np.ndarray]) -> float:
            return float(np.mean(np.concatenate([(e - t) ** 2 for e, t in zip(est, truth)])))
        out[f"mfl_{proto}_mse_ours_unbiased"] = mse(ours)
        out[f"mfl_{proto}_mse_ours_simplex"] = mse([project_simplex(f) for f in ours])
        out[f"mfl_{proto}_mse_theirs"] = mse(theirs)
        out[f"mfl_{proto}_maxdiff"] = float(max(np.abs(_clip_norm(f) - t).max() for f, t in zip(ours, theirs)))
    return out


def _protocols(x: np.ndarray, xc: np.ndarray, sc: tuple[int, ...], eps: float, vols: list[float], count: int,
               rng: np.random.Generator) -> dict[str, float]:
    """The registered grouped protocols through their reports: 2-way marginals of the six coarse
    attributes by calm (k-RR; RRBA with its uniform table at the same level), and ranges on age and
    hours in 2-value bins (37 x 50) by hi, hio (oracles k-RR, OUE and OLH), hdg (its grids, and on the
    same reports its response matrix) and, on the same records, the hierarchy and grid helpers."""
    out: dict[str, float] = {}
    flat = np.ravel_multi_index(xc.T, sc)
    sets = all_marginals(len(sc), 2)
    truth = {a: _truth(xc, sc, a) for a in sets}
    big = max(int(np.prod([sc[j] for j in a])) for a in sets)
    e = math.expm1(eps)
    p = e / (e + big)  # RRBA with a uniform table: e^eps = 1 + p m / (1 - p) on the largest table
    for label, spec in (("calm_krr", f"calm(oracle=krr(eps={eps!r}),shape={list(sc)})"),
                        ("calm_rrba", f"calm(oracle=rrba(p={p!r}),shape={list(sc)})")):
        mech: Any = parse(spec)  # a GroupedMechanism
        tab = GroupTables.from_reports(mech, mech.sample(flat, rng))
        errs = [((tab.marginal(list(a))[0] - truth[a]) ** 2).ravel() for a in sets]
        out[f"marginal_mse_{label}"] = float(np.mean(np.concatenate(errs)))
    a2, h2 = x[:, 0] // 2, x[:, 5] // 2  # 37 x 50 values
    sizes = (37, 50)
    q1 = _ranges_1d(sizes[0], vols, count, rng)
    t1 = _truth_1d(a2, sizes[0], q1)
    q2 = []
    for v in vols:
        la, lh = max(1, round(v ** 0.5 * sizes[0])), max(1, round(v ** 0.5 * sizes[1]))
        for a0, h0 in zip(rng.integers(0, sizes[0] - la + 1, count), rng.integers(0, sizes[1] - lh + 1, count)):
            q2.append(((int(a0), int(h0)), (int(a0) + la - 1, int(h0) + lh - 1)))
    t2 = _truth_2d(a2, h2, sizes, q2)
    g2 = min(grid_granularity(x.shape[0], eps), min(sizes))
    g1 = min(g2 * g2, sizes[0])  # a 1-D grid with as many cells as the 2-D one
    pflat = a2 * sizes[1] + h2
    for label, spec in (("hi", f"hi(oracle=krr(eps={eps!r}),shape={list(sizes)},branching=4)"),
                        ("hio", f"hio(oracle=krr(eps={eps!r}),shape={list(sizes)},branching=4)"),
                        ("hio_oue", f"hio(oracle=oue(eps={eps!r}),shape={list(sizes)},branching=4)"),
                        ("hio_olh", f"hio(oracle=olh(eps={eps!r}),shape={list(sizes)},branching=4)"),
                        ("hdg", f"hdg(oracle=krr(eps={eps!r}),shape={list(sizes)},g1={g1},g2={g2})")):
        mech = parse(spec)  # a GroupedMechanism
        tab = GroupTables.from_reports(mech, mech.sample(pflat, rng))
        est1 = np.array([tab.range_value({0: r}, variance=False)[0] for r in q1])
        out[f"proto_range1d_mse_{label}"] = float(np.mean((est1 - t1) ** 2))
        if label != "hi":
            est2 = np.array([tab.range_value({0: (lo[0], hi[0]), 1: (lo[1], hi[1])}, variance=False)[0]
                             for lo, hi in q2])
            out[f"proto_range2d_mse_{label}"] = float(np.mean((est2 - t2) ** 2))
        if label == "hdg":  # HDG's response matrix on the same reports
            ref2 = np.array([tab.refined_range_value({0: (lo[0], hi[0]), 1: (lo[1], hi[1])}) for lo, hi in q2])
            out["proto_range2d_mse_hdg_response"] = float(np.mean((ref2 - t2) ** 2))
    h = hierarchical_ranges(a2, sizes[0], eps, rng, 4)
    out["proto_range1d_mse_hierarchy_helper"] = float(np.mean((np.array([h.range(lo, hi).value for lo, hi in q1])
                                                               - t1) ** 2))
    g = grid_ranges(a2, h2, sizes, eps, rng)
    out["proto_range2d_mse_grid_helper"] = float(np.mean((np.array([g.range(lo, hi).value for lo, hi in q2])
                                                          - t2) ** 2))
    return out


EXPERIMENT = register_experiment(Experiment(
    name=NAME,
    description="Adult: MSE of 2-way marginals (groups, CALM consistency) and of ranges of volume 0.1..0.9 "
                "(hierarchy, flat OUE, OUE + IBU MLE; 2-D grid, SPL k-RR + IBU MLE) over eps and n",
    defaults={"eps": [0.5, 1.0, 2.0, 4.0], "n": [10_000, 100_000, 1_000_000], "runs": 5, "queries": 40,
              "volumes": [0.1, 0.3, 0.5, 0.7, 0.9], "branching": 4, "mle_2d": True,
              "protocols": True, "mfl": True, "cells_dir": "out/multiattr-queries-cells", "chunk": "0/1",
              "compute": True},
    quick={"eps": [0.5, 1.0, 2.0, 4.0], "n": [10_000, 100_000], "runs": 1, "queries": 20, "mle_2d": True,
           "protocols": True, "mfl": True, "cells_dir": "out/multiattr-queries-quick-cells"},
    compute=_compute,
    reference="CALM (Zhang et al., CCS 2018); Cormode et al. (VLDB 2019); Hay et al. (VLDB 2010); "
              "Yang et al. (VLDB 2021)",
))


def main(argv: list[str] | None = None) -> int:
    """``python tools/multiattr_queries_cells.py {run,report} [--quick] [--chunk i/m] [--cells DIR ...]``.

    ``run`` runs the cells of chunk ``i/m`` (``crc32(key) % m == i``) that the first cell folder
    lacks, writing each one there as it finishes, so a stopped run resumes where it stopped and
    ``m`` processes share the grid; it then writes ``OUT/multiattr-queries.json`` from the cells
    there (of chunk ``0/1``) or ``FOLDER/../multiattr-queries-chunk-i-of-m.json`` (other chunks).
    ``report`` only reads the cell folders (several: chunks run apart) and writes the record."""
    ap = argparse.ArgumentParser(description="the multiattr-queries evidence: run cells (resumable), report")
    ap.add_argument("action", choices=["run", "report"])
    ap.add_argument("--quick", action="store_true", help="the reduced configuration")
    ap.add_argument("--chunk", default="0/1", help="run the cells of chunk i of m (crc32(key) %% m == i)")
    ap.add_argument("--cells", nargs="*", default=None, help="cell folders (the first is written to)")
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    exp = EXPERIMENTS_DEFAULTS["quick" if a.quick else "full"]
    cells = a.cells or [exp["cells_dir"]]
    try:
        if a.action == "run":
            in_chunk("", a.chunk)  # the chunk's syntax, before any work
            i, m = (int(v) for v in a.chunk.split("/"))
            out = Path(a.out) if m == 1 else Path(cells[0]).parent / f"{NAME}-chunk-{i}-of-{m}"
            run_experiment(NAME, out, seed=a.seed, quick=a.quick, overrides={"chunk": a.chunk, "cells_dir": cells[0]})
            return 0
        rec = run_experiment(NAME, a.out, seed=a.seed, quick=a.quick,
                             overrides={"compute": False, "cells_dir": cells[0]})
        if len(cells) > 1:
            base = int(np.random.default_rng(a.seed).integers(2 ** 32))
            rec["results"] = assemble(rec["params"], base, cells)
            with atomic_output(Path(a.out) / f"{NAME}.json") as tmp:
                Path(tmp).write_text(json.dumps(to_jsonable(rec), indent=1))
    except LocalPrivError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


EXPERIMENTS_DEFAULTS = {"full": EXPERIMENT.defaults, "quick": {**EXPERIMENT.defaults, **EXPERIMENT.quick}}
