"""Release of k-way marginals by user groups with consistency post-processing (CALM: Zhang, Wang,
Li, Honorio, Backes, He, Chen and Zhang, CCS 2018).

Users are partitioned uniformly at random into one group per requested marginal (a set ``A`` of
attributes); a user reports the cell of her record on ``A`` through optimized unary encoding (OUE:
``p = 1/2``, ``q = 1/(e^eps + 1)``), whose per-cell variance ``q(1-q)/(n_A (p-q)^2)`` does not depend
on the number of cells. Reports are simulated in aggregate (a cell's support count is
``Binomial(c, p) + Binomial(n_A - c, q)``, the distribution of the sum of the users' bits).

Consistency (CALM section 4.3, after Qardaji et al.'s PriView): for every attribute set ``S``
shared by two or more marginals, in increasing size, the marginals' projections on ``S`` are
replaced by their inverse-variance weighted average ``T``; each marginal ``M`` is moved by adding
``(T(s) - M_S(s)) / (|M| / |S|)`` to each of its cells over ``s``. Rounds of this step and of the
projection onto the simplex (non-negativity) alternate; the last step is the consistency step, so
marginals agree exactly on shared attributes (a cell may stay slightly negative).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import numpy.typing as npt

from localpriv.utils.errors import LocalPrivError
from localpriv.utils.simplex import project_simplex

__all__ = ["MAX_MARGINALS", "MAX_MARGINAL_CELLS", "release_marginals", "make_consistent", "all_marginals"]

#: the most marginals released at once
MAX_MARGINALS = 256
#: the most cells of one marginal
MAX_MARGINAL_CELLS = 1_000_000
#: rounds of consistency / non-negativity
ROUNDS = 3

Marginals = dict[tuple[int, ...], np.ndarray]


def all_marginals(d: int, k: int) -> list[tuple[int, ...]]:
    """Every set of ``k`` of ``d`` attributes (positions), in lexicographic order."""
    if not 1 <= k <= d:
        raise LocalPrivError(f"k = {k} is outside 1..{d}")
    sets = list(itertools.combinations(range(d), k))
    if len(sets) > MAX_MARGINALS:
        raise LocalPrivError(f"{len(sets)} marginals is above the limit of {MAX_MARGINALS}")
    return sets


def _project(m: np.ndarray, attrs: tuple[int, ...], sub: tuple[int, ...]) -> np.ndarray:
    """The marginal ``m`` over ``attrs`` summed down to ``sub`` (a subset)."""
    drop = tuple(i for i, a in enumerate(attrs) if a not in sub)
    return m.sum(axis=drop) if drop else m


def make_consistent(margs: Marginals, variances: dict[tuple[int, ...], float],
                    rounds: int = ROUNDS) -> Marginals:
    """CALM's consistency post-processing (module docstring): marginals (arrays, one axis per
    attribute in the order of their key) that agree on every shared attribute set."""
    out = {a: np.asarray(m, dtype=float).copy() for a, m in margs.items()}
    keys = list(out)
    shared: set[tuple[int, ...]] = set()
    for a, b in itertools.combinations(keys, 2):
        common = tuple(sorted(set(a) & set(b)))
        for r in range(1, len(common) + 1):
            shared.update(itertools.combinations(common, r))
    order = sorted(shared, key=lambda s: (len(s), s))

    def step() -> None:
        for s in order:
            holders = [a for a in keys if set(s) <= set(a)]
            if len(holders) < 2:
                continue
            # projecting |M|/|S| cells multiplies a cell's variance by that many
            w = np.array([1.0 / (variances[a] * out[a].size / math.prod(out[a].shape[a.index(j)] for j in s))
                          for a in holders])
            projs = [_project(out[a], a, s) for a in holders]
            target = sum(wi * p for wi, p in zip(w, projs)) / w.sum()
            for a, p in zip(holders, projs):
                per = out[a].size / p.size
                shape = [out[a].shape[i] if j in s else 1 for i, j in enumerate(a)]
                out[a] += ((target - p) / per).reshape(shape)

    for _ in range(rounds):
        step()
        for a in keys:
            out[a] = project_simplex(out[a].ravel()).reshape(out[a].shape)
    step()
    return out


def release_marginals(records: npt.ArrayLike, shape: tuple[int, ...], sets: list[tuple[int, ...]], eps: float,
                      rng: np.random.Generator, consistent: bool = True) -> Marginals:
    """Simulate the group protocol on coded records (``n x d`` integers, column ``j`` in
    ``0..shape[j]-1``): one group of users per attribute set in ``sets``, each reporting its cell
    by OUE at ``eps``; estimates with :func:`make_consistent` (``consistent=False``: raw)."""
    x = np.asarray(records)
    if x.ndim != 2 or x.shape[1] != len(shape) or x.shape[0] == 0 or not np.issubdtype(x.dtype, np.integer):
        raise LocalPrivError(f"records must be an n x {len(shape)} integer array")
    if not sets or len(sets) > MAX_MARGINALS:
        raise LocalPrivError(f"give 1 to {MAX_MARGINALS} attribute sets")
    if not (math.isfinite(eps) and eps > 0):
        raise LocalPrivError(f"eps {eps} must be positive and finite")
    if np.any(x < 0) or np.any(x >= np.asarray(shape)):
        raise LocalPrivError("records: a code is outside its attribute's domain")
    p, q = 0.5, 1.0 / (math.exp(eps) + 1.0)
    group = rng.integers(0, len(sets), size=x.shape[0])
    raw: Marginals = {}
    var: dict[tuple[int, ...], float] = {}
    for g, attrs in enumerate(sets):  # over groups, not users
        sub = tuple(shape[j] for j in attrs)
        if math.prod(sub) > MAX_MARGINAL_CELLS:
            raise LocalPrivError(f"marginal {attrs}: {math.prod(sub):,} cells is above the limit of "
                                 f"{MAX_MARGINAL_CELLS:,}")
        mine = x[group == g][:, list(attrs)]
        n_g = max(mine.shape[0], 1)
        c = np.bincount(np.ravel_multi_index(mine.T, sub), minlength=math.prod(sub)) if mine.size \
            else np.zeros(math.prod(sub), dtype=np.int64)
        support = rng.binomial(c, p) + rng.binomial(mine.shape[0] - c, q)
        raw[attrs] = ((support / n_g - q) / (p - q)).reshape(sub)
        var[attrs] = q * (1 - q) / (n_g * (p - q) ** 2)
    return make_consistent(raw, var) if consistent else raw
