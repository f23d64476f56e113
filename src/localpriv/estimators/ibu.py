"""IBU: the iterative Bayesian update (seed 001 Algorithm 1), an EM to the maximum-likelihood
estimate. With reports from several mechanisms it is GIBU (seed 003 Algorithm 1): same engine."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.data.observations import Observations
from localpriv.estimators.em import (
    DEFAULT_ACCELERATE,
    DEFAULT_DELTA,
    DEFAULT_MAX_ITER,
    DEFAULT_STOP,
    STOPPING_RULES,
    Callback,
    EMResult,
    em,
)
from localpriv.estimators.registry import em_settings_declared, register_estimator
from localpriv.estimators.result import Fit
from localpriv.likelihood.blocks import LikelihoodBlock
from localpriv.utils.progress import EMProgress, chain, em_progress

__all__ = ["ibu", "em_settings", "run_em"]


def em_settings(res: EMResult, delta: float, max_iter: int, theta0: ArrayLike | None = None) -> dict[str, Any]:
    """The settings every IBU variant records: tolerance, cap, start, the rule applied and the
    scheme that ran (``res`` is the engine's :class:`~localpriv.estimators.em.EMResult`), and the
    certificate reached (``gap_reached``: the per-report log-likelihood of the estimate is within
    it of the maximum; ``None`` when not available)."""
    gap = None if res.gap is None or math.isnan(res.gap) else float(res.gap)
    return {"delta": delta, "max_iter": max_iter, "start": "uniform" if theta0 is None else "given",
            "stopping": STOPPING_RULES[res.stop], "acceleration": res.scheme, "gap_reached": gap}


def run_em(blocks: Sequence[LikelihoodBlock], k: int, *, progress: bool | EMProgress = False, label: str = "ibu",
           callback: Callback | None = None, **kw: Any) -> EMResult:
    """:func:`~localpriv.estimators.em.em` with an optional progress display (``progress=True``:
    :func:`localpriv.utils.progress.em_progress` on stderr; or an :class:`~localpriv.utils.progress.EMProgress`);
    a ``callback`` is called too. Quiet unless asked."""
    if not progress:
        return em(blocks, k, callback=callback, **kw)
    bar = progress if isinstance(progress, EMProgress) else em_progress(label)
    with bar:
        res = em(blocks, k, callback=chain(bar, callback), **kw)
        bar.finish(res)
    return res


def ibu(obs: Observations, *, theta0: ArrayLike | None = None, delta: float = DEFAULT_DELTA,
        max_iter: int = DEFAULT_MAX_ITER, callback: Callback | None = None, keep_trace: bool = False,
        accelerate: str | None = DEFAULT_ACCELERATE, stop: str = DEFAULT_STOP,
        progress: bool | EMProgress = False) -> Fit:
    """Maximum-likelihood estimate by IBU/GIBU -- by default certified: within ``delta = 1e-9`` of the
    maximum per report.

    The update is ``theta^{t+1}_x = sum_z q_z theta^t_x M_xz / sum_u theta^t_u M_uz`` (seed 001
    Algorithm 1), started at ``theta0`` (uniform by default; any full-support distribution), run by
    the one EM engine (:func:`localpriv.estimators.em.em`), whose settings these are.

    Defaults (the engine's): ``accelerate="newton"`` -- SQUAREM with the certified active-set
    Newton finish of :mod:`localpriv.estimators.newton` where every block allows it (SQUAREM
    otherwise); ``stop="gap"`` -- stop once ``gap = max_x g_x - 1 < delta`` with ``g`` the EM
    multiplier (``theta'_x = theta_x g_x``). By concavity of ``L``
    ``(L_max - L(theta)) / n <= gap`` (Lindsay 1983, Ann. Statist. 11:86-94), so ``converged=True``
    means: the per-report log-likelihood is within ``delta`` of the maximum, whatever ``n``. The
    certificate reached is in ``settings["gap_reached"]``. ``max_iter`` (100,000 EM-map
    evaluations) is a safety cap: reaching it gives ``converged=False``.

    Plain capped EM is ``accelerate="none"`` (seed 001's rule, as the reproductions use it:
    ``accelerate="none", stop="loglik", delta=1e-6, max_iter=10_000``). ``stop="loglik"`` stops on
    ``|L(theta^t) - L(theta^{t-1})| < delta`` (total log-likelihood, Eq. 2; its meaning changes with
    ``n``), ``stop="max_abs"`` on ``max_x |theta_x(t) - theta_x(t-1)| < delta``.

    ``progress=True`` shows progress on stderr for runs longer than ~1.5 s (a bar on a terminal,
    one status line every ~10 s otherwise; :mod:`localpriv.utils.progress`); the library is quiet by
    default. The settings record the scheme used (``"acceleration"``) and the rule
    (``"stopping"``).

    Parameters
    ----------
    obs : Observations
        The aggregated reports (one or many mechanisms: GIBU).
    theta0 : array, optional
        The starting point (default uniform).
    delta : float
        Tolerance of the stopping rule (default 1e-9).
    max_iter : int
        Cap on EM-map evaluations (default 100,000).
    callback : callable, optional
        ``callback(t, theta, L)`` after every iteration.
    keep_trace : bool
        Keep the log-likelihood of every iteration in the estimate's ``extra``.
    accelerate : {"newton", "squarem", "none"}
        The acceleration scheme (see above).
    stop : {"gap", "loglik", "max_abs"}
        The stopping rule (see above).
    progress : bool or EMProgress
        Progress on stderr (see above).

    Returns
    -------
    Fit
    """
    blocks = obs.likelihood_blocks()
    name = "ibu" if len(obs.blocks) == 1 else "gibu"
    res = run_em(blocks, obs.k, progress=progress, label=name, theta0=theta0, delta=delta, max_iter=max_iter,
                 callback=callback, keep_trace=keep_trace, accelerate=accelerate, stop=stop)
    extra: dict[str, Any] = {"trace": np.asarray(res.trace)} if keep_trace else {}
    extra["gap"] = res.gap
    extra["products"] = res.products  # the Newton finish's products (about half an EM evaluation each)
    return Fit(res.theta, obs.domain, name, em_settings(res, delta, max_iter, theta0),
                    loglik=res.loglik, iterations=res.iterations, converged=res.converged,
                    n=obs.n, extra=extra)


register_estimator("ibu", ibu, settings=em_settings_declared(),
                   summary="maximum-likelihood estimate by IBU/GIBU (EM), certified within delta per report",
                   tags={"mle", "iterative", "mixture"})
