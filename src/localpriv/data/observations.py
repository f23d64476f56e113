"""Aggregated observations: what estimators read (never raw values, never individual reports).

An :class:`Observations` is a list of :class:`ObservationBlock`, one per distinct mechanism: the
distinct reports ``Z^A`` that mechanism produced and how often each was seen (``n^A`` in all) --
the triplets of seed 003 section 6. With a single mechanism and a finite output space this is just
the count vector of seed 001 section 3.2 (``q = counts / n``).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt
import pandas as pd

from localpriv.data.formats import StrPath, write_counts
from localpriv.data.reports import validate_reports
from localpriv.domains import Domain
from localpriv.likelihood.blocks import LikelihoodBlock
from localpriv.mechanisms import Mechanism, parse
from localpriv.utils.arrays import unique_rows
from localpriv.utils.validation import LocalPrivError, check_counts

__all__ = ["ObservationBlock", "Observations"]


def _fractional(df: pd.DataFrame) -> NoReturn:
    raise LocalPrivError("counts with fractions (weights) cannot be saved as a counts file: "
                         "counts files hold whole numbers")


@dataclass
class ObservationBlock:
    """Distinct reports of one mechanism and their counts."""

    mechanism: Mechanism
    reports: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:

        self.mechanism = parse(self.mechanism)
        self.counts = check_counts(self.counts, name=f"counts of {self.mechanism}")
        self.reports = validate_reports(self.mechanism, self.reports, where="", word="entry")
        if self.reports.shape[0] != self.counts.size:
            raise LocalPrivError(
                f"{self.mechanism}: {self.reports.shape[0]} distinct reports but {self.counts.size} counts"
            )

    @property
    def n(self) -> float:
        return float(self.counts.sum())

    def likelihood_block(self) -> LikelihoodBlock:
        return self.mechanism.likelihood_block(self.reports, self.counts)

    def count_vector(self) -> np.ndarray:
        """Counts over the mechanism's whole (finite) output space, zeros for unseen outputs."""
        n_out = self.mechanism.n_outputs
        if n_out is None:
            raise LocalPrivError(f"{self.mechanism} has no finite output space; use IBU on its reports")
        vec = np.zeros(n_out)
        np.add.at(vec, self.mechanism.output_index(self.reports), self.counts)
        return vec


@dataclass
class Observations:
    """Aggregated reports of one or more mechanisms sharing one input domain."""

    blocks: list[ObservationBlock]
    domain: Domain | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: where the counts also live when an engine keeps them distributed (the persisted Spark
    #: DataFrame of ``aggregate(..., engine="spark")``), for estimators that run there
    #: (``localpriv.estimate(obs, engine="spark")``); ``None`` for counts held only here
    frame: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.blocks:
            raise LocalPrivError("no observations: the reports are empty")
        ks = {b.mechanism.k for b in self.blocks}
        if len(ks) != 1:
            raise LocalPrivError(f"mechanisms disagree on the input domain size: {sorted(ks)}")
        if self.domain is not None and self.domain.size not in ks:
            raise LocalPrivError(f"mechanisms have {ks.pop()} inputs but the domain has {self.domain.size}")

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def from_counts(cls, mechanism: str | Mechanism, counts: npt.ArrayLike,
                    domain: Domain | None = None) -> Observations:
        """From a count vector over all outputs of one finite mechanism."""
        mech = parse(mechanism, domain)
        n_out = mech.n_outputs
        if n_out is None:
            raise LocalPrivError(f"{mech} has no finite output space, so no count vector: "
                                 "use Observations.from_reports or aggregate its reports")
        c = check_counts(counts, size=n_out)
        keep = c > 0
        return cls([ObservationBlock(mech, np.arange(n_out)[keep], c[keep])], domain)

    @classmethod
    def from_reports(cls, mechanism: str | Mechanism, reports: npt.ArrayLike,
                     domain: Domain | None = None) -> Observations:
        """From a 1-D array of reports of one mechanism (aggregated in memory with NumPy)."""
        mech = parse(mechanism, domain)
        r = np.asarray(reports)
        if r.ndim == 0:
            raise LocalPrivError(f"reports must be an array with one report per row, got {type(reports).__name__}")
        if r.shape[0] == 0:
            raise LocalPrivError("no reports given: the input is empty")
        uniq, cnt = unique_rows(r)  # rows as a few 64-bit keys each (packed bits, small integers)
        return cls([ObservationBlock(mech, uniq, cnt)], domain)

    # ---- access -----------------------------------------------------------------------------
    @property
    def k(self) -> int:
        return self.blocks[0].mechanism.k

    @property
    def n(self) -> float:
        return float(sum(b.n for b in self.blocks))

    @property
    def mechanisms(self) -> list[Mechanism]:
        return [b.mechanism for b in self.blocks]

    def single(self, estimator: str = "this estimator") -> ObservationBlock:
        if len(self.blocks) != 1:
            raise LocalPrivError(
                f"{estimator} needs reports from a single mechanism, got {len(self.blocks)}; "
                "use ibu (GIBU) for mixtures of mechanisms"
            )
        return self.blocks[0]

    def likelihood_blocks(self) -> list[LikelihoodBlock]:
        return [b.likelihood_block() for b in self.blocks]

    # ---- files ------------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        frames = []
        for b in self.blocks:
            rep = b.reports
            rep_col = list(map(bytes, rep)) if rep.ndim > 1 else rep
            frames.append(pd.DataFrame({"mechanism": str(b.mechanism), "report": rep_col, "count": b.counts}))
        return pd.concat(frames, ignore_index=True)

    def save(self, path: StrPath, inputs: Iterable[StrPath] = ()) -> Path:
        """Write the counts as a versioned counts file (``.csv`` or ``.parquet``), atomically
        (:mod:`localpriv.data.formats`); counts files are mergeable inputs of :func:`~localpriv.data.aggregate`."""
        df = self.to_frame()
        df["count"] = np.round(df["count"].to_numpy(float)).astype(np.int64) if np.all(
            df["count"].to_numpy(float) == np.round(df["count"].to_numpy(float))) else _fractional(df)
        return write_counts(df, path, inputs, attribute=self.meta.get("attribute"))

    @classmethod
    def from_frame(cls, df: pd.DataFrame, domain: Domain | None = None) -> Observations:
        """From a counts frame (mechanism, report, count); specs are read as untrusted data."""
        missing = {"mechanism", "report", "count"} - set(df.columns)
        if missing:
            raise LocalPrivError(f"counts table lacks column(s) {', '.join(sorted(missing))}")
        if df["mechanism"].isna().any():
            raise LocalPrivError(f"{int(df['mechanism'].isna().sum())} count row(s) have no mechanism")
        blocks = []
        for spec, grp in df.groupby("mechanism", sort=False):
            mech = parse(spec, domain, trusted=False)
            rep = grp["report"].to_numpy()
            if rep.dtype == object and len(rep) and isinstance(rep[0], (bytes, bytearray)):
                rep = np.frombuffer(b"".join(rep), dtype=np.uint8).reshape(len(rep), -1)
            elif rep.dtype == object:
                rep = rep.astype(np.float64 if mech.report_kind == "float64" else np.int64)
            blocks.append(ObservationBlock(mech, rep, grp["count"].to_numpy(dtype=float)))
        return cls(blocks, domain)
