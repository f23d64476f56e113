"""The switch of the compiled (numba) paths, read by every layer that has one."""
from __future__ import annotations

import functools
import importlib.util
import os

__all__ = ["numba_enabled", "numba_installed"]


@functools.cache
def numba_installed() -> bool:
    """Is numba installed (the optional ``fast`` group)? Looked up without importing it."""
    return importlib.util.find_spec("numba") is not None


def numba_enabled() -> bool:
    """False when numba is not installed (``pip install 'localpriv[fast]'`` brings it) or the
    environment variable ``LOCALPRIV_NUMBA`` is ``0``/``no``/``off``/``false``: every compiled path
    then runs its NumPy twin (same results)."""
    if os.environ.get("LOCALPRIV_NUMBA", "1").strip().lower() in ("0", "no", "off", "false"):
        return False
    return numba_installed()
