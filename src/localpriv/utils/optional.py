"""Third-party modules of the optional dependency groups, imported in this one place.

A module of an optional group (:data:`localpriv.utils.errors.EXTRAS`) is imported through
:func:`require`, which turns its absence into one line naming the group to install, or probed with
:func:`available`, which says whether it can be imported without importing it. Tests simulate a
missing group by setting ``sys.modules[name] = None``; both functions honour that.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from localpriv.utils.errors import EXTRAS, LocalPrivError

__all__ = ["available", "require"]


def available(module: str) -> bool:
    """Whether ``module`` can be imported here (found on the path and not blocked in ``sys.modules``).

    Cheap: the module is located, not imported.
    """
    top = module.split(".")[0]
    if top in sys.modules:
        return sys.modules[top] is not None
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def require(module: str, extra: str | None = None) -> ModuleType:
    """``module`` imported, or a one-line :class:`LocalPrivError` naming the optional group to install.

    Parameters
    ----------
    module : str
        A dotted module name such as ``"duckdb"``.
    extra : str, optional
        The group that brings it (``pip install 'localpriv[extra]'``); by default the one
        :data:`localpriv.utils.errors.EXTRAS` lists for its top-level package.

    Raises
    ------
    LocalPrivError
        When the module cannot be imported.
    """
    group = extra if extra is not None else EXTRAS.get(module.split(".")[0])
    try:
        return importlib.import_module(module)
    except ImportError:
        hint = (f": pip install 'localpriv[{group}]' (from a clone: pip install -e '.[{group}]')"
                if group else "")
        where = f"the optional group {group!r}, which is not installed" if group else "a module that is not installed"
        raise LocalPrivError(f"this needs {where} (no module named {module!r}){hint}") from None
