"""Subset selection (SS; Ye & Barg 2018, Wang et al. 2016; seed 002).

The user reports a subset ``z`` of ``omega`` domain elements: with probability
``omega e^eps / (omega e^eps + k - omega)`` it contains her value ``x`` plus ``omega - 1``
elements drawn uniformly from the others, otherwise ``omega`` elements drawn uniformly from the
elements other than ``x``. The optimal size is ``omega = max(1, round(k / (e^eps + 1)))``.

With ``Omega = omega e^eps + k - omega`` the exact likelihood is::

    P(z | x) = k / (Omega * C(k, omega)) * (e^eps if x in z else 1)

(form (*) of :mod:`localpriv.mechanisms.unary` with ``r1 = e^eps``, ``r0 = 1``), so the computed
LDP level is ``eps``, ``S(z) = z``, ``p* = omega e^eps / Omega`` and
``q* = omega ((omega - 1) e^eps + k - omega) / (Omega (k - 1))``.

Reports are the subset's indicator vector, bit-packed like unary encodings.
"""
from __future__ import annotations

from math import ceil

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from .._validation import LocalPrivError, check_eps, check_int, check_rng
from .base import register
from .unary import DENSE_MAX_K, PureProtocol, UnaryEncoding, pack_bits, unpack_bits

__all__ = ["SS", "optimal_subset_size"]


def optimal_subset_size(k: int, eps: float) -> int:
    """``omega = round(k / (e^eps + 1))`` clipped to ``1..k-1``."""
    return int(min(k - 1, max(1, int(np.rint(k / (np.exp(eps) + 1.0))))))


@register
class SS(PureProtocol):
    """Subset selection on ``k`` inputs at level ``eps`` (subset size ``omega``, optimal by default)."""

    spec_name = "ss"
    report_kind = "binary"

    def __init__(self, k: int, eps: float, omega: int | None = None):
        self.k = check_int(k, "k", minimum=2)
        self.eps = check_eps(eps)
        self.omega = (optimal_subset_size(self.k, self.eps) if omega is None
                      else check_int(omega, "omega", minimum=1, maximum=self.k - 1))
        self._omega_given = omega is not None
        e = np.exp(self.eps)
        self.big_omega = self.omega * e + self.k - self.omega

    def params(self):
        return {"k": self.k, "eps": self.eps, "omega": self.omega if self._omega_given else None}

    @property
    def p_star(self) -> float:
        return float(self.omega * np.exp(self.eps) / self.big_omega)

    @property
    def q_star(self) -> float:
        w, k = self.omega, self.k
        return float(w * ((w - 1) * np.exp(self.eps) + k - w) / (self.big_omega * (k - 1)))

    @property
    def n_outputs(self):
        return 2 ** self.k if self.k <= DENSE_MAX_K else None

    def channel(self) -> np.ndarray:
        """Dense ``k x 2^k`` channel for ``k <= 12`` (columns of the wrong size are zero)."""
        if self.k > DENSE_MAX_K:
            raise LocalPrivError(f"{self}: dense channel only for k <= {DENSE_MAX_K}")
        bits = (np.arange(2 ** self.k)[:, None] >> np.arange(self.k)[None, :]) & 1
        return self.likelihood(pack_bits(bits))

    def output_index(self, reports):
        if self.k > DENSE_MAX_K:
            raise LocalPrivError(f"{self}: no output index for k > {DENSE_MAX_K}")
        return unpack_bits(reports, self.k).astype(np.int64) @ (1 << np.arange(self.k))

    def sample(self, x, rng) -> np.ndarray:
        """The true value is in the subset with probability ``p* = omega e^eps / Omega``; the
        other ``omega - 1`` (or ``omega``) members are a uniform subset of the ``k - 1`` other
        values, drawn by Floyd's algorithm vectorized over users: for ``j = K-m .. K-1``
        (``K = k - 1``) draw ``t`` uniform on ``0..j`` and add ``t``, or ``j`` if ``t`` is
        already in (every ``m``-subset equally likely). Users needing one member fewer skip the
        first step. ``omega`` vectorized steps per chunk instead of sorting ``k`` keys per user.
        """
        x = self._check_inputs(x)
        rng = check_rng(rng)
        k, omega, K = self.k, self.omega, self.k - 1
        out = np.empty((x.size, ceil(k / 8)), dtype=np.uint8)
        step = max(1, (1 << 18) // k)
        for s in range(0, x.size, step):  # chunks of users: bounded memory, cache-sized arrays
            e = min(x.size, s + step)
            m, xs = e - s, x[s:e]
            rows = np.arange(m)
            include = rng.random(m) < self.p_star
            bits = np.zeros((m, k), dtype=bool)
            for j in range(K - omega, K):
                live = rows if j > K - omega else rows[~include]  # the first step: omega others
                t = rng.integers(0, j + 1, size=live.size)
                xl = xs[live]
                t_val = t + (t >= xl)  # index among the others -> value (skip the true one)
                j_val = j + (j >= xl)
                bits[live, np.where(bits[live, t_val], j_val, t_val)] = True
            bits[rows, xs] = include
            out[s:e] = pack_bits(bits)
        return out

    def support(self, reports) -> sp.csr_matrix:
        return sp.csr_matrix(unpack_bits(reports, self.k).astype(bool))

    def support_counts(self, reports, counts=None) -> np.ndarray:
        return UnaryEncoding.support_counts(self, reports, counts)

    def _log_c(self):
        log_binom = gammaln(self.k + 1) - gammaln(self.omega + 1) - gammaln(self.k - self.omega + 1)
        return float(np.log(self.k) - np.log(self.big_omega) - log_binom)

    def likelihood_parts(self, reports):
        sizes = unpack_bits(reports, self.k).sum(axis=1)
        log_c = np.where(sizes == self.omega, self._log_c(), -np.inf)
        return log_c, 1.0, float(np.exp(self.eps))

    def likelihood_block(self, reports, counts):
        sizes = unpack_bits(reports, self.k).sum(axis=1)
        if np.any(sizes != self.omega):
            raise LocalPrivError(f"{self}: reports must hold exactly {self.omega} elements; "
                                 f"got sizes {np.unique(sizes[sizes != self.omega])[:5].tolist()}")
        return super().likelihood_block(reports, counts)

    def _witness_report(self):
        bits = np.zeros((1, self.k), dtype=bool)
        bits[0, :self.omega] = True
        return pack_bits(bits)
