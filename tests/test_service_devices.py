"""Per-device credentials, budgets charged at ingest, rate limits and the privacy report of the
collector (docs/decisions/0053-device-budgets-at-ingest.md, 0054-rate-limits-per-token.md): the
ledger never under-counts a device, under concurrent ingest and under SIGKILL of a real server on
loopback; over-budget and rate-limited batches are refused and counted; requests are read strictly;
collections with one shared ingest token work as before."""
from __future__ import annotations

import json
import math
import os
import signal
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from localpriv.domains import parse_domain
from localpriv.mechanisms import parse
from localpriv.service import free_port, launch
from localpriv.service.app import create_app
from localpriv.service.client import Client
from localpriv.service.core import Collector
from localpriv.service.limits import RateLimited, RateLimiter
from localpriv.service.policy import AdmissionPolicy, RateLimit
from localpriv.service.storage import Caps, OverBudget, open_store
from localpriv.service.words import explain_level
from localpriv.utils.errors import LocalPrivError

ADMIN = "test-admin-token-0123456789"
KRR1 = "krr(eps=1.0)"


def _auth(token):
    return {"Authorization": f"Bearer {token}"}


class Clock:
    """A settable clock for the rate limiter (no sleeping, no timing)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _service(tmp_path, clock=None):
    collector = Collector(open_store(str(tmp_path / "c.sqlite")), ADMIN, refresh_delay=None)
    if clock is not None:
        collector.limiter = RateLimiter(clock=clock)
    return TestClient(create_app(collector), raise_server_exceptions=False), collector


def _create(tc, name="ages", **policy):
    body = {"name": name, "domain": "0..9", "policy": {"mechanisms": ["krr", "lgrr"], "max_eps": 2, **policy}}
    r = tc.post("/v1/collections", headers=_auth(ADMIN), json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _device(tc, name="ages"):
    r = tc.post(f"/v1/collections/{name}/enrollment-tokens", headers=_auth(ADMIN))
    assert r.status_code == 201, r.text
    r = tc.post(f"/v1/collections/{name}/devices", headers=_auth(r.json()["enrollment_token"]))
    assert r.status_code == 201, r.text
    return r.json()


def _post(tc, token, batch_id, reports=(1,), spec=KRR1, name="ages"):
    return tc.post(f"/v1/collections/{name}/batches", headers=_auth(token),
                   json={"batch_id": batch_id, "groups": [{"mechanism": spec, "reports": list(reports)}]})


def _ledger(store, name):
    """Per device: (charged in spending, charged on its batches, batches in spending, batches)."""
    with store.transaction() as c:
        spent = {d: (float(e), int(b)) for d, e, b in c.execute(
            "SELECT device_id, SUM(eps), SUM(batches) FROM spending WHERE collection = ? GROUP BY device_id",
            (name,)).fetchall()}
        on_batches = {d: (float(e), int(k)) for d, e, k in c.execute(
            "SELECT device_id, SUM(eps), COUNT(*) FROM batches WHERE collection = ? AND device_id IS NOT NULL "
            "GROUP BY device_id", (name,)).fetchall()}
    return spent, on_batches


# ---------------------------------------------------------------------------------------------
# policy: budgets and rate limits are data, read strictly
# ---------------------------------------------------------------------------------------------
BAD_POLICIES = [
    ("unknown budget key", {"budget": {"period": 60, "eps": 1, "epsilon": 2}}),
    ("unknown rate key", {"rate_limit": {"period": 60, "requests": 1, "burst": 2}}),
    ("period missing", {"budget": {"eps": 1}}),
    ("period zero", {"budget": {"period": 0, "eps": 1}}),
    ("period too long", {"budget": {"period": 400 * 86400, "eps": 1}}),
    ("float period", {"budget": {"period": 60.5, "eps": 1}}),
    ("negative cap", {"budget": {"period": 60, "eps": -1}}),
    ("string cap", {"budget": {"period": 60, "eps": "1"}}),
    ("group cap without group", {"budget": {"period": 60, "group_eps": 2}}),
    ("bad group name", {"budget": {"period": 60, "group": "a b"}}),
    ("rate without counts", {"rate_limit": {"period": 60}}),
    ("rate zero", {"rate_limit": {"period": 60, "requests": 0}}),
    ("bool rate", {"rate_limit": {"period": 60, "requests": True}}),
]


@pytest.mark.parametrize("why,extra", BAD_POLICIES, ids=[w for w, _ in BAD_POLICIES])
def test_bad_budgets_and_rate_limits_refused(tmp_path, why, extra):
    tc, _ = _service(tmp_path)
    r = tc.post("/v1/collections", headers=_auth(ADMIN),
                json={"name": "c", "domain": "0..9", "policy": {"mechanisms": ["krr"], "max_eps": 2, **extra}})
    assert r.status_code == 422, (why, r.text)
    assert "\n" not in r.json()["error"]
    with pytest.raises(LocalPrivError):  # the library refuses it too, in one line
        AdmissionPolicy.from_dict({"mechanisms": ["krr"], "max_eps": 2, **extra})


def test_policy_round_trip_and_old_policies_unchanged():
    old = {"mechanisms": ["krr"], "max_eps": 2.0, "min_eps": 0.0, "max_eps_geo": None}
    assert AdmissionPolicy.from_dict(old).to_dict() == old  # no new keys in an old policy
    new = {**old, "budget": {"period": 60, "eps": 3.0, "group": "g", "group_eps": 5.0, "devices_only": True},
           "rate_limit": {"period": 10, "requests": 5, "reports": None}}
    assert AdmissionPolicy.from_json(AdmissionPolicy.from_dict(new).to_json()).to_dict() == new


def test_a_group_states_one_period_and_one_cap(tmp_path):
    tc, _ = _service(tmp_path)
    _create(tc, "a", budget={"period": 3600, "group": "g", "group_eps": 4})
    r = tc.post("/v1/collections", headers=_auth(ADMIN), json={
        "name": "b", "domain": "0..9",
        "policy": {"mechanisms": ["krr"], "max_eps": 2, "budget": {"period": 60, "group": "g", "group_eps": 4}}})
    assert r.status_code == 422 and "same budget.period and budget.group_eps" in r.json()["error"]
    _create(tc, "b", budget={"period": 3600, "eps": 1, "group": "g", "group_eps": 4})  # own cap may differ


# ---------------------------------------------------------------------------------------------
# old collections: one shared ingest token, as before
# ---------------------------------------------------------------------------------------------
def test_shared_ingest_token_works_unchanged_and_is_reported_unattributed(tmp_path):
    tc, collector = _service(tmp_path)
    info = _create(tc)
    assert "budget" not in info["policy"] and "rate_limit" not in info["policy"]
    for i in range(3):
        r = _post(tc, info["ingest_token"], f"s{i}", reports=[1, 2, 3])
        assert r.status_code == 200 and r.json()["status"] == "accepted", r.text
    assert _post(tc, info["ingest_token"], "s0", reports=[1, 2, 3]).json()["status"] == "duplicate"
    rep = tc.get("/v1/collections/ages/privacy", headers=_auth(info["analyst_token"])).json()
    assert rep["unattributed"]["batches"] == 3 and rep["unattributed"]["reports"] == 9
    assert "charged to no device" in rep["unattributed"]["meaning"]
    assert rep["devices"]["registered"] == 0 and rep["devices"]["lifetime"]["devices"] == 0
    assert rep["devices"]["lifetime"]["max"] is None
    assert rep["mechanisms"][0]["reports"] == 9
    assert math.isclose(rep["mechanisms"][0]["epsilon"], 1.0, rel_tol=1e-9)
    assert _ledger(collector.store, "ages") == ({}, {})


def test_migration_3_upgrades_a_version_2_store(tmp_path):
    url = str(tmp_path / "c.sqlite")
    store = open_store(url)
    with store.transaction(write=True) as c:  # a store as schema 2 left it
        c.execute("DELETE FROM schema_version WHERE version >= 3")
        for table in ("spending", "devices", "enrollments"):
            c.execute(f"DROP TABLE {table}")
        c.execute("ALTER TABLE batches DROP COLUMN device_id")
        c.execute("ALTER TABLE batches DROP COLUMN eps")
    store.close()
    store = open_store(url)
    assert store.schema_version() == 3
    with store.transaction(write=True) as c:  # and running the step again changes nothing
        c.execute("DELETE FROM schema_version WHERE version >= 3")
    store.close()
    store = open_store(url)  # migrates 2 -> 3 over tables and columns that exist
    assert store.schema_version() == 3
    assert store.migrate() == 3
    store.close()


# ---------------------------------------------------------------------------------------------
# devices and budgets
# ---------------------------------------------------------------------------------------------
def test_device_budget_per_collection(tmp_path):
    tc, collector = _service(tmp_path)
    info = _create(tc, budget={"period": 3600, "eps": 3})
    dev = _device(tc)
    assert dev["group"] == "collection/ages" and len(dev["device_token"]) >= 40
    assert _post(tc, dev["device_token"], "d1", reports=[1, 2]).status_code == 200  # charged 2
    assert _post(tc, dev["device_token"], "d1", reports=[1, 2]).json()["status"] == "duplicate"  # not again
    r = _post(tc, dev["device_token"], "d2", reports=[3, 4])  # 2 + 2 > 3
    assert r.status_code == 403 and "over budget" in r.json()["error"] and "eps=3" in r.json()["error"]
    assert "\n" not in r.json()["error"]
    assert _post(tc, dev["device_token"], "d3", reports=[5]).status_code == 200  # 3 <= 3: exactly the cap
    stats = collector.describe("ages")["ingest"]
    assert stats["over_budget_batches"] == 1 and stats["refused_batches"] == 1 and stats["refused_reports"] == 2
    assert stats["reports"] == 3 and stats["batches"] == 2
    _, rows = collector.store.counts("ages")
    assert sorted(r for _m, r, _k in rows) == ["1", "2", "5"]  # nothing of the refused batch
    spent, on_batches = _ledger(collector.store, "ages")
    assert spent == {dev["device_id"]: (3.0, 2)} and on_batches == spent
    # a second device has its own budget, and cannot pass for the first with its batch id
    other = _device(tc)
    r = _post(tc, other["device_token"], "d1", reports=[1, 2])
    assert r.status_code == 409 and "another sender" in r.json()["error"]
    assert _post(tc, other["device_token"], "e1", reports=[1, 2, 3]).status_code == 200
    rep = tc.get("/v1/collections/ages/privacy", headers=_auth(info["analyst_token"])).json()
    assert rep["devices"]["registered"] == 2 and rep["devices"]["over_budget_refusals"] == 1
    assert rep["devices"]["period"]["devices"] == 2 and rep["devices"]["period"]["max"] == 3.0
    assert rep["devices"]["period"]["over_cap"] == 0
    assert rep["unattributed"]["batches"] == 0


@settings(max_examples=15, deadline=None)
@given(charges=st.lists(st.integers(1, 6), min_size=1, max_size=12), cap=st.integers(1, 20),
       windows=st.lists(st.booleans(), min_size=12, max_size=12))
def test_the_store_charges_exactly_what_it_counts(charges, cap, windows):
    """Batches of integer charges (exact in floats) against a cap, some in a second window: a batch
    is stored iff the device's spending in its window stays within the cap, and the ledger is the sum
    of the stored batches' charges, window by window."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"{tmp}/c.sqlite")
        store.create_collection("c", "0..1", "{}", "x" * 64, "y" * 64, False)
        spent = {0: 0, 3600: 0}
        for i, (eps, later) in enumerate(zip(charges, windows)):
            start = 3600 if later else 0
            caps = Caps(float(eps), 3600, start, float(cap))
            try:
                store.ingest("c", f"b{i}", f"d{i}", 1, [("krr(k=2,eps=1.0)", "0", 1)], None, "dev", caps)
            except OverBudget:
                assert spent[start] + eps > cap
            else:
                assert spent[start] + eps <= cap
                spent[start] += eps
        with store.transaction() as c:
            ledger = dict(c.execute("SELECT period_start, eps FROM spending WHERE device_id = 'dev'").fetchall())
            stored = c.execute("SELECT COUNT(*), COALESCE(SUM(eps), 0) FROM batches").fetchone()
            counted = c.execute("SELECT COALESCE(SUM(count), 0) FROM counts").fetchone()[0]
        assert {k: v for k, v in spent.items() if v} == ledger
        assert stored[1] == sum(spent.values()) and counted == stored[0]
        store.close()


