"""The grouped protocols (calm, hi, hio, hdg) and their answers from group tables."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from localpriv.cli.main import app
from localpriv.data.observations import Observations
from localpriv.domains import CategoricalDomain, IntegerDomain, ProductDomain
from localpriv.inference import estimate
from localpriv.mechanisms import parse
from localpriv.mechanisms.rrba import rrba_epsilon
from localpriv.multiattr.protocols import GroupTables, answer_protocol_queries
from localpriv.multiattr.ranges import decompose_interval
from localpriv.testing.mechanisms import ConformanceError, mechanism_checks
from localpriv.utils.errors import LocalPrivError

DOM = ProductDomain([IntegerDomain(0, 15), IntegerDomain(0, 5), CategoricalDomain(["a", "b", "c"])], ["x", "y", "c"])


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    codes = np.column_stack([np.minimum(rng.poisson(5, n), 15), np.minimum(rng.poisson(2, n), 5),
                             rng.integers(0, 3, n)])
    return codes, DOM.ravel(codes)


@settings(max_examples=60, deadline=None)
@given(size=st.integers(2, 70), b=st.integers(2, 5), data=st.data())
def test_decomposition_covers_the_range_exactly(size, b, data):
    lo = data.draw(st.integers(0, size - 1))
    hi = data.draw(st.integers(lo, size - 1))
    nodes = decompose_interval(lo, hi, size, b)
    h = 1
    while b ** h < size:
        h += 1
    cover = np.zeros(b ** h, dtype=int)
    for level, i in nodes:
        width = b ** (h - level)
        cover[i * width:(i + 1) * width] += 1
    want = np.zeros(b ** h, dtype=int)
    want[lo:hi + 1] = 1
    if (lo, hi) == (0, size - 1):
        assert nodes == [(0, 0)]
    else:
        assert np.array_equal(cover, want)


@pytest.mark.parametrize("spec,ranges", [
    ("hio(krr(eps=2.0),branching=2)", {0: (3, 8), 1: (0, 2)}),
    ("hi(krr(eps=2.0))", {0: (3, 8)}),
    ("calm(krr(eps=2.0))", {0: (3, 8), 2: (1, 1)}),
    ("calm(rrba(p=0.6),sets=[[0],[1,2]])", {1: (1, 3), 2: (0, 1)}),
    ("hio(oue(eps=2.0),branching=2)", {0: (3, 8), 1: (0, 2)}),
    ("hio(olh(eps=2.0),branching=4)", {0: (3, 8), 1: (0, 2)}),
    ("calm(olh(eps=2.0),sets=[[0,1],[1,2]])", {0: (3, 8), 1: (1, 1)}),
])
def test_range_answers_are_unbiased_within_their_interval(spec, ranges):
    codes, flat = _data(30_000, 1)
    mech = parse(spec, DOM)
    tables = GroupTables.from_reports(mech, mech.sample(flat, 2))
    truth = np.ones(len(flat), dtype=bool)
    for j, (lo, hi) in ranges.items():
        truth &= (codes[:, j] >= lo) & (codes[:, j] <= hi)
    value, var = tables.range_value(ranges)
    # 5 standard deviations: a correct estimator fails with probability ~6e-7
    assert abs(value - truth.mean()) <= 5 * math.sqrt(var)


def test_calm_marginals_agree_on_shared_attributes():
    _, flat = _data(20_000, 3)
    mech = parse("calm(krr(eps=1.0),sets=[[0,1],[1,2]])", DOM)
    tables = GroupTables.from_reports(mech, mech.sample(flat, 4))
    a = tables.tables[0].reshape(16, 6).sum(axis=0)
    b = tables.tables[1].reshape(6, 3).sum(axis=1)
    np.testing.assert_allclose(a, b, atol=1e-12)
    raw = GroupTables.from_reports(mech, mech.sample(flat, 4), consistent=False)
    assert not np.allclose(raw.tables[0].reshape(16, 6).sum(axis=0), raw.tables[1].reshape(6, 3).sum(axis=1))


def test_levels_of_the_grouped_protocols():
    assert parse("hio(krr(eps=1.5))", DOM).epsilon_ldp() == pytest.approx(1.5)
    assert parse("hdg(krr(eps=0.5),g1=4,g2=2)", DOM).epsilon_ldp() == pytest.approx(0.5)
    # RRBA on each group's table: the largest table (16 x 6 cells) has the largest level
    mech = parse("calm(rrba(p=0.5),sets=[[0,1],[2]])", DOM)
    assert mech.epsilon_ldp() == pytest.approx(rrba_epsilon(0.5, np.full(96, 1 / 96)))


def test_refusals_name_the_limit_in_one_line():
    _, flat = _data(2_000, 5)
    for spec, ranges, words in [("hi(krr(eps=1.0))", {0: (1, 3), 1: (0, 1)}, "one attribute"),
                                ("hdg(krr(eps=1.0))", {0: (1, 3), 1: (0, 1), 2: (0, 0)}, "two attributes"),
                                ("calm(krr(eps=1.0),sets=[[0],[1]])", {0: (1, 3), 1: (0, 1)}, "not reported together")]:
        mech = parse(spec, DOM)
        tables = GroupTables.from_reports(mech, mech.sample(flat, 6))
        with pytest.raises(LocalPrivError, match=words) as err:
            tables.range_value(ranges)
        assert "\n" not in str(err.value)
    with pytest.raises(LocalPrivError, match="level vectors"):
        parse("hio(krr(eps=1.0),shape=[10,10,10,10,10,10],branching=2)")
    with pytest.raises(LocalPrivError, match="unknown parameter"):
        parse("calm(krr(eps=1.0),shape=[2,2],bogus=1)")


def test_joint_mle_through_the_grouped_block_and_queries_by_name():
    codes, flat = _data(20_000, 7)
    mech = parse("hio(krr(eps=2.0))", DOM)
    reports = mech.sample(flat, 8)
    fit = estimate(Observations.from_reports(mech, reports, domain=DOM), "ibu")
    p = np.asarray(fit.distribution).reshape(DOM.shape)
    truth = np.bincount(codes[:, 2], minlength=3) / len(flat)
    assert np.abs(p.sum(axis=(0, 1)) - truth).max() < 0.03
    answers = answer_protocol_queries(GroupTables.from_reports(mech, reports), DOM, ["c"], ["x=3..8,c=b"])
    assert [r["c"] for r in answers["marginals"]["c"]] == ["a", "b", "c"]
    rng = answers["ranges"][0]
    assert rng["lower"] <= rng["probability"] <= rng["upper"]


@pytest.mark.parametrize("protocol", ["hio(krr(eps=3.0))", "hio(oue(eps=3.0))"])
def test_cli_perturb_by_hio_and_query_direct(tmp_path, protocol):
    rng = np.random.default_rng(3)
    people = tmp_path / "people.csv"
    ages, sexes = rng.integers(18, 30, 3000), rng.choice(["F", "M"], 3000)
    people.write_text("age,sex\n" + "".join(f"{a},{s}\n" for a, s in zip(ages, sexes)))
    dom = "product(age=18..29;sex=F,M)"
    reports = tmp_path / "r.parquet"
    run = CliRunner().invoke(app, ["perturb", str(people), "-o", str(reports), "--domain", dom, "--columns",
                                   "age,sex", "--protocol", protocol, "--seed", "1"])
    assert run.exit_code == 0, run.output
    out = tmp_path / "a.json"
    res = CliRunner().invoke(app, ["query", str(reports), "--domain", dom, "--direct", "--range", "age=20..25,sex=F",
                                   "--marginal", "sex", "--out", str(out)])
    assert res.exit_code == 0, res.output
    ans = json.loads(out.read_text())
    r = ans["ranges"][0]
    assert r["lower"] <= r["probability"] <= r["upper"] and ans["method"].startswith("hio")
    assert [row["sex"] for row in ans["marginals"]["sex"]] == ["F", "M"]
    if "oue" in protocol:
        return
    res = CliRunner().invoke(app, ["query", str(reports), "--direct", "--range", "age=20..25"])
    assert res.exit_code != 0 and "--domain" in res.output


@pytest.mark.parametrize("spec", ["calm(oracle=krr(eps=1.0),shape=[3,2])", "smp(oracle=krr(eps=1.0),shape=[3,2])"])
def test_the_tables_check_catches_a_biased_estimator(spec):
    mech = parse(spec)
    checks = dict(mechanism_checks(mech, 0))
    checks["check_unbiased_tables_invert_the_channel"]()  # the sound one passes
    if hasattr(mech, "group_estimates"):
        sound = mech.group_estimates
        mech.group_estimates = lambda c: [(f * 1.01, B, n) for f, B, n in sound(c)]
    else:
        sound_m = mech.marginals_from_counts
        mech.marginals_from_counts = lambda c: [f + 0.001 for f in sound_m(c)]
    with pytest.raises(ConformanceError, match="tables"):
        dict(mechanism_checks(mech, 0))["check_unbiased_tables_invert_the_channel"]()


@pytest.mark.parametrize("spec", ["calm(oue(eps=2.0),sets=[[0,1],[2]])", "calm(olh(eps=2.0),sets=[[0,1],[2]])"])
def test_pure_oracles_per_group_reports_tables_and_joint_fit(spec):
    codes, flat = _data(8_000, 11)
    mech = parse(spec, DOM)
    assert mech.epsilon_ldp() == pytest.approx(2.0)
    assert mech.n_outputs is None and all(mech.structured)  # not enumerable: support functions
    reports = mech.sample(flat, 12)
    assert reports.shape[0] == len(flat)
    obs = Observations.from_reports(mech, reports, domain=DOM)
    # the tables from the aggregated reports equal those from the raw reports
    direct = GroupTables.from_reports(mech, reports)
    block = obs.single("test")
    agg = GroupTables.from_observed(mech, block.reports, block.counts)
    for a, b in zip(direct.tables, agg.tables):
        np.testing.assert_allclose(a, b, atol=1e-9)
    fit = estimate(obs, "ibu")
    p = np.asarray(fit.distribution).reshape(DOM.shape)
    truth = np.bincount(codes[:, 2], minlength=3) / len(flat)
    # the c marginal of the joint fit: each group holds c, n ~ 8,000 / G users, eps = 2
    assert np.abs(p.sum(axis=(0, 1)) - truth).max() < 0.06
    value, var = direct.marginal([2])
    assert np.all(np.abs(value - truth) <= 5 * np.sqrt(var))


def test_bit_vector_reports_name_their_group_and_refuse_padding():
    mech = parse("calm(oue(eps=1.0),sets=[[0,1],[2]])", DOM)  # groups of 96 and 3 cells: 12 and 1 bytes
    reports = mech.sample(np.arange(0, DOM.size, 7), 3)
    assert reports.dtype == np.uint8 and reports.shape[1] == mech.report_bytes
    g, parts, _ = mech.split_reports(reports)
    assert np.array_equal(g, reports[:, 0].astype(np.int64) | (reports[:, 1].astype(np.int64) << 8))
    bad = reports.copy()
    bad[:, 0], bad[:, 1] = 0xFF, 0xFF
    with pytest.raises(LocalPrivError, match="groups outside") as err:
        mech.split_reports(bad)
    assert "\n" not in str(err.value)
    narrow = [i for i, w in enumerate(mech.widths) if w < max(mech.widths)][0]
    pad = reports[:1].copy()
    pad[0, 0], pad[0, 1] = narrow, 0
    pad[0, -1] = 1
    with pytest.raises(LocalPrivError, match="beyond"):
        mech.split_reports(pad)


def test_support_tables_equal_the_channel_inverse_when_enumerable():
    # OUE on groups of at most 8 cells: the dense channel exists, and the support-count tables of the
    # expected counts are the tables of theta
    mech = parse("hio(oracle=oue(eps=1.0),shape=[4,2],branching=2)")
    theta = np.random.default_rng(4).dirichlet(np.ones(mech.k))
    counts = 1e6 * (theta @ mech.channel())
    tables = GroupTables.from_counts(mech, counts, consistent=False)
    for t, c, g in zip(tables.tables, mech.cellmaps(), mech.groups):
        np.testing.assert_allclose(t, np.bincount(c, weights=theta, minlength=g.cells), atol=1e-9)
