"""Measurements for docs/accounting.md and decision 0051 (correctness only, no timings; seconds).

Run by `make accounting-evidence`: writes docs/results/accounting.json (atomically) and prints it.

1. Reports drawn from ONE memo: the exact joint channel of ``t`` reports of the longitudinal
   oracles (``P(z_1..z_t | x) = sum_m P(m | x) prod_i P(z_i | m)``, enumerated for k = 3) and its
   LDP level, against ``t * eps_1`` (what per-report composition would say) and ``eps_perm``.
2. The PLD accountant (dp-accounting) against basic composition, for ``r`` reports of k-RR and
   of a generic eps-LDP mechanism, at delta = 1e-6, and the effect of the loss grid (1e-3 vs 1e-4).
"""
from __future__ import annotations

import json
import math
import pathlib
import sys

import numpy as np

from localpriv import parse
from localpriv.data.formats import atomic_output
from localpriv.mechanisms.accounting import PLD_DISCRETIZATION, compose, release_of
from localpriv.mechanisms.privacy import ldp_epsilon

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "results" / "accounting.json"
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
                rows.append({"spec": str(mech), "t": t, "joint_level": level, "t_eps_1": t * mech.epsilon_ldp(),
                             "eps_perm": mech.epsilon_perm(),
                             "exceeds_t_eps_1": bool(level > t * mech.epsilon_ldp() * (1 + 1e-9)),
                             "within_eps_perm": bool(level <= mech.epsilon_perm() * (1 + 1e-9))})
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


def main() -> None:
    memo = memo_rows()
    out = {
        "memo": {"k": K, "rows": memo,
                 "exceeding_t_eps_1": sum(r["exceeds_t_eps_1"] for r in memo), "cases": len(memo),
                 "all_within_eps_perm": all(r["within_eps_perm"] for r in memo),
                 "largest_ratio_to_t_eps_1": max(r["joint_level"] / r["t_eps_1"] for r in memo)},
        "pld": {"delta": 1e-6, "discretization": PLD_DISCRETIZATION, "rows": pld_rows(), "grid": grid_rows()},
    }
    with atomic_output(OUT) as tmp:
        tmp.write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
    json.dump(out, sys.stdout, indent=1)
    print()
    assert not math.isnan(out["memo"]["largest_ratio_to_t_eps_1"])


if __name__ == "__main__":
    main()
