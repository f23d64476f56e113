"""The Piecewise mechanism for a number in ``[-1, 1]`` (``pm``).

Wang, Xiao, Yang, Zhao, Hui, Shin, Shin and Yu, "Collecting and Analyzing Multidimensional Data
with Local Differential Privacy", ICDE 2019, Algorithm 2. With ``s = e^{eps/2}``::

    C = (s + 1) / (s - 1),      l(t) = (C + 1)/2 t - (C - 1)/2,      r(t) = l(t) + C - 1,

a value ``t`` in ``[-1, 1]`` is reported as a real ``z`` in ``[-C, C]`` with density::

    f(z | t) = p = s / (2C)           for z in [l(t), r(t)]      (probability s / (s + 1)),
               p / e^eps = 1/(2 C s)  elsewhere in [-C, C],

so ``E[z | t] = t`` (the reports' mean is unbiased for the users' mean) and
``Var[z | t] = t^2 / (s - 1) + (s + 3) / (3 (s - 1)^2)`` (Wang et al., Lemma 2).

Input: a domain index ``i`` perturbed at its cell centre ``t_i = (2i + 1)/k - 1``
(:mod:`localpriv.mechanisms._numeric`); reports are ``float64``. The outputs cannot be enumerated,
so the privacy level comes from the proven formula, evaluated with the two density values the
sampler and the likelihood use: ``log p - log(p / e^eps)`` (every report has density ``p`` under
the inputs whose window holds it and ``p/e^eps`` under the others, and for ``k >= 2`` some report
is in one window and not another; ``k = 1``: 0). ``tests/test_numeric_mechanisms.py`` audits it:
empirical output densities per input against ``f``. The likelihood ``G[x, j] = f(z_j | t_x)``
serves the EM engine (IBU, EMS) on the same footing as every other mechanism.

Floating point: ``z`` is computed in float64 from ``t`` and a uniform draw, so its last bits
depend on ``t`` beyond the density above (as for the continuous Laplace mechanism before its
reports were put on a grid, docs/decisions/0008-grid-released-laplace-and-she.md); releasing ``z``
on a fixed grid would remove that channel (not done yet).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.mechanisms._numeric import mean_interval, signed_centres
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

if TYPE_CHECKING:
    from localpriv.domains.base import Domain
    from localpriv.utils.interval import Interval

__all__ = ["Piecewise", "WindowBlock"]


@register
class Piecewise(Mechanism):
    """The Piecewise mechanism (Wang et al. 2019) on ``k`` cells of ``[-1, 1]`` at level ``eps``.

    Parameters
    ----------
    k : int
        Number of input cells (the domain's size).
    eps : float
        Privacy parameter.
    """

    spec_name = "pm"
    examples = (dict(spec="pm(k=5,eps=1.0)", eps_ldp=1.0, tight=True),)
    report_kind = "float64"

    def __init__(self, k: int, eps: float) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.eps = check_eps(eps)
        s = math.exp(0.5 * self.eps)
        sm1 = math.expm1(0.5 * self.eps)  # s - 1, accurate for small eps
        #: ``e^{eps/2}``
        self.s = s
        #: the output range ``[-C, C]``: ``C = (s + 1)/(s - 1)``
        self.C = (s + 1.0) / sm1
        #: the two density values: ``p`` in the window, ``p / e^eps`` outside
        self.p_in = s / (2.0 * self.C)
        self.p_out = 1.0 / (2.0 * self.C * s)
        #: the probability of reporting from the window, ``s / (s + 1)``
        self.keep = s / (s + 1.0)
        self._sm1 = sm1

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps}

    @property
    def n_outputs(self) -> None:
        return None

    def window(self, t: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``(l(t), r(t))``: the high-density window of input ``t``."""
        t = np.asarray(t, dtype=float)
        left = 0.5 * (self.C + 1.0) * t - 0.5 * (self.C - 1.0)
        return left, left + (self.C - 1.0)

    def perturb(self, t: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """The client on real values ``t`` in ``[-1, 1]`` (vectorized): with probability
        ``s/(s+1)`` a uniform draw from ``[l(t), r(t)]``, else from ``[-C, l(t)) U (r(t), C]``
        (a uniform draw ``W`` on ``[0, C + 1)``, the two pieces laid end to end)."""
        t = np.asarray(t, dtype=float)
        left, right = self.window(t)
        keep = rng.random(t.size) < self.keep
        inner = left + (self.C - 1.0) * rng.random(t.size)
        w = (self.C + 1.0) * rng.random(t.size)
        span_left = left + self.C  # length of [-C, l)
        outer = np.where(w < span_left, -self.C + w, right + (w - span_left))
        return np.where(keep, inner, outer)

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """One ``float64`` report per input index, perturbed at the cell's centre ``t_x``."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        return self.perturb(signed_centres(self.k)[x], rng)

    def channel(self) -> np.ndarray:
        raise LocalPrivError(f"{self}: reports are real numbers (no finite channel); use likelihood(reports)")

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        """Reports as float64, refused unless finite numbers in ``[-C, C]``."""
        r = np.asarray(reports)
        if r.dtype.kind not in "iuf":
            raise LocalPrivError(f"{self}: reports must be numbers, got {r.dtype}")
        r = r.astype(np.float64)
        if r.ndim != 1:
            r = r.reshape(-1)
        bad = ~np.isfinite(r) | (np.abs(r) > self.C)
        if bad.any():
            raise LocalPrivError(f"{self}: reports outside [-C, C] = [{-self.C:.6g}, {self.C:.6g}]: "
                                 f"{np.unique(r[bad])[:5].tolist()}")
        return r

    def density(self, z: ArrayLike, t: ArrayLike) -> np.ndarray:
        """``f(z | t)`` (broadcast): ``p`` in the window ``[l(t), r(t)]``, ``p / e^eps`` elsewhere."""
        left, right = self.window(t)
        z = np.asarray(z, dtype=float)
        return np.where((z >= left) & (z <= right), self.p_in, self.p_out)

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """``G[x, j] = f(z_j | t_x)`` as a dense ``k x m`` matrix."""
        z = self.output_index(reports)
        check_dense_size(self.k, z.size, f"{self} likelihood of {z.size} reports")
        return self.density(z[None, :], signed_centres(self.k)[:, None])

    def likelihood_block(self, reports: ArrayLike, counts: np.ndarray) -> LikelihoodBlock:
        """``G[x, j] = p_out + (p_in - p_out) [l(t_x) <= z_j <= r(t_x)]`` as a :class:`WindowBlock`:
        ``O((k + m) log m)`` to set up, ``O(k + m)`` per product (no ``k x m`` matrix)."""
        z = self.output_index(reports)
        left, right = self.window(signed_centres(self.k))
        return WindowBlock(z, left, right, self.p_in, self.p_out, counts)

    def epsilon_ldp(self) -> float:
        """``log p - log(p / e^eps)`` from the two density values in use (module docstring; the
        proven level of Wang et al. 2019, Lemma 1), 0 for a single input."""
        if self.k < 2:
            return 0.0
        return checked_epsilon(math.log(self.p_in) - math.log(self.p_out), str(self))

    # ---- the classic estimator ------------------------------------------------------------
    def unbiased(self, reports: ArrayLike) -> np.ndarray:
        """Per-report unbiased estimates of ``t``: the reports themselves."""
        return self.output_index(reports)

    def report_variance(self, t: ArrayLike) -> np.ndarray:
        """``Var[z | t] = t^2 / (s - 1) + (s + 3) / (3 (s - 1)^2)`` (Wang et al. 2019, Lemma 2)."""
        t = np.asarray(t, dtype=float)
        return t ** 2 / self._sm1 + (self.s + 3.0) / (3.0 * self._sm1 ** 2)

    def estimate_mean(self, reports: ArrayLike, domain: Domain | None = None, level: float = 0.95) -> Interval:
        """The unbiased mean of the reports with its normal interval, in the domain's units (``t``
        without a domain); variance ``mean_u Var[z | t_u] / n`` (:meth:`report_variance`)."""
        return mean_interval(self.unbiased(reports), self.k, True, domain, level, "pm (unbiased)")


class WindowBlock(LikelihoodBlock):
    """``G[x, j] = scale (lo + (hi - lo) [left_x <= z_j <= right_x])`` for windows whose ends
    ``left``, ``right`` increase with ``x`` (Piecewise, and its part of Hybrid).

    Products by prefix sums: the inputs whose window holds ``z_j`` are the range
    ``b_j..a_j`` with ``a_j = #{x: left_x <= z_j} - 1`` and ``b_j = #{x: right_x < z_j}``
    (``theta @ G``), and the reports in the window of ``x`` are a range of the sorted reports
    (``G @ w``); the same for ``hessian_diagonal`` with ``lo^2``, ``hi^2``. The comparisons are
    those of :meth:`Piecewise.density` on the same floats, so the block equals the dense likelihood
    to rounding.
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
