"""Client (obfuscation) cost: localpriv's vectorized samplers against the per-user clients of
multi-freq-ldpy and pure-ldp, k = 100, eps = 1, the same input values.

Rules of the comparison:

* **Same n.** localpriv and multi-freq-ldpy obfuscate the same ``n = 10^6`` users (``--quick``:
  ``10^5``); pure-ldp, whose unary-encoding client costs ~40 us per user, is timed on the
  first ``n_pure_ldp = 10^5`` of them (its cost per user does not depend on n: one call per
  user). The other libraries' reports are kept (appended to a list, as a caller would), ours are
  the arrays ``sample`` returns.
* **Report dtype.** Every row records the report dtype and bytes per report. multi-freq-ldpy's
  histogram encoding returns ``k`` float64 per user; our SHE report is ``k`` float32 (the report
  format, ``docs/format.md``), so SHE is also timed as ``sample`` + conversion to the float64
  vectors (``she_float64``): the same n and the same dtype as theirs.
* **Threads.** Ours run with ``LOCALPRIV_THREADS=1`` (one thread); SHE, whose large calls can
  split over two threads, is also timed with two (``two_threads``; CPU time then sums both).
* **Rounds.** Every contender (ours, theirs, the random-number floors) is called once per round,
  in turn, for ``--rounds`` rounds (default 5): medians with min-max spread of CPU time
  (``process_time``) and wall time, per report. Ratios are of the median costs per report.
* **Floors.** ``floor_random``: one ``rng.random(n)`` double per user; ``floor_raw64``: one
  ``bit_generator.random_raw`` word per user in chunks of ``2^16`` (exactly the draws of k-RR's
  sampler for n > 2^16). ``krr_floor_ratio``: k-RR's cost over each floor, median of the per-round
  ratios. ``oue_bits_ratio``: OUE's cost over drawing its random bits alone (16 bits per bit in
  the same chunks, plus the true bit's double per user).
* **OLH/BLH.** Both other libraries hash ``str(x)`` with ``xxhash.xxh32``, which current xxhash
  refuses (``TypeError: Strings must be encoded before hashing``); a one-line shim
  (``xxh32(s.encode())``) makes them run and is recorded in the JSON.
* **Peak memory** of k-RR at ``n = 10^8`` (``--quick``: ``10^6``) in a child process: VmHWM minus
  the resident size just before ``sample`` (the input array is already there), and the output's size.

Run ``python benchmarks/clients.py [--quick] [--rounds N]``; one JSON document on stdout.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from math import ceil
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import clock, emit, load, machine, quick_flag, rounds_arg, spread  # noqa: E402

from localpriv.mechanisms import parse  # noqa: E402

K, EPS = 100, 1.0
MECHANISMS = ["krr", "oue", "sue", "olh", "blh", "ss", "she", "the"]
CHUNK = 1 << 16  # localpriv.mechanisms._sampling.CLIENT_CHUNK
SHIM = ("xxhash.xxh32(str(x), seed) -> xxhash.xxh32(str(x).encode(), seed) "
        "(multi-freq-ldpy LH, pure-ldp LHClient)")


class _EncodingXXHash:
    """Stand-in for the ``xxhash`` module inside the other libraries' LH clients: encodes ``str``."""

    @staticmethod
    def xxh32(data, seed=0):
        import xxhash

        return xxhash.xxh32(data.encode() if isinstance(data, str) else data, seed=seed)


def _others():
    """localpriv spec -> per-user client (value -> report) of multi-freq-ldpy and of pure-ldp."""
    mfl, pl = {}, {}
    try:
        from multi_freq_ldpy.pure_frequency_oracles import GRR, HE, LH, SS, UE

        LH.xxhash = _EncodingXXHash  # the shim
        mfl = {"krr": lambda x: GRR.GRR_Client(x, K, EPS),
               "oue": lambda x: UE.UE_Client(x, K, EPS, True),
               "sue": lambda x: UE.UE_Client(x, K, EPS, False),
               "olh": lambda x: LH.LH_Client(x, K, EPS, True),
               "blh": lambda x: LH.LH_Client(x, K, EPS, False),
               "ss": lambda x: SS.SS_Client(x, K, EPS),
               "she": lambda x: HE.HE_Client(x, K, EPS),
               "the": lambda x: HE.HE_Client(x, K, EPS)}
    except ImportError:
        pass
    try:
        import pure_ldp.frequency_oracles.local_hashing.lh_client as lh_module
        from pure_ldp.frequency_oracles.direct_encoding.de_client import DEClient
        from pure_ldp.frequency_oracles.histogram_encoding.he_client import HEClient
        from pure_ldp.frequency_oracles.local_hashing.lh_client import LHClient
        from pure_ldp.frequency_oracles.unary_encoding.ue_client import UEClient

        lh_module.xxhash = _EncodingXXHash  # the shim

        def wrap(client):  # pure-ldp's clients take 1-based values by default (index_mapper x -> x - 1)
            return lambda x: client.privatise(x + 1)

        pl = {"krr": wrap(DEClient(EPS, K)), "oue": wrap(UEClient(EPS, K, use_oue=True)),
              "sue": wrap(UEClient(EPS, K, use_oue=False)), "olh": wrap(LHClient(EPS, K, use_olh=True)),
              "blh": wrap(LHClient(EPS, K, g=2)), "she": wrap(HEClient(EPS, K)),
              "the": wrap(HEClient(EPS, K))}
    except ImportError:
        pass
    return mfl, pl


