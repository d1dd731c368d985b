"""Tube families: a tube's family is its name up to the first ``+`` (``orders+eu`` is of the
family ``orders``). The server keeps a family on one shard (cluster/routing.py), so what
moves jobs between the tubes of one family — fanout (fanout.py), expired_to (policing.py)
— is one shard's step."""

from __future__ import annotations

FAMILY_MARK = "+"


def family_of(name: str) -> str:
    """A tube's family: its name up to the first ``+`` (the name itself if it has none)."""
    return name.partition(FAMILY_MARK)[0]
