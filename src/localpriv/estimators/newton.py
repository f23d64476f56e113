"""Active-set Newton finish for the EM engine: the exact maximum on its face, certified by KKT.

EM (IBU, GIBU) approaches coordinates of the maximum-likelihood estimate that lie on the boundary
of the simplex only linearly, with a rate equal to their EM factor ``f_x = g_x / n`` (below), and
with many reports those factors sit just below 1 (0.994-0.99999 for OUE support counts at
``k = 2000``): thousands of EM evaluations for the last digits. This module finishes the job with
second-order steps on the coordinates that stay positive and certifies the result.

Every likelihood block that is linear in ``theta`` (dense blocks, k-RR, the support-count and
support blocks of seed 002's protocols) has a concave log-likelihood (seed 001 Eq. 2)::

    L(theta) = sum_j c_j log p_j(theta),   p(theta) = theta @ G,   n = sum_j c_j,

with gradient ``g = G (c / p)`` and Hessian ``H = -G diag(c / p^2) G^T``. Because ``p`` is
linear, ``L(s theta) = L(theta) + n log s``, so ``theta . g = n`` and the multiplier of the
simplex constraint at the maximum is ``n``. The Karush-Kuhn-Tucker conditions on the simplex are
then, with ``f = g / n``::

    f_x = 1  where theta_x > 0,        f_x <= 1  where theta_x = 0,

sufficient for a global maximum since ``L`` is concave. (``f_x`` is exactly the factor by which
one EM step multiplies ``theta_x``; the conditions say the point is an EM fixed point that no
coordinate at zero would leave.)

The method (an active-set / projected Newton method in the spirit of Bertsekas, 1982, SIAM J.
Control Optim. 20:221-246):

0. coordinates of the EM iterate below ``DROP_START / k`` start at zero (renormalized);
1. Newton direction on the current face (the positive coordinates, plus any zero just found to
   violate the conditions): ``-H_FF s = g_F - mu 1`` with ``mu`` chosen so that ``sum(s) = 0``,
   from two conjugate-gradient solves (``-H u = g``, ``-H v = 1``; ``s = u - (sum u / sum v) v``)
   preconditioned with the diagonal of ``-H`` (the blocks' :meth:`hessian_diagonal`, or the
   squares of a small block's dense ``G``: :func:`supports_newton`); each
   product ``-H v = G diag(c / p^2) (v @ G)`` costs one forward and one backward product;
2. step ``max(theta + t s, 0)``, renormalized, with ``t`` halved until ``L`` increases enough
   (Armijo); coordinates the step pushes out of the simplex are clipped to zero, which is how the
   face is found;
3. once the Newton decrement ``g . s`` is at the resolution of ``L`` and a full step was taken,
   the conditions above are checked: zeros with ``f_x > 1 + kkt_tol`` are freed for the next
   step; the point is certified when none is left and ``|f_x - 1| <= kkt_tol`` on the support.

The result is returned only if it is certified (KKT within ``kkt_tol``), its log-likelihood is at
least that of the starting point, and the cost stayed within a budget of products; otherwise
``None`` and the engine simply goes on with EM. The engine then applies plain EM steps to the
certified point until the stopping rule the user asked for holds (with the engine's certified
``stop="gap"`` rule, the first step: ``max_x f_x - 1 <= kkt_tol < delta`` at the certified point),
so every returned estimate is still an EM iterate (a distribution) that meets that rule.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from localpriv.likelihood.blocks import Evaluation, LikelihoodBlock, total_loglik

__all__ = ["newton_finish", "NewtonFinish", "supports_newton", "DENSE_DIAGONAL_MAX"]

#: a certified point has ``f_x <= 1 + KKT_TOL`` at every zero coordinate
KKT_TOL = 1e-9
#: at most this many products per attempt (one product = ``forward`` or ``backward`` of every
#: block, about half an EM evaluation)
MAX_PRODUCTS = 4000
#: an attempt ends after this many Newton steps in a row that raise ``L`` by no more than its
#: resolution (uncertified; its best point is still offered to the engine, :class:`NewtonFinish`)
STALL_STEPS = 2
#: ... and after this many steps an attempt still below its starting point ends (uncertified)
BELOW_START_STEPS = 4
#: conjugate gradients that end their iterations with a residual at most this fraction of the
#: first return their iterate (an inexact Newton direction; Armijo keeps the step ascending)
PCG_ACCEPT = 1e-6
#: Armijo sufficient-increase constant
ARMIJO = 1e-4
#: coordinates below DROP_START / k start the Newton finish at zero
DROP_START = 1e-9
#: where conjugate gradients fail (ill-conditioned faces), problems with at most this many inputs
#: (and dense likelihoods of at most DENSE_DIAGONAL_MAX entries) solve the Newton system directly
DENSE_SOLVE_MAX_K = 1000
#: blocks without :meth:`hessian_diagonal` take part in the Newton finish when their dense ``G``
#: has at most this many entries (32 MiB; the squares are kept for the run)
DENSE_DIAGONAL_MAX = 1 << 22


@dataclass
class NewtonFinish:
    """Outcome of one attempt: ``theta`` is ``None`` unless the point was certified."""

    theta: np.ndarray | None
    loglik: float
    products: int
    newton_steps: int
    active: int
    #: the point of highest log-likelihood the attempt reached (certified or not) and that value;
    #: ``None`` when no step rose above the starting point's
    best: np.ndarray | None = None
    best_loglik: float = -math.inf

    @property
    def certified(self) -> bool:
        return self.theta is not None


def supports_newton(blocks: Sequence[LikelihoodBlock]) -> bool:
    """True if every block offers :meth:`hessian_diagonal` or is small enough to tabulate it.

    Every likelihood block is linear in ``theta`` (``forward(theta) = theta @ G``); the Newton
    finish needs, besides the products, the diagonal ``sum_j w_j G[x, j]^2`` of ``-H`` for its
    preconditioner. Blocks without a closed form for it (the exponential-kernel blocks of the
    geometric, Laplace and exponential mechanisms) get it from their dense ``G`` (:meth:`dense`,
    computed once, at the first attempt) when ``k m`` is at most :data:`DENSE_DIAGONAL_MAX` entries.
    The planar FFT blocks offer an approximation (exact off the grid's border), which is all a
    preconditioner needs (:meth:`localpriv.likelihood.rfft.RfftClampedBlock.hessian_diagonal`).
    """
    return all(b.hessian_diagonal is not None or b.hessian_by_matrix
               or b.k * b.size <= DENSE_DIAGONAL_MAX for b in blocks)


def _dense_of(b: LikelihoodBlock) -> np.ndarray:
    return np.asarray(b.dense(), dtype=float)


def _dense_matrices(blocks: Sequence[LikelihoodBlock]) -> list[np.ndarray]:
    return [_dense_of(b) for b in blocks]


def _dense_newton(dense: Sequence[np.ndarray], w2: Sequence[Evaluation], g: np.ndarray,
                  free: np.ndarray) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """``u = A^+ g`` and ``v = A^+ 1`` on the free coordinates, ``A = sum_b G_b diag(w2_b) G_b^T``
    (``-H``), by a symmetric eigendecomposition; directions with eigenvalues below ``1e-13`` of
    the largest (where ``L`` is flat to rounding) are left out. ``s = u - (sum u / sum v) v`` is
    then an ascent direction: ``g . s >= 0`` by Cauchy-Schwarz in the ``A^+`` inner product."""
    idx = np.flatnonzero(free)
    A = np.zeros((idx.size, idx.size))
    for G, w in zip(dense, w2):
        Gf = G[idx]
        A += (Gf * w) @ Gf.T
    return _face_solve(A, g, idx)


def _face_solve(A: np.ndarray, g: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """``u = A^+ g[idx]`` and ``v = A^+ 1`` (``A``: ``-H`` on the free coordinates ``idx``),
    pseudo-inverting eigenvalues below ``1e-13`` of the largest; zero off ``idx``."""
    try:
        lam, Q = np.linalg.eigh(0.5 * (A + A.T))
    except np.linalg.LinAlgError:  # pragma: no cover - LAPACK failure
        return None, None
    keep = lam > 1e-13 * max(lam.max(), 0.0)
    if not keep.any():
        return None, None
    Qk, lk = Q[:, keep], lam[keep]
    u, v = np.zeros_like(g), np.zeros_like(g)
    u[idx] = Qk @ ((Qk.T @ g[idx]) / lk)
    v[idx] = Qk @ (Qk.sum(axis=0) / lk)
    return u, v


def _matrix_newton(blocks: Sequence[LikelihoodBlock], w2: Sequence[Evaluation], g: np.ndarray,
                   free: np.ndarray) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """The Newton system from the ``-H`` matrices of blocks with ``hessian_by_matrix``
    (:meth:`~localpriv.likelihood.blocks.LikelihoodBlock.hessian_matrix`, ``k x k``: blocks whose
    products are costly passes over distributed reports, :mod:`localpriv.extras.spark`, return
    ``G diag(w) G^T`` summed in the same pass as ``L`` and the gradient) and, for the other blocks,
    from their dense ``G``; ``(None, None)`` if a block is too large for that."""
    idx = np.flatnonzero(free)
    A = np.zeros((idx.size, idx.size))
    for b, w in zip(blocks, w2):
        if b.hessian_by_matrix:
            A += np.asarray(b.hessian_matrix(w), dtype=float)[np.ix_(idx, idx)]
            continue
        if b.k * b.size > DENSE_DIAGONAL_MAX:
            return None, None
        Gf = _dense_of(b)[idx]
        A += (Gf * w) @ Gf.T
    return _face_solve(A, g, idx)


def _hessian_diagonal(b: LikelihoodBlock, w: Evaluation) -> np.ndarray:
    """``sum_j w_j G[x, j]^2``: the block's own, or from its dense ``G`` (cached on the block)."""
    if b.hessian_diagonal is not None:
        return b.hessian_diagonal(w)
    if b.hessian_by_matrix:
        return np.diag(b.hessian_matrix(w)).copy()
    return b.dense_squares() @ w


class _Counter:
    def __init__(self, blocks: Sequence[LikelihoodBlock]) -> None:
        self.blocks = blocks
        self.products = 0

    def forward(self, theta: np.ndarray) -> list[Evaluation]:
        self.products += 1
        return [b.forward(theta) for b in self.blocks]

    def gradient(self, probs: Sequence[Evaluation]) -> np.ndarray:
        """``sum_A G^A (c^A / p^A)`` (one backward product of every block)."""
        self.products += 1
        out: np.ndarray | None = None
        for b, p in zip(self.blocks, probs):
            v = b.gradient(p)
            out = v if out is None else out + v
        return cast(np.ndarray, out)  # blocks: never empty

    def backward(self, ws: Sequence[np.ndarray]) -> np.ndarray:
        self.products += 1
        out: np.ndarray | None = None
        for b, w in zip(self.blocks, ws):
            v = b.backward(w)
            out = v if out is None else out + v
        return cast(np.ndarray, out)  # blocks: never empty


def _weights(blocks: Sequence[LikelihoodBlock], probs: Sequence[Evaluation]) -> list[Evaluation]:
    """The blocks' weights ``c / p^2`` of ``-H`` (:meth:`LikelihoodBlock.hessian_weights`)."""
    return [b.hessian_weights(p) for b, p in zip(blocks, probs)]


def _pcg(apply: Callable[[np.ndarray], np.ndarray], rhs: np.ndarray, diag: np.ndarray, free: np.ndarray,
         max_iter: int, rtol: float) -> np.ndarray | None:
    """Solve ``A x = rhs`` on the free coordinates (``A`` SPD there) by Jacobi-preconditioned CG."""
    x = np.zeros_like(rhs)
    r = np.where(free, rhs, 0.0)
    r0 = math.sqrt(r @ r)
    if r0 == 0.0:
        return x
    z = np.where(free, r / diag, 0.0)
    d = z.copy()
    rz = r @ z
    for _ in range(max_iter):
        Ad = np.where(free, apply(d), 0.0)
        dAd = d @ Ad
        if not dAd > 0.0:  # not positive definite on the face (non-identifiable): give up
            return None
        a = rz / dAd
        x += a * d
        r -= a * Ad
        if math.sqrt(r @ r) <= rtol * r0:
            return x
        z = np.where(free, r / diag, 0.0)
        rz_new = r @ z
        d = z + (rz_new / rz) * d
        rz = rz_new
    return x if math.sqrt(r @ r) <= PCG_ACCEPT * r0 else None


def newton_finish(blocks: Sequence[LikelihoodBlock], theta: np.ndarray, n: float, *, kkt_tol: float = KKT_TOL,
                  max_products: int = MAX_PRODUCTS, max_cg: int = 100,
                  callback: Callable[[np.ndarray, float], object] | None = None) -> NewtonFinish:
    """Certified maximum-likelihood estimate from ``theta`` (an EM iterate), if one is found.

    See the module docstring. ``blocks`` must satisfy :func:`supports_newton`. A certified point
    has ``gap = max_x f_x - theta . f <= kkt_tol`` (up to rounding): the certificate of the EM
    engine's ``stop="gap"`` rule, which passes ``kkt_tol = min(KKT_TOL, delta / 2)``.
    ``callback(theta, L)``, if given, is called after every Newton step (progress displays).

    With a block whose ``hessian_by_matrix`` is set (the ``k x k`` matrix ``G diag(w) G^T`` of
    :meth:`~localpriv.likelihood.blocks.LikelihoodBlock.hessian_matrix`; Spark's blocks, whose every
    product is a pass over the reports) the system is solved with those matrices directly instead
    of conjugate gradients: one product (pass) per Newton step and line-search trial. Every
    block's ``begin_newton()`` / ``end_newton()`` bracket the attempt.
    """
    for b in blocks:
        b.begin_newton()
    try:
        return _newton_finish(blocks, theta, n, kkt_tol, max_products, max_cg, callback)
    finally:
        for b in blocks:
            b.end_newton()


def _newton_finish(blocks: Sequence[LikelihoodBlock], theta: np.ndarray, n: float, kkt_tol: float, max_products: int,
                   max_cg: int, callback: Callable[[np.ndarray, float], object] | None) -> NewtonFinish:
    ops = _Counter(blocks)
    k = theta.size
    steps = 0

    best: np.ndarray | None = None
    best_L = -math.inf
    stalled = 0

    def failed() -> NewtonFinish:
        return NewtonFinish(None, -math.inf, ops.products, steps, 0, best, best_L)

    th = np.array(theta, dtype=float)
    th[th <= DROP_START / k] = 0.0  # EM's vanishing coordinates start at zero (KKT decides)
    th /= th.sum()
    drop_factor = max((b.newton_drop_factor for b in blocks), default=0.0)
    revive = np.zeros(k, dtype=bool)  # zeros found to violate the KKT conditions
    # the dense fallback of the Newton system (built at the first need): small problems only
    dense_ok = k <= DENSE_SOLVE_MAX_K and sum(b.k * b.size for b in blocks) <= DENSE_DIAGONAL_MAX
    dense: list[np.ndarray] | None = None
    use_dense = False
    by_matrix = any(b.hessian_by_matrix for b in blocks)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p0 = ops.forward(np.asarray(theta, dtype=float))
        L0 = total_loglik(blocks, p0)
        if drop_factor > 0.0 and math.isfinite(L0):
            # coordinates EM is shrinking (factor f_x = g_x / n below 1 - drop_factor) and already
            # small start at zero too: a smaller, better-conditioned face (KKT revives any mistake)
            f0 = ops.gradient(p0) / n
            th[(f0 < 1.0 - drop_factor) & (th < 1.0 / k)] = 0.0
            if not th.sum() > 0:
                return failed()
            th /= th.sum()
        probs = ops.forward(th)
        L = total_loglik(blocks, probs)
        if not (math.isfinite(L) and math.isfinite(L0)):
            return failed()
        best_L = L0
        g = ops.gradient(probs)
        while True:
            if ops.products > max_products:
                return failed()
            free = (th > 0) | revive
            w2 = _weights(blocks, probs)
            diag = cast(np.ndarray, sum(_hessian_diagonal(b, w) for b, w in zip(blocks, w2)))  # blocks: never empty
            if np.any(diag[free] <= 0):
                return failed()

            def neg_hess(v: np.ndarray, w2: list[Evaluation] = w2) -> np.ndarray:
                return ops.backward([w * q for w, q in zip(w2, ops.forward(v))])

            # Newton direction on the face {theta_x = 0 off ``free``, sum(theta) = 1}:
            # -H s = g - mu 1 on the free coordinates, with mu such that sum(s) = 0
            u = v = None
            if by_matrix:
                u, v = _matrix_newton(blocks, w2, g, free)
                if u is None:
                    return failed()
            elif not use_dense:
                u = _pcg(neg_hess, g, diag, free, max_cg, 1e-13)
                v = _pcg(neg_hess, free.astype(float), diag, free, max_cg, 1e-13)
            if (u is None or v is None) and dense_ok:
                # CG lost to ill-conditioning (smooth channels: geometric at small eps, planar
                # mechanisms): solve the small system directly, pseudo-inverting its flat
                # directions, for the rest of this attempt
                if dense is None:
                    dense = _dense_matrices(blocks)
                use_dense = True
                u, v = _dense_newton(dense, w2, g, free)
            if u is None or v is None or not v.sum() > 0:
                return failed()
            s = u - (u.sum() / v.sum()) * v
            dec = float(g @ s)  # Newton decrement (twice the predicted increase of L)
            small = 1e-15 * abs(L) + 1e-12  # the resolution of L: below it only rounding is left
            # projected step: what leaves the simplex is clipped to zero; Armijo on L
            t = 1.0
            while True:
                cand = np.maximum(th + t * s, 0.0)
                cand /= cand.sum()
                pc = ops.forward(cand)
                Lc = total_loglik(blocks, pc)
                if Lc >= L + ARMIJO * float(g @ (cand - th)) or (dec <= small and Lc >= L - small):
                    break
                t *= 0.5
                if t < 1e-14 or ops.products > max_products:
                    return failed()
            stalled = stalled + 1 if Lc <= L + small else 0
            th, probs, L = cand, pc, Lc
            steps += 1
            # the best point so far; STALL_STEPS steps in a row that no longer raise L beyond its
            # resolution end the attempt (the products' round-off keeps the KKT test from passing)
            if best_L < L:
                best, best_L = th, L
            if stalled >= STALL_STEPS or (steps >= BELOW_START_STEPS and best is None):
                return failed()  # stalled, or still below the starting point: EM goes on
            if callback is not None:
                callback(th, L)
            revive[:] = False
            g = ops.gradient(probs)
            if dec > 1e3 * small or t < 1.0:
                continue
            # at the resolution of L: Karush-Kuhn-Tucker conditions (f = g / n)
            f = g / n
            pos = th > 0
            viol = ~pos & (f > 1.0 + kkt_tol)
            if viol.any():
                revive = viol
                continue
            if np.all(np.abs(f[pos] - 1.0) <= kkt_tol):
                break
        if not L >= L0:
            return failed()
    return NewtonFinish(th, L, ops.products, steps, int(np.count_nonzero(th)), th, L)
