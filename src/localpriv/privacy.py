"""Privacy guarantees computed from a channel, never taken from a parameter.

A mechanism ``M`` (rows: inputs ``x``, columns: outputs ``z``, ``M[x, z] = P(z | x)``) satisfies

* eps-local differential privacy with ``eps = max_z max_{x,x'} log(M[x,z] / M[x',z])``
  (seed 001 section 4.2; a column holding a zero beside a non-zero gives ``inf``);
* eps_g-geo-indistinguishability with
  ``eps_g = max_z max_{x != x'} log(M[x,z] / M[x',z]) / d(x, x')`` (seed 001 section 4.3,
  seed 003 section 2.2).

Columns that are zero for every input (outputs that never occur) carry no information and are
ignored.
"""
from __future__ import annotations

import numpy as np

from ._validation import LocalPrivError

__all__ = ["ldp_epsilon", "geo_epsilon"]


def _log_columns(matrix) -> np.ndarray:
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2:
        raise LocalPrivError(f"a channel must be 2-D, got shape {m.shape}")
    live = m.max(axis=0) > 0
    with np.errstate(divide="ignore"):
        return np.log(m[:, live])


def ldp_epsilon(matrix) -> float:
    """The smallest eps for which the channel is eps-LDP: ``max_z log(max_x M[x,z] / min_x M[x,z])``."""
    logm = _log_columns(matrix)
    if logm.shape[1] == 0:
        raise LocalPrivError("the channel has no output with positive probability")
    spread = logm.max(axis=0) - logm.min(axis=0)
    return float(spread.max())


def geo_epsilon(matrix, distance) -> float:
    """The smallest eps_g with ``M[x,z] <= exp(eps_g d(x,x')) M[x',z]`` for all x, x', z.

    ``distance`` is the ``k x k`` matrix of ``d(x, x')``. Pairs at distance 0 with different
    rows would make the level infinite; they are reported as ``inf``.
    Memory is O(k^2) per output column block; columns are processed in chunks.
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
    return best
