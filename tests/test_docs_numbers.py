"""The docs-numbers experiment (``make docs-numbers``): structure and sanity of its quick run.

The quick configuration is seeded, so its numbers are fixed up to rounding; the assertions below
avoid quantities that rounding can move at a boundary (which tolerance the Newton finish reaches at
the round-off floor, the iteration at which a ``|dL| < delta`` rule stops) and compare only with
margins that are large against the run-to-run spread the run itself records.
"""
import json

import numpy as np
import pytest

from reproductions import EXPERIMENTS, run_experiment
from reproductions import docs_numbers as dn


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs-numbers")
    rec = run_experiment("docs-numbers", out, quick=True)
    return rec, out


#: key endings that name a duration
DURATION_SUFFIXES = ("seconds", "_s", "_ms", "_time", "elapsed")


def _keys(obj):
    """Every key and every text value of a nested JSON document."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key
            yield from _keys(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _keys(value)
    elif isinstance(obj, str):
        yield obj


def test_registered_and_written(record):
    rec, out = record
    assert "docs-numbers" in EXPERIMENTS
    on_disk = json.loads((out / "docs-numbers.json").read_text())
    assert on_disk["quick"] is True
    assert on_disk["params"]["deltas"] == dn.QUICK["deltas"]
    assert set(on_disk["results"]) == {"convergence", "regularized", "boundary"}
    assert set(on_disk["results"]["convergence"]) == {"squarem_by_delta", "newton_finish", "large_grid", "floor",
                                                      "old_vs_new", "demo"}
    assert (out / "docs-numbers.png").stat().st_size > 10_000
    # the docs quote no durations: no key of the results names one (the runner's own
    # elapsed_seconds, outside "results", aside)
    named = [key for key in _keys(on_disk["results"]) if "second" in key or key.endswith(DURATION_SUFFIXES)]
    assert named == []


def test_squarem_against_delta_and_the_newton_finish(record):
    rows = record[0]["results"]["convergence"]["squarem_by_delta"]
    assert rows
    for row in rows:
        ds = sorted(row["squarem"], key=float, reverse=True)
        assert len(ds) == len(dn.QUICK["deltas"])
        evals = [row["squarem"][d]["evaluations"] for d in ds]
        # the tighter run follows the same trajectory further: never fewer evaluations
        assert evals == sorted(evals)
        for d in ds:
            sq, nw = row["squarem"][d], row["newton"][d]
            assert sq["converged"] and sq["scheme"] == "squarem" and sq["gap"] < float(d)
            assert nw["converged"] and nw["scheme"] == "newton" and nw["gap"] < float(d)
            assert nw["newton_products"] > 0
            assert nw["evaluations"] < sq["evaluations"]


def test_newton_finish_certifies_where_squarem_alone_does_not(record):
    rows = record[0]["results"]["convergence"]["newton_finish"]
    assert rows
    for row in rows:
        assert row["newton_offered"]
        d = row["default"]
        assert d["scheme"] == "newton" and d["converged"] and d["gap"] < 1e-9
        sq = row["squarem_only"]
        assert sq["scheme"] == "squarem"
        assert sq["converged"] or sq["evaluations"] == sq["cap"]
        assert d["evaluations"] < sq["evaluations"]
        assert d["gap"] < sq["gap"]


def test_floor_of_the_certificate(record):
    rows = record[0]["results"]["convergence"]["floor"]
    assert rows
    for row in rows:
        bound = row["rounding_bound"]
        assert 0 < bound < 1e-12
        # at the exact (closed-form) maximum the certificate is zero up to rounding
        assert abs(row["gap_at_closed_form_mle"]) <= bound
        for d, r in row["by_delta"].items():
            if float(d) >= 10 * bound:  # far above the floor: certified, whatever the rounding
                assert r["converged"] and r["gap"] < float(d)
            if r["converged"]:
                assert r["gap"] < float(d)
            else:
                assert r["evaluations"] == row["cap"]


def test_old_default_against_new(record):
    rows = record[0]["results"]["convergence"]["old_vs_new"]
    assert rows
    for row in rows:
        old, new = row["old"], row["new"]
        assert new["converged"] and new["gap"] < 1e-9
        # the certificate bounds the per-report distance in L to the maximum (rounding: 1e-12)
        assert new["loglik_deficit_per_report"] <= new["gap"] + 1e-12
        assert old["loglik_deficit_per_report"] <= old["gap"] + 1e-12
        assert old["loglik_deficit_per_report"] > 0
        assert new["max_abs_distance"] < 1e-3 * old["max_abs_distance"]
        assert new["evaluations"] < old["evaluations"]
        # a plain |dL| < delta stop records how far it was from flipping, and the rounding scale
        assert (old["stop_margin"] is None) == (not old["converged"])
        assert old["stop_rounding_bound"] > 0


def test_regularized_against_the_mle(record):
    rows = record[0]["results"]["regularized"]["ordered"]
    assert rows
    row = rows[0]
    assert row["case"].startswith("Adult ages, geometric eps=0.05")
    s = row["summary"]
    for name in ("inv-p", "ibu-capped", "mle", "ems"):
        sp = s[name]
        assert sp["runs"] == row["runs"] == len(row["per_run"][name])
        assert sp["min"] <= sp["q25"] <= sp["median"] <= sp["q75"] <= sp["max"]
    # EMS below the MLE: the interquartile ranges do not overlap (the run's own spread as tolerance)
    assert s["ems"]["q75"] < s["mle"]["q25"]
    assert row["ems_below_mle_runs"] == row["runs"]
    # the certified MLE is spiky: fewer cells than the truth has; EMS keeps the truth's support
    assert max(row["mle_support"]) < row["truth_support"] <= min(row["ems_support"])
    assert all(h > 0 for h in row["ems_bandwidth"])
    # run 0's cross-validation curve: the chosen bandwidth is the best held-out score, and run 0's
    cv = row["ems_cv_run0"]
    assert cv["chosen"] == row["ems_bandwidth"][0]
    assert cv["heldout"][cv["strengths"].index(cv["chosen"])] == max(cv["heldout"])


def test_dirichlet_on_categorical_krr(record):
    rows = record[0]["results"]["regularized"]["categorical"]
    assert rows
    for row in rows:
        s = row["summary"]
        assert s["dirichlet"]["runs"] == row["runs"] >= 2
        assert s["dirichlet"]["q75"] < s["mle"]["q25"]
        assert 0 < row["uniform_l1"] < 2


def test_boundary_bias_and_coverage(record):
    rows = record[0]["results"]["boundary"]
    assert rows
    row = rows[0]
    assert row["case"].startswith("k-RR eps=1")
    R = row["runs"]
    assert dn.QUICK["boundary_runs"] == R
    for key in ("wald_coverage", "inv_coverage", "library_coverage", "library_inversion_share"):
        assert 0.0 <= row[key] <= 1.0
    # the MLE's mean is pulled towards the uniform distribution's (49.5): biased upwards by more than
    # twice the standard error of the average; the unbiased inverse's average is within 3 of its own
    se_mle = row["mle_mean_sd"] / np.sqrt(R)
    se_inv = row["inv_mean_sd"] / np.sqrt(R)
    assert row["mle_mean_average"] - row["true_mean"] > 2 * se_mle
    assert abs(row["inv_mean_average"] - row["true_mean"]) < 3 * se_inv
    # here the inverse's interval is less than 4x the Wald one: the library takes it every time
    assert row["library_inversion_share"] == 1.0
    assert row["inv_sd_average"] < 4 * row["fisher_sd_average"]


def test_cases_are_reproducible_and_independent():
    case = dn.QUICK["squarem_cases"][0]
    a, truth = dn._observations(case, 7, 0)
    b, _ = dn._observations(case, 7, 0)
    c, _ = dn._observations(case, 7, 1)
    assert np.array_equal(a.blocks[0].counts, b.blocks[0].counts)
    assert not np.array_equal(a.blocks[0].counts, c.blocks[0].counts)
    assert a.n == case["n"]
    assert truth.sum() == pytest.approx(1.0)


def test_population_draw_obfuscates_every_record_once():
    from localpriv.mechanisms import parse
    dom, counts = dn._ages()
    mech = parse("geometric(eps=0.05,lo=0,hi=99)", dom)
    block = dn._population_block(mech, counts * 2, np.random.default_rng(0))
    assert block.n == 2 * counts.sum()


def test_spread_summary():
    sp = dn._spread([4.0, 1.0, 3.0, 2.0, None])
    assert sp == {"runs": 4, "median": 2.5, "q25": 1.75, "q75": 3.25, "min": 1.0, "max": 4.0}
    assert dn._spread([]) == {"runs": 0}
