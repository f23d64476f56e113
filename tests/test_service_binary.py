"""The binary batch body (``application/x-localpriv-reports; v=1``): the same reports give the
same checked arrays, counts and digest as in JSON (a retry in the other body is a duplicate); it is
read as strictly (kinds, widths, exact lengths, unknown keys, canonical bit vectors, ranges), each
refusal one line with nothing counted; the Python client posts it by default; the counting and
digest shortcuts equal what they replace."""
from __future__ import annotations

import hashlib
import json
import struct
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from localpriv.domains import parse_domain
from localpriv.service.app import create_app
from localpriv.service.client import Client, wire_reports
from localpriv.service.core import (
    Collector,
    batch_digest,
    decode_batch,
    decode_binary_batch,
    distinct_counts,
    read_json,
)
from localpriv.service.policy import AdmissionPolicy
from localpriv.service.storage import open_store
from localpriv.service.wire import CONTENT_TYPE, MAGIC, encode_batch, media_kind
from localpriv.utils.errors import LocalPrivError

ADMIN = "test-admin-token-0123456789"
POLICY = {"mechanisms": ["krr", "oue", "laplace"], "max_eps": 10.0}
DOMAIN = parse_domain("0..9")
ADMIT = AdmissionPolicy.from_dict(POLICY)
#: one spec per report kind: indices, bit vectors (k = 10: 6 padding bits), numbers
SPECS = ("krr(eps=1.0)", "oue(eps=1.0)", "laplace(eps=1.0)")


def _reports(spec: str, rng: np.random.Generator, n: int):
    if spec.startswith("krr"):
        return rng.integers(0, 10, n)
    if spec.startswith("oue"):
        rows = rng.integers(0, 256, (n, 2)).astype(np.uint8)
        rows[:, 1] &= 0xC0  # canonical: the padding bits are 0
        return rows
    return np.round(rng.normal(4.5, 3.0, n), 3)


def _json_body(batch_id: str, groups: list[dict]) -> bytes:
    return json.dumps({"batch_id": batch_id, "groups": [{"mechanism": g["mechanism"],
                                                         "reports": wire_reports(g["reports"])} for g in groups]}
                      ).encode()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(SPECS), st.integers(1, 40)), min_size=1, max_size=4), st.integers(0, 2**32))
def test_binary_and_json_bodies_decode_alike(groups, seed):
    rng = np.random.default_rng(seed)
    gs = [{"mechanism": spec, "reports": _reports(spec, rng, n)} for spec, n in groups]
    a = decode_batch(read_json(_json_body("b1", gs)), ADMIT, DOMAIN)
    b = decode_binary_batch(encode_batch("b1", gs)[1], ADMIT, DOMAIN)
    assert a[:2] == b[:2] and len(a[2]) == len(b[2])
    for (ma, ra), (mb, rb) in zip(a[2], b[2]):
        assert str(ma) == str(mb) and ra.dtype == rb.dtype and np.array_equal(ra, rb)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50)
       | st.lists(st.integers(-5, 70_000), min_size=1, max_size=200))
def test_distinct_counts_is_numpy_unique(values):
    r = np.asarray(values, np.int64)
    u, c = distinct_counts(r)
    eu, ec = np.unique(r, return_counts=True)
    assert u.dtype == eu.dtype and np.array_equal(u, eu) and np.array_equal(c, ec)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["krr(k=10,eps=1.0)", "oue(k=10,eps=1.0)", 'x"\\é']),
                          st.text(min_size=1, max_size=6), st.integers(1, 10**12)), max_size=20))
def test_batch_digest_is_the_digest_of_the_json_text(rows):
    rows = sorted(rows)
    expected = hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()
    assert batch_digest(rows) == expected


def test_the_example_of_the_docs():
    _ctype, body = encode_batch("b1", [{"mechanism": "krr(eps=2.0)", "reports": [17, 3, 99]}])
    header = b'{"batch_id":"b1","groups":[{"mechanism":"krr(eps=2.0)","kind":"int64","reports":3,"width":8}]}'
    assert body == (b"LPR1" + bytes([0x60, 0, 0, 0]) + header + b"  " + bytes([0x11] + [0] * 7)
                    + bytes([0x03] + [0] * 7) + bytes([0x63] + [0] * 7))


