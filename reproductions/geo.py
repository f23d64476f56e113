"""Reproductions of seed 001 section 7.1-7.4: IBU vs INV-N vs INV-P under geo-indistinguishability
mechanisms and k-RR, on UCI Adult ages and Gowalla check-ins in Manhattan.

* ``fig1``  -- ages 0..99, linear geometric eps = 0.05 (seed 001 Fig. 1, section 7.1);
* ``fig8``  -- 20 x 14 grid of 0.5-km cells, truncated planar geometric eps = 1.0 (Fig. 8, 7.2);
* ``fig9``  -- six box-plot panels: {ages, locations} x {geometric, Laplace, exponential} (Fig. 9, 7.3);
* ``fig10`` -- k-RR eps 0.5..5 on ages and locations (Fig. 10, 7.4).

Every run: perturb all users' true values (vectorized), count the reports, estimate with INV-N,
INV-P and IBU, and measure the EMD to the true distribution (years on the line, km on the grid,
:func:`localpriv.domains.grid.emd_grid`).

Choices (documented in docs/geo.md):

* the age alphabet is 0..99 (our text of seed 001 section 7.1 reads "0 and 9999", an artefact of
  the text extraction, not of the paper: Fig. 1 and section 7.6 use k = 100);
* INV needs a square channel, so the linear mechanisms are the versions truncated to the
  alphabet: ``geometric(eps,lo=0,hi=99)`` (seed 001 Eq. 7), ``laplace(eps,bins=1.0,lo=0,hi=99)``
  (Laplace noise rounded to the nearest age, ends clamped); the planar ones are clamped to the
  grid (seed 003 section 2.3);
* INV is ``v = q M^{-1}`` computed by solving ``M^T v = q`` however ill-conditioned ``M`` is (that
  is the estimator the paper evaluates; the condition number is recorded), then normalization
  (INV-N) or projection onto the simplex (INV-P);
* IBU (the one EM engine, :func:`localpriv.estimators.em.em`, on a dense likelihood block) starts
  uniform and stops when the total log-likelihood changes by less than ``delta``
  (seed 001 Algorithm 1), at most ``max_iter`` iterations: plain EM, pinned
  (``accelerate="none", stop="loglik"``, stated in every experiment's parameters), whatever the
  library's defaults (the certified maximum, docs/decisions/0003-certified-gap-stopping-rule.md).
"""
from __future__ import annotations

import numpy as np

from localpriv.data.datasets import adult_ages, manhattan_cells
from localpriv.data.observations import Observations
from localpriv.domains import IntegerDomain
from localpriv.domains.grid import emd_grid
from localpriv.estimators.em import em
from localpriv.inference.metrics import emd_line
from localpriv.inference.plotting import distributions_figure, plt, save
from localpriv.likelihood.blocks import DenseBlock
from localpriv.mechanisms import parse
from localpriv.utils.simplex import clip_normalize, project_simplex
from reproductions.runner import Experiment, register_experiment
from reproductions.spread import mean_interval

__all__ = ["run_once", "inv_vector", "ESTIMATORS"]

ESTIMATORS = ("inv-n", "inv-p", "ibu")


# ------------------------------------------------------------------------------------------
# shared pieces
# ------------------------------------------------------------------------------------------
def _ages():
    domain = IntegerDomain(0, 99)
    x = domain.encode(adult_ages())
    return domain, x, np.bincount(x, minlength=domain.size) / x.size


def _locations():
    grid, x = manhattan_cells()
    return grid, x, np.bincount(x, minlength=grid.size) / x.size


def _setup(data: str):
    if data == "ages":
        domain, x, truth = _ages()
        return domain, x, truth, (lambda p, q: emd_line(p, q))
    domain, x, truth = _locations()
    D = domain.distance_matrix()
    return domain, x, truth, (lambda p, q: emd_grid(p, q, D))


def inv_vector(mech, counts) -> tuple[np.ndarray, float]:
    """``v = q M^{-1}`` (seed 001 section 7.6) and the condition number of ``M``.

    Closed form when the mechanism has one (k-RR); otherwise ``M^T v = q`` is solved directly,
    falling back to least squares only if ``M`` is exactly singular.
    """
    c = np.asarray(counts, dtype=float)
    if hasattr(mech, "inverse_counts"):
        return mech.inverse_counts(c), float("nan")
    M = mech.channel()
    q = c / c.sum()
    try:
        v = np.linalg.solve(M.T, q)
    except np.linalg.LinAlgError:
        v = np.linalg.lstsq(M.T, q, rcond=None)[0]
    return v, float(np.linalg.cond(M))


