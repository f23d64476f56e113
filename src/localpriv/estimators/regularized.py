"""Regularized estimators on the one EM engine: EMS and the Dirichlet MAP estimate.

Under metric mechanisms at small eps, and under LDP oracles at large ``k``, the maximum-likelihood
estimate (IBU/GIBU run to convergence) overfits: it puts the mass on a few spikes. The estimators
here trade a little bias for much less variance, with the strength of the regularization chosen
from the data. Both are the engine of :func:`localpriv.estimators.em.em` with a replaced M-step
(:class:`~localpriv.estimators.em.Penalty`); the E-step is the engine's,
``grad_x = sum_A sum_j c_j G^A[x, j] / (theta @ G^A)_j`` (so ``sum_x theta_x grad_x = n``), and
with several mechanism blocks (free-will mixtures, seed 003) they are regularized GIBU for free.

``ems`` -- EM with a smoothing step (Li, Wang, Lopuhaä-Zwakenberg, Li and Škorić, "Estimating
    Numerical Distributions under Local Differential Privacy", SIGMOD 2020; the EMS algorithm of
    Silverman, Jones, Wilson and Nychka, JRSS B 52:271-324, 1990). One iteration is::

        theta' = S_h( theta * grad / n )

    on an ordered domain: a line (:class:`~localpriv.domains.IntegerDomain`) or a planar grid
    (:class:`~localpriv.domains.grid.GridDomain`). ``S_h`` is the heat kernel ``exp(-(h^2/2) L)`` of the
    domain's nearest-neighbour graph with reflecting ends (``L`` the graph Laplacian of the path,
    or on a grid the sum of the row and column paths' Laplacians, so ``S_h`` is separable: the
    1-D smoother along rows, then along columns). It is symmetric, has non-negative entries and
    columns summing to 1 -- mass is conserved exactly, at the edges too (mass that would leave the
    domain is reflected back) -- and inside the domain it adds variance ``h^2`` (cells^2) per
    axis: the *bandwidth* ``h`` is the standard deviation of the kernel in cells. Its first-order
    form ``I - (h^2/2) L`` at ``h^2 = 1/2`` is the paper's binomial kernel ``(1/4, 1/2, 1/4)``
    (ours keeps the edge mass by reflection, where the paper's code renormalizes the truncated
    rows and then the vector). ``S_h`` comes from the type-II discrete cosine transform, which
    diagonalizes ``L`` (eigenvalues ``4 sin^2(pi j / 2m)`` on a path of ``m`` cells): a dense
    ``m x m`` matrix per axis up to ``DENSE_AXIS`` cells, the transform itself beyond.
    The smoothed map ascends no known objective (no certificate, no likelihood to guard a step), so
    the engine accelerates it by SQUAREM on the fixed-point residual (Varadhan and Roland, Scand. J.
    Stat. 35:335-353, 2008; ``em._squarem_residual``) and stops on
    ``max_x |theta'_x - theta_x| < delta``, default ``1e-7``: the fixed point, where the paper stops
    early instead (``accelerate="none"``: plain iterations, same fixed point). The map contracts
    slowly at small ``h`` and at low signal, so the distance to the fixed point can exceed ``delta``
    by far (k-RR on 100 ages at LDP eps 0.5, n = 10^5: ``max|theta - theta*|`` ~1e-3 at the default,
    so the iterate depends on the start; 1e-5 at ``delta = 1e-9``; docs/decisions/0002-ems-strength-selection.md).
    Strength: ``h`` (``settings["strength"]``); ``h = 0`` is the MLE. Categorical domains have no
    neighbours and are refused.

``dirichlet`` -- the maximum a-posteriori estimate under a symmetric Dirichlet prior with
    pseudo-count ``a >= 0`` per cell (density ``prod_x theta_x^a``, i.e. ``Dirichlet(1 + a)``):
    it maximizes the concave ``L(theta) + a sum_x log theta_x`` (Green, JRSS B 52:443-452, 1990,
    for EM on penalized likelihoods), by the MAP form of the M-step::

        theta'_x = (theta_x grad_x + a) / (n + k a)

    -- the EM image of the complete-data posterior mode, so the objective never decreases and the
    engine's monotone SQUAREM acceleration applies, with the certified stopping rule
    ``stop="gap"`` (default, as for ``ibu``): by concavity
    ``(Phi_max - Phi(theta)) / n <= max_x G_x - theta . G``, ``G = (grad + a / theta) / n``.
    The fixed point is the Karush-Kuhn-Tucker point ``grad_x + a / theta_x = n + k a`` for every
    ``x`` (all cells positive when ``a > 0``): shrinkage towards the uniform distribution, for any
    domain.
    Strength: ``a`` (``settings["strength"]``); ``a = 0`` is the MLE.

Strength from the data (never a constant tuned on our data sets): ``K``-fold cross-validation of
the held-out log-likelihood. Reports are i.i.d., so splitting them at random splits the data:
every block's counts ``c`` are cut into ``K`` folds by multivariate hypergeometric thinning
(``Generator.multivariate_hypergeometric``; the folds are a uniformly random partition of the
block's reports into ``K`` parts of sizes ``floor(n_A/K)`` or ``ceil(n_A/K)``). For each candidate
strength ``s`` and fold ``f`` the estimator is fitted on the other folds and scored by the
engine's ``L(theta_{-f}; c_f)`` (:func:`~localpriv.estimators.em.log_likelihood` on the held-out
counts); the strength with the best mean held-out log-likelihood is kept and the estimator refitted
on all reports from the start (uniform, or ``theta0``), so ``ems(obs)`` and
``ems(obs, strength=<the chosen one>)`` give the same estimate. Candidates (log-spaced, from strong
to weak; each fit warm-started from the previous one on the same fold):

* EMS: bandwidths ``h`` from ``max(1, D/4)`` down to ``0.05`` cells, 4 per decade (``D`` the
  longest side of the domain, in cells);
* Dirichlet: ``a = tau n' / k`` (``n'`` the training reports) with prior weight ``k a / n' = tau``
  from 1 down to ``1e-6``, 2 per decade.

The sweep stops at the first candidate (``PATIENCE = 1``) that scores below the best so far (for
EMS: significantly below, see the end; the mean over folds is smooth in the strength; the
refinement below covers the coarse step); the MLE
(strength 0) is scored too when the curve still rises at the weakest candidate, after extending
the grid downwards while it rises (EMS down to ``h = 0.005``, Dirichlet to ``tau = 1e-8``); when
the best is the strongest candidate the grid is extended upwards (EMS up to ``h = D``, Dirichlet
up to ``tau = 1000``); finally the geometric midpoints between the best and its scored neighbours are
scored. With the certified rule (``stop="gap"``) the fits of the selection stop at
``max(delta, 0.01 / n')``: each within 0.01 nats (in all) of its maximum, below the held-out
differences that decide (the final fit uses ``delta``). The chosen strength is used as is on all
``n`` reports (the usual K-fold practice; the training folds hold ``(K-1)/K`` of them).
``est.extra["cv"]`` holds the curve (strengths, mean and per-fold held-out log-likelihood), the
number of fits, the seed and the time taken.

EMS at low signal (docs/decisions/0002-ems-strength-selection.md): flat stretches of the curve do not stop the sweep
(``select_strength(decline="significant")``). A candidate ``s`` counts as a decline (for
``PATIENCE``) only when its fold-wise paired difference to the best positive candidate ``b`` so far
is negative beyond its standard error and beyond the selection's resolution::

    mean_f d_f < -max(sd_f(d_f) / sqrt(K), 0.01),    d_f = l_f(s) - l_f(b)

(``l_f`` the held-out log-likelihood on fold ``f``; 0.01 nats is ``CV_GAP_NATS``, the resolution
the selection already works to: its certified fits stop that close to their maximum). Where the
reports say little (k-RR on 100 ages at LDP eps 0.5, n = 10^5: about ``n (p - q) = 640``
informative reports) every bandwidth above ~1 cell smooths to the uniform distribution, so the
curve is flat to ~1e-6 nats from the top of the grid down to ``h ~ 1``; the strict rule (any drop
below the best) stopped on that plateau and chose its top (the uniform distribution), missing a
higher maximum at small ``h``. The choice is still the
candidate scored with the best mean held-out log-likelihood. This is EMS's default
(``EMS_DECLINE``); ``decline="strict"`` restores the first rule. Dirichlet keeps the strict rule.

EMS's fixed point: the selection's fits stop at ``max_x |step| < EMS_CV_DELTA`` (1e-7), the final
fit at ``EMS_DELTA`` (1e-9). At low signal the smoothed map contracts slowly and a 1e-7 step
leaves the iterate ~1e-3 (max abs) from its fixed point; the final fit is one of ~80, so the
tighter tolerance there costs little.

Randomness: the split is drawn from ``rng`` (an int seed or a ``numpy.random.Generator``; default
``0``, so the same observations give the same estimate). ``strength=<value>`` skips the selection
(the bootstrap of :mod:`localpriv.inference.uncertainty` reruns the estimator with the chosen strength
recorded in ``est.extra["call"]``: its intervals hold the strength fixed and so do not include the
variability of the selection).
"""
from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.data.observations import Observations
from localpriv.domains import CategoricalDomain, Domain, IntegerDomain, IntervalDomain
from localpriv.domains.grid import GridDomain
from localpriv.estimators.batch import batch_blocks
from localpriv.estimators.em import (
    DEFAULT_ACCELERATE,
    DEFAULT_DELTA,
    DEFAULT_MAX_ITER,
    DEFAULT_STOP,
    STOPPING_RULES,
    Callback,
    EMResult,
    Penalty,
    em,
    log_likelihood,
)
from localpriv.estimators.ibu import em_settings, run_em
from localpriv.estimators.registry import Setting, em_settings_declared, register_estimator
from localpriv.estimators.result import Fit
from localpriv.likelihood.blocks import Evaluation, LikelihoodBlock
from localpriv.utils.progress import EMProgress, em_progress
from localpriv.utils.validation import LocalPrivError, check_rng

