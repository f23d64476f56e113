"""The collector's HTTP layer reads requests strictly: every bad request below is refused with its
status and one line ``{"error": "..."}``, never a 500 and never a stack trace; slow clients on a
real loopback server are cut off by the header and body deadlines."""
from __future__ import annotations

import json
import socket
import threading
import time
import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from localpriv.service import free_port
from localpriv.service.app import ServerLimits, create_app, server_config
from localpriv.service.core import Collector
from localpriv.service.storage import open_store

ADMIN = "test-admin-token-0123456789"
POLICY = {"mechanisms": ["krr", "oue"], "max_eps": 2.0}


def _auth(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def svc(tmp_path):
    collector = Collector(open_store(str(tmp_path / "c.sqlite")), ADMIN)
    tc = TestClient(create_app(collector, 1 << 20), raise_server_exceptions=False)
    r = tc.post("/v1/collections", headers=_auth(ADMIN),
                json={"name": "ages", "domain": "0..9", "policy": POLICY})
    assert r.status_code == 201, r.text
    return tc, collector, r.json()


def _one_line(r, status):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err and "\n" not in err and "Traceback" not in err and all(c.isprintable() for c in err)
    return err


def _collection(**over):
    body = {"name": "c1", "domain": "0..9", "policy": dict(POLICY), "keep_raw": False}
    body.update(over)
    return body


BAD_COLLECTIONS = [
    ("unknown top key", _collection(extra=1)),
    ("misspelt policy key", _collection(policy={"mechanisms": ["krr"], "max_eps": 10, "max_geo_eps": 0.1})),
    ("string for a number", _collection(policy={"mechanisms": ["krr"], "max_eps": "2"})),
    ("bool for a number", _collection(policy={"mechanisms": ["krr"], "max_eps": True})),
    ("null floor", _collection(policy={"mechanisms": ["krr"], "max_eps": 2, "min_eps": None})),
    ("number for a bool", _collection(keep_raw=1)),
    ("string for a bool", _collection(keep_raw="true")),
    ("number for a name", _collection(name=5)),
    ("list of non-strings", _collection(policy={"mechanisms": [1], "max_eps": 2})),
    ("policy not an object", _collection(policy=["krr"])),
] + [(f"name {n!r}", _collection(name=n)) for n in
     ["nl\n", "t\tab", "nul\x00", "rtl\u202e", "zw\u200b", "é", "a b", "", "-lead", "x" * 65, "x" * 10_000]]


@pytest.mark.parametrize("why,body", BAD_COLLECTIONS, ids=[w for w, _ in BAD_COLLECTIONS])
def test_bad_collections_refused(svc, why, body):
    tc, collector, _ = svc
    _one_line(tc.post("/v1/collections", headers=_auth(ADMIN), json=body), 422)
    assert collector.names() == ["ages"]


def test_misspelt_policy_key_is_named(svc):
    tc, _, _ = svc
    err = _one_line(tc.post("/v1/collections", headers=_auth(ADMIN), json=_collection(
        policy={"mechanisms": ["krr"], "max_eps": 10, "max_geo_eps": 0.1})), 422)
    assert "max_geo_eps" in err


def test_integer_accepted_for_a_float(svc):
    tc, _, _ = svc
    r = tc.post("/v1/collections", headers=_auth(ADMIN), json=_collection(policy={"mechanisms": ["krr"], "max_eps": 2}))
    assert r.status_code == 201 and r.json()["policy"]["max_eps"] == 2.0


def _batch(**over):
    body = {"batch_id": "b1", "groups": [{"mechanism": "krr(eps=1.0)", "reports": [1, 2]}]}
    body.update(over)
    return body


BAD_BATCHES = [
    ("unknown top key", _batch(extra=1)),
    ("unknown group key", _batch(groups=[{"mechanism": "krr(eps=1.0)", "reports": [1], "x": 1}])),
    ("string report", _batch(groups=[{"mechanism": "krr(eps=1.0)", "reports": ["2"]}])),
    ("bool report", _batch(groups=[{"mechanism": "krr(eps=1.0)", "reports": [True]}])),
    ("float index", _batch(groups=[{"mechanism": "krr(eps=1.0)", "reports": [2.0]}])),
    ("number for a spec", _batch(groups=[{"mechanism": 5, "reports": [1]}])),
    ("number id", _batch(batch_id=8)),
    ("uppercase hex", _batch(groups=[{"mechanism": "oue(eps=1.0)", "reports": ["FF00"]}])),
    ("hex with space", _batch(groups=[{"mechanism": "oue(eps=1.0)", "reports": [" ff00"]}])),
    ("hex with newline", _batch(groups=[{"mechanism": "oue(eps=1.0)", "reports": ["ff00\n"]}])),
] + [(f"id {b!r}", _batch(batch_id=b)) for b in ["n8\n", "t\t", "z\x00", "r\u202e", "", "x" * 129, "é"]]


@pytest.mark.parametrize("why,body", BAD_BATCHES, ids=[w for w, _ in BAD_BATCHES])
def test_bad_batches_refused(svc, why, body):
    tc, collector, info = svc
    _one_line(tc.post("/v1/collections/ages/batches", headers=_auth(info["ingest_token"]), json=body), 422)
    assert collector.store.counts("ages") == (0, [])


@pytest.mark.parametrize("last", range(0xC1, 0x100, 0x0D))  # every k=10 report whose low 6 bits are set
def test_padded_bit_vectors_refused_with_their_row(svc, last):
    tc, collector, info = svc
    good = f"ff{last & 0xC0:02x}"
    body = _batch(groups=[{"mechanism": "oue(eps=1.0)", "reports": [good, good, f"ff{last:02x}"]}])
    err = _one_line(tc.post("/v1/collections/ages/batches", headers=_auth(info["ingest_token"]), json=body), 422)
    assert "report 3" in err and "padding" in err
    assert collector.store.counts("ages") == (0, [])
    r = tc.post("/v1/collections/ages/batches", headers=_auth(info["ingest_token"]),
                json=_batch(batch_id="ok", groups=[{"mechanism": "oue(eps=1.0)", "reports": [good]}]))
    assert r.status_code == 200, r.text


RAW_BODIES = [
    ("nested arrays", b"[" * 10_000 + b"]" * 10_000, 422),
    ("nested objects", b'{"a":' * 10_000 + b"1" + b"}" * 10_000, 422),
    ("nested in a report", b'{"batch_id":"d","groups":[{"mechanism":"krr(eps=1.0)","reports":' + b"[" * 5000
     + b"1" + b"]" * 5000 + b"}]}", 422),
    ("unclosed", b'{"batch_id": "x", "groups": [', 422),
    ("not utf-8", b'{"batch_id": "\xff"}', 422),
    ("NaN", b'{"batch_id":"n","groups":[{"mechanism":"krr(eps=1.0)","reports":[NaN]}]}', 422),
    ("duplicate key", b'{"batch_id":"a","batch_id":"b","groups":[]}', 422),
    ("huge body", b"[" + b"1," * (1 << 20) + b"1]", 413),
    ("empty", b"", 422),
]


@pytest.mark.parametrize("why,body,status", RAW_BODIES, ids=[w for w, _, _ in RAW_BODIES])
@pytest.mark.parametrize("path", ["/v1/collections", "/v1/collections/ages/batches"])
def test_malformed_bodies_answer_4xx_in_one_line(svc, why, body, status, path):
    tc, _, info = svc
    token = ADMIN if path == "/v1/collections" else info["ingest_token"]
    _one_line(tc.post(path, headers={**_auth(token), "Content-Type": "application/json"}, content=body), status)


BAD_QUERIES = [
    ("/v1/collections/ages/estimate?level=0.9&level=0.5", 422),
    ("/v1/collections/ages/estimate?level=nan", 422),
    ("/v1/collections/ages/estimate?level=0.9_5", 422),
    ("/v1/collections/ages/estimate?level=%200.9", 422),
    ("/v1/collections/ages/estimate?level=1", 422),
    ("/v1/collections/ages/estimate?estimator=ibu%0A", 422),
    ("/v1/collections/ages/estimate?stats=mean%0A", 422),
    ("/v1/collections/ages/estimate?strength=1&strength=2", 422),
    ("/v1/collections/ages/estimate?bad%0Akey=1", 422),
    ("/v1/collections/ages/estimate?strength=" + "1" * 300, 422),
    ("/v1/collections/ages/counts?format=csv%0A", 422),
    ("/v1/collections/ages/counts?other=1", 422),
    ("/v1/collections/ages?x=1", 422),
    ("/v1/collections/ages%0A", 404),
    ("/v1/collections/ag%00es", 404),
    ("/v1/collections/" + "a" * 65, 404),
    ("/no/such/path", 404),
]


@pytest.mark.parametrize("url,status", BAD_QUERIES, ids=[u for u, _ in BAD_QUERIES])
def test_bad_queries_and_paths(svc, url, status):
    tc, _, info = svc
    tc.post("/v1/collections/ages/batches", headers=_auth(info["ingest_token"]), json=_batch())
    _one_line(tc.get(url, headers=_auth(info["analyst_token"])), status)


@pytest.mark.parametrize("token", ["a\tb" * 3, "x" * 257, "tok\u00e9n"])
def test_malformed_tokens_refused(svc, token):
    tc, _, _ = svc
    _one_line(tc.get("/v1/collections", headers={"Authorization": "Bearer " + "y" * 300}), 401)
    _one_line(tc.get("/dashboard", params={"token": token}), 401)


def test_a_newline_name_is_not_a_second_batch(svc):
    tc, collector, info = svc
    ok = tc.post("/v1/collections/ages/batches", headers=_auth(info["ingest_token"]), json=_batch(batch_id="n8"))
    assert ok.status_code == 200
    _one_line(tc.post("/v1/collections/ages/batches", headers=_auth(info["ingest_token"]),
                      json=_batch(batch_id="n8\n")), 422)
    assert collector.describe("ages")["ingest"]["batches"] == 1


# ---- a real server on loopback: slow clients ---------------------------------------------
@pytest.fixture(params=["h11", "httptools"])
def live(tmp_path, request):
    import uvicorn
    collector = Collector(open_store(str(tmp_path / "live.sqlite")), ADMIN)
    port = free_port()
    limits = ServerLimits(header_timeout=1.0, body_timeout=1.0, keep_alive=1.0, max_connections=8,
                          max_header_bytes=2048)
    server = uvicorn.Server(server_config(create_app(collector, 1 << 20, limits.body_timeout), "127.0.0.1", port,
                                          limits, request.param))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield port
    server.should_exit = True
    thread.join(10)


def _read_all(sock, limit=20.0):
    """Everything the server sends until it closes the connection (bounded by ``limit`` seconds)."""
    sock.settimeout(limit)
    data = b""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        chunk = sock.recv(4096)
        if not chunk:
            return data, True
        data += chunk
    return data, False


def test_slowloris_headers_cut_off(live):
    with socket.create_connection(("127.0.0.1", live), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        for _ in range(3):  # a header line now and then, never the blank line; within the deadline
            time.sleep(0.2)
            s.sendall(b"X-Slow: 1\r\n")
        data, closed = _read_all(s)
    assert closed and data.startswith(b"HTTP/1.1 408")
    assert json.loads(data.split(b"\r\n\r\n", 1)[1])["error"].startswith("request headers not received")


def test_silent_connection_closed(live):
    with socket.create_connection(("127.0.0.1", live), timeout=5) as s:
        data, closed = _read_all(s)
    assert closed and b"408" in data


def test_slow_body_cut_off(live):
    body = json.dumps(_batch()).encode()
    with socket.create_connection(("127.0.0.1", live), timeout=5) as s:
        s.sendall(b"POST /v1/collections HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ADMIN.encode()
                  + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        s.sendall(body[:5])  # then nothing: the rest never comes
        data, closed = _read_all(s)
    head, _, payload = data.partition(b"\r\n\r\n")
    assert closed and head.startswith(b"HTTP/1.1 408")
    assert "body not received" in json.loads(payload)["error"]


def test_a_normal_request_still_answers(live):
    import httpx
    r = httpx.get(f"http://127.0.0.1:{live}/healthz", timeout=5)
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_a_head_above_the_cap_is_refused(live):
    with socket.create_connection(("127.0.0.1", live), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"y" * 4096 + b"\r\n")
        data, closed = _read_all(s)
    assert closed and data.startswith(b"HTTP/1.1 400")


def test_requests_on_one_connection_each_get_their_head_deadline(live):
    import httpx
    with httpx.Client(base_url=f"http://127.0.0.1:{live}", timeout=5) as c:
        for _ in range(3):  # keep-alive: each request after an answer is timed from its own first byte
            assert c.get("/healthz").status_code == 200
            time.sleep(0.4)


def test_an_h2c_offer_is_served_as_http1_and_the_next_request_too(live):
    """Java's HttpClient offers ``Upgrade: h2c`` on every ``http://`` request: both parsers answer
    it as HTTP/1.1, and the connection's next request as well."""
    offer = (b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
             b"HTTP2-Settings: AAEAAEAAAAIAAAABAAMAAABkAAQBAAAAAAUAAEAA\r\n\r\n")
    plain = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", live), timeout=5) as s:
        s.sendall(offer + plain)
        data, closed = _read_all(s)
    assert closed and data.count(b"HTTP/1.1 200") == 2 and b"400" not in data.split(b"\r\n", 1)[0]


def test_a_post_with_an_h2c_offer_keeps_its_body(live):
    body = json.dumps({"name": "offered", "domain": "0..9", "policy": {"mechanisms": ["krr"], "max_eps": 2.0}}).encode()
    with socket.create_connection(("127.0.0.1", live), timeout=5) as s:
        s.sendall(b"POST /v1/collections HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings, close\r\nHost: x\r\n"
                  b"HTTP2-Settings: AAEAAEAAAAIAAAAAAAMAAAAAAAQBAAAAAAUAAEAAAAYABgAA\r\nUPGRADE: h2c\r\n"
                  b"Authorization: Bearer "
                  + ADMIN.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        data, closed = _read_all(s)
    assert closed and data.startswith(b"HTTP/1.1 201"), data[:200]
