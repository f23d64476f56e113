"""The conformance suite for estimators: :func:`check_estimator` and :func:`estimator_checks`.

In the style of scikit-learn's ``parametrize_with_checks``: every check is a small named function
``check_...(name)`` taking the name of a registered estimator (:mod:`localpriv.estimators.registry`)
and raising :class:`EstimatorConformanceError` (an :class:`AssertionError`) when the estimator
breaks its contract. :func:`estimator_checks` yields the checks that apply to an estimator, chosen
by its declared tags; :func:`check_estimator` runs them all. The test suite runs every check on
every registered estimator (``tests/test_estimator_conformance.py``), so an estimator is checked
the moment it is registered; third parties run it on theirs::

    from localpriv.testing.estimators import check_estimator
    check_estimator("my-estimator")

Each estimator is checked on example observations it accepts, built from its tags by
:func:`example_observations` (``k`` = 6 to 8 inputs, ``n`` = 2000 reports, a fixed seed): k-RR
reports by default, OUE reports for pure frequency oracles, SUE (basic RAPPOR) reports where
symmetric unary encoding is required, a linear geometric mechanism on an integer line for
estimators of ordered domains, and two (or three) mechanisms with different levels for the
estimators of free-will mixtures.

Tolerances. Reordering the reports or splitting a count into two rows changes only the order of
floating-point sums, so estimates must agree to :func:`same_tolerance` (a thousandth of the
sampling standard error ``1 / sqrt(n)``, far above rounding and far below any statistical
effect). Agreement with the maximum-likelihood estimate is checked on the log-likelihood, where
the engine's certificate applies: both runs stop on the gap rule with ``delta`` = 1e-10, so each
per-report log-likelihood is within ``delta`` of the maximum and the two within ``2 delta``.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import numpy as np

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.domains import CategoricalDomain, Domain, IntegerDomain
from localpriv.estimators import fit, log_likelihood
from localpriv.estimators.registry import REGISTRY, TAGS, Setting, estimator_spec, parse_settings
from localpriv.estimators.result import Fit
from localpriv.inference.estimate import Estimate
from localpriv.inference.uncertainty import interval_refusal
from localpriv.mechanisms import parse
from localpriv.utils.validation import LocalPrivError

__all__ = ["EstimatorConformanceError", "example_observations", "same_tolerance", "estimator_checks",
           "check_estimator", "CHECKS", "check_declares_settings_and_tags", "check_returns_a_fit",
           "check_sums_to_one_and_nonnegative", "check_accepts_its_declared_defaults",
           "check_parses_its_settings_from_text", "check_invariant_to_report_order",
           "check_invariant_to_merging_counts", "check_agrees_with_the_mle",
           "check_refuses_unknown_setting_in_one_line", "check_refuses_bad_setting_values",
           "check_intervals_in_unit_range", "check_finite_intervals", "check_deterministic_for_a_seed",
           "bad_values"]

#: reports in the example observations
N_REPORTS = 2000
#: the seed of the example observations
SEED = 20240
#: the strength the checks give cross-validated estimators where the choice by cross-validation
#: would draw a different split from reordered reports (bandwidth 1 cell, pseudo-count 1)
FIXED_STRENGTH = 1.0
#: the tolerance of the certified runs that :func:`check_agrees_with_the_mle` compares
MLE_DELTA = 1e-10


class EstimatorConformanceError(AssertionError):
    """An estimator failed a conformance check; the message names the check and the estimator."""

    def __init__(self, check: str, name: str, detail: str):
        self.check = check
        self.estimator = name
        super().__init__(f"{check}({name}): {detail}")


def _fail(check: str, name: str, detail: str) -> NoReturn:
    raise EstimatorConformanceError(check, name, detail)


# --------------------------------------------------------------------------------------------
# example observations, from the tags
# --------------------------------------------------------------------------------------------
def _mechanism_specs(tags: frozenset) -> tuple[list[str], bool]:
    """The mechanisms of the example (specs without ``k``) and whether the domain is ordered."""
    mixture = "mixture" in tags
    if "ordered-domain" in tags:
        return (["geometric(eps=0.8)", "geometric(eps=1.2)"] if mixture else ["geometric(eps=0.8)"]), True
    if "symmetric-unary" in tags:
        return (["sue(eps=2.0)", "sue(eps=1.0)"] if mixture else ["sue(eps=2.0)"]), False
    if "unary" in tags:
        return (["oue(eps=2.0)", "sue(eps=1.5)"] if mixture else ["oue(eps=2.0)"]), False
    if "pure-oracle" in tags:
        return (["oue(eps=2.0)", "olh(eps=2.0)"] if mixture else ["oue(eps=2.0)"]), False
    if not mixture:
        return ["krr(eps=1.5)"], False
    specs = ["krr(eps=1.0)", "krr(eps=3.0)"]
    if not tags & {"shared-alphabet", "finite-channel"}:
        specs.append("oue(eps=2.0)")  # any mixture: mechanisms of different output spaces too
    return specs, False


@functools.cache
def _examples(tags: frozenset) -> Observations:
    specs, ordered = _mechanism_specs(tags)
    domain: Domain
    if ordered:
        domain = IntegerDomain(0, 7)
        theta = np.array([1, 3, 6, 8, 7, 4, 2, 1], dtype=float)
    else:
        domain = CategoricalDomain(["a", "b", "c", "d", "e", "f"])
        theta = np.array([8, 6, 4, 3, 2, 1], dtype=float)
    theta /= theta.sum()
    rng = np.random.default_rng(SEED)
    sizes = np.full(len(specs), N_REPORTS // len(specs))
    sizes[0] += N_REPORTS - sizes.sum()
    blocks = []
    for spec, n in zip(specs, sizes):
        mech = parse(spec, domain)
        z = mech.sample(rng.choice(theta.size, size=int(n), p=theta), rng)
        uniq, cnt = np.unique(z, axis=0, return_counts=True) if z.ndim > 1 else np.unique(z, return_counts=True)
        blocks.append(ObservationBlock(mech, uniq, cnt))
    return Observations(blocks, domain)


def example_observations(name: str) -> Observations:
    """Observations the estimator ``name`` accepts, built from its tags (fixed seed, cached).

    Parameters
    ----------
    name : str
        A registered estimator.

    Returns
    -------
    Observations
        ``n`` = 2000 reports on 6 categories (8 integers for ordered domains), of one mechanism or,
        for estimators of mixtures, of two or three.
    """
    return _examples(estimator_spec(name).tags)


def same_tolerance(obs: Observations) -> float:
    """How far two estimates that must be equal up to rounding may differ, per cell: a thousandth
    of the sampling standard error ``1 / sqrt(n)``."""
    return 1e-3 / np.sqrt(obs.n)


def _settings(name: str) -> dict[str, Any]:
    """The settings the invariance checks use: a fixed strength for cross-validated estimators."""
    return {"strength": FIXED_STRENGTH} if "cross-validated" in estimator_spec(name).tags else {}


def _fit(name: str, obs: Observations | None = None, **settings) -> Fit:
    return fit(example_observations(name) if obs is None else obs, name, **settings)


def _shuffled(obs: Observations, rng: np.random.Generator) -> Observations:
    blocks = []
    for b in obs.blocks:
        order = rng.permutation(b.counts.size)
        blocks.append(ObservationBlock(b.mechanism, b.reports[order], b.counts[order]))
    return Observations(blocks[::-1], obs.domain)


def _split(obs: Observations) -> Observations:
    """Every count of 2 or more split into two rows with the same report (floor and ceiling of half)."""
    blocks = []
    for b in obs.blocks:
        c = np.asarray(b.counts)
        half = np.floor(c / 2)
        two = c >= 2
        reports = np.concatenate([b.reports, b.reports[two]], axis=0)
        counts = np.concatenate([np.where(two, c - half, c), half[two]])
        blocks.append(ObservationBlock(b.mechanism, reports, counts))
    return Observations(blocks, obs.domain)


def _close(check: str, name: str, a, b, tol: float, what: str):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        _fail(check, name, f"{what}: shapes {a.shape} and {b.shape}")
    worst = float(np.max(np.abs(a - b)))
    if not worst <= tol:
        _fail(check, name, f"{what}: the estimates differ by {worst:.3g} (tolerance {tol:.3g})")


def _one_line_error(check: str, name: str, call: Callable[[], Any], must_name: tuple[str, ...], what: str) -> str:
    try:
        call()
    except LocalPrivError as exc:
        msg = str(exc)
    except Exception as exc:  # noqa: BLE001 - any other exception is the failure reported
        _fail(check, name, f"{what}: raised {type(exc).__name__}: {exc} (expected a LocalPrivError)")
    else:
        _fail(check, name, f"{what}: accepted")
    if "\n" in msg:
        _fail(check, name, f"{what}: the error is not one line: {msg!r}")
    missing = [w for w in must_name if w not in msg]
    if missing:
        _fail(check, name, f"{what}: the error {msg!r} does not name {', '.join(missing)}")
    return msg


# --------------------------------------------------------------------------------------------
# the checks
# --------------------------------------------------------------------------------------------
def check_declares_settings_and_tags(name: str) -> None:
    """The estimator declares a one-line summary, known tags that agree with its settings
    (``iterative``: the EM settings; ``regularized``: ``strength``; ``cross-validated``: ``folds``
    and ``rng``) and every setting with its kind, default and help."""
    check = "check_declares_settings_and_tags"
    spec = REGISTRY.get(name)
    if spec is None:
        _fail(check, name, "not in the registry")
    if not spec.summary or "\n" in spec.summary:
        _fail(check, name, "the summary must be one non-empty line")
    if not spec.tags or not spec.tags <= set(TAGS):
        _fail(check, name, f"tags {sorted(spec.tags)} must be a non-empty subset of {sorted(TAGS)}")
    for s in spec.settings:
        if not isinstance(s, Setting) or not s.help:
            _fail(check, name, f"setting {s!r} must be a Setting with a help text")
        if s.default is not None or not s.nullable:
            try:
                s.check(name, s.default)
            except LocalPrivError as exc:
                _fail(check, name, f"the default of {s.name} is refused by its own declaration: {exc}")
    names = set(spec.setting_names)
    needs = {"iterative": {"delta", "max_iter", "stop", "accelerate", "theta0", "callback", "progress"},
             "regularized": {"strength"}, "cross-validated": {"folds", "rng"}}
    for tag, required in needs.items():
        if tag in spec.tags and not required <= names:
            _fail(check, name, f"tagged {tag} but does not declare {', '.join(sorted(required - names))}")
    for a, b in (("mle", "regularized"), ("single-mechanism", "mixture")):
        if {a, b} <= spec.tags:
            _fail(check, name, f"tagged both {a} and {b}")


def check_returns_a_fit(name: str) -> None:
    """The estimator returns a :class:`Fit` with one entry per input, on the observations'
    domain, with their number of reports and the observations attached."""
    check = "check_returns_a_fit"
    obs = example_observations(name)
    est = _fit(name, obs)
    if not isinstance(est, Fit):
        _fail(check, name, f"returned {type(est).__name__}, not a Fit")
    if np.shape(est.distribution) != (obs.k,):
        _fail(check, name, f"distribution of shape {np.shape(est.distribution)}, expected ({obs.k},)")
    if est.domain is not obs.domain:
        _fail(check, name, f"the fit's domain {est.domain} is not the observations' {obs.domain}")
    if est.n != obs.n:
        _fail(check, name, f"n = {est.n}, the observations have {obs.n} reports")
    if est.observations is not obs:
        _fail(check, name, "the fit does not carry its observations")


def check_sums_to_one_and_nonnegative(name: str) -> None:
    """The estimate is a probability vector: finite, non-negative, summing to 1 (rounding: 1e-9)."""
    check = "check_sums_to_one_and_nonnegative"
    p = np.asarray(_fit(name).distribution, dtype=float)
    if not np.all(np.isfinite(p)):
        _fail(check, name, "the estimate has NaN or infinite entries")
    if np.any(p < 0):
        _fail(check, name, f"negative entries, the smallest {p.min():.3g}")
    if abs(p.sum() - 1.0) > 1e-9:
        _fail(check, name, f"the estimate sums to {p.sum():.12g}")


def check_accepts_its_declared_defaults(name: str) -> None:
    """Passing every declared setting that has a plain value at its declared default gives the
    same estimate as passing none: the declaration matches the function."""
    check = "check_accepts_its_declared_defaults"
    spec = estimator_spec(name)
    base = _settings(name)
    given = {s.name: s.default for s in spec.settings
             if (s.textual or s.kind == "rng") and s.name not in base and not (s.default is None and not s.nullable)}
    try:
        a = _fit(name, **base)
        b = _fit(name, **base, **given)
    except (LocalPrivError, TypeError) as exc:
        _fail(check, name, f"the declared defaults {given} are refused: {exc}")
    _close(check, name, a.distribution, b.distribution, 0.0, f"with the declared defaults {given}")


def check_parses_its_settings_from_text(name: str) -> None:
    """Every setting that can be given as text parses back from the text of its default (what
    the service's query strings give), and text of another kind is refused."""
    check = "check_parses_its_settings_from_text"
    for s in estimator_spec(name).settings:
        if not s.textual or s.default is None:
            continue
        text = str(s.default).lower() if s.kind == "bool" else str(s.default)
        got = parse_settings(name, {s.name: text})[s.name]
        if got != s.default or type(got) is not type(s.default):
            _fail(check, name, f"{s.name}={text!r} parsed as {got!r}, expected {s.default!r}")
        if s.kind in ("float", "int"):
            _one_line_error(check, name, functools.partial(parse_settings, name, {s.name: "ten"}), (name, s.name),
                            f"{s.name}='ten'")
    _one_line_error(check, name, lambda: parse_settings(name, {"no_such_setting": "1"}),
                    (name, "no_such_setting"), "the text setting no_such_setting")


def check_invariant_to_report_order(name: str) -> None:
    """Shuffling the rows of every block and reversing the order of the blocks leaves the estimate
    unchanged (to :func:`same_tolerance`)."""
    check = "check_invariant_to_report_order"
    obs = example_observations(name)
    a = _fit(name, obs, **_settings(name))
    b = _fit(name, _shuffled(obs, np.random.default_rng(SEED)), **_settings(name))
    _close(check, name, a.distribution, b.distribution, same_tolerance(obs), "reports reordered")


def check_invariant_to_merging_counts(name: str) -> None:
    """Splitting every count into two rows with the same report (and so, read backwards, merging
    equal reports) leaves the estimate unchanged (to :func:`same_tolerance`)."""
    check = "check_invariant_to_merging_counts"
    obs = example_observations(name)
    a = _fit(name, obs, **_settings(name))
    b = _fit(name, _split(obs), **_settings(name))
    _close(check, name, a.distribution, b.distribution, same_tolerance(obs), "counts split into two rows")


def check_agrees_with_the_mle(name: str) -> None:
    """Estimators tagged ``mle``, and ``regularized`` ones at strength 0, reach the maximum
    likelihood: stopped by the certified gap rule at ``delta`` = 1e-10, their per-report
    log-likelihood is within ``2 delta`` of that of ``ibu`` (the reference MLE)."""
    check = "check_agrees_with_the_mle"
    spec = estimator_spec(name)
    obs = example_observations(name)
    settings = {"stop": "gap", "delta": MLE_DELTA}
    if "regularized" in spec.tags:
        settings["strength"] = 0.0
    est = fit(obs, name, **settings)
    ref = fit(obs, "ibu", stop="gap", delta=MLE_DELTA)
    blocks = obs.likelihood_blocks()
    gap = (log_likelihood(blocks, ref.distribution) - log_likelihood(blocks, est.distribution)) / obs.n
    tol = 2 * MLE_DELTA + 1e-13  # both certificates, and the rounding of the two sums of n logs
    if abs(gap) > tol:
        _fail(check, name, f"per-report log-likelihood {gap:.3g} from the MLE's (tolerance {tol:.3g})")


def bad_values(setting: Setting) -> list[Any]:
    """Values the declaration of ``setting`` refuses: other kinds (a bool for a number, a number
    as text), out of range, not among the choices."""
    if setting.kind in ("float", "int"):
        out: list[Any] = [True, "1", float("nan")]
        if setting.kind == "int":
            out.append(1.5)
        if setting.low is not None:
            out.append(setting.low if setting.low_open else setting.low - 1)
        if setting.high is not None:
            out.append(setting.high if setting.high_open else setting.high + 1)
        return out
    others: dict[str, list[Any]] = {
        "bool": [1, "true", None], "str": ["no-such-choice", 1, True],
        "callable": [5, "print"], "rng": [-1, 1.5, "0", None], "progress": ["yes", 2],
        "distribution": ["abc", [[0.5, 0.5], [0.5, 0.5]], [0.5, -0.5]]}
    return others[setting.kind]


def check_refuses_unknown_setting_in_one_line(name: str) -> None:
    """An unknown setting is a one-line :class:`LocalPrivError` naming the estimator, the setting
    and the known ones."""
    check = "check_refuses_unknown_setting_in_one_line"
    spec = estimator_spec(name)
    msg = _one_line_error(check, name, lambda: _fit(name, no_such_setting=1), (name, "no_such_setting"),
                          "the setting no_such_setting")
    missing = [s for s in spec.setting_names if s not in msg]
    if missing:
        _fail(check, name, f"the error {msg!r} does not list the known settings {', '.join(missing)}")


def check_refuses_bad_setting_values(name: str) -> None:
    """Every declared setting refuses the values of :func:`bad_values` with a one-line
    :class:`LocalPrivError` naming the estimator and the setting (before any estimation)."""
    check = "check_refuses_bad_setting_values"
    for s in estimator_spec(name).settings:
        for value in bad_values(s):
            if value is None and s.nullable:
                continue
            _one_line_error(check, name, functools.partial(_fit, name, **{s.name: value}), (name, s.name),
                            f"{s.name}={value!r}")


def check_intervals_in_unit_range(name: str) -> None:
    """The estimate's 95% intervals (:meth:`Estimate.ci`) are finite, contain it and lie in ``[0, 1]``,
    or they are refused by a documented one-line :class:`LocalPrivError`
    (:data:`localpriv.inference.uncertainty.INTERVAL_REFUSALS`)."""
    check = "check_intervals_in_unit_range"
    est = Estimate.from_fit(_fit(name, **_settings(name)))
    try:
        lo, hi = (np.asarray(v, dtype=float) for v in est.ci(0.95))
    except LocalPrivError as exc:
        if interval_refusal(str(exc)) is None:
            _fail(check, name, f"intervals refused by an undocumented or multi-line message: {exc}")
        return
    p = np.asarray(est.distribution, dtype=float)
    if lo.shape != p.shape or hi.shape != p.shape:
        _fail(check, name, f"intervals of shapes {lo.shape}, {hi.shape} for an estimate of shape {p.shape}")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        _fail(check, name, "some interval bounds are NaN or infinite")
    eps = 1e-12  # rounding of the bounds
    outside = np.flatnonzero((lo > p + eps) | (hi < p - eps))
    if outside.size:
        i = int(outside[0])
        _fail(check, name, f"cell {i}: the interval [{lo[i]:.4g}, {hi[i]:.4g}] does not contain {p[i]:.4g}")
    out = np.flatnonzero((lo < -eps) | (hi > 1.0 + eps))
    if out.size:
        i = int(out[0])
        _fail(check, name, f"cell {i}: the interval [{lo[i]:.4g}, {hi[i]:.4g}] leaves [0, 1]")


#: the former name of :func:`check_intervals_in_unit_range` (which checks what it checked, and more)
check_finite_intervals = check_intervals_in_unit_range


def check_deterministic_for_a_seed(name: str) -> None:
    """Two runs with the default settings (the same seed for estimators that draw) give the same
    estimate, bit for bit."""
    check = "check_deterministic_for_a_seed"
    obs = example_observations(name)
    a, b = _fit(name, obs), _fit(name, obs)
    _close(check, name, a.distribution, b.distribution, 0.0, "two runs")


#: every check, with the tags that make it apply (``None``: every estimator)
CHECKS: dict[str, tuple[Callable[[str], None], Callable[[frozenset], bool] | None]] = {
    "check_declares_settings_and_tags": (check_declares_settings_and_tags, None),
    "check_returns_a_fit": (check_returns_a_fit, None),
    "check_sums_to_one_and_nonnegative": (check_sums_to_one_and_nonnegative, None),
    "check_accepts_its_declared_defaults": (check_accepts_its_declared_defaults, None),
    "check_parses_its_settings_from_text": (check_parses_its_settings_from_text, None),
    "check_invariant_to_report_order": (check_invariant_to_report_order, None),
    "check_invariant_to_merging_counts": (check_invariant_to_merging_counts, None),
    "check_agrees_with_the_mle": (check_agrees_with_the_mle, lambda tags: bool(tags & {"mle", "regularized"})),
    "check_refuses_unknown_setting_in_one_line": (check_refuses_unknown_setting_in_one_line, None),
    "check_refuses_bad_setting_values": (check_refuses_bad_setting_values, None),
    "check_intervals_in_unit_range": (check_intervals_in_unit_range, None),
    "check_deterministic_for_a_seed": (check_deterministic_for_a_seed, None),
}


def estimator_checks(name: str) -> Iterator[tuple[str, Callable[[], None]]]:
    """The checks that apply to the estimator ``name`` (by its tags), as ``(check name, call)``.

    Parameters
    ----------
    name : str
        A registered estimator.

    Yields
    ------
    (str, callable)
        The check's name and a function of no arguments running it on ``name``.
    """
    tags = estimator_spec(name).tags
    for check_name, (check, applies) in CHECKS.items():
        if applies is None or applies(tags):
            yield check_name, functools.partial(check, name)


def check_estimator(name: str) -> None:
    """Run every applicable check (:func:`estimator_checks`) on the estimator ``name``.

    Raises
    ------
    EstimatorConformanceError
        Naming the first check that fails.
    """
    for _, run in estimator_checks(name):
        run()
