"""Which mechanism, at which parameters, for my data? (``localpriv advise``; see
docs/decisions/0020-advisor-meets-targets-by-computed-privacy.md).

:func:`advise` takes a domain, a privacy target -- an LDP level ``eps_ldp``, a metric level
``eps_metric`` per unit of the domain's distance (per value on an integer line, per km on a
grid), or both -- the number of users ``n`` and what the user wants to learn (``goal``), and
ranks the mechanisms that apply by their predicted error.

Candidates
----------
* every domain: k-RR, OUE, OLH and SS (the pure LDP frequency oracles, Wang et al. 2017);
* integer lines (``IntegerDomain``): the truncated geometric mechanism, the Laplace mechanism with
  unit bins clamped to the domain, and the exponential mechanism;
* planar grids (``GridDomain``): the planar geometric and planar Laplace mechanisms, and the
  exponential mechanism.

Parameters meet the target by the privacy *computed from the mechanism*, never by its nominal
parameter:

* an LDP mechanism at ``eps`` has the computed level ``eps_ldp = mech.epsilon_ldp()``; on a metric
  domain its metric level is ``eps_ldp / d_min`` (``d_min`` the smallest distance between two
  values: 1 on a line, ``cell_km`` on a grid). That is exact for these four oracles: they treat
  every pair of values alike, so every pair -- the closest included -- attains the LDP ratio
  ``e^eps_ldp`` (``P(z|x) / P(z|x') = e^eps`` for a report ``z`` whose support holds ``x`` and
  not ``x'``). The parameter is ``min(eps_ldp, eps_metric * d_min)``.
* a metric mechanism's parameter is *calibrated*: Brent's method on its logarithm until the LDP
  level computed from the channel equals the LDP target
  (:func:`localpriv.inference.simulation.calibrate`), and, for a metric target, scaled until the
  metric level computed by ``mech.epsilon_geo()`` is at most the target; the smaller of the two
  is kept. Every parameter is then rounded *down* to 4 significant digits (a readable spec whose
  levels are at most the targets, checked again after rounding: up to :data:`LEVEL_RTOL`, the
  floating-point rounding of the level's own computation), and both levels are computed from the
  final mechanism and reported.

Prediction
----------
Users are drawn i.i.d. from a ground truth ``theta`` -- the prior the caller gives (the command
line uses the data of ``--values`` when given), else :func:`default_prior` -- and the error of the
estimate to ``theta`` is predicted. The default prior is *not* uniform: the uniform distribution is
a fixed point of the smoothing estimator (EMS) and the starting point of IBU, so it predicts errors
near zero that no real data set gets (on 0..19 at LDP eps 1 and n = 2,000, EMS medians of 0.001
with single runs up to 1.5). It is a Zipf law ``theta_i ~ 1/(i+1)`` in the labels' order on
categorical domains (frequencies that decay, as in Wang et al.'s evaluation), and a bell -- a
discretized normal centred on the domain with standard deviation a sixth of its extent, per axis
on a grid -- on ordered ones. Real data are rarely so regular: give a prior when you can.

* **simulation** (the default wherever it is affordable: finite channels within
  :data:`CHANNEL_BUDGET` entries, and the metric mechanisms of a grid whose likelihood is FFT
  products on at most :data:`GRID_FFT_BUDGET` points): ``runs`` data sets of ``n`` users,
  obfuscated and estimated by the recommended estimator of the domain,
  :func:`localpriv.estimators.default_estimator` (``auto``: what ``localpriv estimate`` runs by
  default), called with the library's
  defaults. Finite channels draw the report counts directly, ``Multinomial(n, theta M)`` -- the
  exact law of ``n`` users drawn from ``theta`` and obfuscated one by one -- so a run costs the
  estimate only; OUE, OLH and SS draw every user's report, and on domains of at most 64 values the
  reports with the same likelihood column are merged (exact). The prediction is the median error
  over the runs; the interval is the smallest to the largest of the runs' errors: a further run
  falls inside it with probability ``(runs - 1) / (runs + 1)`` (67 % with the default 5 runs; the
  runs are exchangeable). A row confirmed with more runs (below) gives the quantiles of the same
  probability.
* **analytic** for the pure oracles k-RR, OUE and SS where the recommended estimator's per-user
  simulation would be too slow (:data:`SIMULATION_BUDGET`; e.g. EMS on per-user OUE reports over
  100 values takes about a minute per run at n = 20,000); OLH is then simulated per user through
  MI-P (its support counts are cheap; :data:`PER_USER_BUDGET`), and above that budget predicted by
  the model below too, which its default XXH64 hashing follows (a note says so; the legacy
  Carter-Wegman family ``hash=cw`` does not, and ``method="analytic"`` notes it).
  The estimator is then MI-P (``mi-p``: the unbiased matrix inversion on the support counts,
  projected onto the simplex, :mod:`localpriv.estimators.oracles`), whose law is known in closed
  form before projection. With ``b`` the indicator vector of a report's support ``S(z)``,
  ``p* = P(x in S | x)``, ``q* = P(v in S | x)`` (``v != x``), and the users i.i.d. from
  ``theta``, the unbiased ``f_v = (C_v / n - q*) / (p* - q*)`` (``C_v`` the support counts) has
  mean ``theta`` and covariance ``Cov(b) / (n (p* - q*)^2)`` with

  ``Var(b_v) = P_v (1 - P_v)``, ``P_v = q* + (p* - q*) theta_v``, and for ``v != w``
  ``Cov(b_v, b_w) = (theta_v + theta_w) a + (1 - theta_v - theta_w) c - P_v P_w``,

  where ``a = P(x, w in S | x)`` and ``c = P(v, w in S | x)`` (``v, w != x``) are the pair
  probabilities of the protocol: k-RR ``a = c = 0``; OUE (independent bits) ``a = p* q*``,
  ``c = q*^2``; OLH ``a = p*/g`` (a pairwise independent family: exact for ours) and ``c = 1/g^2``
  (3-wise independence, which the Carter-Wegman family ``((a x + b) mod P) mod g`` lacks: for
  values in arithmetic progression its triple collisions are far likelier, so this ``c`` and the
  covariances are off); SS with subset size ``omega``
  ``a = p* (omega - 1)/(k - 1)``, ``c = [p* (omega-1)(omega-2) + (1 - p*) omega (omega-1)] /
  ((k-1)(k-2))``. The diagonal is Wang, Blocki, Li and Jha, "Locally Differentially Private
  Protocols for Frequency Estimation", USENIX Security 2017, Eq. (1)
  (``q*(1-q*)/(n (p*-q*)^2) + theta_v (1 - p* - q*)/(n (p* - q*))``) plus the sampling variance
  ``theta_v (1 - theta_v)/n`` of users drawn from ``theta``; the off-diagonal terms are ours.
  Turned into the goal's error without a further approximation than the central limit theorem:
  ``draws`` vectors ``f ~ N(theta, Cov)`` are projected onto the simplex and scored like an
  estimate (TV and EMD are not linear in the per-cell deviations, so their expectation is not a
  function of the variances alone); the prediction is the median, the interval runs from the
  ``1/(runs+1)`` to the ``runs/(runs+1)`` quantile, so that it has the same probability
  ``(runs - 1)/(runs + 1)`` of holding one run's error as a simulated row's. The normal law holds
  when every support count is large (``n q*`` well above 1). Above 1,000 values the covariance is
  not built: the draws use its diagonal-plus-rank-3 structure (:func:`mi_normal_draws`, ``O(k)``
  per draw), and on grids the model draws ``runs`` vectors (each EMD a transport program) and is
  used for k-RR, OUE and SS where the per-user simulation through MI-P exceeds
  :data:`PER_USER_BUDGET`.

Goals (``goal``; default :func:`default_goal`: ``emd`` on ordered domains, ``tv`` on categorical
ones) and their error, for an estimate ``hat`` of ``theta``:

* ``"emd"`` -- earth mover's distance: ``sum_t |F_hat(t) - F(t)|`` on a line (domain units),
  the transport linear program in km on a grid (:func:`localpriv.domains.grid.emd_grid`);
* ``"tv"`` -- total variation ``(1/2) sum_x |hat_x - theta_x|``;
* ``"mean"`` -- ``|mean(hat) - mean(theta)|`` on a line; on a grid the distance in km between the
  two centroids;
* ``"quantiles"`` -- on a line, the mean absolute error of the 10, 25, 50, 75 and 90 % quantiles
  (the CDF interpolated linearly across each value, as
  :meth:`localpriv.inference.estimate.Estimate.quantile`);
* ``"topk"`` -- the share of the true ``top`` most frequent values missing from the estimate's
  ``top`` (values tied with the ``top``-th count as true top values).

Confirmation. The row with the smallest simulated error is, among candidates of similar accuracy,
partly the one whose few runs were luckiest: its median is biased low (the winner's curse; on Adult
education under the four oracles, by about one Monte-Carlo standard deviation). So the best
simulated row is simulated again with fresh runs, and its reported error and range come from those
only: at least two batches of ``runs``, then one more until the distribution-free 80 % confidence
interval of the median is within +-10 % of it (:func:`median_precision`) or ``3 x runs`` were drawn
(15 with the default 5; the stated stop, :data:`CONFIRM_FACTOR`). The fresh runs remove the
winner's curse; they do not make the median precise where one run's error is spread widely (EMS at
LDP eps 0.5 on Adult ages: +-15-25 % even with 20 runs), which the row's range shows. The
progress callback advances once per fresh run. If that error is above
the runner-up's, the runner-up is confirmed the same way and the lower of the two confirmed errors
wins. Analytic rows use ``draws`` normal draws, whose
median is precise, and are not rerun. The recommendation is then the row with the smallest
predicted error; its reason names the runner-up and says when the two ranges overlap (then the
order of the two is uncertain).
"""
from __future__ import annotations

