"""Thesis chapter 6 (seed 004): structure learning (HC, RM, BF), its uses, and Granger validation.

The thesis's data (CAN-bus sensors of a bus fleet, 7 continuous features per path record) are
not public. Its algorithms run here on the closest real multivariate data we can ship with its
licence (package data cut from the project's reference data ``../shared/data`` by
:func:`derive_ch6_data`; docs/DATA.md), and **no number is comparable to the thesis's**:

* ``thesis-ch6-networks`` (Tables 6.1-6.4, Fig. 6.4, VIF of 6.5.1): seven numeric columns of
  UCI Adult (48,842 persons; CC BY 4.0) -- ``age``, ``education_num``, ``hours_per_week``,
  ``capital_gain`` and ``capital_loss`` (as ``ln(1 + dollars)``), ``sex`` (1 = male) and
  ``income`` (1 = ">50K"), the target in place of ``fuel_per_km``. Networks are linear-Gaussian
  (Gaussian BIC), as the thesis's continuous features and its causal effects (regression
  coefficients of a Gaussian network) imply. Two of the seven are binary: the Gaussian
  assumption is as rough as the thesis says it may be for its own data;
* ``thesis-ch6-granger`` (Tables 6.5-6.6, Fig. 6.7, Ljung-Box of 6.5.2): Gowalla check-ins in the
  Manhattan box (SNAP; research use), 2010-01-01 to the end of the data, split into 7
  latitude bands holding equal numbers of check-ins (south to north); the variables are the
  square roots of the hourly counts of each band, minus each band's mean for that hour of the
  week (local time); "records" are hours (the BN is learned on all of them, as the thesis learns
  it on all path records) and the collection of multivariate series ``{t^(l)}`` is the
  consecutive weeks (168 hours each), in place of the thesis's vehicle-months;
* ``thesis-fig6.6``: Eq. 6.4 (fuel saving of a longer, flatter path) with the thesis's own
  parameters; it needs no data.

The algorithms are :mod:`localpriv.multiattr.structure` and :mod:`localpriv.multiattr.granger`.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from localpriv.data.datasets import data_path
from localpriv.data.formats import atomic_output
from localpriv.inference.plotting import plt, save
from localpriv.multiattr.bayesnet import structure_metrics
from localpriv.multiattr.granger import granger_matrix, ljung_box, stationarize
from localpriv.multiattr.structure import (
    GaussianBIC,
    arcs_of,
    brute_force,
    exact_search,
    hill_climbing,
    markov_equivalent,
    network_score,
    parents_of,
    restrictive_maximization,
)
from localpriv.utils.validation import LocalPrivError
from reproductions.runner import Experiment, register_experiment
from reproductions.spread import mean_interval

__all__ = ["shared_data_dir", "adult_numeric", "gowalla_band_series", "derive_ch6_data", "link_collection",
           "cv_rmse", "causal_effect", "vif", "fuel_saving"]

ADULT_VARS = ["age", "education_num", "hours_per_week", "capital_gain", "capital_loss", "sex", "income"]
_ADULT_COLS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital", "occupation",
               "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week",
               "country", "income"]
MANHATTAN = (40.7044, 40.7942, -74.0205, -73.9374)  # lat min, lat max, lon min, lon max (seed 001 7.2)


# ------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------
def shared_data_dir(path=None) -> Path:
    """The reference data folder: ``path``, else ``$LOCALPRIV_SHARED_DATA``, else the first of
    ``../shared/data`` (from the working directory) and ``/work/shared/data`` that exists."""
    cands = [path] if path else [os.environ.get("LOCALPRIV_SHARED_DATA"), "../shared/data", "/work/shared/data"]
    for c in cands:
        if c and Path(c).is_dir():
            return Path(c)
    raise LocalPrivError(f"reference data folder not found (tried {', '.join(str(c) for c in cands if c)}); "
                         "set data_dir or LOCALPRIV_SHARED_DATA")


#: package data of this module (docs/DATA.md): the raw integer columns behind :func:`adult_numeric`
#: and the hourly band counts behind :func:`gowalla_band_series`'s defaults
ADULT_FILE = "adult_numeric.csv.gz"
BANDS_FILE = "gowalla_manhattan_bands.json"
_ADULT_RAW = ["age", "education_num", "hours_per_week", "capital_gain", "capital_loss", "sex", "income"]


def _adult_raw(data_dir=None) -> np.ndarray:
    """48,842 x 7 integers (dollars for the capital columns, 0/1 for sex = male, income > 50K):
    from ``adult.data`` + ``adult.test`` in ``data_dir``, else the shipped copy."""
    import pandas as pd
    if data_dir is None:
        with data_path(ADULT_FILE).open("rb") as fh:
            df = pd.read_csv(fh, compression="gzip")
        if list(df.columns) != _ADULT_RAW:
            raise LocalPrivError(f"{ADULT_FILE}: columns {list(df.columns)[:8]} are not {_ADULT_RAW}")
        return df.to_numpy(dtype=np.int64)
    d = shared_data_dir(data_dir)
    frames = [pd.read_csv(d / f, header=None, names=_ADULT_COLS, skipinitialspace=True)
              for f in ("adult.data", "adult.test")]
    df = pd.concat(frames, ignore_index=True)
    return np.column_stack([df["age"], df["education_num"], df["hours_per_week"], df["capital_gain"],
                            df["capital_loss"], (df["sex"] == "Male"),
                            df["income"].str.startswith(">50K")]).astype(np.int64)


def adult_numeric(data_dir=None) -> tuple[np.ndarray, list[str]]:
    """The 48,842 x 7 array of :data:`ADULT_VARS` (capital columns as ``ln(1 + dollars)``).

    From the shipped ``adult_numeric.csv.gz`` (UCI Adult, CC BY 4.0; docs/DATA.md), or, with
    ``data_dir``, from ``adult.data`` + ``adult.test`` in that folder (the same numbers)."""
    R = _adult_raw(data_dir).astype(float)
    R[:, 3:5] = np.log1p(R[:, 3:5])
    return R, list(ADULT_VARS)


def _band_counts(data_dir, bands: int, start: str):
    """(hours x bands counts, latitude edges, start in UTC) from the SNAP file in ``data_dir``."""
    import pandas as pd
    d = shared_data_dir(data_dir)
    df = pd.read_csv(d / "gowalla_nyc_checkins.tsv.gz", sep="\t", header=None,
                     names=["user", "time", "lat", "lon", "loc"])
    la0, la1, lo0, lo1 = MANHATTAN
    df = df[(df.lat >= la0) & (df.lat <= la1) & (df.lon >= lo0) & (df.lon <= lo1)]
    t = pd.to_datetime(df["time"], utc=True)
    t0 = pd.Timestamp(start, tz="America/New_York").tz_convert("UTC")
    keep = (t >= t0).to_numpy()
    lat = df["lat"].to_numpy()[keep]
    hours = ((t[keep] - t0).dt.total_seconds().to_numpy() // 3600).astype(np.int64)
    edges = np.quantile(lat, np.linspace(0, 1, bands + 1))
    band = np.clip(np.searchsorted(edges, lat, side="right") - 1, 0, bands - 1)
    H = int(hours.max())  # drop the last, partial hour
    ok = hours < H
    counts = np.zeros((H, bands), dtype=np.int64)
    np.add.at(counts, (hours[ok], band[ok]), 1)
    return counts, edges, t0


def _shipped_band_counts():
    import json
    rec = json.loads(data_path(BANDS_FILE).read_text())
    if rec.get("format_version") != 1:
        raise LocalPrivError(f"{BANDS_FILE}: format_version {rec.get('format_version')!r} is not 1")
    counts = np.asarray(rec["counts"], dtype=np.int64)
    if counts.shape != (rec["hours"], rec["bands"]):
        raise LocalPrivError(f"{BANDS_FILE}: counts of shape {counts.shape}, expected "
                             f"({rec['hours']}, {rec['bands']})")
    import pandas as pd
    return counts, np.asarray(rec["edges"], dtype=float), pd.Timestamp(rec["start_utc"]), rec


def gowalla_band_series(data_dir=None, *, bands: int = 7, start: str = "2010-01-01",
                        deseasonalize: bool = True) -> dict:
    """Hourly check-in counts of ``bands`` equal-count latitude bands of the Manhattan box from
    ``start`` (local midnight) to the last whole hour of the data: ``{"Y": hours x bands (sqrt
    counts, minus the band's hour-of-week mean if deseasonalize), "counts", "edges" (latitudes),
    "start", "hour_of_week"}``.

    The defaults (7 bands from 2010-01-01) read the shipped counts
    (``gowalla_manhattan_bands.json``, SNAP Gowalla; docs/DATA.md); other bands or starts, or a
    ``data_dir``, recount them from ``gowalla_nyc_checkins.tsv.gz`` in the reference folder."""
    import pandas as pd
    shipped = data_dir is None and bands == 7 and start == "2010-01-01"
    if shipped:
        counts, edges, t0, _ = _shipped_band_counts()
    else:
        counts, edges, t0 = _band_counts(data_dir, bands, start)
    counts = counts.astype(float)
    H = counts.shape[0]
    local = (t0.tz_convert("America/New_York") + pd.to_timedelta(np.arange(H), unit="h"))
    how = (local.day_of_week.to_numpy() * 24 + local.hour.to_numpy()).astype(np.int64)
    Y = np.sqrt(counts)
    if deseasonalize:
        prof = np.zeros((168, bands))
        np.add.at(prof, how, Y)
        prof /= np.maximum(np.bincount(how, minlength=168), 1)[:, None]
        Y = Y - prof[how]
    return {"Y": Y, "counts": counts, "edges": edges, "start": str(t0), "hour_of_week": how}


def derive_ch6_data(shared_dir=None, out_dir=None) -> dict[str, str]:
    """Write the two package-data files of this module from the reference copies (the raw
    integer Adult columns; the default hourly band counts) into ``out_dir`` (default: the
    package's data folder). Running it again reproduces them byte for byte (gzip without a
    timestamp)."""
    import gzip
    import io
    import json

    out = Path(out_dir) if out_dir is not None else Path(str(data_path("")))
    out.mkdir(parents=True, exist_ok=True)
    R = _adult_raw(shared_data_dir(shared_dir))
    buf = io.StringIO()
    buf.write(",".join(_ADULT_RAW) + "\n")
    np.savetxt(buf, R, fmt="%d", delimiter=",")
    with (atomic_output(out / ADULT_FILE) as tmp, open(tmp, "wb") as raw,
          gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz):
        gz.write(buf.getvalue().encode())
    counts, edges, t0 = _band_counts(shared_dir, 7, "2010-01-01")
    rec = {"format_version": 1, "what": "hourly Gowalla check-in counts in 7 equal-count latitude bands of the "
                                        "Manhattan box (seed 001 section 7.2), south to north",
           "source": "SNAP loc-gowalla_totalCheckins (Cho, Myers, Leskovec, KDD 2011), New York subset",
           "start_local": "2010-01-01 00:00 America/New_York", "start_utc": str(t0),
           "bands": 7, "hours": int(counts.shape[0]), "edges": [float(e) for e in edges],
           "counts": counts.tolist()}
    with atomic_output(out / BANDS_FILE) as tmp:
        Path(tmp).write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    return {"adult": str(out / ADULT_FILE), "bands": str(out / BANDS_FILE)}


# ------------------------------------------------------------------------------------------
# analyses of a learned network (section 6.5.1)
# ------------------------------------------------------------------------------------------
def link_collection(nets: dict[str, np.ndarray], names) -> dict:
    """Table 6.2: common links (same direction in every network), common links with discordant
    direction (the pair is linked in every network, not always the same way), uncommon links
    (linked in some networks only), each arc listed with the networks holding it."""
    keys = list(nets)
    arcs = {k: arcs_of(A) for k, A in nets.items()}
    pairs = sorted({frozenset(a) for s in arcs.values() for a in s}, key=lambda p: sorted(p))
    out = {"CL": [], "CLDD": [], "UL": []}
    for p in pairs:
        i, j = sorted(p)
        holders = {(a, b): [k for k in keys if (a, b) in arcs[k]] for a, b in ((i, j), (j, i))}
        linked = [k for k in keys if (i, j) in arcs[k] or (j, i) in arcs[k]]
        for (a, b), ks in holders.items():
            if not ks:
                continue
            entry = {"arc": f"{names[a]} -> {names[b]}", "networks": ks}
            if len(linked) < len(keys):
                out["UL"].append(entry)
            elif len(ks) == len(keys):
                out["CL"].append(entry)
            else:
                out["CLDD"].append(entry)
    return out


def _ols(X, y):
    Z = np.column_stack([np.ones(len(y)), X])
    coef, *_ = np.linalg.lstsq(Z, y, rcond=None)
    return coef


def cv_rmse(X, y, folds: int, rng, *, per_fold: bool = False):
    """``k``-fold cross-validated root mean squared error of the OLS regression ``y ~ 1 + X``
    (mean of the per-fold rmse, as Table 6.3), folds drawn by a permutation from ``rng``; with
    ``per_fold`` also the list of the folds' rmse (their spread)."""
    n = len(y)
    fold = rng.permutation(n) % folds
    errs = []
    for f in range(folds):
        te = fold == f
        coef = _ols(X[~te], y[~te])
        pred = coef[0] + X[te] @ coef[1:]
        errs.append(float(np.sqrt(np.mean((y[te] - pred) ** 2))))
    return (float(np.mean(errs)), errs) if per_fold else float(np.mean(errs))


def causal_effect(X, A, cause: int, target: int) -> tuple[float, list[int]]:
    """Section 6.5.1 (Gaussian network, [107, 120]): the coefficient of ``cause`` in the OLS
    regression of ``target`` on ``cause`` and its parents ``Pa(cause)`` (the adjustment set)."""
    adj = [p for p in parents_of(A, cause) if p != target]
    coef = _ols(X[:, [cause, *adj]], X[:, target])
    return float(coef[1]), adj


def vif(X) -> np.ndarray:
    """Variance inflation factors ``V_l = 1 / (1 - R^2_{-l})`` = the diagonal of the inverse
    correlation matrix (section 6.5.1, [119])."""
    return np.diag(np.linalg.inv(np.corrcoef(X, rowvar=False)))


# ------------------------------------------------------------------------------------------
# thesis-ch6-networks
# ------------------------------------------------------------------------------------------
def _learn(score, rm_alpha):
    out, times = {}, {}
    t = time.perf_counter()
    out["HC"] = hill_climbing(score)
    times["HC"] = time.perf_counter() - t
    t = time.perf_counter()
    out["RM"], skel = restrictive_maximization(score, alpha=rm_alpha)
    times["RM"] = time.perf_counter() - t
    t = time.perf_counter()
    out["BF"], _ = exact_search(score)
    times["BF"] = time.perf_counter() - t
    return out, times, skel


def _net_json(nets, score, names):
    keys = list(nets)
    return {k: {"arcs": sorted(f"{names[i]} -> {names[j]}" for i, j in arcs_of(A)), "n_arcs": len(arcs_of(A)),
                "bic": network_score(score, A),
                "markov_equivalent_to": [m for m in keys if m != k and markov_equivalent(A, nets[m])]}
            for k, A in nets.items()}


def _ch6_networks_compute(params, rng, progress):
    X, names = adult_numeric(params["data_dir"])
    N = X.shape[0]
    if params["n"] is not None and params["n"] < N:
        X = X[np.sort(rng.choice(N, size=int(params["n"]), replace=False))]
    n, d = X.shape
    tgt = names.index(params["target"])
    score = GaussianBIC(X, names)
    nets, times, skel = _learn(score, params["rm_alpha"])
    out = {"data": f"UCI Adult, {n} of {N} persons, 7 numeric columns", "variables": names, "n": n,
           "table6.1": {v: {"mean": float(X[:, j].mean()), "std": float(X[:, j].std(ddof=1)),
                            "min": float(X[:, j].min()), "max": float(X[:, j].max())} for j, v in enumerate(names)},
           "networks": _net_json(nets, score, names), "seconds": times,
           "rm_skeleton_links": int(skel.sum() // 2),
           "table6.2": link_collection(nets, names)}
    # Table 6.3: CV rmse of every target on every distinct non-empty parent set
    t63 = {}
    for v in progress(range(d), "targets"):
        sets: dict[tuple, list[str]] = {}
        for k, A in nets.items():
            P = parents_of(A, v)
            if P:
                sets.setdefault(P, []).append(k)
        if not sets:
            continue
        rows = []
        for P, ks in sets.items():
            m, per = cv_rmse(X[:, list(P)], X[:, v], params["folds"], rng, per_fold=True)
            rows.append({"parents": [names[p] for p in P], "networks": ks, "cv_rmse": m, "cv_rmse_folds": per})
        t63[names[v]] = {"parent_sets": sorted(rows, key=lambda r: r["cv_rmse"]),
                         "mean": float(X[:, v].mean()), "std": float(X[:, v].std(ddof=1))}
    out["table6.3"] = t63
    # Table 6.4: causal effects on the target, every network (the thesis uses BF)
    out["table6.4"] = {}
    for k, A in nets.items():
        rows = []
        for c in parents_of(A, tgt):
            eff, adj = causal_effect(X, A, c, tgt)
            rows.append({"variable": names[c], "adjustment_set": [names[a] for a in adj], "causal_effect": eff})
        out["table6.4"][k] = rows
    out["target"] = params["target"]
    # VIF of the regressors of every target (no removal needed when all are below the threshold)
    out["vif"] = {names[v]: {names[u]: float(x) for u, x in zip([u for u in range(d) if u != v],
                                                                   vif(np.delete(X, v, axis=1)))}
                  for v in range(d)}
    out["vif_max"] = float(max(max(r.values()) for r in out["vif"].values()))
    out["vif_threshold"] = params["vif_threshold"]
    # Algorithm 5 literally on the first variables: one processor, then 4 processors (k1 = p - 2)
    m = params["bf_check_vars"]
    sub = GaussianBIC(X[:, :m], names[:m])
    t = time.perf_counter()
    A_bf, s_bf = brute_force(sub)
    t_bf = time.perf_counter() - t
    p = m * (m - 1) // 2
    part = max((brute_force(sub, k1=p - 2, fixed=list(f)) for f in [(0, 0), (0, 1), (1, 0), (1, 1)]),
               key=lambda r: r[1])
    _, s_dp = exact_search(sub)
    out["bf_check"] = {"variables": names[:m], "configurations": 3 ** p, "algorithm5_bic": s_bf,
                       "algorithm5_4_processors_bic": part[1], "dynamic_programming_bic": s_dp,
                       "algorithm5_seconds": t_bf,
                       "algorithm5_arcs": sorted(f"{names[i]} -> {names[j]}" for i, j in arcs_of(A_bf))}
    out["configurations_7_variables"] = 3 ** 21
    return out


def _draw(ax, A, names, kinds, title):
    d = len(names)
    ang = np.pi / 2 - 2 * np.pi * np.arange(d) / d
    xy = np.column_stack([np.cos(ang), np.sin(ang)])
    style = {"CL": ("tab:green", "-"), "CLDD": ("tab:orange", "--"), "UL": ("tab:red", ":")}
    for i, j in arcs_of(A):
        c, ls = style[kinds.get((i, j), "UL")]
        ax.annotate("", xy=xy[j] * 0.86, xytext=xy[i] * 0.86,
                    arrowprops={"arrowstyle": "-|>", "color": c, "ls": ls, "lw": 1.5, "shrinkA": 12, "shrinkB": 12})
    for (x, y), s in zip(xy, names):
        ax.text(x * 0.86, y * 0.86, s, ha="center", va="center", fontsize=7,
                bbox={"boxstyle": "round", "fc": "white", "ec": "0.5"})
    ax.set_xlim(-1.2, 1.2)
    ax.set_ylim(-1.2, 1.2)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title)


def _ch6_networks_plot(results, params, path):
    names = results["variables"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.6))
    kinds = {}
    for kind, rows in results["table6.2"].items():
        for r in rows:
            a, b = r["arc"].split(" -> ")
            kinds[(names.index(a), names.index(b))] = kind
    for ax, k in zip(axes, ["RM", "HC", "BF"]):
        arcs = [tuple(names.index(x) for x in s.split(" -> ")) for s in results["networks"][k]["arcs"]]
        A = np.zeros((len(names), len(names)), dtype=bool)
        for i, j in arcs:
            A[i, j] = True
        _draw(ax, A, names, kinds, f"{k} (BIC {results['networks'][k]['bic']:.0f})")
    fig.suptitle("Networks on UCI Adult (stand-in for the thesis's sensor data, Fig. 6.4): "
                 "green common, orange discordant direction, red uncommon", fontsize=9)
    save(fig, path)


