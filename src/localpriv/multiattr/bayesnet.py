"""Private Bayesian networks (thesis, seed 004 chapter 5).

* :func:`mutual_information` -- Eq. 5.3 (base-2 logarithms, as in the chapter);
* :func:`greedy_bayes` -- Algorithm 2 (GreedyBayes of PrivBayes): start from one attribute,
  then repeatedly add the attribute-parent pair ``(A, Pi)``, ``Pi`` a ``min(k, placed)``-subset
  of the placed attributes, of largest ``I(A; Pi)``. It only sees the data through
  ``joint_of(attrs)`` (a probability table), so the same code runs on clean tables, on RRBA
  tables (the noisy variant of section 5.2.3) or on Laplace tables. ``penalty="bic"`` is our
  option (not the thesis's): parent sets of any size ``<= k``, scored by
  ``I(A;Pi) - log2(n) (|A|-1) |Pi| / (2n)``, so that only supported edges are added;
* :func:`fit_conditionals` and :func:`ancestral_sample` -- ``Pr'[A_i | Pi_i]`` from (noisy) joint
  tables and synthetic records drawn in the network's order (section 5.2.7);
* :func:`structure_metrics` -- TP/FP/FN/TN on link indicator vectors and accuracy,
  sensitivity, specificity, average recall (Table 5.2, with the conventional FP = link absent
  in the truth but present in the estimate; the thesis's table swaps FP and FN);
* :func:`table_l1` and :func:`table_js` -- table quality (sections 5.3.2-5.3.3).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import rel_entr

from localpriv.multiattr.tables import Records, cell_index, normalize_table
from localpriv.utils.validation import LocalPrivError, check_int, check_rng

__all__ = ["mutual_information", "greedy_bayes", "network_edges", "fit_conditionals",
           "ancestral_sample", "structure_metrics", "table_l1", "table_js", "CachedJoint",
           "conditional_mi", "prune_skeleton"]

#: a network as ``[(child, parents), ...]`` in the order the children were added
Network = list[tuple[Hashable, tuple[Hashable, ...]]]


def mutual_information(joint: npt.ArrayLike, n_child_axes: int = 1) -> float:
    """``I(A; Pi) = sum Pr[A,Pi] log2(Pr[A,Pi] / (Pr[A] Pr[Pi]))`` (Eq. 5.3).

    ``joint`` has the child's axis first and the parents' axes after it (any scale; it is
    normalized, negative cells clipped).
    """
    j = normalize_table(joint)
    a = j.reshape(j.shape[0], -1) if n_child_axes == 1 else j.reshape(int(np.prod(j.shape[:n_child_axes])), -1)
    pa = a.sum(axis=1, keepdims=True)
    pp = a.sum(axis=0, keepdims=True)
    prod = pa * pp
    live = a > 0
    return float((rel_entr(a[live], prod[live])).sum() / np.log(2))


class CachedJoint:
    """``joint_of(attrs)`` with a cache; ``source(attrs)`` returns a table over ``attrs``."""

    def __init__(self, source: Callable[[tuple[Any, ...]], np.ndarray]) -> None:
        self.source = source
        self.cache: dict[tuple[Any, ...], np.ndarray] = {}

    def __call__(self, attrs: Iterable[Any]) -> np.ndarray:
        attrs = tuple(attrs)
        key = tuple(sorted(attrs))
        if key not in self.cache:
            self.cache[key] = normalize_table(self.source(key))
        t = self.cache[key]
        return np.transpose(t, [key.index(a) for a in attrs])


def greedy_bayes(joint_of: Callable[[tuple[Any, ...]], np.ndarray], attrs: Sequence[Hashable], k: int, *,
                 first: Hashable | None = None, rng: np.random.Generator | int | None = None,
                 penalty: str | None = None, n: int | None = None,
                 cards: dict[Any, int] | None = None) -> Network:
    """Algorithm 2 (GreedyBayes). Returns ``[(A_1, ()), (A_2, Pi_2), ...]`` in the order added.

    Parameters
    ----------
    joint_of : callable
        ``joint_of(attrs)`` -> probability table with axes in the order of ``attrs``.
    attrs : sequence
        Attribute identifiers.
    k : int
        Degree (maximum number of parents).
    first : optional
        The starting attribute (line 2 picks it at random; then ``rng`` is needed).
    penalty : None or "bic"
        ``None``: the thesis's rule, exactly ``min(k, placed)`` parents; ``"bic"``: any size
        ``<= k``, MI minus ``log2(n) (|A|-1) prod|Pi| / (2n)`` (needs ``n`` and ``cards``).
    """
    attrs = list(attrs)
    k = check_int(k, "k", minimum=0)
    if first is None:
        first = attrs[int(check_rng(rng).integers(len(attrs)))]
    if first not in attrs:
        raise LocalPrivError(f"unknown first attribute {first!r}")
    if penalty not in (None, "bic"):
        raise LocalPrivError(f"penalty must be None or 'bic', got {penalty!r}")
    if penalty == "bic" and (n is None or cards is None):
        raise LocalPrivError("penalty='bic' needs n and cards")
    net: Network = [(first, ())]
    placed = [first]
    while len(placed) < len(attrs):
        best: tuple[Hashable, tuple[Hashable, ...]] | None = None
        best_score = -np.inf
        sizes = [min(k, len(placed))] if penalty is None else range(min(k, len(placed)) + 1)
        for a in attrs:
            if a in placed:
                continue
            for size in sizes:
                for pi in combinations(placed, size):
                    score = mutual_information(joint_of((a, *pi))) if pi else 0.0
                    if penalty == "bic":
                        assert n is not None and cards is not None  # checked above
                        score -= np.log2(n) * (cards[a] - 1) * int(np.prod([cards[q] for q in pi])) / (2 * n)
                    if score > best_score + 1e-12:
                        best, best_score = (a, tuple(pi)), score
        assert best is not None  # some attribute is not placed yet
        net.append(best)
        placed.append(best[0])
    return net


def network_edges(net: Iterable[tuple[Hashable, Iterable[Hashable]]]) -> set[tuple[Hashable, Hashable]]:
    """Directed edges ``(parent, child)`` of a network given as ``[(child, parents), ...]``."""
    return {(p, c) for c, ps in net for p in ps}


def fit_conditionals(net: Iterable[tuple[Hashable, tuple[Hashable, ...]]],
                     joint_of: Callable[[tuple[Any, ...]], np.ndarray]) -> dict[Hashable, np.ndarray]:
    """``Pr'[A | Pi]`` for every pair of ``net`` from joint tables: shape ``(*|Pi|, |A|)``;
    parent configurations without mass get the child's marginal (uniform if none)."""
    cpts: dict[Hashable, np.ndarray] = {}
    for a, pi in net:
        j = normalize_table(joint_of((*pi, a)))
        s = j.sum(axis=-1, keepdims=True)
        marg = normalize_table(joint_of((a,)))
        cpts[a] = np.where(s > 0, j / np.where(s > 0, s, 1), marg)
    return cpts


