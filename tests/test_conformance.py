"""The conformance suite: every named check on every example of every registered mechanism.

The examples are the ones each mechanism class declares (``examples``, read by
:func:`localpriv.testing.mechanisms.mechanism_examples`); a registered mechanism without one fails
``test_every_registered_mechanism_declares_examples``. Test ids name the instance and the
property, e.g. ``krr(k=4,eps=1.0)-check_channel_rows_sum_to_one``.
"""
import ast
import math

import numpy as np
import pytest

from localpriv.likelihood.blocks import DenseBlock
from localpriv.mechanisms import KRR, parse, registered
from localpriv.mechanisms.piecewise import Piecewise
from localpriv.testing import mechanisms as conformance
from localpriv.testing.mechanisms import (
    ALL_CHECKS,
    CHECKS,
    ConformanceError,
    check_mechanism,
    mechanism_checks,
    mechanism_examples,
)
from localpriv.utils.validation import check_rng

SEED = 20


def _cases():
    out = []
    for ex in mechanism_examples():
        mech = ex.build()
        for name, check in mechanism_checks(mech, SEED, domain=ex.domain, **ex.promise):
            out.append(pytest.param(check, id=f"{ex.spec}-{name}"))
    return out


@pytest.mark.parametrize("check", _cases())
def test_conformance(check):
    check()


def test_every_registered_mechanism_declares_examples():
    missing = sorted(name for name in registered() if not mechanism_examples(name))
    assert not missing, f"registered mechanisms without examples (declare `examples` on the class): {missing}"


def test_examples_build_and_are_distinct():
    specs = [ex.spec for ex in mechanism_examples()]
    assert len(specs) == len(set(specs))
    for ex in mechanism_examples():
        assert str(ex.build()) == ex.spec  # the declared spec is the canonical one (test ids name it)


def test_every_check_runs_somewhere():
    """No check is gated away from every example (each property is tested on some mechanism)."""
    ran = set()
    for ex in mechanism_examples():
        ran |= {name for name, _ in mechanism_checks(ex.build(), SEED, domain=ex.domain, **ex.promise)}
    assert ran == set(ALL_CHECKS)


# ---- the suite catches broken mechanisms (each failure names its check) ----------------------
class _Broken(KRR):
    """k-RR with one defect chosen by ``bug``."""

    spec_name = "broken-krr"

    def __init__(self, k: int, eps: float, bug: str = "none"):
        super().__init__(k, eps)
        self.bug = bug

    def params(self):
        return {"k": self.k, "eps": self.eps, "bug": self.bug}

    def sample(self, x, rng):
        if self.bug in ("sampler", "sampler-unenumerable"):  # draws at a larger eps than its channel says
            return KRR(self.k, self.eps * 1.3).sample(x, rng)
        if self.bug == "biased":  # one input's reports lean towards output 0
            z = super().sample(x, rng)
            x = np.asarray(x)
            flip = (x == 1) & (rng.random(z.size) < 0.05)
            return np.where(flip, 0, z)
        if self.bug == "clips":  # clips instead of refusing indices outside the domain
            x = np.clip(np.asarray(x, dtype=np.int64), 0, self.k - 1)
        if self.bug == "dtype":
            return super().sample(x, rng).astype(np.int32)
        if self.bug == "unseeded":  # ignores the generator it is given
            return super().sample(x, np.random.default_rng())
        return super().sample(x, rng)

    @property
    def n_outputs(self):
        return None if self.bug == "sampler-unenumerable" else self.k

    def channel(self):
        M = super().channel()
        if self.bug == "rows":  # rows sum to 1.05
            M = M.copy()
            M[:, 0] += 0.05
        return M

    def likelihood(self, reports):
        if self.bug in ("sampler-unenumerable", "rows"):
            z = np.asarray(reports, dtype=np.int64)
            G = np.full((self.k, z.size), self.p_other)
            G[z, np.arange(z.size)] = self.p_keep
            return G
        return super().likelihood(reports)

    def likelihood_block(self, reports, counts):
        if self.bug == "block":
            G = self.likelihood(reports).copy()
            G[0, 0] *= 1.01
            return DenseBlock(G, counts)
        if self.bug in ("sampler-unenumerable", "rows"):
            return DenseBlock(self.likelihood(reports), counts)
        return super().likelihood_block(reports, counts)

    def epsilon_ldp(self):
        return 0.9 * self.eps if self.bug == "privacy" else super().epsilon_ldp()


class _Unparsable(_Broken):
    spec_name = "unparsable-krr"

    def params(self):
        return {"k": self.k, "eps": self.eps, "bug": self.bug, "extra": 1}


