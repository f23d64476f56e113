"""The one EM engine behind IBU (seed 001 Algorithm 1) and GIBU (seed 003 Algorithm 1).

Observations come as likelihood blocks ``G^A`` (``k x m_A``; ``G^A[x, j] = P(z_j | x)`` for the
distinct reports ``z_j`` of mechanism ``A``, seen ``c_j`` times). One iteration is::

    theta'_x = (1/n) * theta_x * sum_A sum_j c_j G^A[x, j] / (theta @ G^A)_j

which for a single mechanism is exactly IBU's update
``theta'_x = sum_z q_z theta_x M_xz / sum_u theta_u M_uz`` and for many is GIBU's. The engine only
asks each block for ``theta @ G`` and ``G @ w``, so structured channels make it faster without it
knowing why. Its cost per iteration is independent of the number of users ``n``.

The log-likelihood is seed 001 Eq. (2), ``L(theta) = sum_A sum_j c_j log (theta @ G^A)_j``, with
terms of zero count left out (``0 log 0 = 0``).

Stopping rules (``stop=``), each with an iteration cap whose hit is reported (``converged=False``):

* ``"gap"`` (the default): a certified, scale-free rule. With ``grad = G (c / p)`` the E-step's
  vector (computed by every EM step anyway) and ``g = grad / n`` the EM multiplier
  (``theta'_x = theta_x g_x``; ``sum_x theta_x g_x = 1`` because ``p`` is linear in ``theta``),
  concavity of ``L`` gives for every ``theta*`` in the simplex::

      L(theta*) - L(theta) <= grad . (theta* - theta) = grad . theta* - n <= n (max_x g_x - 1),

  so ``gap(theta) = max_x g_x - sum_x theta_x g_x`` bounds the per-report distance
  ``(L_max - L(theta)) / n`` to the maximum. This is Lindsay's gradient function (directional
  derivative) bound for mixture likelihoods (Lindsay 1983, "The geometry of mixture likelihoods",
  Ann. Statist. 11:86-94; Böhning 1995, review of ML algorithms for semiparametric mixtures,
  J. Statist. Plann. Inference 47:5-28): ``n (g_x - 1)`` is the derivative of ``L`` from
  ``theta`` towards the point mass at ``x``. It needs no interior assumption: on a zero
  coordinate it is small only when ``g_x <= 1 + gap`` (the Karush-Kuhn-Tucker condition of the
  simplex), and it is zero exactly at a maximum. EM never decreases ``L``, so the bound computed
  at the input of an EM step also holds for its output: the engine stops after the first step
  whose input has ``gap < delta`` and returns that step's output. ``delta`` is per report, so
  ``converged=True`` means "per-report log-likelihood within ``delta`` of the maximum" whatever
  ``n`` is. Round-off: ``max_x g_x`` and ``theta . g`` are both 1 up to about ``2 (m + 2k + 4) u``
  (``tests/_roundoff.py``; ``docs/convergence.md``), far below the default ``delta``.
* ``"loglik"``: seed 001 Algorithm 1, ``|L(theta^t) - L(theta^{t-1})| < delta`` on the *total*
  log-likelihood (its meaning changes with ``n``; kept for the reproductions).
* ``"max_abs"``: ``max_x |theta_x^t - theta_x^{t-1}| < delta`` (other libraries' IBU).

Whatever the rule, every result carries the certificate ``EMResult.gap`` of its last EM step.

Defaults (``DEFAULTS``): the certified, accelerated maximum -- ``accelerate="newton"``,
``stop="gap"``, ``delta = 1e-9`` per report, ``max_iter = 100_000`` EM evaluations (chosen by
measurement, ``docs/convergence.md``). Plain capped EM (seed 001's rule) is
``accelerate="none", stop="loglik", delta=1e-6, max_iter=10_000`` (``PLAIN_EM``), which every
reproduction of the seeds passes explicitly.

Acceleration (``accelerate="squarem"``): the SQUAREM scheme of Varadhan and Roland (2008,
Scand. J. Statist. 35:335-353, scheme S3) applied to the EM map ``F``. From ``theta`` one cycle
computes ``theta1 = F(theta)``, ``theta2 = F(theta1)``, ``r = theta1 - theta``,
``v = theta2 - theta1 - r`` and the step ``alpha = -||r|| / ||v||`` (kept in ``[-alpha_max, -1]``;
``alpha = -1`` gives ``theta2``), extrapolates ``theta' = theta - 2 alpha r + alpha^2 v`` and
stabilizes with one more EM step ``F(theta')``. Safeguards (ours):

* feasibility: while ``theta'`` leaves the simplex's relative interior (a coordinate that is
  positive in ``theta`` becomes ``<= 0``), ``alpha`` is moved halfway towards ``-1``;
* monotonicity: if ``L(theta') < L(theta2)`` the cycle falls back to the plain EM iterate
  ``theta2``, so ``L`` never decreases from cycle to cycle and every result is an EM image (a
  distribution);
* same certificate as plain EM: with ``stop="loglik"``/``"max_abs"``, once a cycle changes ``L``
  (``theta``) by less than ``delta``, plain EM steps follow until one plain step does -- the
  rule the user asked for is what the returned estimate satisfies, whichever scheme was used;
  with ``stop="gap"`` the bound is checked at the start of every cycle (it is computed by the
  cycle's first EM step) and the run ends with that step's output.

``alpha_max`` starts at 4, is multiplied by 4 each time the step reaches it and divided by 4 (not
below 4) after a cycle whose extrapolation was rejected (after at most ``MAX_BACKTRACK`` halvings
of ``alpha`` towards -1); ``theta'`` is floored at ``FLOOR * theta2`` (coordinates heading to 0
stay positive, so none is lost for good) and renormalized. ``iterations`` counts evaluations of the
EM map, so plain and accelerated costs compare directly.

Newton finish (``accelerate="newton"``): SQUAREM cycles as above, and after cycles 8, 32, 128, ...
an attempt of :func:`localpriv.estimators.newton.newton_finish` (an active-set Newton method on
the coordinates that stay positive, certified by the Karush-Kuhn-Tucker conditions of the concave
log-likelihood). A certified point (its ``L`` at least the current one) replaces the iterate and
the finishing phase of plain EM steps follows, so the result is again an EM iterate that meets the
stopping rule; an attempt that fails or runs over its budget of products leaves SQUAREM to go on,
from the attempt's best point when that raises ``L`` (:func:`_newton_warm`: on planar FFT blocks the
round-off of the products keeps the KKT test from passing at the maximum, and EM steps from there
meet the ``gap`` rule in a few evaluations; the best point's zeros whose EM factor exceeds
``1 + WARM_REVIVE`` restart at the EM iterate's value).
Offered when every block has ``hessian_diagonal`` (dense blocks, k-RR, support counts, support
blocks, planar FFT blocks) or is small enough (``k m <= 2^22``) for the finish to tabulate that diagonal from its dense
``G`` (geometric, Laplace, exponential blocks of moderate size; see
:func:`~localpriv.estimators.newton.supports_newton`); otherwise the scheme is plain SQUAREM and
says so (``EMResult.scheme``). With ``stop="gap"`` the finish is certified to ``kkt_tol = min(1e-9,
delta / 2)``, so its point meets ``gap < delta`` at once. ``EMResult.products`` counts the Newton
finish's products (a forward or backward product of every block, about half an EM evaluation each).

How the products are evaluated (the iterates are unchanged up to rounding):

* blocks of one family (k-RR and other scaled-identity channels, exponential kernels with
  different rates, support blocks of the pure protocols) are batched into one block
  (:func:`localpriv.estimators.combination.batch_blocks`): GIBU with 1,000 mechanisms makes a few
  vector operations per product instead of 1,000 Python-level ones;
* planar FFT blocks are :class:`localpriv.likelihood.rfft.RfftClampedBlock` (real FFTs on reused buffers;
  :func:`localpriv.likelihood.structured.clamped_block_for`); a block whose forward product is costly makes the
  SQUAREM cycles compare the extrapolation with ``L(theta1)``, skip ``theta2``'s forward product,
  and get the products of backtracking trials, and of ``theta2`` on a fallback, from those already
  made (they are linear in ``theta``; :class:`_Path`): one forward and one backward product per EM
  evaluation, and one more per rejected trial only while the floor binds on many cells (a first
  trial on which it does is shortened before its FFT, :data:`DENSE_FLOOR_STEP`; :func:`_squarem`);
* a run on one scaled-identity block (k-RR, support counts), without penalty, callback or trace,
  continues in compiled loops (:mod:`localpriv.estimators._kernels`, numba, imported then) once
  it has made :data:`COMPILED_AFTER` evaluations: the same operations and decisions, bit for bit
  (NumPy's pairwise sums and BLAS dot products), without ~20 NumPy calls per evaluation;
  ``LOCALPRIV_NUMBA=0`` keeps everything in NumPy;
* BLAS runs on :func:`blas_threads` threads during a run (default 1; ``LOCALPRIV_BLAS_THREADS``
  or :data:`BLAS_THREADS`; 0 leaves BLAS alone), set and restored with threadpoolctl.
"""
from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np
from numpy.typing import ArrayLike

