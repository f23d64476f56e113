"""The conformance suite for mechanisms: many small named checks, one property each.

In the style of scikit-learn's ``parametrize_with_checks``: :func:`mechanism_checks` yields
``(check_name, callable)`` for every check that applies to one mechanism object, each testing one
property of the :class:`~localpriv.mechanisms.Mechanism` protocol and raising a
:class:`ConformanceError` (an :class:`AssertionError`) that names it; :func:`check_mechanism`
runs them all and raises on the first failure. The test suite runs every check on every example
of every registered mechanism (``tests/test_conformance.py``); third parties run them on theirs::

    import numpy as np
    from localpriv.testing.mechanisms import check_mechanism
    check_mechanism(MyMechanism(k=4, eps=1.0), rng=np.random.default_rng(0), eps_ldp=1.0)

The examples (small instances, with the levels their papers promise) are declared once, by each
mechanism class in its ``examples`` attribute; :func:`mechanism_examples` reads them for every
suite that iterates over mechanisms.

Checks are grouped under the names of :data:`CHECKS` (the ``check`` attribute of the error) and
gated by tags (:func:`mechanism_tags`) derived from the mechanism and the promises:

``enumerable``
    ``n_outputs`` is finite and ``k * n_outputs`` at most ``max_channel``: the dense channel is
    built and the channel checks run; otherwise (``structured``) only the checks through the
    likelihood do.
``memoized``
    a permanent part per user (:class:`~localpriv.mechanisms.base.Memoized`): ``sample_rounds``.
``numeric-output``, ``binary-output``
    real-valued or packed-bit reports (``report_kind``).
``portable``
    a sampler of the portable client protocol (:mod:`localpriv.mechanisms.portable`).
``metric-domain``
    the mechanism's ``domain`` is a metric domain of its ``k`` values (a line, an interval, a
    grid): its computed metric level is compared with the dense formula on its distances.
``promised-ldp``, ``promised-geo``
    a promised LDP or metric (geo-indistinguishability) level to compare the computed one with.
``unbiased-mean``
    a classic unbiased mean estimator (``estimate_mean``: the numeric mechanisms).
``unbiased-tables``
    linear unbiased estimators of tables of the joint: ``group_estimates`` (the grouped protocols'
    group tables) or ``marginals_from_counts`` (the multi-attribute protocols' marginals).

Every tolerance is either a rounding bound (``1e-8`` to ``1e-9`` relative) or derived from the
test's distribution at level ``alpha`` (default ``1e-6``, Bonferroni-corrected inside a check);
each check draws from its own generator seeded from the run's seed and its name, so with a fixed
seed the outcome is deterministic and does not depend on which checks run or in which order, and a
correct mechanism fails a statistical check with probability at most about ``alpha``.
"""
from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

import numpy as np

from localpriv.domains import Domain, IntegerDomain
from localpriv.domains.parse import parse_domain
from localpriv.mechanisms import Mechanism, parse, portable, registered
from localpriv.mechanisms.accounting import compose, release_of
from localpriv.mechanisms.base import Memoized
from localpriv.mechanisms.privacy import geo_epsilon, ldp_epsilon
from localpriv.utils.validation import LocalPrivError, PrivacyWarning, check_rng

__all__ = [
    "check_mechanism",
    "mechanism_checks",
    "mechanism_tags",
    "mechanism_examples",
    "Example",
    "CheckContext",
    "ConformanceError",
    "CHECKS",
    "ALL_CHECKS",
]

#: The groups of checks, in the order :func:`check_mechanism` runs them.
CHECKS = ("spec", "shapes", "bad-inputs", "channel", "samples-vs-channel", "samples-vs-likelihood",
          "likelihood-block", "privacy", "mean", "tables")

_KIND_DTYPE = {"int64": (np.int64, 1), "float64": (np.float64, 1), "binary": (np.uint8, 2)}
_EXAMPLE_KEYS = frozenset({"spec", "domain", "eps_ldp", "eps_geo", "tight"})


class ConformanceError(AssertionError):
    """A mechanism failed a conformance check.

    Parameters
    ----------
    check : str
        The group of the check (one of :data:`CHECKS`), kept as ``check``.
    mech : object
        The mechanism under test (its spec appears in the message).
    detail : str
        What went wrong.
    name : str, optional
        The check function's name (e.g. ``check_channel_rows_sum_to_one``), kept as ``name``.
    """

    def __init__(self, check: str, mech: Any, detail: str, name: str | None = None):
        self.check = check
        self.name = name or check
        where = f" ({name})" if name else ""
        super().__init__(f"check_mechanism({mech}): check {check!r} failed{where}: {detail}")


