"""Privacy mechanisms. Each module adds one family; all share :class:`Mechanism`.

``parse("krr(k=100,eps=2.0)")`` builds a mechanism from its spec; ``str(mech)`` gives it back.
"""
from __future__ import annotations

import importlib
import pkgutil

from .base import DenseBlock, LikelihoodBlock, Mechanism, format_spec, parse, register, registered
from .krr import KRR, krr_mle
from .matrix import MatrixMechanism

# every other module in this package registers its mechanisms on import
for _info in pkgutil.iter_modules(__path__):
    if _info.name not in {"base", "krr", "matrix"}:
        importlib.import_module(f"{__name__}.{_info.name}")

__all__ = [
    "Mechanism",
    "LikelihoodBlock",
    "DenseBlock",
    "KRR",
    "MatrixMechanism",
    "krr_mle",
    "parse",
    "register",
    "registered",
    "format_spec",
]
