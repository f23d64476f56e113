"""The collector's HTTP API (FastAPI; OpenAPI at ``/openapi.json``, pages at ``/docs``).

A thin layer over :class:`~localpriv.service.core.Collector`: it authenticates (bearer tokens),
caps request bodies (413 above ``max_body`` bytes, counted while reading, whatever
``Content-Length`` claims), reads every request strictly (unknown keys and query parameters
refused, no type coercion, names matched whole, JSON nesting measured before parsing) and turns
every error into one JSON line ``{"error": "..."}``; 500 only for faults of the server.
Slow clients are cut off: a header deadline in the HTTP protocol (:func:`server_config`) and a
body deadline in an ASGI middleware. Endpoints, the wire format and the limits: ``docs/service.md``.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import html
import json
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import h11
import uvicorn
from fastapi import FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from uvicorn.protocols.http.h11_impl import H11Protocol

from localpriv.service.core import NAME, Collector, NotAllowed, Principal, printable, read_json
from localpriv.service.jobs import Job, JobFailed, JobsBusy
from localpriv.service.limits import RateLimited
from localpriv.service.storage import OverBudget
from localpriv.service.wire import CONTENT_TYPE, MEDIA_TYPE, media_kind
from localpriv.utils.errors import LocalPrivError

__all__ = ["create_app", "server_config", "http_parser", "HTTP_PARSERS", "ServerLimits", "DEFAULT_MAX_BODY",
           "MAX_TOKEN", "MAX_QUERY_VALUE"]

#: Request bodies above this many bytes are refused (413): 8 MiB, about 10^6 index reports.
DEFAULT_MAX_BODY = 8 << 20
#: Tokens longer than this are refused (401) before hashing; issued tokens have 43 characters.
MAX_TOKEN = 256
#: Query values (and estimator settings) longer than this are refused (422); at most 32 settings.
MAX_QUERY_VALUE = 256
MAX_SETTINGS = 32
_TOKEN = re.compile(rf"[\x21-\x7e]{{1,{MAX_TOKEN}}}")  # printable ASCII without spaces
_SETTING = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_ESTIMATOR = re.compile(r"[A-Za-z0-9_-]{1,64}")
_STATS = re.compile(r"[A-Za-z0-9_]{1,32}(?:,[A-Za-z0-9_]{1,32}){0,15}")
_DECIMAL = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,3})?")


@dataclass(frozen=True)
class ServerLimits:
    """How long and how many: the defaults of ``localpriv serve`` (``docs/service.md``, Limits).

    Parameters
    ----------
    header_timeout : float
        Seconds from a connection's first byte (or its previous answer) to the end of a request's
        headers; then the connection is closed with 408.
    body_timeout : float
        Seconds from the start of a request to the last byte of its body; then 408 and close.
    keep_alive : float
        Seconds an idle keep-alive connection stays open (uvicorn ``timeout_keep_alive``).
    max_connections : int
        Connections and requests in progress at once; above it uvicorn answers 503
        (``limit_concurrency``).
    max_header_bytes : int
        Bytes of a request's head (request line and headers); above it 400
        (h11 ``max_incomplete_event_size``).
    """

    header_timeout: float = 10.0
    body_timeout: float = 60.0
    keep_alive: float = 5.0
    max_connections: int = 256
    max_header_bytes: int = 16 << 10


class ApiError(Exception):
    def __init__(self, status: int, message: str, close: bool = False):
        super().__init__(message)
        self.status, self.message, self.close = status, message, close


class _Strict(BaseModel):
    """Request models: unknown keys refused, nothing coerced (an integer may stand for a float)."""

    model_config = ConfigDict(strict=True, extra="forbid")


class BudgetModel(_Strict):
    period: int = Field(..., description="seconds; fixed windows of Unix time (1 s to 366 days)")
    eps: float | None = Field(None, description="cap on a device's spending in this collection per period")
    group: str | None = Field(None, max_length=64, description="device group: collections sharing device "
                              "identities and the cross-collection cap")
    group_eps: float | None = Field(None, description="cap on a device's spending over its group per period")
    devices_only: bool = Field(False, description="refuse batches posted with the shared ingest token")


class RateLimitModel(_Strict):
    period: int = Field(..., description="seconds; fixed windows of Unix time (1 s to 366 days)")
    requests: int | None = Field(None, description="requests per token and period")
    reports: int | None = Field(None, description="reports per token and period")


class PolicyModel(_Strict):
    mechanisms: list[str] = Field(..., min_length=1, max_length=64,
                                  description="allowed mechanism families (spec names), e.g. [\"krr\", \"oue\"]")
    max_eps: float | None = Field(None, description="cap on the computed LDP level epsilon_ldp of every spec")
    min_eps: float = Field(0.0, description="floor on the computed LDP level")
    max_eps_geo: float | None = Field(None, description="cap on the computed geo-indistinguishability level")
    budget: BudgetModel | None = Field(None, description="privacy budget per device and period")
    rate_limit: RateLimitModel | None = Field(None, description="requests and reports per token and period")


class CollectionIn(_Strict):
    name: str = Field(..., max_length=64, description="1-64 letters, digits, _ or -")
    domain: str = Field(..., max_length=1024,
                        description="a domain as on the command line: 0..99, a,b,c, bbox(...), manhattan")
    policy: PolicyModel
    keep_raw: bool = Field(False, description="also keep every report (counts are kept in any case)")


class GroupIn(_Strict):
    mechanism: str = Field(..., description="spec, e.g. krr(eps=2.0); k is filled from the collection's domain")
    reports: list[int | float | str] = Field(..., description="numbers (index/float reports) or lowercase "
                                             "hex strings (bit vectors), all of one kind")


class BatchIn(_Strict):
    batch_id: str = Field(..., description="client-chosen id, 1-128 of [A-Za-z0-9._:-]; a retry reuses it")
    groups: list[GroupIn]


#: the query parameters of the estimate endpoint that are not estimator settings
ESTIMATE_PARAMETERS = ("estimator", "level", "stats", "token")


def _query(request: Request, allowed: tuple[str, ...] | None) -> dict[str, str]:
    """The query parameters, each given once, of printable text of at most :data:`MAX_QUERY_VALUE`
    characters; names outside ``allowed`` are refused (``None``: any name of a setting)."""
    out: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if allowed is not None and key not in allowed:
            known = ", ".join(allowed) or "none"
            raise ApiError(422, f"unknown query parameter {printable(key, 40)!r} (known: {known})")
        if allowed is None and key not in ESTIMATE_PARAMETERS and _SETTING.fullmatch(key) is None:
            raise ApiError(422, f"query parameter {printable(key, 40)!r}: a setting name is a letter or _ "
                                "then up to 63 letters, digits or _")
        if key in out:
            raise ApiError(422, f"the query parameter {key} is given twice")
        if key != "token" and (len(value) > MAX_QUERY_VALUE or not value.isprintable()):  # tokens: 401
            raise ApiError(422, f"query parameter {key}: at most {MAX_QUERY_VALUE} printable characters")
        out[key] = value
    return out


def _estimator_settings(query: dict[str, str]) -> dict[str, str]:
    """The estimator settings of an estimate request: its other query parameters (at most 32)."""
    out = {k: v for k, v in query.items() if k not in ESTIMATE_PARAMETERS}
    if len(out) > MAX_SETTINGS:
        raise ApiError(422, f"{len(out)} estimator settings in the query: at most {MAX_SETTINGS}")
    return out


def _level(text: str | None) -> float:
    """An interval level from the query: a plain decimal number strictly between 0 and 1."""
    if text is None:
        return 0.95
    if _DECIMAL.fullmatch(text) is None or not 0 < float(text) < 1:
        raise ApiError(422, f"level {printable(text, 40)!r}: a decimal number between 0 and 1, e.g. 0.95")
    return float(text)


def _error(status: int, message: str, close: bool = False) -> JSONResponse:
    headers = {"Connection": "close"} if close else None
    return JSONResponse({"error": printable(" ".join(str(message).split()), 500)}, status_code=status,
                        headers=headers)


def _token(request: Request, query_token: str | None = None) -> str | None:
    return _bearer(request.headers.get("authorization", ""), query_token)


def _bearer(auth: str, query_token: str | None = None) -> str | None:
    """The token of an ``Authorization: Bearer`` header (else ``query_token``); 401 if malformed."""
    token = query_token
    if auth.lower().startswith("bearer "):
        token = auth[7:].strip() or None
    if token is not None and _TOKEN.fullmatch(token) is None:
        raise ApiError(401, f"malformed token: at most {MAX_TOKEN} printable ASCII characters without spaces")
    return token


class BodyDeadline:
    """ASGI middleware: a request's body must have arrived ``seconds`` after the request started;
    a slower one is answered 408 (one line) and its connection closed."""

    def __init__(self, app: Any, seconds: float) -> None:
        self.app, self.seconds = app, float(seconds)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, deadline_receive(receive, self.seconds), send)


def deadline_receive(receive: Any, seconds: float) -> Any:
    """``receive`` with a deadline ``seconds`` from now: a message later than it raises 408 (close)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds

    async def timed() -> Any:
        try:  # one timer handle (no task per message, as asyncio.wait_for makes)
            async with asyncio.timeout_at(deadline):
                return await receive()
        except TimeoutError:
            raise ApiError(408, f"request body not received within {seconds:g} s "
                                "(--body-timeout); send it faster or in smaller batches", close=True) from None
    return timed


