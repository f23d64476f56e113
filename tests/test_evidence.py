"""The estimator evidence's bookkeeping (reproductions/evidence.py): the paired rule, the regret,
the support-count observations, resume by cell and by estimator, chunks merged, and its data."""
from pathlib import Path

import numpy as np
import pytest

from localpriv.data.observations import Observations
from localpriv.estimators import default_estimator, fit
from localpriv.mechanisms import parse
from localpriv.utils.validation import LocalPrivError
from reproductions.evidence import (
    ADULT_COLUMNS,
    DEFAULTS,
    SUPPORT_COUNT_ESTIMATORS,
    TEST,
    analyze_cell,
    assemble,
    dataset,
    derive_adult_columns,
    draw_observations,
    in_chunk,
    paired_verdict,
    plan,
    render_full,
    render_regret,
    render_summary,
    run_cells,
    summarize,
    support_count_observations,
)

SHARED = Path("/work/shared/data")
SMALL = {**DEFAULTS, **TEST, "data": ["workclass"], "mechanisms": ["k-RR"], "n": [2_000], "eps_ldp": [1.0, 2.0],
         "runs": 4, "estimators": ["inv-p", "norm-sub"], "chunk": "0/1"}


def test_paired_verdict_worse_tied_best():
    rng = np.random.default_rng(0)
    best = rng.uniform(1.0, 2.0, 20)
    worse = paired_verdict(best + 0.5 + rng.uniform(0, 0.1, 20), best)
    assert worse["verdict"] == "worse" and worse["significant"] and worse["pairs"] == 20
    better = paired_verdict(best - 0.5, best)
    assert better["verdict"] == "best" and better["significant"]
    # differences symmetric around a tiny positive shift: higher mean, no evidence of a difference
    d = np.tile([0.3, -0.29], 10)
    tied = paired_verdict(best + d, best)
    assert tied["verdict"] == "tied" and not tied["significant"]
    same = paired_verdict(best, best)  # the default is the best estimator itself
    assert same == {"verdict": "best", "p": 1.0, "significant": False, "pairs": 20}
    assert paired_verdict([None, 1.0], [1.0, None])["verdict"] is None


def _cell(values: dict, default_method: str, runs: int = 3) -> dict:
    def est(v):
        return {"values": {"tv": v}, "summary": {"tv": {"mean": float(np.mean(v)), "ok": len(v)}}}
    return {"key": "k", "data": "workclass", "mechanism": "k-RR", "eps_ldp": 1.0, "n": 10, "runs": runs,
            "primary": "tv", "default_method": default_method, "estimators": {k: est(v) for k, v in values.items()}}


def test_regret_is_the_ratio_to_the_best_mean_and_the_default_is_not_its_own_rival():
    cell = _cell({"ibu": [2.0, 2.0, 2.0], "dirichlet": [4.0, 4.0, 4.0], "norm-sub": [1.0, 1.0, 1.0],
                  "default": [4.0, 4.0, 4.0]}, "dirichlet")
    a = analyze_cell(cell)
    assert a["best_other"] == "norm-sub" and a["oracle"] == "norm-sub"
    assert a["ratio"] == 4.0 and a["ratio_to_best_other"] == 4.0
    assert a["verdict"] == "tied"  # three equal differences: the test cannot reject at 95 %
    best = analyze_cell(_cell({"ibu": [2.0, 2.0, 2.0], "dirichlet": [1.0, 1.0, 1.0], "default": [1.0, 1.0, 1.0]},
                              "dirichlet"))
    assert best["verdict"] == "best" and best["ratio"] == 1.0 and best["oracle"] == "default"
    failed = _cell({"ibu": [1.0, 1.0, 1.0], "default": [1.0, 1.0]}, "ems")
    assert analyze_cell(failed)["verdict"] is None
    assert analyze_cell({**cell, "skipped_cell": "why"}) is None
    s = summarize([cell, _cell({"ibu": [2.0, 2.0, 2.0], "dirichlet": [1.0, 1.0, 1.0],
                                "default": [1.0, 1.0, 1.0]}, "dirichlet")])
    assert s["overall"] == {"cells": 2, "best": 1, "tied": 1, "worse": 0, "best_significant": 0,
                            "median_ratio": 2.5, "max_ratio": 4.0, "share_within_1.1": 0.5}


