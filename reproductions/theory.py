"""Reproductions of the theory figures of seed 001: fig6 (non-identifiable mechanism, distinct IBU
fixed points), fig4 (Rappor strict-concavity bound), fig3 and fig5 (L over the 2-simplex).

fig6 (seed 001 section 6.4). The seed used a 5 km x 5 km region of San Francisco; we use
Manhattan (our Gowalla data): the 5x5 window of 1 km cells of the Manhattan box holding the most
check-ins. Planar geometric noise ``eps = 0.5`` per km on the infinite lattice, reports remapped
to the nearest cell of the 4x4 block of rows/columns 0..3 of the window
(:func:`localpriv.analysis.examples.planar_geometric_truncated_channel`): a 25 x 16 channel, so at
most 16 independent columns and no identification (Theorem 6.1). IBU is run on the *asymptotic*
report distribution ``q = theta M`` (infinite data) from several starting points; each run ends at
a maximizer of ``L`` (``theta_hat M = q``), and different starts end at different ones.
"""
from __future__ import annotations

import numpy as np

from localpriv.analysis.bounds import plot_rappor_bound, rappor_concavity_frequency, rappor_concavity_lower_bound
from localpriv.analysis.concavity import identifiable, strictly_concave
from localpriv.analysis.examples import planar_geometric_truncated_channel
from localpriv.analysis.likelihood import EQ4, EQ12, loglik, plot_simplex_loglik, simplex_grid
from localpriv.data.datasets import gowalla_manhattan
from localpriv.domains.grid import KM_PER_DEG_LAT, MANHATTAN_BOX, GridDomain, emd_grid
from localpriv.estimators.em import em, em_step
from localpriv.inference.metrics import total_variation
from localpriv.inference.plotting import plt, save
from localpriv.likelihood.blocks import DenseBlock
from localpriv.mechanisms.matrix import MatrixMechanism
from reproductions.runner import Experiment, register_experiment


# --------------------------------------------------------------------------------------------
# fig6
# --------------------------------------------------------------------------------------------
def manhattan_window(size: int = 5, cell_km: float = 1.0):
    """The ``size x size`` window of ``cell_km`` cells in the Manhattan box with the most Gowalla
    check-ins: returns ``(GridDomain, theta)``."""

    df = gowalla_manhattan()
    big = GridDomain.from_box(MANHATTAN_BOX["lat_min"], MANHATTAN_BOX["lat_max"],
                              MANHATTAN_BOX["lon_min"], MANHATTAN_BOX["lon_max"], cell_km)
    idx = big.locate(df["lat"].to_numpy(), df["lon"].to_numpy(), outside="drop")
    idx = idx[idx >= 0]
    H = np.bincount(idx, minlength=big.size).reshape(big.nrows, big.ncols)
    S = np.lib.stride_tricks.sliding_window_view(H, (size, size)).sum(axis=(2, 3))
    r0, c0 = np.unravel_index(int(S.argmax()), S.shape)
    lat0 = big.lat0 + r0 * cell_km / KM_PER_DEG_LAT
    lon0 = big.lon0 + c0 * cell_km / big._km_per_deg_lon
    dom = GridDomain(lat0, lon0, size, size, cell_km)
    counts = H[r0:r0 + size, c0:c0 + size].ravel().astype(float)
    return dom, counts / counts.sum(), {"row0": int(r0), "col0": int(c0), "checkins": int(counts.sum())}


def _starts(k: int, n_random: int, rng) -> list[tuple[str, np.ndarray]]:
    out = [("uniform", np.full(k, 1.0 / k))]
    for j in range(n_random):
        out.append((f"dirichlet-{j}", rng.dirichlet(np.ones(k))))
    # starts leaning on the 9 cells outside the 4x4 output block (row 4 or column 4)
    r, c = np.divmod(np.arange(k), 5)
    edge = (r == 4) | (c == 4)
    w = np.where(edge, 10.0, 1.0)
    out.append(("edge-heavy", w / w.sum()))
    w = np.where(edge, 0.1, 1.0)
    out.append(("edge-light", w / w.sum()))
    return out


