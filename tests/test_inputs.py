"""Real files in: UCI's shape (", " separators, no header, .data), --format, --no-strip, domains
from a labels file, the `domain` command, and exact counts of values outside the domain."""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from localpriv.cli.main import app
from localpriv.data.reports import distinct_values
from localpriv.domains import parse_domain
from localpriv.utils.validation import LocalPrivError

ROOT = Path(__file__).resolve().parents[1]
#: ../shared/data beside the checkout (or beside the worktrees' folder)
ADULT = next((p for p in (ROOT.parent / "shared/data/adult.data", ROOT.parent.parent / "shared/data/adult.data")
              if p.is_file()), ROOT.parent / "shared/data/adult.data")
EDU = ["Bachelors", "HS-grad", "11th", "Masters", "Some-college", "Doctorate"]


def uci_file(tmp_path: Path, rows: int = 40) -> Path:
    """A small file in UCI Adult's shape: ', ' separators, no header, a trailing blank line."""
    lines = [f"{20 + i % 50}, Private, {1000 + i}, {EDU[i % len(EDU)]}, 13, Never-married" for i in range(rows)]
    path = tmp_path / "small.data"
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    return path


def labels_file(tmp_path: Path, labels: list[str]) -> Path:
    path = tmp_path / "edu.txt"
    path.write_text("\n".join(labels) + "\n\n", encoding="utf-8")
    return path


def run(*args: str) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


def perturb_uci(data: Path, labels: Path, out: Path, *extra: str) -> object:
    return run("perturb", data, "--format", "csv", "--no-header", "--column", "4", "--domain", f"@{labels}",
               "-m", "krr(eps=2)", "--seed", "1", "--out", out, *extra)


def test_uci_shape_end_to_end(tmp_path: Path) -> None:
    data, out = uci_file(tmp_path, 40), tmp_path / "r.parquet"
    res = perturb_uci(data, labels_file(tmp_path, EDU), out)
    assert res.exit_code == 0, res.output
    assert pq.ParquetFile(out).metadata.num_rows == 40


def test_format_sniffed_and_said(tmp_path: Path) -> None:
    data, out = uci_file(tmp_path, 12), tmp_path / "r.parquet"
    res = run("perturb", data, "--no-header", "--column", "4", "--domain", f"@{labels_file(tmp_path, EDU)}",
              "-m", "krr(eps=2)", "--seed", "1", "--out", out)
    assert res.exit_code == 0, res.output
    assert "as CSV" in res.output and "14 comma" not in res.output


def test_no_strip_every_row_refused_with_exact_counts(tmp_path: Path) -> None:
    data, out = uci_file(tmp_path, 40), tmp_path / "r.parquet"
    res = perturb_uci(data, labels_file(tmp_path, EDU), out, "--no-strip")
    assert res.exit_code == 1
    assert "40 lines (6 distinct values) outside the domain of 6 values" in res.output
    assert "first at lines 1, 2, 3" in res.output
    assert not out.exists()


def test_exact_counts_across_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import localpriv.data.reports as reports
    monkeypatch.setattr(reports, "CSV_BLOCK_BYTES", 256)  # many blocks
    monkeypatch.setattr(reports, "MAX_BAD_DISTINCT", 4)
    data = uci_file(tmp_path, 500)
    res = perturb_uci(data, labels_file(tmp_path, ["nothing", "none"]), tmp_path / "r.parquet")
    assert res.exit_code == 1
    text = " ".join(res.output.split())
    assert "500 lines (at least 4 distinct values) outside the domain of 2 values, first at lines 1, 2, 3" in text


def test_labels_file_commas_blank_lines_and_caps(tmp_path: Path) -> None:
    path = labels_file(tmp_path, ["Married, spouse present", "", "  Single  ", "Ünïcode"])
    dom = parse_domain(f"@{path}")
    assert dom.size == 3 and list(dom.decode([0, 1, 2])) == ["Married, spouse present", "Single", "Ünïcode"]
    dup = labels_file(tmp_path, ["a", "b", "a"])
    with pytest.raises(LocalPrivError, match="lines 1 and 3"):
        parse_domain(f"@{dup}")
    big = tmp_path / "big.txt"
    big.write_bytes(b"x\n" * (1 << 20))
    with pytest.raises(LocalPrivError, match="more than"):
        parse_domain(f"@{big}")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\u00e9\n".encode("latin-1"))
    with pytest.raises(LocalPrivError, match="not UTF-8"):
        parse_domain(f"@{latin}")


def test_domain_command_lists_counts_and_writes_labels(tmp_path: Path) -> None:
    data, labels = uci_file(tmp_path, 12), tmp_path / "labels.txt"
    res = run("domain", data, "--format", "csv", "--no-header", "--column", "4", "--out", labels)
    assert res.exit_code == 0, res.output
    assert "2\tBachelors" in res.output
    assert sorted(labels.read_text(encoding="utf-8").split("\n")[:-1]) == sorted(EDU)
    assert distinct_values(data, "4", header=False, fmt="csv").rows == 12


def test_format_any_suffix_and_wrong_parquet(tmp_path: Path) -> None:
    data = uci_file(tmp_path, 6)
    res = run("perturb", data, "--format", "parquet", "--no-header", "--column", "4", "--domain", "a,b",
              "-m", "krr(eps=2)", "--out", tmp_path / "r.parquet")
    assert res.exit_code == 1 and "not a Parquet file" in res.output
    res = run("perturb", data, "--format", "xml", "--domain", "a,b", "-m", "krr(eps=2)", "--out", tmp_path / "r.csv")
    assert res.exit_code != 0 and "unknown format" in res.output


# the shared data sit beside every checkout here and in CI; a clone elsewhere has only the small
# UCI-shaped file the tests above write, which covers the same code paths
@pytest.mark.skipif(not ADULT.is_file(), reason="../shared/data/adult.data (UCI Adult) is not on this machine")
def test_real_adult(tmp_path: Path) -> None:
    labels, out = tmp_path / "edu.txt", tmp_path / "r.parquet"
    res = run("domain", ADULT, "--format", "csv", "--no-header", "--column", "4", "--out", labels)
    assert res.exit_code == 0, res.output
    assert len(labels.read_text(encoding="utf-8").split()) == 16
    res = perturb_uci(ADULT, labels, out)
    assert res.exit_code == 0, res.output
    assert pq.ParquetFile(out).metadata.num_rows == 32561
    res = perturb_uci(ADULT, labels, tmp_path / "r2.parquet", "--no-strip")
    assert "32,561 lines (16 distinct values) outside the domain of 16 values, first at lines 1, 2, 3" in res.output
    assert os.path.getsize(ADULT) > 0
