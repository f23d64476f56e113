"""The fast clients draw exactly the distribution their channel states.

Tolerances: a frequency estimated from ``m`` Bernoulli(``p``) draws has standard error
``sqrt(p (1 - p) / m)``; every check allows 5 standard errors, with fixed seeds.
"""
from math import comb

import numpy as np
import pytest
from scipy.stats import chisquare, kstest, laplace

from localpriv.mechanisms import _sampling, parse
from localpriv.mechanisms import subset as subset_module
from localpriv.mechanisms._sampling import DiscreteLaplace, bernoulli_bits, fill_in_streams
from localpriv.mechanisms.subset import SS
from localpriv.mechanisms.unary import OUE, unpack_bits
from localpriv.utils.validation import LocalPrivError


def _within(freq, p, m, z=5.0):
    return np.abs(freq - p) <= z * np.sqrt(p * (1 - p) / m) + 1e-12


@pytest.mark.parametrize("q", [0.5, 0.2689414213699951, 1 / 3, 0.01, 0.999])
def test_bernoulli_bits_frequency(q):
    rng = np.random.default_rng(11)
    bits = bernoulli_bits((400, 500), q, rng)
    assert bits.dtype == bool and bits.shape == (400, 500)
    assert _within(bits.mean(), q, bits.size)


@pytest.mark.parametrize("t", [0, 1])
def test_bernoulli_bits_tie_refinement_is_exact(t):
    # q = (t + 1/2) / 2^16: a 16-bit threshold alone would give t / 2^16 (never a one for t = 0);
    # the tie refinement supplies the missing 1 / 2^17. Expected ones: m q (Poisson-like count).
    q = (t + 0.5) / 65536
    rng = np.random.default_rng(3)
    m = 1 << 25
    ones = int(bernoulli_bits((m,), q, rng).sum())
    mean = m * q
    assert abs(ones - mean) <= 5 * np.sqrt(mean)
    assert abs(ones - m * t / 65536) > 5 * np.sqrt(mean)  # the truncated law is rejected


def test_bernoulli_bits_truth_path():
    rng = np.random.default_rng(5)
    truth = rng.random((300, 400)) < 0.3
    bits = bernoulli_bits(truth.shape, 0.1, rng, p_true=0.8, truth=truth)
    assert _within(bits[truth].mean(), 0.8, truth.sum())
    assert _within(bits[~truth].mean(), 0.1, (~truth).sum())


def test_bernoulli_bits_degenerate_and_invalid():
    rng = np.random.default_rng(0)
    assert not bernoulli_bits((10, 10), 0.0, rng).any()
    assert bernoulli_bits((10, 10), 1.0, rng).all()
    truth = np.eye(10, dtype=bool)
    b = bernoulli_bits((10, 10), 0.0, rng, p_true=1.0, truth=truth)
    assert np.array_equal(b, truth)
    with pytest.raises(Exception, match=r"\[0, 1\]"):
        bernoulli_bits((3,), 1.5, rng)


def test_bernoulli_bits_reproducible():
    a = bernoulli_bits((50, 70), 0.3, np.random.default_rng(9))
    b = bernoulli_bits((50, 70), 0.3, np.random.default_rng(9))
    assert np.array_equal(a, b)


def test_oue_bits_independent_pairs():
    # two non-true bits of one report are independent: P(both) = q^2
    mech = OUE(k=6, eps=1.0)
    rng = np.random.default_rng(21)
    n = 200_000
    bits = unpack_bits(mech.sample(np.zeros(n, dtype=int), rng), 6).astype(bool)
    q = mech.q1
    assert _within(bits[:, 0].mean(), mech.p1, n)
    assert _within((bits[:, 1] & bits[:, 2]).mean(), q * q, n)