@pytest.mark.parametrize("spec,k", [("oue(k=6,eps=1.0)", 6), ("olh(k=9,eps=2.0)", 9)])
def test_support_count_observations_give_the_estimates_of_the_reports(spec, k):
    """The nested reports carry the support counts and n of the real reports, so every estimator
    declared to read nothing else returns the same distribution from them."""
    rng = np.random.default_rng(3)
    mech = parse(spec)
    x = rng.choice(k, size=600, p=np.arange(1, k + 1) / np.arange(1, k + 1).sum())
    real = Observations.from_reports(mech, mech.sample(x, rng))
    C = mech.support_counts(real.blocks[0].reports, real.blocks[0].counts)
    proxy = support_count_observations(C, 600, mech.p_star, mech.q_star, None)
    assert proxy.n == 600
    assert np.array_equal(proxy.mechanisms[0].support_counts(proxy.blocks[0].reports, proxy.blocks[0].counts), C)
    for method in SUPPORT_COUNT_ESTIMATORS:
        kw = {"loglik": False} if method != "ibu-support" else {}
        a, b = fit(real, method, **kw).distribution, fit(proxy, method, **kw).distribution
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-12, err_msg=method)
    with pytest.raises(LocalPrivError, match="0..n"):
        support_count_observations(np.array([1.0, 700.0]), 600, 0.5, 0.2, None)


def _values(cells):
    return {c["key"]: {lab: e["values"] for lab, e in c["estimators"].items()} for c in cells}


def test_resume_by_estimator_and_chunks_merged_equal_one_run(tmp_path):
    base = 12345
    one = {**SMALL, "cells_dir": str(tmp_path / "one"), "estimators": ["inv-p", "norm-sub", "ibu"]}
    run_cells(one, base)
    # resume: a first pass with two estimators, then the third added: only its column runs
    inc = {**SMALL, "cells_dir": str(tmp_path / "inc")}
    assert run_cells(inc, base)["ran"] == 2
    again = run_cells(inc, base)
    assert again == {"cells": 2, "reused": 2, "ran": 0}
    assert run_cells({**inc, "estimators": one["estimators"]}, base)["ran"] == 2
    full = assemble([one["cells_dir"]], one)
    assert full["complete"] and full["cells_done"] == 2
    assert _values(assemble([inc["cells_dir"]], one)["cells"]) == _values(full["cells"])
    # chunks run apart, read together
    keys = [c["key"] for c in plan(one)]
    assert sorted(k for i in range(2) for k in keys if in_chunk(k, f"{i}/2")) == sorted(keys)
    for i in range(2):
        run_cells({**one, "cells_dir": str(tmp_path / f"chunk{i}"), "chunk": f"{i}/2"}, base)
    merged = assemble([tmp_path / "chunk0", tmp_path / "chunk1"], one)
    assert merged["complete"] and _values(merged["cells"]) == _values(full["cells"])
    # the default column is the estimator it names, same generator: equal values, not its own rival
    for c in full["cells"]:
        assert c["default_method"] == default_estimator(dataset(c["data"]).domain) and "default" in c["estimators"]
        assert c["estimators"]["default"]["summary"]["tv"]["ok"] == 4
    assert full["summary"]["overall"]["cells"] == 2
    # the report names a run that is not the evidence as such, and keeps the tables' columns
    rec = {"name": "estimator-evidence-test", "params": one, "results": full}
    head = render_summary(rec).splitlines()[0]
    assert head.startswith("**QUICK RUN") and "2 of 2 cells" in head and "2^(1-4) = 0.125" in head
    page = render_full(rec).splitlines()
    rows = [ln for ln in page if ln.startswith("| workclass")]
    assert len(rows) == 2 and all(ln.count("|") == page[6].count("|") for ln in rows)


