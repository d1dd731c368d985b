"""A mixed load bounded by --jobs over several load processes: each process puts and takes
its share of the jobs, so each gets a producer and a consumer, or the run is refused (it
used to wait out its 600 s limit)."""

from __future__ import annotations

import pytest

from shardq.bench.workloads import CONSUMER, PRODUCER, Spec, plan, split_problem


@pytest.mark.parametrize("workload", ["mixed", "multitube"])
@pytest.mark.parametrize("processes", [1, 2, 3, 4])
def test_every_process_gets_a_producer_and_a_consumer(workload: str, processes: int) -> None:
    for connections in range(2 * processes, 2 * processes + 9):
        spec = Spec(workload=workload, connections=connections, processes=processes, jobs=100)
        assert split_problem(spec) is None
        plans = plan(spec)
        assert len(plans) == connections
        for k in range(processes):
            roles = {p.role for p in plans if p.index % processes == k}
            assert roles == {PRODUCER, CONSUMER}, (connections, k)


def test_too_few_connections_for_the_processes_are_refused() -> None:
    spec = Spec(workload="mixed", connections=3, processes=2, jobs=100)
    assert split_problem(spec) == (
        "-w mixed with --jobs over 2 load processes needs at least 4 connections"
        " (a producer and a consumer in each process)"
    )
    assert split_problem(Spec(workload="mixed", connections=3, processes=2)) is None  # timed
    assert split_problem(Spec(workload="put", connections=1, processes=2, jobs=9)) is None
