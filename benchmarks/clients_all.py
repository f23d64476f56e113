"""Client throughput in one run, every language side by side: reports per CPU second on one core.

Per mechanism of the portable set (k-RR, OUE, OLH, SS, HR, pm, sw, duchi, geometric,
planar-geometric; k = 100, the planar one on a 10 x 10 grid, eps = 1) and per client:

* ``python-portable``: the portable protocol's scalar client (``perturb_lines``, what
  ``localpriv client`` runs), words from the operating system (``SystemSource``), each report
  serialized with ``json.dumps``;
* ``python-vectorized``: ``Mechanism.sample`` over all inputs at once with
  :func:`localpriv.utils.rng.secure_generator` (ChaCha20);
* ``javascript``: ``benchmarks/clients_js.mjs`` (``crypto.getRandomValues``), called with
  ``--n N --rounds 1`` and its JSON parsed;
* ``java``: ``org.localpriv.client.Bench --source secure`` (compiled once with ``javac --release 17``),
  called with ``--n N --rounds 1 --warmup N`` and its JSON parsed.

Rules:

* **One core.** Every client runs as a child process pinned with ``taskset -c 0`` where it exists.
  Reports per CPU second are of each child's own CPU clock around its sampling loop (Python
  ``process_time``, Node ``process.cpuUsage``, Java the thread's CPU time); the child's whole CPU time
  (``getrusage(RUSAGE_CHILDREN)`` deltas: start-up, compilation, the mechanisms outside this set)
  is recorded too.
* **Inputs.** Every client draws its own ``n`` input values, uniform on ``0..99``, before timing.
* **Interleaved rounds.** Each round runs every client once, in turn; medians over rounds with
  min and max. Ratios are of the medians: a client's reports per CPU second over the Python
  portable client's and over the vectorized Python client's.
* **Bytes per report**: the report's JSON text as posted (``json.dumps`` of the portable report,
  measured on the Python portable client's reports; the JS and Java figures are kept per client).
* **Sizes.** Full run: ``n = 50,000`` reports per mechanism per round for the scalar clients
  (Python portable, JavaScript, Java; Java also warms up on ``n`` reports per mechanism first),
  ``n = 300,000`` for the vectorized one (one call), 9 rounds: a round is ~15 CPU seconds (the Python
  portable client's share is the largest), so the run takes about 2-3 minutes of wall time on a quiet
  2-core machine and at most ~5. ``--quick``: n = 500 (vectorized 5,000), 2 rounds; its JSON is
  labelled ``"quick": true`` and its numbers only show that the benchmark runs.
* **Warm-up.** The Python clients first draw 1,000 untimed reports per mechanism (a process's first
  OLH call sets up its hashing, a one-off cost per process that would otherwise be spread over the
  ``n`` reports); Java warms up on ``n`` reports per mechanism (its JIT); the JavaScript bench has no
  warm-up option and is timed from its first report (V8 compiles the hot loop within it).

Run ``python benchmarks/clients_all.py [--quick] [--rounds N] [--out FILE]`` (``make bench-clients-all``);
writes ``benchmarks/results-clients-all.json`` atomically.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load, machine, now, quick_flag, rounds_arg  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
JAVA = ROOT / "clients" / "java"
OUT = HERE / "results-clients-all.json"
DOMAIN = "0..99"
# name -> the portable spec on the domain 0..99 (k = 100 where it applies)
SPECS = {
    "krr": "krr(eps=1.0)", "oue": "oue(eps=1.0)", "olh": "olh(eps=1.0)", "ss": "ss(eps=1.0)",
    "hr": "hr(eps=1.0)", "pm": "pm(eps=1.0)", "sw": "sw(eps=1.0)", "duchi": "duchi(eps=1.0)",
    "geometric": "geometric(eps=1.0,lo=0,hi=99)",
    "planar-geometric": "planar-geometric(eps=1.0,nrows=10,ncols=10,cell_km=1.0)",
}
CLIENTS = ("python-portable", "python-vectorized", "javascript", "java")
WARMUP = 1_000  # untimed reports per mechanism before the Python clients' timed call
MAX_N = 1_000_000  # reports per mechanism per round (the scalar Python client keeps every report text)
MAX_ROUNDS = 100


def _name(spec: str) -> str:
    return spec.split("(", 1)[0]


def _arg(name: str) -> str | None:
    args = sys.argv[1:]
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return None


# ------------------------------------------------------------------------------- the Python children

def _child_portable(n: int) -> dict:
    """Python portable scalar client: n reports per mechanism, CPU seconds of the loop and bytes."""
    import warnings

    from localpriv.mechanisms.portable import SystemSource, perturb_lines

    lines = [str(v) for v in _inputs(n)]
    rows = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the metric mechanisms' large-LDP-eps warning
        for name, spec in SPECS.items():
            perturb_lines(spec, DOMAIN, lines[:WARMUP], SystemSource())  # untimed warm-up
            c, w = time.process_time(), time.perf_counter()
            run = perturb_lines(spec, DOMAIN, lines, SystemSource())
            texts = [json.dumps(r) for r in run.reports]
            cpu, wall = time.process_time() - c, time.perf_counter() - w
            rows[name] = {"canonical": str(run.mechanism), "cpu_s": cpu, "wall_s": wall,
                          "bytes_per_report": sum(map(len, texts)) / n}
    return rows


def _inputs(n: int) -> list[int]:
    """n input values uniform on 0..99 (the operating system's randomness; not timed)."""
    import numpy as np

    return [int(v) for v in np.random.default_rng().integers(0, 100, n)]


def _child_vectorized(n: int) -> dict:
    """Vectorized Python client: ``Mechanism.sample`` on n inputs with the secure generator."""
    import warnings

    import numpy as np

    from localpriv.mechanisms.portable import parse_portable
    from localpriv.utils.rng import secure_generator

    x = np.asarray(_inputs(n), dtype=np.int64)
    rows = {}
    for name, spec in SPECS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the metric mechanisms' large-LDP-eps warning
            mech = parse_portable(spec, DOMAIN)
        rng = secure_generator()
        mech.sample(x[:WARMUP], rng)  # untimed warm-up
        c, w = time.process_time(), time.perf_counter()
        out = mech.sample(x, rng)
        cpu, wall = time.process_time() - c, time.perf_counter() - w
        rows[name] = {"canonical": str(mech), "cpu_s": cpu, "wall_s": wall, "report_dtype": str(out.dtype)}
    return rows


def _child(kind: str, n: int) -> None:
    if kind not in ("python-portable", "python-vectorized"):
        raise SystemExit(f"error: --child is python-portable or python-vectorized, got {kind!r}")
    os.environ.setdefault("LOCALPRIV_THREADS", "1")
    rows = _child_portable(n) if kind == "python-portable" else _child_vectorized(n)
    sys.stdout.write(json.dumps({"n": n, "mechanisms": rows}) + "\n")


# ------------------------------------------------------------------------------------- the parent

def _children_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def _run(cmd: list[str], env: dict | None = None) -> tuple[dict, float, float]:
    """(parsed JSON on stdout, child CPU seconds, wall seconds) of one child process."""
    k, w = _children_cpu(), time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    cpu, wall = _children_cpu() - k, time.perf_counter() - w
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: {' '.join(cmd[:4])} failed: {tail[:300]}")
    return (json.loads(res.stdout) if res.stdout.lstrip().startswith("{") else {}), cpu, wall


def _version(cmd: list[str]) -> str | None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError:
        return None
    text = (res.stdout or res.stderr).strip().splitlines()
    return text[0] if text else None


def _rows_by_name(doc: dict, rate) -> dict:
    """name -> {reports_per_cpu_s, bytes_per_report, canonical} from a JS or Java bench document."""
    out = {}
    for m in doc.get("mechanisms") or []:
        name = _name(str(m.get("canonical") or m.get("spec")))
        if name in SPECS:
            out[name] = {"reports_per_cpu_s": rate(m), "bytes_per_report": m.get("bytes_per_report"),
                         "canonical": m.get("canonical")}
    return out


def js_rows(doc: dict) -> dict:
    """The rows of the set from ``clients_js.mjs``'s JSON (one round: its median is that round)."""
    return _rows_by_name(doc, lambda m: m["reports_per_s_cpu"])


def java_rows(doc: dict) -> dict:
    """The rows of the set from ``Bench``'s JSON (one round: its median is that round)."""
    return _rows_by_name(doc, lambda m: m["reports_per_cpu_second"]["median"])


def _spread(v: list[float]) -> dict:
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def _check_args(argv: list[str]) -> None:
    """Refuse options this script does not know (one line)."""
    flags, valued = {"--quick"}, {"--rounds", "--n", "--out", "--child"}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in valued:
            if i + 1 >= len(argv):
                raise SystemExit(f"error: {a} needs a value")
            i += 2
        elif a in flags:
            i += 1
        else:
            raise SystemExit(f"error: unknown option {a!r} (known: --quick, --rounds N, --n N, --out FILE)")


def main() -> None:
    _check_args(sys.argv[1:])
    if _arg("--child"):
        _child(str(_arg("--child")), int(_arg("--n") or 1000))
        return
    quick = quick_flag()
    rounds = rounds_arg(2 if quick else 9)
    if rounds > MAX_ROUNDS:
        raise SystemExit(f"error: --rounds must be at most {MAX_ROUNDS}")
    n, n_vec = (500, 5_000) if quick else (50_000, 300_000)
    n = int(_arg("--n") or n)
    if not 1 <= n <= MAX_N or not 1 <= n_vec <= 10 * MAX_N:
        raise SystemExit(f"error: --n must be in 1..{MAX_N:,} (reports per mechanism per round)")
    out = Path(_arg("--out") or OUT)
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    node, javac, java = shutil.which("node"), shutil.which("javac"), shutil.which("java")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
               LOCALPRIV_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    started, load_before = now(), load()
    per: dict = {c: {name: {"rate": [], "bytes": None, "canonical": None} for name in SPECS} for c in CLIENTS}
    child_cpu: dict = {c: [] for c in CLIENTS}
    skipped: dict = {}
    if node is None:
        skipped["javascript"] = "node not found"
    if javac is None or java is None:
        skipped["java"] = "javac / java not found"
    with tempfile.TemporaryDirectory() as tmp:
        if "java" not in skipped:
            files = sorted(str(p) for sub in ("src", "bench") for p in (JAVA / sub).rglob("*.java"))
            subprocess.run([str(javac), "--release", "17", "-d", tmp, *files], check=True)
        js_out = Path(tmp) / "js.json"
        commands = {
            "python-portable": [*pin, sys.executable, __file__, "--child", "python-portable", "--n", str(n)],
            "python-vectorized": [*pin, sys.executable, __file__, "--child", "python-vectorized", "--n", str(n_vec)],
            "javascript": [*pin, str(node), str(HERE / "clients_js.mjs"), "--n", str(n), "--rounds", "1",
                           "--out", str(js_out)],
            "java": [*pin, str(java), "-XX:+UseSerialGC", "-cp", tmp, "org.localpriv.client.Bench", "--n", str(n),
                     "--rounds", "1", "--warmup", str(n), "--source", "secure"],
        }
        for _ in range(rounds):
            for client in CLIENTS:
                if client in skipped:
                    continue
                doc, cpu, _wall = _run(commands[client], env)
                child_cpu[client].append(cpu)
                if client.startswith("python"):
                    count = n if client == "python-portable" else n_vec
                    rows = {k: {"reports_per_cpu_s": count / v["cpu_s"] if v["cpu_s"] > 0 else None,
                                "bytes_per_report": v.get("bytes_per_report"), "canonical": v["canonical"]}
                            for k, v in doc["mechanisms"].items()}
                elif client == "javascript":
                    rows = js_rows(json.loads(js_out.read_text()))
                else:
                    rows = java_rows(doc)
                for name, r in rows.items():
                    if r["reports_per_cpu_s"] is not None:
                        per[client][name]["rate"].append(r["reports_per_cpu_s"])
                    per[client][name]["bytes"] = r["bytes_per_report"]
                    per[client][name]["canonical"] = r["canonical"]
    mechanisms = []
    for name, spec in SPECS.items():
        row: dict = {"name": name, "spec": spec, "canonical": per["python-portable"][name]["canonical"],
                     "bytes_per_report": per["python-portable"][name]["bytes"], "clients": {}}
        for client in CLIENTS:
            e = per[client][name]
            if not e["rate"]:
                row["clients"][client] = {"skipped": skipped.get(client, "not offered by this client")}
                continue
            row["clients"][client] = {"reports_per_cpu_s": _spread(e["rate"]), "bytes_per_report": e["bytes"]}
        for ref, key in (("python-portable", "vs_python_portable"), ("python-vectorized", "vs_python_vectorized")):
            row[key] = {c: _ratio(g_median(row["clients"][c]), g_median(row["clients"].get(ref)))
                        for c in CLIENTS}
        mechanisms.append(row)
    doc = {
        "benchmark": "clients_all",
        "quick": quick,
        "note": ("smoke run: the numbers only show that the benchmark runs; measure on a quiet machine with "
                 "make bench-clients-all") if quick else None,
        "machine": machine(),
        "versions": {"python": sys.version.split()[0], "node": _version([str(node), "--version"]) if node else None,
                     "java": _version([str(java), "-version"]) if java else None},
        "pinned": " ".join(pin) or None,
        "started": started,
        "load_before": load_before,
        "load_after": load(),
        "rounds": rounds,
        "n": n,
        "n_vectorized": n_vec,
        "domain": DOMAIN,
        "clients": list(CLIENTS),
        "skipped": skipped,
        "child_cpu_s": {c: (_spread(v) if v else None) for c, v in child_cpu.items()},
        "mechanisms": mechanisms,
    }
    tmp_out = out.with_name(out.name + ".tmp")
    tmp_out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    tmp_out.replace(out)
    print(f"wrote {out}")


def _ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` (how many times ``b``'s reports per CPU second), ``None`` if either is missing."""
    return a / b if a and b else None


def g_median(e) -> float | None:
    """The median reports per CPU second of a client entry, ``None`` if it was not measured."""
    if not isinstance(e, dict) or not isinstance(e.get("reports_per_cpu_s"), dict):
        return None
    return e["reports_per_cpu_s"]["median"]


if __name__ == "__main__":
    main()
