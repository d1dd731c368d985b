"""A raw bunqueue client for the tests: frames out, decoded replies in (msgpackr's
`undefined` decoded as the `UNDEFINED` marker, so a test sees what was sent)."""

from __future__ import annotations

import socket
import struct
from typing import Any

import msgpack

HEADER = struct.Struct(">I")


class Undefined:
    def __repr__(self) -> str:
        return "undefined"


UNDEFINED = Undefined()


def ext(code: int, data: bytes) -> Any:
    return UNDEFINED if code == 0 else msgpack.ExtType(code, data)


class Raw:
    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, msg: dict[str, Any]) -> None:
        body = msgpack.packb(msg, use_bin_type=True)
        self.sock.sendall(HEADER.pack(len(body)) + body)

    def read_frame(self) -> bytes | None:
        while len(self.buf) < 4 or len(self.buf) < 4 + HEADER.unpack_from(self.buf)[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        (size,) = HEADER.unpack_from(self.buf)
        body, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
        return body

    def recv(self) -> Any:
        body = self.read_frame()
        if body is None:
            return None
        return msgpack.unpackb(body, raw=False, ext_hook=ext, strict_map_key=False)

    def call(self, cmd: str, **args: Any) -> Any:
        self.send({"cmd": cmd, **args})
        while True:
            reply = self.recv()
            if not (isinstance(reply, dict) and reply.get("type") == "event"):
                return reply


def clean(reply: Any) -> Any:
    """A reply without msgpackr's `undefined` values (JS treats them as absent)."""
    if isinstance(reply, dict):
        return {k: clean(v) for k, v in reply.items() if v is not UNDEFINED}
    if isinstance(reply, list):
        return [clean(v) for v in reply]
    return reply