import math
import time
import warnings
import zlib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import Any, cast

import numpy as np

from localpriv.analysis.shuffle import largest_local_epsilon, shuffle_epsilon
from localpriv.data.reports import value_counts
from localpriv.domains import Domain, IntegerDomain, ProductDomain, parse_domain
from localpriv.domains.grid import GridDomain, check_emd_grid, emd_grid
from localpriv.estimators import default_estimator
from localpriv.estimators.oracles import pure_parameters
from localpriv.inference import estimate
from localpriv.inference.estimate import quantile_crossing
from localpriv.inference.metrics import emd_line, total_variation
from localpriv.inference.simulation import calibrate, dense_twin, simulate_observations
from localpriv.mechanisms import parse
from localpriv.mechanisms.base import LARGE_LDP_EPS, LargeEpsilonWarning
from localpriv.mechanisms.hashing import LocalHashing
from localpriv.mechanisms.krr import KRR
from localpriv.mechanisms.subset import SS
from localpriv.mechanisms.unary import UnaryEncoding
from localpriv.utils.simplex import project_simplex
from localpriv.utils.validation import LocalPrivError, check_distribution, check_eps, check_int, check_rng

__all__ = ["advise", "Advice", "Candidate", "GOALS", "METHODS", "SIMULATION_BUDGET", "default_goal", "default_prior",
           "goal_error", "mi_covariance", "mi_normal_draws", "pair_probabilities", "values_prior", "simulate_errors"]

#: what the user wants to learn
GOALS = ("emd", "tv", "mean", "quantiles", "topk")
#: how predictions are made: ``auto`` (simulation where affordable, else analytic), ``simulation``
#: (always, whatever it costs), ``analytic`` (the pure oracles analytically, the others simulated)
METHODS = ("auto", "simulation", "analytic")
#: the quantile levels of the ``quantiles`` goal
QUANTILE_LEVELS = (0.1, 0.25, 0.5, 0.75, 0.9)
#: per-user simulation of a pure oracle through an estimator is done when (distinct likelihood
#: columns possible) x k is at most this -- about 1-2 s of CPU per run (measured on Adult ages and
#: education): ``ems`` runs plain EM iterations inside its cross-validation (OUE on 100 values at
#: n = 20,000: ~60 s per run), ``dirichlet`` certified fits inside its cross-validation (OUE on 16
#: values at n = 10^5: ~10 s per run), ``ibu`` and ``auto`` (the default) one certified fit each
SIMULATION_BUDGET = {"ems": 1e5, "dirichlet": 2e5, "default": 1e6}
#: finite channels are simulated at the count level up to this many entries (k x outputs)
CHANNEL_BUDGET = 4_000_000
#: per-user simulation of a pure oracle through mi-p (support counts only) up to n x k
PER_USER_BUDGET = 5e7
#: the metric mechanisms of a grid (planar geometric, planar Laplace, exponential) are simulated
#: above CHANNEL_BUDGET when their likelihood is FFT products on at most this many points (9 k,
#: the padded grid of the kernel folded to the grid's sides): one run of the default estimator on
#: the 2,352-cell grid (20,590 points) at n = 100,000 took 0.5-3.7 s of CPU on the shared machine
#: (docs/decisions/0084-default-on-large-grids.md)
GRID_FFT_BUDGET = 25_000
#: confirmation (module docstring): fresh runs in batches of ``runs`` until the median's 80 %
#: confidence interval is within +-CONFIRM_PRECISION of it, or CONFIRM_FACTOR x runs were drawn
#: (the stated stop: 15 runs with the default 5; it was 60, which took ~55 s of the ~80 s of CPU of
#: ``advise 0..99 --eps 1 --n 100000``, docs/decisions/0033-advisor-bounded-confirmation.md)
CONFIRM_PRECISION = 0.1
CONFIRM_FACTOR = 3
#: ... and at least this many batches: with 5 runs the order-statistic interval is the whole range,
#: which five lucky runs can make narrow (seen at LDP eps 0.5 on Adult ages, n = 10^5)
CONFIRM_MIN_BATCHES = 2
#: normal draws of the analytic model (fewer on grids, where each EMD is a linear program)
DRAWS = 400
GRID_DRAWS = 100
# GRID_DRAWS is for grids of at most 1,000 cells; above, the model draws ``runs`` vectors, like a
# simulated row (each EMD there is a transport program, about 0.7 s of CPU on the 2,352-cell grid),
# and is used where the per-user simulation exceeds PER_USER_BUDGET (k-RR, OUE and SS at
# n = 100,000 on that grid)

