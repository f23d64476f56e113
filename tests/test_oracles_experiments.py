"""Quick runs of the frequency-oracle reproductions (dbsec-one-time, dbsec-longitudinal, fig11, fig12) and
the pieces they are built from (seed 002's IBU on stacked count vectors, the support-count maximum,
the binned data)."""
import json

import numpy as np
import pytest
from _roundoff import em_rtol

from localpriv.estimators.em import em
from localpriv.estimators.oracles import support_mle
from reproductions.oracles import (
    DiagBlock,
    equal_width_bins,
    notebook_bins,
    seed_ibu,
    summarize,
    summary_markdown,
    users,
)
from reproductions.runner import run_experiment


def test_dbsec_one_time_quick(tmp_path):
    rec = run_experiment("dbsec-one-time", tmp_path, quick=True, seed=1)
    res = json.loads((tmp_path / "dbsec-one-time.json").read_text())["results"]
    assert (tmp_path / "dbsec-one-time.png").exists()
    mechs = {"GRR", "SUE", "OUE", "SS", "THE", "BLH", "OLH"}
    assert set(res["table"]["avg"]) == mechs | {"avg"}
    assert set(res["table"]["gauss"]) == mechs | {"avg"}
    # seed 002's averaging clips each configuration's gain at 0: never below the unclipped mean
    for cell in res["table"]["avg"].values():
        assert cell["mse_gain"] >= 0 and cell["mse_gain"] >= cell["mse_gain_unclipped"] - 1e-9
    # one row per (mechanism, distribution, n, k, eps), errors averaged over the runs
    assert len(res["detail"]) == 7 * 2 * 1 * 1 * 1
    # exact-likelihood IBU is the MLE: its exact log-likelihood is at least that of the support maximum
    for row in res["exact_table"].values():
        assert row["min_loglik_gain_exact_over_support_max"] >= -1e-4
    assert "| MSE gain % | GRR |" in summary_markdown(res, rec["params"])
    assert rec["quick"] is True and rec["params"]["data"] == "notebook"
    # every table cell and the overall averages carry a bootstrap interval over the runs
    lo, hi = res["intervals"]["table"]["avg"]["avg"]["mse_gain"]
    assert 0 <= lo <= hi and res["intervals"]["runs"] == 2
    assert all(len(r["exact_vs_mi_gain_runs"]) == 1 for r in res["exact_table"].values())


def test_dbsec_longitudinal_quick(tmp_path):
    run_experiment("dbsec-longitudinal", tmp_path, quick=True, seed=2)
    res = json.loads((tmp_path / "dbsec-longitudinal.json").read_text())["results"]
    assert set(res["table"]["avg"]) == {"L-GRR", "L-SUE", "L-OUE", "L-SOUE", "L-OSUE", "L-BLH", "L-OLH", "avg"}
    assert 0 <= res["overall"]["ibu_capped_fraction"] <= 1
    assert res["paper"]["avg"] == [23, 14]


def test_seed_ibu_stacked_equals_separate_runs():
    rng = np.random.default_rng(0)
    k = 30
    C = np.array([rng.poisson(lam, k).astype(float) for lam in (100, 300, 50)])
    C[0, :8] = 0
    p, q = np.array([0.6, 0.7, 0.55]), np.array([0.4, 0.3, 0.45])
    est, capped = seed_ibu(C, p, q, max_iter=300)
    assert capped.all()
    for b in range(3):
        alone = em([DiagBlock(p[b], q[b], C[b])], k, delta=1e-12, max_iter=300, stop="max_abs", accelerate="none")
        assert alone.iterations == 300 and not alone.converged  # same number of updates as the stack
        # the stack normalizes over 3k coordinates, a lone run over k: the same updates rounded
        # differently, <= em_rtol relative after 300 of them (see _roundoff; ~1.4e-11, measured
        # ~4e-15)
        np.testing.assert_allclose(est[b], alone.theta, rtol=em_rtol(300, 3 * k, k), atol=0)
        assert abs(est[b].sum() - 1) < 1e-12


def test_support_mle_is_the_ibu_fixed_point():
    rng = np.random.default_rng(1)
    k, p, q = 12, 0.62, 0.38
    C = rng.poisson(200, k).astype(float)
    C[:4] = rng.poisson(120, 4)  # cells the maximum sets to 0
    f = support_mle(C, p, q)
    assert abs(f.sum() - 1) < 1e-12 and (f == 0).any()
    # KKT: equal marginal gain C_v/((p-q) f_v + q) on the support, no more off it
    grad = C / ((p - q) * f + q)
    lam = grad[f > 0]
    assert np.ptp(lam) < 1e-9 * lam.max() and np.all(grad[f == 0] <= lam.max() + 1e-9)
    # a long IBU run approaches it (slowly: the maximum is on the simplex's boundary)
    r = em([DiagBlock(p, q, C)], k, delta=1e-14, max_iter=200_000, accelerate="squarem", stop="max_abs")
    assert np.abs(r.theta - f).max() < 1e-4
    # interior case (k-RR counts): the unclipped matrix inversion
    C = np.array([400.0, 350.0, 250.0])
    np.testing.assert_allclose(support_mle(C, 0.5, 0.25), (C / C.sum() - 0.25) / 0.25, atol=1e-12)


