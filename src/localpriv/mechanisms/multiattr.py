"""Multi-attribute protocols on a product domain: SPL, SMP, RS+FD and RS+RFD.

A user holds ``d`` values ``x = (x_1, ..., x_d)`` (a joint cell of a
:class:`~localpriv.domains.product.ProductDomain` with sizes ``k_1, ..., k_d``) and releases ONE
report about all of them. Each protocol is parametrized by a frequency oracle per attribute (any
registered mechanism with index reports and a channel ``C_j``, ``k_j x n_j``), written as a spec:

* ``spl(oracle=krr(eps=1.0),shape=[3,2,4])`` -- *Split*: every attribute reported with the oracle
  at ``eps/d`` (a single oracle spec is the whole budget and is split; a list
  ``oracle=[krr(eps=0.5),oue(eps=0.5)]`` is used as written). Report: the tuple
  ``(z_1, ..., z_d)``, flat in the row-major product ``n_1 x ... x n_d``.
* ``smp(oracle=krr(eps=1.0),shape=[..])`` -- *Sampling*: one attribute ``j`` uniform, reported with
  the oracle at ``eps``; the report says which (Arcolezi et al., CIKM 2021, section 3). Report:
  ``offset_j + z_j`` in ``n_1 + ... + n_d`` outputs.
* ``rsfd(oracle=krr(eps=1.0),shape=[..])`` -- *Random Sampling plus Fake Data* (Arcolezi et al.,
  CIKM 2021): attribute ``j`` uniform, reported with the oracle at the amplified
  ``eps' = ln(d (e^eps - 1) + 1)``; every other attribute gets fake data, uniform on its domain
  (k-RR oracles: the fake value itself; other oracles: the oracle applied to a uniform value,
  the "-r" variants). The report does not say which attribute is true. Report: ``(z_1, ...,
  z_d)`` flat in ``n_1 x ... x n_d``.
* ``rsrfd(oracle=krr(eps=1.0),prior=[[..],[..]],shape=[..])`` -- *RS+RFD* (Arcolezi et al., VLDB
  2023): as RS+FD with fake data drawn from a prior ``pi_j`` per attribute (positive entries).

A positional first argument is the oracle: ``smp(krr(eps=1.0))`` reads as ``smp(oracle=krr(eps=1.0))``;
``shape`` comes from the product domain when one is given.

**The report's channel** (``F_j`` the law of attribute ``j``'s fake output, ``pi_j`` or
``pi_j C_j``)::

    SPL     M[x, z]      = prod_j C_j[x_j, z_j]
    SMP     M[x, (j, z)] = C_j[x_j, z] / d
    RS+FD   M[x, z]      = (1/d) sum_j C_j[x_j, z_j] prod_{i != j} F_i(z_i)

**Levels computed from the channel** (whole report, any two tuples ``x, x'``):
SPL ``sum_j eps_j`` (a product channel: its log-ratio is a sum of independent maxima, so the
split ``eps/d`` composes to ``eps`` exactly); SMP ``max_j eps_j`` (the sampled attribute is
public, so sampling does not amplify); RS+FD/RS+RFD: with ``R_j[x_j, z] = C_j[x_j, z] / F_j(z)``,
``M[x, z] = prod_i F_i(z_i) (1/d) sum_j R_j[x_j, z_j]``, so

    eps = max_z log( sum_j max_x R_j[x, z_j] / sum_j min_x R_j[x, z_j] ),

a ratio of separable sums maximized exactly by Dinkelbach's iteration. For k-RR with uniform fake
data this is ``eps'`` itself (tuples differing in every attribute), above the papers' ``eps``.
The papers' ``eps`` is the level between tuples that differ in ONE attribute
(:meth:`MultiAttributeMechanism.epsilon_attribute`), which for RS+FD with k-RR equals
``ln((d - 1 + e^eps') / d) = eps``.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.likelihood.product import AttributeMixtureBlock, KroneckerBlock
from localpriv.mechanisms.base import Mechanism, format_spec, parse, register, split_spec_args
from localpriv.mechanisms.krr import KRR
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.validation import LocalPrivError, check_rng

if TYPE_CHECKING:
    from localpriv.domains.base import Domain

__all__ = ["MultiAttributeMechanism", "SPL", "SMP", "RSFD", "RSRFD", "MAX_ATTRIBUTES", "MAX_OUTPUT_CELLS",
           "amplified_epsilon"]

#: The most attributes a protocol takes.
MAX_ATTRIBUTES = 32
#: The most joint inputs and the most report values (product of the oracles' outputs) a protocol has.
MAX_OUTPUT_CELLS = 1_000_000


def amplified_epsilon(eps: float, d: int) -> float:
    """``eps' = ln(d (e^eps - 1) + 1)``: the oracle's level in RS+FD/RS+RFD for a target ``eps``
    over ``d`` attributes (Arcolezi et al., CIKM 2021, Theorem 1), computed in log space."""
    return float(eps + math.log(d) + math.log1p(-math.exp(-eps)) if eps > 30
                 else math.log(d * math.expm1(eps) + 1.0))


def _oracle_specs(oracle: object, d: int) -> list[str]:
    if isinstance(oracle, (list, tuple)):
        items = [str(o) for o in oracle]
    else:
        text = str(oracle).strip()
        if text.startswith("[") and text.endswith("]"):
            items = [t.strip() for t in split_spec_args(text[1:-1])]
        else:
            items = [text]
    if len(items) == 1:
        items = items * d
    if len(items) != d:
        raise LocalPrivError(f"multi-attribute protocol: {len(items)} oracles for {d} attributes")
    return items


def product_spec_params(name: str, params: dict[str, Any], domain: Domain | None,
                        accepted: Sequence[str], listed: Sequence[str] | None = None) -> dict[str, Any]:
    """Spec parameters of a protocol over a product domain, checked: the oracle (given by name or
    as the first positional argument, once), ``shape`` (from a product domain when left out) and the
    protocol's own ``accepted`` names (the refusal lists ``listed`` when given: names accepted here
    but refused later with a more precise message are left out); anything else is refused in one line."""
    params = dict(params)
    if "_0" in params:
        if "oracle" in params:
            raise LocalPrivError(f"{name}: the oracle is given twice")
        params["oracle"] = params.pop("_0")
    unknown = set(params) - {"oracle", "shape", *accepted}
    if unknown:
        raise LocalPrivError(f"{name}: unknown parameter(s) {', '.join(sorted(unknown))}; "
                             f"accepted: {', '.join(['oracle', 'shape', *(accepted if listed is None else listed)])}")
    if "shape" not in params:
        shape = getattr(domain, "shape", None)
        if shape is None:
            raise LocalPrivError(f"{name}: give shape=[k_1,...,k_d] or a product domain")
        params["shape"] = list(shape)
    if "oracle" not in params:
        raise LocalPrivError(f"{name}: missing the oracle, e.g. {name}(krr(eps=1.0))")
    return params


def spec_with_oracle(name: str, params: dict[str, Any]) -> str:
    """The spec string ``name(oracle=...,rest)``: the oracle's own spec verbatim, the rest formatted."""
    params = dict(params)
    oracle = str(params.pop("oracle"))
    rest = format_spec(name, params)
    return f"{name}(oracle={oracle},{rest[len(name) + 1:]}"


