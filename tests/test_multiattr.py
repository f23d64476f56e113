"""Tables, BIF networks, RRBA mechanism and protocol, hybrid, independence, flips."""
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2 as chi2_dist

from localpriv.analysis import analyze_report
from localpriv.mechanisms import parse
from localpriv.mechanisms.rrba import RRBAMechanism, floor_table, rrba_epsilon
from localpriv.multiattr import load_network, read_bif
from localpriv.multiattr.block_aggregation import (
    aggregate_blocks,
    block_convergence,
    combination_views,
    consistent_tables,
    pair_views,
    pooled_estimate,
    view_epsilon,
)
from localpriv.multiattr.flips import flip_probability, g2_table_grid, stack_statistic
from localpriv.multiattr.independence import (
    chi2_statistic,
    chi2_test,
    expected_counts,
    g2_statistic,
    mc_independence_test,
    rrba_noisy_counts,
    two_step_table,
)
from localpriv.multiattr.rr_geometric import (
    hybrid_channel,
    hybrid_epsilon,
    hybrid_estimate,
    optimal_mechanism,
    truncated_geometric,
)
from localpriv.multiattr.tables import Records, marginalize
from localpriv.utils.validation import LocalPrivError


def _chi2_gof(samples, probs, k):
    counts = np.bincount(samples, minlength=k)
    exp = probs * samples.size
    live = exp > 0
    assert counts[~live].sum() == 0
    stat = ((counts[live] - exp[live]) ** 2 / exp[live]).sum()
    return chi2_dist.sf(stat, live.sum() - 1)


# ----------------------------------------------------------------------------------------- BIF
def test_bif_both_dialects_and_sizes():
    sizes = {"asia": (8, 16, 8), "survey": (6, 14, 6), "child": (20, 60, 25), "alarm": (37, 105, 46)}
    for name, (d, cats, edges) in sizes.items():
        net = load_network(name)
        assert (net.d, sum(net.cards), len(net.edges())) == (d, cats, edges)
        for cpt in net.cpts.values():
            np.testing.assert_allclose(cpt.sum(axis=-1), 1.0, atol=1e-9)


def test_javabayes_table_order_is_child_slowest():
    net = load_network("alarm")
    assert net.parents["VentTube"] == ["VentMach", "Disconnect"]
    # P(VentTube=Zero | VentMach, Disconnect=True) = 0.97 whatever the ventilator does
    np.testing.assert_allclose(net.cpts["VentTube"][:, 0, 0], 0.97)
    np.testing.assert_allclose(net.cpts["StrokeVolume"][0, 0], [0.98, 0.01, 0.01])


def test_read_bif_bnlearn_text_and_errors():
    text = """network x {}
variable a { type discrete [ 2 ] { u, v }; }
variable b { type discrete [ 2 ] { u, v }; }
probability ( a ) { table 0.3, 0.7; }
probability ( b | a ) { (u) 0.9, 0.1; (v) 0.2, 0.8; }
"""
    net = read_bif(text)
    np.testing.assert_allclose(net.cpts["b"], [[0.9, 0.1], [0.2, 0.8]])
    np.testing.assert_allclose(net.joint(["a", "b"]), [[0.27, 0.03], [0.14, 0.56]])
    with pytest.raises(LocalPrivError):
        read_bif(text.replace("0.2, 0.8", "0.2, 0.9"))
    with pytest.raises(LocalPrivError):
        load_network("nope")


def test_forward_sampling_matches_the_joint():
    net = load_network("asia")
    rec = net.sample(200_000, np.random.default_rng(3))
    for attrs in [["smoke", "lung"], ["either", "xray"], ["bronc", "dysp"]]:
        p = net.joint(attrs).ravel()
        assert _chi2_gof(rec.cells(attrs), p, p.size) > 1e-4


