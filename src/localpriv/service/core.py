"""The collector's logic, independent of HTTP: collections, ingest, counts, estimates.

The HTTP layer (:mod:`localpriv.service.app`) only authenticates and translates; everything here
is the library's own path of the data (``docs/service.md``):

* a batch (the JSON wire format) is checked group by group with the checks of report files: number
  reports by :func:`localpriv.data.reports.validate_reports` on their NumPy array, bit vectors as an
  Arrow record batch through :func:`localpriv.data.reports.batch_reports` (every report against its
  mechanism's output space, the offending positions named), after the collection's
  :class:`~localpriv.service.policy.AdmissionPolicy` has admitted each group's mechanism by its computed
  privacy level;
* its reports are counted per distinct (mechanism, report) with NumPy (``numpy.unique``) and
  added to the stored counts in one transaction with the batch id (:meth:`Store.ingest`);
* an estimate reads the stored counts (never raw reports) as :class:`~localpriv.data.observations.Observations`
  through the counts-file checks and runs :func:`localpriv.estimators.estimate` in a job
  (:mod:`localpriv.service.jobs`: a child process under a CPU-time and memory bound); one job per
  (collection, counts version, estimator, settings, level, statistics) however many requests ask
  for it, and its result cached under that key;
* after an accepted batch, the collection's default estimate and figure are recomputed in the
  background (debounced), so the API's default and the dashboard agree and are warm;
* devices register with an enrollment token and post with their own device token; a device's batch
  is charged its computed level (basic composition) in the transaction that counts it, refused past
  the policy's budgets (:class:`~localpriv.service.storage.OverBudget`), and every token's requests
  and reports are rate limited (:mod:`localpriv.service.limits`); :meth:`Collector.privacy_report`
  says what the collection's reports reveal.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
import tempfile
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Hashable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from localpriv.analysis.shuffle import shuffle_epsilon
from localpriv.data.formats import Source, hex_strings
from localpriv.data.observations import ObservationBlock, Observations
from localpriv.data.reports import batch_reports, report_width, validate_reports
from localpriv.domains import parse_domain
from localpriv.estimators import default_estimator, parse_settings
from localpriv.inference import estimate as estimate_with_uncertainty
from localpriv.inference.plotting import estimate_figure
from localpriv.mechanisms import parse
from localpriv.mechanisms.base import Memoized
from localpriv.service.jobs import Debouncer, Job, JobFailed, JobPool, JobsBusy
from localpriv.service.limits import RateLimited, RateLimiter
from localpriv.service.policy import AdmissionPolicy
from localpriv.service.storage import BatchResult, Caps, OverBudget, Store
from localpriv.service.wire import GROUP_KEYS, KINDS, split_binary
from localpriv.service.words import COMPOSITION, LONGITUDINAL, MEANING, UNATTRIBUTED, explain_level
from localpriv.utils.errors import LocalPrivError

__all__ = ["Collector", "Principal", "NotAllowed", "OverBudget", "RateLimited", "SHUFFLE_DELTA", "REPORT_QUANTILES",
           "device_group", "decode_batch", "decode_binary_batch", "batch_digest", "distinct_counts",
           "compute_estimate", "read_json", "check_name", "check_batch_id", "printable",
           "MAX_BATCH_REPORTS", "MAX_JSON_DEPTH", "BATCH_ID", "NAME", "DEFAULT_LEVEL"]

#: The interval level of the default estimate (API default, dashboard, background refresh).
DEFAULT_LEVEL = 0.95

#: The central delta at which the privacy report states the level amplified by shuffling.
SHUFFLE_DELTA = 1e-6
#: The quantiles of devices' spending in the privacy report.
REPORT_QUANTILES = (0.5, 0.9, 0.99)
#: Mechanisms (distinct specs) described by the privacy report, at most.
MAX_REPORT_MECHANISMS = 64

#: Reports in one batch, at most (the body-size cap usually bites first).
MAX_BATCH_REPORTS = 1_000_000
#: JSON bodies nest at most this deep (a batch nests 3 deep, a collection 3): checked before parsing.
MAX_JSON_DEPTH = 16
#: The columns of a collection's row that never change after its creation (remembered by the collector).
FIXED_COLUMNS = ("name", "domain", "policy", "ingest_token_sha256", "analyst_token_sha256", "keep_raw", "grp")
#: Collections whose fixed columns the collector remembers, at most (all forgotten past it).
MAX_REMEMBERED = 4096
#: Batch ids: 1 to 128 characters of letters, digits and ``. _ : -`` (a UUID fits); the whole string.
BATCH_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
#: Collection names: 1 to 64 ASCII letters, digits, ``_`` or ``-``, starting with a letter or digit.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class NotAllowed(LocalPrivError):
    """A request this token may not make under the collection's policy (the HTTP layer's 403)."""


class Principal:
    """Who a token is on one collection: ``role`` (``"admin"``, ``"analyst"``, ``"ingest"`` (the
    shared ingest token), ``"enroll"`` (an enrollment token), ``"device"``), the ``device_id`` of a
    device token, and ``key``, the token's hash (its rate-limit counter)."""

    __slots__ = ("role", "device_id", "key")

    def __init__(self, role: str, device_id: str | None, key: str) -> None:
        self.role, self.device_id, self.key = role, device_id, key


def device_group(name: str, policy: AdmissionPolicy) -> str:
    """The device group of collection ``name``: its policy's ``budget.group``, else the collection
    alone (``collection/NAME``: a device registered there is known there only)."""
    if policy.budget is not None and policy.budget.group is not None:
        return policy.budget.group
    return f"collection/{name}"


def _text(r: np.ndarray) -> list[str]:
    """Reports (``int64``, ``float64`` or ``n x w`` bytes) -> their text form (docs/format.md), vectorized."""
    if r.ndim == 2:
        return hex_strings(r).to_pylist()
    if r.dtype.kind in "iu":  # decimal digits, as Arrow's cast writes them, without its per-call cost
        return [str(v) for v in r.tolist()]
    return pa.array(r).cast(pa.string()).to_pylist()


