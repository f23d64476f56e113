"""The one ``Mechanism`` idea (seed 001 section 3.1).

A mechanism ``M: X -> Z`` is an object with uniform, vectorized methods, whatever its kind:

* ``k`` -- the size of its input domain (inputs are indices ``0..k-1``; see :mod:`localpriv.domains`);
* ``n_outputs`` -- the size of its output space, or ``None`` when outputs are unbounded/continuous;
* ``sample(x, rng)`` -- one report per entry of ``x``, all at once (no Python loop over users);
* ``channel()`` -- the dense ``k x |Z|`` matrix ``M[x, z] = P(z | x)`` where it can be enumerated;
* ``likelihood_block(reports, counts)`` -- the observation model an estimator needs for a set of
  distinct reports and how often each was seen: products ``theta @ G`` and ``G @ w`` with
  ``G[x, j] = P(report_j | x)`` (seed 001 Definition 1). Structured mechanisms override it with
  fast products; the EM engine never needs more;
* ``epsilon_ldp()`` -- its LDP level *computed from its channel* (:mod:`localpriv.mechanisms.privacy`);
* ``str(m)`` -- a spec such as ``krr(k=100,eps=2.0)`` that :func:`localpriv.mechanisms.parse` reads back.

Adding a mechanism means one new class in one file, decorated with :func:`register`.
"""
from __future__ import annotations

import ast
import inspect
import math
import re
import warnings
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import DenseBlock, LikelihoodBlock, check_dense_size, dense_cap_override
from localpriv.mechanisms.privacy import LOG_FLOAT_MAX, geo_epsilon, ldp_epsilon
from localpriv.utils.validation import LocalPrivError, PrivacyWarning, check_int, check_rng, env_int

if TYPE_CHECKING:
    from localpriv.domains.base import Domain

__all__ = [
    "Mechanism",
    "Memoized",
    "register",
    "parse",
    "registered",
    "format_spec",
    "LargeEpsilonWarning",
    "LARGE_LDP_EPS",
    "k_from_bounds",
    "ldp_level_within_budget",
    "geo_level_within_budget",
    "level_budget",
    "spec_size_cap",
    "MAX_SPEC_SIZE",
    "LEVEL_MAX_ENTRIES",
    "collection_size",
]


