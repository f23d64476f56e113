"""Linear geometric mechanisms on the integers (seed 001 section 4.3, seed 003 section 2.2).

Untruncated (seed 001 Eq. 6): a report ``z = x + N`` with ``N`` two-sided geometric::

    P(z | x) = c a^{|z - x|},    a = e^{-eps},   c = (1 - a) / (1 + a),    z in Z.

Truncated to ``[lo, hi]`` (seed 001 Eq. 7, seed 003 Eq. 2): the untruncated report is clamped to
``lo..hi``, so the mass beyond each end piles up on that end. For ``lo <= x <= hi`` this is
exactly Eq. 7::

    P(z | x) = c_z a^{|z - x|},   c_z = 1/(1+a) for z in {lo, hi},  (1-a)/(1+a) for lo < z < hi.

Inputs are domain indices ``0..k-1`` and ``lo``/``hi`` are in the same index units (``lo`` may
exceed 0 or ``hi`` be below ``k-1``: the clamp formula still holds, Eq. 7 alone would not).

Both satisfy eps-geo-indistinguishability on the line with ``d(x, x') = |x - x'|``:
``P(z|x)/P(z|x') = a^{|z-x| - |z-x'|} <= e^{eps |x - x'|}``, with equality for any ``z`` outside
``(min(x,x'), max(x,x'))``; :meth:`Geometric.epsilon_geo` computes it from the channel.

LDP level from the structure, for any ``k``: in an interior column ``z``,
``log P(z|x) = log c - eps |z - x|`` is largest at ``x = clip(z, 0, k-1)`` and smallest at the
input farthest away (0 or ``k-1``); in the end columns ``lo``/``hi`` the clamped mass is monotone
in ``x``. The column spread ``eps (max_x |z-x| - min_x |z-x|)`` is ``eps (k-1)`` outside
``[0, k-1]`` and convex inside, so its maximum over the interior columns ``lo+1..hi-1`` is at
``lo+1`` or ``hi-1``. :meth:`Geometric.epsilon_ldp` therefore evaluates the exact
log-probabilities (log space, no underflow) on rows ``{0, k-1, clip(z)}`` and columns
``{lo, lo+1, hi-1, hi}`` (``{-1, 0, k-1, k}`` untruncated) only: O(1) whatever ``k``, and equal to
the dense computation wherever the dense channel has no underflowed zeros.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.likelihood.structured import geometric_block_for
from localpriv.mechanisms.base import Mechanism, k_from_bounds, register
from localpriv.mechanisms.privacy import checked_epsilon, geo_epsilon, ldp_epsilon_from_logs
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

__all__ = ["Geometric", "two_sided_geometric"]


def two_sided_geometric(eps: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws of ``N`` with ``P(N = n) = (1-a)/(1+a) a^{|n|}``, ``a = e^{-eps}``.

    ``N = G1 - G2`` with ``G1, G2`` i.i.d. geometric on ``{0, 1, ...}`` with ``P(G = g) = (1-a) a^g``:
    ``P(N = n) = sum_g (1-a)^2 a^{2g + |n|} = (1-a)^2 a^{|n|} / (1 - a^2)``.
    """
    p = -np.expm1(-eps)  # 1 - a, accurate for small eps
    return (rng.geometric(p, size) - rng.geometric(p, size)).astype(np.int64)