def _per_user(fn, values):
    """One call per user, reports kept in a list (what these libraries offer a caller)."""
    def run():
        out = []
        append = out.append
        for v in values:
            append(fn(v))
        return len(out)
    return run


def _ours(m, x, rng, threads="1", as_float64=False):
    def run():
        saved = os.environ.get("LOCALPRIV_THREADS")
        if threads is None:
            os.environ.pop("LOCALPRIV_THREADS", None)
        else:
            os.environ["LOCALPRIV_THREADS"] = threads
        try:
            rep = m.sample(x, rng)
            if as_float64:
                rep = m.vectors(rep)
            return rep.nbytes // x.size, str(rep.dtype)
        finally:
            if saved is None:
                os.environ.pop("LOCALPRIV_THREADS", None)
            else:
                os.environ["LOCALPRIV_THREADS"] = saved
    return run


def _floor_random(n, rng):
    return lambda: rng.random(n).nbytes


def _floor_raw64(n, rng):
    def run():
        for lo in range(0, n, CHUNK):
            rng.bit_generator.random_raw(min(CHUNK, n - lo))
    return run


def _floor_oue_bits(n, rng):
    """The random draws of the unary-encoding client alone: per chunk of users, 16 bits per bit
    (``bernoulli_bits``: ``ceil(bits / 4)`` 64-bit words) and one double per user (the true bit)."""
    step = max(1, (1 << 18) // K)  # localpriv.mechanisms.unary._CHUNK // k

    def run():
        for lo in range(0, n, step):
            rows = min(step, n - lo)
            rng.bit_generator.random_raw(ceil(rows * K / 4))
            rng.random(rows)
    return run


_PEAK_CHILD = r"""
import json, sys, numpy as np
from localpriv.mechanisms import parse

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
n = int(sys.argv[1])
m = parse("krr(k=100,eps=1.0)")
m.sample(np.arange(1 << 17) % 100, np.random.default_rng(0))  # JIT / cache load, lazy tables
x = np.arange(n, dtype=np.int64) % 100
base = status("VmRSS:")
import time
t = time.process_time()
z = m.sample(x, np.random.default_rng(1))
cpu = time.process_time() - t
print(json.dumps({"n": n, "input_bytes": int(x.nbytes), "output_bytes": int(z.nbytes),
                  "rss_before_sample_bytes": base, "peak_rss_bytes": status("VmHWM:"),
                  "extra_peak_bytes": status("VmHWM:") - base, "sample_cpu_s": cpu}))
"""


def _krr_peak(n: int) -> dict:
    t = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", _PEAK_CHILD, str(n)], capture_output=True, text=True,
                             timeout=900, check=True)
        import json

        res = json.loads(out.stdout.strip().splitlines()[-1])
    except Exception as exc:  # a failing child is a result
        return {"n": n, "error": f"{type(exc).__name__}: {exc}"[:300]}
    res["child_wall_s"] = time.perf_counter() - t
    res["extra_minus_output_bytes"] = res["extra_peak_bytes"] - res["output_bytes"]
    return res


def _per_report(e: dict, n: int) -> dict:
    """ns per report (median, min, max) of CPU and wall time, and reports per second."""
    if e.get("error"):
        return {"error": e["error"], "n": n}
    out = {"n": n}
    for kind in ("cpu", "wall"):
        s = e[kind]
        out[f"{kind}_ns_per_report"] = {k: s[k] / n * 1e9 for k in ("median", "min", "max")}
    out["reports_per_s_wall"] = n / e["wall"]["median"]
    out["reports_per_cpu_s"] = n / e["cpu"]["median"]
    return out


def _ratio(mine: dict, theirs: dict) -> dict | None:
    if "cpu_ns_per_report" not in mine or "cpu_ns_per_report" not in theirs:
        return None
    return {k: theirs[f"{k}_ns_per_report"]["median"] / mine[f"{k}_ns_per_report"]["median"]
            for k in ("cpu", "wall")}


def _paired(a: dict, b: dict) -> dict:
    """Median (min, max) over rounds of a's CPU time / b's CPU time, and the same for wall time."""
    return {k: spread([x / y for x, y in zip(a[f"{k}_each"], b[f"{k}_each"])]) for k in ("cpu", "wall")}


