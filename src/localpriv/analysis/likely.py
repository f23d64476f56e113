"""Likely subsets: MLEs on unbounded or very large alphabets (seed 001 section 8).

Definition 2 (seed 001 section 8.1): ``x'`` is *unlikely* for observations ``z^1..z^n`` if some
other ``x`` has ``M[x', z^i] <= M[x, z^i]`` for every ``i``, strictly for one. A subset is
*likely* if everything outside it is unlikely. Theorem 8.1: the MLEs on the whole alphabet are
exactly the MLEs on a likely subset, extended by zeros. (Moving the mass of an unlikely ``x'`` to
the ``x`` that dominates it raises every ``(theta G)_i`` and one of them strictly, so no MLE puts
mass on ``x'``.) Hence IBU can run on a finite likely subset of an infinite alphabet.

Likely subsets provided here:

* :func:`dominance_likely` -- Definition 2 checked directly on a finite candidate set (exact,
  ``O(k^2 m)``);
* :func:`likely_subset_linear` -- Proposition 8.2: ``[x_min, x_max] ∩ X`` for mechanisms on the
  line whose ``M[x, z]`` decreases strictly with ``|x - z|`` (geometric, Laplace, exponential);
* :func:`likely_subset_planar` / :func:`likely_lattice_planar` -- Proposition 8.3: the points of
  ``X`` within ``delta' = sqrt(delta^2 + 2 delta d_max)`` of the convex hull ``B`` of the reports
  (Eq. 13), for planar mechanisms decreasing strictly with the Euclidean distance;
* :func:`likely_subset_krr` -- Proposition 8.4: under k-RR the reported values are a likely subset.

:func:`ibu_on_subset` runs IBU (the shared EM engine) on a subset and returns the estimate on the
whole alphabet; :func:`estimate_unbounded_integers` estimates a distribution on the integers with no
declared bounds from linear geometric reports.
"""
from __future__ import annotations

import numpy as np

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.domains import IntegerDomain
from localpriv.estimators.em import DEFAULT_ACCELERATE, DEFAULT_DELTA, DEFAULT_MAX_ITER, DEFAULT_STOP
from localpriv.estimators.ibu import em_settings, ibu, run_em
from localpriv.inference.estimate import Estimate
from localpriv.likelihood.blocks import DenseBlock
from localpriv.mechanisms.geometric import Geometric
from localpriv.utils.validation import LocalPrivError, check_eps

__all__ = [
    "dominance_likely",
    "likely_subset_linear",
    "likely_subset_planar",
    "likely_lattice_planar",
    "planar_delta_prime",
    "likely_subset_krr",
    "ibu_on_subset",
    "estimate_unbounded_integers",
]


# --------------------------------------------------------------------------------------------
# Definition 2, directly
# --------------------------------------------------------------------------------------------
def dominance_likely(G, rtol: float = 0.0, chunk: int = 64) -> np.ndarray:
    """Mask of the elements *not* unlikely in the sense of seed 001 Definition 2.

    ``G`` is the ``k x m`` observations probability matrix (distinct reports suffice). Row ``x'``
    is unlikely when some row ``x`` satisfies ``G[x'] <= G[x]`` entrywise with one strict
    inequality. The returned set is likely (every excluded element is unlikely). Comparisons use
    ``G[x'] <= G[x] * (1 + rtol)`` for the weak and ``G[x'] < G[x] * (1 - rtol)`` for the strict
    inequality, so ``rtol > 0`` only excludes elements dominated by a clear margin.
    """
    G = np.asarray(G, dtype=float)
    k = G.shape[0]
    unlikely = np.zeros(k, dtype=bool)
    for s in range(0, k, chunk):  # chunks of candidate rows x'
        Gp = G[s:s + chunk]  # c x m
        weak = np.all(Gp[:, None, :] <= G[None, :, :] * (1 + rtol), axis=2)  # c x k
        strict = np.any(Gp[:, None, :] < G[None, :, :] * (1 - rtol), axis=2)
        unlikely[s:s + chunk] = np.any(weak & strict, axis=1)
    return ~unlikely


