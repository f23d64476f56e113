"""The main job (``make demo``): Adult ages under k-RR, estimated by INV-N, INV-P and IBU."""
from __future__ import annotations

import numpy as np

from localpriv.data.aggregate import aggregate
from localpriv.data.datasets import adult_ages
from localpriv.domains import IntegerDomain
from localpriv.inference import estimate
from localpriv.inference.metrics import emd_line
from localpriv.inference.plotting import distributions_figure
from localpriv.data.reports import perturb
from localpriv.experiments.runner import Experiment, register_experiment


def _compute(params, rng, progress):
    domain = IntegerDomain(params["lo"], params["hi"])
    ages = adult_ages()
    x = domain.encode(ages)
    truth = np.bincount(x, minlength=domain.size) / x.size
    table = perturb(ages, params["mechanism"], rng, domain)          # values -> reports
    obs = aggregate(table, domain)                                   # reports -> counts (DuckDB)
    noisy = obs.blocks[0].count_vector() / obs.n
    out = {"truth": truth, "noisy": noisy, "emd": {"noisy": emd_line(truth, noisy)}, "estimates": {}}
    for name in progress(params["estimators"], "estimators"):
        est = estimate(obs, name, **params.get("settings", {}).get(name, {}))  # counts -> estimate
        out["estimates"][name] = est.distribution
        out["emd"][name] = emd_line(truth, est.distribution)
        out.setdefault("details", {})[name] = est.summary()
    out["n"] = int(x.size)
    return out


def _plot(results, params, path):
    domain = IntegerDomain(params["lo"], params["hi"])
    series = {"truth": results["truth"], "noisy": results["noisy"], **results["estimates"]}
    notes = {k: f"EMD to truth {results['emd'][k]:.3f} years" for k in results["emd"]}
    distributions_figure(domain.labels, {k: np.asarray(v) for k, v in series.items()}, path,
                         title=f"UCI Adult ages (n={results['n']}) under {params['mechanism']}",
                         xlabel="age (years)", notes=notes)


register_experiment(Experiment(
    name="demo",
    description="Ages of the 48,842 persons of UCI Adult, k-RR eps=2, INV-N / INV-P / IBU",
    defaults={"mechanism": "krr(k=100,eps=2.0)", "lo": 0, "hi": 99,
              "estimators": ["inv-n", "inv-p", "ibu"],
              # pinned: plain EM with seed 001 Algorithm 1's rule (the library's default before
              # issue 17), so the demo's numbers do not move with the library's defaults
              "settings": {"ibu": {"accelerate": "none", "stop": "loglik", "delta": 1e-6, "max_iter": 10_000}}},
    compute=_compute,
    plot=_plot,
    reference="seed 001 sections 3.2 and 7",
))
