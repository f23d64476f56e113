"""Reports: what leaves the users' devices, and the files that hold them.

A report table has two columns: ``mechanism`` (the spec of the mechanism that produced the report,
so one file can hold reports of many mechanisms) and ``report``. The ``report`` column is ``int64``
for index-valued outputs, ``double`` for continuous ones and ``fixed_size_binary`` for bit-packed
vectors. Files follow the versioned format of :mod:`localpriv.data.formats` (``docs/format.md``).

The path of the data through this module is checked at every step: every value read is either
turned into a report or refused with one line that says how many and where (row numbers); missing
values are an error unless the caller asks to drop them, and then they are counted.

Perturbing streams: values are read in chunks and obfuscated in fixed blocks of
:func:`block_size` values, each block drawing from the caller's generator in turn. The reports
therefore depend only on the seed (and the mechanism), never on how the input was chunked; for
inputs of at most one block they are exactly ``mechanism.sample(values, rng)``.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from localpriv.data.formats import (
    CSV_BLOCK_BYTES,
    PARQUET_BATCH_ROWS,
    READ_ERRORS,
    TEXT_ERRORS,
    VALUE_FORMATS,
    Source,
    TableWriter,
    arrow,
    atomic_output,
    check_format,
    csv_columns,
    expand_sources,
    file_type,
    hex_bytes,
    one_line,
    open_text,
    read_error,
    read_head,
    require_parquet,
    rows_text,
)
from localpriv.data.textcsv import (
    FLOAT_PATTERN,
    INT_PATTERN,
    TextBatch,
    TextCsv,
    check_quoted_lines,
    columns_of,
    float_text_values,
    int_text,
    json_columns,
    json_line_blocks,
    match,
    strip,
)
from localpriv.domains import CategoricalDomain, Domain
from localpriv.domains.grid import OUTSIDE_CHOICES, GridDomain
from localpriv.mechanisms import Mechanism, parse
from localpriv.utils.errors import SettingError
from localpriv.utils.optional import available
from localpriv.utils.validation import LocalPrivError, check_rng

# pyarrow is the optional group ``parquet`` (see :func:`localpriv.data.formats.arrow`): without it,
# report tables are pandas frames and CSV values and reports are read as text columns.
if TYPE_CHECKING or available("pyarrow"):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson
    import pyarrow.parquet as pq

__all__ = ["perturb", "perturb_file", "perturb_rows", "OneMechanism", "report_table", "write_reports", "read_values",
           "iter_values", "iter_rows", "distinct_values", "write_labels", "MAX_DISTINCT_VALUES",
           "refuse_outside_domain", "read_reports", "validate_reports", "block_size", "PerturbSummary",
           "value_counts"]

#: Bytes of reports per perturbation block (the unit of the seed split, see :func:`block_size`).
BLOCK_BYTES = 8 << 20

#: one chunk of :func:`iter_rows`: values, the labels as (codes, dictionary) or None, first row, rows kept
RowChunk: TypeAlias = "tuple[np.ndarray, tuple[np.ndarray, list[str]] | None, int, np.ndarray | None]"
#: one mechanism's part of a checked batch (:func:`batch_reports`): spec, mechanism, reports, counts or None
ReportPart: TypeAlias = "tuple[str, Mechanism, np.ndarray, np.ndarray | None]"


# --------------------------------------------------------------------------------------------
# Report tables
# --------------------------------------------------------------------------------------------
def report_array(reports: np.ndarray) -> pa.Array:
    r = np.asarray(reports)
    if r.ndim == 2:  # bit-packed vectors, one row per report
        r = np.ascontiguousarray(r, dtype=np.uint8)
        width = r.shape[1]
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), r.shape[0],
                                                    [None, pa.py_buffer(r.tobytes())])
    if r.dtype.kind == "f":
        return pa.array(r, type=pa.float64())
    return pa.array(r.astype(np.int64), type=pa.int64())


def report_column(reports: np.ndarray) -> np.ndarray:
    """Reports as a column of a pandas report table: int64 or float64, bit vectors as ``bytes``."""
    r = np.asarray(reports)
    if r.ndim == 2:
        r = np.ascontiguousarray(r, dtype=np.uint8)
        return np.asarray(list(map(bytes, r)), dtype=object) if len(r) else np.zeros(0, dtype=object)
    return r.astype(np.float64) if r.dtype.kind == "f" else r.astype(np.int64)


def report_frame(specs: Sequence[str], codes: np.ndarray, reports: np.ndarray) -> pd.DataFrame:
    """A report table as a pandas frame (the form without pyarrow): ``mechanism`` categorical
    (row ``i`` applied ``specs[codes[i]]``) and ``report`` (:func:`report_column`)."""
    return pd.DataFrame({"mechanism": pd.Categorical.from_codes(np.asarray(codes, dtype=np.int32),
                                                                categories=list(specs)),
                         "report": report_column(reports)})


def report_table(mechanism: Mechanism, reports: np.ndarray) -> pa.Table | pd.DataFrame:
    """A report table for reports of one mechanism: an Arrow table, or without pyarrow (the optional
    group ``parquet``) a pandas frame (:func:`report_frame`)."""
    if not arrow():
        return report_frame([str(mechanism)], np.zeros(len(reports), np.int32), reports)
    arr = report_array(reports)
    mech = pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(arr), dtype=np.int32)),
                                          pa.array([str(mechanism)]))
    return pa.table({"mechanism": mech, "report": arr})


def block_size(mechanism: Mechanism) -> int:
    """Values per perturbation block: ``BLOCK_BYTES`` (8 MiB) of reports, at least 1.

    A report takes 8 bytes (index or float) or, for bit vectors, at most ``4 k`` bytes (SHE's
    float32 vectors; unary encodings take ``k / 8``): blocks of ``2^20`` values for index-valued
    mechanisms, ``2^21 / k`` for vector-valued ones. It depends on the mechanism only, so the reports
    drawn from a seed do not depend on how the input is read.
    """
    # a mechanism whose bit-vector width does not grow with k (a sketch) states it: report_bytes
    width = 8 if mechanism.report_kind != "binary" else int(getattr(mechanism, "report_bytes", 4 * mechanism.k))
    return max(1, BLOCK_BYTES // width)


class Blocker:
    """Cuts a stream of index arrays into fixed blocks and samples each with ``rng`` in turn."""

    def __init__(self, mech: Mechanism, rng: np.random.Generator) -> None:
        self.mech, self.rng = mech, rng
        self.size = block_size(mech)
        self.pending: list[np.ndarray] = []
        self.npending = 0

    def push(self, x: np.ndarray) -> Iterator[np.ndarray]:
        self.pending.append(x)
        self.npending += x.size
        if self.npending < self.size:
            return
        buf = np.concatenate(self.pending)
        full = (buf.size // self.size) * self.size
        for s in range(0, full, self.size):
            yield self.mech.sample(buf[s:s + self.size], self.rng)
        rest = buf[full:]
        self.pending, self.npending = ([rest], rest.size) if rest.size else ([], 0)

    def flush(self) -> Iterator[np.ndarray]:
        if self.npending:
            buf = np.concatenate(self.pending)
            self.pending, self.npending = [], 0
            yield self.mech.sample(buf, self.rng)


def encode_values(domain: Domain | None, mech: Mechanism, values: npt.ArrayLike, first_row: int = 1, where: str = "",
            word: str = "row") -> np.ndarray:
    """Encode values (domain) or check indices (no domain); errors name the first bad rows."""
    try:
        return domain.encode(values) if domain is not None else mech._check_inputs(values)
    except LocalPrivError as exc:
        bad = None
        if domain is not None and hasattr(domain, "invalid"):
            try:
                bad = np.flatnonzero(domain.invalid(values))
            except Exception:  # noqa: BLE001 - the original message is the one to show
                bad = None
        if bad is None or bad.size == 0:
            raise LocalPrivError(f"{where}{exc}") from None
        raise LocalPrivError(f"{where}{exc} at {rows_text(bad + first_row, word=word)}") from None


def as_values(values: npt.ArrayLike, domain: Domain | None) -> np.ndarray:
    arr = np.asarray(values)
    width = getattr(domain, "columns", 1) if domain is not None else 1
    two = width == 2 and callable(getattr(domain, "place", None))
    if width > 1 and not two:  # a product domain: one column per attribute
        if arr.ndim != 2 or arr.shape[1] != width:
            raise LocalPrivError(f"values for a product domain of {width} attributes must be an n x {width} array, "
                                 f"got shape {arr.shape}")
    elif two:
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise LocalPrivError(f"values for a grid domain must be an n x 2 array of (lat, lon), "
                                 f"got shape {arr.shape}")
    elif arr.ndim > 1:
        raise LocalPrivError(f"values must be a 1-D array (one value per user), got shape {arr.shape}; "
                             "flatten it yourself if that is what you mean")
    return arr


def perturb(values: Any, mechanism: str | Mechanism, rng: np.random.Generator,
            domain: Domain | None = None) -> pa.Table | pd.DataFrame:
    """Obfuscate raw ``values`` (encoded by ``domain``) with ``mechanism``; returns a report table.

    Reproducible from ``rng``'s seed whatever the size (blocks of :func:`block_size` values drawn in
    turn); at most one block gives exactly ``mechanism.sample(domain.encode(values), rng)``.

    Parameters
    ----------
    values : array-like
        The users' true values: ``n`` values of ``domain`` (``n x 2`` latitude/longitude pairs
        for a planar grid), or domain indices when ``domain`` is None.
    mechanism : str or Mechanism
        A spec such as ``"krr(eps=2.0)"`` (``k`` filled from the domain) or a mechanism.
    rng : numpy.random.Generator
        The source of randomness (:func:`localpriv.make_generator`: seeded for experiments,
        cryptographically secure for real users).
    domain : Domain, optional
        The values' domain.

    Returns
    -------
    pyarrow.Table or pandas.DataFrame
        Columns ``mechanism`` and ``report``, one row per value (:func:`write_reports` saves it); a
        pandas frame where pyarrow (the optional group ``parquet``) is not installed.
    """
    rng = check_rng(rng)
    mech = parse(mechanism, domain)
    x = encode_values(domain, mech, as_values(values, domain))
    blocker = Blocker(mech, rng)
    parts = list(blocker.push(x)) + list(blocker.flush())
    reports = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return report_table(mech, reports)


def write_reports(table: pa.Table | pd.DataFrame, path: str | Path, inputs: Any = (),
                  attribute: str | None = None) -> Path:
    """Write a report table to Parquet (``.parquet``) or CSV (``.csv``), atomically and versioned
    (see :mod:`localpriv.data.formats`).

    Parameters
    ----------
    table : pyarrow.Table or pandas.DataFrame
        Columns ``mechanism`` and ``report`` (:func:`perturb`, :func:`localpriv.perturb_mixed`).
    path : str or Path
        The report file; its suffix picks the format.
    inputs : sequence of paths
        The files the reports were made from (the output may not overwrite one of them).
    attribute : str, optional
        The name of the values' column (recorded in the file: plots label their axis with it).

    Returns
    -------
    Path
        The file written.
    """
    with TableWriter(path, "reports", inputs, attribute=attribute) as w:
        w.write(table)
    return w.path


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------
#: Suffixes of tab-separated values files (read like CSV with a tab delimiter; values only).
TSV_SUFFIXES = (".tsv", ".tsv.gz", ".tab")


def values_format(path: str, fmt: str | None = None) -> tuple[str, str]:
    """``(file type, delimiter)`` of a values file: ``("parquet", "")``, ``("csv", ",")``,
    ``("csv", "\\t")`` for ``.tsv``/``.tsv.gz``/``.tab`` files, ``("json", "")`` (JSON Lines).
    ``fmt`` (``--format``: csv, tsv, parquet or json) names the type whatever the suffix."""
    fmt = check_format(fmt, VALUE_FORMATS)
    if fmt == "parquet":
        return file_type(path, fmt), ""
    if fmt == "csv":
        return "csv", ","
    if fmt is None and not str(path).lower().endswith(TSV_SUFFIXES):
        ftype = file_type(path)
        return ftype, ("," if ftype == "csv" else "")
    head = read_head(path)
    if head == b"PAR1":
        raise LocalPrivError(f"{path} is a Parquet file, not {'JSON' if fmt == 'json' else 'tab-separated'} text; "
                             "read it as Parquet")
    return ("json", "") if fmt == "json" else ("csv", "\t")


def _header_names(path: str, delimiter: str = ",") -> list[str]:
    """The fields of the first line of a CSV/TSV file (its header)."""
    if delimiter == ",":
        return csv_columns(path, 0)
    stream = open_text(path)
    try:
        head = stream.read(1 << 16)
    finally:
        stream.close()
    first = head.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", "replace")
    return [c.strip().strip('"') for c in first.split(delimiter)] if first.strip() else []


def _resolve_columns(path: str, ftype: str, delimiter: str, column: str | None,
                     header: bool) -> tuple[list[str], str]:
    """The Arrow names of the value columns, and how to name them in messages.

    ``column`` is one column or several separated by commas, each a name or a 1-based number
    (``3`` is the third column; a column actually named ``3`` wins). Without a header
    (``header=False``, CSV/TSV only) columns are given by number; the default is the first column.
    """
    if ftype == "parquet":
        if not header:
            raise LocalPrivError(f"{path}: a Parquet file always names its columns; --no-header is for CSV/TSV")
        require_parquet(path)
        try:
            names = pq.read_schema(path).names
        except READ_ERRORS as exc:
            raise LocalPrivError(f"cannot read {path}: {one_line(exc)}") from None
    elif ftype == "json":
        if not header:
            raise LocalPrivError(f"{path}: JSON Lines objects always name their fields; --no-header is for CSV/TSV")
        names = _json_reader(path).schema.names if arrow() else _json_text_names(path)
    else:
        try:
            names = _header_names(path, delimiter)
        except TEXT_ERRORS as exc:
            raise read_error(path, exc) from None
        if not header:
            names = [f"f{i}" for i in range(len(names))]  # Arrow's generated names
    if not names:
        raise LocalPrivError(f"{path} has no columns")
    tokens = [c.strip() for c in column.split(",")] if column else ["1" if not header else names[0]]
    cols = []
    for tok in tokens:
        if header and tok in names:
            cols.append(tok)
        elif tok.isdigit():
            pos = int(tok)
            if not 1 <= pos <= len(names):
                raise LocalPrivError(f"{path} has {len(names)} column(s): there is no column {pos}")
            cols.append(names[pos - 1])
        elif not header:
            raise LocalPrivError(f"{path} has no header (--no-header): give columns by number, 1 for the "
                                 f"first, e.g. --column 3,4; got {tok[:40]!r}")
        else:
            _check_columns(path, [tok], names)  # raises: no such column, and lists them
    if column and not header:
        shown = ",".join(tokens)
    else:
        shown = ",".join(cols)
    return cols, shown


def _json_reader(path: str) -> pajson.JSONStreamingReader:
    """A streaming reader of a JSON Lines file (one object per line)."""
    try:
        return pajson.open_json(open_text(path), read_options=pajson.ReadOptions(block_size=CSV_BLOCK_BYTES,
                                                                                 use_threads=False))
    except (pa.ArrowException, OSError, UnicodeError) as exc:
        raise LocalPrivError(f"cannot read {path} as JSON Lines (one object per line): {one_line(exc)}") from None


def _json_text_names(path: str) -> list[str]:
    """The fields of a JSON Lines file's first block of objects, in order of appearance."""
    for objs in json_line_blocks(open_text(path), path, CSV_BLOCK_BYTES):
        return list(dict.fromkeys(k for o in objs for k in o))
    return []