# -------------------------------------------------------------------------------------- tables
def test_tables_and_marginals():
    rec = Records(np.array([[0, 1, 2], [0, 0, 1], [1, 1, 2]]), ["a", "b", "c"])
    t = rec.table(["a", "c"])
    assert t.shape == (2, 3) and t[0, 2] == 1 and t[1, 2] == 1 and t.sum() == 3
    full = rec.table(["a", "b", "c"])
    np.testing.assert_allclose(marginalize(full, ["a", "b", "c"], ["c", "a"]), t.T)
    with pytest.raises(LocalPrivError):
        rec.table(["a", "a"])


# ---------------------------------------------------------------------------- RRBA mechanism
def test_rrba_spec_and_analyze():
    m = parse("rrba(p=0.5,cells=4)")
    assert str(m) == "rrba(p=0.5,cells=4)"
    rep = analyze_report(m)
    assert rep["epsilon_ldp (from channel)"] == pytest.approx(np.log(5))
    assert m.epsilon_ldp() > np.log(1 / (1 - 0.5))  # the thesis's Theorem 4.4.1 understates it


def _brute_force_eps(p, T):
    """Independent evaluation: enumerate every (x, x', w) of the protocol's report law."""
    k = len(T)
    best = 0.0
    for w in range(k):
        probs = []
        for x in range(k):
            # P(report w | x): Head (prob p) reports x, Tail (1-p) draws the fake w with T[w]
            pr = Fraction(0)
            if x == w:
                pr += p
            pr += (1 - p) * T[w]
            probs.append(pr)
        hi, lo = max(probs), min(probs)
        best = max(best, np.inf if lo == 0 else float(np.log(float(hi / lo))))
    return best


@pytest.mark.parametrize("p,T", [
    (Fraction(1, 2), [Fraction(1, 4)] * 4),
    (Fraction(1, 3), [Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)]),
    (Fraction(9, 10), [Fraction(7, 10), Fraction(1, 5), Fraction(1, 10)]),
])
def test_rrba_epsilon_matches_brute_force(p, T):
    m = RRBAMechanism(p=float(p), table=[float(t) for t in T])
    bf = _brute_force_eps(p, T)
    assert m.epsilon_ldp() == pytest.approx(bf, rel=1e-12)
    assert rrba_epsilon(float(p), [float(t) for t in T]) == pytest.approx(bf, rel=1e-12)


def test_rrba_zero_cell_is_infinite_and_floor_fixes_it():
    assert RRBAMechanism(p=0.5, table=[0.6, 0.4, 0.0]).epsilon_ldp() == np.inf
    m = RRBAMechanism(p=0.5, table=[0.6, 0.4, 0.0], floor=0.05)
    assert np.isfinite(m.epsilon_ldp()) and m.T.min() >= 0.05 / (1 + 3 * 0.05) - 1e-12
    assert floor_table([1, 0, 0], 0.1).sum() == pytest.approx(1)
    with pytest.raises(LocalPrivError):
        RRBAMechanism(p=1.0, cells=3)


def test_rrba_samples_follow_the_channel():
    m = RRBAMechanism(p=0.4, table=[0.5, 0.3, 0.15, 0.05])
    rng = np.random.default_rng(7)
    for x in range(4):
        s = m.sample(np.full(60_000, x), rng)
        assert _chi2_gof(s, m.channel()[x], 4) > 1e-4


def test_view_composition_is_the_sum_and_is_tight():
    T1, T2 = np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5])
    c1 = RRBAMechanism(p=0.5, table=T1).channel()
    c2 = RRBAMechanism(p=0.5, table=T2).channel()
    joint = np.kron(c1, c2)  # a client answering both disjoint combinations of a view
    from localpriv.mechanisms.privacy import ldp_epsilon
    assert ldp_epsilon(joint) == pytest.approx(view_epsilon(0.5, [T1, T2]))


# ------------------------------------------------------------------------------ RRBA protocol
@pytest.mark.parametrize("d", [4, 5, 6, 7])
def test_pair_views_cover_every_pair_once_with_disjoint_pairs(d):
    views = pair_views(d)
    seen = [pair for v in views for pair in v]
    assert sorted(seen) == list(combinations(range(d), 2))
    for v in views:
        flat = [a for pair in v for a in pair]
        assert len(flat) == len(set(flat))


