"""Option parsing shared by the commands that need the library's types: domains, random
generators, size hints of input files (these load NumPy, so only the commands import this)."""
from __future__ import annotations

from pathlib import Path
from typing import overload

import numpy as np

from localpriv.cli.common import say
from localpriv.data.formats import (
    KNOWN_SUFFIXES,
    REPORT_FORMATS,
    VALUE_FORMATS,
    FormatPath,
    check_format,
    is_sidecar,
    is_uri,
    sniff_format,
)
from localpriv.domains import Domain, parse_domain
from localpriv.utils.rng import make_generator


@overload
def domain_option(text: str) -> Domain: ...
@overload
def domain_option(text: None) -> None: ...
def domain_option(text: str | None) -> Domain | None:
    """``--domain`` text to a domain (``None`` when not given)."""
    return None if text is None else parse_domain(text)


def generator(seed: int | None) -> np.random.Generator:
    """``--seed`` gives a reproducible PCG64 stream (experiments); without it, a cryptographically
    secure generator seeded from the operating system (what a real client must use)."""
    return make_generator(seed)


def rows_hint(path: Path) -> int | None:
    """Rows of a Parquet file from its footer (the bar's total); None for text files."""
    if str(path).lower().endswith(".parquet") or (path.is_file() and path.open("rb").read(4) == b"PAR1"):
        try:
            import pyarrow.parquet as pq
            return int(pq.ParquetFile(path).metadata.num_rows)
        except Exception:  # noqa: BLE001 - only a hint; reading the file reports real problems
            return None
    return None


#: ``--format`` of the commands that read values
FORMAT_HELP = ("the file's format: csv, tsv, parquet or json (JSON Lines), whatever its name; without it the "
               "suffix decides, or, for other names, the format is sniffed when unambiguous (said on stderr)")
#: ``--strip/--no-strip``
STRIP_HELP = ("surrounding blanks of text values are stripped (UCI's ', ' separators leave one before every "
              "value); --no-strip keeps them")


def input_format(path: Path, fmt: str | None, allowed: tuple[str, ...] = VALUE_FORMATS) -> str | None:
    """``--format`` checked; without it, a file whose suffix does not say is sniffed (one line on
    stderr naming the choice) when that is unambiguous, else refused."""
    fmt = check_format(fmt, allowed)
    name = str(path).lower()
    if fmt is not None or name.endswith(KNOWN_SUFFIXES) or "://" in name or not path.is_file():
        return fmt
    found, why = sniff_format(str(path), allowed)
    say(f"reading {path} as {found.upper()}: {why} (--format {' or '.join(allowed)} to choose)")
    return found


#: ``--format`` of the commands that read report or counts files
REPORT_FORMAT_HELP = ("the format of the report or counts files named: csv or parquet, whatever their names; "
                      "without it the suffix decides, or, for other names, the content (said on stderr); "
                      "files found in folders and globs are read by their suffix (.csv, .parquet)")


def report_inputs(inputs: list[str], fmt: str | None) -> list[str]:
    """The report or counts inputs of aggregate and estimate with ``--format``: every file named
    (not a glob or a folder) is read as ``fmt``; without it, a file whose name does not say is
    sniffed (one line on stderr naming the choice and why) or refused when that is ambiguous."""
    fmt = check_format(fmt, REPORT_FORMATS)
    out: list[str] = []
    for item in inputs:
        text = str(item)
        named = (is_uri(text) or Path(text).is_file()) and not is_sidecar(text)
        if fmt is not None:
            out.append(FormatPath(text, fmt) if named else text)
        elif named and not is_uri(text) and not text.lower().endswith(KNOWN_SUFFIXES):
            found, why = sniff_format(text, REPORT_FORMATS)
            say(f"reading {text} as {found.upper()}: {why} (--format {' or '.join(REPORT_FORMATS)} to choose)")
            out.append(FormatPath(text, found))
        else:
            out.append(text)
    return out
