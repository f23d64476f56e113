"""Statistics of numeric attributes estimated on an :class:`~localpriv.domains.IntervalDomain`.

An estimate on ``interval(lo,hi,bins)`` is a distribution over cells of width ``w``.
:meth:`Estimate.mean() <localpriv.inference.estimate.Estimate.mean>` and
:meth:`Estimate.var() <localpriv.inference.estimate.Estimate.var>` work on it as on any numeric line (values:
the cells' centres; the variance is that of the centres, to which values spread uniformly within
their cells would add ``w^2 / 12``, Sheppard's correction), and so does
:meth:`Estimate.quantile`, which interpolates the CDF linearly within each cell's edges;
:func:`quantile` here is the same, refusing other domains.

The mechanisms' classic unbiased mean estimators (``pm``, ``hm``, ``duchi``, and ``sw`` through
the exact inverse of its bucket channel) are methods of the mechanisms:
``mech.estimate_mean(reports, domain)``; :func:`localpriv.inference.unbiased.unbiased_mean` applies
them to aggregated observations (the statistic ``mean_unbiased``, which ``localpriv estimate --stat
mean`` prints beside the estimate's mean).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from localpriv.domains import IntervalDomain
from localpriv.utils.interval import Interval
from localpriv.utils.validation import LocalPrivError

if TYPE_CHECKING:
    from localpriv.inference.estimate import Estimate

__all__ = ["quantile"]


def quantile(est: Estimate, q: float, level: float = 0.95) -> Interval:
    """The ``q``-quantile of an estimate on an :class:`IntervalDomain`, with its interval.

    Parameters
    ----------
    est : Estimate
        An estimate whose domain is an :class:`IntervalDomain`.
    q : float
        The quantile's level, strictly between 0 and 1.
    level : float
        Confidence level of the interval.

    Returns
    -------
    Interval
        In the domain's units (the CDF linear within each cell).
    """
    dom = est.domain
    if not isinstance(dom, IntervalDomain):
        raise LocalPrivError(f"numeric.quantile needs an estimate on an interval domain, got "
                             f"{'none' if dom is None else dom.spec()}: use Estimate.quantile")
    return est.quantile(q, level)
