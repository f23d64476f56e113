"""The collector service: the same tests against SQLite and a real PostgreSQL server
that this module starts itself (pinned ``pgserver``), plus the security refusals, a server killed
with SIGKILL in the middle of concurrent clients, and the dashboard in a real headless browser."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import localpriv as lp
from localpriv.domains import parse_domain
from localpriv.service import free_port
from localpriv.service.app import create_app
from localpriv.service.client import Client, report_group
from localpriv.service.core import Collector
from localpriv.service.storage import SCHEMA_VERSION, open_store

ADMIN = "test-admin-token-0123456789"
BACKENDS = ["sqlite", "postgresql"]


# ---------------------------------------------------------------------------------------------
# fixtures: one PostgreSQL server per module, one fresh database per test
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pg_server(tmp_path_factory):
    import pgserver
    root = tmp_path_factory.mktemp("pg")
    server = pgserver.get_server(str(root), cleanup_mode="stop")
    yield server
    server.cleanup()


_DB_SEQ = iter(range(10 ** 6))


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "collector.sqlite")
    server = request.getfixturevalue("pg_server")
    name = f"t{os.getpid()}_{next(_DB_SEQ)}"
    server.psql(f"CREATE DATABASE {name};")
    return server.get_uri(name)


def _service(db_url, max_body=1 << 20):
    store = open_store(db_url)
    collector = Collector(store, ADMIN, estimate_wait=300)  # these tests want answers, not jobs
    return TestClient(create_app(collector, max_body)), collector


def _create(tc, name="ages", domain="0..9", policy=None, keep_raw=False):
    policy = policy or {"mechanisms": ["krr", "oue", "geometric"], "max_eps": 2.0}
    r = tc.post("/v1/collections", headers={"Authorization": f"Bearer {ADMIN}"},
                json={"name": name, "domain": domain, "policy": policy, "keep_raw": keep_raw})
    assert r.status_code == 201, r.text
    return r.json()


def _auth(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def svc(db_url):
    tc, collector = _service(db_url)
    info = _create(tc)
    yield tc, collector, info
    collector.store.close()


# ---------------------------------------------------------------------------------------------
# ingest, counts, estimates (both backends)
# ---------------------------------------------------------------------------------------------
def test_counts_match_local_aggregate_and_export(svc, tmp_path):
    tc, collector, info = svc
    rng = np.random.default_rng(1)
    dom = parse_domain("0..9")
    values = rng.binomial(9, 0.3, 4000)
    g1 = report_group(values[:2500], "krr(eps=2.0)", dom, rng)
    g2 = report_group(values[2500:], "oue(eps=1.0)", dom, rng)  # bit vectors, as hex on the wire
    c = Client("http://test", "ages", info["ingest_token"], http=tc)
    for s in range(0, 2500, 1000):
        batch = {"mechanism": g1["mechanism"], "reports": g1["reports"][s:s + 1000]}
        assert c.post_batch(batch)["status"] == "accepted"
    c.post_batch([{"mechanism": "oue(eps=1.0)", "reports": g2["reports"]}])
    # the same reports aggregated locally by the library
    local = _table([g1, g2]).to_frame()
    r = tc.get("/v1/collections/ages/counts?format=csv", headers=_auth(info["analyst_token"]))
    assert r.status_code == 200 and r.headers["x-localpriv-counts-version"] == "4"
    path = tmp_path / "export.csv"
    path.write_bytes(r.content)
    assert r.content.replace(b'"', b"").startswith(b"mechanism,report,count\n")  # a plain CSV
    served = lp.aggregate(str(path), dom).to_frame()
    assert _norm(served) == _norm(local)
    r = tc.get("/v1/collections/ages/counts?format=parquet", headers=_auth(info["analyst_token"]))
    (tmp_path / "export.parquet").write_bytes(r.content)
    assert _norm(lp.aggregate(str(tmp_path / "export.parquet"), dom).to_frame()) == _norm(local)
    # the estimate is the library's on the same counts (GIBU over the two mechanisms)
    est = tc.get("/v1/collections/ages/estimate?estimator=ibu&level=0.9&stats=mean",
                 headers=_auth(info["analyst_token"])).json()
    ref = lp.estimate(_table([g1, g2]), "ibu")
    np.testing.assert_allclose(est["distribution"], ref.distribution, atol=1e-9)
    assert est["n"] == 4000 and est["ci"]["level"] == 0.9 and len(est["ci"]["lower"]) == 10
    assert "mean" in est["statistics"] and est["counts_version"] == 4 and est["cached"] is False
    assert tc.get("/v1/collections/ages/estimate?estimator=ibu&level=0.9&stats=mean",
                  headers=_auth(info["analyst_token"])).json()["cached"] is True
    stats = tc.get("/v1/collections/ages", headers=_auth(info["analyst_token"])).json()["ingest"]
    assert stats["reports"] == 4000 and stats["batches"] == 4


def _table(groups):
    """The groups' reports aggregated locally by the library (Observations)."""
    import pyarrow as pa

    from localpriv.data.formats import hex_bytes
    tables = []
    for g in groups:
        mech = lp.parse(g["mechanism"], parse_domain("0..9"))
        rep = g["reports"]
        if isinstance(rep[0], str):
            arr = hex_bytes(pa.array(rep), len(rep[0]))
        else:
            arr = np.asarray(rep)
        from localpriv.data.reports import report_table
        tables.append(report_table(mech, arr))
    from localpriv.data.observations import Observations
    dom = parse_domain("0..9")
    return Observations([b for t in tables for b in lp.aggregate(t, dom).blocks], dom)


