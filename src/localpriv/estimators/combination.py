"""Estimators for reports of many mechanisms (free-will privacy, seed 003 sections 4-6).

Every user may pick his own mechanism; the observations hold one block (the triplet
``(Z^A, q^A, n^A)`` of seed 003 section 6) per distinct mechanism ``A``. Estimators:

* ``gibu`` -- GIBU, seed 003 Algorithm 1: the maximum-likelihood estimate over all blocks. It is
  :func:`localpriv.estimators.ibu.ibu` (the one EM engine), never a copy; its cost per iteration
  is ``O(sum_A |Z^A| k)`` whatever ``n``.
* ``[e]R`` (seed 003 Eqs. 7-8): run estimator ``e`` on each block alone and average the results
  with weights ``n^A / n``. Names ``inv-n-r``, ``inv-p-r``, ``ibu-r``, ``rap-n-r``, ``rap-p-r``.
* ``[INV]M`` (Eq. 10): ``theta = q[n] A[n]^{-1}`` with the average mechanism
  ``A[n] = sum_A (n^A/n) A`` and the pooled empirical distribution ``q[n]``; post-processed by
  normalization (``inv-n-m``) or projection onto the simplex (``inv-p-m``).
* ``[IBU]M`` (section 5.3): IBU on ``A[n]`` and ``q[n]`` (``ibu-m``), i.e. the EM engine with a
  single dense block -- which is *not* the MLE unless all mechanisms are equal (Eq. 14).
* ``[RAP]M`` (Eqs. 16-17): for unary-encoding (basic RAPPOR) reports with per-user parameters,
  ``theta = (s[n] - qbar) / (pbar - qbar)`` where ``s[n]`` is the mean reported bit vector and
  ``pbar, qbar`` the user-averaged probabilities of reporting a 1 for a 1 and for a 0. For RAPPOR
  ``q_i = 1/(1+e^{eps_i/2})``, ``p_i = 1 - q_i`` and this is exactly Eqs. 16-17
  (``rap-n-m``, ``rap-p-m``); ``rap-n``/``rap-p`` are the single-mechanism estimator RAP.

``[INV]M``, ``[IBU]M`` need one shared output alphabet (same finite number of outputs) and
``[RAP]M``/``[e]R`` with ``e = RAP`` need unary-encoding mechanisms; otherwise they raise a
:class:`LocalPrivError` naming the estimator that applies (``gibu`` always does).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from localpriv.data.observations import ObservationBlock, Observations
from localpriv.estimators.batch import (
    BatchedExpKernelBlock,
    BatchedScaledIdentityBlock,
    BatchedSupportBlock,
    batch_blocks,
    family,
)
from localpriv.estimators.em import (
    DEFAULT_ACCELERATE,
    DEFAULT_DELTA,
    DEFAULT_MAX_ITER,
    DEFAULT_STOP,
    Callback,
    log_likelihood,
)
from localpriv.estimators.ibu import em_settings, ibu, run_em
from localpriv.estimators.inv import inv
from localpriv.estimators.registry import NO_SETTINGS, Setting, em_settings_declared, register_estimator
from localpriv.estimators.result import Fit
from localpriv.likelihood.blocks import DenseBlock, LikelihoodBlock, WeightedSumBlock
from localpriv.likelihood.structured import ScaledIdentityBlock
from localpriv.mechanisms.base import Mechanism
from localpriv.utils.progress import EMProgress
from localpriv.utils.simplex import clip_normalize, project_simplex
from localpriv.utils.validation import LocalPrivError

__all__ = ["gibu", "merge_blocks", "batch_blocks", "BatchedScaledIdentityBlock", "BatchedExpKernelBlock",
           "BatchedSupportBlock", "combine_results", "average_mechanism", "inv_m", "ibu_m", "rap", "rap_m",
           "unary_statistics", "COMBINABLE", "pooled_counts", "scaled_identity_average",
           "INV_M_DENSE_MAX", "IBU_M_DENSE_MAX", "average_block"]


# --------------------------------------------------------------------------------------------
# GIBU
# --------------------------------------------------------------------------------------------
#: a block is merged when its dense likelihood ``k x m_A`` has at most this many entries
MERGE_BLOCK_MAX = 1 << 17
#: merged blocks are packed into dense chunks of at most this many entries (2 MiB of float64: a
#: chunk that stays in a core's L2 cache; one 6 MiB chunk was 15x slower per iteration, measured)
MERGE_CHUNK_MAX = 1 << 18


def merge_blocks(blocks: Iterable[ObservationBlock], keep_batchable: bool = False) -> list[LikelihoodBlock]:
    """The likelihood blocks of ``blocks`` with small finite-channel ones merged into dense chunks.

    The GIBU sum over mechanisms, ``sum_A sum_j c^A_j G^A[x, j] / (theta @ G^A)_j``, is the same
    sum over the columns of ``[G^1 | G^2 | ...]`` with the counts concatenated: one matrix product
    per chunk instead of one Python-level product per mechanism (seed 003 asks for the sum over
    mechanisms vectorized). Merged: blocks of mechanisms with a finite output alphabet whose
    ``k x m_A`` likelihood has at most :data:`MERGE_BLOCK_MAX` entries -- there the per-block call
    overhead, or an FFT on a padded grid, costs more than the dense product; chunks hold at most
    :data:`MERGE_CHUNK_MAX` entries. With ``keep_batchable`` (what :func:`gibu` uses), blocks of the
    families the EM engine batches (:func:`batch_blocks`: k-RR and other scaled-identity channels,
    the exponential kernels of the linear geometric and Laplace mechanisms, the support blocks of
    the pure protocols) keep their structured block: batched, they cost ``O(total reports)`` per
    product, less than a dense chunk (1,000 k-RR mechanisms at ``k = 100``: 10^7 dense entries
    read twice per EM evaluation). Other blocks keep their own (structured) likelihood block.
    """
    out: list[LikelihoodBlock] = []
    chunk: list[ObservationBlock] = []
    size = 0

    def flush() -> None:
        if len(chunk) == 1:
            out.append(chunk[0].likelihood_block())
        elif chunk:
            G = np.hstack([b.mechanism.likelihood(b.reports) for b in chunk])
            out.append(DenseBlock(G, np.concatenate([b.counts for b in chunk]).astype(float)))

    for b in blocks:
        entries = b.mechanism.k * b.counts.size
        if b.mechanism.n_outputs is None or entries > MERGE_BLOCK_MAX:
            out.append(b.likelihood_block())
            continue
        if keep_batchable:
            lb = b.likelihood_block()
            if family(lb) is not None:
                out.append(lb)
                continue
        if size + entries > MERGE_CHUNK_MAX:
            flush()
            chunk, size = [], 0
        chunk.append(b)
        size += entries
    flush()
    return out


@dataclass
class _Merged(Observations):
    """The same observations, presented to the EM engine with small blocks merged."""

    def likelihood_blocks(self) -> list[LikelihoodBlock]:
        return merge_blocks(self.blocks, keep_batchable=True)


def gibu(obs: Observations, *, merge: bool = True, **settings: Any) -> Fit:
    """GIBU (seed 003 Algorithm 1): the MLE of ``theta`` from the reports of all mechanisms.

    ``theta'_x = sum_A (n^A/n) sum_{z in Z^A} q^A_z theta_x A_xz / sum_u theta_u A_uz``. Runs
    :func:`~localpriv.estimators.ibu.ibu`, the same EM engine (settings are passed through), so
    by default it returns the certified maximum (``stop="gap"``: per-report log-likelihood within
    ``delta = 1e-9`` of the maximum; Newton finish where the blocks allow it, SQUAREM otherwise).
    With ``merge`` (default) the blocks of small finite-channel mechanisms are merged into dense
    chunks, except those of the families the engine batches into one block each (k-RR, linear
    geometric / Laplace, pure protocols: :func:`merge_blocks` with ``keep_batchable``,
    :func:`batch_blocks`): the same iteration, evaluated with fewer, larger products (equal to the
    per-block evaluation up to floating-point rounding).
    """
    many = merge and len(obs.blocks) > 1
    est = ibu(_Merged(obs.blocks, obs.domain, obs.meta) if many else obs, **settings)
    est.estimator = "gibu"
    est.settings["merge"] = many
    return est


def _post(v: np.ndarray, post: str) -> np.ndarray:
    post = post.lower()
    if post == "n":
        return clip_normalize(v)
    if post == "p":
        return project_simplex(v)
    raise LocalPrivError(f"post-processing must be 'n' (normalize) or 'p' (project), got {post!r}")


def _finish(theta: np.ndarray, obs: Observations, name: str, settings: dict[str, Any],
            extra: dict[str, Any] | None = None, **kw: Any) -> Fit:
    """An Estimate whose log-likelihood is the true (GIBU) one over all blocks, for comparison."""
    L = log_likelihood(obs.likelihood_blocks(), theta)
    return Fit(theta, obs.domain, name, settings, loglik=L, n=obs.n, extra=extra or {}, **kw)


# --------------------------------------------------------------------------------------------
# Unary encodings: the statistics of their supports
# --------------------------------------------------------------------------------------------
def _unary_pq(mech: Mechanism) -> tuple[float, float]:
    for pn, qn in (("p_star", "q_star"), ("p", "q")):
        p, q = getattr(mech, pn, None), getattr(mech, qn, None)
        if isinstance(p, (float, np.floating)) and isinstance(q, (float, np.floating)):
            return float(p), float(q)
    raise LocalPrivError(
        f"RAP estimators need unary-encoding (basic RAPPOR) reports with bit probabilities p*, q*; "
        f"{mech} is not one: use gibu (any mechanisms) or inv-p-m / ibu-m (shared output alphabet)")


def unary_statistics(block: ObservationBlock) -> tuple[np.ndarray, float, float, float]:
    """``(ones, n, p, q)`` of a unary-encoding block: per-bit counts of 1s, users, bit probabilities.

    Mechanisms with ``support_counts`` (the pure protocols of seed 002: SUE = basic RAPPOR, OUE,
    ...) give the counts themselves; otherwise reports are ``n x k`` 0/1 arrays (or bit-packed
    ``n x ceil(k/8)`` uint8, big-endian bit order).
    ``p = P(bit = 1 | bit was 1)``, ``q = P(bit = 1 | bit was 0)`` (for RAPPOR, seed 003 Eq. 15:
    ``p = e^{eps/2}/(1+e^{eps/2})``, ``q = 1 - p``).
    """
    mech = block.mechanism
    p, q = _unary_pq(mech)
    if hasattr(mech, "support_counts"):  # pure protocols (seed 002): C_v = #reports supporting v
        ones = np.asarray(mech.support_counts(block.reports, block.counts), dtype=float)
        return ones, float(block.counts.sum()), p, q
    V = np.asarray(block.reports)
    k = mech.k
    if V.ndim != 2:
        raise LocalPrivError(f"{mech}: unary reports must be bit vectors (2-D), got shape {V.shape}")
    if V.shape[1] != k:
        if V.shape[1] == -(-k // 8):
            V = np.unpackbits(V.astype(np.uint8), axis=1)[:, :k]
        else:
            raise LocalPrivError(f"{mech}: reports have {V.shape[1]} columns, expected {k} bits")
    ones = block.counts @ V.astype(float)
    return ones, float(block.counts.sum()), p, q


def rap(obs: Observations, *, post: str = "n") -> Fit:
    """RAP: ``theta = (s - q) / (p - q)`` for one unary mechanism (seed 003 Eq. 17 with eps[n]=eps).

    ``s`` is the mean reported bit vector; post-processed by normalization or projection.
    """
    block = obs.single(f"rap-{post}")
    ones, n, p, q = unary_statistics(block)
    v = (ones / n - q) / (p - q)
    return _finish(_post(v, post), obs, f"rap-{post}", {"post": post}, {"raw_inverse": v})


def rap_m(obs: Observations, *, post: str = "n") -> Fit:
    """[RAP]M, seed 003 Eqs. 16-17: RAP with the user-averaged bit probabilities.

    ``theta = (s[n] - qbar) / (pbar - qbar)`` with ``s[n] = (1/n) sum_i V^i``,
    ``qbar = sum_A (n^A/n) q_A``, ``pbar = sum_A (n^A/n) p_A``. For RAPPOR (``p = 1 - q``,
    ``q = 1/(1+e^{eps/2})``) ``qbar = 1/(1+e^{eps[n]/2})`` defines ``eps[n]`` (Eq. 16) and this
    is Eq. 17: ``theta = (e^{eps[n]/2}+1)/(e^{eps[n]/2}-1) s[n] - 1/(e^{eps[n]/2}-1)``.
    """
    stats = [unary_statistics(b) for b in obs.blocks]
    n = sum(s[1] for s in stats)
    s = cast(np.ndarray, sum(s[0] for s in stats)) / n  # stats: one per block, never empty
    pbar = sum(st[1] * st[2] for st in stats) / n
    qbar = sum(st[1] * st[3] for st in stats) / n
    if not pbar > qbar:
        raise LocalPrivError("[RAP]M: the averaged mechanism carries no information (pbar <= qbar); use gibu")
    v = (s - qbar) / (pbar - qbar)
    return _finish(_post(v, post), obs, f"rap-{post}-m", {"post": post},
                   {"raw_inverse": v, "p_bar": pbar, "q_bar": qbar})


# --------------------------------------------------------------------------------------------
# Combining results: [e]R
# --------------------------------------------------------------------------------------------
COMBINABLE: dict[str, Callable[..., Fit]] = {
    "inv-n": lambda o: inv(o, post="n"),
    "inv-p": lambda o: inv(o, post="p"),
    "ibu": lambda o, **kw: ibu(o, **kw),
    "rap-n": lambda o: rap(o, post="n"),
    "rap-p": lambda o: rap(o, post="p"),
}


def combine_results(obs: Observations, estimator: str, **settings: Any) -> Fit:
    """``[e]R`` (seed 003 Eqs. 7-8): ``theta = sum_A (n^A/n) e(A, D^A)``.

    Each block is estimated alone by ``estimator`` (one of ``COMBINABLE``); ``settings`` go to
    IBU (``delta``, ``max_iter``, ...).
    """
    func = COMBINABLE.get(estimator)
    if func is None:
        raise LocalPrivError(f"[e]R: unknown estimator {estimator!r}; known: {', '.join(COMBINABLE)}")
    theta = np.zeros(obs.k)
    parts: list[np.ndarray] = []
    iters, conv = 0, True
    n = obs.n  # a sum over the blocks: once, not once per block
    for b in obs.blocks:  # one iteration per distinct mechanism
        sub = Observations([b], obs.domain)
        try:
            est = func(sub, **settings) if settings else func(sub)
        except LocalPrivError as exc:
            raise LocalPrivError(f"[{estimator}]R cannot use the block of {b.mechanism}: {exc}") from None
        theta += (b.n / n) * est.distribution
        parts.append(est.distribution)
        iters += est.iterations or 0
        conv = conv and (est.converged is not False)
    return _finish(theta, obs, f"{estimator}-r", {"estimator": estimator, **settings},
                   {"per_mechanism": np.asarray(parts)},
                   iterations=iters or None, converged=conv if estimator == "ibu" else None)


# --------------------------------------------------------------------------------------------
# Combining mechanisms: [INV]M and [IBU]M
# --------------------------------------------------------------------------------------------
#: [INV]M on an average mechanism without closed form solves with its dense ``k x m`` matrix (LU
#: solve and singular values: ``O(k^2 m)``), refused above this many inputs ``k``
INV_M_DENSE_MAX = 2048
#: [IBU]M keeps the average mechanism as one dense ``k x m`` block (pooled reports) up to this many
#: entries ``k m``; above, a weighted sum of the mechanisms' own blocks (``O(M (k + m))`` per product)
IBU_M_DENSE_MAX = 1 << 20


def _shared_outputs(obs: Observations, estimator: str) -> int:
    """The one finite output alphabet size all mechanisms share (else a one-line refusal)."""
    sizes = {b.mechanism.n_outputs for b in obs.blocks}
    if None in sizes or len(sizes) != 1:
        raise LocalPrivError(
            f"{estimator} needs all mechanisms to share one finite output alphabet, got output sizes "
            f"{sorted(str(s) for s in sizes)}; use gibu (GIBU applies to any mix of mechanisms)")
    return cast(int, sizes.pop())  # None was refused above


def pooled_counts(obs: Observations, estimator: str = "[e]M") -> np.ndarray:
    """``n q[n]``: the counts of all mechanisms over their shared output alphabet (seed 003 Eq. 10)."""
    counts = np.zeros(_shared_outputs(obs, estimator))
    for b in obs.blocks:
        counts += b.count_vector()
    return counts


def scaled_identity_average(obs: Observations) -> tuple[float, float] | None:
    """``(a, b)`` with ``A[n] = b 11^T + (a - b) I`` when every mechanism's channel is a scaled
    identity on the ``k`` inputs (k-RR, seed 001 Eq. 5: its likelihood block is a
    :class:`~localpriv.likelihood.structured.ScaledIdentityBlock` on ``k`` outputs indexed as the
    inputs); ``None`` otherwise. ``a = sum_A (n^A/n) a_A``, ``b = sum_A (n^A/n) b_A``; ``O(sum_A m_A)``."""
    a = b = 0.0
    n = obs.n  # a sum over the blocks: once, not once per block
    for blk in obs.blocks:
        mech = blk.mechanism
        if mech.n_outputs != obs.k:
            return None
        lb = blk.likelihood_block()
        if type(lb) is not ScaledIdentityBlock or lb.k != obs.k or not np.array_equal(
                lb.outputs, mech.output_index(blk.reports)):
            return None
        w = blk.n / n
        a += w * lb.a
        b += w * lb.b
    return a, b


def average_mechanism(obs: Observations, estimator: str = "[e]M") -> tuple[np.ndarray, np.ndarray]:
    """``A[n] = sum_A (n^A/n) A`` and the pooled counts ``n q[n]`` (seed 003 Eqs. 9-10).

    All mechanisms must share one finite output alphabet (same number of outputs, reports
    indexing it); otherwise a :class:`LocalPrivError` says that ``gibu`` applies. Dense: ``O(M k m)``
    for ``M`` mechanisms, refused above the dense-size cap.
    """
    m = _shared_outputs(obs, estimator)
    A = np.zeros((obs.k, m))
    counts = np.zeros(m)
    n = obs.n  # a sum over the blocks: once, not once per block
    for b in obs.blocks:
        A += (b.n / n) * b.mechanism.channel()
        counts += b.count_vector()
    return A, counts


def _singular(cond: float) -> LocalPrivError:
    return LocalPrivError(
        f"[INV]M: the average mechanism A[n] is singular (condition number {cond:.3g}); "
        "use gibu (the MLE, always defined) or ibu-m")


def inv_m(obs: Observations, *, post: str = "n") -> Fit:
    """[INV]M, seed 003 Eq. 10: ``theta = q[n] A[n]^{-1}``, then normalization or projection.

    When every channel is a scaled identity (k-RR), ``A[n] = b 11^T + d I`` (``d = a - b``) and
    ``v = (q - b sum(q) / (d + k b)) / d`` (Sherman-Morrison), its condition number
    ``max(|d|, |d + k b|) / min(|d|, |d + k b|)`` from the two eigenvalues: ``O(k + sum_A m_A)``.
    Otherwise the dense ``k x m`` average is solved (``O(M k m + k^2 m)``), for at most
    :data:`INV_M_DENSE_MAX` inputs. Raises when the output alphabets differ, ``k`` is over that
    limit without the closed form, or ``A[n]`` is singular (condition number ``>= 1e12``; use
    ``gibu`` or ``ibu-m``).
    """
    name = f"[INV]M (inv-{post}-m)"
    avg = scaled_identity_average(obs)
    if avg is not None:
        counts = pooled_counts(obs, name)
        q = counts / counts.sum()
        a, b = avg
        d, top = a - b, a - b + obs.k * b
        lo, hi = min(abs(d), abs(top)), max(abs(d), abs(top))
        cond = hi / lo if lo > 0 else np.inf
        if not cond < 1e12:
            raise _singular(cond)
        v = (q - b * (q.sum() / top)) / d
        return _finish(_post(v, post), obs, f"inv-{post}-m", {"post": post},
                       {"raw_inverse": v, "solver": "closed form (scaled identity)"})
    _shared_outputs(obs, name)
    if obs.k > INV_M_DENSE_MAX:
        raise LocalPrivError(
            f"{name}: the average mechanism has no closed form here and {obs.k} inputs exceed the limit of "
            f"{INV_M_DENSE_MAX} for its dense inversion (cost k^2 m); use gibu or ibu-m")
    A, counts = average_mechanism(obs, name)
    q = counts / counts.sum()
    k, m = A.shape
    cond = np.linalg.cond(A) if k == m else np.inf
    if k == m and cond < 1e12:
        v = np.linalg.solve(A.T, q)
    elif k != m and np.linalg.matrix_rank(A) == k:
        v, *_ = np.linalg.lstsq(A.T, q, rcond=None)
    else:
        raise _singular(cond)
    return _finish(_post(v, post), obs, f"inv-{post}-m", {"post": post}, {"raw_inverse": v, "solver": "dense"})


def average_block(obs: Observations, estimator: str) -> LikelihoodBlock:
    """``A[n]`` on the pooled reports seen (seed 003 section 5.3) as one likelihood block: a
    :class:`~localpriv.likelihood.structured.ScaledIdentityBlock` when every channel is one
    (``O(k + m)`` per product), a dense block up to :data:`IBU_M_DENSE_MAX` entries, else the
    weighted sum of the mechanisms' own blocks on those reports (mechanisms whose reports are their
    output indices; others are refused above the dense-size cap)."""
    counts = pooled_counts(obs, estimator)
    live = np.flatnonzero(counts > 0)
    avg = scaled_identity_average(obs)
    if avg is not None:
        return ScaledIdentityBlock(obs.k, avg[0], avg[1], live, counts[live])
    if obs.k * live.size > IBU_M_DENSE_MAX:
        members: list[LikelihoodBlock] = []
        for b in obs.blocks:
            try:
                indexed = np.array_equal(b.mechanism.output_index(live), live)
            except (LocalPrivError, ValueError, TypeError):
                indexed = False
            if not indexed:
                break
            members.append(b.mechanism.likelihood_block(live, counts[live]))
        else:
            return WeightedSumBlock(members, np.array([b.n for b in obs.blocks]) / obs.n, counts[live])
    A, _ = average_mechanism(obs, estimator)
    return DenseBlock(A[:, live], counts[live])


def ibu_m(obs: Observations, *, theta0: ArrayLike | None = None, delta: float = DEFAULT_DELTA,
          max_iter: int = DEFAULT_MAX_ITER, callback: Callback | None = None,
          accelerate: str | None = DEFAULT_ACCELERATE, stop: str = DEFAULT_STOP,
          progress: bool | EMProgress = False) -> Fit:
    """[IBU]M, seed 003 section 5.3: IBU (Eq. 13) on the average mechanism ``A[n]`` and ``q[n]``.

    Uses the one EM engine on a single block, with its settings and defaults (certified
    ``stop="gap"``, Newton finish, at most ``max_iter`` EM evaluations; see
    :func:`~localpriv.estimators.ibu.ibu`); maximizes the likelihood of the *wrong* hypothesis
    that every report came from ``A[n]`` (not the MLE unless all mechanisms agree), so
    ``gap_reached`` refers to that likelihood. The block (:func:`average_block`) is structured
    when the channels are k-RR (``O(k + m)`` per EM evaluation), dense up to
    :data:`IBU_M_DENSE_MAX` entries, a weighted sum of the mechanisms' blocks above.
    """
    block = average_block(obs, "[IBU]M (ibu-m)")
    res = run_em([block], obs.k, progress=progress, label="ibu-m", theta0=theta0,
                 delta=delta, max_iter=max_iter, callback=callback, accelerate=accelerate, stop=stop)
    return _finish(res.theta, obs, "ibu-m", em_settings(res, delta, max_iter, theta0),
                   {"loglik_average_mechanism": res.loglik, "gap": res.gap},
                   iterations=res.iterations, converged=res.converged)


# --------------------------------------------------------------------------------------------
_MIX = {"mixture"}
register_estimator("gibu", gibu, tags={"mle", "iterative", "mixture"},
                   settings=em_settings_declared() + (Setting("merge", "bool", True, "merge the blocks of small "
                                                              "finite-channel mechanisms into dense chunks"),),
                   summary="GIBU: the maximum-likelihood estimate from the reports of all mechanisms")
register_estimator("rap-n", lambda obs, **kw: rap(obs, post="n", **kw), settings=NO_SETTINGS,
                   tags={"single-mechanism", "unary"},
                   summary="RAP: (s - q) / (p - q) on the mean bit vector of one unary encoding, normalized")
register_estimator("rap-p", lambda obs, **kw: rap(obs, post="p", **kw), settings=NO_SETTINGS,
                   tags={"single-mechanism", "unary"},
                   summary="RAP: (s - q) / (p - q) on the mean bit vector of one unary encoding, projected")
_R_TAGS = {"inv-n": {"finite-channel"}, "inv-p": {"finite-channel"}, "ibu": {"iterative"},
           "rap-n": {"unary"}, "rap-p": {"unary"}}
for _e in COMBINABLE:
    register_estimator(f"{_e}-r", lambda obs, _e=_e, **kw: combine_results(obs, _e, **kw),
                       settings=em_settings_declared() if _e == "ibu" else NO_SETTINGS, tags=_MIX | _R_TAGS[_e],
                       summary=f"[{_e}]R: {_e} on each mechanism's reports alone, averaged with weights n^A / n")
register_estimator("inv-n-m", lambda obs, **kw: inv_m(obs, post="n", **kw), settings=NO_SETTINGS,
                   tags=_MIX | {"shared-alphabet", "finite-channel"},
                   summary="[INV]M: inversion of the average mechanism on the pooled counts, normalized")
register_estimator("inv-p-m", lambda obs, **kw: inv_m(obs, post="p", **kw), settings=NO_SETTINGS,
                   tags=_MIX | {"shared-alphabet", "finite-channel"},
                   summary="[INV]M: inversion of the average mechanism on the pooled counts, projected")
register_estimator("ibu-m", ibu_m, settings=em_settings_declared(keep_trace=False),
                   tags=_MIX | {"shared-alphabet", "iterative"},
                   summary="[IBU]M: IBU on the average mechanism and the pooled counts (not the MLE)")
register_estimator("rap-n-m", lambda obs, **kw: rap_m(obs, post="n", **kw), settings=NO_SETTINGS,
                   tags=_MIX | {"unary"},
                   summary="[RAP]M: RAP with the user-averaged bit probabilities, normalized")
register_estimator("rap-p-m", lambda obs, **kw: rap_m(obs, post="p", **kw), settings=NO_SETTINGS,
                   tags=_MIX | {"unary"},
                   summary="[RAP]M: RAP with the user-averaged bit probabilities, projected")
