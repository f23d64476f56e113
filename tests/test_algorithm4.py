"""Algorithm 4 (seed 004 section 5.2.5) as written: row channel, level, estimators, experiment."""
import numpy as np
from scipy import stats

from localpriv.mechanisms.rrba import rrba_epsilon
from localpriv.multiattr.algorithm4 import (
    algorithm4_epsilon,
    algorithm4_rows,
    estimate_joint_mle,
    estimate_pairs_eq43,
    plan_algorithm4,
    row_channel,
)
from localpriv.multiattr.tables import cell_index

CARDS = {"a": 2, "b": 3, "c": 2, "d": 2}


def _multi_view_plan(p=0.4, seed=1):
    """Pairs spread over overlapping views: step 1 needs two views sharing one q."""
    rng = np.random.default_rng(seed)
    views = [("a", "b"), ("b", "c"), ("c", "d", "a")]
    tables = [rng.dirichlet(np.ones(6)).reshape(2, 3), rng.dirichlet(np.ones(6)).reshape(3, 2),
              rng.dirichlet(np.ones(8)).reshape(2, 2, 2)]
    return plan_algorithm4([("a", "b", "c"), ("d", "c"), ("b", "d")], views, tables, CARDS, p)


def _own_view_plan(p=0.5, seed=2):
    """Views = the AP pairs' own tables (Example 5.2.1), all cells positive."""
    rng = np.random.default_rng(seed)
    pairs = [("b", "a"), ("c", "b"), ("d", "c", "a")]
    tables = [rng.dirichlet(np.ones(6) * 2).reshape(3, 2), rng.dirichlet(np.ones(6) * 2).reshape(2, 3),
              rng.dirichlet(np.ones(8) * 2).reshape(2, 2, 2)]
    return plan_algorithm4(pairs, pairs, tables, CARDS, p)


def test_plan_follows_the_listing():
    plan = _multi_view_plan()
    s1, s2, s3 = plan.steps
    assert (s1.new, s1.old) == (("a", "b", "c"), ())
    # V' for (a, b, c): no view holds all three, greedy cover (a, b) then (b, c); b already emitted
    assert [(pt.view, pt.cond, pt.emit) for pt in s1.parts] == [(0, (), ("a", "b")), (1, ("b",), ("c",))]
    assert (s2.new, s2.old) == (("d",), ("c",))
    assert [(pt.view, pt.cond, pt.emit) for pt in s2.parts] == [(2, ("c",), ("d",))]
    assert s3.new == () and s3.parts == []  # (b, d): everything already emitted


def test_row_channel_sums_to_one_and_matches_monte_carlo():
    plan = _multi_view_plan()
    K = row_channel(plan)
    assert np.allclose(K.sum(axis=1), 1.0, atol=1e-12)
    assert (K == 0).any()  # the shared q makes some fake combinations impossible
    shape = plan.shape(plan.attrs)
    rng = np.random.default_rng(7)
    n = 60_000
    for xrow in ([1, 2, 0, 1], [0, 0, 1, 0]):
        x = np.tile(xrow, (n, 1))
        r = algorithm4_rows(x, plan, rng)
        obs = np.bincount(cell_index(r, shape), minlength=K.shape[1])
        exp = K[cell_index(np.array([xrow]), shape)[0]] * n
        assert obs[exp == 0].sum() == 0
        live = exp > 0
        chi2 = float(((obs[live] - exp[live]) ** 2 / exp[live]).sum())
        assert chi2 < stats.chi2.ppf(0.999, live.sum() - 1)


