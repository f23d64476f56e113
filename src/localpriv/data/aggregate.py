"""Aggregation: reports to counts per (mechanism, report). Its own, swappable step.

Every engine reads its input through :func:`localpriv.data.reports.read_reports`, so all engines accept
the same inputs and refuse the same way: any mix of report files, counts files (their counts are
summed: counts are mergeable), globs, folders and hive-partitioned Parquet datasets, or an Arrow
report table. Every row is counted or refused with one line naming the file and rows.

* :class:`DuckDBAggregator` (the default where DuckDB, the optional group ``duckdb``, is installed)
  runs ``GROUP BY mechanism, report`` inside embedded DuckDB
  over the checked batches; DuckDB keeps the partial counts and spills to disk under its
  ``memory_limit``, so inputs larger than memory aggregate in bounded memory.
* :class:`NumpyAggregator` does the same with ``numpy.unique`` (an independent check, and the
  default where DuckDB is not installed: :func:`default_engine`).
* ``"spark"``: :class:`localpriv.extras.spark.SparkAggregator` (the same counts and refusals on a
  Spark cluster; its observations keep a reference to the distributed counts, which
  ``localpriv.estimate(obs, engine="spark")`` estimates without collecting them).

:func:`aggregate` picks the engine by name from :data:`ENGINES`, a table of factories written as
``"module:function"`` strings: an engine that lives above this layer (Spark, in ``localpriv.extras``)
is imported only when it is asked for (:func:`engine_aggregator`), so this module never imports it.

``aggregate(A + B) == aggregate([aggregate(A), aggregate(B)])`` for any split of the inputs.
"""
from __future__ import annotations

import importlib
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeAlias

import numpy as np
import pandas as pd

from localpriv.data.formats import (
    REPORT_SUFFIXES,
    Source,
    StrPath,
    arrow,
    attribute_of,
    check_columns,
    check_output,
    expand_sources,
    one_line,
    write_counts,
)
from localpriv.data.observations import Observations
from localpriv.data.reports import (
    ReportPart,
    batch_reports,
    frame_reports,
    parse_file_spec,
    read_reports,
    validate_reports,
)
from localpriv.domains import Domain
from localpriv.utils.engines import load_engine
from localpriv.utils.errors import SettingError
from localpriv.utils.optional import available, require
from localpriv.utils.validation import LocalPrivError, check_int

if TYPE_CHECKING:
    import duckdb
# pyarrow is the optional group ``parquet`` (localpriv.data.formats.arrow): without it a report
# table is a pandas frame, read by frame_reports
if TYPE_CHECKING or available("pyarrow"):
    import pyarrow as pa

__all__ = ["Aggregator", "DuckDBAggregator", "NumpyAggregator", "aggregate", "write_counts",
           "check_memory_limit", "MAX_TOTAL", "ENGINES", "DEFAULT_ENGINE", "engine_aggregator", "check_total",
           "unique_counts", "report_kind", "make_aggregator", "CountsSummary",
           "count_files", "default_engine", "FALLBACK_ENGINE"]

#: Counts and their totals stay exact in float64 (the estimators' arithmetic) up to 2^53.
MAX_TOTAL = 2 ** 53
#: what the engines count: report or counts files (globs, folders, datasets), or a report table
ReportSource: TypeAlias = "StrPath | Iterable[StrPath] | pa.Table | pd.DataFrame"
#: a numeric part waiting to be merged: spec, reports, counts (None: one each), kind
_Pending: TypeAlias = "tuple[str, np.ndarray, np.ndarray | None, str]"
_MEMORY = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.I)


def check_memory_limit(text: str) -> str:
    """A DuckDB memory limit such as ``2GB`` or ``512MiB``."""
    if not isinstance(text, str) or not _MEMORY.match(text):
        raise SettingError(f"memory limit {text!r} is not a size such as 512MB or 2GB", "memory_limit")
    return text.strip()


class Aggregator(Protocol):
    """What :func:`aggregate` asks of an engine: the checked counts of ``source`` as a frame.

    An engine may also offer ``observations(source) -> Observations`` (see :func:`aggregate`)."""

    def counts(self, source: ReportSource) -> pd.DataFrame:
        """A frame with columns mechanism, report, count (int64), sorted by mechanism and report."""


