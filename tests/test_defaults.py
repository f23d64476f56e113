"""Certified, accelerated estimates by default; progress of long ones.

Nothing here asserts what round-off can move: no iteration counts at a stopping boundary, no last
bits. Guarantees are checked through the certificate itself (``gap``), with tolerances derived in
the comments; seeds are fixed.
"""
import io
import math
import re

import numpy as np
import pytest
from _roundoff import U, em_step_rtol
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from localpriv.analysis.likely import estimate_unbounded_integers, ibu_on_subset
from localpriv.data.freewill import simulate_counts
from localpriv.data.observations import Observations
from localpriv.estimators.combination import gibu, ibu_m
from localpriv.estimators.em import DEFAULTS, STOPPING_RULES, Penalty, em, gap_bound, log_likelihood
from localpriv.estimators.ibu import ibu
from localpriv.estimators.oracles import ibu_exact, ibu_support, support_counts, support_mle
from localpriv.inference import estimate
from localpriv.likelihood.structured import ScaledIdentityBlock
from localpriv.mechanisms import parse
from localpriv.mechanisms.geometric import two_sided_geometric
from localpriv.mechanisms.krr import KRR, krr_mle
from localpriv.utils.progress import EMProgress
from localpriv.utils.validation import LocalPrivError

DELTA = DEFAULTS["delta"]


def _krr_obs(k, eps, n, seed):
    rng = np.random.default_rng(seed)
    m = KRR(k, eps)
    x = np.minimum(rng.geometric(min(0.5, 3.0 / k), size=n) - 1, k - 1)
    counts = np.bincount(m.sample(x, rng), minlength=k)
    return m, counts, Observations.from_counts(m, counts)


def _gap_slack(blocks, theta):
    """Round-off of one evaluation of the certificate ``max_x g_x - theta . g`` (per report).

    ``g_x`` is a sum over ``m`` distinct reports of positive terms, each from ``p_j = theta @ G_j``
    (``k`` terms): ``|dg_x| <= (m + k + 2) u g_x``; ``theta . g`` adds ``k`` terms. Both are ~1, so
    the certificate is exact to ``2 (m + 2k + 4) u`` = ``em_step_rtol(k, m)`` (tests/_roundoff).
    """
    m = sum(b.counts.size for b in blocks)
    return em_step_rtol(theta.size, m)


# ---- item 1: the defaults are the certified, accelerated maximum ----------------------------------
def test_defaults_are_certified_and_accelerated():
    assert DEFAULTS == {"accelerate": "newton", "stop": "gap", "delta": 1e-9, "max_iter": 100_000}


def test_issue_example_krr_reaches_the_closed_form_maximum():
    """k-RR, k=100, eps=1, n=195,368 (the issue's example): converged=True now means within 1e-9
    per report of the maximum, and the estimate is at the closed-form MLE."""
    k, eps, n = 100, 1.0, 195_368
    m, counts, obs = _krr_obs(k, eps, n, 17)
    est = ibu(obs)
    blocks = obs.likelihood_blocks()
    star = krr_mle(counts, eps)
    assert est.converged and est.settings["acceleration"] == "newton"
    assert est.settings["stopping"].startswith("max_x g_x - 1 < delta")
    gap = est.settings["gap_reached"]
    assert gap < DELTA and est.extra["gap"] == gap
    # the certificate holds: L(star) - L(est) <= n gap, up to the rounding of the two L's
    # (each a sum of <= k terms c log p: <= (k + 2) u |L|)
    L_star = log_likelihood(blocks, star)
    assert L_star - est.loglik <= n * gap + 2 * (k + 2) * U * abs(L_star)
    # and it says where theta is: k-RR's L = sum_z c_z log(b + (a - b) theta_z) is separable with
    # curvature (a - b)^2 c_z / p_z^2 >= (a - b)^2 c_z / a^2 in coordinate z, so (KKT at star)
    # L(star) - L(theta) >= sum_z (a - b)^2 c_z (theta_z - star_z)^2 / (2 a^2): each coordinate is
    # within sqrt(2 n gap a^2 / ((a - b)^2 c_z)) of the maximum
    a, b = m.p_keep, m.p_other
    c = np.maximum(counts, 1)
    bound = np.sqrt(2 * (n * gap + 2 * (k + 2) * U * abs(L_star)) * a ** 2 / ((a - b) ** 2 * c))
    assert np.all(np.abs(est.distribution - star) <= bound + 1e-12)


