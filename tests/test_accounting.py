"""The privacy ledger's model: releases and their composition (localpriv.mechanisms.accounting)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv import parse
from localpriv.mechanisms.accounting import (
    MAX_PLD_EVENTS,
    MAX_RELEASES,
    Composition,
    Release,
    compose,
    explain_level,
    posterior_bound,
    release_of,
    report_charge,
)
from localpriv.mechanisms.privacy import ldp_epsilon
from localpriv.utils.validation import LocalPrivError

levels = st.floats(0.01, 5.0, allow_nan=False)
counts = st.integers(1, 20)


def release(eps: float, reports: int = 1, **kw) -> Release:
    return Release(spec=f"krr(k=4,eps={eps!r})", epsilon=eps, reports=reports, **kw)


@settings(max_examples=20, deadline=None)
@given(eps_perm=levels, parts=st.lists(st.tuples(st.floats(0.001, 1.0), counts), min_size=1, max_size=6),
       delta=st.sampled_from([None, 1e-6]), inst=st.sampled_from([None, 0.05, 1.5]))
def test_reports_of_one_memo_never_exceed_eps_perm(eps_perm, parts, delta, inst):
    rels = [Release(spec="lgrr(k=4,eps_perm=2.0,eps_1=1.0)", epsilon=frac * eps_perm, reports=r, memo_key="v",
                    eps_perm=eps_perm, eps_inst=None if inst is None else max(inst, frac * eps_perm))
            for frac, r in parts]
    comp = compose(rels, delta=delta)
    assert comp.epsilon <= eps_perm
    if sum(r.reports for r in rels) > 1 and inst is not None:
        assert comp.epsilon <= math.fsum(r.reports * r.eps_inst for r in rels) * (1 + 1e-12)
    if delta is not None:
        assert comp.pld_epsilon is not None and comp.pld_epsilon <= eps_perm


@settings(max_examples=20, deadline=None)
@given(eps=levels, k=st.integers(1, 200), split=st.integers(1, 5), rr=st.sampled_from([None, 2, 4, 100]))
def test_k_independent_reports_compose_to_at_most_k_eps(eps, k, split, rr):
    sizes = [k // split + (i < k % split) for i in range(split)]
    rels = [release(eps, s, rr_values=rr) for s in sizes if s]
    comp = compose(rels, delta=1e-6)
    assert comp.epsilon == pytest.approx(k * eps, rel=1e-12)  # fsum of k copies of eps
    assert comp.epsilon <= k * eps * (1 + 1e-12)
    assert comp.pld_epsilon is not None and comp.pld_epsilon <= k * eps * (1 + 1e-12)


mixed = st.lists(st.one_of(
    st.builds(lambda e, r, k: release(e, r, rr_values=k), levels, counts, st.sampled_from([None, 3, 10])),
    st.builds(lambda e, r, key: Release(spec="lsue(k=4,eps_perm=3.0,eps_1=1.0)", epsilon=min(e, 2.9), reports=r,
                                        memo_key=key, eps_perm=3.0), levels, counts, st.sampled_from(["a", "b"]))),
    min_size=1, max_size=8)


@settings(max_examples=20, deadline=None)
@given(rels=mixed, delta=st.sampled_from([1e-9, 1e-6, 1e-3]))
def test_the_pld_answer_is_never_above_basic_composition(rels, delta):
    comp = compose(rels, delta=delta)
    assert comp.accountant == "pld"
    assert comp.pld_epsilon is not None and comp.pld_epsilon <= comp.epsilon


@settings(max_examples=15, deadline=None)
@given(rels=mixed, seed=st.integers(0, 2 ** 32 - 1))
def test_composition_does_not_depend_on_the_order(rels, seed):
    perm = np.random.default_rng(seed).permutation(len(rels))
    assert compose([rels[i] for i in perm], delta=1e-6) == compose(rels, delta=1e-6)


def test_one_memo_group_costs_eps_perm_from_two_reports_on_and_one_report_its_own_level():
    m = parse("lgrr(k=4,eps_perm=2.0,eps_1=1.0)")
    assert compose([release_of(m, 1, memo_key="x")]).epsilon == pytest.approx(1.0)
    assert compose([release_of(m, 1, memo_key="x"), release_of(m, 1, memo_key="x")]).epsilon == pytest.approx(2.0)
    assert compose([release_of(m, 50, memo_key="x")]).epsilon == pytest.approx(2.0)
    # two memos (two values, or a memo drawn again) are two groups
    assert compose([release_of(m, 5, memo_key="x"), release_of(m, 5, memo_key="y")]).epsilon == pytest.approx(4.0)
    # no memo key: the reports were drawn independently, eps_1 each
    assert compose([release_of(m, 5)]).epsilon == pytest.approx(5.0)
    # a memo of a family with an instantaneous level: min(eps_perm, t eps_2)
    m = parse("lgrr(k=4,eps_perm=4.0,eps_1=0.5)")
    assert 0.5 < m.epsilon_instantaneous() < 2.0
    assert compose([release_of(m, 2, memo_key="x")]).epsilon == pytest.approx(2 * m.epsilon_instantaneous())
    assert compose([release_of(m, 100, memo_key="x")]).epsilon == pytest.approx(4.0)
    assert release_of(parse("lolh(k=4,eps_perm=2.0,eps_1=1.0)")).eps_inst is not None
    assert release_of(parse("lsue(k=4,eps_perm=2.0,eps_1=1.0)")).eps_inst is None


def test_reports_of_one_memo_do_not_compose_by_their_own_level():
    """Why a memo group of two reports costs eps_perm and not 2 eps_1: the exact joint channel of
    two reports of loue(k=3,eps_perm=4,eps_1=0.5) drawn from one memo has a level above 1.0."""
    mech = parse("loue(k=3,eps_perm=4.0,eps_1=0.5)")
    bits = (np.arange(8)[:, None] >> np.arange(3)[None, :]) & 1

    def flips(p, q, truth, out):
        one = np.where(truth[:, None, :] == 1, p, q)
        return np.prod(np.where(out[None, :, :] == 1, one, 1 - one), axis=2)

    first, second = flips(*mech.first, np.eye(3, dtype=int), bits), flips(*mech.second, bits, bits)
    assert ldp_epsilon(first @ second) == pytest.approx(mech.epsilon_ldp(), rel=1e-9)
    two = first @ (second[:, :, None] * second[:, None, :]).reshape(8, 64)
    level = ldp_epsilon(two)
    assert level > 2 * mech.epsilon_ldp() * (1 + 1e-6)
    assert level <= mech.epsilon_perm()
    # what a collector that cannot see memo groups charges per report covers the pair
    assert 2 * report_charge(mech) >= level


def test_release_of_records_the_computed_levels():
    r = release_of(parse("rappor(k=8,m=16,h=2,f=0.5,cohorts=2)"), 3, collection="c", time="2026-01-01T00:00:00Z")
    mech = parse(r.spec)
    assert (r.epsilon, r.eps_perm, r.reports, r.rr_values) == (mech.epsilon_ldp(), mech.epsilon_perm(), 3, None)
    assert r.eps_inst is None
    assert release_of(parse("krr(k=5,eps=1.0)")).rr_values == 5
    assert release_of(parse("oue(k=5,eps=1.0)")).eps_perm is None
    with pytest.raises(LocalPrivError, match="no memoized randomization"):
        release_of(parse("krr(k=5,eps=1.0)"), memo_key="x")
    assert Release.from_dict(r.to_dict()) == r


@pytest.mark.parametrize("bad, match", [
    (dict(spec="", epsilon=1.0), "spec"),
    (dict(spec="krr", epsilon=-1.0), "epsilon must be >= 0"),
    (dict(spec="krr", epsilon=float("nan")), "epsilon must be >= 0"),
    (dict(spec="krr", epsilon="1"), "epsilon must be a number"),
    (dict(spec="krr", epsilon=1.0, reports=0), "reports must be an integer"),
    (dict(spec="krr", epsilon=1.0, delta=1.0), "delta must be in"),
    (dict(spec="krr", epsilon=1.0, memo_key="x"), "needs eps_perm"),
    (dict(spec="krr", epsilon=1.0, rr_values=1), "rr_values"),
])
def test_bad_releases_are_refused_in_one_line(bad, match):
    with pytest.raises(LocalPrivError, match=match) as exc:
        Release(**bad)
    assert "\n" not in str(exc.value)


def test_unknown_and_missing_keys_are_refused():
    with pytest.raises(LocalPrivError, match="unknown key"):
        Release.from_dict({"spec": "krr", "epsilon": 1.0, "eps": 2})
    with pytest.raises(LocalPrivError, match="missing key"):
        Release.from_dict({"spec": "krr"})


def test_limits_and_fallbacks_are_stated():
    with pytest.raises(LocalPrivError, match=f"limit of {MAX_RELEASES:,}"):
        compose([release(1.0)] * (MAX_RELEASES + 1))
    with pytest.raises(LocalPrivError, match="delta must be in"):
        compose([release(1.0)], delta=0.0)
    big = compose([release(0.1, MAX_PLD_EVENTS + 1)], delta=1e-6)
    assert big.accountant.startswith("basic:") and "limit" in big.accountant
    assert big.pld_epsilon == big.epsilon
    inf = compose([release(math.inf), release(1.0)], delta=1e-6)
    assert inf.epsilon == math.inf and inf.accountant == "basic: a level is infinite"
    with pytest.raises(LocalPrivError, match="disagree on eps_perm"):
        compose([Release(spec="a", epsilon=1.0, memo_key="m", eps_perm=2.0),
                 Release(spec="a", epsilon=1.0, memo_key="m", eps_perm=3.0)])


def test_pld_matches_the_known_value_for_randomized_response():
    # 100 reports of 4-RR at eps = 1: basic says 100, the PLD much less (docs/results/accounting.json)
    comp = compose([release(1.0, 100, rr_values=4)], delta=1e-6)
    assert isinstance(comp, Composition) and comp.accountant == "pld" and comp.events == 100
    assert 40 < comp.pld_epsilon < 80
    assert comp.models == [{"model": "rr", "epsilon": 1.0, "delta": 0.0, "rr_values": 4, "count": 100,
                            "releases": 1}]


def test_releases_with_their_own_delta():
    rels = [Release(spec="x", epsilon=1.0, delta=1e-7, reports=10)]
    comp = compose(rels, delta=1e-5)
    assert comp.delta == pytest.approx(1e-6) and comp.pld_epsilon <= 10.0
    assert compose(rels, delta=1e-7).pld_epsilon <= math.inf  # below its own delta: only the PLD can say


@settings(max_examples=30, deadline=None)
@given(prior=st.floats(1e-6, 1 - 1e-6), eps=st.floats(0, 30))
def test_posterior_bound_multiplies_the_odds_by_at_most_e_eps(prior, eps):
    post = posterior_bound(prior, eps)
    assert prior * (1 - 1e-12) <= post <= 1.0
    if post < 0.999:  # nearer 1, 1 - post loses the digits the odds need
        odds = post / (1 - post) / (prior / (1 - prior))
        assert odds == pytest.approx(math.exp(eps), rel=1e-6)


def test_explain_level_in_plain_words():
    text = explain_level(1.0)
    assert "e^eps = 2.72" in text and "1% becomes at most 2.67%" in text and "50% at most 73.1%" in text
    assert "\n" not in text
    assert "probability at most 1e-06" in explain_level(0.5, 1e-6)
    assert "No bound" in explain_level(math.inf)
    assert "Nothing is revealed" in explain_level(0.0)
    assert "practically nothing" in explain_level(20.0)
    with pytest.raises(LocalPrivError):
        explain_level(-1.0)


def test_the_docs_tables_are_rendered_from_the_committed_json():
    """docs/accounting.md and decisions 0051-0052 quote docs/results/accounting.json through
    tools/accounting_evidence.py (`make accounting-evidence`), never typed numbers."""
    import importlib.util
    import json
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("accounting_evidence", root / "tools" / "accounting_evidence.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    blocks = tool.tables(json.loads((root / "docs" / "results" / "accounting.json").read_text()))
    seen = 0
    for path in tool.DOCS:
        for name, body in re.findall(r"<!-- accounting-evidence:([\w-]+) -->\n(.*?)\n<!-- /accounting-evidence -->",
                                     path.read_text(), flags=re.S):
            assert body == blocks[name], f"{path.name}: block {name} differs from the JSON's rendering"
            seen += 1
    assert seen == 6
