"""A client of the collector service (``localpriv serve``): perturb on the device, post batches.

Values never leave the client: :meth:`Client.submit` obfuscates them with the mechanism here
(:func:`localpriv.perturb`, drawing from :func:`localpriv.utils.rng.secure_generator` -- ChaCha20 keyed
from the OS -- unless a generator is passed, which is for experiments only) and posts the reports
in batches. Each batch carries a random id; a batch that fails on the way (connection refused or
cut, a timeout, 429 or 5xx) is posted again with the *same* id, so the server counts it once
whatever happened to the first attempt (``docs/service.md``). Batches travel as the binary body
(:mod:`localpriv.service.wire`, ``application/x-localpriv-reports; v=1``) unless the client is made
with ``wire="json"`` (the JSON body, which servers before that format also read). Other refusals (401, 403, 413, 422,
409) are one-line :class:`~localpriv.LocalPrivError`\\ s with the server's message.

Example::

    from localpriv.service.client import Client
    c = Client("http://127.0.0.1:8000", "ages", token=INGEST_TOKEN)
    c.submit(ages, "krr(eps=2.0)", domain="0..99")     # secure randomness, batches of 10,000

With a privacy ledger (:class:`localpriv.data.ledger.Ledger`, ``docs/accounting.md``),
``submit(..., ledger="device-ledger.json", budget=4.0)`` records the submission's release and
refuses, in one line and before anything is perturbed or sent, one that would take the device's
total past the budget. The release is recorded before the batches are posted: a submission that
fails on the way stays counted (over-counting, never under-counting). This client draws a new
memo for every submission, so reports of memoized mechanisms are recorded as independent reports
(no memo key), at their per-report level.
"""
from __future__ import annotations

import json
import secrets
import time
from typing import Any

import numpy as np
import pandas as pd

from localpriv.data.formats import hex_strings
from localpriv.data.ledger import Ledger, utc_now
from localpriv.data.reports import perturb
from localpriv.data.textcsv import hex_text
from localpriv.domains import Domain, parse_domain
from localpriv.mechanisms import Mechanism, parse
from localpriv.mechanisms.accounting import release_of
from localpriv.service.wire import encode_batch
from localpriv.utils.errors import LocalPrivError
from localpriv.utils.optional import available
from localpriv.utils.rng import secure_generator
from localpriv.utils.validation import check_int

__all__ = ["Client", "report_group", "new_batch_id", "WIRES"]

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: The bodies a client can post batches in: ``binary`` (default) and ``json``.
WIRES = ("binary", "json")


def new_batch_id() -> str:
    """A random batch id (128 bits from the OS, hex)."""
    return secrets.token_hex(16)


def wire_reports(reports) -> list:
    """Reports as the wire format's JSON values: numbers, or lowercase hex for bit vectors."""
    r = np.asarray(reports)
    if r.ndim == 2:
        return hex_text(r).tolist() if not available("pyarrow") else hex_strings(r).to_pylist()
    return r.tolist()


def _perturbed(values: Any, mechanism, domain=None, rng=None) -> tuple[str, np.ndarray]:
    """``(spec, reports)``: ``values`` perturbed with ``mechanism`` (numbers, or ``n x w`` bytes)."""
    dom = parse_domain(domain) if isinstance(domain, str) else domain
    if dom is not None and not isinstance(dom, Domain):
        raise LocalPrivError(f"domain must be a Domain or a domain string, got {type(domain).__name__}")
    table = perturb(values, mechanism, secure_generator() if rng is None else rng, dom)
    if isinstance(table, pd.DataFrame):  # without pyarrow: a pandas report table
        rep = table["report"].to_numpy()
        spec = str(table["mechanism"].iloc[0]) if len(table) else str(mechanism)
        if rep.dtype == object:  # bit vectors as bytes
            width = len(rep[0]) if len(rep) else 0
            return spec, np.frombuffer(b"".join(rep.tolist()), dtype=np.uint8).reshape(len(rep), width)
        return spec, rep
    import pyarrow as pa

    col = table.column("report").combine_chunks()
    spec = str(table.column("mechanism")[0]) if table.num_rows else str(mechanism)
    if pa.types.is_fixed_size_binary(col.type):
        w = col.type.byte_width
        raw = np.frombuffer(col.buffers()[1], dtype=np.uint8, count=(col.offset + len(col)) * w)[col.offset * w:]
        return spec, raw.reshape(len(col), w)
    return spec, col.to_numpy(zero_copy_only=False)


