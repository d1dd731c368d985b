"""Property-based fuzzing of the sans-IO parser (shardq.protocol.parser) with hypothesis.

Random and mutated command streams (tests/fuzz_streams.py) are fed whole and in random
chunks. The properties, for every stream and every max-job-size drawn:

* ``feed()`` / ``next_command()`` never raise;
* chunking invariance: the same commands (and the same leftover state) whatever the
  ``feed()`` boundaries;
* the parser agrees with ``fuzz_streams.frame``, a whole-stream model of the framing:
  over-long lines are one ``BAD_FORMAT`` each, and a put takes exactly its declared size
  + 2 bytes, answered ``JOB_TOO_BIG`` (size over the limit), ``EXPECTED_CRLF`` (those
  bytes do not end in CRLF) or the job;
* resynchronisation, exactly: after any stream, once the pending put body (if any) is
  complete, ``\\r\\n`` and a valid command give at most one command for the unfinished
  line and then that valid command;
* bounded memory: between ``next_command()`` calls the parser holds less than one line
  (224 bytes) or one put body (size + 2).

Deterministic (derandomized, ``fuzz_streams.fuzz_settings``); ``SHARDQ_FUZZ_EXAMPLES=5000`` for a
long run.
"""

from __future__ import annotations

from fuzz_streams import (
    CRLF,
    chunked,
    frame,
    fuzz_settings,
    parse_chunks,
    put_command,
    streams,
    valid_command,
)
from hypothesis import given
from hypothesis import strategies as st

from shardq.protocol.commands import Command, ErrorReply, ListTubeUsed, Put
from shardq.protocol.parser import MAX_LINE, Parser
from shardq.protocol.replies import BAD_FORMAT, EXPECTED_CRLF, JOB_TOO_BIG, UNKNOWN_COMMAND

max_job_sizes = st.sampled_from([65535, 0, 10, 300])
SENTINEL = b"list-tube-used\r\n"


@fuzz_settings(300)
@given(data=st.data(), max_job_size=max_job_sizes)
def test_chunking_invariance_and_model(data: st.DataObject, max_job_size: int) -> None:
    stream = data.draw(streams(), label="stream")
    chunks = data.draw(chunked(stream), label="chunks")
    whole, p_whole = parse_chunks([stream], max_job_size)
    split, p_split = parse_chunks(chunks, max_job_size)
    assert split == whole
    assert p_split.handover() == p_whole.handover()
    model = frame(stream, max_job_size)
    assert whole == model.commands
    # handover(): the unparsed bytes between commands, None inside a body or long line
    if model.state == "line":
        assert p_whole.handover() == model.rest
    else:
        assert p_whole.handover() is None


def _feed(parser: Parser, data: bytes) -> list[Command]:
    parser.feed(data)
    out: list[Command] = []
    while (cmd := parser.next_command()) is not None:
        out.append(cmd)
    return out


def _finish_body(parser: Parser, pending: int) -> list[Command]:
    """Feed ``pending`` bytes of b"x" (a JOB_TOO_BIG body may be GiBs: 1 MiB at a time)."""
    out: list[Command] = []
    block = b"x" * (1 << 20)
    while pending:
        n = min(pending, len(block))
        out += _feed(parser, block[:n])
        pending -= n
    return out


@fuzz_settings(300)
@given(data=st.data(), max_job_size=max_job_sizes)
def test_resynchronises_after_crlf(data: st.DataObject, max_job_size: int) -> None:
    """The exact resynchronisation property.

    After any garbage G: if G stopped inside a put body, the body's remaining bytes
    finish it (one Put reply) and the CRLF is then an empty line (UNKNOWN_COMMAND);
    inside an over-long line, the CRLF ends it (one BAD_FORMAT); inside a shorter line,
    the CRLF ends it (one command, or a put header whose body must then be finished the
    same way). After that, a valid command is the next command, alone.
    """
    garbage = data.draw(streams(), label="garbage")
    parser = Parser(max_job_size)
    got: list[Command] = []
    for chunk in data.draw(chunked(garbage), label="chunks"):
        got += _feed(parser, chunk)
    before = frame(garbage, max_job_size)
    assert got == before.commands
    extra = _finish_body(parser, before.pending) + _feed(parser, CRLF)
    if before.state == "line":
        after = frame(garbage + CRLF, max_job_size)
        assert extra == after.commands[len(before.commands) :]
        if after.state == "body":  # the finished line was a put header
            assert extra == []
            extra = _finish_body(parser, after.pending) + _feed(parser, CRLF)
            assert len(extra) == 2 and isinstance(extra[0], Put)
            assert extra[1] == ErrorReply(UNKNOWN_COMMAND)
        else:
            assert len(extra) == 1
    elif before.state == "overlong":
        assert extra == [ErrorReply(BAD_FORMAT)]
    else:
        assert len(extra) == 2 and isinstance(extra[0], Put) and extra[0].error is not None
        assert extra[1] == ErrorReply(UNKNOWN_COMMAND)
    assert _feed(parser, SENTINEL) == [ListTubeUsed()]
    assert parser.handover() == b""


@fuzz_settings(200)
@given(data=st.data(), max_job_size=max_job_sizes)
def test_buffer_stays_bounded(data: st.DataObject, max_job_size: int) -> None:
    stream = data.draw(streams(), label="stream")
    chunks = data.draw(chunked(stream), label="chunks")
    parser = Parser(max_job_size)
    for chunk in chunks:
        parser.feed(chunk)
        while parser.next_command() is not None:
            pass
        assert parser.buffered < max(MAX_LINE, max_job_size + 2)


@fuzz_settings(200)
@given(
    puts=st.lists(put_command(), min_size=1, max_size=5),
    data=st.data(),
)
def test_valid_puts_take_their_body_exactly(puts: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(puts) + SENTINEL
    out, _ = parse_chunks(data.draw(chunked(stream), label="chunks"))
    assert len(out) == len(puts) + 1
    for raw, cmd in zip(puts, out, strict=False):
        assert isinstance(cmd, Put) and cmd.error is None
        assert raw.endswith(b"\r\n" + cmd.body + CRLF)
    assert out[-1] == ListTubeUsed()


@fuzz_settings(200)
@given(
    body=st.binary(max_size=200),
    declared=st.integers(0, 200),
    data=st.data(),
)
def test_wrong_body_size_consumes_declared_size_plus_two(
    body: bytes, declared: int, data: st.DataObject
) -> None:
    # beanstalkd reads exactly <bytes> + 2 bytes, then checks they end in CRLF.
    stream = b"put 0 0 1 %d\r\n%s\r\n" % (declared, body)
    stream += b"x" * max(0, declared + 2 - (len(body) + 2))  # always complete the body
    rest = stream[stream.index(CRLF) + 2 + declared + 2 :]
    out, parser = parse_chunks(data.draw(chunked(stream + CRLF + SENTINEL), label="chunks"))
    first = out[0]
    assert isinstance(first, Put)
    taken = stream[stream.index(CRLF) + 2 :][: declared + 2]
    if taken.endswith(CRLF):
        assert first == Put(0, 0, 1, taken[:-2])
    else:
        assert first == Put(0, 0, 1, b"", EXPECTED_CRLF)
    assert out[-1] == ListTubeUsed()
    assert out[1:] == frame(rest + CRLF + SENTINEL).commands


@fuzz_settings(100)
@given(cmd=valid_command(), data=st.data())
def test_every_valid_command_parses(cmd: bytes, data: st.DataObject) -> None:
    out, parser = parse_chunks(data.draw(chunked(cmd), label="chunks"))
    assert len(out) == 1
    assert not isinstance(out[0], ErrorReply)
    assert parser.handover() == b""


@fuzz_settings(100)
@given(
    max_job_size=st.integers(0, 50),
    over=st.integers(1, 100),
    inner=st.lists(valid_command(), max_size=4),
    data=st.data(),
)
def test_job_too_big_discards_exactly_size_plus_two(
    max_job_size: int, over: int, inner: list[bytes], data: st.DataObject
) -> None:
    # beanstalkd: skip(c, bytes + 2, JOB_TOO_BIG) -- whatever those bytes are, commands
    # and CRLFs included, even with text after the size (checked after the size limit).
    size = max_job_size + over
    body = (b"".join(inner) + b"y" * (size + 2))[: size + 2]
    trailer = data.draw(st.sampled_from([b"", b" junk"]), label="trailer")
    stream = b"put 1 2 3 %d%s\r\n%s%s" % (size, trailer, body, SENTINEL)
    out, parser = parse_chunks(data.draw(chunked(stream), label="chunks"), max_job_size)
    assert out == [Put(1, 2, 3, b"", JOB_TOO_BIG), ListTubeUsed()]
    assert parser.handover() == b""
