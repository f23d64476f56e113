"""Many maximum-likelihood fits of one model at once: the EM engine's SQUAREM, one row per data set.

A parametric bootstrap refits the MLE to counts redrawn from it, tens of times, on the same
mechanisms (:meth:`localpriv.inference.uncertainty.Uncertainty.face_replicates`). Run one after the
other, each refit pays the engine's per-iteration overhead (a few dozen small array operations)
thousands of times when EM is slow (a few spikes under a metric mechanism at small eps). Here the
refits run as the rows of one matrix: with ``G_b`` the dense ``k x m_b`` channel of mechanism
``b`` and ``C_b`` the ``R x m_b`` counts of the ``R`` data sets, every EM evaluation of all rows
is ``P_b = Theta G_b`` and ``grad = sum_b (C_b / P_b) G_b^T`` (seed 001 Algorithm 1 / seed 003
Algorithm 1, rows at once), and every row takes the steps and decisions of
:func:`localpriv.estimators.em.em` with ``accelerate="squarem"`` (or ``"none"``) and the certified
``stop="gap"``: the same extrapolation, floor, step cap, backtracking and stopping rule per row (a
row that stops keeps its point while the others go on). Results equal one-at-a-time runs up to
floating-point rounding of the products (a dense product instead of the block's structured one).
With numba (:mod:`localpriv.estimators._kernels`, unless ``LOCALPRIV_NUMBA=0``) the rows run one
after the other in a compiled loop (``dense_rows``: the same decisions per row, without the ~20
NumPy calls per EM evaluation); the mechanisms' channels are then set side by side (one ``k x sum_b
m_b`` matrix: the same likelihood and E-step).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from localpriv.estimators import _kernels
from localpriv.estimators.em import DEFAULT_DELTA, DEFAULT_MAX_ITER, FLOOR, MAX_BACKTRACK, TINY
from localpriv.utils.validation import LocalPrivError, check_distribution

__all__ = ["RowsResult", "em_rows", "ROWS_MAX_ENTRIES"]

#: the most entries of the row matrices (``R x sum_b m_b`` counts and probabilities, ``k x sum_b m_b``
#: channel entries) one call holds (8 MiB each)
ROWS_MAX_ENTRIES = 2**20


@dataclass
class RowsResult:
    """Outcome of :func:`em_rows`: one row per data set."""

    theta: np.ndarray        # R x k estimates
    converged: np.ndarray    # bool per row: the certificate met delta
    iterations: np.ndarray   # EM-map evaluations per row


class _Rows:
    """The log-likelihood, E-step and forward products of the rows (the seen columns only)."""

    def __init__(self, mats: Sequence[np.ndarray], counts: Sequence[np.ndarray]) -> None:
        self.G: list[np.ndarray] = []
        self.C: list[np.ndarray] = []
        for G, C in zip(mats, counts):
            seen = np.flatnonzero(C.sum(axis=0) > 0)  # columns no data set reports add nothing
            self.G.append(np.ascontiguousarray(G[:, seen]))
            self.C.append(np.ascontiguousarray(C[:, seen]))
        self.n = sum(C.sum(axis=1) for C in self.C)

    def forward(self, Th: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
        return [Th @ G for G in self.G]

    def loglik(self, P: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
        """``sum_j c_j log p_j`` over the seen reports per row; ``-inf`` where a seen report has
        ``p_j <= 0`` (as :func:`localpriv.likelihood.blocks.total_loglik`)."""
        total = np.zeros(rows.size)
        for C, p in zip(self.C, P):
            c = C[rows]
            total += np.where(c > 0, c * np.log(p), 0.0).sum(axis=1)
        total[np.isnan(total)] = -np.inf
        return total

    def update(self, Th: np.ndarray, P: list[np.ndarray], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(F(Theta), gap(Theta))``: one EM update per row and the certificate of its input
        (``em._em_update`` row by row)."""
        grad = np.zeros_like(Th)
        for G, C, p in zip(self.G, self.C, P):
            c = C[rows]
            grad += np.where(c > 0, c / p, 0.0) @ G.T
        new = Th * grad
        s = new.sum(axis=1)
        n = self.n[rows]
        gap = (grad.max(axis=1) - s) / n
        new /= np.where(s > 0, s, n)[:, None]
        np.maximum(new, TINY, out=new)
        return new, gap


def _take(P: list[np.ndarray], idx: np.ndarray) -> list[np.ndarray]:
    return [p[idx] for p in P]


