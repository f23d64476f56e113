"""The log-likelihood ``L(theta)`` in the local model and its picture on the 2-simplex.

Seed 001 section 4, Eq. (2): for observations ``z^1..z^n`` of a mechanism ``M`` with
observations probability matrix ``G[x, i] = M[x, z^i]`` (Definition 1)::

    L(phi) = sum_i log sum_x phi_x G[x, i].

Grouping equal reports (``c_j`` copies of report ``z_j``) gives ``sum_j c_j log (phi @ G)_j``,
which is what :func:`localpriv.estimators.em.log_likelihood` evaluates; this module offers it for a
mechanism and raw observations, vectorized over many ``phi`` at once, plus the two 3-element
mechanisms the seed uses to show what can go wrong: Eq. (4) (Fig. 3) and Eq. (12) (Fig. 5).
"""
from __future__ import annotations

import numpy as np

from localpriv.inference.plotting import pyplot, save
from localpriv.mechanisms import Mechanism, parse
from localpriv.mechanisms.matrix import MatrixMechanism
from localpriv.utils.validation import LocalPrivError

__all__ = [
    "EQ4",
    "EQ12",
    "eq4_mechanism",
    "eq12_mechanism",
    "observation_matrix",
    "loglik",
    "simplex_grid",
    "plot_simplex_loglik",
]

#: Seed 001 Eq. (4): a symmetric 3x3 mechanism, rows = inputs 1,2,3, columns = outputs 1,2,3.
EQ4 = np.array([[0.10, 0.45, 0.45],
                [0.45, 0.10, 0.45],
                [0.45, 0.45, 0.10]])

#: Seed 001 Eq. (12): rows 1 and 3 are equal, so inputs 1 and 3 cannot be told apart.
EQ12 = np.array([[0.45, 0.10, 0.45],
                 [0.05, 0.90, 0.05],
                 [0.45, 0.10, 0.45]])


def eq4_mechanism() -> MatrixMechanism:
    """The mechanism of seed 001 Eq. (4) (identifiable: its matrix is invertible)."""
    return MatrixMechanism(rows=EQ4.tolist())


def eq12_mechanism() -> MatrixMechanism:
    """The mechanism of seed 001 Eq. (12) (not identifiable: rows 1 and 3 coincide, rank 2)."""
    return MatrixMechanism(rows=EQ12.tolist())


def _distinct(mech: Mechanism, reports):
    r = np.asarray(reports)
    if r.shape[0] == 0:
        raise LocalPrivError("no observations given")
    if r.ndim > 1:
        return np.unique(r, axis=0, return_counts=True)
    return np.unique(r, return_counts=True)


def observation_matrix(mech, reports, counts=None, domain=None):
    """The observations probability matrix of seed 001 Definition 1, grouped by distinct report.

    Parameters
    ----------
    mech : Mechanism or str
        The mechanism (or its spec).
    reports : array
        Reports as produced by ``mech.sample`` (output indices for finite mechanisms), one per
        user, or the distinct reports when ``counts`` is given.
    counts : array, optional
        How often each of ``reports`` was seen (default: ``reports`` lists every observation).

    Returns
    -------
    G : ndarray, ``k x m``
        ``G[x, j] = P(z_j | x)`` for the ``m`` distinct reports ``z_j``.
    counts : ndarray, ``m``
        Their multiplicities ``c_j``.
    """
    mech = parse(mech, domain)
    if counts is None:
        uniq, cnt = _distinct(mech, reports)
    else:
        uniq, cnt = np.asarray(reports), np.asarray(counts, dtype=float)
        if uniq.shape[0] != cnt.size:
            raise LocalPrivError(f"{uniq.shape[0]} reports but {cnt.size} counts")
    block = mech.likelihood_block(uniq, cnt)
    G = block.dense()
    return np.asarray(G, dtype=float), np.asarray(cnt, dtype=float)


def loglik(mech, reports, theta, counts=None, domain=None) -> np.ndarray | float:
    """``L(theta)`` of seed 001 Eq. (2), vectorized over many distributions.

    ``L(theta) = sum_j c_j log (theta @ G)_j`` with ``G`` from :func:`observation_matrix`.

    Parameters
    ----------
    theta : array, shape ``(k,)`` or ``(..., k)``
        One or many distributions on the input alphabet.

    Returns
    -------
    float or ndarray of shape ``theta.shape[:-1]``; ``-inf`` where an observed report has
    probability 0.
    """
    G, c = observation_matrix(mech, reports, counts, domain)
    th = np.asarray(theta, dtype=float)
    if th.shape[-1] != G.shape[0]:
        raise LocalPrivError(f"theta has {th.shape[-1]} entries but the mechanism has {G.shape[0]} inputs")
    p = th @ G
    with np.errstate(divide="ignore"):
        out = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), -np.inf) @ c
    return float(out) if np.ndim(out) == 0 else out


def simplex_grid(resolution: int = 100) -> np.ndarray:
    """All distributions ``(t1, t2, t3)`` with ``t1, t3`` on a grid of step ``1/resolution``.

    Returns an ``N x 3`` array with ``t2 = 1 - t1 - t3`` (the parametrization of Figs. 3 and 5).
    """
    i, j = np.meshgrid(np.arange(resolution + 1), np.arange(resolution + 1), indexing="ij")
    keep = i + j <= resolution
    i, j = i[keep], j[keep]
    return np.column_stack([i, resolution - i - j, j]) / resolution  # exact zeros, no rounding below 0


def plot_simplex_loglik(mech, reports, path=None, ax=None, title: str | None = None,
                        resolution: int = 120):
    """Contour plot of ``L(theta)`` over the 2-simplex (seed 001 Figs. 3 and 5).

    Axes are ``theta_1`` (horizontal) and ``theta_3`` (vertical), ``theta_2 = 1 - theta_1 -
    theta_3``, as in the seed. The grid points of maximal ``L`` (within 1e-9 relative) are
    marked, which makes a flat ridge of maximizers (a non-unique MLE) visible.
    """

    mech = parse(mech)
    if mech.k != 3:
        raise LocalPrivError(f"the simplex plot needs a 3-element alphabet, the mechanism has {mech.k}")
    pts = simplex_grid(resolution)
    L = np.asarray(loglik(mech, reports, pts))
    finite = np.isfinite(L)
    own = ax is None
    if own:
        fig, ax = pyplot().subplots(figsize=(4.2, 3.8))
    floor = np.min(L[finite]) if finite.any() else 0.0
    Lp = np.where(finite, L, floor)
    tri = ax.tricontourf(pts[:, 0], pts[:, 2], Lp, levels=25, cmap="viridis")
    ax.figure.colorbar(tri, ax=ax, label="L(theta)")
    best = L.max()
    top = np.isclose(L, best, rtol=1e-9, atol=1e-9)
    ax.scatter(pts[top, 0], pts[top, 2], s=6, c="red", label="maximizers on grid")
    ax.set_xlabel("theta_1")
    ax.set_ylabel("theta_3")
    ax.set_title(title or f"L(theta), reports {list(np.asarray(reports).tolist())}", fontsize=8)
    ax.legend(fontsize=7, loc="upper right")
    if own:
        return save(fig, path) if path is not None else fig
    return ax