def test_device_budget_across_the_collections_of_a_group(tmp_path):
    tc, collector = _service(tmp_path)
    budget = {"period": 3600, "group": "app", "group_eps": 3}
    _create(tc, "a", budget=budget)
    _create(tc, "b", budget=budget)
    _create(tc, "c")  # another group (its own)
    dev = _device(tc, "a")
    assert dev["group"] == "app"
    assert _post(tc, dev["device_token"], "x1", reports=[1, 2], name="a").status_code == 200
    assert _post(tc, dev["device_token"], "x1", reports=[1], name="b").status_code == 200  # same id, other collection
    r = _post(tc, dev["device_token"], "x2", reports=[1], name="b")  # 2 + 1 + 1 > 3 over the group
    assert r.status_code == 403 and "device group app" in r.json()["error"]
    assert _post(tc, dev["device_token"], "x3", reports=[1], name="c").status_code == 401  # not its group
    assert collector.describe("b")["ingest"]["over_budget_batches"] == 1
    with collector.store.transaction() as c:
        total = c.execute("SELECT SUM(eps) FROM spending WHERE device_id = ?", (dev["device_id"],)).fetchone()[0]
    assert total == 3.0


def test_devices_only_refuses_the_shared_token(tmp_path):
    tc, collector = _service(tmp_path)
    info = _create(tc, budget={"period": 60, "eps": 5, "devices_only": True})
    r = _post(tc, info["ingest_token"], "s1")
    assert r.status_code == 403 and "registered devices only" in r.json()["error"]
    assert collector.store.counts("ages") == (0, [])
    assert _post(tc, _device(tc)["device_token"], "d1").status_code == 200


