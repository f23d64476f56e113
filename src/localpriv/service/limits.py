"""Rate limits of the collector: requests and reports per token and period, in bounded memory.

Each token presented (a device token, an enrollment token, a collection's shared ingest token) has
one counter per fixed window ``[j * period, (j + 1) * period)`` of the clock: the requests it
made and the reports it had accepted in the window. A request past the policy's limit is refused
with :class:`RateLimited`, whose ``retry_after`` is the number of seconds to the end of the window
(the HTTP layer answers 429 with ``Retry-After``).

Memory is bounded: at most ``max_keys`` counters are kept (least recently used evicted first;
their measured size: decision record 0054). A token whose counter was
evicted starts its window afresh, so the limits hold exactly as long as fewer than ``max_keys``
tokens are active at once; the counters live in one server process (not shared between servers,
not kept over a restart).
"""
from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

from localpriv.service.policy import RateLimit
from localpriv.utils.errors import LocalPrivError

__all__ = ["RateLimiter", "RateLimited", "DEFAULT_MAX_KEYS"]

#: Counters kept at most (tokens active at once).
DEFAULT_MAX_KEYS = 65_536


class RateLimited(LocalPrivError):
    """A request past its token's rate limit; ``retry_after``: whole seconds to the window's end."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = int(retry_after)


class RateLimiter:
    """Fixed-window counters per key (see the module docstring).

    Parameters
    ----------
    max_keys : int
        Counters kept at most (least recently used evicted first), 1 to 10^7.
    clock : callable
        Seconds (default :func:`time.time`); tests pass their own.
    """

    def __init__(self, max_keys: int = DEFAULT_MAX_KEYS, clock: Callable[[], float] = time.time) -> None:
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or not 1 <= max_keys <= 10 ** 7:
            raise LocalPrivError(f"max_keys must be a whole number from 1 to 10^7, got {max_keys!r}")
        self.max_keys = max_keys
        self.clock = clock
        self._lock = threading.Lock()
        self._counts: OrderedDict[Hashable, list] = OrderedDict()  # key -> [window start, requests, reports]

    def __len__(self) -> int:
        return len(self._counts)

    def _entry(self, key: Hashable, rule: RateLimit) -> tuple[list, int]:
        now = self.clock()
        start = math.floor(now / rule.period) * rule.period
        entry = self._counts.get(key)
        if entry is None or entry[0] != start:
            entry = [start, 0, 0]
            self._counts[key] = entry
        self._counts.move_to_end(key)
        while len(self._counts) > self.max_keys:
            self._counts.popitem(last=False)
        return entry, max(1, int(math.ceil(start + rule.period - now)))

    def request(self, key: Hashable, rule: RateLimit | None) -> None:
        """Count one request of ``key``; :class:`RateLimited` if it would pass ``rule.requests``."""
        if rule is None or rule.requests is None:
            return
        with self._lock:
            entry, left = self._entry(key, rule)
            if entry[1] + 1 > rule.requests:
                raise RateLimited(f"rate limit: {rule.requests} requests per {rule.period} s for this token; "
                                  f"retry in {left} s", left)
            entry[1] += 1

    def reports(self, key: Hashable, rule: RateLimit | None, n: int) -> None:
        """Take ``n`` reports of ``key``'s allowance; :class:`RateLimited` if it would pass
        ``rule.reports`` (a batch above the whole allowance: a plain :class:`LocalPrivError`, since
        waiting would not help)."""
        if rule is None or rule.reports is None:
            return
        if n > rule.reports:
            raise LocalPrivError(f"a batch of {n:,} reports is above the rate limit of {rule.reports:,} reports "
                                 f"per {rule.period} s for one token: send smaller batches")
        with self._lock:
            entry, left = self._entry(key, rule)
            if entry[2] + n > rule.reports:
                raise RateLimited(f"rate limit: {rule.reports:,} reports per {rule.period} s for this token "
                                  f"({entry[2]:,} taken); retry in {left} s", left)
            entry[2] += n

    def refund(self, key: Hashable, rule: RateLimit | None, n: int) -> None:
        """Give back ``n`` reports taken by :meth:`reports` for a batch that was not counted."""
        if rule is None or rule.reports is None:
            return
        with self._lock:
            entry = self._counts.get(key)
            if entry is not None and entry[0] == math.floor(self.clock() / rule.period) * rule.period:
                entry[2] = max(0, entry[2] - n)
