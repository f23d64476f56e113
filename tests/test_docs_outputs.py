"""The command outputs shown in the docs are the generator's (tools/docs_outputs.py, `make
docs-outputs`): each carries a hash of its command and text, no other page shows outputs, and the
fast first steps of the getting-started page print today what the page shows. Also the built
site's checks (tools/check_site.py) on a small made-up site."""
from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import check_site  # noqa: E402
import docs_outputs  # noqa: E402


@pytest.mark.parametrize("name", docs_outputs.PAGES)
def test_every_shown_output_was_generated_for_its_command(name):
    page = docs_outputs.parse(ROOT / name)
    shown = [b for b in page.blocks if b.output is not None]
    assert shown, f"{name} shows no output: drop it from PAGES"
    assert docs_outputs.problems(page) == []


def test_no_other_page_shows_a_command_output():
    pages = sorted({*ROOT.glob("docs/**/*.md"), ROOT / "README.md"} - {ROOT / p for p in docs_outputs.PAGES})
    for path in pages:
        for b in docs_outputs.parse(path).blocks:
            where = f"{path.relative_to(ROOT)}:{b.start + 1}"
            assert b.output is None or not b.command.lstrip().startswith(("localpriv ", "python ")), \
                f"{where}: a command's output outside tools/docs_outputs.py's pages"
            pasted = [ln for ln in b.command.splitlines() if re.match(r"\s*# (wrote |Estimate\(|HeavyHitters\()", ln)]
            assert not pasted, f"{where}: an output pasted as a comment: {pasted[0]}"


def test_an_edited_output_or_command_is_caught(tmp_path):
    text = (ROOT / docs_outputs.PAGES[0]).read_text()
    page = docs_outputs.parse(ROOT / docs_outputs.PAGES[0])
    b = next(b for b in page.blocks if b.output)
    lines = text.splitlines()
    edited = list(lines)
    edited[b.out_start + 2] = edited[b.out_start + 2] + "x"  # the output's first line, one letter more
    (tmp_path / "a.md").write_text("\n".join(edited) + "\n")
    found = docs_outputs.problems(docs_outputs.parse(tmp_path / "a.md"))
    assert any("changed since make docs-outputs" in p for p in found)
    edited = list(lines)
    edited[b.start] = edited[b.start] + " --seed 1"
    (tmp_path / "b.md").write_text("\n".join(edited) + "\n")
    assert docs_outputs.problems(docs_outputs.parse(tmp_path / "b.md"))
    unmarked = [ln for ln in lines if not ln.startswith(("<!-- docs-output", "<!-- /docs-output"))]
    (tmp_path / "c.md").write_text("\n".join(unmarked) + "\n")
    assert any("without the generator's markers" in p
               for p in docs_outputs.problems(docs_outputs.parse(tmp_path / "c.md")))


def test_the_fast_first_steps_print_what_the_page_shows(tmp_path):
    """The values file and the perturb command of the getting-started page, rerun in a scratch
    folder: the output is byte for byte the page's."""
    page = docs_outputs.parse(ROOT / "docs/getting-started.md")
    setup = next(b for b in page.blocks if "ages.csv" in b.command and b.command.startswith("mkdir"))
    step = next(b for b in page.blocks if b.command.startswith("localpriv perturb out/gs/ages.csv"))
    assert step.output is not None
    part = replace(page, blocks=[setup, step], files={}, images={})
    outputs = docs_outputs.run(part, tmp_path, keep=tmp_path / "run")
    assert outputs[1] == step.output


def test_site_check_finds_raw_roles_and_a_missing_stylesheet(tmp_path):
    site = tmp_path / "site"
    (site / "api").mkdir(parents=True)
    (site / "stylesheets").mkdir()
    css = (ROOT / "docs/stylesheets/extra.css").read_text()
    (site / "stylesheets/extra.css").write_text(css)
    head = '<html><head><link rel="stylesheet" href="../stylesheets/extra.css"></head><body>'
    (site / "index.html").write_text(head.replace("../", "") + "<p>fine</p></body></html>")
    (site / "api/index.html").write_text(head + "<p>a :class:<code>Fit</code></p></body></html>")
    found = check_site.problems(site)
    assert len(found) == 1 and "raw role" in found[0] and found[0].startswith("api")
    (site / "api/index.html").write_text("<html><head></head><body><p>a <code>Fit</code></p></body></html>")
    found = check_site.problems(site)
    assert found == [f"{Path('api/index.html')}: does not load stylesheets/extra.css"]
    (site / "stylesheets/extra.css").write_text("pre { color: red }")
    assert len(check_site.problems(site)) == 3