def test_combination_views_cover_all_k_subsets():
    views = combination_views(6, 3)
    got = sorted(c for v in views for c in v)
    assert got == list(combinations(range(6), 3))
    for v in views:
        flat = [a for c in v for a in c]
        assert len(flat) == len(set(flat))


def test_eq43_is_unbiased_for_one_round():
    rng = np.random.default_rng(11)
    truth = np.array([0.55, 0.25, 0.15, 0.05])
    reps, s, p = 300, 400, 0.5
    x = rng.choice(4, size=reps * s, p=truth)
    run = aggregate_blocks(x, 4, p, s, rng, init=np.full(4, 0.25))
    # only the first block uses the uniform table; all blocks are unbiased before Eq. 4.4
    first = run.estimates[0]
    sd = np.sqrt(truth * (1 - truth) / s) / p + 0.05
    assert np.all(np.abs(first - truth) < 5 * sd)
    assert all(np.isfinite(run.epsilons))


def test_rrba_converges_as_blocks_grow():
    rng = np.random.default_rng(5)
    truth = np.array([0.4, 0.3, 0.2, 0.07, 0.03])
    errs, pooled = [], []
    for s in [100, 1000, 10_000]:
        x = rng.choice(5, size=20 * s, p=truth)
        run = aggregate_blocks(x, 5, 0.5, s, rng, floor=0.01)
        T, k, ok = block_convergence(run)
        errs.append(np.abs(T - truth).sum())
        pooled.append(np.abs(pooled_estimate(run) - truth).sum())
    assert errs[2] < errs[0] and errs[2] < 0.05
    assert pooled[2] < pooled[0] and pooled[2] < 0.02


@settings(max_examples=60)
@given(n=st.integers(1, 700), s=st.integers(1, 120), n_cells=st.integers(1, 9),
       seed=st.integers(0, 2**32 - 1))
def test_every_user_counts_in_block_aggregation(n, s, n_cells, seed):
    # users are never dropped, whether or not the block size divides their number; the
    # last block holds the n mod s users left over (and n < s makes one short block)
    rng = np.random.default_rng(seed)
    x = rng.integers(0, n_cells, n)
    run = aggregate_blocks(x, n_cells, 0.5, s, rng)
    full, rest = divmod(n, s)
    assert run.sizes == [s] * full + ([rest] if rest else [])
    assert run.n_users == n == sum(c.sum() for c in run.counts)
    assert [c.sum() for c in run.counts] == run.sizes  # each block reports once per user
    assert len(run.estimates) == len(run.sent) == len(run.epsilons) == len(run.sizes)
    for t in run.estimates:
        assert t.min() >= 0 and abs(t.sum() - 1) < 1e-12
    T, k, _ = block_convergence(run)
    assert 0 <= k < len(run.sizes) and abs(T.sum() - 1) < 1e-12


@pytest.mark.parametrize("n,s", [(12_000, 4_000), (13_000, 4_000), (2_500, 4_000)])
def test_short_last_block_reads_with_its_own_size(n, s):
    # Eq. 4.3 of the last block with its own n_b users is unbiased: its raw value per cell is
    # (o_w / n_b - (1-p) T_w) / p with o_w ~ Binomial(n_b, q_w), q_w = p theta_w + (1-p) T_w, so
    # its standard deviation is sqrt(q_w (1 - q_w) / n_b) / p; Eq. 4.4 leaves a table of
    # non-negative values unchanged (all q_w are far from 0 here). Reading a short block with the
    # full block size s instead misses: for 13,000 users (a last block of 1,000) cells 0 and 3
    # come out 17 and 28 sd off.
    rng = np.random.default_rng(n)
    truth = np.array([0.55, 0.25, 0.15, 0.05])
    p = 0.5
    x = rng.choice(4, size=n, p=truth)
    run = aggregate_blocks(x, 4, p, s, rng)
    n_b = run.sizes[-1]
    assert n_b == (n % s or s)
    q = p * truth + (1 - p) * run.sent[-1]
    sd = np.sqrt(q * (1 - q) / n_b) / p
    assert np.all(np.abs(run.estimates[-1] - truth) < 5 * sd)
    # the pooled maximum-likelihood table uses every block, the short one included: the error of
    # a randomized-response estimate from n reports is sqrt(q (1-q) / n) / p <= sqrt(1 / (4n)) / p
    pooled = pooled_estimate(run)
    assert np.abs(pooled - truth).max() < 5 * np.sqrt(0.25 / n) / p