# --------------------------------------------------------------------------------------------
# Spec strings
# --------------------------------------------------------------------------------------------
_REGISTRY: dict[str, type[Mechanism]] = {}
SPEC_RE = re.compile(r"^\s*([A-Za-z][\w\-]*)\s*(?:\((.*)\))?\s*$", re.S)


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: make ``cls`` reachable from its spec name ``cls.spec_name``."""
    name = getattr(cls, "spec_name", None)
    if not name:
        raise TypeError(f"{cls.__name__} needs a spec_name to be registered")
    _REGISTRY[name] = cls
    return cls


def registered() -> dict[str, type[Mechanism]]:
    """The registered mechanism classes by spec name."""
    return dict(_REGISTRY)




def split_spec_args(body: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    quote: str | None = None
    for ch in body:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def _parse_value(text: str) -> Any:
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text  # bare word, e.g. a file name


def _format_value(v: object) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, np.ndarray):
        return _format_value(v.tolist())
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_format_value(x) for x in v) + "]"
    s = str(v)
    if re.fullmatch(r"[\w\-./:]+", s) and not re.fullmatch(r"[-+]?[\d.]+(e[-+]?\d+)?", s):
        return s
    return repr(s)


def format_spec(name: str, params: dict[str, Any]) -> str:
    """``format_spec("krr", {"k": 100, "eps": 2.0}) == "krr(k=100,eps=2.0)"``."""
    inner = ",".join(f"{k}={_format_value(v)}" for k, v in params.items() if v is not None)
    return f"{name}({inner})"


#: Longest spec accepted from a file (``trusted=False``): inline matrices stay small.
MAX_UNTRUSTED_SPEC = 100_000
#: Parameters that name files: only accepted from the command line or the API (``trusted=True``).
FILE_PARAMETERS = frozenset({"file", "path"})


def parse(spec: str | Mechanism, domain: Domain | None = None, *, trusted: bool = True) -> Mechanism:
    """Build a mechanism from its spec string, e.g. ``parse("krr(k=100,eps=2.0)")``.

    ``domain`` (a :class:`~localpriv.domains.Domain`) lets a spec leave out what the domain
    implies (``krr(eps=2.0)`` on a 100-element domain has ``k=100``); a ``k`` that disagrees with
    the domain is an error.

    ``trusted=False`` is for specs read from report or counts files, which are data, never
    instructions: parameters naming files (``matrix(file=...)``) are refused and the spec's length
    is capped (:data:`MAX_UNTRUSTED_SPEC`), so a file cannot make the process read other files;
    dense channels built later are capped by the mechanisms themselves. A key given twice is an
    error in either mode.

    Without ``k`` and without a domain, the line mechanisms' output bounds imply it:
    ``geometric(eps=0.05,lo=0,hi=99)`` has ``k = 100`` (:meth:`Mechanism.implied_k`).

    Every spec *string* read here (from the command line, the API or a file) has its LDP level
    computed from the mechanism (:meth:`Mechanism.epsilon_ldp`); a level above
    :data:`LARGE_LDP_EPS` (10) draws a :class:`LargeEpsilonWarning` (one line, with the computed
    value). The check is skipped when the level would need a dense channel of more than
    :data:`PARSE_CHECK_MAX_ENTRIES` entries (``localpriv mechanism``/``analyze`` compute it in
    full). Mechanism objects passed in are not checked again.

    Parameters
    ----------
    spec : str or Mechanism
        ``NAME(key=value,...)``; ``localpriv list mechanisms`` names them all.
    domain : Domain, optional
        Fills what the domain implies (``k``).
    trusted : bool
        ``False`` for specs read from files (data, never instructions; see above).

    Returns
    -------
    Mechanism
    """
    if isinstance(spec, Mechanism):
        mech = spec
    else:
        if not isinstance(spec, str):
            raise LocalPrivError(f"a mechanism spec must be a string, got {type(spec).__name__}")
        if not trusted and len(spec) > MAX_UNTRUSTED_SPEC:
            raise LocalPrivError(f"mechanism spec of {len(spec)} characters refused (at most "
                                 f"{MAX_UNTRUSTED_SPEC} from a file)")
        m = SPEC_RE.match(str(spec))
        if not m:
            raise LocalPrivError(f"cannot read mechanism spec {short_spec(spec)}: expected NAME(key=value,...)")
        name, body = m.group(1), m.group(2) or ""
        cls = _REGISTRY.get(name)
        if cls is None:
            raise LocalPrivError(
                f"unknown mechanism {name!r}; known: {', '.join(sorted(_REGISTRY))}"
            )
        params: dict[str, Any] = {}
        for position, part in enumerate(split_spec_args(body)):
            key, eq, val = part.partition("=")
            if position == 0 and getattr(cls, "positional_spec", False) and SPEC_RE.match(part) and "(" in key:
                key, eq, val = "_0", "=", part  # a nested spec given first, by position
            if not eq or not key.strip().isidentifier():
                raise LocalPrivError(f"cannot read argument {part.strip()[:40]!r} of spec {short_spec(spec)}: "
                                 "expected key=value")
            key = key.strip()
            if key in params:
                raise LocalPrivError(f"spec {short_spec(spec)} gives {key} twice")
            if not trusted and key in FILE_PARAMETERS:
                raise LocalPrivError(f"spec {short_spec(spec)} names a file ({key}=...): specs read from "
                                     "files cannot open files; give such a mechanism on the command line")
            params[key] = _parse_value(val)
        _check_param_types(cls, params, spec)
        _check_sizes(cls, params, spec, None if domain is None else int(domain.size))
        try:
            mech = cls.from_params(params, domain)
        except LocalPrivError:
            raise
        except (TypeError, ValueError, ArithmeticError) as exc:  # a parameter of the wrong type
            raise LocalPrivError(f"cannot build {short_spec(spec)}: {exc}") from None
        _check_output_space(mech)
        if domain is None or mech.k == domain.size:
            # from a file, the level behind the warning is computed only within the budget: a spec
            # read from data never costs more, and is not refused for it (building its channel to
            # estimate goes through the dense cap like any other)
            _warn_if_large(mech, None if trusted else _level_or_none(mech))
    if domain is not None and mech.k != domain.size:
        raise LocalPrivError(f"mechanism {mech} has {mech.k} inputs but the domain has {domain.size} elements")
    return mech


# --------------------------------------------------------------------------------------------
# The privacy check of every spec read
# --------------------------------------------------------------------------------------------
#: LDP levels above this draw a :class:`LargeEpsilonWarning` when a spec is read: a report is then
#: up to ``e^10 ~ 22,000`` times more likely under one value than under another.
LARGE_LDP_EPS = 10.0
#: The parse-time check computes the level only when it needs no dense matrix above this many
#: entries (32 MiB); structured mechanisms compute it in O(1) whatever ``k``.
PARSE_CHECK_MAX_ENTRIES = 4_000_000
#: Dense entries the level computation of one spec may build when a spec is admitted (service
#: policy, specs read from files, ``localpriv mechanism``/``analyze``): 16 MiB of float64.
LEVEL_MAX_ENTRIES = 2_000_000


class LargeEpsilonWarning(PrivacyWarning):
    """A mechanism read from a spec whose LDP level, computed from the mechanism, exceeds
    :data:`LARGE_LDP_EPS`. Filter it like any warning, e.g.
    ``warnings.simplefilter("ignore", LargeEpsilonWarning)`` where large levels are intended."""


def ldp_level_if_cheap(mech: Mechanism) -> float | None:
    """``mech.epsilon_ldp()`` when it needs no dense matrix above :data:`PARSE_CHECK_MAX_ENTRIES`
    entries, else ``None`` (also when the level cannot be computed at all)."""
    try:
        with dense_cap_override(PARSE_CHECK_MAX_ENTRIES):
            return float(mech.epsilon_ldp())
    except (LocalPrivError, MemoryError, ArithmeticError, NotImplementedError, TypeError, ValueError):
        return None


def level_budget() -> int:
    """Dense entries the computation of one spec's LDP level may build: ``LOCALPRIV_MAX_LEVEL_ENTRIES``
    if set, else :data:`LEVEL_MAX_ENTRIES`."""
    return env_int("LOCALPRIV_MAX_LEVEL_ENTRIES", LEVEL_MAX_ENTRIES)


def ldp_level_within_budget(mech: Mechanism, entries: int | None = None) -> float:
    """``mech.epsilon_ldp()`` computed with no dense matrix above ``entries`` entries (default
    :func:`level_budget`); a mechanism whose level would need more is refused with a one-line
    :class:`LocalPrivError` before any such matrix is allocated.

    Every structured family computes its level in closed form or in ``O(k)`` from its structure
    (no dense channel), so the budget binds only on mechanisms given by a dense channel (``matrix``,
    ``shokri``, the planar ones, ``exponential`` off the integers).
    """
    return _level_within_budget(mech, "LDP", entries)


def geo_level_within_budget(mech: Mechanism, entries: int | None = None) -> float:
    """``mech.epsilon_geo()`` under the same budget as :func:`ldp_level_within_budget`."""
    return _level_within_budget(mech, "geo", entries)


def _level_within_budget(mech: Mechanism, which: str, entries: int | None) -> float:
    budget = level_budget() if entries is None else int(entries)
    compute = mech.epsilon_ldp if which == "LDP" else mech.epsilon_geo
    try:
        with dense_cap_override(budget):
            return float(compute())
    except LocalPrivError as exc:
        if "limit is" not in str(exc):
            raise
        raise LocalPrivError(f"{short_spec(str(mech))}: computing its {which} level needs a dense matrix above the "
                             f"budget of {budget} entries (environment variable LOCALPRIV_MAX_LEVEL_ENTRIES)") from None
    except MemoryError:
        raise LocalPrivError(f"{short_spec(str(mech))}: out of memory computing its {which} level (budget "
                             f"{budget} entries, LOCALPRIV_MAX_LEVEL_ENTRIES)") from None


#: Largest ``k`` (inputs) and finite output space a spec may ask for; ``LOCALPRIV_MAX_SPEC_SIZE``
#: overrides it.
MAX_SPEC_SIZE = 1_000_000_000
#: Parameters that size a mechanism's input or output space.
_SIZE_PARAMETERS = ("k", "nrows", "ncols", "m", "d", "h", "cohorts", "blocks", "buckets", "omega", "cells")


def spec_size_cap() -> int:
    """The cap on a spec's input and output spaces: ``LOCALPRIV_MAX_SPEC_SIZE`` or :data:`MAX_SPEC_SIZE`."""
    return env_int("LOCALPRIV_MAX_SPEC_SIZE", MAX_SPEC_SIZE, "values")


