"""Input domains (the alphabet X of the seeds): what users' values can be, and how far apart.

A domain maps users' raw values to indices ``0..k-1`` (``encode``) and back (``decode``). Values
outside the domain are an error that names them: nothing is silently clipped.

* :class:`CategoricalDomain` -- labels, no metric (only ``d(x, x') = [x != x']``).
* :class:`IntegerDomain` -- the integers ``lo..hi`` with the linear metric ``|x - y|``
  (seed 001 section 4.3).
* :class:`IntervalDomain` -- the real interval ``[lo, hi]`` in equal cells (numeric attributes).

Planar grids live in :mod:`localpriv.domains.grid`.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from localpriv.utils.validation import LocalPrivError

__all__ = ["Domain", "CategoricalDomain", "IntegerDomain", "IntervalDomain", "MAX_INTERVAL_BINS"]


class _NotNumbers(Exception):
    """Text among the values of a numeric domain (carries the offending values)."""


def _describe_bad(values: np.ndarray, limit: int = 5) -> str:
    uniq = np.unique(values)
    shown = ", ".join(repr(v.item() if hasattr(v, "item") else v) for v in uniq[:limit])
    more = f" and {uniq.size - limit} more" if uniq.size > limit else ""
    return f"{shown}{more} ({values.size} value(s) in all)"


class Domain:
    """Base class: a finite alphabet of ``size`` elements, indexed ``0..size-1``."""

    @property
    def size(self) -> int:  # pragma: no cover - abstract
        """The number of elements ``k`` (indices ``0..k-1``)."""
        raise NotImplementedError

    def encode(self, values: npt.ArrayLike) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def decode(self, index: npt.ArrayLike) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def labels(self) -> np.ndarray:
        return self.decode(np.arange(self.size))

    def distance_matrix(self) -> np.ndarray:
        """Pairwise distances ``d(x, x')``; the discrete metric unless a subclass has a better one."""
        return 1.0 - np.eye(self.size)

    @property
    def is_metric(self) -> bool:
        return False

    #: values are numbers (read from text as numbers) rather than labels
    is_numeric = False
    #: columns per value (2 for planar grids: lat, lon)
    columns = 1

    def invalid(self, values: npt.ArrayLike) -> np.ndarray:
        """Boolean mask of the values :meth:`encode` would refuse (to name their rows)."""
        arr = np.asarray(values)
        bad = np.zeros(arr.shape[0] if arr.ndim else 1, dtype=bool)
        for i in range(0, bad.size, 1 << 16):  # per slice, not per value
            try:
                self.encode(arr[i:i + (1 << 16)])
            except Exception:  # noqa: BLE001 - only to locate; the caller shows the message
                bad[i:i + (1 << 16)] = True
        return bad

    def spec(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def __str__(self) -> str:
        return self.spec()


@dataclass(frozen=True, eq=True)
class IntegerDomain(Domain):
    """The integers ``lo, lo+1, ..., hi`` with the linear metric ``d(x, y) = |x - y|``."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        if int(self.hi) < int(self.lo):
            raise LocalPrivError(f"integer domain needs lo <= hi, got lo={self.lo}, hi={self.hi}")
        if not (int(self.lo) >= -(2 ** 63) and int(self.hi) < 2 ** 63 and int(self.hi) - int(self.lo) < 2 ** 63 - 1):
            raise LocalPrivError(f"integer domain {self.lo}..{self.hi} does not fit in 64-bit integers")
        object.__setattr__(self, "lo", int(self.lo))
        object.__setattr__(self, "hi", int(self.hi))

    @property
    def size(self) -> int:
        return self.hi - self.lo + 1

    @property
    def is_metric(self) -> bool:
        return True

    is_numeric = True

    def _numbers(self, values: npt.ArrayLike) -> np.ndarray:
        arr = np.asarray(values)
        if arr.ndim != 1:
            arr = arr.reshape(-1) if arr.ndim == 0 else arr
            if arr.ndim != 1:
                raise LocalPrivError(f"integer domain: values must be a 1-D array, got shape {arr.shape}")
        if arr.dtype.kind in "OUS":
            import pandas as pd
            num = pd.to_numeric(pd.Series(arr, dtype=object), errors="coerce").to_numpy(dtype=float)
            text = np.isnan(num) & ~pd.Series(arr, dtype=object).map(
                lambda v: isinstance(v, float) and v != v).to_numpy(dtype=bool)
            if text.any():
                raise _NotNumbers(arr[text])
            arr = num
        elif arr.dtype.kind == "b":
            raise LocalPrivError("integer domain: the values are booleans (true/false), not numbers; "
                                 "is it the right column?")
        elif arr.dtype.kind not in "iuf":
            raise LocalPrivError(f"integer domain: cannot read values of type {arr.dtype}")
        return arr

    def invalid(self, values: npt.ArrayLike) -> np.ndarray:
        try:
            arr = self._numbers(values)
        except _NotNumbers:
            import pandas as pd
            arr = pd.to_numeric(pd.Series(np.asarray(values), dtype=object),
                                errors="coerce").to_numpy(dtype=float)
        if arr.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                return ~np.isfinite(arr) | (arr != np.round(arr)) | (arr < self.lo) | (arr > self.hi)
        return (arr < self.lo) | (arr > self.hi)

    def encode(self, values: npt.ArrayLike) -> np.ndarray:
        arr = np.asarray(values)
        if arr.size == 0:
            raise LocalPrivError("no values given: the input is empty")
        try:
            arr = self._numbers(arr)
        except _NotNumbers as exc:
            raise LocalPrivError(f"integer domain {self.spec()}: values that are not numbers: "
                                 f"{_describe_bad(np.asarray(exc.args[0], dtype=str))}") from None
        if arr.dtype.kind == "f":
            nan = ~np.isfinite(arr)
            if nan.any():
                raise LocalPrivError(f"integer domain: {int(nan.sum())} value(s) are NaN or infinite")
            frac = arr != np.round(arr)
            if frac.any():
                raise LocalPrivError(f"integer domain: non-integer values {_describe_bad(arr[frac])}")
            out = (arr < self.lo) | (arr > self.hi)  # before any cast: 1e300 stays 1e300
            if out.any():
                raise LocalPrivError(
                    f"values outside the domain {self.lo}..{self.hi}: {_describe_bad(arr[out])}")
        elif arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            raise LocalPrivError(f"values outside the domain {self.lo}..{self.hi}: "
                                 f"{_describe_bad(arr[arr > self.hi])}")
        arr = arr.astype(np.int64, copy=False)
        out = (arr < self.lo) | (arr > self.hi)
        if out.any():
            raise LocalPrivError(
                f"values outside the domain {self.lo}..{self.hi}: {_describe_bad(arr[out])}"
            )
        return (arr - self.lo).astype(np.int64)

    def decode(self, index: npt.ArrayLike) -> np.ndarray:
        return np.asarray(index, dtype=np.int64) + self.lo

    def distance_matrix(self) -> np.ndarray:
        x = np.arange(self.size, dtype=float)
        return np.abs(x[:, None] - x[None, :])

    def spec(self) -> str:
        return f"{self.lo}..{self.hi}"


class CategoricalDomain(Domain):
    """A finite set of labels (strings or numbers), in the order given."""

    def __init__(self, labels: Iterable[Hashable]) -> None:
        labs = list(labels)
        if len(labs) == 0:
            raise LocalPrivError("a categorical domain needs at least one label")
        if len(set(labs)) != len(labs):
            raise LocalPrivError("categorical domain labels must be distinct")
        self._labels = np.asarray(labs, dtype=object)
        self._index = {lab: i for i, lab in enumerate(labs)}
        self._index_str = {str(lab): i for i, lab in enumerate(labs)}

    @property
    def size(self) -> int:
        return len(self._labels)

    def invalid(self, values: npt.ArrayLike) -> np.ndarray:
        arr = np.asarray(values, dtype=object).ravel()
        uniq, inv = np.unique(arr.astype(str), return_inverse=True)
        return np.array([u not in self._index_str for u in uniq], dtype=bool)[inv]

    def encode(self, values: npt.ArrayLike) -> np.ndarray:
        arr = np.asarray(values, dtype=object)
        if arr.ndim > 1:
            raise LocalPrivError(f"categorical domain: values must be a 1-D array, got shape {arr.shape}")
        arr = arr.ravel()
        if arr.size == 0:
            raise LocalPrivError("no values given: the input is empty")
        uniq, inv = np.unique(arr.astype(str), return_inverse=True)
        idx = np.array([self._index_str.get(u, -1) for u in uniq], dtype=np.int64)
        bad = idx < 0
        if bad.any():
            raise LocalPrivError(
                f"values outside the domain ({self.size} labels): {_describe_bad(uniq[bad])}"
            )
        return idx[inv]

    def decode(self, index: npt.ArrayLike) -> np.ndarray:
        return self._labels[np.asarray(index, dtype=np.int64)]

    def spec(self) -> str:
        return ",".join(str(x) for x in self._labels)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CategoricalDomain) and list(self._labels) == list(other._labels)

    def __hash__(self) -> int:
        return hash(tuple(self._labels))

    def __repr__(self) -> str:
        return f"CategoricalDomain({list(self._labels)!r})"


#: Most cells an interval domain may have (its channels and estimates are ``k x ...`` matrices).
MAX_INTERVAL_BINS = 1_000_000


@dataclass(frozen=True, eq=True)
class IntervalDomain(Domain):
    """The real interval ``[lo, hi]`` cut into ``bins`` equal cells (numeric attributes).

    Values are real numbers in ``[lo, hi]`` (``hi`` included). :meth:`encode` gives the cell
    ``i = floor((v - lo) / w)``, ``w = (hi - lo) / bins`` (``hi`` in the last cell); :meth:`decode`
    gives the cells' centres ``lo + (i + 1/2) w``, the values estimates and statistics refer to.
    The metric is ``|c_i - c_j|`` between centres, in the values' units. :meth:`to_unit` maps
    values to ``[0, 1]`` for the mechanisms that perturb the number itself (``sw``, ``pm``, ``hm``,
    ``duchi``). Values outside ``[lo, hi]``, NaN and text are an error that names them.

    Written ``interval(LO,HI,BINS)`` on the command line (``interval(lo=17,hi=90,bins=73)`` too),
    e.g. ``--domain 'interval(0,100,50)'``; :meth:`spec` gives that form back.
    """

    lo: float
    hi: float
    bins: int

    def __post_init__(self) -> None:
        for name in ("lo", "hi"):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(v):
                raise LocalPrivError(f"interval domain: {name} must be a finite number, got {v!r}")
            object.__setattr__(self, name, float(v))
        b = self.bins
        if isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, np.integer)) or not 1 <= b <= MAX_INTERVAL_BINS:
            raise LocalPrivError(f"interval domain: bins must be a whole number from 1 to {MAX_INTERVAL_BINS}, "
                                 f"got {b!r}")
        object.__setattr__(self, "bins", int(b))
        if not self.lo < self.hi or not np.isfinite(self.hi - self.lo):
            raise LocalPrivError(f"interval domain needs lo < hi (finite width), got lo={self.lo:g}, hi={self.hi:g}")

    @property
    def size(self) -> int:
        return self.bins

    @property
    def width(self) -> float:
        """The cells' width ``(hi - lo) / bins``."""
        return (self.hi - self.lo) / self.bins

    @property
    def is_metric(self) -> bool:
        return True

    is_numeric = True

    # (not ``edges``/``centres``: those names mark planar grids to the exporters)
    def cell_edges(self) -> np.ndarray:
        """The ``bins + 1`` cell boundaries ``lo, lo + w, ..., hi``."""
        return np.linspace(self.lo, self.hi, self.bins + 1)

    def cell_centres(self) -> np.ndarray:
        """The cells' centres ``lo + (i + 1/2) w``."""
        return self.lo + (np.arange(self.bins) + 0.5) * self.width

    def _reals(self, values: npt.ArrayLike) -> np.ndarray:
        """The values as float64 (text read as numbers); refuses NaN, text and values outside."""
        arr = np.asarray(values)
        if arr.ndim != 1:
            arr = arr.reshape(-1) if arr.ndim == 0 else arr
            if arr.ndim != 1:
                raise LocalPrivError(f"interval domain: values must be a 1-D array, got shape {arr.shape}")
        if arr.size == 0:
            raise LocalPrivError("no values given: the input is empty")
        if arr.dtype.kind in "OUS":
            import pandas as pd
            num = pd.to_numeric(pd.Series(arr, dtype=object), errors="coerce").to_numpy(dtype=float)
            text = np.isnan(num) & ~pd.Series(arr, dtype=object).map(
                lambda v: isinstance(v, float) and v != v).to_numpy(dtype=bool)
            if text.any():
                raise LocalPrivError(f"interval domain {self.spec()}: values that are not numbers: "
                                     f"{_describe_bad(np.asarray(arr[text], dtype=str))}")
            arr = num
        elif arr.dtype.kind == "b":
            raise LocalPrivError("interval domain: the values are booleans (true/false), not numbers; "
                                 "is it the right column?")
        elif arr.dtype.kind not in "iuf":
            raise LocalPrivError(f"interval domain: cannot read values of type {arr.dtype}")
        arr = arr.astype(np.float64, copy=False)
        nan = ~np.isfinite(arr)
        if nan.any():
            raise LocalPrivError(f"interval domain: {int(nan.sum())} value(s) are NaN or infinite")
        out = (arr < self.lo) | (arr > self.hi)
        if out.any():
            raise LocalPrivError(f"values outside the domain [{self.lo:g}, {self.hi:g}]: {_describe_bad(arr[out])}")
        return arr

    def invalid(self, values: npt.ArrayLike) -> np.ndarray:
        import pandas as pd
        arr = pd.to_numeric(pd.Series(np.asarray(values).ravel(), dtype=object), errors="coerce").to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            return ~np.isfinite(arr) | (arr < self.lo) | (arr > self.hi)

    def to_unit(self, values: npt.ArrayLike) -> np.ndarray:
        """``(v - lo) / (hi - lo)`` in ``[0, 1]`` for every value (refusing values outside)."""
        return np.clip((self._reals(values) - self.lo) / (self.hi - self.lo), 0.0, 1.0)

    def encode(self, values: npt.ArrayLike) -> np.ndarray:
        u = self.to_unit(values)
        return np.minimum(np.floor(u * self.bins), self.bins - 1).astype(np.int64)

    def decode(self, index: npt.ArrayLike) -> np.ndarray:
        return self.lo + (np.asarray(index, dtype=np.int64) + 0.5) * self.width

    def distance_matrix(self) -> np.ndarray:
        c = self.cell_centres()
        return np.abs(c[:, None] - c[None, :])

    def spec(self) -> str:
        return f"interval({self.lo!r},{self.hi!r},{self.bins})"
