"""The matrix mechanism's spec is formatted once per matrix and follows a new one."""
import numpy as np

from localpriv.mechanisms import parse
from localpriv.mechanisms.matrix import MatrixMechanism


def test_spec_is_cached_and_follows_a_new_matrix():
    mech = MatrixMechanism([[0.75, 0.25], [0.25, 0.75]])
    first = str(mech)
    assert first == "matrix(rows=[[0.75,0.25],[0.25,0.75]])"
    assert str(mech) is first  # formatted once
    assert str(parse(first)) == first
    mech.M = np.array([[0.5, 0.5], [0.5, 0.5]])
    assert str(mech) == "matrix(rows=[[0.5,0.5],[0.5,0.5]])"