def run(quick: bool = False) -> dict:
    n = 100_000 if quick else 1_000_000
    n_pl = 5_000 if quick else 100_000
    n_peak = 1_000_000 if quick else 100_000_000
    rounds = rounds_arg(2 if quick else 5)
    rng = np.random.default_rng(8)
    x = np.minimum(rng.geometric(0.05, size=n) - 1, K - 1).astype(np.int64)
    xs = [int(v) for v in x]
    mfl, pl = _others()
    load_before = load()
    contenders, sizes, meta = {}, {}, {}
    contenders["floor_random"], sizes["floor_random"] = _floor_random(n, rng), n
    contenders["floor_raw64"], sizes["floor_raw64"] = _floor_raw64(n, rng), n
    contenders["floor_oue_bits"], sizes["floor_oue_bits"] = _floor_oue_bits(n, rng), n
    for spec in MECHANISMS:
        m = parse(f"{spec}(k={K},eps={EPS})")
        m.sample(x[:CHUNK + 1], rng)  # warm-up: lazy tables, compiled kernels
        contenders[f"{spec}/ours"], sizes[f"{spec}/ours"] = _ours(m, x, rng), n
        if spec == "she":
            contenders["she/ours_two_threads"] = _ours(m, x, rng, threads=None)
            sizes["she/ours_two_threads"] = n
            contenders["she/ours_float64"], sizes["she/ours_float64"] = _ours(m, x, rng, as_float64=True), n
        for lib, table, size in (("multi-freq-ldpy", mfl, n), ("pure-ldp", pl, n_pl)):
            if spec not in table:
                meta[f"{spec}/{lib}"] = {"skipped": "not offered"}
                continue
            fn = table[spec]
            try:
                rep = fn(xs[0])  # warm-up (numba JIT for multi-freq-ldpy)
                meta[f"{spec}/{lib}"] = {"report_type": type(rep).__name__,
                                         "dtype": str(getattr(rep, "dtype", type(rep).__name__))}
            except Exception as exc:
                meta[f"{spec}/{lib}"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                continue
            contenders[f"{spec}/{lib}"], sizes[f"{spec}/{lib}"] = _per_user(fn, xs[:size]), size
    timing = _interleaved(contenders, rounds)
    per = {name: _per_report(timing[name], sizes[name]) for name in contenders}
    for name, res in timing.items():
        if res.get("result") is not None and isinstance(res["result"], tuple):
            per[name]["bytes_per_report"], per[name]["dtype"] = res["result"]
    rows = []
    for spec in MECHANISMS:
        row = {"mechanism": spec, "ours": per[f"{spec}/ours"]}
        if spec == "she":
            row["ours_two_threads"] = per["she/ours_two_threads"]
            row["ours_float64"] = per["she/ours_float64"]
        row["ratios"] = {}
        for lib in ("multi-freq-ldpy", "pure-ldp"):
            name = f"{spec}/{lib}"
            row[lib] = dict(per.get(name) or {}, **meta.get(name, {}))
            r = _ratio(row["ours"], row[lib])
            if r is not None:
                row["ratios"][lib] = r
                if spec == "she":
                    row["ratios"][f"{lib} (ours as float64)"] = _ratio(row["ours_float64"], row[lib])
                    row["ratios"][f"{lib} (ours on two threads)"] = _ratio(row["ours_two_threads"], row[lib])
        rows.append(row)
    floors = {k: per[k] for k in ("floor_random", "floor_raw64", "floor_oue_bits")}
    krr_floor = {"vs_random_double": _paired(timing["krr/ours"], timing["floor_random"]),
                 "vs_raw64_words": _paired(timing["krr/ours"], timing["floor_raw64"])}
    oue_bits = _paired(timing["oue/ours"], timing["floor_oue_bits"])
    return {"benchmark": "clients", "k": K, "eps": EPS, "n": n, "n_pure_ldp": n_pl, "rounds": rounds,
            "threads_ours": 1, "shim": SHIM, "load_before": load_before, "load_after": load(),
            "machine": machine(), "floors": floors, "krr_floor_ratio": krr_floor, "oue_bits_ratio": oue_bits,
            "rows": rows, "krr_peak_memory": _krr_peak(n_peak)}


def _interleaved(contenders: dict, rounds: int) -> dict:
    """``rounds`` rounds, each calling every contender once in order (as ``_common.interleaved``,
    with the per-round times kept for paired ratios); a contender that raises is dropped."""
    each = {k: {"cpu_each": [], "wall_each": [], "result": None} for k in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            e = each[name]
            if e.get("error"):
                continue
            try:
                out, c, w = clock(fn)
            except Exception as exc:  # another library failing is a result, not a crash
                e["error"] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            e["cpu_each"].append(c)
            e["wall_each"].append(w)
            e["result"] = out
            print(f"# {name}: cpu {c:.3f} s, wall {w:.3f} s", file=sys.stderr, flush=True)
    for e in each.values():
        e["cpu"], e["wall"] = spread(e["cpu_each"]), spread(e["wall_each"])
    return each


if __name__ == "__main__":
    emit(run(quick_flag()))
