"""The reproduction table of docs/reproductions.md is generated from the runs' JSON."""
import math
import shutil
from pathlib import Path

import pytest

from localpriv.utils.validation import LocalPrivError
from reproductions import run_experiment
from reproductions.table import BEGIN, END, ROWS, render, rewrite_readme

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "docs" / "reproductions.md"


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro")
    for name in ("fig3", "fig5", "fig6"):
        run_experiment(name, out, quick=True)
    return out


def test_every_row_names_a_registered_experiment():
    from reproductions import EXPERIMENTS
    names = [n for row in ROWS for n in row.names]
    assert names and set(names) <= set(EXPERIMENTS)
    assert len({row.label for row in ROWS}) == len(ROWS)


def test_the_readme_carries_the_markers_and_every_row():
    text = README.read_text()
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    for row in ROWS:
        assert f"| {row.label} |" in block


def test_missing_json_is_refused_with_the_names(quick_runs):
    with pytest.raises(LocalPrivError, match=r"have no JSON in .*fig1.*run `make reproduce`"):
        render(quick_runs)


def test_rows_come_from_the_json_and_the_rest_are_marked(quick_runs, tmp_path):
    readme = tmp_path / "README.md"
    shutil.copy(README, readme)
    table = rewrite_readme(readme, quick_runs, keep_missing=True)
    lines = {line.split(" | ", 1)[0][2:]: line for line in table.splitlines()[2:]}
    assert len(lines) == len(ROWS)
    fig6 = lines["`fig6`"]
    assert "distinct MLEs, each certified" in fig6 and "(not rerun)" not in fig6
    assert "strictly concave no / yes" in lines["`fig3`, `fig5`"]
    assert lines["`fig1`"].endswith("(not rerun) |")
    text = readme.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1 and table in text
    # a second rewrite does not stack the marks
    again = rewrite_readme(readme, quick_runs, keep_missing=True)
    assert again.count("(not rerun) (not rerun)") == 0


def test_readme_without_markers_is_refused(tmp_path, quick_runs):
    readme = tmp_path / "README.md"
    readme.write_text("# no table here\n")
    with pytest.raises(LocalPrivError, match="no reproduction-table markers"):
        rewrite_readme(readme, quick_runs)


REPRO = ROOT / "docs" / "results" / "repro"


def test_readme_table_is_what_the_committed_json_renders():
    # the README's rows cannot drift from the runs: regenerating from docs/results/repro changes
    # nothing (rows without JSON keep their text, marked "(not rerun)")
    text = README.read_text()
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert len(list(REPRO.glob("*.json"))) >= 10
    assert render(REPRO, keep=text) == block


def test_generated_doc_blocks_match_their_json():
    import json

    from reproductions.table import dbsec_tables, freewill_table1, freewill_table2

    def block(path, name):
        doc = path.read_text()
        return doc.split(f"<!-- {name}:begin (generated from its JSON; do not edit) -->", 1)[1] \
                  .split(f"<!-- {name}:end -->", 1)[0].strip()

    checked = 0
    for name in ("dbsec-one-time", "dbsec-longitudinal"):
        rec = REPRO / f"{name}.json"
        if rec.exists():
            assert block(ROOT / "docs" / "oracles.md", name) == dbsec_tables(json.loads(rec.read_text()))
            checked += 1
    for i, render_table in ((1, freewill_table1), (2, freewill_table2)):
        rec = REPRO / f"freewill-table{i}.json"
        if rec.exists():
            assert block(README, f"freewill-table{i}") == render_table(json.loads(rec.read_text()))
            checked += 1
    # every generated block exists in the docs, whether or not its JSON is committed yet
    for path, name in ((ROOT / "docs" / "oracles.md", "dbsec-one-time"),
                       (ROOT / "docs" / "oracles.md", "dbsec-longitudinal"),
                       (README, "freewill-table1"), (README, "freewill-table2")):
        assert block(path, name)
    assert checked >= 2  # dbsec-one-time and freewill-table2 are committed


@pytest.mark.parametrize("d, text", [
    # the mean to the decimal of the half-width's leading digit; bounds one decimal more
    ({"mean": 0.105, "lo": 0.0955, "hi": 0.115, "runs": 100}, "0.10 (0.096-0.115)"),
    ({"mean": 14.6, "lo": 14.5, "hi": 14.8, "runs": 20}, "14.6 (14.5-14.8)"),
    ({"mean": 114.3, "lo": 112.1, "hi": 116.2, "runs": 500}, "114 (112-116)"),
    ({"ratio": 2.28, "lo": 1.85, "hi": 2.71, "runs": 20}, "2.3 (1.85-2.71)"),
    ({"mean": -0.3, "lo": -9.3, "hi": 2.6, "runs": 5}, "0 (-9.3 to 2.6)"),  # no "-0"
    ({"mean": 0.6331, "lo": 0.63309, "hi": 0.63311, "runs": 9}, "0.633 (0.633-0.633)"),  # digits cap
    ({"mean": 0.5, "lo": 0.5, "hi": 0.5, "runs": 1}, "0.500"),
])
def test_interval_prints_no_digit_the_runs_do_not_support(d, text):
    from reproductions.table import _iv
    assert _iv(d) == text


def test_printed_mean_stays_inside_its_interval():
    from hypothesis import given
    from hypothesis import strategies as st

    from reproductions.table import _iv

    @given(st.floats(-1e4, 1e4), st.floats(1e-6, 1e3))
    def check(c, half):
        out = _iv({"mean": c, "lo": c - half, "hi": c + half, "runs": 10})
        # within the interval, up to the rounding of the three-significant-digit cap
        cap = 0.5 * 10 ** (math.floor(math.log10(abs(c))) - 2) if c else 0.0
        assert c - half - cap - 1e-9 <= float(out.split(" (")[0]) <= c + half + cap + 1e-9, out
    check()
