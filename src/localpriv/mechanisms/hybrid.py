"""The Hybrid mechanism for a number in ``[-1, 1]`` (``hm``).

Wang, Xiao, Yang, Zhao, Hui, Shin, Shin and Yu, "Collecting and Analyzing Multidimensional Data
with Local Differential Privacy", ICDE 2019, Algorithm 3 and Lemma 4: with probability ``alpha``
the Piecewise mechanism (:mod:`~localpriv.mechanisms.piecewise`), else Duchi et al.'s mechanism
(:mod:`~localpriv.mechanisms.duchi`), both at ``eps``, where::

    alpha = 1 - e^{-eps/2}   if eps > eps*,   alpha = 0 otherwise,
    eps* = ln((-5 + 2 (6353 - 405 sqrt(241))^{1/3} + 2 (6353 + 405 sqrt(241))^{1/3}) / 27) ~ 0.61,

the mixture that minimizes the worst-case variance. Both parts are unbiased, so ``E[z | t] = t``
and ``Var[z | t] = alpha (Var_PM[z | t] + t^2) + (1 - alpha) B^2 - t^2``.

Reports are ``float64``: Duchi's part reports ``+-B`` (``B = coth(eps/2)``), Piecewise's a real in
``[-C, C]``. The likelihood is taken with respect to counting measure at ``+-B`` plus Lebesgue
measure elsewhere: ``G[x, j] = (1 - alpha) P_Duchi(z_j | t_x)`` for ``z_j = +-B`` and
``alpha f_PM(z_j | t_x)`` otherwise (a Piecewise draw equal to ``+-B`` to the last bit has
probability ~2^-52 and would be read as Duchi's). Privacy from the proven formula evaluated with
the floats in use: the larger of the Piecewise level ``log p - log(p/e^eps)`` (if ``alpha > 0``)
and Duchi's level on the cell centres (if ``alpha < 1``), each a ratio of the likelihood's own
values (mixing weights cancel). Input cells are perturbed at their centres as in both parts.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.mechanisms._numeric import mean_interval, signed_centres
from localpriv.mechanisms.base import Mechanism, register
from localpriv.mechanisms.duchi import Duchi
from localpriv.mechanisms.piecewise import Piecewise, WindowBlock
from localpriv.mechanisms.privacy import checked_epsilon, ldp_epsilon
from localpriv.utils.validation import LocalPrivError, PrivacyWarning, check_eps, check_int, check_rng

if TYPE_CHECKING:
    from localpriv.domains import Domain
    from localpriv.utils.interval import Interval

__all__ = ["Hybrid", "HM_EPS_STAR"]

_R = math.sqrt(241.0)
#: ``eps*`` of Wang et al. (2019), Lemma 4: below it the Hybrid mechanism is Duchi's alone
HM_EPS_STAR = math.log((-5.0 + 2.0 * (6353.0 - 405.0 * _R) ** (1 / 3) + 2.0 * (6353.0 + 405.0 * _R) ** (1 / 3))
                       / 27.0)


@register
class Hybrid(Mechanism):
    """The Hybrid mechanism (Wang et al. 2019) on ``k`` cells of ``[-1, 1]`` at level ``eps``.

    Parameters
    ----------
    k : int
        Number of input cells (the domain's size).
    eps : float
        Privacy parameter.
    """

    spec_name = "hm"
    examples = (dict(spec="hm(k=5,eps=2.0)", eps_ldp=2.0, tight=True),
                dict(spec="hm(k=5,eps=0.5)", eps_ldp=0.5))  # below eps* ~ 0.61: Duchi's part alone
    report_kind = "float64"

    def __init__(self, k: int, eps: float) -> None:
        self.k = check_int(k, "k", minimum=1)
        self.eps = check_eps(eps)
        self.pm = Piecewise(self.k, self.eps)
        self.duchi = Duchi(self.k, self.eps)
        #: probability of the Piecewise part
        self.alpha = -math.expm1(-0.5 * self.eps) if self.eps > HM_EPS_STAR else 0.0

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps}

    @property
    def n_outputs(self) -> None:
        return None

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """Piecewise with probability ``alpha``, else Duchi's ``+-B``, at the cell's centre."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        t = signed_centres(self.k)[x]
        use_pm = rng.random(x.size) < self.alpha
        pm = self.pm.perturb(t, rng)
        bit = rng.random(x.size) < self.duchi.p_plus(t)
        return np.where(use_pm, pm, np.where(bit, self.duchi.B, -self.duchi.B))

    def channel(self) -> np.ndarray:
        raise LocalPrivError(f"{self}: reports are real numbers (no finite channel); use likelihood(reports)")

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        """Reports as float64: ``+-B``, or (when ``alpha > 0``) a number in ``[-C, C]``."""
        r = np.asarray(reports)
        if r.dtype.kind not in "iuf":
            raise LocalPrivError(f"{self}: reports must be numbers, got {r.dtype}")
        r = r.astype(np.float64).reshape(-1)
        atom = np.abs(r) == self.duchi.B
        limit = self.pm.C if self.alpha > 0 else -1.0
        bad = ~atom & (~np.isfinite(r) | (np.abs(r) > limit))
        if bad.any():
            raise LocalPrivError(f"{self}: reports outside its output space (+-B = +-{self.duchi.B:.6g}"
                                 f"{f' or [-C, C] = [{-self.pm.C:.6g}, {self.pm.C:.6g}]' if self.alpha > 0 else ''}): "
                                 f"{np.unique(r[bad])[:5].tolist()}")
        return r

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """``G[x, j]``: ``(1 - alpha) P_Duchi(z_j | t_x)`` at ``+-B``, ``alpha f_PM(z_j | t_x)`` elsewhere."""
        z = self.output_index(reports)
        check_dense_size(self.k, z.size, f"{self} likelihood of {z.size} reports")
        t = signed_centres(self.k)[:, None]
        p = self.duchi.p_plus(t)
        atom = (np.abs(z) == self.duchi.B)[None, :]
        duchi = (1.0 - self.alpha) * np.where(z[None, :] > 0, p, 1.0 - p)
        pm = self.alpha * self.pm.density(z[None, :], t)
        return np.where(atom, duchi, pm)

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> LikelihoodBlock:
        """The atoms ``+-B`` as (at most two) dense columns, the Piecewise reports as a
        :class:`~localpriv.mechanisms.piecewise.WindowBlock` scaled by ``alpha``: ``O(k + m)`` per
        product."""
        z = self.output_index(reports)
        counts = np.asarray(counts, dtype=float)
        atom = np.abs(z) == self.duchi.B
        t = signed_centres(self.k)
        left, right = self.pm.window(t)
        return _HybridBlock(atom, self.likelihood(z[atom]),
                            WindowBlock(z[~atom], left, right, self.pm.p_in, self.pm.p_out, counts[~atom],
                                        scale=self.alpha), counts)

    def epsilon_ldp(self) -> float:
        """The larger of the parts' levels (module docstring), from the floats in use."""
        import warnings
        levels = []
        if self.alpha > 0:
            levels.append(math.log(self.pm.p_in) - math.log(self.pm.p_out) if self.k >= 2 else 0.0)
        if self.alpha < 1:
            with warnings.catch_warnings():  # one warning, for the total, below
                warnings.simplefilter("ignore", PrivacyWarning)
                levels.append(ldp_epsilon(self.duchi.channel()))
        return checked_epsilon(max(levels), str(self))

    # ---- the classic estimator ------------------------------------------------------------
    def unbiased(self, reports: ArrayLike) -> np.ndarray:
        """Per-report unbiased estimates of ``t``: the reports themselves."""
        return self.output_index(reports)

    def report_variance(self, t: ArrayLike) -> np.ndarray:
        """``alpha (Var_PM[z | t] + t^2) + (1 - alpha) B^2 - t^2`` (Wang et al. 2019, Lemma 4)."""
        t = np.asarray(t, dtype=float)
        return self.alpha * (self.pm.report_variance(t) + t ** 2) + (1.0 - self.alpha) * self.duchi.B ** 2 - t ** 2

    def estimate_mean(self, reports: ArrayLike, domain: Domain | None = None, level: float = 0.95) -> Interval:
        """The unbiased mean of the reports with its normal interval, in the domain's units."""
        return mean_interval(self.unbiased(reports), self.k, True, domain, level, "hm (unbiased)")


class _HybridBlock(LikelihoodBlock):
    """Columns ``atom`` from a dense ``k x n_atoms`` matrix, the others from a window block."""

    def __init__(self, atom: np.ndarray, G_atoms: np.ndarray, window: WindowBlock, counts: np.ndarray) -> None:
        # (no attribute ``G``: the uncertainty module reads one as the whole dense matrix)
        self.atom, self._atoms, self.window, self.counts = atom, G_atoms, window, counts
        self.k = window.k
        self._G2 = G_atoms * G_atoms

    def forward(self, theta: np.ndarray) -> np.ndarray:
        out = np.empty(self.atom.size)
        out[self.atom] = np.asarray(theta, dtype=float) @ self._atoms
        out[~self.atom] = self.window.forward(theta)
        return out

    def backward(self, w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, dtype=float)
        return self._atoms @ w[self.atom] + self.window.backward(w[~self.atom])

    def hessian_diagonal(self, w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, dtype=float)
        return self._G2 @ w[self.atom] + self.window.hessian_diagonal(w[~self.atom])
