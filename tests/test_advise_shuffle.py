"""The advisor's central target under a shuffler: the largest local level whose shuffled release
meets (central_eps, delta) (localpriv.analysis.shuffle.largest_local_epsilon), and `advise --shuffle`."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from localpriv import LocalPrivError
from localpriv.advice.advisor import advise
from localpriv.analysis.shuffle import MAX_LOCAL_EPSILON, largest_local_epsilon, shuffle_epsilon
from localpriv.cli.main import app


def test_the_calculators_point_read_backwards():
    # FMT21's calculator: eps0 = 4 at n = 10^5, delta = 1e-6 gives about 0.17 central
    x = largest_local_epsilon(10 ** 5, 0.17, 1e-6)
    assert 3.95 < x < 4.05
    assert shuffle_epsilon(x, 10 ** 5, 1e-6) <= 0.17


@settings(max_examples=8, deadline=None)
@given(n=st.integers(10, 10 ** 5), target=st.floats(0.1, 3.0), delta=st.sampled_from([1e-8, 1e-6, 1e-3]))
def test_the_largest_local_level_meets_the_target_and_is_at_least_it(n, target, delta):
    x = largest_local_epsilon(n, target, delta)
    assert target <= x <= MAX_LOCAL_EPSILON
    assert shuffle_epsilon(x, n, delta) <= target * (1 + 1e-9)


def test_refusals():
    with pytest.raises(LocalPrivError, match="delta must be in"):
        largest_local_epsilon(100, 1.0, 0.0)
    with pytest.raises(LocalPrivError, match="n \\(number of shuffled reports\\)"):
        largest_local_epsilon(0, 1.0, 1e-6)
    with pytest.raises(LocalPrivError, match="central target must be a level > 0"):
        largest_local_epsilon(100, 0.0, 1e-6)
    with pytest.raises(LocalPrivError, match="needs all of shuffle"):
        advise("a,b,c", n=100, shuffle=100, central_eps=1.0)


def test_advise_runs_every_candidate_at_the_largest_local_level():
    adv = advise("a,b,c,d", n=2000, shuffle=2000, central_eps=0.8, delta=1e-6, runs=2, method="analytic",
                 mechanisms=["krr", "oue"])
    assert adv.local_eps is not None and adv.local_eps > 0.8
    for r in adv.rows:
        assert r.eps_ldp <= adv.local_eps
        assert r.eps_ldp >= adv.local_eps * (1 - 1e-3)  # rounded down to 4 significant digits only
        assert r.eps_central is not None and r.eps_central <= 0.8
    assert "shuffled among 2,000 reports" in adv.reason and "central eps" in str(adv)
    # an LDP target below the shuffled one wins
    low = advise("a,b,c,d", n=2000, eps_ldp=0.5, shuffle=2000, central_eps=0.8, delta=1e-6, runs=2,
                 method="analytic", mechanisms=["krr"])
    assert low.rows[0].eps_ldp <= 0.5


def test_cli_advise_shuffle_json():
    r = CliRunner().invoke(app, ["advise", "-d", "a,b,c,d", "--n", "2000", "--shuffle", "2000", "--central-eps",
                                 "0.8", "--delta", "1e-6", "--runs", "2", "--method", "analytic", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert got["shuffle"] == 2000 and got["central_eps"] == 0.8 and got["recommended"]["eps_central"] <= 0.8
