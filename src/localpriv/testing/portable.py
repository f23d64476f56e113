"""The conformance vectors of the portable client protocol (``clients/vectors/vectors-v1.json``).

:func:`build_vectors` computes the whole document from :mod:`localpriv.mechanisms.portable` (a
few seconds of pure Python), :func:`render_vectors` gives its exact bytes (``make vectors`` writes
them with ``tools/portable_vectors.py``), and :func:`check_vectors` replays a document as a client
would (every report from its spec, domain, values and seed) and lists the differences. The JS and
Java clients run the same replay against the same file.

A vector's Bernoulli draws all lie at least :data:`MARGIN` away from their threshold ``p 2^53``
(and its planar Laplace points :data:`~localpriv.mechanisms.portable.CELL_MARGIN` from a cell edge):
a client whose ``exp`` differs from Python's by a few ulps then still reproduces every report. A
case whose draws come closer is generated again with the seed suffixed ``#1``, ``#2``, ...
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from localpriv.data.ledger import LEDGER_FORMAT, LEDGER_VERSION, Ledger
from localpriv.mechanisms import portable as P
from localpriv.mechanisms import stablehash
from localpriv.mechanisms.accounting import Release, compose, release_of
from localpriv.mechanisms.base import Mechanism
from localpriv.utils.validation import LocalPrivError, PrivacyWarning

__all__ = ["build_vectors", "render_vectors", "check_vectors", "check_levels", "MARGIN", "MECHANISM_CASES",
           "MEMO_CASES",
           "NEGATIVE_CASES", "MEMO_NEGATIVE_CASES", "VECTORS_PATH", "LEDGER_PATH", "LEDGER_CASES", "ledger_fixture",
           "render_ledger", "random_ledgers"]

#: where the committed vectors live, relative to a checkout's root
VECTORS_PATH = f"clients/vectors/vectors-v{P.PROTOCOL_VERSION}.json"
#: the ledger written by Python that the clients read (docs/accounting.md, "The ledger file")
LEDGER_PATH = f"clients/vectors/ledger-v{LEDGER_VERSION}.json"
#: the least distance, in units of ``2^-53``, between a vector's Bernoulli draw and its threshold
MARGIN = 1 << 12
#: re-seeding attempts before a case is given up (never reached in practice: ``2^-40`` per draw)
_MAX_ATTEMPTS = 16

# (spec, domain, values): small and large eps, small and large domains
MECHANISM_CASES: tuple[tuple[str, str, list[Any]], ...] = (
    ("krr(eps=1.0)", "0..9", [0, 3, 9, 5, 5, 1, 7, 2, 8, 4]),
    ("krr(eps=0.1)", "a,b,c", ["a", "b", "c", "a", "c", "b", "a", "a"]),
    ("krr(k=1000,eps=6.0)", "1..1000", [1, 500, 1000, 37, 999, 2, 250, 750]),
    ("krr(eps=12.0)", "0..99999", [0, 99999, 12345, 50000, 77777, 31415]),
    ("oue(eps=1.0)", "0..9", [0, 9, 4, 4, 7]),
    ("oue(eps=0.2)", "red,green,blue", ["red", "blue", "green", "red"]),
    ("oue(k=200,eps=5.0)", "0..199", [0, 199, 100]),
    ("sue(eps=1.0)", "0..9", [0, 9, 4, 4, 7]),
    ("sue(eps=0.1)", "0..20", [0, 20, 10]),
    ("sue(k=128,eps=8.0)", "0..127", [0, 127, 64]),
    ("olh(eps=2.0)", "0..99", [0, 37, 99, 37, 50, 1, 98]),
    ("olh(eps=0.5)", "x,y,z,w", ["x", "y", "z", "w", "x"]),
    ("olh(eps=10.0)", "0..999999", [0, 999999, 424242, 7]),
    ("olh(eps=1.0,n_seeds=16)", "0..9", [0, 5, 9, 3]),
    ("blh(eps=1.0)", "0..99", [0, 37, 99, 50]),
    ("blh(eps=0.1)", "0..3", [0, 1, 2, 3]),
    ("blh(k=100000,eps=4.0)", "0..99999", [0, 99999, 5]),
    ("ss(eps=1.0)", "0..9", [0, 9, 4, 4, 7]),
    ("ss(eps=0.2,omega=3)", "a,b,c,d,e", ["a", "e", "c"]),
    ("ss(k=100,eps=4.0)", "0..99", [0, 99, 50]),
    ("hr(eps=0.5)", "0..9", [0, 9, 4, 4, 7]),
    ("hr(eps=3.0)", "0..99", [0, 99, 50, 31]),
    ("hr(k=1000,eps=8.0,blocks=16)", "0..999", [0, 999, 500]),
    ("geometric(eps=1.0)", "0..9", [0, 9, 4, 4, 7]),
    ("geometric(eps=0.1,lo=0,hi=99)", "0..99", [0, 99, 50, 50, 1]),
    ("geometric(eps=0.01,lo=0,hi=999)", "0..999", [0, 999, 500]),
    ("geometric(eps=3.0,lo=0,hi=4)", "10..14", [10, 14, 12, 12]),
    ("duchi(eps=1.0)", "0..9", [0, 9, 4, 5]),
    ("duchi(eps=0.1)", "0..99", [0, 99, 50]),
    ("pm(eps=1.0)", "0..9", [0, 9, 4, 4, 7]),
    ("pm(eps=0.1)", "0..99", [0, 99, 50]),
    ("pm(eps=8.0)", "0..1999", [0, 1999, 1000]),
    ("sw(eps=1.0)", "0..9", [0, 9, 4, 4, 7]),
    ("sw(eps=0.5,buckets=64)", "0..19", [0, 19, 10]),
    ("sw(k=1000,eps=4.0,buckets=1024)", "0..999", [0, 999, 500]),
    ("planar-geometric(eps=1.0,nrows=4,ncols=5,cell_km=0.5)", "0..19", [0, 19, 7, 12]),
    ("planar-geometric(eps=0.2,nrows=20,ncols=14,cell_km=0.5)", "0..279", [0, 279, 140]),
    ("planar-geometric(eps=5.0,nrows=3,ncols=3,cell_km=1.0)", "0..8", [4, 4, 0]),
    ("planar-laplace(eps=1.0,nrows=4,ncols=5,cell_km=0.5)", "0..19", [0, 19, 7, 12]),
    ("planar-laplace(eps=0.2,nrows=20,ncols=14,cell_km=0.5)", "0..279", [0, 279, 140, 141]),
    ("planar-laplace(eps=5.0,nrows=3,ncols=3,cell_km=1.0)", "0..8", [4, 4, 0]),
)

# (spec, domain, values, rounds): memoized mechanisms, each value's memo then its rounds
MEMO_CASES: tuple[tuple[str, str, list[Any], int], ...] = (
    ("lgrr(eps_perm=2.0,eps_1=1.0)", "0..9", [0, 9, 4], 3),
    ("lgrr(k=1000,eps_perm=8.0,eps_1=2.0)", "0..999", [0, 999], 3),
    ("lsue(eps_perm=2.0,eps_1=1.0)", "0..9", [0, 9], 3),
    ("loue(eps_perm=4.0,eps_1=1.0)", "0..15", [0, 15], 2),
    ("lsoue(eps_perm=2.0,eps_1=0.5)", "0..9", [3], 2),
    ("losue(eps_perm=2.0,eps_1=0.5)", "0..9", [3], 2),
    ("lblh(eps_perm=2.0,eps_1=1.0)", "0..99", [0, 99], 3),
    ("lolh(eps_perm=4.0,eps_1=1.0)", "0..99", [0, 99, 50], 3),
    ("rappor()", "0..99", [0, 37, 99], 2),
    ("rappor(m=16,h=3,cohorts=4,f=0.25,p=0.25,q=0.75)", "0..9", [0, 9], 3),
    ("rappor(m=128,h=2,cohorts=4,f=0.5,p=0.5,q=0.75)", "0..9", [5], 2),
)

# (spec, domain, value or None, expected error code; None: accepted)
NEGATIVE_CASES: tuple[tuple[str, str | None, str | None, str | None], ...] = (
    ("krr eps=1.0", "0..9", None, "spec.syntax"),
    ("krr(eps)", "0..9", None, "spec.syntax"),
    ("krr(eps=1.0", "0..9", None, "spec.syntax"),
    ("Krr(eps=1.0)", "0..9", None, "spec.syntax"),
    ("krr(eps=(1.0))", "0..9", None, "spec.syntax"),
    ("krr(delta=0.1,eps)", "0..9", None, "spec.syntax"),
    ("zzz(eps=1.0)", "0..9", None, "spec.unknown_mechanism"),
    ("matrix(file=m.csv)", "0..1", None, "spec.unknown_mechanism"),
    ("laplace(eps=1.0)", "0..9", None, "spec.unknown_mechanism"),
    ("krr(eps=1.0,delta=0.1)", "0..9", None, "spec.unknown_key"),
    ("oue(eps=1.0,p=0.5)", "0..9", None, "spec.unknown_key"),
    ("krr(delta=x,eps=1.0)", "0..9", None, "spec.unknown_key"),
    ("krr(eps=1.0,eps=2.0)", "0..9", None, "spec.duplicate_key"),
    ("krr(k=10)", None, None, "spec.missing_key"),
    ("krr(eps=1.0)", None, None, "spec.missing_key"),
    ("planar-geometric(eps=1.0,nrows=3)", None, None, "spec.missing_key"),
    ("lgrr(k=10,eps_perm=2.0)", None, None, "spec.missing_key"),
    ("krr(k=10,eps='2')", None, None, "spec.bad_value"),
    ("krr(k=10,eps=two)", None, None, "spec.bad_value"),
    ("krr(k=10.0,eps=1.0)", None, None, "spec.bad_value"),
    ("krr(k=1e1,eps=1.0)", None, None, "spec.bad_value"),
    ("krr(k=10,eps=0)", None, None, "spec.bad_value"),
    ("krr(k=10,eps=-1.0)", None, None, "spec.bad_value"),
    ("krr(k=10,eps=1e999)", None, None, "spec.bad_value"),
    ("krr(k=1,eps=1.0)", None, None, "spec.bad_value"),
    ("krr(k=11,eps=1.0)", "0..9", None, "spec.bad_value"),
    ("olh(eps=1.0,n_seeds=0)", "0..9", None, "spec.bad_value"),
    ("olh(eps=1.0,n_seeds=4294967297)", "0..9", None, "spec.bad_value"),
    ("olh(eps=1.0,hash=cw)", "0..9", None, "spec.bad_value"),
    ("ss(eps=1.0,omega=10)", "0..9", None, "spec.bad_value"),
    ("hr(eps=1.0,blocks=3)", "0..9", None, "spec.bad_value"),
    ("geometric(eps=1.0,lo=5,hi=5)", "0..9", None, "spec.bad_value"),
    ("lgrr(eps_perm=1.0,eps_1=2.0)", "0..9", None, "spec.bad_value"),
    ("rappor(p=0.8,q=0.5)", "0..9", None, "spec.bad_value"),
    ("rappor(keys=labels)", "a,b,c", None, "spec.bad_value"),
    ("krr(eps=1.0)", "9..0", None, "domain.syntax"),
    ("krr(eps=1.0)", "a,a,b", None, "domain.syntax"),
    ("krr(eps=1.0)", "a,,b", None, "domain.syntax"),
    ("krr(eps=1.0)", "0 .. 9", None, "domain.syntax"),
    ("krr(eps=1.0)", "7", None, "domain.syntax"),
    ("planar-geometric(eps=1e9,nrows=2,ncols=2)", None, None, "spec.bad_value"),
    ("krr(eps=1.0)", " a , b ", " b ", None),
    ("krr(eps=1.0)", "0..9", "10", "value.out_of_domain"),
    ("krr(eps=1.0)", "0..9", "-1", "value.out_of_domain"),
    ("krr(eps=1.0)", "0..9", "3.5", "value.out_of_domain"),
    ("krr(eps=1.0)", "0..9", "three", "value.out_of_domain"),
    ("krr(eps=1.0)", "0..9", "", "value.out_of_domain"),
    ("oue(eps=1.0)", "a,b,c", "d", "value.out_of_domain"),
    ("olh(eps=1.0)", "1..100", "0", "value.out_of_domain"),
)

# (spec, domain, value, memo, expected error code): memos that do not fit
MEMO_NEGATIVE_CASES: tuple[tuple[str, str, str, dict[str, Any], str], ...] = (
    ("lgrr(eps_perm=2.0,eps_1=1.0)", "0..9", "3",
     {"mechanism": "lgrr(k=10,eps_perm=2.0,eps_1=1.0)", "index": 4, "memo": {"value": 4}}, "memo.invalid"),
    ("lgrr(eps_perm=2.0,eps_1=1.0)", "0..9", "3",
     {"mechanism": "lgrr(k=10,eps_perm=3.0,eps_1=1.0)", "index": 3, "memo": {"value": 3}}, "memo.invalid"),
    ("lgrr(eps_perm=2.0,eps_1=1.0)", "0..9", "3",
     {"mechanism": "lgrr(k=10,eps_perm=2.0,eps_1=1.0)", "index": 3, "memo": {"value": 10}}, "memo.invalid"),
    ("lsue(eps_perm=2.0,eps_1=1.0)", "0..9", "3",
     {"mechanism": "lsue(k=10,eps_perm=2.0,eps_1=1.0)", "index": 3, "memo": {"bits": "ffff"}}, "memo.invalid"),
    ("rappor(m=16)", "0..9", "3",
     {"mechanism": "rappor(k=10,m=16,h=2,cohorts=8,f=0.5,p=0.5,q=0.75)", "index": 3,
      "memo": {"cohort": 8, "bits": "0000"}}, "memo.invalid"),
)

# (spec, domain, reports, collection, memo key or None): the releases of the ledger fixture, in order;
# memo "m-a" has three reports (capped at min(eps_perm, 3 eps_inst)), "m-b" two without eps_inst
# (eps_perm), "m-c" and "m-d" one each (their own level; "m-d" has eps_perm = inf, written "inf")
LEDGER_CASES: tuple[tuple[str, str, int, str, str | None], ...] = (
    ("krr(eps=1.0)", "0..9", 3, "ages", None),
    ("oue(eps=0.2)", "red,green,blue", 2, "colours", None),
    ("lgrr(eps_perm=2.0,eps_1=1.0)", "0..9", 1, "ages", "m-a"),
    ("duchi(eps=1.0)", "0..9", 1, "scores", None),
    ("lgrr(eps_perm=2.0,eps_1=1.0)", "0..9", 2, "ages", "m-a"),
    ("loue(eps_perm=4.0,eps_1=1.0)", "0..15", 2, "pages", "m-b"),
    ("lblh(eps_perm=2.0,eps_1=1.0)", "0..99", 1, "pages", "m-c"),
    ("rappor(m=16,h=2,cohorts=2,f=0.0,p=0.25,q=0.75)", "0..9", 1, "flags", "m-d"),
    ("sw(eps=0.5,buckets=64)", "0..19", 4, "scores", None),
    ("geometric(eps=3.0,lo=0,hi=4)", "10..14", 1, "counts", None),
)

_CHACHA_SEEDS = ("localpriv-1", "", "vectors/é中")
_UNIFORM_CASES = (1, 2, 3, 7, 10, 1000, (1 << 31) + 1, 1 << 32, (1 << 32) + 1, 1 << 53, (1 << 64) - 1)
_BERNOULLI_CASES = (0.0, 0.5, 1.0 / 3.0, 0.9, 1e-3, 1.0)
_EXP_CASES = ((0, 1), (1, 1), (1, 2), (3, 4), (5, 2), (1, 1 << 20))
_LAPLACE_CASES = ((1, 1), (1, 10), (3, 2), (1, 1 << 55))


@contextmanager
def _closest() -> Iterator[list[float]]:
    """Records the closest distance of a Bernoulli draw to its threshold, in units of ``2^-53``."""
    seen = [math.inf]

    def watch(U: int, p: float) -> None:
        if 0.0 < p < 1.0:
            seen[0] = min(seen[0], abs(U - math.ldexp(p, 53)))

    def position(v: float) -> None:  # planar Laplace: a point too close to a cell edge fails the case
        if abs(v + 0.5 - round(v + 0.5)) < P.CELL_MARGIN:
            seen[0] = 0.0
    with P.watching(watch, position):
        yield seen


#: cases generated again with another seed because a draw came within :data:`MARGIN` (reset per build)
_RESEEDED = [0]


def _with_margin(seed: str, run: Callable[[P.ChaCha20Source], Any]) -> tuple[str, Any, int]:
    """``run`` on the stream of ``seed`` (suffixed ``#1``, ``#2``, ... until every Bernoulli draw
    keeps :data:`MARGIN`): ``(seed used, result, words used)``."""
    for attempt in range(_MAX_ATTEMPTS):
        _RESEEDED[0] += attempt > 0
        s = seed if attempt == 0 else f"{seed}#{attempt}"
        src = P.ChaCha20Source(s)
        with _closest() as seen:
            out = run(src)
        if seen[0] >= MARGIN:
            return s, out, src.used
    raise LocalPrivError(f"no seed of {seed!r} keeps the Bernoulli margin")  # pragma: no cover


def _rounded(params: dict[str, Any]) -> dict[str, Any]:
    """Derived floats to 12 significant digits: the file then does not depend on the last bits of
    this machine's libm (clients compare them with a tolerance)."""
    def r(v: Any) -> Any:
        if isinstance(v, float):
            return float(f"{v:.12g}")
        if isinstance(v, list):
            return [r(u) for u in v]
        return v
    return {k: r(v) for k, v in params.items()}


