"""Comparing the pipeline's output with answers computed in plain Python."""

from __future__ import annotations

import bisect
import csv
from pathlib import Path

#: percentile_approx's rank error bound (metrics.ACCURACY) plus float slack.
RANK_TOLERANCE = 1 / 10_000 + 1e-9
#: tubes.csv rounds milliseconds to 3 decimals.
ROUNDING = 0.0005 + 1e-9


def read_tubes_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def percentile_ok(values: list[float], got: float, p: float) -> bool:
    """True if `got` is a sample whose rank brackets p, within percentile_approx's error."""
    ordered = sorted(values)
    n = len(ordered)
    lo = bisect.bisect_left(ordered, got - ROUNDING)
    hi = bisect.bisect_right(ordered, got + ROUNDING)
    if lo == hi:
        return False  # percentile_approx returns one of the values, never a blend
    return lo / n - RANK_TOLERANCE <= p <= hi / n + RANK_TOLERANCE