__all__ = ["ems", "dirichlet", "smooth", "SmoothingPenalty", "DirichletPenalty", "split_counts",
           "select_strength", "ordered_shape", "FOLDS", "PATIENCE"]

#: folds of the cross-validation that chooses the strength
FOLDS = 5
#: the sweep over strengths stops after this many candidates in a row below the best so far
PATIENCE = 1
#: EMS bandwidths (cells): from max(1, D/4) down to EMS_MIN_BANDWIDTH, EMS_PER_DECADE per decade
EMS_MIN_BANDWIDTH = 0.05
EMS_PER_DECADE = 4
#: ... and further down, to EMS_FLOOR_BANDWIDTH, while the held-out score still improves
EMS_FLOOR_BANDWIDTH = 0.005
#: Dirichlet prior weights tau = k a / n': from 1 down to DIRICHLET_MIN_WEIGHT, per decade
DIRICHLET_MIN_WEIGHT = 1e-6
DIRICHLET_PER_DECADE = 2
DIRICHLET_MAX_WEIGHT = 1e3
DIRICHLET_FLOOR_WEIGHT = 1e-8
#: with stop="gap", the fits of the cross-validation are certified to within this many nats (in all,
#: over the training reports) of their maximum: delta = max(delta, CV_GAP_NATS / n_train)
CV_GAP_NATS = 0.01
#: EMS's default tolerance for the final fit: max_x |theta'_x - theta_x| < EMS_DELTA (see ems)
EMS_DELTA = 1e-9
#: ... and for the fits of the strength selection (many fits; the choice is insensitive to it):
#: max(delta, EMS_CV_DELTA)
EMS_CV_DELTA = 1e-7
#: axes up to this many cells are smoothed by a dense matrix, longer ones by the DCT
DENSE_AXIS = 1024


