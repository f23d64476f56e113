"""A lower-variance estimate of the categorical candidates' TV risk, tried against the default's rule.

On Adult native-country and workclass under k-RR (eps 0.5, 1, 2, 4; n = 10^4, 10^5; 20 runs a
cell, the truths of ``reproductions.evidence``), each run's candidates of ``auto`` on categorical
data (Norm-Sub, Base-Cut, Power, PowerNS, all normalized) are ranked by a parametric bootstrap of
their total variation around a pilot estimate: ``B`` k-RR count vectors are drawn from the pilot
(common random numbers: every candidate sees the same draws), each candidate is computed on each
and its TV to the pilot averaged. Pilots: the mean of Power and Norm-Sub (``boot-mix``) and the
mean of the four candidates (``boot-avg``). The JSON holds, per cell, the mean TV to the truth of
``auto`` (its rule of decision 0087), of each candidate and of each bootstrap rule.

``python benchmarks/default_tv_bootstrap.py [--quick]`` writes ``results-default-tv-bootstrap.json``
(``--quick``: 3 runs, 2 cells, ``results-default-tv-bootstrap-quick.json``). Errors only, no timings.
"""
from __future__ import annotations

import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from _common import machine, now, quick_flag, write_json  # noqa: E402
from scipy import stats  # noqa: E402

from localpriv.data.observations import ObservationBlock, Observations  # noqa: E402
from localpriv.estimators import fit  # noqa: E402
from localpriv.estimators.oracles import pure_parameters  # noqa: E402
from localpriv.estimators.postprocess import (  # noqa: E402
    cut_threshold,
    noise_variance,
    norm_sub,
    power_moments,
    unbiased_estimate,
)
from localpriv.mechanisms.krr import KRR  # noqa: E402
from reproductions import evidence  # noqa: E402

HERE = Path(__file__).resolve().parent
BASE_SEED = 89
BOOT = 20
RUNS = 20


def candidates(raw: np.ndarray, s2: np.ndarray, n: float) -> dict[str, np.ndarray]:
    """Norm-Sub, Base-Cut, Power and PowerNS of ``f~`` (normalized as ``auto`` does)."""
    thr = cut_threshold(s2)
    h = np.where(raw > thr, raw, 0.0)
    m, _var, _a = power_moments(raw, s2, n)
    return {"norm-sub": norm_sub(raw),
            "base-cut": h / h.sum() if h.sum() > 0 else np.full(raw.size, 1.0 / raw.size),
            "power": m / m.sum(), "power-ns": norm_sub(m)}


def bootstrap_risk(pilot: np.ndarray, mech, n: int, rng: np.random.Generator) -> dict[str, float]:
    """Each candidate's mean TV to ``pilot`` over ``BOOT`` k-RR draws from it (the same draws for all)."""
    p, q = pure_parameters(mech)
    k = pilot.size
    pi = q + (p - q) * pilot
    s2 = np.full(k, q * (1.0 - q) / (n * (p - q) ** 2))
    risk: dict[str, float] = {}
    for _ in range(BOOT):
        raw = (rng.multinomial(n, pi / pi.sum()) / n - q) / (p - q)
        for name, g in candidates(raw, s2, n).items():
            risk[name] = risk.get(name, 0.0) + 0.5 * float(np.abs(g - pilot).sum()) / BOOT
    return risk


def run_cell(key: str, runs: int) -> dict:
    data, _mech_name, eps, n_s = key.split("|")
    n = int(n_s.split("=")[1])
    d = evidence.dataset(data)
    k = d.theta.size
    mech = KRR(k, float(eps.split("=")[1]))
    law = np.asarray(mech.channel()).T @ d.theta
    cols = ["auto", "norm-sub", "base-cut", "power", "power-ns", "boot-mix", "boot-avg"]
    tv: dict[str, list[float]] = {c: [] for c in cols}

    def err(g: np.ndarray) -> float:
        return 0.5 * float(np.abs(g - d.theta).sum())
    for r in range(runs):
        rng = np.random.default_rng([BASE_SEED, zlib.crc32(key.encode()), r])
        counts = rng.multinomial(n, law / law.sum())
        obs = Observations([ObservationBlock(mech, np.flatnonzero(counts), counts[counts > 0])], d.domain)
        tv["auto"].append(err(fit(obs, "auto").distribution))
        block = obs.blocks[0]
        raw = unbiased_estimate(block)
        cs = candidates(raw, noise_variance(block, raw), n)
        for name, g in cs.items():
            tv[name].append(err(g))
        for label, pilot in (("boot-mix", (cs["power"] + cs["norm-sub"]) / 2), ("boot-avg", sum(cs.values()) / 4)):
            risk = bootstrap_risk(pilot, mech, n, rng)
            tv[label].append(err(cs[min(risk, key=lambda x: risk[x])]))
    paired = {}
    for label in ("boot-mix", "boot-avg"):  # Wilcoxon signed-rank against auto (two-sided; 1 if all equal)
        diff = np.asarray(tv[label]) - np.asarray(tv["auto"])
        paired[label] = 1.0 if np.all(diff == 0) or runs < 2 else float(stats.wilcoxon(diff).pvalue)
    return {"key": key, "runs": runs, "mean_tv": {c: float(np.mean(v)) for c, v in tv.items()},
            "p_vs_auto": paired, "tv": tv}


def main() -> int:
    quick = quick_flag()
    keys = [f"{d}|k-RR|eps={e:g}|n={n}" for d in ("native-country", "workclass") for e in (0.5, 1.0, 2.0, 4.0)
            for n in (10_000, 100_000)]
    if quick:
        keys = keys[:2]
    runs = 3 if quick else RUNS
    cells = []
    for key in keys:
        cells.append(run_cell(key, runs))
        print(key, {c: round(v, 4) for c, v in cells[-1]["mean_tv"].items()}, flush=True)
    doc = {"benchmark": "default_tv_bootstrap", "when": now(), "machine": machine(), "quick": quick,
           "boot": BOOT, "base_seed": BASE_SEED, "cells": cells}
    out = HERE / ("results-default-tv-bootstrap-quick.json" if quick else "results-default-tv-bootstrap.json")
    write_json(str(out), doc)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
