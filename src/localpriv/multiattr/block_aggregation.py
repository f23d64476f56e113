"""Randomized Response Block Aggregation (RRBA), thesis (seed 004) chapter 4.

Pieces, each a plain function:

* :func:`pair_views` -- views of disjoint attribute pairs covering every pair exactly once
  (round-robin "circle" schedule; section 4.4, Example 4.4.2); :func:`combination_views` -- the
  same for k-attribute combinations (first-fit packing of all k-subsets into views of disjoint
  combinations, so every k-subset, hence every pair, is in some view);
* :func:`rrba_client` -- Algorithm 1's client, vectorized over users;
* :func:`aggregate_blocks` -- the block aggregator: per block ``B_k`` of ``s`` users,
  Eq. 4.3 ``T'[w] = (o_w/s - (1-p) T[w]) / p``, Eq. 4.4 MinMax when a cell is negative
  (followed by a renormalization so that the table can be sampled), Eq. 4.5 for counts; the
  fake table sent to the next block is floored (:func:`~localpriv.mechanisms.rrba.floor_table`)
  so that every report keeps a finite LDP level. Every user reports: when ``s`` does not divide
  the number of users the last block is shorter, and its Eq. 4.3 uses its own size;
* :func:`block_convergence` -- the stopping rule of section 4.5;
* :func:`pooled_estimate` -- all blocks' reports combined by maximum likelihood (GIBU on the
  per-block channels ``p I + (1-p) 1 T_k^T``, the one EM engine);
* :func:`consistent_tables` -- cross-view consistency (section 4.4.3) as the least-squares fit
  to the noisy tables under marginal agreement and non-negativity (Dykstra's projections);
* :func:`view_epsilon` -- the LDP level of a client that answers a whole view (composition).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import numpy.typing as npt
from scipy.stats import norm

from localpriv.estimators.em import em
from localpriv.mechanisms.matrix import MatrixMechanism
from localpriv.mechanisms.rrba import RRBAMechanism, floor_table, rrba_epsilon
from localpriv.multiattr.tables import marginalize
from localpriv.utils.validation import LocalPrivError, check_int, check_rng

__all__ = [
    "pair_views", "combination_views", "rrba_client", "BlockRun", "aggregate_blocks",
    "block_convergence", "pooled_estimate", "consistent_tables", "view_epsilon",
]


# ------------------------------------------------------------------------------------------
# Views
# ------------------------------------------------------------------------------------------
def pair_views(d: int) -> list[list[tuple[int, int]]]:
    """Views of disjoint attribute pairs, together covering each of the ``d(d-1)/2`` pairs once.

    Round-robin (circle) schedule: with ``d`` even there are ``d-1`` views of ``d/2`` pairs; with
    ``d`` odd a dummy attribute is added, giving ``d`` views of ``(d-1)/2`` pairs, each leaving
    one attribute out (as in the thesis's example for ``d = 5``).
    """
    d = check_int(d, "d", minimum=2)
    m = d + (d % 2)
    ring = list(range(m))
    views = []
    for _ in range(m - 1):
        view = []
        for i in range(m // 2):
            a, b = ring[i], ring[m - 1 - i]
            if a < d and b < d:
                view.append((min(a, b), max(a, b)))
        views.append(sorted(view))
        ring = [ring[0]] + [ring[-1]] + ring[1:-1]
    return views


def combination_views(d: int, k: int) -> list[list[tuple[int, ...]]]:
    """Views of disjoint k-attribute combinations covering every k-subset of ``d`` attributes.

    First-fit packing in lexicographic order: each combination goes into the first view it is
    disjoint from. For ``k = 2`` prefer :func:`pair_views` (fewer views).
    """
    d = check_int(d, "d", minimum=1)
    k = check_int(k, "k", minimum=1, maximum=d)
    views: list[list[tuple[int, ...]]] = []
    used: list[set] = []
    for c in combinations(range(d), k):
        for v, u in zip(views, used):
            if not u.intersection(c):
                v.append(c)
                u.update(c)
                break
        else:
            views.append([c])
            used.append(set(c))
    return views


def view_epsilon(p: float, tables: Sequence) -> float:
    """LDP level of a client answering every combination of a view (one report per table).

    The combinations of a view are disjoint, so the joint channel is the product of the
    per-table channels and its level is exactly the sum of theirs (sequential composition is
    tight here: the worst pair of records differs in every combination).
    """
    return float(sum(rrba_epsilon(p, np.asarray(T).ravel()) for T in tables))


# ------------------------------------------------------------------------------------------
# Client and block aggregator
# ------------------------------------------------------------------------------------------
def rrba_client(cells: npt.ArrayLike, p: float, T: npt.ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
    """Algorithm 1's client for every user at once: true cell w.p. ``p``, else a fake ~ ``T``."""
    T = np.asarray(T, dtype=float).ravel()
    return RRBAMechanism(p=p, table=T / T.sum()).sample(cells, rng)


def _eq43(o, s, T_prev, p):
    return (o / s - (1 - p) * T_prev) / p


def _minmax(t):
    """Eq. 4.4 followed by renormalization (the thesis's MinMax alone does not sum to 1)."""
    if np.all(t >= 0):
        return t / t.sum()
    lo, hi = t.min(), t.max()
    t = (t - lo) / (hi - lo) if hi > lo else np.full_like(t, 1.0)
    return t / t.sum()


@dataclass
class BlockRun:
    """Result of :func:`aggregate_blocks`.

    ``estimates[k]`` is block ``k``'s Eq. 4.3 estimate (after Eq. 4.4), ``sent[k]`` the fake
    table the users of block ``k`` sampled from, ``counts[k]`` their report counts (summing to
    ``sizes[k]``, the users of block ``k``: ``block_size`` for every block but possibly the last,
    which holds the remaining users); ``epsilons[k]`` the computed LDP level of one report in
    block ``k``.
    """

    p: float
    block_size: int
    estimates: list[np.ndarray] = field(default_factory=list)
    sent: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    epsilons: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)

    @property
    def n_users(self) -> int:
        """Users whose reports the run aggregated (all of them)."""
        return int(sum(self.sizes))

    @property
    def epsilon(self) -> float:
        """The worst level over blocks (each user reports once, in one block)."""
        return float(max(self.epsilons))

    def final(self) -> np.ndarray:
        """The last block's estimate (a short last block's is the noisiest: see ``sizes``)."""
        return self.estimates[-1]