def _norm(df):
    return sorted((str(m), r.hex() if isinstance(r, bytes) else int(r), int(c))
                  for m, r, c in zip(df["mechanism"], df["report"], df["count"]))


def test_retried_batch_counts_once(svc):
    tc, collector, info = svc
    body = {"batch_id": "b-1", "groups": [{"mechanism": "krr(eps=1.0)", "reports": [0, 1, 1, 9]}]}
    r1 = tc.post("/v1/collections/ages/batches", json=body, headers=_auth(info["ingest_token"]))
    r2 = tc.post("/v1/collections/ages/batches", json=body, headers=_auth(info["ingest_token"]))
    assert r1.json()["status"] == "accepted" and r2.json()["status"] == "duplicate"
    assert r1.json()["counts_version"] == r2.json()["counts_version"] == 1
    version, rows = collector.store.counts("ages")
    assert rows == [("krr(k=10,eps=1.0)", "0", 1), ("krr(k=10,eps=1.0)", "1", 2), ("krr(k=10,eps=1.0)", "9", 1)]
    # the same id with other reports is a client bug: refused, nothing changes
    body["groups"][0]["reports"] = [3]
    r3 = tc.post("/v1/collections/ages/batches", json=body, headers=_auth(info["ingest_token"]))
    assert r3.status_code == 409 and "other reports" in r3.json()["error"]
    assert collector.store.counts("ages") == (version, rows)
    assert collector.describe("ages")["ingest"]["duplicate_batches"] == 1
    # estimates are cached per counts version: a new batch makes a new version, a new estimate
    ana = _auth(info["analyst_token"])
    e1 = tc.get("/v1/collections/ages/estimate?estimator=inv-p", headers=ana).json()
    assert (e1["cached"], tc.get("/v1/collections/ages/estimate?estimator=inv-p", headers=ana).json()["cached"]) \
        == (False, True)
    tc.post("/v1/collections/ages/batches", headers=_auth(info["ingest_token"]),
            json={"batch_id": "b-2", "groups": [{"mechanism": "krr(k=10,eps=1.0)", "reports": [5]}]})
    e2 = tc.get("/v1/collections/ages/estimate?estimator=inv-p", headers=ana).json()
    assert e2["counts_version"] == 2 and e2["cached"] is False and e2["n"] == 5


