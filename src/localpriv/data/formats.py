"""Files: the versioned report and counts formats, atomic outputs, and checked, streaming readers.

Everything that crosses a file boundary goes through this module, so that every entry point (the
API, the command line, the service) reads and writes the same way and refuses the same way.
The format is specified in ``docs/format.md``; in short:

* A **report file** has the columns ``mechanism`` (the mechanism's spec string, e.g.
  ``krr(k=100,eps=2.0)``) and ``report``; a **counts file** has ``mechanism``, ``report`` and
  ``count`` (a whole number >= 0). Counts files are mergeable: aggregating counts files sums them.
* **Parquet**: the schema's key-value metadata holds ``localpriv.format = "3"``,
  ``localpriv.kind = "reports" | "counts"``, ``localpriv.mechanisms`` (a JSON list of the specs in
  the file) and, optionally, ``localpriv.attribute`` (the name of the values' column: a label).
  ``report`` is ``int64`` (output indices), ``double`` (continuous outputs), ``fixed_size_binary``
  (bit vectors) or ``string`` (the CSV text form below).
* **CSV** (UTF-8, comma, double quotes): a plain CSV, the header line then the rows, which any
  CSV reader reads as it is (pandas, Python's csv, DuckDB, a spreadsheet). Its format version,
  kind, specs, attribute, row count and byte size are in a sidecar ``FILE.meta.json`` (the same
  keys as the Parquet metadata, plus ``localpriv.bytes``), written atomically with the file: a
  file whose size or row count differs from its sidecar's was cut short or changed and is refused.
  ``report`` is written as text: a decimal integer, a float in shortest round-trip form, or
  lowercase hex for bit vectors. CSV files without a sidecar (written by another tool) are read
  without the truncation check, their specs as written. CSV files of earlier releases, which
  carry the version in a first line ``#localpriv format=N kind=...`` and end with
  ``#localpriv end rows=N``, are read as before.
* **Versions.** 3 (this release): the local-hashing oracles (``blh``, ``olh``, ``lblh``, ``lolh``)
  hash with XXH64 (``docs/hashing.md``) unless their spec says ``hash=cw``. In files of versions 1
  and 2 those specs meant the legacy Carter-Wegman family, so the reader adds ``hash=cw`` to them
  (:func:`legacy_spec`): old files decode to the same estimates. Files without a localpriv marker
  are read with their specs as written (the current meaning).

Outputs are written under a temporary name in the target folder and renamed on success
(:func:`atomic_output`): an interrupted or failed command leaves no output.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, SupportsInt, TypeAlias

import numpy as np
import pandas as pd

from localpriv.data.textcsv import TextBatch, TextCsv, check_quoted_lines, csv_text, hex_text, open_text_stream
from localpriv.mechanisms.base import split_spec_args
from localpriv.utils.optional import available
from localpriv.utils.signals import interrupt_cleanly, raise_if_interrupted  # noqa: F401 - part of this module's interface
from localpriv.utils.validation import LocalPrivError

# pyarrow is the optional group ``parquet``: imported where installed, and every use asks
# :func:`arrow` first, so that a blocked module (the tests' simulation of its absence) takes the
# NumPy/pandas path of :mod:`localpriv.data.textcsv` as an environment without it does.
if TYPE_CHECKING or available("pyarrow"):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    ARROW_ERRORS: tuple[type[BaseException], ...] = (pa.ArrowException,)
else:  # pragma: no cover - the environment without pyarrow (its tests run in a subprocess)
    ARROW_ERRORS = ()
#: what reading a file may raise, with and without pyarrow
READ_ERRORS: tuple[type[BaseException], ...] = (*ARROW_ERRORS, OSError)
#: ... and what decoding its text may raise
TEXT_ERRORS: tuple[type[BaseException], ...] = (*ARROW_ERRORS, OSError, UnicodeError)
_BATCH_ERRORS: tuple[type[BaseException], ...] = (*ARROW_ERRORS, OSError, UnicodeError, ValueError)
_OPEN_ERRORS: tuple[type[BaseException], ...] = (*ARROW_ERRORS, OSError, EOFError)


def arrow() -> bool:
    """Whether pyarrow (the optional group ``parquet``) can be used here: Parquet files, and the
    Arrow readers and writers of CSV; without it CSV goes through :mod:`localpriv.data.textcsv`."""
    return available("pyarrow")


def require_parquet(path: object) -> None:
    """A one-line :class:`LocalPrivError` naming the group ``parquet`` for a Parquet file (read or
    written) where pyarrow is not installed."""
    if not arrow():
        raise LocalPrivError(f"{path}: Parquet files need pyarrow, of the optional group 'parquet', which is not "
                             "installed: pip install 'localpriv[parquet]' (from a clone: pip install -e '.[parquet]'); "
                             "or use .csv")

__all__ = [
    "read_head",
    "write_counts",
    "FORMAT_VERSION", "REPORT_SUFFIXES", "ESTIMATE_SUFFIXES", "IMAGE_SUFFIXES", "atomic_output",
    "check_output", "TableWriter", "Source", "expand_sources", "rows_text", "file_type",
    "interrupt_cleanly", "read_error", "attribute_of", "READ_VERSIONS", "legacy_spec", "LEGACY_HASH_SPECS",
    "spec_for_version", "VALUE_FORMATS", "REPORT_FORMATS", "sniff_format", "check_format", "KNOWN_SUFFIXES",
    "sidecar_path", "is_sidecar", "SIDECAR_SUFFIX", "SIDECAR_KEYS", "FormatPath", "arrow", "require_parquet",
    "ARROW_ERRORS", "READ_ERRORS", "TEXT_ERRORS", "TextBatch",
]

#: The version of the report and counts formats this release writes.
FORMAT_VERSION = 3
#: The versions it reads: 2 adds the optional ``attribute`` (the name of the values' column) to
#: version 1; a version-1 file is a version-2 file without it. 3 moves the local-hashing oracles
#: to XXH64: their specs in version 1 and 2 files are read with ``hash=cw``.
READ_VERSIONS = (1, 2, 3)
#: Versions whose local-hashing specs without ``hash=`` meant the legacy Carter-Wegman family.
LEGACY_HASH_VERSIONS = (1, 2)
#: Spec names whose meaning changed in version 3 (hash family ``xxh64`` by default, ``cw`` before).
LEGACY_HASH_SPECS = frozenset({"blh", "olh", "lblh", "lolh"})
_CSV_HEAD = re.compile(r"^#localpriv format=(\S+) kind=(\w+)((?: [A-Za-z_]+=\S*)*)\s*$")
#: the longest attribute name written (it is a label, not a payload)
MAX_ATTRIBUTE_CHARS = 200
_CSV_END = re.compile(r"^#localpriv end rows=(\d+)\s*$")
#: the sidecar of a CSV report or counts file: ``FILE.meta.json`` beside ``FILE``
SIDECAR_SUFFIX = ".meta.json"
#: the keys a sidecar may hold (others are refused)
SIDECAR_KEYS = frozenset({"localpriv.format", "localpriv.kind", "localpriv.mechanisms", "localpriv.rows",
                          "localpriv.bytes", "localpriv.attribute", "localpriv.file"})
#: the largest sidecar read (it holds the specs of the file's mechanisms, each at most 100,000 characters)
MAX_SIDECAR_BYTES = 1 << 24
REPORT_SUFFIXES = (".parquet", ".csv")
ESTIMATE_SUFFIXES = (".json", ".csv", ".geojson")  # .geojson: estimates on planar grids
IMAGE_SUFFIXES = (".png",)
#: CSV read in blocks of this many bytes (memory per block, not per file).
CSV_BLOCK_BYTES = 1 << 20
#: Parquet read in batches of this many rows.
PARQUET_BATCH_ROWS = 1 << 20

#: a file name (or glob, folder, URI) as the readers and writers take it
StrPath: TypeAlias = "str | os.PathLike[str]"


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------

def read_head(path: str | os.PathLike[str], size: int = 4) -> bytes:
    """The first ``size`` bytes of the file ``path`` (to tell Parquet from text), or a one-line
    :class:`LocalPrivError`: a folder, an unreadable file, an empty file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(size)
    except IsADirectoryError:
        raise LocalPrivError(f"{path} is a folder, not a file") from None
    except OSError as exc:
        raise LocalPrivError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not head:
        raise LocalPrivError(f"{path} is empty (0 bytes)")
    return head


