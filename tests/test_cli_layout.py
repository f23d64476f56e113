"""The command line's layout: one module per command, loaded on first use; the summaries on the
``localpriv --help`` page are the first paragraphs of the commands' docstrings."""
from __future__ import annotations

import importlib
import inspect

from localpriv.cli.main import COMMANDS


def test_summaries_are_the_docstrings_first_paragraphs():
    for name, (module, function, summary) in COMMANDS.items():
        doc = inspect.getdoc(getattr(importlib.import_module(module), function))
        assert doc is not None, name
        assert " ".join(doc.split("\n\n")[0].split()) == summary, name