class _BrokenPM(Piecewise):
    """Piecewise whose client chooses the window with the probability of 1.5 eps while its
    likelihood says eps (the same grid: only the likelihood-ratio check can see it)."""

    spec_name = "broken-pm"

    def draw_index(self, starts, rng, threshold=None):
        e, W, N = math.exp(1.5 * self.eps), self.width, self.n_points
        return super().draw_index(starts, rng, round(e * W / (e * W + N - W) * 2 ** 64))


class _FloatPM(Piecewise):
    """The former float-computed Piecewise client, ``l(t) + (C - 1) U`` in float64, read back
    onto the grid by the likelihood: its law is right to ~1e-16, its low bits are not."""

    spec_name = "float-pm"

    def sample(self, x, rng):
        x = self._check_inputs(x)
        rng = check_rng(rng)
        t = (2.0 * x + 1.0) / self.k - 1.0
        C = self.C
        left = 0.5 * (C + 1.0) * t - 0.5 * (C - 1.0)
        keep = rng.random(t.size) < math.exp(self.eps / 2) / (math.exp(self.eps / 2) + 1)
        inner = left + (C - 1.0) * rng.random(t.size)
        w = (C + 1.0) * rng.random(t.size)
        outer = np.where(w < left + C, -C + w, left + C - 1.0 + (w - left - C))
        return np.where(keep, inner, outer)

    def output_index(self, reports):
        return np.asarray(reports, dtype=np.float64).reshape(-1)


def _parse_broken(real_parse):
    """``parse`` that also reads the specs of the broken classes (kept out of the registry, which
    every other suite iterates over)."""
    classes = {cls.spec_name: cls for cls in (_Broken, _Unparsable, _BrokenPM, _FloatPM)}

    def parse(spec, domain=None):
        name, _, body = str(spec).partition("(")
        if name not in classes:
            return real_parse(spec, domain)
        params = {}
        for part in body.rstrip(")").split(","):
            key, _, value = part.partition("=")
            try:
                params[key] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                params[key] = value
        return classes[name].from_params(params, domain)
    return parse


@pytest.fixture
def broken_registered(monkeypatch):
    """The spec round trip of the conformance checks reads the broken classes' specs back."""
    monkeypatch.setattr(conformance, "parse", _parse_broken(conformance.parse))


def _failures(mech, **promise):
    """``{check name: group}`` of the checks ``mech`` fails."""
    out = {}
    for name, check in mechanism_checks(mech, SEED, **promise):
        try:
            check()
        except ConformanceError as exc:
            assert exc.name == name and isinstance(exc, AssertionError)
            assert str(mech) in str(exc) and name in str(exc)
            out[name] = exc.check
    return out


@pytest.mark.parametrize("bug,expected", [
    ("biased", {"check_sample_matches_channel": "samples-vs-channel",
                "check_sample_matches_likelihood": "samples-vs-likelihood"}),
    # (the float-safety check counts each released index under the extreme inputs: a sampler off
    # its stated law, or a level claimed below the true one, splits them beyond the level)
    ("sampler", {"check_sample_matches_channel": "samples-vs-channel",
                 "check_sample_matches_likelihood": "samples-vs-likelihood",
                 "check_released_bits_carry_no_input": "privacy"}),
    ("sampler-unenumerable", {"check_sample_matches_likelihood": "samples-vs-likelihood",
                              "check_released_bits_carry_no_input": "privacy"}),
    ("rows", {"check_channel_rows_sum_to_one": "channel", "check_likelihood_matches_channel": "channel",
              "check_output_probabilities_match_channel": "channel",
              "check_sample_matches_channel": "samples-vs-channel",
              "check_sample_matches_likelihood": "samples-vs-likelihood"}),
    ("privacy", {"check_epsilon_computed_from_channel": "privacy",
                 "check_sampled_likelihood_ratios_within_level": "privacy",
                 "check_released_bits_carry_no_input": "privacy",
                 "check_epsilon_ldp_within_promise": "privacy"}),
    ("clips", {"check_refuses_values_outside_the_domain_in_one_line": "bad-inputs",
               "check_refuses_non_integer_inputs": "bad-inputs"}),  # 0.5 cast to 0 on the way
    ("dtype", {"check_vectorized_sample_shape": "shapes", "check_sample_of_one_input": "shapes"}),
    ("unseeded", {"check_sample_deterministic_for_a_seed": "shapes",
                  "check_sample_accepts_lists_and_narrow_ints": "shapes",
                  "check_refuses_rng_none": "bad-inputs"}),
    ("block", {"check_likelihood_block_matches_likelihood": "likelihood-block"}),
])
def test_broken_mechanisms_fail_the_named_checks(broken_registered, bug, expected):
    assert _failures(_Broken(4, 1.0, bug), eps_ldp=1.0, tight=True) == expected


