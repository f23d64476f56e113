"""The collector's estimate endpoint: estimator settings from the query, read by their declarations."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

import localpriv as lp  # noqa: E402
from localpriv.domains import parse_domain  # noqa: E402
from localpriv.service.app import create_app  # noqa: E402
from localpriv.service.client import report_group  # noqa: E402
from localpriv.service.core import Collector  # noqa: E402
from localpriv.service.storage import open_store  # noqa: E402

ADMIN = "test-admin-token-0123456789"


@pytest.fixture
def served(tmp_path):
    collector = Collector(open_store(str(tmp_path / "c.sqlite")), ADMIN, estimate_wait=300)
    tc = TestClient(create_app(collector))
    info = tc.post("/v1/collections", headers={"Authorization": f"Bearer {ADMIN}"},
                   json={"name": "ages", "domain": "0..9", "policy": {"mechanisms": ["krr"], "max_eps": 2.0}}).json()
    rng = np.random.default_rng(3)
    group = report_group(rng.binomial(9, 0.3, 1500), "krr(eps=2.0)", parse_domain("0..9"), rng)
    r = tc.post("/v1/collections/ages/batches", headers={"Authorization": f"Bearer {info['ingest_token']}"},
                json={"batch_id": "b-1", "groups": [group]})
    assert r.status_code == 200, r.text
    yield tc, {"Authorization": f"Bearer {info['analyst_token']}"}, group
    collector.store.close()


def test_settings_from_the_query_reach_the_estimator(served):
    tc, ana, group = served
    r = tc.get("/v1/collections/ages/estimate?estimator=ems&strength=0&stop=gap&delta=1e-10", headers=ana)
    assert r.status_code == 200, r.text
    est = r.json()
    assert est["settings"]["strength"] == 0.0 and est["settings"]["strength_selection"] == "given"
    ref = lp.estimate(lp.Observations.from_reports(group["mechanism"], group["reports"], parse_domain("0..9")),
                      "ibu", delta=1e-10)
    np.testing.assert_allclose(est["distribution"], ref.distribution, atol=1e-6)
    # other settings, another cache entry; the same ones, the cached estimate
    again = tc.get("/v1/collections/ages/estimate?estimator=ems&strength=0&stop=gap&delta=1e-10", headers=ana).json()
    other = tc.get("/v1/collections/ages/estimate?estimator=ems&strength=1&delta=1e-10", headers=ana).json()
    assert again["cached"] is True and other["cached"] is False and other["settings"]["strength"] == 1.0


@pytest.mark.parametrize("query, message", [
    ("estimator=ibu&bogus=1", "ibu: unknown setting 'bogus'; known: delta, max_iter, stop, accelerate, keep_trace"),
    ("estimator=inv-p&delta=1e-9", "inv-p: unknown setting 'delta'; known: none (it takes no settings)"),
    ("estimator=ibu&max_iter=10.5", "ibu: max_iter must be a whole number, got '10.5'"),
    ("estimator=ibu&max_iter=true", "ibu: max_iter must be a whole number, got 'true'"),
    ("estimator=ibu&keep_trace=1", "ibu: keep_trace must be true or false, got '1'"),
    ("estimator=ibu&stop=often", "ibu: stop: unknown stopping rule 'often'; choose one of gap, loglik, max_abs"),
    ("estimator=ibu&theta0=0.1", "ibu: theta0 (a probability vector over the domain (array-like of numbers)) "
                                 "cannot be given as text"),
    ("estimator=ibu&delta=1e-9&delta=1e-8", "the query parameter delta is given twice"),
    ("estimator=ems&strength=-1", "ems: strength must be a finite number >= 0 or None, got -1.0"),
    ("strength=1", "auto: unknown setting 'strength'; known: "),
])
def test_bad_settings_are_refused_in_one_line(served, query, message):
    tc, ana, _ = served
    r = tc.get(f"/v1/collections/ages/estimate?{query}", headers=ana)
    assert r.status_code == 422 and r.json()["error"].startswith(message)
    assert message.endswith("known: ") or r.json()["error"] == message