def _report_text(r: Any) -> str:
    return repr(r) if isinstance(r, float) else str(r)


def _levels(mech: Mechanism) -> dict[str, Any]:
    """The levels a client records in its ledger, as Python computes them (:func:`release_of`),
    to 12 significant digits (``inf`` as the string ``"inf"``): ``epsilon_ldp``, and for the
    memoized mechanisms ``eps_perm`` and ``eps_inst`` (null where the family has none)."""
    r = release_of(mech)

    def f(v: float | None) -> Any:
        return None if v is None else "inf" if math.isinf(v) else float(f"{v:.12g}")
    out: dict[str, Any] = {"epsilon_ldp": f(r.epsilon)}
    if r.eps_perm is not None:
        out.update(eps_perm=f(r.eps_perm), eps_inst=f(r.eps_inst))
    return out


def _mechanism_vector(i: int, spec: str, domain: str, values: list[Any]) -> dict[str, Any]:
    dom = P.portable_domain(domain)
    mech = P.parse_portable(spec, dom)
    idx = [P.encode_value(dom, str(v)) for v in values]
    seed, reports, used = _with_margin(f"{mech.spec_name}-{i}",
                                       lambda src: [P.sample_portable(mech, x, src) for x in idx])
    return {"spec": spec, "domain": domain, "canonical": str(mech), "derived": _rounded(P.portable_parameters(mech)),
            "levels": _levels(mech), "seed": seed, "values": values, "indices": idx, "reports": reports,
            "reports_text": [_report_text(r) for r in reports], "words": used}


