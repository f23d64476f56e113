"""Euclidean projection onto the probability simplex.

``project_simplex(v) = argmin_{p >= 0, sum p = 1} ||p - v||_2``, computed in O(k log k) by sorting
(the algorithm cited as [26] in seed 001 section 7): with ``u`` the entries of ``v`` sorted
decreasingly, ``rho = max{j : u_j + (1 - sum_{i<=j} u_i)/j > 0}``,
``tau = (sum_{i<=rho} u_i - 1) / rho`` and ``p = max(v - tau, 0)``.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from localpriv.utils.validation import LocalPrivError

__all__ = ["project_simplex", "clip_normalize"]


def project_simplex(v: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Euclidean projection of ``v`` onto the probability simplex (INV-P's post-processing)."""
    v = np.asarray(v, dtype=float)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise LocalPrivError("project_simplex needs a finite, non-empty 1-D vector")
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    j = np.arange(1, v.size + 1)
    rho = np.flatnonzero(u - css / j > 0)[-1] + 1
    tau = css[rho - 1] / rho
    return np.maximum(v - tau, 0.0)


def clip_normalize(v: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """INV-N's post-processing: negatives set to 0, then normalized to sum 1.

    If nothing is positive the result is uniform (the only choice carrying no information).
    """
    v = np.asarray(v, dtype=float)
    p = np.maximum(v, 0.0)
    s = p.sum()
    return p / s if s > 0 else np.full(v.size, 1.0 / v.size)
