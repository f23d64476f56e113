"""Compiled kernels (numba) of the clients, imported and compiled on first use.

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
* :func:`_pass1_two` (and its specializations), :func:`_digit_pass1`, :func:`_digit_pass2`, :func:`_one_hot` -- SHE's
  rows from :class:`localpriv.mechanisms._sampling.DigitLaplace`'s alias tables (16 random bits
  per table draw; ties with a threshold, rare, decided by one fresh word each in a second pass);
  NumPy twin ``DigitLaplace._block_numpy``.
* :func:`_pcg64_fill` -- the words NumPy's ``PCG64.random_raw`` would return (same state update,
  the 128-bit product through an LLVM ``i128`` multiply), four interleaved chains so that the
  multiplies overlap; the sampler reads the generator's state, fills, and writes the state back
  under the generator's lock. Used only for ``PCG64`` itself (tested equal to ``random_raw``).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from localpriv.utils.jit import numba_enabled

__all__ = ["kernels", "enabled", "COMPILED_MIN"]

#: calls with fewer users than this use the NumPy path (no import of numba, no compile)
COMPILED_MIN = 1 << 14

_KERNELS: dict[str, Callable[..., Any]] | None = None

if TYPE_CHECKING:
    from typing import TypeAlias

    #: a counter of the kernels: a Python int, or a NumPy integer once NumPy scalars are added to it
    _Count: TypeAlias = int | np.integer[Any]


enabled = numba_enabled


_U32 = np.uint64(32)
_MASK = np.uint64(0xFFFFFFFF)


def _grr_chunk(raw: np.ndarray, x: np.ndarray, t: np.uint64, s: np.uint32, thr: np.uint32, out: np.ndarray) -> _Count:
    """``out[i]`` from ``raw[i]`` (uint64) and ``x[i]`` (int64), branch-free (``s`` and ``thr``
    are uint32, so the multiply is a 32 x 32 -> 64-bit one); returns how many users tie with
    ``t`` or have a rejected replacement (the caller then lists and resolves them)."""
    bad: _Count = 0
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


#: PCG64's multiplier (O'Neill 2014; NumPy's ``PCG64``), high and low 64 bits
_PCG_MUL_HI = np.uint64(2549297995355413924)
_PCG_MUL_LO = np.uint64(4865540595714422341)
_U58 = np.uint64(58)
_U63 = np.uint64(63)
_U64 = np.uint64(64)


def _umul128(a: np.uint64,  # pragma: no cover - replaced by a numba intrinsic in kernels()
             b: np.uint64) -> tuple[np.uint64, np.uint64]:
    p = int(a) * int(b)
    return np.uint64(p >> 64), np.uint64(p & 0xFFFFFFFFFFFFFFFF)


def _pcg_affine(xh: np.uint64, xl: np.uint64, mh: np.uint64, ml: np.uint64, ch: np.uint64,
                cl: np.uint64) -> tuple[np.uint64, np.uint64]:
    """``m x + c`` mod ``2^128`` on (high, low) 64-bit halves."""
    hi, lo = _umul128(xl, ml)
    hi = hi + xl * mh + xh * ml
    lo2 = lo + cl
    return hi + ch + np.uint64(lo2 < lo), lo2


def _pcg_out(h: np.uint64, l: np.uint64) -> np.uint64:
    """PCG64's output of a state: XSL-RR, ``rotr(h ^ l, h >> 58)``."""
    x = h ^ l
    r = h >> _U58
    return (x >> r) | (x << ((_U64 - r) & _U63))


def _pcg_next(st: np.ndarray) -> np.uint64:
    """One word of NumPy's ``PCG64`` from ``st = (state hi, state lo, inc hi, inc lo)``, updated."""
    h, l = _pcg_affine(st[0], st[1], _PCG_MUL_HI, _PCG_MUL_LO, st[2], st[3])
    st[0] = h
    st[1] = l
    return _pcg_out(h, l)


