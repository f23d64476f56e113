"""Many maximum-likelihood fits at once (localpriv.estimators.em_rows): each row reaches the certified
MLE of its own counts as a one-at-a-time run of the engine does, on the compiled and the NumPy path;
the face bootstrap of the uncertainty uses it for SQUAREM refits; its bounds refuse in one line."""
import numpy as np
import pytest

import localpriv.inference.uncertainty as U
from localpriv import IntegerDomain, Observations, estimate, parse
from localpriv.data.observations import ObservationBlock
from localpriv.estimators import em_rows as ER
from localpriv.estimators.em import em, log_likelihood
from localpriv.utils.validation import LocalPrivError

K = 24
DOM = IntegerDomain(0, K - 1)
THETA = np.zeros(K)
THETA[[3, 11, 19]] = [0.3, 0.5, 0.2]


def _counts(spec, n, R, seed):
    mech = parse(spec, DOM)
    M = mech.channel()
    rng = np.random.default_rng(seed)
    C = np.array([rng.multinomial(n, THETA @ M) for _ in range(R)], dtype=float)
    return mech, M, C


def _one_at_a_time(mech, C, start, **kw):
    out = []
    for c in C:
        keep = np.flatnonzero(c)
        obs = Observations([ObservationBlock(mech, keep, c[keep])], DOM)
        out.append(em(obs.likelihood_blocks(), K, theta0=start, **kw))
    return out


def _loglik(mech, c, theta):
    keep = np.flatnonzero(c)
    return log_likelihood(Observations([ObservationBlock(mech, keep, c[keep])], DOM).likelihood_blocks(), theta)


@pytest.mark.parametrize("numba", ["1", "0"])
@pytest.mark.parametrize("spec,n,accelerate,delta", [("geometric(eps=0.2,lo=0,hi=23)", 40, "squarem", 1e-9),
                                                      ("geometric(eps=0.2,lo=0,hi=23)", 500, "squarem", 1e-9),
                                                      ("krr(eps=1.0)", 200, "none", 1e-6)])
def test_rows_reach_the_certified_mle_of_each_data_set(monkeypatch, numba, spec, n, accelerate, delta):
    """Every row is certified (per report within delta of its maximum), as the engine's own run on
    that row's counts: their log-likelihoods differ by at most 2 delta n (both within delta n of the
    same maximum), and the estimates agree far above round-off."""
    monkeypatch.setenv("LOCALPRIV_NUMBA", numba)
    mech, M, C = _counts(spec, n, 4, 7)
    start = np.full(K, 1.0 / K)
    start[[3, 11]] += 0.1
    start /= start.sum()
    got = ER.em_rows([M], [C], start, accelerate=accelerate, delta=delta)
    want = _one_at_a_time(mech, C, start, accelerate=accelerate, delta=delta)
    assert got.converged.all() and all(w.converged for w in want)
    for i, w in enumerate(want):
        assert abs(_loglik(mech, C[i], got.theta[i]) - w.loglik) <= 2 * delta * n + 1e-9
        assert np.abs(got.theta[i] - w.theta).max() < 1e-3 if delta < 1e-8 else True
        assert got.theta[i].sum() == pytest.approx(1.0)


def test_channels_side_by_side_equal_their_sum(monkeypatch):
    """Two mechanisms' counts (a free-will mix): the rows' estimates are the MLE of both blocks
    together (GIBU), on both paths."""
    m1, M1, C1 = _counts("krr(eps=1.0)", 150, 3, 1)
    m2, M2, C2 = _counts("geometric(eps=0.3,lo=0,hi=23)", 150, 3, 2)
    start = np.full(K, 1.0 / K)
    for numba in ("1", "0"):
        monkeypatch.setenv("LOCALPRIV_NUMBA", numba)
        got = ER.em_rows([M1, M2], [C1, C2], start, accelerate="squarem")
        for i in range(3):
            blocks = []
            for mech, c in ((m1, C1[i]), (m2, C2[i])):
                keep = np.flatnonzero(c)
                blocks.append(ObservationBlock(mech, keep, c[keep]))
            obs = Observations(blocks, DOM)
            want = em(obs.likelihood_blocks(), K, theta0=start, accelerate="squarem")
            got_l = log_likelihood(obs.likelihood_blocks(), got.theta[i])
            assert abs(got_l - want.loglik) <= 2e-9 * 300 + 1e-9


def test_face_bootstrap_of_a_squarem_mle_runs_as_rows(monkeypatch):
    """The face bootstrap of an MLE fitted by SQUAREM refits as rows (same draws as _redraw, same
    start): its replicates are the refits made one at a time up to the certificate."""
    monkeypatch.setattr(U, "FACE_REPLICATES", 6)
    rng = np.random.default_rng(3)
    mech = parse("geometric(eps=0.1,lo=0,hi=23)", DOM)
    c = rng.multinomial(300, THETA @ mech.channel())
    keep = np.flatnonzero(c)
    obs = Observations([ObservationBlock(mech, keep, c[keep])], DOM)
    est = estimate(obs, "ibu", accelerate="squarem")
    theta = np.asarray(est.distribution)
    call = est.extra["call"]
    assert (theta > U.BOUNDARY).sum() <= U.FACE_MAX_SHARE * K  # on a low-dimensional face
    assert U._rows_refit(obs, call[0], {**call[1], "theta0": theta}, 6)
    assert not U._rows_refit(obs, "ibu", {"accelerate": "newton"}, 6)  # the Newton finish: one at a time
    u = U.uncertainty(est, obs, rng=np.random.default_rng(9))
    reps = u.face_replicates()
    assert reps is not None and reps.shape == (6, K)
    r = np.random.default_rng(9)
    p = np.clip(theta @ mech.channel(), 0, None)
    for i in range(6):
        ci = r.multinomial(300, p / p.sum())
        kk = np.flatnonzero(ci)
        one = estimate(Observations([ObservationBlock(mech, kk, ci[kk])], DOM), "ibu", accelerate="squarem",
                       theta0=0.5 * theta + 0.5 / K)
        assert abs(_loglik(mech, ci.astype(float), reps[i]) - one.loglik) <= 2e-9 * 300 + 1e-9
        assert np.abs(reps[i] - one.distribution).max() < 1e-3


def test_bounds_and_arguments_refuse_in_one_line(monkeypatch):
    _, M, C = _counts("krr(eps=1.0)", 50, 2, 0)
    start = np.full(K, 1.0 / K)
    monkeypatch.setattr(ER, "ROWS_MAX_ENTRIES", 40)
    with pytest.raises(LocalPrivError, match="at most 40 entries") as e:
        ER.em_rows([M], [C], start)
    assert "\n" not in str(e.value)
    monkeypatch.setattr(ER, "ROWS_MAX_ENTRIES", 2**20)
    with pytest.raises(LocalPrivError, match="squarem or none"):
        ER.em_rows([M], [C], start, accelerate="newton")
    with pytest.raises(LocalPrivError, match="k x m_b"):
        ER.em_rows([M], [C[:, :5]], start)
    with pytest.raises(LocalPrivError, match="full support|positive"):
        ER.em_rows([M], [C], np.eye(K)[0])
