"""HDG's response matrix (multiattr.protocols.GroupTables.response_matrix) and its answers, and the
support-count estimator's ``w @ B`` restricted to the cells a functional touches."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from localpriv.cli.main import app
from localpriv.domains import IntegerDomain, ProductDomain
from localpriv.estimators.postprocess import norm_sub
from localpriv.mechanisms import parse
from localpriv.mechanisms.grouped import SupportEstimator
from localpriv.multiattr.protocols import GroupTables, answer_protocol_queries
from localpriv.utils.errors import LocalPrivError

SHAPE = (12, 10)


def _tables_of(mech, theta: np.ndarray) -> GroupTables:
    """Exact group tables of the joint ``theta`` (no noise): the grids' frequencies."""
    cells = mech.cellmaps()
    tables = tuple(np.bincount(c, weights=theta, minlength=g.cells) for c, g in zip(cells, mech.groups))
    eye = tuple(np.eye(g.cells) for g in mech.groups)
    laws = tuple(np.full(g.cells, 1.0 / g.cells) for g in mech.groups)
    return GroupTables(mech, tables, eye, laws, tuple(100_000 for _ in mech.groups))


def test_the_matrix_recovers_a_product_joint_that_is_flat_on_the_1d_bins():
    # a product joint whose factors are constant on every 1-D bin: the 1-D grids and the 2-D grid
    # determine it, and the alternating scalings from the uniform matrix reach it; the grid alone
    # (uniform inside a 2-D cell) does not
    mech = parse(f"hdg(krr(eps=1.0),shape={list(SHAPE)},g1=6,g2=2)")
    g1 = [g for g in mech.groups if len(g.attrs) == 1]
    rng = np.random.default_rng(0)
    factors = []
    for g in g1:
        w = rng.uniform(0.2, 1.0, g.cells)
        f = np.repeat(w / np.diff(g.edges[0]), np.diff(g.edges[0]))
        factors.append(f / f.sum())
    joint = np.outer(*factors)
    tab = _tables_of(mech, joint.ravel())
    M = tab.response_matrix(0, 1)
    np.testing.assert_allclose(M, joint, atol=1e-9)
    r = {0: (1, 4), 1: (3, 8)}
    want = joint[1:5, 3:9].sum()
    assert tab.refined_range_value(r) == pytest.approx(want, abs=1e-9)
    assert abs(tab.range_value(r)[0] - want) > 1e-3


