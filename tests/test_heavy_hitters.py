"""Heavy hitters of strings by PEM: encoding, keys, hashing, pruning, accuracy on
Zipf data, interval coverage, privacy constants, the command line. Fixed seeds; tolerances from the
estimator's variance."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from localpriv import LocalPrivError
from localpriv.cli.main import app
from localpriv.heavy_hitters.pem import (
    FORMAT,
    FORMAT_VERSION,
    PEMPlan,
    StringEncoding,
    _prefix,
    _set_bits,
    _valid,
    heavy_hitters,
    pem_identify,
    pem_perturb,
    prefix_keys,
    treehist_identify,
)
from localpriv.mechanisms.stablehash import hash_keys, hits_mod, key_lanes, to_range

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def zipf_words(rng, n, vocab=400, s=1.1, max_len=4):
    """``n`` draws from a Zipf(s) law over ``vocab`` distinct random lower-case words."""
    words = set()
    while len(words) < vocab:
        length = int(rng.integers(1, max_len + 1))
        words.add("".join(rng.choice(list(LETTERS), length)))
    words = np.array(sorted(words), dtype=object)
    rng.shuffle(words)
    p = 1.0 / np.arange(1, vocab + 1) ** s
    p /= p.sum()
    return words[rng.choice(vocab, n, p=p)], words, p


# ------------------------------------------------------------------------------------------------
# encoding, keys, hashing, pruning
# ------------------------------------------------------------------------------------------------
def test_byte_encoding_round_trip_and_truncation():
    enc = StringEncoding(4)
    vals = ["", "a", "abcd", "abcdef", "é中", "12"]
    words, truncated = enc.encode(vals)
    assert truncated == 2 and words.shape == (6, 1)  # "abcdef" and "é中" (5 bytes)
    assert words[2, 0] == np.uint64(0x6162636400000000)  # bytes MSB first, padded with 0
    assert enc.decode(words) == ["", "a", "abcd", "abcd", "é\ufffd", "12"]  # 中 cut after its first byte
    assert enc.decode(enc.encode([7, 123])[0]) == ["7", "123"]  # integers as decimal text
    with pytest.raises(LocalPrivError, match="1 of 2 values contain a NUL"):
        enc.encode(["ok", "a\x00b"])


def test_alphabet_encoding_round_trip_and_refusal():
    enc = StringEncoding(7, "digits")
    assert (enc.symbol_bits, enc.total_bits) == (4, 28)
    words, truncated = enc.encode(["12505", "0", "1234567", "12345678"])
    assert truncated == 1
    assert words[0, 0] == np.uint64(0x2361600000000000)  # '1'->2, '2'->3, '5'->6, '0'->1, '5'->6
    assert enc.decode(words) == ["12505", "0", "1234567", "1234567"]
    with pytest.raises(LocalPrivError, match="2 of 3 values have characters outside the alphabet"):
        enc.encode(["12", "1a", "x"])
    long = StringEncoding(40)  # 320 bits: 5 words
    w, _ = long.encode(["x" * 40, "héllo"])
    assert w.shape == (2, 5) and long.decode(w) == ["x" * 40, "héllo"]


def test_prefix_keys_follow_the_documented_chain():
    rng = np.random.default_rng(0)
    words = rng.integers(0, 2 ** 64, size=(5, 3), dtype=np.uint64)
    p = _prefix(words, 20)
    assert (p[:, 0] == words[:, 0] & np.uint64(0xFFFFF00000000000)).all()
    assert (prefix_keys(p, 20) == hash_keys(p[:, 0], seed=20)).all()
    p = _prefix(words, 130)  # 3 words, the last with 2 bits
    k = hash_keys(hash_keys(hash_keys(p[:, 0], seed=130), p[:, 1]), p[:, 2])
    assert (prefix_keys(p, 130) == hash_keys(p[:, 2], seed=hash_keys(p[:, 1], seed=hash_keys(p[:, 0], seed=130)))).all()
    assert not (prefix_keys(p, 130) == k).all()  # the chain feeds the previous key as the seed
    assert (p[:, 2] & np.uint64(0x3FFFFFFFFFFFFFFF) == 0).all()


def test_pair_hashing_equals_stablehash_formula():
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 2 ** 64, 300, dtype=np.uint64)
    seeds = rng.integers(0, 2 ** 64, 500, dtype=np.uint64)
    for g in (2, 56, 2981):
        y = rng.integers(0, g, 500)
        ref = to_range(hash_keys(keys[None, :], seed=seeds[:, None]), g) == y[:, None]
        assert (hits_mod(seeds, key_lanes(keys), y, g) == ref).all()


@pytest.mark.parametrize("alphabet, vals", [
    (None, ["é中x", "ab", "", "z\u00ff", "𝄞a"]),
    ("lower", ["abc", "z", "", "qwer"]),
    ("digits", ["0", "99", "1234"]),
])
def test_pruning_keeps_every_prefix_a_client_can_send(alphabet, vals):
    enc = StringEncoding(4, alphabet)
    words, _ = enc.encode(vals)
    for bits in range(1, enc.total_bits + 1):
        assert _valid(_prefix(words, bits), bits, enc).all(), bits
    # and drops what no client sends: a symbol after the padding, a code outside the alphabet
    bad = np.zeros((2, 1), np.uint64)
    b = enc.symbol_bits
    _set_bits(bad[:1], b, b, np.array([1], np.uint64))          # padding then a symbol
    _set_bits(bad[1:], 0, b, np.array([2 ** b - 1], np.uint64))  # the largest code
    ok = _valid(bad, 2 * b, enc)
    assert not ok[0] and not ok[1]  # 0xFF is no UTF-8 byte; 15 and 31 are above the alphabets' codes


def test_privacy_constants_and_client_randomization():
    plan = PEMPlan(3.0, StringEncoding(3, "lower"))
    g, p = plan.g, plan.p
    assert g == round(np.exp(3.0)) + 1
    assert np.log(p / ((1 - p) / (g - 1))) == pytest.approx(3.0, rel=1e-12)
    rng = np.random.default_rng(2)
    vals = np.array(["abc"] * 20000, dtype=object)
    rep = pem_perturb(vals, plan, rng)
    assert len(rep) == 20000 and set(np.unique(rep.group)) == set(range(plan.groups))
    words, _ = plan.encoding.encode(["abc"])
    kept = 0
    for j in range(plan.groups):
        rows = rep.group == j
        key = prefix_keys(_prefix(words, plan.prefix_bits(j)), plan.prefix_bits(j))
        h = to_range(hash_keys(key, seed=rep.seed[rows]), g)
        kept += int((h == rep.y[rows]).sum())
    se = np.sqrt(p * (1 - p) / 20000)
    assert abs(kept / 20000 - p) < 5 * se  # y = H_s(prefix) with probability p


def test_plan_refusals():
    with pytest.raises(LocalPrivError, match="first round would enumerate"):
        PEMPlan(2.0, StringEncoding(8), start_bits=16, bits_per_round=8)
    with pytest.raises(LocalPrivError, match="repeats a character"):
        StringEncoding(3, "aab")
    with pytest.raises(LocalPrivError, match="unknown heavy-hitter method"):
        heavy_hitters(["a"], 1, 1.0, np.random.default_rng(0), method="sfp")
    plan = PEMPlan(2.0, StringEncoding(2, "abc"))
    with pytest.raises(LocalPrivError, match="final_group=True"):
        treehist_identify(pem_perturb(["a", "b"], plan, np.random.default_rng(0)), 1)


# ------------------------------------------------------------------------------------------------
# accuracy and intervals
# ------------------------------------------------------------------------------------------------
def test_pem_finds_the_top_words_at_large_eps():
    rng = np.random.default_rng(3)
    vals, words, p = zipf_words(rng, 60000)
    res = heavy_hitters(vals, 8, 6.0, np.random.default_rng(4), max_length=4, alphabet="lower")
    assert len(res) == 8 and res.rounds[-1]["prefix_bits"] == 20
    assert set(words[:4]) <= set(res.values)  # clear heavy hitters (>= 6 % each), whatever the boundary
    found = dict(zip(res.values, zip(res.estimates, res.std_errors)))
    for w, share in zip(words[:4], p[:4]):
        est, se = found[w]
        assert abs(est - share) < 4.5 * se  # 4.5 sigma: Bonferroni-safe over 4 words
    assert (res.lower <= res.estimates).all() and (res.estimates <= res.upper).all()
    assert res.plan["groups"] == 3 and sum(r["reports"] for r in res.rounds) == 60000


def test_pem_bytes_mode_finds_unicode_heavy_hitters():
    rng = np.random.default_rng(5)
    pool = np.array(["café", "naïve", "日本", "zz", "q"] + [f"w{i}" for i in range(200)], dtype=object)
    p = np.r_[[0.2, 0.15, 0.12, 0.1, 0.08], np.full(200, 0.35 / 200)]
    vals = pool[rng.choice(pool.size, 30000, p=p)]
    res = heavy_hitters(vals, 5, 8.0, np.random.default_rng(6), max_length=6)
    assert set(pool[:3]) <= set(res.values)


def test_interval_coverage_and_variance_formula():
    enc = StringEncoding(1, "abc")  # 2 bits: one round, candidates "", a, b, c
    plan = PEMPlan(1.5, enc, start_bits=0, bits_per_round=2)
    truth = {"a": 0.5, "b": 0.3, "c": 0.2, "": 0.0}
    rng = np.random.default_rng(7)
    n, runs = 3000, 150
    pool = np.array(["a", "b", "c"], dtype=object)
    cover, est = [], {v: [] for v in "abc"}
    for _ in range(runs):
        vals = pool[rng.choice(3, n, p=[0.5, 0.3, 0.2])]
        res = pem_identify(pem_perturb(vals, plan, rng), 4)
        for v, e, lo, hi in zip(res.values, res.estimates, res.lower, res.upper):
            if v:
                cover.append(lo <= truth[v] <= hi)
                est[v].append(e)
    coverage = np.mean(cover)
    assert abs(coverage - 0.95) < 4 * np.sqrt(0.95 * 0.05 / len(cover))
    from localpriv.heavy_hitters.pem import _std_error
    for v in "abc":
        sd_formula = float(_std_error(np.array([truth[v]]), n, plan)[0])
        sd_seen = float(np.std(est[v], ddof=1))
        assert abs(np.mean(est[v]) - truth[v]) < 4 * sd_formula / np.sqrt(runs)  # unbiased
        assert abs(sd_seen / sd_formula - 1) < 4 / np.sqrt(2 * (runs - 1))  # sd of a sample sd


def test_treehist_answers_come_with_selection_free_intervals():
    """TreeHist estimates its answers with a final group that took no part in choosing them, so
    their intervals cover the true shares (0 for a string nobody holds) at about the nominal rate."""
    rng = np.random.default_rng(9)
    vals, words, p = zipf_words(rng, 20000, vocab=300)
    share = dict(zip(words, p))
    covered, found_top = [], 0
    for seed in range(8):
        res = heavy_hitters(vals, 6, 5.0, np.random.default_rng(100 + seed), method="treehist", max_length=4,
                            alphabet="lower")
        assert res.method == "treehist" and res.rounds[-1]["round"] == "final" and res.plan["final_group"]
        assert res.rounds[-1]["reports"] + sum(r["reports"] for r in res.rounds[:-1]) == 20000
        covered += [lo <= share.get(v, 0.0) <= hi for v, lo, hi in zip(res.values, res.lower, res.upper)]
        found_top += words[0] in res.values
    assert found_top == 8
    assert np.mean(covered) >= 0.8  # nominal 0.95; 48 intervals, about 5 binomial sd of margin


def test_truncation_is_counted_in_one_warning():
    vals = ["abcdefgh", "ab", "abcdefghij"] * 50
    with pytest.warns(UserWarning, match=r"100 of 150 values are longer than 4 bytes"):
        res = heavy_hitters(vals, 2, 8.0, np.random.default_rng(0), max_length=4)
    assert res.truncated == 100


# ------------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------------
def test_cli_heavy_hitters_end_to_end(tmp_path):
    rng = np.random.default_rng(8)
    vals, words, _ = zipf_words(rng, 6000, vocab=100, s=1.3)
    (tmp_path / "w.csv").write_text("id,word\n" + "".join(f"{i},{w}\n" for i, w in enumerate(vals)))
    out = tmp_path / "sub" / "hh.json"
    r = CliRunner().invoke(app, ["heavy-hitters", str(tmp_path / "w.csv"), "--column", "word", "--k", "5",
                                 "--eps", "6", "--seed", "1", "--alphabet", "lower", "--max-length", "4",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert d["format"] == FORMAT and d["version"] == FORMAT_VERSION == 1
    assert d["n"] == 6000 and len(d["candidates"]) == 5 and d["rows"] == 6000 and d["seed"] == 1
    assert words[0] in [c["value"] for c in d["candidates"]]
    assert all(c["lower"] <= c["estimate"] <= c["upper"] for c in d["candidates"])
    assert words[0] in r.output and "95% interval" in r.output
    r = CliRunner().invoke(app, ["heavy-hitters", str(tmp_path / "w.csv"), "--column", "2", "--k", "3", "--eps", "6",
                                 "--seed", "2", "--alphabet", "lower", "--max-length", "4", "--method", "treehist",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert d["method"] == "treehist" and d["rounds"][-1]["round"] == "final" and words[0] in r.output
    assert not [p for p in out.parent.iterdir() if p.name != "hh.json"]  # no temporary file left


def test_cli_refuses_missing_values_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOCALPRIV_STATUS_INTERVAL", "3600")  # no status line, however slow the machine
    (tmp_path / "m.csv").write_text("place,n\nabc,1\n,2\nxyz,3\n ,4\n")
    r = CliRunner().invoke(app, ["heavy-hitters", "m.csv", "--column", "place", "--k", "2", "--eps", "2",
                                 "--seed", "0", "-o", "hh.json"])
    lines = r.stderr.splitlines()
    assert r.exit_code == 1, r.output
    assert len(lines) == 1 and lines[0].startswith("error: m.csv: 2 missing value(s) in column place"), r.stderr
    assert "--drop-missing" in lines[0] and "Traceback" not in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv"]  # no output, no temporary file
    r = CliRunner().invoke(app, ["heavy-hitters", "m.csv", "--column", "place", "--k", "2", "--eps", "2",
                                 "--seed", "0", "--drop-missing"])
    assert r.exit_code == 0 and "2 missing value(s) dropped" in r.stderr and "(4 rows read" in r.stderr, r.stderr
    r = CliRunner().invoke(app, ["heavy-hitters", "m.csv", "--eps", "2", "-o", "m.csv.json.csv"])
    assert r.exit_code == 1 and r.stderr.startswith("error: heavy-hitters file m.csv.json.csv: unknown extension")
