"""The Square Wave mechanism, bucketized (``sw``).

Li, Wang, Lopuhaä-Zwakenberg, Li and Škorić, "Estimating Numerical Distributions under Local
Differential Privacy", SIGMOD 2020, section 4. A value ``v`` in ``[0, 1]`` is reported as a real
``z`` in ``[-b, 1 + b]`` with density::

    f(z | v) = p = e^eps / (2 b e^eps + 1)   if |z - v| <= b,
               q = 1 / (2 b e^eps + 1)       otherwise,

    b = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps))       (the paper's Eq. for b, which
                                                                    maximizes the mutual information)

and the collector estimates the distribution of ``v`` by EMS (EM with a smoothing step) on
``d`` input cells and ``d'`` output buckets (the paper's section 5).

Here the whole protocol is one finite mechanism: the input is a domain index ``i`` in ``0..k-1``,
perturbed at its cell centre ``v_i = (i + 1/2)/k`` (:mod:`localpriv.mechanisms._numeric`), and the
report is the index ``j`` of the bucket of ``[-b, 1 + b]`` (``buckets`` equal buckets, default
``k``) that holds ``z``. Its channel is the exact ``k x buckets`` matrix::

    M[i, j] = q |B_j| + (p - q) |B_j  intersect  [v_i - b, v_i + b]|,

rounded to integers in units of ``2^-64`` (:class:`~localpriv.mechanisms._sampling.IntegerChannel`:
``W = round(M 2^64)``, each row summing to ``2^64`` exactly). Reports are drawn from those
integers (one 64-bit word of the generator per user against the row's cumulative weights,
integer comparisons only), so the released law is ``W / 2^64`` bit for bit, and the privacy
level is computed from the same integers (``max_j log(max_i W[i, j] / min_i W[i, j])``; ``eps``
as soon as some bucket lies inside one input's window and outside another's, a little less
otherwise; docs/decisions/0042-exact-release-of-square-wave.md). The channel (``W / 2^64``) is
what the EM engine's IBU and EMS read as any
other channel: ``localpriv.estimate(obs, "ems")`` on an :class:`~localpriv.domains.IntervalDomain`
is the paper's estimator (with this library's smoothing kernel and bandwidth chosen by held-out
likelihood, :mod:`localpriv.estimators.regularized`).
"""
from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import check_dense_size
from localpriv.mechanisms._numeric import mean_interval, unit_centres
from localpriv.mechanisms._sampling import IntegerChannel
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.interval import Interval
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

if TYPE_CHECKING:
    from localpriv.domains import Domain

__all__ = ["SquareWave", "sw_width", "MAX_UNBIASED_SIDE"]

#: the largest ``min(k, buckets)`` for which :meth:`SquareWave.unbiased` solves its ``k x buckets``
#: system (a dense least-squares solve, O(k buckets min(k, buckets)))
MAX_UNBIASED_SIDE = 4096


def sw_width(eps: float) -> float:
    """``b = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps))`` (Li et al. 2020), computed as
    ``(eps - (1 - e^{-eps})) / (2 (expm1(eps) - eps))`` (numerator and denominator over ``e^eps``)."""
    num = eps + math.expm1(-eps)           # eps - 1 + e^{-eps} = (eps e^eps - e^eps + 1) / e^eps
    den = 2.0 * (math.expm1(eps) - eps)    # 2 (e^eps - 1 - eps)
    return num / den


