"""The classic unbiased mean of numeric reports, from aggregated observations.

An EM estimate's mean is pulled by its prior and smoothing; the mechanisms ``pm``, ``hm``,
``duchi`` and ``sw`` also give every report an unbiased estimate of its user's value, whose mean
is unbiased for the users' mean whatever their distribution (``Mechanism.estimate_mean``). This
module applies that estimator to counts, so that both means can be shown side by side
(``Estimate.statistics("mean,mean_unbiased")``, ``localpriv estimate --stat mean``).
"""
from __future__ import annotations

from localpriv.data.observations import Observations
from localpriv.domains import Domain
from localpriv.utils.interval import Interval
from localpriv.utils.validation import LocalPrivError

__all__ = ["unbiased_mean", "has_unbiased_mean"]


def has_unbiased_mean(obs: Observations) -> bool:
    """Are the observations the reports of one mechanism with a classic unbiased mean estimator
    (``pm``, ``hm``, ``duchi``, ``sw``: a method ``estimate_mean``)?"""
    return len(obs.blocks) == 1 and callable(getattr(obs.blocks[0].mechanism, "estimate_mean", None))


def unbiased_mean(obs: Observations, domain: Domain | None = None, level: float = 0.95) -> Interval:
    """The classic unbiased mean of numeric reports, with its normal interval, from counts.

    Every distinct report ``z_j`` (seen ``c_j`` times) gives the mechanism's unbiased estimate of
    its user's value (``t`` in ``[-1, 1]``: Piecewise, Wang et al. 2019, Eq. 5; Hybrid, their
    section III-C; Duchi et al. 2018, Eq. 4; ``u`` in ``[0, 1]``: Square Wave, through the exact
    inverse ``M g = u`` of its bucket channel, :meth:`SquareWave.unbiased_weights
    <localpriv.mechanisms.square_wave.SquareWave.unbiased_weights>`). Their mean over the
    ``n = sum_j c_j`` reports is unbiased for the users' mean (of the cells' centres) whatever the
    distribution; its interval is ``mean +- z_{(1+level)/2} s / sqrt(n)``, ``s`` the reports'
    sample standard deviation.

    Parameters
    ----------
    obs : Observations
        Counts of one of ``pm``, ``hm``, ``duchi``, ``sw`` (the reports of several mechanisms are
        refused).
    domain : Domain, optional
        The numeric line the indices stand for (``interval(lo,hi,k)`` or ``lo..hi``): the mean in
        its units; without one, in ``t`` (or ``u``) units.
    level : float
        Confidence level of the interval.

    Returns
    -------
    Interval
        Method ``"<mechanism> (unbiased)"``.
    """
    if not has_unbiased_mean(obs):
        names = sorted({b.mechanism.spec_name for b in obs.blocks})
        raise LocalPrivError(f"no unbiased mean for reports of {', '.join(names) or 'no mechanism'}: it needs "
                             "the reports of one pm, hm, duchi or sw mechanism")
    block = obs.blocks[0]
    iv = block.mechanism.estimate_mean(block.reports, domain, level,  # type: ignore[attr-defined]
                                       counts=block.counts)
    if not isinstance(iv, Interval):  # pragma: no cover - every estimate_mean returns one
        raise LocalPrivError(f"{block.mechanism}: estimate_mean returned {type(iv).__name__}")
    return iv
