"""Local hashing: BLH and OLH (Wang et al., USENIX Security 2017; seed 002).

Every user draws a hash function ``H`` from a seeded family mapping ``{0..k-1}`` to ``{0..g-1}``,
hashes her value and reports the hash through ``g``-ary randomized response::

    y = H(x) with probability p = e^eps / (e^eps + g - 1), else uniform on the other g - 1 values

BLH uses ``g = 2``; OLH the variance-optimal ``g = round(e^eps) + 1``. The support of a report
``(H, y)`` is ``S(H, y) = {v : H(v) = y}``, so ``p* = p`` and ``q* = 1/g`` (seed 002, pure LDP).

Hash family (our choice, documented in docs/oracles.md)
-------------------------------------------------------
A report carries its 32-bit hash *seed* ``s`` (uniform on ``0..n_seeds-1``, ``n_seeds = 2^32``
by default). ``(a, b)`` are derived from ``s`` with the SplitMix64 finalizer, and
``H_s(x) = ((a x + b) mod P) mod g`` with the Mersenne prime ``P = 2^31 - 1``,
``a in 1..P-1``, ``b in 0..P-1`` (Carter-Wegman universal hashing), all in vectorized uint64
arithmetic. A report is ONE int64: ``report = s * g + y`` (decode: ``s = report // g``,
``y = report % g``), so reports aggregate with the generic ``GROUP BY report``.

Exact likelihood: ``P((s, y) | x) = (1/n_seeds) * (q + (p - q) [H_s(x) = y])`` with
``q = (1 - p)/(g - 1)``, form (*) of :mod:`localpriv.mechanisms.unary`; the LDP level computed
from it is ``log(p / q)``.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._validation import LocalPrivError, check_eps, check_int, check_rng
from .unary import PureProtocol
from .base import register

__all__ = ["LocalHashing", "BLH", "OLH", "hash_values", "grr_sample", "olh_g"]

PRIME = np.uint64(2 ** 31 - 1)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
DENSE_MAX_OUTPUTS = 1 << 16


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer on uint64 arrays (wrapping arithmetic)."""
    z = z + _GOLD
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def hash_values(seeds, values, g: int) -> np.ndarray:
    """``H_s(x) = ((a x + b) mod P) mod g`` with ``(a, b)`` derived from the seed ``s``.

    ``seeds`` and ``values`` broadcast against each other (e.g. ``seeds[:, None]`` and
    ``values[None, :]`` give the ``reports x k`` table).
    """
    with np.errstate(over="ignore"):
        h1 = _mix(np.asarray(seeds, dtype=np.uint64))
        h2 = _mix(h1)
    a = np.uint64(1) + h1 % (PRIME - np.uint64(1))
    b = h2 % PRIME
    x = np.asarray(values, dtype=np.uint64)
    return (((a * x + b) % PRIME) % np.uint64(g)).astype(np.int64)


def grr_sample(values: np.ndarray, g: int, p: float, rng) -> np.ndarray:
    """g-ary randomized response: keep ``values`` w.p. ``p``, else uniform on the other ``g-1``."""
    keep = rng.random(values.size) < p
    other = rng.integers(0, g - 1, size=values.size)
    other += other >= values
    return np.where(keep, values, other).astype(np.int64)


def olh_g(eps: float) -> int:
    """OLH's hash range ``g = round(e^eps) + 1`` (Wang et al. 2017), at least 2."""
    return max(2, int(np.rint(np.exp(eps))) + 1)


