"""A small session language for differential tests against beanstalkd 1.12.

A *session* is a list of steps. Each step names a connection ("A", "B", ...;
connections open lazily at their first step), optionally bytes to send, and
what to do next:

    A(b"put 0 0 60 1\\r\\nx\\r\\n", bind="j1")   send, read 1 reply unit, bind its id as j1
    A(b"stats\\r\\n", 1)                      send, read 1 unit
    A(b"x" * 250 + b"\\r\\n", 0)                send only
    A.read(2)                              read 2 units (no send)
    A.silent(b"reserve\\r\\n", 0.3)           send, then assert no byte arrives for 0.3 s
    A.eof(b"quit\\r\\n")                      send, then assert the server closes
    A.shutdown() / A.close()               shutdown(SHUT_WR) / close the socket
    wait(1.0)                              sleep (timing sessions only)
    calc("j3 - j1")                        record an arithmetic fact about bound ids

Job ids are symbolic. ``bind`` names the ids of the id-carrying replies of a step
(``INSERTED``, ``RESERVED``, ``FOUND``, ``BURIED <id>``) in order; ``None`` skips
one. Commands use them as ``{j1}`` (or ``{j1+1}``). In transcripts every job id
is replaced by its name, or by ``#k`` in order of first appearance.

``want=`` gives the expected (normalised) bytes of a step's replies,
concatenated. It is checked on the oracle side only: it records what the live
beanstalkd 1.12 was seen to answer, and fails loudly if the oracle ever
disagrees. The differential comparison itself needs no ``want``.

Normalisation (normalise.py) is deliberately narrow (see :func:`normalise_unit`): job ids,
process/time-dependent stats values, YAML string quoting and the ``OK <n>``
byte count of YAML bodies (which is checked against the body on each side
separately). Everything else must match byte for byte, in order.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import socket
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest
from helpers import (
    LAYOUTS,
    READ_DEADLINE,
    Layout,
    connect,
    expect_eof,
    expect_silence,
    layout_of,
    read_replies,
    send,
)

from .normalise import IGNORED_KEYS, SEVERAL_SHARDS_ONLY, IdMap, job_id_in, normalise_unit

#: Connection counters, ignored only by sessions where closing makes them racy.
RACY_CONNECTION_KEYS = frozenset(
    {"total-connections", "current-connections", "current-producers", "current-workers"}
)
SHARD_COUNTS = LAYOUTS


# --------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Step:
    conn: str | None = None
    send: bytes | None = None
    read: int = 0
    silence: float | None = None
    eof: bool = False
    shutdown: bool = False
    close: bool = False
    wait: float | None = None
    calc: str | None = None
    bind: tuple[str | None, ...] = ()
    want: bytes | None = None
    timeout: float = READ_DEADLINE


def _names(bind: str | Iterable[str | None] | None) -> tuple[str | None, ...]:
    if bind is None:
        return ()
    if isinstance(bind, str):
        return tuple(bind.split())
    return tuple(bind)


class Conn:
    """Step factory for one named connection."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(
        self,
        data: bytes,
        n: int = 1,
        *,
        bind: str | Iterable[str | None] | None = None,
        want: bytes | None = None,
        timeout: float = READ_DEADLINE,
    ) -> Step:
        return Step(self.name, data, n, bind=_names(bind), want=want, timeout=timeout)

    def read(
        self,
        n: int = 1,
        *,
        bind: str | Iterable[str | None] | None = None,
        want: bytes | None = None,
        timeout: float = READ_DEADLINE,
    ) -> Step:
        return Step(self.name, None, n, bind=_names(bind), want=want, timeout=timeout)

    def silent(self, data: bytes | None = None, seconds: float = 0.3) -> Step:
        return Step(self.name, data, silence=seconds)

    def eof(self, data: bytes | None = None) -> Step:
        return Step(self.name, data, eof=True)

    def shutdown(self) -> Step:
        return Step(self.name, shutdown=True)

    def close(self) -> Step:
        return Step(self.name, close=True)


def wait(seconds: float) -> Step:
    """Sleep. Only for sessions about TTR, delays, pauses and timeouts."""
    return Step(wait=seconds)


def calc(expr: str) -> Step:
    """Record ``a - b`` / ``a + 3`` over bound ids (e.g. to show ids used up)."""
    return Step(calc=expr)


@dataclass(frozen=True)
class Session:
    name: str
    steps: tuple[Step, ...]
    #: Extra stats keys to ignore (only where the value is inherently racy).
    ignore: frozenset[str] = frozenset()
    #: Layouts this session is compared for (see test_shardq_fixes.py for the rest).
    shards: tuple[int | Layout, ...] = SHARD_COUNTS


def session(
    name: str,
    *steps: Step | Sequence[Step],
    ignore: Iterable[str] = (),
    shards: tuple[int | Layout, ...] = SHARD_COUNTS,
) -> Session:
    flat: list[Step] = []
    for s in steps:
        flat.extend([s] if isinstance(s, Step) else s)
    return Session(name, tuple(flat), frozenset(ignore), shards)


A, B, C, D, E = (Conn(x) for x in "ABCDE")


NF = b"NOT_FOUND\r\n"


def put(conn, name: str, pri: int = 0, delay: int = 0, ttr: int = 60, body: bytes = b"x"):
    """A put on ``conn`` that binds the new job's id as ``name``."""
    line = b"put %d %d %d %d\r\n" % (pri, delay, ttr, len(body))
    return conn(line + body + b"\r\n", bind=name, want=b"INSERTED {%s}\r\n" % name.encode())


# --------------------------------------------------------------------------- running