# --------------------------------------------------------------------------------------------
# the smoother of EMS
# --------------------------------------------------------------------------------------------
def ordered_shape(domain: Domain | None, estimator: str = "ems") -> tuple[int, ...]:
    """``(k,)`` for an integer line, ``(nrows, ncols)`` for a planar grid; refuses the rest."""
    if isinstance(domain, GridDomain):
        return (int(domain.nrows), int(domain.ncols))
    if isinstance(domain, (IntegerDomain, IntervalDomain)):  # a line of cells (real intervals too)
        return (int(domain.size),)
    if isinstance(domain, CategoricalDomain):
        raise LocalPrivError(f"{estimator} smooths along an ordered domain (LO..HI or a planar grid); "
                             f"{domain.spec()[:60]} is categorical: use dirichlet")
    if domain is None:
        raise LocalPrivError(f"{estimator} smooths along an ordered domain, and these observations carry "
                             "none: give the domain (an integer range LO..HI or a planar grid)")
    raise LocalPrivError(f"{estimator} smooths along an integer range or a planar grid, not "
                         f"{type(domain).__name__}")


def _heat_factors(m: int, var: float) -> np.ndarray:
    """Eigenvalues ``exp(-(var/2) 4 sin^2(pi j / 2m))`` of the path's heat kernel (DCT-II basis)."""
    return np.exp(-0.5 * var * 4.0 * np.sin(np.pi * np.arange(m) / (2.0 * m)) ** 2)


def smooth(v: ArrayLike, shape: Sequence[int], bandwidth: float) -> np.ndarray:
    """``S_h v``: the heat-kernel smoothing of EMS with reflecting edges (see the module docstring).

    ``v`` has ``prod(shape)`` entries (row-major for a grid, as :class:`~localpriv.domains.grid.GridDomain`
    numbers its cells); the result has the same sum and non-negative entries when ``v`` has.
    ``bandwidth`` is the kernel's standard deviation per axis, in cells.
    """
    v = np.asarray(v, dtype=float)
    shape = tuple(int(s) for s in shape)
    h = float(bandwidth)
    if not math.isfinite(h) or h < 0:
        raise LocalPrivError(f"bandwidth must be a finite number >= 0, got {bandwidth!r}")
    if h == 0 or v.size <= 1:
        return v.copy()
    return _Smoother(shape, h)(v)


