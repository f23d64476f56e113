"""Estimators for the pure LDP frequency oracles (seed 002, seed 001 section 7.5).

* **MI** (``mi-n``, ``mi-p``): the pure-protocol matrix inversion on the support counts
  ``C_v = #{i : v in S(z_i)}``: ``f_v = (C_v / n - q*) / (p* - q*)`` (seed 002, "MI"), followed by
  normalization (N: negatives to 0, renormalize) or projection onto the simplex (P).
* **Rappor's estimator** (``rappor-n``, ``rappor-p``): the same formula on the bit counts of
  basic one-time RAPPOR (SUE, ``p* = e^{eps/2}/(1+e^{eps/2})``, ``q* = 1 - p*``; seed 001
  section 7.5, seed 003 section 5.4 with one common eps), with N or P post-processing.
* **IBU on support counts** (``ibu-support``): seed 002's IBU
  ``f^{t+1} = f~ . (f^t * A) / (f^t . A)`` with ``A`` holding ``p*`` on the diagonal and ``q*``
  elsewhere and ``f~`` the normalized support counts; run by THE one EM engine
  (:func:`localpriv.estimators.em.em`) with an O(k) block. It maximizes a *pseudo*-likelihood
  (the support counts are not multinomial), which we report in ``extra['support_loglik']``; the
  ``loglik`` of the returned estimate is the exact log-likelihood of the individual reports.
  Settings, defaults and stopping rules are the engine's (certified ``stop="gap"``, Newton finish).
* **Exact-likelihood IBU** (``ibu-exact``): the true maximum-likelihood estimate from the reports,
  ``P(z|x) = c(z)(r0 + (r1 - r0)[x in S(z)])`` (seed 001 Lemma 4.4 for unary encodings; derived
  likewise for local hashing, subset selection and SHE), by the same EM engine on grouped
  identical reports with sparse products (:class:`localpriv.mechanisms.unary.SupportBlock`).
  For GRR/k-RR both IBUs coincide.
* **Support-count maximum** (:func:`support_mle`): the point ``ibu-support`` converges to, in
  closed form. IBU on support counts maximizes ``sum_v C_v log((p*-q*) f_v + q*)`` over the
  simplex (a concave function); its KKT conditions give ``f_v = max(0, C_v/lam - q*/(p*-q*))``
  with ``lam`` set by ``sum f = 1``: the values with the largest counts are kept, found by one
  sort (our derivation; for k-RR, where ``sum C = n``, it is the k-RR MLE). Used to certify that
  an IBU run reached the maximum rather than stopping short of it.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.estimators.em import (
    DEFAULT_ACCELERATE,
    DEFAULT_DELTA,
    DEFAULT_MAX_ITER,
    DEFAULT_STOP,
    Callback,
    log_likelihood,
)
from localpriv.estimators.ibu import em_settings, run_em
from localpriv.estimators.registry import Setting, em_settings_declared, register_estimator
from localpriv.estimators.result import Fit
from localpriv.likelihood.structured import ScaledIdentityBlock
from localpriv.mechanisms.base import Mechanism
from localpriv.mechanisms.krr import KRR
from localpriv.mechanisms.unary import UnaryEncoding
from localpriv.utils.progress import EMProgress
from localpriv.utils.simplex import clip_normalize, project_simplex
from localpriv.utils.validation import LocalPrivError

__all__ = ["pure_parameters", "support_counts", "mi_vector", "mi", "rappor", "ibu_support",
           "ibu_exact", "exact_loglik", "support_mle"]


def pure_parameters(mechanism: Mechanism) -> tuple[float, float]:
    """``(p*, q*)`` of a pure frequency oracle (k-RR/GRR included: ``p* = p_keep``, ``q* = p_other``)."""
    if isinstance(mechanism, KRR):
        return mechanism.p_keep, mechanism.p_other
    p, q = getattr(mechanism, "p_star", None), getattr(mechanism, "q_star", None)
    if p is None or q is None:
        raise LocalPrivError(f"{mechanism} is not a pure frequency oracle (no p*, q*); use ibu or inv")
    return float(p), float(q)


def support_counts(block: ObservationBlock) -> np.ndarray:
    """``C_v = sum_j counts_j [v in S(z_j)]`` for the reports of one mechanism."""
    mech = block.mechanism
    if isinstance(mech, KRR):
        return block.count_vector()
    if not hasattr(mech, "support_counts"):
        raise LocalPrivError(f"{mech} has no support function S(z)")
    return mech.support_counts(block.reports, block.counts)


def mi_vector(block: ObservationBlock) -> np.ndarray:
    """Unbiased ``f_v = (C_v/n - q*) / (p* - q*)`` (may be negative; seed 002)."""
    p, q = pure_parameters(block.mechanism)
    return (support_counts(block) / block.n - q) / (p - q)


def _post(v: np.ndarray, post: str) -> tuple[str, np.ndarray]:
    post = post.lower()
    if post not in ("n", "p"):
        raise LocalPrivError(f"post-processing must be 'n' (normalize) or 'p' (project), got {post!r}")
    return post, (clip_normalize(v) if post == "n" else project_simplex(v))


def exact_loglik(obs: Observations, theta: ArrayLike) -> float:
    """Exact log-likelihood of the individual reports (seed 001 Eq. 2) at ``theta``."""
    blocks = obs.likelihood_blocks()
    return log_likelihood(blocks, np.asarray(theta, dtype=float)) + sum(b.log_offset for b in blocks)


def _maybe_loglik(obs: Observations, theta: np.ndarray, with_loglik: bool) -> float | None:
    return exact_loglik(obs, theta) if with_loglik else None


def mi(obs: Observations, *, post: str = "n", loglik: bool = False) -> Fit:
    """MI-N / MI-P: the pure-protocol matrix inversion on support counts (seed 002)."""
    block = obs.single(f"mi-{post}")
    v = mi_vector(block)
    post, theta = _post(v, post)
    return Fit(theta, obs.domain, f"mi-{post}", {"post": post},
                    loglik=_maybe_loglik(obs, theta, loglik), n=obs.n, extra={"raw_inverse": v})


def rappor(obs: Observations, *, post: str = "n", loglik: bool = False) -> Fit:
    """Rappor's estimator for basic one-time RAPPOR (symmetric unary encoding, ``q* = 1 - p*``):
    ``f_v = (C_v/n - q*)/(p* - q*)`` on the bit counts, then N or P (seed 001 section 7.5)."""
    block = obs.single(f"rappor-{post}")
    mech = block.mechanism
    if not (isinstance(mech, UnaryEncoding) and abs(mech.p_star + mech.q_star - 1.0) < 1e-12):
        raise LocalPrivError(f"Rappor's estimator needs basic RAPPOR reports (sue), got {mech}; use mi-n")
    v = mi_vector(block)
    post, theta = _post(v, post)
    return Fit(theta, obs.domain, f"rappor-{post}", {"post": post},
                    loglik=_maybe_loglik(obs, theta, loglik), n=obs.n, extra={"raw_inverse": v})


def ibu_support(obs: Observations, *, theta0: ArrayLike | None = None, delta: float = DEFAULT_DELTA,
                max_iter: int = DEFAULT_MAX_ITER, loglik: bool = True, keep_trace: bool = False,
                callback: Callback | None = None, accelerate: str | None = DEFAULT_ACCELERATE,
                stop: str = DEFAULT_STOP, progress: bool | EMProgress = False) -> Fit:
    """IBU on support counts with ``A = (p* - q*) I + q*`` (seed 002), by the one EM engine.

    Same settings, defaults and stopping rules as :func:`~localpriv.estimators.ibu.ibu` (certified
    ``stop="gap"`` with the Newton finish by default; ``"loglik"``, ``"max_abs"``; plain EM with
    ``accelerate="none"``). Here ``n`` is the total support count ``sum_v C_v`` (for k-RR the number
    of reports), so ``converged=True`` means the support-count pseudo-log-likelihood
    (``extra['support_loglik']``) is within ``delta`` per unit of count of its maximum, the closed
    form :func:`support_mle`.
    """
    block = obs.single("ibu-support")
    p, q = pure_parameters(block.mechanism)
    if not 0 < q < p:
        raise LocalPrivError(f"ibu-support needs 0 < q* < p* (got p*={p}, q*={q} for {block.mechanism})")
    C = support_counts(block)
    if np.any(C < 0):
        raise LocalPrivError("ibu-support needs non-negative support counts")
    k = obs.k
    res = run_em([ScaledIdentityBlock(k, p, q, np.arange(k), C)], k, progress=progress, label="ibu-support",
                 theta0=theta0, delta=delta, max_iter=max_iter, keep_trace=keep_trace, callback=callback,
                 accelerate=accelerate, stop=stop)
    extra: dict[str, Any] = {"support_loglik": res.loglik, "gap": res.gap}
    if keep_trace:
        extra["trace"] = np.asarray(res.trace)
    return Fit(res.theta, obs.domain, "ibu-support",
                    {**em_settings(res, delta, max_iter, theta0),
                     "model": "support counts, A = p* on the diagonal, q* elsewhere"},
                    loglik=_maybe_loglik(obs, res.theta, loglik), iterations=res.iterations,
                    converged=res.converged, n=obs.n, extra=extra)


def support_mle(C: ArrayLike, p: float, q: float) -> np.ndarray:
    """The maximum of IBU's support-count likelihood ``sum_v C_v log((p-q) f_v + q)`` (closed form).

    ``f_v = max(0, C_v/lam - q/(p-q))``; with the counts sorted decreasingly, the kept set is the
    largest ``m`` with ``C_(m) > lam_m q/(p-q)``, ``lam_m = (C_(1)+...+C_(m)) / (1 + m q/(p-q))``.
    """
    C = np.asarray(C, dtype=float)
    if not 0 < q < p:
        raise LocalPrivError(f"support_mle needs 0 < q < p, got p={p}, q={q}")
    if C.ndim != 1 or C.size == 0 or np.any(C < 0) or C.sum() <= 0:
        raise LocalPrivError("support_mle needs a non-empty vector of non-negative counts, not all 0")
    b = q / (p - q)
    c = np.sort(C)[::-1]
    lam = np.cumsum(c) / (1.0 + b * np.arange(1, c.size + 1))
    m = np.flatnonzero(c > lam * b)[-1]  # the largest count always qualifies
    f = np.maximum(C / lam[m] - b, 0.0)
    return f / f.sum()


def ibu_exact(obs: Observations, *, theta0: ArrayLike | None = None, delta: float = DEFAULT_DELTA,
              max_iter: int = DEFAULT_MAX_ITER, keep_trace: bool = False, callback: Callback | None = None,
              accelerate: str | None = DEFAULT_ACCELERATE, stop: str = DEFAULT_STOP,
              progress: bool | EMProgress = False) -> Fit:
    """Exact-likelihood IBU: EM on the exact report likelihood of every mechanism in ``obs``.

    Same settings, defaults and stopping rules as :func:`~localpriv.estimators.ibu.ibu`: by default
    the certified maximum (``accelerate="newton"``, ``stop="gap"``, ``delta=1e-9`` per report);
    ``accelerate="none", stop="loglik"`` is plain EM with seed 001's rule.
    """
    blocks = obs.likelihood_blocks()
    res = run_em(blocks, obs.k, progress=progress, label="ibu-exact", theta0=theta0, delta=delta,
                 max_iter=max_iter, keep_trace=keep_trace, callback=callback, accelerate=accelerate, stop=stop)
    offset = sum(b.log_offset for b in blocks)
    extra: dict[str, Any] = {"trace": np.asarray(res.trace) + offset} if keep_trace else {}
    extra["gap"] = res.gap
    return Fit(res.theta, obs.domain, "ibu-exact",
                    {**em_settings(res, delta, max_iter, theta0), "model": "exact report likelihood",
                     "accelerate": res.scheme},
                    loglik=res.loglik + offset, iterations=res.iterations, converged=res.converged,
                    n=obs.n, extra=extra)


_LOGLIK = Setting("loglik", "bool", False, "also compute the exact log-likelihood of the reports at the estimate")
_PURE = {"single-mechanism", "pure-oracle"}
register_estimator("mi-n", lambda obs, **kw: mi(obs, post="n", **kw), settings=(_LOGLIK,), tags=_PURE,
                   summary="pure-protocol matrix inversion on the support counts, normalized")
register_estimator("mi-p", lambda obs, **kw: mi(obs, post="p", **kw), settings=(_LOGLIK,), tags=_PURE,
                   summary="pure-protocol matrix inversion on the support counts, projected onto the simplex")
register_estimator("rappor-n", lambda obs, **kw: rappor(obs, post="n", **kw), settings=(_LOGLIK,),
                   tags=_PURE | {"unary", "symmetric-unary"},
                   summary="Rappor's estimator on the bit counts of basic RAPPOR, normalized")
register_estimator("rappor-p", lambda obs, **kw: rappor(obs, post="p", **kw), settings=(_LOGLIK,),
                   tags=_PURE | {"unary", "symmetric-unary"},
                   summary="Rappor's estimator on the bit counts of basic RAPPOR, projected onto the simplex")
register_estimator("ibu-support", ibu_support, tags=_PURE | {"iterative"},
                   settings=em_settings_declared() + (Setting("loglik", "bool", True, _LOGLIK.help),),
                   summary="IBU on the support counts (seed 002), a pseudo-likelihood maximum")
register_estimator("ibu-exact", ibu_exact, settings=em_settings_declared(), tags={"mle", "iterative", "mixture"},
                   summary="maximum-likelihood estimate by EM on the exact likelihood of the individual reports")
