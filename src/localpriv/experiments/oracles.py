"""Reproductions of issue 4: IBU utility gain for LDP frequency oracles (seed 002) and basic
RAPPOR (seed 001 Figs. 11-12).

* ``dbsec-one-time`` / ``dbsec-longitudinal``: for every mechanism, data distribution, ``k``,
  ``n`` and ``eps``, the gain of IBU on support counts over MI-N,
  ``gain = 100 (err_MI - err_IBU) / err_MI`` in MSE and MAE, averaged over ``k, n, eps`` and runs
  like seed 002's summary tables; plus one table with exact-likelihood IBU as an extra column
  (on a smaller configuration, its EM runs on individual reports).
* ``fig11``: basic RAPPOR (SUE) on ``{0..9}``, ``n = 10^5``, binomial(9, 0.5) and uniform on
  ``{3,4,5,6}``: the IBU estimate at ``eps = 0.5``.
* ``fig12``: EMD of Rappor's estimator with normalization / projection (the seed's INV-N / INV-P
  for Rappor) and IBU over a range of eps, 100 runs each.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from ..datasets import adult_ages
from ..estimators.em import em
from ..estimators.oracles import exact_loglik, ibu_exact, pure_parameters, rappor
from ..mechanisms.krr import KRR
from ..mechanisms import parse
from ..mechanisms.base import LikelihoodBlock
from ..mechanisms.unary import pack_bits
from ..metrics import emd_line
from ..observations import ObservationBlock, Observations
from ..plotting import plt, save
from ..projection import clip_normalize
from .runner import Experiment, register_experiment

DISTRIBUTIONS = ["gauss", "exp", "unif", "poiss", "triang", "real"]
ONE_TIME = {"GRR": "krr(k={k},eps={e})", "SUE": "sue(k={k},eps={e})", "OUE": "oue(k={k},eps={e})",
            "SS": "ss(k={k},eps={e})", "THE": "the(k={k},eps={e})", "BLH": "blh(k={k},eps={e})",
            "OLH": "olh(k={k},eps={e})"}
LONGITUDINAL = {"L-GRR": "lgrr", "L-SUE": "lsue", "L-OUE": "loue", "L-SOUE": "lsoue", "L-OSUE": "losue",
                "L-BLH": "lblh", "L-OLH": "lolh"}

# seed 002 summary tables (averaged IBU gain in %, MSE / MAE), for docs and the JSON
PAPER_ONE_TIME = {
    "gauss": [1, 1, 13, 7, 10, 6, 3, 1, 13, 7, 16, 9, 11, 7], "exp": [16, 11, 26, 15, 27, 16, 19, 11, 26, 15, 16, 10, 27, 16],
    "unif": [0, 0, 29, 21, 20, 14, 14, 10, 31, 22, 57, 43, 18, 12], "poiss": [39, 28, 41, 26, 44, 28, 41, 27, 41, 27, 14, 6, 46, 30],
    "triang": [0, 0, 21, 13, 15, 9, 10, 6, 23, 14, 36, 21, 15, 9], "real": [31, 21, 40, 23, 42, 25, 34, 19, 42, 25, 21, 11, 44, 27],
}  # column order GRR SUE OUE SS THE BLH OLH
PAPER_ONE_TIME_ORDER = ["GRR", "SUE", "OUE", "SS", "THE", "BLH", "OLH"]
PAPER_LONG = {
    "gauss": [14, 5, 13, 8, 9, 5, 10, 7, 12, 7, 2, 0, 7, 4], "exp": [4, 1, 27, 16, 26, 15, 27, 16, 27, 16, 4, 2, 20, 12],
    "unif": [36, 25, 31, 22, 12, 8, 16, 11, 18, 13, 54, 43, 21, 16], "poiss": [5, 2, 43, 28, 48, 32, 49, 32, 44, 29, 11, 6, 42, 30],
    "triang": [28, 17, 24, 15, 11, 7, 13, 9, 16, 10, 26, 14, 14, 9], "real": [4, 1, 43, 25, 43, 27, 44, 27, 43, 25, 9, 4, 34, 22],
}
PAPER_LONG_ORDER = list(LONGITUDINAL)


def distribution(name: str, k: int) -> np.ndarray:
    """The data distributions on ``{0..k-1}`` (our parametrization; seed 002 names them only)."""
    i = np.arange(k)
    if name == "gauss":
        f = stats.norm.pdf(i, loc=(k - 1) / 2, scale=max(k / 8, 0.5))
    elif name == "exp":
        f = stats.expon.pdf(i, scale=max(k / 5, 0.5))
    elif name == "unif":
        f = np.ones(k)
    elif name == "poiss":
        f = stats.poisson.pmf(i, mu=max(k / 4, 0.5))
    elif name == "triang":
        f = stats.triang.pdf((i + 0.5) / k, c=0.5)
    elif name == "real":  # UCI Adult ages (17..90) in k equal-width bins
        f = np.histogram(adult_ages(), bins=k, range=(17, 91))[0].astype(float)
    else:
        raise ValueError(name)
    return f / f.sum()


class _DiagBlock(LikelihoodBlock):
    """Seed 002's support-count model ``A = (p* - q*) I + q*`` on the k support counts (O(k))."""

    def __init__(self, p, q, counts):
        self.a, self.b = float(p), float(q)
        self.counts = np.asarray(counts, dtype=float)
        self.k = self.counts.size

    def forward(self, theta):
        return self.b * theta.sum() + (self.a - self.b) * theta

    def backward(self, w):
        return self.b * w.sum() + (self.a - self.b) * w


