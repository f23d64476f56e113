"""Real data bundled with the package (small derived files; provenance in docs/DATA.md).

* :func:`adult_ages` -- the age column of the UCI Adult census extract (``adult.data`` +
  ``adult.test``: 48,842 persons, ages 17..90). Becker & Kohavi (1996), UCI Machine Learning
  Repository, CC BY 4.0.
"""
from __future__ import annotations

from importlib import resources

import numpy as np

__all__ = ["adult_ages", "data_path", "gowalla_manhattan", "MANHATTAN_BOX"]


def data_path(name: str):
    """Path of a bundled data file."""
    return resources.files("localpriv") / "data" / name


def adult_ages() -> np.ndarray:
    """Ages of the 48,842 persons of UCI Adult (train + test), as int64."""
    with data_path("adult_age.csv").open() as fh:
        return np.loadtxt(fh, skiprows=1, dtype=np.int64)


#: The Manhattan bounding box of seed 001 section 7.2 (latitude, longitude).
MANHATTAN_BOX = {"lat_min": 40.7044, "lat_max": 40.7942, "lon_min": -74.0205, "lon_max": -73.9374}


def gowalla_manhattan():
    """Gowalla check-ins inside the Manhattan box: a DataFrame with columns user, lat, lon.

    98,061 check-ins from SNAP ``loc-gowalla_totalCheckins`` (Cho, Myers, Leskovec, KDD 2011),
    New York subset, filtered to lat 40.7044..40.7942, lon -74.0205..-73.9374.
    """
    import pandas as pd

    with data_path("gowalla_manhattan.csv.gz").open("rb") as fh:
        return pd.read_csv(fh, compression="gzip")
