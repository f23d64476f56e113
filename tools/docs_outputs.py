"""The command outputs shown in the docs, rerun and rewritten (``make docs-outputs``).

A page of :data:`PAGES` is a shell session: its indented code blocks are run in order, in one
bash process started in a scratch copy of the layout (``out/`` relative to it, ``../shared`` the
checkout's shared data), with ``COLUMNS=150`` and the checkout's ``src`` first on the path. The
fenced ``text`` block that follows a command block is that block's output (stdout and stderr as
printed, progress lines left out); the generator rewrites it between markers::

    <!-- docs-output sha256:0123456789abcdef -->
    ```text
    ...
    ```
    <!-- /docs-output -->

The hash is :func:`block_hash` of the command block and the output, so that a test
(``tests/test_docs_outputs.py``) can tell, without running anything, that every shown output was
written by this generator for the command shown above it. Fenced blocks after a
``<!-- docs-file: PATH -->`` line are written to ``PATH`` (relative to the session's start) before
the session runs; an image after a ``<!-- docs-image: PATH -->`` line is copied from ``PATH``
after it; an indented block after ``<!-- docs-skip -->`` is not run (formulas, set-up).

Usage: ``python tools/docs_outputs.py [--check] [PAGE ...]``; ``--check`` reruns nothing and
exits 1 when a page's markers are missing or do not match their blocks.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the pages whose shown outputs this generator writes (every other page shows none)
PAGES = ("docs/getting-started.md", "docs/heavy-hitters.md")
BEGIN = re.compile(r"^<!-- docs-output sha256:([0-9a-f]{16}) -->$")
END = "<!-- /docs-output -->"
FILE = re.compile(r"^<!-- docs-file: (\S+) -->$")
IMAGE = re.compile(r"^<!-- docs-image: (\S+) -->$")
LINK = re.compile(r"^!\[[^\]]*\]\(([^)\s]+)\)")
SKIP = "<!-- docs-skip -->"
#: progress lines of long commands (a status line every ~10 s when stderr is not a terminal, and
#: the final "NAME: done, ..., 16 s" of an estimator's progress display)
PROGRESS = re.compile(r"\b\d+(\.\d+)? s elapsed\b|^\s*(\S+ )?\d+%\||^[\w.-]+: done, .*, \d+(\.\d+)? s$")
#: the largest output kept in a page (a command printing more is an error of the page)
MAX_OUTPUT_LINES = 200


@dataclass
class Block:
    """One indented command block of a page, and the fenced output block that follows it."""

    command: str                 # the shell text, indentation removed
    start: int                   # the line index of its first line
    output: str | None = None    # the shown output (None: the command shows none)
    out_start: int = -1          # first line of the output region (marker or fence)
    out_end: int = -1            # one past its last line (closing marker or fence)
    sha: str | None = None       # the marker's hash, when the output has one
    skip: bool = False


@dataclass
class Page:
    path: Path
    lines: list[str]
    blocks: list[Block] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)  # the session's file -> the page's image


def block_hash(command: str, output: str) -> str:
    """The marker's hash: the first 16 hex digits of SHA-256 over the command, a NUL, the output."""
    return hashlib.sha256(f"{command.strip()}\0{output.rstrip()}".encode()).hexdigest()[:16]


def _fence_end(lines: list[str], i: int) -> int:
    """The index of the closing fence of the fenced block opened at line ``i``."""
    for j in range(i + 1, len(lines)):
        if lines[j].startswith("```"):
            return j
    raise SystemExit(f"unclosed code fence at line {i + 1}")


def parse(path: Path) -> Page:
    """The page's command blocks, their outputs and markers, and its ``docs-file`` blocks."""
    lines = path.read_text().splitlines()
    page = Page(path, lines)
    i = 0
    skip_next = False
    while i < len(lines):
        line = lines[i]
        if FILE.match(line) and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            end = _fence_end(lines, i + 1)
            page.files[FILE.match(line).group(1)] = "\n".join(lines[i + 2:end]) + "\n"  # type: ignore[union-attr]
            i = end + 1
            continue
        if IMAGE.match(line) and i + 1 < len(lines) and LINK.match(lines[i + 1]):
            page.images[IMAGE.match(line).group(1)] = LINK.match(lines[i + 1]).group(1)  # type: ignore[union-attr]
            i += 2
            continue
        if line.startswith("```"):
            i = _fence_end(lines, i) + 1
            continue
        if line.strip() == SKIP:
            skip_next = True
            i += 1
            continue
        if line.startswith("    ") and (i == 0 or not lines[i - 1].strip() or lines[i - 1].strip() == SKIP):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or (not lines[j].strip() and j + 1 < len(lines)
                                                                     and lines[j + 1].startswith("    "))):
                j += 1
            block = Block("\n".join(ln[4:] for ln in lines[i:j]), i, skip=skip_next)
            skip_next = False
            k = j
            while k < len(lines) and not lines[k].strip():
                k += 1
            m = BEGIN.match(lines[k]) if k < len(lines) else None
            fence = k + 1 if m else k
            if fence < len(lines) and lines[fence].startswith("```text"):
                close = _fence_end(lines, fence)
                block.output = "\n".join(lines[fence + 1:close])
                block.out_start = k
                block.out_end = close + 1
                if m and close + 1 < len(lines) and lines[close + 1] == END:
                    block.sha = m.group(1)
                    block.out_end = close + 2
                j = block.out_end
            page.blocks.append(block)
            i = j
            continue
        i += 1
    return page