def _errors(est, truth):
    d = est - truth
    return float(np.mean(d ** 2)), float(np.mean(np.abs(d)))


def _one_config(spec, truth, n, rng, delta, max_iter, exact=False, start_at_mi=True):
    k = truth.size
    mech = parse(spec)
    x = rng.choice(k, size=n, p=truth)
    f = np.bincount(x, minlength=k) / n  # the users' actual histogram is the target
    reports = mech.sample(x, rng)
    p, q = pure_parameters(mech)
    # support counts straight from the raw reports (grouping identical reports is only needed
    # by the exact likelihood)
    C = (np.bincount(reports, minlength=k).astype(float) if isinstance(mech, KRR)
         else mech.support_counts(reports))
    mi_n = clip_normalize((C / n - q) / (p - q))
    # IBU started at MI-N mixed with 1% uniform (full support, seed 001 Algorithm 1 allows any
    # such start): same maximum, reached in far fewer iterations than from the uniform start
    start = 0.99 * mi_n + 0.01 / k if start_at_mi else None
    ibu = em([_DiagBlock(p, q, C)], k, theta0=start, delta=delta, max_iter=max_iter).theta
    out = {"mi": _errors(mi_n, f), "ibu": _errors(ibu, f)}
    if exact:
        obs = Observations.from_reports(mech, reports)
        ex = ibu_exact(obs, delta=delta, max_iter=max_iter)
        out["exact"] = _errors(ex.distribution, f)
        out["loglik"] = {"mi": exact_loglik(obs, mi_n), "ibu": exact_loglik(obs, ibu), "exact": ex.loglik}
    return out


def _gain(a, b):
    return 100.0 * (a - b) / a if a > 0 else 0.0


def _dbsec_task(args):
    """All (k, n, eps, run) configurations of one (mechanism, distribution): one worker task."""
    mech_name, dist, long, seed, params = args
    make_spec = _long_spec if long else _one_time_spec
    rng = np.random.default_rng(seed)
    g_mse, g_mae, detail = [], [], []
    for k in params["k"]:
        truth = distribution(dist, k)
        for n in params["n"]:
            for e in params["eps"]:
                for _ in range(params["runs"]):
                    r = _one_config(make_spec(mech_name, k, e), truth, n, rng, params["delta"], params["max_iter"],
                                    start_at_mi=False)
                    g_mse.append(_gain(r["mi"][0], r["ibu"][0]))
                    g_mae.append(_gain(r["mi"][1], r["ibu"][1]))
                    detail.append({"mechanism": mech_name, "dist": dist, "k": k, "n": n, "eps": e,
                                   "mse_mi": r["mi"][0], "mse_ibu": r["ibu"][0],
                                   "mae_mi": r["mi"][1], "mae_ibu": r["ibu"][1]})
    return mech_name, dist, float(np.mean(g_mse)), float(np.mean(g_mae)), detail