def report_group(values: Any, mechanism, domain=None, rng=None) -> dict:
    """Perturb ``values`` with ``mechanism`` and return one wire-format group
    ``{"mechanism": spec, "reports": [...]}`` (see :func:`localpriv.perturb`), its reports as the
    JSON body's values (numbers, lowercase hex for bit vectors); :meth:`Client.post_batch` takes it
    in either body.

    ``rng`` defaults to :func:`localpriv.utils.rng.secure_generator` (a real deployment); pass a seeded
    generator only for experiments and tests."""
    spec, reports = _perturbed(values, mechanism, domain, rng)
    return {"mechanism": spec, "reports": wire_reports(reports)}


class Client:
    """Posts report batches to one collection, with retries (see the module docstring).

    Parameters
    ----------
    url : str
        The server, e.g. ``http://127.0.0.1:8000``.
    collection : str
        The collection's name.
    token : str
        Its ingest token (or the analyst token, for :meth:`estimate` and :meth:`info`).
    retries : int
        Attempts after the first for a batch that failed on the way (default 8).
    backoff : float
        Seconds before the first retry, doubled each time up to ``max_backoff``.
    http : httpx.Client, optional
        A client to use instead of a new one (e.g. FastAPI's ``TestClient``).
    wire : {"binary", "json"}
        The body batches are posted in: the binary body (default; :mod:`localpriv.service.wire`)
        or JSON (for a server that predates the binary body).
    """

    def __init__(self, url: str, collection: str, token: str, *, timeout: float = 30.0, retries: int = 8,
                 backoff: float = 0.25, max_backoff: float = 8.0, http=None, wire: str = "binary"):
        import httpx
        if wire not in WIRES:
            raise LocalPrivError(f"wire {wire!r}: choose {' or '.join(WIRES)}")
        self.wire = wire
        self.collection, self.token = collection, token
        self.retries, self.backoff, self.max_backoff = int(retries), float(backoff), float(max_backoff)
        self.http = http if http is not None else httpx.Client(base_url=url.rstrip("/"), timeout=timeout)
        self.attempts = 0  # requests sent, retries included
        self.polls = 0  # job polls of estimate()

    def close(self) -> None:
        self.http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _request(self, method: str, path: str, **kwargs):
        import httpx
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        delay, last = self.backoff, None
        for attempt in range(self.retries + 1):
            self.attempts += 1
            try:
                resp = self.http.request(method, path, headers=headers, **kwargs)
            except httpx.TransportError as exc:  # refused, cut, timed out: the batch may or may not be in
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code not in RETRY_STATUS:
                    if resp.status_code >= 400:
                        try:
                            msg = resp.json().get("error", resp.text)
                        except ValueError:
                            msg = resp.text
                        raise LocalPrivError(f"server refused ({resp.status_code}): {' '.join(str(msg).split())}")
                    return resp
                last = f"HTTP {resp.status_code}"
            if attempt < self.retries:
                time.sleep(delay)
                delay = min(2 * delay, self.max_backoff)
        raise LocalPrivError(f"{method} {path} failed after {self.retries + 1} attempts: {last}")

    def post_batch(self, groups, batch_id: str | None = None) -> dict:
        """Post one batch (a group dict or a list of them); retried with the same id until the
        server acknowledges it (``{"status": "accepted" | "duplicate", ...}``). A group's reports
        are a list of the JSON body's values or a NumPy array (numbers, or ``n x w`` ``uint8`` bit
        vectors); the body is the client's ``wire``."""
        groups = [groups] if isinstance(groups, dict) else list(groups)
        batch_id = batch_id or new_batch_id()
        if self.wire == "binary":
            content_type, body = encode_batch(batch_id, groups)
        else:
            content_type = "application/json"
            body = json.dumps({"batch_id": batch_id, "groups": [
                {**g, "reports": wire_reports(g["reports"]) if isinstance(g["reports"], np.ndarray) else g["reports"]}
                for g in groups]}, separators=(",", ":")).encode()
        return self._request("POST", f"/v1/collections/{self.collection}/batches", content=body,
                             headers={"Content-Type": content_type}).json()

    def submit(self, values: Any, mechanism, domain=None, rng=None, batch_size: int = 10_000, *,
               ledger: Ledger | str | None = None, budget: float | None = None,
               delta: float | None = None) -> dict:
        """Perturb ``values`` here and post them in batches of ``batch_size`` reports; returns
        ``{"reports": n, "batches": b, "duplicates": d}`` (duplicates: batches the server had
        already counted when a retry arrived).

        ``ledger`` (a :class:`~localpriv.data.ledger.Ledger` or its file): the submission's release
        (one report per value, the level computed from the mechanism) is checked against ``budget``
        (pure ``eps`` by basic composition, or with ``delta`` the PLD's ``eps`` at ``delta``) and
        recorded *before* anything is perturbed or posted; past the budget a one-line
        :class:`~localpriv.LocalPrivError` says the ledger's total, the request's cost and the
        budget, and nothing leaves the device. A budget without a ledger is refused."""
        batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=1_000_000)
        if ledger is None and (budget is not None or delta is not None):
            raise LocalPrivError("a budget needs a ledger (the file of what this device has released)")
        if ledger is not None:
            book = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
            dom = parse_domain(domain) if isinstance(domain, str) else domain
            mech = mechanism if isinstance(mechanism, Mechanism) else parse(mechanism, dom)
            n_values = len(values) if hasattr(values, "__len__") else int(np.asarray(values).shape[0])
            if n_values == 0:
                raise LocalPrivError("no values to submit")
            book.record(release_of(mech, n_values, collection=self.collection, time=utc_now()), budget, delta)
        spec, reps = _perturbed(values, mechanism, domain, rng)
        n = b = d = 0
        for s in range(0, len(reps), batch_size):
            part = reps[s:s + batch_size]
            res = self.post_batch({"mechanism": spec, "reports": part})
            n, b, d = n + len(part), b + 1, d + (res.get("status") == "duplicate")
        return {"reports": n, "batches": b, "duplicates": d}

    def estimate(self, estimator: str | None = None, level: float = 0.95, stats: str = "", *,
                 wait: float = 600.0, poll: float = 0.25, max_poll: float = 5.0) -> dict:
        """The collection's estimate (needs the analyst token).

        The server answers within its own short wait: 200 with the estimate, or 202 with the job
        computing it; then this polls the job (``poll`` seconds, doubled up to ``max_poll``) for at
        most ``wait`` seconds in all. A request that failed on the way is sent again, which joins
        the same computation on the server (one per collection, version and settings), never a
        second one. Raises :class:`~localpriv.LocalPrivError` if the job fails or ``wait`` runs out."""
        params = {"level": level, **({"estimator": estimator} if estimator else {}),
                  **({"stats": stats} if stats else {})}
        deadline = time.monotonic() + float(wait)
        resp = self._request("GET", f"/v1/collections/{self.collection}/estimate", params=params)
        if resp.status_code != 202:
            return resp.json()
        url = resp.json().get("url") or resp.headers.get("location")
        delay = float(poll)
        while True:
            if time.monotonic() + delay > deadline:
                raise LocalPrivError(f"the estimate was not ready within {wait:g} s; its job is still at {url}")
            time.sleep(delay)
            delay = min(2 * delay, float(max_poll))
            self.polls += 1
            resp = self._request("GET", url)
            if resp.status_code == 202:
                continue
            job = resp.json()
            if job.get("status") == "done":
                return job["result"]
            raise LocalPrivError(f"the estimate failed ({job.get('status')}): {job.get('error', 'no reason given')}")

    def info(self) -> dict:
        """The collection and its ingest statistics (needs the analyst token)."""
        return self._request("GET", f"/v1/collections/{self.collection}").json()

    def register(self) -> dict:
        """Register this device with the collection (the client's token must be an enrollment
        token); returns ``{"device_id", "device_token", "group", "collection"}`` and from then on
        uses the device token, so the batches it posts are charged to this device. Sent once, never
        retried (a retry could register a second device)."""
        resp = self.http.request("POST", f"/v1/collections/{self.collection}/devices",
                                 headers={"Authorization": f"Bearer {self.token}"})
        self.attempts += 1
        if resp.status_code != 201:
            try:
                msg = resp.json().get("error", resp.text)
            except ValueError:
                msg = resp.text
            raise LocalPrivError(f"server refused ({resp.status_code}): {' '.join(str(msg).split())}")
        device = resp.json()
        self.token = device["device_token"]
        return device

    def privacy_report(self) -> dict:
        """The collection's privacy report (needs the analyst token): mechanisms and their computed
        levels, the devices' spending, over-budget refusals (``docs/service.md``)."""
        return self._request("GET", f"/v1/collections/{self.collection}/privacy").json()
