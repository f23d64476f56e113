"""k-RR and the general matrix mechanism: channel, sampler, spec strings, computed epsilon."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from localpriv.domains import CategoricalDomain, IntegerDomain, parse_domain
from localpriv.mechanisms import KRR, MatrixMechanism, parse
from localpriv.mechanisms.privacy import geo_epsilon, ldp_epsilon
from localpriv.utils.validation import LocalPrivError


def chi2_matches(samples_by_input, channel, alpha=1e-4):
    """Pearson chi-square per input row: samples of each input follow its channel row."""
    pvals = []
    for x, z in samples_by_input.items():
        counts = np.bincount(z, minlength=channel.shape[1])
        expected = channel[x] * z.size
        live = expected > 0
        assert counts[~live].sum() == 0, "a zero-probability output was sampled"
        pvals.append(stats.chisquare(counts[live], expected[live]).pvalue)
    return min(pvals) * len(pvals) > alpha  # Bonferroni over rows


@pytest.mark.parametrize("k,eps", [(2, 0.5), (10, 1.0), (100, 2.0)])
def test_krr_samples_match_channel(k, eps):
    rng = np.random.default_rng(7)
    m = KRR(k, eps)
    n = 1_000_000
    x = rng.integers(0, k, size=n)
    z = m.sample(x, rng)
    groups = {v: z[x == v] for v in range(min(k, 10))}
    assert chi2_matches(groups, m.channel())
    # and the joint output distribution matches theta @ M
    theta = np.bincount(x, minlength=k) / n
    counts = np.bincount(z, minlength=k)
    assert stats.chisquare(counts, m.output_probabilities(theta) * n).pvalue > 1e-4


def test_default_sampler_matches_channel_small_and_large():
    rng = np.random.default_rng(3)
    for k_out in (5, 300):  # the vectorized cdf path and the grouped searchsorted path
        M = rng.dirichlet(np.ones(k_out), size=4)
        mech = MatrixMechanism(rows=M)
        x = np.repeat(np.arange(4), 100_000)
        z = mech.sample(x, rng)
        assert z.min() >= 0 and z.max() < k_out
        assert chi2_matches({v: z[x == v] for v in range(4)}, M)


@given(k=st.integers(2, 60), eps=st.floats(0.01, 8.0))
def test_krr_epsilon_computed_from_channel(k, eps):
    m = KRR(k, eps)
    assert m.epsilon_ldp() == pytest.approx(eps, rel=1e-12, abs=1e-12)
    assert np.allclose(m.channel().sum(axis=1), 1.0)


def test_epsilon_of_matrices():
    assert ldp_epsilon([[0.5, 0.5], [0.5, 0.5]]) == 0.0
    assert ldp_epsilon([[1.0, 0.0], [0.5, 0.5]]) == np.inf  # zero beside a non-zero
    assert ldp_epsilon([[0.5, 0.5, 0.0], [0.25, 0.75, 0.0]]) == pytest.approx(np.log(2))  # dead column ignored
    M = np.array([[0.6, 0.3, 0.1], [0.3, 0.4, 0.3], [0.1, 0.3, 0.6]])
    brute = max(np.log(M[a, z] / M[b, z]) for a in range(3) for b in range(3) for z in range(3))
    assert MatrixMechanism(rows=M).epsilon_ldp() == pytest.approx(brute)
    d = IntegerDomain(0, 2).distance_matrix()
    brute_g = max(np.log(M[a, z] / M[b, z]) / d[a, b] for a in range(3) for b in range(3) for z in range(3) if a != b)
    assert geo_epsilon(M, d) == pytest.approx(brute_g)


@pytest.mark.parametrize("spec", ["krr(k=100,eps=2.0)", "krr(k=2,eps=0.1)", "matrix(rows=[[0.9,0.1],[0.2,0.8]])"])
def test_spec_round_trip(spec):
    m = parse(spec)
    assert str(m) == spec
    assert parse(str(m)) == m


def test_spec_fills_k_from_domain_and_checks_it():
    assert parse("krr(eps=1.0)", IntegerDomain(0, 9)).k == 10
    with pytest.raises(LocalPrivError, match="10 elements"):
        parse("krr(k=5,eps=1.0)", IntegerDomain(0, 9))


@pytest.mark.parametrize("spec,msg", [
    ("nosuch(eps=1)", "unknown mechanism 'nosuch'"),
    ("krr(k=10,eps=0)", "eps must be a finite number > 0"),
    ("krr(k=10,eps=-1.0)", "eps must be a finite number > 0"),
    ("krr(k=1,eps=1.0)", "k must be >= 2"),
    ("krr(k=10)", "missing parameter"),
    ("krr(k=10,eps=1,zeta=3)", "unknown parameter"),
    ("krr k=10", "cannot read mechanism spec"),
    ("matrix(rows=[[0.5,0.6],[0.5,0.5]])", "not row-stochastic: row 0"),
    ("matrix(rows=[[1.5,-0.5],[0.5,0.5]])", "negative entry"),
])
def test_bad_specs_give_clear_errors(spec, msg):
    with pytest.raises(LocalPrivError, match=msg.replace("(", r"\(").replace("[", r"\[")):
        parse(spec)


def test_matrix_from_file(tmp_path):
    M = np.array([[0.7, 0.3], [0.4, 0.6]])
    np.save(tmp_path / "m.npy", M)
    mech = parse(f"matrix(file={tmp_path / 'm.npy'})")
    assert np.array_equal(mech.channel(), M)
    assert parse(str(mech)) == mech


def test_domains_refuse_values_outside_and_name_them():
    d = IntegerDomain(0, 99)
    with pytest.raises(LocalPrivError, match=r"outside the domain 0..99: 100, 250"):
        d.encode([5, 100, 250, 3])
    with pytest.raises(LocalPrivError, match="NaN"):
        d.encode([1.0, np.nan])
    with pytest.raises(LocalPrivError, match="non-integer"):
        d.encode([1.5])
    with pytest.raises(LocalPrivError, match="empty"):
        d.encode([])
    c = CategoricalDomain(["a", "b", "c"])
    assert c.encode(["c", "a"]).tolist() == [2, 0]
    with pytest.raises(LocalPrivError, match="'zz'"):
        c.encode(["a", "zz"])
    assert parse_domain("3..5") == IntegerDomain(3, 5)
    assert parse_domain("x,y").size == 2


def test_sample_refuses_bad_inputs(rng):
    m = KRR(5, 1.0)
    with pytest.raises(LocalPrivError, match="outside 0..4"):
        m.sample([0, 7], rng)
    with pytest.raises(LocalPrivError, match="empty"):
        m.sample([], rng)
    with pytest.raises(LocalPrivError, match="NaN"):
        m.sample([0.0, np.nan], rng)
    with pytest.raises(LocalPrivError, match="Generator"):
        m.sample([0, 1], None)


def test_sampling_is_reproducible_from_a_seed():
    m = KRR(20, 1.0)
    x = np.arange(1000) % 20
    assert np.array_equal(m.sample(x, np.random.default_rng(5)), m.sample(x, np.random.default_rng(5)))
