"""Matrix inversion (INV) with normalization (INV-N) or projection (INV-P), seed 001 section 7.

``v = q M^{-1}`` with ``q`` the empirical distribution of the reports; ``v`` may have negative
entries, so INV-N sets them to 0 and renormalizes, and INV-P takes the Euclidean projection onto
the simplex. A non-square channel of full column rank uses the least-squares (pseudo-)inverse.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from localpriv.data.observations import Observations
from localpriv.estimators.em import log_likelihood
from localpriv.estimators.registry import NO_SETTINGS, register_estimator
from localpriv.estimators.result import Fit
from localpriv.mechanisms.base import Mechanism
from localpriv.utils.simplex import clip_normalize, project_simplex
from localpriv.utils.validation import LocalPrivError

__all__ = ["inv", "inverse_vector"]


def inverse_vector(mechanism: Mechanism, counts: ArrayLike) -> np.ndarray:
    """``v = q M^{-1}`` for the count vector over all outputs of ``mechanism``."""
    c = np.asarray(counts, dtype=float)
    q = c / c.sum()
    if hasattr(mechanism, "inverse_counts"):
        return mechanism.inverse_counts(c)
    M = mechanism.channel()
    k, m = M.shape
    if k == m:
        try:
            v = np.linalg.solve(M.T, q)
        except np.linalg.LinAlgError:
            raise LocalPrivError(f"INV: the channel of {mechanism} is singular; use ibu instead") from None
        if not np.all(np.isfinite(v)) or np.linalg.cond(M) > 1e14:
            raise LocalPrivError(f"INV: the channel of {mechanism} is numerically singular; use ibu instead")
        return v
    if np.linalg.matrix_rank(M) < k:
        raise LocalPrivError(f"INV: the channel of {mechanism} has rank < {k} (not identifiable); use ibu instead")
    v, *_ = np.linalg.lstsq(M.T, q, rcond=None)
    return v


def inv(obs: Observations, *, post: str = "n") -> Fit:
    """INV-N (``post="n"``) or INV-P (``post="p"``) on the counts of a single finite mechanism.

    Parameters
    ----------
    obs : Observations
        Reports of one mechanism with a finite, invertible channel.
    post : {"n", "p"}
        Post-processing of the raw inverse: ``"n"`` clips negatives and normalizes, ``"p"``
        projects onto the probability simplex.

    Returns
    -------
    Fit
        The raw inverse is kept in ``extra["raw_inverse"]``.
    """
    post = post.lower()
    if post not in ("n", "p"):
        raise LocalPrivError(f"INV post-processing must be 'n' (normalize) or 'p' (project), got {post!r}")
    block = obs.single(f"inv-{post}")
    counts = block.count_vector()
    v = inverse_vector(block.mechanism, counts)
    theta = clip_normalize(v) if post == "n" else project_simplex(v)
    L = log_likelihood([block.likelihood_block()], theta)
    return Fit(theta, obs.domain, f"inv-{post}", {"post": post}, loglik=L, n=obs.n,
                    extra={"raw_inverse": v})


register_estimator("inv-n", lambda obs, **kw: inv(obs, post="n", **kw), settings=NO_SETTINGS,
                   summary="matrix inversion q M^-1, negatives set to 0 and renormalized (one finite mechanism)",
                   tags={"single-mechanism", "finite-channel"})
register_estimator("inv-p", lambda obs, **kw: inv(obs, post="p", **kw), settings=NO_SETTINGS,
                   summary="matrix inversion q M^-1, projected onto the simplex (one finite mechanism)",
                   tags={"single-mechanism", "finite-channel"})