@settings(max_examples=25, deadline=None)
@given(k=st.integers(2, 40), eps=st.floats(0.3, 4.0), seed=st.integers(0, 10**6),
       start=st.integers(0, 10**6))
def test_certificate_bounds_the_distance_to_the_maximum(k, eps, seed, start):
    """Lindsay's bound L(theta*) - L(theta) <= n (max_x g_x - theta . g) at ANY point of the
    simplex (interior or not), against the closed-form k-RR maximum."""
    m, counts, obs = _krr_obs(k, eps, 3000, seed)
    blocks = obs.likelihood_blocks()
    theta = np.random.default_rng(start).dirichlet(np.ones(k) * 0.5)
    theta = np.maximum(theta, 1e-300)
    theta /= theta.sum()
    star = krr_mle(counts, eps)
    n = counts.sum()
    gap = gap_bound(blocks, theta)
    L_star, L = log_likelihood(blocks, star), log_likelihood(blocks, theta)
    assert gap >= -_gap_slack(blocks, theta)
    assert L_star - L <= n * (gap + _gap_slack(blocks, theta)) + 2 * (k + 2) * U * (abs(L) + abs(L_star))


@pytest.mark.parametrize("k,eps,seed", [(30, 0.5, 1), (100, 1.0, 2), (300, 2.0, 3)])
def test_gap_at_the_closed_form_maximum_is_round_off(k, eps, seed):
    """At the maximum the certificate is 0 up to its rounding (the default delta is far above it)."""
    _, counts, obs = _krr_obs(k, eps, 50_000, seed)
    blocks = obs.likelihood_blocks()
    star = krr_mle(counts, eps)
    # the closed form itself is rounded (~k u per coordinate), which moves g by as little again
    assert abs(gap_bound(blocks, star)) <= 2 * _gap_slack(blocks, star)
    assert 2 * _gap_slack(blocks, star) < 1e-3 * DELTA


def test_plain_em_with_the_gap_rule_is_certified_at_the_boundary():
    """Plain EM stopped by the gap rule: the KKT part (g_x <= 1 on cells heading to 0) is in the
    bound, so a stop certifies the boundary maximum too."""
    m, counts, obs = _krr_obs(20, 0.8, 4000, 5)
    star = krr_mle(counts, 0.8)
    assert (star == 0).any()
    est = ibu(obs, accelerate="none", delta=1e-6, max_iter=200_000)
    assert est.converged and est.settings["acceleration"] == "none"
    blocks = obs.likelihood_blocks()
    L_star = log_likelihood(blocks, star)
    assert 0 <= est.settings["gap_reached"] < 1e-6
    assert L_star - est.loglik <= counts.sum() * 1e-6 + 4 * 22 * U * abs(L_star)


def test_every_ibu_variant_shares_the_defaults(rng):
    m = parse("oue(k=12,eps=1.0)")
    x = np.minimum(rng.geometric(0.2, 3000) - 1, 11)
    obs = Observations.from_reports(m, m.sample(x, rng))
    ests = {"ibu": ibu(obs), "ibu-exact": ibu_exact(obs), "ibu-support": ibu_support(obs)}
    k = 8
    mix = simulate_counts(np.full(k, 1 / k), [KRR(k, 1.0), KRR(k, 2.0)], [800, 700], rng)
    ests["gibu"] = gibu(mix)
    ests["ibu-m"] = ibu_m(mix)
    ests["ibu-r"] = estimate(mix, "ibu-r")
    for name, est in ests.items():
        assert est.converged, name
        if name == "ibu-r":  # the settings of each block's ibu are passed through
            continue
        assert est.settings["stopping"].startswith("max_x g_x - 1"), name
        assert est.settings["acceleration"] == "newton", name
        assert est.settings["gap_reached"] < DELTA, name
    # recomputed independently: the exact-likelihood estimates are certified on the reports' L
    for name in ("ibu", "ibu-exact"):
        blocks = obs.likelihood_blocks()
        th = ests[name].distribution
        assert gap_bound(blocks, th) < DELTA + _gap_slack(blocks, th)
    # ibu-support: at seed 002's closed-form maximum of the support-count likelihood
    C = support_counts(obs.blocks[0])
    star = support_mle(C, m.p_star, m.q_star)
    blk = [ScaledIdentityBlock(12, m.p_star, m.q_star, np.arange(12), C)]
    gap = ests["ibu-support"].settings["gap_reached"]
    L_star = log_likelihood(blk, star)
    assert L_star - ests["ibu-support"].extra["support_loglik"] <= C.sum() * gap + 2 * 14 * U * abs(L_star)


