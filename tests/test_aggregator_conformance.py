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
