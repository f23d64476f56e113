"""Inference: the :class:`Estimate` of the users' distribution with its uncertainty (intervals,
standard errors, statistics), metrics and figures."""
from __future__ import annotations

from typing import Any

from localpriv.data.observations import Observations
from localpriv.estimators import fit
from localpriv.inference.estimate import Estimate

__all__ = ["Estimate", "estimate"]


def estimate(obs: Observations, method: str | None = None, **settings: Any) -> Estimate:
    """Estimate the users' distribution from aggregated reports: :func:`localpriv.estimate`.

    Runs the registered estimator ``method`` (:func:`localpriv.estimators.fit`) and returns its
    result as an :class:`Estimate`, whose methods give the estimate's uncertainty.
    """
    return Estimate.from_fit(fit(obs, method, **settings))
