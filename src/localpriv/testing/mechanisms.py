"""The conformance suite for mechanisms (issue 20, item 6): :func:`check_mechanism`.

In the spirit of scikit-learn's ``check_estimator``: one call runs every check the
:class:`~localpriv.mechanisms.Mechanism` protocol implies, on one mechanism object, and raises one
:class:`ConformanceError` (an :class:`AssertionError`) naming the first check that fails. The test
suite runs it on every registered mechanism (``tests/test_conformance.py``); third parties run it
on theirs::

    import numpy as np
    from localpriv.testing.mechanisms import check_mechanism
    check_mechanism(MyMechanism(k=4, eps=1.0), rng=np.random.default_rng(0), eps_ldp=1.0)

The checks, in order (their names appear in the error):

``spec``
    ``str(m)`` is a spec string and ``parse(str(m), domain)`` gives back an equal mechanism with
    the same spec.
``shapes``
    ``sample`` returns one report per input (``int64`` 1-D, ``float64`` 1-D or ``uint8`` 2-D
    packed bits, as ``report_kind`` says), accepts lists and narrow integer dtypes, and is
    reproducible from the generator's seed.
``bad-inputs``
    indices outside ``0..k-1``, fractions, NaN, an empty input and ``rng=None`` are refused with a
    :class:`~localpriv.LocalPrivError` (not another exception, not silently).
``channel``
    where the outputs can be enumerated (``n_outputs`` finite and ``k * n_outputs`` at most
    ``max_channel``): the channel is ``k x n_outputs``, non-negative, rows sum to 1;
    ``output_probabilities(theta) = theta @ M``; ``likelihood(reports)`` equals the channel's
    columns ``output_index(reports)``.
``samples-vs-channel``
    (finite channels) ``n`` samples per input follow their channel row: Pearson's chi-square per
    row (cells with expected count below 5 pooled), Bonferroni over the rows at level ``alpha``;
    an output of probability 0 that is sampled fails at once.
``samples-vs-likelihood``
    (every mechanism, the only sampling check where outputs cannot be enumerated) for reports
    ``z`` drawn from input ``x``, ``E[G[x', z] / G[x, z]] = sum_z P(z | x') = 1`` for every
    ``x'`` (the supports agree when the level is finite; with densities the same identity holds
    for the integral). The sample mean of each ratio must be within ``t`` standard errors of 1,
    ``t`` the normal quantile at ``alpha / (2 k^2)`` (Bonferroni), the standard error from the
    sample. A report with likelihood 0 under the input that produced it fails at once.
``likelihood-block``
    ``likelihood_block(reports, counts)`` on distinct sampled reports: ``forward(theta)`` and
    ``backward(w)`` equal ``theta @ G`` and ``G @ w`` for the dense ``G = likelihood(reports)``
    (relative ``1e-8``), likewise ``hessian_diagonal(w) = (G * G) @ w`` where offered and
    ``dense()``.
``privacy``
    ``epsilon_ldp()`` equals ``ldp_epsilon(channel())`` where the channel is enumerable (the
    structural formula against the dense one, relative ``1e-9``); no sampled report has a
    likelihood ratio between two inputs above ``e^epsilon_ldp()`` (an empirical audit of the
    computed level); the computed level is at most the promised ``eps_ldp`` (and equal to it with
    ``tight=True``), and ``epsilon_geo()`` at most the promised ``eps_geo``.

Every tolerance is either a rounding bound (``1e-8`` to ``1e-9`` relative) or derived from the
test's distribution at level ``alpha`` (default ``1e-6``); with a fixed ``rng`` seed the result is
deterministic, and a correct mechanism fails with probability at most about ``alpha`` per check.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from localpriv.utils.validation import LocalPrivError, PrivacyWarning, check_rng
from localpriv.mechanisms import Mechanism, parse
from localpriv.mechanisms.privacy import ldp_epsilon

__all__ = ["check_mechanism", "ConformanceError", "CHECKS"]

#: The checks :func:`check_mechanism` runs, in order.
CHECKS = ("spec", "shapes", "bad-inputs", "channel", "samples-vs-channel", "samples-vs-likelihood",
          "likelihood-block", "privacy")

_KIND_DTYPE = {"int64": (np.int64, 1), "float64": (np.float64, 1), "binary": (np.uint8, 2)}


class ConformanceError(AssertionError):
    """A mechanism failed a conformance check; the message names the check and the mechanism."""

    def __init__(self, check: str, mech, detail: str):
        self.check = check
        super().__init__(f"check_mechanism({mech}): check {check!r} failed: {detail}")


def _distinct(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct reports (rows for packed-bit reports) and how often each was seen."""
    if z.ndim == 2:
        u, c = np.unique(z, axis=0, return_counts=True)
    else:
        u, c = np.unique(z, return_counts=True)
    return u, c


