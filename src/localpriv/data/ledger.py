"""The device's privacy ledger: a versioned JSON file of what it has released (docs/accounting.md).

A :class:`Ledger` holds the :class:`~localpriv.mechanisms.accounting.Release` records of one
device, in a JSON file that any JSON reader can open and that the JavaScript and Java clients
write too::

    {"format": "localpriv-ledger", "version": 1,
     "releases": [{"spec": "krr(k=4,eps=1.0)", "epsilon": 1.0, "delta": 0.0, "reports": 1,
                   "collection": "ages", "time": "2026-11-28T10:00:00Z", "memo_key": null,
                   "eps_perm": null, "eps_inst": null, "rr_values": 4}]}

Unknown keys are refused, at the top and in every release. The file is rewritten atomically
(:func:`localpriv.data.formats.atomic_output`) at every :meth:`Ledger.record`. :meth:`Ledger.check`
refuses a request whose cost would take the total past a budget, in one line giving the current
total, the request's cost and the budget; :meth:`Ledger.record` checks *before* it writes, and
the clients call it before they perturb or send anything, so a refused request leaves no trace
and releases nothing. A record that was written stays even if the sending later fails: the
ledger may count reports that never arrived, never the reverse.

The budget is on the pure level by basic composition (:func:`~localpriv.mechanisms.accounting.compose`:
memo groups at ``eps_perm``), or, with ``delta``, on the ``eps`` of the PLD accountant at that
``delta``.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from localpriv.data.formats import atomic_output
from localpriv.data.reports import iter_values
from localpriv.domains import Domain
from localpriv.mechanisms import Mechanism, parse
from localpriv.mechanisms.accounting import MAX_RELEASES, Composition, Release, compose, explain_level, release_of
from localpriv.utils.validation import LocalPrivError

__all__ = ["Ledger", "LEDGER_FORMAT", "LEDGER_VERSION", "MAX_LEDGER_BYTES", "count_values", "file_release",
           "utc_now"]

#: The ``format`` member of a ledger file.
LEDGER_FORMAT = "localpriv-ledger"
#: The version this code writes (and the only one it reads).
LEDGER_VERSION = 1
#: Largest ledger file read (about 200 bytes a release: :data:`MAX_RELEASES` fit).
MAX_LEDGER_BYTES = 64 * 2 ** 20
_TOP_KEYS = ("format", "version", "releases")
_LEVELS = ("epsilon", "eps_perm", "eps_inst")


def utc_now() -> str:
    """The current time, ISO 8601 in UTC to the second (``2026-11-28T10:00:00Z``)."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6g}"


