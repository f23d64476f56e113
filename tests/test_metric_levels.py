"""Metric levels computed from structure equal the dense formula on the channel: the planar
mechanisms' (regrouped by displacement) and the exponential mechanism's (triangle inequality)."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpriv.domains.grid import GridDomain
from localpriv.domains.parse import parse_domain
from localpriv.mechanisms import parse
from localpriv.mechanisms.planar import PlanarGeometric, PlanarLaplace, clamp_channel, offset_tables
from localpriv.mechanisms.privacy import geo_epsilon, grid_offset_geo_epsilon, grid_offset_ldp_epsilon, ldp_epsilon
from localpriv.testing.mechanisms import mechanism_checks
from localpriv.utils.validation import LocalPrivError, PrivacyWarning

#: the two formulas take the same maximum of the same entries; only the distance's last bit differs
RTOL = 1e-12


def _dense(mech) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return geo_epsilon(mech.channel(), mech.domain.distance_matrix())


def _fast(mech) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        return mech.epsilon_geo()


def _exponential(eps: float, domain: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the large LDP levels of the larger eps, announced at parse
        return parse(f"exponential(eps={eps})", parse_domain(domain))


def _close(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= RTOL * abs(b)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(nrows=st.integers(1, 5), ncols=st.integers(1, 5), log_eps=st.floats(-0.7, 2.5),
       cell=st.sampled_from([0.5, 1.0, 3.0]))
def test_fast_level_equals_dense_geometric(nrows, ncols, log_eps, cell):
    mech = PlanarGeometric(10.0 ** log_eps, GridDomain(40.0, -74.0, nrows, ncols, cell))
    assert _close(_fast(mech), _dense(mech))


# (the kernels grow with their reach 45 / (eps cell_km), the Laplace quadrature fastest: eps cell_km >= 0.1,
# resp. 0.15, keeps them small)
@settings(max_examples=12, deadline=None, derandomize=True)
@given(nrows=st.integers(1, 5), ncols=st.integers(1, 5), log_eps=st.floats(-0.5, 1.5),
       cell=st.sampled_from([0.5, 1.0, 3.0]))
def test_fast_level_equals_dense_laplace(nrows, ncols, log_eps, cell):
    mech = PlanarLaplace(10.0 ** log_eps, GridDomain(40.0, -74.0, nrows, ncols, cell))
    assert _close(_fast(mech), _dense(mech))


@pytest.mark.parametrize("eps", [300.0, 1000.0])
def test_underflowed_entries_give_inf_as_dense(eps):
    # exp(-eps s |offset|) underflows to 0 beside non-zero entries: both formulas say inf
    mech = PlanarGeometric(eps, GridDomain(40.0, -74.0, 3, 4, 1.0))
    with pytest.warns(PrivacyWarning, match="epsilon_geo is inf"):
        assert mech.epsilon_geo() == np.inf
    assert _dense(mech) == np.inf


def test_random_tables_with_zeros_match_dense():
    # any channel given by offset tables (zeros included, whole columns of zeros too), not only
    # the planar kernels: the regrouping is exact for every translation-structured channel
    rng = np.random.default_rng(3)
    for nrows, ncols in [(1, 1), (1, 4), (3, 1), (2, 3), (4, 4), (3, 5)]:
        R = max(nrows, ncols) + 1
        K = rng.random((2 * R + 1, 2 * R + 1)) * (rng.random((2 * R + 1, 2 * R + 1)) < 0.8)
        K /= K.sum()
        M = clamp_channel(K, nrows, ncols)
        dist = GridDomain(40.0, -74.0, nrows, ncols, 0.7).distance_matrix()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            dense = geo_epsilon(M, dist)
        fast = grid_offset_geo_epsilon(offset_tables(K, nrows, ncols), nrows, ncols, 0.7)
        assert _close(fast, dense), (nrows, ncols, fast, dense)


def test_offset_tables_hold_the_channel_entries():
    mech = parse("planar-laplace(eps=0.8,nrows=4,ncols=3,cell_km=0.5)")
    M = mech.channel().reshape(4, 3, 4, 3)
    for zr0, zr1, zc0, zc1, T in offset_tables(mech.kernel(), 4, 3):
        for r, c, zr, zc in [(0, 0, zr0, zc0), (3, 2, zr1, zc1), (2, 1, zr0, zc1)]:
            assert M[r, c, zr, zc] == T[zr - r + 3, zc - c + 2]


def test_planar_geometric_level_is_eps_with_an_interior_cell():
    # P(x|x) / P(x|x') = e^{eps d(x,x')} at an interior output (module docstring)
    mech = parse("planar-geometric(eps=0.7,nrows=5,ncols=6,cell_km=1.0)")
    assert mech.epsilon_geo() == pytest.approx(0.7, rel=1e-12)


def test_conformance_check_runs_on_interior_grids():
    for spec in ("planar-geometric(eps=1.3,nrows=3,ncols=4,cell_km=0.5)",
                 "planar-laplace(eps=0.4,nrows=4,ncols=3,cell_km=1.0)"):
        checks = dict(mechanism_checks(parse(spec), 20))
        checks["check_epsilon_geo_computed_from_channel"]()


def test_explicit_distance_takes_the_dense_formula():
    mech = parse("planar-geometric(eps=1.0,nrows=3,ncols=3,cell_km=1.0)")
    d = 2.0 * mech.domain.distance_matrix()
    assert mech.epsilon_geo(d) == pytest.approx(0.5 * mech.epsilon_geo(), rel=RTOL)


def test_refused_above_the_dense_cap(monkeypatch):
    monkeypatch.setenv("LOCALPRIV_MAX_DENSE_ENTRIES", "1000")
    mech = parse("planar-geometric(eps=1.0,nrows=6,ncols=6,cell_km=1.0)")  # 36^2 = 1296 entries
    with pytest.raises(LocalPrivError, match="limit is 1000 entries") as info:
        mech.epsilon_geo()
    assert "\n" not in str(info.value)


def test_a_table_of_the_wrong_shape_is_refused():
    with pytest.raises(LocalPrivError, match="offset table must be 3x5"):
        grid_offset_geo_epsilon([(0, 1, 0, 2, np.ones((3, 4)))], 2, 3, 1.0)


@pytest.mark.parametrize("domain", ["0..9", "0..60", "a,b,c,d", "interval(0,1,8)",
                                    "grid(lat0=40.7,lon0=-74.0,nrows=5,ncols=7,cell_km=0.5)"])
@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 5.0, 30.0])
def test_exponential_structural_level_equals_dense(domain, eps):
    mech = _exponential(eps, domain)
    # (log C(x') - log C(x) cancels at small eps: rounding of the channel's entries, 1e-13 relative)
    assert _fast(mech) == pytest.approx(_dense(mech), rel=1e-10)


def test_exponential_level_with_zero_entries_is_inf():
    mech = _exponential(80.0, "0..99")  # e^{-40 * 99} underflows to 0
    with pytest.warns(PrivacyWarning, match="epsilon_geo is inf"):
        assert mech.epsilon_geo() == np.inf
    assert _dense(mech) == np.inf


def test_exponential_level_with_subnormal_entries_takes_the_dense_formula():
    mech = _exponential(14.5, "0..99")  # smallest entry e^{-717.75}: subnormal
    M = mech.channel()
    assert (M > 0).all() and M.min() < np.finfo(float).tiny
    assert _fast(mech) == _dense(mech)


def _full_axis_clamp(K, nrows, ncols):
    """The clamped channel with cumulative sums over the kernel's whole axes (the reference)."""
    R = (K.shape[0] - 1) // 2

    def tails(A, kind, axis):
        if kind == "single":
            return A
        if kind == "low":
            return np.cumsum(A, axis=axis)
        if kind == "high":
            return np.flip(np.cumsum(np.flip(A, axis=axis), axis=axis), axis=axis)
        return np.broadcast_to(A.sum(axis=axis, keepdims=True), A.shape)

    def kinds(n):
        return ["all"] if n == 1 else ["low"] + ["single"] * (n - 2) + ["high"]

    M = np.empty((nrows, ncols, nrows, ncols))
    for zr, tr in enumerate(kinds(nrows)):
        for zc, tc in enumerate(kinds(ncols)):
            T = tails(tails(K, tr, 0), tc, 1)
            r, c = np.arange(nrows)[:, None], np.arange(ncols)[None, :]
            M[:, :, zr, zc] = T[zr - r + R, zc - c + R]
    return M.reshape(nrows * ncols, nrows * ncols)


