"""Extreme parameters never crash.

For EVERY registered mechanism (``localpriv.mechanisms.registered()``, so a new mechanism is
covered automatically) and every ``eps`` in :data:`EPS` and ``k`` in :data:`KS`, we build it from
its spec, read ``str`` back with ``parse``, compute ``epsilon_ldp()``, sample a few values and
build a likelihood block of the samples. Every step must end in a valid result or a one-line
:class:`LocalPrivError`; an infinite privacy level must come with a :class:`PrivacyWarning`. No
ZeroDivisionError, OverflowError, MemoryError or raw NumPy error.

Each mechanism is its first declared example (``examples`` on its class, the table every suite
reads) with ``k`` and ``eps`` (or ``eps_perm``, ``eps_1``) replaced; mechanisms whose spec has no
``k`` and ``eps`` say in :data:`SPECIAL` how the two map onto their parameters -- a new mechanism
with another signature makes :func:`test_every_mechanism_has_a_builder` fail until it gets an
entry there.

The dense-vs-structure agreement of the closed-form privacy levels is tested at the end.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from localpriv.domains import IntegerDomain
from localpriv.likelihood.blocks import check_dense_size
from localpriv.mechanisms import format_spec, parse, registered
from localpriv.mechanisms.privacy import ldp_epsilon
from localpriv.testing.mechanisms import mechanism_examples
from localpriv.utils.validation import LocalPrivError, PrivacyWarning

EPS = [1e-12, 1e-6, 50.0, 700.0, 1e4, 1e300]
KS = [2, 3, 10**6]
N_SAMPLE = 5


def _expit_q(eps: float) -> float:
    """``1/(1+e^eps)`` without overflow (OUE's q, used for the ``ue`` example)."""
    return float(np.exp(-np.logaddexp(0.0, eps)))


def _krr_rows(k: int, eps: float) -> list[list[float]]:
    a = float(np.exp(-np.log1p((k - 1) * np.exp(-eps))))
    b = float(np.exp(-eps - np.log1p((k - 1) * np.exp(-eps))))
    return [[a if i == j else b for j in range(k)] for i in range(k)]


# how (k, eps) map onto the parameters of the mechanisms whose spec has no k and eps (the other
# parameters are the mechanism's first declared example's): name -> (overrides(k, eps) -> (params,
# domain), the k values for which it is cheap, why not others)
SPECIAL = {
    "ue": (lambda k, e: ({"k": k, "p": 0.5, "q": _expit_q(e)}, None), KS, ""),
    "matrix": (lambda k, e: ({"rows": _krr_rows(k, e)}, None), [2, 3], "a 10^6 x 10^6 matrix spec is not a spec"),
    "rrba": (lambda k, e: ({"p": float(-np.expm1(-min(e, 745.0))), "cells": k}, None), KS, ""),
    "shokri": (lambda k, e: ({"q": e}, IntegerDomain(0, k - 1)), [2, 3], "a linear program with k^2 variables"),
    "planar-geometric": (lambda k, e: ({"eps": e, "nrows": 1, "ncols": k, "cell_km": 1.0}, None), [2, 3],
                         "a 1 x 10^6 grid: the kernel covers 1500 cells only"),
    "planar-laplace": (lambda k, e: ({"eps": e, "nrows": 1, "ncols": k, "cell_km": 1.0}, None), [2, 3],
                       "a 1 x 10^6 grid: the kernel covers 1500 cells only"),
    # the multi-attribute protocols on one attribute of k values (the joint alphabet is the product)
    "spl": (lambda k, e: ({"oracle": f"krr(eps={e!r})", "shape": [k]}, None), [2, 3],
            "a joint of 10^6 cells: the dense channel of the checks is 10^12 entries"),
    "smp": (lambda k, e: ({"oracle": f"krr(eps={e!r})", "shape": [k]}, None), [2, 3],
            "a joint of 10^6 cells: the dense channel of the checks is 10^12 entries"),
    "rsfd": (lambda k, e: ({"oracle": f"krr(eps={e!r})", "shape": [k]}, None), [2, 3],
             "a joint of 10^6 cells: the dense channel of the checks is 10^12 entries"),
    "rsrfd": (lambda k, e: ({"oracle": f"krr(eps={e!r})", "shape": [k], "prior": [[1.0 + i for i in range(k)]]},
                            None), [2, 3], "a joint of 10^6 cells: the dense channel of the checks is 10^12 entries"),
    # the grouped protocols on one attribute of k values (one group per hierarchy level, grid, set)
    "calm": (lambda k, e: ({"oracle": f"krr(eps={e!r})", "shape": [k]}, None), [2, 3],
             "a joint of 10^6 cells: the dense channel of the checks is 10^12 entries"),
    "hi": (lambda k, e: ({"oracle": f"krr(eps={e!r})", "shape": [k]}, None), [2, 3],
           "a joint of 10^6 cells: the dense channel of the checks is 10^12 entries"),
    "hio": (lambda k, e: ({"oracle": f"krr(eps={e!r})", "shape": [k]}, None), [2, 3],
            "a joint of 10^6 cells: the dense channel of the checks is 10^12 entries"),
    "hdg": (lambda k, e: ({"oracle": f"krr(eps={e!r})", "shape": [k]}, None), [2, 3],
            "a joint of 10^6 cells: the dense channel of the checks is 10^12 entries"),
    # RAPPOR's PRR at eps_inf = 2h log((1-f/2)/(f/2)) = e, i.e. f = 2/(1+e^{e/4}) with h = 2
    "rappor": (lambda k, e: ({"k": k, "h": 2, "f": float(2 * np.exp(-np.logaddexp(0.0, e / 4)))}, None), KS, ""),
}


def _example_params(name: str) -> dict:
    """The spec parameters of the mechanism's first declared example."""
    return _example_mech(name).params()


def _example_mech(name: str):
    return mechanism_examples(name)[0].build()


def _builder(name: str):
    """``(build(k, eps) -> (spec, domain), the k values, why not others)``, or ``None``."""
    if not mechanism_examples(name):
        return None
    base = _example_params(name)
    if name in SPECIAL:
        overrides, ks, why = SPECIAL[name]
    elif {"k", "eps_perm", "eps_1"} <= set(base):
        overrides, ks, why = (lambda k, e: ({"k": k, "eps_perm": 2 * e, "eps_1": e}, None)), KS, ""
    elif {"k", "eps"} <= set(base):
        overrides, ks, why = (lambda k, e: ({"k": k, "eps": e}, None)), KS, ""
    else:
        return None

    def build(k, e):
        params, dom = overrides(k, e)
        return format_spec(name, {**base, **params}), dom
    return build, ks, why


def _cases():
    out = []
    for name in sorted(registered()):
        b = _builder(name)
        ks = b[1] if b is not None else KS
        for k in ks:
            for e in EPS:
                out.append(pytest.param(name, k, e, id=f"{name}-k{k}-eps{e:g}"))
    return out


def test_every_mechanism_has_a_builder():
    missing = [n for n in registered() if _builder(n) is None]
    assert not missing, f"declare examples for {missing} (and add them to SPECIAL if their spec has no k and eps)"


def _unique_rows(r):
    """Distinct reports; rows of 2-D reports compared as raw bytes (``np.unique(axis=0)`` builds a
    structured dtype with one field per column, far too slow for 4 * 10^6-byte SHE rows)."""
    r = np.ascontiguousarray(r)
    if r.ndim == 1:
        return np.unique(r)
    rows = r.view(np.dtype((np.void, r.shape[1] * r.itemsize))).ravel()
    _, first = np.unique(rows, return_index=True)
    return r[np.sort(first)]


def _one_line(exc: LocalPrivError):
    msg = str(exc)
    assert msg and "\n" not in msg, f"error message is not one line: {msg!r}"


def _step(fn):
    """Run ``fn``; return ``(ok, value)``. A LocalPrivError is an accepted outcome (ok=False);
    any other exception fails the test. An infinite float result needs a PrivacyWarning."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        try:
            value = fn()
        except LocalPrivError as exc:
            _one_line(exc)
            return False, None
    if isinstance(value, float) and np.isinf(value):
        assert any(issubclass(w.category, PrivacyWarning) for w in rec), "inf level without a PrivacyWarning"
    return True, value


@pytest.mark.parametrize("name,k,eps", _cases())
def test_extreme_parameters(name, k, eps):
    build = _builder(name)
    assert build is not None, f"declare examples for {name} (and add it to SPECIAL if its spec has no k and eps)"
    spec, dom = build[0](k, eps)
    ok, mech = _step(lambda: parse(spec, dom))
    if not ok:
        return
    # str/parse round trip
    again = parse(str(mech), dom)
    assert str(again) == str(mech)
    # the size of the output space is known without building anything
    ok, n_out = _step(lambda: mech.n_outputs)
    assert not ok or n_out is None or (isinstance(n_out, (int, np.integer)) and n_out >= 1)
    # privacy level: a number >= 0, inf only with a PrivacyWarning
    ok, level = _step(lambda: float(mech.epsilon_ldp()))
    if ok:
        assert level >= 0 and not np.isnan(level)
    # a few reports and their likelihood block
    x = np.arange(N_SAMPLE) % mech.k
    ok, reports = _step(lambda: mech.sample(x, np.random.default_rng(7)))
    if not ok:
        return
    assert np.shape(reports)[0] == N_SAMPLE
    uniq = _unique_rows(reports)
    ok, block = _step(lambda: mech.likelihood_block(uniq, np.ones(uniq.shape[0])))
    if ok:
        theta = np.full(mech.k, 1.0 / mech.k)
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            fwd = block.forward(theta)
        assert fwd.shape == (uniq.shape[0],) and np.all(np.isfinite(fwd)) and np.all(fwd >= 0)


# ---------------------------------------------------------------------------------------------
# bad matrices, the dense-size cap
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [
    "matrix(rows=[[nan,1.0],[0.5,0.5]])",
    "matrix(rows=[[0.5,0.5],[1.0]])",
    "matrix(rows=[[0.5,0.5],[0.2,'a']])",
    "matrix(rows=[[inf,0.0],[0.5,0.5]])",
    "matrix(rows=[])",
    "matrix(rows=[[[0.5,0.5]]])",
    "matrix(rows=[[0.5,0.6],[0.5,0.5]])",
    "matrix(rows=hello)",
    "matrix(rows=[[true,false],[false,true]])",
])
def test_bad_matrix_specs_are_one_line_errors(spec):
    with pytest.raises(LocalPrivError) as err:
        parse(spec)
    _one_line(err.value)


def test_bad_matrix_python_values():
    from localpriv.mechanisms import MatrixMechanism

    for rows in ([[np.nan, 1.0], [0.5, 0.5]], [[0.5, 0.5], [1.0]], [[0.5, 0.5], None], "x", [[1 + 0j, 0], [0, 1]]):
        with pytest.raises(LocalPrivError) as err:
            MatrixMechanism(rows=rows)
        _one_line(err.value)


def test_dense_size_cap(monkeypatch):
    check_dense_size(10, 10, "a test")  # fine
    with pytest.raises(LocalPrivError, match=r"would need a 100000 x 100000 dense matrix \(74\.5 GiB\)"):
        check_dense_size(100_000, 100_000, "k-RR channel")
    monkeypatch.setenv("LOCALPRIV_MAX_DENSE_ENTRIES", "50")
    with pytest.raises(LocalPrivError, match="10 x 10"):
        check_dense_size(10, 10, "a test")
    krr = parse("krr(k=10,eps=1.0)")
    for call in (krr.channel, lambda: krr.likelihood(np.arange(10)),
                 lambda: parse("matrix(rows=[[0.5,0.5],[0.5,0.5]])").likelihood_block(np.arange(2), [1, 1]).dense()):
        try:
            call()
        except LocalPrivError as exc:
            _one_line(exc)
        else:  # the matrix one is small enough
            pass
    with pytest.raises(LocalPrivError):
        krr.channel()
    monkeypatch.setenv("LOCALPRIV_MAX_DENSE_ENTRIES", "lots")
    with pytest.raises(LocalPrivError, match="LOCALPRIV_MAX_DENSE_ENTRIES"):
        check_dense_size(2, 2, "a test")


def test_big_mechanisms_never_build_their_channel(monkeypatch):
    """krr with k = 10^7 and sue with k = 10^4: sizes, privacy and analysis from the structure
    (a cap of 10^4 entries proves no channel is built on the way)."""
    from localpriv.analysis import analyze_report

    monkeypatch.setenv("LOCALPRIV_MAX_DENSE_ENTRIES", "10000")
    krr = parse("krr(k=10000000,eps=1.0)")
    assert krr.n_outputs == 10**7
    assert krr.epsilon_ldp() == pytest.approx(1.0, rel=1e-12)
    sue = parse("sue(k=10000,eps=3.0)")
    assert sue.epsilon_ldp() == pytest.approx(3.0, rel=1e-12)
    for mech in (krr, sue, parse("oue(k=10000,eps=1.0)"), parse("lgrr(k=1000000,eps_perm=3.0,eps_1=1.0)")):
        rep = analyze_report(mech)
        assert isinstance(rep["epsilon_ldp (from channel)"], float)
        assert rep["identifiable (|X| independent columns)"] is True
        assert all("\n" not in str(v) for v in rep.values())
    with pytest.raises(LocalPrivError, match="dense matrix"):
        krr.channel()


# ---------------------------------------------------------------------------------------------
# the reported cases
# ---------------------------------------------------------------------------------------------
def _level(spec):
    with warnings.catch_warnings():  # reading the spec has its own check: not what is tested here
        warnings.simplefilter("ignore", PrivacyWarning)
        mech = parse(spec)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        level = mech.epsilon_ldp()
    return level, [w for w in rec if issubclass(w.category, PrivacyWarning)]


@pytest.mark.parametrize("spec,expected", [
    ("olh(k=10,eps=10000.0)", 1e4),
    ("lgrr(k=10,eps_perm=20000.0,eps_1=10000.0)", 1e4),
    ("ss(k=5,eps=10000.0)", 1e4),
    ("lsue(k=5,eps_perm=20000.0,eps_1=10000.0)", 1e4),
    ("krr(k=100000,eps=1.0)", 1.0),
    ("krr(k=3,eps=700.0)", 700.0),
    ("sue(k=5,eps=700.0)", 700.0),
])
def test_reported_cases(spec, expected):
    level, warned = _level(spec)
    assert level == pytest.approx(expected, rel=1e-9)
    # e^eps beyond float64: the guarantee bounds nothing, and we say so
    assert bool(warned) == (expected > 709.0)


def test_infinite_level_warns():
    with pytest.warns(PrivacyWarning, match="no longer protects"):
        assert parse("matrix(rows=[[1.0,0.0],[0.5,0.5]])").epsilon_ldp() == np.inf
    with pytest.warns(PrivacyWarning):
        assert parse("rrba(p=0.5,table=[0.5,0.5,0.0])").epsilon_ldp() == np.inf


# ---------------------------------------------------------------------------------------------
# closed forms agree with the dense channel on small k
# ---------------------------------------------------------------------------------------------
STRUCTURED = [
    "krr(k={k},eps={e})", "sue(k={k},eps={e})", "oue(k={k},eps={e})", "ue(k={k},p=0.75,q=0.125)",
    "blh(k={k},eps={e},n_seeds=64)", "olh(k={k},eps={e},n_seeds=16)", "ss(k={k},eps={e})",
    "ss(k={k},eps={e},omega=2)", "lgrr(k={k},eps_perm={e2},eps_1={e})", "lsue(k={k},eps_perm={e2},eps_1={e})",
    "loue(k={k},eps_perm={e2},eps_1={e})", "lsoue(k={k},eps_perm={e2},eps_1={e})",
    "losue(k={k},eps_perm={e2},eps_1={e})", "lblh(k={k},eps_perm={e2},eps_1={e},n_seeds=64)",
    "lolh(k={k},eps_perm={e2},eps_1={e},n_seeds=16)", "geometric(k={k},eps={e})",
    "geometric(k={k},eps={e},lo=-2,hi={k})", "geometric(k={k},eps={e},lo=1,hi=2)",
    "geometric(k={k},eps={e},lo=0,hi={k}-1)", "exponential(k={k},eps={e})", "rrba(p=0.3,cells={k})",
    "rrba(p=0.6,table=[{t}],floor=0.01)",
]


@pytest.mark.parametrize("template", STRUCTURED)
@pytest.mark.parametrize("k", [3, 5, 8])
@pytest.mark.parametrize("eps", [0.05, 1.0, 4.0, 30.0])
def test_closed_form_agrees_with_dense(template, k, eps):
    if "hi={k}-1" in template:
        template = template.replace("hi={k}-1", f"hi={k - 1}")
    table = ",".join(str(v) for v in np.linspace(1.0, 3.0, k) / np.linspace(1.0, 3.0, k).sum())
    spec = template.format(k=k, e=eps, e2=2 * eps, t=table)
    mech = parse(spec)
    if mech.n_outputs is not None:
        G = mech.channel()
    elif mech.spec_name == "geometric":  # untruncated: outputs -1..k attain the sup
        G = mech.likelihood(np.arange(-1, k + 1))
    else:  # local hashing with g too large to enumerate: every seed's hashed and one other value
        from localpriv.mechanisms.hashing import hash_values
        seeds = np.arange(mech.n_seeds)[:, None]
        h = hash_values(seeds, np.arange(k)[None, :], mech.g)
        G = mech.likelihood(np.unique(np.r_[(seeds * mech.g + h).ravel(), (seeds * mech.g + (h + 1) % mech.g).ravel()]))
    assert mech.epsilon_ldp() == pytest.approx(ldp_epsilon(G), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("k", [2, 5, 9])
@pytest.mark.parametrize("eps", [0.05, 1.0, 6.0])
def test_exponential_closed_form_on_other_domains(k, eps):
    from localpriv.domains import CategoricalDomain
    from localpriv.domains.grid import GridDomain

    for dom in (CategoricalDomain([f"c{i}" for i in range(k)]), GridDomain(0.0, 0.0, 1, k, 0.5),
                IntegerDomain(3, 3 + k - 1)):
        mech = parse(f"exponential(eps={eps})", dom)
        assert mech.epsilon_ldp() == pytest.approx(ldp_epsilon(mech.channel()), rel=1e-9, abs=1e-12)


def test_geometric_geo_level_structural():
    for spec in ("geometric(k=7,eps=0.4)", "geometric(k=2,eps=3.0)"):
        mech = parse(spec)
        idx = np.arange(mech.k, dtype=float)
        from localpriv.mechanisms.privacy import geo_epsilon
        dense = geo_epsilon(mech.likelihood(np.arange(-1, mech.k + 1)), np.abs(idx[:, None] - idx[None, :]))
        assert mech.epsilon_geo() == pytest.approx(dense, rel=1e-9)
    # far beyond what a dense channel can hold (and beyond the float range of e^{-eps d})
    assert parse("geometric(k=1000000,eps=1.0)").epsilon_geo() == pytest.approx(1.0, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# structure, not channels: ranks agree with an SVD, sizes and levels never build the channel
# ---------------------------------------------------------------------------------------------
RANKED = ["krr(k={k},eps=1.5)", "sue(k={k},eps=1.0)", "oue(k={k},eps=2.0)", "ue(k={k},p=0.6,q=0.3)",
          "ss(k={k},eps=1.0)", "lgrr(k={k},eps_perm=3.0,eps_1=1.0)", "lsue(k={k},eps_perm=3.0,eps_1=1.0)",
          "rrba(p=0.4,cells={k})", "rrba(p=0.0,cells={k})", "exponential(k={k},eps=0.7)",
          "the(k={k},eps=1.0)"]


@pytest.mark.parametrize("template", RANKED)
@pytest.mark.parametrize("k", [2, 4, 7])
def test_structural_rank_agrees_with_svd(template, k):
    from localpriv.analysis.concavity import rank_test

    mech = parse(template.format(k=k))
    rank, why = mech.rank_from_structure()
    assert "\n" not in why
    assert rank == rank_test(mech.channel()).rank


def test_structural_rank_other_domains_and_geometric():
    from localpriv.analysis.concavity import rank_test
    from localpriv.domains import CategoricalDomain
    from localpriv.domains.grid import GridDomain

    for dom in (CategoricalDomain(["a", "b", "c", "d"]), GridDomain(0.0, 0.0, 2, 3, 0.5)):
        mech = parse("exponential(eps=2.0)", dom)
        assert mech.rank_from_structure()[0] == rank_test(mech.channel()).rank == dom.size
    geo = parse("geometric(k=9,eps=0.8)")
    assert geo.rank_from_structure()[0] == rank_test(geo.likelihood(np.arange(-9, 18))).rank == 9
    assert parse("geometric(k=9,eps=0.8,lo=0,hi=8)").rank_from_structure() is None
    assert parse("olh(k=9,eps=1.0)").rank_from_structure() is None  # finite seed family: SVD only


def _without_channel(name, monkeypatch):
    """The first declared example of mechanism ``name``, whose ``channel()`` fails the test if called."""
    mech = _example_mech(name)

    def refuse(self):
        raise AssertionError("channel() built")
    monkeypatch.setattr(type(mech), "channel", refuse)
    return mech


@pytest.mark.parametrize("name", sorted(registered()))
def test_n_outputs_never_builds_the_channel(name, monkeypatch):
    mech = _without_channel(name, monkeypatch)
    n = mech.n_outputs
    assert n is None or n >= 1
    size = mech.output_space_size()
    assert size is None or size >= (n or 1)


# mechanisms whose level comes from their structure (the others read their, small, channel)
STRUCTURAL_LEVEL = {"krr", "ue", "sue", "oue", "the", "blh", "olh", "ss", "lgrr", "lsue", "loue", "lsoue",
                    "losue", "lblh", "lolh", "geometric", "exponential", "rrba", "laplace", "she"}


@pytest.mark.parametrize("name", sorted(STRUCTURAL_LEVEL))
def test_structural_levels_never_build_the_channel(name, monkeypatch):
    assert np.isfinite(_without_channel(name, monkeypatch).epsilon_ldp())


def test_analysis_skips_dense_work_in_one_line(monkeypatch):
    from localpriv.analysis import analyze_report

    rep = analyze_report(parse("olh(k=1000000,eps=2.0)"))
    assert rep["epsilon_ldp (from channel)"] == pytest.approx(2.0, rel=1e-12)
    assert rep["identifiable (|X| independent columns)"].startswith("not decided (")
    assert "limit" in rep["identifiable (|X| independent columns)"]
    assert rep["outputs"].startswith("~10^") or "finite" in rep["outputs"]
    monkeypatch.setenv("LOCALPRIV_MAX_DENSE_ENTRIES", "100")
    rep = analyze_report(parse("matrix(rows=[[0.5,0.5,0.0],[0.25,0.5,0.25],[0.0,0.5,0.5],[0.1,0.1,0.8]])"))
    assert rep["outputs"] == 3  # 12 entries: under the cap, analysed densely
    big = parse("exponential(k=200,eps=0.5)")
    rep = analyze_report(big)
    assert rep["epsilon_ldp (from channel)"] == pytest.approx(0.25 * 199, rel=1e-12)
    assert rep["identifiable (|X| independent columns)"] is True  # from the structure
    assert "not computed" in rep["INV exact n*E||v-theta||^2"]
    assert all("\n" not in str(v) for v in rep.values())


def test_analysis_reports_privacy_warnings():
    from localpriv.analysis import analyze_report

    with warnings.catch_warnings():  # reading the specs warns; analyze_report must not
        warnings.simplefilter("ignore", PrivacyWarning)
        huge, ruled_out = parse("krr(k=3,eps=10000.0)"), parse("matrix(rows=[[1.0,0.0],[0.5,0.5]])")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # analyze_report itself keeps them in the report
        rep = analyze_report(huge)
        assert rep["epsilon_ldp (from channel)"] == pytest.approx(1e4)
        assert "no longer protects anyone" in rep["privacy warning"]
        rep = analyze_report(ruled_out)
        assert rep["epsilon_ldp (from channel)"] == np.inf and "inf" in rep["privacy warning"]
        assert "privacy warning" not in analyze_report(parse("krr(k=3,eps=1.0)"))


def test_generic_dense_fallback_has_no_identity():
    from localpriv.likelihood.blocks import LikelihoodBlock

    class Twice(LikelihoodBlock):  # G = 2 * ones(k, m)
        def __init__(self, k, m):
            self.k, self.counts = k, np.ones(m)

        def backward(self, w):
            return np.full(self.k, 2.0 * w.sum())

    assert np.array_equal(Twice(3, 4).dense(), np.full((3, 4), 2.0))
    with pytest.raises(LocalPrivError, match="dense matrix"):
        Twice(10**6, 10**6).dense()
