"""The Piecewise mechanism for a number in ``[-1, 1]`` (``pm``), released on a grid.

Wang, Xiao, Yang, Zhao, Hui, Shin, Shin and Yu, "Collecting and Analyzing Multidimensional Data
with Local Differential Privacy", ICDE 2019, Algorithm 2. With ``s = e^{eps/2}``::

    C = (s + 1) / (s - 1),      l(t) = (C + 1)/2 t - (C - 1)/2,      r(t) = l(t) + C - 1,

the paper reports a real ``z`` in ``[-C, C]`` with density ``p = s / (2C)`` on the window
``[l(t), r(t)]`` (probability ``s / (s + 1)``) and ``p / e^eps`` elsewhere.

Computed in floating point (``l(t) + (C - 1) U``), the low bits of ``z`` depend on ``t`` beyond
that density: reports possible under one input are impossible under another, an unbounded loss
(Mironov, CCS 2012; docs/decisions/0028-grid-released-piecewise-and-hybrid.md). So the reports
are the points of a fixed grid (the discrete Piecewise mechanism)::

    z_i = g (i - (N - 1)/2),   i = 0..N-1,      g = 2^j the largest <= min(C - 1, (C + 1)/k) / 1024,
    W = round((C - 1)/g) window points,  D = round((C + 1)/(k g)) points per input cell,
    N = W + k D + (D mod 2),                  window of cell x: i in [a_x, a_x + W - 1],
    a_x = (D + (D mod 2))/2 + x D,

and ``P(z_i | x) = p_in = q / W`` in the window, ``p_out = (1 - q) / (N - W)`` elsewhere, with
``q = T / 2^64`` and ``1 - q = R / 2^64`` integers chosen so that ``p_in / p_out`` is at most
``e^eps`` (``R`` rounded up). The client draws it exactly (:mod:`~localpriv.mechanisms._sampling`):
a 64-bit word against ``T`` chooses the window, then a uniform integer below ``W`` (or ``N - W``,
the outer points laid end to end), and ``z = (2 i - (N - 1)) g / 2``, an exact float. The privacy
level is computed from these integers: ``|log(T (N - W) / (R W))|`` (0 for ``k = 1``).

The windows move by ``D`` points per cell, so the mean is linear in ``t``:
``E[z | t_x] = kappa gamma t_x`` with ``gamma = g k D / 2`` (``~ (C + 1)/2``) and
``kappa = q - (1 - q) W / (N - W)`` (``~ (s - 1)/s``), and ``z / (kappa gamma)`` is unbiased
(:meth:`Piecewise.unbiased`; the factor is ``1 +- 10^-3``). Its variance (:meth:`report_variance`)
is that of the grid law, which tends to Wang et al.'s Lemma 2,
``t^2 / (s - 1) + (s + 3) / (3 (s - 1)^2)``, as ``g -> 0``.

Input: a domain index ``i`` perturbed at its cell centre ``t_i = (2i + 1)/k - 1``
(:mod:`localpriv.mechanisms._numeric`); reports are ``float64``. The likelihood ``G[x, j] =
P(z_j | x)`` serves the EM engine (IBU, EMS) through a :class:`WindowBlock`. The grid needs at most
``2^53`` points (``eps`` up to about 56); beyond, a one-line error.
"""
from __future__ import annotations

import math
from decimal import ROUND_CEILING, Decimal, localcontext
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.mechanisms._numeric import mean_interval
from localpriv.mechanisms._sampling import bernoulli64, dyadic64, uniform_below
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

if TYPE_CHECKING:
    from localpriv.domains.base import Domain
    from localpriv.utils.interval import Interval

__all__ = ["Piecewise", "WindowBlock", "PM_POINTS_PER_WINDOW", "PM_MAX_POINTS"]

#: the grid step is at most the window's (and a cell's) length over this many points
PM_POINTS_PER_WINDOW = 1024
#: the most grid points (``2^53``: every ``2 i - (N - 1)`` an exact float)
PM_MAX_POINTS = 1 << 53
_TWO64 = 1 << 64


