"""Consistency of the MLE (IBU) for a mechanism: seed 001 section 6.

Lemma 6.1 (Newey & McFadden, Thm 2.5) gives four sufficient conditions for ``theta_hat^n -> theta``
in probability: (i) identification, (ii) compact parameter space, (iii) continuity of
``log P(z | phi)``, (iv) dominance ``E[sup_phi |log P(Z | phi)|] < inf``. (ii) and (iii) always hold
in the local model (section 6.2). This module decides (i) with the rank test of Theorem 6.1
(:func:`localpriv.analysis.concavity.identifiable`), decides (iv) where it can, and measures the
convergence empirically: the mean squared error ``E||theta_hat^n - theta||^2`` against ``n`` on a
log-log scale, whose fitted slope is ``-1`` for a consistent, regular estimator.

Dominance, decidable cases:

* a finite channel whose live columns are strictly positive: ``d(z) = -log min_x M[x, z]`` is a
  finite bound for every ``z`` (proof of Proposition 6.3) -- holds;
* a finite channel with a zero beside a non-zero in a live column: ``sup_phi |log P(z|phi)| = inf``
  for that ``z``, so (iv) fails whenever ``z`` can occur; the lemma then says nothing (its
  conditions are sufficient, not necessary) -- reported as "not established";
* the untruncated linear geometric mechanism: holds (Proposition 6.4's bound
  ``d(z) = eps (|z - a| + l) - log c`` has finite mean);
* a finite output space (even one too large to enumerate) and an LDP level computed from the
  channel's structure: holds iff the level is finite (a finite level means no live column holds a
  zero, so every ``-log min_x P(z|x)`` is finite; Proposition 6.3);
* anything else: "undecided".
"""
from __future__ import annotations

import numpy as np

from localpriv.analysis.concavity import identifiable
from localpriv.data.observations import Observations
from localpriv.estimators.em import em
from localpriv.estimators.ibu import ibu
from localpriv.likelihood.blocks import DenseBlock
from localpriv.mechanisms import Mechanism, parse
from localpriv.mechanisms.base import ldp_level_within_budget
from localpriv.mechanisms.geometric import Geometric
from localpriv.mechanisms.unary import UnaryEncoding
from localpriv.utils.validation import check_distribution, check_rng

__all__ = ["dominance", "convergence_study", "asymptotic_error", "consistency_report", "fit_loglog_slope",
           "default_theta"]


def default_theta(k: int) -> np.ndarray:
    """A fixed, full-support, non-uniform test distribution: a bump at ``k/3`` over a floor."""
    x = np.arange(k)
    w = np.exp(-(((x - k / 3) / max(k / 4, 1)) ** 2)) + 0.5
    return w / w.sum()


def dominance(mech, domain=None, max_dense: int = 16_000_000) -> dict:
    """Condition (iv) of seed 001 Lemma 6.1, decided where decidable (see module docstring).

    Returns ``{"holds": True | False | None, "reason": str}`` (``None``: undecided).
    """
    mech = parse(mech, domain)
    if isinstance(mech, Geometric) and not mech.truncated:
        return {"holds": True, "reason": "untruncated linear geometric: d(z) = eps(|z-a|+l) - log c has "
                                         "finite mean (seed 001 Prop. 6.4)"}
    if isinstance(mech, UnaryEncoding) and np.isfinite(mech.log_level()):  # 0 < q, p < 1
        return {"holds": True, "reason": "unary encoding (basic Rappor when symmetric): finitely many bit vectors, "
                                         "each of positive probability under every input (bit probabilities p, q "
                                         "in (0,1)), so d(z) = -log min_x P(z|x) is finite (seed 001 Prop. 6.3)"}
    try:
        n_out = mech.n_outputs
    except Exception:  # noqa: BLE001
        n_out = None
    try:
        space = mech.output_space_size()
    except Exception:  # noqa: BLE001
        space = n_out
    own_eps = type(mech).epsilon_ldp is not Mechanism.epsilon_ldp
    if own_eps and space is not None:
        try:
            eps = ldp_level_within_budget(mech)
        except Exception:  # noqa: BLE001 - fall through to the dense check
            eps = None
        if eps is not None and np.isfinite(eps):
            return {"holds": True, "reason": f"finite output space and finite eps_ldp ({eps:.4g}, from the channel's "
                                             "structure): no output is impossible under one input only, so "
                                             "d(z) = -log min_x P(z|x) is finite (seed 001 Prop. 6.3)"}
        if eps is not None:
            return {"holds": False, "reason": "eps_ldp is inf: some output is impossible for some input but not all, "
                                              "d(z) is infinite, Lemma 6.1 does not apply (not established)"}
    if n_out is None:
        return {"holds": None, "reason": "no enumerable channel: dominance not decided"}
    if mech.k * n_out > max_dense:
        return {"holds": None, "reason": f"not decided: the channel has {mech.k * n_out} entries, above the "
                                         f"analysis limit {max_dense}"}
    M = mech.channel()
    live = M.max(axis=0) > 0
    mins = M[:, live].min(axis=0)
    if np.all(mins > 0):
        return {"holds": True, "reason": f"finite channel, every live column positive: d(z) = -log min_x M(x,z) "
                                         f"<= {-np.log(mins.min()):.3g} (seed 001 Prop. 6.3)"}
    return {"holds": False, "reason": f"{int((mins == 0).sum())} output(s) impossible for some input but not "
                                      "all: d(z) is infinite, Lemma 6.1 does not apply (not established)"}


