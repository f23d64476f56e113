"""Re-identification of the sampled attribute in multi-attribute reports (Arcolezi et al., VLDB 2023).

In RS+FD and RS+RFD one attribute of the report is the oracle's report of the user's true value
and the others are fake; the report does not say which. An adversary who knows the protocol and
the population's marginals ``f_j`` guesses it by Bayes' rule: the report value ``z_j`` has law
``(f_j C_j)`` when attribute ``j`` is the true one and ``F_j`` when it is fake, so

    P(j | z) ∝ (f_j C_j)[z_j] / F_j(z_j)        (the factor prod_i F_i(z_i) is common to every j).

:func:`sampled_attribute_attack` draws reports, applies this guess (ties broken uniformly at
random) and returns the attacker's accuracy next to random guessing (``1/d``). SMP releases the
attribute (accuracy 1); SPL samples none (no attack applies).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from localpriv.mechanisms.multiattr import MultiAttributeMechanism
from localpriv.utils.validation import LocalPrivError, check_rng

__all__ = ["AttributeAttack", "sampled_attribute_attack", "MAX_ATTACK_USERS"]

#: The most users one attack evaluation samples.
MAX_ATTACK_USERS = 10_000_000


@dataclass(frozen=True)
class AttributeAttack:
    """The attacker's accuracy at naming the sampled attribute.

    ``advantage = (accuracy - baseline) / (1 - baseline)``: 0 for random guessing, 1 for always right.
    """

    accuracy: float
    baseline: float
    n: int

    @property
    def advantage(self) -> float:
        return (self.accuracy - self.baseline) / (1.0 - self.baseline) if self.baseline < 1 else 0.0


def sampled_attribute_attack(mech: MultiAttributeMechanism, x: npt.ArrayLike, rng: np.random.Generator | int,
                             marginals: list[np.ndarray] | None = None) -> AttributeAttack:
    """Bayes' guess of the sampled attribute from each report of ``x`` (flat joint cells).

    Parameters
    ----------
    mech
        An ``smp``, ``rsfd`` or ``rsrfd`` mechanism.
    x
        The users' joint cells (at most :data:`MAX_ATTACK_USERS`).
    rng
        The generator of the reports and of the tie-breaking.
    marginals
        What the attacker knows of each attribute's marginal; default the empirical marginals of
        ``x`` (the strongest such attacker).

    Returns
    -------
    AttributeAttack
        Accuracy, the random-guess baseline ``1/d`` and ``n``.
    """
    if not isinstance(mech, MultiAttributeMechanism) or mech.kind == "spl":
        raise LocalPrivError("the sampled-attribute attack needs an smp, rsfd or rsrfd mechanism")
    cells = np.asarray(x).reshape(-1)
    if cells.size > MAX_ATTACK_USERS:
        raise LocalPrivError(f"attack: {cells.size:,} users is above the limit of {MAX_ATTACK_USERS:,}")
    rng = check_rng(rng)
    reports, att = mech.sample_with_attribute(cells, rng)
    n = int(att.size)
    if mech.kind == "smp":
        return AttributeAttack(1.0, 1.0 / mech.d, n)
    codes = np.stack(np.unravel_index(cells, mech.shape), axis=1)
    if marginals is None:
        marginals = [np.bincount(codes[:, j], minlength=s) / n for j, s in enumerate(mech.shape)]
    if len(marginals) != mech.d or any(np.asarray(f).size != s for f, s in zip(marginals, mech.shape)):
        raise LocalPrivError(f"attack: give one marginal per attribute, sizes {list(mech.shape)}")
    z, _ = mech.decode_reports(reports)
    score = np.empty((n, mech.d))
    for j in range(mech.d):  # over attributes, not users
        real = np.asarray(marginals[j], dtype=float) @ mech.channels[j]
        score[:, j] = real[z[:, j]] / mech.fake_laws[j][z[:, j]]
    best = score >= score.max(axis=1, keepdims=True) * (1 - 1e-12)
    guess = np.argmax(best * rng.random((n, mech.d)), axis=1)  # uniform among the maxima
    return AttributeAttack(float(np.mean(guess == att)), 1.0 / mech.d, n)