@pytest.mark.parametrize("k,eps", [(10, 1.0), (17, 0.5), (40, 3.0)])
def test_ss_subset_law(k, eps):
    mech = SS(k=k, eps=eps)
    rng = np.random.default_rng(k)
    n = 60_000
    x = rng.integers(0, k, n)
    bits = unpack_bits(mech.sample(x, rng), k).astype(bool)
    # every subset has exactly omega members
    assert np.all(bits.sum(axis=1) == mech.omega)
    # the true value is in with probability p*
    hit = bits[np.arange(n), x]
    assert _within(hit.mean(), mech.p_star, n)
    # each other value is in with probability q*, the same for all (uniform over the others)
    other = bits.copy()
    other[np.arange(n), x] = False
    per_value = other.sum(axis=0)
    per_value_n = n - np.bincount(x, minlength=k)
    assert np.all(_within(per_value / per_value_n, mech.q_star, per_value_n))
    # a pair of other values is in together with the uniform-subset probability
    w = mech.omega
    sel = (x != 0) & (x != 1)
    pair = (bits[sel, 0] & bits[sel, 1]).mean()
    p_pair = (mech.p_star * (w - 1) * (w - 2) / ((k - 1) * (k - 2))
              + (1 - mech.p_star) * w * (w - 1) / ((k - 1) * (k - 2)))
    assert _within(pair, p_pair, sel.sum())


# ---- SS client: exact uniform subsets (Bernoulli candidates + symmetric fix-up) ----------------

@pytest.mark.parametrize("omega,x", [(1, 0), (2, 0), (2, 5), (3, 2), (3, 5), (5, 1)])
def test_ss_sample_matches_channel_small_k(omega, x):
    # the 2^6 outputs for one true value: exactly omega bits, and the empirical law matches the
    # channel row by a chi-square test (fixed seed). x = 5 = k - 1 is the value that receives the
    # bit of position x in the sampler's relabelling.
    k, n = 6, 150_000
    mech = SS(k=k, eps=1.0, omega=omega)
    rng = np.random.default_rng(100 * omega + x)
    rep = mech.sample(np.full(n, x), rng)
    assert np.all(unpack_bits(rep, k).sum(axis=1) == omega)
    obs = np.bincount(mech.output_index(rep), minlength=2 ** k)
    expected = n * mech.channel()[x]
    cells = expected > 0
    assert cells.sum() == comb(k, omega) and obs[~cells].sum() == 0
    assert chisquare(obs[cells], expected[cells] * n / expected[cells].sum()).pvalue > 1e-3


@pytest.mark.parametrize("plan", [(0, 0, 0, 0), (1, 0, 6, 6), (1, 1, 0, 6), (5, 3, 1, 5), (1, 2, 0, 2)])
def test_ss_uniform_subsets_any_plan_is_uniform(plan, monkeypatch):
    # the law must not depend on the speed parameters: force candidates with P(bit) = j / 2^r kept
    # in the count window lo..hi (empty start, full start, both fix-up directions, 3-digit j):
    # every 3-subset of the K = 6 positions must be equally likely (chi-square, fixed seed)
    j, r, lo, hi = plan
    q = 1.0  # the acceptance rate only sizes the candidate batches
    monkeypatch.setattr(subset_module, "_ss_plan", lambda k, m: (j, r, lo, hi, q))
    k, m, n = 7, 3, 100_000
    rows = subset_module._ss_uniform_subsets(n, k, m, np.random.default_rng(j * 10 + r))
    bits = unpack_bits(rows.view(np.uint8).reshape(n, -1)[:, :1], k).astype(bool)
    assert np.all(bits.sum(axis=1) == m) and not bits[:, k - 1].any()
    index = bits[:, :k - 1].astype(np.int64) @ (1 << np.arange(k - 1))
    obs = np.bincount(index, minlength=2 ** (k - 1))
    cells = np.array([bin(i).count("1") == m for i in range(2 ** (k - 1))])
    assert obs[~cells].sum() == 0
    assert chisquare(obs[cells]).pvalue > 1e-3


