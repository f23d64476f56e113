"""Report and counts files of any name (--format, or the content sniffed and said) for aggregate
and estimate; exact counts of bad values over the whole file for numeric domains too."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from localpriv.cli.main import app


def run(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture()
def reports(tmp_path: Path) -> Path:
    (tmp_path / "v.csv").write_text("age\n" + "\n".join(str(20 + i % 40) for i in range(400)) + "\n")
    res = run("perturb", tmp_path / "v.csv", "-o", tmp_path / "r.csv", "-m", "krr(eps=2.0)", "-d", "0..99",
              "--seed", "1")
    assert res.exit_code == 0, res.output
    return tmp_path / "r.csv"


def test_aggregate_sniffs_a_csv_of_another_name_and_says_so(reports: Path, tmp_path: Path) -> None:
    shutil.copy(reports, tmp_path / "r.dat")
    res = run("aggregate", tmp_path / "r.dat", "-o", tmp_path / "c.csv")
    assert res.exit_code == 0, res.output
    assert "reading " in res.output and "r.dat as CSV: its first line holds 1 comma(s) and no tab" in res.output
    assert json.loads((tmp_path / "c.csv.meta.json").read_text())["localpriv.kind"] == "counts"


def test_estimate_reads_parquet_of_any_name_and_format_is_checked(reports: Path, tmp_path: Path) -> None:
    res = run("aggregate", reports, "-o", tmp_path / "c.parquet")
    assert res.exit_code == 0, res.output
    shutil.copy(tmp_path / "c.parquet", tmp_path / "counts.bin")
    res = run("estimate", tmp_path / "counts.bin", "-d", "0..99", "--format", "parquet")
    assert res.exit_code == 0, res.output
    assert "reading" not in res.output  # named: nothing to say
    res = run("estimate", tmp_path / "counts.bin", "-d", "0..99")
    assert res.exit_code == 0 and "as PARQUET: it starts with the Parquet magic bytes" in res.output
    res = run("estimate", tmp_path / "counts.bin", "-d", "0..99", "--format", "csv")
    assert res.exit_code == 1 and "is a Parquet file, but --format csv was given" in res.output
    res = run("aggregate", reports, "-o", tmp_path / "x.csv", "--format", "tsv")
    assert res.exit_code == 1 and "unknown format 'tsv'; use csv or parquet" in res.output


def test_csv_with_format_csv_whatever_its_name(reports: Path, tmp_path: Path) -> None:
    shutil.copy(reports, tmp_path / "reports.txt")
    res = run("aggregate", tmp_path / "reports.txt", "--format", "csv", "-o", tmp_path / "c.parquet")
    assert res.exit_code == 0, res.output and "reading" not in res.output


def _perturb_numbers(tmp_path: Path, lines: list[str], domain: str, mech: str = "krr(eps=2.0)") -> object:
    (tmp_path / "v.csv").write_text("x\n" + "\n".join(lines) + "\n")
    return run("perturb", tmp_path / "v.csv", "-o", tmp_path / "r.csv", "-m", mech, "-d", domain, "--seed", "1")


@pytest.mark.parametrize("domain,mech", [("0..9", "krr(eps=2.0)"), ("interval(0,10,5)", "pm(eps=1.0)")])
def test_numeric_domains_count_bad_values_over_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              domain: str, mech: str) -> None:
    import localpriv.data.reports as reports
    monkeypatch.setattr(reports, "CSV_BLOCK_BYTES", 256)  # many blocks
    lines = [str(i % 10) for i in range(600)]
    for at, bad in ((4, "11"), (300, "abc"), (301, "abc"), (590, "-3")):  # lines at + 2 (header, 1-based)
        lines[at] = bad
    res = _perturb_numbers(tmp_path, lines, domain, mech)
    assert res.exit_code == 1
    text = " ".join(res.output.split())
    assert "line 6" in text  # the first block's own cause
    assert "in the whole file 4 lines (3 distinct values) not in the domain" in text
    assert "first at lines 6, 302, 303" in text
    assert not (tmp_path / "r.csv").exists()


def test_numeric_bad_values_in_the_first_block_only_keep_its_exact_message(tmp_path: Path) -> None:
    res = _perturb_numbers(tmp_path, ["1", "12", "3", "-4"], "0..9")
    text = " ".join(res.output.split())
    assert res.exit_code == 1 and "outside the domain 0..9: -4, 12" in text and "in the whole file" not in text


def test_grid_points_that_are_no_coordinates_are_counted_over_the_whole_file(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import localpriv.data.reports as reports
    monkeypatch.setattr(reports, "CSV_BLOCK_BYTES", 256)
    rows = ["40.75,-73.98"] * 300
    rows[10], rows[200], rows[250] = "x,1", "nan,2", "x,1"
    (tmp_path / "g.csv").write_text("lat,lon\n" + "\n".join(rows) + "\n")
    res = run("perturb", tmp_path / "g.csv", "-o", tmp_path / "r.csv", "-m", "krr(eps=2.0)", "-d", "manhattan",
              "-c", "lat,lon", "--seed", "1")
    assert res.exit_code == 1
    text = " ".join(res.output.split())
    assert "are not coordinates" in text and "in the whole file 3 lines (2 distinct values) not in the domain" in text
    assert "first at lines 12, 202, 252" in text


def test_sidecars_named_or_globbed_are_read_with_their_files(reports: Path, tmp_path: Path) -> None:
    res = run("aggregate", reports, reports.with_name("r.csv.meta.json"), "-o", tmp_path / "c1.parquet")
    assert res.exit_code == 0, res.output
    res = run("estimate", f"{tmp_path}/r*", "-d", "0..99", "--estimator", "inv-n")
    assert res.exit_code == 0, res.output


def test_value_counts_streams_and_refuses_with_whole_file_counts(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """What advise --values reads: counts per domain value in chunks, bad values counted in all."""
    import numpy as np

    import localpriv.data.reports as reports
    from localpriv.advice.advisor import values_prior
    from localpriv.domains import parse_domain
    from localpriv.utils.validation import LocalPrivError
    monkeypatch.setattr(reports, "CSV_BLOCK_BYTES", 256)
    lines = [str(i % 10) for i in range(600)]
    (tmp_path / "ok.dat").write_text("x\n" + "\n".join(lines) + "\n")
    counts = reports.value_counts(tmp_path / "ok.dat", parse_domain("0..9"), fmt="csv")
    assert counts.tolist() == [60] * 10
    theta, said = values_prior(tmp_path / "ok.dat", parse_domain("0..9"), fmt="csv")
    assert np.allclose(theta, 0.1) and "600 values" in said
    lines[500], lines[550] = "12", "x"
    (tmp_path / "bad.csv").write_text("x\n" + "\n".join(lines) + "\n")
    with pytest.raises(LocalPrivError, match=r"in the whole file 2 lines \(2 distinct values\) not in the domain "
                                             r"0\.\.9, first at lines 502, 552"):
        reports.value_counts(tmp_path / "bad.csv", parse_domain("0..9"))
    (tmp_path / "labels.csv").write_text("x\n" + "\n".join(["a", "b"] * 200 + ["c"]) + "\n")
    with pytest.raises(LocalPrivError, match=r"1 line \(1 distinct value\) outside the domain of 2 values"):
        reports.value_counts(tmp_path / "labels.csv", parse_domain("a,b"))
