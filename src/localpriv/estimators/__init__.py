"""Estimators of the original distribution from aggregated observations.

Every estimator has the signature ``estimator(observations, **settings) -> Estimate``; the
registry ``ESTIMATORS`` maps the CLI names to them and :func:`estimate` dispatches.
"""
from __future__ import annotations

from typing import Callable

from .._validation import LocalPrivError
from ..estimate import Estimate
from ..observations import Observations
from .em import EMResult, em, log_likelihood
from .ibu import ibu
from .inv import inv, inverse_vector

ESTIMATORS: dict[str, Callable[..., Estimate]] = {
    "inv-n": lambda obs, **kw: inv(obs, post="n", **kw),
    "inv-p": lambda obs, **kw: inv(obs, post="p", **kw),
    "ibu": ibu,
}


def register_estimator(name: str, func: Callable[..., Estimate]) -> None:
    """Add an estimator under ``name`` (used by the CLI's ``--estimator``)."""
    ESTIMATORS[name] = func


def _load_plugins():
    """Import every other module of this package: each registers its estimators."""
    import importlib
    import pkgutil
    for info in pkgutil.iter_modules(__path__):
        if info.name not in {"em", "ibu", "inv"}:
            importlib.import_module(f"{__name__}.{info.name}")


def available_estimators() -> list[str]:
    """The names of every registered estimator (loading the estimator modules first)."""
    _load_plugins()
    return sorted(ESTIMATORS)


def estimate(obs: Observations, method: str = "ibu", **settings) -> Estimate:
    """Run the estimator named ``method`` (see ``ESTIMATORS``) on ``obs``."""
    _load_plugins()
    func = ESTIMATORS.get(method)
    if func is None:
        raise LocalPrivError(f"unknown estimator {method!r}; known: {', '.join(sorted(ESTIMATORS))}")
    return func(obs, **settings)


__all__ = ["ESTIMATORS", "available_estimators", "estimate", "register_estimator", "ibu", "inv", "inverse_vector",
           "em", "EMResult", "log_likelihood"]
