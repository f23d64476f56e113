"""Engines chosen by name: a table of ``"module:function"`` strings, loaded on demand.

Lower layers name engines that live in higher ones (Spark in ``extras``) without importing them;
see docs/decisions/0025-engines-by-name.md.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from localpriv.utils.errors import LocalPrivError

__all__ = ["load_engine"]


def load_engine(table: Mapping[str, str], engine: object, what: str) -> Callable[..., Any]:
    """The function that ``table`` names for ``engine``, imported now.

    Raises a one-line :class:`LocalPrivError` for an unknown name (listing the known ones) or when
    the engine's module cannot be imported (e.g. ``"spark"`` without pyspark).
    """
    target = table.get(engine) if isinstance(engine, str) else None
    if target is None:
        raise LocalPrivError(f"unknown {what} engine {engine!r}; known: {', '.join(table)}")
    module, _, name = target.partition(":")
    try:
        func: Callable[..., Any] = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LocalPrivError(f"{what} engine {engine!r} is not available: {first}") from None
    return func
