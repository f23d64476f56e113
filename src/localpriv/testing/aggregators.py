"""Conformance checks for aggregation engines (``localpriv.data.aggregate.ENGINES``).

Every engine must give the same counts and :class:`~localpriv.data.observations.Observations` on
the same inputs (report files in Parquet and CSV, counts files, several mechanisms, globs,
folders, hive-partitioned datasets) and refuse the same bad inputs with the same one-line
message. Each check is a small function ``check(engine, folder)`` that writes its inputs under
``folder`` and raises ``AssertionError`` naming what differs; the reference is the data written
(counts) or the default engine (refusals). In the style of scikit-learn's
``parametrize_with_checks``::

    for name, check in aggregator_checks("numpy"):
        check("numpy", tmp_path / name)

or :func:`check_aggregator` to run them all.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from localpriv.data.aggregate import DEFAULT_ENGINE, ENGINES, aggregate, engine_aggregator, write_counts
from localpriv.data.observations import Observations
from localpriv.data.reports import report_table, write_reports
from localpriv.mechanisms import parse
from localpriv.utils.validation import LocalPrivError

__all__ = ["aggregator_checks", "check_aggregator", "AGGREGATOR_CHECKS"]

Check = Callable[[str, Path], None]


def _reports(n: int, spec: str, seed: int) -> pa.Table:
    mech = parse(spec)
    x = np.random.default_rng(seed).integers(0, mech.k, n)
    return report_table(mech, mech.sample(x, np.random.default_rng(seed + 1)))


def _expected(*tables: pa.Table) -> dict:
    """``{spec: {report: count}}`` of report tables (bit vectors as bytes)."""
    out: dict = {}
    for t in tables:
        specs = t.column("mechanism").to_pylist()
        reps = t.column("report").to_pylist()
        for spec, r in zip(specs, reps):
            key = bytes(r) if isinstance(r, (bytes, bytearray)) else r
            out.setdefault(spec, {}).setdefault(key, 0)
            out[spec][key] += 1
    return out


def _as_dict(obs: Observations) -> dict:
    out: dict = {}
    for b in obs.blocks:
        reps = b.reports
        keys = [bytes(np.asarray(r, dtype=np.uint8)) for r in reps] if reps.ndim == 2 else reps.tolist()
        d = out.setdefault(str(b.mechanism), {})
        for key, c in zip(keys, np.asarray(b.counts).tolist()):
            d[key] = d.get(key, 0) + c
    return out


def _same_counts(engine: str, source, expected: dict, what: str) -> None:
    obs = aggregate(source, engine=engine)
    got = _as_dict(obs)
    assert got == expected, f"{engine}: the counts of {what} differ from the reports written"


def _refusal(engine: str, source) -> str:
    try:
        aggregate(source, engine=engine)
    except LocalPrivError as exc:
        return str(exc)
    raise AssertionError(f"{engine}: accepted an input the engines must refuse")


def _same_refusal(engine: str, source, what: str) -> None:
    got = _refusal(engine, source)
    assert "\n" not in got, f"{engine}: the refusal of {what} is not one line: {got!r}"
    want = _refusal(DEFAULT_ENGINE, source)
    assert got == want, f"{engine}: refuses {what} with {got!r}, {DEFAULT_ENGINE} with {want!r}"


# ---- the checks ------------------------------------------------------------------------------
def check_reports_parquet(engine: str, folder: Path) -> None:
    """A Parquet report file: its counts."""
    t = _reports(400, "krr(k=8,eps=1.0)", 1)
    write_reports(t, folder / "r.parquet")
    _same_counts(engine, folder / "r.parquet", _expected(t), "a Parquet report file")


def check_reports_csv(engine: str, folder: Path) -> None:
    """A CSV report file: its counts."""
    t = _reports(300, "krr(k=8,eps=2.0)", 2)
    write_reports(t, folder / "r.csv")
    _same_counts(engine, folder / "r.csv", _expected(t), "a CSV report file")


def check_counts_files(engine: str, folder: Path) -> None:
    """Counts files (Parquet and CSV) beside a report file: counts are summed."""
    a, b = _reports(300, "krr(k=8,eps=1.0)", 3), _reports(200, "krr(k=8,eps=1.0)", 4)
    write_reports(a, folder / "a.parquet")
    write_reports(b, folder / "b.parquet")
    counts = engine_aggregator("numpy").counts(folder / "b.parquet")
    write_counts(counts, folder / "c.parquet")
    write_counts(counts, folder / "c.csv")
    _same_counts(engine, [folder / "a.parquet", folder / "c.parquet", folder / "c.csv"],
                 _expected(a, b, b), "counts files")


def check_mixed_mechanisms(engine: str, folder: Path) -> None:
    """Numbers, bit vectors and real-valued reports of three mechanisms at once."""
    ts = [_reports(200, "krr(k=6,eps=1.0)", 5), _reports(150, "oue(k=6,eps=1.0)", 6),
          _reports(100, "laplace(k=6,eps=1.0)", 7)]
    for i, t in enumerate(ts):
        write_reports(t, folder / f"m{i}.parquet")
    _same_counts(engine, [folder / f"m{i}.parquet" for i in range(3)], _expected(*ts), "mixed mechanisms")


def check_globs_and_folders(engine: str, folder: Path) -> None:
    """A folder and a glob of report files."""
    ts = [_reports(100, "krr(k=5,eps=1.0)", 10 + i) for i in range(3)]
    (folder / "in").mkdir()
    for i, t in enumerate(ts):
        write_reports(t, folder / "in" / f"p{i}.parquet")
    _same_counts(engine, folder / "in", _expected(*ts), "a folder")
    _same_counts(engine, str(folder / "in" / "p*.parquet"), _expected(*ts), "a glob")


def check_hive_partitions(engine: str, folder: Path) -> None:
    """A hive-partitioned dataset: the mechanism in the folder name."""
    t = _reports(120, "krr(k=5,eps=3.0)", 20)
    part = folder / "ds" / "mechanism=krr(k=5,eps=3.0)"
    part.mkdir(parents=True)
    pq.write_table(t.drop(["mechanism"]), part / "p.parquet")
    _same_counts(engine, folder / "ds", _expected(t), "a hive-partitioned dataset")


def check_same_observations(engine: str, folder: Path) -> None:
    """The Observations equal those of the reports in memory (mechanisms, reports, counts)."""
    t = _reports(250, "oue(k=6,eps=2.0)", 30)
    write_reports(t, folder / "o.parquet")
    obs = aggregate(folder / "o.parquet", engine=engine)
    mech = parse("oue(k=6,eps=2.0)")
    bits = np.frombuffer(b"".join(bytes(v) for v in t.column("report").to_pylist()), np.uint8).reshape(t.num_rows, -1)
    ref = Observations.from_reports(mech, bits)
    assert [str(m) for m in obs.mechanisms] == [str(m) for m in ref.mechanisms], f"{engine}: other mechanisms"
    assert _as_dict(obs) == _as_dict(ref), f"{engine}: other observations than the reports in memory"
    assert obs.n == ref.n == 250, f"{engine}: {obs.n} reports instead of 250"


def check_refuses_reports_outside_output_space(engine: str, folder: Path) -> None:
    """A report outside the mechanism's output space is refused, with the default engine's line."""
    t = pa.table({"mechanism": ["krr(k=4,eps=1.0)"] * 3, "report": pa.array([0, 9, 1], pa.int64())})
    write_reports(t, folder / "bad.parquet")
    _same_refusal(engine, folder / "bad.parquet", "a report outside the output space")


def check_refuses_unknown_mechanism(engine: str, folder: Path) -> None:
    """An unknown mechanism spec is refused, with the default engine's line."""
    t = pa.table({"mechanism": ["nosuch(k=4,eps=1.0)"] * 2, "report": pa.array([0, 1], pa.int64())})
    pq.write_table(t, folder / "bad.parquet")
    _same_refusal(engine, folder / "bad.parquet", "an unknown mechanism")


