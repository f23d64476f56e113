"""Compiled kernels (numba) of the clients (issue 22, item 4), imported and compiled on first use.

Nothing here is imported by ``import localpriv``: :func:`kernels` compiles (or loads from numba's
on-disk cache, ``cache=True``; in memory where no cache location is writable) the functions at
their first use, and the samplers only ask for them on calls of at least :data:`COMPILED_MIN`
users. ``LOCALPRIV_NUMBA=0`` (or ``no``/``off``/``false``) disables them; every kernel has a NumPy
twin in :mod:`localpriv.mechanisms._sampling` computing the same integers, so the reports are
the same bytes on either path (tested).

Kernels:

* :func:`_grr_chunk` -- the common case of the exact GRR draw
  (:func:`localpriv.mechanisms._sampling.grr_into`, used by k-RR): from one 64-bit word ``w``
  per user, keep ``x`` when ``w >> 32 < t``, else report ``r + [r >= x]`` with
  ``r = (l s) >> 32`` (``l`` the low 32 bits, ``s = g - 1``; Lemire's multiply-shift). Users
  whose word ties with ``t`` or whose replacement would be rejected
  (``(l s) mod 2^32 < 2^32 mod s``) are only counted (at most ``2^-32 + s 2^-32`` per user); the
  caller lists them in NumPy and resolves them exactly.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["kernels", "enabled", "COMPILED_MIN"]

#: calls with fewer users than this use the NumPy path (no import of numba, no compile)
COMPILED_MIN = 1 << 14

_KERNELS = None


def enabled() -> bool:
    """False when ``LOCALPRIV_NUMBA`` is ``0``/``no``/``off``/``false`` (compiled paths disabled)."""
    return os.environ.get("LOCALPRIV_NUMBA", "1").strip().lower() not in ("0", "no", "off", "false")


_U32 = np.uint64(32)
_MASK = np.uint64(0xFFFFFFFF)


def _grr_chunk(raw, x, t, s, thr, out):
    """``out[i]`` from ``raw[i]`` (uint64) and ``x[i]`` (int64), branch-free (``s`` and ``thr``
    are uint32, so the multiply is a 32 x 32 -> 64-bit one); returns how many users tie with
    ``t`` or have a rejected replacement (the caller then lists and resolves them)."""
    bad = 0
    s64 = np.uint64(s)
    thr64 = np.uint64(thr)
    for i in range(raw.size):
        w = raw[i]
        h = w >> _U32
        m = np.uint64(np.uint32(w & _MASK)) * s64
        r = np.int64(m >> _U32)
        xi = x[i]
        other = r + np.int64(r >= xi)
        out[i] = xi if h < t else other
        bad += np.int64(h == t) | np.int64((m & _MASK) < thr64)
    return bad


def kernels() -> dict:
    """The compiled kernels (name -> function), compiled or loaded at the first call."""
    global _KERNELS
    if _KERNELS is None:
        import numba

        def jit(f):
            try:
                return numba.njit(cache=True, nogil=True)(f)
            except (RuntimeError, OSError):  # pragma: no cover - no writable cache location
                return numba.njit(cache=False, nogil=True)(f)

        _KERNELS = {"grr_chunk": jit(_grr_chunk)}
    return _KERNELS


def use_compiled(n: int) -> bool:
    """Whether a call over ``n`` users takes the compiled path."""
    return n >= COMPILED_MIN and enabled()
