"""Shokri et al.'s optimal location-privacy mechanism (seed 003 section 8.2.4).

For a prior (the user's profile) ``pi`` on the alphabet ``X``, a loss ``l(x, z)`` (the user's loss
of quality when ``z`` is reported for ``x``, and also the adversary's loss when he guesses ``z``)
and a quality bound ``Q``, the mechanism ``A`` (``k x k``, reports in ``X``) solves::

    maximize    sum_y min_z sum_x pi_x A[x, y] l(x, z)          (adversary's expected loss)
    subject to  sum_x pi_x sum_z A[x, z] l(x, z) <= Q            (user's expected quality loss)
                sum_z A[x, z] = 1,  A[x, z] >= 0.

The inner minimum is linearized with one auxiliary variable ``u_y`` per report::

    maximize sum_y u_y   s.t.  u_y <= sum_x pi_x l(x, z) A[x, y]   for all y, z,

a linear program with ``k^2 + k`` variables, ``k^2 + 1`` inequality rows (``k^3`` non-zeros)
and ``k`` equality rows, solved with HiGHS (:func:`scipy.optimize.linprog`). The solution is
checked: solver success, non-negativity and row sums within tolerance, quality constraint met.
It is then clipped at 0 and rows renormalized (a change of at most the solver's tolerance).

The privacy of the result is *computed from its channel* like any mechanism's
(:meth:`Mechanism.epsilon_ldp`, :meth:`Mechanism.epsilon_geo`); the LP maximizes an
adversarial error, not an (eps)-guarantee, and its optimal channels often contain zeros, i.e.
``epsilon_ldp() == inf``.

Spec: ``shokri(q=4.0)`` on a metric domain (the loss is the domain's distance and the prior
uniform unless given: ``shokri(q=4.0,prior=[...])``; ``loss=squared`` uses the squared distance).
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse

from localpriv.likelihood.blocks import check_dense_size
from localpriv.mechanisms.base import Mechanism, register
from localpriv.utils.validation import LocalPrivError, check_distribution

if TYPE_CHECKING:
    from localpriv.domains import Domain


def linprog(*args: Any, **kwargs: Any) -> Any:
    """``scipy.optimize.linprog``, imported on first use (keeps ``import localpriv`` quick)."""
    from scipy.optimize import linprog as _f
    return _f(*args, **kwargs)


__all__ = ["ShokriMechanism", "shokri_lp", "adversary_loss", "quality_loss"]


def quality_loss(A: ArrayLike, prior: ArrayLike, loss: ArrayLike) -> float:
    """The user's expected quality loss ``sum_x pi_x sum_z A[x,z] l(x,z)``."""
    A = np.asarray(A, dtype=float)
    return float(np.asarray(prior, dtype=float) @ (A * np.asarray(loss, dtype=float)).sum(axis=1))


def adversary_loss(A: ArrayLike, prior: ArrayLike, loss: ArrayLike) -> float:
    """The adversary's expected loss under his best guess: ``sum_y min_z sum_x pi_x A[x,y] l(x,z)``.

    This is the objective of Shokri et al.'s LP (seed 003 section 8.2.4); the best guess for a
    report ``y`` is ``argmin_z sum_x pi_x A[x,y] l(x,z)``.
    """
    A = np.asarray(A, dtype=float)
    joint = np.asarray(prior, dtype=float)[:, None] * A  # pi_x A[x, y]
    cost = joint.T @ np.asarray(loss, dtype=float)       # [y, z] = sum_x pi_x A[x,y] l(x,z)
    return float(cost.min(axis=1).sum())


