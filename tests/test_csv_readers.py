"""The report and counts CSV files we write are plain CSV: standard readers (pandas, Python's csv,
DuckDB) read them as they are, with the right columns and rows; the sidecar holds the rest."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from localpriv import aggregate, parse
from localpriv.data.reports import report_table, write_reports

SPECS = ["krr(k=10,eps=1.0)", "oue(k=10,eps=1.0)"]  # index reports and bit vectors (hex)


def _files(tmp_path: Path, spec: str, n: int = 300) -> tuple[Path, Path, np.ndarray]:
    mech = parse(spec)
    rng = np.random.default_rng(5)
    reports = mech.sample(rng.integers(0, 10, n), rng)
    write_reports(report_table(mech, reports), tmp_path / "r.csv")
    aggregate(tmp_path / "r.csv").save(tmp_path / "c.csv")
    return tmp_path / "r.csv", tmp_path / "c.csv", reports


@pytest.mark.parametrize("spec", SPECS)
def test_pandas_reads_reports_and_counts(tmp_path: Path, spec: str) -> None:
    r, c, reports = _files(tmp_path, spec)
    df = pd.read_csv(r, dtype=str, keep_default_na=False)
    assert list(df.columns) == ["mechanism", "report"] and len(df) == len(reports)
    assert set(df["mechanism"]) == {spec}
    counts = pd.read_csv(c, dtype={"mechanism": str, "report": str})
    assert list(counts.columns) == ["mechanism", "report", "count"]
    assert counts["count"].dtype.kind == "i" and int(counts["count"].sum()) == len(reports)
    meta = json.loads((tmp_path / "c.csv.meta.json").read_text())
    assert meta["localpriv.rows"] == len(counts) and meta["localpriv.kind"] == "counts"


@pytest.mark.parametrize("spec", SPECS)
def test_python_csv_reads_reports_and_counts(tmp_path: Path, spec: str) -> None:
    r, c, reports = _files(tmp_path, spec)
    with open(r, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(reports) and set(rows[0]) == {"mechanism", "report"}
    if spec.startswith("krr"):
        assert [int(row["report"]) for row in rows] == reports.tolist()
    with open(c, newline="", encoding="utf-8") as fh:
        counts = list(csv.DictReader(fh))
    assert set(counts[0]) == {"mechanism", "report", "count"}
    assert sum(int(row["count"]) for row in counts) == len(reports)


def test_duckdb_reads_reports_and_counts(tmp_path: Path) -> None:
    import duckdb
    r, c, reports = _files(tmp_path, SPECS[0])
    con = duckdb.connect()
    try:
        rel = con.sql(f"select * from read_csv('{r}')")
        assert rel.columns == ["mechanism", "report"]
        got = con.sql(f"select report from read_csv('{r}')").fetchnumpy()["report"]
        assert got.tolist() == reports.tolist()
        n, total = con.execute(f"select count(*), sum(count) from read_csv('{c}')").fetchall()[0]
        assert total == len(reports) and n == len(np.unique(reports))
        # a glob of CSV files skips the sidecars
        rows = con.execute(f"select count(*) from read_csv('{tmp_path}/*.csv', union_by_name=true)").fetchall()
        assert rows[0][0] == len(reports) + n
    finally:
        con.close()


def test_a_file_changed_after_writing_is_refused_and_reads_plainly_without_its_sidecar(tmp_path: Path) -> None:
    from localpriv import LocalPrivError
    r, _, reports = _files(tmp_path, SPECS[0])
    df = pd.read_csv(r)
    # edited in another tool: rows reversed and saved with Windows line ends, one byte more per line,
    # so the size the sidecar recorded no longer matches whatever the quoting
    df.iloc[::-1].to_csv(r, index=False, lineterminator="\r\n")
    assert r.stat().st_size != json.loads((tmp_path / "r.csv.meta.json").read_text())["localpriv.bytes"]
    with pytest.raises(LocalPrivError, match="delete r.csv.meta.json"):
        aggregate(r)
    (tmp_path / "r.csv.meta.json").unlink()
    assert aggregate(r).n == len(reports)


def test_sidecar_with_unknown_keys_is_refused(tmp_path: Path) -> None:
    from localpriv import LocalPrivError
    r, _, _ = _files(tmp_path, SPECS[0])
    side = tmp_path / "r.csv.meta.json"
    side.write_text(json.dumps({**json.loads(side.read_text()), "localpriv.color": "red"}))
    with pytest.raises(LocalPrivError, match="unknown key"):
        aggregate(r)
