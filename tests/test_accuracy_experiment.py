"""`localpriv reproduce estimator-accuracy`: the quick configuration's output
structure, a variance bound the INV-P and MLE errors must meet, per-cell reproducibility, the
calibration of metric mechanisms, and the shipped data derived for it."""
from pathlib import Path

import numpy as np
import pytest

from localpriv.inference import estimate
from localpriv.inference.simulation import calibrate, merge_equal_columns, simulate_block
from localpriv.mechanisms import parse
from reproductions import EXPERIMENTS, run_experiment
from reproductions.accuracy import NAME, QUICK, dataset, derive_shipped_data

SHARED = Path("/work/shared/data")


def test_registered():
    assert NAME in EXPERIMENTS and EXPERIMENTS[NAME].quick is QUICK


def test_quick_run(tmp_path):
    """One run of the quick configuration (one test, so that xdist workers do not repeat it)."""
    out = tmp_path / "quick"
    rec = run_experiment(NAME, out, quick=True, seed=0, overrides={"status": False})
    _check_output_structure(out, rec)
    _check_inv_p_and_mle_within_the_variance_bound(rec)
    _check_a_cell_is_reproducible_whatever_else_runs(rec, tmp_path / "again")


def _check_output_structure(out, rec):
    res, params = rec["results"], rec["params"]
    for suffix in (".json", ".csv", ".md", ".png", "_by_eps.png"):
        assert (out / f"{NAME}{suffix}").stat().st_size > 0
    labels = [e["label"] for e in params["estimators"]]
    expected = sum(len(s.get("n", params["n"])) * (len(params["eps_ldp"]) + len(s.get("seed_eps", [])))
                   for s in params["settings"])
    assert len(res["cells"]) == expected
    for c in res["cells"]:
        # every estimator either ran or was skipped with a reason
        assert set(c["estimators"]) | set(c["skipped"]) == set(labels)
        assert not set(c["estimators"]) & set(c["skipped"])
        if c["kind"] == "categorical":
            assert "ordered domains only" in c["skipped"]["ems"]
        for e in c["estimators"].values():
            metrics = ["emd", "tv", "mse"] if c["kind"] != "categorical" else ["tv", "mse"]
            assert list(e["summary"]) == metrics
            for s in e["summary"].values():
                assert s["ok"] + e["failed"] == c["runs"]
                if s["ok"]:
                    assert s["q10"] <= s["q25"] <= s["median"] <= s["q75"] <= s["q90"]
                    assert s["median"] >= 0
        if c["calibration"] == "ldp" and c["eps_metric"] is not None:
            assert c["eps_ldp"] == pytest.approx(c["eps_ldp_target"], rel=1e-9)
    # the pinned settings are what ran
    cap = next(c for c in res["cells"] if "ibu-capped" in c["estimators"])["estimators"]["ibu-capped"]
    assert cap["settings_used"]["acceleration"] == "none" and cap["settings_used"]["max_iter"] == 10_000
    # INV-P falls back to MI-P where the channel cannot be enumerated (OUE on 16 levels)
    oue = next(c for c in res["cells"] if c["mechanism"] == "OUE")
    assert oue["estimators"]["inv-p"]["method"] == "mi-p"
    # the claims: counts within the cells that have all three medians
    ordered = [c for c in res["cells"] if c["kind"] != "categorical"]
    for cand, rec_c in res["claims"]["candidates"].items():
        g = rec_c["ordered"]
        have = [c for c in ordered if all(lab in c["estimators"] for lab in (cand, "ibu-capped", "mle"))]
        assert g["cells"] == len(have)
        assert 0 <= g["beats_capped_and_mle"] <= min(g["beats_capped"], g["beats_mle"]) <= g["cells"]
        assert 0 <= g["loses_to_inv_p_beyond_spread"] <= g["compared_to_inv_p"] <= g["cells"]
        assert len(g["losing_cells"]) == g["loses_to_inv_p_beyond_spread"]
    text = (out / f"{NAME}.md").read_text()
    assert "| data | mechanism | eps | n | metric |" in text and "## Claims" in text


