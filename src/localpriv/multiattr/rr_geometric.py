"""Randomized response + truncated alpha-geometric mechanism (thesis, seed 004 section 5.4).

* :func:`truncated_geometric` -- Ghosh et al.'s truncated alpha-geometric channel on
  ``{0..n}`` (Eq. 5.7): ``C[i, r] = (1-a)/(1+a) a^|r-i|`` inside, ``a^i/(1+a)`` at ``r = 0`` and
  ``a^(n-i)/(1+a)`` at ``r = n``. Table 5.6b (``a = 1/2``, outputs 0..5) and Table 5.8
  (``a = 1/2``, 4 cells) are exactly this matrix.
* :func:`optimal_mechanism` -- the user-optimal alpha-DP mechanism: the linear program
  (5.10) ``min sum_i prior_i sum_r C[i,r] loss(i,r)`` subject to
  ``a C[i+1,r] <= C[i,r] <= C[i+1,r]/a`` for *every* output ``r`` (the thesis's ``r != n`` would
  leave the last column unconstrained), rows summing to 1, solved with HiGHS.
* :func:`hybrid_channel` -- the effective channel ``C' = p I + (1-p) C`` (Table 5.10): the true
  cell with probability ``p``, otherwise a fake drawn from row ``i`` of ``C`` (Eq. 5.8).
* :func:`hybrid_estimate` -- reconstruction by matrix inversion (Eq. 5.14) and IBU with the
  correct observation model ``P(report r) = sum_i x_i C'[i, r]`` (column ``r``).
  Eq. 5.12 as printed uses row ``r`` of ``C`` (``o_i = p x_i + (1-p) sum_r x_r C[i, r]``); that
  is the transpose and is wrong whenever ``C`` is not symmetric (the truncated geometric is not:
  its corner cells differ).
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog

from localpriv.estimators.em import em
from localpriv.estimators.inv import inverse_vector
from localpriv.mechanisms.matrix import MatrixMechanism
from localpriv.utils.validation import LocalPrivError, check_int

__all__ = ["truncated_geometric", "optimal_mechanism", "hybrid_channel", "hybrid_estimate",
           "hybrid_epsilon"]


def truncated_geometric(n_values: int, alpha: float) -> np.ndarray:
    """The truncated alpha-geometric channel on ``n_values`` values ``0..n_values-1`` (Eq. 5.7).

    Rows are the true value ``i``, columns the output ``r``. Its LDP level between adjacent
    values is ``ln(1/alpha)``; between the extreme values it is ``(n_values-1) ln(1/alpha)``.
    """
    m = check_int(n_values, "n_values", minimum=1)
    if not 0 < alpha < 1:
        raise LocalPrivError(f"alpha must be in (0, 1), got {alpha}")
    i = np.arange(m)[:, None]
    r = np.arange(m)[None, :]
    C = (1 - alpha) / (1 + alpha) * alpha ** np.abs(r - i)
    C[:, 0] = alpha ** np.arange(m) / (1 + alpha)
    C[:, m - 1] = alpha ** (m - 1 - np.arange(m)) / (1 + alpha)
    if m == 1:
        C[:] = 1.0
    return C


def optimal_mechanism(prior: npt.ArrayLike, alpha: float, loss=None) -> np.ndarray:
    """The alpha-DP mechanism minimizing the expected loss of a user with ``prior`` (LP 5.10).

    ``loss(i, r)`` (vectorized) defaults to ``|i - r|``. Solved with ``linprog(method="highs")``.
    """
    prior = np.asarray(prior, dtype=float).ravel()
    m = prior.size
    if not 0 < alpha < 1:
        raise LocalPrivError(f"alpha must be in (0, 1), got {alpha}")
    if m < 2 or np.any(prior < 0):
        raise LocalPrivError("the prior must have >= 2 non-negative entries")
    I, R = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    L = np.abs(I - R).astype(float) if loss is None else np.asarray(loss(I, R), dtype=float)
    c = (prior[:, None] * L).ravel()
    idx = np.arange(m * m).reshape(m, m)
    A, b = [], []
    for i in range(m - 1):
        for r in range(m):
            row = np.zeros(m * m)
            row[idx[i + 1, r]] = alpha
            row[idx[i, r]] = -1
            A.append(row)
            b.append(0.0)  # alpha C[i+1,r] <= C[i,r]
            row = np.zeros(m * m)
            row[idx[i, r]] = alpha
            row[idx[i + 1, r]] = -1
            A.append(row)
            b.append(0.0)  # alpha C[i,r] <= C[i+1,r]
    Aeq = np.zeros((m, m * m))
    for i in range(m):
        Aeq[i, idx[i]] = 1
    res = linprog(c, A_ub=np.asarray(A), b_ub=b, A_eq=Aeq, b_eq=np.ones(m), bounds=(0, None),
                  method="highs")
    if res.status != 0:
        raise LocalPrivError(f"the linear program failed: {res.message}")
    C = np.clip(res.x.reshape(m, m), 0, None)
    return C / C.sum(axis=1, keepdims=True)


def hybrid_channel(C: npt.ArrayLike, p: float) -> np.ndarray:
    """``C' = p I + (1-p) C``: true cell w.p. ``p``, else a fake from row ``i`` of ``C``."""
    C = np.asarray(C, dtype=float)
    if not 0 <= p <= 1:
        raise LocalPrivError(f"p must be in [0, 1], got {p}")
    return p * np.eye(C.shape[0]) + (1 - p) * C


def hybrid_epsilon(C: npt.ArrayLike, p: float) -> float:
    """LDP level of the hybrid, computed from its channel."""
    return MatrixMechanism(rows=hybrid_channel(C, p)).epsilon_ldp()


def hybrid_estimate(counts: npt.ArrayLike, C: npt.ArrayLike, p: float, method: str = "ibu", delta: float = 1e-8,
                    max_iter: int = 20000, accelerate: str = "none", stop: str = "loglik") -> np.ndarray:
    """Reconstruct the cell distribution from report counts of the hybrid.

    ``method="inv"``: ``x = o C'^{-1}`` (Eq. 5.14; may leave the simplex);
    ``method="ibu"``: maximum likelihood by the EM engine with ``G[x, r] = C'[x, r]``: plain EM
    stopped on ``|L(t) - L(t-1)| < delta`` by default (pinned: the thesis reproductions' settings,
    not the engine's certified defaults; pass ``accelerate="newton", stop="gap"`` for those).
    """
    counts = np.asarray(counts, dtype=float).ravel()
    mech = MatrixMechanism(rows=hybrid_channel(C, p))
    if method == "inv":
        return inverse_vector(mech, counts)
    if method == "ibu":
        live = np.flatnonzero(counts)
        return em([mech.likelihood_block(live, counts[live])], mech.k, delta=delta, max_iter=max_iter,
                  accelerate=accelerate, stop=stop).theta
    raise LocalPrivError(f"method must be 'inv' or 'ibu', got {method!r}")