def rows_text(rows: Iterable[SupportsInt], total: int | None = None, limit: int = 5, word: str = "row") -> str:
    """``"rows 3, 17, 42 and 9 more"``: where a problem is, 1-based, the first few."""
    rows = [int(r) for r in rows]
    total = len(rows) if total is None else int(total)
    shown = ", ".join(str(r) for r in rows[:limit])
    more = f" and {total - min(len(rows), limit)} more" if total > min(len(rows), limit) else ""
    return f"{word}{'s' if total > 1 else ''} {shown}{more}"


def is_uri(text: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text) is not None


def _suffix(name: str) -> str:
    low = name.lower()
    return ".csv" if low.endswith(".csv.gz") else Path(low).suffix


def file_type(path: str, fmt: str | None = None) -> str:
    """``"parquet"`` or ``"csv"``, from the file's first bytes, checked against its extension
    (``fmt``, ``--format``: the type named, whatever the extension; a Parquet file is still checked)."""
    if fmt is not None:
        return _named_type(path, fmt)
    suffix = _suffix(path)
    if is_uri(path):
        if suffix in (".parquet", ".pq"):
            return "parquet"
        if suffix == ".csv":
            return "csv"
        raise LocalPrivError(f"{path}: unknown file type {suffix or '(none)'!r}; use .parquet or .csv")
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - 4))
            tail = fh.read(4)
    except IsADirectoryError:
        raise LocalPrivError(f"{path} is a folder, not a file") from None
    except OSError as exc:
        raise LocalPrivError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size == 0:
        raise LocalPrivError(f"{path} is empty (0 bytes)")
    if head == b"PAR1":
        if tail != b"PAR1" or size < 12:
            raise LocalPrivError(f"{path} is a truncated Parquet file (no footer): it was cut short")
        return "parquet"
    if suffix in (".parquet", ".pq"):
        raise LocalPrivError(f"{path} is not a Parquet file (it does not start with PAR1); "
                             "if it is CSV, name it .csv")
    if suffix == ".csv":
        return "csv"
    if path.lower().endswith((".tsv", ".tsv.gz", ".tab")):
        raise LocalPrivError(f"{path}: report and counts files are CSV or Parquet, not TSV; use .csv or .parquet")
    found, _why = sniff_format(path, REPORT_FORMATS)  # another name: its content says (or it is refused)
    return found


#: ``--format`` of the commands that read values (``json``: JSON Lines, one object per line).
VALUE_FORMATS = ("csv", "tsv", "parquet", "json")
#: ``--format`` of the commands that read report or counts files.
REPORT_FORMATS = ("csv", "parquet")
#: Suffixes whose format is known without looking inside (no sniffing, nothing printed).
KNOWN_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".tab", ".parquet", ".pq")
#: bytes of the first line looked at when sniffing CSV against TSV
SNIFF_BYTES = 1 << 16


def check_format(fmt: str | None, allowed: Sequence[str] = VALUE_FORMATS) -> str | None:
    """``--format`` checked against ``allowed`` (lower-cased); ``None`` stays ``None``."""
    if fmt is None:
        return None
    low = str(fmt).strip().lower()
    if low not in allowed:
        raise LocalPrivError(f"unknown format {str(fmt)[:30]!r}; use {' or '.join(allowed)}")
    return low


def sniff_format(path: str, allowed: Sequence[str] = VALUE_FORMATS) -> tuple[str, str]:
    """``(format, why)`` of a file whose name does not say: Parquet by its magic bytes, JSON Lines
    by a first line starting with ``{``, CSV against TSV by the first line's delimiters (commas and
    no tabs, or tabs and no commas). Anything else is ambiguous and refused: name it with --format."""
    head = read_head(path, SNIFF_BYTES)
    choices = " or ".join(allowed)
    if head.startswith(b"PAR1"):
        found, why = "parquet", "it starts with the Parquet magic bytes PAR1"
    else:
        first = head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0].rstrip(b"\r")
        commas, tabs = first.count(b","), first.count(b"\t")
        if first.lstrip().startswith(b"{"):
            found, why = "json", "its first line is a JSON object"
        elif first.startswith(b"#localpriv format="):
            found, why = "csv", "its first line is a localpriv CSV format line"
        elif commas and not tabs:
            found, why = "csv", f"its first line holds {commas} comma(s) and no tab"
        elif tabs and not commas:
            found, why = "tsv", f"its first line holds {tabs} tab(s) and no comma"
        else:
            raise LocalPrivError(f"{path}: cannot tell its format (first line: {commas} comma(s), {tabs} tab(s)); "
                                 f"give --format {choices}")
    if found not in allowed:
        raise LocalPrivError(f"{path} looks like {found.upper()} ({why}); this command reads {choices}")
    return found, why


def _named_type(path: str, fmt: str) -> str:
    """The type ``fmt`` (``--format``) names, any extension; Parquet checked by its magic bytes."""
    if fmt not in REPORT_FORMATS:
        raise LocalPrivError(f"{path}: report and counts files are {' or '.join(REPORT_FORMATS)}, not {fmt}")
    if is_uri(path):
        return fmt
    head = read_head(path)
    if (head == b"PAR1") != (fmt == "parquet"):
        raise LocalPrivError(f"{path} is {'a' if head == b'PAR1' else 'not a'} Parquet file, but --format {fmt} "
                             "was given")
    return fmt


def _first_bad_utf8(path: str) -> tuple[int, int, bytes] | None:
    """``(line, byte offset, bytes)`` of the first bytes of ``path`` that are not UTF-8 (error path)."""
    import gzip
    line, offset, carry = 1, 0, b""
    with (gzip.open(path, "rb") if path.lower().endswith(".gz") else open(path, "rb")) as fh:
        while True:
            chunk = fh.read(1 << 20)
            data = carry + chunk
            if not data:
                return None
            try:
                data.decode("utf-8")
                carry = b""
            except UnicodeDecodeError as exc:
                if chunk and exc.reason == "unexpected end of data" and exc.start >= len(data) - 3:
                    carry = data[exc.start:]
                    data = data[:exc.start]
                else:
                    at = exc.start
                    start = data.rfind(b"\n", 0, at) + 1
                    return line + data.count(b"\n", 0, at), offset + at, data[max(start, at - 30):at + 8]
            line += data.count(b"\n")
            offset += len(data)
            if not chunk:
                return None


