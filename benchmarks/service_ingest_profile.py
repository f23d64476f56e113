"""Where the collector spends CPU per ingested batch: each step of the ingest path timed alone
(``time.process_time``, in this process), the server's CPU per batch over HTTP and per bare request
(``/proc/PID/stat`` of a ``localpriv serve`` child), and the one-process SQLite floor, on the same
batches of ``--size`` k-RR reports (k = 100, seed 0).

``--label NAME`` stores the run under that name in ``--out`` (other labels kept), so that the
source before a change (``PYTHONPATH`` pointing at an export of the older commit) and after it are
measured by the same script: ``make bench-service-profile`` measures the commit named by
``PROFILE_BASE`` and the working tree. CPU times, not wall times; still, run it on a quiet machine.

    python benchmarks/service_ingest_profile.py --label after --out benchmarks/results-service-ingest-profile.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine, now  # noqa: E402

from localpriv.data.aggregate import unique_counts  # noqa: E402
from localpriv.service import free_port, launch  # noqa: E402
from localpriv.service.core import Collector, decode_batch, read_json  # noqa: E402
from localpriv.service.storage import open_store  # noqa: E402

ADMIN = "benchmark-admin-token-0123456789"
SPEC = "krr(k=100,eps=2.0)"


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _counts(parts) -> tuple[list, str]:
    """The batch's (mechanism, report text, count) rows and digest, as the collector forms them."""
    rows = []
    for mech, r in parts:
        u, c = unique_counts(r, np.ones(r.shape[0], np.int64))
        rows.extend((str(mech), str(v), int(k)) for v, k in zip(u.tolist(), c.tolist()))
    rows.sort()
    return rows, hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def measure(batches: int = 200, size: int = 1000, requests: int = 300) -> dict:
    """Milliseconds of CPU per batch of each step, and the server's per batch and per bare request."""
    import httpx
    rng = np.random.default_rng(0)
    bodies = [json.dumps({"batch_id": f"b{j}", "groups": [{"mechanism": SPEC, "reports": rng.integers(0, 100, size)
                                                            .tolist()}]}, separators=(",", ":")).encode()
              for j in range(batches)]
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="localpriv-ingest-profile-") as tmp:
        store = open_store(os.path.join(tmp, "steps.sqlite"))
        col = Collector(store, ADMIN, refresh_delay=None)
        col.create("bench", "0..99", {"mechanisms": ["krr"], "max_eps": 2})
        _row, policy, domain = col._setup("bench")  # noqa: SLF001 - the benchmark times the steps alone

        def clock(name, fn, items):
            t = time.process_time()
            res = [fn(x) for x in items]
            out[name] = round((time.process_time() - t) / len(items) * 1e3, 4)
            return res

        data = clock("read_json_ms", read_json, bodies)
        decoded = clock("decode_batch_ms", lambda d: decode_batch(d, policy, domain), data)
        counted = [_counts(x[2]) for x in decoded]  # the store's input, formed outside the clock
        clock("store_ingest_ms", lambda i: store.ingest("bench", f"s{i}", counted[i][1], size, counted[i][0]),
              range(batches))
        clock("collector_ingest_ms", lambda b: col.ingest("bench", b), bodies)
        col.close()
        store.close()
        # the floor: one process, WAL, synchronous=FULL, one transaction per batch
        con = sqlite3.connect(os.path.join(tmp, "floor.sqlite"), isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        con.execute("CREATE TABLE counts (collection TEXT NOT NULL, mechanism TEXT NOT NULL, report TEXT NOT NULL, "
                    "count BIGINT NOT NULL, PRIMARY KEY (collection, mechanism, report))")

        def upsert(rows):
            con.execute("BEGIN IMMEDIATE")
            con.executemany("INSERT INTO counts VALUES ('bench', ?, ?, ?) ON CONFLICT (collection, mechanism, "
                            "report) DO UPDATE SET count = counts.count + excluded.count", rows)
            con.execute("COMMIT")
        clock("floor_upsert_ms", upsert, [c[0] for c in counted])

        def decode_count_upsert(body):
            g = json.loads(body)["groups"][0]
            u, c = np.unique(np.asarray(g["reports"], np.int64), return_counts=True)
            upsert([(g["mechanism"], str(v), int(k)) for v, k in zip(u.tolist(), c.tolist())])
        clock("floor_decode_count_upsert_ms", decode_count_upsert, bodies)
        con.close()
        # the server: CPU of its process per batch (one client, sequential) and per bare request
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = launch(os.path.join(tmp, "server.sqlite"), port, Path(tmp) / "server.log", ADMIN)
        try:
            info = httpx.post(f"{url}/v1/collections", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30,
                              json={"name": "bench", "domain": "0..99",
                                    "policy": {"mechanisms": ["krr"], "max_eps": 2}}).json()
            with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {info['ingest_token']}",
                                                    "Content-Type": "application/json"}) as c:
                c.get(f"{url}/healthz")
                t = _cpu(proc.pid)
                for _ in range(requests):
                    c.get(f"{url}/healthz")
                out["server_bare_request_ms"] = round((_cpu(proc.pid) - t) / requests * 1e3, 4)
                t = _cpu(proc.pid)
                for b in bodies:
                    r = c.post(f"{url}/v1/collections/bench/batches", content=b)
                    if r.status_code != 200:
                        raise SystemExit(f"the server refused a batch: {r.text[:200]}")
                out["server_batch_ms"] = round((_cpu(proc.pid) - t) / batches * 1e3, 4)
        finally:
            proc.kill()
            proc.wait()
    # the collector's own steps besides the three above: counting, report text, digest, policy, limits
    out["count_digest_and_rest_ms"] = round(out["collector_ingest_ms"] - out["read_json_ms"] - out["decode_batch_ms"]
                                            - out["store_ingest_ms"], 4)
    # the HTTP layer besides a bare request: body, authentication, thread hand-off, reply
    out["http_rest_ms"] = round(out["server_batch_ms"] - out["collector_ingest_ms"] - out["server_bare_request_ms"], 4)
    out["server_us_per_report"] = round(out["server_batch_ms"] * 1e3 / size, 4)
    out["floor_us_per_report"] = round(out["floor_upsert_ms"] * 1e3 / size, 4)
    out["ratio_server_to_floor"] = round(out["server_batch_ms"] / out["floor_upsert_ms"], 2)
    out["ratio_server_to_decoding_floor"] = round(out["server_batch_ms"] / out["floor_decode_count_upsert_ms"], 2)
    return {"batches": batches, "reports_per_batch": size, "mechanism": SPEC, "ms_per_batch": out}