@pytest.mark.parametrize("x", [39, 17])
def test_ss_pair_cooccurrence_k40(x):
    # k = 40 (bits over 5 bytes; x = 39 = K and an interior x): every pair of values other than x
    # is reported together with the exact probability
    #   p* C(K-2, m1-2) / C(K, m1) + (1 - p*) C(K-2, m0-2) / C(K, m0),  m1 = omega - 1, m0 = omega,
    # each value other than x with probability q*, and x with p* (5 standard errors each)
    k, n = 40, 120_000
    mech = SS(k=k, eps=1.0)
    K, w, ps = k - 1, mech.omega, mech.p_star
    bits = unpack_bits(mech.sample(np.full(n, x), np.random.default_rng(x)), k).astype(np.float32)
    assert np.all(bits.sum(axis=1) == w)
    assert _within(bits[:, x].mean(), ps, n)
    others = np.delete(np.arange(k), x)
    b = bits[:, others]
    assert np.all(_within(b.mean(axis=0), mech.q_star, n))
    p_pair = (ps * comb(K - 2, w - 3) / comb(K, w - 1)
              + (1 - ps) * comb(K - 2, w - 2) / comb(K, w))
    pair = (b.T @ b) / n
    off = ~np.eye(K, dtype=bool)
    assert np.all(_within(pair[off], p_pair, n))


def test_ss_sample_chunks_reproducible():
    # several chunks of users (k = 1000: 2^15 users per chunk), reproducible from the seed
    k, n = 1000, 70_001
    mech = SS(k=k, eps=1.0)
    x = np.random.default_rng(0).integers(0, k, n)
    a = mech.sample(x, np.random.default_rng(7))
    assert a.shape == (n, 125) and np.array_equal(a, mech.sample(x, np.random.default_rng(7)))
    bits = unpack_bits(a, k).astype(bool)
    assert np.all(bits.sum(axis=1) == mech.omega)
    assert _within(bits[np.arange(n), x].mean(), mech.p_star, n)


def _magnitude_cells(sampler, n_cells=40, upto=None):
    """Cells of about equal probability for ``|D|`` under the sampler's exact drawn law
    (``P~(|D| = 0)``, ``2 P~(D = m)``), the mass beyond ``upto`` joining the last cell."""
    upto = upto or int(60 / sampler.rate) + 2 * sampler.B
    m = np.arange(upto + 1)
    p = sampler.drawn_pmf(m) * np.where(m == 0, 1.0, 2.0)
    p[-1] += max(0.0, 1.0 - p.sum())
    cell = np.minimum(np.searchsorted(np.linspace(0, 1, n_cells + 1)[1:-1], np.cumsum(p), side="right"),
                      n_cells - 1)
    return cell, np.bincount(cell, weights=p, minlength=n_cells)


def _chi2_magnitudes(d, sampler):
    cell, probs = _magnitude_cells(sampler)
    obs = np.bincount(cell[np.minimum(np.abs(d), cell.size - 1)], minlength=probs.size)
    live = probs > 0
    assert obs[~live].sum() == 0
    return chisquare(obs[live], probs[live] * obs.sum() / probs[live].sum()).pvalue


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_she_noise_is_laplace(eps):
    # SHE's report is the one-hot vector plus iid noise g D, D discrete Laplace with
    # lam = g eps / 2 per grid step (seed 002's Laplace(2/eps) at the grid's
    # resolution): every value is on the grid, the magnitudes of 4 x 10^5 entries pass a
    # chi-square test against the sampler's law at a fixed seed, and the signs are fair and
    # independent of the magnitudes (5 standard errors)
    k, n = 8, 50_000
    m = parse(f"she(k={k}, eps={eps})")
    rng = np.random.default_rng(int(eps * 10))
    x = rng.integers(0, k, n)
    z = m.vectors(m.sample(x, rng))
    z[np.arange(n), x] -= 1.0
    steps = z.ravel() / m.grid
    assert np.all(steps == np.round(steps))
    d = steps.astype(np.int64)
    assert _chi2_magnitudes(d, m.sampler) > 1e-3
    assert kstest(z.ravel(), laplace(scale=2.0 / eps).cdf).pvalue > 1e-3  # the grid is fine
    neg = d < 0
    nz = d != 0
    assert _within(neg[nz].mean(), 0.5, nz.sum())
    big = np.abs(d) > np.median(np.abs(d))
    assert _within(neg[big].mean(), 0.5, big.sum())