_NAMES = {"krr": "k-RR", "oue": "OUE", "olh": "OLH", "ss": "SS", "geometric": "geometric",
          "laplace": "Laplace", "exponential": "exponential", "planar-geometric": "planar geometric",
          "planar-laplace": "planar Laplace"}
_PURE = ("krr", "oue", "olh", "ss")
#: the oracles whose analytic model is exact up to the central limit theorem (OLH's assumes a
#: 3-wise independent hash family; ours, Carter-Wegman's linear one, is only 2-wise independent)
_ANALYTIC = ("krr", "oue", "ss")
OLH_MODEL_NOTE = ("analytic model of OLH assumes 3-wise independent hashing; the legacy Carter-Wegman family "
                  "(hash=cw) is only "
                  "2-wise independent, so covariances between values are off (variances are exact)")
#: what an OLH row above PER_USER_BUDGET adds to its note: the model, not a simulation
OLH_XXH64_NOTE = ("; per-user simulation of OLH exceeds its budget, so its analytic model is used (exact for "
                  "XXH64 hashing up to the central limit theorem)")
_LINE = ("geometric", "laplace", "exponential")
_GRID = ("planar-geometric", "planar-laplace", "exponential")
_GOAL_LABEL = {"emd": "EMD", "tv": "TV distance", "mean": "error of the mean",
               "quantiles": "mean quantile error", "topk": "share of the top values missed"}


@dataclass
class Candidate:
    """One ranked row of :class:`Advice`.

    Attributes
    ----------
    name : str
        The mechanism's family (``"k-RR"``, ``"geometric"``, ...).
    spec : str
        Its spec for :func:`localpriv.mechanisms.parse` with the domain (``--domain``).
    eps_ldp : float
        LDP level computed from the mechanism (:meth:`~localpriv.mechanisms.Mechanism.epsilon_ldp`).
    eps_metric : float or None
        Metric level per unit of distance, computed (``None`` on a domain without a metric).
    estimator : str
        The estimator the prediction is for.
    error : float
        Predicted error (median over the runs or the analytic model's draws).
    lower, upper : float
        Interval of one run's error, of probability ``(runs - 1)/(runs + 1)`` (:attr:`Advice.level`):
        the smallest and largest simulated error, or the model's quantiles.
    how : str
        ``"simulation"`` or ``"analytic"``.
    runs : int
        Simulated runs or normal draws.
    seconds : float
        Time spent on this row (calibration and prediction).
    note : str
        Why the estimator or method differs from the default, if it does.
    ranked_on : float or None
        For a row whose error was confirmed by fresh runs (:func:`advise`, "confirmation"), the
        error of the first runs, which ranked it; ``None`` otherwise.
    eps_central : float or None
        With a shuffled central target: the central level of ``Advice.shuffle`` shuffled reports at
        ``Advice.delta`` (:func:`localpriv.analysis.shuffle.shuffle_epsilon` of ``eps_ldp``).
    """

    name: str
    spec: str
    eps_ldp: float
    eps_metric: float | None
    estimator: str
    error: float
    lower: float
    upper: float
    how: str
    runs: int
    seconds: float = 0.0
    note: str = ""
    ranked_on: float | None = None
    eps_central: float | None = None


@dataclass
class Advice:
    """What :func:`advise` found: the ranked candidates, the recommendation and why.

    Attributes
    ----------
    domain : str
        The domain's spec (``"0..99"``, labels, ``grid(...)``).
    k : int
        Its number of values.
    goal : str
        The goal the errors measure; ``unit`` their unit (``"units"`` of the line, ``"km"``, or
        ``""`` for TV and top-k shares).
    n : int
        Number of users.
    eps_ldp, eps_metric : float or None
        The targets; ``metric_unit`` is what the metric one is per (``"unit"``, ``"km"``; ``None``
        on a categorical domain).
    estimator : str
        The domain's recommended estimator (:func:`localpriv.estimators.default_estimator`).
    truth : str
        The ground truth the errors were predicted for.
    rows : list of Candidate
        Sorted by predicted error, best first; ``recommended`` is ``rows[0]`` and ``reason`` says why.
    skipped : dict
        Candidates not evaluated, with the reason.
    seed : int
        The seed of the simulations; ``runs`` the runs per candidate, and :attr:`level` the
        probability of each row's interval.
    shuffle, central_eps, delta : int, float, float or None
        The shuffled central target, if given: ``shuffle`` reports, central ``(central_eps, delta)``.
    local_eps : float or None
        Then the largest local level meeting it (:func:`localpriv.analysis.shuffle.largest_local_epsilon`).
    """

    domain: str
    k: int
    goal: str
    unit: str
    n: int
    eps_ldp: float | None
    eps_metric: float | None
    metric_unit: str | None
    estimator: str
    truth: str
    rows: list[Candidate]
    recommended: Candidate
    reason: str
    skipped: dict[str, str] = field(default_factory=dict)
    seed: Any = 0
    runs: int = 5
    shuffle: int | None = None
    central_eps: float | None = None
    delta: float | None = None
    local_eps: float | None = None

    @property
    def level(self) -> float:
        """Probability that one run's error falls in a row's interval: ``(runs - 1)/(runs + 1)``."""
        return (self.runs - 1) / (self.runs + 1)

    def to_dict(self) -> dict:
        """A JSON-able dictionary (what ``localpriv advise --json`` prints)."""
        out = asdict(self)
        out["recommended"] = asdict(self.recommended)
        out["level"] = self.level
        return out

    def __str__(self) -> str:
        unit = f" ({self.unit})" if self.unit else ""
        lines = [f"{_GOAL_LABEL[self.goal]}{unit} for n={self.n:,} on {self.domain}; truth: {self.truth}"]
        for i, r in enumerate(self.rows, 1):
            metric = "" if r.eps_metric is None else f", metric eps {r.eps_metric:.4g}"
            if r.eps_central is not None:
                metric += f", central eps {r.eps_central:.4g} shuffled"
            lines.append(f"{i}. {r.spec}: {r.error:.4g} [{r.lower:.4g}, {r.upper:.4g}] (LDP eps {r.eps_ldp:.4g}"
                         f"{metric}; {r.estimator}, {r.how})")
        for name, why in self.skipped.items():
            lines.append(f"-. {name}: not evaluated ({why})")
        lines.append(f"recommended: {self.recommended.spec} -- {self.reason}")
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# errors of an estimate, per goal
# --------------------------------------------------------------------------------------------
def _kind(domain) -> str:
    if isinstance(domain, IntegerDomain):
        return "line"
    if isinstance(domain, GridDomain):
        return "grid"
    return "categorical"


