"""The collector's HTTP API (FastAPI; OpenAPI at ``/openapi.json``, pages at ``/docs``).

A thin layer over :class:`~localpriv.service.core.Collector`: it authenticates (bearer tokens),
caps request bodies (413 above ``max_body`` bytes, counted while reading, whatever
``Content-Length`` claims), and turns every error into one JSON line ``{"error": "..."}``.
Endpoints and the wire format: ``docs/service.md``.
"""
from __future__ import annotations

import html
import json
import sys
import time
from urllib.parse import quote

from fastapi import FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, Field

from localpriv.service.core import Collector
from localpriv.service.jobs import Job, JobFailed, JobsBusy
from localpriv.utils.errors import LocalPrivError

__all__ = ["create_app", "DEFAULT_MAX_BODY"]

#: Request bodies above this many bytes are refused (413): 8 MiB, about 10^6 index reports.
DEFAULT_MAX_BODY = 8 << 20


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class PolicyModel(BaseModel):
    mechanisms: list[str] = Field(..., description="allowed mechanism families (spec names), e.g. [\"krr\", \"oue\"]")
    max_eps: float | None = Field(None, description="cap on the computed LDP level epsilon_ldp of every spec")
    min_eps: float = Field(0.0, description="floor on the computed LDP level")
    max_eps_geo: float | None = Field(None, description="cap on the computed geo-indistinguishability level")


class CollectionIn(BaseModel):
    name: str = Field(..., description="1-64 letters, digits, _ or -")
    domain: str = Field(..., description="a domain as on the command line: 0..99, a,b,c, bbox(...), manhattan")
    policy: PolicyModel
    keep_raw: bool = Field(False, description="also keep every report (counts are kept in any case)")


class GroupIn(BaseModel):
    mechanism: str = Field(..., description="spec, e.g. krr(eps=2.0); k is filled from the collection's domain")
    reports: list[int | float | str] = Field(..., description="numbers (index/float reports) or lowercase "
                                             "hex strings (bit vectors), all of one kind")


class BatchIn(BaseModel):
    batch_id: str = Field(..., description="client-chosen id, 1-128 of [A-Za-z0-9._:-]; a retry reuses it")
    groups: list[GroupIn]


#: the query parameters of the estimate endpoint that are not estimator settings
ESTIMATE_PARAMETERS = ("estimator", "level", "stats", "token")


def _estimator_settings(request: Request) -> dict[str, str]:
    """The estimator settings of an estimate request: its other query parameters, each given once."""
    out: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key in ESTIMATE_PARAMETERS:
            continue
        if key in out:
            raise LocalPrivError(f"the setting {key} is given twice in the query")
        out[key] = value
    return out


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(str(message).split())}, status_code=status)


def _token(request: Request, query_token: str | None = None) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return query_token