def test_longitudinal_reports_charged_what_bounds_any_memo_grouping(tmp_path):
    tc, collector = _service(tmp_path)
    info = _create(tc, max_eps=3)
    dev = _device(tc)
    spec = "lgrr(eps_perm=2.0,eps_1=1.0)"
    mech = parse(spec, parse_domain("0..9"))
    one, perm, inst = mech.epsilon_ldp(), mech.epsilon_perm(), mech.epsilon_instantaneous()
    per_report = max(one, min(perm, inst))
    assert per_report >= one
    assert _post(tc, dev["device_token"], "l1", reports=[1, 2, 3], spec=spec).status_code == 200
    spent, _ = _ledger(collector.store, "ages")
    charged = spent[dev["device_id"]][0]
    # three reports of one memo reveal at most min(perm, 3 inst); of three memos at most 3 * one
    assert math.isclose(charged, 3 * per_report, rel_tol=1e-12)
    assert charged >= min(perm, 3 * inst) and charged >= 3 * one
    rep = tc.get("/v1/collections/ages/privacy", headers=_auth(info["analyst_token"])).json()
    (m,) = rep["mechanisms"]
    assert math.isclose(m["longitudinal"]["epsilon_perm"], perm, rel_tol=1e-12)
    assert "min(epsilon_perm, epsilon_inst)" in m["longitudinal"]["charged"]


