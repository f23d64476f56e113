"""The estimator registry: every estimator declared once, with its settings and tags.

Each estimator is registered by :func:`register_estimator` with its name, function, a one-line
summary, tags (what it is and what observations it needs: :data:`TAGS`) and its settings
(:class:`Setting`: name, kind, default, help, choices or range). The declarations are the one
source for:

* :func:`check_settings` -- what :func:`localpriv.estimators.fit` runs before an estimator: every
  setting checked against its declaration (kind, range, choices; a bool is not a number, a string
  is never turned into a number), unknown settings refused with the known ones listed, always as
  one-line :class:`LocalPrivError` naming the estimator and the setting;
* :func:`parse_settings` -- settings given as text (query strings of the collector service, command
  lines), converted by their declared kind only;
* :func:`estimator_settings`, :func:`describe_estimators` -- the declarations as plain data, for
  ``localpriv list estimators``, help texts and the service;
* the conformance suite :mod:`localpriv.testing.estimators`, which picks its checks and example
  observations from the tags.

Estimator modules import this module (never the package ``localpriv.estimators``, which imports
them) and register at import time; importing :mod:`localpriv.estimators` fills the registry.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from localpriv.estimators.em import (
    DEFAULT_ACCELERATE,
    DEFAULT_DELTA,
    DEFAULT_MAX_ITER,
    DEFAULT_STOP,
    SCHEMES,
    STOPPING_RULES,
)
from localpriv.estimators.result import Fit
from localpriv.utils.progress import EMProgress
from localpriv.utils.validation import LocalPrivError

__all__ = ["Setting", "EstimatorSpec", "TAGS", "KINDS", "TEXT_KINDS", "REGISTRY", "ESTIMATORS", "register_estimator",
           "estimator_spec", "estimator_settings", "accepts_setting", "describe_estimators", "estimators_tagged",
           "check_settings", "parse_settings", "em_settings_declared", "NO_SETTINGS"]

#: the tags an estimator may carry, with their meaning
TAGS: dict[str, str] = {
    "mle": "returns the maximum-likelihood estimate (certified by the EM engine's gap rule)",
    "regularized": "maximizes a penalized likelihood or smooths; strength=0 is the maximum-likelihood estimate",
    "iterative": "runs the EM engine: takes delta, max_iter, stop, accelerate, theta0, callback, progress",
    "cross-validated": "chooses its strength by cross-validation, the split drawn from the rng setting",
    "mixture": "reads reports of many mechanisms (free-will privacy), one block per mechanism",
    "shared-alphabet": "with many mechanisms, all of them must share one finite output alphabet",
    "single-mechanism": "reads the reports of exactly one mechanism",
    "finite-channel": "needs mechanisms with a finite, invertible channel",
    "pure-oracle": "needs pure frequency oracles (k-RR, unary encodings, local hashing: p*, q*)",
    "unary": "needs unary-encoding (bit-vector) reports",
    "symmetric-unary": "needs basic one-time RAPPOR reports (symmetric unary encoding)",
    "ordered-domain": "needs an ordered domain (an integer line or a planar grid)",
}

#: the kinds of setting values: what each accepts
KINDS: dict[str, str] = {
    "float": "a finite number (int or float; not a bool, not a string)",
    "int": "a whole number (not a bool, not a float)",
    "bool": "True or False",
    "str": "one of the declared choices",
    "distribution": "a probability vector over the domain (array-like of numbers)",
    "callable": "a function",
    "rng": "a numpy.random.Generator or an int seed",
    "progress": "True, False or a localpriv.utils.progress.EMProgress",
}
#: the kinds a setting given as text (query string, command line) can have
TEXT_KINDS = ("float", "int", "bool", "str")

_FLOAT_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_INT_TEXT = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class Setting:
    """One setting of an estimator, as declared.

    Attributes
    ----------
    name : str
        The keyword argument.
    kind : str
        One of :data:`KINDS`.
    default : Any
        The default value (what the estimator uses when the setting is not given).
    help : str
        One line for help texts.
    choices : tuple of str, optional
        The accepted values of a ``"str"`` setting.
    low, high : float, optional
        The accepted range of a number (inclusive unless ``low_open`` / ``high_open``).
    nullable : bool
        Whether ``None`` is accepted (its meaning is in ``help``).
    noun : str, optional
        What a value of a ``"str"`` setting is called in errors (``"stopping rule"``).
    """

    name: str
    kind: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    nullable: bool = False
    noun: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"setting {self.name}: unknown kind {self.kind!r}; known: {', '.join(KINDS)}")
        if (self.kind == "str") != (self.choices is not None):
            raise ValueError(f"setting {self.name}: choices go with kind 'str' (and only with it)")

    @property
    def textual(self) -> bool:
        """Whether the setting can be given as text (:func:`parse_settings`)."""
        return self.kind in TEXT_KINDS

    def range_text(self) -> str:
        """The accepted range of a number, e.g. ``"> 0"``, ``">= 2"`` (``""`` for other kinds)."""
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        return " and ".join(parts)

    def check(self, estimator: str, value: Any) -> Any:
        """``value`` if the declaration accepts it; a one-line :class:`LocalPrivError` otherwise."""
        if value is None and self.nullable:
            return value
        where = f"{estimator}: {self.name}"
        if self.kind in ("float", "int"):
            whole = self.kind == "int"
            what = "a whole number" if whole else "a finite number"
            rng = self.range_text()
            need = f"{where} must be {what}{' ' + rng if rng else ''}{' or None' if self.nullable else ''}"
            ok_type = (isinstance(value, (int, np.integer)) if whole else
                       isinstance(value, (int, float, np.integer, np.floating)))
            if isinstance(value, (bool, np.bool_)) or not ok_type:
                raise LocalPrivError(f"{need}, got {value!r} ({type(value).__name__})")
            v = float(value)
            if not math.isfinite(v) or not self._in_range(v):
                raise LocalPrivError(f"{need}, got {value!r}")
            return value
        if self.kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise LocalPrivError(f"{where} must be True or False, got {value!r} ({type(value).__name__})")
            return value
        if self.kind == "str":
            choices = self.choices or ()  # a "str" setting always declares its choices (__post_init__)
            if not isinstance(value, str) or value not in choices:
                noun = self.noun or "value"
                raise LocalPrivError(f"{where}: unknown {noun} {value!r}; choose one of {', '.join(choices)}")
            return value
        if self.kind == "callable":
            if not callable(value):
                raise LocalPrivError(f"{where}: callback must be a function (t, theta, loglik), got "
                                     f"{type(value).__name__}" if self.name == "callback" else
                                     f"{where} must be a function, got {type(value).__name__}")
            return value
        if self.kind == "rng":
            if isinstance(value, np.random.Generator):
                return value
            if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and value >= 0:
                return value
            raise LocalPrivError(f"{where} must be a numpy.random.Generator or an int seed >= 0, got {value!r}")
        if self.kind == "progress":
            if isinstance(value, (bool, np.bool_, EMProgress)):
                return value
            raise LocalPrivError(f"{where} must be True, False or an EMProgress, got {type(value).__name__}")
        # distribution: array-like of finite non-negative numbers (its length is the estimator's check)
        if isinstance(value, (str, bytes, bool, np.bool_)):
            raise LocalPrivError(f"{where} must be a probability vector (array of numbers), got {value!r}")
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            raise LocalPrivError(f"{where} must be a probability vector (array of numbers), got "
                                 f"{type(value).__name__}") from None
        if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise LocalPrivError(f"{where} must be a 1-D vector of finite numbers >= 0, got shape {arr.shape}")
        return value

    def _in_range(self, v: float) -> bool:
        if self.low is not None and (v < self.low or (self.low_open and v == self.low)):
            return False
        return not (self.high is not None and (v > self.high or (self.high_open and v == self.high)))

    def parse(self, estimator: str, text: str) -> Any:
        """The value of ``text`` for this setting (its declared kind only), checked."""
        where = f"{estimator}: {self.name}"
        if not self.textual:
            raise LocalPrivError(f"{where} ({KINDS[self.kind]}) cannot be given as text")
        if not isinstance(text, str):
            raise LocalPrivError(f"{where}: expected text, got {type(text).__name__}")
        t = text.strip()
        if self.nullable and t.lower() == "none" and not (self.choices and t in self.choices):
            return None
        if self.kind == "float":
            if not _FLOAT_TEXT.fullmatch(t):
                raise LocalPrivError(f"{where} must be a number (e.g. 0.5, 1e-9), got {text!r}")
            return self.check(estimator, float(t))
        if self.kind == "int":
            if not _INT_TEXT.fullmatch(t):
                raise LocalPrivError(f"{where} must be a whole number, got {text!r}")
            return self.check(estimator, int(t))
        if self.kind == "bool":
            if t.lower() not in ("true", "false"):
                raise LocalPrivError(f"{where} must be true or false, got {text!r}")
            return t.lower() == "true"
        return self.check(estimator, t)

    def describe(self) -> dict[str, Any]:
        """The declaration as plain (JSON-ready) data."""
        d = {"name": self.name, "kind": self.kind, "default": _plain(self.default), "help": self.help,
             "nullable": self.nullable, "text": self.textual}
        if self.choices is not None:
            d["choices"] = list(self.choices)
        if self.low is not None or self.high is not None:
            d["range"] = self.range_text()
        return d


def _plain(v: Any) -> Any:
    return v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)


@dataclass(frozen=True)
class EstimatorSpec:
    """A registered estimator: its name, function, summary, tags and settings."""

    name: str
    func: Callable[..., Fit]
    summary: str
    tags: frozenset[str]
    settings: tuple[Setting, ...] = field(default_factory=tuple)

    def setting(self, name: str) -> Setting | None:
        """The declaration of the setting ``name`` (``None`` when the estimator has none)."""
        return next((s for s in self.settings if s.name == name), None)

    @property
    def setting_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.settings)

    def defaults(self, textual_only: bool = False) -> dict[str, Any]:
        """The declared defaults (of the settings that can be given as text with ``textual_only``)."""
        return {s.name: s.default for s in self.settings if s.textual or not textual_only}

    def describe(self) -> dict[str, Any]:
        """The declaration as plain (JSON-ready) data."""
        return {"name": self.name, "summary": self.summary, "tags": sorted(self.tags),
                "settings": [s.describe() for s in self.settings]}


#: name -> declaration of every registered estimator
REGISTRY: dict[str, EstimatorSpec] = {}
#: name -> function of every registered estimator (kept in step with :data:`REGISTRY`)
ESTIMATORS: dict[str, Callable[..., Fit]] = {}


def register_estimator(name: str, func: Callable[..., Fit], *, summary: str, tags: Iterable[str],
                       settings: Iterable[Setting]) -> EstimatorSpec:
    """Register ``func`` as the estimator ``name`` (``fit(obs, name)``, the CLI's ``--estimator``).

    Parameters
    ----------
    name : str
        The estimator's name.
    func : callable
        ``func(observations, **settings) -> Fit``.
    summary : str
        One line: what it estimates, and how.
    tags : iterable of str
        Among :data:`TAGS`; they select the conformance checks and example observations.
    settings : iterable of Setting
        Every keyword the estimator accepts (``NO_SETTINGS`` for none).

    Returns
    -------
    EstimatorSpec
    """
    tags = frozenset(tags)
    unknown = sorted(tags - set(TAGS))
    if unknown:
        raise LocalPrivError(f"estimator {name}: unknown tags {', '.join(unknown)}; known: {', '.join(TAGS)}")
    settings = tuple(settings)
    names = [s.name for s in settings]
    if len(set(names)) != len(names):
        raise LocalPrivError(f"estimator {name}: a setting is declared twice in {', '.join(names)}")
    if not summary or "\n" in summary:
        raise LocalPrivError(f"estimator {name}: the summary must be one non-empty line")
    spec = EstimatorSpec(name, func, summary, tags, settings)
    REGISTRY[name] = spec
    ESTIMATORS[name] = func
    return spec


def estimator_spec(name: str | None) -> EstimatorSpec:
    """The declaration of the estimator ``name`` (one-line error listing the known ones)."""
    spec = REGISTRY.get(name) if isinstance(name, str) else None
    if spec is None:
        raise LocalPrivError(f"unknown estimator {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return spec


def estimator_settings(name: str) -> tuple[Setting, ...]:
    """The declared settings of the estimator ``name``."""
    return estimator_spec(name).settings


def accepts_setting(name: str, setting: str) -> bool:
    """Whether the registered estimator ``name`` declares the setting ``setting`` (``False`` for a
    name that is not registered): what a caller asks before passing a setting on, instead of
    inspecting the estimator function's signature (a registered lambda's hides its settings)."""
    spec = REGISTRY.get(name)
    return spec is not None and spec.setting(setting) is not None


def describe_estimators() -> list[dict[str, Any]]:
    """Every registered estimator's declaration as plain data (name, summary, tags, settings), by name."""
    return [REGISTRY[n].describe() for n in sorted(REGISTRY)]


