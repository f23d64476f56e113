"""The core install without DuckDB (the optional group ``duckdb``): the default aggregation engine
falls back to NumPy with the same counts, the demo and the CSV command paths run, and asking for
DuckDB by name gives one line naming the group. DuckDB's absence is simulated by blocking its
module in ``sys.modules``, which :mod:`localpriv.utils.optional` honours."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from localpriv.cli.main import main
from localpriv.data.aggregate import (
    DEFAULT_ENGINE,
    FALLBACK_ENGINE,
    DuckDBAggregator,
    aggregate,
    count_files,
    default_engine,
    make_aggregator,
)
from localpriv.data.reports import perturb, write_reports
from localpriv.domains import IntegerDomain
from localpriv.inference.demo import DEMO_DEFAULTS, compute_demo
from localpriv.utils.errors import LocalPrivError
from localpriv.utils.optional import available, require

HINT = "pip install 'localpriv[duckdb]'"


@pytest.fixture
def no_duckdb(monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB not importable for the duration of a test."""
    monkeypatch.setitem(sys.modules, "duckdb", None)


def _table(n: int = 500, seed: int = 3):
    dom = IntegerDomain(0, 9)
    x = np.random.default_rng(seed).integers(0, 10, n)
    return perturb(x, "krr(k=10,eps=1.0)", np.random.default_rng(seed + 1), dom), dom


def test_available_and_require_honour_a_blocked_module(no_duckdb: None) -> None:
    assert not available("duckdb")
    assert available("numpy") and not available("localpriv_no_such_module")
    with pytest.raises(LocalPrivError) as err:
        require("duckdb")
    assert "\n" not in str(err.value) and HINT in str(err.value)


def test_require_without_a_known_group_says_the_module() -> None:
    with pytest.raises(LocalPrivError, match=r"\(no module named 'localpriv_no_such_module'\)$"):
        require("localpriv_no_such_module")


def test_default_engine_is_duckdb_where_installed_else_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    if available("duckdb"):
        assert default_engine() == DEFAULT_ENGINE == "duckdb"
    monkeypatch.setitem(sys.modules, "duckdb", None)
    assert default_engine() == FALLBACK_ENGINE == "numpy"


def test_aggregate_without_duckdb_gives_the_numpy_engines_counts(no_duckdb: None) -> None:
    table, dom = _table()
    got = aggregate(table, dom)
    want = aggregate(table, dom, engine="numpy")
    assert got.n == want.n == 500
    np.testing.assert_array_equal(got.blocks[0].count_vector(), want.blocks[0].count_vector())


@pytest.mark.parametrize("call", ["aggregate", "aggregator", "make_aggregator", "count_files"])
def test_duckdb_asked_by_name_without_it_is_one_line(no_duckdb: None, tmp_path: Path, call: str) -> None:
    table, dom = _table(50)
    with pytest.raises(LocalPrivError) as err:
        if call == "aggregate":
            aggregate(table, dom, engine="duckdb")
        elif call == "aggregator":
            DuckDBAggregator()
        elif call == "make_aggregator":
            make_aggregator("duckdb")
        else:
            write_reports(table, tmp_path / "r.csv")
            count_files([tmp_path / "r.csv"], tmp_path / "c.csv", engine="duckdb")
    assert "\n" not in str(err.value) and HINT in str(err.value)
    assert not (tmp_path / "c.csv").exists()


def test_count_files_without_duckdb_writes_with_numpy(no_duckdb: None, tmp_path: Path) -> None:
    table, _ = _table(300)
    write_reports(table, tmp_path / "r.csv")
    res = count_files([tmp_path / "r.csv"], tmp_path / "c.csv")
    assert res.engine == "numpy" and res.reports == 300


def test_cli_csv_path_without_duckdb(no_duckdb: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"age": np.arange(200) % 10}).to_csv("v.csv", index=False)
    for argv in (["perturb", "v.csv", "-o", "r.csv", "-m", "krr(eps=2.0)", "-d", "0..9", "--seed", "1"],
                 ["aggregate", "r.csv", "-o", "c.csv"],
                 ["estimate", "c.csv", "-d", "0..9", "--estimator", "inv-n"]):
        try:
            main(argv)
        except SystemExit as exc:
            assert not exc.code, (argv, exc.code, capsys.readouterr().err)
    assert Path("c.csv").exists()
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["aggregate", "r.csv", "-o", "c2.csv", "--engine", "duckdb"])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and err.count("\n") == 1 and err.startswith("error: ") and HINT in err, err
    assert not Path("c2.csv").exists()


def test_demo_counts_are_the_same_without_duckdb(monkeypatch: pytest.MonkeyPatch) -> None:
    params = {**DEMO_DEFAULTS, "estimators": ["inv-n"]}
    with_default = compute_demo(params, np.random.default_rng(7))
    monkeypatch.setitem(sys.modules, "duckdb", None)
    without = compute_demo(params, np.random.default_rng(7))
    assert without["n"] == with_default["n"]
    np.testing.assert_array_equal(without["noisy"], with_default["noisy"])
