"""Cryptographically secure client randomness: ``localpriv.utils.rng``.

Every registered mechanism samples with a ChaCha20 generator keyed from OS entropy (and with
AESCounter); large clients split their draws over child streams keyed from the parent.
"""
import numpy as np
import pytest
from randomgen import AESCounter, ChaCha

from localpriv.mechanisms import parse
from localpriv.testing.mechanisms import mechanism_examples
from localpriv.utils.rng import is_secure, make_generator, secure_generator, spawn_generators
from localpriv.utils.validation import LocalPrivError

#: every example every registered mechanism declares (a new mechanism is covered once it declares
#: its examples, which the conformance suite requires)
EXAMPLES = mechanism_examples()


def _check_reports(mech, reports, n):
    assert np.shape(reports)[0] == n
    kind = mech.report_kind
    if kind == "binary":
        assert reports.dtype == np.uint8 and reports.ndim == 2
        uniq = np.unique(reports, axis=0)
    else:
        assert reports.ndim == 1
        assert reports.dtype.kind == ("f" if kind == "float64" else "i")
        uniq = np.unique(reports)
    # every report is one the mechanism can produce: positive probability under a uniform input
    block = mech.likelihood_block(uniq, np.ones(uniq.shape[0]))
    fwd = block.forward(np.full(mech.k, 1.0 / mech.k))
    assert np.all(np.isfinite(fwd)) and np.all(fwd > 0)


@pytest.mark.parametrize("example", EXAMPLES, ids=[ex.spec for ex in EXAMPLES])
@pytest.mark.parametrize("kind", ["chacha", "aes"])
def test_every_mechanism_samples_with_a_secure_generator(example, kind):
    mech = example.build()
    x = np.arange(300) % mech.k
    rng = secure_generator() if kind == "chacha" else np.random.Generator(AESCounter())
    assert is_secure(rng)
    _check_reports(mech, mech.sample(x, rng), x.size)


def test_secure_streams_for_large_clients(monkeypatch):
    # SHE with k = 100 and 30000 users (3 x 10^6 draws) splits its draws over child streams; from a
    # ChaCha parent they are ChaCha children keyed from the parent (same rounds). With a fixed key
    # (for the test only) the bytes do not depend on the number of threads.
    m = parse("she(k=100,eps=1.0)")
    x = np.random.default_rng(0).integers(0, 100, 30_000)
    key = 0x1234_5678_9ABC_DEF0_0FED_CBA9_8765_4321

    def gen():
        return np.random.Generator(ChaCha(key=key, counter=0, rounds=20))

    monkeypatch.setenv("LOCALPRIV_THREADS", "1")
    one = m.sample(x, gen())
    monkeypatch.setenv("LOCALPRIV_THREADS", "2")
    two = m.sample(x, gen())
    assert np.array_equal(one, two)
    _check_reports(m, two[:2000], 2000)
    assert not np.array_equal(one, m.sample(x, secure_generator()))


def test_spawn_generators_kinds():
    parent = np.random.Generator(ChaCha(key=7, counter=0, rounds=8))
    kids = spawn_generators(parent, 3)
    assert all(isinstance(g.bit_generator, ChaCha) for g in kids)
    assert all(g.bit_generator.state["state"]["rounds"] == 8 for g in kids)
    keys = {tuple(g.bit_generator.state["state"]["keysetup"]) for g in kids}
    assert len(keys) == 3
    draws = [g.integers(0, 2**62, 4).tolist() for g in kids]
    assert len({tuple(d) for d in draws}) == 3
    aes = spawn_generators(np.random.Generator(AESCounter(key=5, counter=0)), 2)
    assert all(isinstance(g.bit_generator, AESCounter) for g in aes)
    assert aes[0].integers(0, 2**62) != aes[1].integers(0, 2**62)
    # seeded generators: children reproducible from the parent's seed, and distinct
    a = [g.integers(0, 2**62, 3).tolist() for g in spawn_generators(np.random.default_rng(5), 2)]
    b = [g.integers(0, 2**62, 3).tolist() for g in spawn_generators(np.random.default_rng(5), 2)]
    assert a == b and a[0] != a[1]
    kids = spawn_generators(np.random.default_rng(5), 2)
    assert all(isinstance(g.bit_generator, np.random.PCG64) for g in kids)


def test_secure_and_seeded_generators():
    g = secure_generator()
    assert isinstance(g.bit_generator, ChaCha) and g.bit_generator.state["state"]["rounds"] == 20
    first, second = secure_generator(), secure_generator()
    assert first.integers(0, 2**62, 4).tolist() != second.integers(0, 2**62, 4).tolist()
    assert is_secure(make_generator(None)) and not is_secure(make_generator(3))
    seeded = make_generator(3).integers(0, 2**62, 5).tolist()
    assert seeded == np.random.default_rng(3).integers(0, 2**62, 5).tolist()
    assert make_generator(np.int64(4)).integers(0, 10) == np.random.default_rng(4).integers(0, 10)
    for bad in (-1, 1.5, "7", True):
        with pytest.raises(LocalPrivError):
            make_generator(bad)
