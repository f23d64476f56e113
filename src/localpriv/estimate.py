"""The one result type of every estimator."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .domains import Domain

__all__ = ["Estimate"]


@dataclass
class Estimate:
    """An estimated distribution on the input domain, with how it was obtained.

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

    @property
    def labels(self) -> np.ndarray:
        if self.domain is None:
            return np.arange(self.distribution.size)
        return self.domain.labels

    def __array__(self, dtype=None, copy=None):
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

    def to_dict(self) -> dict[str, Any]:
        d = self.summary()
        d["labels"] = [x.item() if hasattr(x, "item") else x for x in self.labels]
        d["distribution"] = self.distribution.tolist()
        return d

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"value": self.labels, "probability": self.distribution})

    def save(self, path) -> Path:
        """Write as JSON (``.json``: estimate and metadata) or CSV (value, probability)."""
        from .formats import ESTIMATE_SUFFIXES, atomic_output

        path = Path(path)
        with atomic_output(path, ESTIMATE_SUFFIXES, what="estimate file") as tmp:
            if path.suffix.lower() == ".json":
                tmp.write_text(json.dumps(self.to_dict(), indent=2))
            else:
                self.to_frame().to_csv(tmp, index=False)
        return path

    def __repr__(self) -> str:
        conv = "" if self.converged is None else (", converged" if self.converged else ", NOT converged (hit the cap)")
        it = "" if self.iterations is None else f", {self.iterations} iterations"
        return f"Estimate({self.estimator}, k={self.distribution.size}, n={self.n:g}{it}{conv})"