class MultiAttributeMechanism(Mechanism):
    """Base of the protocols: ``d`` attributes of sizes ``shape``, one oracle each.

    Inputs are flat joint cells (row-major over ``shape``); reports are one ``int64`` each."""

    kind: ClassVar[str] = ""
    #: the first spec argument may be the oracle, by position: ``smp(krr(eps=1.0))``
    positional_spec: ClassVar[bool] = True
    #: the oracle of the sampled attribute runs at the amplified level (RS+FD, RS+RFD)
    amplify: ClassVar[bool] = False
    #: the sampled attribute is one of ``d``; fake data fill the others
    fake: ClassVar[bool] = False

    def __init__(self, oracle: Any, shape: Sequence[int], prior: Any = None) -> None:
        sizes: list[Any] = list(shape) if isinstance(shape, (list, tuple, np.ndarray)) else [shape]
        shp = [int(s) for s in sizes]
        if not 1 <= len(shp) <= MAX_ATTRIBUTES or any(s < 2 for s in shp):
            raise LocalPrivError(f"{self.spec_name}: shape needs 1..{MAX_ATTRIBUTES} attribute sizes, each >= 2, "
                                 f"got {shp}")
        self.shape = tuple(shp)
        self.d = len(shp)
        self.k = math.prod(shp)
        if self.k > MAX_OUTPUT_CELLS:
            raise LocalPrivError(f"{self.spec_name}: {self.k:,} joint cells is above the limit of {MAX_OUTPUT_CELLS:,}")
        self._oracle_text = oracle
        specs = _oracle_specs(oracle, self.d)
        self.split = (self.kind == "spl" and not isinstance(oracle, (list, tuple))
                      and not str(oracle).strip().startswith("["))
        self.oracles: list[Mechanism] = []
        for j, (spec, size) in enumerate(zip(specs, shp)):
            m = re.match(r"\s*([A-Za-z][\w\-]*)", spec)
            if m is None:
                raise LocalPrivError(f"{self.spec_name}: cannot read oracle {spec!r}")
            from_spec = parse(spec if "k=" in spec else _with_k(spec, size))
            if from_spec.k != size:
                raise LocalPrivError(f"{self.spec_name}: oracle {from_spec} has {from_spec.k} inputs but attribute "
                                     f"{j} has {size}")
            if from_spec.report_kind == "float64" or from_spec.n_outputs is None:
                raise LocalPrivError(f"{self.spec_name}: oracle {from_spec} needs a finite, enumerable output space")
            self.oracles.append(from_spec)
        self.template = [str(o) for o in self.oracles]
        self.runs = [self._run_oracle(o) for o in self.oracles]
        self.out_sizes = tuple(int(o.n_outputs or 0) for o in self.runs)
        n_out = sum(self.out_sizes) if self.kind == "smp" else math.prod(self.out_sizes)
        if n_out > MAX_OUTPUT_CELLS:
            raise LocalPrivError(f"{self.spec_name}: {n_out:,} report values is above the limit of "
                                 f"{MAX_OUTPUT_CELLS:,}")
        self._n_out = n_out
        self.channels = []
        for o in self.runs:
            check_dense_size(o.k, o.n_outputs or 0, f"{o} channel")
            self.channels.append(np.asarray(o.channel(), dtype=float))
        self.prior = self._prior(prior)
        self.fake_laws = [p if isinstance(o, KRR) else p @ c for p, o, c in zip(self.prior, self.runs, self.channels)]

    # ---- construction ---------------------------------------------------------------------
    def _run_oracle(self, oracle: Mechanism) -> Mechanism:
        params = oracle.params()
        if "eps" not in params:
            if self.split or self.amplify:
                raise LocalPrivError(f"{self.spec_name}: oracle {oracle} has no eps to split or amplify")
            return oracle
        eps = float(params["eps"])
        if self.split:
            eps = eps / self.d
        elif self.amplify:
            eps = amplified_epsilon(eps, self.d)
        return type(oracle).from_params({**params, "eps": eps})

    def _prior(self, prior: Any) -> list[np.ndarray]:
        if prior is None:
            return [np.full(s, 1.0 / s) for s in self.shape]
        if self.kind != "rsrfd":
            raise LocalPrivError(f"{self.spec_name}: unknown parameter prior (only rsrfd takes one)")
        rows = list(prior) if isinstance(prior, (list, tuple)) else None
        if rows is None or len(rows) != self.d:
            raise LocalPrivError(f"{self.spec_name}: prior needs one list of probabilities per attribute ({self.d})")
        out = []
        for j, (row, s) in enumerate(zip(rows, self.shape)):
            p = np.asarray(row, dtype=float).reshape(-1)
            if p.size != s or not np.all(np.isfinite(p)) or np.any(p <= 0):
                raise LocalPrivError(f"{self.spec_name}: prior of attribute {j} needs {s} positive numbers")
            out.append(p / p.sum())
        return out

    @classmethod
    def from_params(cls, params: dict[str, Any], domain: Domain | None = None) -> Mechanism:
        """Build from spec parameters; ``shape`` comes from a product domain when left out."""
        params = product_spec_params(cls.spec_name, params, domain, ["prior"],
                                     listed=["prior"] if cls.kind == "rsrfd" else [])
        return cls(**params)

    def params(self) -> dict[str, Any]:
        text = self._oracle_text
        oracle = ("[" + ",".join(str(o) for o in text) + "]") if isinstance(text, (list, tuple)) else str(text)
        out: dict[str, Any] = {"oracle": oracle, "shape": list(self.shape)}
        if self.kind == "rsrfd":
            out["prior"] = [p.tolist() for p in self.prior]
        return out

    def __str__(self) -> str:
        return spec_with_oracle(self.spec_name, self.params())

    # ---- outputs ----------------------------------------------------------------------------
    @property
    def n_outputs(self) -> int:
        return self._n_out

    def _sample_parts(self, x: ArrayLike, rng: np.random.Generator | int) -> tuple[np.ndarray, np.ndarray]:
        """``(z, j)``: the per-attribute report values (``n x d``) and the sampled attribute
        (``-1`` for SPL)."""
        flat = self._check_inputs(x)
        rng = check_rng(rng)
        codes = np.stack(np.unravel_index(flat, self.shape), axis=1)
        n = flat.size
        z = np.zeros((n, self.d), dtype=np.int64)
        if self.kind == "spl":
            for j, o in enumerate(self.runs):  # over attributes, not users
                z[:, j] = o.output_index(o.sample(codes[:, j], rng))
            return z, np.full(n, -1, dtype=np.int64)
        att = rng.integers(0, self.d, size=n)
        for j, o in enumerate(self.runs):
            sel = np.flatnonzero(att == j)
            if sel.size:
                z[sel, j] = o.output_index(o.sample(codes[sel, j], rng))
            if self.fake:
                rest = np.flatnonzero(att != j)
                if rest.size:
                    vals = rng.choice(self.shape[j], size=rest.size, p=self.prior[j])
                    z[rest, j] = vals if isinstance(o, KRR) else o.output_index(o.sample(vals, rng))
        return z, att

    def sample_with_attribute(self, x: ArrayLike, rng: np.random.Generator | int) -> tuple[np.ndarray, np.ndarray]:
        """Reports and, for SMP/RS+FD/RS+RFD, the attribute each user sampled (``-1`` for SPL):
        what a test or an attack evaluation needs; the attribute is never part of an RS+FD report."""
        z, att = self._sample_parts(x, rng)
        return self.encode_parts(z, att), att

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """One ``int64`` report per user (vectorized per attribute; see the module docstring)."""
        return self.sample_with_attribute(x, rng)[0]

    def encode_parts(self, z: np.ndarray, att: np.ndarray) -> np.ndarray:
        """Flat reports from per-attribute report values ``z`` (and the attribute, for SMP)."""
        if self.kind == "smp":
            offsets = np.concatenate([[0], np.cumsum(self.out_sizes)[:-1]]).astype(np.int64)
            return offsets[att] + z[np.arange(att.size), att]
        return np.ravel_multi_index(tuple(z.T), self.out_sizes).astype(np.int64)

    def decode_reports(self, reports: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``(z, j)`` of flat reports: per-attribute values (``n x d``; for SMP only column ``j`` is
        meaningful) and the reported attribute (SMP; ``-1`` otherwise)."""
        r = self.output_index(reports).reshape(-1)
        if self.kind == "smp":
            ends = np.cumsum(self.out_sizes)
            att = np.searchsorted(ends, r, side="right")
            starts = ends - np.asarray(self.out_sizes)
            z = np.zeros((r.size, self.d), dtype=np.int64)
            z[np.arange(r.size), att] = r - starts[att]
            return z, att.astype(np.int64)
        return np.stack(np.unravel_index(r, self.out_sizes), axis=1).astype(np.int64), np.full(r.size, -1, np.int64)

    # ---- channel and likelihood -------------------------------------------------------------
    def _tiled(self, j: int) -> np.ndarray:
        return np.tile(self.fake_laws[j][None, :], (self.shape[j], 1))

    def channel(self) -> np.ndarray:
        """The dense ``K x |Z|`` channel of the whole report (small instances; the dense cap applies)."""
        check_dense_size(self.k, self._n_out, f"{self} channel")
        if self.kind == "spl":
            out = np.ones((1, 1))
            for c in self.channels:
                out = np.kron(out, c)
            return out
        codes = np.stack(np.unravel_index(np.arange(self.k), self.shape), axis=1)
        if self.kind == "smp":
            return np.concatenate([c[codes[:, j]] / self.d for j, c in enumerate(self.channels)], axis=1)
        total = np.zeros((self.k, self._n_out))
        for j in range(self.d):
            term = np.ones((1, 1))
            for i in range(self.d):
                term = np.kron(term, self.channels[i] if i == j else self._tiled(i))
            total += term
        return total / self.d

    def likelihood_block(self, reports: ArrayLike, counts: np.ndarray) -> LikelihoodBlock:
        """Structured block: :class:`~localpriv.likelihood.product.KroneckerBlock` for SPL,
        :class:`~localpriv.likelihood.product.AttributeMixtureBlock` for the sampling protocols,
        ``G[x, r] = (1/d) sum_j A_j[x_j, r]`` with ``A_j[:, r] = C_j[:, z_j] [j = j_r]`` (SMP) or
        ``C_j[:, z_j] prod_{i != j} F_i(z_i)`` (RS+FD, RS+RFD)."""
        r = self.output_index(reports).reshape(-1)
        c = np.asarray(counts, dtype=float)
        if self.kind == "spl":
            return KroneckerBlock(self.channels, r, c)
        z, att = self.decode_reports(r)
        mats = []
        for j in range(self.d):
            check_dense_size(self.shape[j], r.size, f"{self} likelihood of {r.size} reports")
            a = self.channels[j][:, z[:, j]]
            if self.kind == "smp":
                a = a * (att == j)[None, :]
            else:
                others = np.ones(r.size)
                for i in range(self.d):
                    if i != j:
                        others *= self.fake_laws[i][z[:, i]]
                a = a * others[None, :]
            mats.append(a)
        return AttributeMixtureBlock(self.shape, mats, 1.0 / self.d, c)

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        r = self.output_index(reports).reshape(-1)
        check_dense_size(self.k, r.size, f"{self} likelihood of {r.size} reports")
        return self.likelihood_block(r, np.ones(r.size)).dense()

    # ---- privacy ----------------------------------------------------------------------------
    def _ratios(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per attribute, ``max_x R_j[x, z]`` and ``min_x R_j[x, z]`` with ``R_j = C_j / F_j``."""
        hi = [c.max(axis=0) / f for c, f in zip(self.channels, self.fake_laws)]
        lo = [c.min(axis=0) / f for c, f in zip(self.channels, self.fake_laws)]
        return hi, lo

    def epsilon_ldp(self) -> float:
        """The level of the whole report between ANY two tuples, from the channel's structure
        (module docstring): SPL ``sum_j eps_j``, SMP ``max_j eps_j``, RS+FD/RS+RFD the exact
        maximum of a ratio of separable sums (Dinkelbach's iteration over the report values)."""
        levels = [o.epsilon_ldp() for o in self.runs]
        if self.kind == "spl":
            return checked_epsilon(float(sum(levels)), str(self))
        if self.kind == "smp":
            return checked_epsilon(float(max(levels)), str(self))
        hi, lo = self._ratios()
        if any(float(b.min()) <= 0.0 for b in lo):
            # a zero channel entry (e^-eps underflowed): sum a / sum b <= max_j max_z a_j / b_j, and
            # every oracle's own level is that per-attribute maximum, computed from its structure
            return checked_epsilon(float(max(levels)), str(self))
        lam = float(sum(h[0] for h in hi) / sum(b[0] for b in lo))
        for _ in range(200):  # Dinkelbach: strictly increasing, finitely many choices
            picks = [int(np.argmax(h - lam * b)) for h, b in zip(hi, lo)]
            new = float(sum(h[p] for h, p in zip(hi, picks)) / sum(b[p] for b, p in zip(lo, picks)))
            if new <= lam * (1 + 1e-15):
                break
            lam = new
        return checked_epsilon(math.log(lam), str(self))

    def epsilon_attribute(self) -> float:
        """The level between tuples that differ in ONE attribute (the papers' claim for RS+FD):
        SPL ``max_j eps_j``, SMP ``max_j eps_j``; RS+FD/RS+RFD
        ``max_j max_z log((S_j + max_x R_j[x, z]) / (S_j + min_x R_j[x, z]))`` with
        ``S_j = sum_{i != j} min_z min_x R_i[x, z]`` (the other attributes' smallest common part:
        the ratio falls as it grows)."""
        levels = [o.epsilon_ldp() for o in self.runs]
        if self.kind in ("spl", "smp"):
            return checked_epsilon(float(max(levels)), str(self))
        hi, lo = self._ratios()
        if any(float(b.min()) <= 0.0 for b in lo):
            return checked_epsilon(float(max(levels)), str(self))
        floor = [float(b.min()) for b in lo]
        best = 0.0
        for j in range(self.d):
            s = sum(floor) - floor[j]
            best = max(best, float(np.max(np.log((s + hi[j]) / (s + lo[j])))))
        return checked_epsilon(best, str(self))

    # ---- the papers' unbiased marginal estimators --------------------------------------------
    def marginal_frequencies(self, reports: ArrayLike) -> list[np.ndarray]:
        """Unbiased estimates of each attribute's marginal from the reports (not projected).

        With ``h_j`` the empirical law of attribute ``j``'s report values:
        SPL ``f_j C_j = h_j``; SMP the same over the ``n_j`` users who sampled ``j``; RS+FD/RS+RFD
        ``f_j C_j = d h_j - (d - 1) F_j`` (Arcolezi et al., CIKM 2021, Eq. for RS+FD[GRR]:
        ``f(v) = (d N_v / n - q' - (d - 1)/k) / (p' - q')``; VLDB 2023 with ``F_j = pi_j``), solved
        by least squares (for k-RR the square channel's inverse, i.e. those closed forms).
        """
        r = self.output_index(reports).reshape(-1)
        return self.marginals_from_counts(np.bincount(r, minlength=self._n_out))

    def marginals_from_counts(self, counts: ArrayLike) -> list[np.ndarray]:
        """:meth:`marginal_frequencies` from the count of each report value (length
        :attr:`n_outputs`): linear in the counts, so its expectation is the true marginals."""
        cnt = np.asarray(counts, dtype=float).reshape(-1)
        if cnt.size != self._n_out or np.any(cnt < 0) or cnt.sum() <= 0:
            raise LocalPrivError(f"{self}: counts need {self._n_out} non-negative numbers, not all zero")
        out = []
        for j, c in enumerate(self.channels):
            if self.kind == "smp":
                start = sum(self.out_sizes[:j])
                part = cnt[start:start + self.out_sizes[j]]
                h = part / max(part.sum(), 1.0)
            else:
                table = cnt.reshape(self.out_sizes)
                h = table.sum(axis=tuple(i for i in range(self.d) if i != j)) / cnt.sum()
                if self.fake:
                    h = self.d * h - (self.d - 1) * self.fake_laws[j]
            out.append(np.linalg.lstsq(c.T, h, rcond=None)[0])
        return out


@register
class SPL(MultiAttributeMechanism):
    """Split: every attribute through its oracle at ``eps / d`` (see the module docstring)."""

    spec_name = "spl"
    kind = "spl"
    examples = (dict(spec="spl(oracle=krr(eps=1.0),shape=[3,2])", eps_ldp=1.0, tight=True),)


@register
class SMP(MultiAttributeMechanism):
    """Sampling: one uniform attribute through its oracle, the attribute public (Arcolezi et al. 2021)."""

    spec_name = "smp"
    kind = "smp"
    examples = (dict(spec="smp(oracle=krr(eps=1.0),shape=[3,2])", eps_ldp=1.0, tight=True),
                dict(spec="smp(oracle=oue(eps=1.0),shape=[3,2])", eps_ldp=1.0, tight=True))


@register
class RSFD(MultiAttributeMechanism):
    """RS+FD: one uniform attribute at the amplified level, uniform fake data elsewhere (Arcolezi et al. 2021)."""

    spec_name = "rsfd"
    kind = "rsfd"
    amplify = True
    fake = True
    examples = (dict(spec="rsfd(oracle=krr(eps=1.0),shape=[3,2])"),)


@register
class RSRFD(MultiAttributeMechanism):
    """RS+RFD: as RS+FD with fake data from a prior per attribute (Arcolezi et al., VLDB 2023)."""

    spec_name = "rsrfd"
    kind = "rsrfd"
    amplify = True
    fake = True
    examples = (dict(spec="rsrfd(oracle=krr(eps=1.0),shape=[3,2],prior=[[0.5,0.3,0.2],[0.6,0.4]])"),)


def _with_k(spec: str, k: int) -> str:
    """``krr(eps=1.0)`` with ``k`` filled: ``krr(k=3,eps=1.0)``."""
    name, _, rest = spec.partition("(")
    body = rest.rsplit(")", 1)[0].strip() if rest else ""
    return f"{name}(k={k}" + (f",{body})" if body else ")")
