"""Reproductions of the thesis's multi-attribute experiments (seed 004, chapters 4, 5 and 7).

``localpriv reproduce thesis-table4.4 | thesis-table5.3 | thesis-table5.4 | thesis-fig7.3 |
thesis-fig7.4``. Record sets are drawn from the BIF networks by ancestral sampling with the
run's generator (Survey 500 records, Child and Alarm 10,000). What we changed and why is in
docs/multiattr.md.
"""
from __future__ import annotations

import numpy as np

from localpriv.estimators.em import em
from localpriv.inference.plotting import plt, save
from localpriv.mechanisms.matrix import MatrixMechanism
from localpriv.mechanisms.rrba import rrba_epsilon
from localpriv.multiattr.bayesnet import (
    CachedJoint,
    ancestral_sample,
    fit_conditionals,
    greedy_bayes,
    network_edges,
    structure_metrics,
    table_js,
    table_l1,
)
from localpriv.multiattr.bif import load_network
from localpriv.multiattr.block_aggregation import (
    aggregate_blocks,
    combination_views,
    consistent_tables,
    pooled_estimate,
)
from localpriv.multiattr.flips import acceptance_rate, eq77_as_written, flip_probability, g2_table_grid, lemma_7_3_1
from localpriv.multiattr.independence import (
    chi2_test,
    laplace_noisy_counts,
    mc_independence_test,
    noisy_chi2_test,
    rrba_noisy_counts,
)
from localpriv.multiattr.rr_geometric import (
    hybrid_channel,
    hybrid_epsilon,
    hybrid_estimate,
    optimal_mechanism,
    truncated_geometric,
)
from localpriv.multiattr.structure import DiscreteBIC, arcs_of, hill_climbing
from localpriv.multiattr.tables import Records, normalize_table
from localpriv.utils.errors import PrivacyWarning
from localpriv.utils.validation import LocalPrivError
from reproductions.runner import Experiment, register_experiment
from reproductions.spread import mean_interval


# ------------------------------------------------------------------------------------------
# shared protocol helpers
# ------------------------------------------------------------------------------------------
def _pack(combos):
    """First-fit packing of attribute combinations into views of disjoint combinations."""
    views, used = [], []
    for c in combos:
        for v, u in zip(views, used):
            if not u.intersection(c):
                v.append(c)
                u.update(c)
                break
        else:
            views.append([c])
            used.append(set(c))
    return views


def _by_view(rec: Records, views, rng, answer):
    """Give each user one random view; every user of a view answers each of its combinations.

    ``answer(combo, cells, shape, k)`` gets the users' cell indices (possibly none) and returns
    ``(table, epsilon of one report)``. Returns ``{combo: probability table}`` and the worst
    per-user epsilon: the sum over the combinations of a view (sequential composition), each
    report's level computed from its channel."""
    assign = rng.integers(len(views), size=rec.n)
    out, eps_user = {}, 0.0
    for v_idx, view in enumerate(views):
        users = np.flatnonzero(assign == v_idx)
        eps_view = 0.0
        for combo in view:
            shape = rec.shape(combo)
            k = int(np.prod(shape))
            table, eps = answer(combo, rec.cells(combo)[users], shape, k)
            out[combo] = table.reshape(shape)
            eps_view += eps
        eps_user = max(eps_user, eps_view)
    return out, eps_user


def rrba_tables(rec: Records, views, p, rng, block_factor, floor):
    """RRBA (block aggregation, pooled MLE per table); see :func:`_by_view`.

    Blocks of ``block_factor`` users per cell; every user of the view reports and counts (the last
    block holds the users left over, and fewer users than one block make one short block)."""
    def answer(combo, cells, shape, k):
        if cells.size == 0:
            return np.full(k, 1.0 / k), 0.0
        s = max(k * block_factor, 1)
        run = aggregate_blocks(cells, k, p, s, rng, floor=floor)
        return pooled_estimate(run, delta=1e-6, max_iter=2000, accelerate="none", stop="loglik"), run.epsilon
    return _by_view(rec, views, rng, answer)


def _hybrid_tables(rec, views, p, alpha, rng):
    """RR + alpha-geometric hybrid (thesis section 5.4), IBU per table; see :func:`_by_view`."""
    def answer(combo, x, shape, k):
        C = truncated_geometric(k, alpha)
        if x.size == 0:
            return np.full(k, 1.0 / k), 0.0
        cdf = np.cumsum(hybrid_channel(C, p), axis=1)
        rep = np.minimum((rng.random(x.size)[:, None] >= cdf[x]).sum(1), k - 1)
        counts = np.bincount(rep, minlength=k)
        return (hybrid_estimate(counts, C, p, "ibu", delta=1e-6, max_iter=2000, accelerate="none", stop="loglik"),
                hybrid_epsilon(C, p))
    return _by_view(rec, views, rng, answer)


def _laplace_tables(rec, combos, eps, rng):
    return {c: normalize_table(laplace_noisy_counts(rec.table(c), eps, rng)) for c in combos}


def lookup_tables(tables):
    """``joint_of`` over any subset of a stored combination (marginalized)."""
    def source(attrs):
        for combo, t in tables.items():
            if set(attrs) <= set(combo):
                keep = [combo.index(a) for a in attrs]
                drop = tuple(i for i in range(len(combo)) if i not in keep)
                m = t.sum(axis=drop) if drop else t
                order = sorted(keep)
                return np.transpose(m, [order.index(i) for i in keep])
        raise KeyError(attrs)
    return CachedJoint(source)


