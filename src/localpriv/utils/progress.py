"""Progress of long estimates: a bar on a terminal, a status line otherwise.

The EM engine (:func:`localpriv.estimators.em.em`) calls ``callback(t, theta, L)`` after every
iteration (plain EM) or SQUAREM cycle. :class:`EMProgress` is such a callback, with two small
extensions the engine knows about (its attribute ``em_progress`` is true): the engine first calls
``begin(n=, k=, delta=, max_iter=, stop=, scheme=)`` with the run's settings, and then passes
``gap=`` (the certificate of the current point: ``(L_max - L) / n <= gap``) and ``phase=``
(``"em"``, ``"squarem"``, ``"newton"``; the Newton finish reports its steps too).

What it shows, and when:

* nothing during the first ``delay`` seconds (1.5 s): short estimates stay silent;
* on a terminal, after that, a Rich progress display (transient: it disappears when the estimate
  is done): iteration, scheme, the certificate against its target (``gap 3.1e-07 -> 1e-09``;
  with ``stop="loglik"``/``"max_abs"`` the change of the rule instead) and the elapsed time; with
  ``stop="gap"`` the bar advances with ``log(gap)`` from its first value to ``log(delta)``;
* otherwise (a log file, a pipe, a notebook's stderr) one status line about every ``interval``
  seconds (10 s), and a last line when the run ends, if any line was written::

      ibu: iteration 1,200 (squarem), gap 3.1e-07 per report (target 1e-09), 20 s elapsed
      ibu: done, 2,345 iterations (newton), gap 4.2e-14 per report, converged, 31 s

The library is quiet unless asked: ``ibu(..., progress=True)`` (every IBU variant accepts it) or
an :class:`EMProgress` passed as ``progress=``; the command line's ``estimate`` enables it.

:class:`Status` does the same for any long command: reading and perturbing
files, aggregating, reproductions. It shows what runs now -- a stage (``"aggregating 3 inputs"``)
and nested counted tasks (``"eps 3/8, runs 12/50"``) -- as a transient Rich display on a
terminal after ``delay`` seconds, and otherwise as one status line about every ``interval``
seconds, written by a background thread, so a step that makes no progress for a minute still
shows the command is alive::

    reproduce fig9: eps 3/8, runs 12/50, 20 s elapsed

``LOCALPRIV_STATUS_INTERVAL`` (seconds) changes the interval of the status lines.
"""
from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    import numpy as np
    from rich.console import Console
    from rich.progress import Progress, TaskID

__all__ = ["EMProgress", "em_progress", "chain", "Status", "status_interval", "DELAY", "INTERVAL"]

#: seconds before anything is shown (estimates shorter than this print nothing)
DELAY = 1.5
#: seconds between two status lines when stderr is not a terminal
INTERVAL = 10.0
#: at most this many updates of the terminal display per second
_REFRESH = 10.0

_RULE_TEXT = {"gap": "gap", "loglik": "|dL|", "max_abs": "max|dtheta|"}


class _Outcome(Protocol):
    """What :meth:`EMProgress.finish` reads of a run's result (``gap`` and ``scheme`` if present)."""

    @property
    def converged(self) -> bool: ...

    @property
    def iterations(self) -> int: ...


