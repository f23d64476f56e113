"""The documentation site's sources: mkdocs.yml, its nav, the links between
pages and the options the getting-started page uses. No mkdocs needed: `make test` installs only
requirements.lock (no PyYAML), so the few keys read here are parsed in plain Python."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from localpriv.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CONFIG = ROOT / "mkdocs.yml"
GETTING_STARTED = DOCS / "getting-started.md"


def _top_level(text: str) -> dict[str, str]:
    """Top-level `key: value` lines of a YAML file (values as written, '' for blocks)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z_][\w-]*):\s*(.*?)\s*$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _nav_files(text: str) -> list[str]:
    """The .md files of the `nav:` block (entries `- Title: file.md` or `- file.md`)."""
    block = text.split("\nnav:\n", 1)[1]
    files = []
    for line in block.splitlines():
        if line and not line.startswith(" "):   # the next top-level key ends the block
            break
        m = re.match(r"^\s*-\s*(?:[^:]+:\s*)?(\S+\.md)\s*$", line)
        if m:
            files.append(m.group(1))
    return files


def test_config_has_the_keys_the_build_needs():
    text = CONFIG.read_text()
    assert "\t" not in text, "YAML forbids tabs for indentation"
    keys = _top_level(text)
    for key in ("site_name", "docs_dir", "theme", "plugins", "nav"):
        assert key in keys, key
    assert keys["docs_dir"] == "docs"
    assert "name: material" in text
    assert "mkdocstrings" in text and "docstring_style: numpy" in text
    for ext in re.findall(r"-\s*(tools/\S+\.py):(\w+)", text):  # griffe extensions of ours exist
        assert (ROOT / ext[0]).is_file() and f"class {ext[1]}(" in (ROOT / ext[0]).read_text()


def test_every_nav_entry_exists_and_every_page_is_in_the_nav():
    nav = _nav_files(CONFIG.read_text())
    assert len(nav) == len(set(nav)), "a page twice in the nav"
    for entry in nav:
        assert (DOCS / entry).is_file(), f"nav entry {entry} is not a file under docs/"
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages - set(nav) == set(), f"docs pages missing from the nav: {sorted(pages - set(nav))}"
    assert {"index.md", "getting-started.md", "api.md"} <= set(nav)


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _local_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)   # not inside code blocks
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t) and not t.startswith("#")]


def test_relative_links_between_pages_resolve():
    checked = 0
    for page in sorted(DOCS.rglob("*.md")):
        for target in _local_links(page):
            path = (page.parent / target.split("#", 1)[0]).resolve()
            assert path.is_file(), f"{page.relative_to(ROOT)}: broken link {target}"
            checked += 1
    assert checked >= 10   # the getting-started and home pages link to the others and to figures


def test_getting_started_figures_are_small_pngs():
    figures = [t for t in _local_links(GETTING_STARTED) if t.endswith(".png")]
    assert len(figures) >= 3
    for fig in figures:
        data = (GETTING_STARTED.parent / fig).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 200_000, fig


def _commands(page: Path) -> list[list[str]]:
    """The `localpriv ...` commands of the page's indented code, continuation lines joined."""
    lines, cmds, cur = page.read_text().splitlines(), [], ""
    for line in lines:
        if cur:
            cur += " " + line.strip()
        elif line.startswith("    localpriv "):
            cur = line.strip()
        else:
            continue
        if cur.endswith("\\"):
            cur = cur[:-1]
            continue
        cmds.append(shlex.split(cur.split("  #", 1)[0]))
        cur = ""
    return cmds


def test_getting_started_commands_use_options_that_exist():
    cmds = _commands(GETTING_STARTED)
    names = {c[1] for c in cmds}
    assert {"advise", "perturb", "aggregate", "estimate"} <= names
    runner = CliRunner()
    helps = {}
    for name in names:
        res = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        helps[name] = res.output
    used = 0
    for cmd in cmds:
        for word in cmd[2:]:
            if word.startswith("--"):
                opt = word.split("=", 1)[0]
                assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", helps[cmd[1]]), \
                    f"localpriv {cmd[1]} has no option {opt}"
                used += 1
    assert used >= 20


def test_getting_started_walks_the_three_jobs():
    text = GETTING_STARTED.read_text()
    assert "--ci 0.95 --stat mean,median" in text
    assert "--eps 1" in text and "planar-geometric(eps=1.0)" in text and "--policy policy.toml" in text
    for eps in ("4.0", "1.0", "0.5"):
        assert f'"krr(eps={eps})"' in text
    for cmd in _commands(GETTING_STARTED):
        if cmd[1] in ("perturb",):
            assert "--seed" in cmd, "perturb commands on the page must be reproducible"
        assert "-e" not in cmd and "--estimator" not in cmd, "the page shows the default estimator"


@pytest.mark.parametrize("name", ["README.md"])
def test_readme_says_how_to_build_the_site(name):
    text = (ROOT / name).read_text()
    assert re.search(r"`make docs`[^\n]*site/", text)
