"""Privacy mechanisms. Each module adds one family; all share :class:`Mechanism`.

``parse("krr(k=100,eps=2.0)")`` builds a mechanism from its spec; ``str(mech)`` gives it back.
"""
from __future__ import annotations

# every family module registers its mechanisms on import: importing this package (which any import
# of one of its modules does first) fills the registry that ``parse`` reads
from localpriv.mechanisms import (  # noqa: F401
    cms,
    duchi,
    exponential,
    geometric,
    grouped,
    hadamard,
    hashing,
    hcms,
    histogram,
    hybrid,
    laplace,
    longitudinal,
    multiattr,
    piecewise,
    planar,
    rappor,
    rrba,
    shokri,
    square_wave,
    subset,
    unary,
)
from localpriv.mechanisms.base import Mechanism, format_spec, parse, register, registered
from localpriv.mechanisms.krr import KRR, krr_mle
from localpriv.mechanisms.matrix import MatrixMechanism

__all__ = [
    "Mechanism",
    "KRR",
    "MatrixMechanism",
    "krr_mle",
    "parse",
    "register",
    "registered",
    "format_spec",
]