def test_no_users_is_the_only_block_error():
    rng = np.random.default_rng(0)
    with pytest.raises(LocalPrivError, match="no users"):
        aggregate_blocks(np.array([], dtype=int), 4, 0.5, 10, rng)
    one = aggregate_blocks([3], 4, 0.5, 10, rng)  # one user, a block of 10: one short block
    assert one.sizes == [1] and one.counts[0].sum() == 1


def test_thesis_tables_count_every_user(monkeypatch):
    # the thesis reproductions aggregate every user of every view: one table per user in the
    # modified protocol (so the runs' users add up to the records), every table of its view in
    # the original one
    import reproductions.thesis as thesis

    runs = []
    real = thesis.aggregate_blocks

    def spy(cells, *args, **kw):
        run = real(cells, *args, **kw)
        runs.append((cells.size, run))
        return run

    monkeypatch.setattr(thesis, "aggregate_blocks", spy)
    net = load_network("survey")
    fams = thesis._families(net, net.names)
    rng = np.random.default_rng(3)
    for n in (1, 37, 500, 1003):
        rec = net.sample(n, rng)
        runs.clear()
        thesis.rrba_tables(rec, [[f] for f in fams], 0.5, rng, 2, 1e-3)
        assert all(run.n_users == size for size, run in runs)
        assert sum(run.n_users for _, run in runs) == n
        runs.clear()
        views = thesis._pack(fams)
        thesis.rrba_tables(rec, views, 0.5, rng, 2, 1e-3)
        per_view = [len(v) for v in views]
        assert all(run.n_users == size for size, run in runs)
        assert sum(run.n_users for _, run in runs) <= n * max(per_view)
        assert sum(run.n_users for _, run in runs) >= n * min(per_view)


def test_consistency_is_the_least_squares_fit():
    t1 = np.array([[0.1, 0.4], [0.3, 0.2]])
    t2 = np.array([[0.2, 0.4], [0.3, 0.1]])
    out = consistent_tables({("A1", "A2"): t1, ("A1", "A3"): t2}, {"A1": 2, "A2": 2, "A3": 2})
    a, b = out[("A1", "A2")], out[("A1", "A3")]
    np.testing.assert_allclose(a.sum(1), b.sum(1), atol=1e-8)
    # closed form without active bounds: shared marginal = average, shift spread over the row
    np.testing.assert_allclose(a, [[0.125, 0.425], [0.275, 0.175]], atol=1e-7)
    np.testing.assert_allclose(b, [[0.175, 0.375], [0.325, 0.125]], atol=1e-7)


def test_consistency_respects_nonnegativity():
    t1 = np.array([[0.02, 0.5], [0.3, 0.18]])
    t2 = np.array([[0.6, 0.3], [0.05, 0.05]])
    out = consistent_tables({("a", "b"): t1, ("a", "c"): t2}, {"a": 2, "b": 2, "c": 2})
    for t in out.values():
        assert t.min() >= 0 and t.sum() == pytest.approx(1, abs=1e-8)
    np.testing.assert_allclose(out[("a", "b")].sum(1), out[("a", "c")].sum(1), atol=1e-7)