def test_ibu_likely_shares_the_defaults():
    rng = np.random.default_rng(9)
    values = np.r_[rng.normal(45, 8, 2000).round(), rng.normal(90, 3, 500).round()].astype(np.int64)
    reports = values + two_sided_geometric(0.3, values.size, rng)
    est = estimate_unbounded_integers(reports, 0.3)
    assert est.estimator == "ibu-likely" and est.converged
    assert est.settings["stopping"].startswith("max_x g_x - 1") and est.settings["gap_reached"] < DELTA
    sub = ibu_on_subset(est.observations, np.arange(est.observations.k))
    assert sub.converged and sub.settings["gap_reached"] < DELTA


@pytest.mark.parametrize("stop", ["gap", "max_abs", "loglik"])
def test_ibu_support_accepts_every_stopping_rule(stop):
    m = parse("oue(k=50,eps=0.5)")
    rng = np.random.default_rng(4)
    x = np.minimum(rng.geometric(0.05, size=20_000) - 1, 49)
    obs = Observations.from_reports(m, m.sample(x, rng))
    est = ibu_support(obs, stop=stop, delta=1e-10 if stop != "loglik" else 1e-6, max_iter=100_000)
    assert est.converged and est.settings["stopping"] == STOPPING_RULES[stop]
    star = support_mle(support_counts(obs.blocks[0]), m.p_star, m.q_star)
    # the Newton finish lands on the certified maximum whatever rule stops the run afterwards
    # (its KKT tolerance is 1e-9 in the multipliers f = g / n; with curvature >= (p-q)^2 C_v / p^2
    # per coordinate, as for k-RR, that is far below 1e-6 in theta here)
    assert np.abs(est.distribution - star).max() < 1e-6


def test_cap_hit_is_not_converged(rng):
    _, _, obs = _krr_obs(50, 0.5, 5000, 9)
    est = ibu(obs, max_iter=3)
    assert est.converged is False and est.iterations <= 3
    assert "NOT converged" in repr(est)
    assert est.settings["gap_reached"] > DELTA  # what was certified, for the user to see


def test_unknown_stop_is_one_line_error():
    _, _, obs = _krr_obs(5, 1.0, 100, 0)
    with pytest.raises(LocalPrivError, match=r"unknown stopping rule 'often'; choose one of gap, loglik, max_abs"):
        estimate(obs, "ibu", stop="often")


# ---- penalties (the regularized estimators' hook) ------------------------------------------------
class _Dirichlet(Penalty):
    """MAP under a Dirichlet(a + 1) prior: M-step (theta grad + a) / (n + sum a); concave for a >= 0."""

    def __init__(self, a, with_gradient=True):
        self.a = np.asarray(a, dtype=float)
        self.with_gradient = with_gradient

    def mstep(self, theta, grad, n):
        return (theta * grad + self.a) / (n + self.a.sum())

    def value(self, theta):
        return float(self.a @ np.log(theta))

    def gradient(self, theta):
        return self.a / theta if self.with_gradient else None


def test_gap_rule_with_a_concave_penalty_certifies_the_map():
    m, counts, obs = _krr_obs(10, 1.0, 2000, 3)
    blocks = obs.likelihood_blocks()
    pen = _Dirichlet(np.full(10, 2.0))
    res = em(blocks, 10, penalty=pen, delta=1e-10)
    assert res.converged and res.stop == "gap" and res.scheme == "squarem" and res.gap < 1e-10
    # the MAP is the fixed point of its M-step: another step moves nothing beyond the certificate's reach
    grad = sum(b.backward(b.counts / b.forward(res.theta)) for b in blocks)
    again = pen.mstep(res.theta, grad, counts.sum())
    assert np.abs(again - res.theta).max() < 1e-6
    # without a gradient there is no certificate: the engine says which rule it applied
    res2 = em(blocks, 10, penalty=_Dirichlet(np.full(10, 2.0), with_gradient=False), delta=1e-10)
    assert res2.stop == "max_abs" and math.isnan(res2.gap)


