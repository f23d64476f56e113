"""Throughput of the Java client (clients/java): reports per second per mechanism on one core, bytes
and words per report.

The Java sources are compiled with ``javac --release 17`` into a temporary directory and
``org.localpriv.client.Bench`` runs once per word source, pinned to one core (``taskset -c 0`` where
it exists) with the serial collector:

* ``secure``: :class:`SecureRandomSource` as devices use it (256 words per ``nextBytes``);
* ``secure-unbuffered``: one ``SecureRandom.nextInt()`` per word;
* ``chacha``: the test-only ChaCha20 stream (the cost of the samplers on a cheap word source).

Each run times the mechanisms of ``Bench.SPECS`` on the domain ``0..99`` (k = 100), ``n`` reports per
mechanism per round, in interleaved rounds after a warm-up; reports per second are of the
measuring thread's CPU time (and wall time), medians with min and max. Bytes per report are the
report's JSON text as posted in a group. ``--quick`` is a smoke run (small n, two rounds): its
numbers only show that the benchmark runs.

Run ``python benchmarks/java_client.py [--quick] [--rounds N] [--out FILE]``; one JSON document.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load, machine, now, quick_flag, rounds_arg  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
JAVA = ROOT / "clients" / "java"
SOURCES = ("secure", "secure-unbuffered", "chacha")


def _out_arg() -> Path | None:
    args = sys.argv[1:]
    for i, a in enumerate(args):
        if a == "--out" and i + 1 < len(args):
            return Path(args[i + 1])
    return None


def _java_version() -> str:
    res = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True)
    return res.stderr.splitlines()[0] if res.stderr else ""


def main() -> None:
    if shutil.which("javac") is None or shutil.which("java") is None:
        raise SystemExit("error: javac and java are needed (make java-client installs openjdk-17-jdk-headless)")
    quick = quick_flag()
    rounds = rounds_arg(2 if quick else 7)
    n, warmup = (2_000, 2_000) if quick else (200_000, 100_000)
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    started, load_before = now(), load()
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = sorted(str(p) for sub in ("src", "bench") for p in (JAVA / sub).rglob("*.java"))
        subprocess.run(["javac", "--release", "17", "-d", tmp, *files], check=True)
        for source in SOURCES:
            cmd = [*pin, "java", "-XX:+UseSerialGC", "-cp", tmp, "org.localpriv.client.Bench", "--n", str(n),
                   "--rounds", str(rounds), "--warmup", str(warmup), "--source", source]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[source] = json.loads(res.stdout)
    doc = {
        "machine": machine(),
        "java": _java_version(),
        "pinned": " ".join(pin) or None,
        "quick": quick,
        "note": ("smoke run: the numbers only show that the benchmark runs; measure on a quiet machine with "
                 "make bench-java-client") if quick else None,
        "started": started,
        "load_before": load_before,
        "load_after": load(),
        "benchmark": "java_client",
        "k": 100,
        "n": n,
        "rounds": rounds,
        "warmup": warmup,
        "runs": runs,
    }
    text = json.dumps(doc, indent=2) + "\n"
    out = _out_arg()
    if out is None:
        sys.stdout.write(text)
    else:
        tmp_out = out.with_name(out.name + ".tmp")
        tmp_out.write_text(text, encoding="utf-8")
        tmp_out.replace(out)


if __name__ == "__main__":
    main()
