"""The versioned file formats, mergeable counts and the checked data path (docs/format.md)."""
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv import IntegerDomain, LocalPrivError, aggregate, parse
from localpriv.data.aggregate import DuckDBAggregator, NumpyAggregator, write_counts
from localpriv.data.formats import FORMAT_VERSION, TableWriter
from localpriv.data.reports import block_size, perturb, read_values, report_table, write_reports

DOM = IntegerDomain(0, 9)


def _reports(n, spec="krr(k=10,eps=1.0)", seed=0):
    mech = parse(spec)
    x = np.random.default_rng(seed).integers(0, mech.k, n)
    return report_table(mech, mech.sample(x, np.random.default_rng(seed + 1)))


def _frame(df):
    df = df.copy()
    df["report"] = [r.hex() if isinstance(r, bytes) else float(r) for r in df["report"]]
    return df.sort_values(["mechanism", "report"]).reset_index(drop=True)


@settings(max_examples=25)
@given(sizes=st.lists(st.integers(1, 400), min_size=2, max_size=4), split=st.integers(1, 3),
       suffix=st.sampled_from([".csv", ".parquet"]), seed=st.integers(0, 2 ** 16))
def test_counts_merge_property(tmp_path_factory, sizes, split, suffix, seed):
    """aggregate([aggregate(A), aggregate(B)]) == aggregate(A + B), for any split and file type."""
    d = tmp_path_factory.mktemp("merge")
    specs = ["krr(k=10,eps=1.0)", "oue(k=10,eps=1.0)", "krr(k=10,eps=3.0)"]
    files = []
    for i, n in enumerate(sizes):
        f = d / f"r{i}{suffix}"
        write_reports(_reports(n, specs[i % 3], seed + i), f)
        files.append(f)
    cut = min(split, len(files) - 1)
    a, b = d / f"a{suffix}", d / f"b{suffix}"
    write_counts(DuckDBAggregator().counts(files[:cut]), a)
    write_counts(DuckDBAggregator().counts(files[cut:]), b)
    merged = DuckDBAggregator().counts([a, b])
    whole = DuckDBAggregator().counts(files)
    pd.testing.assert_frame_equal(_frame(merged), _frame(whole))
    assert int(whole["count"].sum()) == sum(sizes)
    # and the in-memory engine agrees on the same mix of counts and reports
    pd.testing.assert_frame_equal(_frame(NumpyAggregator().counts([a, files[-1]])),
                                  _frame(DuckDBAggregator().counts([a, files[-1]])))


def test_mixed_kinds_aggregate_together_and_round_trip(tmp_path):
    write_reports(_reports(300, "krr(k=10,eps=1.0)"), tmp_path / "k.parquet")
    write_reports(_reports(200, "oue(k=10,eps=1.0)"), tmp_path / "o.parquet")
    df = DuckDBAggregator().counts([tmp_path / "k.parquet", tmp_path / "o.parquet"])
    assert int(df["count"].sum()) == 500
    for suffix in (".parquet", ".csv"):
        write_counts(df, tmp_path / f"c{suffix}")
        back = DuckDBAggregator().counts([tmp_path / f"c{suffix}"])
        pd.testing.assert_frame_equal(_frame(back), _frame(df))
    obs = aggregate([tmp_path / "c.csv"], DOM)
    assert obs.n == 500 and len(obs.blocks) == 2


