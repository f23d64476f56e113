"""Mixed load test of the collector: ingest clients and polling analysts for a fixed time, the server
killed with SIGKILL and restarted on the same database, and a one-process SQLite floor of the same
batches. Loopback only, bounded in count and time, stops by itself.

Phases, one run:

1. **Ingest only** (no analysts, no kill): ``--clients`` clients post ``--warm-batches`` batches each
   of ``--size`` k-RR reports (k = 100, reports drawn with seed 0 before the clock starts). The
   server's own CPU time (user + system of its process, ``/proc/PID/stat``) over this phase divided
   by the reports it acknowledged is the **server's CPU per report**.
2. **Mixed** for ``--seconds``: the same clients keep posting; ``--analysts`` analysts ask for the
   default estimate (``GET /v1/collections/NAME/estimate``) and follow its job URL when the answer is
   202, one request every ``--poll`` seconds each. The server is killed with SIGKILL ``--kills`` times
   at even intervals and started again on the same database; clients retry an unacknowledged batch
   with the same id, analysts ask again. The resident memory of the server's process tree (the server
   and its estimate jobs) is sampled every 0.25 s.
3. **Check**: the stored counts (``GET .../counts``) equal the sum of every acknowledged batch exactly
   once (``lost = 0``, ``double_counted = 0``).
4. **Floor**, in this process, on the batches of phase 1 (the same reports): a SQLite database in WAL
   mode with ``synchronous=FULL``, one transaction per batch that upserts the batch's distinct
   (mechanism, report, count) rows (``INSERT ... ON CONFLICT DO UPDATE``, ``executemany``); CPU time
   (``time.process_time``) per report. Two floors: the upsert of counts computed beforehand, and the
   same with the batch's JSON decoded and counted (``json.loads``, ``numpy.unique``) inside the clock.

JSON to ``--out`` (atomically), and with ``--docs`` the block between the ``service-mixed`` markers
of ``docs/service.md`` rewritten from it (``--docs-only``: from the JSON already written).

    python benchmarks/service_mixed.py --out benchmarks/results-service-mixed.json --docs   # 5 minutes
    python benchmarks/service_mixed.py --seconds 30 --clients 2 --out /tmp/smoke.json        # smoke

Never run by the tests (``tests/test_service.py`` runs the SIGKILL scenario without timing).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine, now, write_json  # noqa: E402

import localpriv as lp  # noqa: E402
from localpriv.service import free_port, launch  # noqa: E402

ADMIN = "benchmark-admin-token-0123456789"
SPEC = "krr(k=100,eps=2.0)"
K = 100
#: distinct report arrays per client; batch j of a client carries array j % POOL under its own id
POOL = 32
HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "service.md"
BLOCK = re.compile(r"(<!-- service-mixed -->\n)(?:.*?\n)?(<!-- /service-mixed -->)", re.S)
LIMITS = {"clients": (1, 64), "analysts": (0, 16), "seconds": (1, 3600), "kills": (0, 10), "size": (1, 100_000),
          "warm_batches": (1, 10_000), "max_batches": (1, 1_000_000)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` itself (not its children)."""
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (``/proc``)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                f = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(d)] = int(f[1])
        rss[int(d)] = int(f[21]) * page
    mine, grew = {pid}, True
    while grew:
        more = {p for p, pp in parents.items() if pp in mine} - mine
        grew = bool(more)
        mine |= more
    return sum(rss.get(p, 0) for p in mine)


def pct(xs: list[float], q: float) -> float | None:
    return None if not xs else round(1e3 * float(np.percentile(xs, q)), 2)