def test_bounds_are_refused_in_one_line():
    with pytest.raises(LocalPrivError, match="runs must be in 1..1000"):
        plan({**SMALL, "runs": 5_000})
    with pytest.raises(LocalPrivError, match="unknown data set"):
        plan({**SMALL, "data": ["nope"]})
    with pytest.raises(LocalPrivError, match="chunk must be"):
        in_chunk("a", "2/2")


def test_data_sets_and_top10_recall():
    hours, country = dataset("hours"), dataset("native-country")
    assert hours.domain.size == 99 and hours.theta[40 - 1] == pytest.approx(0.467, abs=0.001)
    assert country.theta.size == 41 and country.theta.max() == pytest.approx(0.913, abs=0.001)
    z = dataset("zipf-1k")
    assert z.theta.size == 1_000 and z.theta[0] / z.theta[9] == pytest.approx(10 ** 1.1)
    assert z.errors(z.theta)["recall10"] == 1.0
    rev = z.theta[::-1].copy()
    assert z.errors(rev)["recall10"] == 0.0
    assert dataset("workclass").errors(dataset("workclass").theta)["recall10"] is None  # 8 values


@pytest.mark.skipif(not (SHARED / "adult.data").exists(), reason="the reference data are not on this machine")
def test_adult_columns_are_derived_from_the_reference_data():
    assert ADULT_COLUMNS.read_text() == derive_adult_columns(SHARED)


@pytest.mark.parametrize("kind,spec", [("multinomial", "krr(eps=1.0)"), ("support-counts", "oue(eps=1.0)"),
                                       ("support-counts", "olh(eps=1.0)")])
def test_counts_level_draws_have_the_mean_of_the_reports(kind, spec):
    """Report counts (k-RR) and support counts (OUE, OLH) average ``n (q* + (p* - q*) f)``, within
    5 standard errors (a count's sd is at most sqrt(n)/2) over 300 draws."""
    d = dataset("workclass")
    mech = parse(spec, d.domain)
    p, q = (mech.p_keep, mech.p_other) if kind == "multinomial" else (mech.p_star, mech.q_star)
    rng = np.random.default_rng(7)
    n, m = 1_000, 300
    C = np.zeros((m, d.theta.size))
    for i in range(m):
        obs = draw_observations(kind, mech, None, d.theta, n, rng, d.domain)
        b = obs.blocks[0]
        assert b.n == n
        C[i] = b.count_vector() if kind == "multinomial" else b.mechanism.support_counts(b.reports, b.counts)
    expected = n * (q + (p - q) * d.theta)
    assert np.all(np.abs(C.mean(axis=0) - expected) < 5 * (np.sqrt(n) / 2) / np.sqrt(m))


def test_only_existing_and_rerun_restrict_what_runs(tmp_path):
    """``only`` restricts the grid to named cells; ``existing_only`` runs no cell the folder lacks;
    ``rerun`` computes the named columns again (the same values, since the estimator is unchanged)."""
    base = 777
    keys = [c["key"] for c in plan(SMALL)]
    one = {**SMALL, "cells_dir": str(tmp_path / "c"), "only": keys[:1]}
    assert [c["key"] for c in plan(one)] == keys[:1]
    assert run_cells(one, base) == {"cells": 1, "reused": 0, "ran": 1}
    every = {**SMALL, "cells_dir": one["cells_dir"], "existing_only": True}
    assert run_cells(every, base) == {"cells": 1, "reused": 1, "ran": 0}
    before = assemble([one["cells_dir"]], one)["cells"]
    assert run_cells({**every, "rerun": ["norm-sub"]}, base)["cells"] == 1
    after = assemble([one["cells_dir"]], one)["cells"]
    assert _values(after) == _values(before)


def test_regret_block_lists_every_judged_cell():
    rec = {"name": "default-regret", "params": {**SMALL, "label": "default-regret"},
           "results": assemble([], SMALL)}
    text = render_regret(rec)
    assert text.startswith("The default on the cells where it was behind") and "| cell | verdict |" in text
