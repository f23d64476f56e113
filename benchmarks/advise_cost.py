"""The CPU cost of ``localpriv advise`` on its two reference questions, and where it goes.

Questions (the default goal, prior, runs and seed, as the command line runs them):

* ``k=100``: ``localpriv advise --domain 0..99 --eps 1 --n 100000`` (target: at most 10 s CPU);
* ``grid``: ``localpriv advise --domain 'bbox(40.4774,-74.2591,40.9176,-73.7004,1)' --eps 1 --n 100000``,
  a 2,352-cell planar grid (target: at most 60 s CPU);
* ``grid-metric``: the same grid with a metric target too, ``--metric-eps 1`` (per km; same target).

Each question is answered once per round in this process; CPU time by ``time.process_time`` (BLAS
pinned to one thread by ``_common``), so contention from other processes inflates wall time, not
the figure kept. Recorded per question: the CPU seconds of each round and their median, whether
the median is within the target, the recommended spec, every row (spec, estimator, how, runs,
predicted error, seconds of that row) -- or, when ``advise`` refuses the question in one line (e.g.
no candidate within its simulation budgets), that line as ``refused`` -- and with ``--profile`` the
functions of largest cumulative CPU time (cProfile with a CPU timer, one extra answer).

``python benchmarks/advise_cost.py [--quick] [--rounds R] [--profile]`` writes
``benchmarks/results-advise-cost.json`` (``--quick``: n / 10 and one round, written to
``results-advise-cost-quick.json``: a smoke run, not a measurement). Timings need a quiet machine
(``make bench-advise``).
"""
from __future__ import annotations

import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, now, quick_flag, rounds_arg  # noqa: E402

from localpriv.advice.advisor import Advice, advise  # noqa: E402
from localpriv.utils.errors import LocalPrivError  # noqa: E402

HERE = Path(__file__).resolve().parent
GRID = "bbox(40.4774,-74.2591,40.9176,-73.7004,1)"
#: the questions: name -> (advise keyword arguments, CPU target in seconds)
QUESTIONS = {
    "k=100": ({"domain": "0..99", "eps_ldp": 1.0, "n": 100_000}, 10.0),
    "grid": ({"domain": GRID, "eps_ldp": 1.0, "n": 100_000}, 60.0),
    "grid-metric": ({"domain": GRID, "eps_ldp": 1.0, "eps_metric": 1.0, "n": 100_000}, 60.0),
}
#: functions kept from each profile
PROFILE_TOP = 25


def answer(kw: dict):
    """``(CPU seconds, Advice or the one-line refusal)`` of one call of :func:`advise`."""
    t = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            adv: Advice | str = advise(**kw)
        except LocalPrivError as exc:  # e.g. no candidate within the simulation budgets: recorded
            adv = str(exc)
    return time.process_time() - t, adv


def profile(kw: dict) -> list[dict]:
    """The :data:`PROFILE_TOP` functions of largest cumulative CPU time in one answer."""
    prof = cProfile.Profile(time.process_time)
    prof.enable()
    answer(kw)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    rows = [{"function": f"{Path(f).name}:{line}({fn})", "calls": int(nc), "own_s": round(tt, 3),
             "cumulative_s": round(ct, 3)}
            for (f, line, fn), (_cc, nc, tt, ct, _callers) in stats.items()]
    rows.sort(key=lambda r: -r["cumulative_s"])
    return rows[:PROFILE_TOP]


def main() -> None:
    quick = quick_flag()
    rounds = 1 if quick else rounds_arg(3)
    want_profile = "--profile" in sys.argv[1:]
    out: dict = {"started": now(), "machine": machine(), "quick": quick, "rounds": rounds, "questions": {}}
    for name, (kw, target) in QUESTIONS.items():
        kw = dict(kw)
        if quick:
            kw["n"] = kw["n"] // 10
        cpu = []
        adv = None
        for _ in range(rounds):
            seconds, adv = answer(kw)
            cpu.append(round(seconds, 3))
            print(f"{name}: {seconds:.2f} s CPU", file=sys.stderr)
        assert adv is not None
        median = float(np.median(cpu))
        entry = {"advise": {k: v for k, v in kw.items()}, "target_cpu_s": target, "cpu_s": cpu,
                 "median_cpu_s": round(median, 3), "within_target": bool(median <= target)}
        if isinstance(adv, str):  # refused: the CPU until the refusal, and its message
            entry["refused"] = adv
        else:
            entry.update({"recommended": adv.recommended.spec, "goal": adv.goal, "estimator": adv.estimator,
                          "rows": [{"spec": r.spec, "estimator": r.estimator, "how": r.how, "runs": r.runs,
                                    "error": r.error, "seconds": r.seconds} for r in adv.rows],
                          "skipped": adv.skipped})
        if want_profile:
            entry["profile"] = profile(kw)
        out["questions"][name] = entry
    out["finished"] = now()
    path = HERE / ("results-advise-cost-quick.json" if quick else "results-advise-cost.json")
    fd, tmp = tempfile.mkstemp(dir=HERE, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