def _check_param_types(cls: type[Mechanism], params: dict[str, Any], spec: str) -> None:
    """Strings where the constructor expects numbers are refused (``krr(eps='2')``)."""
    sig = inspect.signature(cls.__init__)
    for key, value in params.items():
        p = sig.parameters.get(key)
        if p is None or not isinstance(value, str) or value.strip().lower().lstrip("+-") in ("inf", "nan", "infinity"):
            continue  # not a string here; inf/nan get the constructor's own message
        ann = str(p.annotation)
        if any(t in ann for t in ("str", "Any", "object", "Path", "empty")) or ann == "":
            continue
        raise LocalPrivError(f"spec {short_spec(spec)}: {key} must be a number, got the string {value[:40]!r}")


def _check_sizes(cls: type[Mechanism], params: dict[str, Any], spec: str, domain_size: int | None = None) -> None:
    """Sizes asked for by the spec's parameters are bounded before anything is built (``k`` left
    out of the spec is the domain's size, ``domain_size``, in the products)."""
    cap = spec_size_cap()
    for key in _SIZE_PARAMETERS:
        v = params.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and cap < v < 2 ** 63:  # wider: "must fit in 64 bits"
            raise LocalPrivError(f"spec {short_spec(spec)}: {key}={v} is above the cap of {cap} "
                                 "(environment variable LOCALPRIV_MAX_SPEC_SIZE)")
    rows, cols = params.get("nrows"), params.get("ncols")
    if isinstance(rows, int) and isinstance(cols, int) and rows * cols > cap:
        raise LocalPrivError(f"spec {short_spec(spec)}: nrows x ncols = {rows * cols} cells is above the cap of "
                             f"{cap} (environment variable LOCALPRIV_MAX_SPEC_SIZE)")
    for group in getattr(cls, "size_products", ()):
        fallback = {**getattr(cls, "size_defaults", {}), **({} if domain_size is None else {"k": domain_size})}
        given = [params.get(key, fallback.get(key)) for key in group]
        factors = [v for v in given if isinstance(v, int) and not isinstance(v, bool) and v > 0]
        if len(factors) == len(group):
            total = math.prod(factors)
            if total > cap:
                raise LocalPrivError(f"spec {short_spec(spec)}: {' x '.join(group)} = {total} is above the cap of "
                                     f"{cap} (environment variable LOCALPRIV_MAX_SPEC_SIZE)")
    lo, hi = params.get("lo"), params.get("hi")
    if (isinstance(lo, int) and isinstance(hi, int) and not isinstance(lo, bool) and not isinstance(hi, bool)
            and hi - lo + 1 > cap):
        raise LocalPrivError(f"spec {short_spec(spec)}: lo..hi spans {hi - lo + 1} outputs, above the cap of {cap} "
                             "(environment variable LOCALPRIV_MAX_SPEC_SIZE)")


