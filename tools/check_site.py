"""Checks of the built documentation site (``make docs`` runs it on ``site/``).

* No raw Sphinx role in any page: the API pages render the docstrings' roles as cross-references
  (``tools/griffe_roles.py``), so ``:class:`` followed by a name is a rendering bug.
* Every page loads ``stylesheets/extra.css``, whose rules keep code, command output and tables
  within the page's width (they scroll inside their box).

Usage: ``python tools/check_site.py [SITE_DIR]``; prints one line per problem, exits 1 if any.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

#: a role as it appears in HTML when Markdown rendered it raw: :class:<code>X</code> or :class:`X`
RAW_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):(?:<code>|`)")
CSS = "stylesheets/extra.css"
#: what the stylesheet must say for blocks wider than the page
CSS_RULES = (re.compile(r"pre[^{]*\{[^}]*overflow-x:\s*auto", re.S),
             re.compile(r"table[^{]*\{[^}]*overflow-x:\s*auto", re.S))


def problems(site: Path) -> list[str]:
    """The problems of the built site at ``site``, one line each."""
    pages = sorted(site.rglob("*.html"))
    if not pages:
        return [f"{site}: no HTML pages (build the site first: make docs)"]
    out = []
    for page in pages:
        text = page.read_text(encoding="utf-8", errors="replace")
        rel = page.relative_to(site)
        for m in RAW_ROLE.finditer(text):
            out.append(f"{rel}: raw role {text[m.start():m.end() + 40]!r}")
        if page.name == "index.html" and "<head" in text and CSS not in text and rel.parts[0] != "assets":
            out.append(f"{rel}: does not load {CSS}")
    css = site / CSS
    if not css.is_file():
        out.append(f"{CSS}: missing from the site")
    else:
        rules = css.read_text()
        out += [f"{CSS}: no rule matching {r.pattern!r}" for r in CSS_RULES if not r.search(rules)]
    return out


def main(argv: list[str]) -> int:
    site = Path(argv[1] if len(argv) > 1 else "site")
    found = problems(site)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