# ---- item 5: progress ---------------------------------------------------------------------------
class _Clock:
    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


LINE = re.compile(r"^ibu: iteration [\d,]+( \((none|squarem|newton|newton finish)\))?, "
                  r"(gap \S+ per report \(target 1e-09\)|\|dL\| \S+ \(target \S+\), gap \S+ per report), "
                  r"(\d+ s|\d+ min \d\d s|\d+ h \d\d min) elapsed$")


def test_status_line_every_ten_seconds_on_a_non_terminal_stream():
    out = io.StringIO()
    clock = _Clock(0.5)  # every call of the clock: half a second later
    bar = EMProgress("ibu", stream=out, clock=clock, tty=False)
    bar.begin(n=1000.0, k=10, delta=1e-9, max_iter=100_000, stop="gap", scheme="newton")
    theta = np.full(10, 0.1)
    for t in range(1, 101):  # 50 s of fake time
        bar(t, theta, -1.0, gap=1.0 / t, phase="squarem")
    lines = out.getvalue().splitlines()
    assert 4 <= len(lines) <= 6  # one about every 10 s
    assert all(LINE.match(line) for line in lines), lines
    # the first line comes one status interval into the fake clock (0.5 per call), not the
    # machine's: the field is compared with the fake clock's reading, a format check, no timing
    from localpriv.utils.progress import INTERVAL
    assert LINE.match(lines[0]).group(4) == f"{int(INTERVAL)} s"
    assert "(squarem)" not in lines[0]  # the scheme is newton

    class Res:
        iterations, converged, gap, scheme = 100, True, 1e-12, "newton"
    bar.finish(Res())
    last = out.getvalue().splitlines()[-1]
    assert re.match(r"^ibu: done, 100 iterations \(newton\), gap 1e-12 per report, converged, \d+ s$", last)


def test_short_estimates_print_nothing():
    out = io.StringIO()
    _, _, obs = _krr_obs(20, 1.0, 2000, 1)
    est = ibu(obs, progress=EMProgress("ibu", stream=out, tty=False))
    assert est.converged and out.getvalue() == ""


def test_progress_through_the_engine_with_a_slow_clock():
    """A plain run (many iterations) with a clock that advances 1 s per call: status lines with the
    rule's own change and the gap; the user's callback is still called."""
    out = io.StringIO()
    seen = []
    _, _, obs = _krr_obs(30, 0.5, 3000, 2)
    bar = EMProgress("ibu", stream=out, clock=_Clock(1.0), tty=False)
    est = ibu(obs, accelerate="none", stop="loglik", delta=1e-12, max_iter=60, progress=bar,
              callback=lambda t, th, L: seen.append(t))
    assert seen == list(range(1, est.iterations + 1))
    lines = out.getvalue().splitlines()
    assert len(lines) >= 5
    assert all(LINE.match(line) for line in lines[:-1]), lines
    assert lines[-1].startswith("ibu: done, 60 iterations (none)") and "NOT converged" in lines[-1]


def test_terminal_display_starts_after_the_delay():
    from rich.console import Console
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, width=100)
    bar = EMProgress("ibu", console=con, clock=_Clock(0.3))
    bar.begin(n=100.0, k=5, delta=1e-9, max_iter=1000, stop="gap", scheme="squarem")
    bar(1, np.full(5, 0.2), -1.0, gap=1e-3, phase="squarem")  # 0.3 s: nothing yet
    assert buf.getvalue() == ""
    for t in range(2, 20):
        bar(t, np.full(5, 0.2), -1.0, gap=1e-3 / t, phase="squarem")
    bar.finish()
    assert "ibu" in buf.getvalue() and "iteration" in buf.getvalue()


def test_library_is_quiet_by_default(capsys):
    _, _, obs = _krr_obs(20, 1.0, 2000, 1)
    ibu(obs)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


