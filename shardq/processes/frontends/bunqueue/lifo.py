"""bunqueue's `lifo` jobs, pure: which were put in their tube last, per queue and priority.

A tube serves its jobs by priority, then oldest first; bunqueue serves the lifo jobs of a
priority before its other jobs, newest first. A lifo job waits in its tube as every job
(a beanstalk worker and a waiting pull see it); this index says, for a pull that reserved
jobs of some priority, which lifo jobs of that priority come first (pulls.py swaps them
in).
"""

from __future__ import annotations

from collections.abc import Callable


class Lifo:
    def __init__(self) -> None:
        #: queue -> priority -> job ids in the order they were put in the tube (a job put
        #: again is listed again); ids of jobs no longer there are dropped as they are met
        self.stacks: dict[str, dict[int, list[str]]] = {}

    def __contains__(self, queue: str) -> bool:
        return queue in self.stacks

    def put(self, queue: str, priority: int, ident: str) -> None:
        self.stacks.setdefault(queue, {}).setdefault(priority, []).append(ident)

    def newest(
        self, queue: str, priority: int, most: int, in_tube: Callable[[str], bool]
    ) -> list[str]:
        """Up to `most` ids of `queue` at `priority` still in the tube (`in_tube`), the last
        put first."""
        levels = self.stacks.get(queue, {})
        stack = levels.get(priority, [])
        out: list[str] = []
        seen: set[str] = set()
        at = len(stack) - 1
        while at >= 0 and len(out) < most:
            ident = stack[at]
            if ident in seen or not in_tube(ident):
                if at == len(stack) - 1:
                    stack.pop()  # gone from the top: dropped
            else:
                out.append(ident)
                seen.add(ident)
            at -= 1
        if not stack and priority in levels:
            del levels[priority]
            if not levels:
                del self.stacks[queue]
        return out
