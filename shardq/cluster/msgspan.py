"""Where msgpack objects end in packed bytes, found without building them.

For the out-of-memory path of `wire.unpack_requests`: a batch whose requests cannot all be
decoded (a put's body) is split into its requests by reading their headers only, so that
neither a request nor a buffer of msgpack's own is allocated (msgpack's streaming
unpacker grows a buffer to hold each whole object, and that is what fails).
"""

from __future__ import annotations

#: first byte -> bytes that follow it (nil, booleans, floats, fixed-size ints and exts)
FIXED = {
    0xC0: 0,
    0xC2: 0,
    0xC3: 0,
    0xCA: 4,
    0xCB: 8,
    0xCC: 1,
    0xCD: 2,
    0xCE: 4,
    0xCF: 8,
    0xD0: 1,
    0xD1: 2,
    0xD2: 4,
    0xD3: 8,
    0xD4: 2,
    0xD5: 3,
    0xD6: 5,
    0xD7: 9,
    0xD8: 17,
}
#: first byte -> (width of its length, bytes past the length besides the payload)
SIZED = {
    0xC4: (1, 0),  # bin 8, 16, 32
    0xC5: (2, 0),
    0xC6: (4, 0),
    0xC7: (1, 1),  # ext 8, 16, 32: a type byte too
    0xC8: (2, 1),
    0xC9: (4, 1),
    0xD9: (1, 0),  # str 8, 16, 32
    0xDA: (2, 0),
    0xDB: (4, 0),
}
#: first byte -> (width of its count, objects per counted item): arrays and maps
COUNTED = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}


def number(data: bytes | memoryview, pos: int, width: int) -> int:
    """The big-endian unsigned integer of `width` bytes at `pos`."""
    n = 0
    for i in range(pos, pos + width):
        n = n << 8 | data[i]
    return n


def header(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """An array's (item count, where its first item starts) at `pos`."""
    first = data[pos]
    if 0x90 <= first <= 0x9F:
        return first & 0x0F, pos + 1
    width = {0xDC: 2, 0xDD: 4}.get(first)
    if width is None:
        raise ValueError(f"not a msgpack array at {pos}")
    return number(data, pos + 1, width), pos + 1 + width


def skip(data: bytes | memoryview, pos: int, count: int = 1) -> int:
    """Where the `count` objects that start at `pos` end."""
    while count:
        count -= 1
        first = data[pos]
        pos += 1
        if first <= 0x7F or first >= 0xE0:  # fixint
            continue
        if first <= 0x8F:  # fixmap
            count += 2 * (first & 0x0F)
        elif first <= 0x9F:  # fixarray
            count += first & 0x0F
        elif first <= 0xBF:  # fixstr
            pos += first & 0x1F
        elif first in FIXED:
            pos += FIXED[first]
        elif first in SIZED:
            width, extra = SIZED[first]
            pos += width + extra + number(data, pos, width)
        elif first in COUNTED:
            width, per = COUNTED[first]
            count += per * number(data, pos, width)
            pos += width
        else:
            raise ValueError(f"not msgpack: byte {first:#x} at {pos - 1}")
    if pos > len(data):
        raise ValueError("msgpack cut short")
    return pos
