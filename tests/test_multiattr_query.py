"""Marginal and range queries on a joint estimate: consistency, intervals, files, refusals, CLI."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from localpriv.cli.main import app
from localpriv.data.observations import Observations
from localpriv.domains import CategoricalDomain, IntegerDomain, ProductDomain
from localpriv.inference import estimate
from localpriv.inference.estimate import Estimate
from localpriv.mechanisms import parse
from localpriv.multiattr.query import JointTable, answer_queries, parse_range, query_marginal, query_range
from localpriv.utils.errors import LocalPrivError


@pytest.fixture(scope="module")
def fit() -> tuple[Estimate, np.ndarray]:
    dom = ProductDomain([IntegerDomain(0, 5), CategoricalDomain(["F", "M"]), IntegerDomain(0, 3)],
                        ["age", "sex", "hours"])
    mech = parse("smp(krr(eps=2.0))", dom)
    rng = np.random.default_rng(1)
    theta = rng.dirichlet(np.full(dom.size, 3.0))
    x = rng.choice(dom.size, size=20_000, p=theta)
    return estimate(Observations.from_reports(mech, mech.sample(x, rng), domain=dom), "ibu"), theta


def test_marginals_are_consistent_and_sum_to_one(fit: tuple[Estimate, np.ndarray]) -> None:
    est, _ = fit
    tab = JointTable.from_estimate(est)
    two = query_marginal(tab, "age,sex")
    one = query_marginal(tab, "age")
    assert two["probability"].sum() == pytest.approx(1.0)
    folded = two.groupby("age")["probability"].sum().to_numpy()
    assert np.allclose(folded, one["probability"].to_numpy())  # shared attribute agrees
    assert np.all(two["lower"] <= two["probability"]) and np.all(two["probability"] <= two["upper"])


def test_range_interval_covers_truth(fit: tuple[Estimate, np.ndarray]) -> None:
    est, theta = fit
    dom = est.domain
    assert isinstance(dom, ProductDomain)
    ans = query_range(JointTable.from_estimate(est), "age=1..3,sex=F")
    codes = dom.unravel(np.arange(dom.size))
    truth = theta[(codes[:, 0] >= 1) & (codes[:, 0] <= 3) & (codes[:, 1] == 0)].sum()
    width = ans["upper"] - ans["lower"]
    # 95% interval; the check allows 2 widths so that a seed change does not flip it
    assert abs(ans["probability"] - truth) < 2 * width
    assert ans["cells"] == 12


def test_file_answers_match_the_fit(fit: tuple[Estimate, np.ndarray], tmp_path: Path) -> None:
    est, _ = fit
    path = est.save(tmp_path / "e.json")
    a = answer_queries(JointTable.from_file(path), ["sex"], ["age=..2"])
    b = answer_queries(JointTable.from_estimate(est), ["sex"], ["age=..2"])
    assert a["intervals"] is False and b["intervals"] is True
    assert a["ranges"][0]["probability"] == pytest.approx(b["ranges"][0]["probability"])
    assert json.dumps(a)


def test_parse_and_refusals(fit: tuple[Estimate, np.ndarray]) -> None:
    assert parse_range("age=30..45, sex=F") == {"age": ("30", "45"), "sex": ("F", "F")}
    assert parse_range("age=..45") == {"age": (None, "45")}
    tab = JointTable.from_estimate(fit[0])
    for bad in ("age", "age=1..2,age=3", "", "x=1"):
        with pytest.raises(LocalPrivError):
            query_range(tab, bad)
    with pytest.raises(LocalPrivError, match="not all numbers"):
        query_range(tab, "sex=A..M")
    with pytest.raises(LocalPrivError, match="nothing to answer"):
        answer_queries(tab)


def test_cli_query_from_estimate_file(fit: tuple[Estimate, np.ndarray], tmp_path: Path) -> None:
    path = fit[0].save(tmp_path / "e.json")
    out = tmp_path / "answers.json"
    res = CliRunner().invoke(app, ["query", str(path), "--marginal", "age,sex", "--range", "age=1..3",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(json.loads(out.read_text())["marginals"]["age,sex"]) == 12
    bad = CliRunner().invoke(app, ["query", str(path), "--range", "zz=1..2"])
    assert bad.exit_code == 1 and "unknown attribute" in bad.output


def test_cli_query_from_reports_has_intervals(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    people = tmp_path / "people.csv"
    ages, sexes = rng.integers(18, 30, 2000), rng.choice(["F", "M"], 2000)
    people.write_text("age,sex\n" + "".join(f"{a},{s}\n" for a, s in zip(ages, sexes)))
    dom = "product(age=18..29;sex=F,M)"
    reports = tmp_path / "r.parquet"
    run = CliRunner().invoke(app, ["perturb", str(people), "-o", str(reports), "--domain", dom, "--columns",
                                   "age,sex", "--protocol", "smp(krr(eps=2.0))", "--seed", "1"])
    assert run.exit_code == 0, run.output
    out = tmp_path / "a.json"
    res = CliRunner().invoke(app, ["query", str(reports), "--domain", dom, "--range", "age=20..25,sex=F",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    ans = json.loads(out.read_text())["ranges"][0]
    assert ans["lower"] <= ans["probability"] <= ans["upper"] and ans["cells"] == 6