def default_goal(domain) -> str:
    """The goal :func:`advise` answers unless told: ``"emd"`` (earth mover's distance) on an
    ordered domain (``LO..HI``, a grid), ``"tv"`` (total variation ``(1/2) sum_x |hat_x - theta_x|``)
    on a categorical one, where no distance between labels makes the EMD meaningful."""
    return "tv" if _kind(domain) == "categorical" else "emd"


def default_prior(domain) -> tuple[np.ndarray, str]:
    """``(theta, description)``: the ground truth :func:`advise` assumes when none is given (module
    docstring): Zipf ``theta_i ~ 1/(i+1)`` on a categorical domain; on a line ``0..k-1`` a bell
    ``theta_x ~ exp(-(x - (k-1)/2)^2 / (2 s^2))`` with ``s = k/6``; on a grid the product of such
    bells along the rows and the columns."""
    kind = _kind(domain)
    k = int(domain.size)

    def bell(m):
        x = np.arange(m, dtype=float)
        w = np.exp(-0.5 * ((x - (m - 1) / 2) / (m / 6.0)) ** 2)
        return w / w.sum()
    if kind == "line":
        return bell(k), f"a bell over the {k} values (normal, centred, sd k/6; no prior given)"
    if kind == "grid":
        t = np.outer(bell(domain.nrows), bell(domain.ncols)).ravel()
        return t / t.sum(), f"a bell over the {domain.nrows} x {domain.ncols} cells (normal, centred, sd a sixth of " \
                            "each side; no prior given)"
    z = 1.0 / np.arange(1, k + 1)
    return z / z.sum(), f"Zipf over the {k} labels in their order (theta_i ~ 1/(i+1); no prior given)"


def goal_error(goal: str, domain, theta, top: int = 10) -> Callable[[np.ndarray], float]:
    """The error function of ``goal`` against the truth ``theta`` on ``domain`` (module docstring):
    ``f(estimate) -> float``. Refuses a goal the domain cannot answer (one-line error)."""
    theta = np.asarray(theta, dtype=float)
    kind = _kind(domain)
    if goal not in GOALS:
        raise LocalPrivError(f"unknown goal {goal!r}; choose one of {', '.join(GOALS)}")
    if goal == "tv":
        return lambda est: total_variation(theta, est)
    if goal == "topk":
        k = theta.size
        K = check_int(top, "top", minimum=1)
        if k <= K:
            raise LocalPrivError(f"top={K} must be smaller than the domain's {k} values")
        threshold = np.sort(theta)[::-1][K - 1]
        true_top = theta >= threshold  # ties with the K-th value count as top values

        def topk(est):
            found = np.argsort(-np.asarray(est, dtype=float), kind="stable")[:K]
            return float(1.0 - true_top[found].sum() / K)
        return topk
    if kind == "categorical":
        raise LocalPrivError(f"goal {goal!r} needs an ordered domain (LO..HI or a grid); a categorical domain "
                             "has tv and topk")
    if goal == "emd":
        if kind == "line":
            return lambda est: emd_line(theta, est)
        check_emd_grid()  # POT (the geo extra) missing: said before any simulation
        D = domain.distance_matrix()
        return lambda est: _emd_grid_excess(theta, est, D)
    if goal == "mean":
        if kind == "line":
            x = np.arange(theta.size, dtype=float)
            m = float(x @ theta)
            return lambda est: abs(float(x @ np.asarray(est, dtype=float)) - m)
        c = domain.centres_km()
        m = c.T @ theta
        return lambda est: float(np.linalg.norm(c.T @ np.asarray(est, dtype=float) - m))
    # quantiles
    if kind != "line":
        raise LocalPrivError("goal 'quantiles' needs an integer line (LO..HI); on a grid use emd or mean")
    x = np.arange(theta.size, dtype=float)
    true_q = np.array([quantile_crossing(x, np.cumsum(theta), a) for a in QUANTILE_LEVELS])

    def quantiles(est):
        F = np.cumsum(np.asarray(est, dtype=float))
        return float(np.mean(np.abs([quantile_crossing(x, F, a) - t for a, t in zip(QUANTILE_LEVELS, true_q)])))
    return quantiles


# --------------------------------------------------------------------------------------------
# the analytic model of the pure oracles
# --------------------------------------------------------------------------------------------
def _emd_grid_excess(theta: np.ndarray, est, D: np.ndarray) -> float:
    """:func:`~localpriv.domains.grid.emd_grid` of ``theta`` and ``est`` computed on their excesses.

    With a metric ground distance the earth mover's distance depends on ``p - q`` only
    (Kantorovich-Rubinstein duality: ``EMD(p, q) = sup_{f 1-Lipschitz} sum f (p - q)``; Villani,
    "Optimal Transport: Old and New", 2009, Remark 6.5), so the mass both share, ``m = min(p, q)``,
    stays put: ``EMD(p, q) = s EMD((p - m)/s, (q - m)/s)`` with ``s = 1 - sum m``. The two excesses
    have disjoint supports, about half the cells each, and the network simplex skips zero
    weights, so the program has about a quarter of the variables (measured on the 2,352-cell grid:
    3x less CPU; docs/decisions/0038-advisor-at-interactive-speed.md). Equal up to round-off.
    """
    q = np.asarray(est, dtype=float)
    q = q / q.sum()
    shared = np.minimum(theta, q)
    p_out, q_in = theta - shared, q - shared
    s = 0.5 * (float(p_out.sum()) + float(q_in.sum()))
    if p_out.sum() <= 0 or q_in.sum() <= 0:
        return 0.0
    return emd_grid(p_out, q_in, D) * s


def pair_probabilities(mech) -> tuple[float, float, float, float]:
    """``(p*, q*, a, c)`` of a pure oracle: ``p* = P(x in S | x)``, ``q* = P(v in S | x)``,
    ``a = P(x in S, w in S | x)`` and ``c = P(v in S, w in S | x)`` for distinct ``v, w != x``
    (module docstring; ``S`` the support of one report)."""
    p, q = pure_parameters(mech)
    if isinstance(mech, KRR):
        return p, q, 0.0, 0.0
    if isinstance(mech, UnaryEncoding):
        return p, q, p * q, q * q
    if isinstance(mech, LocalHashing):
        return p, q, p / mech.g, 1.0 / mech.g ** 2
    if isinstance(mech, SS):
        k, w = mech.k, mech.omega
        a = p * (w - 1) / (k - 1)
        c = 0.0 if k < 3 else (p * (w - 1) * (w - 2) + (1 - p) * w * (w - 1)) / ((k - 1) * (k - 2))
        return p, q, a, c
    raise LocalPrivError(f"{mech}: no analytic model (not a pure frequency oracle)")


def mi_covariance(mech, theta, n: int) -> np.ndarray:
    """Covariance of the unbiased MI vector ``f = (C/n - q*)/(p* - q*)`` of ``n`` users drawn
    i.i.d. from ``theta`` (module docstring): ``Cov(b) / (n (p* - q*)^2)``."""
    theta = np.asarray(theta, dtype=float)
    p, q, a, c = pair_probabilities(mech)
    P = q + (p - q) * theta
    cov = c + (a - c) * (theta[:, None] + theta[None, :]) - np.outer(P, P)
    np.fill_diagonal(cov, P * (1.0 - P))
    return cov / (n * (p - q) ** 2)


