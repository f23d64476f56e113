"""Writes clients/vectors/vectors-v1.json, the conformance vectors of the portable client protocol.

Run by `make vectors` (a few seconds, pure Python; no timing). The document is built by
`localpriv.testing.portable.build_vectors` and written atomically; `tests/test_portable.py` checks
that the committed file is exactly what this writes.
"""
import pathlib

from localpriv.data.formats import atomic_output
from localpriv.testing.portable import VECTORS_PATH, build_vectors, render_vectors

root = pathlib.Path(__file__).resolve().parent.parent
target = root / VECTORS_PATH
target.parent.mkdir(parents=True, exist_ok=True)
text = render_vectors(build_vectors())
with atomic_output(target) as tmp:
    pathlib.Path(tmp).write_text(text, encoding="utf-8")
print(f"wrote {target.relative_to(root)} ({len(text)} bytes)")
