"""Load test of the collector service, on loopback only, bounded in count and time.

Starts ``localpriv serve`` (SQLite by default; ``--backend postgresql`` starts a PostgreSQL server
of the pinned ``pgserver`` package in a temporary folder), creates a collection and runs
``--clients`` concurrent clients, each posting ``--batches`` batches of ``--size`` k-RR reports
(k = 100; reports drawn before the clock starts, seed 0). When half of all batches are
acknowledged the server is killed with SIGKILL and started again on the same database; clients
retry their unacknowledged batch with the same id. Every run is bounded: at most
``clients * batches * size`` reports and ``--max-seconds`` of wall time.

Prints one JSON document: the sustained ingest rate (acknowledged reports per second, before the
kill and over the whole run, restart included), latency percentiles of acknowledged requests
(p50, p99; a request that needed retries counts from its first attempt), the restart's downtime,
the machine's load average, and the correctness check: the stored counts equal the counts of
every batch exactly once (``lost = 0``, ``double_counted = 0``). Never run by the tests (the test
suite runs the same SIGKILL scenario without timing, ``tests/test_service.py``).

    python benchmarks/service.py                       # SQLite, 4 clients x 50 batches x 1,000
    python benchmarks/service.py --backend postgresql
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from localpriv.service import free_port

ADMIN = "benchmark-admin-token-0123456789"
SPEC = "krr(k=100,eps=2.0)"


def _start(db: str, port: int, log: Path) -> subprocess.Popen:
    from localpriv.service import launch
    return launch(db, port, log, ADMIN)


def run(backend: str = "sqlite", clients: int = 4, batches: int = 50, size: int = 1000,
        max_seconds: float = 300.0, restart: bool = True) -> dict:
    import httpx

    from localpriv.service.client import Client
    tmp = tempfile.TemporaryDirectory(prefix="localpriv-bench-service-")
    pg = None
    if backend == "postgresql":
        import pgserver
        pg = pgserver.get_server(os.path.join(tmp.name, "pg"), cleanup_mode="stop")
        pg.psql("CREATE DATABASE bench;")
        db = pg.get_uri("bench")
    else:
        db = os.path.join(tmp.name, "collector.sqlite")
    port, log = free_port(), Path(tmp.name) / "server.log"
    url = f"http://127.0.0.1:{port}"
    rng = np.random.default_rng(0)
    plans = rng.integers(0, 100, size=(clients, batches, size))  # k-RR reports: any index is an output
    proc = _start(db, port, log)
    try:
        info = httpx.post(f"{url}/v1/collections", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30,
                          json={"name": "bench", "domain": "0..99",
                                "policy": {"mechanisms": ["krr"], "max_eps": 2}}).json()
        lat: list[list[float]] = [[] for _ in range(clients)]
        acked = np.zeros(clients, dtype=np.int64)
        errors: list[str] = []
        half, stop = threading.Event(), threading.Event()
        t_half = [None]
        total = clients * batches

        def client(i: int) -> None:
            try:
                with Client(url, "bench", info["ingest_token"], retries=200, backoff=0.02, max_backoff=0.25) as c:
                    for j in range(batches):
                        if stop.is_set():
                            return
                        t = time.perf_counter()
                        c.post_batch({"mechanism": SPEC, "reports": plans[i, j].tolist()}, batch_id=f"c{i}-b{j}")
                        lat[i].append((t, time.perf_counter()))
                        acked[i] += 1
                        if restart and acked.sum() >= total // 2 and not half.is_set():
                            t_half[0] = time.perf_counter()
                            half.set()
            except Exception as exc:  # noqa: BLE001 - reported in the JSON
                errors.append(f"client {i}: {exc}")

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        downtime = k0 = k1 = None
        if restart:
            if not half.wait(max_seconds):
                stop.set()
            else:
                at_kill = int(acked.sum())
                k0 = time.perf_counter()
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                proc = _start(db, port, log)
                k1 = time.perf_counter()
                downtime = k1 - k0
        for t in threads:
            t.join(max(1.0, max_seconds - (time.perf_counter() - t0)))
        stop.set()
        elapsed = time.perf_counter() - t0
        # correctness: the stored counts against every acknowledged batch exactly once
        body = httpx.get(f"{url}/v1/collections/bench/counts", timeout=60,
                         headers={"Authorization": f"Bearer {info['analyst_token']}"}).content
        path = Path(tmp.name) / "counts.csv"
        path.write_bytes(body)
        import localpriv as lp
        stored = lp.aggregate(str(path), lp.IntegerDomain(0, 99)).blocks[0].count_vector().astype(np.int64)
        sent = np.zeros(100, dtype=np.int64)
        for i in range(clients):
            sent += np.bincount(plans[i, :acked[i]].ravel(), minlength=100)
        stats = httpx.get(f"{url}/v1/collections/bench", timeout=30,
                          headers={"Authorization": f"Bearer {info['analyst_token']}"}).json()["ingest"]
        diff = stored - sent
        spans = np.concatenate([np.asarray(x).reshape(-1, 2) for x in lat]) if any(lat) else np.zeros((1, 2))
        all_lat = spans[:, 1] - spans[:, 0]
        # requests that did not overlap the kill-and-restart window
        steady = all_lat if downtime is None else all_lat[(spans[:, 1] < k0) | (spans[:, 0] > k1)]
        steady = steady if steady.size else np.zeros(1)
        before = (at_kill * size / (t_half[0] - t0)) if restart and t_half[0] else None
        return {
            "backend": backend, "clients": clients, "batches_per_client": batches, "reports_per_batch": size,
            "mechanism": SPEC, "restart": restart,
            "acknowledged_batches": int(acked.sum()), "acknowledged_reports": int(acked.sum()) * size,
            "elapsed_s": round(elapsed, 3),
            "ingest_rate_before_kill_reports_per_s": None if before is None else round(before),
            "ingest_rate_overall_reports_per_s": round(int(acked.sum()) * size / elapsed),
            "latency_ms": {"p50": round(1e3 * float(np.percentile(all_lat, 50)), 2),
                           "p99": round(1e3 * float(np.percentile(all_lat, 99)), 2),
                           "max": round(1e3 * float(all_lat.max()), 2)},
            "latency_ms_outside_restart": {"p50": round(1e3 * float(np.percentile(steady, 50)), 2),
                                           "p99": round(1e3 * float(np.percentile(steady, 99)), 2),
                                           "requests": int(steady.size)},
            "restart_downtime_s": None if downtime is None else round(downtime, 3),
            "server_counted_reports": stats["reports"], "server_batches": stats["batches"],
            "duplicate_batches_seen": stats["duplicate_batches"],
            "lost_reports": int(np.clip(-diff, 0, None).sum()),
            "double_counted_reports": int(np.clip(diff, 0, None).sum()),
            "errors": errors, "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
            "cores": os.cpu_count(),
        }
    finally:
        proc.kill()
        proc.wait()
        if pg is not None:
            pg.cleanup()
        tmp.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--batches", type=int, default=50)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    ap.add_argument("--no-restart", action="store_true")
    ap.add_argument("--both", action="store_true", help="SQLite and PostgreSQL in interleaved rounds, medians")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None, help="with --both: also write the JSON here (atomically)")
    a = ap.parse_args()
    if not (1 <= a.clients <= 64 and 1 <= a.batches <= 10_000 and 1 <= a.size <= 100_000):
        raise SystemExit("bounds: 1-64 clients, 1-10,000 batches, 1-100,000 reports per batch")
    if not a.both:
        print(json.dumps(run(a.backend, a.clients, a.batches, a.size, a.max_seconds, not a.no_restart), indent=2))
        return
    # both backends, interleaved rounds, medians (make bench-service -> benchmarks/results-service.json)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _common import machine, write_json
    rounds: dict = {"sqlite": [], "postgresql": []}
    started, load_before = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), [round(x, 2) for x in os.getloadavg()]
    for _ in range(a.rounds):
        for backend in rounds:
            rounds[backend].append(run(backend, a.clients, a.batches, a.size, a.max_seconds, not a.no_restart))

    def med(rs, *keys):
        vals = []
        for r in rs:
            v = r
            for key in keys:
                v = None if v is None else v.get(key)
            if v is not None:
                vals.append(float(v))
        return float(np.median(vals)) if vals else None

    summary = {b: {"rounds": len(rs),
                   "median_ingest_rate_before_kill_reports_per_s": med(rs, "ingest_rate_before_kill_reports_per_s"),
                   "median_ingest_rate_overall_reports_per_s": med(rs, "ingest_rate_overall_reports_per_s"),
                   "median_p50_ms_outside_restart": med(rs, "latency_ms_outside_restart", "p50"),
                   "median_p99_ms_outside_restart": med(rs, "latency_ms_outside_restart", "p99"),
                   "median_restart_downtime_s": med(rs, "restart_downtime_s"),
                   "range_ingest_rate_before_kill": [min(r["ingest_rate_before_kill_reports_per_s"] or 0 for r in rs),
                                                     max(r["ingest_rate_before_kill_reports_per_s"] or 0 for r in rs)],
                   "lost_reports_total": sum(r["lost_reports"] for r in rs),
                   "double_counted_reports_total": sum(r["double_counted_reports"] for r in rs)}
               for b, rs in rounds.items()}
    doc = {"benchmark": "service", "machine": machine(), "started": started, "load_before": load_before,
           "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "load_after": [round(x, 2) for x in os.getloadavg()], "rounds": a.rounds, "summary": summary,
           "runs": rounds}
    print(write_json(a.out, doc))


if __name__ == "__main__":
    main()