def report_kind(reports: np.ndarray) -> str:
    """``"binary"`` (bit-vector rows), ``"float"`` or ``"int"``: the kind of an array of reports."""
    return "binary" if reports.ndim == 2 else ("float" if reports.dtype.kind == "f" else "int")


def _stream(source: ReportSource, domain: Domain | None,
            fast: Callable[[Source], list[ReportPart] | None] | None = None) -> Iterator[ReportPart]:
    """``(spec, reports, counts)`` triples from files or an Arrow table, checked."""
    if isinstance(source, pd.DataFrame) and not arrow():
        missing = [c for c in ("mechanism", "report") if c not in source.columns]
        if missing:
            raise LocalPrivError(f"the report table has no column(s) {', '.join(missing)}; "
                                 f"columns: {', '.join(map(str, source.columns)) or '(none)'}")
        src = Source("<report table>", "frame", "counts" if "count" in source.columns else "reports", None)
        check_columns("the report table", [str(c) for c in source.columns], src.kind)
        step = 1 << 20
        for lo in range(0, len(source), step):
            yield from frame_reports(source.iloc[lo:lo + step], src, lo + 1, domain)
        return
    if isinstance(source, pd.DataFrame):
        try:
            source = pa.Table.from_pandas(source, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise LocalPrivError(f"cannot read the report frame: {one_line(exc)}") from None
    if arrow() and isinstance(source, pa.Table):
        missing = [c for c in ("mechanism", "report") if c not in source.column_names]
        if missing:
            raise LocalPrivError(f"the report table has no column(s) {', '.join(missing)}; "
                                 f"columns: {', '.join(source.column_names) or '(none)'}")
        src = Source("<report table>", "arrow", "counts" if "count" in source.column_names else "reports",
                     None)
        check_columns("the report table", source.column_names, src.kind)
        first = 1
        for batch in source.to_batches(max_chunksize=1 << 20):
            if batch.num_rows:
                yield from batch_reports(batch, src, first, domain)
            first += batch.num_rows
        return
    if fast is None:
        for _, parts in read_reports(source, domain):
            yield from parts
        return
    for src in expand_sources(source):
        grouped = fast(src) if src.ftype == "parquet" else None
        if grouped is not None:
            yield from grouped
            continue
        for batch, first in src.batches():
            if batch.num_rows:
                yield from batch_reports(batch, src, first, domain)


def _parquet_grouped(con: duckdb.DuckDBPyConnection, src: Source, domain: Domain | None) -> list[ReportPart] | None:
    """A Parquet source summed by DuckDB's own scan, checked on its distinct (mechanism, report)
    pairs: ``[(spec, mech, reports, counts)]``, or ``None`` when anything is off (a missing value,
    a bad count, a spec or report its mechanism refuses, a text report column), in which case the
    caller reads the file through the row-by-row checked path, which names the offending rows.

    Same result as the checked path on valid files (the tests compare both), at DuckDB's speed."""
    import pyarrow.parquet as pq

    duckdb = require("duckdb")

    try:
        schema = pq.ParquetFile(src.path).schema_arrow
    except (pa.ArrowException, OSError):
        return None
    names = schema.names
    if "report" not in names or not (pa.types.is_integer(schema.field("report").type)
                                      or pa.types.is_floating(schema.field("report").type)
                                      or pa.types.is_binary(schema.field("report").type)
                                      or pa.types.is_fixed_size_binary(schema.field("report").type)):
        return None
    if "mechanism" in names:
        mech_sql = 'CAST("mechanism" AS VARCHAR)'
    elif "mechanism" in src.constants:
        mech_sql = "'" + str(src.constants["mechanism"]).replace("'", "''") + "'"
    else:
        return None
    counts = src.kind == "counts"
    if counts and ("count" not in names or not (pa.types.is_integer(schema.field("count").type)
                                               or pa.types.is_floating(schema.field("count").type))):
        return None
    cnt = '"count"' if counts else "1"
    bad_count = (f'bool_or({cnt} IS NULL OR {cnt} < 0 OR {cnt} <> floor({cnt}) OR {cnt} > 9007199254740992)'
                 if counts else "false")
    path = src.path.replace("'", "''")
    total = f"SUM({cnt})" if counts else "count(*)"  # count(*): no 128-bit sum of ones per report
    query = (f"SELECT {mech_sql} AS mechanism, report, {total} AS count, {bad_count} AS bad "
             f"FROM read_parquet('{path}') GROUP BY 1, 2")
    try:
        df = con.execute(query).df()
    except duckdb.Error:
        return None
    if df.empty or df["bad"].any() or df["mechanism"].isna().any() or df["report"].isna().any() \
            or (df["mechanism"].str.strip() == "").any():
        return None
    out: list[ReportPart] = []
    for spec, grp in df.groupby("mechanism", sort=True):
        spec = src.read_spec(spec)  # format versions 1-2: local-hashing specs mean hash=cw (formats.py)
        try:
            mech = parse_file_spec(spec, domain, src.path)
            rep = grp["report"].to_numpy()
            if rep.dtype == object:
                widths = {len(v) for v in rep}
                if len(widths) != 1:
                    return None
                rep = np.frombuffer(b"".join(bytes(v) for v in rep), dtype=np.uint8).reshape(len(rep), -1)
            rep = validate_reports(mech, rep)
        except LocalPrivError:
            return None
        c = grp["count"].to_numpy(dtype=float)
        if np.any(c > MAX_TOTAL):
            return None
        out.append((spec, mech, rep, c.astype(np.int64)))
    return out


def check_total(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` itself, refused when empty or when its counts add up to more than 2^53 (not exact)."""
    if df.empty:
        raise LocalPrivError("no reports to aggregate: the input is empty")
    totals = df.groupby("mechanism", sort=False)["count"].sum()
    if (totals > MAX_TOTAL).any() or float(totals.sum()) > MAX_TOTAL:
        raise LocalPrivError("more than 2^53 reports in all: counts that large are not exact")
    return df


class DuckDBAggregator:
    """Counts reports with DuckDB (bounded memory via ``memory_limit``; spills to a temporary folder)."""

    def __init__(self, memory_limit: str = "2GB", threads: int | None = None, domain: Domain | None = None,
                 fast: bool = True) -> None:
        """``fast``: Parquet files are summed by DuckDB's own scan and checked on their distinct
        pairs (any anomaly falls back to the row-by-row checked reader); ``False`` reads every file
        through the checked reader. Needs the optional group ``duckdb``: without it, a one-line
        :class:`LocalPrivError` naming it."""
        require("duckdb")
        require("pyarrow")  # DuckDB reads the counted parts as Arrow tables
        self.fast = bool(fast)
        self.memory_limit = check_memory_limit(memory_limit)
        self.threads = None if threads is None else check_int(threads, "threads", minimum=1, maximum=1024)
        self.domain = domain

    def _connect(self, tmp: str) -> duckdb.DuckDBPyConnection:
        duckdb = require("duckdb")
        con = duckdb.connect()
        con.execute(f"SET memory_limit='{self.memory_limit}'")
        con.execute("SET preserve_insertion_order=false")
        con.execute(f"SET temp_directory='{tmp}'")
        if self.threads:
            con.execute(f"SET threads={int(self.threads)}")
        return con

    def counts(self, source: ReportSource) -> pd.DataFrame:
        duckdb = require("duckdb")
        types = {"int": "BIGINT", "float": "DOUBLE", "binary": "BLOB"}
        with tempfile.TemporaryDirectory(prefix="localpriv-duckdb-") as tmp:
            try:
                con = self._connect(tmp)
            except duckdb.Error as exc:
                raise LocalPrivError(f"cannot start DuckDB: {one_line(exc)}") from None
            try:
                made: set[str] = set()
                # numeric parts wait here while they are few (Parquet's fast path hands over one
                # summed part per mechanism and file): merged in memory at the end, without the
                # round trip through DuckDB's tables; past _PENDING_ROWS they go to DuckDB.
                pending: list[_Pending] = []
                held = 0

                def insert(spec: str, r: np.ndarray, c: np.ndarray | None, kind: str) -> None:
                    if kind not in made:
                        con.execute(f"CREATE TABLE agg_{kind} (mechanism VARCHAR, report {types[kind]}, "
                                    "count HUGEINT)")
                        made.add(kind)
                    n = r.shape[0]
                    rep = (pa.FixedSizeBinaryArray.from_buffers(pa.binary(r.shape[1]), n,
                                                                [None, pa.py_buffer(np.ascontiguousarray(r))])
                           if kind == "binary" else pa.array(r))
                    batch = pa.table({
                        "mechanism": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), [spec]),
                        "report": rep,
                        "count": pa.array(np.ones(n, np.int64) if c is None else c, type=pa.int64())})
                    con.register("batch", batch)
                    con.execute(f"INSERT INTO agg_{kind} SELECT CAST(mechanism AS VARCHAR), report, "
                                "SUM(count) FROM batch GROUP BY ALL")
                    con.unregister("batch")

                fast = None if not self.fast else (lambda src: _parquet_grouped(con, src, self.domain))
                for spec, _mech, r, c in _stream(source, self.domain, fast):
                    kind = report_kind(r)
                    if kind != "binary" and held + r.shape[0] <= _PENDING_ROWS:
                        pending.append((spec, r, c, kind))
                        held += r.shape[0]
                        continue
                    for part in pending:
                        insert(*part)
                    pending, held = [], 0
                    insert(spec, r, c, kind)
                frames = []
                if made:
                    for part in pending:
                        insert(*part)
                    pending = []
                for kind in sorted(made):
                    df = con.execute(f"SELECT mechanism, report, SUM(count) AS count FROM agg_{kind} "
                                     "GROUP BY ALL HAVING SUM(count) > 0 ORDER BY mechanism, report").df()
                    if len(df) and float(df["count"].astype(float).max()) > MAX_TOTAL:
                        raise LocalPrivError("more than 2^53 reports of one kind: counts that large are not exact")
                    df["count"] = df["count"].astype(np.int64)
                    if kind == "binary":
                        df["report"] = [bytes(v) for v in df["report"]]
                    frames.append(df)
                if pending:
                    frames.append(_merged_in_memory(pending))
            except duckdb.Error as exc:
                raise LocalPrivError(f"aggregation failed: {one_line(exc)}") from None
            finally:
                con.close()
        if not frames:
            raise LocalPrivError("no reports to aggregate: the input is empty")
        df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        return check_total(df.sort_values(["mechanism"], kind="stable").reset_index(drop=True))


#: numeric rows (distinct reports of summed parts, or raw reports) merged in memory rather than in
#: DuckDB's tables when all the input's parts together hold at most this many
_PENDING_ROWS = 1 << 20


def _merged_in_memory(parts: Iterable[_Pending]) -> pd.DataFrame:
    """The frame DuckDB's final ``GROUP BY ... HAVING SUM(count) > 0 ORDER BY mechanism, report``
    gives, for a few numeric parts ``(spec, reports, counts or None, kind)``; kinds in the order
    the DuckDB path emits them (float before int), each sorted by mechanism and report."""
    groups: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    for spec, r, c, kind in parts:
        groups.setdefault((kind, spec), []).append((r, np.ones(r.shape[0], np.int64) if c is None
                                                    else np.asarray(c, dtype=np.int64)))
    frames = []
    for kind, spec in sorted(groups):
        u, c = _merge([unique_counts(r, c) for r, c in groups[(kind, spec)]])
        if c.size and float(c.max()) > MAX_TOTAL:
            raise LocalPrivError("more than 2^53 reports of one kind: counts that large are not exact")
        keep = c > 0
        frames.append(pd.DataFrame({"mechanism": spec, "report": u[keep], "count": c[keep].astype(np.int64)}))
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


class NumpyAggregator:
    """Counts with ``numpy.unique`` per batch, merged per mechanism (memory: distinct reports)."""

    def __init__(self, domain: Domain | None = None) -> None:
        self.domain = domain

    def counts(self, source: ReportSource) -> pd.DataFrame:
        acc: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for spec, _mech, r, c in _stream(source, self.domain):
            ones = np.ones(r.shape[0], np.int64) if c is None else c
            acc.setdefault(spec, []).append(unique_counts(r, ones))
            if len(acc[spec]) > 16:
                acc[spec] = [_merge(acc[spec])]
        if not acc:
            raise LocalPrivError("no reports to aggregate: the input is empty")
        frames = []
        for spec in sorted(acc):
            u, c = _merge(acc[spec])
            keep = c > 0
            u, c = u[keep], c[keep]
            rep = [bytes(x) for x in u] if u.ndim == 2 else u
            frames.append(pd.DataFrame({"mechanism": spec, "report": rep, "count": c.astype(np.int64)}))
        return check_total(pd.concat(frames, ignore_index=True))


def unique_counts(r: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct reports of ``r`` (rows for bit vectors) and their summed counts ``c``."""
    if r.ndim == 2:
        u, inv = np.unique(r, axis=0, return_inverse=True)
    else:
        u, inv = np.unique(r, return_inverse=True)
    return u, np.bincount(inv.ravel(), weights=c, minlength=u.shape[0]).astype(np.int64) \
        if c.max(initial=0) < 2 ** 50 else _exact_sum(inv.ravel(), c, u.shape[0])


#: the former private name (other modules still import it)


def _exact_sum(inv: np.ndarray, c: np.ndarray, m: int) -> np.ndarray:
    out = np.zeros(m, dtype=np.int64)
    np.add.at(out, inv, c)
    return out


def _merge(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if len(parts) == 1:
        return parts[0]
    u = np.concatenate([p[0] for p in parts])
    c = np.concatenate([p[1] for p in parts])
    return unique_counts(u, c)


#: The aggregation engines by name: ``"module:function"`` of a factory ``f(domain) -> Aggregator``.
#: A string, not the function, so that an engine above this layer (Spark, in ``localpriv.extras``)
#: is imported only when asked for; :func:`engine_aggregator` imports and calls it.
ENGINES: dict[str, str] = {
    "duckdb": "localpriv.data.aggregate:duckdb_engine",
    "numpy": "localpriv.data.aggregate:numpy_engine",
    "spark": "localpriv.extras.spark:spark_engine",
}
#: The preferred engine of :func:`aggregate` when none is named (where it is installed; see
#: :func:`default_engine`).
DEFAULT_ENGINE = "duckdb"
#: The engine when none is named and DuckDB (the optional group ``duckdb``) is not installed.
FALLBACK_ENGINE = "numpy"


def default_engine() -> str:
    """The engine used when none is named: :data:`DEFAULT_ENGINE` (``"duckdb"``) where DuckDB can be
    imported, else :data:`FALLBACK_ENGINE` (``"numpy"``: the same counts and refusals, in memory
    bounded by the distinct reports rather than by a memory limit)."""
    return DEFAULT_ENGINE if available("duckdb") and arrow() else FALLBACK_ENGINE


def duckdb_engine(domain: Domain | None = None) -> DuckDBAggregator:
    """The ``"duckdb"`` engine: :class:`DuckDBAggregator` with its defaults."""
    return DuckDBAggregator(domain=domain)


def numpy_engine(domain: Domain | None = None) -> NumpyAggregator:
    """The ``"numpy"`` engine: :class:`NumpyAggregator`."""
    return NumpyAggregator(domain=domain)


def engine_aggregator(engine: str, domain: Domain | None = None) -> Aggregator:
    """The aggregator of the engine named ``engine`` (a key of :data:`ENGINES`), for ``domain``.

    Raises a one-line :class:`LocalPrivError` for an unknown name, listing the known ones, or when
    the engine's module cannot be imported (e.g. ``"spark"`` without pyspark).
    """
    factory: Callable[..., Aggregator] = load_engine(ENGINES, engine, "aggregation")
    return factory(domain)


def aggregate(source: ReportSource, domain: Domain | None = None, aggregator: Aggregator | None = None, *,
              engine: str | None = None) -> Observations:
    """Aggregate reports and counts (files, globs, folders, datasets, or an Arrow table) to
    :class:`~localpriv.data.observations.Observations`.

    Parameters
    ----------
    source : path, list of paths, pyarrow.Table or pandas.DataFrame
        The reports and counts files (see the module docstring).
    domain : Domain, optional
        Fills ``k`` of specs that leave it out; labels the estimates.
    aggregator : Aggregator, optional
        An engine object (e.g. ``DuckDBAggregator(memory_limit="8GB")``); not with ``engine``.
    engine : str, optional
        An engine by name, a key of :data:`ENGINES`: ``"duckdb"`` (default where installed, else
        ``"numpy"``: :func:`default_engine`), ``"numpy"``, ``"spark"`` (the active Spark session, or
        a local one). ``"duckdb"`` named without DuckDB installed: a one-line error naming the
        optional group ``duckdb``.

    Returns
    -------
    Observations
        The counts per mechanism. An engine that offers ``observations(source)`` (Spark) builds
        them itself: Spark's keep a reference to their distributed counts (``Observations.frame``).
    """
    if aggregator is not None and engine is not None:
        raise LocalPrivError("give aggregate() an aggregator object or an engine name, not both")
    agg = aggregator if aggregator is not None else engine_aggregator(
        default_engine() if engine is None else engine, domain)
    if getattr(agg, "domain", None) is None and domain is not None and hasattr(agg, "domain"):
        agg.domain = domain
    build = getattr(agg, "observations", None)
    obs = build(source) if build is not None else Observations.from_frame(agg.counts(source), domain)
    # files: the values' column they record
    if not isinstance(source, pd.DataFrame) and not (arrow() and isinstance(source, pa.Table)):
        attribute = attribute_of(source)
        if attribute:
            obs.meta["attribute"] = attribute
    return obs


def make_aggregator(engine: str | None = None, *, memory_limit: str = "2GB",
                    domain: Domain | None = None) -> Aggregator:
    """The local aggregator of ``engine`` (``duckdb`` or ``numpy``; None: :func:`default_engine`;
    Spark runs through :func:`count_files`)."""
    if engine is None:
        engine = default_engine()
    if engine == "duckdb":
        return DuckDBAggregator(memory_limit=check_memory_limit(memory_limit), domain=domain)
    if engine == "numpy":
        return NumpyAggregator(domain=domain)
    raise SettingError(f"unknown engine {engine!r}: duckdb, numpy or spark", "engine")


@dataclass(frozen=True)
class CountsSummary:
    """What :func:`count_files` wrote: the counts file and its totals."""

    path: Path
    reports: int
    mechanisms: int
    pairs: int
    engine: str


def count_files(inputs: Iterable, output: str | Path, *, engine: str | None = None, memory_limit: str = "2GB",
                domain: Domain | None = None, master: str = "local[2]",
                stage: Callable[[str], None] | None = None) -> CountsSummary:
    """Count the reports of ``inputs`` (report or counts files, globs, folders, datasets) per
    (mechanism, report) with ``engine`` and write a counts file, atomically.

    ``engine``: ``duckdb`` (bounded memory under ``memory_limit``; the default where installed,
    else ``numpy``: :func:`default_engine`), ``numpy``, or ``spark``
    (``pip install 'localpriv[spark]'``; a session at ``master`` is made, or the active one
    reused). ``stage`` is told when counting ends and writing starts."""
    inputs = list(inputs) if not isinstance(inputs, (str, Path)) else [inputs]
    if engine is None:
        engine = default_engine()
    check_output(output, REPORT_SUFFIXES, inputs, what="counts file")
    if engine == "spark":  # pyspark loads with the extras module only
        spark = importlib.import_module("localpriv.extras.spark")
        df = spark.count_files_spark(inputs, output, master=master, domain=domain, stage=stage)
    else:
        agg = make_aggregator(engine, memory_limit=memory_limit, domain=domain)
        df = agg.counts(inputs)
        if stage is not None:
            stage(f"writing {output}")
        write_counts(df, output, inputs)
    return CountsSummary(Path(output), int(df["count"].sum()), int(df["mechanism"].nunique()), len(df), engine)