def collection_size(mechs: Any, what: str) -> int:
    """The outputs a collection of mechanisms spans (a free-will policy, a mechanism column):
    ``sum n_outputs`` (``k`` for mechanisms with unbounded outputs), refused in one line above
    :func:`spec_size_cap`, the cap of one spec's output space: the product "mechanisms x outputs"
    is bounded as one spec's outputs are."""
    cap = spec_size_cap()
    total = 0
    for mech in mechs:
        n = mech.n_outputs
        total += int(mech.k if n is None else n)
        if total > cap:
            raise LocalPrivError(f"{what}: the output spaces of its mechanisms add up to more than the cap of {cap} "
                                 "outputs (environment variable LOCALPRIV_MAX_SPEC_SIZE)")
    return total


def _check_output_space(mech: Mechanism) -> None:
    """``k`` and a finite ``n_outputs`` at most :func:`spec_size_cap`."""
    cap = spec_size_cap()
    n = mech.n_outputs
    for what, size in (("inputs (k)", mech.k), ("outputs", n)):
        if size is not None and size > cap:
            raise LocalPrivError(f"{short_spec(str(mech))}: {size} {what} is above the cap of {cap} "
                                 "(environment variable LOCALPRIV_MAX_SPEC_SIZE)")


def _level_or_none(mech: Mechanism) -> float | None:
    """:func:`ldp_level_within_budget`, or ``None`` where it would cost more than the budget."""
    try:
        return ldp_level_within_budget(mech)
    except LocalPrivError as exc:
        if "LOCALPRIV_MAX_LEVEL_ENTRIES" not in str(exc):
            raise
        return None