@register
class SquareWave(Mechanism):
    """Square Wave on ``k`` cells of ``[0, 1]`` at level ``eps``, reports in ``buckets`` buckets.

    Parameters
    ----------
    k : int
        Number of input cells (the domain's size).
    eps : float
        Privacy parameter of the continuous mechanism.
    buckets : int, optional
        Number of equal output buckets of ``[-b, 1 + b]``; default ``k``.
    """

    spec_name = "sw"
    size_products = (("k", "buckets"),)  # the channel table
    examples = (dict(spec="sw(k=5,eps=1.0,buckets=8)", eps_ldp=1.0, tight=True),)

    def __init__(self, k: int, eps: float, buckets: int | None = None) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.eps = check_eps(eps)
        self.buckets = self.k if buckets is None else check_int(buckets, "buckets", minimum=1)
        #: half-width of the high-density window
        self.b = sw_width(self.eps)
        norm = 2.0 * self.b * math.exp(self.eps) + 1.0
        self.p = math.exp(self.eps) / norm
        self.q = 1.0 / norm

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "buckets": self.buckets}

    @property
    def n_outputs(self) -> int:
        return self.buckets

    def bucket_edges(self) -> np.ndarray:
        """The ``buckets + 1`` edges of the output buckets, ``-b`` to ``1 + b``."""
        return np.linspace(-self.b, 1.0 + self.b, self.buckets + 1)

    def paper_channel(self) -> np.ndarray:
        """``M[i, j] = q |B_j| + (p - q) |B_j  intersect  [v_i - b, v_i + b]|`` (module docstring) in
        float64, rows renormalized to absorb rounding (they sum to 1 in exact arithmetic): the law the
        integer table :meth:`channel` rounds to ``2^-64`` units."""
        check_dense_size(self.k, self.buckets, f"{self} channel")
        e = self.bucket_edges()
        lo, hi = e[:-1][None, :], e[1:][None, :]
        v = unit_centres(self.k)[:, None]
        overlap = np.clip(np.minimum(hi, v + self.b) - np.maximum(lo, v - self.b), 0.0, None)
        M = self.q * (hi - lo) + (self.p - self.q) * overlap
        return M / M.sum(axis=1, keepdims=True)

    @cached_property
    def table(self) -> IntegerChannel:
        """The released law as integers, ``W = round(M 2^64)`` (:class:`IntegerChannel`), built once."""
        return IntegerChannel(self.paper_channel(), str(self))

    def channel(self) -> np.ndarray:
        """The released law ``W[i, j] / 2^64`` (:meth:`table`): the paper's channel to ``2^-64``."""
        check_dense_size(self.k, self.buckets, f"{self} channel")
        return self.table.probabilities()

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """One bucket index per input index, drawn exactly from the integer table (one 64-bit word
        per user against the cumulative weights of its row; no floating point)."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        check_dense_size(self.k, self.buckets, f"{self} (sampling its channel)")
        return self.table.sample(x, rng)

    def epsilon_ldp(self) -> float:
        """``max_j log(max_i W[i, j] / min_i W[i, j])`` from the integers the client draws with."""
        check_dense_size(self.k, self.buckets, f"{self} channel")
        return checked_epsilon(self.table.epsilon_ldp(), str(self))

    def unbiased_weights(self) -> np.ndarray:
        """``g`` with ``M g = u`` (``u_i`` the cell centres, ``M`` the channel): ``g[j]`` is an
        unbiased estimate of the user's ``u`` from one report in bucket ``j``, since
        ``E[g(z) | i] = sum_j M[i, j] g[j] = u_i``. Solved by least squares (the minimum-norm
        solution when ``buckets > k``); it exists when ``M`` has full row rank, so ``buckets >= k``
        is needed, and a residual above ``1e-9`` is refused. ``min(k, buckets)`` is capped at
        :data:`MAX_UNBIASED_SIDE`."""
        if min(self.k, self.buckets) > MAX_UNBIASED_SIDE:
            raise LocalPrivError(f"{self}: the unbiased mean solves a {self.k} x {self.buckets} system; "
                                 f"limit min(k, buckets) <= {MAX_UNBIASED_SIDE}")
        if self.buckets < self.k:
            raise LocalPrivError(f"{self}: no unbiased mean from {self.buckets} buckets of {self.k} cells "
                                 "(it needs buckets >= k)")
        M = self.channel()
        u = unit_centres(self.k)
        g = np.linalg.lstsq(M, u, rcond=None)[0]
        if float(np.max(np.abs(M @ g - u))) > 1e-9:
            raise LocalPrivError(f"{self}: the channel is (numerically) singular: no unbiased mean")
        return g

    def unbiased(self, reports: ArrayLike) -> np.ndarray:
        """Per-report unbiased estimates of ``u`` in ``[0, 1]``: ``g[j]`` (:meth:`unbiased_weights`)."""
        return self.unbiased_weights()[self.output_index(reports)]

    def estimate_mean(self, reports: ArrayLike, domain: Domain | None = None, level: float = 0.95,
                      counts: ArrayLike | None = None) -> Interval:
        """The unbiased mean of the reports with its normal interval
        (:func:`~localpriv.mechanisms._numeric.mean_interval`), in the domain's units (``u`` in
        ``[0, 1]`` without a domain)."""
        return mean_interval(self.unbiased(reports), self.k, False, domain, level, "sw (unbiased)", counts)