class _Smoother:
    """``S_h`` for one shape and bandwidth, set up once: per axis a dense ``m x m`` matrix when
    ``m <= DENSE_AXIS`` (a matrix product beats the transforms' overhead there), else the DCT."""

    def __init__(self, shape: Sequence[int], bandwidth: float) -> None:
        from scipy.fft import dct
        self.shape = tuple(int(m) for m in shape)
        var = float(bandwidth) ** 2
        self.ops: list[tuple[str, np.ndarray]] = []
        for m in self.shape:
            f = _heat_factors(m, var)
            if m <= DENSE_AXIS:
                C = dct(np.eye(m), type=2, norm="ortho", axis=0)  # orthonormal: C^T diag(f) C = S
                S = C.T @ (f[:, None] * C)
                S = 0.5 * (S + S.T)
                np.maximum(S, 0.0, out=S)  # rounding (~1e-17) below 0 far from the diagonal
                S /= S.sum(axis=0, keepdims=True)  # columns sum to 1: mass is conserved
                self.ops.append(("dense", S))
            else:
                self.ops.append(("dct", f))
        dense = all(kind == "dense" for kind, _ in self.ops)
        self._dense_line = self.ops[0][1] if dense and len(self.ops) == 1 else None
        self._dense_grid = ((self.ops[0][1], np.ascontiguousarray(self.ops[1][1].T))
                            if dense and len(self.ops) == 2 else None)

    def matrix(self, axis: int = 0) -> np.ndarray:
        """The 1-D smoothing matrix along ``axis`` (tests, small axes)."""
        kind, op = self.ops[axis]
        if kind == "dense":
            return op.copy()
        return np.stack([self._apply_axis(np.eye(self.shape[axis])[:, j], 0, kind, op)
                         for j in range(self.shape[axis])], axis=1)

    @staticmethod
    def _apply_axis(a: np.ndarray, axis: int, kind: str, op: np.ndarray) -> np.ndarray:
        if kind == "dense":
            return np.moveaxis(np.tensordot(op, a, axes=([1], [axis])), 0, axis) if a.ndim > 1 else op @ a
        from scipy.fft import dct, idct
        shape = [1] * a.ndim
        shape[axis] = op.size
        c = dct(a, type=2, norm="ortho", axis=axis)
        c *= op.reshape(shape)
        return idct(c, type=2, norm="ortho", axis=axis)

    def __call__(self, v: np.ndarray) -> np.ndarray:
        # dense axes: products with non-negative matrices whose columns sum to 1 (the mass of v is
        # kept up to rounding, nothing turns negative)
        if self._dense_line is not None:
            return self._dense_line @ np.asarray(v, dtype=float)
        if self._dense_grid is not None:
            rows, cols_t = self._dense_grid
            return (rows @ np.asarray(v, dtype=float).reshape(self.shape) @ cols_t).ravel()
        mass = float(v.sum())
        a = np.asarray(v, dtype=float).reshape(self.shape)
        for axis, (kind, op) in enumerate(self.ops):
            a = self._apply_axis(a, axis, kind, op)
        out = np.ascontiguousarray(a).ravel()
        np.maximum(out, 0.0, out=out)  # rounding (~1e-17) below 0 where the input is ~0
        s = out.sum()
        if s > 0:
            out *= mass / s
        return out


class SmoothingPenalty(Penalty):
    """The EMS map ``theta' = S_h(theta * grad / n)`` (no objective: ``value`` is ``None``)."""

    def __init__(self, shape: Sequence[int], bandwidth: float) -> None:
        self.bandwidth = float(bandwidth)
        self.smoother = _Smoother(shape, bandwidth)

    def mstep(self, theta: np.ndarray, grad: np.ndarray, n: float) -> np.ndarray:
        new = theta * grad
        s = new.sum()
        new /= s if s > 0 else n
        return self.smoother(new)

    def value(self, theta: np.ndarray) -> float | None:
        return None


class DirichletPenalty(Penalty):
    """MAP M-step ``(theta grad + a) / (n + k a)``; log-prior ``a sum log theta`` (concave)."""

    def __init__(self, a: float) -> None:
        self.a = float(a)

    def mstep(self, theta: np.ndarray, grad: np.ndarray, n: float) -> np.ndarray:
        new = theta * grad + self.a
        return new / new.sum()  # the sum is n + k a up to rounding

    def value(self, theta: np.ndarray) -> float | None:
        return self.a * float(np.sum(np.log(theta)))

    def gradient(self, theta: np.ndarray) -> np.ndarray | None:
        """``d/dtheta (a sum log theta) = a / theta``: the engine's certified ``stop="gap"``."""
        return self.a / theta


# --------------------------------------------------------------------------------------------
# splitting the reports, cross-validation
# --------------------------------------------------------------------------------------------
class _Recounted(LikelihoodBlock):
    """A block's reports with other counts (a fold): the products are the original block's."""

    def __init__(self, block: LikelihoodBlock, counts: np.ndarray) -> None:
        self.block = block
        self.k = block.k
        self.counts = np.asarray(counts, dtype=float)
        self.hessian_diagonal = block.hessian_diagonal  # the original's capability (or None)

    def forward(self, theta: np.ndarray) -> Evaluation:
        return self.block.forward(theta)

    def backward(self, w: np.ndarray) -> np.ndarray:
        return self.block.backward(w)


def split_counts(counts: Sequence[np.ndarray], folds: int, rng: int | np.random.Generator) -> list[list[np.ndarray]]:
    """Cut every count vector into ``folds`` parts: ``out[f][b]`` are the counts of fold ``f`` in
    block ``b``. Each block's reports are partitioned uniformly at random into parts of sizes
    ``floor(n_b / folds)`` or ``ceil(n_b / folds)`` (sequential multivariate hypergeometric draws)."""
    rng = check_rng(rng)
    out: list[list[Any]] = [[None] * len(counts) for _ in range(folds)]  # every entry set below
    for b, c in enumerate(counts):
        c = np.asarray(c, dtype=float)
        if np.any(c != np.round(c)):
            raise LocalPrivError("choosing the strength by cross-validation splits the reports, so the counts "
                                 "must be whole numbers; give strength= to skip the selection")
        rem = np.round(c).astype(np.int64)
        n = int(rem.sum())
        for f in range(folds - 1):
            size = n // folds + (1 if f < n % folds else 0)
            draw = rng.multivariate_hypergeometric(rem, size) if size else np.zeros_like(rem)
            out[f][b] = draw.astype(float)
            rem = rem - draw
        out[folds - 1][b] = rem.astype(float)
    return out