@pytest.mark.parametrize("rate", [2.0 ** -10, 0.3, 3.0])
def test_discrete_laplace_body_and_tail(rate):
    # 2^23 draws: |D| in 40 cells of equal probability under the exact drawn law passes a
    # chi-square test (p > 1e-3, fixed seed); the draws past the table (|D| >= B, about 2 e^-7 of
    # them, redrawn from the memoryless geometric tail) are as many as P(|D| >= B) says (5 SE) and
    # |D| - B follows the one-sided geometric law (chi-square); signs fair, also at large |D|
    s = DiscreteLaplace(rate)
    d = s.signed(1 << 23, np.random.default_rng(21))
    assert d.dtype == np.int64
    assert _chi2_magnitudes(d, s) > 1e-3
    a = np.exp(-rate)
    p_tail = 2 * a ** s.B / (1 + a)
    tail = np.abs(d[np.abs(d) >= s.B]) - s.B
    assert abs(tail.size - d.size * p_tail) <= 5 * np.sqrt(d.size * p_tail)
    step = max(1, s.B // 40)
    q = np.exp(-rate * step * np.arange(200))  # P(G >= step * j)
    cells = np.minimum(tail // step, q.size - 1)
    probs = -np.diff(np.r_[q, 0.0])
    keep = probs * tail.size > 5
    obs = np.bincount(cells, minlength=q.size)
    assert chisquare(np.r_[obs[keep], obs[~keep].sum()],
                     np.r_[probs[keep], probs[~keep].sum()] * tail.size).pvalue > 1e-3
    nz = d != 0
    assert _within((d[nz] < 0).mean(), 0.5, nz.sum())
    big = np.abs(d) > 3 / rate
    assert _within((d[big] < 0).mean(), 0.5, int(big.sum()))


def test_discrete_laplace_rejects_bad_buffers_and_rates():
    s = DiscreteLaplace(0.5)
    with pytest.raises(LocalPrivError):
        s.signed_into(np.empty(8), np.random.default_rng(0))
    with pytest.raises(LocalPrivError):
        s.signed_into(np.empty((4, 2), dtype=np.int32), np.random.default_rng(0), cap=100)
    with pytest.raises(LocalPrivError):
        s.signed_into(np.empty(4, dtype=np.int32), np.random.default_rng(0), cap=1 << 40)
    for rate in [0.0, 1e-9, 25.0]:
        with pytest.raises(LocalPrivError):
            DiscreteLaplace(rate)


def test_she_draws_do_not_depend_on_threads(monkeypatch):
    # a call past the stream threshold (3 x 10^6 entries) splits into STREAMS seeded streams;
    # one thread or several give the same bytes, and the same seed gives the same reports
    m = parse("she(k=100, eps=1.0)")
    x = np.random.default_rng(1).integers(0, 100, 30_000)
    monkeypatch.setenv("LOCALPRIV_THREADS", "1")
    one = m.sample(x, np.random.default_rng(9))
    monkeypatch.setenv("LOCALPRIV_THREADS", "2")
    two = m.sample(x, np.random.default_rng(9))
    assert np.array_equal(one, two)
    z = m.vectors(two)
    z[np.arange(x.size), x] -= 1.0
    assert kstest(z.ravel()[::7], laplace(scale=2.0).cdf).pvalue > 1e-3
    # chunks drawn by different streams are not copies of each other
    step = _sampling._STREAM_CHUNK_ITEMS // 100
    assert not np.array_equal(z[:step], z[step:2 * step])
    monkeypatch.setenv("LOCALPRIV_THREADS", "zero")
    with pytest.raises(LocalPrivError, match="LOCALPRIV_THREADS"):
        m.sample(x, np.random.default_rng(9))


def test_fill_in_streams_covers_every_row_once():
    # every row is filled exactly once, by a fixed stream per chunk, small and large calls alike
    for n_rows, row_items in [(10, 3), (50_000, 100)]:
        seen = np.zeros(n_rows, dtype=int)

        def fill(lo, hi, gen, seen=seen):
            seen[lo:hi] += 1
            assert isinstance(gen, np.random.Generator)

        fill_in_streams(n_rows, row_items, fill, np.random.default_rng(0))
        assert np.all(seen == 1)
    assert _sampling.STREAMS >= 2