def test_media_types():
    assert media_kind(None) == "json" and media_kind("application/json; charset=utf-8") == "json"
    assert media_kind(CONTENT_TYPE) == "binary" and media_kind("Application/X-Localpriv-Reports;v=1") == "binary"
    assert media_kind("application/x-localpriv-reports") is None
    assert media_kind("application/x-localpriv-reports; v=2") is None
    assert media_kind("application/x-localpriv-reports; v=1; x=2") is None


@pytest.fixture
def svc(tmp_path):
    collector = Collector(open_store(str(tmp_path / "c.sqlite")), ADMIN, refresh_delay=None)
    tc = TestClient(create_app(collector, 1 << 16), raise_server_exceptions=False)
    r = tc.post("/v1/collections", headers={"Authorization": f"Bearer {ADMIN}"},
                json={"name": "ages", "domain": "0..9", "policy": POLICY})
    assert r.status_code == 201, r.text
    return tc, collector, r.json()


def _post(tc, info, body: bytes, content_type: str = CONTENT_TYPE, path: str = "/v1/collections/ages/batches"):
    return tc.post(path, content=body, headers={"Authorization": f"Bearer {info['ingest_token']}",
                                                "Content-Type": content_type})


def _packed(header: dict | bytes, payload: bytes = b"", size: int | None = None) -> bytes:
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    return MAGIC + struct.pack("<I", len(head) if size is None else size) + head + payload


def _head(**over):
    g = {"mechanism": "krr(eps=1.0)", "kind": "int64", "reports": 2, "width": 8}
    g.update(over.pop("group", {}))
    return {"batch_id": "b1", "groups": [g], **over}


I8 = np.array([1, 2], "<i8").tobytes()
BAD = [
    ("no magic", b"LPR2" + _packed(_head(), I8)[4:]),
    ("json body", json.dumps({"batch_id": "b1", "groups": []}).encode()),
    ("short", MAGIC + b"\x01"),
    ("header past the body", _packed(_head(), I8, size=10_000)),
    ("header too large", _packed(_head(), I8, size=70_000)),
    ("header not json", _packed(b"{nope", I8)),
    ("header a list", _packed(b"[1, 2]", I8)),
    ("unknown header key", _packed(_head(extra=1), I8)),
    ("unknown group key", _packed(_head(group={"x": 1}), I8)),
    ("missing width", _packed({"batch_id": "b1", "groups": [{"mechanism": "krr(eps=1.0)", "kind": "int64",
                                                            "reports": 2}]}, I8)),
    ("bool count", _packed(_head(group={"reports": True}), I8)),
    ("zero reports", _packed(_head(group={"reports": 0}), b"")),
    ("unknown kind", _packed(_head(group={"kind": "int32"}), I8)),
    ("width 4 for numbers", _packed(_head(group={"width": 4}), I8)),
    ("floats for an index", _packed(_head(group={"kind": "float64"}), np.array([1.0, 2.0]).tobytes())),
    ("bits for an index", _packed(_head(group={"kind": "binary", "width": 2}), b"\xff\x00" * 2)),
    ("numbers for bits", _packed(_head(group={"mechanism": "oue(eps=1.0)"}), I8)),
    ("wrong bit width", _packed(_head(group={"mechanism": "oue(eps=1.0)", "kind": "binary", "width": 3}),
                                b"\xff\x00\x00" * 2)),
    ("padded bits", _packed(_head(group={"mechanism": "oue(eps=1.0)", "kind": "binary", "width": 2}),
                            b"\xff\xc0\xff\xc1")),
    ("too few bytes", _packed(_head(), I8[:12])),
    ("trailing bytes", _packed(_head(), I8 + b"\x00")),
    ("index out of range", _packed(_head(), np.array([1, 10], "<i8").tobytes())),
    ("negative index", _packed(_head(), np.array([-1, 1], "<i8").tobytes())),
    ("NaN", _packed(_head(group={"mechanism": "laplace(eps=1.0)", "kind": "float64"}),
                    np.array([1.0, np.nan]).tobytes())),
    ("over max_eps", _packed(_head(group={"mechanism": "krr(eps=12.0)"}), I8)),
    ("not allowed", _packed(_head(group={"mechanism": "sue(eps=1.0)", "kind": "binary", "width": 2}),
                            b"\xff\x00" * 2)),
    ("bad batch id", _packed(_head(batch_id="a b"), I8)),
    ("duplicate header key", _packed(b'{"batch_id":"b1","batch_id":"b2","groups":[]}', I8)),
]


