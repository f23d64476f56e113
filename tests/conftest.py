"""Shared test settings: fixed seeds everywhere, hypothesis without deadlines (2-core CI)."""
import os

import matplotlib
import numpy as np
import pytest
from hypothesis import settings

matplotlib.use("Agg")
os.environ.setdefault("COLUMNS", "120")
settings.register_profile("ci", deadline=None, max_examples=60, derandomize=True)
settings.load_profile("ci")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
