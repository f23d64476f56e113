"""Free-will privacy: every user applies his own mechanism (seed 003 section 3).

Data model: a report set in which every report names its mechanism (the ``mechanism`` column of a
report table), so kinds and parameters may differ per user. :func:`localpriv.data.aggregate.aggregate`
groups by ``(mechanism, report)`` in DuckDB and yields one block -- the triplet
``(Z^A, q^A, n^A)`` of seed 003 section 6 -- per distinct mechanism. This module adds:

* :func:`perturb_mixed` -- obfuscate raw values with one mechanism per user, grouped by distinct
  mechanism and sampled vectorized per group;
* :func:`perturb_file_mixed` -- the same for a values file, streamed: each row's mechanism read
  from a column of the file, or from a :class:`Policy` (:func:`load_policy`: a small JSON/TOML
  file mapping the values of a group column to specs) -- ``localpriv perturb --mechanism-column``
  and ``--policy``;
* :func:`simulate_counts` -- the aggregated counts of many mechanisms drawn directly (multinomial
  per mechanism: exactly the distribution of the aggregated reports), for large simulations;
* :func:`naive_gibu` -- the per-user GIBU iteration of seed 003 Eq. (18), ``O(n k)`` per
  iteration, as a *reference implementation for tests only*;
* :func:`krr_average_eps`, :func:`rappor_average_eps` (Eqs. 11 and 16) and the error bounds of
  Propositions 5.2 (:func:`inv_m_krr_bound`) and 5.4 (:func:`rap_m_bound`);
* :func:`rappor_observations` -- basic one-time RAPPOR reports (the library's ``sue``
  mechanism) of many privacy levels, grouped, for the Table II reproduction.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import numpy.typing as npt
import pandas as pd

from localpriv.data.formats import REPORT_SUFFIXES, arrow, check_output
from localpriv.data.observations import ObservationBlock, Observations
from localpriv.data.reports import (
    PerturbSummary,
    RowChunk,
    block_size,
    perturb_file,
    perturb_rows,
    report_array,
    report_frame,
    report_table,
    report_width,
)
from localpriv.domains import Domain
from localpriv.mechanisms import Mechanism, parse
from localpriv.mechanisms.base import collection_size, spec_size_cap
from localpriv.utils.optional import available
from localpriv.utils.rng import spawn_generators
from localpriv.utils.validation import LocalPrivError, check_distribution, check_int, check_rng

# pyarrow is the optional group ``parquet``: without it report tables are pandas frames
if TYPE_CHECKING or available("pyarrow"):
    import pyarrow as pa

__all__ = ["perturb_mixed", "perturb_file_mixed", "perturb_values_file", "Policy", "load_policy", "mixed_block_rows",
           "simulate_counts", "naive_gibu", "krr_average_eps", "rappor_average_eps",
           "inv_m_krr_bound", "inv_m_krr_exact", "rap_m_bound", "rappor_observations", "split_users"]


def perturb_mixed(values: Any, specs: Sequence[str | Mechanism] | np.ndarray, rng: np.random.Generator,
                  domain: Domain | None = None) -> pa.Table | pd.DataFrame:
    """Obfuscate ``values[i]`` with mechanism ``specs[i]``; one report table for all users.

    Users are grouped by distinct mechanism (``numpy.unique`` on the specs) and each group is
    sampled in one vectorized call; the loop runs over distinct mechanisms, never over users.
    Report order follows the groups (aggregation does not depend on it).

    Parameters
    ----------
    values : array (n,)
        Raw values, encoded by ``domain`` (or domain indices when ``domain`` is None).
    specs : sequence of str or Mechanism, length n
        The mechanism of each user.
    rng : numpy.random.Generator
        The source of randomness; groups draw from it in turn, in the order of their sorted specs.
    domain : Domain, optional
        The values' domain (fills ``k`` of specs that leave it out).

    Returns
    -------
    pyarrow.Table or pandas.DataFrame
        Columns ``mechanism`` (string) and ``report`` (a pandas frame where pyarrow, the optional
        group ``parquet``, is not installed). All mechanisms must produce one report kind
        (index, float or bit vector) since a table column has one type.
    """
    rng = check_rng(rng)
    x = domain.encode(values) if domain is not None else np.asarray(values)
    spec_arr = np.asarray([str(s) for s in specs]) if not isinstance(specs, np.ndarray) else specs.astype(str)
    if spec_arr.shape[0] != x.shape[0]:
        raise LocalPrivError(f"{x.shape[0]} values but {spec_arr.shape[0]} mechanism specs")
    uniq, inv = np.unique(spec_arr, return_inverse=True)
    if not arrow():
        return _mixed_frame(uniq, inv, x, rng, domain)
    tables = []
    for g, spec in enumerate(uniq):  # one iteration per distinct mechanism
        mech = parse(spec, domain)
        sel = inv == g
        t = report_table(mech, mech.sample(x[sel], rng))
        tables.append(t.set_column(0, "mechanism", t.column("mechanism").cast(pa.string())))
    types = {t.schema.field("report").type for t in tables}
    if len(types) > 1:
        if all(pa.types.is_integer(ty) or pa.types.is_floating(ty) for ty in types):
            tables = [t.set_column(1, "report", t.column("report").cast(pa.float64())) for t in tables]
        else:
            raise LocalPrivError(f"mechanisms produce reports of different kinds ({', '.join(map(str, types))}); "
                                 "write one report file per kind and aggregate them together")
    return pa.concat_tables(tables)


def _mixed_frame(uniq: np.ndarray, inv: np.ndarray, x: np.ndarray, rng: np.random.Generator,
                 domain: Domain | None) -> pd.DataFrame:
    """:func:`perturb_mixed`'s table as a pandas frame (without pyarrow): the same draws."""
    parts, codes = [], []
    for g, spec in enumerate(uniq):  # one iteration per distinct mechanism
        mech = parse(spec, domain)
        sel = inv == g
        parts.append(mech.sample(x[sel], rng))
        codes.append(np.full(int(sel.sum()), g, np.int32))
    kinds = {("binary" if p.ndim == 2 else p.dtype.kind) for p in parts}
    if "binary" in kinds and len(kinds) > 1:
        raise LocalPrivError("mechanisms produce reports of different kinds (bit vectors and numbers); "
                             "write one report file per kind and aggregate them together")
    if kinds == {"binary"}:
        widths = {p.shape[1] for p in parts}
        if len(widths) > 1:
            raise LocalPrivError("mechanisms produce bit vectors of different widths; write one report file per "
                                 "kind and aggregate them together")
        reports = np.concatenate(parts)
    else:
        reports = np.concatenate([p.astype(np.float64) if len(kinds) > 1 else p for p in parts])
    return report_frame([str(u) for u in uniq], np.concatenate(codes), reports)