def estimators_tagged(*tags: str) -> list[str]:
    """The names of the estimators carrying every one of ``tags``, sorted."""
    return sorted(n for n, s in REGISTRY.items() if set(tags) <= s.tags)


def check_settings(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` checked against the declaration of the estimator ``name``.

    Raises
    ------
    LocalPrivError
        One line naming the estimator and the setting: unknown settings (with the known ones), a
        value of the wrong kind, out of range or not among the choices.
    """
    spec = estimator_spec(name)
    for key, value in settings.items():
        s = spec.setting(key)
        if s is None:
            known = ", ".join(spec.setting_names) if spec.settings else "none (it takes no settings)"
            raise LocalPrivError(f"{name}: unknown setting {key!r}; known: {known}")
        s.check(name, value)
    return dict(settings)


def parse_settings(name: str, texts: Mapping[str, str]) -> dict[str, Any]:
    """Settings of the estimator ``name`` given as text (a query string), converted by their
    declared kind only (``"1e-9"`` for a number, ``"true"``/``"false"`` for a bool, one of the
    choices for a text setting; ``"none"`` where ``None`` is accepted) and checked.

    Raises
    ------
    LocalPrivError
        One line: unknown settings (with the known ones that can be given as text), settings
        that cannot be given as text, values that do not parse or are refused.
    """
    spec = estimator_spec(name)
    out = {}
    for key, text in texts.items():
        s = spec.setting(key)
        if s is None:
            known = [x.name for x in spec.settings if x.textual]
            raise LocalPrivError(f"{name}: unknown setting {key!r}; known: "
                                 f"{', '.join(known) if known else 'none (it takes no settings)'}")
        out[key] = s.parse(name, text)
    return out


#: the declaration of an estimator without settings
NO_SETTINGS: tuple[Setting, ...] = ()


def em_settings_declared(*, delta: float = DEFAULT_DELTA, stop: str = DEFAULT_STOP, keep_trace: bool = True,
                         stop_help: str = "") -> tuple[Setting, ...]:
    """The settings of the EM engine as an estimator passes them on (its defaults unless told).

    Parameters
    ----------
    delta : float
        The estimator's default tolerance.
    stop : str
        The estimator's default stopping rule.
    keep_trace : bool
        Whether the estimator takes ``keep_trace``.
    stop_help : str
        Appended to the help of ``stop``.

    Returns
    -------
    tuple of Setting
    """
    out = [
        Setting("theta0", "distribution", None, "starting point of EM (default: uniform)", nullable=True),
        Setting("delta", "float", delta, "tolerance of the stopping rule (with stop=gap: per-report "
                "log-likelihood within delta of the maximum)", low=0.0, low_open=True),
        Setting("max_iter", "int", DEFAULT_MAX_ITER, "cap on EM-map evaluations (reaching it: converged=False)",
                low=1),
        Setting("stop", "str", stop, "stopping rule: " + "; ".join(f"{k}: {v}" for k, v in STOPPING_RULES.items())
                + (f" ({stop_help})" if stop_help else ""), choices=tuple(STOPPING_RULES), noun="stopping rule"),
        Setting("accelerate", "str", DEFAULT_ACCELERATE, "newton: SQUAREM with the certified Newton finish; "
                "squarem; none: plain EM (None: plain EM)", choices=SCHEMES, nullable=True, noun="acceleration"),
        Setting("callback", "callable", None, "callback(t, theta, loglik) after every iteration", nullable=True),
        Setting("progress", "progress", False, "progress display on stderr (True or an EMProgress)"),
    ]
    if keep_trace:
        out.append(Setting("keep_trace", "bool", False, "keep the log-likelihood of every iteration in extra"))
    return tuple(out)