def problems(page: Page) -> list[str]:
    """What is wrong with the page's shown outputs, without running anything: an output without
    the generator's markers, or whose hash does not match the command above it and its text."""
    out = []
    rel = page.path.relative_to(ROOT) if page.path.is_relative_to(ROOT) else page.path
    for b in page.blocks:
        if b.output is None:
            continue
        where = f"{rel}:{b.start + 1}"
        if b.skip:
            out.append(f"{where}: an output after a skipped block")
        elif b.sha is None:
            out.append(f"{where}: output without the generator's markers (run make docs-outputs)")
        elif b.sha != block_hash(b.command, b.output):
            out.append(f"{where}: the output or its command changed since make docs-outputs wrote it")
    return out


def clean(text: str) -> str:
    """A command's printed text as a page shows it: no progress lines, no trailing blanks."""
    lines = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n")]
    lines = [ln for ln in lines if not PROGRESS.search(ln)]
    while lines and not lines[-1]:
        lines.pop()
    if len(lines) > MAX_OUTPUT_LINES:
        raise SystemExit(f"a command printed {len(lines)} lines, more than {MAX_OUTPUT_LINES}")
    return "\n".join(lines)


def environment() -> dict[str, str]:
    """The session's environment: this checkout's package first, this interpreter's scripts on
    the path, wide tables, unbuffered output, one BLAS thread."""
    env = dict(os.environ)
    env.update({"PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "COLUMNS": "150", "PYTHONUNBUFFERED": "1",
                "OPENBLAS_NUM_THREADS": "1", "NO_COLOR": "1", "TERM": "dumb",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"})
    return env


def run(page: Page, shared: Path, keep: Path | None = None) -> list[str | None]:
    """Run the page's command blocks in one bash session; the printed text of each (None for
    skipped blocks). ``keep``: the scratch folder to use (default: a temporary one)."""
    with tempfile.TemporaryDirectory(prefix="docs-outputs-") as tmp:
        base = Path(keep) if keep is not None else Path(tmp)
        work = base / "repo"
        work.mkdir(parents=True, exist_ok=True)
        link = base / "shared"
        if not link.exists():
            link.symlink_to(shared.resolve())
        for rel, text in page.files.items():
            target = work / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        logs = base / "logs"
        logs.mkdir(exist_ok=True)
        script = ["set -u", f"cd {work}"]
        for i, b in enumerate(page.blocks):
            if b.skip:
                continue
            script.append(f"{{\n{b.command}\n}} > {logs}/{i}.txt 2>&1 || "
                          f"{{ echo 'docs-outputs: block {i + 1} failed:' >&2; cat {logs}/{i}.txt >&2; exit 1; }}")
        proc = subprocess.run(["bash", "-c", "\n".join(script)], env=environment(), capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{page.path.name}: {proc.stderr.strip()[-3000:]}")
        for src, dest in page.images.items():  # the figures the commands drew, into the docs
            target = page.path.parent / dest
            tmp_img = target.with_name(f".{target.name}.tmp")
            tmp_img.write_bytes((work / src).read_bytes())
            os.replace(tmp_img, target)
        return [None if b.skip else clean((logs / f"{i}.txt").read_text()) for i, b in enumerate(page.blocks)]


def rewrite(page: Page, outputs: list[str | None]) -> str:
    """The page with each command's shown output replaced by its new output, between markers."""
    lines = list(page.lines)
    for b, text in sorted(zip(page.blocks, outputs), key=lambda t: -t[0].start):
        if b.output is None or text is None:
            if text:  # a command that prints but shows nothing: keep the page as written
                print(f"{page.path.name}:{b.start + 1}: prints {len(text.splitlines())} lines, none shown",
                      file=sys.stderr)
            continue
        region = [f"<!-- docs-output sha256:{block_hash(b.command, text)} -->", "```text", *text.split("\n"),
                  "```", END]
        lines[b.out_start:b.out_end] = region
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("pages", nargs="*", default=list(PAGES))
    ap.add_argument("--check", action="store_true", help="check the markers only; run nothing")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"), help="the shared data folder (../shared)")
    args = ap.parse_args(argv)
    bad = []
    for name in args.pages:
        page = parse(ROOT / name)
        if args.check:
            bad += problems(page)
            continue
        outputs = run(page, Path(args.shared))
        text = rewrite(page, outputs)
        tmp = page.path.with_name(f".{page.path.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, page.path)  # atomically: the page as it was, or the new one
        print(f"{name}: {sum(o is not None for o in outputs)} blocks run, "
              f"{sum(b.output is not None for b in page.blocks)} outputs rewritten")
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
