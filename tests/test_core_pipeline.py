"""Reports -> aggregation (DuckDB) -> estimation, files, metrics, the CLI and the demo."""
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.stats import wasserstein_distance
from typer.testing import CliRunner

from localpriv.cli.main import app
from localpriv.data.aggregate import DuckDBAggregator, NumpyAggregator, aggregate
from localpriv.data.reports import perturb, write_reports
from localpriv.domains import IntegerDomain
from localpriv.inference.metrics import emd_line, jensen_shannon, kl, l1, l2, mae, mse, total_variation
from localpriv.mechanisms import KRR
from localpriv.utils.validation import LocalPrivError
from reproductions import run_experiment


def test_perturb_aggregate_roundtrip_parquet_and_csv(tmp_path, rng):
    dom = IntegerDomain(0, 9)
    values = rng.integers(0, 10, size=5000)
    t1 = perturb(values, "krr(eps=1.0)", rng, dom)
    t2 = perturb(values[:1000], "krr(eps=3.0)", rng, dom)
    mixed = pa.concat_tables([t1, t2], promote_options="permissive")
    write_reports(t1, tmp_path / "a.parquet")
    write_reports(t2, tmp_path / "b.csv")
    obs = aggregate([tmp_path / "a.parquet"], dom)
    assert obs.n == 5000 and len(obs.blocks) == 1
    # DuckDB and NumPy aggregators agree on a mixed table
    a = DuckDBAggregator().counts(mixed).sort_values(["mechanism", "report"]).reset_index(drop=True)
    b = NumpyAggregator().counts(mixed).sort_values(["mechanism", "report"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    obs2 = aggregate(mixed, dom)
    assert sorted(str(m) for m in obs2.mechanisms) == ["krr(k=10,eps=1.0)", "krr(k=10,eps=3.0)"]
    assert obs2.n == 6000
    assert aggregate([tmp_path / "b.csv"], dom).n == 1000
    # counts survive save/load
    obs2.save(tmp_path / "c.csv")
    back = aggregate(tmp_path / "c.csv", dom)
    assert back.n == 6000 and len(back.blocks) == 2


def test_aggregation_streams_many_files_in_bounded_memory(tmp_path, rng):
    m = KRR(50, 1.0)
    from localpriv.data.reports import report_table
    total = np.zeros(50)
    for i in range(4):
        z = m.sample(rng.integers(0, 50, 200_000), rng)
        total += np.bincount(z, minlength=50)
        pq.write_table(report_table(m, z), tmp_path / f"r{i}.parquet", row_group_size=50_000)
    df = DuckDBAggregator(memory_limit="64MB", threads=1).counts(sorted(tmp_path.glob("r*.parquet")))
    assert np.array_equal(df.sort_values("report")["count"].to_numpy(), total)


def test_aggregate_errors(tmp_path):
    with pytest.raises(LocalPrivError, match="not found"):
        aggregate([tmp_path / "missing.parquet"])
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "bad.parquet")
    with pytest.raises(LocalPrivError, match="no column"):
        aggregate([tmp_path / "bad.parquet"])
    empty = pa.table({"mechanism": pa.array([], pa.string()), "report": pa.array([], pa.int64())})
    with pytest.raises(LocalPrivError, match="empty"):
        aggregate(empty)


def test_metrics_by_hand_and_against_scipy(rng):
    p = np.array([0.5, 0.5, 0.0])
    q = np.array([0.0, 0.5, 0.5])
    assert emd_line(p, q) == pytest.approx(1.0)  # half the mass moves 2 steps
    assert emd_line(p, q, positions=[0, 10, 20]) == pytest.approx(10.0)
    assert total_variation(p, q) == pytest.approx(0.5) and l1(p, q) == pytest.approx(1.0)
    assert l2(p, q) == pytest.approx(np.sqrt(0.5)) and mse(p, q) == pytest.approx(0.5 / 3)
    assert mae(p, q) == pytest.approx(1 / 3)
    assert kl(p, q) == np.inf and kl(p, p) == 0.0
    assert jensen_shannon(p, q) == pytest.approx(0.5 * np.log(2))
    for _ in range(20):
        a, b = rng.dirichlet(np.ones(30)), rng.dirichlet(np.ones(30))
        x = np.arange(30)
        assert emd_line(a, b) == pytest.approx(wasserstein_distance(x, x, a, b))
    with pytest.raises(LocalPrivError, match="differ in shape"):
        l1([1.0], [0.5, 0.5])


def test_cli_end_to_end(tmp_path):
    runner = CliRunner()
    values = np.random.default_rng(0).integers(20, 60, size=3000)
    pd.DataFrame({"age": values}).to_csv(tmp_path / "ages.csv", index=False)
    r = runner.invoke(app, ["perturb", str(tmp_path / "ages.csv"), "--out", str(tmp_path / "rep.parquet"),
                            "--mechanism", "krr(eps=2.0)", "--domain", "0..99", "--seed", "1"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["aggregate", str(tmp_path / "rep.parquet"), "--out", str(tmp_path / "counts.csv")])
    assert r.exit_code == 0, r.output
    for src in ("rep.parquet", "counts.csv"):
        r = runner.invoke(app, ["estimate", str(tmp_path / src), "--domain", "0..99", "--estimator", "ibu",
                                "--out", str(tmp_path / "est.json"), "--plot", str(tmp_path / "est.png")])
        assert r.exit_code == 0, r.output
        est = json.loads((tmp_path / "est.json").read_text())
        assert est["estimator"] == "ibu" and abs(sum(est["distribution"]) - 1) < 1e-9
        assert (tmp_path / "est.png").stat().st_size > 1000
    r = runner.invoke(app, ["mechanism", "krr(k=4,eps=1.5)"])
    assert r.exit_code == 0 and "1.5" in r.output


@pytest.mark.parametrize("args,msg", [
    (["mechanism", "krr(k=1,eps=1.0)"], "k must be >= 2"),
    (["mechanism", "bogus(eps=1)"], "unknown mechanism"),
    (["estimate", "nofile.parquet", "--domain", "0..9"], "not found"),
])
def test_cli_errors_are_one_line_without_traceback(args, msg):
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 1
    assert msg in r.output and "Traceback" not in r.output


def test_cli_perturb_values_outside_domain(tmp_path):
    pd.DataFrame({"v": [1, 2, 300]}).to_csv(tmp_path / "v.csv", index=False)
    r = CliRunner().invoke(app, ["perturb", str(tmp_path / "v.csv"), "--out", str(tmp_path / "r.parquet"),
                                 "--mechanism", "krr(eps=1.0)", "--domain", "0..99", "--seed", "0"])
    assert r.exit_code == 1 and "300" in r.output


def test_demo_experiment(tmp_path):
    rec = run_experiment("demo", tmp_path, seed=0)
    res = rec["results"]
    assert res["n"] == 48842
    assert set(res["emd"]) == {"noisy", "inv-n", "inv-p", "ibu"}
    # estimation helps: every estimator is far closer to the truth than the noisy histogram
    assert max(res["emd"][k] for k in ("inv-n", "inv-p", "ibu")) < res["emd"]["noisy"] / 2
    assert (tmp_path / "demo.png").exists() and json.loads((tmp_path / "demo.json").read_text())["seed"] == 0


@pytest.mark.parametrize("with_binary", [False, True])
def test_duckdb_in_memory_merge_equals_its_tables(tmp_path, rng, monkeypatch, with_binary):
    """Few numeric parts are merged in memory (no round trip through DuckDB's tables); the frame
    is the one the tables give: overlapping files, a counts file with a zero, int and float
    reports, several mechanisms (and a bit-vector mechanism, which sends everything to DuckDB)."""
    import sys

    import localpriv.data.aggregate  # noqa: F401  (the name `aggregate` is also a function)

    agg_mod = sys.modules["localpriv.data.aggregate"]
    dom = IntegerDomain(0, 9)
    values = rng.integers(0, 10, size=3000)
    write_reports(perturb(values, "krr(eps=1.0)", rng, dom), tmp_path / "a.parquet")
    write_reports(perturb(values[:900], "krr(eps=1.0)", rng, dom), tmp_path / "b.csv")
    write_reports(perturb(values[:500], "laplace(eps=0.5)", rng, dom), tmp_path / "c.parquet")
    counts = pd.DataFrame({"mechanism": ["krr(k=10,eps=3.0)"] * 3, "report": [0, 4, 9], "count": [5, 0, 7]})
    counts.to_csv(tmp_path / "counts.csv", index=False)
    files = [tmp_path / "a.parquet", tmp_path / "b.csv", tmp_path / "c.parquet", tmp_path / "counts.csv"]
    if with_binary:
        write_reports(perturb(values[:300], "oue(eps=1.0)", rng, dom), tmp_path / "d.parquet")
        files.append(tmp_path / "d.parquet")
    memory = DuckDBAggregator().counts(files)
    monkeypatch.setattr(agg_mod, "_PENDING_ROWS", 0)
    tables = DuckDBAggregator().counts(files)
    pd.testing.assert_frame_equal(memory, tables)
    assert int(memory["count"].sum()) == 3000 + 900 + 500 + 12 + (300 if with_binary else 0)
    assert not (memory["count"] == 0).any()
