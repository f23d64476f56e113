"""IBU: the iterative Bayesian update (seed 001 Algorithm 1), an EM to the maximum-likelihood
estimate. With reports from several mechanisms it is GIBU (seed 003 Algorithm 1): same engine."""
from __future__ import annotations

import numpy as np

from ..estimate import Estimate
from ..observations import Observations
from .em import STOPPING_RULES, em

__all__ = ["ibu"]


def ibu(obs: Observations, *, theta0=None, delta: float = 1e-6, max_iter: int = 10_000,
        callback=None, keep_trace: bool = False, accelerate: str | None = None,
        stop: str = "loglik") -> Estimate:
    """Maximum-likelihood estimate by IBU/GIBU.

    ``theta^{t+1}_x = sum_z q_z theta^t_x M_xz / sum_u theta^t_u M_uz`` (seed 001 Algorithm 1),
    started at ``theta0`` (uniform by default; any full-support distribution), stopped when
    ``|L(theta^t) - L(theta^{t-1})| < delta`` (total log-likelihood, Eq. 2) or at ``max_iter``
    (then ``converged=False``).

    ``accelerate="squarem"`` runs the monotone SQUAREM scheme of :func:`localpriv.estimators.em.em`
    (same maximum, same stopping rule, usually far fewer EM-map evaluations);
    ``accelerate="newton"`` adds the certified active-set Newton finish of
    :mod:`localpriv.estimators.newton` where every block allows it (the exact maximum in a few dozen
    evaluations when it lies on the boundary of the simplex; SQUAREM otherwise). The estimate's
    settings record the scheme used (``"acceleration"``) and the stopping rule (``"stopping"``).

    ``stop="max_abs"`` stops on ``max_x |theta_x(t) - theta_x(t-1)| < delta`` instead: ``L`` is a
    sum over all reports, so with many reports a ``delta`` on it below ``|L| * 2e-16`` is below
    floating-point resolution, while the change in ``theta`` can still be driven that low.
    """
    blocks = obs.likelihood_blocks()
    res = em(blocks, obs.k, theta0=theta0, delta=delta, max_iter=max_iter,
             callback=callback, keep_trace=keep_trace, accelerate=accelerate, stop=stop)
    name = "ibu" if len(obs.blocks) == 1 else "gibu"
    extra = {"trace": np.asarray(res.trace)} if keep_trace else {}
    return Estimate(res.theta, obs.domain, name,
                    {"delta": delta, "max_iter": max_iter, "start": "uniform" if theta0 is None else "given",
                     "stopping": STOPPING_RULES[stop], "acceleration": res.scheme},
                    loglik=res.loglik, iterations=res.iterations, converged=res.converged,
                    n=obs.n, extra=extra)