def _fig6_compute(params, rng, progress):
    dom, theta, where = manhattan_window(params["size"], params["cell_km"])
    M = planar_geometric_truncated_channel(params["eps"], params["size"], params["size"],
                                           params["out"], params["out"], params["cell_km"])
    ident = identifiable(MatrixMechanism(rows=M.tolist()))
    q = theta @ M  # asymptotic report distribution (infinite data)
    block = DenseBlock(M, q)
    L_max = float(q[q > 0] @ np.log(q[q > 0]))  # sup of L: reached iff theta_hat M = q
    D = dom.distance_matrix()

    runs = []
    for name, t0 in progress(_starts(M.shape[0], params["random_starts"], rng), "IBU starts"):
        res = em([block], M.shape[0], theta0=t0, delta=params["delta"], max_iter=params["max_iter"],
                 accelerate=params.get("accelerate", "none"), stop=params.get("stop", "loglik"))
        th = res.theta
        step = em_step([block], th, [th @ M], 1.0)
        runs.append({
            "start": name, "theta": th, "loglik": res.loglik, "iterations": res.iterations,
            "converged": res.converged,
            "gap_to_sup_L": L_max - res.loglik,
            "max_abs_residual_thetaM_minus_q": float(np.abs(th @ M - q).max()),
            "fixed_point_step_l1": float(np.abs(step - th).sum()),
            "tv_to_truth": total_variation(theta, th),
            "emd_to_truth_km": emd_grid(theta, th, D),
        })
    T = np.array([r["theta"] for r in runs])
    pair = np.abs(T[:, None, :] - T[None, :, :]).sum(-1) / 2
    # greedy clustering of the end points at TV distance > 0.01
    reps = []
    for i in range(len(runs)):
        if all(pair[i, j] > 0.01 for j in reps):
            reps.append(i)
    return {
        "where": {**where, "grid": dom.spec(), "region": "Manhattan (seed: San Francisco)"},
        "truth": theta, "channel_shape": list(M.shape),
        "identification": ident.as_dict(),
        "L_sup": L_max, "runs": runs,
        "max_pairwise_tv": float(pair.max()), "distinct_fixed_points": len(reps),
        "all_certified": bool(all(r["converged"] for r in runs)) and params.get("stop") == "gap",
        "representatives": [runs[i]["start"] for i in reps],
    }