def read_error(path: str, exc: BaseException) -> LocalPrivError:
    """A one-line error for a file that could not be read; text that is not UTF-8 is located."""
    text = one_line(exc)
    if "utf8" in text.lower().replace("-", "") and _suffix(path) == ".csv":
        try:
            bad = _first_bad_utf8(path)
        except OSError:  # pragma: no cover - the original message will do
            bad = None
        if bad is not None:
            line, offset, snippet = bad
            return LocalPrivError(
                f"{path} is not UTF-8 text: line {line} (byte {offset}) holds {snippet!r}; CSV files "
                "must be UTF-8 (or UTF-16 with a byte-order mark): convert it, e.g. "
                "iconv -f latin1 -t utf-8 (Latin-1 and other encodings are refused, not guessed)")
    return LocalPrivError(f"cannot read {path}: {text}")


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return re.sub(r"\s+", " ", first)[:300]


# --------------------------------------------------------------------------------------------
# Format version 3: the hash family of the local-hashing oracles
# --------------------------------------------------------------------------------------------
_SPEC_HEAD = re.compile(r"^\s*([A-Za-z][\w\-]*)\s*(?:\((.*)\))?\s*$", re.S)


def legacy_spec(spec: str) -> str:
    """A spec as a version 1 or 2 file meant it: ``olh(k=10,eps=2.0)`` -> ``olh(k=10,eps=2.0,hash=cw)``.

    Only the local-hashing oracles (:data:`LEGACY_HASH_SPECS`) change, and only when they name no
    ``hash``; anything else (other mechanisms, specs that do not parse) is returned unchanged, for
    the spec parser to accept or refuse as usual.
    """
    if not isinstance(spec, str):
        return spec
    m = _SPEC_HEAD.match(spec)
    if not m or m.group(1) not in LEGACY_HASH_SPECS:
        return spec
    body = m.group(2) or ""
    keys = {part.partition("=")[0].strip() for part in split_spec_args(body)}
    if "hash" in keys:
        return spec
    return f"{m.group(1)}({body + ',' if body.strip() else ''}hash=cw)"


def spec_for_version(spec: str, version: int | None) -> str:
    """The spec as this release must read it from a file of format ``version`` (``None``: a file
    without a localpriv marker, read as written)."""
    return legacy_spec(spec) if version in LEGACY_HASH_VERSIONS else spec


def _legacy_column(col: pa.Array) -> pa.Array:
    """A mechanism column of a version 1/2 file with :func:`legacy_spec` applied (per distinct spec)."""
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return col  # not spec strings: the checked reader refuses it with its own message
    enc = pc.dictionary_encode(col)
    specs = enc.dictionary.to_pylist()
    mapped = [legacy_spec(v) for v in specs]
    if mapped == specs:
        return col
    return pc.take(pa.array(mapped, type=col.type), enc.indices)


# --------------------------------------------------------------------------------------------
# Atomic outputs
# --------------------------------------------------------------------------------------------
def _same_file(a: str, b: str) -> bool:
    if is_uri(a) or is_uri(b):
        return a == b
    pa_, pb = Path(a), Path(b)
    try:
        if pa_.exists() and pb.exists():
            return os.path.samefile(pa_, pb)
    except OSError:
        pass
    return pa_.resolve() == pb.resolve()


def check_output(path: StrPath, suffixes: Sequence[str], inputs: Iterable[StrPath] = (),
                 what: str = "output") -> Path:
    """Validate an output path before any work: a known extension, not one of the inputs."""
    p = Path(path)
    suffix = _suffix(p.name)
    if suffix not in suffixes or p.name.lower().endswith(".gz"):
        raise LocalPrivError(f"{what} {p}: unknown extension {suffix or '(none)'!r}; use "
                             + " or ".join(suffixes))
    if p.exists() and p.is_dir():
        raise LocalPrivError(f"{what} {p} is a folder; give a file name")
    for src in inputs:
        if _same_file(str(p), str(src)):
            raise LocalPrivError(f"{what} {p} is also an input; write to another file")
        if _read_as_input(p, str(src)):
            raise LocalPrivError(f"{what} {p} would be read as an input ({src}); write it elsewhere")
    return p


def _read_as_input(out: Path, src: str) -> bool:
    """Would ``out`` be one of the files the input ``src`` (a glob or a folder) stands for?"""
    import fnmatch
    if is_uri(src) or is_uri(str(out)) or _suffix(out.name) not in (".parquet", ".pq", ".csv"):
        return False
    target = Path(os.path.abspath(out))
    if any(ch in src for ch in "*?["):
        pattern = Path(os.path.abspath(src))
        if "**" in src:
            return fnmatch.fnmatchcase(str(target), str(pattern))
        return len(pattern.parts) == len(target.parts) and all(
            fnmatch.fnmatchcase(t, q) for t, q in zip(target.parts, pattern.parts))
    folder = Path(src)
    if not folder.is_dir():
        return False
    try:
        rel = target.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return not any(part.startswith((".", "_")) for part in rel.parts)


