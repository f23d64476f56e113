"""``localpriv client``: the portable client's command-line contract (docs/clients.md).

Values in (one per line, stdin or a file), reports out (one JSON value per line, or one wire-format
group with ``--group``), drawn by the portable protocol from the operating system's CSPRNG, or
from the test-only ChaCha20 stream with ``--seed``. The JavaScript and Java clients offer the same
contract, so an auditor runs any of them the same way.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from localpriv.cli.common import friendly
from localpriv.data.formats import atomic_output
from localpriv.mechanisms.portable import ChaCha20Source, SystemSource, WordSource, perturb_devices, perturb_lines
from localpriv.utils.validation import LocalPrivError

#: largest memo file read (bytes)
MAX_MEMO_BYTES = 64 << 20


@friendly
def client(
    spec: str = typer.Argument(..., help="a portable mechanism spec, e.g. 'krr(eps=2.0)' (docs/clients.md)"),
    domain: str = typer.Option(..., "--domain", "-d", help="the values: lo..hi or labels a,b,c"),
    input: Path | None = typer.Option(None, "--in", "-i",
                                      help="values, one per line, UTF-8 (default: standard input)"),
    output: Path | None = typer.Option(None, "--out", "-o", help="write the reports here (default: standard output)"),
    seed: str | None = typer.Option(None, "--seed",
                                    help="TESTS ONLY: draw from the ChaCha20 stream of this string (the vectors' "
                                         "stream), not from the operating system"),
    memo: Path | None = typer.Option(None, "--memo",
                                     help="memoized mechanisms: JSON file of the user's memos, read and updated"),
    group: bool = typer.Option(False, "--group",
                               help="print one wire-format group {\"mechanism\", \"reports\"} instead of one "
                                    "report per line"),
    reports_per_device: int | None = typer.Option(None, "--reports-per-device",
                                                  help="simulate devices (audits): each input line is a new "
                                                       "device, with its own memo, that reports its value this "
                                                       "many times (1..1000)"),
) -> None:
    """Perturb values on this machine with the portable protocol: one report per input line, as JSON."""
    source: WordSource = ChaCha20Source(seed) if seed is not None else SystemSource()
    if reports_per_device is not None and memo is not None:
        raise LocalPrivError("--reports-per-device keeps each simulated device's memo in memory: no --memo")
    memos = _read_memos(memo) if memo is not None and memo.exists() else []
    lines = _lines(sys.stdin.buffer.read() if input is None else input.read_bytes())
    if reports_per_device is None:
        run = perturb_lines(spec, domain, lines, source, memos)
    else:
        run = perturb_devices(spec, domain, lines, reports_per_device, source)
    if group:
        text = json.dumps({"mechanism": str(run.mechanism), "reports": run.reports}) + "\n"
    else:
        text = "".join(json.dumps(r) + "\n" for r in run.reports)
    if memo is not None and run.memos:
        with atomic_output(memo) as tmp:
            Path(tmp).write_text(json.dumps({"memos": run.memos}) + "\n", encoding="utf-8")
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with atomic_output(output) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")


def _lines(raw: bytes) -> list[str]:
    """UTF-8 lines (a final line break ends the last line; it does not start an empty one)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LocalPrivError(f"input is not UTF-8 text (byte {exc.start})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _read_memos(path: Path) -> list[dict]:
    if path.stat().st_size > MAX_MEMO_BYTES:
        raise LocalPrivError(f"memo file {path} is larger than {MAX_MEMO_BYTES >> 20} MiB")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LocalPrivError(f"memo file {path} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or set(doc) != {"memos"} or not isinstance(doc["memos"], list):
        raise LocalPrivError(f"memo file {path}: expected {{\"memos\": [...]}}")
    return doc["memos"]