from localpriv.estimators import _kernels
from localpriv.estimators.batch import batch_blocks
from localpriv.estimators.newton import KKT_TOL, newton_finish, supports_newton
from localpriv.likelihood.blocks import Evaluation, LikelihoodBlock, total_loglik
from localpriv.utils.validation import LocalPrivError, check_distribution, env_int

if TYPE_CHECKING:
    from localpriv.likelihood.structured import ScaledIdentityBlock

__all__ = ["EMResult", "Penalty", "em", "log_likelihood", "SCHEMES", "STOPPING_RULE", "STOPPING_RULES",
           "DEFAULTS", "PLAIN_EM", "DEFAULT_DELTA", "DEFAULT_MAX_ITER", "DEFAULT_ACCELERATE", "DEFAULT_STOP",
           "gap_bound", "loglik_from", "BLAS_THREADS", "blas_threads", "COMPILED_AFTER", "Callback"]

#: a user's ``callback(t, theta, L)``, called after every iteration
Callback: TypeAlias = Callable[[int, np.ndarray, float], object]
#: ``(theta, the blocks' evaluations at theta) -> L`` (or the penalized objective)
Objective: TypeAlias = Callable[[np.ndarray, Sequence[Evaluation]], float]
#: ``record(t, theta, L, gap=..., phase=...)``: the trace and the callback of a run
Record: TypeAlias = Callable[..., None]
#: what the compiled loops take (:func:`_compiled`): ``(kernels, d, b, z, counts, live, rule)``
Fast: TypeAlias = tuple[ModuleType, float, float, np.ndarray, np.ndarray, np.ndarray, int]

#: acceleration schemes accepted by :func:`em` (``None`` means plain EM)
SCHEMES = ("none", "squarem", "newton")
#: SQUAREM cycles after which the "newton" scheme attempts its finish (then every 4x as many)
NEWTON_FIRST = 8
#: the stopping rule of seed 001 Algorithm 1, as written in every estimate's settings
STOPPING_RULE = "|L(t)-L(t-1)| < delta"
#: the stopping rules accepted by :func:`em` and how estimates name them
STOPPING_RULES: dict[str, str] = {
    "gap": "max_x g_x - 1 < delta (certified: per-report log-likelihood within delta of the maximum)",
    "loglik": STOPPING_RULE,
    "max_abs": "max|theta(t)-theta(t-1)| < delta",
}
#: extrapolated coordinates below ``FLOOR * F(F(theta))`` are reset to it (see :func:`em`)
FLOOR = 0.01
#: at most this many step-length halvings per SQUAREM cycle before falling back to plain EM
MAX_BACKTRACK = 6
#: floor of every EM iterate (keeps arithmetic out of subnormal floats; see _em_step)
TINY = 1e-280
#: with a costly forward product (planar FFT blocks) a step that reaches its cap lets the next ones grow
#: by this factor (4 otherwise): a rejected first trial costs such a block one more FFT pair while the
#: floor binds on many cells (planar 1000 x 1000 with :class:`_Path`: 297 products in 142 evaluations
#: with 2, 296 in 145 with 1.5, 304 in 139 with 4)
GROWTH_COSTLY = 2.0
#: relative size, against the largest probability, of the floor's mass that :class:`_Path` drops (below
#: the round-off of an FFT product, which is absolute at ~1e-16 of its largest entry)
ROUNDOFF = 1e-16
#: with a costly forward product, a first SQUAREM trial whose floor binds on more cells than the block
#: sums directly (so that its FFT could not give the trials' products, :class:`_Path`) is shortened,
#: halving towards -1 before any FFT, until the floor binds on few cells or ``|alpha| <= 3``: such long
#: steps, distorted by the floor on many cells, were the rejected ones (planar 1000 x 1000: 121
#: evaluations and 243 products instead of 142 and 297, log-likelihood 3.4 higher; of 2, 2.5, 3, 4, 5
#: and 6, 3 gave the fewest products (with 2.5) and the highest log-likelihood)
DENSE_FLOOR_STEP = 3.0
#: after an uncertified Newton attempt, a zero of its best point whose EM factor there exceeds
#: ``1 + WARM_REVIVE`` restarts at the EM iterate's value instead of :data:`TINY` (:func:`_newton_warm`;
#: decision 0074); round-off-level excesses (a best point at the maximum's last digits) stay below it
WARM_REVIVE = 1e-3
#: BLAS threads while an EM run is under way: ``None`` reads the environment variable
#: ``LOCALPRIV_BLAS_THREADS`` (default 1); ``0`` (or ``LOCALPRIV_BLAS_THREADS=0``) leaves BLAS alone.
#: EM's products are small and many: one thread avoids thread hand-offs and oversubscription when
#: several estimates run side by side.
BLAS_THREADS: int | None = None
#: a run on one scaled-identity block (k-RR, support counts) hands its loop to compiled kernels
#: (:mod:`localpriv.estimators._kernels`, numba) once it has made this many EM evaluations, so runs
#: that stop earlier never load numba (its import and cached kernels cost ~0.3 s per process)
COMPILED_AFTER = 64

