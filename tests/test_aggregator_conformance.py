"""Every registered aggregation engine passes every conformance check (localpriv.testing.aggregators):
same counts, same Observations, same one-line refusals. Spark shares one local[1] session per module."""
import pytest

from localpriv.data.aggregate import ENGINES, aggregate
from localpriv.testing.aggregators import AGGREGATOR_CHECKS, aggregator_checks
from localpriv.utils.validation import LocalPrivError

pytestmark = pytest.mark.filterwarnings("ignore:distutils Version classes are deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def spark_session():
    pytest.importorskip("pyspark")
    from localpriv.extras import spark as lps
    s = lps.session("local[1]", config={"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "1"})
    yield s
    s.stop()


@pytest.fixture
def engine(request):
    name = request.param
    if name == "spark":
        request.getfixturevalue("spark_session")
    return name


CASES = [pytest.param(e, name, id=f"{e}-{name}")
         for e in ENGINES for name in AGGREGATOR_CHECKS]


@pytest.mark.parametrize("engine, check_name", CASES, indirect=["engine"])
def test_engine_conforms(engine, check_name, tmp_path):
    AGGREGATOR_CHECKS[check_name](engine, tmp_path)


def test_checks_listed_for_every_engine():
    for e in ENGINES:
        assert [n for n, _ in aggregator_checks(e)] == list(AGGREGATOR_CHECKS)


def test_unknown_engine_is_one_line_listing_the_known():
    with pytest.raises(LocalPrivError, match=r"^unknown aggregation engine 'nope'; known: duckdb, numpy, spark$"):
        aggregate("x.parquet", engine="nope")


def test_spark_observations_estimate_on_spark_like_local(spark_session, tmp_path):
    import numpy as np

    from localpriv import parse
    from localpriv.data.reports import report_table, write_reports
    from localpriv.inference import estimate
    mech = parse("krr(k=5,eps=1.0)")
    x = np.random.default_rng(50).integers(0, 5, 400)
    write_reports(report_table(mech, mech.sample(x, np.random.default_rng(51))), tmp_path / "r.parquet")
    obs = aggregate(tmp_path / "r.parquet", engine="spark")
    assert obs.frame is not None
    on_spark = estimate(obs, "ibu", engine="spark", local_max=0)
    local = estimate(obs, "ibu")
    assert on_spark.settings["engine"] == "spark"
    np.testing.assert_allclose(on_spark.distribution, local.distribution, atol=1e-9)
    with pytest.raises(LocalPrivError, match=r"^unknown estimation engine 'gpu'; known: local, spark$"):
        estimate(obs, engine="gpu")