@pytest.fixture(scope="module")
def pg_server():
    """A PostgreSQL server (pinned ``pgserver``) in its own folder under the system's temporary
    folder: pgserver runs it as another user, who must reach the folder whatever permissions
    concurrent pytest sessions set on pytest's shared base folder."""
    import shutil
    import tempfile

    import pgserver
    root = tempfile.mkdtemp(prefix="localpriv-pg-")
    os.chmod(root, 0o755)
    server = pgserver.get_server(root, cleanup_mode="stop")
    yield server
    server.cleanup()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "c.sqlite")
    server = request.getfixturevalue("pg_server")
    name = f"dev{os.getpid()}_{len(os.listdir(tmp_path.parent))}_{tmp_path.name}".replace("-", "_").lower()[:60]
    server.psql(f"CREATE DATABASE {name};")
    return server.get_uri(name)


def test_device_batches_under_concurrent_ingest_never_pass_the_cap(db_url):
    """Threads of two devices race at the cap (SQLite: one writer; PostgreSQL: the device's row
    locked in the transaction): each device's accepted batches are exactly its charge, never above
    the cap, and every batch is counted with its charge."""
    collector = Collector(open_store(db_url, pool=4), ADMIN, refresh_delay=None)
    tc = TestClient(create_app(collector), raise_server_exceptions=False)
    _create(tc, budget={"period": 3600, "eps": 5})
    devs = [_device(tc) for _ in range(2)]
    codes: list[int] = []
    lock = threading.Lock()

    def worker(t):
        with TestClient(create_app(collector), raise_server_exceptions=False) as mine:
            for j in range(4):
                dev = devs[t % 2]
                r = _post(mine, dev["device_token"], f"t{t}-{j}")
                with lock:
                    codes.append(r.status_code)
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(set(codes)) == [200, 403] and codes.count(200) == 10  # 5 per device, 24 tried
    spent, on_batches = _ledger(collector.store, "ages")
    assert spent == on_batches == {d["device_id"]: (5.0, 5) for d in devs}
    stats = collector.describe("ages")["ingest"]
    assert stats["over_budget_batches"] == 14 and stats["batches"] == 10 and stats["reports"] == 10
    collector.store.close()


