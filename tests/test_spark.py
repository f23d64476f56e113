"""localpriv on Spark: the same counts as DuckDB, the same refusals, reproducible
clients per partition, and EM over partitions equal to the local engine. One local[2] session per
test process (session fixture); fixed seeds; small data (the whole file runs in well under 90 s)."""
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from localpriv import IntegerDomain, LocalPrivError, parse
from localpriv.data.aggregate import DuckDBAggregator, write_counts
from localpriv.data.observations import Observations
from localpriv.data.reports import perturb, report_table, write_reports
from localpriv.extras import spark as lps

# pyspark 3.5 compares versions with distutils' LooseVersion: its own deprecation, not ours
pytestmark = pytest.mark.filterwarnings("ignore:distutils Version classes are deprecated:DeprecationWarning")


@pytest.fixture(scope="session")
def spark():
    s = lps.session("local[2]", config={"spark.sql.shuffle.partitions": "2",
                                        "spark.default.parallelism": "2"})
    yield s
    s.stop()


def _reports(n, spec, seed=0, x=None):
    mech = parse(spec)
    x = np.random.default_rng(seed).integers(0, mech.k, n) if x is None else x
    return report_table(mech, mech.sample(x, np.random.default_rng(seed + 1)))


def test_counts_equal_duckdb_mixed_kinds_counts_files_and_hive(spark, tmp_path):
    write_reports(_reports(500, "krr(k=10,eps=1.0)"), tmp_path / "k.parquet")
    write_reports(_reports(300, "oue(k=10,eps=1.0)"), tmp_path / "o.parquet")        # bit vectors
    write_reports(_reports(200, "laplace(k=10,eps=1.0)"), tmp_path / "l.parquet")    # floats
    mixed = pa.concat_tables([_reports(100, "krr(k=10,eps=1.0)", 5).cast(pa.schema(
        [("mechanism", pa.string()), ("report", pa.int64())])), _reports(50, "krr(k=10,eps=3.0)", 6).cast(
        pa.schema([("mechanism", pa.string()), ("report", pa.int64())]))])
    write_reports(mixed, tmp_path / "mixed.parquet")                                  # two specs, one file
    write_counts(DuckDBAggregator().counts([tmp_path / "k.parquet"]), tmp_path / "c.parquet")
    write_counts(DuckDBAggregator().counts([tmp_path / "o.parquet"]), tmp_path / "c.csv")  # driver path
    part = tmp_path / "ds" / "mechanism=krr(k=10,eps=3.0)"
    part.mkdir(parents=True)
    pq.write_table(_reports(100, "krr(k=10,eps=3.0)").drop(["mechanism"]), part / "p.parquet")
    (tmp_path / "ds" / "_SUCCESS").write_text("")
    inputs = [tmp_path / n for n in ("k.parquet", "o.parquet", "l.parquet", "mixed.parquet", "c.parquet",
                                     "c.csv", "ds")]
    expected = DuckDBAggregator().counts(inputs)
    got = lps.SparkAggregator(spark).counts(inputs)
    pd.testing.assert_frame_equal(got, expected)
    assert int(got["count"].sum()) == 500 + 300 + 200 + 150 + 500 + 300 + 100
    # a URI goes to Spark untouched (its own listing and hive partition discovery): object stores alike
    pd.testing.assert_frame_equal(lps.SparkAggregator(spark).counts([(tmp_path / "ds").as_uri()]),
                                  DuckDBAggregator().counts([tmp_path / "ds"]))


def test_cli_engine_spark_writes_the_duckdb_counts(spark, tmp_path):
    from localpriv.cli.main import main
    write_reports(_reports(400, "krr(k=10,eps=1.0)"), tmp_path / "k.parquet")
    write_reports(_reports(100, "sue(k=12,eps=2.0)"), tmp_path / "s.parquet")
    inputs = [str(tmp_path / "k.parquet"), str(tmp_path / "s.parquet")]
    for engine in ("duckdb", "spark"):
        code = main(["aggregate", *inputs, "--engine", engine, "--out", str(tmp_path / f"{engine}.parquet")])
        assert code in (0, None)
    a = DuckDBAggregator().counts([tmp_path / "duckdb.parquet"])
    b = DuckDBAggregator().counts([tmp_path / "spark.parquet"])
    pd.testing.assert_frame_equal(a, b)
    assert pq.ParquetFile(tmp_path / "spark.parquet").metadata.metadata[b"localpriv.kind"] == b"counts"


def test_bad_rows_refused_with_the_duckdb_message(spark, tmp_path):
    write_reports(_reports(50, "krr(k=10,eps=1.0)"), tmp_path / "good.parquet")
    bad = {  # (a good file first: the refusal names the bad one)
        "out": pa.table({"mechanism": ["krr(k=10,eps=1.0)"] * 4, "report": [1, 12, 3, 12]}),
        "nan": pa.table({"mechanism": ["laplace(k=10,eps=1.0)"] * 3, "report": [0.5, float("nan"), 1.0]}),
        "neg": pa.table({"mechanism": ["krr(k=10,eps=1.0)"] * 2, "report": [1, 2], "count": [5, -1]}),
        "nomech": pa.table({"mechanism": ["krr(k=10,eps=1.0)", None], "report": [1, 2]}),
    }
    agg = lps.SparkAggregator(spark)
    for name, table in bad.items():
        pq.write_table(table, tmp_path / f"{name}.parquet")
        inputs = ([tmp_path / "good.parquet"] if name == "out" else []) + [tmp_path / f"{name}.parquet"]
        with pytest.raises(LocalPrivError) as duck:
            DuckDBAggregator().counts(inputs)
        with pytest.raises(LocalPrivError) as ours:
            agg.counts(inputs)
        assert str(ours.value) == str(duck.value), name
        assert f"{name}.parquet" in str(ours.value)


