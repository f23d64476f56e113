"""Amplification by shuffling (Feldman, McMillan, Talwar, FOCS 2021): the numerical clones bound,
the closed form of Theorem 3.1, the calculator's figure, refusals and the CLI."""
from __future__ import annotations

import math
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from typer.testing import CliRunner

from localpriv import LocalPrivError
from localpriv.analysis.shuffle import (
    closed_form_applies,
    closed_form_epsilon,
    shuffle_delta,
    shuffle_epsilon,
    shuffle_report,
)
from localpriv.cli.main import app
from localpriv.mechanisms import parse


def brute_delta(eps0: float, n: int, eps: float) -> float:
    """D_{e^eps}(P || Q) by enumerating C, A and the coin D of FMT Theorem 3.2, outcome by outcome."""
    q, r = math.exp(-eps0), math.exp(eps0) / (math.exp(eps0) + 1.0)
    P: dict[tuple[int, int], float] = defaultdict(float)
    Q: dict[tuple[int, int], float] = defaultdict(float)
    for c in range(n):
        pc = stats.binom.pmf(c, n - 1, q)
        for a in range(c + 1):
            pa = pc * stats.binom.pmf(a, c, 0.5)
            for d, pd in ((1, r), (0, 1.0 - r)):
                P[(a + d, c - a + 1 - d)] += pa * pd
                Q[(a + 1 - d, c - a + d)] += pa * pd
    keys = set(P) | set(Q)
    return sum(max(0.0, P[o] - math.exp(eps) * Q[o]) for o in keys)


def test_calculator_figure():
    """FMT's calculator: n = 10^5, eps0 = 4, delta = 1e-6 -> about 0.17 (two digits, as published)."""
    eps = shuffle_epsilon(4.0, 10 ** 5, 1e-6)
    assert round(eps, 2) == 0.17
    assert shuffle_delta(4.0, 10 ** 5, eps) <= 1e-6 < shuffle_delta(4.0, 10 ** 5, eps - 1e-6)
    # the closed form at the same point (Theorem 3.1 by hand) is about three times looser
    cf = shuffle_epsilon(4.0, 10 ** 5, 1e-6, method="closed-form")
    e0 = math.exp(4.0)
    by_hand = math.log(1 + (e0 - 1) / (e0 + 1) * (8 * math.sqrt(e0 * math.log(4e6)) / math.sqrt(1e5) + 8 * e0 / 1e5))
    assert cf == pytest.approx(by_hand, rel=1e-12)
    assert cf == pytest.approx(0.5346, abs=1e-4)


@pytest.mark.parametrize("n", [1, 2, 5, 20, 40])
@pytest.mark.parametrize("eps0", [0.3, 1.0, 3.0])
def test_delta_matches_enumeration(n, eps0):
    for eps in (0.0, 0.1 * eps0, 0.5 * eps0, 0.9 * eps0):
        assert shuffle_delta(eps0, n, eps) == pytest.approx(brute_delta(eps0, n, eps), rel=1e-9, abs=1e-15)


def test_window_is_an_upper_bound_within_its_tail():
    full = shuffle_delta(2.0, 20_000, 0.1)
    windowed = shuffle_delta(2.0, 20_000, 0.1, tail=1e-12)
    assert full <= windowed <= full + 3e-12


def test_delta_decreases_in_eps_and_eps_in_n():
    ds = [shuffle_delta(2.0, 5000, e) for e in (0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)]
    assert all(a >= b for a, b in zip(ds, ds[1:])) and ds[-1] == 0.0
    es = [shuffle_epsilon(2.0, n, 1e-6) for n in (10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6)]
    assert all(a > b for a, b in zip(es, es[1:]))


def test_no_amplification_with_one_report_and_none_needed_at_zero():
    assert 1.5 - 1e-5 < shuffle_epsilon(1.5, 1, 1e-6) <= 1.5  # (1.5, delta)-DP, a hair below at delta > 0
    assert shuffle_epsilon(0.0, 100, 1e-6) == 0.0


@settings(max_examples=20, deadline=None)
@given(n=st.sampled_from([10 ** 3, 10 ** 4, 10 ** 5]),
       eps0=st.sampled_from([0.1, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0]),
       delta=st.sampled_from([1e-4, 1e-6, 1e-8]))
def test_numerical_never_above_closed_form(n, eps0, delta):
    num = shuffle_epsilon(eps0, n, delta)
    assert 0.0 <= num <= eps0
    if closed_form_applies(eps0, n, delta):
        assert num <= closed_form_epsilon(eps0, n, delta)


def test_mechanism_level_is_computed_from_the_channel():
    mech = parse("krr(k=10,eps=4)")
    assert shuffle_epsilon(mech, 10 ** 5, 1e-6) == pytest.approx(shuffle_epsilon(mech.epsilon_ldp(), 10 ** 5, 1e-6))
    rep = shuffle_report(mech, 10 ** 5, 1e-6)
    assert rep["shuffle: eps0 (local, from channel)"] == pytest.approx(4.0)
    assert round(rep["shuffled central eps (numerical, FMT21)"], 2) == 0.17
    small = shuffle_report(mech, 1000, 1e-6)
    assert small["shuffled central eps (closed form, FMT21 Thm 3.1)"].startswith("does not apply")


@pytest.mark.parametrize("args", [
    (1.0, 0, 1e-6), (1.0, 100, 0.0), (1.0, 100, 1.0), (1.0, 100, float("nan")), (float("inf"), 100, 1e-6),
    (-1.0, 100, 1e-6), (1.0, 2.5, 1e-6), ("1.0", 100, 1e-6), (True, 100, 1e-6),
])
def test_refusals(args):
    with pytest.raises(LocalPrivError):
        shuffle_epsilon(*args)


def test_refusals_of_method_and_closed_form_range():
    with pytest.raises(LocalPrivError, match="method"):
        shuffle_epsilon(1.0, 100, 1e-6, method="exact")
    with pytest.raises(LocalPrivError, match="closed form"):
        shuffle_epsilon(4.0, 1000, 1e-6, method="closed-form")


def test_cli_analyze_shuffle():
    r = CliRunner().invoke(app, ["analyze", "-m", "krr(k=10,eps=4)", "--shuffle", "100000", "--delta", "1e-6",
                                 "--json"])
    assert r.exit_code == 0, r.output
    assert "0.1697" in r.output and "0.5346" in r.output
    r = CliRunner().invoke(app, ["analyze", "-m", "krr(k=10,eps=4)", "--shuffle", "100000"])
    assert r.exit_code == 2
    r = CliRunner().invoke(app, ["analyze", "-m", "krr(k=10,eps=4)", "--shuffle", "100000", "--delta", "2"])
    assert r.exit_code == 1 and "delta" in r.output
