"""Granger causality (thesis 6.4) with NumPy/SciPy."""
import numpy as np
import pytest
from scipy import stats

from localpriv.multiattr.granger import adf_test, granger_matrix, granger_test, ljung_box, stationarize, var_lag_order
from localpriv.utils.validation import LocalPrivError


def _var(T, rng, lag=1):
    """x -> y -> z with the given lag; x autoregressive."""
    e = rng.standard_normal((T, 3))
    Y = np.zeros((T, 3))
    for t in range(lag, T):
        Y[t, 0] = 0.5 * Y[t - 1, 0] + e[t, 0]
        Y[t, 1] = 0.3 * Y[t - 1, 1] + 0.5 * Y[t - lag, 0] + e[t, 1]
        Y[t, 2] = 0.3 * Y[t - 1, 2] + 0.5 * Y[t - lag, 1] + e[t, 2]
    return Y


def test_f_statistic_by_hand():
    rng = np.random.default_rng(7)
    Y = _var(200, rng)
    q = 2
    a, b = Y[:, 0], Y[:, 1]
    T = 200 - q
    Xr = np.column_stack([np.ones(T), b[1:-1], b[:-2]])
    Xu = np.column_stack([Xr, a[1:-1], a[:-2]])
    rss = [np.sum((b[q:] - X @ np.linalg.lstsq(X, b[q:], rcond=None)[0]) ** 2) for X in (Xr, Xu)]
    F = (rss[0] - rss[1]) / q / (rss[1] / (T - 5))
    r = granger_test(a, b, q)
    assert r["F"] == pytest.approx(F) and r["df"] == (2, T - 5)
    assert r["p"] == pytest.approx(stats.f.sf(F, 2, T - 5))


def test_granger_matrix_finds_the_causal_direction():
    Y = _var(600, np.random.default_rng(12))
    res = granger_matrix(Y, alpha=0.01)
    assert res["q"] in (1, 2)  # AIC picks 1 for 19 of the seeds 0..19
    assert res["G"][0, 1] and res["G"][1, 2]
    assert not res["G"][1, 0] and not res["G"][2, 1] and not res["G"][2, 0]
    assert res["p"][0, 1] < 1e-10 and res["p"][1, 0] > 0.01
    # conditional on y, x does not add to the prediction of z
    cond = granger_matrix(Y, q=1, alpha=0.01, conditional=True)
    assert cond["G"][1, 2] and not cond["G"][0, 2]


def test_null_rejection_rate_is_the_level():
    rng = np.random.default_rng(5)
    p = np.array([granger_test(rng.standard_normal(120), rng.standard_normal(120), 2)["p"] for _ in range(400)])
    assert abs((p < 0.1).mean() - 0.1) < 0.05  # binomial sd 0.015


def test_var_lag_order_recovers_a_longer_lag():
    Y = _var(1500, np.random.default_rng(3), lag=3)
    assert var_lag_order(Y, 6)["order"] == 3


def test_adf_and_stationarize():
    rng = np.random.default_rng(9)
    walk = np.cumsum(rng.standard_normal(400))
    noise = rng.standard_normal(400)
    assert not adf_test(walk)["stationary"] and adf_test(noise)["stationary"]
    r = adf_test(noise)
    b = (-2.86154, -2.8903, -4.234)  # MacKinnon (2010), constant, 5 %
    assert r["critical"] == pytest.approx(b[0] + b[1] / r["T"] + b[2] / r["T"] ** 2)
    assert -2.88 < r["critical"] < -2.86
    Z, nd = stationarize(np.column_stack([walk, noise]))
    assert nd == [1, 0] and Z.shape == (399, 2)
    assert np.allclose(Z[:, 0], np.diff(walk))


def test_ljung_box():
    rng = np.random.default_rng(4)
    assert ljung_box(rng.standard_normal(500))["p"] > 0.01
    assert ljung_box(_var(500, rng)[:, 0])["p"] < 1e-6
    with pytest.raises(LocalPrivError):
        ljung_box(np.ones(10), h=20)
    with pytest.raises(LocalPrivError):
        granger_test(np.ones(5), np.ones(6), 1)