def _memo_run(mech: Mechanism, idx: list[int], rounds: int, src: P.ChaCha20Source) -> tuple[list[Any], list[Any]]:
    memos, reports = [], []
    for x in idx:
        memo = P.memoize_portable(mech, x, src)
        memos.append(memo)
        reports.append([P.sample_portable(mech, x, src, memo) for _ in range(rounds)])
    return memos, reports


def _memo_vector(i: int, spec: str, domain: str, values: list[Any], rounds: int) -> dict[str, Any]:
    dom = P.portable_domain(domain)
    mech = P.parse_portable(spec, dom)
    idx = [P.encode_value(dom, str(v)) for v in values]
    seed, (memos, reports), used = _with_margin(f"{mech.spec_name}-memo-{i}",
                                                partial(_memo_run, mech, idx, rounds))
    return {"spec": spec, "domain": domain, "canonical": str(mech), "derived": _rounded(P.portable_parameters(mech)),
            "levels": _levels(mech), "seed": seed, "values": values, "indices": idx, "rounds": rounds, "memos": memos,
            "reports": reports,
            "reports_text": [[_report_text(r) for r in row] for row in reports], "words": used}


def _primitives() -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["u64"] = [{"seed": "prim-u64", "draws": [str(v) for v in _draws("prim-u64", P.u64, 4)[0]]}]
    out["uniform_int"] = []
    for n in _UNIFORM_CASES:
        draws, used = _draws(f"prim-uniform-{n}", partial(_call, P.uniform_int, n), 6)
        out["uniform_int"].append({"seed": f"prim-uniform-{n}", "n": str(n), "draws": [str(d) for d in draws],
                                   "words": used})
    out["uniform_int_rejection"] = [_rejection_case()]
    out["on_words"] = _word_cases()
    out["bernoulli"] = []
    for p in _BERNOULLI_CASES:
        seed, (draws, used) = _bernoulli_case(p)
        out["bernoulli"].append({"seed": seed, "p": p, "p_hex": p.hex(), "draws": draws, "words": used})
    out["bernoulli_rational"] = []
    for a, b in ((1, 3), (2, 3), (1, 2), (0, 5), (5, 5), (123456789, 1 << 40)):
        draws, used = _draws(f"prim-rational-{a}/{b}", partial(_call, P.bernoulli_rational, a, b), 8)
        out["bernoulli_rational"].append({"seed": f"prim-rational-{a}/{b}", "a": str(a), "b": str(b),
                                          "draws": draws, "words": used})
    out["bernoulli_exp"] = []
    for a, b in _EXP_CASES:
        draws, used = _draws(f"prim-exp-{a}/{b}", partial(_call, P.bernoulli_exp, a, b), 8)
        out["bernoulli_exp"].append({"seed": f"prim-exp-{a}/{b}", "a": str(a), "b": str(b), "draws": draws,
                                     "words": used})
    out["discrete_laplace"] = []
    for a, b in _LAPLACE_CASES:
        draws, used = _draws(f"prim-dlap-{a}/{b}", partial(_call, P.discrete_laplace, a, b), 8)
        out["discrete_laplace"].append({"seed": f"prim-dlap-{a}/{b}", "a": str(a), "b": str(b), "draws": draws,
                                        "words": used})
    return out


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(source, *args)`` with the source last in the partial's call; bools as 0/1."""
    *params, src = args
    out = fn(src, *params)
    return int(out) if isinstance(out, bool) else out


