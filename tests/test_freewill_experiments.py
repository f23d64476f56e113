"""Quick runs of the seed 003 reproductions (freewill-table1, freewill-table2)."""
import json

import numpy as np

import reproductions.freewill  # noqa: F401  (registers the experiments)
from reproductions.freewill import verdict
from reproductions.runner import run_experiment


def test_table1_quick(tmp_path):
    rec = run_experiment("freewill-table1", tmp_path, quick=True)
    assert (tmp_path / "freewill-table1.png").stat().st_size > 0
    saved = json.loads((tmp_path / "freewill-table1.json").read_text())
    res = saved["results"]
    for row in res["table"].values():
        # combining results (each estimator on a tenth of the data) loses to GIBU
        assert row["[IBU]R"]["linear"]["ratio"] > 1.0
        for sp in row["GIBU"]:
            assert row["GIBU"][sp]["verdict"] == "Excellent"
    # Shokri's optimal mechanisms are singular on the line: INV does not apply, and says so
    assert res["table"]["shokri"]["[INV]R"]["linear"]["verdict"] == "NA"
    assert "gibu" in res["errors"]["shokri/linear/inv-p-m"]
    # GIBU is the MLE: on average over all settings it is at least as good as [IBU]M
    e = res["emd"]
    ratios = [e[key]["ibu-m"][-1] / e[key]["gibu"][-1] for key in e]
    assert np.mean(ratios) > 1.0
    # privacy levels were computed from the channels
    assert all(p["eps_ldp"] is not None for p in res["privacy"]["krr+krr/linear"])
    assert rec["params"]["runs"] == 1


def test_table2_quick(tmp_path):
    rec = run_experiment("freewill-table2", tmp_path, quick=True)
    res = rec["results"]
    for regime in ("high", "low"):
        e = res["emd"][regime]
        assert e["gibu"][-1] < min(e["rap-n-r"][-1], e["rap-p-r"][-1])
        assert res["table"][regime]["[RAP]R"]["ratio"] > 1.0
    assert (tmp_path / "freewill-table2.png").exists()


def test_verdict_thresholds():
    assert verdict(1.0) == "Excellent"
    assert verdict(1.5) == "Good"
    assert verdict(3.0) == "Bad"
    assert verdict(None) == "NA"
