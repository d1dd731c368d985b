"""Config values: one validator per kind of value, and the one-line `ConfigError`.

Each validator takes (where, value, from_flag) and returns the normalised value or raises
`ConfigError` naming `where` (the YAML key or the flag). Flag values may arrive as strings;
file values must already have the right YAML type.
"""

from __future__ import annotations

import ipaddress
import re
import warnings
from typing import Any

from shardq.log import FORMATS, LEVEL_NAMES
from shardq.protocol.replies import YAML_STYLES

#: Largest accepted max job size; beanstalkd clamps to this because body sizes are int32.
JOB_SIZE_LIMIT_MAX = 1_073_741_824
#: Upper bound for --shards: job ids and routing tables assume a small fixed shard count.
MAX_SHARDS = 64
MAX_POLL_US = 10_000  #: poll_us above this would only burn CPU
#: Default bound on a connection's unwritten replies (limits.max_output_bytes): 4 MiB.
DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024
#: Smallest limits.max_output_bytes: one reply of a largest job must fit.
MIN_OUTPUT_BYTES = 65536


class ConfigError(Exception):
    """Raised when the config file or a flag is invalid; str() is one line naming the key."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


class ConfigWarning(UserWarning):
    """Warned when a value is accepted but changed (e.g. max job size clamped)."""


# --- value validators: (where, value, from_flag) -> normalised value -----------------------


def _int(where: str, value: Any, lo: int, hi: int | None, from_flag: bool) -> int:
    if from_flag and isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        value = int(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < lo
        or (hi is not None and value > hi)
    ):
        bound = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
        raise ConfigError(where, f"must be an integer {bound}, got {value!r}")
    return value


def _word(where: str, value: Any, from_flag: bool = False) -> str:
    """A non-empty string without whitespace (addresses, host names)."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise ConfigError(where, f"must be a non-empty string without spaces, got {value!r}")
    return value


def _bool(where: str, value: Any, from_flag: bool) -> bool:
    if isinstance(value, bool):
        return value
    raise ConfigError(where, f"must be true or false, got {value!r}")


def _path(where: str, value: Any, from_flag: bool = False) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigError(where, f"must be a directory path or null, got {value!r}")
    return value


def _user(where: str, value: Any, from_flag: bool = False) -> str | None:
    """A user name (checked against the system's users at start-up), or null."""
    return None if value is None else _word(where, value)


def _fsync(where: str, value: Any, from_flag: bool) -> int | None:
    """`always` -> 0, `never`/None -> None, `every <ms>` or <ms> -> ms."""
    if value is None or value == "never":
        return None
    if value == "always":
        return 0
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(?:every\s+)?(\d+)\s*(?:ms)?\s*", value)
        if m and (from_flag or value.strip().startswith("every")):
            return int(m.group(1))
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ConfigError(
        where, f"must be 'always', 'never', 'every <ms>' or milliseconds >= 0, got {value!r}"
    )


def _port(where: str, value: Any, from_flag: bool) -> int:
    return _int(where, value, 0, 65535, from_flag)


def _port_or_null(where: str, value: Any, from_flag: bool) -> int | None:
    """A TCP port, or null (off)."""
    return None if value is None else _port(where, value, from_flag)


def _shards(where: str, value: Any, from_flag: bool) -> int:
    return _int(where, value, 1, MAX_SHARDS, from_flag)


def _count(where: str, value: Any, from_flag: bool) -> int:
    """An integer >= 0 (the -V count)."""
    return _int(where, value, 0, None, from_flag)


def _networks(where: str, value: Any, from_flag: bool) -> tuple[str, ...]:
    """A list of networks (``10.0.0.0/8``, ``::1``, a bare address is one host), or one."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ConfigError(where, f"must be a list of networks like 10.0.0.0/8, got {value!r}")
    networks = []
    for item in items:
        try:
            networks.append(str(ipaddress.ip_network(str(item).strip(), strict=False)))
        except ValueError:
            raise ConfigError(where, f"{item!r} is not a network like 10.0.0.0/8") from None
    return tuple(networks)


def _tokens(where: str, value: Any, from_flag: bool) -> tuple[str, ...]:
    """A list of non-empty strings (bunqueue.tokens: what Auth accepts), or one."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(
        isinstance(item, str) and item for item in items
    ):
        raise ConfigError(where, f"must be a list of non-empty strings, got {value!r}")
    return tuple(items)