def _batched_members(blocks: Sequence[LikelihoodBlock]) -> tuple[list[LikelihoodBlock], list[list[int]]]:
    """``blocks`` batched by family (:func:`~localpriv.estimators.batch.batch_blocks`, what the EM engine
    does to its input) and, per batched block, the indices in ``blocks`` of its members, in column order.

    The folds wrap every block in :class:`_Recounted`, which the engine does not batch; batched before
    the wrapping, a fold's products over ``M`` mechanisms of one family are a few vector operations
    instead of ``M`` Python-level calls (the same sums up to rounding)."""
    index = {id(b): i for i, b in enumerate(blocks)}
    batched = batch_blocks(blocks)
    members: list[list[int]] = []
    for bb in batched:
        i = index.get(id(bb))
        members.append([i] if i is not None else [index[id(m)] for m in getattr(bb, "members", ())])
    return batched, members


FitFn = Callable[[Sequence[LikelihoodBlock], float, "np.ndarray | None"], EMResult]


#: EMS's default sweep rule (``select_strength(decline=...)``; docs/decisions/0002-ems-strength-selection.md)
EMS_DECLINE = "significant"


def select_strength(blocks: Sequence[LikelihoodBlock], fit: FitFn, candidates: Iterable[float], *,
                    folds: int = FOLDS, rng: int | np.random.Generator = 0,
                    extend_up: Callable[[float], float | None] | None = None,
                    extend_down: Callable[[float], float | None] | None = None,
                    patience: int = PATIENCE, decline: str = "strict") -> dict[str, Any]:
    """Choose a strength by ``folds``-fold cross-validation of the held-out log-likelihood.

    ``fit(train_blocks, strength, theta0)`` fits the estimator (``theta0`` a warm start or ``None``);
    ``candidates`` are positive strengths, swept from the largest down; ``extend_up(s)`` and
    ``extend_down(s)`` give the next candidate above and below ``s`` beyond them (or ``None``).
    ``decline``: when a candidate counts as a decline for ``patience`` -- ``"strict"``: its mean
    held-out log-likelihood is not above the best so far; ``"significant"``: its paired fold-wise
    difference to the best positive candidate ``b`` so far, ``d_f = l_f(s) - l_f(b)``, is negative
    beyond its standard error and beyond the selection's resolution ``CV_GAP_NATS``:
    ``mean_f d_f < -max(sd_f(d_f) / sqrt(folds), CV_GAP_NATS)`` (so a flat stretch of the curve does
    not stop the sweep). See the module docstring for the rules.
    Returns ``{"strength", "strengths", "heldout", "per_fold", "folds", "fits", "unconverged",
    "decline", "seconds"}``.
    """
    if decline not in ("strict", "significant"):
        raise LocalPrivError(f"decline must be 'strict' or 'significant', got {decline!r}")
    t0 = time.perf_counter()
    parts = split_counts([b.counts for b in blocks], folds, rng)
    batched, members = _batched_members(blocks)
    train: list[list[LikelihoodBlock]] = []
    test: list[list[LikelihoodBlock]] = []
    for f in range(folds):
        held = [np.concatenate([parts[f][i] for i in idx]) if len(idx) > 1 else parts[f][idx[0]]
                for idx in members]
        test.append([_Recounted(b, h) for b, h in zip(batched, held)])
        train.append([_Recounted(b, b.counts - h) for b, h in zip(batched, held)])
    scores: dict[float, tuple[float, list[float]]] = {}
    thetas: dict[float, list[np.ndarray]] = {}
    stats = {"fits": 0, "unconverged": 0}

    def score(s: float, warm_from: float | None = None) -> float:
        warm = None if warm_from is None else thetas.get(warm_from)
        ll: list[float] = []
        fits: list[np.ndarray] = []
        for f in range(folds):
            res = fit(train[f], s, None if warm is None else warm[f])
            stats["fits"] += 1
            stats["unconverged"] += int(not res.converged)
            fits.append(res.theta)
            ll.append(log_likelihood(test[f], res.theta))
        scores[s] = (float(np.mean(ll)), ll)
        thetas[s] = fits
        return scores[s][0]

    def best() -> float:
        return max(scores, key=lambda s: (scores[s][0], s))  # ties: the stronger

    def prune(*keep: float) -> None:
        for s in list(thetas):
            if s not in keep:
                del thetas[s]

    def best_positive() -> float:
        return max((t for t in scores if t > 0), key=lambda t: (scores[t][0], t))

    def declined(s: float, before: float) -> bool:
        """Is candidate ``s`` (just scored) a decline, ``before`` the best positive score before it?"""
        if decline == "strict":
            return not scores[s][0] > before
        d = np.asarray(scores[s][1]) - np.asarray(scores[best_positive()][1])  # paired over the folds
        return bool(d.mean() < -max(d.std(ddof=1) / math.sqrt(folds), CV_GAP_NATS))

    cands = sorted({float(s) for s in candidates if s > 0}, reverse=True)
    prev: float | None = None
    declines, stopped = 0, False
    for s in cands:
        before = max((v[0] for t, v in scores.items() if t > 0), default=-math.inf)
        score(s, prev)
        if declined(s, before):
            declines += 1
        else:
            declines = 0
        prune(best(), s)
        prev = s
        if declines >= patience:
            stopped = True
            break
    if not stopped and best_positive() == prev:
        # still rising at the weakest candidate: go further down while it improves, then the MLE
        while extend_down is not None:
            down = extend_down(prev)
            if down is None:
                break
            score(down, prev)
            prune(best(), down)
            improved = best_positive() == down
            prev = down
            if not improved:
                break
        if best() == prev:
            score(0.0, prev)
    # the best is the strongest candidate: go up while it improves
    while extend_up is not None and best() == max(scores):
        up = extend_up(max(scores))
        if up is None:
            break
        top = max(scores)
        if score(up, top) <= scores[top][0]:
            break
        prune(best())
    # refine: geometric midpoints between the best and its scored positive neighbours
    b = best()
    if b > 0:
        pos = sorted(s for s in scores if s > 0)
        i = pos.index(b)
        for j in (i - 1, i + 1):
            if 0 <= j < len(pos):
                score(math.sqrt(b * pos[j]), b)
    order = sorted(scores)
    return {"strength": best(), "strengths": order, "heldout": [scores[s][0] for s in order],
            "per_fold": [scores[s][1] for s in order], "folds": folds, "fits": stats["fits"],
            "unconverged": stats["unconverged"], "decline": decline, "seconds": time.perf_counter() - t0}


