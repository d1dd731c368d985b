"""One client connection of the workload: the wire (Link) and a consumer or producer
session that records what it sent and received in the ledger."""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import time
from typing import TYPE_CHECKING

from helpers import READ_DEADLINE, ProtocolTimeout, UnexpectedEOF, connect, read_replies, send

if TYPE_CHECKING:
    from .workload import Workload

from .ledger import (
    _OK,
    _RESERVED,
    _SUCCESS,
    BLOCKING_WAIT,
    EXPIRE_MARGIN,
    MAX_HELD,
    PRIORITIES,
    SAFETY_MARGIN,
    TTR_RANGE,
    Hold,
    Op,
    deadline_soon_allowed,
    parse_body,
)

# --------------------------------------------------------------------------- wire


class LinkError(Exception):
    """A connection failed: no reply in time, or the server closed it / refused it."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out  #: False: the server closed (or reset) the connection


class Link:
    """A blocking beanstalk connection on a plain socket; every read has a deadline."""

    def __init__(self, port: int, conn: int) -> None:
        self.conn = conn
        self.closed = False
        try:
            self.sock = connect(port)
        except OSError as exc:
            raise LinkError(f"connect failed: {exc!r}") from exc

    def send(self, data: bytes) -> float:
        """Send ``data``; return the time just before sending."""
        at = time.monotonic()
        try:
            send(self.sock, data)
        except OSError as exc:  # a timeout would mean a full window: the server is stuck
            raise LinkError(
                f"sending {data[:60]!r}: {exc!r}", timed_out=isinstance(exc, TimeoutError)
            ) from exc
        return at

    def read(self, n: int, timeout: float = READ_DEADLINE) -> tuple[list[bytes], float]:
        """Read ``n`` reply units; return them and the time just after reading."""
        try:
            replies = read_replies(self.sock, n, timeout)
        except ProtocolTimeout as exc:
            raise LinkError(str(exc), timed_out=True) from exc
        except (UnexpectedEOF, OSError) as exc:
            raise LinkError(f"connection lost: {exc}") from exc
        return replies, time.monotonic()

    def call(
        self, data: bytes, n: int = 1, timeout: float = READ_DEADLINE
    ) -> tuple[float, list[bytes], float]:
        sent = self.send(data)
        try:
            replies, received = self.read(n, timeout)
        except LinkError as exc:
            raise LinkError(f"{data[:60]!r}: {exc}", timed_out=exc.timed_out) from exc
        return sent, replies, received

    def close(self, reset: bool = False) -> float:
        """Close (with RST if ``reset``); return the time just before closing."""
        at = time.monotonic()
        if not self.closed:
            self.closed = True
            if reset:
                with contextlib.suppress(OSError):
                    self.sock.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
            self.sock.close()
        return at


def parse_stats(reply: bytes) -> dict[str, str]:
    header, _, rest = reply.partition(b"\r\n")
    if _OK.fullmatch(header + b"\r\n") is None:
        raise ValueError(f"not an OK reply: {reply[:100]!r}")
    text = rest[:-2].decode(errors="replace")
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


# --------------------------------------------------------------------------- consumer


class Session:
    """One consumer connection: its watch list and the jobs it holds."""

    def __init__(self, wl: Workload, rng: random.Random, role: str) -> None:
        self.wl = wl
        self.rng = rng
        self.role = role
        self.link = Link(wl.port, next(wl.conn_ids))
        self.conn = self.link.conn
        self.watch: set[str] = {"default"}
        self.held: dict[int, Hold] = {}
        self.expiring: dict[int, float] = {}  #: held jobs left to expire -> when to act again
        self.may_expire = True  #: may leave one more job to expire
        wl.count("sessions")

    def fail(self, message: str) -> None:
        self.wl.violation(f"conn {self.conn} ({self.role}): {message}")

    # ----------------------------------------------------------- setup
    def watch_tubes(self, tubes: list[str], ignore_default: bool) -> None:
        cmds, wanted = [], []
        for tube in tubes:
            self.watch.add(tube)
            cmds.append(b"watch %s\r\n" % tube.encode())
            wanted.append(b"WATCHING %d\r\n" % len(self.watch))
        if ignore_default:
            self.watch.discard("default")
            cmds.append(b"ignore default\r\n")
            wanted.append(b"WATCHING %d\r\n" % len(self.watch))
        _, replies, _ = self.link.call(b"".join(cmds), len(cmds))
        for cmd, reply, want in zip(cmds, replies, wanted, strict=True):
            if reply != want:
                self.fail(f"{cmd!r} answered {reply!r}, expected {want!r}")

    # ----------------------------------------------------------- reserve
    def reserve(self, timeout: int | None) -> str:
        """One reserve: 'job', 'timeout', 'soon', 'abandoned' or 'bad'."""
        cmd = b"reserve\r\n" if timeout is None else b"reserve-with-timeout %d\r\n" % timeout
        sent = self.link.send(cmd)
        try:
            [reply], received = self.link.read(
                1, BLOCKING_WAIT if timeout is None else timeout + 4.0
            )
        except LinkError as exc:
            if timeout is None and exc.timed_out:
                self.close(reset=self.rng.random() < 0.5, how="closed while reserve waits")
                self.wl.count("closes_while_waiting")
                return "abandoned"
            raise LinkError(f"{cmd!r}: {exc}", timed_out=exc.timed_out) from exc
        if reply == b"TIMED_OUT\r\n":
            self.wl.count("timeouts")
            if timeout is None:
                self.fail("a blocking reserve answered TIMED_OUT")
            return "timeout"
        if reply == b"DEADLINE_SOON\r\n":
            self.wl.count("deadline_soon")
            if not deadline_soon_allowed(self.held, received):
                t0 = self.wl.ledger.t0
                self.fail(
                    f"{cmd!r} answered DEADLINE_SOON at {received - t0:.3f} but no held job is "
                    f"within {SAFETY_MARGIN} s of its deadline: "
                    + (", ".join(f"{i}: {h.describe(t0)}" for i, h in self.held.items()) or "none")
                )
            return "soon"
        header, _, rest = reply.partition(b"\r\n")
        match = _RESERVED.fullmatch(header + b"\r\n")
        if match is None or len(rest) != int(match.group(2)) + 2 or not rest.endswith(b"\r\n"):
            self.fail(f"{cmd!r} answered {reply[:100]!r}")
            return "bad"
        job_id, body = int(match.group(1)), rest[:-2]
        parsed = parse_body(body)
        if parsed is None:
            self.fail(f"job {job_id} has a body that is not ours: {body[:60]!r}")
            tube, ttr = "?", TTR_RANGE[0]
        else:
            tube, ttr = parsed
            if tube not in self.watch:
                self.fail(f"got job {job_id} of tube {tube} but watches {sorted(self.watch)}")
        old = self.held.pop(job_id, None)
        self.expiring.pop(job_id, None)
        if old is not None:  # its TTR ran out and we got it again: the analysis checks that
            old.how = "TTR (reserved again by the same connection)"
        hold = Hold(self.conn, job_id, body, ttr, sent, received, sent, received)
        self.held[job_id] = hold
        self.wl.record_hold(hold)
        return "job"

    # ----------------------------------------------------------- act on a held job
    def act(self, hold: Hold, what: str) -> None:
        job_id = hold.job_id
        if what == "release":
            pri, delay = self.rng.choice(PRIORITIES), self.rng.choice((0, 0, 1))
            cmd = b"release %d %d %d\r\n" % (job_id, pri, delay)
        elif what == "bury":
            cmd = b"bury %d %d\r\n" % (job_id, self.rng.choice(PRIORITIES))
        else:
            cmd = b"%s %d\r\n" % (what.encode(), job_id)
        sent, [reply], received = self.link.call(cmd)
        if reply == _SUCCESS[what]:
            self.wl.record_op(Op(self.conn, job_id, reply[:-2].decode(), sent, received), what)
            if what == "touch":
                hold.base, hold.base_seen = sent, received
                return
            hold.end_sent, hold.how = sent, what
            self.forget(job_id)
            return
        # Whatever else it says, the job is no longer ours.
        self.forget(job_id)
        hold.end_sent, hold.how = sent, f"{what} -> {reply[:20]!r}"
        if reply == b"NOT_FOUND\r\n":
            self.wl.count("not_found")
            if not hold.may_have_expired(received):
                t0 = self.wl.ledger.t0
                self.fail(
                    f"{cmd!r} answered NOT_FOUND at {received - t0:.3f}, but the job's TTR "
                    f"cannot have run out before {hold.deadline_floor - t0:.3f}: "
                    f"{hold.describe(t0)}"
                )
            return
        self.fail(f"{cmd!r} of a held job answered {reply[:100]!r}")

    def forget(self, job_id: int) -> None:
        self.held.pop(job_id, None)
        self.expiring.pop(job_id, None)

    def handle_one(self, eligible: list[Hold]) -> None:
        """Do something with one held job."""
        hold = self.rng.choice(eligible)
        if self.expiring.pop(hold.job_id, None) is not None:
            # Its TTR has surely run out: it may be gone, or someone else's by now.
            self.wl.count("expiries")
            self.act(hold, self.rng.choice(("delete", "delete", "release", "bury", "touch")))
            return
        r = self.rng.random()
        if r < 0.60:
            self.act(hold, "delete")
        elif r < 0.75:
            self.act(hold, "release")
        elif r < 0.83:
            self.act(hold, "bury")
        elif r < 0.97 or not self.may_expire:
            self.act(hold, "touch")
        else:
            # Keep it, untouched, until its TTR has surely run out (the server's deadline is
            # at most base_seen + ttr); meanwhile reserve and handle other jobs.
            self.expiring[hold.job_id] = hold.base_seen + hold.ttr + EXPIRE_MARGIN

    def eligible(self) -> list[Hold]:
        """Held jobs to act on now: all but those left to expire whose time has not come."""
        now = time.monotonic()
        return [h for i, h in self.held.items() if self.expiring.get(i, now) <= now]

    # ----------------------------------------------------------- sessions
    def work(self) -> None:
        """A load-phase session: watch some tubes, reserve and handle jobs, then leave."""
        rng = self.rng
        tubes = rng.sample(self.wl.tubes, rng.randint(1, min(5, len(self.wl.tubes))))
        self.watch_tubes(tubes, ignore_default=rng.random() < 0.7)
        idle, urgent = 0, False
        steps = rng.randint(10, 60)
        while (steps > 0 or self.expiring) and not self.wl.load_over.is_set():
            steps -= 1
            self.may_expire = steps > 0  # past its last step, a session only waits for expiries
            eligible = self.eligible()
            if eligible and (urgent or len(eligible) >= MAX_HELD or rng.random() < 0.55):
                self.handle_one(eligible)
                urgent = urgent and bool(self.held)
                continue
            if urgent and self.expiring:
                # Only jobs left to expire are near their deadline, so every reserve would
                # answer DEADLINE_SOON at once until the first of them is due.
                due = min(self.expiring.values())
                self.wl.load_over.wait(max(0.0, due - time.monotonic()))
                continue
            urgent = False
            blocking = not self.held and rng.random() < 0.05
            outcome = self.reserve(None if blocking else rng.choice((0, 1, 1, 1)))
            if outcome == "abandoned":
                return
            urgent = outcome == "soon"
            idle = idle + 1 if outcome == "timeout" else 0
            if idle >= 3 and not self.expiring:
                break  # nothing for this watch list lately
        self.leave()

    def leave(self) -> None:
        r = self.rng.random()
        reset = self.rng.random() < 0.5
        if r < 0.12:
            # Leave while a reserve waits: a job handed over now must not be lost.
            self.link.send(b"reserve-with-timeout 5\r\n")
            self.wl.count("closes_while_waiting")
            self.close(reset=reset, how="closed while reserve waits")
        elif self.held and r < 0.35:
            self.wl.count("abrupt_closes")
            self.close(reset=reset, how="closed abruptly")
        else:
            while self.held:
                self.act(next(iter(self.held.values())), self.rng.choice(("delete", "release")))
            self.close(reset=False, how="closed")

    def drain(self) -> None:
        """Watch every tube, kick them all, then reserve and delete until told to stop."""
        self.watch_tubes(self.wl.tubes, ignore_default=True)
        self.wl.kick_all(self.link, self.fail)
        while not self.wl.drain_over.is_set():
            if self.reserve(1) == "job":
                while self.held:
                    self.act(next(iter(self.held.values())), "delete")
        self.close(reset=False, how="closed")

    def close(self, reset: bool, how: str) -> None:
        at = self.link.close(reset)
        for hold in self.held.values():
            hold.end_sent, hold.how = at, how
        self.held.clear()
        self.expiring.clear()

    def lost(self, exc: LinkError) -> None:
        """The connection failed. If the server dropped it, it may have released our jobs at
        any moment, so they are only surely held until their RESERVED reply."""
        if not exc.timed_out:
            for hold in self.held.values():
                hold.end_sent, hold.how = hold.received, "connection lost"
            self.held.clear()
        self.close(reset=True, how="connection given up (no reply)")