def _server(src: str, db: str, log: Path, args: tuple[str, ...] = ()):
    """A ``localpriv serve`` child running the source tree ``src`` (its ``PYTHONPATH``) with more
    options ``args``, with one collection; returns ``(process, url, ingest token)``."""
    import httpx
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src
    try:
        port = free_port()
        proc = launch(db, port, log, ADMIN, timeout=300, args=args)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    url = f"http://127.0.0.1:{port}"
    info = httpx.post(f"{url}/v1/collections", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30,
                      json={"name": "bench", "domain": "0..99", "policy": {"mechanisms": ["krr"], "max_eps": 2}}).json()
    return proc, url, info["ingest_token"]


def interleaved(base_src: str, src: str, batches: int = 200, size: int = 1000, block: int = 20) -> dict:
    """The server's CPU per batch of two source trees (``base_src`` before, ``src`` after), each in
    its own ``localpriv serve`` child, and the one-process SQLite floor, interleaved by blocks of
    ``block`` batches (base, after, floor, base, after, floor, ...), so that a change of the
    machine's load hits all three alike. Returns milliseconds of CPU per batch and the ratios."""
    import httpx
    rng = np.random.default_rng(0)
    bodies = [json.dumps({"batch_id": f"b{j}", "groups": [{"mechanism": SPEC, "reports": rng.integers(0, 100, size)
                                                            .tolist()}]}, separators=(",", ":")).encode()
              for j in range(batches)]
    counted = [_counts([(SPEC, np.asarray(json.loads(b)["groups"][0]["reports"], np.int64))])[0] for b in bodies]
    cpu = {"before": 0.0, "after": 0.0, "floor": 0.0}
    with tempfile.TemporaryDirectory(prefix="localpriv-ingest-interleaved-") as tmp:
        con = sqlite3.connect(os.path.join(tmp, "floor.sqlite"), isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        con.execute("CREATE TABLE counts (collection TEXT NOT NULL, mechanism TEXT NOT NULL, report TEXT NOT NULL, "
                    "count BIGINT NOT NULL, PRIMARY KEY (collection, mechanism, report))")
        servers = {k: _server(s, os.path.join(tmp, f"{k}.sqlite"), Path(tmp) / f"{k}.log")
                   for k, s in (("before", base_src), ("after", src))}
        clients = {k: httpx.Client(timeout=60, headers={"Authorization": f"Bearer {tok}",
                                                        "Content-Type": "application/json"})
                   for k, (_p, _u, tok) in servers.items()}
        try:
            for k, (_proc, url, _tok) in servers.items():  # warm: the spec parsed, the connection open
                clients[k].post(f"{url}/v1/collections/bench/batches", content=json.dumps(
                    {"batch_id": "warm", "groups": [{"mechanism": SPEC, "reports": [1]}]}).encode())
            for lo in range(0, batches, block):
                for k, (proc, url, _tok) in servers.items():
                    t = _cpu(proc.pid)
                    for b in bodies[lo:lo + block]:
                        r = clients[k].post(f"{url}/v1/collections/bench/batches", content=b)
                        if r.status_code != 200:
                            raise SystemExit(f"the {k} server refused a batch: {r.text[:200]}")
                    cpu[k] += _cpu(proc.pid) - t
                t = time.process_time()
                for rows in counted[lo:lo + block]:
                    con.execute("BEGIN IMMEDIATE")
                    con.executemany("INSERT INTO counts VALUES ('bench', ?, ?, ?) ON CONFLICT (collection, mechanism, "
                                    "report) DO UPDATE SET count = counts.count + excluded.count", rows)
                    con.execute("COMMIT")
                cpu["floor"] += time.process_time() - t
        finally:
            for k, (proc, _u, _t) in servers.items():
                clients[k].close()
                proc.kill()
                proc.wait()
            con.close()
    ms = {f"{k}_ms": round(v / batches * 1e3, 4) for k, v in cpu.items()}
    ms["ratio_before_to_floor"] = round(cpu["before"] / cpu["floor"], 2)
    ms["ratio_after_to_floor"] = round(cpu["after"] / cpu["floor"], 2)
    ms["ratio_after_to_before"] = round(cpu["after"] / cpu["before"], 3)
    return {"batches": batches, "reports_per_batch": size, "block": block, "mechanism": SPEC, "ms_per_batch": ms}


#: decision 0082's servers: (label, source tree ("base" or "tree"), more options of localpriv serve, body)
BODY_VARIANTS = [("before", "base", (), "json"), ("json", "tree", (), "json"),
                 ("binary", "tree", (), "binary"), ("binary_h11", "tree", ("--http", "h11"), "binary")]


def interleaved_bodies(base_src: str, src: str, batches: int = 200, size: int = 1000, block: int = 20) -> dict:
    """Decision 0082's run: the server's CPU per batch of :data:`BODY_VARIANTS` (the commit before
    the binary body with JSON; this tree with JSON; this tree with the Python client's default body,
    made by its own encoder, under the default parser and under h11) and the one-process SQLite
    floor, interleaved by blocks of ``block`` batches, so that a change of the machine's load hits
    all alike. The same reports in every variant. Returns milliseconds of CPU per batch, the body
    sizes and the ratios to the floor and to ``before``."""
    import httpx

    from localpriv.service.wire import encode_batch
    rng = np.random.default_rng(0)
    reports = [rng.integers(0, 100, size) for _ in range(batches)]
    bodies = {"json": [("application/json", json.dumps({"batch_id": f"b{j}", "groups": [
                  {"mechanism": SPEC, "reports": r.tolist()}]}, separators=(",", ":")).encode())
                       for j, r in enumerate(reports)],
              "binary": [encode_batch(f"b{j}", [{"mechanism": SPEC, "reports": r}]) for j, r in enumerate(reports)]}
    counted = [_counts([(SPEC, r)])[0] for r in reports]
    cpu = {label: 0.0 for label, *_ in BODY_VARIANTS} | {"floor": 0.0}
    with tempfile.TemporaryDirectory(prefix="localpriv-ingest-bodies-") as tmp:
        con = sqlite3.connect(os.path.join(tmp, "floor.sqlite"), isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        con.execute("CREATE TABLE counts (collection TEXT NOT NULL, mechanism TEXT NOT NULL, report TEXT NOT NULL, "
                    "count BIGINT NOT NULL, PRIMARY KEY (collection, mechanism, report))")
        servers = {}
        clients = {}
        try:
            for label, tree, args, _body in BODY_VARIANTS:
                servers[label] = _server(base_src if tree == "base" else src, os.path.join(tmp, f"{label}.sqlite"),
                                         Path(tmp) / f"{label}.log", args)
                clients[label] = httpx.Client(timeout=60, headers={"Authorization": f"Bearer {servers[label][2]}"})
            for label, _tree, _args, body in BODY_VARIANTS:  # warm: the spec parsed, the connection open
                ctype, data = (bodies[body][0][0], bodies[body][0][1].replace(b"b0", b"w0", 1))
                clients[label].post(f"{servers[label][1]}/v1/collections/bench/batches", content=data,
                                    headers={"Content-Type": ctype})
            for lo in range(0, batches, block):
                for label, _tree, _args, body in BODY_VARIANTS:
                    proc, url, _tok = servers[label]
                    t = _cpu(proc.pid)
                    for ctype, data in bodies[body][lo:lo + block]:
                        r = clients[label].post(f"{url}/v1/collections/bench/batches", content=data,
                                                headers={"Content-Type": ctype})
                        if r.status_code != 200 or r.json()["status"] != "accepted":
                            raise SystemExit(f"the {label} server refused a batch: {r.text[:200]}")
                    cpu[label] += _cpu(proc.pid) - t
                t = time.process_time()
                for rows in counted[lo:lo + block]:
                    con.execute("BEGIN IMMEDIATE")
                    con.executemany("INSERT INTO counts VALUES ('bench', ?, ?, ?) ON CONFLICT (collection, mechanism, "
                                    "report) DO UPDATE SET count = counts.count + excluded.count", rows)
                    con.execute("COMMIT")
                cpu["floor"] += time.process_time() - t
            for label in servers:  # every variant counted every report (the warm batch's too)
                got = clients[label].get(f"{servers[label][1]}/v1/collections/bench", headers={
                    "Authorization": f"Bearer {ADMIN}"}).json()["ingest"]["reports"]
                if got != (batches + 1) * size:
                    raise SystemExit(f"the {label} server counted {got} reports, not {(batches + 1) * size}")
        finally:
            for label, (proc, _u, _t) in servers.items():
                clients[label].close()
                proc.kill()
                proc.wait()
            con.close()
    ms = {f"{k}_ms": round(v / batches * 1e3, 4) for k, v in cpu.items()}
    for label in cpu:
        if label != "floor":
            ms[f"ratio_{label}_to_floor"] = round(cpu[label] / cpu["floor"], 2)
    ms["ratio_binary_to_before"] = round(cpu["binary"] / cpu["before"], 3)
    ms["ratio_binary_to_json"] = round(cpu["binary"] / cpu["json"], 3)
    sizes = {k: round(float(np.mean([len(b) for _c, b in v])), 1) for k, v in bodies.items()}
    return {"batches": batches, "reports_per_batch": size, "block": block, "mechanism": SPEC,
            "body_bytes": sizes, "ms_per_batch": ms}


DECISION = Path(__file__).resolve().parent.parent / "docs" / "decisions" / "0065-ingest-cpu-against-a-sqlite-floor.md"
STEPS = [("read_json_ms", "strict JSON (depth measured, then parsed)"), ("decode_batch_ms", "decode and check reports"),
         ("count_digest_and_rest_ms", "count, report text, digest, the rest"),
         ("store_ingest_ms", "SQLite transaction (batch id, upsert, commit)"),
         ("collector_ingest_ms", "**the collector's ingest, in process**"),
         ("server_bare_request_ms", "HTTP: a bare request (`/healthz`)"),
         ("http_rest_ms", "HTTP: body, tokens, thread hand-off, reply"),
         ("server_batch_ms", "**the server's CPU per batch**"),
         ("floor_upsert_ms", "floor: one-process SQLite upsert of the counts"),
         ("floor_decode_count_upsert_ms", "floor with the JSON decoded and counted"),
         ("ratio_server_to_floor", "server / floor"),
         ("ratio_server_to_decoding_floor", "server / floor with decoding")]


def docs_block(doc: dict) -> str:
    """The table of the decision record's ``service-ingest-profile`` block, from the JSON ``doc``."""
    labels = list(doc["runs"])
    runs = [doc["runs"][k] for k in labels]
    head = "| step (CPU ms per batch, median of the rounds) | " + " | ".join(
        f"{k} ({r.get('commit') or 'working tree'}, {r['reports_per_batch']:,} reports, {r.get('rounds', 1)} rounds)"
        for k, r in zip(labels, runs))
    lines = [head + " |", "|---|" + "---|" * len(runs)]
    for key, words in STEPS:
        cells = [r["ms_per_batch"].get(key) for r in runs]
        lines.append(f"| {words} | " + " | ".join("n/a" if c is None else (f"{c:.3g}x" if key.startswith("ratio")
                                                                            else f"{c:.3g}") for c in cells) + " |")
    loads = "; ".join(f"{k}: {', '.join(f'{x:.1f}' for x in r['load_before'])}" for k, r in zip(labels, runs))
    return "\n".join(lines + ["", f"{doc['machine'].get('cpu')}, load average before each run: {loads} "
                              "(`benchmarks/results-service-ingest-profile.json`)."])


def write_docs(doc: dict, path: Path = DECISION) -> None:
    text = path.read_text()
    pat = re.compile(r"(<!-- service-ingest-profile -->\n)(?:.*?\n)?(<!-- /service-ingest-profile -->)", re.S)
    new, n = pat.subn(lambda m: m.group(1) + docs_block(doc) + "\n" + m.group(2), text)
    if n != 1:
        raise SystemExit(f"{path}: no <!-- service-ingest-profile --> block")
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(new)
    tmp.replace(path)


INTERLEAVED_DECISION = DECISION.parent / "0075-ingest-without-the-routing-layers.md"
INTERLEAVED_OUT = Path(__file__).resolve().parent / "results-service-ingest-interleaved.json"
INTERLEAVED_ROWS = [("before_ms", "the server's CPU per batch, before"),
                    ("after_ms", "the server's CPU per batch, after"),
                    ("floor_ms", "floor: one-process SQLite upsert of the counts"),
                    ("ratio_before_to_floor", "before / floor"), ("ratio_after_to_floor", "after / floor"),
                    ("ratio_after_to_before", "after / before")]


def interleaved_block(doc: dict) -> str:
    """The table of decision 0075's ``service-ingest-interleaved`` block, from the JSON ``doc``."""
    labels = list(doc["runs"])
    runs = [doc["runs"][k] for k in labels]
    head = "| CPU ms per batch (median of the rounds) | " + " | ".join(
        f"{k} (before: {r.get('commit') or '?'}, {r['reports_per_batch']:,} reports, {r['batches']} batches, "
        f"{r.get('rounds', 1)} rounds)" for k, r in zip(labels, runs))
    lines = [head + " |", "|---|" + "---|" * len(runs)]
    for key, words in INTERLEAVED_ROWS:
        cells = [r["ms_per_batch"].get(key) for r in runs]
        lines.append(f"| {words} | " + " | ".join("n/a" if c is None else (f"{c:.3g}x" if key.startswith("ratio")
                                                                            else f"{c:.3g}") for c in cells) + " |")
    loads = "; ".join(f"{k}: {', '.join(f'{x:.1f}' for x in r['load_before'])}" for k, r in zip(labels, runs))
    return "\n".join(lines + ["", f"{doc['machine'].get('cpu')}, {doc['machine'].get('cores', '?')} cores, load "
                              f"average before each run: {loads} (`benchmarks/{INTERLEAVED_OUT.name}`)."])


def write_interleaved_docs(doc: dict, path: Path = INTERLEAVED_DECISION) -> None:
    text = path.read_text()
    pat = re.compile(r"(<!-- service-ingest-interleaved -->\n)(?:.*?\n)?(<!-- /service-ingest-interleaved -->)", re.S)
    new, n = pat.subn(lambda m: m.group(1) + interleaved_block(doc) + "\n" + m.group(2), text)
    if n != 1:
        raise SystemExit(f"{path}: no <!-- service-ingest-interleaved --> block")
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(new)
    tmp.replace(path)


def main_interleaved(a: argparse.Namespace) -> None:
    out = Path(a.out) if a.out else INTERLEAVED_OUT
    if a.docs_only:
        write_interleaved_docs(json.loads(out.read_text()))
        return
    if not (1 <= a.batches <= 10_000 and 1 <= a.size <= 100_000 and 1 <= a.rounds <= 20):
        raise SystemExit("bounds: 1-10,000 batches of 1-100,000 reports, 1-20 rounds")
    src = str(Path(__file__).resolve().parent.parent / "src")
    load = [round(x, 2) for x in os.getloadavg()]
    rounds = [interleaved(a.interleave, src, a.batches, a.size) for _ in range(a.rounds)]
    keys = rounds[0]["ms_per_batch"]
    run = {"started": now(), "load_before": load, "commit": a.commit, "rounds": a.rounds,
           **{k: v for k, v in rounds[0].items() if k != "ms_per_batch"},
           "ms_per_batch": {k: round(float(np.median([r["ms_per_batch"][k] for r in rounds])), 4) for k in keys},
           "ms_per_batch_rounds": [r["ms_per_batch"] for r in rounds],
           "load_after": [round(x, 2) for x in os.getloadavg()]}
    doc = json.loads(out.read_text()) if out.exists() else {"benchmark": "service-ingest-interleaved", "runs": {}}
    doc["machine"] = machine()
    doc["runs"][a.label or "smoke"] = run
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(out)
    if INTERLEAVED_DECISION.exists():
        write_interleaved_docs(doc)
    print(json.dumps(run["ms_per_batch"], indent=2))


BODIES_DECISION = DECISION.parent / "0082-binary-batches-and-httptools.md"
BODIES_OUT = Path(__file__).resolve().parent / "results-service-ingest-bodies.json"
BODIES_ROWS = [("before_ms", "before: the commit before, JSON body, h11"),
               ("json_ms", "after: JSON body"), ("binary_ms", "after: binary body (the Python client's default)"),
               ("binary_h11_ms", "after: binary body, `--http h11`"),
               ("floor_ms", "floor: one-process SQLite upsert of the counts"),
               ("ratio_before_to_floor", "before / floor"), ("ratio_json_to_floor", "after, JSON / floor"),
               ("ratio_binary_to_floor", "after, binary / floor"),
               ("ratio_binary_h11_to_floor", "after, binary, h11 / floor"),
               ("ratio_binary_to_before", "binary / before"), ("ratio_binary_to_json", "binary / JSON")]


def bodies_block(doc: dict) -> str:
    """The table of decision 0082's ``service-ingest-bodies`` block, from the JSON ``doc``."""
    labels = list(doc["runs"])
    runs = [doc["runs"][k] for k in labels]
    head = "| CPU ms per batch (median of the rounds) | " + " | ".join(
        f"{k} (before: {r.get('commit') or '?'}, {r['reports_per_batch']:,} reports, {r['batches']} batches, "
        f"{r.get('rounds', 1)} rounds)" for k, r in zip(labels, runs))
    lines = [head + " |", "|---|" + "---|" * len(runs)]
    for key, words in BODIES_ROWS:
        cells = [r["ms_per_batch"].get(key) for r in runs]
        lines.append(f"| {words} | " + " | ".join("n/a" if c is None else (f"{c:.3g}x" if key.startswith("ratio")
                                                                            else f"{c:.3g}") for c in cells) + " |")
    sizes = "; ".join(f"{k}: JSON {r['body_bytes']['json']:,.0f}, binary {r['body_bytes']['binary']:,.0f}"
                      for k, r in zip(labels, runs))
    loads = "; ".join(f"{k}: {', '.join(f'{x:.1f}' for x in r['load_before'])}" for k, r in zip(labels, runs))
    return "\n".join(lines + ["", f"Bytes per body: {sizes}. {doc['machine'].get('cpu')}, "
                              f"{doc['machine'].get('cores', '?')} cores, load average before each run: {loads} "
                              f"(`benchmarks/{BODIES_OUT.name}`)."])


def write_bodies_docs(doc: dict, path: Path = BODIES_DECISION) -> None:
    text = path.read_text()
    pat = re.compile(r"(<!-- service-ingest-bodies -->\n)(?:.*?\n)?(<!-- /service-ingest-bodies -->)", re.S)
    new, n = pat.subn(lambda m: m.group(1) + bodies_block(doc) + "\n" + m.group(2), text)
    if n != 1:
        raise SystemExit(f"{path}: no <!-- service-ingest-bodies --> block")
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(new)
    tmp.replace(path)


def main_bodies(a: argparse.Namespace) -> None:
    out = Path(a.out) if a.out else BODIES_OUT
    if a.docs_only:
        write_bodies_docs(json.loads(out.read_text()))
        return
    if not (1 <= a.batches <= 10_000 and 1 <= a.size <= 100_000 and 1 <= a.rounds <= 20):
        raise SystemExit("bounds: 1-10,000 batches of 1-100,000 reports, 1-20 rounds")
    src = str(Path(__file__).resolve().parent.parent / "src")
    load = [round(x, 2) for x in os.getloadavg()]
    rounds = [interleaved_bodies(a.bodies, src, a.batches, a.size) for _ in range(a.rounds)]
    keys = rounds[0]["ms_per_batch"]
    run = {"started": now(), "load_before": load, "commit": a.commit, "rounds": a.rounds,
           **{k: v for k, v in rounds[0].items() if k != "ms_per_batch"},
           "ms_per_batch": {k: round(float(np.median([r["ms_per_batch"][k] for r in rounds])), 4) for k in keys},
           "ms_per_batch_rounds": [r["ms_per_batch"] for r in rounds],
           "load_after": [round(x, 2) for x in os.getloadavg()]}
    doc = json.loads(out.read_text()) if out.exists() else {"benchmark": "service-ingest-bodies", "runs": {}}
    doc["machine"] = machine()
    doc["runs"][a.label or "smoke"] = run
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(out)
    if BODIES_DECISION.exists():
        write_bodies_docs(doc)
    print(json.dumps(run["ms_per_batch"], indent=2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs-only", action="store_true", help="only rewrite the decision record's table from --out")
    ap.add_argument("--label", default=None, help="the name of this run in --out (e.g. before, after)")
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3, help="repetitions; the table shows each step's median")
    ap.add_argument("--commit", default=None, help="the commit the measured source is (recorded)")
    ap.add_argument("--out", default=None, help="default: results-service-ingest-profile.json, or with "
                    "--interleave results-service-ingest-interleaved.json, with --bodies "
                    "results-service-ingest-bodies.json")
    ap.add_argument("--interleave", default=None, metavar="BASE_SRC",
                    help="compare the server of the source tree BASE_SRC (before) with this tree's (after) and the "
                         "floor, interleaved in one run (decision 0075's table)")
    ap.add_argument("--bodies", default=None, metavar="BASE_SRC",
                    help="decision 0082's run: the server of BASE_SRC (before, JSON) against this tree's with the "
                         "JSON body, the binary body (the client's default) and the binary body under h11, and the "
                         "floor, interleaved in one run")
    a = ap.parse_args()
    if a.bodies:
        main_bodies(a)
        return
    if a.interleave:
        main_interleaved(a)
        return
    a.out = a.out or str(Path(__file__).resolve().parent / "results-service-ingest-profile.json")
    if a.docs_only:
        write_docs(json.loads(Path(a.out).read_text()))
        return
    if not a.label:
        raise SystemExit("--label is required (the name of this run)")
    if not (1 <= a.batches <= 10_000 and 1 <= a.size <= 100_000 and 1 <= a.rounds <= 20):
        raise SystemExit("bounds: 1-10,000 batches of 1-100,000 reports, 1-20 rounds")
    load = [round(x, 2) for x in os.getloadavg()]
    rounds = [measure(a.batches, a.size) for _ in range(a.rounds)]
    keys = rounds[0]["ms_per_batch"]
    run = {"started": now(), "load_before": load, "commit": a.commit, "rounds": a.rounds,
           **{k: v for k, v in rounds[0].items() if k != "ms_per_batch"},
           "ms_per_batch": {k: round(float(np.median([r["ms_per_batch"][k] for r in rounds])), 4) for k in keys},
           "ms_per_batch_rounds": [r["ms_per_batch"] for r in rounds],
           "load_after": [round(x, 2) for x in os.getloadavg()]}
    path = Path(a.out)
    doc = json.loads(path.read_text()) if path.exists() else {"benchmark": "service-ingest-profile", "runs": {}}
    doc["machine"] = machine()
    doc["runs"][a.label] = run
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(path)
    print(json.dumps(run, indent=2))


if __name__ == "__main__":
    main()
