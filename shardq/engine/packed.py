"""Three 64-bit fields in one int, as a job keeps them (job.py): made, and read one at a time.

A job's `key` is pri << 128 | seq << 64 | id and its `hold` owner << 128 | deadline << 64 |
created (each field below 2**64). In Python every shift, and or or of such an int makes a
new int (≈ 200–280 instructions apiece): a reserve made five of them to set `hold`, a put
four to make `key`. Compiled, `pack` makes the int from its three fields in one C call
(CPython's conversion of an int's bytes, little-endian whatever the machine's order) and
`low` reads the low field as a C integer. Uncompiled, they are the shifts and masks they
stand for; the unit tests hold the two builds to the same answers. (Reading the high field
through the bytes measured dearer than the shift: ≈ 395 instructions against 280.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

FIELD = (1 << 64) - 1  #: one field's bits


def pack(high: int, mid: int, low: int) -> int:
    """high << 128 | mid << 64 | low, each field in [0, 2**64)."""
    if not cython.compiled:
        return high << 128 | mid << 64 | low
    return sq_pack(high, mid, low)  # type: ignore[name-defined]  # noqa: F821  # packed.pxd


def low(x: int) -> int:
    """x & FIELD: the low field (of an x >= 0)."""
    if not cython.compiled:
        return x & FIELD
    return PyLong_AsUnsignedLongLongMask(x)  # type: ignore[name-defined]  # noqa: F821
