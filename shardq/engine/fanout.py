"""Fanout, a per-tube policy (Kestrel's fanout queues): a put to a tube whose policy says
`fanout` is also put, as a copy with an id of its own, to every tube of its family there
is — ``orders+eu`` and ``orders+us`` for a put to ``orders``. A tube's family is its name
up to the first ``+`` (names.py); the server keeps a family on one shard (cluster/routing.py),
so the copies are made here, in the same step as the put, and logged with it.

"There is" means what beanstalk means by it: a tube exists while a client uses or watches
it or it holds jobs; a worker that watches ``orders+eu`` gets copies from then on. A copy
is a job like any other (its own priority, delay, TTR and body are the put's); a copy the
child's own policy refuses (its max_jobs, say) is not made. Only the family's own tube
fans out: a put to ``orders+eu`` is not copied.
"""

from __future__ import annotations

from shardq.engine.core import EngineCore


class Fanning(EngineCore):
    __slots__ = ()  # the state is EngineCore's

    def fanout_members(self, tube_name: str) -> list[str]:
        """The tubes a put to `tube_name` is copied to now, in name order: the other tubes
        of its family, if its policy says fanout (and the shell gave copies ids)."""
        tube = self.tubes.get(tube_name)
        if tube is None or tube.policy is None or not tube.policy.fanout or self.copy_id is None:
            return []
        return sorted(self.families.get(tube_name, ()))

    def copies(self, tube_name: str) -> int:
        """How many copies a put to `tube_name` would make now (admission counts them)."""
        return len(self.fanout_members(tube_name))

    def _copies(self, tube_name: str) -> list[tuple[int, str]]:
        """(id, tube) of each copy a put to `tube_name` makes (engine.py puts them)."""
        members = self.fanout_members(tube_name)
        copy_id = self.copy_id
        return [] if copy_id is None else [(copy_id(), name) for name in members]