def _draws(seed: str, fn: Callable[[P.ChaCha20Source], Any], n: int) -> tuple[list[Any], int]:
    src = P.ChaCha20Source(seed)
    return [fn(src) for _ in range(n)], src.used


def _bernoulli_case(p: float) -> tuple[str, tuple[list[int], int]]:
    seed, out, _ = _with_margin(f"prim-bernoulli-{p!r}", lambda src: _draws_on(src, p))
    return seed, out


def _draws_on(src: P.ChaCha20Source, p: float) -> tuple[list[int], int]:
    draws = [int(P.bernoulli(src, p)) for _ in range(8)]
    return draws, src.used


def _word_cases() -> list[dict[str, Any]]:
    """Primitives on explicit words: the edge cases a random stream almost never reaches (a
    Bernoulli draw on its threshold, digits of ``a / b`` equal to the words)."""
    cases: list[tuple[str, list[int], list[Any]]] = [
        ("bernoulli", [0, 1 << 31], [0.5]),                      # U = 2^52 = 0.5 2^53: false
        ("bernoulli", [0x7FF, 1 << 31], [0.5]),                  # the low 11 bits are dropped: false
        ("bernoulli", [0xFFFFF800, (1 << 31) - 1], [0.5]),       # U = 2^52 - 1: true
        ("bernoulli", [0xFFFFFFFF, 0xFFFFFFFF], [1.0]),
        ("bernoulli", [0, 0], [0.0]),
        ("bernoulli_rational", [0x55555555, 0x55555555, 0x55555554], ["1", "3"]),  # equal, equal, below
        ("bernoulli_rational", [0x55555555, 0x55555556], ["1", "3"]),  # equal, above: false
        ("bernoulli_rational", [0x80000000], ["1", "2"]),        # equal and the remainder is 0: false
        ("bernoulli_rational", [0x7FFFFFFF], ["1", "2"]),
        ("uniform_int", [5, 6, 7], ["1"]),
        ("uniform_int", [0xFFFFFFFF, 0xFFFFFFFE, 9], ["3"]),
        ("uniform_int", [1, 2, 3], [str((1 << 64) + 1)]),     # three words per try above 2^64
        ("uniform_int", [0xFFFFFFFF, 0xFFFFFFFF, 4, 0], [str((1 << 32) + 1)]),  # 2^64 - 1 rejected
    ]
    out = []
    for name, words, args in cases:
        src = P.ListSource(words)
        if name == "bernoulli":
            got: Any = int(P.bernoulli(src, args[0]))
        elif name == "bernoulli_rational":
            got = int(P.bernoulli_rational(src, int(args[0]), int(args[1])))
        else:
            got = str(P.uniform_int(src, int(args[0])))
        out.append({"primitive": name, "args": args, "words_in": words, "result": got, "words": src.used})
    return out


