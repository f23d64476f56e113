"""The collector's estimates as jobs: single flight, 202 and job polling, the background refresh of
the default estimate, the client's polling, and SIGTERM of a real server in the middle of a long
estimate (docs/decisions/0032-estimate-jobs.md)."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
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
from localpriv.estimators import default_estimator
from localpriv.service import free_port, launch
from localpriv.service.app import create_app
from localpriv.service.client import Client, report_group
from localpriv.service.core import Collector, compute_estimate
from localpriv.service.jobs import JobPool
from localpriv.service.storage import open_store

ADMIN = "test-admin-token-0123456789"


def _auth(token):
    return {"Authorization": f"Bearer {token}"}


def _collector(tmp_path, started, **kw):
    pool = JobPool(workers=2, on_start=lambda job: started.append(job))
    collector = Collector(open_store(str(tmp_path / "c.sqlite")), ADMIN, jobs=pool, **kw)
    tc = TestClient(create_app(collector))
    info = tc.post("/v1/collections", headers=_auth(ADMIN), json={
        "name": "ages", "domain": "0..19", "policy": {"mechanisms": ["krr"], "max_eps": 3}}).json()
    return tc, collector, info


def _ingest(tc, info, seed=1, n=2000, batch_id=None):
    rng = np.random.default_rng(seed)
    group = report_group(rng.binomial(19, 0.4, n), "krr(eps=2.0)", parse_domain("0..19"), rng)
    r = tc.post("/v1/collections/ages/batches", headers=_auth(info["ingest_token"]),
                json={"batch_id": batch_id or f"b{seed}", "groups": [group]})
    assert r.status_code == 200, r.text
    return group


def _close(collector):
    collector.close()
    collector.store.close()


def test_concurrent_identical_requests_share_one_computation(tmp_path):
    started: list = []
    tc, collector, info = _collector(tmp_path, started, estimate_wait=0.0, refresh_delay=None)
    try:
        _ingest(tc, info)
        url = "/v1/collections/ages/estimate?estimator=ibu&level=0.9&stats=mean,median"
        answers: list = []

        def ask():
            answers.append(tc.get(url, headers=_auth(info["analyst_token"])))
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(answers) == 8 and {r.status_code for r in answers} <= {200, 202}
        jobs = {r.json()["id"] for r in answers if r.status_code == 202}
        assert len(jobs) <= 1  # every waiting request got the same job
        assert len(started) == 1  # one computation for eight requests
        # the library's blocking call joins or reads the same result: still one computation
        est = collector.estimate("ages", "ibu", 0.9, ("mean", "median"))
        assert isinstance(est, dict) and len(started) == 1
        assert est["ci"]["level"] == 0.9 and "median" in est["statistics"]
        again = tc.get(url, headers=_auth(info["analyst_token"]))
        assert again.status_code == 200 and again.json()["cached"] is True and len(started) == 1
    finally:
        _close(collector)


def test_estimate_answers_202_and_the_job_serves_the_result(tmp_path):
    started: list = []
    tc, collector, info = _collector(tmp_path, started, estimate_wait=0.0, refresh_delay=None)
    try:
        _ingest(tc, info)
        ana = _auth(info["analyst_token"])
        r = tc.get("/v1/collections/ages/estimate?estimator=inv-p&level=0.9", headers=ana)
        assert r.status_code == 202, r.text
        body = r.json()
        assert r.headers["location"] == body["url"] == f"/v1/jobs/{body['id']}"
        assert body["status"] in ("queued", "running")
        # the job belongs to the collection: other tokens cannot read it
        assert tc.get(body["url"]).status_code == 401
        assert tc.get(body["url"], headers=_auth(info["ingest_token"])).status_code == 403
        assert tc.get("/v1/jobs/nosuchjob", headers=ana).status_code == 404
        deadline = time.monotonic() + 120
        while (j := tc.get(body["url"], headers=ana)).status_code == 202:
            assert time.monotonic() < deadline, "the job did not finish within 120 s"
        assert j.status_code == 200 and j.json()["status"] == "done"
        res = j.json()["result"]
        ref = lp.estimate(collector.observations("ages")[1], "inv-p")
        np.testing.assert_allclose(res["distribution"], ref.distribution, atol=1e-9)
        assert res["counts_version"] == 1 and res["ci"]["level"] == 0.9
        # an input error inside the job is data on the job, and a 422 on the direct path
        value, job = collector.start_estimate("ages", "inv-p", 0.5, ("nosuchstat",))
        assert value is None and job is not None and job.done.wait(120)
        j = tc.get(f"/v1/jobs/{job.id}", headers=ana)
        assert j.status_code == 200 and j.json()["status"] == "failed" and "nosuchstat" in j.json()["error"]
        r = tc.get("/v1/collections/ages/estimate?estimator=inv-p&level=0.5&stats=nosuchstat", headers=ana)
        assert r.status_code in (202, 422)
    finally:
        _close(collector)


def test_cancel_kills_a_running_job(tmp_path):
    started: list = []
    pool = JobPool(workers=1, on_start=started.append)
    dom = parse_domain("0..999")
    rng = np.random.default_rng(2)
    obs = lp.aggregate(lp.perturb(rng.binomial(999, 0.3, 50_000), "krr(eps=1.0)", rng, dom), dom)
    job, new = pool.submit(["slow"], "c", compute_estimate, (obs, "ems", {}, 0.9, (), {}, None))
    queued, _ = pool.submit(["other"], "c", compute_estimate, (obs, "ems", {}, 0.8, (), {}, None))
    assert new and pool.submit(["slow"], "c", compute_estimate, ())[0] is job  # single flight by key
    deadline = time.monotonic() + 60
    while job.proc is None:
        assert time.monotonic() < deadline and not job.done.is_set()
        time.sleep(0.05)
    child = job.proc.pid
    assert os.path.exists(f"/proc/{child}")
    pool.close(timeout=30)
    assert job.done.is_set() and job.status == "cancelled" and queued.status == "cancelled"
    assert not _alive(child)
    with pytest.raises(lp.LocalPrivError, match="shutting down"):
        pool.submit(["new"], "c", compute_estimate, ())


def test_ingest_refreshes_the_default_estimate_in_the_background(tmp_path):
    started: list = []
    tc, collector, info = _collector(tmp_path, started, estimate_wait=300, refresh_delay=1.5)
    try:
        for i in range(4):  # a burst of batches: one refresh, of the last version
            _ingest(tc, info, seed=i, n=500)
        deadline = time.monotonic() + 120
        while not (started and started[0].done.is_set()):
            assert time.monotonic() < deadline, "no background refresh within 120 s"
            time.sleep(0.1)
        assert len(started) == 1 and started[0].status == "done", started[0].error
        assert started[0].result["estimate"]["counts_version"] == 4
        ana = _auth(info["analyst_token"])
        api = tc.get("/v1/collections/ages/estimate", headers=ana).json()
        assert api["cached"] is True and api["estimator"] == default_estimator(parse_domain("0..19"))
        png = tc.get(f"/dashboard/ages/estimate.png?token={info['analyst_token']}")
        assert png.status_code == 200 and png.content[:4] == b"\x89PNG"
        assert len(started) == 1  # the API's default and the dashboard's figure: that one job
    finally:
        _close(collector)


def test_client_follows_the_job_and_polls_with_backoff():
    import httpx
    seen: list = []

    def handler(request):
        seen.append(request.url.path)
        if request.url.path.endswith("/estimate"):
            return httpx.Response(202, json={"id": "j1", "status": "running", "url": "/v1/jobs/j1"},
                                  headers={"Location": "/v1/jobs/j1"})
        if len(seen) < 4:
            return httpx.Response(202, json={"id": "j1", "status": "running"})
        return httpx.Response(200, json={"id": "j1", "status": "done", "result": {"distribution": [1.0]}})
    c = Client("http://test", "ages", "tok", http=httpx.Client(base_url="http://test",
                                                               transport=httpx.MockTransport(handler)))
    assert c.estimate(stats="mean", poll=0.01, max_poll=0.02) == {"distribution": [1.0]}
    assert seen.count("/v1/collections/ages/estimate") == 1 and c.polls == 3

    def failing(request):
        if request.url.path.endswith("/estimate"):
            return httpx.Response(202, json={"id": "j2", "status": "queued", "url": "/v1/jobs/j2"})
        return httpx.Response(200, json={"id": "j2", "status": "failed", "error": "went over its CPU-time bound"})
    c = Client("http://test", "ages", "tok", http=httpx.Client(base_url="http://test",
                                                               transport=httpx.MockTransport(failing)))
    with pytest.raises(lp.LocalPrivError, match="CPU-time bound"):
        c.estimate(poll=0.01)

    def forever(request):
        return httpx.Response(202, json={"id": "j3", "status": "running", "url": "/v1/jobs/j3"})
    c = Client("http://test", "ages", "tok", http=httpx.Client(base_url="http://test",
                                                               transport=httpx.MockTransport(forever)))
    with pytest.raises(lp.LocalPrivError, match="not ready within 0.3 s"):
        c.estimate(wait=0.3, poll=0.05, max_poll=0.1)
    assert c.polls <= 6  # bounded by the total wait


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for task in os.listdir(f"/proc/{p}/task") if os.path.exists(f"/proc/{p}/task") else ():
            try:
                kids = Path(f"/proc/{p}/task/{task}/children").read_text().split()
            except OSError:
                continue
            for k in map(int, kids):
                if k not in out:
                    out.add(k)
                    todo.append(k)
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_sigterm_during_a_long_estimate_exits_promptly_and_consistently(tmp_path):
    import httpx
    port, db, log = free_port(), str(tmp_path / "c.sqlite"), tmp_path / "server.log"
    proc = launch(db, port, log, ADMIN, args=("--estimate-wait", "0", "--grace", "5"))
    try:
        url = f"http://127.0.0.1:{port}"
        info = httpx.post(f"{url}/v1/collections", headers=_auth(ADMIN), timeout=30, json={
            "name": "big", "domain": "0..999", "policy": {"mechanisms": ["krr"], "max_eps": 2}}).json()
        rng = np.random.default_rng(5)
        group = report_group(rng.binomial(999, 0.3, 50_000), "krr(eps=1.0)", parse_domain("0..999"), rng)
        r = httpx.post(f"{url}/v1/collections/big/batches", headers=_auth(info["ingest_token"]), timeout=60,
                       json={"batch_id": "first", "groups": [group]})
        assert r.status_code == 200, r.text
        # ems on 1,000 values from 50,000 reports takes minutes: the job is running at SIGTERM
        r = httpx.get(f"{url}/v1/collections/big/estimate?estimator=ems&level=0.9&stats=mean,median",
                      headers=_auth(info["analyst_token"]), timeout=30)
        assert r.status_code == 202, r.text
        job_url = r.json()["url"]
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}{job_url}", headers=_auth(info["analyst_token"]), timeout=30).json()["status"] \
                != "running":
            assert time.monotonic() < deadline, "the job did not start within 60 s"
            time.sleep(0.1)
        children = _descendants(proc.pid)
        assert children  # the forkserver and the job's process
        # batches keep arriving while the server stops: each is committed whole or not at all
        acked: list = []
        stop = threading.Event()

        def post():
            i = 0
            with httpx.Client(base_url=url, timeout=10) as h:
                while not stop.is_set():
                    body = {"batch_id": f"late-{i}", "groups": [{"mechanism": "krr(k=1000,eps=1.0)",
                                                                 "reports": list(range(i, i + 500))}]}
                    try:
                        res = h.post("/v1/collections/big/batches", headers=_auth(info["ingest_token"]),
                                     content=json.dumps(body))
                    except httpx.TransportError:
                        return
                    if res.status_code == 200:
                        acked.append(body["batch_id"])
                    i += 1
        poster = threading.Thread(target=post)
        poster.start()
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)  # generous: the bound is --grace 5 plus start-up noise
        except Exception:
            pytest.fail("the server did not exit within 60 s of SIGTERM")
        stop.set()
        poster.join(30)
        # uvicorn re-raises the SIGTERM it handled once it has shut down: "ended by SIGTERM"
        assert code in (0, -signal.SIGTERM, 128 + signal.SIGTERM), log.read_text()[-2000:]
        deadline = time.monotonic() + 30
        while any(_alive(c) for c in children):
            assert time.monotonic() < deadline, "the estimate's process outlived the server"
            time.sleep(0.1)
        # the database is consistent: counts, batches and statistics agree; every acked batch is in
        with sqlite3.connect(db) as con:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            total = con.execute("SELECT SUM(count) FROM counts WHERE collection = 'big'").fetchone()[0]
            batched = con.execute("SELECT SUM(n_reports) FROM batches WHERE collection = 'big'").fetchone()[0]
            stats = con.execute("SELECT n_reports, n_batches, version FROM collections WHERE name = 'big'").fetchone()
            ids = {row[0] for row in con.execute("SELECT batch_id FROM batches WHERE collection = 'big'")}
        assert total == batched == stats[0] and stats[1] == len(ids) == stats[2]
        assert set(acked) <= ids and total == 50_000 + 500 * (len(ids) - 1)
        assert "localpriv collector stopped" in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
