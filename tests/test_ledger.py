"""The device's privacy ledger: file format, budget checks, the client and the command line."""
from __future__ import annotations

import json
import math

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from localpriv import LocalPrivError, parse
from localpriv.cli.main import app
from localpriv.data.ledger import LEDGER_FORMAT, Ledger, count_values, file_release
from localpriv.domains import parse_domain
from localpriv.mechanisms.accounting import Release, release_of
from localpriv.service.client import Client


def krr(eps: float = 1.0, n: int = 1, collection: str = "ages") -> Release:
    return release_of(parse(f"krr(k=4,eps={eps})"), n, collection=collection, time="2026-11-28T10:00:00Z")


def test_the_file_round_trips_and_is_plain_json(tmp_path):
    path = tmp_path / "ledger.json"
    book = Ledger(path)
    assert book.releases == [] and not path.exists()
    book.record([krr(), krr(2.0, 3, "bp")])
    book.record(Release(spec="weird", epsilon=math.inf))
    obj = json.loads(path.read_text())  # standard JSON: no Infinity
    assert obj["format"] == LEDGER_FORMAT and obj["version"] == 1 and len(obj["releases"]) == 3
    assert obj["releases"][2]["epsilon"] == "inf"
    assert set(obj["releases"][0]) == {"spec", "epsilon", "delta", "reports", "collection", "time", "memo_key",
                                       "eps_perm", "eps_inst", "rr_values"}
    again = Ledger(path)
    assert again.releases == book.releases and again.total().epsilon == math.inf
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.json"]  # no temporary file left


@pytest.mark.parametrize("content, match", [
    ("{", "not a readable JSON file"),
    ('{"format": "other"}', "not a localpriv ledger"),
    ('{"format": "localpriv-ledger", "version": 2, "releases": []}', "version 2 is not supported"),
    ('{"format": "localpriv-ledger", "version": 1, "releases": [], "budget": 3}', "unknown key"),
    ('{"format": "localpriv-ledger", "version": 1, "releases": {}}', "must be a list"),
    ('{"format": "localpriv-ledger", "version": 1, "releases": [{"spec": "x", "epsilon": 1, "n": 2}]}',
     "release 1: release: unknown key"),
    ('{"format": "localpriv-ledger", "version": 1, "releases": [{"spec": "x", "epsilon": -1}]}', "release 1"),
])
def test_bad_files_are_refused_in_one_line(tmp_path, content, match):
    path = tmp_path / "l.json"
    path.write_text(content)
    with pytest.raises(LocalPrivError, match=match) as exc:
        Ledger(path)
    assert "\n" not in str(exc.value)


def test_check_refuses_past_the_budget_and_says_total_cost_and_budget(tmp_path):
    book = Ledger(tmp_path / "l.json")
    book.record(krr(1.0, 3), budget=4.0)
    with pytest.raises(LocalPrivError) as exc:
        book.record(krr(0.5, 3), budget=4.0)
    msg = str(exc.value)
    assert "totals eps 3," in msg and "costs eps 1.5 more" in msg and "budget is 4;" in msg and "\n" not in msg
    assert len(Ledger(tmp_path / "l.json").releases) == 1  # nothing written
    assert book.check(4.0, [krr(1.0)]).epsilon == pytest.approx(4.0)  # exactly the budget is fine
    # with delta: the PLD's total is checked (far below 3 x 30 = 90 for 30 x 3 reports)
    with pytest.raises(LocalPrivError, match="at delta 1e-06"):
        book.check(3.0, [krr(1.0, 100)], delta=1e-6)
    assert book.check(80.0, [krr(1.0, 100)], delta=1e-6).pld_epsilon < 80
    with pytest.raises(LocalPrivError, match="budget must be"):
        book.check(-1.0)


def test_memo_groups_make_the_cost_less_than_the_sum(tmp_path):
    m = parse("lgrr(k=4,eps_perm=2.0,eps_1=1.0)")
    book = Ledger(tmp_path / "l.json")
    book.record(release_of(m, 2, memo_key="h1"), budget=2.0)
    book.record(release_of(m, 10, memo_key="h1"), budget=2.0)  # the same memo: no further cost
    with pytest.raises(LocalPrivError, match="costs eps 1 more"):
        book.record(release_of(m, 1, memo_key="h2"), budget=2.5)


