"""What Kestrel's `dump_config` shows for a queue whose tube has a per-tube policy: the
server's limits (`server_config`), with the policy's in Kestrel's names where it sets
one (`stats-tube`'s policy-* keys, docs/PROTOCOLS.md "Per-tube policies")."""

from __future__ import annotations

#: Kestrel's name -> the stats-tube key of the policy that stands for it
KESTREL_NAMES = {
    "max_items": "policy-max-jobs",
    "max_size": "policy-max-bytes",
    "max_age": "policy-max-age",
    "discard_old_when_full": "policy-discard-old",
    "move_expired_to": "policy-expired-to",
}


def server_config(
    max_jobs: int, max_memory: int, max_item: int, journal: bool, sync_journal: bool
) -> list[tuple[str, object]]:
    """What `dump_config` shows for every queue, in Kestrel's names (the limits are the
    server's, shared by every queue; 0 means none, shown as Kestrel's "infinite")."""
    return [
        ("max_items", max_jobs or 2147483647),
        ("max_size", max_memory or 9223372036854775807),
        ("max_item_size", max_item),
        ("max_age", 0),
        ("discard_old_when_full", "false"),
        ("journal", "true" if journal else "false"),
        ("sync_journal", "true" if sync_journal else "false"),
        ("move_expired_to", "(none)"),
    ]


def queue_config(
    server: list[tuple[str, object]], tube_stats: dict[str, str]
) -> list[tuple[str, object]]:
    """`server`'s (name, value) pairs, with those the tube's policy sets replaced (a limit
    of 0 is none: the server's stands). Without a policy, `server` as it is."""
    config = []
    for name, value in server:
        policy = tube_stats.get(KESTREL_NAMES.get(name, ""), "0")
        policy = policy.strip('"')  # policy-expired-to is quoted
        if policy not in ("0", "false", ""):
            value = int(policy) if policy.isdigit() else policy
        config.append((name, value))
    return config