def _fig6_plot(results, params, path):

    n = params["size"]
    truth = np.asarray(results["truth"])
    runs = results["runs"]
    by_start = {r["start"]: r for r in runs}
    show = [by_start[s] for s in results["representatives"][:3]]
    fig, axes = plt.subplots(1, 1 + len(show), figsize=(3.2 * (1 + len(show)), 3.2))
    axes = np.atleast_1d(axes)
    vmax = max(truth.max(), *(np.max(r["theta"]) for r in show))
    panels = [("original (Gowalla, Manhattan)", truth)] + [
        (f"IBU from {r['start']}\nTV to truth {r['tv_to_truth']:.3f}", np.asarray(r["theta"])) for r in show]
    for ax, (title, d) in zip(axes, panels):
        im = ax.imshow(d.reshape(n, n), origin="lower", vmin=0, vmax=vmax, cmap="viridis")
        ax.set_title(title, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(im, ax=list(axes), shrink=0.8)
    fig.suptitle(f"Fig. 6: planar geometric eps={params['eps']}, 5x5 -> 4x4 (rank "
                 f"{results['identification']['rank']} < 25): distinct MLEs from the asymptotic q", fontsize=9)
    return save(fig, path)


register_experiment(Experiment(
    name="fig6",
    description="Non-identifiable mechanism (planar geometric 5x5 -> 4x4, Manhattan): IBU on the "
                "asymptotic q reaches different fixed points from different starts",
    # the certified maximum from every start (plain EM stopped on the change in L hit
    # its 20,000-iteration cap, so its end points were not shown to be MLEs); plain EM on request
    defaults={"size": 5, "out": 4, "cell_km": 1.0, "eps": 0.5, "random_starts": 6,
              "delta": 1e-10, "max_iter": 100_000, "accelerate": "newton", "stop": "gap"},
    compute=_fig6_compute,
    plot=_fig6_plot,
    quick={"random_starts": 2},
    reference="seed 001 section 6.4, Fig. 6",
))


# --------------------------------------------------------------------------------------------
# fig4
# --------------------------------------------------------------------------------------------
def _fig4_compute(params, rng, progress):

    k = params["k"]
    ns = list(range(k, params["n_max"] + 1, params["n_step"]))
    out = {"n": ns, "bound": {}, "empirical": {}}
    for e in progress(params["eps"], "eps"):
        out["bound"][str(e)] = rappor_concavity_lower_bound(k, e, np.array(ns))
        out["empirical"][str(e)] = [rappor_concavity_frequency(k, e, n, params["runs"], rng) for n in ns]
    b = np.array([out["bound"][str(e)] for e in params["eps"]])
    f = np.array([out["empirical"][str(e)] for e in params["eps"]])
    # a frequency below the bound by more than 5 binomial standard errors would contradict Thm 4.4
    se = np.sqrt(np.maximum(b * (1 - b), 1e-12) / params["runs"])
    out["violations_5se"] = int((f < b - 5 * se - 1e-12).sum())
    return out


def _fig4_plot(results, params, path):

    emp = {e: (results["n"], results["empirical"][str(e)]) for e in params["eps"]}
    return plot_rappor_bound(path, k=params["k"], eps_values=params["eps"], n_max=params["n_max"], empirical=emp)


register_experiment(Experiment(
    name="fig4",
    description="Basic Rappor, |X|=10: Theorem 4.4 lower bound on P(L strictly concave) vs the "
                "empirical frequency (rank test of Theorem 4.1)",
    defaults={"k": 10, "eps": [0.5, 1.0, 2.0, 4.0], "n_max": 60, "n_step": 5, "runs": 300},
    compute=_fig4_compute,
    plot=_fig4_plot,
    quick={"eps": [1.0, 2.0], "n_max": 40, "runs": 60},
    reference="seed 001 Theorem 4.4, Fig. 4",
))


# --------------------------------------------------------------------------------------------
# fig3 / fig5
# --------------------------------------------------------------------------------------------
def _simplex_compute(which):
    def compute(params, rng, progress):

        M = EQ4 if which == 3 else EQ12
        mech = MatrixMechanism(rows=M.tolist())
        out = {"mechanism": M, "identifiable": identifiable(mech).holds, "panels": {}}
        pts = simplex_grid(params["resolution"])
        for label, reps in params["observations"].items():
            r = np.asarray(reps) - 1  # the seed numbers the alphabet 1, 2, 3
            L = loglik(mech, r, pts)
            top = pts[np.isclose(L, L.max(), rtol=1e-9, atol=1e-9)]
            out["panels"][label] = {
                "reports (seed labels)": reps,
                "strictly_concave": strictly_concave(M[:, np.unique(r)]).holds,
                "max_L": float(L.max()), "maximizers_on_grid": int(top.shape[0]),
                "example_maximizer": top[0],
            }
        return out
    return compute


def _simplex_plot(which):
    def plot(results, params, path):

        M = EQ4 if which == 3 else EQ12
        mech = MatrixMechanism(rows=M.tolist())
        labels = list(params["observations"])
        fig, axes = plt.subplots(1, len(labels), figsize=(5.6 * len(labels), 3.9))
        fig.subplots_adjust(wspace=0.45)
        for ax, label in zip(np.atleast_1d(axes), labels):
            reps = params["observations"][label]
            pan = results["panels"][label]
            plot_simplex_loglik(mech, np.asarray(reps) - 1, ax=ax,
                                title=f"({label}) reports {reps}: strictly concave={pan['strictly_concave']}",
                                resolution=params["resolution"])
        fig.suptitle(f"Fig. {which}: L(theta) with mechanism Eq. ({4 if which == 3 else 12})", fontsize=9)
        return save(fig, path)
    return plot


register_experiment(Experiment(
    name="fig3",
    description=("L over the 2-simplex, mechanism Eq. (4): reports {2} (not strictly concave) and {2,1} "
                 "(strictly concave)"),
    defaults={"resolution": 120, "observations": {"a": [2], "b": [2, 1]}},
    compute=_simplex_compute(3), plot=_simplex_plot(3), quick={"resolution": 40},
    reference="seed 001 section 4.1, Eq. (4), Fig. 3",
))

register_experiment(Experiment(
    name="fig5",
    description="L over the 2-simplex, mechanism Eq. (12): {2,2,2,2} (unique MLE, not strictly concave) "
                "and {2,2,2,2,1,3} (a segment of MLEs)",
    defaults={"resolution": 120, "observations": {"a": [2, 2, 2, 2], "b": [2, 2, 2, 2, 1, 3]}},
    compute=_simplex_compute(5), plot=_simplex_plot(5), quick={"resolution": 40},
    reference="seed 001 section 5.1, Eq. (12), Fig. 5",
))