def fit_loglog_slope(n, err, err_se=None) -> dict:
    """Least-squares fit ``log err = a + b log n``.

    Returns the slope ``b``, the intercept ``a`` and the slope's standard error: propagated from
    the standard errors of the points when ``err_se`` is given (delta method,
    ``Var(log err_i) ~ (se_i / err_i)^2``, ``b = sum_i w_i log err_i`` with
    ``w_i = (x_i - mean x) / sum_j (x_j - mean x)^2``), else from the residuals.
    """
    x = np.log(np.asarray(n, dtype=float))
    y = np.log(np.asarray(err, dtype=float))
    A = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    if err_se is not None:
        w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
        rel = np.asarray(err_se, dtype=float) / np.asarray(err, dtype=float)
        se = float(np.sqrt((w ** 2 * rel ** 2).sum()))
    else:
        resid = y - A @ coef
        s2 = float(resid @ resid) / max(x.size - 2, 1)
        se = float(np.sqrt(s2 * np.linalg.inv(A.T @ A)[1, 1]))
    return {"slope": float(coef[1]), "slope_se": se, "intercept": float(coef[0])}


def convergence_study(mech, theta=None, ns=(1000, 4000, 16000, 64000), runs: int = 40,
                      rng: np.random.Generator | int = 0, domain=None, delta: float = 1e-7, max_iter: int = 20_000,
                      progress=None) -> dict:
    """Empirical consistency: mean ``||theta_hat^n - theta||_2^2`` of IBU against ``n``.

    For each ``n`` in ``ns``, ``runs`` data sets of ``n`` values drawn from ``theta`` are
    obfuscated with ``mech.sample`` and estimated by IBU (shared EM engine, plain EM with the
    stopping rule ``|L(t) - L(t-1)| < delta``, pinned whatever the library's defaults). Returns the
    mean squared errors, their standard errors and the fitted log-log slope (``-1`` expected for a
    consistent estimator with ``1/n`` variance; near ``0`` when the error does not vanish).
    """

    mech = parse(mech, domain)
    rng = check_rng(rng)
    k = mech.k
    theta = default_theta(k) if theta is None else check_distribution(theta, k=k, name="theta")
    prog = progress or (lambda it, *a, **kw: it)
    means, ses, nonconv = [], [], 0
    for n in prog(list(ns), "n"):
        errs = np.empty(runs)
        for r in range(runs):  # one IBU per simulated data set
            x = rng.choice(k, size=int(n), p=theta)
            obs = Observations.from_reports(mech, mech.sample(x, rng))
            est = ibu(obs, delta=delta, max_iter=max_iter, accelerate="none", stop="loglik")  # pinned
            nonconv += not est.converged
            errs[r] = float(((est.distribution - theta) ** 2).sum())
        means.append(float(errs.mean()))
        ses.append(float(errs.std(ddof=1) / np.sqrt(runs)))
    fit = fit_loglog_slope(ns, means, ses)
    return {"n": list(map(int, ns)), "mse": means, "mse_se": ses, "runs": runs,
            "not_converged": int(nonconv), **fit,
            "asymptotic_error": asymptotic_error(mech, theta, max_iter=max_iter)}


def asymptotic_error(mech, theta, max_iter: int = 20_000, delta: float = 1e-13):
    """Largest ``||theta_hat - theta||^2`` of IBU on the asymptotic report distribution
    ``q = theta M`` (infinite data, as in seed 001 section 6.4), over four starts (uniform and three
    fixed Dirichlet(1) draws). Near 0 for identifiable mechanisms; a positive floor shows MLEs
    that do not converge to ``theta``. ``None`` when
    the channel cannot be enumerated."""

    try:
        n_out = mech.n_outputs
    except Exception:  # noqa: BLE001
        n_out = None
    if n_out is None or mech.k * n_out > 4_000_000:
        return None
    M = mech.channel()
    q = theta @ M
    live = q > 0
    starts = [None] + list(np.random.default_rng(0).dirichlet(np.ones(mech.k), size=3))
    errs = []
    for t0 in starts:  # a handful of starting points
        res = em([DenseBlock(M[:, live], q[live])], mech.k, theta0=t0, delta=delta, max_iter=max_iter,
                 accelerate="none", stop="loglik")  # pinned: plain EM, seed 001's rule
        errs.append(float(((res.theta - theta) ** 2).sum()))
    return max(errs)


def consistency_report(mech, domain=None, *, study: bool = True, theta=None,
                       ns=(1000, 4000, 16000, 64000), runs: int = 40, rng: np.random.Generator | int = 0,
                       delta: float = 1e-7, max_iter: int = 20_000) -> dict:
    """Consistency of IBU for ``mech`` (seed 001 section 6): identification (Theorem 6.1 rank
    test), regularity, dominance, the verdict of Lemma 6.1, and optionally the empirical study.

    The verdict is ``"consistent"`` when (i) and (iv) are established, ``"not identifiable"``
    when (i) fails (then distinct distributions give the same report distribution and no
    estimator can converge to ``theta`` in general), otherwise ``"not established"``.
    """
    mech = parse(mech, domain)
    ident = identifiable(mech)
    dom = dominance(mech)
    if not ident.holds:
        verdict = "not identifiable"
    elif dom["holds"]:
        verdict = "consistent"
    else:
        verdict = "not established"
    out = {
        "mechanism": str(mech),
        "identification": ident.as_dict(),
        "regularity": "holds (compact simplex, log(phi @ M[:, z]) continuous; seed 001 section 6.2)",
        "dominance": dom,
        "verdict": verdict,
    }
    if study:
        out["convergence"] = convergence_study(mech, theta=theta, ns=ns, runs=runs, rng=rng,
                                               delta=delta, max_iter=max_iter)
    return out