#: default tolerance of the "gap" rule: per-report log-likelihood within 1e-9 of the maximum
#: (the round-off of the gap is bounded by 2 (m + 2k + 4) u, tests/_roundoff.py, docs/convergence.md)
DEFAULT_DELTA = 1e-9
#: default cap on EM-map evaluations (the accelerated runs measured need 10^1-10^4)
DEFAULT_MAX_ITER = 100_000
#: default acceleration: SQUAREM with the certified Newton finish (SQUAREM where not offered)
DEFAULT_ACCELERATE = "newton"
#: default stopping rule: the certified per-report gap
DEFAULT_STOP = "gap"
#: the defaults of :func:`em` and of every IBU variant: the certified, accelerated MLE
DEFAULTS: dict[str, Any] = {"accelerate": DEFAULT_ACCELERATE, "stop": DEFAULT_STOP, "delta": DEFAULT_DELTA,
            "max_iter": DEFAULT_MAX_ITER}
#: plain, capped EM with seed 001 Algorithm 1's rule: the engine's former defaults, which the
#: reproductions of the seeds pass explicitly (each module spells them out itself)
PLAIN_EM: dict[str, Any] = {"accelerate": "none", "stop": "loglik", "delta": 1e-6, "max_iter": 10_000}


def _stop_value(rule: str, th_old: np.ndarray, th_new: np.ndarray, L_old: float, L_new: float,
                gap: float = math.nan) -> float:
    if rule == "loglik":
        return abs(L_new - L_old)
    if rule == "gap":
        return gap
    return float(np.max(np.abs(th_new - th_old)))


class Penalty:
    """A regularized form of the EM map, for the estimators of :mod:`localpriv.estimators.regularized`.

    The E-step is the engine's (``grad_x = sum_A sum_j c_j G^A[x, j] / (theta @ G^A)_j``, so that
    ``sum_x theta_x grad_x = n``); a penalty replaces the M-step ``theta_x grad_x / n`` by
    :meth:`mstep` (for a Dirichlet prior, ``(theta_x grad_x + a_x) / (n + sum a)``; for EMS, a
    smoothing of the plain M-step). :meth:`value` is the log-penalty added to ``L`` when the map
    ascends a penalized likelihood (MAP); ``None`` when it ascends none (EMS): then the engine runs
    plain iterations only, stopped on ``max_abs``.

    :meth:`gradient` (optional) is ``d value / d theta``; when the penalized objective is concave
    (e.g. a Dirichlet prior with all ``a_x >= 0``) it makes the certified ``stop="gap"`` rule
    available for the MAP: ``Phi(theta*) - Phi(theta) <= max_x G_x - theta . G`` with
    ``G = grad + gradient(theta)`` (divided by ``n``, per report). Without it (``None``, the
    default) a ``"gap"`` request is served by ``"max_abs"`` and the result says so
    (``EMResult.stop``).
    """

    def mstep(self, theta: np.ndarray, grad: np.ndarray, n: float) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def value(self, theta: np.ndarray) -> float | None:  # pragma: no cover
        return None

    def gradient(self, theta: np.ndarray) -> np.ndarray | None:
        return None


@dataclass
class EMResult:
    """Outcome of :func:`em`.

    ``gap`` is the certificate of the returned ``theta``: ``(L_max - L(theta)) / n <= gap``
    (``max_x g_x - theta . g`` at the input of the last EM step; see the module docstring), whatever
    the stopping rule; ``nan`` when not available (a penalty without a gradient). ``stop`` is the
    rule that was applied.
    """

    theta: np.ndarray
    loglik: float
    iterations: int
    converged: bool
    trace: list[float] = field(default_factory=list)
    scheme: str = "none"
    cycles: int = 0
    products: int = 0
    gap: float = math.nan
    stop: str = "loglik"


def _forward_all(blocks: Sequence[LikelihoodBlock], theta: np.ndarray) -> list[np.ndarray]:
    return [b.forward(theta) for b in blocks]


def loglik_from(blocks: Sequence[LikelihoodBlock], probs: Sequence[Evaluation]) -> float:
    """``sum_j c_j log p_j`` over the reports seen, from the blocks' evaluations ``probs``; ``-inf``
    if one of them has probability <= 0 (:func:`localpriv.likelihood.blocks.total_loglik`).

    Callers inside the engine run under ``np.errstate(divide="ignore", invalid="ignore")``: a zero
    probability gives ``log 0 = -inf`` (a negative one ``nan``), both mapped to ``-inf``.
    """
    return total_loglik(blocks, probs)



