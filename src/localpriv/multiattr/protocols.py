"""Marginal and range answers of the grouped protocols (``calm``, ``hi``, ``hio``, ``hdg`` of
:mod:`localpriv.mechanisms.grouped`) from their counts, with intervals.

Every group ``g`` gives an unbiased estimate of its table, ``f_g = B_g h_g`` (``h_g`` the empirical
law of the group's report values, ``B_g`` the pseudo-inverse of the oracle's ``C_g^T``; for k-RR the
closed form of Wang et al., USENIX Security 2017; for a pure oracle such as OUE or OLH the
support-count estimator ``f_v = (C_v / n_g - q*) / (p* - q*)`` of the same paper, whose ``B_g`` is
``(Z^T - q*) / (p* - q*)`` over the group's distinct reports with support matrix ``Z``). A query is a linear functional
``sum_g w_g . f_g``; its variance, with the groups independent given their sizes, is

    Var = sum_g ( sum_o (w_g B_g)_o^2 h_g[o] - (w_g B_g h_g)^2 ) / n_g

(the multinomial covariance of ``h_g`` at its plug-in value), and the interval is normal.

* ``calm``: CALM's consistency step (:func:`localpriv.multiattr.marginals.make_consistent`, the
  linear step alone: its rounds of projection onto the simplex shift every cell and bias sums of
  cells) is applied to the group tables first; a marginal or range is read from every group that holds its
  attributes and those answers are averaged with inverse-variance weights. The stated variance is
  the raw tables' (consistency is a projection and does not increase it for the average).
* ``hi``/``hio``: a range is the sum, over the product of the attributes' minimal decompositions
  into hierarchy nodes, of one node of one group each (an attribute queried over its whole domain is
  level 0); ``hi`` answers ranges on one attribute only. A marginal is read from the groups holding
  its attributes at full resolution (for ``hio`` several; averaged as above).
* ``hdg``: a one-attribute range from the 1-D grid, a two-attribute range from that pair's grid, with
  values assumed uniform within a cell the range cuts (the interval covers the noise, not that bias).
  Ranges on three or more attributes are refused.
* ``hdg`` with ``refined=True``: HDG's response matrix (Yang, Wang, Li, Cheng, Su and Xiao, VLDB
  2021): every grid is made non-negative by Norm-Sub (Wang et al., NDSS 2020), and for each pair
  ``(i, j)`` a fine ``k_i x k_j`` matrix, started uniform, is scaled in turn to the 1-D grid of ``i``
  (the rows of each bin to its frequency), the 1-D grid of ``j`` (columns) and the pair's 2-D grid
  (each cell's block), renormalized after each, until one round moves it by less than ``1/n`` in
  L1 (the paper's one user) or after :data:`RESPONSE_ROUNDS` rounds. A two-attribute range or
  marginal is the matrix's sum over it; one attribute is answered by its 1-D grid as without the
  refinement. The refinement is not linear in the reports, so its interval is *anchored* on the
  unrefined answer's: ``[min(l, r), max(u, r)]`` with ``[l, u]`` the normal interval of the unbiased
  grid answer and ``r`` the refined value (it contains the unbiased interval and the answer).
  The paper's cross-grid consistency step needs nested bins (``g1`` a multiple of ``g2`` on
  power-of-two domains); the grids here are ``round(linspace)`` cuts that do not nest in general,
  and it is not applied: the alternating scalings reconcile the 1-D and 2-D grids inside the matrix.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from localpriv.domains import ProductDomain
from localpriv.estimators.postprocess import norm_sub
from localpriv.mechanisms.grouped import CALM, HDG, MAX_GROUPED_OUTPUTS, Group, GroupedMechanism, SupportEstimator
from localpriv.multiattr.marginals import make_consistent
from localpriv.multiattr.query import MAX_MARGINAL_ROWS, MAX_QUERY_TERMS, parse_marginal, parse_range
from localpriv.multiattr.ranges import decompose_interval
from localpriv.utils.arrays import unique_rows
from localpriv.utils.errors import LocalPrivError
from localpriv.utils.interval import Interval

__all__ = ["GroupTables", "answer_protocol_queries", "MAX_RESPONSE_CELLS", "RESPONSE_ROUNDS"]

#: the most fine cells ``k_i x k_j`` of one HDG response matrix (a few arrays of 8 bytes per cell while it
#: is built): the grouped protocols' limit on the joint, which already bounds every pair's matrix
MAX_RESPONSE_CELLS = MAX_GROUPED_OUTPUTS
#: the most rounds of the response-matrix updates (each round: 1-D grid of i, of j, then the 2-D grid)
RESPONSE_ROUNDS = 100

Ranges = dict[int, tuple[int, int]]


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise LocalPrivError(f"level {level} is not strictly between 0 and 1")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def _coverage(edges: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The fraction of each bin's values inside ``lo..hi``."""
    overlap = np.clip(np.minimum(edges[1:], hi + 1) - np.maximum(edges[:-1], lo), 0, None)
    return overlap / np.diff(edges)