def test_level_equals_brute_force_max_ratio():
    for plan in (_own_view_plan(0.5), _own_view_plan(0.3, seed=5)):
        K = row_channel(plan)
        brute = float(np.max(np.log(K.max(axis=0) / K.min(axis=0))))
        eps = algorithm4_epsilon(plan)
        assert np.isfinite(eps) and abs(eps - brute) < 1e-9
        assert eps > np.log(1 / (1 - plan.p)) + 1.0  # far above the thesis's claim
    # the shared q leaves fake combinations of probability 0: the level is infinite, as brute force says
    plan = _multi_view_plan()
    K = row_channel(plan)
    with np.errstate(divide="ignore"):
        assert np.isinf(np.max(np.log(K.max(axis=0) / K.min(axis=0))))
    assert np.isinf(algorithm4_epsilon(plan))


def test_single_pair_level_is_rrba_level():
    T = np.array([[0.1, 0.2], [0.3, 0.4]])
    plan = plan_algorithm4([("a", "c")], [("a", "c")], [T], CARDS, 0.5)
    assert abs(algorithm4_epsilon(plan) - rrba_epsilon(0.5, T.ravel())) < 1e-12


def _known_joint():
    rng = np.random.default_rng(11)
    P = rng.dirichlet(np.ones(24) * 3).reshape(2, 3, 2, 2)  # axes a, b, c, d
    return P


def test_estimators_recover_a_known_joint():
    plan = _own_view_plan()
    assert plan.attrs == ["b", "a", "c", "d"]
    P = np.transpose(_known_joint(), (1, 0, 2, 3))  # axes in the plan's order
    shape = plan.shape(plan.attrs)
    rng = np.random.default_rng(3)
    n = 40_000
    x = np.stack(np.unravel_index(rng.choice(P.size, size=n, p=P.ravel()), shape), axis=1)
    r = algorithm4_rows(x, plan, rng)
    K = row_channel(plan)
    # tolerance: 5 sd of the unbiased linear inversion h K^{-1} (h the emitted rows' frequencies)
    pi = P.ravel() @ K
    Kinv = np.linalg.inv(K)
    cov = Kinv.T @ (np.diag(pi) - np.outer(pi, pi)) @ Kinv / n
    joint, pairs, fit = estimate_joint_mle(r, plan)
    assert fit.converged
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(joint.ravel() - P.ravel()) < 5 * sd)
    assert np.abs(joint.ravel() - P.ravel()).max() > 0  # it does estimate (not the truth passed in)
    # the marginal of the first pair: MLE and the per-pair Eq. 4.3 (exact there, O_1 empty)
    eq = estimate_pairs_eq43(r, plan)
    first = ("b", "a")
    true_first = P.sum(axis=(2, 3))
    M = np.zeros((P.size, true_first.size))  # marginalization matrix for the tolerance
    M[np.arange(P.size), np.arange(P.size) // 4] = 1
    sd_first = np.sqrt(np.diag(M.T @ cov @ M)).reshape(true_first.shape)
    assert np.all(np.abs(pairs[first] - true_first) < 5 * sd_first)
    assert np.all(np.abs(eq[first] - true_first) < 5 * sd_first)
    # later pair (d, c, a): Eq. 4.3 targets the emitted (c, a) with the true d, not the truth:
    # its error is far larger than the MLE's
    later = ("d", "c", "a")
    true_later = np.transpose(P.sum(axis=0), (2, 1, 0))
    err_mle = np.abs(pairs[later] - true_later).sum()
    err_eq = np.abs(eq[later] - true_later).sum()
    assert err_eq > 3 * err_mle


def test_experiment_quick_runs(tmp_path):
    from reproductions import run_experiment
    rec = run_experiment("thesis-algorithm4", tmp_path, quick=True, overrides={"runs": 1, "n": 400})
    res = rec["results"]
    for m in ("variant", "algorithm4-eq43", "algorithm4-mle"):
        assert 0 <= res["vs_clean_network"][m]["acc"]["mean"] <= 1
        assert res["ap_table_l1"][m]["mean"] > 0
    assert res["epsilon"]["algorithm4"]["max"] > res["epsilon_thesis_claim"]
    assert (tmp_path / "thesis-algorithm4.png").exists()