def value_attribute(path: str | Path, column: str | None = None, header: bool = True,
                    fmt: str | None = None) -> str | None:
    """The name of the value column(s) that :func:`iter_values` reads (``"lat,lon"`` for two),
    recorded in report files as their attribute; ``None`` for files without a header."""
    if not header:
        return None
    ftype, delimiter = values_format(str(path), fmt)
    cols, shown = _resolve_columns(str(path), ftype, delimiter, column, header)
    return shown or None


def _value_batches(path: str, cols: list[str], delimiter: str = ",", header: bool = True,
                   ftype: str = "csv") -> Iterator[tuple[list[pa.Array], int]]:
    if ftype == "parquet":
        require_parquet(path)
    if not arrow():
        yield from _text_value_batches(path, cols, delimiter, header, ftype)
        return
    if ftype == "json":
        row = 1
        for b in _json_reader(path):
            _check_columns(path, cols, b.schema.names)
            yield [b.column(c) for c in cols], row
            row += b.num_rows
        return
    if ftype == "parquet":
        try:
            pf = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as exc:
            raise LocalPrivError(f"cannot read {path}: {one_line(exc)}") from None
        names = pf.schema_arrow.names
        _check_columns(path, cols, names)
        row = 1
        for b in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=cols):
            yield [b.column(c) for c in cols], row
            row += b.num_rows
        return
    bad: list[tuple[int | None, str]] = []

    def on_invalid(r: pacsv.InvalidRow) -> str:
        bad.append((r.number, r.text))
        return "skip"

    check_quoted_lines(open_text(path), path, CSV_BLOCK_BYTES)
    reader = pacsv.open_csv(
        open_text(path),
        read_options=pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES, use_threads=False,
                                       autogenerate_column_names=not header),
        parse_options=pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=False,
                                         invalid_row_handler=on_invalid),
        convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in cols},
                                             # only empty cells are missing: "NA" is a label (Namibia)
                                             strings_can_be_null=True, null_values=[""], include_columns=cols,
                                             include_missing_columns=True))
    names = [f.name for f in reader.schema]
    line = start = 2 if header else 1
    for b in _without_trailing_blanks(reader, _trailing_blank_lines(path)):
        if bad:
            n, text = bad[0]
            cause = "is blank" if not text.strip() else f"has the wrong number of fields: {text[:60]!r}"
            raise LocalPrivError(f"{path}: line {n} {cause}")
        if line == start and header:
            _check_columns(path, cols, _header_names(path, delimiter))
        yield [b.column(c) for c in cols], line
        line += b.num_rows
    if bad:
        n, text = bad[0]
        cause = "is blank" if not text.strip() else f"has the wrong number of fields: {text[:60]!r}"
        raise LocalPrivError(f"{path}: line {n} {cause}")


def _text_value_batches(path: str, cols: list[str], delimiter: str, header: bool,
                        ftype: str) -> Iterator[tuple[list[np.ndarray], int]]:
    """:func:`_value_batches` without pyarrow: CSV/TSV as text columns (:mod:`localpriv.data.textcsv`),
    JSON Lines as object columns, with the same checks and messages."""
    if ftype == "json":
        row = 1
        names = _json_text_names(path)
        for objs in json_line_blocks(open_text(path), path, CSV_BLOCK_BYTES):
            _check_columns(path, cols, names)
            batch = json_columns(objs, cols)
            yield [batch.column(c) for c in cols], row
            row += batch.num_rows
        return
    check_quoted_lines(open_text(path), path, CSV_BLOCK_BYTES)
    reader = TextCsv(open_text(path), path, delimiter=delimiter, header=header, block_bytes=CSV_BLOCK_BYTES)
    if header:
        try:
            _check_columns(path, cols, reader.names)
        except LocalPrivError:
            reader.close()
            raise
    line = 2 if header else 1
    for rows, bad, _first in reader.blocks(drop_trailing=_trailing_blank_lines(path)):
        if bad:
            n, text = bad[0]
            cause = "is blank" if not text.strip() else f"has the wrong number of fields: {text[:60]!r}"
            raise LocalPrivError(f"{path}: line {n} {cause}")
        batch = columns_of(rows, reader.names, cols)
        if batch.num_rows:
            yield [batch.column(c) for c in cols], line
        line += batch.num_rows


