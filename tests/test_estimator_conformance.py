"""Every registered estimator against the conformance suite (localpriv.testing.estimators).

Parametrized over every registered estimator x every check that applies to it (by its tags), with
ids like ``ems-check_sums_to_one_and_nonnegative``: an estimator is checked the moment it is
registered.
"""
from __future__ import annotations

import numpy as np
import pytest

from localpriv.estimators import (
    ESTIMATORS,
    REGISTRY,
    Setting,
    available_estimators,
    describe_estimators,
    estimator_settings,
    fit,
    parse_settings,
    register_estimator,
)
from localpriv.estimators.inv import inv
from localpriv.estimators.result import Fit
from localpriv.inference.estimate import Estimate
from localpriv.inference.uncertainty import interval_refusal
from localpriv.testing.estimators import (
    CHECKS,
    EstimatorConformanceError,
    check_estimator,
    check_intervals_in_unit_range,
    check_invariant_to_report_order,
    check_sums_to_one_and_nonnegative,
    estimator_checks,
    example_observations,
)
from localpriv.utils.validation import LocalPrivError

CASES = [(name, check_name, run) for name in available_estimators() for check_name, run in estimator_checks(name)]


@pytest.mark.parametrize("run", [c[2] for c in CASES], ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_conformance(run):
    run()


def test_every_estimator_gets_the_core_checks():
    core = {"check_declares_settings_and_tags", "check_sums_to_one_and_nonnegative",
            "check_refuses_unknown_setting_in_one_line", "check_refuses_bad_setting_values",
            "check_intervals_in_unit_range"}
    for name in ESTIMATORS:
        assert core <= {c for c, _ in estimator_checks(name)}, name
    assert set(REGISTRY) == set(ESTIMATORS) and len(ESTIMATORS) >= 24


def test_mle_check_runs_on_mles_and_regularized_only():
    takers = {n for n, c, _ in CASES if c == "check_agrees_with_the_mle"}
    assert {"ibu", "gibu", "ibu-exact", "ems", "dirichlet"} <= takers
    assert not takers & {"inv-n", "mi-n", "ibu-support", "ibu-m", "ibu-r"}


def _toy(obs, *, shift: float = 0.0) -> Fit:
    """INV-N, with an optional order-dependent distortion (a broken estimator)."""
    est = inv(obs, post="n")
    if shift:
        first = obs.blocks[0].reports[0]
        est.distribution = np.roll(est.distribution, int(first) % obs.k)
    return est


@pytest.fixture
def toy():
    names = []

    def register(name, func, **kw):
        register_estimator(name, func, **kw)
        names.append(name)
    yield register
    for name in names:
        REGISTRY.pop(name, None)
        ESTIMATORS.pop(name, None)


def test_a_new_estimator_is_checked_once_registered(toy):
    toy("toy-inv", lambda obs, **kw: _toy(obs, **kw), summary="INV-N under another name",
        tags={"single-mechanism", "finite-channel"},
        settings=(Setting("shift", "float", 0.0, "distortion (0: none)", low=0.0),))
    assert "toy-inv" in available_estimators()
    check_estimator("toy-inv")
    fit(example_observations("toy-inv"), "toy-inv", shift=1.0)  # accepted: the setting is declared
    toy("toy-inv", lambda obs: _toy(obs, shift=1.0), summary="order-dependent", tags={"single-mechanism"},
        settings=())
    with pytest.raises(EstimatorConformanceError, match=r"check_invariant_to_report_order\(toy-inv\)"):
        check_invariant_to_report_order("toy-inv")


def test_a_negative_estimate_fails(toy):
    def negative(obs):
        est = inv(obs, post="n")
        est.distribution = est.extra["raw_inverse"] - 0.1
        return est
    toy("toy-negative", negative, summary="raw inverse", tags={"single-mechanism"}, settings=())
    with pytest.raises(EstimatorConformanceError, match=r"check_sums_to_one_and_nonnegative\(toy-negative\)"):
        check_sums_to_one_and_nonnegative("toy-negative")


def test_interval_check_accepts_documented_refusals_only(monkeypatch):
    def refuse(message):
        def ci(self, level=0.95):
            raise LocalPrivError(message)
        return ci
    monkeypatch.setattr(Estimate, "ci", refuse("intervals for inv-n need the reports' supports; use ibu"))
    check_intervals_in_unit_range("inv-n")  # a documented refusal passes
    for bad in ("something else went wrong", "no record of how inv-n was computed; run it through "
                "localpriv.estimate\nsecond line"):
        monkeypatch.setattr(Estimate, "ci", refuse(bad))
        with pytest.raises(EstimatorConformanceError, match=r"check_intervals_in_unit_range\(inv-n\): .*undocumented"):
            check_intervals_in_unit_range("inv-n")


def test_interval_check_refuses_bounds_outside_the_unit_range(monkeypatch):
    original = Estimate.ci

    def wide(self, level=0.95):
        lo, hi = original(self, level)
        return lo - 0.5, hi
    monkeypatch.setattr(Estimate, "ci", wide)
    with pytest.raises(EstimatorConformanceError, match=r"check_intervals_in_unit_range\(inv-n\): cell 0: .* leaves"):
        check_intervals_in_unit_range("inv-n")


def test_every_documented_refusal_is_recognized():
    assert interval_refusal("this estimate does not carry its observations; pass obs=") is not None
    assert interval_refusal("the estimate gives probability 0 to an observed report: no information")
    assert interval_refusal("intervals for mi-p need the reports' supports; use ibu\nmore") is None
    assert interval_refusal("unknown failure") is None


def test_registration_refuses_unknown_tags():
    with pytest.raises(LocalPrivError, match=r"toy: unknown tags fast"):
        register_estimator("toy", inv, summary="x", tags={"fast"}, settings=())
    assert "toy" not in ESTIMATORS


def test_settings_are_checked_without_coercion():
    obs = example_observations("ibu")
    for bad, pattern in [({"delta": "1e-9"}, r"ibu: delta must be a finite number > 0 or|ibu: delta must be a finite"),
                         ({"max_iter": True}, r"ibu: max_iter must be a whole number >= 1"),
                         ({"max_iter": 10.0}, r"ibu: max_iter must be a whole number"),
                         ({"stop": "often"}, r"ibu: stop: unknown stopping rule 'often'; choose one of gap, loglik"),
                         ({"bogus": 1}, r"ibu: unknown setting 'bogus'; known: theta0, delta, max_iter")]:
        with pytest.raises(LocalPrivError, match=pattern):
            fit(obs, "ibu", **bad)
    with pytest.raises(LocalPrivError, match=r"inv-n: unknown setting 'delta'; known: none"):
        fit(obs, "inv-n", delta=1e-9)
    assert fit(obs, "ibu", max_iter=np.int64(50)).iterations <= 50  # NumPy integers are whole numbers


def test_parse_settings_by_declared_kind_only():
    assert parse_settings("ems", {"strength": "2", "folds": "3", "stop": "gap", "keep_trace": "true",
                                  "accelerate": "none"}) == {"strength": 2.0, "folds": 3, "stop": "gap",
                                                             "keep_trace": True, "accelerate": "none"}
    assert parse_settings("ems", {"strength": "none"}) == {"strength": None}
    for texts, pattern in [({"folds": "3.0"}, r"ems: folds must be a whole number, got '3.0'"),
                           ({"keep_trace": "1"}, r"ems: keep_trace must be true or false"),
                           ({"strength": "-1"}, r"ems: strength must be a finite number >= 0"),
                           ({"theta0": "0.5,0.5"}, r"ems: theta0 .* cannot be given as text"),
                           ({"bogus": "1"}, r"ems: unknown setting 'bogus'; known: strength, folds")]:
        with pytest.raises(LocalPrivError, match=pattern):
            parse_settings("ems", texts)


def test_declarations_as_plain_data():
    import json
    data = describe_estimators()
    assert [d["name"] for d in data] == available_estimators()
    json.dumps(data)
    stop = next(s for s in estimator_settings("ibu") if s.name == "stop")
    from localpriv.estimators.em import STOPPING_RULES
    assert stop.choices == tuple(STOPPING_RULES) and stop.default == "gap"
    assert set(CHECKS) >= {"check_invariant_to_merging_counts", "check_deterministic_for_a_seed"}