# --------------------------------------------------------------------------------------------
# Proposition 8.2: the line
# --------------------------------------------------------------------------------------------
def likely_subset_linear(reports, lo=None, hi=None) -> tuple[int, int]:
    """Seed 001 Proposition 8.2 on an integer alphabet ``X = {lo..hi}`` (either end may be
    unbounded, ``None``): ``x_min = sup{x in X: x <= z^i for all i}`` and
    ``x_max = inf{x in X: x >= z^i for all i}``; ``[x_min, x_max] ∩ X`` is likely.

    Reports may be real numbers (e.g. Laplace reports): ``x_min = floor(min z)`` and
    ``x_max = ceil(max z)``, clipped to ``[lo, hi]``.

    Returns
    -------
    (x_min, x_max) : tuple of int
        The likely subset is ``x_min..x_max`` (inclusive).
    """
    z = np.asarray(reports, dtype=float)
    if z.size == 0:
        raise LocalPrivError("no reports: the likely subset is undefined")
    if not np.all(np.isfinite(z)):
        raise LocalPrivError("reports contain NaN or infinite values")
    xmin = int(np.floor(z.min()))
    xmax = int(np.ceil(z.max()))
    if lo is not None:
        xmin = max(xmin, int(lo))
        xmax = max(xmax, int(lo))
    if hi is not None:
        xmax = min(xmax, int(hi))
        xmin = min(xmin, int(hi))
    return xmin, xmax


# --------------------------------------------------------------------------------------------
# Proposition 8.3: the plane
# --------------------------------------------------------------------------------------------
def _hull(points: np.ndarray):
    """Vertices (in order) of the convex hull of ``points`` (``n x 2``); handles 1-2 points and
    collinear sets (then the hull is a segment)."""
    pts = np.unique(np.asarray(points, dtype=float), axis=0)
    if pts.shape[0] >= 3:
        from scipy.spatial import ConvexHull, QhullError

        try:
            h = ConvexHull(pts)
            return pts[h.vertices]
        except QhullError:
            pass
    if pts.shape[0] == 1:
        return pts
    # collinear: the two extreme points along the principal direction
    c = pts - pts.mean(axis=0)
    u = np.linalg.svd(c, full_matrices=False)[2][0]
    t = c @ u
    return pts[[int(t.argmin()), int(t.argmax())]]


def _distance_to_hull(cands: np.ndarray, verts: np.ndarray) -> np.ndarray:
    """Euclidean distance from each candidate to the convex polygon with vertices ``verts``."""
    cands = np.asarray(cands, dtype=float)
    if verts.shape[0] == 1:
        return np.linalg.norm(cands - verts[0], axis=1)
    a = verts
    b = np.roll(verts, -1, axis=0)
    if verts.shape[0] == 2:
        a, b = verts[:1], verts[1:]
    ab = b - a  # e x 2
    ap = cands[:, None, :] - a[None, :, :]  # c x e x 2
    t = np.clip((ap * ab).sum(-1) / (ab * ab).sum(-1), 0.0, 1.0)
    proj = a[None] + t[..., None] * ab[None]
    d = np.linalg.norm(cands[:, None, :] - proj, axis=2).min(axis=1)
    if verts.shape[0] >= 3:
        # inside test: same side of every edge (vertices are in counter-clockwise order)
        cross = ab[None, :, 0] * ap[..., 1] - ab[None, :, 1] * ap[..., 0]
        inside = np.all(cross >= -1e-12, axis=1) | np.all(cross <= 1e-12, axis=1)
        d = np.where(inside, 0.0, d)
    return d


def planar_delta_prime(reports_xy, delta: float) -> float:
    """Seed 001 Eq. (13): ``delta' = sqrt(delta^2 + 2 delta max_{i,j} d(z^i, z^j))``."""
    verts = _hull(reports_xy)
    diff = verts[:, None, :] - verts[None, :, :]
    dmax = float(np.sqrt((diff ** 2).sum(-1)).max()) if verts.shape[0] > 1 else 0.0
    return float(np.sqrt(delta ** 2 + 2 * delta * dmax))


