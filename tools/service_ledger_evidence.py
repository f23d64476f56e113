"""Measurements for the collector's privacy ledger and rate limits (decision records 0053, 0054,
docs/service.md). Correctness only, no timings: safe on a busy machine (a few seconds).

Run by `make service-ledger-evidence`: writes docs/results/service-ledger.json (atomically) and
prints it.

* ``longitudinal``: for memoized mechanisms on ``0..9``, the computed one-report level
  ``epsilon_ldp``, the memoization bound ``epsilon_perm``, what the service charges per report
  (``report_charge``: at least ``min(epsilon_perm, epsilon_inst)``), and the number of reports
  after which the charge passes ``epsilon_perm`` (the price of not seeing memo groups).
* ``shuffle``: the level the privacy report states if ``N`` reports were shuffled
  (``shuffle_epsilon`` at the report's delta), for k-RR at two levels and four ``N``.
* ``ledger``: devices racing at a per-device cap through the HTTP layer on SQLite: accepted
  batches, refused ones, and whether every stored batch carries its charge.
* ``rate_limiter``: the memory of the rate limiter's counters (tracemalloc) at its default bound.
"""
import json
import math
import pathlib
import tempfile
import threading
import tracemalloc
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from localpriv.analysis.shuffle import shuffle_epsilon
from localpriv.data.formats import atomic_output
from localpriv.domains import parse_domain
from localpriv.mechanisms import parse
from localpriv.mechanisms.accounting import report_charge
from localpriv.service.app import create_app
from localpriv.service.core import SHUFFLE_DELTA, Collector
from localpriv.service.limits import DEFAULT_MAX_KEYS, RateLimiter
from localpriv.service.policy import RateLimit
from localpriv.service.storage import open_store

ADMIN = "evidence-admin-token-0123456789"
dom = parse_domain("0..9")
out: dict = {"domain": "0..9"}

rows = []
for spec in ("lgrr(eps_perm=2.0,eps_1=1.0)", "lgrr(eps_perm=4.0,eps_1=0.5)", "loue(eps_perm=2.0,eps_1=1.0)",
             "lsue(eps_perm=4.0,eps_1=1.0)", "lolh(eps_perm=2.0,eps_1=1.0)"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = parse(spec, dom)
        e1, perm = float(m.epsilon_ldp()), float(m.epsilon_perm())
        c = float(report_charge(m, e1))
    rows.append({"spec": str(m), "epsilon_ldp": e1, "epsilon_perm": perm, "charge": c,
                 "reports_until_charge_passes_perm": int(math.floor(perm / c)) + 1})
out["longitudinal"] = rows

out["shuffle"] = {"delta": SHUFFLE_DELTA, "rows": [
    {"spec": spec, "epsilon_ldp": float(parse(spec, dom).epsilon_ldp()), "n": n,
     "epsilon_shuffled": float(shuffle_epsilon(parse(spec, dom), n, SHUFFLE_DELTA))}
    for spec in ("krr(eps=1.0)", "krr(eps=2.0)") for n in (10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6)]}

with tempfile.TemporaryDirectory() as tmp:
    collector = Collector(open_store(f"{tmp}/c.sqlite", pool=4), ADMIN, refresh_delay=None)
    tc = TestClient(create_app(collector), raise_server_exceptions=False)
    auth = {"Authorization": f"Bearer {ADMIN}"}
    cap, n_devices, threads_per_device, tries = 5.0, 4, 3, 4
    tc.post("/v1/collections", headers=auth, json={"name": "c", "domain": "0..9", "policy": {
        "mechanisms": ["krr"], "max_eps": 2, "budget": {"period": 86400, "eps": cap}}})
    enroll = tc.post("/v1/collections/c/enrollment-tokens", headers=auth).json()["enrollment_token"]
    devs = [tc.post("/v1/collections/c/devices", headers={"Authorization": f"Bearer {enroll}"}).json()
            for _ in range(n_devices)]
    codes: list = []

    def post(t):
        with TestClient(create_app(collector), raise_server_exceptions=False) as mine:
            for j in range(tries):
                r = mine.post("/v1/collections/c/batches",
                              headers={"Authorization": f"Bearer {devs[t % n_devices]['device_token']}"},
                              json={"batch_id": f"t{t}-{j}", "groups": [{"mechanism": "krr(eps=1.0)", "reports": [1]}]})
                codes.append(r.status_code)
    ts = [threading.Thread(target=post, args=(t,)) for t in range(n_devices * threads_per_device)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with collector.store.transaction() as c:
        spent = [float(r[0]) for r in c.execute("SELECT SUM(eps) FROM spending GROUP BY device_id").fetchall()]
        charged = c.execute("SELECT COUNT(*), SUM(eps) FROM batches WHERE device_id IS NOT NULL").fetchone()
    out["ledger"] = {"backend": "sqlite", "cap": cap, "devices": n_devices, "batches_tried": len(codes),
                     "accepted": codes.count(200), "refused_over_budget": codes.count(403),
                     "max_device_spending": max(spent), "stored_batches": int(charged[0]),
                     "stored_charge_equals_ledger": math.isclose(float(charged[1]), sum(spent), rel_tol=1e-12)}
    collector.store.close()

lim = RateLimiter()
rule = RateLimit(period=60, requests=10, reports=1000)
tracemalloc.start()
before = tracemalloc.get_traced_memory()[0]
for i in range(DEFAULT_MAX_KEYS + 1000):
    lim.request(f"{i:064x}", rule)  # keys as the service's: 64 hex characters (a token's SHA-256)
used = tracemalloc.get_traced_memory()[0] - before
tracemalloc.stop()
out["rate_limiter"] = {"max_keys": DEFAULT_MAX_KEYS, "keys_kept": len(lim), "bytes": used,
                       "bytes_per_key": round(used / len(lim))}

path = pathlib.Path("docs/results/service-ledger.json")
with atomic_output(path) as tmp_path:
    tmp_path.write_text(json.dumps(out, indent=1) + "\n")
print(json.dumps(out, indent=1))
