"""The evidence behind the default estimator on every shape of data (``make estimator-evidence``).

For every *cell* -- data set x mechanism x LDP level x number of users ``n`` -- ``runs`` samples of
``n`` users are drawn i.i.d. from the data set's distribution, obfuscated, and estimated by every
estimator of the configuration, named as in the estimator registry
(:func:`localpriv.estimators.available_estimators`), and by :func:`localpriv.estimators.default_estimator`
of the domain (the column ``"default"``). A new estimator enters by adding its name to
``estimators``; a new default enters by itself.

Data (:func:`dataset`):

* ``ages`` -- UCI Adult ages on the line 0..99 (48,842 persons; ordered);
* ``hours`` -- UCI Adult hours-per-week on the line 1..99 (48,842; 47 % at 40; ordered, spiky);
* ``native-country`` -- UCI Adult native-country, 41 values, 91 % United-States (47,985 persons
  with a value; categorical);
* ``workclass`` -- UCI Adult workclass, 8 values, 74 % Private, two below 0.05 % (46,043;
  categorical);
* ``zipf-1k``, ``zipf-10k`` -- the Zipf law ``f_i ~ i^-s``, ``s`` = :data:`ZIPF_EXPONENT`, over 10^3
  and 10^4 values (categorical; the truth is the law itself).

The Adult columns are counted from ``../shared/data/adult.{data,test}`` into
``reproductions/adult_columns.csv`` (:func:`derive_adult_columns`; ``?`` is missing, not a value).

Mechanisms: k-RR, OUE, OLH, SS at ``eps``, and on ordered data the truncated geometric calibrated
so that the LDP level computed from its channel equals ``eps``
(:func:`localpriv.inference.simulation.calibrate`).

How reports are drawn (:func:`draw_observations`; each way is the exact law of what the estimators read):

* ``multinomial`` -- k-RR: report counts ``Multinomial(n, q + (p - q) f)`` (``O(k)``); the geometric:
  ``Multinomial(n, f M)``, estimated through its dense channel;
* ``per-user`` -- OUE, OLH, SS while ``n k <= report_budget``: every user's report with the
  mechanism's sampler (reports with equal likelihood columns merged for ``k <= 64``);
* ``support-counts`` -- OUE and OLH beyond the budget: the support counts
  ``C_v = Bin(N_v, p*) + Bin(n - N_v, q*)`` with ``N ~ Multinomial(n, f)``. For OUE this is the
  exact law of the counts (the bits are independent); for OLH it is the law under a uniformly
  random hash function. Only the estimators that read nothing but ``(C, n, p*, q*)``
  (:data:`SUPPORT_COUNT_ESTIMATORS`) run; the others are skipped with the reason. The counts are
  held as :func:`support_count_observations` (``k + 1`` nested reports of a unary encoding with the
  oracle's ``p*``, ``q*``: the same ``C`` and ``n``, so the same estimates). SS beyond the budget
  is not run (its support counts are not independent).

Metrics: total variation, mean squared error, EMD on ordered data (in the domain's unit), top-10
recall. The *primary* metric (regret and the paired test) is EMD on ordered data and TV on
categorical data.

Per cell and estimator: median, quartiles and mean of every metric over the runs. The default
against the best *other* estimator (lowest mean primary error, excluding the estimator the default
is) by the Wilcoxon signed-rank test over the paired runs (same reports) at ``level``; its regret:
its mean error over the lowest mean error of all estimators in the cell (the oracle's choice).
Verdict (:func:`paired_verdict`): ``best`` (lowest mean), ``tied`` (not lowest, the test does not
reject), ``worse`` (not lowest, the test rejects).

Chunks and resume: every cell is written as its own JSON file in ``cells_dir`` as soon as it is
done; a run skips the cells (and, within a cell, the estimators) already there with the same
configuration, and ``chunk = "i/m"`` runs only the cells with ``crc32(key) % m == i``, so ``m``
processes can share a grid and be stopped and restarted. Every cell, run and estimator has its own
generator (seeded from the experiment's seed and the cell's key), so chunks, resumes and merges
equal one run. :func:`assemble` reads any number of cell folders into the record.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
import zlib
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from localpriv.data.datasets import adult_ages
from localpriv.data.formats import atomic_output
from localpriv.data.observations import ObservationBlock, Observations
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.estimators import available_estimators, default_estimator, estimator_spec, fit
from localpriv.estimators.registry import accepts_setting
from localpriv.inference.metrics import emd_line, mse, total_variation
from localpriv.inference.simulation import calibrate, dense_twin, simulate_observations
from localpriv.mechanisms import KRR, parse
from localpriv.mechanisms.unary import UnaryEncoding, pack_bits
from localpriv.utils.validation import LocalPrivError
from reproductions.runner import Experiment, register_experiment, run_experiment, to_jsonable
from reproductions.table import rewrite_block

__all__ = ["NAME", "QUICK_NAME", "ESTIMATORS", "SUPPORT_COUNT_ESTIMATORS", "ZIPF_EXPONENT", "DATASETS", "MECHANISMS",
           "DEFAULTS", "EVIDENCE_QUICK", "TEST", "dataset", "derive_adult_columns", "plan", "draw_observations",
           "support_count_observations", "paired_verdict", "analyze_cell", "summarize", "assemble", "run_cells",
           "estimate_cpu", "render_summary", "render_full", "write_docs", "main"]

NAME = "estimator-evidence"
QUICK_NAME = "estimator-evidence-quick"
HERE = Path(__file__).resolve().parent
ADULT_COLUMNS = HERE / "adult_columns.csv"

#: the estimators compared, by registry name (``"default"`` is added to every cell)
ESTIMATORS = ["auto", "inv-p", "ibu", "ems", "dirichlet", "base-pos", "base-cut", "norm", "norm-mul", "norm-cut",
              "norm-sub", "power", "power-ns"]
#: where the channel cannot be enumerated (OLH, OUE and SS on more than 12 values, support-count cells)
FALLBACK = {"inv-p": "mi-p", "inv-n": "mi-n"}
#: the estimators that read nothing but the support counts, ``n``, ``p*`` and ``q*`` of a pure
#: oracle (``f~ = (C/n - q*)/(p* - q*)`` and its post-processing; checked in tests/test_evidence.py)
SUPPORT_COUNT_ESTIMATORS = ("mi-n", "mi-p", "ibu-support", "base-pos", "base-cut", "norm", "norm-mul", "norm-cut",
                            "norm-sub", "power", "power-ns")
#: the exponent ``s`` of the synthetic Zipf laws ``f_i ~ i^-s``
ZIPF_EXPONENT = 1.1
DATASETS = ["ages", "hours", "native-country", "workclass", "zipf-1k", "zipf-10k"]
#: mechanism name -> spec (``{eps}``; ``{lo}``, ``{hi}`` the line's ends); ``geometric`` on ordered data only
MECHANISMS = {"k-RR": "krr(eps={eps})", "OUE": "oue(eps={eps})", "OLH": "olh(eps={eps})", "SS": "ss(eps={eps})",
              "geometric": "geometric(eps={eps},lo={lo},hi={hi})"}
METRICS_ORDERED = ["emd", "tv", "mse", "recall10"]
METRICS_CATEGORICAL = ["tv", "mse", "recall10"]
#: most cells of one grid (a bound on the configuration, checked before anything runs)
MAX_CELLS = 5_000
#: most runs per cell and largest n
MAX_RUNS, MAX_N = 1_000, 10_000_000

DEFAULTS: dict[str, Any] = {
    "label": "evidence",
    "data": DATASETS,
    "mechanisms": list(MECHANISMS),
    "eps_ldp": [0.5, 1.0, 2.0, 4.0],
    "n": [10_000, 100_000, 1_000_000],
    "runs": 20,
    "estimators": ESTIMATORS,
    "settings": {},
    "report_budget": 10_000_000,
    "level": 0.95,
    "cells_dir": "out/estimator-evidence-cells",
    "chunk": "0/1",
    "compute": True,
    "status": True,
    "rerun": [],
    "existing_only": False,
    "only": [],
}
#: the check of the pipeline (``make estimator-evidence-quick``): n = 10^4 and 10^5, 5 runs, per-user
#: oracles at n k <= 10^6 only (EMS takes ~160 CPU s per run on 10^5 per-user OUE reports of ages)
EVIDENCE_QUICK: dict[str, Any] = {"label": "quick", "n": [10_000, 100_000], "runs": 5, "report_budget": 1_000_000,
                                  "cells_dir": "out/estimator-evidence-quick-cells"}
#: the default's regret (``make default-regret``, decision 0076): 20 runs on the cells of the quick run
#: where ``auto`` was behind the best other estimator (hours-per-week under k-RR, native-country and
#: the Zipf laws under k-RR where PowerNS or Power led) and on two Adult-ages cells where the rule of
#: decision 0076 chose differently from the former one
REGRET_NAME = "default-regret"
REGRET_CELLS = [
    *(f"hours|k-RR|eps={e:g}|n={n}" for e in (0.5, 1.0, 2.0, 4.0) for n in (10_000, 100_000)),
    "native-country|k-RR|eps=0.5|n=10000", "native-country|k-RR|eps=0.5|n=100000",
    "zipf-1k|k-RR|eps=4|n=10000", "zipf-1k|k-RR|eps=4|n=100000", "zipf-1k|k-RR|eps=2|n=100000",
    "ages|k-RR|eps=1|n=100000", "ages|k-RR|eps=0.5|n=100000"]
REGRET: dict[str, Any] = {**EVIDENCE_QUICK, "label": "default-regret", "runs": 20, "only": REGRET_CELLS,
                          "cells_dir": "out/default-regret-cells"}
#: ``--quick`` (the tests): every way of drawing reports in a few seconds
TEST: dict[str, Any] = {"label": "test", "data": ["ages", "workclass", "zipf-1k"], "mechanisms": ["k-RR", "OUE",
                        "geometric"], "eps_ldp": [2.0], "n": [1_000, 20_000], "runs": 3,
                        "estimators": ["inv-p", "ibu", "norm-sub", "base-cut"], "report_budget": 200_000,
                        "cells_dir": "out/estimator-evidence-test-cells", "status": False, "only": []}


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------
class Data:
    """A data set: domain, truth, kind (``line`` or ``categorical``) and error metrics."""

    def __init__(self, name: str, domain, counts, kind: str, unit: str | None, source: str):
        self.name, self.domain, self.kind, self.unit, self.source = name, domain, kind, unit, source
        c = np.asarray(counts, dtype=float)
        self.records = float(c.sum())
        self.theta = c / c.sum()
        self.top = np.argsort(-self.theta, kind="stable")[:10]

    @property
    def ordered(self) -> bool:
        return self.kind == "line"

    @property
    def primary(self) -> str:
        return "emd" if self.ordered else "tv"

    @property
    def metrics(self) -> list[str]:
        return METRICS_ORDERED if self.ordered else METRICS_CATEGORICAL

    def errors(self, est: np.ndarray) -> dict[str, float | None]:
        """TV, MSE, EMD (ordered) and top-10 recall ``|top10(est) & top10(truth)| / 10`` (ties
        broken by index; ``None`` when there are at most 10 values)."""
        out: dict[str, float | None] = {"tv": total_variation(self.theta, est), "mse": mse(self.theta, est)}
        if self.ordered:
            out["emd"] = emd_line(self.theta, est)
        if self.theta.size > 10:
            mine = np.argsort(-np.asarray(est, dtype=float), kind="stable")[:10]
            out["recall10"] = float(np.intersect1d(mine, self.top).size / 10)
        else:
            out["recall10"] = None
        return out

    def describe(self) -> dict:
        return {"k": int(self.theta.size), "kind": self.kind, "records": self.records, "unit": self.unit,
                "support": int(np.count_nonzero(self.theta)), "top_share": float(self.theta.max()),
                "values_below_0.1%": int(np.count_nonzero(self.theta < 1e-3)), "source": self.source}


def derive_adult_columns(shared_dir="/work/shared/data") -> str:
    """The text of ``adult_columns.csv``: ``column,value,count`` of hours-per-week (column 13),
    workclass (2) and native-country (14) over the complete rows (15 fields) of ``adult.data`` and
    ``adult.test``; ``?`` (missing) is not counted."""
    cols = {"hours-per-week": 12, "workclass": 1, "native-country": 13}
    counts: dict[str, dict[str, int]] = {c: {} for c in cols}
    for fname in ("adult.data", "adult.test"):
        with open(Path(shared_dir) / fname) as fh:
            for line in fh:
                parts = [p.strip() for p in line.strip().rstrip(".").split(",")]
                if len(parts) < 15:
                    continue
                for c, i in cols.items():
                    if parts[i] != "?":
                        counts[c][parts[i]] = counts[c].get(parts[i], 0) + 1
    rows = ["column,value,count"]
    for c in cols:
        order = sorted(counts[c], key=lambda v: (int(v),) if c == "hours-per-week" else (-counts[c][v], v))
        rows += [f"{c},{v},{counts[c][v]}" for v in order]
    return "\n".join(rows) + "\n"


def _adult_column(column: str) -> tuple[list[str], np.ndarray]:
    labels, counts = [], []
    with open(ADULT_COLUMNS) as fh:
        for row in csv.DictReader(fh):
            if row["column"] == column:
                labels.append(row["value"])
                counts.append(int(row["count"]))
    return labels, np.asarray(counts, dtype=float)


@cache
def dataset(name: str) -> Data:
    """The data set ``name`` (:data:`DATASETS`)."""
    if name == "ages":
        dom = IntegerDomain(0, 99)
        return Data(name, dom, np.bincount(dom.encode(adult_ages()), minlength=dom.size), "line", "years",
                    "UCI Adult ages (adult.data + adult.test), line 0..99")
    if name == "hours":
        labels, counts = _adult_column("hours-per-week")
        dom = IntegerDomain(1, 99)
        c = np.zeros(dom.size)
        c[np.asarray([int(v) for v in labels]) - 1] = counts
        return Data(name, dom, c, "line", "hours", "UCI Adult hours-per-week, line 1..99")
    if name in ("native-country", "workclass"):
        labels, counts = _adult_column(name)
        return Data(name, CategoricalDomain(labels), counts, "categorical", None,
                    f"UCI Adult {name} ('?' = missing, left out), {len(labels)} values")
    if name in ("zipf-1k", "zipf-10k"):
        k = 1_000 if name == "zipf-1k" else 10_000
        f = np.arange(1, k + 1, dtype=float) ** -ZIPF_EXPONENT
        return Data(name, CategoricalDomain([f"v{i}" for i in range(k)]), f / f.sum(), "categorical", None,
                    f"Zipf law f_i ~ i^-{ZIPF_EXPONENT} over {k:,} values (exact law, no sample)")
    raise LocalPrivError(f"{NAME}: unknown data set {name!r}; known: {', '.join(DATASETS)}")


# --------------------------------------------------------------------------------------------
# the grid
# --------------------------------------------------------------------------------------------
def _key(data: str, mech: str, eps: float, n: int) -> str:
    return f"{data}|{mech}|eps={eps:g}|n={n}"


def plan(params: dict) -> list[dict]:
    """Every cell of the configuration (data x mechanism x eps x n), in order; refuses a grid of
    more than :data:`MAX_CELLS` cells, unknown data or mechanisms, or runs / n past their bounds."""
    for name in params["data"]:
        if name not in DATASETS:
            raise LocalPrivError(f"{NAME}: unknown data set {name!r}; known: {', '.join(DATASETS)}")
    for m in params["mechanisms"]:
        if m not in MECHANISMS:
            raise LocalPrivError(f"{NAME}: unknown mechanism {m!r}; known: {', '.join(MECHANISMS)}")
    if not 1 <= int(params["runs"]) <= MAX_RUNS:
        raise LocalPrivError(f"{NAME}: runs must be in 1..{MAX_RUNS} (the bound on runs per cell)")
    if any(not 1 <= int(n) <= MAX_N for n in params["n"]):
        raise LocalPrivError(f"{NAME}: n must be in 1..{MAX_N:,} (the bound on users per cell)")
    cells = []
    for d in params["data"]:
        ordered = dataset(d).ordered
        for m in params["mechanisms"]:
            if m == "geometric" and not ordered:
                continue
            for e in params["eps_ldp"]:
                for n in params["n"]:
                    cells.append({"key": _key(d, m, float(e), int(n)), "data": d, "mechanism": m,
                                  "eps_ldp": float(e), "n": int(n)})
    if params.get("only"):  # a restriction to the named cells (keys)
        only = set(params["only"])
        cells = [c for c in cells if c["key"] in only]
    if len(cells) > MAX_CELLS:
        raise LocalPrivError(f"{NAME}: {len(cells)} cells, above the bound of {MAX_CELLS}")
    return cells


def _chunk(spec: str) -> tuple[int, int]:
    try:
        i, m = (int(x) for x in str(spec).split("/"))
    except ValueError:
        raise LocalPrivError(f"{NAME}: chunk must be 'i/m' with 0 <= i < m, got {spec!r}") from None
    if not 0 <= i < m:
        raise LocalPrivError(f"{NAME}: chunk must be 'i/m' with 0 <= i < m, got {spec!r}")
    return i, m


def in_chunk(key: str, spec: str) -> bool:
    """Whether the cell ``key`` belongs to chunk ``"i/m"`` (``crc32(key) % m == i``)."""
    i, m = _chunk(spec)
    return zlib.crc32(key.encode()) % m == i


@cache
def _mechanism(data: str, mech: str, eps: float) -> tuple[Any, Any, float | None]:
    """(mechanism, dense twin or None, calibrated metric parameter or None) of a cell."""
    d = dataset(data)
    fmt = MECHANISMS[mech]
    if mech == "geometric":
        fmt = fmt.replace("{lo}", str(d.domain.lo)).replace("{hi}", str(d.domain.hi))
        e, _ = calibrate(fmt, d.domain, eps)
        m = parse(fmt.format(eps=repr(float(e))), d.domain)
        return m, dense_twin(m, 1_000_000, True), float(e)
    return parse(fmt.format(eps=repr(float(eps))), d.domain), None, None


def _draw_kind(mech: Any, n: int, budget: int) -> str | None:
    """``multinomial``, ``per-user``, ``support-counts`` or ``None`` (not run)."""
    if isinstance(mech, KRR) or getattr(mech, "report_kind", None) != "binary" and mech.n_outputs is not None \
            and not hasattr(mech, "p_star"):
        return "multinomial"
    if n * mech.k <= budget:
        return "per-user"
    name = type(mech).__name__
    return "support-counts" if name in ("OUE", "OLH") else None


def support_count_observations(C, n: int, p: float, q: float, domain) -> Observations:
    """Observations with support counts ``C`` from ``n`` reports of a pure oracle ``(p*, q*)``.

    ``C`` sorted decreasingly, ``C_(1) >= ... >= C_(k)``: report ``j`` (``j = 1..k``) sets the
    bits of the ``j`` largest, with count ``C_(j) - C_(j+1)`` (``C_(k+1) = 0``), and the empty
    report has count ``n - C_(1)``; so value ``(i)`` is in the support of reports ``i..k``, whose
    counts sum to ``C_(i)``, and the counts sum to ``n``. The mechanism is the unary encoding with
    bit probabilities ``p``, ``q``. Estimators that read only ``(C, n, p*, q*)`` give the same
    estimate as from the real reports; any other estimator would not (it is not run on these).
    """
    C = np.asarray(C, dtype=float)
    k = C.size
    if np.any(C < 0) or np.any(n < C) or C.ndim != 1:
        raise LocalPrivError("support counts must be a vector of values in 0..n")
    order = np.argsort(-C, kind="stable")
    c = C[order]
    w = np.concatenate([c[:-1] - c[1:], c[-1:]])
    rows, counts = [], []
    step = max(1, 4_000_000 // k)
    for s in range(0, k, step):
        e = min(k, s + step)
        bits = np.zeros((e - s, k), dtype=bool)
        ranks = np.empty(k, dtype=np.int64)
        ranks[order] = np.arange(k)
        bits[:] = ranks[None, :] <= np.arange(s, e)[:, None]
        keep = w[s:e] > 0
        rows.append(pack_bits(bits[keep]))
        counts.append(w[s:e][keep])
    if n - c[0] > 0:
        rows.append(np.zeros((1, (k + 7) // 8), dtype=np.uint8))
        counts.append(np.array([n - c[0]], dtype=float))
    mech = UnaryEncoding(k, p, q)
    return Observations([ObservationBlock(mech, np.concatenate(rows), np.concatenate(counts))], domain)


def draw_observations(kind: str, mech: Any, twin: Any, theta: np.ndarray, n: int, rng: np.random.Generator,
                      domain) -> Observations:
    """The observations of ``n`` users drawn from ``theta`` (see the module docstring for ``kind``)."""
    if kind == "multinomial" and isinstance(mech, KRR):
        p = mech.p_other + (mech.p_keep - mech.p_other) * theta
        c = rng.multinomial(n, p / p.sum())
        keep = np.flatnonzero(c)
        return Observations([ObservationBlock(mech, keep, c[keep])], domain)
    if kind in ("multinomial", "per-user"):
        return simulate_observations(mech, twin, theta, n, rng, domain)
    if kind == "support-counts":
        N = rng.multinomial(n, theta)
        p, q = float(mech.p_star), float(mech.q_star)
        C = rng.binomial(N, p) + rng.binomial(n - N, q)
        return support_count_observations(C, n, p, q, domain)
    raise LocalPrivError(f"{NAME}: no way to draw {kind!r} reports")


# --------------------------------------------------------------------------------------------
# one cell
# --------------------------------------------------------------------------------------------
def _seed(base: int, key: str, run: int, name: str = "") -> np.random.Generator:
    return np.random.default_rng([base, zlib.crc32(key.encode()), run, zlib.crc32(name.encode())])


def _method(name: str, mech: Any, kind: str, data: Data, registered: set) -> tuple[str, str | None]:
    """(the registered method run for the column ``name``, why it is skipped or ``None``)."""
    if name not in registered:
        return name, f"estimator {name!r} is not registered"
    spec = estimator_spec(name)
    method = name
    if "finite-channel" in spec.tags and (kind == "support-counts" or mech.n_outputs is None):
        method = FALLBACK.get(name, name)
        if method == name:
            return name, "needs a finite channel"
    if "ordered-domain" in estimator_spec(method).tags and not data.ordered:
        return method, "ordered domains only: the data set is categorical"
    if kind == "support-counts" and method not in SUPPORT_COUNT_ESTIMATORS:
        return method, "needs the individual reports: this cell draws support counts (n k above report_budget)"
    return method, None


def _settings(method: str, params: dict, rng: np.random.Generator) -> dict:
    kw = dict(params.get("settings", {}).get(method, {}))
    if accepts_setting(method, "rng") and "rng" not in kw:
        kw["rng"] = int(rng.integers(2 ** 31))
    if accepts_setting(method, "loglik") and "loglik" not in kw:
        kw["loglik"] = False  # the log-likelihood of the reports is not what is measured
    if accepts_setting(method, "keep_trace") and "keep_trace" not in kw:
        kw["keep_trace"] = False
    return kw


def _summary(values) -> dict:
    a = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if a.size == 0:
        return {"median": None, "q25": None, "q75": None, "mean": None, "ok": 0}
    q = np.quantile(a, [0.25, 0.5, 0.75])
    return {"median": float(q[1]), "q25": float(q[0]), "q75": float(q[2]), "mean": float(a.mean()), "ok": int(a.size)}


def _cell_config(params: dict, base: int) -> dict:
    return {"base_seed": int(base), "runs": int(params["runs"]), "report_budget": int(params["report_budget"]),
            "zipf_exponent": ZIPF_EXPONENT, "settings": params.get("settings", {})}


def run_cell(cell: dict, params: dict, base: int, registered: set, old: dict | None = None) -> dict:
    """Run one cell (or, given its earlier record ``old`` of the same configuration, only the
    columns it lacks) and return its record."""
    d = dataset(cell["data"])
    mech, twin, eps_metric = _mechanism(cell["data"], cell["mechanism"], cell["eps_ldp"])
    n, runs = cell["n"], int(params["runs"])
    kind = _draw_kind(mech, n, int(params["report_budget"]))
    default = default_estimator(d.domain)
    rec = old if old is not None else {
        **cell, "kind": d.kind, "spec": str(mech), "eps_metric": eps_metric, "runs": runs, "draw": kind,
        "primary": d.primary, "config": _cell_config(params, base), "estimators": {}, "skipped": {},
        "seconds": {"draw": 0.0, "total": 0.0}}
    rec["default_method"] = default
    if kind is None:
        rec["skipped_cell"] = (f"{cell['mechanism']}: n k = {n * mech.k:,} above report_budget "
                               f"{int(params['report_budget']):,}, and its support counts are not independent")
        return rec
    names = list(dict.fromkeys([*params["estimators"], "default"]))
    todo: dict[str, str] = {}
    for name in names:
        method, why = _method(default if name == "default" else name, mech, kind, d, registered)
        have = rec["estimators"].get(name)
        if why:
            rec["skipped"][name] = why
            rec["estimators"].pop(name, None)
            continue
        rec["skipped"].pop(name, None)
        if have is not None and have["method"] == method:
            continue
        todo[name] = method
    if not todo:
        return rec
    t0 = time.process_time()
    # the default column is the registered estimator it names, run with the same per-run seed
    by_method: dict[str, list[str]] = {}
    for name, method in todo.items():
        by_method.setdefault(method, []).append(name)
    vals = {name: {m: [] for m in d.metrics} for name in todo}
    info = {name: {"seconds": 0.0, "failed": 0, "not_converged": 0, "first_error": None} for name in todo}
    for r in range(runs):
        t = time.process_time()
        obs = draw_observations(kind, mech, twin, d.theta, n, _seed(base, cell["key"], r), d.domain)
        rec["seconds"]["draw"] += time.process_time() - t
        for method, labels in by_method.items():
            kw = _settings(method, params, _seed(base, cell["key"], r, method))
            t = time.process_time()
            try:
                f = fit(obs, method, **kw)
                err = d.errors(f.distribution)
                nc = f.converged is False
                msg = None
            except LocalPrivError as exc:
                err, nc, msg = dict.fromkeys(d.metrics), False, str(exc)[:300]
            dt = time.process_time() - t
            for name in labels:
                for m in d.metrics:
                    vals[name][m].append(err[m])
                info[name]["seconds"] += dt / len(labels)
                info[name]["not_converged"] += int(nc)
                if msg is not None:
                    info[name]["failed"] += 1
                    info[name]["first_error"] = info[name]["first_error"] or msg
    for name, method in todo.items():
        rec["estimators"][name] = {"method": method, "values": vals[name],
                                   "summary": {m: _summary(vals[name][m]) for m in d.metrics},
                                   "seconds": round(info[name]["seconds"], 3), "failed": info[name]["failed"],
                                   "not_converged": info[name]["not_converged"],
                                   "first_error": info[name]["first_error"]}
    order = [x for x in names if x in rec["estimators"]]
    rec["estimators"] = {x: rec["estimators"][x] for x in order}
    rec["seconds"]["draw"] = round(rec["seconds"]["draw"], 3)
    rec["seconds"]["total"] = round(rec["seconds"]["total"] + time.process_time() - t0, 3)
    return rec


def _cell_path(cells_dir: Path, key: str) -> Path:
    slug = "".join(ch if ch.isalnum() or ch in "-=." else "_" for ch in key)
    return Path(cells_dir) / f"{slug}.json"


def _read_cell(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def run_cells(params: dict, base: int, progress=None) -> dict:
    """Run the cells of ``params["chunk"]`` that ``params["cells_dir"]`` lacks (resume), writing
    each cell's record there atomically as soon as it is done; returns counts of what was done."""
    cells_dir = Path(params["cells_dir"])
    cells_dir.mkdir(parents=True, exist_ok=True)
    registered = set(available_estimators())
    config = _cell_config(params, base)
    mine = [c for c in plan(params) if in_chunk(c["key"], params["chunk"])]
    if params.get("existing_only"):  # only the cells the folder already holds (new columns, reruns)
        mine = [c for c in mine if _cell_path(cells_dir, c["key"]).exists()]
    budget = int(params["report_budget"])
    # a cross-section first: every data set and mechanism at the smallest n, eps from 1 outwards
    # (1, 2, 0.5, 4), then the next n; the per-user oracles on ordered data (EMS on individual
    # reports: the costliest cells by far) last
    mine.sort(key=lambda c: (dataset(c["data"]).ordered and _draw_kind(
        _mechanism(c["data"], c["mechanism"], c["eps_ldp"])[0], c["n"], budget) == "per-user",
        c["n"], abs(np.log2(c["eps_ldp"])), -c["eps_ldp"]))
    done = {"cells": len(mine), "reused": 0, "ran": 0}
    t0 = time.process_time()
    it = progress(mine, NAME) if progress is not None else mine
    for i, cell in enumerate(it):
        path = _cell_path(cells_dir, cell["key"])
        old = _read_cell(path)
        if old is not None and old.get("config") != config:
            old = None
        if old is not None:  # the columns to compute again (an estimator changed under its name)
            for name in params.get("rerun", []):
                old["estimators"].pop(name, None)
        before = json.dumps(old, sort_keys=True) if old is not None else None
        rec = run_cell(cell, params, base, registered, old)
        if before is not None and json.dumps(rec, sort_keys=True) == before:
            done["reused"] += 1
            continue
        done["ran"] += 1
        with atomic_output(path) as tmp:
            Path(tmp).write_text(json.dumps(to_jsonable(rec)))
        el = time.process_time() - t0
        eta = el / (i + 1) * (len(mine) - i - 1)
        _status(params, f"{i + 1}/{len(mine)} {cell['key']} ({rec.get('draw')}): {rec['seconds']['total']:.1f} "
                        f"CPU s; {el:.0f} CPU s so far, about {eta:.0f} CPU s left at this pace")
    return done