def _warn_if_large(mech: Mechanism, level: float | None = None) -> None:
    """One :class:`LargeEpsilonWarning` line when ``mech``'s computed LDP level exceeds 10.

    Levels that are ``inf`` or overflow ``e^eps`` already came with the computation's own
    :class:`PrivacyWarning` (:func:`localpriv.mechanisms.privacy.checked_epsilon`): not repeated."""
    if level is None:
        level = ldp_level_if_cheap(mech)
    if level is None or not LARGE_LDP_EPS < level <= LOG_FLOAT_MAX:
        return
    ratio = math.exp(level)
    warnings.warn(f"{mech}: LDP eps computed from the mechanism is {level:.4g} (> {LARGE_LDP_EPS:g}): one report "
                  f"can be {ratio:.2g} times more likely under one value than under another, so as LDP it barely "
                  "hides the value (a metric mechanism may still protect per unit of distance: localpriv analyze)",
                  LargeEpsilonWarning, stacklevel=2)


def k_from_bounds(name: str, lo: object, hi: object) -> int:
    """``k`` implied by output bounds ``lo=0, hi=K-1`` given without ``k`` or a domain: ``K``.

    ``lo``/``hi`` are in index units (0 = the domain's first element), so only ``lo = 0`` says
    what ``k`` is; any other ``lo`` is a one-line error that says what to write instead."""
    lo, hi = check_int(lo, f"{name}: lo"), check_int(hi, f"{name}: hi")
    if not lo < hi:
        raise LocalPrivError(f"{name}: need lo < hi, got lo={lo}, hi={hi}")
    if lo != 0:
        raise LocalPrivError(f"{name}: lo={lo},hi={hi} without k or a domain: lo and hi are output bounds in "
                             f"index units (0 = the first value), so write lo=0,hi={hi - lo} with --domain "
                             f"{lo}..{hi}, or give k")
    if hi >= 2 ** 62:
        raise LocalPrivError(f"{name}: hi={hi} is too large (k would not fit in 62 bits)")
    return hi + 1


def short_spec(spec: str, limit: int = 80) -> str:
    text = str(spec)
    return repr(text if len(text) <= limit else text[:limit] + "...")


