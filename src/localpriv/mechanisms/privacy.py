"""Privacy guarantees computed from a channel, never taken from a parameter.

A mechanism ``M`` (rows: inputs ``x``, columns: outputs ``z``, ``M[x, z] = P(z | x)``) satisfies

* eps-local differential privacy with ``eps = max_z max_{x,x'} log(M[x,z] / M[x',z])``
  (seed 001 section 4.2; a column holding a zero beside a non-zero gives ``inf``);
* eps_g-geo-indistinguishability with
  ``eps_g = max_z max_{x != x'} log(M[x,z] / M[x',z]) / d(x, x')`` (seed 001 section 4.3,
  seed 003 section 2.2).

Columns that are zero for every input (outputs that never occur) carry no information and are
ignored.

Structured mechanisms whose channel is too large to build compute the same maximum from the
channel's exact structure in log space (closed forms in each mechanism module, e.g.
``log(a/b)`` for the two values of the k-RR channel); :func:`ldp_epsilon_from_logs` is the
dense formula on a (small) matrix of log-probabilities, which those reductions use.

Levels that protect no one
--------------------------
Every computed level goes through :func:`checked_epsilon`, which issues a
:class:`~localpriv.utils.validation.PrivacyWarning` when the level is ``inf`` (some report rules an
input out) or when ``e^eps`` overflows float64 (``eps > log(max float64) = 709.78``): the bound
``P(z|x) <= e^eps P(z|x')`` then bounds nothing representable and the mechanism no longer
protects anyone. The level itself is returned unchanged (finite levels are exact).
"""
from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike

from localpriv.utils.validation import LocalPrivError, PrivacyWarning

__all__ = ["ldp_epsilon", "geo_epsilon", "ldp_epsilon_from_logs", "checked_epsilon", "LOG_FLOAT_MAX",
           "OffsetTable", "grid_offset_geo_epsilon", "grid_offset_ldp_epsilon", "OFFSET_CHUNK"]

#: ``log`` of the largest float64: beyond it ``e^eps`` overflows.
LOG_FLOAT_MAX = float(np.log(np.finfo(float).max))


def checked_epsilon(eps: float, what: str | None = None, kind: str = "epsilon_ldp") -> float:
    """``eps`` as a float, with a :class:`PrivacyWarning` when it protects no one.

    ``inf``: some report is possible under one input and impossible under another (a zero beside
    a non-zero in a column). ``eps > 709.78``: ``e^eps`` overflows float64. ``what`` names the
    mechanism in the warning.
    """
    eps = float(eps)
    who = f"{what}: " if what else ""
    if np.isinf(eps):
        warnings.warn(f"{who}{kind} is inf (some report is possible under one input and impossible under "
                      "another): the mechanism no longer protects anyone", PrivacyWarning, stacklevel=3)
    elif eps > LOG_FLOAT_MAX:
        warnings.warn(f"{who}{kind} = {eps:.6g} exceeds {LOG_FLOAT_MAX:.2f}, where e^eps overflows float64: "
                      "the guarantee bounds nothing and the mechanism no longer protects anyone",
                      PrivacyWarning, stacklevel=3)
    return eps


def _log_columns(matrix: ArrayLike) -> np.ndarray:
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2:
        raise LocalPrivError(f"a channel must be 2-D, got shape {m.shape}")
    live = m.max(axis=0) > 0
    with np.errstate(divide="ignore"):
        return np.log(m[:, live])


def ldp_epsilon_from_logs(logm: ArrayLike) -> float:
    """``max_z (max_x L[x,z] - min_x L[x,z])`` for log-probabilities ``L`` (``-inf`` = probability 0).

    Columns that are ``-inf`` throughout are ignored; a ``-inf`` beside a finite entry gives
    ``inf``. No warning (callers pass the result through :func:`checked_epsilon`).
    """
    L = np.asarray(logm, dtype=float)
    if L.ndim != 2:
        raise LocalPrivError(f"log-probabilities must be 2-D, got shape {L.shape}")
    if np.isnan(L).any():
        raise LocalPrivError("log-probabilities contain NaN")
    L = L[:, L.max(axis=0) > -np.inf]
    if L.shape[1] == 0:
        raise LocalPrivError("the channel has no output with positive probability")
    return float((L.max(axis=0) - L.min(axis=0)).max())


def ldp_epsilon(matrix: ArrayLike, what: str | None = None) -> float:
    """The smallest eps for which the channel is eps-LDP: ``max_z log(max_x M[x,z] / min_x M[x,z])``.

    A :class:`PrivacyWarning` accompanies a level that protects no one (:func:`checked_epsilon`).
    """
    logm = _log_columns(matrix)
    if logm.shape[1] == 0:
        raise LocalPrivError("the channel has no output with positive probability")
    spread = logm.max(axis=0) - logm.min(axis=0)
    return checked_epsilon(float(spread.max()), what)


