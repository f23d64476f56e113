"""The core install without pyarrow (the optional group ``parquet``) and without matplotlib (``plots``):
CSV, TSV and JSON Lines are read and written by :mod:`localpriv.data.textcsv` with the same bytes,
numbers, refusals and messages as the Arrow path; Parquet and figures asked for give one line
naming the group; the demo prints its numbers and says how to get its figure. The absence is
simulated by blocking the modules in ``sys.modules`` (honoured by :mod:`localpriv.utils.optional`);
``tests/test_install.py`` runs the command paths in a fresh interpreter where they cannot be imported."""
from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import localpriv.data.formats as formats_module
import localpriv.data.reports as reports_module
import localpriv.data.textcsv as textcsv_module
import localpriv.inference.demo as demo_module
import localpriv.service.client as client_module
from localpriv.cli.main import main
from localpriv.data.aggregate import NumpyAggregator, write_counts
from localpriv.data.formats import arrow
from localpriv.data.freewill import perturb_mixed
from localpriv.data.reports import perturb, read_values, write_reports
from localpriv.data.textcsv import float_text, unbalanced_quote_lines
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.inference.demo import DEMO_DEFAULTS, compute_demo, run_demo
from localpriv.inference.plotting import PLOTS_HINT, distributions_figure
from localpriv.mechanisms.stablehash import hash_strings
from localpriv.utils.errors import LocalPrivError

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")

DOM = IntegerDomain(0, 9)
SPECS = ["krr(k=10,eps=1.0)", "oue(k=10,eps=1.0)", "pm(k=10,eps=2.0)", "olh(k=10,eps=1.0)", "rappor(k=10,f=0.5)"]


@contextmanager
def _without(*modules: str) -> Iterator[None]:
    """``modules`` not importable inside the block. pandas chose Arrow storage for its strings when it
    was imported here; without pyarrow it would have chosen Python's, so it is told to."""
    with pytest.MonkeyPatch.context() as m, pd.option_context("mode.string_storage", "python"):
        for mod in modules:
            m.setitem(sys.modules, mod, None)
        yield


@pytest.fixture
def no_arrow() -> Iterator[None]:
    """pyarrow not importable for the duration of a test."""
    with _without("pyarrow"):
        assert not arrow()
        yield


@pytest.fixture
def no_plots() -> Iterator[None]:
    """matplotlib not importable for the duration of a test."""
    with _without("matplotlib"):
        yield