#: Worker threads of one application's batch ingests (SQLite serializes the writes; PostgreSQL's
#: pool has a connection per thread).
INGEST_THREADS = 8


async def in_thread(executor: concurrent.futures.Executor, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a thread of ``executor``, awaited; a cancellation of the caller waits for
    ``fn`` to return before it propagates (as ``anyio.to_thread.run_sync`` does), so that a batch's
    transaction is never left behind by its request. ``loop.run_in_executor`` hands off with
    less CPU than anyio's worker threads."""
    fut = asyncio.get_running_loop().run_in_executor(executor, fn, *args)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        while not fut.done():
            try:
                await asyncio.shield(fut)
            except asyncio.CancelledError:
                continue
            except BaseException:  # noqa: BLE001 - the thread's error; the cancellation is what propagates
                break
        raise


def _close_with(transport: asyncio.Transport, status: int, reason: str, message: str) -> None:
    """Answer ``status`` with the one-line JSON error ``message`` and close the connection (for the
    protocol-level guards, which answer before any request reaches the application)."""
    body = json.dumps({"error": message}).encode()
    transport.write(f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\nconnection: close\r\n"
                    f"content-length: {len(body)}\r\n\r\n".encode() + body)
    transport.close()


class _HeadDeadline(asyncio.Protocol):
    """The deadline on request heads that both parsers' protocols add (uvicorn has none): a timer
    armed at a connection's first byte, or its first byte after an answer, and disarmed at the end
    of the headers; when it fires while the head is still awaited, 408 and close. Mixed in before
    uvicorn's protocol class, which provides ``loop`` and ``transport``; the subclass says when a
    head is awaited (:meth:`_awaiting_head`)."""

    head_timeout: float = 0.0
    _head_timer: asyncio.TimerHandle | None = None
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def _awaiting_head(self) -> bool:
        raise NotImplementedError

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_expired)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _head_expired(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._awaiting_head():
            return
        _close_with(self.transport, 408, "Request Timeout",
                    f"request headers not received within {self.head_timeout:g} s (--header-timeout)")


def _guarded_protocol(header_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the head deadline of :class:`_HeadDeadline` (h11 caps the head's
    size itself)."""

    class GuardedH11Protocol(_HeadDeadline, H11Protocol):
        head_timeout = header_timeout

        def _awaiting_head(self) -> bool:
            return self.conn.their_state is h11.IDLE

        def data_received(self, data: bytes) -> None:
            if self._awaiting_head():
                self._arm()
            super().data_received(data)
            if not self._awaiting_head():
                self._disarm()

    return GuardedH11Protocol


#: a header line naming ``Upgrade`` (case-insensitive): renamed in request heads on the httptools path
_UPGRADE_HEADER = re.compile(rb"(\n)upgrade([ \t]*:)", re.IGNORECASE)


def _unoffered(head: bytes) -> bytes:
    """``head`` with its ``Upgrade`` header lines renamed to ``x-upgrd`` (same length). llhttp takes a
    request that offers to switch protocols (``Connection: Upgrade`` with ``Upgrade: h2c``, which
    Java's ``HttpClient`` sends by default on ``http://``) as ending at its headers, so its body was
    lost and the connection answered 400; without the header it is the plain HTTP/1.1 request it
    also is, as h11 serves it. The collector serves no WebSocket, so no upgrade is ever taken."""
    return _UPGRADE_HEADER.sub(rb"\1x-upgrd\2", head)


def _guarded_httptools(header_timeout: float, max_head: int) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol (the llhttp parser in C) with the guards of the h11 one: the
    head deadline of :class:`_HeadDeadline` and a cap of ``max_head`` bytes on a request's line and
    headers (then 400 and close), which h11 enforces itself and httptools does not. Needs the
    ``httptools`` package."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpToolsProtocol(_HeadDeadline, HttpToolsProtocol):
        head_timeout = header_timeout
        _in_head = True  # no request's headers complete since the last request (or the connection's start)
        _head_bytes = 0

        def _awaiting_head(self) -> bool:
            return self._in_head

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                self._arm()
                self._head_bytes += len(data)
                end = data.find(b"\r\n\r\n")
                data = _unoffered(data) if end < 0 else _unoffered(data[:end]) + data[end:]
            super().data_received(data)
            if self._in_head and self._head_bytes > max_head and not self.transport.is_closing():
                self._disarm()
                _close_with(self.transport, 400, "Bad Request",
                            f"request line and headers above {max_head:,} bytes (--max-header-bytes)")

        def on_headers_complete(self) -> None:
            self._in_head, self._head_bytes = False, 0
            self._disarm()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._head_bytes = True, 0

    return GuardedHttpToolsProtocol


#: The HTTP parsers of :func:`server_config`: ``auto`` is ``httptools`` where installed, else ``h11``.
HTTP_PARSERS = ("auto", "httptools", "h11")


def http_parser(http: str = "auto") -> str:
    """The parser ``http`` names (``auto``: ``httptools`` where the package is installed, else
    ``h11``); a one-line :class:`LocalPrivError` for ``httptools`` without the package."""
    if http not in HTTP_PARSERS:
        raise LocalPrivError(f"HTTP parser {http!r}: choose {', '.join(HTTP_PARSERS)}")
    if http == "h11":
        return http
    try:
        import httptools  # noqa: F401 - only whether it is installed
    except ImportError:
        if http == "httptools":
            raise LocalPrivError("the httptools parser needs the httptools package (pip install httptools)") from None
        return "h11"
    return "httptools"


def server_config(app: Any, host: str, port: int, limits: ServerLimits | None = None,
                  http: str = "auto") -> uvicorn.Config:
    """The uvicorn configuration of ``localpriv serve``: the HTTP parser ``http`` (``auto``:
    httptools where installed, else h11; :func:`http_parser`) with the header deadline and the
    head-size cap of ``limits``, the keep-alive timeout and the connection cap (no access log:
    dashboard URLs carry a token). The body deadline is in :func:`create_app`."""
    lim = limits or ServerLimits()
    parser = http_parser(http)
    protocol = (_guarded_httptools(lim.header_timeout, int(lim.max_header_bytes)) if parser == "httptools"
                else _guarded_protocol(lim.header_timeout))
    return uvicorn.Config(app, host=host, port=int(port), log_level="warning", access_log=False,
                          proxy_headers=False,  # nothing reads the client's address: no proxy layer per request
                          http=protocol, timeout_keep_alive=int(max(1, lim.keep_alive)),
                          limit_concurrency=int(lim.max_connections),
                          h11_max_incomplete_event_size=int(lim.max_header_bytes))


async def _empty_body(request: Request) -> None:
    """A request that takes no body: nothing, or an empty JSON object (``{}``); else 422."""
    raw = await _body(request, 1024)
    if raw.strip() and read_json(raw, "the body") != {}:
        raise ApiError(422, "this request takes no body (or an empty JSON object {})")


async def _body(request: Request, cap: int) -> bytes:
    return await _read_body(request.headers.get("content-length"), request.receive, cap)


async def _read_body(declared: str | None, receive: Any, cap: int) -> bytes:
    """A request's body from its ASGI ``receive``: 413 past ``cap`` bytes (the declared
    ``Content-Length`` first, then the bytes counted as they arrive), 400 if the client left."""
    if declared is not None:
        try:
            if int(declared) > cap:
                raise ApiError(413, f"request body of {int(declared):,} bytes refused: at most {cap:,} bytes; "
                                    "send smaller batches")
        except ValueError:
            raise ApiError(400, "Content-Length is not a number") from None
    parts, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        if message["type"] != "http.request":
            continue
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            raise ApiError(413, f"request body above {cap:,} bytes refused; send smaller batches")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _internal(path: str, exc: BaseException) -> JSONResponse:
    """500: one line for the client, the type on stderr."""
    sys.stderr.write(f"internal error on {printable(path, 200)}: {type(exc).__name__}: "
                     f"{printable(' '.join(str(exc).split()), 300)}\n")
    return _error(500, f"internal error ({type(exc).__name__}); retry later")


def _retry(resp: JSONResponse, seconds: object) -> JSONResponse:
    resp.headers["Retry-After"] = str(seconds)
    return resp


#: the answer to each kind of error (the most specific class in an error's MRO applies), for the
#: routed endpoints (FastAPI's exception handlers) and the direct batch path alike
ERROR_REPLIES: dict[type[Exception], Any] = {
    ApiError: lambda path, exc: _error(exc.status, exc.message, exc.close),
    StarletteHTTPException: lambda path, exc: _error(exc.status_code, str(exc.detail)),  # unknown path, method
    ClientDisconnect: lambda path, exc: _error(400, "the client disconnected before its request was read"),
    LocalPrivError: lambda path, exc: _error(422, str(exc)),
    RateLimited: lambda path, exc: _retry(_error(429, str(exc)), exc.retry_after),
    OverBudget: lambda path, exc: _error(403, str(exc)),
    NotAllowed: lambda path, exc: _error(403, str(exc)),
    JobsBusy: lambda path, exc: _retry(_error(503, str(exc)), 2),
    JobFailed: lambda path, exc: _error(exc.code, str(exc)),
    RequestValidationError: lambda path, exc: _error(422, _problem("invalid request", exc.errors())),
    Exception: _internal,
}


def _kind(exc: BaseException) -> type[Exception]:
    """The most specific class in ``exc``'s MRO with an answer in :data:`ERROR_REPLIES`."""
    return next((k for k in type(exc).__mro__ if k in ERROR_REPLIES), Exception)


def error_reply(path: str, exc: BaseException) -> JSONResponse:
    """The one-line JSON answer to ``exc`` raised while serving ``path`` (:data:`ERROR_REPLIES`)."""
    return ERROR_REPLIES[_kind(exc)](path, exc)


async def _handler(request: Request, exc: Exception) -> JSONResponse:
    return error_reply(request.url.path, exc)


#: the path of batch posts (a name is any text without ``/``, as the routed path's parameter)
BATCH_PATH = re.compile(r"/v1/collections/([^/]+)/batches")


class CollectorApp(FastAPI):
    """The collector's FastAPI application; a batch post without a query string (the ingest path,
    the request a server answers most) goes straight to ``state.direct_batch``, the rest through
    FastAPI's routing (``docs/service.md``, Ingest CPU)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (scope["type"] == "http" and scope["method"] == "POST" and not scope.get("query_string")
                and not scope.get("root_path")):
            m = BATCH_PATH.fullmatch(scope["path"])
            direct = getattr(self.state, "direct_batch", None)
            if m is not None and direct is not None:
                await direct(m.group(1), scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(collector: Collector, max_body: int = DEFAULT_MAX_BODY, body_timeout: float = 60.0) -> FastAPI:
    """The FastAPI application of ``collector`` (run it with uvicorn: :func:`localpriv.service.serve`);
    bodies above ``max_body`` bytes are refused (413), bodies slower than ``body_timeout`` seconds
    too (408)."""
    app = CollectorApp(title="localpriv collector", version="1",
                  description="Collects locally privatized reports into counts per (mechanism, report) "
                              "and serves estimates with intervals. Wire format: docs/service.md.")
    app.state.collector = collector
    app.state.started = time.time()
    ingest_threads = concurrent.futures.ThreadPoolExecutor(INGEST_THREADS, thread_name_prefix="localpriv-ingest")
    app.state.ingest_threads = ingest_threads
    app.add_middleware(BodyDeadline, seconds=body_timeout)

    for kind in ERROR_REPLIES:
        app.add_exception_handler(kind, _handler)

    def need(name: str, token: str | None, roles: tuple[str, ...]) -> str:
        return who(name, token, roles).role

    def who(name: str, token: str | None, roles: tuple[str, ...]) -> Principal:
        if NAME.fullmatch(name) is None:
            raise ApiError(404, f"no collection named {printable(name, 64)!r}: names are 1-64 ASCII letters, "
                                "digits, _ or -")
        if not token:
            raise ApiError(401, "missing token: send Authorization: Bearer TOKEN")
        principal = collector.principal(name, token)
        if principal is None:
            raise ApiError(401, "wrong token")
        if principal.role not in roles:
            raise ApiError(403, f"the {principal.role} token cannot do this (needs: {' or '.join(roles)})")
        if not collector.exists(name):
            raise ApiError(404, f"no collection named {name}")
        return principal

    def need_admin(token: str | None) -> None:
        if not token:
            raise ApiError(401, "missing token: send Authorization: Bearer TOKEN")
        if not collector.is_admin(token):
            raise ApiError(401, "wrong token: this needs the admin token")

    @app.get("/healthz", summary="liveness and the schema version")
    def healthz(request: Request):
        _query(request, ())
        return {"status": "ok", "schema_version": collector.store.schema_version()}

    @app.post("/v1/collections", status_code=201, summary="create a collection (admin token)",
              description="Returns the collection with its ingest_token (write only) and analyst_token "
                          "(read counts and estimates); they are shown once, stored as SHA-256 hashes.",
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": CollectionIn.model_json_schema()}}}})
    async def create_collection(request: Request):
        _query(request, ())
        need_admin(_token(request))
        raw = await _body(request, max_body)
        data = read_json(raw, "the collection")
        try:
            spec = CollectionIn.model_validate(data)
        except ValidationError as exc:
            raise ApiError(422, _problem("invalid collection", exc.errors())) from None
        return await run_in_threadpool(collector.create, spec.name, spec.domain,
                                       spec.policy.model_dump(exclude_none=False), spec.keep_raw)

    @app.get("/v1/collections", summary="list collections (admin token)")
    def list_collections(request: Request):
        _query(request, ())
        need_admin(_token(request))
        return {"collections": [collector.describe(n) for n in collector.names()]}

    @app.get("/v1/collections/{name}", summary="a collection and its ingest statistics (analyst or admin)")
    def get_collection(name: str, request: Request):
        _query(request, ())
        need(name, _token(request), ("analyst", "admin"))
        return collector.describe(name)

    @app.post("/v1/collections/{name}/enrollment-tokens", status_code=201,
              summary="a new enrollment token of the collection (admin token)",
              description="Devices register with it (POST /v1/collections/{name}/devices). Shown once, "
                          "stored as a SHA-256 hash. No body (or an empty JSON object).")
    async def post_enrollment(name: str, request: Request):
        _query(request, ())
        tok = _token(request)
        need_admin(tok)
        if NAME.fullmatch(name) is None or collector.store.collection(name) is None:
            raise ApiError(404, f"no collection named {printable(name, 64)!r}")
        await _empty_body(request)
        return await run_in_threadpool(collector.enroll, name)

    @app.post("/v1/collections/{name}/devices", status_code=201,
              summary="register a device (enrollment token)",
              description="Returns the new device's device_id and device_token (shown once, stored as a "
                          "SHA-256 hash). The device token posts batches to every collection of the "
                          "collection's device group, each charged to the device. No body (or an empty "
                          "JSON object). Rate limited like ingest (429 with Retry-After).")
    async def post_device(name: str, request: Request):
        _query(request, ())
        principal = who(name, _token(request), ("enroll",))
        await _empty_body(request)
        return await run_in_threadpool(collector.register, name, principal)

    @app.get("/v1/collections/{name}/privacy", summary="the collection's privacy report (analyst or admin)",
             description="Mechanisms in use with their computed levels and the level amplified by shuffling, "
                         "the distribution of devices' spending (basic composition) in the current period "
                         "and over their lifetime, over-budget refusals, reports charged to no device, and "
                         "what a level means in plain words.")
    def get_privacy(name: str, request: Request):
        _query(request, ())
        need(name, _token(request), ("analyst", "admin"))
        return collector.privacy_report(name)

    @app.post("/v1/collections/{name}/batches", summary="submit a batch of reports (ingest or device token)",
              description="Idempotent by batch_id: a retried batch counts once (status duplicate). "
                          "Acknowledged (200) batches are committed to disk, a device's with its charge. "
                          "413 above the body cap, 422 for reports outside their mechanism's output space or a "
                          "mechanism the policy refuses, 409 for a batch id reused with other reports, 403 "
                          "over the device's budget, 429 (Retry-After) over the token's rate limit.",
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": BatchIn.model_json_schema()}, CONTENT_TYPE: {
                  "schema": {"type": "string", "format": "binary",
                             "description": "the binary body: a JSON header and the reports packed as "
                                            "little-endian arrays (docs/service.md)"}}}}})
    async def post_batch(name: str, request: Request):
        _query(request, ())
        return await batch_reply(name, _token(request), request.headers.get("content-length"), request.receive,
                                 request.headers.get("content-type"))

    async def batch_reply(name: str, token: str | None, declared: str | None, receive: Any,
                          content_type: str | None = None) -> dict:
        """A batch's answer: the token checked, then the body's media type (JSON, or the binary
        body of :mod:`localpriv.service.wire`; 415 for another version of it), then the body read
        (capped), then the batch counted in a worker thread (committed when it returns)."""
        principal = who(name, token, ("ingest", "device"))
        kind = media_kind(content_type)
        if kind is None:
            raise ApiError(415, f"Content-Type {printable(content_type, 80)!r}: {MEDIA_TYPE} is read in version "
                                f"v=1 only ({CONTENT_TYPE}); or send JSON")
        body = await _read_body(declared, receive, max_body)
        try:
            res = await in_thread(ingest_threads, collector.ingest, name, body, principal, kind == "binary")
        except LocalPrivError as exc:
            # one line on the server's stderr per refused batch (the reply carries the same line)
            sys.stderr.write(f"refused a batch for collection {name}: {' '.join(str(exc).split())[:500]}\n")
            if "was received before with other reports" in str(exc):
                raise ApiError(409, str(exc)) from None
            raise
        return {"status": res.status, "reports": res.reports, "counts_version": res.version}

    async def direct_batch(name: str, scope: Any, receive: Any, send: Any) -> None:
        """``POST /v1/collections/{name}/batches`` without a query string, answered without the
        routing, dependency and middleware layers: the same token, body and ingest steps
        (:func:`batch_reply`), the same body deadline and the same answers (:func:`error_reply`)."""
        auth, declared, content_type = "", None, None
        for key, value in scope["headers"]:
            if key == b"authorization" and not auth:
                auth = value.decode("latin-1")
            elif key == b"content-length" and declared is None:
                declared = value.decode("latin-1")
            elif key == b"content-type" and content_type is None:
                content_type = value.decode("latin-1")
        try:
            result = await batch_reply(name, _bearer(auth), declared, deadline_receive(receive, body_timeout),
                                       content_type)
        except Exception as exc:  # noqa: BLE001 - every error becomes its one-line answer
            await error_reply(scope["path"], exc)(scope, receive, send)
            if _kind(exc) is Exception:  # a fault of the server: raised on after its answer, as
                raise  # Starlette does for the routed endpoints
            return
        # the bytes and headers of JSONResponse(result), sent as the two ASGI messages directly
        body = json.dumps(result, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    app.state.direct_batch = direct_batch

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
                     level: str | None = Query(None, description="interval level, a decimal number between "
                                               "0 and 1 (default 0.95)"),
                     stats: str = Query("", description="comma-separated statistics, e.g. mean,median")):
        query = _query(request, None)
        need(name, _token(request), ("analyst", "admin"))
        if estimator is not None and _ESTIMATOR.fullmatch(estimator) is None:
            raise ApiError(422, f"estimator {printable(estimator, 40)!r}: a name such as ibu or inv-p")
        if stats and _STATS.fullmatch(stats) is None:
            raise ApiError(422, "stats: up to 16 comma-separated names of letters, digits or _, e.g. mean,median")
        names = tuple(s for s in stats.split(",") if s)
        out = collector.estimate(name, estimator, _level(level), names, _estimator_settings(query),
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
    def get_counts(name: str, request: Request, format: Literal["csv", "parquet"] = Query("csv")):
        _query(request, ("format", "token"))
        need(name, _token(request), ("analyst", "admin"))
        version, data = collector.export_counts(name, format)
        media = "text/csv" if format == "csv" else "application/vnd.apache.parquet"
        return Response(data, media_type=media, headers={
            "X-Localpriv-Counts-Version": str(version),
            "Content-Disposition": f'attachment; filename="{name}-counts-v{version}.{format}"'})

    # ---- dashboard ---------------------------------------------------------------------------
    @app.get("/dashboard", response_class=HTMLResponse, summary="every collection's estimate (admin token)")
    def dashboard(request: Request, token: str | None = Query(None)):
        _query(request, ("token",))
        tok = _token(request, token)
        need_admin(tok)
        assert tok is not None  # need_admin refuses a missing token
        return HTMLResponse(_page([collector.describe(n) for n in collector.names()], tok))

    @app.get("/dashboard/{name}", response_class=HTMLResponse, summary="one collection's estimate (analyst)")
    def dashboard_one(name: str, request: Request, token: str | None = Query(None)):
        _query(request, ("token",))
        tok = _token(request, token)
        need(name, tok, ("analyst", "admin"))
        assert tok is not None  # need refuses a missing token
        return HTMLResponse(_page([collector.describe(name)], tok))

    @app.get("/dashboard/{name}/privacy", response_class=HTMLResponse,
             summary="one collection's privacy report as a page (analyst or admin)")
    def dashboard_privacy(name: str, request: Request, token: str | None = Query(None)):
        _query(request, ("token",))
        need(name, _token(request, token), ("analyst", "admin"))
        return HTMLResponse(_privacy_page(collector.privacy_report(name)))

    @app.get("/dashboard/{name}/estimate.png", summary="the estimate's figure (analyst or admin)")
    def dashboard_png(name: str, request: Request, token: str | None = Query(None),
                      level: str | None = Query(None, description="interval level (default 0.95)"),
                      estimator: str | None = Query(None, description="default: the API's default "
                                                    "estimator of the domain (ems or dirichlet)")):
        _query(request, ("token", "level", "estimator"))
        need(name, _token(request, token), ("analyst", "admin"))
        if estimator is not None and _ESTIMATOR.fullmatch(estimator) is None:
            raise ApiError(422, f"estimator {printable(estimator, 40)!r}: a name such as ibu or inv-p")
        return Response(collector.figure(name, estimator, _level(level)), media_type="image/png")

    return app


def _problem(what: str, errors: Any) -> str:
    """The first of pydantic's problems as one line: where, what, and how many problems in all."""
    errs = list(errors)
    first = errs[0] if errs else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{what}: {printable(where, 80)}: {first.get('msg', 'invalid')} ({len(errs)} problem(s))"


def _job_response(job: Job) -> JSONResponse:
    url = f"/v1/jobs/{job.id}"
    return JSONResponse({**job.describe(), "url": url}, status_code=202,
                        headers={"Location": url, "Retry-After": "1"})


#: the policy's keys as the dashboard names them (docs/service.md)
POLICY_LABELS = {"mechanisms": "allowed mechanisms", "max_eps": "largest LDP level ε",
                 "min_eps": "smallest LDP level ε", "max_eps_geo": "largest geo-indistinguishability level ε"}


def policy_table(policy: dict[str, Any]) -> str:
    """A collection's policy as an HTML table (one row per rule in the order of
    :data:`POLICY_LABELS`, lists joined by commas, no cap written as "none"), every value escaped."""
    rows = []
    order = [k for k in POLICY_LABELS if k in policy] + sorted(k for k in policy if k not in POLICY_LABELS)
    for key in order:
        value = policy[key]
        text = "none" if value is None else ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        rows.append(f"<tr><th>{html.escape(POLICY_LABELS.get(key, key))}</th><td>{html.escape(text)}</td></tr>")
    return f'<table class="policy">{"".join(rows)}</table>'


def _page(collections: list[dict], token: str) -> str:
    parts = []
    for c in collections:
        s = c["ingest"]
        last = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(s["last_ingest"])) if s["last_ingest"] else "never"
        rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in (
            ("domain", c["domain"]), ("reports", f"{s['reports']:,}"),
            ("batches", f"{s['batches']:,}"), ("duplicate batches (retries)", f"{s['duplicate_batches']:,}"),
            ("refused batches", f"{s['refused_batches']:,}"), ("refused reports", f"{s['refused_reports']:,}"),
            ("last ingest", last), ("counts version", c["counts_version"])))
        rows += f"<tr><th>policy</th><td>{policy_table(c['policy'])}</td></tr>"
        img = (f'<img alt="estimate of {html.escape(c["name"])}" src="/dashboard/{quote(c["name"])}/estimate.png'
               f'?level=0.95&amp;token={quote(token)}">' if s["reports"] else "<p>no reports yet</p>")
        link = (f'<p><a href="/dashboard/{quote(c["name"])}/privacy?token={quote(token)}">privacy report</a></p>')
        parts.append(f'<section><h2>{html.escape(c["name"])}</h2><table>{rows}</table>{link}{img}</section>')
    body = "".join(parts) or "<p>no collections</p>"
    return ("<!doctype html><html><head><meta charset='utf-8'><title>localpriv collector</title>"
            "<style>body{font-family:sans-serif;margin:1em;background:#fff}th{text-align:left;padding-right:1em}"
            "img{max-width:100%;display:block;margin-top:.5em}section{margin-bottom:2em}"
            "table.policy{border-collapse:collapse}table.policy th,table.policy td{border:1px solid #ccc;"
            "padding:1px 6px;font-weight:normal}</style></head>"
            f"<body><h1>localpriv collector</h1><p>Estimates with 95 % intervals; counts per (mechanism, "
            f"report), never raw reports.</p>{body}</body></html>")