#: largest domain whose MI covariance is factored densely (``eigh``, ``k^3``); beyond it the
#: diagonal-plus-rank-3 structure of the covariance is used (:func:`mi_normal_draws`)
DENSE_COVARIANCE_MAX = 1000


def mi_normal_draws(mech, theta, n: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` vectors ``N(0, Cov)`` with ``Cov`` = :func:`mi_covariance` in ``O(draws k)``.

    The covariance of a report's support indicator is a diagonal plus a rank-3 term (module
    docstring): ``Cov(b) = diag(d) + U S U^T`` with ``U = [1, theta, P]``,
    ``S = [[c, a - c, 0], [a - c, 0, 0], [0, 0, -1]]`` and ``d_v = P_v - c - 2 (a - c) theta_v``.
    With ``W = diag(d)^(-1/2) U = Q R`` (thin QR) and ``R S R^T = V diag(l) V^T``,
    ``Cov(b) = D^(1/2) (I + B diag(l) B^T) D^(1/2)`` with ``B = Q V`` orthonormal, whose symmetric
    square root is ``D^(1/2) (I + B diag(sqrt(1 + l) - 1) B^T)``: a draw is that times a standard
    normal vector. Exact up to round-off (``1 + l`` clipped at 0). Falls back to a dense ``eigh``
    when some ``d_v <= 0``. Memory ``O(draws k)``.
    """
    theta = np.asarray(theta, dtype=float)
    k = theta.size
    p, q, a, c = pair_probabilities(mech)
    P = q + (p - q) * theta
    d = P - c - 2.0 * (a - c) * theta
    g = rng.standard_normal((draws, k))
    scale = 1.0 / math.sqrt(n) / abs(p - q)
    if not np.all(d > 0):
        w, V = np.linalg.eigh(mi_covariance(mech, theta, n))
        return g @ (V * np.sqrt(np.clip(w, 0.0, None))).T
    sd = np.sqrt(d)
    U = np.column_stack([np.ones(k), theta, P]) / sd[:, None]
    S = np.array([[c, a - c, 0.0], [a - c, 0.0, 0.0], [0.0, 0.0, -1.0]])
    Q, R = np.linalg.qr(U)
    lam, V = np.linalg.eigh(R @ S @ R.T)
    B = Q @ V
    y = g + ((g @ B) * (np.sqrt(np.clip(1.0 + lam, 0.0, None)) - 1.0)) @ B.T
    return y * sd[None, :] * scale


def _analytic(mech, theta, n, error, draws, rng) -> np.ndarray:
    """Errors of MI-P under the normal law of the unbiased MI vector (``draws`` of them)."""
    if theta.size <= DENSE_COVARIANCE_MAX:
        cov = mi_covariance(mech, theta, n)
        w, V = np.linalg.eigh(cov)
        L = V * np.sqrt(np.clip(w, 0.0, None))
        f = theta[None, :] + rng.standard_normal((draws, theta.size)) @ L.T
    else:
        f = theta[None, :] + mi_normal_draws(mech, theta, n, draws, rng)
    return np.array([error(project_simplex(v)) for v in f])


# --------------------------------------------------------------------------------------------
# parameters that meet the target, by the computed privacy
# --------------------------------------------------------------------------------------------
def _round_down(x: float, digits: int = 4) -> float:
    """The largest number with ``digits`` significant digits that is at most ``x`` (``x > 0``)."""
    d = Decimal(repr(float(x)))
    quantum = Decimal(1).scaleb(d.adjusted() - digits + 1)
    return float(d.quantize(quantum, rounding=ROUND_FLOOR))


def _step_down(x: float, digits: int = 4) -> float:
    """The next smaller number with ``digits`` significant digits (``1.0 -> 0.9999``)."""
    d = Decimal(repr(float(x)))
    if d <= 0:
        return 0.0
    step = Decimal(1).scaleb(d.adjusted() - digits + 1)
    y = d - step
    if y.adjusted() < d.adjusted():  # crossed a power of ten: one more digit below it
        y = d - step / 10
    return _round_down(float(y), digits)


def _quiet_parse(spec, domain):
    """:func:`~localpriv.mechanisms.parse` without the parse-time warning for large levels (the
    calibration brackets parameters far above the target on purpose)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LargeEpsilonWarning)
        return parse(spec, domain)


def _levels(mech, metric: bool, d_min: float) -> tuple[float, float | None]:
    ldp = float(mech.epsilon_ldp())
    if not metric:
        return ldp, None
    if mech.spec_name in _PURE:  # every pair attains the LDP ratio (module docstring)
        return ldp, ldp / d_min
    return ldp, float(mech.epsilon_geo())


#: computed levels may exceed a target by this relative amount, the rounding of their own
#: computation (e.g. 0.10000000000000053 for geometric(eps=0.1)); never more
LEVEL_RTOL = 1e-12


def _fits(levels, eps_ldp, eps_metric) -> bool:
    ldp, geo = levels
    return ((eps_ldp is None or ldp <= eps_ldp * (1 + LEVEL_RTOL))
            and (eps_metric is None or (geo is not None and geo <= eps_metric * (1 + LEVEL_RTOL))))


def _parameter(name, fmt, domain, eps_ldp, eps_metric, metric, d_min):
    """``(spec, mech, (ldp, metric))`` with the largest 4-digit parameter whose computed levels
    meet the targets."""
    if name in _PURE:
        e = min(v for v in (eps_ldp, None if eps_metric is None else eps_metric * d_min) if v is not None)
    else:
        bounds = []
        if eps_ldp is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LargeEpsilonWarning)
                bounds.append(calibrate(fmt, domain, float(eps_ldp))[0])
        if eps_metric is not None:
            e = float(eps_metric)
            for _ in range(30):  # the computed metric level is (nearly) linear in the parameter
                geo = float(_quiet_parse(fmt.format(eps=repr(e)), domain).epsilon_geo())
                if geo <= eps_metric * (1 + LEVEL_RTOL):
                    break
                e *= eps_metric / geo * (1 - 1e-9)
            bounds.append(e)
        e = min(bounds)
    e = _round_down(e)
    for _ in range(20):
        spec = fmt.format(eps=repr(e))
        mech = _quiet_parse(spec, domain)
        levels = _levels(mech, metric, d_min)
        if _fits(levels, eps_ldp, eps_metric):
            return spec, mech, levels
        e = _step_down(e)
    raise LocalPrivError(f"could not meet the target with {fmt}")


# --------------------------------------------------------------------------------------------
# prediction
# --------------------------------------------------------------------------------------------
def _affordable(mech, n, estimator) -> bool:
    """Whether simulating ``mech`` through ``estimator`` at ``n`` users is cheap enough (module
    constants): finite channels within :data:`CHANNEL_BUDGET`; the metric mechanisms of a grid
    whose likelihood is FFT products on at most :data:`GRID_FFT_BUDGET` points (``9 k``: the
    padded grid of their folded kernel); per-user pure oracles within :data:`SIMULATION_BUDGET`
    (distinct reports possible x k)."""
    n_out = mech.n_outputs
    if mech.report_kind != "binary" and n_out is not None and mech.k * n_out <= CHANNEL_BUDGET:
        return True
    if mech.spec_name in _GRID and isinstance(mech.domain, GridDomain) and 9 * mech.k <= GRID_FFT_BUDGET:
        return True
    if mech.spec_name not in _PURE:
        return False
    if mech.k > 64:  # no merging: every report is its own column
        distinct = n
    elif mech.spec_name == "ss":  # supports are the subsets of omega values
        distinct = min(n, math.comb(mech.k, mech.omega))
    else:
        distinct = min(n, 2 ** mech.k)
    return distinct * mech.k <= SIMULATION_BUDGET.get(estimator, SIMULATION_BUDGET["default"])


def simulate_errors(mech, domain, theta: np.ndarray, n: int, error: Callable[[np.ndarray], float], estimator: str,
                    runs: int, rng: np.random.Generator) -> np.ndarray:
    """Errors of ``runs`` simulated data sets estimated by ``estimator`` (module docstring).

    Parameters
    ----------
    mech : Mechanism
        The mechanism every user runs.
    domain : Domain
        Its domain.
    theta : numpy.ndarray
        The users' distribution.
    n : int
        Users per data set.
    error : callable
        The goal's error of an estimated distribution (:func:`goal_error`).
    estimator : str
        Registered estimator name.
    runs : int
        Number of data sets.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    numpy.ndarray
        One error per run.
    """
    twin = dense_twin(mech, CHANNEL_BUDGET, prefer=mech.spec_name in _LINE)
    return _run_errors(mech, twin, domain, theta, n, error, estimator, runs, rng)


def _run_errors(mech, twin, domain, theta, n, error, estimator, runs, rng) -> np.ndarray:
    """:func:`simulate_errors` with the dense twin built once (``runs`` calls of one run draw the
    same errors as one call of ``runs``: the generator is consumed in the same order)."""
    out = []
    for _ in range(runs):
        obs = simulate_observations(mech, twin, theta, int(n), rng, domain)
        kw: dict[str, Any] = {"rng": int(rng.integers(2 ** 31))} if estimator in ("ems", "dirichlet", "auto") else {}
        out.append(error(estimate(obs, estimator, **kw).distribution))
    return np.asarray(out, dtype=float)


def _summary(errors: np.ndarray, runs: int) -> tuple[float, float, float]:
    """``(median, lower, upper)`` with the ``1/(runs+1)`` and ``runs/(runs+1)`` quantiles at the
    unbiased plotting positions ``i/(R+1)`` (``method="weibull"``): with ``R = runs`` errors, the
    smallest and the largest; with more (confirmation, analytic draws) an interval of the same
    probability ``(runs-1)/(runs+1)``."""
    lo, med, hi = np.quantile(np.asarray(errors, dtype=float), [1.0 / (runs + 1), 0.5, runs / (runs + 1.0)],
                              method="weibull")
    return float(med), float(lo), float(hi)


def median_precision(errors, level: float = 0.8) -> float:
    """Relative half-width of the distribution-free ``level`` confidence interval of the median of
    ``errors``: ``[X_(j), X_(R+1-j)]`` with the largest ``j`` such that ``P(Bin(R, 1/2) < j) <=
    (1 - level)/2`` (the order statistics bracket the median with probability at least ``level``),
    divided by twice the sample median; ``inf`` when ``R`` is too small for any such ``j``."""
    x = np.sort(np.asarray(errors, dtype=float))
    R = x.size
    alpha, cdf, j = (1.0 - level) / 2.0, 0.0, 0
    for i in range(R):
        cdf += math.comb(R, i) / 2.0 ** R
        if cdf > alpha:
            break
        j = i + 1
    med = float(np.median(x)) if R else 0.0
    if j == 0 or med <= 0:
        return math.inf
    return float(x[R - j] - x[j - 1]) / (2.0 * med)


def _candidate_rng(base: int, spec_name: str) -> np.random.Generator:
    """Each candidate's own generator, from the seed and its name: a row does not depend on which
    other candidates are evaluated."""
    return np.random.default_rng([base, zlib.crc32(spec_name.encode())])


# --------------------------------------------------------------------------------------------
# advise
# --------------------------------------------------------------------------------------------
def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _reason(rows: list[Candidate], goal: str, unit: str, metric_unit: str | None, level: float) -> str:
    best = rows[0]
    u = f" {unit}" if unit else ""
    text = (f"lowest predicted {_GOAL_LABEL[goal]} ({_fmt(best.error)}{u}, {level:.0%} range {_fmt(best.lower)}-"
            f"{_fmt(best.upper)}) at computed LDP eps {_fmt(best.eps_ldp)}")
    if best.eps_metric is not None:
        text += f" and metric eps {_fmt(best.eps_metric)} per {metric_unit}"
    how = f"{best.how}, {best.runs} fresh runs" if best.ranked_on is not None else \
        f"{best.how}, {best.runs} {'draws' if best.how == 'analytic' else 'runs'}"
    text += f", estimated by {best.estimator} ({how})"
    if len(rows) > 1:
        second = rows[1]
        text += f"; next: {second.name} ({_fmt(second.error)}{u})"
        if second.lower <= best.upper:
            text += ", whose range overlaps, so the order of the two is uncertain"
    return text


def advise(domain, *, eps_ldp: float | None = None, eps_metric: float | None = None, n: int,
           goal: str | None = None, theta=None, rng: np.random.Generator | int = 0, runs: int = 5, top: int = 10,
           method: str = "auto",
           mechanisms: Iterable[str] | None = None, truth: str | None = None,
           progress: Callable | None = None, values=None, column: str | None = None,
           shuffle: int | None = None, central_eps: float | None = None, delta: float | None = None,
           values_format: str | None = None) -> Advice:
    """Rank the mechanisms that meet a privacy target by their predicted error for a goal.

    Parameters
    ----------
    domain : Domain or str
        The values' domain (a :class:`~localpriv.domains.Domain`, or its command-line text such
        as ``"0..99"``, ``"a,b,c"``, ``"manhattan"``).
    eps_ldp : float, optional
        LDP target: every candidate's LDP level, computed from the mechanism, is at most this.
    eps_metric : float, optional
        Metric target per unit of the domain's distance (per value on a line, per km on a grid):
        every candidate's computed metric level is at most this. At least one target is needed.
    n : int
        Number of users.
    goal : {"emd", "tv", "mean", "quantiles", "topk"}, optional
        What the estimate is for (module docstring for each error). Default ``"emd"`` on ordered
        domains (integer lines, grids) and ``"tv"`` on categorical ones, which have no distance.
    theta : array_like, optional
        The distribution the predictions assume (a prior, or the data's own distribution);
        default :func:`default_prior` (Zipf on categorical domains, a bell on ordered ones) --
        give a realistic one if you can.
    rng : int or numpy.random.Generator
        Seed of every simulation (each candidate has its own stream derived from it).
    runs : int
        Simulated data sets per candidate (at least 2; default 5).
    top : int
        ``topk`` goal: how many of the most frequent values (default 10).
    method : {"auto", "simulation", "analytic"}
        ``auto``: simulate through the domain's recommended estimator where affordable, else the
        analytic model (pure oracles); ``simulation``: always simulate; ``analytic``: the pure
        oracles analytically (through ``mi-p``), the other mechanisms simulated.
    mechanisms : iterable of str, optional
        Restrict the candidates to these spec names (``krr``, ``oue``, ``olh``, ``ss``,
        ``geometric``, ``laplace``, ``exponential``, ``planar-geometric``, ``planar-laplace``).
    truth : str, optional
        How to describe ``theta`` in the output (default: "the given distribution", or the
        default prior's description).
    progress : callable, optional
        ``progress(iterable, description)`` yielding the items (e.g.
        :meth:`localpriv.utils.progress.Status.track`); default silent.
    values : str or Path, optional
        A file of values like the users' (CSV, TSV or Parquet; ``column`` as in
        :func:`localpriv.data.reports.read_values`): ``theta`` is their distribution
        (:func:`values_prior`); not with ``theta``.
    shuffle, central_eps, delta : int, float, float, optional
        A central target under a shuffler (give all three): ``shuffle`` reports are shuffled and
        their release must be ``(central_eps, delta)``-DP by the numerical bound of Feldman,
        McMillan and Talwar (:mod:`localpriv.analysis.shuffle`). The LDP target becomes the largest
        local level that meets it (:func:`~localpriv.analysis.shuffle.largest_local_epsilon`; the
        smaller of the two with ``eps_ldp``), so every candidate runs at the largest local level
        the central target allows, and each row gives its central level (``eps_central``).
    values_format : str, optional
        The values file's format (``csv``, ``tsv``, ``parquet``, ``json``) whatever its name
        (default: from the suffix).

    Returns
    -------
    Advice
        The ranked rows (spec, computed LDP and metric levels, predicted error with its
        interval, estimator and method), the recommendation and why.

    Raises
    ------
    LocalPrivError
        One line, for a missing or invalid target, ``n``, goal, prior or domain, or when no
        candidate can be evaluated.

    Examples
    --------
    >>> from localpriv import advise, datasets
    >>> ages = np.bincount(datasets.adult_ages(), minlength=100) / 48842   # a prior: the data itself
    >>> adv = advise("0..99", eps_ldp=1.0, n=200_000, goal="mean", theta=ages)  # doctest: +SKIP
    >>> print(adv)                                  # the ranked rows and the reason  # doctest: +SKIP
    >>> adv.recommended.spec, adv.recommended.eps_ldp                                 # doctest: +SKIP
    """
    if isinstance(domain, str):
        domain = parse_domain(domain)
    if not isinstance(domain, Domain):
        raise LocalPrivError(f"domain must be a Domain or its text (e.g. '0..99'), got {type(domain).__name__}")
    if isinstance(domain, ProductDomain):
        raise LocalPrivError("several attributes: rank their protocols with "
                             "localpriv.advice.protocols.advise_protocols (what localpriv advise runs)")
    if values is not None:
        if theta is not None:
            raise LocalPrivError("give the prior as theta or as a values file, not both")
        theta, described = values_prior(values, domain, column, values_format)
        truth = truth or described
    k = int(domain.size)
    if k < 2:
        raise LocalPrivError(f"the domain {domain.spec()} has {k} value: nothing to hide")
    n = check_int(n, "n (the number of users)", minimum=1)
    local_eps = None
    if shuffle is not None or central_eps is not None or delta is not None:
        if shuffle is None or central_eps is None or delta is None:
            raise LocalPrivError("a shuffled central target needs all of shuffle (--shuffle N), central_eps "
                                 "(--central-eps) and delta (--delta)")
        shuffle = check_int(shuffle, "shuffle (the number of shuffled reports)", minimum=1)
        central_eps = check_eps(central_eps, "central_eps")
        # a hair below the largest level, so that rounding in a level's own computation cannot pass it
        local_eps = largest_local_epsilon(shuffle, central_eps, delta) * (1 - 1e-9)
        eps_ldp = local_eps if eps_ldp is None else min(check_eps(eps_ldp, "eps_ldp"), local_eps)
    if eps_ldp is None and eps_metric is None:
        raise LocalPrivError("give a privacy target: eps_ldp (--eps, the LDP level), eps_metric (--metric-eps, per "
                             "unit of distance) or both")
    if eps_ldp is not None:
        eps_ldp = check_eps(eps_ldp, "eps_ldp")
    kind = _kind(domain)
    if eps_metric is not None:
        eps_metric = check_eps(eps_metric, "eps_metric")
        if kind == "categorical":
            raise LocalPrivError(f"eps_metric needs a domain with a distance (LO..HI or a grid); {domain.spec()[:60]} "
                                 "is categorical: give eps_ldp")
    if goal is None:
        goal = default_goal(domain)
    if goal not in GOALS:
        raise LocalPrivError(f"unknown goal {goal!r}; choose one of {', '.join(GOALS)}")
    if method not in METHODS:
        raise LocalPrivError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    runs = check_int(runs, "runs", minimum=2)
    if theta is None:
        theta, described = default_prior(domain)
        truth = truth or described
    else:
        theta = check_distribution(theta, k=k, name="theta (the prior)")
        truth = truth or "the given distribution"
    error = goal_error(goal, domain, theta, top)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        base = int(rng)
    else:
        base = int(check_rng(rng).integers(2 ** 32))
    if base < 0:
        raise LocalPrivError(f"rng seed must be >= 0, got {base}")
    metric = kind != "categorical"
    d_min = 1.0 if kind == "line" else float(cast(GridDomain, domain).cell_km) if kind == "grid" else 1.0
    estimator = default_estimator(domain)

    names = list(_PURE) + (list(_LINE) if kind == "line" else list(_GRID) if kind == "grid" else [])
    if mechanisms is not None:
        wanted = [str(m) for m in mechanisms]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise LocalPrivError(f"mechanism(s) {', '.join(unknown)} do not apply to this domain; candidates: "
                                 f"{', '.join(names)}")
        names = [m for m in names if m in wanted]
    fmts = {"krr": "krr(eps={eps})", "oue": "oue(eps={eps})", "olh": "olh(eps={eps})", "ss": "ss(eps={eps})",
            "geometric": f"geometric(eps={{eps}},lo=0,hi={k - 1})",
            "laplace": f"laplace(eps={{eps}},bins=1.0,lo=0,hi={k - 1})",
            "exponential": "exponential(eps={eps})", "planar-geometric": "planar-geometric(eps={eps})",
            "planar-laplace": "planar-laplace(eps={eps})"}
    rows: list[Candidate] = []
    skipped: dict[str, str] = {}
    how_to_rerun: dict[int, tuple] = {}
    track = progress if progress is not None else (lambda items, description="": items)
    for name in track(names, "advise"):
        t0 = time.perf_counter()
        gen = _candidate_rng(base, name)
        small = kind != "grid" or k <= 1000  # the analytic model scores a linear program per draw on grids
        too_large = f"too large to simulate quickly (k={k}); use method='simulation' to force it"
        if method == "auto" and name not in _PURE and not _affordable(_quiet_parse(fmts[name].format(eps="1.0"),
                                                                                   domain), n, estimator):
            # a metric mechanism's cost to simulate does not depend on its parameter (k x k channel):
            # known unaffordable, it is skipped before its parameter is calibrated, the costly part
            skipped[_NAMES[name]] = too_large
            continue
        try:
            spec, mech, (ldp, geo) = _parameter(name, fmts[name], domain, eps_ldp, eps_metric, metric, d_min)
        except LocalPrivError as exc:
            skipped[_NAMES[name]] = f"no parameter meets the target: {exc}"
            continue
        note, how, est_name = "", "simulation", estimator
        costly = (f"{estimator} not simulated: estimating per-user reports of {_NAMES[name]} over {k} values "
                  "repeatedly costs too much; predicted for mi-p, which is usually less accurate")
        if method == "analytic" and name in _PURE and small:
            how, est_name = "analytic", "mi-p"
            if name == "olh" and getattr(mech, "hash_family", "") == "cw":  # XXH64 (default): no note
                note = OLH_MODEL_NOTE
        elif method == "auto" and not _affordable(mech, n, estimator):
            if name in _ANALYTIC and small:
                how, est_name, note = "analytic", "mi-p", costly
            elif name in _PURE and n * k <= PER_USER_BUDGET:
                est_name, note = "mi-p", costly
            elif name in _ANALYTIC:  # a grid above 1,000 cells: the model with `runs` draws (GRID_DRAWS)
                how, est_name, note = "analytic", "mi-p", costly
            elif name == "olh" and getattr(mech, "hash_family", "") != "cw":
                # XXH64 hashing follows the model's 3-wise independent covariances (docs/hashing.md)
                how, est_name, note = "analytic", "mi-p", costly + OLH_XXH64_NOTE
            else:
                skipped[_NAMES[name]] = too_large
                continue
        try:
            if how == "analytic":
                draws = (GRID_DRAWS if small else runs) if kind == "grid" else DRAWS
                errors = _analytic(mech, theta, n, error, draws, gen)
                count = draws
            else:
                errors = simulate_errors(mech, domain, theta, n, error, est_name, runs, gen)
                count = runs
        except LocalPrivError as exc:
            skipped[_NAMES[name]] = f"{est_name} failed: {exc}"
            continue
        med, lo, hi = _summary(errors, runs)
        row = Candidate(_NAMES[name], spec, ldp, geo, est_name, med, lo, hi, how, count,
                        round(time.perf_counter() - t0, 3), note)
        rows.append(row)
        if how == "simulation":
            how_to_rerun[id(row)] = (mech, name)
    if not rows:
        raise LocalPrivError("no candidate mechanism could be evaluated: "
                             + "; ".join(f"{k_}: {v}" for k_, v in skipped.items()))

    def order(r):
        return (r.error, r.upper, r.spec)

    def confirm(row):  # fresh runs, independent of those that ranked the row (module docstring)
        mech, name = how_to_rerun.pop(id(row))
        t0 = time.perf_counter()
        gen = _candidate_rng(base, name + "|confirm")
        twin = dense_twin(mech, CHANNEL_BUDGET, prefer=mech.spec_name in _LINE)
        found: list[float] = []
        for _ in track(range(CONFIRM_FACTOR * runs), f"confirming {row.name}"):  # one step per simulated run
            found.extend(_run_errors(mech, twin, domain, theta, n, error, row.estimator, 1, gen))
            m = len(found)
            if m % runs == 0 and m >= CONFIRM_MIN_BATCHES * runs and median_precision(found) <= CONFIRM_PRECISION:
                break
        errors = np.asarray(found, dtype=float)
        row.ranked_on = row.error
        row.error, row.lower, row.upper = _summary(errors, runs)
        row.runs = int(errors.size)
        row.seconds = round(row.seconds + time.perf_counter() - t0, 3)
    rows.sort(key=order)
    if id(rows[0]) in how_to_rerun:
        confirm(rows[0])
        if len(rows) > 1 and rows[0].error > rows[1].error and id(rows[1]) in how_to_rerun:
            confirm(rows[1])
    rows.sort(key=order)
    unit = {"line": "units", "grid": "km"}.get(kind, "") if goal in ("emd", "mean", "quantiles") else ""
    metric_unit = {"line": "unit", "grid": "km"}.get(kind)
    reason = _reason(rows, goal, unit, metric_unit, (runs - 1) / (runs + 1))
    if shuffle is not None and central_eps is not None and delta is not None and local_eps is not None:
        for r in rows:
            r.eps_central = shuffle_epsilon(r.eps_ldp, shuffle, delta)
        central = _fmt(cast(float, rows[0].eps_central))
        reason += (f"; shuffled among {shuffle:,} reports its central level is {central} "
                   f"at delta {delta:g} (target {central_eps:g}; the largest local level meeting it is "
                   f"{_fmt(local_eps)})")
    best = rows[0]
    if best.eps_ldp > LARGE_LDP_EPS:  # what reading the spec will say, said now
        why = ("it meets the metric target only; give eps_ldp too to bound it" if eps_ldp is None
               else f"within the LDP target {eps_ldp:g}, itself above {LARGE_LDP_EPS:g}")
        warnings.warn(f"the recommended {best.spec} has LDP eps {best.eps_ldp:.4g} computed from the mechanism "
                      f"(> {LARGE_LDP_EPS:g}): as LDP it barely hides a value ({why})", LargeEpsilonWarning,
                      stacklevel=2)
    return Advice(domain=domain.spec(), k=k, goal=goal, unit=unit, n=n, eps_ldp=eps_ldp, eps_metric=eps_metric,
                  metric_unit=metric_unit, estimator=estimator, truth=truth, rows=rows, recommended=rows[0],
                  reason=reason, skipped=skipped, seed=base, runs=runs, shuffle=shuffle, central_eps=central_eps,
                  delta=delta, local_eps=local_eps)


def values_prior(values, domain, column: str | None = None, fmt: str | None = None) -> tuple[np.ndarray, str]:
    """The distribution of a values file on ``domain`` (a prior for :func:`advise`) and its
    description, e.g. ``"the distribution of ages.csv (48,842 values)"``; ``fmt``: the file's
    format whatever its name. Read in chunks (:func:`localpriv.data.reports.value_counts`): values
    outside the domain are counted over the whole file and refused in one line."""
    counts = value_counts(values, domain, column, fmt=fmt)
    n = int(counts.sum())
    if n == 0:
        raise LocalPrivError(f"{values} has no values")
    return counts / n, f"the distribution of {values} ({n:,} values)"