def _text_to_numpy(arrays: list[np.ndarray], domain: Domain | None) -> np.ndarray:
    """:func:`_to_numpy` for text (or JSON's object) columns: numbers for numeric domains (whole
    numbers as int64 when every value is decimal digits), text that is no number stays text."""
    out = []
    numeric = domain is None or getattr(domain, "is_numeric", False)
    for a in arrays:
        a = np.asarray(a, dtype=object)
        if not _all_text(a) and len(a):
            kinds = set(map(type, a.tolist()))
            if kinds == {bool}:
                out.append(a.astype(bool))
                continue
            if kinds == {int} and all(-2 ** 63 <= v < 2 ** 63 for v in (min(a), max(a))):
                out.append(a.astype(np.int64))
                continue
            if kinds <= {int, float}:
                out.append(a.astype(np.float64))
                continue
            if any(k in (dict, list) for k in kinds):
                raise LocalPrivError("a value column holds nested values, not single numbers or labels")
            a = np.asarray([str(v) for v in a], dtype=object)
        if numeric and len(a):
            text = strip(a)
            if match(text, INT_PATTERN).all():
                try:
                    out.append(int_text(text))
                    continue
                except (OverflowError, ValueError):
                    pass
            if match(text, FLOAT_PATTERN).all():
                out.append(float_text_values(text))
                continue
        out.append(a)
    if len(out) == 1:
        return out[0]
    return np.column_stack(out)


def _trailing_blank_lines(path: str) -> int:
    """Blank lines at the very end of an uncompressed text file (UCI's files end with one): not rows."""
    if path.lower().endswith(".gz"):
        return 0
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - 4096))
            tail = fh.read()
    except OSError:
        return 0
    rest = tail[len(tail.rstrip(b" \t\r\n")):]
    if len(rest) == len(tail):  # nothing but blanks in the tail: leave it to the reader's checks
        return 0
    n = rest.count(b"\n")
    return n - 1 if rest.endswith(b"\n") else n


def _without_trailing_blanks(batches: Iterable[pa.RecordBatch], blank: int) -> Iterator[pa.RecordBatch]:
    """``batches`` with the last ``blank`` rows (the file's trailing blank lines) left out."""
    held = None
    for b in batches:
        if held is not None:
            yield held
        held = b
    if held is not None:
        yield held.slice(0, max(0, held.num_rows - blank)) if blank else held


def _check_columns(path: str, cols: Sequence[str], names: Sequence[str]) -> None:
    for c in cols:
        if c not in names:
            raise LocalPrivError(f"{path} has no column {c!r}; columns: {', '.join(map(str, names))}")
        if list(names).count(c) > 1:
            raise LocalPrivError(f"{path} has {list(names).count(c)} columns named {c!r}: which one is meant "
                                 "is ambiguous; rename them")


def _to_numpy(arrays: list[pa.Array], domain: Domain | None) -> np.ndarray:
    """Arrow value columns -> NumPy: numbers for numeric domains (text that is no number stays text,
    so the domain names it), labels as text."""
    out = []
    numeric = domain is None or getattr(domain, "is_numeric", False)
    for a in arrays:
        if pa.types.is_dictionary(a.type):
            a = a.cast(a.type.value_type)
        if pa.types.is_nested(a.type) or pa.types.is_binary(a.type) or pa.types.is_large_binary(a.type) \
                or pa.types.is_fixed_size_binary(a.type):
            raise LocalPrivError(f"a value column holds {a.type} values, not single numbers or labels")
        if numeric and (pa.types.is_string(a.type) or pa.types.is_large_string(a.type)):
            text = pc.utf8_trim_whitespace(a)
            decimal = pc.all(pc.match_substring_regex(text, r"^[+-]?\d+$")).as_py()  # not hex (0x1f)
            for target in ((pa.int64(), pa.float64()) if decimal else (pa.float64(),)):
                try:  # whole numbers stay exact (and print as such)
                    a = pc.cast(text, target)
                    break
                except pa.ArrowInvalid:
                    pass
        if pa.types.is_string(a.type) or pa.types.is_large_string(a.type):
            out.append(np.asarray(a.to_numpy(zero_copy_only=False), dtype=object))
        else:
            out.append(a.to_numpy(zero_copy_only=False))
    if len(out) == 1:
        return out[0]
    return np.column_stack(out)


def iter_values(path: str | Path, column: str | None = None, *, domain: Domain | None = None,
                drop_missing: bool = False, stats: dict | None = None,
                header: bool = True, fmt: str | None = None, strip: bool = True) -> Iterator[tuple[np.ndarray, int]]:
    """Stream raw values from a CSV, TSV or Parquet file as ``(values, first_row)`` chunks.

    ``column``: one column (default: the first), or several separated by commas (``"lat,lon"`` for
    a planar grid, returned as ``n x c``), each a name or a 1-based number (``"3,4"``). Files named
    ``.tsv``, ``.tsv.gz`` or ``.tab`` are tab-separated; ``header=False`` reads a CSV/TSV file whose
    first line is data (columns then go by number; rows are counted from line 1). Missing values
    (empty cells, blank lines, nulls) are an error naming their rows, unless ``drop_missing``: then
    they are left out and counted in ``stats["dropped"]`` (``stats["rows"]`` counts every row read).

    Parameters
    ----------
    path : str or Path
        The values file.
    column : str, optional
        The value column(s), by name or 1-based number (default: the first column).
    domain : Domain, optional
        Decides whether text is converted to numbers (numeric domains) or kept as labels.
    drop_missing : bool
        Drop and count rows with a missing value instead of refusing the file.
    stats : dict, optional
        Filled with ``rows`` (read) and ``dropped`` (missing, dropped).
    header : bool
        Whether the first line of a CSV/TSV file names the columns.
    fmt : str, optional
        ``csv``, ``tsv``, ``parquet`` or ``json`` (JSON Lines), whatever the file's suffix (default:
        from the suffix).
    strip : bool
        Remove surrounding blanks from text values (default).

    Yields
    ------
    values : numpy.ndarray
        One chunk of values (``n`` or ``n x c``).
    first_row : int
        The row (Parquet) or line (CSV) number of the chunk's first row.
    """
    for vals, _labels, first, _kept in iter_rows(path, column, domain=domain, drop_missing=drop_missing,
                                                 stats=stats, header=header, fmt=fmt, strip=strip):
        yield vals, first


def _missing(arrays: list, n: int) -> np.ndarray:
    """Rows where any of ``arrays`` is null or blank text."""
    missing = np.zeros(n, dtype=bool)
    for a in arrays:
        if a.null_count:
            missing |= a.is_null().to_numpy(zero_copy_only=False)
        if pa.types.is_string(a.type) or pa.types.is_large_string(a.type):
            missing |= pc.equal(pc.utf8_trim_whitespace(a), "").fill_null(True).to_numpy(zero_copy_only=False)
    return missing


def iter_rows(path: str | Path, column: str | None = None, labels: str | None = None, *, domain: Domain | None = None,
              drop_missing: bool = False, stats: dict | None = None, header: bool = True,
              fmt: str | None = None, strip: bool = True) -> Iterator[RowChunk]:
    """:func:`iter_values` with one more column read as text beside the values: ``labels`` (a
    mechanism spec or a group per row, for :func:`localpriv.data.freewill.perturb_file_mixed`).

    Yields ``(values, (codes, dictionary) or None, first_row, kept)``: the label of row ``i`` of a
    chunk is ``dictionary[codes[i]]``, trimmed of surrounding blanks (numbers in Parquet files as
    text); ``kept`` is ``None`` when no row of the chunk was dropped, else the positions (from
    ``first_row``) of the rows kept, so that row ``i`` is number ``first_row + kept[i]``.
    A row whose label is missing counts as a missing value (refused, or dropped with
    ``drop_missing``). ``fmt``: the file's format (:func:`values_format`); ``strip``: surrounding
    blanks of text values are removed (UCI's ``", "`` separators leave one before every value).
    """
    path = str(path)
    if not Path(path).exists():
        raise LocalPrivError(f"input file {path} not found")
    ftype, delimiter = values_format(path, fmt)
    cols, shown = _resolve_columns(path, ftype, delimiter, column, header)
    extra: list[str] = []
    label_shown = ""
    if labels is not None:
        extra, label_shown = _resolve_columns(path, ftype, delimiter, labels, header)
        if len(extra) != 1:
            raise LocalPrivError(f"{path}: give one column of mechanisms or groups, got {labels!r}")
        if extra[0] in cols:
            raise LocalPrivError(f"{path}: column {label_shown} cannot hold both the values and the mechanisms")
    word = "line" if ftype == "csv" else "row"
    stats = {} if stats is None else stats
    stats.setdefault("rows", 0)
    stats.setdefault("dropped", 0)
    if not arrow():
        yield from _iter_text_rows(path, ftype, delimiter, header, cols, extra, shown,
                                   label_shown, domain, drop_missing, stats, strip, word)
        return
    try:
        for arrays, first in _value_batches(path, cols + extra, delimiter or ",", header, ftype):
            if strip:
                arrays = [pc.utf8_trim_whitespace(a) if pa.types.is_string(a.type) or pa.types.is_large_string(a.type)
                          else a for a in arrays]
            n = len(arrays[0])
            stats["rows"] += n
            lab = None
            if extra:
                lab = arrays[-1]
                if pa.types.is_dictionary(lab.type):
                    lab = lab.cast(lab.type.value_type)
                if not (pa.types.is_string(lab.type) or pa.types.is_large_string(lab.type)):
                    try:
                        lab = pc.cast(lab, pa.string())
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                        raise LocalPrivError(f"{path}: column {label_shown} holds {lab.type} values, not "
                                             "text or numbers") from None
                lab = pc.utf8_trim_whitespace(lab)
                arrays = arrays[:-1]
            missing = _missing(arrays, n)
            gone = _missing([lab], n) if lab is not None else None
            missing_values = False
            if gone is not None and gone.any():
                missing_values, missing = bool(missing.any()), missing | gone
            if missing.any():
                where = np.flatnonzero(missing)
                if not drop_missing:
                    raise _missing_refusal(path, where + first, word, shown, label_shown, gone, missing_values)
                stats["dropped"] += int(where.size)
                keep = pa.array(~missing)
                arrays = [a.filter(keep) for a in arrays]
                lab = lab.filter(keep) if lab is not None else None
            try:
                vals = _to_numpy(arrays, domain)
            except LocalPrivError as exc:
                raise LocalPrivError(f"{path}: column {shown}: {exc}") from None
            if len(vals):
                coded = None
                if lab is not None:
                    enc = pc.dictionary_encode(lab)
                    if isinstance(enc, pa.ChunkedArray):
                        enc = enc.combine_chunks()
                    coded = (enc.indices.to_numpy(zero_copy_only=False).astype(np.int64),
                             enc.dictionary.to_pylist())
                yield vals, coded, first, (np.flatnonzero(~missing) if missing.any() else None)
    except LocalPrivError:
        raise
    except (pa.ArrowException, OSError, UnicodeError) as exc:
        raise read_error(path, exc) from None


