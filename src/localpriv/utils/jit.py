"""The switch of the compiled (numba) paths, read by every layer that has one."""
from __future__ import annotations

import os

__all__ = ["numba_enabled"]


def numba_enabled() -> bool:
    """False when the environment variable ``LOCALPRIV_NUMBA`` is ``0``/``no``/``off``/``false``:
    every compiled path then runs its NumPy twin (same results)."""
    return os.environ.get("LOCALPRIV_NUMBA", "1").strip().lower() not in ("0", "no", "off", "false")
