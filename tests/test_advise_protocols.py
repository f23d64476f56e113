"""The advisor on several attributes: protocols ranked by marginal error and by attack risk."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from localpriv.advice.advisor import advise
from localpriv.advice.protocols import advise_protocols
from localpriv.cli.main import app
from localpriv.utils.errors import LocalPrivError

DOM = "product(a=0..4;b=x,y,z)"


def test_rows_carry_levels_within_the_target_and_the_attack_risk():
    adv = advise_protocols(DOM, eps_ldp=2.0, n=3000, runs=2, rng=0)
    by_name = {r.protocol: r for r in adv.rows}
    assert set(by_name) == {"spl with krr", "spl with oue", "smp with krr", "smp with oue", "rsfd with krr",
                            "rsfd with oue", "rsrfd with krr"}
    for r in adv.rows:
        assert r.eps_report <= 2.0 * (1 + 1e-12)
        assert r.lower <= r.error <= r.upper
    assert by_name["spl with krr"].attack_advantage is None
    assert by_name["smp with krr"].attack_advantage == 1.0
    assert 0.0 < by_name["rsfd with krr"].attack_advantage < 1.0
    assert [r.error for r in adv.rows] == sorted(r.error for r in adv.rows)
    assert adv.by_risk[0].attack_advantage is None and adv.by_risk[-1].attack_advantage == 1.0
    assert adv.recommended is adv.rows[0]


def test_bind_attribute_bounds_the_one_attribute_level():
    adv = advise_protocols(DOM, eps_ldp=1.0, n=2000, runs=2, bind="attribute", protocols=["rsfd"])
    for r in adv.rows:
        assert r.eps_attribute <= 1.0 * (1 + 1e-12)
        assert r.eps_report > r.eps_attribute  # the whole report is separated by the amplified level


def test_refusals():
    with pytest.raises(LocalPrivError, match="product domain"):
        advise_protocols("0..9", eps_ldp=1.0, n=100)
    with pytest.raises(LocalPrivError, match="advise_protocols"):
        advise(DOM, eps_ldp=1.0, n=100)
    with pytest.raises(LocalPrivError, match="bind"):
        advise_protocols(DOM, eps_ldp=1.0, n=100, bind="joint")


def test_cli_has_an_attack_risk_column():
    res = CliRunner().invoke(app, ["advise", "--domain", DOM, "--eps", "2", "--n", "1000", "--runs", "2"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "attack risk" in res.output and "recommended: " in res.output
    res = CliRunner().invoke(app, ["advise", "--domain", DOM, "--eps", "2", "--n", "1000", "--runs", "2", "--json"])
    data = json.loads(res.output)
    assert {"attack_advantage", "attack_accuracy"} <= set(data["rows"][0])