def _rejection_case() -> dict[str, Any]:
    """``uniform_int(3)`` on explicit words: the first two are rejected (``>= 2^32 - 1``)."""
    words = [0xFFFFFFFF, 0xFFFFFFFF, 7]
    src = P.ListSource(words)
    return {"words_in": words, "n": "3", "draw": str(P.uniform_int(src, 3)), "words": src.used}


def _chacha() -> dict[str, Any]:
    rfc_key = bytes(range(32))
    rfc_nonce = bytes.fromhex("000000090000004a00000000")
    streams = []
    for seed in _CHACHA_SEEDS:
        src = P.ChaCha20Source(seed)
        streams.append({"seed": seed, "key_hex": hashlib.sha256(seed.encode("utf-8")).hexdigest(),
                        "words": [src.u32() for _ in range(40)]})
    return {"rfc8439_2.3.2": {"key_hex": rfc_key.hex(), "nonce_hex": rfc_nonce.hex(), "counter": 1,
                              "words_hex": [f"{w:08x}" for w in P.chacha20_block(rfc_key, 1, rfc_nonce)]},
            "streams": streams}


def _xxh64() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for data, seed, h in stablehash.TEST_VECTORS:
        kind = "utf8" if isinstance(data, str) else "le64"
        out.append({"input_kind": kind, "input": data if isinstance(data, str) else str(data), "seed": str(seed),
                    "xxh64_hex": f"{h:016x}"})
    for x, seed, g in ((0, 0, 2), (37, 3141592653, 8), (42, 17, 1 << 30), (999999, (1 << 32) - 1, 21)):
        h = int(stablehash.hash_keys(x, seed))
        out.append({"input_kind": "le64", "input": str(x), "seed": str(seed), "xxh64_hex": f"{h:016x}",
                    "mod": g, "h_mod": h % g})
    return out