register_experiment(Experiment(
    name="thesis-ch6-networks",
    description="Hill climbing, restrictive maximization and brute force (exact BIC optimum) on 7 numeric "
                "columns of UCI Adult: link collection, CV rmse of parent-set regressions, causal effects",
    defaults={"data_dir": None, "n": None, "target": "income", "folds": 10, "rm_alpha": 0.05,
              "vif_threshold": 5.0, "bf_check_vars": 5},
    quick={"n": 3000, "bf_check_vars": 4},
    compute=_ch6_networks_compute, plot=_ch6_networks_plot,
    reference="seed 004 sections 6.2-6.3, 6.5.1; Tables 6.1-6.4, Figure 6.4, Algorithm 5",
))


# ------------------------------------------------------------------------------------------
# thesis-ch6-granger
# ------------------------------------------------------------------------------------------
_METRICS = ["sens", "spec", "avg_recall", "acc"]


def _ch6_granger_compute(params, rng, progress):
    data = gowalla_band_series(params["data_dir"], bands=params["bands"], start=params["start"],
                               deseasonalize=params["deseasonalize"])
    Y = data["Y"]
    K = Y.shape[1]
    names = [f"band{b + 1}" for b in range(K)]
    score = GaussianBIC(Y, names)
    nets, times, skel = _learn(score, params["rm_alpha"])
    L = params["series_hours"]
    n_series = Y.shape[0] // L
    if params["max_series"] is not None:
        n_series = min(n_series, int(params["max_series"]))
    idx = list(range(K))
    per = {m: {k: [] for k in _METRICS} for m in [f"{net}" for net in nets]}
    per_cond = {m: {k: [] for k in _METRICS} for m in nets}
    freq = np.zeros((K, K))
    freq_cond = np.zeros((K, K))
    lb_indep = np.zeros(K)
    lags = []
    diffs = np.zeros(K)
    g_links = []
    for s in progress(range(n_series), "series"):
        chunk, nd = stationarize(Y[s * L:(s + 1) * L], level=params["adf_level"])
        diffs += np.asarray(nd) > 0
        res = granger_matrix(chunk, max_lag=params["max_lag"], alpha=params["alpha"])
        cres = granger_matrix(chunk, q=res["q"], alpha=params["alpha"], conditional=True)
        lags.append(res["q"])
        g_links.append(int(res["G"].sum()))
        for G, acc, fr in ((res["G"], per, freq), (cres["G"], per_cond, freq_cond)):
            fr += G
            g_edges = arcs_of(G)
            for net, A in nets.items():
                mt = structure_metrics(g_edges, arcs_of(A), idx)
                for k in _METRICS:
                    acc[net][k].append(mt[k])
        lb_indep += [ljung_box(chunk[:, j], h=params["ljung_box_h"])["p"] > 0.05 for j in range(K)]

    def table(acc):
        return {net: {k.upper(): {"mean": float(np.mean(v[k])), "std": float(np.std(v[k])),
                                  "interval": mean_interval(v[k])} for k in _METRICS} for net, v in acc.items()}

    # chance level: a network with the same number m of arcs placed at random among the L = K(K-1)
    # directed links has E[sens] = m/L, E[spec] = 1 - m/L, avg_recall 1/2 and E[acc] =
    # (m g + (L - m)(L - g)) / L^2 against a Granger graph with g links
    Ltot = K * (K - 1)
    chance = {}
    for net, A in nets.items():
        m = int(A.sum())
        chance[net] = {"arcs": m, "SENS": m / Ltot, "SPEC": 1 - m / Ltot, "AVG_RECALL": 0.5,
                       "ACC": float(np.mean([(m * g + (Ltot - m) * (Ltot - g)) / Ltot ** 2 for g in g_links]))
                       if g_links else None}

    return {"data": "Gowalla check-ins, Manhattan box, hourly counts of 7 equal-count latitude bands",
            "variables": names,
            "band_latitudes": [[float(a), float(b)] for a, b in zip(data["edges"][:-1], data["edges"][1:])],
            "hours": int(Y.shape[0]), "start": data["start"], "checkins": int(data["counts"].sum()),
            "mean_checkins_per_hour": data["counts"].mean(axis=0),
            "networks": _net_json(nets, score, names), "seconds": times,
            "rm_skeleton_links": int(skel.sum() // 2),
            "n_series": n_series, "series_hours": L,
            "table6.6": table(per), "table6.6_conditional_granger": table(per_cond),
            "chance_level": chance, "granger_links_per_series": g_links,
            "per_series": {net: {k: per[net][k] for k in _METRICS} for net in per},
            "granger_link_frequency": freq / max(n_series, 1),
            "granger_link_frequency_conditional": freq_cond / max(n_series, 1),
            "var_lag_orders": lags,
            "share_of_series_differenced": diffs / max(n_series, 1),
            "ljung_box_share_independent": dict(zip(names, (lb_indep / max(n_series, 1)).tolist())),
            "thesis_table6.6": {"BF": [0.42, 0.68, 0.55, 0.58], "HC": [0.41, 0.68, 0.54, 0.57],
                                "RM": [0.36, 0.72, 0.54, 0.58], "order": ["SENS", "SPEC", "AVG_RECALL", "ACC"]}}


def _ch6_granger_plot(results, params, path):
    fig, axes = plt.subplots(2, 2, figsize=(9, 6.5))
    bins = np.linspace(0, 1, 21)
    for ax, k in zip(axes.ravel(), ["spec", "sens", "avg_recall", "acc"]):
        for net, ls, lw in (("HC", "-", 3.0), ("BF", "-", 1.5), ("RM", ":", 1.5)):
            ax.stairs(np.histogram(results["per_series"][net][k], bins=bins)[0], bins, label=net, ls=ls, lw=lw)
        ax.set_title(k)
        ax.set_xlim(0, 1)
    axes[0, 0].legend()
    fig.suptitle(f"Networks vs. Granger matrices of {results['n_series']} weekly series "
                 "(Gowalla Manhattan bands; stand-in for Fig. 6.7)", fontsize=9)
    save(fig, path)


register_experiment(Experiment(
    name="thesis-ch6-granger",
    description="Granger validation of HC/RM/BF networks on hourly check-in counts of 7 Manhattan latitude "
                "bands (Gowalla), weekly series: Tables 6.5-6.6, Fig. 6.7",
    defaults={"data_dir": None, "bands": 7, "start": "2010-01-01", "deseasonalize": True,
              "series_hours": 168, "max_series": None, "max_lag": 6, "alpha": 0.1, "adf_level": 0.05,
              "ljung_box_h": 20, "rm_alpha": 0.05},
    quick={"max_series": 4, "start": "2010-07-01"},
    compute=_ch6_granger_compute, plot=_ch6_granger_plot,
    reference="seed 004 sections 6.4, 6.5.2; Tables 6.5-6.6, Figure 6.7",
))


# ------------------------------------------------------------------------------------------
# thesis-fig6.6 (Eq. 6.4)
# ------------------------------------------------------------------------------------------
def fuel_saving(alpha1_deg, alpha2_deg, f1, r=6.635, h=0.01):
    """Eq. 6.4: ``R = r h (tan a1 - tan a2) / sin a2 - f1 h (1/sin a2 - 1/sin a1)`` (litres), the
    fuel saved by climbing ``h`` km at angle ``a2 < a1`` instead of ``a1``; ``f1`` l/km on the
    steep path and ``r`` l/km per unit of slope (the thesis's causal effect of slope)."""
    a1, a2 = np.radians(alpha1_deg), np.radians(np.asarray(alpha2_deg, dtype=float))
    return r * h * (np.tan(a1) - np.tan(a2)) / np.sin(a2) - f1 * h * (1 / np.sin(a2) - 1 / np.sin(a1))


def _f66_compute(params, rng, progress):
    a2 = np.linspace(params["alpha2_min"], params["alpha1"], params["steps"] + 1)[:-1]
    a1, r = params["alpha1"], params["r"]
    curves = {str(f): fuel_saving(a1, a2, f, r, params["h"]) for f in params["f1"]}
    t1, t2 = np.tan(np.radians(a1)), np.tan(np.radians(a2))
    s1, s2 = np.sin(np.radians(a1)), np.sin(np.radians(a2))
    thr = r * (t1 - t2) / (1 - s2 / s1)  # f1 at which R = 0
    return {"alpha2_deg": a2, "saving_litres": curves,
            "break_even_f1": {"min": float(thr.min()), "max": float(thr.max()),
                              "limit_alpha2_to_0": float(r * t1)},
            "positive_everywhere": {k: bool(np.all(v > 0)) for k, v in curves.items()},
            "negative_everywhere": {k: bool(np.all(v < 0)) for k, v in curves.items()},
            "thesis_break_even_text": {"section 6.5.1": 0.55, "section 6.6": 0.75}}


def _f66_plot(results, params, path):
    fig, ax = plt.subplots(figsize=(6, 4))
    for f, v in results["saving_litres"].items():
        ax.plot(results["alpha2_deg"], v, label=f"f1 = {f} l/km")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("alpha_2 (degrees)")
    ax.set_ylabel("saving R (litres)")
    ax.set_ylim(-0.05, 0.05)
    ax.legend()
    ax.set_title(f"Eq. 6.4, alpha_1 = {params['alpha1']} deg, h = {params['h']} km (thesis Fig. 6.6)")
    save(fig, path)


register_experiment(Experiment(
    name="thesis-fig6.6",
    description="Fuel saved by a longer, flatter path (Eq. 6.4) with the thesis's parameters",
    defaults={"alpha1": 5.0, "alpha2_min": 0.25, "steps": 200, "f1": [0.2, 0.5, 0.8], "r": 6.635, "h": 0.01},
    quick={"steps": 40},
    compute=_f66_compute, plot=_f66_plot,
    reference="seed 004 section 6.5.1, Eq. 6.4, Figures 6.5-6.6",
))
