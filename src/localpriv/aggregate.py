"""Aggregation: reports to counts per (mechanism, report). Its own, swappable step.

The default :class:`DuckDBAggregator` runs ``GROUP BY mechanism, report`` inside embedded DuckDB
over Parquet/CSV files (or an Arrow table); DuckDB streams the files, so a report file larger than
memory aggregates in bounded memory. :class:`NumpyAggregator` does the same in memory with
``numpy.unique`` (for small arrays and as an independent check).
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from ._validation import LocalPrivError
from .domains import Domain
from .observations import Observations

__all__ = ["Aggregator", "DuckDBAggregator", "NumpyAggregator", "aggregate"]


class Aggregator(Protocol):
    def counts(self, source) -> pd.DataFrame:
        """A frame with columns mechanism, report, count."""


def _sources(source) -> list[str]:
    paths = [source] if isinstance(source, (str, Path)) else list(source)
    out = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise LocalPrivError(f"report file {p} not found")
        out.append(str(p))
    if not out:
        raise LocalPrivError("no report files given")
    return out


class DuckDBAggregator:
    """Counts reports with DuckDB (streaming; bounded memory via ``memory_limit``)."""

    def __init__(self, memory_limit: str = "2GB", threads: int | None = None):
        self.memory_limit = memory_limit
        self.threads = threads

    def _connect(self):
        con = duckdb.connect()
        con.execute(f"SET memory_limit='{self.memory_limit}'")
        con.execute("SET preserve_insertion_order=false")
        if self.threads:
            con.execute(f"SET threads={int(self.threads)}")
        return con

    def counts(self, source) -> pd.DataFrame:
        con = self._connect()
        try:
            if isinstance(source, pa.Table):
                con.register("reports_src", source)
                rel = "reports_src"
            else:
                files = _sources(source)
                csv = all(f.endswith(".csv") for f in files)
                reader = "read_csv" if csv else "read_parquet"
                lst = "[" + ",".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
                rel = f"{reader}({lst})"
            cols = [c[0] for c in con.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall()]
            missing = {"mechanism", "report"} - set(cols)
            if missing:
                raise LocalPrivError(f"report data lacks column(s) {', '.join(sorted(missing))}")
            df = con.execute(
                f"SELECT CAST(mechanism AS VARCHAR) AS mechanism, report, COUNT(*) AS count "
                f"FROM {rel} GROUP BY ALL ORDER BY mechanism, report"
            ).df()
        except duckdb.Error as exc:
            raise LocalPrivError(f"aggregation failed: {exc}") from None
        finally:
            con.close()
        if df.empty:
            raise LocalPrivError("no reports to aggregate: the input is empty")
        if df["report"].isna().any():
            raise LocalPrivError("some reports are missing (null)")
        return df


class NumpyAggregator:
    """Counts an in-memory report table with ``numpy.unique``."""

    def counts(self, source) -> pd.DataFrame:
        if not isinstance(source, pa.Table):
            source = pa.concat_tables([pa.parquet.read_table(f) if not f.endswith(".csv") else
                                       pa.csv.read_csv(f) for f in _sources(source)])
        if source.num_rows == 0:
            raise LocalPrivError("no reports to aggregate: the input is empty")
        mech = source.column("mechanism").cast(pa.string()).to_numpy(zero_copy_only=False)
        frames = []
        for spec in np.unique(mech):
            sel = mech == spec
            rep = source.column("report").to_numpy(zero_copy_only=False)[sel]
            if rep.dtype == object:
                rep = np.frombuffer(b"".join(rep), dtype=np.uint8).reshape(sel.sum(), -1)
                u, c = np.unique(rep, axis=0, return_counts=True)
                u = [bytes(r) for r in u]
            else:
                u, c = np.unique(rep, return_counts=True)
            frames.append(pd.DataFrame({"mechanism": spec, "report": u, "count": c}))
        return pd.concat(frames, ignore_index=True)


def aggregate(source, domain: Domain | None = None, aggregator: Aggregator | None = None) -> Observations:
    """Aggregate reports (files or an Arrow table) to :class:`~localpriv.observations.Observations`."""
    agg = aggregator or DuckDBAggregator()
    return Observations.from_frame(agg.counts(source), domain)
