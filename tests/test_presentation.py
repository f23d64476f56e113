"""Presentation, start-up and progress: numbers, tables, --json,
--help pages, --version, docstrings, py.typed, docs/DATA.md, import hygiene, status lines."""
import inspect
import io
import json
import os
import pydoc
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import localpriv
from localpriv.cli.main import app, fmt_number
from localpriv.utils.progress import Status

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ["perturb", "aggregate", "estimate", "mechanism", "analyze", "reproduce", "demo", "list"]


def invoke(*args, **kw):
    r = CliRunner().invoke(app, list(args), prog_name="localpriv", **kw)
    return r


# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, text", [
    (0.05000000000000071, "0.05"), (1.9999999999999996, "2"), (1.0000000000000002, "1"),
    (7818.5456196599125, "7,819"), (46.50922287123314, "46.51"), (0.010101010101, "0.0101"),
    (4.95, "4.95"), (12345678.9, "1.235e+07"), (0.00001234, "1.234e-05"), (0.0, "0"), (-2.5, "-2.5"),
    (float("inf"), "inf"), (True, "yes"), (False, "no"), (48842, "48,842"), (np.int64(7), "7"),
    (np.float64(0.30000000000000004), "0.3"),
])
def test_numbers_have_sensible_precision(value, text):
    assert fmt_number(value) == text


def test_mechanism_prints_a_rounded_table_and_exact_json():
    r = invoke("mechanism", "krr(k=10,eps=1.0)", "-d", "0..9")
    assert r.exit_code == 0, r.output
    assert "epsilon_geo (from channel)" in r.output and "1.0000000000000002" not in r.output
    assert "┌" in r.output and "46.51" in r.output  # a Rich table, 4 significant digits
    r = invoke("mechanism", "krr(k=10,eps=1.0)", "-d", "0..9", "--json", "--show")
    rep = json.loads(r.stdout)
    assert rep["spec"] == "krr(k=10,eps=1.0)" and isinstance(rep["epsilon_ldp (from channel)"], float)
    assert rep["epsilon_geo (from channel)"] == pytest.approx(1.0, abs=1e-12)
    assert np.asarray(rep["channel"]).shape == (10, 10)


def test_analyze_prints_a_table_and_json():
    r = invoke("analyze", "-m", "krr(eps=1.0)", "-d", "0..9")
    assert r.exit_code == 0, r.output
    assert "┌" in r.output and "identifiable" in r.output and "yes" in r.output
    assert "46.50922287123314" not in r.output and "46.51" in r.output
    rep = json.loads(invoke("analyze", "-m", "krr(eps=1.0)", "-d", "0..9", "--json").output)
    assert rep["INV error bound (Prop. 7.6, k-RR): n*E||v-theta||^2 <="] == pytest.approx(46.50922287123314)


# --------------------------------------------------------------------------------------------
# --help, --version
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [None] + COMMANDS)
def test_help_pages_name_values_plainly(command):
    r = invoke(*([command] if command else []), "--help")
    assert r.exit_code == 0, r.output
    for placeholder in ("<bool>", "<str>", "<path>", "<int", "<float", "{"):
        assert placeholder not in r.output, (command, placeholder)
    assert r.output.startswith("Usage: localpriv")
    assert "╭" not in r.output  # plain help pages (the Rich ones cost more than the start-up budget)


def test_help_usage_line_and_demo_options():
    assert "Usage: localpriv perturb [OPTIONS] INPUT\n" in invoke("perturb", "--help").output
    assert "Usage: localpriv aggregate [OPTIONS] INPUTS...\n" in invoke("aggregate", "--help").output
    page = invoke("demo", "--help").output
    assert "-o, --out PATH" in page and "folder of the outputs" in page
    assert "--seed INTEGER" in page and "seed of the random generator" in page


def test_version_matches_the_package_and_pyproject():
    r = invoke("--version")
    assert r.exit_code == 0
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert r.output.strip() == f"localpriv {localpriv.__version__}" == f"localpriv {version}"


# --------------------------------------------------------------------------------------------
# Docstrings, type hints, py.typed, docs
# --------------------------------------------------------------------------------------------
def _public_functions():
    for name in localpriv.__all__:
        obj = getattr(localpriv, name)
        if inspect.isfunction(obj):
            yield name, obj


@pytest.mark.parametrize("name", [n for n, _ in _public_functions()])
def test_public_functions_list_their_parameters(name):
    func = getattr(localpriv, name)
    params = [p for p in inspect.signature(func).parameters.values()]
    if not params:
        return
    doc = inspect.getdoc(func) or ""
    assert "Parameters\n----------" in doc, name
    section = doc.split("Parameters\n----------", 1)[1]
    for p in params:
        shown = ("**" if p.kind is p.VAR_KEYWORD else "*" if p.kind is p.VAR_POSITIONAL else "") + p.name
        assert any(line.startswith(shown) for line in section.splitlines()), (name, p.name)


