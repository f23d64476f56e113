"""A black-box empirical privacy audit of a client: a lower confidence bound on the LDP level it
actually delivers, beside the level its spec claims.

The client is any program that reads values one per line and writes one report per line (the
contract of ``localpriv client``, docs/clients.md); here it is a *runner*: a function from a list
of input lines to the list of output lines of one run of the client (one process). The audit

1. feeds ``trials`` copies of a value ``x`` and as many of ``x'`` (a *pair*), in chunks of at most
   :data:`CHUNK` lines per run; in **device mode** (``rounds > 1``, and always for memoized
   mechanisms) each device reports its value ``rounds`` times, and the device's reports joined in
   order are one outcome: a run is one device, or, for a client that simulates devices
   (``--reports-per-device``), each input line of a run is one new device;
2. turns each outcome into **events** by a few fixed *views*: the exact canonical report
   (``exact``); the claimed channel's ratio ``P(z|x) / P(z|x')`` of the report, where its rows
   can be read (``channel-ratio``: the mechanism's own bins); for float reports, their offset
   from the grid of the claimed mechanism (``grid-offset``, Piecewise) and the low 12 bits of
   their float64 pattern (``low-bits``); in device mode, the reports as an unordered multiset
   (``multiset``);
3. splits the trials of each value into two halves. On the first (selection) half, for every view
   and both directions (``x`` against ``x'`` and back), it ranks the events by their empirical
   ratio on one quarter of the trials and keeps the top ``m`` (``m`` chosen by the bound on the
   other quarter). Only this one set ``E`` is tested on the second half, so no correction for the
   number of events tried is needed;
4. reports ``max(0, ln(p_low(E | x) / p_up(E | x')))`` from the second half, with Clopper-Pearson
   one-sided bounds at ``(1 - confidence) / 2`` each (their union has probability at most
   ``1 - confidence``, so the bound holds with probability at least ``confidence``) [1]_, [2]_.

The **claimed level** is computed from the mechanism's channel (:meth:`Mechanism.epsilon_ldp`); in
device mode with ``R`` rounds it is the ledger's bound on ``R`` reports of one memo,
``min(eps_perm, R eps_inst)`` (never below the one-report level), or ``R eps`` (basic
composition) for a mechanism without memo.

**Power.** :func:`detectable_excess` gives the smallest excess ``delta`` over the claimed level
that a test half of ``n`` trials detects with probability 0.8 (the bound exceeds the claimed
level), for an event whose probability is ``p1`` under ``x`` and ``p1 e^-(eps + delta)`` under
``x'``; ``p1`` is that of the claimed channel's most informative event for the pair (the outputs
whose ratio reaches the level) when the channel's rows can be computed, else the selected event's
frequency on the selection half.

References
----------
.. [1] C. J. Clopper and E. S. Pearson, "The use of confidence or fiducial limits illustrated in
   the case of the binomial", Biometrika 26(4), 1934.
.. [2] H. H. Arcolezi and S. Gambs, "Revealing the True Cost of Locally Differentially Private
   Protocols: An Auditing Perspective", PETS 2024 (LDP-Auditor).
"""
from __future__ import annotations

import json
import math
import shlex
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from localpriv.domains.base import CategoricalDomain, Domain, IntegerDomain
from localpriv.mechanisms.base import Mechanism, Memoized, ldp_level_within_budget
from localpriv.mechanisms.piecewise import Piecewise
from localpriv.mechanisms.portable import PORTABLE_MEMOIZED
from localpriv.utils.validation import LocalPrivError

__all__ = ["AuditResult", "Runner", "audit", "audit_power", "channel_event_probability", "claimed_level",
           "clopper_pearson", "command_runner", "default_pair", "detectable_excess", "runner_of", "simulates_devices",
           "value_line", "MAX_TRIALS", "MAX_DEVICES", "MAX_ROUNDS", "CHUNK"]

#: one run of the client: input lines -> output lines (one per input line)
Runner = Callable[[list[str]], list[str]]

