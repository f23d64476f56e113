"""The local-hashing oracles on the stable hash (XXH64), format version 3.

* ``H_s(x) = XXH64(le64(x), seed=s) mod g`` for ``blh``/``olh``/``lblh``/``lolh`` (published
  vectors of docs/hashing.md, checked against the reference ``xxhash`` package);
* the legacy Carter-Wegman family stays available as ``hash=cw`` and reproduces its old numbers;
* files of format versions 1 and 2 are read with ``hash=cw`` (same estimates as before), new files
  carry version 3 and decode with XXH64.
"""
import json
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from localpriv.data.aggregate import DuckDBAggregator, NumpyAggregator, aggregate
from localpriv.data.formats import FORMAT_VERSION, legacy_spec, spec_for_version
from localpriv.data.observations import Observations
from localpriv.data.reports import report_table, write_reports
from localpriv.estimators.em import log_likelihood
from localpriv.inference import estimate
from localpriv.mechanisms import parse
from localpriv.mechanisms.hashing import cw_hash_values, hash_values
from localpriv.utils.validation import LocalPrivError

#: OLH-level test vectors of docs/hashing.md: (seed s, input index x, hash range g, H_s(x))
OLH_VECTORS = (
    (0, 0, 2, 1),
    (1, 0, 2, 1),
    (7, 42, 5, 2),
    (123456789, 3, 8, 2),
    (2 ** 32 - 1, 99, 21, 7),
    (2 ** 31 + 5, 1000000, 1024, 635),
    (42, 17, 2 ** 30, 880560631),
)


def _ref(seed: int, x: int, g: int) -> int:
    return xxhash.xxh64_intdigest(struct.pack("<Q", x), seed) % g


def test_olh_level_vectors():
    """The published (seed, x, g) -> H_s(x) vectors: reference package, module and mechanisms."""
    for s, x, g, expected in OLH_VECTORS:
        assert _ref(s, x, g) == expected
        assert int(hash_values(np.array([s]), np.array([x]), g)[0]) == expected
    # the mechanisms hash with that family (OLH at eps = log 7 has g = 8)
    olh = parse("olh(k=100,eps=1.9459101090932196)")
    assert olh.g == 8 and olh.hash_family == "xxh64"
    assert int(olh.hash_values(np.array([123456789]), np.array([3]))[0]) == 2
    blh = parse("blh(k=50,eps=1.0)")
    assert int(blh.hash_values(np.array([1]), np.array([0]))[0]) == 1


@pytest.mark.parametrize("spec", ["olh(k=1000,eps=2.0)", "blh(k=1000,eps=1.0)",
                                  "lolh(k=1000,eps_perm=3.0,eps_1=1.0)", "lblh(k=1000,eps_perm=2.0,eps_1=1.0)"])
def test_client_hashes_match_the_reference(spec):
    """What a client in another language computes: H_s(x) from the published definition."""
    mech = parse(spec)
    rng = np.random.default_rng(4)
    x = rng.integers(0, mech.k, 300)
    seeds, h = mech.memoize(x, np.random.default_rng(5)) if spec.startswith(("olh", "blh")) else \
        _longitudinal_hashes(mech, x)
    assert [int(v) for v in h] == [_ref(int(s), int(v), mech.g) for s, v in zip(seeds, x)]
    # a report decodes to (seed, y) with y = H_s(x) w.p. p, as the docs' client snippet says
    r = mech.sample(x, np.random.default_rng(6))
    s, y = r // mech.g, r % mech.g
    same = np.array([_ref(int(a), int(b), mech.g) for a, b in zip(s, x)]) == y
    p = mech.p_star
    assert abs(same.mean() - p) < 5 * np.sqrt(p * (1 - p) / x.size)


def _longitudinal_hashes(mech, x):
    from localpriv.mechanisms.hashing import LocalHashing
    return LocalHashing.memoize(mech, x, np.random.default_rng(5))


def test_hash_parameter_round_trip_and_refusals():
    assert str(parse("olh(k=10,eps=2.0)")) == "olh(k=10,eps=2.0)"          # default: not written
    assert str(parse("olh(k=10,eps=2.0,hash=xxh64)")) == "olh(k=10,eps=2.0)"
    assert str(parse("olh(k=10,eps=2.0,hash=cw)")) == "olh(k=10,eps=2.0,hash=cw)"
    assert str(parse("lolh(k=10,eps_perm=2.0,eps_1=1.0,n_seeds=8,hash=cw)")) == \
        "lolh(k=10,eps_perm=2.0,eps_1=1.0,n_seeds=8,hash=cw)"
    assert parse("olh(k=10,eps=2.0,hash=cw)") != parse("olh(k=10,eps=2.0)")
    with pytest.raises(LocalPrivError, match=r"^olh: hash must be xxh64 or cw, got 'md5'$"):
        parse("olh(k=10,eps=2.0,hash=md5)")
    with pytest.raises(LocalPrivError, match="hash must be"):
        parse("blh(k=10,eps=2.0,hash=3)")


