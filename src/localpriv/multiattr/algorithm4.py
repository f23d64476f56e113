"""Algorithm 4 of the thesis as written: the second version of the randomization protocol with AP
pairs and views (seed 004 section 5.2.5), its row channel, its computed LDP level and two
estimators of the noisy AP-pair joints ``Pr'(A_i, Pi_i)`` (section 5.2.6).

The protocol (one user, true row ``x``)
---------------------------------------
Input: the AP pairs ``Omega = (A_1, ..., A_m)`` in order (each ``A_t`` the attribute set of one
``(A_i, Pi_i)`` pair), the views ``V = (V_1, ...)`` with their contingency tables ``T_{V_j}`` (the
aggregator's current knowledge). ``S`` (the attributes already emitted) starts empty. For each
``A_t`` in order, the first coin gives heads with probability ``p``:

* heads (lines 3-7): emit the true values ``x[A_t \\ S]``; ``S <- S u A_t``;
* tails (lines 8-20): draw one ``q ~ U[0, 1]``; ``V'`` is a set of views whose schemas cover
  ``A_t``; for each ``V_j`` in ``V'`` in turn: ``A_j = Schema(V_j) n A_t``, ``A_js = A_j n S``
  (``S`` grows inside the loop, line 19), restrict ``T_{V_j}`` to the cells agreeing with the
  emitted ``r[A_js]``, normalize, and emit the values ``w`` of ``A_j \\ S`` at ``q`` by inverse
  CDF (Monte Carlo, Eq. 4.2); ``S <- S u A_j``.

Choices the text leaves open (ours, stated):

* ``V'`` is the first view whose schema contains ``A_t`` when there is one (with the views equal
  to the AP-pair tables, as in Example 5.2.1, that is the pair's own view); otherwise a greedy
  cover (the view adding most uncovered attributes of ``A_t``, ties by order). No cover is an
  error;
* "the attribute values ``w``" are those of ``E_j = A_j \\ S``: the restricted, normalized table is
  marginalized on ``E_j`` (C order of the cells) before the inverse CDF at ``q``. The restriction
  is on ``A_js`` only, as line 13 says (a view's attributes outside ``A_t`` are not conditioned
  on). A slice without mass gives the uniform distribution;
* the same ``q`` serves every view of the step (one draw, line 9), so the fake values of two views
  are not independent: their joint probability is the length of the intersection of their
  inverse-CDF intervals.

``S`` after step ``t`` is ``A_1 u ... u A_t`` whatever the coins (both branches add ``A_t``), so
each attribute is emitted exactly once, at the first pair containing it. Write ``N_t = A_t \\
S_{t-1}`` (emitted at step ``t``) and ``O_t = A_t n S_{t-1}`` (emitted before).

Row channel
-----------
Given the emitted ``r[O_t]``, the step emits ``x[N_t]`` with probability ``p`` and a fake ``w``
with probability ``(1-p) F_t(w | r)``, where ``F_t`` depends on ``r`` only through the values
already emitted (``r[O_t]`` and those of the step's earlier views)::

    F_t(r) = | n_j [C_j(e_j - 1 | c_j), C_j(e_j | c_j)) |    (length of the q-interval)

(``C_j`` the CDF of view part ``j``'s normalized slice at the condition ``c_j = r[A_js]``,
``e_j = r[E_j]``; one view: ``F_t`` is the slice's probability of ``e_j``). The coins and ``q``
are independent across steps, hence::

    Pr(r | x) = prod_t ( p [r[N_t] = x[N_t]] + (1 - p) F_t(r) )               (A4.1)

Privacy level (computed)
------------------------
Each factor of (A4.1) depends on ``x`` only through ``x[N_t]``, and the ``N_t`` are disjoint, so
for a fixed output ``r`` the largest ratio over pairs of inputs factorizes; with ``|dom N_t| > 1``
the factor's largest value is at ``x[N_t] = r[N_t]`` and its smallest at any other value::

    eps = max_r sum_{t: |dom N_t| > 1} ln(1 + p / ((1 - p) F_t(r)))            (A4.2)

(``inf`` when some reachable ``F_t(r) = 0``). :func:`algorithm4_epsilon` evaluates (A4.2) over all
rows; :func:`row_channel` builds (A4.1) so that a test can take the brute-force maximum ratio.
(A4.2) is a sum over the AP pairs of RRBA levels ``ln(1 + p / ((1-p) T[w]))`` (section 4.4.2,
:func:`~localpriv.mechanisms.rrba.rrba_epsilon`) evaluated at the fake probabilities conditioned on
what the same row already emitted, maximized jointly over the row: not the thesis's "eps-DP since
similar to 4.4.2" (Theorem 4.4.1's ``ln(1/(1-p))``), which drops both the ``1/F`` factor and the
composition over the pairs. With one view per pair and a single pair, (A4.2) is exactly
:func:`~localpriv.mechanisms.rrba.rrba_epsilon` of the view's table. When a step needs two views,
the shared ``q`` gives some combinations of fake values probability 0 (disjoint inverse-CDF
intervals) while a heads user emits them when true: the level is then infinite.

Estimators (section 5.2.6)
--------------------------
* :func:`estimate_pairs_eq43` -- the thesis's route, a per-pair Eq. 4.3. By (A4.1) the emitted
  values of pair ``t`` satisfy, exactly,
  ``Pr(r[O_t] = a, r[N_t] = b) = p Pr(r[O_t] = a, x[N_t] = b) + (1-p) Pr(r[O_t] = a) Fbar_t(b | a)``
  with ``Fbar_t(b | a)`` = ``F_t`` at ``r[O_t] = a, r[N_t] = b`` (the step emits exactly
  ``N_t``; ``F_t`` depends on nothing else): the step's fake distribution of ``N_t`` given the
  emitted ``O_t`` (one view: the normalized slice). ``Pr(r[O_t] = a)`` is
  observed (its empirical frequency ``o_O(a)/n``), so the collector inverts
  ``(o(a, b)/n - (1-p) (o_O(a)/n) Fbar_t(b | a)) / p``, then clips negatives and renormalizes
  (Eq. 4.4 as in :func:`~localpriv.multiattr.block_aggregation.aggregate_blocks`). This is unbiased for the
  joint of the *emitted* ``O_t`` with the *true* ``N_t``; using it as ``Pr'(A_t)`` is the
  approximation ``r[O_t] = x[O_t]``. It is exact for the first pair (``O_1`` empty) and biased
  for the later ones: ``r[O_t]`` is true only when earlier coins gave heads, so the dependence
  between ``O_t`` and ``N_t`` is attenuated;
* :func:`estimate_joint_mle` -- exact: the histogram of whole emitted rows over the product domain
  and the channel (A4.1) give the maximum-likelihood joint ``Pr'(x)`` (the one EM engine, GIBU),
  whose marginals are the ``Pr'(A_t)``. No approximation beyond EM's certified stopping rule
  (likelihood within ``delta`` per user of the maximum); needs the
  product domain to be enumerable (Survey: 144 rows).
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from localpriv.estimators.em import DEFAULT_DELTA, DEFAULT_MAX_ITER, em
from localpriv.mechanisms.matrix import MatrixMechanism
from localpriv.multiattr.tables import cell_index, marginalize
from localpriv.utils.validation import LocalPrivError, check_int, check_rng

__all__ = ["ViewPart", "Step", "Algorithm4", "plan_algorithm4", "algorithm4_rows", "fake_probability",
           "row_channel", "algorithm4_epsilon", "estimate_pairs_eq43", "estimate_joint_mle", "MAX_DOMAIN"]

#: largest product domain the enumerations (channel, level, joint MLE) accept
MAX_DOMAIN = 1 << 14


@dataclass
class ViewPart:
    """One view of ``V'`` at one tails step: emit ``emit`` given the emitted ``cond``.

    ``cdf[c, :]`` is the CDF over ``emit``'s cells (C order) of the view's table restricted to
    ``cond``'s cell ``c`` and normalized; ``prob`` the same as probabilities.
    """

    view: int
    cond: tuple
    emit: tuple
    prob: np.ndarray
    cdf: np.ndarray


@dataclass
class Step:
    """One AP pair of ``Omega``: ``pair`` its attributes, ``new`` = ``N_t``, ``old`` = ``O_t``."""

    pair: tuple
    new: tuple
    old: tuple
    parts: list[ViewPart] = field(default_factory=list)


@dataclass
class Algorithm4:
    """The client's fixed plan: the steps, the attributes' cardinalities and ``p``."""

    steps: list[Step]
    cards: dict
    p: float

    @property
    def attrs(self) -> list:
        """Emitted attributes in order of emission."""
        return [a for s in self.steps for a in s.new]

    def shape(self, attrs: Iterable[Hashable]) -> tuple[int, ...]:
        """The table shape over ``attrs``: their numbers of categories."""
        return tuple(int(self.cards[a]) for a in attrs)


def _cover(A: Sequence[Hashable], views: Sequence[Sequence[Hashable]]) -> list[int]:
    for j, v in enumerate(views):
        if set(A) <= set(v):
            return [j]
    left, chosen = set(A), []
    while left:
        best = max(range(len(views)), key=lambda j: (len(left & set(views[j])), -j))
        if not left & set(views[best]):
            raise LocalPrivError(f"the views do not cover the AP pair {tuple(A)}: {sorted(map(str, left))} missing")
        chosen.append(best)
        left -= set(views[best])
    return chosen


def plan_algorithm4(pairs: Sequence, views: Sequence, tables: Sequence, cards: dict, p: float) -> Algorithm4:
    """Fix the client's plan: ``S`` at each step, ``V'`` and every view part's conditional CDFs.

    Parameters
    ----------
    pairs : sequence of attribute tuples
        ``Omega``, in the order the client processes it.
    views : sequence of attribute tuples
        The views' schemas.
    tables : sequence of arrays
        ``T_{V_j}`` with axes in the order of ``views[j]`` (any scale; negatives clipped).
    cards : dict
        ``{attr: number of categories}``.
    p : float
        Probability of heads (true values), ``0 <= p < 1``.
    """
    if not 0 <= p < 1:
        raise LocalPrivError(f"p must be in [0, 1), got {p}")
    if len(views) != len(tables):
        raise LocalPrivError(f"{len(views)} views but {len(tables)} tables")
    views = [tuple(v) for v in views]
    tabs = []
    for v, t in zip(views, tables):
        t = np.clip(np.asarray(t, dtype=float), 0, None)
        if t.shape != tuple(int(cards[a]) for a in v):
            raise LocalPrivError(f"the table of view {v} has shape {t.shape}, expected {tuple(cards[a] for a in v)}")
        tabs.append(t)
    S: list = []
    steps = []
    for A in pairs:
        A = tuple(A)
        if len(set(A)) != len(A) or not A:
            raise LocalPrivError(f"an AP pair must be a non-empty set of distinct attributes, got {A}")
        step = Step(pair=A, new=tuple(a for a in A if a not in S), old=tuple(a for a in A if a in S))
        cur = list(S)
        for j in _cover(A, views):
            Aj = [a for a in views[j] if a in A]
            cond = tuple(a for a in Aj if a in cur)
            emit = tuple(a for a in Aj if a not in cur)
            if emit:
                m = marginalize(tabs[j], views[j], [*cond, *emit])
                m = m.reshape(int(np.prod([cards[a] for a in cond])) if cond else 1, -1)
                s = m.sum(axis=1, keepdims=True)
                prob = np.where(s > 0, m / np.where(s > 0, s, 1), 1.0 / m.shape[1])
                cdf = np.cumsum(prob, axis=1)
                cdf[:, -1] = 1.0
                step.parts.append(ViewPart(j, cond, emit, prob, cdf))
            cur.extend(emit)
        S.extend(step.new)
        steps.append(step)
    return Algorithm4(steps, {a: int(cards[a]) for a in S}, float(p))


def _emit_cells(part: ViewPart, r: np.ndarray, pos: dict[Hashable, int], plan: Algorithm4) -> np.ndarray:
    c = (cell_index(r[:, [pos[a] for a in part.cond]], plan.shape(part.cond)) if part.cond
         else np.zeros(len(r), np.int64))
    return c


def algorithm4_rows(x: np.ndarray, plan: Algorithm4, rng: np.random.Generator | int) -> np.ndarray:
    """Every user's emitted row at once. ``x`` is ``n x |attrs|`` with columns in the order of
    ``plan.attrs``; the output has the same layout. Loops over the steps and views only."""
    rng = check_rng(rng)
    x = np.asarray(x, dtype=np.int64)
    attrs = plan.attrs
    if x.ndim != 2 or x.shape[1] != len(attrs):
        raise LocalPrivError(f"x must be n x {len(attrs)} (columns {attrs}), got shape {x.shape}")
    pos = {a: i for i, a in enumerate(attrs)}
    n: int = x.shape[0]
    r = np.full_like(x, -1)
    for step in plan.steps:
        heads = rng.random(n) < plan.p
        q = rng.random(n)  # line 9 (drawn for everyone; used by the tails users)
        cols = [pos[a] for a in step.new]
        r[np.ix_(heads, cols)] = x[np.ix_(heads, cols)]  # type: ignore[arg-type]  # ix_ stub: one dtype for all
        tails = ~heads
        rt = r[tails]
        qt = q[tails]
        for part in step.parts:
            c = _emit_cells(part, rt, pos, plan)
            e = np.minimum((qt[:, None] >= part.cdf[c]).sum(axis=1), part.cdf.shape[1] - 1)
            vals = np.unravel_index(e, plan.shape(part.emit))
            for a, v in zip(part.emit, vals):
                rt[:, pos[a]] = v
        r[tails] = rt
    return r


def fake_probability(step: Step, r: np.ndarray, plan: Algorithm4) -> np.ndarray:
    """``F_t(r)`` for every row of ``r`` (all of the step's attributes emitted): the length of the
    intersection of the view parts' inverse-CDF intervals (one part: the slice's probability)."""
    pos = {a: i for i, a in enumerate(plan.attrs)}
    lo = np.zeros(len(r))
    hi = np.ones(len(r))
    for part in step.parts:
        c = _emit_cells(part, r, pos, plan)
        e = cell_index(r[:, [pos[a] for a in part.emit]], plan.shape(part.emit))
        upper = part.cdf[c, e]
        lower = np.where(e > 0, part.cdf[c, np.maximum(e - 1, 0)], 0.0)
        lo = np.maximum(lo, lower)
        hi = np.minimum(hi, upper)
    return np.clip(hi - lo, 0.0, None)


def _domain(plan: Algorithm4) -> np.ndarray:
    shape = plan.shape(plan.attrs)
    size = int(np.prod(shape))
    if size > MAX_DOMAIN:
        raise LocalPrivError(f"the product domain has {size} rows, more than {MAX_DOMAIN} to enumerate")
    return np.stack(np.unravel_index(np.arange(size), shape), axis=1).astype(np.int64)


def row_channel(plan: Algorithm4) -> np.ndarray:
    """Eq. (A4.1) for every true row (matrix rows) and emitted row (columns), C-order cells of
    ``plan.attrs``."""
    X = _domain(plan)
    pos = {a: i for i, a in enumerate(plan.attrs)}
    K = np.ones((len(X), len(X)))
    for step in plan.steps:
        if not step.new:
            continue
        F = fake_probability(step, X, plan)
        cols = [pos[a] for a in step.new]
        key = cell_index(X[:, cols], plan.shape(step.new))
        eq = key[:, None] == key[None, :]
        K *= plan.p * eq + (1 - plan.p) * F[None, :]
    return K


def algorithm4_epsilon(plan: Algorithm4) -> float:
    """Eq. (A4.2): the exact LDP level of one emitted row, maximized over all rows."""
    X = _domain(plan)
    p = plan.p
    if p == 0:
        return 0.0
    total = np.zeros(len(X))
    for step in plan.steps:
        if int(np.prod(plan.shape(step.new))) <= 1:
            continue
        F = fake_probability(step, X, plan)
        with np.errstate(divide="ignore"):
            total += np.where(F > 0, np.log1p(p / ((1 - p) * np.where(F > 0, F, 1.0))), np.inf)
    return float(total.max())


def _step_fake_table(step: Step, plan: Algorithm4) -> np.ndarray:
    """``Fbar_t(b | a)`` as a table over ``(*old, *new)``: ``F_t`` at every ``(a, b)`` (the other
    attributes of the row do not enter ``F_t``)."""
    attrs = [*step.old, *step.new]
    shape = plan.shape(attrs)
    grid = np.stack(np.unravel_index(np.arange(int(np.prod(shape))), shape), axis=1)
    full = np.zeros((len(grid), len(plan.attrs)), dtype=np.int64)
    pos = {a: i for i, a in enumerate(plan.attrs)}
    for i, a in enumerate(attrs):
        full[:, pos[a]] = grid[:, i]
    return fake_probability(step, full, plan).reshape(shape)


def estimate_pairs_eq43(r: np.ndarray, plan: Algorithm4) -> dict:
    """Per-pair Eq. 4.3 inversion (module docstring): ``{pair: table over pair's attributes}``.

    ``(o(a, b)/n - (1-p) (o_O(a)/n) Fbar_t(b | a)) / p``, negatives clipped, renormalized."""
    r = np.asarray(r, dtype=np.int64)
    pos = {a: i for i, a in enumerate(plan.attrs)}
    n = len(r)
    if n == 0:
        raise LocalPrivError("no rows to estimate from")
    out = {}
    for step in plan.steps:
        attrs = [*step.old, *step.new]
        shape = plan.shape(attrs)
        counts = np.bincount(cell_index(r[:, [pos[a] for a in attrs]], shape), minlength=int(np.prod(shape)))
        o = counts.reshape(shape) / n
        if step.new:
            o_old = o.sum(axis=tuple(range(len(step.old), len(attrs))), keepdims=True)
            t = (o - (1 - plan.p) * o_old * _step_fake_table(step, plan)) / plan.p
        else:
            t = o
        t = np.clip(t, 0, None)
        t = t / t.sum() if t.sum() > 0 else np.full(shape, 1.0 / t.size)
        out[step.pair] = marginalize(t, attrs, list(step.pair))
    return out


def estimate_joint_mle(r: np.ndarray, plan: Algorithm4, *, delta: float | None = None,
                       max_iter: int | None = None) -> tuple:
    """Maximum-likelihood joint over ``plan.attrs`` from the whole emitted rows and the channel
    (A4.1), by the one EM engine with its certified defaults (Newton-accelerated, stopped on the
    likelihood gap ``delta``); returns ``(joint table, {pair: its marginal}, EMResult)``."""
    r = np.asarray(r, dtype=np.int64)
    if len(r) == 0:
        raise LocalPrivError("no rows to estimate from")
    shape = plan.shape(plan.attrs)
    K = row_channel(plan)
    counts = np.bincount(cell_index(r, shape), minlength=K.shape[0]).astype(float)
    live = np.flatnonzero(counts)
    block = MatrixMechanism(rows=K).likelihood_block(live, counts[live])
    res = em([block], K.shape[0], delta=DEFAULT_DELTA if delta is None else float(delta),
             max_iter=check_int(DEFAULT_MAX_ITER if max_iter is None else max_iter, "max_iter", minimum=1))
    joint = res.theta.reshape(shape)
    return joint, {s.pair: marginalize(joint, plan.attrs, list(s.pair)) for s in plan.steps}, res
