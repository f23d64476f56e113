"""Exact, fast random draws shared by the clients (the mechanisms' samplers).

Every sampler here decides its outcome by comparing the generator's raw integers with integer
thresholds, so the law it draws is known exactly (as dyadic rationals), and the privacy level a
mechanism computes can be that of the bits it releases (issue 15; Mironov, CCS 2012, "On
significance of the least significant bits for differential privacy", shows what floating-point
noise samplers leak).
"""
from __future__ import annotations

import functools
import math
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from math import ceil

import numpy as np

from .._validation import LocalPrivError
from ..rng import spawn_generators

__all__ = ["bernoulli_bits", "client_inputs", "grr_into", "DiscreteLaplace", "discrete_laplace",
           "power_of_two_grid", "default_grid", "fill_in_streams", "STREAMS", "CLIENT_CHUNK"]

_LN2 = math.log(2.0)

_U16 = 1 << 16


#: users per chunk of the clients that draw one row per user (a constant, so that the reports are a
#: function of the seed alone; scratch memory is bounded by it, not by the number of users)
CLIENT_CHUNK = 1 << 16


def client_inputs(mech, x) -> np.ndarray:
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


def bernoulli_bits(shape, q: float, rng, p_true: float | None = None, truth=None) -> np.ndarray:
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
        u = rng.random(shape)
        return u < q if truth is None else u < np.where(truth, p_true, q)
    u = rng.bit_generator.random_raw(ceil(n / 4)).view(np.uint16)[:n].reshape(shape)
    tq = int(q * _U16)
    if truth is None:
        thr = np.uint16(tq)
    else:
        tp = int(p_true * _U16)
        thr = np.where(truth, np.uint16(tp), np.uint16(tq))
    bits = u < thr
    ties = np.flatnonzero(u == thr)
    if ties.size:  # the fractional part of the threshold, decided by a fresh uniform
        frac = (q * _U16 - tq if truth is None
                else np.where(truth.ravel()[ties], p_true * _U16 - tp, q * _U16 - tq))
        bits.ravel()[ties] = rng.random(ties.size) < frac
    return bits




_U32 = np.uint64(32)
_M32 = np.uint64(0xFFFFFFFF)
_TWO32 = float(1 << 32)
_TWO53 = float(1 << 53)


def _grr_chunk_numpy(raw, x, t, s, thr, out) -> np.ndarray:
    """NumPy twin of :func:`localpriv.mechanisms._client_kernels._grr_chunk` (the same integers):
    writes the common case into ``out`` and returns the users to resolve exactly."""
    h = raw >> _U32
    m = (raw & _M32) * s
    r = (m >> _U32).astype(np.int64)
    r += r >= x
    np.copyto(r, x, where=h < t)
    out[...] = r
    return np.flatnonzero((h == t) | ((m & _M32) < thr))


def _grr_resolve(idx, raw, x, t, tie_thr, s, thr, out, rng) -> None:
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


def grr_into(values: np.ndarray, g: int, p_keep: float, rng, out: np.ndarray) -> None:
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
    from . import _client_kernels

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

    def __init__(self, rate: float, kappa: float | None = None):
        lam = float(rate)
        if not MIN_RATE <= lam <= MAX_RATE:
            raise LocalPrivError(f"discrete Laplace rate (eps times the grid step) must lie in "
                                 f"[2^-16, {MAX_RATE:g}], got {lam:g}: eps is too small or too large "
                                 f"for a grid of powers of two")
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
    def log_pmf(self, d) -> np.ndarray:
        """``log P(D = d)`` of the target law: ``log tanh(lam/2) - lam |d|`` (default ``kappa``)."""
        d = np.abs(np.asarray(d, dtype=float))
        return np.where(d == 0, self._log_p0, self._log_c - self.rate * d)

    def log_tail(self, m) -> np.ndarray:
        """``log P(D >= m) = log P(D <= -m) = log(kappa/2) - lam m`` for ``m >= 1`` (target law;
        ``-lam m - log(1 + a)`` by default)."""
        return math.log(self.kappa / 2.0) - self.rate * np.asarray(m, dtype=float)

    def excess(self, shift) -> np.ndarray:
        """Bound on ``log(p~(d)/p~(d')) - log(p(d)/p(d'))`` over all ``d, d'`` with
        ``|d - d'| = shift`` (grid steps; 0 for ``shift = 0``): ``osc + |rho| ceil(shift / B)``."""
        s = np.abs(np.asarray(shift, dtype=float))
        return np.where(s > 0, self.osc + abs(self.rho) * np.ceil(s / self.B), 0.0)

    def drawn_pmf(self, d) -> np.ndarray:
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
    def _tail(self, n: int, rng, cap: int) -> np.ndarray:
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

    def signed(self, size: int, rng, cap: int = 1 << 62) -> np.ndarray:
        """``size`` i.i.d. draws of ``D`` with magnitudes stopped at ``cap`` (``|D| >= cap`` is
        returned as ``+-cap``: give a ``cap`` beyond which the caller's clamp makes every value
        alike). int32 when ``cap < 2^31``, else int64."""
        out = np.empty(int(size), dtype=np.int32 if int(cap) < 1 << 31 else np.int64)
        self.signed_into(out, rng, cap)
        return out

    def signed_into(self, out: np.ndarray, rng, cap: int = 1 << 62) -> int:
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

    def _scratch(self, size: int):
        sc = getattr(self._local, "sc", None)
        if sc is None or sc["u"].size < size:
            n = max(size, 1 << 12)
            sc = {"u": np.empty(n, np.uint32), "m": np.empty(n, np.int32), "f": np.empty(n, self._fdtype),
                  "d": np.empty(n, np.uint32), "pair": np.empty(n, np.uint64), "flag": np.empty(n, bool)}
            self._local.sc = sc
        return sc

    def _block(self, out: np.ndarray, rng, cap: int) -> int:
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
        tail_at = tail_mags = None
        if flag.size:
            mf, tail_at, tail_mags, top = self._exact(v[flag], flag, rng, cap)
            m[flag] = mf
        neg = raw.view(np.int32)
        neg >>= 31  # 0 or -1 (the sign bit; raw is ours, used up here)
        m ^= neg
        m -= neg  # -m where the sign bit is set; 0 stays +0
        if m is not out:
            out[...] = m
        if tail_at is not None:
            out[tail_at] = np.where(neg[tail_at] < 0, -tail_mags, tail_mags)
        return top

    def _exact(self, vf, flag, rng, cap):
        """Magnitudes of the draws ``flag`` (31 random bits ``vf`` each) by the exact search on
        the integers: ties with a threshold's top bits decided by 32 more bits, the tail cell by
        :meth:`_tail`. Returns ``(magnitudes, tail indices or None, tail magnitudes, top)``."""
        B = self.B
        top = B - 1
        tail_at = tail_mags = None
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


def power_of_two_grid(grid, name: str, min_log2: int) -> float:
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


def fill_in_streams(n_rows: int, row_items: int, fill, rng, chunk_items: int = 1 << 17) -> None:
    """Run ``fill(lo, hi, gen)`` over row chunks ``[lo, hi)`` of about ``chunk_items`` items.

    ``fill`` must write rows ``lo:hi`` only and draw from ``gen`` only. Small calls
    (``n_rows * row_items < 2^21``) run in order with ``rng`` itself. Larger ones spawn
    ``STREAMS`` child generators of the same kind from ``rng``
    (:func:`localpriv.rng.spawn_generators`: ``SeedSequence.spawn`` for seeded generators, the
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

    def run(j):
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
