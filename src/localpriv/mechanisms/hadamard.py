"""Hadamard response (``hr``): large domains with one ``log2 K``-bit report per user.

Acharya, Sun and Zhang, "Hadamard Response: Estimating Distributions Privately, Efficiently, and
with Little Communication", AISTATS 2019. ``H_b`` is the ``b x b`` Sylvester Hadamard matrix,
``H_b[i, j] = (-1)^{popcount(i & j)}``.

Construction (the paper's general HR, with ``B`` blocks of width ``b``)
----------------------------------------------------------------------
The ``K = B b`` outputs are ``B`` blocks of ``b`` positions; input ``x`` sits in block
``p = x // (b - 1)`` at position ``t = x mod (b - 1) + 1`` (row 0 of ``H_b``, all ones, is not
used), and its set is the ``b/2`` outputs of its block where row ``t`` is ``+1``::

    C_x = {y : y // b = p,  H_b[t, y mod b] = +1}

    P(y | x) = 2 e^eps / (b (2B - 1 + e^eps))   if y in C_x,
               2       / (b (2B - 1 + e^eps))   otherwise.

The defaults are the paper's: ``B = 1`` when ``eps <= 1`` (the high-privacy HR: ``K = b`` is the
smallest power of two ``> k``, ``C_x`` the ``+1`` entries of row ``x + 1`` of ``H_K``), and
``B = 2^floor(log2(min(2k, e^eps)))`` otherwise, ``b`` the smallest power of two with
``B (b - 1) >= k`` (so ``K < 4k + 4``); ``blocks=B`` sets ``B`` (a power of two) explicitly. Every
column of the channel holds the two values above, so the LDP level computed from the channel is
exactly ``eps`` (for ``k >= 2`` some column separates two inputs).

Sampling (vectorized): with probability ``2B / (2B - 1 + e^eps)`` the report is uniform on all
``K`` outputs, otherwise uniform on ``C_x`` (a uniform position ``j`` of the block, moved to the
``+1`` side by flipping the lowest set bit of ``t`` in ``j`` when ``H_b[t, j] = -1``); the mixture
has exactly the channel above.

Estimators. The unbiased estimator (the paper's, in closed form)::

    theta_hat_x = (2B - 1 + e^eps) / (e^eps - 1) * (H_b q_p)[t(x)],

``q_p`` the empirical frequencies of block ``p``'s outputs: one fast Walsh-Hadamard transform,
``O(K log b)`` (:meth:`HadamardResponse.unbiased`; also the ``inv-n`` / ``inv-p`` inverse through
:meth:`HadamardResponse.inverse_counts`). Its variance per value is
``(c^2 P(block p) - theta_x^2) / n`` with ``c`` the factor above (:meth:`HadamardResponse.variance`).
IBU runs on :class:`localpriv.likelihood.structured.HadamardBlock`, whose products are one transform each.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

# the blocks live in localpriv.likelihood.structured, which imports this package: bound at call time
from localpriv.likelihood import structured as _st
from localpriv.likelihood.blocks import check_dense_size
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

__all__ = ["HadamardResponse", "hr_blocks"]

#: largest domain accepted (``K < 2^43`` outputs)
MAX_K = 2 ** 40


def hr_blocks(k: int, eps: float) -> int:
    """The paper's number of blocks: 1 for ``eps <= 1``, else ``2^floor(log2(min(2k, e^eps)))``
    (computed in log space: no overflow for any eps)."""
    if eps <= 1.0:
        return 1
    return 2 ** int(math.floor(min(math.log2(2 * k), eps / math.log(2))))


@register
class HadamardResponse(Mechanism):
    """Hadamard response on ``k`` values at level ``eps`` (module docstring).

    Parameters
    ----------
    k : int
        Domain size (at least 2).
    eps : float
        LDP level; the level computed from the channel equals it.
    blocks : int, optional
        Number of blocks ``B`` (a power of two); default :func:`hr_blocks`.
    """

    spec_name = "hr"
    examples = (dict(spec="hr(k=5,eps=1.0)", eps_ldp=1.0, tight=True),
                dict(spec="hr(k=6,eps=2.0)", eps_ldp=2.0, tight=True))  # general HR: 4 blocks of width 4

    def __init__(self, k: int, eps: float, blocks: int | None = None) -> None:
        self.k = check_int(k, "k", minimum=2, maximum=MAX_K)
        self.eps = check_eps(eps)
        self._default_blocks = blocks is None
        B = hr_blocks(self.k, self.eps) if blocks is None else check_int(blocks, "hr: blocks", minimum=1,
                                                                          maximum=2 * self.k)
        if B & (B - 1):
            raise LocalPrivError(f"hr: blocks must be a power of two, got {B}")
        self.blocks = B
        per = -(-self.k // B)  # inputs per block: b - 1 >= ceil(k / B)
        self.width = 1 << int(per).bit_length()  # smallest power of two > per
        self.K = B * self.width
        # P(y | x) in log space: log hi = log(2/b) + eps - log(2B - 1 + e^eps), log lo = log hi - eps
        log_norm = float(np.logaddexp(math.log(2 * B - 1), self.eps))
        self.log_hi = math.log(2.0 / self.width) + self.eps - log_norm
        self.log_lo = math.log(2.0 / self.width) - log_norm
        self.hi, self.lo = math.exp(self.log_hi), math.exp(self.log_lo)
        #: probability of the uniform branch of the sampler, 2B / (2B - 1 + e^eps)
        self.p_uniform = math.exp(math.log(2 * B) - log_norm)
        #: the unbiased estimator's factor (2B - 1 + e^eps) / (e^eps - 1) = 1 + 2B / expm1(eps)
        with np.errstate(over="ignore"):
            self.scale = 1.0 + 2.0 * B / float(np.expm1(self.eps))

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "blocks": None if self._default_blocks else self.blocks}

    # ---- structure ----------------------------------------------------------------------
    def cells(self, x: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(p, t)``: block and Hadamard row of each input (all inputs by default)."""
        x = np.arange(self.k, dtype=np.int64) if x is None else np.asarray(x, dtype=np.int64)
        return x // (self.width - 1), x % (self.width - 1) + 1

    def in_set(self, x: ArrayLike, y: ArrayLike) -> np.ndarray:
        """``[y in C_x]`` (broadcasting ``x`` against ``y``)."""
        p, t = self.cells(x)
        y = np.asarray(y, dtype=np.int64)
        return (p == y // self.width) & (_st._popcount_parity(t & (y % self.width)) == 0)

    @property
    def n_outputs(self) -> int:
        return self.K

    def rank_from_structure(self) -> tuple[int, str] | None:
        """Rank ``k``: row ``x`` is ``lo 1 + (hi - lo)(1_{block p} + h_{p,t}) / 2`` and the
        restricted Hadamard rows ``h_{p,t}`` (``t >= 1``) are orthogonal to each other and to every
        block indicator, so the rows are independent when ``hi > lo``."""
        if self.hi > self.lo:
            return self.k, "exact: distinct rows t >= 1 of the Hadamard blocks are orthogonal"
        return None

    # ---- sampling -----------------------------------------------------------------------
    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        x = self._check_inputs(x)
        rng = check_rng(rng)
        n = x.size
        uniform = rng.random(n) < self.p_uniform
        anywhere = rng.integers(0, self.K, size=n, dtype=np.int64)
        j = rng.integers(0, self.width, size=n, dtype=np.int64)
        p, t = self.cells(x)
        j ^= _st._popcount_parity(t & j) * (t & -t)  # H[t, j] = -1: flip t's lowest set bit in j
        return np.where(uniform, anywhere, p * self.width + j)

    # ---- channel and likelihood ---------------------------------------------------------
    def channel(self) -> np.ndarray:
        """Dense ``k x K`` channel (module docstring)."""
        check_dense_size(self.k, self.K, f"{self} channel")
        return self.likelihood(np.arange(self.K))

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        y = self.output_index(reports)
        check_dense_size(self.k, y.size, f"{self} likelihood of {y.size} reports")
        return np.where(self.in_set(np.arange(self.k)[:, None], y[None, :]), self.hi, self.lo)

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> _st.HadamardBlock:
        """:class:`~localpriv.likelihood.structured.HadamardBlock`: ``O(K log b)`` products."""
        return _st.HadamardBlock(self.k, self.blocks, self.width, self.lo, self.hi, self.output_index(reports), counts)

    def output_probabilities(self, theta: ArrayLike) -> np.ndarray:
        """``theta @ M`` with one transform (never the dense channel)."""
        theta = np.asarray(theta, dtype=float)
        return _st.HadamardBlock(self.k, self.blocks, self.width, self.lo, self.hi, np.arange(self.K),
                             np.ones(self.K)).forward(theta)

    def epsilon_ldp(self) -> float:
        """``log(hi / lo) = eps``: every column holds ``hi`` on ``C_x``'s inputs and ``lo`` on the
        others, and for ``k >= 2`` some column holds both (two inputs in one block differ on a
        Hadamard column; inputs in two blocks differ on column 0 of either block)."""
        return checked_epsilon(self.eps, str(self))

    # ---- the unbiased estimator ----------------------------------------------------------
    def inverse_counts(self, counts: ArrayLike) -> np.ndarray:
        """The unbiased estimate from counts over all ``K`` outputs (module docstring):
        ``theta_hat_x = (2B - 1 + e^eps)/(e^eps - 1) (H_b q_p)[t(x)]``; may be negative."""
        c = np.asarray(counts, dtype=float).ravel()
        if c.size != self.K:
            raise LocalPrivError(f"{self}: counts over {self.K} outputs expected, got {c.size}")
        n = c.sum()
        if not n > 0:
            raise LocalPrivError(f"{self}: no reports counted")
        F = _st.fwht((c / n).reshape(self.blocks, self.width))
        p, t = self.cells()
        return self.scale * F[p, t]

    def unbiased(self, reports: ArrayLike, counts: ArrayLike | None = None) -> np.ndarray:
        """:meth:`inverse_counts` from reports (``counts``: how often each was seen)."""
        y = self.output_index(reports)
        w = np.ones(y.size) if counts is None else np.asarray(counts, dtype=float)
        return self.inverse_counts(np.bincount(y, weights=w, minlength=self.K))

    def variance(self, theta: ArrayLike, n: float) -> np.ndarray:
        """Exact variance of :meth:`unbiased` with ``n`` reports of inputs drawn from ``theta``:
        ``(c^2 P(block p(x)) - theta_x^2) / n``, ``P(block p) = (2 + (e^eps - 1) Theta_p) / (2B - 1 + e^eps)``
        with ``Theta_p`` the mass of the inputs in block ``p``."""
        theta = np.asarray(theta, dtype=float)
        p, _ = self.cells()
        mass = np.bincount(p, weights=theta, minlength=self.blocks)
        p_block = self.width * 0.5 * (self.lo * 2 + (self.hi - self.lo) * mass)  # b lo + (b/2)(hi-lo) Theta_p
        return (self.scale ** 2 * p_block[p] - theta ** 2) / float(n)
