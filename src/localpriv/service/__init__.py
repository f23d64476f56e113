"""The collector as a service: ``localpriv serve`` (storage: docs/decisions/0017-service-storage.md).

Reports arrive over HTTP in batches, are checked against the collection's policy and their
mechanisms' output spaces, and are added to counts per (mechanism, report) in SQLite (default) or
PostgreSQL; estimates with intervals are computed from the counts on demand and cached per counts
version. Modules: :mod:`~localpriv.service.storage` (the database), :mod:`~localpriv.service.policy`
(what a collection accepts), :mod:`~localpriv.service.core` (the logic), :mod:`~localpriv.service.app`
(the HTTP API and the dashboard). Clients: :mod:`localpriv.service.client`. Wire format: ``docs/service.md``.

Nothing here is imported by ``import localpriv`` or the command line's start-up (FastAPI loads only
when a server starts).
"""
from __future__ import annotations

import os
import secrets
import sys

from localpriv.service.app import DEFAULT_MAX_BODY, ServerLimits, create_app, http_parser, server_config
from localpriv.service.core import Collector
from localpriv.service.jobs import JobPool
from localpriv.service.storage import open_store
from localpriv.utils.validation import LocalPrivError

__all__ = ["serve", "launch", "free_port", "DEFAULT_DB", "ServerLimits"]

#: The database ``localpriv serve`` uses without ``--db``: an SQLite file in the current folder.
DEFAULT_DB = "localpriv-collector.sqlite"


def serve(db: str = DEFAULT_DB, host: str = "127.0.0.1", port: int = 8000, admin_token: str | None = None,
          max_body: int | None = None, pool: int = 4, limits: ServerLimits | None = None, *,
          estimate_wait: float = 2.0, job_workers: int = 2, job_cpu_seconds: float = 300.0,
          job_memory_mb: int | None = 4096, refresh_delay: float | None = 1.0, grace: float = 10.0,
          http: str = "auto") -> None:
    """Run the collector until interrupted (uvicorn; one process, estimates in child processes).

    Parameters
    ----------
    db : str
        ``postgresql://...``, ``sqlite:///PATH`` or a file path (SQLite, created if missing).
    host, port : str, int
        Where to listen (default loopback only).
    admin_token : str, optional
        The token that creates collections; default ``$LOCALPRIV_ADMIN_TOKEN``, else a new one,
        printed once on stderr.
    max_body : int, optional
        Request bodies above this many bytes are refused with 413 (default 8 MiB).
    limits : ServerLimits, optional
        Header and body deadlines, keep-alive, connection and head-size caps (defaults:
        :class:`~localpriv.service.app.ServerLimits`, ``docs/service.md``).
    estimate_wait : float
        Seconds an estimate request waits for its computation before answering 202 with a job.
    job_workers, job_cpu_seconds, job_memory_mb
        Estimates computed at once (child processes), and each one's CPU-time and memory bound.
    refresh_delay : float or None
        Seconds of quiet after ingest before the default estimate is recomputed (``None``: never).
    grace : float
        On SIGTERM or SIGINT: jobs are cancelled at once, requests in flight (an ingest commits or
        is refused whole) get up to ``grace`` seconds, then the process exits.
    http : str
        The HTTP parser: ``auto`` (httptools where installed, else h11), ``httptools`` or ``h11``
        (:func:`~localpriv.service.app.server_config`; decision record 0082).
    """
    import uvicorn

    http_parser(http)  # an unknown parser refused before anything starts
    token = admin_token or os.environ.get("LOCALPRIV_ADMIN_TOKEN")
    if not token:
        token = secrets.token_urlsafe(32)
        sys.stderr.write(f"admin token (shown once; set LOCALPRIV_ADMIN_TOKEN to choose it): {token}\n")
    store = open_store(db, pool=pool)
    lim = limits or ServerLimits()
    jobs = JobPool(workers=job_workers, cpu_seconds=job_cpu_seconds,
                   memory_bytes=None if job_memory_mb is None else int(job_memory_mb) << 20)
    collector = Collector(store, token, jobs=jobs, estimate_wait=estimate_wait, refresh_delay=refresh_delay)
    app = create_app(collector, max_body or DEFAULT_MAX_BODY, lim.body_timeout)
    where = "PostgreSQL" if store.pg else f"SQLite {store.path}"
    sys.stderr.write(f"localpriv collector on http://{host}:{port} ({where}, schema version "
                     f"{store.schema_version()}); OpenAPI at /docs\n")
    sys.stderr.flush()

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):  # SIGTERM/SIGINT: cancel the jobs now, then uvicorn's shutdown
            jobs.cancel_all()
            super().handle_exit(sig, frame)

    config = server_config(app, host, int(port), lim, http)  # no access log: dashboard URLs carry a token
    config.timeout_graceful_shutdown = max(1, round(grace))
    try:
        Server(config).run()
    finally:
        app.state.ingest_threads.shutdown(wait=True)  # a batch in a worker thread commits or rolls back first
        collector.close()
        store.close()
        sys.stderr.write("localpriv collector stopped\n")
        sys.stderr.flush()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (for :func:`launch` in tests and benchmarks)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(db: str, port: int, log, admin_token: str, timeout: float = 60.0, args: tuple[str, ...] = ()):
    """Start ``localpriv serve`` in a child process on loopback and wait until ``/healthz``
    answers (tests, the load test, supervisors). Returns the :class:`subprocess.Popen`; the
    server's stderr is appended to ``log``; ``args`` are more options of ``localpriv serve``.
    Raises :class:`~localpriv.LocalPrivError` (one line, the end of the log) if it exits or does
    not answer within ``timeout`` seconds."""
    import subprocess
    import time

    import httpx

    env = {**os.environ, "LOCALPRIV_ADMIN_TOKEN": admin_token, "OPENBLAS_NUM_THREADS": "1"}
    with open(log, "ab") as err:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen([sys.executable, "-m", "localpriv.cli.main", "serve", "--db", db, "--host", "127.0.0.1",
                                 "--port", str(port), *args], env=env, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log, "rb") as f:
                tail = f.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
            raise LocalPrivError(f"the server exited (code {proc.returncode}): {tail[-1] if tail else 'no output'}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise LocalPrivError(f"the server did not answer on port {port} within {timeout:g} s")