def _privacy_page(rep: dict) -> str:
    """The privacy report (:meth:`Collector.privacy_report`) as an HTML page, every value escaped."""
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return html.escape(f"{v:.4g}")
        return html.escape("-" if v is None else str(v))

    mech_rows = "".join(
        f"<tr><td>{cell(m['mechanism'])}</td><td>{cell(m['reports'])}</td><td>{cell(m['epsilon'])}</td>"
        f"<td>{cell((m.get('shuffled') or {}).get('epsilon'))}</td>"
        f"<td>{cell((m.get('longitudinal') or {}).get('epsilon_perm'))}</td><td>{cell(m['meaning'])}</td></tr>"
        for m in rep["mechanisms"])
    dev = rep["devices"]

    def spread_rows(label: str, d: dict) -> str:
        qs = ", ".join(f"{q}: {cell(v)}" for q, v in d["quantiles"].items())
        return (f"<tr><th>{html.escape(label)}</th><td>{cell(d['devices'])}</td><td>{qs}</td>"
                f"<td>{cell(d['max'])}</td></tr>")
    period = dev["period"]
    start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(period["start"]))
    un = rep["unattributed"]
    label = f"this period (from {start}, {period['seconds']} s)"
    first = rep["mechanisms"][0] if rep["mechanisms"] else {}
    delta = (first.get("shuffled") or {}).get("delta")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>privacy of "
            f"{html.escape(rep['collection'])}</title><style>body{{font-family:sans-serif;margin:1em}}"
            "th,td{text-align:left;padding-right:1em}</style></head><body>"
            f"<h1>Privacy of {html.escape(rep['collection'])}</h1><p>{cell(rep['meaning'])}.</p>"
            f"<p>How levels add up: {cell(rep['composition'])}.</p>"
            f"<h2>Mechanisms in use</h2><table><tr><th>mechanism</th><th>reports</th><th>computed eps</th>"
            f"<th>eps if shuffled (delta {cell(delta)})</th><th>eps_perm (memoized)</th><th>meaning</th></tr>"
            f"{mech_rows}</table>"
            f"<h2>Devices</h2><p>group {cell(dev['group'])}, {cell(dev['registered'])} registered; budget "
            f"{cell(json.dumps(rep['budget']))}; rate limit {cell(json.dumps(rep['rate_limit']))}</p>"
            "<table><tr><th>spending</th><th>devices</th><th>quantiles</th><th>max</th></tr>"
            f"{spread_rows(label, period)}"
            f"{spread_rows('lifetime', dev['lifetime'])}</table>"
            f"<p>over-budget refusals: {cell(dev['over_budget_refusals'])}; worst device this period: "
            f"{cell(dev['worst_device_meaning'])}</p>"
            f"<h2>Charged to no device</h2><p>{cell(un['batches'])} batches, {cell(un['reports'])} reports: "
            f"{cell(un['meaning'])}.</p></body></html>")
