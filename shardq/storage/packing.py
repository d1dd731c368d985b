"""msgpack for the logs' records, with a buffer the size of the record.

`msgpack.packb` makes a Packer per call, and a Packer starts with a 256 KiB buffer: for
each record logged (a put: its body plus a few numbers) a quarter-MiB allocation, freed at
once, churning the heap, and the first thing to fail when memory runs short. Sized to
the record, the buffer is what the packed bytes need anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgpack

OVERHEAD = 64  #: bytes for a record's numbers and framing beyond its strings and bytes


def pack(record: Sequence[Any]) -> bytes:
    """The record as a msgpack array (a tuple packs as a list does)."""
    size = OVERHEAD + sum(len(f) for f in record if isinstance(f, (bytes, str)))
    return msgpack.packb(record, use_bin_type=True, buf_size=size)
