"""Grouped protocols on a product domain: marginals by user groups (CALM), hierarchical intervals,
HIO and HDG-style grids, each ONE report per user.

A user holds a joint cell ``x = (x_1, ..., x_d)`` of a product domain with sizes ``k_1, ..., k_d``.
The protocol has ``G`` public *groups*; a group coarsens the joint: it keeps some attributes, each
cut into intervals of consecutive values (its *bins*), and forgets the others. A user is assigned
one group uniformly at random, computes her group cell ``cell_g(x)`` (the tuple of her bins, flat
row-major) and reports it through the frequency oracle, instantiated on the ``m_g`` cells of her
group at the oracle's ``eps``: any registered mechanism with index reports and an enumerable
channel (``krr``, ``rrba``, ``hr``), or any pure oracle (``oue``, ``olh``, ``sue``, ``blh``, ...: a
support function ``S(z)`` and ``p* > q*``). The report carries the group: ``offset_g + z`` for
integer reports (``offset_g`` the sum of the earlier oracles' output-space sizes), and for a
bit-vector oracle a byte row, the group in :data:`GROUP_BYTES` little-endian bytes followed by the
oracle's report, zero-padded to the widest group.

**Pure oracles.** Their group tables are the support-count estimates ``f_v = (C_v/n_g - q*) /
(p* - q*)`` (Wang et al., USENIX Security 2017; :class:`SupportEstimator`) and their likelihood is
:class:`~localpriv.likelihood.product.GroupedOracleBlock` over each oracle's own structured block,
so no dense channel is built.

* ``calm(krr(eps=1.0),sets=[[0,1],[1,2]])`` -- one group per attribute set, every value its own bin:
  the k-way marginals by user groups of CALM (Zhang et al., CCS 2018). ``sets`` defaults to all
  pairs (all of one attribute's values when ``d = 1``). With ``oracle=rrba(p=0.5)`` a group reports
  one cell of its contingency table by the thesis's RRBA (uniform fake table).
* ``hi(krr(eps=1.0),branching=4)`` -- hierarchical intervals (Cormode, Kulkarni and Srivastava,
  VLDB 2019) on every attribute: one group per attribute ``j`` and level ``l = 1..h_j`` of its
  ``b``-ary hierarchy (``h_j = ceil(log_b k_j)``), bins of ``b^(h_j - l)`` values.
* ``hio(krr(eps=1.0),branching=4)`` -- HIO (Wang, Ding, Lopuhaä-Zwakenberg, Li, Wang and Zhang,
  SIGMOD 2019): one group per vector of levels ``(l_1, ..., l_d)``, ``0 <= l_j <= h_j``, not all 0;
  level 0 is the whole attribute (forgotten). With ``d = 1`` it is ``hi``.
* ``hdg(krr(eps=1.0),g1=8,g2=4)`` -- the grids of HDG (Yang, Wang, Li, Cheng, Su and Xiao, VLDB
  2021): one group per attribute with ``g1`` equal-width bins and one per pair of attributes with a
  ``g2 x g2`` grid (``round(linspace(0, k_j, g + 1))`` edges). HDG's response matrix is an answer
  path of :class:`localpriv.multiattr.protocols.GroupTables` (``refined=True``), not part of the
  mechanism.

**Channel and level.** ``M[x, offset_g + z] = C_g[cell_g(x), z] / G``. Column blocks belong to one
group each and every group cell is the cell of some input, so the level of the whole report
between any two tuples is exactly ``max_g eps_g``, the oracle's level (assignment to a public group
does not amplify it, as for SMP).
"""
from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import DenseBlock, LikelihoodBlock, check_dense_size
from localpriv.likelihood.product import GroupedOracleBlock
from localpriv.mechanisms.base import Mechanism, parse, register
from localpriv.mechanisms.krr import KRR
from localpriv.mechanisms.multiattr import product_spec_params, spec_with_oracle
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.mechanisms.unary import PureProtocol
from localpriv.utils.validation import LocalPrivError, check_rng

if TYPE_CHECKING:
    from localpriv.domains.base import Domain

__all__ = ["Group", "GroupedMechanism", "SupportEstimator", "GROUP_BYTES", "MAX_SUPPORT_ENTRIES", "CALM",
           "HI", "HIO", "HDG", "MAX_GROUPS", "MAX_GROUPED_OUTPUTS", "MAX_GROUPED_ATTRIBUTES",
           "hierarchy_height", "level_edges", "grid_edges"]

