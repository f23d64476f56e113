"""Longitudinal (memoization) frequency oracles: L-GRR, L-SUE, L-OUE, L-SOUE, L-OSUE, L-BLH, L-OLH.

Seed 002 Algorithm 2 (after RAPPOR, Erlingsson et al. 2014, and Arcolezi et al. 2021-2023):
each user obfuscates her value ONCE with a first mechanism ``M1`` at level ``eps_perm`` and
memoizes the result (``p1, q1``); every report is then a fresh obfuscation of the memoized value
by a second mechanism ``M2`` (``p2, q2``). The chained per-report probabilities are::

    p* = p1 p2 + (1 - p1) q2,      q* = q1 p2 + (1 - q1) q2

(per bit for unary encodings; for GRR on ``g`` values ``q2`` is the probability of one given
other value, ``p* = p1 p2 + (1 - p1)(1 - p2)/(g - 1)``).

Privacy we compute (never take from a parameter)
------------------------------------------------
* ``epsilon_ldp()`` -- the level of ONE report, from the chained channel (form (*) of
  :mod:`localpriv.mechanisms.unary`: ``log(p*(1-q*)/(q*(1-p*)))`` for unary encodings,
  ``log(p*/q*)`` for GRR and local hashing). The second-round level ``eps_2`` is solved
  numerically (Brent) so that this computed level equals the requested ``eps_1``; tests check it.
* ``epsilon_perm()`` -- the longitudinal bound: any number of reports is post-processing of the
  memoized value, so the level of ``M1`` computed from its channel bounds all of them together
  (RAPPOR's ``eps_inf``). ``eps_1 < eps_perm`` is required.

Pairs: L-SUE = SUE + SUE (RAPPOR's permanent + instantaneous response), L-OUE = OUE + OUE,
L-SOUE = SUE + OUE, L-OSUE = OUE + SUE, L-GRR = GRR + GRR on ``k`` values, L-BLH/L-OLH = hash
(memoized seed) then GRR + GRR on ``g`` values. For L-OLH we pick ``g`` minimizing MI's variance
factor ``q*(1-q*)/(p*-q*)^2`` (``q* = 1/g``) over ``g = 2..round(e^eps_perm)+2`` (our decision;
one-time OLH's ``round(e^eps)+1`` ignores the second round).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import brentq

from .._validation import LocalPrivError, check_eps, check_int, check_rng
from .base import register
from .hashing import LocalHashing, grr_sample
from .unary import (PureProtocol, UnaryEncoding, oue_probabilities, pack_bits, sue_probabilities,
                    ue_epsilon, unpack_bits)

__all__ = ["LGRR", "LSUE", "LOUE", "LSOUE", "LOSUE", "LBLH", "LOLH", "solve_second_round",
           "grr_probabilities", "chain"]


def grr_probabilities(eps: float, g: int) -> tuple[float, float]:
    """GRR on ``g`` values: keep ``e^eps/(e^eps+g-1)``, each other value ``1/(e^eps+g-1)``."""
    p = 1.0 / (1.0 + (g - 1) * np.exp(-eps))
    return float(p), float((1.0 - p) / (g - 1))


_UE = {"sue": sue_probabilities, "oue": oue_probabilities}


def chain(p1, q1, p2, q2, g: int | None = None) -> tuple[float, float]:
    """Chained ``(p*, q*)``: per bit (``g=None``) or for GRR on ``g`` values."""
    if g is None:
        return p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2
    p = p1 * p2 + (1 - p1) * q2
    return p, (1 - p) / (g - 1)


def _level(p, q, g):
    return ue_epsilon(p, q) if g is None else float(np.log(p / q))


def solve_second_round(first: tuple[float, float], second, eps_1: float, g: int | None = None) -> float:
    """``eps_2`` such that the chained report level (computed) equals ``eps_1``.

    ``second(eps) -> (p2, q2)``. The chained level increases from 0 (``eps_2 -> 0``) to the
    first round's level (``eps_2 -> inf``), so a root exists iff ``eps_1 <`` that level.
    """
    p1, q1 = first
    top = _level(p1, q1, g)
    if not eps_1 < top * (1 - 1e-9):
        raise LocalPrivError(f"eps_1 ({eps_1}) must be smaller than the memoized level eps_perm ({top:.6g})")

    def f(e2):
        return _level(*chain(p1, q1, *second(e2), g), g) - eps_1

    hi = 1.0
    while f(hi) < 0:
        hi *= 2.0
        if hi > 1e3:
            raise LocalPrivError(f"cannot reach eps_1={eps_1} (numerically too close to eps_perm)")
    return float(brentq(f, 1e-12, hi, xtol=1e-14, rtol=1e-14, maxiter=500))


class _Longitudinal:
    """Shared parameters of the longitudinal mechanisms."""

    eps_perm: float
    eps_1: float
    eps_2: float

    def params(self):
        return {"k": self.k, "eps_perm": self.eps_perm, "eps_1": self.eps_1}

    def sample(self, x, rng) -> np.ndarray:
        """One report per user: memoize, then one instantaneous obfuscation."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        return self.instantaneous(self.memoize(x, rng), rng)

    def sample_rounds(self, x, rng, rounds: int) -> list:
        """``rounds`` reports per user from the SAME memoized value (a list, one array per round)."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        memo = self.memoize(x, rng)
        return [self.instantaneous(memo, rng) for _ in range(check_int(rounds, "rounds", minimum=1))]


# --------------------------------------------------------------------------------------------
@register
class LGRR(_Longitudinal, PureProtocol):
    """L-GRR: GRR at ``eps_perm`` memoized, then GRR at the solved ``eps_2`` per report."""

    spec_name = "lgrr"

    def __init__(self, k: int, eps_perm: float, eps_1: float):
        self.k = check_int(k, "k", minimum=2)
        self.eps_perm, self.eps_1 = check_eps(eps_perm, "eps_perm"), check_eps(eps_1, "eps_1")
        self.first = grr_probabilities(self.eps_perm, self.k)
        self.eps_2 = solve_second_round(self.first, lambda e: grr_probabilities(e, self.k), self.eps_1, self.k)
        self.second = grr_probabilities(self.eps_2, self.k)
        self._p, self._q = chain(*self.first, *self.second, self.k)

    p_star = property(lambda self: self._p)
    q_star = property(lambda self: self._q)

    @property
    def n_outputs(self):
        return self.k

    def channel(self):
        m = np.full((self.k, self.k), self._q)
        np.fill_diagonal(m, self._p)
        return m

    def memoize(self, x, rng):
        return grr_sample(x, self.k, self.first[0], rng)

    def instantaneous(self, memo, rng):
        return grr_sample(memo, self.k, self.second[0], rng)

    def support(self, reports):
        z = self.output_index(reports)
        return sp.csr_matrix((np.ones(z.size, dtype=bool), (np.arange(z.size), z)), shape=(z.size, self.k))

    def likelihood_parts(self, reports):
        return np.zeros(np.asarray(reports).shape[0]), self._q, self._p

    def _witness_report(self):
        return np.array([0])

    def epsilon_perm(self) -> float:
        return float(np.log(self.first[0] / self.first[1]))


# --------------------------------------------------------------------------------------------
class _LUE(_Longitudinal, UnaryEncoding):
    """Chained unary encoding; one report is the unary encoding with the chained ``(p*, q*)``."""

    kinds: tuple[str, str]

    def __init__(self, k: int, eps_perm: float, eps_1: float):
        self.eps_perm, self.eps_1 = check_eps(eps_perm, "eps_perm"), check_eps(eps_1, "eps_1")
        first_kind, second_kind = self.kinds
        self.first = _UE[first_kind](self.eps_perm)
        self.eps_2 = solve_second_round(self.first, _UE[second_kind], self.eps_1)
        self.second = _UE[second_kind](self.eps_2)
        UnaryEncoding.__init__(self, k, *chain(*self.first, *self.second))

    def memoize(self, x, rng):
        return self._flip(x.size, *self.first, rng, x=x)

    def instantaneous(self, memo, rng):
        bits = unpack_bits(memo, self.k).astype(bool)
        return self._flip(bits.shape[0], *self.second, rng, truth=bits)

    def epsilon_perm(self) -> float:
        return ue_epsilon(*self.first)


@register
class LSUE(_LUE):
    """L-SUE = RAPPOR's permanent (SUE at eps_perm) + instantaneous (SUE) randomized response."""
    spec_name = "lsue"
    kinds = ("sue", "sue")


