"""One report of the RRBA client (thesis, seed 004 section 4.4.1, Algorithm 1) as a mechanism.

A client whose true cell is ``x`` (a cell of a contingency table with ``cells`` cells) reports
``x`` with probability ``p`` ("Head") and otherwise a fake cell drawn from the table ``T`` that
the aggregator sent (Monte Carlo sampling, Eq. 4.2)::

    M[x, w] = p * [x == w] + (1 - p) * T[w]

Its LDP level, computed from the channel, is
``eps = ln(1 + p / ((1 - p) * min_w T[w]))`` (largest ratio in the column of the rarest fake).
Theorem 4.4.1 of the thesis states ``eps >= ln(1/(1-p))`` instead, which drops the
``1/T[w]`` factor (it cancels a probability ``q`` that is not the same on both sides): with the
uniform table over 4 cells and ``p = 0.5`` the channel gives ``ln 5 = 1.609``, not
``ln 2 = 0.693``; and when the aggregator's MinMax step (Eq. 4.4) sets a cell of ``T`` to 0 the
level is infinite. ``floor`` keeps every cell of ``T`` at least ``floor`` (then renormalizes) so
that the level stays finite.

Spec: ``rrba(p=0.5,cells=4)``, ``rrba(p=0.5,table=[0.7,0.2,0.1,0.0],floor=0.01)``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import check_dense_size
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.validation import LocalPrivError, check_int, check_rng

__all__ = ["RRBAMechanism", "rrba_epsilon", "floor_table"]


def floor_table(T: ArrayLike, floor: float = 0.0) -> np.ndarray:
    """``T`` with every cell raised to at least ``floor`` and renormalized to sum 1.

    Raising to ``floor`` then dividing by the new total keeps ``min T >= floor / (1 + k*floor)``,
    which bounds the RRBA level (see :func:`rrba_epsilon`).
    """
    tab = np.asarray(T, dtype=float).ravel()
    if tab.size == 0 or np.any(~np.isfinite(tab)) or np.any(tab < 0) or tab.sum() <= 0:
        raise LocalPrivError("the fake-value table must be non-negative with a positive total")
    if not 0 <= floor < 1.0 / tab.size + 1e-12:
        raise LocalPrivError(f"floor must be in [0, 1/cells] = [0, {1.0 / tab.size:.4g}], got {floor}")
    tab = tab / tab.sum()
    if floor > 0:
        tab = np.maximum(tab, floor)
        tab = tab / tab.sum()
    return tab


def rrba_epsilon(p: float, T: ArrayLike) -> float:
    """Closed form of one report's LDP level: ``ln(1 + p / ((1-p) min_w T[w]))``.

    ``inf`` when some cell of ``T`` is 0 and ``p > 0``; ``0`` when ``p = 0``. (Derivation: column
    ``w`` of the channel holds ``p + (1-p)T[w]`` for ``x = w`` and ``(1-p)T[w]`` otherwise.)
    """
    T = np.asarray(T, dtype=float)
    if p == 0:
        return 0.0
    if p >= 1:
        return float("inf")
    t = float(T.min())
    if T.size == 1:
        return 0.0
    if t <= 0:
        return float("inf")
    # log((p + (1-p) t) / ((1-p) t)) in log space: no overflow when (1-p) t is tiny
    log_fake = np.log1p(-p) + np.log(t)
    return float(np.logaddexp(np.log(p), log_fake) - log_fake)


@register
class RRBAMechanism(Mechanism):
    """RRBA client on one table: keep the true cell w.p. ``p``, else a fake cell ~ ``T``.

    Parameters
    ----------
    p : float
        Probability of reporting the true cell (the first coin gives "Head"), ``0 <= p < 1``.
    cells : int, optional
        Number of cells; with no ``table`` the fakes come from the uniform table (Eq. 4.1).
    table : list of float, optional
        The fake-value table ``T`` the aggregator sends (normalized here).
    floor : float
        Lower bound applied to ``T`` (see :func:`floor_table`); 0 = none.
    """

    spec_name = "rrba"
    examples = (dict(spec="rrba(p=0.5,cells=4)", eps_ldp=1.6094379124341003, tight=True),)  # log 5

    def __init__(self, p: float = 0.5, cells: int | None = None, table: ArrayLike | None = None, floor: float = 0.0,
                 k: int | None = None):
        p = float(p)
        if not 0 <= p < 1:
            raise LocalPrivError(f"rrba: p must be in [0, 1), got {p}")
        if table is None:
            if cells is None:
                cells = k
            if cells is None:
                raise LocalPrivError("rrba: give cells=N (uniform fakes) or table=[...]")
            cells = check_int(cells, "cells", minimum=1)
            T = np.full(cells, 1.0 / cells)
        else:
            T = np.asarray(table, dtype=float).ravel()
            if cells is not None and int(cells) != T.size:
                raise LocalPrivError(f"rrba: cells={cells} but the table has {T.size} cells")
        if k is not None and int(k) != T.size:
            raise LocalPrivError(f"rrba: k={k} disagrees with the {T.size} cells")
        self.p = p
        self.floor = float(floor)
        self._given_table = table is not None
        self._raw = floor_table(T, 0.0)  # the table as given (normalized), for the spec
        self.T = floor_table(T, self.floor)
        self.T.setflags(write=False)
        self.k = int(self.T.size)

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"p": self.p}
        if self._given_table:
            out["table"] = [float(x) for x in self._raw]
        else:
            out["cells"] = self.k
        if self.floor:
            out["floor"] = self.floor
        return out

    @property
    def n_outputs(self) -> int:
        return self.k

    def channel(self) -> np.ndarray:
        """``M = p I + (1-p) 1 T^T`` (rows: true cell, columns: reported cell)."""
        check_dense_size(self.k, self.k, f"{self} channel")
        return self.p * np.eye(self.k) + (1 - self.p) * np.broadcast_to(self.T, (self.k, self.k))

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """``G[x, j] = (1-p) T[z_j] + p [x == z_j]``, only for the given reports."""
        z = self.output_index(reports)
        check_dense_size(self.k, z.size, f"{self} likelihood of {z.size} reports")
        G = np.broadcast_to((1 - self.p) * self.T[z], (self.k, z.size)).copy()
        G[z, np.arange(z.size)] += self.p
        return G

    def epsilon_ldp(self) -> float:
        """From the channel's structure (:func:`rrba_epsilon`): column ``w`` holds
        ``p + (1-p) T[w]`` (row ``w``) and ``(1-p) T[w]`` (the other rows), so the level is
        ``log(1 + p / ((1-p) min_w T[w]))``; ``inf`` (with a PrivacyWarning) when a cell of ``T``
        is 0."""
        return checked_epsilon(rrba_epsilon(self.p, self.T), str(self))

    def rank_from_structure(self) -> tuple[int, str]:
        """``det(p I + (1-p) 1 T^T) = p^{k-1} (p + (1-p) sum(T)) = p^{k-1}``: rank ``k`` for
        ``p > 0``; for ``p = 0`` every row is ``T`` (rank 1)."""
        if self.p > 0:
            return self.k, "exact: det(p I + (1-p) 1 T^T) = p^(k-1) > 0"
        return 1, "exact: p = 0, every row of the channel is the fake table T"

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """Algorithm 1's client for every user at once: Bernoulli(p) coin, then Eq. 4.2."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        keep = rng.random(x.size) < self.p
        fake = np.minimum(np.searchsorted(np.cumsum(self.T), rng.random(x.size), side="right"), self.k - 1)
        return np.where(keep, x, fake).astype(np.int64)

    def epsilon_closed_form(self) -> float:
        """:func:`rrba_epsilon` of this mechanism (equal to :meth:`epsilon_ldp`)."""
        return rrba_epsilon(self.p, self.T)
