"""Histogram encodings: SHE and THE (Wang et al., USENIX Security 2017; seed 002).

SHE (summation with histogram encoding): the one-hot vector of ``x`` plus i.i.d. Laplace noise of
scale ``2/eps`` on each of the ``k`` coordinates (L1 sensitivity 2). Reports are the noisy
vectors as float32, stored bit-exactly as ``4k`` bytes per report (``n x 4k`` uint8, little
endian) so they travel through :func:`localpriv.reports.report_table` like bit vectors. The server
estimates ``f = (1/n) sum_i z_i`` (unbiased); we expose it through ``support_counts`` (the summed
vectors) with ``p* = 1, q* = 0`` so that MI's formula gives exactly this estimator. Exact
likelihood: ``P(z|x) = prod_y (eps/4) exp(-(eps/2)|z_y - [y = x]|)
= c(z) exp(-(eps/2)(|z_x - 1| - |z_x|))``; the ratio factor lies in ``[e^{-eps/2}, e^{eps/2}]``, so
the computed LDP level is ``eps``.

THE (thresholding with histogram encoding): the same noisy vector thresholded at ``theta``;
``S(z) = {y : z_y > theta}``. We threshold on the client and report the bit vector, which is the
unary encoding with ``p* = P(1 + L > theta) = 1 - e^{-(eps/2)(1 - theta)}/2`` and
``q* = P(L > theta) = e^{-(eps/2) theta}/2`` (``L ~ Laplace(2/eps)``, ``1/2 <= theta <= 1``).
Thresholding is post-processing, so the level computed from this bit channel is ``<= eps``
(we report the computed value, not ``eps``). ``theta`` defaults to the value in ``(1/2, 1)``
minimizing MI's variance factor ``q*(1 - q*)/(p* - q*)^2``.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar

from .._validation import LocalPrivError, check_eps, check_int, check_rng
from ._sampling import fill_in_streams, laplace_float32_into
from .base import LikelihoodBlock, Mechanism, register
from .unary import SupportBlock, UnaryEncoding

__all__ = ["THE", "SHE", "the_probabilities", "optimal_threshold"]


def the_probabilities(eps: float, theta: float) -> tuple[float, float]:
    """``(p*, q*)`` of THE at threshold ``theta`` in ``[1/2, 1]``."""
    p = 1.0 - 0.5 * np.exp(-(eps / 2.0) * (1.0 - theta))
    q = 0.5 * np.exp(-(eps / 2.0) * theta)
    return float(p), float(q)


def optimal_threshold(eps: float) -> float:
    """``argmin_{theta in [1/2, 1]} q*(1-q*) / (p*-q*)^2`` (MI's variance, Wang et al. 2017)."""
    def var(t):
        p, q = the_probabilities(eps, t)
        return q * (1 - q) / (p - q) ** 2
    return float(minimize_scalar(var, bounds=(0.5, 1.0), method="bounded",
                                 options={"xatol": 1e-10}).x)


@register
class THE(UnaryEncoding):
    """Thresholding with histogram encoding, reported as thresholded bits (see module doc)."""

    spec_name = "the"

    def __init__(self, k: int, eps: float, theta: float | None = None):
        self.eps = check_eps(eps)
        self._theta_given = theta is not None
        self.theta = optimal_threshold(self.eps) if theta is None else float(theta)
        if not 0.5 <= self.theta <= 1.0:
            raise LocalPrivError(f"THE threshold must lie in [0.5, 1], got {theta}")
        super().__init__(k, *the_probabilities(self.eps, self.theta))

    def params(self):
        return {"k": self.k, "eps": self.eps, "theta": self.theta if self._theta_given else None}


@register
class SHE(Mechanism):
    """Summation with histogram encoding: one-hot + Laplace(2/eps) noise, float32 reports."""

    spec_name = "she"
    report_kind = "binary"
    p_star = 1.0
    q_star = 0.0

    def __init__(self, k: int, eps: float):
        self.k = check_int(k, "k", minimum=2)
        self.eps = check_eps(eps)

    def params(self):
        return {"k": self.k, "eps": self.eps}

    @property
    def n_outputs(self):
        return None

    def channel(self):
        raise LocalPrivError(f"{self} has continuous reports: no finite channel (use its likelihood)")

    def output_index(self, reports):
        raise LocalPrivError(f"{self} has continuous reports: no output index")

    def vectors(self, reports) -> np.ndarray:
        """Byte reports (``n x 4k`` uint8) -> noisy vectors (``n x k`` float64)."""
        r = np.ascontiguousarray(reports)
        if r.ndim != 2 or r.dtype != np.uint8 or r.shape[1] != 4 * self.k:
            raise LocalPrivError(f"{self}: reports are n x {4 * self.k} uint8 (float32 vectors), "
                                 f"got {r.dtype} {r.shape}")
        return r.view("<f4").astype(float)

    def sample(self, x, rng) -> np.ndarray:
        """One-hot vector plus Laplace(2/eps) noise per entry, stored as float32 (the report).

        The noise comes from :func:`~localpriv.mechanisms._sampling.laplace_float32_into` (one
        32-bit word of the generator per entry, the exponential tail redrawn exactly), written
        straight into the report buffer in cache-sized chunks of users; large calls split the
        draws over :data:`~localpriv.mechanisms._sampling.STREAMS` streams spawned from ``rng``
        (see :func:`~localpriv.mechanisms._sampling.fill_in_streams`): reproducible from the
        seed, whatever the number of cores.
        """
        x = self._check_inputs(x)
        rng = check_rng(rng)
        k = self.k
        out = np.empty((x.size, 4 * k), dtype=np.uint8)
        floats = out.view("<f4")  # the report layout
        native = floats.dtype.isnative
        b = 2.0 / self.eps

        def fill(lo, hi, gen):
            v = floats[lo:hi] if native else np.empty((hi - lo, k), dtype=np.float32)
            laplace_float32_into(v.reshape(-1), b, gen)
            v[np.arange(hi - lo), x[lo:hi]] += np.float32(1.0)
            if not native:  # pragma: no cover - big-endian machines
                floats[lo:hi] = v

        fill_in_streams(x.size, k, fill, rng)
        return out

    def support_counts(self, reports, counts=None) -> np.ndarray:
        """``sum_j counts_j z_j``: with ``p* = 1, q* = 0`` MI becomes SHE's mean estimator."""
        z = self.vectors(reports)
        c = np.ones(z.shape[0]) if counts is None else np.asarray(counts, dtype=float)
        return c @ z

    def _log_parts(self, z):
        log_c = self.k * np.log(self.eps / 4.0) - (self.eps / 2.0) * np.abs(z).sum(axis=1)
        log_r = -(self.eps / 2.0) * (np.abs(z - 1.0) - np.abs(z))
        return log_c, log_r

    def likelihood(self, reports) -> np.ndarray:
        log_c, log_r = self._log_parts(self.vectors(reports))
        return np.exp(log_c[None, :] + log_r.T)

    def likelihood_block(self, reports, counts) -> LikelihoodBlock:
        log_c, log_r = self._log_parts(self.vectors(reports))
        return SupportBlock(self.k, log_c, 0.0, 1.0, np.exp(log_r), counts)

    def epsilon_ldp(self) -> float:
        """``max log r - min log r`` over reports, ``r(z) = exp(-(eps/2)(|z-1| - |z|))``: the
        bracket ranges over ``[-1, 1]`` (attained for ``z <= 0`` and ``z >= 1``)."""
        grid = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
        _, log_r = self._log_parts(grid[:, None])
        return float(log_r.max() - log_r.min())