def _pcg64_fill(st: np.ndarray, jump: np.ndarray, out: np.ndarray) -> None:
    """``out`` = the next ``out.size`` words of NumPy's ``PCG64`` (what ``random_raw`` returns)
    from ``st`` (updated). Four interleaved chains (state ``i + 4`` = ``M4 s_i + C4``, ``jump`` =
    ``(M4 hi, M4 lo, C4 hi, C4 lo)``) break the serial dependency of one LCG; same words."""
    n = out.size
    q = n // 4
    if q:
        ah, al = _pcg_affine(st[0], st[1], _PCG_MUL_HI, _PCG_MUL_LO, st[2], st[3])
        bh, bl = _pcg_affine(ah, al, _PCG_MUL_HI, _PCG_MUL_LO, st[2], st[3])
        ch, cl = _pcg_affine(bh, bl, _PCG_MUL_HI, _PCG_MUL_LO, st[2], st[3])
        dh, dl = _pcg_affine(ch, cl, _PCG_MUL_HI, _PCG_MUL_LO, st[2], st[3])
        mh, ml, kh, kl = jump[0], jump[1], jump[2], jump[3]
        for i in range(q):
            out[4 * i] = _pcg_out(ah, al)
            out[4 * i + 1] = _pcg_out(bh, bl)
            out[4 * i + 2] = _pcg_out(ch, cl)
            out[4 * i + 3] = _pcg_out(dh, dl)
            st[0] = dh
            st[1] = dl
            ah, al = _pcg_affine(ah, al, mh, ml, kh, kl)
            bh, bl = _pcg_affine(bh, bl, mh, ml, kh, kl)
            ch, cl = _pcg_affine(ch, cl, mh, ml, kh, kl)
            dh, dl = _pcg_affine(dh, dl, mh, ml, kh, kl)
    for i in range(4 * q, n):
        out[i] = _pcg_next(st)


@functools.lru_cache(maxsize=64)
def _jump4(inc: int) -> tuple[int, int, int, int]:
    m = (int(_PCG_MUL_HI) << 64) | int(_PCG_MUL_LO)
    mask = (1 << 128) - 1
    m4 = pow(m, 4, 1 << 128)
    c4 = inc * (m ** 3 + m ** 2 + m + 1) & mask
    return (m4 >> 64, m4 & (2 ** 64 - 1), c4 >> 64, c4 & (2 ** 64 - 1))


def pcg64_jump4(inc: int) -> np.ndarray:
    """``(M^4, inc (M^3 + M^2 + M + 1))`` mod ``2^128`` as four uint64 (hi, lo, hi, lo): four
    PCG64 steps at once (``M`` the multiplier, ``inc`` the stream's increment)."""
    return np.array(_jump4(int(inc)), dtype=np.uint64)


#: marks the top table's overflow outcome in the kernels' value tables (beyond any ``2 base + sign``)
DIGIT_OVER = 1 << 62


def _scan_bad(flat: np.ndarray, h16: np.ndarray, shifts: np.ndarray, thr: np.ndarray, J: int,
              bad: np.ndarray) -> tuple[int, _Count]:
    """The NaN entries of ``flat`` listed in ``bad`` in order; returns ``(how many, how many ties
    among their draws)``."""
    n = flat.size
    nb = 0
    for blk in range(0, n, 32):
        end = min(n, blk + 32)
        hit = False
        for e in range(blk, end):
            hit |= flat[e] != flat[e]
        if hit:
            for e in range(blk, end):
                if flat[e] != flat[e]:
                    bad[nb] = e
                    nb += 1
    ties: _Count = 0
    for q in range(nb):
        e = bad[q]
        for j in range(J):
            u = np.int32(h16[e * J + j])
            sh = np.int32(shifts[j])
            c = u >> sh
            ties += np.int64((u & np.int32((1 << sh) - 1)) == thr[j, c])
    return nb, ties


def _pass1_two(h16: np.ndarray, s0: int | np.int32, s1: int | np.int32, thr0: np.ndarray, thr1: np.ndarray,
               top3: np.ndarray, low3: np.ndarray, out: np.ndarray, bad: np.ndarray) -> tuple[int, _Count]:
    """:func:`_digit_pass1` for two tables (SHE's default rates), with 1-D tables and three
    sides per slot (``r < thr``: keep, ``r = thr``: NaN, ``r > thr``: alias) so that a tie needs
    no separate test. The same values and the same list as :func:`_digit_pass1`. Inlined into
    :func:`_digit_pass1_two_98` / :func:`_digit_pass1_two_97` (the shapes of SHE's default grids)
    with constant shifts, which frees registers in the loop (~10 % faster), or
    :func:`_digit_pass1_two_any`."""
    n = out.size
    m0 = np.int32((1 << s0) - 1)
    m1 = np.int32((1 << s1) - 1)
    s0 = np.int32(s0)
    s1 = np.int32(s1)
    nb = 0
    for e in range(n):
        u = np.int32(h16[2 * e])
        c = u >> s0
        r = u & m0
        th = thr0[c]
        i0 = 2 * (3 * c + np.int32(r >= th) + np.int32(r > th))
        u1 = np.int32(h16[2 * e + 1])
        c1 = u1 >> s1
        r1 = u1 & m1
        th1 = thr1[c1]
        v = top3[i0] + top3[i0 + 1] * low3[3 * c1 + np.int32(r1 >= th1) + np.int32(r1 > th1)]
        out[e] = v
        if v != v:  # rare (a tie or an overflow): a branch predicted not taken
            bad[nb] = e
            nb += 1
    ties: _Count = 0
    for q in range(nb):
        e = bad[q]
        u = np.int32(h16[2 * e])
        ties += np.int64((u & m0) == thr0[u >> s0])
        u = np.int32(h16[2 * e + 1])
        ties += np.int64((u & m1) == thr1[u >> s1])
    return nb, ties


