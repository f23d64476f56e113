"""localpriv: local privacy mechanisms and distribution estimators.

The data's path: values -> :class:`Domain` -> :class:`Mechanism` -> reports -> :func:`aggregate`
-> :class:`Observations` -> estimator -> :class:`Estimate`.
"""
from . import datasets, metrics
from ._validation import LocalPrivError
from .aggregate import DuckDBAggregator, NumpyAggregator, aggregate
from .domains import CategoricalDomain, Domain, IntegerDomain, parse_domain
from .estimate import Estimate
from .estimators import ESTIMATORS, estimate, ibu, inv
from .mechanisms import KRR, MatrixMechanism, Mechanism, parse
from .observations import ObservationBlock, Observations
from .planar import GridDomain
from .reports import perturb, write_reports

__version__ = "0.1.0"

__all__ = [
    "LocalPrivError", "Domain", "IntegerDomain", "CategoricalDomain", "GridDomain", "parse_domain",
    "Mechanism", "KRR", "MatrixMechanism", "parse", "perturb", "write_reports", "aggregate",
    "DuckDBAggregator", "NumpyAggregator", "Observations", "ObservationBlock", "Estimate",
    "estimate", "ibu", "inv", "ESTIMATORS", "datasets", "metrics",
]
