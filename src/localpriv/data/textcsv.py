"""CSV and TSV text read and written with Python's ``csv`` module, NumPy and pandas: the data
layer's path when pyarrow (the optional group ``parquet``) is not installed.

The files are the ones the Arrow path reads and writes, byte for byte on writing: strings (the
mechanism's spec, hex bit vectors) in double quotes, whole numbers as decimal digits, floats in the
shortest form that reads back to the same double, written positionally for decimal exponents from
-6 to 9 and as ``1e-7``, ``1.5e+10`` otherwise (:func:`float_text`). Reading keeps the Arrow path's
strictness: text is UTF-8 (or UTF-16 with a byte-order mark; gzip for ``.gz``), a row with the wrong
number of fields or a blank row of a file of several columns is refused with its line number, a
line with an odd number of double quotes (a quoted value that spans a line end) refuses the file
before any row is read (:func:`check_quoted_lines`, which the Arrow path runs too), and an empty
cell is a missing value. Text columns are NumPy
arrays of ``str`` (``""`` for an empty cell), converted to numbers by the callers with the checks
of :func:`int_text` and :func:`float_text_values`.

Memory is bounded by the block (:data:`localpriv.data.formats.CSV_BLOCK_BYTES` of text at a time,
the rows of one block as lists of fields).
"""
from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from operator import itemgetter, methodcaller
from typing import IO, Any, cast

import numpy as np
import pandas as pd

from localpriv.utils.validation import LocalPrivError

__all__ = ["TextBatch", "TextCsv", "LineBlocks", "MAX_LINE_BYTES", "unbalanced_quote_lines", "check_quoted_lines",
           "hex_text", "json_line_blocks", "json_columns",
           "columns_of",
           "open_text_stream", "float_text", "csv_text", "int_text", "float_text_values", "match",
           "INT_PATTERN", "FLOAT_PATTERN", "strip"]

#: decimal whole numbers (ASCII digits only: other scripts' digits and hex are refused)
INT_PATTERN = r"[+-]?[0-9]+"
#: numbers as the Arrow path's cast reads them (no digit separators, no other scripts' digits)
FLOAT_PATTERN = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|nan|Infinity|NaN)"


def open_text_stream(path: str, head: bytes) -> IO[bytes]:
    """A UTF-8 byte stream of the text file ``path`` (gzip for ``.gz``), whose first bytes are
    ``head`` (checked by the caller): UTF-16 with a byte-order mark is re-encoded, a UTF-8
    byte-order mark dropped."""
    opened = gzip.open(path, "rb") if path.lower().endswith(".gz") else open(path, "rb")  # noqa: SIM115 - returned
    raw = cast("IO[bytes]", opened)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return cast("IO[bytes]", codecs.EncodedFile(raw, "utf-8", "utf-16"))
    if head.startswith(b"\xef\xbb\xbf"):
        return cast("IO[bytes]", codecs.EncodedFile(raw, "utf-8", "utf-8-sig"))
    return raw


@dataclass
class TextBatch:
    """Rows of a CSV file as text columns (``""`` for an empty cell)."""

    columns: dict[str, np.ndarray]
    num_rows: int

    @property
    def column_names(self) -> list[str]:
        """The columns' names, in order."""
        return list(self.columns)

    def column(self, name: str) -> np.ndarray:
        """The column ``name``: an array of ``str``."""
        return self.columns[name]


#: the longest line read (a row of a report, counts or values file is far shorter: a spec is at most
#: 100,000 characters); a longer one is refused, as Arrow's reader refuses a row longer than its block
MAX_LINE_BYTES = 1 << 24


class LineBlocks:
    """Whole lines of a UTF-8 byte stream, a block of about ``block_bytes`` at a time (a line is
    never cut; one longer than :data:`MAX_LINE_BYTES` is refused)."""

    def __init__(self, stream: IO[bytes], path: str, block_bytes: int = 1 << 20) -> None:
        self.path, self.block_bytes = path, max(1, int(block_bytes))
        self._stream = stream
        self._carry = b""
        self.eof = False

    def read(self) -> list[str]:
        """The next block's lines (without their line ends, ``\r\n`` taken as one); ``[]`` at the end."""
        if self.eof:
            return []
        data = self._carry + self._stream.read(self.block_bytes)
        cut = data.rfind(b"\n")
        while cut < 0:
            if len(data) > MAX_LINE_BYTES:
                raise LocalPrivError(f"{self.path}: a line holds more than {MAX_LINE_BYTES:,} bytes; limit "
                                     f"{MAX_LINE_BYTES:,} for one line of a CSV, TSV or JSON Lines file")
            more = self._stream.read(self.block_bytes)
            if not more:
                self.eof = True
                break
            data += more
            cut = data.rfind(b"\n")
        if cut < 0:
            self._carry, body = b"", data
        else:
            self._carry, body = data[cut + 1:], data[:cut + 1]
        if not body:
            self.eof = True
            return []
        lines = body.decode("utf-8").replace("\r\n", "\n").split("\n")
        if lines[-1] == "":
            lines.pop()
        return lines

    def close(self) -> None:
        """Close the stream."""
        self._stream.close()


