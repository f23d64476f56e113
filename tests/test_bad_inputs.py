"""Bad inputs, adversarially: every value and report is counted or refused with one line.

The command line runs as a real subprocess (``python -m localpriv.cli.main``, stdin closed, a 40-column
terminal so that a wrapped message would show), so exit codes and stderr are the real ones. Each
refusal must give exit code 1 (bad input) or 2 (bad usage), exactly one unwrapped stderr line
``error: ...`` naming the problem, no traceback, and leave the folder as it was: no output, no
temporary ``.NAME.*.tmp*`` file, no folder made for the output. The API must raise
:class:`LocalPrivError` with the same kind of message, never a raw TypeError/KeyError/... .
Positive controls check that the same paths still count what they should.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from localpriv import IntegerDomain, LocalPrivError, aggregate, estimate, parse, parse_domain
from localpriv.data.aggregate import DuckDBAggregator
from localpriv.data.observations import ObservationBlock, Observations
from localpriv.data.reports import perturb, perturb_file, read_values, report_table, validate_reports, write_reports

KRR = "krr(k=10,eps=1.0)"
K100 = "krr(k=100,eps=1.0)"
LAP = "laplace(k=5,eps=1.0)"
OUE = "oue(k=10,eps=1.0)"


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------
def run_cli(cwd: Path, *args: str, columns: int = 40) -> subprocess.CompletedProcess:
    """``localpriv ARGS`` in a fresh interpreter, in ``cwd``, stdin closed."""
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "localpriv.cli.main", *map(str, args)], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def assert_refused(proc: subprocess.CompletedProcess, code: int, pattern: str) -> str:
    """Exit ``code``, one stderr line ``error: ...`` matching ``pattern``, no traceback."""
    what = f"exit {proc.returncode}\nstderr: {proc.stderr!r}\nstdout: {proc.stdout[-500:]!r}"
    assert proc.returncode == code, what
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, what
    assert lines[0].startswith("error: "), what
    assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"
    assert "Traceback" not in proc.stderr + proc.stdout, what
    assert len(lines[0]) <= 1100, f"message of {len(lines[0])} characters"
    return lines[0]


def text(d: Path, name: str, content: str, encoding: str = "utf-8") -> str:
    (d / name).parent.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(content.encode(encoding))
    return name


def reports_csv(d: Path, name: str, reports, spec: str = KRR) -> str:
    rows = "".join(f'"{spec}",{r}\n' for r in reports)
    return text(d, name, "mechanism,report\n" + rows)


def counts_csv(d: Path, name: str, rows) -> str:
    body = "".join(f'"{spec}",{r},{c}\n' for spec, r, c in rows)
    return text(d, name, "mechanism,report,count\n" + body)


def krr_parquet(d: Path, name: str, n: int = 30, spec: str = KRR, seed: int = 0) -> str:
    mech = parse(spec)
    rng = np.random.default_rng(seed)
    write_reports(report_table(mech, mech.sample(rng.integers(0, mech.k, n), rng)), d / name)
    return name


def versioned_csv(d: Path, name: str, n: int = 200) -> str:
    write_reports(report_table(parse(KRR), np.arange(n) % 10), d / name)
    return name


# --------------------------------------------------------------------------------------------
# Command line: refusals. Each setup writes its files into the folder and returns the arguments.
# --------------------------------------------------------------------------------------------
PERTURB = ("-o", "out.csv", "-m", "krr(eps=1.0)", "-d", "0..9")


def _zero_byte(d):
    return ["perturb", text(d, "v.csv", ""), *PERTURB]


def _ragged(d):
    return ["perturb", text(d, "v.csv", "v\n1\n2,3\n4\n"), *PERTURB]


def _latin1(d):
    return ["perturb", text(d, "v.csv", "city\nZürich\nMünchen\n", "latin-1"), "-o", "out.csv",
            "-m", "krr(eps=1.0)", "-d", "Zürich,München"]






def _csv_named_parquet(d):
    return ["perturb", text(d, "v.parquet", "v\n1\n2\n"), *PERTURB]


def _blank_line(d):
    return ["perturb", text(d, "v.csv", "v\n1\n\n3\n"), *PERTURB]


def _outside(d):
    return ["perturb", text(d, "v.csv", "v\n1\n2\n11\n3\n-4\n"), *PERTURB]


def _huge_value(d):
    return ["perturb", text(d, "v.csv", "v\n1\n1e300\n"), *PERTURB]






def _perturb_out_is_input(d):
    return ["perturb", text(d, "v.csv", "v\n1\n2\n"), "-o", "./v.csv", "-m", "krr(eps=1.0)", "-d", "0..9"]


def _seed_negative(d):
    return ["perturb", text(d, "v.csv", "v\n1\n2\n"), *PERTURB, "--seed", "-1"]


def _unknown_mechanism(d):
    return ["perturb", text(d, "v.csv", "v\n1\n"), "-o", "out.csv", "-m", "bogus(eps=1.0)", "-d", "0..9"]


def _repeated_key(d):
    return ["perturb", text(d, "v.csv", "v\n1\n"), "-o", "out.csv", "-m", "krr(k=10,eps=1.0,eps=8.0)",
            "-d", "0..9"]






def _failed_output_leaves_no_folder(d):
    return ["perturb", text(d, "v.csv", "v\n1\n12\n"), "-o", "new/sub/out.csv", "-m", "krr(eps=1.0)",
            "-d", "0..9"]


def _truncated_parquet(d):
    krr_parquet(d, "r.parquet", 100)
    data = (d / "r.parquet").read_bytes()
    (d / "r.parquet").write_bytes(data[: len(data) // 2])
    return ["aggregate", "r.parquet", "-o", "out.csv"]


def _txt_to_estimate(d):
    return ["estimate", text(d, "r.txt", f'mechanism\treport\n{KRR}\t1\n'), "-d", "0..9"]




def _count_fraction(d):
    return ["aggregate", counts_csv(d, "c.csv", [(KRR, 1, 5), (KRR, 2, "6.5")]), "-o", "out.csv"]


def _count_1e308(d):
    return ["aggregate", counts_csv(d, "c.csv", [(KRR, 1, 5), (KRR, 2, "1e308")]), "-o", "out.csv"]


def _count_empty_mechanism(d):
    return ["aggregate", text(d, "c.csv", f'mechanism,report,count\n"{KRR}",1,5\n,2,7\n'), "-o", "out.csv"]


def _aggregate_out_is_input(d):
    return ["aggregate", krr_parquet(d, "r.parquet"), "-o", "r.parquet"]


def _aggregate_out_matches_glob(d):
    krr_parquet(d, "r1.parquet")
    krr_parquet(d, "r2.parquet", seed=1)
    return ["aggregate", "r*.parquet", "-o", "r2.parquet"]


def _aggregate_out_inside_input_folder(d):
    (d / "ds").mkdir()
    krr_parquet(d, "ds/part-0.parquet")
    return ["aggregate", "ds", "-o", "ds/counts.parquet"]


def _estimate_out_xlsx(d):
    return ["estimate", krr_parquet(d, "r.parquet"), "-d", "0..9", "-o", "e.xlsx"]




def _failed_plot_drops_the_estimate(d):  # the plot's folder cannot be made: no estimate file either
    text(d, "afile", "a file, not a folder")
    return ["estimate", krr_parquet(d, "r.parquet"), "-d", "0..9", "-o", "e.json", "--plot", "afile/p.png"]


def _memory_limit(d):
    return ["aggregate", krr_parquet(d, "r.parquet"), "-o", "out.csv", "--memory-limit", "lots"]


def _delta_nan(d):
    return ["estimate", krr_parquet(d, "r.parquet"), "-d", "0..9", "--delta", "nan"]


def _max_iter_zero(d):
    return ["estimate", krr_parquet(d, "r.parquet"), "-d", "0..9", "--max-iter", "0"]


def _runs_zero(d):
    return ["reproduce", "demo", "--quick", "--runs", "0", "-o", "res"]


def _unknown_option(d):
    return ["aggregate", krr_parquet(d, "r.parquet"), "-o", "out.csv", "--frobnicate"]


def _unknown_command(d):
    return ["frobnicate", "x"]


def _unknown_estimator(d):
    return ["estimate", krr_parquet(d, "r.parquet"), "-d", "0..9", "-e", "bogus"]


def _matrix_nan(d):
    return ["mechanism", "matrix(rows=[[0.5,nan],[0.5,0.5]])"]




def _spec_names_passwd(d):
    return ["aggregate", reports_csv(d, "r.csv", [0], "matrix(file=/etc/passwd)"), "-o", "out.csv"]


def _spec_names_dev_zero(d):
    return ["estimate", reports_csv(d, "r.csv", [0], "matrix(file=/dev/zero)"), "-d", "0..1"]


def _spec_of_a_million_characters(d):
    return ["aggregate", reports_csv(d, "r.csv", [0], "krr(k=10,eps=1.0" + " " * 10 ** 6 + ")"), "-o", "out.csv"]




def _laplace_nan_csv(d):
    return ["aggregate", reports_csv(d, "r.csv", [0.5, "nan", 1.5], LAP), "-o", "out.csv"]


def _laplace_inf_parquet(d):
    pq.write_table(pa.table({"mechanism": [LAP] * 3, "report": [0.5, np.inf, -1.0]}), d / "r.parquet")
    return ["aggregate", "r.parquet", "-o", "out.parquet"]


def _she_nan_parquet(d):
    she = "she(k=4,eps=1.0)"
    v = np.zeros((3, 4), dtype="<f4")
    v[1, 2] = np.nan
    col = pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), 3, [None, pa.py_buffer(v.tobytes())])
    pq.write_table(pa.table({"mechanism": [she] * 3, "report": col}), d / "r.parquet")
    return ["aggregate", "r.parquet", "-o", "out.parquet"]


def _krr_report_150(d):
    return ["aggregate", reports_csv(d, "r.csv", [3, 150], K100), "-o", "out.csv"]


def _krr_report_negative(d):
    return ["aggregate", reports_csv(d, "r.csv", [3, -1], K100), "-o", "out.csv"]


def _krr_report_fraction(d):
    return ["aggregate", reports_csv(d, "r.csv", [3, 2.5], K100), "-o", "out.csv"]




def _bit_vector_wrong_width(d):
    col = pa.array([b"\x01\x02\x03"] * 3, pa.binary(3))  # oue(k=10) reports take 2 bytes
    pq.write_table(pa.table({"mechanism": [OUE] * 3, "report": col}), d / "r.parquet")
    return ["aggregate", "r.parquet", "-o", "out.csv"]


def _hex_wrong_length(d):
    return ["aggregate", reports_csv(d, "r.csv", ["0a1f", "0a1"], OUE), "-o", "out.csv"]


def _report_k_against_domain(d):
    return ["estimate", reports_csv(d, "r.csv", [3], "krr(k=20,eps=1.0)"), "-d", "0..9"]


def _glob_matches_nothing(d):
    return ["aggregate", "nothing*.parquet", "-o", "out.csv"]


def _folder_without_data(d):
    text(d, "ds/notes.md", "no data here")
    (d / "ds/empty").mkdir()
    return ["aggregate", "ds", "-o", "out.csv"]


def _csv_cut_short(d):
    versioned_csv(d, "r.csv")  # its sidecar r.csv.meta.json stays
    content = (d / "r.csv").read_text()
    text(d, "r.csv", content[: content.rfind("\n", 0, len(content) // 2) + 1])
    return ["aggregate", "r.csv", "-o", "out.csv"]


def _csv_earlier_cut_short(d):
    versioned_csv(d, "full.csv")
    content = (d / "full.csv").read_text()
    text(d, "r.csv", "#localpriv format=3 kind=reports\n" + content[: content.rfind("\n", 0, len(content) // 2) + 1])
    return ["aggregate", "r.csv", "-o", "out.csv"]


def _csv_unknown_version(d):
    versioned_csv(d, "r.csv", 20)
    side = d / "r.csv.meta.json"
    side.write_text(re.sub(r'"localpriv.format": "\d+"', '"localpriv.format": "9"', side.read_text()))
    return ["aggregate", "r.csv", "-o", "out.csv"]


def _csv_earlier_unknown_version(d):
    versioned_csv(d, "full.csv", 20)
    text(d, "r.csv", "#localpriv format=9 kind=reports\n" + (d / "full.csv").read_text())
    return ["aggregate", "r.csv", "-o", "out.csv"]


def _olh_without_k(d):
    return ["mechanism", "olh(eps=1e4)"]




CLI_REFUSALS = [
    # values files (perturb)
    (_zero_byte, 1, r"v\.csv is empty \(0 bytes\)"),
    (_ragged, 1, r"v\.csv: line 3 has the wrong number of fields"),
    (_latin1, 1, r"v\.csv is not UTF-8 text: line 2 .*Latin-1"),
    (_csv_named_parquet, 1, r"v\.parquet is not a Parquet file"),
    (_blank_line, 1, r"v\.csv: 1 missing value\(s\) in column v at line 3.*--drop-missing"),
    (_outside, 1, r"outside the domain 0\.\.9: -4, 11 .*at lines 4, 6"),
    (_huge_value, 1, r"outside the domain 0\.\.9: 1e\+300 .*at line 3"),
    (_perturb_out_is_input, 1, r"v\.csv is also an input"),
    (_seed_negative, 2, r"Invalid value for '--seed'"),
    (_unknown_mechanism, 1, r"unknown mechanism 'bogus'"),
    (_repeated_key, 1, r"gives eps twice"),
    (_failed_output_leaves_no_folder, 1, r"outside the domain 0\.\.9: 12 .*at line 3"),
    # report and counts files (aggregate, estimate)
    (_truncated_parquet, 1, r"r\.parquet is a truncated Parquet file"),
    (_txt_to_estimate, 1, r"r\.txt looks like TSV \(its first line holds 1 tab\(s\) and no comma\); this command "
                          r"reads csv or parquet"),
    (_count_fraction, 1, r"c\.csv: counts must be whole numbers.*at line 3"),
    (_count_1e308, 1, r"c\.csv: counts must be whole numbers.*at line 3"),
    (_count_empty_mechanism, 1, r"c\.csv: 1 row\(s\) have no mechanism, at line 3"),
    (_laplace_nan_csv, 1, r"r\.csv: laplace.*NaN or infinite.*at line 3"),
    (_laplace_inf_parquet, 1, r"r\.parquet: laplace.*NaN or infinite.*at row 2"),
    (_she_nan_parquet, 1, r"r\.parquet: she.*NaN or infinite.*at row 2"),
    (_krr_report_150, 1, r"outside the output space 0\.\.99: \[150\] at line 3"),
    (_krr_report_negative, 1, r"outside the output space 0\.\.99: \[-1\] at line 3"),
    (_krr_report_fraction, 1, r"whole numbers \(output indices\), at line 3"),
    (_bit_vector_wrong_width, 1, r"oue\(k=10,eps=1\.0\): reports have 2 bytes, got 3 at rows 1, 2, 3"),
    (_hex_wrong_length, 1, r"hex text of one length, at line"),
    (_report_k_against_domain, 1, r"r\.csv \(line 2\).*has 20 inputs but the domain has 10"),
    (_spec_names_passwd, 1, r"names a file \(file=\.\.\.\)"),
    (_spec_names_dev_zero, 1, r"names a file \(file=\.\.\.\)"),
    (_spec_of_a_million_characters, 1, r"mechanism spec of 1000017 characters refused"),
    (_glob_matches_nothing, 1, r"no file matches nothing\*\.parquet"),
    (_folder_without_data, 1, r"folder ds holds no \.parquet or \.csv files"),
    (_csv_cut_short, 1, r"r\.csv holds [\d,]+ bytes but its sidecar r\.csv\.meta\.json says [\d,]+: it was cut short"),
    (_csv_earlier_cut_short, 1, r"r\.csv is incomplete: its last line"),
    (_csv_unknown_version, 1, r"r\.csv has localpriv format version 9; this localpriv reads versions 1, 2"),
    (_csv_earlier_unknown_version, 1, r"r\.csv has localpriv format version 9; this localpriv reads versions 1, 2"),
    # outputs
    (_aggregate_out_is_input, 1, r"r\.parquet is also an input"),
    (_aggregate_out_matches_glob, 1, r"r2\.parquet would be read as an input \(r\*\.parquet\)"),
    (_aggregate_out_inside_input_folder, 1, r"ds/counts\.parquet would be read as an input \(ds\)"),
    (_estimate_out_xlsx, 1, r"e\.xlsx: unknown extension '\.xlsx'"),
    (_failed_plot_drops_the_estimate, 1, r"afile"),
    # usage and options
    (_memory_limit, 2, r"Invalid value for '--memory-limit'.*'lots'"),
    (_delta_nan, 2, r"Invalid value for '--delta'"),
    (_max_iter_zero, 2, r"Invalid value for '--max-iter'"),
    (_runs_zero, 2, r"Invalid value for '--runs'"),
    (_unknown_option, 2, r"No such option: --frobnicate"),
    (_unknown_command, 2, r"No such command 'frobnicate'"),
    (_unknown_estimator, 1, r"unknown estimator 'bogus'; known: .*ibu"),
    # mechanism specs
    (_matrix_nan, 1, r"matrix"),
    (_olh_without_k, 1, r"olh: missing parameter\(s\) k"),
]


@pytest.mark.parametrize("setup, code, pattern", CLI_REFUSALS, ids=[c[0].__name__.strip("_") for c in CLI_REFUSALS])
def test_cli_refuses_in_one_line_and_leaves_nothing(tmp_path, setup, code, pattern):
    args = setup(tmp_path)
    before = tree(tmp_path)
    proc = run_cli(tmp_path, *args)
    line = assert_refused(proc, code, pattern)
    assert tree(tmp_path) == before, "a refused command left files or folders behind"
    if setup in (_spec_names_passwd, _spec_names_dev_zero):
        assert "root:" not in proc.stderr + proc.stdout and "\\x00" not in line


# --------------------------------------------------------------------------------------------
# Command line: positive controls (the same paths still count what they should)
# --------------------------------------------------------------------------------------------
def _data_rows(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    assert lines[0].replace('"', "") == "mechanism,report" and (path.parent / (path.name + ".meta.json")).is_file()
    return lines[1:]


def test_cli_utf16_with_bom_is_read_correctly(tmp_path):
    text(tmp_path, "v.csv", "city\nZürich\nMünchen\nZürich\n", "utf-16")  # with its byte-order mark
    # eps=40: a lie has probability 4e-18, so the reports are the encoded values
    proc = run_cli(tmp_path, "perturb", "v.csv", "-o", "r.csv", "-m", "krr(eps=40.0)", "-d", "Zürich,München",
                   "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()  # eps 40 > 10 draws one warning line when the spec is read
    assert lines[-1] == "wrote 3 reports of krr(k=2,eps=40.0) to r.csv (3 rows read)"
    assert len(lines) == 2
    assert lines[0].startswith("warning: krr(k=2,eps=40.0): LDP eps computed from the mechanism is 40")
    assert [row.rsplit(",", 1)[1] for row in _data_rows(tmp_path / "r.csv")] == ["0", "1", "0"]
    assert list(read_values(tmp_path / "v.csv")) == ["Zürich", "München", "Zürich"]


def test_cli_drop_missing_counts_the_dropped(tmp_path):
    text(tmp_path, "v.csv", "v\n1\n\n3\n")
    proc = run_cli(tmp_path, "perturb", "v.csv", "-o", "r.csv", "-m", "krr(eps=1.0)", "-d", "0..9",
                   "--drop-missing", "--seed", "0")
    assert proc.returncode == 0, proc.stderr
    assert "(3 rows read, 1 missing value(s) dropped)" in proc.stderr
    assert len(_data_rows(tmp_path / "r.csv")) == 2


def test_cli_na_is_a_label_not_a_missing_value(tmp_path):
    """'NA' (Namibia) is data: not dropped as missing, even with --drop-missing."""
    text(tmp_path, "v.csv", "country\nNA\nUS\nNA\nFR\n")
    proc = run_cli(tmp_path, "perturb", "v.csv", "-o", "r.csv", "-m", "krr(eps=40.0)", "-d", "NA,US,FR",
                   "--drop-missing", "--seed", "0")
    assert proc.returncode == 0, proc.stderr
    assert "(4 rows read)" in proc.stderr and "dropped" not in proc.stderr
    assert [row.rsplit(",", 1)[1] for row in _data_rows(tmp_path / "r.csv")] == ["0", "1", "0", "2"]


def test_cli_aggregate_sums_counts_files_and_mixes_mechanisms(tmp_path):
    krr_parquet(tmp_path, "k.parquet", 30)
    krr_parquet(tmp_path, "o.parquet", 20, spec=OUE, seed=1)
    counts_csv(tmp_path, "c.csv", [(KRR, 1, 5), (KRR, 2, 7), (KRR, 3, 0)])
    proc = run_cli(tmp_path, "aggregate", "k.parquet", "o.parquet", "c.csv", "-o", "all.csv")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("62 reports, 2 mechanism(s)")
    obs = aggregate(tmp_path / "all.csv")
    assert obs.n == 62 and len(obs.blocks) == 2


def test_cli_output_in_a_missing_folder_is_created(tmp_path):
    text(tmp_path, "v.csv", "v\n1\n2\n3\n")
    proc = run_cli(tmp_path, "perturb", "v.csv", "-o", "new/sub/r.parquet", "-m", "krr(eps=1.0)", "-d", "0..9",
                   "--seed", "0")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "new/sub/r.parquet"
    assert pq.read_table(out).num_rows == 3
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.parquet"]  # no temporary file left
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask  # the usual mode, not mkstemp's 0600


@pytest.mark.parametrize("spec", ["olh(k=10,eps=1e4)", "ss(k=5,eps=1e4)", "lgrr(k=10,eps_perm=2e4,eps_1=1e4)"])
def test_cli_mechanism_with_huge_eps_computes_or_warns(tmp_path, spec):
    """No traceback: a computed epsilon (or inf), and warnings as single lines."""
    proc = run_cli(tmp_path, "mechanism", spec, columns=200)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert all(line.startswith("warning: ") for line in proc.stderr.splitlines()), proc.stderr
    assert re.search(r"epsilon_ldp.*(\d|inf)", proc.stdout), proc.stdout


def test_cli_debug_shows_the_traceback(tmp_path):
    proc = run_cli(tmp_path, "--debug", "aggregate", "missing.csv", "-o", "out.csv")
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr
    assert proc.stderr.splitlines()[-1] == "error: input file missing.csv not found"


# --------------------------------------------------------------------------------------------
# The Python API: LocalPrivError (a ValueError), never a raw TypeError/KeyError/...
# --------------------------------------------------------------------------------------------
DOM = IntegerDomain(0, 9)
OBS = Observations.from_counts(KRR, np.arange(10) + 1)


def _she_nan():
    v = np.zeros((2, 2), dtype="<f4")
    v[1, 0] = np.nan
    return validate_reports(parse("she(k=2,eps=1.0)"), v.view(np.uint8))


def _file(d: Path, name: str, content: str, encoding: str = "utf-8") -> Path:
    return d / text(d, name, content, encoding)


def _list_column(d):
    pq.write_table(pa.table({"v": pa.array([[1, 2], [3]])}), d / "in.parquet")
    return read_values(d / "in.parquet", domain=DOM)


def _corrupt_gzip(d):
    (d / "in.csv.gz").write_bytes(b"\x1f\x8bnot really gzip")
    return read_values(d / "in.csv.gz")


def _perturb_text(d, values: str):
    return perturb_file(_file(d, "in.csv", "v\n" + values), d / "out.csv", "krr(eps=1.0)", DOM,
                        np.random.default_rng(0))


API_CASES = [
    # perturb
    ("perturb-2d", lambda d: perturb(np.zeros((3, 3), int), "krr(eps=1.0)", np.random.default_rng(0), DOM),
     r"1-D array .*got shape \(3, 3\)"),
    ("perturb-rng-randomstate", lambda d: perturb([1, 2], "krr(eps=1.0)", np.random.RandomState(0), DOM),
     r"rng must be a numpy.random.Generator.*RandomState"),
    ("perturb-rng-none", lambda d: perturb([1, 2], "krr(eps=1.0)", None, DOM), r"rng must be.*NoneType"),
    ("perturb-outside", lambda d: perturb([1, 2, 1e300], "krr(eps=1.0)", np.random.default_rng(0), DOM),
     r"outside the domain 0\.\.9: 1e\+300 .* at row 3"),
    ("perturb-k-against-domain", lambda d: perturb([1], "krr(k=5,eps=1.0)", np.random.default_rng(0), DOM),
     r"has 5 inputs but the domain has 10"),
    ("perturb-empty", lambda d: perturb([], "krr(eps=1.0)", np.random.default_rng(0), DOM), r"empty"),
    # estimate
    ("estimate-unknown-setting", lambda d: estimate(OBS, "ibu", bogus=1), r"ibu: unknown setting 'bogus'"),
    ("estimate-delta-nan", lambda d: estimate(OBS, "ibu", delta=float("nan")), r"delta .* finite number > 0"),
    ("estimate-max-iter-0", lambda d: estimate(OBS, "ibu", max_iter=0), r"max_iter must be a whole number >= 1"),
    ("estimate-method-list", lambda d: estimate(OBS, ["ibu"]), r"unknown estimator \['ibu'\]"),
    ("estimate-not-observations", lambda d: estimate(np.arange(10), "ibu"), r"estimators read Observations"),
    ("estimate-callback-int", lambda d: estimate(OBS, "ibu", callback=5), r"callback must be a function"),
    # observations
    ("from-counts-negative", lambda d: Observations.from_counts("krr(k=3,eps=1.0)", [1, -1, 2]), r"negative"),
    ("from-counts-nan", lambda d: Observations.from_counts("krr(k=3,eps=1.0)", [1, np.nan, 2]), r"NaN or infinite"),
    ("from-counts-inf", lambda d: Observations.from_counts("krr(k=3,eps=1.0)", [1, np.inf, 2]), r"NaN or infinite"),
    ("from-counts-text", lambda d: Observations.from_counts("krr(k=3,eps=1.0)", ["a", "b", "c"]),
     r"counts must be numbers"),
    ("from-counts-length", lambda d: Observations.from_counts("krr(k=3,eps=1.0)", [1, 2]), r"2 entries but 3"),
    ("from-counts-zero", lambda d: Observations.from_counts("krr(k=3,eps=1.0)", [0, 0, 0]), r"sum to zero"),
    ("from-counts-above-2^53", lambda d: Observations.from_counts("krr(k=3,eps=1.0)", [1e300, 1, 1]),
     r"above 2\^53"),
    ("from-counts-continuous", lambda d: Observations.from_counts(LAP, [1, 2]), r"no finite output space"),
    ("from-reports-scalar", lambda d: Observations.from_reports("krr(k=3,eps=1.0)", 3), r"one report per row"),
    ("from-reports-none", lambda d: Observations.from_reports("krr(k=3,eps=1.0)", None), r"one report per row"),
    ("from-reports-nan", lambda d: Observations.from_reports("krr(k=3,eps=1.0)", [0.0, np.nan]),
     r"NaN or infinite values at entry 2"),
    ("block-laplace-nan", lambda d: ObservationBlock(parse(LAP), np.array([0.5, np.nan]), np.array([1, 1])),
     r"NaN"),
    ("reports-uint64-max", lambda d: validate_reports(parse(KRR), np.array([2 ** 64 - 1], dtype=np.uint64)),
     r"beyond 64-bit integers\): \[18446744073709551615\]"),
    ("reports-float-1e300", lambda d: validate_reports(parse(KRR), np.array([1.0, 1e300])),
     r"beyond 64-bit integers\): \[1e\+300\] at row 2"),
    ("reports-she-nan", lambda d: _she_nan(), r"NaN or infinite entries at row 2"),
    # specs
    ("spec-repeated-key", lambda d: parse("krr(k=10,eps=1.0,eps=8.0)"), r"gives eps twice"),
    ("spec-matrix-nan", lambda d: parse("matrix(rows=[[0.5,nan],[0.5,0.5]])"), r"matrix"),
    ("spec-matrix-ragged", lambda d: parse("matrix(rows=[[0.5,0.5],[1.0]])"), r"matrix"),
    ("spec-untrusted-file", lambda d: parse("matrix(file=/etc/passwd)", trusted=False), r"names a file"),
    ("spec-untrusted-long", lambda d: parse("krr(k=10,eps=1.0" + " " * 200_000 + ")", trusted=False),
     r"characters refused"),
    ("spec-k-beyond-int64", lambda d: parse("krr(k=" + "9" * 40 + ",eps=1.0)"), r"k must fit in 64 bits"),
    ("spec-lgrr-without-k", lambda d: parse("lgrr(eps_perm=2e4,eps_1=1e4)"), r"lgrr: missing parameter\(s\) k"),
    ("spec-eps-inf", lambda d: parse("krr(k=10,eps=inf)"), r"eps must be a finite number > 0"),
    ("spec-not-a-string", lambda d: parse(5), r"spec must be a string"),
    ("spec-message-is-short", lambda d: parse("matrix(rows=" + "[" * 5000 + "]" * 5000 + ")"), r"matrix"),
    # domains
    ("domain-beyond-int64", lambda d: parse_domain("0..99999999999999999999999"), r"64-bit"),
    ("domain-reversed", lambda d: parse_domain("9..0"), r"lo <= hi"),
    ("domain-label-of-100k-characters", lambda d: parse_domain("a,b").encode(["a", "x" * 100_000]),
     r"values outside the domain \(2 labels\): 'xxx.*characters cut.*\(1 value\(s\) in all\)"),
    # aggregate
    ("aggregate-int", lambda d: aggregate(5), r"inputs must be a file name.*int"),
    ("aggregate-none", lambda d: aggregate(None), r"inputs must be a file name.*NoneType"),
    ("aggregate-nothing", lambda d: aggregate([]), r"no input files"),
    ("aggregate-table-no-report", lambda d: aggregate(pa.table({"mechanism": [KRR]})), r"no column\(s\) report"),
    ("aggregate-table-count-2.5",
     lambda d: aggregate(pa.table({"mechanism": [KRR], "report": [1], "count": [2.5]})), r"whole numbers"),
    ("duckdb-memory-limit", lambda d: DuckDBAggregator(memory_limit="lots"), r"not a size"),
    ("duckdb-threads-text", lambda d: DuckDBAggregator(threads="x"), r"threads must be an integer"),
    ("duckdb-threads-zero", lambda d: DuckDBAggregator(threads=0), r"threads must be >= 1"),
    # files through the API
    ("file-latin1", lambda d: read_values(_file(d, "in.csv", "v\nZürich\n", "latin-1")), r"not UTF-8 text: line 2"),
    ("file-utf32", lambda d: read_values(_file(d, "in.csv", "v\n1\n", "utf-32")), r"UTF-32"),
    ("file-list-column", _list_column, r"in\.parquet: column v: .*list"),
    ("file-duplicate-columns", lambda d: read_values(_file(d, "in.csv", "v,v\n1,2\n")), r"2 columns named 'v'"),
    ("file-corrupt-gzip", _corrupt_gzip, r"cannot read .*in\.csv\.gz"),
    ("file-hex-value", lambda d: _perturb_text(d, "3\n0x1f\n"), r"'0x1f' .*at line 3"),
    ("file-nan-value", lambda d: _perturb_text(d, "3\nnan\n"), r"NaN or infinite at line 3"),
    ("file-not-numbers", lambda d: _perturb_text(d, "1\ntwo\n3\n"), r"not numbers: 'two' .*at line 3"),
    ("file-utf16-without-bom", lambda d: read_values(_file(d, "in.csv", "v\n1\n", "utf-16-le")),
     r"NUL bytes.*UTF-16"),
    ("file-count-text", lambda d: aggregate(d / counts_csv(d, "in.csv", [(KRR, 1, 5), (KRR, 2, "lots")])),
     r"counts must be whole numbers.*at line 3"),
    ("file-report-beyond-int64", lambda d: aggregate(d / reports_csv(d, "in.csv", [3, "9" * 20])),
     r"beyond 64-bit integers\), at line 3"),
    ("file-missing-value", lambda d: _perturb_text(d, "3\n \n4\n"), r"1 missing value\(s\) in column v at line 3"),
    ("file-hex-report", lambda d: aggregate(d / reports_csv(d, "in.csv", [1, "0x1"])),
     r"whole numbers \(output indices\), at line 3"),
    ("file-wide-spec", lambda d: aggregate(d / reports_csv(d, "in.csv", ["00"], "she(k=1000000000,eps=1.0)")),
     r"reports have at least 125000000 bytes"),
    ("file-output-xlsx", lambda d: write_reports(report_table(parse(KRR), np.array([1, 2])), d / "out.xlsx"),
     r"unknown extension '\.xlsx'"),
]


@pytest.mark.parametrize("call, pattern", [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_api_raises_local_priv_error(tmp_path, call, pattern):
    before = tree(tmp_path)
    with pytest.raises(LocalPrivError, match=pattern) as info:
        call(tmp_path)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "\n" not in message and len(message) <= 1000, message[:200]
    left = [p for p in tree(tmp_path) if p not in before and not p.startswith("in")]
    assert left == [], f"a refused call left {left}"


def test_api_utf16_and_counts_round_trip(tmp_path):
    """Positive controls of the API: UTF-16 values read as text, counts files keep n."""
    text(tmp_path, "v.csv", "v\n3\n\n7\n", "utf-16")
    assert read_values(tmp_path / "v.csv", domain=DOM, drop_missing=True).tolist() == [3, 7]
    obs = Observations.from_counts(KRR, np.arange(10))
    obs.save(tmp_path / "c.csv")
    assert aggregate([tmp_path / "c.csv", tmp_path / "c.csv"]).n == 2 * obs.n
