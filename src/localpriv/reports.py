"""Reports: what leaves the users' devices, and the files that hold them.

A report table has two columns: ``mechanism`` (the spec of the mechanism that produced the report,
so one file can hold reports of many mechanisms) and ``report``. Reports are written as Parquet
(default) or CSV. The ``report`` column is ``int64`` for index-valued outputs, ``double`` for
continuous ones and ``binary`` for bit-packed vectors; one file holds one kind (ints and floats
together are stored as ``double``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ._validation import LocalPrivError, check_rng
from .domains import Domain
from .mechanisms import Mechanism, parse

__all__ = ["perturb", "report_table", "write_reports", "read_values"]


def _report_array(reports: np.ndarray) -> pa.Array:
    r = np.asarray(reports)
    if r.ndim == 2:  # bit-packed vectors, one row per report
        r = np.ascontiguousarray(r, dtype=np.uint8)
        width = r.shape[1]
        return pa.array([bytes(x) for x in r], type=pa.binary(width)) if r.shape[0] < 1000 else \
            pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), r.shape[0], [None, pa.py_buffer(r.tobytes())])
    if r.dtype.kind == "f":
        return pa.array(r, type=pa.float64())
    return pa.array(r.astype(np.int64), type=pa.int64())


def report_table(mechanism: Mechanism, reports: np.ndarray) -> pa.Table:
    """A report table for reports of one mechanism."""
    arr = _report_array(reports)
    mech = pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(arr), dtype=np.int32)),
                                          pa.array([str(mechanism)]))
    return pa.table({"mechanism": mech, "report": arr})


def perturb(values, mechanism, rng, domain: Domain | None = None) -> pa.Table:
    """Obfuscate raw ``values`` (encoded by ``domain``) with ``mechanism``; returns a report table."""
    rng = check_rng(rng)
    mech = parse(mechanism, domain)
    x = domain.encode(values) if domain is not None else mech._check_inputs(values)
    return report_table(mech, mech.sample(x, rng))


def write_reports(table: pa.Table, path) -> Path:
    """Write a report table to Parquet (``.parquet``) or CSV (``.csv``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        t = table.set_column(0, "mechanism", table.column("mechanism").cast(pa.string()))
        if pa.types.is_fixed_size_binary(t.schema.field("report").type):
            raise LocalPrivError("bit-vector reports cannot be written as CSV; use .parquet")
        pacsv.write_csv(t, path)
    elif path.suffix in (".parquet", ".pq"):
        pq.write_table(table, path)
    else:
        raise LocalPrivError(f"unknown report file type {path.suffix!r}: use .parquet or .csv")
    return path


def read_values(path, column: str | None = None) -> np.ndarray:
    """Read raw values from a CSV or Parquet file: one column (the first by default), or several
    named with commas (``"lat,lon"`` for a planar grid), returned as an ``n x c`` array."""
    path = Path(path)
    if not path.exists():
        raise LocalPrivError(f"input file {path} not found")
    if path.suffix in (".parquet", ".pq"):
        table = pq.read_table(path)
    else:
        table = pacsv.read_csv(path)
    if table.num_rows == 0:
        raise LocalPrivError(f"{path} has no rows")
    cols = [c.strip() for c in column.split(",")] if column else [table.column_names[0]]
    arrays = []
    for col in cols:
        if col not in table.column_names:
            raise LocalPrivError(f"{path} has no column {col!r}; columns: {', '.join(table.column_names)}")
        arr = table.column(col)
        if arr.null_count:
            raise LocalPrivError(f"column {col!r} of {path} has {arr.null_count} missing value(s)")
        arrays.append(arr.to_numpy(zero_copy_only=False))
    return arrays[0] if len(arrays) == 1 else np.column_stack(arrays)