def test_metadata_and_version(tmp_path):
    write_reports(_reports(10), tmp_path / "r.parquet")
    meta = pq.ParquetFile(tmp_path / "r.parquet").metadata.metadata
    assert meta[b"localpriv.format"] == str(FORMAT_VERSION).encode()
    assert meta[b"localpriv.kind"] == b"reports"
    write_reports(_reports(10), tmp_path / "r.csv")
    lines = (tmp_path / "r.csv").read_text().splitlines()
    assert lines[0].replace('"', "") == "mechanism,report" and len(lines) == 11  # a plain CSV
    side = json.loads((tmp_path / "r.csv.meta.json").read_text())
    assert side["localpriv.format"] == str(FORMAT_VERSION) and side["localpriv.kind"] == "reports"
    assert side["localpriv.rows"] == 10 and side["localpriv.bytes"] == (tmp_path / "r.csv").stat().st_size
    # another version is refused, naming it
    t = pq.read_table(tmp_path / "r.parquet")
    with pq.ParquetWriter(tmp_path / "v7.parquet", t.schema) as w:
        w.write_table(t)
        w.add_key_value_metadata({"localpriv.format": "7", "localpriv.kind": "reports"})
    with pytest.raises(LocalPrivError, match="version 7; this localpriv reads versions 1, 2"):
        aggregate([tmp_path / "v7.parquet"])
    (tmp_path / "v9.csv").write_text("#localpriv format=9 kind=reports\n" + "\n".join(lines) + "\n")
    with pytest.raises(LocalPrivError, match="version 9"):
        aggregate([tmp_path / "v9.csv"])
    (tmp_path / "v8.csv").write_text((tmp_path / "r.csv").read_text())
    (tmp_path / "v8.csv.meta.json").write_text(json.dumps({**side, "localpriv.format": "8"}))
    with pytest.raises(LocalPrivError, match="version 8"):
        aggregate([tmp_path / "v8.csv"])


def earlier_csv(path, version=FORMAT_VERSION, head_fields=""):
    """A CSV of ours rewritten as earlier releases wrote it: a first line naming the version and
    kind, a last line counting the rows, no sidecar."""
    side = json.loads(path.with_name(path.name + ".meta.json").read_text())
    path.with_name(path.name + ".meta.json").unlink()
    body = path.read_text()
    path.write_text(f"#localpriv format={version} kind={side['localpriv.kind']}{head_fields}\n{body}"
                    f"#localpriv end rows={side['localpriv.rows']}\n")
    return path


