"""A griffe extension for the API pages (``make docs``): Sphinx roles in the docstrings become
cross-references.

The docstrings are numpy style and name other objects with Sphinx roles (``:class:`Fit```,
``:func:`~localpriv.data.aggregate```, ``:meth:`Uncertainty.gaussian```). mkdocstrings renders
Markdown, where a role would show as raw text; this extension rewrites each role, once the package
is loaded, into an mkdocs-autorefs reference ``<autoref identifier="PATH" optional>`` with the
object's full path (a name resolved in the docstring's scope: the object's own members, its
module's names and imports, then its parents'). A target not shown on any page renders as code
without a link (``optional``: no warning), never as the raw role. ``~`` keeps the last
component as the title, as in Sphinx. ``tools/check_site.py`` checks the built pages.
"""
from __future__ import annotations

import html
import re
from typing import Any

from griffe import Alias, Extension, Object

#: a Sphinx role with its target: :class:`X`, :py:func:`~a.b`, :meth:`A.b` ...
ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|data|attr|exc|obj|const|ref|term|doc):"
                  r"`(~?)([^`<>]+?)(?:\s*<([^`>]+)>)?`")


def _resolve(obj: Object, target: str) -> str:
    """The full path of ``target`` as named in ``obj``'s docstring (itself when it is one)."""
    target = target.strip().lstrip(".").rstrip("()")
    if target.startswith("localpriv.") or target == "localpriv":
        return target
    head, _, rest = target.partition(".")
    for scope in (obj, obj.parent):
        if scope is None:
            continue
        try:
            base = scope.resolve(head)
        except Exception:  # noqa: BLE001 - griffe's NameResolutionError and alias errors alike
            continue
        return f"{base}.{rest}" if rest else base
    return target


def rewrite(text: str, obj: Object) -> str:
    """The docstring text with every role replaced by an optional cross-reference."""
    def one(m: re.Match[str]) -> str:
        role, tilde, target, explicit = m.group(1), m.group(2), m.group(3), m.group(4)
        if explicit:  # :class:`title <target>`
            title, target = target.strip(), explicit
        else:
            title = target.strip().split(".")[-1] if tilde else target.strip().lstrip("~")
        if role in ("ref", "term", "doc"):
            return f"`{title}`"
        ident = _resolve(obj, target)
        suffix = "()" if role in ("func", "meth") and not title.endswith(")") else ""
        return (f'<autoref identifier="{html.escape(ident, quote=True)}" optional>'
                f"<code>{html.escape(title + suffix)}</code></autoref>")
    return ROLE.sub(one, text)


class SphinxRoles(Extension):
    """Rewrite the Sphinx roles of every docstring of the package into cross-references."""

    def on_package(self, *, pkg: Any, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack = [pkg]
        while stack:  # every object of the package once (aliases are the objects they point to)
            obj = stack.pop()
            if id(obj) in seen or isinstance(obj, Alias):
                continue
            seen.add(id(obj))
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = rewrite(obj.docstring.value, obj)
            stack.extend(m for m in obj.members.values() if not isinstance(m, Alias))
