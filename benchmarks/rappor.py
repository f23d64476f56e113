"""RAPPOR against pure-LDP's RAPPOR: accuracy on a candidate set, and clients.

Data: the check-ins of ``../shared/data/gowalla_nyc_checkins.tsv.gz`` (column 5, location id) at
its ``K = 500`` most visited places (all of their check-ins, ``n`` of them): the candidate set is
those places, as RAPPOR's decoding assumes (the vocabulary is open, the candidates are known).

Both libraries run the same protocol: Bloom filters of ``m = 128`` bits (the paper's size),
``h = 2`` hash functions, 8 cohorts, and the permanent randomized response with probability ``f``.
pure-LDP 1.2.0's RAPPOR has no instantaneous randomized response (its client says so), so ours
runs with ``p = 0, q = 1`` (no IRR: the same channel); the level is then the paper's
``eps_inf = 2 h log((1 - f/2) / (f/2))``, which we compute from our mechanism
(``epsilon_perm()``, and ``epsilon_ldp()`` which equals it without IRR) and record beside
pure-LDP's own figure. The Bloom hash families differ (ours XXH64 seeded per cohort and hash,
pure-LDP's its own seeded hashes): same structure, different functions.

Per ``f`` in :data:`FS`, ``ROUNDS`` interleaved rounds (ours first on even rounds, pure-LDP first
on odd ones; seeds ``r``), each library obfuscating the same ``n`` values:

* pure-LDP: ``RAPPORClient.privatise`` once per value (its API), ``RAPPORServer.aggregate`` per
  report and ``estimate`` (its regression: ridge-penalized non-negative least squares,
  ``ElasticNet(positive=True, alpha=0.025 f, l1_ratio=0)``; no lasso at this ``K``); estimates
  divided by ``n`` (they are counts, not normalized);
* ours: ``mech.sample`` on all values at once, then :func:`localpriv.estimators.rappor.decode`
  with ``ridge`` (the same penalized non-negative regression as pure-LDP's, its strength chosen
  from the data by leave-one-cohort-out cross-validation; the chosen strength is recorded),
  ``nnls`` (RAPPOR's regression, non-negative least squares), ``em`` (the EM engine on the
  bitwise composite likelihood of the bit counts) and ``em-exact`` (the maximum-likelihood
  estimate from the distinct reports, the engine's default certified scheme).

pure-LDP 1.2.0's client does not implement the PRR it states: ``RAPPORClient._perturb`` sets a
zero bit to 1 with probability ``f/2`` but never clears a set bit, so ``P(S = 1 | B = 1) = 1``
instead of ``1 - f/2``. Its reports are therefore less noisy than ours at the same ``f`` (and have
no finite privacy level: a reported 0 rules out every value whose Bloom filter sets that bit),
while its server debiases for the stated PRR. Each round therefore also runs pure-LDP's client with
the paper's PRR (:func:`_prr_as_specified`, same seeds and hash functions) into its own server:
``regression_prr_as_specified``, the comparison of decoders on the same channel as ours. And each
round runs pure-LDP's server code on OUR reports (:func:`their_decoder_on`; our Bloom positions as
its hash functions): ``pure_ldp_decoder_on_these_reports`` and
``paired_vs_pure_ldp_decoder_same_reports``, the decoders alone on identical inputs.

Reported per cell (medians over rounds, with min and max): MSE over the ``K`` candidates of the
estimated frequency against the true one; precision at 10 and 50 (the share of the estimated top
t that are among the true top t; with sets of equal size it is also the recall); client reports per
second of CPU time (pure-LDP's per-value loop against our vectorized call), and decoding CPU time.

``python benchmarks/rappor.py [--quick] [--rounds R] [--out PATH]`` prints the JSON and writes
``benchmarks/results-rappor.json`` (or ``PATH``) atomically (``--quick``: 2 rounds, 200 places;
written only with ``--out``). ``paired_vs_pure_ldp`` counts, per decoder, the rounds where ours is
better, equal or worse than pure-LDP's on the same values (lower MSE, higher precision).
``make bench-rappor`` runs it. Never run by the tests.

**Accuracy only** (enough rounds to decide top-k differences of a few hundredths):
``python benchmarks/rappor.py --accuracy-only [--quick] [--rounds R] [--out PATH] [--deadline HH:MM]``
(``make bench-rappor-accuracy``; default 60 rounds, seeds ``0..59``) runs the accuracy arms and no
timing (times belong to the timed mode on a quiet machine), and writes
``benchmarks/results-rappor-accuracy.json`` (format ``version`` 1) atomically after every round
(``complete: false`` until the last; ``--deadline``, UTC today, stops before a round that would end
after it, and the file states the rounds it holds). Per ``f`` the arms are the timed mode's
(pure-LDP as shipped, pure-LDP with the PRR as specified, pure-LDP's decoder on our reports, ours
``ridge`` / ``nnls`` / ``em`` / ``em-exact``) and two more:

* **ours, design per round** (:func:`ours_design_per_round`): our collection with another Bloom
  design every round, from ``keys=labels`` with the labels ``salt{r}:{place}``, decoded by ``ridge``
  and ``em-exact``. pure-LDP draws its hash seeds per instance (per round here), while ours are
  fixed by the documented, stable hashing (one design for a given candidate set); this arm tells
  the protocol from our one design;
* **our decoders on pure-LDP's specified-PRR reports** (:func:`theirs_accuracy`): the same reports
  as ``regression_prr_as_specified``, its hash functions of that round turned into per-cohort
  positions and passed as ``decode(..., bloom=positions)``, decoded by ``ridge`` and ``em-exact``.

Every paired comparison (:data:`ACC_PAIRS`) gives, for MSE, precision at 10 and at 50, the rounds
where the arm is better / equal / worse and the two-sided sign test on the untied rounds (exact
binomial, ``scipy.stats.binomtest``), with both means.
"""
from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import emit, load, machine, now, quick_flag, version  # noqa: E402
from large_domains import DATA, _compat_shims  # noqa: E402

