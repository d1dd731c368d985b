"""The replies of the beanstalk protocol as bytes: fixed lines and the formatted ones.

Pure functions and constants, no I/O: every reply a client can see is spelled here
(the engine, the serving process and the coordinator build their answers with these), so the
bytes of a reply are decided in one place and can be tested without sockets.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

# The job and put replies are the fast path's: compiled, they are written into a bytes
# object of their exact size (digits, put_digits; the C calls from replies.pxd) where `%`
# formatting builds a tuple and parses its format (≈ 2.5k instructions a RESERVED line).
SPACE, CR, LF = 32, 13, 10

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
    if not taken:
        return OUT_OF_MEMORY
    if not cython.compiled:
        return b"INSERTED %d\r\n" % job_id
    return _line(b"INSERTED ", job_id)


def kicked(count: int) -> bytes:
    return b"KICKED %d\r\n" % count


def job_reply(word: bytes, job_id: int, body: bytes) -> bytes:
    """``RESERVED``/``FOUND`` reply: ``<word> <id> <bytes>\\r\\n<body>\\r\\n``."""
    if not cython.compiled:
        return b"%s %d %d\r\n%s\r\n" % (word, job_id, len(body), body)
    out = PyBytes_FromStringAndSize(cython.NULL, _job_size(word, job_id, body))  # type: ignore[name-defined]  # noqa: F821
    _write_job(cython.cast(cython.p_char, out), word, job_id, body)
    return out


@cython.locals(n=cython.Py_ssize_t, size=cython.Py_ssize_t)
def job_reply_into(out: bytearray, word: bytes, job_id: int, body: bytes) -> None:
    """``out += job_reply(word, job_id, body)``, written in place (compiled: no bytes
    object made and copied)."""
    if not cython.compiled:
        out += job_reply(word, job_id, body)
        return
    n = len(out)
    size = _job_size(word, job_id, body)
    PyByteArray_Resize(out, n + size)  # type: ignore[name-defined]  # noqa: F821
    _write_job(PyByteArray_AS_STRING(out) + n, word, job_id, body)  # type: ignore[name-defined]  # noqa: F821


def _job_size(word: bytes, job_id: int, body: bytes) -> int:
    """The bytes of a job reply (compiled build only)."""
    return len(word) + digits(job_id) + digits(len(body)) + len(body) + 6


@cython.locals(size=cython.Py_ssize_t, size_at=cython.Py_ssize_t, body_at=cython.Py_ssize_t)
def _write_job(at: bytearray, word: bytes, job_id: int, body: bytes) -> None:
    """A job reply's bytes from `at` on, exactly `_job_size` of them (compiled build only)."""
    size = len(body)
    size_at = len(word) + 1 + digits(job_id) + 1  # where the size starts
    body_at = size_at + digits(size) + 2
    memcpy(at, cython.cast(cython.p_char, word), len(word))  # type: ignore[name-defined]  # noqa: F821
    at[len(word)] = SPACE
    put_digits(at, size_at - 1, job_id)
    at[size_at - 1] = SPACE
    put_digits(at, body_at - 2, size)
    at[body_at - 2], at[body_at - 1] = CR, LF
    memcpy(at + body_at, cython.cast(cython.p_char, body), size)  # type: ignore[name-defined, operator]  # noqa: F821
    at[body_at + size], at[body_at + size + 1] = CR, LF


@cython.locals(at=cython.p_char, end=cython.Py_ssize_t)
def _line(word: bytes, number: int) -> bytes:
    """`word`, then `number` in decimal, then CRLF (compiled build only)."""
    end = len(word) + digits(number)
    out = PyBytes_FromStringAndSize(cython.NULL, end + 2)  # type: ignore[name-defined]  # noqa: F821
    at = cython.cast(cython.p_char, out)
    memcpy(at, cython.cast(cython.p_char, word), len(word))  # type: ignore[name-defined]  # noqa: F821
    put_digits(at, end, number)
    at[end], at[end + 1] = CR, LF
    return out


@cython.cdivision(True)
@cython.locals(count=cython.Py_ssize_t)  # (else a Python int, made anew at every digit)
def digits(number: int) -> int:
    """How many decimal digits `number` (≥ 0) has."""
    count = 1
    while number >= 10:
        number //= 10
        count += 1
    return count


@cython.cdivision(True)
def put_digits(at: bytearray, end: int, number: int) -> None:
    """Write `number` (≥ 0) in decimal so that it ends just before `end`."""
    while True:
        end -= 1
        at[end] = 48 + number % 10
        number //= 10
        if not number:
            return


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
