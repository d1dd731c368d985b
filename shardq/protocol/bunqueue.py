"""bunqueue's wire protocol, sans-IO: frames in, requests out; replies to frames.

A frame is a big-endian u32 length and one MessagePack map with string keys: a request
names its command in ``cmd`` and may carry a ``reqId`` of any type, echoed verbatim in its
reply. A frame past `MAX_FRAME` (64 MiB) is answered with bunqueue's own error and the
connection ends; an undecodable frame is ``Invalid command format``, a frame that is not a
map with a ``cmd`` is ``Invalid command``.

Replies are encoded as bunqueue's encoder (msgpackr) writes what matters to its clients:
an integer outside 32 bits goes out as a float64, never as a 64-bit integer (the TS SDK
decodes those as BigInt and then mixes them with numbers). msgpackr's ``undefined``
(fixext 1, type 0) decodes as None.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import msgpack

from shardq.protocol.inbuf import Invalid

HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024
#: integers msgpackr writes as integers (the rest: float64)
INT_MIN, INT_MAX = -(1 << 31), (1 << 32) - 1
NO_REQ_ID = object()  #: a request without a reqId (its reply has none)
#: one packer for every reply (a Packer per call starts with a 256 KiB buffer)
PACKER = msgpack.Packer(use_bin_type=True)


@dataclass(frozen=True, slots=True)
class Request:
    cmd: str
    args: dict[str, Any]
    req_id: Any  # NO_REQ_ID: none

    def get(self, key: str, default: Any = None) -> Any:
        value = self.args.get(key)
        return default if value is None else value


def undefined(code: int, data: bytes) -> Any:
    """msgpackr's `undefined` (ext 0) is None; any other extension is refused."""
    if code == 0:
        return None
    raise ValueError(f"extension type {code}")


def safe(value: Any) -> Any:
    """`value` with every integer msgpackr would not write as one turned into a float."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if INT_MIN <= value <= INT_MAX else float(value)
    if isinstance(value, dict):
        return {k: safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe(v) for v in value]
    return value


def frame(reply: dict[str, Any]) -> bytes:
    """A reply's frame (its values already `safe`: timestamps are floats)."""
    body = PACKER.pack(reply)
    return HEADER.pack(len(body)) + body


def ok(req_id: Any, **fields: Any) -> bytes:
    reply: dict[str, Any] = {"ok": True, **fields}
    if req_id is not NO_REQ_ID:
        reply["reqId"] = req_id
    return frame(reply)


def error(message: str, req_id: Any = NO_REQ_ID) -> bytes:
    reply: dict[str, Any] = {"ok": False, "error": message}
    if req_id is not NO_REQ_ID:
        reply["reqId"] = req_id
    return frame(reply)


def too_large(size: int) -> str:
    return f"Frame too large: {size} bytes exceeds maximum {MAX_FRAME}"


class BunqueueParser:
    """Frames in (`feed`), a `Request` or an `Invalid` out (`next_command`)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.dead = False  # a frame too large was seen: nothing more is parsed

    @property
    def buffered(self) -> int:
        return len(self.buf)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if not self.dead:
            self.buf += data

    def next_command(self) -> Request | Invalid | None:
        if self.dead or len(self.buf) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self.buf)
        if size > MAX_FRAME:
            self.dead = True
            self.buf.clear()
            return Invalid(error(too_large(size)), close=True)
        end = HEADER.size + size
        if len(self.buf) < end:
            return None
        body = bytes(self.buf[HEADER.size : end])
        del self.buf[:end]
        return decode(body)


def decode(body: bytes) -> Request | Invalid:
    """As bunqueue: what does not decode (or decodes to a falsy value) is ``Invalid command
    format``; a value with no ``cmd`` is ``Invalid command`` (with its reqId if a string)."""
    try:
        msg = msgpack.unpackb(body, raw=False, ext_hook=undefined, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException):
        return Invalid(error("Invalid command format"))
    if not msg:
        return Invalid(error("Invalid command format"))
    if not isinstance(msg, dict) or not msg.get("cmd"):
        req_id = msg.get("reqId") if isinstance(msg, dict) else None
        return Invalid(error("Invalid command", req_id if isinstance(req_id, str) else NO_REQ_ID))
    req_id = msg.pop("reqId", NO_REQ_ID)
    return Request(str(msg.pop("cmd")), msg, NO_REQ_ID if req_id is None else req_id)
