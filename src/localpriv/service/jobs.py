"""Long computations of the collector as jobs: single-flight per key, a bounded pool of child
processes, each under a CPU-time and memory bound, cancellable (docs/decisions/0032-estimate-jobs.md).

* :class:`JobPool` runs at most ``workers`` jobs at once, each in its own child process (forked from
  a ``forkserver`` that has the library loaded), with ``RLIMIT_CPU`` and ``RLIMIT_AS`` set in the child
  before it computes. A job is submitted under one or more *keys*; while it is unfinished, another
  submission under any of its keys gets the same job (one computation, however many requests).
  :meth:`JobPool.cancel_all` (SIGTERM) kills the running children and refuses new jobs.
* :class:`Debouncer` calls a function for a name once things have been quiet for ``delay`` seconds
  (at most ``10 * delay`` after the first poke): the collector's background refresh after ingest.

Nothing here knows about estimates: the collector passes a module-level function and its arguments.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import secrets
import signal
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from localpriv.utils.errors import LocalPrivError

__all__ = ["Job", "JobPool", "Debouncer", "JobsBusy", "JobFailed"]

#: Modules the forkserver imports once, so that a job's child starts with the library loaded.
PRELOAD = ["localpriv.service.core"]


class JobsBusy(LocalPrivError):
    """The pool refuses a job: too many waiting, or shutting down (HTTP 503)."""


class JobFailed(LocalPrivError):
    """A job ended without a result; ``code`` is its HTTP status (422, 500 or 503)."""

    def __init__(self, message: str, code: int = 500):
        super().__init__(message)
        self.code = int(code)


def _one_line(text: object, cap: int = 500) -> str:
    return " ".join(str(text).split())[:cap]


def _child(conn, target, args, cpu_seconds, memory_bytes) -> None:  # runs in the child process
    import resource
    if cpu_seconds:
        resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_seconds), int(cpu_seconds) + 5))
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (int(memory_bytes), int(memory_bytes)))
    try:
        out: tuple = ("ok", target(*args))
    except LocalPrivError as exc:
        out = ("error", 422, _one_line(exc))
    except MemoryError:
        out = ("error", 503, f"the computation needed more than the memory bound of {memory_bytes / 2**30:.3g} GiB")
    except Exception as exc:  # noqa: BLE001 - reported to the job's readers, one line
        out = ("error", 500, f"{type(exc).__name__}: {_one_line(exc, 300)}")
    conn.send(out)
    conn.close()


class Job:
    """One computation: ``status`` is ``queued``, ``running``, ``done``, ``failed`` or ``cancelled``.

    ``result`` is the target's return value once ``done``; ``error`` (one line) and ``code`` (an
    HTTP status: 422 bad input, 503 a bound or a cancellation, 500 anything else) once failed."""

    def __init__(self, keys: Sequence[Hashable], collection: str, target: Callable, args: tuple):
        self.id = secrets.token_urlsafe(12)
        self.keys, self.collection, self.target, self.args = tuple(keys), collection, target, args
        self.status = "queued"
        self.result: Any = None
        self.error: str | None = None
        self.code = 200
        self.created = time.time()
        self.started: float | None = None
        self.finished: float | None = None
        self.done = threading.Event()
        self.proc: Any = None

    @property
    def finished_ok(self) -> bool:
        return self.status == "done"

    def describe(self) -> dict:
        """The job as JSON data (without its result)."""
        now = time.time()
        return {"id": self.id, "collection": self.collection, "status": self.status,
                "seconds": round((self.finished or now) - (self.started or now), 3),
                **({"error": self.error} if self.error else {})}


class JobPool:
    """A bounded pool of child processes running :class:`Job`\\ s (see the module docstring).

    Parameters
    ----------
    workers : int
        Jobs running at once (child processes), default 2.
    cpu_seconds : float
        CPU-time bound of one job (``RLIMIT_CPU``); a job above it fails with 503.
    memory_bytes : int or None
        Address-space bound of one job's process (``RLIMIT_AS``); ``None``: none.
    max_queued : int
        Jobs waiting for a worker, at most; more are refused (:class:`JobsBusy`).
    keep : int
        Finished jobs kept for their readers (the oldest are forgotten first).
    on_start : callable, optional
        Called with each job as it starts computing (tests count computations with it).
    """

    def __init__(self, workers: int = 2, cpu_seconds: float = 300.0, memory_bytes: int | None = 4 << 30,
                 max_queued: int = 64, keep: int = 256, on_start: Callable[[Job], None] | None = None):
        if int(workers) < 1:
            raise LocalPrivError("the job pool needs at least one worker")
        self.workers, self.cpu_seconds, self.memory_bytes = int(workers), float(cpu_seconds), memory_bytes
        self.max_queued, self.keep, self.on_start = int(max_queued), int(keep), on_start
        self._lock = threading.Condition()
        self._queue: deque[Job] = deque()
        self._inflight: dict[Hashable, Job] = {}
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._closing = False
        self._threads: list[threading.Thread] = []
        self._ctx: Any = None

    # ---- submitting and reading -------------------------------------------------------------
    def submit(self, keys: Sequence[Hashable], collection: str, target: Callable, args: tuple,
               on_done: Callable[[Job], None] | None = None) -> tuple[Job, bool]:
        """``(job, new)``: the unfinished job under any of ``keys``, else a new one queued
        (``on_done(job)`` runs in the pool before the job leaves the in-flight table)."""
        with self._lock:
            if self._closing:
                raise JobsBusy("the collector is shutting down; retry later")
            for k in keys:
                job = self._inflight.get(k)
                if job is not None:
                    return job, False
            if len(self._queue) >= self.max_queued:
                raise JobsBusy(f"{len(self._queue)} computations are waiting already; retry later")
            job = Job(keys, collection, target, args)
            job.on_done = on_done  # type: ignore[attr-defined]  # kept with the job, called once
            for k in job.keys:
                self._inflight[k] = job
            self._jobs[job.id] = job
            self._forget()
            self._queue.append(job)
            self._start_threads()
            self._lock.notify()
            return job, True

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def inflight(self, key: Hashable) -> Job | None:
        with self._lock:
            return self._inflight.get(key)

    @staticmethod
    def wait(job: Job, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (``None``: until it finishes); is the job finished?"""
        return job.done.wait(timeout)

    def _forget(self) -> None:
        while len(self._jobs) > self.keep:
            for jid, j in self._jobs.items():
                if j.done.is_set():
                    del self._jobs[jid]
                    break
            else:
                return

    # ---- running ----------------------------------------------------------------------------
    def _context(self):
        if self._ctx is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(PRELOAD)
            self._ctx = ctx
        return self._ctx

    def _start_threads(self) -> None:
        while len(self._threads) < self.workers:
            t = threading.Thread(target=self._worker, name=f"localpriv-job-{len(self._threads)}", daemon=True)
            self._threads.append(t)
            t.start()

    def _worker(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closing:
                    self._lock.wait()
                if self._closing:
                    return
                job = self._queue.popleft()
                job.status, job.started = "running", time.time()
            if self.on_start is not None:
                self.on_start(job)
            try:
                self._run(job)
            except Exception as exc:  # noqa: BLE001 - the job fails, the worker lives on
                self._finish(job, "failed", None, 500, f"the job could not run: {type(exc).__name__}: "
                                                       f"{_one_line(exc, 300)}")

    def _run(self, job: Job) -> None:
        ctx = self._context()
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(send, job.target, job.args, self.cpu_seconds, self.memory_bytes),
                           daemon=True)
        if self._closing:
            self._finish(job, "cancelled", None, 503, "cancelled: the collector is shutting down")
            return
        proc.start()
        with self._lock:
            job.proc = proc
            closing = self._closing
        if closing:  # cancel_all ran while the child started
            proc.kill()
        send.close()
        out = None
        try:
            while True:
                if recv.poll(0.05):
                    try:
                        out = recv.recv()
                    except EOFError:
                        out = None
                    break
                if not proc.is_alive() or self._closing:
                    break
        finally:
            recv.close()
        if self._closing and out is None:
            proc.kill()
        proc.join(5)
        if out is not None and out[0] == "ok":
            self._finish(job, "done", out[1], 200, None)
        elif out is not None:
            self._finish(job, "failed", None, out[1], out[2])
        elif self._closing:
            self._finish(job, "cancelled", None, 503, "cancelled: the collector is shutting down")
        elif proc.exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
            self._finish(job, "failed", None, 503, f"the computation went over its CPU-time bound of "
                                                   f"{self.cpu_seconds:g} s")
        else:
            self._finish(job, "failed", None, 500, f"the computation's process ended without an answer "
                                                   f"(exit code {proc.exitcode})")

    def _finish(self, job: Job, status: str, result, code: int, error: str | None) -> None:
        job.result, job.code, job.error = result, code, error
        job.status, job.finished = status, time.time()
        callback = getattr(job, "on_done", None)
        if callback is not None and status == "done":
            try:
                callback(job)
            except Exception as exc:  # noqa: BLE001 - a failed cache insert is not a failed job
                job.error = f"{type(exc).__name__}: {_one_line(exc, 300)}"
        with self._lock:
            for k in job.keys:
                if self._inflight.get(k) is job:
                    del self._inflight[k]
            job.proc = None
        job.done.set()

    # ---- shutdown ---------------------------------------------------------------------------
    def cancel_all(self) -> None:
        """Refuse new jobs, cancel the queued ones and kill the running children (does not block:
        safe in a signal handler)."""
        with self._lock:
            self._closing = True
            queued = list(self._queue)
            self._queue.clear()
            running = [j.proc for j in self._jobs.values() if j.proc is not None]
            self._lock.notify_all()
        for p in running:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                p.kill()
        for job in queued:
            self._finish(job, "cancelled", None, 503, "cancelled: the collector is shutting down")

    def close(self, timeout: float = 10.0) -> None:
        """:meth:`cancel_all`, then wait (up to ``timeout`` seconds) for the workers to finish."""
        self.cancel_all()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))