def likely_subset_planar(reports_xy, candidates_xy, delta: float) -> np.ndarray:
    """Seed 001 Proposition 8.3: mask of the candidates in ``T_{delta'}(B)``.

    Parameters
    ----------
    reports_xy : array ``n x 2``
        Reported points (planar coordinates, e.g. km).
    candidates_xy : array ``k x 2``
        The alphabet ``X``.
    delta : float
        The discretization error: every point of the hull ``B`` of the reports must be within
        ``delta`` of some candidate (``h / sqrt(2)`` for a square lattice of step ``h`` covering
        ``B``). This precondition is the caller's; on an infinite lattice it always holds (use
        :func:`likely_lattice_planar`).

    Valid for mechanisms with ``M[x, z] > M[x', z]`` whenever ``d(x, z) < d(x', z)`` (planar
    Laplace / geometric). Proof sketch: for ``x'`` outside ``T_{delta'}(B)`` let ``u`` be its
    projection on ``B`` and ``x`` a candidate within ``delta`` of ``u``; for every report ``z``,
    ``d(x', z)^2 >= d(x', u)^2 + d(u, z)^2 > delta'^2 + d(u, z)^2 >= (d(u, z) + delta)^2 >= d(x, z)^2``.
    """
    if delta <= 0:
        raise LocalPrivError(f"delta must be > 0, got {delta}")
    verts = _hull(reports_xy)
    dp = planar_delta_prime(reports_xy, delta)
    return _distance_to_hull(candidates_xy, verts) <= dp


def likely_lattice_planar(reports_xy, step: float, origin=(0.0, 0.0)):
    """Proposition 8.3 on the infinite square lattice ``origin + step * (i, j)``, ``(i, j) in Z^2``
    (seed 003 section 2.3), with ``delta = step / sqrt(2)``.

    Returns the ``(i, j)`` integer pairs (``N x 2``) of the finite likely subset.
    """
    if step <= 0:
        raise LocalPrivError(f"lattice step must be > 0, got {step}")
    pts = np.asarray(reports_xy, dtype=float)
    delta = step / np.sqrt(2.0)
    dp = planar_delta_prime(pts, delta)
    o = np.asarray(origin, dtype=float)
    lo = np.floor((pts.min(axis=0) - dp - o) / step).astype(int)
    hi = np.ceil((pts.max(axis=0) + dp - o) / step).astype(int)
    ii, jj = np.meshgrid(np.arange(lo[0], hi[0] + 1), np.arange(lo[1], hi[1] + 1), indexing="ij")
    ij = np.column_stack([ii.ravel(), jj.ravel()])
    keep = likely_subset_planar(pts, o + step * ij, delta)
    return ij[keep]


# --------------------------------------------------------------------------------------------
# Proposition 8.4: k-RR
# --------------------------------------------------------------------------------------------
def likely_subset_krr(reports) -> np.ndarray:
    """Seed 001 Proposition 8.4: under k-RR the set of reported values is likely (an unreported
    ``x'`` has ``M[x', z] = b < a = M[z, z]`` for every report ``z``). Returns the sorted
    distinct reports."""
    r = np.asarray(reports)
    if r.size == 0:
        raise LocalPrivError("no reports: the likely subset is undefined")
    return np.unique(r)