def _families(net, names):
    return [tuple(sorted([names.index(c), *[names.index(q) for q in ps]]))
            for c, ps in net.parents.items() if ps]


# ------------------------------------------------------------------------------------------
# Table 4.4
# ------------------------------------------------------------------------------------------
def _random_table(kway, dependent, n, rng):
    strata = 2 ** (kway - 2)
    pc = rng.dirichlet(np.ones(strata) * 3)
    joint = np.empty((2, 2, strata))
    for c in range(strata):
        a, b = rng.uniform(0.25, 0.75, size=2)
        t = np.outer([a, 1 - a], [b, 1 - b])
        if dependent:
            d = rng.uniform(0.08, 0.15) * rng.choice([-1, 1])
            d = np.clip(d, -min(t[0, 0], t[1, 1]) + 1e-3, min(t[0, 1], t[1, 0]) - 1e-3)
            t = t + d * np.array([[1, -1], [-1, 1]])
        joint[:, :, c] = t * pc[c]
    return rng.multinomial(n, joint.ravel() / joint.sum()).astype(float).reshape(joint.shape)


def _t44_compute(params, rng, progress):
    n, trials, alpha, p, eps = params["n"], params["trials"], params["alpha"], params["p"], params["eps"]
    out = {"methods": {}, "epsilon_rrba_channel": {}, "epsilon_thesis_claim": float(np.log(1 / (1 - p)))}
    methods = ["laplace", "mcindep", "rrba", "laplace@rrba-eps"]
    for kway in progress(params["kways"], "k-way tables"):
        cells = 2 ** kway
        eps_rr = rrba_epsilon(p, np.full(cells, 1 / cells))
        out["epsilon_rrba_channel"][str(kway)] = eps_rr
        conf = {m: np.zeros((2, 2), int) for m in methods}
        for truth_dep in (True, False):
            for _ in range(trials):
                T = _random_table(kway, truth_dep, n, rng)
                shape = T.shape
                flat = T.ravel()
                res = {
                    "laplace": noisy_chi2_test(laplace_noisy_counts(flat, eps, rng).reshape(shape), n,
                                               alpha=alpha, min_cell=params["min_cell"]),
                    "mcindep": mc_independence_test(laplace_noisy_counts(flat, eps, rng), n,
                                                    lambda c, r: laplace_noisy_counts(c, eps, r), rng,
                                                    shape=shape, alpha=alpha, l=params["l"],
                                                    min_cell=params["min_cell"]),
                    "rrba": mc_independence_test(rrba_noisy_counts(flat, p, rng), n,
                                                 lambda c, r: rrba_noisy_counts(c, p, r), rng, shape=shape,
                                                 alpha=alpha, l=params["l"], min_cell=params["min_cell"]),
                    "laplace@rrba-eps": mc_independence_test(
                        laplace_noisy_counts(flat, eps_rr, rng), n,
                        lambda c, r, e=eps_rr: laplace_noisy_counts(c, e, r), rng, shape=shape, alpha=alpha,
                        l=params["l"], min_cell=params["min_cell"]),
                }
                for m in methods:
                    conf[m][0 if truth_dep else 1, 0 if res[m].reject else 1] += 1
        for m in methods:
            c = conf[m]
            out["methods"].setdefault(m, {})[str(kway)] = {
                "confusion [[truth dep: reject, accept], [truth indep: reject, accept]]": c,
                "accuracy": float((c[0, 0] + c[1, 1]) / c.sum())}
    out["thesis_accuracy"] = {"laplace": [0.665, 0.57, 0.545], "mcindep": [0.945, 0.935, 0.915],
                              "rrba": [0.965, 0.94, 0.935]}
    return out


def _t44_plot(results, params, path):
    fig, ax = plt.subplots(figsize=(7, 4))
    ks = params["kways"]
    w = 0.8 / len(results["methods"])
    for i, (m, d) in enumerate(results["methods"].items()):
        ax.bar(np.arange(len(ks)) + i * w, [d[str(k)]["accuracy"] for k in ks], w, label=m)
    ax.set_xticks(np.arange(len(ks)) + 0.4 - w / 2, [f"{k}-way" for k in ks])
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title("Independence tests on noisy tables (thesis Table 4.4)")
    save(fig, path)


register_experiment(Experiment(
    name="thesis-table4.4",
    description="Independence tests on noisy 2/3/4-way binary tables: Laplace, MCIndep, RRBA",
    defaults={"n": 1000, "trials": 100, "alpha": 0.05, "p": 0.5, "eps": 0.25, "kways": [2, 3, 4],
              "l": 100, "min_cell": 5.0},
    quick={"trials": 15, "l": 40, "kways": [2, 3]},
    compute=_t44_compute, plot=_t44_plot,
    reference="seed 004 sections 4.6, 4.7.3, Table 4.4",
))


# ------------------------------------------------------------------------------------------
# Table 5.3 (structure)
# ------------------------------------------------------------------------------------------
def link_metrics(truth, learned, idx):
    """Directed link metrics (the thesis's L = d(d-1)) plus skeleton metrics (``skel_*``)."""
    m = structure_metrics(truth, learned, idx)
    u = structure_metrics(truth, learned, idx, directed=False)
    m.update({f"skel_{k}": v for k, v in u.items()})
    return m