@register
class Piecewise(Mechanism):
    """The Piecewise mechanism (Wang et al. 2019) on ``k`` cells of ``[-1, 1]`` at level ``eps``,
    released on a grid (module docstring).

    Parameters
    ----------
    k : int
        Number of input cells (the domain's size).
    eps : float
        Privacy parameter.
    avoid : float, optional
        A value the grid must not contain (Hybrid: Duchi's ``+-B``); when it would, the grid is
        shifted by half a step (one more window point). Not part of the spec.
    """

    spec_name = "pm"
    examples = (dict(spec="pm(k=5,eps=1.0)", eps_ldp=1.0, tight=True),)
    report_kind = "float64"

    def __init__(self, k: int, eps: float, *, avoid: float | None = None) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.eps = check_eps(eps)
        s = math.exp(0.5 * self.eps) if self.eps < 1400.0 else math.inf
        sm1 = math.expm1(0.5 * self.eps) if self.eps < 1400.0 else math.inf  # s - 1, accurate for small eps
        #: ``e^{eps/2}``
        self.s = s
        #: the paper's output range ``[-C, C]``: ``C = (s + 1)/(s - 1)``
        self.C = 1.0 + 2.0 / sm1
        c_minus_1, c_plus_1 = 2.0 / sm1, 2.0 + 2.0 / sm1
        base = min(c_minus_1, c_plus_1 / self.k) / PM_POINTS_PER_WINDOW
        n_est = 2.0 * c_plus_1 / base if base > 0 else math.inf
        if not (math.isfinite(n_est) and n_est < PM_MAX_POINTS / 2):
            raise LocalPrivError(f"{type(self).spec_name}(k={self.k},eps={self.eps:g}): the grid would need "
                                 f"{n_est:.3g} points, above 2^52 (its window shrinks like e^(-eps/2)); "
                                 "use eps <= 56")
        #: the grid step ``g`` (a power of two)
        self.grid = math.ldexp(1.0, math.frexp(base)[1] - 1)
        W = max(1, round(c_minus_1 / self.grid))
        D = max(1, round(c_plus_1 / (self.k * self.grid)))
        N = W + self.k * D + D % 2
        if avoid is not None and self._on_grid(float(avoid), N):
            W, N = W + 1, N + 1
        #: grid points ``N``, window points ``W``, points per input cell ``D``
        self.n_points, self.width, self.step = N, W, D
        #: the largest report, ``g (N - 1)/2`` (``~ C``)
        self.z_max = self.grid * (N - 1) / 2
        # the outer mass R / 2^64, rounded up: p_in / p_out = T (N - W) / (R W) <= e^eps
        # (e^eps to 60 digits: the ratio is then within 2^-64 of e^eps, relative, even for tiny eps)
        with localcontext() as ctx:
            ctx.prec = 60
            out = Decimal(N - W) * _TWO64 / (Decimal(self.eps).exp() * W + (N - W))
            R = min(_TWO64 - 1, max(1, int(out.to_integral_value(rounding=ROUND_CEILING))))
        #: the window's probability ``q = T / 2^64`` (``T`` the 64-bit threshold the client draws against)
        self.keep_threshold = _TWO64 - R
        self.keep = float(dyadic64(self.keep_threshold))
        self._outer = R
        #: the two probabilities of a grid point: ``p_in`` in the window, ``p_out`` outside
        self.p_in = float(Fraction(self.keep_threshold, _TWO64 * W))
        self.p_out = float(Fraction(R, _TWO64 * (N - W))) if N > W else 0.0
        #: ``kappa gamma``: ``E[z | t] = kappa gamma t``
        kappa = Fraction(self.keep_threshold * (N - W) - R * W, _TWO64 * (N - W)) if N > W else Fraction(1)
        self.mean_factor = float(kappa * Fraction(self.grid) * self.k * D / 2)

    def _on_grid(self, v: float, N: int) -> bool:
        u = 2.0 * v / self.grid + (N - 1)
        return bool(abs(v) <= self.grid * (N - 1) / 2 and u == math.floor(u) and int(u) % 2 == 0)

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps}

    @property
    def n_outputs(self) -> None:
        return None

    def values(self, i: ArrayLike) -> np.ndarray:
        """The grid points ``z_i = (2 i - (N - 1)) g / 2`` (exact floats)."""
        i = np.asarray(i, dtype=np.int64)
        return (2 * i - (self.n_points - 1)).astype(np.float64) * (0.5 * self.grid)

    def starts(self) -> np.ndarray:
        """``a_x = (D + (D mod 2))/2 + x D``: the first window point of every input cell."""
        D = self.step
        return (D + D % 2) // 2 + np.arange(self.k, dtype=np.int64) * D

    def window(self, t: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``(first, last)`` grid values of the window of real inputs ``t`` in ``[-1, 1]``: the start
        ``(N - W)/2 + k D t / 2`` rounded to a grid index (exact at the cell centres)."""
        tt: np.ndarray = np.clip(np.asarray(t, dtype=float), -1.0, 1.0)
        a = np.floor(0.5 * (self.n_points - self.width) + 0.5 * self.k * self.step * tt + 0.5)
        a = np.clip(a, 0, self.n_points - self.width).astype(np.int64)
        return self.values(a), self.values(a + self.width - 1)

    def _cell_windows(self) -> tuple[np.ndarray, np.ndarray]:
        a = self.starts()
        return self.values(a), self.values(a + self.width - 1)

    def draw_index(self, starts: ArrayLike, rng: np.random.Generator, threshold: int | None = None) -> np.ndarray:
        """Grid indices ``i``, one per window start: the window with probability ``T / 2^64`` (one
        64-bit word against ``T``), then a uniform point of the window or of the ``N - W`` outer
        points (laid end to end, the window skipped). Integer arithmetic only."""
        a = np.asarray(starts, dtype=np.int64)
        keep = bernoulli64([self.keep_threshold if threshold is None else threshold], np.zeros(a.size, np.int64),
                           rng)
        W, N = self.width, self.n_points
        if N == W:
            keep[:] = True
        u = uniform_below(np.where(keep, W, max(N - W, 1)), rng)
        return np.where(keep, a + u, np.where(u < a, u, u + W))

    def perturb(self, t: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """The client on real values ``t`` in ``[-1, 1]`` (vectorized): grid reports from the window
        of ``t`` (:meth:`window`) with probability ``q``, else from the outer points."""
        t = np.asarray(t, dtype=float).reshape(-1)
        first, _ = self.window(t)
        a = np.rint(2.0 * first / self.grid + (self.n_points - 1)).astype(np.int64) // 2
        return self.values(self.draw_index(a, rng))

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """One ``float64`` grid report per input index, from the cell's window."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        return self.values(self.draw_index(self.starts()[x], rng))

    def channel(self) -> np.ndarray:
        raise LocalPrivError(f"{self}: reports are real numbers (no finite channel); use likelihood(reports)")

    def grid_index(self, reports: ArrayLike) -> np.ndarray:
        """Grid indices of reports, refused unless finite points of the grid."""
        r = np.asarray(reports)
        if r.dtype.kind not in "iuf":
            raise LocalPrivError(f"{self}: reports must be numbers, got {r.dtype}")
        r = r.astype(np.float64).reshape(-1)
        with np.errstate(invalid="ignore", over="ignore"):
            u = 2.0 * r / self.grid + (self.n_points - 1)
            bad = ~np.isfinite(u) | (u < 0) | (u > 2 * (self.n_points - 1)) | (u != np.floor(u))
            bad |= ~bad & (np.where(bad, 0.0, u) % 2 != 0)
        if bad.any():
            raise LocalPrivError(f"{self}: reports must be points of its grid (step {self.grid!r}, "
                                 f"|z| <= {self.z_max:.6g}): {np.unique(r[bad])[:5].tolist()}")
        return (u.astype(np.int64)) // 2

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        """Reports as float64, refused unless finite points of the grid."""
        self.grid_index(reports)
        return np.asarray(reports).astype(np.float64).reshape(-1)

    def pmf(self, z: ArrayLike, x: ArrayLike) -> np.ndarray:
        """``P(z | x)`` for grid reports ``z`` and input cells ``x`` (broadcast): ``p_in`` in the
        window of cell ``x``, ``p_out`` elsewhere."""
        left, right = self._cell_windows()
        x = np.asarray(x, dtype=np.int64)
        z = np.asarray(z, dtype=float)
        return np.where((z >= left[x]) & (z <= right[x]), self.p_in, self.p_out)

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """``G[x, j] = P(z_j | x)`` as a dense ``k x m`` matrix."""
        z = self.output_index(reports)
        check_dense_size(self.k, z.size, f"{self} likelihood of {z.size} reports")
        return self.pmf(z[None, :], np.arange(self.k)[:, None])

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> LikelihoodBlock:
        """``G[x, j] = p_out + (p_in - p_out) [left_x <= z_j <= right_x]`` as a :class:`WindowBlock`:
        ``O((k + m) log m)`` to set up, ``O(k + m)`` per product (no ``k x m`` matrix)."""
        z = self.output_index(reports)
        left, right = self._cell_windows()
        return WindowBlock(z, left, right, self.p_in, self.p_out, counts)

    def epsilon_ldp(self) -> float:
        """``|log(T (N - W) / (R W))|``, the ratio of the two grid-point probabilities, from the
        integers the client draws with (module docstring); 0 for a single input."""
        if self.k < 2 or self.n_points == self.width:
            return 0.0
        T, R, N, W = self.keep_threshold, self._outer, self.n_points, self.width
        ratio_m1 = Fraction(T * (N - W) - R * W, R * W)
        if ratio_m1 < 0:
            ratio_m1 = Fraction(R * W - T * (N - W), T * (N - W))
        return checked_epsilon(math.log1p(float(ratio_m1)), str(self))

    # ---- the classic estimator ------------------------------------------------------------
    def unbiased(self, reports: ArrayLike) -> np.ndarray:
        """Per-report unbiased estimates of ``t``: ``z / (kappa gamma)`` (module docstring)."""
        return self.output_index(reports) / self.mean_factor

    def report_variance(self, t: ArrayLike) -> np.ndarray:
        """``Var[z / (kappa gamma) | t]`` of the grid law, for the window centred at ``gamma t``::

            E[z^2 | t] = q (c^2 + g^2 (W^2 - 1)/12)
                         + (1 - q) (g^2 N (N^2 - 1)/12 - W (c^2 + g^2 (W^2 - 1)/12)) / (N - W),

        ``c = gamma t`` (the window's centre), minus ``t^2`` after scaling; it tends to Wang et
        al.'s Lemma 2, ``t^2 / (s - 1) + (s + 3) / (3 (s - 1)^2)``, as ``g -> 0``."""
        t = np.asarray(t, dtype=float)
        g, N, W = self.grid, float(self.n_points), float(self.width)
        q, out = self.keep, float(dyadic64(self._outer))
        c = 0.5 * g * self.k * self.step * t
        win = c ** 2 + g ** 2 * (W ** 2 - 1.0) / 12.0
        ez2 = q * win + (out * (g ** 2 * N * (N ** 2 - 1.0) / 12.0 - W * win) / (N - W) if N > W else 0.0)
        return ez2 / self.mean_factor ** 2 - t ** 2

    def estimate_mean(self, reports: ArrayLike, domain: Domain | None = None, level: float = 0.95,
                      counts: ArrayLike | None = None) -> Interval:
        """The unbiased mean of the reports with its normal interval, in the domain's units (``t``
        without a domain); per-report variance :meth:`report_variance`."""
        return mean_interval(self.unbiased(reports), self.k, True, domain, level, "pm (unbiased)",
                             counts)


class WindowBlock(LikelihoodBlock):
    """``G[x, j] = scale (lo + (hi - lo) [left_x <= z_j <= right_x])`` for windows whose ends
    ``left``, ``right`` increase with ``x`` (Piecewise, and its part of Hybrid).

    Products by prefix sums: the inputs whose window holds ``z_j`` are the range
    ``b_j..a_j`` with ``a_j = #{x: left_x <= z_j} - 1`` and ``b_j = #{x: right_x < z_j}``
    (``theta @ G``), and the reports in the window of ``x`` are a range of the sorted reports
    (``G @ w``); the same for ``hessian_diagonal`` with ``lo^2``, ``hi^2``. The comparisons are
    those of :meth:`Piecewise.pmf` on the same (exact grid) floats, so the block equals the dense
    likelihood to rounding.
    """

    def __init__(self, z: ArrayLike, left: np.ndarray, right: np.ndarray, hi: float, lo: float, counts: ArrayLike,
                 scale: float = 1.0) -> None:
        self.counts = np.asarray(counts, dtype=float)
        z = np.asarray(z, dtype=float)
        if z.size != self.counts.size:
            raise LocalPrivError(f"{z.size} reports but {self.counts.size} counts")
        self.k = int(np.size(left))
        self.hi, self.lo, self.scale = float(hi), float(lo), float(scale)
        self._a = np.searchsorted(left, z, side="right")   # x < a_j: left_x <= z_j
        self._b = np.searchsorted(right, z, side="left")   # x >= b_j: right_x >= z_j
        self._order = np.argsort(z, kind="stable")
        zs = z[self._order]
        self._from = np.searchsorted(zs, left, side="left")
        self._to = np.searchsorted(zs, right, side="right")

    def _window_in(self, theta: np.ndarray) -> np.ndarray:
        c = np.concatenate([[0.0], np.cumsum(theta)])
        return np.where(self._a > self._b, c[self._a] - c[np.minimum(self._b, self._a)], 0.0)

    def _window_of(self, w: ArrayLike) -> np.ndarray:
        c = np.concatenate([[0.0], np.cumsum(np.asarray(w, dtype=float)[self._order])])
        return c[self._to] - c[np.minimum(self._from, self._to)]

    def forward(self, theta: np.ndarray) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        return self.scale * (self.lo * theta.sum() + (self.hi - self.lo) * self._window_in(theta))

    def backward(self, w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, dtype=float)
        return self.scale * (self.lo * w.sum() + (self.hi - self.lo) * self._window_of(w))

    def hessian_diagonal(self, w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, dtype=float)
        s2 = self.scale ** 2
        return s2 * (self.lo ** 2 * w.sum() + (self.hi ** 2 - self.lo ** 2) * self._window_of(w))
