"""Distances between distributions on the same domain (plain functions, as in POT/scipy).

* :func:`emd_line` -- earth mover's distance on a line, exact:
  ``EMD(p, q) = sum_i |P_i - Q_i| * (x_{i+1} - x_i)`` with ``P, Q`` the cumulative sums
  (in domain units; seed 001 section 7 uses it on ages);
* :func:`total_variation` ``= 1/2 sum |p - q|``; :func:`l1`, :func:`l2`;
* :func:`mse` ``= mean (p - q)^2``; :func:`mae` ``= mean |p - q|``;
* :func:`kl` ``= sum p log(p/q)`` (``inf`` where ``q = 0 < p``);
  :func:`jensen_shannon` ``= 1/2 KL(p||m) + 1/2 KL(q||m)``, ``m = (p+q)/2`` (natural log).
Planar EMD (on grids, via POT) is in :mod:`localpriv.domains.grid`.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.special import rel_entr

from localpriv.utils.validation import LocalPrivError

__all__ = ["emd_line", "total_variation", "l1", "l2", "mse", "mae", "kl", "jensen_shannon", "METRICS"]


def _pair(p: npt.ArrayLike, q: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    if p.shape != q.shape:
        raise LocalPrivError(f"distributions differ in shape: {p.shape} vs {q.shape}")
    return p, q


def emd_line(p: npt.ArrayLike, q: npt.ArrayLike, positions: npt.ArrayLike | None = None) -> float:
    """Exact earth mover's distance between ``p`` and ``q`` on a line.

    ``positions`` are the sorted coordinates of the domain elements (``0, 1, ...`` by default,
    so the distance is in domain units).
    """
    p, q = _pair(p, q)
    x = np.arange(p.size, dtype=float) if positions is None else np.asarray(positions, dtype=float)
    if x.shape != p.shape or np.any(np.diff(x) < 0):
        raise LocalPrivError("positions must be sorted and match the distributions")
    cdf_gap = np.abs(np.cumsum(p - q))[:-1]
    return float(cdf_gap @ np.diff(x))


def total_variation(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    p, q = _pair(p, q)
    return 0.5 * float(np.abs(p - q).sum())


def l1(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    p, q = _pair(p, q)
    return float(np.abs(p - q).sum())


def l2(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    p, q = _pair(p, q)
    return float(np.sqrt(((p - q) ** 2).sum()))


def mse(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    p, q = _pair(p, q)
    return float(((p - q) ** 2).mean())


def mae(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    p, q = _pair(p, q)
    return float(np.abs(p - q).mean())


def kl(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    p, q = _pair(p, q)
    return float(rel_entr(p, q).sum())


def jensen_shannon(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    p, q = _pair(p, q)
    m = 0.5 * (p + q)
    return float(0.5 * rel_entr(p, m).sum() + 0.5 * rel_entr(q, m).sum())


METRICS = {"emd": emd_line, "tv": total_variation, "l1": l1, "l2": l2, "mse": mse, "mae": mae,
           "kl": kl, "js": jensen_shannon}
