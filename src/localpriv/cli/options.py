"""Option parsing shared by the commands that need the library's types: domains, random
generators, size hints of input files (these load NumPy, so only the commands import this)."""
from __future__ import annotations

from pathlib import Path
from typing import overload

import numpy as np

from localpriv.cli.common import say
from localpriv.data.formats import KNOWN_SUFFIXES, VALUE_FORMATS, check_format, sniff_format
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
