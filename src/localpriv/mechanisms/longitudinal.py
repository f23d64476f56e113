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
  ``log(p*/q*)`` for GRR and local hashing). The second-round level ``eps_2`` is chosen so that
  this computed level equals the requested ``eps_1``; tests check it.
* ``epsilon_perm()`` -- the longitudinal bound: any number of reports is post-processing of the
  memoized value, so the level of ``M1`` computed from its channel bounds all of them together
  (RAPPOR's ``eps_inf``). ``eps_1 < eps_perm`` is required.
* ``epsilon_instantaneous()`` (L-GRR, L-BLH, L-OLH) -- the level of one report *given* the memo,
  ``eps_2``: ``t`` reports of one memo are ``min(eps_perm, t eps_2)``-LDP together (the privacy
  ledger, :mod:`localpriv.mechanisms.accounting`); ``t eps_1`` does not bound them.

Log space. Everything is computed from log-odds, so no parameter overflows:

* GRR on ``g`` values at level ``l`` (``log(keep / one other)``): two rounds ``l1``, ``l2`` chain
  to a GRR of level ``l* = logaddexp(l1 + l2, log(g-1)) - logsumexp(l1, l2, log(g-2))``
  (``p*/q* = (e^{l1+l2} + g - 1) / (e^l1 + e^l2 + g - 2)``), and the second round reaching a given
  ``l*`` has the closed form
  ``e^{l2} = (expm1(l* + l1) + (g-2) expm1(l*)) / (e^{l*} expm1(l1 - l*))`` (:func:`grr_second_level`).
* Unary encodings: per bit, ``log p* = logaddexp(log p1 + log p2, log(1-p1) + log q2)`` and so on
  (:func:`chain_logits`); ``eps_2`` is solved by Brent's method on ``[eps_1, hi]`` (the chained
  level of a bit channel is at most each round's level, so ``eps_2 >= eps_1``).

Pairs: L-SUE = SUE + SUE (RAPPOR's permanent + instantaneous response), L-OUE = OUE + OUE,
L-SOUE = SUE + OUE, L-OSUE = OUE + SUE, L-GRR = GRR + GRR on ``k`` values, L-BLH/L-OLH = hash
(memoized seed; the hash family of :mod:`localpriv.mechanisms.hashing`, ``hash=xxh64`` by default,
``hash=cw`` for the legacy family) then GRR + GRR on ``g`` values. For L-OLH we pick ``g``
minimizing MI's variance factor ``q*(1-q*)/(p*-q*)^2`` (``q* = 1/g``) over ``g = 2..round(e^eps_perm)+2``, at most 1000
(our decision; one-time OLH's ``round(e^eps)+1`` ignores the second round). The chained report is
GRR at level ``eps_1`` on ``g`` values, so ``p* = e^eps_1 / (e^eps_1 + g - 1)`` for every ``g``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import check_dense_size
from localpriv.mechanisms.base import Memoized, register
from localpriv.mechanisms.hashing import DEFAULT_HASH, LocalHashing, grr_logs, grr_sample
from localpriv.mechanisms.krr import grr_floats
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.mechanisms.unary import PureProtocol, UnaryEncoding, expit, log_bit, oue_logits, sue_logits, unpack_bits
from localpriv.utils.validation import LocalPrivError, check_eps, check_int


def brentq(*args: Any, **kwargs: Any) -> float:
    """``scipy.optimize.brentq``, imported on first use (keeps ``import localpriv`` quick)."""
    from scipy.optimize import brentq as _f
    return _f(*args, **kwargs)


def logsumexp(*args: Any, **kwargs: Any) -> Any:
    """``scipy.special.logsumexp``, imported on first use (keeps ``import localpriv`` quick)."""
    from scipy.special import logsumexp as _f
    return _f(*args, **kwargs)


__all__ = ["LGRR", "LSUE", "LOUE", "LSOUE", "LOSUE", "LBLH", "LOLH", "solve_second_round",
           "grr_probabilities", "chain", "chain_logits", "grr_chain_level", "grr_second_level", "lolh_g"]


def grr_probabilities(eps: float, g: int) -> tuple[float, float]:
    """GRR on ``g`` values: keep ``e^eps/(e^eps+g-1)``, each other value ``1/(e^eps+g-1)``
    (floats by :func:`~localpriv.mechanisms.krr.grr_floats`: no overflow, no 0 before ~1e-308)."""
    return grr_floats(eps, g)


_UE: dict[str, Callable[[float], tuple[float, float]]] = {"sue": sue_logits, "oue": oue_logits}


def chain(p1: float, q1: float, p2: float, q2: float, g: int | None = None) -> tuple[float, float]:
    """Chained ``(p*, q*)``: per bit (``g=None``) or for GRR on ``g`` values (linear space; the
    mechanisms use :func:`chain_logits` and :func:`grr_chain_level`)."""
    if g is None:
        return p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2
    p = p1 * p2 + (1 - p1) * q2
    return p, (1 - p) / (g - 1)


def _log_expm1(x: float) -> float:
    """``log(e^x - 1)`` for ``x > 0`` without overflow or cancellation."""
    x = float(x)
    return float(x + np.log(-np.expm1(-x))) if x > 1.0 else float(np.log(np.expm1(x)))


def grr_chain_level(l1: float, l2: float, g: int) -> float:
    """Level ``log(p*/q*)`` of GRR at ``l1`` followed by GRR at ``l2`` on ``g`` values:
    ``log(e^{l1+l2} + g - 1) - log(e^l1 + e^l2 + g - 2)`` (log space)."""
    with np.errstate(divide="ignore"):
        lg2 = np.log(g - 2.0)  # -inf for g = 2
    return float(np.logaddexp(l1 + l2, np.log(g - 1.0)) - logsumexp([l1, l2, lg2]))


def grr_second_level(l1: float, target: float, g: int) -> float:
    """The second-round level ``l2`` with ``grr_chain_level(l1, l2, g) == target`` (closed form,
    ``0 < target < l1``): ``e^{l2} (e^{l1} - e^t) = e^t (e^{l1} + g - 2) - (g - 1)``, i.e.
    ``l2 = log(expm1(t + l1) + (g-2) expm1(t)) - t - log(expm1(l1 - t))``."""
    with np.errstate(divide="ignore"):
        lg2 = np.log(g - 2.0)
    num = np.logaddexp(_log_expm1(target + l1), lg2 + _log_expm1(target))
    return float(num - target - _log_expm1(l1 - target))


def chain_logits(first: tuple[float, float], second: tuple[float, float]) -> tuple[float, float]:
    """Per-bit log-odds ``(logit p*, logit q*)`` of two unary rounds given by their log-odds."""
    lp1, lnp1 = log_bit(first[0])
    lq1, lnq1 = log_bit(first[1])
    lp2, lnp2 = log_bit(second[0])
    lq2, lnq2 = log_bit(second[1])
    # P(out = 1 | in) = P(memo = 1 | in) p2 + P(memo = 0 | in) q2
    ps = np.logaddexp(lp1 + lp2, lnp1 + lq2) - np.logaddexp(lp1 + lnp2, lnp1 + lnq2)
    qs = np.logaddexp(lq1 + lp2, lnq1 + lq2) - np.logaddexp(lq1 + lnp2, lnq1 + lnq2)
    return float(ps), float(qs)


def _ue_level(logits: tuple[float, float]) -> float:
    return float(logits[0] - logits[1])


def solve_second_round(first: float | tuple[float, float], second: Callable[[float], tuple[float, float]] | None,
                       eps_1: float, g: int | None = None) -> float:
    """``eps_2`` such that the chained report level (computed) equals ``eps_1``.

    ``g=None``: unary rounds given by log-odds (``first = (logit p1, logit q1)``,
    ``second(eps) -> (logit p2, logit q2)``), solved by Brent's method in log space. ``g``: GRR
    rounds on ``g`` values, ``first`` is the first round's level, closed form
    (:func:`grr_second_level`). The chained level increases from 0 (``eps_2 -> 0``) to the first
    round's level (``eps_2 -> inf``), so a root exists iff ``eps_1 <`` that level.
    """
    # casts for the type checker only: GRR rounds pass a level, unary rounds log-odds and their map
    ue_first = cast("tuple[float, float]", first)
    ue_second = cast("Callable[[float], tuple[float, float]]", second)
    top = float(cast(float, first)) if g is not None else _ue_level(ue_first)
    if not eps_1 < top * (1 - 1e-9):
        raise LocalPrivError(f"eps_1 ({eps_1}) must be smaller than the memoized level eps_perm ({top:.6g})")
    if g is not None:
        return grr_second_level(top, eps_1, g)

    def f(e2: float) -> float:
        return _ue_level(chain_logits(ue_first, ue_second(e2))) - eps_1

    lo = float(eps_1)  # a bit channel's chained level is at most each round's: eps_2 >= eps_1
    if f(lo) >= 0:
        return lo
    hi = 2.0 * lo
    while f(hi) < 0:
        hi *= 2.0
        if not np.isfinite(hi) or hi > 1e306:
            raise LocalPrivError(f"cannot reach eps_1={eps_1} (numerically too close to eps_perm)")
    return float(brentq(f, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500))


class _Longitudinal(Memoized):
    """Shared parameters of the longitudinal mechanisms (sampling: :class:`~.base.Memoized`)."""

    k: int
    eps_perm: float
    eps_1: float
    eps_2: float

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps_perm": self.eps_perm, "eps_1": self.eps_1}



# --------------------------------------------------------------------------------------------
@register
class LGRR(_Longitudinal, PureProtocol):
    """L-GRR: GRR at ``eps_perm`` memoized, then GRR at the solved ``eps_2`` per report."""

    spec_name = "lgrr"
    examples = (dict(spec="lgrr(k=4,eps_perm=2.0,eps_1=1.0)", eps_ldp=1.0, tight=True),)

    def __init__(self, k: int, eps_perm: float, eps_1: float) -> None:
        self.k = check_int(k, "k", minimum=2)
        self.eps_perm, self.eps_1 = check_eps(eps_perm, "eps_perm"), check_eps(eps_1, "eps_1")
        self.first = grr_probabilities(self.eps_perm, self.k)
        self.eps_2 = solve_second_round(self.eps_perm, None, self.eps_1, self.k)
        self.second = grr_probabilities(self.eps_2, self.k)
        #: level of one report, computed from the two rounds' structure
        self._level = grr_chain_level(self.eps_perm, self.eps_2, self.k)
        self._log_p, self._log_q = grr_logs(self._level, self.k)
        self._p, self._q = grr_floats(self._level, self.k)

    p_star = property(lambda self: self._p)
    q_star = property(lambda self: self._q)

    @property
    def n_outputs(self) -> int:
        return self.k

    def channel(self) -> np.ndarray:
        check_dense_size(self.k, self.k, f"{self} channel")
        m = np.full((self.k, self.k), self._q)
        np.fill_diagonal(m, self._p)
        return m

    def memoize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return grr_sample(x, self.k, self.first[0], rng)

    def instantaneous(self, memo: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return grr_sample(memo, self.k, self.second[0], rng)

    def support(self, reports: ArrayLike) -> sp.csr_matrix:
        z = self.output_index(reports)
        return sp.csr_matrix((np.ones(z.size, dtype=bool), (np.arange(z.size), z)), shape=(z.size, self.k))

    def likelihood_parts(self, reports: ArrayLike) -> tuple[np.ndarray, float, float]:
        """(*) with ``r1 = 1``: ``c = p*``, ``r0 = q*/p* = e^{-level}``."""
        return np.full(np.asarray(reports).shape[0], self._log_p), float(np.exp(-self._level)), 1.0

    def log_level(self) -> float:
        """``log(p*/q*)`` of the chained GRR (:func:`grr_chain_level` of the two rounds)."""
        return self._level

    def epsilon_perm(self) -> float:
        """Level of the memoized GRR: ``log(keep / other) = eps_perm - 0`` (same normalizer)."""
        return checked_epsilon(self.eps_perm - 0.0, str(self))

    def epsilon_instantaneous(self) -> float:
        """Level of one report given the memo (the second GRR alone): ``eps_2``. ``t`` reports of one
        memo are ``min(eps_perm, t eps_2)``-LDP together: their joint probability is a mixture over
        memos of products of ``t`` second rounds."""
        return checked_epsilon(self.eps_2 - 0.0, str(self))


# --------------------------------------------------------------------------------------------
class _LUE(_Longitudinal, UnaryEncoding):
    """Chained unary encoding; one report is the unary encoding with the chained ``(p*, q*)``."""

    kinds: tuple[str, str]

    def __init__(self, k: int, eps_perm: float, eps_1: float) -> None:
        self.k = check_int(k, "k", minimum=2)
        self.eps_perm, self.eps_1 = check_eps(eps_perm, "eps_perm"), check_eps(eps_1, "eps_1")
        first_kind, second_kind = self.kinds
        self.first_logits = _UE[first_kind](self.eps_perm)
        self.eps_2 = solve_second_round(self.first_logits, _UE[second_kind], self.eps_1)
        self.second_logits = _UE[second_kind](self.eps_2)
        self.first = (expit(self.first_logits[0]), expit(self.first_logits[1]))
        self.second = (expit(self.second_logits[0]), expit(self.second_logits[1]))
        self._set_logits(*chain_logits(self.first_logits, self.second_logits))

    def memoize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self._flip(x.size, *self.first, rng, x=x)

    def instantaneous(self, memo: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        bits = unpack_bits(memo, self.k).astype(bool)
        return self._flip(bits.shape[0], *self.second, rng, truth=bits)

    def epsilon_perm(self) -> float:
        """Level of the memoized unary encoding, ``logit p1 - logit q1`` (exact)."""
        return checked_epsilon(_ue_level(self.first_logits), str(self))


@register
class LSUE(_LUE):
    """L-SUE = RAPPOR's permanent (SUE at eps_perm) + instantaneous (SUE) randomized response."""
    spec_name = "lsue"
    examples = (dict(spec="lsue(k=4,eps_perm=2.0,eps_1=1.0)", eps_ldp=1.0, tight=True),)
    kinds = ("sue", "sue")


@register
class LOUE(_LUE):
    """L-OUE: OUE memoized, OUE per report."""
    spec_name = "loue"
    examples = (dict(spec="loue(k=4,eps_perm=2.0,eps_1=1.0)", eps_ldp=1.0, tight=True),)
    kinds = ("oue", "oue")


@register
class LSOUE(_LUE):
    """L-SOUE: SUE memoized, OUE per report."""
    spec_name = "lsoue"
    examples = (dict(spec="lsoue(k=4,eps_perm=2.0,eps_1=1.0)", eps_ldp=1.0),)
    kinds = ("sue", "oue")


@register
class LOSUE(_LUE):
    """L-OSUE: OUE memoized, SUE per report."""
    spec_name = "losue"
    examples = (dict(spec="losue(k=4,eps_perm=2.0,eps_1=1.0)", eps_ldp=1.0),)
    kinds = ("oue", "sue")


# --------------------------------------------------------------------------------------------
class _LLH(_Longitudinal, LocalHashing):
    """Hash with a memoized seed, then GRR on ``g`` values twice."""

    def _init_lh(self, k: int, eps_perm: float, eps_1: float, g: int, n_seeds: int,
                 hash_family: str = DEFAULT_HASH) -> None:
        self.eps_perm, self.eps_1 = check_eps(eps_perm, "eps_perm"), check_eps(eps_1, "eps_1")
        self.first = grr_probabilities(self.eps_perm, g)
        self.eps_2 = solve_second_round(self.eps_perm, None, self.eps_1, g)
        self.second = grr_probabilities(self.eps_2, g)
        self._setup(k, g, grr_chain_level(self.eps_perm, self.eps_2, g), n_seeds, hash_family)

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps_perm": self.eps_perm, "eps_1": self.eps_1,
                "n_seeds": None if self.n_seeds == 2 ** 32 else self.n_seeds, **self._hash_param()}

    def memoize(self, x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        seeds, h = LocalHashing.memoize(self, x, rng)
        return seeds, grr_sample(h, self.g, self.first[0], rng)

    def instantaneous(self, memo: tuple[np.ndarray, np.ndarray], rng: np.random.Generator) -> np.ndarray:
        seeds, y1 = memo
        return seeds * self.g + grr_sample(y1, self.g, self.second[0], rng)

    def epsilon_perm(self) -> float:
        """Level of the memoized GRR on hashed values: ``eps_perm - 0`` (same normalizer)."""
        return checked_epsilon(self.eps_perm - 0.0, str(self))

    def epsilon_instantaneous(self) -> float:
        """Level of one report given the memo: the second GRR on ``g`` values, ``eps_2`` (the
        memoized seed does not depend on the value, and every report of one memo carries it)."""
        return checked_epsilon(self.eps_2 - 0.0, str(self))


@register
class LBLH(_LLH):
    """L-BLH: binary local hashing (``g = 2``) with memoization; ``hash=xxh64`` (default) or ``cw``
    (legacy), as BLH (:mod:`localpriv.mechanisms.hashing`)."""
    spec_name = "lblh"
    examples = (dict(spec="lblh(k=4,eps_perm=2.0,eps_1=1.0)", eps_ldp=1.0, tight=True),)

    def __init__(self, k: int, eps_perm: float, eps_1: float, n_seeds: int = 2 ** 32,
                 hash: str = DEFAULT_HASH) -> None:  # noqa: A002
        self._init_lh(k, eps_perm, eps_1, 2, n_seeds, hash)


def lolh_g(eps_perm: float, eps_1: float) -> int:
    """``g`` minimizing ``q*(1-q*)/(p*-q*)^2`` with ``q* = 1/g`` and ``p* = e^eps_1/(e^eps_1+g-1)``
    (the chained report is GRR at level ``eps_1``) over ``g = 2..round(e^eps_perm)+2``, at most
    1000 (vectorized over the candidates)."""
    g_max = min(1000, int(np.rint(np.exp(min(float(eps_perm), 10.0)))) + 3)
    g = np.arange(2, g_max + 1, dtype=float)
    p = np.exp(-np.logaddexp(0.0, np.log(g - 1.0) - eps_1))
    q = 1.0 / g
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(p > q, q * (1 - q) / np.maximum(p - q, 1e-300) ** 2, np.inf)
    return int(g[int(np.argmin(v))]) if np.isfinite(v).any() else 2


@register
class LOLH(_LLH):
    """L-OLH: local hashing with the variance-optimal ``g`` (see module doc) and memoization;
    ``hash=xxh64`` (default) or ``cw`` (legacy), as OLH (:mod:`localpriv.mechanisms.hashing`)."""
    spec_name = "lolh"
    examples = (dict(spec="lolh(k=4,eps_perm=2.0,eps_1=1.0)", eps_ldp=1.0, tight=True),)

    def __init__(self, k: int, eps_perm: float, eps_1: float, n_seeds: int = 2 ** 32,
                 hash: str = DEFAULT_HASH) -> None:  # noqa: A002
        self._init_lh(k, eps_perm, eps_1, lolh_g(check_eps(eps_perm, "eps_perm"), check_eps(eps_1, "eps_1")),
                      n_seeds, hash)
