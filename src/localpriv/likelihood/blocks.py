"""The likelihood block: what the EM engine reads of one mechanism's reports.

A block holds the distinct reports of one mechanism with their counts as an operator ``G``
(``k x m``, ``G[x, j] = P(report_j | x)``); the engine evaluates ``theta @ G`` (:meth:`forward`) and
``G @ w`` (:meth:`backward`) and never needs the matrix itself. This module also holds the cap on
dense matrices that every channel and likelihood respects before it allocates one.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

import numpy as np

from localpriv.utils.validation import LocalPrivError

__all__ = ["LikelihoodBlock", "DenseBlock", "check_dense_size", "max_dense_entries", "dense_cap_override",
           "MAX_DENSE_ENTRIES"]


# --------------------------------------------------------------------------------------------
# The dense-size cap (issue 15)
# --------------------------------------------------------------------------------------------
#: Largest dense matrix (entries) built for a channel or a likelihood: 2*10^8 float64, 1.49 GiB.
#: The environment variable ``LOCALPRIV_MAX_DENSE_ENTRIES`` overrides it (read at every check).
MAX_DENSE_ENTRIES = 200_000_000


#: A lower cap in force for the current context only (the parse-time privacy check, issue 18).
_CAP_OVERRIDE: contextvars.ContextVar = contextvars.ContextVar("localpriv_dense_cap", default=None)


def max_dense_entries() -> int:
    """The dense-size cap in force: ``LOCALPRIV_MAX_DENSE_ENTRIES`` if set, else :data:`MAX_DENSE_ENTRIES`
    (and at most the parse-time check's budget while that check runs)."""
    override = _CAP_OVERRIDE.get()
    cap = _configured_cap()
    return cap if override is None else min(cap, override)


@contextlib.contextmanager
def dense_cap_override(entries: int) -> Iterator[None]:
    """Within the block, at most ``entries`` dense entries (on top of the configured cap)."""
    token = _CAP_OVERRIDE.set(int(entries))
    try:
        yield
    finally:
        _CAP_OVERRIDE.reset(token)


def _configured_cap() -> int:
    env = os.environ.get("LOCALPRIV_MAX_DENSE_ENTRIES", "").strip()
    if not env:
        return MAX_DENSE_ENTRIES
    try:
        cap = int(float(env))
    except (ValueError, OverflowError):
        raise LocalPrivError(f"LOCALPRIV_MAX_DENSE_ENTRIES must be a whole number of entries, got {env[:40]!r}") from None
    if cap < 1:
        raise LocalPrivError(f"LOCALPRIV_MAX_DENSE_ENTRIES must be at least 1, got {env[:40]!r}")
    return cap


def _count(n: int) -> str:
    return str(n) if n < 10 ** 15 else f"~10^{len(str(n)) - 1}"


def check_dense_size(rows, cols, what: str) -> None:
    """Refuse to build a dense ``rows x cols`` float64 matrix above the cap (:func:`max_dense_entries`).

    Raises a one-line :class:`LocalPrivError` saying what would have been built and how large it
    would be, e.g. ``k-RR channel would need a 100000 x 100000 dense matrix (74.5 GiB); ...``.
    Called wherever a channel or a likelihood is materialized, *before* allocating it.
    """
    rows, cols = int(rows), int(cols)
    entries = rows * cols
    cap = max_dense_entries()
    if entries > cap:
        try:
            size = f"{entries * 8 / 2 ** 30:.3g} GiB"
        except OverflowError:
            size = f"~10^{len(str(entries * 8 // 2 ** 30)) - 1} GiB"
        raise LocalPrivError(f"{what} would need a {_count(rows)} x {_count(cols)} dense matrix ({size}); the "
                             f"limit is {cap} entries (environment variable LOCALPRIV_MAX_DENSE_ENTRIES)")


# --------------------------------------------------------------------------------------------
# Observation model used by the estimators
# --------------------------------------------------------------------------------------------
class LikelihoodBlock:
    """Distinct reports of one mechanism with their counts, as an operator ``G`` (``k x m``).

    ``G[x, j] = P(report_j | x)``. Estimators only call :meth:`forward` (``theta @ G``, the
    probability of each report under ``theta``) and :meth:`backward` (``G @ w``).
    """

    k: int
    counts: np.ndarray
    #: ``hessian_diagonal(w) = sum_j w_j G[x, j]^2`` (the diagonal of ``G diag(w) G^T``), offered
    #: by blocks whose products are linear in ``theta``; it enables the engine's Newton finish
    #: (:mod:`localpriv.estimators.newton`). ``None``: not offered.
    hessian_diagonal = None

    def forward(self, theta: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def backward(self, w: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def dense(self) -> np.ndarray:
        """``G`` as a dense matrix (for tests and small cases): ``G[:, j] = backward(e_j)``.

        Generic fallback, one product per column; blocks with a closed form override it.
        Refused above the dense-size cap (:func:`check_dense_size`).
        """
        m = self.counts.size
        check_dense_size(self.k, m, f"the likelihood of {m} reports")
        out = np.empty((self.k, m))
        unit = np.zeros(m)
        for j in range(m):  # one product per distinct report; no m x m identity
            unit[j] = 1.0
            out[:, j] = self.backward(unit)
            unit[j] = 0.0
        return out


class DenseBlock(LikelihoodBlock):
    """A likelihood block held as a dense ``k x m`` matrix."""

    def __init__(self, G: np.ndarray, counts: np.ndarray):
        shape = np.shape(G)
        if len(shape) == 2:
            check_dense_size(shape[0], shape[1], "a dense likelihood block")
        self.G = np.ascontiguousarray(G, dtype=float)
        self.counts = np.asarray(counts, dtype=float)
        self.k = self.G.shape[0]
        if self.G.shape[1] != self.counts.size:
            raise LocalPrivError(
                f"likelihood matrix has {self.G.shape[1]} columns but there are {self.counts.size} counts"
            )

    def forward(self, theta):
        return theta @ self.G

    def backward(self, w):
        return self.G @ w

    def hessian_diagonal(self, w):
        sq = getattr(self, "_G2", None)
        if sq is None:
            sq = self._G2 = self.G * self.G
        return sq @ w

    def dense(self):
        return self.G
