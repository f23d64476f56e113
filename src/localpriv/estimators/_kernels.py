"""Compiled kernels (numba) for the EM engine's small-problem and batched paths.

Nothing here is imported by ``import localpriv``: :func:`kernels` compiles (or loads from numba's
on-disk cache) the functions at their first use. Caching (``cache=True``) is used when numba can
write its cache (next to this file, or numba's user-wide fallback); otherwise the functions are
compiled in memory for each process. ``LOCALPRIV_NUMBA=0`` disables every compiled path (the
NumPy paths are then used; results equal to round-off). Compiled with ``error_model="numpy"``
(a division by zero gives ``inf``/``nan`` as in NumPy instead of raising). Compile cost of all
kernels: ~6.8 s CPU at load average ~6, ~0.7 s to load them from the cache (``import numba``
included; ``benchmarks/em_overhead.py``).

Kernels:

* :func:`exp_rows` / :func:`exp_rows_back` -- the first-order recurrences of
  :class:`localpriv.likelihood.structured.ExpKernelBlock` for many rates at once: for row ``i`` with
  ``r_i = e^{-rate_i}``, ``A[i, t] = r_i A[i, t-1] + theta_t`` and ``B[i, t] = r_i B[i, t+1] +
  theta_t`` (forward), and the transposed pair summed over rows (backward). Same operations in the
  same order as ``scipy.signal.lfilter([1], [1, -r], .)``: each term positive, exact to a few ulps.
* ``plain_em`` / ``squarem`` -- the engine's plain EM loop and SQUAREM cycles
  (:mod:`localpriv.estimators.em`: seed 001 Algorithm 1, Varadhan and Roland 2008 scheme S3 with
  the engine's safeguards) on one scaled-identity block (``G[x, j] = b + d [x == z_j]``: k-RR,
  support counts of unary encodings, local hashing, subset selection), whole runs in one call:
  the same operations, decisions and stopping rules as the NumPy engine, without its ~20 NumPy
  calls per EM evaluation (the overhead that dominates at ``k = 100``). Sums are NumPy's pairwise
  summation reimplemented (:func:`_sum`) and dot products are BLAS's (``np.dot``), so the iterates
  are NumPy's bit for bit on this platform (tested to 1e-12).
* ``dense_rows`` -- one certified SQUAREM (or plain EM) run per data set on one dense channel
  (:func:`localpriv.estimators.em_rows.em_rows`, the refits of a parametric bootstrap), the same
  decisions as the NumPy engine; products by BLAS (``np.dot``).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from localpriv.utils.jit import numba_enabled

__all__ = ["kernels", "enabled"]

_KERNELS: dict[str, Callable[..., Any]] | None = None

_F: TypeAlias = NDArray[np.float64]
_I: TypeAlias = NDArray[np.int64]


enabled = numba_enabled


def _exp_rows(r: _F, theta: _F) -> tuple[_F, _F]:
    M, k = r.size, theta.size
    A = np.empty((M, k))
    B = np.empty((M, k))
    for i in range(M):
        ri = r[i]
        acc = 0.0
        for t in range(k):
            acc = theta[t] + ri * acc
            A[i, t] = acc
        acc = 0.0
        for t in range(k - 1, -1, -1):
            acc = theta[t] + ri * acc
            B[i, t] = acc
    return A, B


def _exp_rows_back(r: _F, U: _F, V: _F) -> _F:
    # sum over rows i of reverse-recurrence(U[i]) + forward-recurrence(V[i])
    M, k = U.shape
    out = np.zeros(k)
    for i in range(M):
        ri = r[i]
        acc = 0.0
        for t in range(k - 1, -1, -1):
            acc = U[i, t] + ri * acc
            out[t] += acc
        acc = 0.0
        for t in range(k):
            acc = V[i, t] + ri * acc
            out[t] += acc
    return out


# ---- sums and dots as NumPy computes them (so that the compiled loops follow the same iterates) ----
def _leaf(a: _F, lo: int | np.int64, n: int | np.int64) -> float:
    """NumPy's pairwise-summation leaf: ``n <= 128`` entries from ``lo``."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    m = n - (n % 8)
    while i < m:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