def _t53_compute(params, rng, progress):
    net = load_network(params["network"])
    names = net.names
    idx = list(range(net.d))
    truth = {(names.index(a), names.index(b)) for a, b in net.edges()}
    k, p, eps, n = params["k"], params["p"], params["eps"], params["n"]
    triples = combination_views(net.d, k + 1)
    all_combos = [c for v in triples for c in v]
    metrics = {m: [] for m in ["clean", "modified", "rr", "laplace"]}
    # the thesis scores against the network learned on the clean records; we also score against
    # the true (BIF) network: both, every run
    vs_clean = {m: [] for m in ["modified", "rr", "laplace"]}
    ref = {}
    eps_used = {"rr": [], "modified": []}
    # who learns a network from a record set: the clean records ("reference_learner") and the
    # synthetic records of each private pipeline ("relearn_learner"); "hill-climbing" is the
    # thesis's way (section 5.3.1: discrete BIC, multiattr.structure), "greedy" GreedyBayes (k)
    for key in ("reference_learner", "relearn_learner"):
        if params[key] not in ("greedy", "hill-climbing"):
            raise LocalPrivError(f"{key} must be 'greedy' or 'hill-climbing', got {params[key]!r}")

    def learned(records, joint, how, first):
        if how == "hill-climbing":  # ties (equivalent directions) in this run's random node order
            return set(arcs_of(hill_climbing(DiscreteBIC(records), order=order)))
        return set(network_edges(greedy_bayes(joint, idx, k, first=first)))
    for _ in progress(range(params["runs"]), "runs"):
        rec = net.sample(n, rng)
        first = int(rng.integers(net.d))
        order = rng.permutation(net.d)  # hill climbing's tie order: not the file's (topological) order

        def learn_and_score(tables_joint, n_syn, name, first=first):
            g = greedy_bayes(tables_joint, idx, k, first=first)
            cpts = fit_conditionals(g, tables_joint)
            syn = ancestral_sample(g, cpts, idx, n_syn, rng)
            J = CachedJoint(lambda attrs: syn.table(list(attrs), True))
            g2 = learned(syn, J, params["relearn_learner"], first)
            metrics[name].append(link_metrics(truth, g2, idx))
            vs_clean[name].append(link_metrics(ref["clean"], g2, idx))

        clean = CachedJoint(lambda a, rec=rec: rec.table(list(a), True))
        ref["clean"] = learned(rec, clean, params["reference_learner"], first)
        metrics["clean"].append(link_metrics(truth, ref["clean"], idx))
        # original protocol: (k+1)-combination views, every user answers one view
        tabs, e = rrba_tables(rec, triples, p, rng, params["block_factor"], params["floor"])
        eps_used["rr"].append(e)
        learn_and_score(lookup_tables(tabs), n, "rr")
        # modified: a fraction learns the structure, the rest answer one AP table each
        m1 = int(params["structure_fraction"] * n)
        perm = rng.permutation(n)
        part1, part2 = rec.subset(perm[:m1]), rec.subset(perm[m1:])
        tabs1, e1 = rrba_tables(part1, triples, p, rng, params["block_factor"], params["floor"])
        g1 = greedy_bayes(lookup_tables(tabs1), idx, k, first=first)
        fams = [tuple(sorted((a, *pi))) for a, pi in g1 if len(pi) == min(k, len(pi)) and pi]
        fams = [f for f in fams if not any(set(f) < set(h) for h in fams)]
        tabs2, e2 = rrba_tables(part2, [[f] for f in fams], p, rng, params["block_factor"], params["floor"])
        eps_used["modified"].append(max(e1, e2))
        cpts = fit_conditionals(g1, lookup_tables(tabs2))
        syn = ancestral_sample(g1, cpts, idx, n, rng)
        J = CachedJoint(lambda a, syn=syn: syn.table(list(a), True))
        g_mod = learned(syn, J, params["relearn_learner"], first)
        metrics["modified"].append(link_metrics(truth, g_mod, idx))
        vs_clean["modified"].append(link_metrics(ref["clean"], g_mod, idx))
        # Laplace baseline (central Lap(2/eps) per cell)
        learn_and_score(lookup_tables(_laplace_tables(rec, all_combos, eps, rng)), n, "laplace")
    keys = ["acc", "sens", "spec", "avg_recall", "skel_acc", "skel_sens", "skel_spec", "skel_avg_recall"]

    def summarize(table):  # per-run values kept for the thesis's histograms (Fig. 5.4)
        return {m: {key: {"mean": float(np.mean([d[key] for d in lst])), "std": float(np.std([d[key] for d in lst])),
                          "interval": mean_interval([d[key] for d in lst]), "runs": [float(d[key]) for d in lst]}
                    for key in keys}
                for m, lst in table.items()}

    return {"summary": summarize(metrics), "summary_vs_clean_network": summarize(vs_clean),
            "epsilon_per_user": {m: float(np.max(v)) for m, v in eps_used.items()},
            "epsilon_thesis_claim": float(np.log(1 / (1 - p))), "laplace_eps": eps,
            "thesis": {"modified": [0.81, 0.93, 0.6, 0.76], "rr": [0.74, 0.87, 0.47, 0.67],
                       "laplace": [0.71, 0.81, 0.52, 0.66], "order": ["acc", "sens", "spec", "avg_recall"]}}