def test_the_matrix_agrees_with_its_2d_grid_and_answers_within_the_anchored_interval():
    mech = parse(f"hdg(krr(eps=2.0),shape={list(SHAPE)},g1=6,g2=3)")
    rng = np.random.default_rng(1)
    a = np.minimum(rng.poisson(4, 20_000), 11)
    b = np.minimum(rng.poisson(3, 20_000) + a // 3, 9)
    tab = GroupTables.from_reports(mech, mech.sample(a * 10 + b, rng))
    M = tab.response_matrix(0, 1)
    assert M.shape == SHAPE and M.min() >= 0 and M.sum() == pytest.approx(1.0)
    g2 = next(i for i, g in enumerate(mech.groups) if g.attrs == (0, 1))
    ci = np.searchsorted(mech.groups[g2].edges[0], np.arange(12), side="right") - 1
    cj = np.searchsorted(mech.groups[g2].edges[1], np.arange(10), side="right") - 1
    blocks = np.bincount((ci[:, None] * 3 + cj[None, :]).ravel(), weights=M.ravel(), minlength=9)
    # the last scaling of a round is the 2-D grid's: the matrix's blocks are the Norm-Sub grid
    np.testing.assert_allclose(blocks, norm_sub(tab.tables[g2]), atol=1e-9)
    plain, var = tab.range_value({0: (2, 7), 1: (1, 5)})
    iv = tab.range({0: (2, 7), 1: (1, 5)}, 0.9, refined=True)
    half = 1.6448536269514722 * var ** 0.5
    assert iv.value == pytest.approx(M[2:8, 1:6].sum())
    assert iv.lower == pytest.approx(min(plain - half, iv.value)) and iv.upper == pytest.approx(max(plain + half,
                                                                                                      iv.value))
    assert "anchored" in iv.method
    # one attribute: the 1-D grid's answer, as without the refinement
    assert tab.refined_range_value({0: (2, 7)}) == tab.range_value({0: (2, 7)})[0]
    ref, anchor, mvar = tab.refined_marginal([1, 0])
    np.testing.assert_allclose(ref, M.T)
    assert anchor.shape == (10, 12) and mvar.shape == (10, 12)


def test_refusals_name_the_limit_in_one_line():
    mech = parse("hdg(krr(eps=1.0),shape=[4,3,3],g1=4,g2=2)")
    tab = GroupTables.from_reports(mech, mech.sample(np.arange(36).repeat(20), np.random.default_rng(2)))
    with pytest.raises(LocalPrivError, match="at most two attributes"):
        tab.refined_range_value({0: (1, 2), 1: (0, 1), 2: (1, 2)})
    with pytest.raises(LocalPrivError, match="two positions"):
        tab.response_matrix(1, 0)
    hio = parse("hio(krr(eps=1.0),shape=[4,3],branching=2)")
    htab = GroupTables.from_reports(hio, hio.sample(np.arange(12).repeat(20), np.random.default_rng(2)))
    with pytest.raises(LocalPrivError, match="HDG's"):
        htab.refined_range_value({0: (1, 2)})
    dom = ProductDomain([IntegerDomain(0, 3), IntegerDomain(0, 2)], ["a", "b"])
    with pytest.raises(LocalPrivError, match="HDG's"):
        answer_protocol_queries(htab, dom, ranges=["a=1..2"], refined=True)


def test_support_estimator_restricted_product_equals_the_full_one():
    mech = parse("hio(oracle=oue(eps=1.0),shape=[16,4],branching=4)")
    rng = np.random.default_rng(5)
    reports = mech.sample(rng.integers(0, 64, 3000), rng)
    tab = GroupTables.from_reports(mech, reports)
    B = next(b for b in tab.estimators if isinstance(b, SupportEstimator) and b.k > 4)
    w = np.zeros(B.k)
    w[[1, 3]] = [1.0, 0.5]
    full = ((B.Z.astype(float) @ w) - B.q * w.sum()) / (B.p - B.q)
    np.testing.assert_allclose(w @ B, full, rtol=1e-12, atol=1e-12)
    rows = np.vstack([w, np.ones(B.k)])
    fulls = ((B.Z.astype(float) @ rows.T) - B.q * rows.sum(axis=1)) / (B.p - B.q)
    np.testing.assert_allclose(rows @ B, fulls.T, rtol=1e-12, atol=1e-12)


def test_cli_query_direct_refine_on_hdg_reports(tmp_path):
    rng = np.random.default_rng(3)
    people = tmp_path / "people.csv"
    ages, hours = rng.integers(18, 30, 3000), rng.integers(30, 40, 3000)
    people.write_text("age,hours\n" + "".join(f"{a},{h}\n" for a, h in zip(ages, hours)))
    dom = "product(age=18..29;hours=30..39)"
    reports = tmp_path / "r.parquet"
    run = CliRunner().invoke(app, ["perturb", str(people), "-o", str(reports), "--domain", dom, "--columns",
                                   "age,hours", "--protocol", "hdg(krr(eps=2.0),g1=6,g2=3)", "--seed", "1"])
    assert run.exit_code == 0, run.output
    out = tmp_path / "a.json"
    res = CliRunner().invoke(app, ["query", str(reports), "--domain", dom, "--direct", "--refine",
                                   "--range", "age=20..25,hours=32..35", "--marginal", "age,hours", "--out", str(out)])
    assert res.exit_code == 0, res.output
    ans = json.loads(out.read_text())
    r = ans["ranges"][0]
    assert r["lower"] <= r["probability"] <= r["upper"] and "response matri" in ans["method"]
    rows = ans["marginals"]["age,hours"]
    assert len(rows) == 120 and all(x["lower"] <= x["probability"] <= x["upper"] for x in rows)
    assert sum(x["probability"] for x in rows) == pytest.approx(1.0)
    res = CliRunner().invoke(app, ["query", str(reports), "--domain", dom, "--refine", "--range", "age=20..25"])
    assert res.exit_code != 0 and "--direct" in res.output


@pytest.mark.parametrize("spec,ranges", [("hio(oue(eps=2.0),shape=[12,10],branching=2)", {0: (3, 8), 1: (0, 2)}),
                                         ("hdg(olh(eps=2.0),shape=[12,10],g1=6,g2=3)", {0: (3, 8), 1: (1, 6)}),
                                         ("hi(krr(eps=2.0),shape=[12,10])", {1: (2, 7)}),
                                         ("calm(krr(eps=2.0),shape=[12,10],sets=[[0],[0,1]])", {0: (2, 9)})])
def test_range_value_without_variance_is_the_same_estimate(spec, ranges):
    mech = parse(spec)
    rng = np.random.default_rng(6)
    tab = GroupTables.from_reports(mech, mech.sample(rng.integers(0, 120, 4000), rng))
    value, var = tab.range_value(ranges)
    quick, skipped = tab.range_value(ranges, variance=False)
    assert quick == value and var > 0
    assert np.isnan(skipped) or skipped == var  # calm averages two groups: it needs the variances


def test_tables_from_byte_reports_equal_those_from_numpys_unique_rows():
    mech = parse("hio(oracle=oue(eps=1.0),shape=[16,4],branching=4)")
    rng = np.random.default_rng(8)
    reports = mech.sample(rng.integers(0, 64, 2000), rng)
    assert reports.dtype == np.uint8 and reports.ndim == 2
    want, wcnt = np.unique(reports, axis=0, return_counts=True)
    a, b = GroupTables.from_reports(mech, reports), GroupTables.from_observed(mech, want, wcnt)
    for x, y in zip(a.tables + a.laws, b.tables + b.laws):
        assert np.array_equal(x, y)
