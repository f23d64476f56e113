"""``localpriv serve``: the collector service (FastAPI and uvicorn load when it starts)."""
from __future__ import annotations

from pathlib import Path

import typer

from localpriv.cli.common import friendly
from localpriv.service import ServerLimits
from localpriv.service import serve as run_service


@friendly
def serve(db: str = typer.Option("localpriv-collector.sqlite", "--db",
                                 help="postgresql://... or an SQLite file (created if missing)"),
          host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (default: loopback only)"),
          port: int = typer.Option(8000, "--port", help="TCP port"),
          max_body: int = typer.Option(8 << 20, "--max-body", help="bytes: larger request bodies are refused (413)"),
          header_timeout: float = typer.Option(10.0, "--header-timeout", min=0.1,
                                               help="seconds to receive a request's headers (then 408)"),
          body_timeout: float = typer.Option(60.0, "--body-timeout", min=0.1,
                                             help="seconds to receive a request's body (then 408)"),
          keep_alive: float = typer.Option(5.0, "--keep-alive", min=1, help="seconds an idle connection stays open"),
          max_connections: int = typer.Option(256, "--max-connections", min=1,
                                              help="connections at once; above it 503"),
          max_header_bytes: int = typer.Option(16 << 10, "--max-header-bytes", min=1024,
                                               help="bytes of a request's headers; above it 400"),
          estimate_wait: float = typer.Option(2.0, "--estimate-wait",
                                              help="seconds an estimate request waits before answering 202 "
                                                   "with a job to poll"),
          job_workers: int = typer.Option(2, "--job-workers", help="estimates computed at once (processes)"),
          job_cpu_seconds: float = typer.Option(300.0, "--job-cpu-seconds", help="CPU-time bound of one estimate"),
          grace: float = typer.Option(10.0, "--grace", help="seconds requests in flight get on SIGTERM"),
          http: str = typer.Option("auto", "--http", help="HTTP parser: auto (httptools where installed, else "
                                   "h11), httptools or h11"),
          admin_token_file: Path | None = typer.Option(
              None, "--admin-token-file", help="file holding the admin token (default: $LOCALPRIV_ADMIN_TOKEN, "
                                               "else a new token printed once)")) -> None:
    """Run the collector service: HTTP API, counts in SQLite or PostgreSQL, estimates, a dashboard
    (docs/service.md)."""
    token = None
    if admin_token_file is not None:
        token = admin_token_file.read_text(encoding="utf-8").strip()
    run_service(db, host, port, token, max_body,
                limits=ServerLimits(header_timeout, body_timeout, keep_alive, max_connections, max_header_bytes),
                estimate_wait=estimate_wait, job_workers=job_workers, job_cpu_seconds=job_cpu_seconds, grace=grace,
                http=http)
