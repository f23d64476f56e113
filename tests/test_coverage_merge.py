"""`localpriv reproduce coverage` runs split by n, merged (experiments.coverage.merge): the same
cells as one run; a cell rerun with more runs replaces the old one only when asked."""
import json

import pytest

from localpriv import LocalPrivError
from localpriv.inference import uncertainty
from reproductions import coverage as C
from reproductions import run_experiment


def test_runs_split_by_n_merge_into_the_whole_run_and_replace_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(uncertainty, "PROFILE_MAX_CELLS", 0)  # the record's bookkeeping, not calibration
    S = [C.SETTINGS[0]]  # k-RR on ages: count-level draws, cheap
    name = S[0]["name"]
    whole = run_experiment("coverage", tmp_path / "w", overrides={"settings": S, "n": [300, 600], "runs": 3})
    run_experiment("coverage", tmp_path / "a", overrides={"settings": S, "n": [300], "runs": 3})
    run_experiment("coverage", tmp_path / "b", overrides={"settings": S, "n": [600], "runs": 3})
    merged = C.merge([tmp_path / "a" / "coverage.json", tmp_path / "b" / "coverage.json"], tmp_path / "m")
    by_n = merged["results"]["settings"][name]["by_n"]
    assert list(by_n) == ["300", "600"] and merged["params"]["n"] == [300, 600]
    for n in ("300", "600"):
        assert by_n[n]["coverage"] == json.loads(json.dumps(whole["results"]["settings"][name]["by_n"][n]["coverage"]))
    assert "merged_replaced" not in merged
    # the same cell again: refused, unless replace (the later record wins and is listed)
    with pytest.raises(LocalPrivError, match="more than one record"):
        C.merge([tmp_path / "m" / "coverage.json", tmp_path / "b" / "coverage.json"], tmp_path / "x")
    # a rerun of n = 600 with fewer runs than the experiment's: the merged max_runs says so
    more = {**S[0], "max_runs": {"600": 2}}
    run_experiment("coverage", tmp_path / "c", overrides={"settings": [more], "n": [600], "runs": 3})
    rep = C.merge([tmp_path / "m" / "coverage.json", tmp_path / "c" / "coverage.json"], tmp_path / "r", replace=True)
    assert rep["results"]["settings"][name]["by_n"]["600"]["runs"] == 2
    assert rep["results"]["settings"][name]["by_n"]["300"]["runs"] == 3
    assert rep["merged_replaced"] == [{"setting": name, "n": 600, "runs_before": 3, "runs_after": 2}]
    assert rep["params"]["settings"][0]["max_runs"] == {"600": 2}
    assert json.loads((tmp_path / "r" / "coverage.json").read_text())["merged_replaced"][0]["n"] == 600
    # merging into a merged record keeps its sources and replacements
    again = C.merge([tmp_path / "r" / "coverage.json", tmp_path / "c" / "coverage.json"], tmp_path / "h", replace=True)
    assert again["merged_from"] == [str(tmp_path / d / "coverage.json") for d in ("a", "b", "c", "c")]
    assert [x["runs_after"] for x in again["merged_replaced"]] == [2, 2]