def _status(params, msg):
    if params.get("status", True):
        print(f"[{NAME}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# the analysis
# --------------------------------------------------------------------------------------------
def paired_verdict(default, best, level: float = 0.95) -> dict:
    """The default's errors against the best other estimator's over paired runs.

    Wilcoxon signed-rank test (two-sided, zero differences dropped; ``p = 1`` when every
    difference is zero) at ``1 - level``. ``verdict``: ``best`` when the default's mean is at most
    the other's, else ``worse`` when the test rejects, else ``tied``; ``significant`` whether it rejects.
    """
    pairs = [(a, b) for a, b in zip(default, best) if a is not None and b is not None]
    if not pairs:
        return {"verdict": None, "p": None, "significant": None, "pairs": 0}
    a, b = (np.asarray(v, dtype=float) for v in zip(*pairs))
    diff = a - b
    if np.all(diff == 0) or a.size < 2:
        p = 1.0
    else:
        p = float(stats.wilcoxon(a, b, zero_method="wilcox", alternative="two-sided").pvalue)
    sig = bool(p < 1.0 - level)
    verdict = "best" if a.mean() <= b.mean() else ("worse" if sig else "tied")
    return {"verdict": verdict, "p": p, "significant": sig, "pairs": int(a.size)}


def analyze_cell(cell: dict, level: float = 0.95) -> dict | None:
    """Per-cell comparison of the default (see :func:`paired_verdict`) and its regret: its mean
    primary error over the lowest mean primary error of every estimator of the cell. ``None`` for
    a cell not run or without a default column."""
    if cell.get("skipped_cell") or "default" not in cell["estimators"]:
        return None
    m = cell["primary"]
    ests = cell["estimators"]
    runs = cell["runs"]
    full = {k: v for k, v in ests.items() if v["summary"][m]["ok"] == runs}
    if "default" not in full:
        return {"verdict": None, "why": "the default failed in some runs", "ratio": None}
    mean = {k: v["summary"][m]["mean"] for k, v in full.items()}
    dm = cell.get("default_method")
    others = {k: x for k, x in mean.items() if k not in ("default", dm)}
    if not others:
        return {"verdict": None, "why": "no other estimator ran", "ratio": None}
    best = min(others, key=lambda k: (others[k], k))
    oracle = min(mean.values())
    res = paired_verdict(full["default"]["values"][m], full[best]["values"][m], level)
    res.update({"best_other": best, "default_mean": mean["default"], "best_other_mean": others[best],
                "oracle": min(mean, key=lambda k: (mean[k], k != "default", k)),
                "ratio": mean["default"] / oracle if oracle > 0 else 1.0,
                "ratio_to_best_other": mean["default"] / others[best] if others[best] > 0 else None})
    return res


def _group_summary(rows: list[dict]) -> dict:
    ok = [r for r in rows if r["analysis"] and r["analysis"].get("verdict")]
    ratios = np.asarray([r["analysis"]["ratio"] for r in ok], dtype=float)
    out = {"cells": len(ok), "best": 0, "tied": 0, "worse": 0, "best_significant": 0}
    for r in ok:
        out[r["analysis"]["verdict"]] += 1
        out["best_significant"] += int(r["analysis"]["verdict"] == "best" and r["analysis"]["significant"])
    out["median_ratio"] = float(np.median(ratios)) if ratios.size else None
    out["max_ratio"] = float(ratios.max()) if ratios.size else None
    out["share_within_1.1"] = float(np.mean(ratios <= 1.1)) if ratios.size else None
    return out


def summarize(cells: list[dict], level: float = 0.95) -> dict:
    """The per-cell analysis and its summaries: overall and by data set, mechanism, n and eps;
    the cells where the default is beaten most (largest ratio), and who beats it how often."""
    rows = [{"key": c["key"], "data": c["data"], "mechanism": c["mechanism"], "eps_ldp": c["eps_ldp"], "n": c["n"],
             "analysis": analyze_cell(c, level)} for c in cells]
    by: dict[str, dict] = {}
    for field in ("data", "mechanism", "n", "eps_ldp"):
        groups: dict[str, list] = {}
        for r in rows:
            groups.setdefault(str(r[field]), []).append(r)
        by[field] = {g: _group_summary(v) for g, v in groups.items()}
    ok = [r for r in rows if r["analysis"] and r["analysis"].get("verdict")]
    worst = sorted(ok, key=lambda r: -r["analysis"]["ratio"])[:15]
    beaten_by: dict[str, int] = {}
    for r in ok:
        if r["analysis"]["verdict"] == "worse":
            beaten_by[r["analysis"]["best_other"]] = beaten_by.get(r["analysis"]["best_other"], 0) + 1
    wins: dict[str, int] = {}
    for r in ok:
        wins[r["analysis"]["oracle"]] = wins.get(r["analysis"]["oracle"], 0) + 1
    not_judged: dict[str, int] = {}
    for c, r in zip(cells, rows):
        if r["analysis"] and r["analysis"].get("verdict"):
            continue
        why = (c.get("skipped_cell") and "cell not run") or c["skipped"].get("default") \
            or (r["analysis"] or {}).get("why") or "no default column"
        not_judged[why] = not_judged.get(why, 0) + 1
    return {"rule": {"primary": "EMD on ordered data, TV on categorical data; means over the runs",
                     "test": f"Wilcoxon signed-rank, two-sided, paired runs, level {level}",
                     "verdict": "best: default mean <= best other's mean; worse: else and the test rejects; "
                                "tied: else",
                     "ratio": "default mean / lowest mean of all estimators of the cell (1 = the oracle's choice)",
                     "best_other": "lowest mean among the estimators other than the default's own method"},
            "overall": _group_summary(rows), "not_judged": not_judged, "by": by, "worst": worst,
            "significantly_beaten_by": dict(sorted(beaten_by.items(), key=lambda kv: -kv[1])),
            "oracle_choice": dict(sorted(wins.items(), key=lambda kv: -kv[1])),
            "cells": rows}


def estimate_cpu(cells: list[dict], full: dict) -> dict:
    """CPU seconds of the grid ``full`` (a parameter dict), extrapolated from the measured cells:
    per (data, mechanism, eps, way of drawing) the seconds per run ``s(n)`` at the two largest
    measured ``n`` give ``s(n) = s(n2) (n/n2)^b`` (``b`` clipped to 0..1.5; ``b = 1`` with one
    measured n). Also each column's share of the measured seconds."""
    per: dict[tuple, dict[int, float]] = {}
    share: dict[str, float] = {}
    for c in cells:
        if c.get("skipped_cell") or not c["estimators"]:
            continue
        per.setdefault((c["data"], c["mechanism"], c["eps_ldp"], c["draw"]), {})[c["n"]] = \
            c["seconds"]["total"] / c["runs"]
        for lab, e in c["estimators"].items():
            share[lab] = share.get(lab, 0.0) + e["seconds"]
    total, missing = 0.0, 0
    for cell in plan(full):
        mech = _mechanism(cell["data"], cell["mechanism"], cell["eps_ldp"])[0]
        kind = _draw_kind(mech, cell["n"], int(full["report_budget"]))
        if kind is None:
            continue
        s = per.get((cell["data"], cell["mechanism"], cell["eps_ldp"], kind))
        if not s:
            missing += 1
            continue
        ns = sorted(s)
        n2 = ns[-1]
        b = 1.0
        if len(ns) > 1 and s[ns[-2]] > 0 and s[n2] > 0:
            b = float(np.clip(np.log(s[n2] / s[ns[-2]]) / np.log(n2 / ns[-2]), 0.0, 1.5))
        total += int(full["runs"]) * s[n2] * (cell["n"] / n2) ** b
    measured = sum(c["seconds"]["total"] for c in cells if not c.get("skipped_cell"))
    tot = sum(share.values()) or 1.0
    return {"measured_cpu_seconds": round(measured, 1), "estimated_full_cpu_seconds": round(total, 0),
            "cells_without_measurement": missing,
            "share_by_estimator": {k: round(v / tot, 4) for k, v in sorted(share.items(), key=lambda kv: -kv[1])},
            "model": "per (data, mechanism, eps, draw): CPU seconds per run at the largest measured n, scaled by "
                     "(n/n2)^b, b from the two largest measured n (1 with one); process CPU time, 1 BLAS thread"}


def _slim(cell: dict) -> dict:
    """A cell as the record keeps it: every run's value of the primary metric (the paired test's
    input), summaries of the others (the cell files keep every value)."""
    m = cell.get("primary")
    ests = {k: {**e, "values": {m: e["values"][m]}} for k, e in cell.get("estimators", {}).items()}
    return {**cell, "estimators": ests}


def assemble(cells_dirs, params: dict) -> dict:
    """The results from every cell record in ``cells_dirs`` (one or more folders: the chunks of a
    grid run apart are merged by reading them together) that belongs to the grid ``params``; a
    key found twice with different numbers is refused."""
    want = {c["key"]: c for c in plan(params)}
    found: dict[str, dict] = {}
    for folder in cells_dirs if isinstance(cells_dirs, (list, tuple)) else [cells_dirs]:
        for path in sorted(Path(folder).glob("*.json")):
            rec = _read_cell(path)
            if rec is None or rec.get("key") not in want or rec.get("runs") != int(params["runs"]):
                continue
            prev = found.get(rec["key"])
            if prev is not None and prev["config"] != rec["config"]:
                raise LocalPrivError(f"merge: cell {rec['key']!r} was run with two configurations")
            if prev is None or len(rec["estimators"]) > len(prev["estimators"]):
                found[rec["key"]] = rec
    cells = [_slim(found[k]) for k in want if k in found]
    full = {**params, **{k: DEFAULTS[k] for k in ("n", "runs", "report_budget")}}
    draws: dict[str, int] = {}
    for c in cells:
        draws[str(c.get("draw"))] = draws.get(str(c.get("draw")), 0) + 1
    return {"datasets": {d: dataset(d).describe() for d in params["data"]},
            "complete": len(cells) == len(want), "cells_planned": len(want), "cells_done": len(cells),
            "draws": draws, "registered_estimators": available_estimators(),
            "summary": summarize(cells, float(params["level"])), "cpu": estimate_cpu(cells, full),
            "cells": cells}


def _compute(params: dict, rng: np.random.Generator, progress) -> dict:
    base = int(rng.integers(2 ** 32))
    done = run_cells(params, base, progress) if params.get("compute", True) else {}
    out = assemble([params["cells_dir"]], params)
    out["this_run"] = done
    return out


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------
def _cell_label(key: str) -> str:
    data, mech, eps, n = key.split("|")
    return f"{data}, {mech}, {eps.replace('=', ' ')}, n {int(n.split('=')[1]):,}"


def _f(x, nd=3) -> str:
    return "-" if x is None else f"{x:.{nd}g}"


def _label_line(record: dict) -> str:
    p = record["params"]
    res = record["results"]
    head = (f"{res['cells_done']} of {res['cells_planned']} cells, {p['runs']} runs per cell, "
            f"n = {', '.join(f'{n:,}' for n in p['n'])}, LDP eps {', '.join(f'{e:g}' for e in p['eps_ldp'])}")
    runs = int(p["runs"])
    if runs < 6:
        head += (f" (with {runs} paired runs the smallest two-sided Wilcoxon p is 2^(1-{runs}) = "
                 f"{2.0 ** (1 - runs):.4g}: no cell can be significant at 95 %)")
    if p.get("label") == "default-regret":
        return (f"The default on the cells where it was behind in the quick run (`make default-regret`): {head}. "
                "Not the full evidence (`make estimator-evidence`).")
    if p.get("label") != "evidence":
        return (f"**QUICK RUN: a check of the pipeline, not the evidence** -- {head}. "
                "The evidence is `make estimator-evidence` (20 runs, n up to 10^6).")
    return ("Evidence" if res["complete"] else "**Incomplete evidence run**") + f": {head}."


def render_summary(record: dict) -> str:
    """The block of docs/estimators.md: which default, how often it is best / tied / worse, its
    regret, by data set, mechanism and n, and where it is beaten most."""
    res = record["results"]
    s = res["summary"]
    o = s["overall"]
    defaults = sorted({f"`{c['default_method']}` ({dataset(c['data']).kind})" for c in res["cells"]
                       if c.get("default_method")})
    lines = [_label_line(record), "",
             f"Default (`default_estimator(domain)`): {', '.join(defaults) or '-'}. Compared with "
             f"{len(record['params']['estimators'])} registered estimators "
             f"({', '.join(f'`{e}`' for e in record['params']['estimators'])}). Primary error: EMD on ordered "
             "data, TV on categorical data; paired test: Wilcoxon signed-rank over the runs (95 %); "
             "ratio: the default's mean error over the best mean error of the cell.", "",
             f"Overall: of {o['cells']} cells the default is best in {o['best']} ({o['best_significant']} "
             f"significantly), tied in {o['tied']}, significantly worse in {o['worse']}; ratio median "
             f"{_f(o['median_ratio'])}, max {_f(o['max_ratio'])}; within 10 % of the best in "
             f"{_f(100 * o['share_within_1.1'] if o['share_within_1.1'] is not None else None)} % of the cells.",
             "", *([("Cells without a verdict: " + "; ".join(f"{v} ({k})" for k, v in s["not_judged"].items())
                    + "."), ""] if s["not_judged"] else []),
             "| group | cells | best | tied | worse | median ratio | max ratio |", "|---|---|---|---|---|---|---|"]
    names = {"data": "data", "mechanism": "mechanism", "n": "n", "eps_ldp": "eps"}
    for field, label in names.items():
        for g, v in s["by"][field].items():
            if v["cells"]:
                gl = f"{int(g):,}" if field == "n" else g
                lines.append(f"| {label} {gl} | {v['cells']} | {v['best']} | {v['tied']} | {v['worse']} | "
                             f"{_f(v['median_ratio'])} | {_f(v['max_ratio'])} |")
    if s["oracle_choice"]:
        lines += ["", "Lowest mean error of a cell (the oracle's choice; the default's own estimator counted "
                  "as `default`): " + ", ".join(f"`{k}` {v}" for k, v in s["oracle_choice"].items()) + "."]
    if s["significantly_beaten_by"]:
        lines += ["", "Significantly better than the default: "
                  + ", ".join(f"`{k}` in {v} cells" for k, v in s["significantly_beaten_by"].items()) + "."]
    lines += ["", "Largest ratios:", "", "| cell | default | best other | default mean | best mean | ratio | p |",
              "|---|---|---|---|---|---|---|"]
    for r in s["worst"][:10]:
        a = r["analysis"]
        dm = next(c["default_method"] for c in res["cells"] if c["key"] == r["key"])
        lines.append(f"| {_cell_label(r['key'])} | `{dm}` | `{a['best_other']}` | {_f(a['default_mean'])} | "
                     f"{_f(a['best_other_mean'])} | {_f(a['ratio'])} | {_f(a['p'], 2)} |")
    cpu = res["cpu"]
    lines += ["", f"CPU: {cpu['measured_cpu_seconds']:,.0f} s measured for these cells; the full grid "
              f"(20 runs, n up to 10^6) is estimated at {cpu['estimated_full_cpu_seconds'] / 3600:,.1f} CPU hours "
              f"({cpu['cells_without_measurement']} cells without a measurement to scale from). "
              "Cells by how their reports were drawn: "
              + ", ".join(f"{'not run' if k == 'None' else k} {v}" for k, v in res["draws"].items()) + ".",
              "", f"Every cell: [{record['name']}](results/{record['name']}.md)."]
    return "\n".join(lines)


def render_full(record: dict) -> str:
    """The generated page with every cell: median primary error per estimator, the default's verdict."""
    res = record["results"]
    labels = [*record["params"]["estimators"], "default"]
    lines = [f"# {record['name']}: every cell", "", _label_line(record), "",
             "Median primary error (EMD on ordered data, TV on categorical data) over the runs; best mean "
             "in bold; '-' not run (reasons in the JSON). Verdict of the default against the best other "
             "estimator (Wilcoxon, 95 %) and its ratio to the cell's best mean.", "",
             "| cell | draw | " + " | ".join(labels) + " | verdict | ratio |",
             "|" + "---|" * (len(labels) + 4)]
    an = {r["key"]: r["analysis"] for r in res["summary"]["cells"]}
    for c in res["cells"]:
        if c.get("skipped_cell"):
            lines.append(f"| {_cell_label(c['key'])} | not run | " + " | ".join("-" for _ in labels) + " | | |")
            continue
        m = c["primary"]
        means = {k: v["summary"][m]["mean"] for k, v in c["estimators"].items() if v["summary"][m]["mean"] is not None}
        best = min(means.values()) if means else None
        row = []
        for lab in labels:
            e = c["estimators"].get(lab)
            if e is None or e["summary"][m]["median"] is None:
                row.append("-")
                continue
            t = _f(e["summary"][m]["median"])
            row.append(f"**{t}**" if means.get(lab) == best else t)
        a = an.get(c["key"]) or {}
        lines.append(f"| {_cell_label(c['key'])} | {c['draw']} | " + " | ".join(row)
                     + f" | {a.get('verdict') or '-'} | {_f(a.get('ratio'))} |")
    return "\n".join(lines) + "\n"


def render_regret(record: dict) -> str:
    """Every judged cell of ``record``, largest ratio first: the default's verdict against the best
    other estimator, its mean error and the best other's, its ratio to the best other and to the
    cell's oracle choice, and the test's p-value (the block of decision 0076)."""
    res = record["results"]
    rows = [r for r in res["summary"]["cells"] if r["analysis"] and r["analysis"].get("verdict")]
    rows.sort(key=lambda r: -r["analysis"]["ratio"])
    o = res["summary"]["overall"]
    lines = [_label_line(record), "",
             f"{o['cells']} cells, {record['params']['runs']} runs each: the default best in {o['best']}, tied in "
             f"{o['tied']}, significantly worse (Wilcoxon, 95 %) in {o['worse']}; ratio to the oracle's choice: "
             f"median {_f(o['median_ratio'])}, max {_f(o['max_ratio'])}.", "",
             "| cell | verdict | best other | default mean | best other mean | ratio to it | ratio to oracle | p |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a = r["analysis"]
        lines.append(f"| {_cell_label(r['key'])} | {a['verdict']} | `{a['best_other']}` | {_f(a['default_mean'])} | "
                     f"{_f(a['best_other_mean'])} | {_f(a['ratio_to_best_other'])} | {_f(a['ratio'])} | "
                     f"{_f(a['p'], 2)} |")
    return "\n".join(lines)


def _plot(results: dict, params: dict, path: Path) -> None:
    """The experiment's 'figure': the full table ``NAME.md`` next to the JSON."""
    record = {"name": Path(path).stem, "params": params, "results": results}
    with atomic_output(Path(path).with_suffix(".md")) as tmp:
        Path(tmp).write_text(render_full(record))


def write_docs(record: dict, estimators_md="docs/estimators.md") -> None:
    """Rewrite the ``estimator-evidence`` block of docs/estimators.md from ``record``."""
    rewrite_block(estimators_md, "estimator-evidence", render_summary(record))


register_experiment(Experiment(
    name=NAME,
    description="Every registered frequency estimator and the default on Adult ages, hours-per-week, "
                "native-country, workclass and Zipf over 10^3 and 10^4 values; k-RR, OUE, OLH, SS, geometric; "
                "LDP eps 0.5..4, n 1e4..1e6; paired tests and regret of the default",
    defaults=DEFAULTS, quick=TEST, compute=_compute, plot=_plot,
    reference="evidence for the default estimator (docs/decisions/0040)"))
register_experiment(Experiment(
    name=QUICK_NAME,
    description="The check of the estimator-evidence pipeline: n 1e4 and 1e5, 5 runs per cell",
    defaults={**DEFAULTS, **EVIDENCE_QUICK}, quick=TEST, compute=_compute, plot=_plot,
    reference="check of the pipeline of docs/decisions/0040 (not the evidence)"))
register_experiment(Experiment(
    name=REGRET_NAME,
    description="The default against every registered estimator, 20 runs, on the cells where it was behind in the "
                "quick run",
    defaults={**DEFAULTS, **REGRET}, quick=TEST, compute=_compute, plot=_plot,
    reference="the regret of the default's rule (docs/decisions/0076)"))


def main(argv=None) -> int:
    """``python tools/estimator_evidence.py {run,report,regret} [--quick | --regret] [--chunk i/m] [--cells DIR ...]``.

    ``run`` runs the cells of one chunk that the cell folder lacks and writes the record of what
    is there (``--only KEY ...`` restricts it to named cells, ``--existing-only`` to the cells the
    folder holds, ``--rerun NAME ...`` computes those columns again, ``--runs`` sets the runs per
    cell, ``--regret`` runs the cells of :data:`REGRET_CELLS` at 20 runs); ``report`` only reads the
    cell folders (several: the chunks of machines run apart), writes ``OUT/NAME.{json,md}`` and
    rewrites the block of docs/estimators.md; ``regret`` writes ``OUT/default-regret.{json,md}``
    and the ``default-regret`` block of decision 0076."""
    ap = argparse.ArgumentParser(description="the estimator evidence: run cells (resumable), report")
    ap.add_argument("action", choices=["run", "report", "regret"])
    ap.add_argument("--quick", action="store_true", help="the quick configuration (EVIDENCE_QUICK)")
    ap.add_argument("--chunk", default="0/1", help="run the cells of chunk i of m (crc32(key) %% m == i)")
    ap.add_argument("--cells", nargs="*", default=None, help="cell folders to read (report); first: to write")
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--docs", default="docs/estimators.md")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rerun", nargs="*", default=[], help="run: compute these columns again in the cells there "
                    "(an estimator changed under its name; 'default' too when it names one)")
    ap.add_argument("--existing-only", action="store_true", help="run: only the cells the folder already holds")
    ap.add_argument("--only", nargs="*", default=[],
                    help="run: only these cells (keys such as 'hours|k-RR|eps=2|n=10000')")
    ap.add_argument("--runs", type=int, default=None, help="run: runs per cell (the configuration's otherwise)")
    ap.add_argument("--regret", action="store_true", help="run: the cells of the default's regret (REGRET_CELLS, "
                    "20 runs)")
    ap.add_argument("--regret-doc", default="docs/decisions/0076-default-by-the-metric-of-the-data.md",
                    help="regret: the page whose default-regret block is rewritten")
    a = ap.parse_args(argv)
    name = REGRET_NAME if a.regret or a.action == "regret" else QUICK_NAME if a.quick else NAME
    base = EXPERIMENT_DEFAULTS[name]
    cells = a.cells or [base["cells_dir"]]
    try:
        if a.action == "run":
            i, m = _chunk(a.chunk)
            out = a.out if m == 1 else Path(cells[0]).parent / f"{name}-chunk-{i}-of-{m}"
            over: dict[str, Any] = {"chunk": a.chunk, "cells_dir": cells[0], "rerun": list(a.rerun),
                                    "existing_only": bool(a.existing_only)}
            if a.only:
                over["only"] = list(a.only)
            if a.runs is not None:
                over["runs"] = int(a.runs)
            run_experiment(name, out, seed=a.seed, overrides=over)
            return 0
        if a.action == "regret":  # the record of the cells there (any runs) and the block of the decision page
            rec = run_experiment(name, a.out, seed=a.seed, overrides={"compute": False, "cells_dir": cells[0]})
            rewrite_block(a.regret_doc, "default-regret", render_regret(rec))
            return 0
        rec = run_experiment(name, a.out, seed=a.seed, overrides={"compute": False, "cells_dir": cells[0]})
        if len(cells) > 1:
            rec["results"] = assemble(cells, rec["params"])
            with atomic_output(Path(a.out) / f"{name}.json") as tmp:
                Path(tmp).write_text(json.dumps(to_jsonable(rec), indent=1))
            _plot(rec["results"], rec["params"], Path(a.out) / f"{name}.png")
        write_docs(rec, a.docs)
    except LocalPrivError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


EXPERIMENT_DEFAULTS = {NAME: DEFAULTS, QUICK_NAME: {**DEFAULTS, **EVIDENCE_QUICK}, REGRET_NAME: {**DEFAULTS, **REGRET}}