class EMProgress:
    """A progress callback for the EM engine; see the module docstring.

    Parameters
    ----------
    label : str
        What is estimated (``"ibu"``, ``"gibu"``, ...), the start of every line.
    stream : file, optional
        Where to write (default ``sys.stderr``).
    interval, delay : float
        Seconds between status lines (non-terminal) and before anything is shown.
    clock : callable
        Monotonic seconds (tests pass a fake clock).
    tty : bool, optional
        Force the terminal display on or off (default: whether ``stream`` is a terminal, as Rich
        sees it).
    console : rich.console.Console, optional
        The console of the terminal display (default: one on ``stream``).
    """

    em_progress = True  # the engine passes gap= and phase=, and calls begin()

    def __init__(self, label: str = "estimate", *, stream: TextIO | None = None, interval: float = INTERVAL,
                 delay: float = DELAY, clock: Callable[[], float] = time.monotonic, tty: bool | None = None,
                 console: Any = None) -> None:  # a Console, or a proxy of one (the CLI's LazyConsole)
        self.label = label
        self.stream = stream
        self.interval = float(interval)
        self.delay = float(delay)
        self.clock = clock
        self._tty = tty
        self._console = console
        self.info: dict[str, Any] = {}
        self.t0: float | None = None
        self.lines = 0           # status lines written (non-terminal)
        self._next_line: float | None = None
        self._live: Progress | None = None  # the Rich display, once started
        self._task: TaskID | None = None
        self._last_draw = -math.inf
        self.t = 0
        self.gap = math.nan
        self.change = math.nan
        self.phase = "em"
        self._first_gap: float | None = None
        self._prev_L: float | None = None
        self._prev_theta: np.ndarray | None = None

    # ---- protocol of the engine ------------------------------------------------------------------
    def begin(self, **info: Any) -> None:
        """The run's settings (``n``, ``k``, ``delta``, ``max_iter``, ``stop``, ``scheme``)."""
        self.info = dict(info)
        self.start()

    def __call__(self, t: int, theta: np.ndarray, L: float, gap: float | None = math.nan, phase: str = "em") -> None:
        now = self.clock()
        if self.t0 is None:
            self.start(now)
        assert self.t0 is not None and self._next_line is not None  # set by start()
        if phase != "newton":
            self.t = int(t)
            if self._prev_L is not None and self.info.get("stop") == "loglik":
                self.change = abs(L - self._prev_L)
            elif self._prev_theta is not None and self.info.get("stop") == "max_abs" \
                    and getattr(theta, "shape", None) == getattr(self._prev_theta, "shape", None):
                self.change = float(abs(theta - self._prev_theta).max())
            self._prev_L, self._prev_theta = L, theta
        if gap is not None and not math.isnan(gap):
            self.gap = float(gap)
            if self._first_gap is None and gap > 0:
                self._first_gap = float(gap)
        self.phase = phase
        elapsed = now - self.t0
        if elapsed < self.delay:
            return
        if self.tty:
            if now - self._last_draw >= 1.0 / _REFRESH:
                self._draw(elapsed)
                self._last_draw = now
        elif now >= self._next_line:
            self._write(self.status(elapsed))
            self._next_line = now + self.interval

    # ---- life cycle ----------------------------------------------------------------------------
    def start(self, now: float | None = None) -> EMProgress:
        if self.t0 is None:
            self.t0 = self.clock() if now is None else now
            self._next_line = self.t0 + max(self.interval, self.delay)
        return self

    def finish(self, result: _Outcome | None = None) -> None:
        """End of the run: remove the terminal display; after status lines, write a last one."""
        self._stop_live()
        if self.lines and self.t0 is not None:
            self._write(self.final(result, self.clock() - self.t0))

    def __enter__(self) -> EMProgress:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self._stop_live()

    # ---- text ----------------------------------------------------------------------------------
    def status(self, elapsed: float) -> str:
        """One status line: iterations, scheme, the rule's current value against its target, time."""
        scheme = self.info.get("scheme")
        what = "newton finish" if self.phase == "newton" else (scheme if scheme and scheme != "none" else "")
        head = f"{self.label}: iteration {self.t:,}" + (f" ({what})" if what else "")
        return f"{head}, {self._measure()}, {_seconds(elapsed)} elapsed"

    def final(self, result: _Outcome | None, elapsed: float) -> str:
        if result is None:
            return f"{self.label}: done, {self.t:,} iterations, {_seconds(elapsed)}"
        gap = getattr(result, "gap", math.nan)
        state = "converged" if result.converged else "NOT converged (hit the iteration cap)"
        cert = "" if gap is None or math.isnan(gap) else f", gap {gap:.2g} per report"
        return (f"{self.label}: done, {result.iterations:,} iterations ({getattr(result, 'scheme', 'none')})"
                f"{cert}, {state}, {_seconds(elapsed)}")

    def _measure(self) -> str:
        stop = self.info.get("stop", "gap")
        delta = self.info.get("delta")
        target = "" if delta is None else f" (target {delta:.2g})"
        if stop == "gap":
            return f"gap {self.gap:.2g} per report{target}"
        text = f"{_RULE_TEXT.get(stop, stop)} {self.change:.2g}{target}"
        if not math.isnan(self.gap):
            text += f", gap {self.gap:.2g} per report"
        return text

    def _fraction(self) -> float | None:
        """Progress of ``log(gap)`` from its first value to ``log(delta)`` (``None``: unknown)."""
        delta = self.info.get("delta")
        if self.info.get("stop", "gap") != "gap" or not delta or self._first_gap is None or math.isnan(self.gap):
            return None
        lo, hi, now = math.log(delta), math.log(self._first_gap), math.log(max(self.gap, 1e-300))
        if hi <= lo:
            return 1.0
        return min(1.0, max(0.0, (hi - now) / (hi - lo)))

    # ---- output --------------------------------------------------------------------------------
    @property
    def out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console
            self._console = Console(file=self.out, soft_wrap=True)
        return self._console

    @property
    def tty(self) -> bool:
        if self._tty is None:
            self._tty = bool(self.console.is_terminal)
        return self._tty

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()
        self.lines += 1

    def _draw(self, elapsed: float) -> None:
        frac = self._fraction()
        if self._live is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            self._live = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[text]}"),
                                  TimeElapsedColumn(), console=self.console, transient=True)
            self._live.start()
            self._task = self._live.add_task(self.label, total=100.0 if frac is not None else None, text="")
        assert self._task is not None  # added with the display
        scheme = self.info.get("scheme")
        what = "newton finish" if self.phase == "newton" else (scheme or "")
        text = f"iteration {self.t:,}" + (f" ({what})" if what and what != "none" else "") + f", {self._measure()}"
        if frac is not None:
            self._live.update(self._task, completed=100.0 * frac, total=100.0, text=text)
        else:
            self._live.update(self._task, text=text)

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def _seconds(s: float) -> str:
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def em_progress(label: str = "estimate", **kwargs: Any) -> EMProgress:
    """An :class:`EMProgress` on stderr, to pass as ``progress=`` to an IBU-family estimator.

    Parameters
    ----------
    label : str
        The start of every status line (what is estimated).
    **kwargs
        Those of :class:`EMProgress`: ``stream``, ``interval``, ``delay``, ``clock``, ``tty``,
        ``console``.

    Returns
    -------
    EMProgress
    """
    return EMProgress(label, **kwargs)


