"""What Kestrel's `dump_config` shows for a queue whose tube has a per-tube policy: the
server's limits (child.kestrel_config), with the policy's in Kestrel's names where it sets
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