def geo_epsilon(matrix: ArrayLike, distance: ArrayLike, what: str | None = None) -> float:
    """The smallest eps_g with ``M[x,z] <= exp(eps_g d(x,x')) M[x',z]`` for all x, x', z.

    ``distance`` is the ``k x k`` matrix of ``d(x, x')``. Pairs at distance 0 with different
    rows would make the level infinite; they are reported as ``inf`` (with a
    :class:`PrivacyWarning`). Memory is O(k^2) per output column block; columns are processed in
    chunks.
    """
    logm = _log_columns(matrix)
    d = np.asarray(distance, dtype=float)
    k = logm.shape[0]
    if d.shape != (k, k):
        raise LocalPrivError(f"distance matrix must be {k}x{k}, got {d.shape}")
    off = ~np.eye(k, dtype=bool)
    best = 0.0
    chunk = max(1, int(4e6 // max(k * k, 1)))
    for start in range(0, logm.shape[1], chunk):
        block = logm[:, start:start + chunk]  # k x c
        with np.errstate(invalid="ignore"):
            diff = block[:, None, :] - block[None, :, :]  # k x k x c: log M[x,z] - log M[x',z]
        diff[np.isnan(diff)] = -np.inf  # (-inf) - (-inf): both zero, no leak
        worst = diff.max(axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(off & (worst > 0), worst / d, 0.0)
        best = max(best, float(np.nanmax(ratio)))
    return checked_epsilon(best, what, kind="epsilon_geo")


#: ``(zr0, zr1, zc0, zc1, T)``: on an ``nrows x ncols`` grid, the outputs ``z = (zr, zc)`` with
#: ``zr0 <= zr <= zr1`` and ``zc0 <= zc <= zc1`` have ``M[(r, c), z] = T[zr - r + nrows - 1, zc - c + ncols - 1]``
#: (``T`` of shape ``(2 nrows - 1, 2 ncols - 1)``).
OffsetTable = tuple[int, int, int, int, np.ndarray]

#: entries of the largest temporary array of :func:`grid_offset_geo_epsilon` (32 MB of float64)
OFFSET_CHUNK = 1 << 22


def grid_offset_geo_epsilon(tables: list[OffsetTable], nrows: int, ncols: int, cell_km: float) -> float:
    """:func:`geo_epsilon` of a grid channel given by offset tables, in ``O(k^2)`` instead of ``O(k^3)``.

    The channel is that of a mechanism on the cells ``(r, c)`` of an ``nrows x ncols`` grid whose
    outputs fall into rectangles of cells (``tables``, :data:`OffsetTable`), each with
    ``M[(r, c), (zr, zc)] = T[zr - r, zc - c]`` (offsets shifted to start at 0): the planar
    mechanisms, which add a translation-invariant offset and clamp it to the grid
    (:func:`localpriv.mechanisms.planar.offset_tables`). The metric is the Euclidean distance
    between cell centres, ``d((r, c), (r', c')) = cell_km sqrt(dr^2 + dc^2)``, ``(dr, dc) = (r' - r, c' - c)``.

    The level ``max_z max_{x != x'} (log M[x,z] - log M[x',z]) / d(x,x')`` is regrouped by the
    displacement ``delta = (dr, dc)`` between the two inputs, on which ``d`` alone depends:

    ``eps_g = max_{delta != 0} W(delta) / (cell_km |delta|)``, with
    ``W(delta) = max_T max_{u in U_T(delta)} (log T[u] - log T[u - delta])``,

    where ``u = z - x`` runs over the offsets that some input ``x`` with ``x + delta`` in the grid
    and some output ``z`` of the table's rectangle realize: in each axis an interval,
    ``[zr0 - r_hi, zr1 - r_lo]`` with ``r`` in ``[r_lo, r_hi] = [max(0, -dr), min(nrows, nrows - dr) - 1]``
    (likewise for columns). Every term of the dense maximum is one term here (``x' = x + delta``,
    ``u = z - x``, ``z - x' = u - delta``) and every term here is one there, and the entries
    ``log T[u]`` are the channel's own entries, so the maximum over the terms is the same, bit for
    bit; only the division differs, ``cell_km * hypot(dr, dc)`` here against the norm of the
    difference of the two centres there, which can move the last bit. Outputs impossible under
    every input and pairs where both probabilities are zero carry no leak (``-inf``), a zero
    beside a non-zero gives ``inf``, as in :func:`geo_epsilon`.

    The reduction does not assume a path metric (``d`` here is not one: the level of a
    diagonal pair is not bounded by its two unit edges, ``sqrt 2 < 2``), only that the channel
    and the metric are functions of the offsets. Cost: ``O(nrows^2 ncols^2)`` per table
    (about ``16 k^2`` subtractions for ``k`` cells, against ``k^3`` for the dense formula), one
    Python step per row displacement; memory at most :data:`OFFSET_CHUNK` entries at a time.

    Returns the raw level (callers pass it through :func:`checked_epsilon`).
    """
    nrows, ncols = int(nrows), int(ncols)
    hr, hc = nrows - 1, ncols - 1
    dcs = hc - np.arange(2 * ncols - 1)  # column displacement of window j (from +hc down to -hc)
    c_lo = np.maximum(0, -dcs)
    c_hi = np.minimum(hc, hc - dcs)
    worst = np.full((2 * nrows - 1, 2 * ncols - 1), -np.inf)  # [dr + hr, dc + hc]
    for zr0, zr1, zc0, zc1, T in tables:
        if T.shape != (2 * nrows - 1, 2 * ncols - 1):
            raise LocalPrivError(f"an offset table must be {2 * nrows - 1}x{2 * ncols - 1}, got {T.shape}")
        with np.errstate(divide="ignore"):
            L = np.log(np.asarray(T, dtype=float))
        if np.isnan(L).any():
            raise LocalPrivError("an offset table holds NaN or a negative entry")
        width = zc1 - zc0 + ncols  # column offsets of the table: zc0 .. zc1 + hc (shifted)
        ucols = zc0 + np.arange(width)
        # 0 where (u_c, dc) is realized by some column pair and output column, -inf elsewhere
        valid = (ucols[None, :] >= (zc0 - c_hi + hc)[:, None]) & (ucols[None, :] <= (zc1 - c_lo + hc)[:, None])
        mask = np.where(valid, 0.0, -np.inf)
        padded = np.pad(L, ((0, 0), (hc, hc)))  # partner columns u_c - dc, read through windows
        windows = np.lib.stride_tricks.sliding_window_view(padded, width, axis=1)[:, zc0:zc0 + 2 * ncols - 1, :]
        jstep = max(1, min(dcs.size, OFFSET_CHUNK // width))  # column displacements per step
        step = max(1, OFFSET_CHUNK // (jstep * width))  # row offsets per step
        for dr in range(-hr, hr + 1):
            r_lo, r_hi = max(0, -dr), min(hr, hr - dr)
            u0, u1 = zr0 - r_hi + hr, zr1 - r_lo + hr  # shifted row offsets realized
            best = np.full(dcs.size, -np.inf)
            for j0 in range(0, dcs.size, jstep):
                j1 = min(dcs.size, j0 + jstep)
                for a in range(u0, u1 + 1, step):
                    b = min(u1 + 1, a + step)
                    with np.errstate(invalid="ignore"):
                        diff = L[a:b, zc0:zc0 + width][:, None, :] - windows[a - dr:b - dr, j0:j1]
                        diff += mask[j0:j1]  # NaN where both are -inf (no leak) or masked +inf: skipped
                    best[j0:j1] = np.fmax(best[j0:j1], np.fmax.reduce(diff, axis=(0, 2)))
            worst[dr + hr] = np.fmax(worst[dr + hr], best[::-1])
    rows = np.arange(-hr, hr + 1, dtype=float)[:, None]
    cols = np.arange(-hc, hc + 1, dtype=float)[None, :]
    dist = cell_km * np.hypot(rows, cols)
    worst[hr, hc] = -np.inf  # x = x'
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(worst > 0, worst / dist, 0.0)
    return float(ratio.max())


def grid_offset_ldp_epsilon(tables: list[OffsetTable], nrows: int, ncols: int) -> float:
    """:func:`ldp_epsilon` of a grid channel given by offset tables, without building it.

    The column of output ``z = (zr, zc)`` of a table (:data:`OffsetTable`) holds
    ``T[zr - r + nrows - 1, zc - c + ncols - 1]`` for every input ``(r, c)``: the ``nrows x ncols``
    window of ``T`` at ``(zr, zc)``. Its spread ``max_x log M[x,z] - min_x log M[x,z]`` is
    ``log max - log min`` of the window (``log`` is increasing), and the window maxima and minima
    are separable: a sliding maximum over ``nrows`` rows, then over ``ncols`` columns
    (``O(k (nrows + ncols))`` comparisons instead of the ``k^2`` logarithms of the dense formula).
    Columns that are zero throughout are ignored, a zero beside a non-zero gives ``inf``, as in
    :func:`ldp_epsilon`. Returns the raw level (callers pass it through :func:`checked_epsilon`).
    """
    nrows, ncols = int(nrows), int(ncols)
    best = -np.inf
    for zr0, zr1, zc0, zc1, T in tables:
        if T.shape != (2 * nrows - 1, 2 * ncols - 1):
            raise LocalPrivError(f"an offset table must be {2 * nrows - 1}x{2 * ncols - 1}, got {T.shape}")
        part = np.asarray(T, dtype=float)[zr0:zr1 + nrows, zc0:zc1 + ncols]  # the windows of its outputs
        view = np.lib.stride_tricks.sliding_window_view
        hi = view(view(part, nrows, axis=0).max(axis=-1), ncols, axis=1).max(axis=-1)
        lo = view(view(part, nrows, axis=0).min(axis=-1), ncols, axis=1).min(axis=-1)
        live = hi > 0
        if live.any():
            with np.errstate(divide="ignore"):
                best = max(best, float((np.log(hi[live]) - np.log(lo[live])).max()))
    if best == -np.inf:
        raise LocalPrivError("the channel has no output with positive probability")
    return best
