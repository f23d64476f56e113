"""Shared helpers of the benchmarks: thread pinning, the machine and its load, interleaved rounds.

Importing this module pins the BLAS / OpenMP pools to one thread (environment variables set
before NumPy loads them, and threadpoolctl's limit for pools already loaded), so every benchmark
process compares single-threaded code unless it says otherwise. ``LOCALPRIV_BENCH_THREADS``
overrides the pin (the value is recorded in :func:`machine`).

:func:`interleaved` runs contenders in rounds (A, B, C, A, B, C, ...) so that a change of load
hits every contender alike, and returns per contender the median, minimum and maximum of CPU time
(``time.process_time``: this process's user + system time, all its threads, plus that of child
processes waited for) and wall time
(``time.perf_counter``), plus the ratios of the medians against a reference contender.
"""
from __future__ import annotations

import os

THREADS = os.environ.get("LOCALPRIV_BENCH_THREADS", "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS"):
    os.environ.setdefault(_var, THREADS)

import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from importlib import metadata  # noqa: E402

import numpy as np  # noqa: E402

_LIMITER = None


def pin_threads() -> None:
    """Limit the BLAS pools already loaded to ``THREADS`` threads (threadpoolctl; no-op without it)."""
    global _LIMITER
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    _LIMITER = threadpool_limits(int(THREADS))


pin_threads()


def now() -> str:
    """UTC time, ISO 8601 to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def timed(fn, *args, repeat: int = 1, **kw):
    """(best wall time in seconds over ``repeat`` runs, result of the last run)."""
    best, out = np.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(*args, **kw)
        best = min(best, time.perf_counter() - t)
    return best, out


def _children_cpu() -> float:
    try:
        import resource
    except ImportError:
        return 0.0
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def clock(fn, *args, **kw):
    """(result, CPU seconds, wall seconds) of one call.

    CPU = this process's ``process_time`` (all its threads) plus the user + system time of the
    child processes the call waited for (``getrusage(RUSAGE_CHILDREN)``), so a contender that runs
    a subprocess is charged for it; wall = ``perf_counter``.
    """
    c, k, w = time.process_time(), _children_cpu(), time.perf_counter()
    out = fn(*args, **kw)
    return out, time.process_time() - c + _children_cpu() - k, time.perf_counter() - w


def spread(values) -> dict:
    """Median, minimum and maximum of a list of numbers (``None`` entries ignored)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def interleaved(contenders: dict, rounds: int = 5, reference: str | None = None, setup=None) -> dict:
    """Time ``contenders`` (name -> zero-argument callable) in ``rounds`` interleaved rounds.

    Round ``r`` calls every contender once, in the given order (``setup(r)``, if given, runs first
    and its result is passed to each contender as its one argument). Returns
    ``{"rounds": R, "order": [...], "contenders": {name: {"cpu": spread, "wall": spread,
    "cpu_each": [...], "wall_each": [...], "result": last result}}, "ratios": {...}}`` where
    ``ratios[name]`` holds ``cpu`` and ``wall``: median of ``reference`` / median of ``name``
    (how many times faster ``name`` is), for every other contender. A contender that raises is
    recorded with its error and skipped in later rounds.
    """
    names = list(contenders)
    each = {n: {"cpu_each": [], "wall_each": [], "result": None, "error": None} for n in names}
    for r in range(rounds):
        arg = setup(r) if setup is not None else None
        for n in names:
            if each[n]["error"]:
                continue
            try:
                fn = contenders[n]
                out, c, w = clock(fn, arg) if setup is not None else clock(fn)
            except Exception as exc:  # another library failing is a result, not a crash
                each[n]["error"] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            each[n]["cpu_each"].append(c)
            each[n]["wall_each"].append(w)
            each[n]["result"] = out
    res = {"rounds": rounds, "order": names, "contenders": {}}
    for n in names:
        e = each[n]
        res["contenders"][n] = {"cpu": spread(e["cpu_each"]), "wall": spread(e["wall_each"]),
                                "cpu_each": e["cpu_each"], "wall_each": e["wall_each"], "result": e["result"]}
        if e["error"]:
            res["contenders"][n]["error"] = e["error"]
    if reference is not None:
        res["reference"] = reference
        res["ratios"] = {}
        ref = res["contenders"][reference]
        for n in names:
            if n == reference:
                continue
            cur = res["contenders"][n]
            res["ratios"][n] = {k: (ref[k]["median"] / cur[k]["median"]
                                    if ref[k]["median"] and cur[k]["median"] else None) for k in ("cpu", "wall")}
    return res