def test_binned_users_and_summary():
    v = np.array([0.0, 0.5, 1.0, 2.0, 4.0])
    assert equal_width_bins(v, 4).tolist() == [0, 0, 1, 2, 3]
    # the notebook's: k + 1 = 5 equal bins (width 0.8 over [0, 4], 1 over [0, 5]), the last two merged
    assert notebook_bins(v, 4).tolist() == [0, 0, 1, 2, 3]
    assert notebook_bins(np.array([0.0, 0.99, 1.0, 2.5, 3.0, 4.0, 5.0]), 4).tolist() == [0, 0, 1, 2, 3, 3, 3]
    assert notebook_bins(np.full(3, 2.0), 4).tolist() == [0, 0, 0]
    c = users("unif", 10, 20_000, "notebook", [1, 2])
    share = np.bincount(c, minlength=10) / c.size  # uniform data: the merged last bin holds 2/11
    assert abs(share[-1] - 2 / 11) < 5 * np.sqrt(2 / 11 * 9 / 11 / c.size)
    a, b = users("poiss", 50, 2000, "binned", [3, 4]), users("poiss", 50, 2000, "binned", [3, 4])
    assert np.array_equal(a, b) and a.min() >= 0 and a.max() <= 49
    assert (np.bincount(a, minlength=50) == 0).sum() > 25  # Poisson(5) values fill few of 50 bins
    with pytest.raises(ValueError):
        users("gauss", 5, 10, "other", 0)
    rows = [{"mi": [1.0, 1.0], "ibu": [0.5, 0.8], "ibu_max": [2.0, 1.0]},
            {"mi": [1.0, 1.0], "ibu": [1.5, 1.0], "ibu_max": [1.0, 1.0]}]
    s = summarize(rows)
    assert s["mse_gain"] == pytest.approx(25.0)  # mean(max(50, 0), max(-50, 0))
    assert s["mse_gain_unclipped"] == pytest.approx(0.0)
    assert s["mse_gain_pooled"] == pytest.approx(0.0)
    assert s["mse_gain_max"] == pytest.approx(0.0) and s["mse_gain_max_unclipped"] == pytest.approx(-50.0)


def test_fig11_fig12_quick(tmp_path):
    r11 = run_experiment("fig11", tmp_path, quick=True, seed=3)["results"]
    for name in ("binomial", "uniform3456"):
        assert abs(sum(r11[name]["ibu"]) - 1) < 1e-9 and r11[name]["emd"] < 1.0
        # every run is kept: the first is the figure's, the band holds the runs' mean estimate
        assert len(r11[name]["emd_runs"]) == 3 and r11[name]["emd_runs"][0] == r11[name]["emd"]
        lo, hi, mean = (np.asarray(r11[name][k]) for k in ("ibu_lo", "ibu_hi", "ibu_mean"))
        assert np.all(lo <= mean + 1e-12) and np.all(mean <= hi + 1e-12) and abs(mean.sum() - 1) < 1e-9
    r12 = run_experiment("fig12", tmp_path, quick=True, seed=4)["results"]
    for name in ("binomial", "uniform3456"):
        ibu = [v["mean"] for v in r12[name]["ibu"]]
        assert ibu[-1] < ibu[0]  # larger eps, smaller error
        # IBU is comparable to Rappor's estimators (seed 001 section 7.5): within a factor 2
        assert all(a < 2 * b for a, b in zip(ibu, [v["mean"] for v in r12[name]["rappor-p"]]))
        assert len(r12[name]["ibu_converged"]) == 2 and all(0 <= c <= 1 for c in r12[name]["ibu_converged"])
    assert (tmp_path / "fig12.png").exists()


def test_gain_intervals_bootstrap_over_runs():
    from reproductions.oracles import gain_intervals

    def row(d, m, mi, ibu):
        return {"dist": d, "mechanism": m, "mi_runs": mi, "ibu_runs": ibu}
    same = [[1.0, 1.0]] * 4
    half = [[0.5, 0.8]] * 4
    # identical runs: no spread, and the cells are seed 002's clipped averages (50 % / 20 %, 0 %)
    det = [row("gauss", "GRR", same, half), row("gauss", "OUE", half, same)]
    iv = gain_intervals(det, ["gauss"], ["GRR", "OUE"], reps=50)
    assert iv["table"]["gauss"]["GRR"]["mse_gain"] == pytest.approx([50.0, 50.0])
    assert iv["table"]["gauss"]["OUE"]["mae_gain"] == pytest.approx([0.0, 0.0])
    assert iv["table"]["avg"]["avg"]["mse_gain"] == pytest.approx([25.0, 25.0])
    assert iv["overall"]["mse_gain_unclipped"] == pytest.approx([-25.0, -25.0])  # (50 - 100) / 2
    # runs that differ: a non-degenerate interval around the point value
    rng = np.random.default_rng(0)
    noisy = [row("gauss", "GRR", (1 + 0.3 * rng.random((20, 2))).tolist(), (0.6 + 0.3 * rng.random((20, 2))).tolist())
             for _ in range(5)]
    iv = gain_intervals(noisy, ["gauss"], ["GRR"], reps=200)
    lo, hi = iv["table"]["gauss"]["GRR"]["mse_gain"]
    point = summarize([{"mi": np.mean(r["mi_runs"], 0), "ibu": np.mean(r["ibu_runs"], 0), "ibu_max": [1, 1]}
                       for r in noisy])["mse_gain"]
    assert lo < point < hi and hi - lo > 0.5
    assert gain_intervals([row("gauss", "GRR", [[1.0, 1.0]], [[0.5, 0.5]])], ["gauss"], ["GRR"]) == {}  # 1 run