def test_client_retries_with_the_same_batch_id():
    """Transient failures (no answer, 503) are retried with the same id; refusals are not."""
    import httpx
    seen: list = []

    def handler(request):
        from localpriv.service.wire import CONTENT_TYPE, split_binary
        binary = request.headers["content-type"] == CONTENT_TYPE  # the client's default body
        seen.append(json.loads(split_binary(request.content)[0] if binary else request.content)["batch_id"])
        if len(seen) == 1:
            raise httpx.ConnectError("refused", request=request)
        if len(seen) == 2:
            return httpx.Response(503, json={"error": "busy"})
        if len(seen) == 3:
            return httpx.Response(200, json={"status": "accepted", "reports": 2, "counts_version": 1})
        return httpx.Response(422, json={"error": "krr(k=10,eps=1.0): reports outside the output space at row 1"})
    http = httpx.Client(base_url="http://test", transport=httpx.MockTransport(handler))
    c = Client("http://test", "ages", "tok", http=http, backoff=0.0)
    assert c.post_batch({"mechanism": "krr(eps=1.0)", "reports": [1, 2]})["status"] == "accepted"
    assert len(seen) == 3 and len(set(seen)) == 1
    with pytest.raises(lp.LocalPrivError, match=r"server refused \(422\): krr"):
        c.post_batch({"mechanism": "krr(eps=1.0)", "reports": [11]})
    assert len(seen) == 4  # a refusal is not retried


def test_cli_serve_is_lazy():
    """`localpriv serve` exists, and the command line's start-up does not load the web stack."""
    code = ("import sys, localpriv, localpriv.cli; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'fastapi', 'uvicorn', 'psycopg', 'starlette'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr
    help_ = subprocess.run([sys.executable, "-m", "localpriv.cli.main", "serve", "--help"], capture_output=True,
                           text=True, timeout=120)
    assert help_.returncode == 0 and "--db" in help_.stdout and "--max-body" in help_.stdout


def test_invalid_reports_refused_with_positions(svc):
    tc, collector, info = svc
    cases = [
        ([0, 1, 10, 3], "at row 3"),              # outside krr(k=10)'s outputs
        ([0, 1.5], "whole numbers"),
        ([0, "a"], "all numbers or all hex"),
        ([True, False], "integers"),
        ([0, None], "no report"),
    ]
    for reports, words in cases:
        r = tc.post("/v1/collections/ages/batches", headers=_auth(info["ingest_token"]),
                    json={"batch_id": "bad", "groups": [{"mechanism": "krr(eps=1.0)", "reports": reports}]})
        assert r.status_code == 422 and words in r.json()["error"], (reports, r.text)
        assert "\n" not in r.json()["error"]
    r = tc.post("/v1/collections/ages/batches", headers=_auth(info["ingest_token"]),
                json={"batch_id": "bv", "groups": [{"mechanism": "oue(eps=1.0)", "reports": ["ff"]}]})
    assert r.status_code == 422 and "bytes" in r.json()["error"]
    assert collector.store.counts("ages") == (0, [])
    stats = collector.describe("ages")["ingest"]
    assert stats["refused_batches"] == 6 and stats["refused_reports"] == 13 and stats["reports"] == 0


def test_keep_raw_and_planar_collection(db_url):
    tc, collector = _service(db_url)
    info = _create(tc, "nyc", "bbox(40.70,-74.02,40.74,-73.98,1)",
                   {"mechanisms": ["planar-geometric"], "max_eps_geo": 2.0, "max_eps": 1000}, keep_raw=True)
    dom = parse_domain("bbox(40.70,-74.02,40.74,-73.98,1)")
    rng = np.random.default_rng(3)
    pts = np.column_stack([rng.uniform(40.70, 40.74, 300), rng.uniform(-74.02, -73.98, 300)])
    c = Client("http://test", "nyc", info["ingest_token"], http=tc)
    out = c.submit(pts, "planar-geometric(eps=1.0)", dom, rng=rng, batch_size=100)
    assert out == {"reports": 300, "batches": 3, "duplicates": 0}
    assert collector.store.raw_count("nyc") == 300
    est = tc.get("/v1/collections/nyc/estimate?estimator=ibu", headers=_auth(info["analyst_token"])).json()
    assert len(est["distribution"]) == dom.size and "lat" in est
    png = tc.get(f"/dashboard/nyc/estimate.png?token={info['analyst_token']}")
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    # the policy judges the computed geo level: eps=3 per km is above max_eps_geo=2
    r = tc.post("/v1/collections/nyc/batches", headers=_auth(info["ingest_token"]),
                json={"batch_id": "g", "groups": [{"mechanism": "planar-geometric(eps=3.0)", "reports": [0]}]})
    assert r.status_code == 422 and "geo-indistinguishability level" in r.json()["error"]
    collector.store.close()


def test_migrations(db_url):
    store = open_store(db_url)
    assert store.schema_version() == SCHEMA_VERSION
    assert store.migrate() == SCHEMA_VERSION  # reopening migrates nothing
    with store.transaction(write=True) as c:
        c.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION + 1,))
    store.close()
    with pytest.raises(lp.LocalPrivError, match="newer than this localpriv"):
        open_store(db_url)


