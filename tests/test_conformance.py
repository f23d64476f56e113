"""The conformance suite (issue 20, item 6): ``check_mechanism`` on every registered mechanism.

``CASES`` is the one table of representative small parameters. A registered mechanism without an
entry fails ``test_every_registered_mechanism_has_a_case``; one failing a check fails its case.
Promised levels are the papers' (``ldp``: the LDP level; ``geo``: per index unit or km), and
``tight`` says the computed level must equal the promise.
"""
import math
import warnings

import numpy as np
import pytest

from localpriv.utils.validation import PrivacyWarning
from localpriv.domains import IntegerDomain
from localpriv.mechanisms import KRR, parse, registered
from localpriv.mechanisms.piecewise import Piecewise
from localpriv.domains.grid import GridDomain
from localpriv.testing.mechanisms import CHECKS, ConformanceError, check_mechanism

GRID = GridDomain(40.70, -74.00, 2, 2, 1.0)
LINE4 = IntegerDomain(0, 3)

#: spec -> (domain for parse, promised levels); one row per registered spec name at least
CASES = {
    "krr(k=4,eps=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "matrix(rows=[[0.7,0.3],[0.4,0.6]])": (None, dict(eps_ldp=math.log(0.6 / 0.3), tight=True)),
    "sue(k=4,eps=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "oue(k=4,eps=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "ue(k=4,p=0.7,q=0.2)": (None, dict(eps_ldp=math.log(0.7 * 0.8 / (0.3 * 0.2)), tight=True)),
    "blh(k=4,eps=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "olh(k=4,eps=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "ss(k=4,eps=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "the(k=4,eps=1.0)": (None, dict(eps_ldp=1.0)),
    "she(k=4,eps=1.0)": (None, dict(eps_ldp=1.0)),
    "lgrr(k=4,eps_perm=2.0,eps_1=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "lsue(k=4,eps_perm=2.0,eps_1=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "loue(k=4,eps_perm=2.0,eps_1=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "lsoue(k=4,eps_perm=2.0,eps_1=1.0)": (None, dict(eps_ldp=1.0)),
    "losue(k=4,eps_perm=2.0,eps_1=1.0)": (None, dict(eps_ldp=1.0)),
    "lblh(k=4,eps_perm=2.0,eps_1=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "lolh(k=4,eps_perm=2.0,eps_1=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "geometric(k=5,eps=0.5)": (None, dict(eps_ldp=2.0, tight=True, eps_geo=0.5)),
    "geometric(k=5,eps=0.5,lo=0,hi=4)": (None, dict(eps_ldp=2.0, eps_geo=0.5)),
    "laplace(k=5,eps=0.5)": (None, dict(eps_ldp=2.0, eps_geo=0.5)),
    "laplace(k=5,eps=0.5,bins=1.0,lo=0,hi=4)": (None, dict(eps_ldp=2.0, eps_geo=0.5)),
    "laplace(k=4,eps=0.5,bins=0.5)": (None, dict(eps_ldp=1.5, eps_geo=0.5)),
    "exponential(k=4,eps=1.0)": (None, dict(eps_ldp=3.0, eps_geo=1.0)),
    "planar-geometric(eps=1.0)": (GRID, dict(eps_geo=1.0)),
    "planar-laplace(eps=1.0)": (GRID, dict(eps_geo=1.0)),
    "shokri(q=0.8)": (LINE4, dict()),
    "rrba(p=0.5,cells=4)": (None, dict(eps_ldp=math.log(5.0), tight=True)),
    # numeric attributes (issue 20): cells of [0, 1] / [-1, 1] perturbed at their centres
    "sw(k=5,eps=1.0,buckets=8)": (None, dict(eps_ldp=1.0, tight=True)),
    "pm(k=5,eps=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "hm(k=5,eps=2.0)": (None, dict(eps_ldp=2.0, tight=True)),
    "hm(k=5,eps=0.5)": (None, dict(eps_ldp=0.5)),  # below eps* ~ 0.61: Duchi's part alone
    "duchi(k=5,eps=1.0)": (None, dict(eps_ldp=1.0)),  # centres +-0.8, not +-1: below eps
    # large domains (issue 20, item 2): Hadamard response, count-mean sketches (small m, d)
    "hr(k=5,eps=1.0)": (None, dict(eps_ldp=1.0, tight=True)),
    "hr(k=6,eps=2.0)": (None, dict(eps_ldp=2.0, tight=True)),  # general HR: 4 blocks of width 4
    "hcms(k=5,eps=1.0,m=4,d=3)": (None, dict(eps_ldp=1.0, tight=True)),
    "cms(k=5,eps=2.0,m=4,d=3)": (None, dict(eps_ldp=2.0, tight=True)),
    # Bloom-filter RAPPOR (issue 20): 2 cohorts x 2^4 bit vectors (enumerable channel); the promise is
    # the paper's eps_1 = h (logit s1 - logit s0), attained here (two inputs with disjoint filters)
    # (s1, s0 = 0.6875, 0.5625 and 0.6875, 0.3125); the second is not enumerable (4 x 2^40 outputs)
    "rappor(k=4,m=4,h=2,cohorts=2,f=0.5,p=0.5,q=0.75)": (
        None, dict(eps_ldp=2 * math.log(0.6875 * 0.4375 / (0.3125 * 0.5625)), tight=True)),
    "rappor(k=5,m=40,h=2,cohorts=4,f=0.25,p=0.25,q=0.75)": (
        None, dict(eps_ldp=2 * math.log(0.6875 * 0.6875 / (0.3125 * 0.3125)), tight=True)),
    # without the IRR (p = 0, q = 1: pure-LDP's protocol; the client draws nothing for it): the
    # PRR's eps_inf = 2 h log((1 - f/2) / (f/2)) = 4 log 3 at f = 0.5
    "rappor(k=4,m=4,h=2,cohorts=2,f=0.5,p=0.0,q=1.0)": (None, dict(eps_ldp=4 * math.log(3.0), tight=True)),
    # a filter too wide for one int64 (m + bits(cohorts-1) > 62): bit-vector reports of 2 + 16 bytes
    "rappor(k=5,m=128,h=2,cohorts=4,f=0.25,p=0.25,q=0.75)": (
        None, dict(eps_ldp=2 * math.log(0.6875 * 0.6875 / (0.3125 * 0.3125)), tight=True)),
}


def _build(spec, domain):
    with warnings.catch_warnings():  # shokri's LP channel has zeros: its LDP level is inf (a warning)
        warnings.simplefilter("ignore", PrivacyWarning)
        return parse(spec, domain)


@pytest.mark.parametrize("spec", sorted(CASES))
def test_conformance(spec):
    domain, promise = CASES[spec]
    mech = _build(spec, domain)
    ran = check_mechanism(mech, rng=np.random.default_rng(20), domain=domain, **promise)
    assert "samples-vs-likelihood" in ran and "privacy" in ran


def test_every_registered_mechanism_has_a_case():
    covered = {s.partition("(")[0] for s in CASES}
    missing = sorted(set(registered()) - covered)
    assert not missing, f"registered mechanisms without a conformance case in CASES: {missing}"


# ---- the suite catches broken mechanisms (each failure names its check) ----------------------
class _Broken(KRR):
    """k-RR with one defect chosen by ``bug``; registered only inside the test that uses it."""

    spec_name = "broken-krr"

    def __init__(self, k: int, eps: float, bug: str = "none"):
        super().__init__(k, eps)
        self.bug = bug

    def params(self):
        return {"k": self.k, "eps": self.eps, "bug": self.bug}

    def sample(self, x, rng):
        if self.bug in ("sampler", "sampler-unenumerable"):  # draws at a larger eps than its channel says
            return KRR(self.k, self.eps * 1.3).sample(x, rng)
        if self.bug == "clips":  # clips instead of refusing indices outside the domain
            x = np.clip(np.asarray(x, dtype=np.int64), 0, self.k - 1)
        if self.bug == "dtype":
            return super().sample(x, rng).astype(np.int32)
        return super().sample(x, rng)

    @property
    def n_outputs(self):
        return None if self.bug == "sampler-unenumerable" else self.k

    def likelihood(self, reports):
        if self.bug == "sampler-unenumerable":
            z = np.asarray(reports, dtype=np.int64)
            G = np.full((self.k, z.size), self.p_other)
            G[z, np.arange(z.size)] = self.p_keep
            return G
        return super().likelihood(reports)

    def likelihood_block(self, reports, counts):
        if self.bug == "block":
            from localpriv.likelihood.blocks import DenseBlock
            G = self.likelihood(reports).copy()
            G[0, 0] *= 1.01
            return DenseBlock(G, counts)
        if self.bug == "sampler-unenumerable":
            from localpriv.likelihood.blocks import DenseBlock
            return DenseBlock(self.likelihood(reports), counts)
        return super().likelihood_block(reports, counts)

    def epsilon_ldp(self):
        return 0.9 * self.eps if self.bug == "privacy" else super().epsilon_ldp()


class _Unparsable(_Broken):
    spec_name = "unparsable-krr"

    def params(self):
        return {"k": self.k, "eps": self.eps, "bug": self.bug, "extra": 1}


@pytest.mark.parametrize("bug,check", [("sampler", "samples-vs-channel"), ("clips", "bad-inputs"),
                                       ("dtype", "shapes"), ("block", "likelihood-block"),
                                       ("privacy", "privacy"),
                                       ("sampler-unenumerable", "samples-vs-likelihood")])
def test_check_names_the_failing_check(monkeypatch, bug, check):
    from localpriv.mechanisms import base
    monkeypatch.setitem(base._REGISTRY, "broken-krr", _Broken)
    with pytest.raises(ConformanceError, match=f"check '{check}' failed") as info:
        check_mechanism(_Broken(4, 1.0, bug), rng=np.random.default_rng(20), eps_ldp=1.0)
    assert info.value.check == check and isinstance(info.value, AssertionError)
    assert "broken-krr(k=4,eps=1.0,bug=" in str(info.value)
    check_mechanism(_Broken(4, 1.0), rng=np.random.default_rng(20), eps_ldp=1.0, tight=True)  # the sound one


def test_check_refuses_spec_that_does_not_round_trip(monkeypatch):
    from localpriv.mechanisms import base
    monkeypatch.setitem(base._REGISTRY, "unparsable-krr", _Unparsable)
    with pytest.raises(ConformanceError, match="check 'spec' failed"):
        check_mechanism(_Unparsable(4, 1.0), rng=np.random.default_rng(20))
    with pytest.raises(ConformanceError, match="check 'privacy' failed.*promised"):
        check_mechanism(KRR(4, 1.0), rng=np.random.default_rng(20), eps_ldp=0.9)
    assert CHECKS[0] == "spec"


class _BrokenPM(Piecewise):
    """Piecewise whose client draws at 1.5 eps while its likelihood says eps (real-valued reports:
    only the likelihood-ratio check can see it)."""

    spec_name = "broken-pm"

    def perturb(self, t, rng):
        return Piecewise(self.k, 1.5 * self.eps).perturb(t, rng)


def test_likelihood_check_catches_a_real_valued_sampler_at_the_wrong_eps(monkeypatch):
    from localpriv.mechanisms import base
    monkeypatch.setitem(base._REGISTRY, "broken-pm", _BrokenPM)
    with pytest.raises(ConformanceError, match="check 'samples-vs-likelihood' failed"):
        check_mechanism(_BrokenPM(4, 1.0), rng=np.random.default_rng(20), eps_ldp=1.0)
