"""The compact batch body, ``Content-Type: application/x-localpriv-reports; v=1``: a short JSON
header (batch id, and per group the mechanism, the reports' kind, their number and width) and the
reports packed as little-endian arrays, group after group (``docs/service.md``, the binary body;
decision record 0082).

Byte layout (all integers little-endian):

==========  ============  ===============================================================
offset      bytes         what
==========  ============  ===============================================================
0           4             ``LPR1`` (ASCII)
4           4             ``H``, the header's length in bytes (unsigned, 2 to 65,536)
8           ``H``         the header: strict JSON in UTF-8 (spaces may pad it)
8 + ``H``   ``n * w``     group 1's ``n`` reports of ``w`` bytes, then group 2's, ... to the end
==========  ============  ===============================================================

The header is ``{"batch_id": ID, "groups": [{"mechanism": SPEC, "kind": KIND, "reports": n,
"width": w}, ...]}`` with exactly these keys; ``KIND`` is ``int64`` (``w`` = 8, signed integers),
``float64`` (``w`` = 8, IEEE 754 doubles) or ``binary`` (``w`` = the mechanism's report width in
bytes: bit vectors packed most significant bit first, as in the file formats). This module holds
the layout and the client's encoder; the collector's decoder (with the policy and the reports'
checks) is :func:`localpriv.service.core.decode_binary_batch`.
"""
from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from localpriv.utils.errors import LocalPrivError

__all__ = ["MEDIA_TYPE", "VERSION", "CONTENT_TYPE", "MAGIC", "MAX_HEADER", "KINDS", "GROUP_KEYS", "media_kind",
           "split_binary", "encode_batch", "packed_reports"]

#: The media type of the binary body; its one parameter is ``v`` (the layout's version).
MEDIA_TYPE = "application/x-localpriv-reports"
#: The layout's version this server reads and this client writes.
VERSION = "1"
#: The ``Content-Type`` of a binary body.
CONTENT_TYPE = f"{MEDIA_TYPE}; v={VERSION}"
#: The first four bytes of a binary body.
MAGIC = b"LPR1"
#: Bytes of the JSON header, at most.
MAX_HEADER = 65536
#: The reports' kinds of the header and their NumPy types (little-endian).
KINDS = {"int64": "<i8", "float64": "<f8", "binary": "u1"}
#: The keys of a group in the header, exactly.
GROUP_KEYS = frozenset({"mechanism", "kind", "reports", "width"})
_HEX = re.compile(r"(?:[0-9a-f]{2})+")


def media_kind(content_type: str | None) -> str | None:
    """``"binary"`` for ``application/x-localpriv-reports; v=1``, ``"json"`` for any other media type
    (or none: a batch body is read as JSON, as it always was), ``None`` for the binary media type
    with another version or other parameters (the HTTP layer's 415)."""
    if not content_type:
        return "json"
    media, _, params = content_type.partition(";")
    if media.strip().lower() != MEDIA_TYPE:
        return "json"
    given = [p.strip() for p in params.split(";") if p.strip()]
    return "binary" if given == [f"v={VERSION}"] else None


def split_binary(body: bytes) -> tuple[bytes, int]:
    """``(header bytes, offset of the first group's reports)`` of a binary body; a one-line
    :class:`LocalPrivError` if it does not start with :data:`MAGIC` and a header length within
    2 to :data:`MAX_HEADER` bytes that the body holds."""
    if len(body) < 8 or body[:4] != MAGIC:
        raise LocalPrivError(f"a binary batch ({CONTENT_TYPE}) starts with the 4 bytes {MAGIC.decode()} and the "
                             "header's length (4 bytes, little-endian)")
    size = int.from_bytes(body[4:8], "little")
    if not 2 <= size <= MAX_HEADER or 8 + size > len(body):
        raise LocalPrivError(f"binary batch: a header of {size:,} bytes: 2 to {MAX_HEADER:,} bytes, within the "
                             f"body ({len(body):,} bytes)")
    return body[8:8 + size], 8 + size


def packed_reports(reports: Any) -> tuple[str, np.ndarray]:
    """``(kind, array)`` of one group's reports for the binary body: integers -> ``int64``, other
    numbers -> ``float64``, an ``n x w`` ``uint8`` array or lowercase hex strings (the JSON form of
    bit vectors) -> ``binary`` rows. A one-line :class:`LocalPrivError` for anything else
    (booleans, mixed hex and numbers, hex of different lengths)."""
    if isinstance(reports, (list, tuple)) and reports and all(isinstance(v, str) for v in reports):
        width = len(reports[0])
        if any(len(v) != width or _HEX.fullmatch(v) is None for v in reports):
            raise LocalPrivError("bit-vector reports are lowercase hex strings of one length")
        rows = np.frombuffer(bytes.fromhex("".join(reports)), np.uint8).reshape(len(reports), width // 2)
        return "binary", rows
    r = np.asarray(reports)
    if r.ndim == 2 and r.dtype == np.uint8:
        return "binary", np.ascontiguousarray(r)
    if r.ndim == 1 and r.size and r.dtype.kind in "iu":
        if r.dtype.kind == "u" and r.size and int(r.max()) >= 2 ** 63:
            raise LocalPrivError("integer reports beyond 64 bits")
        return "int64", r.astype("<i8")
    if r.ndim == 1 and r.size and r.dtype.kind == "f":
        return "float64", r.astype("<f8")
    raise LocalPrivError("reports are a non-empty list of integers, of numbers, or of bit vectors (hex strings "
                         f"or an n x w uint8 array), got {r.dtype} of shape {r.shape}")


def encode_batch(batch_id: str, groups: list[dict]) -> tuple[str, bytes]:
    """``(Content-Type, body)`` of a batch in the binary layout (module docstring); ``groups`` are
    ``{"mechanism": spec, "reports": ...}`` with reports as :func:`packed_reports` takes them. The
    header is padded with spaces so that the reports start at a multiple of 8 bytes."""
    heads, arrays = [], []
    for g in groups:
        kind, r = packed_reports(g["reports"])
        width = int(r.shape[1]) if kind == "binary" else 8
        heads.append({"mechanism": g["mechanism"], "kind": kind, "reports": int(r.shape[0]), "width": width})
        arrays.append(r)
    header = json.dumps({"batch_id": batch_id, "groups": heads}, separators=(",", ":")).encode()
    header += b" " * (-(8 + len(header)) % 8)
    if len(header) > MAX_HEADER:
        raise LocalPrivError(f"the batch header has {len(header):,} bytes: at most {MAX_HEADER:,} (fewer groups)")
    return CONTENT_TYPE, b"".join([MAGIC, len(header).to_bytes(4, "little"), header, *(a.tobytes() for a in arrays)])