def _t53_plot(results, params, path):
    keys = ["acc", "sens", "spec", "avg_recall"]
    ms = list(results["summary"])
    hist = all("runs" in results["summary"][m][k] for m in ms for k in keys)
    fig, axes = plt.subplots(1, 5 if hist else 1, figsize=(22 if hist else 7, 4))
    ax = axes[0] if hist else axes
    w = 0.8 / len(ms)
    for i, m in enumerate(ms):
        s = results["summary"][m]
        ax.bar(np.arange(4) + i * w, [s[k]["mean"] for k in keys], w, yerr=[s[k]["std"] for k in keys], label=m)
    ax.set_xticks(np.arange(4) + 0.4 - w / 2, keys)
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    ax.set_title(f"Networks learned under privacy ({params['network']}, Table 5.3)")
    if hist:  # the thesis's Fig. 5.4: one histogram per metric over the runs
        for a, k in zip(axes[1:], keys):
            for m in ms:
                a.hist(results["summary"][m][k]["runs"], bins=15, range=(0, 1), alpha=0.5, label=m)
            a.set_title(f"{k} over {len(results['summary'][ms[0]][k]['runs'])} runs (Fig. 5.4)")
        axes[1].legend(fontsize=7)
    save(fig, path)


register_experiment(Experiment(
    name="thesis-table5.3",
    description="Structures from RRBA, modified RRBA and Laplace tables vs. the true network and vs. the "
                "network learned on the clean records (hill climbing or GreedyBayes)",
    defaults={"network": "survey", "n": 5000, "runs": 500, "k": 2, "p": 0.5, "eps": 0.1,
              "block_factor": 2, "floor": 1e-3, "structure_fraction": 0.3,
              "reference_learner": "hill-climbing", "relearn_learner": "hill-climbing"},
    quick={"runs": 4, "n": 500},
    compute=_t53_compute, plot=_t53_plot,
    reference="seed 004 sections 5.2-5.3.1, Table 5.3",
))


# ------------------------------------------------------------------------------------------
# Tables 5.4 / 5.5 / 5.12 (table quality)
# ------------------------------------------------------------------------------------------
def _t54_compute(params, rng, progress):
    p, eps, alpha = params["p"], params["eps"], params["alpha"]
    res = {}
    for name in params["networks"]:
        net = load_network(name)
        n = params["records"][name]
        fams = _families(net, net.names)
        views = _pack(fams)
        acc = {m: {"l1": [], "js": []} for m in ["modified", "geometric", "rr", "laplace"]}
        eps_user = {"modified": 0.0, "geometric": 0.0, "rr": 0.0}
        for _ in progress(range(params["runs"]), f"{name} runs"):
            rec = net.sample(n, rng)
            truth = {f: rec.table(list(f), True) for f in fams}
            est = {}
            est["rr"], e = rrba_tables(rec, views, p, rng, params["block_factor"], params["floor"])
            eps_user["rr"] = max(eps_user["rr"], e)
            est["modified"], e = rrba_tables(rec, [[f] for f in fams], p, rng, params["block_factor"], params["floor"])
            eps_user["modified"] = max(eps_user["modified"], e)
            est["geometric"], e = _hybrid_tables(rec, views, p, alpha, rng)
            eps_user["geometric"] = max(eps_user["geometric"], e)
            est["laplace"] = _laplace_tables(rec, fams, eps, rng)
            for m in acc:
                acc[m]["l1"].append(np.mean([table_l1(truth[f], est[m][f], n) for f in fams]))
                acc[m]["js"].append(np.mean([table_js(truth[f], est[m][f]) for f in fams]))
        res[name] = {m: {"l1": float(np.mean(v["l1"])), "l1_std": float(np.std(v["l1"])),
                         "js": float(np.mean(v["js"])), "js_std": float(np.std(v["js"])),
                         "l1_runs": [float(x) for x in v["l1"]], "js_runs": [float(x) for x in v["js"]]}
                     for m, v in acc.items()}
        res[name]["epsilon_per_user"] = eps_user
        res[name]["n_tables"] = len(fams)
        res[name]["n_views"] = len(views)
    res["thesis"] = {"table5.4_l1": {"modified": [61.38, 60.3, 51.79], "rr": [120.12, 120.82, 107.96],
                                     "laplace": [124.79, 125.06, 112.93]},
                     "table5.12_l1_geometric": [94.74, 102.52, 97.81],
                     "table5.5_js": {"modified": [0.03, 0.04, 0.03], "rr": [0.07, 0.09, 0.06],
                                     "laplace": [0.08, 0.1, 0.083]},
                     "order": ["survey", "child", "alarm"]}
    return res


def _t54_plot(results, params, path):
    nets = params["networks"]
    hist = all("l1_runs" in results[n][m] for n in nets for m in ("modified", "geometric", "rr", "laplace"))
    if hist:  # the thesis's Figs. 5.5-5.7: histograms over the runs, per network, beside the bars
        fig, grid = plt.subplots(2, 1 + len(nets), figsize=(5 * (1 + len(nets)), 8))
        axes = grid[:, 0]
        for j, n in enumerate(nets):
            for r, key in enumerate(("l1", "js")):
                for m in ("modified", "geometric", "rr", "laplace"):
                    grid[r, j + 1].hist(results[n][m][key + "_runs"], bins=15, alpha=0.5, label=m)
                grid[r, j + 1].set_title(f"{n}: {key} over the runs (Figs. 5.5-5.7)")
        grid[0, 1].legend(fontsize=7)
        _t54_bars(results, nets, axes)
        save(fig, path)
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    _t54_bars(results, nets, axes)
    save(fig, path)


