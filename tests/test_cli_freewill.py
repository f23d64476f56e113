"""Free will from files and the command line: `perturb --mechanism-column`,
`perturb --policy`, many files for aggregate/estimate, and the top-level exports."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import localpriv
from localpriv import LocalPrivError
from localpriv.data.aggregate import aggregate
from localpriv.data.freewill import Policy, load_policy, mixed_block_rows, perturb_file_mixed
from localpriv.domains import parse_domain

SPECS = ["krr(eps=0.5)", "krr(eps=1.0)", "krr(eps=4.0)"]
CANON = {s: s.replace("krr(", "krr(k=100,") for s in SPECS}


def run_cli(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, COLUMNS="200", OPENBLAS_NUM_THREADS="1", **(env or {}))
    return subprocess.run([sys.executable, "-c", "import sys; from localpriv.cli.main import main; main(sys.argv[1:])",
                           *args], cwd=cwd, capture_output=True, text=True, env=full, timeout=300)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr and "╭" not in proc.stderr
    return lines[0]


@pytest.fixture
def mixed(tmp_path):
    """3,000 ages with a spec and a group per row, as CSV and as Parquet."""
    rng = np.random.default_rng(5)
    n = 3000
    df = pd.DataFrame({"age": rng.integers(17, 91, n), "spec": rng.choice(SPECS, n),
                       "privacy": rng.choice(["low", "mid", "high"], n)})
    df.to_csv(tmp_path / "mix.csv", index=False)
    df.to_parquet(tmp_path / "mix.parquet")
    return df


def _reports(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pandas()
    return pd.read_csv(path, comment="#")


# --------------------------------------------------------------------------------------------
# The library
# --------------------------------------------------------------------------------------------
def test_mechanism_column_gives_each_row_its_mechanism(tmp_path, mixed):
    dom = parse_domain("0..99")
    res = perturb_file_mixed(tmp_path / "mix.csv", tmp_path / "r.parquet", dom, np.random.default_rng(1),
                             mechanism_column="spec", column="age")
    want = mixed["spec"].map(CANON).value_counts().to_dict()
    assert res.by_mechanism == want and res.rows == res.reports == len(mixed)
    got = _reports(tmp_path / "r.parquet")["mechanism"].astype(str).value_counts().to_dict()
    assert got == want
    obs = aggregate(tmp_path / "r.parquet", dom)
    assert sorted(str(b.mechanism) for b in obs.blocks) == sorted(CANON.values())


def test_mixed_reports_depend_on_the_seed_and_the_file_only(tmp_path, mixed, monkeypatch):
    """CSV and Parquet copies, and CSV read in tiny chunks, give the very same reports."""
    import localpriv.data.reports as reports
    monkeypatch.setattr(reports, "BLOCK_BYTES", 8 * 700)  # blocks of 700 rows: several per file
    dom = parse_domain("0..99")
    kw = dict(mechanism_column="spec", column="age")
    perturb_file_mixed(tmp_path / "mix.csv", tmp_path / "a.parquet", dom, np.random.default_rng(9), **kw)
    perturb_file_mixed(tmp_path / "mix.parquet", tmp_path / "b.parquet", dom, np.random.default_rng(9), **kw)
    monkeypatch.setattr(reports, "CSV_BLOCK_BYTES", 1 << 10)  # many small chunks, cut elsewhere than blocks
    perturb_file_mixed(tmp_path / "mix.csv", tmp_path / "c.parquet", dom, np.random.default_rng(9), **kw)
    a, b, c = (_reports(tmp_path / f"{x}.parquet") for x in "abc")
    assert a.equals(b) and a.equals(c)
    perturb_file_mixed(tmp_path / "mix.csv", tmp_path / "d.parquet", dom, np.random.default_rng(10), **kw)
    assert not a["report"].equals(_reports(tmp_path / "d.parquet")["report"])


def test_groups_are_sampled_vectorized_not_row_by_row(tmp_path, mixed, monkeypatch):
    from localpriv.mechanisms.krr import KRR
    calls = []
    original = KRR.sample

    def counting(self, x, rng):
        calls.append(len(x))
        return original(self, x, rng)

    monkeypatch.setattr(KRR, "sample", counting)
    import localpriv.data.reports as reports
    monkeypatch.setattr(reports, "BLOCK_BYTES", 8 * 700)
    dom = parse_domain("0..99")
    perturb_file_mixed(tmp_path / "mix.csv", tmp_path / "r.csv", dom, np.random.default_rng(1),
                       mechanism_column="spec", column="age")
    block = mixed_block_rows(localpriv.parse("krr(eps=1.0)", dom))
    assert block == 700
    assert sum(calls) == len(mixed)
    assert len(calls) <= len(SPECS) * math.ceil(len(mixed) / block) < len(mixed) // 100


def test_mixture_is_estimated_jointly(tmp_path):
    """Users at eps 0.5, 1 and 4 on 16 education levels: the joint estimate is close to the truth."""
    from localpriv.data.datasets import adult_education
    labels, counts = adult_education()
    rng = np.random.default_rng(3)
    values = np.repeat(np.arange(len(labels)), counts)
    rng.shuffle(values)
    pd.DataFrame({"level": values, "eps": rng.choice(["0.5", "1.0", "4.0"], values.size)}).to_csv(
        tmp_path / "edu.csv", index=False)
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps({"column": "eps", "specs": {e: f"krr(eps={e})" for e in ("0.5", "1.0", "4.0")}}))
    dom = parse_domain(f"0..{len(labels) - 1}")
    res = perturb_file_mixed(tmp_path / "edu.csv", tmp_path / "r.parquet", dom, rng, policy=policy, column="level")
    assert len(res.by_mechanism) == 3 and sum(res.by_mechanism.values()) == counts.sum()
    est = localpriv.estimate(aggregate(tmp_path / "r.parquet", dom), "ibu")
    truth = counts / counts.sum()
    assert np.abs(est.distribution - truth).sum() < 0.05  # total variation x 2


def test_policy_default_and_text_comparison(tmp_path):
    pd.DataFrame({"v": [1, 2, 3, 4], "g": ["a", " b ", "zz", "a"]}).to_csv(tmp_path / "v.csv", index=False)
    (tmp_path / "p.toml").write_text('column = "g"\ndefault = "krr(eps=1.0)"\n[specs]\na = "krr(eps=2.0)"\n'
                                     'b = "krr(eps=3.0)"\n')
    res = perturb_file_mixed(tmp_path / "v.csv", tmp_path / "r.csv", parse_domain("1..4"),
                             np.random.default_rng(0), policy=tmp_path / "p.toml")
    assert res.by_mechanism == {"krr(k=4,eps=2.0)": 2, "krr(k=4,eps=3.0)": 1, "krr(k=4,eps=1.0)": 1}


@pytest.mark.parametrize("name, text, message", [
    ("p.toml", 'column = "g"\n[specs]\na = "krr(eps=1.0)"\n[extra]\nx = 1\n', "unknown key 'extra'"),
    ("p.toml", '[specs]\na = "krr(eps=1.0)"\n', "key 'column' must name"),
    ("p.toml", 'column = "g"\nspecs = "krr(eps=1.0)"\n', "key 'specs' must be a table"),
    ("p.toml", 'column = "g"\n[specs]\na = 3\n', "specs.'a' must be a mechanism spec"),
    ("p.toml", 'version = 2\ncolumn = "g"\n[specs]\na = "krr(eps=1.0)"\n', "version 2 is not supported"),
    ("p.toml", 'column = "g"\n[specs\na = "krr(eps=1.0)"\n', "cannot read policy file"),
    ("p.json", '{"column": "g", "column": "h", "specs": {"a": "krr(eps=1.0)"}}', "key 'column' is given twice"),
    ("p.json", '[1, 2]', "a policy is a table of keys"),
    ("p.yaml", 'column: g', "a policy file is .json or .toml"),
    ("p.json", '{"column": "g", "specs": {"a": "' + "x" * 2000 + '"}}', "2,000 characters is refused"),
])
def test_policy_files_are_validated_strictly(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(LocalPrivError, match=message) as info:
        load_policy(tmp_path / name)
    assert str(tmp_path / name) in str(info.value) and "\n" not in str(info.value)


def test_policy_specs_are_data_not_instructions(tmp_path):
    (tmp_path / "secret.txt").write_text("0.5,0.5\n0.5,0.5\n")
    pol = Policy.from_dict({"column": "g", "specs": {"a": f"matrix(file={tmp_path / 'secret.txt'})"}}, "p.toml")
    with pytest.raises(LocalPrivError, match=r"p\.toml: specs\.'a': .*names a file"):
        pol.mechanisms(parse_domain("0..1"))


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------
def test_cli_mechanism_column_then_aggregate_and_estimate_many_files(tmp_path, mixed):
    proc = run_cli(tmp_path, "perturb", "mix.csv", "-c", "age", "-d", "0..99", "--mechanism-column", "spec",
                   "-o", "r1.parquet", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("wrote 3,000 reports of 3 mechanisms (") and last.endswith(
        "to r1.parquet (3,000 rows read)")
    proc = run_cli(tmp_path, "perturb", "mix.parquet", "-c", "age", "-d", "0..99", "--mechanism-column", "spec",
                   "-o", "r2.csv", "--seed", "2")
    assert proc.returncode == 0, proc.stderr
    # aggregate and estimate take several files and globs; the mixture gives one block per mechanism
    proc = run_cli(tmp_path, "aggregate", "r1.parquet", "r2.csv", "-o", "c.csv")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == \
        "6,000 reports, 3 mechanism(s), 300 distinct (mechanism, report) pairs -> c.csv"
    proc = run_cli(tmp_path, "estimate", "r*", "-d", "0..99", "-e", "ibu", "-o", "e.csv")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "wrote the estimate (100 values) -> e.csv"
    assert "n=6000" in proc.stderr
    est = pd.read_csv(tmp_path / "e.csv", comment="#")
    assert len(est) == 100 and est["probability"].sum() == pytest.approx(1.0)


def test_cli_policy(tmp_path, mixed):
    (tmp_path / "p.toml").write_text('version = 1\ncolumn = "privacy"\n[specs]\nlow = "krr(eps=4.0)"\n'
                                     'mid = "krr(eps=1.0)"\nhigh = "krr(eps=0.5)"\n')
    proc = run_cli(tmp_path, "perturb", "mix.csv", "-c", "age", "-d", "0..99", "--policy", "p.toml",
                   "-o", "r.csv", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    got = _reports(tmp_path / "r.csv")["mechanism"].value_counts().to_dict()
    want = {"krr(k=100,eps=4.0)": (mixed["privacy"] == "low").sum(), "krr(k=100,eps=1.0)": (
        mixed["privacy"] == "mid").sum(), "krr(k=100,eps=0.5)": (mixed["privacy"] == "high").sum()}
    assert got == want


def test_cli_unknown_group_is_refused_counted_and_located(tmp_path):
    pd.DataFrame({"v": [1, 2, 3, 4, 5], "g": ["a", "a", "zz", "a", "zz"]}).to_csv(tmp_path / "v.csv", index=False)
    (tmp_path / "p.json").write_text(json.dumps({"column": "g", "specs": {"a": "krr(eps=1.0)"}}))
    proc = run_cli(tmp_path, "perturb", "v.csv", "-d", "1..5", "--policy", "p.json", "-o", "r.csv")
    line = one_error_line(proc)
    assert proc.returncode == 1 and not (tmp_path / "r.csv").exists()
    assert "column 'g' holds 'zz' at line 4 (2 row(s) in all)" in line and "p.json" in line


def test_cli_bad_spec_in_the_column_is_refused_with_its_rows(tmp_path):
    pd.DataFrame({"v": [1, 2, 3], "m": ["krr(eps=1.0)", "krx(eps=1)", "krx(eps=1)"]}).to_csv(
        tmp_path / "v.csv", index=False)
    proc = run_cli(tmp_path, "perturb", "v.csv", "-d", "1..3", "--mechanism-column", "m", "-o", "r.csv")
    line = one_error_line(proc)
    assert "column 'm' holds 'krx(eps=1)' at line 3 (2 row(s) in all)" in line and "unknown mechanism" in line
    assert not (tmp_path / "r.csv").exists()


def test_cli_missing_mechanism_is_refused_or_dropped_and_counted(tmp_path):
    (tmp_path / "v.csv").write_text("v,m\n1,krr(eps=1.0)\n2,\n3,krr(eps=1.0)\n")
    proc = run_cli(tmp_path, "perturb", "v.csv", "-d", "1..3", "--mechanism-column", "m", "-o", "r.csv")
    assert "v.csv: 1 missing value(s) in column m at line 3" in one_error_line(proc)
    proc = run_cli(tmp_path, "perturb", "v.csv", "-d", "1..3", "--mechanism-column", "m", "-o", "r.csv",
                   "--drop-missing")
    assert proc.returncode == 0, proc.stderr
    assert "wrote 2 reports of krr(k=3,eps=1.0) to r.csv (3 rows read, 1 missing value(s) dropped)" in proc.stderr


def test_cli_reports_of_different_kinds_are_refused(tmp_path):
    pd.DataFrame({"v": [1, 2], "m": ["krr(eps=1.0)", "laplace(eps=1.0)"]}).to_csv(tmp_path / "v.csv", index=False)
    proc = run_cli(tmp_path, "perturb", "v.csv", "-d", "1..2", "--mechanism-column", "m", "-o", "r.parquet")
    line = one_error_line(proc)
    assert "another kind" in line and "line 3" in line and not (tmp_path / "r.parquet").exists()


def test_cli_mechanism_options_are_exclusive(tmp_path, mixed):
    proc = run_cli(tmp_path, "perturb", "mix.csv", "-d", "0..99", "-c", "age", "-m", "krr(eps=1.0)",
                   "--mechanism-column", "spec", "-o", "r.csv")
    assert proc.returncode == 2
    assert "not --mechanism and --mechanism-column" in one_error_line(proc)


def test_cli_several_files_where_one_is_expected_is_one_line(tmp_path, mixed):
    proc = run_cli(tmp_path, "perturb", "mix.csv", "mix.parquet", "-d", "0..99", "-c", "age", "-m", "krr(eps=1.0)",
                   "-o", "r.csv")
    line = one_error_line(proc)
    assert proc.returncode == 2 and "perturb reads one values file, but 2 were given (also: mix.parquet)" in line


def test_freewill_names_are_exported_at_the_top_level():
    from localpriv.data import freewill
    assert localpriv.perturb_mixed is freewill.perturb_mixed
    assert localpriv.perturb_file_mixed is freewill.perturb_file_mixed
    assert localpriv.load_policy is freewill.load_policy and localpriv.Policy is freewill.Policy
    assert {"load_policy", "read_reports", "Policy"} <= set(localpriv.__all__)