# --------------------------------------------------------------------------------------------
# IBU on a likely subset (Theorem 8.1)
# --------------------------------------------------------------------------------------------
def ibu_on_subset(obs: Observations, subset, *, theta0=None, delta: float | None = None,
                  max_iter: int | None = None, accelerate: str | None = None, stop: str | None = None,
                  progress=False) -> Estimate:
    """IBU restricted to the inputs ``subset`` (indices), returned on the whole alphabet.

    By seed 001 Theorem 8.1, when ``subset`` is likely this is an MLE on the whole alphabet. Each
    observation block's likelihood rows outside ``subset`` are dropped and the shared EM engine
    (:func:`localpriv.estimators.em.em`) runs on the rest, with its defaults for the settings left
    at ``None`` (the certified maximum: ``stop="gap"``, ``delta=1e-9`` per report, Newton finish).
    """

    delta = DEFAULT_DELTA if delta is None else delta
    max_iter = DEFAULT_MAX_ITER if max_iter is None else max_iter

    idx = np.unique(np.asarray(subset, dtype=np.int64))
    k = obs.k
    if idx.size == 0 or idx.min() < 0 or idx.max() >= k:
        raise LocalPrivError(f"subset must be non-empty indices in 0..{k - 1}")
    blocks = []
    for b in obs.blocks:
        G = b.mechanism.likelihood(b.reports) if b.reports.ndim == 1 else b.likelihood_block().dense()
        blocks.append(DenseBlock(np.asarray(G)[idx], b.counts))
    t0 = None if theta0 is None else np.asarray(theta0, dtype=float)[idx] / np.asarray(theta0, dtype=float)[idx].sum()
    res = run_em(blocks, idx.size, progress=progress, label="ibu-likely", theta0=t0, delta=delta,
                 max_iter=max_iter, accelerate=DEFAULT_ACCELERATE if accelerate is None else accelerate,
                 stop=DEFAULT_STOP if stop is None else stop)
    theta = np.zeros(k)
    theta[idx] = res.theta
    return Estimate(theta, obs.domain, "ibu-likely",
                    {**em_settings(res, delta, max_iter, theta0), "subset_size": int(idx.size)},
                    loglik=res.loglik, iterations=res.iterations, converged=res.converged, n=obs.n,
                    extra={"subset": idx, "gap": res.gap})


def estimate_unbounded_integers(reports, eps: float, *, delta: float | None = None,
                                max_iter: int | None = None, max_size: int = 20_000,
                                accelerate: str | None = None, stop: str | None = None,
                                counts=None, progress=False) -> Estimate:
    """Estimate a distribution on the integers, bounds unknown, from linear geometric reports.

    Users report ``z = x + N`` (seed 001 Eq. 6, ``P(z|x) = c e^{-eps |z - x|}``) with ``x`` any
    integer. By Proposition 8.2 the interval ``[min z, max z]`` is a likely subset of ``Z`` and by
    Theorem 8.1 IBU on it is an MLE on all of ``Z``. The returned estimate lives on
    ``IntegerDomain(min z, max z)``: its support is found, never declared.

    Parameters
    ----------
    reports : array of int
        The geometric reports (in the units of the values, e.g. dollars or thousands of dollars).
    eps : float
        The mechanism's parameter per unit.
    max_size : int
        Refuse likely subsets larger than this (the dense likelihood is ``size x distinct reports``).
    delta, max_iter, accelerate, stop, progress
        Passed to :func:`localpriv.estimators.ibu.ibu`; ``None``: the engine's defaults (the
        certified maximum, ``stop="gap"`` with ``delta=1e-9`` per report, Newton finish where
        offered, SQUAREM otherwise).
    counts : array of int, optional
        How often each entry of ``reports`` was seen (then ``reports`` are distinct values).
    """

    eps = check_eps(eps)
    z = np.asarray(reports)
    if z.size == 0:
        raise LocalPrivError("no reports given")
    if z.dtype.kind == "f" and np.any(z != np.round(z)):
        raise LocalPrivError("geometric reports must be integers")
    z = z.astype(np.int64)
    xmin, xmax = likely_subset_linear(z)
    size = xmax - xmin + 1
    if size > max_size:
        raise LocalPrivError(f"the likely subset {xmin}..{xmax} has {size} elements (> max_size={max_size}); "
                             "report in coarser units or raise max_size")
    domain = IntegerDomain(xmin, xmax)
    mech = Geometric(size, eps)  # untruncated; index units = value - xmin
    if counts is None:
        obs = Observations.from_reports(mech, z - xmin, domain)
    else:  # distinct reports with their counts (what aggregation gives): memory by distinct reports
        obs = Observations([ObservationBlock(mech, z - xmin, np.asarray(counts, dtype=float))], domain)
    est = Estimate.from_fit(ibu(obs, progress=progress, delta=DEFAULT_DELTA if delta is None else delta,
                                max_iter=DEFAULT_MAX_ITER if max_iter is None else max_iter,
                                accelerate=DEFAULT_ACCELERATE if accelerate is None else accelerate,
                                stop=DEFAULT_STOP if stop is None else stop))
    est.estimator = "ibu-likely"
    est.observations = obs
    est.settings = {**est.settings, "likely_subset": [xmin, xmax], "proposition": "seed 001 Prop. 8.2"}
    return est
