"""Signals: interrupted commands unwind like errors, so that no half-written output remains.

Kept apart from :mod:`localpriv.formats` (which imports pyarrow) so that the command line installs
it at start-up for free.
"""
from __future__ import annotations

import signal

__all__ = ["interrupt_cleanly"]


def interrupt_cleanly() -> None:
    """Make SIGTERM (and SIGHUP) end the process through Python's normal unwinding, so that
    :func:`atomic_output` removes its temporary files (the command line installs this)."""
    def handler(signum, frame):  # pragma: no cover - exercised by the CLI tests in a subprocess
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            try:
                signal.signal(sig, handler)
            except (ValueError, OSError):  # not the main thread
                pass