def _both(make, tmp_path: Path) -> tuple[Path, Path]:
    """``make(folder)`` run with pyarrow, then without it: the two folders."""
    a, b = tmp_path / "arrow", tmp_path / "text"
    a.mkdir()
    b.mkdir()
    make(a)
    with _without("pyarrow"):
        make(b)
    return a, b


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@settings(max_examples=150, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_float_text_is_arrows_text_of_a_double(x: float) -> None:
    assert float_text(x) == pc.cast(pa.array([x], pa.float64()), pa.string())[0].as_py()


@pytest.mark.parametrize("spec", SPECS)
def test_report_and_counts_files_are_byte_identical_without_pyarrow(spec: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(5).integers(0, 10, 400)

    def make(folder: Path) -> None:
        write_reports(perturb(x, spec, np.random.default_rng(6), DOM), folder / "r.csv", attribute="age")
        counts = NumpyAggregator(domain=DOM).counts([folder / "r.csv"])
        write_counts(counts, folder / "c.csv")
        write_counts(NumpyAggregator(domain=DOM).counts([folder / "c.csv", folder / "r.csv"]), folder / "cc.csv")

    a, b = _both(make, tmp_path)
    assert _files(a) == _files(b)
    assert json.loads((b / "cc.csv.meta.json").read_text())["localpriv.kind"] == "counts"


def test_mixed_report_tables_and_counts_agree_without_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.random.default_rng(1).integers(0, 10, 300)
    specs = np.where(np.arange(300) % 3 == 0, "krr(k=10,eps=2.0)", "pm(k=10,eps=1.0)")

    def make(folder: Path) -> None:
        write_reports(perturb_mixed(x, specs, np.random.default_rng(2), DOM), folder / "m.csv")
        table = perturb(x, "krr(k=10,eps=1.0)", np.random.default_rng(3), DOM)
        write_counts(NumpyAggregator(domain=DOM).counts(table), folder / "t.csv")

    a, b = _both(make, tmp_path)
    assert _files(a) == _files(b)


K = '"krr(k=4,eps=1.0)"'
BAD_REPORTS = {
    "ragged": f"mechanism,report\n{K},1\n{K},2,3\n",
    "blank": f"mechanism,report\n{K},1\n\n{K},2\n",
    "no-report": f"mechanism,report\n{K},\n{K},1\n",
    "text": f"mechanism,report\n{K},x\n{K},1\n",
    "hex": f"mechanism,report\n{K},0x1\n",
    "huge": f"mechanism,report\n{K},99999999999999999999999\n",
    "outside": f"mechanism,report\n{K},7\n",
    "hex-length": 'mechanism,report\n"oue(k=4,eps=1.0)",0a\n"oue(k=4,eps=1.0)",0\n',
    "count-fraction": f"mechanism,report,count\n{K},1,1.5\n",
    "count-sign": f"mechanism,report,count\n{K},1,+3\n{K},2,-1\n",
    "column": f"mechanism,report,weight\n{K},1,3\n",
    "unclosed": f'mechanism,report\n"krr(k=4,eps=1.0),1\n{K},2\n',
    "legacy-end": f"#localpriv format=2 kind=reports\nmechanism,report\n{K},1\n#localpriv end rows=2\n",
    "mixed": f'mechanism,report\n{K},1\n"oue(k=4,eps=1.0)",0a\n{K},9\n',
}


def _outcome(path: Path) -> str:
    try:
        return repr(NumpyAggregator().counts([path]).to_dict("list"))
    except LocalPrivError as exc:
        return f"error: {exc}"


@pytest.mark.parametrize("name", sorted(BAD_REPORTS))
def test_report_files_are_refused_with_the_same_line_without_pyarrow(name: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / f"{name}.csv"
    path.write_text(BAD_REPORTS[name], newline="")
    with_arrow = _outcome(path)
    with _without("pyarrow"):
        assert _outcome(path) == with_arrow
    assert with_arrow.startswith("error: ") or name == "count-sign" and "counts must be" in with_arrow


VALUES = {
    "v.csv": "age,sex\n1,m\n2,f\n\n3,m\n",
    "v.tsv": "age\tsex\n 1 \tm\n2\tf\n",
    "holes.csv": "age,sex\n1,m\n,f\n3,\n",
    "words.csv": "age,sex\n1,m\nabc,f\n",
    "trailing.csv": "age\n1.5\n2\n\n",
    "v.jsonl": '{"age": 1, "sex": "m"}\n{"age": null, "sex": "f"}\n{"age": 3, "sex": "NA"}\n',
}


def _values(path: Path, **kw) -> str:
    try:
        v = read_values(path, fmt="json" if path.suffix == ".jsonl" else None, **kw)
        return f"{v.dtype}: {v.tolist()}"
    except LocalPrivError as exc:
        return f"error: {exc}"


@pytest.mark.parametrize("name", sorted(VALUES))
@pytest.mark.parametrize("how", ["numbers", "dropped", "labels"])
def test_values_are_read_the_same_without_pyarrow(name: str, how: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / name
    path.write_text(VALUES[name], newline="")
    kw = {"numbers": {"domain": DOM}, "dropped": {"domain": DOM, "drop_missing": True},
          "labels": {"column": "2", "domain": CategoricalDomain(["m", "f", "NA"]), "drop_missing": True}}[how]
    with_arrow = _values(path, **kw)
    with _without("pyarrow"):
        assert _values(path, **kw) == with_arrow


def test_values_without_a_header_keep_their_first_line(tmp_path: Path, no_arrow: None) -> None:
    path = tmp_path / "n.csv"
    path.write_text("4,m\n5,f\n")
    assert read_values(path, "1", domain=DOM, header=False).tolist() == [4, 5]


def test_string_hashes_are_the_same_without_pyarrow() -> None:
    words = ["", "a", "café", "x" * 70, "\u2603"]
    want = hash_strings(words, 7)
    with _without("pyarrow"):
        np.testing.assert_array_equal(hash_strings(words, 7), want)
        with pytest.raises(LocalPrivError, match="1 of 2 values are missing"):
            hash_strings(["a", None], 7)


PARQUET_HINT = "pip install 'localpriv[parquet]'"


def test_parquet_without_pyarrow_is_one_line_naming_the_group(tmp_path: Path) -> None:
    x = np.arange(20) % 10
    write_reports(perturb(x, "krr(eps=1.0)", np.random.default_rng(0), DOM), tmp_path / "r.parquet")
    with _without("pyarrow"):
        table = perturb(x, "krr(eps=1.0)", np.random.default_rng(0), DOM)
        calls = [lambda: write_reports(table, tmp_path / "new.parquet"),
                 lambda: NumpyAggregator().counts([tmp_path / "r.parquet"]),
                 lambda: read_values(tmp_path / "r.parquet", "report")]
        for call in calls:
            with pytest.raises(LocalPrivError) as err:
                call()
            assert "\n" not in str(err.value) and PARQUET_HINT in str(err.value) and "parquet" in str(err.value)
        assert not (tmp_path / "new.parquet").exists()


def test_cli_parquet_request_without_pyarrow_exits_with_one_line(tmp_path: Path, no_arrow: None,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "v.csv").write_text("age\n" + "\n".join(str(i % 10) for i in range(50)) + "\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["perturb", "v.csv", "-o", "r.parquet", "-m", "krr(eps=2.0)", "-d", "0..9", "--seed", "1",
              "--ledger", "me.json"])
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and err.count("\n") == 1 and PARQUET_HINT in err
    assert not (tmp_path / "r.parquet").exists() and not (tmp_path / "me.json").exists()  # nothing recorded


def test_demo_numbers_are_the_same_without_pyarrow_and_matplotlib() -> None:
    params = {**DEMO_DEFAULTS, "estimators": ["inv-n"]}
    want = compute_demo(params, np.random.default_rng(4))
    with _without("pyarrow", "matplotlib"):
        got = compute_demo(params, np.random.default_rng(4))
        np.testing.assert_array_equal(got["noisy"], want["noisy"])
        np.testing.assert_array_equal(got["estimates"]["inv-n"], want["estimates"]["inv-n"])


def test_demo_without_matplotlib_prints_its_numbers_and_how_to_get_the_figure(
        tmp_path: Path, no_plots: None, no_arrow: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(demo_module, "DEMO_DEFAULTS", {**DEMO_DEFAULTS, "estimators": ["inv-n"]})
    main(["demo", "--out", str(tmp_path / "d")])
    printed = capsys.readouterr()
    assert (tmp_path / "d" / "demo.json").exists() and not (tmp_path / "d" / "demo.png").exists()
    wrote = [line for line in printed.err.splitlines() if "wrote" in line]
    assert "inv-n" in printed.out and len(wrote) == 1 and "demo.png" not in wrote[0]
    hint = [line for line in printed.err.splitlines() if "no figure" in line]
    assert len(hint) == 1 and "pip install 'localpriv[plots]'" in hint[0] and "make demo-plots" in hint[0]
    assert run_demo.__doc__ is not None and "plots" in run_demo.__doc__


def test_figures_without_matplotlib_are_one_line_naming_the_group(tmp_path: Path, no_plots: None,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(LocalPrivError) as err:
        distributions_figure(["a", "b"], {"x": np.array([0.5, 0.5])}, tmp_path / "f.png")
    assert "\n" not in str(err.value) and "pip install 'localpriv[plots]'" in str(err.value)
    assert "localpriv[plots]" in PLOTS_HINT
    (tmp_path / "v.csv").write_text("mechanism,report,count\n\"krr(k=3,eps=1.0)\",0,5\n\"krr(k=3,eps=1.0)\",1,4\n")
    with pytest.raises(SystemExit) as exit_:
        main(["estimate", str(tmp_path / "v.csv"), "-d", "0..2", "-o", str(tmp_path / "e.json"),
              "--plot", str(tmp_path / "e.png")])
    err_text = capsys.readouterr().err
    assert exit_.value.code == 1 and err_text.count("\n") == 1 and "localpriv[plots]" in err_text
    assert not (tmp_path / "e.json").exists() and not (tmp_path / "e.png").exists()


def test_small_blocks_name_the_same_lines_without_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats_module, "CSV_BLOCK_BYTES", 256)
    monkeypatch.setattr(reports_module, "CSV_BLOCK_BYTES", 256)
    rows = [f"{K},{i % 4}" for i in range(500)]
    rows[399] = f"{K},9"
    (tmp_path / "r.csv").write_text("mechanism,report\n" + "\n".join(rows) + "\n")
    values = [str(i % 10) for i in range(700)]
    values[650] = ""
    (tmp_path / "v.csv").write_text("age\n" + "\n".join(values) + "\n\n")
    want = (_outcome(tmp_path / "r.csv"), _values(tmp_path / "v.csv", domain=DOM),
            _values(tmp_path / "v.csv", domain=DOM, drop_missing=True))
    assert "line 401" in want[0] and "line 652" in want[1] and want[2].startswith("int64")
    with _without("pyarrow"):
        assert (_outcome(tmp_path / "r.csv"), _values(tmp_path / "v.csv", domain=DOM),
                _values(tmp_path / "v.csv", domain=DOM, drop_missing=True)) == want


def test_a_line_past_the_limit_is_refused_in_one_line(tmp_path: Path, no_arrow: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textcsv_module, "MAX_LINE_BYTES", 1000)
    (tmp_path / "v.csv").write_text("age\n" + "1" * 5000)
    with pytest.raises(LocalPrivError, match=r"more than 1,000 bytes; limit 1,000 for one line"):
        read_values(tmp_path / "v.csv", domain=DOM)


def _odd_quote_lines(data: bytes) -> tuple[int, int]:
    """:func:`unbalanced_quote_lines` one line at a time, to compare with."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    odd = [i + 1 for i, line in enumerate(lines) if line.count(b'"') % 2]
    return (odd[0] if odd else 0), len(odd)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='"\n\ra,', max_size=80).map(str.encode), st.integers(1, 19))
def test_unbalanced_quote_lines_are_the_lines_with_an_odd_count_of_quotes(data: bytes, block: int) -> None:
    assert unbalanced_quote_lines(io.BytesIO(data), block) == _odd_quote_lines(data)


def _spanning(kind: str, delimiter: str = ",") -> str:
    """A file of 601 rows whose row 301 holds a quoted value with a line break (line 302 and 303)."""
    row = {"values": '"{}"', "reports": K + ",{}", "counts": K + ",{},5"}[kind]
    cells = {"values": ("m", "a\nb", "f"), "reports": ("1", '"2\n"', "3"), "counts": ("1", '"2\n"', "3")}[kind]
    head = {"values": "sex", "reports": "mechanism,report", "counts": "mechanism,report,count"}[kind]
    rows = [row.format(cells[0])] * 300 + [row.format(cells[1])] + [row.format(cells[2])] * 300
    return (head + "\n" + "\n".join(rows) + "\n").replace(",", delimiter)


SPANNING_LINE = "quoted value spans a line end at line 302 (2 lines); values may not contain line breaks"


@pytest.mark.parametrize("block", [7, 1204, 1205, 1206, 1207, 1208, 1 << 20])
def test_a_quoted_value_over_a_line_end_refuses_the_file_on_both_paths(block: int, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Wherever the block boundary falls (1205-1207 cut the value of the values file in two), the
    file is refused with the same line, with pyarrow and without it."""
    monkeypatch.setattr(formats_module, "CSV_BLOCK_BYTES", block)
    monkeypatch.setattr(reports_module, "CSV_BLOCK_BYTES", block)
    sex = CategoricalDomain(["m", "f", "a\nb", "a", 'b"'])
    (tmp_path / "v.csv").write_text(_spanning("values"), newline="")
    (tmp_path / "v.tsv").write_text(_spanning("values", "\t"), newline="")
    (tmp_path / "r.csv").write_text(_spanning("reports"), newline="")
    (tmp_path / "c.csv").write_text(_spanning("counts"), newline="")
    for name in ("v.csv", "v.tsv"):
        with_arrow = _values(tmp_path / name, domain=sex)
        assert with_arrow == f"error: {tmp_path / name}: {SPANNING_LINE}"
        with _without("pyarrow"):
            assert _values(tmp_path / name, domain=sex) == with_arrow
    for name in ("r.csv", "c.csv"):
        with_arrow = _outcome(tmp_path / name)
        assert with_arrow == f"error: {tmp_path / name}: {SPANNING_LINE}"
        with _without("pyarrow"):
            assert _outcome(tmp_path / name) == with_arrow


@pytest.mark.parametrize("block", [5, 64, 1 << 20])
def test_balanced_quotes_are_read_on_both_paths(block: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Escaped quotes (``""``), quoted delimiters and CRLF line ends pass the check, and the first
    unbalanced line of an earlier release's file and of a file without a header is counted from the
    file's first line."""
    monkeypatch.setattr(formats_module, "CSV_BLOCK_BYTES", block)
    monkeypatch.setattr(reports_module, "CSV_BLOCK_BYTES", block)
    labels = CategoricalDomain(['a"b', "c,d", "e"])
    (tmp_path / "v.csv").write_bytes(b'x,y\r\n"a""b",1\r\n"c,d",2\r\ne,3\r\n')
    (tmp_path / "n.tsv").write_text('e\t1\ne\t2\n"e\t3\n')
    (tmp_path / "old.csv").write_text(f"#localpriv format=2 kind=reports\nmechanism,report\n{K},1\n{K[:-1]},2\n"
                                      "#localpriv end rows=2\n")
    got = (_values(tmp_path / "v.csv", domain=labels), _values(tmp_path / "n.tsv", domain=labels, header=False))
    assert got == ("object: ['a\"b', 'c,d', 'e']", f"error: {tmp_path / 'n.tsv'}: quoted value spans a line end at "
                   "line 3 (1 line); values may not contain line breaks")
    assert "spans a line end at line 4 (1 line)" in _outcome(tmp_path / "old.csv")
    with _without("pyarrow"):
        assert (_values(tmp_path / "v.csv", domain=labels),
                _values(tmp_path / "n.tsv", domain=labels, header=False)) == got
        assert "spans a line end at line 4 (1 line)" in _outcome(tmp_path / "old.csv")


@pytest.mark.parametrize("spec", ["krr(eps=1.0)", "oue(eps=1.0)"])
def test_the_client_builds_the_same_reports_without_pyarrow(spec: str) -> None:
    want = client_module._perturbed(np.arange(40) % 5, spec, "0..4", np.random.default_rng(3))
    with _without("pyarrow"):
        got = client_module._perturbed(np.arange(40) % 5, spec, "0..4", np.random.default_rng(3))
    assert got[0] == want[0]
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    assert np.asarray(got[1]).dtype == np.asarray(want[1]).dtype