def _t54_bars(results, nets, axes):
    ms = ["modified", "geometric", "rr", "laplace"]
    w = 0.8 / len(ms)
    for ax, key in zip(axes, ["l1", "js"]):
        for i, m in enumerate(ms):
            ax.bar(np.arange(len(nets)) + i * w, [results[n][m][key] for n in nets], w, label=m)
        ax.set_xticks(np.arange(len(nets)) + 0.4 - w / 2, nets)
        ax.set_title({"l1": "L1 (counts), Tables 5.4/5.12", "js": "Jensen-Shannon, Table 5.5"}[key])
        ax.set_yscale("log")
    axes[0].legend(fontsize=8)


register_experiment(Experiment(
    name="thesis-table5.4",
    description="Quality of noisy attribute-parent tables (L1, Jensen-Shannon): modified RRBA, RRBA, "
                "RR+geometric, Laplace on Survey, Child, Alarm",
    defaults={"networks": ["survey", "child", "alarm"], "records": {"survey": 500, "child": 10000, "alarm": 10000},
              "runs": 500, "p": 0.5, "eps": 0.1, "alpha": 0.5, "block_factor": 2, "floor": 1e-3},
    quick={"runs": 1, "networks": ["survey", "child"], "records": {"survey": 500, "child": 2000, "alarm": 2000}},
    compute=_t54_compute, plot=_t54_plot,
    reference="seed 004 sections 5.3.2, 5.3.3, 5.5; Tables 5.4, 5.5, 5.12",
))


# ------------------------------------------------------------------------------------------
# Table 4.2 (section 4.4.3, Example 4.4.4): consistency between two noisy tables
# ------------------------------------------------------------------------------------------
#: the printed tables, cells in the order (A1, A2) = 00, 01, 10, 11 (and (A1, A3) likewise)
_T42 = {"before_1": [0.1, 0.4, 0.3, 0.2], "before_2": [0.2, 0.4, 0.3, 0.1],
        "after_1": [0.175, 0.325, 0.225, 0.275], "after_2": [0.375, 0.125, 0.125, 0.375]}


def _t42_compute(params, rng, progress):
    b1, b2 = (np.asarray(_T42[k]).reshape(2, 2) for k in ("before_1", "before_2"))
    a1, a2 = (np.asarray(_T42[k]).reshape(2, 2) for k in ("after_1", "after_2"))

    def change(t1, t2):
        return float(((t1 - b1) ** 2).sum() + ((t2 - b2) ** 2).sum())

    ls = consistent_tables({("A1", "A2"): b1, ("A1", "A3"): b2}, {"A1": 2, "A2": 2, "A3": 2})
    l1, l2 = ls[("A1", "A2")], ls[("A1", "A3")]
    # the printed objective min sum T^2 (both tables), T >= 0, under the example's constraints:
    # equal A1 marginals, each table's other marginal (A2, A3) kept, each table summing to 1. The
    # minimum-norm solution of the equalities is A^+ b; it is the QP's solution when it is >= 0
    # (then the bounds are inactive and the KKT conditions hold).
    E = np.eye(2)
    rows = [np.concatenate([np.kron(E[i], np.ones(2)), -np.kron(E[i], np.ones(2))]) for i in range(2)]
    rows += [np.concatenate([np.kron(np.ones(2), E[j]), np.zeros(4)]) for j in range(2)]
    rows += [np.concatenate([np.zeros(4), np.kron(np.ones(2), E[j])]) for j in range(2)]
    A = np.array(rows)
    rhs = np.concatenate([[0.0, 0.0], b1.sum(0), b2.sum(0)])
    x = np.linalg.pinv(A) @ rhs
    f1, f2 = x[:4].reshape(2, 2), x[4:].reshape(2, 2)
    qp_ok = bool(np.all(x >= -1e-12) and np.allclose(A @ x, rhs))
    return {
        "printed": _T42,
        "printed_checks": {"a1_marginals_agree": bool(np.allclose(a1.sum(1), a2.sum(1))),
                           "a2_marginal_kept": bool(np.allclose(a1.sum(0), b1.sum(0))),
                           "a3_marginal_kept": bool(np.allclose(a2.sum(0), b2.sum(0))),
                           "a1_marginal_after": a1.sum(1).tolist(), "squared_change": change(a1, a2)},
        "least_squares": {"after_1": l1.ravel().tolist(), "after_2": l2.ravel().tolist(),
                          "a1_marginal": l1.sum(1).tolist(), "squared_change": change(l1, l2)},
        "printed_objective": {"after_1": f1.ravel().tolist(), "after_2": f2.ravel().tolist(),
                              "a1_marginal": f1.sum(1).tolist(), "squared_change": change(f1, f2),
                              "nonnegative_min_norm_solution": qp_ok},
    }


def _t42_plot(results, params, path):
    fig, ax = plt.subplots(figsize=(8, 3.5))
    labels = ["T1 00", "T1 01", "T1 10", "T1 11", "T2 00", "T2 01", "T2 10", "T2 11"]
    xs = np.arange(8)
    pr = results["printed"]
    series = [("before", pr["before_1"] + pr["before_2"]), ("printed after", pr["after_1"] + pr["after_2"]),
              ("least squares", results["least_squares"]["after_1"] + results["least_squares"]["after_2"]),
              ("printed objective", results["printed_objective"]["after_1"] + results["printed_objective"]["after_2"])]
    for i, (name, vals) in enumerate(series):
        ax.bar(xs + (i - 1.5) * 0.2, vals, width=0.2, label=name)
    ax.set_xticks(xs, labels)
    ax.set_ylabel("cell probability")
    ax.legend(fontsize=7)
    ax.set_title("Table 4.2: consistency of two noisy tables on A1")
    save(fig, path)


