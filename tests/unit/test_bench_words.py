"""What `shardq bench` prints about its own load reads as English: one connection, one process."""

from shardq.bench.protocols import format_protocol_result
from shardq.bench.runner import format_result


def _result(connections: int, processes: int) -> dict[str, object]:
    spec = {"workload": "put", "host": "127.0.0.1", "port": 11300, "pipeline": 1, "size": 100}
    return {
        "spec": {**spec, "connections": connections, "processes": processes},
        "total_ops": 10,
        "elapsed_s": 1.0,
        "ops_per_sec": 10.0,
        "errors": 0,
        "client_cpu_s": 0.1,
        "ops": {},
        "timed_out": 0,
        "error_samples": [],
    }


def test_one_connection_and_one_load_process_are_singular():
    head = format_result(_result(1, 1)).splitlines()[0]
    assert "1 connection," in head and head.endswith(" 1 load process")


def test_several_are_plural():
    head = format_result(_result(1_000, 2)).splitlines()[0]
    assert "1,000 connections," in head and head.endswith(" 2 load processes")


def test_protocol_result_says_one_connection():
    fields = ("protocol", "workload", "seconds", "client_cpu_s", "pipeline", "size", "queue")
    result: dict[str, object] = dict.fromkeys(fields, "x")
    result.update(ops_per_s=1, ops=1, removed=0, connections=1)
    assert "1 connection," in format_protocol_result(result)