def run_once(mech, x, truth, rng, emd, domain=None, delta=1e-6, max_iter=10_000,
             keep_distributions=False, checkpoints=(), accelerate="none", stop="loglik",
             mle=False) -> dict:
    """One obfuscation-estimation round: EMD to ``truth`` of the noisy histogram and of each
    estimator (``inv-n``, ``inv-p``, ``ibu``); ``checkpoints``: IBU iterations at which the EMD of
    the current IBU iterate is also recorded (``ibu_emd_at``); ``mle``: also the certified
    maximum-likelihood estimate (the library's default EM, ``mle``) on the same reports, so that
    "IBU" as the seed ran it (EM stopped by its rule or cap) and the MLE stand side by side."""
    z = mech.sample(x, rng)
    counts = np.bincount(z, minlength=mech.n_outputs).astype(float)
    noisy = counts / counts.sum()
    v, cond = inv_vector(mech, counts)
    est = {"inv-n": clip_normalize(v), "inv-p": project_simplex(v)}
    at = {}
    marks = set(int(c) for c in checkpoints)

    def watch(t, theta, L):
        if t in marks:
            at[t] = emd(truth, theta)

    if hasattr(mech, "inverse_counts"):  # k-RR: its O(k) structured block
        blocks = Observations.from_counts(mech, counts, domain).likelihood_blocks()
    else:
        # small dense channels (<= 280 x 280 here): the dense block's products are faster than
        # the structured blocks, which pay off on large grids and alphabets
        keep = counts > 0
        blocks = [DenseBlock(mech.channel()[:, keep], counts[keep])]
    res = em(blocks, mech.k, delta=delta, max_iter=max_iter, accelerate=accelerate, stop=stop,
             callback=watch if marks else None)
    est["ibu"] = res.theta
    if mle:
        est["mle"] = em(blocks, mech.k).theta  # certified accelerated maximum (the library's defaults)
    out = {"emd": {"noisy": emd(truth, noisy) if noisy.size == truth.size else None,
                   **{k: emd(truth, e) for k, e in est.items()}},
           "ibu_iterations": res.iterations, "ibu_converged": res.converged, "cond": cond,
           "ibu_emd_at": at}
    if keep_distributions:
        out["noisy"] = noisy
        out["estimates"] = est
    return out


def _summary(values) -> dict:
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "median": float(np.median(a)), "sd": float(a.std(ddof=1)) if a.size > 1 else 0.0,
            "q1": float(np.quantile(a, 0.25)), "q3": float(np.quantile(a, 0.75))}


def _sweep(data, spec_fmt, eps_list, runs, rng, progress, label, delta, max_iter, accelerate="none",
           stop="loglik"):
    domain, x, truth, emd = _setup(data)
    panel = {"data": data, "mechanism": spec_fmt, "eps": list(eps_list),
             "emd": {m: [] for m in ESTIMATORS}, "ibu_iterations": [], "ibu_unconverged": []}
    for eps in progress(eps_list, label):
        mech = parse(spec_fmt.format(eps=eps), domain)
        per = {m: [] for m in ESTIMATORS}
        iters, unconv = [], 0
        for _ in range(runs):
            r = run_once(mech, x, truth, rng, emd, domain, delta=delta, max_iter=max_iter,
                         accelerate=accelerate, stop=stop)
            for m in ESTIMATORS:
                per[m].append(r["emd"][m])
            iters.append(r["ibu_iterations"])
            unconv += not r["ibu_converged"]
        for m in ESTIMATORS:
            panel["emd"][m].append(per[m])
        panel["ibu_iterations"].append(float(np.mean(iters)))
        panel["ibu_unconverged"].append(unconv)
        panel.setdefault("epsilon_geo_from_channel", []).append(
            float(mech.epsilon_geo()) if "krr" not in spec_fmt else float(mech.epsilon_ldp()))
    panel["summary"] = {m: [_summary(v) for v in panel["emd"][m]] for m in ESTIMATORS}
    panel["ibu_best_fraction"] = [
        float(np.mean((np.asarray(panel["emd"]["ibu"][i]) <= np.asarray(panel["emd"]["inv-n"][i]))
                      & (np.asarray(panel["emd"]["ibu"][i]) <= np.asarray(panel["emd"]["inv-p"][i]))))
        for i in range(len(eps_list))]
    return panel


