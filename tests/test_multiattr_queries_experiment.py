"""The multiattr-queries reproduction on a tiny configuration, and the docs table written from it."""
from __future__ import annotations

from pathlib import Path

import pytest

from localpriv.utils.errors import LocalPrivError
from reproductions import EXPERIMENTS, run_experiment
from reproductions.multiattr_queries import adult_path
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
                         overrides={"eps": [2.0], "n": [3000], "queries": 3, "mle_2d": False})
    row = rec["results"]["summary"][0]
    assert row["n"] == 3000 and row["marginal_mse_calm"] >= 0 and "range2d_mse_grid" in row
    text = table(rec)
    assert "| 2 | 3,000 |" in text and "reduced run" in text
    assert row["marginal_mse_calm_krr"] >= 0 and "proto_range2d_mse_hio" in row
    ptext = protocols_table(rec)
    assert "| 2 | 3,000 |" in ptext
    if "mfl_spl_maxdiff" in row:  # multi-freq-ldpy installed: the same estimator on the same reports
        assert row["mfl_spl_maxdiff"] < 1e-9 and row["mfl_smp_maxdiff"] < 1e-9 and row["mfl_rsfd_maxdiff"] < 1e-9