def _missing_refusal(path: str, rows: np.ndarray, word: str, shown: str, label_shown: str,
                     gone: np.ndarray | None, missing_values: bool) -> LocalPrivError:
    """The one-line refusal of missing cells at ``rows`` (file lines or rows, ``word``), naming the
    value column, the label column or both (``gone``: the label column's missing cells)."""
    named = shown if gone is None or not gone.any() else (
        f"{shown} and {label_shown}" if missing_values else label_shown)
    return LocalPrivError(f"{path}: {rows.size} missing value(s) in column {named} at "
                          f"{rows_text(rows, word=word)}; fill them, or drop and count them with --drop-missing")


def _iter_text_rows(path: str, ftype: str, delimiter: str, header: bool, cols: list[str], extra: list[str],
                    shown: str, label_shown: str, domain: Domain | None, drop_missing: bool, stats: dict,
                    strip_text: bool, word: str) -> Iterator[RowChunk]:
    """:func:`iter_rows` without pyarrow: the same chunks, checks and messages on text columns."""
    try:
        for arrays, first in _text_value_batches(path, cols + extra, delimiter or ",", header, ftype):
            if strip_text:
                arrays = [strip(a) if _all_text(a) else a for a in arrays]
            n = len(arrays[0])
            stats["rows"] += n
            lab = None
            if extra:
                lab = arrays[-1]
                if not _all_text(lab):
                    if any(isinstance(v, (dict, list, bytes)) for v in lab.tolist()):
                        raise LocalPrivError(f"{path}: column {label_shown} holds nested values, not text or numbers")
                    lab = np.asarray(["" if v is None or v != v else str(v) for v in lab.tolist()], dtype=object)
                lab = strip(lab)
                arrays = arrays[:-1]
            missing = _text_missing(arrays, n)
            gone = _text_missing([lab], n) if lab is not None else None
            missing_values = False
            if gone is not None and gone.any():
                missing_values, missing = bool(missing.any()), missing | gone
            if missing.any():
                where = np.flatnonzero(missing)
                if not drop_missing:
                    raise _missing_refusal(path, where + first, word, shown, label_shown, gone, missing_values)
                stats["dropped"] += int(where.size)
                arrays = [a[~missing] for a in arrays]
                lab = lab[~missing] if lab is not None else None
            try:
                vals = _text_to_numpy(arrays, domain)
            except LocalPrivError as exc:
                raise LocalPrivError(f"{path}: column {shown}: {exc}") from None
            if len(vals):
                coded = None
                if lab is not None:
                    codes, uniques = pd.factorize(lab)
                    coded = (np.asarray(codes, dtype=np.int64), [str(u) for u in uniques])
                yield vals, coded, first, (np.flatnonzero(~missing) if missing.any() else None)
    except LocalPrivError:
        raise
    except (OSError, UnicodeError) as exc:
        raise read_error(path, exc) from None


def _all_text(a: np.ndarray) -> bool:
    return bool(pd.Series(a, dtype=object).map(type).eq(str).all())


def _text_missing(arrays: list[np.ndarray], n: int) -> np.ndarray:
    """Rows where any of ``arrays`` is empty or blank text, or a JSON null."""
    missing = np.zeros(n, dtype=bool)
    for a in arrays:
        s = pd.Series(a, dtype=object)
        missing |= s.isna().to_numpy()
        if _all_text(a):
            missing |= (s.str.strip() == "").to_numpy()
        else:
            missing |= s.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy(dtype=bool)
    return missing


def read_values(path: str | Path, column: str | None = None, *, domain: Domain | None = None,
                drop_missing: bool = False, header: bool = True, fmt: str | None = None,
                strip: bool = True) -> np.ndarray:
    """All values of a CSV, TSV or Parquet file column (see :func:`iter_values`) as one array.

    Parameters
    ----------
    path : str or Path
        The values file (``.csv``, ``.tsv``, ``.tsv.gz``, ``.tab`` or ``.parquet``).
    column : str, optional
        The column(s), by name or 1-based number (default: the first; ``"lat,lon"`` for two).
    domain : Domain, optional
        Numeric domains read numbers, others labels.
    drop_missing : bool
        Drop (and count) missing values instead of refusing the file.
    header : bool
        Whether the first line of a CSV/TSV file names the columns.

    Returns
    -------
    numpy.ndarray
    """
    parts = [v for v, _ in iter_values(path, column, domain=domain, drop_missing=drop_missing,
                                       header=header, fmt=fmt, strip=strip)]
    if not parts:
        raise LocalPrivError(f"{path} has no values")
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


@dataclass
class PerturbSummary:
    """What :func:`perturb_file` did: rows read, values dropped (missing), reports written, and for
    grid domains the points outside the grid (``outside``: dropped with ``outside_action="drop"``,
    moved to the nearest cell with ``"clamp"``)."""

    rows: int
    dropped: int
    reports: int
    mechanism: str
    path: Path
    outside: int = 0
    outside_action: str = "error"
    #: reports per mechanism (:func:`localpriv.data.freewill.perturb_file_mixed`; ``None`` for one mechanism)
    by_mechanism: dict[str, int] | None = None


#: Most distinct values :func:`distinct_values` lists (a categorical column, not identifiers).
MAX_DISTINCT_VALUES = 100_000


class _AsText:
    """Stand-in domain for :func:`iter_rows`: keep the values as text (no numbers parsed)."""

    is_numeric = False


@dataclass(frozen=True)
class DistinctValues:
    """The distinct values of a column and how often each occurs (most frequent first)."""

    values: list[tuple[str, int]]
    rows: int
    missing: int


def distinct_values(path: str | Path, column: str | None = None, *, header: bool = True, fmt: str | None = None,
                    strip: bool = True, limit: int = MAX_DISTINCT_VALUES) -> DistinctValues:
    """The distinct values of one column of a values file, with their counts, streamed: what a
    data owner reviews before writing a domain (``localpriv domain``). Missing values are counted
    apart; more than ``limit`` distinct values is refused (not a categorical column)."""
    counts: dict[str, int] = {}
    stats: dict[str, int] = {}
    text = cast(Domain, _AsText())
    for vals, _first in iter_values(path, column, domain=text, drop_missing=True, stats=stats, header=header,
                                    fmt=fmt, strip=strip):
        if np.ndim(vals) != 1:
            raise LocalPrivError(f"{path}: give one column to list, not {column!r}")
        uniq, cnt = np.unique(np.asarray(vals, dtype=object).astype(str), return_counts=True)
        for u, c in zip(uniq.tolist(), cnt.tolist()):
            counts[u] = counts.get(u, 0) + int(c)
        if len(counts) > limit:
            raise LocalPrivError(f"{path}: column {column or 1} has more than {limit:,} distinct values: it is not "
                                 "a categorical column")
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return DistinctValues(ordered, stats.get("rows", 0), stats.get("dropped", 0))


def write_labels(labels: Sequence[str], path: str | Path) -> Path:
    """Write a labels file (one label per line, UTF-8; what ``--domain @FILE`` reads), atomically."""
    bad = [lab for lab in labels if "\n" in lab or "\r" in lab or lab != lab.strip() or not lab]
    if bad:
        raise LocalPrivError(f"{len(bad)} label(s) cannot be written one per line (line breaks, surrounding "
                             f"blanks or empty), e.g. {bad[0][:40]!r}")
    with atomic_output(path) as tmp:
        tmp.write_text("".join(f"{lab}\n" for lab in labels), encoding="utf-8")
    return Path(path)


def place_values(domain: GridDomain, arr: np.ndarray, outside: str, first: int, path: str,
                 word: str) -> tuple[np.ndarray, np.ndarray]:
    """``domain.place`` on one chunk; points that are no coordinates are refused with their rows."""
    try:
        return domain.place(arr, "drop" if outside == "error" else outside)
    except LocalPrivError as exc:
        try:
            bad = np.flatnonzero(domain.unreadable(arr))
        except LocalPrivError:
            bad = np.zeros(0, dtype=np.int64)
        at = f" at {rows_text(bad + first, word=word)}" if bad.size else ""
        raise LocalPrivError(f"{path}: {exc}{at}") from None