class Server:
    """The server process, its incarnations' CPU time after start-up, and restarts."""

    def __init__(self, db: str, port: int, log: Path):
        self.db, self.port, self.log = db, port, log
        self.cpu_done = 0.0  # CPU seconds of killed incarnations since they answered
        self.proc = self._start()

    def _start(self):
        proc = launch(self.db, self.port, self.log, ADMIN)
        self.cpu0 = cpu_seconds(proc.pid)
        return proc

    def cpu(self) -> float:
        """CPU seconds of the server's processes since each answered its first request."""
        return self.cpu_done + cpu_seconds(self.proc.pid) - self.cpu0

    def kill_and_restart(self) -> float:
        t = time.perf_counter()
        self.cpu_done += cpu_seconds(self.proc.pid) - self.cpu0
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = self._start()
        return time.perf_counter() - t

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def floors(reports: np.ndarray, bodies: list[bytes], tmp: str) -> dict:
    """CPU microseconds per report of the one-process SQLite upsert of ``reports`` (batches x size)."""
    out = {}
    counted = [np.unique(r, return_counts=True) for r in reports]
    rows = [[(SPEC, str(u), int(c)) for u, c in zip(us.tolist(), cs.tolist())] for us, cs in counted]
    for kind in ("upsert", "decode_count_upsert"):
        path = os.path.join(tmp, f"floor-{kind}.sqlite")
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        con.execute("CREATE TABLE counts (collection TEXT NOT NULL, mechanism TEXT NOT NULL, report TEXT NOT NULL, "
                    "count BIGINT NOT NULL, PRIMARY KEY (collection, mechanism, report))")
        sql = ("INSERT INTO counts (collection, mechanism, report, count) VALUES ('bench', ?, ?, ?) ON CONFLICT "
               "(collection, mechanism, report) DO UPDATE SET count = counts.count + excluded.count")
        t = time.process_time()
        for i in range(len(bodies)):
            if kind == "upsert":
                batch = rows[i]
            else:
                data = json.loads(bodies[i])
                us, cs = np.unique(np.asarray(data["groups"][0]["reports"], np.int64), return_counts=True)
                batch = [(data["groups"][0]["mechanism"], str(u), int(c)) for u, c in zip(us.tolist(), cs.tolist())]
            con.execute("BEGIN IMMEDIATE")
            con.executemany(sql, batch)
            con.execute("COMMIT")
        out[kind] = (time.process_time() - t) / reports.size * 1e6
        stored = con.execute("SELECT SUM(count) FROM counts").fetchone()[0]
        con.close()
        if stored != reports.size:
            raise SystemExit(f"floor {kind}: stored {stored} reports, expected {reports.size}")
    return {"floor_upsert_cpu_us_per_report": round(out["upsert"], 3),
            "floor_decode_count_upsert_cpu_us_per_report": round(out["decode_count_upsert"], 3),
            "floor_batches": len(bodies), "floor_reports": int(reports.size)}


