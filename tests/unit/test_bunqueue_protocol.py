"""bunqueue's wire protocol, sans-IO (shardq/protocol/bunqueue.py, bunqueue_args.py):
framing across reads, the 64 MiB cap, reqIds, msgpackr's `undefined`, no 64-bit integer
in a reply, and a pushed job's options with bunqueue's errors."""

from __future__ import annotations

import json
import struct

import msgpack
import pytest

from shardq.protocol import bunqueue as b
from shardq.protocol import bunqueue_args as a
from shardq.protocol.inbuf import Invalid


def framed(msg: object) -> bytes:
    body = msgpack.packb(msg)
    return struct.pack(">I", len(body)) + body


def reply_of(data: bytes) -> object:
    (size,) = struct.unpack_from(">I", data)
    assert len(data) == 4 + size
    return msgpack.unpackb(data[4:], raw=False)


def test_frames_split_across_reads_come_out_whole_and_in_order() -> None:
    p = b.BunqueueParser()
    data = framed({"cmd": "Ping", "reqId": 7}) + framed({"cmd": "PUSH", "queue": "q"})
    for i in range(len(data)):  # a byte at a time
        p.feed(data[i : i + 1])
    first, second = p.next_command(), p.next_command()
    assert isinstance(first, b.Request) and (first.cmd, first.req_id) == ("Ping", 7)
    assert isinstance(second, b.Request) and second.req_id is b.NO_REQ_ID
    assert second.args == {"queue": "q"}
    assert p.next_command() is None


def test_a_frame_over_64_mib_is_refused_and_ends_the_stream() -> None:
    p = b.BunqueueParser()
    p.feed(struct.pack(">I", b.MAX_FRAME + 1) + b"xx")
    got = p.next_command()
    assert isinstance(got, Invalid) and got.close
    assert reply_of(got.reply) == {
        "ok": False,
        "error": "Frame too large: 67108865 bytes exceeds maximum 67108864",
    }
    p.feed(framed({"cmd": "Ping"}))
    assert p.next_command() is None and p.buffered == 0


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"\xc0", "Invalid command format"),  # nil
        (b"\x82\xa3cmd", "Invalid command format"),  # cut short
        (msgpack.packb([1, 2]), "Invalid command"),
        (msgpack.packb({"queue": "q"}), "Invalid command"),
    ],
)
def test_what_is_no_command_gets_bunqueues_errors(body: bytes, error: str) -> None:
    got = b.decode(body)
    assert isinstance(got, Invalid) and not got.close
    assert reply_of(got.reply) == {"ok": False, "error": error}


def test_msgpackr_undefined_decodes_as_absent() -> None:
    body = b"\x82\xa3cmd\xa4Ping\xa5reqId\xd4\x00\x00"  # reqId: undefined
    got = b.decode(body)
    assert isinstance(got, b.Request) and got.req_id is b.NO_REQ_ID


def test_no_64_bit_integer_goes_out() -> None:
    data = b.ok(b.NO_REQ_ID, data=b.safe({"big": 2**40, "neg": -(2**33), "small": 5, "t": True}))
    raw = data[4:]
    assert b"\xcf" not in raw and b"\xd3" not in raw  # uint64 / int64
    assert reply_of(data) == {
        "ok": True,
        "data": {"big": 2.0**40, "neg": -(2.0**33), "small": 5, "t": True},
    }


def test_the_req_id_is_echoed_whatever_its_type() -> None:
    for rid in (7, "7", [1], None):
        got = reply_of(b.ok(rid))
        assert got == {"ok": True, "reqId": rid}


def test_a_pushed_jobs_options_and_their_errors() -> None:
    spec = a.job_spec({"data": {"name": "send", "to": "x"}, "priority": 5, "jobId": "c1"}, "jobId")
    assert (spec.name, spec.data, spec.priority, spec.custom_id) == ("send", {"to": "x"}, 5, "c1")
    assert a.job_spec({"name": "n", "data": {"name": "kept"}}, "jobId").data == {"name": "kept"}
    assert a.job_spec({"backoff": {"type": "fixed", "delay": 50}}, "jobId").backoff == 50
    for job, error in [
        ({"priority": 1_000_001}, "priority must be at most 1000000"),
        ({"priority": 1.5}, "priority must be an integer"),
        ({"maxAttempts": 0}, "maxAttempts must be at least 1"),
        ({"delay": "x"}, "delay must be a number"),
        ({"backoff": {"type": "linear"}}, "backoff.type must be 'fixed' or 'exponential'"),
        ({"data": {1: 2}}, "Job data must be JSON serializable"),
    ]:
        with pytest.raises(
            a.BadRequest, match=f"^{error}$".replace("(", r"\(").replace(")", r"\)")
        ):
            a.job_spec(job, "jobId")
    with pytest.raises(a.BadRequest, match=r"^jobs\[1\]: priority must be at most 1000000$"):
        a.batch_specs([{}, {"priority": 10**7}])


def test_queue_names_are_bunqueues_and_map_to_tubes() -> None:
    assert a.queue({"queue": "a:b.c-d_e"}) == "a:b.c-d_e"
    assert a.tube_of("a:b") == "a;b" and a.queue_of("a;b") == "a:b"
    for args, error in [
        ({}, "Queue name is required"),
        ({"queue": "a b"}, "Queue name contains invalid characters"),
        ({"queue": "x" * 257}, "Queue name too long (max 256 characters)"),
    ]:
        with pytest.raises(a.BadRequest) as e:
            a.queue(args)
        assert str(e.value) == error


class Label(str):
    pass


class Count(int):
    pass


@pytest.mark.parametrize(
    "value",
    [
        "text",
        1.5,
        True,
        None,
        7,
        1 << 40,
        -(1 << 40),
        {"a": [1, {"b": 1 << 33}], "c": None},
        [1, "x", [2.5, False]],
        Label("sub"),
        Count(5),
        {"k": Label("v"), "n": Count(1 << 35)},
        {1: "int key"},
        (1, 2),
        [b"bytes"],
        {"a": {2: "deep int key"}},
        {Label("k"): 1},
    ],
)
def test_json_data_is_json_ready_then_safe(value: object) -> None:
    """One walk gives what the two did: the same data, or the same refusal."""
    if a.json_ready(value):
        assert a.json_data(value) == b.safe(value)
        assert type(a.json_data(value)) is type(b.safe(value))
    else:
        with pytest.raises(a.NotJson):
            a.json_data(value)


def test_plain_push_takes_the_same_spec_as_the_full_check() -> None:
    """The fast path of job_spec gives what the option-by-option path gives."""
    job = {"data": "x" * 100}
    fast = a.job_spec(job, "customId")
    name, data = a.name_and_data(job)
    data, body = a.data_of(data)
    assert fast == a.JobSpec(name, data, body=body)
    assert fast.body == json.dumps("x" * 100).encode()
    assert a.job_spec({"data": "é\u2028"}, "customId").body == json.dumps("é\u2028").encode()
