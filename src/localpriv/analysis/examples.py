"""Small channels built from the seeds' definitions, for the theory checks.

* :func:`basic_rappor_mechanism` -- basic one-time Rappor on ``k`` values as a ``k x 2^k`` matrix
  (seed 001 section 4.4 and Lemma 4.3), for small ``k``: report ``b`` is the integer whose bit ``y``
  (least significant first) is ``beta_y``.
* :func:`planar_geometric_truncated_channel` -- seed 001 section 6.4: planar geometric noise
  (seed 003 section 2.3: ``P(z|x) = lambda e^{-eps d(x,z)}`` on the infinite lattice of cell
  centres) on a ``rows x cols`` grid, each report then remapped to its nearest cell of an
  ``out_rows x out_cols`` block of the lattice (the 5x5 -> 4x4 mechanism of Fig. 6).
"""
from __future__ import annotations

import numpy as np

from localpriv.mechanisms.matrix import MatrixMechanism
from localpriv.utils.validation import LocalPrivError, check_eps, check_int

__all__ = ["basic_rappor_channel", "basic_rappor_mechanism", "planar_geometric_truncated_channel",
           "section64_mechanism"]


def basic_rappor_channel(k: int, eps: float) -> np.ndarray:
    """``M[x, b] = prod_y p^{[beta_y = [y = x]]} (1-p)^{[beta_y != [y = x]]}`` with
    ``p = e^{eps/2}/(1+e^{eps/2})``, which equals Lemma 4.3's ``p^k e^{-(1/2 + S/2 - beta_x) eps}``.
    ``k <= 12`` (``2^k`` columns)."""
    k = check_int(k, "k", minimum=1, maximum=12)
    eps = check_eps(eps)
    p = 1.0 / (1.0 + np.exp(-eps / 2))
    b = np.arange(2 ** k)
    bits = (b[:, None] >> np.arange(k)[None, :]) & 1  # 2^k x k
    onehot = np.eye(k, dtype=np.int64)  # k x k
    agree = (bits[None, :, :] == onehot[:, None, :])  # k x 2^k x k
    return np.where(agree, p, 1 - p).prod(axis=2)


def basic_rappor_mechanism(k: int, eps: float) -> MatrixMechanism:
    """:func:`basic_rappor_channel` as a mechanism (reports are the integers encoding the bits)."""
    return MatrixMechanism(rows=basic_rappor_channel(k, eps).tolist())


def planar_geometric_truncated_channel(eps: float = 0.5, rows: int = 5, cols: int = 5,
                                       out_rows: int = 4, out_cols: int = 4, cell_km: float = 1.0,
                                       out_row0: int = 0, out_col0: int = 0, radius: int | None = None):
    """The section 6.4 channel: ``rows*cols`` inputs, ``out_rows*out_cols`` outputs.

    Input cell ``i`` is at lattice point ``(i // cols, i % cols)``; output ``o`` is lattice point
    ``(out_row0 + o // out_cols, out_col0 + o % out_cols)``. The untruncated planar geometric
    report ``z`` (a lattice point, ``P(z|x) = lambda e^{-eps cell_km |z - x|}`` with
    ``lambda = 1 / sum_{(i,j)} e^{-eps cell_km sqrt(i^2+j^2)}``) is remapped to its nearest output
    point: for an axis-aligned block that is the per-coordinate clamp, so there are no ties. The
    infinite lattice is summed over a window of ``radius`` cells (default: where
    ``e^{-eps d} < 1e-18``).
    """
    eps = check_eps(eps)
    if radius is None:
        radius = int(np.ceil(42.0 / (eps * cell_km))) + max(rows, cols)
    if radius > 2000:
        raise LocalPrivError("planar geometric window too large; raise eps or cell_km")
    off = np.arange(-radius, radius + 1)
    di, dj = np.meshgrid(off, off, indexing="ij")
    w = np.exp(-eps * cell_km * np.sqrt(di ** 2 + dj ** 2))
    lam = 1.0 / w.sum()
    M = np.zeros((rows * cols, out_rows * out_cols))
    for x in range(rows * cols):  # 25 inputs: loop over the alphabet, not over users
        r, c = divmod(x, cols)
        zr = np.clip(r + di, out_row0, out_row0 + out_rows - 1) - out_row0
        zc = np.clip(c + dj, out_col0, out_col0 + out_cols - 1) - out_col0
        M[x] = np.bincount((zr * out_cols + zc).ravel(), weights=(lam * w).ravel(),
                           minlength=out_rows * out_cols)
    return M / M.sum(axis=1, keepdims=True)


def section64_mechanism(eps: float = 0.5) -> MatrixMechanism:
    """The 25 x 16 mechanism of seed 001 section 6.4 (5x5 grid of 1 km cells, planar geometric
    ``eps = 0.5`` per km, reports truncated to the 4x4 block of rows/columns 0..3)."""
    return MatrixMechanism(rows=planar_geometric_truncated_channel(eps).tolist())
