"""The paper reproductions of a source checkout: ``reproductions/`` beside ``src/``, not installed.

``localpriv reproduce`` and ``localpriv list`` find the package by walking up from the current
directory, then from this file's location (an editable install or ``PYTHONPATH=src``), to the first
directory holding ``reproductions/__init__.py``; that directory is put on ``sys.path`` and the
package imported by name.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from localpriv.utils.errors import LocalPrivError

__all__ = ["REPRODUCTIONS", "find_checkout", "load_reproductions"]

#: the package of the paper reproductions, at the root of a source checkout
REPRODUCTIONS = "reproductions"


def find_checkout(starts: Iterable[Path] | None = None) -> Path | None:
    """The root of a source checkout: the first directory at or above a start that holds
    ``reproductions/__init__.py``.

    Parameters
    ----------
    starts : iterable of pathlib.Path, optional
        Where to start walking up; by default the current directory, then the location of the
        localpriv source.

    Returns
    -------
    pathlib.Path or None
        The checkout's root, or ``None`` when no start lies inside one.
    """
    if starts is None:
        starts = (Path.cwd(), Path(__file__).resolve().parent)
    for start in starts:
        start = Path(start).resolve()
        for folder in (start, *start.parents):
            if (folder / REPRODUCTIONS / "__init__.py").is_file():
                return folder
    return None


def load_reproductions(command: str = "localpriv reproduce") -> ModuleType:
    """Import the ``reproductions`` package of the source checkout (:func:`find_checkout`).

    Parameters
    ----------
    command : str
        The command that needs it, named in the error.

    Returns
    -------
    module
        The package (its ``EXPERIMENTS`` registry and ``run_experiment``).

    Raises
    ------
    LocalPrivError
        When no checkout is found (the installed package holds no reproductions).
    """
    if REPRODUCTIONS in sys.modules:
        return sys.modules[REPRODUCTIONS]
    root = find_checkout()
    if root is None:
        raise LocalPrivError(f"{command} runs from a source checkout: no {REPRODUCTIONS}/ package above the "
                             f"current directory ({Path.cwd()}) or the installed localpriv; run it from the "
                             "repository (git clone, then make venv)")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(REPRODUCTIONS)