def test_perturb_column_one_stream_per_partition(spark):
    dom = IntegerDomain(0, 9)
    values = np.random.default_rng(3).integers(0, 10, 3000)
    df = spark.createDataFrame(pd.DataFrame({"age": values, "cohort": np.arange(3000) % 7})).repartition(
        3).sortWithinPartitions("cohort")
    parts = [np.asarray(p, dtype=np.int64) for p in df.rdd.glom().map(lambda rows: [r.age for r in rows]).collect()]
    out = lps.perturb_column(df, "age", "krr(eps=1.0)", seed=11, domain=dom, keep=["cohort"])
    assert out.columns == ["cohort", "mechanism", "report"]
    got = out.rdd.glom().map(lambda rows: [r.report for r in rows]).collect()
    for pid, vals in enumerate(parts):
        want = perturb(vals, "krr(eps=1.0)", lps.partition_generator(11, pid), dom).column("report").to_numpy()
        np.testing.assert_array_equal(np.asarray(got[pid]), want)
    # the same seed and partitioning give the same reports; another seed does not
    again = out.toPandas()
    pd.testing.assert_frame_equal(again, lps.perturb_column(df, "age", "krr(eps=1.0)", seed=11, domain=dom,
                                                            keep=["cohort"]).toPandas())
    other = lps.perturb_column(df, "age", "krr(eps=1.0)", seed=12, domain=dom).toPandas()
    assert not np.array_equal(other["report"].to_numpy(), again["report"].to_numpy())
    assert lps.partition_generator(11, 2).random() == np.random.default_rng(
        np.random.SeedSequence(11).spawn(3)[2]).random()
    with pytest.raises(LocalPrivError):
        lps.perturb_column(df, "nosuch", "krr(eps=1.0)", seed=1, domain=dom)


@pytest.mark.filterwarnings("ignore::localpriv.mechanisms.base.LargeEpsilonWarning")  # laplace eps=2 on k=6
def test_em_over_partitions_equals_the_local_engine(spark, tmp_path):
    """GIBU on exact-likelihood OLH, SHE and continuous Laplace (reports left on Spark, one job per
    evaluation) with k-RR (few distinct reports: a driver-side block) equals the local engine."""
    from localpriv.estimators.em import em
    rng = np.random.default_rng(7)
    files = []
    for i, spec in enumerate(("olh(k=6,eps=4.0)", "she(k=6,eps=4.0)", "laplace(k=6,eps=2.0)", "krr(k=6,eps=2.0)")):
        mech = parse(spec)
        f = tmp_path / f"r{i}.parquet"
        write_reports(report_table(mech, mech.sample(rng.integers(0, 6, 1000), rng)), f)
        files.append(f)
    frame = lps.SparkAggregator(spark).counts_frame(files)
    est = lps.ibu(frame, delta=1e-12, local_max=100)
    obs = Observations.from_frame(DuckDBAggregator().counts(files))
    blocks = obs.likelihood_blocks()
    local = em(blocks, obs.k, accelerate="newton", delta=1e-12)
    assert est.converged and local.converged and est.iterations < 60
    np.testing.assert_allclose(est.distribution, local.theta, rtol=0, atol=1e-9)
    offset = sum(getattr(b, "log_offset", 0.0) for b in blocks)
    assert abs(est.loglik - (local.loglik + offset)) <= 1e-9 * abs(local.loglik)
    # one Spark job per evaluated point (EM images and SQUAREM's extrapolations), all mechanisms at once
    assert 0 < est.extra["spark_passes"] <= 2 * est.iterations + 1
    with pytest.raises(LocalPrivError, match="newton"):
        lps.ibu(frame, accelerate="fast")
    frame.unpersist()


def test_newton_finish_on_spark_one_pass_per_step(spark, tmp_path):
    """The engine's Newton finish on Spark blocks: each pass also sums -H = G diag(c/p^2) G^T over
    the partitions, so a step (or line-search trial) is one pass; from an EM iterate it certifies
    the boundary maximum the local engine finds (1e-9), in a handful of passes."""
    from localpriv.estimators.em import em
    from localpriv.estimators.newton import newton_finish
    rng = np.random.default_rng(0)
    files = []
    for i, spec in enumerate(("olh(k=12,eps=2.0)", "krr(k=12,eps=2.0)")):
        mech = parse(spec)
        f = tmp_path / f"r{i}.parquet"  # values 0 and 1 only: 10 of 12 cells empty
        write_reports(report_table(mech, mech.sample(rng.integers(0, 2, 800), rng)), f)
        files.append(f)
    frame = lps.SparkAggregator(spark).counts_frame(files)
    blocks, k, evaluator = lps.spark_blocks(frame, local_max=10)
    obs = Observations.from_frame(DuckDBAggregator().counts(files))
    local_blocks = obs.likelihood_blocks()
    exact = em(local_blocks, k, accelerate="newton", delta=1e-12)
    assert exact.converged and (exact.theta < 1e-12).any()  # the maximum is on the boundary
    start = em(local_blocks, k, accelerate="none", max_iter=30).theta  # an EM iterate, not converged
    n = sum(b.counts.sum() for b in local_blocks)
    fin = newton_finish(blocks, start, n, kkt_tol=1e-10)
    assert fin.certified
    np.testing.assert_allclose(fin.theta, exact.theta, rtol=0, atol=1e-9)
    assert evaluator.hessian_passes == evaluator.passes <= fin.products <= 25
    assert not evaluator.with_hessian  # the finish's hooks are undone
    frame.unpersist()
