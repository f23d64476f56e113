"""What a privacy level means, in plain words: the one place of the collector's explanations.

:func:`explain_level` has the signature of the library's ``explain_level(eps, delta=0) -> str``
(planned in :mod:`localpriv.mechanisms`); when that exists, this module may simply re-export it.
"""
from __future__ import annotations

import math

__all__ = ["explain_level", "MEANING", "COMPOSITION", "UNATTRIBUTED", "LONGITUDINAL"]

#: What any level means (the general sentence of the privacy report).
MEANING = ("a level eps means: whatever an observer believed about a person's value before, seeing what "
           "the person sent multiplies the odds between any two values by at most e^eps")

#: How the service adds levels up (docs/decisions/0053-device-budgets-at-ingest.md).
COMPOSITION = ("basic composition: a device's level over a period is the sum of the computed levels "
               "(epsilon_ldp) of every report it sent in the period")
#: Reports posted with a collection's shared ingest token.
UNATTRIBUTED = ("posted with the collection's shared ingest token: the service cannot tell which device "
                "sent them, so they are charged to no device and no budget bounds them")
#: How memoized (longitudinal) mechanisms are charged (docs/decisions/0053-device-budgets-at-ingest.md).
LONGITUDINAL = ("charged per report at min(epsilon_perm, epsilon_inst) (at least its one-report level): "
                "two reports of one memo can reveal more than twice the one-report level, and the service "
                "cannot see which reports share a memo, so the charge bounds either case")


def explain_level(eps: float, delta: float = 0.0) -> str:
    """One sentence on what an ``(eps, delta)`` level means to a person in the data.

    Whatever an observer believed about a person's value before, seeing the output multiplies the
    odds between any two values by at most ``e^eps`` [DR14]_ (and, with ``delta > 0``, except with
    probability at most ``delta``).

    Parameters
    ----------
    eps : float
        The level (``>= 0``; ``inf`` or ``NaN``: no guarantee).
    delta : float
        The probability the bound may fail (0 for pure LDP).

    Returns
    -------
    str
        One line.

    References
    ----------
    .. [DR14] Dwork, Roth, "The Algorithmic Foundations of Differential Privacy", 2014, section 2.3.
    """
    if not isinstance(eps, (int, float)) or math.isnan(eps) or eps < 0:
        return "no privacy level could be computed"
    if math.isinf(eps) or eps > 700:
        return "no meaningful guarantee: an observer may learn the value exactly"
    factor = math.exp(eps)
    shown = f"{factor:.3g}" if factor < 1e6 else f"{factor:.2e}"
    text = (f"seeing it multiplies an observer's odds between any two values of a person by at most "
            f"e^{eps:.3g} = {shown}")
    if delta > 0:
        text += f", except with probability at most {delta:.2g}"
    return text