def _check_inv_p_and_mle_within_the_variance_bound(rec):
    """k-RR on education at the largest n: ``v = (q_hat - q)/(p - q)`` is unbiased with
    ``E||v - theta||^2 = sum_x pi_x (1 - pi_x) / (n (p - q)^2)``, and INV-P, the projection of ``v``
    onto the simplex (which holds theta), is no farther from theta in L2. Markov: each run's
    squared error exceeds 10x that expectation with probability <= 0.1 (the MLE, asymptotically
    as efficient, is held to the same bound)."""
    cells = [c for c in rec["results"]["cells"] if c["data"] == "education" and c["mechanism"] == "k-RR"]
    c = max(cells, key=lambda c: c["n"])
    theta = dataset("education").theta
    k, eps, n = theta.size, c["eps_ldp_target"], c["n"]
    p, q = np.exp(eps) / (np.exp(eps) + k - 1), 1 / (np.exp(eps) + k - 1)
    pi = theta * (p - q) + q
    expected_mse = float(np.sum(pi * (1 - pi)) / (n * (p - q) ** 2)) / k
    for lab in ("inv-p", "mle"):
        vals = c["estimators"][lab]["values"]["mse"]
        assert len(vals) == c["runs"]
        assert max(vals) <= 10 * expected_mse, (lab, vals, expected_mse)
    # and INV-P is not trivially good: the errors are of the order of the bound
    assert max(c["estimators"]["inv-p"]["values"]["mse"]) >= 0.05 * expected_mse


def _check_a_cell_is_reproducible_whatever_else_runs(rec, tmp_path):
    """Every cell has its own generator (experiment seed + cell name): the same numbers alone."""
    one = [s for s in QUICK["settings"] if s["data"] == "education" and s["mechanism"] == "k-RR"]
    again = run_experiment(NAME, tmp_path, quick=True, seed=0, overrides={"settings": one, "status": False})
    for c2 in again["results"]["cells"]:
        c1 = next(c for c in rec["results"]["cells"] if c["key"] == c2["key"])
        for lab, e in c2["estimators"].items():
            assert e["values"] == c1["estimators"][lab]["values"]
    _check_split_runs_merge_into_the_whole(rec, tmp_path)


def _check_split_runs_merge_into_the_whole(rec, tmp_path):
    """A run split by setting merges (accuracy.merge) into the whole run's cells, number for
    number; the same cell in two records is refused."""
    from localpriv import LocalPrivError
    from reproductions.accuracy import merge
    geo = [s for s in QUICK["settings"] if s["data"] == "ages" and s["mechanism"] == "geometric"]
    run_experiment(NAME, tmp_path / "geo", quick=True, seed=0, overrides={"settings": geo, "status": False})
    merged = merge([tmp_path / f"{NAME}.json", tmp_path / "geo" / f"{NAME}.json"], tmp_path / "merged")
    whole = {c["key"]: c for c in rec["results"]["cells"]}
    cells = merged["results"]["cells"]
    assert {c["data"] + "|" + c["mechanism"] for c in cells} == {"education|k-RR", "ages|geometric"}
    for c in cells:
        assert {lab: e["values"] for lab, e in c["estimators"].items()} == \
            {lab: e["values"] for lab, e in whole[c["key"]]["estimators"].items()}
    assert merged["results"]["claims"]["candidates"]["ems"]["ordered"]["cells"] == \
        sum(c["data"] == "ages" for c in cells)
    assert (tmp_path / "merged" / f"{NAME}.md").stat().st_size > 0
    with pytest.raises(LocalPrivError, match="more than one record"):
        merge([tmp_path / f"{NAME}.json", tmp_path / "merged" / f"{NAME}.json"], tmp_path / "bad")


def test_calibration_of_metric_mechanisms():
    ages = dataset("ages").domain
    # the truncated geometric on 0..99: eps_LDP = 99 eps
    e, computed = calibrate("geometric(eps={eps},lo=0,hi=99)", ages, 1.0)
    assert computed == pytest.approx(1.0, rel=1e-9) and e == pytest.approx(1 / 99, rel=1e-8)
    # the exponential mechanism on 0..99: eps_LDP = eps (k - 1) / 2
    e, computed = calibrate("exponential(eps={eps})", ages, 2.0)
    assert e == pytest.approx(4 / 99, rel=1e-8)