def test_legacy_family_reproduces_its_numbers():
    """``hash=cw`` is the family of every release before format 3, bit for bit (values pinned from
    that release: the hash table and the first reports of ``olh(k=10,eps=2.0)`` under seed 0)."""
    got = cw_hash_values(np.array([0, 1, 7, 123456789]), np.array([0, 0, 42, 3]), 8)
    assert got.tolist() == hash_values(np.array([0, 1, 7, 123456789]), np.array([0, 0, 42, 3]), 8, "cw").tolist()
    assert got.tolist() == PINNED_CW
    r = parse("olh(k=10,eps=2.0,hash=cw)").sample(np.arange(5), np.random.default_rng(0))
    assert r.tolist() == [29227225850, 21885836925, 17562515724, 9269800899, 10576938439]
    # the same draws under XXH64 differ only in y (same seeds): the family is the only change
    r3 = parse("olh(k=10,eps=2.0)").sample(np.arange(5), np.random.default_rng(0))
    assert (r3 // 8).tolist() == (r // 8).tolist() and r3.tolist() != r.tolist()


PINNED_CW = [0, 0, 5, 4]


def test_legacy_spec_rewrite():
    assert legacy_spec("olh(k=10,eps=2.0)") == "olh(k=10,eps=2.0,hash=cw)"
    assert legacy_spec("olh(eps=2.0)") == "olh(eps=2.0,hash=cw)"
    assert legacy_spec("blh") == "blh(hash=cw)"
    assert legacy_spec(" lolh(k=4, eps_perm=2.0, eps_1=1.0, n_seeds=8)") == \
        "lolh(k=4, eps_perm=2.0, eps_1=1.0, n_seeds=8,hash=cw)"
    assert parse(legacy_spec("lolh(k=4, eps_perm=2.0, eps_1=1.0, n_seeds=8)")).hash_family == "cw"
    assert parse(legacy_spec("lblh(k=4,eps_perm=2.0,eps_1=1.0)")).hash_family == "cw"
    for same in ("krr(k=10,eps=2.0)", "sue(k=4,eps=1.0)", "olh(k=10,eps=2.0,hash=cw)",
                 "olh(k=10,eps=2.0,hash=xxh64)", "not a spec ((", "rappor(k=4,m=8)"):
        assert legacy_spec(same) == same
    assert spec_for_version("olh(k=3,eps=1.0)", 2) == spec_for_version("olh(k=3,eps=1.0)", 1) \
        == "olh(k=3,eps=1.0,hash=cw)"
    assert spec_for_version("olh(k=3,eps=1.0)", 3) == spec_for_version("olh(k=3,eps=1.0)", None) \
        == "olh(k=3,eps=1.0)"


# ---- files -------------------------------------------------------------------------------
K = 12
THETA = np.array([0.2, 0.15, 0.12, 0.1, 0.09, 0.08, 0.07, 0.06, 0.05, 0.04, 0.03, 0.01])


def _old_reports(spec="olh(k=12,eps=2.0)", n=1500, seed=1):
    """Reports as a release before format 3 made them: the legacy family, the spec without hash=."""
    legacy = parse(legacy_spec(spec))
    rng = np.random.default_rng(seed)
    x = rng.choice(K, n, p=THETA)
    r = legacy.sample(x, rng)
    old_table = pa.table({"mechanism": pa.array([spec] * n), "report": pa.array(r, pa.int64())})
    return legacy, r, old_table


def _as_version(path, version: int):
    """Rewrite a file written by this release as one of format ``version`` (1 or 2)."""
    path = str(path)
    if path.endswith(".csv"):  # as earlier releases wrote CSV: a first and a last localpriv line
        side = Path(path + ".meta.json")
        meta = json.loads(side.read_text())
        side.unlink()
        body = Path(path).read_text()
        Path(path).write_text(f"#localpriv format={version} kind={meta['localpriv.kind']}\n{body}"
                              f"#localpriv end rows={meta['localpriv.rows']}\n")
        return
    t = pq.read_table(path)
    meta = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items()}
    meta["localpriv.format"] = str(version)
    with pq.ParquetWriter(path, t.schema.remove_metadata()) as w:
        w.write_table(t.replace_schema_metadata(None))
        w.add_key_value_metadata(meta)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_old_report_files_decode_with_the_legacy_family(tmp_path, version, suffix):
    legacy, r, table = _old_reports()
    path = tmp_path / f"old{suffix}"
    write_reports(table, path)
    _as_version(path, version)
    ref = Observations.from_reports(legacy, r)
    ref_loglik = log_likelihood(ref.likelihood_blocks(), THETA)
    aggregators = (DuckDBAggregator(), DuckDBAggregator(fast=False), NumpyAggregator())
    for agg in aggregators if version == 2 else aggregators[:1]:  # fast DuckDB, checked reader, NumPy
        obs = aggregate(path, aggregator=agg)
        assert [str(m) for m in obs.mechanisms] == ["olh(k=12,eps=2.0,hash=cw)"]
        assert log_likelihood(obs.likelihood_blocks(), THETA) == pytest.approx(ref_loglik, rel=1e-12)
    # the estimate is the one the old release made from these reports
    est, ref_est = estimate(obs, "ibu"), estimate(ref, "ibu")
    np.testing.assert_allclose(est.distribution, ref_est.distribution, rtol=0, atol=1e-12)
    # read as a version-3 file, the same reports mean something else (the test is not vacuous)
    new = Observations.from_reports(parse("olh(k=12,eps=2.0)"), r)
    assert abs(log_likelihood(new.likelihood_blocks(), THETA) - log_likelihood(ref.likelihood_blocks(), THETA)) > 10


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_old_counts_files_and_merging_with_new_reports(tmp_path, suffix):
    """A version-2 counts file of L-OLH (legacy) merged with version-3 reports of L-OLH (XXH64):
    two mechanisms, each decoded with its own family; the counts file written is version 3."""
    spec = "lolh(k=12,eps_perm=3.0,eps_1=1.0)"
    legacy, r_old, table = _old_reports(spec, n=2000, seed=2)
    old_counts = tmp_path / f"old-counts{suffix}"
    aggregate(table).save(old_counts)
    _as_version(old_counts, 2)
    new = parse(spec)
    rng = np.random.default_rng(3)
    r_new = new.sample(rng.choice(K, 2000, p=THETA), rng)
    new_reports = tmp_path / f"new{suffix}"
    write_reports(report_table(new, r_new), new_reports)
    merged = aggregate([old_counts, new_reports])
    assert sorted(str(m) for m in merged.mechanisms) == [spec, legacy_spec(spec)]
    ref = Observations.from_reports(legacy, r_old)
    got = next(b for b in merged.blocks if b.mechanism == legacy)
    assert log_likelihood([got.likelihood_block()], THETA) == pytest.approx(
        log_likelihood(ref.likelihood_blocks(), THETA), rel=1e-12)
    # the merged counts, written again, are version 3 and keep hash=cw explicitly
    out = tmp_path / f"merged{suffix}"
    merged.save(out)
    if suffix == ".csv":
        meta = json.loads(Path(str(out) + ".meta.json").read_text())
        assert meta["localpriv.format"] == "3" and meta["localpriv.kind"] == "counts"
        assert "hash=cw" in Path(out).read_text()
    else:
        assert pq.ParquetFile(out).metadata.metadata[b"localpriv.format"] == b"3"
    again = aggregate(out)
    assert sorted(str(m) for m in again.mechanisms) == sorted(str(m) for m in merged.mechanisms)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_new_files_carry_version_3_and_decode_with_xxh64(tmp_path, suffix):
    assert FORMAT_VERSION == 3
    mech = parse("olh(k=12,eps=2.0)")
    rng = np.random.default_rng(8)
    r = mech.sample(rng.choice(K, 1500, p=THETA), rng)
    path = tmp_path / f"new{suffix}"
    write_reports(report_table(mech, r), path)
    if suffix == ".csv":
        meta = json.loads(Path(str(path) + ".meta.json").read_text())
        assert meta["localpriv.format"] == "3" and meta["localpriv.kind"] == "reports"
    else:
        assert pq.ParquetFile(path).metadata.metadata[b"localpriv.format"] == b"3"
    obs = aggregate(path)
    assert obs.mechanisms == [mech] and obs.mechanisms[0].hash_family == "xxh64"
    ref = Observations.from_reports(mech, r)
    assert log_likelihood(obs.likelihood_blocks(), THETA) == pytest.approx(
        log_likelihood(ref.likelihood_blocks(), THETA), rel=1e-12)


