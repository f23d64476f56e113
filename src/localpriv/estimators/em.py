"""The one EM engine behind IBU (seed 001 Algorithm 1) and GIBU (seed 003 Algorithm 1).

Observations come as likelihood blocks ``G^A`` (``k x m_A``; ``G^A[x, j] = P(z_j | x)`` for the
distinct reports ``z_j`` of mechanism ``A``, seen ``c_j`` times). One iteration is::

    theta'_x = (1/n) * theta_x * sum_A sum_j c_j G^A[x, j] / (theta @ G^A)_j

which for a single mechanism is exactly IBU's update
``theta'_x = sum_z q_z theta_x M_xz / sum_u theta_u M_uz`` and for many is GIBU's. The engine only
asks each block for ``theta @ G`` and ``G @ w``, so structured channels make it faster without it
knowing why. Its cost per iteration is independent of the number of users ``n``.

The log-likelihood is seed 001 Eq. (2), ``L(theta) = sum_A sum_j c_j log (theta @ G^A)_j``, with
terms of zero count left out (``0 log 0 = 0``). The stopping rule is the seed's:
``|L(theta^t) - L(theta^{t-1})| < delta``, with an iteration cap whose hit is reported.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .._validation import LocalPrivError, check_distribution
from ..mechanisms.base import LikelihoodBlock

__all__ = ["EMResult", "em", "log_likelihood"]


@dataclass
class EMResult:
    theta: np.ndarray
    loglik: float
    iterations: int
    converged: bool
    trace: list[float] = field(default_factory=list)


def _forward_all(blocks: Sequence[LikelihoodBlock], theta: np.ndarray) -> list[np.ndarray]:
    return [b.forward(theta) for b in blocks]


def _loglik_from(blocks, probs) -> float:
    total = 0.0
    for b, p in zip(blocks, probs):
        c = b.counts
        live = c > 0
        pl = p[live]
        if np.any(pl <= 0):
            return -np.inf
        total += float(c[live] @ np.log(pl))
    return total


def log_likelihood(blocks: Sequence[LikelihoodBlock], theta) -> float:
    """``L(theta)`` of seed 001 Eq. (2) for the observations in ``blocks``."""
    theta = np.asarray(theta, dtype=float)
    return _loglik_from(blocks, _forward_all(blocks, theta))


def _check_observable(blocks, probs):
    for b, p in zip(blocks, probs):
        impossible = (b.counts > 0) & (p <= 0)
        if impossible.any():
            raise LocalPrivError(
                f"{int(impossible.sum())} observed report(s) have probability 0 under the mechanism "
                "for every input: the reports do not come from this mechanism"
            )


def em_step(blocks, theta, probs, n):
    """One EM (IBU/GIBU) update from ``theta`` and the forward products ``probs``."""
    grad = np.zeros_like(theta)
    for b, p in zip(blocks, probs):
        c = b.counts
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(c > 0, c / p, 0.0)
        grad += b.backward(w)
    new = theta * grad / n
    s = new.sum()
    return new / s if s > 0 else new


def em(
    blocks: Sequence[LikelihoodBlock],
    k: int,
    *,
    theta0=None,
    delta: float = 1e-6,
    max_iter: int = 10_000,
    callback: Callable[[int, np.ndarray, float], None] | None = None,
    keep_trace: bool = False,
) -> EMResult:
    """Run EM to a maximum-likelihood estimate.

    Parameters
    ----------
    blocks : sequence of LikelihoodBlock
        The observations, one block per mechanism.
    k : int
        Size of the input domain.
    theta0 : array, optional
        Start; must have full support (seed 001 Algorithm 1). Uniform by default.
    delta : float
        Stop when ``|L(theta^t) - L(theta^{t-1})| < delta`` (total log-likelihood, Eq. 2).
    max_iter : int
        Iteration cap; reaching it sets ``converged=False``.
    callback : callable, optional
        ``callback(t, theta, L)`` after each iteration (progress bars).
    keep_trace : bool
        Keep the log-likelihood of every iterate in ``EMResult.trace``.
    """
    if not blocks:
        raise LocalPrivError("no observations to estimate from")
    if delta <= 0:
        raise LocalPrivError(f"delta must be > 0, got {delta}")
    if max_iter < 1:
        raise LocalPrivError(f"max_iter must be >= 1, got {max_iter}")
    theta = (np.full(k, 1.0 / k) if theta0 is None
             else check_distribution(theta0, k=k, name="starting distribution", full_support=True).copy())
    n = float(sum(b.counts.sum() for b in blocks))
    probs = _forward_all(blocks, theta)
    _check_observable(blocks, probs)
    L = _loglik_from(blocks, probs)
    trace = [L] if keep_trace else []
    converged = False
    t = 0
    while t < max_iter:
        theta = em_step(blocks, theta, probs, n)
        t += 1
        probs = _forward_all(blocks, theta)
        L_new = _loglik_from(blocks, probs)
        if keep_trace:
            trace.append(L_new)
        if callback is not None:
            callback(t, theta, L_new)
        done = abs(L_new - L) < delta
        L = L_new
        if done:
            converged = True
            break
    return EMResult(theta, L, t, converged, trace)