# --------------------------------------------------------------------------------------------
# The mechanism protocol
# --------------------------------------------------------------------------------------------
class Mechanism(ABC):
    """Base class of every privacy mechanism. See the module docstring for the protocol."""

    spec_name: ClassVar[str] = ""
    #: dtype of a report as produced by :meth:`sample` ("int64", "float64" or "binary")
    report_kind: ClassVar[str] = "int64"
    #: groups of size parameters whose PRODUCT sizes what the constructor or the collector builds
    #: (``("k", "cohorts", "h")``: hashes of every candidate in every cohort); ``parse`` refuses a
    #: spec whose product exceeds :func:`spec_size_cap` before building anything, each factor
    #: taken from the spec or, when left out, from ``size_defaults``
    size_products: ClassVar[tuple[tuple[str, ...], ...]] = ()
    #: the constructor's defaults of the size parameters named in ``size_products``
    size_defaults: ClassVar[dict[str, int]] = {}
    #: Small instances the conformance suites test (:mod:`localpriv.testing.mechanisms`), declared by
    #: each registered class itself (not inherited): dicts with ``spec`` and optionally ``domain``
    #: (a domain string, as on the command line) and the levels its paper promises, ``eps_ldp``
    #: (with ``tight=True`` when attained) and ``eps_geo``.
    examples: ClassVar[tuple[dict[str, Any], ...]] = ()

    k: int

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def from_params(cls, params: dict[str, Any], domain: Domain | None = None) -> Mechanism:
        """Build from parsed spec parameters; fills ``k`` from ``domain`` when it is left out."""
        sig = inspect.signature(cls.__init__)
        accepted = set(sig.parameters) - {"self"}
        unknown = set(params) - accepted
        if unknown:
            raise LocalPrivError(
                f"{cls.spec_name}: unknown parameter(s) {', '.join(sorted(unknown))}; "
                f"accepted: {', '.join(p for p in sig.parameters if p != 'self')}"
            )
        params = dict(params)
        if "k" in accepted and "k" not in params:
            implied = domain.size if domain is not None else cls.implied_k(params)
            if implied is not None:
                params["k"] = implied
        if "domain" in accepted and "domain" not in params:
            params["domain"] = domain
        missing = [p.name for p in sig.parameters.values()
                   if p.name != "self" and p.default is inspect.Parameter.empty and p.name not in params]
        if missing:
            raise LocalPrivError(f"{cls.spec_name}: missing parameter(s) {', '.join(missing)}")
        return cls(**params)

    @classmethod
    def implied_k(cls, params: dict[str, Any]) -> int | None:
        """``k`` implied by the other spec parameters when neither ``k`` nor a domain is given
        (``None``: nothing implied). The line mechanisms read it from ``lo``/``hi``."""
        return None

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """The spec parameters, in spec order."""

    def __str__(self) -> str:
        return format_spec(self.spec_name, self.params())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mechanism) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    # ---- the output space -------------------------------------------------------------------
    @property
    def n_outputs(self) -> int | None:
        """Number of outputs (columns of :meth:`channel`), or ``None`` when they cannot be enumerated.

        Every mechanism states it from its structure: the channel is never built to count its
        columns. A subclass must override this property.
        """
        raise NotImplementedError(f"{type(self).__name__} must define n_outputs (from its structure, "
                                  "without building the channel)")

    def output_space_size(self) -> int | None:
        """Size of the (finite) output space even when it is too large to enumerate, e.g.
        ``2**k`` bit vectors; ``None`` when the outputs are unbounded or continuous."""
        return self.n_outputs

    def rank_from_structure(self) -> tuple[int, str] | None:
        """``(rank, reason)``: the exact rank of the channel from its structure in closed form, or
        ``None`` when the mechanism has no such form (then only an SVD can tell)."""
        return None

    # ---- sampling ---------------------------------------------------------------------------
    def _check_inputs(self, x: ArrayLike) -> np.ndarray:
        arr = np.asarray(x)
        if arr.size == 0:
            raise LocalPrivError("no values given: the input is empty")
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)):
                raise LocalPrivError("inputs contain NaN or infinite values")
            if np.any(arr != np.round(arr)):
                raise LocalPrivError("mechanism inputs are domain indices and must be integers")
        elif arr.dtype.kind not in "iub":
            raise LocalPrivError(f"mechanism inputs are domain indices (integers), got dtype {arr.dtype}; "
                                 "encode raw values with a Domain first")
        arr = arr.astype(np.int64, copy=False).ravel()
        if arr.min() < 0 or arr.max() >= self.k:  # two reductions; the mask only for the message
            bad = (arr < 0) | (arr >= self.k)
            vals = np.unique(arr[bad])[:5].tolist()
            raise LocalPrivError(f"input indices outside 0..{self.k - 1}: {vals} ({int(bad.sum())} in all)")
        return arr

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """Obfuscate every input index in ``x``; returns one report per input.

        The default draws from the dense channel by inverse-CDF sampling, vectorized over users.
        """
        x = self._check_inputs(x)
        rng = check_rng(rng)
        n_out = self.n_outputs
        if n_out is not None:
            check_dense_size(self.k, n_out, f"{self} (sampling by the CDF of its channel)")
        cdf = np.cumsum(self.channel(), axis=1)
        u = rng.random(x.size)
        out = (u[:, None] >= cdf[x]).sum(axis=1) if cdf.shape[1] <= 64 else _row_search(cdf, x, u)
        return np.minimum(out, cdf.shape[1] - 1).astype(np.int64)

    # ---- the channel ------------------------------------------------------------------------
    @abstractmethod
    def channel(self) -> np.ndarray:
        """The dense ``k x |Z|`` row-stochastic matrix ``M[x, z] = P(z | x)``."""

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        """Column indices of ``reports`` in :meth:`channel` (identity for index-valued reports)."""
        r = np.asarray(reports)
        n = self.n_outputs
        if r.dtype.kind == "f" and np.any(r != np.round(r)):
            raise LocalPrivError(f"{self}: reports must be integer output indices")
        r = r.astype(np.int64)
        if n is not None:
            bad = (r < 0) | (r >= n)
            if bad.any():
                raise LocalPrivError(f"{self}: reports outside the output space 0..{n - 1}: "
                                     f"{np.unique(r[bad])[:5].tolist()}")
        return r

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """``G[x, j] = P(reports[j] | x)`` as a dense ``k x len(reports)`` matrix."""
        idx = self.output_index(reports)
        check_dense_size(self.k, idx.size, f"{self} likelihood of {idx.size} reports")
        return self.channel()[:, idx]

    def likelihood_block(self, reports: ArrayLike, counts: np.ndarray) -> LikelihoodBlock:
        """The observation model for distinct ``reports`` seen ``counts`` times (dense default)."""
        return DenseBlock(self.likelihood(reports), counts)

    def output_probabilities(self, theta: ArrayLike) -> np.ndarray:
        """The distribution of one report when inputs follow ``theta``: ``theta @ M``."""
        return np.asarray(theta, dtype=float) @ self.channel()

    # ---- privacy ----------------------------------------------------------------------------
    def epsilon_ldp(self) -> float:
        """eps-LDP level computed from the channel (:func:`localpriv.mechanisms.privacy.ldp_epsilon`).

        Structured mechanisms override it with the same maximum computed from the channel's exact
        structure in log space (never building the channel). ``inf``, and levels whose ``e^eps``
        overflows float64, come with a :class:`~localpriv.utils.validation.PrivacyWarning`.
        """
        return ldp_epsilon(self.channel(), what=str(self))

    def epsilon_geo(self, distance: ArrayLike | None = None) -> float:
        """Geo-indistinguishability level computed from the channel and ``distance`` (``k x k``)."""
        if distance is None:
            dom = getattr(self, "domain", None)
            if dom is None:
                raise LocalPrivError(f"{self}: give a distance matrix (the mechanism has no metric domain)")
            check_dense_size(self.k, self.k, f"{self} distance matrix")
            distance = dom.distance_matrix()
        return geo_epsilon(self.channel(), distance, what=str(self))


