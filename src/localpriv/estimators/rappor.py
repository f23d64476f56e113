"""Decoders of Bloom-filter RAPPOR collections (the mechanism: :mod:`localpriv.mechanisms.rappor`).

``decode`` recovers the candidates' shares from the per-cohort bit counts by RAPPOR's regression
(non-negative least squares, with a ridge penalty chosen by cross-validation, GCV or SURE) or by the
one EM engine on the exact likelihood of the reports.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.estimators.em import em
from localpriv.likelihood.blocks import DenseBlock, check_dense_size, max_dense_entries
from localpriv.mechanisms.rappor import RAPPOR, BitCounts, candidate_keys, finite_float
from localpriv.utils.validation import LocalPrivError

__all__ = ["Decoded", "decode", "RIDGE_GRID", "RIDGE_SELECTIONS", "ridge_criteria"]


@dataclass
class Decoded:
    """A decoded RAPPOR collection: ``coef`` (per candidate: the fitted share of users, not
    forced to sum to 1 by the regression), ``distribution`` (``coef`` normalized), the method."""

    method: str
    coef: np.ndarray
    distribution: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)


#: penalties tried by ``method="ridge"`` (relative to the mean eigenvalue of ``A^T A``): 0 and
#: half-decades from 1e-5 to 1e2, then the quarter-decades beside the best (a scale-free grid, fixed
#: before any data were seen; the data choose the point)
RIDGE_GRID = np.r_[0.0, 10.0 ** np.arange(-5.0, 2.01, 0.5)]
RIDGE_SELECTIONS = ("cv", "gcv", "sure")


def _ridge_solve(R: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """``argmin_{theta >= 0} ||R theta - b||^2 + lam ||theta||^2`` (non-negative least squares of
    the augmented system ``[R; sqrt(lam) I] theta = [b; 0]``, ``scipy.optimize.nnls``)."""
    from scipy.optimize import nnls
    K = R.shape[1]
    if lam > 0:
        R = np.vstack([R, np.sqrt(lam) * np.eye(K)])
        b = np.r_[b, np.zeros(K)]
    return nnls(R, b, maxiter=50 * K)[0]


def ridge_criteria(A: np.ndarray, T: np.ndarray, var: np.ndarray, coef: np.ndarray, lam: float, cohorts: int, m: int,
                   live: np.ndarray) -> dict[str, float]:
    """The three selection criteria at one fitted ``coef`` (docstring of :func:`decode`): the fit is
    the ridge on the active set ``F = {coef > 0}``, whose hat matrix is
    ``H = A_F (A_F^T A_F + lam I)^-1 A_F^T = W W^T``."""
    from scipy.linalg import LinAlgError, cho_factor, solve_triangular
    M = A.shape[0]
    r = T - A @ coef
    rss = float(r @ r)
    F = coef > 0
    AF = A[:, F]
    try:
        L = cho_factor(AF.T @ AF + lam * np.eye(int(F.sum())), lower=True)[0]
        W = solve_triangular(L, AF.T, lower=True, check_finite=False).T                # M x |F|
    except (LinAlgError, ValueError):
        return {"cv": np.inf, "gcv": np.inf, "sure": np.inf}
    h = np.einsum("ij,ij->i", W, W)                                                   # diag(H)
    df = float(h.sum())
    out = {"gcv": M * rss / (M - df) ** 2 if df < M - 1e-9 else np.inf,
           "sure": rss - float(var.sum()) + 2.0 * float(h @ var)}
    # leave one cohort out: (I - H_cc)^-1 r_c, exact for the ridge on the active set
    Wc = W.reshape(cohorts, m, -1)[live]
    rc = r.reshape(cohorts, m)[live]
    cv = 0.0
    step = max(1, (1 << 22) // max(1, m * min(m, Wc.shape[2])))
    for s0 in range(0, Wc.shape[0], step):  # chunks of cohorts (bounded memory), never of reports
        w, e = Wc[s0:s0 + step], rc[s0:s0 + step]
        try:
            if m <= w.shape[2]:   # (I - W_c W_c^T)^-1 e_c, m x m
                held = np.linalg.solve(np.eye(m) - np.einsum("cif,cjf->cij", w, w), e[..., None])[..., 0]
            else:                 # Woodbury: e_c + W_c (I - W_c^T W_c)^-1 W_c^T e_c, |F| x |F|
                g = np.linalg.solve(np.eye(w.shape[2]) - np.einsum("cif,cig->cfg", w, w),
                                    np.einsum("cif,ci->cf", w, e)[..., None])[..., 0]
                held = e + np.einsum("cif,cf->ci", w, g)
        except np.linalg.LinAlgError:
            return {**out, "cv": np.inf}
        cv += float(np.sum(held * held))
    out["cv"] = cv if np.isfinite(cv) else np.inf
    return out


def _ridge(mech: RAPPOR, X: np.ndarray, n: np.ndarray, ones: np.ndarray,
           penalty: str | float) -> tuple[np.ndarray, dict[str, Any]]:
    """The ridge-penalized non-negative regression of :func:`decode` (``method="ridge"``)."""
    K = X.shape[2]
    A = (X * n[:, None, None]).reshape(mech.cohorts * mech.m, K)
    T = mech.debiased(BitCounts(n, ones)).ravel()
    scale = float(np.einsum("ij,ij->", A, A)) / K
    if not scale > 0:
        raise LocalPrivError("rappor decode: no reports (or no candidate sets a Bloom bit): nothing to fit")
    live = n > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        pi = np.where(live[:, None], ones / np.where(live, n, 1.0)[:, None], 0.0)
    var = (n[:, None] * pi * (1.0 - pi)).ravel() / (mech.s1 - mech.s0) ** 2    # Var T[c, j], binomial
    # the residual sum of squares splits into ||R theta - Q^T T||^2 + ||T||^2 - ||Q^T T||^2 (A = QR)
    if A.shape[0] > K:
        Q, R = np.linalg.qr(A)
        b = Q.T @ T
    else:
        R, b = A, T
    if not isinstance(penalty, str):
        rel = finite_float(penalty, "penalty")
        if rel < 0:
            raise LocalPrivError(f"rappor decode: penalty must be >= 0 (relative to the mean eigenvalue of A^T A), "
                                 f"or one of {', '.join(RIDGE_SELECTIONS)}; got {rel}")
        coef = _ridge_solve(R, b, rel * scale)
        return coef, {"penalty": rel, "lambda": rel * scale, "selection": "given"}
    if penalty not in RIDGE_SELECTIONS:
        raise LocalPrivError(f"rappor decode: penalty must be a number >= 0 or one of {', '.join(RIDGE_SELECTIONS)}, "
                             f"got {penalty[:40]!r}")
    selection = penalty
    if selection == "cv" and int(live.sum()) < 2:
        selection = "gcv"   # one cohort holds every report: nothing to hold out
    tried: dict[float, tuple[float, np.ndarray]] = {}

    def at(rel: float) -> float:
        if rel not in tried:
            coef = _ridge_solve(R, b, rel * scale)
            tried[rel] = (ridge_criteria(A, T, var, coef, rel * scale, mech.cohorts, mech.m, live)[selection], coef)
        return tried[rel][0]

    crit = [at(rel) for rel in RIDGE_GRID]
    best = int(np.argmin(crit)) if np.any(np.isfinite(crit)) else len(RIDGE_GRID) - 1
    if best > 0:   # the quarter-decades beside the best grid point
        for rel in RIDGE_GRID[best] * 10.0 ** np.array([-0.25, 0.25]):
            if rel > RIDGE_GRID[1] * 0.99:
                at(float(rel))
    rels = np.array(sorted(tried))
    vals = np.array([tried[r][0] for r in rels])
    pick = float(rels[int(np.argmin(vals))]) if np.any(np.isfinite(vals)) else float(RIDGE_GRID[best])
    return tried[pick][1], {"penalty": pick, "lambda": pick * scale, "selection": selection,
                            "grid": rels, "criterion": vals}


def _external_bloom(mech: RAPPOR, bloom: ArrayLike) -> np.ndarray:
    """An external Bloom design for :func:`decode`: ``(cohorts, K, m)`` bool filters, or ``(cohorts, K,
    h')`` integer positions in ``0..m-1`` (each row's set bits; repeats allowed), as bool filters. An
    integer array with ``m > h`` columns is refused: 0/1 filters must be passed as bool."""
    b = np.asarray(bloom)
    if b.ndim != 3 or b.shape[0] != mech.cohorts or b.shape[1] < 1:
        raise LocalPrivError(f"rappor decode: bloom must be (cohorts={mech.cohorts}, K, m) filters or (cohorts, K, h) "
                             f"positions, got shape {b.shape}")
    if b.dtype == bool:
        if b.shape[2] != mech.m:
            raise LocalPrivError(f"rappor decode: bloom filters must have m={mech.m} bits, got {b.shape[2]}")
        return b
    if b.dtype.kind not in "iu":
        raise LocalPrivError(f"rappor decode: bloom must be bool filters or integer positions, got dtype {b.dtype}")
    if b.shape[2] == mech.m and mech.m > mech.h:
        raise LocalPrivError(f"rappor decode: integer bloom of {mech.m} columns: pass 0/1 filters as bool, "
                             f"positions as (cohorts, K, h)")
    if b.size and (int(b.min()) < 0 or int(b.max()) >= mech.m):
        raise LocalPrivError(f"rappor decode: bloom positions must be in 0..{mech.m - 1}")
    out = np.zeros((mech.cohorts, b.shape[1], mech.m), dtype=bool)
    out[np.arange(mech.cohorts)[:, None, None], np.arange(b.shape[1])[None, :, None], b] = True
    return out


def decode(mech: RAPPOR, reports: ArrayLike | None = None, counts: ArrayLike | None = None, *,
           bit_counts: BitCounts | None = None, candidates: ArrayLike | None = None, bloom: ArrayLike | None = None,
           method: str = "auto", penalty: str | float = "cv", **em_settings: Any) -> Decoded:
    """Estimate the distribution over a candidate set from RAPPOR reports (module docstring).

    Parameters
    ----------
    mech : RAPPOR
        The mechanism the reports come from.
    reports, counts : arrays, optional
        Distinct reports and how often each was seen (``counts=None``: once each), e.g. a block of
        :class:`~localpriv.data.observations.Observations`. ``method="em-exact"`` needs them.
    bit_counts : BitCounts, optional
        Per-cohort bit counts instead of reports (``nnls`` and ``em`` only need these).
    candidates : array, optional
        The candidates: integer keys or strings (keyed by XXH64 of their UTF-8, seed 0;
        :func:`candidate_keys`). Default: the mechanism's own inputs.
    bloom : array, optional
        An external Bloom design instead of our hashing (exclusive with ``candidates``): the
        candidates' filters per cohort, ``(cohorts, K, m)`` bool, or their positions,
        ``(cohorts, K, h)`` integers in ``0..m-1``. For decoding reports of another RAPPOR client
        with the same ``m``, cohorts and channel (e.g. to compare collections with the same
        decoder); every method treats it exactly like the filters of :meth:`RAPPOR.bloom`.
    method : {"auto", "ridge", "nnls", "em", "em-exact"}
        RAPPOR's regression with a ridge penalty chosen from the data (non-negative), without
        penalty (non-negative least squares), the EM engine on the bitwise composite likelihood of
        the bit counts, or the EM engine on the exact likelihood of the reports (the MLE).
        ``"auto"`` (default): ``"em-exact"`` when the reports are given and their dense likelihood
        (candidates x distinct reports) fits under :func:`~localpriv.likelihood.blocks.max_dense_entries`,
        else ``"ridge"`` -- the MLE had the lower MSE in every round of the benchmark against
        pure-LDP and a better top 10 and top 50 (docs/rappor.md); the regression needs
        only bit counts. ``Decoded.method`` says which ran.
    penalty : {"cv", "gcv", "sure"} or float
        ``method="ridge"`` only. With ``A[(c, j), x] = n[c] [j in B_c(x)]`` and the debiased counts
        ``T`` (module docstring) the estimate is (Hoerl and Kennard, Technometrics 12, 1970, under
        the constraint ``theta >= 0``)::

            theta(lam) = argmin_{theta >= 0} ||A theta - T||^2 + lam ||theta||^2,   lam = penalty * s,
            s = trace(A^T A) / K   (the mean eigenvalue of A^T A: ``penalty`` is scale-free)

        A number fixes ``penalty``. A name chooses it from the data over ``0`` and the half-decades
        ``1e-5 .. 1e2`` (:data:`RIDGE_GRID`), then the quarter-decades beside the best, minimizing a
        criterion. On the active set ``F = {theta_x > 0}`` the fit is linear in ``T`` with hat matrix
        ``H = A_F (A_F^T A_F + lam I)^-1 A_F^T`` (piecewise linear: the standard degrees of freedom of
        a constrained fit, Meyer and Woodroofe, Ann. Statist. 2000), ``r = T - A theta(lam)``:

        * ``"cv"`` (default): leave-one-cohort-out cross-validation,
          ``CV(lam) = sum_c ||(I - H_cc)^-1 r_c||^2`` (``r_c``, ``H_cc``: the rows of cohort ``c``).
          ``(I - H_cc)^-1 r_c`` is exactly the residual on cohort ``c`` of the ridge refitted without
          that cohort on the same active set (the block form of the leave-one-out identity behind
          GCV; Golub, Heath and Wahba, Technometrics 21, 1979). The users of different cohorts are
          independent, so the held-out counts test the fit honestly whatever the dependence between
          the bits of one report; it needs at least two cohorts with reports (else ``gcv``).
        * ``"gcv"``: generalized cross-validation (Golub, Heath and Wahba 1979),
          ``GCV(lam) = M ||r||^2 / (M - tr H)^2`` with ``M = cohorts m`` rows.
        * ``"sure"``: Mallows' Cp / Stein's unbiased risk estimate of ``E ||A theta(lam) - E T||^2``,
          ``||r||^2 - sum V + 2 sum_i H_ii V_i``, with the binomial variance of the bit counts,
          ``V[c, j] = n[c] pi (1 - pi) / (s1 - s0)^2``, ``pi = ones[c, j] / n[c]`` (it ignores the
          covariance of two bits of one report, which is small when ``h << m``).

        The chosen ``penalty``, ``lambda``, the grid and the criterion are in ``Decoded.extra``.
        As the noise vanishes every criterion tends to the residual, smallest at ``lam = 0``: the
        estimate becomes ``nnls``'s.
    em_settings
        Passed to :func:`localpriv.estimators.em.em` (``delta``, ``max_iter``, ``accelerate``...).
    """
    if not isinstance(mech, RAPPOR):
        raise LocalPrivError(f"rappor decode: needs a rappor mechanism, got {mech}")
    if method not in ("auto", "ridge", "nnls", "em", "em-exact"):
        raise LocalPrivError(f"rappor decode: method must be auto, ridge, nnls, em or em-exact, got "
                             f"{str(method)[:40]!r}")
    if method == "auto" and not (isinstance(penalty, str) and penalty == "cv"):
        method = "ridge"  # a penalty given: the regression it is for
    if method != "ridge" and not (isinstance(penalty, str) and penalty == "cv"):
        raise LocalPrivError(f"rappor decode: penalty is for method=ridge only (method={method})")
    if bloom is not None:
        if candidates is not None:
            raise LocalPrivError("rappor decode: give either candidates or an external bloom design, not both")
        bloom = _external_bloom(mech, bloom)
    else:
        bloom = mech.bloom() if candidates is None else mech.bloom(candidate_keys(candidates))
    K = bloom.shape[1]
    if method == "auto":
        fits = reports is not None and K * np.asarray(reports).shape[0] <= max_dense_entries()
        method = "em-exact" if fits else "ridge"
    if method == "em-exact":
        if reports is None:
            raise LocalPrivError("rappor decode: em-exact needs the distinct reports and their counts, not bit counts")
        r = np.asarray(reports)
        c = np.ones(r.shape[0]) if counts is None else np.asarray(counts, dtype=float)
        check_dense_size(K, r.shape[0], f"{mech} likelihood of {r.shape[0]} reports")
        G = np.exp(mech.log_likelihood(r, bloom))
        res = em([DenseBlock(G, c)], K, **em_settings)
        return Decoded(method, res.theta, res.theta.copy(),
                       {"loglik": res.loglik, "converged": res.converged, "iterations": res.iterations})
    if bit_counts is not None:
        bc = bit_counts
    elif reports is not None:
        bc = mech.bit_counts(reports, counts)
    else:
        raise LocalPrivError("rappor decode: give reports (and counts) or bit_counts")
    n = np.asarray(bc.n, dtype=float)
    ones = np.asarray(bc.ones, dtype=float)
    if n.shape != (mech.cohorts,) or ones.shape != (mech.cohorts, mech.m):
        raise LocalPrivError(f"rappor decode: bit counts of shape {n.shape}, {ones.shape}; expected "
                             f"({mech.cohorts},), ({mech.cohorts}, {mech.m})")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(ones))) or np.any(n < 0) or np.any(ones < 0) \
            or np.any(ones > n[:, None] * (1 + 1e-12)):
        raise LocalPrivError("rappor decode: bit counts must be finite with 0 <= ones[c, j] <= n[c]")
    X = bloom.transpose(0, 2, 1).astype(np.float64)                           # cohorts x m x K
    if method == "ridge":
        coef, info = _ridge(mech, X, n, ones, penalty)
        total = coef.sum()
        dist = coef / total if total > 0 else np.full(K, 1.0 / K)
        return Decoded(method, coef, dist, info)
    if method == "nnls":
        from scipy.optimize import nnls
        A = (X * n[:, None, None]).reshape(mech.cohorts * mech.m, K)
        T = mech.debiased(BitCounts(n, ones)).ravel()
        coef, resid = nnls(A, T)
        total = coef.sum()
        dist = coef / total if total > 0 else np.full(K, 1.0 / K)
        return Decoded(method, coef, dist, {"residual": float(resid)})
    live = n > 0
    G1 = mech.s0 + (mech.s1 - mech.s0) * X[live]                              # P(bit = 1 | x)
    G = np.concatenate([G1.reshape(-1, K), (1.0 - G1).reshape(-1, K)]).T      # K x 2 (cohorts m)
    w = np.concatenate([ones[live].ravel(), (n[live, None] - ones[live]).ravel()])
    keep = w > 0
    res = em([DenseBlock(np.ascontiguousarray(G[:, keep]), w[keep])], K, **em_settings)
    return Decoded(method, res.theta, res.theta.copy(),
                   {"composite_loglik": res.loglik, "converged": res.converged, "iterations": res.iterations})