def test_unmarked_files_are_read_as_written(tmp_path):
    """A CSV without the #localpriv lines (another tool, another language) means its specs as
    written today: olh(...) is XXH64; a legacy file must say hash=cw."""
    mech = parse("olh(k=12,eps=2.0)")
    r = mech.sample(np.arange(12).repeat(20), np.random.default_rng(9))
    lines = ["mechanism,report"] + [f'"{mech}",{v}' for v in r]
    (tmp_path / "plain.csv").write_text("\n".join(lines) + "\n")
    assert aggregate(tmp_path / "plain.csv").mechanisms == [mech]
    lines = ["mechanism,report"] + [f'"olh(k=12,eps=2.0,hash=cw)",{v}' for v in r]
    (tmp_path / "plain-cw.csv").write_text("\n".join(lines) + "\n")
    assert aggregate(tmp_path / "plain-cw.csv").mechanisms[0].hash_family == "cw"


def test_other_mechanisms_in_old_files_are_untouched(tmp_path):
    krr = parse("krr(k=12,eps=1.0)")
    r = krr.sample(np.arange(12).repeat(10), np.random.default_rng(1))
    path = tmp_path / "old.parquet"
    write_reports(report_table(krr, r), path)
    _as_version(path, 2)
    assert aggregate(path).mechanisms == [krr]
