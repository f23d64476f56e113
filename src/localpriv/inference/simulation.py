"""Simulated users: report counts drawn from a distribution through a mechanism, and mechanisms
calibrated to a computed LDP level.

What predicting an estimator's error needs (``localpriv advise``, and the reproductions that
measure accuracy and coverage):

* :func:`simulate_block` -- the reports of ``n`` users drawn i.i.d. from ``theta``: finite channels
  draw the report counts directly, ``Multinomial(n, theta M)`` (the exact law of ``n`` users drawn
  from ``theta`` and obfuscated one by one); other mechanisms draw every user's report with the
  mechanism's sampler;
* :func:`merge_equal_columns` -- reports with identical likelihood columns merged (exact);
* :func:`dense_twin` -- the ``matrix`` mechanism with the same channel, where a dense likelihood
  offers a Newton finish that the structured block does not;
* :func:`simulate_observations` -- the three above as one :class:`Observations`;
* :func:`calibrate` -- the parameter of a metric mechanism whose computed LDP level is a target.
"""
from __future__ import annotations

import math

import numpy as np

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.domains import Domain
from localpriv.likelihood.blocks import DenseBlock
from localpriv.mechanisms import MatrixMechanism, Mechanism, parse
from localpriv.utils.validation import LocalPrivError

__all__ = ["MULTINOMIAL_MAX", "calibrate", "dense_twin", "merge_equal_columns", "simulate_block",
           "simulate_observations"]

#: channels with at most this many entries (inputs x outputs) draw the report counts directly
MULTINOMIAL_MAX = 4_000_000


def simulate_block(mech: Mechanism, theta: np.ndarray, n: int, rng: np.random.Generator) -> ObservationBlock:
    """The reports of ``n`` users drawn i.i.d. from ``theta`` and obfuscated by ``mech``.

    Parameters
    ----------
    mech : Mechanism
        The mechanism every user runs.
    theta : numpy.ndarray
        The users' distribution over the mechanism's ``k`` inputs.
    n : int
        Number of users.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    ObservationBlock
        The distinct reports and their counts. A finite channel of at most
        :data:`MULTINOMIAL_MAX` entries draws the counts as ``Multinomial(n, theta M)``; otherwise
        every user's report is drawn (bit-vector reports are kept one per user: distinct or not,
        the likelihood is the same).
    """
    n_out = mech.n_outputs
    if mech.report_kind != "binary" and n_out is not None and mech.k * n_out <= MULTINOMIAL_MAX:
        p = np.clip(theta @ mech.channel(), 0.0, None)
        c = rng.multinomial(n, p / p.sum())
        keep = np.flatnonzero(c)
        return ObservationBlock(mech, keep, c[keep])
    x = np.repeat(np.arange(theta.size), rng.multinomial(n, theta))
    z = mech.sample(x, rng)
    if z.ndim == 1:
        u, c = np.unique(z, return_counts=True)
        return ObservationBlock(mech, u, c)
    return ObservationBlock(mech, z, np.ones(z.shape[0]))


def merge_equal_columns(block: ObservationBlock) -> ObservationBlock:
    """Merge the reports of a pure protocol on ``k <= 64`` inputs whose likelihood columns are
    identical (same support, same ``c(z)``), summing their counts.

    Parameters
    ----------
    block : ObservationBlock
        Reports of one mechanism.

    Returns
    -------
    ObservationBlock
        The merged block (exact for every likelihood-based estimator and for MI), or ``block``
        itself when the mechanism has no support, ``k > 64``, or the columns differ otherwise.
    """
    mech = block.mechanism
    if not hasattr(mech, "support") or not hasattr(mech, "likelihood_parts") or mech.k > 64 \
            or block.counts.size < 2:
        return block
    S = mech.support(block.reports).tocsr()
    bits = np.left_shift(np.uint64(1), S.indices.astype(np.uint64))
    cs = np.concatenate([np.zeros(1, np.uint64), np.cumsum(bits, dtype=np.uint64)])
    key = cs[S.indptr[1:]] - cs[S.indptr[:-1]]  # modulo 2^64: exact (distinct bits per row)
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    # the likelihood column is c_j (r0_j + (r1_j - r0_j) Z[j, x]): equal supports and equal
    # (c, r0, r1) -- scalars or one value per report -- give equal columns
    for part in mech.likelihood_parts(block.reports):
        part = np.broadcast_to(np.asarray(part, dtype=float), key.shape)
        if not np.array_equal(part, part[first][inv]):
            return block
    counts = np.bincount(inv, weights=block.counts, minlength=uniq.size)
    return ObservationBlock(mech, block.reports[first], counts)