def test_truncated_csv_is_refused(tmp_path):
    write_reports(_reports(1000), tmp_path / "r.csv")
    text = (tmp_path / "r.csv").read_text()
    cut = text[: text.rfind("\n", 0, len(text) // 2) + 1]  # ends on a newline, as after a kill
    (tmp_path / "r.csv").write_text(cut)  # its sidecar stays
    with pytest.raises(LocalPrivError, match="cut short or changed after it was written"):
        aggregate([tmp_path / "r.csv"])
    # the same size, one row less (a row's bytes moved into another): the row count says it
    lines = text.splitlines(keepends=True)
    (tmp_path / "r.csv").write_text(lines[0] + lines[1].rstrip("\n") + " " * len(lines[2]) + "\n" + "".join(lines[3:]))
    with pytest.raises(LocalPrivError, match="holds 999 rows but r.csv.meta.json says 1000"):
        aggregate([tmp_path / "r.csv"])
    # earlier releases' CSV: cut short without its end line
    write_reports(_reports(1000), tmp_path / "old.csv")
    text = earlier_csv(tmp_path / "old.csv").read_text()
    cut = text[: text.rfind("\n", 0, len(text) // 2) + 1]
    (tmp_path / "cut.csv").write_text(cut)
    with pytest.raises(LocalPrivError, match="incomplete"):
        aggregate([tmp_path / "cut.csv"])
    # a wrong row count in the end line
    (tmp_path / "lie.csv").write_text(cut + "#localpriv end rows=1000\n")
    with pytest.raises(LocalPrivError, match="says it holds 1000 rows"):
        aggregate([tmp_path / "lie.csv"])


def test_foreign_csv_without_marker_is_read(tmp_path):
    (tmp_path / "r.csv").write_text('mechanism,report\n"krr(k=10,eps=1.0)",3\n"krr(k=10,eps=1.0)",4\n')
    assert aggregate([tmp_path / "r.csv"]).n == 2


def test_globs_folders_and_hive_datasets(tmp_path):
    root = tmp_path / "ds"
    total = 0
    for eps, n in (("1.0", 120), ("3.0", 80)):
        part = root / f"mechanism=krr(k=10,eps={eps})"
        part.mkdir(parents=True)
        t = _reports(n, f"krr(k=10,eps={eps})")
        pq.write_table(t.drop(["mechanism"]), part / "part-0.parquet")  # the partition holds the spec
        total += n
    (root / "_SUCCESS").write_text("")
    obs = aggregate([root], DOM)
    assert obs.n == total and len(obs.blocks) == 2
    for i in range(3):
        write_reports(_reports(50, seed=i), tmp_path / f"g{i}.parquet")
    assert aggregate([str(tmp_path / "g*.parquet")]).n == 150
    with pytest.raises(LocalPrivError, match="no file matches"):
        aggregate([str(tmp_path / "nothing*.parquet")])


def test_reports_checked_against_their_mechanism(tmp_path):
    good = "krr(k=10,eps=1.0)"
    (tmp_path / "r.csv").write_text(f'mechanism,report\n"{good}",3\n"{good}",12\n"{good}",4\n')
    with pytest.raises(LocalPrivError, match=r"outside.*line 3"):
        aggregate([tmp_path / "r.csv"])
    (tmp_path / "n.csv").write_text(f'mechanism,report\n"{good}",3\n,4\n')
    with pytest.raises(LocalPrivError, match=r"1 row\(s\) have no mechanism, at line 3"):
        aggregate([tmp_path / "n.csv"])
    (tmp_path / "b.csv").write_text(f'mechanism,report\n"{good}",3\n\n"{good}",4\n')
    with pytest.raises(LocalPrivError, match="line 3"):
        aggregate([tmp_path / "b.csv"])


def test_specs_from_files_cannot_open_files(tmp_path):
    (tmp_path / "m.csv").write_text('mechanism,report\n"matrix(file=/etc/passwd)",0\n')
    with pytest.raises(LocalPrivError, match="names a file") as info:
        aggregate([tmp_path / "m.csv"])
    assert "root:" not in str(info.value)
    # the same spec is allowed from the API (trusted)
    np.save(tmp_path / "M.npy", np.array([[0.9, 0.1], [0.2, 0.8]]))
    assert parse(f"matrix(file={tmp_path / 'M.npy'})").k == 2


def test_counts_validation(tmp_path):
    spec = "krr(k=10,eps=1.0)"
    for bad, msg in (("6.5", "whole numbers"), ("lots", "whole numbers"), ("-1", "whole numbers"),
                     ("1e308", "whole numbers"), ("", "no count")):
        (tmp_path / "c.csv").write_text(f'mechanism,report,count\n"{spec}",1,5\n"{spec}",2,{bad}\n')
        with pytest.raises(LocalPrivError, match=msg):
            aggregate([tmp_path / "c.csv"])


def test_perturb_is_reproducible_whatever_the_chunking(tmp_path):
    """Blocks of block_size(mech) values drawn in turn: reports depend on the seed only."""
    mech = parse("krr(k=10,eps=1.0)")
    b = block_size(mech)
    x = np.random.default_rng(3).integers(0, 10, 2 * b + 17)
    one = perturb(x, mech, np.random.default_rng(5), DOM).column("report").to_numpy()
    # the same values through the streaming file path (read in CSV blocks of another size)
    pd.DataFrame({"v": x}).to_csv(tmp_path / "v.csv", index=False)
    from localpriv.data.reports import perturb_file
    res = perturb_file(tmp_path / "v.csv", tmp_path / "r.parquet", mech, DOM, np.random.default_rng(5))
    assert res.reports == x.size and res.dropped == 0
    two = pq.read_table(tmp_path / "r.parquet").column("report").to_numpy()
    np.testing.assert_array_equal(one, two)
    # at most one block: exactly the mechanism's own sampler
    small = perturb(x[:100], mech, np.random.default_rng(5), DOM).column("report").to_numpy()
    np.testing.assert_array_equal(small, mech.sample(x[:100], np.random.default_rng(5)))


def test_missing_values_refused_or_counted(tmp_path):
    (tmp_path / "v.csv").write_text("age\n3\n\n5\n")
    with pytest.raises(LocalPrivError, match=r"1 missing value\(s\).*line 3"):
        read_values(tmp_path / "v.csv")
    from localpriv.data.reports import perturb_file
    res = perturb_file(tmp_path / "v.csv", tmp_path / "r.csv", "krr(eps=1.0)", DOM,
                       np.random.default_rng(0), drop_missing=True)
    assert (res.rows, res.dropped, res.reports) == (3, 1, 2)


def test_atomic_output_on_failure(tmp_path):
    with pytest.raises(RuntimeError), TableWriter(tmp_path / "r.csv", "reports") as w:
        w.write(_reports(10))
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_sigterm_leaves_no_output(tmp_path):
    """A perturb killed half-way leaves neither the output nor its temporary file."""
    n = 10_000_000  # ~5 s of work for the child: the signal lands mid-way even on a loaded machine
    pq.write_table(pa.table({"v": np.random.default_rng(0).integers(0, 10, n, dtype=np.int8)}),
                   tmp_path / "v.parquet")
    out = tmp_path / "r.csv"
    proc = subprocess.Popen([sys.executable, "-m", "localpriv.cli.main", "perturb", str(tmp_path / "v.parquet"),
                             "-o", str(out), "-m", "krr(eps=1.0)", "-d", "0..9", "--seed", "1"],
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(p.name.startswith(".r.csv") for p in tmp_path.iterdir()):
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err.decode(errors="replace")[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.parquet"]


def test_observations_refuse_nan_reports():
    from localpriv.data.observations import ObservationBlock
    with pytest.raises(LocalPrivError, match="NaN"):
        ObservationBlock(parse("laplace(k=5,eps=1.0)"), np.array([0.5, np.nan]), np.array([1, 1]))
    with pytest.raises(LocalPrivError, match="outside"):
        ObservationBlock(parse("krr(k=3,eps=1.0)"), np.array([0, 5]), np.array([1, 1]))


def test_fast_parquet_path_equals_the_checked_path(tmp_path):
    """DuckDB's own scan of Parquet files (checked on distinct pairs) gives the same counts as the
    row-by-row checked reader, and on a bad file the same one-line error (it falls back to it)."""
    write_reports(_reports(500, "krr(k=10,eps=1.0)"), tmp_path / "k.parquet")
    write_reports(_reports(300, "oue(k=10,eps=1.0)"), tmp_path / "o.parquet")
    write_reports(_reports(200, "laplace(k=10,eps=1.0)"), tmp_path / "l.parquet")
    write_counts(DuckDBAggregator().counts([tmp_path / "k.parquet"]), tmp_path / "c.parquet")
    part = tmp_path / "ds" / "mechanism=krr(k=10,eps=3.0)"
    part.mkdir(parents=True)
    pq.write_table(_reports(100, "krr(k=10,eps=3.0)").drop(["mechanism"]), part / "p.parquet")
    inputs = [tmp_path / "k.parquet", tmp_path / "o.parquet", tmp_path / "l.parquet", tmp_path / "c.parquet",
              tmp_path / "ds"]
    fast = DuckDBAggregator(fast=True).counts(inputs)
    slow = DuckDBAggregator(fast=False).counts(inputs)
    pd.testing.assert_frame_equal(_frame(fast), _frame(slow))
    assert int(fast["count"].sum()) == 500 + 300 + 200 + 500 + 100
    # bad files: NaN float report, index out of range, a negative count
    spec = "laplace(k=10,eps=1.0)"
    pq.write_table(pa.table({"mechanism": [spec] * 3, "report": [0.5, float("nan"), 1.0]}), tmp_path / "nan.parquet")
    pq.write_table(pa.table({"mechanism": ["krr(k=10,eps=1.0)"] * 3, "report": [1, 12, 3]}), tmp_path / "out.parquet")
    pq.write_table(pa.table({"mechanism": ["krr(k=10,eps=1.0)"] * 2, "report": [1, 2], "count": [5, -1]}),
                   tmp_path / "neg.parquet")
    for name, msg in (("nan", "NaN"), ("out", "outside"), ("neg", "whole numbers")):
        errors = []
        for flag in (True, False):
            with pytest.raises(LocalPrivError, match=msg) as info:
                DuckDBAggregator(fast=flag).counts([tmp_path / f"{name}.parquet"])
            errors.append(str(info.value))
        assert errors[0] == errors[1] and "row" in errors[0]


def test_boolean_values_are_not_ages():
    with pytest.raises(LocalPrivError, match="booleans"):
        perturb(np.array([True, False]), "krr(eps=1.0)", np.random.default_rng(0), DOM)


def test_a_swallowed_interrupt_still_stops_the_commit(tmp_path, monkeypatch):
    """A signal whose exception Python swallowed (say, inside a ``__del__``) lets the work run to the
    end; the output is still not committed and the exit code is the signal's."""
    from localpriv.utils import signals as _signals
    monkeypatch.setattr(_signals, "_received", [signal.SIGTERM])
    with pytest.raises(SystemExit) as info, TableWriter(tmp_path / "r.csv", "reports") as w:
        w.write(_reports(10))
    assert info.value.code == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


# ---- format version 2: the values' column recorded as the attribute ---------------------------
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_attribute_round_trip_through_perturb_aggregate_and_counts(tmp_path, suffix):
    """perturb records the value column; aggregate carries it to Observations and counts files."""
    from localpriv.data.formats import attribute_of
    from localpriv.data.reports import perturb_file
    name = "hours per week ($ 50%)"  # spaces, "$" and "%" survive the CSV percent-encoding
    pd.DataFrame({"id": range(300), name: np.arange(300) % 10}).to_csv(tmp_path / "v.csv", index=False)
    perturb_file(tmp_path / "v.csv", tmp_path / f"r{suffix}", "krr(k=10,eps=1.0)", DOM,
                 np.random.default_rng(0), column=name)
    assert attribute_of([tmp_path / f"r{suffix}"]) == name
    obs = aggregate([tmp_path / f"r{suffix}"], DOM)
    assert obs.meta["attribute"] == name and obs.n == 300
    obs.save(tmp_path / f"c{suffix}")
    assert attribute_of(tmp_path / f"c{suffix}") == name
    if suffix == ".csv":
        assert json.loads((tmp_path / "r.csv.meta.json").read_text())["localpriv.attribute"] == name
        from urllib.parse import quote
        earlier_csv(tmp_path / "r.csv", head_fields=f" attribute={quote(name, safe='')}")
        assert attribute_of([tmp_path / "r.csv"]) == name
    # by number, the column's name is recorded; without a header, none
    perturb_file(tmp_path / "v.csv", tmp_path / f"r2{suffix}", "krr(k=10,eps=1.0)", DOM,
                 np.random.default_rng(0), column="2")
    assert attribute_of(tmp_path / f"r2{suffix}") == name


def test_attribute_disagreeing_inputs_and_version_1_files(tmp_path):
    """Inputs that record different attributes give none; version-1 files (no attribute) are read."""
    from localpriv.data.formats import attribute_of
    with TableWriter(tmp_path / "a.csv", "reports", attribute="age") as w:
        w.write(_reports(50))
    with TableWriter(tmp_path / "b.csv", "reports", attribute="income") as w:
        w.write(_reports(50, seed=3))
    with TableWriter(tmp_path / "c.csv", "reports") as w:
        w.write(_reports(50, seed=5))
    assert attribute_of([tmp_path / "a.csv", tmp_path / "c.csv"]) == "age"
    assert attribute_of([tmp_path / "a.csv", tmp_path / "b.csv"]) is None
    assert "attribute" not in aggregate([tmp_path / "a.csv", tmp_path / "b.csv"]).meta
    lines = (tmp_path / "a.csv").read_text().splitlines()
    (tmp_path / "v1.csv").write_text("\n".join(["#localpriv format=1 kind=reports"] + lines
                                               + ["#localpriv end rows=50"]) + "\n")
    assert aggregate([tmp_path / "v1.csv"]).n == 50 and attribute_of(tmp_path / "v1.csv") is None
    t = _reports(40)
    with pq.ParquetWriter(tmp_path / "v1.parquet", t.schema) as w:
        w.write_table(t)
        w.add_key_value_metadata({"localpriv.format": "1", "localpriv.kind": "reports",
                                  "localpriv.attribute": "ignored in version 1"})
    assert aggregate([tmp_path / "v1.parquet"]).n == 40 and attribute_of(tmp_path / "v1.parquet") is None


def test_attribute_is_a_label_only(tmp_path):
    """A hostile attribute is cut to a printable label of bounded length, never interpreted."""
    from localpriv.data.formats import MAX_ATTRIBUTE_CHARS, attribute_of
    t = _reports(20)
    with pq.ParquetWriter(tmp_path / "r.parquet", t.schema) as w:
        w.write_table(t)
        w.add_key_value_metadata({"localpriv.format": "2", "localpriv.kind": "reports",
                                  "localpriv.attribute": "x\n\x1b[31m" + "y" * 10_000})
    got = attribute_of(tmp_path / "r.parquet")
    assert got.startswith("x[31m") and len(got) == MAX_ATTRIBUTE_CHARS and got.isprintable()