def test_migration_2_marks_stored_hashing_specs_as_the_old_family(db_url):
    # a store written before format version 3: its olh/blh reports meant the Carter-Wegman hash
    store = open_store(db_url)
    with store.transaction(write=True) as c:
        c.execute("DELETE FROM schema_version WHERE version >= 2")
        for spec, report in (("olh(k=4,eps=1.0)", "17"), ("krr(k=4,eps=1.0)", "2"),
                             ("lblh(k=4,eps_perm=2.0,eps_1=1.0)", "5")):
            c.execute("INSERT INTO counts (collection, mechanism, report, count) VALUES (?, ?, ?, ?)",
                      ("old", spec, report, 3))
        c.execute("INSERT INTO raw_reports (collection, batch_id, seq, mechanism, report) VALUES (?, ?, ?, ?, ?)",
                  ("old", "b", 0, "olh(k=4,eps=1.0)", "17"))
    store.close()
    store = open_store(db_url)  # migrates 1 -> 2
    with store.transaction() as c:
        counts = sorted(tuple(r) for r in c.execute("SELECT mechanism, report FROM counts WHERE collection = 'old'"))
        raw = c.execute("SELECT mechanism FROM raw_reports WHERE collection = 'old'").fetchall()
    assert counts == [("krr(k=4,eps=1.0)", "2"), ("lblh(k=4,eps_perm=2.0,eps_1=1.0,hash=cw)", "5"),
                      ("olh(k=4,eps=1.0,hash=cw)", "17")]
    assert [r[0] for r in raw] == ["olh(k=4,eps=1.0,hash=cw)"]
    assert store.schema_version() == SCHEMA_VERSION
    store.close()


# ---------------------------------------------------------------------------------------------
# security: every refusal
# ---------------------------------------------------------------------------------------------
def test_security_refusals(svc):
    tc, collector, info = svc
    ing, ana = info["ingest_token"], info["analyst_token"]
    batch = {"batch_id": "s1", "groups": [{"mechanism": "krr(eps=1.0)", "reports": [1]}]}
    # missing and wrong tokens
    assert tc.get("/v1/collections/ages/estimate").status_code == 401
    assert tc.get("/v1/collections/ages/estimate", headers=_auth("nope")).status_code == 401
    assert tc.post("/v1/collections/ages/batches", json=batch).status_code == 401
    assert tc.post("/v1/collections/ages/batches", json=batch, headers=_auth("x" * 43)).status_code == 401
    assert tc.get("/dashboard/ages").status_code == 401
    assert tc.get("/dashboard", params={"token": ana}).status_code == 401
    # the ingest token only writes; the analyst token only reads
    for path in ("/v1/collections/ages", "/v1/collections/ages/estimate", "/v1/collections/ages/counts",
                 "/dashboard/ages", "/dashboard/ages/estimate.png"):
        r = tc.get(path, headers=_auth(ing))
        assert r.status_code == 403, path
    assert tc.post("/v1/collections/ages/batches", json=batch, headers=_auth(ana)).status_code == 403
    # only the admin token creates or lists collections
    new = {"name": "x", "domain": "0..9", "policy": {"mechanisms": ["krr"], "max_eps": 1}}
    for tok in (ing, ana, "wrong"):
        assert tc.post("/v1/collections", json=new, headers=_auth(tok)).status_code == 401
        assert tc.get("/v1/collections", headers=_auth(tok)).status_code == 401
    # a token of one collection opens no other
    other = _create(tc, "other")
    assert tc.get("/v1/collections/ages", headers=_auth(other["analyst_token"])).status_code == 401
    assert tc.post("/v1/collections/ages/batches", json=batch, headers=_auth(other["ingest_token"])).status_code == 401
    # policy violations: computed eps above the cap, unknown mechanism, a family not allowed, specs naming files
    refused = {
        "krr(eps=2.5)": "above the collection's cap",
        "geometric(eps=1.0)": "above the collection's cap",  # computed eps_ldp on 0..9 is 9, not 1
        "nosuch(eps=1.0)": "not allowed",
        "sue(eps=1.0)": "not allowed",
        "krr(k=10,eps=1.0,file=/etc/passwd)": "names a file",
    }
    for spec, words in refused.items():
        r = tc.post("/v1/collections/ages/batches", headers=_auth(ing),
                    json={"batch_id": "p", "groups": [{"mechanism": spec, "reports": [1]}]})
        assert r.status_code == 422 and words in r.json()["error"], (spec, r.text)
    mat = _create(tc, "mat", "0..1", {"mechanisms": ["matrix", "krr"], "max_eps": 5})
    r = tc.post("/v1/collections/mat/batches", headers=_auth(mat["ingest_token"]),
                json={"batch_id": "m", "groups": [{"mechanism": "matrix(file=/etc/passwd)", "reports": [0]}]})
    assert r.status_code == 422 and "names a file" in r.json()["error"]
    # oversized bodies: by Content-Length, and counted while streaming when the header lies or is absent
    big = json.dumps({"batch_id": "big", "groups": [{"mechanism": "krr(eps=1.0)",
                                                     "reports": [1] * 600_000}]}).encode()
    assert len(big) > 1 << 20
    r = tc.post("/v1/collections/ages/batches", content=big, headers=_auth(ing))
    assert r.status_code == 413 and "refused" in r.json()["error"]

    def chunks():
        for s in range(0, len(big), 65536):
            yield big[s:s + 65536]
    r = tc.post("/v1/collections/ages/batches", content=chunks(), headers=_auth(ing))
    assert r.status_code == 413
    assert tc.post("/v1/collections", content=big, headers=_auth(ADMIN)).status_code == 413
    # nothing of the above was counted
    assert collector.store.counts("ages") == (0, [])
    # and no reply leaks a stack trace: one line each
    r = tc.post("/v1/collections/ages/batches", content=b"{not json", headers=_auth(ing))
    assert r.status_code == 422 and "not JSON" in r.json()["error"]


