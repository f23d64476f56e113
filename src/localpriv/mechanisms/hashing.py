"""Local hashing: BLH and OLH (Wang et al., USENIX Security 2017; seed 002).

Every user draws a hash function ``H`` from a seeded family mapping ``{0..k-1}`` to ``{0..g-1}``,
hashes her value and reports the hash through ``g``-ary randomized response::

    y = H(x) with probability p = e^eps / (e^eps + g - 1), else uniform on the other g - 1 values

BLH uses ``g = 2``; OLH the variance-optimal ``g = round(e^eps) + 1``. The support of a report
``(H, y)`` is ``S(H, y) = {v : H(v) = y}``, so ``p* = p`` and ``q* = 1/g`` (seed 002, pure LDP).

Hash families (documented in docs/hashing.md)
---------------------------------------------
A report carries its hash *seed* ``s`` (uniform on ``0..n_seeds-1``, ``n_seeds = 2^32`` by
default). Two families, chosen by the spec parameter ``hash``:

* ``hash=xxh64`` (the default, format version 3): ``H_s(x) = XXH64(le64(x), seed=s) mod g``,
  i.e. ``stablehash.to_range(stablehash.hash_keys(x, seed=s), g)``: XXH64 of the 8 little-endian
  bytes of the input index ``x`` with the 64-bit seed ``s``, reduced mod ``g``. A documented,
  cross-language definition with published test vectors, so a client in any language with an
  XXH64 library produces the same reports.
* ``hash=cw`` (legacy: every release before format version 3): ``(a, b)`` derived from ``s``
  with the SplitMix64 finalizer, ``H_s(x) = ((a x + b) mod P) mod g`` with the Mersenne prime
  ``P = 2^31 - 1``, ``a in 1..P-1``, ``b in 0..P-1`` (Carter-Wegman). Kept so that report and
  counts files written before (format versions 1 and 2, read as ``hash=cw``) decode to the same
  estimates.

A report is ONE int64: ``report = s * g + y`` (decode: ``s = report // g``, ``y = report % g``),
so reports aggregate with the generic ``GROUP BY report``.

Exact likelihood: ``P((s, y) | x) = (1/n_seeds) * (q + (p - q) [H_s(x) = y])`` with
``q = (1 - p)/(g - 1)``, form (*) of :mod:`localpriv.mechanisms.unary`; the LDP level computed
from it is ``log(p / q)`` as soon as some seed hashes two inputs apart.

Log space: ``log p = eps - logaddexp(eps, log(g-1))``, ``log q = -logaddexp(eps,
log(g-1))``, so ``log(p/q) = eps`` exactly for any finite ``eps``. OLH's ``g = round(e^eps) + 1``
is capped at ``2^30`` (:data:`MAX_G`, the largest hash range; reports ``seed * g + y`` stay below
``2^62``): beyond ``eps = log(2^30) = 20.8`` OLH uses ``g = 2^30``, still at level ``eps``; only
MI's variance factor ``q*(1-q*)/(p*-q*)^2`` is no longer minimal, and it stays below
``4 * 2^-30`` there (``p* >= 1/2``, ``q* = 2^-30``).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import check_dense_size
from localpriv.likelihood.packed import PackedSupport
from localpriv.mechanisms import stablehash
from localpriv.mechanisms._sampling import CLIENT_CHUNK, client_inputs
from localpriv.mechanisms.base import register
from localpriv.mechanisms.krr import grr_floats
from localpriv.mechanisms.unary import PureProtocol
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng

__all__ = ["LocalHashing", "BLH", "OLH", "hash_values", "cw_hash_values", "grr_sample", "olh_g",
           "HASH_FAMILIES", "DEFAULT_HASH", "LEGACY_HASH", "check_hash"]

PRIME = np.uint64(2 ** 31 - 1)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
DENSE_MAX_OUTPUTS = 1 << 16
#: largest hash range ``g``
MAX_G = 2 ** 30
#: the hash family of specs that name none (format version 3 on)
DEFAULT_HASH = "xxh64"
#: the family of every release before format version 3 (files of versions 1 and 2 are read with it)
LEGACY_HASH = "cw"
HASH_FAMILIES = (DEFAULT_HASH, LEGACY_HASH)


def check_hash(family: Any, name: str = "local hashing") -> str:
    """The hash family of a spec: ``xxh64`` (default) or ``cw`` (legacy Carter-Wegman)."""
    if family not in HASH_FAMILIES:
        raise LocalPrivError(f"{name}: hash must be {' or '.join(HASH_FAMILIES)}, got {str(family)[:40]!r}")
    return family


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer on uint64 arrays (wrapping arithmetic)."""
    z = z + _GOLD
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def hash_values(seeds: ArrayLike, values: ArrayLike, g: int, family: str = DEFAULT_HASH) -> np.ndarray:
    """``H_s(x)`` of the family ``family`` (int64 in ``0..g-1``).

    ``xxh64``: ``XXH64(8 little-endian bytes of x, seed=s) mod g``
    (:func:`localpriv.mechanisms.stablehash.hash_keys`, :func:`~localpriv.mechanisms.stablehash.to_range`);
    ``cw``: :func:`cw_hash_values`. ``seeds`` and ``values`` broadcast against each other (e.g.
    ``seeds[:, None]`` and ``values[None, :]`` give the ``reports x k`` table).
    """
    if family == DEFAULT_HASH:
        return stablehash.hash_to_range(np.asarray(values, dtype=np.int64), np.asarray(seeds, dtype=np.int64), g)
    if family == LEGACY_HASH:
        return cw_hash_values(seeds, values, g)
    raise LocalPrivError(f"unknown hash family {str(family)[:40]!r}; known: {', '.join(HASH_FAMILIES)}")


