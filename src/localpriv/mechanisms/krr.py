"""k-ary randomized response (k-RR, also called GRR).

Seed 001 Eq. (5)::

    P(z | x) = e^eps / (k - 1 + e^eps)   if z == x
               1     / (k - 1 + e^eps)   otherwise

It satisfies eps-LDP, and its channel is "a scaled identity plus a constant", so the products the
EM engine needs cost O(k) (:class:`localpriv.structured.ScaledIdentityBlock`).
"""
from __future__ import annotations

import numpy as np

from .._validation import check_eps, check_int, check_rng
from ._sampling import bernoulli_bits
from .base import LikelihoodBlock, Mechanism, register

__all__ = ["KRR"]


@register
class KRR(Mechanism):
    """k-RR on ``k`` inputs at privacy level ``eps`` (seed 001 Eq. 5)."""

    spec_name = "krr"

    def __init__(self, k: int, eps: float):
        self.k = check_int(k, "k", minimum=2)
        self.eps = check_eps(eps)

    def params(self):
        return {"k": self.k, "eps": self.eps}

    @property
    def p_keep(self) -> float:
        """``e^eps / (k - 1 + e^eps)``: the probability of reporting the true value."""
        return 1.0 / (1.0 + (self.k - 1) * np.exp(-self.eps))

    @property
    def p_other(self) -> float:
        """``1 / (k - 1 + e^eps)``: the probability of each other value."""
        return (1.0 - self.p_keep) / (self.k - 1)

    @property
    def n_outputs(self) -> int:
        return self.k

    def channel(self) -> np.ndarray:
        m = np.full((self.k, self.k), self.p_other)
        np.fill_diagonal(m, self.p_keep)
        return m

    def sample(self, x, rng) -> np.ndarray:
        x = self._check_inputs(x)
        rng = check_rng(rng)
        keep = bernoulli_bits(x.size, self.p_keep, rng)  # exact, 16 random bits per user
        small = np.int16 if self.k <= 1 << 15 else np.int64  # narrow draws are cheaper
        other = rng.integers(0, self.k - 1, size=x.size, dtype=small).astype(np.int64)
        other += other >= x  # uniform over the k-1 values different from x
        np.copyto(other, x, where=keep)
        return other

    def likelihood_block(self, reports, counts) -> LikelihoodBlock:
        """``G[x, j] = b + (a - b) [x == z_j]``: O(k + m) products (scaled identity plus a constant)."""
        from ..structured import ScaledIdentityBlock  # structured imports the mechanisms package

        return ScaledIdentityBlock(self.k, self.p_keep, self.p_other, self.output_index(reports), counts)

    def inverse_counts(self, counts) -> np.ndarray:
        """Closed-form INV: ``v = (q - b) / (a - b)`` with ``q`` the normalized counts."""
        c = np.asarray(counts, dtype=float)
        q = c / c.sum()
        return (q - self.p_other) / (self.p_keep - self.p_other)


def krr_mle(counts, eps: float) -> np.ndarray:
    """Closed-form maximum-likelihood estimate for k-RR (the maximum on the simplex).

    With ``a = e^eps/(k-1+e^eps)``, ``b = 1/(k-1+e^eps)`` and counts ``n_z``, the multinomial
    log-likelihood ``sum_z n_z log(b + (a-b) theta_z)`` is maximized on the simplex by the
    water-filling solution (KKT conditions)::

        theta_z = max(0, n_z / lambda - c),   c = b / (a - b),

    with ``lambda = sum_{z in S} n_z / (1 + |S| c)`` for the set ``S`` of the largest counts that
    stay positive. Used as an independent check of IBU (issue: core).
    """
    n = np.asarray(counts, dtype=float)
    k = n.size
    mech = KRR(k, eps)
    a, b = mech.p_keep, mech.p_other
    c = b / (a - b)
    order = np.argsort(-n, kind="stable")
    ns = n[order]
    csum = np.cumsum(ns)
    sizes = np.arange(1, k + 1)
    lam = csum / (1.0 + sizes * c)
    ok = ns / lam > c  # the s-th largest count stays positive with |S| = s
    s = int(np.flatnonzero(ok)[-1]) + 1 if ok.any() else 1
    theta = np.maximum(0.0, n / lam[s - 1] - c)
    return theta / theta.sum()