def _show(data: bytes, limit: int = 120) -> str:
    if len(data) <= limit:
        return repr(data)
    digest = hashlib.sha256(data).hexdigest()[:16]
    return f"{data[: limit - 20]!r}...{data[-12:]!r} ({len(data)} bytes, sha256 {digest})"


@dataclass
class Transcript:
    lines: list[str] = field(default_factory=list)
    failed: str | None = None
    want_mismatches: list[str] = field(default_factory=list)


_CALC = re.compile(r"^\s*([A-Za-z_]\w*)\s*([+-])\s*(?:([A-Za-z_]\w*)|(\d+))\s*$")


def _calc(expr: str, ids: IdMap) -> int:
    m = _CALC.match(expr)
    if m is None:
        raise ValueError(f"bad calc expression {expr!r}")
    left = ids.by_name[m.group(1)]
    right = ids.by_name[m.group(3)] if m.group(3) else int(m.group(4))
    return left - right if m.group(2) == "-" else left + right


def run_session(port: int, sess: Session, drop: frozenset[str] = frozenset()) -> Transcript:
    """Run ``sess`` against the server on ``port`` and return its normalised transcript
    (without the YAML lines of the keys in ``drop``)."""
    ignore = IGNORED_KEYS | sess.ignore
    ids = IdMap()
    socks: dict[str, socket.socket] = {}
    t = Transcript()
    try:
        for i, step in enumerate(sess.steps):
            _run_step(i, step, port, socks, ids, ignore, drop, t)
    except (AssertionError, OSError, KeyError, ValueError) as exc:
        t.failed = f"step {i}: {type(exc).__name__}: {exc}"
        t.lines.append(f"!! {t.failed}")
    finally:
        for sock in socks.values():
            sock.close()
    return t


def _run_step(
    i: int,
    step: Step,
    port: int,
    socks: dict[str, socket.socket],
    ids: IdMap,
    ignore: frozenset[str],
    drop: frozenset[str],
    t: Transcript,
) -> None:
    if step.wait is not None:
        t.lines.append(f"-- wait {step.wait}")
        time.sleep(step.wait)
        return
    if step.calc is not None:
        t.lines.append(f"-- calc {step.calc} = {_calc(step.calc, ids)}")
        return
    assert step.conn is not None
    name = step.conn
    if step.close:
        t.lines.append(f"{name} close")
        socks.pop(name).close()
        return
    if name not in socks:
        socks[name] = connect(port)
    sock = socks[name]
    if step.shutdown:
        t.lines.append(f"{name} shutdown(SHUT_WR)")
        sock.shutdown(socket.SHUT_WR)
        return
    if step.send is not None:
        t.lines.append(f"{name} >> {_show(step.send)}")
        send(sock, ids.expand(step.send))
    if step.read:
        units = read_replies(sock, step.read, step.timeout)
        names = list(step.bind)
        got = []
        for unit in units:
            job_id = job_id_in(unit)
            if job_id is not None and names:
                bound = names.pop(0)
                if bound is not None:
                    ids.bind(bound, job_id)
            norm = normalise_unit(unit, ids, ignore, drop)
            got.append(norm)
            if norm.startswith(b"OK <"):  # YAML: one transcript line per YAML line
                t.lines.extend(f"{name} << {line!r}" for line in norm.split(b"\n"))
            else:
                t.lines.append(f"{name} << {_show(norm, 4000)}")
        if names:
            raise ValueError(f"step {i}: names {names} left unbound (no id in replies)")
        if step.want is not None and b"".join(got) != step.want:
            t.want_mismatches.append(
                f"step {i} ({name} {_show(step.send or b'')}): "
                f"want {step.want!r}, got {b''.join(got)!r}"
            )
    if step.silence is not None:
        t.lines.append(f"{name} .. silence {step.silence}")
        expect_silence(sock, step.silence)
    if step.eof:
        t.lines.append(f"{name} << EOF")
        expect_eof(sock)


def differential_params(sessions: Iterable[Session]) -> list:
    """pytest params ``(session, layout)`` for every session and supported layout."""
    return [pytest.param(s, n, id=f"{s.name}-{layout_of(n)}") for s in sessions for n in s.shards]


def check_oracle(t: Transcript, sess: Session) -> None:
    if t.failed or t.want_mismatches:
        detail = "\n".join([t.failed or "", *t.want_mismatches]).strip()
        transcript = "\n".join(t.lines[-40:])
        pytest.fail(
            f"session {sess.name!r} does not hold against beanstalkd 1.12 itself "
            f"(fix the session):\n{detail}\n--- oracle transcript (tail) ---\n{transcript}"
        )


def assert_same_as_oracle(
    sess: Session, oracle_port: int, candidate_port: int, shards: int | Layout = 1
) -> None:
    """Run ``sess`` on both servers concurrently and require equal transcripts; the
    candidate runs with ``shards`` (its `stats-tube` names a tube's shard when several)."""
    drop = SEVERAL_SHARDS_ONLY if layout_of(shards).shards > 1 else frozenset()
    with ThreadPoolExecutor(max_workers=2) as pool:
        oracle_f = pool.submit(run_session, oracle_port, sess)
        cand_f = pool.submit(run_session, candidate_port, sess, drop)
        oracle, cand = oracle_f.result(), cand_f.result()
    check_oracle(oracle, sess)
    if cand.lines != oracle.lines:
        diff = "\n".join(
            difflib.unified_diff(
                oracle.lines, cand.lines, "beanstalkd 1.12", "shardq", lineterm="", n=6
            )
        )
        pytest.fail(f"session {sess.name!r}: shardq differs from beanstalkd 1.12\n{diff}")
