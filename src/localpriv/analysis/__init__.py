"""The theory as tools (seed 001 sections 4-8): privacy levels, identifiability, error bounds.

:func:`analyze_report` is what ``localpriv analyze`` and ``localpriv mechanism`` print.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..mechanisms import Mechanism

__all__ = ["analyze_report"]


def analyze_report(mech: Mechanism, domain=None) -> dict[str, Any]:
    """A summary of a mechanism: sizes, computed privacy levels, identifiability."""
    out: dict[str, Any] = {"spec": str(mech), "inputs": mech.k}
    n_out = mech.n_outputs
    out["outputs"] = "unbounded" if n_out is None else n_out
    if n_out is not None and mech.k * n_out <= 4_000_000:
        M = mech.channel()
        out["epsilon_ldp (from channel)"] = float(mech.epsilon_ldp())
        dom = domain if domain is not None else getattr(mech, "domain", None)
        if dom is not None and getattr(dom, "is_metric", False):
            out["epsilon_geo (from channel)"] = float(mech.epsilon_geo(dom.distance_matrix()))
        rank = int(np.linalg.matrix_rank(M))
        out["channel rank"] = rank
        out["identifiable (|X| independent columns)"] = rank == mech.k
    return out
