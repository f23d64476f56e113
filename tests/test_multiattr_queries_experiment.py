"""The multiattr-queries reproduction on a tiny configuration, and the docs table written from it."""
from __future__ import annotations

from pathlib import Path

import pytest

from localpriv.utils.errors import LocalPrivError
from reproductions import EXPERIMENTS, run_experiment
from reproductions.multiattr_queries import adult_path, in_chunk, main, plan
from tools.multiattr_queries_table import protocols_table, table


def _have_adult() -> bool:
    try:
        return adult_path().exists()
    except LocalPrivError:
        return False


# the shared data (../shared/data/adult.data) sit beside every checkout here and in CI; a clone
# elsewhere lacks them, and the reproduction reads nothing else
@pytest.mark.skipif(not _have_adult(), reason="adult.data not available")
def test_tiny_run_and_table(tmp_path: Path) -> None:
    assert "multiattr-queries" in EXPERIMENTS
    rec = run_experiment("multiattr-queries", tmp_path, quick=True,
                         overrides={"eps": [2.0], "n": [3000], "queries": 3, "mle_2d": False,
                                    "cells_dir": str(tmp_path / "cells")})
    row = rec["results"]["summary"][0]
    assert row["n"] == 3000 and row["marginal_mse_calm"] >= 0 and "range2d_mse_grid" in row
    text = table(rec)
    assert "| 2 | 3,000 |" in text and "reduced run" in text
    assert "Cells (eps, n, run) done: 1 of 1 (all done); n = 3,000: 1 of 1" in text
    assert row["marginal_mse_calm_krr"] >= 0 and "proto_range2d_mse_hio" in row
    ptext = protocols_table(rec)
    assert "| 2 | 3,000 |" in ptext
    if "mfl_spl_maxdiff" in row:  # multi-freq-ldpy installed: the same estimator on the same reports
        assert row["mfl_spl_maxdiff"] < 1e-9 and row["mfl_smp_maxdiff"] < 1e-9 and row["mfl_rsfd_maxdiff"] < 1e-9


# the same shared data as above: present beside every checkout here and in CI, absent in a clone elsewhere
@pytest.mark.skipif(not _have_adult(), reason="adult.data not available")
def test_chunks_and_resume_equal_one_run(tmp_path: Path) -> None:
    """Two chunks into one cell folder, then a rerun that finds every cell done: the same record
    as one uninterrupted run into another folder."""
    over = {"eps": [1.0, 4.0], "n": [500], "queries": 2, "mle_2d": False, "protocols": False, "mfl": False}
    one = run_experiment("multiattr-queries", tmp_path / "one", quick=True,
                         overrides={**over, "cells_dir": str(tmp_path / "c1")})["results"]
    for chunk in ("0/2", "1/2"):
        run_experiment("multiattr-queries", tmp_path / "two", quick=True,
                       overrides={**over, "cells_dir": str(tmp_path / "c2"), "chunk": chunk})
    again = run_experiment("multiattr-queries", tmp_path / "two", quick=True,
                           overrides={**over, "cells_dir": str(tmp_path / "c2")})["results"]
    assert again["this_run"] == {"cells": 2, "reused": 2, "ran": 0} and again["complete"]
    assert again["summary"] == one["summary"] and again["cells"] == one["cells"]


def test_plan_and_chunk_syntax() -> None:
    keys = [c["key"] for c in plan({"eps": [0.5, 1.0], "n": [10, 20], "runs": 2})]
    assert len(set(keys)) == 8 and keys[0] == "eps=0.5|n=10|run=0"
    assert all(sum(in_chunk(k, f"{i}/3") for i in range(3)) == 1 for k in keys)
    with pytest.raises(LocalPrivError, match="chunk must be 'i/m'"):
        in_chunk(keys[0], "3/3")
    with pytest.raises(LocalPrivError, match="above the bound"):
        plan({"eps": [1.0] * 100, "n": [10] * 10, "runs": 2})
    assert main(["run", "--chunk", "x"]) == 2
