"""Storage of the collector: collections, batches and counts per (mechanism, report) in SQLite
(embedded, the default) or PostgreSQL, behind one small interface.

The schema is versioned (table ``schema_version``) and brought up to date by :data:`MIGRATIONS`
when a store opens, in one transaction per step (PostgreSQL: under an advisory lock, so that two
servers starting at once migrate once).

Counts are *maintained*, never recomputed: an accepted batch adds its counts per distinct
(mechanism, report) with an upsert (``INSERT ... ON CONFLICT DO UPDATE SET count = count +
excluded.count``) in the same transaction that records its batch id, so a batch counts exactly
once (a retry finds its id and changes nothing) and an estimate reads the counts table only, never
raw reports. The transaction commits before the server answers: an acknowledged batch is on disk
(SQLite in WAL mode with ``synchronous=FULL``; PostgreSQL's default ``synchronous_commit=on``).

Devices (schema version 3): enrollment tokens register devices, each with its own token (stored as
a SHA-256 hash) and a device group. A batch posted with a device token is **charged** in the same
transaction that counts it: its computed level (``sum over its reports of epsilon_ldp``, basic
composition) is added to the device's row of ``spending`` (device, collection, period) and recorded
on its row of ``batches``, after the caps of the collection and of the device's group were checked
against the sums already charged (the device's row locked first on PostgreSQL). So a batch is
counted with its charge or not at all, and a batch over budget is not counted.
"""
from __future__ import annotations

import contextlib
import queue
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from localpriv.data.formats import legacy_spec
from localpriv.utils.errors import LocalPrivError

__all__ = ["Store", "open_store", "MIGRATIONS", "SCHEMA_VERSION", "BatchResult", "OverBudget", "Caps",
           "MAX_DEVICES"]

#: Devices registered in one device group, at most (registration past it is refused).
MAX_DEVICES = 1_000_000
#: SQLite reads ``UPDATE ... RETURNING`` from version 3.35 (PostgreSQL always)
RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)

#: Migrations: ``(version, statements)``; a store at version ``v`` runs every step above ``v``.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (1, [
        """CREATE TABLE collections (
               name TEXT PRIMARY KEY,
               domain TEXT NOT NULL,
               policy TEXT NOT NULL,
               ingest_token_sha256 TEXT NOT NULL,
               analyst_token_sha256 TEXT NOT NULL,
               keep_raw INTEGER NOT NULL DEFAULT 0,
               created DOUBLE PRECISION NOT NULL,
               version BIGINT NOT NULL DEFAULT 0,
               n_reports BIGINT NOT NULL DEFAULT 0,
               n_batches BIGINT NOT NULL DEFAULT 0,
               n_duplicates BIGINT NOT NULL DEFAULT 0,
               n_refused_batches BIGINT NOT NULL DEFAULT 0,
               n_refused_reports BIGINT NOT NULL DEFAULT 0,
               last_ingest DOUBLE PRECISION)""",
        """CREATE TABLE batches (
               collection TEXT NOT NULL,
               batch_id TEXT NOT NULL,
               n_reports BIGINT NOT NULL,
               digest TEXT NOT NULL,
               received DOUBLE PRECISION NOT NULL,
               PRIMARY KEY (collection, batch_id))""",
        """CREATE TABLE counts (
               collection TEXT NOT NULL,
               mechanism TEXT NOT NULL,
               report TEXT NOT NULL,
               count BIGINT NOT NULL,
               PRIMARY KEY (collection, mechanism, report))""",
        """CREATE TABLE raw_reports (
               collection TEXT NOT NULL,
               batch_id TEXT NOT NULL,
               seq BIGINT NOT NULL,
               mechanism TEXT NOT NULL,
               report TEXT NOT NULL,
               PRIMARY KEY (collection, batch_id, seq))""",
    ]),
    # format version 3 (docs/decisions/0007-xxh64-stable-hashing-format-3.md): the local-hashing
    # oracles hash with XXH64 unless their spec says hash=cw; the reports stored before meant the
    # Carter-Wegman family, so their specs get hash=cw (Python step: the rewrite needs the spec
    # parser, see formats.legacy_spec)
    (2, ["legacy_hash_specs"]),
    # devices, enrollment tokens and the privacy ledger (docs/decisions/0053-device-budgets-at-ingest.md)
    (3, ["devices_and_spending"]),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def _legacy_hash_specs(c) -> None:
    """Append ``hash=cw`` to every stored local-hashing spec that names no hash family."""
    for table in ("counts", "raw_reports"):
        specs = [row[0] for row in c.execute(f"SELECT DISTINCT mechanism FROM {table}").fetchall()]
        for spec in specs:
            new = legacy_spec(spec)
            if new != spec:
                c.execute(f"UPDATE {table} SET mechanism = ? WHERE mechanism = ?", (new, spec))


