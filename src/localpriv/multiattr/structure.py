"""Score-based Bayesian-network structure learning (thesis, seed 004 sections 5.3.1, 6.3).

A network over ``d`` variables is a boolean adjacency matrix ``A`` (``A[i, j]`` = arc ``i -> j``).
Every search here maximizes a **decomposable** score, ``score(A) = sum_j s(j, Pa_A(j))``
(Example 6.3.1), so a move changes only the local terms of the nodes whose parents change.

Scores (higher is better, the convention of R/bnlearn that the thesis follows in 6.3.1):

* :class:`DiscreteBIC` -- ``s(j, P) = sum_{x, p} N_{p x} ln(N_{p x} / N_p) - (r_j - 1) q_P ln(n) / 2``
  (``r_j`` categories of ``j``, ``q_P`` parent configurations): ``ln L - k ln(n) / 2``, i.e. the
  thesis's ``BIC = k ln n - 2 ln L`` times ``-1/2`` (Schwarz 1978);
* :class:`GaussianBIC` -- linear-Gaussian nodes (chapter 6's data are continuous and its causal
  effects are those of a Gaussian network, 6.5.1): ``s(j, P) = -n/2 (ln(2 pi sigma^2) + 1) -
  (|P| + 2) ln(n) / 2`` with ``sigma^2`` the maximum-likelihood residual variance of the
  regression of ``j`` on ``P`` (intercept, ``|P|`` slopes and the variance are the parameters).

Both also offer a conditional-independence test (``ci_pvalue``: G-test for discrete data, Fisher's
z of the partial correlation for Gaussian data), used by the restrict step of RM.

Searches:

* :func:`hill_climbing` -- section 6.3.4 / Fig. 6.2 (Russell & Norvig [80]): from a start DAG
  (empty by default), apply the single arc addition, deletion or reversal that increases the
  score most while keeping the graph acyclic; stop when no move increases it;
* :func:`restrictive_maximization` -- the hybrid "restrict, then maximize" scheme of
  section 6.3.3 (RSMAX2, Friedman, Nachman and Pe'er's sparse candidate [115]): restrict the
  candidate arcs to a skeleton found by conditional-independence tests (PC-style, stable
  version: a link ``i - j`` is removed when ``i ⊥ j | S`` is accepted for some ``S`` of current
  neighbours), then hill-climb using only arcs of that skeleton. The thesis does not say which
  restrict algorithm it ran (bnlearn's ``rsmax2`` defaults to HITON-PC); ours is PC's skeleton;
* :func:`brute_force` -- Algorithm 5 literally: every subset of the ``p = d(d-1)/2`` undirected
  arcs (``k1`` of them varied, the other ``p - k1`` fixed by ``FixedArcsPresence``, one processor
  per fixed pattern), every orientation of the present arcs, acyclic ones scored, the maximum
  kept. That is ``3^p`` configurations (``3^21 ~ 1e10`` at the thesis's 7 variables), feasible
  here up to 5 variables;
* :func:`exact_search` -- the same global maximum of the same decomposable score by dynamic
  programming over variable subsets (Silander & Myllymaki 2006: best parent set of every node
  within every candidate set, then the best sink of every subset): ``d 2^(d-1)`` local scores,
  milliseconds at ``d = 7``. This is what the chapter-6 reproduction runs as "BF"; the tests check
  that it returns :func:`brute_force`'s score on 3-4 variables.

BIC is score-equivalent: Markov-equivalent DAGs (same skeleton and v-structures) have equal
scores, so a maximizer's arc directions inside its equivalence class are arbitrary
(:func:`markov_equivalent`, :func:`v_structures`).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations

import numpy as np
import numpy.typing as npt
from scipy.special import chdtrc, ndtr

from localpriv.multiattr.tables import Records
from localpriv.utils.validation import LocalPrivError, check_int

__all__ = ["DiscreteBIC", "GaussianBIC", "network_score", "hill_climbing", "pc_skeleton",
           "restrictive_maximization", "brute_force", "exact_search", "arcs_of", "adjacency",
           "parents_of", "is_dag", "v_structures", "markov_equivalent"]


# ------------------------------------------------------------------------------------------
# graphs
# ------------------------------------------------------------------------------------------
def adjacency(arcs: Iterable[tuple[int, int]], d: int) -> np.ndarray:
    """Boolean ``d x d`` adjacency matrix from arcs ``(i, j)`` meaning ``i -> j``."""
    A = np.zeros((d, d), dtype=bool)
    for i, j in arcs:
        A[int(i), int(j)] = True
    return A


def arcs_of(A: npt.ArrayLike) -> set[tuple[int, int]]:
    """Arcs ``(i, j)`` of an adjacency matrix."""
    return {(int(i), int(j)) for i, j in zip(*np.nonzero(np.asarray(A)))}


def parents_of(A: npt.ArrayLike, j: int) -> tuple[int, ...]:
    """Parents of node ``j``: the rows with an arc into column ``j``."""
    return tuple(int(i) for i in np.flatnonzero(np.asarray(A)[:, j]))


def _closure(A: np.ndarray) -> np.ndarray:
    """``R[i, j]``: a directed path of length >= 1 from ``i`` to ``j``."""
    R = A.copy()
    while True:
        nxt = R | ((R.astype(np.int64) @ A.astype(np.int64)) > 0)
        if np.array_equal(nxt, R):
            return R
        R = nxt


def is_dag(A: npt.ArrayLike) -> bool:
    """No directed cycle in the adjacency matrix ``A``."""
    A = np.asarray(A, dtype=bool)
    return not np.any(np.diag(_closure(A)))


def v_structures(A: npt.ArrayLike) -> set[tuple[int, int, int]]:
    """Unshielded colliders ``(a, c, b)``, ``a < b``: ``a -> c <- b`` with ``a``, ``b`` not adjacent."""
    A = np.asarray(A, dtype=bool)
    adj = A | A.T
    out: set[tuple[int, int, int]] = set()
    for c in range(A.shape[0]):
        for a, b in combinations(np.flatnonzero(A[:, c]), 2):
            if not adj[a, b]:
                out.add((int(a), c, int(b)))
    return out


def markov_equivalent(A: npt.ArrayLike, B: npt.ArrayLike) -> bool:
    """Same skeleton and same v-structures (Verma & Pearl [114, 118])."""
    A, B = np.asarray(A, dtype=bool), np.asarray(B, dtype=bool)
    return np.array_equal(A | A.T, B | B.T) and v_structures(A) == v_structures(B)


# ------------------------------------------------------------------------------------------
# scores
# ------------------------------------------------------------------------------------------
class _Score:
    d: int
    n: int
    names: list[str]

    def __init__(self) -> None:
        self._cache: dict[tuple[int, tuple[int, ...]], float] = {}
        self.evaluations = 0

    def _local(self, j: int, parents: tuple[int, ...]) -> float:
        raise NotImplementedError  # each score defines its local term

    def ci_pvalue(self, i: int, j: int, S: Sequence[int] = ()) -> float:
        """p-value of the conditional-independence test of ``i ⊥ j | S``."""
        raise NotImplementedError  # each score defines its test

    def __call__(self, j: int, parents: Iterable[int]) -> float:
        key = (int(j), tuple(sorted(int(p) for p in parents)))
        v = self._cache.get(key)
        if v is None:
            if key[0] in key[1]:
                raise LocalPrivError(f"node {j} cannot be its own parent")
            v = self._local(*key)
            self._cache[key] = v
            self.evaluations += 1
        return v


class DiscreteBIC(_Score):
    """Discrete BIC on categorical :class:`~localpriv.multiattr.tables.Records` (see module)."""

    def __init__(self, records: Records) -> None:
        super().__init__()
        self.records = records
        self.d, self.n, self.names = records.d, records.n, list(records.names)
        self.cards = records.cards

    def _local(self, j: int, parents: tuple[int, ...]) -> float:
        t = self.records.table([*parents, j]).reshape(-1, self.cards[j])
        npar = t.sum(axis=1, keepdims=True)
        live = t > 0
        ll = float((t[live] * np.log((t / np.where(npar > 0, npar, 1))[live])).sum())
        k = (self.cards[j] - 1) * t.shape[0]
        return ll - k * np.log(self.n) / 2

    def ci_pvalue(self, i: int, j: int, S: Sequence[int] = ()) -> float:
        """G-test of ``i ⊥ j | S``: ``G^2 = 2 sum N ln(N N_S / (N_iS N_jS))``, dof
        ``(r_i - 1)(r_j - 1) prod r_S``."""
        S = list(S)
        t = self.records.table([i, j, *S]).reshape(self.cards[i], self.cards[j], -1)
        ni, nj, ns = t.sum(axis=1, keepdims=True), t.sum(axis=0, keepdims=True), t.sum(axis=(0, 1), keepdims=True)
        exp = ni * nj / np.where(ns > 0, ns, 1)
        live = t > 0
        g2 = 2 * float((t[live] * np.log(t[live] / exp[live])).sum())
        df = (self.cards[i] - 1) * (self.cards[j] - 1) * t.shape[2]
        return float(chdtrc(df, g2))


class GaussianBIC(_Score):
    """Linear-Gaussian BIC on an ``n x d`` real array (see module); works from the covariance."""

    def __init__(self, data: npt.ArrayLike, names: Sequence[str] | None = None) -> None:
        super().__init__()
        X = np.asarray(data, dtype=float)
        if X.ndim != 2 or X.shape[0] < 3:
            raise LocalPrivError(f"Gaussian BIC needs an n x d array with n >= 3, got shape {X.shape}")
        if not np.all(np.isfinite(X)):
            raise LocalPrivError("Gaussian BIC: data contain NaN or infinite values")
        self.n, self.d = X.shape
        self.names = list(names) if names is not None else [f"X{i}" for i in range(self.d)]
        if len(self.names) != self.d:
            raise LocalPrivError(f"{len(self.names)} names for {self.d} columns")
        Xc = X - X.mean(axis=0)
        self.cov = Xc.T @ Xc / self.n  # maximum-likelihood covariance
        if np.any(np.diag(self.cov) <= 0):
            raise LocalPrivError("Gaussian BIC: a column is constant")
        # the correlation matrix: scores and tests are scale-free, and raw columns of very
        # different scales (Adult: capital gain vs sex) make the covariance ill-conditioned
        # enough that round-off decides between near-equal moves
        sd = np.sqrt(np.diag(self.cov))
        self.corr = self.cov / np.outer(sd, sd)
        np.fill_diagonal(self.corr, 1.0)

    def residual_variance(self, j: int, parents: Iterable[int]) -> float:
        """``sigma^2 = S_jj (1 - r_jP R_PP^{-1} r_Pj)`` (ML variance of the regression residual;
        ``R`` the correlation matrix, equal to ``S_jj - S_jP S_PP^{-1} S_Pj``)."""
        P = list(parents)
        if not P:
            return float(self.cov[j, j])
        R_PP = self.corr[np.ix_(P, P)]
        r_Pj = self.corr[P, j]
        beta = np.linalg.lstsq(R_PP, r_Pj, rcond=None)[0]
        return float(self.cov[j, j] * max(1.0 - r_Pj @ beta, 1e-300))

    def _local(self, j: int, parents: tuple[int, ...]) -> float:
        s2 = self.residual_variance(j, parents)
        return -self.n / 2 * (np.log(2 * np.pi * s2) + 1) - (len(parents) + 2) * np.log(self.n) / 2

    def ci_pvalue(self, i: int, j: int, S: Sequence[int] = ()) -> float:
        """Fisher's z test of the partial correlation ``r_{ij.S}`` (from the inverse of the
        covariance of ``{i, j} + S``): ``z = atanh(r) sqrt(n - |S| - 3)``, two-sided normal."""
        idx = [i, j, *S]
        C = self.corr[np.ix_(idx, idx)]
        try:
            P = np.linalg.inv(C)
        except np.linalg.LinAlgError:
            P = np.linalg.pinv(C)
        r = -P[0, 1] / np.sqrt(P[0, 0] * P[1, 1])
        r = float(np.clip(r, -1 + 1e-15, 1 - 1e-15))
        z = np.arctanh(r) * np.sqrt(max(self.n - len(S) - 3, 1))
        return float(2 * ndtr(-abs(z)))


def network_score(score: _Score, A: npt.ArrayLike) -> float:
    """``sum_j s(j, Pa(j))`` (decomposability, Example 6.3.1)."""
    A = np.asarray(A, dtype=bool)
    return float(sum(score(j, parents_of(A, j)) for j in range(A.shape[0])))


# ------------------------------------------------------------------------------------------
# hill climbing and restrictive maximization
# ------------------------------------------------------------------------------------------
def hill_climbing(score: _Score, *, start: npt.ArrayLike | None = None, allowed: npt.ArrayLike | None = None,
                  max_parents: int | None = None, max_iter: int = 10_000, tol: float | None = None,
                  order: npt.ArrayLike | None = None) -> np.ndarray:
    """Hill climbing (section 6.3.4, Fig. 6.2): greedy best-improvement over arc additions,
    deletions and reversals that keep the graph acyclic, until no move raises the score by more
    than ``tol``.

    ``allowed`` (``d x d`` booleans) restricts the arcs that may be added (the restrict phase
    of RM); ``max_parents`` caps in-degrees. Moves whose gains are within ``tol`` of the best
    are ties (score-equivalent moves, e.g. reversing a covered arc, gain exactly the same in exact
    arithmetic; their computed gains differ by round-off): the first of them in the order
    (i, j) row-major over ``order`` (a permutation of the nodes; default the column order),
    additions/deletions before reversals, is taken, so the result does not depend on the CPU or
    BLAS. The order decides the directions inside an equivalence class: scoring against a known
    network, pass a random permutation (the column order of a data set is often topological,
    which would favour the true directions). ``tol`` defaults to ``1e-9 n`` (the scores are sums
    over the ``n`` records; real differences between non-equivalent networks are of the order of
    the ``ln(n) / 2`` penalty). Returns the adjacency matrix.
    """
    d = score.d
    A = np.zeros((d, d), dtype=bool) if start is None else np.array(start, dtype=bool)
    if A.shape != (d, d) or not is_dag(A):
        raise LocalPrivError("hill climbing: the start must be a d x d acyclic adjacency matrix")
    tie = 1e-9 * max(int(score.n), 1) if tol is None else float(tol)
    seq = _node_order(order, d)
    allow = np.ones((d, d), dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    np.fill_diagonal(allow, False)
    cap = d - 1 if max_parents is None else check_int(max_parents, "max_parents", minimum=0)
    local = [score(j, parents_of(A, j)) for j in range(d)]
    for _ in range(max_iter):
        R = _closure(A)
        moves: list[tuple[float, tuple[str, int, int]]] = []  # in the tie-breaking order
        for i in seq:
            for j in seq:
                if i == j:
                    continue
                Pj = parents_of(A, j)
                if A[i, j]:
                    drop = score(j, tuple(p for p in Pj if p != i)) - local[j]
                    moves.append((drop, ("delete", i, j)))
                    # reversal: acyclic unless another path i ~> j exists
                    if allow[j, i] and len(parents_of(A, i)) < cap:
                        other = np.flatnonzero(A[i] & (np.arange(d) != j))
                        if not np.any(R[other, j]):
                            moves.append((drop + score(i, (*parents_of(A, i), j)) - local[i], ("reverse", i, j)))
                elif not A[j, i] and allow[i, j] and len(Pj) < cap and not R[j, i]:
                    moves.append((score(j, (*Pj, i)) - local[j], ("add", i, j)))
        best = max((g for g, _ in moves), default=-np.inf)
        if best <= tie:
            return A
        kind, i, j = next(m for g, m in moves if g >= best - tie)
        if kind == "add":
            A[i, j] = True
        elif kind == "delete":
            A[i, j] = False
        else:
            A[i, j], A[j, i] = False, True
        local[i] = score(i, parents_of(A, i))
        local[j] = score(j, parents_of(A, j))
    return A


def _node_order(order: npt.ArrayLike | None, d: int) -> list[int]:
    if order is None:
        return list(range(d))
    seq = [int(v) for v in np.asarray(order).ravel()]
    if sorted(seq) != list(range(d)):
        raise LocalPrivError(f"order must be a permutation of the {d} nodes, got {seq}")
    return seq


def pc_skeleton(score: _Score, *, alpha: float = 0.05, max_cond: int | None = None) -> np.ndarray:
    """PC-stable skeleton: start complete; for conditioning size ``l = 0, 1, ...`` remove ``i - j``
    when ``ci_pvalue(i, j, S) > alpha`` for some ``S`` of size ``l`` within the neighbours of
    ``i`` (or of ``j``) frozen at the start of the level. Returns a symmetric boolean matrix."""
    d = score.d
    adj = ~np.eye(d, dtype=bool)
    top = d - 2 if max_cond is None else min(int(max_cond), d - 2)
    for size in range(top + 1):
        frozen = adj.copy()
        for i, j in combinations(range(d), 2):
            if not adj[i, j]:
                continue
            for a, b in ((i, j), (j, i)):
                nb = [int(k) for k in np.flatnonzero(frozen[a]) if k != b]
                if len(nb) < size:
                    continue
                if any(score.ci_pvalue(i, j, S) > alpha for S in combinations(nb, size)):
                    adj[i, j] = adj[j, i] = False
                    break
    return adj


def restrictive_maximization(score: _Score, *, alpha: float = 0.05, max_cond: int | None = None,
                             max_parents: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """RM (section 6.3.3): restrict to :func:`pc_skeleton`, maximize with :func:`hill_climbing`
    over arcs of that skeleton only. Returns ``(adjacency, skeleton)``."""
    skel = pc_skeleton(score, alpha=alpha, max_cond=max_cond)
    return hill_climbing(score, allowed=skel, max_parents=max_parents), skel


# ------------------------------------------------------------------------------------------
# brute force (Algorithm 5) and the exact optimum by dynamic programming
# ------------------------------------------------------------------------------------------
def brute_force(score: _Score, *, k1: int | None = None, fixed: Sequence[int] | None = None,
                max_configs: int = 2_000_000) -> tuple[np.ndarray | None, float]:
    """Algorithm 5 as printed. ``AllArcs`` = the ``p = d(d-1)/2`` pairs ``(a, b)``, ``a < b``, in
    lexicographic order (reference direction ``a -> b``); the first ``k1`` are varied over all
    ``2^k1`` presence patterns, the last ``p - k1`` are fixed by ``fixed``
    (``FixedArcsPresence``). For each pattern every orientation of the ``k2`` present arcs
    (bit 1 = reversed) is built and, when acyclic, scored; the strictly best is kept.

    With ``k1 = None`` (default) all arcs vary and nothing is fixed: one processor, the whole
    space. Two details of the printed pseudo-code are not copied: with one present arc
    (``k2 = 1``) line 23 skips the orientation loop, so only the reference direction would be
    scored (harmless for score-equivalent BIC; we score both), and lines 38-40 compare a score
    left over from a cyclic configuration (we skip cyclic ones). Returns ``(best adjacency,
    best score)``; ``(None, -inf)`` if the processor's subspace has no DAG.
    """
    d = score.d
    all_arcs = list(combinations(range(d), 2))
    p = len(all_arcs)
    k1 = p if k1 is None else check_int(k1, "k1", minimum=0, maximum=p)
    fixed = list(fixed) if fixed is not None else []
    if len(fixed) != p - k1 or any(f not in (0, 1) for f in fixed):
        raise LocalPrivError(f"brute force: FixedArcsPresence must be {p - k1} zeros/ones, got {fixed}")
    configs = 3 ** k1 * 2 ** sum(fixed)  # presence patterns times orientations
    if configs > max_configs:  # refuses the 3^21 of seven variables
        raise LocalPrivError(f"brute force over {d} variables: about {3 ** p:.3g} configurations; use exact_search")
    best_par, best = None, -np.inf
    full = (1 << d) - 1
    local: dict[tuple[int, int], float] = {}
    for base1 in range(2 ** k1):
        structure = [(base1 >> (k1 - 1 - i)) & 1 for i in range(k1)] + fixed
        present = [all_arcs[i] for i in range(p) if structure[i]]
        k2 = len(present)
        for base2 in range(2 ** k2):
            par = [0] * d  # parent bit masks
            for i, (a, b) in enumerate(present):
                if (base2 >> (k2 - 1 - i)) & 1:
                    par[a] |= 1 << b
                else:
                    par[b] |= 1 << a
            placed, grew = 0, True  # acyclic iff repeatedly placing nodes whose parents are placed
            while grew and placed != full:  # places them all
                grew = False
                for v in range(d):
                    if not placed >> v & 1 and par[v] & ~placed == 0:
                        placed |= 1 << v
                        grew = True
            if placed != full:
                continue
            sc = 0.0
            for v in range(d):
                key = (v, par[v])
                if key not in local:
                    local[key] = score(v, tuple(u for u in range(d) if par[v] >> u & 1))
                sc += local[key]
            if sc > best:
                best_par, best = list(par), sc
    if best_par is None:
        return None, float(best)
    A = np.zeros((d, d), dtype=bool)
    for v in range(d):
        for u in range(d):
            A[u, v] = bool(best_par[v] >> u & 1)
    return A, float(best)


def exact_search(score: _Score, *, max_parents: int | None = None) -> tuple[np.ndarray, float]:
    """The DAG of maximum decomposable score (the optimum Algorithm 5 searches for), by dynamic
    programming over subsets (Silander & Myllymaki, UAI 2006):

    1. ``bps(v, C) = max_{P ⊆ C} s(v, P)`` for every node ``v`` and candidate set ``C`` of the
       other nodes (subsets in increasing order, ``bps(v, C) = max(s(v, C), max_c bps(v, C - c))``);
    2. ``best(W) = max_{v in W} best(W - v) + bps(v, W - v)`` (``v`` the sink of ``W``);
    3. unwind the sinks of the full set to build the network.

    Exact for any ``d``; cost ``d 2^(d-1)`` local scores and ``d 2^d`` table steps (``d <= 20``).
    Sinks whose totals are within ``1e-9 n`` of the best tie (Markov-equivalent networks score
    the same up to round-off); the lowest-index one is taken, so the network returned does not
    depend on the CPU or BLAS.
    """
    d = check_int(score.d, "number of variables", minimum=1, maximum=20)
    cap = d - 1 if max_parents is None else int(max_parents)
    full = (1 << d) - 1

    def members(mask: int) -> list[int]:
        return [i for i in range(d) if mask >> i & 1]

    bps_val = np.full((d, 1 << d), -np.inf)
    bps_set = np.zeros((d, 1 << d), dtype=np.int64)
    masks = sorted(range(1 << d), key=lambda m: bin(m).count("1"))
    for v in range(d):
        bit = 1 << v
        for C in masks:
            if C & bit:
                continue
            mem = members(C)
            if len(mem) <= cap:
                bps_val[v, C], bps_set[v, C] = score(v, tuple(mem)), C
            for c in mem:
                sub = C & ~(1 << c)
                if bps_val[v, sub] > bps_val[v, C]:
                    bps_val[v, C], bps_set[v, C] = bps_val[v, sub], bps_set[v, sub]
    best = np.full(1 << d, -np.inf)
    sink = np.zeros(1 << d, dtype=np.int64)
    best[0] = 0.0
    tie = 1e-9 * max(int(score.n), 1)  # as in hill_climbing: equivalent DAGs tie up to round-off
    for W in masks[1:]:
        mem = members(W)
        vals = [best[W & ~(1 << v)] + bps_val[v, W & ~(1 << v)] for v in mem]
        top = max(vals)
        pick = next(i for i, val in enumerate(vals) if val >= top - tie)  # the lowest-index sink
        best[W], sink[W] = vals[pick], mem[pick]
    A = np.zeros((d, d), dtype=bool)
    W = full
    while W:
        v = int(sink[W])
        W &= ~(1 << v)
        for p in members(int(bps_set[v, W])):
            A[p, v] = True
    return A, float(best[full])