# ---------------------------------------------------------------------------------------------
# credentials: who may do what, read strictly
# ---------------------------------------------------------------------------------------------
def test_enrollment_and_device_tokens_do_only_their_own_thing(tmp_path):
    tc, _ = _service(tmp_path)
    info = _create(tc)
    enroll = tc.post("/v1/collections/ages/enrollment-tokens", headers=_auth(ADMIN)).json()["enrollment_token"]
    dev = tc.post("/v1/collections/ages/devices", headers=_auth(enroll)).json()
    # only the admin makes enrollment tokens; only an enrollment token registers
    for tok in (info["analyst_token"], info["ingest_token"], enroll, dev["device_token"]):
        assert tc.post("/v1/collections/ages/enrollment-tokens", headers=_auth(tok)).status_code == 401
    for tok in (info["analyst_token"], info["ingest_token"], dev["device_token"], ADMIN):
        assert tc.post("/v1/collections/ages/devices", headers=_auth(tok)).status_code == 403
    assert _post(tc, enroll, "e1").status_code == 403  # enrollment tokens do not post
    for path in ("/v1/collections/ages", "/v1/collections/ages/privacy", "/v1/collections/ages/counts"):
        assert tc.get(path, headers=_auth(dev["device_token"])).status_code == 403, path
        assert tc.get(path, headers=_auth(enroll)).status_code == 403, path
    assert tc.post("/v1/collections/nosuch/enrollment-tokens", headers=_auth(ADMIN)).status_code == 404
    # strictness: no body keys, no query parameters
    r = tc.post("/v1/collections/ages/devices", headers=_auth(enroll), json={"device_id": "mine"})
    assert r.status_code == 422 and "no body" in r.json()["error"]
    r = tc.post("/v1/collections/ages/devices", headers=_auth(enroll), params={"name": "x"})
    assert r.status_code == 422 and "unknown query parameter" in r.json()["error"]
    assert tc.get("/v1/collections/ages/privacy", headers=_auth(ADMIN), params={"x": "1"}).status_code == 422
    r = tc.post("/v1/collections/ages/devices", headers=_auth(enroll), content=b"{not json")
    assert r.status_code == 422 and "not JSON" in r.json()["error"]
    assert tc.post("/v1/collections/ages/devices", headers=_auth(enroll), json={}).status_code == 201
    # unknown keys in a device's batch are refused as for the shared token
    r = tc.post("/v1/collections/ages/batches", headers=_auth(dev["device_token"]),
                json={"batch_id": "u", "groups": [{"mechanism": KRR1, "reports": [1]}], "device": "x"})
    assert r.status_code == 422 and "unknown key" in r.json()["error"]


def test_client_register_and_privacy_report(tmp_path):
    tc, _ = _service(tmp_path)
    info = _create(tc, budget={"period": 3600, "eps": 10})
    enroll = tc.post("/v1/collections/ages/enrollment-tokens", headers=_auth(ADMIN)).json()["enrollment_token"]
    c = Client("http://testserver", "ages", enroll, http=tc, retries=0)
    dev = c.register()
    assert c.token == dev["device_token"]
    c.post_batch({"mechanism": KRR1, "reports": [1, 2]})
    with pytest.raises(LocalPrivError, match=r"server refused \(403\)"):
        c.register()  # a device token does not register
    rep = Client("http://testserver", "ages", info["analyst_token"], http=tc).privacy_report()
    assert rep["devices"]["lifetime"]["max"] == 2.0 and rep["devices"]["registered"] == 1


