"""JSON-able copies of results: what the library's record files hold."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["to_jsonable"]


def to_jsonable(obj: Any) -> Any:
    """A copy of ``obj`` that :func:`json.dumps` writes as standard JSON.

    Parameters
    ----------
    obj : Any
        Nested dicts, lists, tuples, NumPy arrays and scalars, floats and other JSON values.

    Returns
    -------
    Any
        Dict keys as strings, sequences and arrays as lists, NumPy scalars as Python ones; a
        non-finite float becomes ``None`` (NaN), ``"inf"`` or ``"-inf"``.
    """
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if np.isfinite(v) else (None if np.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj
