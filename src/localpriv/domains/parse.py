"""Domains written as text (the command line, files, requests): one parser for every kind."""
from __future__ import annotations

import os
import re

from localpriv.domains.base import CategoricalDomain, Domain, IntegerDomain, IntervalDomain
from localpriv.domains.grid import GridDomain, manhattan_grid
from localpriv.domains.product import ProductDomain
from localpriv.utils.validation import LocalPrivError

__all__ = ["parse_domain", "read_labels", "MAX_LABELS_FILE_BYTES"]

#: Largest labels file ``--domain @FILE`` reads (the file is data, not a program: read as text only).
MAX_LABELS_FILE_BYTES = 1 << 20


def read_labels(path: str) -> CategoricalDomain:
    """A categorical domain from a labels file: one label per line, any characters (commas too),
    UTF-8, surrounding blanks removed, blank lines ignored; at most :data:`MAX_LABELS_FILE_BYTES`."""
    try:
        size = os.path.getsize(path)
        if size > MAX_LABELS_FILE_BYTES:
            raise LocalPrivError(f"labels file {path} holds {size:,} bytes, more than the "
                                 f"{MAX_LABELS_FILE_BYTES:,} a domain may have")
        with open(path, "rb") as fh:
            raw = fh.read(MAX_LABELS_FILE_BYTES + 1)
    except IsADirectoryError:
        raise LocalPrivError(f"labels file {path} is a folder, not a file") from None
    except OSError as exc:
        raise LocalPrivError(f"cannot read labels file {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise LocalPrivError(f"labels file {path} is not UTF-8 text (line {line}, byte {exc.start})") from None
    first: dict[str, int] = {}
    for number, line_text in enumerate(text.splitlines(), 1):
        label = line_text.strip()
        if not label:
            continue
        if label in first:
            raise LocalPrivError(f"labels file {path}: label {label[:60]!r} on lines {first[label]} and {number}; "
                                 "labels must be distinct")
        first[label] = number
    if not first:
        raise LocalPrivError(f"labels file {path} holds no labels (one per line)")
    return CategoricalDomain(list(first))


def _parse_interval(text: str) -> IntervalDomain:
    """``interval(lo,hi,bins)``: three numbers, by position or as ``name=value``."""
    shown = text if len(text) <= 80 else text[:77] + "..."
    form = "interval(LO,HI,BINS), e.g. interval(0,100,50)"
    m = re.fullmatch(r"interval\s*\((.*)\)", text.strip(), flags=re.IGNORECASE | re.DOTALL)
    items = [t.strip() for t in m.group(1).split(",")] if m else []
    if len(items) != 3 or any(not t for t in items):
        raise LocalPrivError(f"cannot read domain {shown!r}: expected {form}")
    fields = ("lo", "hi", "bins")
    values: dict[str, float] = {}
    for pos, item in enumerate(items):
        name, eq, raw = item.partition("=")
        name, raw = (name.strip().lower(), raw.strip()) if eq else (fields[pos], item)
        if name not in fields:
            raise LocalPrivError(f"interval: unknown field {name!r}; expected {form}")
        if name in values:
            raise LocalPrivError(f"interval: {name} given twice in {shown!r}")
        try:
            values[name] = int(raw) if name == "bins" else float(raw)
        except ValueError:
            what = "a whole number" if name == "bins" else "a number"
            raise LocalPrivError(f"interval: {name} must be {what}, got {raw[:30]!r}") from None
    return IntervalDomain(values["lo"], values["hi"], int(values["bins"]))  # bins was read by int()


def parse_domain(text: str) -> Domain:
    """Parse a domain written on the command line.

    * ``"0..99"``: an :class:`IntegerDomain`;
    * ``"a,b,c"``: a :class:`CategoricalDomain`;
    * ``"@labels.txt"``: a :class:`CategoricalDomain` read from a file, one label per line
      (:func:`read_labels`: commas allowed, blank lines ignored, UTF-8, size-capped);
    * ``"interval(0,100,50)"``: the real interval [0, 100] in 50 equal cells (:class:`IntervalDomain`;
      ``interval(lo=0,hi=100,bins=50)`` too);
    * ``"manhattan"`` or ``"manhattan:0.25"``: the planar grid over the Manhattan box of seed 001
      section 7.2 with 0.5-km (or the given) cells (:func:`localpriv.domains.grid.manhattan_grid`);
    * ``"grid(lat0=..,lon0=..,nrows=..,ncols=..,cell_km=..)"``: any planar grid, as printed by
      ``GridDomain.spec()`` (so a grid's spec round-trips);
    * ``"bbox(lat0,lon0,lat1,lon1,cell_km)"``: the grid of square ``cell_km``-km cells that covers
      the box from the south-west corner (lat0, lon0) to the north-east corner (lat1, lon1), in
      decimal degrees (:meth:`localpriv.domains.grid.GridDomain.covering`), e.g. whole New York at 1 km:
      ``bbox(40.4774,-74.2591,40.9176,-73.7004,1)``;
    * ``"product(age=18..90;education=HS,BA,MA;hours=0..99)"``: a
      :class:`~localpriv.domains.product.ProductDomain` of named attributes, each in one of the
      one-column forms above, as printed by ``ProductDomain.spec()``.

    Parameters
    ----------
    text : str
        The domain as written on the command line (one of the forms above).

    Returns
    -------
    Domain
    """
    text = str(text).strip()
    if text.startswith("@"):
        return read_labels(text[1:])
    low = text.lower()
    if low.startswith("product(") and low.endswith(")"):
        return _parse_product(text)
    if low.startswith("bbox"):
        return _parse_bbox(text)
    if low.startswith("interval"):
        return _parse_interval(text)
    if low == "manhattan" or low.startswith("manhattan:"):
        cell = low.partition(":")[2] or "0.5"
        try:
            return manhattan_grid(float(cell))
        except ValueError:
            raise LocalPrivError(f"cannot read domain {text!r}: expected manhattan or manhattan:CELL_KM") from None
    if low.startswith("grid(") and low.endswith(")"):
        fields = {"lat0": float, "lon0": float, "nrows": int, "ncols": int, "cell_km": float}
        try:
            pairs = dict(item.split("=", 1) for item in text[5:-1].replace(" ", "").split(",") if item)
            kwargs = {key: conv(pairs.pop(key)) for key, conv in fields.items()}
        except (KeyError, ValueError):
            raise LocalPrivError(f"cannot read grid domain {text!r}: expected "
                                 "grid(lat0=..,lon0=..,nrows=..,ncols=..,cell_km=..)") from None
        if pairs:
            raise LocalPrivError(f"grid domain: unknown field(s) {', '.join(sorted(pairs))}")
        if kwargs["nrows"] < 1 or kwargs["ncols"] < 1 or kwargs["cell_km"] <= 0:
            raise LocalPrivError("grid domain: need nrows >= 1, ncols >= 1 and cell_km > 0")
        return GridDomain(**kwargs)
    if ".." in text:
        lo, _, hi = text.partition("..")
        try:
            bounds = int(lo), int(hi)
        except ValueError:
            raise LocalPrivError(f"cannot read integer domain {text[:60]!r}: expected LO..HI, e.g. 0..99") from None
        return IntegerDomain(*bounds)
    labels = [t.strip() for t in text.split(",") if t.strip()]
    if not labels:
        raise LocalPrivError(f"cannot read domain {text!r}: expected LO..HI, a comma-separated list, "
                             "manhattan[:CELL_KM], bbox(lat0,lon0,lat1,lon1,cell_km) or grid(...)")
    return CategoricalDomain(labels)


_BBOX_FIELDS = ("lat0", "lon0", "lat1", "lon1", "cell_km")
_BBOX_FORM = "bbox(lat0,lon0,lat1,lon1,cell_km), e.g. bbox(40.4774,-74.2591,40.9176,-73.7004,1)"


def _parse_bbox(text: str) -> Domain:
    """``bbox(lat0,lon0,lat1,lon1,cell_km)``: five numbers, by position or as ``name=value``."""
    shown = text if len(text) <= 80 else text[:77] + "..."
    m = re.fullmatch(r"bbox\s*\((.*)\)", text.strip(), flags=re.IGNORECASE | re.DOTALL)
    if m is None:
        raise LocalPrivError(f"cannot read domain {shown!r}: expected {_BBOX_FORM}")
    items = [t.strip() for t in m.group(1).split(",")]
    if len(items) != 5 or any(not t for t in items):
        raise LocalPrivError(f"cannot read domain {shown!r}: expected 5 numbers, {_BBOX_FORM}")
    values: dict[str, float] = {}
    for pos, item in enumerate(items):
        name, eq, raw = item.partition("=")
        name, raw = (name.strip().lower(), raw.strip()) if eq else (_BBOX_FIELDS[pos], item)
        if name not in _BBOX_FIELDS:
            raise LocalPrivError(f"bbox: unknown field {name!r}; expected {_BBOX_FORM}")
        if name in values:
            raise LocalPrivError(f"bbox: {name} given twice in {shown!r}")
        try:
            number = float(raw)
        except ValueError:
            raise LocalPrivError(f"bbox: {name} must be a number, got {raw[:30]!r}") from None
        values[name] = number
    lat0, lon0, lat1, lon1, cell_km = (values[f] for f in _BBOX_FIELDS)
    return GridDomain.covering(lat0, lon0, lat1, lon1, cell_km)


def _parse_product(text: str) -> ProductDomain:
    """``product(NAME=DOMAIN;NAME=DOMAIN;...)``: one attribute per ``;``-separated item, each
    domain in any one-column form above (``age=18..90;education=HS,BA,MA;hours=@hours.txt``)."""
    items = [t.strip() for t in text.strip()[len("product("):-1].split(";") if t.strip()]
    if not items:
        raise LocalPrivError(f"cannot read domain {text[:60]!r}: expected product(NAME=DOMAIN;NAME=DOMAIN;...)")
    names, doms = [], []
    for item in items:
        name, eq, body = item.partition("=")
        if not eq or not name.strip():
            raise LocalPrivError(f"product domain: expected NAME=DOMAIN, got {item[:40]!r}")
        if body.strip().lower().startswith("product("):
            raise LocalPrivError("product domain: an attribute cannot itself be a product")
        names.append(name.strip())
        doms.append(parse_domain(body))
    return ProductDomain(doms, names)