from localpriv.estimators.rappor import decode  # noqa: E402
from localpriv.mechanisms import parse  # noqa: E402
from localpriv.mechanisms.rappor import bloom_positions  # noqa: E402

K_PLACES = 500
M, H, COHORTS = 128, 2, 8
FS = (0.5, 0.25)
ROUNDS = 5
TOPS = (10, 50)
OUT = HERE / "results-rappor.json"


def load_candidates(k_places: int) -> np.ndarray:
    """Check-ins at the ``k_places`` most visited places, encoded 0..k_places-1 (most visited
    first; ties by location id), in file order."""
    import gzip
    with gzip.open(DATA, "rt") as f:
        ids = np.array([int(line.rsplit("\t", 1)[1]) for line in f], dtype=np.int64)
    uniq, inv, cnt = np.unique(ids, return_inverse=True, return_counts=True)
    order = np.lexsort((uniq, -cnt))[:k_places]
    code = np.full(uniq.size, -1, dtype=np.int64)
    code[order] = np.arange(order.size)
    x = code[inv]
    return x[x >= 0]


def _clock(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def _scores(est, truth) -> dict:
    est = np.asarray(est, dtype=float)
    out = {"mse": float(np.mean((est - truth) ** 2))}
    true_order = np.argsort(-truth, kind="stable")
    est_order = np.argsort(-est, kind="stable")
    for t in TOPS:
        out[f"precision_at_{t}"] = len(set(true_order[:t]) & set(est_order[:t])) / t
    return out


def ours(f: float, x: np.ndarray, k: int, truth: np.ndarray, seed: int) -> dict:
    mech = parse(f"rappor(k={k},m={M},h={H},cohorts={COHORTS},f={f},p=0.0,q=1.0)")
    rng = np.random.default_rng(seed)
    reports, cpu, wall = _clock(lambda: mech.sample(x, rng))
    uniq, cnt = np.unique(reports, axis=0, return_counts=True) if reports.ndim == 2 else \
        np.unique(reports, return_counts=True)
    out = {"spec": str(mech), "eps_perm": mech.epsilon_perm(), "eps_ldp": mech.epsilon_ldp(),
           "client_cpu_s": cpu, "client_wall_s": wall, "distinct_reports": int(uniq.shape[0])}
    bc = mech.bit_counts(uniq, cnt)
    est, dcpu, _ = _clock(lambda: their_decoder_on(mech, bc, f, k))
    out["pure_ldp_decoder_on_these_reports"] = {**_scores(est, truth), "decode_cpu_s": dcpu}
    for method in ("ridge", "nnls", "em", "em-exact"):
        if method == "em-exact":
            dec, dcpu, _ = _clock(lambda method=method: decode(mech, uniq, cnt, method=method))
        else:
            dec, dcpu, _ = _clock(lambda method=method: decode(mech, bit_counts=bc, method=method))
        out[method] = {**_scores(dec.distribution, truth), "decode_cpu_s": dcpu}
        if method == "ridge":
            out[method]["penalty"] = dec.extra["penalty"]  # chosen from the data, relative to mean eig(A^T A)
    return out


def their_decoder_on(mech, bc, f: float, k: int) -> np.ndarray:
    """pure-LDP's server code (its ``_update_estimates``: ``ElasticNet(positive=True, alpha=0.025 f,
    l1_ratio=0)``) on OUR reports: its hash functions replaced by our Bloom positions, its aggregate
    state (per-cohort sums of report bits and report counts, what its ``aggregate`` accumulates) set
    from our bit counts. Same inputs as our decoders: the comparison of decoders alone."""
    from pure_ldp.frequency_oracles.rappor import RAPPORServer
    _compat_shims()
    server = RAPPORServer(f, M, H, k, num_of_cohorts=COHORTS, index_mapper=lambda v: v)
    pos = bloom_positions(mech.key_values, COHORTS, H, M)                     # cohorts x k x h
    server.hash_family = [[(lambda s, c=c, i=i: int(pos[c, int(s), i])) for i in range(H)] for c in range(COHORTS)]
    server.bloom_filters = [np.asarray(bc.ones[c], dtype=float) for c in range(COHORTS)]
    server.cohort_count = np.asarray(bc.n, dtype=float)
    server.n = int(round(float(bc.n.sum())))
    server.estimate(0, suppress_warnings=True)
    return np.asarray(server.estimated_data, dtype=float) / server.n


def theirs(f: float, x: np.ndarray, k: int, truth: np.ndarray, seed: int, keep_specified: bool = False) -> dict:
    """pure-LDP as shipped and with the PRR as specified; ``keep_specified`` also returns the latter's
    reports and server under ``"_specified"`` (for decoding them again without redrawing)."""
    from pure_ldp.frequency_oracles.rappor import RAPPORClient, RAPPORServer
    _compat_shims()
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the other library draws from NumPy's global generator
    ident = lambda v: v  # noqa: E731 - our values are already 0..k-1
    server = RAPPORServer(f, M, H, k, num_of_cohorts=COHORTS, index_mapper=ident)
    client = RAPPORClient(f, M, server.get_hash_funcs(), num_of_cohorts=COHORTS, index_mapper=ident)
    values = x.tolist()
    reports, cpu, wall = _clock(lambda: [client.privatise(v) for v in values])

    def server_side():
        for r in reports:
            server.aggregate(r)
        server.estimate(0, suppress_warnings=True)  # fits every candidate at once
        return np.asarray(server.estimated_data, dtype=float) / len(values)

    est, dcpu, _ = _clock(server_side)
    out = {"eps": float(server.epsilon), "client_cpu_s": cpu, "client_wall_s": wall,
           "regression": {**_scores(est, truth), "decode_cpu_s": dcpu}}
    # pure-LDP 1.2.0's client never clears a set Bloom bit (``_perturb`` only ever writes 1), so its
    # reports have P(S = 1 | B = 1) = 1, not 1 - f/2: less noise than the PRR its server debiases
    # for, and no finite level (a reported 0 rules out every value whose filter sets that bit). Its
    # decoder on the PRR as specified: the same client with the PRR of the paper, same seeds.
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the other library draws from NumPy's global generator
    server = RAPPORServer(f, M, H, k, num_of_cohorts=COHORTS, index_mapper=ident)
    client = RAPPORClient(f, M, server.get_hash_funcs(), num_of_cohorts=COHORTS, index_mapper=ident)
    client._perturb = lambda data: _prr_as_specified(data, f)
    reports = [client.privatise(v) for v in values]
    est, dcpu, _ = _clock(server_side)
    out["regression_prr_as_specified"] = {**_scores(est, truth), "decode_cpu_s": dcpu}
    if keep_specified:
        out["_specified"] = (reports, server)
    return out


def _prr_as_specified(data, f: float):
    """The paper's PRR in pure-LDP's per-bit style: with probability ``f`` the bit is replaced by a
    fair coin (``1`` w.p. ``f/2``, ``0`` w.p. ``f/2``), else kept; one ``random.random()`` per bit."""
    for i in range(len(data)):
        u = random.random()
        if u < f:
            data[i] = int(u < 0.5 * f)
    return data


def _spread(vals) -> dict:
    return {"median": float(np.median(vals)), "mean": float(np.mean(vals)), "min": float(np.min(vals)),
            "max": float(np.max(vals))}


def run(quick: bool = False, rounds: int = ROUNDS) -> dict:
    rounds = 2 if quick else rounds
    x = load_candidates(200 if quick else K_PLACES)
    n, k = x.size, int(x.max()) + 1
    truth = np.bincount(x, minlength=k) / n
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    cells = {}
    for f in FS:
        runs = {"ours": [], "theirs": []}
        for r in range(rounds):
            for who in (("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")):
                c0 = time.process_time()
                runs[who].append(ours(f, x, k, truth, r) if who == "ours" else theirs(f, x, k, truth, r))
                print(f"f={f} round {r} {who}: {time.process_time() - c0:.1f} s CPU", file=sys.stderr, flush=True)
        o, t = runs["ours"], runs["theirs"]
        cell = {"spec": o[0]["spec"], "n": n, "k": k, "eps_perm_ours": o[0]["eps_perm"],
                "eps_ldp_ours": o[0]["eps_ldp"], "eps_pure_ldp": t[0]["eps"],
                "accuracy": {}, "per_round": {"ours": o, "pure_ldp": t}}
        for name, rows in (("pure-LDP regression", [c["regression"] for c in t]),
                           ("pure-LDP regression, PRR as specified", [c["regression_prr_as_specified"] for c in t]),
                           ("pure-LDP regression on our reports", [c["pure_ldp_decoder_on_these_reports"] for c in o]),
                           ("ours ridge (penalty by cohort CV)", [c["ridge"] for c in o]),
                           ("ours nnls", [c["nnls"] for c in o]), ("ours em (bit counts)", [c["em"] for c in o]),
                           ("ours em-exact (MLE)", [c["em-exact"] for c in o])):
            cell["accuracy"][name] = {key: _spread([c[key] for c in rows]) for key in rows[0]}
        # paired by round (same values, seed r): our decoders against pure-LDP's regression
        sign = {"mse": -1.0, **{f"precision_at_{t_}": 1.0 for t_ in TOPS}}  # +1: higher is better
        cell["paired_vs_pure_ldp"] = {
            dec: {key: {"ours_better": int(sum(sg * a[dec][key] > sg * b["regression"][key] for a, b in zip(o, t))),
                        "equal": int(sum(a[dec][key] == b["regression"][key] for a, b in zip(o, t))),
                        "ours_worse": int(sum(sg * a[dec][key] < sg * b["regression"][key] for a, b in zip(o, t)))}
                  for key, sg in sign.items()}
            for dec in ("ridge", "nnls", "em", "em-exact")}
        cell["paired_vs_pure_ldp_prr_as_specified"] = {
            dec: {key: {"ours_better": int(sum(sg * a[dec][key] > sg * b["regression_prr_as_specified"][key]
                                               for a, b in zip(o, t))),
                        "equal": int(sum(a[dec][key] == b["regression_prr_as_specified"][key] for a, b in zip(o, t))),
                        "ours_worse": int(sum(sg * a[dec][key] < sg * b["regression_prr_as_specified"][key]
                                              for a, b in zip(o, t)))}
                  for key, sg in sign.items()}
            for dec in ("ridge", "nnls", "em", "em-exact")}
        # decoders alone: ours against pure-LDP's server code on the very same reports
        cell["paired_vs_pure_ldp_decoder_same_reports"] = {
            dec: {key: {"ours_better": int(sum(sg * a[dec][key] > sg * a["pure_ldp_decoder_on_these_reports"][key]
                                               for a in o)),
                        "equal": int(sum(a[dec][key] == a["pure_ldp_decoder_on_these_reports"][key] for a in o)),
                        "ours_worse": int(sum(sg * a[dec][key] < sg * a["pure_ldp_decoder_on_these_reports"][key]
                                              for a in o))}
                  for key, sg in sign.items()}
            for dec in ("ridge", "nnls", "em", "em-exact")}
        oc = float(np.median([c["client_cpu_s"] for c in o]))
        tc = float(np.median([c["client_cpu_s"] for c in t]))
        cell.update(client_reports_per_cpu_s_ours=n / oc, client_reports_per_cpu_s_pure_ldp=n / tc,
                    client_speedup_cpu=tc / oc)
        cells[f"f={f}"] = cell
    return {"benchmark": "rappor", "data": f"{DATA.name}, column 5, the {k} most visited places", "n": n, "k": k,
            "m": M, "h": H, "cohorts": COHORTS, "rounds": rounds, "statistic": "median (min, max) over rounds",
            "quick": quick, "total_wall_s": time.perf_counter() - t0, "load_before": load_before,
            "load_after": os.getloadavg(), "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
            "machine": machine(), "pure-ldp": version("pure-ldp"), "scikit-learn": version("scikit-learn"),
            "cells": cells}


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------ accuracy only

ACC_ROUNDS = 60
ACC_OUT = HERE / "results-rappor-accuracy.json"
ACC_VERSION = 1  # format of results-rappor-accuracy.json
_TIMING = ("client_cpu_s", "client_wall_s", "decode_cpu_s")


def _untimed(d):
    """``d`` without its timing fields (the accuracy-only mode measures no time)."""
    if isinstance(d, dict):
        return {k_: _untimed(v) for k_, v in d.items() if k_ not in _TIMING}
    return d


def _wide(mech, bits: np.ndarray, cohort: np.ndarray):
    """pure-LDP's reports (``n x m`` bits, cohorts) in our bit-vector format, as distinct reports and
    counts: cohort as little-endian uint16, then the bits packed little-endian."""
    wide = np.empty((bits.shape[0], mech.report_bytes), dtype=np.uint8)
    wide[:, 0] = cohort & 0xFF
    wide[:, 1] = cohort >> 8
    wide[:, 2:] = np.packbits(bits, axis=1, bitorder="little")
    return np.unique(wide, axis=0, return_counts=True)


def theirs_accuracy(f: float, x: np.ndarray, k: int, truth: np.ndarray, seed: int) -> dict:
    """Accuracy only: pure-LDP as shipped and with the PRR as specified (as :func:`theirs`, same
    seeds, so the same reports), plus OUR decoders (``ridge``, ``em-exact``) on the specified-PRR
    reports with pure-LDP's Bloom design: its hash functions of this round turned into per-cohort
    positions ``pos[c, x, i] = hash_family[c][i](str(x))`` and passed as ``decode(..., bloom=pos)``."""
    full = theirs(f, x, k, truth, seed, keep_specified=True)
    reports, server = full.pop("_specified")  # the very reports of ``regression_prr_as_specified``
    out = _untimed(full)
    pos = np.array([[[server.hash_family[c][i](str(v)) for i in range(H)] for v in range(k)]
                    for c in range(COHORTS)], dtype=np.int64)                    # cohorts x k x h
    bits = np.array([b for b, _ in reports], dtype=np.uint8)
    cohort = np.array([c for _, c in reports], dtype=np.int64)
    mech = parse(f"rappor(k={k},m={M},h={H},cohorts={COHORTS},f={f},p=0.0,q=1.0)")
    uniq, cnt = _wide(mech, bits, cohort)
    bc = mech.bit_counts(uniq, cnt)
    out["ours_on_prr_as_specified"] = {}
    for method in ("ridge", "em-exact"):
        dec = decode(mech, uniq, cnt, bloom=pos, method=method) if method == "em-exact" else \
            decode(mech, bit_counts=bc, bloom=pos, method=method)
        out["ours_on_prr_as_specified"][method] = _scores(dec.distribution, truth)
        if method == "ridge":
            out["ours_on_prr_as_specified"][method]["penalty"] = dec.extra["penalty"]
    return out


def ours_design_per_round(f: float, x: np.ndarray, k: int, truth: np.ndarray, seed: int) -> dict:
    """Our collection with a different Bloom design in every round: ``keys=labels`` with the labels
    ``salt{seed}:{place}``, i.e. our documented hashing of other candidate keys (the design another
    deployment gets). pure-LDP draws its hash seeds per instance (here: per round); ours are fixed by
    the documented hashing, so this arm separates the protocol from our one design. Same rng seed as
    :func:`ours`; decoded with ``ridge`` and ``em-exact``."""
    from localpriv.domains import CategoricalDomain
    dom = CategoricalDomain([f"salt{seed}:{i}" for i in range(k)])
    mech = parse(f"rappor(m={M},h={H},cohorts={COHORTS},f={f},p=0.0,q=1.0,keys=labels)", dom)
    reports = mech.sample(x, np.random.default_rng(seed))
    uniq, cnt = np.unique(reports, axis=0, return_counts=True)
    bc = mech.bit_counts(uniq, cnt)
    out = {"eps_perm": mech.epsilon_perm()}
    for method in ("ridge", "em-exact"):
        dec = decode(mech, uniq, cnt, method=method) if method == "em-exact" else \
            decode(mech, bit_counts=bc, method=method)
        out[method] = _scores(dec.distribution, truth)
        if method == "ridge":
            out[method]["penalty"] = dec.extra["penalty"]
    return out


#: the arms of the accuracy-only mode: name -> (who, path to its scores in that side's round dict)
ACC_ARMS = {
    "pure-LDP as shipped (weaker channel)": ("pure_ldp", ("regression",)),
    "pure-LDP, PRR as specified": ("pure_ldp", ("regression_prr_as_specified",)),
    "pure-LDP's decoder on our reports": ("ours", ("pure_ldp_decoder_on_these_reports",)),
    "ours ridge": ("ours", ("ridge",)),
    "ours nnls": ("ours", ("nnls",)),
    "ours em (bit counts)": ("ours", ("em",)),
    "ours em-exact (MLE)": ("ours", ("em-exact",)),
    "ours ridge, design per round": ("ours_design_per_round", ("ridge",)),
    "ours em-exact, design per round": ("ours_design_per_round", ("em-exact",)),
    "ours ridge on pure-LDP's reports (PRR as specified)": ("pure_ldp", ("ours_on_prr_as_specified", "ridge")),
    "ours em-exact on pure-LDP's reports (PRR as specified)": ("pure_ldp", ("ours_on_prr_as_specified", "em-exact")),
}
#: paired comparisons (arm, against, what it isolates)
ACC_PAIRS = (
    [(f"ours {d}", "pure-LDP as shipped (weaker channel)", "against pure-LDP as shipped")
     for d in ("ridge", "nnls", "em (bit counts)", "em-exact (MLE)")]
    + [(f"ours {d}", "pure-LDP, PRR as specified", "against pure-LDP on the specified channel")
       for d in ("ridge", "nnls", "em (bit counts)", "em-exact (MLE)")]
    + [(f"ours {d}", "pure-LDP's decoder on our reports", "decoders alone, our reports")
       for d in ("ridge", "nnls", "em (bit counts)", "em-exact (MLE)")]
    + [("ours ridge, design per round", "pure-LDP, PRR as specified", "design per round against pure-LDP"),
       ("ours em-exact, design per round", "pure-LDP, PRR as specified", "design per round against pure-LDP"),
       ("ours ridge, design per round", "ours ridge", "design per round against our fixed design"),
       ("ours em-exact, design per round", "ours em-exact (MLE)", "design per round against our fixed design"),
       ("ours ridge on pure-LDP's reports (PRR as specified)", "pure-LDP, PRR as specified",
        "decoders alone, pure-LDP's reports"),
       ("ours em-exact on pure-LDP's reports (PRR as specified)", "pure-LDP, PRR as specified",
        "decoders alone, pure-LDP's reports"),
       ("ours ridge", "ours ridge on pure-LDP's reports (PRR as specified)",
        "collections alone (our fixed design against pure-LDP's per-round designs), decoder ridge"),
       ("ours em-exact (MLE)", "ours em-exact on pure-LDP's reports (PRR as specified)",
        "collections alone, decoder em-exact"),
       ("pure-LDP's decoder on our reports", "pure-LDP, PRR as specified",
        "collections alone, pure-LDP's decoder")])
_SIGN = {"mse": -1.0, **{f"precision_at_{t_}": 1.0 for t_ in TOPS}}  # +1: higher is better


def _arm_rows(rounds_rows: list, arm: str) -> list:
    who, path = ACC_ARMS[arm]
    out = []
    for row in rounds_rows:
        v = row[who]
        for key in path:
            v = v[key]
        out.append(v)
    return out


def _paired(a_rows: list, b_rows: list) -> dict:
    """Per metric, rounds where ``a`` is better / equal / worse than ``b`` (lower MSE, higher
    precision), the means of both, and the two-sided sign test: exact binomial test of
    ``better`` among the untied rounds against 1/2 (``scipy.stats.binomtest``; 1.0 with no untied
    round)."""
    from scipy.stats import binomtest
    out = {}
    for key, sg in _SIGN.items():
        a = np.array([r[key] for r in a_rows], dtype=float)
        b = np.array([r[key] for r in b_rows], dtype=float)
        better, worse = int(np.sum(sg * a > sg * b)), int(np.sum(sg * a < sg * b))
        untied = better + worse
        out[key] = {"better": better, "equal": int(a.size - untied), "worse": worse,
                    "sign_test_p": float(binomtest(better, untied).pvalue) if untied else 1.0,
                    "mean": float(a.mean()), "mean_against": float(b.mean())}
    return out


def _acc_summary(per_f: dict, n: int, k: int) -> dict:
    cells = {}
    for fkey, rows in per_f.items():
        if not rows:
            continue
        cell = {"spec": rows[0]["ours"]["spec"], "n": n, "k": k, "eps_perm_ours": rows[0]["ours"]["eps_perm"],
                "eps_ldp_ours": rows[0]["ours"]["eps_ldp"], "eps_pure_ldp": rows[0]["pure_ldp"]["eps"],
                "eps_perm_ours_design_per_round": _spread([r["ours_design_per_round"]["eps_perm"] for r in rows]),
                "ridge_penalty": {a: _spread([s["penalty"] for s in _arm_rows(rows, a)])
                                  for a in ACC_ARMS if "ridge" in a},
                "accuracy": {}, "paired": []}
        for arm in ACC_ARMS:
            ar = _arm_rows(rows, arm)
            cell["accuracy"][arm] = {key: _spread([s[key] for s in ar]) for key in _SIGN}
        for a, b, what in ACC_PAIRS:
            cell["paired"].append({"arm": a, "against": b, "isolates": what,
                                   **_paired(_arm_rows(rows, a), _arm_rows(rows, b))})
        cell["per_round"] = rows
        cells[fkey] = cell
    return cells


def run_accuracy(quick: bool = False, rounds: int = ACC_ROUNDS, out: Path | None = None,
                 deadline: float | None = None) -> dict:
    """The accuracy arms only, no timing, seeds ``0..rounds-1``. The loop is over rounds, then
    ``f`` (so a run cut short has the same rounds at every ``f``); within a round the sides are
    interleaved as in :func:`run` (ours first on even rounds, pure-LDP first on odd ones; every side
    seeds its own generators, so the order changes no number). After every round the JSON so far is
    written to ``out`` atomically (``complete: false`` until the last round). ``deadline`` (epoch
    seconds): no round is started that would, at the last round's duration, end after it."""
    requested = 2 if quick else rounds
    x = load_candidates(200 if quick else K_PLACES)
    n, k = x.size, int(x.max()) + 1
    truth = np.bincount(x, minlength=k) / n
    started, load_before, t0 = now(), load(), time.perf_counter()
    per_f = {f"f={f}": [] for f in FS}
    cmd = "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/rappor.py --accuracy-only" + (
        f" --rounds {rounds}" if rounds != ACC_ROUNDS else "") + (" --quick" if quick else "")
    res, stopped, last = None, None, 0.0
    for r in range(requested):
        if deadline is not None and time.time() + last > deadline:
            stopped = f"deadline: round {r} would end after {time.strftime('%H:%M', time.gmtime(deadline))} UTC"
            break
        tr = time.perf_counter()
        for f in FS:
            row = {"round": r, "seed": r}
            sides = ("ours", "ours_design_per_round", "pure_ldp")
            for who in (sides if r % 2 == 0 else sides[::-1]):
                if who == "ours":
                    row[who] = _untimed(ours(f, x, k, truth, r))
                elif who == "pure_ldp":
                    row[who] = theirs_accuracy(f, x, k, truth, r)
                else:
                    row[who] = ours_design_per_round(f, x, k, truth, r)
            per_f[f"f={f}"].append(row)
        last = time.perf_counter() - tr
        print(f"round {r}: {last:.1f} s wall", file=sys.stderr, flush=True)
        done = r + 1
        res = {"benchmark": "rappor-accuracy", "version": ACC_VERSION, "date": now(), "started": started,
               "command": cmd + (" --deadline HH:MM" if deadline is not None else ""),
               "reproduce": "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/rappor.py --accuracy-only"
                            f" --rounds {done}" + (" --quick" if quick else "") + " (same seeds, same numbers)",
               "complete": done == requested and stopped is None,
               "rounds": done, "rounds_requested": requested, "seeds": f"0..{done - 1}", "stopped": stopped,
               "timing": "not measured: accuracy only (the machine was shared; times belong to the timed "
                         "mode, benchmarks/results-rappor.json, on a quiet machine)",
               "data": f"{DATA.name}, column 5, the {k} most visited places", "n": n, "k": k,
               "m": M, "h": H, "cohorts": COHORTS, "fs": list(FS),
               "statistic": "median, mean, min, max over rounds; paired comparisons by round (same seed) with "
                            "the two-sided sign test on the untied rounds",
               "quick": quick, "total_wall_s": time.perf_counter() - t0, "load_before": load_before,
               "load_after": load(), "machine": machine(), "pure-ldp": version("pure-ldp"),
               "scikit-learn": version("scikit-learn"), "scipy": version("scipy"),
               "cells": _acc_summary(per_f, n, k)}
        if out is not None:
            _write_atomic(out, json.dumps(res, indent=1, default=float) + "\n")
    if res is not None:
        res["stopped"] = stopped
        res["complete"] = stopped is None and res["rounds"] == requested
        if out is not None:
            _write_atomic(out, json.dumps(res, indent=1, default=float) + "\n")
    return res


if __name__ == "__main__":
    quick = quick_flag()
    if "--accuracy-only" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else ACC_ROUNDS
        out = Path(sys.argv[sys.argv.index("--out") + 1]).resolve() if "--out" in sys.argv else \
            (None if quick else ACC_OUT)
        deadline = None
        if "--deadline" in sys.argv:  # HH:MM UTC, today
            hh, mm = (int(v) for v in sys.argv[sys.argv.index("--deadline") + 1].split(":"))
            import calendar
            t = time.gmtime()
            deadline = float(calendar.timegm((t.tm_year, t.tm_mon, t.tm_mday, hh, mm, 0)))
        res = run_accuracy(quick, rounds, out, deadline)
        print(json.dumps({k_: v for k_, v in res.items() if k_ != "cells"}, indent=2, default=float))
        sys.exit(0)
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else ROUNDS
    out = Path(sys.argv[sys.argv.index("--out") + 1]).resolve() if "--out" in sys.argv else None
    res = run(quick, rounds)
    if out is not None or not quick:
        _write_atomic(out or OUT, json.dumps(res, indent=2, default=float) + "\n")
    emit(res)