@pytest.mark.parametrize("nrows,ncols,R", [(1, 1, 9), (1, 6, 40), (5, 1, 12), (2, 2, 30), (4, 7, 60)])
def test_channel_tail_sums_equal_the_whole_axis_sums_bit_for_bit(nrows, ncols, R):
    rng = np.random.default_rng(nrows * 100 + ncols)
    K = rng.random((2 * R + 1, 2 * R + 1)) ** 8
    K /= K.sum()
    assert np.array_equal(clamp_channel(K, nrows, ncols), _full_axis_clamp(K, nrows, ncols))


@settings(max_examples=20, deadline=None, derandomize=True)
@given(nrows=st.integers(1, 6), ncols=st.integers(1, 6), log_eps=st.floats(-0.7, 2.5),
       cell=st.sampled_from([0.5, 1.0, 3.0]), laplace=st.booleans())
def test_ldp_level_from_tables_equals_dense(nrows, ncols, log_eps, cell, laplace):
    eps = 10.0 ** log_eps
    if laplace:
        eps = max(eps, 0.15 / cell)  # (a small Laplace quadrature, as above)
    cls = PlanarLaplace if laplace else PlanarGeometric
    mech = cls(eps, GridDomain(40.0, -74.0, nrows, ncols, cell))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        assert _close(mech.epsilon_ldp(), ldp_epsilon(mech.channel()))


def test_ldp_level_from_tables_with_zeros():
    rng = np.random.default_rng(5)
    for nrows, ncols in [(1, 3), (3, 3), (4, 2)]:
        R = max(nrows, ncols) + 1
        K = rng.random((2 * R + 1, 2 * R + 1)) * (rng.random((2 * R + 1, 2 * R + 1)) < 0.9)
        K /= K.sum()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyWarning)
            dense = ldp_epsilon(clamp_channel(K, nrows, ncols))
        assert _close(grid_offset_ldp_epsilon(offset_tables(K, nrows, ncols), nrows, ncols), dense)


def test_ldp_level_refused_above_the_dense_cap(monkeypatch):
    monkeypatch.setenv("LOCALPRIV_MAX_DENSE_ENTRIES", "1000")
    with pytest.raises(LocalPrivError, match="channel would need a 36 x 36 dense matrix"):
        parse("planar-laplace(eps=1.0,nrows=6,ncols=6,cell_km=1.0)").epsilon_ldp()