@pytest.mark.parametrize("why,body", BAD, ids=[w for w, _ in BAD])
@pytest.mark.parametrize("routed", [False, True])
def test_bad_binary_batches_refused_in_one_line(svc, why, body, routed):
    tc, collector, info = svc
    if routed:
        tc.app.state.direct_batch = None  # through FastAPI's routing
    r = _post(tc, info, body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err and "\n" not in err and "Traceback" not in err
    assert collector.store.counts("ages") == (0, [])
    assert collector.describe("ages")["ingest"]["refused_batches"] == 1


def test_bad_rows_are_named_and_claimed_reports_counted(svc):
    tc, collector, info = svc
    r = _post(tc, info, _packed(_head(group={"reports": 3}), np.array([1, 2, 12], "<i8").tobytes()))
    assert r.status_code == 422 and "row 3" in r.json()["error"]
    r = _post(tc, info, _packed(_head(group={"mechanism": "oue(eps=1.0)", "kind": "binary", "width": 2}),
                                b"\xff\xc0\xff\xc1"))
    assert r.status_code == 422 and "report 2 sets padding bits" in r.json()["error"]
    assert collector.describe("ages")["ingest"]["refused_reports"] == 5


@pytest.mark.parametrize("content_type", ["application/x-localpriv-reports; v=2", "application/x-localpriv-reports"])
def test_other_versions_answer_415(svc, content_type):
    tc, collector, info = svc
    r = _post(tc, info, _packed(_head(), I8), content_type)
    assert r.status_code == 415 and "v=1" in r.json()["error"]
    assert collector.describe("ages")["ingest"]["batches"] == 0


def test_a_retry_in_the_other_body_is_a_duplicate(svc):
    tc, collector, info = svc
    rng = np.random.default_rng(3)
    gs = [{"mechanism": s, "reports": _reports(s, rng, 25)} for s in SPECS]
    first = _post(tc, info, encode_batch("x1", gs)[1])
    assert first.status_code == 200 and first.json()["status"] == "accepted"
    again = _post(tc, info, _json_body("x1", gs), "application/json")
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    other = _post(tc, info, encode_batch("x1", gs[:2])[1])
    assert other.status_code == 409
    json_first = _post(tc, info, _json_body("x2", gs), "application/json")
    assert json_first.json()["status"] == "accepted"
    assert _post(tc, info, encode_batch("x2", gs)[1]).json()["status"] == "duplicate"
    assert collector.describe("ages")["ingest"]["reports"] == 150


def test_the_client_posts_binary_by_default_and_json_on_request(svc):
    tc, collector, info = svc
    values = np.arange(200) % 10
    sent = []
    original = tc.request

    def spy(method, url, **kw):
        sent.append(kw.get("headers", {}).get("Content-Type"))
        return original(method, url, **kw)
    tc.request = spy
    for wire in ("binary", "json"):
        c = Client("http://testserver", "ages", info["ingest_token"], http=tc, wire=wire)
        res = c.submit(values, "oue(eps=1.0)", domain="0..9", rng=np.random.default_rng(7), batch_size=64)
        assert res == {"reports": 200, "batches": 4, "duplicates": 0}
        c.submit(values, "krr(eps=1.0)", domain="0..9", rng=np.random.default_rng(7), batch_size=64)
    assert sent == [CONTENT_TYPE] * 8 + ["application/json"] * 8
    version, rows = collector.store.counts("ages")
    assert sum(k for _m, _r, k in rows) == 800
    # the same seeds in both bodies: every stored count is even (each report counted once per body)
    assert all(k % 2 == 0 for _m, _r, k in rows)
    with pytest.raises(LocalPrivError, match="wire"):
        Client("http://testserver", "ages", info["ingest_token"], http=tc, wire="xml")


def test_a_cancelled_request_waits_for_its_ingest_thread():
    import asyncio
    import concurrent.futures
    import threading
    import time

    from localpriv.service.app import in_thread

    done = threading.Event()

    def work() -> int:
        time.sleep(0.2)
        done.set()
        return 1

    async def main() -> None:
        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            assert await in_thread(ex, lambda: 2) == 2
            task = asyncio.ensure_future(in_thread(ex, work))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert done.is_set()  # the cancellation came after the thread's work
    asyncio.run(main())