@dataclass(frozen=True)
class GroupTables:
    """The group tables of a grouped protocol, estimated from its counts: ``tables[g]`` (flat,
    consistent for ``calm``), ``estimators[g] = B_g``, ``laws[g] = h_g`` and ``sizes[g] = n_g``."""

    mech: GroupedMechanism
    tables: tuple[np.ndarray, ...]
    estimators: tuple[Any, ...]
    laws: tuple[np.ndarray, ...]
    sizes: tuple[int, ...]
    #: HDG response matrices already built, by attribute pair (filled on first use)
    _responses: dict[tuple[int, int], np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_counts(cls, mech: GroupedMechanism, counts: npt.ArrayLike, consistent: bool = True) -> GroupTables:
        """Estimate every group table from the count of each report value (length ``n_outputs``);
        ``consistent=False`` skips CALM's consistency step."""
        if not isinstance(mech, GroupedMechanism):
            raise LocalPrivError("group tables need a calm, hi, hio or hdg mechanism")
        est = mech.group_estimates(counts)
        cnt = np.asarray(counts, dtype=float).reshape(-1)
        laws = []
        if any(mech.structured):  # B's columns are the seen report values, in order
            seen = np.flatnonzero(cnt > 0)
            grp = np.searchsorted(np.asarray(mech.offsets[1:], dtype=float), seen, side="right")
            for g in range(len(mech.groups)):
                part = cnt[seen[grp == g]]
                laws.append(part / max(part.sum(), 1.0))
        else:
            for g in range(len(mech.groups)):
                part = cnt[mech.offsets[g]:mech.offsets[g + 1]]
                laws.append(part / max(part.sum(), 1.0))
        return cls._build(mech, est, laws, consistent)

    @classmethod
    def from_observed(cls, mech: GroupedMechanism, reports: npt.ArrayLike, counts: npt.ArrayLike,
                      consistent: bool = True) -> GroupTables:
        """As :meth:`from_counts`, from distinct reports and their counts (the only way for pure
        oracles whose reports cannot be enumerated, e.g. ``olh`` with its default seeds or ``oue``
        on groups of more than 12 cells)."""
        if not isinstance(mech, GroupedMechanism):
            raise LocalPrivError("group tables need a calm, hi, hio or hdg mechanism")
        cnt = np.asarray(counts, dtype=float).reshape(-1)
        if not any(mech.structured):
            full = np.zeros(int(mech.n_outputs or 0))
            np.add.at(full, mech.output_index(reports), cnt)
            return cls.from_counts(mech, full, consistent)
        est = mech.group_estimates_from_reports(reports, cnt)
        _, _, positions = mech.split_reports(reports)
        laws = [cnt[p] / max(float(cnt[p].sum()), 1.0) for p in positions]
        return cls._build(mech, est, laws, consistent)

    @classmethod
    def _build(cls, mech: GroupedMechanism, est: list[tuple[np.ndarray, Any, int]], laws: list[np.ndarray],
               consistent: bool) -> GroupTables:
        tables = [f for f, _, _ in est]
        if consistent and isinstance(mech, CALM) and len(mech.groups) > 1:
            raw = {g.attrs: t.reshape(g.shape) for g, t in zip(mech.groups, tables)}
            var = {g.attrs: float(np.mean(cls._cell_variances(B, h, n))) for g, (_, B, n), h
                   in zip(mech.groups, est, laws)}
            fixed = make_consistent(raw, var, rounds=0)  # the linear step only: unbiased
            tables = [fixed[g.attrs].reshape(-1) for g in mech.groups]
        return cls(mech, tuple(tables), tuple(B for _, B, _ in est), tuple(laws), tuple(n for _, _, n in est))

    @classmethod
    def from_reports(cls, mech: GroupedMechanism, reports: npt.ArrayLike, consistent: bool = True) -> GroupTables:
        """As :meth:`from_counts`, from the reports themselves."""
        r = np.asarray(reports)
        if not isinstance(mech, GroupedMechanism):
            raise LocalPrivError("group tables need a calm, hi, hio or hdg mechanism")
        if any(mech.structured):
            distinct, cnt = _distinct_rows(r)
            return cls.from_observed(mech, distinct, cnt, consistent)
        idx = mech.output_index(r).reshape(-1)
        return cls.from_counts(mech, np.bincount(idx, minlength=int(mech.n_outputs or 0)), consistent)

    @staticmethod
    def _cell_variances(B: Any, h: np.ndarray, n: int) -> np.ndarray:
        if n <= 0:
            return np.full(B.shape[0], np.inf)
        second = B.squared(h) if isinstance(B, SupportEstimator) else (B * B) @ h
        return np.asarray(np.maximum(second - (B @ h) ** 2, 0.0) / n)

    def _functional(self, weights: dict[int, np.ndarray], variance: bool = True) -> tuple[float, float]:
        """``(sum_g w_g . f_g, its variance)`` (module docstring); ``variance=False``: nan for the variance."""
        value, var = 0.0, 0.0
        for g, w in weights.items():
            value += float(w @ self.tables[g])
            if not variance:
                var = math.nan
                continue
            if self.sizes[g] <= 0:
                return value, math.inf
            wb = w @ self.estimators[g]
            var += max(float((wb * wb) @ self.laws[g] - (wb @ self.laws[g]) ** 2), 0.0) / self.sizes[g]
        return value, var

    def _combine(self, parts: list[tuple[float, float]]) -> tuple[float, float]:
        """Inverse-variance average of independent unbiased answers."""
        finite = [(v, s) for v, s in parts if 0 < s < math.inf]
        if not finite:
            return (float(np.mean([v for v, _ in parts])), math.inf) if parts else (math.nan, math.inf)
        w = np.array([1.0 / s for _, s in finite])
        return float(sum(wi * v for wi, (v, _) in zip(w, finite)) / w.sum()), float(1.0 / w.sum())

    def _group_weights(self, group: Group, ranges: Ranges) -> np.ndarray:
        cov = [_coverage(e, *ranges.get(j, (0, self.mech.shape[j] - 1))) for j, e in zip(group.attrs, group.edges)]
        w = np.ones(1)
        for c in cov:
            w = np.outer(w, c).reshape(-1)
        return w

    def range_value(self, ranges: Ranges, variance: bool = True) -> tuple[float, float]:
        """``(estimate, variance)`` of the fraction of users with attribute ``j`` in ``lo_j..hi_j``
        for every ``j`` in ``ranges`` (value indices, inclusive). ``variance=False`` returns nan for
        the variance wherever the estimate does not need it (one group answers, or a sum of nodes),
        skipping its cost (a product with the support of every distinct report under OUE or OLH);
        the estimate is the same."""
        m = self.mech
        for j, (lo, hi) in ranges.items():
            if not 0 <= j < m.d or not 0 <= lo <= hi < m.shape[j]:
                raise LocalPrivError(f"range {lo}..{hi} of attribute {j} is outside the domain")
        active = {j: r for j, r in ranges.items() if r != (0, m.shape[j] - 1)}
        if not active:
            return 1.0, 0.0
        if m.groups[0].levels:  # hi, hio: product of the attributes' decompositions
            b = int(m.settings["branching"])
            index = {g.levels: i for i, g in enumerate(m.groups)}
            parts = [decompose_interval(*active[j], s, b) if j in active else [(0, 0)] for j, s in enumerate(m.shape)]
            weights: dict[int, np.ndarray] = {}
            for combo in itertools.product(*parts):
                levels = tuple(lv for lv, _ in combo)
                if not any(levels):
                    continue  # the root of every attribute: the known total is added below
                if levels not in index:
                    raise LocalPrivError(f"{m.spec_name} answers ranges on one attribute at a time; "
                                         "use hio or hdg for ranges on several")
                g = index[levels]
                grp = m.groups[g]
                cell = int(np.ravel_multi_index(tuple(combo[j][1] for j in grp.attrs), grp.shape))
                weights.setdefault(g, np.zeros(grp.cells))[cell] += 1.0
            root = sum(1 for combo in itertools.product(*parts) if not any(lv for lv, _ in combo))
            value, var = self._functional(weights, variance)
            return value + float(root), var
        holders = [i for i, g in enumerate(m.groups) if set(active) <= set(g.attrs)]
        if not holders:
            what = "two attributes" if isinstance(m, HDG) else "the attributes of one of its sets"
            raise LocalPrivError(f"{m.spec_name} answers ranges on at most {what}; attributes "
                                 f"{sorted(active)} are not reported together")
        fewest = min(len(m.groups[i].attrs) for i in holders)
        use = [i for i in holders if len(m.groups[i].attrs) == fewest] if isinstance(m, HDG) else holders
        if len(use) == 1 and not variance:  # one answer: its value needs no inverse-variance weight
            return self._functional({use[0]: self._group_weights(m.groups[use[0]], active)}, False)
        return self._combine([self._functional({i: self._group_weights(m.groups[i], active)}) for i in use])

    def range(self, ranges: Ranges, level: float = 0.95, refined: bool = False) -> Interval:
        """:meth:`range_value` with its normal interval at ``level``; ``refined=True`` (``hdg`` only):
        the response matrix's answer (:meth:`refined_range_value`) with the normal interval of the
        unbiased answer widened to contain it (module docstring)."""
        z = _z(level)
        value, var = self.range_value(ranges)
        half = z * math.sqrt(var) if math.isfinite(var) else math.inf
        if refined:
            r = self.refined_range_value(ranges)
            return Interval(r, min(value - half, r), max(value + half, r), level,
                            "hdg: response matrix; normal interval of the unbiased grid answer, anchored")
        return Interval(value, min(value - half, value), max(value + half, value), level,
                        f"{self.mech.spec_name}: normal, variance of the unbiased group tables")

    def _hdg_pair(self, i: int, j: int) -> tuple[int, int, int]:
        """The group indices of the 1-D grids of ``i`` and ``j`` and of the 2-D grid of the pair ``i < j``."""
        where = {g.attrs: t for t, g in enumerate(self.mech.groups)}
        return where[(i,)], where[(j,)], where[(i, j)]

    def response_matrix(self, i: int, j: int) -> np.ndarray:
        """HDG's response matrix of attributes ``i < j``: the ``k_i x k_j`` joint fraction that agrees
        with the pair's Norm-Sub 1-D and 2-D grids (module docstring; Yang et al., VLDB 2021).

        Each round scales ``M`` so that, for every bin ``b`` of a grid, ``sum_{x in b} M[x] = t_b``
        (the grid's non-negative frequency): ``M[x] <- M[x] t_b / sum_{y in b} M[y]`` (a block whose
        sum is 0 is left as it is), then ``M <- M / sum M``; rounds stop when one moves ``M`` by less
        than ``1/n`` in L1 (``n`` the reports) or after :data:`RESPONSE_ROUNDS`. Cost: a few passes over
        the ``k_i k_j`` cells per round; at most :data:`MAX_RESPONSE_CELLS` cells."""
        m = self.mech
        if not isinstance(m, HDG):
            raise LocalPrivError(f"the response matrix is HDG's; {m.spec_name} has none")
        if not 0 <= i < j < m.d:
            raise LocalPrivError(f"response matrix of attributes {i}, {j}: give two positions i < j in 0..{m.d - 1}")
        if (i, j) in self._responses:
            return self._responses[(i, j)]
        ki, kj = m.shape[i], m.shape[j]
        if ki * kj > MAX_RESPONSE_CELLS:
            raise LocalPrivError(f"hdg response matrix: {ki * kj:,} cells is above the limit of {MAX_RESPONSE_CELLS:,}")
        pair = self._hdg_pair(i, j)
        gi, gj, gij = (m.groups[t] for t in pair)
        ti, tj, tij = (norm_sub(self.tables[t]) for t in pair)
        bi = np.searchsorted(gi.edges[0], np.arange(ki), side="right") - 1
        bj = np.searchsorted(gj.edges[0], np.arange(kj), side="right") - 1
        ci = np.searchsorted(gij.edges[0], np.arange(ki), side="right") - 1
        cj = np.searchsorted(gij.edges[1], np.arange(kj), side="right") - 1
        cell = (ci[:, None] * gij.shape[1] + cj[None, :]).reshape(-1)
        tol = 1.0 / max(sum(self.sizes), 1)

        def scale(sums: np.ndarray, target: np.ndarray) -> np.ndarray:
            return np.divide(target, sums, out=np.ones_like(target), where=sums > 0)

        M = np.full(ki * kj, 1.0 / (ki * kj))
        for _ in range(RESPONSE_ROUNDS):
            before = M.copy()
            R = M.reshape(ki, kj)
            R *= scale(np.bincount(bi, weights=R.sum(axis=1), minlength=ti.size), ti)[bi][:, None]
            R /= max(R.sum(), np.finfo(float).tiny)
            R *= scale(np.bincount(bj, weights=R.sum(axis=0), minlength=tj.size), tj)[bj][None, :]
            R /= max(R.sum(), np.finfo(float).tiny)
            M *= scale(np.bincount(cell, weights=M, minlength=tij.size), tij)[cell]
            M /= max(M.sum(), np.finfo(float).tiny)
            if np.abs(M - before).sum() < tol:
                break
        out = M.reshape(ki, kj)
        self._responses[(i, j)] = out
        return out

    def refined_range_value(self, ranges: Ranges) -> float:
        """The ``hdg`` answer from the response matrix: a range on two attributes is the matrix's
        sum over it; on one attribute, the 1-D grid's answer (:meth:`range_value`); on three or more,
        refused."""
        m = self.mech
        if not isinstance(m, HDG):
            raise LocalPrivError(f"refined answers are HDG's response matrix; {m.spec_name} has none")
        for j, (lo, hi) in ranges.items():
            if not 0 <= j < m.d or not 0 <= lo <= hi < m.shape[j]:
                raise LocalPrivError(f"range {lo}..{hi} of attribute {j} is outside the domain")
        active = {j: r for j, r in ranges.items() if r != (0, m.shape[j] - 1)}
        if len(active) > 2:
            raise LocalPrivError(f"hdg answers ranges on at most two attributes; attributes {sorted(active)} "
                                 "are not reported together")
        if len(active) < 2:
            return self.range_value(ranges, variance=False)[0]
        i, j = sorted(active)
        (li, hi_), (lj, hj) = active[i], active[j]
        return float(self.response_matrix(i, j)[li:hi_ + 1, lj:hj + 1].sum())

    def marginal(self, attrs: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """``(estimate, variance)`` of the marginal on ``attrs`` (positions), one axis per attribute
        in the given order: from the groups holding them at full resolution, else cell by cell as
        ranges (``hdg``: uniform within grid cells)."""
        m = self.mech
        if not attrs or len(set(attrs)) != len(attrs) or any(not 0 <= j < m.d for j in attrs):
            raise LocalPrivError(f"marginal {attrs}: give distinct attribute positions in 0..{m.d - 1}")
        sub = tuple(m.shape[j] for j in attrs)
        cells = math.prod(sub)
        if cells > MAX_MARGINAL_ROWS:
            raise LocalPrivError(f"marginal: {cells:,} cells is above the limit of {MAX_MARGINAL_ROWS:,}")
        holders = [i for i, g in enumerate(m.groups) if all(g.full(j) for j in attrs)]
        if not holders:
            vals = np.empty(cells)
            var = np.empty(cells)
            for c, idx in enumerate(itertools.product(*(range(s) for s in sub))):
                vals[c], var[c] = self.range_value({j: (v, v) for j, v in zip(attrs, idx)})
            return vals.reshape(sub), var.reshape(sub)
        ests, vars_ = [], []
        for i in holders:
            g = m.groups[i]
            keep = [g.attrs.index(j) for j in attrs]
            drop = tuple(a for a in range(len(g.attrs)) if a not in keep)
            t = self.tables[i].reshape(g.shape)
            order = [sorted(keep).index(a) for a in keep]
            est = self.estimators[i]
            if isinstance(est, SupportEstimator):
                B = est.marginal(g.shape, sorted(keep), order)
            else:
                B = est.reshape(*g.shape, -1)
                if drop:
                    B = B.sum(axis=drop)
                B = np.transpose(B, [*order, len(keep)]).reshape(cells, -1)
            if drop:
                t = t.sum(axis=drop)
            t = np.transpose(t, order).reshape(-1)
            ests.append(t)
            vars_.append(self._cell_variances(B, self.laws[i], self.sizes[i]))
        e, v = np.array(ests), np.array(vars_)
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(np.isfinite(v) & (v > 0), 1.0 / v, 0.0)
        tot = w.sum(axis=0)
        out = np.where(tot > 0, (w * e).sum(axis=0) / np.where(tot > 0, tot, 1.0), e.mean(axis=0))
        var = np.where(tot > 0, 1.0 / np.where(tot > 0, tot, 1.0), np.inf)
        return out.reshape(sub), var.reshape(sub)


    def refined_marginal(self, attrs: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(refined, unbiased, variance)`` of the marginal on ``attrs`` under ``hdg``: on two
        attributes the response matrix (axes in the given order), on one the 1-D grid's answer
        (:meth:`marginal`); ``unbiased`` and ``variance`` are :meth:`marginal`'s, the interval's anchor."""
        if not isinstance(self.mech, HDG):
            raise LocalPrivError(f"refined answers are HDG's response matrix; {self.mech.spec_name} has none")
        if len(attrs) > 2:
            raise LocalPrivError(f"hdg answers marginals of at most two attributes, not {len(attrs)}")
        plain, var = self.marginal(attrs)
        if len(attrs) == 1:
            return plain, plain, var
        i, j = attrs
        M = self.response_matrix(min(i, j), max(i, j))
        return (M if i < j else M.T).copy(), plain, var


def _distinct_rows(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(r, axis=0, return_counts=True)`` (``axis=None`` for 1-D reports), the rows in the
    same order: integer and byte rows are compared as a few 64-bit keys each
    (:func:`localpriv.utils.arrays.unique_rows`), not field by field."""
    return unique_rows(r)


def _value_range(dom: ProductDomain, j: int, lo: str | None, hi: str | None) -> tuple[int, int]:
    """The value indices ``lo..hi`` of attribute ``j`` from labels (numbers compared as numbers)."""
    labels = [str(v) for v in dom.domains[j].decode(np.arange(dom.shape[j]))]
    if lo is not None and lo == hi and lo in labels:
        i = labels.index(lo)
        return i, i
    try:
        nums = np.array([float(v) for v in labels])
        keep = np.ones(nums.size, dtype=bool)
        if lo is not None:
            keep &= nums >= float(lo)
        if hi is not None:
            keep &= nums <= float(hi)
    except ValueError:
        raise LocalPrivError(f"range {lo}..{hi} of {dom.names[j]}: labels are not numbers; give one label") from None
    idx = np.flatnonzero(keep)
    if idx.size == 0 or idx[-1] - idx[0] + 1 != idx.size:
        raise LocalPrivError(f"range {lo}..{hi} of {dom.names[j]} is empty or not consecutive values")
    return int(idx[0]), int(idx[-1])


def answer_protocol_queries(tables: GroupTables, domain: ProductDomain, marginals: list[str] = (),  # type: ignore[assignment]
                            ranges: list[str] = (), level: float = 0.95,  # type: ignore[assignment]
                            refined: bool = False) -> dict[str, Any]:
    """Answer marginal (``"age,sex"``) and range (``"age=30..45,hours=50..99"``) queries from a grouped
    protocol's group tables, each with its normal interval: the JSON shape of
    :func:`localpriv.multiattr.query.answer_queries`. ``refined=True`` (``hdg`` only): answers from
    HDG's response matrices, intervals anchored on the unbiased answers' (module docstring)."""
    if refined and not isinstance(tables.mech, HDG):
        raise LocalPrivError(f"refined answers are HDG's response matrix; {tables.mech.spec_name} has none")
    if len(marginals) + len(ranges) == 0:
        raise LocalPrivError("nothing to answer: give --marginal and/or --range")
    if len(marginals) + len(ranges) > MAX_QUERY_TERMS:
        raise LocalPrivError(f"{len(marginals) + len(ranges)} queries is above the limit of {MAX_QUERY_TERMS}")
    if tuple(domain.shape) != tuple(tables.mech.shape):
        raise LocalPrivError(f"domain shape {list(domain.shape)} is not the protocol's {list(tables.mech.shape)}")
    z = _z(level)
    method = ("hdg: response matrices (Norm-Sub grids, alternating scaling), normal intervals of the unbiased "
              "grid answers anchored on them" if refined else
              f"{tables.mech.spec_name}: unbiased group tables, normal intervals")
    out: dict[str, Any] = {"attributes": list(domain.names), "intervals": True, "level": float(level),
                           "method": method}
    margs: dict[str, list[dict[str, Any]]] = {}
    for text in marginals:
        names = parse_marginal(text)
        pos = [domain.attribute(n) for n in names]
        if refined:
            est, anchor, var = tables.refined_marginal(pos)
        else:
            est, var = tables.marginal(pos)
            anchor = est
        labels = [[str(v) for v in domain.domains[j].decode(np.arange(domain.shape[j]))] for j in pos]
        rows = []
        for idx in itertools.product(*(range(domain.shape[j]) for j in pos)):
            p, a, s = float(est[idx]), float(anchor[idx]), float(var[idx])
            half = z * math.sqrt(s) if math.isfinite(s) else math.inf
            rows.append({**{n: lab[i] for n, lab, i in zip(names, labels, idx)}, "probability": p,
                         "lower": min(a - half, p), "upper": max(a + half, p)})
        margs[text] = rows
    out["marginals"] = margs
    answers = []
    for text in ranges:
        spec = parse_range(text)
        idx_ranges = {domain.attribute(n): _value_range(domain, domain.attribute(n), lo, hi)
                      for n, (lo, hi) in spec.items()}
        iv = tables.range(idx_ranges, level, refined=refined)
        answers.append({"range": {k: [lo, hi] for k, (lo, hi) in spec.items()}, "probability": iv.value,
                        "lower": iv.lower, "upper": iv.upper, "level": float(level), "method": iv.method})
    out["ranges"] = answers
    return out
