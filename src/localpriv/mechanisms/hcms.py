"""Hadamard count-mean sketch (``hcms``): one bit per report, any domain size.

Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning Journal
1(8), 2017, Algorithm "Client-Side HCMS". ``H_m`` is the ``m x m`` Sylvester Hadamard matrix
(``m`` a power of two), ``h_0, ..., h_{d-1}`` hash functions onto ``0..m-1``.

Client: draw a row ``j`` uniform on ``0..d-1`` and a coefficient ``l`` uniform on ``0..m-1``;
the true sign is ``H_m[l, h_j(x)]``; send it flipped with probability ``1 / (1 + e^eps)``. So::

    P(j, l, s | x) = 1/(d m) * e^eps / (1 + e^eps)   if s = H_m[l, h_j(x)],
                     1/(d m) *   1   / (1 + e^eps)   otherwise,

a finite channel on ``2 d m`` outputs with LDP level ``eps`` as soon as some row hashes two inputs
apart (otherwise 0). **Report**: one int64, ``(j m + l) 2 + [s = +1]`` (decode: ``bit = r % 2``,
``l = (r // 2) % m``, ``j = r // (2m)``), as OLH keeps ``(seed, y)`` in one int64.

Hashes (cross-language, :mod:`localpriv.mechanisms.stablehash`): ``h_j(x) = XXH64(x as 8 little-endian bytes,
seed = j) mod m`` for the domain index ``x``, i.e. ``to_range(hash_keys(x, seed=j), m)``.

Estimators. Apple's sketch: ``S[j, l] = sum_{reports (j, l, s)} d c_eps s``, ``c_eps = (e^eps + 1)
/ (e^eps - 1)``, transformed ``S~ = S H_m`` (one fast Walsh-Hadamard transform per row), then::

    f_hat(x) = m / (m - 1) * ( (1/(d n)) sum_j S~[j, h_j(x)] - 1/m ).

It is unbiased over the choice of the hash functions; given the hash functions its mean is
``m/(m-1) (sum_v theta_v c_xv - 1/m)`` with ``c_xv`` the fraction of rows where ``v`` and ``x``
collide (``c_xx = 1``; :meth:`HadamardCMS.expected_estimate`), and its variance is at most
``(m/(m-1))^2 c_eps^2 / n`` per value. IBU runs on
:class:`localpriv.likelihood.structured.HadamardSketchBlock` (``O(d k + d m log m)`` per product).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

# the blocks live in localpriv.likelihood.structured, which imports this package: bound at call time
from localpriv.likelihood import structured as _st
from localpriv.likelihood.blocks import check_dense_size
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.mechanisms.stablehash import hash_keys, to_range
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

__all__ = ["HadamardCMS", "SketchHashes"]

#: default sketch width and number of hash rows
DEFAULT_M = 1024
DEFAULT_D = 256
#: largest sketch (rows x width)
MAX_SKETCH = 2 ** 30


class SketchHashes:
    """The ``d`` rows ``h_j(x) = XXH64(x, seed=j) mod m`` shared by ``cms`` and ``hcms``."""

    def __init__(self, k: int, m: int, d: int) -> None:
        self.k, self.m, self.d = k, m, d
        self._table: np.ndarray | None = None
        self._separates: bool | None = None

    def of(self, x: ArrayLike, rows: ArrayLike) -> np.ndarray:
        """``h_{rows_i}(x_i)`` for every user (vectorized)."""
        return to_range(hash_keys(np.asarray(x, dtype=np.uint64), np.asarray(rows, dtype=np.uint64)), self.m)

    def table(self, what: str) -> np.ndarray:
        """The ``d x k`` table of every ``h_j(x)`` (cached; refused above the dense-size cap)."""
        if self._table is None:
            check_dense_size(self.d, self.k, f"{what} hash table")
            x = np.arange(self.k, dtype=np.uint64)
            tab = np.empty((self.d, self.k), dtype=np.int64)
            for j in range(self.d):  # one row of hashes at a time: bounded temporaries
                tab[j] = to_range(hash_keys(x, np.uint64(j)), self.m)
            self._table = tab
        return self._table

    def hashing(self, what: str) -> _st.RowHashing:
        return _st.RowHashing(self.table(what), self.m)

    def separates(self) -> bool:
        """Does some row hash two inputs apart? Scans rows on the first 4096 inputs (almost always
        decided by row 0), then the rest by chunks only if every row was constant there."""
        if self._separates is None:
            self._separates = False
            first = np.arange(min(self.k, 4096), dtype=np.uint64)
            for j in range(self.d):  # rows, not users
                h = to_range(hash_keys(first, np.uint64(j)), self.m)
                if np.any(h != h[0]):
                    self._separates = True
                    return True
            h0 = to_range(hash_keys(np.zeros(self.d, dtype=np.uint64), np.arange(self.d, dtype=np.uint64)), self.m)
            for a in range(first.size, self.k, 1 << 16):  # chunks of inputs
                x = np.arange(a, min(self.k, a + (1 << 16)), dtype=np.uint64)
                if np.any(to_range(hash_keys(x[None, :], np.arange(self.d, dtype=np.uint64)[:, None]), self.m)
                          != h0[:, None]):
                    self._separates = True
                    break
        return self._separates

    def collisions(self) -> np.ndarray:
        """``c[x, v]``: the fraction of rows where ``h_j(x) = h_j(v)`` (``k x k``, small ``k``)."""
        check_dense_size(self.k, self.k, "the collision matrix")
        tab = self.table("collision")
        c = np.zeros((self.k, self.k))
        for j in range(self.d):  # rows, not users
            c += tab[j][:, None] == tab[j][None, :]
        return c / self.d


def check_sketch(k: int, m: int, d: int, name: str, power_of_two: bool) -> tuple[int, int, int]:
    k = check_int(k, "k", minimum=2)
    m = check_int(m, f"{name}: m", minimum=2, maximum=2 ** 30)
    d = check_int(d, f"{name}: d", minimum=1, maximum=2 ** 30)
    if power_of_two and m & (m - 1):
        raise LocalPrivError(f"{name}: m must be a power of two (the Hadamard transform), got {m}")
    if m * d > MAX_SKETCH:
        raise LocalPrivError(f"{name}: a sketch of d x m = {d} x {m} cells is above the limit of 2^30")
    return k, m, d


@register
class HadamardCMS(Mechanism):
    """Hadamard count-mean sketch (module docstring).

    Parameters
    ----------
    k : int
        Domain size.
    eps : float
        LDP level (the level computed from the channel equals it when some row separates inputs).
    m : int, optional
        Sketch width, a power of two (default 1024).
    d : int, optional
        Number of hash rows (default 256).
    """

    spec_name = "hcms"
    size_products = (("d", "m"), ("k", "d"))  # the sketch; every candidate's hash in every row
    size_defaults = {"m": DEFAULT_M, "d": DEFAULT_D}
    examples = (dict(spec="hcms(k=5,eps=1.0,m=4,d=3)", eps_ldp=1.0, tight=True),)

    def __init__(self, k: int, eps: float, m: int = DEFAULT_M, d: int = DEFAULT_D) -> None:
        self.eps = check_eps(eps)
        self.k, self.m, self.d = check_sketch(k, m, d, "hcms", power_of_two=True)
        self.hashes = SketchHashes(self.k, self.m, self.d)
        log_dm = math.log(self.d) + math.log(self.m)
        self.log_hi = -log_dm - float(np.logaddexp(0.0, -self.eps))  # 1/(dm) e^eps/(1+e^eps)
        self.log_lo = -log_dm - float(np.logaddexp(0.0, self.eps))   # 1/(dm) 1/(1+e^eps)
        self.hi, self.lo = math.exp(self.log_hi), math.exp(self.log_lo)
        self.p_keep = math.exp(-float(np.logaddexp(0.0, -self.eps)))
        with np.errstate(over="ignore"):
            self.c_eps = 1.0 + 2.0 / float(np.expm1(self.eps))  # (e^eps + 1) / (e^eps - 1)

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "m": self.m, "d": self.d}

    @property
    def n_outputs(self) -> int:
        return 2 * self.d * self.m

    # ---- reports ------------------------------------------------------------------------
    def decode(self, reports: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``report -> (j, l, s)`` with ``s = +-1``."""
        r = self.output_index(reports)
        return r // (2 * self.m), (r // 2) % self.m, 2 * (r % 2) - 1

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        x = self._check_inputs(x)
        rng = check_rng(rng)
        n = x.size
        j = rng.integers(0, self.d, size=n, dtype=np.int64)
        l = rng.integers(0, self.m, size=n, dtype=np.int64)
        keep = rng.random(n) < self.p_keep
        plus = _st._popcount_parity(l & self.hashes.of(x, j)) == 0  # H[l, h_j(x)] = +1
        bit = np.where(keep, plus, ~plus).astype(np.int64)
        return (j * self.m + l) * 2 + bit

    # ---- channel and likelihood ---------------------------------------------------------
    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        j, l, s = self.decode(reports)
        check_dense_size(self.k, j.size, f"{self} likelihood of {j.size} reports")
        h = self.hashes.table(str(self))[j]  # reports x k
        agree = (1 - 2 * _st._popcount_parity(l[:, None] & h)) == s[:, None]
        return np.where(agree, self.hi, self.lo).T

    def channel(self) -> np.ndarray:
        check_dense_size(self.k, self.n_outputs, f"{self} channel")
        return self.likelihood(np.arange(self.n_outputs))

    def output_probabilities(self, theta: ArrayLike) -> np.ndarray:
        n = self.n_outputs
        return self.likelihood_block(np.arange(n), np.ones(n)).forward(np.asarray(theta, dtype=float))

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> _st.HadamardSketchBlock:
        """:class:`~localpriv.likelihood.structured.HadamardSketchBlock`."""
        j, l, s = self.decode(reports)
        return _st.HadamardSketchBlock(self.hashes.hashing(str(self)), self.lo, self.hi, j, l, s, counts)

    def epsilon_ldp(self) -> float:
        """``log(hi / lo) = eps`` if some row hashes two inputs apart (then some coefficient ``l``
        has ``H[l, h_j(x)] != H[l, h_j(x')]``), else 0: every report is then equally likely under
        every input."""
        return checked_epsilon(self.eps if self.hashes.separates() else 0.0, str(self))

    # ---- Apple's estimator ----------------------------------------------------------------
    def sketch(self, reports: ArrayLike, counts: ArrayLike | None = None) -> np.ndarray:
        """The transformed sketch ``S~ = S H_m`` (``d x m``), ``S[j, l] = sum d c_eps s``."""
        j, l, s = self.decode(reports)
        w = np.ones(j.size) if counts is None else np.asarray(counts, dtype=float)
        S = np.bincount(j * self.m + l, weights=w * s, minlength=self.d * self.m).reshape(self.d, self.m)
        return _st.fwht(S * (self.d * self.c_eps))

    def unbiased(self, reports: ArrayLike, counts: ArrayLike | None = None) -> np.ndarray:
        """Apple's estimate of every frequency (sums to about 1, may be negative)."""
        n = float(np.shape(reports)[0] if counts is None else np.sum(counts))
        if not n > 0:
            raise LocalPrivError(f"{self}: no reports")
        mean = self.hashes.hashing(str(self)).gather(self.sketch(reports, counts)) / (self.d * n)
        return self.m / (self.m - 1) * (mean - 1.0 / self.m)

    def expected_estimate(self, theta: ArrayLike) -> np.ndarray:
        """The mean of :meth:`unbiased` given the hash functions (small ``k``):
        ``m/(m-1) (C theta - 1/m)``, ``C`` the collision fractions (``theta`` where nothing collides)."""
        return self.m / (self.m - 1) * (self.hashes.collisions() @ np.asarray(theta, dtype=float) - 1.0 / self.m)

    def variance_bound(self, n: float) -> float:
        """``(m/(m-1))^2 c_eps^2 / n``: each report adds ``+-c_eps`` to every value's mean."""
        return (self.m / (self.m - 1)) ** 2 * self.c_eps ** 2 / float(n)
