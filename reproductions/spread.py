"""Run-to-run spread of the reproductions' numbers, ratios and verdicts.

A reproduction reruns the obfuscation ``m`` times (new reports of the same users) and reports
means over the runs. Each number it prints carries an interval over those runs, and a verdict
read off a ratio is *undecided* when the ratio's interval straddles one of the verdict's
thresholds, instead of being settled by which runs happened to be drawn.

* Mean of ``m`` runs: Student-t interval ``mean +- t_{m-1} s / sqrt(m)``.
* Ratio of two means over *paired* runs (the same reports feed both estimators), ``R = mean(a) /
  mean(b)``: delta-method interval with Student-t quantile,
  ``R +- t_{m-1} sd(a_i - R b_i) / (sqrt(m) mean(b))`` (the linearization of ``a/b`` around
  ``R``; e.g. Casella and Berger, *Statistical Inference*, section 5.5.4). With one run there is
  no spread and the interval is ``[R, R]``, flagged by ``runs = 1``.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["mean_interval", "ratio_interval", "banded_verdict", "t_quantile", "LEVEL"]

#: two-sided level of every interval the reproductions print
LEVEL = 0.95


def t_quantile(m: int, level: float) -> float:
    """The two-sided ``level`` quantile of Student's t with ``m - 1`` degrees of freedom (0 for one run)."""
    return float(stats.t.ppf(0.5 + level / 2, m - 1)) if m > 1 else 0.0


def mean_interval(runs, level: float = LEVEL) -> dict:
    """``{"mean", "lo", "hi", "sd", "runs"}`` of the per-run values (Student-t interval)."""
    a = np.asarray([v for v in runs if v is not None], dtype=float)
    m = a.size
    if m == 0:
        return {"mean": None, "lo": None, "hi": None, "sd": None, "runs": 0}
    mean = float(a.mean())
    sd = float(a.std(ddof=1)) if m > 1 else 0.0
    half = t_quantile(m, level) * sd / np.sqrt(m)
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "sd": sd, "runs": int(m)}


def ratio_interval(num_runs, den_runs, level: float = LEVEL) -> dict:
    """``{"ratio", "lo", "hi", "runs"}`` of ``mean(num) / mean(den)`` over paired runs.

    Pairs where either value is missing are dropped; ``ratio`` is ``None`` when nothing is left
    or the denominator's mean is 0.
    """
    pairs = [(a, b) for a, b in zip(num_runs, den_runs) if a is not None and b is not None]
    if not pairs:
        return {"ratio": None, "lo": None, "hi": None, "runs": 0}
    a, b = (np.asarray(v, dtype=float) for v in zip(*pairs))
    m = a.size
    mb = float(b.mean())
    if mb == 0:
        return {"ratio": None, "lo": None, "hi": None, "runs": int(m)}
    r = float(a.mean()) / mb
    sd = float(np.std(a - r * b, ddof=1)) if m > 1 else 0.0
    half = t_quantile(m, level) * sd / (np.sqrt(m) * mb)
    return {"ratio": r, "lo": r - half, "hi": r + half, "runs": int(m)}


def banded_verdict(interval: dict, bands) -> str:
    """The band label holding the whole interval, or ``"undecided (A/B)"`` across a threshold.

    ``bands``: ``[(upper, label), ...]`` in increasing ``upper`` (the last one ``inf``), e.g.
    ``[(1.25, "Excellent"), (2.0, "Good"), (inf, "Bad")]``; ``"NA"`` when there is no ratio.
    """
    if interval.get("ratio") is None or not np.isfinite(interval["ratio"]):
        return "NA"

    def label(x):
        for upper, name in bands:
            if x <= upper:
                return name
        return bands[-1][1]

    lo, hi = label(interval["lo"]), label(interval["hi"])
    if lo == hi:
        return lo
    names = [name for _, name in bands]
    return "undecided (" + "/".join(names[names.index(lo): names.index(hi) + 1]) + ")"