def log_likelihood(blocks: Sequence[LikelihoodBlock], theta: ArrayLike) -> float:
    """``L(theta)`` of seed 001 Eq. (2) for the observations in ``blocks``."""
    theta = np.asarray(theta, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return loglik_from(blocks, _forward_all(blocks, theta))


def _check_observable(blocks: Sequence[LikelihoodBlock], probs: Sequence[Evaluation]) -> None:
    for b, p in zip(blocks, probs):
        impossible = b.impossible(p)
        if impossible:
            raise LocalPrivError(
                f"{impossible} observed report(s) have probability 0 under the mechanism "
                "for every input: the reports do not come from this mechanism"
            )


def _gradient(blocks: Sequence[LikelihoodBlock], probs: Sequence[Evaluation]) -> np.ndarray:
    """``grad_x = sum_A sum_j c_j G^A[x, j] / p_j`` (the E-step; ``dL/dtheta``)."""
    grad: np.ndarray | None = None
    for b, p in zip(blocks, probs):
        g = b.gradient(p)
        grad = g if grad is None else grad + g
    return cast(np.ndarray, grad)  # blocks: never empty


def gap_bound(blocks: Sequence[LikelihoodBlock], theta: ArrayLike) -> float:
    """The certificate of ``theta``: ``(L_max - L(theta)) / n <= max_x g_x - theta . g``.

    ``g = grad / n`` is the EM multiplier at ``theta`` (see the module docstring; Lindsay 1983).
    Zero exactly at a maximum; costs one forward and one backward product.
    """
    theta = np.asarray(theta, dtype=float)
    n = float(sum(b.total for b in blocks))
    with np.errstate(divide="ignore", invalid="ignore"):
        grad = _gradient(blocks, _forward_all(blocks, theta))
    return float((grad.max() - theta @ grad) / n)


def em_step(blocks: Sequence[LikelihoodBlock], theta: np.ndarray, probs: Sequence[Evaluation],
            n: float) -> np.ndarray:
    """One EM (IBU/GIBU) update from ``theta`` and the forward products ``probs``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _em_step(blocks, theta, probs, n)


def _em_step(blocks: Sequence[LikelihoodBlock], theta: np.ndarray, probs: Sequence[Evaluation], n: float,
             penalty: Penalty | None = None) -> np.ndarray:
    """One EM update (see :func:`_em_update`, which also returns the certificate of ``theta``)."""
    return _em_update(blocks, theta, probs, n, penalty)[0]


def _em_update(blocks: Sequence[LikelihoodBlock], theta: np.ndarray, probs: Sequence[Evaluation], n: float,
               penalty: Penalty | None = None) -> tuple[np.ndarray, float]:
    """``(F(theta), gap(theta))``: one EM update and the certificate of its input, from one E-step.

    ``gap = (max_x grad_x - theta . grad) / n``: the E-step's ``grad`` is reused, so the
    certificate costs ``O(k)`` (the sum ``theta . grad`` is the M-step's normalizer). With a
    penalty, ``grad + penalty.gradient(theta)`` (``nan`` if the penalty has none).
    """
    grad = _gradient(blocks, probs)
    if penalty is not None:  # a regularized M-step (MAP, smoothing): see Penalty
        new = np.array(penalty.mstep(theta, grad, n), dtype=float)
        pg = penalty.gradient(theta)
        if pg is None:
            gap = math.nan
        else:
            full = grad + np.asarray(pg, dtype=float)
            gap = float((full.max() - theta @ full) / n)
    else:
        new = theta * grad
        s = new.sum()
        gap = float((grad.max() - s) / n)  # s = theta . grad (= n up to rounding)
        if s > 0:
            new /= s
        else:
            new /= n
    # coordinates on their way to 0 stop at TINY: below ~1e-308 floats turn subnormal and every
    # product touching them runs ~10-100x slower; the change to L and to theta is < k * 1e-280
    np.maximum(new, TINY, out=new)
    return new, gap


def blas_threads() -> int:
    """BLAS threads used inside EM runs: :data:`BLAS_THREADS`, else ``LOCALPRIV_BLAS_THREADS``, else 1
    (``0``: BLAS is left as configured)."""
    if BLAS_THREADS is not None:
        return int(BLAS_THREADS)
    return env_int("LOCALPRIV_BLAS_THREADS", 1, "threads", minimum=0)


_BLAS_LIBS: list[Any] | None = None


@contextmanager
def _blas_pinned() -> Iterator[None]:
    """BLAS limited to :func:`blas_threads` threads for the block (threadpoolctl, imported here)."""
    global _BLAS_LIBS
    limit = blas_threads()
    if limit <= 0:
        yield
        return
    if _BLAS_LIBS is None:
        from threadpoolctl import ThreadpoolController
        _BLAS_LIBS = [lc for lc in ThreadpoolController().lib_controllers if lc.user_api == "blas"]
    changed = []
    try:
        for lc in _BLAS_LIBS:
            old = lc.num_threads
            if old != limit:
                lc.set_num_threads(limit)
                changed.append((lc, old))
        yield
    finally:
        for lc, old in changed:
            lc.set_num_threads(old)


def _prepare(blocks: Iterable[LikelihoodBlock]) -> list[LikelihoodBlock]:
    """The blocks as the engine evaluates them: blocks of one family batched into one
    (:func:`localpriv.estimators.combination.batch_blocks`; same products up to rounding). Planar
    mechanisms' FFT blocks come as :class:`localpriv.likelihood.rfft.RfftClampedBlock` already
    (:func:`localpriv.likelihood.structured.clamped_block_for`)."""
    blocks = list(blocks)
    if len(blocks) > 1:
        blocks = batch_blocks(blocks)
    return blocks


def _compiled(blocks: Sequence[LikelihoodBlock], penalty: Penalty | None, callback: Callable[..., object] | None,
              keep_trace: bool, stop: str) -> Fast | None:
    """``(kernels, d, b, z, counts, live, rule)`` when the run may use the compiled loops (one
    :class:`~localpriv.likelihood.structured.ScaledIdentityBlock`, no penalty, callback or trace), else None."""
    if penalty is not None or callback is not None or keep_trace or len(blocks) != 1:
        return None
    b = blocks[0]
    structured = sys.modules.get("localpriv.likelihood.structured")
    if structured is None or type(b) is not structured.ScaledIdentityBlock:
        return None
    b = cast("ScaledIdentityBlock", b)
    args = (float(b.a - b.b), float(b.b), np.ascontiguousarray(b.outputs, dtype=np.int64))
    if not _kernels.enabled():
        return None
    rule = {"gap": 0, "loglik": 1, "max_abs": 2}[stop]
    live = b.live()
    live = np.zeros(0, dtype=np.int64) if live is None else live.astype(np.int64)
    return (_kernels,) + args + (np.ascontiguousarray(b.counts, dtype=float), live, rule)


def em(
    blocks: Sequence[LikelihoodBlock],
    k: int,
    *,
    theta0: ArrayLike | None = None,
    delta: float = DEFAULT_DELTA,
    max_iter: int = DEFAULT_MAX_ITER,
    callback: Callback | None = None,
    keep_trace: bool = False,
    accelerate: str | None = DEFAULT_ACCELERATE,
    stop: str = DEFAULT_STOP,
    penalty: Penalty | None = None,
) -> EMResult:
    """Run EM to a maximum-likelihood estimate (by default the certified, accelerated one).

    Parameters
    ----------
    blocks : sequence of LikelihoodBlock
        The observations, one block per mechanism.
    k : int
        Size of the input domain.
    theta0 : array, optional
        Start; must have full support (seed 001 Algorithm 1). Uniform by default.
    delta : float
        Tolerance of the stopping rule ``stop``. Default ``1e-9``: with ``stop="gap"``, the
        per-report log-likelihood of the result is within ``1e-9`` of the maximum.
    max_iter : int
        Cap on EM-map evaluations (default 100,000); reaching it sets ``converged=False``.
    callback : callable, optional
        ``callback(t, theta, L)`` after each iteration (plain EM) or SQUAREM cycle. A callback
        with a true attribute ``em_progress`` (:class:`localpriv.utils.progress.EMProgress`) is also
        told the run's settings (``callback.begin(n=, k=, delta=, max_iter=, stop=, scheme=)``)
        and gets ``gap=`` (the certificate of the point) and ``phase=`` keywords, and is called
        during a Newton finish too.
    keep_trace : bool
        Keep the log-likelihood of every iterate in ``EMResult.trace``.
    accelerate : {"newton", "squarem", "none", None}
        ``"newton"`` (default): SQUAREM with the certified active-set Newton finish where every
        block allows it (SQUAREM otherwise; ``EMResult.scheme`` says which ran); ``"squarem"``:
        the monotone SQUAREM scheme of the module docstring; ``"none"``/``None``: plain EM.
    stop : {"gap", "loglik", "max_abs"}
        ``"gap"`` (default): stop once ``max_x g_x - 1 < delta``, which certifies
        ``(L_max - L) / n < delta`` (module docstring); ``"loglik"``: seed 001 Algorithm 1's
        ``|L(t) - L(t-1)| < delta`` on the total log-likelihood; ``"max_abs"``:
        ``max_x |theta_x(t) - theta_x(t-1)| < delta`` (other libraries' IBU).
    penalty : Penalty, optional
        A regularized M-step (see :class:`Penalty`); ``L`` then means the penalized objective
        ``L + penalty.value(theta)``. The Newton finish is not offered; a penalty without an
        objective (``value`` is None) runs plain iterations stopped on ``max_abs``; ``"gap"``
        needs :meth:`Penalty.gradient` (else ``"max_abs"`` is applied, see ``EMResult.stop``).
    """
    if stop not in STOPPING_RULES:
        raise LocalPrivError(f"unknown stopping rule {stop!r}; choose one of {', '.join(STOPPING_RULES)}")
    scheme = "none" if accelerate is None else str(accelerate).lower()
    if scheme not in SCHEMES:
        raise LocalPrivError(f"unknown acceleration {accelerate!r}; choose one of {', '.join(SCHEMES)}")
    if not blocks:
        raise LocalPrivError("no observations to estimate from")
    if not delta > 0:
        raise LocalPrivError(f"delta must be > 0, got {delta}")
    if max_iter < 1:
        raise LocalPrivError(f"max_iter must be >= 1, got {max_iter}")
    theta = (np.full(k, 1.0 / k) if theta0 is None
             else check_distribution(theta0, k=k, name="starting distribution", full_support=True).copy())
    with _blas_pinned():
        return _em(_prepare(blocks), k, theta, delta, max_iter, callback, keep_trace, scheme, stop, penalty)


def _em(blocks: Sequence[LikelihoodBlock], k: int, theta: np.ndarray, delta: float, max_iter: int,
        callback: Callable[..., object] | None, keep_trace: bool, scheme: str, stop: str,
        penalty: Penalty | None) -> EMResult:
    """The body of :func:`em` on validated arguments and the blocks as given (``em`` passes them
    through :func:`_prepare` and pins BLAS first; tests call this to evaluate block by block)."""
    n = float(sum(b.total for b in blocks))
    probs = _forward_all(blocks, theta)
    _check_observable(blocks, probs)
    trace = []
    if penalty is not None:
        if penalty.value(theta) is None:  # no objective: iterations of the map, stopped on theta
            scheme, stop = ("none" if scheme == "none" else "residual"), "max_abs"
        elif scheme == "newton":
            scheme = "squarem"
        if stop == "gap" and penalty.gradient(theta) is None:
            stop = "max_abs"  # no certificate without the penalty's gradient
    objective = _objective(blocks, penalty)
    newton = scheme == "newton" and supports_newton(blocks)
    rich = bool(getattr(callback, "em_progress", False))
    if rich and callback is not None and hasattr(callback, "begin"):
        callback.begin(n=n, k=k, delta=delta, max_iter=max_iter, stop=stop,
                       scheme=("newton" if newton else "squarem") if scheme != "none" else "none")

    def record(t: int, th: np.ndarray, ll: float, gap: float = math.nan, phase: str = "em") -> None:
        if keep_trace:
            trace.append(ll)
        if callback is not None:
            if rich:
                callback(t, th, ll, gap=gap, phase=phase)
            else:
                callback(t, th, ll)

    # one floating-point context for the whole run (zero probabilities are handled explicitly)
    with np.errstate(divide="ignore", invalid="ignore"):
        L = objective(theta, probs)
        if keep_trace:
            trace.append(L)
        if scheme == "residual":
            return _squarem_residual(blocks, theta, probs, L, n, delta, max_iter, record, trace, penalty,
                                     objective)
        fast = _compiled(blocks, penalty, callback, keep_trace, stop)
        if scheme in ("squarem", "newton"):
            return _squarem(blocks, theta, probs, L, n, delta, max_iter, record, trace, stop, newton,
                            penalty, objective, callback if rich else None, fast)
        theta, L, t, converged, gap = _plain_em(blocks, theta, probs, L, n, delta, max_iter, stop, 0,
                                                record, penalty, objective, fast=fast)
    return EMResult(theta, L, t, converged, trace, gap=gap, stop=stop)


def _objective(blocks: Sequence[LikelihoodBlock], penalty: Penalty | None) -> Objective:
    """``(theta, probs) -> L``, or the penalized ``L + penalty.value(theta)``."""
    if penalty is None:
        return lambda theta, probs: loglik_from(blocks, probs)

    def penalized(theta: np.ndarray, probs: Sequence[Evaluation]) -> float:
        v = penalty.value(theta)
        return loglik_from(blocks, probs) + (0.0 if v is None else float(v))
    return penalized


def _plain_em(blocks: Sequence[LikelihoodBlock], theta: np.ndarray, probs: Sequence[Evaluation], L: float, n: float,
              delta: float, max_iter: int, stop: str, t: int, record: Record, penalty: Penalty | None = None,
              objective: Objective | None = None, gap: float = math.nan,
              fast: Fast | None = None) -> tuple[np.ndarray, float, int, bool, float]:
    """Plain EM steps from iteration ``t`` until the stopping rule holds or ``max_iter``.

    Returns ``(theta, L, t, converged, gap)``; ``gap`` certifies the returned ``theta`` (it was
    computed at the input of the step that produced it; EM never decreases ``L``). With ``fast``
    (:func:`_compiled`) the loop continues in the compiled kernel from evaluation
    :data:`COMPILED_AFTER` on (same steps and rule).
    """
    objective = objective or _objective(blocks, None)
    while t < max_iter:
        if fast is not None and t >= COMPILED_AFTER:
            mod, d, b, z, c, live, rule = fast
            theta, _, L, t, converged, gap = mod.kernels()["plain_em"](  # one signature: cast
                theta, probs[0], float(L), d, b, z, c, live, float(n), rule, float(delta), int(t), int(max_iter),
                TINY)
            return theta, L, t, bool(converged), gap
        old = theta
        theta, gap = _em_update(blocks, theta, probs, n, penalty)
        t += 1
        probs = _forward_all(blocks, theta)
        L_new = objective(theta, probs)
        record(t, theta, L_new, gap)
        done = _stop_value(stop, old, theta, L, L_new, gap) < delta
        L = L_new
        if done:
            return theta, L, t, True, gap
    return theta, L, t, False, gap


def _squarem_residual(blocks: Sequence[LikelihoodBlock], theta: np.ndarray, probs: Sequence[Evaluation], L: float,
                      n: float, delta: float, max_iter: int, record: Record, trace: list[float],
                      penalty: Penalty | None, objective: Objective) -> EMResult:
    """SQUAREM for a map that ascends no objective (EMS's smoothed EM; Varadhan and Roland, Scand.
    J. Stat. 35:335-353, 2008, scheme S3), stopped on ``max_x |F(theta)_x - theta_x| < delta``.

    Each cycle takes ``theta1 = F(theta)``, ``theta2 = F(theta1)``, ``r = theta1 - theta``,
    ``v = theta2 - theta1 - r``, ``alpha = max(-|r|/|v|, -alpha_max)`` and the stabilized
    ``theta3 = F(theta - 2 alpha r + alpha^2 v)``. With no objective to guard the step, the merit
    is the fixed-point residual: the extrapolation is kept when its residual ``|theta3 - cand|``
    is at most that of ``theta1`` (``|theta2 - theta1|``), else the cycle keeps ``theta2`` and the
    step cap shrinks. The fixed point and the stopping rule are those of plain iterations; only the
    number of map evaluations changes (``iterations`` counts them)."""
    t, cycles, alpha_max = 0, 0, 4.0
    while t + 3 <= max_iter:
        th1, _ = _em_update(blocks, theta, probs, n, penalty)
        p1 = _forward_all(blocks, th1)
        t += 1
        r = th1 - theta
        if float(np.max(np.abs(r))) < delta:
            L1 = objective(th1, p1)
            record(t, th1, L1, math.nan, "squarem")
            return EMResult(th1, L1, t, True, trace, scheme="squarem-residual", cycles=cycles, stop="max_abs")
        th2, _ = _em_update(blocks, th1, p1, n, penalty)
        p2 = _forward_all(blocks, th2)
        t += 1
        v = th2 - th1 - r
        nr, nv = math.sqrt(r @ r), math.sqrt(v @ v)
        new, pnew = th2, p2
        if nv > 0 and nr > 0:
            alpha = max(-nr / nv, -alpha_max)
            if alpha < -1.0:
                cand = theta - 2.0 * alpha * r + alpha * alpha * v
                cand = np.maximum(cand, FLOOR * th2)  # as in _squarem: no coordinate lost for good
                cand /= cand.sum()
                pc = _forward_all(blocks, cand)
                if all(np.all(np.isfinite(q)) for q in pc):
                    th3, _ = _em_update(blocks, cand, pc, n, penalty)
                    t += 1
                    if float(np.max(np.abs(th3 - cand))) <= float(np.max(np.abs(th2 - th1))):
                        new, pnew = th3, _forward_all(blocks, th3)
                        if alpha <= -alpha_max:
                            alpha_max *= 4.0
                    else:
                        alpha_max = max(4.0, alpha_max / 4.0)
        cycles += 1
        theta, probs = new, pnew
        record(t, theta, objective(theta, probs), math.nan, "squarem")
    theta, L, t, converged, gap = _plain_em(blocks, theta, probs, objective(theta, probs), n, delta, max_iter,
                                            "max_abs", t, record, penalty, objective)
    return EMResult(theta, L, t, converged, trace, scheme="squarem-residual", cycles=cycles, gap=gap,
                    stop="max_abs")


class _Path:
    """Forward products along one SQUAREM cycle's extrapolation path, for costly (FFT) blocks.

    The unfloored trial point ``raw(alpha) = theta - 2 alpha r + alpha^2 v`` is quadratic in ``alpha``
    and the products are linear, so ``M raw(alpha) = M theta - 2 alpha M r + alpha^2 M v`` with
    ``M r = M theta1 - M theta`` (both known when the trials start) and ``M v = M theta2 - 2 M theta1 +
    M theta``. The trial point is ``cand = (raw + d) / s`` with the floor's part ``d = max(0, FLOOR
    theta2 - raw) >= 0`` and ``s = sum(raw + d)``, so ``M cand = (M raw + M d) / s``. ``M d`` is had
    without an FFT when ``d`` is, up to round-off, supported on a few cells: its smallest entries,
    of total mass at most ``ROUNDOFF * max(M theta1)`` (each changes a probability by at most its
    own size: no entry of ``M`` exceeds 1), are dropped, and the block's ``sparse_forward`` sums the
    rest (at most its ``sparse_limit`` cells). ``M v`` is unknown until the product of a trial
    whose ``M d`` is so had has been made by FFT: then ``M v = (s M cand - M d - M theta + 2 alpha
    M r) / alpha^2``, and every later trial of the cycle, and ``M theta2 = M theta + 2 M r + M v``
    if the cycle falls back to it, cost no FFT. Blocks that are not costly are evaluated directly.
    The derived products carry the round-off of a few FFTs (absolute, relative to the largest
    probability), floored at the smallest normal float as the blocks' own; every accepted point's
    ``L`` is still computed from an FFT (``theta3``'s forward product), so ``L`` never decreases.
    """

    def __init__(self, blocks: Sequence[LikelihoodBlock], p0: Sequence[np.ndarray], p1: Sequence[np.ndarray]) -> None:
        self.blocks, self.p0 = blocks, p0
        self.costly = [bool(b.costly_forward) for b in blocks]
        # per block: an array for the costly blocks, None for the others
        self.mr: list[Any] = [q1 - q0 if c else None for c, q0, q1 in zip(self.costly, p0, p1)]
        self.mv: list[Any] | None = None
        self.tol = ROUNDOFF * min((float(q.max()) for c, q in zip(self.costly, p1) if c and q.size),
                                  default=0.0)
        self.ffts = self.derived = 0

    def support(self, d: np.ndarray) -> np.ndarray:
        """The cells of the floor's part ``d`` that count: all but its smallest entries, of total
        mass at most ``tol``."""
        idx = np.flatnonzero(d > 0)
        if idx.size:
            vals = d[idx]
            order = np.argsort(vals)
            drop = int(np.searchsorted(np.cumsum(vals[order]), self.tol, side="right"))
            idx = idx[np.sort(order[drop:])]
        return idx

    def support_if_few(self, d: np.ndarray) -> np.ndarray | None:
        """:meth:`support` of ``d`` when :meth:`few` holds for it, else ``None``; without sorting ``d``'s
        entries when too many are sure to remain (a partition shows the smallest ones hold too much)."""
        if any(self.costly):
            limit = min(b.sparse_limit for b, c in zip(self.blocks, self.costly) if c)
            vals = d[d > 0]
            extra = vals.size - limit
            if extra > 0 and float(np.partition(vals, extra - 1)[:extra].sum()) > self.tol * (1.0 + 1e-9):
                return None
        idx = self.support(d)
        return idx if self.few(idx) else None

    def few(self, idx: np.ndarray) -> bool:
        """Whether every costly block sums the floor's cells ``idx`` directly (``sparse_limit``)."""
        return any(self.costly) and all(idx.size <= b.sparse_limit
                                        for b, c in zip(self.blocks, self.costly) if c)

    def _floor_products(self, d: np.ndarray, idx: np.ndarray) -> list[Any] | None:
        """``M d`` for every costly block (``None`` for the others), or ``None`` when ``d`` is not
        sparse enough for one of them."""
        if not self.few(idx):
            return None
        return [None if not c else b.sparse_forward(idx, d[idx]) if idx.size else np.zeros(b.size)
                for b, c in zip(self.blocks, self.costly)]

    def products(self, cand: np.ndarray, d: np.ndarray, s: float, alpha: float,
                 idx: np.ndarray | None = None) -> list[Evaluation]:
        """The forward products of the trial point ``cand`` (see the class docstring); ``idx`` is
        :meth:`support` of ``d`` if known."""
        md = self._floor_products(d, self.support(d) if idx is None else idx) if any(self.costly) else None
        tiny = np.finfo(float).tiny
        if self.mv is not None and md is not None:
            self.derived += 1
            out = []
            for b, c, q0, mr, mv, m in zip(self.blocks, self.costly, self.p0, self.mr, self.mv, md):
                if c:
                    q = q0 - (2.0 * alpha) * mr + (alpha * alpha) * mv
                    q += m
                    q /= s
                    out.append(np.maximum(q, tiny, out=q))
                else:
                    out.append(b.forward(cand))
            return out
        self.ffts += 1
        pc = _forward_all(self.blocks, cand)
        if self.mv is None and md is not None:
            self.mv = [(s * q - m - q0 + (2.0 * alpha) * mr) / (alpha * alpha) if c else None
                       for c, q, m, q0, mr in zip(self.costly, pc, md, self.p0, self.mr)]
        return pc

    def theta2(self, th2: np.ndarray) -> list[Evaluation]:
        """``M theta2``: derived when a trial has given ``M v``, else evaluated."""
        if self.mv is None:
            return _forward_all(self.blocks, th2)
        tiny = np.finfo(float).tiny
        return [np.maximum(q0 + 2.0 * mr + mv, tiny) if c else b.forward(th2)
                for b, c, q0, mr, mv in zip(self.blocks, self.costly, self.p0, self.mr, self.mv)]


def _floor_part(theta: np.ndarray, r: np.ndarray, v: np.ndarray, alpha: float, floor: np.ndarray,
                bufs: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(raw, d)`` for SQUAREM's trial ``raw = theta - 2 alpha r + alpha^2 v`` (the same operations as
    the engine's other path) and the floor's part ``d = max(floor - raw, 0)`` (``= max(raw, floor) -
    raw``), in the kept buffers ``bufs`` (overwritten by the next call)."""
    raw = np.multiply(r, 2.0 * alpha, out=bufs[0])
    np.subtract(theta, raw, out=raw)
    raw += np.multiply(v, alpha * alpha, out=bufs[1])
    d = np.subtract(floor, raw, out=bufs[1])
    return raw, np.maximum(d, 0.0, out=d)


def _trial_point(raw: np.ndarray, d: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``(cand, d, s)``: the trial point ``cand = max(raw, floor) / s``, ``s = sum(max(raw, floor))``."""
    cand = np.maximum(raw, floor)
    s = cand.sum()
    cand /= s
    return cand, d, s


def _newton_warm(blocks: Sequence[LikelihoodBlock], fin: Any, theta: np.ndarray, probs: list[Evaluation],
                 L: float, n: float) -> tuple[np.ndarray, list[Evaluation], float]:
    """After an uncertified Newton attempt: its best point when that raises ``L``, else the current
    iterate. The products' round-off can keep the KKT test from passing at a point that is already
    the maximum to the last digits (planar FFT blocks); EM steps from it then meet the stopping rule
    in a few evaluations, and the rule, not the attempt, certifies the result. ``L`` never decreases.

    The best point's zeros are floored at :data:`TINY` (EM may still revive them, by their factor
    per step), except the zeros the attempt clearly got wrong: those whose EM factor there,
    ``f_x = grad_x / n``, exceeds ``1 + WARM_REVIVE`` restart at the current iterate's value (when
    that keeps ``L`` above the current one). From ``TINY`` EM would need about ``644 / log f_x``
    steps to bring such a cell back (a 1000 x 1000 planar run sat on one log-likelihood for 700
    evaluations); a zero that the maximum keeps has ``f_x <= 1`` and stays at ``TINY``."""
    if fin.best is None or not fin.best_loglik > L:
        return theta, probs, L
    th = np.maximum(fin.best, TINY)
    th /= th.sum()
    p = _forward_all(blocks, th)
    Lw = total_loglik(blocks, p)
    if not Lw > L:
        return theta, probs, L
    wrong = (fin.best <= 0.0) & (theta > TINY) & (_gradient(blocks, p) > n * (1.0 + WARM_REVIVE))
    if wrong.any():
        th2 = th.copy()
        th2[wrong] = theta[wrong]
        th2 /= th2.sum()
        p2 = _forward_all(blocks, th2)
        L2 = total_loglik(blocks, p2)
        if L2 > L:
            return th2, p2, L2
    return th, p, Lw


def _squarem(blocks: Sequence[LikelihoodBlock], theta: np.ndarray, probs: Sequence[Evaluation], L: float, n: float,
             delta: float, max_iter: int, record: Record, trace: list[float], stop: str, newton: bool = False,
             penalty: Penalty | None = None, objective: Objective | None = None,
             progress: Callable[..., object] | None = None, fast: Fast | None = None) -> EMResult:
    """SQUAREM-accelerated EM (see the module docstring); ``iterations`` = EM-map evaluations.

    With ``fast`` (:func:`_compiled`) the cycles run in the compiled kernel from evaluation
    :data:`COMPILED_AFTER` on (same operations and decisions; Newton attempts stay here). With a
    block whose forward product is costly (``costly_forward``, the planar FFT blocks) the
    extrapolation is accepted when ``L(theta') >= L(theta1)`` (known: ``theta1``'s forward product is
    needed for ``theta2`` anyway) instead of ``L(theta2)``, and ``theta2``'s forward product is not
    made: the first trial's product is an FFT, and once it is known the products of later trials and
    of ``theta2`` (on a fallback) follow from it without FFTs (:class:`_Path`) whenever the floor's
    part of the trial points lies on a few cells (the block's ``sparse_limit``). So a cycle makes
    one forward and one backward product per EM evaluation; a first trial on which the floor binds
    on many cells is shortened before its FFT (:data:`DENSE_FLOOR_STEP`), and only such a trial, if
    rejected, costs one more forward product. The step cap
    regrows by :data:`GROWTH_COSTLY` instead of 4 (fewer such trials fail). ``L`` still never
    decreases: ``L(theta3) >= L(theta') >= L(theta1) >= L(theta)``, ``L(theta3)`` from an FFT."""
    objective = objective or _objective(blocks, penalty)
    lazy = any(b.costly_forward for b in blocks)
    bufs: tuple[np.ndarray, np.ndarray] | None = None
    t = 0
    cycles = 0
    alpha_max = 4.0
    products = 0
    gap = math.nan
    next_newton = NEWTON_FIRST if newton else None
    scheme = "newton" if newton else "squarem"
    # with the certified rule the Newton finish must certify below delta: then its point meets it
    kkt_tol = min(KKT_TOL, 0.5 * delta) if stop == "gap" else KKT_TOL

    # ---- accelerated phase -------------------------------------------------------------------
    while t + 2 <= max_iter:
        if fast is not None and t >= COMPILED_AFTER:
            mod, fd, fb, z, c, live, rule = fast
            theta, p, L, gap, t, cycles, alpha_max, status = mod.kernels()["squarem"](  # one signature: cast
                theta, probs[0], float(L), fd, fb, z, c, live, float(n), rule, float(delta), int(t), int(max_iter),
                int(cycles), float(alpha_max), float(gap), int(next_newton if next_newton is not None else 1 << 62),
                TINY, FLOOR, MAX_BACKTRACK)
            probs = [p]
            if status == 1:
                return EMResult(theta, L, t, True, trace, scheme=scheme, cycles=cycles, products=products,
                                gap=gap, stop=stop)
            if status != 2:
                break
            assert next_newton is not None  # status 2 (a Newton attempt is due) needs one
            next_newton *= 4
            fin = newton_finish(blocks, theta, n, kkt_tol=kkt_tol)
            products += fin.products
            if fin.theta is not None and fin.loglik >= L:  # certified
                theta, probs, L = fin.theta, _forward_all(blocks, fin.theta), fin.loglik
                break
            theta, probs, L = _newton_warm(blocks, fin, theta, probs, L, n)
            continue
        th1, gap1 = _em_update(blocks, theta, probs, n, penalty)
        p1 = _forward_all(blocks, th1)
        t += 1
        if stop == "gap" and gap1 < delta:  # theta is certified, and so is its EM image th1
            L1 = objective(th1, p1)
            record(t, th1, L1, gap1, "squarem")
            return EMResult(th1, L1, t, True, trace, scheme=scheme, cycles=cycles, products=products,
                            gap=gap1, stop=stop)
        th2, gap2 = _em_update(blocks, th1, p1, n, penalty)
        t += 1
        p2: list[Evaluation] | None
        L2: float | None
        if lazy:  # theta2's forward product only if the cycle falls back to it (see above)
            p2, L2 = None, None
            Lref = objective(th1, p1)
            path = _Path(blocks, probs, p1)
            floor = FLOOR * th2
            if bufs is None:
                bufs = np.empty(theta.size), np.empty(theta.size)
        else:
            path = None
            p2 = _forward_all(blocks, th2)
            L2 = Lref = objective(th2, p2)
        r = th1 - theta
        v = th2 - th1
        v -= r
        nr, nv = math.sqrt(r @ r), math.sqrt(v @ v)
        new, pnew, Lnew, gnew = th2, p2, L2, gap2
        if nv > 0 and nr > 0 and t < max_iter:
            alpha = max(-nr / nv, -alpha_max)
            if alpha <= -alpha_max:
                alpha_max *= GROWTH_COSTLY if lazy else 4.0  # the step reached its cap: allow longer steps
            accepted = False
            chosen: tuple[np.ndarray, list[Evaluation]] | None = None
            first: tuple[np.ndarray, np.ndarray, float] | None = None
            if path is not None and alpha < -1.0:
                assert bufs is not None  # a path comes with its buffers (lazy)
                # a first trial on which the floor binds on many cells would cost an FFT that cannot
                # give the path's products (_Path): shorten it, before any FFT, to DENSE_FLOOR_STEP
                while True:
                    raw, d = _floor_part(theta, r, v, alpha, floor, bufs)
                    first_idx = path.support(d) if alpha >= -DENSE_FLOOR_STEP else path.support_if_few(d)
                    if first_idx is not None:
                        break
                    alpha = (alpha - 1.0) / 2.0
                first = _trial_point(raw, d, floor)
            # backtracking: move alpha halfway towards -1 until L(theta') >= L(theta2)
            for trial in range(MAX_BACKTRACK):  # noqa: B007  (read after the loop)
                if alpha >= -1.0:
                    break
                # coordinates pushed (nearly) out of the simplex are heading to 0: put them at a
                # fraction of their plain-EM value (keeps the support: no coordinate lost for good)
                if path is None:
                    raw = theta - 2.0 * alpha * r + alpha * alpha * v
                    cand = np.maximum(raw, FLOOR * th2)
                    cand /= cand.sum()
                    pc = _forward_all(blocks, cand)
                elif first is not None:  # the first trial, computed above
                    (cand, d, s), idx, first = first, first_idx, None
                    pc = path.products(cand, d, s, alpha, idx)
                else:  # products without an FFT when known (_Path)
                    assert bufs is not None  # a path comes with its buffers (lazy)
                    cand, d, s = _trial_point(*_floor_part(theta, r, v, alpha, floor, bufs), floor)
                    pc = path.products(cand, d, s, alpha)
                Lc = objective(cand, pc)
                if Lc >= Lref:  # -inf (an impossible report) never passes
                    chosen = cand, pc
                    break
                alpha = (alpha - 1.0) / 2.0
                if alpha > -1.0 - 1e-3:
                    alpha = -1.0
            if chosen is not None:
                cand, pc = chosen
                th3, gap3 = _em_update(blocks, cand, pc, n, penalty)
                p3 = _forward_all(blocks, th3)
                L3 = objective(th3, p3)
                t += 1
                if Lref <= L3:  # always true for EM from cand (Lc >= Lref); kept as a guard
                    new, pnew, Lnew, gnew = th3, p3, L3, gap3
                    accepted = True
                    if trial:  # a shorter step was needed: cap the next ones there
                        alpha_max = max(4.0, -alpha)
            if not accepted:
                alpha_max = max(4.0, alpha_max / 4.0)
        if pnew is None:  # lazy: the cycle keeps theta2
            assert path is not None  # pnew is None only with a path (lazy)
            pnew = p2 = path.theta2(th2)
            Lnew = L2 = objective(th2, p2)
        assert Lnew is not None  # set with pnew
        cycles += 1
        done = stop != "gap" and _stop_value(stop, theta, new, L, Lnew) < delta
        theta, probs, L, gap = new, pnew, Lnew, gnew
        record(t, theta, L, gap, "squarem")
        if done:
            break
        if next_newton is not None and cycles >= next_newton:
            next_newton *= 4
            fin = newton_finish(blocks, theta, n, kkt_tol=kkt_tol,
                                callback=None if progress is None else
                                (lambda th, ll, t=t: progress(t, th, ll, gap=math.nan, phase="newton")))  # type: ignore[misc]  # mypy infers no lambda with a bound default (t=t) against a 2-argument Callable
            products += fin.products
            if fin.theta is not None and fin.loglik >= L:  # certified; EM steps from it verify the stopping rule
                theta, probs, L = fin.theta, _forward_all(blocks, fin.theta), fin.loglik
                break
            theta, probs, L = _newton_warm(blocks, fin, theta, probs, L, n)
    # ---- finishing phase: plain EM until one plain step meets the rule ----------------------
    theta, L, t, converged, gap = _plain_em(blocks, theta, probs, L, n, delta, max_iter, stop, t, record,
                                            penalty, objective, gap, fast=fast)
    return EMResult(theta, L, t, converged, trace, scheme=scheme, cycles=cycles, products=products,
                    gap=gap, stop=stop)
