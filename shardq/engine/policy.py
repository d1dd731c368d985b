"""Per-tube policies: what a tube's limits are, and which configured policy a tube gets.

Pure and small: the config layer validates the `tubes:` section of the config file into a
plain mapping (JSON-friendly, so it crosses to the shard processes on their command line
and in live.json on SIGHUP); `Policies` turns that mapping into a resolver, and the engine
asks it once per tube (when the tube is made, and again after a reload).

The plain mapping::

    {"defaults": {"max_jobs": 1000},              # every tube, unless overridden
     "orders": {"max_reserves": 3, "reserve_rate": 0.5},   # an exact tube name
     "log.*": {"max_bytes": 1048576, "discard_old": True}}   # an fnmatch glob

Resolution: the tube's own entry if it is named exactly, else the matching glob that is
longest (the one written first among equally long ones), else none; its keys are laid over
`defaults`, key by key. A tube whose resolved policy sets nothing has no policy (None): it
behaves, and its `stats-tube` reads, exactly as beanstalkd's.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from shardq.engine.names import FAMILY_MARK, family_of
from shardq.protocol.record import Record

DEFAULTS = "defaults"  #: the key of the section every tube's policy starts from
GLOB_CHARS = frozenset("*?[")  #: a key with one of these is a glob, else an exact name


#: The keys of a policy, as the config file names them (and `Policy`'s fields).
KEYS = (
    "max_jobs",
    "max_bytes",
    "discard_old",
    "max_reserves",
    "max_timeouts",
    "max_age",
    "max_reserved",
    "reserve_rate",
    "fanout",
    "expired_to",
)


class Policy(Record):
    """A tube's limits; 0 (or False, None) is "no limit". Treat it as immutable."""

    __slots__ = KEYS
    __match_args__ = KEYS

    max_jobs: int  #: jobs of the tube in any state; a put past it: OUT_OF_MEMORY
    max_bytes: int  #: the sum of the tube's job body sizes
    discard_old: bool  #: a put past a limit drops the oldest ready jobs instead
    max_reserves: int  #: a job reserved this often is buried instead of made ready
    max_timeouts: int  #: a job that timed out this often is buried instead of made ready
    max_age: int  #: seconds: a job older than this is deleted (not while it is held)
    max_reserved: int  #: jobs of the tube reserved (or offered) at once; at it, none more
    reserve_rate: float  #: jobs handed out per second (a token bucket, limits.py)
    fanout: bool  #: a put is also copied to every tube of the family (fanout.py)
    #: a job past max_age moves to this tube of its family instead of being deleted:
    #: ``+NAME`` (the family's ``FAMILY+NAME``) or a whole tube name of the family
    expired_to: str

    def __init__(
        self,
        *,
        max_jobs: int = 0,
        max_bytes: int = 0,
        discard_old: bool = False,
        max_reserves: int = 0,
        max_timeouts: int = 0,
        max_age: int = 0,
        max_reserved: int = 0,
        reserve_rate: float = 0,
        fanout: bool = False,
        expired_to: str = "",
    ) -> None:
        self.max_jobs = max_jobs
        self.max_bytes = max_bytes
        self.discard_old = discard_old
        self.max_reserves = max_reserves
        self.max_timeouts = max_timeouts
        self.max_age = max_age
        self.max_reserved = max_reserved
        self.reserve_rate = reserve_rate
        self.fanout = fanout
        self.expired_to = expired_to

    def expiry_target(self, tube: str) -> str:
        """Where a job of `tube` goes when it expires ('': it is deleted)."""
        target = self.expired_to
        if target.startswith(FAMILY_MARK):
            target = family_of(tube) + target
        return "" if target == tube else target

    def active(self) -> bool:
        """Does this policy set anything? (One that sets nothing is no policy.)"""
        return any(self.values())


Plain = Mapping[str, Mapping[str, Any]]


def is_glob(key: str) -> bool:
    return not GLOB_CHARS.isdisjoint(key)


def _glob_order(item: tuple[int, str]) -> tuple[int, int]:
    """Longest first, then the order in the file."""
    position, pattern = item
    return -len(pattern), position


class Policies:
    """The configured policies, resolved by tube name (`resolve`)."""

    def __init__(self, plain: Plain | None = None) -> None:
        plain = plain or {}
        self.plain: dict[str, dict[str, Any]] = {k: dict(v) for k, v in plain.items()}
        self.defaults = self.plain.get(DEFAULTS, {})
        self.exact = {k: v for k, v in self.plain.items() if k != DEFAULTS and not is_glob(k)}
        ordered = sorted(enumerate(k for k in self.plain if is_glob(k)), key=_glob_order)
        self.globs = [(pattern, self.plain[pattern]) for _, pattern in ordered]

    def __bool__(self) -> bool:
        return bool(self.plain)

    def entry(self, tube: str) -> str | None:
        """The key of the entry that applies to `tube` besides `defaults`, or None."""
        if tube in self.exact:
            return tube
        for pattern, _ in self.globs:
            if fnmatchcase(tube, pattern):
                return pattern
        return None

    def resolve(self, tube: str) -> Policy | None:
        """The policy of `tube`, or None when it sets nothing."""
        key = self.entry(tube)
        values = {**self.defaults, **(self.plain[key] if key is not None else {})}
        if not values:
            return None
        policy = Policy(**values)
        return policy if policy.active() else None