@register
class LOUE(_LUE):
    """L-OUE: OUE memoized, OUE per report."""
    spec_name = "loue"
    kinds = ("oue", "oue")


@register
class LSOUE(_LUE):
    """L-SOUE: SUE memoized, OUE per report."""
    spec_name = "lsoue"
    kinds = ("sue", "oue")


@register
class LOSUE(_LUE):
    """L-OSUE: OUE memoized, SUE per report."""
    spec_name = "losue"
    kinds = ("oue", "sue")


# --------------------------------------------------------------------------------------------
class _LLH(_Longitudinal, LocalHashing):
    """Hash with a memoized seed, then GRR on ``g`` values twice."""

    def _init_lh(self, k, eps_perm, eps_1, g, n_seeds):
        self.eps_perm, self.eps_1 = check_eps(eps_perm, "eps_perm"), check_eps(eps_1, "eps_1")
        self.first = grr_probabilities(self.eps_perm, g)
        self.eps_2 = solve_second_round(self.first, lambda e: grr_probabilities(e, g), self.eps_1, g)
        self.second = grr_probabilities(self.eps_2, g)
        self._setup(k, g, chain(*self.first, *self.second, g)[0], n_seeds)

    def params(self):
        return {"k": self.k, "eps_perm": self.eps_perm, "eps_1": self.eps_1,
                "n_seeds": None if self.n_seeds == 2 ** 32 else self.n_seeds}

    def memoize(self, x, rng):
        seeds, h = LocalHashing.memoize(self, x, rng)
        return seeds, grr_sample(h, self.g, self.first[0], rng)

    def instantaneous(self, memo, rng):
        seeds, y1 = memo
        return seeds * self.g + grr_sample(y1, self.g, self.second[0], rng)

    def epsilon_perm(self) -> float:
        return float(np.log(self.first[0] / self.first[1]))