def strip_results(timing: dict) -> dict:
    """``interleaved``'s dict without the contenders' ``result`` objects (for JSON)."""
    out = dict(timing)
    out["contenders"] = {n: {k: v for k, v in c.items() if k != "result"} for n, c in timing["contenders"].items()}
    return out


def version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            return round(int(f.readline().split()[1]) / 2 ** 20, 1)
    except (OSError, ValueError, IndexError):
        return None


def load() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (``os.getloadavg``), rounded to 0.01."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def blas_info() -> list[dict]:
    """The BLAS / OpenMP pools loaded in this process and their thread counts (threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [{"api": p.get("internal_api"), "threads": p.get("num_threads"), "version": p.get("version")}
            for p in threadpool_info()]


def machine() -> dict:
    """CPU model, cores, memory, load average now, thread settings and library versions."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {"cpu": _cpu_model(), "cores": os.cpu_count(), "cores_usable": affinity,
            "memory_gib": _memory_gib(), "memory": None if _memory_gib() is None else f"{_memory_gib()} GiB",
            "platform": platform.platform(), "python": sys.version.split()[0],
            "load": load(), "time": now(),
            "threads": {"bench_pin": THREADS, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
                        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
                        "LOCALPRIV_THREADS": os.environ.get("LOCALPRIV_THREADS"),
                        "LOCALPRIV_BLAS_THREADS": os.environ.get("LOCALPRIV_BLAS_THREADS"),
                        "blas_pools": blas_info()},
            "numpy": np.__version__, "scipy": version("scipy"), "localpriv": version("localpriv"),
            "multi-freq-ldpy": version("multi-freq-ldpy"), "pure-ldp": version("pure-ldp"),
            "numba": version("numba"), "xxhash": version("xxhash")}


def peak_rss_gib() -> float:
    """Peak resident memory of this process, GiB: ``VmHWM`` (reset by exec, unlike ``ru_maxrss``,
    which a child inherits from its parent), ``ru_maxrss`` where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


#: run by a fresh, small Python process: it starts the measured command (its grandchild of the
#: benchmark) and reports that command's rusage. Linux carries a process's resident-memory high-water
#: mark across fork and exec (``ru_maxrss`` of a child started from a 2 GiB benchmark process reads
#: 2 GiB whatever the child does); started from this ~10 MiB process, the command's ``ru_maxrss``
#: is its own (at most this process's size above it).
_SPAWN = """
import json, os, subprocess, sys, time
t = time.perf_counter()
p = subprocess.Popen(sys.argv[1:])
_, status, u = os.wait4(p.pid, 0)
print(json.dumps({"exit": os.waitstatus_to_exitcode(status), "wall_s": time.perf_counter() - t,
                  "cpu_s": u.ru_utime + u.ru_stime, "maxrss_kib": u.ru_maxrss}), file=sys.stderr)
"""


def run_measured(cmd: list, env=None) -> tuple:
    """Run ``cmd`` and measure it honestly: ``(exit code, wall s, CPU s, peak RSS MiB, stdout,
    stderr)``; CPU and peak are the command's own (through :data:`_SPAWN`), not inflated by this
    process's memory."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _SPAWN, *map(str, cmd)], capture_output=True, env=env)
    err = proc.stderr.decode(errors="replace").rstrip()
    lines = err.splitlines()
    try:
        m = json.loads(lines[-1])
        err = "\n".join(lines[:-1])
    except (IndexError, ValueError):
        return proc.returncode, float("nan"), float("nan"), float("nan"), proc.stdout.decode(errors="replace"), err
    return (m["exit"], m["wall_s"], m["cpu_s"], m["maxrss_kib"] / 1024, proc.stdout.decode(errors="replace"), err)


def write_json(path: str | None, doc: dict) -> str:
    """``doc`` as indented JSON text, written atomically to ``path`` (through ``path.tmp``) when given."""
    text = json.dumps(doc, indent=2)
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    return text


def emit(result: dict) -> None:
    print(json.dumps(result, indent=2, default=float))


def quick_flag() -> bool:
    return "--quick" in sys.argv[1:]


def rounds_arg(default: int) -> int:
    """``--rounds N`` from the command line (at least 1), else ``default``."""
    args = sys.argv[1:]
    for i, a in enumerate(args):
        if a == "--rounds" and i + 1 < len(args):
            return max(1, int(args[i + 1]))
        if a.startswith("--rounds="):
            return max(1, int(a.split("=", 1)[1]))
    return default