def _check_strength(strength: float | None, name: str) -> float | None:
    if strength is None:
        return None
    if isinstance(strength, (bool, np.bool_)):
        raise LocalPrivError(f"{name}: strength must be a number >= 0, got {strength!r}")
    try:
        s = float(strength)
    except (TypeError, ValueError):
        raise LocalPrivError(f"{name}: strength must be a number >= 0, got {strength!r}") from None
    if not math.isfinite(s) or s < 0:
        raise LocalPrivError(f"{name}: strength must be a finite number >= 0, got {strength!r}")
    return s


def _check_folds(folds: int) -> int:
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise LocalPrivError(f"folds must be a whole number >= 2, got {folds!r}")
    return int(folds)


def _seed_label(rng: int | np.random.Generator) -> int | str:
    return int(rng) if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool) else "generator"


def _run(name: str, obs: Observations, make_penalty: Callable[[float], Penalty], strength: float | None,
         grid: Callable[[float], np.ndarray], extend_up: Callable[[float], float | None],
         extend_down: Callable[[float], float | None], *, folds: int, rng: int | np.random.Generator,
         theta0: ArrayLike | None, delta: float, max_iter: int, callback: Callback | None, keep_trace: bool,
         accelerate: str | None, stop: str, progress: bool | EMProgress, meaning: str, grid_rule: str,
         decline: str = "strict", cv_floor: float = 0.0) -> Fit:
    """Select the strength (unless given; ``decline`` as for :func:`select_strength`; the selection's
    fits stop at ``max(delta, cv_floor)``), refit on all reports from the start, build the Estimate."""
    k = obs.k
    blocks = obs.likelihood_blocks()
    bar = None
    if progress:
        bar = progress if isinstance(progress, EMProgress) else em_progress(name)

    def fit(bl: Sequence[LikelihoodBlock], s: float, start: np.ndarray | None, tol: float = delta,
            **kw: Any) -> EMResult:
        return em(bl, k, theta0=start, delta=tol, max_iter=max_iter, accelerate=accelerate, stop=stop,
                  penalty=make_penalty(s) if s > 0 else None, **kw)

    extra: dict[str, Any] = {}
    label = "" if bar is None else bar.label
    with contextlib.nullcontext() if bar is None else bar:  # the display ends with the estimate
        if strength is None:
            folds = _check_folds(folds)
            if obs.n < 2 * folds:
                raise LocalPrivError(f"{name}: {obs.n:g} reports are too few to choose the strength by "
                                     f"{folds}-fold cross-validation; give strength=")
            check_rng(rng)
            n_train = obs.n * (folds - 1) / folds
            # the certified rule: CV fits within CV_GAP_NATS (in all) of their maximum suffice
            cv_delta = max(delta, CV_GAP_NATS / n_train) if stop == "gap" else max(delta, cv_floor)

            def cv_fit(bl: Sequence[LikelihoodBlock], s: float, start: np.ndarray | None) -> EMResult:
                if bar is not None:  # a long selection shows its progress too
                    bar.label = f"{label} (choosing the strength: {s:.3g})"
                return fit(bl, s, start, tol=cv_delta, callback=bar)

            try:
                cv = select_strength(blocks, cv_fit, grid(n_train), folds=folds, rng=rng, extend_up=extend_up,
                                     extend_down=extend_down, decline=decline)
            finally:
                if bar is not None:
                    bar.label = label
            strength = cv["strength"]
            extra["cv"] = {**cv, "seed": _seed_label(rng), "criterion": "mean held-out log-likelihood",
                           "grid": grid_rule, "delta": cv_delta}
            how = f"{folds}-fold held-out log-likelihood"
        else:
            how = "given"
        pen = make_penalty(strength) if strength > 0 else None
        res = run_em(blocks, k, progress=bar or False, label=name, callback=callback, theta0=theta0,
                     delta=delta, max_iter=max_iter, keep_trace=keep_trace, accelerate=accelerate, stop=stop,
                     penalty=pen)
    if keep_trace:
        extra["trace"] = np.asarray(res.trace)
    extra["gap"] = res.gap
    settings = {"strength": float(strength), "strength_meaning": meaning, "strength_selection": how,
                **em_settings(res, delta, max_iter, theta0)}
    if pen is not None and pen.value(res.theta) is not None:
        # the certificate is of the penalized objective (MAP), not of the likelihood: named so
        settings["objective_gap_reached"] = settings.pop("gap_reached")
        settings["stopping"] = settings["stopping"].replace("per-report log-likelihood",
                                                            "per-report L + a sum log theta")
    if "cv" in extra:
        settings["folds"] = extra["cv"]["folds"]
        settings["seed"] = extra["cv"]["seed"]
    loglik = log_likelihood(blocks, res.theta)  # the plain L (the engine's is penalized for MAP)
    if pen is not None and pen.value(res.theta) is not None:
        extra["objective"] = res.loglik
    # what the bootstrap reruns: the chosen strength, no new selection
    extra["call"] = (name, {"strength": float(strength), "delta": delta, "max_iter": max_iter,
                            "accelerate": accelerate, "stop": stop})
    return Fit(res.theta, obs.domain, name, settings, loglik=loglik, iterations=res.iterations,
                    converged=res.converged, n=obs.n, extra=extra)


