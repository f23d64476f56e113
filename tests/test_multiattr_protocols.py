"""SPL, SMP, RS+FD and RS+RFD on product domains: levels, estimators, joint MLE, attribute attack."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from localpriv.data.observations import Observations
from localpriv.domains import CategoricalDomain, IntegerDomain, ProductDomain
from localpriv.inference import estimate
from localpriv.mechanisms import parse
from localpriv.mechanisms.multiattr import amplified_epsilon
from localpriv.mechanisms.privacy import ldp_epsilon
from localpriv.multiattr.attribute_attack import sampled_attribute_attack
from localpriv.utils.validation import LocalPrivError

PRIOR = "[[0.5,0.3,0.2],[0.6,0.4],[0.1,0.2,0.3,0.4]]"
SPECS = ["spl(krr(eps=1.0))", "smp(krr(eps=1.0))", "smp(oue(eps=1.0))", "rsfd(krr(eps=1.0))",
         "rsfd(oue(eps=1.0))", f"rsrfd(krr(eps=1.0),prior={PRIOR})",
         "spl(oracle=[krr(eps=0.5),krr(eps=0.2),oue(eps=0.3)])"]


def _dom() -> ProductDomain:
    return ProductDomain([IntegerDomain(0, 2), CategoricalDomain(["a", "b"]), IntegerDomain(0, 3)],
                         ["age", "edu", "hours"])


def _theta(dom: ProductDomain) -> np.ndarray:
    return np.random.default_rng(1).dirichlet(np.full(dom.size, 2.0))


def _attribute_level_brute(C: np.ndarray, shape: tuple[int, ...]) -> float:
    """max over pairs of tuples differing in one attribute of max_z log(C[x, z] / C[x', z])."""
    codes = np.stack(np.unravel_index(np.arange(C.shape[0]), shape), axis=1)
    best = 0.0
    for a, b in itertools.combinations(range(C.shape[0]), 2):
        if int((codes[a] != codes[b]).sum()) == 1:
            best = max(best, float(np.max(np.abs(np.log(C[a]) - np.log(C[b])))))
    return best


@pytest.mark.parametrize("spec", SPECS)
def test_levels_and_structured_block_match_the_dense_channel(spec: str) -> None:
    mech = parse(spec, _dom())
    C = mech.channel()
    assert mech.epsilon_ldp() == pytest.approx(ldp_epsilon(C), rel=1e-9)
    assert mech.epsilon_attribute() == pytest.approx(_attribute_level_brute(C, mech.shape), rel=1e-9)
    r = np.arange(mech.n_outputs)
    block = mech.likelihood_block(r, np.ones(r.size))
    theta, w = _theta(_dom()), np.random.default_rng(2).random(r.size)
    assert np.allclose(block.forward(theta), theta @ C) and np.allclose(block.backward(w), C @ w)
    assert parse(str(mech)) == mech


def test_spl_split_composes_to_eps_and_rsfd_claims_hold_only_per_attribute() -> None:
    dom = ProductDomain([IntegerDomain(0, 3)] * 3, ["a", "b", "c"])  # equal sizes
    spl = parse("spl(krr(eps=1.5))", dom)
    assert spl.epsilon_ldp() == pytest.approx(1.5) and spl.epsilon_attribute() == pytest.approx(0.5)
    rsfd = parse("rsfd(krr(eps=1.0))", dom)
    # between tuples differing in one attribute: the paper's eps (Arcolezi et al. 2021, Theorem 1)
    assert rsfd.epsilon_attribute() == pytest.approx(1.0, rel=1e-12)
    # between any two tuples: the oracle's amplified level eps' = ln(d (e^eps - 1) + 1)
    assert rsfd.epsilon_ldp() == pytest.approx(amplified_epsilon(1.0, 3), rel=1e-12)
    assert rsfd.epsilon_ldp() == pytest.approx(math.log(3 * math.expm1(1.0) + 1))
    # unequal sizes: the per-attribute level exceeds the claim (computed: 1.124 for 3 x 2 x 4)
    assert parse("rsfd(krr(eps=1.0))", _dom()).epsilon_attribute() > 1.0 + 1e-3


@pytest.mark.parametrize("spec", SPECS)
def test_marginal_estimators_are_unbiased(spec: str) -> None:
    dom = _dom()
    mech = parse(spec, dom)
    theta = _theta(dom)
    # linear in the counts: at the expected counts they return the true marginals exactly
    expected = 1e6 * (theta @ mech.channel())
    for j, f in enumerate(mech.marginals_from_counts(expected)):
        assert np.allclose(f, dom.marginalize(theta, j), atol=1e-9)
    # and from sampled reports within 5 standard errors (crude bound from the channel's inverse)
    rng = np.random.default_rng(3)
    n = 40_000
    x = rng.choice(dom.size, size=n, p=theta)
    est = mech.marginal_frequencies(mech.sample(x, rng))
    for j, f in enumerate(est):
        inv = np.linalg.pinv(mech.channels[j])
        scale = (mech.d if mech.kind != "spl" else 1.0) * float(np.abs(inv).max()) * math.sqrt(mech.d)
        assert np.all(np.abs(f - dom.marginalize(theta, j)) < 5 * scale / math.sqrt(n))


@pytest.mark.parametrize("spec", ["smp(krr(eps=2.0))", "rsfd(krr(eps=2.0))", "spl(krr(eps=3.0))"])
def test_joint_mle_from_the_one_em_engine(spec: str) -> None:
    dom = _dom()
    mech = parse(spec, dom)
    theta = _theta(dom)
    rng = np.random.default_rng(4)
    x = rng.choice(dom.size, size=30_000, p=theta)
    obs = Observations.from_reports(mech, mech.sample(x, rng), domain=dom)
    fit = estimate(obs, "ibu")
    joint = np.asarray(fit.distribution)
    assert joint.shape == (dom.size,) and joint.sum() == pytest.approx(1.0)
    empirical = np.bincount(x, minlength=dom.size) / x.size
    uniform_err = 0.5 * np.abs(np.full(dom.size, 1 / dom.size) - empirical).sum()
    assert 0.5 * np.abs(joint - empirical).sum() < uniform_err  # closer to the data than no data
    for j in range(dom.d):  # its marginals agree with the data's
        assert 0.5 * np.abs(dom.marginalize(joint, j) - dom.marginalize(empirical, j)).sum() < 0.1


def test_rsrfd_resists_the_sampled_attribute_attack_better_than_rsfd() -> None:
    dom = ProductDomain([IntegerDomain(0, 4)] * 3, ["a", "b", "c"])
    marg = np.array([0.6, 0.25, 0.1, 0.04, 0.01])
    rng = np.random.default_rng(5)
    n = 30_000
    codes = rng.choice(5, size=(n, 3), p=marg)
    x = dom.ravel(codes)
    prior = "[" + ",".join([str(marg.tolist())] * 3) + "]"
    fd = sampled_attribute_attack(parse("rsfd(krr(eps=2.0))", dom), x, rng)
    rfd = sampled_attribute_attack(parse(f"rsrfd(krr(eps=2.0),prior={prior})", dom), x, rng)
    smp = sampled_attribute_attack(parse("smp(krr(eps=2.0))", dom), x, rng)
    se = math.sqrt(0.25 / n)
    assert smp.accuracy == 1.0
    assert fd.accuracy > fd.baseline + 10 * se  # uniform fake data give the true attribute away
    assert rfd.accuracy < fd.accuracy - 10 * se  # fake data like the real data hide it better
    assert rfd.accuracy > rfd.baseline - 5 * se and 0.0 <= rfd.advantage < fd.advantage


def test_refusals_are_one_line() -> None:
    dom = _dom()
    for spec, msg in [("rsrfd(krr(eps=1.0),prior=[[1,0,1],[1,1],[1,1,1,1]])", "positive"),
                      ("smp(krr(eps=1.0),prior=[[1]])", "only rsrfd"),
                      ("smp(oracle=[krr(eps=1.0),krr(eps=1.0)])", "2 oracles for 3"),
                      ("smp(krr(eps=1.0),bogus=1)", "unknown parameter"),
                      ("smp(krr(eps=1.0))", "give shape")]:
        with pytest.raises(LocalPrivError, match=msg) as exc:
            parse(spec, None if msg == "give shape" else dom)
        assert "\n" not in str(exc.value)
    with pytest.raises(LocalPrivError, match="smp, rsfd or rsrfd"):
        sampled_attribute_attack(parse("spl(krr(eps=1.0))", dom), np.arange(3), 0)


def test_cli_perturbs_columns_with_a_protocol_and_estimates_joint_and_marginals(tmp_path) -> None:
    from typer.testing import CliRunner

    from localpriv.cli.main import app

    rng = np.random.default_rng(6)
    n = 1500
    ages = rng.integers(18, 21, n)
    edu = rng.choice(["HS", "BA"], n, p=[0.7, 0.3])
    hours = rng.integers(0, 4, n)
    src = tmp_path / "people.csv"
    src.write_text("age,education,hours\n" + "".join(f"{a},{e},{h}\n" for a, e, h in zip(ages, edu, hours)))
    dom = "product(age=18..20;education=HS,BA;hours=0..3)"
    run = CliRunner()
    r = run.invoke(app, ["perturb", str(src), "-o", str(tmp_path / "r.parquet"), "--domain", dom,
                         "--columns", "age,education,hours", "--protocol", "spl(krr(eps=6.0))", "--seed", "1"])
    assert r.exit_code == 0, r.output
    r = run.invoke(app, ["estimate", str(tmp_path / "r.parquet"), "--domain", dom, "-e", "ibu", "--ci", "0.95",
                         "-o", str(tmp_path / "est.csv")])
    assert r.exit_code == 0, r.output
    import pandas as pd
    joint = pd.read_csv(tmp_path / "est.csv")
    assert list(joint.columns[:3]) == ["age", "education", "hours"] and len(joint) == 24
    marg = pd.read_csv(tmp_path / "est.marginals.csv")
    row = marg[(marg.attribute == "education") & (marg.value == "HS")].iloc[0]
    assert row.lower <= float(np.mean(edu == "HS")) <= row.upper
    assert abs(row.probability - 0.7) < 0.1


@pytest.mark.parametrize("spec", ["smp(krr(eps=2.0))", "rsfd(krr(eps=2.0))"])
def test_joint_mle_where_the_dense_likelihood_is_refused(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALPRIV_MAX_DENSE_ENTRIES", "100000")
    dom = ProductDomain([IntegerDomain(0, 5)] * 5, list("abcde"))  # 7,776 joint cells
    mech = parse(spec, dom)
    rng = np.random.default_rng(7)
    x = rng.integers(0, dom.size, 4000)
    reports = mech.sample(x, rng)
    with pytest.raises(LocalPrivError, match="LOCALPRIV_MAX_DENSE_ENTRIES"):
        mech.channel()
    fit = estimate(Observations.from_reports(mech, reports, domain=dom), "ibu", max_iter=50)
    assert fit.distribution.shape == (dom.size,) and fit.distribution.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("spec", ["spl(krr(eps=1.0))", "smp(oue(eps=1.0))", f"rsrfd(krr(eps=1.0),prior={PRIOR})"])
def test_blocks_hessian_diagonal_is_the_dense_one(spec: str) -> None:
    mech = parse(spec, _dom())
    r = np.arange(mech.n_outputs)
    block = mech.likelihood_block(r, np.ones(r.size))
    w = np.random.default_rng(8).random(r.size)
    G = mech.channel()
    assert block.hessian_diagonal is not None
    assert np.allclose(block.hessian_diagonal(w), (G * G) @ w)
