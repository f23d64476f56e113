"""The one result type of every estimator."""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # pandas is imported where a frame is built, not at start-up
    import pandas as pd

from localpriv.data.formats import ESTIMATE_SUFFIXES, StrPath, atomic_output
from localpriv.domains import Domain
from localpriv.domains.grid import GridDomain
from localpriv.domains.product import ProductDomain
from localpriv.estimators.result import Fit
from localpriv.inference.geo_export import write_geojson
from localpriv.inference.unbiased import has_unbiased_mean, unbiased_mean
from localpriv.inference.uncertainty import Uncertainty, uncertainty
from localpriv.utils.interval import Interval, check_level
from localpriv.utils.validation import LocalPrivError, check_int

__all__ = ["Estimate", "quantile_crossing"]


@dataclass(repr=False)
class Estimate(Fit):
    """A :class:`~localpriv.estimators.result.Fit` with its uncertainty: intervals, standard errors
    and statistics (:mod:`localpriv.inference.uncertainty`), tables, files and figures.

    Returned by :func:`localpriv.estimate`; ``Estimate.from_fit(fit)`` wraps any estimator's result.
    """

    @classmethod
    def from_fit(cls, fit: Fit) -> Estimate:
        """The estimate of an estimator's :class:`Fit` (the same object when it is one already)."""
        if isinstance(fit, cls):
            return fit
        return cls(**{f.name: getattr(fit, f.name) for f in fields(fit)})

    def to_dict(self, ci: float | None = None, stats: str | Iterable[str] | None = None) -> dict[str, Any]:
        """The estimate as JSON-ready data; ``ci`` adds per-cell intervals at that level, ``stats``
        (names, see :meth:`statistics`) adds statistics with their intervals."""
        d = self.summary()
        if isinstance(self.domain, ProductDomain):  # one list of attribute values per cell
            d["attributes"] = list(self.domain.names)
            d["labels"] = [[v.item() if hasattr(v, "item") else v for v in row] for row in self.labels]
        else:
            d["labels"] = [x.item() if hasattr(x, "item") else x for x in self.labels]
        d["distribution"] = self.distribution.tolist()
        cells = self._cells()
        if cells is not None:  # planar grid: each cell's row, column and centre (degrees)
            d.update({key: col.tolist() for key, col in cells.items()})
        if ci is not None:
            lo, hi = self.ci(ci)
            d["ci"] = {"level": float(ci), "method": self.uncertainty().method,
                       "assumptions": self.uncertainty().assumptions,
                       "lower": lo.tolist(), "upper": hi.tolist()}
        if isinstance(self.domain, ProductDomain):
            marg = self.marginals(ci)
            d["marginals"] = {name: {col: [x.item() if hasattr(x, "item") else x for x in part[col]]
                                     for col in part.columns if col != "attribute"}
                              for name, part in marg.groupby("attribute", sort=False)}
        if stats:
            d["statistics"] = {k: v.to_dict() for k, v in
                               self.statistics(stats, 0.95 if ci is None else ci).items()}
        return d

    def _cells(self) -> dict[str, np.ndarray] | None:
        """Planar grid domains: ``{"row", "col", "lat", "lon"}`` of every cell (centres in degrees)."""
        if self.domain is None or not callable(getattr(self.domain, "centres", None)):
            return None
        dom = cast(GridDomain, self.domain)  # a planar grid: it has centres()
        row, col = dom.rows_cols(np.arange(dom.size))
        lat, lon = dom.centres()
        return {"row": row, "col": col, "lat": lat, "lon": lon}

    def to_frame(self, ci: float | None = None) -> pd.DataFrame:
        """Columns value, probability (and lower, upper with ``ci``); on a planar grid ``value`` is
        the cell id and the cell's ``row``, ``col`` and centre ``lat``, ``lon`` (degrees) follow
        (last, so that the other columns keep their places)."""
        import pandas as pd
        if isinstance(self.domain, ProductDomain):  # one column per attribute, then the probability
            labels = np.asarray(self.labels, dtype=object)
            cols: dict[str, Any] = {name: labels[:, j] for j, name in enumerate(self.domain.names)}
            df = pd.DataFrame({**cols, "probability": self.distribution})
        else:
            df = pd.DataFrame({"value": self.labels, "probability": self.distribution})
        if ci is not None:
            df["lower"], df["upper"] = self.ci(ci)
        cells = self._cells()
        if cells is not None:
            for key, col in cells.items():
                df[key] = col
        return df

    def marginals(self, ci: float | None = None) -> pd.DataFrame:
        """Product domains: each attribute's marginal of the joint estimate, ``p_j(v) = sum_{x: x_j = v}
        theta(x)``, with columns attribute, value, probability (and lower, upper at ``ci``: the
        interval of that linear functional of ``theta``, :meth:`functional`)."""
        import pandas as pd
        dom = self.domain
        if not isinstance(dom, ProductDomain):
            raise LocalPrivError("marginals need a product domain (several attributes)")
        codes = dom.unravel(np.arange(dom.size))
        rows: list[dict[str, Any]] = []
        for j, (name, sub) in enumerate(zip(dom.names, dom.domains)):  # over attributes and values
            marg = dom.marginalize(self.distribution, j)
            for v, label in enumerate(sub.labels):
                row: dict[str, Any] = {"attribute": name, "value": label, "probability": float(marg[v])}
                if ci is not None:
                    iv = self.functional((codes[:, j] == v).astype(float), ci)
                    row["lower"], row["upper"] = iv.lower, iv.upper
                rows.append(row)
        return pd.DataFrame(rows)

    def save(self, path: StrPath, ci: float | None = None, stats: str | Iterable[str] | None = None) -> Path:
        """Write as JSON (``.json``: estimate, metadata, intervals with ``ci``, statistics), CSV
        (value, probability, and lower, upper with ``ci``) or, on a planar grid, GeoJSON
        (``.geojson``: one polygon per cell, :func:`localpriv.inference.geo_export.estimate_geojson`),
        atomically."""

        path = Path(path)
        if path.suffix.lower() == ".geojson":
            return write_geojson(self, path, ci=ci)
        payload = self.to_dict(ci, stats) if path.suffix.lower() == ".json" else self.to_frame(ci)
        with atomic_output(path, ESTIMATE_SUFFIXES, what="estimate file") as tmp:
            if isinstance(payload, dict):  # .json
                tmp.write_text(json.dumps(payload, indent=2))
            else:
                payload.to_csv(tmp, index=False)
        return path

    def statistics(self, names: str | Iterable[str], level: float = 0.95) -> dict[str, Interval]:
        """Statistics by name with their intervals: ``mean`` (:meth:`numeric_mean`), ``mean_estimate``
        (the distribution's own mean, :meth:`mean`), ``var``, ``sd``, ``median``,
        ``pNN`` (the NN-th percentile, e.g. ``p90``), ``qX`` (the X-quantile, e.g. ``q0.25``),
        ``mean_unbiased`` (the reports' classic unbiased mean, for one ``pm``, ``hm``, ``duchi`` or
        ``sw`` mechanism: :func:`localpriv.inference.unbiased.unbiased_mean`); ``names`` is a list
        or a comma-separated string."""
        if isinstance(names, str):
            names = [t.strip() for t in names.split(",") if t.strip()]
        out: dict[str, Interval] = {}
        for name in names:
            low = str(name).lower()
            if low == "mean":
                out[name] = self.numeric_mean(level)
            elif low == "mean_estimate":
                out[name] = self.mean(level)
            elif low == "mean_unbiased":
                if self.observations is None:
                    raise LocalPrivError("mean_unbiased needs the estimate's observations")
                out[name] = unbiased_mean(self.observations, self.domain, level)
            elif low == "var":
                out[name] = self.var(level)
            elif low == "sd":
                v = self.var(level)
                out[name] = Interval(float(np.sqrt(v.value)), float(np.sqrt(max(v.lower, 0.0))),
                                     float(np.sqrt(max(v.upper, 0.0))), v.level, v.method)
            elif low == "median":
                out[name] = self.quantile(0.5, level)
            elif low.startswith("p") and low[1:].replace(".", "", 1).isdigit():
                out[name] = self.quantile(float(low[1:]) / 100.0, level)
            elif low.startswith("q") and low[1:].replace(".", "", 1).isdigit():
                out[name] = self.quantile(float(low[1:]), level)
            else:
                raise LocalPrivError(f"unknown statistic {name!r}: mean, var, sd, median, pNN (e.g. p90), "
                                     "qX (e.g. q0.25), mean_unbiased or mean_estimate")
        return out

    # ---- uncertainty (computed by localpriv.inference.uncertainty, once, on first use) -------------------
    def uncertainty(self, method: str | None = None, rng: np.random.Generator | None = None) -> Uncertainty:
        """The estimate's :class:`~localpriv.inference.uncertainty.Uncertainty` (cached per method)."""
        cache = self.extra.setdefault("_uncertainty", {})
        key = method or "default"
        if key not in cache:
            cache[key] = uncertainty(self, self.observations, rng=rng, method=method)
        return cache[key]

    def std_error(self) -> np.ndarray:
        """Standard error of every cell (see :mod:`localpriv.inference.uncertainty` for the method)."""
        return self.uncertainty().std_error()

    def ci(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Per-cell confidence intervals ``(lower, upper)`` at ``level``."""
        return self.uncertainty().cell_intervals(level)

    def functional(self, w: npt.ArrayLike, level: float = 0.95) -> Interval:
        """Any linear functional ``w @ theta`` with its interval."""
        return self.uncertainty().functional(w, level)

    def _values(self, what: str) -> np.ndarray:
        dom = self.domain
        if dom is None or not getattr(dom, "is_numeric", False) or getattr(dom, "columns", 1) != 1:
            raise LocalPrivError(f"{what} needs an ordered numeric domain (LO..HI), not "
                                 f"{'none' if dom is None else dom.spec()}")
        return np.asarray(dom.labels, dtype=float)

    def mean(self, level: float = 0.95) -> Interval:
        """The mean value ``sum_x x theta_x`` with its interval (ordered domains)."""
        iv = self.functional(self._values("the mean"), level)
        return Interval(iv.value, iv.lower, iv.upper, iv.level, iv.method)

    def numeric_mean(self, level: float = 0.95) -> Interval:
        """The statistic ``mean`` (``--stat mean``): the mean of the certified maximum-likelihood
        estimate, with its interval, for a regularized estimate (``auto``, ``ems``, ``dirichlet``) of
        the reports of one numeric mechanism (``pm``, ``hm``, ``duchi``, ``sw``); :meth:`mean`
        otherwise.

        By the invariance of maximum likelihood, ``sum_x x theta_hat_x`` is the MLE of the mean; its
        interval is the MLE's (:meth:`localpriv.inference.uncertainty.Uncertainty.functional`: the
        unbiased inverse's where it applies, else Fisher). A regularized estimate's own mean carries
        the regularization's bias: on Duchi's one-bit reports only the mean is identified and the
        default's smoothing moved it (measured in docs/numeric.md, *Which mean*;
        docs/decisions/0077-intervals-for-every-estimator-and-the-numeric-mean.md). The
        distribution's own mean stays :meth:`mean` (statistic ``mean_estimate``).
        """
        u = self.uncertainty()
        if u.method != "anchored" or self.observations is None or not has_unbiased_mean(self.observations):
            return self.mean(level)
        iv = u.extra["mle"].functional(self._values("the mean"), level)
        return Interval(iv.value, iv.lower, iv.upper, iv.level, f"maximum likelihood: {iv.method}")

    def var(self, level: float = 0.95) -> Interval:
        """The variance of the values, ``sum_x (x - mu)^2 theta_x``, with its interval (delta method:
        its gradient in ``theta`` is ``(x - mu)^2`` on the simplex's tangent space)."""
        x = self._values("the variance")
        mu = float(x @ self.distribution)
        return self.functional((x - mu) ** 2, level)

    def cdf(self, level: float = 0.95) -> pd.DataFrame:
        """The CDF at every value with a pointwise confidence band (ordered domains)."""
        x = self._values("the CDF")
        k = x.size
        W = np.tril(np.ones((k, k)))
        u = self.uncertainty()
        F = np.cumsum(self.distribution)
        from scipy import stats
        lv = float(level)
        if u.method in ("fisher", "anchored"):
            z = stats.norm.ppf(0.5 + lv / 2)
            centre, sd, _ = u.gaussian(W)
            lo, hi = np.minimum(centre - z * sd, F), np.maximum(centre + z * sd, F)
        else:
            a = (1 - lv) / 2
            assert u.replicates is not None  # the replicate methods
            lo, hi = np.quantile(np.cumsum(u.replicates, axis=1), [a, 1 - a], axis=0)
        import pandas as pd
        return pd.DataFrame({"value": self.labels, "cdf": F, "lower": np.clip(lo, 0, 1),
                             "upper": np.clip(hi, 0, 1)})

    def quantile(self, q: float, level: float = 0.95) -> Interval:
        """The ``q``-quantile with its interval (ordered domains).

        The CDF is interpolated linearly across every cell: between ``x - 1/2`` and ``x + 1/2``
        around every integer value ``x`` (``F(t) = sum_{y < x} theta_y + (t - x + 1/2) theta_x``),
        between the cell's edges on a real interval domain (``interval(lo,hi,bins)``), so quantiles
        are real numbers in the values' units. Gaussian methods invert the test
        ``|F(t) - q| <= z sd(F(t))`` at every ``t`` (the interval is the set of such ``t``, found on
        64 points per value where the band can cross ``q``); replicate methods take percentiles of
        the replicates' quantiles. ``sd(F(t))`` is the Fisher one, the unbiased inverse's, or, for an
        MLE on a low-dimensional face, a
        parametric bootstrap's (:meth:`localpriv.inference.uncertainty.Uncertainty.face_replicates`).
        """
        from scipy import stats

        q = float(q)
        if not 0.0 < q < 1.0:
            raise LocalPrivError(f"quantile level must lie strictly between 0 and 1, got {q}")
        lv = check_level(level)
        x = self._values("a quantile")
        edges = _edges(self.domain, x)
        theta = self.distribution
        value = quantile_crossing(x, np.cumsum(theta), q, edges)
        u = self.uncertainty()
        if u.method not in ("fisher", "anchored"):
            assert u.replicates is not None  # the replicate methods
            reps = np.array([quantile_crossing(x, np.cumsum(r), q, edges) for r in u.replicates])  # one per replicate
            a = (1 - lv) / 2
            lo, hi = np.quantile(reps, [a, 1 - a])
            return Interval(value, float(min(lo, value)), float(max(hi, value)), lv, u.method)
        z = stats.norm.ppf(0.5 + lv / 2)
        k = x.size
        W = np.tril(np.ones((k, k)))
        F, sd, _ = u.gaussian(W)  # the CDF's centres (estimate or unbiased inverse) and sds
        # cells where the band can reach q: from the first whose right edge has F + z sd >= q to the
        # first whose right edge has F - z sd >= q (the CDF band at the cells' edges)
        first = int(np.searchsorted(np.maximum.accumulate(F + z * sd), q))
        last = int(np.searchsorted(np.maximum.accumulate(F - z * sd), q))
        cells = np.arange(max(first, 0), min(last, k - 1) + 1)
        frac = (np.arange(64) + 0.5) / 64
        rows = np.repeat(cells, frac.size)
        f = np.tile(frac, cells.size)
        Wt = (np.arange(k)[None, :] < rows[:, None]).astype(float)
        Wt[np.arange(rows.size), rows] = f
        Ft, sdt, use = u.gaussian(Wt)
        ok = np.abs(Ft - q) <= z * sdt
        t = edges[rows] + f * (edges[rows + 1] - edges[rows])
        lo, hi = (float(t[ok].min()), float(t[ok].max())) if ok.any() else (value, value)
        how = ("inversion" if use.any() else "fisher") + " (test inversion)"
        inner = u.extra["mle"] if u.method == "anchored" else u
        if not use.all() and inner.face_replicates() is not None:
            how = (("inversion and " if use.any() else "") + "fisher, bootstrap sd (low-dimensional face)"
                   " (test inversion)")
        if u.method == "anchored":
            how = f"anchored on the MLE: {how}"
        return Interval(value, min(lo, value), max(hi, value), lv, how)

    def top_k(self, k: int = 10, level: float = 0.95, rng: np.random.Generator | None = None) -> pd.DataFrame:
        """The ``k`` most probable values with their intervals and rank stability: the share of
        draws (replicates, or Gaussian draws of the estimate) in which the value is in the top ``k``."""
        k = check_int(k, "k", minimum=1, maximum=self.distribution.size)
        order = np.argsort(-self.distribution, kind="stable")[:k]
        lo, hi = self.ci(level)
        draws = self.uncertainty().samples(np.random.default_rng(0) if rng is None else rng)
        ranks = np.argsort(np.argsort(-draws, axis=1, kind="stable"), axis=1, kind="stable")
        stable = (ranks[:, order] < k).mean(axis=0)
        import pandas as pd
        return pd.DataFrame({"rank": np.arange(1, k + 1), "value": self.labels[order],
                             "probability": self.distribution[order], "lower": lo[order],
                             "upper": hi[order], "in_top_k": stable})


def _edges(domain: Domain | None, x: np.ndarray) -> np.ndarray:
    """The ``k + 1`` cell edges of an ordered domain: its own (real intervals), else ``x -+ 1/2``."""
    own = getattr(domain, "cell_edges", None)
    if callable(own):
        return np.asarray(own(), dtype=float)
    return np.concatenate([[x[0] - 0.5], x + 0.5])


def quantile_crossing(x: np.ndarray, F: np.ndarray, q: float, edges: np.ndarray | None = None) -> float:
    """Where the CDF ``F`` (at values ``x``, linear within each cell: between ``x -+ 1/2``, or
    between the given cell ``edges``) first reaches ``q``."""
    if edges is None:
        edges = _edges(None, np.asarray(x, dtype=float))
    Fe = np.concatenate([[0.0], np.maximum.accumulate(np.clip(F, 0, 1))])
    j = int(np.searchsorted(Fe, q, side="left"))
    if j <= 0:
        return float(edges[0])
    if j >= Fe.size:
        return float(edges[-1])
    f0, f1 = Fe[j - 1], Fe[j]
    t = 0.0 if f1 <= f0 else (q - f0) / (f1 - f0)
    return float(edges[j - 1] + t * (edges[j] - edges[j - 1]))
