"""A general finite mechanism given by any row-stochastic matrix.

Spec: ``matrix(rows=[[0.9,0.1],[0.2,0.8]])`` or ``matrix(file=channel.npy)`` (a ``.npy`` or a
``.csv`` file of the matrix). Validated on construction: a rectangular 2-D table of real numbers
(ragged rows, text, booleans, complex numbers, NaN and infinities are one-line
:class:`~localpriv.utils.validation.LocalPrivError` s), non-negative, rows summing to 1 within 1e-9.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np

from localpriv.likelihood.blocks import check_dense_size
from localpriv.mechanisms.base import Mechanism, register
from localpriv.utils.validation import LocalPrivError, check_stochastic

__all__ = ["MatrixMechanism"]


def _table(rows: object) -> np.ndarray:
    """``rows`` (nested lists/tuples or an array) as a 2-D float array, or a one-line error."""
    if isinstance(rows, np.ndarray):
        if rows.dtype.kind not in "iuf":
            raise LocalPrivError(f"matrix mechanism: rows must hold real numbers, got dtype {rows.dtype}")
        return rows
    if not isinstance(rows, (list, tuple)):
        text = str(rows)
        hint = " (NaN and infinities are not probabilities)" if any(w in text.lower() for w in ("nan", "inf")) else ""
        raise LocalPrivError(f"matrix mechanism: rows must be a list of rows of numbers, got "
                             f"{text[:40]!r}{hint}")
    if not rows:
        raise LocalPrivError("matrix mechanism: rows is empty")
    if not all(isinstance(r, (list, tuple)) for r in rows):
        raise LocalPrivError("matrix mechanism: rows must be a list of rows (lists of numbers), "
                             "e.g. [[0.9,0.1],[0.2,0.8]]")
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        first_bad = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
        raise LocalPrivError(f"matrix mechanism: ragged rows: row 0 has {len(rows[0])} entries but row "
                             f"{first_bad} has {len(rows[first_bad])}")
    check_dense_size(len(rows), widths.pop(), "matrix mechanism")
    try:
        arr = np.asarray(rows)
    except (TypeError, ValueError):
        arr = np.asarray(rows, dtype=object)
    if arr.ndim != 2 or arr.dtype.kind not in "iuf":  # the slow path only to name the bad entry
        for i, r in enumerate(rows):
            for j, v in enumerate(r):
                if isinstance(v, (bool, np.bool_)) or not isinstance(v, Real):
                    raise LocalPrivError(f"matrix mechanism: entry at row {i}, column {j} is not a real "
                                         f"number: {str(v)[:20]!r}")
        raise LocalPrivError(f"matrix mechanism: rows must be a 2-D table of numbers, got shape {arr.shape}")
    return arr.astype(float)


@register
class MatrixMechanism(Mechanism):
    """Any finite mechanism ``M`` (``k x m``, ``M[x, z] = P(z | x)``)."""

    spec_name = "matrix"
    examples = (dict(spec="matrix(rows=[[0.7,0.3],[0.4,0.6]])", eps_ldp=0.6931471805599453, tight=True),)  # log 2

    def __init__(self, rows: Sequence[Sequence[float]] | np.ndarray | None = None,
                 file: str | os.PathLike[str] | None = None) -> None:
        if (rows is None) == (file is None):
            raise LocalPrivError("matrix mechanism: give exactly one of rows=[[...]] or file=PATH")
        self.file = None if file is None else str(file)
        if file is not None:
            path = Path(file)
            if not path.exists():
                raise LocalPrivError(f"matrix mechanism: file {file} not found")
            try:
                data = np.load(path) if path.suffix == ".npy" else np.loadtxt(path, delimiter=",", ndmin=2)
            except (OSError, ValueError, EOFError) as exc:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise LocalPrivError(f"matrix mechanism: cannot read {file}: {first[:120]}") from None
            data = _table(np.asarray(data))
        else:
            data = _table(rows)
        self.M = check_stochastic(data, name="mechanism matrix")
        self.M.setflags(write=False)
        self.k = self.M.shape[0]

    def params(self) -> dict[str, Any]:
        if self.file is not None:
            return {"file": self.file}
        return {"rows": self.M.tolist()}

    def __str__(self) -> str:
        """The spec, formatted once per matrix: ``rows=[[...]]`` writes every entry (``k x k``
        numbers; 10,000 at ``k = 100``), and estimators name their blocks' mechanisms often. The
        matrix is read-only; a new matrix or file assigned to the mechanism is formatted anew."""
        cached = getattr(self, "_spec_cache", None)
        if cached is None or cached[0] is not self.M or cached[1] != self.file:
            cached = (self.M, self.file, super().__str__())
            self._spec_cache = cached
        return cached[2]

    @property
    def n_outputs(self) -> int:
        return int(self.M.shape[1])

    def channel(self) -> np.ndarray:
        return self.M