def test_openapi_documents_the_api(svc):
    tc, _, _ = svc
    spec = tc.get("/openapi.json").json()
    paths = spec["paths"]
    for p in ("/v1/collections", "/v1/collections/{name}/batches", "/v1/collections/{name}/estimate",
              "/v1/collections/{name}/counts", "/dashboard"):
        assert p in paths
    body = paths["/v1/collections/{name}/batches"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "batch_id" in body["properties"]


# ---------------------------------------------------------------------------------------------
# a real server: SIGKILL in the middle of concurrent clients, then the dashboard in chromium
# ---------------------------------------------------------------------------------------------
def _start(db: str, port: int, log: Path) -> subprocess.Popen:
    from localpriv.service import launch
    return launch(db, port, log, ADMIN)


def test_sigkill_in_the_middle_loses_and_doubles_nothing(db_url, tmp_path):
    import httpx
    port = free_port()
    log = tmp_path / "server.log"
    proc = _start(db_url, port, log)
    try:
        url = f"http://127.0.0.1:{port}"
        info = httpx.post(f"{url}/v1/collections", headers=_auth(ADMIN), timeout=30, json={
            "name": "ages", "domain": "0..9", "policy": {"mechanisms": ["krr"], "max_eps": 2}}).json()
        n_clients, n_batches, size = 3, 10, 100
        rng = np.random.default_rng(7)
        plans = [[rng.integers(0, 10, size).tolist() for _ in range(n_batches)] for _ in range(n_clients)]
        acked = [0] * n_clients
        errors: list = []
        half = threading.Event()

        def client(i):
            try:
                with Client(url, "ages", info["ingest_token"], retries=200, backoff=0.05, max_backoff=0.5) as c:
                    for j, reports in enumerate(plans[i]):
                        c.post_batch({"mechanism": "krr(k=10,eps=2.0)", "reports": reports}, batch_id=f"c{i}-b{j}")
                        acked[i] += 1
                        if sum(acked) >= n_clients * n_batches // 2:
                            half.set()
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
        threads = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
        for t in threads:
            t.start()
        assert half.wait(120)
        os.kill(proc.pid, signal.SIGKILL)  # acknowledged batches must survive this
        proc.wait()
        proc = _start(db_url, port, log)
        for t in threads:
            t.join(180)
        assert not errors, errors
        # zero lost, zero double-counted: the stored counts are exactly those of every batch once
        expected = np.bincount(np.concatenate([np.ravel(p) for p in plans]), minlength=10)
        rows = httpx.get(f"{url}/v1/collections/ages/counts", headers=_auth(info["analyst_token"]), timeout=30)
        (tmp_path / "c.csv").write_bytes(rows.content)
        obs = lp.aggregate(str(tmp_path / "c.csv"), parse_domain("0..9"))
        np.testing.assert_array_equal(obs.blocks[0].count_vector(), expected)
        stats = httpx.get(f"{url}/v1/collections/ages", headers=_auth(info["analyst_token"]), timeout=30).json()
        assert stats["ingest"]["reports"] == n_clients * n_batches * size
        assert stats["ingest"]["batches"] == n_clients * n_batches
    finally:
        proc.kill()
        proc.wait()


CHROMIUM = "/usr/bin/chromium"


def test_dashboard_in_headless_chromium(tmp_path):
    """The dashboard page, rendered by a real browser (chromium, installed by `make test`'s
    browser stamp): its screenshot is a PNG with the estimates' coloured figures in it, and the page
    it drew (served HTML, no script) has each collection's policy as a table (not JSON)."""
    assert os.path.exists(CHROMIUM), "chromium is missing: run `make browser` (the test target installs it)"
    import httpx
    import uvicorn
    from PIL import Image
    port = free_port()
    tc, collector = _service(str(tmp_path / "dash.sqlite"))
    server = uvicorn.Server(uvicorn.Config(tc.app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started
        url = f"http://127.0.0.1:{port}"
        rng = np.random.default_rng(11)
        info = httpx.post(f"{url}/v1/collections", headers=_auth(ADMIN), timeout=30, json={
            "name": "ages", "domain": "0..19", "policy": {"mechanisms": ["krr"], "max_eps": 3}}).json()
        with Client(url, "ages", info["ingest_token"]) as c:
            c.submit(rng.binomial(19, 0.4, 3000), "krr(eps=3.0)", "0..19", rng=rng, batch_size=1000)
        box = "bbox(40.70,-74.02,40.74,-73.98,1)"
        geo = httpx.post(f"{url}/v1/collections", headers=_auth(ADMIN), timeout=30, json={
            "name": "nyc", "domain": box, "policy": {"mechanisms": ["planar-geometric"], "max_eps_geo": 2}}).json()
        pts = np.column_stack([rng.normal(40.72, 0.005, 500), rng.normal(-74.0, 0.005, 500)])
        pts = np.clip(pts, [40.7001, -74.0199], [40.7399, -73.9801])
        with Client(url, "nyc", geo["ingest_token"]) as c:
            c.submit(pts, "planar-geometric(eps=1.0)", box, rng=rng)
        shot = tmp_path / "dashboard.png"
        profile = tmp_path / "chromium-profile"
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--hide-scrollbars", f"--user-data-dir={profile}", "--window-size=1200,2200",
               f"--screenshot={shot}", f"{url}/dashboard?token={ADMIN}"]
        res = subprocess.run(cmd, capture_output=True, timeout=180)
        assert shot.exists(), res.stderr.decode(errors="replace")[-2000:]
        img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
        assert img.shape[0] >= 2000 and img.shape[1] >= 1100
        assert img.std() > 10  # not blank
        r, g, b = img[..., 0], img[..., 1], img[..., 2]
        blue = (b > 120) & (b - r > 60) & (b - g > 20)             # the estimate and its band (tab:blue)
        heat = (np.max(img, -1) - np.min(img, -1) > 80) & ~blue    # the heatmap's YlOrRd colours
        assert blue.sum() > 500, blue.sum()
        assert heat.sum() > 2000, heat.sum()
        # the page has no script: what the browser drew is the served HTML
        dom = httpx.get(f"{url}/dashboard", params={"token": ADMIN}, timeout=30).text
        assert dom.count('<table class="policy">') == 2
        assert "<th>allowed mechanisms</th><td>planar-geometric</td>" in dom
        assert "<th>largest LDP level ε</th><td>3.0</td>" in dom
        assert '{"mechanisms"' not in dom and "&quot;mechanisms" not in dom
    finally:
        server.should_exit = True
        thread.join(30)
        collector.store.close()
