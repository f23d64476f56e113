"""The Hybrid mechanism for a number in ``[-1, 1]`` (``hm``).

Wang, Xiao, Yang, Zhao, Hui, Shin, Shin and Yu, "Collecting and Analyzing Multidimensional Data
with Local Differential Privacy", ICDE 2019, Algorithm 3 and Lemma 4: with probability ``alpha``
the Piecewise mechanism (:mod:`~localpriv.mechanisms.piecewise`), else Duchi et al.'s mechanism
(:mod:`~localpriv.mechanisms.duchi`), both at ``eps``, where::

    alpha = 1 - e^{-eps/2}   if eps > eps*,   alpha = 0 otherwise,
    eps* = ln((-5 + 2 (6353 - 405 sqrt(241))^{1/3} + 2 (6353 + 405 sqrt(241))^{1/3}) / 27) ~ 0.61,

the mixture that minimizes the worst-case variance. Both parts are unbiased, so ``E[z | t] = t``
and ``Var[z | t] = alpha (Var_PM[z | t] + t^2) + (1 - alpha) B^2 - t^2``.

Reports are ``float64``: Duchi's part reports ``+-B`` (``B = coth(eps/2)``), Piecewise's a point
of its grid (:mod:`~localpriv.mechanisms.piecewise`, the discrete Piecewise mechanism, its grid
shifted by half a step if it would hold ``+-B``). Every choice is exact: the part by a 64-bit word
against ``alpha``'s threshold (``alpha`` is that dyadic probability), Duchi's sign by a word against
its threshold (:class:`~localpriv.mechanisms.duchi.Duchi`), the grid point by integers. So the
reports have a pmf: ``G[x, j] = (1 - alpha) P_Duchi(z_j | x)`` at ``+-B`` and
``alpha P_PM(z_j | x)`` on the grid, and the privacy level is the larger of the two parts'
computed levels (the supports are disjoint, so the mixing weights cancel in every ratio). The
classic estimator reads ``+-B`` as it is and a Piecewise report ``z`` as ``z / (kappa gamma)``
(unbiased for both parts).
"""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from localpriv.likelihood.blocks import LikelihoodBlock, check_dense_size
from localpriv.mechanisms._numeric import mean_interval
from localpriv.mechanisms._sampling import bernoulli64, dyadic64, threshold64
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
        self.duchi = Duchi(self.k, self.eps)
        #: probability of the Piecewise part (a multiple of 2^-64, drawn exactly)
        self.alpha_threshold = int(threshold64(-math.expm1(-0.5 * self.eps) if self.eps > HM_EPS_STAR else 0.0))
        self.alpha = float(dyadic64(self.alpha_threshold))
        self.pm: Piecewise | None = Piecewise(self.k, self.eps, avoid=self.duchi.B) if self.alpha > 0 else None

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "eps": self.eps}

    @property
    def n_outputs(self) -> None:
        return None

    def sample(self, x: ArrayLike, rng: np.random.Generator | int) -> np.ndarray:
        """Piecewise (on its grid) with probability ``alpha``, else Duchi's ``+-B``, for the cell."""
        x = self._check_inputs(x)
        rng = check_rng(rng)
        use_pm = bernoulli64([self.alpha_threshold], np.zeros(x.size, np.int64), rng)
        bit = self.duchi.draw_bits(x, rng)
        out = np.where(bit, self.duchi.B, -self.duchi.B)
        if self.pm is not None:
            pm = self.pm.values(self.pm.draw_index(self.pm.starts()[x], rng))
            out = np.where(use_pm, pm, out)
        return out

    def channel(self) -> np.ndarray:
        raise LocalPrivError(f"{self}: reports are real numbers (no finite channel); use likelihood(reports)")

    def output_index(self, reports: ArrayLike) -> np.ndarray:
        """Reports as float64: ``+-B``, or (when ``alpha > 0``) a number in ``[-C, C]``."""
        r = np.asarray(reports)
        if r.dtype.kind not in "iuf":
            raise LocalPrivError(f"{self}: reports must be numbers, got {r.dtype}")
        r = r.astype(np.float64).reshape(-1)
        atom = np.abs(r) == self.duchi.B
        if self.pm is None:
            if not atom.all():
                raise LocalPrivError(f"{self}: reports outside its output space (+-B = +-{self.duchi.B:.6g}): "
                                     f"{np.unique(r[~atom])[:5].tolist()}")
        elif not atom.all():
            try:
                self.pm.grid_index(r[~atom])
            except LocalPrivError:
                raise LocalPrivError(f"{self}: reports outside its output space (+-B = +-{self.duchi.B:.6g} "
                                     f"or a point of the grid of step {self.pm.grid!r} in "
                                     f"[{-self.pm.z_max:.6g}, {self.pm.z_max:.6g}])") from None
        return r

    def likelihood(self, reports: ArrayLike) -> np.ndarray:
        """``G[x, j]``: ``(1 - alpha) P_Duchi(z_j | t_x)`` at ``+-B``, ``alpha f_PM(z_j | t_x)`` elsewhere."""
        z = self.output_index(reports)
        check_dense_size(self.k, z.size, f"{self} likelihood of {z.size} reports")
        M = self.duchi.channel()
        atom = (np.abs(z) == self.duchi.B)[None, :]
        duchi = (1.0 - self.alpha) * np.where(z[None, :] > 0, M[:, 1:2], M[:, 0:1])
        if self.pm is None:
            return duchi
        pm = self.alpha * self.pm.pmf(z[None, :], np.arange(self.k)[:, None])
        return np.where(atom, duchi, pm)

    def likelihood_block(self, reports: ArrayLike, counts: ArrayLike) -> LikelihoodBlock:
        """The atoms ``+-B`` as (at most two) dense columns, the Piecewise reports as a
        :class:`~localpriv.mechanisms.piecewise.WindowBlock` scaled by ``alpha``: ``O(k + m)`` per
        product."""
        z = self.output_index(reports)
        counts = np.asarray(counts, dtype=float)
        atom = np.abs(z) == self.duchi.B
        pm = self.pm if self.pm is not None else Piecewise(self.k, self.eps)  # no reports of its own
        left, right = pm.values(pm.starts()), pm.values(pm.starts() + pm.width - 1)
        return _HybridBlock(atom, self.likelihood(z[atom]),
                            WindowBlock(z[~atom], left, right, pm.p_in, pm.p_out, counts[~atom],
                                        scale=self.alpha), counts)

    def epsilon_ldp(self) -> float:
        """The larger of the parts' computed levels (module docstring): the discrete Piecewise
        level from its integers, Duchi's from its (exact, dyadic) channel."""
        levels = []
        if self.pm is not None:
            levels.append(self.pm.epsilon_ldp())
        if self.alpha < 1:
            with warnings.catch_warnings():  # one warning, for the total, below
                warnings.simplefilter("ignore", PrivacyWarning)
                levels.append(ldp_epsilon(self.duchi.channel()))
        return checked_epsilon(max(levels), str(self))

    # ---- the classic estimator ------------------------------------------------------------
    def unbiased(self, reports: ArrayLike) -> np.ndarray:
        """Per-report unbiased estimates of ``t``: ``+-B`` as they are, a Piecewise report ``z`` as
        ``z / (kappa gamma)`` (:meth:`Piecewise.unbiased`)."""
        z = self.output_index(reports)
        if self.pm is None:
            return z
        return np.where(np.abs(z) == self.duchi.B, z, z / self.pm.mean_factor)

    def report_variance(self, t: ArrayLike) -> np.ndarray:
        """``alpha (Var_PM[u | t] + t^2) + (1 - alpha) B^2 - t^2`` (Wang et al. 2019, Lemma 4), with
        the discrete Piecewise part's variance (:meth:`Piecewise.report_variance`)."""
        t = np.asarray(t, dtype=float)
        pm = self.pm.report_variance(t) + t ** 2 if self.pm is not None else 0.0
        return self.alpha * pm + (1.0 - self.alpha) * self.duchi.B ** 2 - t ** 2

    def estimate_mean(self, reports: ArrayLike, domain: Domain | None = None, level: float = 0.95,
                      counts: ArrayLike | None = None) -> Interval:
        """The unbiased mean of the reports with its normal interval, in the domain's units."""
        return mean_interval(self.unbiased(reports), self.k, True, domain, level, "hm (unbiased)",
                             counts)


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
