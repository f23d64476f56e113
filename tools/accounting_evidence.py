"""Measurements for docs/accounting.md and decision 0051 (correctness only, no timings; seconds).

Run by `make accounting-evidence`: writes docs/results/accounting.json (atomically), prints it,
and rewrites the generated tables of docs/accounting.md and decision 0051 from it (between the
markers ``<!-- accounting-evidence:NAME -->`` and ``<!-- /accounting-evidence -->``; ``--docs-only``
re-renders them from the committed JSON).

1. Reports drawn from ONE memo: the exact joint channel of ``t`` reports of the longitudinal
   oracles (``P(z_1..z_t | x) = sum_m P(m | x) prod_i P(z_i | m)``, enumerated for k = 3) and its
   LDP level, against ``t * eps_1`` (what per-report composition would say), ``eps_perm`` and the
   ledger's charge ``min(eps_perm, t * eps_inst)`` (``eps_inst``: L-GRR's second round alone).
2. The PLD accountant (dp-accounting) against basic composition, for ``r`` reports of k-RR and
   of a generic eps-LDP mechanism, at delta = 1e-6, and the effect of the loss grid (1e-3 vs 1e-4).
3. ``explain_level`` at three levels; the shuffled central target's largest local level at the
   point of FMT21's calculator.
"""
from __future__ import annotations

import json
import math
import pathlib
import re
import sys

import numpy as np

from localpriv import parse
from localpriv.analysis.shuffle import largest_local_epsilon, shuffle_epsilon
from localpriv.data.formats import atomic_output
from localpriv.mechanisms.accounting import PLD_DISCRETIZATION, compose, explain_level, release_of
from localpriv.mechanisms.privacy import ldp_epsilon

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "accounting.json"
DOCS = (ROOT / "docs" / "accounting.md", ROOT / "docs" / "decisions" / "0051-privacy-ledger.md",
        ROOT / "docs" / "decisions" / "0052-advisor-shuffled-central-target.md")
K = 3


def _bits(k: int) -> np.ndarray:
    return (np.arange(2 ** k)[:, None] >> np.arange(k)[None, :]) & 1  # rows: bit vectors


def _round(p: float, q: float, truth: np.ndarray, out: np.ndarray) -> np.ndarray:
    """P(out row | truth row) for independent bits: 1 w.p. p if the truth bit is 1, q if 0."""
    one = np.where(truth[:, None, :] == 1, p, q)
    return np.prod(np.where(out[None, :, :] == 1, one, 1 - one), axis=2)


def rounds(mech) -> tuple[np.ndarray, np.ndarray]:
    """(first round: inputs x memos, second round: memos x reports) of a longitudinal oracle."""
    if mech.spec_name == "lgrr":
        def grr(pq):
            m = np.full((K, K), (1 - pq[0]) / (K - 1))
            np.fill_diagonal(m, pq[0])
            return m
        return grr(mech.first), grr(mech.second)
    b = _bits(K)
    onehot = np.eye(K, dtype=int)
    return _round(*mech.first, onehot, b), _round(*mech.second, b, b)


def joint(first: np.ndarray, second: np.ndarray, t: int) -> np.ndarray:
    """P(z_1..z_t | x): rows inputs, columns the t-tuples of reports."""
    per_memo = second
    for _ in range(t - 1):
        per_memo = (per_memo[:, :, None] * second[:, None, :]).reshape(second.shape[0], -1)
    return first @ per_memo