@contextmanager
def atomic_output(path: StrPath, suffixes: Sequence[str] | None = None, inputs: Iterable[StrPath] = (),
                  what: str = "output") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` when the block succeeds.

    The folder is created if missing. On any exception (or an interrupt, see
    :func:`interrupt_cleanly`) the temporary file is removed and ``path`` is left as it was.
    """
    p = check_output(path, suffixes, inputs, what) if suffixes else Path(path)
    created = [d for d in (p.parent, *p.parent.parents) if not d.exists()]  # deepest first
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = os.path.join(p.parent, f".{p.name}.{secrets.token_hex(4)}.tmp{p.suffix}")
    try:  # from the file's creation on, any exit (a signal included) removes it
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as usual
        os.close(fd)
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        raise_if_interrupted()  # a signal whose exception was swallowed still stops the commit
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):  # failed or interrupted: no output, nor the folders made for it
            os.unlink(tmp)
            for d in created:
                try:
                    d.rmdir()
                except OSError:
                    break


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------
def _csv_report_column(arr: pa.Array) -> pa.Array:
    """The CSV text form of a report column: bit vectors as lowercase hex."""
    if pa.types.is_fixed_size_binary(arr.type):
        n, w = len(arr), arr.type.byte_width
        raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=(arr.offset + n) * w)[arr.offset * w:]
        return hex_strings(raw.reshape(n, w))
    if pa.types.is_binary(arr.type):
        vals = arr.to_numpy(zero_copy_only=False)
        widths = {len(v) for v in vals}
        if len(widths) == 1:
            return hex_strings(np.frombuffer(b"".join(vals), dtype=np.uint8).reshape(len(vals), -1))
        return pa.array([bytes(v).hex() for v in vals], type=pa.string())  # ragged: rare, refused on read
    return arr


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def hex_strings(rows: np.ndarray) -> pa.Array:
    """``n x w`` bytes -> ``n`` lowercase hex strings of ``2w`` characters, vectorized."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    n, w = rows.shape
    out = np.empty((n, 2 * w), dtype=np.uint8)
    out[:, 0::2] = _HEX[rows >> 4]
    out[:, 1::2] = _HEX[rows & 15]
    offsets = np.arange(0, (n + 1) * 2 * w, 2 * w, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out.tobytes()))


def hex_bytes(text: pa.Array, width_chars: int) -> np.ndarray:
    """Lowercase or uppercase hex strings of ``width_chars`` characters (checked by the caller)
    -> ``n x width_chars/2`` bytes, vectorized."""
    n = len(text)
    text = pa.array(text.to_pylist(), pa.string()) if text.offset or text.null_count else text
    chars = np.frombuffer(text.buffers()[2], dtype=np.uint8)
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32)[: n + 1]
    start = int(offsets[0])
    chars = chars[start:start + n * width_chars].reshape(n, width_chars)
    val = np.where(chars <= ord("9"), chars - ord("0"), (chars | 0x20) - ord("a") + 10).astype(np.uint8)
    return (val[:, 0::2] << 4) | val[:, 1::2]


class TableWriter:
    """Stream Arrow tables (``mechanism``, ``report`` [, ``count``]) to a report or counts file,
    atomically, with the format version and the mechanisms' specs.

    Use as a context manager; the file appears under its name only when the block succeeds.
    """

    def __init__(self, path: StrPath, kind: str, inputs: Iterable[StrPath] = (),
                 attribute: str | None = None) -> None:
        if kind not in ("reports", "counts"):
            raise ValueError(kind)
        self.kind = kind
        self.attribute = _attribute(attribute)
        self.path = check_output(path, REPORT_SUFFIXES, inputs, what=f"{kind} file")
        if _suffix(self.path.name) != ".csv":
            require_parquet(self.path)
        self.rows = 0
        self.specs: list[str] = []
        self._ctx: ExitStack | None = None
        self._tmp: Path | None = None
        self._meta_tmp: Path | None = None
        self._pq: pq.ParquetWriter | None = None
        self._fh: IO[bytes] | None = None
        self._schema: pa.Schema | None = None
        self._header_done = False

    def __enter__(self) -> TableWriter:
        self._ctx = ExitStack()
        try:  # the file, then (CSV) its sidecar: both appear, or neither
            self._tmp = self._ctx.enter_context(atomic_output(self.path))
            if _suffix(self.path.name) == ".csv":
                self._meta_tmp = self._ctx.enter_context(atomic_output(sidecar_path(self.path)))
                self._fh = open(self._tmp, "wb")
        except BaseException:
            self._ctx.close()
            raise
        return self

    def write(self, table: pa.Table | pd.DataFrame) -> None:
        """Append a table of reports or counts: an Arrow table, or a pandas frame (bit vectors as
        ``bytes``), which is what :func:`localpriv.data.reports.perturb` returns without pyarrow."""
        need = ["mechanism", "report"] + (["count"] if self.kind == "counts" else [])
        names = list(table.columns) if isinstance(table, pd.DataFrame) else table.column_names
        missing = [c for c in need if c not in names]
        if missing:
            raise LocalPrivError(f"cannot write {self.kind}: the table has no column(s) {', '.join(missing)}")
        if isinstance(table, pd.DataFrame):
            if self._fh is not None:
                self._write_frame(table)
                return
            table = pa.Table.from_pandas(table[need], preserve_index=False)
        mech = table.column("mechanism")
        if mech.null_count:
            raise LocalPrivError("cannot write reports without a mechanism")
        mech = mech.cast(pa.string())
        for spec in pc.unique(mech).to_pylist():
            if spec not in self.specs:
                self.specs.append(spec)
        cols = {"mechanism": mech, "report": table.column("report")}
        if self.kind == "counts":
            cols["count"] = table.column("count").cast(pa.int64())
        t = pa.table(cols)
        if self._fh is not None:
            rep = t.column("report").combine_chunks() if t.num_rows else pa.array([], pa.string())
            t = t.set_column(1, "report", _csv_report_column(rep))
            opts = pacsv.WriteOptions(include_header=not self._header_done, quoting_style="needed")
            pacsv.write_csv(t, self._fh, write_options=opts)
            self._header_done = True
        else:
            if self._pq is None:
                self._schema = t.schema
                self._pq = pq.ParquetWriter(self._tmp, t.schema)
            elif t.schema != self._schema:
                assert self._schema is not None  # set with the Parquet writer
                raise LocalPrivError(f"{self.path}: reports of type {t.schema.field('report').type} cannot join "
                                     f"reports of type {self._schema.field('report').type} in one Parquet file")
            self._pq.write_table(t)
        self.rows += t.num_rows

    def _write_frame(self, df: pd.DataFrame) -> None:
        """The CSV text of a frame, the same bytes as the Arrow writer's (:mod:`localpriv.data.textcsv`)."""
        assert self._fh is not None  # CSV
        mech = df["mechanism"]
        if mech.isna().any():
            raise LocalPrivError("cannot write reports without a mechanism")
        mech_text = mech.astype(str).to_numpy(dtype=object)
        for spec in pd.unique(mech_text).tolist():
            if spec not in self.specs:
                self.specs.append(spec)
        rep = df["report"].to_numpy()
        if rep.dtype == object and len(rep) and all(isinstance(v, (bytes, bytearray)) for v in rep[:1]):
            widths = set(map(len, rep.tolist()))
            rep = (hex_text(np.frombuffer(b"".join(rep.tolist()), dtype=np.uint8).reshape(len(rep), -1))
                   if len(widths) == 1 else np.asarray([bytes(v).hex() for v in rep], dtype=object))
        cols = [("mechanism", mech_text), ("report", rep)]
        if self.kind == "counts":
            cols.append(("count", df["count"].to_numpy(np.int64)))
        self._fh.write(csv_text(cols, header=not self._header_done))
        self._header_done = True
        self.rows += len(df)

    def _metadata(self) -> dict[str, str]:
        meta = {"localpriv.format": str(FORMAT_VERSION), "localpriv.kind": self.kind,
                "localpriv.mechanisms": json.dumps(self.specs), "localpriv.rows": str(self.rows)}
        if self.attribute:
            meta["localpriv.attribute"] = self.attribute
        return meta

    def _sidecar(self, size: int) -> bytes:
        """The CSV file's sidecar: the Parquet metadata's keys as JSON, plus its name and size."""
        meta: dict[str, object] = {"localpriv.format": str(FORMAT_VERSION), "localpriv.kind": self.kind,
                                   "localpriv.file": self.path.name, "localpriv.rows": self.rows,
                                   "localpriv.bytes": size, "localpriv.mechanisms": self.specs}
        if self.attribute:
            meta["localpriv.attribute"] = self.attribute
        return (json.dumps(meta, indent=1) + "\n").encode()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        assert self._ctx is not None  # set by __enter__
        try:
            if exc_type is None:
                if self._fh is not None:
                    if not self._header_done:
                        cols = "mechanism,report" + (",count" if self.kind == "counts" else "")
                        self._fh.write((cols + "\n").encode())
                    self._fh.close()
                    assert self._tmp is not None and self._meta_tmp is not None  # set by __enter__
                    self._meta_tmp.write_bytes(self._sidecar(os.path.getsize(self._tmp)))
                else:
                    if self._pq is None:  # no rows: an empty file with the right columns
                        fields = [pa.field("mechanism", pa.string()), pa.field("report", pa.int64())]
                        if self.kind == "counts":
                            fields.append(pa.field("count", pa.int64()))
                        self._pq = pq.ParquetWriter(self._tmp, pa.schema(fields))
                    self._pq.add_key_value_metadata(self._metadata())
        except BaseException:
            self._close_files()
            if not self._ctx.__exit__(*sys.exc_info()):
                raise
            return None
        self._close_files()
        return self._ctx.__exit__(exc_type, exc, tb)

    def _close_files(self) -> None:
        if self._fh is not None:
            self._fh.close()
        if self._pq is not None:
            self._pq.close()


# --------------------------------------------------------------------------------------------
# Reading: sources of reports and counts
# --------------------------------------------------------------------------------------------
@dataclass
class Source:
    """One file of reports or counts (a part of a dataset keeps its hive partition values)."""

    path: str
    ftype: str                       # "parquet" | "csv"
    kind: str                        # "reports" | "counts"
    version: int | None              # None: written by another tool (no localpriv marker)
    constants: dict[str, str] = field(default_factory=dict)  # hive partition values, e.g. {"mechanism": ...}
    csv_header_lines: int = 0
    declared_rows: int | None = None
    attribute: str | None = None     # the values' column name (format version 2), a label
    declared_specs: list[str] | None = None  # Parquet ``localpriv.mechanisms`` (informative), if any

    @property
    def legacy_hash(self) -> bool:
        """Does this file's version read local-hashing specs as ``hash=cw`` (versions 1 and 2)?"""
        return self.version in LEGACY_HASH_VERSIONS

    @property
    def needs_spec_rewrite(self) -> bool:
        """Could :meth:`read_spec` change a spec of this file? (Readers that scan files with
        another engine route such files through :meth:`batches`, which rewrites them.) True for
        version 1/2 files unless their declared specs or partition value show no local hashing."""
        if not self.legacy_hash:
            return False
        if "mechanism" in self.constants:
            return legacy_spec(str(self.constants["mechanism"])) != str(self.constants["mechanism"])
        if self.declared_specs is None:
            return True
        return any(legacy_spec(s) != s for s in self.declared_specs)

    def read_spec(self, spec: str) -> str:
        """A spec read from this file as this release must understand it (:func:`spec_for_version`)."""
        return spec_for_version(spec, self.version)

    def batches(self) -> Iterator[tuple[pa.RecordBatch | TextBatch, int]]:
        """``(batch, first_row)`` with columns mechanism, report [, count]; ``first_row`` is the
        1-based data row (CSV: line) of the batch's first row. The specs of version 1 and 2 files
        come with :func:`legacy_spec` applied. Without pyarrow, CSV batches are
        :class:`~localpriv.data.textcsv.TextBatch` (text columns) and Parquet is refused in one line."""
        if self.ftype == "parquet":
            require_parquet(self.path)
        reader = (self._parquet_batches if self.ftype == "parquet" else
                  self._csv_batches if arrow() else self._csv_text_batches)
        try:
            for batch, first in reader():
                if self.legacy_hash and batch.num_rows:
                    if isinstance(batch, TextBatch):
                        col = batch.columns["mechanism"]
                        specs, inv = np.unique(col, return_inverse=True)
                        batch.columns["mechanism"] = np.asarray([legacy_spec(str(v)) for v in specs],
                                                                dtype=object)[inv]
                    else:
                        i = batch.schema.get_field_index("mechanism")
                        batch = batch.set_column(i, "mechanism", _legacy_column(batch.column(i)))
                yield batch, first
        except LocalPrivError:
            raise
        except _BATCH_ERRORS as exc:
            raise read_error(self.path, exc) from None

    # ---- Parquet ------------------------------------------------------------------------------
    def _parquet_batches(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        pf = pq.ParquetFile(self.path)
        want = ["mechanism", "report"] + (["count"] if self.kind == "counts" else [])
        names = pf.schema_arrow.names
        present = [c for c in want if c in names]
        row = 1
        for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=present):
            batch = _with_constants(batch, self.constants, want)
            yield batch, row
            row += batch.num_rows

    # ---- CSV ----------------------------------------------------------------------------------
    def _csv_batches(self) -> Iterator[tuple[pa.RecordBatch, int]]:
        want = ["mechanism", "report"] + (["count"] if self.kind == "counts" else [])
        invalid: list[tuple[int | None, str]] = []

        def on_invalid(row: pacsv.InvalidRow) -> str:
            invalid.append((row.number, row.text))
            return "skip"

        check_quoted_lines(open_text(self.path), self.path, CSV_BLOCK_BYTES)
        stream = open_text(self.path)
        reader = pacsv.open_csv(
            stream,
            read_options=pacsv.ReadOptions(skip_rows=self.csv_header_lines, block_size=CSV_BLOCK_BYTES,
                                           use_threads=False),
            parse_options=pacsv.ParseOptions(ignore_empty_lines=False, invalid_row_handler=on_invalid,
                                             newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in want}, strings_can_be_null=True, null_values=[""],
                include_columns=[c for c in want if c not in self.constants],
                include_missing_columns=False))
        header = reader.schema.names
        missing = [c for c in want if c not in header and c not in self.constants]
        if missing:
            raise LocalPrivError(f"{self.path} has no column(s) {', '.join(missing)}; "
                                 f"columns: {', '.join(header) or '(none)'}")
        line = self.csv_header_lines + 2  # the header line, then data from here
        total = 0
        for batch in reader:
            _check_invalid(invalid, self)
            yield _with_constants(batch, self.constants, want), line
            line += batch.num_rows
            total += batch.num_rows
        _check_invalid(invalid, self)
        self._check_end(total, invalid)

    def _csv_text_batches(self) -> Iterator[tuple[TextBatch, int]]:
        """:meth:`_csv_batches` without pyarrow: the same columns, checks and messages."""
        want = ["mechanism", "report"] + (["count"] if self.kind == "counts" else [])
        check_quoted_lines(open_text(self.path), self.path, CSV_BLOCK_BYTES)
        reader = TextCsv(open_text(self.path), self.path, skip_lines=self.csv_header_lines,
                         block_bytes=CSV_BLOCK_BYTES)
        header = reader.names
        missing = [c for c in want if c not in header and c not in self.constants]
        if missing:
            reader.close()
            raise LocalPrivError(f"{self.path} has no column(s) {', '.join(missing)}; "
                                 f"columns: {', '.join(header) or '(none)'}")
        read = [c for c in want if c in header]
        line = self.csv_header_lines + 2
        total = 0
        invalid: list[tuple[int | None, str]] = []
        for rows, bad, _first in reader.blocks():
            invalid.extend(bad)
            _check_invalid(invalid, self)
            batch = _text_columns(rows, header, read, self.constants, want)
            if batch.num_rows:
                yield batch, line
            line += batch.num_rows
            total += batch.num_rows
        _check_invalid(invalid, self)
        self._check_end(total, invalid)

    def _check_end(self, total: int, invalid: list[tuple[int | None, str]]) -> None:
        """The rows read against the sidecar's count, or an earlier release's end line."""
        if self.declared_rows is not None and self.csv_header_lines == 0:  # a sidecar's count
            if total != self.declared_rows:
                raise LocalPrivError(f"{self.path} holds {total} rows but {sidecar_path(self.path).name} says "
                                     f"{self.declared_rows}: it was changed after it was written")
        elif self.csv_header_lines:  # an earlier release's CSV: its end line
            ends = [(n, text) for n, text in invalid if _CSV_END.match(text.strip())]
            if not ends:
                raise LocalPrivError(f"{self.path} is incomplete: its last line '#localpriv end rows=N' is "
                                     f"missing (cut short after {total} rows)")
            last_line = self.csv_header_lines + 1 + total + 1  # format line(s), header, rows, end line
            if len(ends) > 1 or (ends[0][0] is not None and ends[0][0] != last_line):
                raise LocalPrivError(f"{self.path}: the end line '#localpriv end ...' is not the last line "
                                     f"(line {ends[0][0]})")
            end = _CSV_END.match(ends[0][1].strip())
            assert end is not None  # ends holds only lines that match
            declared = int(end.group(1))
            if declared != total:
                raise LocalPrivError(f"{self.path} says it holds {declared} rows but {total} were read")


def _text_columns(rows: list[list[str]], header: list[str], read: list[str], constants: Mapping[str, str],
                  want: list[str]) -> TextBatch:
    """The ``want`` columns of parsed CSV rows (partition values fill the ones not in the file)."""
    from operator import itemgetter
    n = len(rows)
    cols: dict[str, np.ndarray] = {}
    for c in want:
        if c in read:
            cols[c] = (np.fromiter(map(itemgetter(header.index(c)), rows), dtype=object, count=n) if n
                       else np.zeros(0, dtype=object))
        else:
            cols[c] = np.full(n, constants[c], dtype=object)
    return TextBatch(cols, n)


def _check_invalid(invalid: list[tuple[int | None, str]], src: Source) -> None:
    """Malformed CSV rows are errors; only the end line of a localpriv file is allowed."""
    bad = [(n, t) for n, t in invalid if not (src.csv_header_lines and _CSV_END.match(t.strip()))]
    if bad:
        n, t = bad[0]
        where = f"line {n}" if n is not None else "a line"
        cause = "is blank" if not t.strip() else f"has the wrong number of fields: {t[:60]!r}"
        raise LocalPrivError(f"{src.path}: {where} {cause} ({len(bad)} malformed line(s) so far)")


def _with_constants(batch: pa.RecordBatch, constants: Mapping[str, str], want: list[str]) -> pa.RecordBatch:
    cols, names = [], []
    for c in want:
        if c in batch.schema.names:
            cols.append(batch.column(c))
        elif c in constants:
            cols.append(pa.array([constants[c]] * batch.num_rows, type=pa.string()))
        else:
            raise LocalPrivError(f"missing column {c}")
        names.append(c)
    return pa.RecordBatch.from_arrays(cols, names=names)


def open_text(path: str) -> IO[bytes]:
    """A UTF-8 byte stream of a CSV file: gzip and byte-order marks handled, other encodings refused
    (Arrow's stream where pyarrow is installed, Python's otherwise)."""
    compression = "gzip" if path.lower().endswith(".gz") else None
    try:
        if arrow():
            with pa.input_stream(path, compression=compression) as probe:
                head = probe.read(4096)
        else:
            import gzip
            with (gzip.open(path, "rb") if compression else open(path, "rb")) as fh:
                head = fh.read(4096)
    except _OPEN_ERRORS as exc:
        raise LocalPrivError(f"cannot read {path}: {one_line(exc)}") from None
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        raise LocalPrivError(f"{path} is UTF-32 text; CSV files must be UTF-8 (or UTF-16 with a "
                             "byte-order mark): save it as UTF-8")
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise LocalPrivError(f"{path} holds NUL bytes: UTF-16 or UTF-32 text without a byte-order mark, or "
                             "not text at all; CSV files must be UTF-8 (or UTF-16 with a byte-order mark)")
    if not arrow():
        return open_text_stream(path, head)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return pa.transcoding_input_stream(pa.input_stream(path, compression=compression), "utf-16", "utf-8")
    if head.startswith(b"\xef\xbb\xbf"):
        return pa.transcoding_input_stream(pa.input_stream(path, compression=compression), "utf-8-sig",
                                           "utf-8")
    return pa.input_stream(path, compression=compression)


def _csv_marker(path: str) -> tuple[int | None, str | None, int, str | None]:
    """``(version, kind, lines, attribute)`` from a CSV file's first line, ``(None, None, 0, None)``
    without one."""
    stream = open_text(path)
    try:
        first = stream.read(4096)
    finally:
        stream.close()
    line = first.split(b"\n", 1)[0].rstrip(b"\r")
    if not line.startswith(b"#"):
        return None, None, 0, None
    text = line.decode("utf-8", "replace")
    m = _CSV_HEAD.match(text)
    if not m:
        raise LocalPrivError(f"{path}: first line {text[:60]!r} is not a localpriv format line "
                             f"('#localpriv format={FORMAT_VERSION} kind=reports')")
    version = _check_version(path, m.group(1))
    fields = dict(item.split("=", 1) for item in m.group(3).split())
    attribute = _attribute(fields.get("attribute"), quoted=True) if version >= 2 else None
    return version, m.group(2), 1, attribute


def is_sidecar(path: StrPath) -> bool:
    """Is ``path`` the sidecar of a CSV file that exists (``r.csv.meta.json`` beside ``r.csv``)?"""
    text = os.fspath(path)
    return text.endswith(SIDECAR_SUFFIX) and not is_uri(text) and os.path.isfile(text[:-len(SIDECAR_SUFFIX)])


def sidecar_path(path: StrPath) -> Path:
    """The sidecar of a CSV report or counts file: ``FILE.meta.json`` beside ``FILE``."""
    return Path(str(path) + SIDECAR_SUFFIX)


@dataclass(frozen=True)
class Sidecar:
    """What a CSV file's sidecar declares (:func:`read_sidecar`)."""

    version: int
    kind: str | None
    rows: int
    size: int
    attribute: str | None
    specs: list[str] | None


def read_sidecar(path: str) -> Sidecar | None:
    """The sidecar ``path.meta.json`` of a CSV file, checked against the file: ``None`` without one
    (a CSV of another tool). Refused in one line: a sidecar that is not a JSON object of the known
    keys (:data:`SIDECAR_KEYS`), a version this release does not read, or a file whose size in
    bytes differs from the sidecar's ``localpriv.bytes`` (cut short, or changed after it was
    written: delete the sidecar to read such a file as a plain CSV)."""
    if is_uri(path) or path.lower().endswith(".gz"):
        return None
    side = sidecar_path(path)
    try:
        size = side.stat().st_size
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LocalPrivError(f"cannot read {side}: {exc.strerror or exc}") from None
    if size > MAX_SIDECAR_BYTES:
        raise LocalPrivError(f"{side} holds {size:,} bytes; limit {MAX_SIDECAR_BYTES:,} for a sidecar")
    try:
        meta = json.loads(side.read_bytes().decode("utf-8"))
    except (ValueError, UnicodeError, OSError) as exc:
        raise LocalPrivError(f"{side} is not a localpriv sidecar (not JSON: {one_line(exc)})") from None
    if not isinstance(meta, dict):
        raise LocalPrivError(f"{side} is not a localpriv sidecar (not a JSON object)")
    unknown = sorted(set(meta) - SIDECAR_KEYS)
    if unknown:
        raise LocalPrivError(f"{side}: unknown key(s) {', '.join(repr(k)[:60] for k in unknown[:3])}; known: "
                             f"{', '.join(sorted(SIDECAR_KEYS))}")
    version = _check_version(path, str(meta.get("localpriv.format")))
    kind = meta.get("localpriv.kind")
    rows, nbytes = meta.get("localpriv.rows"), meta.get("localpriv.bytes")
    for key, value in (("localpriv.rows", rows), ("localpriv.bytes", nbytes)):
        if type(value) is not int or value < 0:
            raise LocalPrivError(f"{side}: {key} must be a whole number >= 0, got {str(value)[:30]!r}")
    if kind is not None and not isinstance(kind, str):
        raise LocalPrivError(f"{side}: localpriv.kind must be reports or counts, got {str(kind)[:30]!r}")
    actual = os.path.getsize(path)
    if actual != nbytes:
        raise LocalPrivError(f"{path} holds {actual:,} bytes but its sidecar {side.name} says {nbytes:,}: it was "
                             f"cut short or changed after it was written (to read an edited file as a plain "
                             f"CSV, delete {side.name})")
    specs = meta.get("localpriv.mechanisms")
    specs = specs if isinstance(specs, list) and all(isinstance(v, str) for v in specs) else None
    attribute = meta.get("localpriv.attribute")
    return Sidecar(version, kind, int(rows), int(nbytes),  # type: ignore[arg-type]
                   _attribute(attribute) if isinstance(attribute, str) else None, specs)


def _check_version(path: str, text: str) -> int:
    if text not in {str(v) for v in READ_VERSIONS}:
        raise LocalPrivError(f"{path} has localpriv format version {text}; this localpriv reads "
                             f"version{'s' if len(READ_VERSIONS) > 1 else ''} "
                             f"{', '.join(map(str, READ_VERSIONS))}")
    return int(text)


def _attribute(value: str | bytes | None, quoted: bool = False) -> str | None:
    """The attribute name as stored (percent-encoded in CSV), cut to a label's length; a label
    only: it names an axis, nothing is done with it."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if quoted:
        from urllib.parse import unquote
        value = unquote(value, errors="replace")
    value = "".join(ch for ch in value if ch.isprintable())[:MAX_ATTRIBUTE_CHARS]
    return value or None


def attribute_of(inputs: StrPath | Iterable[StrPath]) -> str | None:
    """The values' column name recorded in report or counts files (format version 2), when all
    inputs that record one agree; ``None`` otherwise (or for inputs that are not files)."""
    try:
        sources = expand_sources(inputs)
    except LocalPrivError:
        return None
    names = {s.attribute for s in sources if s.attribute}
    return names.pop() if len(names) == 1 else None


def _parquet_info(path: str) -> tuple[int | None, str | None, list[str], str | None, list[str] | None]:
    require_parquet(path)
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
        meta = dict(schema.metadata or {})
        meta.update(pf.metadata.metadata or {})  # the file's key-value metadata (written at close)
    except READ_ERRORS as exc:
        raise LocalPrivError(f"cannot read {path}: {one_line(exc)}") from None
    version = meta.get(b"localpriv.format")
    kind = meta.get(b"localpriv.kind")
    if version is not None:
        version = _check_version(path, version.decode("utf-8", "replace"))
    attribute = _attribute(meta.get(b"localpriv.attribute")) if version and version >= 2 else None
    declared = None
    try:
        listed = json.loads(meta[b"localpriv.mechanisms"]) if b"localpriv.mechanisms" in meta else None
        if isinstance(listed, list) and all(isinstance(v, str) for v in listed):
            declared = listed
    except (ValueError, UnicodeError):
        declared = None
    return version, None if kind is None else kind.decode(), schema.names, attribute, declared


def csv_columns(path: str, skip: int) -> list[str]:
    stream = open_text(path)
    try:
        head = stream.read(1 << 16)
    finally:
        stream.close()
    lines = head.split(b"\n")
    if len(lines) <= skip:
        return []
    header = lines[skip].rstrip(b"\r").decode("utf-8", "replace")
    return [c.strip().strip('"') for c in header.split(",")]


class FormatPath(str):
    """A file name that carries the format to read it as (``--format``: ``"csv"`` or ``"parquet"``);
    a ``str`` everywhere else, so every engine passes it on to :func:`expand_sources` unchanged."""

    fmt: str | None

    def __new__(cls, path: StrPath, fmt: str | None) -> FormatPath:
        obj = super().__new__(cls, os.fspath(path))
        obj.fmt = check_format(fmt, REPORT_FORMATS)
        return obj

    def __reduce__(self) -> tuple[type[FormatPath], tuple[str, str | None]]:
        return FormatPath, (str.__str__(self), self.fmt)


#: the columns a report or counts file may hold: any other would be read past, so it is refused
KNOWN_COLUMNS = ("mechanism", "report", "count")


def check_columns(where: str, names: Sequence[str], kind: str) -> None:
    """Refuse columns a ``kind`` file would not read (one line naming them): a column that is not
    read is ignored, and an ignored column contradicts what the file says (a ``Count`` or ``n``
    column meant as counts, a ``weight``). Names are compared exactly; a column equal to a known
    one up to case or blanks gets that hint."""
    allowed = ("mechanism", "report") + (("count",) if kind == "counts" else ())
    other = [c for c in names if c not in allowed]
    if not other:
        return
    near = [c for c in other if c.strip().lower() in KNOWN_COLUMNS]
    if near:
        raise LocalPrivError(f"{where} has the column {near[0]!r}: localpriv reads columns named exactly "
                             f"{', '.join(allowed)} (lower case) and would ignore it; rename it")
    hint = (" (a counts file names its counts 'count')" if kind == "counts"
            else "; if each row counts reports, name the column 'count' and mark the file kind=counts")
    raise LocalPrivError(f"{where} has column(s) {', '.join(repr(c) for c in other[:5])} that a {kind} file does "
                         f"not have ({', '.join(allowed)}): they would be ignored; drop them{hint}")


def open_source(path: str, constants: Mapping[str, str] | None = None, fmt: str | None = None) -> Source:
    """Inspect one report or counts file: its type (``fmt`` names it, whatever the name; else the
    suffix, or for other names the content, :func:`file_type`), format version and kind."""
    constants = dict(constants or {})
    ftype = file_type(path, fmt)
    declared: list[str] | None = None
    rows: int | None = None
    if ftype == "parquet":
        version, kind, names, attribute, declared = _parquet_info(path)
        lines = 0
    else:
        try:
            version, kind, lines, attribute = _csv_marker(path)
            names = csv_columns(path, lines)
        except READ_ERRORS as exc:
            raise LocalPrivError(f"cannot read {path}: {one_line(exc)}") from None
        if version is None:
            meta = read_sidecar(path)
            if meta is not None:
                version, kind, attribute, declared = meta.version, meta.kind, meta.attribute, meta.specs
                rows = meta.rows
    cols = set(names) | set(constants)
    if kind is None:
        kind = "counts" if "count" in cols else "reports"
    if kind not in ("reports", "counts"):
        raise LocalPrivError(f"{path}: unknown localpriv file kind {kind!r} (reports or counts)")
    missing = {"mechanism", "report"} - cols
    if missing:
        raise LocalPrivError(f"{path} is not a report or counts file: no column(s) "
                             f"{', '.join(sorted(missing))} (columns: {', '.join(names) or 'none'})")
    if kind == "counts" and "count" not in cols:
        raise LocalPrivError(f"{path} is marked as counts but has no count column")
    if kind == "reports" and "count" in cols:  # never read as reports with the counts ignored
        raise LocalPrivError(f"{path} is marked as reports (one row per report) but has a count column; mark it "
                             f"kind=counts if each row counts reports, or drop the column")
    twice = sorted({c for c in names if names.count(c) > 1 and c in ("mechanism", "report", "count")})
    if twice:
        raise LocalPrivError(f"{path} has the column {twice[0]} more than once: which one is meant is unclear")
    check_columns(str(path), names, kind)
    return Source(path, ftype, kind, version, constants, lines, declared_rows=rows, attribute=attribute,
                  declared_specs=declared)


def _hive_constants(root: Path, file: Path) -> dict[str, str]:
    from urllib.parse import unquote
    out: dict[str, str] = {}
    for part in file.relative_to(root).parts[:-1]:
        key, eq, value = part.partition("=")
        if eq:
            out[unquote(key)] = unquote(value)
    return out


def expand_sources(inputs: StrPath | Iterable[StrPath]) -> list[Source]:
    """Report/counts inputs -> sources: files, globs (``'r*.parquet'``), folders and hive-partitioned
    Parquet datasets (``root/mechanism=.../part-0.parquet``: partition values fill missing columns).
    Nothing matched is an error; files starting with ``.`` or ``_`` inside folders are ignored."""
    import glob as _glob

    if isinstance(inputs, (str, os.PathLike)):
        items = [inputs]
    elif hasattr(inputs, "__iter__") and not isinstance(inputs, (bytes, dict)):
        items = list(inputs)
    else:
        raise LocalPrivError(f"inputs must be a file name, glob or folder, or a list of them; "
                             f"got {type(inputs).__name__}")
    bad = [type(i).__name__ for i in items if not isinstance(i, (str, os.PathLike))]
    if bad:
        raise LocalPrivError(f"inputs must be file names, globs or folders; got {bad[0]}")
    if not items:
        raise LocalPrivError("no input files given")
    out: list[Source] = []
    for item in items:
        text = str(item)
        fmt = getattr(item, "fmt", None)  # a FormatPath: --format
        if is_sidecar(text):  # a CSV file's metadata (a shell's r* names it too): read with its file
            continue
        if is_uri(text):
            out.append(open_source(text, fmt=fmt))
            continue
        if any(ch in text for ch in "*?["):
            matches = sorted(_glob.glob(text, recursive=True))
            if not matches:
                raise LocalPrivError(f"no file matches {text}")
            for m in matches:
                if not is_sidecar(m):
                    out.extend(expand_sources([m]) if Path(m).is_dir() else [open_source(m)])
            continue
        p = Path(text)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file()
                           and not any(part.startswith((".", "_")) for part in f.relative_to(p).parts)
                           and _suffix(f.name) in (".parquet", ".pq", ".csv"))
            if not files:
                raise LocalPrivError(f"folder {p} holds no .parquet or .csv files")
            out.extend(open_source(str(f), _hive_constants(p, f)) for f in files)
            continue
        if not p.exists():
            raise LocalPrivError(f"input file {text} not found")
        out.append(open_source(text, fmt=fmt))
    return out


def write_counts(df: pd.DataFrame, path: StrPath, inputs: Iterable[StrPath] = (), attribute: str | None = None) -> Path:
    """Write a counts frame (mechanism, report, count) as a versioned counts file, atomically.

    Parquet needs one report type per file: numeric reports of different types are stored as
    ``double`` (exact for output indices below 2^53); bit vectors beside numbers are stored as the
    CSV text form (``string``), which every reader decodes per mechanism.

    Parameters
    ----------
    df : pandas.DataFrame
        Columns ``mechanism``, ``report``, ``count`` (an aggregator's ``counts(...)``).
    path : str or Path
        The counts file (``.csv`` or ``.parquet``).
    inputs : iterable of paths
        The files counted (the output may not overwrite one of them).
    attribute : str, optional
        The name of the values' column, recorded in the file (default: the one the input files
        record, when they agree; see :func:`localpriv.data.formats.attribute_of`).

    Returns
    -------
    Path
    """
    reps = df["report"].to_numpy()
    kinds: set[str] = set()
    if reps.dtype == object:  # one pass over the distinct reports (not the users' reports)
        kinds = {("binary" if isinstance(v, (bytes, bytearray)) else
                  "float" if isinstance(v, (float, np.floating)) else "int") for v in reps}
    if attribute is None and inputs:
        attribute = attribute_of(inputs)
    with TableWriter(path, "counts", inputs, attribute=attribute) as w:
        if not arrow():  # CSV (TableWriter refused Parquet): the text path writes the same bytes
            if reps.dtype == object and kinds and kinds <= {"int", "float"}:
                reps = reps.astype(np.float64 if "float" in kinds else np.int64)
            elif reps.dtype == object and kinds != {"binary"}:
                reps = np.asarray([v.hex() if isinstance(v, (bytes, bytearray)) else
                                   (repr(float(v)) if isinstance(v, (float, np.floating)) else str(int(v)))
                                   for v in reps], dtype=object)
            w.write(pd.DataFrame({"mechanism": df["mechanism"].astype(str).to_numpy(dtype=object), "report": reps,
                                  "count": df["count"].to_numpy(np.int64)}))
            return w.path
        if reps.dtype != object or kinds == {"int"} or kinds == {"float"} or kinds == {"int", "float"}:
            if reps.dtype == object:
                reps = reps.astype(np.float64 if "float" in kinds else np.int64)
            col = pa.array(reps)
        elif kinds == {"binary"}:
            widths = {len(v) for v in reps}
            col = pa.array(list(reps), type=pa.binary(widths.pop())) if len(widths) == 1 else pa.array(
                list(reps), type=pa.binary())
        else:  # mixed bit vectors and numbers: the text form
            col = pa.array([v.hex() if isinstance(v, (bytes, bytearray)) else
                            (repr(float(v)) if isinstance(v, (float, np.floating)) else str(int(v)))
                            for v in reps], type=pa.string())
        w.write(pa.table({"mechanism": pa.array(df["mechanism"].astype(str).to_numpy(), pa.string()),
                          "report": col, "count": pa.array(df["count"].to_numpy(np.int64))}))
    return w.path