class LocalHashing(PureProtocol):
    """Local hashing into ``g`` values with GRR keep probability ``p`` (not registered: use
    :class:`BLH`, :class:`OLH` or the longitudinal versions)."""

    def _setup(self, k, g, p, n_seeds):
        self.k = check_int(k, "k", minimum=2)
        self.g = check_int(g, "g", minimum=2, maximum=2 ** 30)
        self.n_seeds = check_int(n_seeds, "n_seeds", minimum=1, maximum=2 ** 32)
        self.p_g = float(p)
        self.q_g = (1.0 - self.p_g) / (self.g - 1)
        if not self.q_g < self.p_g < 1:
            raise LocalPrivError(f"local hashing needs 1/g < p < 1, got p={p}, g={g}")

    @property
    def p_star(self) -> float:
        return self.p_g

    @property
    def q_star(self) -> float:
        return 1.0 / self.g

    # ---- reports ------------------------------------------------------------------------
    def decode(self, reports) -> tuple[np.ndarray, np.ndarray]:
        """``report -> (seed, y)`` with ``report = seed * g + y``."""
        r = np.asarray(reports)
        if r.ndim != 1 or r.dtype.kind not in "iu":
            raise LocalPrivError(f"{self}: reports are int64 values seed*g + y")
        r = r.astype(np.int64)
        if np.any(r < 0) or np.any(r >= self.n_seeds * self.g):
            raise LocalPrivError(f"{self}: reports outside 0..{self.n_seeds * self.g - 1}")
        return r // self.g, r % self.g

    @property
    def n_outputs(self):
        n = self.n_seeds * self.g
        return n if n <= DENSE_MAX_OUTPUTS else None

    def output_index(self, reports):
        s, y = self.decode(reports)
        return s * self.g + y

    def channel(self) -> np.ndarray:
        n = self.n_outputs
        if n is None:
            raise LocalPrivError(f"{self}: {self.n_seeds * self.g} outputs; the dense channel is only "
                                 f"built for n_seeds * g <= {DENSE_MAX_OUTPUTS}")
        return self.likelihood(np.arange(n))

    # ---- sampling -----------------------------------------------------------------------
    def memoize(self, x, rng):
        """Seeds and hashed values ``(s, H_s(x))`` (the data-dependent part before noise)."""
        seeds = rng.integers(0, self.n_seeds, size=x.size, dtype=np.int64)
        return seeds, hash_values(seeds, x, self.g)

    def sample(self, x, rng) -> np.ndarray:
        x = self._check_inputs(x)
        rng = check_rng(rng)
        seeds, h = self.memoize(x, rng)
        return seeds * self.g + grr_sample(h, self.g, self.p_g, rng)

    # ---- estimation ingredients --------------------------------------------------------
    def support(self, reports) -> sp.csr_matrix:
        s, y = self.decode(reports)
        vals = np.arange(self.k)
        step = max(1, (1 << 22) // self.k)
        parts = []
        for a in range(0, s.size, step):  # chunks of distinct reports, to bound memory
            e = min(s.size, a + step)
            parts.append(sp.csr_matrix(hash_values(s[a:e, None], vals[None, :], self.g) == y[a:e, None]))
        return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, self.k), dtype=bool)

    def likelihood_parts(self, reports):
        s, _ = self.decode(reports)
        return np.full(s.size, -np.log(self.n_seeds)), self.q_g, self.p_g

    def epsilon_ldp(self) -> float:
        """``log(p/q)`` if some seed hashes two inputs apart (checked on the first 1024 seeds),
        else 0 (every report would then carry no information)."""
        seeds = np.arange(min(self.n_seeds, 1024))
        h = hash_values(seeds[:, None], np.arange(self.k)[None, :], self.g)
        if np.any(h.min(axis=1) != h.max(axis=1)):
            return float(np.log(self.p_g / self.q_g))
        return 0.0


@register
class BLH(LocalHashing):
    """Binary local hashing: ``g = 2``, ``p = e^eps/(e^eps + 1)``."""

    spec_name = "blh"

    def __init__(self, k: int, eps: float, n_seeds: int = 2 ** 32):
        self.eps = check_eps(eps)
        self._setup(k, 2, 1.0 / (1.0 + np.exp(-self.eps)), n_seeds)

    def params(self):
        return {"k": self.k, "eps": self.eps, "n_seeds": None if self.n_seeds == 2 ** 32 else self.n_seeds}


@register
class OLH(LocalHashing):
    """Optimized local hashing: ``g = round(e^eps) + 1``, ``p = e^eps/(e^eps + g - 1)``."""

    spec_name = "olh"

    def __init__(self, k: int, eps: float, n_seeds: int = 2 ** 32):
        self.eps = check_eps(eps)
        g = olh_g(self.eps)
        self._setup(k, g, np.exp(self.eps) / (np.exp(self.eps) + g - 1), n_seeds)

    def params(self):
        return {"k": self.k, "eps": self.eps, "n_seeds": None if self.n_seeds == 2 ** 32 else self.n_seeds}