async def _body(request: Request, cap: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > cap:
                raise ApiError(413, f"request body of {int(declared):,} bytes refused: at most {cap:,} bytes; "
                                    "send smaller batches")
        except ValueError:
            raise ApiError(400, "Content-Length is not a number") from None
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise ApiError(413, f"request body above {cap:,} bytes refused; send smaller batches")
        parts.append(chunk)
    return b"".join(parts)


def create_app(collector: Collector, max_body: int = DEFAULT_MAX_BODY) -> FastAPI:
    """The FastAPI application of ``collector`` (run it with uvicorn: :func:`localpriv.service.serve`)."""
    app = FastAPI(title="localpriv collector", version="1",
                  description="Collects locally privatized reports into counts per (mechanism, report) "
                              "and serves estimates with intervals. Wire format: docs/service.md.")
    app.state.collector = collector
    app.state.started = time.time()

    @app.exception_handler(ApiError)
    async def _api_error(request, exc: ApiError):
        return _error(exc.status, exc.message)

    @app.exception_handler(LocalPrivError)
    async def _bad_input(request, exc: LocalPrivError):
        return _error(422, str(exc))

    @app.exception_handler(JobsBusy)
    async def _busy(request, exc: JobsBusy):
        resp = _error(503, str(exc))
        resp.headers["Retry-After"] = "2"
        return resp

    @app.exception_handler(JobFailed)
    async def _failed(request, exc: JobFailed):
        return _error(exc.code, str(exc))

    @app.exception_handler(Exception)
    async def _internal(request, exc: Exception):  # one line for the client, the type on stderr
        sys.stderr.write(f"internal error on {request.url.path}: {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:300]}\n")
        return _error(500, f"internal error ({type(exc).__name__}); retry later")

    from fastapi.exceptions import RequestValidationError

    @app.exception_handler(RequestValidationError)
    async def _invalid(request, exc: RequestValidationError):
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error(422, f"invalid request: {where}: {first.get('msg', 'invalid')} ({len(errs)} problem(s))")

    def need(name: str, token: str | None, roles: tuple[str, ...]) -> str:
        if not token:
            raise ApiError(401, "missing token: send Authorization: Bearer TOKEN")
        role = collector.role(name, token)
        if role is None:
            raise ApiError(401, "wrong token")
        if role not in roles:
            raise ApiError(403, f"the {role} token cannot do this (needs: {' or '.join(roles)})")
        if collector.store.collection(name) is None:
            raise ApiError(404, f"no collection named {name}")
        return role

    def need_admin(token: str | None) -> None:
        if not token:
            raise ApiError(401, "missing token: send Authorization: Bearer TOKEN")
        if not collector.is_admin(token):
            raise ApiError(401, "wrong token: this needs the admin token")

    @app.get("/healthz", summary="liveness and the schema version")
    def healthz():
        return {"status": "ok", "schema_version": collector.store.schema_version()}

    @app.post("/v1/collections", status_code=201, summary="create a collection (admin token)",
              description="Returns the collection with its ingest_token (write only) and analyst_token "
                          "(read counts and estimates); they are shown once, stored as SHA-256 hashes.",
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": CollectionIn.model_json_schema()}}}})
    async def create_collection(request: Request):
        need_admin(_token(request))
        raw = await _body(request, max_body)
        try:
            spec = CollectionIn.model_validate_json(raw)
        except ValueError as exc:
            raise ApiError(422, f"invalid collection: {' '.join(str(exc).split())[:300]}") from None
        return await run_in_threadpool(collector.create, spec.name, spec.domain,
                                       spec.policy.model_dump(exclude_none=False), spec.keep_raw)

    @app.get("/v1/collections", summary="list collections (admin token)")
    def list_collections(request: Request):
        need_admin(_token(request))
        return {"collections": [collector.describe(n) for n in collector.names()]}

    @app.get("/v1/collections/{name}", summary="a collection and its ingest statistics (analyst or admin)")
    def get_collection(name: str, request: Request):
        need(name, _token(request), ("analyst", "admin"))
        return collector.describe(name)

    @app.post("/v1/collections/{name}/batches", summary="submit a batch of reports (ingest token)",
              description="Idempotent by batch_id: a retried batch counts once (status duplicate). "
                          "Acknowledged (200) batches are committed to disk. 413 above the body cap, "
                          "422 for reports outside their mechanism's output space or a mechanism the "
                          "policy refuses, 409 for a batch id reused with other reports.",
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": BatchIn.model_json_schema()}}}})
    async def post_batch(name: str, request: Request):
        need(name, _token(request), ("ingest",))
        body = await _body(request, max_body)
        try:
            res = await run_in_threadpool(collector.ingest, name, body)
        except LocalPrivError as exc:
            # one line on the server's stderr per refused batch (the reply carries the same line)
            sys.stderr.write(f"refused a batch for collection {name}: {' '.join(str(exc).split())[:500]}\n")
            if "was received before with other reports" in str(exc):
                raise ApiError(409, str(exc)) from None
            raise
        return {"status": res.status, "reports": res.reports, "counts_version": res.version}

    @app.get("/v1/collections/{name}/estimate", summary="the estimate with intervals (analyst or admin)",
             description="Cached per counts version: an unchanged collection is never re-estimated, and "
                         "concurrent identical requests share one computation. 200 with the estimate when "
                         "it is ready within the server's wait (default 2 s), else 202 with the job to poll "
                         "(Location: /v1/jobs/{id}). Any other query parameter is a setting of the estimator "
                         "(e.g. strength=0, stop=gap, delta=1e-9), read by its declared kind; unknown "
                         "settings are refused (422).",
             responses={202: {"description": "still computing: poll the job at Location"}})
    def get_estimate(name: str, request: Request,
                     estimator: str | None = Query(None, description="e.g. ibu, gibu, inv-p; default: the "
                                                   "domain's default (ems or dirichlet)"),
                     level: float = Query(0.95, gt=0, lt=1, description="interval level"),
                     stats: str = Query("", description="comma-separated statistics, e.g. mean,median")):
        need(name, _token(request), ("analyst", "admin"))
        names = tuple(s.strip() for s in stats.split(",") if s.strip())
        out = collector.estimate(name, estimator, level, names, _estimator_settings(request),
                                 wait=collector.estimate_wait)
        if isinstance(out, Job):
            return _job_response(out)
        return out

    @app.get("/v1/jobs/{job_id}", summary="a long estimate's job (analyst or admin of its collection)",
             description="200 with {status: done, result} when finished, 202 while queued or running, "
                         "200 with {status: failed or cancelled, error} if it ended without a result. "
                         "Jobs are kept for a while after they finish (the last 256).",
             responses={202: {"description": "still computing: poll again after Retry-After seconds"}})
    def get_job(job_id: str, request: Request):
        job = collector.jobs.get(job_id)
        if job is None:
            raise ApiError(404, f"no job {job_id[:64]} (finished jobs are forgotten after a while; ask again)")
        need(job.collection, _token(request), ("analyst", "admin"))
        if not job.done.wait(min(collector.estimate_wait, 1.0)):
            return _job_response(job)
        if job.status == "done":
            return {**job.describe(), "result": collector.job_value(job)}
        return job.describe()

    @app.get("/v1/collections/{name}/counts", summary="the counts as a counts file (analyst or admin)",
             description="The versioned counts file format of docs/format.md (CSV or Parquet): mergeable "
                         "with any other counts or report files by localpriv aggregate.")
    def get_counts(name: str, request: Request, format: str = Query("csv", pattern="^(csv|parquet)$")):
        need(name, _token(request), ("analyst", "admin"))
        version, data = collector.export_counts(name, format)
        media = "text/csv" if format == "csv" else "application/vnd.apache.parquet"
        return Response(data, media_type=media, headers={
            "X-Localpriv-Counts-Version": str(version),
            "Content-Disposition": f'attachment; filename="{name}-counts-v{version}.{format}"'})

    # ---- dashboard ---------------------------------------------------------------------------
    @app.get("/dashboard", response_class=HTMLResponse, summary="every collection's estimate (admin token)")
    def dashboard(request: Request, token: str | None = Query(None)):
        tok = _token(request, token)
        need_admin(tok)
        assert tok is not None  # need_admin refuses a missing token
        return HTMLResponse(_page([collector.describe(n) for n in collector.names()], tok))

    @app.get("/dashboard/{name}", response_class=HTMLResponse, summary="one collection's estimate (analyst)")
    def dashboard_one(name: str, request: Request, token: str | None = Query(None)):
        tok = _token(request, token)
        need(name, tok, ("analyst", "admin"))
        assert tok is not None  # need refuses a missing token
        return HTMLResponse(_page([collector.describe(name)], tok))

    @app.get("/dashboard/{name}/estimate.png", summary="the estimate's figure (analyst or admin)")
    def dashboard_png(name: str, request: Request, token: str | None = Query(None),
                      level: float = Query(0.95, gt=0, lt=1),
                      estimator: str | None = Query(None, description="default: the API's default "
                                                    "estimator of the domain (ems or dirichlet)")):
        need(name, _token(request, token), ("analyst", "admin"))
        return Response(collector.figure(name, estimator, level), media_type="image/png")

    return app


def _job_response(job: Job) -> JSONResponse:
    url = f"/v1/jobs/{job.id}"
    return JSONResponse({**job.describe(), "url": url}, status_code=202,
                        headers={"Location": url, "Retry-After": "1"})


def _page(collections: list[dict], token: str) -> str:
    parts = []
    for c in collections:
        s = c["ingest"]
        last = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(s["last_ingest"])) if s["last_ingest"] else "never"
        rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in (
            ("domain", c["domain"]), ("policy", json.dumps(c["policy"])), ("reports", f"{s['reports']:,}"),
            ("batches", f"{s['batches']:,}"), ("duplicate batches (retries)", f"{s['duplicate_batches']:,}"),
            ("refused batches", f"{s['refused_batches']:,}"), ("refused reports", f"{s['refused_reports']:,}"),
            ("last ingest", last), ("counts version", c["counts_version"])))
        img = (f'<img alt="estimate of {html.escape(c["name"])}" src="/dashboard/{quote(c["name"])}/estimate.png'
               f'?level=0.95&amp;token={quote(token)}">' if s["reports"] else "<p>no reports yet</p>")
        parts.append(f'<section><h2>{html.escape(c["name"])}</h2><table>{rows}</table>{img}</section>')
    body = "".join(parts) or "<p>no collections</p>"
    return ("<!doctype html><html><head><meta charset='utf-8'><title>localpriv collector</title>"
            "<style>body{font-family:sans-serif;margin:1em;background:#fff}th{text-align:left;padding-right:1em}"
            "img{max-width:100%;display:block;margin-top:.5em}section{margin-bottom:2em}</style></head>"
            f"<body><h1>localpriv collector</h1><p>Estimates with 95 % intervals; counts per (mechanism, "
            f"report), never raw reports.</p>{body}</body></html>")