#: largest number of trials per value in one-report mode
MAX_TRIALS = 2_000_000
#: largest number of devices per value in device mode (one client run each)
MAX_DEVICES = 20_000
#: largest number of reports per device
MAX_ROUNDS = 1_000
#: input lines per client run in one-report mode (the client contract allows 1,000,000)
CHUNK = 100_000
#: channel entries read to choose a default pair and the power's event
PAIR_MAX_ENTRIES = 4_000_000
#: power the detectable excess is stated at
POWER = 0.8
#: largest excess searched by :func:`detectable_excess` (beyond it: not detectable)
MAX_EXCESS = 30.0


@dataclass
class AuditResult:
    """What :func:`audit` returns (all plain values: ``asdict`` is its JSON)."""

    spec: str
    pair: tuple[int, int]
    values: tuple[str, str]
    trials: int
    rounds: int
    device_mode: bool
    confidence: float
    claimed: float
    lower_bound: float
    flagged: bool
    view: str
    direction: str
    event: list[str]
    counts: dict[str, int]
    power: dict[str, Any] = field(default_factory=dict)
    #: device mode with many simulated devices per client run (``{rounds}`` in the command)
    devices_per_run: bool = False

    def to_json(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        out = asdict(self)
        out["pair"] = list(self.pair)
        out["values"] = list(self.values)
        return out


def clopper_pearson(count: np.ndarray | int, n: int, alpha: float, upper: bool) -> np.ndarray:
    """One-sided Clopper-Pearson bound on a binomial proportion at level ``1 - alpha``.

    Lower: ``Beta(alpha; c, n - c + 1)`` (0 when ``c = 0``); upper: ``Beta(1 - alpha; c + 1, n - c)``
    (1 when ``c = n``) -- Clopper and Pearson (1934).

    Parameters
    ----------
    count : int or array of int
        Successes, ``0 <= count <= n``.
    n : int
        Trials.
    alpha : float
        The bound fails with probability at most ``alpha``.
    upper : bool
        Upper bound if true, else lower.
    """
    c = np.asarray(count, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        if upper:
            return np.where(c >= n, 1.0, stats.beta.ppf(1.0 - alpha, c + 1.0, np.maximum(n - c, 1e-300)))
        return np.where(c <= 0, 0.0, stats.beta.ppf(alpha, np.maximum(c, 1e-300), n - c + 1.0))


def _log_bound(c1: np.ndarray, c2: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """``max(0, ln(p_low(c1) / p_up(c2)))`` with each bound at ``alpha / 2``."""
    low = clopper_pearson(c1, n, alpha / 2, upper=False)
    up = clopper_pearson(c2, n, alpha / 2, upper=True)
    with np.errstate(divide="ignore"):
        return np.maximum(0.0, np.log(low) - np.log(up))


def detectable_excess(p1: float, n: int, claimed: float, confidence: float, power: float = POWER) -> float:
    """Smallest excess ``delta`` over ``claimed`` that a test of ``n`` trials per value detects
    with probability ``power``.

    The event has probability ``p1`` under ``x`` and ``p2 = p1 e^-(claimed + delta)`` under ``x'``;
    the audit detects when ``ln(p_low(X) / p_up(Y)) > claimed`` for ``X ~ Bin(n, p1)``,
    ``Y ~ Bin(n, p2)`` (:func:`clopper_pearson` at ``(1 - confidence) / 2`` each). The detection
    probability is computed exactly, ``sum_x P(X = x) P(Y <= y*(x))``, and ``delta`` found by
    bisection to 1e-3. ``inf`` when even ``delta =`` :data:`MAX_EXCESS` is not detected.
    """
    if not 0.0 < p1 <= 1.0 or n < 1:
        return math.inf
    if n > 4 * MAX_TRIALS:
        raise LocalPrivError(f"detectable_excess: n={n} above the limit of {4 * MAX_TRIALS} trials")
    alpha = 1.0 - confidence
    xs = np.arange(n + 1)
    low = clopper_pearson(xs, n, alpha / 2, upper=False)
    up = clopper_pearson(xs, n, alpha / 2, upper=True)  # increasing in y
    pmf_x = stats.binom.pmf(xs, n, p1)
    # largest y with up[y] < low[x] e^-claimed (-1: none)
    ystar = np.searchsorted(up, low * math.exp(-claimed), side="left") - 1

    def detect(delta: float) -> float:
        p2 = p1 * math.exp(-(claimed + delta))
        cdf = np.where(ystar >= 0, stats.binom.cdf(np.maximum(ystar, 0), n, p2), 0.0)
        return float(np.dot(pmf_x, cdf))

    if detect(MAX_EXCESS) < power:
        return math.inf
    lo, hi = 0.0, MAX_EXCESS
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if detect(mid) >= power else (mid, hi)
    return hi


def claimed_level(mech: Mechanism, rounds: int = 1) -> float:
    """The level the spec claims for ``rounds`` reports of one device, computed from the channel.

    One report: ``eps = mech.epsilon_ldp()``. ``R`` reports of a memoized mechanism (one memo):
    ``max(eps, min(eps_perm, R eps_inst, R eps))``, the ledger's bound (``eps_inst = inf`` where
    the family has none; :func:`~localpriv.mechanisms.accounting.report_charge`); of a mechanism
    without memo: ``R eps`` (basic composition).
    """
    one = ldp_level_within_budget(mech)
    if rounds <= 1:
        return one
    if not isinstance(mech, Memoized):
        return rounds * one
    perm = getattr(mech, "epsilon_perm", None)
    inst = getattr(mech, "epsilon_instantaneous", None)
    eps_perm = float(perm()) if callable(perm) else math.inf
    eps_inst = float(inst()) if callable(inst) else math.inf
    return max(one, min(eps_perm, rounds * eps_inst, rounds * one))


def _rows(mech: Mechanism, pair: tuple[int, int] | None = None) -> np.ndarray | None:
    """Channel rows (all inputs, or the pair's two) when they fit :data:`PAIR_MAX_ENTRIES`."""
    try:
        if isinstance(mech, Piecewise):
            n = int(mech.n_points)
            xs = np.arange(mech.k) if pair is None else np.asarray(pair)
            if n * xs.size > PAIR_MAX_ENTRIES:
                return None
            return np.asarray(mech.pmf(mech.values(np.arange(n))[None, :], xs[:, None]), dtype=float)
        m = mech.n_outputs
        if m is None or mech.k * m > PAIR_MAX_ENTRIES:
            return None
        ch = np.asarray(mech.channel(), dtype=float)
        return ch if pair is None else ch[list(pair)]
    except (LocalPrivError, MemoryError, NotImplementedError):
        return None


def default_pair(mech: Mechanism) -> tuple[int, int]:
    """The pair of inputs whose channel rows differ most: ``argmax_{x, x'} max_z ln(P(z|x) / P(z|x'))``
    (the lowest such pair); ``(0, k - 1)`` when the channel is too large to read
    (:data:`PAIR_MAX_ENTRIES`), the ends of ordered domains."""
    k = int(mech.k)
    rows = _rows(mech) if k * k <= PAIR_MAX_ENTRIES else None
    if rows is None or k * k * rows.shape[1] > PAIR_MAX_ENTRIES:
        return (0, k - 1)
    with np.errstate(divide="ignore"):
        logs = np.log(rows)
    best, pair = -math.inf, (0, k - 1)
    for x in range(k):  # loop over inputs (k is bounded above), vectorized over outputs
        with np.errstate(invalid="ignore"):
            diff = logs[x][None, :] - logs
        diff[np.isnan(diff)] = -math.inf
        worst = diff.max(axis=1)
        xp = int(np.argmax(worst))
        if worst[xp] > best + 1e-12:
            best, pair = float(worst[xp]), (x, xp)
    return pair


def channel_event_probability(mech: Mechanism, pair: tuple[int, int]) -> float | None:
    """``P(E* | x)`` for the claimed channel's most informative event ``E*`` of the pair (the
    outputs whose ratio to ``x'`` is within 1e-9 of the largest)."""
    rows = _rows(mech, pair)
    if rows is None:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(rows[0]) - np.log(rows[1])
    ratio[np.isnan(ratio)] = -math.inf
    top = ratio.max()
    if not np.isfinite(top):
        return None
    return float(rows[0][ratio >= top - 1e-9].sum())


def audit_power(p1: float | None, n: int, claimed: float, confidence: float) -> dict[str, Any]:
    """The power statement of an audit: ``{"p1", "test_trials", "power", "detectable_excess",
    "detectable_level"}`` (:func:`detectable_excess`); ``None`` values when ``p1`` is unknown."""
    if p1 is None:
        return {"p1": None, "test_trials": n, "power": POWER, "detectable_excess": None, "detectable_level": None}
    d = detectable_excess(p1, n, claimed, confidence)
    return {"p1": p1, "test_trials": n, "power": POWER, "detectable_excess": d if math.isfinite(d) else None,
            "detectable_level": claimed + d if math.isfinite(d) else None}


def canonical(line: str) -> str:
    """A report line as an opaque event: the JSON value re-written canonically (integers in
    decimal, strings as they are, floats as the shortest decimal that reads back to the same
    double); anything that is not JSON is refused."""
    try:
        v = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        raise LocalPrivError(f"the client printed a line that is not JSON: {line[:60]!r}") from None
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int | str):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def _float_of(key: str) -> float | None:
    try:
        f = float(key)
    except ValueError:
        return None
    return f if math.isfinite(f) and ("." in key or "e" in key) else None


def _ratio_keys(mech: Mechanism, pair: tuple[int, int], keys: list[str]) -> list[str] | None:
    """The claimed channel's log ratio ``ln(P(z|x) / P(z|x'))`` of every report, rounded to 1e-6
    (``-`` for a report outside the claimed output space); ``None`` without computable rows."""
    rows = _rows(mech, pair)
    if rows is None:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(rows[0]) - np.log(rows[1])
    ratio = np.where(np.isnan(ratio), 0.0, ratio)
    uniq, inv = np.unique(np.asarray(keys, dtype=object), return_inverse=True)
    col = np.full(uniq.size, -1, dtype=np.int64)
    for j, key in enumerate(uniq.tolist()):  # loop over distinct reports (bounded by the trials)
        try:
            v = float(key) if isinstance(mech, Piecewise) else int(key)
            col[j] = int(mech.grid_index([v])[0]) if isinstance(mech, Piecewise) else int(mech.output_index([v])[0])
        except (ValueError, LocalPrivError, OverflowError):
            col[j] = -1
    label = np.where(col >= 0, np.round(ratio[np.maximum(col, 0)], 6).astype(str), "-")
    return [str(s) for s in label[inv]]


def _views(mech: Mechanism, outcomes: list[tuple[str, ...]], device: bool,
           pair: tuple[int, int]) -> dict[str, list[str]]:
    """Event keys of every outcome under each view (module docstring)."""
    views: dict[str, list[str]] = {"exact": [" ".join(o) for o in outcomes]}
    if device:
        views["multiset"] = [" ".join(sorted(o)) for o in outcomes]
        if all(len(o) == 1 for o in outcomes):
            ratio = _ratio_keys(mech, pair, [o[0] for o in outcomes])
            if ratio is not None:
                views["channel-ratio"] = ratio
        return views
    ratio = _ratio_keys(mech, pair, [o[0] for o in outcomes])
    if ratio is not None:
        views["channel-ratio"] = ratio
    parsed = [_float_of(o[0]) for o in outcomes]
    is_float = np.array([f is not None for f in parsed], dtype=bool)
    if is_float.any():
        vals = np.array([0.0 if f is None else f for f in parsed], dtype=np.float64)
        low = (vals.view(np.uint64) & np.uint64(0xFFF)).astype(str)
        views["low-bits"] = np.where(is_float, low, "-").tolist()
        if isinstance(mech, Piecewise):
            half = 0.5 * float(mech.grid)
            offset = (vals - half * np.round(vals / half)).astype(str)
            views["grid-offset"] = np.where(is_float, offset, "-").tolist()
    return views


def _counts(keys: np.ndarray, sample: list[str]) -> np.ndarray:
    """Occurrences of each of the sorted ``keys`` in ``sample`` (keys absent from it count 0)."""
    out = np.zeros(keys.size)
    if keys.size == 0 or not sample:
        return out
    u, c = np.unique(np.asarray(sample, dtype=object), return_counts=True)
    pos = np.minimum(np.searchsorted(keys, u), keys.size - 1)
    hit = keys[pos] == u
    out[pos[hit]] = c[hit]
    return out


def _select(rank: tuple[list[str], list[str]], score: tuple[list[str], list[str]],
            alpha: float) -> tuple[list[str], float]:
    """The event: the keys sorted by their ratio on the ranking samples (x's, x''s), and the number
    of top keys kept chosen to maximize the bound on the separate scoring samples; with that bound."""
    keys = np.unique(np.asarray(rank[0] + rank[1] + score[0] + score[1], dtype=object))
    a, b = _counts(keys, rank[0]), _counts(keys, rank[1])
    seen = (a + b) > 0
    keys, a, b = keys[seen], a[seen], b[seen]
    if keys.size == 0:
        return [], 0.0
    order = np.lexsort((-a, -(np.log(a + 0.5) - np.log(b + 0.5))))
    ranked = keys[order]  # keys itself is sorted (np.unique): count there, then reorder
    sa, sb = _counts(keys, score[0])[order], _counts(keys, score[1])[order]
    n = min(len(score[0]), len(score[1]))
    bounds = _log_bound(np.cumsum(sa), np.cumsum(sb), n, alpha)
    m = int(np.argmax(bounds))
    return [str(s) for s in ranked[: m + 1]], float(bounds[m])


def _run_single(runner: Runner, line: str, trials: int,
                progress: Callable[[int], None] | None) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    while len(out) < trials:
        m = min(CHUNK, trials - len(out))
        got = runner([line] * m)
        if len(got) != m:
            raise LocalPrivError(f"the client printed {len(got)} lines for {m} values")
        out.extend((canonical(g),) for g in got)
        if progress is not None:
            progress(m)
    return out


def _run_devices(runner: Runner, line: str, devices: int, rounds: int, jobs: int,
                 progress: Callable[[int], None] | None) -> list[tuple[str, ...]]:
    def one(_: int) -> tuple[str, ...]:
        got = runner([line] * rounds)
        if len(got) != rounds:
            raise LocalPrivError(f"the client printed {len(got)} lines for {rounds} values")
        if progress is not None:
            progress(1)
        return tuple(canonical(g) for g in got)

    if jobs <= 1:
        return [one(i) for i in range(devices)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, range(devices)))


def _run_batch(runner: Runner, lines: tuple[str, str], devices: int, rounds: int, jobs: int,
               progress: Callable[[int], None] | None) -> list[list[tuple[str, ...]]]:
    """Device mode through a client that simulates devices: each input line is one new device that
    reports its value ``rounds`` times (``rounds`` output lines per input line, device after device).
    The devices of both values go in runs of at most ``CHUNK // rounds`` devices."""
    todo = [v for v in lines for _ in range(devices)]
    per_run = max(1, CHUNK // rounds)
    runs = [todo[i:i + per_run] for i in range(0, len(todo), per_run)]

    def one(run: list[str]) -> list[tuple[str, ...]]:
        got = runner(run)
        if len(got) != len(run) * rounds:
            raise LocalPrivError(f"the client printed {len(got)} lines for {len(run)} devices of {rounds} reports")
        if progress is not None:
            progress(len(run))
        keys = [canonical(g) for g in got]
        return [tuple(keys[i * rounds:(i + 1) * rounds]) for i in range(len(run))]

    if jobs <= 1:
        done = [one(r) for r in runs]
    else:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(one, runs))
    flat = [o for part in done for o in part]
    return [flat[:devices], flat[devices:]]


def value_line(domain: Domain, index: int) -> str:
    """The input line of domain index ``index`` (an integer's decimal, or a label)."""
    if isinstance(domain, IntegerDomain):
        return str(int(domain.lo) + int(index))
    if isinstance(domain, CategoricalDomain):
        return str(domain.labels[index])
    raise LocalPrivError(f"audit: domain {domain} is not a client domain (lo..hi or labels)")


def audit(mech: Mechanism, runner: Runner, *, domain: Domain | None = None, pair: tuple[int, int] | None = None,
          trials: int = 20_000, rounds: int = 1, confidence: float = 0.95, jobs: int = 1,
          progress: Callable[[int], None] | None = None, devices_per_run: bool = False) -> AuditResult:
    """Audit a client of ``mech``: a lower confidence bound on the LDP level it delivers.

    Parameters
    ----------
    mech : Mechanism
        The mechanism the client claims to run (its spec): the claimed level and the default pair.
    runner : callable
        One run of the client: input lines -> output lines (one per input).
    domain : Domain, optional
        The client's domain (values written as its lines); default the integers ``0..k-1``.
    pair : (int, int), optional
        Domain indices ``(x, x')``; default :func:`default_pair`.
    trials : int
        Trials per value (devices in device mode); half select the event, half test it.
    rounds : int
        Reports per device (device mode when above 1 or for memoized mechanisms).
    confidence : float
        The bound holds with at least this probability.
    jobs : int
        Client runs at once in device mode.
    progress : callable, optional
        Called with the number of trials (or devices) just done.
    devices_per_run : bool
        In device mode, the runner simulates devices: each input line is one new device that reports
        its value ``rounds`` times (``rounds`` output lines per input line, e.g. ``localpriv client
        --reports-per-device``), so many devices share a run; otherwise each run is one device.

    Returns
    -------
    AuditResult
        ``lower_bound`` (module docstring), ``claimed`` (:func:`claimed_level`), ``flagged`` when
        the bound exceeds the claimed level by more than 1e-9, the tested event and the power.
    """
    if not 0.5 <= confidence < 1.0:
        raise LocalPrivError(f"audit: confidence must be in [0.5, 1), got {confidence}")
    if not 1 <= rounds <= MAX_ROUNDS:
        raise LocalPrivError(f"audit: rounds must be in 1..{MAX_ROUNDS}, got {rounds}")
    device = rounds > 1 or mech.spec_name in PORTABLE_MEMOIZED
    limit = MAX_DEVICES if device else MAX_TRIALS
    if not 4 <= trials <= limit:
        raise LocalPrivError(f"audit: trials must be in 4..{limit:,} per value "
                             f"({'devices' if device else 'reports'}), got {trials}")
    k = int(mech.k)
    x, xp = default_pair(mech) if pair is None else (int(pair[0]), int(pair[1]))
    if not (0 <= x < k and 0 <= xp < k) or x == xp:
        raise LocalPrivError(f"audit: the pair must be two different indices in 0..{k - 1}, got {x},{xp}")
    dom = IntegerDomain(0, k - 1) if domain is None else domain
    lines = (value_line(dom, x), value_line(dom, xp))
    claimed = claimed_level(mech, rounds)
    if device and devices_per_run:
        out = _run_batch(runner, lines, trials, rounds, jobs, progress)
    elif device:
        out = [_run_devices(runner, v, trials, rounds, jobs, progress) for v in lines]
    else:
        out = [_run_single(runner, v, trials, progress) for v in lines]
    alpha = 1.0 - confidence
    half = trials // 2
    n_test = trials - half
    views = [_views(mech, o, device, (x, xp)) for o in out]
    best: tuple[float, str, int, list[str]] = (-1.0, "exact", 0, [])
    quarter = half // 2
    for view in views[0]:
        for d in (0, 1):
            s, t = views[d][view], views[1 - d][view]
            event, score = _select((s[:quarter], t[:quarter]), (s[quarter:half], t[quarter:half]), alpha)
            if score > best[0]:
                best = (score, view, d, event)
    _, view, d, event = best
    chosen = set(event)
    c1 = sum(1 for key in views[d][view][half:] if key in chosen)
    c2 = sum(1 for key in views[1 - d][view][half:] if key in chosen)
    lower = float(_log_bound(np.asarray(c1), np.asarray(c2), n_test, alpha))
    a, b = (x, xp) if d == 0 else (xp, x)
    if rounds > 1 or _rows(mech, (a, b)) is None:
        p1 = sum(1 for key in views[d][view][:half] if key in chosen) / max(half, 1)
        p1_opt: float | None = p1 if p1 > 0 else None
    else:
        p1_opt = channel_event_probability(mech, (a, b))
    power = audit_power(p1_opt, n_test, claimed, confidence)
    power["event_model"] = ("selected event (selection half)" if rounds > 1 or _rows(mech, (a, b)) is None
                             else "claimed channel's most informative event")
    shown = event if len(event) <= 20 else event[:20] + [f"... ({len(event)} events)"]
    return AuditResult(spec=str(mech), pair=(x, xp), values=lines, trials=trials, rounds=rounds, device_mode=device,
                       confidence=confidence, claimed=claimed, lower_bound=lower, flagged=lower > claimed + 1e-9,
                       view=view, direction=f"{a} vs {b}", event=shown,
                       counts={"selection": half, "test": n_test, "event_x": c1, "event_x_prime": c2},
                       power=power, devices_per_run=device and devices_per_run)


def runner_of(func: Callable[[Sequence[str]], Sequence[Any]]) -> Runner:
    """A runner from a function of input lines to report *values* (written as JSON lines), e.g. an
    in-process client for tests."""
    def run(lines: list[str]) -> list[str]:
        return [json.dumps(v) for v in func(lines)]
    return run


def command_runner(command: str, *, spec: str = "", domain: str = "", rounds: int = 1,
                   timeout: float = 600.0) -> Runner:
    """A runner that starts ``command`` once per call, values on its standard input.

    ``command`` is split like a POSIX shell line (no shell runs it); ``{spec}``, ``{domain}`` and
    ``{rounds}`` in it are replaced by ``spec``, ``domain`` and ``rounds`` (e.g. ``localpriv client
    {spec} --domain {domain} --reports-per-device {rounds}``: see :func:`simulates_devices`).
    A run that exits with a non-zero status, or takes more than ``timeout`` seconds, is refused
    with the first line of its standard error.
    """
    try:
        argv = [a.replace("{spec}", spec).replace("{domain}", domain).replace("{rounds}", str(rounds))
                for a in shlex.split(command)]
    except ValueError as exc:
        raise LocalPrivError(f"--client: {exc}") from None
    if not argv:
        raise LocalPrivError("--client: the command is empty")

    def run(lines: list[str]) -> list[str]:
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        try:
            done = subprocess.run(argv, input=data, capture_output=True, timeout=timeout, check=False)
        except FileNotFoundError:
            raise LocalPrivError(f"the client command {argv[0]!r} was not found") from None
        except subprocess.TimeoutExpired:
            raise LocalPrivError(f"the client took more than {timeout:g} s for {len(lines)} values") from None
        if done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise LocalPrivError(f"the client failed (exit status {done.returncode})"
                                 + (f": {err[0][:200]}" if err else ""))
        return done.stdout.decode("utf-8", "replace").splitlines()

    return run


def simulates_devices(command: str) -> bool:
    """Whether a client command simulates devices (its line holds ``{rounds}``, the reports per device,
    e.g. ``--reports-per-device {rounds}``): in device mode, each input line is then one new device
    and one run holds many devices (:func:`audit`'s ``devices_per_run``)."""
    return "{rounds}" in command
