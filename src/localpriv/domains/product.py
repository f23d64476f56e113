"""Product domains: ``d`` attributes, each a finite domain, and the joint alphabet of their tuples.

A :class:`ProductDomain` of attributes ``A_1, ..., A_d`` (sizes ``k_1, ..., k_d``) has the joint
alphabet ``A_1 x ... x A_d`` of ``k_1 * ... * k_d`` cells. Cell ``c`` of the tuple of indices
``(x_1, ..., x_d)`` is the row-major (C order) flat index
``c = sum_j x_j * prod_{i > j} k_i`` (``numpy.ravel_multi_index``), so the last attribute varies
fastest. The joint size is bounded by :func:`max_product_cells` (``LOCALPRIV_MAX_PRODUCT_CELLS``);
a larger product is refused with a one-line error naming the limit. Per-attribute work (sampling,
marginals) never needs the joint alphabet; only joint distributions do.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from localpriv.domains.base import Domain
from localpriv.utils.validation import LocalPrivError, env_int

__all__ = ["ProductDomain", "MAX_PRODUCT_CELLS", "MAX_PRODUCT_ATTRIBUTES", "max_product_cells"]

#: The most joint cells a product domain may have (``LOCALPRIV_MAX_PRODUCT_CELLS`` overrides it):
#: a joint distribution of 10^6 cells is 8 MB per vector, and the EM engine keeps a few of them.
MAX_PRODUCT_CELLS = 1_000_000
#: The most attributes a product domain may have.
MAX_PRODUCT_ATTRIBUTES = 32


def max_product_cells() -> int:
    """The most joint cells any product domain may have: ``LOCALPRIV_MAX_PRODUCT_CELLS`` if set,
    else :data:`MAX_PRODUCT_CELLS`."""
    return env_int("LOCALPRIV_MAX_PRODUCT_CELLS", MAX_PRODUCT_CELLS, "cells")


class ProductDomain(Domain):
    """The product of ``d`` finite domains, with one name per attribute.

    Parameters
    ----------
    domains
        The attributes' domains (each a finite :class:`~localpriv.domains.Domain` with one column
        per value; planar grids are not attributes here).
    names
        One distinct, non-empty name per attribute (the columns of the data).

    Notes
    -----
    ``size = prod_j k_j``; ``shape = (k_1, ..., k_d)``. Flat cells are row-major:
    ``c = sum_j x_j prod_{i>j} k_i``.
    """

    def __init__(self, domains: Sequence[Domain], names: Sequence[str]) -> None:
        doms = list(domains)
        labs = [str(n) for n in names]
        if not doms:
            raise LocalPrivError("a product domain needs at least one attribute")
        if len(doms) > MAX_PRODUCT_ATTRIBUTES:
            raise LocalPrivError(f"product domain: {len(doms)} attributes is above the limit of "
                                 f"{MAX_PRODUCT_ATTRIBUTES}")
        if len(labs) != len(doms):
            raise LocalPrivError(f"product domain: {len(doms)} domains but {len(labs)} names")
        if any(not n.strip() for n in labs) or len(set(labs)) != len(labs):
            raise LocalPrivError(f"product domain: attribute names must be distinct and non-empty, got {labs}")
        for n, dom in zip(labs, doms):
            if not isinstance(dom, Domain) or isinstance(dom, ProductDomain) or dom.columns != 1:
                raise LocalPrivError(f"product domain: attribute {n!r} must be a one-column domain "
                                     f"(integer, categorical or interval), got {type(dom).__name__}")
        cells = math.prod(int(dom.size) for dom in doms)
        cap = max_product_cells()
        if cells > cap:
            shape = " x ".join(str(dom.size) for dom in doms)
            raise LocalPrivError(f"product domain: {shape} = {cells:,} joint cells is above the limit of "
                                 f"{cap:,} (raise it with the environment variable LOCALPRIV_MAX_PRODUCT_CELLS)")
        self._domains = tuple(doms)
        self._names = tuple(labs)
        self._shape = tuple(int(dom.size) for dom in doms)
        self._size = int(cells)

    # -- shape -------------------------------------------------------------------------------
    @property
    def domains(self) -> tuple[Domain, ...]:
        """The attributes' domains, in order."""
        return self._domains

    @property
    def names(self) -> tuple[str, ...]:
        """The attributes' names, in order."""
        return self._names

    @property
    def d(self) -> int:
        """The number of attributes."""
        return len(self._domains)

    @property
    def shape(self) -> tuple[int, ...]:
        """``(k_1, ..., k_d)``: the attributes' sizes."""
        return self._shape

    @property
    def size(self) -> int:
        """``prod_j k_j``: the number of joint cells."""
        return self._size

    #: values are read as text and each attribute's domain reads its own (numbers or labels)
    is_numeric = False

    @property
    def columns(self) -> int:  # type: ignore[override]
        """One value column per attribute."""
        return self.d

    def attribute(self, name: str | int) -> int:
        """The position of an attribute given by name or position (a one-line error otherwise)."""
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
            j = int(name)
            if not 0 <= j < self.d:
                raise LocalPrivError(f"product domain: attribute {j} is out of range 0..{self.d - 1}")
            return j
        if name not in self._names:
            raise LocalPrivError(f"product domain: no attribute {name!r} (attributes: {', '.join(self._names)})")
        return self._names.index(str(name))

    # -- cells -------------------------------------------------------------------------------
    def _codes(self, codes: npt.ArrayLike) -> np.ndarray:
        arr = np.asarray(codes)
        if arr.ndim == 1 and self.d == 1:
            arr = arr[:, None]
        if arr.ndim != 2 or arr.shape[1] != self.d:
            raise LocalPrivError(f"product domain: expected an n x {self.d} array of per-attribute values, "
                                 f"got shape {arr.shape}")
        return arr

    def encode_columns(self, values_2d: npt.ArrayLike) -> np.ndarray:
        """Per-attribute indices (``n x d`` int64) of ``n`` rows of raw values, each column encoded
        by its attribute's domain (which refuses values outside it, naming them)."""
        arr = self._codes(values_2d)
        if arr.shape[0] == 0:
            raise LocalPrivError("no values given: the input is empty")
        out = np.empty(arr.shape, dtype=np.int64)
        for j, dom in enumerate(self._domains):  # over attributes, not users
            try:
                out[:, j] = dom.encode(arr[:, j])
            except LocalPrivError as exc:
                raise LocalPrivError(f"attribute {self._names[j]!r}: {exc}") from None
        return out

    def ravel(self, codes: npt.ArrayLike) -> np.ndarray:
        """Flat joint cells of ``n x d`` per-attribute indices (row-major; out-of-range refused)."""
        arr = self._codes(codes)
        if arr.dtype.kind not in "iu":
            raise LocalPrivError("product domain: per-attribute indices must be integers")
        arr = arr.astype(np.int64, copy=False)
        bad = (arr < 0) | (arr >= np.asarray(self._shape, dtype=np.int64)[None, :])
        if bad.any():
            j = int(np.nonzero(bad.any(axis=0))[0][0])
            raise LocalPrivError(f"product domain: indices outside 0..{self._shape[j] - 1} for attribute "
                                 f"{self._names[j]!r} ({int(bad[:, j].sum())} row(s))")
        return np.ravel_multi_index(tuple(arr.T), self._shape).astype(np.int64)

    def index(self, values_2d: npt.ArrayLike) -> np.ndarray:
        """Flat joint cells of ``n`` rows of raw values (``n x d``): :meth:`encode_columns` then
        :meth:`ravel`."""
        return self.ravel(self.encode_columns(values_2d))

    def unravel(self, flat: npt.ArrayLike) -> np.ndarray:
        """Per-attribute indices (``n x d`` int64) of flat joint cells (out-of-range refused)."""
        arr = np.asarray(flat)
        if arr.ndim != 1:
            arr = arr.reshape(-1)
        arr = arr.astype(np.int64, copy=False)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self._size):
            raise LocalPrivError(f"product domain: cells outside 0..{self._size - 1}")
        return np.stack(np.unravel_index(arr, self._shape), axis=1).astype(np.int64)

    # -- the Domain protocol (joint cells as the alphabet) -------------------------------------
    def encode(self, values: npt.ArrayLike) -> np.ndarray:
        """Flat joint cells of ``n x d`` raw values (same as :meth:`index`)."""
        return self.index(values)

    def decode(self, index: npt.ArrayLike) -> np.ndarray:
        """Raw values (``n x d`` object array) of flat joint cells."""
        codes = self.unravel(index)
        out = np.empty(codes.shape, dtype=object)
        for j, dom in enumerate(self._domains):
            out[:, j] = dom.decode(codes[:, j])
        return out

    def invalid(self, values: npt.ArrayLike) -> np.ndarray:
        arr = self._codes(values)
        bad = np.zeros(arr.shape[0], dtype=bool)
        for j, dom in enumerate(self._domains):
            bad |= np.asarray(dom.invalid(arr[:, j]), dtype=bool)
        return bad

    # -- marginals ---------------------------------------------------------------------------
    def _positions(self, attrs: Sequence[str | int] | str | int) -> list[int]:
        items = [attrs] if isinstance(attrs, (str, int, np.integer)) else list(attrs)
        pos = [self.attribute(a) for a in items]
        if not pos or len(set(pos)) != len(pos):
            raise LocalPrivError(f"product domain: a marginal needs distinct attributes, got {items}")
        return pos

    def marginal(self, attrs: Sequence[str | int] | str | int) -> ProductDomain:
        """The product domain of the attributes ``attrs`` (names or positions, in the order given)."""
        pos = self._positions(attrs)
        return ProductDomain([self._domains[j] for j in pos], [self._names[j] for j in pos])

    def marginalize(self, p: npt.ArrayLike, attrs: Sequence[str | int] | str | int) -> np.ndarray:
        """The marginal of a joint vector ``p`` (length :attr:`size`) on ``attrs``, flat in the order
        of :meth:`marginal` (``p_S(x_S) = sum_{x_rest} p(x)``); a batch ``(..., size)`` is kept."""
        arr = np.asarray(p, dtype=float)
        if arr.shape[-1] != self._size:
            raise LocalPrivError(f"product domain: a joint vector has {self._size} cells, got {arr.shape[-1]}")
        pos = self._positions(attrs)
        lead = arr.shape[:-1]
        t = arr.reshape(*lead, *self._shape)
        others = tuple(len(lead) + j for j in range(self.d) if j not in pos)
        m = t.sum(axis=others) if others else t
        kept = sorted(pos)
        m = np.moveaxis(m, [len(lead) + kept.index(j) for j in pos], [len(lead) + i for i in range(len(pos))])
        return m.reshape(*lead, -1)

    # -- text --------------------------------------------------------------------------------
    def spec(self) -> str:
        return "product(" + ";".join(f"{n}={dom.spec()}" for n, dom in zip(self._names, self._domains)) + ")"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ProductDomain) and self._names == other._names
                and all(a == b for a, b in zip(self._domains, other._domains)))

    def __hash__(self) -> int:
        return hash(("product", self._names, tuple(dom.spec() for dom in self._domains)))

    def __repr__(self) -> str:
        return f"ProductDomain({list(self._domains)!r}, names={list(self._names)!r})"
