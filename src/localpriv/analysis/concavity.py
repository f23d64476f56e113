"""Strict concavity of ``L`` (seed 001 Theorem 4.1) and identifiability (Theorem 6.1), decided
by numerically sound rank tests.

* Theorem 4.1 (iii): ``L`` is strictly concave on the simplex iff no non-zero ``w`` with
  ``sum_x w_x = 0`` has ``w G = 0``. Equivalently the ``k x (m+1)`` matrix ``[G | 1]`` has rank
  ``k`` (``w`` in its left null space is exactly such a vector).
* Theorem 6.1 (iii): a mechanism identifies the distribution iff its matrix ``M`` has ``k``
  linearly independent columns, i.e. rank ``k``.

Numerics. Ranks are read from singular values. Columns are first scaled to unit Euclidean norm
(this does not change the rank but removes the arbitrary scale of probabilities such as
``e^{-eps |z-x|}``), and a singular value counts as zero when it is below

    tol = max(k, m) * machine_eps * sigma_max      (the LAPACK/NumPy convention),

unless the caller passes ``tol``. The result carries the smallest counted singular value and the
largest discarded one, so the margin of the decision is visible: when the smallest counted
singular value is below ``1e3 * tol`` the matrix is nearly singular and the verdict is flagged as
``fragile`` (a small perturbation of the entries could change it).

The MLE-uniqueness counter-example of section 5.1 (Eq. 12 with reports ``{2,2,2,2}``) has a unique
MLE ``(0, 1, 0)`` while ``L`` is not strictly concave: see :func:`section51_counterexample`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

from localpriv.analysis.likelihood import EQ12, eq12_mechanism, loglik
from localpriv.mechanisms import Mechanism, parse
from localpriv.utils.validation import LocalPrivError, check_rng

__all__ = [
    "RankTest",
    "rank_test",
    "strictly_concave",
    "identifiable",
    "concavity_witness",
    "section51_counterexample",
]

#: A verdict is fragile when the smallest singular value counted as non-zero is below
#: ``FRAGILE_MARGIN * tol``.
FRAGILE_MARGIN = 1e3


@dataclass
class RankTest:
    """Outcome of a rank decision by SVD.

    Attributes
    ----------
    rank : int
        Numerical rank (singular values above ``tol``).
    required : int
        The rank the property needs (``k``).
    holds : bool
        ``rank >= required``.
    tol : float
        Threshold used on the singular values of the column-normalized matrix.
    smallest_kept : float
        Smallest singular value counted as non-zero (``nan`` if none).
    largest_dropped : float
        Largest singular value counted as zero (``0`` if none).
    fragile : bool
        The smallest kept singular value is within a factor ``1e3`` of ``tol``.
    method : str
        How the columns were obtained (``"channel"``, ``"sampled columns"``, ...).
    """

    rank: int
    required: int
    holds: bool
    tol: float
    smallest_kept: float
    largest_dropped: float
    fragile: bool
    method: str = "svd"

    def as_dict(self) -> dict:
        return asdict(self)


def rank_test(A: npt.ArrayLike, required: int | None = None, tol: float | None = None, method: str = "svd") -> RankTest:
    """Numerical rank of ``A`` (``k x m``) after scaling its columns to unit norm.

    ``tol`` defaults to ``max(k, m) * eps_machine * sigma_max`` on the scaled matrix. Zero
    columns are dropped. For ``m > 4 k`` the SVD is taken of the ``k x k`` factor ``R^T`` from a QR
    decomposition of ``A^T`` (same singular values, less work).
    """
    M = np.asarray(A, dtype=float)
    if M.ndim != 2:
        raise LocalPrivError(f"rank test needs a 2-D matrix, got shape {M.shape}")
    if not np.all(np.isfinite(M)):
        raise LocalPrivError("rank test: the matrix has NaN or infinite entries")
    k, m = M.shape
    need = k if required is None else int(required)
    norms = np.linalg.norm(M, axis=0)
    M = M[:, norms > 0] / norms[norms > 0]
    if M.shape[1] == 0:
        return RankTest(0, need, need <= 0, 0.0, float("nan"), 0.0, False, method)
    if M.shape[1] > 4 * k:
        # R^T is k x k, with the same singular values as A
        M = np.linalg.qr(M.T, mode="r").T  # type: ignore[attr-defined]  # stub: mode="r" returns an array
    s = np.linalg.svd(M, compute_uv=False)
    t = float(max(M.shape) * np.finfo(float).eps * s[0]) if tol is None else float(tol)
    kept, dropped = s[s > t], s[s <= t]
    rank = int(kept.size)
    smallest = float(kept.min()) if kept.size else float("nan")
    largest_dropped = float(dropped.max()) if dropped.size else 0.0
    fragile = bool(kept.size and smallest < FRAGILE_MARGIN * t)
    return RankTest(rank, need, rank >= need, t, smallest, largest_dropped, fragile, method)


def strictly_concave(G, tol: float | None = None) -> RankTest:
    """Is ``L`` strictly concave for observations with probability matrix ``G`` (``k x m``)?

    Seed 001 Theorem 4.1 (iii): iff every non-zero ``w`` with ``sum(w) = 0`` has ``w G != 0``,
    i.e. iff ``rank([G | 1]) = k``. Only the distinct columns of ``G`` matter, so ``G`` may be
    given per distinct report (counts are irrelevant as long as they are positive).
    """
    G = np.asarray(G, dtype=float)
    aug = np.column_stack([G, np.ones(G.shape[0])])
    return rank_test(aug, required=G.shape[0], tol=tol, method="[G | 1]")


def concavity_witness(G, tol: float | None = None) -> np.ndarray | None:
    """A direction ``w`` (``sum w = 0``, ``w G = 0``, ``||w|| = 1``) along which ``L`` is flat, or
    ``None`` when ``L`` is strictly concave (Theorem 4.1 (iii))."""
    G = np.asarray(G, dtype=float)
    aug = np.column_stack([G, np.ones(G.shape[0])])
    norms = np.linalg.norm(aug, axis=0)
    aug = aug[:, norms > 0] / norms[norms > 0]
    u, s, _ = np.linalg.svd(aug, full_matrices=True)
    t = float(max(aug.shape) * np.finfo(float).eps * s[0]) if tol is None else float(tol)
    r = int((s > t).sum())
    if r >= G.shape[0]:
        return None
    return u[:, r]  # left singular vector of a zero singular value: w @ aug ~ 0


def identifiable(mech, domain=None, tol: float | None = None, rng: np.random.Generator | int = 0,
                 max_dense: int = 4_000_000) -> RankTest:
    """Does the mechanism identify the distribution (seed 001 Theorem 6.1 (iii))?

    With an enumerable channel of at most ``max_dense`` entries: rank of ``M`` against ``k``.
    Otherwise (unbounded outputs, or ``2^k`` Rappor vectors) a *certificate* is sought: the
    likelihood columns of a finite set of reports -- integer reports ``-k..2k-1`` for
    integer-valued mechanisms, else ``20 k`` reports sampled from every input with ``rng``. If
    they already have rank ``k`` the mechanism is identifiable (a subset of ``k`` independent
    columns is enough); if not, the verdict is "not shown" (``holds=False`` with ``method``
    saying the test was on a subset). When no certificate fits in ``max_dense`` entries, the
    mechanism's exact rank from its structure
    (:meth:`~localpriv.mechanisms.Mechanism.rank_from_structure`, ``method`` "structure (...)"),
    else a one-line :class:`LocalPrivError`.
    """
    mech = parse(mech, domain)
    k = mech.k
    n_out = mech.n_outputs if _safe_n_outputs(mech) else None
    if n_out is not None and k * n_out <= max_dense:
        return rank_test(mech.channel(), required=k, tol=tol, method="channel")
    # a finite subset of columns
    cols = None
    if getattr(mech, "report_kind", "int64") == "int64" and n_out is None and 3 * k * k <= max_dense:
        try:
            cols = mech.likelihood(np.arange(-k, 2 * k))
            method = "columns of reports -k..2k-1"
        except Exception:  # noqa: BLE001 - fall back to sampling
            cols = None
    if cols is None:
        if k * 20 * k > max_dense:
            structure = mech.rank_from_structure()
            if structure is not None:  # no certificate fits: the exact answer from the structure
                rank, why = structure
                return RankTest(int(rank), k, int(rank) >= k, 0.0, float("nan"), 0.0, False, f"structure ({why})")
            raise LocalPrivError(f"an SVD certificate from {20 * k} sampled reports would need up to {k} x {20 * k} "
                                 f"likelihood entries, above the limit {max_dense}")
        g = check_rng(rng)
        x = np.repeat(np.arange(k), 20)
        rep = mech.sample(x, g)
        uniq = np.unique(rep, axis=0) if np.ndim(rep) > 1 else np.unique(rep)
        cols = mech.likelihood_block(uniq, np.ones(uniq.shape[0])).dense()
        method = f"columns of {uniq.shape[0]} sampled reports"
    res = rank_test(cols, required=k, tol=tol, method=method)
    return res


def _safe_n_outputs(mech: Mechanism) -> bool:
    try:
        return mech.n_outputs is not None
    except Exception:  # noqa: BLE001 - a channel too big to build
        return False


def section51_counterexample() -> dict:
    """Seed 001 section 5.1: a unique MLE without strict concavity (mechanism Eq. 12).

    With reports ``{2,2,2,2}`` the MLE ``(0,1,0)`` is unique (``L(theta) = 4 log(0.1 + 0.8
    theta_2)`` is maximal only at ``theta_2 = 1``) although ``L`` is constant along
    ``(1,0,0) -> (0,0,1)``; adding reports 1 and 3 makes the maximizers a whole segment.
    Returns the rank tests and the numbers behind these statements.
    """

    mech = eq12_mechanism()
    a = np.array([1, 1, 1, 1])  # report "2" is index 1
    b = np.array([1, 1, 1, 1, 0, 2])
    seg = (np.linspace(0, 1, 11)[:, None] * np.array([1.0, 0, 0])
           + (1 - np.linspace(0, 1, 11))[:, None] * np.array([0, 0, 1.0]))
    out = {
        "concave_a": strictly_concave(EQ12[:, np.unique(a)]).holds,
        "concave_b": strictly_concave(EQ12[:, np.unique(b)]).holds,
        "identifiable": identifiable(mech).holds,
        "L_a_at_e2": loglik(mech, a, [0, 1, 0]),
        "L_a_on_segment": np.asarray(loglik(mech, a, seg)).tolist(),
        "L_b_on_segment": np.asarray(loglik(mech, b, seg)).tolist(),
    }
    return out
