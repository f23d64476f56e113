"""The fast clients draw exactly the distribution their channel states.

Tolerances: a frequency estimated from ``m`` Bernoulli(``p``) draws has standard error
``sqrt(p (1 - p) / m)``; every check allows 5 standard errors, with fixed seeds.
"""
import numpy as np
import pytest

from localpriv.mechanisms.subset import SS
from localpriv.mechanisms._sampling import bernoulli_bits
from localpriv.mechanisms.unary import OUE, unpack_bits


def _within(freq, p, m, z=5.0):
    return np.abs(freq - p) <= z * np.sqrt(p * (1 - p) / m) + 1e-12


@pytest.mark.parametrize("q", [0.5, 0.2689414213699951, 1 / 3, 0.01, 0.999])
def test_bernoulli_bits_frequency(q):
    rng = np.random.default_rng(11)
    bits = bernoulli_bits((400, 500), q, rng)
    assert bits.dtype == bool and bits.shape == (400, 500)
    assert _within(bits.mean(), q, bits.size)


@pytest.mark.parametrize("t", [0, 1])
def test_bernoulli_bits_tie_refinement_is_exact(t):
    # q = (t + 1/2) / 2^16: a 16-bit threshold alone would give t / 2^16 (never a one for t = 0);
    # the tie refinement supplies the missing 1 / 2^17. Expected ones: m q (Poisson-like count).
    q = (t + 0.5) / 65536
    rng = np.random.default_rng(3)
    m = 1 << 25
    ones = int(bernoulli_bits((m,), q, rng).sum())
    mean = m * q
    assert abs(ones - mean) <= 5 * np.sqrt(mean)
    assert abs(ones - m * t / 65536) > 5 * np.sqrt(mean)  # the truncated law is rejected


def test_bernoulli_bits_truth_path():
    rng = np.random.default_rng(5)
    truth = rng.random((300, 400)) < 0.3
    bits = bernoulli_bits(truth.shape, 0.1, rng, p_true=0.8, truth=truth)
    assert _within(bits[truth].mean(), 0.8, truth.sum())
    assert _within(bits[~truth].mean(), 0.1, (~truth).sum())


def test_bernoulli_bits_degenerate_and_invalid():
    rng = np.random.default_rng(0)
    assert not bernoulli_bits((10, 10), 0.0, rng).any()
    assert bernoulli_bits((10, 10), 1.0, rng).all()
    truth = np.eye(10, dtype=bool)
    b = bernoulli_bits((10, 10), 0.0, rng, p_true=1.0, truth=truth)
    assert np.array_equal(b, truth)
    with pytest.raises(Exception, match=r"\[0, 1\]"):
        bernoulli_bits((3,), 1.5, rng)


def test_bernoulli_bits_reproducible():
    a = bernoulli_bits((50, 70), 0.3, np.random.default_rng(9))
    b = bernoulli_bits((50, 70), 0.3, np.random.default_rng(9))
    assert np.array_equal(a, b)


def test_oue_bits_independent_pairs():
    # two non-true bits of one report are independent: P(both) = q^2
    mech = OUE(k=6, eps=1.0)
    rng = np.random.default_rng(21)
    n = 200_000
    bits = unpack_bits(mech.sample(np.zeros(n, dtype=int), rng), 6).astype(bool)
    q = mech.q1
    assert _within(bits[:, 0].mean(), mech.p1, n)
    assert _within((bits[:, 1] & bits[:, 2]).mean(), q * q, n)


@pytest.mark.parametrize("k,eps", [(10, 1.0), (17, 0.5), (40, 3.0)])
def test_ss_subset_law(k, eps):
    mech = SS(k=k, eps=eps)
    rng = np.random.default_rng(k)
    n = 60_000
    x = rng.integers(0, k, n)
    bits = unpack_bits(mech.sample(x, rng), k).astype(bool)
    # every subset has exactly omega members
    assert np.all(bits.sum(axis=1) == mech.omega)
    # the true value is in with probability p*
    hit = bits[np.arange(n), x]
    assert _within(hit.mean(), mech.p_star, n)
    # each other value is in with probability q*, the same for all (uniform over the others)
    other = bits.copy()
    other[np.arange(n), x] = False
    per_value = other.sum(axis=0)
    per_value_n = n - np.bincount(x, minlength=k)
    assert np.all(_within(per_value / per_value_n, mech.q_star, per_value_n))
    # a pair of other values is in together with the uniform-subset probability
    w = mech.omega
    sel = (x != 0) & (x != 1)
    pair = (bits[sel, 0] & bits[sel, 1]).mean()
    p_pair = (mech.p_star * (w - 1) * (w - 2) / ((k - 1) * (k - 2))
              + (1 - mech.p_star) * w * (w - 1) / ((k - 1) * (k - 2)))
    assert _within(pair, p_pair, sel.sum())