def _dbsec(params, rng, progress, mechs, long):
    make_spec = _long_spec if long else _one_time_spec
    tasks = [(m, d, long, int(rng.integers(2 ** 62)), params) for m in mechs for d in params["distributions"]]
    workers = int(params.get("workers", 1))
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(progress(pool.map(_dbsec_task, tasks), "mechanism x distribution", total=len(tasks)))
    else:
        results = [_dbsec_task(t) for t in progress(tasks, "mechanism x distribution")]
    table, detail = {}, []
    for mech_name, dist, gm, ga, det in results:
        table.setdefault(dist, {})[mech_name] = {"mse_gain": gm, "mae_gain": ga}
        detail.extend(det)
    avg = {m: {key: float(np.mean([table[d][m][key] for d in table])) for key in ("mse_gain", "mae_gain")}
           for m in mechs}
    table["avg"] = avg
    # exact-likelihood column on a smaller configuration
    ex = params["exact"]
    exact_table = {}
    for mech_name in progress(mechs, "exact-likelihood IBU"):
        rows = []
        for dist in ex["distributions"]:
            truth = distribution(dist, ex["k"])
            for e in ex["eps"]:
                rows.append(_one_config(make_spec(mech_name, ex["k"], e), truth, ex["n"], rng,
                                        params["delta"], ex["max_iter"], exact=True, start_at_mi=False))
        exact_table[mech_name] = {
            "mse_mi": float(np.mean([r["mi"][0] for r in rows])), "mse_ibu_support": float(np.mean([r["ibu"][0] for r in rows])),
            "mse_ibu_exact": float(np.mean([r["exact"][0] for r in rows])),
            "mae_mi": float(np.mean([r["mi"][1] for r in rows])), "mae_ibu_support": float(np.mean([r["ibu"][1] for r in rows])),
            "mae_ibu_exact": float(np.mean([r["exact"][1] for r in rows])),
            "loglik_gain_exact_over_support": float(np.mean([r["loglik"]["exact"] - r["loglik"]["ibu"] for r in rows])),
        }
    return {"table": table, "exact_table": exact_table, "detail": detail}


def _one_time_spec(name, k, e):
    return ONE_TIME[name].format(k=k, e=float(e))


def _long_spec(name, k, e):
    return f"{LONGITUDINAL[name]}(k={k},eps_perm={float(e)},eps_1={float(e) * 0.5})"


def _compute_one_time(params, rng, progress):
    out = _dbsec(params, rng, progress, params["mechanisms"], long=False)
    out["paper"] = {"order": PAPER_ONE_TIME_ORDER, "rows": PAPER_ONE_TIME}
    return out


def _compute_long(params, rng, progress):
    out = _dbsec(params, rng, progress, params["mechanisms"], long=True)
    out["paper"] = {"order": PAPER_LONG_ORDER, "rows": PAPER_LONG}
    return out


def _plot_dbsec(results, params, path):
    table = results["table"]
    mechs = params["mechanisms"]
    dists = [d for d in table if d != "avg"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, key in zip(axes, ("mse_gain", "mae_gain")):
        w = 0.8 / len(dists)
        for i, d in enumerate(dists):
            ax.bar(np.arange(len(mechs)) + i * w, [table[d][m][key] for m in mechs], w, label=d)
        ax.set_xticks(np.arange(len(mechs)) + 0.4 - w / 2, mechs)
        ax.set_title(f"IBU gain over MI-N ({key[:3].upper()}), %")
        ax.axhline(0, color="k", lw=0.5)
    axes[0].legend(fontsize=7)
    save(fig, path)


_DB_DEFAULTS = {"distributions": DISTRIBUTIONS, "k": [2, 50, 100, 200], "n": [20000, 100000],
                "eps": [1.0, 2.0, 4.0], "runs": 1, "delta": 1e-6, "max_iter": 100000, "workers": 2,
                "exact": {"k": 20, "n": 10000, "eps": [1.0, 2.0], "distributions": ["gauss", "real"], "max_iter": 20000}}
_DB_QUICK = {"distributions": ["gauss", "poiss"], "k": [10], "n": [5000], "eps": [1.0], "runs": 2, "workers": 1,
             "exact": {"k": 8, "n": 2000, "eps": [1.0], "distributions": ["gauss"], "max_iter": 2000}}

register_experiment(Experiment(
    name="dbsec-one-time",
    description="IBU (support counts) gain over MI-N for one-time LDP frequency oracles, + exact-likelihood IBU",
    defaults={**_DB_DEFAULTS, "mechanisms": list(ONE_TIME)},
    compute=_compute_one_time, plot=_plot_dbsec, quick=_DB_QUICK,
    reference="seed 002 (one-time summary table)",
))
register_experiment(Experiment(
    name="dbsec-longitudinal",
    description="IBU (support counts) gain over MI-N for longitudinal LDP frequency oracles (eps_1 = eps_perm/2)",
    defaults={**_DB_DEFAULTS, "mechanisms": list(LONGITUDINAL)},
    compute=_compute_long, plot=_plot_dbsec, quick=_DB_QUICK,
    reference="seed 002 (longitudinal summary table)",
))


# --------------------------------------------------------------------------------------------
def _fig_truth(name):
    if name == "binomial":
        return stats.binom.pmf(np.arange(10), 9, 0.5)
    f = np.zeros(10)
    f[3:7] = 0.25
    return f


def _rappor_obs(mech, x, rng):
    """Reports -> counts over the 2^k outputs -> observations with packed bit-vector reports."""
    idx = mech.output_index(mech.sample(x, rng))
    counts = np.bincount(idx, minlength=2 ** mech.k)
    live = np.flatnonzero(counts)
    bits = (live[:, None] >> np.arange(mech.k)[None, :]) & 1
    return Observations([ObservationBlock(mech, pack_bits(bits), counts[live])])


def _compute_fig11(params, rng, progress):
    mech = parse(f"sue(k=10,eps={float(params['eps'])})")
    out = {}
    for name in progress(params["distributions"], "distributions"):
        truth = _fig_truth(name)
        x = rng.choice(10, size=params["n"], p=truth)
        obs = _rappor_obs(mech, x, rng)
        est = ibu_exact(obs, delta=params["delta"], max_iter=params["max_iter"])
        f = np.bincount(x, minlength=10) / x.size
        out[name] = {"truth": f, "ibu": est.distribution, "emd": emd_line(f, est.distribution),
                     "iterations": est.iterations, "converged": est.converged}
    return out


def _plot_fig11(results, params, path):
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.5))
    for ax, (name, r) in zip(np.atleast_1d(axes), results.items()):
        ax.bar(np.arange(10) - 0.2, r["truth"], 0.4, label="original")
        ax.bar(np.arange(10) + 0.2, r["ibu"], 0.4, label="IBU")
        ax.set_title(f"{name}, RAPPOR eps={params['eps']}, EMD {r['emd']:.3f}")
        ax.legend()
    save(fig, path)


