"""The ids a shard makes itself, for a fanout's copies (cluster/routing.py `copy_id`), and the
small file that keeps them from going back after a restart."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from shardq.cluster.routing import ID_BLOCK, copy_id, copy_index

log = logging.getLogger(__name__)


class CopyIds:
    """The ids one shard makes itself, in order: after the highest its jobs hold and after
    every block a `mark` file says was begun (written as each block begins, so a shard that
    restarts without its jobs — no -b — never hands out an id a client may still hold)."""

    def __init__(
        self, shard: int, shards: int, job_ids: Iterable[int] = (), mark: str | None = None
    ) -> None:
        self.shard, self.shards, self.mark = shard, shards, mark
        taken = (copy_index(shard, shards, job_id) for job_id in job_ids)
        self.next = 1 + max((k for k in taken if k is not None), default=-1)
        if mark is not None:
            try:
                with open(mark) as f:
                    self.next = max(self.next, int(f.read()) * ID_BLOCK)
            except (FileNotFoundError, ValueError):
                pass

    def take(self) -> int:
        k = self.next
        if self.mark is not None and k % ID_BLOCK == 0:
            self.begin(k // ID_BLOCK + 1)
        self.next += 1
        return copy_id(self.shard, self.shards, k)

    def begin(self, blocks: int) -> None:
        """Record that `blocks` blocks are begun (a restart goes on after them). A file that
        cannot be written costs only that guarantee (logged), never the put being made."""
        assert self.mark is not None
        try:
            with open(self.mark + ".tmp", "w") as f:
                f.write(f"{blocks}\n")
            os.replace(self.mark + ".tmp", self.mark)
        except OSError as e:
            log.warning("cannot record the copy ids begun in %s: %s", self.mark, e.strerror)
