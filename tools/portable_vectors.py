"""Writes clients/vectors/vectors-v1.json, the conformance vectors of the portable client protocol,
and clients/vectors/ledger-v1.json, a privacy ledger written by Python that the clients read.

Run by `make vectors` (a few seconds, pure Python; no timing). The documents are built by
`localpriv.testing.portable` (`build_vectors`, `ledger_fixture`) and written atomically;
`tests/test_portable.py` checks that the committed files are exactly what this writes.
"""
import pathlib
import warnings

from localpriv.data.formats import atomic_output
from localpriv.testing.portable import (
    LEDGER_PATH,
    VECTORS_PATH,
    build_vectors,
    ledger_fixture,
    render_ledger,
    render_vectors,
)
from localpriv.utils.validation import PrivacyWarning

root = pathlib.Path(__file__).resolve().parent.parent
for rel, build in ((VECTORS_PATH, lambda: render_vectors(build_vectors())),
                   (LEDGER_PATH, lambda: render_ledger(ledger_fixture()))):
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # the large-eps cases are deliberate
        warnings.simplefilter("ignore", PrivacyWarning)
        text = build()
    with atomic_output(target) as tmp:
        pathlib.Path(tmp).write_text(text, encoding="utf-8")
    print(f"wrote {target.relative_to(root)} ({len(text)} bytes)")