def run(clients: int = 8, analysts: int = 2, seconds: float = 300.0, kills: int = 2, size: int = 1000,
        warm_batches: int = 50, max_batches: int = 100_000, poll: float = 1.0) -> dict:
    import httpx
    tmp = tempfile.TemporaryDirectory(prefix="localpriv-bench-mixed-")
    db, port = os.path.join(tmp.name, "collector.sqlite"), free_port()
    url = f"http://127.0.0.1:{port}"
    rng = np.random.default_rng(0)
    pool = rng.integers(0, K, size=(clients, POOL, size))  # k-RR reports: any index is an output
    pool_json = [[json.dumps(pool[i, p].tolist(), separators=(",", ":")).encode() for p in range(POOL)]
                 for i in range(clients)]
    pool_counts = np.stack([[np.bincount(pool[i, p], minlength=K) for p in range(POOL)] for i in range(clients)])

    def body(i: int, j: int) -> bytes:
        return (b'{"batch_id":"c%d-b%d","groups":[{"mechanism":"' % (i, j) + SPEC.encode() + b'","reports":'
                + pool_json[i][j % POOL] + b"}]}")

    server = Server(db, port, Path(tmp.name) / "server.log")
    try:
        info = httpx.post(f"{url}/v1/collections", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30,
                          json={"name": "bench", "domain": f"0..{K - 1}",
                                "policy": {"mechanisms": ["krr"], "max_eps": 2}}).json()
        ingest_hdr = {"Authorization": f"Bearer {info['ingest_token']}", "Content-Type": "application/json"}
        analyst_hdr = {"Authorization": f"Bearer {info['analyst_token']}"}
        sent = np.zeros((clients, K), np.int64)
        acked = np.zeros(clients, np.int64)
        ingest_lat: list[tuple[float, float]] = []
        est_lat: list[tuple[float, float]] = []
        est_failures: list[str] = []  # the first few estimates that ended without a result
        get_lat: list[float] = []  # every analyst request (estimate or job URL), whatever its status
        est_status = {"200": 0, "202_then_done": 0, "failed": 0}
        errors: list[str] = []
        stop, mixed = threading.Event(), threading.Event()
        lock = threading.Lock()
        deadline = [time.perf_counter() + 3600.0]

        def post(c, i: int, j: int) -> None:
            data, t, wait = body(i, j), time.perf_counter(), 0.02
            while True:
                try:
                    r = c.post(f"{url}/v1/collections/bench/batches", content=data, headers=ingest_hdr)
                    if r.status_code == 200:
                        break
                    if r.status_code not in (429, 500, 502, 503, 504):
                        raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
                except httpx.TransportError:
                    pass
                if time.perf_counter() > deadline[0] + 60:
                    raise RuntimeError(f"batch c{i}-b{j} not acknowledged within 60 s after the end")
                time.sleep(wait)
                wait = min(0.25, wait * 2)
            with lock:
                ingest_lat.append((t, time.perf_counter()))
                sent[i] += pool_counts[i, j % POOL]
                acked[i] += 1

        def client(i: int, first: int, last: int) -> None:
            try:
                with httpx.Client(timeout=60) as c:
                    for j in range(first, last):
                        if stop.is_set() or time.perf_counter() > deadline[0]:
                            return
                        post(c, i, j)
            except Exception as exc:  # noqa: BLE001 - reported in the JSON
                errors.append(f"client {i}: {type(exc).__name__}: {str(exc)[:200]}")

        def get(c, where: str):
            t = time.perf_counter()
            r = c.get(where, headers=analyst_hdr)
            with lock:
                get_lat.append(time.perf_counter() - t)
            return r

        def analyst(a: int) -> None:
            try:
                with httpx.Client(timeout=60) as c:
                    while not stop.is_set() and time.perf_counter() < deadline[0]:
                        t = time.perf_counter()
                        try:
                            r = get(c, f"{url}/v1/collections/bench/estimate")
                            kind = "200"
                            while r.status_code == 202 and time.perf_counter() < deadline[0] + 30:
                                kind = "202_then_done"
                                time.sleep(min(poll, 0.25))
                                r = get(c, url + r.headers["Location"])
                            if r.status_code == 200 and r.json().get("status", "done") == "done":
                                with lock:
                                    est_lat.append((t, time.perf_counter()))
                                    est_status[kind] += 1
                            elif r.status_code not in (404, 503):  # a job forgotten by a restarted server
                                with lock:
                                    est_status["failed"] += 1
                                    if len(est_failures) < 5:
                                        est_failures.append(f"HTTP {r.status_code}: {r.text[:200]}")
                        except httpx.TransportError:
                            pass
                        time.sleep(poll)
            except Exception as exc:  # noqa: BLE001 - reported in the JSON
                errors.append(f"analyst {a}: {type(exc).__name__}: {str(exc)[:200]}")

        # phase 1: ingest only
        warm = [threading.Thread(target=client, args=(i, 0, warm_batches), daemon=True) for i in range(clients)]
        c0, t0 = server.cpu(), time.perf_counter()
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        warm_cpu, warm_wall = server.cpu() - c0, time.perf_counter() - t0
        warm_reports = int(acked.sum()) * size
        # phase 2: mixed, for `seconds`, with kills at even intervals
        n_warm = len(ingest_lat)
        rss_peak, rss_samples = [0], [0]

        def sampler() -> None:
            while not stop.is_set():
                with contextlib.suppress(Exception):
                    rss_peak[0] = max(rss_peak[0], tree_rss(server.proc.pid))
                    rss_samples[0] += 1
                time.sleep(0.25)

        mixed.set()
        t1 = time.perf_counter()
        deadline[0] = t1 + seconds
        threads = ([threading.Thread(target=client, args=(i, warm_batches, warm_batches + max_batches), daemon=True)
                    for i in range(clients)]
                   + [threading.Thread(target=analyst, args=(a,), daemon=True) for a in range(analysts)]
                   + [threading.Thread(target=sampler, daemon=True)])
        c1, acked1 = server.cpu(), int(acked.sum())
        for t in threads:
            t.start()
        windows, downtimes = [], []
        for k in range(kills):
            at = t1 + seconds * (k + 1) / (kills + 1)
            while time.perf_counter() < at and not stop.is_set():
                time.sleep(0.05)
            if time.perf_counter() >= deadline[0]:  # a slow restart used the time up: no more kills
                break
            k0 = time.perf_counter()
            downtimes.append(server.kill_and_restart())
            windows.append((k0, time.perf_counter()))
        while time.perf_counter() < deadline[0]:
            time.sleep(0.05)
        for t in threads[:clients + analysts]:
            t.join(120)
        stop.set()
        mixed_wall = time.perf_counter() - t1
        mixed_cpu = server.cpu() - c1
        mixed_reports = (int(acked.sum()) - acked1) * size
        # phase 3: the check
        path = Path(tmp.name) / "counts.csv"
        path.write_bytes(httpx.get(f"{url}/v1/collections/bench/counts", headers=analyst_hdr, timeout=60).content)
        stored = lp.aggregate(str(path), lp.IntegerDomain(0, K - 1)).blocks[0].count_vector().astype(np.int64)
        stats = httpx.get(f"{url}/v1/collections/bench", headers=analyst_hdr, timeout=30).json()["ingest"]
        diff = stored - sent.sum(axis=0)
        # phase 4: the floor on phase 1's batches
        first = [(i, j) for i in range(clients) for j in range(warm_batches)]
        floor = floors(np.stack([pool[i, j % POOL] for i, j in first]), [body(i, j) for i, j in first], tmp.name)
        spans = np.asarray(ingest_lat[n_warm:] or [(0.0, 0.0)])
        lat_all = list(spans[:, 1] - spans[:, 0])
        outside = [b - a for a, b in spans if not any(a < w1 and b > w0 for w0, w1 in windows)]
        warm_spans = np.asarray(ingest_lat[:n_warm] or [(0.0, 0.0)])
        est = [b - a for a, b in est_lat]
        server_us = warm_cpu / max(warm_reports, 1) * 1e6
        return {
            "clients": clients, "analysts": analysts, "seconds": seconds, "kills": kills, "reports_per_batch": size,
            "mechanism": SPEC, "warm_batches_per_client": warm_batches, "analyst_poll_s": poll,
            "ingest_only": {"reports": warm_reports, "wall_s": round(warm_wall, 3),
                            "reports_per_s": round(warm_reports / warm_wall),
                            "server_cpu_s": round(warm_cpu, 3),
                            "server_cpu_us_per_report": round(server_us, 3),
                            "latency_ms": {"p50": pct(list(warm_spans[:, 1] - warm_spans[:, 0]), 50),
                                           "p99": pct(list(warm_spans[:, 1] - warm_spans[:, 0]), 99)}},
            "floor": floor,
            "ratio_server_to_floor_upsert": round(server_us / floor["floor_upsert_cpu_us_per_report"], 2),
            "ratio_server_to_floor_decode_count_upsert":
                round(server_us / floor["floor_decode_count_upsert_cpu_us_per_report"], 2),
            "mixed": {"wall_s": round(mixed_wall, 3), "acknowledged_reports": mixed_reports,
                      "ingest_reports_per_s": round(mixed_reports / mixed_wall),
                      "server_cpu_s": round(mixed_cpu, 3),
                      "server_cpu_us_per_report": round(mixed_cpu / max(mixed_reports, 1) * 1e6, 3),
                      "ingest_latency_ms": {"p50": pct(lat_all, 50), "p99": pct(lat_all, 99),
                                            "max": pct(lat_all, 100), "requests": len(lat_all)},
                      "ingest_latency_ms_outside_restarts": {"p50": pct(outside, 50), "p99": pct(outside, 99),
                                                             "requests": len(outside)},
                      "estimate_latency_ms": {"p50": pct(est, 50), "p99": pct(est, 99), "max": pct(est, 100),
                                              "answers": len(est)},
                      "analyst_request_latency_ms": {"p50": pct(get_lat, 50), "p99": pct(get_lat, 99),
                                                     "requests": len(get_lat)},
                      "estimate_answers": est_status, "estimate_failures": est_failures,
                      "kills_done": len(downtimes), "restart_downtime_s": [round(x, 3) for x in downtimes],
                      "peak_server_tree_rss_mib": round(rss_peak[0] / 2**20, 1), "rss_samples": rss_samples[0]},
            "acknowledged_batches": int(acked.sum()), "acknowledged_reports": int(acked.sum()) * size,
            "server_counted_reports": stats["reports"], "server_batches": stats["batches"],
            "duplicate_batches_seen": stats["duplicate_batches"],
            "lost_reports": int(np.clip(-diff, 0, None).sum()),
            "double_counted_reports": int(np.clip(diff, 0, None).sum()),
            "errors": errors,
        }
    finally:
        server.stop()
        tmp.cleanup()


