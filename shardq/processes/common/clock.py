"""The clocks of the serving path: `time.monotonic_ns` and `time.time_ns`, as C calls in
the compiled build (the C library's `clock_gettime`, the same clocks), with no call into
the time module. The pure build calls the time module."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

# The compiled build's clock_gettime, timespec and the clock ids come from clock.pxd,
# which only Cython reads: the pure build never reaches the branches that use them.

NS = 1_000_000_000  #: nanoseconds per second


def monotonic() -> int:
    """`time.monotonic_ns()`: nanoseconds of the monotonic clock."""
    if not cython.compiled:
        return time.monotonic_ns()
    return read_clock(CLOCK_MONOTONIC)  # type: ignore[name-defined]  # noqa: F821


def wall() -> int:
    """`time.time_ns()`: nanoseconds since the epoch."""
    if not cython.compiled:
        return time.time_ns()
    return read_clock(CLOCK_REALTIME)  # type: ignore[name-defined]  # noqa: F821


def read_clock(clock_id: int) -> int:
    """The clock `clock_id` in nanoseconds (compiled only: `clock_gettime`)."""
    ts = cython.declare(timespec)  # type: ignore[name-defined]  # noqa: F821
    clock_gettime(clock_id, cython.address(ts))  # type: ignore[name-defined]  # noqa: F821
    return ts.tv_sec * NS + ts.tv_nsec
