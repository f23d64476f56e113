"""Start-up cost of the package and the command line: ``make bench-import``
(docs/decisions/0023-small-lazy-top-level-api.md).

Each case runs in fresh processes (``--runs`` times, at least 5; the median is reported) and is
timed from outside: CPU user + system time of the child (``os.wait4``'s resource usage, so the
interpreter's own start-up is included) and wall time. The target is under 0.25 s of CPU for
``import localpriv`` and ``localpriv --help``; the interpreter alone (``python -c pass``) is
measured too, for scale. BLAS and OpenMP pools are pinned to one thread in the children (a BLAS
that starts threads at import costs CPU on many-core machines); the machine's load average is
recorded, since on a busy machine every number grows.

Also recorded: which heavy modules (pandas, duckdb, pyarrow, scipy, matplotlib, rich) each
case imports; ``tests/test_presentation.py`` asserts the same for ``import localpriv``.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: the budget: CPU seconds (user + system) of one fresh process
BUDGET_CPU = 0.25
HEAVY = ("numpy", "pandas", "duckdb", "pyarrow", "scipy", "matplotlib", "rich", "typer")
PINNED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
          "NUMEXPR_NUM_THREADS": "1", "VECLIB_MAXIMUM_THREADS": "1"}


def _entry_point() -> list[str]:
    """The installed ``localpriv`` script beside this interpreter (else the module's main)."""
    script = Path(sys.executable).with_name("localpriv")
    if script.exists():
        return [str(script)]
    found = shutil.which("localpriv")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from localpriv.cli.main import main; main(sys.argv[1:])"]


def cases() -> dict[str, list[str]]:
    cli = _entry_point()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import localpriv": [sys.executable, "-c", "import localpriv"],
        "localpriv --help": cli + ["--help"],
        "localpriv --version": cli + ["--version"],
    }


def _env() -> dict:
    env = dict(os.environ)
    env.update(PINNED)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    env.setdefault("COLUMNS", "100")
    return env


def time_once(cmd: list[str]) -> tuple[float, float]:
    """(CPU seconds user + system, wall seconds) of one fresh process running ``cmd``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall


def heavy_modules(statement: str) -> list[str]:
    """The heavy top-level packages loaded by ``statement`` in a fresh interpreter."""
    code = (f"import sys\n{statement}\n"  # the answer on stderr: --help writes to stdout
            f"sys.stderr.write('HEAVY ' + ' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & "
            f"{set(HEAVY)!r})) + '\\n')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=True)
    line = [ln for ln in out.stderr.splitlines() if ln.startswith("HEAVY")][-1]
    return line.split()[1:]


def run(quick: bool = False, runs: int | None = None) -> dict:
    runs = max(5, runs or (5 if quick else 11))
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    results = {}
    for name, cmd in cases().items():
        time_once(cmd)  # warm the file cache (not counted)
        cpu, wall = zip(*(time_once(cmd) for _ in range(runs)))
        results[name] = {"cpu_median_s": round(statistics.median(cpu), 4), "cpu_min_s": round(min(cpu), 4),
                         "cpu_max_s": round(max(cpu), 4), "wall_median_s": round(statistics.median(wall), 4),
                         "runs": runs}
    results["import localpriv"]["heavy_modules"] = heavy_modules("import localpriv")
    results["localpriv --help"]["heavy_modules"] = heavy_modules(
        "import sys; sys.argv = ['localpriv', '--help']\nfrom localpriv.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass")
    within = {k: results[k]["cpu_median_s"] < BUDGET_CPU for k in ("import localpriv", "localpriv --help")}
    return {"budget_cpu_s": BUDGET_CPU, "within_budget": within, "cases": results, "rounds": runs,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_after": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
            "load_average_1_5_15": None if load is None else [round(x, 2) for x in load],
            "pinned_threads": PINNED, "measured": "median over fresh processes; CPU = user + sys of the child"}


if __name__ == "__main__":
    from _common import emit, machine, quick_flag
    n = next((int(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--runs=")), None)
    emit({"machine": machine(), "import_time": run(quick=quick_flag(), runs=n)})