def _sum(a: _F) -> float:
    """``a.sum()`` of a contiguous float64 vector, bit for bit as NumPy: ``0 +`` NumPy's pairwise
    summation (leaves of at most 128 entries with 8 accumulators, :func:`_leaf`; larger ranges split
    at ``n2 = n // 2`` rounded down to a multiple of 8 and summed left + right), without recursion
    (an explicit stack: numba's on-disk cache and recursion do not mix)."""
    n = a.size
    if n <= 128:
        return 0.0 + _leaf(a, 0, n)
    los = np.empty(64, dtype=np.int64)
    ns = np.empty(64, dtype=np.int64)
    state = np.zeros(64, dtype=np.int64)  # 1: left half pending, 2: right half pending
    left = np.empty(64)
    sp = 0
    los[0], ns[0] = 0, n
    val = 0.0
    while True:
        if ns[sp] > 128:  # a new frame to split: its left half first
            n2 = ns[sp] // 2
            n2 -= n2 % 8
            state[sp] = 1
            los[sp + 1], ns[sp + 1], state[sp + 1] = los[sp], n2, 0
            sp += 1
            continue
        val = _leaf(a, los[sp], ns[sp])
        sp -= 1
        while sp >= 0:  # hand the value up: a left half starts its right half, a right half adds
            if state[sp] == 1:
                left[sp] = val
                state[sp] = 2
                n2 = ns[sp] // 2
                n2 -= n2 % 8
                los[sp + 1], ns[sp + 1], state[sp + 1] = los[sp] + n2, ns[sp] - n2, 0
                sp += 1
                break
            val = left[sp] + val
            sp -= 1
        if sp < 0:
            return 0.0 + val


# ---- single-block EM on a scaled-identity block G[x, j] = b + d [x == z_j] (k-RR, support counts) ----
def _fwd(theta: _F, d: float, b: float, z: _I, p: _F) -> None:
    """``p = theta @ G`` as ScaledIdentityBlock.forward: ``d theta[z_j] + b sum(theta)``."""
    bs = b * _sum(theta)
    for j in range(p.size):
        p[j] = d * theta[z[j]] + bs


def _update(theta: _F, d: float, b: float, z: _I, c: _F, p: _F, n: float, tiny: float, new: _F) -> float:
    """new = F(theta) (floored at tiny), returns gap(theta): em._em_update's operations, with
    ScaledIdentityBlock.backward's ``G @ w = bincount(z, d w) + b sum(w)``."""
    k = theta.size
    m = p.size
    w = np.empty(m)
    for j in range(m):
        w[j] = c[j] / p[j] if c[j] > 0 else 0.0
    for x in range(k):
        new[x] = 0.0
    for j in range(m):
        new[z[j]] += d * w[j]
    bw = b * _sum(w)
    gmax = -np.inf
    for x in range(k):
        g = new[x] + bw
        if g > gmax:
            gmax = g
        new[x] = theta[x] * g
    s = _sum(new)
    gap = (gmax - s) / n
    div = s if s > 0 else n
    for x in range(k):
        v = new[x] / div
        new[x] = v if v > tiny else tiny
    return gap


def _loglik(c: _F, p: _F, live: _I) -> float:
    """``c @ log(p)`` over the reports seen (``live``: their indices, or empty when all are)."""
    if live.size == 0:
        total = np.dot(c, np.log(p))
    else:
        total = np.dot(c[live], np.log(p[live]))
    return -np.inf if math.isnan(total) else total


def _stopval(rule: int, old: _F, new: _F, L_old: float, L_new: float, gap: float) -> float:
    if rule == 0:
        return gap
    if rule == 1:
        return abs(L_new - L_old)
    val = 0.0
    for x in range(old.size):
        dx = abs(new[x] - old[x])
        if dx > val:
            val = dx
    return val


def _plain_em(theta: _F, p: _F, L: float, d: float, b: float, z: _I, c: _F, live: _I, n: float, rule: int,
              delta: float, t: int, max_iter: int, tiny: float) -> tuple[_F, _F, float, int, bool, float]:
    """Plain EM from iteration t (em._plain_em) on a scaled-identity block; rule 0 = gap,
    1 = loglik, 2 = max_abs.

    Returns (theta, p, L, t, converged, gap)."""
    theta = theta.copy()
    p = p.copy()
    new = np.empty(theta.size)
    gap = np.nan
    L_new = L
    while t < max_iter:
        gap = _update(theta, d, b, z, c, p, n, tiny, new)
        t += 1
        _fwd(new, d, b, z, p)
        if rule == 1:  # L is needed by the rule only; the others get it once, at the end
            L_new = _loglik(c, p, live)
        done = _stopval(rule, theta, new, L, L_new, gap) < delta
        theta, new = new, theta
        L = L_new
        if done:
            return theta, p, _loglik(c, p, live), t, True, gap
    return theta, p, _loglik(c, p, live), t, False, gap


