"""Exact, fast random draws shared by the clients (the mechanisms' samplers)."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from math import ceil, log

import numpy as np

from .._validation import LocalPrivError

__all__ = ["bernoulli_bits", "laplace_float32_into", "fill_in_streams", "STREAMS"]

_U16 = 1 << 16


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


#: below ``|r + 1/2| < 2^_TAIL_BITS`` a Laplace magnitude is redrawn from its exact conditional law
_TAIL_BITS = 20
_LN2 = log(2.0)


def laplace_float32_into(out: np.ndarray, scale: float, rng) -> None:
    """Fill the float32 vector ``out`` with i.i.d. Laplace(``scale``) draws, 32 random bits each.

    A Laplace variable is ``S scale E`` with ``S`` a fair sign and ``E = -ln U`` standard
    exponential, ``U`` uniform on ``(0, 1)``. Each draw takes one 32-bit word ``r`` of the
    generator's raw stream, read as a signed integer: ``r + 1/2`` runs over the symmetric set
    ``{-2^31 + 1/2, ..., 2^31 - 1/2}``, so its sign is ``S`` and ``h + 1/2 = |r + 1/2|`` (``h``
    uniform on ``0..2^31 - 1``, independent of ``S``) is the midpoint of the cell
    ``[h, h + 1) / 2^31`` that contains ``U``.

    * ``h >= 2^20``: ``E = 31 ln 2 - ln(h + 1/2)``. Over the cell ``-ln U`` varies by
      ``ln(1 + 1/h) <= 2^-20``, so the midpoint is exact to float32 rounding of the result.
    * ``h < 2^20``, i.e. ``U < 2^-11`` (probability ``2^-11``): ``E`` is redrawn from its exact
      conditional law ``11 ln 2 + Exp(1)`` (the exponential law is memoryless) in float64, so
      the tail is not cut off at a fixed multiple of ``scale``.

    Vectorized in a handful of in-place float32 passes (one SIMD ``log``); the sign goes in by
    OR-ing the sign bit. ~2x cheaper than NumPy's float32 exponential followed by a sign flip.
    """
    if out.dtype != np.float32 or out.ndim != 1 or not out.flags.c_contiguous:
        raise LocalPrivError("laplace_float32_into needs a contiguous 1-D float32 array")
    m = out.size
    raw = rng.bit_generator.random_raw((m + 1) // 2).view(np.int32)[:m]
    out[...] = raw  # r as float32: exact below 2^24, correctly rounded above
    out += np.float32(0.5)
    sign = raw.view(np.uint32)
    sign &= np.uint32(0x80000000)  # S, kept as the float sign bit (raw is ours: reused in place)
    np.abs(out, out=out)
    tail = np.flatnonzero(out < np.float32(1 << _TAIL_BITS))
    np.log(out, out=out)
    out *= np.float32(-scale)
    out += np.float32(scale * 31 * _LN2)
    if tail.size:
        e = rng.standard_exponential(tail.size)
        out[tail] = (scale * ((31 - _TAIL_BITS) * _LN2 + e)).astype(np.float32)
    bits = out.view(np.uint32)
    bits |= sign


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
    (``n_rows * row_items < 2^21``) run in order with ``rng`` itself. Larger ones draw one seed
    from ``rng`` and spawn ``STREAMS`` child generators of the same bit-generator type
    (``numpy.random.SeedSequence.spawn``, the independent streams NumPy recommends for parallel
    generation); chunks (then at least ``2^19`` items) go to stream ``c mod STREAMS`` and each
    stream fills its chunks in order, so the result is a function of the seed alone. The streams
    run on up to ``STREAMS`` threads (NumPy releases the GIL while generating and in its
    ufuncs); ``LOCALPRIV_THREADS=1`` runs them one after another with identical results. Bit
    generators that cannot be seeded from a ``SeedSequence`` fall back to the single stream.
    """
    gens = None
    if n_rows * row_items >= _STREAM_MIN_ITEMS:
        seed = np.random.SeedSequence(rng.integers(0, 1 << 63, size=4).tolist())
        try:
            gens = [np.random.Generator(type(rng.bit_generator)(s)) for s in seed.spawn(STREAMS)]
        except TypeError:
            gens = None
        else:  # bigger chunks in streams: fewer hand-offs of the GIL between the threads
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