class Ledger:
    """The releases of one device, kept in a JSON file (module docstring).

    Parameters
    ----------
    path : str or Path
        The ledger file; a missing file is an empty ledger (created by the first :meth:`record`).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.releases: list[Release] = self._read() if self.path.exists() else []

    def _read(self) -> list[Release]:
        where = f"ledger {self.path}"
        size = self.path.stat().st_size
        if size > MAX_LEDGER_BYTES:
            raise LocalPrivError(f"{where}: {size:,} bytes exceed the limit of {MAX_LEDGER_BYTES:,}")
        try:
            obj = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise LocalPrivError(f"{where}: not a readable JSON file ({' '.join(str(exc).split())})") from None
        if not isinstance(obj, dict) or obj.get("format") != LEDGER_FORMAT:
            raise LocalPrivError(f"{where}: not a localpriv ledger (no \"format\": \"{LEDGER_FORMAT}\")")
        unknown = sorted(set(obj) - set(_TOP_KEYS))
        if unknown:
            raise LocalPrivError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(_TOP_KEYS)}")
        if obj.get("version") != LEDGER_VERSION:
            raise LocalPrivError(f"{where}: version {obj.get('version')!r} is not supported (this is version "
                                 f"{LEDGER_VERSION})")
        rels = obj.get("releases")
        if not isinstance(rels, list):
            raise LocalPrivError(f"{where}: \"releases\" must be a list")
        if len(rels) > MAX_RELEASES:
            raise LocalPrivError(f"{where}: {len(rels):,} releases exceed the limit of {MAX_RELEASES:,}")
        out = []
        for i, r in enumerate(rels, 1):
            try:
                if isinstance(r, dict):  # an infinite level is the string "inf" (JSON has no infinity)
                    r = {k: math.inf if k in _LEVELS and v == "inf" else v for k, v in r.items()}
                out.append(Release.from_dict(r))
            except (LocalPrivError, TypeError) as exc:
                raise LocalPrivError(f"{where}: release {i}: {exc}") from None
        return out

    def to_dict(self) -> dict[str, Any]:
        """The file's content (an infinite level as the string ``"inf"``: JSON has no infinity)."""
        rels = [{k: "inf" if k in _LEVELS and v == math.inf else v for k, v in r.to_dict().items()}
                for r in self.releases]
        return {"format": LEDGER_FORMAT, "version": LEDGER_VERSION, "releases": rels}

    def save(self) -> Path:
        """Write the ledger atomically (a temporary file renamed over the old one)."""
        text = json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        with atomic_output(self.path) as tmp:
            tmp.write_text(text, encoding="utf-8")
        return self.path

    def total(self, delta: float | None = None) -> Composition:
        """The composed total of every release (:func:`~localpriv.mechanisms.accounting.compose`)."""
        return compose(self.releases, delta=delta)

    def check(self, budget: float, new: Iterable[Release] = (), delta: float | None = None) -> Composition:
        """Refuse ``new`` if it would take the total past ``budget``; else return the total with it.

        The total is the pure ``eps`` of basic composition, or with ``delta`` the PLD's ``eps`` at
        ``delta``. The error is one line: the current total, the request's cost (the total with it
        minus the total without; memo groups make it less than the sum of its levels) and the budget.
        """
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or math.isnan(budget) or budget < 0:
            raise LocalPrivError(f"budget must be a number >= 0, got {budget!r}")
        add = list(new)
        now, after = self.total(delta), compose(self.releases + add, delta=delta)
        key = "epsilon" if delta is None else "pld_epsilon"
        before_eps, after_eps = float(getattr(now, key)), float(getattr(after, key))
        if after_eps > budget:
            cost = after_eps - before_eps if math.isfinite(after_eps) else math.inf
            what = "" if delta is None else f" at delta {delta:g}"
            reports = sum(r.reports for r in add)
            spec = add[0].spec if len({r.spec for r in add}) == 1 else f"{len({r.spec for r in add})} mechanisms"
            raise LocalPrivError(f"privacy budget exceeded: the ledger {self.path} totals eps "
                                 f"{_fmt(before_eps)}{what}, "
                                 f"this request ({reports:,} report(s) of {spec}) costs eps {_fmt(cost)} more, and the "
                                 f"budget is {budget:g}; nothing was perturbed or sent")
        return after

    def record(self, new: Release | Iterable[Release], budget: float | None = None,
               delta: float | None = None) -> Composition:
        """Check ``new`` against ``budget`` (if given), append it and save the ledger; returns the new total."""
        add = [new] if isinstance(new, Release) else list(new)
        if budget is not None:
            self.check(budget, add, delta)
        if len(self.releases) + len(add) > MAX_RELEASES:
            raise LocalPrivError(f"ledger {self.path}: {len(self.releases) + len(add):,} releases would exceed the "
                                 f"limit of {MAX_RELEASES:,}")
        self.releases.extend(add)
        try:
            self.save()
        except BaseException:
            del self.releases[len(self.releases) - len(add):]
            raise
        return self.total(delta)

    def summary(self, delta: float | None = 1e-6) -> dict[str, Any]:
        """Totals per collection, per spec and overall (basic and, with ``delta``, PLD), each with
        its meaning in plain words (:func:`~localpriv.mechanisms.accounting.explain_level`)."""
        def part(rels: Sequence[Release]) -> dict[str, Any]:
            c = compose(rels, delta=delta)
            return {"releases": len(rels), "reports": sum(r.reports for r in rels), "basic_epsilon": c.epsilon,
                    "delta": c.delta, "pld_epsilon": c.pld_epsilon, "pld_delta": c.pld_delta,
                    "accountant": c.accountant}

        by_collection: dict[str, list[Release]] = {}
        by_spec: dict[str, list[Release]] = {}
        for r in self.releases:  # records of one device
            by_collection.setdefault(r.collection, []).append(r)
            by_spec.setdefault(r.spec, []).append(r)
        total = compose(self.releases, delta=delta)
        best, best_delta = total.epsilon, total.delta  # the pure level, unless the PLD saves more than 1%
        if total.pld_epsilon is not None and total.pld_delta is not None and not total.pld_epsilon >= 0.99 * best:
            best, best_delta = total.pld_epsilon, total.pld_delta + total.delta
        return {"path": str(self.path), "format": LEDGER_FORMAT, "version": LEDGER_VERSION,
                "total": {**part(self.releases), "models": total.models},
                "meaning": explain_level(best, min(best_delta, 0.999999)) if self.releases else "Nothing released yet.",
                "collections": {k: part(v) for k, v in sorted(by_collection.items())},
                "specs": {k: part(v) for k, v in sorted(by_spec.items())}}


def count_values(input: str | Path, *, column: str | None = None, domain: Domain | None = None,
                 drop_missing: bool = False, header: bool = True, fmt: str | None = None, strip: bool = True) -> int:
    """How many values of a file would be perturbed (streamed in chunks; missing values are left out
    with ``drop_missing``, as :func:`localpriv.data.reports.perturb_file` leaves them out)."""
    n = 0
    for vals, _first in iter_values(input, column, domain=domain, drop_missing=drop_missing, header=header, fmt=fmt,
                                    strip=strip):
        n += int(vals.shape[0])
    return n


def file_release(input: str | Path, mechanism: str | Mechanism, domain: Domain, *, collection: str = "",
                 column: str | None = None, drop_missing: bool = False, header: bool = True, fmt: str | None = None,
                 strip: bool = True) -> Release:
    """The release that perturbing ``input`` with ``mechanism`` would make: one report per value
    (:func:`count_values`; points dropped later outside a grid are still counted: the ledger may
    over-count, never under-count), at the level computed from the mechanism, stamped now."""
    mech = parse(mechanism, domain) if isinstance(mechanism, str) else mechanism
    n = count_values(input, column=column, domain=domain, drop_missing=drop_missing, header=header, fmt=fmt,
                     strip=strip)
    if n == 0:
        raise LocalPrivError(f"{input}: no values to perturb")
    return release_of(mech, n, collection=collection or Path(input).name, time=utc_now())
