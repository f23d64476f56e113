"""The size of a fresh virtual environment built from a lock, per installed distribution.

``make venv-size`` builds a new virtual environment in a temporary folder from the core lock
(``requirements.lock``: what ``make demo`` installs), installs this checkout into it without its
dependencies, optionally runs a smoke command in it (``--smoke``, e.g. ``localpriv --help``), and
writes ``docs/results/venv-size.json``: the environment's total size, each distribution's size
(the files its RECORD lists) and the wall-clock seconds of the install (one sample, with the
machine's load average: on a loaded machine it says little about a fresh quiet one). With
``--groups`` (``parquet,plots``: the groups that left the core, decision 0085) it then installs
those groups' locks on top (``-c`` the core lock), runs the smoke command again, and adds each
group's size (``groups_mb``) and the total with each group and with all (``total_mb_with``).

Usage::

    python tools/venv_size.py --lock requirements.lock --out docs/results/venv-size.json \
        --smoke "localpriv demo --out demo-out" --groups parquet,plots
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
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MB = 1e6

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


def _lock_names(lock: Path) -> list[str]:
    """The distributions a lock pins."""
    names = []
    for line in lock.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line.split("==", 1)[0])
    return names


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def measure(lock: Path, python: str, smoke: list[str], groups: Sequence[str] = ()) -> dict:
    """Build the environment from ``lock``, install this checkout, measure; then (``groups``)
    install each group's lock on top and measure again; remove it."""
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
        extra: dict = {}
        if groups:
            locks = [ROOT / f"requirements-{g}.lock" for g in groups]
            subprocess.run([*pip, "-c", str(lock), *[a for f in locks for a in ("-r", str(f))]], check=True)
            both = json.loads(subprocess.run([py, "-c", PROBE], check=True, capture_output=True, text=True).stdout)
            sizes_n = {_norm(k): v for k, v in both.items()}
            group_bytes = {g: sum(sizes_n.get(_norm(d), 0) for d in _lock_names(f) if _norm(d) not in
                                  {_norm(k) for k in sizes}) for g, f in zip(groups, locks)}
            full = tree_bytes(venv)
            with_ok = None
            if smoke:
                res = subprocess.run([str(venv / "bin" / smoke[0]), *smoke[1:]], cwd=tmp, capture_output=True,
                                     text=True)
                with_ok = res.returncode == 0
            extra = {
                "groups": list(groups),
                "groups_mb": {g: round(b / MB, 1) for g, b in group_bytes.items()},
                "total_mb_with": {**{g: round((total + b) / MB, 1) for g, b in group_bytes.items()},
                                  "+".join(groups): round(full / MB, 1)},
                "smoke_with_groups_ok": with_ok,
                "figure_with_groups": (tmp / "demo-out" / "demo.png").exists() if smoke else None,
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    packages = {name: round(b / MB, 1) for name, b in sorted(sizes.items(), key=lambda kv: -kv[1])}
    return {
        "lock": lock.name,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "total_mb": round(total / MB, 1),
        "packages_mb": packages,
        "installer_mb": round(sum(sizes.get(n, 0) for n in ("pip", "setuptools", "wheel")) / MB, 1),
        "install_seconds": round(seconds, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "smoke": " ".join(smoke) or None,
        "smoke_ok": smoke_ok,
        "note": "one install from the package index as configured, no pip cache; its time is one sample",
        **extra,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lock", type=Path, default=ROOT / "requirements.lock")
    ap.add_argument("--out", type=Path, default=ROOT / "docs/results/venv-size.json")
    ap.add_argument("--python", default=sys.executable, help="the interpreter the environment is made from")
    ap.add_argument("--smoke", default="localpriv --help",
                    help="a command run in the new environment (empty: none)")
    ap.add_argument("--groups", default="",
                    help="optional groups measured on top, comma-separated (e.g. parquet,plots)")
    args = ap.parse_args(argv)
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    result = measure(args.lock.resolve(), args.python, args.smoke.split(), groups)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, args.out)
    print(f"{result['lock']}: {result['total_mb']} MB in {result['install_seconds']} s -> {args.out}")


if __name__ == "__main__":
    main()
