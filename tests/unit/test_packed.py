"""The packed fields' helpers (engine/packed.py) give what the shifts and masks give, at
every field's edges (0, 1, 2**64 - 1, each bit alone) and on random fields; a field out of
range is refused, not wrapped."""

from __future__ import annotations

import itertools
import random

import pytest

from shardq.engine import packed

TOP = (1 << 64) - 1
EDGES = [0, 1, 2, TOP, TOP - 1, 1 << 63, (1 << 63) - 1, 1 << 30, (1 << 30) - 1, 1 << 32]


def test_pack_and_low_at_the_edges() -> None:
    for high, mid, low in itertools.product(EDGES, repeat=3):
        value = packed.pack(high, mid, low)
        assert value == high << 128 | mid << 64 | low
        assert packed.low(value) == low


def test_pack_and_low_on_random_fields() -> None:
    rng = random.Random(11)
    for _ in range(20_000):
        high, mid, low = (rng.getrandbits(rng.randrange(1, 65)) for _ in range(3))
        value = packed.pack(high, mid, low)
        assert value == high << 128 | mid << 64 | low
        assert packed.low(value) == low
        assert packed.low(low) == low  # a plain int of one field


def test_a_field_out_of_range_is_refused() -> None:
    if not packed.__file__.endswith(".py"):  # the compiled build checks each field
        with pytest.raises(OverflowError):
            packed.pack(1 << 64, 0, 0)
        with pytest.raises(OverflowError):
            packed.pack(0, -1, 0)
    else:  # the pure build is the shifts themselves: the fields are the caller's to bound
        assert packed.pack(0, 0, 1 << 64) == 1 << 64