def em_rows(mats: Sequence[ArrayLike], counts: Sequence[ArrayLike], theta0: ArrayLike, *,
            delta: float = DEFAULT_DELTA, max_iter: int = DEFAULT_MAX_ITER,
            accelerate: str | None = "squarem") -> RowsResult:
    """Maximum-likelihood estimates of ``R`` data sets on the same mechanisms, one row each.

    Parameters
    ----------
    mats : sequence of arrays
        Per mechanism ``b``, its channel ``G_b`` as a dense ``k x m_b`` matrix
        (``G_b[x, j] = P(output j | input x)``).
    counts : sequence of arrays
        Per mechanism, the ``R x m_b`` report counts of the data sets (row ``r``: data set ``r``).
    theta0 : array
        The start of every row (full support), length ``k``.
    delta, max_iter
        The certified stopping rule's tolerance (``max_x g_x - 1 < delta``: per report within
        ``delta`` of the maximum log-likelihood, Lindsay 1983) and the cap on EM-map evaluations
        per row, as in :func:`localpriv.estimators.em.em`.
    accelerate : {"squarem", "none", None}
        The scheme of :func:`~localpriv.estimators.em.em` each row follows.

    Returns
    -------
    RowsResult
        Estimates, convergence and EM-map evaluations per row.

    Each row follows :func:`~localpriv.estimators.em.em` step for step: a SQUAREM cycle
    ``theta1 = F(theta)``, ``theta2 = F(theta1)``, ``r = theta1 - theta``, ``v = theta2 - theta1 - r``,
    ``alpha = max(-|r| / |v|, -alpha_max)``, the candidate ``theta - 2 alpha r + alpha^2 v`` floored
    at ``FLOOR * theta2``, halved towards ``-1`` (at most ``MAX_BACKTRACK`` times) until its
    log-likelihood reaches ``L(theta2)``, then one EM step from it (Varadhan and Roland, Scand. J.
    Stat. 35:335-353, 2008); a row stops when the certificate of an iterate is below ``delta`` and
    returns that iterate's EM image. Bounds: at most :data:`ROWS_MAX_ENTRIES` entries in
    ``R x sum_b m_b`` and in ``k x sum_b m_b``.
    """
    scheme = "none" if accelerate is None else str(accelerate).lower()
    if scheme not in ("squarem", "none"):
        raise LocalPrivError(f"em_rows runs the squarem or none schemes, not {accelerate!r}")
    if not delta > 0 or max_iter < 1:
        raise LocalPrivError(f"em_rows needs delta > 0 and max_iter >= 1, got {delta} and {max_iter}")
    G = [np.asarray(g, dtype=float) for g in mats]
    C = [np.atleast_2d(np.asarray(c, dtype=float)) for c in counts]
    if not G or len(G) != len(C):
        raise LocalPrivError("em_rows needs one count matrix per channel, and at least one channel")
    k = G[0].shape[0]
    R = C[0].shape[0]
    width = sum(g.shape[1] for g in G)
    if R * width > ROWS_MAX_ENTRIES or k * width > ROWS_MAX_ENTRIES:
        raise LocalPrivError(f"em_rows holds at most {ROWS_MAX_ENTRIES} entries per matrix (rows x outputs, "
                             f"inputs x outputs), got {R} x {width} and {k} x {width}")
    for g, c in zip(G, C):
        if g.ndim != 2 or g.shape[0] != k or c.shape != (R, g.shape[1]) or np.any(c < 0):
            raise LocalPrivError("em_rows: every channel must be k x m_b and its counts R x m_b, non-negative")
    start = check_distribution(theta0, k=k, name="starting distribution", full_support=True)
    model = _Rows(G, C)
    if np.any(model.n <= 0):
        raise LocalPrivError("em_rows: every data set needs at least one report")
    if _kernels.enabled():  # each row its own run, compiled (the channels side by side: one G, one C)
        G_all = np.ascontiguousarray(np.hstack(model.G))
        C_all = np.ascontiguousarray(np.hstack(model.C))
        th, conv, its = _kernels.kernels()["dense_rows"](
            G_all, C_all, np.ascontiguousarray(start, dtype=float), float(delta), int(max_iter),
            scheme == "squarem", TINY, FLOOR, MAX_BACKTRACK)
        return RowsResult(th, np.asarray(conv, dtype=bool), np.asarray(its))
    Th = np.tile(start, (R, 1))
    allrows = np.arange(R)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        P = model.forward(Th, allrows)
        L = model.loglik(P, allrows)
        t = np.zeros(R, dtype=np.int64)
        amax = np.full(R, 4.0)
        done = np.zeros(R, dtype=bool)
        if scheme == "squarem":
            _squarem_rows(model, Th, P, L, t, amax, done, delta, max_iter)
        # plain EM steps until one meets the rule (rows the accelerated phase left, or every row)
        while True:  # a bounded number of EM steps for all rows (never a loop over reports)
            A = np.flatnonzero(~done & (t < max_iter))
            if A.size == 0:
                break
            new, gap = model.update(Th[A], _take(P, A), A)
            t[A] += 1
            Th[A] = new
            pn = model.forward(new, A)
            for p, q in zip(P, pn):
                p[A] = q
            done[A[gap < delta]] = True
    return RowsResult(Th, done, t)


