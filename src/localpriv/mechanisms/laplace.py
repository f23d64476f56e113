"""Linear Laplace mechanism, continuous or binned (seed 001 section 7.3, refs [27], [30]).

Continuous: a report ``z = x + N`` with ``N ~ Laplace(0, 1/eps)``, density::

    f(z | x) = (eps / 2) exp(-eps |z - x|),        z in R.

Binned with width ``w`` (``bins=w``): the report is the index ``j`` of the bin
``[(j - 1/2) w, (j + 1/2) w)`` holding ``x + N`` (the nearest multiple of ``w``)::

    P(j | x) = F((j + 1/2) w - x) - F((j - 1/2) w - x),    F the Laplace(0, 1/eps) CDF,

and with ``lo``/``hi`` (bin indices) the bin index is clamped to ``lo..hi`` (the tails pile up on
the end bins, as for the truncated geometric mechanism, seed 001 Eq. 7); reports are then output
indices ``j - lo`` and the channel is ``k x (hi - lo + 1)``. ``laplace(eps=e,bins=1.0,lo=0,hi=k-1)``
is the square version used for INV in the reproductions.

All versions are post-processings of the continuous mechanism, so they are eps-geo-indistinguishable
for ``d(x, x') = |x - x'|`` (index units). The level computed from the density/channel equals eps
(attained by reports, or bins, lying outside the segment between ``x`` and ``x'``).
"""
from __future__ import annotations

import numpy as np

from .._validation import LocalPrivError, check_eps, check_int, check_rng
from ..privacy import geo_epsilon, ldp_epsilon
from .base import Mechanism, register

__all__ = ["Laplace", "laplace_interval_prob"]


def laplace_interval_prob(u, v, eps: float) -> np.ndarray:
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
        Bin width ``w`` in index units; ``None`` (default) gives continuous float64 reports.
    lo, hi : int, optional
        Clamp the bin index to ``lo..hi`` (binned only); reports become ``j - lo``.
    """

    spec_name = "laplace"

    def __init__(self, k: int, eps: float, bins: float | None = None, lo: int | None = None,
                 hi: int | None = None):
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

    def params(self):
        return {"k": self.k, "eps": self.eps, "bins": self.bins, "lo": self.lo, "hi": self.hi}

    @property
    def continuous(self) -> bool:
        return self.bins is None

    @property
    def truncated(self) -> bool:
        return self.lo is not None

    @property
    def report_kind(self):  # type: ignore[override]
        return "float64" if self.continuous else "int64"

    @property
    def n_outputs(self):
        return self.hi - self.lo + 1 if self.truncated else None

    # ---- sampling -------------------------------------------------------------------------
    def sample(self, x, rng) -> np.ndarray:
        x = self._check_inputs(x)
        rng = check_rng(rng)
        z = x + rng.laplace(0.0, 1.0 / self.eps, x.size)
        if self.continuous:
            return z.astype(np.float64)
        j = np.floor(z / self.bins + 0.5).astype(np.int64)
        if self.truncated:
            j = np.clip(j, self.lo, self.hi) - self.lo
        return j

    # ---- channel / likelihood -------------------------------------------------------------
    def _bin_prob(self, x: np.ndarray, j: np.ndarray) -> np.ndarray:
        """``P(bin j | x)`` with ``j`` an absolute bin index (clamped ends when truncated)."""
        w = self.bins
        u = (j - 0.5) * w - x
        v = (j + 0.5) * w - x
        if self.truncated:
            u = np.where(j == self.lo, -np.inf, u)
            v = np.where(j == self.hi, np.inf, v)
        p = laplace_interval_prob(u, v, self.eps)
        if self.truncated:
            p = np.where((j < self.lo) | (j > self.hi), 0.0, p)
        return p

    def channel(self) -> np.ndarray:
        if not self.truncated:
            raise LocalPrivError(f"{self}: outputs are unbounded (continuous or untruncated bins); "
                                 "use likelihood(reports), or bins=1.0,lo=0,hi=k-1 for a finite channel")
        return self._bin_prob(np.arange(self.k)[:, None], np.arange(self.lo, self.hi + 1)[None, :])

    def output_index(self, reports) -> np.ndarray:
        r = np.asarray(reports)
        if self.continuous:
            r = r.astype(np.float64)
            if not np.all(np.isfinite(r)):
                raise LocalPrivError(f"{self}: reports contain NaN or infinite values")
            return r
        if r.dtype.kind == "f" and np.any(r != np.round(r)):
            raise LocalPrivError(f"{self}: binned reports must be integer bin indices")
        if not self.truncated:
            return r.astype(np.int64)
        return super().output_index(r)

    def likelihood(self, reports) -> np.ndarray:
        """``G[x, j]``: the density ``f(z_j | x)`` (continuous) or ``P(bin | x)`` (binned)."""
        z = self.output_index(reports)
        x = np.arange(self.k)[:, None]
        if self.continuous:
            return 0.5 * self.eps * np.exp(-self.eps * np.abs(z[None, :] - x))
        if self.truncated:
            z = z + self.lo
        return self._bin_prob(x, z[None, :])

    def likelihood_block(self, reports, counts):
        """Structured products (issue 8): continuous reports and unit bins by two first-order
        recurrences (``O(k + m)``, :class:`~localpriv.structured.ExpKernelBlock`; the clamped
        end bins as exact columns); the dense default for other bin widths."""
        from ..structured import laplace_block_for

        block = laplace_block_for(self, self.output_index(reports), counts)
        return block if block is not None else super().likelihood_block(reports, counts)

    # ---- privacy --------------------------------------------------------------------------
    def _probe(self) -> np.ndarray:
        """Likelihood on outputs reaching beyond both ends of the inputs (where the sup of the
        ratios is attained); the exact channel when truncated."""
        if self.truncated:
            return self.channel()
        if self.continuous:
            return self.likelihood(np.arange(-1.0, self.k + 1.0, 0.5))
        lo = int(np.floor(-1.0 / self.bins)) - 1
        hi = int(np.ceil(self.k / self.bins)) + 1
        return self.likelihood(np.arange(lo, hi + 1))

    def epsilon_ldp(self) -> float:
        return ldp_epsilon(self._probe())

    def epsilon_geo(self, distance=None) -> float:
        """Geo level computed from the channel (truncated) or from the density/bin likelihood on
        outputs beyond both ends of the inputs (unbounded versions); ``distance`` defaults to
        ``|x - x'|`` in index units."""
        if distance is None:
            idx = np.arange(self.k, dtype=float)
            distance = np.abs(idx[:, None] - idx[None, :])
        return geo_epsilon(self._probe(), distance)