def _columns(c, table: str) -> set[str]:
    if c.pg:
        rows = c.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                         "AND table_schema = current_schema()", (table,))
        return {r[0] for r in rows.fetchall()}
    return {r[1] for r in c.execute(f"PRAGMA table_info({table})").fetchall()}


def _devices_and_spending(c) -> None:
    """Schema 3: enrollment tokens, devices, spending per (device, collection, period), the device
    and charge of each batch, a collection's device group and its over-budget refusals. Written to
    be run again over a store that has them (tables and columns added only when missing)."""
    c.execute("""CREATE TABLE IF NOT EXISTS enrollments (
                     token_sha256 TEXT PRIMARY KEY,
                     collection TEXT NOT NULL,
                     created DOUBLE PRECISION NOT NULL,
                     n_devices BIGINT NOT NULL DEFAULT 0)""")
    c.execute("""CREATE TABLE IF NOT EXISTS devices (
                     device_id TEXT PRIMARY KEY,
                     grp TEXT NOT NULL,
                     token_sha256 TEXT NOT NULL UNIQUE,
                     collection TEXT NOT NULL,
                     created DOUBLE PRECISION NOT NULL)""")
    c.execute("CREATE INDEX IF NOT EXISTS devices_grp ON devices (grp)")
    c.execute("""CREATE TABLE IF NOT EXISTS spending (
                     device_id TEXT NOT NULL,
                     collection TEXT NOT NULL,
                     period_start BIGINT NOT NULL,
                     eps DOUBLE PRECISION NOT NULL,
                     reports BIGINT NOT NULL,
                     batches BIGINT NOT NULL,
                     PRIMARY KEY (device_id, collection, period_start))""")
    c.execute("CREATE INDEX IF NOT EXISTS spending_collection ON spending (collection, period_start)")
    have = _columns(c, "batches")
    if "device_id" not in have:
        c.execute("ALTER TABLE batches ADD COLUMN device_id TEXT")
    if "eps" not in have:
        c.execute("ALTER TABLE batches ADD COLUMN eps DOUBLE PRECISION NOT NULL DEFAULT 0")
    have = _columns(c, "collections")
    if "grp" not in have:
        c.execute("ALTER TABLE collections ADD COLUMN grp TEXT")
    if "n_over_budget" not in have:
        c.execute("ALTER TABLE collections ADD COLUMN n_over_budget BIGINT NOT NULL DEFAULT 0")


_PY_STEPS = {"legacy_hash_specs": _legacy_hash_specs, "devices_and_spending": _devices_and_spending}


class OverBudget(LocalPrivError):
    """A batch whose charge would take its device above a cap (nothing of it was stored)."""


@dataclass(frozen=True)
class Caps:
    """What a device's batch is charged and against which caps (:meth:`Store.ingest`).

    ``eps``: the batch's charge; ``period`` seconds and ``period_start`` (Unix time) of the window;
    ``cap`` per device in this collection and ``group_cap`` over the device's group (``None``: no
    cap); ``group`` names the device group (for the message)."""

    eps: float
    period: int
    period_start: int
    cap: float | None = None
    group_cap: float | None = None
    group: str | None = None


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _over(spent: float, cap: float | None) -> bool:
    return cap is not None and not spent <= cap * (1 + 1e-9)


@dataclass
class BatchResult:
    """What an ingest did: ``status`` is ``"accepted"`` or ``"duplicate"``."""

    status: str
    reports: int
    version: int


class _Conn:
    """A connection with ``?`` placeholders for both engines."""

    def __init__(self, raw, pg: bool):
        self.raw, self.pg = raw, pg

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.pg else sql

    def execute(self, sql: str, params=()):
        return self.raw.execute(self._sql(sql), params)

    def executemany(self, sql: str, rows) -> None:
        if self.pg:
            with self.raw.cursor() as cur:
                cur.executemany(self._sql(sql), rows)
        else:
            self.raw.executemany(sql, rows)


