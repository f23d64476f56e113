"""The interval domain of numeric attributes: cells, spec strings, refusals, pipeline."""
import numpy as np
import pytest

from localpriv import aggregate, estimate, perturb
from localpriv.domains import CategoricalDomain, IntegerDomain, IntervalDomain, parse_domain
from localpriv.estimators.regularized import ordered_shape
from localpriv.mechanisms import parse
from localpriv.utils.validation import LocalPrivError


def test_cells_encode_decode_and_edges():
    d = IntervalDomain(0, 100, 50)
    assert d.size == 50 and d.width == 2.0 and d.is_metric and d.is_numeric
    assert d.encode([0, 1.999, 2.0, 99.0, 100]).tolist() == [0, 0, 1, 49, 49]  # hi is in the last cell
    assert d.decode([0, 49]).tolist() == [1.0, 99.0]
    assert np.array_equal(d.labels, d.cell_centres())
    assert d.cell_edges()[[0, -1]].tolist() == [0.0, 100.0] and d.cell_edges().size == 51
    assert d.encode(["3.5", "100"]).tolist() == [1, 49]  # text columns read as numbers
    assert d.to_unit([0, 25, 100]).tolist() == [0.0, 0.25, 1.0]
    D = d.distance_matrix()
    assert D.shape == (50, 50) and D[0, 3] == pytest.approx(6.0)


@pytest.mark.parametrize("values,msg", [([-1, 5, 101], r"outside the domain \[0, 100\]: -1.0, 101.0 \(2 value"),
                                        ([1.0, np.nan], "NaN or infinite"),
                                        (["7", "seven"], "not numbers: 'seven'"),
                                        ([True, False], "booleans"),
                                        ([], "empty")])
def test_values_outside_or_unreadable_are_refused_and_named(values, msg):
    with pytest.raises(LocalPrivError, match=msg):
        text = bool(values) and isinstance(values[0], str)
        IntervalDomain(0, 100, 50).encode(np.asarray(values, dtype=object if text else None))


def test_invalid_marks_the_rows_encode_refuses():
    d = IntervalDomain(0, 1, 4)
    assert d.invalid(np.array([0.5, -0.1, 1.0, np.nan, 2.0])).tolist() == [False, True, False, True, True]


@pytest.mark.parametrize("text", ["interval(0,100,50)", "interval(lo=0,hi=100,bins=50)", " INTERVAL( 0 , 100 , 50 ) ",
                                  "interval(bins=50,lo=0.0,hi=1e2)"])
def test_spec_forms_and_round_trip(text):
    d = parse_domain(text)
    assert d == IntervalDomain(0.0, 100.0, 50)
    assert d.spec() == "interval(0.0,100.0,50)" and parse_domain(d.spec()) == d and str(d) == d.spec()


@pytest.mark.parametrize("text,msg", [("interval(0,1)", "expected interval"), ("interval(1,0,4)", "lo < hi"),
                                      ("interval(0,1,2.5)", "bins must be a whole number"),
                                      ("interval(0,1,0)", "bins must be a whole number from 1"),
                                      ("interval(a,1,2)", "lo must be a number"),
                                      ("interval(lo=0,lo=1,bins=2)", "lo given twice"),
                                      ("interval(0,inf,4)", "finite"),
                                      ("interval(low=0,hi=1,bins=2)", "unknown field 'low'")])
def test_bad_specs_are_one_line_errors(text, msg):
    with pytest.raises(LocalPrivError, match=msg) as info:
        parse_domain(text)
    assert "\n" not in str(info.value)


def test_existing_domain_specs_unchanged():
    assert parse_domain("0..99") == IntegerDomain(0, 99)
    assert parse_domain("a,b,c") == CategoricalDomain(["a", "b", "c"])


def test_ems_smooths_along_an_interval_and_the_pipeline_carries_float_reports():
    d = parse_domain("interval(0,10,8)")
    assert ordered_shape(d) == (8,)
    rng = np.random.default_rng(5)
    values = np.clip(rng.normal(6.0, 1.5, 4000), 0, 10)
    for spec in ("pm(eps=2.0)", "sw(eps=2.0)"):
        mech = parse(spec, d)
        assert mech.k == 8
        obs = aggregate(perturb(values, mech, np.random.default_rng(6), d), d)
        est = estimate(obs, "ems")
        assert est.domain == d and est.distribution.size == 8 and est.converged
        # the estimated mean (cell centres) lands near the values' mean: a loose sanity bound
        # (the intervals' calibration is tested in test_numeric_mechanisms.py)
        assert abs(est.mean().value - values.mean()) < 1.0


def test_command_line_reads_an_interval_domain(tmp_path):
    from typer.testing import CliRunner

    from localpriv.cli.main import app
    values = tmp_path / "hours.csv"
    values.write_text("hours\n40\n38.5\n60\n12.25\n99\n100\n0\n")
    runner = CliRunner()
    res = runner.invoke(app, ["perturb", str(values), "--column", "hours", "--domain", "interval(0,100,20)",
                              "--mechanism", "pm(eps=1.0)", "--seed", "0", "--out", str(tmp_path / "r.parquet")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["estimate", str(tmp_path / "r.parquet"), "--domain", "interval(0,100,20)", "-e", "ibu",
                              "--out", str(tmp_path / "e.csv")])
    assert res.exit_code == 0, res.output
    lines = (tmp_path / "e.csv").read_text().splitlines()
    assert lines[0] == "value,probability" and len(lines) == 21 and lines[1].startswith("2.5,")
    (tmp_path / "bad.csv").write_text("hours\n40\n101\n")
    res = runner.invoke(app, ["perturb", str(tmp_path / "bad.csv"), "--column", "hours",
                              "--domain", "interval(0,100,20)", "--mechanism", "pm(eps=1.0)", "--seed", "0",
                              "--out", str(tmp_path / "r2.parquet")])
    assert res.exit_code == 1 and "values outside the domain [0, 100]: 101.0" in res.output