def _boxpanel(ax, panel, title):
    eps = panel["eps"]
    colors = {"ibu": "tab:blue", "inv-n": "tab:orange", "inv-p": "tab:green"}
    width = 0.25
    for j, m in enumerate(("ibu", "inv-n", "inv-p")):
        pos = np.arange(len(eps)) + (j - 1) * width
        bp = ax.boxplot(panel["emd"][m], positions=pos, widths=width * 0.9, patch_artist=True,
                        showfliers=False, manage_ticks=False,
                        medianprops={"color": "black"})
        for b in bp["boxes"]:
            b.set_facecolor(colors[m])
        ax.plot([], [], color=colors[m], lw=6, label=m.upper())
    # the metric level computed from each channel, where it differs from the nominal eps (the
    # exponential mechanism's is below it): "nominal (computed)"
    computed = panel.get("epsilon_geo_from_channel", [None] * len(eps))
    differs = any(c is not None and abs(c - e) > 1e-6 * e for c, e in zip(computed, eps))
    labels = [f"{e:g}\n({c:.3g})" if differs and c is not None else f"{e:g}" for e, c in zip(eps, computed)]
    ax.set_xticks(np.arange(len(eps)), labels, fontsize=7)
    ax.set_xlabel("eps (computed metric level)" if differs else "eps", fontsize=8)
    ax.set_ylabel("EMD (years)" if panel["data"] == "ages" else "EMD (km)", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


# ------------------------------------------------------------------------------------------
# fig1
# ------------------------------------------------------------------------------------------
def _fig1_compute(params, rng, progress):
    domain, x, truth, emd = _setup("ages")
    mech = parse(params["mechanism"], domain)
    runs = []
    first = None
    for _ in progress(range(params["runs"]), "runs"):
        r = run_once(mech, x, truth, rng, emd, domain, params["delta"], params["max_iter"],
                     keep_distributions=first is None, checkpoints=params["checkpoints"],
                     accelerate=params["accelerate"], stop=params["stop"], mle=params.get("mle", False))
        first = first or r
        runs.append(r)
    out = {"n": int(x.size), "truth": truth, "noisy": first["noisy"], "estimates": first["estimates"],
           "emd": first["emd"], "epsilon_geo_from_channel": mech.epsilon_geo(),
           "ibu_iterations": first["ibu_iterations"], "cond": first["cond"],
           **_spread_of_runs(runs, params)}
    return out


def _spread_of_runs(runs, params) -> dict:
    """Per-run EMDs, their means with 95 % run-to-run intervals, and IBU's EMD along the
    iterations (mean and interval at each checkpoint) -- figs. 1 and 8."""
    names = ("noisy",) + ESTIMATORS + (("mle",) if params.get("mle") else ())
    emd_runs = {m: [r["emd"][m] for r in runs] for m in names}
    along = {}
    for c in params["checkpoints"]:
        vals = [r["ibu_emd_at"].get(int(c)) for r in runs]
        if all(v is not None for v in vals):  # every run reached this iteration
            along[str(int(c))] = mean_interval(vals)
    return {"runs": len(runs), "emd_runs": emd_runs,
            "emd_mean": {m: float(np.mean(v)) for m, v in emd_runs.items()},
            "emd_interval": {m: mean_interval(v) for m, v in emd_runs.items()},
            "ibu_emd_at_iteration": runs[0]["ibu_emd_at"],
            "ibu_iterations_runs": [int(r["ibu_iterations"]) for r in runs],
            "ibu_converged_runs": [bool(r["ibu_converged"]) for r in runs],
            "ibu_emd_along_iterations": along}


def _closest_iteration(out, paper_value) -> dict:
    """The checkpoint whose mean EMD is closest to the paper's IBU number (which of the seed's
    unstated IBU settings its figure most likely used)."""
    along = out["ibu_emd_along_iterations"]
    if not along:
        return {}
    it = min(along, key=lambda c: abs(along[c]["mean"] - paper_value))
    return {"iteration": int(it), **along[it], "paper": paper_value}


# seed 001 Algorithm 1's stopping rule (delta 1e-6, cap 10^4), 20 runs (new reports of the same
# users) for the run-to-run spread; IBU's EMD recorded at these iterations and the certified MLE
# beside it: the seed does not say where its IBU stopped (figs. 1 and 8)
SINGLE_RUN = {"runs": 20, "delta": 1e-6, "max_iter": 10_000, "accelerate": "none", "stop": "loglik",
              "mle": True, "checkpoints": [10, 100, 300, 1000, 2000, 5000, 10_000]}


def _fig1_plot(results, params, path):
    shown = ESTIMATORS + (("mle",) if "mle" in results["estimates"] else ())
    series = {"truth": results["truth"], "noisy": results["noisy"],
              **{m.upper(): results["estimates"][m] for m in shown}}
    notes = {("truth" if k == "truth" else k.upper() if k in shown else k): f"EMD {v:.3f} years"
             for k, v in results["emd"].items()}
    distributions_figure(np.arange(100), {k: np.asarray(v) for k, v in series.items()}, path,
                         title=f"UCI Adult ages (n={results['n']}), {params['mechanism']} (seed 001 Fig. 1)",
                         xlabel="age", notes=notes)


register_experiment(Experiment(
    name="fig1",
    description="Adult ages 0..99 under the linear geometric mechanism eps=0.05 (truncated to 0..99): "
                "INV-N vs INV-P vs IBU",
    defaults={"mechanism": "geometric(eps=0.05,lo=0,hi=99)", **SINGLE_RUN},
    quick={"max_iter": 2_000, "runs": 2},
    compute=_fig1_compute,
    plot=_fig1_plot,
    reference="seed 001 section 7.1, Fig. 1",
))


# ------------------------------------------------------------------------------------------
# fig8
# ------------------------------------------------------------------------------------------
def _fig8_compute(params, rng, progress):
    domain, x, truth, emd = _setup("locations")
    mech = parse(params["mechanism"], domain)
    runs, first = [], None
    for _ in progress(range(params["runs"]), "runs"):
        r = run_once(mech, x, truth, rng, emd, domain, params["delta"], params["max_iter"],
                     keep_distributions=first is None, checkpoints=params["checkpoints"],
                     accelerate=params["accelerate"], stop=params["stop"], mle=params.get("mle", False))
        first = first or r
        runs.append(r)
    out = {"n": int(x.size), "grid": {"nrows": domain.nrows, "ncols": domain.ncols, "cell_km": domain.cell_km,
                                      "lat0": domain.lat0, "lon0": domain.lon0},
           "truth": truth, "noisy": first["noisy"], "estimates": first["estimates"], "emd": first["emd"],
           "epsilon_geo_from_channel": mech.epsilon_geo(), "ibu_iterations": first["ibu_iterations"],
           "cond": first["cond"], **_spread_of_runs(runs, params),
           "paper_emd": {"noisy": 0.7658, "inv-p": 0.5862, "inv-n": 0.7832, "ibu": 0.16995}}
    out["closest_to_paper_ibu"] = _closest_iteration(out, 0.16995)
    return out


def _fig8_plot(results, params, path):
    g = results["grid"]
    maps = {"original": results["truth"], "noisy": results["noisy"],
            "INV-N": results["estimates"]["inv-n"], "INV-P": results["estimates"]["inv-p"],
            "IBU": results["estimates"]["ibu"]}
    emds = {"noisy": results["emd"]["noisy"], "INV-N": results["emd"]["inv-n"],
            "INV-P": results["emd"]["inv-p"], "IBU": results["emd"]["ibu"]}
    if "mle" in results["estimates"]:
        maps["MLE"] = results["estimates"]["mle"]
        emds["MLE"] = results["emd"]["mle"]
    vmax = max(float(np.max(v)) for v in maps.values())
    fig, axes = plt.subplots(1, len(maps), figsize=(3 * len(maps), 4.6))
    extent = (0, g["ncols"] * g["cell_km"], 0, g["nrows"] * g["cell_km"])
    for ax, (name, dist) in zip(axes, maps.items()):
        im = ax.imshow(np.asarray(dist).reshape(g["nrows"], g["ncols"]), origin="lower", extent=extent,
                       cmap="hot_r", vmin=0, vmax=vmax)
        ax.set_title(name + (f"\nEMD = {emds[name]:.4f} km" if name in emds else "\n"), fontsize=9)
        ax.set_xlabel("km east", fontsize=8)
    axes[0].set_ylabel("km north", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.7, label="probability")
    fig.suptitle(f"Gowalla Manhattan check-ins (n={results['n']}), {params['mechanism']} (seed 001 Fig. 8)",
                 fontsize=10)
    save(fig, path)


register_experiment(Experiment(
    name="fig8",
    description="Gowalla check-ins on the 20x14 Manhattan grid (0.5 km) under the truncated planar "
                "geometric mechanism eps=1.0: original, noisy, INV-N, INV-P, IBU with EMDs",
    defaults={"mechanism": "planar-geometric(eps=1.0)", **SINGLE_RUN},
    quick={"max_iter": 2_000, "runs": 2},
    compute=_fig8_compute,
    plot=_fig8_plot,
    reference="seed 001 section 7.2, Fig. 8",
))


# ------------------------------------------------------------------------------------------
# fig9
# ------------------------------------------------------------------------------------------
FIG9_PANELS = [
    ("a", "ages", "geometric(eps={eps},lo=0,hi=99)", "linear_eps", "age data, linear geometric"),
    ("b", "locations", "planar-geometric(eps={eps})", "planar_eps", "location data, planar geometric"),
    ("c", "ages", "laplace(eps={eps},bins=1.0,lo=0,hi=99)", "linear_eps", "age data, linear Laplace"),
    ("d", "locations", "planar-laplace(eps={eps})", "planar_eps", "location data, planar Laplace"),
    ("e", "ages", "exponential(eps={eps})", "linear_eps", "age data, exponential"),
    ("f", "locations", "exponential(eps={eps})", "planar_eps", "location data, exponential"),
]


def _fig9_compute(params, rng, progress):
    out = {}
    for key, data, spec, eps_key, title in FIG9_PANELS:
        if key not in params["panels"]:
            continue
        out[key] = _sweep(data, spec, params[eps_key], params["runs"], rng, progress,
                          f"fig9({key}) {title}", params["delta"], params["max_iter"],
                          params["accelerate"], params["stop"])
        out[key]["title"] = title
    return out


def _fig9_plot(results, params, path):
    keys = [k for k, *_ in FIG9_PANELS if k in results]
    fig, axes = plt.subplots(3, 2, figsize=(11, 11))
    for ax, (key, *_rest) in zip(axes.ravel(), FIG9_PANELS):
        if key in results:
            _boxpanel(ax, results[key], f"({key}) {results[key]['title']}")
        else:
            ax.axis("off")
    fig.suptitle(f"EMD to the original distribution, {params['runs']} run(s) per eps (seed 001 Fig. 9)", fontsize=10)
    fig.tight_layout()
    save(fig, path)
    return keys


register_experiment(Experiment(
    name="fig9",
    description="EMD of IBU / INV-N / INV-P over eps for geometric, Laplace and exponential mechanisms "
                "on ages (eps 0.01..0.3) and Manhattan locations (eps 0.2..6.0)",
    defaults={"runs": 100, "linear_eps": [0.01, 0.02, 0.05, 0.1, 0.2, 0.3],
              "planar_eps": [0.2, 0.5, 1.0, 2.0, 4.0, 6.0], "panels": ["a", "b", "c", "d", "e", "f"],
              "delta": 1e-6, "max_iter": 10_000, "accelerate": "none", "stop": "loglik"},
    quick={"runs": 2, "linear_eps": [0.05, 0.3], "planar_eps": [0.5, 4.0], "max_iter": 2_000},
    compute=_fig9_compute,
    plot=_fig9_plot,
    reference="seed 001 section 7.3, Fig. 9",
))


# ------------------------------------------------------------------------------------------
# fig10
# ------------------------------------------------------------------------------------------
def _fig10_compute(params, rng, progress):
    out = {}
    for key, data in (("a", "ages"), ("b", "locations")):
        out[key] = _sweep(data, "krr(eps={eps})", params["eps"], params["runs"], rng, progress,
                          f"fig10({key}) k-RR on {data}", params["delta"], params["max_iter"],
                          params["accelerate"], params["stop"])
        out[key]["title"] = f"{'age' if data == 'ages' else 'location'} data, k-RR"
    return out


def _fig10_plot(results, params, path):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, key in zip(axes, ("a", "b")):
        _boxpanel(ax, results[key], f"({key}) {results[key]['title']}")
    fig.suptitle(f"EMD to the original distribution under k-RR, {params['runs']} run(s) per eps "
                 "(seed 001 Fig. 10)", fontsize=10)
    fig.tight_layout()
    save(fig, path)


register_experiment(Experiment(
    name="fig10",
    description="EMD of IBU / INV-N / INV-P under k-RR eps 0.5..5 on ages and Manhattan locations",
    defaults={"runs": 100, "eps": [0.5, 1.0, 2.0, 3.0, 4.0, 5.0], "delta": 1e-6, "max_iter": 10_000,
              "accelerate": "none", "stop": "loglik"},
    quick={"runs": 2, "eps": [0.5, 5.0], "max_iter": 2_000},
    compute=_fig10_compute,
    plot=_fig10_plot,
    reference="seed 001 section 7.4, Fig. 10",
))