register_experiment(Experiment(
    name="thesis-table4.2",
    description="Table 4.2 (Example 4.4.4): the printed consistent tables against the least-squares fit and the "
                "printed objective's minimum",
    defaults={}, quick={},
    compute=_t42_compute, plot=_t42_plot,
    reference="seed 004 section 4.4.3, Example 4.4.4, Table 4.2",
))


# ------------------------------------------------------------------------------------------
# Figures 4.5-4.7: the level against p, and the convergence of the block protocol
# ------------------------------------------------------------------------------------------
def _convergence_blocks(run, alpha):
    """Block index of section 4.5's rule for a run: ``(first, settled)``; ``first`` the first block
    ``k`` with ``|T^{B_k} - T^{B_{k-1}}| < delta*`` in every cell (``block_convergence``), ``settled``
    the block after which it holds at every later block ("remains valid throughout the blocks",
    4.7.1); ``None`` when never."""
    from scipy.stats import norm
    z = norm.ppf(1 - alpha / 2)
    est = np.asarray(run.estimates)
    sizes = np.asarray(run.sizes, dtype=float)
    width = 2 * z * np.sqrt(np.clip(est[1:] * (1 - est[1:]), 0, None) / sizes[1:, None])
    ok = np.all(np.abs(est[1:] - est[:-1]) < np.maximum(width, 1e-12), axis=1)  # ok[k-1]: block k
    first = int(np.argmax(ok)) + 1 if ok.any() else None
    if not ok[-1]:
        return first, None
    fails = np.flatnonzero(~ok)
    return first, (int(fails[-1]) + 2 if fails.size else 1)


def _f46_cell(v, s, p, params, rng):
    firsts, settled, corners = [], [], 0
    for _ in range(params["trials"]):
        cells = (rng.random(params["blocks"] * s) >= v).astype(np.int64)  # cell 0 = the value, P = v
        run = aggregate_blocks(cells, 2, p, s, rng, floor=params["floor"])
        f, st = _convergence_blocks(run, params["alpha"])
        firsts.append(np.nan if f is None else (f + 1) * s)  # tuples emitted up to block f
        settled.append(np.nan if st is None else (st + 1) * s)
        if f is not None:  # both estimates clamped by Eq. 4.4 to a corner (a zero cell)
            corners += int(run.estimates[f].min() < 1e-9 and run.estimates[f - 1].min() < 1e-9)
    firsts, settled = np.asarray(firsts), np.asarray(settled)
    return {"converged_first": float(np.mean(~np.isnan(firsts))),
            "first_at_corners": corners / max(1, int(np.sum(~np.isnan(firsts)))),
            "tuples_first": float(np.nanmean(firsts)) if np.any(~np.isnan(firsts)) else None,
            "converged_settled": float(np.mean(~np.isnan(settled))),
            "tuples_settled": float(np.nanmean(settled)) if np.any(~np.isnan(settled)) else None}


def _f46_compute(params, rng, progress):
    eps_curve = {"p": list(np.linspace(0.01, 0.95, 48)), "thesis_eq_4_7": [], "computed": {}}
    eps_curve["thesis_eq_4_7"] = [float(np.log(1 / (1 - p))) for p in eps_curve["p"]]
    for k in params["table_cells"]:  # the level of one report with a uniform fake table of k cells
        eps_curve["computed"][str(k)] = [rrba_epsilon(p, np.full(k, 1.0 / k)) for p in eps_curve["p"]]
    fig46 = {}
    for v in progress(params["probs"], "Fig. 4.6 probabilities"):
        fig46[str(v)] = {str(s): _f46_cell(v, s, params["p"], params, rng) for s in params["block_sizes"]}
    fig47 = {}
    for p in progress(params["p_values"], "Fig. 4.7 values of p"):
        fig47[str(p)] = {str(v): {str(s): _f46_cell(v, s, p, params, rng) for s in params["block_sizes"]}
                         for v in params["probs_47"]}
    return {"fig45": eps_curve, "fig46": fig46, "fig47": fig47}


def _f46_plot(results, params, path):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    c = results["fig45"]
    axes[0].plot(c["p"], c["thesis_eq_4_7"], "k--", label="Eq. 4.7: ln(1/(1-p))")
    for k, e in c["computed"].items():
        axes[0].plot(c["p"], e, label=f"computed, uniform fake table, {k} cells")
    axes[0].set_xlabel("p")
    axes[0].set_ylabel("eps")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=7)
    axes[0].set_title("Fig. 4.5: eps against p")
    for v, row in results["fig46"].items():
        sz = [int(s) for s in row]
        axes[1].plot(sz, [row[s]["tuples_first"] or np.nan for s in row], marker="o", label=f"P={v}")
    axes[1].set_xlabel("block size s")
    axes[1].set_ylabel("tuples at first convergence")
    axes[1].set_title(f"Fig. 4.6 (p={params['p']})")
    axes[1].legend(fontsize=7)
    for p, by_v in results["fig47"].items():
        sz = [int(s) for s in next(iter(by_v.values()))]
        frac = [np.mean([by_v[v][str(s)]["converged_settled"] for v in by_v]) for s in sz]
        axes[2].plot(sz, frac, marker="o", label=f"p={p}")
    axes[2].set_xlabel("block size s")
    axes[2].set_ylabel("share of runs settled by the last block")
    axes[2].set_title("Fig. 4.7: convergence against p")
    axes[2].legend(fontsize=7)
    save(fig, path)