def _negative() -> list[dict[str, Any]]:
    out = []
    for spec, domain, value, code in NEGATIVE_CASES:
        got = _error_code(spec, domain, value)
        if got != code:
            raise LocalPrivError(f"negative vector {spec!r} {domain!r} {value!r}: expected {code}, got {got}")
        out.append({"spec": spec, "domain": domain, "value": value, "error": code})
    return out


def _negative_memo() -> list[dict[str, Any]]:
    out = []
    for spec, domain, value, memo, code in MEMO_NEGATIVE_CASES:
        got = _error_code(spec, domain, value, memo)
        if got != code:
            raise LocalPrivError(f"negative memo vector {spec!r}: expected {code}, got {got}")
        out.append({"spec": spec, "domain": domain, "value": value, "memo": memo, "error": code})
    return out


def _error_code(spec: str, domain: str | None, value: str | None, memo: dict[str, Any] | None = None) -> str | None:
    try:
        dom = P.portable_domain(domain) if domain is not None else None
        mech = P.parse_portable(spec, dom)
        if value is not None and dom is not None:
            x = P.encode_value(dom, value)
            if memo is not None:
                P.sample_portable(mech, x, P.ChaCha20Source("negative"), memo)
    except P.PortableError as exc:
        return exc.code
    return None


