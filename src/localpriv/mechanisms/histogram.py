"""Histogram encodings: SHE and THE (Wang et al., USENIX Security 2017; seed 002).

SHE (summation with histogram encoding): the one-hot vector of ``x`` plus i.i.d. Laplace-type
noise of scale ``2/eps`` on each of the ``k`` coordinates (L1 sensitivity 2). Textbook SHE adds
continuous Laplace noise and releases floats; floating-point Laplace samplers do not release the
law their density states, bit for bit (Mironov, CCS 2012): our former float32 sampler put the
noise near 0 on a 2^-18 lattice but its tail at full float32 resolution, so values just past the
tail threshold were reachable from one input and not from the other (an unbounded privacy loss;
docs/decisions/0008-grid-released-laplace-and-she.md). We therefore release every coordinate on a
**fixed grid** of width ``g`` (a power of two, so ``1`` and every report value are exact floats)::

    z_y = [y = x] + g D_y,    D_y i.i.d. discrete Laplace,  P(D = d) = tanh(lam/2) e^{-lam |d|},
    lam = g eps / 2,

drawn by the exact sampler :class:`~localpriv.mechanisms._sampling.DigitLaplace` (sign and digits
of the magnitude from small alias tables with integer thresholds, units of ``2^-80``: the integer
arithmetic decides; no float noise is ever added to the value). ``g`` defaults to the
largest power of two ``<= (2/eps) / 1024`` (kept in ``[2^-20, 1]``): steps of about a thousandth
of the noise scale, so the law is the Laplace law to within that resolution (the variance is
``2 g^2 a / (1 - a)^2 <= 8/eps^2``, ``a = e^{-lam}``). ``|z_y / g|`` is clamped to ``2^24``
(every integer up to there is an exact float32; a clamp is post-processing, reached with
probability ``< 2 e^{-lam 2^23}`` per coordinate, and the likelihood below includes it). Reports
keep the layout of the float32 version: ``4k`` bytes per report (``n x 4k`` uint8, little-endian float32), so
they travel through :func:`localpriv.data.reports.report_table` like bit vectors, and ``+0.0`` is the
only zero that is ever written (a negative zero would tell a noise-only coordinate apart).

The server estimates ``f = (1/n) sum_i z_i`` (unbiased); we expose it through ``support_counts``
(the summed vectors) with ``p* = 1, q* = 0`` so that MI's formula gives exactly this estimator.
Exact likelihood of the released law (the discrete Laplace pmf on the grid)::

    P(z | x) = prod_y p(z_y/g - [y = x]/g) = c(z) exp(-(eps/2)(|z_x - 1| - |z_x|)),

``p`` the pmf above (tail masses at the clamp), ``c(z) = prod_y p(z_y/g)``. The ratio factor lies
in ``[e^{-eps/2}, e^{eps/2}]``, so the level of the target law is ``eps``; :meth:`SHE.epsilon_ldp`
adds the sampler's computed deviation from it (``2 * excess(1/g)``, about ``1e-14``).

THE (thresholding with histogram encoding): the same noisy vector thresholded at ``theta``;
``S(z) = {y : z_y > theta}``. We threshold on the client and report the bit vector, which is the
unary encoding with ``p* = P(1 + L > theta) = 1 - e^{-(eps/2)(1 - theta)}/2`` and
``q* = P(L > theta) = e^{-(eps/2) theta}/2`` (``L ~ Laplace(2/eps)``, ``1/2 <= theta <= 1``).
Thresholding is post-processing, so the level computed from this bit channel is ``<= eps``
(we report the computed value, not ``eps``). ``theta`` defaults to the value in ``(1/2, 1)``
minimizing MI's variance factor ``q*(1 - q*)/(p* - q*)^2``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_report_bytes
from localpriv.mechanisms._sampling import (
    client_inputs,
    default_grid,
    digit_laplace,
    fill_in_streams,
    power_of_two_grid,
)
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.mechanisms.unary import SupportBlock, UnaryEncoding
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng


def minimize_scalar(*args: Any, **kwargs: Any) -> Any:
    """``scipy.optimize.minimize_scalar``, imported on first use (keeps ``import localpriv`` quick)."""
    from scipy.optimize import minimize_scalar as _f
    return _f(*args, **kwargs)


__all__ = ["THE", "SHE", "the_probabilities", "optimal_threshold"]


def the_probabilities(eps: float, theta: float) -> tuple[float, float]:
    """``(p*, q*)`` of THE at threshold ``theta`` in ``[1/2, 1]``."""
    p = 1.0 - 0.5 * np.exp(-(eps / 2.0) * (1.0 - theta))
    q = 0.5 * np.exp(-(eps / 2.0) * theta)
    return float(p), float(q)


def optimal_threshold(eps: float) -> float:
    """``argmin_{theta in [1/2, 1]} q*(1-q*) / (p*-q*)^2`` (MI's variance, Wang et al. 2017)."""
    def var(t: float) -> float:
        p, q = the_probabilities(eps, t)
        return q * (1 - q) / (p - q) ** 2
    return float(minimize_scalar(var, bounds=(0.5, 1.0), method="bounded",
                                 options={"xatol": 1e-10}).x)


@register
class THE(UnaryEncoding):
    """Thresholding with histogram encoding, reported as thresholded bits (see module doc)."""

    spec_name = "the"
    examples = (dict(spec="the(k=4,eps=1.0)", eps_ldp=1.0),)

    def __init__(self, k: int, eps: float, theta: float | None = None) -> None:
        self.eps = check_eps(eps)
        self._theta_given = theta is not None
        self.theta = optimal_threshold(self.eps) if theta is None else float(theta)
        if not 0.5 <= self.theta <= 1.0:
            raise LocalPrivError(f"THE threshold must lie in [0.5, 1], got {theta}")
        super().__init__(k, *the_probabilities(self.eps, self.theta))

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "theta": self.theta if self._theta_given else None}