def _compute_fig12(params, rng, progress):
    out = {}
    for name in params["distributions"]:
        truth = _fig_truth(name)
        res = {"eps": params["eps"], "rappor-n": [], "rappor-p": [], "ibu": []}
        for e in progress(params["eps"], f"{name}: eps"):
            mech = parse(f"sue(k=10,eps={float(e)})")
            emds = {"rappor-n": [], "rappor-p": [], "ibu": []}
            for _ in range(params["runs"]):
                x = rng.choice(10, size=params["n"], p=truth)
                f = np.bincount(x, minlength=10) / x.size
                obs = _rappor_obs(mech, x, rng)
                emds["rappor-n"].append(emd_line(f, rappor(obs, post="n").distribution))
                emds["rappor-p"].append(emd_line(f, rappor(obs, post="p").distribution))
                emds["ibu"].append(emd_line(f, ibu_exact(obs, delta=params["delta"]).distribution))
            for key, v in emds.items():
                res[key].append({"mean": float(np.mean(v)), "std": float(np.std(v))})
        out[name] = res
    return out


def _plot_fig12(results, params, path):
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.5))
    for ax, (name, r) in zip(np.atleast_1d(axes), results.items()):
        for key, label in [("rappor-n", "INV-N (Rappor)"), ("rappor-p", "INV-P (Rappor)"), ("ibu", "IBU")]:
            ax.errorbar(r["eps"], [v["mean"] for v in r[key]], yerr=[v["std"] for v in r[key]], label=label, capsize=2)
        ax.set_xlabel("eps")
        ax.set_ylabel("EMD")
        ax.set_title(name)
        ax.legend()
    save(fig, path)


register_experiment(Experiment(
    name="fig11", description="IBU estimate after basic RAPPOR on {0..9}, n=10^5, eps=0.5",
    defaults={"n": 100000, "eps": 0.5, "distributions": ["binomial", "uniform3456"], "delta": 1e-6,
              "max_iter": 100000},
    compute=_compute_fig11, plot=_plot_fig11, quick={"n": 5000}, reference="seed 001 Fig. 11",
))
register_experiment(Experiment(
    name="fig12", description="EMD of Rappor's INV-N / INV-P and IBU after basic RAPPOR, 100 runs per eps",
    defaults={"n": 100000, "eps": [0.5, 1.0, 2.0, 3.0, 4.0, 5.0], "runs": 100,
              "distributions": ["binomial", "uniform3456"], "delta": 1e-6},
    compute=_compute_fig12, plot=_plot_fig12, quick={"n": 5000, "eps": [0.5, 2.0], "runs": 3},
    reference="seed 001 Fig. 12",
))
