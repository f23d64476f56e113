"""The portable client protocol (localpriv.mechanisms.portable) and its vectors file."""
import hashlib
import math
import pathlib
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv.data.ledger import Ledger
from localpriv.mechanisms import portable as P
from localpriv.mechanisms.accounting import compose
from localpriv.testing.portable import (
    LEDGER_CASES,
    LEDGER_PATH,
    VECTORS_PATH,
    build_vectors,
    check_levels,
    check_vectors,
    ledger_fixture,
    render_ledger,
    render_vectors,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_chacha20_block_rfc8439_2_3_2():
    key = bytes(range(32))
    nonce = bytes.fromhex("000000090000004a00000000")
    words = P.chacha20_block(key, 1, nonce)
    assert [f"{w:08x}" for w in words] == ["e4e7f110", "15593bd1", "1fdd0f50", "c47120a3", "c7f4d1c7",
                                           "0368c033", "9aaa2204", "4e6cd4c3", "466482d2", "09aa9f07",
                                           "05d7c214", "a2028bd9", "d19c12b5", "b94e16de", "e883d0cb",
                                           "4e3c50a2"]


def test_chacha20_encryption_rfc8439_2_4_2():
    """The keystream of counter 1, 2 XORed with the RFC's plaintext gives its ciphertext."""
    key = bytes(range(32))
    nonce = bytes.fromhex("000000000000004a00000000")
    text = (b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
            b"sunscreen would be it.")
    stream = b"".join(b"".join(w.to_bytes(4, "little") for w in P.chacha20_block(key, c, nonce)) for c in (1, 2))
    cipher = bytes(a ^ b for a, b in zip(text, stream))
    assert cipher.hex().startswith("6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0b")
    assert cipher.hex().endswith("5af90bbf74a35be6b40b8eedf2785e42874d")


def test_chacha_source_is_the_keystream_of_the_sha256_key():
    src = P.ChaCha20Source("abc")
    words = [src.u32() for _ in range(20)]
    key = hashlib.sha256(b"abc").digest()
    assert words == P.chacha20_block(key, 0, bytes(12)) + P.chacha20_block(key, 1, bytes(12))[:4]
    assert src.used == 20


def test_uniform_int_rejects_the_top_and_covers_its_range():
    src = P.ListSource([0xFFFFFFFF, 0xFFFFFFFE, 7])
    assert P.uniform_int(src, 3) == 0xFFFFFFFE % 3 and src.used == 2  # limit 2^32 - 1: only 2^32 - 1 rejected
    assert P.uniform_int(P.ListSource([5]), 1) == 0
    assert P.uniform_int(P.ListSource([1, 2]), (1 << 32) + 1) == (1 + (2 << 32)) % ((1 << 32) + 1)
    # three words per try above 2^64, the first the lowest
    assert P.uniform_int(P.ListSource([1, 2, 3]), (1 << 64) + 1) == (1 + (2 << 32) + (3 << 64)) % ((1 << 64) + 1)
    with pytest.raises(P.LocalPrivError, match="n must be in"):
        P.uniform_int(P.ListSource([0]), 0)


def test_bernoulli_compares_the_top_53_bits():
    # U = u64 >> 11; with hi = 2^31 (U = 2^52) the draw is U < p 2^53: False at p = 0.5, True above
    assert not P.bernoulli(P.ListSource([0, 1 << 31]), 0.5)
    assert P.bernoulli(P.ListSource([0, 1 << 31]), math.nextafter(0.5, 1.0))
    assert P.bernoulli(P.ListSource([0x7FF, (1 << 31) - 1]), 0.5)  # low 11 bits ignored
    assert not P.bernoulli(P.ListSource([0, 0]), 0.0) and P.bernoulli(P.ListSource([0xFFFFFFFF] * 2), 1.0)


@settings(max_examples=40, deadline=None)
@given(a=st.integers(0, 1000), b=st.integers(1, 1000), w=st.lists(st.integers(0, 2 ** 32 - 1), min_size=4,
                                                                   max_size=4))
def test_bernoulli_rational_is_the_comparison_of_a_uniform_real(a, b, w):
    a = min(a, b)
    src = P.ListSource(w + [0] * 4)
    got = P.bernoulli_rational(src, a, b)
    v = sum(Fraction(x, 2 ** (32 * (i + 1))) for i, x in enumerate(w))
    if a == b:
        assert got
    elif abs(v - Fraction(a, b)) > Fraction(1, 2 ** 128):
        assert got == (v < Fraction(a, b))


def test_bernoulli_exp_and_discrete_laplace_follow_their_laws():
    """Frequencies within 5 standard errors (fixed seeds; 4000 draws each)."""
    src = P.ChaCha20Source("law")
    n = 4000
    for a, b in ((1, 2), (3, 2)):
        hits = sum(P.bernoulli_exp(src, a, b) for _ in range(n))
        p = math.exp(-a / b)
        assert abs(hits / n - p) < 5 * math.sqrt(p * (1 - p) / n)
    r = math.exp(-0.5)
    ys = [P.discrete_laplace(src, 1, 2) for _ in range(n)]
    p0 = (1 - r) / (1 + r)
    assert abs(ys.count(0) / n - p0) < 5 * math.sqrt(p0 * (1 - p0) / n)
    assert abs(sum(ys) / n) < 5 * math.sqrt(2 * r / (1 - r) ** 2 / n)


def test_bits_hex_is_most_significant_first():
    assert P.bits_hex([1, 0, 0, 0, 0, 0, 0, 0, 0, 1]) == "8040"
    assert P.bits_hex([0] * 3) == "00"


@pytest.mark.parametrize("spec,domain,code", [
    ("krr(delta=1,eps)", "0..9", "spec.syntax"),
    ("krr(delta=1,eps=x)", "0..9", "spec.unknown_key"),
    ("olh(eps=1.0,k=10)", None, None),
    ("krr( k = 10 , eps = 1 )", None, None),
    ("krr(k=10,eps=1.)", None, None),
    ("krr(k=10,eps=nan)", None, "spec.bad_value"),
    ("krr(k=10,eps=inf)", None, "spec.bad_value"),
])
def test_spec_grammar(spec, domain, code):
    try:
        P.parse_portable(spec, domain)
        got = None
    except P.PortableError as exc:
        got = exc.code
        assert "\n" not in str(exc) and str(exc).startswith(code)
    assert got == code


def test_canonical_spec_matches_python():
    assert str(P.parse_portable("olh( eps=2 )", "0..99")) == "olh(k=100,eps=2.0)"
    assert str(P.parse_portable("sue(k=4,eps=1e-1)")) == "sue(k=4,eps=0.1)"


def test_committed_vectors_are_what_make_vectors_writes():
    committed = (ROOT / VECTORS_PATH).read_text(encoding="utf-8")
    assert render_vectors(build_vectors()) == committed


def test_committed_vectors_replay():
    import json
    doc = json.loads((ROOT / VECTORS_PATH).read_text(encoding="utf-8"))
    assert check_vectors(doc) == []
    doc["mechanisms"][0]["reports"][0] += 1  # the checker sees a changed report
    assert len(check_vectors(doc)) == 1


def test_batched_chacha_blocks_equal_the_block_function():
    key = hashlib.sha256(b"batch").digest()
    src = P.ChaCha20Source("batch")
    words = [src.u32() for _ in range(16 * 70)]  # two refills
    assert words == [w for c in range(70) for w in P.chacha20_block(key, c, bytes(12))]


def test_xxh64_le64_matches_the_stable_hash():
    from localpriv.mechanisms import stablehash
    for data, seed, h in stablehash.TEST_VECTORS:
        if isinstance(data, int):
            assert P.xxh64_le64(data, seed) == h
    for x, s in ((37, 3141592653), (999999, 2 ** 32 - 1), (5, 2 ** 40)):
        assert P.xxh64_le64(x, s) == int(stablehash.hash_keys(x, s))


def test_memo_is_kept_by_the_caller_and_checked():
    mech = P.parse_portable("lgrr(eps_perm=2.0,eps_1=1.0)", "0..9")
    src = P.ChaCha20Source("memo")
    memo = P.memoize_portable(mech, 3, src)
    assert set(memo) == {"mechanism", "index", "memo"} and memo["mechanism"] == str(mech)
    assert all(0 <= P.sample_portable(mech, 3, src, memo) < 10 for _ in range(5))
    with pytest.raises(P.PortableError, match="memo.invalid"):
        P.sample_portable(mech, 4, src, memo)
    with pytest.raises(P.PortableError, match="memo.invalid"):
        P.sample_portable(P.parse_portable("krr(eps=1.0)", "0..9"), 3, src, memo)


def test_every_registered_mechanism_is_portable_or_listed():
    from localpriv.mechanisms import registered
    portable = set(P.PORTABLE_SAMPLERS) | set(P.PORTABLE_MEMOIZED)
    assert portable | set(P.NOT_PORTABLE) == set(registered())
    assert not portable & set(P.NOT_PORTABLE)
    assert portable == set(P.PORTABLE_KEYS)


def test_a_portable_sampler_at_the_wrong_eps_fails_the_conformance_check(monkeypatch):
    from localpriv.mechanisms import KRR
    from localpriv.testing.mechanisms import ConformanceError, mechanism_checks

    def too_honest(mech, x, src):  # draws at eps = 1.5 while the channel says 1.0
        return P._grr(src, x, mech.k, KRR(mech.k, 1.5 * mech.eps).p_keep)
    monkeypatch.setitem(P.PORTABLE_SAMPLERS, "krr", too_honest)
    checks = dict(mechanism_checks(KRR(4, 1.0), 20))
    with pytest.raises(ConformanceError, match="portable reports of input"):
        checks["check_portable_sampler_matches_channel"]()


def test_client_command_reproduces_a_vector_and_refuses_bad_lines(tmp_path):
    import json

    from typer.testing import CliRunner

    from localpriv.cli.main import app
    doc = json.loads((ROOT / VECTORS_PATH).read_text(encoding="utf-8"))
    case = next(v for v in doc["mechanisms"] if v["spec"] == "olh(eps=2.0)")
    text = "".join(f"{v}\n" for v in case["values"])
    res = CliRunner().invoke(app, ["client", case["spec"], "--domain", case["domain"], "--seed", case["seed"]],
                             input=text)
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == case["reports_text"]
    out = tmp_path / "group.json"
    res = CliRunner().invoke(app, ["client", case["spec"], "-d", case["domain"], "--seed", case["seed"], "--group",
                                   "--out", str(out)], input=text)
    assert json.loads(out.read_text()) == {"mechanism": case["canonical"], "reports": case["reports"]}
    res = CliRunner().invoke(app, ["client", "krr(eps=1.0)", "-d", "0..9"], input="3\n10\n")
    assert res.exit_code == 1 and res.stdout == ""
    assert "value.out_of_domain: line 2" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_client_command_keeps_memos(tmp_path):
    import json

    from typer.testing import CliRunner

    from localpriv.cli.main import app
    memo = tmp_path / "memo.json"
    args = ["client", "lgrr(eps_perm=2.0,eps_1=1.0)", "-d", "a,b,c", "--memo", str(memo)]
    assert CliRunner().invoke(app, args, input="a\nb\na\n").exit_code == 0
    memos = json.loads(memo.read_text())["memos"]
    assert [m["index"] for m in memos] == [0, 1]  # one memo per value, reused for the second "a"
    assert CliRunner().invoke(app, args, input="a\n").exit_code == 0
    assert json.loads(memo.read_text())["memos"] == memos


def test_client_command_simulates_devices_each_with_its_own_memo():
    """``--reports-per-device R``: each input line a new device reporting R times, its reports those of
    one perturb_lines run from no memo (one stream, device after device); bounds refused in one line."""
    from typer.testing import CliRunner

    from localpriv.cli.main import app
    spec = "lgrr(k=3,eps_perm=1.0,eps_1=0.5)"
    res = CliRunner().invoke(app, ["client", spec, "-d", "0..2", "--seed", "d", "--reports-per-device", "3"],
                             input="0\n2\n")
    assert res.exit_code == 0, res.output
    src = P.ChaCha20Source("d")
    want = [r for v in ("0", "2") for r in P.perturb_lines(spec, "0..2", [v] * 3, src).reports]
    assert [int(line) for line in res.output.splitlines()] == want
    for args, needle in ((["--reports-per-device", "0"], "reports per device must be an integer in 1..1,000"),
                         (["--reports-per-device", "2", "--memo", "m.json"], "no --memo")):
        res = CliRunner().invoke(app, ["client", spec, "-d", "0..2", *args], input="1\n")
        assert res.exit_code == 1 and needle in res.output
    with pytest.raises(P.PortableError, match="line 2: "):
        P.perturb_devices(spec, "0..2", ["1", "3"], 2, P.ChaCha20Source("d"))
    with pytest.raises(P.LocalPrivError, match="more than 1,000,000 reports"):
        P.perturb_devices(spec, "0..2", ["1"] * 1001, 1000, P.ChaCha20Source("d"))


def test_the_portability_table_of_the_docs_is_the_code():
    import re

    from localpriv.mechanisms import registered
    text = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| (yes|yes \(memoized\)|no) \|", text, flags=re.M))
    assert set(rows) == set(registered())
    for name, flag in rows.items():
        assert (flag == "yes") == (name in P.PORTABLE_SAMPLERS), name
        assert (flag == "yes (memoized)") == (name in P.PORTABLE_MEMOIZED), name


def test_the_collector_accepts_every_vector_report():
    """Each vector's reports, posted as one group under its canonical spec, pass the collector's
    batch checks (types, output space, canonical bit vectors)."""
    import json
    import warnings

    from localpriv.domains.parse import parse_domain
    from localpriv.service.core import decode_batch
    from localpriv.service.policy import AdmissionPolicy
    doc = json.loads((ROOT / VECTORS_PATH).read_text(encoding="utf-8"))
    cases = [(v["canonical"], v["domain"], v["reports"]) for v in doc["mechanisms"]]
    cases += [(v["canonical"], v["domain"], [r for row in v["reports"] for r in row]) for v in doc["memoized"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for spec, domain, reports in cases:
            name = spec.partition("(")[0]
            policy = AdmissionPolicy.from_dict({"mechanisms": [name], "max_eps": 1e6})
            dom = None if name.startswith("planar") else parse_domain(domain)
            _, n, groups = decode_batch({"batch_id": "b1", "groups": [{"mechanism": spec, "reports": reports}]},
                                        policy, dom)
            assert n == len(reports) and str(groups[0][0]) == spec


def test_committed_ledger_is_what_make_vectors_writes_and_reads_back(tmp_path):
    """clients/vectors/ledger-v1.json (read by the JS and Java clients) is the fixture's exact text;
    Python reads it back to the same releases and to the totals the vectors carry."""
    import json
    committed = (ROOT / LEDGER_PATH).read_text(encoding="utf-8")
    assert render_ledger(ledger_fixture()) == committed
    rels = Ledger(ROOT / LEDGER_PATH).releases
    assert len(rels) == len(LEDGER_CASES)
    totals = json.loads((ROOT / VECTORS_PATH).read_text(encoding="utf-8"))["ledger"]
    assert [compose(rels[:i]).epsilon for i in range(1, len(rels) + 1)] == totals["prefix_epsilon"]
    assert any(r.eps_perm == math.inf for r in rels)  # written "inf", read as infinity


def test_vectors_carry_the_levels_python_computes():
    import json
    doc = json.loads((ROOT / VECTORS_PATH).read_text(encoding="utf-8"))
    lgrr = doc["memoized"][0]
    assert lgrr["levels"] == {"epsilon_ldp": 1.0, "eps_perm": 2.0, "eps_inst": 1.95007244595}
    assert check_levels(doc) == []
    doc["mechanisms"][3]["levels"]["epsilon_ldp"] = 11.0  # the checker sees a changed level
    assert check_levels(doc) == ["krr(eps=12.0) on 0..99999: levels"]
