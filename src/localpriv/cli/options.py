"""Option parsing shared by the commands that need the library's types: domains, random
generators, size hints of input files (these load NumPy, so only the commands import this)."""
from __future__ import annotations

from pathlib import Path
from typing import overload

import numpy as np

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
    if str(path).lower().endswith(".parquet"):
        try:
            import pyarrow.parquet as pq
            return int(pq.ParquetFile(path).metadata.num_rows)
        except Exception:  # noqa: BLE001 - only a hint; reading the file reports real problems
            return None
    return None