_QUOTE, _NEWLINE = ord('"'), ord("\n")


def unbalanced_quote_lines(stream: IO[bytes], block_bytes: int = 1 << 20) -> tuple[int, int]:
    r"""``(first, count)``: the 1-based number of the first line of ``stream`` holding an odd number
    of double quotes, and how many lines do; ``(0, 0)`` when every line's quotes pair up.

    An escaped quote is written twice (``""``) and a quoted value opens and closes with one, so a
    line's quotes pair up unless a quoted value runs over its line end (a line is what ends at
    ``\n``; ``\r\n`` holds the same quotes). Per block of ``block_bytes``, vectorized: with
    :math:`q_i = 1` where byte :math:`i` is ``"``, the parity :math:`P_i = (c + \sum_{j \le i} q_j)
    \bmod 2` (``c``: the parity carried from the previous block's unfinished line) is taken at the
    line ends :math:`e_0 < e_1 < \dots`, and line :math:`k` is unbalanced when
    :math:`P_{e_k} \oplus P_{e_{k-1}} = 1` (:math:`P_{e_{-1}} = 0`). The running sum is kept in
    ``uint8``: it wraps at 256, an even number, so its lowest bit stays the parity. Memory: the
    block, two bytes per byte of it and eight per line end. Reads ``stream`` to its end; does not
    close it.
    """
    block_bytes = max(1, int(block_bytes))
    lines = first = count = 0
    carry = 0  # parity of the quotes of the line not yet ended
    while True:
        block = stream.read(block_bytes)
        if not block:
            break
        if not carry and block.find(b'"') < 0:  # no quote: only the lines to count
            lines += block.count(b"\n")
            continue
        data = np.frombuffer(block, dtype=np.uint8)
        parity = np.cumsum(data == _QUOTE, dtype=np.uint8)
        parity &= 1
        if carry:
            parity ^= 1
        ends = np.flatnonzero(data == _NEWLINE)
        at = parity[ends]
        odd = np.flatnonzero(at[1:] ^ at[:-1]) + 1 if ends.size > 1 else np.zeros(0, dtype=np.int64)
        if ends.size and at[0]:
            odd = np.concatenate(([0], odd))
        if odd.size:
            first = first or lines + int(odd[0]) + 1
            count += int(odd.size)
        carry = int(parity[-1] ^ (at[-1] if ends.size else 0))
        lines += int(ends.size)
    if carry:  # the last line, without a line end
        first = first or lines + 1
        count += 1
    return first, count


def check_quoted_lines(stream: IO[bytes], path: str, block_bytes: int = 1 << 20) -> None:
    """Refuse a CSV or TSV file in which a quoted value spans a line end, in one line naming the
    first such line and how many lines have an odd number of double quotes
    (:func:`unbalanced_quote_lines`); run before any row is read, so nothing of such a file is
    counted. Closes ``stream``."""
    try:
        first, count = unbalanced_quote_lines(stream, block_bytes)
    finally:
        stream.close()
    if count:
        raise LocalPrivError(f"{path}: quoted value spans a line end at line {first} ({count} "
                             f"line{'s' if count > 1 else ''}); values may not contain line breaks")