class Store:
    """Collections, batches and counts in SQLite or PostgreSQL (see the module docstring).

    Parameters
    ----------
    url : str
        ``postgresql://...`` (or ``postgres://``), ``sqlite:///PATH`` or a file path (SQLite).
    pool : int
        Connections kept open (requests use one each; SQLite serializes writers anyway).
    """

    def __init__(self, url: str, pool: int = 4):
        self.url = str(url)
        self.pg = bool(re.match(r"^postgres(ql)?://", self.url))
        if not self.pg:
            path = self.url[len("sqlite:///"):] if self.url.startswith("sqlite:///") else self.url
            if path.startswith("sqlite:") or "://" in path:
                raise LocalPrivError(f"database {self.url!r}: give postgresql://..., sqlite:///PATH or a file path")
            self.path = Path(path)
            if not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
        self._pool: queue.LifoQueue = queue.LifoQueue()
        self._size = max(1, int(pool))
        self._made = 0
        self._lock = threading.Lock()
        self.migrate()

    # ---- connections ------------------------------------------------------------------------
    def _connect(self):
        if self.pg:
            import psycopg
            try:
                pg_raw = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            except psycopg.Error as exc:
                raise LocalPrivError(f"cannot connect to PostgreSQL: {_line(exc)}") from None
            return _Conn(pg_raw, True)
        try:
            raw = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False, timeout=30)
            raw.execute("PRAGMA journal_mode=WAL")
            raw.execute("PRAGMA synchronous=FULL")  # every commit is on disk before it returns
            raw.execute("PRAGMA busy_timeout=30000")
        except sqlite3.Error as exc:
            raise LocalPrivError(f"cannot open SQLite database {self.path}: {_line(exc)}") from None
        return _Conn(raw, False)

    @contextmanager
    def _conn(self) -> Iterator[_Conn]:
        try:
            conn = self._pool.get_nowait()
        except queue.Empty:
            with self._lock:
                grow = self._made < self._size
                if grow:
                    self._made += 1
            if grow:
                try:
                    conn = self._connect()
                except BaseException:
                    with self._lock:
                        self._made -= 1
                    raise
            else:
                conn = self._pool.get(timeout=60)
        healthy = True
        try:
            yield conn
        except BaseException as exc:
            healthy = not _is_connection_error(exc)
            raise
        finally:
            if healthy:
                self._pool.put(conn)
            else:
                with self._lock:
                    self._made -= 1
                with contextlib.suppress(Exception):  # a broken connection
                    conn.raw.close()

    @contextmanager
    def transaction(self, write: bool = False) -> Iterator[_Conn]:
        """One transaction: committed on success, rolled back on any error. Reads see one
        snapshot (SQLite WAL read transaction; PostgreSQL REPEATABLE READ)."""
        with self._conn() as conn:
            if conn.pg:
                conn.raw.execute("BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            else:
                conn.raw.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                with contextlib.suppress(Exception):  # the original error is the one to report
                    conn.raw.execute("ROLLBACK")
                raise
            conn.raw.execute("COMMIT")

    def close(self) -> None:
        while True:
            try:
                conn = self._pool.get_nowait()
            except queue.Empty:
                break
            with contextlib.suppress(Exception):
                conn.raw.close()
        self._made = 0

    # ---- migrations -------------------------------------------------------------------------
    def migrate(self) -> int:
        """Bring the schema to :data:`SCHEMA_VERSION`; returns the version found before."""
        with self.transaction(write=True) as c:
            if self.pg:
                c.execute("SELECT pg_advisory_xact_lock(2323)")
            c.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = c.execute("SELECT MAX(version) FROM schema_version").fetchone()
            found = int(row[0]) if row and row[0] is not None else 0
            if found > SCHEMA_VERSION:
                raise LocalPrivError(f"the database has schema version {found}, newer than this localpriv "
                                     f"({SCHEMA_VERSION}): upgrade localpriv")
            for version, statements in MIGRATIONS:
                if version > found:
                    for sql in statements:
                        if sql in _PY_STEPS:
                            _PY_STEPS[sql](c)
                        else:
                            c.execute(sql)
                    c.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
        return found

    def schema_version(self) -> int:
        with self.transaction() as c:
            return int(c.execute("SELECT MAX(version) FROM schema_version").fetchone()[0])

    # ---- collections ------------------------------------------------------------------------
    def create_collection(self, name: str, domain: str, policy: str, ingest_sha: str, analyst_sha: str,
                          keep_raw: bool, group: str | None = None) -> None:
        with self.transaction(write=True) as c:
            if c.execute("SELECT 1 FROM collections WHERE name = ?", (name,)).fetchone():
                raise KeyError(name)
            c.execute("INSERT INTO collections (name, domain, policy, ingest_token_sha256, analyst_token_sha256, "
                      "keep_raw, created, grp) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      (name, domain, policy, ingest_sha, analyst_sha, int(bool(keep_raw)), time.time(), group))

    def group_policies(self, group: str) -> list[tuple[str, str]]:
        """``[(collection, policy JSON)]`` of the collections of a device group."""
        with self.transaction() as c:
            rows = c.execute("SELECT name, policy FROM collections WHERE grp = ? ORDER BY name", (group,)).fetchall()
        return [(str(a), str(b)) for a, b in rows]

    _COLUMNS = ("name", "domain", "policy", "ingest_token_sha256", "analyst_token_sha256", "keep_raw", "created",
                "version", "n_reports", "n_batches", "n_duplicates", "n_refused_batches", "n_refused_reports",
                "last_ingest", "grp", "n_over_budget")

    def collection(self, name: str) -> dict | None:
        with self.transaction() as c:
            row = c.execute(f"SELECT {', '.join(self._COLUMNS)} FROM collections WHERE name = ?", (name,)).fetchone()
        return None if row is None else dict(zip(self._COLUMNS, row))

    def collections(self) -> list[dict]:
        with self.transaction() as c:
            rows = c.execute(f"SELECT {', '.join(self._COLUMNS)} FROM collections ORDER BY name").fetchall()
        return [dict(zip(self._COLUMNS, r)) for r in rows]

    # ---- ingest -----------------------------------------------------------------------------
    def ingest(self, name: str, batch_id: str, digest: str, n: int, counts: list[tuple[str, str, int]],
               raw: list[tuple[int, str, str]] | None = None, device_id: str | None = None,
               caps: Caps | None = None) -> BatchResult:
        """Record batch ``batch_id`` and add its ``counts`` ``[(mechanism, report, count)]`` in one
        transaction; a batch id seen before changes nothing (``status="duplicate"``). A batch id
        seen before with another content (``digest``) or from another device raises :class:`ValueError`.

        With ``device_id`` and ``caps``, the same transaction charges the batch to the device
        (basic composition: ``caps.eps`` added to its spending in this collection and period) after
        checking that neither its spending here nor its spending summed over its group's
        collections would pass ``caps.cap`` or ``caps.group_cap``; past a cap it raises
        :class:`OverBudget` and stores nothing."""
        with self.transaction(write=True) as c:
            if device_id is not None and c.pg:  # serialize a device's charges (SQLite: one writer anyway)
                c.execute("SELECT device_id FROM devices WHERE device_id = ? FOR UPDATE", (device_id,))
            charge = float(caps.eps) if device_id is not None and caps is not None else 0.0
            # the batch id first: a new one is inserted (rolled back with the rest on any refusal
            # below), a known one changes nothing (one statement for a new batch, not a read and a write)
            new = c.execute("INSERT INTO batches (collection, batch_id, n_reports, digest, received, device_id, eps) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (collection, batch_id) DO NOTHING",
                            (name, batch_id, int(n), digest, time.time(), device_id, charge)).rowcount
            if new != 1:
                prev = c.execute("SELECT n_reports, digest, device_id FROM batches WHERE collection = ? AND "
                                 "batch_id = ?", (name, batch_id)).fetchone()
                if prev[1] != digest or prev[2] != device_id:  # another batch, or another sender's
                    raise ValueError(batch_id)
                c.execute("UPDATE collections SET n_duplicates = n_duplicates + 1 WHERE name = ?", (name,))
                v = c.execute("SELECT version FROM collections WHERE name = ?", (name,)).fetchone()[0]
                return BatchResult("duplicate", int(prev[0]), int(v))
            if device_id is not None and caps is not None:
                here = c.execute("SELECT eps FROM spending WHERE device_id = ? AND collection = ? AND period_start = ?",
                                 (device_id, name, caps.period_start)).fetchone()
                spent = float(here[0]) if here else 0.0
                if _over(spent + charge, caps.cap):
                    raise OverBudget(f"over budget: this batch's level {charge:.6g} would take the device to "
                                     f"{spent + charge:.6g} in collection {name}, above its budget eps={caps.cap:g} "
                                     f"per {caps.period:g} s (this window ends "
                                     f"{_utc(caps.period_start + caps.period)})")
                if caps.group_cap is not None:
                    total = c.execute("SELECT SUM(eps) FROM spending WHERE device_id = ? AND period_start = ?",
                                      (device_id, caps.period_start)).fetchone()[0]
                    total = float(total or 0.0)
                    if _over(total + charge, caps.group_cap):
                        raise OverBudget(f"over budget: this batch's level {charge:.6g} would take the device to "
                                         f"{total + charge:.6g} over device group {caps.group}, above its budget "
                                         f"group_eps={caps.group_cap:g} per {caps.period:g} s (this window ends "
                                         f"{_utc(caps.period_start + caps.period)})")
                c.execute("INSERT INTO spending (device_id, collection, period_start, eps, reports, batches) "
                          "VALUES (?, ?, ?, ?, ?, 1) ON CONFLICT (device_id, collection, period_start) DO UPDATE "
                          "SET eps = spending.eps + excluded.eps, reports = spending.reports + excluded.reports, "
                          "batches = spending.batches + 1", (device_id, name, caps.period_start, charge, int(n)))
            c.executemany("INSERT INTO counts (collection, mechanism, report, count) VALUES (?, ?, ?, ?) "
                          "ON CONFLICT (collection, mechanism, report) DO UPDATE SET count = counts.count + "
                          "excluded.count", [(name, m, r, int(k)) for m, r, k in counts])
            if raw:
                c.executemany("INSERT INTO raw_reports (collection, batch_id, seq, mechanism, report) "
                              "VALUES (?, ?, ?, ?, ?)", [(name, batch_id, s, m, r) for s, m, r in raw])
            bump = ("UPDATE collections SET version = version + 1, n_reports = n_reports + ?, n_batches = n_batches "
                    "+ 1, last_ingest = ? WHERE name = ?")
            if c.pg or RETURNING:  # the new version from the update itself
                v = c.execute(bump + " RETURNING version", (int(n), time.time(), name)).fetchall()[0][0]
            else:
                c.execute(bump, (int(n), time.time(), name))
                v = c.execute("SELECT version FROM collections WHERE name = ?", (name,)).fetchone()[0]
        return BatchResult("accepted", int(n), int(v))

    def refused(self, name: str, n_reports: int, over_budget: bool = False) -> None:
        """Count a refused batch of ``n_reports`` reports (ingest statistics); ``over_budget``: it
        was refused for its device's budget."""
        with self.transaction(write=True) as c:
            c.execute("UPDATE collections SET n_refused_batches = n_refused_batches + 1, "
                      "n_refused_reports = n_refused_reports + ?, n_over_budget = n_over_budget + ? WHERE name = ?",
                      (int(n_reports), int(bool(over_budget)), name))

    # ---- devices ------------------------------------------------------------------------------
    def add_enrollment(self, name: str, token_sha: str) -> None:
        """Store an enrollment token (its hash) of collection ``name``."""
        with self.transaction(write=True) as c:
            c.execute("INSERT INTO enrollments (token_sha256, collection, created) VALUES (?, ?, ?)",
                      (token_sha, name, time.time()))

    def enrollment(self, token_sha: str) -> str | None:
        """The collection of an enrollment token's hash, or ``None``."""
        with self.transaction() as c:
            row = c.execute("SELECT collection FROM enrollments WHERE token_sha256 = ?", (token_sha,)).fetchone()
        return None if row is None else str(row[0])

    def register_device(self, name: str, enrollment_sha: str, group: str, device_id: str, token_sha: str,
                        max_devices: int = MAX_DEVICES) -> int:
        """Register a device of ``group`` through an enrollment token of ``name``; returns the
        group's number of devices. Past ``max_devices`` a one-line :class:`LocalPrivError`."""
        with self.transaction(write=True) as c:
            if c.pg:
                c.execute("SELECT pg_advisory_xact_lock(2324)")
            had = int(c.execute("SELECT COUNT(*) FROM devices WHERE grp = ?", (group,)).fetchone()[0])
            if had >= max_devices:
                raise LocalPrivError(f"device group {group} has {had:,} devices: at most {max_devices:,}")
            c.execute("INSERT INTO devices (device_id, grp, token_sha256, collection, created) VALUES (?, ?, ?, ?, ?)",
                      (device_id, group, token_sha, name, time.time()))
            c.execute("UPDATE enrollments SET n_devices = n_devices + 1 WHERE token_sha256 = ?", (enrollment_sha,))
        return had + 1

    def device(self, token_sha: str) -> tuple[str, str] | None:
        """``(device_id, group)`` of a device token's hash, or ``None``."""
        with self.transaction() as c:
            row = c.execute("SELECT device_id, grp FROM devices WHERE token_sha256 = ?", (token_sha,)).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    def ledger(self, name: str, group: str, period_start: int | None) -> dict:
        """One snapshot of a collection's ledger: ``devices`` registered in its group, per device
        spending in this collection (``lifetime``, and ``period`` in the window starting at
        ``period_start``, as float arrays of reporting devices), the batches and reports charged to no
        device (``unattributed``) and ``mechanisms`` ``[(spec, reports)]`` of the stored counts."""
        with self.transaction() as c:
            n_dev = int(c.execute("SELECT COUNT(*) FROM devices WHERE grp = ?", (group,)).fetchone()[0])
            life = c.execute("SELECT SUM(eps) FROM spending WHERE collection = ? GROUP BY device_id",
                             (name,)).fetchall()
            now = [] if period_start is None else c.execute(
                "SELECT eps FROM spending WHERE collection = ? AND period_start = ?", (name, period_start)).fetchall()
            un = c.execute("SELECT COUNT(*), COALESCE(SUM(n_reports), 0) FROM batches WHERE collection = ? AND "
                           "device_id IS NULL", (name,)).fetchone()
            mechs = c.execute("SELECT mechanism, SUM(count) FROM counts WHERE collection = ? GROUP BY mechanism "
                              "ORDER BY mechanism", (name,)).fetchall()
        return {"devices": n_dev,
                "lifetime": np.array([float(r[0]) for r in life], dtype=np.float64),
                "period": np.array([float(r[0]) for r in now], dtype=np.float64),
                "unattributed": (int(un[0]), int(un[1])),
                "mechanisms": [(str(m), int(k)) for m, k in mechs]}

    def counts(self, name: str) -> tuple[int, list[tuple[str, str, int]]]:
        """``(version, [(mechanism, report text, count)])`` of one snapshot, sorted."""
        with self.transaction() as c:
            row = c.execute("SELECT version FROM collections WHERE name = ?", (name,)).fetchone()
            rows = c.execute("SELECT mechanism, report, count FROM counts WHERE collection = ? AND count > 0 "
                             "ORDER BY mechanism, report", (name,)).fetchall()
        return (0 if row is None else int(row[0])), [(m, r, int(k)) for m, r, k in rows]

    def raw_count(self, name: str) -> int:
        with self.transaction() as c:
            return int(c.execute("SELECT COUNT(*) FROM raw_reports WHERE collection = ?", (name,)).fetchone()[0])


def open_store(url: str, pool: int = 4) -> Store:
    """A :class:`Store` for ``url`` (see :class:`Store`), migrated to the current schema."""
    try:
        return Store(url, pool)
    except LocalPrivError:
        raise
    except (sqlite3.Error, OSError) as exc:
        raise LocalPrivError(f"cannot open the database {url}: {_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - psycopg errors, without importing psycopg here
        if type(exc).__module__.startswith("psycopg"):
            raise LocalPrivError(f"cannot open the database: {_line(exc)}") from None
        raise


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _is_connection_error(exc: BaseException) -> bool:
    name = type(exc).__name__
    return name in ("OperationalError", "InterfaceError") and type(exc).__module__.startswith("psycopg")