# ---------------------------------------------------------------------------------------------
# rate limits
# ---------------------------------------------------------------------------------------------
def test_rate_limits_per_token_answer_429_with_retry_after(tmp_path):
    clock = Clock(1_000_040.0)  # 20 s into the window [1_000_020, 1_000_080)
    tc, collector = _service(tmp_path, clock)
    info = _create(tc, rate_limit={"period": 60, "requests": 3, "reports": 5})
    dev = _device(tc)  # registration counts as one request of the enrollment token, not of the device
    assert _post(tc, dev["device_token"], "r1", reports=[1, 2]).status_code == 200
    assert _post(tc, dev["device_token"], "r2", reports=[1, 2]).status_code == 200
    r = _post(tc, dev["device_token"], "r3", reports=[1, 2])  # 6 reports > 5
    assert r.status_code == 429 and r.headers["Retry-After"] == "40" and "reports per 60 s" in r.json()["error"]
    r = _post(tc, dev["device_token"], "r4", reports=[1])  # the 4th request
    assert r.status_code == 429 and "3 requests per 60 s" in r.json()["error"]
    assert _post(tc, info["ingest_token"], "s1", reports=[1]).status_code == 200  # another token: its own count
    r = _post(tc, dev["device_token"], "big", reports=list(range(6)))
    assert r.status_code in (422, 429)
    clock.now += 40  # the next window
    r = _post(tc, dev["device_token"], "big", reports=[1] * 6)
    assert r.status_code == 422 and "send smaller batches" in r.json()["error"]  # waiting would not help
    assert _post(tc, dev["device_token"], "r3", reports=[1, 2]).status_code == 200  # the retry passes now
    assert collector.describe("ages")["ingest"]["rate_limited_requests"] == 3


def test_rate_limiter_memory_is_bounded_and_refunds_what_was_not_counted():
    clock = Clock(0.0)
    lim = RateLimiter(max_keys=100, clock=clock)
    rule = RateLimit(period=10, requests=1, reports=10)
    for i in range(1000):
        lim.request(f"token{i}", rule)
    assert len(lim) == 100
    lim.reports("a", rule, 10)
    with pytest.raises(RateLimited) as info:
        lim.reports("a", rule, 1)
    assert info.value.retry_after == 10
    lim.refund("a", rule, 4)  # e.g. a duplicate or a refused batch
    lim.reports("a", rule, 4)
    with pytest.raises(LocalPrivError, match="from 1 to 10\\^7"):
        RateLimiter(max_keys=0)


# ---------------------------------------------------------------------------------------------
# the privacy report's words and page
# ---------------------------------------------------------------------------------------------
def test_explain_level_in_plain_words():
    assert "e^1 = 2.72" in explain_level(1.0)
    assert "except with probability at most 1e-06" in explain_level(0.5, 1e-6)
    assert "no meaningful guarantee" in explain_level(math.inf)
    assert "no privacy level" in explain_level(math.nan)


def test_privacy_page_on_the_dashboard(tmp_path):
    tc, _ = _service(tmp_path)
    info = _create(tc, budget={"period": 3600, "eps": 10})
    assert _post(tc, _device(tc)["device_token"], "p1", reports=[1, 2]).status_code == 200
    page = tc.get("/dashboard/ages/privacy", params={"token": info["analyst_token"]})
    assert page.status_code == 200 and "Privacy of ages" in page.text and "krr(k=10,eps=1.0)" in page.text
    assert "/dashboard/ages/privacy?token=" in tc.get("/dashboard/ages", params={"token": info["analyst_token"]}).text
    assert tc.get("/dashboard/ages/privacy", params={"token": _device(tc)["device_token"]}).status_code == 403
    rep = tc.get("/v1/collections/ages/privacy", headers=_auth(ADMIN)).json()
    shuffled = rep["mechanisms"][0]["shuffled"]
    assert shuffled["n"] == 2 and shuffled["delta"] == 1e-6 and shuffled["epsilon"] <= 1.0 + 1e-9
    json.dumps(rep, allow_nan=False)  # plain JSON: no NaN or infinity


