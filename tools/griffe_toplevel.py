"""Griffe extension for the docs site (mkdocs.yml): keep localpriv's top-level functions.

``localpriv.inference.estimate``, ``localpriv.data.aggregate`` and ``localpriv.advice.advisor`` are functions defined in
``localpriv/__init__.py`` that share their names with submodules; at run time the package keeps
the function (``_Package.__setattr__``), but a static loader lets the submodule win, so the API
reference could not show the functions' own docstrings. This extension remembers the functions as
they are visited and files them under a virtual module ``localpriv.toplevel`` (documentation only:
import them as ``from localpriv import estimate``).
"""
from __future__ import annotations

from typing import Any

import griffe


class TopLevelFunctions(griffe.Extension):
    def __init__(self, package: str = "localpriv") -> None:
        self.package = package
        self.found: dict[str, griffe.Function] = {}

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        if func.parent is not None and func.parent.path == self.package:
            self.found[func.name] = func

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != self.package:
            return
        shadowed = {name: f for name, f in self.found.items()
                    if isinstance(pkg.members.get(name), griffe.Module)}
        if not shadowed:
            return
        virtual = griffe.Module("toplevel", parent=pkg,
                                docstring=griffe.Docstring("Functions of the top-level package."))
        for name, func in shadowed.items():
            virtual.set_member(name, func)
        pkg.set_member("toplevel", virtual)