# ------------------------------------------------------------------------------------- hybrid
def test_table_5_6b_row_0_exact():
    C = truncated_geometric(6, 0.5)
    want = [Fraction(2, 3), Fraction(1, 6), Fraction(1, 12), Fraction(1, 24), Fraction(1, 48), Fraction(1, 48)]
    np.testing.assert_allclose(C[0], [float(w) for w in want], rtol=0, atol=1e-15)
    np.testing.assert_allclose(C.sum(1), 1)


def test_table_5_8_exact():
    want = np.array([[2 / 3, 1 / 6, 1 / 12, 1 / 12], [1 / 3, 1 / 3, 1 / 6, 1 / 6],
                     [1 / 6, 1 / 6, 1 / 3, 1 / 3], [1 / 12, 1 / 12, 1 / 6, 2 / 3]])
    np.testing.assert_allclose(truncated_geometric(4, 0.5), want, rtol=0, atol=1e-15)


def test_table_5_10b_exact():
    want = np.array([[5 / 6, 1 / 12, 1 / 24, 1 / 24], [1 / 6, 2 / 3, 1 / 12, 1 / 12],
                     [1 / 12, 1 / 12, 2 / 3, 1 / 6], [1 / 24, 1 / 24, 1 / 12, 5 / 6]])
    np.testing.assert_allclose(hybrid_channel(truncated_geometric(4, 0.5), 0.5), want, rtol=0, atol=1e-15)


def test_geometric_is_alpha_dp_between_neighbours_and_lp_is_feasible():
    a = 0.5
    C = truncated_geometric(5, a)
    ratio = C[:-1] / C[1:]
    assert np.all(ratio <= 1 / a + 1e-12) and np.all(ratio >= a - 1e-12)
    prior = np.array([0.4, 0.3, 0.2, 0.1])

    def loss(i, r):
        return np.abs(i - r) ** 1.5

    M = optimal_mechanism(prior, a, loss)
    r = M[:-1] / np.where(M[1:] > 0, M[1:], 1)
    assert np.all((M[1:] == 0) & (M[:-1] == 0) | (r <= 1 / a + 1e-7) & (r >= a - 1e-7))
    I, R = np.meshgrid(range(4), range(4), indexing="ij")

    def cost(X):
        return float((prior[:, None] * X * loss(I, R)).sum())

    assert cost(M) <= cost(truncated_geometric(4, a)) + 1e-9
    assert hybrid_epsilon(truncated_geometric(4, a), 0.5) == pytest.approx(np.log(20))


def test_hybrid_estimation_uses_columns():
    rng = np.random.default_rng(2)
    C, p = truncated_geometric(4, 0.5), 0.5
    truth = np.array([0.6, 0.25, 0.1, 0.05])
    Cp = hybrid_channel(C, p)
    n = 200_000
    counts = rng.multinomial(n, truth @ Cp)
    for method in ["inv", "ibu"]:
        est = hybrid_estimate(counts, C, p, method)
        assert np.abs(est - truth).max() < 5 * np.sqrt(1 / n) * 4
    # the thesis's Eq. 5.12 (rows of C) is biased for this asymmetric C
    wrong = np.linalg.solve((p * np.eye(4) + (1 - p) * C.T).T, counts / n)
    assert np.abs(wrong - truth).max() > 0.02


# ------------------------------------------------------------------------------ independence
def test_chi2_and_g2_match_scipy():
    from scipy.stats import chi2_contingency
    t = np.array([[30.0, 10, 5], [20, 25, 15]])
    stat, pval, dof, exp = chi2_contingency(t, correction=False)
    assert chi2_statistic(t) == pytest.approx(stat)
    np.testing.assert_allclose(expected_counts(t)[..., 0], exp)
    g = chi2_contingency(t, correction=False, lambda_="log-likelihood")[0]
    assert g2_statistic(t) == pytest.approx(g)
    assert chi2_test(t) == (pval < 0.05)