def _squarem(theta: _F, p: _F, L: float, d: float, b: float, z: _I, c: _F, live: _I, n: float, rule: int,
             delta: float, t: int, max_iter: int, cycles: int, alpha_max: float, gap: float, stop_cycles: int,
             tiny: float, floor: float, max_backtrack: int) -> tuple[_F, _F, float, float, int, int, float, int]:
    """SQUAREM cycles (em._squarem's accelerated phase, same operations and decisions) until the rule
    holds (status 0), the gap rule certifies (status 1: the returned point is final), ``cycles``
    reaches ``stop_cycles`` (status 2: a Newton attempt is due) or the cap (status 3).

    Returns (theta, p, L, gap, t, cycles, alpha_max, status)."""
    k, m = theta.size, p.size
    while t + 2 <= max_iter:
        th1 = np.empty(k)
        gap1 = _update(theta, d, b, z, c, p, n, tiny, th1)
        p1 = np.empty(m)
        _fwd(th1, d, b, z, p1)
        t += 1
        if rule == 0 and gap1 < delta:
            return th1, p1, _loglik(c, p1, live), gap1, t, cycles, alpha_max, 1
        th2 = np.empty(k)
        gap2 = _update(th1, d, b, z, c, p1, n, tiny, th2)
        p2 = np.empty(m)
        _fwd(th2, d, b, z, p2)
        t += 1
        L2 = _loglik(c, p2, live)
        r = th1 - theta
        v = th2 - th1 - r
        nr, nv = math.sqrt(np.dot(r, r)), math.sqrt(np.dot(v, v))
        new, pnew, Lnew, gnew = th2, p2, L2, gap2
        if nv > 0 and nr > 0 and t < max_iter:
            alpha = max(-nr / nv, -alpha_max)
            if alpha <= -alpha_max:
                alpha_max *= 4.0
            accepted = False
            for trial in range(max_backtrack):
                if alpha >= -1.0:
                    break
                cand = theta - 2.0 * alpha * r + alpha * alpha * v
                cand = np.maximum(cand, floor * th2)
                cand /= _sum(cand)
                pc = np.empty(m)
                _fwd(cand, d, b, z, pc)
                Lc = _loglik(c, pc, live)
                if Lc >= L2:
                    th3 = np.empty(k)
                    gap3 = _update(cand, d, b, z, c, pc, n, tiny, th3)
                    p3 = np.empty(m)
                    _fwd(th3, d, b, z, p3)
                    L3 = _loglik(c, p3, live)
                    t += 1
                    if L3 >= L2:
                        new, pnew, Lnew, gnew = th3, p3, L3, gap3
                        accepted = True
                        if trial:
                            alpha_max = max(4.0, -alpha)
                    break
                alpha = (alpha - 1.0) / 2.0
                if alpha > -1.0 - 1e-3:
                    alpha = -1.0
            if not accepted:
                alpha_max = max(4.0, alpha_max / 4.0)
        cycles += 1
        done = rule != 0 and _stopval(rule, theta, new, L, Lnew, np.nan) < delta
        theta, p, L, gap = new, pnew, Lnew, gnew
        if done:
            return theta, p, L, gap, t, cycles, alpha_max, 0
        if cycles >= stop_cycles:
            return theta, p, L, gap, t, cycles, alpha_max, 2
    return theta, p, L, gap, t, cycles, alpha_max, 3


# ---- many data sets on one dense channel (em_rows: the refits of a parametric bootstrap) ----------
def _dfwd(theta: _F, G: _F, p: _F) -> None:
    """``p = theta @ G`` (dense ``k x m``)."""
    p[:] = np.dot(theta, G)


def _dupdate(theta: _F, G: _F, c: _F, p: _F, n: float, tiny: float, new: _F) -> float:
    """new = F(theta) (floored at tiny), returns gap(theta): em._em_update's operations with the
    dense backward product ``grad = G (c / p)`` over the reports this data set has."""
    m = p.size
    w = np.empty(m)
    for j in range(m):
        w[j] = c[j] / p[j] if c[j] > 0 else 0.0
    g = np.dot(G, w)
    gmax = -np.inf
    for x in range(theta.size):
        if g[x] > gmax:
            gmax = g[x]
        new[x] = theta[x] * g[x]
    s = _sum(new)
    gap = (gmax - s) / n
    div = s if s > 0 else n
    for x in range(theta.size):
        v = new[x] / div
        new[x] = v if v > tiny else tiny
    return gap


def _dloglik(c: _F, p: _F) -> float:
    """``sum_{j: c_j > 0} c_j log p_j`` (``-inf`` for a seen report of probability <= 0)."""
    total = 0.0
    for j in range(p.size):
        if c[j] > 0:
            total += c[j] * math.log(p[j]) if p[j] > 0 else -np.inf
    return -np.inf if math.isnan(total) else total


