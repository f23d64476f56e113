"""Exact, fast random draws shared by the clients (the mechanisms' samplers).

Every sampler here decides its outcome by comparing the generator's raw integers with integer
thresholds, so the law it draws is known exactly (as dyadic rationals), and the privacy level a
mechanism computes can be that of the bits it releases (Mironov, CCS 2012, "On
significance of the least significant bits for differential privacy", shows what floating-point
noise samplers leak).
"""
from __future__ import annotations

import functools
import math
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal, localcontext
from fractions import Fraction
from math import ceil
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.mechanisms import _client_kernels
from localpriv.mechanisms._client_kernels import DIGIT_OVER
from localpriv.utils.rng import spawn_generators
from localpriv.utils.validation import LocalPrivError

if TYPE_CHECKING:
    from localpriv.mechanisms.base import Mechanism

__all__ = ["bernoulli_bits", "client_inputs", "grr_into", "DiscreteLaplace", "discrete_laplace",
           "DigitLaplace", "digit_laplace", "DIGIT_BLOCK", "threshold64", "dyadic64", "bernoulli64", "uniform_below",
           "power_of_two_grid", "default_grid", "fill_in_streams", "STREAMS", "CLIENT_CHUNK", "IntegerChannel",
           "INTEGER_CHANNEL_MAX_OUTPUTS"]

_LN2 = math.log(2.0)

_U16 = 1 << 16


#: users per chunk of the clients that draw one row per user (a constant, so that the reports are a
#: function of the seed alone; scratch memory is bounded by it, not by the number of users)
CLIENT_CHUNK = 1 << 16


def client_inputs(mech: Mechanism, x: ArrayLike) -> np.ndarray:
    """``mech._check_inputs(x)`` (the one input check of every mechanism), with a fast path for
    what clients are usually given: a 1-D int64 array whose minimum and maximum lie in
    ``0..k-1`` is returned as it is (two reductions, no temporaries; the full check builds three
    boolean arrays of ``n`` entries, ~20 % of k-RR's time at n = 10^6). Anything else, and every
    error message, goes through the full check."""
    if (isinstance(x, np.ndarray) and x.dtype == np.int64 and x.ndim == 1 and x.size
            and type(mech)._check_inputs.__qualname__ == "Mechanism._check_inputs"  # not overridden
            and x.min() >= 0 and x.max() < mech.k):
        return x
    return mech._check_inputs(x)


def bernoulli_bits(shape: int | tuple[int, ...], q: float, rng: np.random.Generator, p_true: float | None = None,
                   truth: np.ndarray | None = None) -> np.ndarray:
    """Independent Bernoulli bits, exactly: ``P(bit = 1) = q`` (or ``p_true`` where ``truth``).

    Each bit costs 16 random bits: with ``u`` uniform on ``0..2^16-1`` and ``t = floor(q 2^16)``,
    the bit is ``u < t``; on a tie ``u == t`` (probability ``2^-16``) it is ``v < q 2^16 - t``
    with ``v`` a fresh uniform double, so ``P(1) = (t + (q 2^16 - t)) / 2^16 = q`` with no
    rounding of ``q`` to 16 bits. Four bits per 64-bit draw of the generator's bit stream make
    this ~4x faster than one float per bit, and it stays reproducible from the generator.
    """
    n = int(np.prod(shape))
    if not (0.0 <= q <= 1.0 and (p_true is None or 0.0 <= p_true <= 1.0)):
        raise LocalPrivError(f"bit probabilities must lie in [0, 1], got q={q}, p_true={p_true}")
    if q in (0.0, 1.0) or p_true in (0.0, 1.0):  # degenerate probabilities: no 16-bit threshold
        u: np.ndarray = rng.random(shape)
        if truth is None:
            return u < q
        assert p_true is not None  # the true bits' probability comes with them
        return u < np.where(truth, p_true, q)
    u = rng.bit_generator.random_raw(ceil(n / 4)).view(np.uint16)[:n].reshape(shape)
    tq = int(q * _U16)
    thr: np.uint16 | np.ndarray
    if truth is None:
        thr = np.uint16(tq)
    else:
        assert p_true is not None  # the true bits' probability comes with them
        tp = int(p_true * _U16)
        thr = np.where(truth, np.uint16(tp), np.uint16(tq))
    bits = u < thr
    ties = np.flatnonzero(u == thr)
    if ties.size:  # the fractional part of the threshold, decided by a fresh uniform
        frac = (q * _U16 - tq if truth is None or p_true is None
                else np.where(truth.ravel()[ties], p_true * _U16 - tp, q * _U16 - tq))
        bits.ravel()[ties] = rng.random(ties.size) < frac
    return bits




_TWO64 = 1 << 64


def threshold64(p: ArrayLike) -> np.ndarray:
    """``T = round(p 2^64)``, integers in ``0..2^64`` held exactly in float64 (``p`` in ``[0, 1]``:
    scaling by ``2^64`` is exact, and below ``2^-11`` the rounded value has under 53 bits): the
    64-bit Bernoulli sampler :func:`bernoulli64` draws ``1`` with probability ``T / 2^64``."""
    p = np.asarray(p, dtype=np.float64)
    if not np.all((p >= 0.0) & (p <= 1.0)):
        raise LocalPrivError("a probability must lie in [0, 1]")
    return np.rint(np.ldexp(p, 64))


def dyadic64(threshold: ArrayLike) -> np.ndarray:
    """``T / 2^64`` (exact for ``T`` from :func:`threshold64`; for a Python int, rounded once)."""
    if isinstance(threshold, int):
        return np.float64(math.ldexp(float(threshold), -64))
    return np.ldexp(np.asarray(threshold, dtype=np.float64), -64)


def bernoulli64(thresholds: ArrayLike, index: ArrayLike, rng: np.random.Generator) -> np.ndarray:
    """Independent bits, bit ``u`` equal to ``1`` with probability exactly ``thresholds[index[u]] / 2^64``.

    ``thresholds``: integers in ``0..2^64`` (Python ints, or float64 from :func:`threshold64`).
    One 64-bit word ``w`` of the generator's bit stream per bit, and the bit is ``w < T``: integer
    comparisons only, so the law is the dyadic probability, bit for bit."""
    if isinstance(thresholds, np.ndarray) and thresholds.dtype == np.float64:
        full = thresholds >= _TWO64
        low = np.where(full, 0.0, thresholds).astype(np.uint64)
    else:
        thr = [int(t) for t in np.asarray(thresholds, dtype=object).reshape(-1)]
        full = np.array([t >= _TWO64 for t in thr], dtype=bool)
        low = np.array([t if t < _TWO64 else 0 for t in thr], dtype=np.uint64)
    if np.any(low < 0) or (low.size and np.any(~full & (np.asarray(thresholds, dtype=float) < 0))):
        raise LocalPrivError("bernoulli64: thresholds must lie in 0..2^64")
    idx = np.asarray(index, dtype=np.int64)
    words = rng.bit_generator.random_raw(idx.size).reshape(idx.shape)
    return (words < low[idx]) | full[idx]


def uniform_below(n: ArrayLike, rng: np.random.Generator) -> np.ndarray:
    """Independent integers, entry ``u`` uniform on ``0..n[u]-1`` exactly (``1 <= n < 2^63``):
    NumPy's bounded-integer sampler (Lemire's multiply-and-reject on the generator's 64-bit words),
    integer arithmetic only, so every value has probability exactly ``1 / n``."""
    n = np.asarray(n, dtype=np.int64)
    if n.size and int(n.min()) < 1:
        raise LocalPrivError("uniform_below needs ranges of at least one integer")
    return np.asarray(rng.integers(0, n, dtype=np.int64), dtype=np.int64)


#: the most outputs of an :class:`IntegerChannel` row (``2^26``: the rounding deficit of a row,
#: at most ``m 2^10``, then stays below its largest weight, at least ``2^64 / m``)
INTEGER_CHANNEL_MAX_OUTPUTS = 1 << 26


