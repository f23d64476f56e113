"""Inference: the :class:`Estimate` every estimator returns, its uncertainty, statistics, metrics and
figures."""