class Debouncer:
    """Calls ``fn(name)`` in a background thread once ``name`` has not been poked for ``delay``
    seconds, and at the latest ``10 * delay`` after its first poke (steady traffic cannot starve
    it). ``fn`` returning ``False`` means "not now": it is called again ``delay`` seconds later."""

    def __init__(self, delay: float, fn: Callable[[str], object]):
        self.delay, self.fn = float(delay), fn
        self._lock = threading.Condition()
        self._due: dict[str, tuple[float, float]] = {}  # name -> (first poke, last poke)
        self._closing = False
        self._thread: threading.Thread | None = None

    def poke(self, name: str) -> None:
        now = time.monotonic()
        with self._lock:
            if self._closing:
                return
            known = self._due.get(name)
            self._due[name] = (now if known is None else known[0], now)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="localpriv-refresh", daemon=True)
                self._thread.start()
            if known is None:  # a name already waiting is due no earlier than the thread's wake-up
                self._lock.notify()  # (which recomputes it): only a new name wakes the thread

    def _next(self) -> str | None:
        with self._lock:
            while not self._closing:
                now = time.monotonic()
                ready = [(n, min(last + self.delay, first + 10 * self.delay)) for n, (first, last) in self._due.items()]
                due = [n for n, t in ready if t <= now]
                if due:
                    del self._due[due[0]]
                    return due[0]
                self._lock.wait(min((t for _n, t in ready), default=now + 60) - now)
            return None

    def _run(self) -> None:
        while True:
            name = self._next()
            if name is None:
                return
            try:
                again = self.fn(name) is False
            except Exception:  # noqa: BLE001 - a failed refresh is retried at the next ingest
                again = False
            if again:
                now = time.monotonic()
                with self._lock:
                    if name not in self._due:
                        self._due[name] = (now, now)

    def close(self) -> None:
        with self._lock:
            self._closing = True
            self._lock.notify_all()
