"""Compiled EM loops for small problems, BLAS threads pinned in EM runs."""
import subprocess
import sys

import numpy as np
import pytest

from localpriv.estimators import _kernels
from localpriv.estimators.em import em
from localpriv.likelihood.structured import ScaledIdentityBlock
from localpriv.mechanisms.krr import KRR, krr_mle
from localpriv.utils.validation import LocalPrivError

EM = sys.modules["localpriv.estimators.em"]


def _krr_block(k, eps, n, seed, all_outputs=True):
    rng = np.random.default_rng(seed)
    m = KRR(k, eps)
    x = np.minimum(rng.geometric(min(0.5, 4.0 / k), size=n) - 1, k - 1)
    counts = np.bincount(m.sample(x, rng), minlength=k).astype(float)
    if all_outputs:
        return ScaledIdentityBlock(k, m.p_keep, m.p_other, np.arange(k), counts), counts, eps
    live = np.flatnonzero(counts)
    out = np.concatenate([live, np.setdiff1d(np.arange(k), live)[:3]])  # a few outputs with count 0
    return ScaledIdentityBlock(k, m.p_keep, m.p_other, out, counts[out]), counts, eps


@pytest.fixture
def compiled_from_start(monkeypatch):
    monkeypatch.setattr(EM, "COMPILED_AFTER", 0)


def _numpy_run(monkeypatch, *args, **kw):
    monkeypatch.setenv("LOCALPRIV_NUMBA", "0")
    try:
        return em(*args, **kw)
    finally:
        monkeypatch.delenv("LOCALPRIV_NUMBA")


@pytest.mark.parametrize("stop", ["gap", "loglik", "max_abs"])
@pytest.mark.parametrize("all_outputs", [True, False])
def test_compiled_plain_em_follows_the_numpy_iterates(monkeypatch, compiled_from_start, stop, all_outputs):
    block, _, _ = _krr_block(150, 1.0, 20_000, 1, all_outputs)
    kw = dict(accelerate="none", stop=stop, delta=1e-300, max_iter=300)  # 300 steps, no stopping decision
    got = em([block], 150, **kw)
    want = _numpy_run(monkeypatch, [block], 150, **kw)
    assert got.iterations == want.iterations == 300 and not got.converged
    assert np.abs(got.theta - want.theta).max() <= 1e-12 * want.theta.max()
    assert got.loglik == pytest.approx(want.loglik, rel=1e-12)
    assert got.gap == pytest.approx(want.gap, rel=1e-6, abs=1e-15)


@pytest.mark.parametrize("accelerate,stop,delta", [("squarem", "gap", 1e-10), ("squarem", "max_abs", 1e-12),
                                                   ("squarem", "loglik", 1e-7), ("newton", "gap", 1e-9),
                                                   ("none", "loglik", 1e-3)])
def test_compiled_runs_reach_the_same_estimate(monkeypatch, compiled_from_start, accelerate, stop, delta):
    block, counts, eps = _krr_block(100, 1.0, 100_000, 2)
    got = em([block], 100, accelerate=accelerate, stop=stop, delta=delta, max_iter=50_000)
    assert _kernels._KERNELS is not None  # the compiled loops ran
    want = _numpy_run(monkeypatch, [block], 100, accelerate=accelerate, stop=stop, delta=delta, max_iter=50_000)
    assert got.converged and want.converged and got.scheme == want.scheme
    if stop == "gap":  # the certificate holds for the result
        assert got.gap < delta
    mle = krr_mle(counts, eps)
    if accelerate == "newton":  # certified exact maximum: the same point
        assert np.abs(got.theta - want.theta).max() <= 1e-9 * want.theta.max()
        assert np.abs(got.theta - mle).max() <= 1e-8
    # both results are within the rule's reach of the same maximum
    assert abs(got.loglik - want.loglik) <= max(1e-9, 10 * delta) * counts.sum()


def test_import_and_short_runs_do_not_load_numba():
    code = ("import sys, localpriv, localpriv.estimators\n"
            "assert 'numba' not in sys.modules and 'threadpoolctl' not in sys.modules\n"
            "import numpy as np\n"
            "from localpriv.estimators.em import em\n"
            "from localpriv.likelihood.structured import ScaledIdentityBlock\n"
            "b = ScaledIdentityBlock(5, 0.6, 0.1, np.arange(5), np.array([50., 30, 10, 5, 5]))\n"
            "r = em([b], 5)\n"
            "assert r.converged and r.iterations < 64, r.iterations\n"
            "assert 'numba' not in sys.modules and 'threadpoolctl' in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-800:]


def test_blas_threads_pinned_during_em_and_restored(monkeypatch):
    from threadpoolctl import threadpool_info

    def blas():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas()
    if not before:
        pytest.fail("no BLAS library found by threadpoolctl")
    block, _, _ = _krr_block(20, 1.0, 2000, 3)
    seen = []

    def cb(t, theta, L):
        seen.append(blas())

    for limit in (1, 2):
        monkeypatch.setenv("LOCALPRIV_BLAS_THREADS", str(limit))
        seen.clear()
        em([block], 20, accelerate="none", max_iter=3, callback=cb)
        assert seen and all(v == [limit] * len(v) for v in seen)
        assert blas() == before
    monkeypatch.setattr(EM, "BLAS_THREADS", 2)  # the module setting wins over the environment
    monkeypatch.setenv("LOCALPRIV_BLAS_THREADS", "1")
    seen.clear()
    em([block], 20, accelerate="none", max_iter=2, callback=cb)
    assert all(v == [2] * len(v) for v in seen)
    monkeypatch.setattr(EM, "BLAS_THREADS", None)
    monkeypatch.setenv("LOCALPRIV_BLAS_THREADS", "lots")
    with pytest.raises(LocalPrivError, match="LOCALPRIV_BLAS_THREADS") as exc:
        em([block], 20)
    assert "\n" not in str(exc.value)


def test_pairwise_sum_is_numpys():
    s = _kernels.kernels()  # noqa: F841  (compiles the helpers into the module)
    rng = np.random.default_rng(4)
    for n in [1, 7, 8, 9, 127, 128, 129, 255, 1000, 4096 + 3, 70_001]:
        a = rng.random(n) * 10.0 ** rng.uniform(-6, 6, n)
        assert _kernels._sum(a) == a.sum()
