"""Bounded resources before allocation, and admission in bounded time: every size a request can
ask for is capped with a one-line error, and a spec's LDP level is computed in closed form (or
refused) before any channel is built."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from localpriv.cli.main import app
from localpriv.data.formats import open_source
from localpriv.data.freewill import MAX_POLICY_DEPTH, load_policy
from localpriv.domains import parse_domain
from localpriv.domains.grid import GridDomain
from localpriv.heavy_hitters.pem import MAX_K, PEMPlan, StringEncoding, pem_identify, pem_perturb
from localpriv.mechanisms import parse
from localpriv.mechanisms.base import ldp_level_within_budget
from localpriv.mechanisms.privacy import ldp_epsilon
from localpriv.service.policy import AdmissionPolicy
from localpriv.utils.validation import LocalPrivError

runner = CliRunner()


def one_line_error(result) -> str:
    assert result.exit_code in (1, 2), result.output
    text = result.output.strip()
    assert len(text.splitlines()) == 1, text
    return text


# ---- (2) levels in closed form, equal to the dense computation where both are feasible --------
@pytest.mark.parametrize("k", [2, 3, 7, 40])
@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 2.0])
@pytest.mark.parametrize("bins, bounds", [(1.0, None), (1.0, "lo=0,hi={last}"), (0.3, None), (2.0, None),
                                          (7.5, "lo=-3,hi=5"), (1.0, "lo=2,hi=3")])
def test_binned_laplace_level_equals_dense(k, eps, bins, bounds):
    spec = f"laplace(k={k},eps={eps},bins={bins}" + ("," + bounds.format(last=k - 1) if bounds else "") + ")"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mech = parse(spec)
        dense = ldp_epsilon(mech._probe())
        if mech.sampler is not None:
            dense += float(mech._sampler_excess(mech.k - 1))
        assert mech.epsilon_ldp() == dense


@pytest.mark.parametrize("hi", [9_999, 99_999])
def test_large_unit_bins_level_without_a_dense_channel(hi):
    mech = parse(f"laplace(eps=0.001,bins=1.0,lo=0,hi={hi})")
    # refused as soon as the dense channel is asked for, yet the level is computed
    with pytest.raises(LocalPrivError, match="limit is"):
        from localpriv.likelihood.blocks import dense_cap_override
        with dense_cap_override(1_000_000):
            mech.channel()
    level = ldp_level_within_budget(mech)
    assert level == pytest.approx(0.001 * hi, rel=1e-3)


@pytest.mark.parametrize("spec", ["laplace(eps=0.0001,bins=1.0,lo=0,hi=9999999)",
                                  "laplace(k=1000000,eps=0.5,bins=0.001)"])
def test_level_above_the_budget_is_refused_before_any_channel(spec):
    mech = parse(spec)
    with pytest.raises(LocalPrivError, match="LOCALPRIV_MAX_LEVEL_ENTRIES") as info:
        ldp_level_within_budget(mech)
    assert "\n" not in str(info.value)
    # from a file: the level behind the large-level warning is not computed past the budget, and
    # the spec is not refused for it (the estimate's dense cap bounds what is built later)
    assert parse(spec, trusted=False).k == mech.k


def test_policy_admission_is_bounded():
    policy = AdmissionPolicy.from_dict({"mechanisms": ["laplace", "krr"], "max_eps": 100.0})
    dom = parse_domain("0..4999")
    mech = policy.admit("laplace(eps=0.01,bins=1.0,lo=0,hi=4999)", dom)  # closed form, O(k)
    assert mech.k == 5000
    big = parse_domain("0..9999999")
    with pytest.raises(LocalPrivError) as info:
        policy.admit("laplace(eps=0.00001,bins=1.0,lo=0,hi=9999999)", big)
    assert "LOCALPRIV_MAX_LEVEL_ENTRIES" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(LocalPrivError, match="above the collection's cap"):
        policy.admit("krr(eps=200.0)", dom)


def test_cli_mechanism_level_in_closed_form():
    res = runner.invoke(app, ["mechanism", "laplace(eps=0.01,bins=1.0,lo=0,hi=4999)"])
    assert res.exit_code == 0, res.output
    assert "49.99" in res.output


# ---- (3) numbers, not strings --------------------------------------------------------------
@pytest.mark.parametrize("spec", ["krr(k=4,eps='2')", "oue(k=4,eps=\"1.0\")", "geometric(k=5,eps='0.5')"])
def test_strings_for_numbers_refused(spec):
    with pytest.raises(LocalPrivError, match="must be a number, got the string"):
        parse(spec)
    assert "must be a number" in one_line_error(runner.invoke(app, ["mechanism", spec]))


# ---- (1) sizes asked for by a spec ---------------------------------------------------------
@pytest.mark.parametrize("spec", ["krr(k=10000000000,eps=1.0)", "geometric(eps=1.0,lo=0,hi=99999999999)",
                                  "rappor(k=5,m=3000000000)", "planar-laplace(eps=1.0,nrows=100000,ncols=100000)"])
def test_spec_sizes_capped_before_building(spec):
    with pytest.raises(LocalPrivError, match="LOCALPRIV_MAX_SPEC_SIZE"):
        parse(spec)
    assert "LOCALPRIV_MAX_SPEC_SIZE" in one_line_error(runner.invoke(app, ["mechanism", spec]))


# ---- (1) grids -----------------------------------------------------------------------------
@pytest.mark.parametrize("text, pattern", [
    ("grid(lat0=40.0,lon0=-74.0,nrows=100000,ncols=100000,cell_km=0.001)", "LOCALPRIV_MAX_GRID_CELLS"),
    ("grid(lat0=89.0,lon0=0.0,nrows=100,ncols=10,cell_km=10.0)", "beyond the north pole"),
    ("grid(lat0=95.0,lon0=0.0,nrows=2,ncols=2,cell_km=1.0)", "not a latitude"),
    ("grid(lat0=10.0,lon0=200.0,nrows=2,ncols=2,cell_km=1.0)", "not a longitude"),
])
def test_grid_bounds(text, pattern):
    with pytest.raises(LocalPrivError, match=pattern):
        parse_domain(text)
    assert GridDomain(40.0, -74.0, 10, 10, 0.5).size == 100  # an ordinary grid still works
    res = runner.invoke(app, ["mechanism", "krr(eps=1.0)", "--domain", text])
    assert pattern.split()[0] in one_line_error(res)


def test_grid_cap_can_be_raised(monkeypatch):
    monkeypatch.setenv("LOCALPRIV_MAX_GRID_CELLS", "10")
    with pytest.raises(LocalPrivError, match="above the limit of 10"):
        GridDomain(40.0, -74.0, 4, 4, 0.5)
    monkeypatch.setenv("LOCALPRIV_MAX_GRID_CELLS", "16")
    assert GridDomain(40.0, -74.0, 4, 4, 0.5).size == 16


# ---- (1) heavy hitters ---------------------------------------------------------------------
def test_heavy_hitters_k_bounded():
    enc = StringEncoding(max_length=3, alphabet="digits")
    plan = PEMPlan(eps=2.0, encoding=enc)
    reports = pem_perturb(["123", "456"], plan, np.random.default_rng(1))
    with pytest.raises(LocalPrivError, match="at most the number of users"):
        pem_identify(reports, 1_000_000_000)
    with pytest.raises(LocalPrivError, match=f"at most {MAX_K:,}"):
        pem_identify(reports, MAX_K + 1)
    assert len(pem_identify(reports, 2)) <= 2


def test_cli_heavy_hitters_k_bounded(tmp_path):
    values = tmp_path / "v.csv"
    values.write_text("v\nabc\nabd\n")
    res = runner.invoke(app, ["heavy-hitters", str(values), "--k", "1000000000", "--eps", "2.0"])
    assert "at most the number of users" in one_line_error(res)


# ---- (1) policy files ----------------------------------------------------------------------
@pytest.mark.parametrize("suffix, text", [(".json", "[" * 100_000 + "]" * 100_000),
                                          (".json", '{"specs": ' + "[" * (MAX_POLICY_DEPTH + 5)
                                           + "]" * (MAX_POLICY_DEPTH + 5) + "}"),
                                          (".toml", "a = " + "[" * 1000 + "]" * 1000 + "\n")])
def test_deep_policy_files_refused(tmp_path, suffix, text):
    path = tmp_path / f"policy{suffix}"
    path.write_text(text)
    with pytest.raises(LocalPrivError, match=f"more than {MAX_POLICY_DEPTH} levels deep") as info:
        load_policy(path)
    assert "\n" not in str(info.value)


def test_brackets_in_strings_do_not_count(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text('{"nonsense": "' + "[" * 100 + '"}')
    with pytest.raises(LocalPrivError, match="unknown key"):  # read, then refused for its content
        load_policy(path)


# ---- (4) reports files whose columns contradict their header -------------------------------
def _csv(tmp_path: Path, text: str) -> str:
    path = tmp_path / "r.csv"
    path.write_text(text)
    return str(path)


def test_reports_file_with_count_column_refused(tmp_path):
    path = _csv(tmp_path, "#localpriv format=3 kind=reports\nmechanism,report,count\n"
                          "krr(k=3,eps=1.0),1,6\nkrr(k=3,eps=1.0),2,1\n#localpriv end rows=2\n")
    with pytest.raises(LocalPrivError, match="marked as reports .* has a count column"):
        open_source(path)
    res = runner.invoke(app, ["aggregate", path, "-o", str(tmp_path / "c.csv")])
    assert "count column" in one_line_error(res)
    assert not (tmp_path / "c.csv").exists()


def test_unmarked_file_with_count_column_is_counts(tmp_path):
    path = _csv(tmp_path, "mechanism,report,count\nkrr(k=3,eps=1.0),1,6\nkrr(k=3,eps=1.0),2,1\n")
    assert open_source(path).kind == "counts"


def test_key_column_twice_refused(tmp_path):
    path = _csv(tmp_path, "mechanism,report,report\nkrr(k=3,eps=1.0),1,2\n")
    with pytest.raises(LocalPrivError, match="column report more than once"):
        open_source(path)


# ---- (1) products of sizes: each factor within its cap, the product refused before building --------
@pytest.mark.parametrize("spec, product", [
    ("rappor(k=100000000,m=64,h=2,cohorts=64)", "k x cohorts x m"),
    ("rappor(k=20000000)", "k x cohorts x m"),                       # the defaults count too
    ("cms(k=100000000,eps=1.0,m=1024,d=64)", "k x d"),
    ("hcms(k=10000000,eps=1.0)", "k x d"),
    ("sw(k=100000,eps=1.0,buckets=100000)", "k x buckets"),
])
def test_products_of_spec_sizes_refused_before_building(spec, product):
    with pytest.raises(LocalPrivError, match=f"{product} = .*LOCALPRIV_MAX_SPEC_SIZE"):
        parse(spec)
    text = one_line_error(runner.invoke(app, ["mechanism", spec]))
    assert product in text and "LOCALPRIV_MAX_SPEC_SIZE" in text


def test_product_cap_can_be_raised(monkeypatch):
    monkeypatch.setenv("LOCALPRIV_MAX_SPEC_SIZE", "2e10")
    assert parse("sw(k=100000,eps=1.0,buckets=100000)").k == 100_000  # built lazily: no table yet


@pytest.mark.parametrize("spec", ["oue(k=900000000,eps=1.0)", "ss(k=900000000,eps=1.0,omega=400000000)",
                                  "she(k=400000000,eps=1.0)"])
def test_users_times_report_width_refused_before_allocation(spec):
    mech = parse(spec)
    with pytest.raises(LocalPrivError, match=r"reports x .* bytes .*LOCALPRIV_MAX_DENSE_ENTRIES") as info:
        mech.sample(np.zeros(20, dtype=np.int64), 0)
    assert "\n" not in str(info.value)


def test_free_will_outputs_add_up_under_the_cap(tmp_path, monkeypatch):
    from localpriv.domains import IntegerDomain
    monkeypatch.setenv("LOCALPRIV_MAX_SPEC_SIZE", "250")
    policy = tmp_path / "p.json"
    policy.write_text('{"column": "g", "specs": {"a": "krr(eps=1.0)", "b": "krr(eps=2.0)", "c": "krr(eps=3.0)"}}')
    with pytest.raises(LocalPrivError, match="add up to more than the cap of 250 .*LOCALPRIV_MAX_SPEC_SIZE"):
        load_policy(policy).mechanisms(IntegerDomain(0, 99))
    monkeypatch.setenv("LOCALPRIV_MAX_SPEC_SIZE", "300")
    assert len(load_policy(policy).mechanisms(IntegerDomain(0, 99))) == 3


def test_http_batch_with_a_product_above_the_cap_refused(tmp_path):
    import json

    from fastapi.testclient import TestClient

    from localpriv.service.app import create_app
    from localpriv.service.core import Collector
    from localpriv.service.storage import open_store

    admin = "test-admin-token-0123456789"
    tc = TestClient(create_app(Collector(open_store(str(tmp_path / "c.sqlite")), admin), 1 << 20),
                    raise_server_exceptions=False)
    r = tc.post("/v1/collections", headers={"Authorization": f"Bearer {admin}"},
                json={"name": "big", "domain": "0..99999", "policy": {"mechanisms": ["sw"], "max_eps": 2.0}})
    assert r.status_code == 201, r.text
    body = {"batch_id": "b1", "groups": [{"mechanism": "sw(eps=1.0,buckets=100000)", "reports": [1]}]}
    r = tc.post("/v1/collections/big/batches", headers={"Authorization": f"Bearer {r.json()['ingest_token']}"},
                json=body)
    assert 400 <= r.status_code < 500, r.text
    err = json.loads(r.text)["error"]
    assert "k x buckets" in err and "LOCALPRIV_MAX_SPEC_SIZE" in err and "\n" not in err


# ---- (4) columns that contradict the file: honoured or refused, never ignored --------------------
_M = "krr(k=3,eps=1.0)"
_CONTRADICTIONS = [
    ("reports, Count column", f"#localpriv format=3 kind=reports\nmechanism,report,Count\n{_M},1,6\n"
                              "#localpriv end rows=1\n", "'Count'"),
    ("unmarked, Count column", f"mechanism,report,Count\n{_M},1,6\n", "'Count'"),
    ("reports, weight column", f"#localpriv format=3 kind=reports\nmechanism,report,weight\n{_M},1,6\n"
                               "#localpriv end rows=1\n", "'weight'"),
    ("unmarked, n column", f"mechanism,report,n\n{_M},1,6\n", "'n'"),
    ("counts, extra n column", f"#localpriv format=3 kind=counts\nmechanism,report,count,n\n{_M},1,6,3\n"
                               "#localpriv end rows=1\n", "'n'"),
    ("counts, Report column", f"#localpriv format=3 kind=counts\nmechanism,Report,count\n{_M},1,6\n"
                              "#localpriv end rows=1\n", "no column"),
]


@pytest.mark.parametrize("why, text, named", _CONTRADICTIONS, ids=[c[0] for c in _CONTRADICTIONS])
def test_csv_columns_that_would_be_ignored_refused(tmp_path, why, text, named):
    path = _csv(tmp_path, text)
    with pytest.raises(LocalPrivError, match=named):
        open_source(path)
    res = runner.invoke(app, ["aggregate", path, "-o", str(tmp_path / "c.csv")])
    assert named in one_line_error(res)
    assert not (tmp_path / "c.csv").exists()


@pytest.mark.parametrize("columns, kind, named", [
    ({"Count": [6]}, None, "'Count'"), ({"weight": [6]}, None, "'weight'"),
    ({"count": [6]}, b"reports", "count column"), ({"count": [6], "users": [1]}, b"counts", "'users'")])
def test_parquet_columns_that_would_be_ignored_refused(tmp_path, columns, kind, named):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"mechanism": [_M], "report": [1], **columns})
    if kind is not None:
        table = table.replace_schema_metadata({b"localpriv.format": b"3", b"localpriv.kind": kind})
    path = tmp_path / "r.parquet"
    pq.write_table(table, path)
    with pytest.raises(LocalPrivError, match=named):
        open_source(str(path))
    assert named in one_line_error(runner.invoke(app, ["aggregate", str(path), "-o", str(tmp_path / "c.csv")]))


def test_report_tables_in_memory_hold_their_columns_or_are_refused():
    import pyarrow as pa

    from localpriv.data.aggregate import aggregate
    from localpriv.domains import IntegerDomain

    dom = IntegerDomain(0, 2)
    with pytest.raises(LocalPrivError, match="'weight'"):
        aggregate(pa.table({"mechanism": [_M], "report": [1], "weight": [5]}), dom)
    obs = aggregate(pa.table({"mechanism": [_M, _M], "report": [1, 2], "count": [6, 1]}), dom)
    assert obs.n == 7  # a count column is honoured


@pytest.mark.parametrize("name, text", [("r.tsv", f"mechanism\treport\tcount\n{_M}\t1\t6\n"),
                                        ("r.json", '[{"mechanism": "krr(k=3,eps=1.0)", "report": 1, "count": 6}]')])
def test_tsv_and_json_are_not_report_files(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    # refused in one line, whichever check sees it first (type, format or columns)
    with pytest.raises(LocalPrivError, match="unknown file type|not TSV|not a report or counts file") as info:
        open_source(str(path))
    assert "\n" not in str(info.value)