# --------------------------------------------------------------------------------------------
# Free will from files: a mechanism column, or a policy mapping groups to mechanisms
# --------------------------------------------------------------------------------------------
#: Longest mechanism spec accepted from a column or a policy file (characters).
MAX_SPEC_CHARS = 1_000
#: Most distinct mechanisms in one mechanism column or one policy.
MAX_MECHANISMS = 10_000
#: Largest policy file read (bytes).
MAX_POLICY_BYTES = 1 << 20
#: Deepest nesting of arrays/tables a policy file may have (a policy needs 3)
MAX_POLICY_DEPTH = 32
#: The version of the policy file format (the ``version`` key; optional).
POLICY_VERSION = 1
_POLICY_KEYS = ("version", "column", "specs", "default")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass(frozen=True)
class Policy:
    """Which mechanism each group of users applies: ``specs[value]`` for the rows whose ``column``
    holds ``value`` (compared as text, surrounding blanks ignored), ``default`` for other values
    (without a default they are refused). Read one with :func:`load_policy`.

    Parameters
    ----------
    column : str
        The group column of the values file (a name, or a 1-based number).
    specs : dict of str to str
        Group value -> mechanism spec (``{"low": "krr(eps=0.5)", "high": "krr(eps=4.0)"}``).
    default : str, optional
        The spec of groups not in ``specs``.
    source : str
        Where the policy came from (named in errors).
    """

    column: str
    specs: Mapping[str, str]
    default: str | None = None
    source: str = "<policy>"

    @classmethod
    def from_dict(cls, data: Any, source: str = "<policy>") -> Policy:
        """Validate a parsed policy (``{"column": ..., "specs": {...}, "default": ..., "version": 1}``)
        strictly: unknown keys, wrong types, empty or duplicate group values and over-long specs
        are refused in one line naming ``source`` and the key."""
        if not isinstance(data, dict):
            raise LocalPrivError(f"{source}: a policy is a table of keys (column, specs, default, version), "
                                 f"got {type(data).__name__}")
        for key in data:
            if key not in _POLICY_KEYS:
                raise LocalPrivError(f"{source}: unknown key {_short(key)}; a policy has the keys "
                                     f"{', '.join(_POLICY_KEYS)}")
        version = data.get("version", POLICY_VERSION)
        if isinstance(version, bool) or not isinstance(version, int) or version != POLICY_VERSION:
            raise LocalPrivError(f"{source}: version {_short(version)} is not supported (this localpriv reads "
                                 f"policy version {POLICY_VERSION})")
        column = data.get("column")
        if not isinstance(column, str) or not column.strip() or len(column) > 200 or "\n" in column:
            raise LocalPrivError(f"{source}: key 'column' must name the group column of the values file "
                                 f"(a name or a number), got {_short(column)}")
        specs = data.get("specs")
        if not isinstance(specs, dict) or not specs:
            raise LocalPrivError(f"{source}: key 'specs' must be a table of group value = mechanism spec, "
                                 f"got {_short(specs)}")
        if len(specs) > MAX_MECHANISMS:
            raise LocalPrivError(f"{source}: key 'specs' has {len(specs):,} entries (at most {MAX_MECHANISMS:,})")
        clean: dict[str, str] = {}
        for value, spec in specs.items():
            name = str(value).strip()
            if not name:
                raise LocalPrivError(f"{source}: key 'specs' has an empty group value")
            if name in clean:
                raise LocalPrivError(f"{source}: key 'specs' gives the group {_short(name)} twice")
            clean[name] = _policy_spec(spec, f"{source}: specs.{_short(name)}")
        default = data.get("default")
        if default is not None:
            default = _policy_spec(default, f"{source}: key 'default'")
        return cls(column.strip(), clean, default, source)

    def spec_for(self, value: str) -> str | None:
        """The spec of a group value (``None``: not mapped and no default)."""
        return self.specs.get(value.strip(), self.default)

    def mechanisms(self, domain: Domain | None = None) -> dict[str, Mechanism]:
        """Every spec of the policy parsed as data (``trusted=False``), errors naming the key."""
        out: dict[str, Mechanism] = {}
        entries = list(self.specs.items()) + ([("(default)", self.default)] if self.default else [])
        for name, spec in entries:
            if spec in out:
                continue
            try:
                out[spec] = parse(spec, domain, trusted=False)
            except LocalPrivError as exc:
                key = "default" if name == "(default)" else f"specs.{_short(name)}"
                raise LocalPrivError(f"{self.source}: {key}: {exc}") from None
        collection_size(out.values(), f"{self.source}: key 'specs'")
        return out