def aggregate_blocks(cells: npt.ArrayLike, n_cells: int, p: float, block_size: int, rng: np.random.Generator | int, *,
                     floor: float = 1e-3, init=None) -> BlockRun:
    """Run RRBA's second version on users whose true cells are ``cells``.

    Users are taken in the given order in blocks of ``block_size``; every user reports once: when
    ``block_size`` does not divide the number of users, the last block holds the remaining
    ``n mod block_size`` users (and with fewer users than ``block_size`` there is one block of
    all of them). Block ``k``'s users sample fakes from ``sent[k] = floor(T_{k-1})`` (uniform for
    the first block, Eq. 4.1); the aggregator then computes Eq. 4.3 with ``n`` = the block's own
    number of users and Eq. 4.4 when needed. Only a run without any user is an error.
    """
    cells = np.asarray(cells, dtype=np.int64).ravel()
    n_cells = check_int(n_cells, "n_cells", minimum=1)
    s = check_int(block_size, "block_size", minimum=1)
    rng = check_rng(rng)
    if not 0 < p < 1:
        raise LocalPrivError(f"p must be in (0, 1), got {p}")
    if cells.size == 0:
        raise LocalPrivError("no users to aggregate: RRBA needs at least one user's report")
    T = np.full(n_cells, 1.0 / n_cells) if init is None else floor_table(init)
    run = BlockRun(p=float(p), block_size=s)
    for lo in range(0, cells.size, s):
        users = cells[lo:lo + s]  # the last block may be short: its users count all the same
        sent = floor_table(T, floor)
        mech = RRBAMechanism(p=p, table=sent)
        reports = mech.sample(users, rng)
        o = np.bincount(reports, minlength=n_cells).astype(float)
        T = _minmax(_eq43(o, users.size, sent, p))
        run.sent.append(sent)
        run.counts.append(o)
        run.estimates.append(T)
        run.epsilons.append(rrba_epsilon(p, sent))
        run.sizes.append(int(users.size))
    return run


def block_convergence(run: BlockRun, alpha: float = 0.05) -> tuple[np.ndarray, int, bool]:
    """Section 4.5's rule: stop at the first block ``k`` with
    ``|T^{B_k}[w] - T^{B_{k-1}}[w]| < delta*`` for every cell, where ``delta*`` is the width
    ``2 z_{1-alpha/2} sqrt(v (1-v) / s_k)`` of the Bernoulli confidence interval at
    ``v = T^{B_k}[w]`` and the block's size ``s_k``; return the average of the two blocks'
    estimates, ``k`` and ``True``, or the last two blocks' average and ``False`` when the rule never
    holds. The average weighs each block by its users: ``(T^{B_k} + T^{B_{k-1}})/2`` for blocks of
    equal size (the thesis's), while a short last block counts for its share.
    """
    z = norm.ppf(1 - alpha / 2)
    est = run.estimates
    sizes = run.sizes if len(run.sizes) == len(est) else [run.block_size] * len(est)

    def average(k):
        return (sizes[k] * est[k] + sizes[k - 1] * est[k - 1]) / (sizes[k] + sizes[k - 1])

    for k in range(1, len(est)):
        v = est[k]
        width = 2 * z * np.sqrt(np.clip(v * (1 - v), 0, None) / sizes[k])
        if np.all(np.abs(est[k] - est[k - 1]) < np.maximum(width, 1e-12)):
            return average(k), k, True
    last = average(len(est) - 1) if len(est) > 1 else est[-1]
    return last, len(est) - 1, False