def _ledger_releases() -> list[Release]:
    out = []
    for i, (spec, domain, reports, collection, key) in enumerate(LEDGER_CASES):
        mech = P.parse_portable(spec, P.portable_domain(domain))
        out.append(release_of(mech, reports, collection=collection, time=f"2026-11-28T10:{i:02d}:00Z", memo_key=key))
    return out


def ledger_fixture() -> dict[str, Any]:
    """The ledger file of :data:`LEDGER_CASES` (:meth:`Ledger.to_dict`), which the clients read."""
    led = Ledger.__new__(Ledger)  # no file: only the releases, written by to_dict as Ledger.save writes them
    led.releases = _ledger_releases()
    return led.to_dict()


def render_ledger(doc: dict[str, Any]) -> str:
    """The fixture's exact text, as :meth:`Ledger.save` writes it (1-space indent, final newline)."""
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


def _ledger_totals() -> dict[str, Any]:
    """``compose(first i releases).epsilon`` for every ``i`` of the fixture: what a client's total
    of the same file must be."""
    rels = _ledger_releases()
    return {"file": LEDGER_PATH, "releases": len(rels),
            "prefix_epsilon": [compose(rels[:i]).epsilon for i in range(1, len(rels) + 1)],
            "delta": compose(rels).delta}


def random_ledgers(seed: int, n: int) -> tuple[list[str], list[float]]:
    """``n`` random ledger texts (independent reports, memo groups with and without ``eps_inst``,
    k-RR, infinite levels, shared levels) and Python's basic total of each: what a client must
    compute from the same text."""
    rng = random.Random(seed)
    levels = [0.1, 0.5, 1.0, 1.0 / 3.0, 2.0, 1e-9, 7.25, 0.0]
    texts, totals = [], []
    for _ in range(n):
        rels = []
        perms: dict[str, float] = {}
        for _ in range(rng.randint(0, 12)):
            eps = rng.choice(levels) if rng.random() < 0.7 else rng.uniform(0, 5)
            if rng.random() < 0.03:
                eps = math.inf
            key = rng.choice([None, None, "a", "b", "c"])
            perm = inst = None
            if key is not None:
                low = min(eps, 1.0)
                perm = perms.setdefault(key, rng.choice([2.0, 4.0, math.inf, rng.uniform(low, 8.0)]))
                inst = rng.choice([None, eps, rng.uniform(low, 3.0)])
            rr = rng.choice([None, None, 2, 10])
            rels.append(Release(spec=f"m{rng.randint(0, 3)}(k=4)", epsilon=eps, reports=rng.randint(1, 1000),
                                memo_key=key, eps_perm=perm, eps_inst=inst, rr_values=rr))
        doc = {"format": LEDGER_FORMAT, "version": LEDGER_VERSION,
               "releases": [{k: "inf" if isinstance(v, float) and math.isinf(v) else v for k, v in r.to_dict().items()}
                            for r in rels]}
        texts.append(json.dumps(doc, indent=1))
        totals.append(compose(rels).epsilon)
    return texts, totals