def refuse_outside(domain: GridDomain, chunks: Iterable[tuple[np.ndarray, int]], out: np.ndarray, first: int,
                   path: str, word: str, stats: dict[str, int]) -> NoReturn:
    """Points outside the grid with ``outside="error"``: count them in the rest of the file too
    (read only, nothing is written), then refuse in one line saying how many and where (the first
    :data:`BAD_LINES_SHOWN` lines)."""
    total, partial = int(out.sum()), False
    lines = [int(b) + first for b in np.flatnonzero(out)[:BAD_LINES_SHOWN]]
    try:
        for vals, at in chunks:
            arr = as_values(vals, domain)
            keep = np.flatnonzero(~domain.unreadable(arr))
            bad = keep[domain.place(arr[keep], "drop")[1]]
            total += int(bad.size)
            lines.extend(int(b) + at for b in bad[:max(0, BAD_LINES_SHOWN - len(lines))])
    except LocalPrivError:  # a later problem (a missing value ...): the count so far is a lower bound
        partial = True
    points = stats["rows"] - stats["dropped"]
    how_many = f"at least {total:,}" if partial else f"{total:,} of {points:,}"
    raise LocalPrivError(f"{path}: {how_many} points lie outside the grid ({domain.describe()}), the "
                         f"first at {word}{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}; drop them "
                         f"or move them to the nearest cell, counted, with --outside drop|clamp")


#: Most distinct values outside the domain kept while counting them (past it: "at least").
MAX_BAD_DISTINCT = 10_000
#: Lines (rows) named in the error for values outside the domain.
BAD_LINES_SHOWN = 3


def refuse_outside_domain(domain: Domain, values: np.ndarray, first: int, rest: Iterable[tuple[np.ndarray, int]],
                          path: str, word: str, error: LocalPrivError | None = None,
                          check: Callable[[np.ndarray], np.ndarray] | None = None) -> NoReturn:
    """Values outside a domain: count them over the whole file (read only, nothing is written):
    every bad row and, up to :data:`MAX_BAD_DISTINCT`, the distinct bad values, then refuse in one
    line: ``N lines (M distinct values) outside the domain, first at lines a, b, c: 'x', 'y' ...``.

    Numeric domains (integer lines, intervals, grids) keep the first block's own cause (``error``:
    not numbers, NaN, not whole, out of range) and add the counts over the whole file: ``...; in
    the whole file N lines (M distinct values) not in the domain, first at lines a, b, c``.
    ``check`` is the mask of bad values (default: the domain's ``invalid``); when it finds none in
    the first block, ``error`` (the problem is not the values) is raised as it is."""
    if check is None:
        check = cast(Callable[[np.ndarray], np.ndarray], getattr(domain, "invalid"))  # noqa: B009 - not on Domain
    lines: list[int] = []
    seen: dict[str, Any] = {}
    rows, capped, partial = 0, False, False

    def visit(vals: np.ndarray, at: int) -> None:
        nonlocal rows, capped
        bad = np.flatnonzero(check(vals))
        if not bad.size:
            return
        rows += int(bad.size)
        lines.extend(int(b) + at for b in bad[:max(0, BAD_LINES_SHOWN - len(lines))])
        picked = np.asarray(vals, dtype=object)[bad]
        for v in (picked if picked.ndim == 1 else (tuple(r) for r in picked)):
            key = str(v)
            if key in seen:
                continue
            if len(seen) >= MAX_BAD_DISTINCT:
                capped = True
                continue
            seen[key] = v

    try:
        visit(values, first)
    except LocalPrivError:
        if error is None:
            raise
        raise error from None
    if error is not None and not rows:
        raise error
    in_first = rows
    try:
        for vals, at in rest:
            visit(as_values(vals, domain), at)
    except LocalPrivError:  # a later problem (a missing value ...): the counts so far are lower bounds
        partial = True
    least = "at least " if partial else ""
    distinct = f"{'at least ' if capped or partial else ''}{len(seen):,} distinct value{'s' if len(seen) != 1 else ''}"
    if not isinstance(domain, CategoricalDomain) and error is not None:
        if rows == in_first and not partial:  # no bad value past the first block: its message is exact
            raise error
        what = domain.describe() if isinstance(domain, GridDomain) else domain.spec()
        raise LocalPrivError(f"{error}; in the whole file {least}{rows:,} {word}{'s' if rows != 1 else ''} "
                             f"({distinct}) not in the domain {what}, first at {word}{'s' if len(lines) > 1 else ''} "
                             f"{', '.join(map(str, lines))}")
    shown = ", ".join(repr(v) for v in list(seen)[:5]) + (" ..." if len(seen) > 5 else "")
    blank = any(k != k.strip() for k in seen)
    hint = "; surrounding blanks are kept (--no-strip)" if blank else ""
    raise LocalPrivError(f"{path}: {least}{rows:,} {word}{'s' if rows != 1 else ''} ({distinct}) outside the "
                         f"domain of {domain.size} values, first at {word}{'s' if len(lines) > 1 else ''} "
                         f"{', '.join(map(str, lines))}: {shown}{hint}")


def perturb_file(input: str | Path, output: str | Path, mechanism: str | Mechanism, domain: Domain,
                 rng: np.random.Generator, *, column: str | None = None,
                 drop_missing: bool = False, progress: Callable[[int], None] | None = None,
                 header: bool = True, outside: str = "error", fmt: str | None = None,
                 strip: bool = True) -> PerturbSummary:
    """Stream a values file through ``mechanism`` into a report file, in bounded memory.

    The output is written atomically (nothing appears unless every value was turned into a report)
    and every row is accounted for: ``rows == reports + dropped`` (+ ``outside`` when those are
    dropped). ``column`` and ``header``: see :func:`iter_values` (TSV files, columns by number).
    ``outside`` (grid domains): points outside the grid are an error that says how many and where
    (``"error"``), dropped (``"drop"``) or moved to the nearest cell (``"clamp"``), and counted in
    the summary's ``outside``.

    Parameters
    ----------
    input : str or Path
        CSV, TSV or Parquet file of raw values.
    output : str or Path
        The report file (``.parquet`` or ``.csv``).
    mechanism : str or Mechanism
        The mechanism of every row (for one per row see :func:`localpriv.perturb_file_mixed`).
    domain : Domain
        The values' domain.
    rng : numpy.random.Generator
        The source of randomness.
    column : str, optional
        The value column(s) (default: the first; ``"lat,lon"`` for a grid).
    drop_missing : bool
        Drop and count missing values instead of refusing the file.
    progress : callable, optional
        Called with the number of rows read so far after every chunk.
    header : bool
        Whether the first line of a CSV/TSV file names the columns.
    outside : {"error", "drop", "clamp"}
        Grid domains: what to do with points outside the grid.
    fmt : str, optional
        ``csv``, ``tsv``, ``parquet`` or ``json``, whatever the suffix (default: from the suffix).
    strip : bool
        Remove surrounding blanks from text values (default).

    Returns
    -------
    PerturbSummary
        Rows read, dropped, reports written, the mechanism and the output path.
    """
    rng = check_rng(rng)
    mech = parse(mechanism, domain)
    res = perturb_rows(input, output, domain, OneMechanism(mech, rng), column=column, drop_missing=drop_missing,
                       header=header, outside=outside, progress=progress, fmt=fmt, strip=strip)
    return PerturbSummary(res.rows, res.dropped, res.reports, str(mech), res.path, outside=res.outside,
                          outside_action=res.outside_action)


class OneMechanism:
    """The assignment of :func:`perturb_rows` where every row applies one mechanism (the one-entry
    case of a free-will policy): blocks are sampled from the caller's generator itself."""

    def __init__(self, mech: Mechanism, rng: np.random.Generator) -> None:
        self.mechs, self.rng, self.counts = [mech], rng, [0]

    def codes(self, coded: tuple[np.ndarray, list[str]] | None, first: int, kept: np.ndarray | None, word: str,
              rest: Iterator[RowChunk]) -> np.ndarray:
        """Mechanism ids of a chunk's rows: all zero (``coded`` is ``None``: no label column)."""
        raise LocalPrivError("internal error: one mechanism reads no label column")  # pragma: no cover

    def sample_block(self, x: np.ndarray, g: np.ndarray) -> pa.Table | pd.DataFrame:
        """One block of reports, sampled in one call."""
        self.counts[0] += int(x.size)
        return report_table(self.mechs[0], self.mechs[0].sample(x, self.rng))


def value_counts(path: str | Path, domain: Domain, column: str | None = None, *, header: bool = True,
                 fmt: str | None = None, strip: bool = True) -> np.ndarray:
    """How often each value of ``domain`` occurs in a values file, streamed in bounded memory.

    Memory: one chunk of the file plus ``domain.size`` counts. Values outside the domain (or that
    are no values of it) are refused in one line with their exact count over the whole file and
    the first lines, as :func:`perturb_file` refuses them; missing values are refused too.

    Parameters
    ----------
    path : str or Path
        A CSV, TSV, Parquet or JSON Lines file of values (:func:`iter_values`).
    domain : Domain
        The values' domain (a planar grid reads two columns, ``"lat,lon"``).
    column : str, optional
        The value column(s), by name or 1-based number (default: the first).
    header : bool
        Whether the first line of a CSV/TSV file names the columns.
    fmt : str, optional
        ``csv``, ``tsv``, ``parquet`` or ``json``, whatever the suffix.
    strip : bool
        Remove surrounding blanks from text values (default).

    Returns
    -------
    numpy.ndarray
        ``domain.size`` counts (int64), in the domain's index order.
    """
    path = str(path)
    ftype, _ = values_format(path, fmt)
    word = "line" if ftype == "csv" else "row"
    counts = np.zeros(domain.size, dtype=np.int64)
    stats: dict[str, int] = {}
    chunks = iter_values(path, column, domain=domain, stats=stats, header=header, fmt=fmt, strip=strip)
    for vals, first in chunks:
        arr = as_values(vals, domain)
        if isinstance(domain, GridDomain):
            try:
                x, out = place_values(domain, arr, "error", first, path, word)
            except LocalPrivError as exc:
                refuse_outside_domain(domain, arr, first, chunks, path, word, error=exc, check=domain.unreadable)
            if out.any():
                refuse_outside(domain, chunks, out, first, path, word, stats)
        else:
            try:
                x = domain.encode(arr)
            except LocalPrivError as exc:
                if not hasattr(domain, "invalid"):
                    raise LocalPrivError(f"{path}: {exc}") from None
                numeric = not isinstance(domain, CategoricalDomain)
                bad = np.flatnonzero(domain.invalid(arr)) if numeric else np.zeros(0, dtype=np.int64)
                at = f" at {rows_text(bad + first, word=word)}" if bad.size else ""
                refuse_outside_domain(domain, arr, first, chunks, path, word,
                                      error=LocalPrivError(f"{path}: {exc}{at}") if numeric else None)
        counts += np.bincount(np.asarray(x, dtype=np.int64), minlength=domain.size)
    return counts