def memo_rows() -> list[dict]:
    rows = []
    for name in ("lgrr", "lsue", "loue", "lsoue", "losue"):
        for eps_perm, eps_1 in ((2.0, 1.0), (4.0, 0.5), (1.0, 0.2)):
            mech = parse(f"{name}(k={K},eps_perm={eps_perm},eps_1={eps_1})")
            first, second = rounds(mech)
            assert abs(ldp_epsilon(joint(first, second, 1)) - mech.epsilon_ldp()) < 1e-9
            for t in (2, 3, 4):
                level = ldp_epsilon(joint(first, second, t))
                inst = getattr(mech, "epsilon_instantaneous", None)
                cap = min(mech.epsilon_perm(), t * inst()) if inst is not None else mech.epsilon_perm()
                rows.append({"spec": str(mech), "t": t, "joint_level": level, "t_eps_1": t * mech.epsilon_ldp(),
                             "eps_perm": mech.epsilon_perm(), "t_eps_inst": None if inst is None else t * inst(),
                             "charged": cap,
                             "exceeds_t_eps_1": bool(level > t * mech.epsilon_ldp() * (1 + 1e-9)),
                             "within_eps_perm": bool(level <= mech.epsilon_perm() * (1 + 1e-9)),
                             "within_charge": bool(level <= cap * (1 + 1e-9))})
    return rows


def pld_rows() -> list[dict]:
    rows = []
    for spec in ("krr(k=4,eps=1.0)", "oue(k=4,eps=1.0)", "krr(k=4,eps=0.5)", "oue(k=4,eps=0.5)",
                 "krr(k=100,eps=2.0)"):
        mech = parse(spec)
        for r in (1, 10, 100, 1000):
            comp = compose([release_of(mech, r)], delta=1e-6)
            rows.append({"spec": spec, "reports": r, "basic": comp.epsilon, "pld": comp.pld_epsilon,
                         "model": comp.models[0]["model"], "accountant": comp.accountant})
    return rows


def grid_rows() -> list[dict]:
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld
    rows = []
    for eps, r in ((1.0, 100), (0.5, 1000), (0.1, 1000)):
        got = {}
        for grid in (1e-3, 1e-4):
            d = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, 0.0),
                                            value_discretization_interval=grid)
            got[str(grid)] = float(d.self_compose(r).get_epsilon_for_delta(1e-6))
        rows.append({"epsilon": eps, "reports": r, "pld_by_grid": got,
                     "relative_difference": abs(got["0.001"] - got["0.0001"]) / got["0.0001"]})
    return rows


def shuffle_point() -> dict:
    """FMT21's calculator point (eps0 = 4 at n = 10^5, delta = 1e-6 gives 0.17) read backwards."""
    n, target, delta = 10 ** 5, 0.17, 1e-6
    x = largest_local_epsilon(n, target, delta)
    return {"n": n, "central_eps": target, "delta": delta, "eps0": x,
            "central_at_eps0": shuffle_epsilon(x, n, delta), "central_above": shuffle_epsilon(1.001 * x, n, delta)}


def _g(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}"