def check_refuses_negative_counts(engine: str, folder: Path) -> None:
    """A counts file with a negative count is refused, with the default engine's line."""
    df = pd.DataFrame({"mechanism": ["krr(k=4,eps=1.0)"] * 2, "report": [0, 1], "count": [5, 3]})
    write_counts(df, folder / "c.parquet")
    t = pq.read_table(folder / "c.parquet")
    t = t.set_column(t.schema.get_field_index("count"), "count", pa.array([5, -3], t.schema.field("count").type))
    pq.write_table(t, folder / "c.parquet")
    _same_refusal(engine, folder / "c.parquet", "a negative count")


def check_empty_input(engine: str, folder: Path) -> None:
    """A report file without rows is refused as empty, with the default engine's line."""
    t = _reports(5, "krr(k=4,eps=1.0)", 40).slice(0, 0)
    write_reports(t, folder / "empty.parquet")
    _same_refusal(engine, folder / "empty.parquet", "an empty input")


#: every check, by name
AGGREGATOR_CHECKS: dict[str, Check] = {f.__name__[len("check_"):]: f for f in (
    check_reports_parquet, check_reports_csv, check_counts_files, check_mixed_mechanisms, check_globs_and_folders,
    check_hive_partitions, check_same_observations, check_refuses_reports_outside_output_space,
    check_refuses_unknown_mechanism, check_refuses_negative_counts, check_empty_input)}


def aggregator_checks(engine: str) -> Iterator[tuple[str, Check]]:
    """``(name, check)`` for every conformance check of the aggregation engine ``engine``
    (a key of ``ENGINES``); call ``check(engine, folder)`` with a fresh, empty folder."""
    if engine not in ENGINES:
        raise LocalPrivError(f"unknown aggregation engine {engine!r}; known: {', '.join(ENGINES)}")
    yield from AGGREGATOR_CHECKS.items()


def check_aggregator(engine: str) -> None:
    """Run every check of :func:`aggregator_checks` on ``engine``, each in a temporary folder."""
    for name, check in aggregator_checks(engine):
        with tempfile.TemporaryDirectory(prefix=f"localpriv-{name}-") as tmp:
            check(engine, Path(tmp))