def chain(progress: EMProgress,
          callback: Callable[[int, np.ndarray, float], object] | None = None) -> Callable[..., None]:
    """``progress`` and a user's ``callback(t, theta, L)`` as one engine callback (the user's is
    called as before: after every iteration, not during a Newton finish)."""
    if callback is None:
        return progress
    user_callback = callback  # narrowed, for the class below

    class _Both:
        em_progress = True

        def begin(self, **info: Any) -> None:
            progress.begin(**info)

        def __call__(self, t: int, theta: np.ndarray, L: float, gap: float | None = math.nan,
                     phase: str = "em") -> None:
            progress(t, theta, L, gap=gap, phase=phase)
            if phase != "newton":
                user_callback(t, theta, L)

    return _Both()


# ------------------------------------------------------------------------------------------------
# Any long command: a stage and nested counted tasks
# ------------------------------------------------------------------------------------------------
def status_interval(default: float = INTERVAL) -> float:
    """Seconds between status lines: ``LOCALPRIV_STATUS_INTERVAL`` if it is a number >= 0, else
    ``default``."""
    text = os.environ.get("LOCALPRIV_STATUS_INTERVAL", "")
    try:
        value = float(text)
    except ValueError:
        return default
    return value if math.isfinite(value) and value >= 0 else default


class _Task:
    """One counted piece of work of a :class:`Status` (``advance`` it, ``close`` it when done)."""

    def __init__(self, status: Status, description: str, total: int | None, unit: str) -> None:
        self.status, self.description, self.total, self.unit = status, description, total, unit
        self.completed = 0
        self.closed = False
        self._rich_id: TaskID | None = None

    def advance(self, n: int = 1) -> None:
        self.completed += n
        self.status.tick()

    def update(self, completed: int | None = None, total: int | None = None) -> None:
        if completed is not None:
            self.completed = int(completed)
        if total is not None:
            self.total = int(total)
        self.status.tick()

    def close(self) -> None:
        self.status._close(self)

    def text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        count = f"{self.completed:,}/{self.total:,}" if self.total is not None else f"{self.completed:,}"
        return f"{self.description} {count}{unit}".strip()


