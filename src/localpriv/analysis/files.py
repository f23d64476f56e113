"""Estimates straight from report and counts files (what ``localpriv estimate`` runs).

With a declared domain the files are aggregated (:func:`localpriv.data.aggregate.aggregate`) and
estimated (:func:`localpriv.inference.estimate`). Without one, only untruncated geometric reports
can be estimated: IBU on the likely subset ``[min z, max z]`` of the integers
(:func:`localpriv.analysis.likely.estimate_unbounded_integers`, seed 001 section 8).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from localpriv.analysis.likely import estimate_unbounded_integers
from localpriv.data.aggregate import aggregate, make_aggregator
from localpriv.domains import Domain
from localpriv.estimators import default_estimator
from localpriv.inference import estimate
from localpriv.inference.estimate import Estimate
from localpriv.mechanisms import parse
from localpriv.mechanisms.geometric import Geometric
from localpriv.utils.validation import LocalPrivError

__all__ = ["estimate_files", "estimate_without_domain", "UNBOUNDED_SETTINGS"]

#: the settings the domain-less path passes on to IBU
UNBOUNDED_SETTINGS = ("delta", "max_iter", "accelerate", "stop", "progress")


def estimate_files(inputs: Iterable, domain: Domain | None = None, estimator: str | None = None, *,
                   counting: Callable[[], AbstractContextManager] | None = None, **settings: Any) -> Estimate:
    """Estimate the users' distribution from report or counts files.

    Parameters
    ----------
    inputs : files, globs, folders or datasets
        Reports or counts (counts are summed).
    domain : Domain, optional
        The values' domain; without it only untruncated geometric reports are estimated, on the
        likely subset of the integers (:func:`estimate_without_domain`).
    estimator : str, optional
        Default: :func:`localpriv.estimators.default_estimator` of the domain.
    counting : callable, optional
        A context manager factory entered while the reports are counted (a progress display).
    **settings
        The estimator's settings.
    """
    if estimator is None:
        estimator = default_estimator(domain)
    if domain is None:
        return estimate_without_domain(inputs, estimator, counting=counting, **settings)
    with counting() if counting is not None else nullcontext():
        obs = aggregate(inputs, domain)
    return estimate(obs, estimator, **settings)


def estimate_without_domain(inputs: Iterable, estimator: str = "ibu", *,
                            counting: Callable[[], AbstractContextManager] | None = None,
                            **settings: Any) -> Estimate:
    """No domain declared: only untruncated geometric reports of one ``eps`` can be estimated, by
    IBU on the likely subset ``[min z, max z]`` of the integers (seed 001 Proposition 8.2,
    Theorem 8.1). Settings other than :data:`UNBOUNDED_SETTINGS` are ignored."""
    if estimator != "ibu":
        raise LocalPrivError("without --domain only ibu applies (on the likely subset of the integers); "
                             "give --domain for other estimators")
    with counting() if counting is not None else nullcontext():
        df = make_aggregator().counts(inputs)
    eps_values = set()
    for spec in df["mechanism"].unique():
        mech = parse(spec, trusted=False)
        if not isinstance(mech, Geometric) or mech.truncated:
            raise LocalPrivError(f"--domain is required for {spec}: only untruncated geometric reports "
                                 "can be estimated without a declared domain")
        eps_values.add(mech.eps)
    if len(eps_values) != 1:
        raise LocalPrivError("without --domain all reports must come from one geometric(eps=..) mechanism")
    grouped = df.groupby("report", sort=True)["count"].sum()
    kw = {k: v for k, v in settings.items() if k in UNBOUNDED_SETTINGS}
    return estimate_unbounded_integers(grouped.index.to_numpy(np.int64), eps_values.pop(),
                                       counts=grouped.to_numpy(np.int64), **kw)
