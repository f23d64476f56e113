"""The likelihood block: what the EM engine reads of one mechanism's reports.

A block holds the distinct reports of one mechanism with their counts as an operator ``G``
(``k x m``, ``G[x, j] = P(report_j | x)``); the engine evaluates ``theta @ G`` (:meth:`forward`) and
``G @ w`` (:meth:`backward`) and never needs the matrix itself. This module also holds the cap on
dense matrices that every channel and likelihood respects before it allocates one.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, SupportsInt, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from localpriv.utils.validation import LocalPrivError, env_int

__all__ = ["LikelihoodBlock", "DenseBlock", "WeightedSumBlock", "total_loglik", "check_dense_size", "max_dense_entries",
           "dense_cap_override", "MAX_DENSE_ENTRIES", "Evaluation", "check_report_bytes"]


# --------------------------------------------------------------------------------------------
# The dense-size cap (docs/decisions/0011-dense-size-cap.md)
# --------------------------------------------------------------------------------------------
#: Largest dense matrix (entries) built for a channel or a likelihood: 2*10^8 float64, 1.49 GiB.
#: The environment variable ``LOCALPRIV_MAX_DENSE_ENTRIES`` overrides it (read at every check).
MAX_DENSE_ENTRIES = 200_000_000


#: A lower cap in force for the current context only (the parse-time privacy check).
_CAP_OVERRIDE: contextvars.ContextVar[int | None] = contextvars.ContextVar("localpriv_dense_cap", default=None)


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
    return env_int("LOCALPRIV_MAX_DENSE_ENTRIES", MAX_DENSE_ENTRIES)


def _count(n: int) -> str:
    return str(n) if n < 10 ** 15 else f"~10^{len(str(n)) - 1}"


def check_report_bytes(reports: SupportsInt, width: SupportsInt, what: str) -> None:
    """Refuse to build ``reports`` byte reports of ``width`` bytes each (users x report width)
    above the dense cap in bytes (8 bytes per entry of :func:`max_dense_entries`), before
    allocating them: a one-line :class:`LocalPrivError` naming the product, the limit and its
    environment variable. The samplers of bit-vector and float32-vector reports call it with
    ``width`` the bytes of one report (``ceil(k / 8)``, ``4 k``)."""
    n, w = int(reports), int(width)
    total, cap = n * w, 8 * max_dense_entries()
    if total > cap:
        raise LocalPrivError(f"{what}: {_count(n)} reports x {_count(w)} bytes = {_count(total)} bytes is above "
                             f"the limit of {cap} bytes (environment variable LOCALPRIV_MAX_DENSE_ENTRIES, "
                             "8 bytes per entry)")


def check_dense_size(rows: SupportsInt, cols: SupportsInt, what: str) -> None:
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
#: What :meth:`LikelihoodBlock.forward` returns and the engine hands back to the same block: the array
#: ``p`` of report probabilities for a block that holds its reports, a record of the numbers computed
#: elsewhere for one that does not (a Spark block); the engine never looks inside it otherwise.
Evaluation: TypeAlias = Any


class LikelihoodBlock:
    """Distinct reports of one mechanism with their counts, as an operator ``G`` (``k x m``).

    ``G[x, j] = P(report_j | x)``, report ``j`` seen ``c_j`` times. This class is the whole
    protocol between a block and the EM engine (:mod:`localpriv.estimators.em`, its Newton finish
    :mod:`localpriv.estimators.newton`, the regularized estimators and the observed information):
    the engine calls only the methods and reads only the attributes declared here, and every
    method returns plain numbers or NumPy arrays. Subclasses implement :meth:`forward` and
    :meth:`backward`; the defaults of everything else derive from them and from ``counts``.

    The engine's quantities, with ``p = theta @ G`` (the probability of each report)::

        L(theta)      = sum_{j: c_j > 0} c_j log p_j                       (loglik)
        grad(theta)   = G (c / p)          = dL / dtheta                   (gradient)
        -H(theta)     = G diag(c / p^2) G^T                                (hessian_matrix)
        diag(-H)      = sum_j (c_j / p_j^2) G[x, j]^2                       (hessian_diagonal)

    :meth:`forward` returns the block's *evaluation* at ``theta``; for a block that holds its
    reports it is the array ``p``. The engine hands that value back, unchanged, to the same block's
    :meth:`loglik`, :meth:`impossible`, :meth:`gradient` and :meth:`hessian_weights`, and does
    arithmetic on it only for blocks with ``costly_forward`` (where it must be the array ``p``).
    A block whose reports live elsewhere (a Spark DataFrame, :mod:`localpriv.extras.spark`)
    returns a record of the numbers it computed there and implements those methods by reading it.

    Capabilities (class attributes; the engine reads them, never probes for methods):

    ``hessian_diagonal``
        ``None`` (default) or a method ``w -> sum_j w_j G[x, j]^2``: a closed form, offered by
        blocks whose diagonal costs about one product. Without it the Newton finish tabulates
        the diagonal from :meth:`dense` for small blocks only.
    ``hessian_by_matrix``
        ``True`` when the Newton finish should solve with :meth:`hessian_matrix` (``k x k``)
        instead of conjugate gradients over products: blocks whose every product is costly (a
        pass over distributed reports). The engine then brackets the finish with
        :meth:`begin_newton` and :meth:`end_newton`.
    ``costly_forward``
        ``True`` when :meth:`forward` is costly (an FFT pair): the SQUAREM cycles derive forward
        products of trial points from earlier ones and :meth:`sparse_forward` (at most
        ``sparse_limit`` cells).
    ``log_offset``
        A constant added to :meth:`loglik` to give the mechanism's true log-likelihood (blocks
        that rescale their columns; EM is invariant to it).
    """

    k: int
    counts: NDArray[np.float64]
    #: ``hessian_diagonal(w) = sum_j w_j G[x, j]^2`` (the diagonal of ``G diag(w) G^T``), offered
    #: by blocks with a closed form; it preconditions the engine's Newton finish
    #: (:mod:`localpriv.estimators.newton`). ``None``: not offered.
    hessian_diagonal: Callable[[np.ndarray], np.ndarray] | None = None
    #: the Newton finish solves with :meth:`hessian_matrix` (see the class docstring)
    hessian_by_matrix: bool = False
    #: the Newton finish also starts at zero the small coordinates whose EM factor is below
    #: ``1 - newton_drop_factor`` (0: only those below ``1e-9 / k``); smooth channels (planar FFT
    #: blocks), whose full faces are too ill-conditioned for conjugate gradients, set it
    newton_drop_factor: float = 0.0
    #: a forward product costs an FFT pair (see the class docstring)
    costly_forward: bool = False
    @property
    def sparse_limit(self) -> int:
        """Most cells :meth:`sparse_forward` sums directly (0 here; costly blocks compute theirs)."""
        return 0

    #: constant of the log-likelihood left out of :meth:`loglik`
    log_offset: float = 0.0

    # ---- the products --------------------------------------------------------------------
    def forward(self, theta: np.ndarray) -> Evaluation:  # pragma: no cover - abstract
        """The block's evaluation at ``theta``: ``p = theta @ G`` (``m`` probabilities)."""
        raise NotImplementedError

    def backward(self, w: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        """``G @ w`` (``k`` numbers) for weights ``w`` on the reports."""
        raise NotImplementedError

    def sparse_forward(self, cells: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``theta @ G`` for ``theta`` zero outside ``cells`` (``weights`` there)."""
        theta = np.zeros(self.k)
        theta[cells] = weights
        return self.forward(theta)

    # ---- sizes ------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """``m``, the number of distinct reports."""
        return int(self.counts.size)

    @property
    def total(self) -> float:
        """``n = sum_j c_j``, the number of reports."""
        return float(self.counts.sum())

    def live(self) -> np.ndarray | None:
        """Indices of the reports with a positive count (``None`` when all are), cached."""
        cache = self.__dict__.get("_live_cache")
        if cache is None or cache[0] != self.counts.size:
            pos = self.counts > 0
            cache = (self.counts.size, None if pos.all() else np.flatnonzero(pos))
            with contextlib.suppress(AttributeError):  # blocks with __slots__ keep no cache
                self._live_cache = cache
        return cache[1]

    # ---- what the engine reads of an evaluation ---------------------------------------------
    def loglik(self, p: Evaluation) -> float:
        """``sum_{j: c_j > 0} c_j log p_j`` (``-inf`` or ``nan`` when a seen report has
        ``p_j <= 0``; the engine calls it under ``np.errstate(divide="ignore", invalid="ignore")``)."""
        live = self.live()
        c = self.counts if live is None else self.counts[live]
        pl = p if live is None else p[live]
        if pl.size == 0:
            return 0.0
        return float(c @ np.log(pl))

    def impossible(self, p: Evaluation) -> int:
        """How many seen reports have probability ``p_j <= 0`` (reports not from this mechanism)."""
        return int(((self.counts > 0) & (p <= 0)).sum())

    def gradient(self, p: Evaluation) -> np.ndarray:
        """``grad = G (c / p)`` over the seen reports: the E-step, ``dL / dtheta``."""
        live = self.live()
        if live is None:
            w = self.counts / p
        else:
            w = np.zeros_like(p)
            w[live] = self.counts[live] / p[live]
        return self.backward(w)

    def loglik_and_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """``(L(theta), grad(theta))`` from one evaluation."""
        with np.errstate(divide="ignore", invalid="ignore"):
            p = self.forward(np.asarray(theta, dtype=float))
            return self.loglik(p), self.gradient(p)

    def hessian_weights(self, p: Evaluation) -> Evaluation:
        """The weights ``c / p^2`` of ``-H = G diag(c / p^2) G^T`` (zero where ``c_j = 0``), as
        :meth:`hessian_product`, :meth:`hessian_matrix` and ``hessian_diagonal`` take them."""
        w = np.zeros_like(p)
        pos = self.counts > 0
        w[pos] = self.counts[pos] / p[pos] ** 2
        return w

    def hessian_product(self, w: Evaluation, v: np.ndarray) -> np.ndarray:
        """``G diag(w) G^T v`` (one forward and one backward product)."""
        return self.backward(w * self.forward(v))

    def hessian_matrix(self, w: Evaluation) -> np.ndarray:
        """``G diag(w) G^T`` (``k x k``), from :meth:`dense`."""
        G = np.asarray(self.dense(), dtype=float)
        return (G * w) @ G.T

    def dense_squares(self) -> np.ndarray:
        """``G * G`` elementwise from :meth:`dense` (kept on the block): the Newton finish's
        diagonal ``(G * G) @ w`` for small blocks without a closed-form ``hessian_diagonal``."""
        sq = self.__dict__.get("_dense_squares")
        if sq is None or sq.shape[1] != self.counts.size:
            G = np.asarray(self.dense(), dtype=float)
            sq = G * G
            with contextlib.suppress(AttributeError):  # blocks with __slots__ keep no cache
                self._dense_squares = sq
        return sq

    def begin_newton(self) -> None:
        """Called before a Newton finish (blocks with ``hessian_by_matrix`` prepare its passes)."""

    def end_newton(self) -> None:
        """Called after a Newton finish."""

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


def total_loglik(blocks: Iterable[LikelihoodBlock], evaluations: Iterable[Evaluation]) -> float:
    """``L = sum_A L_A``: the blocks' :meth:`~LikelihoodBlock.loglik` of their evaluations, ``-inf``
    when one is ``nan`` (a negative probability) or ``-inf`` (a seen report of probability 0)."""
    total = 0.0
    for b, p in zip(blocks, evaluations):
        total += b.loglik(p)
    return -math.inf if math.isnan(total) else total


class DenseBlock(LikelihoodBlock):
    """A likelihood block held as a dense ``k x m`` matrix."""

    def __init__(self, G: np.ndarray, counts: np.ndarray) -> None:
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

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        return theta @ self.G

    def backward(self, w: np.ndarray) -> NDArray[np.float64]:
        return self.G @ w

    def hessian_diagonal(self, w: np.ndarray) -> NDArray[np.float64]:
        sq = getattr(self, "_G2", None)
        if sq is None:
            sq = self._G2 = self.G * self.G
        return sq @ w

    def dense(self) -> NDArray[np.float64]:
        return self.G


class WeightedSumBlock(LikelihoodBlock):
    """``G = sum_i w_i G_i``: member blocks on the same ``m`` reports, mixed with weights ``w_i``.

    The average mechanism ``A[n] = sum_A (n^A/n) A`` of seed 003 Eq. 9, restricted to the pooled
    reports, without its dense ``k x m`` matrix: ``theta @ G = sum_i w_i (theta @ G_i)`` and
    ``G @ v = sum_i w_i (G_i @ v)``, one product of every member each, so a product costs the sum of
    the members' (``O(M (k + m))`` for ``M`` structured members). The counts are the block's own
    (the members' are not read). No ``hessian_diagonal``: ``sum_j v_j G[x, j]^2`` is not a sum of the
    members' (the Newton finish tabulates it from :meth:`dense` where that is small, SQUAREM otherwise).
    """

    def __init__(self, members: Sequence[LikelihoodBlock], weights: ArrayLike, counts: ArrayLike) -> None:
        self.members = list(members)
        self.weights = np.asarray(weights, dtype=float).ravel()
        self.counts = np.asarray(counts, dtype=float).ravel()
        if not self.members or self.weights.size != len(self.members):
            raise LocalPrivError(f"a weighted sum of blocks needs one weight per member, got {self.weights.size} "
                                 f"weights for {len(self.members)} members")
        self.k = int(self.members[0].k)
        if any(int(b.k) != self.k or b.size != self.counts.size for b in self.members):
            raise LocalPrivError(f"a weighted sum of blocks needs members on the same {self.k} inputs and "
                                 f"{self.counts.size} reports")

    def forward(self, theta: np.ndarray) -> NDArray[np.float64]:
        out = np.zeros(self.counts.size)
        for w, b in zip(self.weights, self.members):  # one product per mechanism
            out += w * np.asarray(b.forward(theta), dtype=float)
        return out

    def backward(self, v: np.ndarray) -> NDArray[np.float64]:
        out = np.zeros(self.k)
        for w, b in zip(self.weights, self.members):
            out += w * np.asarray(b.backward(v), dtype=float)
        return out

    def dense(self) -> NDArray[np.float64]:
        check_dense_size(self.k, self.counts.size, "a weighted sum of likelihood blocks")
        out = np.zeros((self.k, self.counts.size))
        for w, b in zip(self.weights, self.members):
            out += w * np.asarray(b.dense(), dtype=float)
        return out