def _digit_pass1_two_98(h16: np.ndarray, thr0: np.ndarray, thr1: np.ndarray, top3: np.ndarray, low3: np.ndarray,
                        out: np.ndarray, bad: np.ndarray) -> tuple[int, _Count]:
    """:func:`_pass1_two` with shifts 9 and 8 (top table of 128 slots, low digit of 256)."""
    return _pass1_two(h16, 9, 8, thr0, thr1, top3, low3, out, bad)


def _digit_pass1_two_97(h16: np.ndarray, thr0: np.ndarray, thr1: np.ndarray, top3: np.ndarray, low3: np.ndarray,
                        out: np.ndarray, bad: np.ndarray) -> tuple[int, _Count]:
    """:func:`_pass1_two` with shifts 9 and 7 (top table of 128 slots, low digit of 512)."""
    return _pass1_two(h16, 9, 7, thr0, thr1, top3, low3, out, bad)


def _digit_pass1_two_any(h16: np.ndarray, s0: int, s1: int, thr0: np.ndarray, thr1: np.ndarray, top3: np.ndarray,
                         low3: np.ndarray, out: np.ndarray, bad: np.ndarray) -> tuple[int, _Count]:
    """:func:`_pass1_two` with the shifts as arguments."""
    return _pass1_two(h16, s0, s1, thr0, thr1, top3, low3, out, bad)


def _digit_pass1(h16: np.ndarray, shifts: np.ndarray, thr: np.ndarray, topf: np.ndarray, lowf: np.ndarray, J: int,
                 out: np.ndarray, bad: np.ndarray) -> tuple[int, _Count]:
    """SHE's entries from the 16-bit draws ``h16`` (see
    :meth:`localpriv.mechanisms._sampling.DigitLaplace.rows_into`), branch-free, and the list of
    entries left to :func:`_digit_pass2`. Per entry ``J`` alias draws (top table, then the low
    digits): draw ``u`` of table ``j`` picks slot ``c = u >> shifts[j]`` and compares ``r = u &
    mask`` with ``thr[j, c]``; side ``r >= thr`` (the alias) or not. ``topf[2 (2c + side)],
    topf[2 (2c + side) + 1] = (base g, +-g)`` of the top outcome (NaN for the overflow),
    ``lowf[j - 1, 2c + side]`` the digit's value ``digit 2^offset``; the entry is ``base g +- g
    low`` (exact: an integer below 2^24 times a power of two), or NaN when a draw tied (``r =
    thr``). Then the NaNs are listed in ``bad``, in order; returns ``(how many, how many ties
    among them)``: each tie takes one fresh word."""
    n = out.size
    flat = out
    nan = np.float32(np.nan)
    s0 = np.int32(shifts[0])
    m0 = np.int32((1 << s0) - 1)
    s1 = np.int32(shifts[1]) if J > 1 else np.int32(0)
    m1 = np.int32((1 << s1) - 1)
    s2 = np.int32(shifts[2]) if J > 2 else np.int32(0)
    m2 = np.int32((1 << s2) - 1)
    if J == 1:
        for e in range(n):
            u = np.int32(h16[e])
            c = u >> s0
            r = u & m0
            th = thr[0, c]
            i0 = 2 * (2 * c + np.int32(r >= th))
            v = topf[i0]
            flat[e] = nan if r == th else v
    elif J == 2:
        for e in range(n):
            u = np.int32(h16[2 * e])
            c = u >> s0
            r = u & m0
            th = thr[0, c]
            i0 = 2 * (2 * c + np.int32(r >= th))
            u1 = np.int32(h16[2 * e + 1])
            c1 = u1 >> s1
            r1 = u1 & m1
            th1 = thr[1, c1]
            lf = lowf[0, 2 * c1 + np.int32(r1 >= th1)]
            v = topf[i0] + topf[i0 + 1] * lf
            flat[e] = nan if (r == th) | (r1 == th1) else v
    else:
        for e in range(n):
            u = np.int32(h16[3 * e])
            c = u >> s0
            r = u & m0
            th = thr[0, c]
            i0 = 2 * (2 * c + np.int32(r >= th))
            u1 = np.int32(h16[3 * e + 1])
            c1 = u1 >> s1
            r1 = u1 & m1
            th1 = thr[1, c1]
            u2 = np.int32(h16[3 * e + 2])
            c2 = u2 >> s2
            r2 = u2 & m2
            th2 = thr[2, c2]
            lf = lowf[0, 2 * c1 + np.int32(r1 >= th1)] + lowf[1, 2 * c2 + np.int32(r2 >= th2)]
            v = topf[i0] + topf[i0 + 1] * lf
            flat[e] = nan if (r == th) | (r1 == th1) | (r2 == th2) else v
    return _scan_bad(flat, h16, shifts, thr, J, bad)


