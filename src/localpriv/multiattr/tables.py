"""Multi-attribute categorical records and contingency tables (thesis, seed 004 section 4.3.1).

A :class:`Records` set holds ``n`` users with ``d`` categorical attributes as an ``n x d`` integer
array (value indices) plus the attribute names and their category labels. A k-way contingency
table ``T_A`` over a combination ``A`` of attributes is a NumPy array of shape
``(|A_1|, ..., |A_k|)``; cells are also addressed by a flat index (C order), which is what the
randomization protocols report.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from localpriv.utils.validation import LocalPrivError

__all__ = ["Records", "marginalize", "cell_index", "cells_to_table", "normalize_table"]


@dataclass
class Records:
    """``n`` records over ``d`` categorical attributes.

    Parameters
    ----------
    data : (n, d) int array
        ``data[u, j]`` is the index of user ``u``'s value of attribute ``j``.
    names : list of str
        Attribute names.
    levels : list of list of str
        Category labels of every attribute (``len(levels[j])`` is ``|A_j|``).
    """

    data: np.ndarray
    names: list[str]
    levels: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.data = np.asarray(self.data, dtype=np.int64)
        if self.data.ndim != 2:
            raise LocalPrivError(f"records must be an n x d array, got shape {self.data.shape}")
        if len(self.names) != self.data.shape[1]:
            raise LocalPrivError(f"{len(self.names)} names for {self.data.shape[1]} attributes")
        if not self.levels:
            self.levels = [[str(v) for v in range(int(c) + 1)] for c in self.data.max(axis=0)]
        cards = np.array([len(l) for l in self.levels])
        if self.data.size and (self.data.min() < 0 or np.any(self.data.max(axis=0) >= cards)):
            raise LocalPrivError("record values outside their attribute's categories")

    @property
    def n(self) -> int:
        return int(self.data.shape[0])

    @property
    def d(self) -> int:
        return int(self.data.shape[1])

    @property
    def cards(self) -> tuple[int, ...]:
        return tuple(len(l) for l in self.levels)

    def index(self, attrs: Sequence[str | int | np.integer]) -> list[int]:
        """Column indices of ``attrs`` (names or integer positions)."""
        out: list[int] = []
        for a in attrs:
            if isinstance(a, (int, np.integer)):
                if not 0 <= int(a) < self.d:
                    raise LocalPrivError(f"attribute index {a} outside 0..{self.d - 1}")
                out.append(int(a))
            elif a in self.names:
                out.append(self.names.index(a))
            else:
                raise LocalPrivError(f"unknown attribute {a!r}; known: {', '.join(self.names)}")
        if len(set(out)) != len(out):
            raise LocalPrivError(f"an attribute is repeated in {list(attrs)}")
        return out

    def shape(self, attrs: Sequence[str | int | np.integer]) -> tuple[int, ...]:
        """The table shape over ``attrs``: their numbers of categories."""
        c = self.cards
        return tuple(c[j] for j in self.index(attrs))

    def cells(self, attrs: Sequence[str | int | np.integer]) -> np.ndarray:
        """The flat cell index (C order) of every record in the table over ``attrs``."""
        cols = self.index(attrs)
        return cell_index(self.data[:, cols], self.shape(attrs))

    def table(self, attrs: Sequence[str | int | np.integer], normalize: bool = False) -> np.ndarray:
        """The k-way contingency table ``T_A`` (counts, or probabilities if ``normalize``)."""
        shape = self.shape(attrs)
        counts = np.bincount(self.cells(attrs), minlength=int(np.prod(shape))).astype(float)
        t = counts.reshape(shape)
        return t / max(self.n, 1) if normalize else t

    def subset(self, rows: np.ndarray | Sequence[int] | slice) -> Records:
        """The records of ``rows`` (an index array, a boolean mask or a slice)."""
        return Records(self.data[rows], list(self.names), [list(l) for l in self.levels])


def cell_index(values: npt.ArrayLike, shape: Sequence[int]) -> np.ndarray:
    """Flat C-order cell index of the rows of ``values`` (``n x k``) in a table of ``shape``."""
    values = np.asarray(values, dtype=np.int64)
    if values.ndim == 1:
        values = values[:, None]
    if values.shape[1] == 0:
        return np.zeros(values.shape[0], dtype=np.int64)
    return np.ravel_multi_index(tuple(values.T), tuple(int(s) for s in shape)).astype(np.int64)


def cells_to_table(cells: npt.ArrayLike, shape: Sequence[int]) -> np.ndarray:
    """Counts of flat cell indices as a table of ``shape``."""
    size = int(np.prod(shape))
    return np.bincount(np.asarray(cells, dtype=np.int64), minlength=size).astype(float).reshape(shape)


def marginalize(table: npt.ArrayLike, attrs: Sequence[Hashable], keep: Sequence[Hashable]) -> np.ndarray:
    """The marginal ``T_{A' <- A}`` of ``table`` (axes named by ``attrs``) on ``keep``, axes in
    the order of ``keep`` (seed 004 section 4.4.3)."""
    attrs = list(attrs)
    missing = [a for a in keep if a not in attrs]
    if missing:
        raise LocalPrivError(f"cannot marginalize on {missing}: not in the table's attributes {attrs}")
    drop = tuple(i for i, a in enumerate(attrs) if a not in keep)
    m = np.asarray(table).sum(axis=drop) if drop else np.asarray(table)
    rest = [a for a in attrs if a in keep]
    return np.transpose(m, [rest.index(a) for a in keep]) if keep else np.asarray(m)


def normalize_table(t: npt.ArrayLike) -> np.ndarray:
    """Negative cells set to 0, then scaled to sum 1 (uniform if nothing is left), as the thesis
    does before computing distances (seed 004 section 5.3.3)."""
    a = np.clip(np.asarray(t, dtype=float), 0, None)
    s = a.sum()
    return a / s if s > 0 else np.full_like(a, 1.0 / a.size)