def _close(a, b, rtol: float) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        return False
    scale = max(float(np.max(np.abs(b), initial=0.0)), 1e-300)
    return bool(np.all(np.abs(a - b) <= rtol * (np.abs(b) + scale)))


def check_mechanism(mech, rng, *, domain=None, eps_ldp: float | None = None, eps_geo: float | None = None,
                    tight: bool = False, n: int = 20000, alpha: float = 1e-6,
                    max_channel: int = 1_000_000) -> tuple[str, ...]:
    """Run the conformance checks (module docstring) on ``mech``; raise on the first failure.

    Parameters
    ----------
    mech : Mechanism
        The mechanism under test (small ``k`` keeps it fast: the checks cost ``O(k^2 n)``).
    rng : numpy.random.Generator or int
        All randomness; a fixed seed makes the outcome deterministic.
    domain : Domain, optional
        Passed to ``parse`` for the spec round trip (mechanisms whose spec leaves out what the
        domain implies, e.g. planar grids).
    eps_ldp, eps_geo : float, optional
        The promised levels: the computed ``epsilon_ldp()`` / ``epsilon_geo()`` must not exceed
        them (relative ``1e-9``).
    tight : bool
        The computed LDP level must also equal ``eps_ldp`` (relative ``1e-6``).
    n : int
        Samples per input for the sampling checks.
    alpha : float
        Level of each statistical check (Bonferroni-corrected inside it).
    max_channel : int
        Largest channel (entries) enumerated for the channel checks.

    Returns
    -------
    tuple of str
        The names of the checks that ran (``channel`` and ``samples-vs-channel`` only where the
        outputs can be enumerated).

    Raises
    ------
    ConformanceError
        Naming the failing check, e.g. ``check_mechanism(krr(k=4,eps=1.0)): check
        'samples-vs-channel' failed: ...``.
    """
    from scipy import stats


    rng = check_rng(rng)
    ran: list[str] = []

    def fail(check, detail):
        raise ConformanceError(check, mech, detail)

    if not isinstance(mech, Mechanism):
        raise ConformanceError("spec", mech, f"not a localpriv Mechanism but {type(mech).__name__}")
    k = mech.k
    if not isinstance(k, (int, np.integer)) or k < 1:
        fail("spec", f"k must be a positive int, got {k!r}")
    k = int(k)

    # ---- spec -----------------------------------------------------------------------------
    spec = str(mech)
    try:
        with warnings.catch_warnings():  # levels that protect no one are the privacy check's concern
            warnings.simplefilter("ignore", PrivacyWarning)
            back = parse(spec, domain)
    except LocalPrivError as exc:
        fail("spec", f"parse(str(m)) refused its own spec {spec!r}: {exc}")
    if back != mech or str(back) != spec or back.k != k:
        fail("spec", f"parse({spec!r}) gave {back} (k={back.k})")
    ran.append("spec")

    # ---- shapes ---------------------------------------------------------------------------
    kind = mech.report_kind
    if kind not in _KIND_DTYPE:
        fail("shapes", f"report_kind must be one of {sorted(_KIND_DTYPE)}, got {kind!r}")
    dtype, ndim = _KIND_DTYPE[kind]
    x = np.repeat(np.arange(k, dtype=np.int64), n)
    seed = int(rng.integers(2 ** 62))
    z = mech.sample(x, np.random.default_rng(seed))
    if not isinstance(z, np.ndarray) or z.dtype != dtype or z.ndim != ndim or z.shape[0] != x.size:
        fail("shapes", f"sample of {x.size} inputs gave {type(z).__name__} "
                       f"{getattr(z, 'dtype', '?')} {getattr(z, 'shape', '?')}, expected {np.dtype(dtype)} "
                       f"with {ndim} dimension(s) and {x.size} rows (report_kind {kind!r})")
    small = x[:: max(1, n // 7)][:50]
    a = mech.sample(small, np.random.default_rng(seed + 1))
    b = mech.sample(small.astype(np.int32).tolist(), np.random.default_rng(seed + 1))
    c = mech.sample(small.astype(np.int32), np.random.default_rng(seed + 1))
    if not (np.array_equal(a, b, equal_nan=kind == "float64") and np.array_equal(a, c, equal_nan=kind == "float64")):
        fail("shapes", "the same seed gave different reports for the same inputs as an int64 array, "
                       "an int32 array and a list")
    one = mech.sample(np.array([k - 1]), np.random.default_rng(seed))
    if one.shape[0] != 1 or one.dtype != dtype:
        fail("shapes", f"sample of one input gave {one.dtype} {one.shape}")
    ran.append("shapes")

    # ---- bad inputs -----------------------------------------------------------------------
    bad_inputs = {"index k": [k], "index -1": [-1], "a fraction": [0.5], "NaN": [np.nan],
                  "an empty input": np.array([], dtype=np.int64)}
    for what, bad in bad_inputs.items():
        try:
            mech.sample(np.asarray(bad), np.random.default_rng(0))
        except LocalPrivError:
            continue
        except Exception as exc:  # noqa: BLE001 - the point is which exception
            fail("bad-inputs", f"{what} raised {type(exc).__name__} ({exc}), not LocalPrivError")
        fail("bad-inputs", f"{what} was accepted")
    try:
        mech.sample(np.array([0]), None)
    except LocalPrivError:
        pass
    except Exception as exc:  # noqa: BLE001
        fail("bad-inputs", f"rng=None raised {type(exc).__name__}, not LocalPrivError")
    else:
        fail("bad-inputs", "rng=None was accepted (randomness must come from an explicit generator)")
    ran.append("bad-inputs")

    # ---- channel --------------------------------------------------------------------------
    n_out = mech.n_outputs
    M = None
    uz, cz = _distinct(z)
    if n_out is not None and k * int(n_out) <= max_channel:
        M = np.asarray(mech.channel(), dtype=float)
        if M.shape != (k, n_out):
            fail("channel", f"channel() has shape {M.shape}, expected ({k}, {n_out})")
        if not np.all(np.isfinite(M)) or M.min() < 0:
            fail("channel", "channel() has negative or non-finite entries")
        rows = M.sum(axis=1)
        if not np.allclose(rows, 1.0, rtol=0, atol=1e-9):
            fail("channel", f"rows of channel() sum to {rows.min():.12g}..{rows.max():.12g}, not 1")
        theta = rng.dirichlet(np.ones(k))
        if not _close(mech.output_probabilities(theta), theta @ M, 1e-9):
            fail("channel", "output_probabilities(theta) differs from theta @ channel()")
        cols = mech.output_index(uz)
        if np.any(cols < 0) or np.any(cols >= n_out):
            fail("channel", "output_index of sampled reports fell outside 0..n_outputs-1")
        if not _close(mech.likelihood(uz), M[:, cols], 1e-9):
            fail("channel", "likelihood(reports) differs from the channel's columns output_index(reports)")
        ran.append("channel")

        # ---- samples vs channel -----------------------------------------------------------
        idx = mech.output_index(z)
        pvals = []
        for xv in range(k):  # one test per input row (k is small): not a loop over users
            counts = np.bincount(idx[x == xv], minlength=n_out).astype(float)
            expected = M[xv] * n
            dead = expected <= 0
            if counts[dead].sum() > 0:
                fail("samples-vs-channel", f"input {xv} produced an output of probability 0 "
                                           f"(columns {np.flatnonzero(dead & (counts > 0))[:5].tolist()})")
            live = ~dead
            obs_l, exp_l = counts[live], expected[live]
            small_cells = exp_l < 5
            if small_cells.any():  # pool the cells of small expected count into one
                obs_l = np.r_[obs_l[~small_cells], obs_l[small_cells].sum()]
                exp_l = np.r_[exp_l[~small_cells], exp_l[small_cells].sum()]
            if exp_l.size < 2:
                continue
            exp_l = exp_l * obs_l.sum() / exp_l.sum()  # the row's mass to rounding
            pvals.append((stats.chisquare(obs_l, exp_l).pvalue, xv))
        if pvals:
            p, xv = min(pvals)
            if p * len(pvals) < alpha:
                fail("samples-vs-channel", f"the reports of input {xv} do not follow row {xv} of the channel "
                                           f"(chi-square p = {p:.3g}, Bonferroni over {len(pvals)} rows, "
                                           f"level {alpha:g})")
        ran.append("samples-vs-channel")

    # ---- samples vs likelihood ----------------------------------------------------------
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        level = float(mech.epsilon_ldp())
    t = float(stats.norm.isf(alpha / (2.0 * k * k)))
    with np.errstate(divide="ignore", invalid="ignore"):
        for xv in range(k):
            zx = z[x == xv]
            G = np.asarray(mech.likelihood(zx), dtype=float)
            if G.shape != (k, zx.shape[0]):
                fail("samples-vs-likelihood", f"likelihood of {zx.shape[0]} reports has shape {G.shape}, "
                                              f"expected ({k}, {zx.shape[0]})")
            own = G[xv]
            if np.any(~(own > 0)):
                fail("samples-vs-likelihood", f"a report drawn from input {xv} has likelihood "
                                              f"{own[~(own > 0)][0]!r} under input {xv}")
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
                fail("samples-vs-likelihood", f"reports drawn from input {xv}: mean of G[{xo}, z] / G[{xv}, z] "
                                              f"is {mean[xo]:.6g} +- {se[xo]:.2g}, expected {expect[xo]:.6g} "
                                              f"(within {t:.2f} standard errors): the sampler and the likelihood "
                                              "disagree")
    ran.append("samples-vs-likelihood")

    # ---- likelihood block ---------------------------------------------------------------
    take = np.sort(rng.choice(uz.shape[0], size=min(uz.shape[0], 200), replace=False))
    reports = uz[take]
    counts = cz[take].astype(float)
    G = np.asarray(mech.likelihood(reports), dtype=float)
    block = mech.likelihood_block(reports, counts)
    if block.k != k or not np.array_equal(np.asarray(block.counts, dtype=float), counts):
        fail("likelihood-block", f"block has k={block.k} and counts of size {np.size(block.counts)}")
    theta = rng.dirichlet(np.ones(k))
    w = rng.random(reports.shape[0])
    if not _close(block.forward(theta), theta @ G, 1e-8):
        fail("likelihood-block", "forward(theta) differs from theta @ likelihood(reports)")
    if not _close(block.backward(w), G @ w, 1e-8):
        fail("likelihood-block", "backward(w) differs from likelihood(reports) @ w")
    if block.hessian_diagonal is not None and not _close(block.hessian_diagonal(w), (G * G) @ w, 1e-8):
        fail("likelihood-block", "hessian_diagonal(w) differs from (G * G) @ w")
    if not _close(block.dense(), G, 1e-8):
        fail("likelihood-block", "dense() differs from likelihood(reports)")
    ran.append("likelihood-block")

    # ---- privacy ------------------------------------------------------------------------
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        if M is not None:
            dense = float(ldp_epsilon(M))
            if not (level == dense or abs(level - dense) <= 1e-9 * max(1.0, abs(dense))):
                fail("privacy", f"epsilon_ldp() = {level!r} but the dense channel gives {dense!r}")
        Gu = np.asarray(mech.likelihood(uz), dtype=float)
        with np.errstate(divide="ignore"):
            logs = np.log(Gu)
        spread = np.max(logs, axis=0) - np.min(logs, axis=0)
        worst = float(np.max(spread))
        if worst > level + 1e-9 * max(1.0, abs(level)):
            j = int(np.argmax(spread))
            fail("privacy", f"a sampled report (distinct report {j}) has likelihood ratio e^{worst:.6g} between "
                            f"two inputs, above the computed level {level:.6g}")
        if eps_ldp is not None:
            if level > eps_ldp * (1 + 1e-9) + 1e-12:
                fail("privacy", f"computed epsilon_ldp() = {level:.10g} exceeds the promised {eps_ldp:g}")
            if tight and abs(level - eps_ldp) > 1e-6 * max(1.0, eps_ldp):
                fail("privacy", f"computed epsilon_ldp() = {level:.10g}, promised exactly {eps_ldp:g}")
        if eps_geo is not None:
            geo = float(mech.epsilon_geo())
            if geo > eps_geo * (1 + 1e-9) + 1e-12:
                fail("privacy", f"computed epsilon_geo() = {geo:.10g} exceeds the promised {eps_geo:g}")
    ran.append("privacy")
    return tuple(ran)