class Status:
    """Progress of one command: a stage and nested tasks (see the module docstring).

    Use as a context manager; :meth:`track` wraps an iterable (it is what the experiments'
    ``progress(items, "label")`` calls), :meth:`task` gives a counter to :meth:`~_Task.advance`,
    :meth:`stage` says what runs now.

    Parameters
    ----------
    label : str
        The command (``"aggregate"``, ``"reproduce fig9"``), the start of every status line.
    stage : str, optional
        What runs first (``"reading 3 inputs"``).
    stream : file, optional
        Where status lines go (default ``sys.stderr``).
    console : rich.console.Console, optional
        The console of the terminal display (default: one on ``stream``).
    tty : bool, optional
        Force the terminal display on or off (default: whether the console is a terminal).
    interval : float, optional
        Seconds between status lines (default :func:`status_interval`: 10 s).
    delay : float
        Seconds before anything is shown (at most ``interval``).
    clock : callable
        Monotonic seconds (tests pass a fake clock).
    background : bool
        Whether a background thread ticks (``True``: lines appear even when no task advances);
        tests call :meth:`tick` themselves.
    """

    def __init__(self, label: str, stage: str = "", *, stream: TextIO | None = None, console: Any = None,
                 tty: bool | None = None, interval: float | None = None, delay: float = DELAY,
                 clock: Callable[[], float] = time.monotonic, background: bool = True) -> None:
        self.label = label
        self._stage = stage
        self.stream = stream
        self._console = console
        self._tty = tty
        self.interval = status_interval() if interval is None else max(0.0, float(interval))
        self.delay = min(float(delay), self.interval)
        self.clock = clock
        self.background = background
        self.tasks: list[_Task] = []
        self.lines = 0
        self.t0: float | None = None
        self._next_line = math.inf
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Progress | None = None
        self._stage_id: TaskID | None = None
        self._last_draw = -math.inf

    # ---- life cycle ----------------------------------------------------------------------------
    def __enter__(self) -> Status:
        self.t0 = self.clock()
        self._next_line = self.t0 + max(self.interval, self.delay)
        if self.background:
            step = 0.1 if self.tty else min(1.0, max(0.05, self.interval / 10))
            self._thread = threading.Thread(target=self._run, args=(step,), daemon=True,
                                            name=f"localpriv-status-{self.label}")
            self._thread.start()
        self.tick()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None

    def _run(self, step: float) -> None:
        while not self._stop.wait(step):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a display problem must never stop the work
                return

    # ---- what runs -----------------------------------------------------------------------------
    def stage(self, text: str) -> None:
        """Say what runs now (replaces the previous stage)."""
        with self._lock:
            self._stage = text
        self.tick()

    def task(self, description: str, total: int | None = None, unit: str = "") -> _Task:
        """A counted task (``total`` None: a count without an end); close it when done."""
        t = _Task(self, description, None if total is None else int(total), unit)
        with self._lock:
            self.tasks.append(t)
        self.tick()
        return t

    def track(self, iterable: Iterable[Any], description: str = "", total: int | None = None) -> Iterator[Any]:
        """Yield the items of ``iterable``, counting them as a task."""
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        t = self.task(description, total)
        try:
            for item in iterable:
                yield item
                t.advance()
        finally:
            t.close()

    def _close(self, t: _Task) -> None:
        with self._lock:
            t.closed = True
            if t in self.tasks:
                self.tasks.remove(t)
            if self._live is not None and t._rich_id is not None:
                self._live.remove_task(t._rich_id)
                t._rich_id = None

    # ---- output --------------------------------------------------------------------------------
    def status_line(self, elapsed: float) -> str:
        """``label: stage, task 3/8, task 12/50, 20 s elapsed``."""
        parts = [self._stage] + [t.text() for t in list(self.tasks)]
        what = ", ".join(p for p in parts if p)
        return f"{self.label}: {what + ', ' if what else ''}{_seconds(elapsed)} elapsed"

    def tick(self, now: float | None = None) -> None:
        """Show the state if it is time: after ``delay`` on a terminal (at most 10 redraws a
        second), a status line every ``interval`` otherwise."""
        if self.t0 is None:
            return
        with self._lock:
            now = self.clock() if now is None else now
            elapsed = now - self.t0
            if elapsed < self.delay:
                return
            if self.tty:
                if now - self._last_draw >= 1.0 / _REFRESH:
                    self._draw()
                    self._last_draw = now
            elif now >= self._next_line:
                self._write(self.status_line(elapsed))
                self._next_line = now + self.interval

    @property
    def out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console
            self._console = Console(file=self.out, soft_wrap=True)
        return self._console

    @property
    def tty(self) -> bool:
        if self._tty is None:
            self._tty = bool(self.console.is_terminal)
        return self._tty

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()
        self.lines += 1

    def _draw(self) -> None:
        if self._live is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            self._live = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[count]}"),
                                  TimeElapsedColumn(), console=self.console, transient=True)
            self._live.start()
            self._stage_id = self._live.add_task(self.label, total=None, count="")
        assert self._stage_id is not None  # added with the display
        self._live.update(self._stage_id, description=f"{self.label}: {self._stage}" if self._stage else self.label)
        for t in list(self.tasks):
            count = t.text()[len(t.description):].strip()
            if t._rich_id is None:
                t._rich_id = self._live.add_task(t.description, total=t.total, count=count)
            self._live.update(t._rich_id, completed=t.completed, total=t.total, count=count)
