"""Signals: interrupted commands unwind like errors, so that no half-written output remains.

Kept apart from :mod:`localpriv.data.formats` (which imports pyarrow) so that the command line installs
it at start-up for free.
"""
from __future__ import annotations

import contextlib
import signal
from types import FrameType

__all__ = ["interrupt_cleanly", "pending_exit", "raise_if_interrupted"]

_received: list[int] = []  # the signals received so far (the handler only appends)


def pending_exit() -> int | None:
    """The exit code owed to a signal received earlier (``128 + signum``), or None."""
    return 128 + _received[0] if _received else None


def raise_if_interrupted() -> None:
    """Raise ``SystemExit(128 + signum)`` if a signal arrived, even one whose exception was swallowed.

    The handler's exception can land where Python ignores exceptions (a ``__del__`` run by the
    garbage collector, a callback from C), and the work then goes on to the end. Committing an
    output checks here first, so an interrupted command never leaves a finished-looking file.
    """
    code = pending_exit()
    if code is not None:
        raise SystemExit(code)


def interrupt_cleanly() -> None:
    """Make SIGTERM (and SIGHUP) end the process through Python's normal unwinding, so that
    :func:`atomic_output` removes its temporary files (the command line installs this)."""
    def handler(signum: int, frame: FrameType | None) -> None:  # pragma: no cover - CLI tests run it in a subprocess
        _received.append(signum)
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            with contextlib.suppress(ValueError, OSError):  # not the main thread
                signal.signal(sig, handler)
