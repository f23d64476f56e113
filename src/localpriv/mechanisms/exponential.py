"""The exponential mechanism on a finite metric domain (seed 001 section 7.3, refs [25], [31]).

Every input ``x`` reports an element ``z`` of the same domain with probability::

    P(z | x) = exp(-eps d(x, z) / 2) / C(x),      C(x) = sum_{z'} exp(-eps d(x, z') / 2),

i.e. the usual utility ``-d(x, z)`` with sensitivity 1 per unit of distance, normalized per row.

Privacy: ``P(z|x) / P(z|x') = exp(eps (d(x',z) - d(x,z)) / 2) * C(x') / C(x)``; both factors are
at most ``exp(eps d(x,x') / 2)`` (triangle inequality), so the mechanism is eps-geo-
indistinguishable. The level computed from the channel is usually *strictly smaller* than eps
(the two factors rarely reach their bounds together): e.g. on ``0..99`` with eps = 0.05 it is
about 0.0494 (:meth:`Exponential.epsilon_geo` gives the exact value for any domain).

LDP level from the structure. For fixed ``x, x'`` the ratio's first factor is largest
at ``z = x`` (``max_z d(x',z) - d(x,z) = d(x,x')``, triangle inequality, attained at ``z = x``), so

    eps_LDP = max_{x,x'} [ eps d(x,x') / 2 + log C(x') - log C(x) ],

computed in log space (``log C`` by logsumexp) from the distance matrix, without the channel.
On the integers ``0..k-1`` (``IntegerDomain``, the default) it is ``eps (k-1) / 2`` in closed
form: with ``a = e^{-eps/2}``, ``C(x+1) >= a C(x)`` (``|x+1-z| <= |x-z| + 1``), so the bracket
grows when ``x`` moves down or ``x'`` up, and ``C(0) = C(k-1)`` by symmetry.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.domains import CategoricalDomain, Domain, IntegerDomain
from localpriv.domains.grid import GridDomain
from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.likelihood.structured import NormalizedGridKernelBlock
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.matrix import MatrixMechanism
from localpriv.mechanisms.planar import DENSE_PER_FFT_POINT
from localpriv.mechanisms.privacy import checked_epsilon
from localpriv.utils.validation import LocalPrivError, check_eps, check_int, check_rng


def logsumexp(*args: Any, **kwargs: Any) -> Any:
    """``scipy.special.logsumexp``, imported on first use (keeps ``import localpriv`` quick)."""
    from scipy.special import logsumexp as _f
    return _f(*args, **kwargs)


__all__ = ["Exponential", "utility_exponential"]


@register
class Exponential(Mechanism):
    """Exponential mechanism ``P(z|x) ∝ exp(-eps d(x, z)/2)`` on the domain it is applied to.

    Parameters
    ----------
    k : int
        Number of inputs (= outputs).
    eps : float
        Geo-indistinguishability parameter, in inverse units of the domain's distance.
    domain : Domain, optional
        Its ``distance_matrix()`` is the metric ``d`` (``IntegerDomain``: ``|x - y|``;
        ``GridDomain``: km between cell centres; ``CategoricalDomain``: the discrete metric).
        Defaults to the integers ``0..k-1``.
    """

    spec_name = "exponential"
    examples = (dict(spec="exponential(k=4,eps=1.0)", eps_ldp=3.0, eps_geo=1.0),)

    def __init__(self, k: int, eps: float, domain: Domain | None = None) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.eps = check_eps(eps)
        if domain is None:
            domain = IntegerDomain(0, self.k - 1)
        if domain.size != self.k:
            raise LocalPrivError(f"exponential: k={self.k} but the domain has {domain.size} elements")
        self.domain = domain
        self._M: np.ndarray | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any], domain: Domain | None = None) -> Exponential:
        """As :meth:`Mechanism.from_params`, and ``lo``/``hi`` for the integers ``lo..hi``:
        ``exponential(eps=0.05,lo=0,hi=99)`` is ``exponential(k=100,eps=0.05)`` (the metric
        ``|x - y|`` does not depend on where the line starts). A ``k`` or a domain of another size
        is a one-line error."""
        params = dict(params)
        lo, hi = params.pop("lo", None), params.pop("hi", None)
        if lo is None and hi is None:
            mech = super().from_params(params, domain)
            assert isinstance(mech, Exponential)  # built by cls(**params)
            return mech
        if lo is None or hi is None:
            raise LocalPrivError("exponential: give both lo and hi (the integers lo..hi) or neither")
        lo, hi = check_int(lo, "exponential: lo"), check_int(hi, "exponential: hi")
        if hi < lo:
            raise LocalPrivError(f"exponential: need lo <= hi, got lo={lo}, hi={hi}")
        k = IntegerDomain(lo, hi).size
        if params.get("k") is not None and check_int(params["k"], "k") != k:
            raise LocalPrivError(f"exponential: k={params['k']} disagrees with lo={lo},hi={hi} ({k} values)")
        if domain is not None and (domain.size != k or not isinstance(domain, IntegerDomain)):
            raise LocalPrivError(f"exponential: lo={lo},hi={hi} ({k} integers) disagrees with the domain "
                                 f"{domain.spec()} ({domain.size} elements)")
        params["k"] = k
        mech = super().from_params(params, domain)
        assert isinstance(mech, Exponential)  # built by cls(**params)
        return mech

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps}

    @property
    def n_outputs(self) -> int:
        return self.k

    def channel(self) -> np.ndarray:
        if self._M is None:
            check_dense_size(self.k, self.k, f"{self} channel")
            logw = -0.5 * self.eps * np.asarray(self.domain.distance_matrix(), dtype=float)
            logw -= logw.max(axis=1, keepdims=True)
            w = np.exp(logw)
            self._M = w / w.sum(axis=1, keepdims=True)
        return self._M

    def epsilon_ldp(self) -> float:
        """``max_{x,x'} [eps d(x,x')/2 + log C(x') - log C(x)]`` (module doc), in log space: the
        closed form ``eps (k-1)/2`` on an integer domain, else from the ``k x k`` distances (no
        channel; refused above the dense-size cap)."""
        if type(self.domain) is IntegerDomain:
            # d = |x - x'| in unit steps: the maximum is at x = lo, x' = hi, where C(lo) = C(hi)
            return checked_epsilon(0.5 * self.eps * (self.k - 1), str(self))
        check_dense_size(self.k, self.k, f"{self} distance matrix")
        d = np.asarray(self.domain.distance_matrix(), dtype=float)
        log_C = logsumexp(-0.5 * self.eps * d, axis=1)
        bracket = 0.5 * self.eps * d + (log_C[None, :] - log_C[:, None])  # [x, x']
        return checked_epsilon(float(bracket.max()), str(self))

    def epsilon_geo(self, distance: ArrayLike | None = None) -> float:
        """The metric level ``max_{x != x'} max_z log(M[x,z] / M[x',z]) / d(x,x')`` from the structure.

        With ``log M[x,z] = -eps d(x,z) / 2 - log C(x)``, the inner maximum is
        ``eps (d(x',z) - d(x,z)) / 2 + log C(x') - log C(x)``, and ``d(x',z) - d(x,z) <= d(x,x')``
        (triangle inequality) with equality at ``z = x`` (``d(x,x) = 0``), so

            eps_g = eps / 2 + max_{x != x'} (log C(x') - log C(x)) / d(x,x'),

        the same maximum as the dense formula (:func:`localpriv.mechanisms.privacy.geo_epsilon`)
        up to the rounding of the channel's entries, in ``O(k^2)`` from the ``k x k`` distances
        (``log C`` by logsumexp; no channel, no ``k^3`` pass). Any metric (``d(x,x') > 0`` for
        ``x != x'``); refused above the dense-size cap.

        The formula holds while every entry of the released channel is a normal float (its log
        above :data:`NORMAL_LOG`); beyond, some entries are rounded to subnormals or to 0 (the
        sampler then never releases them) and the level is the dense formula on the channel
        itself: ``inf`` as soon as an entry is 0 (``M[z,z] >= 1/k > 0``, so the pair ``(z, x)``
        has a zero beside a non-zero). An explicit ``distance`` takes the dense formula too.
        """
        if distance is not None:
            return super().epsilon_geo(distance)
        check_dense_size(self.k, self.k, f"{self} distance matrix")
        if self.k < 2:
            return checked_epsilon(0.0, str(self), kind="epsilon_geo")
        d = np.asarray(self.domain.distance_matrix(), dtype=float)
        logw = -0.5 * self.eps * d
        log_C = logsumexp(logw, axis=1)
        if float((logw.min(axis=1) - log_C).min()) <= self.NORMAL_LOG:
            M = self.channel()
            if not (M > 0).all():
                return checked_epsilon(np.inf, str(self), kind="epsilon_geo")
            return super().epsilon_geo()
        np.fill_diagonal(d, np.inf)  # x = x' is no pair
        spread = (log_C[None, :] - log_C[:, None]) / d  # [x, x']
        return checked_epsilon(max(0.0, 0.5 * self.eps + float(spread.max())), str(self), kind="epsilon_geo")

    #: the structural metric level is used while every channel entry's log is above this (the
    #: smallest normal float64 is ``e^-708.4``; the margin covers the rounding of ``log C``)
    NORMAL_LOG = -700.0

    def rank_from_structure(self) -> tuple[int, str] | None:
        """Rank ``k`` on the integers, a grid (Euclidean distances) or a categorical domain (the
        discrete metric): ``M = D^{-1} A`` with ``D`` the diagonal of ``C(x)`` and
        ``A[x, z] = exp(-eps d(x, z) / 2)`` a strictly positive definite kernel matrix (the Laplace
        kernel ``e^{-c ||x - z||}`` on R^d; ``(1-a) I + a 11^T`` with ``a < 1`` for the discrete
        metric), hence invertible. Other domains: ``None``."""

        if type(self.domain) in (IntegerDomain, CategoricalDomain, GridDomain):
            return self.k, "exact: M = D^-1 A with A = exp(-eps d/2) a strictly positive definite kernel matrix"
        return None

    def likelihood_block(self, reports: ArrayLike, counts: np.ndarray) -> LikelihoodBlock:
        """The dense block; on a grid whose ``k x (distinct reports)`` block has more than
        :data:`~localpriv.mechanisms.planar.DENSE_PER_FFT_POINT` entries per point of the padded FFT
        grid (``(3 nrows - 2)(3 ncols - 2)``), the same channel as FFT products
        (:class:`localpriv.likelihood.structured.NormalizedGridKernelBlock`: the distance between
        two cell centres depends on their displacement only, ``K[i, j] = exp(-eps s sqrt(i^2 +
        j^2) / 2)``)."""
        d = self.domain
        if isinstance(d, GridDomain):
            outputs = self.output_index(reports)
            if self.k * np.unique(outputs).size > DENSE_PER_FFT_POINT * (3 * d.nrows - 2) * (3 * d.ncols - 2):
                i = np.arange(-(d.nrows - 1), d.nrows, dtype=float)[:, None]
                j = np.arange(-(d.ncols - 1), d.ncols, dtype=float)[None, :]
                kernel = np.exp(-0.5 * self.eps * d.cell_km * np.hypot(i, j))
                return NormalizedGridKernelBlock(kernel, (d.nrows, d.ncols), outputs, counts)
        return super().likelihood_block(reports, counts)

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """Inverse-CDF sampling from the channel rows, vectorized (one binary search per user)."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        cdf = np.cumsum(self.channel(), axis=1)
        cdf[:, -1] = 1.0
        u = rng.random(x.size)
        # rows of the CDF are increasing and all end at 1: offset row r by r to search one array
        flat = (cdf + np.arange(self.k)[:, None]).ravel()
        pos = np.searchsorted(flat, u + x, side="right") - x * self.k
        return np.minimum(pos, self.k - 1).astype(np.int64)


def utility_exponential(utility: ArrayLike, eps: float, sensitivity: float | None = None, *,
                        factor: float = 2.0) -> MatrixMechanism:
    """The exponential mechanism for any utility (McSherry and Talwar, FOCS 2007; seed 004 section
    3.4.3, Theorem 3.4.2) as a finite mechanism: input ``x`` (a user's value, the "database" of
    the local model) releases output ``r`` with probability::

        P(r | x) = exp(eps u(x, r) / (factor du)) / sum_r' exp(eps u(x, r') / (factor du)),

    ``du = max_{x, x'} max_r |u(x, r) - u(x', r)|`` (Eq. 3.7; computed when not given).

    ``factor = 2`` (default) is McSherry and Talwar's mechanism: each factor of the ratio
    ``P(r|x) / P(r|x')`` (the weights and the normalizers) is at most ``e^{eps/2}``, so the level is
    at most ``eps``. Theorem 3.4.2 as printed uses ``factor = 1``; it guarantees only ``2 eps`` in
    general (``eps`` when the utility is monotone in the data): with ``factor = 1`` a utility that
    raises one output and lowers the others by ``du`` reaches ``2 eps`` as the outputs grow
    (``docs/multiattr.md``). Whatever the factor, the returned mechanism's level is computed from
    its channel (:meth:`~localpriv.mechanisms.base.Mechanism.epsilon_ldp`), never taken from
    ``eps``.

    Parameters
    ----------
    utility : array (k, m)
        ``u(x, r)`` for the ``k`` inputs and ``m`` outputs (finite reals).
    eps : float
    sensitivity : float, optional
        ``du``; must be at least the computed one (a smaller value would overstate privacy).
    factor : float
        2 (the mechanism) or 1 (the printed theorem, for comparison).

    Returns
    -------
    MatrixMechanism
    """

    eps = check_eps(eps)
    u = np.asarray(utility, dtype=float)
    if u.ndim != 2 or u.shape[0] < 1 or u.shape[1] < 1 or not np.all(np.isfinite(u)):
        raise LocalPrivError("utility must be a finite k x m table (inputs x outputs)")
    if not (isinstance(factor, (int, float)) and factor > 0):
        raise LocalPrivError(f"factor must be positive, got {factor!r}")
    du = float((u.max(axis=0) - u.min(axis=0)).max())
    if sensitivity is not None:
        if not float(sensitivity) >= du:
            raise LocalPrivError(f"sensitivity {sensitivity} is below the utility's own {du:g}: the level would be "
                                 "understated")
        du = float(sensitivity)
    if du == 0:
        return MatrixMechanism(rows=np.full(u.shape, 1.0 / u.shape[1]))
    logits = eps * u / (factor * du)
    logits -= logsumexp(logits, axis=1, keepdims=True)
    P = np.exp(logits)
    return MatrixMechanism(rows=P / P.sum(axis=1, keepdims=True))
