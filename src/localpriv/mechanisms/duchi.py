"""Duchi et al.'s one-bit mechanism for a number in ``[-1, 1]`` (``duchi``).

Duchi, Jordan and Wainwright, "Minimax Optimal Procedures for Locally Private Estimation", JASA
113:182-201, 2018 (section 4.2.3, one-dimensional case; also Wang et al., ICDE 2019, Algorithm 1).
A value ``t`` in ``[-1, 1]`` is reported as ``+B`` or ``-B`` with::

    P(+B | t) = 1/2 + t (e^eps - 1) / (2 (e^eps + 1)),      B = (e^eps + 1) / (e^eps - 1),

so ``E[report | t] = t``: the mean of the reports is unbiased for the users' mean, and one report
has variance ``B^2 - t^2`` (at most ``B^2``; Wang et al. 2019, Eq. 4).

Here the input is a domain index ``i`` in ``0..k-1`` perturbed at its cell centre
``t_i = (2i + 1)/k - 1`` (:mod:`localpriv.mechanisms._numeric`), and the report is the bit
(``1`` for ``+B``, ``0`` for ``-B``): the channel is the finite ``k x 2`` matrix above, so the
privacy level is computed from it (``ldp_epsilon``): ``log(P(+B|t_{k-1}) / P(+B|t_0))``, slightly
below ``eps`` because the extreme centres are ``+-(1 - 1/k)``, not ``+-1`` (for ``t = +-1`` the
ratio is exactly ``e^eps``). The probabilities are rounded to multiples of ``2^-64`` (at most
``2^-65`` off, exact floats) and the bit is drawn by one 64-bit word against that integer
threshold, so the channel is the law of the released bit, bit for bit.
The classic estimator is :meth:`Duchi.estimate_mean`; the EM engine
reads the channel as for any finite mechanism (with two outputs only the mean is identified, so
distribution estimates from ``duchi`` alone lean entirely on EMS's smoothing).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.mechanisms._numeric import mean_interval, signed_centres
from localpriv.mechanisms._sampling import bernoulli64, dyadic64, threshold64
from localpriv.mechanisms.base import Mechanism, register
from localpriv.utils.validation import check_eps, check_int, check_rng

if TYPE_CHECKING:
    from localpriv.domains.base import Domain
    from localpriv.utils.interval import Interval

__all__ = ["Duchi", "duchi_bound"]


def duchi_bound(eps: float) -> float:
    """``B = (e^eps + 1) / (e^eps - 1) = coth(eps / 2)``, accurate for small ``eps``."""
    return float(1.0 / np.tanh(0.5 * eps))


@register
class Duchi(Mechanism):
    """Duchi et al.'s one-bit mechanism on ``k`` cells of ``[-1, 1]`` at level ``eps``.

    Parameters
    ----------
    k : int
        Number of input cells (the domain's size).
    eps : float
        The privacy parameter of the continuous mechanism (its level for inputs ``+-1``).
    """

    spec_name = "duchi"
    examples = (dict(spec="duchi(k=5,eps=1.0)", eps_ldp=1.0),)  # centres +-0.8, not +-1: below eps

    def __init__(self, k: int, eps: float) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.eps = check_eps(eps)
        #: ``B``: the report's magnitude
        self.B = duchi_bound(self.eps)
        #: ``round(P(+B | t_x) 2^64)`` per cell: the client's integer thresholds
        self.thresholds = threshold64(self.p_plus(signed_centres(self.k)))

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps}

    @property
    def n_outputs(self) -> int:
        return 2

    def p_plus(self, t: ArrayLike) -> np.ndarray:
        """``P(+B | t) = 1/2 + t tanh(eps/2) / 2`` (``tanh(eps/2) = (e^eps - 1)/(e^eps + 1)``)."""
        return 0.5 + 0.5 * np.asarray(t, dtype=float) * np.tanh(0.5 * self.eps)

    def channel(self) -> np.ndarray:
        """``k x 2``: column 0 is ``-B``, column 1 is ``+B``, rows at the cells' centres, the
        probabilities those the client draws with (multiples of ``2^-64``)."""
        p = dyadic64(self.thresholds)
        return np.column_stack([1.0 - p, p])  # (1 - p: exact for p >= 1/2, else rounded once, 2^-53 relative)

    def draw_bits(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Bits ``[report = +B]`` of checked inputs ``x``: one 64-bit word against the cell's threshold."""
        return bernoulli64(self.thresholds, x, rng)

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """One bit per user: ``1`` (``+B``) with probability ``P(+B | t_x)`` (its dyadic value)."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        return self.draw_bits(x, rng).astype(np.int64)

    # ---- the classic estimator ------------------------------------------------------------
    def unbiased(self, reports: ArrayLike) -> np.ndarray:
        """Per-report unbiased estimates of ``t``: ``+B`` or ``-B``."""
        z = self.output_index(reports)
        return np.where(z == 1, self.B, -self.B)

    def report_variance(self, t: ArrayLike) -> np.ndarray:
        """``Var[report | t] = B^2 - t^2`` (Wang et al. 2019, Eq. 4)."""
        return self.B ** 2 - np.asarray(t, dtype=float) ** 2

    def estimate_mean(self, reports: ArrayLike, domain: Domain | None = None, level: float = 0.95,
                      counts: ArrayLike | None = None) -> Interval:
        """The unbiased mean ``(1/n) sum_u report_u`` with its normal interval
        (:func:`~localpriv.mechanisms._numeric.mean_interval`), in the domain's units (``t`` in
        ``[-1, 1]`` without a domain). Its variance is ``(B^2 - mean(t^2)) / n``."""
        return mean_interval(self.unbiased(reports), self.k, True, domain, level, "duchi (unbiased)",
                             counts)
