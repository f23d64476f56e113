"""A general finite mechanism given by any row-stochastic matrix.

Spec: ``matrix(rows=[[0.9,0.1],[0.2,0.8]])`` or ``matrix(file=channel.npy)`` (a ``.npy`` or a
``.csv`` file of the matrix). Validated on construction: non-negative, finite, rows summing to 1
within 1e-9.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .._validation import LocalPrivError, check_stochastic
from .base import Mechanism, register

__all__ = ["MatrixMechanism"]


@register
class MatrixMechanism(Mechanism):
    """Any finite mechanism ``M`` (``k x m``, ``M[x, z] = P(z | x)``)."""

    spec_name = "matrix"

    def __init__(self, rows=None, file=None):
        if (rows is None) == (file is None):
            raise LocalPrivError("matrix mechanism: give exactly one of rows=[[...]] or file=PATH")
        self.file = None if file is None else str(file)
        if file is not None:
            path = Path(file)
            if not path.exists():
                raise LocalPrivError(f"matrix mechanism: file {file} not found")
            data = np.load(path) if path.suffix == ".npy" else np.loadtxt(path, delimiter=",", ndmin=2)
        else:
            data = rows
        self.M = check_stochastic(data, name="mechanism matrix")
        self.M.setflags(write=False)
        self.k = self.M.shape[0]

    def params(self):
        if self.file is not None:
            return {"file": self.file}
        return {"rows": self.M.tolist()}

    def channel(self) -> np.ndarray:
        return self.M