def perturb_rows(input: str | Path, output: str | Path, domain: Domain | None, assignment: Any, *,
                 label_column: str | None = None, column: str | None = None, drop_missing: bool = False,
                 header: bool = True, outside: str = "error",
                 progress: Callable[[int], None] | None = None, fmt: str | None = None,
                 strip: bool = True) -> PerturbSummary:
    """The file perturbation pipeline of :func:`perturb_file` and
    :func:`localpriv.data.freewill.perturb_file_mixed`: stream a values file, place or encode its
    values, cut them into fixed blocks (:func:`block_size` of the first mechanism) and sample each
    block with ``assignment`` into one report file, written atomically, every row accounted for.

    ``assignment`` gives each row its mechanism: :class:`OneMechanism` (every row the same; no
    ``label_column``) or a free-will mixture reading ``label_column`` (``codes(...)`` of the labels,
    ``sample_block(x, g)``, ``mechs`` and ``counts``). The summary's ``by_mechanism`` holds the
    reports per mechanism; ``mechanism`` names the one mechanism, or how many there are.
    """
    grid = callable(getattr(domain, "place", None))
    names = getattr(domain, "names", None)
    if column is None and names is not None and getattr(domain, "columns", 1) > 1:
        column = ",".join(names)  # a product domain: its attributes' columns
    if outside not in OUTSIDE_CHOICES:
        raise SettingError(f"outside must be one of {', '.join(OUTSIDE_CHOICES)}, got {outside!r}", "outside")
    if outside != "error" and not grid:
        raise LocalPrivError(f"outside={outside!r} (--outside) applies to planar grid domains (bbox, grid, "
                             f"manhattan), not to {domain}: values outside other domains are always refused")
    path = str(input)
    word = "line" if Path(path).exists() and values_format(path, fmt)[0] == "csv" else "row"
    size = 0  # rows per block: fixed by the first row's mechanism
    stats: dict[str, int] = {}
    n_outside = 0
    pend_x: list[np.ndarray] = []
    pend_g: list[np.ndarray] = []
    npend = 0
    attribute = value_attribute(path, column, header, fmt) if Path(path).exists() else None
    with TableWriter(output, "reports", inputs=[input], attribute=attribute) as w:
        chunks = iter_rows(path, column, label_column, domain=domain, drop_missing=drop_missing, stats=stats,
                           header=header, fmt=fmt, strip=strip)
        for vals, coded, first, kept in chunks:
            g = np.zeros(len(vals), dtype=np.int64) if label_column is None else \
                assignment.codes(coded, first, kept, word, chunks)
            size = size or block_size(assignment.mechs[int(g[0])] if g.size else assignment.mechs[0])
            arr = as_values(vals, domain)
            if grid:
                placed = cast(GridDomain, domain)  # a planar grid: it has place()
                try:
                    x, out = place_values(placed, arr, outside, first, path, word)
                except LocalPrivError as exc:  # points that are no coordinates: counted in the whole file
                    refuse_outside_domain(placed, arr, first, ((v, f) for v, _c, f, _k in chunks), path, word,
                                          error=exc, check=placed.unreadable)
                if out.any():
                    if outside == "error":
                        refuse_outside(placed, ((v, f) for v, _c, f, _k in chunks), out, first, path, word, stats)
                    n_outside += int(out.sum())
                    if outside == "drop":
                        x, g = x[~out], g[~out]
            else:
                try:
                    x = encode_values(domain, assignment.mechs[int(g[0]) if g.size else 0], arr, first,
                                      where=f"{path}: ", word=word)
                except LocalPrivError as exc:
                    if domain is None or not hasattr(domain, "invalid"):
                        raise
                    numeric = not isinstance(domain, CategoricalDomain)  # numeric: their own cause first
                    refuse_outside_domain(domain, arr, first, ((v, f) for v, _c, f, _k in chunks), path, word,
                                          error=exc if numeric else None)
            pend_x.append(x)
            pend_g.append(g)
            npend += x.size
            if npend >= size:
                bx, bg = np.concatenate(pend_x), np.concatenate(pend_g)
                full = (bx.size // size) * size
                for s0 in range(0, full, size):
                    w.write(assignment.sample_block(bx[s0:s0 + size], bg[s0:s0 + size]))
                pend_x, pend_g, npend = [bx[full:]], [bg[full:]], bx.size - full
            if progress is not None:
                progress(stats["rows"])
        if npend:
            w.write(assignment.sample_block(np.concatenate(pend_x), np.concatenate(pend_g)))
        gone = n_outside if outside == "drop" else 0
        if w.rows == 0:
            raise LocalPrivError(f"{path} has no values" + (f" ({stats['dropped']} missing, dropped)"
                                                           if stats.get("dropped") else "")
                                 + (f" ({gone:,} outside the grid, dropped)" if gone else ""))
        if w.rows + stats["dropped"] + gone != stats["rows"]:  # pragma: no cover - an internal invariant
            raise LocalPrivError(f"internal error: {stats['rows']} rows read but {w.rows} reports "
                                 f"and {stats['dropped'] + gone} dropped")
    by = {str(m): c for m, c in zip(assignment.mechs, assignment.counts)}
    return PerturbSummary(stats["rows"], stats["dropped"], w.rows,
                          f"{len(by)} mechanism(s)" if len(by) != 1 else next(iter(by)), w.path,
                          outside=n_outside, outside_action=outside, by_mechanism=by)


# --------------------------------------------------------------------------------------------
# Reading reports and counts back, checked
# --------------------------------------------------------------------------------------------
_PARSED: dict[tuple[str, str | None], Mechanism] = {}


def parse_file_spec(spec: str, domain: Domain | None, where: str) -> Mechanism:
    key = (spec, None if domain is None else domain.spec())
    mech = _PARSED.get(key)
    if mech is None:
        try:
            mech = parse(spec, domain, trusted=False)
        except LocalPrivError as exc:
            raise LocalPrivError(f"{where}: {exc}") from None
        if len(_PARSED) > 256:
            _PARSED.clear()
        _PARSED[key] = mech
    return mech


def report_width(mech: Mechanism) -> int:
    """Bytes of one bit-vector report of ``mech`` (from one draw with a throwaway generator)."""
    w = getattr(mech, "_report_width_cache", None)
    if w is None:
        w = int(np.asarray(mech.sample(np.zeros(1, dtype=np.int64), np.random.default_rng(0))).shape[1])
        with contextlib.suppress(AttributeError):  # slotted classes
            mech._report_width_cache = w  # type: ignore[attr-defined]  # a cache kept on the instance
    return w


def locate_bad_reports(check: Callable[[np.ndarray], None], reports: np.ndarray, limit: int = 5) -> list[int]:
    """Indices of the first rows ``check`` refuses, by bisection (only on the error path)."""
    found: list[int] = []

    def visit(lo: int, hi: int) -> None:
        if len(found) >= limit:
            return
        try:
            check(reports[lo:hi])
            return
        except LocalPrivError:
            if hi - lo == 1:
                found.append(lo)
                return
        mid = (lo + hi) // 2
        visit(lo, mid)
        visit(mid, hi)

    visit(0, reports.shape[0])
    return found


def check_one_report(mech: Mechanism) -> Callable[[np.ndarray], None]:
    kind = mech.report_kind

    def check(r: np.ndarray) -> None:
        if kind == "binary":
            if r.ndim != 2 or r.dtype != np.uint8:
                raise LocalPrivError(f"{mech}: reports are bit vectors (bytes), got {r.dtype} values")
            # every bit-vector report holds at least k bits, unless the mechanism states its width
            # (sketches: report_bytes); refused before drawing a report of a k the file may inflate
            stated = getattr(mech, "report_bytes", None)
            least = int(stated) if stated is not None else -(-int(mech.k) // 8)
            if r.shape[1] < least:
                raise LocalPrivError(f"{mech}: reports have at least {least} bytes, got {r.shape[1]}")
            width = report_width(mech)
            if r.shape[1] != width:
                raise LocalPrivError(f"{mech}: reports have {width} bytes, got {r.shape[1]}")
            own = getattr(mech, "check_binary_reports", None)  # a mechanism's own checks (rappor)
            if own is not None and r.shape[0]:
                own(r)
            vectors = getattr(mech, "vectors", None)
            if vectors is not None and r.shape[0] and not np.all(np.isfinite(vectors(r))):
                raise LocalPrivError(f"{mech}: reports hold NaN or infinite entries")
            return
        if r.ndim != 1:
            raise LocalPrivError(f"{mech}: reports must be single values, got shape {r.shape}")
        if r.dtype.kind == "f" and not np.all(np.isfinite(r)):
            raise LocalPrivError(f"{mech}: reports contain NaN or infinite values")
        if kind == "int64" and r.dtype.kind == "f" and np.any(r != np.round(r)):
            raise LocalPrivError(f"{mech}: reports must be whole numbers (output indices)")
        if kind == "int64" and r.dtype.kind not in "iuf":
            raise LocalPrivError(f"{mech}: reports must be integers, got {r.dtype}")
        if kind == "float64" and r.dtype.kind not in "iuf":
            raise LocalPrivError(f"{mech}: reports must be numbers, got {r.dtype}")
        if r.size and kind == "int64":
            if r.dtype.kind in "fu":  # beyond int64 a cast would wrap: name the values as they are
                with np.errstate(invalid="ignore"):
                    big = r[(r >= 2 ** 63) | (r < -(2 ** 63))] if r.dtype.kind == "f" else r[r >= 2 ** 63]
                if big.size:
                    raise LocalPrivError(f"{mech}: reports outside the output space (beyond 64-bit integers): "
                                         f"{np.unique(big)[:5].tolist()}")
            mech.output_index(r.astype(np.int64) if r.dtype.kind in "fu" else r)
    return check


def validate_reports(mech: Mechanism, reports: npt.ArrayLike, where: str = "", first_row: int = 1,
                     word: str = "row") -> np.ndarray:
    """Check reports against ``mech``'s output space (kind, width, range, NaN); refuse with the
    first bad rows named. Returns the reports as a NumPy array (``int64``, ``float64`` or ``n x w``
    ``uint8``)."""
    r = np.asarray(reports)
    if mech.report_kind == "float64" and r.dtype.kind in "iu":
        r = r.astype(np.float64)
    check = check_one_report(mech)
    try:
        check(r)
    except LocalPrivError as exc:
        bad = locate_bad_reports(check, r) if r.ndim >= 1 and r.shape[0] > 0 else []
        at = f" at {rows_text(np.asarray(bad) + first_row, word=word)}" if bad else ""
        raise LocalPrivError(f"{where}{exc}{at}") from None
    if mech.report_kind == "int64" and r.dtype.kind == "f":
        r = r.astype(np.int64)
    return r


def _text_reports(mech: Mechanism, arr: pa.Array, where: str, first: int, rows: np.ndarray,
                  word: str) -> np.ndarray:
    """The CSV text form of reports -> typed values for ``mech``."""
    kind = mech.report_kind
    text = pc.utf8_trim_whitespace(arr)
    if kind == "binary":
        # hex pairs of one length; the odd rows out (not the first row's length) are the ones named
        lengths = pc.utf8_length(text).to_numpy(zero_copy_only=False)
        ok = pc.match_substring_regex(text, r"^([0-9a-fA-F]{2})+$").to_numpy(zero_copy_only=False)
        if ok.any():
            common, seen = np.unique(lengths[ok], return_counts=True)
            ok &= lengths == common[np.argmax(seen)]
        if not ok.all():
            bad = np.flatnonzero(~ok)
            raise LocalPrivError(f"{where}{mech}: bit-vector reports must be hex text of one length, at "
                                 f"{rows_text(rows[bad] + first, bad.size, word=word)}")
        n = len(text)
        if not n:
            return np.zeros((0, 0), np.uint8)
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        return hex_bytes(text, int(lengths[0]))
    target = pa.int64() if kind == "int64" else pa.float64()
    if kind == "int64":  # decimal digits only (Arrow's cast would also take hex such as 0x1f)
        digits = pc.match_substring_regex(text, r"^[+-]?\d+$").fill_null(False)
        if pc.all(digits).as_py():
            text = pc.replace_substring_regex(text, r"^\+", "")  # Arrow's cast refuses a leading +
            try:
                return pc.cast(text, target).to_numpy(zero_copy_only=False)
            except pa.ArrowInvalid:  # digits beyond 64 bits
                big = np.flatnonzero(np.abs(pc.cast(text, pa.float64()).to_numpy(zero_copy_only=False))
                                     >= 2.0 ** 63)
                raise LocalPrivError(f"{where}{mech}: reports outside the output space (beyond 64-bit "
                                     f"integers), at {rows_text(rows[big] + first, big.size, word=word)}") from None
    try:
        if kind == "int64":
            raise pa.ArrowInvalid("not decimal digits")
        return pc.cast(text, target).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:
        ok = pc.match_substring_regex(text, r"^[+-]?\d+$" if kind == "int64" else
                                      r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?(inf|nan|Infinity|NaN)$")
        bad = np.flatnonzero(~ok.fill_null(False).to_numpy(zero_copy_only=False))
        what = "whole numbers (output indices)" if kind == "int64" else "numbers"
        raise LocalPrivError(f"{where}{mech}: reports must be {what}, at "
                             f"{rows_text(rows[bad] + first, bad.size, word=word)}") from None


def _counts_column(arr: pa.Array, where: str, first: int, word: str) -> np.ndarray:
    """A count column -> int64, refusing text, fractions, negatives and values above 2^53."""
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        text = pc.utf8_trim_whitespace(arr)
        ok = pc.match_substring_regex(text, r"^\+?\d{1,16}$").fill_null(False).to_numpy(zero_copy_only=False)
        if not ok.all():
            bad = np.flatnonzero(~ok)
            raise LocalPrivError(f"{where}counts must be whole numbers >= 0, at "
                                 f"{rows_text(bad + first, bad.size, word=word)}")
        c = pc.cast(pc.replace_substring_regex(text, r"^\+", ""), pa.int64()).to_numpy(zero_copy_only=False)
    else:
        v = arr.to_numpy(zero_copy_only=False)
        if v.dtype.kind not in "iuf":
            raise LocalPrivError(f"{where}the count column holds {arr.type}, not whole numbers")
        with np.errstate(invalid="ignore"):
            okf = np.isfinite(v) & (v == np.round(v)) if v.dtype.kind == "f" else np.ones(v.size, bool)
        bad = np.flatnonzero(~okf | (v < 0) | (v > 2.0 ** 53))
        if bad.size:
            raise LocalPrivError(f"{where}counts must be whole numbers from 0 to 2^53, at "
                                 f"{rows_text(bad + first, bad.size, word=word)}")
        c = v.astype(np.int64)
    bad = np.flatnonzero((c < 0) | (c > 2 ** 53))
    if bad.size:
        raise LocalPrivError(f"{where}counts must be whole numbers from 0 to 2^53, at "
                             f"{rows_text(bad + first, bad.size, word=word)}")
    return c


def _text_batch_reports(batch: TextBatch, src: Source, first: int, domain: Domain | None) -> list[ReportPart]:
    """:func:`batch_reports` of a CSV batch read without pyarrow (text columns, ``""`` an empty cell)."""
    word = "line" if src.ftype == "csv" else "row"
    where = f"{src.path}: "
    mech_col = batch.column("mechanism")
    empty = strip(mech_col) == ""
    if empty.any():
        bad = np.flatnonzero(empty)
        raise LocalPrivError(f"{where}{bad.size} row(s) have no mechanism, at "
                             f"{rows_text(bad + first, bad.size, word=word)}")
    rep = batch.column("report")
    null = rep == ""
    if null.any():
        bad = np.flatnonzero(null)
        raise LocalPrivError(f"{where}{bad.size} row(s) have no report, at "
                             f"{rows_text(bad + first, bad.size, word=word)}")
    counts = None
    if src.kind == "counts":
        ccol = batch.column("count")
        null = ccol == ""
        if null.any():
            bad = np.flatnonzero(null)
            raise LocalPrivError(f"{where}{bad.size} row(s) have no count, at "
                                 f"{rows_text(bad + first, bad.size, word=word)}")
        counts = _text_counts(ccol, where, first, word)
    codes, uniques = pd.factorize(mech_col)
    specs = [str(u) for u in uniques]
    out: list[ReportPart] = []
    single = len(specs) == 1
    for i, spec in enumerate(specs):
        rows = np.arange(batch.num_rows) if single else np.flatnonzero(codes == i)
        mech = parse_file_spec(spec, domain, f"{src.path} ({word} {rows[0] + first})")
        part = rep if single else rep[rows]
        r = _np_text_reports(mech, part, where, first, rows, word)
        r = _checked_part(mech, r, rows, single, where, first, word)
        out.append((spec, mech, r, None if counts is None else (counts if single else counts[rows])))
    return out


def frame_reports(df: pd.DataFrame, src: Source, first: int, domain: Domain | None) -> list[ReportPart]:
    """:func:`batch_reports` of a pandas report table (the form of :func:`perturb` without
    pyarrow): reports int64, float64, ``bytes`` (bit vectors) or text, counts whole numbers."""
    where = "the report table: "
    word = "row"
    mech_col = df["mechanism"].astype(object).to_numpy()
    empty = pd.isna(mech_col) | (strip(np.asarray([str(v) for v in mech_col], dtype=object)) == "")
    if empty.any():
        bad = np.flatnonzero(empty)
        raise LocalPrivError(f"{where}{bad.size} row(s) have no mechanism, at "
                             f"{rows_text(bad + first, bad.size, word=word)}")
    rep = df["report"].to_numpy()
    if rep.dtype == object and pd.isna(rep).any():
        bad = np.flatnonzero(pd.isna(rep))
        raise LocalPrivError(f"{where}{bad.size} row(s) have no report, at "
                             f"{rows_text(bad + first, bad.size, word=word)}")
    counts = None
    if src.kind == "counts":
        c = df["count"].to_numpy()
        if c.dtype == object:
            c = _text_counts(np.asarray([str(v) for v in c], dtype=object), where, first, word)
        counts = _numeric_counts(np.asarray(c), str(c.dtype), where, first, word)
    codes, uniques = pd.factorize(mech_col)
    specs = [str(u) for u in uniques]
    out: list[ReportPart] = []
    single = len(specs) == 1
    for i, spec in enumerate(specs):
        rows = np.arange(len(df)) if single else np.flatnonzero(codes == i)
        mech = parse_file_spec(spec, domain, f"the report table ({word} {rows[0] + first})")
        part = rep if single else rep[rows]
        if part.dtype == object and len(part) and all(isinstance(v, (bytes, bytearray)) for v in part[:1]):
            if mech.report_kind != "binary":
                raise LocalPrivError(f"{where}{mech} reports are numbers but the table holds bit vectors "
                                     f"({word} {rows[0] + first})")
            lens = set(map(len, part.tolist()))
            if len(lens) > 1:
                raise LocalPrivError(f"{where}{mech}: bit-vector reports of different lengths")
            r = np.frombuffer(b"".join(part.tolist()), dtype=np.uint8).reshape(len(part), -1)
        elif part.dtype == object:
            r = _np_text_reports(mech, np.asarray([str(v) for v in part], dtype=object), where, first, rows, word)
        else:
            if mech.report_kind == "binary":
                raise LocalPrivError(f"{where}{mech} reports are bit vectors but the table holds "
                                     f"{part.dtype} values ({word} {rows[0] + first})")
            r = part
        r = _checked_part(mech, r, rows, single, where, first, word)
        out.append((spec, mech, r, None if counts is None else (counts if single else counts[rows])))
    return out


def _checked_part(mech: Mechanism, r: np.ndarray, rows: np.ndarray, single: bool, where: str, first: int,
                  word: str) -> np.ndarray:
    """One mechanism's reports of a batch checked against its output space; the rows named."""
    if single:
        return validate_reports(mech, r, where, first, word)
    try:  # rows of this mechanism are not contiguous: name them by their own positions
        return validate_reports(mech, r, where)
    except LocalPrivError:
        chk = check_one_report(mech)
        bad_at = locate_bad_reports(chk, np.asarray(r))
        raise LocalPrivError(f"{where}{mech}: invalid reports at "
                             f"{rows_text(rows[bad_at] + first, len(bad_at), word=word)}") from None


def _np_text_reports(mech: Mechanism, text: np.ndarray, where: str, first: int, rows: np.ndarray,
                     word: str) -> np.ndarray:
    """:func:`_text_reports` on text columns (without pyarrow): the same checks and messages."""
    kind = mech.report_kind
    text = strip(text)
    if kind == "binary":
        lengths = np.fromiter(map(len, text.tolist()), dtype=np.int64, count=len(text))
        ok = match(text, r"([0-9a-fA-F]{2})+")
        if ok.any():
            common, seen = np.unique(lengths[ok], return_counts=True)
            ok &= lengths == common[np.argmax(seen)]
        if not ok.all():
            bad = np.flatnonzero(~ok)
            raise LocalPrivError(f"{where}{mech}: bit-vector reports must be hex text of one length, at "
                                 f"{rows_text(rows[bad] + first, bad.size, word=word)}")
        if not len(text):
            return np.zeros((0, 0), np.uint8)
        width = int(lengths[0])
        chars = np.frombuffer("".join(text.tolist()).encode("ascii"), dtype=np.uint8).reshape(len(text), width)
        val = np.where(chars <= ord("9"), chars - ord("0"), (chars | 0x20) - ord("a") + 10).astype(np.uint8)
        return (val[:, 0::2] << 4) | val[:, 1::2]
    if kind == "int64":
        ok = match(text, INT_PATTERN)
        if ok.all():
            try:
                return int_text(text)
            except OverflowError:
                big = np.flatnonzero(np.abs(float_text_values(text)) >= 2.0 ** 63)
                raise LocalPrivError(f"{where}{mech}: reports outside the output space (beyond 64-bit "
                                     f"integers), at {rows_text(rows[big] + first, big.size, word=word)}") from None
        what = "whole numbers (output indices)"
    else:
        ok = match(text, FLOAT_PATTERN)
        if ok.all():
            return float_text_values(text)
        what = "numbers"
    bad = np.flatnonzero(~ok)
    raise LocalPrivError(f"{where}{mech}: reports must be {what}, at "
                         f"{rows_text(rows[bad] + first, bad.size, word=word)}")


def _text_counts(text: np.ndarray, where: str, first: int, word: str) -> np.ndarray:
    """:func:`_counts_column` of a text column (without pyarrow)."""
    text = strip(text)
    ok = match(text, r"\+?[0-9]{1,16}")
    if not ok.all():
        bad = np.flatnonzero(~ok)
        raise LocalPrivError(f"{where}counts must be whole numbers >= 0, at "
                             f"{rows_text(bad + first, bad.size, word=word)}")
    return _numeric_counts(int_text(text), "int64", where, first, word)


def _numeric_counts(v: np.ndarray, typename: str, where: str, first: int, word: str) -> np.ndarray:
    """A numeric count column -> int64, refusing fractions, negatives and values above 2^53."""
    if v.dtype.kind not in "iuf":
        raise LocalPrivError(f"{where}the count column holds {typename}, not whole numbers")
    with np.errstate(invalid="ignore"):
        okf = np.isfinite(v) & (v == np.round(v)) if v.dtype.kind == "f" else np.ones(v.size, bool)
    bad = np.flatnonzero(~okf | (v < 0) | (v > 2.0 ** 53))
    if bad.size:
        raise LocalPrivError(f"{where}counts must be whole numbers from 0 to 2^53, at "
                             f"{rows_text(bad + first, bad.size, word=word)}")
    return v.astype(np.int64)


def batch_reports(batch: pa.RecordBatch | TextBatch, src: Source, first: int,
                  domain: Domain | None) -> list[ReportPart]:
    """One checked batch -> ``[(spec, mech, reports, counts)]`` (counts ``None`` for report files).
    A :class:`~localpriv.data.textcsv.TextBatch` (CSV read without pyarrow) gets the same checks."""
    if isinstance(batch, TextBatch):
        return _text_batch_reports(batch, src, first, domain)
    word = "line" if src.ftype == "csv" else "row"
    where = f"{src.path}: "
    mech_col = batch.column("mechanism")
    if pa.types.is_dictionary(mech_col.type):
        mech_col = mech_col.cast(mech_col.type.value_type)
    if not (pa.types.is_string(mech_col.type) or pa.types.is_large_string(mech_col.type)):
        raise LocalPrivError(f"{where}the mechanism column holds {mech_col.type}, not spec strings")
    empty = mech_col.is_null()
    empty = pc.or_(empty, pc.equal(pc.utf8_trim_whitespace(mech_col), "").fill_null(True))
    if pc.any(empty).as_py():
        bad = np.flatnonzero(empty.to_numpy(zero_copy_only=False))
        raise LocalPrivError(f"{where}{bad.size} row(s) have no mechanism, at "
                             f"{rows_text(bad + first, bad.size, word=word)}")
    rep = batch.column("report")
    if rep.null_count:
        bad = np.flatnonzero(rep.is_null().to_numpy(zero_copy_only=False))
        raise LocalPrivError(f"{where}{bad.size} row(s) have no report, at "
                             f"{rows_text(bad + first, bad.size, word=word)}")
    counts = None
    if src.kind == "counts":
        ccol = batch.column("count")
        if ccol.null_count:
            bad = np.flatnonzero(ccol.is_null().to_numpy(zero_copy_only=False))
            raise LocalPrivError(f"{where}{bad.size} row(s) have no count, at "
                                 f"{rows_text(bad + first, bad.size, word=word)}")
        counts = _counts_column(ccol, where, first, word)
    enc = pc.dictionary_encode(mech_col)
    codes = enc.indices.to_numpy(zero_copy_only=False)
    specs = enc.dictionary.to_pylist()
    out: list[ReportPart] = []
    is_text = pa.types.is_string(rep.type) or pa.types.is_large_string(rep.type)
    single = len(specs) == 1
    for i, spec in enumerate(specs):
        rows = np.arange(batch.num_rows) if single else np.flatnonzero(codes == i)
        mech = parse_file_spec(spec, domain, f"{src.path} ({word} {rows[0] + first})")
        part = rep if single else rep.take(pa.array(rows))
        if is_text:
            r = _text_reports(mech, part, where, first, rows, word)
        elif pa.types.is_fixed_size_binary(part.type) or pa.types.is_binary(part.type):
            if mech.report_kind != "binary":
                raise LocalPrivError(f"{where}{mech} reports are numbers but the file holds bit vectors "
                                     f"({word} {rows[0] + first})")
            if pa.types.is_fixed_size_binary(part.type):
                width = part.type.byte_width
                buf = part.buffers()[1]
                r = np.frombuffer(buf, dtype=np.uint8, count=(part.offset + len(part)) * width)[
                    part.offset * width:].reshape(len(part), width).copy()
            else:
                vals = part.to_numpy(zero_copy_only=False)
                lens = {len(v) for v in vals}
                if len(lens) > 1:
                    raise LocalPrivError(f"{where}{mech}: bit-vector reports of different lengths")
                r = np.frombuffer(b"".join(vals), dtype=np.uint8).reshape(len(vals), -1)
        else:
            r = part.to_numpy(zero_copy_only=False)
            if mech.report_kind == "binary":
                raise LocalPrivError(f"{where}{mech} reports are bit vectors but the file holds "
                                     f"{part.type} values ({word} {rows[0] + first})")
        if not single:
            # rows of this mechanism are not contiguous: name them by their own positions
            try:
                r = validate_reports(mech, r, where)
            except LocalPrivError:
                chk = check_one_report(mech)
                bad_at = locate_bad_reports(chk, np.asarray(r))
                raise LocalPrivError(f"{where}{mech}: invalid reports at "
                                     f"{rows_text(rows[bad_at] + first, len(bad_at), word=word)}") from None
        else:
            r = validate_reports(mech, r, where, first, word)
        c = None if counts is None else (counts if single else counts[rows])
        out.append((spec, mech, r, c))
    return out


def read_reports(inputs: Any, domain: Domain | None = None) -> Iterator[tuple[Source, list[ReportPart]]]:
    """Stream checked reports and counts from files, globs, folders and hive-partitioned datasets:
    yields ``(source, [(spec, mechanism, reports, counts_or_None), ...])`` per batch.

    Every row is either yielded or refused with a one-line :class:`LocalPrivError` naming the file
    and rows; specs are parsed as untrusted data (``parse(..., trusted=False)``).

    Parameters
    ----------
    inputs : str, Path or a list of them
        Report or counts files, globs, folders or hive-partitioned Parquet datasets.
    domain : Domain, optional
        Fills ``k`` of specs that leave it out.
    """
    for src in expand_sources(inputs):
        for batch, first in src.batches():
            if batch.num_rows:
                yield src, batch_reports(batch, src, first, domain)
