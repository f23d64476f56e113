"""Measurements for docs/numeric.md: Adult age and hours-per-week, n = 48,842.

Run by `make numeric-evidence` (about 8 minutes on a shared 2-core machine): writes
docs/results/numeric.json (atomically) and prints it. Seeds 0..RUNS-1; the data are the shared
Adult files.
"""
import json
import pathlib
import time

import numpy as np
import pandas as pd

from localpriv import estimate, numeric, parse
from localpriv.data.formats import atomic_output
from localpriv.data.observations import Observations
from localpriv.domains import parse_domain

cols = pd.concat([pd.read_csv(f"/work/shared/data/{f}", header=None, skipinitialspace=True, usecols=[0, 12])
                  for f in ("adult.data", "adult.test")])
data = {"age": (cols[0].to_numpy(float), "interval(16.5,90.5,37)"),
        "hours-per-week": (cols[12].to_numpy(float), "interval(0.5,99.5,33)")}
RUNS = 20
out = {}
for attr, (values, spec) in data.items():
    dom = parse_domain(spec)
    x = dom.encode(values)
    cells = dom.decode(x)
    F = np.cumsum(np.bincount(x, minlength=dom.size)) / x.size
    truth = {"n": int(x.size), "mean": float(values.mean()), "cell_mean": float(cells.mean()),
             "cell_median": float(np.interp(0.5, np.r_[0, F], dom.cell_edges()))}
    res = {"truth": truth, "domain": spec}
    for eps in (1.0, 4.0):
        for name in ("pm", "hm", "duchi"):
            mech = parse(f"{name}(eps={eps})", dom)
            errs, cover = [], 0
            for seed in range(RUNS):
                iv = mech.estimate_mean(mech.sample(x, np.random.default_rng(seed)), dom)
                errs.append(abs(iv.value - truth["cell_mean"]))
                cover += iv.lower <= truth["cell_mean"] <= iv.upper
            res[f"{name} eps={eps} unbiased mean"] = {"mean_abs_error": float(np.mean(errs)),
                                                      "coverage95": cover / RUNS,
                                                       "halfwidth": float((iv.upper - iv.lower) / 2)}
        for name in ("sw", "pm", "hm"):
            mech = parse(f"{name}(eps={eps})", dom)
            z = mech.sample(x, np.random.default_rng(0))
            t = time.time()
            est = estimate(Observations.from_reports(mech, z, dom), "ems")
            truth_d = np.bincount(x, minlength=dom.size) / x.size
            emd = float(np.abs(np.cumsum(est.distribution - truth_d)).sum() * dom.width)
            m, med = est.mean(), numeric.quantile(est, 0.5)
            res[f"{name} eps={eps} ems"] = {"emd": emd, "mean": list(m), "median": list(med),
                                            "seconds": time.time() - t,
                                           "iterations": est.iterations}
        print(attr, eps, flush=True)
    out[attr] = res

with atomic_output(pathlib.Path("docs/results/numeric.json")) as tmp:
    tmp.write_text(json.dumps(out, indent=1))
print(json.dumps(out, indent=1))
