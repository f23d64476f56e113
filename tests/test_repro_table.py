"""The README's reproduction table is generated from the runs' JSON (issue 21, item 4)."""
import shutil
from pathlib import Path

import pytest

from localpriv._validation import LocalPrivError
from localpriv.experiments import run_experiment
from localpriv.experiments.table import BEGIN, END, ROWS, render, rewrite_readme

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro")
    for name in ("fig3", "fig5", "fig6"):
        run_experiment(name, out, quick=True)
    return out


def test_every_row_names_a_registered_experiment():
    from localpriv.experiments import EXPERIMENTS
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