def cw_hash_values(seeds: ArrayLike, values: ArrayLike, g: int) -> np.ndarray:
    """Legacy family: ``H_s(x) = ((a x + b) mod P) mod g`` with ``(a, b)`` derived from the seed
    ``s`` by the SplitMix64 finalizer (``P = 2^31 - 1``; Carter-Wegman). Broadcasts like
    :func:`hash_values`.
    """
    with np.errstate(over="ignore"):
        h1 = _mix(np.asarray(seeds, dtype=np.uint64))
        h2 = _mix(h1)
    a = np.uint64(1) + h1 % (PRIME - np.uint64(1))
    b = h2 % PRIME
    x = np.asarray(values, dtype=np.uint64)
    return (((a * x + b) % PRIME) % np.uint64(g)).astype(np.int64)


def grr_sample(values: np.ndarray, g: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """g-ary randomized response: keep ``values`` w.p. ``p``, else uniform on the other ``g-1``.

    The keep decision compares a uniform double (a multiple of ``2^-53``) with ``p``, so
    ``P(keep)`` is ``p`` rounded up to a multiple of ``2^-53`` (a relative change of the level
    below ``1e-15``); the replacement is NumPy's exact bounded integer. This is the stream of
    every earlier release (pinned by the legacy-family test); :func:`localpriv.mechanisms.
    _sampling.grr_into` is the exact, faster draw k-RR uses."""
    keep = rng.random(values.size) < p
    other = rng.integers(0, g - 1, size=values.size)
    other += other >= values
    return np.where(keep, values, other).astype(np.int64)


def olh_g(eps: float) -> int:
    """OLH's hash range ``g = round(e^eps) + 1`` (Wang et al. 2017), at least 2 and at most
    :data:`MAX_G` = 2^30 (reached at eps ~ 20.8; no overflow for any eps)."""
    return int(min(MAX_G, max(2, int(np.rint(np.exp(min(float(eps), 30.0)))) + 1)))


def grr_logs(eps: float, g: int) -> tuple[float, float]:
    """``(log p, log q)`` of GRR on ``g`` values at level ``eps``: keep ``e^eps/(e^eps+g-1)``,
    each other value ``1/(e^eps+g-1)``, in log space (exact for any finite eps)."""
    log_norm = float(np.logaddexp(eps, np.log(g - 1)))
    return eps - log_norm, -log_norm


class LocalHashing(PureProtocol):
    """Local hashing into ``g`` values with GRR keep probability ``p`` (not registered: use
    :class:`BLH`, :class:`OLH` or the longitudinal versions)."""

    def _setup(self, k: int, g: int, level: float, n_seeds: int, hash_family: str = DEFAULT_HASH) -> None:
        """Hash range ``g`` and GRR at log-ratio ``level = log(p/q) > 0`` (exact, log space)."""
        self.hash_family = check_hash(hash_family, self.spec_name or "local hashing")
        self.k = check_int(k, "k", minimum=2)
        self.g = check_int(g, "g", minimum=2, maximum=MAX_G)
        self.n_seeds = check_int(n_seeds, "n_seeds", minimum=1, maximum=2 ** 32)
        if not level > 0:
            raise LocalPrivError(f"local hashing needs p > q (a positive level), got log(p/q) = {level}")
        self._level = float(level)
        self.log_p, self.log_q = grr_logs(self._level, self.g)
        self.p_g, self.q_g = grr_floats(self._level, self.g)
        self._separates: bool | None = None

    @property
    def p_star(self) -> float:
        return self.p_g

    @property
    def q_star(self) -> float:
        return 1.0 / self.g

    def hash_values(self, seeds: ArrayLike, values: ArrayLike) -> np.ndarray:
        """``H_s(x)`` of this mechanism's family onto ``0..g-1`` (broadcasting)."""
        return hash_values(seeds, values, self.g, self.hash_family)

    def _hash_param(self) -> dict[str, Any]:
        return {"hash": None if self.hash_family == DEFAULT_HASH else self.hash_family}

    # ---- reports ------------------------------------------------------------------------
    def decode(self, reports: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``report -> (seed, y)`` with ``report = seed * g + y``."""
        r = np.asarray(reports)
        if r.ndim != 1 or r.dtype.kind not in "iu":
            raise LocalPrivError(f"{self}: reports are int64 values seed*g + y")
        r = r.astype(np.int64)
        if np.any(r < 0) or np.any(r >= self.n_seeds * self.g):
            raise LocalPrivError(f"{self}: reports outside 0..{self.n_seeds * self.g - 1}")
        return r // self.g, r % self.g

    @property
    def n_outputs(self) -> int | None:
        n = self.n_seeds * self.g
        return n if n <= DENSE_MAX_OUTPUTS else None

    def output_space_size(self) -> int:
        return self.n_seeds * self.g

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        s, y = self.decode(reports)
        return s * self.g + y

    def channel(self) -> np.ndarray:
        n = self.n_outputs
        if n is None:
            raise LocalPrivError(f"{self}: {self.n_seeds * self.g} outputs; the dense channel is only "
                                 f"built for n_seeds * g <= {DENSE_MAX_OUTPUTS}")
        check_dense_size(self.k, n, f"{self} channel")
        return self.likelihood(np.arange(n))

    # ---- sampling -----------------------------------------------------------------------
    def memoize(self, x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Seeds and hashed values ``(s, H_s(x))`` (the data-dependent part before noise)."""
        seeds = rng.integers(0, self.n_seeds, size=x.size, dtype=np.int64)
        return seeds, self.hash_values(seeds, x)

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """``seed * g + GRR(H_seed(x))`` per user (:func:`grr_sample`), in chunks of ``2^16``
        users (per chunk: the seeds, then the GRR draws), so scratch memory is bounded by the
        chunk and the output is a function of the generator's stream alone; calls of at most
        ``2^16`` users draw the stream of earlier releases."""
        x = client_inputs(self, x)
        rng = check_rng(rng)
        out = np.empty(x.size, dtype=np.int64)
        for lo in range(0, x.size, CLIENT_CHUNK):
            hi = min(x.size, lo + CLIENT_CHUNK)
            seeds, h = self.memoize(x[lo:hi], rng)
            np.multiply(seeds, self.g, out=out[lo:hi])
            out[lo:hi] += grr_sample(h, self.g, self.p_g, rng)
        return out

    # ---- estimation ingredients --------------------------------------------------------
    def _support_chunks(self, reports: ArrayLike) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, dense bool rows)`` of the support ``[H_{s_j}(v) = y_j]``, by chunks of ~4M entries
        of distinct reports (memory bounded by a chunk, whatever the number of reports)."""
        s, y = self.decode(reports)
        vals = np.arange(self.k)
        step = max(1, (1 << 22) // self.k)
        for a in range(0, s.size, step):
            e = min(s.size, a + step)
            yield a, self.hash_values(s[a:e, None], vals[None, :]) == y[a:e, None]

    def support(self, reports: ArrayLike) -> sp.csr_matrix:
        parts = [sp.csr_matrix(D) for _, D in self._support_chunks(reports)]
        return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, self.k), dtype=bool)

    def support_counts(self, reports: ArrayLike, counts: ArrayLike | None = None) -> np.ndarray:
        """``C_v = sum_j counts_j [H_{s_j}(v) = y_j]``, from the packed support (no sparse matrix)."""
        P = PackedSupport(self.packed_support(reports), self.k)
        c = np.ones(P.shape[0]) if counts is None else np.asarray(counts, dtype=float)
        return P.rmatvec(c)

    def packed_support(self, reports: ArrayLike) -> np.ndarray:
        """:meth:`support` as packed bits (``reports x ceil(k/8)``), by the same chunks."""
        out = np.empty((np.size(reports), -(-self.k // 8)), dtype=np.uint8)  # shape checked by decode
        for a, D in self._support_chunks(reports):
            out[a:a + D.shape[0]] = np.packbits(D, axis=1)
        return out

    def likelihood_parts(self, reports: ArrayLike) -> tuple[np.ndarray, float, float]:
        """(*) with ``r1 = 1``: ``c = p / n_seeds``, ``r0 = q / p = e^{-log(p/q)}``."""
        s, _ = self.decode(reports)
        return np.full(s.size, self.log_p - np.log(self.n_seeds)), float(np.exp(-self._level)), 1.0

    def seeds_separate(self) -> bool:
        """Does some seed (among the first 1024) hash two inputs apart? Inputs are scanned in
        chunks against input 0, stopping at the first witness (almost always in the first chunk),
        so this costs O(1024 * chunk) whatever ``k``."""
        if self._separates is None:
            seeds = np.arange(min(self.n_seeds, 1024))
            first = self.hash_values(seeds, 0)[:, None]
            step = max(1, (1 << 18) // seeds.size)
            self._separates = False
            for a in range(1, self.k, step):  # chunks of inputs, not users
                vals = np.arange(a, min(self.k, a + step))
                if np.any(self.hash_values(seeds[:, None], vals[None, :]) != first):
                    self._separates = True
                    break
        return self._separates

    def log_level(self) -> float:
        """``log(p/q)`` (exact, from the GRR structure) if some seed hashes two inputs apart
        (:meth:`seeds_separate`), else 0 (every report would then carry no information)."""
        return self._level if self.seeds_separate() else 0.0

    def rank_from_structure(self) -> None:
        """None: with a finite seed family the collision rates differ from ``1/g`` pair by pair, so
        the protocol is only approximately pure and the rank needs an SVD."""
        return None


@register
class BLH(LocalHashing):
    """Binary local hashing: ``g = 2``, ``p = e^eps/(e^eps + 1)``; ``hash=xxh64`` (default) or
    ``cw`` (legacy), see the module docstring."""

    spec_name = "blh"
    examples = (dict(spec="blh(k=4,eps=1.0)", eps_ldp=1.0, tight=True),)

    def __init__(self, k: int, eps: float, n_seeds: int = 2 ** 32,
                 hash: str = DEFAULT_HASH) -> None:  # noqa: A002
        self.eps = check_eps(eps)
        self._setup(k, 2, self.eps, n_seeds, hash)

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "n_seeds": None if self.n_seeds == 2 ** 32 else self.n_seeds,
                **self._hash_param()}


@register
class OLH(LocalHashing):
    """Optimized local hashing: ``g = round(e^eps) + 1`` (at most 2^30), ``p = e^eps/(e^eps + g - 1)``;
    ``hash=xxh64`` (default) or ``cw`` (legacy), see the module docstring."""

    spec_name = "olh"
    examples = (dict(spec="olh(k=4,eps=1.0)", eps_ldp=1.0, tight=True),)

    def __init__(self, k: int, eps: float, n_seeds: int = 2 ** 32,
                 hash: str = DEFAULT_HASH) -> None:  # noqa: A002
        self.eps = check_eps(eps)
        self._setup(k, olh_g(self.eps), self.eps, n_seeds, hash)

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps, "n_seeds": None if self.n_seeds == 2 ** 32 else self.n_seeds,
                **self._hash_param()}
