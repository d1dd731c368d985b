"""What an idle default server takes from the machine: its processes' proportional set
size (PSS: a page shared by n processes counts 1/n in each; the children are forked from
the supervisor and share its imported modules) stays within 40 MiB (docs/BENCHMARKS.md,
"Footprint at rest")."""

from __future__ import annotations

from pathlib import Path

from shardq.bench.procs import group_members

LIMIT_MIB = 40


def pss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise AssertionError(f"no Pss line for {pid}")


def test_an_idle_default_server_takes_at_most_40_mib(shardq_server) -> None:
    srv = shardq_server(2, ("--serving", "2"))
    children = srv.wait_all_children()
    pids = group_members(srv.pid)
    assert set(children.values()) | {srv.pid} <= set(pids)
    total = sum(pss_kib(pid) for pid in pids) / 1024
    assert total <= LIMIT_MIB, f"{total:.1f} MiB of PSS over {len(pids)} processes"