@register
class Geometric(Mechanism):
    """Linear geometric mechanism, untruncated (``lo = hi = None``) or truncated to ``lo..hi``.

    Parameters
    ----------
    k : int
        Number of inputs (indices ``0..k-1``, distance ``|x - x'|``).
    eps : float
        Geo-indistinguishability parameter per index unit (``a = e^{-eps}``).
    lo, hi : int, optional
        Output range (index units) of the truncated version; both or neither.

    Notes
    -----
    Untruncated reports are int64 ``z = x + N`` (possibly negative or ``>= k``) and
    :meth:`likelihood` is exact for any integer reports; ``n_outputs`` is ``None`` and
    :meth:`channel` is unavailable. Truncated reports are output indices ``z - lo`` and the channel
    is ``k x (hi - lo + 1)``.
    """

    spec_name = "geometric"
    examples = (dict(spec="geometric(k=5,eps=0.5)", eps_ldp=2.0, tight=True, eps_geo=0.5),
                dict(spec="geometric(k=5,eps=0.5,lo=0,hi=4)", eps_ldp=2.0, eps_geo=0.5))

    def __init__(self, k: int, eps: float, lo: int | None = None, hi: int | None = None) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.eps = check_eps(eps)
        if (lo is None) != (hi is None):
            raise LocalPrivError("geometric: give both lo and hi (truncated) or neither (untruncated)")
        if lo is not None:
            lo = check_int(lo, "lo")
            hi = check_int(hi, "hi")
            if not lo < hi:
                raise LocalPrivError(f"geometric: need lo < hi, got lo={lo}, hi={hi}")
        self.lo, self.hi = lo, hi

    @classmethod
    def implied_k(cls, params: dict[str, Any]) -> int | None:
        """``geometric(eps=e,lo=0,hi=K-1)`` without ``k`` or a domain has ``k = K`` (other
        ``lo`` are a one-line error, see :func:`~localpriv.mechanisms.base.k_from_bounds`)."""
        if params.get("lo") is None or params.get("hi") is None:
            return None
        return k_from_bounds(cls.spec_name, params["lo"], params["hi"])

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "lo": self.lo, "hi": self.hi}

    @property
    def truncated(self) -> bool:
        return self.lo is not None

    @property
    def a(self) -> float:
        """``e^{-eps}``."""
        return float(np.exp(-self.eps))

    @property
    def n_outputs(self) -> int | None:
        return self.hi - self.lo + 1 if self.lo is not None and self.hi is not None else None

    # ---- sampling -------------------------------------------------------------------------
    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """``z = x + N`` (two-sided geometric ``N``), clamped to ``lo..hi`` and shifted by ``-lo``
        when truncated."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        z = x + two_sided_geometric(self.eps, x.size, rng)
        if self.truncated:
            z = np.clip(z, self.lo, self.hi) - self.lo
        return z.astype(np.int64)

    # ---- channel / likelihood -------------------------------------------------------------
    def _prob(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """``P(z | x)`` for integer arrays (broadcast), with ``z`` in value units (not ``z - lo``)."""
        a, eps = self.a, self.eps
        c = -np.expm1(-eps) / (1.0 + a)
        d = np.abs(z - x).astype(float)
        with np.errstate(over="ignore"):  # eps * d beyond float64: probability 0
            p = c * np.exp(-eps * d)
        if not self.truncated:
            return p
        # P(Z <= lo | x) = P(N <= lo - x) and P(Z >= hi | x) = P(N <= x - hi) (N is symmetric),
        # each evaluated without cancellation: P(N <= s) = a^{-s}/(1+a) for s < 0,
        # 1 - a^{s+1}/(1+a) for s >= 0 (clamp of Eq. 6, equal to Eq. 7 when lo <= x <= hi)
        def cdf(s: ArrayLike) -> np.ndarray:
            s = np.asarray(s, dtype=float)
            return np.where(s < 0, np.exp(-eps * np.abs(s)) / (1.0 + a),
                            1.0 - np.exp(-eps * (np.abs(s) + 1.0)) / (1.0 + a))
        p = np.where(z == self.lo, cdf(self.lo - x), p)
        p = np.where(z == self.hi, cdf(x - self.hi), p)
        return np.where((z < self.lo) | (z > self.hi), 0.0, p)

    def _log_prob(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """``log P(z | x)`` in log space (no underflow), ``z`` in value units, broadcast."""
        eps = self.eps
        log1pa = np.log1p(np.exp(-eps))
        log_c = np.log(-np.expm1(-eps)) - log1pa
        x, z = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(z, dtype=float))
        with np.errstate(over="ignore"):  # eps * d beyond float64: log-probability -inf
            lp = log_c - eps * np.abs(z - x)
        if not self.truncated:
            return lp

        def log_cdf(s: np.ndarray) -> np.ndarray:  # log P(N <= s), as in _prob
            with np.errstate(over="ignore"):
                return np.where(s < 0, -eps * np.abs(s) - log1pa,
                                np.log1p(-np.exp(-eps * (np.abs(s) + 1.0) - log1pa)))
        lp = np.where(z == self.lo, log_cdf(self.lo - x), lp)
        lp = np.where(z == self.hi, log_cdf(x - self.hi), lp)
        return np.where((z < self.lo) | (z > self.hi), -np.inf, lp)

    def _reduced_logs(self) -> np.ndarray:
        """Exact log-probabilities on the few rows and columns that attain every column's spread
        (module doc): rows ``{0, k-1, clip(z)}``, columns ``{lo, lo+1, hi-1, hi}`` (truncated) or
        ``{-1, 0, k-1, k}`` (untruncated)."""
        k, lo, hi = self.k, self.lo, self.hi
        if lo is not None and hi is not None:
            col_set = {lo, hi}
            if lo + 1 <= hi - 1:
                col_set |= {lo + 1, hi - 1}
        else:
            col_set = {-1, 0, k - 1, k}
        cols = np.array(sorted(col_set))
        rows = np.unique(np.r_[0, k - 1, np.clip(cols, 0, k - 1)])
        return self._log_prob(rows[:, None], cols[None, :])

    def channel(self) -> np.ndarray:
        """``k x (hi-lo+1)`` matrix of Eq. 7 (truncated only)."""
        lo, hi = self.lo, self.hi
        if lo is None or hi is None:
            raise LocalPrivError(f"{self}: the untruncated geometric mechanism has infinitely many "
                                 "outputs; use likelihood(reports) on the observed reports")
        check_dense_size(self.k, hi - lo + 1, f"{self} channel")
        x = np.arange(self.k)[:, None]
        z = np.arange(lo, hi + 1)[None, :]
        return self._prob(x, z)

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        r = np.asarray(reports)
        if r.dtype.kind == "f" and np.any(r != np.round(r)):
            raise LocalPrivError(f"{self}: reports must be integers")
        if r.dtype.kind not in "iubf":
            raise LocalPrivError(f"{self}: reports must be integers, got dtype {r.dtype}")
        if not self.truncated:
            return r.astype(np.int64)
        return super().output_index(r)

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """``G[x, j] = P(reports[j] | x)``, exact for arbitrary integer reports (untruncated) or
        output indices ``0..hi-lo`` (truncated)."""
        z = self.output_index(reports)
        check_dense_size(self.k, z.size, f"{self} likelihood of {z.size} reports")
        if self.truncated:
            z = z + self.lo
        return self._prob(np.arange(self.k)[:, None], z[None, :])

    def likelihood_block(self, reports: ArrayLike, counts: np.ndarray) -> LikelihoodBlock:
        """Fast products: two first-order recurrences, ``O(k + m)``
        (:class:`~localpriv.likelihood.structured.ExpKernelBlock`; the clamped end bins as exact columns)."""

        return geometric_block_for(self, self.output_index(reports), counts)

    def rank_from_structure(self) -> tuple[int, str] | None:
        """Untruncated: rank ``k`` -- the rows are ``theta -> theta * P_N`` (convolution with the
        two-sided geometric law), whose Fourier transform ``(1-a^2)/(1 - 2a cos w + a^2)`` never
        vanishes, so no non-zero finitely supported ``w`` has ``w M = 0``. Truncated: ``None``."""
        if self.truncated:
            return None
        return self.k, ("exact: convolution with P(N=n) ~ a^|n|, whose Fourier transform "
                        "(1-a^2)/(1-2a cos w+a^2) never vanishes")

    # ---- privacy --------------------------------------------------------------------------
    def _probe(self) -> np.ndarray:
        """For the untruncated mechanism: ``G`` on the outputs ``-1..k``. Every column outside
        ``0..k-1`` has the same ratios as ``-1`` / ``k``, so these outputs give the exact sup."""
        return self.likelihood(np.arange(-1, self.k + 1))

    def epsilon_ldp(self) -> float:
        """``max_z (max_x log P(z|x) - min_x log P(z|x))`` from the exact log-probabilities on the
        rows and columns that attain it (module doc): O(1) for any ``k``, no underflow (e.g.
        ``eps (k - 1)`` untruncated)."""
        return checked_epsilon(ldp_epsilon_from_logs(self._reduced_logs()), str(self))

    def epsilon_geo(self, distance: ArrayLike | None = None) -> float:
        """Geo level for ``d(x, x') = |x - x'|`` (the default) or a given ``distance``.

        Untruncated with the default metric, from the structure:
        ``log P(z|x) - log P(z|x') = eps (|z - x'| - |z - x|) <= eps |x - x'|`` (triangle
        inequality) with equality for every output ``z <= min(x, x')``, so the level is ``eps``
        (``k >= 2``) for any ``k``. Otherwise from the channel (truncated) or the likelihood on
        the outputs ``-1..k`` (untruncated, which attains the sup)."""
        if distance is None and not self.truncated:
            if self.k < 2:
                return 0.0
            z, x1, x2 = -1, 0, 1  # an output left of both inputs attains the bound
            return checked_epsilon(self.eps * (abs(z - x2) - abs(z - x1)) / abs(x2 - x1), str(self),
                                   kind="epsilon_geo")
        if distance is None:
            check_dense_size(self.k, self.k, f"{self} distance matrix")
            idx = np.arange(self.k, dtype=float)
            distance = np.abs(idx[:, None] - idx[None, :])
        return geo_epsilon(self.channel() if self.truncated else self._probe(), distance, what=str(self))