def shokri_lp(prior: ArrayLike, loss: ArrayLike, Q: float, *, tol: float = 1e-7, method: str = "highs") -> np.ndarray:
    """Solve Shokri et al.'s LP (seed 003 section 8.2.4) with HiGHS; return the channel ``A``.

    Parameters
    ----------
    prior : array (k,)
        The user's profile ``pi`` (a distribution; known to the adversary).
    loss : array (k, k)
        ``l(x, z) >= 0``: quality loss of reporting ``z`` for ``x`` and the adversary's loss of
        guessing ``z`` when the truth is ``x``.
    Q : float
        Bound on the expected quality loss ``sum_x pi_x sum_z A[x,z] l(x,z) <= Q``.
    tol : float
        Tolerance of the feasibility checks on the solution.
    method : str
        ``linprog``'s HiGHS method. The optimum is usually not unique and the method decides which
        optimal channel is returned: on seed 003 Table VIII (uniform prior, loss = distance) the
        default ``"highs"`` (dual simplex here) returns low-rank vertices (rank 16-43 of 100 on the
        line; their average is singular, hence [INV]M = NA as in the seed) while ``"highs-ipm"``
        (interior point + crossover, ~1.7x faster: 68 s vs 114 s CPU for the 20 LPs) returns
        channels of rank 52-90 whose average is invertible (condition number 88). Same adversary
        loss. The mechanism spec uses the default.

    Returns
    -------
    ndarray (k, k)
        A row-stochastic matrix meeting the quality bound and maximizing the adversary's loss.

    Raises
    ------
    LocalPrivError
        Invalid inputs, or the solver failed / returned an infeasible or non-stochastic solution.
    """
    pi = check_distribution(prior, name="prior")
    k = pi.size
    # the LP's inequality rows hold up to k^3 coefficients (built densely as index arrays)
    check_dense_size(k * k, k, "Shokri LP constraint matrix")
    L = np.asarray(loss, dtype=float)
    if L.shape != (k, k) or not np.all(np.isfinite(L)) or np.any(L < 0):
        raise LocalPrivError(f"loss must be a finite non-negative {k}x{k} matrix")
    if not np.isfinite(Q) or Q < 0:
        raise LocalPrivError(f"quality bound Q must be finite and >= 0, got {Q}")
    if quality_loss(np.eye(k), pi, L) - tol > Q:
        raise LocalPrivError(f"Q={Q} is below the loss of reporting the truth: the LP is infeasible")
    nA = k * k
    # rows (y, z): u_y - sum_x pi_x l(x, z) A[x, y] <= 0
    y, z, x = np.meshgrid(np.arange(k), np.arange(k), np.arange(k), indexing="ij")
    rows_a = (y * k + z).ravel()
    cols_a = (x * k + y).ravel()
    vals_a = -(pi[x] * L[x, z]).ravel()
    keep = vals_a != 0
    rows_u = np.arange(k * k)
    cols_u = nA + np.repeat(np.arange(k), k)
    A_ub_main = sparse.csr_matrix(
        (np.r_[vals_a[keep], np.ones(k * k)], (np.r_[rows_a[keep], rows_u], np.r_[cols_a[keep], cols_u])),
        shape=(k * k, nA + k))
    quality_row = sparse.csr_matrix(np.r_[(pi[:, None] * L).ravel(), np.zeros(k)][None, :])
    A_ub = sparse.vstack([A_ub_main, quality_row], format="csr")
    b_ub = np.r_[np.zeros(k * k), Q]
    A_eq = sparse.csr_matrix((np.ones(nA), (np.repeat(np.arange(k), k), np.arange(nA))), shape=(k, nA + k))
    b_eq = np.ones(k)
    c = np.r_[np.zeros(nA), -np.ones(k)]
    bounds = [(0, None)] * nA + [(None, None)] * k
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method=method)
    if res.status != 0 or res.x is None:
        raise LocalPrivError(f"Shokri LP: HiGHS failed ({res.message})")
    A = res.x[:nA].reshape(k, k)
    if A.min() < -tol or np.abs(A.sum(axis=1) - 1).max() > tol * k:
        raise LocalPrivError("Shokri LP: the solver's solution is not stochastic within tolerance")
    A = np.maximum(A, 0.0)
    A /= A.sum(axis=1, keepdims=True)
    if quality_loss(A, pi, L) > Q + max(tol, 1e-9 * Q) * 10:
        raise LocalPrivError("Shokri LP: the solution violates the quality bound")
    return A


@lru_cache(maxsize=64)
def _cached_lp(prior_key: tuple[float, ...], loss_bytes: bytes, k: int, Q: float) -> np.ndarray:
    A = shokri_lp(np.array(prior_key), np.frombuffer(loss_bytes).reshape(k, k), Q)
    A.setflags(write=False)
    return A


@register
class ShokriMechanism(Mechanism):
    """Shokri et al.'s optimal mechanism on a metric domain (seed 003 section 8.2.4).

    Parameters
    ----------
    q : float
        Quality bound ``Q`` (in the domain's distance unit: years, km, ...).
    domain : Domain
        A metric domain (``IntegerDomain``, ``GridDomain``); its distance is the loss.
    prior : "uniform" or sequence of float
        The user's profile ``pi``.
    loss : "distance" or "squared"
        ``l(x, z) = d(x, z)`` (the seed's choice) or ``d(x, z)^2``.
    """

    spec_name = "shokri"
    examples = (dict(spec="shokri(q=0.8)", domain="0..3"),)

    def __init__(self, q: float, domain: Domain | None = None, prior: str | Sequence[float] = "uniform",
                 loss: str = "distance"):
        if domain is None or not getattr(domain, "is_metric", False):
            raise LocalPrivError("shokri needs a metric domain (e.g. --domain 0..99 or a grid): "
                                 "the loss is its distance")
        if loss not in ("distance", "squared"):
            raise LocalPrivError(f"shokri: loss must be 'distance' or 'squared', got {loss!r}")
        self.domain = domain
        self.k = domain.size
        try:
            self.q = float(q)
        except (TypeError, ValueError):
            raise LocalPrivError(f"shokri: q must be a number, got {q!r}") from None
        self.loss = loss
        self.prior = prior if isinstance(prior, str) else [float(p) for p in prior]
        if isinstance(self.prior, str):
            if self.prior != "uniform":
                raise LocalPrivError(f"shokri: prior must be 'uniform' or a list of {self.k} probabilities")
            pi = np.full(self.k, 1.0 / self.k)
        else:
            pi = check_distribution(self.prior, k=self.k, name="shokri prior")
        d = domain.distance_matrix()
        L = d if loss == "distance" else d ** 2
        self.pi = pi
        self.loss_matrix = L
        self._A = _cached_lp(tuple(pi.tolist()), np.ascontiguousarray(L, dtype=float).tobytes(), self.k, self.q)

    def params(self) -> dict[str, Any]:
        return {"q": self.q, "prior": None if self.prior == "uniform" else self.prior,
                "loss": None if self.loss == "distance" else self.loss}

    @property
    def n_outputs(self) -> int:
        return self.k

    def channel(self) -> np.ndarray:
        return self._A

    def quality_loss(self) -> float:
        """Expected quality loss of the solution (at most ``q``)."""
        return quality_loss(self._A, self.pi, self.loss_matrix)

    def adversary_loss(self) -> float:
        """Expected loss of the optimal adversary (the LP's optimum)."""
        return adversary_loss(self._A, self.pi, self.loss_matrix)
