"""The integer channel table (``IntegerChannel``) and Square Wave's exact release.

The released law is ``W / 2^64`` bit for bit: words just below and at each cumulative threshold
land on either side of it, every row sums to ``2^64`` in Python integers, and the level is the
one of the integers.
"""
import math
from fractions import Fraction

import numpy as np
import pytest

from localpriv.mechanisms import parse
from localpriv.mechanisms._sampling import INTEGER_CHANNEL_MAX_OUTPUTS, IntegerChannel
from localpriv.utils.validation import LocalPrivError


class _Words:
    """A stand-in generator whose 64-bit words are given (``IntegerChannel.sample`` reads only them)."""

    def __init__(self, words):
        self.bit_generator = self
        self._words = np.asarray(words, dtype=np.uint64)

    def random_raw(self, size):
        assert size == self._words.size
        return self._words


def _rows(table):
    return [[int(v) for v in row] for row in table.weights]


@pytest.mark.parametrize("spec", ["sw(k=5,eps=1.0,buckets=8)", "sw(k=3,eps=4.0,buckets=7)"])
def test_words_at_each_threshold_fall_on_either_side(spec):
    table = parse(spec).table
    for x, row in enumerate(_rows(table)):
        assert sum(row) == 1 << 64
        cum = np.cumsum([Fraction(v) for v in row])[:-1].astype(object)
        words = [int(c) - 1 for c in cum] + [int(c) for c in cum] + [0, (1 << 64) - 1]
        z = table.sample(np.full(len(words), x), _Words(words))
        j = np.arange(len(cum))
        assert z.tolist() == j.tolist() + (j + 1).tolist() + [0, len(row) - 1]


def test_the_level_is_the_integers_and_the_channel_their_quotient():
    mech = parse("sw(k=4,eps=1.0,buckets=12)")
    rows = _rows(mech.table)
    cols = list(zip(*rows))
    want = max(math.log(Fraction(max(c), min(c))) for c in cols)
    assert mech.epsilon_ldp() == pytest.approx(want, rel=1e-15, abs=1e-15)
    assert mech.epsilon_ldp() == pytest.approx(1.0, rel=1e-9)
    assert np.array_equal(mech.channel(), np.ldexp(np.asarray(rows, dtype=float), -64))
    assert np.abs(mech.channel() - mech.paper_channel()).max() <= 12 * 2.0 ** -52  # a row's rounding deficit


def test_zero_entries_point_masses_and_tiny_entries():
    t = IntegerChannel([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [1e-30, 1.0 - 1e-30, 0.0]])
    z = t.sample(np.array([0, 0, 1, 1, 2, 2]), _Words([0, (1 << 64) - 1, (1 << 63) - 1, 1 << 63, 0, 1]))
    assert z.tolist() == [1, 1, 0, 2, 0, 1]  # the tiny entry keeps one unit of 2^-64
    assert t.probabilities()[0].tolist() == [0.0, 1.0, 0.0]
    assert t.epsilon_ldp() == math.inf  # zeros beside positive entries
    assert IntegerChannel([[0.25, 0.75], [0.25, 0.75]]).epsilon_ldp() == 0.0


def test_refusals_in_one_line():
    for bad in ([[0.5, 0.6]], [[-0.1, 1.1]], [[np.nan, 1.0]], [1.0, 0.0]):
        with pytest.raises(LocalPrivError) as info:
            IntegerChannel(bad, "m")
        assert "\n" not in str(info.value)
    assert INTEGER_CHANNEL_MAX_OUTPUTS == 1 << 26


def test_sw_samples_are_reproducible_and_follow_the_table():
    mech = parse("sw(k=4,eps=1.0,buckets=6)")
    x = np.repeat(np.arange(4), 20_000)
    a, b = mech.sample(x, 3), mech.sample(x, 3)
    assert np.array_equal(a, b)
    for xv in range(4):  # chi-square per row against the integer law
        counts = np.bincount(a[x == xv], minlength=6)
        expected = mech.channel()[xv] * 20_000
        stat = float(((counts - expected) ** 2 / expected).sum())
        assert stat < 35.9  # chi^2_5 at 1 - 10^-6