# --------------------------------------------------------------------------------------------
# The examples every suite reads
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Example:
    """One small instance of a mechanism, as its class declares it in ``examples``.

    Attributes
    ----------
    spec : str
        The mechanism's spec, e.g. ``krr(k=4,eps=1.0)``.
    domain : Domain or None
        Passed to ``parse`` (mechanisms whose spec leaves out what the domain implies).
    eps_ldp, eps_geo : float or None
        The levels its paper promises (LDP; metric, per index unit or km).
    tight : bool
        The computed LDP level must equal ``eps_ldp``.
    """

    spec: str
    domain: Domain | None = None
    eps_ldp: float | None = None
    eps_geo: float | None = None
    tight: bool = False

    @property
    def name(self) -> str:
        """The spec name (``krr``)."""
        return self.spec.partition("(")[0]

    @property
    def promise(self) -> dict[str, Any]:
        """The promised levels as keyword arguments of :func:`check_mechanism`."""
        out: dict[str, Any] = {"tight": self.tight}
        if self.eps_ldp is not None:
            out["eps_ldp"] = self.eps_ldp
        if self.eps_geo is not None:
            out["eps_geo"] = self.eps_geo
        return out

    def build(self) -> Mechanism:
        """The mechanism (levels that protect no one are the privacy checks' concern, not a warning)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            return parse(self.spec, self.domain)


def _example(cls: type[Mechanism], entry: dict[str, Any]) -> Example:
    if not isinstance(entry, dict) or "spec" not in entry or set(entry) - _EXAMPLE_KEYS:
        raise LocalPrivError(f"{cls.__name__}.examples: each example is a dict with 'spec' and optionally "
                             f"{sorted(_EXAMPLE_KEYS - {'spec'})}, got {entry!r}")
    ex = Example(spec=str(entry["spec"]),
                 domain=parse_domain(entry["domain"]) if entry.get("domain") is not None else None,
                 eps_ldp=entry.get("eps_ldp"), eps_geo=entry.get("eps_geo"), tight=bool(entry.get("tight", False)))
    if ex.name != cls.spec_name:
        raise LocalPrivError(f"{cls.__name__}.examples: example {ex.spec!r} is not a {cls.spec_name!r} spec")
    return ex


def mechanism_examples(name: str | None = None) -> list[Example]:
    """The examples registered mechanisms declare (their class's own ``examples``, not inherited).

    Parameters
    ----------
    name : str, optional
        One spec name; all registered mechanisms (sorted by name) when left out.

    Returns
    -------
    list of Example
        Empty for a mechanism that declares none (the suites refuse that).
    """
    classes = registered()
    names = sorted(classes) if name is None else [name]
    out: list[Example] = []
    for n in names:
        cls = classes[n]
        out.extend(_example(cls, e) for e in cls.__dict__.get("examples", ()))
    return out


# --------------------------------------------------------------------------------------------
# The context the checks of one mechanism share
# --------------------------------------------------------------------------------------------
@dataclass
class CheckContext:
    """Settings of one conformance run and the samples its checks share (drawn once, lazily).

    Attributes
    ----------
    mech : Mechanism
        The mechanism under test.
    seed : int
        Every check's randomness comes from ``seed`` and the check's name.
    domain : Domain or None
        Passed to ``parse`` for the spec round trip.
    eps_ldp, eps_geo : float or None
        The promised levels.
    tight : bool
        The computed LDP level must equal ``eps_ldp`` (relative ``1e-6``).
    n : int
        Samples per input for the sampling checks.
    alpha : float
        Level of each statistical check.
    max_channel : int
        Largest channel (entries) enumerated.
    """

    mech: Any
    seed: int = 20
    domain: Domain | None = None
    eps_ldp: float | None = None
    eps_geo: float | None = None
    tight: bool = False
    n: int = 20000
    alpha: float = 1e-6
    max_channel: int = 1_000_000
    _cache: dict = field(default_factory=dict, repr=False)

    def rng(self, purpose: str) -> np.random.Generator:
        """A generator for one check, from the run's seed and ``purpose``."""
        return np.random.default_rng([self.seed, zlib.crc32(purpose.encode())])

    @property
    def k(self) -> int:
        """The number of inputs."""
        return int(self.mech.k)

    @cached_property
    def enumerable(self) -> bool:
        """Whether the outputs are enumerated (a dense channel of at most ``max_channel`` entries)."""
        n_out = self.mech.n_outputs
        return n_out is not None and self.k * int(n_out) <= self.max_channel

    @cached_property
    def x(self) -> np.ndarray:
        """``n`` copies of every input, input by input."""
        return np.repeat(np.arange(self.k, dtype=np.int64), self.n)

    @cached_property
    def z(self) -> np.ndarray:
        """One report per entry of :attr:`x` (the samples the checks share)."""
        return self.mech.sample(self.x, self.rng("sample"))

    @cached_property
    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct sampled reports (rows for packed bits) and how often each was seen."""
        z = self.z
        if z.ndim == 2:
            return np.unique(z, axis=0, return_counts=True)
        return np.unique(z, return_counts=True)

    @cached_property
    def channel(self) -> np.ndarray:
        """The dense channel (enumerable mechanisms only)."""
        return np.asarray(self.mech.channel(), dtype=float)

    @cached_property
    def level(self) -> float:
        """The computed ``epsilon_ldp()``."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            return float(self.mech.epsilon_ldp())


def _close(a, b, rtol: float) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return False
    scale = max(float(np.max(np.abs(b), initial=0.0)), 1e-300)
    return bool(np.all(np.abs(a - b) <= rtol * (np.abs(b) + scale)))


def _fail(ctx: CheckContext, group: str, name: str, detail: str):
    raise ConformanceError(group, ctx.mech, detail, name)


# --------------------------------------------------------------------------------------------
# spec
# --------------------------------------------------------------------------------------------
def check_is_a_mechanism(ctx: CheckContext) -> None:
    """A :class:`Mechanism` with a positive integer ``k`` and a known ``report_kind``."""
    mech, name = ctx.mech, "check_is_a_mechanism"
    if not isinstance(mech, Mechanism):
        _fail(ctx, "spec", name, f"not a localpriv Mechanism but {type(mech).__name__}")
    if not isinstance(mech.k, (int, np.integer)) or mech.k < 1:
        _fail(ctx, "spec", name, f"k must be a positive int, got {mech.k!r}")
    if mech.report_kind not in _KIND_DTYPE:
        _fail(ctx, "spec", name, f"report_kind must be one of {sorted(_KIND_DTYPE)}, got {mech.report_kind!r}")


def check_spec_round_trip(ctx: CheckContext) -> None:
    """``parse(str(m), domain)`` gives back an equal mechanism with the same spec and ``k``."""
    spec, name = str(ctx.mech), "check_spec_round_trip"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            back = parse(spec, ctx.domain)
    except LocalPrivError as exc:
        _fail(ctx, "spec", name, f"parse(str(m)) refused its own spec {spec!r}: {exc}")
    if back != ctx.mech or str(back) != spec or back.k != ctx.k:
        _fail(ctx, "spec", name, f"parse({spec!r}) gave {back} (k={back.k})")


# --------------------------------------------------------------------------------------------
# shapes
# --------------------------------------------------------------------------------------------
def check_vectorized_sample_shape(ctx: CheckContext) -> None:
    """``sample`` of ``n k`` inputs returns one report per input, of the dtype ``report_kind`` says."""
    kind = ctx.mech.report_kind
    dtype, ndim = _KIND_DTYPE[kind]
    z, x = ctx.z, ctx.x
    if not isinstance(z, np.ndarray) or z.dtype != dtype or z.ndim != ndim or z.shape[0] != x.size:
        _fail(ctx, "shapes", "check_vectorized_sample_shape",
              f"sample of {x.size} inputs gave {type(z).__name__} {getattr(z, 'dtype', '?')} "
              f"{getattr(z, 'shape', '?')}, expected {np.dtype(dtype)} with {ndim} dimension(s) and "
              f"{x.size} rows (report_kind {kind!r})")


def check_sample_of_one_input(ctx: CheckContext) -> None:
    """One input gives one report of the right dtype."""
    dtype, _ = _KIND_DTYPE[ctx.mech.report_kind]
    one = ctx.mech.sample(np.array([ctx.k - 1]), ctx.rng("one"))
    if not isinstance(one, np.ndarray) or one.shape[0] != 1 or one.dtype != dtype:
        _fail(ctx, "shapes", "check_sample_of_one_input",
              f"sample of one input gave {getattr(one, 'dtype', '?')} {getattr(one, 'shape', '?')}")


def _small_inputs(ctx: CheckContext) -> np.ndarray:
    return ctx.x[:: max(1, ctx.n // 7)][:50]


def check_sample_deterministic_for_a_seed(ctx: CheckContext) -> None:
    """The same seed gives the same reports."""
    small, nan = _small_inputs(ctx), ctx.mech.report_kind == "float64"
    a = ctx.mech.sample(small, ctx.rng("deterministic"))
    b = ctx.mech.sample(small, ctx.rng("deterministic"))
    if not np.array_equal(a, b, equal_nan=nan):
        _fail(ctx, "shapes", "check_sample_deterministic_for_a_seed",
              "two generators of the same seed gave different reports for the same inputs")


def check_sample_accepts_lists_and_narrow_ints(ctx: CheckContext) -> None:
    """Inputs as an ``int64`` array, an ``int32`` array and a list give the same reports."""
    small, nan = _small_inputs(ctx), ctx.mech.report_kind == "float64"
    a = ctx.mech.sample(small, ctx.rng("inputs"))
    b = ctx.mech.sample(small.astype(np.int32).tolist(), ctx.rng("inputs"))
    c = ctx.mech.sample(small.astype(np.int32), ctx.rng("inputs"))
    if not (np.array_equal(a, b, equal_nan=nan) and np.array_equal(a, c, equal_nan=nan)):
        _fail(ctx, "shapes", "check_sample_accepts_lists_and_narrow_ints",
              "the same seed gave different reports for the same inputs as an int64 array, an int32 "
              "array and a list")


# --------------------------------------------------------------------------------------------
# bad inputs
# --------------------------------------------------------------------------------------------
def _refused(ctx: CheckContext, name: str, bad: dict[str, Any], rng_factory=None) -> None:
    for what, value in bad.items():
        rng = ctx.rng("bad") if rng_factory is None else rng_factory()
        try:
            ctx.mech.sample(value, rng)
        except LocalPrivError as exc:
            if "\n" in str(exc) or not str(exc).strip():
                _fail(ctx, "bad-inputs", name, f"{what} was refused with a message that is not one line: {exc!s:.200}")
            continue
        except Exception as exc:  # noqa: BLE001 - the point is which exception
            _fail(ctx, "bad-inputs", name, f"{what} raised {type(exc).__name__} ({exc}), not LocalPrivError")
        _fail(ctx, "bad-inputs", name, f"{what} was accepted")


def check_refuses_values_outside_the_domain_in_one_line(ctx: CheckContext) -> None:
    """Indices ``k`` and ``-1`` raise a one-line :class:`LocalPrivError` (not clipped, not another error)."""
    _refused(ctx, "check_refuses_values_outside_the_domain_in_one_line",
             {"index k": np.asarray([ctx.k]), "index -1": np.asarray([-1])})


def check_refuses_non_integer_inputs(ctx: CheckContext) -> None:
    """A fraction and NaN raise a one-line :class:`LocalPrivError`."""
    _refused(ctx, "check_refuses_non_integer_inputs", {"a fraction": np.asarray([0.5]), "NaN": np.asarray([np.nan])})


def check_refuses_an_empty_input(ctx: CheckContext) -> None:
    """An empty input raises a one-line :class:`LocalPrivError`."""
    _refused(ctx, "check_refuses_an_empty_input", {"an empty input": np.array([], dtype=np.int64)})


def check_refuses_rng_none(ctx: CheckContext) -> None:
    """``rng=None`` is refused: randomness comes from an explicit generator."""
    name = "check_refuses_rng_none"
    try:
        ctx.mech.sample(np.array([0]), None)
    except LocalPrivError:
        return
    except Exception as exc:  # noqa: BLE001
        _fail(ctx, "bad-inputs", name, f"rng=None raised {type(exc).__name__}, not LocalPrivError")
    _fail(ctx, "bad-inputs", name, "rng=None was accepted (randomness must come from an explicit generator)")


# --------------------------------------------------------------------------------------------
# channel (enumerable)
# --------------------------------------------------------------------------------------------
def check_channel_shape(ctx: CheckContext) -> None:
    """``channel()`` is ``k x n_outputs``."""
    shape, want = ctx.channel.shape, (ctx.k, int(ctx.mech.n_outputs))
    if shape != want:
        _fail(ctx, "channel", "check_channel_shape", f"channel() has shape {shape}, expected {want}")


def check_channel_entries_are_probabilities(ctx: CheckContext) -> None:
    """Every entry of ``channel()`` is finite and non-negative."""
    M = ctx.channel
    if not np.all(np.isfinite(M)) or M.min() < 0:
        _fail(ctx, "channel", "check_channel_entries_are_probabilities", "channel() has negative or non-finite entries")


def check_channel_rows_sum_to_one(ctx: CheckContext) -> None:
    """Every row of ``channel()`` sums to 1 (to ``1e-9``)."""
    rows = ctx.channel.sum(axis=1)
    if not np.allclose(rows, 1.0, rtol=0, atol=1e-9):
        _fail(ctx, "channel", "check_channel_rows_sum_to_one",
              f"rows of channel() sum to {rows.min():.12g}..{rows.max():.12g}, not 1")


def check_output_probabilities_match_channel(ctx: CheckContext) -> None:
    """``output_probabilities(theta) = theta @ channel()`` (relative ``1e-9``)."""
    theta = ctx.rng("theta").dirichlet(np.ones(ctx.k))
    if not _close(ctx.mech.output_probabilities(theta), theta @ ctx.channel, 1e-9):
        _fail(ctx, "channel", "check_output_probabilities_match_channel",
              "output_probabilities(theta) differs from theta @ channel()")


def check_samples_in_output_space(ctx: CheckContext) -> None:
    """Every sampled report is one its input can produce: a column ``0..n_outputs-1`` of positive
    probability in its input's row (enumerable), or of positive, finite likelihood under its input."""
    name = "check_samples_in_output_space"
    if ctx.enumerable:
        idx = ctx.mech.output_index(ctx.z)
        n_out = int(ctx.mech.n_outputs)
        if np.any(idx < 0) or np.any(idx >= n_out):
            _fail(ctx, "channel", name, "output_index of sampled reports fell outside 0..n_outputs-1")
        dead = ctx.channel[ctx.x, idx] <= 0
        if dead.any():
            j = int(np.flatnonzero(dead)[0])
            _fail(ctx, "samples-vs-channel", name,
                  f"input {int(ctx.x[j])} produced output {int(idx[j])}, of probability 0")
        return
    for xv in range(ctx.k):
        own = np.asarray(ctx.mech.likelihood(ctx.z[ctx.x == xv]), dtype=float)[xv]
        bad = ~((own > 0) & np.isfinite(own))
        if bad.any():
            _fail(ctx, "samples-vs-likelihood", name,
                  f"a report drawn from input {xv} has likelihood {own[bad][0]!r} under input {xv}")


def check_likelihood_matches_channel(ctx: CheckContext) -> None:
    """``likelihood(reports)`` equals the channel's columns ``output_index(reports)``."""
    uz = ctx.distinct[0]
    cols = ctx.mech.output_index(uz)
    if not _close(ctx.mech.likelihood(uz), ctx.channel[:, cols], 1e-9):
        _fail(ctx, "channel", "check_likelihood_matches_channel",
              "likelihood(reports) differs from the channel's columns output_index(reports)")


# --------------------------------------------------------------------------------------------
# sampling
# --------------------------------------------------------------------------------------------
def check_sample_matches_channel(ctx: CheckContext) -> None:
    """The ``n`` reports of each input follow its channel row: Pearson's chi-square per row (cells
    of expected count below 5 pooled), Bonferroni over the rows at level ``alpha``; a sampled output
    of probability 0 fails at once."""
    from scipy import stats

    name, M, n = "check_sample_matches_channel", ctx.channel, ctx.n
    idx = ctx.mech.output_index(ctx.z)
    n_out = M.shape[1]
    pvals = []
    for xv in range(ctx.k):  # one test per input row (k is small): not a loop over users
        counts = np.bincount(idx[ctx.x == xv], minlength=n_out).astype(float)
        expected = M[xv] * n
        dead = expected <= 0
        if counts[dead].sum() > 0:
            _fail(ctx, "samples-vs-channel", name, f"input {xv} produced an output of probability 0 "
                  f"(columns {np.flatnonzero(dead & (counts > 0))[:5].tolist()})")
        obs_l, exp_l = counts[~dead], expected[~dead]
        small = exp_l < 5
        if small.any():  # pool the cells of small expected count into one
            obs_l = np.r_[obs_l[~small], obs_l[small].sum()]
            exp_l = np.r_[exp_l[~small], exp_l[small].sum()]
        if exp_l.size < 2:
            continue
        exp_l = exp_l * obs_l.sum() / exp_l.sum()  # the row's mass to rounding
        pvals.append((stats.chisquare(obs_l, exp_l).pvalue, xv))
    if pvals:
        p, xv = min(pvals)
        if p * len(pvals) < ctx.alpha:
            _fail(ctx, "samples-vs-channel", name,
                  f"the reports of input {xv} do not follow row {xv} of the channel (chi-square p = {p:.3g}, "
                  f"Bonferroni over {len(pvals)} rows, level {ctx.alpha:g})")


def _ratio_test(ctx: CheckContext, x: np.ndarray, z: np.ndarray, name: str, group: str) -> None:
    """For reports ``z`` drawn from inputs ``x``: ``E[G[x', z] / G[x, z]] = P_x'(support of P_x)``,
    1 where the supports agree, within ``t`` standard errors (normal quantile at
    ``alpha / (2 k^2)``, Bonferroni)."""
    from scipy import stats

    k = ctx.k
    M = ctx.channel if ctx.enumerable else None
    level = ctx.level
    t = float(stats.norm.isf(ctx.alpha / (2.0 * k * k)))
    with np.errstate(divide="ignore", invalid="ignore"):
        for xv in range(k):
            zx = z[x == xv]
            G = np.asarray(ctx.mech.likelihood(zx), dtype=float)
            if G.shape != (k, zx.shape[0]):
                _fail(ctx, group, name, f"likelihood of {zx.shape[0]} reports has shape {G.shape}, "
                      f"expected ({k}, {zx.shape[0]})")
            own = G[xv]
            if np.any(~(own > 0)):
                _fail(ctx, group, name, f"a report drawn from input {xv} has likelihood {own[~(own > 0)][0]!r} "
                      f"under input {xv}")
            ratio = G / own
            mean = ratio.mean(axis=1)
            se = ratio.std(axis=1, ddof=1) / math.sqrt(zx.shape[0])
            if M is not None:  # P_x'(support of P_x): 1 unless some report rules an input out
                expect = M[:, M[xv] > 0].sum(axis=1)
                off = np.abs(mean - expect) > t * se + 1e-9
            elif np.isfinite(level):
                expect = np.ones(k)
                off = np.abs(mean - 1.0) > t * se + 1e-9
            else:  # supports may differ: only P_x'(support of P_x) <= 1 is known
                expect = np.ones(k)
                off = mean - 1.0 > t * se + 1e-9
            if off.any():
                xo = int(np.flatnonzero(off)[0])
                _fail(ctx, group, name, f"reports drawn from input {xv}: mean of G[{xo}, z] / G[{xv}, z] is "
                      f"{mean[xo]:.6g} +- {se[xo]:.2g}, expected {expect[xo]:.6g} (within {t:.2f} standard "
                      "errors): the sampler and the likelihood disagree")


def check_sample_matches_likelihood(ctx: CheckContext) -> None:
    """The sampler and the likelihood agree (every mechanism; the only sampling check where the
    outputs cannot be enumerated): the mean likelihood ratio ``G[x', z] / G[x, z]`` over reports
    drawn from ``x`` is ``sum_z P(z | x') = 1``, within ``t`` standard errors."""
    _ratio_test(ctx, ctx.x, ctx.z, "check_sample_matches_likelihood", "samples-vs-likelihood")


#: reports per input the portable-sampler check draws (scalar pure-Python draws: kept small) ...
PORTABLE_N = 1500
#: ... at most this many Bernoulli draws in all (wide bit vectors get fewer reports, at least 200)
PORTABLE_DRAWS = 60_000


def _portable_n(ctx: CheckContext) -> int:
    mech = ctx.mech
    per_report = 2 * int(getattr(mech, "m", 1)) if mech.spec_name == "rappor" else (
        ctx.k * (2 if isinstance(mech, Memoized) else 1) if mech.report_kind == "binary" else 1)
    return max(200, min(PORTABLE_N, PORTABLE_DRAWS // (ctx.k * per_report)))


def _portable_reports(ctx: CheckContext) -> tuple[np.ndarray, np.ndarray]:
    """``(x, z)``: :data:`PORTABLE_N` reports per input (fewer for wide bit vectors) from the portable sampler
    (:func:`localpriv.mechanisms.portable.sample_portable`) on a ChaCha20 stream seeded from the
    run's seed, converted to the arrays ``sample`` returns (packed-bit rows for bit vectors)."""
    mech = ctx.mech
    x = np.repeat(np.arange(ctx.k, dtype=np.int64), _portable_n(ctx))
    src = portable.ChaCha20Source(f"conformance/{ctx.seed}/{mech}")
    reports = [portable.sample_portable(mech, int(v), src) for v in x]  # scalar by design: the client path
    if mech.report_kind == "binary":
        return x, np.array([np.frombuffer(bytes.fromhex(r), dtype=np.uint8) for r in reports])
    return x, np.asarray(reports, dtype=np.float64 if mech.report_kind == "float64" else np.int64)


def check_portable_sampler_matches_channel(ctx: CheckContext) -> None:
    """(portable) The portable client sampler releases the mechanism's law: :data:`PORTABLE_N`
    reports per input from a ChaCha20 stream follow the channel row (Pearson's chi-square, cells of
    expected count below 5 pooled, Bonferroni over the rows at level ``alpha``) where the outputs
    can be enumerated, else the likelihood-ratio test of :func:`check_sample_matches_likelihood`.
    Power: with 1,500 reports per input a k-RR keep probability off by 0.1 (``krr(k=4,eps=1.0)``
    drawn at ``eps = 1.5``) fails (tested)."""
    name = "check_portable_sampler_matches_channel"
    x, z = _portable_reports(ctx)
    if not ctx.enumerable:
        _ratio_test(ctx, x, z, name, "samples-vs-channel")
        return
    from scipy import stats

    M = ctx.channel
    idx = ctx.mech.output_index(z)
    pvals = []
    for xv in range(ctx.k):  # one test per input row (k is small)
        counts = np.bincount(idx[x == xv], minlength=M.shape[1]).astype(float)
        expected = M[xv] * np.count_nonzero(x == xv)
        dead = expected <= 0
        if counts[dead].sum() > 0:
            _fail(ctx, "samples-vs-channel", name, f"the portable sampler gave input {xv} an output of probability 0")
        obs_l, exp_l = counts[~dead], expected[~dead]
        small = exp_l < 5
        if small.any():
            obs_l = np.r_[obs_l[~small], obs_l[small].sum()]
            exp_l = np.r_[exp_l[~small], exp_l[small].sum()]
        if exp_l.size < 2:
            continue
        pvals.append((stats.chisquare(obs_l, exp_l * obs_l.sum() / exp_l.sum()).pvalue, xv))
    if pvals:
        p, xv = min(pvals)
        if p * len(pvals) < ctx.alpha:
            _fail(ctx, "samples-vs-channel", name,
                  f"the portable reports of input {xv} do not follow row {xv} of the channel (chi-square p = "
                  f"{p:.3g}, Bonferroni over {len(pvals)} rows, level {ctx.alpha:g})")


def check_sample_rounds_share_the_memo(ctx: CheckContext) -> None:
    """(memoized) ``sample_rounds(x, rng, r)`` gives ``r`` arrays of one report per input, the first
    equal to ``sample(x, rng)`` at the same seed; a later round's reports, each drawn from the same
    memoized part, follow the likelihood marginally (the likelihood-ratio test)."""
    name, mech = "check_sample_rounds_share_the_memo", ctx.mech
    small = _small_inputs(ctx)
    rounds = mech.sample_rounds(small, ctx.rng("rounds"), 3)
    first = mech.sample(small, ctx.rng("rounds"))
    if len(rounds) != 3 or any(np.shape(r)[0] != small.size for r in rounds):
        _fail(ctx, "shapes", name, f"sample_rounds of {small.size} inputs, 3 rounds, gave "
              f"{[np.shape(r) for r in rounds]}")
    if not np.array_equal(rounds[0], first, equal_nan=mech.report_kind == "float64"):
        _fail(ctx, "shapes", name, "the first round differs from sample() at the same seed")
    second = mech.sample_rounds(ctx.x, ctx.rng("rounds-many"), 2)[1]
    _ratio_test(ctx, ctx.x, second, name, "samples-vs-likelihood")


# --------------------------------------------------------------------------------------------
# likelihood block
# --------------------------------------------------------------------------------------------
def check_likelihood_block_matches_likelihood(ctx: CheckContext) -> None:
    """On distinct sampled reports, ``likelihood_block(reports, counts)``: ``forward(theta)``,
    ``backward(w)``, ``hessian_diagonal(w)`` (where offered) and ``dense()`` equal ``theta @ G``,
    ``G @ w``, ``(G * G) @ w`` and ``G`` for ``G = likelihood(reports)`` (relative ``1e-8``)."""
    name = "check_likelihood_block_matches_likelihood"
    rng = ctx.rng("block")
    uz, cz = ctx.distinct
    take = np.sort(rng.choice(uz.shape[0], size=min(uz.shape[0], 200), replace=False))
    reports, counts = uz[take], cz[take].astype(float)
    G = np.asarray(ctx.mech.likelihood(reports), dtype=float)
    block = ctx.mech.likelihood_block(reports, counts)
    if block.k != ctx.k or not np.array_equal(np.asarray(block.counts, dtype=float), counts):
        _fail(ctx, "likelihood-block", name, f"block has k={block.k} and counts of size {np.size(block.counts)}")
    theta = rng.dirichlet(np.ones(ctx.k))
    w = rng.random(reports.shape[0])
    if not _close(block.forward(theta), theta @ G, 1e-8):
        _fail(ctx, "likelihood-block", name, "forward(theta) differs from theta @ likelihood(reports)")
    if not _close(block.backward(w), G @ w, 1e-8):
        _fail(ctx, "likelihood-block", name, "backward(w) differs from likelihood(reports) @ w")
    if block.hessian_diagonal is not None and not _close(block.hessian_diagonal(w), (G * G) @ w, 1e-8):
        _fail(ctx, "likelihood-block", name, "hessian_diagonal(w) differs from (G * G) @ w")
    if not _close(block.dense(), G, 1e-8):
        _fail(ctx, "likelihood-block", name, "dense() differs from likelihood(reports)")


# --------------------------------------------------------------------------------------------
# privacy
# --------------------------------------------------------------------------------------------
def _tables_of(mech: Any, theta: np.ndarray) -> list[np.ndarray]:
    """What the table estimators estimate: each group's table (``cellmaps``) or each attribute's marginal."""
    if callable(getattr(mech, "group_estimates", None)):
        return [np.bincount(c, weights=theta, minlength=int(c.max()) + 1) for c in mech.cellmaps()]
    t = theta.reshape(mech.shape)
    return [t.sum(axis=tuple(i for i in range(t.ndim) if i != j)) for j in range(t.ndim)]


def check_unbiased_tables_invert_the_channel(ctx: CheckContext) -> None:
    """(unbiased tables) fed the expected counts ``theta @ channel`` of a random ``theta``, the linear
    estimators of the tables (``group_estimates``, ``marginals_from_counts``) return the tables of
    ``theta`` exactly (absolute ``1e-9``): their expectation is the truth, for every ``theta``."""
    rng = ctx.rng("check_unbiased_tables_invert_the_channel")
    for _ in range(3):
        theta = rng.dirichlet(np.full(ctx.k, 0.7))
        counts = 1e6 * (theta @ ctx.channel)
        if callable(getattr(ctx.mech, "group_estimates", None)):
            got = [np.asarray(f, dtype=float) for f, _, _ in ctx.mech.group_estimates(counts)]
        else:
            got = [np.asarray(f, dtype=float) for f in ctx.mech.marginals_from_counts(counts)]
        want = _tables_of(ctx.mech, theta)
        if len(got) != len(want):
            _fail(ctx, "tables", "check_unbiased_tables_invert_the_channel",
                  f"{len(got)} estimated tables for {len(want)} tables")
        for i, (g, w) in enumerate(zip(got, want)):
            if g.shape != w.shape or float(np.max(np.abs(g - w))) > 1e-9:
                _fail(ctx, "tables", "check_unbiased_tables_invert_the_channel",
                      f"table {i}: the estimate of the expected counts differs from the truth by "
                      f"{float(np.max(np.abs(g - w))) if g.shape == w.shape else 'its shape'}")


def check_epsilon_computed_from_channel(ctx: CheckContext) -> None:
    """``epsilon_ldp()`` (the structural formula) equals ``ldp_epsilon(channel())`` (relative ``1e-9``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        dense = float(ldp_epsilon(ctx.channel))
    level = ctx.level
    if not (level == dense or abs(level - dense) <= 1e-9 * max(1.0, abs(dense))):
        _fail(ctx, "privacy", "check_epsilon_computed_from_channel",
              f"epsilon_ldp() = {level!r} but the dense channel gives {dense!r}")


def check_epsilon_geo_computed_from_channel(ctx: CheckContext) -> None:
    """(metric domain) ``epsilon_geo()`` (a structural formula where the mechanism has one, e.g. the
    planar mechanisms' regrouping by displacement) equals ``geo_epsilon(channel(), d)`` with ``d``
    the domain's distance matrix (relative ``1e-9``)."""
    name = "check_epsilon_geo_computed_from_channel"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        level = float(ctx.mech.epsilon_geo())
        dense = float(geo_epsilon(ctx.channel, ctx.mech.domain.distance_matrix()))
    if not (level == dense or abs(level - dense) <= 1e-9 * max(1.0, abs(dense))):
        _fail(ctx, "privacy", name, f"epsilon_geo() = {level!r} but the dense channel gives {dense!r}")


def check_sampled_likelihood_ratios_within_level(ctx: CheckContext) -> None:
    """No sampled report has a likelihood ratio between two inputs above ``e^epsilon_ldp()`` (an
    empirical audit of the computed level)."""
    level = ctx.level
    Gu = np.asarray(ctx.mech.likelihood(ctx.distinct[0]), dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(Gu)
        spread = np.max(logs, axis=0) - np.min(logs, axis=0)
    worst = float(np.max(spread))
    if worst > level + 1e-9 * max(1.0, abs(level)):
        j = int(np.argmax(spread))
        _fail(ctx, "privacy", "check_sampled_likelihood_ratios_within_level",
              f"a sampled report (distinct report {j}) has likelihood ratio e^{worst:.6g} between two inputs, "
              f"above the computed level {level:.6g}")


def check_unbiased_mean_covers_each_input(ctx: CheckContext) -> None:
    """(unbiased mean) ``estimate_mean`` of the ``n`` reports of each input, on the line ``0..k-1``
    (so the users' mean is the input itself), has an interval at level ``1 - alpha / k`` that
    holds the input: the estimator is unbiased and its interval calibrated, input by input."""
    line = IntegerDomain(0, ctx.k - 1)
    level = 1.0 - ctx.alpha / ctx.k
    for xv in range(ctx.k):
        iv = ctx.mech.estimate_mean(ctx.z[ctx.x == xv], line, level)
        if not iv.lower <= xv <= iv.upper:
            _fail(ctx, "mean", "check_unbiased_mean_covers_each_input",
                  f"the unbiased mean of {ctx.n} reports of input {xv} is {iv.value:.6g} with interval "
                  f"[{iv.lower:.6g}, {iv.upper:.6g}] at level {level:.8g}, which misses {xv}")


#: reports per extreme input drawn by :func:`check_released_bits_carry_no_input`
FLOAT_SAFETY_DRAWS = 200_000


def _bit_events(z: np.ndarray) -> np.ndarray:
    """Event keys of float64 reports: sign, binade (exponent) and the low byte of the mantissa
    (``256`` for the binade as a whole, ``257`` for "low byte non-zero" in it), one row per event
    a report belongs to (three per report)."""
    z = np.asarray(z, dtype=np.float64).reshape(-1)
    bits = z.view(np.uint64)
    sign = (bits >> np.uint64(63)).astype(np.int64)
    expo = ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    low = (bits & np.uint64(0xFF)).astype(np.int64)
    head = (sign << 11 | expo) << 9
    return np.concatenate([head | low, head | 256, head | np.where(low != 0, 257, 258)])


#: the kinds of event of :func:`_release_events` (the first column of an event)
_FLOAT_EVENT, _VALUE_EVENT, _LOW_BYTE_EVENT, _BYTE_EVENT = 0, 1, 2, 3


def _release_events(z: np.ndarray, kind: str) -> list[tuple[int, np.ndarray]]:
    """The events of released reports, as ``(kind of event, keys)`` with one key per (report,
    event) pair: float64 reports, :func:`_bit_events`; index reports, the value and its low byte;
    byte reports (bit vectors, float32 vectors stored as bytes), every (byte position, byte value),
    keyed ``256 position + byte``."""
    z = np.asarray(z)
    if kind == "float64":
        return [(_FLOAT_EVENT, _bit_events(z))]
    if z.ndim == 2:  # byte reports: one event per (position, byte)
        r = z.astype(np.int64)
        return [(_BYTE_EVENT, (r + 256 * np.arange(r.shape[1], dtype=np.int64)).reshape(-1))]
    v = z.astype(np.int64).reshape(-1)
    return [(_VALUE_EVENT, v), (_LOW_BYTE_EVENT, v & 0xFF)]


def _describe_event(kind: int, key: int) -> str:
    if kind == _FLOAT_EVENT:
        what = {256: "the whole binade", 257: "low byte non-zero", 258: "low byte zero"}.get(key & 511,
                                                                                            f"low byte {key & 255}")
        return f"sign {key >> 20}, exponent {(key >> 9) & 0x7FF} ({what})"
    if kind == _VALUE_EVENT:
        return f"report {key}"
    if kind == _LOW_BYTE_EVENT:
        return f"low byte {key} of the report"
    return f"byte {key // 256} equal to {key % 256}"


def check_released_bits_carry_no_input(ctx: CheckContext) -> None:
    """(every mechanism) Events of the released bits obey the computed level: the float-safety check.

    ``FLOAT_SAFETY_DRAWS`` reports are drawn under each of the extreme inputs ``0`` and ``k - 1``
    (fixed seed), and every event of the released bits is counted under both: ``c_0``, ``c_1``.
    The events: for real-valued reports, "sign, binade and low byte of the mantissa" (also
    "binade" and "low byte non-zero in the binade"); for index reports, each value and each low
    byte; for byte reports (bit vectors, or float32 vectors stored as bytes), each byte position
    and value. Under an ``epsilon``-LDP release every event's probabilities satisfy
    ``p_1 >= e^-epsilon p_0``, so given ``m = c_0 + c_1`` the count ``c_1`` is at least
    ``Binomial(m, 1 / (1 + e^epsilon))`` (stochastically); the check fails when
    ``P(Bin(m, pi) <= min(c_0, c_1)) < alpha / E`` (``E`` events seen, Bonferroni), in particular
    for an event seen ``m`` times under one input and never under the other with
    ``(1 - pi)^m < alpha / E``.

    Power: a grid release (values ``g n``, ``g`` a power of two) has the same low bits under
    every input, so passes whatever its level; a float-computed release (``a(t) + b U`` in float64)
    has input-dependent low bytes in every binade where ``ulp < g``. At ``2 x 10^5`` draws per
    input and ``epsilon = 1`` (``pi = 0.27``), an event seen ``m >= 81`` times under one input and
    never under the other fails at ``alpha = 10^-6`` with ``E <= 10^5``; at ``epsilon = 0.01``,
    ``m >= 37``; an event of probability ``p_0`` with ``p_1 = 0`` is missed with probability
    ``(1 - p_0)^(2 x 10^5)``, below ``10^-6`` from ``p_0 = 7 x 10^-5`` on (with the ``m`` above).
    The former float Piecewise, ``pm(k=5,eps=1.0)``, fails it with hundreds of such events and no
    other check (``tests/test_conformance.py``). Index reports drawn by a float inverse CDF have a
    law within ``2^-53`` of their channel per entry, beyond any sampling test: their exactness is
    by construction (integer samplers, docs/decisions/0042-exact-release-of-square-wave.md); here
    they are held to the level event by event.
    """
    from scipy import stats

    level = ctx.level
    if not np.isfinite(level) or ctx.k < 2:
        return
    rng = ctx.rng("float-safety")
    n = FLOAT_SAFETY_DRAWS
    ends = (0, ctx.k - 1)
    kind = ctx.mech.report_kind
    drawn = [_release_events(ctx.mech.sample(np.full(n, x, dtype=np.int64), rng), kind) for x in ends]
    c0, c1, kinds, events = [], [], [], []
    for (ek, k0), (_, k1) in zip(*drawn):  # one kind of event at a time: 1-D integer keys
        lo = min(int(k0.min()), int(k1.min())) if k0.size and k1.size else 0
        span = max(int(k0.max()), int(k1.max())) - lo + 1 if k0.size and k1.size else 0
        if 0 < span <= 1 << 22:  # small keys (bytes, binades): count directly, no sort
            b0, b1 = np.bincount(k0 - lo, minlength=span), np.bincount(k1 - lo, minlength=span)
            allk = np.flatnonzero(b0 + b1)
            c0.append(b0[allk])
            c1.append(b1[allk])
            allk = allk + lo
        else:
            allk, inv = np.unique(np.concatenate([k0, k1]), return_inverse=True)
            inv = np.asarray(inv).reshape(-1)
            c0.append(np.bincount(inv[:k0.size], minlength=allk.size))
            c1.append(np.bincount(inv[k0.size:], minlength=allk.size))
        kinds.append(np.full(allk.size, ek))
        events.append(allk)
    a0, a1, kind_of, key_of = (np.concatenate(v) for v in (c0, c1, kinds, events))
    pi = 1.0 / (1.0 + math.exp(min(level, 700.0)))
    m, low = a0 + a1, np.minimum(a0, a1)
    seen = m > 0
    p = np.ones(m.size)
    p[seen] = stats.binom.cdf(low[seen], m[seen], pi)
    bad = p < ctx.alpha / max(int(seen.sum()), 1)
    if bad.any():
        j = int(np.argmin(p))
        what = _describe_event(int(kind_of[j]), int(key_of[j]))
        _fail(ctx, "privacy", "check_released_bits_carry_no_input",
              f"{int(bad.sum())} events of the released bits split the inputs {ends[0]} and {ends[1]} beyond "
              f"the level {level:.6g}: e.g. {what} seen {int(a0[j])} vs {int(a1[j])} times in {n} reports each "
              f"(p = {p[j]:.2g}); reports computed in floating point leak the input through their low bits "
              "(release them on a grid, drawn by integer samplers)")


def check_epsilon_ldp_within_promise(ctx: CheckContext) -> None:
    """The computed LDP level is at most the promised ``eps_ldp`` (and equal to it when ``tight``)."""
    level, eps = ctx.level, ctx.eps_ldp
    assert eps is not None  # the check runs only with a promised level ("promised-ldp")
    if level > eps * (1 + 1e-9) + 1e-12:
        _fail(ctx, "privacy", "check_epsilon_ldp_within_promise",
              f"computed epsilon_ldp() = {level:.10g} exceeds the promised {eps:g}")
    if ctx.tight and abs(level - eps) > 1e-6 * max(1.0, eps):
        _fail(ctx, "privacy", "check_epsilon_ldp_within_promise",
              f"computed epsilon_ldp() = {level:.10g}, promised exactly {eps:g}")


def check_epsilon_geo_within_promise(ctx: CheckContext) -> None:
    """(metric privacy) The computed ``epsilon_geo()`` is at most the promised ``eps_geo``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        geo = float(ctx.mech.epsilon_geo())
    assert ctx.eps_geo is not None  # the check runs only with a promised level ("promised-geo")
    if geo > ctx.eps_geo * (1 + 1e-9) + 1e-12:
        _fail(ctx, "privacy", "check_epsilon_geo_within_promise",
              f"computed epsilon_geo() = {geo:.10g} exceeds the promised {ctx.eps_geo:g}")


def check_release_records_the_computed_level(ctx: CheckContext) -> None:
    """The ledger's record of ``r`` reports (:func:`~localpriv.mechanisms.accounting.release_of`)
    carries ``epsilon_ldp()`` and the spec, and ``r`` independent reports compose to ``r`` times it."""
    name = "check_release_records_the_computed_level"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        rel = release_of(ctx.mech, 3)
    if rel.epsilon != ctx.level or rel.spec != str(ctx.mech):
        _fail(ctx, "privacy", name, f"release_of gave epsilon {rel.epsilon!r} and spec {rel.spec!r}, the mechanism "
              f"{ctx.level!r} and {str(ctx.mech)!r}")
    total = compose([rel]).epsilon
    if not total <= 3 * ctx.level * (1 + 1e-12):
        _fail(ctx, "privacy", name, f"3 reports compose to {total!r}, above 3 x {ctx.level!r}")


def check_memo_level_bounds_its_reports(ctx: CheckContext) -> None:
    """(memoized) ``epsilon_perm()`` and, where offered, ``epsilon_instantaneous()`` are at least
    ``epsilon_ldp()`` (one report is post-processing of the memo, and a mixture over memos of the
    instantaneous round), and any number of reports recorded under one memo key compose to at
    most ``epsilon_perm()``."""
    name = "check_memo_level_bounds_its_reports"
    perm = getattr(ctx.mech, "epsilon_perm", None)
    if not callable(perm):
        _fail(ctx, "privacy", name, "a memoized mechanism has no epsilon_perm()")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        eps_perm = float(perm())
        rels = [release_of(ctx.mech, r, memo_key="m") for r in (1, 2, 5)]
    if ctx.level > eps_perm * (1 + 1e-9):
        _fail(ctx, "privacy", name, f"epsilon_ldp() = {ctx.level!r} exceeds epsilon_perm() = {eps_perm!r}")
    inst = rels[0].eps_inst
    if inst is not None and ctx.level > inst * (1 + 1e-9):
        _fail(ctx, "privacy", name, f"epsilon_ldp() = {ctx.level!r} exceeds epsilon_instantaneous() = {inst!r}")
    total = compose(rels).epsilon
    if total > eps_perm:
        _fail(ctx, "privacy", name, f"8 reports of one memo compose to {total!r}, above epsilon_perm() {eps_perm!r}")


# --------------------------------------------------------------------------------------------
# the registry of checks
# --------------------------------------------------------------------------------------------
#: Every check: ``(function, group, tags it needs)``, in the order :func:`check_mechanism` runs them.
_TABLE: tuple[tuple[Callable[[CheckContext], None], str, frozenset[str]], ...] = tuple(
    (fn, group, frozenset(needs)) for fn, group, needs in (
        (check_is_a_mechanism, "spec", ()),
        (check_spec_round_trip, "spec", ()),
        (check_vectorized_sample_shape, "shapes", ()),
        (check_sample_accepts_lists_and_narrow_ints, "shapes", ()),
        (check_sample_deterministic_for_a_seed, "shapes", ()),
        (check_sample_of_one_input, "shapes", ()),
        (check_refuses_values_outside_the_domain_in_one_line, "bad-inputs", ()),
        (check_refuses_non_integer_inputs, "bad-inputs", ()),
        (check_refuses_an_empty_input, "bad-inputs", ()),
        (check_refuses_rng_none, "bad-inputs", ()),
        (check_channel_shape, "channel", ("enumerable",)),
        (check_channel_entries_are_probabilities, "channel", ("enumerable",)),
        (check_channel_rows_sum_to_one, "channel", ("enumerable",)),
        (check_output_probabilities_match_channel, "channel", ("enumerable",)),
        (check_samples_in_output_space, "samples-vs-likelihood", ()),
        (check_likelihood_matches_channel, "channel", ("enumerable",)),
        (check_sample_matches_channel, "samples-vs-channel", ("enumerable",)),
        (check_sample_matches_likelihood, "samples-vs-likelihood", ()),
        (check_sample_rounds_share_the_memo, "samples-vs-likelihood", ("memoized",)),
        (check_portable_sampler_matches_channel, "samples-vs-channel", ("portable",)),
        (check_likelihood_block_matches_likelihood, "likelihood-block", ()),
        (check_epsilon_computed_from_channel, "privacy", ("enumerable",)),
        (check_epsilon_geo_computed_from_channel, "privacy", ("enumerable", "metric-domain")),
        (check_sampled_likelihood_ratios_within_level, "privacy", ()),
        (check_released_bits_carry_no_input, "privacy", ()),
        (check_epsilon_ldp_within_promise, "privacy", ("promised-ldp",)),
        (check_epsilon_geo_within_promise, "privacy", ("promised-geo",)),
        (check_release_records_the_computed_level, "privacy", ()),
        (check_memo_level_bounds_its_reports, "privacy", ("memoized",)),
        (check_unbiased_mean_covers_each_input, "mean", ("unbiased-mean",)),
        (check_unbiased_tables_invert_the_channel, "tables", ("enumerable", "unbiased-tables")),
    ))

#: The name of every check, in the order :func:`check_mechanism` runs them.
ALL_CHECKS = tuple(fn.__name__ for fn, _, _ in _TABLE)


def mechanism_tags(ctx: CheckContext) -> frozenset[str]:
    """The tags that gate the checks (module docstring), derived from the mechanism and the promises.

    Parameters
    ----------
    ctx : CheckContext
        The mechanism and the settings of the run.

    Returns
    -------
    frozenset of str
        ``mechanism`` (a :class:`Mechanism` with a positive ``k``, else no other tag), ``enumerable``
        or ``structured``, ``memoized``, ``numeric-output``, ``binary-output``, ``portable``,
        ``metric-domain``, ``promised-ldp``, ``promised-geo``, ``unbiased-mean``, ``unbiased-tables``.
    """
    mech = ctx.mech
    if not isinstance(mech, Mechanism) or not isinstance(mech.k, (int, np.integer)) or mech.k < 1:
        return frozenset()
    tags = {"mechanism", "enumerable" if ctx.enumerable else "structured"}
    if isinstance(mech, Memoized):
        tags.add("memoized")
    tags.add({"float64": "numeric-output", "binary": "binary-output"}.get(mech.report_kind, "index-output"))
    if mech.spec_name in portable.PORTABLE_SAMPLERS or mech.spec_name in portable.PORTABLE_MEMOIZED:
        tags.add("portable")
    dom = getattr(mech, "domain", None)
    if isinstance(dom, Domain) and dom.is_metric and dom.size == mech.k:
        tags.add("metric-domain")
    if ctx.eps_ldp is not None:
        tags.add("promised-ldp")
    if ctx.eps_geo is not None:
        tags.add("promised-geo")
    if callable(getattr(mech, "estimate_mean", None)):
        tags.add("unbiased-mean")
    if callable(getattr(mech, "group_estimates", None)) or callable(getattr(mech, "marginals_from_counts", None)):
        tags.add("unbiased-tables")
    return frozenset(tags)


def _context(mech, rng=None, *, domain=None, eps_ldp=None, eps_geo=None, tight=False, n=20000, alpha=1e-6,
             max_channel=1_000_000) -> CheckContext:
    seed = 20 if rng is None else int(check_rng(rng).integers(2 ** 62))
    return CheckContext(mech, seed=seed, domain=domain, eps_ldp=eps_ldp, eps_geo=eps_geo, tight=tight, n=n,
                        alpha=alpha, max_channel=max_channel)


def _checks(ctx: CheckContext) -> Iterator[tuple[str, str, Callable[[], None]]]:
    tags = mechanism_tags(ctx)
    if "mechanism" not in tags:  # only the check that says why
        yield "check_is_a_mechanism", "spec", partial(check_is_a_mechanism, ctx)
        return
    for fn, group, needs in _TABLE:
        if needs <= tags:
            yield fn.__name__, group, partial(fn, ctx)


def mechanism_checks(mech, rng: np.random.Generator | int | None = None, *, domain: Domain | None = None,
                     eps_ldp: float | None = None, eps_geo: float | None = None, tight: bool = False, n: int = 20000,
                     alpha: float = 1e-6, max_channel: int = 1_000_000) -> Iterator[tuple[str, Callable[[], None]]]:
    """The checks that apply to ``mech``, as ``(check_name, callable)``; each callable raises a
    :class:`ConformanceError` naming its check when the property fails.

    The checks share one context: the samples are drawn once, by the first check that needs them.

    Parameters
    ----------
    mech : Mechanism
        The mechanism under test (small ``k`` keeps it fast: the sampling checks cost ``O(k^2 n)``).
    rng : numpy.random.Generator or int, optional
        One draw from it seeds every check (a fixed seed makes the outcome deterministic); seed 20
        when left out.
    domain : Domain, optional
        Passed to ``parse`` for the spec round trip.
    eps_ldp, eps_geo : float, optional
        The promised levels: the computed ``epsilon_ldp()`` / ``epsilon_geo()`` must not exceed them.
    tight : bool
        The computed LDP level must also equal ``eps_ldp`` (relative ``1e-6``).
    n : int
        Samples per input for the sampling checks.
    alpha : float
        Level of each statistical check (Bonferroni-corrected inside it).
    max_channel : int
        Largest channel (entries) enumerated for the channel checks.

    Yields
    ------
    tuple of (str, callable)
        The check's name (e.g. ``check_channel_rows_sum_to_one``) and a function of no argument.
    """
    ctx = _context(mech, rng, domain=domain, eps_ldp=eps_ldp, eps_geo=eps_geo, tight=tight, n=n, alpha=alpha,
                   max_channel=max_channel)
    for name, _, fn in _checks(ctx):
        yield name, fn


def check_mechanism(mech, rng: np.random.Generator | int | None = None, *, domain: Domain | None = None,
                    eps_ldp: float | None = None, eps_geo: float | None = None, tight: bool = False, n: int = 20000,
                    alpha: float = 1e-6, max_channel: int = 1_000_000) -> tuple[str, ...]:
    """Run every applicable check (:func:`mechanism_checks`) on ``mech``; raise on the first failure.

    Parameters
    ----------
    mech : Mechanism
        The mechanism under test.
    rng : numpy.random.Generator or int, optional
        One draw from it seeds every check; seed 20 when left out.
    domain, eps_ldp, eps_geo, tight, n, alpha, max_channel
        As in :func:`mechanism_checks`.

    Returns
    -------
    tuple of str
        The groups (:data:`CHECKS`) of the checks that ran, in order (``channel`` and
        ``samples-vs-channel`` only where the outputs can be enumerated).

    Raises
    ------
    ConformanceError
        Naming the failing group and check, e.g. ``check_mechanism(krr(k=4,eps=1.0)): check
        'samples-vs-channel' failed (check_sample_matches_channel): ...``.
    """
    ctx = _context(mech, rng, domain=domain, eps_ldp=eps_ldp, eps_geo=eps_geo, tight=tight, n=n, alpha=alpha,
                   max_channel=max_channel)
    ran: list[str] = []
    for _, group, fn in _checks(ctx):
        fn()
        if group not in ran:
            ran.append(group)
    return tuple(g for g in CHECKS if g in ran)
