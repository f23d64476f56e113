"""k-ary randomized response (k-RR, also called GRR).

Seed 001 Eq. (5)::

    P(z | x) = e^eps / (k - 1 + e^eps)   if z == x
               1     / (k - 1 + e^eps)   otherwise

It satisfies eps-LDP, and its channel is "a scaled identity plus a constant", so the products the
EM engine needs cost O(k) (:class:`localpriv.likelihood.structured.ScaledIdentityBlock`).

Log space: with ``N = e^eps + k - 1``, ``log N = logaddexp(eps, log(k-1))`` and the two
channel values are ``a = exp(eps - log N)``, ``b = exp(-log N)``: no overflow for any finite
``eps`` (``b`` underflows to 0 beyond eps ~ 745, where the sampler always tells the truth). The
privacy level, its rank and its size are read from this structure; the ``k x k`` channel is only
built on request (and refused above the dense-size cap).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.likelihood.structured import ScaledIdentityBlock
from localpriv.mechanisms._sampling import CLIENT_CHUNK, bernoulli_bits, client_inputs, grr_into
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.validation import check_eps, check_int, check_rng

__all__ = ["KRR", "grr_floats"]

#: below this lie probability ``1 - p_keep`` the float ``1 - p_keep`` loses digits: log space
_LIE_EXACT = 2.0 ** -20


def grr_floats(level: float, g: int) -> tuple[float, float]:
    """Floats ``(p_keep, p_other)`` of GRR on ``g`` values at ``level = log(p_keep / p_other)``.

    ``p_keep = 1 / (1 + (g-1) e^{-level})`` (accurate for every level) and
    ``p_other = (1 - p_keep) / (g - 1)`` while the lie probability is at least ``2^-20`` (rows sum
    to 1 to the last bit, the floats of earlier versions), else ``exp(-logaddexp(level,
    log(g-1)))`` from log space (the subtraction would lose digits, and gave 0 beyond level ~ 37).
    """
    keep = float(1.0 / (1.0 + (g - 1) * np.exp(-level)))
    lie = 1.0 - keep
    if lie >= _LIE_EXACT:
        return keep, float(lie / (g - 1))
    return keep, float(np.exp(-np.logaddexp(level, np.log(g - 1.0))))


@register
class KRR(Mechanism):
    """k-RR on ``k`` inputs at privacy level ``eps`` (seed 001 Eq. 5)."""

    spec_name = "krr"
    examples = (dict(spec="krr(k=4,eps=1.0)", eps_ldp=1.0, tight=True),)

    def __init__(self, k: int, eps: float) -> None:
        self.k = check_int(k, "k", minimum=2)
        self.eps = check_eps(eps)
        #: ``log N = log(e^eps + k - 1)``, the log-normalizer shared by every row
        self.log_norm = float(np.logaddexp(self.eps, np.log(self.k - 1)))

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps}

    @property
    def p_keep(self) -> float:
        """``e^eps / (k - 1 + e^eps) = 1 / (1 + (k-1) e^{-eps})``: the probability of reporting the
        true value (accurate for every eps; 1.0 once ``e^-eps`` underflows)."""
        return grr_floats(self.eps, self.k)[0]

    @property
    def p_other(self) -> float:
        """``1 / (k - 1 + e^eps)``: the probability of each other value (:func:`grr_floats`: rows
        sum to 1 to the last bit while the lie probability is at least ``2^-20``; log space below,
        where ``1 - p_keep`` would lose digits, so it is exact to rounding until it underflows near
        eps ~ 745). ``p_keep`` is off by at most ~2^-52, so ``(1 - p_keep)/(k-1)`` is within
        ~2^-32 relative where it is used."""
        return grr_floats(self.eps, self.k)[1]

    @property
    def n_outputs(self) -> int:
        return self.k

    def channel(self) -> np.ndarray:
        check_dense_size(self.k, self.k, f"{self} channel")
        m = np.full((self.k, self.k), self.p_other)
        np.fill_diagonal(m, self.p_keep)
        return m

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """``G[x, j] = b + (a - b) [x == z_j]``, built column by column only for the given reports."""
        z = self.output_index(reports)
        check_dense_size(self.k, z.size, f"{self} likelihood of {z.size} reports")
        G = np.full((self.k, z.size), self.p_other)
        G[z, np.arange(z.size)] = self.p_keep
        return G

    def output_probabilities(self, theta: ArrayLike) -> np.ndarray:
        """``theta @ M = b + (a - b) theta`` (times ``sum(theta)``), in O(k)."""
        t = np.asarray(theta, dtype=float)
        return self.p_other * t.sum(axis=-1, keepdims=True) + (self.p_keep - self.p_other) * t

    def epsilon_ldp(self) -> float:
        """From the channel's structure: its only values are ``a = e^eps / N`` (diagonal) and
        ``b = 1 / N`` (elsewhere), with the same ``N = e^eps + k - 1`` in every row, and every
        column holds both (``k >= 2``), so ``eps_LDP = max_z log(max_x M / min_x M) = log(a / b)
        = (log e^eps - log 1) - (log N - log N)`` (seed 001 Eq. 5). Equal to
        ``ldp_epsilon(channel())`` wherever the dense channel holds ``b > 0``."""
        log_w_a, log_w_b = self.eps, 0.0  # unnormalized weights e^eps and 1
        return checked_epsilon((log_w_a - log_w_b) - (self.log_norm - self.log_norm), str(self))

    def rank_from_structure(self) -> tuple[int, str]:
        """``M = (a - b) I + b 11^T`` has eigenvalues ``a - b`` (``k - 1`` times) and ``a + (k-1) b
        = 1``; ``a > b`` for every ``eps > 0``, so the rank is ``k``."""
        return self.k, "exact: M = (a-b) I + b 11^T with a > b has eigenvalues a-b (k-1 times) and 1"

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """Exact k-RR draws, one ``int64`` report per user.

        Calls of at most :data:`~localpriv.mechanisms._sampling.CLIENT_CHUNK` (``2^16``) users
        draw the stream of earlier versions: the keep bits by
        :func:`~localpriv.mechanisms._sampling.bernoulli_bits` (16 random bits per user against
        ``floor(p_keep 2^16)``, ties refined: ``P(keep) = p_keep`` exactly), then the
        replacements ``r`` uniform on ``0..k-2`` (``rng.integers``, exact), reported as
        ``r + [r >= x]``. Larger calls use :func:`~localpriv.mechanisms._sampling.grr_into`:
        one 64-bit word per user decides both by integer comparisons (exactly the same law), in
        chunks of ``2^16`` users (scratch memory bounded by the chunk), a compiled pass per chunk
        (NumPy with ``LOCALPRIV_NUMBA=0``: the same reports)."""
        x = client_inputs(self, x)
        rng = check_rng(rng)
        if x.size > CLIENT_CHUNK and self.k <= 1 << 32:
            out = np.empty(x.size, dtype=np.int64)
            grr_into(x, self.k, self.p_keep, rng, out)
            return out
        keep = bernoulli_bits(x.size, self.p_keep, rng)  # exact, 16 random bits per user
        small = np.int16 if self.k <= 1 << 15 else np.int64  # narrow draws are cheaper
        other = rng.integers(0, self.k - 1, size=x.size, dtype=small).astype(np.int64)
        other += other >= x  # uniform over the k-1 values different from x
        np.copyto(other, x, where=keep)
        return other

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> LikelihoodBlock:
        """``G[x, j] = b + (a - b) [x == z_j]``: O(k + m) products (scaled identity plus a constant)."""

        return ScaledIdentityBlock(self.k, self.p_keep, self.p_other, self.output_index(reports), counts)

    def inverse_counts(self, counts: ArrayLike) -> np.ndarray:
        """Closed-form INV: ``v = (q - b) / (a - b)`` with ``q`` the normalized counts."""
        c = np.asarray(counts, dtype=float)
        q = c / c.sum()
        return (q - self.p_other) / (self.p_keep - self.p_other)


def krr_mle(counts: ArrayLike, eps: float) -> np.ndarray:
    """Closed-form maximum-likelihood estimate for k-RR (the maximum on the simplex).

    With ``a = e^eps/(k-1+e^eps)``, ``b = 1/(k-1+e^eps)`` and counts ``n_z``, the multinomial
    log-likelihood ``sum_z n_z log(b + (a-b) theta_z)`` is maximized on the simplex by the
    water-filling solution (KKT conditions)::

        theta_z = max(0, n_z / lambda - c),   c = b / (a - b),

    with ``lambda = sum_{z in S} n_z / (1 + |S| c)`` for the set ``S`` of the largest counts that
    stay positive. Used as an independent check of IBU.
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
