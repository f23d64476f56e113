"""The cost of the default estimator against the certified MLE on the same observations.

Contenders, on the same observations, in interleaved rounds (``_common.interleaved``; CPU time by
``time.process_time``; BLAS pinned to one thread by ``_common``):

* ``mle``: ``localpriv.estimate(obs, "ibu")`` -- the certified maximum-likelihood estimate;
* ``default``: ``localpriv.estimate(obs)`` -- the default estimator (``auto``);
* ``old-default`` (``--old``): the former default, ``ems`` on ordered domains and ``dirichlet`` on
  categorical ones (minutes per call on OUE reports: off unless asked).

Each call starts from the distinct reports and their counts (the ``Observations`` and their
likelihood blocks are built inside the timed call: set-up included). Cases: k-RR on 100 and 1,000
values at n = 10^6; k-RR on 1,000 labels (a Zipf law) at n = 10^6; OUE on 100 values at n = 10^4
and 10^5; OLH on 100 values at n = 10^5;
subset selection over 100 labels at n = 10^5; the geometric mechanism on 100 and 1,000 values at
n = 10^5; the planar geometric mechanism on a 20 x 20 grid at n = 10^5. The target: the default's
median CPU time at most twice the MLE's plus 50 ms (``within_target``).

``python benchmarks/default_cost.py [--quick] [--rounds R] [--old]`` writes
``benchmarks/results-default-cost.json`` (``--quick``: n / 10, one round, written to
``results-default-cost-quick.json``: a smoke run, not a measurement). Timings need a quiet machine.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, machine, now, quick_flag, rounds_arg, strip_results  # noqa: E402

import localpriv  # noqa: E402
from localpriv.data.observations import ObservationBlock, Observations  # noqa: E402
from localpriv.domains import CategoricalDomain, IntegerDomain  # noqa: E402
from localpriv.domains.grid import GridDomain  # noqa: E402
from localpriv.inference.simulation import simulate_block  # noqa: E402

HERE = Path(__file__).resolve().parent
#: the target: default CPU <= TARGET_FACTOR x MLE CPU + TARGET_SLACK seconds
TARGET_FACTOR = 2.0
TARGET_SLACK = 0.05


def _truth(k: int) -> np.ndarray:
    x = np.arange(k)
    t = np.exp(-0.5 * ((x - 0.35 * k) / (0.08 * k)) ** 2) + 0.4 * np.exp(-0.5 * ((x - 0.75 * k) / (0.04 * k)) ** 2)
    return t / t.sum()


def cases(scale: float) -> list[dict]:
    """The cases (``scale`` multiplies every n)."""
    labels = CategoricalDomain([f"label{i:03d}" for i in range(100)])
    zipf = 1.0 / np.arange(1, 101) ** 1.1
    # the categorical case with the most candidates of the pure-oracle path (Power's integration on
    # its coarser grids past 256 cells; decision 0087)
    labels1k = CategoricalDomain([f"label{i:04d}" for i in range(1000)])
    zipf1k = 1.0 / np.arange(1, 1001) ** 1.1
    out = [
        {"name": "krr k=100 n=1e6", "spec": "krr(eps=1.0)", "domain": IntegerDomain(0, 99), "n": 1e6},
        {"name": "krr k=1000 n=1e6", "spec": "krr(eps=1.0)", "domain": IntegerDomain(0, 999), "n": 1e6},
        {"name": "oue k=100 n=1e4", "spec": "oue(eps=1.0)", "domain": IntegerDomain(0, 99), "n": 1e4},
        {"name": "oue k=100 n=1e5", "spec": "oue(eps=1.0)", "domain": IntegerDomain(0, 99), "n": 1e5},
        {"name": "olh k=100 n=1e5", "spec": "olh(eps=1.0)", "domain": IntegerDomain(0, 99), "n": 1e5},
        {"name": "ss 100 labels n=1e5", "spec": "ss(eps=1.0)", "domain": labels, "n": 1e5,
         "theta": zipf / zipf.sum()},
        {"name": "krr 1000 labels n=1e6", "spec": "krr(eps=2.0)", "domain": labels1k, "n": 1e6,
         "theta": zipf1k / zipf1k.sum()},
        {"name": "geometric k=100 n=1e5", "spec": "geometric(eps=0.1)", "domain": IntegerDomain(0, 99), "n": 1e5},
        {"name": "geometric k=1000 n=1e5", "spec": "geometric(eps=0.05)", "domain": IntegerDomain(0, 999),
         "n": 1e5},
        {"name": "planar 20x20 n=1e5", "spec": "planar-geometric(eps=1.0)",
         "domain": GridDomain(40.0, -74.0, 20, 20, 0.5), "n": 1e5},
    ]
    for c in out:
        c["n"] = int(c["n"] * scale)
    return out


def run(quick: bool = False, rounds: int = 5, old: bool = False) -> dict:
    """Every case in ``rounds`` interleaved rounds; the record written to JSON."""
    result: dict = {"benchmark": "default_cost", "when": now(), "machine": machine(), "quick": quick,
                    "target": f"default CPU <= {TARGET_FACTOR:g} x MLE CPU + {TARGET_SLACK * 1000:g} ms",
                    "cases": []}
    for case in cases(0.1 if quick else 1.0):
        dom = case["domain"]
        mech = localpriv.parse(case["spec"], dom)
        theta = case.get("theta", _truth(dom.size))
        block = simulate_block(mech, theta, case["n"], np.random.default_rng(1))
        reports, counts = block.reports, block.counts

        def obs(reports=reports, counts=counts, mech=mech, dom=dom) -> Observations:
            return Observations([ObservationBlock(mech, reports, counts)], dom)

        contenders = {"mle": lambda obs=obs: localpriv.estimate(obs(), "ibu"),
                      "default": lambda obs=obs: localpriv.estimate(obs())}
        if old:
            former = "dirichlet" if isinstance(dom, CategoricalDomain) else "ems"
            contenders["old-default"] = lambda obs=obs, former=former: localpriv.estimate(obs(), former)
        timing = interleaved(contenders, rounds=rounds, reference="mle")
        mle_cpu = timing["contenders"]["mle"]["cpu"]["median"]
        dflt_cpu = timing["contenders"]["default"]["cpu"]["median"]
        est = timing["contenders"]["default"]["result"]
        row = {"name": case["name"], "spec": case["spec"], "k": int(dom.size), "n": case["n"],
               "distinct_reports": int(len(counts)), "timing": strip_results(timing),
               "default_choice": est.settings.get("choice"), "default_evaluations": est.extra.get("evaluations"),
               "mle_evaluations": timing["contenders"]["mle"]["result"].iterations,
               "within_target": (dflt_cpu <= TARGET_FACTOR * mle_cpu + TARGET_SLACK)
               if mle_cpu is not None and dflt_cpu is not None else None}
        result["cases"].append(row)
        print(f"{case['name']} (n = {case['n']}): mle {mle_cpu:.3f} s, default {dflt_cpu:.3f} s "
              f"({row['default_choice']}, "
              f"{row['default_evaluations']} evaluations), within target: {row['within_target']}",
              file=sys.stderr, flush=True)
    return result


def main() -> int:
    quick = quick_flag()
    result = run(quick=quick, rounds=rounds_arg(1 if quick else 5), old="--old" in sys.argv[1:])
    out = HERE / ("results-default-cost-quick.json" if quick else "results-default-cost.json")
    fd, tmp = tempfile.mkstemp(dir=HERE, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(result, fh, indent=1, default=float)
    os.replace(tmp, out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