# ---- the command line ---------------------------------------------------------------------------
def _reports(tmp_path, spec="krr(eps=1.0)", n=5000):
    import pandas as pd

    from localpriv.cli.main import app
    rng = np.random.default_rng(3)
    pd.DataFrame({"v": np.minimum(rng.geometric(0.1, n) - 1, 29)}).to_csv(tmp_path / "v.csv", index=False)
    r = CliRunner().invoke(app, ["perturb", str(tmp_path / "v.csv"), "-o", str(tmp_path / "r.parquet"),
                                 "-m", spec, "-d", "0..29", "--seed", "2"])
    assert r.exit_code == 0, r.output
    return app, tmp_path / "r.parquet"


def test_cli_defaults_follow_the_library(tmp_path):
    import json
    app, rep = _reports(tmp_path)
    out = tmp_path / "e.json"
    r = CliRunner().invoke(app, ["estimate", str(rep), "-d", "0..29", "-e", "ibu", "-o", str(out)])
    assert r.exit_code == 0, r.output
    s = json.loads(out.read_text())
    assert s["converged"] is True and s["settings"]["delta"] == 1e-9 and s["settings"]["max_iter"] == 100_000
    assert s["settings"]["acceleration"] == "newton" and s["settings"]["stopping"].startswith("max_x g_x")
    assert "per report of the maximum log-likelihood" in r.output
    r = CliRunner().invoke(app, ["estimate", str(rep), "-d", "0..29", "-e", "ibu", "--stop", "gap", "--plain",
                                 "--delta", "1e-6", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["settings"]["acceleration"] == "none"


@pytest.mark.parametrize("flags,todo", [([], "raise --max-iter"), (["--plain"], "drop --plain")])
def test_cli_warns_once_at_the_cap_and_says_what_to_do(tmp_path, flags, todo):
    app, rep = _reports(tmp_path)
    r = CliRunner().invoke(app, ["estimate", str(rep), "-d", "0..29", "-e", "ibu", "--max-iter", "3", *flags])
    assert r.exit_code == 0, r.output
    warnings = [line for line in r.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "NOT converged" in warnings[0] and todo in warnings[0]


def test_cli_default_estimator_is_auto_and_strength_goes_with_ems(tmp_path):
    import json

    import pandas as pd
    app, rep = _reports(tmp_path)
    out = tmp_path / "e.json"
    r = CliRunner().invoke(app, ["estimate", str(rep), "-d", "0..29", "-o", str(out)])
    assert r.exit_code == 0, r.output
    s = json.loads(out.read_text())
    assert s["estimator"] == "auto" and s["settings"]["choice"] and s["settings"]["rule"]
    # --strength pins EMS's bandwidth: the same estimate as the selection's choice
    r = CliRunner().invoke(app, ["estimate", str(rep), "-d", "0..29", "-e", "ems", "-o", str(out)])
    assert r.exit_code == 0, r.output
    h = json.loads(out.read_text())["settings"]["strength"]
    first = json.loads(out.read_text())["distribution"]
    r = CliRunner().invoke(app, ["estimate", str(rep), "-d", "0..29", "-e", "ems", "--strength", repr(h),
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    pinned = json.loads(out.read_text())
    assert pinned["settings"]["strength_selection"] == "given"
    np.testing.assert_allclose(pinned["distribution"], first, atol=1e-9)
    # --strength is refused where it means nothing (the default included), in one line
    for args in (["-e", "ibu"], []):
        r = CliRunner().invoke(app, ["estimate", str(rep), "-d", "0..29", *args, "--strength", "1"])
        assert r.exit_code != 0 and "--strength applies to ems/dirichlet" in r.output
    # a categorical domain: auto too
    pd.DataFrame({"v": list("abcab") * 200}).to_csv(tmp_path / "c.csv", index=False)
    r = CliRunner().invoke(app, ["perturb", str(tmp_path / "c.csv"), "-o", str(tmp_path / "c.parquet"),
                                 "-m", "krr(eps=2.0)", "-d", "a,b,c", "--seed", "1"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["estimate", str(tmp_path / "c.parquet"), "-d", "a,b,c", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["estimator"] == "auto"


def test_cli_estimate_help_is_true():
    from localpriv.cli.main import app
    r = CliRunner().invoke(app, ["estimate", "--help"])
    text = " ".join(r.output.replace("│", " ").split())
    for needle in ("ibu's is gap", "--accelerate", "--plain", "loglik", "max_abs", "100000", "1e-09"):
        assert needle in text, needle


# ---- reproductions pin their settings ------------------------------------------------------------
def test_demo_pins_plain_em_and_keeps_its_numbers(tmp_path):
    from reproductions import run_experiment
    rec = run_experiment("demo", tmp_path, seed=0)
    d = rec["results"]["details"]["ibu"]
    assert d["settings"]["acceleration"] == "none" and d["settings"]["stopping"] == "|L(t)-L(t-1)| < delta"
    assert d["settings"]["delta"] == 1e-6 and d["settings"]["max_iter"] == 10_000
    # `make demo` printed 1.9187 years under plain capped EM; where round-off may move the stop (one
    # iteration: |dL| ~ 1e-6 there, a change of theta far below 1e-4 years of EMD) it cannot move this
    assert rec["results"]["emd"]["ibu"] == pytest.approx(1.9187, abs=1e-4)


def test_library_default_estimator_is_auto_on_every_domain():
    import localpriv
    from localpriv.data.observations import ObservationBlock, Observations
    from localpriv.domains import CategoricalDomain, IntegerDomain
    rng = np.random.default_rng(5)
    for dom, want in ((IntegerDomain(0, 9), "auto"), (CategoricalDomain(list("abcdefghij")), "auto")):
        mech = localpriv.parse("krr(eps=2.0)", dom)
        z = mech.sample(rng.integers(0, 10, 3000), rng)
        u, c = np.unique(z, return_counts=True)
        obs = Observations([ObservationBlock(mech, u, c)], dom)
        assert localpriv.estimate(obs).estimator == want
        assert localpriv.estimators.default_estimator(dom) == want


def test_regularized_intervals_are_anchored_on_the_mle(tmp_path):
    """The defaults' intervals are the MLE's widened to contain the regularized estimate: they
    contain both, per cell and for functionals (a bootstrap around EMS under-covered)."""
    import localpriv
    from localpriv.data.observations import ObservationBlock, Observations
    from localpriv.domains import IntegerDomain
    dom = IntegerDomain(0, 29)
    rng = np.random.default_rng(11)
    mech = localpriv.parse("geometric(eps=0.2,lo=0,hi=29)", dom)
    z = mech.sample(np.minimum(rng.poisson(9, 4000), 29), rng)
    u, c = np.unique(z, return_counts=True)
    obs = Observations([ObservationBlock(mech, u, c)], dom)
    for name in ("ems", "dirichlet", "auto"):
        est = localpriv.estimate(obs, name)
        mle = localpriv.estimate(obs, "ibu")
        unc = est.uncertainty()
        assert unc.method == "anchored"
        lo, hi = est.ci(0.9)
        mlo, mhi = mle.ci(0.9)
        theta = est.distribution
        assert np.all(lo <= np.minimum(mlo, theta) + 1e-12) and np.all(hi >= np.maximum(mhi, theta) - 1e-12)
        m, mm = est.mean(0.9), mle.mean(0.9)
        assert m.value == pytest.approx(float(np.arange(30) @ theta))
        assert m.lower <= min(mm.lower, m.value) + 1e-9 and m.upper >= max(mm.upper, m.value) - 1e-9
        assert m.method.startswith("anchored on the MLE")
        q = est.quantile(0.5, 0.9)
        assert q.lower <= q.value <= q.upper and q.method.startswith("anchored on the MLE")
        assert np.allclose(est.std_error(), mle.std_error(), rtol=1e-6)


def test_cli_prints_anchored_intervals_without_a_warning(tmp_path):
    app, rep = _reports(tmp_path)
    for name in ("dirichlet", "ems", "auto", "ibu"):
        r = CliRunner().invoke(app, ["estimate", str(rep), "-d", "0..29", "-e", name, "--ci", "0.9", "--stat", "mean"])
        assert r.exit_code == 0, r.output
        assert "under-cover" not in r.output and "warning" not in r.output
        assert ("anchored on the MLE" in r.output) == (name != "ibu")