def _seconds(where: str, value: Any, from_flag: bool) -> float:
    """A duration in seconds: a number above 0, at most an hour (tls.handshake_timeout)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
        raise ConfigError(where, f"must be a number of seconds in (0, 3600], got {value!r}")
    return float(value)


def _positive(where: str, value: Any, from_flag: bool) -> int:
    return _int(where, value, 1, None, from_flag)


def _max_job_size(where: str, value: Any, from_flag: bool) -> int:
    size = _int(where, value, 0, None, from_flag)
    if size > JOB_SIZE_LIMIT_MAX:
        warnings.warn(
            f"{where}: maximum job size was set to {JOB_SIZE_LIMIT_MAX}",
            ConfigWarning,
            stacklevel=2,
        )
        size = JOB_SIZE_LIMIT_MAX
    return size


def _poll_us(where: str, value: Any, from_flag: bool) -> int:
    """Microseconds of polling, 0 (off) to 10000."""
    return _int(where, value, 0, MAX_POLL_US, from_flag)


def _stats_yaml(where: str, value: Any, from_flag: bool) -> str:
    """How stats string values are printed: plain (beanstalkd 1.12) or quoted (1.13)."""
    if value not in YAML_STYLES:
        raise ConfigError(where, f"must be one of {', '.join(YAML_STYLES)}, not {value!r}")
    return str(value)


def _choice(where: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(where, f"must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _log_level(where: str, value: Any, from_flag: bool) -> str | None:
    return None if value is None else _choice(where, value, LEVEL_NAMES)


def _log_format(where: str, value: Any, from_flag: bool) -> str:
    return _choice(where, value, FORMATS)


def _output_bytes(where: str, value: Any, from_flag: bool) -> int:
    """Bytes of unwritten replies a connection may have, at least MIN_OUTPUT_BYTES."""
    return _int(where, value, MIN_OUTPUT_BYTES, None, from_flag)


#: Suffixes of limits.max_memory: 512K, 512M, 2G (powers of 1,024), or plain bytes.
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
#: Smallest limits.max_memory other than 0: below it not even a few jobs fit.
MIN_MEMORY = 1 << 20


def _memory(where: str, value: Any, from_flag: bool) -> int:
    """0 (no limit) or a size of at least MIN_MEMORY: bytes, or a number with K, M, G or T."""
    if isinstance(value, str) and not isinstance(value, bool):
        m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)i?B?\s*", value, re.IGNORECASE)
        if m is None:
            raise ConfigError(where, f"must be a size like 512M or 2G (or 0: none), got {value!r}")
        value = int(m.group(1)) * SIZE_UNITS[m.group(2).upper()]
    size = _int(where, value, 0, None, from_flag)
    if 0 < size < MIN_MEMORY:
        raise ConfigError(where, f"must be 0 (no limit) or at least 1M, got {size}")
    return size


def _host_port(where: str, value: Any, from_flag: bool) -> str | None:
    """``HOST:PORT`` (``[::1]:9100`` for IPv6), or a bare port (``9100``, ``:9100``) on
    127.0.0.1; null: off.
    Normalised to ``HOST:PORT``; port 0 picks a free one."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ConfigError(where, f"must be HOST:PORT or a port, got {value!r}")
    text = value.strip()
    host, _, port = text.rpartition(":")
    host = host or "127.0.0.1"  # "9100" and ":9100"
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not re.fullmatch(r"\d{1,5}", port) or int(port) > 65535:
        raise ConfigError(where, f"must be HOST:PORT with a port from 0 to 65535, got {value!r}")
    if not host or any(c.isspace() for c in host) or (":" in host and "[" not in text):
        raise ConfigError(where, f"must be HOST:PORT (an IPv6 host in brackets), got {value!r}")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_host_port(value: str) -> tuple[str, int]:
    """A `_host_port` value back into (host, port); the brackets of IPv6 are dropped."""
    host, _, port = value.rpartition(":")
    return host.strip("[]"), int(port)
