"""Peak memory of the data path at 10^7 and 10^8 values (issue: nothing lost, nothing misread).

Each step runs as its own process (``localpriv perturb`` / ``localpriv aggregate``, and a
hand-written DuckDB ``GROUP BY`` for comparison); its peak resident memory comes from ``wait4``'s
``ru_maxrss`` of that child alone, its CPU time from the same ``rusage``. The data are k-RR reports
on 0..99 (8-byte reports; SHE or unary encodings write wider reports in smaller blocks, see
``localpriv.data.reports.block_size``). Files go to a temporary folder that is removed afterwards.

Run: ``python benchmarks/memory.py [--quick]`` (``--quick``: 10^6 and 10^7). Prints JSON.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import emit, machine, now, quick_flag, run_measured  # noqa: E402

# `make bench-memory` runs this through run_all.py, which writes benchmarks/results-memory.json

BIN = Path(sys.executable).parent / "localpriv"


def _run(cmd: list[str], env=None) -> dict:
    code, wall, cpu, peak, _out, err = run_measured(cmd, env)
    return {"cmd": " ".join(Path(c).name if i == 0 else c for i, c in enumerate(cmd)),
            "exit": code, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "peak_rss_mib": round(peak, 1), "stderr": err.strip()[-300:]}


def _values(path: Path, n: int) -> None:
    """Write n values 0..99 to Parquet in chunks (the generator itself stays small)."""
    code = (
        "import numpy as np, pyarrow as pa, pyarrow.parquet as pq, sys\n"
        "n = int(sys.argv[2]); rng = np.random.default_rng(0); chunk = 1 << 22\n"
        "w = pq.ParquetWriter(sys.argv[1], pa.schema([('age', pa.int64())]))\n"
        "for s in range(0, n, chunk):\n"
        "    w.write_table(pa.table({'age': rng.integers(0, 100, min(chunk, n - s))}))\n"
        "w.close()\n")
    subprocess.run([sys.executable, "-c", code, str(path), str(n)], check=True)


def run(quick: bool = False) -> dict:
    sizes = [10 ** 6, 10 ** 7] if quick else [10 ** 7, 10 ** 8]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = {"method": "one process per step, started from a small spawner process; peak RSS = ru_maxrss of "
                     "that process (wait4), not inherited from the benchmark's own",
           "started": now(), "load_before": os.getloadavg(), "sizes": {}}
    tmp = Path(tempfile.mkdtemp(prefix="localpriv-mem-"))
    try:
        for n in sizes:
            row = {}
            vals = tmp / "values.parquet"
            _values(vals, n)
            for fmt in ("parquet", "csv"):
                rep = tmp / f"reports.{fmt}"
                row[f"perturb -> {fmt}"] = _run([str(BIN), "perturb", str(vals), "-o", str(rep), "-m",
                                                 "krr(eps=1.0)", "-d", "0..99", "--seed", "1"], env)
                row[f"aggregate {fmt} (--memory-limit 256MB)"] = _run(
                    [str(BIN), "aggregate", str(rep), "-o", str(tmp / "counts.parquet"),
                     "--memory-limit", "256MB"], env)
                reader = "read_parquet" if fmt == "parquet" else "read_csv"
                opts = ", comment='#', header=true, delim=',', quote='\"'" if fmt == "csv" else ""
                sql = f"SELECT mechanism, report, COUNT(*) FROM {reader}('{rep}'{opts}) GROUP BY ALL"
                row[f"hand-written DuckDB SQL on {fmt}"] = _run(
                    [sys.executable, "-c", "import duckdb,sys; c=duckdb.connect(); "
                     "c.execute(\"SET memory_limit='256MB'\"); print(len(c.execute(sys.argv[1]).fetchall()))",
                     sql], env)
                row[f"{fmt} file MiB"] = round(rep.stat().st_size / 2 ** 20, 1)
                rep.unlink()
            out["sizes"][str(n)] = row
            print(f"# memory: n={n} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out["load_after"] = os.getloadavg()
    out["finished"] = now()
    return out


if __name__ == "__main__":
    emit({"machine": machine(), "memory": run(quick=quick_flag())})
