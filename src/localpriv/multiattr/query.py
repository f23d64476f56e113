"""Marginal and range queries on a joint estimate over a product domain (or one attribute).

A query is a linear functional ``w @ theta`` of the estimated joint ``theta``: a marginal cell sums
the joint cells that agree with it on the chosen attributes, a range sums the cells whose values lie
in the given intervals. With an :class:`~localpriv.inference.estimate.Estimate` (fitted from
reports or counts) each answer carries the interval of that functional from the inference layer
(:meth:`Estimate.functional`: the delta method on the observed information of the MLE); from an
estimate file (which holds no covariance) answers are point values only.

Marginals computed from one joint are consistent by construction: two marginals sharing attributes
give the same sub-marginal on them.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from localpriv.domains import ProductDomain
from localpriv.inference.estimate import Estimate
from localpriv.utils.errors import LocalPrivError

__all__ = ["MAX_MARGINAL_ROWS", "MAX_QUERY_CELLS", "MAX_QUERY_TERMS", "JointTable", "parse_range", "parse_marginal",
           "range_weights", "query_marginal", "query_range"]

#: the most joint cells a query may run over (weights are one float per cell and per answer row)
MAX_QUERY_CELLS = 2_000_000
#: the most rows of a marginal answered with intervals (one interval per row)
MAX_MARGINAL_ROWS = 10_000
#: the most attributes (or terms) in one query
MAX_QUERY_TERMS = 32


@dataclass(frozen=True)
class JointTable:
    """A joint distribution over cells: attribute names, one label per attribute and cell
    (``labels[c, j]``) and the probability of each cell; ``estimate`` when intervals are available."""

    names: tuple[str, ...]
    labels: np.ndarray
    distribution: np.ndarray
    estimate: Estimate | None = None

    @classmethod
    def from_estimate(cls, est: Estimate) -> JointTable:
        """The table of a fitted estimate (intervals available)."""
        dom = est.domain
        p = np.asarray(est.distribution, dtype=float)
        _check_cells(p.size)
        if isinstance(dom, ProductDomain):
            labels = np.asarray(est.labels, dtype=object).reshape(p.size, dom.d)
            return cls(tuple(dom.names), labels, p, est)
        attr = str(getattr(est, "attribute", None) or "value")
        return cls((attr,), np.asarray(est.labels, dtype=object).reshape(p.size, 1), p, est)

    @classmethod
    def from_file(cls, path: str | Path) -> JointTable:
        """An estimate file written by ``localpriv estimate --out X.json`` (point values only)."""
        path = Path(path)
        if path.suffix.lower() != ".json":
            raise LocalPrivError(f"{path}: queries read .json estimate files (written by localpriv estimate --out)")
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise LocalPrivError(f"{path}: not a readable JSON estimate file ({type(exc).__name__})") from None
        if not isinstance(data, dict) or "distribution" not in data or "labels" not in data:
            raise LocalPrivError(f"{path}: no 'distribution' and 'labels': not an estimate file")
        p = np.asarray(data["distribution"], dtype=float)
        _check_cells(p.size)
        names = tuple(str(n) for n in data.get("attributes") or [data.get("attribute") or "value"])
        labels = np.asarray(data["labels"], dtype=object).reshape(p.size, len(names))
        return cls(names, labels, p, None)

    def column(self, name: str) -> int:
        """The position of attribute ``name``."""
        if name not in self.names:
            raise LocalPrivError(f"unknown attribute {name!r}; the estimate has {', '.join(self.names)}")
        return self.names.index(name)


def _check_cells(cells: int) -> None:
    if cells > MAX_QUERY_CELLS:
        raise LocalPrivError(f"query: {cells:,} joint cells is above the limit of {MAX_QUERY_CELLS:,}")


def parse_marginal(text: str) -> list[str]:
    """``"age,sex"`` -> ``["age", "sex"]`` (distinct, non-empty names)."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names or len(set(names)) != len(names) or len(names) > MAX_QUERY_TERMS:
        raise LocalPrivError(f"--marginal {text!r}: give 1 to {MAX_QUERY_TERMS} distinct attribute names, "
                             "comma-separated")
    return names


def parse_range(text: str) -> dict[str, tuple[str | None, str | None]]:
    """``"age=30..45,sex=F"`` -> ``{"age": ("30", "45"), "sex": ("F", "F")}``.

    ``lo..hi`` is inclusive at both ends (numeric labels compare as numbers); either end may be
    left out (``age=..45``, ``age=30..``); a single value matches that label.
    """
    out: dict[str, tuple[str | None, str | None]] = {}
    for term in (t.strip() for t in text.split(",")):
        if not term:
            continue
        name, sep, val = term.partition("=")
        name, val = name.strip(), val.strip()
        if not sep or not name or not val or name in out:
            raise LocalPrivError(f"--range term {term!r}: expected NAME=LO..HI or NAME=VALUE, each name once")
        if ".." in val:
            lo, _, hi = val.partition("..")
            out[name] = (lo.strip() or None, hi.strip() or None)
        else:
            out[name] = (val, val)
    if not out or len(out) > MAX_QUERY_TERMS:
        raise LocalPrivError(f"--range {text!r}: give 1 to {MAX_QUERY_TERMS} terms NAME=LO..HI")
    return out