def _n(x, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    x = float(x)
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.{digits}g}"


def docs_block(doc: dict) -> str:
    """The Markdown of ``docs/service.md``'s ``service-mixed`` block, from the JSON ``doc``."""
    r, m = doc["result"], doc["result"]["mixed"]
    f, w = r["floor"], r["ingest_only"]
    load = ", ".join(f"{x:.2f}" for x in doc.get("load_before") or [])
    quiet = "" if not doc.get("smoke") else (
        " **Smoke run on a loaded machine**: the numbers show that the script works, not what the server "
        "does on a quiet machine; `make bench-service-mixed` runs the full test.")
    return "\n".join([
        f"Run of {doc['started']} ({r['clients']} ingest clients, {r['analysts']} analysts, "
        f"{_n(r['seconds'])} s, SIGKILL {m.get('kills_done', r['kills'])} of {r['kills']} times (a kill is skipped "
        "when restarts have used the time up), batches of "
        f"{_n(r['reports_per_batch'])} k-RR reports; "
        f"{doc['machine'].get('cpu', 'machine')}, {doc['machine'].get('cores', '?')} cores, load average before "
        f"{load}).{quiet}",
        "",
        "| measure | value |",
        "|---|---|",
        f"| ingest, mixed phase (restarts included) | {_n(m['ingest_reports_per_s'])} reports/s |",
        f"| ingest latency p50 / p99 (outside restarts) | {_n(m['ingest_latency_ms_outside_restarts']['p50'])} / "
        f"{_n(m['ingest_latency_ms_outside_restarts']['p99'])} ms |",
        f"| estimate latency p50 / p99 ({m['estimate_latency_ms']['answers']} answers) | "
        f"{_n(m['estimate_latency_ms']['p50'])} / {_n(m['estimate_latency_ms']['p99'])} ms |",
        f"| analyst request latency p50 / p99 (estimate or job URL, any status) | "
        f"{_n(m['analyst_request_latency_ms']['p50'])} / {_n(m['analyst_request_latency_ms']['p99'])} ms |",
        f"| restart downtime | {', '.join(_n(x) for x in m['restart_downtime_s']) or 'n/a'} s |",
        f"| peak RSS of the server's process tree | {_n(m['peak_server_tree_rss_mib'])} MiB |",
        f"| lost / double-counted reports | {r['lost_reports']} / {r['double_counted_reports']} |",
        f"| server CPU per report, ingest only | {_n(w['server_cpu_us_per_report'])} us |",
        f"| floor: SQLite upsert of the counts, one process | {_n(f['floor_upsert_cpu_us_per_report'])} us |",
        f"| floor with the JSON decoded and counted | {_n(f['floor_decode_count_upsert_cpu_us_per_report'])} us |",
        f"| server / floor | {_n(r['ratio_server_to_floor_upsert'])}x "
        f"({_n(r['ratio_server_to_floor_decode_count_upsert'])}x against the decoding floor) |",
    ])