def test_help_of_estimate_lists_its_settings():
    text = pydoc.render_doc(localpriv.estimate, renderer=pydoc.plaintext)
    for setting in ("delta", "stop", "max_iter", "accelerate", "strength", "theta0", "progress", "method"):
        assert f"``{setting}``" in text or f"{setting} :" in text, setting
    assert "help(localpriv.ibu)" in text


@pytest.mark.parametrize("module", ["localpriv.data.reports", "localpriv.data.freewill", "localpriv.utils.progress"])
def test_public_api_of_our_modules_is_typed(module):
    import importlib
    mod = importlib.import_module(module)
    names = [n for n in mod.__all__ if inspect.isfunction(getattr(mod, n))
             and getattr(mod, n).__module__ == module and getattr(localpriv, n, None) is getattr(mod, n)]
    assert names
    for n in names:
        sig = inspect.signature(getattr(mod, n))
        assert sig.return_annotation is not inspect.Signature.empty, n
        for p in sig.parameters.values():
            assert p.annotation is not inspect.Parameter.empty, (n, p.name)


def test_package_is_marked_typed():
    assert (Path(localpriv.__file__).parent / "py.typed").is_file()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in data["tool"]["setuptools"]["package-data"]["localpriv"]


def test_data_docs_list_every_bundled_file():
    text = (ROOT / "docs" / "DATA.md").read_text()
    bundled = sorted(p.name for p in (Path(localpriv.__file__).parent / "data" / "bundled").iterdir() if p.is_file())
    assert bundled and all(f"`{name}`" in text for name in bundled), bundled
    nets = sorted(p.name for p in (Path(localpriv.__file__).parent / "multiattr" / "networks").glob("*.bif"))
    assert all(name in text for name in nets), nets


def test_plot_axis_names_the_column_and_its_unit(tmp_path, monkeypatch):
    from localpriv.data.reports import perturb, write_reports
    from localpriv.domains import IntegerDomain
    from localpriv.inference import plotting
    dom = IntegerDomain(0, 9)
    write_reports(perturb(np.arange(10).repeat(50), "krr(eps=2.0)", np.random.default_rng(0), dom),
                  tmp_path / "r.parquet")
    seen = {}

    def keep(fig, path):
        seen["xlabel"] = fig.axes[0].get_xlabel()
        return Path(path)

    monkeypatch.setattr(plotting, "save", keep)
    r = invoke("estimate", str(tmp_path / "r.parquet"), "-d", "0..9", "-e", "ibu", "--plot", str(tmp_path / "p.png"),
               "--label", "age (years)")
    assert r.exit_code == 0, r.output
    assert seen["xlabel"] == "age (years)"