def ancestral_sample(net: Iterable[tuple[Hashable, tuple[Hashable, ...]]], cpts: Mapping[Hashable, np.ndarray],
                     attrs: Sequence[Hashable], n: int, rng: np.random.Generator | int,
                     levels: list[list[str]] | None = None) -> Records:
    """Synthetic records: each attribute drawn from ``Pr'[A | Pi]`` given its sampled parents, in
    the network's order (section 5.2.7), vectorized over records."""
    rng = check_rng(rng)
    n = check_int(n, "n", minimum=1)
    attrs = list(attrs)
    pos = {a: j for j, a in enumerate(attrs)}
    data = np.zeros((n, len(attrs)), dtype=np.int64)
    for a, pi in net:
        cpt = cpts[a]
        rows = cell_index(data[:, [pos[q] for q in pi]], cpt.shape[:-1]) if pi else np.zeros(n, np.int64)
        cdf = np.cumsum(cpt.reshape(-1, cpt.shape[-1]), axis=1)
        draw = (rng.random(n)[:, None] >= cdf[rows]).sum(axis=1)
        data[:, pos[a]] = np.minimum(draw, cpt.shape[-1] - 1)
    if levels is None:
        levels = [[str(i) for i in range(cpts[a].shape[-1])] for a in attrs]
    return Records(data, [str(a) for a in attrs], levels)


def structure_metrics(true_edges: Iterable[Iterable[Hashable]], learned_edges: Iterable[Iterable[Hashable]],
                      attrs: Sequence[Hashable], directed: bool = True) -> dict[str, Any]:
    """Link-indicator comparison (Table 5.2) over all ``d(d-1)`` directed links (or ``d(d-1)/2``
    undirected ones with ``directed=False``).

    TP = present in both, FP = absent in the truth but present in the estimate, FN = present in
    the truth but missing, TN = absent in both; sens = TP/(TP+FN), spec = TN/(TN+FP),
    avg_recall = (sens+spec)/2, acc = (TP+TN)/L.
    """
    links: list[Hashable]
    g: set[Hashable]
    h: set[Hashable]
    if directed:
        links = [(a, b) for a in attrs for b in attrs if a != b]
        g = {tuple(e) for e in true_edges}
        h = {tuple(e) for e in learned_edges}
    else:
        links = [frozenset(c) for c in combinations(attrs, 2)]
        g = {frozenset(e) for e in true_edges}
        h = {frozenset(e) for e in learned_edges}
    t = np.array([l in g for l in links])
    e = np.array([l in h for l in links])
    TP = int((t & e).sum())
    TN = int((~t & ~e).sum())
    FP = int((~t & e).sum())
    FN = int((t & ~e).sum())
    sens = TP / (TP + FN) if TP + FN else 1.0
    spec = TN / (TN + FP) if TN + FP else 1.0
    return {"TP": TP, "FP": FP, "FN": FN, "TN": TN, "L": len(links), "acc": (TP + TN) / len(links),
            "sens": sens, "spec": spec, "avg_recall": (sens + spec) / 2}