def _as_float(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _in_range(col: np.ndarray, lo: str | None, hi: str | None) -> np.ndarray:
    """Which labels of one attribute lie in ``[lo, hi]`` (numbers compared as numbers)."""
    if lo is not None and lo == hi and _as_float(lo) is None:  # one categorical label
        return np.asarray([str(v) == lo for v in col], dtype=bool)
    nums = np.asarray([_as_float(v) for v in col], dtype=object)
    if any(v is None for v in nums):
        raise LocalPrivError(f"range {lo}..{hi}: the attribute's labels are not all numbers; "
                             "give one label (NAME=VALUE)")
    x = nums.astype(float)
    keep = np.ones(x.size, dtype=bool)
    for end, op in ((lo, np.greater_equal), (hi, np.less_equal)):
        if end is not None:
            e = _as_float(end)
            if e is None:
                raise LocalPrivError(f"range end {end!r} is not a number")
            keep &= op(x, e)
    return keep


def range_weights(table: JointTable, ranges: dict[str, tuple[str | None, str | None]]) -> np.ndarray:
    """The 0/1 weight of every joint cell for the range query (cells inside every term)."""
    w = np.ones(table.distribution.size, dtype=bool)
    for name, (lo, hi) in ranges.items():
        w &= _in_range(table.labels[:, table.column(name)], lo, hi)
    return w.astype(float)


def query_range(table: JointTable, ranges: dict[str, tuple[str | None, str | None]] | str,
                level: float = 0.95) -> dict[str, Any]:
    """The probability of a range, ``sum_{x in R} theta(x)``, with its interval when the table
    comes from a fitted estimate (the delta-method interval of that linear functional)."""
    spec = parse_range(ranges) if isinstance(ranges, str) else ranges
    w = range_weights(table, spec)
    out: dict[str, Any] = {"range": {k: [lo, hi] for k, (lo, hi) in spec.items()}, "cells": int(w.sum()),
                           "probability": float(w @ table.distribution)}
    if table.estimate is not None:
        iv = table.estimate.functional(w, level)
        out.update(lower=float(iv.lower), upper=float(iv.upper), level=float(level), method=iv.method)
    return out


def query_marginal(table: JointTable, attrs: list[str] | str, level: float = 0.95) -> pd.DataFrame:
    """The marginal of the joint on ``attrs``: one row per combination of their labels that occurs,
    ``p(a) = sum_{x: x_A = a} theta(x)``, with lower, upper when intervals are available."""
    names = parse_marginal(attrs) if isinstance(attrs, str) else list(attrs)
    cols = [table.column(n) for n in names]
    keys = pd.DataFrame({n: table.labels[:, j] for n, j in zip(names, cols)})
    codes, _ = pd.MultiIndex.from_frame(keys.astype(str)).factorize()
    groups = int(codes.max()) + 1 if codes.size else 0
    prob = np.bincount(codes, weights=table.distribution, minlength=groups)
    first = np.unique(codes, return_index=True)[1]
    frame = keys.iloc[first].reset_index(drop=True)
    frame["probability"] = prob
    if table.estimate is not None:
        if groups > MAX_MARGINAL_ROWS:
            raise LocalPrivError(f"marginal intervals: {groups:,} rows is above the limit of {MAX_MARGINAL_ROWS:,}")
        ivs = [table.estimate.functional((codes == g).astype(float), level) for g in range(groups)]
        frame["lower"] = [iv.lower for iv in ivs]
        frame["upper"] = [iv.upper for iv in ivs]
    return frame



def answer_queries(table: JointTable, marginals: list[str] = (), ranges: list[str] = (),  # type: ignore[assignment]
                   level: float = 0.95) -> dict[str, Any]:
    """Answer marginal queries (``"age,sex"``) and range queries (``"age=30..45,hours=50..99"``) on
    one joint: JSON-ready, each marginal a list of rows, each range one answer; ``intervals`` says
    whether answers carry intervals (a fitted estimate) or are point values (an estimate file)."""
    if len(marginals) + len(ranges) == 0:
        raise LocalPrivError("nothing to answer: give --marginal and/or --range")
    if len(marginals) + len(ranges) > MAX_QUERY_TERMS:
        raise LocalPrivError(f"{len(marginals) + len(ranges)} queries is above the limit of {MAX_QUERY_TERMS}")
    out: dict[str, Any] = {"attributes": list(table.names), "intervals": table.estimate is not None,
                           "level": float(level) if table.estimate is not None else None}
    if table.estimate is not None:
        out["method"] = table.estimate.uncertainty().method
    out["marginals"] = {m: query_marginal(table, m, level).to_dict(orient="records") for m in marginals}
    out["ranges"] = [query_range(table, r, level) for r in ranges]
    return out