# --------------------------------------------------------------------------------------------
# the estimators
# --------------------------------------------------------------------------------------------
def ems(obs: Observations, *, strength: float | None = None, folds: int = FOLDS, rng: int | np.random.Generator = 0,
        theta0: ArrayLike | None = None, delta: float = EMS_DELTA, max_iter: int = DEFAULT_MAX_ITER,
        callback: Callback | None = None, keep_trace: bool = False, accelerate: str | None = DEFAULT_ACCELERATE,
        stop: str = "max_abs", progress: bool | EMProgress = False, decline: str = EMS_DECLINE) -> Fit:
    """EMS: EM with a smoothing step on a line or a planar grid (see the module docstring).

    ``theta' = S_h(theta * grad / n)`` (Li, Wang, Lopuhaä-Zwakenberg, Li and Škorić, SIGMOD 2020)
    iterated towards its fixed point from ``theta0`` (uniform by default), with SQUAREM on the
    residual (the map ascends no objective, so nothing certifies it), stopped when
    ``max_x |theta'_x - theta_x| < delta`` (default ``1e-9``; the selection's fits stop at
    ``max(delta, EMS_CV_DELTA)`` = 1e-7), at most ``max_iter`` evaluations.
    ``strength`` is the bandwidth ``h`` (kernel standard deviation, cells); ``None`` (default)
    chooses it by ``folds``-fold cross-validation of the held-out log-likelihood, the split drawn
    from ``rng`` (the sweep crosses flat stretches of the curve: module docstring); ``0`` is the
    maximum-likelihood estimate, computed by the engine with
    ``accelerate`` and ``stop`` (exactly :func:`~localpriv.estimators.ibu.ibu` with the same
    settings). With several mechanisms it is regularized GIBU. ``progress`` as for ``ibu``.
    ``decline`` is the sweep's stopping rule (:func:`select_strength`): ``"significant"`` (the
    default), which crosses flat stretches of the held-out curve (module docstring), or
    ``"strict"`` (stop at the first candidate scoring below the best).
    """
    shape = ordered_shape(obs.domain, "ems")
    strength = _check_strength(strength, "ems")
    if stop not in STOPPING_RULES:
        raise LocalPrivError(f"unknown stopping rule {stop!r}; choose one of {', '.join(STOPPING_RULES)}")
    if stop != "max_abs" and strength != 0:
        raise LocalPrivError("ems with a positive strength stops on max_abs (its smoothed map ascends no "
                             f"objective); stop={stop!r} applies to strength=0 (the MLE) only")
    side = max(shape)
    top = max(1.0, side / 4.0)
    ratio = 10.0 ** (1.0 / EMS_PER_DECADE)

    def grid(_n_train: float) -> np.ndarray:
        num = max(2, int(math.ceil(math.log10(top / EMS_MIN_BANDWIDTH) * EMS_PER_DECADE)) + 1)
        return np.geomspace(top, EMS_MIN_BANDWIDTH, num)

    def up(s: float) -> float | None:
        return s * ratio if s * ratio <= side else None

    def down(s: float) -> float | None:
        return s / ratio if s / ratio >= EMS_FLOOR_BANDWIDTH * (1 - 1e-12) else None

    return _run("ems", obs, lambda s: SmoothingPenalty(shape, s), strength, grid, up, down, folds=folds, rng=rng,
                theta0=theta0, delta=delta, max_iter=max_iter, callback=callback, keep_trace=keep_trace,
                accelerate=accelerate, stop=stop, progress=progress, decline=decline, cv_floor=EMS_CV_DELTA,
                meaning="bandwidth h: standard deviation of the smoothing kernel, cells",
                grid_rule=f"h from max(1, D/4)={top:g} down to {EMS_MIN_BANDWIDTH:g} cells, "
                          f"{EMS_PER_DECADE} per decade")