class TextCsv:
    """A CSV or TSV file read in blocks of whole lines: the header (or names ``f0``, ``f1``, ...
    for a file without one), then :meth:`blocks` of parsed rows.

    Parameters
    ----------
    stream : binary file
        UTF-8 text (:func:`open_text_stream`); closed by :meth:`close` or at the end of :meth:`blocks`.
    path : str
        The file's name, for messages.
    delimiter : str
        ``","`` or a tab.
    skip_lines : int
        Lines before the header (an earlier release's format line).
    header : bool
        Whether the first line (after ``skip_lines``) names the columns.
    block_bytes : int
        Bytes of text per block.
    """

    def __init__(self, stream: IO[bytes], path: str, *, delimiter: str = ",", skip_lines: int = 0,
                 header: bool = True, block_bytes: int = 1 << 20) -> None:
        self.path, self.delimiter = path, delimiter
        self._lines = LineBlocks(stream, path, block_bytes)
        self._pending: list[str] = []
        self.line = 1  # the physical line number of the next line
        for _ in range(skip_lines):
            self._next_line()
        first = self._next_line()
        fields = next(csv.reader([first], delimiter=delimiter), []) if first is not None else []
        if header:
            self.names = fields
        else:
            self.names = [f"f{i}" for i in range(len(fields))]
            if first is not None:
                self._pending.insert(0, first)
                self.line -= 1

    def _read_lines(self) -> list[str]:
        """The pending lines, else the next block's."""
        if self._pending:
            out, self._pending = self._pending, []
            return out
        return self._lines.read()

    def _next_line(self) -> str | None:
        if not self._pending:
            self._pending = self._read_lines()
        if not self._pending:
            return None
        self.line += 1
        return self._pending.pop(0)

    def close(self) -> None:
        """Close the stream."""
        self._lines.close()

    def blocks(self, drop_trailing: int = 0) -> Iterator[tuple[list[list[str]], list[tuple[int, str]], int]]:
        """``(rows, invalid, first_line)`` per block: the rows with the header's number of fields,
        the others as ``(line, text)``, and the line number of the block's first line.
        ``drop_trailing``: blank lines at the very end of the file that are not rows."""
        width = len(self.names)
        held: list[str] | None = None
        try:
            while True:
                lines = self._read_lines()
                if held is not None:
                    if not lines and drop_trailing:
                        held = held[:max(0, len(held) - drop_trailing)]
                    yield self._parse(held, width)
                if not lines:
                    return
                held = lines
        finally:
            self.close()

    def _parse(self, lines: list[str], width: int) -> tuple[list[list[str]], list[tuple[int, str]], int]:
        first = self.line
        self.line += len(lines)
        text = "\n".join(lines) + "\n"
        rows = list(csv.reader(io.StringIO(text), delimiter=self.delimiter))
        if len(rows) == len(lines):
            starts = None
        else:  # a quoted value ran over a line end: each row's first line, from the reader (rare)
            reader = csv.reader(io.StringIO(text), delimiter=self.delimiter)
            rows, starts, seen = [], [], 0
            for row in reader:
                rows.append(row)
                starts.append(seen)
                seen = reader.line_num
            starts.append(len(lines))
        counts = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        if (counts == 0).any():  # a blank line is a row of empty cells (refused as such by the callers)
            rows = [r or [""] * width for r in rows]
            counts[counts == 0] = width
        bad = np.flatnonzero(counts != width)
        if not bad.size:
            return rows, [], first
        bad_set = set(bad.tolist())
        if starts is None:
            invalid = [(first + int(i), lines[int(i)]) for i in bad]
        else:
            invalid = [(first + starts[i], "\n".join(lines[starts[i]:starts[i + 1]])) for i in bad.tolist()]
        good = [r for i, r in enumerate(rows) if i not in bad_set]
        return good, invalid, first


def json_line_blocks(stream: IO[bytes], path: str, block_bytes: int = 1 << 20) -> Iterator[list[dict]]:
    """The objects of a JSON Lines file, a block of lines at a time (each block parsed by one call
    of :func:`json.loads`); blank lines are skipped, a line that is not a JSON object is refused."""
    lines = LineBlocks(stream, path, block_bytes)
    try:
        while not lines.eof:
            block = [line for line in lines.read() if line.strip()]
            if not block:
                continue
            try:
                objs = json.loads("[" + ",".join(block) + "]")
            except ValueError as exc:
                raise LocalPrivError(f"cannot read {path} as JSON Lines (one object per line): {exc}") from None
            if len(objs) != len(block) or set(map(type, objs)) != {dict}:
                raise LocalPrivError(f"cannot read {path} as JSON Lines: every line must be one JSON object")
            yield objs
    finally:
        lines.close()


def json_columns(objs: list[dict], names: Sequence[str]) -> TextBatch:
    """The fields ``names`` of JSON objects as object arrays (``None`` where an object lacks one)."""
    n = len(objs)
    cols = {c: np.fromiter(map(methodcaller("get", c), objs), dtype=object, count=n) for c in names}
    return TextBatch(cols, n)


def columns_of(rows: list[list[str]], names: Sequence[str], wanted: Sequence[str]) -> TextBatch:
    """The ``wanted`` columns of parsed ``rows`` as arrays of ``str``."""
    n = len(rows)
    cols = {}
    for c in wanted:
        i = list(names).index(c)
        cols[c] = np.fromiter(map(itemgetter(i), rows), dtype=object, count=n) if n else np.zeros(0, object)
    return TextBatch(cols, n)


# --------------------------------------------------------------------------------------------
# Text and numbers
# --------------------------------------------------------------------------------------------
def strip(text: np.ndarray) -> np.ndarray:
    """Surrounding blanks removed from every string of ``text``."""
    return np.array(pd.Series(text, dtype=object).str.strip().to_numpy(), dtype=object)


