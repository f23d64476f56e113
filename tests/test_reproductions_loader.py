"""`localpriv reproduce` finds the checkout's reproductions/ (not installed) or says it needs one;
`localpriv demo` is the library's and runs anywhere."""
import sys
from pathlib import Path

from typer.testing import CliRunner

from localpriv.cli.main import app
from localpriv.utils import checkout
from localpriv.utils.checkout import find_checkout, load_reproductions

ROOT = Path(__file__).resolve().parents[1]


def test_find_checkout_walks_up_to_the_reproductions_package(tmp_path):
    (tmp_path / "reproductions").mkdir()
    (tmp_path / "reproductions" / "__init__.py").write_text("")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_checkout([deep]) == tmp_path.resolve()
    assert find_checkout([tmp_path.parent]) in (None, ROOT)  # never a folder below the start
    assert find_checkout([ROOT / "src" / "localpriv" / "utils"]) == ROOT


def test_the_runner_is_the_checkouts():
    repro = load_reproductions()
    assert Path(repro.__file__).resolve().parent == ROOT / "reproductions"
    assert "demo" in repro.EXPERIMENTS and "fig8" in repro.EXPERIMENTS


def test_outside_a_checkout_reproduce_says_so_in_one_line(monkeypatch):
    monkeypatch.delitem(sys.modules, "reproductions", raising=False)
    monkeypatch.setattr(checkout, "find_checkout", lambda starts=None: None)
    r = CliRunner().invoke(app, ["reproduce", "list"])
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: localpriv reproduce runs from a source checkout: ")
    r = CliRunner().invoke(app, ["list", "experiments"])  # the other registries need no checkout
    assert r.exit_code == 0 and "experiments (0)" in r.output


def test_no_library_module_imports_the_reproductions():
    src = ROOT / "src" / "localpriv"
    hits = [str(p.relative_to(src)) for p in src.rglob("*.py")
            if "import reproductions" in p.read_text() or "from reproductions" in p.read_text()]
    assert hits == []
