"""Statistics of numeric attributes estimated on an :class:`~localpriv.domains.IntervalDomain` (issue 20).

An estimate on ``interval(lo,hi,bins)`` is a distribution over cells of width ``w``.
:meth:`Estimate.mean() <localpriv.estimate.Estimate.mean>` and
:meth:`Estimate.var() <localpriv.estimate.Estimate.var>` work on it as on any numeric line (values:
the cells' centres; the variance is that of the centres, to which values spread uniformly within
their cells would add ``w^2 / 12``, Sheppard's correction). :meth:`Estimate.quantile` interpolates
the CDF over unit-width cells, so on intervals use :func:`quantile` here, which interpolates over
the cells' true width: it computes the quantile and its interval with the uncertainty module on the
index line (cell ``i`` spanning ``[i - 1/2, i + 1/2]``) and maps them to values by
``lo + (t + 1/2) w``, an increasing affine map, so intervals map to intervals.

The mechanisms' classic unbiased mean estimators (``pm``, ``hm``, ``duchi``) are methods of the
mechanisms: ``mech.estimate_mean(reports, domain)``.
"""
from __future__ import annotations

import dataclasses

from ._validation import LocalPrivError
from .domains import IntegerDomain, IntervalDomain

__all__ = ["quantile"]


def quantile(est, q: float, level: float = 0.95):
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
    from .uncertainty import Interval

    dom = est.domain
    if not isinstance(dom, IntervalDomain):
        raise LocalPrivError(f"numeric.quantile needs an estimate on an interval domain, got "
                             f"{'none' if dom is None else dom.spec()}: use Estimate.quantile")
    proxy = dataclasses.replace(est, domain=IntegerDomain(0, dom.bins - 1))  # shares the uncertainty cache
    iv = proxy.quantile(q, level)

    def conv(t):
        return float(dom.lo + (t + 0.5) * dom.width)

    return Interval(conv(iv.value), conv(iv.lower), conv(iv.upper), iv.level, iv.method)
