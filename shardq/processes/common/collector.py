"""The cyclic garbage collector of a server process: no pause that grows with the jobs held.

Every job is an object the collector tracks. With Python's three generations (and the
thresholds `supervision/child.py` sets: a young collection every 20,000 allocations) the
middle generation collects whatever survived the last 20 young collections, up to 400,000
objects under a stream of puts (a turn of 80 ms, measured), and the oldest is walked whole
each time it has grown by a quarter: every job the process holds, a pause that grows with
the queue. Here, in the processes that hold jobs (a serving process, for its hosted shard,
and a shard process of its own), after each young collection the next turn boundary
collects everything not frozen (only what was made since the last time) and freezes what
survives (`gc.freeze`), so no collection ever walks an older object again.

A frozen object that dies is still freed by its reference count; what a collection would
no longer find is a reference cycle, through a frozen object, that becomes garbage later.
The server keeps no such cycles (its tests of connection churn hold Python's allocated
blocks flat).
"""

from __future__ import annotations

import gc

YOUNG_SINCE = 1  #: index, in gc.get_count(), of the young collections since the last middle one

#: Cyclic-GC thresholds of the server processes. Every job is a tracked object, so with
#: Python's default (700, 10, 10) the young collections run every few hundred commands and
#: the middle one re-walks everything recently put; measured with `shardq bench -w put -c 50
#: --pipeline 16 -P 2`: 32-44k ops/s with the default, 62-64k with these (docs/BENCHMARKS.md).
GC_THRESHOLDS = (20_000, 20, 10)


def tune() -> None:
    """A child's start: collect less often, and never walk what exists at start-up
    (modules, config); the supervisor forks with collection off (`preload`), so turn it
    on again."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()
    gc.enable()


def settle() -> None:
    """Between two turns of a loop: after a young collection, collect what is not frozen
    and freeze the survivors. Costs one call when there was none."""
    if gc.get_count()[YOUNG_SINCE] and gc.isenabled():
        gc.collect()
        gc.freeze()