def _squarem_rows(model: _Rows, Th: np.ndarray, P: list[np.ndarray], L: np.ndarray, t: np.ndarray,
                  amax: np.ndarray, done: np.ndarray, delta: float, max_iter: int) -> None:
    """The accelerated phase of ``em._squarem`` (no Newton finish, no penalty, certified rule) for
    all rows, in place: rows that meet the rule are marked ``done``; the others stop when a cycle
    no longer fits in ``max_iter`` evaluations."""
    while True:  # one SQUAREM cycle of every active row per pass (never a loop over reports)
        A = np.flatnonzero(~done & (t + 2 <= max_iter))
        if A.size == 0:
            return
        th = Th[A]
        th1, gap1 = model.update(th, _take(P, A), A)
        p1 = model.forward(th1, A)
        t[A] += 1
        fin = gap1 < delta  # theta is certified, and so is its EM image th1
        if fin.any():
            Th[A[fin]] = th1[fin]
            done[A[fin]] = True
            go = ~fin
            A, th, th1, p1 = A[go], th[go], th1[go], _take(p1, np.flatnonzero(go))
            if A.size == 0:
                continue
        th2, _ = model.update(th1, p1, A)
        t[A] += 1
        p2 = model.forward(th2, A)
        L2 = model.loglik(p2, A)
        r = th1 - th
        v = th2 - th1 - r
        nr, nv = np.sqrt(np.einsum("ij,ij->i", r, r)), np.sqrt(np.einsum("ij,ij->i", v, v))
        new, pnew, Lnew = th2, p2, L2.copy()
        ext = (nv > 0) & (nr > 0) & (t[A] < max_iter)
        alpha = np.where(ext, np.maximum(-nr / np.where(nv > 0, nv, 1.0), -amax[A]), 0.0)
        grow = ext & (alpha <= -amax[A])
        amax[A[grow]] *= 4.0  # the step reached its cap: allow longer steps
        chosen = np.zeros(A.size, dtype=bool)
        trial_of = np.zeros(A.size, dtype=np.int64)
        cand = np.empty_like(th)
        pc: list[np.ndarray] = [np.empty_like(p) for p in p2]
        trying = ext.copy()
        for trial in range(MAX_BACKTRACK):  # backtracking: alpha halfway towards -1 until L(cand) >= L(theta2)
            trying &= alpha < -1.0
            S = np.flatnonzero(trying)
            if S.size == 0:
                break
            a = alpha[S][:, None]
            raw = th[S] - 2.0 * a * r[S] + a * a * v[S]
            c = np.maximum(raw, FLOOR * th2[S])
            c /= c.sum(axis=1)[:, None]
            pcs = model.forward(c, A[S])
            Lc = model.loglik(pcs, A[S])
            ok = Lc >= L2[S]  # -inf (an impossible report) never passes
            hit = S[ok]
            chosen[hit] = True
            trial_of[hit] = trial
            trying[hit] = False
            cand[hit] = c[ok]
            for dst, src in zip(pc, pcs):
                dst[hit] = src[ok]
            miss = S[~ok]
            alpha[miss] = (alpha[miss] - 1.0) / 2.0
            alpha[miss] = np.where(alpha[miss] > -1.0 - 1e-3, -1.0, alpha[miss])
        accepted = np.zeros(A.size, dtype=bool)
        H = np.flatnonzero(chosen)
        if H.size:
            th3, _ = model.update(cand[H], _take(pc, H), A[H])
            p3 = model.forward(th3, A[H])
            L3 = model.loglik(p3, A[H])
            t[A[H]] += 1
            acc = L2[H] <= L3  # always true for EM from cand (L(cand) >= L(theta2)); kept as a guard
            J = H[acc]
            new[J] = th3[acc]
            for dst, src in zip(pnew, p3):
                dst[J] = src[acc]
            Lnew[J] = L3[acc]
            accepted[J] = True
            shorter = J[trial_of[J] > 0]  # a shorter step was needed: cap the next ones there
            amax[A[shorter]] = np.maximum(4.0, -alpha[shorter])
        rej = ext & ~accepted
        amax[A[rej]] = np.maximum(4.0, amax[A[rej]] / 4.0)
        Th[A] = new
        for p, q in zip(P, pnew):
            p[A] = q
        L[A] = Lnew
