"""localpriv: local privacy mechanisms and distribution estimators.

The data's path: values -> :class:`Domain` -> :class:`Mechanism` -> reports -> :func:`aggregate`
-> :class:`Observations` -> estimator -> :class:`Estimate` (with its uncertainty).

Names are imported on first use (PEP 562), so that ``localpriv mechanism ...`` and other quick
commands do not pay for DuckDB, pandas and SciPy's optimizers they never touch.
"""
from __future__ import annotations

import importlib
import sys
import types

from ._validation import LocalPrivError, PrivacyWarning

__version__ = "0.1.0"

_WHERE = {
    "datasets": ".datasets", "metrics": ".metrics",
    "DuckDBAggregator": ".aggregate", "NumpyAggregator": ".aggregate",
    "CategoricalDomain": ".domains", "Domain": ".domains", "IntegerDomain": ".domains",
    "parse_domain": ".domains", "Estimate": ".estimate",
    "ESTIMATORS": ".estimators", "ibu": ".estimators", "inv": ".estimators",
    "KRR": ".mechanisms", "MatrixMechanism": ".mechanisms", "Mechanism": ".mechanisms", "parse": ".mechanisms",
    "ObservationBlock": ".observations", "Observations": ".observations", "GridDomain": ".planar",
    "perturb": ".reports", "perturb_file": ".reports", "write_reports": ".reports",
    "read_values": ".reports", "make_generator": ".rng", "secure_generator": ".rng",
}

__all__ = ["LocalPrivError", "PrivacyWarning", "estimate", "aggregate", *_WHERE]


def estimate(obs, method: str = "ibu", **settings):
    """Run the estimator named ``method`` on ``obs`` (:func:`localpriv.estimators.estimate`)."""
    from .estimators import estimate as _run
    return _run(obs, method, **settings)


def aggregate(source, domain=None, aggregator=None):
    """Aggregate reports and counts to Observations (:func:`localpriv.aggregate.aggregate`)."""
    from .aggregate import aggregate as _run
    return _run(source, domain, aggregator)


#: functions of the package that share their name with a submodule (localpriv/estimate.py holds
#: the Estimate class, localpriv/aggregate.py the engines): the package attribute stays the function
_SHADOWED = frozenset({"estimate", "aggregate"})


class _Package(types.ModuleType):
    """Loading a submodule sets an attribute of the same name on its package; for the names in
    ``_SHADOWED`` the package keeps its function (as it did when it imported everything eagerly)."""

    def __setattr__(self, name, value):
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'localpriv' has no attribute {name!r}")
    module = importlib.import_module(where, __name__)
    value = module if where == "." + name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
