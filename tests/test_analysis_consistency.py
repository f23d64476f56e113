"""Consistency reports (seed 001 section 6) and the theory reproductions (fig3/4/5/6)."""
import json

import numpy as np
import pytest

from localpriv.analysis.consistency import (
    asymptotic_error,
    consistency_report,
    default_theta,
    dominance,
    fit_loglog_slope,
)
from localpriv.analysis.examples import basic_rappor_mechanism, section64_mechanism
from localpriv.mechanisms import parse
from localpriv.mechanisms.geometric import Geometric
from localpriv.mechanisms.krr import KRR
from reproductions.runner import run_experiment


def test_fit_loglog_slope_exact_and_propagated_se():
    n = np.array([100, 1000, 10000])
    f = fit_loglog_slope(n, 3.0 / n, 0.1 * 3.0 / n)
    assert f["slope"] == pytest.approx(-1) and f["intercept"] == pytest.approx(np.log(3))
    # delta method: w = (x - mean) / SS, se = 0.1 * ||w||
    x = np.log(n)
    w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    assert f["slope_se"] == pytest.approx(0.1 * np.linalg.norm(w))


@pytest.mark.parametrize("mech", [KRR(6, 1.0), Geometric(6, 0.5, lo=0, hi=5), basic_rappor_mechanism(4, 1.0)],
                         ids=["krr", "truncated-geometric", "basic-rappor"])
def test_consistency_report_slope_near_minus_one(mech):
    rep = consistency_report(mech, runs=40, rng=0)
    assert rep["verdict"] == "consistent"
    assert rep["identification"]["holds"] and rep["dominance"]["holds"]
    c = rep["convergence"]
    assert c["not_converged"] == 0
    assert abs(c["slope"] + 1) < 5 * c["slope_se"] + 0.05
    assert c["mse"][-1] < c["mse"][0] / 20
    assert c["asymptotic_error"] < 1e-6  # infinite data: IBU recovers theta from every start


def test_consistency_report_sue_is_basic_rappor():
    rep = consistency_report(parse("sue(k=4,eps=1.0)"), runs=25, rng=1, ns=(1000, 4000, 16000))
    assert rep["verdict"] == "consistent"
    assert abs(rep["convergence"]["slope"] + 1) < 5 * rep["convergence"]["slope_se"] + 0.05


def test_section64_mechanism_flagged_non_identifiable():
    rep = consistency_report(section64_mechanism(), study=False)
    assert rep["verdict"] == "not identifiable"
    assert rep["identification"]["rank"] == 16 and not rep["identification"]["holds"]
    assert "convergence" not in rep
    # infinite data (q = theta M): some IBU start ends far from theta -- an error floor
    assert asymptotic_error(section64_mechanism(), default_theta(25)) > 1e-3


def test_dominance_cases():
    assert dominance(Geometric(5, 0.3))["holds"] is True  # untruncated: Prop. 6.4
    zero = parse("matrix(rows=[[0.5,0.5,0.0],[0.2,0.3,0.5]])")
    assert dominance(zero)["holds"] is False
    th = default_theta(7)
    assert th.min() > 0 and th.sum() == pytest.approx(1) and np.ptp(th) > 0


def test_fig6_quick_distinct_fixed_points(tmp_path):
    rec = run_experiment("fig6", tmp_path, quick=True)
    r = json.loads((tmp_path / "fig6.json").read_text())["results"]
    assert (tmp_path / "fig6.png").stat().st_size > 0
    assert r["channel_shape"] == [25, 16] and not r["identification"]["holds"]
    assert r["distinct_fixed_points"] >= 2 and r["max_pairwise_tv"] > 0.05
    # every end point is a certified maximizer of L (not EM stopped at its cap)
    assert r["all_certified"]
    for run in r["runs"]:
        assert run["converged"] and run["gap_to_sup_L"] < 1e-8
        assert run["max_abs_residual_thetaM_minus_q"] < 1e-4
    assert rec["results"]["where"]["checkins"] > 1000


def test_fig3_fig5_quick(tmp_path):
    r3 = run_experiment("fig3", tmp_path, quick=True)["results"]
    assert not r3["panels"]["a"]["strictly_concave"] and r3["panels"]["b"]["strictly_concave"]
    assert r3["panels"]["a"]["maximizers_on_grid"] > 1 and r3["panels"]["b"]["maximizers_on_grid"] == 1
    r5 = run_experiment("fig5", tmp_path, quick=True)["results"]
    a, b = r5["panels"]["a"], r5["panels"]["b"]
    assert not a["strictly_concave"] and a["maximizers_on_grid"] == 1
    assert np.allclose(a["example_maximizer"], [0, 1, 0])
    assert not b["strictly_concave"] and b["maximizers_on_grid"] > 1
    assert (tmp_path / "fig5.png").exists()


def test_fig4_quick(tmp_path):
    r = run_experiment("fig4", tmp_path, quick=True)["results"]
    assert r["violations_5se"] == 0
    assert (tmp_path / "fig4.png").exists()
