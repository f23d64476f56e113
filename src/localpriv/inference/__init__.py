"""Inference: the :class:`Estimate` of the users' distribution with its uncertainty (intervals,
standard errors, statistics), metrics and figures."""
from __future__ import annotations

from typing import Any

from localpriv.data.observations import Observations
from localpriv.estimators import fit
from localpriv.estimators.result import Fit
from localpriv.inference.estimate import Estimate
from localpriv.utils.engines import load_engine

__all__ = ["Estimate", "estimate", "ESTIMATION_ENGINES", "local_engine"]

#: Where estimators run, by name: ``"module:function"`` of ``f(obs, method, **settings) -> Fit``.
#: Strings, so that an engine above this layer (Spark, in ``localpriv.extras``) is imported only
#: when asked for. ``"spark"`` estimates the counts where ``aggregate(..., engine="spark")`` left
#: them (``Observations.frame``), by the same EM engine with blocks evaluated on the executors.
ESTIMATION_ENGINES: dict[str, str] = {
    "local": "localpriv.inference:local_engine",
    "spark": "localpriv.extras.spark:spark_estimate",
}


def local_engine(obs: Observations, method: str | None = None, **settings: Any) -> Fit:
    """The ``"local"`` engine: the registered estimator on this machine (:func:`localpriv.estimators.fit`)."""
    return fit(obs, method, **settings)


def estimate(obs: Observations, method: str | None = None, engine: str = "local", **settings: Any) -> Estimate:
    """Estimate the users' distribution from aggregated reports: :func:`localpriv.estimate`.

    Runs the registered estimator ``method`` (:func:`localpriv.estimators.fit`) on the engine named
    ``engine`` (a key of :data:`ESTIMATION_ENGINES`: ``"local"``, default, or ``"spark"``, which
    needs observations from ``aggregate(..., engine="spark")`` and runs the IBU family only) and
    returns its result as an :class:`Estimate`, whose methods give the estimate's uncertainty.
    """
    run = load_engine(ESTIMATION_ENGINES, engine, "estimation")
    return Estimate.from_fit(run(obs, method, **settings))