def pooled_estimate(run: BlockRun, delta: float = 1e-8, max_iter: int = 20000, accelerate: str = "none",
                    stop: str = "loglik") -> np.ndarray:
    """Maximum-likelihood table from the reports of *all* blocks (GIBU, seed 003 Alg. 1).

    Block ``k``'s reports come from the channel ``p I + (1-p) 1 sent[k]^T``; the one EM engine
    combines them. Unlike the per-block Eq. 4.3, its error shrinks as blocks accumulate. Plain EM
    stopped on ``|L(t) - L(t-1)| < delta`` by default (pinned: the thesis reproductions' settings,
    not the engine's certified defaults; pass ``accelerate="newton", stop="gap"`` for those).
    """
    blocks = []
    for sent, o in zip(run.sent, run.counts):
        live = np.flatnonzero(o)
        mech = MatrixMechanism(rows=RRBAMechanism(p=run.p, table=sent).channel())
        blocks.append(mech.likelihood_block(live, o[live]))
    return em(blocks, run.sent[0].size, delta=delta, max_iter=max_iter, accelerate=accelerate, stop=stop).theta


# ------------------------------------------------------------------------------------------
# Consistency between views
# ------------------------------------------------------------------------------------------
def _marg_matrix(attrs, shape, keep, cards):
    """Matrix mapping a flattened table over ``attrs`` to its flattened marginal on ``keep``."""
    size = int(np.prod(shape))
    eye = np.eye(size).reshape((size,) + tuple(shape))
    out = np.stack([marginalize(eye[i], attrs, keep).ravel() for i in range(size)], axis=1)
    return out


def consistent_tables(tables: dict, cards: dict, *, total: float = 1.0, max_iter: int = 5000,
                      tol: float = 1e-10) -> dict:
    """Make noisy tables agree on their shared marginals (seed 004 section 4.4.3).

    Solves ``min sum_C ||T_hat_C - T_C||_2^2`` subject to ``T_hat_C >= 0``, every table summing to
    ``total``, and, for every two tables sharing attributes ``S``, equal marginals on ``S``.

    The thesis prints ``min sum_w T[w]^2`` subject to the marginals equalling the noisy ones:
    that objective ignores the noisy cells themselves and returns the minimum-norm (flattest)
    table with those marginals; the fit above keeps each table as close as possible to what was
    observed, which is what a consistency step should do. Solved exactly by Dykstra's
    alternating projections between the affine constraint set (closed-form projection) and
    the non-negative orthant.

    Parameters
    ----------
    tables : dict
        ``{(attr, attr, ...): array}`` noisy tables, axes in the order of the key.
    cards : dict
        ``{attr: number of categories}``.
    """
    keys = list(tables)
    shapes = [tuple(cards[a] for a in key) for key in keys]
    for key, sh in zip(keys, shapes):
        if np.shape(tables[key]) != sh:
            raise LocalPrivError(f"table {key} has shape {np.shape(tables[key])}, expected {sh}")
    sizes = [int(np.prod(sh)) for sh in shapes]
    offs = np.concatenate([[0], np.cumsum(sizes)])
    N = int(offs[-1])
    rows, rhs = [], []
    for i in range(len(keys)):  # each table sums to total
        r = np.zeros(N)
        r[offs[i]:offs[i + 1]] = 1
        rows.append(r)
        rhs.append(total)
    for i, j in combinations(range(len(keys)), 2):
        common = [a for a in keys[i] if a in keys[j]]
        if not common:
            continue
        Mi = _marg_matrix(keys[i], shapes[i], common, cards)
        Mj = _marg_matrix(keys[j], shapes[j], common, cards)
        A = np.zeros((Mi.shape[0], N))
        A[:, offs[i]:offs[i + 1]] = Mi
        A[:, offs[j]:offs[j + 1]] -= Mj
        rows.extend(A)
        rhs.extend(np.zeros(Mi.shape[0]))
    A = np.asarray(rows)
    b = np.asarray(rhs, dtype=float)
    pinv = np.linalg.pinv(A)

    def proj_affine(x):
        return x - pinv @ (A @ x - b)

    t = np.concatenate([np.asarray(tables[k], dtype=float).ravel() for k in keys])
    x, pa, pb = t.copy(), np.zeros(N), np.zeros(N)
    for _ in range(max_iter):
        y = proj_affine(x + pa)
        pa = x + pa - y
        x_new = np.maximum(y + pb, 0)
        pb = y + pb - x_new
        if np.abs(x_new - x).max() < tol and np.abs(A @ x_new - b).max() < 1e-8:
            x = x_new
            break
        x = x_new
    return {k: x[offs[i]:offs[i + 1]].reshape(shapes[i]) for i, k in enumerate(keys)}