def _dense_rows(G: _F, C: _F, theta0: _F, delta: float, max_iter: int, accelerate: bool, tiny: float,
                floor: float, max_backtrack: int) -> tuple[_F, NDArray[np.bool_], _I]:
    """One certified EM run per row of ``C`` (counts on the columns of ``G``) from ``theta0``:
    em._squarem's accelerated phase (``accelerate``; rule "gap", no Newton finish) then
    em._plain_em, the same operations and decisions per row as em_rows' NumPy path.

    Returns (Theta, converged, iterations)."""
    R, m = C.shape
    k = theta0.size
    out = np.empty((R, k))
    conv = np.zeros(R, dtype=np.bool_)
    iters = np.zeros(R, dtype=np.int64)
    for i in range(R):  # one data set after the other (each row its own run)
        c = np.ascontiguousarray(C[i])
        n = _sum(c)
        theta = theta0.copy()
        p = np.empty(m)
        _dfwd(theta, G, p)
        t = 0
        alpha_max = 4.0
        done = False
        while accelerate and t + 2 <= max_iter:
            th1 = np.empty(k)
            gap1 = _dupdate(theta, G, c, p, n, tiny, th1)
            p1 = np.empty(m)
            _dfwd(th1, G, p1)
            t += 1
            if gap1 < delta:
                theta, p, done = th1, p1, True
                break
            th2 = np.empty(k)
            _dupdate(th1, G, c, p1, n, tiny, th2)
            p2 = np.empty(m)
            _dfwd(th2, G, p2)
            t += 1
            L2 = _dloglik(c, p2)
            r = th1 - theta
            v = th2 - th1 - r
            nr, nv = math.sqrt(np.dot(r, r)), math.sqrt(np.dot(v, v))
            new, pnew = th2, p2
            if nv > 0 and nr > 0 and t < max_iter:
                alpha = max(-nr / nv, -alpha_max)
                if alpha <= -alpha_max:
                    alpha_max *= 4.0
                accepted = False
                for trial in range(max_backtrack):
                    if alpha >= -1.0:
                        break
                    cand = theta - 2.0 * alpha * r + alpha * alpha * v
                    cand = np.maximum(cand, floor * th2)
                    cand /= _sum(cand)
                    pc = np.empty(m)
                    _dfwd(cand, G, pc)
                    if _dloglik(c, pc) >= L2:
                        th3 = np.empty(k)
                        _dupdate(cand, G, c, pc, n, tiny, th3)
                        p3 = np.empty(m)
                        _dfwd(th3, G, p3)
                        t += 1
                        if _dloglik(c, p3) >= L2:
                            new, pnew = th3, p3
                            accepted = True
                            if trial:
                                alpha_max = max(4.0, -alpha)
                        break
                    alpha = (alpha - 1.0) / 2.0
                    if alpha > -1.0 - 1e-3:
                        alpha = -1.0
                if not accepted:
                    alpha_max = max(4.0, alpha_max / 4.0)
            theta, p = new, pnew
        new = np.empty(k)
        while not done and t < max_iter:  # plain EM until one step meets the rule
            gap = _dupdate(theta, G, c, p, n, tiny, new)
            t += 1
            _dfwd(new, G, p)
            theta, new = new, theta
            done = gap < delta
        out[i] = theta
        conv[i] = done
        iters[i] = t
    return out, conv, iters


def kernels() -> dict[str, Callable[..., Any]]:
    """The compiled kernels (a dict of name -> function), compiled or loaded at the first call."""
    global _KERNELS
    if _KERNELS is None:
        import numba

        def jit(f: Callable[..., Any]) -> Callable[..., Any]:
            try:
                return numba.njit(cache=True, nogil=True, error_model="numpy")(f)
            except (RuntimeError, OSError):  # no writable cache location: compile in memory
                return numba.njit(cache=False, nogil=True, error_model="numpy")(f)

        # helpers first: the kernels that call them must see the compiled versions at compile time
        mod = globals()
        for name in ("_leaf", "_sum", "_fwd", "_update", "_loglik", "_stopval", "_dfwd", "_dupdate", "_dloglik"):
            mod[name] = jit(mod[name])
        _KERNELS = {"exp_rows": jit(_exp_rows), "exp_rows_back": jit(_exp_rows_back),
                    "plain_em": jit(_plain_em), "squarem": jit(_squarem), "dense_rows": jit(_dense_rows)}
    return _KERNELS