def _digit_pass2(h16: np.ndarray, shifts: np.ndarray, thr: np.ndarray, val: np.ndarray, lo: np.ndarray, J: int,
                 nb: int, bad: np.ndarray, tie_words: np.ndarray, g: np.float32, out: np.ndarray) -> int:
    """The entries ``bad[:nb]`` of :func:`_digit_pass1`, exactly: each tie decided by the next
    of ``tie_words`` (``f >= lo[j, c]``: the alias; ``lo`` the thresholds' low 64 bits), in entry
    and draw order; ``val[j, 2c + side]`` the integer values (top: ``2 base + neg``, or
    ``DIGIT_OVER``; digits: ``digit 2^offset``). Writes ``float32(D) g``; the overflowed entries
    are moved to the front of ``bad`` as ``e 2^24 + low bits`` for the caller; returns how many."""
    n_over = 0
    w = 0
    for q in range(nb):
        e = bad[q]
        v0 = np.int64(0)
        low = np.int64(0)
        for j in range(J):
            u = np.int32(h16[e * J + j])
            sh = np.int32(shifts[j])
            c = u >> sh
            r = u & np.int32((1 << sh) - 1)
            th = thr[j, c]
            side = np.int64(r >= th)
            if r == th:
                side = np.int64(tie_words[w] >= lo[j, c])
                w += 1
            if j == 0:
                v0 = val[0, 2 * c + side]
            else:
                low += val[j, 2 * c + side]
        if v0 == DIGIT_OVER:
            bad[n_over] = (e << 24) | low  # n_over <= q: entries still to read stay; low < 2^22
            n_over += 1
        else:
            neg = v0 & 1
            out[e] = np.float32((v0 >> 1) + (low ^ -neg) + neg) * g
    return n_over


def _one_hot(out: np.ndarray, x: np.ndarray, one: np.float32) -> None:
    """``out[i, x[i]] += one`` (exact: ``one = s g`` and every sum is on the grid)."""
    for i in range(x.size):
        out[i, x[i]] += one


def kernels() -> dict[str, Callable[..., Any]]:
    """The compiled kernels (name -> function), compiled or loaded at the first call."""
    global _KERNELS
    if _KERNELS is None:
        import numba

        def jit(f: Callable[..., Any]) -> Callable[..., Any]:
            try:
                return numba.njit(cache=True, nogil=True)(f)
            except (RuntimeError, OSError):  # pragma: no cover - no writable cache location
                return numba.njit(cache=False, nogil=True)(f)

        from llvmlite import ir
        from numba import types
        from numba.core.extending import intrinsic

        @intrinsic
        def umul128(typingctx: Any, a: Any, b: Any) -> Any:  # the full 128-bit product of two uint64, as (high, low)
            sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64)

            def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
                i128 = ir.IntType(128)
                p = builder.mul(builder.zext(args[0], i128), builder.zext(args[1], i128))
                lo = builder.trunc(p, ir.IntType(64))
                hi = builder.trunc(builder.lshr(p, ir.Constant(i128, 64)), ir.IntType(64))
                return context.make_tuple(builder, signature.return_type, (hi, lo))

            return sig, codegen

        g = globals()
        g["_umul128"] = umul128
        for name in ("_pcg_affine", "_pcg_out", "_pcg_next", "_scan_bad", "_pass1_two"):
            g[name] = numba.njit(nogil=True, inline="always")(g[name])
        _KERNELS = {"grr_chunk": jit(_grr_chunk), "digit_pass1": jit(_digit_pass1),
                    "digit_pass2": jit(_digit_pass2), "one_hot": jit(_one_hot),
                    "pcg64_fill": jit(_pcg64_fill), "digit_pass1_two_98": jit(_digit_pass1_two_98),
                    "digit_pass1_two_97": jit(_digit_pass1_two_97), "digit_pass1_two_any": jit(_digit_pass1_two_any)}
    return _KERNELS


def use_compiled(n: int) -> bool:
    """Whether a call over ``n`` users takes the compiled path."""
    return n >= COMPILED_MIN and enabled()