def printable(text: object, limit: int = 80) -> str:
    """``text`` shortened to ``limit`` characters with every non-printable character escaped
    (``\\n``, ``\\x00``, ``\\u202e``): safe inside a one-line message or log line."""
    s = str(text)
    cut = s[:limit]
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut)
    return out + ("..." if len(s) > limit else "")


def check_name(name: object) -> str:
    """``name`` if it is a collection name (the whole string matches :data:`NAME`); else a one-line
    :class:`LocalPrivError`."""
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        shown = printable(name) if isinstance(name, str) else type(name).__name__
        raise LocalPrivError(f"collection name {shown!r}: 1-64 ASCII letters, digits, _ or -, starting with "
                             "a letter or digit")
    return name


def check_batch_id(batch_id: object) -> str:
    """``batch_id`` if the whole string matches :data:`BATCH_ID`; else a one-line :class:`LocalPrivError`."""
    if not isinstance(batch_id, str) or BATCH_ID.fullmatch(batch_id) is None:
        raise LocalPrivError("batch_id must be a string of 1-128 characters of letters, digits and . _ : - "
                             "(e.g. a UUID)")
    return batch_id


#: the bytes that matter to the nesting depth of JSON text: ``"``, ``\\``, brackets and braces
_JSON_SPECIAL = np.zeros(256, dtype=bool)
_JSON_SPECIAL[[0x22, 0x5C, 0x5B, 0x5D, 0x7B, 0x7D]] = True


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in the JSON text ``body``, brackets inside strings
    ignored; vectorized (NumPy), so a body is measured before it is parsed.

    A quote is escaped when an odd number of backslashes precede it; the characters between an
    unescaped quote and the next are inside a string. The depth is the running maximum of the sum
    of ``+1`` for ``[``/``{`` and ``-1`` for ``]``/``}`` outside strings. Only the bytes that can
    matter (quotes, backslashes, brackets, braces) are kept after one pass over the body, so the
    work past that pass scales with their number, not with the digits of number reports."""
    b = np.frombuffer(body, np.uint8)
    pos = np.flatnonzero(_JSON_SPECIAL[b])
    if not pos.size:
        return 0
    v = b[pos]
    n = pos.size
    idx = np.arange(n)
    adjacent = np.zeros(n, dtype=bool)  # the special byte just before this one is the previous byte
    adjacent[1:] = pos[1:] == pos[:-1] + 1
    backslash = v == 0x5C
    cont = np.zeros(n, dtype=bool)  # a backslash continuing a run of backslashes
    cont[1:] = backslash[1:] & backslash[:-1] & adjacent[1:]
    start = np.maximum.accumulate(np.where(cont, 0, idx))
    run = np.where(backslash, idx - start + 1, 0)  # backslashes of the run ending here
    before = np.zeros(n, dtype=np.int64)  # backslashes right before each special byte
    before[1:] = np.where(adjacent[1:], run[:-1], 0)
    real = (v == 0x22) & (before % 2 == 0)
    inside = (np.cumsum(real) - real) % 2 == 1  # after an odd number of unescaped quotes
    step = np.zeros(n, dtype=np.int32)
    step[(v == 0x5B) | (v == 0x7B)] = 1
    step[(v == 0x5D) | (v == 0x7D)] = -1
    step[inside] = 0
    return int(np.cumsum(step).max(initial=0))


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON (numbers are finite)")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"the key {printable(dup, 40)!r} appears twice in one object")
    return out


def read_json(body: bytes, what: str = "the body") -> object:
    """Strict JSON: UTF-8, nested at most :data:`MAX_JSON_DEPTH` deep (measured before parsing), no
    ``NaN``/``Infinity``, no key twice in an object. Raises :class:`LocalPrivError` (one line)."""
    # no text nests deeper than its count of opening brackets and braces (a count in C, no copy):
    # the depth is measured only for a body with more of them than the limit
    depth = json_depth(body) if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH else 0
    if depth > MAX_JSON_DEPTH:
        raise LocalPrivError(f"{what} nests {depth} levels deep: at most {MAX_JSON_DEPTH}")
    try:
        return json.loads(body, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise LocalPrivError(f"{what} is not JSON (strict JSON, UTF-8): {printable(exc, 160)}") from None


#: the JSON types a report may have, by the mechanism's report kind (an integer where a number is expected)
_REPORT_TYPES = {"int64": (int,), "float64": (int, float), "binary": (str,)}
_REPORT_WORDS = {"int64": "JSON integers (whole numbers without a decimal point)",
                 "float64": "JSON numbers", "binary": "lowercase hex strings"}


def _check_report_types(reports: list, mech, where: str, first: int) -> None:
    """Reports are JSON values of their mechanism's kind exactly: no ``true`` for 1, no ``"2"`` for 2,
    no ``2.0`` for an index, hex strings in lowercase without spaces (one text per bit vector)."""
    kind = mech.report_kind
    allowed = _REPORT_TYPES.get(kind, ())
    if not set(map(type, reports)) <= set(allowed):
        bad = next(i for i, v in enumerate(reports) if type(v) not in allowed)
        if reports[bad] is None:
            raise LocalPrivError(f"{where}: no report (null) at report {first + bad}")
        raise LocalPrivError(f"{where}: reports must be all numbers or all hex strings, of their mechanism's "
                             f"kind: {mech} takes {_REPORT_WORDS.get(kind, kind)}, got "
                             f"{printable(json.dumps(reports[bad]), 40)} at report {first + bad}")
    if kind == "binary":
        ok = pc.match_substring_regex(pa.array(reports, pa.string()), "^(?:[0-9a-f]{2})+$")
        okn = ok.to_numpy(zero_copy_only=False)
        if not okn.all():
            bad = int(np.flatnonzero(~okn)[0])
            raise LocalPrivError(f"{where}: {mech} takes reports as lowercase hex strings (pairs of 0-9a-f), "
                                 f"got {printable(json.dumps(reports[bad]), 40)} at report {first + bad}")


def padding_mask(mech, width: int) -> int:
    """The bits of a bit-vector report's last byte that no report of ``mech`` sets (its padding):
    ``k`` bits (or a sketch's ``m`` bits after its fixed header bytes) packed most significant bit
    first into ``width`` bytes leave ``8 * width - bits`` low bits of the last byte unused."""
    stated = getattr(mech, "report_bytes", None)
    if stated is None:
        bits = int(mech.k)
    elif hasattr(mech, "m"):
        bits = 8 * (int(stated) - (int(mech.m) + 7) // 8) + int(mech.m)
    else:
        return 0
    spare = 8 * width - bits
    return (1 << spare) - 1 if 0 < spare < 8 else 0


def decode_batch(data, policy: AdmissionPolicy, domain):
    """A parsed JSON batch -> ``(batch_id, n, [(mechanism, reports)])`` with every mechanism
    admitted by ``policy`` and every report checked against its mechanism's output space.

    Raises :class:`LocalPrivError` (one line: what, and at which positions of the batch)."""
    if not isinstance(data, dict):
        raise LocalPrivError("a batch is a JSON object with batch_id and groups")
    unknown = set(data) - {"batch_id", "groups"}
    if unknown:
        raise LocalPrivError(f"batch: unknown key(s) {', '.join(sorted(map(str, unknown)))[:200]}; "
                             "known: batch_id, groups")
    batch_id = check_batch_id(data.get("batch_id"))
    groups = data.get("groups")
    if not isinstance(groups, list) or not groups:
        raise LocalPrivError(f"batch {batch_id}: groups must be a non-empty list of {{mechanism, reports}}")
    out, first = [], 1
    src = Source(f"batch {batch_id}", "json", "reports", 1)
    for gi, g in enumerate(groups):
        if not isinstance(g, dict) or set(g) != {"mechanism", "reports"} or not isinstance(g["mechanism"], str):
            raise LocalPrivError(f"batch {batch_id}: group {gi + 1} must have exactly the keys mechanism (a spec "
                                 "string) and reports")
        reports = g["reports"]
        if not isinstance(reports, list) or not reports:
            raise LocalPrivError(f"batch {batch_id}: group {gi + 1} has no reports (a non-empty list)")
        if first - 1 + len(reports) > MAX_BATCH_REPORTS:
            raise LocalPrivError(f"batch {batch_id}: more than {MAX_BATCH_REPORTS:,} reports; split it")
        try:
            mech = policy.admit(g["mechanism"], domain)
        except LocalPrivError as exc:
            raise LocalPrivError(f"batch {batch_id}, group {gi + 1}: {exc}") from None
        _check_report_types(reports, mech, f"batch {batch_id}, group {gi + 1}", first)
        try:
            if mech.report_kind == "int64":  # Python ints (checked above): int64, or OverflowError past it
                col = np.array(reports, dtype=np.int64)
            else:
                col = pa.array(reports, pa.string() if mech.report_kind == "binary" else None)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            raise LocalPrivError(f"batch {batch_id}, group {gi + 1}: reports must be all numbers or all hex "
                                 f"strings (reports {first}..{first + len(reports) - 1})") from None
        n = len(col)
        if isinstance(col, np.ndarray) or (mech.report_kind == "float64" and not pa.types.is_string(col.type)):
            # numbers (their JSON types checked above): the output-space check of report files
            # (validate_reports, the same message and positions) without an Arrow record batch
            nums = col if isinstance(col, np.ndarray) else col.to_numpy(zero_copy_only=False)
            r = validate_reports(mech, nums, f"{src.path}: ", first, "row")
            parts = [(str(mech), mech, r, None)]
        else:
            rb = pa.RecordBatch.from_arrays(
                [pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([str(mech)])), col],
                names=["mechanism", "report"])
            parts = batch_reports(rb, src, first, domain)
        for _spec, m, r, _c in parts:
            _check_padding(m, r, f"batch {batch_id}, group {gi + 1}", first)
            out.append((m, r))
        first += n
    return batch_id, first - 1, out


def _check_padding(mech, r: np.ndarray, where: str, first: int) -> None:
    """Bit-vector reports are canonical: the padding bits of their last byte (:func:`padding_mask`)
    are 0; else a one-line :class:`LocalPrivError` naming the first such report."""
    if r.ndim == 2 and r.shape[0]:
        mask = padding_mask(mech, r.shape[1])
        padded = np.flatnonzero(r[:, -1] & mask) if mask else np.zeros(0, np.int64)
        if len(padded):
            row = first + int(padded[0])
            raise LocalPrivError(f"{where}: {mech}: report {row} sets padding bits: the last {mask.bit_length()} "
                                 f"of its {8 * r.shape[1]} bits must be 0 ({len(padded)} such report(s))")


#: the kinds of the binary header a mechanism's reports may come as (an integer may stand for a float)
_BINARY_KINDS = {"int64": ("int64",), "float64": ("float64", "int64"), "binary": ("binary",)}


def _binary_header(header: bytes) -> tuple[str, list]:
    """The binary body's header -> ``(batch_id, groups)``, every key and type checked exactly."""
    data = read_json(header, "the batch header")
    if not isinstance(data, dict) or set(data) != {"batch_id", "groups"}:
        keys = ", ".join(sorted(map(str, data))) if isinstance(data, dict) else type(data).__name__
        raise LocalPrivError(f"binary batch: the header is a JSON object with exactly the keys batch_id and groups, "
                             f"got {printable(keys, 120)}")
    batch_id = check_batch_id(data["batch_id"])
    groups = data["groups"]
    if not isinstance(groups, list) or not groups:
        raise LocalPrivError(f"batch {batch_id}: groups must be a non-empty list of {{mechanism, kind, reports, "
                             "width}")
    total = 0
    for gi, g in enumerate(groups):
        if (not isinstance(g, dict) or set(g) != GROUP_KEYS or not isinstance(g["mechanism"], str)
                or g["kind"] not in KINDS or any(type(g[k]) is not int for k in ("reports", "width"))
                or g["reports"] < 1 or not 1 <= g["width"] <= 1 << 20
                or (g["kind"] != "binary" and g["width"] != 8)):
            raise LocalPrivError(f"batch {batch_id}: group {gi + 1} of the header must have exactly the keys "
                                 "mechanism (a spec string), kind (int64, float64 or binary), reports (a positive "
                                 "integer) and width (bytes per report: 8 for numbers)")
        total += g["reports"]
    if total > MAX_BATCH_REPORTS:
        raise LocalPrivError(f"batch {batch_id}: more than {MAX_BATCH_REPORTS:,} reports; split it")
    return batch_id, groups


def decode_binary_batch(body: bytes, policy: AdmissionPolicy, domain):
    """A binary batch (:mod:`localpriv.service.wire`: ``application/x-localpriv-reports; v=1``) ->
    ``(batch_id, n, [(mechanism, reports)])``, as :func:`decode_batch` returns it for the same
    reports in JSON: every mechanism admitted by ``policy``; each group's kind and width those of
    its mechanism; the body exactly as long as its groups' reports; every report checked against
    its mechanism's output space by :func:`~localpriv.data.reports.validate_reports` (the check and
    message of JSON numbers) and bit vectors canonical (padding bits 0). Vectorized: the reports
    are read in place with ``numpy.frombuffer``.

    Raises :class:`LocalPrivError` (one line: what, and at which reports of the batch)."""
    header, offset = split_binary(body)
    batch_id, groups = _binary_header(header)
    out, first = [], 1
    for gi, g in enumerate(groups):
        where = f"batch {batch_id}, group {gi + 1}"
        try:
            mech = policy.admit(g["mechanism"], domain)
        except LocalPrivError as exc:
            raise LocalPrivError(f"{where}: {exc}") from None
        kind, n, width = g["kind"], g["reports"], g["width"]
        if kind not in _BINARY_KINDS.get(mech.report_kind, ()):
            raise LocalPrivError(f"{where}: {mech} takes {_REPORT_WORDS.get(mech.report_kind, mech.report_kind)}: "
                                 f"reports of kind {' or '.join(_BINARY_KINDS.get(mech.report_kind, ()))}, got {kind}")
        if kind == "binary" and width != report_width(mech):
            raise LocalPrivError(f"{where}: {mech} reports have {report_width(mech)} bytes, the header says {width}")
        need = n * width
        if len(body) - offset < need:
            raise LocalPrivError(f"{where}: {n:,} reports of {width} bytes need {need:,} bytes; the body has "
                                 f"{len(body) - offset:,} left")
        if kind == "binary":
            arr = np.frombuffer(body, np.uint8, need, offset).reshape(n, width)
        else:
            arr = np.frombuffer(body, KINDS[kind], n, offset).astype(kind, copy=False)
        r = validate_reports(mech, arr, f"batch {batch_id}: ", first, "row")
        _check_padding(mech, r, where, first)
        out.append((mech, r))
        offset += need
        first += n
    if offset != len(body):
        raise LocalPrivError(f"batch {batch_id}: {len(body) - offset:,} bytes after the last group's reports (the "
                             "header's groups must account for the whole body)")
    return batch_id, first - 1, out


def _claimed_reports(data: object, binary: bool = False) -> int:
    """The reports a refused batch claims to hold (its ingest statistics): the lengths of its
    groups' report lists (JSON) or the numbers of its header's groups (binary); 0 if unreadable."""
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        return 0
    if binary:
        return int(sum(g["reports"] for g in groups if isinstance(g, dict) and type(g.get("reports")) is int
                       and g["reports"] > 0))
    return sum(len(g["reports"]) for g in groups if isinstance(g, dict) and isinstance(g.get("reports"), list))


def _binary_claim(body: bytes) -> object:
    """The parsed header of a binary body, or ``None`` (for :func:`_claimed_reports`)."""
    try:
        return read_json(split_binary(body)[0])
    except LocalPrivError:
        return None


#: integer reports spanning at most this many values (or 4 per report) are counted by ``numpy.bincount``
_BINCOUNT_SPAN = 1 << 16


def distinct_counts(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct reports of ``r`` (values, or rows of bytes) in ascending order and how often
    each occurs: ``numpy.unique(r, return_counts=True)`` (rows: ``axis=0``); integer reports
    within a span of at most ``max(65536, 4 n)`` values are counted by ``numpy.bincount`` (the
    same result, without a sort)."""
    if r.ndim == 1 and r.dtype.kind == "i" and r.size:
        lo, hi = int(r.min()), int(r.max())
        if hi - lo < max(_BINCOUNT_SPAN, 4 * r.size):
            c = np.bincount(r - lo if lo else r)
            u = np.flatnonzero(c)
            return (u + lo).astype(r.dtype, copy=False), c[u]
    return np.unique(r, axis=0 if r.ndim == 2 else None, return_counts=True)


def batch_digest(counts: list[tuple[str, str, int]]) -> str:
    """SHA-256 (hex) of a batch's sorted ``(mechanism, report text, count)`` rows written as compact
    JSON, ``json.dumps(counts, separators=(",", ":"))``: the digest that tells a retry (the same
    reports) from another batch under the same id. The report texts (decimal digits, numbers as
    Arrow writes them, lowercase hex) need no escaping, so the text is joined directly; a text that
    would need it falls back to ``json.dumps`` (the same bytes either way)."""
    specs = {m: json.dumps(m) for m in {m for m, _t, _k in counts}}
    texts = "".join(t for _m, t, _k in counts)
    if texts.isascii() and texts.isprintable() and '"' not in texts and "\\" not in texts:
        text = "[" + ",".join([f'[{specs[m]},"{t}",{k}]' for m, t, k in counts]) + "]"
    else:
        text = json.dumps(counts, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class Collector:
    """Collections of one store, with the estimate cache.

    Parameters
    ----------
    store : Store
        Where collections, batches and counts live (:func:`~localpriv.service.storage.open_store`).
    admin_token : str
        The token that creates and lists collections (compared in constant time).
    cache_size : int
        Estimates and figures kept per (collection, counts version, estimator, level).
    """

    def __init__(self, store: Store, admin_token: str, cache_size: int = 64, *, jobs: JobPool | None = None,
                 estimate_wait: float = 2.0, figure_wait: float = 20.0, refresh_delay: float | None = 1.0):
        if not isinstance(admin_token, str) or len(admin_token) < 16:
            raise LocalPrivError("the admin token must have at least 16 characters")
        self.store = store
        self._admin_sha = sha256(admin_token)
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = int(cache_size)
        self._lock = threading.Lock()
        self._policies: dict[str, tuple] = {}
        self._fixed_rows: dict[str, tuple] = {}  # name -> (fixed columns, policy, domain): _fixed
        self.jobs = jobs if jobs is not None else JobPool()
        #: seconds an estimate request waits for its job before answering 202 with the job
        self.estimate_wait = float(estimate_wait)
        #: seconds a figure request waits before answering 503 (an ``<img>`` cannot follow a job)
        self.figure_wait = float(figure_wait)
        self._refreshing: dict[str, Job] = {}
        #: rate-limit counters per token (bounded memory: :mod:`localpriv.service.limits`)
        self.limiter = RateLimiter()
        self._limited: dict[str, int] = {}  # 429s per collection since start
        self._shuffled: OrderedDict = OrderedDict()  # (eps0, n) -> shuffled level or why not (at most 1024)
        self.refresher = Debouncer(refresh_delay, self.refresh) if refresh_delay is not None else None

    def close(self) -> None:
        """Stop the background refresh and cancel every job (the store stays open)."""
        if self.refresher is not None:
            self.refresher.close()
        self.jobs.close()

    # ---- authentication ---------------------------------------------------------------------
    def is_admin(self, token: str | None) -> bool:
        """Is ``token`` the admin token (compared in constant time)?"""
        if not token:
            return False
        return hmac.compare_digest(sha256(token), self._admin_sha)

    def role(self, name: str, token: str | None) -> str | None:
        """``"admin"``, ``"analyst"``, ``"ingest"``, ``"enroll"``, ``"device"`` or ``None`` for
        ``token`` on collection ``name``."""
        who = self.principal(name, token)
        return None if who is None else who.role

    def principal(self, name: str, token: str | None) -> Principal | None:
        """Who ``token`` is on collection ``name`` (:class:`Principal`), or ``None``. The
        collection's own tokens are compared in constant time; enrollment and device tokens are
        looked up by their SHA-256 hash (a device token opens the collections of its device group)."""
        if not token:
            return None
        digest = sha256(token)
        if hmac.compare_digest(digest, self._admin_sha):  # is_admin, the hash computed once
            return Principal("admin", None, digest)
        try:
            col = self._fixed(name)[0]
        except KeyError:
            return None
        if hmac.compare_digest(digest, col["analyst_token_sha256"]):
            return Principal("analyst", None, digest)
        if hmac.compare_digest(digest, col["ingest_token_sha256"]):
            return Principal("ingest", None, digest)
        if self.store.enrollment(digest) == name:
            return Principal("enroll", None, digest)
        dev = self.store.device(digest)
        if dev is not None:
            _col, policy, _dom = self._fixed(name)
            if hmac.compare_digest(dev[1], device_group(name, policy)):
                return Principal("device", dev[0], digest)
        return None

    # ---- collections ------------------------------------------------------------------------
    def create(self, name: str, domain: str, policy: dict, keep_raw: bool = False) -> dict:
        """Create a collection; returns its description with the two new tokens (shown once)."""
        check_name(name)
        if not isinstance(domain, str):
            raise LocalPrivError("domain must be a string such as 0..99 or a,b,c")
        dom = parse_domain(domain)
        pol = AdmissionPolicy.from_dict(policy)
        mine = pol.budget
        group = mine.group if mine is not None else None
        if mine is not None and group is not None:  # one period and one cross-collection cap per group
            for other, text in self.store.group_policies(group):
                ob = AdmissionPolicy.from_json(text).budget
                if ob is None or (ob.period, ob.group_eps) != (mine.period, mine.group_eps):
                    raise LocalPrivError(f"device group {group}: collection {other} states period="
                                         f"{None if ob is None else ob.period} and group_eps="
                                         f"{None if ob is None else ob.group_eps}; every collection of a group "
                                         "states the same budget.period and budget.group_eps")
        ingest, analyst = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        try:
            self.store.create_collection(name, dom.spec(), pol.to_json(), sha256(ingest), sha256(analyst),
                                         bool(keep_raw), group)
        except KeyError:
            raise LocalPrivError(f"collection {name} exists already") from None
        return {**self.describe(name), "ingest_token": ingest, "analyst_token": analyst}

    def _setup(self, name: str):
        """``(row, policy, domain)`` of a collection (policy and domain parsed once)."""
        col = self.store.collection(name)
        if col is None:
            raise KeyError(name)
        key = (col["domain"], col["policy"])
        cached = self._policies.get(name)
        if cached is None or cached[0] != key:
            cached = (key, AdmissionPolicy.from_json(col["policy"]), parse_domain(col["domain"]))
            self._policies[name] = cached
        return col, cached[1], cached[2]

    def _fixed(self, name: str):
        """``(fixed, policy, domain)`` of a collection: ``fixed`` its row's columns that never change
        after creation (:data:`FIXED_COLUMNS`: tokens' hashes, domain, policy, ``keep_raw``, group),
        read once and remembered (at most :data:`MAX_REMEMBERED` collections, forgotten all past
        it), so that a batch reads no row before its write transaction. ``KeyError`` if there is
        no such collection (never remembered: another server may create it)."""
        cached = self._fixed_rows.get(name)
        if cached is not None:
            return cached
        col, policy, domain = self._setup(name)
        cached = ({k: col[k] for k in FIXED_COLUMNS}, policy, domain)
        with self._lock:
            if len(self._fixed_rows) >= MAX_REMEMBERED:
                self._fixed_rows.clear()
            self._fixed_rows[name] = cached
        return cached

    def exists(self, name: str) -> bool:
        """Is there a collection ``name`` (a remembered one without reading the store)?"""
        try:
            self._fixed(name)
        except KeyError:
            return False
        return True

    def describe(self, name: str) -> dict:
        col = self.store.collection(name)
        if col is None:
            raise KeyError(name)
        return {"name": col["name"], "domain": col["domain"], "policy": json.loads(col["policy"]),
                "keep_raw": bool(col["keep_raw"]), "created": col["created"],
                "counts_version": int(col["version"]),
                "ingest": {"reports": int(col["n_reports"]), "batches": int(col["n_batches"]),
                           "duplicate_batches": int(col["n_duplicates"]),
                           "refused_batches": int(col["n_refused_batches"]),
                           "refused_reports": int(col["n_refused_reports"]),
                           "over_budget_batches": int(col["n_over_budget"] or 0),
                           "rate_limited_requests": self._limited.get(name, 0),
                           "last_ingest": col["last_ingest"]}}

    def names(self) -> list[str]:
        return [c["name"] for c in self.store.collections()]

    # ---- ingest -----------------------------------------------------------------------------
    # ---- devices ----------------------------------------------------------------------------
    def enroll(self, name: str) -> dict:
        """A new enrollment token of collection ``name`` (shown once, stored hashed): devices
        register with it (:meth:`register`)."""
        _col, policy, _dom = self._fixed(name)
        token = secrets.token_urlsafe(32)
        self.store.add_enrollment(name, sha256(token))
        return {"collection": name, "group": device_group(name, policy), "enrollment_token": token}

    def register(self, name: str, who: Principal) -> dict:
        """Register a new device with the enrollment token ``who`` of collection ``name``; returns
        its ``device_id`` and ``device_token`` (shown once, stored hashed) and its device group."""
        _col, policy, _dom = self._fixed(name)
        self.check_rate(name, who.key, policy)
        group = device_group(name, policy)
        device_id, token = secrets.token_hex(16), secrets.token_urlsafe(32)
        self.store.register_device(name, who.key, group, device_id, sha256(token))
        return {"collection": name, "group": group, "device_id": device_id, "device_token": token}

    def check_rate(self, name: str, key: str, policy: AdmissionPolicy | None = None) -> None:
        """Count one request of token ``key`` against the collection's rate limit
        (:class:`RateLimited` past it)."""
        if policy is None:
            _col, policy, _dom = self._fixed(name)
        try:
            self.limiter.request(key, policy.rate_limit)
        except RateLimited:
            self._limited[name] = self._limited.get(name, 0) + 1
            raise

    def batch_level(self, parts, policy: AdmissionPolicy) -> float:
        """A batch's charge: the sum over its reports of their charges (basic composition):
        a report's computed level ``epsilon_ldp``, or for a memoized mechanism at least
        ``min(eps_perm, eps_inst)`` (:meth:`AdmissionPolicy.charge`; decision record 0053)."""
        return float(math.fsum(r.shape[0] * policy.charge(m) for m, r in parts))

    def ingest(self, name: str, body: bytes, who: Principal | None = None, binary: bool = False) -> BatchResult:
        """Check and count one batch (JSON bytes, or with ``binary`` the binary body of
        :mod:`localpriv.service.wire`; ``docs/service.md``); durable when it returns.

        ``who``: the token that posted it (``None``: a trusted caller, no limits). A device
        token's batch is charged to its device in the same transaction (:meth:`Store.ingest`);
        past a budget :class:`OverBudget`, past a rate limit :class:`RateLimited`. The same
        reports give the same counts and digest in either body, so a retry in the other one is a
        duplicate."""
        col, policy, domain = self._fixed(name)
        device_id = who.device_id if who is not None else None
        budget = policy.budget
        if who is not None:
            if who.role == "ingest" and budget is not None and budget.devices_only:
                self.store.refused(name, 0)
                raise NotAllowed(f"collection {name} takes batches from registered devices only (budget."
                                 "devices_only): register with an enrollment token and post with the device token")
            self.check_rate(name, who.key, policy)
        data = None
        try:
            if binary:
                batch_id, n, parts = decode_binary_batch(body, policy, domain)
            else:
                data = read_json(body, "the batch")
                batch_id, n, parts = decode_batch(data, policy, domain)
        except LocalPrivError:
            self.store.refused(name, _claimed_reports(_binary_claim(body) if binary else data, binary))
            raise
        pairs: dict[str, list[tuple[str, int]]] = {}
        raw: list[tuple[int, str, str]] | None = [] if col["keep_raw"] else None
        specs = [str(mech) for mech, _r in parts]
        for spec, (_mech, r) in zip(specs, parts):
            # every report counts once: the distinct reports and their numbers (rows for bit vectors)
            u, c = distinct_counts(r)
            pairs.setdefault(spec, []).extend(zip(_text(u), c.tolist()))
            if raw is not None:
                start = len(raw)
                raw.extend(zip(range(start, start + r.shape[0]), [spec] * r.shape[0], _text(r)))
        counts: list[tuple[str, str, int]] = []
        for spec in sorted(pairs):  # rows sorted by (mechanism, report text), one per pair
            got = pairs[spec]
            if specs.count(spec) > 1:  # the same mechanism in two groups
                merged: dict[str, int] = {}
                for t, k in got:
                    merged[t] = merged.get(t, 0) + k
                got = list(merged.items())
            counts.extend([(spec, t, k) for t, k in sorted(got)])
        digest = batch_digest(counts)
        caps = None
        if device_id is not None:
            try:
                eps = self.batch_level(parts, policy)
            except LocalPrivError:
                self.store.refused(name, n)
                raise
            period = budget.period if budget is not None else 86400
            start = int(math.floor(time.time() / period) * period)
            caps = Caps(eps, period, start, budget.eps if budget else None, budget.group_eps if budget else None,
                        budget.group if budget else None)
        rule = policy.rate_limit if who is not None else None
        if who is not None:
            try:
                self.limiter.reports(who.key, rule, n)
            except RateLimited:
                self._limited[name] = self._limited.get(name, 0) + 1
                raise
            except LocalPrivError:  # a batch above the whole allowance
                self.store.refused(name, n)
                raise
        try:
            res = self.store.ingest(name, batch_id, digest, n, counts, raw, device_id, caps)
        except OverBudget:
            self.limiter.refund(who.key if who else "", rule, n)
            self.store.refused(name, n, over_budget=True)
            raise
        except ValueError:
            self.limiter.refund(who.key if who else "", rule, n)
            raise LocalPrivError(f"batch {batch_id} was received before with other reports (or from another "
                                 "sender): a batch id names one batch; use a new id for new reports") from None
        except BaseException:
            self.limiter.refund(who.key if who else "", rule, n)
            raise
        if res.status == "duplicate":
            self.limiter.refund(who.key if who else "", rule, n)
        if res.status == "accepted" and self.refresher is not None:
            self.refresher.poke(name)
        return res

    # ---- reading ----------------------------------------------------------------------------
    def observations(self, name: str):
        """``(counts version, Observations or None)`` from the stored counts (one snapshot)."""
        _col, _policy, domain = self._fixed(name)
        version, rows = self.store.counts(name)
        if not rows:
            return version, None
        mechs, reps, cnts = zip(*rows)
        rb = pa.RecordBatch.from_arrays([pa.array(mechs, pa.string()), pa.array(reps, pa.string()),
                                         pa.array(cnts, pa.int64())], names=["mechanism", "report", "count"])
        src = Source(f"collection {name} (stored counts)", "json", "counts", 1)
        # a counts source: every batch carries its counts
        blocks = [ObservationBlock(m, r, c) for _s, m, r, c in batch_reports(rb, src, 1, domain) if c is not None]
        return version, Observations(blocks, domain)

    def _put(self, key: Hashable, value) -> None:
        with self._lock:
            self._cache[key] = value
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def start_estimate(self, name: str, estimator: str | None = None, level: float | None = DEFAULT_LEVEL,
                       stats: tuple[str, ...] = (), settings: dict[str, str] | None = None,
                       figure: bool = False) -> tuple[object, Job | None]:
        """``(value, None)`` from the cache, or ``(None, job)``: the one job computing this
        (collection, counts version, estimator, settings, level, statistics), started now or
        earlier. ``figure``: the value wanted is the PNG (its job also yields the estimate).

        Raises :class:`LocalPrivError` for bad input, :class:`JobsBusy` when the pool refuses."""
        level = _check_level(level)
        version, obs = self.observations(name)
        if obs is None:
            raise LocalPrivError(f"collection {name} has no reports yet")
        method = default_estimator(obs.domain) if estimator is None else estimator
        given = parse_settings(method, settings or {})
        if figure and given:
            raise LocalPrivError("the figure takes no estimator settings")
        est_key = ("estimate", name, version, method, tuple(sorted(given.items())), level, tuple(stats))
        fig_key = ("figure", name, version, method, level)
        want = fig_key if figure else est_key
        keys = (fig_key, est_key) if figure else (est_key,)
        header = {"collection": name, "counts_version": version}
        title = f"{name}: {{estimator}} estimate from {{n:,}} reports (counts version {version})" if figure else None

        def done(job: Job) -> None:
            self._put(est_key, job.result["estimate"])
            if figure:
                self._put(fig_key, job.result["figure"])

        with self._lock:  # single flight: the cache and the in-flight table are read under one lock
            if want in self._cache:
                self._cache.move_to_end(want)
                return self._cache[want], None
            job, _new = self.jobs.submit(keys, name, compute_estimate,
                                         (obs, method, given, level, tuple(stats), header, title), done)
        return None, job

    @staticmethod
    def job_value(job: Job, figure: bool = False):
        """The value of a finished job (the estimate's dict or the PNG); raises :class:`JobFailed`."""
        if job.status != "done":
            raise JobFailed(job.error or f"the job is {job.status}", job.code)
        if figure:
            png = job.result["figure"]
            if png is None:
                raise JobFailed("this job made no figure", 500)
            return png
        return {**job.result["estimate"], "cached": False}

    def estimate(self, name: str, estimator: str | None = None, level: float | None = DEFAULT_LEVEL,
                 stats: tuple[str, ...] = (), settings: dict[str, str] | None = None,
                 wait: float | None = None) -> dict | Job:
        """The estimate of a collection as JSON data (:meth:`Estimate.to_dict`) with its counts
        version and ``cached``; or, when its job is not finished within ``wait`` seconds (default:
        no bound), the :class:`Job` computing it.

        ``settings`` are the estimator's settings as text (query-string values), read by their
        declared kind (:func:`localpriv.estimators.parse_settings`); unknown settings are refused."""
        value, job = self.start_estimate(name, estimator, level, stats, settings)
        if job is None:
            assert isinstance(value, dict)
            return {**value, "cached": True}
        if not job.done.wait(wait):
            return job
        return self.job_value(job)

    def figure(self, name: str, estimator: str | None = None, level: float | None = DEFAULT_LEVEL) -> bytes:
        """A PNG of the estimate with its intervals (bars/line, heatmap on planar grids), computed
        and cached like :meth:`estimate` (:func:`localpriv.inference.plotting.estimate_figure`);
        the default estimator is the API's. Raises :class:`JobsBusy` when it is not ready within
        :attr:`figure_wait` seconds."""
        value, job = self.start_estimate(name, estimator, level, figure=True)
        if job is None:
            assert isinstance(value, bytes)
            return value
        if not job.done.wait(self.figure_wait):
            raise JobsBusy(f"the figure of {name} is being computed; reload in a few seconds")
        return self.job_value(job, figure=True)

    def refresh(self, name: str) -> bool:
        """Start computing the collection's default estimate and figure (as the API and the
        dashboard ask for them) unless they are cached; ``False`` while an earlier refresh of
        the collection still runs (the debouncer asks again later)."""
        previous = self._refreshing.get(name)
        if previous is not None and not previous.done.is_set():
            return False
        try:
            _value, job = self.start_estimate(name, None, DEFAULT_LEVEL, figure=True)
        except (KeyError, LocalPrivError):
            return True  # gone, empty, or the pool is busy: the next ingest asks again
        if job is not None:
            self._refreshing[name] = job
        return True

    def export_counts(self, name: str, fmt: str = "csv") -> tuple[int, bytes]:
        """``(counts version, bytes of a counts file)`` in the versioned format (docs/format.md)."""
        if fmt not in ("csv", "parquet"):
            raise LocalPrivError(f"counts format {fmt!r}: choose csv or parquet")
        version, obs = self.observations(name)
        if obs is None:
            raise LocalPrivError(f"collection {name} has no reports yet")
        with tempfile.TemporaryDirectory(prefix="localpriv-counts-") as tmp:
            path = obs.save(Path(tmp) / f"counts.{fmt}")
            return version, Path(path).read_bytes()

    # ---- privacy report ---------------------------------------------------------------------
    def _mechanism_entry(self, spec: str, n: int, policy: AdmissionPolicy, domain) -> dict:
        """One mechanism in use: its computed level, its reports, the level if its ``n`` reports
        were shuffled (:func:`~localpriv.analysis.shuffle.shuffle_epsilon` at :data:`SHUFFLE_DELTA`),
        and the memoization bound of a longitudinal mechanism (shown, with what a report is charged)."""
        entry: dict = {"mechanism": spec, "reports": n, "epsilon": None, "meaning": explain_level(math.nan)}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mech = parse(spec, domain, trusted=False)
            eps = policy.level(mech)
        except LocalPrivError:
            return entry
        entry.update(epsilon=eps, meaning=explain_level(eps))
        shuffled: dict = {"n": n, "delta": SHUFFLE_DELTA, "epsilon": None,
                          "assumes": "each report from a different device, shuffled before the server sees them"}
        key = (eps, n)
        amp = self._shuffled.get(key)
        if amp is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    amp = float(shuffle_epsilon(eps, n, SHUFFLE_DELTA))
            except LocalPrivError as exc:
                amp = str(exc)
            with self._lock:
                self._shuffled[key] = amp
                while len(self._shuffled) > 1024:
                    self._shuffled.popitem(last=False)
        if isinstance(amp, float):
            shuffled.update(epsilon=amp, meaning=explain_level(amp, SHUFFLE_DELTA))
        else:
            shuffled["why_not"] = amp
        entry["shuffled"] = shuffled
        if isinstance(mech, Memoized) and hasattr(mech, "epsilon_perm"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                entry["longitudinal"] = {"epsilon_perm": float(mech.epsilon_perm()), "charged": LONGITUDINAL}
        return entry

    def privacy_report(self, name: str) -> dict:
        """What a collection's reports reveal, as JSON data: its mechanisms in use with their
        computed levels (and the level amplified by shuffling), how levels add up
        (:data:`~localpriv.service.words.COMPOSITION`), the distribution of the devices' spending in
        the current period and over their lifetime (quantiles :data:`REPORT_QUANTILES`, max), the
        over-budget refusals, and the reports charged to no device (shared ingest token).

        The per-device spending read is bounded by the group's device cap
        (:data:`~localpriv.service.storage.MAX_DEVICES`), the mechanisms by
        :data:`MAX_REPORT_MECHANISMS` (the rest counted, not described)."""
        col, policy, domain = self._setup(name)
        budget = policy.budget
        period = budget.period if budget is not None else 86400
        start = int(math.floor(time.time() / period) * period)
        led = self.store.ledger(name, device_group(name, policy), start)
        mechs = led["mechanisms"]
        entries = [self._mechanism_entry(spec, n, policy, domain) for spec, n in mechs[:MAX_REPORT_MECHANISMS]]

        def spread(a: np.ndarray) -> dict:
            out: dict = {"devices": int(a.size), "max": float(a.max()) if a.size else None}
            qs = np.quantile(a, REPORT_QUANTILES) if a.size else [None] * len(REPORT_QUANTILES)
            out["quantiles"] = {f"{q:g}": (None if v is None else float(v)) for q, v in zip(REPORT_QUANTILES, qs)}
            return out
        now, life = spread(led["period"]), spread(led["lifetime"])
        if budget is not None and budget.eps is not None:
            now["over_cap"] = int(np.count_nonzero(led["period"] > budget.eps * (1 + 1e-9)))
        worst = now["max"]
        ub, ur = led["unattributed"]
        return _finite({
            "collection": name, "counts_version": int(col["version"]),
            "composition": COMPOSITION,
            "budget": None if budget is None else budget.to_dict(),
            "rate_limit": None if policy.rate_limit is None else policy.rate_limit.to_dict(),
            "mechanisms": entries, "mechanisms_not_described": max(0, len(mechs) - MAX_REPORT_MECHANISMS),
            "devices": {"group": device_group(name, policy), "registered": led["devices"],
                        "period": {"start": start, "seconds": period, **now}, "lifetime": life,
                        "over_budget_refusals": int(col["n_over_budget"] or 0),
                        "worst_device_meaning": explain_level(worst) if worst is not None else None},
            "unattributed": {"batches": ub, "reports": ur, "meaning": UNATTRIBUTED},
            "meaning": MEANING})


def _run_estimator(obs, estimator, settings=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimate_with_uncertainty(obs, estimator, **(settings or {}))


def compute_estimate(obs, method: str, settings: dict, level: float | None, stats: tuple, header: dict,
                     title: str | None) -> dict:
    """A job's computation (in a child process): ``{"estimate": JSON data, "figure": PNG bytes or None}``;
    the figure (when ``title`` is given, formatted with ``estimator`` and ``n``) at the same level,
    its value axis labelled with the collection's name (the attribute collected)."""
    est = _run_estimator(obs, method, settings)
    data = _finite({**header, **est.to_dict(ci=level, stats=list(stats) or None)})
    png = None
    if title is not None:
        with tempfile.TemporaryDirectory(prefix="localpriv-figure-") as tmp:
            path = estimate_figure(est, Path(tmp) / "estimate.png", level=level,
                                   title=title.format(estimator=est.estimator, n=int(est.n)),
                                   xlabel=str(header.get("collection", "value")).replace("$", r"\$"))
            png = Path(path).read_bytes()
    return {"estimate": data, "figure": png}


def _check_level(level):
    if level is None:
        return None
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise LocalPrivError(f"interval level must be a number between 0 and 1, got {level!r}")
    return float(level)


def _finite(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.generic):
        return _finite(obj.item())
    return obj
