"""The default estimator's intervals at small n (``localpriv.estimate(obs)`` then ``ci``): cells of
mass 0 get upper bounds a likelihood allows, never ``[0, 1e-12]``, and every interval holds its
estimate. The calibration over many runs is ``localpriv reproduce coverage-small``
(docs/uncertainty.md)."""
import warnings

import numpy as np
import pytest

import localpriv
from localpriv.data.observations import Observations
from localpriv.domains import CategoricalDomain, IntegerDomain
from localpriv.estimators import default_estimator
from localpriv.inference.simulation import simulate_block
from localpriv.mechanisms import parse


@pytest.mark.parametrize("domain", [IntegerDomain(0, 19), CategoricalDomain([f"c{i}" for i in range(20)])],
                         ids=["ordered", "categorical"])
@pytest.mark.parametrize("spec", ["krr(eps=2.0)", "oue(eps=2.0)"])
@pytest.mark.parametrize("n", [10, 100])
def test_zero_cells_get_honest_upper_bounds(domain, spec, n):
    theta = np.zeros(domain.size)
    theta[[3, 11]] = 0.5
    obs = Observations([simulate_block(parse(spec, domain), theta, n, np.random.default_rng(n))], domain)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small-n IntervalWarning is the point of another test
        est = localpriv.estimate(obs)
        lo, hi = est.ci(0.95)
    assert est.estimator == default_estimator(domain)
    p = np.asarray(est.distribution)
    assert np.all(lo <= p + 1e-12) and np.all(p <= hi + 1e-12)
    # a cell nobody holds: its upper bound is what n reports at this level cannot rule out
    assert hi[theta == 0].min() > 0.01
