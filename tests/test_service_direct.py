"""The batch post answered without FastAPI's routing layers (``CollectorApp``'s direct path) gives
the answers of the routed endpoint, request for request; the refresh debouncer calls once per quiet
period however often it is poked; the JSON depth is measured whenever it could pass the limit."""
from __future__ import annotations

import json
import re
import threading
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from localpriv.service.app import create_app
from localpriv.service.core import MAX_JSON_DEPTH, Collector, json_depth, read_json
from localpriv.service.jobs import Debouncer
from localpriv.service.storage import open_store
from localpriv.utils.errors import LocalPrivError

ADMIN = "test-admin-token-0123456789"
POLICY = {"mechanisms": ["krr", "oue"], "max_eps": 2.0,
          "rate_limit": {"period": 3600, "requests": 1000, "reports": 60}}
SPEC = "krr(eps=1.0)"


def _service(tmp_path, name: str, direct: bool):
    collector = Collector(open_store(str(tmp_path / f"{name}.sqlite")), ADMIN, refresh_delay=None)
    app = create_app(collector, 4096)
    if not direct:
        app.state.direct_batch = None  # every request through FastAPI's routing
    tc = TestClient(app, raise_server_exceptions=False)
    r = tc.post("/v1/collections", headers={"Authorization": f"Bearer {ADMIN}"},
                json={"name": "ages", "domain": "0..9", "policy": POLICY})
    assert r.status_code == 201, r.text
    return tc, r.json()


def _batch(batch_id: str, reports: list, spec: str = SPEC) -> bytes:
    return json.dumps({"batch_id": batch_id, "groups": [{"mechanism": spec, "reports": reports}]}).encode()


#: (path, token: "ingest" / "analyst" / "none" / "bad" / "malformed", body): the same on both services
REQUESTS = [
    ("/v1/collections/ages/batches", "ingest", _batch("b1", [1, 2, 3])),
    ("/v1/collections/ages/batches", "ingest", _batch("b1", [1, 2, 3])),  # duplicate
    ("/v1/collections/ages/batches", "ingest", _batch("b1", [1, 2])),  # 409: the id reused
    ("/v1/collections/ages/batches", "none", _batch("b2", [1])),  # 401
    ("/v1/collections/ages/batches", "bad", _batch("b2", [1])),  # 401
    ("/v1/collections/ages/batches", "malformed", _batch("b2", [1])),  # 401
    ("/v1/collections/ages/batches", "analyst", _batch("b2", [1])),  # 403
    ("/v1/collections/nope/batches", "ingest", _batch("b2", [1])),  # 401: the token is not of that collection
    ("/v1/collections/bad%20name/batches", "ingest", _batch("b2", [1])),  # 404
    ("/v1/collections/ages/batches?x=1", "ingest", _batch("b2", [1])),  # 422: a query parameter
    ("/v1/collections/ages/batches", "ingest", b"{not json"),  # 422
    ("/v1/collections/ages/batches", "ingest", b"[" * 40 + b"]" * 40),  # 422: too deep
    ("/v1/collections/ages/batches", "ingest", _batch("b3", [1, True])),  # 422: a bool
    ("/v1/collections/ages/batches", "ingest", _batch("b3", [10])),  # 422: outside the output space
    ("/v1/collections/ages/batches", "ingest", _batch("b3", [1], "krr(eps=5.0)")),  # 422: over max_eps
    ("/v1/collections/ages/batches", "ingest", b'{"batch_id": "b3", "groups": [], "x": 1}'),  # 422: unknown key
    ("/v1/collections/ages/batches", "ingest", _batch("b4", list(range(10)) * 300)),  # 413: above the cap
    ("/v1/collections/ages/batches", "ingest", _batch("b5", [0] * 100)),  # 422: above the reports allowance
    ("/v1/collections/ages/batches", "ingest", _batch("b6", [0] * 50)),
    ("/v1/collections/ages/batches", "ingest", _batch("b7", [0] * 50)),  # 429: past the reports per period
    ("/v1/collections/ages/batches/", "ingest", _batch("b8", [1])),  # routed: 307 to the batch path, followed
]


def _same(a, b) -> None:
    """Equal answers; the seconds to a rate window's end may differ by one (the clock moves between)."""
    ta, tb = (re.sub(r"retry in \d+ s", "retry in N s", json.dumps(r.json())) for r in (a, b))
    assert (a.status_code, ta) == (b.status_code, tb)
    for key in ("connection", "content-type"):
        assert a.headers.get(key) == b.headers.get(key), key
    ra, rb = a.headers.get("retry-after"), b.headers.get("retry-after")
    assert (ra is None) == (rb is None) and (ra is None or abs(int(ra) - int(rb)) <= 1)


def _headers(info: dict, which: str) -> dict:
    token = {"ingest": info["ingest_token"], "analyst": info["analyst_token"], "bad": "x" * 43,
             "malformed": "a b"}.get(which)
    return {} if token is None else {"Authorization": f"Bearer {token}"}


def test_direct_and_routed_batch_posts_answer_alike(tmp_path):
    direct, info_d = _service(tmp_path, "direct", True)
    routed, info_r = _service(tmp_path, "routed", False)
    for path, which, body in REQUESTS:
        a = direct.post(path, content=body, headers=_headers(info_d, which))
        b = routed.post(path, content=body, headers=_headers(info_r, which))
        _same(a, b)
    # the same counts and statistics on both sides
    for tc, info in ((direct, info_d), (routed, info_r)):
        got = tc.get("/v1/collections/ages", headers={"Authorization": f"Bearer {info['analyst_token']}"}).json()
        assert got["ingest"]["reports"] == 54 and got["ingest"]["duplicate_batches"] == 1


def test_debouncer_calls_once_per_quiet_period():
    calls: list[str] = []
    done = {"a": threading.Event(), "b": threading.Event()}

    def fn(name: str) -> None:
        calls.append(name)
        done[name].set()
    d = Debouncer(0.05, fn)
    try:
        for _ in range(20):  # a name already waiting: its pokes do not wake the thread
            d.poke("a")
        assert done["a"].wait(10)
        d.poke("b")  # a new name wakes it
        assert done["b"].wait(10)
    finally:
        d.close()
    assert calls == ["a", "b"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.integers(0, 9) | st.text("[]{}\"\\ab", max_size=4),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("ab[{", max_size=2), inner,
                                                                                max_size=2), max_leaves=10),
       st.integers(0, 2 * MAX_JSON_DEPTH))
def test_read_json_refuses_exactly_past_the_depth(value, wraps):
    for _ in range(wraps):
        value = [value]
    body = json.dumps(value).encode()
    if json_depth(body) > MAX_JSON_DEPTH:
        try:
            read_json(body)
        except LocalPrivError as exc:
            assert "levels deep" in str(exc)
        else:
            raise AssertionError("a body past the depth was parsed")
    else:
        assert read_json(body) == value
