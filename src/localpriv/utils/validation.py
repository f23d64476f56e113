"""Input validation shared by every entry point (one place, one error style).

All user-facing errors are :class:`LocalPrivError` (a ``ValueError``) with a message that names
what was wrong and, where it helps, what to do instead.
"""
from __future__ import annotations

import os

import numpy as np
import numpy.typing as npt

# defined without NumPy, so that `import localpriv` and the CLI's start-up need not load it
from localpriv.utils.errors import LocalPrivError, PrivacyWarning

__all__ = [
    "env_int",
    "LocalPrivError",
    "PrivacyWarning",
    "check_rng",
    "check_eps",
    "check_int",
    "check_distribution",
    "check_counts",
    "check_stochastic",
]


def _show(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: messages stay short whatever the input."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a repr that fails (or a huge int refused by repr)
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_rng(rng: object) -> np.random.Generator:
    """Return ``rng`` if it is a :class:`numpy.random.Generator`; an ``int`` seeds a new one.

    Randomness in localpriv always comes from an explicit generator so that every run is
    reproducible from a seed. ``None`` is refused on purpose.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise LocalPrivError(
        f"rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)) or an int seed, "
        f"got {type(rng).__name__}"
    )


def check_eps(eps: object, name: str = "eps") -> float:
    """A privacy parameter: a finite number > 0 (not a boolean)."""
    if isinstance(eps, (bool, np.bool_)):
        raise LocalPrivError(f"{name} must be a number, got {eps!r}")
    try:
        val = float(eps)  # type: ignore[arg-type]  # any input: the except below reports what fails
    except (TypeError, ValueError, OverflowError):
        raise LocalPrivError(f"{name} must be a number, got {_show(eps)}") from None
    if not np.isfinite(val) or val <= 0:
        raise LocalPrivError(f"{name} must be a finite number > 0, got {_show(eps)}")
    return val


def check_int(value: object, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer parameter within optional bounds."""
    if isinstance(value, bool):
        raise LocalPrivError(f"{name} must be an integer, got {_show(value)}")
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        value = int(value)
    if not isinstance(value, (int, np.integer)):
        raise LocalPrivError(f"{name} must be an integer, got {_show(value)}")
    value = int(value)
    if not -(2 ** 63) <= value < 2 ** 63:
        raise LocalPrivError(f"{name} must fit in 64 bits, got {_show(value)}")
    if minimum is not None and value < minimum:
        raise LocalPrivError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise LocalPrivError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_distribution(theta: npt.ArrayLike, k: int | None = None, name: str = "distribution", atol: float = 1e-9,
                       full_support: bool = False) -> npt.NDArray[np.float64]:
    """A probability vector: finite, non-negative, summing to 1 within ``atol``."""
    arr = np.asarray(theta, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise LocalPrivError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    if k is not None and arr.size != k:
        raise LocalPrivError(f"{name} has {arr.size} entries but the domain has {k}")
    if not np.all(np.isfinite(arr)):
        raise LocalPrivError(f"{name} contains NaN or infinite entries")
    if np.any(arr < 0):
        raise LocalPrivError(f"{name} has negative entries (min {arr.min():.3g})")
    if abs(arr.sum() - 1.0) > atol:
        raise LocalPrivError(f"{name} must sum to 1 (within {atol}), sums to {arr.sum():.12g}")
    if full_support and np.any(arr <= 0):
        raise LocalPrivError(f"{name} must give every element a positive probability (full support)")
    return arr


def check_counts(counts: npt.ArrayLike, name: str = "counts", size: int | None = None) -> npt.NDArray[np.float64]:
    """Observation counts: finite, non-negative, 1-D, not all zero."""
    try:
        arr = np.asarray(counts, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise LocalPrivError(f"{name} must be numbers, got {_show(counts)}") from None
    if arr.ndim != 1:
        raise LocalPrivError(f"{name} must be 1-D, got shape {arr.shape}")
    if size is not None and arr.size != size:
        raise LocalPrivError(f"{name} has {arr.size} entries but {size} were expected "
                             f"(counts and the mechanism's outputs do not match)")
    if arr.size == 0:
        raise LocalPrivError(f"{name} is empty: there are no observations to estimate from")
    if not np.all(np.isfinite(arr)):
        raise LocalPrivError(f"{name} contains NaN or infinite entries")
    if np.any(arr < 0):
        raise LocalPrivError(f"{name} has negative entries")
    if arr.sum() <= 0:
        raise LocalPrivError(f"{name} sum to zero: there are no observations to estimate from")
    if arr.sum() > 2.0 ** 53:
        raise LocalPrivError(f"{name} sum to {arr.sum():.4g}, above 2^53: counts that large are not exact")
    return arr


def check_stochastic(matrix: npt.ArrayLike, name: str = "channel", atol: float = 1e-9) -> npt.NDArray[np.float64]:
    """A row-stochastic matrix: 2-D, finite, non-negative, each row summing to 1 within ``atol``."""
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] == 0:
        raise LocalPrivError(f"{name} must be a non-empty 2-D matrix, got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise LocalPrivError(f"{name} contains NaN or infinite entries")
    if np.any(m < 0):
        r, c = np.argwhere(m < 0)[0]
        raise LocalPrivError(f"{name} has a negative entry at row {r}, column {c}: {m[r, c]:.3g}")
    sums = m.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > atol)
    if bad.size:
        raise LocalPrivError(
            f"{name} is not row-stochastic: row {bad[0]} sums to {sums[bad[0]]:.12g} "
            f"({bad.size} row(s) off by more than {atol})"
        )
    return m


def env_int(name: str, default: int, what: str = "entries", minimum: int = 1) -> int:
    """A whole-number setting from the environment variable ``name`` (``default`` when unset or
    empty); ``2e8`` is read as 200,000,000. One-line :class:`LocalPrivError` for anything else."""
    env = os.environ.get(name, "").strip()
    if not env:
        return default
    try:
        value = float(env)
        if value != int(value):
            raise ValueError(env)
        number = int(value)
    except (ValueError, OverflowError):
        raise LocalPrivError(f"{name} must be a whole number of {what}, got {env[:40]!r}") from None
    if number < minimum:
        raise LocalPrivError(f"{name} must be at least {minimum}, got {env[:40]!r}")
    return number