def _row_search(cdf: np.ndarray, x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling with one binary search per user, grouped by input (vectorized)."""
    out = np.empty(x.size, dtype=np.int64)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], xs.size]
    for s, e in zip(starts, ends):  # one iteration per distinct input value, not per user
        idx = order[s:e]
        out[idx] = np.searchsorted(cdf[xs[s]], u[idx], side="right")
    return out


class _MemoizedMechanism(Protocol):
    """What :class:`Memoized` needs of the mechanism it is mixed into (for the type checker)."""

    def _check_inputs(self, x: ArrayLike) -> np.ndarray: ...

    def memoize(self, x: np.ndarray, rng: np.random.Generator) -> Any: ...

    def instantaneous(self, memo: Any, rng: np.random.Generator) -> np.ndarray: ...


class Memoized:
    """Sampling of mechanisms with a permanent (memoized) part per user and an instantaneous one
    per report: ``memoize(x, rng)`` draws the permanent part, ``instantaneous(memo, rng)`` one
    report from it (the longitudinal oracles, RAPPOR). Put it before :class:`Mechanism` in the
    bases."""

    def sample(self: _MemoizedMechanism, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """One report per user: memoize, then one instantaneous obfuscation."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        return self.instantaneous(self.memoize(x, rng), rng)

    def sample_rounds(self: _MemoizedMechanism, x: ArrayLike, rng: np.random.Generator | int,
                      rounds: int) -> list[np.ndarray]:
        """``rounds`` reports per user from the SAME memoized part (a list, one array per round)."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        memo = self.memoize(x, rng)
        return [self.instantaneous(memo, rng) for _ in range(check_int(rounds, "rounds", minimum=1))]
