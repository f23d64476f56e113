"""Reproductions: IBU utility gain for LDP frequency oracles (seed 002) and basic
RAPPOR (seed 001 Figs. 11-12).

* ``dbsec-one-time`` / ``dbsec-longitudinal`` (seed 002's two summary tables): for every
  mechanism, data distribution, ``k``, ``n`` and ``eps``, the gain of IBU on support counts over
  MI with normalization (MI-N, seed 002's "MI re-normalization"),
  ``gain = 100 (err_MI - err_IBU) / err_MI`` in MSE and MAE. Seed 002 only names its settings;
  the procedure below is our reading of the authors' public experiment notebook for this study
  (multi-freq-ldpy ``tutorials/5_IBU_Utility_Gain_Single_Frequency_Estimation``), re-implemented
  from its description:

  - data: ``n`` continuous values (Gaussian(1000, 100), exponential(1), uniform(100, 10000),
    Poisson(5), triangular(100, 4500, 10000); real = UCI Adult ages, where the authors used ACS
    income) put into ``k`` equal-width bins over the sample's range (Poisson and exponential
    data leave most bins nearly empty); the target is the users' actual histogram;
  - IBU as seed 002 runs it: plain EM from the uniform distribution, stopped when
    ``max|f(t) - f(t-1)| < 1e-12`` or after 10,000 iterations (it usually reaches the cap);
  - the gain of a configuration ``(k, n, eps)`` (errors averaged over the runs first) is clipped
    at 0 before averaging over configurations, as in that notebook (``.clip(0)``).

  Extra columns, not in the paper: the unclipped average and the pooled gain
  (``1 - sum err_IBU / sum err_MI``), and the same gains for IBU run to its maximum (the
  support-count maximum in closed form, :func:`localpriv.estimators.oracles.support_mle`). A
  separate table adds exact-likelihood IBU (the true MLE from the individual reports) on a
  smaller configuration. ``data="pmf"`` instead draws users from our fixed parametric pmfs
  (:func:`distribution`), the first session's choice.
* ``fig11``: basic RAPPOR (SUE) on ``{0..9}``, ``n = 10^5``, binomial(9, 0.5) and uniform on
  ``{3,4,5,6}``: the IBU estimate at ``eps = 0.5``, ``runs`` data sets (the figure draws the first
  with the band of all runs; the EMD has its interval over the runs).
* ``fig12``: EMD of Rappor's estimator with normalization / projection (the seed's INV-N / INV-P
  for Rappor) and IBU over a range of eps, 100 runs each.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from localpriv.data.datasets import adult_ages
from localpriv.data.observations import ObservationBlock, Observations
from localpriv.estimators.em import em
from localpriv.estimators.oracles import exact_loglik, ibu_exact, pure_parameters, rappor, support_mle
from localpriv.inference.metrics import emd_line
from localpriv.inference.plotting import plt, save
from localpriv.likelihood.blocks import LikelihoodBlock
from localpriv.mechanisms import parse
from localpriv.mechanisms.krr import KRR
from localpriv.mechanisms.unary import pack_bits
from localpriv.utils.simplex import clip_normalize
from reproductions.runner import Experiment, register_experiment

DISTRIBUTIONS = ["gauss", "exp", "unif", "poiss", "triang", "real"]
ONE_TIME = {"GRR": "krr(k={k},eps={e})", "SUE": "sue(k={k},eps={e})", "OUE": "oue(k={k},eps={e})",
            "SS": "ss(k={k},eps={e})", "THE": "the(k={k},eps={e})", "BLH": "blh(k={k},eps={e})",
            "OLH": "olh(k={k},eps={e})"}
LONGITUDINAL = {"L-GRR": "lgrr", "L-SUE": "lsue", "L-OUE": "loue", "L-SOUE": "lsoue", "L-OSUE": "losue",
                "L-BLH": "lblh", "L-OLH": "lolh"}

# seed 002 summary tables (averaged IBU gain in %, MSE / MAE), for docs and the JSON
PAPER_ONE_TIME = {
    "gauss": [1, 1, 13, 7, 10, 6, 3, 1, 13, 7, 16, 9, 11, 7],
    "exp": [16, 11, 26, 15, 27, 16, 19, 11, 26, 15, 16, 10, 27, 16],
    "unif": [0, 0, 29, 21, 20, 14, 14, 10, 31, 22, 57, 43, 18, 12],
    "poiss": [39, 28, 41, 26, 44, 28, 41, 27, 41, 27, 14, 6, 46, 30],
    "triang": [0, 0, 21, 13, 15, 9, 10, 6, 23, 14, 36, 21, 15, 9],
    "real": [31, 21, 40, 23, 42, 25, 34, 19, 42, 25, 21, 11, 44, 27],
}  # column order GRR SUE OUE SS THE BLH OLH
PAPER_ONE_TIME_ORDER = ["GRR", "SUE", "OUE", "SS", "THE", "BLH", "OLH"]
PAPER_LONG = {
    "gauss": [14, 5, 13, 8, 9, 5, 10, 7, 12, 7, 2, 0, 7, 4],
    "exp": [4, 1, 27, 16, 26, 15, 27, 16, 27, 16, 4, 2, 20, 12],
    "unif": [36, 25, 31, 22, 12, 8, 16, 11, 18, 13, 54, 43, 21, 16],
    "poiss": [5, 2, 43, 28, 48, 32, 49, 32, 44, 29, 11, 6, 42, 30],
    "triang": [28, 17, 24, 15, 11, 7, 13, 9, 16, 10, 26, 14, 14, 9],
    "real": [4, 1, 43, 25, 43, 27, 44, 27, 43, 25, 9, 4, 34, 22],
}
PAPER_LONG_ORDER = list(LONGITUDINAL)
#: seed 002's overall averages (MSE, MAE)
PAPER_AVG = {"one-time": (24, 15), "longitudinal": (23, 14)}


def distribution(name: str, k: int) -> np.ndarray:
    """Fixed parametric pmfs on ``{0..k-1}`` (``data="pmf"``; the first session's choice)."""
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


def continuous_values(name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` raw values of distribution ``name`` (``data="binned"``; parameters of the authors' notebook)."""
    if name == "gauss":
        return rng.normal(1000.0, 100.0, n)
    if name == "exp":
        return rng.exponential(1.0, n)
    if name == "unif":
        return rng.uniform(100.0, 10000.0, n)
    if name == "poiss":
        return rng.poisson(5.0, n).astype(float)
    if name == "triang":
        return rng.triangular(100.0, 4500.0, 10000.0, n)
    if name == "real":
        return rng.choice(adult_ages(), size=n).astype(float)
    raise ValueError(name)


def equal_width_bins(v: np.ndarray, k: int) -> np.ndarray:
    """Bin index in ``0..k-1`` of each value for ``k`` equal-width bins over ``[min v, max v]``."""
    lo, hi = float(v.min()), float(v.max())
    if hi <= lo:
        return np.zeros(v.size, dtype=np.int64)
    return np.minimum(((v - lo) * (k / (hi - lo))).astype(np.int64), k - 1)


def notebook_bins(v: np.ndarray, k: int) -> np.ndarray:
    """Bin index in ``0..k-1`` as the authors' notebook bins: ``k + 1`` equal-width bins over
    ``[min v, max v]`` (``np.histogram(v, bins=k+1)``'s edges ``d_0 < ... < d_{k+1}``), the first
    ``k - 1`` kept and the last two merged: ``i`` for ``d_i <= v < d_{i+1}`` (``i < k - 1``), else
    ``k - 1``. The last bin is twice as wide as the others."""
    lo, hi = float(v.min()), float(v.max())
    if hi <= lo:
        return np.zeros(v.size, dtype=np.int64)
    edges = np.histogram_bin_edges(v, bins=k + 1)
    return np.minimum(np.searchsorted(edges, v, side="right") - 1, k - 1).astype(np.int64)


def users(name: str, k: int, n: int, data: str, seed) -> np.ndarray:
    """The ``n`` users' values on ``{0..k-1}``; for ``data="notebook"`` (the authors' binning,
    :func:`notebook_bins`) and ``data="binned"`` (``k`` equal-width bins) the same raw sample (drawn
    from ``seed``) is binned for every ``k``, as in the authors' notebook."""
    rng = np.random.default_rng(seed)
    if data == "notebook":
        return notebook_bins(continuous_values(name, n, rng), k)
    if data == "binned":
        return equal_width_bins(continuous_values(name, n, rng), k)
    if data == "pmf":
        return rng.choice(k, size=n, p=distribution(name, k))
    raise ValueError(f"data must be 'notebook', 'binned' or 'pmf', got {data!r}")


class DiagBlock(LikelihoodBlock):
    """Seed 002's support-count model ``A = (p* - q*) I + q*`` for ``B`` independent count vectors
    at once: a block-diagonal channel on ``B`` stacked ``k``-vectors, O(Bk) per product.

    EM keeps each block's total mass at its share of the counts (the channel does not mix
    blocks), so EM on the stack started from ``share_b * uniform`` moves every block exactly as
    separate IBU runs would: B IBUs in one run of the EM engine.
    """

    def __init__(self, p, q, counts):
        C = np.atleast_2d(np.asarray(counts, dtype=float))
        self.shape = C.shape
        self.a = (np.broadcast_to(np.asarray(p, dtype=float), (C.shape[0],)) -
                  np.broadcast_to(np.asarray(q, dtype=float), (C.shape[0],)))[:, None]
        self.b = np.broadcast_to(np.asarray(q, dtype=float), (C.shape[0],))[:, None]
        self.counts = C.ravel()
        self.k = C.size

    def forward(self, theta):
        t = theta.reshape(self.shape)
        return (self.b * t.sum(axis=1, keepdims=True) + self.a * t).ravel()

    backward = forward  # the channel is symmetric


def seed_ibu(C, p, q, *, max_iter: int = 10_000, tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """Seed 002's IBU for each row of ``C`` (``B x k`` support counts; ``p``, ``q`` length ``B``):
    EM from the uniform distribution until ``max|f(t) - f(t-1)| < tol`` or ``max_iter`` iterations.

    Returns the ``B x k`` estimates and, per row, whether the stacked run reached the cap (one
    flag for the whole stack: all rows share one stopping test, with ``tol`` scaled by the smallest
    block share, so no row stops earlier than it would alone; a row that converged earlier just
    stays at its fixed point).
    """
    C = np.atleast_2d(np.asarray(C, dtype=float))
    B, k = C.shape
    share = C.sum(axis=1) / C.sum()
    theta0 = np.repeat(share / k, k)
    res = em([DiagBlock(p, q, C)], B * k, theta0=theta0, delta=tol * float(share.min()), max_iter=max_iter,
             stop="max_abs", accelerate="none")  # seed 002's plain IBU, pinned
    est = res.theta.reshape(B, k)
    return est / est.sum(axis=1, keepdims=True), np.full(B, not res.converged)


def _errors(est, truth):
    d = est - truth
    return float(np.mean(d ** 2)), float(np.mean(np.abs(d)))


def _spec(name, k, e, long):
    if long:
        return f"{LONGITUDINAL[name]}(k={k},eps_perm={float(e)},eps_1={float(e) * 0.5})"
    return ONE_TIME[name].format(k=k, e=float(e))


def _support(mech, x, rng):
    """Reports of ``x`` and their support counts (straight from the raw reports)."""
    reports = mech.sample(x, rng)
    C = (np.bincount(reports, minlength=mech.k).astype(float) if isinstance(mech, KRR)
         else mech.support_counts(reports))
    return reports, C


def _dbsec_task(args):
    """All (n, k, eps, run) configurations of one (mechanism, distribution): one worker task.

    Per configuration: errors of MI-N, seed 002's IBU and the support-count maximum, averaged
    over the runs (each run: new reports of the same users)."""
    mech_name, dist, long, base, params = args
    mi_index, d_index = _task_index(mech_name, long), DISTRIBUTIONS.index(dist)
    rows = []
    for n in params["n"]:
        for k in params["k"]:
            x = users(dist, k, n, params["data"], [base, d_index, n])
            f = np.bincount(x, minlength=k) / n
            Cs, ps, qs, keys, err_mi, err_max = [], [], [], [], [], []
            for ie, e in enumerate(params["eps"]):
                mech = parse(_spec(mech_name, k, e, long))
                p, q = pure_parameters(mech)
                for run in range(params["runs"]):
                    rng = np.random.default_rng([base, d_index, n, k, mi_index, ie, run, 1])
                    _, C = _support(mech, x, rng)
                    Cs.append(C), ps.append(p), qs.append(q), keys.append(ie)
                    err_mi.append(_errors(clip_normalize((C / n - q) / (p - q)), f))
                    err_max.append(_errors(support_mle(C, p, q), f))
            est, capped = seed_ibu(np.array(Cs), np.array(ps), np.array(qs), max_iter=params["ibu_max_iter"],
                                   tol=params["ibu_tol"])
            err_ibu = [_errors(th, f) for th in est]
            keys = np.array(keys)
            for ie, e in enumerate(params["eps"]):
                sel = keys == ie
                runs = {"mi": np.asarray(err_mi)[sel], "ibu": np.asarray(err_ibu)[sel],
                        "ibu_max": np.asarray(err_max)[sel]}
                rows.append({"mechanism": mech_name, "dist": dist, "k": k, "n": n, "eps": e,
                             "empty_bins": int((f == 0).sum()), "ibu_capped": float(capped[sel].mean()),
                             **{key: v.mean(axis=0).tolist() for key, v in runs.items()},
                             **{f"{key}_runs": v.tolist() for key, v in runs.items()}})
    return mech_name, dist, rows


def _task_index(mech_name, long):
    return list(LONGITUDINAL if long else ONE_TIME).index(mech_name)


def _gain(a, b):
    return 100.0 * (a - b) / a if a > 0 else 0.0


def summarize(rows: list[dict]) -> dict:
    """Gains of one table cell from its configurations' errors (index 0 = MSE, 1 = MAE).

    ``{metric}_gain``: seed 002's average (each configuration's gain, errors averaged over the
    runs, clipped at 0); ``_per_run``: every run's gain clipped (the other reading of the
    authors' notebook); ``_unclipped``, ``_median``, ``_pooled`` (``1 - sum err_IBU / sum err_MI``);
    the same with ``_max`` for IBU run to its maximum."""
    out = {}
    for j, metric in enumerate(("mse", "mae")):
        for est, tag in (("ibu", ""), ("ibu_max", "_max")):
            g = [_gain(r["mi"][j], r[est][j]) for r in rows]
            out[f"{metric}_gain{tag}"] = float(np.mean(np.maximum(g, 0.0)))  # seed 002's way
            out[f"{metric}_gain{tag}_unclipped"] = float(np.mean(g))
            out[f"{metric}_gain{tag}_median"] = float(np.median(g))
            out[f"{metric}_gain{tag}_pooled"] = _gain(sum(r["mi"][j] for r in rows), sum(r[est][j] for r in rows))
            if all("mi_runs" in r for r in rows):  # the other reading: clip every run's gain
                out[f"{metric}_gain{tag}_per_run"] = float(np.mean(
                    [max(_gain(a[j], b[j]), 0.0) for r in rows for a, b in zip(r["mi_runs"], r[f"{est}_runs"])]))
    return out


def gain_intervals(detail: list[dict], dists, mechs, *, reps: int = 400, level: float = 0.95,
                   seed: int = 0) -> dict:
    """Run-to-run spread of the gains: a percentile bootstrap over the runs of every configuration.

    The users of a configuration are fixed and only the mechanism's noise changes from run to run,
    so a replicate draws, for every configuration independently, ``R`` of its ``R`` runs with
    replacement and recomputes every cell of the summary table (seed 002's clipped average: the
    configurations' gains from their run-averaged errors, clipped at 0, averaged over the cell's
    configurations; the ``avg`` row and column as means of cells) and the overall averages
    (clipped, clipped per run, unclipped, pooled). Returns ``{"table": {d: {m: {"mse_gain": [lo,
    hi], "mae_gain": [lo, hi]}}}, "overall": {key: [lo, hi]}, "reps": reps, "level": level}``.
    """
    rows = [r for r in detail if "mi_runs" in r]
    if not rows or len(rows) < len(detail) or min(len(r["mi_runs"]) for r in rows) < 2:
        return {}
    R = min(len(r["mi_runs"]) for r in rows)
    mi = np.array([np.asarray(r["mi_runs"])[:R] for r in rows])     # (C, R, 2)
    ib = np.array([np.asarray(r["ibu_runs"])[:R] for r in rows])
    cell_d = np.array([dists.index(r["dist"]) for r in rows])
    cell_m = np.array([mechs.index(r["mechanism"]) for r in rows])
    gen = np.random.default_rng(seed)
    a = (1 - level) / 2
    cells, overall = [], {k: [] for k in ("mse_gain", "mae_gain", "mse_gain_per_run", "mae_gain_per_run",
                                         "mse_gain_unclipped", "mae_gain_unclipped", "mse_gain_pooled",
                                         "mae_gain_pooled")}
    count = np.zeros((len(dists), len(mechs)))
    np.add.at(count, (cell_d, cell_m), 1)

    def gain(x, y):
        return 100.0 * np.where(x > 0, (x - y) / np.where(x > 0, x, 1.0), 0.0)

    for _ in range(reps):
        idx = gen.integers(0, R, size=(len(rows), R))
        m_r = np.take_along_axis(mi, idx[:, :, None], axis=1)
        b_r = np.take_along_axis(ib, idx[:, :, None], axis=1)
        g = gain(m_r.mean(axis=1), b_r.mean(axis=1))                # (C, 2)
        gc = np.maximum(g, 0.0)
        tab = np.zeros((len(dists), len(mechs), 2))
        np.add.at(tab, (cell_d, cell_m), gc)
        cells.append(tab / np.where(count > 0, count, 1.0)[:, :, None])
        for j, metric in enumerate(("mse", "mae")):
            overall[f"{metric}_gain"].append(gc[:, j].mean())
            overall[f"{metric}_gain_per_run"].append(np.maximum(gain(m_r[:, :, j], b_r[:, :, j]), 0.0).mean())
            overall[f"{metric}_gain_unclipped"].append(g[:, j].mean())
            overall[f"{metric}_gain_pooled"].append(float(gain(m_r[:, :, j].sum(), b_r[:, :, j].sum())))
    cells = np.array(cells)                                         # (reps, D, M, 2)
    full = np.zeros((reps, len(dists) + 1, len(mechs) + 1, 2))
    full[:, :-1, :-1] = cells
    full[:, :-1, -1] = cells.mean(axis=2)
    full[:, -1, :-1] = cells.mean(axis=1)
    full[:, -1, -1] = cells.mean(axis=(1, 2))
    lo, hi = np.quantile(full, [a, 1 - a], axis=0)
    table = {d: {m: {f"{metric}_gain": [float(lo[i, j, t]), float(hi[i, j, t])]
                     for t, metric in enumerate(("mse", "mae"))}
                 for j, m in enumerate(list(mechs) + ["avg"])}
             for i, d in enumerate(list(dists) + ["avg"])}
    return {"table": table, "overall": {k: [float(np.quantile(v, a)), float(np.quantile(v, 1 - a))]
                                        for k, v in overall.items()},
            "reps": reps, "level": level, "runs": R}


def _dbsec(params, rng, progress, long):
    mechs = params["mechanisms"]
    base = int(rng.integers(2 ** 62))
    tasks = [(m, d, long, base, params) for m in mechs for d in params["distributions"]]
    workers = int(params.get("workers", 1))
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(progress(pool.map(_dbsec_task, tasks), "mechanism x distribution", total=len(tasks)))
    else:
        results = [_dbsec_task(t) for t in progress(tasks, "mechanism x distribution")]
    detail = [r for _, _, rows in results for r in rows]
    dists = params["distributions"]
    table = {d: {m: summarize([r for r in detail if r["mechanism"] == m and r["dist"] == d]) for m in mechs}
             for d in dists}
    for d in dists:  # the seed's "Avg." column: mean over mechanisms
        table[d]["avg"] = {key: float(np.mean([table[d][m][key] for m in mechs])) for key in table[d][mechs[0]]}
    cols = mechs + ["avg"]  # the seed's "Avg." row: mean over distributions
    table["avg"] = {m: {key: float(np.mean([table[d][m][key] for d in dists])) for key in table[dists[0]][m]}
                    for m in cols}
    overall = {**summarize(detail), "ibu_capped_fraction": float(np.mean([r["ibu_capped"] for r in detail]))}
    return {"table": table, "overall": overall, "intervals": gain_intervals(detail, list(dists), list(mechs)),
            "exact_table": _exact_table(params, base, long, progress), "detail": detail}


def _exact_table(params, base, long, progress):
    """MI-N, seed 002's IBU, the support-count maximum and exact-likelihood IBU on a smaller
    configuration (exact IBU runs EM on the individual reports)."""
    ex = params["exact"]
    out = {}
    for mech_name in progress(params["mechanisms"], "exact-likelihood IBU"):
        errs = {key: [] for key in ("mi", "ibu", "ibu_max", "exact")}
        ll_gain, iters = [], []
        for d in ex["distributions"]:
            x = users(d, ex["k"], ex["n"], params["data"], [base, DISTRIBUTIONS.index(d), ex["n"], 7])
            f = np.bincount(x, minlength=ex["k"]) / ex["n"]
            for ie, e in enumerate(ex["eps"]):
                mech = parse(_spec(mech_name, ex["k"], e, long))
                p, q = pure_parameters(mech)
                for run in range(ex["runs"]):
                    rng = np.random.default_rng([base, DISTRIBUTIONS.index(d), _task_index(mech_name, long), ie,
                                                 run, 2])
                    reports, C = _support(mech, x, rng)
                    obs = Observations.from_reports(mech, reports)
                    mx = support_mle(C, p, q)
                    exact = ibu_exact(obs, delta=ex["delta"], max_iter=ex["max_iter"],
                                      accelerate=ex.get("accelerate", "squarem"), stop=ex.get("stop", "loglik"))
                    errs["mi"].append(_errors(clip_normalize((C / ex["n"] - q) / (p - q)), f))
                    errs["ibu"].append(_errors(seed_ibu(C, p, q, max_iter=params["ibu_max_iter"],
                                                        tol=params["ibu_tol"])[0][0], f))
                    errs["ibu_max"].append(_errors(mx, f))
                    errs["exact"].append(_errors(exact.distribution, f))
                    ll_gain.append(exact.loglik - exact_loglik(obs, mx))
                    iters.append(exact.iterations)
        row = {}
        for key, v in errs.items():
            v = np.asarray(v)
            row[f"mse_{key}"], row[f"mae_{key}"] = float(v[:, 0].mean()), float(v[:, 1].mean())
        # per run (errors in the order distribution, eps, run): MSE gain of exact IBU over MI-N,
        # from the run's MSEs averaged over the configurations
        per_run = [np.asarray(errs[key])[:, 0].reshape(-1, ex["runs"]).mean(axis=0) for key in ("mi", "exact")]
        row["exact_vs_mi_gain_runs"] = (100.0 * (1.0 - per_run[1] / per_run[0])).tolist()
        row.update({"loglik_gain_exact_over_support_max": float(np.mean(ll_gain)),
                    "min_loglik_gain_exact_over_support_max": float(np.min(ll_gain)),
                    "exact_iterations_mean": float(np.mean(iters))})
        out[mech_name] = row
    return out


def _compute_one_time(params, rng, progress):
    out = _dbsec(params, rng, progress, long=False)
    out["paper"] = {"order": PAPER_ONE_TIME_ORDER, "rows": PAPER_ONE_TIME, "avg": PAPER_AVG["one-time"]}
    return out


def _compute_long(params, rng, progress):
    out = _dbsec(params, rng, progress, long=True)
    out["paper"] = {"order": PAPER_LONG_ORDER, "rows": PAPER_LONG, "avg": PAPER_AVG["longitudinal"]}
    return out


def summary_markdown(results: dict, params: dict) -> str:
    """Seed 002's summary table with ours beside it: cells ``ours / seed`` (MSE then MAE)."""
    paper, table = results["paper"], results["table"]
    mechs = params["mechanisms"]
    lines = []
    for j, metric in enumerate(("mse", "mae")):
        lines += [f"| {metric.upper()} gain % | " + " | ".join(mechs) + " | avg |",
                  "|---|" + "---|" * (len(mechs) + 1)]
        for d in list(params["distributions"]) + ["avg"]:
            cells = []
            for m in mechs + ["avg"]:
                ours = table["avg"][m] if d == "avg" else table[d][m]
                if d == "avg" or m == "avg":
                    src = ([paper["rows"][dd] for dd in params["distributions"] if dd in paper["rows"]]
                           if d == "avg" else [paper["rows"][d]] if d in paper["rows"] else [])
                    idx = range(j, 14, 2) if m == "avg" else [2 * paper["order"].index(m) + j]
                    seed = np.mean([[row[i] for i in idx] for row in src]) if src else float("nan")
                else:
                    seed = paper["rows"][d][2 * paper["order"].index(m) + j] if d in paper["rows"] else float("nan")
                cells.append(f"{ours[f'{metric}_gain']:.0f} / {seed:.0f}")
            lines.append(f"| {d} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _plot_dbsec(results, params, path):
    table = results["table"]
    mechs = params["mechanisms"]
    dists = [d for d in table if d != "avg"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, key in zip(axes, ("mse_gain", "mae_gain")):
        w = 0.8 / len(dists)
        iv = (results.get("intervals") or {}).get("table")
        for i, d in enumerate(dists):
            vals = np.array([table[d][m][key] for m in mechs])
            err = None
            if iv:  # 95 % bootstrap interval over the runs
                lo, hi = (np.array([iv[d][m][key][j] for m in mechs]) for j in (0, 1))
                err = [np.maximum(vals - lo, 0), np.maximum(hi - vals, 0)]
            ax.bar(np.arange(len(mechs)) + i * w, vals, w, label=d, yerr=err, capsize=1.5,
                   error_kw={"elinewidth": 0.7})
        ax.set_xticks(np.arange(len(mechs)) + 0.4 - w / 2, mechs)
        ax.set_title(f"{key[:3].upper()} gain of IBU over MI-N, % (clipped at 0)", fontsize=10)
    if (results.get("intervals") or {}).get("table"):
        fig.suptitle(f"{params['runs']} runs per configuration; bars: 95 % bootstrap intervals over the runs",
                     fontsize=9)
        ax.axhline(0, color="k", lw=0.5)
    axes[0].legend(fontsize=7)
    save(fig, path)


_DB_DEFAULTS = {"distributions": DISTRIBUTIONS, "k": [2, 50, 100, 200], "n": [20000, 100000],
                "eps": [1.0, 2.0, 4.0, 8.0], "runs": 20, "data": "notebook", "ibu_max_iter": 10000,
                "ibu_tol": 1e-12, "workers": 1,
                "exact": {"k": 20, "n": 10000, "eps": [1.0, 2.0, 4.0], "distributions": ["gauss", "poiss", "real"],
                          "runs": 5, "delta": 1e-6, "max_iter": 20000, "accelerate": "squarem", "stop": "loglik"}}
_DB_QUICK = {"distributions": ["gauss", "poiss"], "k": [10], "n": [5000], "eps": [1.0], "runs": 2,
             "exact": {"k": 8, "n": 2000, "eps": [1.0], "distributions": ["poiss"], "runs": 1, "delta": 1e-6,
                       "max_iter": 2000, "accelerate": "squarem", "stop": "loglik"}}

for _name, _mechs, _compute, _what in (
        ("dbsec-one-time", ONE_TIME, _compute_one_time, "one-time"),
        ("dbsec-longitudinal", LONGITUDINAL, _compute_long, "longitudinal")):
    register_experiment(Experiment(
        name=_name,
        description=f"IBU (support counts) gain over MI-N for {_what} LDP frequency oracles"
                    + (" (eps_1 = eps_perm/2)" if _what == "longitudinal" else "") + ", + exact-likelihood IBU",
        defaults={**_DB_DEFAULTS, "mechanisms": list(_mechs)},
        compute=_compute, plot=_plot_dbsec, quick=_DB_QUICK,
        reference=f"seed 002 ({_what} summary table)",
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
    """``runs`` data sets per distribution: every run's IBU estimate and EMD to its own data.

    The figure draws the first run (the seed's single estimate) over the band of the runs' 2.5-97.5
    percentiles per value; the table reads the EMD's mean and interval over the runs.
    """
    mech = parse(f"sue(k=10,eps={float(params['eps'])})")
    runs = int(params.get("runs", 1))
    out = {}
    for name in params["distributions"]:
        truth = _fig_truth(name)
        ests, emds, its, conv, first = [], [], [], [], None
        for _ in progress(range(runs), f"{name}: runs"):
            x = rng.choice(10, size=params["n"], p=truth)
            obs = _rappor_obs(mech, x, rng)
            est = ibu_exact(obs, delta=params["delta"], max_iter=params["max_iter"],
                            accelerate=params.get("accelerate", "none"), stop=params.get("stop", "loglik"))
            f = np.bincount(x, minlength=10) / x.size
            if first is None:
                first = (f, est.distribution)
            ests.append(est.distribution)
            emds.append(emd_line(f, est.distribution))
            its.append(est.iterations), conv.append(est.converged)
        ests = np.asarray(ests)
        out[name] = {"truth": first[0], "ibu": first[1], "emd": emds[0], "emd_runs": emds,
                     "ibu_mean": ests.mean(axis=0), "ibu_lo": np.percentile(ests, 2.5, axis=0),
                     "ibu_hi": np.percentile(ests, 97.5, axis=0), "pmf": truth,
                     "iterations": its, "converged": conv}
    return out


def _plot_fig11(results, params, path):
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 3.8))
    for ax, (name, r) in zip(np.atleast_1d(axes), results.items()):
        x = np.arange(10)
        runs = len(r.get("emd_runs", [r["emd"]]))
        ax.bar(x - 0.2, r["truth"], 0.4, label="original (run 1)")
        ax.bar(x + 0.2, r["ibu"], 0.4, label="IBU (run 1)")
        title = f"{name}, eps={params['eps']}: EMD {r['emd']:.3f}"
        if runs > 1:
            lo, hi = np.asarray(r["ibu_lo"]), np.asarray(r["ibu_hi"])
            ax.errorbar(x + 0.2, r["ibu_mean"], yerr=[np.asarray(r["ibu_mean"]) - lo, hi - np.asarray(r["ibu_mean"])],
                        fmt="none", ecolor="black", capsize=3, label=f"IBU over {runs} runs (mean, 95 % range)")
            title = f"{name}, eps={params['eps']}: mean EMD {float(np.mean(r['emd_runs'])):.3f} ({runs} runs)"
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("value")
        ax.legend(fontsize=7, loc="upper left")
    save(fig, path)


def _compute_fig12(params, rng, progress):
    out = {}
    for name in params["distributions"]:
        truth = _fig_truth(name)
        res = {"eps": params["eps"], "rappor-n": [], "rappor-p": [], "ibu": [], "ibu_iterations": [],
               "ibu_converged": []}
        for e in progress(params["eps"], f"{name}: eps"):
            mech = parse(f"sue(k=10,eps={float(e)})")
            emds = {"rappor-n": [], "rappor-p": [], "ibu": []}
            its, conv = [], []
            for _ in range(params["runs"]):
                x = rng.choice(10, size=params["n"], p=truth)
                f = np.bincount(x, minlength=10) / x.size
                obs = _rappor_obs(mech, x, rng)
                emds["rappor-n"].append(emd_line(f, rappor(obs, post="n").distribution))
                emds["rappor-p"].append(emd_line(f, rappor(obs, post="p").distribution))
                est = ibu_exact(obs, delta=params["delta"], max_iter=params["max_iter"],
                                accelerate=params["accelerate"], stop=params.get("stop", "loglik"))
                emds["ibu"].append(emd_line(f, est.distribution))
                its.append(est.iterations), conv.append(est.converged)
            for key, v in emds.items():
                res[key].append({"mean": float(np.mean(v)), "std": float(np.std(v))})
            res["ibu_iterations"].append(float(np.mean(its)))
            res["ibu_converged"].append(float(np.mean(conv)))
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
    name="fig11", description="IBU estimate after basic RAPPOR on {0..9}, n=10^5, eps=0.5, 100 runs",
    defaults={"n": 100000, "eps": 0.5, "runs": 100, "distributions": ["binomial", "uniform3456"], "delta": 1e-6,
              "max_iter": 100000, "accelerate": "none", "stop": "loglik"},
    compute=_compute_fig11, plot=_plot_fig11, quick={"n": 5000, "runs": 3}, reference="seed 001 Fig. 11",
))
register_experiment(Experiment(
    name="fig12", description="EMD of Rappor's INV-N / INV-P and IBU after basic RAPPOR, 100 runs per eps",
    defaults={"n": 100000, "eps": [0.5, 1.0, 2.0, 3.0, 4.0, 5.0], "runs": 100,
              "distributions": ["binomial", "uniform3456"], "delta": 1e-6, "max_iter": 10000, "accelerate": "squarem",
              "stop": "loglik"},
    compute=_compute_fig12, plot=_plot_fig12, quick={"n": 5000, "eps": [0.5, 2.0], "runs": 3},
    reference="seed 001 Fig. 12",
))