def test_the_sound_variant_passes_and_check_mechanism_names_the_first_failure(broken_registered):
    assert not _failures(_Broken(4, 1.0), eps_ldp=1.0, tight=True)
    ran = check_mechanism(_Broken(4, 1.0), rng=np.random.default_rng(SEED), eps_ldp=1.0, tight=True)
    # k-RR has no classic unbiased mean and no table estimator of a joint
    assert ran == tuple(g for g in CHECKS if g not in ("mean", "tables"))
    with pytest.raises(ConformanceError, match=r"check 'samples-vs-channel' failed \(check_sample_matches_channel\)"
                       ) as info:
        check_mechanism(_Broken(4, 1.0, "biased"), rng=np.random.default_rng(SEED), eps_ldp=1.0)
    assert info.value.check == "samples-vs-channel" and "broken-krr(k=4,eps=1.0,bug=biased)" in str(info.value)


def test_unenumerable_mechanisms_skip_the_channel_checks(broken_registered):
    names = {name for name, _ in mechanism_checks(_Broken(4, 1.0), SEED, max_channel=3)}
    assert "check_sample_matches_likelihood" in names and "check_samples_in_output_space" in names
    assert not names & {"check_channel_rows_sum_to_one", "check_sample_matches_channel",
                        "check_epsilon_computed_from_channel"}
    ran = check_mechanism(_Broken(4, 1.0), rng=SEED, max_channel=3)
    assert "channel" not in ran and "samples-vs-channel" not in ran and "privacy" in ran


def test_spec_that_does_not_round_trip_and_broken_promises(broken_registered):
    assert _failures(_Unparsable(4, 1.0)) == {"check_spec_round_trip": "spec"}
    with pytest.raises(ConformanceError, match="check 'privacy' failed.*promised"):
        check_mechanism(KRR(4, 1.0), rng=np.random.default_rng(SEED), eps_ldp=0.9)
    assert _failures(KRR(4, 1.0), eps_ldp=1.5, tight=True) == {"check_epsilon_ldp_within_promise": "privacy"}
    with pytest.raises(ConformanceError, match="check 'spec' failed.*not a localpriv Mechanism"):
        check_mechanism("krr(k=4,eps=1.0)")
    assert CHECKS[0] == "spec" and ALL_CHECKS[0] == "check_is_a_mechanism"


def test_likelihood_check_catches_a_real_valued_sampler_at_the_wrong_eps(broken_registered):
    # (its true level is 1.5: the binade frequencies of the bit-event check see it too, and its
    # mean estimator, which divides by eps = 1's factor, is biased)
    assert _failures(_BrokenPM(4, 1.0), eps_ldp=1.0) == {
        "check_sample_matches_likelihood": "samples-vs-likelihood",
        "check_released_bits_carry_no_input": "privacy",
        "check_unbiased_mean_covers_each_input": "mean"}


def test_float_safety_check_catches_a_float_computed_piecewise(broken_registered):
    """The former float client (right law to rounding, input in the low bits) fails the bit-event
    check and no other; the grid-released one passes it."""
    assert _failures(_FloatPM(5, 1.0), eps_ldp=1.0) == {"check_released_bits_carry_no_input": "privacy"}
    assert "check_released_bits_carry_no_input" not in _failures(Piecewise(5, 1.0), eps_ldp=1.0)


def test_unbiased_mean_check_runs_on_the_numeric_mechanisms_and_catches_a_biased_one():
    from localpriv.mechanisms.duchi import Duchi

    class _Inflated(Duchi):
        def unbiased(self, reports):  # 1.3 times the unbiased estimate: biased away from the centre
            return 1.3 * super().unbiased(reports)

    ran = {spec for spec in ("pm(k=5,eps=1.0)", "hm(k=5,eps=2.0)", "duchi(k=5,eps=1.0)", "sw(k=5,eps=1.0,buckets=8)")
           if "check_unbiased_mean_covers_each_input" in dict(mechanism_checks(parse(spec), SEED))}
    assert len(ran) == 4
    check = dict(mechanism_checks(_Inflated(5, 1.0), SEED))["check_unbiased_mean_covers_each_input"]
    with pytest.raises(ConformanceError, match=r"check 'mean' failed \(check_unbiased_mean_covers_each_input\).*"
                                               r"misses 0"):
        check()


def test_float_safety_check_runs_on_every_kind_of_report():
    """The check is not gated by the kind of report: index, byte and real-valued reports all run it."""
    kinds = set()
    for ex in mechanism_examples():
        mech = ex.build()
        if "check_released_bits_carry_no_input" in {name for name, _ in mechanism_checks(mech, SEED, domain=ex.domain,
                                                                                          **ex.promise)}:
            kinds.add(mech.report_kind)
    assert kinds == {"int64", "float64", "binary"}
