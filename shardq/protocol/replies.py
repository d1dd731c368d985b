"""The replies of the beanstalk protocol as bytes: fixed lines and the formatted ones.

Pure functions and constants, no I/O: every reply a client can see is spelled here
(the engine, the serving process and the coordinator build their answers with these), so the
bytes of a reply are decided in one place and can be tested without sockets.
"""

from __future__ import annotations

from collections.abc import Iterable

# Fixed replies, each a full line.
DELETED = b"DELETED\r\n"
RELEASED = b"RELEASED\r\n"
BURIED = b"BURIED\r\n"
KICKED = b"KICKED\r\n"
TOUCHED = b"TOUCHED\r\n"
PAUSED = b"PAUSED\r\n"
NOT_FOUND = b"NOT_FOUND\r\n"
NOT_IGNORED = b"NOT_IGNORED\r\n"
TIMED_OUT = b"TIMED_OUT\r\n"
DEADLINE_SOON = b"DEADLINE_SOON\r\n"
DRAINING = b"DRAINING\r\n"
OUT_OF_MEMORY = b"OUT_OF_MEMORY\r\n"
INTERNAL_ERROR = b"INTERNAL_ERROR\r\n"
BAD_FORMAT = b"BAD_FORMAT\r\n"
UNKNOWN_COMMAND = b"UNKNOWN_COMMAND\r\n"
EXPECTED_CRLF = b"EXPECTED_CRLF\r\n"
JOB_TOO_BIG = b"JOB_TOO_BIG\r\n"


class Raw:
    """A YAML value printed as is (``state: ready``, ``rusage-utime: 0.001575``)."""

    __slots__ = ("text",)

    text: str

    def __init__(self, text: str) -> None:
        self.text = text


class Quoted:
    """A string value beanstalkd 1.12 itself prints in double quotes (``version: "1.12"``)."""

    __slots__ = ("text",)

    text: str

    def __init__(self, text: str) -> None:
        self.text = text


#: How string values of stats replies are printed: "plain" as beanstalkd 1.12 does (``name:
#: foo``; clients such as pheanstalk 4 read them so), or "quoted" as beanstalkd 1.13 does
#: (``name: "foo"``, strict YAML). Set once per process at start-up (`set_yaml_style`).
YAML_STYLES = ("plain", "quoted")
_quote_strings = False


def set_yaml_style(style: str) -> None:
    """Print stats string values "plain" (beanstalkd 1.12, the default) or "quoted" (1.13)."""
    global _quote_strings
    if style not in YAML_STYLES:
        raise ValueError(f"stats YAML style {style!r}: expected one of {YAML_STYLES}")
    _quote_strings = style == "quoted"


def put_reply(job_id: int, taken: bool) -> bytes:
    """A put's reply: INSERTED, or OUT_OF_MEMORY when its tube made no room for it."""
    return b"INSERTED %d\r\n" % job_id if taken else OUT_OF_MEMORY


def kicked(count: int) -> bytes:
    return b"KICKED %d\r\n" % count


def job_reply(word: bytes, job_id: int, body: bytes) -> bytes:
    """``RESERVED``/``FOUND`` reply: ``<word> <id> <bytes>\\r\\n<body>\\r\\n``."""
    return b"%s %d %d\r\n%s\r\n" % (word, job_id, len(body), body)


def using(tube: str) -> bytes:
    return b"USING %s\r\n" % tube.encode("ascii")


def watching(count: int) -> bytes:
    return b"WATCHING %d\r\n" % count


def _yaml_value(value: object) -> str:
    if isinstance(value, bool):  # before int: bool is an int
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Quoted):
        return f'"{value.text}"'
    if isinstance(value, str):
        return f'"{value}"' if _quote_strings else value  # 1.13 quotes with "%s", no escaping
    raise TypeError(f"unsupported YAML value {value!r}")


def _ok(body: str) -> bytes:
    data = body.encode()
    return b"OK %d\r\n%s\r\n" % (len(data), data)


def yaml_map(pairs: Iterable[tuple[str, object]]) -> bytes:
    """Stats reply: ``OK <n>\\r\\n---\\nkey: value\\n…\\r\\n`` (n excludes the final CRLF)."""
    return _ok("---\n" + "".join(f"{key}: {_yaml_value(value)}\n" for key, value in pairs))


def yaml_list(names: Iterable[str]) -> bytes:
    """list-tubes reply: ``OK <n>\\r\\n---\\n- name\\n…\\r\\n``; names are never quoted."""
    return _ok("---\n" + "".join(f"- {name}\n" for name in names))
