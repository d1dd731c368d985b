"""msgspan finds where packed msgpack objects end as msgpack itself does, without building
them (wire.unpack_requests' out-of-memory path)."""

from __future__ import annotations

import random
from typing import Any

import msgpack
import pytest

from shardq.cluster import wire


def random_object(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["int", "neg", "big", "str", "bytes", "float", "none", "bool"]
    if depth < 3:
        kinds += ["list", "dict"]
    kind = rng.choice(kinds)
    size = rng.choice([0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536, 70000])
    if kind == "int":
        return rng.choice([0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1])
    if kind == "neg":
        return -rng.choice([1, 32, 33, 128, 129, 2**15, 2**15 + 1, 2**31, 2**31 + 1, 2**63])
    if kind == "big":
        return rng.getrandbits(63)
    if kind == "str":
        return "é" * (size // 2)
    if kind == "bytes":
        return b"b" * size
    if kind == "float":
        return rng.random()
    if kind == "none":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    n = rng.choice([0, 1, 15, 16, 17])
    if kind == "list":
        return [random_object(rng, depth + 1) for _ in range(n)]
    return {i: random_object(rng, depth + 1) for i in range(n)}


@pytest.mark.parametrize("seed", range(20))
def test_the_spans_of_a_batch_are_its_requests(seed: int) -> None:
    rng = random.Random(seed)
    batch = [
        [rng.randrange(40), rng.randrange(2**40), *(random_object(rng) for _ in range(4))]
        for _ in range(rng.choice([0, 1, 3, 16, 17]))
    ]
    data = wire.pack(batch)
    spans = list(wire.request_spans(data))
    assert [msgpack.unpackb(data[a:b], strict_map_key=False) for a, b in spans] == batch
    assert (spans[-1][1] if spans else 1 + (len(batch) > 15) * 2) == len(data)


def test_a_cut_batch_is_not_msgpack() -> None:
    data = wire.pack([[1, 2, 3, b"x" * 100]])
    with pytest.raises(ValueError):
        list(wire.request_spans(data[:50]))
