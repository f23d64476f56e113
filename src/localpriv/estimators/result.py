"""What every estimator returns: the estimated distribution and how it was obtained.

:class:`localpriv.inference.Estimate` extends it with the estimate's uncertainty; estimators (this
layer) return a :class:`Fit`, and :func:`localpriv.estimate` returns the :class:`Estimate`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from localpriv.domains import Domain

__all__ = ["Fit"]


@dataclass(repr=False)
class Fit:
    """An estimated distribution on the input domain, with how it was obtained (no uncertainty).

    Attributes
    ----------
    distribution : ndarray
        The estimate (non-negative, sums to 1).
    domain : Domain or None
        The domain whose elements the entries refer to (index order).
    estimator : str
        e.g. ``"ibu"``, ``"inv-n"``.
    settings : dict
        The estimator's settings (tolerance, iteration cap, start, ...).
    loglik : float or None
        The log-likelihood of the estimate for the observations (seed 001 Eq. 2), when defined.
    iterations : int or None
        Iterations used by iterative estimators.
    converged : bool or None
        ``False`` when an iterative estimator stopped at its iteration cap: flagged, not hidden.
    n : float
        Number of reports the estimate is based on.
    extra : dict
        Estimator-specific diagnostics (e.g. the raw inverse before post-processing).
    """

    distribution: np.ndarray
    domain: Domain | None
    estimator: str
    settings: dict[str, Any] = field(default_factory=dict)
    loglik: float | None = None
    iterations: int | None = None
    converged: bool | None = None
    n: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    #: the observations the estimate came from (for its uncertainty; not saved)
    observations: Any = field(default=None, repr=False, compare=False)

    @property
    def labels(self) -> np.ndarray:
        if self.domain is None:
            return np.arange(self.distribution.size)
        return self.domain.labels

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        return np.asarray(self.distribution, dtype=dtype)

    def summary(self) -> dict[str, Any]:
        return {
            "estimator": self.estimator,
            "settings": {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
                         for k, v in self.settings.items()},
            "loglik": self.loglik,
            "iterations": self.iterations,
            "converged": self.converged,
            "n": self.n,
            "domain": None if self.domain is None else self.domain.spec(),
        }

    def __repr__(self) -> str:
        conv = "" if self.converged is None else (", converged" if self.converged else ", NOT converged (hit the cap)")
        it = "" if self.iterations is None else f", {self.iterations} iterations"
        return f"{type(self).__name__}({self.estimator}, k={self.distribution.size}, n={self.n:g}{it}{conv})"
