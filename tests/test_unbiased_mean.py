"""The reports' classic unbiased mean from counts (pm, hm, duchi, sw), beside the estimate's mean."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from localpriv.cli.main import app
from localpriv.data.observations import Observations
from localpriv.domains import IntervalDomain
from localpriv.inference.unbiased import has_unbiased_mean, unbiased_mean
from localpriv.mechanisms import parse
from localpriv.mechanisms.square_wave import SquareWave
from localpriv.utils.validation import LocalPrivError


@pytest.mark.parametrize("k,buckets", [(5, 5), (5, 8), (20, 20), (7, 30)])
def test_sw_unbiased_weights_invert_the_channel_exactly(k: int, buckets: int) -> None:
    mech = SquareWave(k, 1.0, buckets)
    g = mech.unbiased_weights()
    assert np.max(np.abs(mech.channel() @ g - (np.arange(k) + 0.5) / k)) < 1e-9


def test_sw_without_an_unbiased_mean_says_why() -> None:
    with pytest.raises(LocalPrivError, match="needs buckets >= k"):
        SquareWave(8, 1.0, 4).unbiased_weights()


@pytest.mark.parametrize("spec", ["pm(k=10,eps=1.0)", "hm(k=10,eps=1.0)", "duchi(k=10,eps=1.0)",
                                  "sw(k=10,eps=1.0)"])
def test_counts_give_the_same_mean_and_interval_as_every_report(spec: str) -> None:
    mech = parse(spec)
    rng = np.random.default_rng(7)
    z = mech.sample(rng.integers(0, 10, 3000), rng)
    obs = Observations.from_reports(mech, z)
    block = obs.blocks[0]
    assert block.reports.shape[0] < z.shape[0]  # counts, not one row per report
    dom = IntervalDomain(0.0, 100.0, 10)
    want = mech.estimate_mean(z, dom, 0.9)
    got = unbiased_mean(obs, dom, 0.9)
    assert got.method == want.method and got.level == want.level
    for a, b in ((got.value, want.value), (got.lower, want.lower), (got.upper, want.upper)):
        assert abs(a - b) <= 1e-9 * 100  # the same sums in another order


def test_mean_is_unbiased_for_sw_on_a_skewed_population() -> None:
    """Over 200 seeds the mean of the estimates is within 4 standard errors of the true mean."""
    mech, k, n, reps = SquareWave(10, 1.0), 10, 2000, 200
    theta = np.array([0.4, 0.3, 0.1, 0.05, 0.05, 0.04, 0.03, 0.01, 0.01, 0.01])
    truth = float(theta @ ((np.arange(k) + 0.5) / k))
    rng = np.random.default_rng(11)
    g = mech.unbiased_weights()
    x = rng.choice(k, size=(reps, n), p=theta)
    vals = g[mech.sample(x.ravel(), rng).reshape(reps, n)].mean(axis=1)
    assert abs(vals.mean() - truth) < 4 * vals.std(ddof=1) / np.sqrt(reps)


def test_other_mechanisms_have_none() -> None:
    obs = Observations.from_reports(parse("krr(k=4,eps=1.0)"), np.array([0, 1, 2, 3, 1]))
    assert not has_unbiased_mean(obs)
    with pytest.raises(LocalPrivError, match="needs the reports of one pm, hm, duchi or sw"):
        unbiased_mean(obs)


def test_cli_stat_mean_shows_the_unbiased_mean_beside(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    (tmp_path / "v.csv").write_text("age\n" + "\n".join(f"{v:.1f}" for v in rng.uniform(20, 60, 2000)) + "\n")
    runner = CliRunner()
    dom = "interval(0,100,10)"
    res = runner.invoke(app, ["perturb", str(tmp_path / "v.csv"), "-o", str(tmp_path / "r.parquet"),
                              "-m", "pm(eps=2.0)", "-d", dom, "--seed", "1"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["estimate", str(tmp_path / "r.parquet"), "-d", dom, "--estimator", "ibu",
                              "--stat", "mean", "-o", str(tmp_path / "e.json")])
    assert res.exit_code == 0, res.output
    assert "mean_unbiased:" in res.output and "pm (unbiased)" in res.output
    stats = json.loads((tmp_path / "e.json").read_text())["statistics"]
    assert list(stats) == ["mean", "mean_unbiased"]
    m = stats["mean_unbiased"]
    assert m["lower"] < m["value"] < m["upper"] and m["method"] == "pm (unbiased)"