def test_summary_per_collection_and_spec(tmp_path):
    book = Ledger(tmp_path / "l.json")
    book.record([krr(1.0, 2, "ages"), krr(1.0, 1, "bp"), release_of(parse("oue(k=4,eps=0.5)"), 4, collection="bp")])
    s = book.summary(delta=1e-6)
    assert s["collections"]["ages"]["basic_epsilon"] == pytest.approx(2.0)
    assert s["collections"]["bp"]["basic_epsilon"] == pytest.approx(3.0)
    assert s["specs"]["krr(k=4,eps=1.0)"]["reports"] == 3
    assert s["total"]["basic_epsilon"] == pytest.approx(5.0) and s["total"]["pld_epsilon"] <= 5.0
    assert "e^eps" in s["meaning"]
    assert Ledger(tmp_path / "none.json").summary()["meaning"] == "Nothing released yet."


def test_count_values_and_file_release(tmp_path):
    (tmp_path / "v.csv").write_text("x\n1\n\n2\n3\n")
    dom = parse_domain("0..9")
    assert count_values(tmp_path / "v.csv", domain=dom, drop_missing=True) == 3
    rel = file_release(tmp_path / "v.csv", "krr(eps=1.0)", dom, collection="c", drop_missing=True)
    assert (rel.spec, rel.reports, rel.collection, rel.rr_values) == ("krr(k=10,eps=1.0)", 3, "c", 10)


def _mock_client(seen: list) -> Client:
    def handler(request):
        seen.append(json.loads(request.content))
        return httpx.Response(200, json={"status": "accepted"})
    http = httpx.Client(base_url="http://test", transport=httpx.MockTransport(handler))
    return Client("http://test", "ages", "tok", http=http, backoff=0.0, wire="json")


def test_client_records_and_refuses_before_sending(tmp_path):
    seen: list = []
    c = _mock_client(seen)
    path = tmp_path / "device.json"
    rng = np.random.default_rng(0)
    out = c.submit([1, 2, 3], "krr(eps=1.0)", "0..3", rng=rng, ledger=path, budget=4.0)
    assert out["reports"] == 3 and len(seen) == 1
    rel = Ledger(path).releases[0]
    assert (rel.spec, rel.reports, rel.collection, rel.epsilon) == ("krr(k=4,eps=1.0)", 3, "ages", 1.0)
    with pytest.raises(LocalPrivError, match=r"totals eps 3, this request \(2 report\(s\) of krr\(k=4,eps=1.0\)\) "
                                              r"costs eps 2 more, and the budget is 4"):
        c.submit([0, 1], "krr(eps=1.0)", "0..3", rng=rng, ledger=path, budget=4.0)
    assert len(seen) == 1 and len(Ledger(path).releases) == 1  # nothing sent, nothing recorded
    with pytest.raises(LocalPrivError, match="needs a ledger"):
        c.submit([0], "krr(eps=1.0)", "0..3", rng=rng, budget=4.0)
    # a memoized mechanism is recorded as independent reports: this client draws a new memo each time
    c.submit([0, 1], "lgrr(eps_perm=2.0,eps_1=0.5)", "0..3", rng=rng, ledger=path)
    last = Ledger(path).releases[-1]
    assert last.memo_key is None and last.eps_perm == pytest.approx(2.0) and last.epsilon == pytest.approx(0.5)
    assert Ledger(path).total().epsilon == pytest.approx(4.0)


def test_cli_perturb_with_a_ledger_and_ledger_show(tmp_path):
    (tmp_path / "v.csv").write_text("x\n1\n2\n3\n")
    led = tmp_path / "led.json"
    run = CliRunner()
    base = ["perturb", str(tmp_path / "v.csv"), "-m", "krr(eps=1.0)", "-d", "0..9", "--seed", "1",
            "--ledger", str(led), "--budget", "5"]
    r = run.invoke(app, base + ["-o", str(tmp_path / "a.parquet")])
    assert r.exit_code == 0, r.output
    r = run.invoke(app, base + ["-o", str(tmp_path / "b.parquet")])
    assert r.exit_code == 1 and "privacy budget exceeded" in r.output and "budget is 5" in r.output
    assert not (tmp_path / "b.parquet").exists()
    r = run.invoke(app, ["perturb", str(tmp_path / "v.csv"), "-o", str(tmp_path / "c.parquet"), "-d", "0..9",
                         "-m", "krr(eps=1.0)", "--budget", "5"])
    assert r.exit_code == 2 and "--budget needs --ledger" in r.output
    r = run.invoke(app, ["ledger", "show", str(led), "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert got["total"]["basic_epsilon"] == 3.0 and list(got["collections"]) == ["a.parquet"]
    r = run.invoke(app, ["ledger", "show", str(led)])
    assert r.exit_code == 0 and "krr(k=10,eps=1.0)" in r.output and "e^eps" in r.output
    assert run.invoke(app, ["ledger", "drop", str(led)]).exit_code == 2
    assert run.invoke(app, ["ledger", "show", str(tmp_path / "none.json")]).exit_code == 2
