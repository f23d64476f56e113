"""Run-to-run intervals and undecided verdicts of the reproductions."""
import math

import numpy as np

from reproductions.freewill import VERDICT_BANDS, _verdict_cell
from reproductions.spread import banded_verdict, mean_interval, ratio_interval


def test_mean_interval_is_student_t():
    iv = mean_interval([1.0, 2.0, 3.0, None])
    # t_{0.975, 2} = 4.3027, sd = 1
    assert iv["runs"] == 3 and math.isclose(iv["mean"], 2.0)
    assert math.isclose(iv["hi"] - iv["mean"], 4.302653 / math.sqrt(3), rel_tol=1e-5)
    assert mean_interval([]) == {"mean": None, "lo": None, "hi": None, "sd": None, "runs": 0}


def test_ratio_interval_covers_the_true_ratio():
    # paired runs: b ~ N(1, 0.1), a = 1.9 b + noise; true ratio of means 1.9
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(400):
        b = rng.normal(1.0, 0.1, 10)
        a = 1.9 * b + rng.normal(0, 0.05, 10)
        iv = ratio_interval(a, b)
        hits += iv["lo"] <= 1.9 <= iv["hi"]
    # nominal 95 %; binomial sd over 400 runs ~ 0.011: accept 0.90..0.99
    assert 0.90 <= hits / 400 <= 0.99


def test_verdict_straddling_a_threshold_is_undecided():
    assert banded_verdict({"ratio": 1.9, "lo": 1.7, "hi": 2.2}, VERDICT_BANDS) == "undecided (Good/Bad)"
    assert banded_verdict({"ratio": 1.9, "lo": 1.1, "hi": 2.2}, VERDICT_BANDS) == "undecided (Excellent/Good/Bad)"
    assert banded_verdict({"ratio": 3.0, "lo": 2.5, "hi": 3.5}, VERDICT_BANDS) == "Bad"
    assert banded_verdict({"ratio": None, "lo": None, "hi": None}, VERDICT_BANDS) == "NA"


def test_verdict_cell_picks_the_better_postprocessing_and_keeps_the_point_verdict():
    runs = {"inv-n-m": [3.0, 3.2, 2.9], "inv-p-m": [1.9, 2.1, 2.0], "gibu": [1.0, 1.05, 0.98]}
    cell = _verdict_cell(runs, ["inv-n-m", "inv-p-m"])
    assert cell["estimator"] == "inv-p-m" and cell["runs"] == 3
    assert cell["lo"] < 2.0 < cell["hi"] and cell["verdict"] == "undecided (Good/Bad)"
    assert cell["verdict_point"] == "Good"
    assert _verdict_cell({"inv-n-m": [None], "gibu": [1.0]}, ["inv-n-m"])["verdict"] == "NA"
