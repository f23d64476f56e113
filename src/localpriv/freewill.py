"""Free-will privacy: every user applies his own mechanism (seed 003 section 3).

Data model: a report set in which every report names its mechanism (the ``mechanism`` column of a
report table), so kinds and parameters may differ per user. :func:`localpriv.aggregate.aggregate`
groups by ``(mechanism, report)`` in DuckDB and yields one block -- the triplet
``(Z^A, q^A, n^A)`` of seed 003 section 6 -- per distinct mechanism. This module adds:

* :func:`perturb_mixed` -- obfuscate raw values with one mechanism per user, grouped by distinct
  mechanism and sampled vectorized per group;
* :func:`simulate_counts` -- the aggregated counts of many mechanisms drawn directly (multinomial
  per mechanism: exactly the distribution of the aggregated reports), for large simulations;
* :func:`naive_gibu` -- the per-user GIBU iteration of seed 003 Eq. (18), ``O(n k)`` per
  iteration, as a *reference implementation for tests only*;
* :func:`krr_average_eps`, :func:`rappor_average_eps` (Eqs. 11 and 16) and the error bounds of
  Propositions 5.2 (:func:`inv_m_krr_bound`) and 5.4 (:func:`rap_m_bound`);
* :func:`rappor_observations` -- basic one-time RAPPOR reports (the library's ``sue``
  mechanism) of many privacy levels, grouped, for the Table II reproduction.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from ._validation import LocalPrivError, check_distribution, check_int, check_rng
from .domains import Domain
from .mechanisms import parse
from .observations import ObservationBlock, Observations
from .reports import report_table

__all__ = ["perturb_mixed", "simulate_counts", "naive_gibu", "krr_average_eps", "rappor_average_eps",
           "inv_m_krr_bound", "inv_m_krr_exact", "rap_m_bound", "rappor_observations", "split_users"]


def perturb_mixed(values, specs, rng, domain: Domain | None = None) -> pa.Table:
    """Obfuscate ``values[i]`` with mechanism ``specs[i]``; one report table for all users.

    Users are grouped by distinct mechanism (``numpy.unique`` on the specs) and each group is
    sampled in one vectorized call; the loop runs over distinct mechanisms, never over users.
    Report order follows the groups (aggregation does not depend on it).

    Parameters
    ----------
    values : array (n,)
        Raw values, encoded by ``domain`` (or domain indices when ``domain`` is None).
    specs : sequence of str or Mechanism, length n
        The mechanism of each user.
    rng : numpy.random.Generator
    domain : Domain, optional

    Returns
    -------
    pyarrow.Table
        Columns ``mechanism`` (string) and ``report``. All mechanisms must produce one report kind
        (index, float or bit vector) since a table column has one type.
    """
    rng = check_rng(rng)
    x = domain.encode(values) if domain is not None else np.asarray(values)
    spec_arr = np.asarray([str(s) for s in specs]) if not isinstance(specs, np.ndarray) else specs.astype(str)
    if spec_arr.shape[0] != x.shape[0]:
        raise LocalPrivError(f"{x.shape[0]} values but {spec_arr.shape[0]} mechanism specs")
    uniq, inv = np.unique(spec_arr, return_inverse=True)
    tables = []
    for g, spec in enumerate(uniq):  # one iteration per distinct mechanism
        mech = parse(spec, domain)
        sel = inv == g
        t = report_table(mech, mech.sample(x[sel], rng))
        tables.append(t.set_column(0, "mechanism", t.column("mechanism").cast(pa.string())))
    types = {t.schema.field("report").type for t in tables}
    if len(types) > 1:
        if all(pa.types.is_integer(ty) or pa.types.is_floating(ty) for ty in types):
            tables = [t.set_column(1, "report", t.column("report").cast(pa.float64())) for t in tables]
        else:
            raise LocalPrivError(f"mechanisms produce reports of different kinds ({', '.join(map(str, types))}); "
                                 "write one report file per kind and aggregate them together")
    return pa.concat_tables(tables)


def split_users(n: int, n_mechanisms: int, rng=None, *, random: bool = False) -> np.ndarray:
    """How many of ``n`` users apply each of ``n_mechanisms`` mechanisms.

    Equal shares (the first ``n mod M`` get one more) or, with ``random=True``, a uniform
    multinomial draw (users pick a mechanism at random, as in Proposition 5.1's "finite set").
    """
    n = check_int(n, "n", minimum=1)
    M = check_int(n_mechanisms, "n_mechanisms", minimum=1)
    if random:
        return check_rng(rng).multinomial(n, np.full(M, 1.0 / M))
    base = np.full(M, n // M)
    base[: n % M] += 1
    return base


def simulate_counts(theta, mechanisms, n_per_mechanism, rng, domain: Domain | None = None) -> Observations:
    """Draw the aggregated counts of ``n^A`` users per mechanism, users' values i.i.d. ``theta``.

    For mechanism ``A`` with finite channel: ``n^A_x ~ Multinomial(n^A, theta)`` then the counts
    of outputs are ``sum_x Multinomial(n^A_x, A[x])`` -- exactly the law of the aggregated reports
    of seed 003 section 3, drawn in ``O(k |Z^A|)`` whatever ``n^A``.
    """
    rng = check_rng(rng)
    theta = check_distribution(theta, name="theta")
    blocks = []
    for mech, nA in zip(mechanisms, np.asarray(n_per_mechanism, dtype=np.int64)):
        mech = parse(mech, domain)
        if nA <= 0:
            continue
        C = mech.channel()
        nx = rng.multinomial(int(nA), theta)
        counts = rng.multinomial(nx, C).sum(axis=0)
        keep = counts > 0
        blocks.append(ObservationBlock(mech, np.flatnonzero(keep), counts[keep]))
    return Observations(blocks, domain)


def naive_gibu(G, theta0=None, delta: float = 1e-6, max_iter: int = 10_000) -> tuple[np.ndarray, int]:
    """Per-user GIBU, seed 003 Eq. (18) -- a reference implementation for tests, ``O(n k)``/iteration.

    ``theta'_x = (1/n) sum_i theta_x G[x,i] / sum_u theta_u G[u,i]`` where ``G[x, i]`` is the
    probability of user ``i``'s observation given ``x``; stopped like Algorithm 1, when the
    log-likelihood ``sum_i log sum_x theta_x G[x,i]`` changes by less than ``delta``.

    Returns
    -------
    theta, iterations
    """
    G = np.asarray(G, dtype=float)
    k, n = G.shape
    theta = np.full(k, 1.0 / k) if theta0 is None else np.asarray(theta0, dtype=float).copy()
    L = np.log(theta @ G).sum()
    for t in range(1, max_iter + 1):
        post = theta[:, None] * G / (theta @ G)[None, :]  # k x n posteriors, one column per user
        theta = post.mean(axis=1)
        L_new = np.log(theta @ G).sum()
        if abs(L_new - L) < delta:
            return theta, t
        L = L_new
    return theta, max_iter


# --------------------------------------------------------------------------------------------
# Averaged privacy levels and error bounds (seed 003 sections 5.2 and 5.4)
# --------------------------------------------------------------------------------------------
def krr_average_eps(eps, k: int, weights=None) -> float:
    """``eps[n]`` of Eq. 11: ``1/(k-1+e^{eps[n]}) = mean_i 1/(k-1+e^{eps_i})``.

    The average of k-RR mechanisms of levels ``eps_i`` (optionally weighted by user counts) is the
    k-RR of level ``eps[n]``.
    """
    e = np.asarray(eps, dtype=float)
    w = np.ones_like(e) if weights is None else np.asarray(weights, dtype=float)
    b = (w @ (1.0 / (k - 1 + np.exp(e)))) / w.sum()
    return float(np.log(1.0 / b - (k - 1)))


def rappor_average_eps(eps, weights=None) -> float:
    """``eps[n]`` of Eq. 16: ``1/(1+e^{eps[n]/2}) = mean_i 1/(1+e^{eps_i/2})``."""
    e = np.asarray(eps, dtype=float)
    w = np.ones_like(e) if weights is None else np.asarray(weights, dtype=float)
    q = (w @ (1.0 / (1.0 + np.exp(e / 2)))) / w.sum()
    return float(2.0 * np.log(1.0 / q - 1.0))


def inv_m_krr_bound(theta, eps, n: int | None = None, weights=None) -> float:
    """Proposition 5.2: upper bound on ``E ||theta_hat - theta||_2^2`` of [INV]M under k-RR mixtures.

    ``(1 - sum_x theta_x^2)/n + (k-1)/n * (k + 2(e^{eps[n]}-1)) / (e^{eps[n]}-1)^2``, with
    ``eps[n]`` of Eq. 11 over the users' levels ``eps`` (one per user, or one per mechanism with
    ``weights`` the numbers of users; then ``n`` defaults to their sum). Equality when all levels
    are equal. The bound is for the raw estimate (before normalization/projection).
    """
    theta = check_distribution(theta, name="theta")
    k = theta.size
    e = np.atleast_1d(np.asarray(eps, dtype=float))
    if n is None:
        n = float(e.size if weights is None else np.sum(weights))
    en = np.exp(krr_average_eps(e, k, weights))
    return float((1 - theta @ theta) / n + (k - 1) / n * (k + 2 * (en - 1)) / (en - 1) ** 2)


def rap_m_bound(theta, eps, n: int | None = None, weights=None) -> float:
    """Proposition 5.4: upper bound on ``E ||theta_hat - theta||_2^2`` of [RAP]M.

    ``(1 - sum_x theta_x^2)/n + (1/n) k e^{eps[n]/2} / (e^{eps[n]/2} - 1)^2``, ``eps[n]`` of Eq. 16.
    Equality when all levels are equal; for the raw estimate of Eq. 17.
    """
    theta = check_distribution(theta, name="theta")
    k = theta.size
    e = np.atleast_1d(np.asarray(eps, dtype=float))
    if n is None:
        n = float(e.size if weights is None else np.sum(weights))
    h = np.exp(rappor_average_eps(e, weights) / 2)
    return float((1 - theta @ theta) / n + k * h / (n * (h - 1) ** 2))


def inv_m_krr_exact(theta, eps, weights) -> float:
    """Exact ``E ||theta_hat - theta||_2^2`` of raw [INV]M for k-RR mechanisms with ``weights`` users each.

    Derived directly: with ``b_A = 1/(k-1+e^{eps_A})``, ``a_A = e^{eps_A} b_A``, the per-user
    output probabilities ``m^A_z = b_A + (a_A - b_A) theta_z`` and ``bbar, abar`` their averages,
    ``theta_hat = (q[n] - bbar)/(abar - bbar)`` and
    ``E||.||^2 = sum_z sum_A n_A m^A_z (1 - m^A_z) / (n^2 (abar - bbar)^2)``.
    Used to check Proposition 5.2 (the bound is >= this, with equality for equal levels).
    """
    theta = check_distribution(theta, name="theta")
    k = theta.size
    e = np.asarray(eps, dtype=float)
    w = np.asarray(weights, dtype=float)
    n = w.sum()
    b = 1.0 / (k - 1 + np.exp(e))
    a = np.exp(e) * b
    m = b[:, None] + (a - b)[:, None] * theta[None, :]
    var = (w[:, None] * m * (1 - m)).sum()
    return float(var / (n ** 2 * ((w @ a - w @ b) / n) ** 2))


# --------------------------------------------------------------------------------------------
# Basic one-time RAPPOR reports (seed 003 Eq. 15) for the Table II reproduction
# --------------------------------------------------------------------------------------------
def rappor_observations(theta, eps_list, n_per_mechanism, rng) -> Observations:
    """Basic one-time RAPPOR reports of ``n^A`` users per level, identical reports grouped.

    Values are drawn i.i.d. from ``theta``; user ``i`` reports with ``sue(k=k,eps=eps_A)`` -- basic
    one-time RAPPOR (seed 003 Eq. 15: every bit of the one-hot encoding kept w.p.
    ``e^{eps/2}/(1+e^{eps/2})``), bit-packed reports. Identical reports are counted with
    ``numpy.unique`` (vectorized), giving one block per mechanism; estimators then use the
    mechanism's exact factorized likelihood (sparse/dense ``SupportBlock``) and its ``p_star``,
    ``q_star``, ``support_counts`` ([RAP]M, RAP).
    """
    rng = check_rng(rng)
    theta = check_distribution(theta, name="theta")
    k = theta.size
    blocks = []
    for eps, nA in zip(eps_list, n_per_mechanism):
        mech = parse(f"sue(k={k},eps={float(eps)!r})")
        x = rng.choice(k, size=int(nA), p=theta)
        reports, counts = np.unique(mech.sample(x, rng), axis=0, return_counts=True)
        blocks.append(ObservationBlock(mech, reports, counts))
    return Observations(blocks)
