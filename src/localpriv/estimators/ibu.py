"""IBU: the iterative Bayesian update (seed 001 Algorithm 1), an EM to the maximum-likelihood
estimate. With reports from several mechanisms it is GIBU (seed 003 Algorithm 1): same engine."""
from __future__ import annotations

import numpy as np

from ..estimate import Estimate
from ..observations import Observations
from .em import STOPPING_RULE, em

__all__ = ["ibu"]


def ibu(obs: Observations, *, theta0=None, delta: float = 1e-6, max_iter: int = 10_000,
        callback=None, keep_trace: bool = False, accelerate: str | None = None) -> Estimate:
    """Maximum-likelihood estimate by IBU/GIBU.

    ``theta^{t+1}_x = sum_z q_z theta^t_x M_xz / sum_u theta^t_u M_uz`` (seed 001 Algorithm 1),
    started at ``theta0`` (uniform by default; any full-support distribution), stopped when
    ``|L(theta^t) - L(theta^{t-1})| < delta`` (total log-likelihood, Eq. 2) or at ``max_iter``
    (then ``converged=False``).

    ``accelerate="squarem"`` runs the monotone SQUAREM scheme of :func:`localpriv.estimators.em.em`
    (same maximum, same stopping rule, usually far fewer EM-map evaluations); the estimate's
    settings record the scheme (``"acceleration"``) and the stopping rule (``"stopping"``).
    """
    blocks = obs.likelihood_blocks()
    res = em(blocks, obs.k, theta0=theta0, delta=delta, max_iter=max_iter,
             callback=callback, keep_trace=keep_trace, accelerate=accelerate)
    name = "ibu" if len(obs.blocks) == 1 else "gibu"
    extra = {"trace": np.asarray(res.trace)} if keep_trace else {}
    return Estimate(res.theta, obs.domain, name,
                    {"delta": delta, "max_iter": max_iter, "start": "uniform" if theta0 is None else "given",
                     "stopping": STOPPING_RULE, "acceleration": res.scheme},
                    loglik=res.loglik, iterations=res.iterations, converged=res.converged,
                    n=obs.n, extra=extra)