def dirichlet(obs: Observations, *, strength: float | None = None, folds: int = FOLDS,
              rng: int | np.random.Generator = 0, theta0: ArrayLike | None = None, delta: float = DEFAULT_DELTA,
              max_iter: int = DEFAULT_MAX_ITER, callback: Callback | None = None, keep_trace: bool = False,
              accelerate: str | None = DEFAULT_ACCELERATE, stop: str = DEFAULT_STOP,
              progress: bool | EMProgress = False) -> Fit:
    """MAP estimate under a symmetric Dirichlet prior (see the module docstring), any domain.

    Maximizes the concave ``Phi(theta) = L(theta) + a sum_x log theta_x`` by the M-step
    ``(theta grad + a) / (n + k a)`` with the engine's settings (defaults as ``ibu``: SQUAREM --
    the Newton finish is for the plain likelihood --, and the certified rule ``stop="gap"``:
    ``(Phi_max - Phi(theta)) / n <= max_x G_x - theta . G`` with ``G = (grad + a / theta) / n``,
    below ``delta``). ``strength`` is the pseudo-count ``a`` per cell; ``None`` (default) chooses
    it by ``folds``-fold cross-validation, the split drawn from ``rng``; ``0`` is the MLE (exactly
    ``ibu`` with the same settings). The estimate's ``loglik`` is the plain log-likelihood, the
    penalized ``Phi`` is ``extra["objective"]``.
    """
    strength = _check_strength(strength, "dirichlet")
    k = obs.k
    ratio = 10.0 ** (1.0 / DIRICHLET_PER_DECADE)
    state: dict[str, float] = {}

    def grid(n_train: float) -> np.ndarray:
        state["scale"] = n_train / k
        num = int(round(-math.log10(DIRICHLET_MIN_WEIGHT) * DIRICHLET_PER_DECADE)) + 1
        return state["scale"] * np.geomspace(1.0, DIRICHLET_MIN_WEIGHT, num)

    def up(s: float) -> float | None:
        return s * ratio if s * ratio <= DIRICHLET_MAX_WEIGHT * state["scale"] * (1 + 1e-12) else None

    def down(s: float) -> float | None:
        return s / ratio if s / ratio >= DIRICHLET_FLOOR_WEIGHT * state["scale"] * (1 - 1e-12) else None

    return _run("dirichlet", obs, DirichletPenalty, strength, grid, up, down, folds=folds, rng=rng, theta0=theta0,
                delta=delta, max_iter=max_iter, callback=callback, keep_trace=keep_trace, accelerate=accelerate,
                stop=stop, progress=progress, meaning="pseudo-count a per cell (prior Dirichlet(1 + a))",
                grid_rule=f"a = tau n'/k, tau from 1 down to {DIRICHLET_MIN_WEIGHT:g}, "
                          f"{DIRICHLET_PER_DECADE} per decade")


def _regularized_settings(strength_help: str) -> tuple[Setting, ...]:
    return (Setting("strength", "float", None, strength_help + "; None: chosen by cross-validation of the held-out "
                    "log-likelihood; 0: the maximum-likelihood estimate", low=0.0, nullable=True),
            Setting("folds", "int", FOLDS, "folds of the cross-validation choosing the strength", low=2),
            Setting("rng", "rng", 0, "seed or generator of the cross-validation split"))


register_estimator(
    "ems", ems, summary="EM with a smoothing step (EMS) on a line or a planar grid, bandwidth chosen by "
                        "cross-validation",
    tags={"regularized", "iterative", "cross-validated", "mixture", "ordered-domain"},
    settings=_regularized_settings("bandwidth h of the smoothing kernel, cells")
    + em_settings_declared(delta=EMS_DELTA, stop="max_abs", stop_help="max_abs unless strength=0")
    + (Setting("decline", "str", EMS_DECLINE, "stopping rule of the strength sweep: significant crosses flat "
               "stretches of the held-out curve, strict stops at the first decline",
               choices=("significant", "strict"), noun="sweep rule"),))
register_estimator(
    "dirichlet", dirichlet, summary="MAP estimate under a symmetric Dirichlet prior, its pseudo-count chosen by "
                                    "cross-validation",
    tags={"regularized", "iterative", "cross-validated", "mixture"},
    settings=_regularized_settings("pseudo-count a per cell (prior Dirichlet(1 + a))") + em_settings_declared())