@register
class SHE(Mechanism):
    """Summation with histogram encoding on a grid: one-hot + ``g`` x discrete Laplace noise
    (``lam = g eps / 2`` per step), float32 reports (see the module docstring).

    Parameters
    ----------
    k : int
        Number of values.
    eps : float
        Privacy parameter (noise scale ``2/eps``).
    grid : float, optional
        Grid width ``g``: a power of two in ``[2^-20, 1]``. Default: the largest power of two
        ``<= (2/eps) / 1024`` within those bounds.
    """

    spec_name = "she"
    examples = (dict(spec="she(k=4,eps=1.0)", eps_ldp=1.0),)
    report_kind = "binary"
    p_star = 1.0
    q_star = 0.0
    #: ``|z_y / g|`` is clamped to this (float32 holds every integer up to 2^24 exactly)
    CLAMP = 1 << 24
    #: smallest grid exponent: ``1/g <= 2^20`` keeps ``1/g + CLAMP`` within int32
    MIN_GRID_LOG2 = -20

    def __init__(self, k: int, eps: float, grid: float | None = None) -> None:
        self.k = check_int(k, "k", minimum=2)
        self.eps = check_eps(eps)
        self._grid_given = grid is not None
        self.grid = (default_grid(2.0 / self.eps, self.MIN_GRID_LOG2) if grid is None
                     else power_of_two_grid(grid, "she: grid", self.MIN_GRID_LOG2))
        self.steps_per_unit = int(round(1.0 / self.grid))
        #: decay of the noise per grid step
        self.rate = self.grid * self.eps / 2.0
        self.sampler = digit_laplace(self.rate)

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "grid": self.grid if self._grid_given else None}

    @property
    def n_outputs(self) -> None:
        return None

    def channel(self) -> np.ndarray:
        raise LocalPrivError(f"{self} has unbounded reports: no finite channel (use its likelihood)")

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        raise LocalPrivError(f"{self} has unbounded reports: no output index")

    def vectors(self, reports: ArrayLike) -> np.ndarray:
        """Byte reports (``n x 4k`` uint8) -> noisy vectors (``n x k`` float64)."""
        r = np.ascontiguousarray(reports)
        if r.ndim != 2 or r.dtype != np.uint8 or r.shape[1] != 4 * self.k:
            raise LocalPrivError(f"{self}: reports are n x {4 * self.k} uint8 (float32 vectors), "
                                 f"got {r.dtype} {r.shape}")
        return r.view("<f4").astype(float)

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """One-hot vector plus ``g D`` per entry (``D`` discrete Laplace), stored as float32.

        Each entry's ``D`` comes from
        :meth:`~localpriv.mechanisms._sampling.DigitLaplace.rows_into` (32 random bits per entry
        in the common case: two alias-table draws of 16 bits at the default grid; the law it draws
        is exact up to the tables' integer masses, whose effect :meth:`epsilon_ldp` includes). The
        integer ``[y = x]/g + D_y`` is clamped to ``+-2^24``; the float32 written is that integer
        times ``g``, exactly (a compiled kernel computes it as ``base g +- low g`` and adds the
        one-hot ``1``: sums of exact floats whose result is exact). Rows are written straight
        into the report buffer in blocks of users; large calls split the
        draws over :data:`~localpriv.mechanisms._sampling.STREAMS` streams spawned from ``rng``
        (see :func:`~localpriv.mechanisms._sampling.fill_in_streams`): reproducible from the
        seed, whatever the number of cores.
        """
        x = client_inputs(self, x)
        rng = check_rng(rng)
        k, s, N = self.k, self.steps_per_unit, self.CLAMP
        check_report_bytes(x.size, 4 * k, f"{self} reports")
        out = np.empty((x.size, 4 * k), dtype=np.uint8)
        floats = out.view("<f4")  # the report layout
        native = floats.dtype.isnative
        sampler = self.sampler

        def fill(lo: int, hi: int, gen: np.random.Generator) -> None:
            if native:
                sampler.rows_into(x[lo:hi], s, self.grid, N, floats[lo:hi], gen)
            else:  # pragma: no cover - big-endian machines
                v = np.empty((hi - lo, k), dtype=np.float32)
                sampler.rows_into(x[lo:hi], s, self.grid, N, v, gen)
                floats[lo:hi] = v

        fill_in_streams(x.size, k, fill, rng)
        return out

    def support_counts(self, reports: ArrayLike, counts: ArrayLike | None = None) -> np.ndarray:
        """``sum_j counts_j z_j``: with ``p* = 1, q* = 0`` MI becomes SHE's mean estimator."""
        z = self.vectors(reports)
        c = np.ones(z.shape[0]) if counts is None else np.asarray(counts, dtype=float)
        return c @ z

    def _steps(self, z: ArrayLike) -> np.ndarray:
        """Report values -> grid steps ``z / g``, refusing values this mechanism cannot release."""
        d = np.asarray(z, dtype=float) / self.grid
        if not np.all(np.isfinite(d)) or np.any(d != np.round(d)) or np.any(np.abs(d) > self.CLAMP):
            raise LocalPrivError(f"{self}: report values must be multiples of the grid {self.grid!r} "
                                 f"within +-{self.CLAMP} steps (reports of another SHE version?)")
        return d

    def _log_parts(self, z: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``log c(z)`` per report and ``log r`` per coordinate: ``P(z | x) = c(z) r(z_x)``."""
        d = self._steps(z)
        lam, s, N = self.rate, self.steps_per_unit, self.CLAMP
        ends = np.abs(d) == N
        lp0 = np.where(ends, self.sampler.log_tail(N), self.sampler.log_pmf(d))  # no one-hot
        log_c = lp0.sum(axis=-1)
        # log p(d - s) - log p(d): -lam (|d - s| - |d|), also at the clamped ends (tail masses)
        log_r = -lam * (np.abs(d - s) - np.abs(d))
        return log_c, log_r

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        log_c, log_r = self._log_parts(self.vectors(reports))
        return np.exp(log_c[None, :] + log_r.T)

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> LikelihoodBlock:
        log_c, log_r = self._log_parts(self.vectors(reports))
        return SupportBlock(self.k, log_c, 0.0, 1.0, np.exp(log_r), counts)

    def epsilon_ldp(self) -> float:
        """Level of the released law: the target part, ``max log r - min log r`` over report
        values (``r(z) = p(z/g - 1/g) / p(z/g)`` ranges over ``[e^{-eps/2}, e^{eps/2}]``, attained
        for ``z <= 0`` and ``z >= 1``, clamped ends included), plus twice the sampler's computed
        deviation :meth:`~localpriv.mechanisms._sampling.DigitLaplace.excess` for a shift of
        ``1/g`` steps (one coordinate gains the one-hot, one loses it)."""
        s, N = self.steps_per_unit, self.CLAMP
        steps = np.array([-N, -2 * s, -s, 0, s // 2, s, 2 * s, N], dtype=float)
        _, log_r = self._log_parts(steps[:, None] * self.grid)
        return checked_epsilon(float(log_r.max() - log_r.min() + 2.0 * self.sampler.excess(s)), str(self))