register_experiment(Experiment(
    name="thesis-fig4.6",
    description="The level against p (Fig. 4.5) and the block protocol's convergence against block size and p "
                "(Figs. 4.6, 4.7)",
    defaults={"probs": [0.0285, 0.072, 0.116, 0.224, 0.356, 0.446, 0.524, 0.732], "block_sizes": [18, 50, 150, 250],
              "p": 0.5, "p_values": [0.009, 0.048, 0.095, 0.139, 0.221], "probs_47": [0.072, 0.116, 0.356, 0.446],
              "trials": 40, "blocks": 200, "alpha": 0.05, "floor": 1e-3, "table_cells": [2, 14, 60, 103]},
    quick={"probs": [0.116, 0.446], "block_sizes": [18, 150], "p_values": [0.048, 0.221], "probs_47": [0.356],
           "trials": 6, "blocks": 40},
    compute=_f46_compute, plot=_f46_plot,
    reference="seed 004 sections 4.5.1, 4.7.1, 4.7.2; Figures 4.5, 4.6, 4.7; Eq. 4.7",
))


# ------------------------------------------------------------------------------------------
# Section 5.4.5: the block-wise LP update of C (the hybrid of randomized response and C)
# ------------------------------------------------------------------------------------------
def _s545_compute(params, rng, progress):
    import warnings

    net = load_network("survey")
    attrs = params["attributes"]
    p, alpha, s = params["p"], params["alpha"], params["block_size"]
    out = {"updated": {"inf_blocks": [], "levels": [], "l1_pooled": [], "l1_last_block": []},
           "fixed": {"levels": [], "l1_pooled": [], "l1_last_block": []}}
    C0 = truncated_geometric(4, alpha)

    def run(cells, truth, update):
        C, blocks, levels, last = C0, [], [], None
        for lo in range(0, cells.size, s):
            with warnings.catch_warnings():  # an infinite level is what is measured here, not news
                warnings.simplefilter("ignore", PrivacyWarning)
                mech = MatrixMechanism(rows=hybrid_channel(C, p))
                levels.append(hybrid_epsilon(C, p))
            counts = np.bincount(mech.sample(cells[lo:lo + s], rng), minlength=4).astype(float)
            live = np.flatnonzero(counts)
            blocks.append(mech.likelihood_block(live, counts[live]))
            last = em([blocks[-1]], 4).theta  # the block's reconstruction (the engine's certified MLE)
            if update:  # the thesis: the reconstruction is the prior of the next block's LP (5.4.3)
                C = optimal_mechanism(np.maximum(last, 0), alpha)
        pooled = em(blocks, 4).theta  # every block's reports by their own channel (GIBU)
        return levels, float(np.abs(pooled - truth).sum()), float(np.abs(last - truth).sum())

    for _ in progress(range(params["runs"]), "runs"):
        rec = net.sample(params["n"], rng)
        cells = rec.cells(attrs)
        truth = rec.table(attrs, True).ravel()
        for arm, update in (("updated", True), ("fixed", False)):
            levels, l1p, l1l = run(cells, truth, update)
            out[arm]["levels"].append(levels)
            out[arm]["l1_pooled"].append(l1p)
            out[arm]["l1_last_block"].append(l1l)
            if update:
                out[arm]["inf_blocks"].append(int(np.sum(~np.isfinite(levels))))
    blocks = len(out["updated"]["levels"][0])
    for arm in out.values():
        lv = np.asarray(arm["levels"], dtype=float)
        arm["share_blocks_infinite"] = float(np.mean(~np.isfinite(lv)))
        arm["share_runs_with_infinite_block"] = float(np.mean(np.any(~np.isfinite(lv), axis=1)))
        finite = lv[np.isfinite(lv)]
        arm["finite_level_range"] = [float(finite.min()), float(finite.max())] if finite.size else None
        for key in ("l1_pooled", "l1_last_block"):
            arm[key + "_mean"] = mean_interval(arm[key])
    return {"arms": out, "blocks_per_run": blocks, "fixed_level": hybrid_epsilon(C0, p)}


def _s545_plot(results, params, path):
    fig, ax = plt.subplots(figsize=(7, 4))
    lv = np.asarray(results["arms"]["updated"]["levels"], dtype=float)
    share = np.mean(~np.isfinite(lv), axis=0)
    ax.bar(np.arange(1, lv.shape[1] + 1), share, color="tab:red", label="LP-updated C: level infinite")
    ax.set_xlabel("block")
    ax.set_ylabel("share of runs")
    ax.set_ylim(0, 1)
    ax.set_title(f"Section 5.4.5: the LP update of C (p={params['p']}, alpha={params['alpha']})")
    ax.legend()
    save(fig, path)


register_experiment(Experiment(
    name="thesis-5.4.5",
    description="The block-wise LP update of C (sections 5.4.3, 5.4.5): how often the updated hybrid has no finite "
                "LDP level, and its accuracy against keeping C fixed",
    defaults={"n": 5000, "block_size": 500, "p": 0.5, "alpha": 0.5, "runs": 20, "attributes": ["E", "R"]},
    quick={"n": 1500, "runs": 2},
    compute=_s545_compute, plot=_s545_plot,
    reference="seed 004 sections 5.4.3 (LP 5.10) and 5.4.5 (the update of C' per block), Table 5.8",
))


