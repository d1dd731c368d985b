"""The ready heap (engine/ready.py) against a sorted list, under random puts, reserves of
the head and removals from anywhere (the lazily dropped keys), re-adds included."""

from __future__ import annotations

import random

import pytest

from shardq.engine.ready import ReadyHeap


@pytest.mark.parametrize("seed", range(20))
def test_the_heap_gives_what_a_sorted_list_gives(seed: int) -> None:
    rng = random.Random(seed)
    heap, model = ReadyHeap(), []
    removed: list[int] = []
    for _ in range(3000):
        op = rng.random()
        if op < 0.45 or not model:
            key = removed.pop() if removed and rng.random() < 0.3 else rng.randrange(1 << 40)
            if key in model:
                continue
            heap.add(key)
            model.append(key)
        elif op < 0.75:
            head = heap.first()
            assert head == min(model)
            heap.remove(head)
            model.remove(head)
        else:
            key = rng.choice(model)
            heap.remove(key)
            model.remove(key)
            removed.append(key)
        assert heap.live == len(model)
        assert bool(heap) == bool(model)
        if model:
            assert heap[0] == min(model)
        assert len(heap) <= 2 * len(model)  # gone keys never outnumber the live
    assert list(heap) == sorted(model) == heap.live_keys()


def test_a_key_removed_from_the_middle_and_added_again_is_live_once() -> None:
    heap = ReadyHeap([5, 1, 9, 7])
    assert heap.first() == 1 and heap.live == 4
    heap.remove(7)  # not the head: marked gone
    heap.add(7)  # back before its stale entry left
    assert list(heap) == [1, 5, 7, 9] and heap.live == 4
    for want in (1, 5, 7, 9):
        assert heap.first() == want
        heap.remove(want)
    assert not heap and heap.live == 0 and len(heap) == 0
