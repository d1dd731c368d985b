"""The collector of a server process (processes/common/collector.py): after a young
collection, a turn boundary collects what is not frozen and freezes the survivors; with no
young collection since, it does nothing."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from shardq.processes.common import collector


class Node:
    """An object in a reference cycle of its own: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def cycle() -> weakref.ref[Node]:
    return weakref.ref(Node())


@pytest.fixture
def clean_gc() -> Iterator[None]:
    assert gc.isenabled()
    gc.unfreeze()
    gc.collect()  # every generation's count back to 0
    yield
    gc.unfreeze()  # the test process's objects are collected as before


def test_after_a_young_collection_settle_collects_and_freezes(clean_gc: None) -> None:
    gc.collect(0)  # a young collection: the middle generation's count is 1
    assert gc.get_count()[collector.YOUNG_SINCE] == 1
    dead = cycle()
    survivor = Node()
    assert dead() is not None  # garbage, not yet collected
    collector.settle()
    assert dead() is None  # collected before the freeze
    assert gc.get_count()[collector.YOUNG_SINCE] == 0
    assert gc.get_freeze_count() > 0  # the survivors are frozen: never walked again
    assert survivor.me is survivor


def test_with_no_young_collection_since_settle_does_nothing(clean_gc: None) -> None:
    dead = cycle()
    collector.settle()
    assert dead() is not None  # nothing collected (the next young collection will)
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert dead() is None