def write_docs(doc: dict, path: Path = DOC) -> None:
    text = path.read_text()
    new, n = BLOCK.subn(lambda mt: mt.group(1) + docs_block(doc) + "\n" + mt.group(2), text)
    if n != 1:
        raise SystemExit(f"{path}: no <!-- service-mixed --> block")
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(new)
    tmp.replace(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--analysts", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--warm-batches", type=int, default=50, help="batches per client of the ingest-only phase")
    ap.add_argument("--max-batches", type=int, default=100_000, help="batches per client of the mixed phase, at most")
    ap.add_argument("--poll", type=float, default=1.0, help="seconds between an analyst's requests")
    ap.add_argument("--smoke", action="store_true", help="mark the JSON and docs as a smoke run")
    ap.add_argument("--out", default=None, help="write the JSON here (atomically)")
    ap.add_argument("--docs", action="store_true", help="rewrite docs/service.md's block from the JSON")
    ap.add_argument("--docs-only", action="store_true", help="only rewrite the docs block from --out")
    a = ap.parse_args()
    if a.docs_only:
        write_docs(json.loads(Path(a.out or HERE / "results-service-mixed.json").read_text()))
        return
    for key, (lo, hi) in LIMITS.items():
        if not lo <= getattr(a, key) <= hi:
            raise SystemExit(f"--{key.replace('_', '-')} must be within {lo}-{hi:,}")
    started, load_before = now(), [round(x, 2) for x in os.getloadavg()]
    result = run(a.clients, a.analysts, a.seconds, a.kills, a.size, a.warm_batches, a.max_batches, a.poll)
    doc = {"benchmark": "service-mixed", "machine": machine(), "started": started, "load_before": load_before,
           "finished": now(), "load_after": [round(x, 2) for x in os.getloadavg()], "smoke": bool(a.smoke),
           "result": result}
    text = write_json(a.out, doc)
    if a.out and a.docs:
        write_docs(doc)
    print(text)


if __name__ == "__main__":
    main()
