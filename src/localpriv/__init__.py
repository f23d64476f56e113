"""localpriv: local privacy mechanisms and distribution estimators.

The data's path: values -> :class:`Domain` -> :class:`Mechanism` -> reports -> :func:`aggregate`
-> :class:`Observations` -> :func:`estimate` -> :class:`Estimate` (with its uncertainty).

The package is layered; each folder imports only from the ones before it::

    utils -> domains -> likelihood -> mechanisms -> data -> estimators -> inference
          -> testing, analysis, multiattr, heavy_hitters, advice -> service -> cli -> extras

This module exports the small API below. Names are loaded on first use (PEP 562), so that quick
commands do not pay for DuckDB, pandas and SciPy's optimizers they never touch.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from localpriv.utils.errors import LocalPrivError, PrivacyWarning  # no NumPy: `import localpriv` stays light

__version__ = "0.1.0"

if TYPE_CHECKING:  # for the annotations only: nothing heavy is imported at run time
    from localpriv.data.observations import Observations
    from localpriv.domains import Domain
    from localpriv.inference.estimate import Estimate

#: the public API: name -> module that defines it
_WHERE = {
    "Domain": "localpriv.domains", "IntegerDomain": "localpriv.domains",
    "CategoricalDomain": "localpriv.domains", "IntervalDomain": "localpriv.domains",
    "GridDomain": "localpriv.domains", "parse_domain": "localpriv.domains",
    "Mechanism": "localpriv.mechanisms", "parse": "localpriv.mechanisms",
    "perturb": "localpriv.data.reports", "perturb_file": "localpriv.data.reports",
    "read_reports": "localpriv.data.reports",
    "Policy": "localpriv.data.freewill", "load_policy": "localpriv.data.freewill",
    "Observations": "localpriv.data.observations",
    "Estimate": "localpriv.inference.estimate",
    "available_estimators": "localpriv.estimators", "default_estimator": "localpriv.estimators",
    "Advice": "localpriv.advice",
    "make_generator": "localpriv.utils.rng", "secure_generator": "localpriv.utils.rng",
    "datasets": "localpriv.data.datasets", "metrics": "localpriv.inference.metrics",
}

#: names of earlier versions, still resolved (not part of ``__all__``; import them from their modules)
_ALSO = {
    "DuckDBAggregator": "localpriv.data.aggregate", "NumpyAggregator": "localpriv.data.aggregate",
    "write_counts": "localpriv.data.aggregate",
    "ESTIMATORS": "localpriv.estimators", "ibu": "localpriv.estimators", "inv": "localpriv.estimators",
    "KRR": "localpriv.mechanisms", "MatrixMechanism": "localpriv.mechanisms",
    "ObservationBlock": "localpriv.data.observations",
    "write_reports": "localpriv.data.reports", "read_values": "localpriv.data.reports",
    "iter_values": "localpriv.data.reports",
    "perturb_mixed": "localpriv.data.freewill", "perturb_file_mixed": "localpriv.data.freewill",
    "simulate_counts": "localpriv.data.freewill",
    "analyze_report": "localpriv.analysis", "spawn_generators": "localpriv.utils.rng",
    "em_progress": "localpriv.utils.progress",
    "numeric": "localpriv.inference.numeric", "testing": "localpriv.testing",
}

__all__ = ["LocalPrivError", "PrivacyWarning", "estimate", "aggregate", "advise", *_WHERE]


def estimate(obs: Observations, method: str | None = None, **settings: Any) -> Estimate:
    """Estimate the distribution of the users' true values from their aggregated reports.

    Runs the estimator named ``method`` (:func:`localpriv.estimators.estimate`); every estimator
    reads :class:`Observations` (from :func:`aggregate`) and returns an :class:`Estimate`.

    Parameters
    ----------
    obs : Observations
        The aggregated reports, one block per mechanism (:func:`aggregate`). Mixtures of
        mechanisms (users who chose their own, seed 003) are estimated jointly by the IBU family.
    method : str, optional
        The estimator's name (``available_estimators()`` lists them all). Default (``None``):
        :func:`default_estimator` -- ``"auto"``: the certified MLE and a few cheap alternatives,
        one chosen from the data by a stated rule (``docs/estimators.md``). Others: ``"ibu"`` (EM to
        the certified maximum-likelihood estimate; also ``"gibu"``, ``"ibu-exact"``, ...), ``"ems"``
        (EM with a smoothing step), ``"dirichlet"``, ``"inv-n"``/``"inv-p"`` (matrix inversion, then
        normalization or projection), ``"mi-n"``, ``"rap-n"``, ... .
    **settings
        Passed to the estimator; unknown settings are an error naming them. The common ones:

        ``delta`` : float
            IBU family: tolerance of the stopping rule (default 1e-9; ``ems`` 1e-7).
        ``stop`` : {"gap", "loglik", "max_abs"}
            IBU family: the stopping rule (default ``"gap"``, a certificate: the per-report
            log-likelihood is within ``delta`` of the maximum).
        ``max_iter`` : int
            IBU family: cap on EM evaluations (default 100,000).
        ``accelerate`` : {"newton", "squarem", "none"}
            IBU family: acceleration (default ``"newton"``: SQUAREM with a certified Newton finish).
        ``theta0`` : array, optional
            IBU family: the starting point (default uniform).
        ``strength`` : float, optional
            ``ems``/``dirichlet``: the regularization strength (default: chosen by held-out
            likelihood over ``folds`` folds; 0 gives the maximum-likelihood estimate).
        ``progress`` : bool or EMProgress
            IBU family: a progress display on stderr for long runs (:func:`em_progress`).
        ``callback`` : callable, optional
            IBU family: ``callback(t, theta, L)`` after every iteration.

        Each estimator's own settings are in its docstring: ``help(localpriv.ibu)``,
        ``help(localpriv.estimators.regularized.ems)``, ``help(localpriv.inv)``, or
        ``help(localpriv.ESTIMATORS[name])`` for any name.

    Returns
    -------
    Estimate
        ``distribution`` (the estimated probabilities over the domain), ``converged``, ``iterations``,
        ``loglik``; ``.interval(level)`` and ``.statistics(...)`` give its uncertainty.

    Raises
    ------
    LocalPrivError
        An unknown estimator or setting, or observations the estimator cannot use.
    """
    from localpriv.inference import estimate as _run
    return _run(obs, method, **settings)


def aggregate(source: Any, domain: Domain | None = None, aggregator: Any = None, *,
              engine: str | None = None) -> Observations:
    """Count reports per (mechanism, report): the :class:`Observations` every estimator reads.

    Every row is counted or refused with one line naming the file and rows (see
    :mod:`localpriv.data.aggregate`); counts files among the inputs are summed.

    Parameters
    ----------
    source : str, Path, list of them, pyarrow.Table or pandas.DataFrame
        Report or counts files, globs (``"reports/*.parquet"``), folders, hive-partitioned
        Parquet datasets, or an in-memory report table (columns ``mechanism``, ``report`` and for
        counts ``count``). Reports of many mechanisms may be mixed (one block per mechanism).
    domain : Domain, optional
        The domain of the values (fills ``k`` of specs that leave it out, e.g. planar mechanisms
        perturbed on a grid; gives estimates their labels).
    aggregator : DuckDBAggregator or NumpyAggregator, optional
        The engine as an object (default :class:`DuckDBAggregator`: bounded memory, spills to disk;
        :class:`NumpyAggregator` where DuckDB, the optional group ``duckdb``, is not installed).
    engine : {"duckdb", "numpy", "spark"}, optional
        The engine by name (``localpriv.data.aggregate.ENGINES``); not with ``aggregator``.
        ``"duckdb"`` without DuckDB installed: a one-line error naming ``pip install 'localpriv[duckdb]'``.

    Returns
    -------
    Observations
    """
    from localpriv.data.aggregate import aggregate as _run
    return _run(source, domain, aggregator, engine=engine)


def advise(domain: Any, *, eps_ldp: float | None = None, eps_metric: float | None = None, n: int,
           goal: str | None = None, theta: Any = None, rng: Any = 0, runs: int = 5, top: int = 10, method: str = "auto",
           mechanisms: Any = None, truth: str | None = None, progress: Any = None) -> Any:
    """Rank the mechanisms that meet a privacy target by their predicted error; recommend one.

    :func:`localpriv.advice.advisor.advise` (its docstring has the formulas and references).

    Parameters
    ----------
    domain : Domain or str
        The values' domain, or its command-line text (``"0..99"``, ``"a,b,c"``, ``"manhattan"``).
    eps_ldp : float, optional
        LDP target: every candidate's LDP level computed from the mechanism is at most this.
    eps_metric : float, optional
        Metric target per unit of distance (per value on a line, per km on a grid).
    n : int
        Number of users.
    goal : {"emd", "tv", "mean", "quantiles", "topk"}, optional
        What the estimate is for (default: emd on ordered domains, tv on categorical ones).
    theta : array_like, optional
        The distribution the predictions assume (default: Zipf on categorical domains, a bell on
        ordered ones; :func:`localpriv.advice.advisor.default_prior`).
    rng : int or numpy.random.Generator
        Seed of the simulations.
    runs : int
        Simulated data sets per candidate (default 5).
    top : int
        ``topk``: how many of the most frequent values.
    method : {"auto", "simulation", "analytic"}
        How predictions are made.
    mechanisms : iterable of str, optional
        Restrict the candidates (spec names).
    truth : str, optional
        How to describe ``theta`` in the output.
    progress : callable, optional
        ``progress(iterable, description)``, e.g. :meth:`localpriv.utils.progress.Status.track`.

    Returns
    -------
    Advice
        Ranked rows (spec, computed LDP and metric eps, predicted error and interval), the
        recommendation (``.recommended``) and why (``.reason``).
    """
    from localpriv.advice.advisor import advise as _run
    return _run(domain, eps_ldp=eps_ldp, eps_metric=eps_metric, n=n, goal=goal, theta=theta, rng=rng, runs=runs,
                top=top, method=method, mechanisms=mechanisms, truth=truth, progress=progress)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name) or _ALSO.get(name)
    if where is None:
        raise AttributeError(f"module 'localpriv' has no attribute {name!r}")
    module = importlib.import_module(where)
    value = module if where.rsplit(".", 1)[-1] == name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
