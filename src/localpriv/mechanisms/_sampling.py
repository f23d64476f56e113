"""Exact, fast random draws shared by the clients (the mechanisms' samplers)."""
from __future__ import annotations

from math import ceil

import numpy as np

from .._validation import LocalPrivError

__all__ = ["bernoulli_bits"]

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
