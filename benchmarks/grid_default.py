"""The default estimator on the metric mechanisms of the 2,352-cell grid of ``make bench-advise``,
and OLH's analytic model on a grid (evidence of docs/decisions/0084-default-on-large-grids.md).

For each metric mechanism of the grid (planar geometric, planar Laplace, exponential), at the
parameter ``advise`` calibrates for LDP level 1, ``seeds`` data sets of ``n = 100,000`` users from
the advisor's default prior (the bell) are estimated by ``auto`` twice: with the stated budgets of
this version (``TRAIN_BUDGET``, ``FINAL_BUDGET``) and with both set to ``AUTO_MAX_ITER`` (the fits
of before them). Recorded per fit: the choice, the EM evaluations, the earth mover's distance (km)
to the truth and the CPU seconds. Also recorded: the largest relative difference between the FFT
products of each mechanism's likelihood block (the planar kernels folded to the grid's sides; the
exponential mechanism's normalized kernel) and its dense channel, and, on a 20 x 20 grid at
``n = 10,000``, OLH's errors predicted by the analytic model against per-user simulations through
``mi-p``.

``python benchmarks/grid_default.py [--quick]`` writes ``benchmarks/results-grid-default.json``
(``--quick``: 2 seeds, written to ``results-grid-default-quick.json``). The CPU seconds need a
quiet machine (``make bench-grid-default``); the errors and evaluations do not.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, now, quick_flag  # noqa: E402

from localpriv.advice import advisor  # noqa: E402
from localpriv.domains import parse_domain  # noqa: E402
from localpriv.domains.grid import GridDomain  # noqa: E402
from localpriv.estimators import auto as auto_module  # noqa: E402
from localpriv.estimators import fit  # noqa: E402
from localpriv.inference.simulation import calibrate, simulate_observations  # noqa: E402
from localpriv.mechanisms import parse  # noqa: E402

HERE = Path(__file__).resolve().parent
GRID = "bbox(40.4774,-74.2591,40.9176,-73.7004,1)"
MECHANISMS = {"planar-geometric": "planar-geometric(eps={eps})", "planar-laplace": "planar-laplace(eps={eps})",
              "exponential": "exponential(eps={eps})"}
N = 100_000


def one_fit(obs, seed: int, err) -> dict:
    t = time.process_time()
    f = fit(obs, "auto", rng=seed)
    cpu = time.process_time() - t
    return {"choice": f.extra["auto"]["choice"], "evaluations": int(f.iterations or 0),
            "emd_km": float(err(f.distribution)), "cpu_s": round(cpu, 3), "converged": bool(f.converged)}


def block_agreement(mech, k: int) -> float:
    """Largest relative difference of forward and backward products between the block and the channel."""
    z = np.arange(k)
    block = mech.likelihood_block(z, np.ones(k))
    M = mech.channel()
    rng = np.random.default_rng(0)
    theta, w = rng.dirichlet(np.ones(k)), rng.random(k)
    f, b = theta @ M, M @ w
    return float(max(np.max(np.abs(block.forward(theta) - f) / f), np.max(np.abs(block.backward(w) - b) / b)))


def olh_model_check(runs: int) -> dict:
    dom = GridDomain(40.7, -74.0, 20, 20, 1.0)
    theta, _ = advisor.default_prior(dom)
    err = advisor.goal_error("emd", dom, theta)
    mech = parse("olh(eps=1.0)", dom)
    n = 10_000
    sim = advisor.simulate_errors(mech, dom, theta, n, err, "mi-p", runs, np.random.default_rng(1))
    model = advisor._analytic(mech, theta, n, err, runs, np.random.default_rng(2))  # noqa: SLF001
    return {"grid": "20 x 20", "n": n, "runs": runs, "simulated_median_emd_km": float(np.median(sim)),
            "model_median_emd_km": float(np.median(model)), "simulated": sim.tolist(), "model": model.tolist()}


def main() -> None:
    quick = quick_flag()
    seeds = 2 if quick else 5
    warnings.simplefilter("ignore")
    dom = parse_domain(GRID)
    theta, _ = advisor.default_prior(dom)
    err = advisor.goal_error("emd", dom, theta)
    out: dict = {"started": now(), "machine": machine(), "quick": quick, "grid": GRID, "k": int(dom.size), "n": N,
                 "seeds": seeds, "budgets": {"TRAIN_BUDGET": auto_module.TRAIN_BUDGET,
                                             "FINAL_BUDGET": auto_module.FINAL_BUDGET,
                                             "AUTO_MAX_ITER": auto_module.AUTO_MAX_ITER},
                 "mechanisms": {}}
    budgets = (auto_module.TRAIN_BUDGET, auto_module.FINAL_BUDGET)
    for name, fmt in MECHANISMS.items():
        e, level = calibrate(fmt, dom, 1.0)
        spec = fmt.format(eps=f"{advisor._round_down(e):g}")  # noqa: SLF001
        mech = parse(spec, dom)
        entry: dict = {"spec": spec, "block": type(mech.likelihood_block(np.arange(dom.size),
                                                                         np.ones(dom.size))).__name__,
                       "block_vs_channel_max_rel": block_agreement(mech, int(dom.size)), "fits": []}
        for seed in range(seeds):
            obs = simulate_observations(mech, None, theta, N, np.random.default_rng(seed), dom)
            auto_module.TRAIN_BUDGET, auto_module.FINAL_BUDGET = budgets
            now_fit = one_fit(obs, seed, err)
            auto_module.TRAIN_BUDGET = auto_module.FINAL_BUDGET = auto_module.AUTO_MAX_ITER
            before = one_fit(obs, seed, err)
            auto_module.TRAIN_BUDGET, auto_module.FINAL_BUDGET = budgets
            entry["fits"].append({"seed": seed, "budgeted": now_fit, "unbudgeted": before})
            print(name, seed, now_fit, before, file=sys.stderr, flush=True)
        out["mechanisms"][name] = entry
    out["olh_model"] = olh_model_check(5 if quick else 15)
    out["finished"] = now()
    path = HERE / ("results-grid-default-quick.json" if quick else "results-grid-default.json")
    fd, tmp = tempfile.mkstemp(dir=HERE, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