def match(text: np.ndarray, pattern: str) -> np.ndarray:
    """Which strings of ``text`` match ``pattern`` whole (booleans)."""
    if not len(text):
        return np.zeros(0, dtype=bool)
    return np.array(pd.Series(text, dtype=object).str.fullmatch(pattern).fillna(False).to_numpy(dtype=bool))


def int_text(text: np.ndarray) -> np.ndarray:
    """Decimal whole numbers (checked with :data:`INT_PATTERN` by the caller) -> int64; an
    :class:`OverflowError` past 64 bits."""
    return np.array(pd.Series(text, dtype=object).map(int).to_numpy(), dtype=np.int64) if len(text) else \
        np.zeros(0, np.int64)


def float_text_values(text: np.ndarray) -> np.ndarray:
    """Numbers (checked with :data:`FLOAT_PATTERN` by the caller) -> float64."""
    return np.asarray(text, dtype=object).astype(np.float64) if len(text) else np.zeros(0, np.float64)


_SPECIAL = {"nan": "nan", "inf": "inf", "-inf": "-inf"}


def float_text(x: float) -> str:
    """A double as the report and counts files write it: the shortest digits that read back to the
    same double (``repr``'s), positional for decimal exponents -6 to 9 (``0.000001``, ``123.5``,
    ``1000000000``), else scientific with a signed exponent (``1e-7``, ``1.5e+10``); ``nan``,
    ``inf``, ``-inf``; ``-0`` for negative zero."""
    r = repr(float(x))
    if r in _SPECIAL:
        return _SPECIAL[r]
    sign, digits, exp = Decimal(r).as_tuple()
    d = "".join(map(str, digits)).lstrip("0") or "0"
    if d == "0":
        return "-0" if sign else "0"
    tail = len(d) - len(d.rstrip("0"))
    d = d.rstrip("0")
    point = len(d) + int(exp) + tail  # value = 0.d x 10^point
    e = point - 1
    neg = "-" if sign else ""
    if -6 <= e <= 9:
        if point <= 0:
            return f"{neg}0.{'0' * -point}{d}"
        if point >= len(d):
            return f"{neg}{d}{'0' * (point - len(d))}"
        return f"{neg}{d[:point]}.{d[point:]}"
    mant = d[0] + ("." + d[1:] if len(d) > 1 else "")
    return f"{neg}{mant}e{'+' if e > 0 else '-'}{abs(e)}"


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def hex_text(rows: np.ndarray) -> np.ndarray:
    """``n x w`` bytes -> ``n`` lowercase hex strings of ``2w`` characters (an array of ``str``), vectorized."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    n, w = rows.shape
    if not n or not w:
        return np.full(n, "", dtype=object)
    out = np.empty((n, 2 * w), dtype=np.uint8)
    out[:, 0::2] = _HEX[rows >> 4]
    out[:, 1::2] = _HEX[rows & 15]
    return out.view(f"S{2 * w}").ravel().astype(f"U{2 * w}").astype(object)


def _quoted(values: np.ndarray) -> list[str]:
    return _per_distinct(values, values, lambda v: '"' + v.replace('"', '""') + '"')


def _per_distinct(values: np.ndarray, key: np.ndarray, text: Callable[[Any], str]) -> list[str]:
    """``text`` of every value, computed once per distinct ``key`` (a hash factorization, O(n)):
    the Python work is bounded by the distinct values (a mechanism's spec, the grid of a released
    number), not by the reports."""
    codes, firsts = pd.factorize(key, use_na_sentinel=False)
    index = np.zeros(len(firsts), dtype=np.int64)
    index[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)  # a row of each code (its first)
    texts = np.array([text(v) for v in values[index].tolist()], dtype=object)
    return texts[codes].tolist()


def csv_text(columns: Sequence[tuple[str, np.ndarray]], header: bool) -> bytes:
    """Rows as the report and counts files write them: strings (arrays of ``str``) quoted, numbers
    not, ``\\n`` line ends; the header's names quoted."""
    parts: list[list[str]] = []
    for _name, col in columns:
        col = np.asarray(col)
        if col.dtype == object or col.dtype.kind == "U":
            parts.append(_quoted(col.astype(object)))
        elif col.dtype.kind == "f":
            col = col.astype(np.float64)  # keyed by bits: -0 and 0, and each NaN, keep their own text
            parts.append(_per_distinct(col, col.view(np.int64), float_text))
        else:
            parts.append(list(map(str, col.astype(np.int64).tolist())))
    buf = io.StringIO()
    if header:
        buf.write(",".join(f'"{name}"' for name, _ in columns) + "\n")
    if parts and parts[0]:
        buf.write("\n".join(map(",".join, zip(*parts))) + "\n")
    return buf.getvalue().encode("utf-8")


