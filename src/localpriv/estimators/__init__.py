"""Estimators of the original distribution from aggregated observations.

Every estimator has the signature ``estimator(observations, **settings) -> Fit`` and is declared
once in the registry (:mod:`localpriv.estimators.registry`: name, function, summary, tags and
settings); ``ESTIMATORS`` maps the names to the functions and :func:`fit` dispatches, checking the
settings against the declaration. Importing this package registers every estimator.

Every IBU variant (``ibu``, ``gibu``, ``ibu-support``, ``ibu-exact``, ``ibu-m``, ``ibu-r``, and
the likely-subset IBU of :mod:`localpriv.analysis.likely`, whose estimates are named ``ibu-likely``
but which is not a registered estimator) runs the one EM engine with its defaults
(``DEFAULTS``): the certified, accelerated maximum-likelihood estimate -- ``stop="gap"`` with
``delta = 1e-9`` per report, ``accelerate="newton"``, at most 100,000 EM evaluations
(``docs/convergence.md``). ``PLAIN_EM`` holds seed 001's plain capped EM, which reproductions pin.
"""
from __future__ import annotations

from typing import Any

from localpriv.data.observations import Observations
from localpriv.domains import Domain, ProductDomain
from localpriv.estimators import auto, combination, oracles, postprocess, regularized  # noqa: F401  (registrations)
from localpriv.estimators.em import DEFAULTS, PLAIN_EM, STOPPING_RULES, EMResult, em, gap_bound, log_likelihood
from localpriv.estimators.ibu import ibu

# the estimator modules: each registers its estimators when imported
from localpriv.estimators.inv import inv, inverse_vector
from localpriv.estimators.registry import (
    ESTIMATORS,
    REGISTRY,
    TAGS,
    EstimatorSpec,
    Setting,
    accepts_setting,
    check_settings,
    describe_estimators,
    estimator_settings,
    estimator_spec,
    estimators_tagged,
    parse_settings,
    register_estimator,
)
from localpriv.estimators.result import Fit
from localpriv.utils.validation import LocalPrivError


def available_estimators() -> list[str]:
    """The names of every registered estimator, sorted."""
    return sorted(ESTIMATORS)


def fit(obs: Observations, method: str | None = None, **settings: Any) -> Fit:
    """Run the registered estimator ``method`` on ``obs``.

    Parameters
    ----------
    obs : Observations
        The aggregated reports.
    method : str, optional
        A registered estimator (:func:`available_estimators`); ``None`` (default):
        :func:`default_estimator` of the observations' domain.
    **settings
        The estimator's settings, checked against its declaration (:func:`estimator_settings`):
        unknown settings, values of the wrong kind, out of range or not among the choices are a
        one-line :class:`LocalPrivError` naming the estimator and the setting.

    Returns
    -------
    Fit
        :func:`localpriv.estimate` wraps it into an :class:`~localpriv.inference.Estimate` (with
        its uncertainty).
    """
    if method is None and isinstance(obs, Observations):
        method = default_estimator(obs.domain)
    spec = estimator_spec(method)
    method = spec.name  # the name it is registered under (a str from here on)
    if not isinstance(obs, Observations):
        raise LocalPrivError(f"estimators read Observations (see localpriv.data.aggregate), got {type(obs).__name__}")
    check_settings(method, settings)
    est = spec.func(obs, **settings)
    # what the uncertainty of the estimate needs: its observations and how it was computed (a
    # progress display is how it was watched, not computed: refits stay quiet)
    est.observations = obs
    est.extra.setdefault("call", (method, {k: v for k, v in settings.items() if k != "progress"}))
    return est


def default_estimator(domain: Domain | None) -> str:
    """The estimator ``localpriv estimate`` and :func:`localpriv.estimate` use unless told otherwise.

    Parameters
    ----------
    domain : Domain or None
        The observations' input domain.

    Returns
    -------
    str
        ``"auto"`` (:func:`localpriv.estimators.auto.auto`) for every domain: the certified
        maximum-likelihood estimate and a few cheap alternatives built from the same observations
        -- Norm-Sub, Base-Cut, PowerNS, Norm-Sub shrunk towards uniform on categorical domains and
        heat-kernel smoothings on ordered ones -- one of them
        returned by a stated rule: the smallest Stein unbiased risk estimate of the squared error
        (Stein, Ann. Statist. 9:1135-1151, 1981) for the reports of one pure frequency oracle, the
        largest held-out log-likelihood on one binomial-thinning split otherwise (where EMS is a
        candidate on ordered domains). It costs one MLE fit plus work linear in the number of
        cells per candidate, and every fit on its path has an evaluation budget
        (docs/decisions/0037-fast-default-estimator.md). ``ems`` and ``dirichlet``, the defaults
        before it, stay registered. Without a domain (untruncated geometric reports): ``"ibu"``, the
        certified maximum-likelihood estimate on the likely subset of the integers. On a product
        of attributes (multi-attribute protocols): ``"dirichlet"``, the MAP of the joint.
    """
    if domain is None:
        return "ibu"
    # a product of attributes (multi-attribute protocols): the Dirichlet MAP of the joint, whose
    # structured likelihood blocks the protocols provide (decision 0061)
    return "dirichlet" if isinstance(domain, ProductDomain) else "auto"


__all__ = ["ESTIMATORS", "REGISTRY", "EstimatorSpec", "Setting", "TAGS", "Fit", "available_estimators",
           "default_estimator", "fit", "register_estimator", "estimator_spec", "estimator_settings",
           "accepts_setting", "describe_estimators", "estimators_tagged", "check_settings", "parse_settings", "ibu",
           "inv", "inverse_vector", "em", "EMResult", "log_likelihood", "gap_bound", "DEFAULTS", "PLAIN_EM",
           "STOPPING_RULES"]