class IntegerChannel:
    """A finite channel held as integers, drawn exactly: ``P(z | x) = W[x, z] / 2^64``.

    Built from a row-stochastic float matrix ``M`` (``k x m``): ``W = round(M 2^64)``, every
    positive entry at least ``1``, and each row's rounding deficit ``2^64 - sum_z W[x, z]`` added to
    its largest entry, so every row sums to ``2^64`` exactly (the deficit is at most ``m 2^10``,
    far below the largest entry, which is at least ``2^64 / m``). The client draws one 64-bit word
    ``w`` of the generator per user and releases the ``z`` with ``C[x, z - 1] <= w < C[x, z]``
    (``C`` the row's cumulative sums, compared as unsigned 64-bit integers): the released law is
    ``W / 2^64``, bit for bit, and :meth:`epsilon_ldp` is computed from the integers
    (``max_z log(max_x W[x, z] / min_x W[x, z])``). A float inverse CDF (``u = rng.random()``
    against the cumulative float channel) instead releases a law that differs from the channel by
    up to ``2^-53`` per entry and moves every threshold by its rounding.

    Parameters
    ----------
    matrix : array_like
        ``k x m`` row-stochastic (rows sum to 1 within ``10^-9``), ``m`` at most
        :data:`INTEGER_CHANNEL_MAX_OUTPUTS`.
    what : str
        The mechanism, named in errors.
    """

    def __init__(self, matrix: ArrayLike, what: str = "channel") -> None:
        M = np.asarray(matrix, dtype=np.float64)
        if M.ndim != 2 or M.shape[0] < 1 or M.shape[1] < 1:
            raise LocalPrivError(f"{what}: a channel must be a non-empty 2-D matrix, got shape {M.shape}")
        k, m = M.shape
        if m > INTEGER_CHANNEL_MAX_OUTPUTS:
            raise LocalPrivError(f"{what}: {m} outputs, above the {INTEGER_CHANNEL_MAX_OUTPUTS} an exact "
                                 "(integer) channel table holds per row")
        if not (np.all(np.isfinite(M)) and np.all(M >= 0) and np.allclose(M.sum(axis=1), 1.0, rtol=0, atol=1e-9)):
            raise LocalPrivError(f"{what}: channel rows must be probabilities summing to 1")
        scaled = np.rint(np.ldexp(M, 64))
        # a positive entry keeps a positive weight; 2^64 itself is not a uint64 (a point mass: fixed below)
        scaled = np.where(M > 0, np.clip(scaled, 1.0, float(np.nextafter(_TWO64, 0))), 0.0)
        W = scaled.astype(np.uint64)
        with np.errstate(over="ignore"):
            deficit = np.uint64(0) - W.sum(axis=1, dtype=np.uint64)  # 2^64 - row sum, modulo 2^64
            top = np.argmax(M, axis=1)
            W[np.arange(k), top] += deficit  # exact modulo 2^64: the true sum lies in 1..2^64
        signed = deficit.view(np.int64)
        if np.any(np.abs(signed.astype(np.float64)) * 2.0 > scaled[np.arange(k), top]):
            raise LocalPrivError(f"{what}: a channel row's rounding to 2^-64 units left too large a deficit")
        #: the weights ``W`` (uint64; a point-mass row's single weight ``2^64`` reads as 0)
        self.weights = W
        #: the last output of positive weight of each row: the search stops before it
        self.last = (m - 1 - np.argmax(W[:, ::-1] > 0, axis=1)).astype(np.int64)
        self.last[(W == 0).all(axis=1)] = np.argmax(M, axis=1)[(W == 0).all(axis=1)]  # point masses
        with np.errstate(over="ignore"):
            self._cum = np.cumsum(W, axis=1, dtype=np.uint64)  # exact below each row's last output
        self.k, self.m = k, m

    def probabilities(self) -> np.ndarray:
        """``W / 2^64`` as float64 (the released law, each entry rounded once)."""
        P = np.ldexp(self.weights.astype(np.float64), -64)
        P[np.arange(self.k), self.last] = np.where(self._point_mass(), 1.0, P[np.arange(self.k), self.last])
        return P

    def _point_mass(self) -> np.ndarray:
        return (self.weights == 0).all(axis=1)

    def log_weights(self) -> np.ndarray:
        """``log W`` (``-inf`` for weight 0), with ``64 log 2`` for a point mass."""
        with np.errstate(divide="ignore"):
            L = np.log(self.weights.astype(np.float64))
        pm = self._point_mass()
        if pm.any():
            L[pm, self.last[pm]] = 64.0 * _LN2
        return L

    def epsilon_ldp(self) -> float:
        """``max_z log(max_x W[x, z] / min_x W[x, z])``: the level of the released law, from the
        integers (the worst column's ratio recomputed with Python integers; ``inf`` when some
        column is 0 beside a positive entry)."""
        L = self.log_weights()
        live = L.max(axis=0) > -np.inf
        spread = np.where(live, L.max(axis=0) - L.min(axis=0), 0.0)
        j = int(np.argmax(spread))
        if not np.isfinite(spread[j]):
            return math.inf
        pm = self._point_mass()
        col = self.weights[:, j]
        # the column's extremes (exact uint64 comparisons) and the point-mass rows, as Python integers
        ints = [_TWO64 if pm[i] and self.last[i] == j else int(col[i])
                for i in {int(np.argmax(col)), int(np.argmin(col)), *np.flatnonzero(pm).tolist()}]
        hi, lo = max(ints), min(ints)
        return math.log1p(float(Fraction(hi - lo, lo)))

    def sample(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One output per input index of ``x`` (checked by the caller): one 64-bit word per user,
        located among the row's cumulative weights by one binary search per distinct input
        (vectorized over its users)."""
        x = np.asarray(x, dtype=np.int64).reshape(-1)
        words = rng.bit_generator.random_raw(x.size)
        out = np.empty(x.size, dtype=np.int64)
        order = np.argsort(x, kind="stable")
        xs = x[order]
        starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]]) if xs.size else np.zeros(0, np.int64)
        ends = np.r_[starts[1:], xs.size]
        for s, e in zip(starts, ends):  # one iteration per distinct input value, not per user
            row, idx = int(xs[s]), order[s:e]
            out[idx] = np.searchsorted(self._cum[row, :self.last[row]], words[idx], side="right")
        return out


_U32 = np.uint64(32)
_M32 = np.uint64(0xFFFFFFFF)
_TWO32 = float(1 << 32)
_TWO53 = float(1 << 53)


def _grr_chunk_numpy(raw: np.ndarray, x: np.ndarray, t: np.uint64, s: np.uint64, thr: np.uint64,
                     out: np.ndarray) -> np.ndarray:
    """NumPy twin of :func:`localpriv.mechanisms._client_kernels._grr_chunk` (the same integers):
    writes the common case into ``out`` and returns the users to resolve exactly."""
    h = raw >> _U32
    m = (raw & _M32) * s
    r = (m >> _U32).astype(np.int64)
    r += r >= x
    np.copyto(r, x, where=h < t)
    out[...] = r
    return np.flatnonzero((h == t) | ((m & _M32) < thr))


def _grr_resolve(idx: np.ndarray, raw: np.ndarray, x: np.ndarray, t: np.uint64, tie_thr: np.uint64, s: np.uint64,
                 thr: np.uint64, out: np.ndarray, rng: np.random.Generator) -> None:
    """The exact outcome of the users ``idx`` of a chunk (ties with the keep threshold, rejected
    replacements), in index order, from fresh words of ``rng``'s bit stream."""
    w = raw[idx]
    h = w >> _U32
    keep = h < t
    tie = np.flatnonzero(h == t)
    if tie.size:  # the keep threshold's fraction: 53 more bits decide, exactly
        keep[tie] = (rng.bit_generator.random_raw(tie.size) >> np.uint64(11)) < tie_thr
    m = (w & _M32) * s
    r = (m >> _U32).astype(np.int64)
    need = np.flatnonzero(((m & _M32) < thr) & ~keep)
    while need.size:  # Lemire's rejection: a fresh 32-bit word for each rejected replacement
        m2 = (rng.bit_generator.random_raw(need.size) & _M32) * s
        ok = (m2 & _M32) >= thr
        r[need[ok]] = (m2[ok] >> _U32).astype(np.int64)
        need = need[~ok]
    xs = x[idx]
    r += r >= xs
    out[idx] = np.where(keep, xs, r)


def grr_into(values: np.ndarray, g: int, p_keep: float, rng: np.random.Generator, out: np.ndarray) -> None:
    """Generalized randomized response on ``g`` values, exactly, into ``out`` (int64).

    ``out[i] = values[i]`` with probability ``p_keep``, else uniform on the ``g - 1`` other
    values (k-RR, seed 001 Eq. 5). Per user one 64-bit word ``w`` of the generator's bit stream
    (``bit_generator.random_raw``): with ``t = floor(p_keep 2^32)`` the user keeps ``x`` when
    ``w >> 32 < t``; on a tie ``w >> 32 == t`` (probability ``2^-32``) 53 fresh bits ``v``
    decide, ``v < (p_keep 2^32 - t) 2^53`` (an integer for ``p_keep >= 2^-33``, which every
    ``g <= 2^32`` gives: ``p_keep > 1/g``), so ``P(keep) = p_keep`` exactly. The replacement is
    Lemire's multiply-shift on the low 32 bits ``l``: ``r = (l s) >> 32``, ``s = g - 1``,
    redrawn from fresh words when ``(l s) mod 2^32 < 2^32 mod s`` (Lemire, ACM TOMACS 2019), so
    ``r`` is exactly uniform on ``0..s-1`` and independent of the keep decision; the report is
    ``r + [r >= x]``. No float comparison decides anything: the law released is the channel's.

    Users go in chunks of :data:`CLIENT_CHUNK` (scratch memory bounded by the chunk; per chunk:
    its words, then the fresh words of its ties and rejections, in index order), so the output
    is a function of the generator's stream alone. The common case runs in a compiled loop
    (:mod:`localpriv.mechanisms._client_kernels`) on chunks of at least ``2^14`` users, else (or
    with ``LOCALPRIV_NUMBA=0``) in NumPy: the same integers, the same reports.
    """

    g = int(g)
    if not 2 <= g <= 1 << 32:
        raise LocalPrivError(f"randomized response needs 2 <= g <= 2^32 values, got {g}")
    if not 0.0 <= p_keep <= 1.0:
        raise LocalPrivError(f"keep probability must lie in [0, 1], got {p_keep}")
    values = np.ascontiguousarray(values, dtype=np.int64).reshape(-1)
    if out.size != values.size or out.dtype != np.int64 or out.ndim != 1 or not out.flags.c_contiguous:
        raise LocalPrivError("grr_into needs a contiguous 1-D int64 output as long as the values")
    s, thr = np.uint64(g - 1), np.uint64((1 << 32) % (g - 1))
    s32, thr32 = np.uint32(g - 1), np.uint32((1 << 32) % (g - 1))
    scaled = float(p_keep) * _TWO32  # exact: a power-of-two scaling
    t = np.uint64(int(scaled))
    tie_thr = np.uint64(int((scaled - int(scaled)) * _TWO53))  # exact for p_keep >= 2^-33
    n = values.size
    for lo in range(0, n, CLIENT_CHUNK):
        hi = min(n, lo + CLIENT_CHUNK)
        raw = rng.bit_generator.random_raw(hi - lo)
        xs, os_ = values[lo:hi], out[lo:hi]
        if not _client_kernels.use_compiled(hi - lo):
            idx = _grr_chunk_numpy(raw, xs, t, s, thr, os_)
        elif _client_kernels.kernels()["grr_chunk"](raw, xs, t, s32, thr32, os_):  # rare: list them
            idx = np.flatnonzero(((raw >> _U32) == t) | ((((raw & _M32) * s) & _M32) < thr))
        else:
            continue
        if idx.size:
            _grr_resolve(idx, raw, xs, t, tie_thr, s, thr, os_, rng)


#: the |D| table of :class:`DiscreteLaplace` ends where the tail holds about ``e^-7`` of the mass
_TABLE_TAIL = 7.0
#: largest |D| table (entries); smaller rates recurse through the memoryless tail more often
MAX_TABLE = 1 << 16
#: rates (per grid step) the table sampler accepts: every cell then holds >= 2^33 of the 2^63
#: units of the uniform, so a 31-bit word decides all but one threshold per draw, and the tail
#: beyond the table (at most 2^16 entries) holds at most e^-1 of the mass (few redraws)
MIN_RATE = 2.0 ** -16
MAX_RATE = 20.0
_TWO63 = 1 << 63
_U31 = np.uint32(0x7FFFFFFF)
_LITTLE = sys.byteorder == "little"
#: draws per block of :meth:`DiscreteLaplace.signed_into` (bounds its scratch memory)
_BLOCK = 1 << 18


def _check_rate(rate: float) -> float:
    """A discrete-Laplace rate ``lam`` (eps times the grid step) within ``[MIN_RATE, MAX_RATE]``."""
    lam = float(rate)
    if not MIN_RATE <= lam <= MAX_RATE:
        raise LocalPrivError(f"discrete Laplace rate (eps times the grid step) must lie in "
                             f"[2^-16, {MAX_RATE:g}], got {lam:g}: eps is too small or too large "
                             f"for a grid of powers of two")
    return lam


class DiscreteLaplace:
    """Sampler of the discrete Laplace (two-sided geometric) law on the integers, by exact tables.

    Target (Inusah & Kozubowski 2006; Canonne, Kamath & Steinke, NeurIPS 2020)::

        P(D = d) = tanh(lam/2) e^{-lam |d|},    d in Z,   lam = ``rate``,

    i.e. ``|D|`` has ``P(|D| = 0) = tanh(lam/2)``, ``P(|D| >= m) = kappa a^m`` (``m >= 1``,
    ``a = e^{-lam}``, ``kappa = 2 / (1 + a)``) and a fair sign. Another ``kappa`` (in
    ``(0, 1/a)``) changes only the centre cell, ``P(D = 0) = 1 - kappa a``, ``P(D = d) =
    (kappa (1 - a) / 2) e^{-lam |d|}`` otherwise: ``kappa = e^{lam/2}`` is the Laplace law rounded to
    the nearest integer (``lam`` per unit). The sampler is an *integer* inversion, so the law it
    draws is known exactly:

    * ``|D| < B``: a 63-bit uniform ``U`` is compared with integer thresholds
      ``C[m] = 2^63 - round(2^63 P(|D| >= m))`` (``C[0] = 0``), so
      ``P~(|D| = m) = (C[m+1] - C[m]) / 2^63``. ``B = min(2^16, ceil(7 / lam))``.
    * ``|D| >= B`` (cell ``[C[B], 2^63)``, probability ``kappa a^B ~ e^{-7}``): by memorylessness
      ``|D| - B`` is one-sided geometric, ``P(G = j) = (1 - a) a^j``, drawn the same way from
      its own thresholds ``Cg[j] = 2^63 - round(2^63 a^j)``, ``j < B``, and the cell
      ``[Cg[B], 2^63)`` adds ``B`` and draws again. No tail is ever cut off.

    Every draw costs one 32-bit word in the common case: its top bit is the sign, the other 31
    bits ``v`` are the top of ``V = 2^63 - 1 - U`` (as uniform as ``U``); a float guess
    ``m = floor((log kappa - log(v / 2^31)) / lam)`` is checked against the top bits of the two
    thresholds around it (one packed 64-bit gather), and the few draws that fail (a wrong guess,
    the tail, or ``v`` tied with a threshold's top bits, which 32 more bits of ``U`` decide: at
    most one threshold can tie, every cell being wider than ``2^33``) are settled by a binary
    search on the integers. The float arithmetic only proposes; the integers decide.

    **Sampler error, accounted for.** The thresholds round ``2^63 P`` to integers, so the drawn
    law ``p~`` differs from the target ``p`` by a relative ``~1e-12`` in each table cell, and the
    tail ratio per block of ``B`` is ``u~_B`` instead of ``a^B``. With ``e(d) = log p~(d) -
    log p(d)`` split as ``e0(d) + rho q(d)`` (``e0`` over a finite set of cell errors,
    ``rho = log(u~_B / a^B)``, ``q(d) = max(0, floor(|d|/B) - 1)`` the number of extra
    blocks)::

        log p~(d) / p~(d') <= lam |d - d'| + osc + |rho| ceil(|d - d'| / B),

    ``osc = max e0 - min e0``. :meth:`excess` returns the last two terms; the mechanisms add
    them to the level they compute from the target pmf. Both come from the integer tables
    themselves (:attr:`osc`, :attr:`rho`), not from an assumed accuracy.

    Parameters
    ----------
    rate : float
        ``lam`` in ``[2^-16, 20]``: the decay per step (``eps * grid`` for a mechanism whose
        reports move by ``grid`` per step at ``eps`` per unit).
    kappa : float, optional
        ``P(|D| >= m) = kappa a^m`` for ``m >= 1``; default ``2 / (1 + a)`` (discrete Laplace).
    """

    #: column of ``c_hi[m]`` in the packed pair viewed as two uint32 (the low half)
    _LO = 0 if _LITTLE else 1

    def __init__(self, rate: float, kappa: float | None = None) -> None:
        lam = _check_rate(rate)
        self.rate = lam
        a = math.exp(-lam)
        self.a = a
        kappa = 2.0 / (1.0 + a) if kappa is None else float(kappa)
        if not 0.0 < kappa * a < 1.0:
            raise LocalPrivError(f"discrete Laplace kappa must lie in (0, e^rate), got {kappa!r}")
        self.kappa = kappa
        #: log P(D = 0) and log P(D = d) + lam |d| for d != 0 (the target law)
        self._log_p0 = math.log(-math.expm1(math.log(kappa) - lam))
        self._log_c = math.log(kappa) + math.log(-math.expm1(-lam)) - _LN2
        B = int(min(MAX_TABLE, max(1, math.ceil(_TABLE_TAIL / lam))))
        self.B = B
        m = np.arange(B + 1, dtype=float)
        # |D| >= m has probability kappa a^m for m >= 1; G >= j has probability a^j
        C = np.zeros(B + 1, dtype=np.uint64)  # C[0] = 0
        C[1:] = np.uint64(_TWO63) - np.round(np.ldexp(kappa * np.exp(-lam * m[1:]), 63)).astype(np.uint64)
        Cg = np.uint64(_TWO63) - np.round(np.ldexp(np.exp(-lam * m), 63)).astype(np.uint64)
        Cg[0] = 0
        cells = np.diff(np.append(C, np.uint64(_TWO63)))
        gcells = np.diff(np.append(Cg, np.uint64(_TWO63)))
        if cells.min() < (1 << 33) or gcells.min() < (1 << 33):  # pragma: no cover - rate checked
            raise LocalPrivError(f"discrete Laplace rate {lam:g}: a table cell is too small")
        self._C, self._Cg = C, Cg
        self._c_hi = (C >> np.uint64(32)).astype(np.uint32)  # thresholds' top 31 bits (C[0..B])
        self._c_lo = (C & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        # the guess works in float32 unless 1/lam is too large for its 24-bit significand
        self._fdtype = np.float32 if lam >= 2.0 ** -13 else np.float64
        self._alpha = (math.log(kappa) + 31 * _LN2) / lam
        self._beta = 1.0 / lam
        # The common path reads the 31 random bits v as the top of V = 2^63 - 1 - U, so the top
        # bits of U are u = 2^31 - 1 - v. If c_hi[m] < u < c_hi[m+1], then C[m] <= U < C[m+1]
        # whatever U's low bits: |D| = m. On v that reads t[m+1] < v < t[m], t = 2^31 - 1 - c_hi.
        # One 64-bit gather per draw reads (t[m+1] + 1, t[m] - t[m+1] - 1) packed, at the guess
        # m; guesses >= B (the tail cell, or past it) read (0, 0), which always fails the check,
        # so the exact path sorts them out. The guess never exceeds alpha + 1; when that would
        # make the table too long, guesses are clipped to B instead.
        t_hi = np.uint32(0x7FFFFFFF) - self._c_hi
        base = t_hi[1:].astype(np.uint64) + np.uint64(1)
        width = (t_hi[:-1].astype(np.int64) - t_hi[1:].astype(np.int64) - 1).astype(np.uint64)
        size = int(math.ceil(self._alpha)) + 2
        self._clip = size > MAX_TABLE * 4
        size = B + 1 if self._clip else max(size, B + 1)
        packed = np.zeros(size, dtype=np.uint64)
        packed[:B] = base | (width << np.uint64(32))
        self._packed = packed
        self._local = threading.local()
        # ---- the drawn law against the target, cell by cell (natural logs) ----
        log_t = np.log(cells.astype(float)) - 63 * _LN2
        log_u = np.log(gcells.astype(float)) - 63 * _LN2
        ideal_t = np.r_[self._log_p0, _LN2 + self._log_c - lam * m[1:B], math.log(kappa) - lam * B]
        ideal_u = np.r_[math.log(-math.expm1(-lam)) - lam * m[:B], -lam * B]
        err_t, err_u = log_t - ideal_t, log_u - ideal_u
        e0 = np.r_[err_t[:B], err_t[B] + err_u[:B]]
        self.osc = float(e0.max() - e0.min())
        self.rho = float(err_u[B])

    def __repr__(self) -> str:
        return f"DiscreteLaplace(rate={self.rate!r}, kappa={self.kappa!r}, B={self.B})"

    # ---- the law ----------------------------------------------------------------------------
    def log_pmf(self, d: ArrayLike) -> np.ndarray:
        """``log P(D = d)`` of the target law: ``log tanh(lam/2) - lam |d|`` (default ``kappa``)."""
        mag = np.abs(np.asarray(d, dtype=float))
        return np.where(mag == 0, self._log_p0, self._log_c - self.rate * mag)

    def log_tail(self, m: ArrayLike) -> np.ndarray:
        """``log P(D >= m) = log P(D <= -m) = log(kappa/2) - lam m`` for ``m >= 1`` (target law;
        ``-lam m - log(1 + a)`` by default)."""
        return math.log(self.kappa / 2.0) - self.rate * np.asarray(m, dtype=float)

    def excess(self, shift: ArrayLike) -> np.ndarray:
        """Bound on ``log(p~(d)/p~(d')) - log(p(d)/p(d'))`` over all ``d, d'`` with
        ``|d - d'| = shift`` (grid steps; 0 for ``shift = 0``): ``osc + |rho| ceil(shift / B)``."""
        s = np.abs(np.asarray(shift, dtype=float))
        return np.where(s > 0, self.osc + abs(self.rho) * np.ceil(s / self.B), 0.0)

    def drawn_pmf(self, d: ArrayLike) -> np.ndarray:
        """The exact law the sampler draws, ``P~(D = d)`` (float64), for tests and audits."""
        d = np.abs(np.asarray(d, dtype=np.int64))
        two63 = float(_TWO63)
        cells = np.diff(np.append(self._C, np.uint64(_TWO63))).astype(float) / two63
        gcells = np.diff(np.append(self._Cg, np.uint64(_TWO63))).astype(float) / two63
        B = self.B
        inner = np.where(d == 0, cells[0], 0.5 * cells[np.minimum(d, B)])
        j = np.maximum(d - B, 0)
        tail = 0.5 * cells[B] * gcells[j % B] * gcells[B] ** (j // B)
        return np.where(d < B, inner, tail)

    # ---- drawing ----------------------------------------------------------------------------
    def _tail(self, n: int, rng: np.random.Generator, cap: int) -> np.ndarray:
        """``n`` magnitudes given ``|D| >= B``: ``B + G`` (one-sided geometric ``G``, memoryless
        blocks of ``B``), stopped at ``cap`` (the caller clamps every magnitude ``>= cap`` to the
        same report)."""
        B = self.B
        mag = np.full(n, B, dtype=np.int64)
        active = np.arange(n)
        while active.size:
            u = rng.bit_generator.random_raw(active.size) >> np.uint64(1)
            j = np.searchsorted(self._Cg, u, side="right") - 1
            mag[active] += j
            active = active[(j == B) & (mag[active] < cap)]
        return np.minimum(mag, cap)

    def signed(self, size: int, rng: np.random.Generator, cap: int = 1 << 62) -> np.ndarray:
        """``size`` i.i.d. draws of ``D`` with magnitudes stopped at ``cap`` (``|D| >= cap`` is
        returned as ``+-cap``: give a ``cap`` beyond which the caller's clamp makes every value
        alike). int32 when ``cap < 2^31``, else int64."""
        out = np.empty(int(size), dtype=np.int32 if int(cap) < 1 << 31 else np.int64)
        self.signed_into(out, rng, cap)
        return out

    def signed_into(self, out: np.ndarray, rng: np.random.Generator, cap: int = 1 << 62) -> int:
        """Fill the contiguous 1-D int32/int64 array ``out`` with draws of ``D`` (as
        :meth:`signed`); returns the largest magnitude drawn through the tail (``B - 1`` if none),
        so that a caller can skip its clamp when that is small. Draws are made in blocks of at
        most ``2^18`` with per-thread scratch buffers (reused: fresh memory costs more than the
        arithmetic here); the result depends on the generator's stream only."""
        cap = int(cap)
        if cap < self.B:
            raise LocalPrivError(f"discrete Laplace cap {cap} is below the table size {self.B}")
        if out.ndim != 1 or not out.flags.c_contiguous or out.dtype not in (np.int32, np.int64):
            raise LocalPrivError("signed_into needs a contiguous 1-D int32 or int64 array")
        if out.dtype == np.int32 and cap >= 1 << 31:
            raise LocalPrivError(f"an int32 output needs cap < 2^31, got {cap}")
        top = self.B - 1
        for lo in range(0, out.size, _BLOCK):
            top = max(top, self._block(out[lo:lo + _BLOCK], rng, cap))
        return top

    def _scratch(self, size: int) -> dict[str, np.ndarray]:
        sc = getattr(self._local, "sc", None)
        if sc is None or sc["u"].size < size:
            n = max(size, 1 << 12)
            sc = {"u": np.empty(n, np.uint32), "m": np.empty(n, np.int32), "f": np.empty(n, self._fdtype),
                  "d": np.empty(n, np.uint32), "pair": np.empty(n, np.uint64), "flag": np.empty(n, bool)}
            self._local.sc = sc
        return sc

    def _block(self, out: np.ndarray, rng: np.random.Generator, cap: int) -> int:
        size, B = out.size, self.B
        raw = rng.bit_generator.random_raw((size + 1) // 2).view(np.uint32)[:size]
        sc = self._scratch(size)
        v = np.bitwise_and(raw, _U31, out=sc["u"][:size])  # the top 31 bits of V = 2^63 - 1 - U
        with np.errstate(divide="ignore", invalid="ignore"):  # v = 0: log -> -inf, a wild guess
            f = np.log(v, dtype=self._fdtype, out=sc["f"][:size])  # cast inside the ufunc's buffers
            f *= self._fdtype(-self._beta)
            f += self._fdtype(self._alpha)
            # the guess, as an unsigned index: whatever a float -> uint32 cast gives, the entry
            # read (clipped to the table) is the entry checked, and past the table it is (0, 0),
            # which always fails the check; a guess is never trusted, only checked
            m = out if out.dtype == np.int32 else sc["m"][:size]
            guess = m.view(np.uint32)
            np.copyto(guess, f, casting="unsafe")
        if self._clip:
            np.minimum(guess, np.uint32(B), out=guess)
        pair = np.take(self._packed, guess, out=sc["pair"][:size], mode="clip")
        pair = pair.view(np.uint32).reshape(size, 2)
        diff = np.subtract(v, pair[:, self._LO], out=sc["d"][:size])  # v - t[m+1] - 1
        # flagged: v <= t[m+1] or v >= t[m] (a wrong guess, the tail, or a tie with a threshold,
        # decided by 32 more bits): all decided exactly below, on U
        flag = np.flatnonzero(np.greater_equal(diff, pair[:, 1 - self._LO], out=sc["flag"][:size]))
        top = B - 1
        tail_at: np.ndarray | None = None
        tail_mags: np.ndarray | None = None
        if flag.size:
            mf, tail_at, tail_mags, top = self._exact(v[flag], flag, rng, cap)
            m[flag] = mf
        neg = raw.view(np.int32)
        neg >>= 31  # 0 or -1 (the sign bit; raw is ours, used up here)
        m ^= neg
        m -= neg  # -m where the sign bit is set; 0 stays +0
        if m is not out:
            out[...] = m
        if tail_at is not None and tail_mags is not None:  # set together
            out[tail_at] = np.where(neg[tail_at] < 0, -tail_mags, tail_mags)
        return top

    def _exact(self, vf: np.ndarray, flag: np.ndarray, rng: np.random.Generator,
               cap: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, int]:
        """Magnitudes of the draws ``flag`` (31 random bits ``vf`` each) by the exact search on
        the integers: ties with a threshold's top bits decided by 32 more bits, the tail cell by
        :meth:`_tail`. Returns ``(magnitudes, tail indices or None, tail magnitudes, top)``."""
        B = self.B
        top = B - 1
        tail_at: np.ndarray | None = None
        tail_mags: np.ndarray | None = None
        uf = _U31 - vf  # the top 31 bits of U
        mf = np.searchsorted(self._c_hi, uf, side="right") - 1  # max j with c_hi[j] <= u
        tie = np.flatnonzero(uf == self._c_hi[mf])
        if tie.size:
            low = rng.bit_generator.random_raw((tie.size + 1) // 2).view(np.uint32)[:tie.size]
            mf[tie] -= low < self._c_lo[mf[tie]]
        tail = np.flatnonzero(mf == B)
        if tail.size:
            tail_mags = self._tail(tail.size, rng, cap)
            top = max(top, int(tail_mags.max()))
            tail_at = flag[tail]
            mf[tail] = 0  # written by the caller, with their sign, at full width
        return mf, tail_at, tail_mags, top


@functools.lru_cache(maxsize=64)
def discrete_laplace(rate: float, kappa: float | None = None) -> DiscreteLaplace:
    """The (cached) :class:`DiscreteLaplace` sampler of a rate (and centre parameter)."""
    return DiscreteLaplace(rate, kappa)


def power_of_two_grid(grid: float, name: str, min_log2: int) -> float:
    """Check a grid step: ``2^-j`` with ``0 <= j <= -min_log2`` (so the integers lie on the grid
    and every grid value is an exact binary float)."""
    try:
        g = float(grid)
    except (TypeError, ValueError):
        raise LocalPrivError(f"{name} must be a number, got {grid!r}") from None
    if not (np.isfinite(g) and g > 0):
        raise LocalPrivError(f"{name} must be a power of two in [2^{min_log2}, 1], got {grid!r}")
    mant, exp = math.frexp(g)
    if mant != 0.5 or not min_log2 <= exp - 1 <= 0:
        raise LocalPrivError(f"{name} must be a power of two in [2^{min_log2}, 1] (1, 0.5, 0.25, ...), "
                             f"got {grid!r}")
    return g


def default_grid(scale: float, min_log2: int) -> float:
    """The largest power of two ``<= scale / 1024``, kept in ``[2^min_log2, 1]``: reports then
    move in steps of about a thousandth of the noise scale (rate ``~2^-10`` per step)."""
    j = math.floor(math.log2(scale / 1024.0)) if scale > 0 else min_log2
    return math.ldexp(1.0, int(min(0, max(min_log2, j))))


#: the random stream of a large client call is split into this many independent streams, fixed
#: so that the draws do not depend on the machine (only how many of them run at once does)
STREAMS = 2
#: calls with fewer items than this use the caller's generator directly, in one stream
_STREAM_MIN_ITEMS = 1 << 21
#: items per chunk when streams are used (~2 MB of float32 per chunk)
_STREAM_CHUNK_ITEMS = 1 << 19


def _threads() -> int:
    env = os.environ.get("LOCALPRIV_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise LocalPrivError(f"LOCALPRIV_THREADS must be a positive integer, got {env!r}") from None
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def fill_in_streams(n_rows: int, row_items: int, fill: Callable[[int, int, np.random.Generator], object],
                    rng: np.random.Generator, chunk_items: int = 1 << 17) -> None:
    """Run ``fill(lo, hi, gen)`` over row chunks ``[lo, hi)`` of about ``chunk_items`` items.

    ``fill`` must write rows ``lo:hi`` only and draw from ``gen`` only. Small calls
    (``n_rows * row_items < 2^21``) run in order with ``rng`` itself. Larger ones spawn
    ``STREAMS`` child generators of the same kind from ``rng``
    (:func:`localpriv.utils.rng.spawn_generators`: ``SeedSequence.spawn`` for seeded generators, the
    independent streams NumPy recommends for parallel generation; fresh 256-bit keys for
    cryptographic ones); chunks (then at least ``2^19`` items) go to stream ``c mod STREAMS`` and each
    stream fills its chunks in order, so the result is a function of the seed alone. The streams
    run on up to ``STREAMS`` threads (NumPy releases the GIL while generating and in its
    ufuncs); ``LOCALPRIV_THREADS=1`` runs them one after another with identical results. Bit
    generators that cannot be seeded from a ``SeedSequence`` fall back to the single stream.
    """
    gens = None
    if n_rows * row_items >= _STREAM_MIN_ITEMS:
        gens = spawn_generators(rng, STREAMS)
        if gens is not None:  # bigger chunks in streams: fewer hand-offs of the GIL between the threads
            chunk_items = max(chunk_items, _STREAM_CHUNK_ITEMS)
    step = max(1, chunk_items // max(1, row_items))
    starts = list(range(0, n_rows, step))
    if gens is None:
        for lo in starts:
            fill(lo, min(n_rows, lo + step), rng)
        return

    def run(j: int) -> None:
        for lo in starts[j::STREAMS]:
            fill(lo, min(n_rows, lo + step), gens[j])

    workers = min(STREAMS, _threads())
    if workers == 1:
        for j in range(STREAMS):
            run(j)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for f in [pool.submit(run, j) for j in range(STREAMS)]:
            f.result()


# ---- SHE's sampler: the discrete Laplace law by independent digits --------------------------------

#: every table of :class:`DigitLaplace` draws its outcome in units of 2^-80
_DIGIT_UNITS = 80
_M64 = (1 << 64) - 1
#: entries per block of :meth:`DigitLaplace.rows_into` (its random words and tie words are drawn
#: per block; scratch memory is bounded by the block)
DIGIT_BLOCK = 1 << 18


def _alias_table(units: list[int], index_bits: int) -> tuple[list[int], list[int]]:
    """Walker's alias table (Vose's construction) on *integer* masses ``units`` summing to
    ``2^80``, ``2^index_bits`` slots of ``2^(80 - index_bits)`` units each. Returns
    ``(keep, alias)`` (Python ints): slot ``i`` yields ``i`` on its first ``keep[i]`` units and
    ``alias[i]`` on the rest, so outcome ``j`` has exactly ``units[j]`` units (checked)."""
    n = 1 << index_bits
    cap = 1 << (_DIGIT_UNITS - index_bits)
    w = list(units) + [0] * (n - len(units))
    if sum(w) != 1 << _DIGIT_UNITS or min(w) < 0:  # pragma: no cover - built below
        raise LocalPrivError("alias table: masses must be non-negative and sum to 2^80")
    keep, alias = [cap] * n, list(range(n))
    small = [i for i in range(n) if w[i] < cap]
    large = [i for i in range(n) if w[i] >= cap]
    while small and large:
        s, l_ = small.pop(), large.pop()
        keep[s], alias[s] = w[s], l_
        w[l_] -= cap - w[s]
        (small if w[l_] < cap else large).append(l_)
    for i in small + large:  # what is left holds exactly one slot's worth (integer arithmetic)
        if w[i] != cap:  # pragma: no cover - exact
            raise LocalPrivError("alias table: construction left a partial slot")
        keep[i], alias[i] = cap, i
    got = [0] * n
    for i in range(n):
        got[i] += keep[i]
        got[alias[i]] += cap - keep[i]
    if got != list(units) + [0] * (n - len(units)):  # pragma: no cover - exact
        raise LocalPrivError("alias table: drawn masses differ from the requested ones")
    return keep, alias


def _to_units(log_p: np.ndarray) -> list[int]:
    """Masses ``exp(log_p)`` (summing to 1) as integers summing to ``2^80`` (nearest, the
    rounding remainder on the largest); every outcome of positive mass keeps at least one unit."""
    u = [max(1, int(round(math.ldexp(math.exp(float(v)), _DIGIT_UNITS)))) if np.isfinite(v) else 0
         for v in log_p]
    u[int(np.argmax(log_p))] += (1 << _DIGIT_UNITS) - sum(u)
    return u


class DigitLaplace:
    """The discrete Laplace law ``P(D = d) = tanh(lam/2) e^{-lam |d|}`` drawn digit by digit from
    small alias tables with integer thresholds (SHE's sampler).

    **Decomposition (exact).** With ``a = e^{-lam}``: ``P(D >= 0) = 1/(1 + a)``, and on either
    side ``D = G`` (``D >= 0``) or ``D = -(G + 1)`` (``D < 0``) with ``G`` one-sided geometric,
    ``P(G = j) = (1 - a) a^j``: then ``P(D = d) = (1 - a) a^{|d|} / (1 + a)`` for every ``d``, no
    rejection. ``G`` is split as ``G = L + 2^K H``: the ``K`` low bits ``L`` and the high part
    ``H`` are independent (``a^G`` factorizes), ``H`` is geometric with ``A = a^{2^K}``, and the
    low bits themselves are independent digits of at most 9 bits, digit ``i`` (bits ``b_i`` up)
    truncated geometric with ``P(d) ~ e^{-lam 2^{b_i} d}``. The *top table* draws (sign, ``H``)
    for ``H < M = 2^h - 1`` and one *overflow* outcome (``H >= M``, probability ``A^M``); after
    an overflow, a sign table (``P(-) = a/(1 + a)``) and a continuation table (``H - M`` given
    ``H >= M``: ``j < M`` or overflow again, memoryless) finish the draw, so no tail is cut off.
    ``K`` and ``h`` are chosen so that ``A^M`` lies in ``[e^{-24}, e^{-8}]`` (``~e^{-16}`` at
    SHE's default rate ``2^-10``: ``K = 8``, ``M = 63``).

    **Each table draw** uses 16 random bits ``u``: its top ``t`` bits pick a slot (``2^t``
    slots), the other ``16 - t`` bits ``r`` are compared with the slot's threshold ``c``: ``r <
    c`` keeps the slot's own outcome, ``r > c`` its alias, and a tie ``r = c`` (probability
    ``2^{t-16}``) is decided by one fresh 64-bit word ``f < c_lo``. Every outcome ``j`` thus has
    probability ``P~(j) = n_j / 2^80`` exactly, ``n_j`` the integer masses the alias tables were
    built from (Walker 1977; Vose, IEEE TSE 1991), ``n_j`` = ``2^80 P(j)`` rounded. Random
    bits per draw of ``D``: 16 per table (``2`` tables at the default rate: one 64-bit word for two
    draws of ``D``), plus rare tie and overflow words.

    **Sampler error, accounted for.** ``log P~(d) - log P(d) = e0(d) + rho max(0, q(d) - 1)``
    with ``e0`` over a finite set of table errors, ``rho`` the continuation table's overflow
    error and ``q = floor(G / (M 2^K))`` the number of overflows; hence for ``|d - d'| =
    shift``: ``log P~(d)/P~(d') <= lam shift + osc + |rho| ceil(shift / B)``, ``B = M 2^K``,
    ``osc = max e0 - min e0`` (:meth:`excess`, from the integer tables themselves).

    Parameters
    ----------
    rate : float
        ``lam`` in ``[2^-16, 20]``.
    """

    def __init__(self, rate: float) -> None:
        lam = _check_rate(rate)
        self.rate = lam
        self.kappa = 2.0 / (1.0 + math.exp(-lam))
        # K low bits, top table of 2^h outcomes per sign (M = 2^h - 1 of them values of H)
        K = 0
        while True:
            lam_h = lam * 2.0 ** K
            h = max([hh for hh in range(1, 7) if (2 ** hh - 1) * lam_h <= 24.0] or [1])
            if (2 ** h - 1) * lam_h >= 8.0:
                break
            K += 1
        M = 2 ** h - 1
        self.K, self.h, self.M = K, h, M
        self.B = M << K  # G values per overflow
        digits, b = [], 0  # low digits: (bits, offset)
        n_low = -(-K // 9)
        for i in range(n_low):
            c = K // n_low + (1 if i < K % n_low else 0)
            digits.append((c, b))
            b += c
        exact = self._target_logs(lam, K, h, digits)  # 40 significant digits
        top, cont, sign = (np.array([float(v) for v in exact[nm]]) for nm in ("top", "cont", "sign"))
        lows = [np.array([float(v) for v in exact[f"low{i}"]]) for i in range(len(digits))]
        self._digits = digits
        specs = [("top", top, h + 1), ("cont", cont, h), ("sign", sign, 1)] + [
            (f"low{i}", lows[i], c) for i, (c, _) in enumerate(digits)]
        self._units, self._err, tables = {}, {}, {}
        for name, lp, bits in specs:
            units = _to_units(lp)
            keep, alias = _alias_table(units, bits)
            live = np.isfinite(lp)
            err = np.full(lp.size, np.nan)  # log(drawn / target), from the exact logs
            with localcontext() as ctx:
                ctx.prec = 40
                ln2 = Decimal(2).ln()
                err[live] = [float(Decimal(units[i]).ln() - _DIGIT_UNITS * ln2 - exact[name][i])
                             for i in np.flatnonzero(live)]
            self._units[name], self._err[name] = units, err
            tables[name] = (keep, alias, bits)
        # kernel tables, draw order: top, then the low digits (least significant first)
        order = ["top"] + [f"low{i}" for i in range(len(digits))]
        self.J = len(order)
        width = max(2 ** tables[nm][2] for nm in order + ["cont", "sign"])

        def pack(names: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            hi = np.zeros((len(names), width), dtype=np.uint32)
            lo = np.zeros((len(names), width), dtype=np.uint64)
            bits = np.zeros(len(names), dtype=np.int64)
            for r_, nm in enumerate(names):
                keep, alias, bt = tables[nm]
                for i in range(2 ** bt):  # keep = c 2^64 + c_lo, c <= 2^(16 - bits)
                    hi[r_, i] = (keep[i] >> 64) | (alias[i] << 16)
                    lo[r_, i] = keep[i] & ((1 << 64) - 1)
                bits[r_] = bt
            return hi, lo, bits

        self._hi, self._lo, self._bits = pack(order)
        # the kernel's tables: shifts, thresholds, and per slot the values of keep / alias

        self._local = threading.local()
        self._shifts = (16 - self._bits).astype(np.int64)
        self._thr = np.ascontiguousarray((self._hi & np.uint32(0xFFFF)).astype(np.int32))
        self._ftables: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._val = np.zeros((self.J, 2 * width), dtype=np.int64)
        for r_, nm in enumerate(order):
            keep, alias, bt = tables[nm]
            for i in range(2 ** bt):
                for side, o in ((0, i), (1, alias[i])):
                    if r_ == 0:  # top: outcome s 2^h + H -> 2 base + s, base = H 2^K or -(H 2^K) - 1
                        sgn, H = o >> h, o & ((1 << h) - 1)
                        v = (DIGIT_OVER if H == M else
                             2 * ((H << K) if sgn == 0 else -(H << K) - 1) + sgn)
                    else:
                        v = o << digits[r_ - 1][1]
                    self._val[r_, 2 * i + side] = v
        self._chi, self._clo, _ = pack(["cont", "sign"])
        # ---- errors of the drawn law against the target (natural logs) ----
        e_low_max = sum(float(np.nanmax(self._err[f"low{i}"])) for i in range(len(digits)))
        e_low_min = sum(float(np.nanmin(self._err[f"low{i}"])) for i in range(len(digits)))
        et, ec, es = self._err["top"], self._err["cont"], self._err["sign"]
        inner = np.r_[et[:M], et[2 ** h: 2 ** h + M]]
        over = et[M] + np.r_[es.max() + ec[:M].max(), es.min() + ec[:M].min()]
        self.osc = float(e_low_max - e_low_min + max(inner.max(), over.max()) - min(inner.min(), over.min()))
        self.rho = float(ec[M])
        self._log_p0 = math.log(math.tanh(lam / 2.0))  # log P(D = d) + lam |d|, every d

    @staticmethod
    def _target_logs(lam: float, K: int, h: int, digits: list[tuple[int, int]]) -> dict[str, list[Decimal]]:
        """The target probabilities of every table's outcomes as natural logs (``Decimal``, 40
        significant digits, ``-inf`` for padding), so that the tables' errors are known to far
        better than their size (``~1e-14`` for the smallest cells)."""
        with localcontext() as ctx:
            ctx.prec = 40
            lam_d = Decimal(lam)  # the binary float, exactly
            one = Decimal(1)
            log_pos = -(one + (-lam_d).exp()).ln()  # P(D >= 0) = 1 / (1 + a)
            log_neg = -lam_d + log_pos
            lam_h = lam_d * 2 ** K
            log1m_A = (one - (-lam_h).exp()).ln()
            M = 2 ** h - 1
            ninf = Decimal("-Infinity")
            top = [ninf] * 2 ** (h + 1)
            for j in range(M):
                top[j] = log_pos + log1m_A - j * lam_h
                top[2 ** h + j] = log_neg + log1m_A - j * lam_h
            top[M] = -M * lam_h
            out = {"top": top, "cont": [log1m_A - j * lam_h for j in range(M)] + [-M * lam_h],
                   "sign": [log_pos, log_neg]}
            for i, (c, b) in enumerate(digits):
                r = lam_d * 2 ** b
                norm = (one - (-r).exp()).ln() - (one - (-r * 2 ** c).exp()).ln()
                out[f"low{i}"] = [norm - r * d for d in range(2 ** c)]
        return out

    def __repr__(self) -> str:
        return f"DigitLaplace(rate={self.rate!r}, K={self.K}, M={self.M})"

    # ---- the law ----------------------------------------------------------------------------
    def log_pmf(self, d: ArrayLike) -> np.ndarray:
        """``log P(D = d) = log tanh(lam/2) - lam |d|`` (the target law)."""
        return self._log_p0 - self.rate * np.abs(np.asarray(d, dtype=float))

    def log_tail(self, m: ArrayLike) -> np.ndarray:
        """``log P(D >= m) = log P(D <= -m) = -lam m - log(1 + a)`` for ``m >= 1``."""
        return -self.rate * np.asarray(m, dtype=float) - math.log1p(math.exp(-self.rate))

    def excess(self, shift: ArrayLike) -> np.ndarray:
        """Bound on ``log(P~(d)/P~(d')) - log(P(d)/P(d'))`` over ``|d - d'| = shift``:
        ``osc + |rho| ceil(shift / B)`` (0 for ``shift = 0``)."""
        s = np.abs(np.asarray(shift, dtype=float))
        return np.where(s > 0, self.osc + abs(self.rho) * np.ceil(s / self.B), 0.0)

    def drawn_pmf(self, d: ArrayLike) -> np.ndarray:
        """The exact law the sampler draws, ``P~(D = d)`` (float64), from the integer masses."""
        d = np.asarray(d, dtype=np.int64)
        neg = d < 0
        G = np.where(neg, -d - 1, d)
        p = lambda nm: np.array(self._units[nm], dtype=float) / 2.0 ** _DIGIT_UNITS  # noqa: E731
        out = np.ones(d.shape)
        for i, (c, b) in enumerate(self._digits):
            out *= p(f"low{i}")[(G >> b) & ((1 << c) - 1)]
        H = G >> self.K
        M, h = self.M, self.h
        top, cont, sign = p("top"), p("cont"), p("sign")
        q = H // M
        first = top[np.minimum(H, M - 1) + (neg << h)]
        later = top[M] * sign[neg.astype(int)] * cont[M] ** np.maximum(q - 1, 0) * cont[H % M]
        return out * np.where(q == 0, first, later)

    # ---- drawing ----------------------------------------------------------------------------
    @staticmethod
    def _halves(words: np.ndarray) -> np.ndarray:
        """The 16-bit draws of a block: word ``w`` gives ``w & 0xFFFF, w >> 16 & 0xFFFF, ...``."""
        return words.view(np.uint16) if _LITTLE else words.byteswap().view(np.uint16)

    def _block_numpy(self, words: np.ndarray, x: np.ndarray, s: int, g: np.float32, out: np.ndarray,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """NumPy twin of the compiled kernels (:mod:`localpriv.mechanisms._client_kernels`): the
        same values from the same words (the same tie words, drawn in the same order). Returns
        the overflowed entries ``(index, low bits)``."""

        rows, k = out.shape
        n, J = rows * k, self.J
        topf, lowf, _, _ = self._float_tables(g)
        h = self._halves(words)[:n * J].reshape(n, J)
        slots, sides, ties = [], [], []
        for jj in range(J):
            u = h[:, jj].astype(np.int32)
            c = u >> int(self._shifts[jj])
            r = u & np.int32((1 << int(self._shifts[jj])) - 1)
            th = self._thr[jj].take(c)
            slots.append(c)
            sides.append(r >= th)
            ties.append(np.flatnonzero(r == th))
        i0 = 2 * (2 * slots[0] + sides[0])
        v = topf.take(i0)
        if J > 1:
            low = lowf[0].take(2 * slots[1] + sides[1])
            for jj in range(2, J):
                low += lowf[jj - 1].take(2 * slots[jj] + sides[jj])
            v += topf.take(i0 + 1) * low
        # entries with a tie (decided by fresh words, in entry and draw order) or an overflow
        e_tie = np.concatenate(ties)
        j_tie = np.repeat(np.arange(J), [t.size for t in ties])
        order = np.lexsort((j_tie, e_tie))
        e_tie, j_tie = e_tie[order], j_tie[order]
        bad = np.union1d(e_tie, np.flatnonzero(np.isnan(v)))
        if bad.size:
            side = np.stack([sd[bad] for sd in sides], axis=1).astype(np.int64)
            slot = np.stack([c[bad] for c in slots], axis=1).astype(np.int64)
            if e_tie.size:
                f = rng.bit_generator.random_raw(e_tie.size)
                row = np.searchsorted(bad, e_tie)
                c = slot[row, j_tie]
                side[row, j_tie] = f >= self._lo[j_tie, c]
            vals = [self._val[jj, 2 * slot[:, jj] + side[:, jj]] for jj in range(J)]
            v0 = vals[0]
            lowb = sum(vals[1:]) if J > 1 else np.zeros(bad.size, dtype=np.int64)
            neg = v0 & 1
            D = (v0 >> 1) + (lowb ^ -neg) + neg
            over = v0 == DIGIT_OVER
            v[bad] = np.where(over, np.nan, D.astype(np.float32) * np.float32(g))
            over_idx, over_low = bad[over], lowb[over]
        else:
            over_idx = over_low = np.zeros(0, dtype=np.int64)
        out[...] = v.reshape(rows, k)
        out[np.arange(rows), x] += np.float32(s) * np.float32(g)
        return over_idx, over_low

    def _overflows(self, idx: np.ndarray, low: np.ndarray, rng: np.random.Generator, cap: int) -> np.ndarray:
        """Signed ``D`` of the overflowed entries (``H >= M``), in index order: the sign, then
        rounds of the continuation table (one fresh 64-bit word per active entry per round, its
        top 16 bits the draw; tie words after each round's, in order), stopped once ``G >= cap``."""
        n = idx.size
        sign = self._draw_fresh(1, np.arange(n), rng)  # row 1 of the chain tables: the sign
        H = np.full(n, self.M, dtype=np.int64)
        active = np.arange(n)
        while active.size:
            j = self._draw_fresh(0, active, rng)
            done = j < self.M
            H[active[done]] += j[done]
            H[active[~done]] += self.M
            nxt = active[~done]
            active = nxt[(H[nxt] << self.K) < cap]
        G = np.minimum(low + (H << self.K), cap)
        return np.where(sign == 1, -np.minimum(G + 1, cap), G)

    def _draw_fresh(self, row: int, active: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One draw per entry of ``active`` from chain table ``row``, each from a fresh word."""
        w = rng.bit_generator.random_raw(active.size)
        bt = int(self._bits_chain[row])
        u = (w >> np.uint64(48)).astype(np.int64)
        slot = u >> (16 - bt)
        r = u & ((1 << (16 - bt)) - 1)
        packed = self._chi[row][slot].astype(np.int64)
        thr, alias = packed & 0xFFFF, packed >> 16
        out = np.where(r < thr, slot, alias)
        tie = np.flatnonzero(r == thr)
        if tie.size:
            f = rng.bit_generator.random_raw(tie.size)
            out[tie] = np.where(f < self._clo[row][slot[tie]], slot[tie], alias[tie])
        return out

    @property
    def _bits_chain(self) -> tuple[int, int]:
        return (self.h, 1)

    def _scratch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-thread buffers of a block of ``n`` entries (reused: fresh memory costs page faults)."""
        sc = getattr(self._local, "sc", None)
        if sc is None or sc[0].size < n:
            sc = (np.empty(n, dtype=np.int64), np.empty(-(-n * self.J // 4), dtype=np.uint64))
            self._local.sc = sc
        return sc

    def _float_tables(self, g: float | np.floating[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The compiled kernel's value tables for grid ``g`` (float32, exact): per top slot and
        side ``(base g, +-g)`` (NaN for the overflow), per digit slot and side ``digit 2^offset``."""

        key = float(g)
        if key not in self._ftables:
            v0 = self._val[0]
            over = v0 == DIGIT_OVER
            top = np.empty(2 * v0.size, dtype=np.float32)
            top[0::2] = np.where(over, np.nan, (v0 >> 1) * key)
            top[1::2] = np.where(v0 & 1, -key, key)
            low = self._val[1:].astype(np.float32) if self.J > 1 else np.zeros((1, 2), np.float32)
            # three sides per slot (keep, tie -> NaN, alias) for the two-table kernel
            top3 = np.full((v0.size // 2, 3, 2), np.nan, dtype=np.float32)
            top3[:, 0], top3[:, 2] = top.reshape(-1, 2, 2)[:, 0], top.reshape(-1, 2, 2)[:, 1]
            low3 = np.full((low.shape[1] // 2, 3), np.nan, dtype=np.float32)
            low3[:, 0], low3[:, 2] = low[0].reshape(-1, 2)[:, 0], low[0].reshape(-1, 2)[:, 1]
            self._ftables[key] = (top, low, top3.ravel(), low3.ravel())
        return self._ftables[key]

    def rows_into(self, x: ArrayLike, s: int, g: float | np.float32, clamp: int, out: np.ndarray,
                  rng: np.random.Generator) -> None:
        """``out[i, y] = float32(clip([y = x_i] s + D_iy, -clamp, clamp)) * g`` (float32, C-contiguous
        ``rows x k``; ``g`` a power of two, so exact), the ``D`` i.i.d. from this law.

        Blocks of about :data:`DIGIT_BLOCK` entries (whole rows): per block ``ceil(J e / 4)``
        words of ``rng``'s bit stream (``e`` entries, ``J`` draws of 16 bits each), then one fresh
        word per tie in (entry, draw) order, then the overflowed entries' words
        (:meth:`_overflows`). A compiled kernel (:mod:`localpriv.mechanisms._client_kernels`) and
        its NumPy twin compute the same values from the same words.
        """

        if out.ndim != 2 or out.dtype != np.float32 or not out.flags.c_contiguous:
            raise LocalPrivError("rows_into needs a C-contiguous rows x k float32 output")
        rows, k = out.shape
        x = np.asarray(x, dtype=np.int64)
        if x.shape != (rows,):
            raise LocalPrivError(f"rows_into: {x.size} values for {rows} rows")
        g = np.float32(g)
        if not (s >= 0 and clamp >= s + 2 ** self.K * 2 ** self.h):
            raise LocalPrivError(f"digit sampler: clamp {clamp} too small for one-hot {s}")
        step = max(1, DIGIT_BLOCK // k)
        compiled = _client_kernels.use_compiled(rows * k)
        bg = rng.bit_generator
        if compiled:
            kern = _client_kernels.kernels()
            bad_buf, words_buf = self._scratch(min(rows, step) * k)
            topf, lowf, top3, low3 = self._float_tables(g)
            pcg = type(bg) is np.random.PCG64  # its words computed in a kernel: the same words
            st = np.empty(4, dtype=np.uint64)
        for lo in range(0, rows, step):
            hi = min(rows, lo + step)
            o, xs = out[lo:hi], x[lo:hi]
            n_words = -(-(hi - lo) * k * self.J // 4)
            if not compiled:
                words = bg.random_raw(n_words)
                over, low = self._block_numpy(words, xs, s, g, o, rng)
            else:
                flat = o.reshape(-1)
                if pcg:
                    words = words_buf[:n_words]
                    with bg.lock:
                        full = bg.state
                        sv, inc = full["state"]["state"], full["state"]["inc"]
                        st[:] = [sv >> 64, sv & _M64, inc >> 64, inc & _M64]
                        kern["pcg64_fill"](st, _client_kernels.pcg64_jump4(inc), words)
                        full["state"]["state"] = (int(st[0]) << 64) | int(st[1])
                        bg.state = full
                else:
                    words = bg.random_raw(n_words)
                h16 = self._halves(words)
                if self.J == 2:
                    tabs = (self._thr[0], self._thr[1], top3, low3, flat, bad_buf)
                    shape = (int(self._shifts[0]), int(self._shifts[1]))
                    if shape in ((9, 8), (9, 7)):  # SHE's default grids: constant shifts
                        nbad, nties = kern[f"digit_pass1_two_{shape[0]}{shape[1]}"](h16, *tabs)
                    else:
                        nbad, nties = kern["digit_pass1_two_any"](h16, *shape, *tabs)
                else:
                    nbad, nties = kern["digit_pass1"](h16, self._shifts, self._thr, topf, lowf, self.J, flat,
                                                      bad_buf)
                n_over = 0
                if nbad:
                    tie_words = bg.random_raw(nties)
                    n_over = kern["digit_pass2"](h16, self._shifts, self._thr, self._val, self._lo, self.J, nbad,
                                                 bad_buf, tie_words, g, flat)
                kern["one_hot"](o, xs, np.float32(s) * g)
                over, low = bad_buf[:n_over] >> 24, bad_buf[:n_over] & ((1 << 24) - 1)
            if over.size:
                D = self._overflows(over, low, rng, clamp + s)
                r_, c_ = np.divmod(over, k)
                D += np.where(c_ == xs[r_], s, 0)
                o[r_, c_] = np.clip(D, -clamp, clamp).astype(np.float32) * g

    def signed(self, size: int, rng: np.random.Generator, cap: int = 1 << 24) -> np.ndarray:
        """``size`` i.i.d. draws of ``D`` (int64), magnitudes stopped at ``cap <= 2^24`` (for
        tests and audits: the draws :meth:`rows_into` makes, with no one-hot, rows of 256)."""
        size, k = int(size), 256
        rows = -(-size // k)
        out = np.empty((rows, k), dtype=np.float32)
        self.rows_into(np.zeros(rows, dtype=np.int64), 0, 1.0, int(cap), out, rng)
        return out.ravel()[:size].astype(np.int64)


@functools.lru_cache(maxsize=64)
def digit_laplace(rate: float) -> DigitLaplace:
    """The (cached) :class:`DigitLaplace` sampler of a rate."""
    return DigitLaplace(rate)