def test_plot_axis_defaults_to_the_recorded_column(tmp_path, monkeypatch):
    """Without --label the axis names the values' column that perturb recorded in the reports
    (format version 2), '$' escaped so that matplotlib draws it as text; the table printed to the
    terminal has 4 significant digits."""
    import pandas as pd

    from localpriv.inference import plotting
    pd.DataFrame({"id": range(400), "income $k": np.arange(400) % 10}).to_csv(tmp_path / "v.csv", index=False)
    r = invoke("perturb", str(tmp_path / "v.csv"), "-o", str(tmp_path / "r.csv"), "-m", "krr(k=10,eps=2.0)",
               "-d", "0..9", "--column", "income $k", "--seed", "1")
    assert r.exit_code == 0, r.output
    seen = {}

    def keep(fig, path):
        seen["xlabel"] = fig.axes[0].get_xlabel()
        return Path(path)

    monkeypatch.setattr(plotting, "save", keep)
    r = invoke("estimate", str(tmp_path / "r.csv"), "-d", "0..9", "-e", "ibu", "--plot", str(tmp_path / "p.png"))
    assert r.exit_code == 0, r.output
    assert seen["xlabel"] == r"income \$k"
    rows = [line.split() for line in r.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 10
    assert all(len(p.replace("0.", "").replace(".", "").lstrip("0").rstrip("0")) <= 4 for _, p in rows), rows


# --------------------------------------------------------------------------------------------
# Start-up: imports on first use (no timing here: benchmarks/import_time.py measures)
# --------------------------------------------------------------------------------------------
HEAVY = ("numpy", "pandas", "duckdb", "pyarrow", "scipy", "matplotlib")


def _loaded(code: str) -> set[str]:
    probe = code + "\nimport sys\nsys.stderr.write('LOADED ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, COLUMNS="100"))
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED ")][-1]
    return set(line.split()[1:])


def test_import_localpriv_loads_nothing_heavy():
    mods = _loaded("import localpriv\nfrom localpriv import LocalPrivError, PrivacyWarning")
    assert "localpriv" in mods
    assert not {m for m in mods if m.split(".")[0] in HEAVY or m == "scipy.optimize"}


def test_help_loads_nothing_heavy():
    mods = _loaded("from localpriv.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass")
    assert "localpriv.cli.main" in mods
    assert not {m for m in mods if m.split(".")[0] in HEAVY}
    assert "typer.rich_utils" not in mods and "rich.markdown" not in mods


def test_names_still_resolve_on_first_use():
    assert localpriv.parse("krr(k=3,eps=1.0)").k == 3
    assert localpriv.LocalPrivError is __import__("localpriv.utils.validation", fromlist=["x"]).LocalPrivError


# --------------------------------------------------------------------------------------------
# Progress: a status line every ~10 s when stderr is no terminal
# --------------------------------------------------------------------------------------------
def _split_status(line: str) -> tuple[str, str]:
    """A status line's progress text and its elapsed field (which only echoes the test's fake
    clock: no real time is read or asserted in these tests)."""
    head, _, elapsed = line.rpartition(", ")
    return head, elapsed


def test_status_lines_follow_the_interval():
    """Deterministic: a fake clock advanced by the test decides when a line is due."""
    from localpriv.utils.progress import _seconds
    now = [0.0]
    buf = io.StringIO()
    with Status("reproduce x", "loading", stream=buf, tty=False, interval=10, clock=lambda: now[0],
                background=False) as st:
        st.tick()
        assert buf.getvalue() == ""  # nothing before the first interval
        for _ in st.track(range(4), "eps"):
            for _ in st.track([1, 2, 3], "runs"):
                now[0] += 1.0
    lines = buf.getvalue().splitlines()
    assert [_split_status(line) for line in lines] == [("reproduce x: loading, eps 3/4, runs 1/3",
                                                         f"{_seconds(10.0)} elapsed")]
    assert st.lines == 1 and st.tasks == []


def test_status_counts_without_a_total_and_stages():
    """Deterministic: the fake clock is set by the test; the lines echo its readings."""
    from localpriv.utils.progress import _seconds
    now = [0.0]
    buf = io.StringIO()
    with Status("perturb", "reading v.csv", stream=buf, tty=False, interval=5, clock=lambda: now[0],
                background=False) as st:
        rows = st.task("rows", None, "read")
        now[0] = 6.0
        rows.update(1_250_000)
        st.stage("writing")
        now[0] = 12.0
        st.tick()
    assert [_split_status(line) for line in buf.getvalue().splitlines()] == [
        ("perturb: reading v.csv, rows 1,250,000 read", f"{_seconds(6.0)} elapsed"),
        ("perturb: writing, rows 1,250,000 read", f"{_seconds(12.0)} elapsed")]


def test_background_thread_writes_without_progress_calls():
    """A step that never advances still shows the command is alive (the thread ticks)."""
    buf = io.StringIO()
    with Status("aggregate", "counting", stream=buf, tty=False, interval=0.0) as st:
        for _ in range(200):  # the thread writes a line within its first steps; no task ever advances
            if st.lines >= 2:
                break
            st._stop.wait(0.05)
    assert st.lines >= 2 and buf.getvalue().startswith("aggregate: counting, ")


def test_cli_commands_write_status_lines_and_say_what_they_wrote(tmp_path):
    from localpriv.data.reports import perturb, write_reports
    from localpriv.domains import IntegerDomain
    write_reports(perturb(np.arange(10).repeat(20), "krr(eps=2.0)", np.random.default_rng(0), IntegerDomain(0, 9)),
                  tmp_path / "r.csv")
    env = dict(os.environ, LOCALPRIV_STATUS_INTERVAL="0", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", "import sys; from localpriv.cli.main import main; main(sys.argv[1:])",
                           "aggregate", "r.csv", "-o", "c.parquet"], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("aggregate: counting the reports of r.csv, ")
    assert lines[-1] == "200 reports, 1 mechanism(s), 10 distinct (mechanism, report) pairs -> c.parquet"


def test_reproduce_reports_progress_and_its_files(tmp_path, monkeypatch):
    from reproductions.runner import EXPERIMENTS, Experiment

    def compute(params, rng, progress):
        total = 0
        for i in progress(range(3), "steps"):
            total += i
        return {"total": total}

    monkeypatch.setitem(EXPERIMENTS, "tiny-test", Experiment("tiny-test", "a test", {}, compute))
    monkeypatch.setenv("LOCALPRIV_STATUS_INTERVAL", "0")
    r = invoke("reproduce", "tiny-test", "-o", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "reproduce tiny-test: steps 1/3" in r.output and "reproduce tiny-test: steps 3/3" in r.output
    assert f"wrote {tmp_path / 'tiny-test.json'} (numbers)" in r.output.splitlines()[-1]
    assert json.loads((tmp_path / "tiny-test.json").read_text())["results"] == {"total": 3}


def test_bare_command_prints_its_help_page():
    proc = subprocess.run([sys.executable, "-c", "from localpriv.cli.main import main; main([])"], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, COLUMNS="100"))
    assert proc.returncode == 2 and proc.stderr == ""
    assert proc.stdout.startswith("Usage: localpriv [OPTIONS] COMMAND [ARGS]...\n")
    assert "\nCommands:\n" in proc.stdout and "perturb" in proc.stdout
