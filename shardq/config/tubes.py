"""The `tubes:` section: per-tube policies, validated into the plain mapping the engine's
`Policies` resolves (shardq/engine/policy.py says how a tube finds its policy).

    tubes:
      defaults:            # every tube, unless an entry below overrides a key
        max_jobs: 100000
      orders:              # an exact tube name
        max_reserves: 3
      "log.*":             # an fnmatch glob (quoted: YAML reads a bare * as an alias)
        max_bytes: 64M
        discard_old: true
        max_age: 3600      # seconds
      "mail.*":
        max_reserved: 4    # at most 4 of the tube's jobs reserved at once
        reserve_rate: 0.5  # jobs handed out per second (a token bucket of max(1, rate))
      feed:
        fanout: true       # a put to feed is copied to every tube feed+NAME there is
        max_age: 600
        expired_to: +late  # a job older than that moves to feed+late (not deleted)

Every problem is one `ConfigError` naming the key, e.g.
``tubes.orders.max_jobs: must be a whole number >= 0, got -1``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from shardq.config.values import SIZE_UNITS, ConfigError
from shardq.engine.names import FAMILY_MARK, family_of
from shardq.engine.policy import DEFAULTS, KEYS, is_glob

#: A tube name as beanstalkd accepts it: 1..200 of these characters, no leading '-'.
_NAME = re.compile(r"[A-Za-z0-9+/;.$_()][A-Za-z0-9\-+/;.$_()]{0,199}")
#: A glob: the name characters and fnmatch's * ? [ ] !, up to 200 of them.
_GLOB = re.compile(r"[A-Za-z0-9\-+/;.$_()*?\[\]!]{1,200}")


def _whole(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(where, f"must be a whole number >= 0, got {value!r}")
    return value


def _size(where: str, value: Any) -> int:
    """Bytes: a whole number, or one with K, M, G or T (powers of 1,024): 64M."""
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)i?B?\s*", value, re.IGNORECASE)
        if m is None:
            raise ConfigError(where, f"must be a size like 65536, 512K or 64M, got {value!r}")
        return int(m.group(1)) * SIZE_UNITS[m.group(2).upper()]
    return _whole(where, value)


def _rate(where: str, value: Any) -> float:
    """Jobs per second: a number >= 0 (0.5 is one every two seconds), 0: none."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:
        raise ConfigError(where, f"must be a number of jobs per second >= 0, got {value!r}")
    return value


def _flag(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(where, f"must be true or false, got {value!r}")
    return value


def _target(where: str, value: Any) -> str:
    """expired_to: ``+NAME`` (the tube's family's ``FAMILY+NAME``) or a whole tube name."""
    name = value[1:] if isinstance(value, str) and value[:1] == FAMILY_MARK else value
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(where, f"must be a tube name or +NAME, got {value!r}")
    return value


def _same_family(where: str, entry: str, target: str) -> None:
    """A whole expired_to name must be of the entry's own family (one shard holds a family,
    so a move is one shard's step); an entry that is a glob or `defaults` may apply to
    tubes of any family, so it names its target as ``+NAME``."""
    if target.startswith(FAMILY_MARK):
        return
    if entry == DEFAULTS or is_glob(entry):
        raise ConfigError(where, f"for a glob or defaults, name the tube as +NAME, got {target!r}")
    if family_of(target) != family_of(entry):
        raise ConfigError(
            where,
            f"must be a tube of the family {family_of(entry)!r} (such as "
            f"{family_of(entry)}+expired, or +expired), got {target!r}",
        )


#: policy key -> its validator (where, value) -> value
CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "max_jobs": _whole,
    "max_bytes": _size,
    "discard_old": _flag,
    "max_reserves": _whole,
    "max_timeouts": _whole,
    "max_age": _whole,  # seconds
    "max_reserved": _whole,
    "reserve_rate": _rate,  # jobs per second
    "fanout": _flag,
    "expired_to": _target,
}
assert tuple(CHECKS) == KEYS, "every policy key has a validator"


def _entry_name(where: str, key: Any) -> str:
    """A key of the section: `defaults`, a tube name or a glob (a YAML number is a name)."""
    if isinstance(key, int) and not isinstance(key, bool):
        key = str(key)
    if not isinstance(key, str):
        raise ConfigError(where, f"{key!r}: must be a tube name or a glob")
    if key == DEFAULTS:
        return key
    if is_glob(key):
        if not _GLOB.fullmatch(key):
            raise ConfigError(f"{where}.{key}", "must be a glob of tube-name characters")
    elif not _NAME.fullmatch(key):
        raise ConfigError(f"{where}.{key}", "is not a valid tube name")
    return key


def _policy(where: str, entry: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a mapping of {', '.join(KEYS)}, got {value!r}")
    policy = {}
    for key, raw in value.items():
        if key not in CHECKS:
            raise ConfigError(f"{where}.{key}", f"unknown key (known: {', '.join(KEYS)})")
        policy[key] = CHECKS[key](f"{where}.{key}", raw)
    if "expired_to" in policy:
        _same_family(f"{where}.expired_to", entry, policy["expired_to"])
    return policy


def tube_policies(where: str, value: Any, from_flag: bool = False) -> dict[str, dict[str, Any]]:
    """The `tubes:` section (`where` names it: ``FILE: tubes``) -> {entry: {key: value}},
    entries in the file's order (it breaks ties between globs of one length)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a mapping of tube names and globs, got {value!r}")
    plain = {}
    for key, entry in value.items():
        name = _entry_name(where, key)
        plain[name] = _policy(f"{where}.{name}", name, entry)
    return plain
