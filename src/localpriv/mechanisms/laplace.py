"""Linear Laplace mechanism, on a grid or binned (seed 001 section 7.3, refs [27], [30]).

Textbook continuous version: a report ``z = x + N`` with ``N ~ Laplace(0, 1/eps)`` and density
``(eps/2) exp(-eps |z - x|)``. Released as a float64 computed by ``x + rng.laplace(...)`` it does
not have that law bit for bit, and the difference leaks (Mironov, CCS 2012): with
``laplace(k=2,eps=0.01)`` and 4 x 10^6 draws per input, "report in [0.5, 0.75) with an odd last
mantissa bit" occurred 2304 vs 1252 times, a log-ratio of 0.61 against the promised 0.01
(docs/decisions/0008-grid-released-laplace-and-she.md). So the unbinned version (``bins=None``)
now releases reports on a **fixed grid** of width ``g`` (``grid``, a power of two ``<= 1``, so
every input and every report is an exact float)::

    z = x + g D,    P(D = d) = tanh(lam/2) e^{-lam |d|}  (discrete Laplace),   lam = eps g,

hence ``P(z | x) = tanh(eps g / 2) exp(-eps |z - x|)`` for ``z`` on the grid: the Laplace density
up to the factor ``tanh(eps g/2)/(eps/2) ~ g``, i.e. the linear geometric mechanism (seed 001
Eq. 6) on the grid. ``D`` is drawn by the exact-table sampler
:class:`~localpriv.mechanisms._sampling.DiscreteLaplace` and ``x / g + D`` is formed in integers,
clamped to ``+-2^53`` (float64 holds every integer up to there; a clamp is post-processing, reached
with probability ``< 2 e^{-lam 2^52}``, and included in the likelihood), and only then scaled by
``g``: every released bit is a function of that integer. ``g`` defaults to the largest power of
two ``<= (1/eps) / 1024``, kept in ``[2^-30, 1]``: steps of about a thousandth of the noise scale
(``lam ~ 2^-10``). It is part of the spec only when given (``laplace(k=2,eps=0.01,grid=0.0625)``).

Binned with width ``w`` (``bins=w``): the report is the index ``j`` of the bin
``[(j - 1/2) w, (j + 1/2) w)`` holding ``x + N`` (the nearest multiple of ``w``)::

    P(j | x) = F((j + 1/2) w - x) - F((j - 1/2) w - x),    F the Laplace(0, 1/eps) CDF,

and with ``lo``/``hi`` (bin indices) the bin index is clamped to ``lo..hi`` (the tails pile up on
the end bins, as for the truncated geometric mechanism, seed 001 Eq. 7); reports are then output
indices ``j - lo`` and the channel is ``k x (hi - lo + 1)``. ``laplace(eps=e,bins=1.0,lo=0,hi=k-1)``
is the square version used for INV in the reproductions. With unit bins (``w = 1``) and
``2^-16 <= eps <= 20`` the report is drawn exactly: ``j - x = round(N)`` has
``P(|j - x| >= m) = e^{-eps (m - 1/2)}`` (``m >= 1``), two-sided geometric tails around its own
centre cell, which :class:`~localpriv.mechanisms._sampling.DiscreteLaplace` draws with
``kappa = e^{eps/2}`` (and the clamp to ``lo..hi`` is post-processing); the levels add its bound.
Other bin widths draw ``N`` with ``numpy``'s float Laplace sampler, whose tail ends at
``52 ln 2 / eps ~ 36.04 / eps`` (``log(2U)``, ``U`` a multiple of ``2^-53``): bins beyond it are
never reported although the channel gives
them a positive probability, so their computed level holds for the channel, not for the
sampler's bits (docs/decisions/0008-grid-released-laplace-and-she.md).

Levels: the grid version is eps-geo-indistinguishable for its target law (``d(x, x') = |x - x'|``,
attained by reports outside the segment between ``x`` and ``x'``); the computed level adds the
sampler's bound on how far its integer tables move the ratios
(:meth:`~localpriv.mechanisms._sampling.DiscreteLaplace.excess`, ~1e-12). The binned levels are
computed from their channels.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.likelihood.structured import laplace_block_for
from localpriv.mechanisms._sampling import (
    MAX_RATE,
    MIN_RATE,
    DiscreteLaplace,
    default_grid,
    discrete_laplace,
    power_of_two_grid,
)
from localpriv.mechanisms.base import Mechanism, k_from_bounds, register
from localpriv.mechanisms.privacy import checked_epsilon, geo_epsilon, ldp_epsilon, ldp_epsilon_from_logs
from localpriv.utils.validation import LocalPrivError, PrivacyWarning, check_eps, check_int, check_rng

__all__ = ["Laplace", "laplace_interval_prob"]


def laplace_interval_prob(u: ArrayLike, v: ArrayLike, eps: float) -> np.ndarray:
    """``P(u <= N < v)`` for ``N ~ Laplace(0, 1/eps)`` (``u <= v``, infinite ends allowed),
    computed without cancellation in the tails."""
    u, v = np.broadcast_arrays(np.asarray(u, dtype=float), np.asarray(v, dtype=float))
    with np.errstate(over="ignore", invalid="ignore"):
        width = v - u
        left = 0.5 * np.exp(eps * np.minimum(v, 0.0)) * -np.expm1(-eps * width)   # v <= 0
        right = 0.5 * np.exp(-eps * np.maximum(u, 0.0)) * -np.expm1(-eps * width)  # u >= 0
        mid = 1.0 - 0.5 * np.exp(eps * np.minimum(u, 0.0)) - 0.5 * np.exp(-eps * np.maximum(v, 0.0))
    out = np.where(v <= 0, left, np.where(u >= 0, right, mid))
    return np.where(width > 0, out, 0.0)


@register
class Laplace(Mechanism):
    """Linear Laplace mechanism on inputs ``0..k-1`` (index units, distance ``|x - x'|``).

    Parameters
    ----------
    k : int
        Number of inputs.
    eps : float
        Geo-indistinguishability parameter per index unit (noise scale ``1/eps``).
    bins : float, optional
        Bin width ``w`` in index units; ``None`` (default) gives float64 reports on the grid.
    lo, hi : int, optional
        Clamp the bin index to ``lo..hi`` (binned only); reports become ``j - lo``.
    grid : float, optional
        Grid width ``g`` of the unbinned version: a power of two in ``[2^-30, 1]``. Default: the
        largest power of two ``<= (1/eps) / 1024`` within those bounds (module docstring).
    """

    spec_name = "laplace"
    examples = (dict(spec="laplace(k=5,eps=0.5)", eps_ldp=2.0, eps_geo=0.5),
                dict(spec="laplace(k=5,eps=0.5,bins=1.0,lo=0,hi=4)", eps_ldp=2.0, eps_geo=0.5),
                dict(spec="laplace(k=5,eps=0.5,bins=1.0)", eps_ldp=2.0, eps_geo=0.5),
                dict(spec="laplace(k=4,eps=0.5,bins=0.5)", eps_ldp=1.5, eps_geo=0.5))
    #: ``|z / g|`` is clamped to this (float64 holds every integer up to 2^53 exactly)
    CLAMP = 1 << 53
    #: smallest grid exponent
    MIN_GRID_LOG2 = -30

    def __init__(self, k: int, eps: float, bins: float | None = None, lo: int | None = None,
                 hi: int | None = None, grid: float | None = None) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.eps = check_eps(eps)
        if bins is not None:
            bins = check_eps(bins, "bins (the bin width)")
        if (lo is None) != (hi is None):
            raise LocalPrivError("laplace: give both lo and hi or neither")
        if lo is not None:
            if bins is None:
                raise LocalPrivError("laplace: lo/hi truncate the binned version; give bins=WIDTH too")
            lo, hi = check_int(lo, "lo"), check_int(hi, "hi")
            if not lo < hi:
                raise LocalPrivError(f"laplace: need lo < hi, got lo={lo}, hi={hi}")
        self.bins, self.lo, self.hi = bins, lo, hi
        self._grid_given = grid is not None
        self.grid: float | None = None
        self.steps_per_unit: int | None = None
        self.rate: float | None = None
        self.sampler: DiscreteLaplace | None = None
        if bins is not None:
            if grid is not None:
                raise LocalPrivError("laplace: grid is the step of the unbinned version; give bins or grid, "
                                     "not both")
            if bins == 1.0 and MIN_RATE <= self.eps <= MAX_RATE:
                # unit bins: j - x = round(N) has P(|j - x| >= m) = e^{-eps (m - 1/2)}, m >= 1
                self.steps_per_unit, self.rate = 1, self.eps
                self.sampler = discrete_laplace(self.eps, math.exp(0.5 * self.eps))
            return
        self.grid = (default_grid(1.0 / self.eps, self.MIN_GRID_LOG2) if grid is None
                     else power_of_two_grid(grid, "laplace: grid", self.MIN_GRID_LOG2))
        self.steps_per_unit = int(round(1.0 / self.grid))
        #: decay of the noise per grid step
        self.rate = self.eps * self.grid
        self.sampler = discrete_laplace(self.rate)

    @classmethod
    def implied_k(cls, params: dict[str, Any]) -> int | None:
        """``laplace(eps=e,bins=1.0,lo=0,hi=K-1)`` without ``k`` or a domain has ``k = K``:
        with unit bins the bin indices are the inputs' indices. Other bin widths and ``lo != 0`` are
        a one-line error."""
        if params.get("lo") is None or params.get("hi") is None:
            return None
        bins = params.get("bins")
        if bins is None:
            raise LocalPrivError("laplace: lo/hi truncate the binned version; give bins=1.0 too (then lo=0,hi=K-1 "
                                 "imply k=K)")
        if isinstance(bins, bool) or not isinstance(bins, (int, float)) or float(bins) != 1.0:
            raise LocalPrivError(f"laplace: lo/hi imply k only with unit bins (bins=1.0), got bins={bins!r}; give k")
        return k_from_bounds(cls.spec_name, params["lo"], params["hi"])

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "bins": self.bins, "lo": self.lo, "hi": self.hi,
                "grid": self.grid if self._grid_given else None}

    @property
    def continuous(self) -> bool:
        """The unbinned version (real-valued reports, on the grid ``g``)."""
        return self.bins is None

    @property
    def truncated(self) -> bool:
        return self.lo is not None

    @property
    def report_kind(self) -> str:  # type: ignore[override]  # a ClassVar in Mechanism; here it depends on bins
        return "float64" if self.continuous else "int64"

    @property
    def n_outputs(self) -> int | None:
        return self.hi - self.lo + 1 if self.lo is not None and self.hi is not None else None

    # ---- sampling -------------------------------------------------------------------------
    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """Grid version: ``z = g clamp(x/g + D, +-2^53)`` with ``D`` from the exact-table discrete
        Laplace sampler (integers throughout, one exact scaling at the end). Unit bins: ``x +
        round(N)`` from the same sampler (``kappa = e^{eps/2}``). Other bins: the bin of ``x + N``,
        ``N`` from ``rng.laplace``. Binned reports are clamped to ``lo..hi`` when truncated."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        if self.continuous:
            s, N = self.steps_per_unit, self.CLAMP
            assert self.sampler is not None and s is not None and self.grid is not None  # set with no bins
            n = self.sampler.signed(x.size, rng, cap=N + (self.k - 1) * s)  # int64
            n += x * s
            np.clip(n, -N, N, out=n)
            return n.astype(np.float64) * self.grid  # exact: |n| <= 2^53, g a power of two
        if self.sampler is not None:  # unit bins, drawn exactly: j = x + round(N)
            # past max(|lo|, |hi|) + k every magnitude gives the same clamped bin
            cap = 1 << 62 if self.lo is None or self.hi is None else max(abs(self.lo), abs(self.hi)) + self.k + 1
            cap = max(cap, self.sampler.B)
            j = self.sampler.signed(x.size, rng, cap=cap).astype(np.int64)
            j += x
            if self.lo is not None:
                np.clip(j, self.lo, self.hi, out=j)
                j -= self.lo
            return j
        assert self.bins is not None  # neither the grid version nor unit bins: other bin widths
        z = x + rng.laplace(0.0, 1.0 / self.eps, x.size)
        j = np.floor(z / self.bins + 0.5).astype(np.int64)
        if self.lo is not None:
            j = np.clip(j, self.lo, self.hi) - self.lo
        return j

    # ---- channel / likelihood -------------------------------------------------------------
    def _bin_prob(self, x: np.ndarray, j: np.ndarray) -> np.ndarray:
        """``P(bin j | x)`` with ``j`` an absolute bin index (clamped ends when truncated)."""
        w = self.bins
        assert w is not None  # binned versions only
        u = (j - 0.5) * w - x
        v = (j + 0.5) * w - x
        if self.truncated:
            u = np.where(j == self.lo, -np.inf, u)
            v = np.where(j == self.hi, np.inf, v)
        p = laplace_interval_prob(u, v, self.eps)
        if self.truncated:
            p = np.where((j < self.lo) | (j > self.hi), 0.0, p)
        return p

    def _grid_log_prob(self, x: np.ndarray, steps: np.ndarray) -> np.ndarray:
        """``log P(z | x)`` of the grid version for reports ``z = g * steps`` (broadcast):
        the discrete Laplace pmf at ``steps - x/g``, the tail masses at the clamped ends."""
        s, N = self.steps_per_unit, self.CLAMP
        assert self.sampler is not None and s is not None  # the grid version
        d = steps - x * s
        inner = self.sampler.log_pmf(d)
        up = self.sampler.log_tail(np.maximum(N - x * s, 1))     # P(D >= N - x/g)
        down = self.sampler.log_tail(N + x * s)                  # P(D <= -N - x/g)
        return np.where(steps >= N, up, np.where(steps <= -N, down, inner))

    def channel(self) -> np.ndarray:
        lo, hi = self.lo, self.hi
        if lo is None or hi is None:
            raise LocalPrivError(f"{self}: outputs are unbounded (grid or untruncated bins); "
                                 "use likelihood(reports), or bins=1.0,lo=0,hi=k-1 for a finite channel")
        check_dense_size(self.k, hi - lo + 1, f"{self} channel")
        return self._bin_prob(np.arange(self.k)[:, None], np.arange(lo, hi + 1)[None, :])

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        r = np.asarray(reports)
        if self.continuous:
            r = r.astype(np.float64)
            if not np.all(np.isfinite(r)):
                raise LocalPrivError(f"{self}: reports contain NaN or infinite values")
            steps = r / self.grid
            if np.any(steps != np.round(steps)) or np.any(np.abs(steps) > self.CLAMP):
                raise LocalPrivError(f"{self}: reports must be multiples of the grid {self.grid!r} "
                                     f"within +-2^53 steps (reports of the former float version, or "
                                     f"another grid?)")
            return r
        if r.dtype.kind == "f" and np.any(r != np.round(r)):
            raise LocalPrivError(f"{self}: binned reports must be integer bin indices")
        if not self.truncated:
            return r.astype(np.int64)
        return super().output_index(r)

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """``G[x, j]``: the grid pmf ``P(z_j | x)`` (unbinned) or ``P(bin | x)`` (binned)."""
        z = self.output_index(reports)
        check_dense_size(self.k, z.size, f"{self} likelihood of {z.size} reports")
        x = np.arange(self.k)[:, None]
        if self.continuous:
            return np.exp(self._grid_log_prob(x, (z / self.grid)[None, :]))
        if self.truncated:
            z = z + self.lo
        return self._bin_prob(x, z[None, :])

    def likelihood_block(self, reports: ArrayLike, counts: np.ndarray) -> LikelihoodBlock:
        """Structured products: grid reports and unit bins by two first-order
        recurrences (``O(k + m)``, :class:`~localpriv.likelihood.structured.ExpKernelBlock`; the clamped
        end bins as exact columns); the dense default for other bin widths."""

        block = laplace_block_for(self, self.output_index(reports), counts)
        return block if block is not None else super().likelihood_block(reports, counts)

    # ---- privacy --------------------------------------------------------------------------
    def _probe(self) -> np.ndarray:
        """Likelihood on outputs reaching beyond both ends of the inputs (where the sup of the
        ratios is attained); the exact channel when truncated."""
        if self.truncated:
            return self.channel()
        if self.continuous:
            assert self.grid is not None  # set with no bins
            return self.likelihood(np.arange(-1.0, self.k + 1.0, max(0.5, self.grid)))
        assert self.bins is not None
        lo = int(np.floor(-1.0 / self.bins)) - 1
        hi = int(np.ceil(self.k / self.bins)) + 1
        return self.likelihood(np.arange(lo, hi + 1))

    def _reduced_logs(self) -> np.ndarray:
        """Grid version: exact ``log P(z | x)`` of the target law on the rows ``{0, k-1}`` and the
        reports ``z in {-1, 0, k-1, k}``, which attain every column's spread: ``log P(z|x) =
        log tanh(eps g/2) - eps |z - x|`` spreads by ``eps (max_x |z-x| - min_x |z-x|) <=
        eps (k - 1)``, with equality for ``z <= 0`` or ``z >= k - 1`` (the clamped ends, tail
        masses, have the same ratios)."""
        rows = np.unique([0, self.k - 1])
        steps = np.array([-1.0, 0.0, self.k - 1.0, float(self.k)]) * self.steps_per_unit
        return self._grid_log_prob(rows[:, None], steps[None, :])

    def _bin_extremes(self) -> np.ndarray:
        """Binned: ``P(bin j | x)`` on the rows that attain each column's maximum and minimum, for the
        columns of :meth:`_probe` (``5 x m``, never ``k x m``).

        ``P(bin j | x) = F((j + 1/2) w - x) - F((j - 1/2) w - x)`` is the Laplace density convolved
        with an interval: log-concave in ``x`` (Prekopa) and symmetric about the bin centre
        ``c_j = j w``, so over ``x in 0..k-1`` its minimum is at ``x = 0`` or ``x = k - 1`` and its
        maximum at an integer next to ``c_j`` (``floor``/``ceil``, with a neighbour each side
        against rounding). The clamped end bins (truncated) are monotone in ``x``: extremes at the
        ends. The entries are the channel's own floats, so the level equals the dense one."""
        assert self.bins is not None
        if self.truncated:
            assert self.lo is not None and self.hi is not None
            j0, j1 = self.lo, self.hi
        else:
            j0 = int(np.floor(-1.0 / self.bins)) - 1
            j1 = int(np.ceil(self.k / self.bins)) + 1
        check_dense_size(6, j1 - j0 + 1, f"{self} level from the bins' extreme rows")
        j = np.arange(j0, j1 + 1)
        centre = np.floor(j * self.bins)
        last = self.k - 1
        rows = np.stack([np.zeros_like(centre), np.full_like(centre, last), centre - 1, centre, centre + 1,
                         centre + 2])
        rows = np.clip(rows, 0, last)
        return self._bin_prob(rows, j[None, :])

    def _sampler_excess(self, shift_units: ArrayLike) -> np.ndarray:
        """How much the sampler's integer tables can raise ``log P(z|x)/P(z|x')`` above the
        target law's ratio, for ``|x - x'| = shift_units`` (grid version and exact unit bins; 0
        for the float-sampled bins)."""
        if self.sampler is None:
            return np.zeros(np.shape(shift_units))
        return self.sampler.excess(np.asarray(shift_units, dtype=float) * self.steps_per_unit)

    def epsilon_ldp(self) -> float:
        """LDP level. Grid version, from the structure (any ``k``): the target law's level from the
        exact log-probabilities on the rows and columns that attain it (:meth:`_reduced_logs`,
        ``eps (k - 1)``) plus the sampler's bound for the largest shift ``(k - 1)/g``. Binned:
        from the channel (truncated) or the bin likelihood beyond both ends, plus (unit bins,
        drawn exactly) the sampler's bound for a shift of ``k - 1`` bins. Binned levels read each column
        only on the rows that attain its extremes (:meth:`_bin_extremes`): ``O(k / w)``, never
        ``k x (k / w)``."""
        if self.continuous:
            level = ldp_epsilon_from_logs(self._reduced_logs()) + float(self._sampler_excess(self.k - 1))
            return checked_epsilon(level, str(self))
        if self.sampler is None:
            return ldp_epsilon(self._bin_extremes(), what=str(self))
        with warnings.catch_warnings():  # one warning, for the total, below
            warnings.simplefilter("ignore", PrivacyWarning)
            level = ldp_epsilon(self._bin_extremes())
        return checked_epsilon(level + float(self._sampler_excess(self.k - 1)), str(self))

    def epsilon_geo(self, distance: ArrayLike | None = None) -> float:
        """Geo level for ``d(x, x') = |x - x'|`` (the default, index units) or a given ``distance``.

        Grid version with the default metric, from the structure (any ``k``): the target law has
        ``log P(z|x) - log P(z|x') = eps (|z - x'| - |z - x|) <= eps |x - x'|``, attained by
        ``z <= min(x, x')`` (computed at ``z = -1``, ``x, x' = 0, 1``), and the sampler adds at most
        ``max_{1 <= D <= k-1} excess(D/g) / D``. Otherwise: :func:`~localpriv.mechanisms.privacy.geo_epsilon`
        of the channel (truncated) or of the likelihood beyond both ends of the inputs, plus
        (grid version) ``max_{x != x'} excess(|x - x'|/g) / d(x, x')``.
        """
        if self.k < 2:
            return 0.0
        if distance is None and self.continuous:
            assert self.steps_per_unit is not None  # set with no bins
            logs = self._grid_log_prob(np.array([[0], [1]]), np.array([[-float(self.steps_per_unit)]]))
            shifts = np.arange(1, self.k, dtype=float)
            level = float(logs[0, 0] - logs[1, 0]) + float(np.max(self._sampler_excess(shifts) / shifts))
            return checked_epsilon(level, str(self), kind="epsilon_geo")
        if distance is None:
            check_dense_size(self.k, self.k, f"{self} distance matrix")
            idx = np.arange(self.k, dtype=float)
            distance = np.abs(idx[:, None] - idx[None, :])
        if self.sampler is None:
            return geo_epsilon(self._probe(), distance, what=str(self))
        d = np.asarray(distance, dtype=float)
        with warnings.catch_warnings():  # one warning, for the total, below
            warnings.simplefilter("ignore", PrivacyWarning)
            level = geo_epsilon(self._probe(), d)
        idx = np.arange(self.k, dtype=float)
        off = ~np.eye(self.k, dtype=bool)
        excess = self._sampler_excess(np.abs(idx[:, None] - idx[None, :]))
        with np.errstate(divide="ignore"):  # a zero distance between inputs: infinite level
            level += float(np.max(excess[off] / d[off]))
        return checked_epsilon(level, str(self), kind="epsilon_geo")