# ------------------------------------------------------------------------------------------
# Figure 7.3 and Figure 7.4
# ------------------------------------------------------------------------------------------
def _f73_compute(params, rng, progress):
    out = {}
    for n in progress(params["ns"], "table sizes"):
        # shifts chosen so that the true G^2 (about 16 s^2 / n) spans 0..g2_max for every n
        tables, g2 = g2_table_grid(n, params["steps"], float(np.sqrt(params["g2_max"] * n / 16)))
        probs = [flip_probability(t, params["eps"], rng, trials=params["trials"], statistic="g2") for t in tables]
        out[str(n)] = {"g2": g2, "p_unchanged": [1 - q for q, _ in probs], "stderr": [s for _, s in probs]}
    # section 7.3 as printed (no randomness): Lemma 7.3.1's numbers and Eq. 7.7 on the thesis's
    # starting table (w_1 = 5, margins n/2) and on the grid's tables
    as_written = {"lemma_7_3_1": lemma_7_3_1(params["eps"]), "eq77": {}}
    for n in params["ns"]:
        tables, _ = g2_table_grid(n, params["steps"], float(np.sqrt(params["g2_max"] * n / 16)))
        vals = [eq77_as_written(t, params["eps"]) for t in tables]
        start = eq77_as_written([5, n / 2 - 5, n / 2 - 5, 5], params["eps"])
        defined = [v["value"] for v in vals if v["defined"]]
        as_written["eq77"][str(n)] = {"start_table_defined": start["defined"], "start_reason": start["reason"],
                                      "grid_defined": len(defined), "grid_tables": len(vals),
                                      "grid_min": min(defined) if defined else None,
                                      "grid_max": max(defined) if defined else None}
    return {"curves": out, "eps": params["eps"], "as_written": as_written}


def _f73_plot(results, params, path):
    fig, ax = plt.subplots(figsize=(7, 4))
    for n, c in results["curves"].items():
        ax.plot(np.asarray(c["g2"]), c["p_unchanged"], label=f"n={n}")
    ax.axvline(3.841, color="k", ls=":", lw=1)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlim(left=0)
    ax.set_xlabel("G^2 of the true table")
    ax.set_ylabel("P(verdict unchanged)")
    ax.legend()
    ax.set_title(f"Laplace noise (eps={results['eps']}) and the G^2 verdict (thesis Fig. 7.3)")
    save(fig, path)


register_experiment(Experiment(
    name="thesis-fig7.3",
    description="Probability that Lap(2/eps) noise leaves the G^2 verdict of a 2x2 table unchanged",
    defaults={"ns": [2000, 7000, 12000, 22000], "eps": 0.1, "steps": 40, "g2_max": 40.0, "trials": 20000},
    quick={"steps": 8, "trials": 2000, "ns": [2000, 22000]},
    compute=_f73_compute, plot=_f73_plot,
    reference="seed 004 section 7.3, Figure 7.3",
))


def _f74_compute(params, rng, progress):
    net = load_network("survey")
    rec = net.sample(params["n"], rng)
    T = rec.table(["O", "S", "R"])
    out = {"true_table_rejects_H0": chi2_test(T, params["alpha"]), "n": params["n"], "accept_rate": {}}
    exact = net.joint(["O", "S", "R"])
    out["population_cmi_bits"] = float(
        sum(exact[:, :, r].sum() * _mi2(exact[:, :, r]) for r in range(exact.shape[2])))
    for eps in progress(params["eps"], "eps"):
        out["accept_rate"][str(eps)] = acceptance_rate(T, eps, rng, trials=params["trials"], alpha=params["alpha"])
    out["thesis_accept_rate"] = {"0.1": 0.122, "0.25": 0.291, "0.35": 0.905}
    return out


def _mi2(t):
    t = t / t.sum()
    pa, pb = t.sum(1, keepdims=True), t.sum(0, keepdims=True)
    live = t > 0
    return float((t[live] * np.log2(t[live] / (pa * pb)[live])).sum())


def _f74_plot(results, params, path):
    fig, ax = plt.subplots(figsize=(6, 4))
    eps = list(results["accept_rate"])
    ax.bar(np.arange(len(eps)) - 0.2, [results["accept_rate"][e] for e in eps], 0.4, label="ours (Monte Carlo)")
    ax.bar(np.arange(len(eps)) + 0.2, [results["thesis_accept_rate"].get(e, np.nan) for e in eps], 0.4, label="thesis")
    ax.set_xticks(range(len(eps)), [f"eps={e}" for e in eps])
    ax.set_ylabel("P(accept H0: O ⊥ S | R)")
    ax.legend()
    ax.set_title("Survey, Laplace-noised table (thesis Fig. 7.4)")
    save(fig, path)


register_experiment(Experiment(
    name="thesis-fig7.4",
    description="How often the chi-square test accepts O ⊥ S | R on a Lap(2/eps)-noised Survey table",
    defaults={"n": 500, "eps": [0.1, 0.25, 0.35], "trials": 1000, "alpha": 0.05},
    quick={"trials": 200},
    compute=_f74_compute, plot=_f74_plot,
    reference="seed 004 section 7.4, Figure 7.4",
))
