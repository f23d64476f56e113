"""Bayesian networks in the BIF interchange format, and forward (ancestral) sampling.

Two dialects are read (both appear in the thesis's networks, seed 004 sections 4.7 and 5.3):

* **bnlearn**: ``probability ( child | p1, p2 ) { (a, b) 0.1, 0.9; ... }`` (one line per parent
  configuration, labelled) or ``table ...`` for a parentless node;
* **JavaBayes** (``alarm.bif``): ``probability ( "child" "p1" "p2" ) { table ... ; }`` -- child first,
  then the parents, and the numbers are the array ``[child, p1, p2, ...]`` in C order (the child
  index slowest, the last parent fastest). We checked this reading on the network's semantics:
  ``VentTube | VentMach, Disconnect`` then gives ``P(VentTube=Zero | Disconnect=True) = 0.97`` for
  every ventilator setting, as it must.

A conditional table is stored as an array of shape ``(|p1|, ..., |pk|, |child|)``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from localpriv.multiattr.tables import Records, cell_index
from localpriv.utils.validation import LocalPrivError, check_int, check_rng

__all__ = ["BayesNet", "read_bif", "load_network", "NETWORKS"]

NETWORKS = ("asia", "survey", "child", "alarm")
_HERE = Path(__file__).parent / "networks"


@dataclass
class BayesNet:
    """A discrete Bayesian network: names, category labels, parents and conditional tables."""

    names: list[str]
    levels: list[list[str]]
    parents: dict[str, list[str]]
    cpts: dict[str, np.ndarray]

    @property
    def d(self) -> int:
        return len(self.names)

    @property
    def cards(self) -> tuple[int, ...]:
        return tuple(len(l) for l in self.levels)

    def order(self) -> list[str]:
        """A topological order (parents before children)."""
        done: list[str] = []
        placed: set[str] = set()
        remaining = list(self.names)
        while remaining:
            ready = [v for v in remaining if all(p in placed for p in self.parents[v])]
            if not ready:
                raise LocalPrivError("the network has a directed cycle")
            for v in ready:
                done.append(v)
                placed.add(v)
            remaining = [v for v in remaining if v not in placed]
        return done

    def edges(self) -> set[tuple[str, str]]:
        """Directed edges ``(parent, child)``."""
        return {(p, c) for c, ps in self.parents.items() for p in ps}

    def skeleton(self) -> set[frozenset]:
        """Undirected edges."""
        return {frozenset(e) for e in self.edges()}

    def sample(self, n: int, rng: np.random.Generator | int) -> Records:
        """``n`` records by ancestral sampling (each node drawn given its sampled parents).

        Vectorized: one inverse-CDF draw per node for all records at once.
        """
        n = check_int(n, "n", minimum=1)
        rng = check_rng(rng)
        data = np.zeros((n, self.d), dtype=np.int64)
        pos = {v: j for j, v in enumerate(self.names)}
        for v in self.order():
            cpt = self.cpts[v]
            ps = self.parents[v]
            rows = cell_index(data[:, [pos[p] for p in ps]], cpt.shape[:-1]) if ps else np.zeros(n, np.int64)
            cdf = np.cumsum(cpt.reshape(-1, cpt.shape[-1]), axis=1)
            u = rng.random(n)
            draw = (u[:, None] >= cdf[rows]).sum(axis=1)
            data[:, pos[v]] = np.minimum(draw, cpt.shape[-1] - 1)
        return Records(data, list(self.names), [list(l) for l in self.levels])

    def joint(self, attrs=None) -> np.ndarray:
        """The exact joint distribution over all attributes (only for small networks) or its
        marginal on ``attrs``."""
        if int(np.prod(self.cards)) > 5_000_000:
            raise LocalPrivError("network too large to enumerate its joint distribution")
        letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        sym = {v: letters[j] for j, v in enumerate(self.names)}
        ops, subs = [], []
        for v in self.names:
            ops.append(self.cpts[v])
            subs.append("".join(sym[p] for p in self.parents[v]) + sym[v])
        keep = self.names if attrs is None else list(attrs)
        return np.einsum(",".join(subs) + "->" + "".join(sym[a] for a in keep), *ops)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _words(s: str) -> list[str]:
    return [w.strip('"') for w in re.findall(r'"[^"]*"|[^\s,;()|"]+', s)]


def read_bif(path_or_text) -> BayesNet:
    """Read a BIF file (bnlearn or JavaBayes dialect, see the module docstring)."""
    p = Path(str(path_or_text)) if "\n" not in str(path_or_text) else None
    if p is not None:
        if not p.exists():
            raise LocalPrivError(f"BIF file {p} not found")
        text = p.read_text()
    else:
        text = str(path_or_text)
    text = _strip_comments(text)
    names, levels = [], []
    for m in re.finditer(r'variable\s+("[^"]+"|[^\s{]+)\s*\{\s*type\s+discrete\s*\[\s*(\d+)\s*\]\s*\{([^}]*)\}', text):
        name = m.group(1).strip('"')
        labs = _words(m.group(3))
        if len(labs) != int(m.group(2)):
            raise LocalPrivError(f"variable {name}: {m.group(2)} categories declared, {len(labs)} listed")
        names.append(name)
        levels.append(labs)
    if not names:
        raise LocalPrivError("no discrete variable found: not a BIF file?")
    card = {v: len(l) for v, l in zip(names, levels)}
    lab = {v: {x: i for i, x in enumerate(l)} for v, l in zip(names, levels)}
    parents: dict[str, list[str]] = {}
    cpts: dict[str, np.ndarray] = {}
    for m in re.finditer(r"probability\s*\(([^)]*)\)\s*\{([^}]*)\}", text):
        head, body = m.group(1), m.group(2)
        bnlearn = "|" in head
        if bnlearn:
            left, right = head.split("|", 1)
            child, ps = _words(left)[0], _words(right)
        else:
            w = _words(head)
            child, ps = w[0], w[1:]
        for v in [child, *ps]:
            if v not in card:
                raise LocalPrivError(f"probability table refers to unknown variable {v!r}")
        shape = tuple(card[q] for q in ps) + (card[child],)
        cpt = np.full(shape, np.nan)
        tab = re.search(r"table\s+([^;]*);", body)
        if tab is not None:
            vals = np.array([float(x) for x in _words(tab.group(1))])
            if vals.size != cpt.size:
                raise LocalPrivError(f"table of {child}: {vals.size} numbers for {cpt.size} cells")
            if bnlearn:  # bnlearn 'table' with parents: child fastest, first parent next (R order)
                cpt = (np.moveaxis(vals.reshape((card[child],) + shape[:-1], order="F"), 0, -1)
                       if ps else vals)
            else:  # JavaBayes: [child, p1, ..., pk] in C order
                cpt = np.moveaxis(vals.reshape((card[child],) + shape[:-1]), 0, -1)
        else:
            for row in re.finditer(r"\(([^)]*)\)\s*([^;]*);", body):
                key = tuple(lab[q][x] for q, x in zip(ps, _words(row.group(1))))
                cpt[key] = [float(x) for x in _words(row.group(2))]
        cpt = np.asarray(cpt, dtype=float).reshape(shape)
        if np.isnan(cpt).any():
            raise LocalPrivError(f"table of {child} is incomplete")
        if np.any(np.abs(cpt.sum(axis=-1) - 1) > 1e-3):
            raise LocalPrivError(f"table of {child} has rows not summing to 1")
        parents[child] = ps
        cpts[child] = cpt / cpt.sum(axis=-1, keepdims=True)
    missing = [v for v in names if v not in cpts]
    if missing:
        raise LocalPrivError(f"no probability table for {missing}")
    return BayesNet(names, levels, parents, cpts)


def load_network(name: str) -> BayesNet:
    """One of the thesis's networks shipped with localpriv: ``asia``, ``survey``, ``child``,
    ``alarm`` (bnlearn repository; provenance in docs/DATA.md and docs/multiattr.md)."""
    if name not in NETWORKS:
        raise LocalPrivError(f"unknown network {name!r}; known: {', '.join(NETWORKS)}")
    return read_bif(_HERE / f"{name}.bif")