#: the most groups of one protocol
MAX_GROUPS = 1024
#: the most report values (sum over groups of the oracles' outputs) and the most joint cells
MAX_GROUPED_OUTPUTS = 1_000_000
#: the most attributes
MAX_GROUPED_ATTRIBUTES = 16
#: bytes naming the group at the head of a bit-vector report (oracles with bit-vector reports)
GROUP_BYTES = 2
#: the most support entries (reports x cells) the unbiased tables of one group hold
MAX_SUPPORT_ENTRIES = 200_000_000
#: Bytes of float64 support rows :class:`SupportEstimator` holds at once in ``B @ h``
SUPPORT_ROWS_BYTES = 1 << 24


@dataclass(frozen=True)
class Group:
    """One group: the attributes it keeps (positions, increasing) and each one's bin edges
    (``edges[i][b] .. edges[i][b+1]-1`` are the values of bin ``b``); ``levels`` is the hierarchy
    level of every attribute for ``hi``/``hio`` (``()`` otherwise)."""

    attrs: tuple[int, ...]
    edges: tuple[np.ndarray, ...]
    levels: tuple[int, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        """Bins per kept attribute."""
        return tuple(int(e.size - 1) for e in self.edges)

    @property
    def cells(self) -> int:
        """``m_g``: the number of group cells."""
        return math.prod(self.shape)

    def full(self, j: int) -> bool:
        """Whether attribute ``j`` is kept at full resolution (one value per bin)."""
        if j not in self.attrs:
            return False
        e = self.edges[self.attrs.index(j)]
        return bool(np.all(np.diff(e) == 1))

    def cell_of(self, codes: np.ndarray) -> np.ndarray:
        """The group cell of each row of ``codes`` (``n x d`` attribute values)."""
        if not self.attrs:
            return np.zeros(codes.shape[0], dtype=np.int64)
        bins = [np.searchsorted(e, codes[:, j], side="right") - 1 for j, e in zip(self.attrs, self.edges)]
        return np.ravel_multi_index(tuple(bins), self.shape).astype(np.int64)


def hierarchy_height(size: int, branching: int) -> int:
    """``h = ceil(log_b size)``, at least 1: the levels of a ``b``-ary hierarchy over ``size`` values."""
    h = 1
    while branching ** h < size:
        h += 1
    return h


def level_edges(size: int, branching: int, level: int) -> np.ndarray:
    """Bin edges at ``level`` of the ``b``-ary hierarchy over ``0..size-1``: intervals of
    ``b^(h - level)`` values (the last one cut at ``size``)."""
    width = branching ** (hierarchy_height(size, branching) - level)
    return np.unique(np.append(np.arange(0, size, width), size)).astype(np.int64)


def grid_edges(size: int, g: int) -> np.ndarray:
    """``g`` equal-width bins over ``0..size-1`` (``round(linspace(0, size, g + 1))``, merged when
    ``g > size``)."""
    return np.unique(np.round(np.linspace(0, size, min(g, size) + 1)).astype(np.int64))


def _fill_size(spec: str, m: int) -> str:
    """``krr(eps=1.0)`` on ``m`` cells: ``krr(k=m,eps=1.0)``."""
    name, _, rest = spec.partition("(")
    body = rest.rsplit(")", 1)[0].strip() if rest else ""
    return f"{name}(k={m}" + (f",{body})" if body else ")")


class GroupedMechanism(Mechanism):
    """Base of the grouped protocols (module docstring). Inputs are flat joint cells (row-major
    over ``shape``); reports are one ``int64`` each, ``offset_g + z``."""

    #: the first spec argument may be the oracle, by position
    positional_spec: ClassVar[bool] = True
    #: the spec parameters besides oracle and shape, with their defaults
    extra: ClassVar[dict[str, Any]] = {}

    def __init__(self, oracle: Any, shape: Sequence[int], **kw: Any) -> None:
        sizes: list[Any] = list(shape) if isinstance(shape, (list, tuple, np.ndarray)) else [shape]
        shp = tuple(int(s) for s in sizes)
        if not 1 <= len(shp) <= MAX_GROUPED_ATTRIBUTES or any(s < 2 for s in shp):
            raise LocalPrivError(f"{self.spec_name}: shape needs 1..{MAX_GROUPED_ATTRIBUTES} attribute sizes, "
                                 f"each >= 2, got {list(shp)}")
        self.shape, self.d, self.k = shp, len(shp), math.prod(shp)
        if self.k > MAX_GROUPED_OUTPUTS:
            raise LocalPrivError(f"{self.spec_name}: {self.k:,} joint cells is above the limit of "
                                 f"{MAX_GROUPED_OUTPUTS:,}")
        self.settings = {key: kw.get(key, default) for key, default in self.extra.items()}
        text = str(oracle).strip()
        if re.match(r"\s*[A-Za-z][\w\-]*", text) is None or text.startswith("["):
            raise LocalPrivError(f"{self.spec_name}: the oracle is one mechanism spec, e.g. krr(eps=1.0)")
        self.oracle_text = text
        self.groups = self._groups()
        if not 1 <= len(self.groups) <= MAX_GROUPS:
            raise LocalPrivError(f"{self.spec_name}: {len(self.groups)} groups is outside 1..{MAX_GROUPS}")
        self.oracles: list[Mechanism] = []
        for g in self.groups:
            if g.cells > MAX_GROUPED_OUTPUTS:
                raise LocalPrivError(f"{self.spec_name}: a group of {g.cells:,} cells is above the limit of "
                                     f"{MAX_GROUPED_OUTPUTS:,}")
            o = parse(text if "k=" in text else _fill_size(text, g.cells))
            if o.k != g.cells:
                raise LocalPrivError(f"{self.spec_name}: oracle {o} has {o.k} inputs but a group has {g.cells} cells")
            if not isinstance(o, PureProtocol) and (o.report_kind != "int64" or o.n_outputs is None):
                raise LocalPrivError(f"{self.spec_name}: oracle {o} needs a finite, enumerable output space "
                                     "or a support function (a pure frequency oracle such as oue or olh)")
            self.oracles.append(o)
        kinds = {o.report_kind for o in self.oracles}
        if kinds - {"int64", "binary"} or len(kinds) != 1:
            raise LocalPrivError(f"{self.spec_name}: oracle {text} needs integer or bit-vector reports")
        self._binary = kinds == {"binary"}
        #: per group, whether its tables and likelihood come from the oracle's support function (pure
        #: oracles whose reports are bit vectors or too many to enumerate); else from its dense channel
        self.structured = tuple(isinstance(o, PureProtocol) and (self._binary or o.n_outputs is None)
                                for o in self.oracles)
        sizes = [o.output_space_size() for o in self.oracles]
        if any(s is None for s in sizes) or (not self._binary and sum(int(s or 0) for s in sizes) >= 2 ** 62):
            raise LocalPrivError(f"{self.spec_name}: the reports of oracle {text} do not fit one int64")
        self.out_sizes = tuple(int(s or 0) for s in sizes)
        total = sum(self.out_sizes)
        enumerable = all(o.n_outputs is not None for o in self.oracles)
        if enumerable and total > MAX_GROUPED_OUTPUTS and not all(self.structured):
            raise LocalPrivError(f"{self.spec_name}: {total:,} report values is above the limit of "
                                 f"{MAX_GROUPED_OUTPUTS:,}")
        self._n_out: int | None = total if enumerable and total <= MAX_GROUPED_OUTPUTS else None
        self._space = total
        self.offsets = np.concatenate([[0], np.cumsum(self.out_sizes)]).astype(np.int64 if not self._binary
                                                                               or self._n_out is not None else object)
        if self._binary:
            if len(self.groups) > 2 ** (8 * GROUP_BYTES):
                raise LocalPrivError(f"{self.spec_name}: bit-vector reports name at most "
                                     f"{2 ** (8 * GROUP_BYTES)} groups")
            # the width of each oracle's bit-vector report (a shape: one report of input 0)
            one = np.zeros(1, dtype=np.int64)
            self.widths = tuple(int(np.asarray(o.sample(one, np.random.default_rng(0))).shape[1]) for o in self.oracles)
            #: bytes of one report: the group (little-endian) then the oracle's report, zero-padded
            self.report_bytes = GROUP_BYTES + max(self.widths)
        self.channels: list[np.ndarray | None] = []
        for o, structured in zip(self.oracles, self.structured):
            if structured:
                self.channels.append(None)
                continue
            check_dense_size(o.k, o.n_outputs or 0, f"{o} channel")
            self.channels.append(np.asarray(o.channel(), dtype=float))

    def _groups(self) -> list[Group]:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- spec ---------------------------------------------------------------------------------
    @classmethod
    def from_params(cls, params: dict[str, Any], domain: Domain | None = None) -> Mechanism:
        """Build from spec parameters; ``shape`` comes from a product domain when left out."""
        params = product_spec_params(cls.spec_name, params, domain, list(cls.extra))
        return cls(**params)

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"oracle": self.oracle_text, "shape": list(self.shape)}
        out.update(self._spec_settings())
        return out

    def _spec_settings(self) -> dict[str, Any]:
        return dict(self.settings)

    def __str__(self) -> str:
        return spec_with_oracle(self.spec_name, self.params())

    # ---- outputs ------------------------------------------------------------------------------
    @property
    def report_kind(self) -> str:  # type: ignore[override]  # a ClassVar in Mechanism; here the oracle's
        """``"binary"`` (group bytes, then the oracle's bit vector) for bit-vector oracles, else ``"int64"``."""
        return "binary" if self._binary else "int64"

    @property
    def n_outputs(self) -> int | None:
        return self._n_out

    def output_space_size(self) -> int:
        return self._space

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        """``offset_g + z``: the integer of each report (bit-vector reports only while enumerable)."""
        if self._binary:
            if self._n_out is None:
                raise LocalPrivError(f"{self}: no output index for bit-vector reports of this size")
            g, parts, positions = self.split_reports(reports)
            out = np.empty(g.size, dtype=np.int64)
            for i, (z, pos) in enumerate(zip(parts, positions)):
                if pos.size:
                    out[pos] = self.offsets[i] + self.oracles[i].output_index(z)
            return out
        r = np.asarray(reports)
        if r.ndim != 1 or (r.size and r.dtype.kind not in "iuf"):
            raise LocalPrivError(f"{self}: reports are single integers offset_g + z")
        if r.dtype.kind == "f" and np.any(r != np.round(r)):
            raise LocalPrivError(f"{self}: reports must be integer output indices")
        r = r.astype(np.int64)
        bad = (r < 0) | (r >= self._space)
        if bad.any():
            raise LocalPrivError(f"{self}: reports outside the output space 0..{self._space - 1}: "
                                 f"{np.unique(r[bad])[:5].tolist()}")
        return r

    def codes(self, x: np.ndarray) -> np.ndarray:
        """Attribute values (``n x d``) of flat joint cells."""
        return np.stack(np.unravel_index(np.asarray(x, dtype=np.int64), self.shape), axis=1)

    def sample_with_group(self, x: ArrayLike, rng: np.random.Generator | int) -> tuple[np.ndarray, np.ndarray]:
        """Reports and the group of each user (the group is also readable from the report)."""
        flat = self._check_inputs(x)
        rng = check_rng(rng)
        codes = self.codes(flat)
        grp = rng.integers(0, len(self.groups), size=flat.size)
        out = (np.zeros((flat.size, self.report_bytes), dtype=np.uint8) if self._binary
               else np.empty(flat.size, dtype=np.int64))
        for g, (group, o) in enumerate(zip(self.groups, self.oracles)):  # over groups, not users
            sel = np.flatnonzero(grp == g)
            if not sel.size:
                continue
            z = o.sample(group.cell_of(codes[sel]), rng)
            if self._binary:
                out[sel, 0], out[sel, 1] = g & 0xFF, g >> 8
                out[sel, GROUP_BYTES:GROUP_BYTES + self.widths[g]] = z
            else:
                out[sel] = self.offsets[g] + o.output_index(z)
        return out, grp.astype(np.int64)

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """One report per user: a uniform group, the oracle on the user's group cell (``int64``
        ``offset_g + z``, or the group's two bytes and the oracle's bit vector)."""
        return self.sample_with_group(x, rng)[0]

    def decode_reports(self, reports: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``(g, z)``: the group of each ``int64`` report and the oracle's report within it."""
        if self._binary:
            raise LocalPrivError(f"{self}: bit-vector reports; use split_reports")
        r = self.output_index(reports).reshape(-1)
        g = np.searchsorted(self.offsets[1:], r, side="right").astype(np.int64)
        return g, r - self.offsets[g]

    def split_reports(self, reports: ArrayLike) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
        """``(g, parts, positions)``: the group of each report, and per group the oracle's reports
        (in the oracle's own form) and their positions among ``reports``."""
        if not self._binary:
            g, z = self.decode_reports(reports)
            positions = [np.flatnonzero(g == i) for i in range(len(self.groups))]
            return g, [z[p] for p in positions], positions
        r = np.asarray(reports)
        if r.ndim != 2 or r.dtype != np.uint8 or r.shape[1] != self.report_bytes:
            raise LocalPrivError(f"{self}: reports are {self.report_bytes}-byte vectors (uint8 rows), got "
                                 f"{r.dtype} of shape {r.shape}")
        g = r[:, 0].astype(np.int64) | (r[:, 1].astype(np.int64) << 8)
        if np.any(g >= len(self.groups)):
            raise LocalPrivError(f"{self}: reports name groups outside 0..{len(self.groups) - 1}")
        positions = [np.flatnonzero(g == i) for i in range(len(self.groups))]
        parts = []
        for i, pos in enumerate(positions):
            w = GROUP_BYTES + self.widths[i]
            if pos.size and np.any(r[pos, w:]):
                raise LocalPrivError(f"{self}: reports of group {i} set bytes beyond their "
                                     f"{self.widths[i]}-byte vector")
            parts.append(np.ascontiguousarray(r[pos, GROUP_BYTES:w]))
        return g, parts, positions

    def check_binary_reports(self, reports: ArrayLike) -> None:
        """Groups in range, padding clear and each oracle's reports valid (called by the readers)."""
        _, parts, _ = self.split_reports(reports)
        for o, z in zip(self.oracles, parts):
            if z.shape[0]:
                o.support_counts(z)  # type: ignore[attr-defined]  # checks width and padding bits

    # ---- channel and likelihood ---------------------------------------------------------------
    def cellmaps(self) -> list[np.ndarray]:
        """Per group, the group cell of every joint input (``K`` integers each)."""
        check_dense_size(self.k, len(self.groups), f"{self} cell maps")
        codes = self.codes(np.arange(self.k))
        return [g.cell_of(codes) for g in self.groups]

    def _channels(self) -> list[np.ndarray]:
        out = []
        for o, c in zip(self.oracles, self.channels):
            if c is None:
                if o.n_outputs is None:
                    raise LocalPrivError(f"{self}: the oracle {o} has no enumerable channel")
                check_dense_size(o.k, o.n_outputs, f"{o} channel")
                c = np.asarray(o.channel(), dtype=float)
            out.append(c)
        return out

    def channel(self) -> np.ndarray:
        """The dense ``K x |Z|`` channel ``C_g[cell_g(x), z] / G`` (small instances)."""
        if self._n_out is None:
            raise LocalPrivError(f"{self}: {self._space:,} report values; the dense channel is only built "
                                 f"for at most {MAX_GROUPED_OUTPUTS:,}")
        check_dense_size(self.k, self._n_out, f"{self} channel")
        return np.concatenate([c[m] for c, m in zip(self._channels(), self.cellmaps())], axis=1) / len(self.groups)

    def likelihood_block(self, reports: ArrayLike, counts: np.ndarray) -> LikelihoodBlock:
        """:class:`~localpriv.likelihood.product.GroupedOracleBlock` (scale ``1/G``) over one block per
        group: the dense block of ``C_g[:, z]`` for each group's reports under channel oracles, the
        oracle's own structured block (its ``likelihood_block``) under pure oracles."""
        cnt = np.asarray(counts, dtype=float)
        _, parts, positions = self.split_reports(reports)
        if any(self.structured):
            blocks = [o.likelihood_block(z, cnt[p]) if p.size else None
                      for o, z, p in zip(self.oracles, parts, positions)]
        else:
            blocks = [DenseBlock(c[:, z], cnt[p]) if p.size else None
                      for c, z, p in zip(self._channels(), parts, positions)]
        return GroupedOracleBlock(self.cellmaps(), blocks, positions, 1.0 / len(self.groups), cnt)

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        m = int(np.shape(reports)[0])
        check_dense_size(self.k, m, f"{self} likelihood of {m} reports")
        return self.likelihood_block(reports, np.ones(m)).dense()

    # ---- privacy ------------------------------------------------------------------------------
    def epsilon_ldp(self) -> float:
        """``max_g eps_g``: the group is public and every group cell is some input's (module docstring)."""
        levels = {str(o): o.epsilon_ldp() for o in self.oracles}
        return checked_epsilon(float(max(levels.values())), str(self))

    # ---- unbiased group tables ----------------------------------------------------------------
    def group_estimates(self, counts: ArrayLike) -> list[tuple[np.ndarray, Any, int]]:
        """Per group, ``(f, B, n_g)``: the unbiased estimate of the group table (flat, ``m_g``) from
        the count of each report value, the estimator's matrix ``B`` (``f = B h``, ``h`` the group's
        empirical report law, ``B`` the pseudo-inverse of ``C_g^T``; a :class:`SupportEstimator`
        for pure oracles) and the group's report count."""
        cnt = np.asarray(counts, dtype=float).reshape(-1)
        if self._n_out is None or cnt.size != self._n_out or np.any(cnt < 0) or cnt.sum() <= 0:
            raise LocalPrivError(f"{self}: counts need {self._n_out} non-negative numbers, not all 0"
                                 if self._n_out is not None else
                                 f"{self}: no count vector over {self._space:,} report values; use the reports")
        if any(self.structured):
            seen = np.flatnonzero(cnt > 0)
            reports: Any = seen
            if self._binary:
                grp = np.searchsorted(self.offsets[1:], seen, side="right")
                rows = np.zeros((seen.size, self.report_bytes), dtype=np.uint8)
                rows[:, 0], rows[:, 1] = grp & 0xFF, grp >> 8
                for i, o in enumerate(self.oracles):
                    sel = np.flatnonzero(grp == i)
                    bits = (((seen[sel] - self.offsets[i])[:, None] >> np.arange(o.k)[None, :]) & 1).astype(bool)
                    rows[sel, GROUP_BYTES:GROUP_BYTES + self.widths[i]] = np.packbits(bits, axis=1)
                reports = rows
            return self.group_estimates_from_reports(reports, cnt[seen])
        out = []
        for g, c in enumerate(self._channels()):
            part = cnt[self.offsets[g]:self.offsets[g + 1]]
            n_g = float(part.sum())
            if isinstance(self.oracles[g], KRR) and c.shape[0] > 1:
                # k-RR: f = (h - q) / (p - q) for a law h, i.e. B = (I - q 1 1^T) / (p - q) (no pseudo-inverse)
                pk, qk = float(c[0, 0]), float(c[0, 1])
                B = (np.eye(c.shape[0]) - qk) / (pk - qk)
            else:
                B = np.linalg.pinv(c.T)
            h = part / n_g if n_g > 0 else np.full(part.size, 1.0 / part.size)
            out.append((B @ h, B, int(n_g)))
        return out

    def group_estimates_from_reports(self, reports: ArrayLike, counts: ArrayLike) -> list[tuple[np.ndarray, Any, int]]:
        """As :meth:`group_estimates`, from distinct reports and their counts (any oracle; the only
        way for oracles whose reports cannot be enumerated). For a pure oracle with ``p* > q*``,
        the support counts ``C_v`` give ``f_v = (C_v / n_g - q*) / (p* - q*)`` (Wang et al., USENIX
        Security 2017), ``B`` a :class:`SupportEstimator` over the group's distinct reports and ``h``
        their empirical law."""
        cnt = np.asarray(counts, dtype=float).reshape(-1)
        _, parts, positions = self.split_reports(reports)
        if cnt.size != sum(p.size for p in positions) or np.any(cnt < 0) or cnt.sum() <= 0:
            raise LocalPrivError(f"{self}: one non-negative count per report is needed, not all 0")
        if not any(self.structured):
            full = np.zeros(int(self._n_out or 0))
            np.add.at(full, self.output_index(reports), cnt)
            return self.group_estimates(full)
        out: list[tuple[np.ndarray, Any, int]] = []
        for o, z, pos in zip(self.oracles, parts, positions):
            c = cnt[pos]
            n_g = float(c.sum())
            if pos.size * o.k > MAX_SUPPORT_ENTRIES:
                raise LocalPrivError(f"{self}: {pos.size:,} distinct reports of {o.k:,} cells is above the limit "
                                     f"of {MAX_SUPPORT_ENTRIES:,} support entries per group")
            est = SupportEstimator(o, z if pos.size else None, c)
            h = c / n_g if n_g > 0 else c
            out.append((est @ h if n_g > 0 else np.full(o.k, 1.0 / o.k), est, int(n_g)))
        return out


class SupportEstimator:
    """``B = (Z^T - q* 1 1^T) / (p* - q*)`` (``m_g x R``): the support-count estimator of a pure oracle
    as a matrix over its ``R`` distinct reports, held through the support ``Z`` (``R x m_g``, bits).

    ``B h = (Z^T h - q* sum(h)) / (p* - q*)`` is the matrix-inversion estimate when ``h`` is the
    reports' empirical law; ``w @ B`` and ``(B * B) @ h`` (with ``Z * Z = Z``) give the variances of
    linear functionals of it.
    """

    #: NumPy defers ``w @ B`` to :meth:`__rmatmul__`
    __array_ufunc__ = None

    def __init__(self, oracle: Mechanism, reports: Any, counts: np.ndarray) -> None:
        p, q = float(getattr(oracle, "p_star")), float(getattr(oracle, "q_star"))  # noqa: B009
        if not 0 <= q < p:
            raise LocalPrivError(f"{oracle}: the support-count estimator needs p* > q*, got {p}, {q}")
        self.p, self.q, self.k = p, q, int(oracle.k)
        self.Z = (np.zeros((0, self.k), dtype=bool) if reports is None
                  else np.unpackbits(np.asarray(oracle.packed_support(reports)),  # type: ignore[attr-defined]
                                     axis=1, count=self.k).astype(bool))
        self.shape = (self.k, int(self.Z.shape[0]))

    def __matmul__(self, h: np.ndarray) -> np.ndarray:
        """``B @ h`` (``h`` one weight per distinct report, or one column of weights per vector).

        ``Z^T h`` is summed over blocks of :data:`SUPPORT_ROWS_BYTES` bytes of ``Z`` in float64
        (a BLAS product per block), not as a product of booleans and floats: the same sum up to
        round-off, a few times faster, and memory bounded by the block."""
        h = np.asarray(h, dtype=float)
        step = max(1, SUPPORT_ROWS_BYTES // (8 * max(1, self.k)))
        zh = np.zeros((self.k, *h.shape[1:]))
        for s in range(0, self.Z.shape[0], step):  # blocks of rows: memory bounded by the block
            zh += self.Z[s:s + step].T.astype(np.float64) @ h[s:s + step]
        return np.asarray((zh - self.q * h.sum(axis=0)) / (self.p - self.q))

    def __rmatmul__(self, w: np.ndarray) -> np.ndarray:
        """``w @ B`` (``w`` a vector or rows over the ``m_g`` cells). Only the cells where some row
        of ``w`` is nonzero are read from ``Z`` (a range touches few cells of a group), so the cost
        is ``R x`` (those cells), not ``R x m_g``."""
        w = np.asarray(w, dtype=float)
        used = np.flatnonzero(np.any(w != 0, axis=0) if w.ndim > 1 else w != 0)
        if used.size == self.k:
            zw = self.Z @ w.T  # R (x rows)
        else:
            zw = self.Z[:, used] @ w[..., used].T
        return np.asarray(((zw - self.q * w.sum(axis=-1)) / (self.p - self.q)).T)

    def squared(self, h: np.ndarray) -> np.ndarray:
        """``(B * B) @ h``: with 0/1 entries, ``(Z^T h (1 - 2 q*) + q*^2 sum(h)) / (p* - q*)^2``."""
        h = np.asarray(h, dtype=float)
        return np.asarray((self.Z.T @ h * (1.0 - 2.0 * self.q) + self.q ** 2 * h.sum()) / (self.p - self.q) ** 2)

    def marginal(self, shape: tuple[int, ...], keep: list[int], order: list[int]) -> np.ndarray:
        """The estimator of a marginal of the group table as a dense matrix (``cells x R``): the
        cells of ``keep`` summed over the others, axes in ``order``."""
        W = np.eye(self.k).reshape(*shape, self.k)
        drop = tuple(a for a in range(len(shape)) if a not in keep)
        if drop:
            W = W.sum(axis=drop)
        W = np.transpose(W, [*order, len(keep)]).reshape(-1, self.k)
        return np.asarray(W @ self)


@register
class CALM(GroupedMechanism):
    """Marginals by user groups: one group per attribute set, every value its own bin (CALM)."""

    spec_name = "calm"
    extra = {"sets": None}
    examples = (dict(spec="calm(oracle=krr(eps=1.0),shape=[3,2,2],sets=[[0,1],[1,2]])", eps_ldp=1.0, tight=True),
                dict(spec="calm(oracle=rrba(p=0.5),shape=[2,2])", eps_ldp=math.log(5.0), tight=True),
                dict(spec="calm(oracle=olh(eps=1.0),shape=[3,2,2])", eps_ldp=1.0, tight=True),
                dict(spec="calm(oracle=oue(eps=1.0),shape=[3,2],sets=[[0],[1]])", eps_ldp=1.0, tight=True))

    def _groups(self) -> list[Group]:
        sets = self.settings["sets"]
        combos: list[tuple[int, ...]]
        if sets is None:
            combos = [(0,)] if self.d == 1 else list(itertools.combinations(range(self.d), 2))
        else:
            if not isinstance(sets, (list, tuple)) or not sets:
                raise LocalPrivError("calm: sets needs a list of attribute lists, e.g. sets=[[0,1],[1,2]]")
            combos = []
            for s in sets:
                items = list(s) if isinstance(s, (list, tuple)) else [s]
                try:
                    a = tuple(sorted(int(v) for v in items))
                except (TypeError, ValueError):
                    raise LocalPrivError(f"calm: attribute set {s} is not a list of positions") from None
                if not a or len(set(a)) != len(a) or a[0] < 0 or a[-1] >= self.d:
                    raise LocalPrivError(f"calm: attribute set {list(items)} needs distinct positions in "
                                         f"0..{self.d - 1}")
                if a in combos:
                    raise LocalPrivError(f"calm: attribute set {list(a)} is given twice")
                combos.append(a)
        return [Group(a, tuple(np.arange(self.shape[j] + 1) for j in a)) for a in combos]

    def _spec_settings(self) -> dict[str, Any]:
        return {} if self.settings["sets"] is None else {"sets": [list(g.attrs) for g in self.groups]}


def _branching(name: str, b: Any) -> int:
    try:
        v = int(b)
    except (TypeError, ValueError):
        raise LocalPrivError(f"{name}: branching {b!r} is not an integer") from None
    if not 2 <= v <= 1024:
        raise LocalPrivError(f"{name}: branching {v} is outside 2..1024")
    return v


@register
class HI(GroupedMechanism):
    """Hierarchical intervals on every attribute: one group per (attribute, level)."""

    spec_name = "hi"
    extra = {"branching": 4}
    examples = (dict(spec="hi(oracle=krr(eps=1.0),shape=[5],branching=2)", eps_ldp=1.0, tight=True),
                dict(spec="hi(oracle=krr(eps=1.0),shape=[4,2],branching=2)", eps_ldp=1.0, tight=True))

    def _groups(self) -> list[Group]:
        b = _branching(self.spec_name, self.settings["branching"])
        self.settings["branching"] = b
        out = []
        for j, s in enumerate(self.shape):
            h = hierarchy_height(s, b)
            for lv in range(1, h + 1):
                levels = tuple(lv if i == j else 0 for i in range(self.d))
                out.append(Group((j,), (level_edges(s, b, lv),), levels))
        return out


@register
class HIO(GroupedMechanism):
    """HIO: one group per vector of hierarchy levels, not all 0 (Wang et al., SIGMOD 2019)."""

    spec_name = "hio"
    extra = {"branching": 4}
    examples = (dict(spec="hio(oracle=krr(eps=1.0),shape=[4,2],branching=2)", eps_ldp=1.0, tight=True),
                dict(spec="hio(oracle=oue(eps=1.0),shape=[4,2],branching=2)", eps_ldp=1.0, tight=True),
                dict(spec="hio(oracle=olh(eps=1.0),shape=[4,2],branching=2)", eps_ldp=1.0, tight=True))

    def _groups(self) -> list[Group]:
        b = _branching(self.spec_name, self.settings["branching"])
        self.settings["branching"] = b
        heights = [hierarchy_height(s, b) for s in self.shape]
        count = math.prod(h + 1 for h in heights) - 1
        if count > MAX_GROUPS:
            raise LocalPrivError(f"hio: {count:,} level vectors is above the limit of {MAX_GROUPS} groups; "
                                 "use a larger branching or fewer attributes")
        out = []
        for levels in itertools.product(*(range(h + 1) for h in heights)):
            if not any(levels):
                continue
            attrs = tuple(j for j, lv in enumerate(levels) if lv > 0)
            out.append(Group(attrs, tuple(level_edges(self.shape[j], b, levels[j]) for j in attrs),
                             tuple(levels)))
        return out


@register
class HDG(GroupedMechanism):
    """HDG-style grids: ``g1`` bins per attribute and ``g2 x g2`` per pair (Yang et al., VLDB 2021)."""

    spec_name = "hdg"
    extra = {"g1": 8, "g2": 4}
    examples = (dict(spec="hdg(oracle=krr(eps=1.0),shape=[4,3],g1=4,g2=2)", eps_ldp=1.0, tight=True),)

    def _groups(self) -> list[Group]:
        gs = []
        for key in ("g1", "g2"):
            try:
                v = int(self.settings[key])
            except (TypeError, ValueError):
                raise LocalPrivError(f"hdg: {key} {self.settings[key]!r} is not an integer") from None
            if not 2 <= v <= 1024:
                raise LocalPrivError(f"hdg: {key} {v} is outside 2..1024")
            self.settings[key] = v
            gs.append(v)
        out = [Group((j,), (grid_edges(s, gs[0]),)) for j, s in enumerate(self.shape)]
        out += [Group((i, j), (grid_edges(self.shape[i], gs[1]), grid_edges(self.shape[j], gs[1])))
                for i, j in itertools.combinations(range(self.d), 2)]
        return out