def test_two_step_is_the_elastic_net_optimum():
    from scipy.optimize import minimize
    rng = np.random.default_rng(4)
    for _ in range(5):
        t = rng.normal(20, 15, size=6)
        n, g = 100.0, 0.3
        x = two_step_table(t, n, g)
        assert x.min() >= 0 and x.sum() == pytest.approx(n)

        def f(y, t=t, g=g):
            return g * np.abs(t - y).sum() + (1 - g) * ((t - y) ** 2).sum()

        res = minimize(f, np.full(6, n / 6), method="SLSQP", bounds=[(0, None)] * 6,
                       constraints=[{"type": "eq", "fun": lambda y, n=n: y.sum() - n}])
        assert f(x) <= res.fun + 1e-6


def test_mc_test_with_rrba_noise_has_power_and_level():
    rng = np.random.default_rng(8)

    def noise(c, r):
        return rrba_noisy_counts(c, 0.5, r)

    dep = np.array([[350.0, 150], [150, 350]])
    ind = np.array([[250.0, 250], [250, 250]])
    rej_dep = sum(mc_independence_test(rrba_noisy_counts(dep.ravel(), 0.5, rng), 1000, noise, rng,
                                       shape=(2, 2), l=60).reject for _ in range(20))
    rej_ind = sum(mc_independence_test(rrba_noisy_counts(ind.ravel(), 0.5, rng), 1000, noise, rng,
                                       shape=(2, 2), l=60).reject for _ in range(40))
    assert rej_dep == 20
    assert rej_ind <= 8  # level 0.05: Binomial(40, ~0.05) exceeds 8 with prob < 1e-3


# ------------------------------------------------------------------------------------- flips
def test_flip_probability_limits():
    rng = np.random.default_rng(9)
    t = np.array([[1500.0, 500], [500, 1500]])  # huge G^2: never flips
    assert flip_probability(t, 0.1, rng, trials=2000)[0] == 0.0
    tables, g2 = g2_table_grid(2000, 5, 50)
    assert np.all(np.diff(g2) > 0)
    assert stack_statistic(tables, "g2") == pytest.approx(g2)
    # exactly at the critical value about half of the noisy verdicts change
    s = np.sqrt(3.841 * 2000 / 16) / 1.0
    tab = np.array([[500 + s, 500 - s], [500 - s, 500 + s]])
    p, se = flip_probability(tab, 0.1, rng, trials=4000)
    assert 0.25 < p < 0.75


# ------------------------------------------------------------------------- property-based


@given(st.lists(st.floats(-50, 200), min_size=2, max_size=12), st.floats(1, 500), st.floats(0, 0.95))
def test_two_step_always_feasible(cells, n, gamma):
    x = two_step_table(np.array(cells), n, gamma)
    assert x.min() >= 0 and x.sum() == pytest.approx(n, rel=1e-9)


@given(st.floats(0.01, 0.99), st.lists(st.floats(0.001, 1), min_size=2, max_size=8))
def test_rrba_closed_form_equals_channel(p, t):
    m = RRBAMechanism(p=p, table=t)
    assert m.epsilon_ldp() == pytest.approx(m.epsilon_closed_form(), rel=1e-9)


def test_rrba_spec_round_trip_with_floor():
    m = RRBAMechanism(p=0.3, table=[0.7, 0.3, 0.0], floor=0.05)
    back = parse(str(m))
    np.testing.assert_allclose(back.channel(), m.channel())
    assert back.epsilon_ldp() == m.epsilon_ldp()
    from localpriv.domains import IntegerDomain
    assert parse("rrba(p=0.5)", IntegerDomain(0, 5)).epsilon_ldp() == pytest.approx(np.log(1 + 6))


def test_lp_update_of_the_hybrid_can_break_ldp():
    # the user-optimal mechanism may never emit some outputs; inside p I + (1-p) C such an
    # output then only ever carries the truth: infinite LDP level (computed, not assumed)
    M = optimal_mechanism([0.4, 0.3, 0.2, 0.1], 0.5, lambda i, r: np.abs(i - r) ** 1.5)
    assert np.allclose(M[:, 3], 0)
    assert hybrid_epsilon(M, 0.5) == np.inf
    assert np.isfinite(hybrid_epsilon(optimal_mechanism([0.25] * 4, 0.5), 0.5))