def tables(out: dict) -> dict[str, str]:
    """The generated Markdown blocks, by marker name, from the evidence JSON."""
    m = out["memo"]
    lines = ["| spec | reports t | joint level of the t reports | t eps_1 | eps_perm | t eps_inst | charged |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in m["rows"]:
        if r["spec"].startswith(("loue", "lgrr")) or r["exceeds_t_eps_1"]:
            mark = " (above t eps_1)" if r["exceeds_t_eps_1"] else ""
            inst = "--" if r["t_eps_inst"] is None else _g(r["t_eps_inst"])
            lines.append(f"| `{r['spec']}` | {r['t']} | {_g(r['joint_level'])}{mark} | {_g(r['t_eps_1'])} | "
                         f"{_g(r['eps_perm'])} | {inst} | {_g(r['charged'])} |")
    memo = "\n".join(lines) + (f"\n\nIn all, {m['exceeding_t_eps_1']} of {m['cases']} cases (lgrr, lsue, loue, lsoue, "
                               f"losue at k = {m['k']}; three (eps_perm, eps_1) pairs; t = 2, 3, 4) exceed t eps_1, by "
                               f"up to {_g(100 * (m['largest_ratio_to_t_eps_1'] - 1), 3)}%; "
                               f"{'every one' if m['all_within_eps_perm'] else 'NOT every one'} is within eps_perm, "
                               f"and {'every one' if m['all_within_charge'] else 'NOT every one'} within the ledger's "
                               f"charge (min(eps_perm, t eps_inst) where the family gives eps_inst, else eps_perm).")
    p = out["pld"]
    lines = [f"| spec | reports | basic eps | PLD eps at delta {p['delta']:g} | PLD model |",
             "|---|---:|---:|---:|---|"]
    for r in p["rows"]:
        lines.append(f"| `{r['spec']}` | {r['reports']:,} | {_g(r['basic'])} | {_g(r['pld'])} | {r['model']} |")
    worst = max(g["relative_difference"] for g in p["grid"])
    pld = "\n".join(lines) + (f"\n\nThe loss grid of {p['discretization']:g} changes eps by at most a relative "
                              f"{worst:.1e} against a grid of 1e-4 (eps-DP PLD, {len(p['grid'])} cases).")
    head = ["| spec | reports t | joint level of the t reports | t eps_1 | eps_perm |", "|---|---:|---:|---:|---:|"]
    short = head + [
        f"| `{r['spec']}` | {r['t']} | {_g(r['joint_level'])} | {_g(r['t_eps_1'])} | {_g(r['eps_perm'])} |"
        for r in m["rows"] if r["exceeds_t_eps_1"]]
    memo_short = "\n".join(short) + "\n\n" + memo.rsplit("\n\n", 1)[1]
    pld_short = "\n".join(pld.split("\n")[:2] + [
        f"| `{r['spec']}` | {r['reports']:,} | {_g(r['basic'])} | {_g(r['pld'])} | {r['model']} |"
        for r in p["rows"] if r["reports"] in (100, 1000) and r["spec"].endswith("eps=1.0)")])
    sh = out["shuffle"]
    shuffle = (f"Reading the calculator's point backwards: `largest_local_epsilon({sh['n']:,}, {sh['central_eps']:g}, "
               f"{sh['delta']:g})` = {_g(sh['eps0'], 5)}, whose shuffled level is {_g(sh['central_at_eps0'], 5)}; "
               f"0.1% above it the level is {_g(sh['central_above'], 5)}, past the target.")
    meaning = "\n".join(f"- `explain_level({e['epsilon']:g})`: {e['text']}" for e in out["meaning"])
    return {"memo": memo, "pld": pld, "meaning": meaning, "memo-short": memo_short, "pld-short": pld_short,
            "shuffle": shuffle}


def render(out: dict, paths=DOCS) -> None:
    """Rewrite the marked blocks of ``paths`` from ``out``."""
    blocks = tables(out)
    for path in paths:
        text = path.read_text()
        for name, body in blocks.items():
            text = re.sub(rf"(<!-- accounting-evidence:{name} -->\n)(?:.*?\n)?(<!-- /accounting-evidence -->)",
                          lambda mt, b=body: mt.group(1) + b + "\n" + mt.group(2), text, flags=re.S)
        with atomic_output(path) as tmp:
            tmp.write_text(text)


def main() -> None:
    if "--docs-only" in sys.argv[1:]:
        render(json.loads(OUT.read_text()))
        return
    memo = memo_rows()
    out = {
        "memo": {"k": K, "rows": memo,
                 "exceeding_t_eps_1": sum(r["exceeds_t_eps_1"] for r in memo), "cases": len(memo),
                 "all_within_eps_perm": all(r["within_eps_perm"] for r in memo),
                 "all_within_charge": all(r["within_charge"] for r in memo),
                 "largest_ratio_to_t_eps_1": max(r["joint_level"] / r["t_eps_1"] for r in memo)},
        "pld": {"delta": 1e-6, "discretization": PLD_DISCRETIZATION, "rows": pld_rows(), "grid": grid_rows()},
        "meaning": [{"epsilon": e, "text": explain_level(e)} for e in (0.5, 1.0, 4.0)],
        "shuffle": shuffle_point(),
    }
    with atomic_output(OUT) as tmp:
        tmp.write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
    json.dump(out, sys.stdout, indent=1)
    print()
    render(out)
    assert not math.isnan(out["memo"]["largest_ratio_to_t_eps_1"])


if __name__ == "__main__":
    main()