def test_shipped_data():
    from localpriv.data.datasets import adult_ages, adult_education, gowalla_nyc_grid
    labels, counts = adult_education()
    assert len(labels) == 16 and labels[0] == "Preschool" and labels[-1] == "Doctorate"
    assert counts.sum() == adult_ages().size == 48_842
    totals = []
    for cell in (0.5, 1.0, 2.0):
        grid, c = gowalla_nyc_grid(cell)
        assert c.size == grid.size and grid.cell_km == cell
        totals.append(int(c.sum()))
    assert totals == [138_957] * 3
    g2, c2 = gowalla_nyc_grid(2.0)
    assert (g2.nrows, g2.ncols) == (25, 24)
    # coarse cells are unions of fine ones: same extent, same counts per 4 x 4 block
    g05, c05 = gowalla_nyc_grid(0.5)
    assert np.array_equal(c05.reshape(25, 4, 24, 4).sum(axis=(1, 3)).ravel(), c2)


def test_shipped_counts_are_derived_from_the_reference_data():
    """The shipped counts are exactly what the derivation gives from the reference copies (present
    on every development and CI machine, see the shared data README); a missing copy fails here."""
    from localpriv.data.datasets import data_path
    for name, text in derive_shipped_data(SHARED).items():
        assert data_path(name).read_text() == text, name


def test_unregistered_and_inapplicable_estimators_are_skipped_with_a_reason(tmp_path):
    setting = next(s for s in QUICK["settings"] if s["data"] == "education" and s["mechanism"] == "k-RR")
    estimators = [{"label": "inv-p", "method": "inv-p", "settings": {}},
                  {"label": "future", "method": "no-such-estimator", "settings": {}},
                  {"label": "ems", "method": "ems", "settings": {}, "ordered_only": True, "candidate": True}]
    rec = run_experiment(NAME, tmp_path, seed=1, overrides={
        "settings": [setting], "eps_ldp": [2.0], "n": [1_000], "runs": 1, "estimators": estimators,
        "status": False})
    res = rec["results"]
    (cell,) = res["cells"]
    assert list(cell["estimators"]) == ["inv-p"]
    assert "not registered" in cell["skipped"]["future"]
    assert "ordered domains only" in cell["skipped"]["ems"]
    assert res["skipped"]["future"] == {cell["skipped"]["future"]: 1}
    assert res["claims"]["candidates"]["ems"]["categorical"]["skipped_cells"] == 1
    assert "| - | - |" in (tmp_path / f"{NAME}.md").read_text()


@pytest.mark.parametrize("spec", ["oue(eps=0.5)", "ss(eps=1.0)", "olh(eps=1.0)"])
def test_reports_with_equal_likelihood_columns_are_merged_exactly(spec):
    """On the 16 education levels the per-user reports of a pure protocol are merged by support
    (they had silently stopped merging when the likelihood parts became per-report arrays): far
    fewer rows, the same counts, the same likelihood block products and the same MLE."""
    from localpriv.data.observations import Observations

    D = dataset("education")
    mech = parse(spec, D.domain)
    block = simulate_block(mech, D.theta, 100_000, np.random.default_rng(3))
    merged = merge_equal_columns(block)
    assert merged.counts.size < block.counts.size and merged.counts.sum() == block.counts.sum()
    if spec.startswith("oue"):
        assert merged.counts.size <= 2 ** 16 and merged.counts.size < 0.5 * block.counts.size
    theta = np.random.default_rng(4).dirichlet(np.ones(16))
    a, b = block.likelihood_block(), merged.likelihood_block()
    # the same sum in two orders: within n * machine epsilon (2e-11 at n = 10^5), far below what a
    # wrong merge would change
    assert float(a.counts @ np.log(a.forward(theta))) == pytest.approx(float(b.counts @ np.log(b.forward(theta))),
                                                                        rel=1e-10)
    ea = estimate(Observations([block], D.domain), "ibu", accelerate="newton").distribution
    eb = estimate(Observations([merged], D.domain), "ibu", accelerate="newton").distribution
    # both certified within 1e-9 per report of the same maximum: ~1e-5 apart at most at n = 10^5
    # (a hundredth of a cell's standard error), whichever iteration each stops at
    np.testing.assert_allclose(ea, eb, atol=2e-5)
