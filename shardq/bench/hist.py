"""HDR-style log-linear latency histogram: fixed memory, ~1.6% relative error, mergeable.

Values are integer nanoseconds. Below 128 every value has its own bucket; above, each power
of two is split in 64 linear sub-buckets, so the index is two integer operations (cheap
enough to call per reply) and histograms from several load processes merge by adding counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

SUB_BITS = 6  # 64 sub-buckets per power of two
_LINEAR = 1 << (SUB_BITS + 1)  # values below this are exact
_MAX_SHIFT = 40  # up to ~2^47 ns (39 hours); larger values are clamped
SIZE = _MAX_SHIFT * (1 << SUB_BITS) + _LINEAR


def _empty_counts() -> list[int]:
    return [0] * SIZE


class HistogramDict(TypedDict):
    """`Histogram.to_dict`: nonzero bucket counts by index (a string: JSON keys), totals."""

    buckets: dict[str, int]
    total: int
    max: int
    sum: int


def index_of(value: int) -> int:
    """Bucket index of ``value`` (ns)."""
    if value < _LINEAR:
        return value if value > 0 else 0
    shift = value.bit_length() - SUB_BITS - 1
    if shift > _MAX_SHIFT:
        return SIZE - 1
    return (shift << SUB_BITS) + (value >> shift)


def lowest_of(index: int) -> int:
    """Smallest value that falls in bucket ``index``."""
    if index < _LINEAR:
        return index
    shift = (index >> SUB_BITS) - 1
    return (index - (shift << SUB_BITS)) << shift


def highest_of(index: int) -> int:
    """Largest value that falls in bucket ``index``."""
    if index < _LINEAR:
        return index
    shift = (index >> SUB_BITS) - 1
    return lowest_of(index) + (1 << shift) - 1


@dataclass
class Histogram:
    """Counts per bucket plus the exact maximum and sum (for the mean)."""

    counts: list[int] = field(default_factory=_empty_counts)
    total: int = 0
    max: int = 0
    sum: int = 0

    def record(self, value: int, n: int = 1) -> None:
        """Add ``n`` samples of ``value`` ns (n > 1: a pipelined batch that shared a reply)."""
        if value < 0:
            value = 0
        self.counts[index_of(value)] += n
        self.total += n
        self.sum += value * n
        if value > self.max:
            self.max = value

    def merge(self, other: Histogram) -> None:
        counts = self.counts
        for i, c in enumerate(other.counts):
            if c:
                counts[i] += c
        self.total += other.total
        self.sum += other.sum
        self.max = max(self.max, other.max)

    def percentile(self, p: float) -> int:
        """Value (ns) at percentile ``p`` (0-100): the middle of its bucket, capped by max."""
        if self.total == 0:
            return 0
        rank = max(1, round(self.total * p / 100.0))
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                mid = (lowest_of(i) + highest_of(i)) // 2
                return min(mid, self.max)
        return self.max

    def mean(self) -> float:
        return self.sum / self.total if self.total else 0.0

    def to_dict(self) -> HistogramDict:
        """Sparse form, for pipes between processes and for --json."""
        return {
            "buckets": {str(i): c for i, c in enumerate(self.counts) if c},
            "total": self.total,
            "max": self.max,
            "sum": self.sum,
        }

    @classmethod
    def from_dict(cls, d: HistogramDict) -> Histogram:
        h = cls()
        for k, c in d["buckets"].items():
            h.counts[int(k)] = int(c)
        h.total, h.max, h.sum = int(d["total"]), int(d["max"]), int(d["sum"])
        return h

    def summary_us(self) -> dict[str, float]:
        """p50/p90/p99/p99.9/max and mean in microseconds."""
        pcts = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99.9": 99.9}
        out = {k: self.percentile(p) / 1000.0 for k, p in pcts.items()}
        out["max"] = self.max / 1000.0
        out["mean"] = self.mean() / 1000.0
        return out
