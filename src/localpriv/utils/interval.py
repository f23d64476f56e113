"""A point value with its confidence interval, and the check of a confidence level."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from localpriv.utils.validation import LocalPrivError

__all__ = ["Interval", "check_level"]


@dataclass(frozen=True)
class Interval:
    """A point value with its confidence interval."""

    value: float
    lower: float
    upper: float
    level: float
    method: str = ""

    def __iter__(self) -> Iterator[float]:
        return iter((self.value, self.lower, self.upper))

    def __repr__(self) -> str:
        return f"{self.value:.6g} [{self.lower:.6g}, {self.upper:.6g}] ({self.level:.0%}, {self.method})"

    def to_dict(self) -> dict[str, float | str]:
        return {"value": self.value, "lower": self.lower, "upper": self.upper, "level": self.level,
                "method": self.method}


def check_level(level: object) -> float:
    """``level`` as a float strictly between 0 and 1, or a one-line :class:`LocalPrivError`."""
    try:
        lv = float(level)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LocalPrivError(f"confidence level must be a number in (0, 1), got {level!r}") from None
    if not 0.0 < lv < 1.0:
        raise LocalPrivError(f"confidence level must lie strictly between 0 and 1, got {level!r}")
    return lv