# ---------------------------------------------------------------------------------------------
# a real server on loopback, SIGKILLed in the middle of devices posting
# ---------------------------------------------------------------------------------------------
def test_sigkill_never_leaves_a_batch_without_its_charge(tmp_path):
    """Devices post concurrently to a server that is SIGKILLed when half their batches are
    acknowledged; the database then holds every acknowledged batch, each with its device and its
    charge, the devices' spending is exactly the sum of the charges of their stored batches, and
    the counts are exactly those of the stored batches (a batch in flight: all of it or nothing)."""
    import httpx
    db, log, port = str(tmp_path / "c.sqlite"), tmp_path / "server.log", free_port()
    proc = launch(db, port, log, ADMIN)
    n_devices, n_batches, size = 3, 12, 20
    rng = np.random.default_rng(11)
    plans = {f"d{i}-{j}": rng.integers(0, 10, size).tolist() for i in range(n_devices) for j in range(n_batches)}
    acked: dict[int, list[str]] = {i: [] for i in range(n_devices)}
    half = threading.Event()
    try:
        url = f"http://127.0.0.1:{port}"
        httpx.post(f"{url}/v1/collections", headers=_auth(ADMIN), timeout=30, json={
            "name": "ages", "domain": "0..9",
            "policy": {"mechanisms": ["krr"], "max_eps": 2, "budget": {"period": 86400 * 366, "eps": 1000}}})
        enroll = httpx.post(f"{url}/v1/collections/ages/enrollment-tokens", headers=_auth(ADMIN),
                            timeout=30).json()["enrollment_token"]
        devices = [httpx.post(f"{url}/v1/collections/ages/devices", headers=_auth(enroll), timeout=30).json()
                   for _ in range(n_devices)]

        def device(i):
            with Client(url, "ages", devices[i]["device_token"], retries=0) as c:
                for j in range(n_batches):
                    bid = f"d{i}-{j}"
                    try:
                        c.post_batch({"mechanism": "krr(k=10,eps=1.0)", "reports": plans[bid]}, batch_id=bid)
                    except LocalPrivError:  # the server is gone
                        return
                    acked[i].append(bid)
                    if sum(map(len, acked.values())) >= n_devices * n_batches // 2:
                        half.set()
        threads = [threading.Thread(target=device, args=(i,)) for i in range(n_devices)]
        for t in threads:
            t.start()
        assert half.wait(60)
        os.kill(proc.pid, signal.SIGKILL)  # acknowledged batches and their charges must survive this
        proc.wait()
        for t in threads:
            t.join(60)
    finally:
        proc.kill()
        proc.wait()
    store = open_store(db)
    with store.transaction() as c:
        stored = {b: (d, float(e)) for b, d, e in c.execute(
            "SELECT batch_id, device_id, eps FROM batches WHERE collection = 'ages'").fetchall()}
    per_batch = parse("krr(k=10,eps=1.0)", parse_domain("0..9")).epsilon_ldp() * size
    ids = {d["device_id"]: i for i, d in enumerate(devices)}
    for bid, (dev, eps) in stored.items():  # every stored batch carries its device and its charge
        assert bid.startswith(f"d{ids[dev]}-") and math.isclose(eps, per_batch, rel_tol=1e-12)
    for i, bids in acked.items():
        assert set(bids) <= set(stored), i  # nothing acknowledged was lost
    spent, on_batches = _ledger(store, "ages")
    assert set(spent) == set(on_batches)
    for dev, (eps, k) in spent.items():  # the ledger is the sum of the stored batches' charges
        assert k == on_batches[dev][1] and math.isclose(eps, on_batches[dev][0], rel_tol=1e-9)
    expected = np.bincount(np.concatenate([plans[b] for b in sorted(stored)]), minlength=10)
    _, rows = store.counts("ages")
    got = np.zeros(10, np.int64)
    for _m, r, k in rows:
        got[int(r)] += k
    np.testing.assert_array_equal(got, expected)
    store.close()