def test_docs_coverage_table_is_what_the_committed_json_renders():
    """docs/uncertainty.md's coverage table is generated (`make coverage-docs`), never hand-edited."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "uncertainty.md").read_text()
    begin = "<!-- coverage:begin (generated from its JSON; do not edit) -->\n"
    block = doc.split(begin, 1)[1].split("\n<!-- coverage:end -->", 1)[0]
    rec = json.loads((root / "docs" / "results" / "coverage.json").read_text())
    assert block == C.table_markdown(rec)
    assert block.count("\n| ") == sum(len(s["by_n"]) for s in rec["results"]["settings"].values())


def test_table_marks_misses_of_the_targets():
    rec = {"results": {"settings": {"X": {"data": "ages", "estimator": "ibu", "by_n": {"100": {"runs": 10, "coverage": {
        lv: {"mean": 0.80, "median": float(lv), "cells_average": float(lv), "cells_worst": 0.5, "mean_width": 2.0,
             "binomial_sd": 0.05} for lv in ("0.9", "0.95")}}}}}}}
    rec["results"]["missed_targets"] = C.check_targets(rec["results"])
    row = C.table_markdown(rec).splitlines()[-1]
    assert row.endswith("| mean 90 under, mean 95 under **(significant)** |")
    # every coverage with its Monte-Carlo se over the row's 10 runs: sqrt(0.8 * 0.2 / 10) = 0.126
    assert "0.800 ±0.126 / 0.800 ±0.126" in row and "2 years" in row and "| 10 |" in row


def test_monte_carlo_se_of_a_coverage():
    assert C.mc_se(0.9, 100) == pytest.approx(0.03)
    # 0 or 1 over R runs: the error of one run the other way, never 0
    assert C.mc_se(1.0, 100) == pytest.approx(C.mc_se(0.99, 100)) == C.mc_se(0.0, 100)
    assert C.mc_se(1.0, 100) > 0
    assert C.mc_se(0.5, 1) == 0.5


def test_a_miss_is_significant_only_beyond_the_noise_of_the_coverage():
    def res(cov, runs):
        sd = (0.95 * 0.05 / runs) ** 0.5
        return {"settings": {"X": {"by_n": {"100": {"runs": runs, "coverage": {"0.95": {
            "mean": cov, "median": None, "cells_average": 0.95, "binomial_sd": sd}}}}}}}
    near = C.check_targets(res(0.930, 500))  # 2 points under: 0.5 points past the band, sd 0.97
    far = C.check_targets(res(0.900, 500))   # 5 points under: 3.5 past the band
    assert [m["significant"] for m in near] == [False] and [m["significant"] for m in far] == [True]
    assert C.check_targets(res(0.940, 500)) == []


def test_categorical_settings_report_cells_only_and_render(tmp_path, monkeypatch):
    """The education settings (the MLE and the categorical default, Dirichlet, anchored) have no
    mean or median: their records hold None there, the table shows '-', the figure still draws
    (its legend from the cells' panel), and a merge with an ordered setting keeps both."""
    monkeypatch.setattr(uncertainty, "PROFILE_MAX_CELLS", 0)  # the record's bookkeeping, not calibration
    edu = [s for s in C.SETTINGS if s["data"] == "education"]
    assert {s.get("estimator", "ibu") for s in edu} == {"ibu", "dirichlet"}
    rec = run_experiment("coverage", tmp_path / "e", overrides={"settings": edu, "n": [2000], "runs": 3})
    for s in edu:
        cell = rec["results"]["settings"][s["name"]]["by_n"]["2000"]
        assert cell["runs"] == 3 and rec["results"]["settings"][s["name"]]["k"] == 16
        for cov in cell["coverage"].values():
            assert cov["mean"] is None and cov["median"] is None and cov["mean_width"] is None
            assert 0.0 <= cov["cells_worst"] <= cov["cells_average"] <= 1.0
            assert 0.0 < cov["cells_width"] < 1.0
            assert isinstance(cov["cells_worst_value"], str)  # an education level, by name
    rows = C.table_markdown(rec).splitlines()[2:]
    assert len(rows) == 2 and all("| - | - |" in r and r.split("|")[-3].strip() == "-" for r in rows)
    assert "| dirichlet |" in rows[1]
    assert (tmp_path / "e" / "coverage.png").stat().st_size > 0
    run_experiment("coverage", tmp_path / "a", overrides={"settings": [C.SETTINGS[0]], "n": [2000], "runs": 3})
    merged = C.merge([tmp_path / "a" / "coverage.json", tmp_path / "e" / "coverage.json"], tmp_path / "m")
    assert list(merged["results"]["settings"]) == [C.SETTINGS[0]["name"]] + [s["name"] for s in edu]


def test_merge_names_its_output_after_the_records_experiment(tmp_path):
    """Records of ``coverage-small`` merge into ``coverage-small.json`` (and .png), not coverage.json."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "docs" / "results" / "coverage-small.json"
    rec = C.merge([src, src], tmp_path, replace=True)
    assert (tmp_path / "coverage-small.json").exists() and (tmp_path / "coverage-small.png").exists()
    assert not (tmp_path / "coverage.json").exists()
    assert rec["name"] == "coverage-small"


@pytest.mark.parametrize("spec,family", [("oue(eps=2.0)", "mi"), ("geometric(eps=0.5,lo=0,hi=5)", "inv")])
def test_exact_inverse_covariance_is_the_limit_of_the_plug_in(spec, family):
    """The plug-in check's exact covariance of the unbiased inverse (under the truth) against the
    library's plug-in from many reports: they agree within the plug-in's own noise (entries of a
    covariance of bounded reports read from n of them move by O(1 / sqrt(n)), scaled by n here)."""
    import numpy as np

    from localpriv import IntegerDomain, Observations, parse
    from localpriv.inference.simulation import simulate_block

    dom = IntegerDomain(0, 5)
    theta = np.array([0.4, 0.0, 0.25, 0.2, 0.0, 0.15])
    mech = parse(spec, dom)
    n = 100_000
    obs = Observations([simulate_block(mech, theta, n, np.random.default_rng(2))], dom)
    _, plug, _ = uncertainty._raw_inverse(obs.blocks[0], family)
    exact = C._exact_inverse_cov(mech, theta, n, family)
    scale = np.sqrt(np.outer(np.diag(exact), np.diag(exact)))  # the entries' own scale
    assert np.abs(n * (plug - exact)).max() <= 6.0 / np.sqrt(n) * n * scale.max()
    assert np.all(np.linalg.eigvalsh(0.5 * (exact + exact.T)) > -1e-12)


@pytest.mark.parametrize("block,record,render", [
    ("coverage-small", "coverage-small.json", "table_markdown"),
    ("coverage-small-plugin", "coverage-small-plugin.json", "plugin_table_markdown")])
def test_docs_small_n_tables_are_what_the_committed_json_renders(block, record, render):
    """docs/uncertainty.md's small-n tables are generated (`make coverage-docs`), never hand-edited."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "uncertainty.md").read_text()
    begin = f"<!-- {block}:begin (generated from its JSON; do not edit) -->\n"
    text = doc.split(begin, 1)[1].split(f"\n<!-- {block}:end -->", 1)[0]
    assert text == getattr(C, render)(json.loads((root / "docs" / "results" / record).read_text()))