def dense_twin(mech: Mechanism, dense_max: int, prefer: bool = False) -> MatrixMechanism | None:
    """The ``matrix`` mechanism with ``mech``'s channel (same likelihood, a ``DenseBlock``).

    Parameters
    ----------
    mech : Mechanism
        The mechanism.
    dense_max : int
        Largest channel (inputs x outputs) to build.
    prefer : bool
        Build it even when the native likelihood block offers a Newton finish (at ``k = 100``
        dense products are about 3x faster than the linear mechanisms' structured blocks).

    Returns
    -------
    MatrixMechanism or None
        The twin when the channel has at most ``dense_max`` entries and either ``prefer`` or the
        native block offers no Newton finish; else ``None``.
    """
    n_out = mech.n_outputs
    if mech.report_kind == "binary" or n_out is None or mech.k * n_out > dense_max:
        return None
    probe = mech.likelihood_block(np.arange(n_out), np.ones(n_out))
    if isinstance(probe, DenseBlock) or not (prefer or not hasattr(probe, "hessian_diagonal")):
        return None
    return MatrixMechanism(mech.channel())


def simulate_observations(mech: Mechanism, twin: MatrixMechanism | None, theta: np.ndarray, n: int,
                          rng: np.random.Generator, domain: Domain | None) -> Observations:
    """The observations of ``n`` users drawn from ``theta`` through ``mech``, ready to estimate.

    Parameters
    ----------
    mech : Mechanism
        The mechanism every user runs.
    twin : MatrixMechanism or None
        Its :func:`dense_twin`: when given, the reports are estimated through it; otherwise
        reports with equal likelihood columns are merged (:func:`merge_equal_columns`).
    theta : numpy.ndarray
        The users' distribution.
    n : int
        Number of users.
    rng : numpy.random.Generator
        Source of randomness.
    domain : Domain
        The domain of the observations.

    Returns
    -------
    Observations
        One block (:func:`simulate_block`).
    """
    block = simulate_block(mech, theta, n, rng)
    if twin is not None:
        block = ObservationBlock(twin, block.reports, block.counts)
    else:
        block = merge_equal_columns(block)
    return Observations([block], domain)


def _spec(fmt: str, eps: float) -> str:
    return fmt.format(eps=repr(float(eps)))


def calibrate(fmt: str, domain: Domain, target: float, rtol: float = 1e-9) -> tuple[float, float]:
    """The metric parameter ``e`` whose mechanism has the computed LDP level ``target``.

    Brent's method on ``log e`` for ``parse(fmt.format(eps=e), domain).epsilon_ldp() == target``.
    The LDP level of a metric mechanism increases with its parameter and is at most ``e`` times the
    domain's diameter (equal for the truncated geometric on a line), so the bracket starts at
    ``target / diameter`` and moves by factors of 2. (Starting near the answer matters: far below it
    the planar Laplace kernel's truncated tail makes the computed level wrong and not monotone.)

    Parameters
    ----------
    fmt : str
        Mechanism spec with an ``{eps}`` placeholder, e.g. ``"geometric(eps={eps},lo=0,hi=99)"``.
    domain : Domain
        The domain (metric: it has a distance matrix).
    target : float
        The LDP level to reach.
    rtol : float
        Relative tolerance on the computed level.

    Returns
    -------
    tuple of float
        ``(e, computed)``: the parameter and the LDP level computed from its channel.
    """
    from scipy.optimize import brentq

    cache: dict[float, float] = {}

    def f(log_e: float) -> float:
        if log_e not in cache:
            cache[log_e] = parse(_spec(fmt, math.exp(log_e)), domain).epsilon_ldp() - target
        return cache[log_e]

    diameter = float(np.max(domain.distance_matrix()))
    step = math.log(2.0)
    lo = hi = math.log(target / diameter)
    for _ in range(60):
        if f(lo) <= 0:
            break
        hi, lo = lo, lo - step
    for _ in range(60):
        if f(hi) >= 0:
            break
        lo, hi = hi, hi + step
    if not (f(lo) <= 0 <= f(hi)):
        raise LocalPrivError(f"calibrate: cannot bracket LDP eps = {target} for {fmt}")
    if f(lo) == 0 or f(hi) == 0:
        x = lo if f(lo) == 0 else hi
    else:
        x = brentq(f, lo, hi, xtol=1e-12, maxiter=200)
    e = math.exp(x)
    computed = parse(_spec(fmt, e), domain).epsilon_ldp()
    if abs(computed - target) > rtol * target:
        raise LocalPrivError(f"calibrate: calibration of {fmt} reached LDP eps {computed!r}, not {target}")
    return e, float(computed)