@register
class LBLH(_LLH):
    """L-BLH: binary local hashing (``g = 2``) with memoization."""
    spec_name = "lblh"

    def __init__(self, k: int, eps_perm: float, eps_1: float, n_seeds: int = 2 ** 32):
        self._init_lh(k, eps_perm, eps_1, 2, n_seeds)


def lolh_g(eps_perm: float, eps_1: float) -> int:
    """``g`` minimizing ``q*(1-q*)/(p*-q*)^2`` with ``q* = 1/g`` and the chained ``p*``."""
    best, best_g = np.inf, 2
    for g in range(2, min(1000, int(np.rint(np.exp(eps_perm))) + 3) + 1):  # a few dozen candidates
        first = grr_probabilities(eps_perm, g)
        try:
            e2 = solve_second_round(first, lambda e: grr_probabilities(e, g), eps_1, g)
        except LocalPrivError:
            continue
        p = chain(*first, *grr_probabilities(e2, g), g)[0]
        q = 1.0 / g
        if p <= q:
            continue
        v = q * (1 - q) / (p - q) ** 2
        if v < best:
            best, best_g = v, g
    return best_g


@register
class LOLH(_LLH):
    """L-OLH: local hashing with the variance-optimal ``g`` (see module doc) and memoization."""
    spec_name = "lolh"

    def __init__(self, k: int, eps_perm: float, eps_1: float, n_seeds: int = 2 ** 32):
        self._init_lh(k, eps_perm, eps_1, lolh_g(check_eps(eps_perm, "eps_perm"), check_eps(eps_1, "eps_1")),
                      n_seeds)
