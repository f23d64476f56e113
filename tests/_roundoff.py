"""Round-off bounds for tests that compare two evaluations of the same numbers.

Two code paths (or two BLAS kernels) that compute the same quantity in different orders agree
only up to rounding, so a test may compare them only with a tolerance derived from a rounding
bound, and never at a point where rounding decides (an EM stop whose last ``|dL|`` is within
rounding of ``delta``). The bounds are the classical first-order worst cases (Higham, *Accuracy
and Stability of Numerical Algorithms*, 2nd ed., sections 3.1 and 4.2): with ``u = 2^-53``,

* a sum of ``m`` terms, added in ANY order (whatever a BLAS kernel, a thread split or numpy's
  pairwise summation chooses), is within ``(m - 1) u sum|terms|`` of the exact sum;
* a sum or product of ``m`` positive terms is therefore within ``(m - 1) u`` relative.
"""
import numpy as np

#: unit round-off of float64
U = np.finfo(float).eps / 2


def em_step_rtol(k: int, m: int) -> float:
    """Relative rounding of one EM/IBU update ``theta'_x = theta_x g_x / sum_y theta_y g_y``.

    ``p_j = theta @ G[:, j]`` (k positive terms, <= k u), ``c_j / p_j`` (+u),
    ``g_x = sum_j G[x, j] c_j / p_j`` (m positive terms, <= (m + k + 1) u), the product with
    ``theta_x`` and the normalizing sum (k terms) and division: ``<= (m + 2k + 4) u``.
    Two implementations each round that much, so they differ by at most twice it per update.
    """
    return 2 * (m + 2 * k + 4) * U


def em_rtol(iterations: int, k: int, m: int) -> float:
    """Relative difference allowed after ``iterations`` identical EM updates done by two codes.

    Each update multiplies every coordinate by a factor computed with relative rounding
    :func:`em_step_rtol`; EM does not amplify a perturbation of its iterate (its map is a
    contraction near the maximum: the Jacobian's spectral radius is < 1), so the differences
    add up at most linearly in the number of updates.
    """
    return iterations * em_step_rtol(k, m)


def stop_margin(trace, delta: float) -> float:
    """How far the stopping test ``|L(t) - L(t-1)| < delta`` was from flipping at a stop.

    ``trace`` holds ``L`` of every iterate of a converged plain-EM run. The last change is
    ``< delta`` and the one before it ``>= delta``; the margin is the smaller distance of the two
    from ``delta``. Another evaluation of ``L`` (other summation order, other BLAS kernel) stops
    at the same iteration whenever its rounding of the two changes stays below this margin.
    """
    d = np.abs(np.diff(np.asarray(trace, dtype=float)[-3:]))
    return float(min(delta - d[-1], d[-2] - delta))