def test_lemma_7_3_1_numbers_recomputed():
    """Section 7.3's box: Chebyshev's product is 0.9515 (printed 0.9153), and with the printed
    sigma = sqrt(2 * 2/eps) the box holds only 1 - exp(-9 sqrt(2b)/b) of each Laplace variable."""
    from scipy.stats import laplace

    from localpriv.multiattr.flips import lemma_7_3_1
    r = lemma_7_3_1(0.1)
    assert abs(r["chebyshev_four"] - (80 / 81) ** 4) < 1e-15 and abs(r["chebyshev_four"] - 0.9515) < 1e-4
    assert abs(r["chebyshev_four"] - r["chebyshev_four_printed"]) > 0.03
    inside = laplace.cdf(r["box_printed"], scale=20.0) - laplace.cdf(-r["box_printed"], scale=20.0)
    assert abs(r["exact_one_printed_box"] - inside) < 1e-12
    assert r["exact_one_printed_box"] < r["chebyshev_one"]  # the bound fails: sigma is not Laplace's sd
    assert abs(r["sigma_laplace"] - np.sqrt(2) * 20.0) < 1e-12


def test_eq77_as_written_undefined_small_cells_and_equal_to_monte_carlo():
    """Eq. 7.7 as printed: not real when a cell is inside the box's half-width (the thesis's own
    start, w_1 = 5 at eps = 0.1); elsewhere equal to a seeded Monte Carlo of the same integral
    (tolerance: 5 standard errors), and larger than 1, so not a probability."""
    from localpriv.multiattr.flips import eq77_as_written
    assert not eq77_as_written([5, 495, 495, 5], 0.1)["defined"]
    w = np.array([300.0, 200.0, 250.0, 250.0])
    r = eq77_as_written(w, 0.1)
    assert r["defined"] and r["value"] > 1.0
    rng = np.random.default_rng(11)
    x = rng.laplace(0, 20.0, size=(200_000, 4))
    inside = np.all(np.abs(x) <= r["half_width"], axis=1)
    g = 2 * np.sum(w * np.log(w / (w - np.where(inside[:, None], x, 0.0))), axis=1) * inside
    se = g.std() / np.sqrt(g.size)
    assert abs(g.mean() - r["value"]) < 5 * se


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 6), st.integers(2, 8), st.floats(0.1, 4.0), st.integers(0, 2**31 - 1))
def test_utility_exponential_level_at_most_eps(k, m, eps, seed):
    """McSherry-Talwar's factor 2: the level computed from the channel never exceeds eps."""
    from localpriv.mechanisms.exponential import utility_exponential
    u = np.random.default_rng(seed).normal(size=(k, m))
    assert utility_exponential(u, eps).epsilon_ldp() <= eps * (1 + 1e-9)


def test_utility_exponential_printed_theorem_reaches_twice_eps():
    """Theorem 3.4.2 as printed (no factor 2) gives 2 eps, not eps, on a utility that raises one
    output and lowers the rest (exact level: eps + log((1 + (m-1)e^eps) / (e^eps + m - 1)))."""
    from localpriv.mechanisms.exponential import utility_exponential
    m, eps = 1000, 1.0
    u = np.zeros((2, m))
    u[0, 0] = 1.0
    u[1, 1:] = 1.0
    exact = eps + np.log((1 + (m - 1) * np.exp(eps)) / (np.exp(eps) + m - 1))
    printed = utility_exponential(u, eps, factor=1).epsilon_ldp()
    assert abs(printed - exact) < 1e-9 and printed > 1.99 * eps
    assert utility_exponential(u, eps).epsilon_ldp() <= eps
    with pytest.raises(LocalPrivError, match="understated"):
        utility_exponential(u, eps, sensitivity=0.5)
