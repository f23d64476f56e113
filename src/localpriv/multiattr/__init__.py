"""Multi-attribute randomization protocols of the thesis (seed 004, chapters 4, 5 and 7).

* :mod:`.tables` -- categorical records and k-way contingency tables;
* :mod:`.bif` -- BIF networks (bnlearn and JavaBayes dialects) and ancestral sampling;
* :mod:`.rrba` -- Randomized Response Block Aggregation: views, client, block aggregator,
  convergence rule, cross-view consistency; privacy computed from the channel;
* :mod:`.independence` -- chi-square / G-squared tests on noisy tables, two-step estimate,
  Monte Carlo test, Laplace baseline;
* :mod:`.bayesnet` -- GreedyBayes, noisy variants, ancestral synthesis, structure metrics;
* :mod:`.hybrid` -- randomized response + truncated alpha-geometric mechanism;
* :mod:`.flips` -- how often Laplace noise flips an independence verdict (chapter 7);
* :mod:`.query` -- marginal and range queries on a joint estimate, with intervals;
* :mod:`.marginals` -- k-way marginals by user groups with CALM's consistency step;
* :mod:`.ranges` -- range queries by a hierarchy (constrained inference) and by a 2-D grid.
"""
from localpriv.multiattr.bif import BayesNet, load_network, read_bif
from localpriv.multiattr.tables import Records, marginalize

__all__ = ["BayesNet", "Records", "load_network", "marginalize", "read_bif"]
