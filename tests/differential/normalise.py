"""Normalised replies for the differential transcripts (the session runner is dsl.py).

A reply unit is normalised as narrowly as can be: job ids become their symbolic names
(:class:`IdMap`), the values of stats keys that depend on the process, the host, the
clock or the binlog become ``<ignored>``, and the ``OK <n>`` byte count of a YAML body
becomes ``<n>`` once it is checked against the body. Everything else, YAML string quoting
included, must match byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from shardq.protocol.stats_keys import SHARD_TUBE_KEY

#: Stats keys whose values depend on the process, the host, the clock or the binlog.
IGNORED_KEYS = frozenset(
    {
        "pid",
        "uptime",
        "rusage-utime",
        "rusage-stime",
        "hostname",
        "os",
        "platform",
        "version",
        "age",
        "time-left",
        "pause-time-left",
        "binlog-oldest-index",
        "binlog-current-index",
        "binlog-records-migrated",
        "binlog-records-written",
        "binlog-max-size",
        # stats `id` is random per process; stats-job `id` is a job id and is mapped instead.
        "id",
        # stats-job `file`: the binlog file holding the job (0 without a binlog).
        "file",
    }
)

#: The key shardq adds to `stats-tube` with several shards (stats_keys.SHARD_TUBE_KEY),
#: after all of beanstalkd's: left out of the comparison for a server with several shards
#: only (with one, its absence is compared like any other line).
SEVERAL_SHARDS_ONLY = frozenset({SHARD_TUBE_KEY})

_ID_LINE = re.compile(rb"^(INSERTED|BURIED) (\d+)\r\n$")
_JOB_HEADER = re.compile(rb"^(RESERVED|FOUND) (\d+) (\d+)\r\n")
_OK_HEADER = re.compile(rb"^OK (\d+)\r\n")
_TEMPLATE = re.compile(rb"\{([A-Za-z_]\w*)([+-]\d+)?\}")


@dataclass
class IdMap:
    """Job id <-> symbolic name, for one server."""

    by_name: dict[str, int] = field(default_factory=dict)
    by_id: dict[int, str] = field(default_factory=dict)

    def name_of(self, job_id: int) -> str:
        if job_id not in self.by_id:
            self.by_id[job_id] = f"#{len(self.by_id) + 1}"
        return self.by_id[job_id]

    def bind(self, name: str, job_id: int) -> None:
        self.by_name[name] = job_id
        self.by_id.setdefault(job_id, name)

    def token(self, job_id: int) -> bytes:
        return b"{" + self.name_of(job_id).encode() + b"}"

    def expand(self, template: bytes) -> bytes:
        def sub(m: re.Match[bytes]) -> bytes:
            name = m.group(1).decode()
            if name not in self.by_name:
                raise KeyError(f"unbound job name {{{name}}}")
            return str(self.by_name[name] + int(m.group(2) or 0)).encode()

        return _TEMPLATE.sub(sub, template)


def _normalise_yaml(
    body: bytes, ids: IdMap, ignore: frozenset[str], drop: frozenset[str]
) -> bytes | None:
    """Normalise a YAML stats/list body (without its final CRLF), or None if not YAML;
    the lines of the keys in `drop` are left out."""
    lines = body.split(b"\n")
    if len(lines) < 2 or lines[0] != b"---" or lines[-1] != b"":
        return None
    out = [b"---"]
    is_job = lines[1].startswith(b"id: ")
    for line in lines[1:-1]:
        if line.startswith(b"- "):
            out.append(line)
            continue
        key, sep, value = line.partition(b": ")
        if not sep:
            out.append(line)
            continue
        k = key.decode(errors="replace")
        if k in drop:
            continue
        if k == "id" and is_job and value.isdigit():
            value = ids.token(int(value))
        elif k in ignore:
            value = b"<ignored>"
        out.append(key + b": " + value)
    return b"\n".join(out) + b"\n"


def normalise_unit(
    unit: bytes, ids: IdMap, ignore: frozenset[str], drop: frozenset[str] = frozenset()
) -> bytes:
    """Replace job ids, ignored stats values and YAML byte counts (quoting is compared);
    leave out the YAML lines of the keys in `drop`."""
    m = _ID_LINE.match(unit)
    if m:
        return m.group(1) + b" " + ids.token(int(m.group(2))) + b"\r\n"
    m = _JOB_HEADER.match(unit)
    if m:
        head = m.group(1) + b" " + ids.token(int(m.group(2))) + b" " + m.group(3)
        return head + unit[m.end() - 2 :]
    m = _OK_HEADER.match(unit)
    if m:
        body, tail = unit[m.end() : -2], unit[-2:]
        yaml = _normalise_yaml(body, ids, ignore, drop)
        if yaml is not None:
            count = b"<n>" if int(m.group(1)) == len(body) and tail == b"\r\n" else b"<BAD COUNT>"
            return b"OK " + count + b"\r\n" + yaml + tail
    return unit


def job_id_in(unit: bytes) -> int | None:
    m = _ID_LINE.match(unit) or _JOB_HEADER.match(unit)
    return int(m.group(2)) if m else None
