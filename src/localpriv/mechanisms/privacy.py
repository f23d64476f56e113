"""Privacy guarantees computed from a channel, never taken from a parameter.

A mechanism ``M`` (rows: inputs ``x``, columns: outputs ``z``, ``M[x, z] = P(z | x)``) satisfies

* eps-local differential privacy with ``eps = max_z max_{x,x'} log(M[x,z] / M[x',z])``
  (seed 001 section 4.2; a column holding a zero beside a non-zero gives ``inf``);
* eps_g-geo-indistinguishability with
  ``eps_g = max_z max_{x != x'} log(M[x,z] / M[x',z]) / d(x, x')`` (seed 001 section 4.3,
  seed 003 section 2.2).

Columns that are zero for every input (outputs that never occur) carry no information and are
ignored.

Structured mechanisms whose channel is too large to build compute the same maximum from the
channel's exact structure in log space (closed forms in each mechanism module, e.g.
``log(a/b)`` for the two values of the k-RR channel); :func:`ldp_epsilon_from_logs` is the
dense formula on a (small) matrix of log-probabilities, which those reductions use.

Levels that protect no one
--------------------------
Every computed level goes through :func:`checked_epsilon`, which issues a
:class:`~localpriv.utils.validation.PrivacyWarning` when the level is ``inf`` (some report rules an
input out) or when ``e^eps`` overflows float64 (``eps > log(max float64) = 709.78``): the bound
``P(z|x) <= e^eps P(z|x')`` then bounds nothing representable and the mechanism no longer
protects anyone. The level itself is returned unchanged (finite levels are exact).
"""
from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike

from localpriv.utils.validation import LocalPrivError, PrivacyWarning

__all__ = ["ldp_epsilon", "geo_epsilon", "ldp_epsilon_from_logs", "checked_epsilon", "LOG_FLOAT_MAX"]

#: ``log`` of the largest float64: beyond it ``e^eps`` overflows.
LOG_FLOAT_MAX = float(np.log(np.finfo(float).max))


def checked_epsilon(eps: float, what: str | None = None, kind: str = "epsilon_ldp") -> float:
    """``eps`` as a float, with a :class:`PrivacyWarning` when it protects no one.

    ``inf``: some report is possible under one input and impossible under another (a zero beside
    a non-zero in a column). ``eps > 709.78``: ``e^eps`` overflows float64. ``what`` names the
    mechanism in the warning.
    """
    eps = float(eps)
    who = f"{what}: " if what else ""
    if np.isinf(eps):
        warnings.warn(f"{who}{kind} is inf (some report is possible under one input and impossible under "
                      "another): the mechanism no longer protects anyone", PrivacyWarning, stacklevel=3)
    elif eps > LOG_FLOAT_MAX:
        warnings.warn(f"{who}{kind} = {eps:.6g} exceeds {LOG_FLOAT_MAX:.2f}, where e^eps overflows float64: "
                      "the guarantee bounds nothing and the mechanism no longer protects anyone",
                      PrivacyWarning, stacklevel=3)
    return eps


def _log_columns(matrix: ArrayLike) -> np.ndarray:
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2:
        raise LocalPrivError(f"a channel must be 2-D, got shape {m.shape}")
    live = m.max(axis=0) > 0
    with np.errstate(divide="ignore"):
        return np.log(m[:, live])


def ldp_epsilon_from_logs(logm: ArrayLike) -> float:
    """``max_z (max_x L[x,z] - min_x L[x,z])`` for log-probabilities ``L`` (``-inf`` = probability 0).

    Columns that are ``-inf`` throughout are ignored; a ``-inf`` beside a finite entry gives
    ``inf``. No warning (callers pass the result through :func:`checked_epsilon`).
    """
    L = np.asarray(logm, dtype=float)
    if L.ndim != 2:
        raise LocalPrivError(f"log-probabilities must be 2-D, got shape {L.shape}")
    if np.isnan(L).any():
        raise LocalPrivError("log-probabilities contain NaN")
    L = L[:, L.max(axis=0) > -np.inf]
    if L.shape[1] == 0:
        raise LocalPrivError("the channel has no output with positive probability")
    return float((L.max(axis=0) - L.min(axis=0)).max())


def ldp_epsilon(matrix: ArrayLike, what: str | None = None) -> float:
    """The smallest eps for which the channel is eps-LDP: ``max_z log(max_x M[x,z] / min_x M[x,z])``.

    A :class:`PrivacyWarning` accompanies a level that protects no one (:func:`checked_epsilon`).
    """
    logm = _log_columns(matrix)
    if logm.shape[1] == 0:
        raise LocalPrivError("the channel has no output with positive probability")
    spread = logm.max(axis=0) - logm.min(axis=0)
    return checked_epsilon(float(spread.max()), what)


def geo_epsilon(matrix: ArrayLike, distance: ArrayLike, what: str | None = None) -> float:
    """The smallest eps_g with ``M[x,z] <= exp(eps_g d(x,x')) M[x',z]`` for all x, x', z.

    ``distance`` is the ``k x k`` matrix of ``d(x, x')``. Pairs at distance 0 with different
    rows would make the level infinite; they are reported as ``inf`` (with a
    :class:`PrivacyWarning`). Memory is O(k^2) per output column block; columns are processed in
    chunks.
    """
    logm = _log_columns(matrix)
    d = np.asarray(distance, dtype=float)
    k = logm.shape[0]
    if d.shape != (k, k):
        raise LocalPrivError(f"distance matrix must be {k}x{k}, got {d.shape}")
    off = ~np.eye(k, dtype=bool)
    best = 0.0
    chunk = max(1, int(4e6 // max(k * k, 1)))
    for start in range(0, logm.shape[1], chunk):
        block = logm[:, start:start + chunk]  # k x c
        with np.errstate(invalid="ignore"):
            diff = block[:, None, :] - block[None, :, :]  # k x k x c: log M[x,z] - log M[x',z]
        diff[np.isnan(diff)] = -np.inf  # (-inf) - (-inf): both zero, no leak
        worst = diff.max(axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(off & (worst > 0), worst / d, 0.0)
        best = max(best, float(np.nanmax(ratio)))
    return checked_epsilon(best, what, kind="epsilon_geo")
