"""Bloom-filter RAPPOR with cohorts (Erlingsson, Pihur, Korolova, CCS 2014).

A user holding the value ``x`` (an index of the candidate domain) belongs to a *cohort*
``c`` (uniform on ``0..cohorts-1``, drawn once per user) and encodes ``x`` in an ``m``-bit Bloom
filter ``B`` with ``h`` hash functions, then reports it through two randomized responses:

* **Bloom bits** (our documented, cross-language choice; ``docs/rappor.md``, ``docs/hashing.md``):
  bit ``j`` of ``B`` is set iff ``j = H_{c,i}(key(x)) = XXH64(le64(key(x)), seed = c h + i) mod m``
  for some ``i < h`` (:func:`localpriv.mechanisms.stablehash.hash_keys`,
  :func:`~localpriv.mechanisms.stablehash.to_range`).
  ``key(x) = x`` (``keys=index``, the default) or, with ``keys=labels``, the XXH64 (seed 0) of
  the UTF-8 text of the domain's label of ``x`` (:func:`localpriv.mechanisms.stablehash.hash_strings`), so
  candidates may be strings. Two of the ``h`` positions may coincide: ``|B| <= h``.
* **Permanent randomized response** (PRR, memoized per user in the real protocol): each bit
  becomes ``B'_j = 1`` with probability ``f/2``, ``0`` with probability ``f/2``, ``B_j`` otherwise.
* **Instantaneous randomized response** (IRR, per report): ``P(S_j = 1) = q`` if ``B'_j = 1``,
  ``p`` if ``B'_j = 0``.

Chained per bit (the paper's ``q*`` and ``p*``)::

    s1 = P(S_j = 1 | B_j = 1) = (1 - f/2) q + (f/2) p,    s0 = P(S_j = 1 | B_j = 0) = (f/2) q + (1 - f/2) p

and given ``x`` and ``c`` the ``m`` report bits are independent, so the exact likelihood of a
report ``(c, S)`` is::

    P((c, S) | x) = (1/cohorts) prod_j s_{B_j}^{S_j} (1 - s_{B_j})^{1 - S_j}
                  = (1/cohorts) s0^{|S|} (1-s0)^{m-|S|} exp(|B_c(x)| l0 + |B_c(x) & S| (l1 - l0))

with ``l1 = log(s1/s0)``, ``l0 = log((1-s1)/(1-s0))``.

Privacy, computed (never copied from a parameter). For two inputs with filters ``B, B'`` in one
cohort the log-ratio of a report is at most ``|B \\ B'| l1 - |B' \\ B| l0``, attained by the
report that sets the bits of ``B \\ B'`` and clears those of ``B' \\ B``; so

* ``epsilon_ldp()`` (ONE report, PRR + IRR) is the maximum of that over cohorts and pairs of
  inputs: ``h (logit s1 - logit s0)`` as soon as some cohort holds two inputs with disjoint
  filters of ``h`` distinct bits (the paper's ``eps_1``), less otherwise. It equals
  ``ldp_epsilon(channel())`` wherever the channel can be enumerated (tested).
* ``epsilon_perm()`` is the same maximum for the PRR alone (``l1 = -l0 = log((1-f/2)/(f/2))``):
  ``2 h log((1 - f/2)/(f/2))`` under the same condition, the paper's ``eps_inf``, which bounds
  any number of reports of one user (they are post-processing of her memoized ``B'``).

Reports are ONE int64, ``report = c * 2^m + sum_j S_j 2^j`` (bit ``j`` of the filter is bit ``j``
of the low ``m`` bits), when ``m + bits(cohorts - 1) <= 62``; wider filters (the paper's m = 128 or
256) are bit-vector reports of ``2 + ceil(m/8)`` bytes: the cohort as a little-endian uint16, then
the ``m`` bits packed little-endian (bit ``j`` is bit ``j mod 8`` of byte ``2 + j // 8``; padding
bits zero). Either way they aggregate with the generic ``GROUP BY report`` and the counts of
distinct reports are exactly what the exact likelihood needs. ``memoize(x, rng)`` draws the cohort
and the PRR, ``instantaneous(memo, rng)`` one IRR report, ``sample = instantaneous o memoize`` (one
report per user: a one-shot collection) and ``sample_rounds(x, rng, rounds)`` several reports from
one memoized PRR, as the longitudinal oracles of :mod:`localpriv.mechanisms.longitudinal`.

Decoding over a candidate set (:func:`decode`): per-cohort bit counts ``Y[c, j]`` of ``N[c]``
reports (:meth:`RAPPOR.bit_counts`), debiased to ``T[c, j] = (Y[c, j] - s0 N[c]) / (s1 - s0)``
(the estimated number of users of cohort ``c`` whose Bloom bit ``j`` is set), then

* ``method="nnls"``: RAPPOR's regression of ``T`` on the candidates' Bloom filters,
  ``min_theta || A theta - T ||_2`` with ``A[(c, j), x] = N[c] [j in B_c(x)]`` and ``theta >= 0``
  (non-negative least squares, ``scipy.optimize.nnls``). The paper selects candidates with the
  lasso, refits by least squares and keeps the significant ones; we fit all candidates at once
  under the constraint ``theta >= 0`` instead (our choice).
* ``method="ridge"`` (the default): the same regression with a ridge penalty (Hoerl and Kennard,
  Technometrics 1970), ``min_{theta >= 0} ||A theta - T||^2 + lambda ||theta||^2``, solved as the
  non-negative least squares of the augmented system ``[A; sqrt(lambda) I] theta = [T; 0]``, with
  ``lambda`` CHOSEN FROM THE DATA (never a fixed constant): by default the one minimizing the
  leave-one-cohort-out cross-validation error of the bit counts (users of different cohorts are
  independent, so a held-out cohort's counts are an honest test set that needs no variance model;
  details and the alternatives ``gcv`` and ``sure`` in :func:`decode`). pure-LDP's RAPPOR fits the
  same penalized regression with a fixed strength; ``nnls`` is the unpenalized one (the paper's
  regression, Erlingsson, Pihur, Korolova 2014, Sec. 4), and Fanti, Pihur and Erlingsson (PETS 2016)
  decode RAPPOR's bits by EM instead (our ``em`` and ``em-exact`` below).
* ``method="em"``: the one EM engine (:func:`localpriv.estimators.em.em`) on the same bit
  counts: it maximizes the *bitwise composite* likelihood ``sum_{c,j} Y log pi + (N - Y)
  log(1 - pi)``, ``pi[c, j] = s0 + (s1 - s0) sum_x theta_x [j in B_c(x)]``, treating the bits of
  one report as independent. Each ``Y[c, j]`` is exactly ``Binomial(N[c], pi[c, j])``, but the bits
  of one report are dependent through ``x``, so this is a consistent composite likelihood, not
  the likelihood: per-cohort bit counts are sufficient for it and for the regression, never for
  the exact likelihood.
* ``method="em-exact"``: the EM engine on the exact likelihood above for the distinct reports
  (the maximum-likelihood estimate; also what ``estimate(obs, "ibu")`` computes when the
  candidates are the mechanism's own inputs). It needs the distinct reports and their counts
  (what ``aggregate`` keeps), not just the bit counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import DenseBlock, check_dense_size, check_report_bytes
from localpriv.mechanisms import stablehash
from localpriv.mechanisms.base import Mechanism, Memoized, register
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.validation import LocalPrivError, check_int

if TYPE_CHECKING:
    from localpriv.domains import Domain

__all__ = ["RAPPOR", "BitCounts", "bloom_positions", "candidate_keys", "finite_float"]

#: the channel is enumerated only up to this many outputs (``cohorts * 2^m``)
DENSE_MAX_OUTPUTS = 1 << 16
#: widest Bloom filter (bits) and the bytes of the cohort in a bit-vector report
MAX_M = 4096
COHORT_BYTES = 2
_CHUNK = 1 << 18  # bits drawn at once when sampling


def finite_float(v: Any, name: str) -> float:
    """``float(v)``, or a one-line error naming the RAPPOR parameter ``name``."""
    try:
        out = float(v)
    except (TypeError, ValueError):
        raise LocalPrivError(f"rappor: {name} must be a number, got {v!r}") from None
    if not np.isfinite(out):
        raise LocalPrivError(f"rappor: {name} must be finite, got {v!r}")
    return out


def candidate_keys(candidates: ArrayLike) -> np.ndarray:
    """64-bit keys of candidates: unsigned integers as they are, strings by
    ``XXH64(UTF-8, seed=0)`` (:func:`localpriv.mechanisms.stablehash.hash_strings`)."""
    arr = np.asarray(candidates)
    if arr.dtype.kind in "ui":
        if arr.dtype.kind == "i" and arr.size and int(arr.min()) < 0:
            raise LocalPrivError("rappor: integer candidates are unsigned 64-bit keys (>= 0)")
        return arr.astype(np.uint64).ravel()
    if arr.dtype.kind in "UO":
        return stablehash.hash_strings([str(v) for v in arr.ravel()], seed=0)
    raise LocalPrivError(f"rappor: candidates must be integers (keys) or strings, got dtype {arr.dtype}")


def bloom_positions(keys: ArrayLike, cohorts: int, h: int, m: int) -> np.ndarray:
    """``(cohorts, len(keys), h)`` int64: ``XXH64(le64(key), seed = c h + i) mod m``."""
    keys = np.asarray(keys, dtype=np.uint64)
    seeds = (np.arange(cohorts, dtype=np.uint64)[:, None] * np.uint64(h)
             + np.arange(h, dtype=np.uint64)[None, :])            # cohorts x h
    return stablehash.to_range(stablehash.hash_keys(keys[None, :, None], seed=seeds[:, None, :]), m)


@dataclass
class BitCounts:
    """Per-cohort aggregates of RAPPOR reports: ``n[c]`` reports of cohort ``c``, ``ones[c, j]`` of
    them with bit ``j`` set."""

    n: np.ndarray
    ones: np.ndarray


@register
class RAPPOR(Memoized, Mechanism):
    """Bloom-filter RAPPOR with cohorts, PRR (``f``) and IRR (``p``, ``q``); see the module
    docstring for the encoding, the likelihood and the computed privacy.

    ``rappor(k=..,m=..,h=..,cohorts=..,f=..,p=..,q=..)``, defaults ``m=32, h=2, cohorts=8,
    f=0.5, p=0.5, q=0.75`` (the paper's ``f``, ``p``, ``q``); ``keys=labels`` keys the Bloom
    filter on the domain's labels (strings) instead of the indices.
    """

    spec_name = "rappor"
    size_products = (("k", "cohorts", "m"), ("k", "cohorts", "h"))  # every candidate's filter in every cohort
    size_defaults = {"m": 32, "h": 2, "cohorts": 8}
    examples = (
        # 2 cohorts x 2^4 bit vectors (an enumerable channel); the level is the paper's
        # eps_1 = h (logit s1 - logit s0), attained (two inputs with disjoint filters)
        dict(spec="rappor(k=4,m=4,h=2,cohorts=2,f=0.5,p=0.5,q=0.75)", eps_ldp=1.074285864166728, tight=True),
        # 4 x 2^40 outputs: not enumerable
        dict(spec="rappor(k=5,m=40,h=2,cohorts=4,f=0.25,p=0.25,q=0.75)", eps_ldp=3.1538294414570807, tight=True),
        # without the IRR (p = 0, q = 1): the PRR's 2 h log((1 - f/2) / (f/2)) = 4 log 3 at f = 0.5
        dict(spec="rappor(k=4,m=4,h=2,cohorts=2,f=0.5,p=0.0,q=1.0)", eps_ldp=4.394449154672439, tight=True),
        # a filter too wide for one int64: bit-vector reports of 2 + 16 bytes
        dict(spec="rappor(k=5,m=128,h=2,cohorts=4,f=0.25,p=0.25,q=0.75)", eps_ldp=3.1538294414570807, tight=True),
    )
    report_kind = "int64"

    def __init__(self, k: int, m: int = 32, h: int = 2, cohorts: int = 8, f: float = 0.5, p: float = 0.5,
                 q: float = 0.75, keys: str = "index", domain: Domain | None = None) -> None:
        self.k = check_int(k, "k", minimum=2)
        self.m = check_int(m, "rappor: m", minimum=1, maximum=MAX_M)
        self.h = check_int(h, "rappor: h", minimum=1, maximum=self.m)
        self.cohorts = check_int(cohorts, "rappor: cohorts", minimum=1, maximum=2 ** 16)
        # one int64 per report while it fits; else a bit vector of 2 + ceil(m/8) bytes
        self.wide = self.m + int(self.cohorts - 1).bit_length() > 62
        if self.wide:
            self.report_kind = "binary"  # type: ignore[misc]  # per instance: wide filters have bit-vector reports
            self.report_bytes = COHORT_BYTES + (self.m + 7) // 8
        self.f, self.p, self.q = finite_float(f, "f"), finite_float(p, "p"), finite_float(q, "q")
        if not 0.0 <= self.f < 1.0:
            raise LocalPrivError(f"rappor: need 0 <= f < 1, got f={self.f}")
        if not 0.0 <= self.p < self.q <= 1.0:
            raise LocalPrivError(f"rappor: need 0 <= p < q <= 1, got p={self.p}, q={self.q}")
        half = self.f / 2.0
        self.s1 = (1.0 - half) * self.q + half * self.p
        self.s0 = half * self.q + (1.0 - half) * self.p
        if not (0.0 < self.s0 < self.s1 < 1.0):
            raise LocalPrivError(f"rappor: the report bits must be random: need 0 < P(S=1|B=0) and "
                                 f"P(S=1|B=1) < 1, got {self.s0:.6g} and {self.s1:.6g} (f={self.f}, p={self.p}, "
                                 f"q={self.q})")
        if keys not in ("index", "labels"):
            raise LocalPrivError(f"rappor: keys must be index or labels, got {str(keys)[:40]!r}")
        self.keys = keys
        if keys == "labels":
            if domain is None:
                raise LocalPrivError("rappor: keys=labels needs a domain (its labels are the candidates)")
            if domain.size != self.k:
                raise LocalPrivError(f"rappor: k={self.k} but the domain has {domain.size} labels")
            self.key_values = stablehash.hash_strings([str(v) for v in np.asarray(domain.labels).ravel()], seed=0)
        else:
            self.key_values = np.arange(self.k, dtype=np.uint64)
        # per-bit log-probabilities (exact for the floats s0, s1)
        self.log_s1, self.log_1ms1 = float(np.log(self.s1)), float(np.log1p(-self.s1))
        self.log_s0, self.log_1ms0 = float(np.log(self.s0)), float(np.log1p(-self.s0))
        self.l1 = self.log_s1 - self.log_s0
        self.l0 = self.log_1ms1 - self.log_1ms0
        self._bloom: np.ndarray | None = None
        self._levels: dict[str, float] = {}

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "m": self.m, "h": self.h, "cohorts": self.cohorts, "f": self.f, "p": self.p,
                "q": self.q, "keys": None if self.keys == "index" else self.keys}

    # ---- the Bloom filters --------------------------------------------------------------
    def bloom(self, keys: ArrayLike | None = None) -> np.ndarray:
        """``(cohorts, n, m)`` bool: the Bloom filter of each key in each cohort (``keys=None``:
        the mechanism's inputs, cached)."""
        if keys is None and self._bloom is not None:
            return self._bloom
        kv = self.key_values if keys is None else np.asarray(keys, dtype=np.uint64)
        check_dense_size(self.cohorts * kv.size, self.m, f"{self} Bloom filters")
        pos = bloom_positions(kv, self.cohorts, self.h, self.m)     # cohorts x n x h
        out = np.zeros((self.cohorts, kv.size, self.m), dtype=bool)
        c = np.arange(self.cohorts)[:, None, None]
        v = np.arange(kv.size)[None, :, None]
        out[c, v, pos] = True
        if keys is None:
            self._bloom = out
        return out

    # ---- outputs ------------------------------------------------------------------------
    def output_space_size(self) -> int:
        return self.cohorts << self.m

    @property
    def n_outputs(self) -> int | None:
        n = self.output_space_size()
        return n if n <= DENSE_MAX_OUTPUTS else None

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        """Reports are their own output indices ``c * 2^m + bits``; checked to be in range (int64
        reports only: wide filters have bit-vector reports, see :meth:`decode_reports`)."""
        if self.wide:
            raise LocalPrivError(f"{self}: reports are bit vectors of {self.report_bytes} bytes, not output indices")
        r = np.asarray(reports)
        if r.dtype.kind == "f":
            if np.any(r != np.round(r)):
                raise LocalPrivError(f"{self}: reports must be integers c * 2^m + bits")
        elif r.dtype.kind not in "iu":
            raise LocalPrivError(f"{self}: reports must be integers c * 2^m + bits, got {r.dtype}")
        r = r.astype(np.int64)
        bad = (r < 0) | (r >= self.output_space_size())
        if bad.any():
            raise LocalPrivError(f"{self}: reports outside 0..{self.output_space_size() - 1}: "
                                 f"{np.unique(r[bad])[:5].tolist()}")
        return r

    def decode_reports(self, reports: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``report -> (cohort, n x m uint8 bits)`` (int64 reports or, for wide filters, bit-vector
        rows; invalid reports are refused with one line)."""
        if not self.wide:
            r = self.output_index(np.asarray(reports).ravel())
            bits = ((r[:, None] >> np.arange(self.m, dtype=np.int64)[None, :]) & 1).astype(np.uint8)
            return r >> self.m, bits
        r = np.asarray(reports)
        if r.ndim != 2 or r.dtype != np.uint8 or r.shape[1] != self.report_bytes:
            raise LocalPrivError(f"{self}: reports are {self.report_bytes}-byte vectors (uint8 rows), got "
                                 f"{r.dtype} of shape {r.shape}")
        cohort = r[:, 0].astype(np.int64) | (r[:, 1].astype(np.int64) << 8)
        if np.any(cohort >= self.cohorts):
            raise LocalPrivError(f"{self}: reports name cohorts outside 0..{self.cohorts - 1}: "
                                 f"{np.unique(cohort[cohort >= self.cohorts])[:5].tolist()}")
        bits = np.unpackbits(r[:, COHORT_BYTES:], axis=1, bitorder="little")
        if bits.shape[1] > self.m and bits[:, self.m:].any():
            raise LocalPrivError(f"{self}: reports set padding bits beyond bit {self.m - 1}")
        return cohort, bits[:, :self.m]

    def check_binary_reports(self, reports: ArrayLike) -> None:
        """Cohorts in range and padding bits clear (called by the readers for wide filters)."""
        step = max(1, _CHUNK // self.report_bytes)
        r = np.asarray(reports)
        for s in range(0, r.shape[0], step):
            self.decode_reports(r[s:s + step])

    def _encode(self, cohort: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """``(cohort, n x m bool)`` -> reports (int64, or bit-vector rows for wide filters)."""
        if not self.wide:
            weights = np.left_shift(np.int64(1), np.arange(self.m, dtype=np.int64))
            return (cohort << self.m) | (bits.astype(np.int64) @ weights)
        out = np.empty((cohort.size, self.report_bytes), dtype=np.uint8)
        out[:, 0] = cohort & 0xFF
        out[:, 1] = cohort >> 8
        out[:, COHORT_BYTES:] = np.packbits(bits, axis=1, bitorder="little")
        return out

    def channel(self) -> np.ndarray:
        n = self.n_outputs
        if n is None:
            raise LocalPrivError(f"{self}: {self.output_space_size()} outputs; the dense channel is only built "
                                 f"for cohorts * 2^m <= {DENSE_MAX_OUTPUTS}")
        check_dense_size(self.k, n, f"{self} channel")
        return self.likelihood(np.arange(n))

    # ---- sampling -----------------------------------------------------------------------
    def memoize(self, x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The permanent part of each user: ``(cohort, B')``, her cohort and her PRR of the Bloom
        filter of ``x`` (``B'`` as an ``n x m`` bool matrix)."""
        n = x.size
        check_report_bytes(n, self.m, f"{self} memoized filters")
        cohort = rng.integers(0, self.cohorts, size=n, dtype=np.int64)
        bloom = self.bloom()
        prr = np.empty((n, self.m), dtype=bool)
        step = max(1, _CHUNK // self.m)
        half = self.f / 2.0
        for s in range(0, n, step):  # chunks of users: bounded memory
            e = min(n, s + step)
            u = rng.random((e - s, self.m))
            prr[s:e] = np.where(u < self.f, u < half, bloom[cohort[s:e], x[s:e]])
        return cohort, prr

    def instantaneous(self, memo: tuple[np.ndarray, np.ndarray], rng: np.random.Generator) -> np.ndarray:
        """One IRR report per user from her memoized ``(cohort, B')``: ``c * 2^m + bits``."""
        cohort, prr = memo
        n = cohort.size
        out = np.empty((n, self.report_bytes), dtype=np.uint8) if self.wide else np.empty(n, dtype=np.int64)
        step = max(1, _CHUNK // self.m)
        no_irr = self.p == 0.0 and self.q == 1.0  # the IRR is the identity: no draws (pure-LDP's protocol)
        for s in range(0, n, step):
            e = min(n, s + step)
            bits = prr[s:e] if no_irr else rng.random((e - s, self.m)) < np.where(prr[s:e], self.q, self.p)
            out[s:e] = self._encode(cohort[s:e], bits)
        return out

    # ---- likelihood ---------------------------------------------------------------------
    def log_likelihood(self, reports: ArrayLike, bloom: np.ndarray) -> np.ndarray:
        """``log P((c, S_j) | candidate)`` for every candidate row of ``bloom`` (cohorts x K x m)."""
        cohort, bits = self.decode_reports(reports)
        K = bloom.shape[1]
        ones = bits.sum(axis=1, dtype=np.int64)
        base = -np.log(self.cohorts) + ones * self.log_s0 + (self.m - ones) * self.log_1ms0   # per report
        size = bloom.sum(axis=2)                                                              # cohorts x K
        out = np.empty((K, cohort.size))
        order = np.argsort(cohort, kind="stable")
        cs = cohort[order]
        starts = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]]) if cs.size else np.array([], dtype=np.int64)
        ends = np.r_[starts[1:], cs.size]
        bf = bloom.astype(np.float64)
        for a, b in zip(starts, ends):  # one product per cohort present, not per report
            c = int(cs[a])
            idx = order[a:b]
            overlap = bf[c] @ bits[idx].T.astype(np.float64)                  # K x reports
            out[:, idx] = size[c][:, None] * self.l0 + overlap * (self.l1 - self.l0)
        return out + base[None, :]

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """``G[x, j] = P(reports[j] | x)`` (exact; module docstring), computed in log space."""
        m = np.shape(reports)[0]
        check_dense_size(self.k, m, f"{self} likelihood of {m} reports")
        return np.exp(self.log_likelihood(reports, self.bloom()))

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> DenseBlock:
        """Dense ``k x reports`` block of the exact likelihood (one row per candidate)."""
        return DenseBlock(self.likelihood(reports), np.asarray(counts))

    # ---- privacy ------------------------------------------------------------------------
    def _max_pair_level(self, l1: float, l0: float) -> float:
        """``max over cohorts and pairs (x, x') of |B(x) minus B(x')| l1 - |B(x') minus B(x)| l0``
        (``l1 >= 0 >= l0``). Stops at a witness of the upper bound ``h (l1 - l0)``: two inputs of
        one cohort with disjoint filters of ``h`` bits; otherwise computes every pair (k x k per
        cohort)."""
        bloom = self.bloom()
        top = self.h * (l1 - l0)
        size = bloom.sum(axis=2)
        full = size == self.h
        for c in range(self.cohorts):  # cohorts, not users
            idx = np.flatnonzero(full[c])[:64]
            if idx.size >= 2:
                B = bloom[c, idx].astype(np.float64)
                inter = B @ B.T
                np.fill_diagonal(inter, 1.0)
                if np.any(inter == 0):
                    return float(top)
        best = 0.0
        for c in range(self.cohorts):
            check_dense_size(self.k, self.k, f"{self} privacy level (pairs of inputs)")
            B = bloom[c].astype(np.float64)
            inter = B @ B.T
            d1 = size[c][:, None] - inter
            d2 = size[c][None, :] - inter
            best = max(best, float(np.max(d1 * l1 - d2 * l0)))
        return best

    def epsilon_ldp(self) -> float:
        """Level of ONE report (PRR + IRR), computed from the exact channel's structure (module
        docstring): the largest ``|B \\ B'| l1 - |B' \\ B| l0`` over cohorts and pairs of inputs,
        ``l1 = log(s1/s0)``, ``l0 = log((1-s1)/(1-s0))``."""
        if "ldp" not in self._levels:
            self._levels["ldp"] = self._max_pair_level(self.l1, self.l0)
        return checked_epsilon(self._levels["ldp"], str(self))

    def epsilon_perm(self) -> float:
        """Level of the memoized PRR (bounds any number of reports of one user): the same maximum
        with ``l1 = -l0 = log((1 - f/2)/(f/2))``; ``2 h log((1 - f/2)/(f/2))`` (the paper's
        ``eps_inf``) when two inputs of a cohort have disjoint filters of ``h`` bits; ``inf`` for
        ``f = 0``."""
        if "perm" not in self._levels:
            if self.f == 0.0:
                self._levels["perm"] = float("inf")
            else:
                lr = float(np.log1p(-self.f / 2.0) - np.log(self.f / 2.0))
                self._levels["perm"] = self._max_pair_level(lr, -lr)
        return checked_epsilon(self._levels["perm"], str(self))

    # ---- decoding ingredients ------------------------------------------------------------
    def bit_counts(self, reports: ArrayLike, counts: ArrayLike | None = None) -> BitCounts:
        """Per-cohort report counts ``n[c]`` and bit counts ``ones[c, j]`` (weighted by ``counts``)."""
        r = np.asarray(reports)
        if not self.wide:
            r = r.ravel()
        nrep = r.shape[0]
        w = np.ones(nrep) if counts is None else np.asarray(counts, dtype=float).ravel()
        if w.size != nrep:
            raise LocalPrivError(f"rappor: {w.size} counts for {nrep} reports")
        n = np.zeros(self.cohorts)
        ones = np.zeros(self.cohorts * self.m)
        step = max(1, _CHUNK // self.m)
        shifts = np.arange(self.m, dtype=np.int64)
        for s in range(0, nrep, step):  # chunks of distinct reports
            e = min(nrep, s + step)
            cohort, bits = self.decode_reports(r[s:e])
            n += np.bincount(cohort, weights=w[s:e], minlength=self.cohorts)
            flat = cohort[:, None] * self.m + shifts[None, :]
            on = bits == 1
            ones += np.bincount(flat[on], weights=np.broadcast_to(w[s:e, None], bits.shape)[on],
                                minlength=self.cohorts * self.m)
        return BitCounts(n, ones.reshape(self.cohorts, self.m))

    def debiased(self, bc: BitCounts) -> np.ndarray:
        """``T[c, j] = (ones[c, j] - s0 n[c]) / (s1 - s0)``: estimated users of cohort ``c`` whose
        Bloom bit ``j`` is set (the paper's ``t_ij``)."""
        return (bc.ones - self.s0 * bc.n[:, None]) / (self.s1 - self.s0)
