"""The core lock and the optional groups: the locks agree with each other and with pyproject, the
library and the command line work without the extras, and a missing extra is named in one line."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from localpriv.utils.errors import EXTRAS, missing_extra

ROOT = Path(__file__).resolve().parents[1]
GROUP_LOCKS = {"duckdb": "requirements-duckdb.lock", "parquet": "requirements-parquet.lock",
               "plots": "requirements-plots.lock", "fast": "requirements-fast.lock",
               "service": "requirements-service.lock", "spark": "requirements-spark.lock",
               "geo": "requirements-geo.lock", "test": "requirements-test.lock",
               "docs": "requirements-docs.lock"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not pinned with =="
            out[_norm(name)] = version
    return out


def _names(reqs: list[str]) -> set[str]:
    return {_norm(re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0]) for r in reqs}


PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CORE = _pins(ROOT / "requirements.lock")


def test_core_lock_pins_the_core_dependencies_and_no_extra() -> None:
    assert _names(PROJECT["dependencies"]) <= set(CORE)
    for group in ("duckdb", "parquet", "plots", "fast", "service", "spark", "geo", "test"):
        assert not _names(PROJECT["optional-dependencies"][group]) & set(CORE), group


@pytest.mark.parametrize("group,lock", sorted(GROUP_LOCKS.items()))
def test_each_group_has_a_lock_that_agrees_with_the_core(group: str, lock: str) -> None:
    pins = _pins(ROOT / lock)
    deps = _names(PROJECT["optional-dependencies"][group])
    assert {d for d in deps if d != "mkdocstrings"} <= set(pins), f"{lock} misses some of [{group}]"
    for name, version in pins.items():
        assert CORE.get(name, version) == version, f"{lock} moves the core pin of {name}"


def test_locks_agree_with_each_other() -> None:
    seen: dict[str, tuple[str, str]] = {}
    for lock in [*GROUP_LOCKS.values(), "requirements-bench.lock"]:
        for name, version in _pins(ROOT / lock).items():
            if name in seen:
                assert seen[name][0] == version, f"{name}: {seen[name][1]} and {lock} disagree"
            seen.setdefault(name, (version, lock))


def test_missing_extra_names_the_group() -> None:
    err = missing_extra(ModuleNotFoundError("No module named 'ot'", name="ot"))
    assert err is not None and "pip install 'localpriv[geo]'" in str(err)
    assert missing_extra(ModuleNotFoundError("x", name="numpy")) is None
    assert missing_extra(ValueError("x")) is None
    assert set(EXTRAS.values()) <= set(GROUP_LOCKS)


#: run in a fresh interpreter where every extra's modules fail to import
BLOCKED = "import sys\nfor m in {mods!r}: sys.modules[m] = None\n"


def _run_without_extras(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    mods = sorted(EXTRAS)
    return subprocess.run([sys.executable, "-c", BLOCKED.format(mods=mods) + code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)


def test_library_and_cli_work_without_the_extras(tmp_path: Path) -> None:
    (tmp_path / "v.csv").write_text("age\n" + "\n".join(str(i % 10) for i in range(300)) + "\n")
    code = """
from localpriv.cli.main import main
import localpriv, localpriv.data.aggregate, localpriv.inference
for argv in (["perturb", "v.csv", "-o", "r.csv", "-m", "krr(eps=2.0)", "-d", "0..9", "--seed", "1"],
             ["aggregate", "r.csv", "-o", "c.csv"],
             ["estimate", "c.csv", "-d", "0..9", "--estimator", "inv-n", "-o", "est.json"],
             ["query", "est.json", "--range", "value=2..5"]):
    try:
        main(argv)
    except SystemExit as exc:
        assert not exc.code, (argv, exc.code)
print("ok")
"""
    res = _run_without_extras(code, tmp_path)
    assert res.returncode == 0 and res.stdout.rstrip().endswith("ok"), res.stderr[-2000:]


def test_commands_that_need_an_extra_say_which_in_one_line(tmp_path: Path) -> None:
    code = """
from localpriv.cli.main import main
main(["serve", "--port", "1"])
"""
    res = _run_without_extras(code, tmp_path)
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("error: ") and "pip install 'localpriv[service]'" in res.stderr


def test_every_lock_is_a_prerequisite_of_a_stamp_and_demo_needs_only_the_core() -> None:
    """A changed lock refreshes the environment: each lock is a prerequisite of the stamp that
    installs it; make demo depends on the core stamp only, make test and lint on all groups."""
    make = (ROOT / "Makefile").read_text()
    extra = re.search(r"^EXTRA_LOCKS\s*:=\s*(.+)$", make, re.M)
    assert extra is not None
    rules = {m.group(1): m.group(2).split() for m in re.finditer(r"^(\S+):\s*(.*)$", make, re.M)}
    assert "requirements.lock" in rules["$(STAMP)"]
    assert "$(EXTRA_LOCKS)" in rules["$(FULL_STAMP)"] and "$(STAMP)" in rules["$(FULL_STAMP)"]
    groups = ("duckdb", "parquet", "plots", "fast", "service", "spark", "geo", "test")
    assert set(extra.group(1).split()) == {f"requirements-{g}.lock" for g in groups}
    assert "requirements-docs.lock" in rules["$(DOCS_STAMP)"] and "requirements-bench.lock" in rules["$(BENCH_STAMP)"]
    assert rules["demo"] == ["$(STAMP)"]
    assert "$(FULL_STAMP)" in rules["test"] and rules["lint"] == ["$(FULL_STAMP)"]
    for lock in ROOT.glob("requirements*.lock"):
        assert lock.name in make or lock.name in extra.group(1), lock.name
