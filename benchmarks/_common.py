"""Shared helpers of the benchmarks (timing, machine description, JSON printing)."""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from importlib import metadata

import numpy as np


def timed(fn, *args, repeat: int = 1, **kw):
    """(best wall time in seconds over ``repeat`` runs, result of the last run)."""
    best, out = np.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(*args, **kw)
        best = min(best, time.perf_counter() - t)
    return best, out


def version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict:
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split()[1]
            mem = f"{int(mem) / 2**20:.1f} GiB"
    except OSError:
        pass
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
    except OSError:
        pass
    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpu": cpu,
            "cores": os.cpu_count(), "memory": mem, "numpy": np.__version__,
            "scipy": version("scipy"), "multi-freq-ldpy": version("multi-freq-ldpy"),
            "pure-ldp": version("pure-ldp"), "numba": version("numba")}


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


def emit(result: dict) -> None:
    print(json.dumps(result, indent=2, default=float))


def quick_flag() -> bool:
    return "--quick" in sys.argv[1:]