def table_l1(true_table: npt.ArrayLike, noisy_table: npt.ArrayLike, n: float) -> float:
    """``sum_w |n T'[w] - n T[w]|`` with both tables as probabilities (section 5.3.2)."""
    return float(n * np.abs(normalize_table(noisy_table) - normalize_table(true_table)).sum())


def table_js(true_table: npt.ArrayLike, noisy_table: npt.ArrayLike) -> float:
    """Jensen-Shannon divergence (Eq. 5.5, base 2) after clipping negatives and renormalizing."""
    p = normalize_table(true_table).ravel()
    q = normalize_table(noisy_table).ravel()
    # flush subnormal masses: (0 + 5e-324) / 2 underflows to 0 and would give an infinite term
    p = np.where(p < 1e-300, 0.0, p)
    q = np.where(q < 1e-300, 0.0, q)
    m = (p + q) / 2
    return float((0.5 * rel_entr(p, m).sum() + 0.5 * rel_entr(q, m).sum()) / np.log(2))


def _entropy(t: npt.ArrayLike) -> float:
    p = normalize_table(t).ravel()
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def conditional_mi(joint_of: Callable[[tuple[Any, ...]], np.ndarray], a: Hashable, b: Hashable,
                   given: Iterable[Hashable] = ()) -> float:
    """``I(a; b | S) = H(a,S) + H(b,S) - H(a,b,S) - H(S)`` in bits."""
    S = tuple(given)
    j = normalize_table(joint_of((a, b, *S)))
    h_abS = _entropy(j)
    h_aS = _entropy(j.sum(axis=1))
    h_bS = _entropy(j.sum(axis=0))
    h_S = _entropy(j.sum(axis=(0, 1))) if S else 0.0
    return max(h_aS + h_bS - h_abS - h_S, 0.0)


def prune_skeleton(net: Iterable[tuple[Hashable, Iterable[Hashable]]],
                   joint_of: Callable[[tuple[Any, ...]], np.ndarray], n: int, cards: Mapping[Any, int], *,
                   alpha: float = 1e-3, max_cond: int = 1) -> set[frozenset[Hashable]]:
    """Our addition to GreedyBayes: drop every learned link ``a - b`` for which some set ``S`` of
    at most ``max_cond`` other neighbours of ``a`` or ``b`` makes ``a ⊥ b | S`` acceptable by the
    G-test (``G^2 = 2 n ln2 I(a;b|S)`` against ``chi2_{(|a|-1)(|b|-1)prod|S|}`` at ``alpha``).

    Greedy parent selection adds "explaining-away" links when a child is placed before its
    parents (``lung - tub`` in Asia when ``either`` comes first); a conditional-independence
    pass in the style of the PC algorithm removes them. Conditioning sets are kept small
    (default 1) on purpose: Asia's ``either`` is a deterministic function of ``lung`` and
    ``tub``, so conditioning on both would make ``either`` independent of everything and
    delete true links (a faithfulness failure of that network).
    """
    from scipy.stats import chi2 as chi2_dist
    skel = {frozenset(e) for e in network_edges(net)}
    changed = True
    while changed:
        changed = False
        for e in sorted(skel, key=lambda s: sorted(map(str, s))):
            a, b = sorted(e, key=str)
            nb = sorted({x for f in skel if (a in f or b in f) for x in f} - {a, b}, key=str)
            for size in range(max_cond + 1):
                done = False
                for S in combinations(nb, size):
                    g2 = 2 * n * np.log(2) * conditional_mi(joint_of, a, b, S)
                    df = (cards[a] - 1) * (cards[b] - 1) * int(np.prod([cards[s] for s in S]))
                    if g2 < chi2_dist.ppf(1 - alpha, df):
                        skel.discard(e)
                        changed = done = True
                        break
                if done:
                    break
            if changed:
                break
    return skel
