"""What the numeric mechanisms share: cell centres and the classic mean estimators' intervals.

The numeric mechanisms (``sw``, ``pm``, ``hm``, ``duchi``) take domain indices ``0..k-1`` like every
:class:`~localpriv.mechanisms.base.Mechanism`: cell ``i`` of an
:class:`~localpriv.domains.IntervalDomain` (or value ``i`` of an integer line) is perturbed at its
centre, ``u_i = (i + 1/2) / k`` in ``[0, 1]`` (Square Wave) or ``t_i = 2 u_i - 1`` in ``[-1, 1]``
(Piecewise, Hybrid, Duchi et al.). Every report is then a function of the cell alone, so the
likelihood of the EM engine is exact and the privacy level is computed from what is released; the
price is the discretization (a value moves by at most half a cell, ``w/2``).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from localpriv.utils.interval import Interval, check_level
from localpriv.utils.validation import LocalPrivError

if TYPE_CHECKING:
    from localpriv.domains import Domain

__all__ = ["unit_centres", "signed_centres", "mean_interval", "index_to_value"]


def unit_centres(k: int) -> np.ndarray:
    """``u_i = (i + 1/2) / k``: the centres of ``k`` equal cells of ``[0, 1]``."""
    return (np.arange(k) + 0.5) / k


def signed_centres(k: int) -> np.ndarray:
    """``t_i = 2 u_i - 1 = (2i + 1)/k - 1``: the centres of ``k`` equal cells of ``[-1, 1]``."""
    return (2.0 * np.arange(k) + 1.0) / k - 1.0


def index_to_value(i: ArrayLike, k: int, domain: Domain | None = None) -> np.ndarray:
    """Map a (real) position ``i`` in index units to the domain's units: ``decode(0) + i * step``
    (``step`` the spacing of the domain's values, linear for integer lines and intervals); without a
    domain, ``i`` itself."""
    i = np.asarray(i, dtype=float)
    if domain is None:
        return i
    if getattr(domain, "size", None) != k or not getattr(domain, "is_numeric", False) \
            or getattr(domain, "columns", 1) != 1:
        raise LocalPrivError(f"a mean needs a numeric line domain of {k} values, got "
                             f"{getattr(domain, 'spec', lambda: domain)()}")
    v0 = float(np.asarray(domain.decode(np.array([0])), dtype=float)[0])
    step = 0.0 if k == 1 else (float(np.asarray(domain.decode(np.array([k - 1])), dtype=float)[0]) - v0) / (k - 1)
    return v0 + i * step


def mean_interval(per_report: ArrayLike, k: int, signed: bool, domain: Domain | None, level: float,
                  method: str, counts: ArrayLike | None = None) -> Interval:
    """The mean of per-report unbiased estimates with its normal interval, in the domain's units.

    ``per_report`` holds unbiased estimates of the user's centre (``t`` in ``[-1, 1]`` when
    ``signed``, else ``u`` in ``[0, 1]``); the mean over ``n`` users is unbiased for the users'
    mean centre and its standard error is taken as ``s / sqrt(n)``, ``s^2`` the sample variance of
    ``per_report``, which estimates ``E[Var(z | t)] + Var(t)``: exact for the mean of a population
    the users are drawn from, conservative by ``Var(t) / n`` for these users' own mean (the
    mechanisms' ``report_variance(t)`` is the noise part).
    The interval ``mean +- z_{(1+level)/2} s / sqrt(n)`` is mapped to the domain's units
    (:func:`index_to_value`; without a domain: ``t`` or ``u`` itself).

    With ``counts`` (distinct reports and how often each was seen, as in a counts file),
    ``per_report[j]`` stands for ``counts[j]`` reports: ``n = sum_j c_j``, the mean
    ``sum_j c_j r_j / n`` and ``s^2 = sum_j c_j (r_j - mean)^2 / (n - 1)``, the same numbers as
    with every report repeated."""
    from scipy import stats


    lv = check_level(level)
    r = np.asarray(per_report, dtype=float).ravel()
    c = np.ones_like(r) if counts is None else np.asarray(counts, dtype=float).ravel()
    if c.shape != r.shape:
        raise LocalPrivError(f"{r.size} per-report estimates but {c.size} counts")
    n = float(c.sum())
    if n < 2:
        raise LocalPrivError(f"a mean with an interval needs at least 2 reports, got {n:g}")
    m = float(c @ r) / n
    se = math.sqrt(float(c @ (r - m) ** 2) / (n - 1.0) / n)
    z = float(stats.norm.ppf(0.5 + lv / 2))

    def conv(t: float) -> float:
        if domain is None:
            return float(t)
        u = (t + 1.0) / 2.0 if signed else t
        return float(index_to_value(u * k - 0.5, k, domain))

    return Interval(conv(m), conv(m - z * se), conv(m + z * se), lv, method)
