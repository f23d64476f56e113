"""Grouped protocols on a product domain: marginals by user groups (CALM), hierarchical intervals,
HIO and HDG-style grids, each ONE report per user.

A user holds a joint cell ``x = (x_1, ..., x_d)`` of a product domain with sizes ``k_1, ..., k_d``.
The protocol has ``G`` public *groups*; a group coarsens the joint: it keeps some attributes, each
cut into intervals of consecutive values (its *bins*), and forgets the others. A user is assigned
one group uniformly at random, computes her group cell ``cell_g(x)`` (the tuple of her bins, flat
row-major) and reports it through the frequency oracle (any registered mechanism with index
reports and an enumerable channel, e.g. ``krr``, ``oue``, ``olh``, ``rrba``), instantiated on the
``m_g`` cells of her group at the oracle's ``eps``. The report is ``offset_g + z``: the group is
part of it.

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
  ``g2 x g2`` grid (``round(linspace(0, k_j, g + 1))`` edges). HDG's response-matrix refinement of
  the grids is not part of the mechanism.

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

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.likelihood.product import GroupedBlock
from localpriv.mechanisms.base import Mechanism, format_spec, parse, register
from localpriv.mechanisms.krr import KRR
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.validation import LocalPrivError, check_rng

if TYPE_CHECKING:
    from localpriv.domains.base import Domain

__all__ = ["Group", "GroupedMechanism", "CALM", "HI", "HIO", "HDG", "MAX_GROUPS", "MAX_GROUPED_OUTPUTS",
           "MAX_GROUPED_ATTRIBUTES", "hierarchy_height", "level_edges", "grid_edges"]

#: the most groups of one protocol
MAX_GROUPS = 1024
#: the most report values (sum over groups of the oracles' outputs) and the most joint cells
MAX_GROUPED_OUTPUTS = 1_000_000
#: the most attributes
MAX_GROUPED_ATTRIBUTES = 16


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
            if o.report_kind == "float64" or o.n_outputs is None:
                raise LocalPrivError(f"{self.spec_name}: oracle {o} needs a finite, enumerable output space")
            self.oracles.append(o)
        self.out_sizes = tuple(int(o.n_outputs or 0) for o in self.oracles)
        total = sum(self.out_sizes)
        if total > MAX_GROUPED_OUTPUTS:
            raise LocalPrivError(f"{self.spec_name}: {total:,} report values is above the limit of "
                                 f"{MAX_GROUPED_OUTPUTS:,}")
        self._n_out = total
        self.offsets = np.concatenate([[0], np.cumsum(self.out_sizes)]).astype(np.int64)
        self.channels: list[np.ndarray] = []
        for o in self.oracles:
            check_dense_size(o.k, o.n_outputs or 0, f"{o} channel")
            self.channels.append(np.asarray(o.channel(), dtype=float))

    def _groups(self) -> list[Group]:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- spec ---------------------------------------------------------------------------------
    @classmethod
    def from_params(cls, params: dict[str, Any], domain: Domain | None = None) -> Mechanism:
        """Build from spec parameters; ``shape`` comes from a product domain when left out."""
        params = dict(params)
        if "_0" in params:
            if "oracle" in params:
                raise LocalPrivError(f"{cls.spec_name}: the oracle is given twice")
            params["oracle"] = params.pop("_0")
        accepted = {"oracle", "shape", *cls.extra}
        unknown = set(params) - accepted
        if unknown:
            raise LocalPrivError(f"{cls.spec_name}: unknown parameter(s) {', '.join(sorted(unknown))}; "
                                 f"accepted: {', '.join(['oracle', 'shape', *cls.extra])}")
        if "shape" not in params:
            shape = getattr(domain, "shape", None)
            if shape is None:
                raise LocalPrivError(f"{cls.spec_name}: give shape=[k_1,...,k_d] or a product domain")
            params["shape"] = list(shape)
        if "oracle" not in params:
            raise LocalPrivError(f"{cls.spec_name}: missing the oracle, e.g. {cls.spec_name}(krr(eps=1.0))")
        return cls(**params)

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"oracle": self.oracle_text, "shape": list(self.shape)}
        out.update(self._spec_settings())
        return out

    def _spec_settings(self) -> dict[str, Any]:
        return dict(self.settings)

    def __str__(self) -> str:
        params = self.params()
        oracle = str(params.pop("oracle"))
        rest = format_spec(self.spec_name, params)
        return f"{self.spec_name}(oracle={oracle},{rest[len(self.spec_name) + 1:]}"

    # ---- outputs ------------------------------------------------------------------------------
    @property
    def n_outputs(self) -> int:
        return self._n_out

    def codes(self, x: np.ndarray) -> np.ndarray:
        """Attribute values (``n x d``) of flat joint cells."""
        return np.stack(np.unravel_index(np.asarray(x, dtype=np.int64), self.shape), axis=1)

    def sample_with_group(self, x: ArrayLike, rng: np.random.Generator | int) -> tuple[np.ndarray, np.ndarray]:
        """Reports and the group of each user (the group is also readable from the report)."""
        flat = self._check_inputs(x)
        rng = check_rng(rng)
        codes = self.codes(flat)
        grp = rng.integers(0, len(self.groups), size=flat.size)
        out = np.empty(flat.size, dtype=np.int64)
        for g, (group, o) in enumerate(zip(self.groups, self.oracles)):  # over groups, not users
            sel = np.flatnonzero(grp == g)
            if sel.size:
                out[sel] = self.offsets[g] + o.output_index(o.sample(group.cell_of(codes[sel]), rng))
        return out, grp.astype(np.int64)

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """One ``int64`` report per user: a uniform group, the oracle on the user's group cell."""
        return self.sample_with_group(x, rng)[0]

    def decode_reports(self, reports: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``(g, z)``: the group of each report and the oracle's output index within it."""
        r = self.output_index(reports).reshape(-1)
        g = np.searchsorted(self.offsets[1:], r, side="right").astype(np.int64)
        return g, r - self.offsets[g]

    # ---- channel and likelihood ---------------------------------------------------------------
    def cellmaps(self) -> list[np.ndarray]:
        """Per group, the group cell of every joint input (``K`` integers each)."""
        check_dense_size(self.k, len(self.groups), f"{self} cell maps")
        codes = self.codes(np.arange(self.k))
        return [g.cell_of(codes) for g in self.groups]

    def channel(self) -> np.ndarray:
        """The dense ``K x |Z|`` channel ``C_g[cell_g(x), z] / G`` (small instances)."""
        check_dense_size(self.k, self._n_out, f"{self} channel")
        return np.concatenate([c[m] for c, m in zip(self.channels, self.cellmaps())], axis=1) / len(self.groups)

    def likelihood_block(self, reports: ArrayLike, counts: np.ndarray) -> LikelihoodBlock:
        """:class:`~localpriv.likelihood.product.GroupedBlock`: ``A_g = C_g[:, z]`` for each group's
        reports, scale ``1/G``."""
        g, z = self.decode_reports(reports)
        positions = [np.flatnonzero(g == i) for i in range(len(self.groups))]
        mats = [c[:, z[p]] for c, p in zip(self.channels, positions)]
        return GroupedBlock(self.cellmaps(), mats, positions, 1.0 / len(self.groups),
                            np.asarray(counts, dtype=float))

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        r = self.output_index(reports).reshape(-1)
        check_dense_size(self.k, r.size, f"{self} likelihood of {r.size} reports")
        return self.likelihood_block(r, np.ones(r.size)).dense()

    # ---- privacy ------------------------------------------------------------------------------
    def epsilon_ldp(self) -> float:
        """``max_g eps_g``: the group is public and every group cell is some input's (module docstring)."""
        levels = {str(o): o.epsilon_ldp() for o in self.oracles}
        return checked_epsilon(float(max(levels.values())), str(self))

    # ---- unbiased group tables ----------------------------------------------------------------
    def group_estimates(self, counts: ArrayLike) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """Per group, ``(f, B, n_g)``: the unbiased estimate of the group table (flat, ``m_g``) from
        the count of each report value, the estimator's matrix ``B`` (``f = B h``, ``h`` the group's
        empirical report law, ``B`` the pseudo-inverse of ``C_g^T``) and the group's report count."""
        cnt = np.asarray(counts, dtype=float).reshape(-1)
        if cnt.size != self._n_out or np.any(cnt < 0) or cnt.sum() <= 0:
            raise LocalPrivError(f"{self}: counts need {self._n_out} non-negative numbers, not all zero")
        out = []
        for g, c in enumerate(self.channels):
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


@register
class CALM(GroupedMechanism):
    """Marginals by user groups: one group per attribute set, every value its own bin (CALM)."""

    spec_name = "calm"
    extra = {"sets": None}
    examples = (dict(spec="calm(oracle=krr(eps=1.0),shape=[3,2,2],sets=[[0,1],[1,2]])", eps_ldp=1.0, tight=True),
                dict(spec="calm(oracle=rrba(p=0.5),shape=[2,2])", eps_ldp=math.log(5.0), tight=True))

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
    examples = (dict(spec="hio(oracle=krr(eps=1.0),shape=[4,2],branching=2)", eps_ldp=1.0, tight=True),)

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