def build_vectors() -> dict[str, Any]:
    """The whole vectors document (a dict ready for :func:`render_vectors`)."""
    with warnings.catch_warnings():  # the large-eps cases are deliberate
        warnings.simplefilter("ignore", PrivacyWarning)
        return _build()


def _build() -> dict[str, Any]:
    _RESEEDED[0] = 0
    mechanisms = [_mechanism_vector(i, spec, dom, vals) for i, (spec, dom, vals) in enumerate(MECHANISM_CASES)]
    memoized = [_memo_vector(i, spec, dom, vals, r) for i, (spec, dom, vals, r) in enumerate(MEMO_CASES)]
    return {
        "protocol": "localpriv portable client protocol",
        "version": P.PROTOCOL_VERSION,
        "spec": "docs/clients.md#the-portable-protocol",
        "generated_by": "make vectors (tools/portable_vectors.py, localpriv.testing.portable)",
        "bernoulli_margin": MARGIN,
        "cell_margin": P.CELL_MARGIN,
        "error_codes": dict(P.ERROR_CODES),
        "chacha20": _chacha(),
        "xxh64": _xxh64(),
        "primitives": _primitives(),
        "reseeded_cases": _RESEEDED[0],
        "mechanisms": mechanisms,
        "memoized": memoized,
        "negative": _negative(),
        "negative_memo": _negative_memo(),
        "ledger": _ledger_totals(),
    }


def render_vectors(doc: dict[str, Any]) -> str:
    """The file's exact text: JSON, 1-space indent, keys in insertion order, ASCII, final newline."""
    return json.dumps(doc, indent=1, ensure_ascii=True) + "\n"


def check_levels(doc: dict[str, Any]) -> list[str]:
    """The cases whose ``levels`` differ from what Python computes now (empty: all agree)."""
    bad = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        for v in doc["mechanisms"] + doc["memoized"]:
            if _levels(P.parse_portable(v["spec"], P.portable_domain(v["domain"]))) != v.get("levels"):
                bad.append(f"{v['spec']} on {v['domain']}: levels")
    return bad


def check_vectors(doc: dict[str, Any]) -> list[str]:
    """Replays a vectors document as a client does; returns the differences (empty: conformant)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return _check(doc)


def _check(doc: dict[str, Any]) -> list[str]:
    bad: list[str] = []
    if doc["primitives"]["on_words"] != _word_cases():
        bad.append("primitives on explicit words")
    for s in doc["chacha20"]["streams"]:
        src = P.ChaCha20Source(s["seed"])
        if [src.u32() for _ in s["words"]] != s["words"]:
            bad.append(f"chacha20 stream {s['seed']!r}")
    for v in doc["mechanisms"]:
        try:
            dom = P.portable_domain(v["domain"])
            mech = P.parse_portable(v["spec"], dom)
            idx = [P.encode_value(dom, str(x)) for x in v["values"]]
            src = P.ChaCha20Source(v["seed"])
            reports = [P.sample_portable(mech, x, src) for x in idx]
        except LocalPrivError as exc:
            bad.append(f"{v['spec']} on {v['domain']}: {exc}")
            continue
        if str(mech) != v["canonical"] or idx != v["indices"] or reports != v["reports"] or src.used != v["words"]:
            bad.append(f"{v['spec']} on {v['domain']} (seed {v['seed']!r})")
    for v in doc["memoized"]:
        try:
            dom = P.portable_domain(v["domain"])
            mech = P.parse_portable(v["spec"], dom)
            idx = [P.encode_value(dom, str(x)) for x in v["values"]]
            src = P.ChaCha20Source(v["seed"])
            memos, reports = _memo_run(mech, idx, v["rounds"], src)
        except LocalPrivError as exc:
            bad.append(f"{v['spec']} on {v['domain']}: {exc}")
            continue
        if str(mech) != v["canonical"] or memos != v["memos"] or reports != v["reports"] or src.used != v["words"]:
            bad.append(f"{v['spec']} on {v['domain']} (seed {v['seed']!r})")
    bad += check_levels(doc)
    for n in doc["negative"] + doc["negative_memo"]:
        got = _error_code(n["spec"], n["domain"], n["value"], n.get("memo"))
        if got != n["error"]:
            bad.append(f"negative {n['spec']!r}: expected {n['error']}, got {got}")
    return bad
