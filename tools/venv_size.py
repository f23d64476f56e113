"""The size of a fresh virtual environment built from a lock, per installed distribution.

``make venv-size`` builds a new virtual environment in a temporary folder from the core lock
(``requirements.lock``: what ``make demo`` installs), installs this checkout into it without its
dependencies, optionally runs a smoke command in it (``--smoke``, e.g. ``localpriv --help``), and
writes ``docs/results/venv-size.json``: the environment's total size, each distribution's size
(the files its RECORD lists) and the wall-clock seconds of the install (one sample, with the
machine's load average: on a loaded machine it says little about a fresh quiet one), and the
total less the distributions of each alternative weighed for the core (``total_mb_without``:
without matplotlib and what only it brings, without pyarrow, without both).

Usage::

    python tools/venv_size.py --lock requirements.lock --out docs/results/venv-size.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MB = 1e6
#: the alternatives weighed for the core (decision 0080): the environment's total less these
#: distributions (matplotlib with the packages only it brings into the core lock; pyarrow)
WITHOUT = {
    "matplotlib": ("matplotlib", "fonttools", "pillow", "kiwisolver", "contourpy", "cycler", "pyparsing"),
    "pyarrow": ("pyarrow",),
}

#: run inside the new environment: each distribution's size from its RECORD, as JSON
PROBE = r"""
import json, os, sys
from importlib import metadata
out = {}
for dist in metadata.distributions():
    total = 0
    for f in dist.files or ():
        p = dist.locate_file(f)
        try:
            total += os.path.getsize(p)
        except OSError:
            pass
    out[dist.metadata["Name"]] = total
print(json.dumps(out))
"""


def tree_bytes(path: Path) -> int:
    """Apparent size of every regular file below ``path`` (symlinks not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def measure(lock: Path, python: str, smoke: list[str]) -> dict:
    """Build the environment from ``lock``, install this checkout, measure, remove it."""
    tmp = Path(tempfile.mkdtemp(prefix="localpriv-venv-size-"))
    try:
        venv = tmp / "venv"
        start = time.monotonic()
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        py = str(venv / "bin" / "python")
        pip = [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-cache-dir"]
        subprocess.run([*pip, "-r", str(lock)], check=True)
        subprocess.run([*pip, "--no-deps", "--no-build-isolation", str(ROOT)], check=True, cwd=tmp)
        seconds = time.monotonic() - start
        smoke_ok = None
        if smoke:
            res = subprocess.run([str(venv / "bin" / smoke[0]), *smoke[1:]], cwd=tmp, capture_output=True, text=True)
            smoke_ok = res.returncode == 0
        sizes = json.loads(subprocess.run([py, "-c", PROBE], check=True, capture_output=True, text=True).stdout)
        total = tree_bytes(venv)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    packages = {name: round(b / MB, 1) for name, b in sorted(sizes.items(), key=lambda kv: -kv[1])}
    groups = {**WITHOUT, "pyarrow+matplotlib": WITHOUT["pyarrow"] + WITHOUT["matplotlib"]}
    without = {name: round((total - sum(sizes.get(d, 0) for d in dists)) / MB, 1) for name, dists in groups.items()}
    return {
        "lock": lock.name,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "total_mb": round(total / MB, 1),
        "packages_mb": packages,
        "total_mb_without": without,
        "installer_mb": round(sum(sizes.get(n, 0) for n in ("pip", "setuptools", "wheel")) / MB, 1),
        "install_seconds": round(seconds, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "smoke": " ".join(smoke) or None,
        "smoke_ok": smoke_ok,
        "note": "one install from the package index as configured, no pip cache; its time is one sample",
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lock", type=Path, default=ROOT / "requirements.lock")
    ap.add_argument("--out", type=Path, default=ROOT / "docs/results/venv-size.json")
    ap.add_argument("--python", default=sys.executable, help="the interpreter the environment is made from")
    ap.add_argument("--smoke", default="localpriv --help",
                    help="a command run in the new environment (empty: none)")
    args = ap.parse_args(argv)
    result = measure(args.lock.resolve(), args.python, args.smoke.split())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, args.out)
    print(f"{result['lock']}: {result['total_mb']} MB in {result['install_seconds']} s -> {args.out}")


if __name__ == "__main__":
    main()