def _policy_spec(spec: Any, where: str) -> str:
    if not isinstance(spec, str) or not spec.strip():
        raise LocalPrivError(f"{where} must be a mechanism spec such as 'krr(eps=1.0)', got {_short(spec)}")
    if len(spec) > MAX_SPEC_CHARS:
        raise LocalPrivError(f"{where}: a spec of {len(spec):,} characters is refused (at most {MAX_SPEC_CHARS:,})")
    return spec.strip()


def load_policy(path: str | Path) -> Policy:
    """Read a free-will policy file (``.json`` or ``.toml``), strictly.

    The file is data, never instructions: it may hold only the keys ``column`` (the group column
    of the values file), ``specs`` (group value -> mechanism spec), ``default`` (optional: the
    spec of unlisted groups) and ``version`` (optional, 1); specs are later parsed as untrusted
    (no file parameters, at most :data:`MAX_SPEC_CHARS` characters). Every problem is one line
    naming the file and the key. For example (TOML)::

        version = 1
        column = "privacy"
        default = "krr(eps=1.0)"

        [specs]
        low = "krr(eps=4.0)"
        high = "krr(eps=0.5)"

    Parameters
    ----------
    path : str or Path
        The policy file.

    Returns
    -------
    Policy
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise LocalPrivError(f"{path}: a policy file is .json or .toml, got {suffix or 'no suffix'}")
    try:
        size = path.stat().st_size
        if size > MAX_POLICY_BYTES:
            raise LocalPrivError(f"{path}: {size:,} bytes is too large for a policy file (at most "
                                 f"{MAX_POLICY_BYTES:,})")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LocalPrivError(f"policy file {path} not found") from None
    except IsADirectoryError:
        raise LocalPrivError(f"{path} is a folder, not a policy file") from None
    except OSError as exc:
        raise LocalPrivError(f"cannot read policy file {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LocalPrivError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    depth = _nesting_depth(text)
    if depth > MAX_POLICY_DEPTH:
        raise LocalPrivError(f"{path}: nested more than {MAX_POLICY_DEPTH} levels deep (a policy file nests at most "
                             f"{MAX_POLICY_DEPTH})")
    try:
        if suffix == ".toml":
            import tomllib
            data = tomllib.loads(text)
        else:
            data = json.loads(text, object_pairs_hook=_unique_keys(path))
    except LocalPrivError:
        raise
    except RecursionError:
        raise LocalPrivError(f"{path}: nested too deeply to read (at most {MAX_POLICY_DEPTH} levels)") from None
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError
        msg = " ".join(str(exc).split())
        raise LocalPrivError(f"cannot read policy file {path}: {msg[:200]}") from None
    return Policy.from_dict(data, str(path))


def _nesting_depth(text: str) -> int:
    """Deepest nesting of ``[``/``{`` outside quoted strings (JSON and TOML), in one pass, so that a
    deeply nested file is refused before a recursive parser sees it."""
    depth = deepest = 0
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_POLICY_DEPTH:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _unique_keys(path: Path) -> Callable[[list], dict]:
    def hook(pairs: list) -> dict:
        out: dict = {}
        for key, value in pairs:
            if key in out:
                raise LocalPrivError(f"{path}: key {_short(key)} is given twice")
            out[key] = value
        return out
    return hook


def mixed_block_rows(first: Mechanism) -> int:
    """Rows per block of :func:`perturb_file_mixed`: :func:`localpriv.data.reports.block_size` of the
    first row's mechanism (8 MiB of its reports: 2^20 rows of index or number reports).

    Every mechanism of one report file makes reports of the same kind and width (others are
    refused), so the first fixes the memory of a block whatever the number of mechanisms; blocks
    are cut at fixed row positions, so the reports depend on the seed and the file only, never on
    how the file is read in chunks.
    """
    return block_size(first)


class _Mixture:
    """The distinct mechanisms of a file: one id, one parsed mechanism and one random stream each
    (spawned from the caller's generator in the order the mechanisms first appear)."""

    def __init__(self, domain: Domain, rng: np.random.Generator, path: str, label_col: str,
                 policy: Policy | None):
        self.domain, self.rng, self.path, self.label_col, self.policy = domain, rng, path, label_col, policy
        self._width = report_width
        self.ids: dict[str, int] = {}          # canonical spec -> id
        self.label_ids: dict[str, int] = {}    # label as read -> id
        self.mechs: list[Mechanism] = []
        self.rngs: list[np.random.Generator] = []
        self.counts: list[int] = []
        self.kind: tuple | None = None
        self.first_spec = ""
        self.policy_mechs = policy.mechanisms(domain) if policy is not None else {}

    def _spec(self, label: str) -> str:
        if self.policy is None:
            if len(label) > MAX_SPEC_CHARS:
                raise LocalPrivError(f"a spec of {len(label):,} characters is refused (at most {MAX_SPEC_CHARS:,})")
            return label
        spec = self.policy.spec_for(label)
        if spec is None:
            raise LocalPrivError(f"the group {_short(label)} is not in {self.policy.source} (which has no default)")
        return spec

    def _new(self, label: str) -> int:
        spec = self._spec(label)
        mech = self.policy_mechs.get(spec) if self.policy is not None else None
        if mech is None:
            mech = parse(spec, self.domain, trusted=False)
        canon = str(mech)
        gid = self.ids.get(canon)
        if gid is not None:
            return gid
        kind = (mech.report_kind, self._width(mech) if mech.report_kind == "binary" else None)
        if self.kind is None:
            self.kind, self.first_spec = kind, canon
        elif kind != self.kind:
            raise LocalPrivError(f"{canon} makes reports of another kind than {self.first_spec} (index, number or "
                                 "bit vector of one width): one report file holds one kind; split the users "
                                 "into one file per kind and aggregate the files together")
        if len(self.mechs) >= MAX_MECHANISMS:
            raise LocalPrivError(f"more than {MAX_MECHANISMS:,} distinct mechanisms")
        self.outputs = getattr(self, "outputs", 0) + collection_size([mech], "the mechanism column")
        if self.outputs > spec_size_cap():
            collection_size(self.mechs + [mech], "the mechanism column")  # the one-line refusal
        child = spawn_generators(self.rng, 1)
        self.ids[canon] = len(self.mechs)
        self.mechs.append(mech)
        self.rngs.append(self.rng if child is None else child[0])
        self.counts.append(0)
        return self.ids[canon]

    def codes(self, coded: tuple[np.ndarray, list[str]] | None, first: int, kept: np.ndarray | None, word: str,
              rest: Iterator[RowChunk]) -> np.ndarray:
        """Mechanism ids of a chunk's rows; an unusable label is refused with its rows counted."""
        assert coded is not None  # the label column is read
        codes, dictionary = coded
        lut = np.empty(len(dictionary), dtype=np.int64)
        for j, label in enumerate(dictionary):
            gid = self.label_ids.get(label)
            if gid is None:
                try:
                    gid = self._new(label)
                except LocalPrivError as exc:
                    self._refuse(label, exc, np.flatnonzero(codes == j), first, kept, word, rest)
                if len(self.label_ids) < 10 * MAX_MECHANISMS:
                    self.label_ids[label] = gid
            lut[j] = gid
        return lut[codes]

    def _refuse(self, label: str, exc: LocalPrivError, at: np.ndarray, first: int, kept: np.ndarray | None,
                word: str, rest: Iterator[RowChunk]) -> NoReturn:
        """Count the rows holding ``label`` in the rest of the file too, then refuse in one line."""
        rows = (kept[at] if kept is not None else at) + first
        total, partial = int(at.size), False
        try:
            for _vals, coded, _first, _kept in rest:
                assert coded is not None  # the label column is read
                codes, dictionary = coded
                if label in dictionary:
                    total += int(np.count_nonzero(codes == dictionary.index(label)))
        except LocalPrivError:
            partial = True
        how_many = f"at least {total:,}" if partial else f"{total:,}"
        raise LocalPrivError(f"{self.path}: column {self.label_col} holds {_short(label)} at {word} {int(rows[0])} "
                             f"({how_many} row(s) in all): {exc}") from None

    def sample_block(self, x: np.ndarray, g: np.ndarray) -> pa.Table | pd.DataFrame:
        """One block: the rows of each mechanism sampled in one call from its own stream."""
        order = np.argsort(g, kind="stable")
        gs = g[order]
        cuts = np.flatnonzero(np.diff(gs)) + 1
        starts, ends = np.r_[0, cuts], np.r_[cuts, gs.size]
        parts = []
        for a, b in zip(starts, ends):  # one iteration per mechanism present in the block
            gid = int(gs[a])
            parts.append(self.mechs[gid].sample(x[order[a:b]], self.rngs[gid]))
            self.counts[gid] += int(b - a)
        reports = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if not arrow():
            return report_frame([str(m) for m in self.mechs], gs, reports)
        mech = pa.DictionaryArray.from_arrays(pa.array(gs.astype(np.int32)),
                                              pa.array([str(m) for m in self.mechs], pa.string()))
        return pa.table({"mechanism": mech, "report": report_array(reports)})


def perturb_file_mixed(input: str | Path, output: str | Path, domain: Domain, rng: np.random.Generator, *,
                       mechanism_column: str | None = None, policy: Policy | str | Path | None = None,
                       column: str | None = None, drop_missing: bool = False, header: bool = True,
                       outside: str = "error", progress: Callable[[int], None] | None = None,
                       fmt: str | None = None, strip: bool = True) -> PerturbSummary:
    """Obfuscate a values file with each row's own mechanism (free will), streamed, into one
    report file whose rows name their mechanism (so :func:`localpriv.data.aggregate` makes one block
    per mechanism and the IBU family estimates the mixture: GIBU, seed 003).

    Each row's mechanism is either read from the file (``mechanism_column``: a spec per row, e.g.
    ``krr(eps=0.5)``) or given by a :class:`Policy` (``policy``: the value of the policy's group
    column picks the spec). Specs are data: parsed as untrusted, once per distinct spec. Rows are
    cut into fixed blocks of :func:`mixed_block_rows` rows and, within a block, the rows of each
    mechanism are sampled in one vectorized call from that mechanism's own random stream
    (spawned from ``rng`` in the order the mechanisms first appear): the loop runs over blocks
    and mechanisms, never over rows, and the reports depend only on the seed and the file.

    Every row is accounted for: ``rows == reports + dropped`` (+ ``outside`` when dropped); an
    unknown group, a bad spec or a missing value is refused in one line naming the column, the
    first row and how many rows hold it. The output is written atomically.

    Parameters
    ----------
    input : str or Path
        CSV, TSV or Parquet file of raw values.
    output : str or Path
        The report file (``.parquet`` or ``.csv``).
    domain : Domain
        The values' domain (fills ``k`` of the specs).
    rng : numpy.random.Generator
        The source of the mechanisms' streams.
    mechanism_column : str, optional
        The column holding each row's mechanism spec (name or 1-based number).
    policy : Policy, or path of a policy file, optional
        Group value -> spec (see :func:`load_policy`); exactly one of ``mechanism_column`` and
        ``policy`` is given.
    column : str, optional
        The value column(s) (default: the first; ``"lat,lon"`` for a grid).
    drop_missing : bool
        Drop and count rows whose value or mechanism/group is missing instead of refusing.
    header : bool
        Whether the first line of a CSV/TSV file names the columns.
    outside : {"error", "drop", "clamp"}
        Grid domains: what to do with points outside the grid (counted).
    progress : callable, optional
        Called with the number of rows read so far after every chunk.
    fmt : str, optional
        ``csv``, ``tsv``, ``parquet`` or ``json``, whatever the suffix (default: from the suffix).
    strip : bool
        Remove surrounding blanks from text values (default).

    Returns
    -------
    PerturbSummary
        With ``by_mechanism``: the number of reports of each mechanism.
    """
    rng = check_rng(rng)
    if (mechanism_column is None) == (policy is None):
        raise LocalPrivError("give either a mechanism column or a policy (not both)")
    if domain is None:
        raise LocalPrivError("mixed perturbation needs the values' domain")
    if policy is not None and not isinstance(policy, Policy):
        policy = load_policy(policy)
    label_col = mechanism_column if policy is None else policy.column
    mix = _Mixture(domain, rng, str(input), repr(str(label_col)), policy)
    return perturb_rows(input, output, domain, mix, label_column=str(label_col), column=column,
                        drop_missing=drop_missing, header=header, outside=outside, progress=progress,
                        fmt=fmt, strip=strip)


def perturb_values_file(input: str | Path, output: str | Path, domain: Domain, rng: np.random.Generator, *,
                        mechanism: str | Mechanism | None = None, mechanism_column: str | None = None,
                        policy: Policy | str | Path | None = None, column: str | None = None,
                        drop_missing: bool = False, header: bool = True, outside: str = "error",
                        progress: Callable[[int], None] | None = None, fmt: str | None = None,
                        strip: bool = True) -> PerturbSummary:
    """Obfuscate a values file into a report file, checked first (``.parquet`` or ``.csv``, not an
    input): every row with ``mechanism`` (:func:`localpriv.data.reports.perturb_file`), or each row
    its own (``mechanism_column`` or ``policy``: :func:`perturb_file_mixed`); give exactly one."""
    check_output(output, REPORT_SUFFIXES, [input], what="report file")
    if sum(v is not None for v in (mechanism, mechanism_column, policy)) != 1:
        raise LocalPrivError("give one of mechanism (every row), mechanism_column or policy (each row its own)")
    if mechanism is not None:
        return perturb_file(input, output, mechanism, domain, rng, column=column, drop_missing=drop_missing,
                            header=header, outside=outside, progress=progress, fmt=fmt, strip=strip)
    return perturb_file_mixed(input, output, domain, rng, mechanism_column=mechanism_column, policy=policy,
                              column=column, drop_missing=drop_missing, header=header, outside=outside,
                              progress=progress, fmt=fmt, strip=strip)


def split_users(n: int, n_mechanisms: int, rng: np.random.Generator | int | None = None, *,
                random: bool = False) -> np.ndarray:
    """How many of ``n`` users apply each of ``n_mechanisms`` mechanisms.

    Equal shares (the first ``n mod M`` get one more) or, with ``random=True``, a uniform
    multinomial draw (users pick a mechanism at random, as in Proposition 5.1's "finite set").
    """
    n = check_int(n, "n", minimum=1)
    M = check_int(n_mechanisms, "n_mechanisms", minimum=1)
    if random:
        return check_rng(rng).multinomial(n, np.full(M, 1.0 / M))
    base = np.full(M, n // M)
    base[: n % M] += 1
    return base


def simulate_counts(theta: Any, mechanisms: Sequence[str | Mechanism], n_per_mechanism: Any,
                    rng: np.random.Generator, domain: Domain | None = None) -> Observations:
    """Draw the aggregated counts of ``n^A`` users per mechanism, users' values i.i.d. ``theta``.

    For mechanism ``A`` with finite channel: ``n^A_x ~ Multinomial(n^A, theta)`` then the counts
    of outputs are ``sum_x Multinomial(n^A_x, A[x])`` -- exactly the law of the aggregated reports
    of seed 003 section 3, drawn in ``O(k |Z^A|)`` whatever ``n^A``.

    Parameters
    ----------
    theta : array (k,)
        The users' true distribution.
    mechanisms : sequence of str or Mechanism
        One mechanism per group of users.
    n_per_mechanism : sequence of int
        Users per mechanism (:func:`split_users` makes equal or random shares).
    rng : numpy.random.Generator
        The source of randomness.
    domain : Domain, optional
        Fills ``k`` of the specs.

    Returns
    -------
    Observations
        One block per mechanism with at least one user.
    """
    rng = check_rng(rng)
    theta = check_distribution(theta, name="theta")
    blocks = []
    for mech, nA in zip(mechanisms, np.asarray(n_per_mechanism, dtype=np.int64)):
        mech = parse(mech, domain)
        if nA <= 0:
            continue
        C = mech.channel()
        nx = rng.multinomial(int(nA), theta)
        counts = rng.multinomial(nx, C).sum(axis=0)
        keep = counts > 0
        blocks.append(ObservationBlock(mech, np.flatnonzero(keep), counts[keep]))
    return Observations(blocks, domain)


def naive_gibu(G: npt.ArrayLike, theta0: npt.ArrayLike | None = None, delta: float = 1e-6,
               max_iter: int = 10_000) -> tuple[np.ndarray, int]:
    """Per-user GIBU, seed 003 Eq. (18) -- a reference implementation for tests, ``O(n k)``/iteration.

    ``theta'_x = (1/n) sum_i theta_x G[x,i] / sum_u theta_u G[u,i]`` where ``G[x, i]`` is the
    probability of user ``i``'s observation given ``x``; stopped like Algorithm 1, when the
    log-likelihood ``sum_i log sum_x theta_x G[x,i]`` changes by less than ``delta``.

    Returns
    -------
    theta, iterations
    """
    G = np.asarray(G, dtype=float)
    k, n = G.shape
    theta = np.full(k, 1.0 / k) if theta0 is None else np.asarray(theta0, dtype=float).copy()
    L = np.log(theta @ G).sum()
    for t in range(1, max_iter + 1):
        post = theta[:, None] * G / (theta @ G)[None, :]  # k x n posteriors, one column per user
        theta = post.mean(axis=1)
        L_new = np.log(theta @ G).sum()
        if abs(L_new - L) < delta:
            return theta, t
        L = L_new
    return theta, max_iter


# --------------------------------------------------------------------------------------------
# Averaged privacy levels and error bounds (seed 003 sections 5.2 and 5.4)
# --------------------------------------------------------------------------------------------
def krr_average_eps(eps: npt.ArrayLike, k: int, weights: npt.ArrayLike | None = None) -> float:
    """``eps[n]`` of Eq. 11: ``1/(k-1+e^{eps[n]}) = mean_i 1/(k-1+e^{eps_i})``.

    The average of k-RR mechanisms of levels ``eps_i`` (optionally weighted by user counts) is the
    k-RR of level ``eps[n]``.
    """
    e = np.asarray(eps, dtype=float)
    w = np.ones_like(e) if weights is None else np.asarray(weights, dtype=float)
    b = (w @ (1.0 / (k - 1 + np.exp(e)))) / w.sum()
    return float(np.log(1.0 / b - (k - 1)))


def rappor_average_eps(eps: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> float:
    """``eps[n]`` of Eq. 16: ``1/(1+e^{eps[n]/2}) = mean_i 1/(1+e^{eps_i/2})``."""
    e = np.asarray(eps, dtype=float)
    w = np.ones_like(e) if weights is None else np.asarray(weights, dtype=float)
    q = (w @ (1.0 / (1.0 + np.exp(e / 2)))) / w.sum()
    return float(2.0 * np.log(1.0 / q - 1.0))


def inv_m_krr_bound(theta: npt.ArrayLike, eps: npt.ArrayLike, n: float | None = None,
                    weights: npt.ArrayLike | None = None) -> float:
    """Proposition 5.2: upper bound on ``E ||theta_hat - theta||_2^2`` of [INV]M under k-RR mixtures.

    ``(1 - sum_x theta_x^2)/n + (k-1)/n * (k + 2(e^{eps[n]}-1)) / (e^{eps[n]}-1)^2``, with
    ``eps[n]`` of Eq. 11 over the users' levels ``eps`` (one per user, or one per mechanism with
    ``weights`` the numbers of users; then ``n`` defaults to their sum). Equality when all levels
    are equal. The bound is for the raw estimate (before normalization/projection).
    """
    theta = check_distribution(theta, name="theta")
    k = theta.size
    e = np.atleast_1d(np.asarray(eps, dtype=float))
    if n is None:
        n = float(e.size if weights is None else np.sum(weights))
    en = np.exp(krr_average_eps(e, k, weights))
    return float((1 - theta @ theta) / n + (k - 1) / n * (k + 2 * (en - 1)) / (en - 1) ** 2)


def rap_m_bound(theta: npt.ArrayLike, eps: npt.ArrayLike, n: float | None = None,
                weights: npt.ArrayLike | None = None) -> float:
    """Proposition 5.4: upper bound on ``E ||theta_hat - theta||_2^2`` of [RAP]M.

    ``(1 - sum_x theta_x^2)/n + (1/n) k e^{eps[n]/2} / (e^{eps[n]/2} - 1)^2``, ``eps[n]`` of Eq. 16.
    Equality when all levels are equal; for the raw estimate of Eq. 17.
    """
    theta = check_distribution(theta, name="theta")
    k = theta.size
    e = np.atleast_1d(np.asarray(eps, dtype=float))
    if n is None:
        n = float(e.size if weights is None else np.sum(weights))
    h = np.exp(rappor_average_eps(e, weights) / 2)
    return float((1 - theta @ theta) / n + k * h / (n * (h - 1) ** 2))


def inv_m_krr_exact(theta: npt.ArrayLike, eps: npt.ArrayLike, weights: npt.ArrayLike) -> float:
    """Exact ``E ||theta_hat - theta||_2^2`` of raw [INV]M for k-RR mechanisms with ``weights`` users each.

    Derived directly: with ``b_A = 1/(k-1+e^{eps_A})``, ``a_A = e^{eps_A} b_A``, the per-user
    output probabilities ``m^A_z = b_A + (a_A - b_A) theta_z`` and ``bbar, abar`` their averages,
    ``theta_hat = (q[n] - bbar)/(abar - bbar)`` and
    ``E||.||^2 = sum_z sum_A n_A m^A_z (1 - m^A_z) / (n^2 (abar - bbar)^2)``.
    Used to check Proposition 5.2 (the bound is >= this, with equality for equal levels).
    """
    theta = check_distribution(theta, name="theta")
    k = theta.size
    e = np.asarray(eps, dtype=float)
    w = np.asarray(weights, dtype=float)
    n = w.sum()
    b = 1.0 / (k - 1 + np.exp(e))
    a = np.exp(e) * b
    m = b[:, None] + (a - b)[:, None] * theta[None, :]
    var = (w[:, None] * m * (1 - m)).sum()
    return float(var / (n ** 2 * ((w @ a - w @ b) / n) ** 2))


# --------------------------------------------------------------------------------------------
# Basic one-time RAPPOR reports (seed 003 Eq. 15) for the Table II reproduction
# --------------------------------------------------------------------------------------------
def rappor_observations(theta: npt.ArrayLike, eps_list: Iterable[float], n_per_mechanism: Iterable[int],
                        rng: np.random.Generator) -> Observations:
    """Basic one-time RAPPOR reports of ``n^A`` users per level, identical reports grouped.

    Values are drawn i.i.d. from ``theta``; user ``i`` reports with ``sue(k=k,eps=eps_A)`` -- basic
    one-time RAPPOR (seed 003 Eq. 15: every bit of the one-hot encoding kept w.p.
    ``e^{eps/2}/(1+e^{eps/2})``), bit-packed reports. Identical reports are counted with
    ``numpy.unique`` (vectorized), giving one block per mechanism; estimators then use the
    mechanism's exact factorized likelihood (sparse/dense ``SupportBlock``) and its ``p_star``,
    ``q_star``, ``support_counts`` ([RAP]M, RAP).
    """
    rng = check_rng(rng)
    theta = check_distribution(theta, name="theta")
    k = theta.size
    blocks = []
    for eps, nA in zip(eps_list, n_per_mechanism):
        mech = parse(f"sue(k={k},eps={float(eps)!r})")
        x = rng.choice(k, size=int(nA), p=theta)
        reports, counts = np.unique(mech.sample(x, rng), axis=0, return_counts=True)
        blocks.append(ObservationBlock(mech, reports, counts))
    return Observations(blocks)
