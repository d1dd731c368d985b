"""Unit tests of the write-ahead log's replay: segment order, torn tails and
damaged records or files (shardq/storage/wal.py).

No sockets, no sleeps: every test works on files under tmp_path (helpers in
wal_helpers.py), with the log's `allocate` and `sync` seams replaced where a disk
fault is wanted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from wal_helpers import SEG, J, make_wal, replay_all, segment_files

from shardq.storage import segment_format as walmod
from shardq.storage.segment_format import HEADER, REC_HEAD, encode


def test_replay_across_segments_in_order(tmp_path: Path) -> None:
    w = make_wal(tmp_path)
    w.start()
    body = b"x" * 4000
    written: list[list[Any]] = []
    for i in range(1, 200):  # ~800 KB: several segments of 128 KB
        assert w.admit(len(body))
        rec = J(i, body)
        w.append([rec])
        written.append(rec)
        if i % 3 == 0:
            w.append([["D", i]])
            written.append(["D", i])
    w.close()
    assert len(segment_files(tmp_path)) > 3
    got, w2 = replay_all(tmp_path)
    assert got == written
    assert w2.damaged == 0


def test_replay_then_start_never_appends_to_an_old_segment(tmp_path: Path) -> None:
    w = make_wal(tmp_path)
    w.start()
    w.append([J(1)])
    w.close()
    before = (tmp_path / "1.wal").read_bytes()
    w2 = make_wal(tmp_path)
    assert list(w2.replay()) == [J(1)]
    w2.start()
    w2.append([J(2)])
    w2.close()
    assert (tmp_path / "1.wal").read_bytes() == before
    got, _ = replay_all(tmp_path)
    assert got == [J(1), J(2)]


def _write_segment(path: Path, records: list[list[Any]], tail: bytes = b"") -> bytes:
    data = HEADER + b"".join(encode(r) for r in records) + tail
    path.write_bytes(data)
    return data


def test_torn_last_record_is_cut_off(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    records = [J(1), J(2), ["D", 1], J(3, b"the torn one" * 10)]
    data = _write_segment(tmp_path / "1.wal", records)
    cut = len(data) - 17  # in the middle of the last record's payload
    (tmp_path / "1.wal").write_bytes(data[:cut])
    got, w = replay_all(tmp_path)
    assert got == records[:3]
    assert w.damaged == 0  # a torn tail is the normal end of a crash, not damage
    err = capsys.readouterr().err
    assert len([ln for ln in err.splitlines() if "cut off" in ln]) == 1, err
    # and the log is usable afterwards: new records land in a new segment
    w.start()
    w.append([J(4)])
    w.close()
    got, _ = replay_all(tmp_path)
    assert got == records[:3] + [J(4)]


def test_torn_record_header_only(tmp_path: Path) -> None:
    data = _write_segment(tmp_path / "1.wal", [J(1), J(2)])
    (tmp_path / "1.wal").write_bytes(data + encode(J(3))[:5])  # half a record head
    got, w = replay_all(tmp_path)
    assert got == [J(1), J(2)]
    assert w.damaged == 0


def test_torn_record_followed_by_preallocated_zeros(tmp_path: Path) -> None:
    rec = encode(J(3, b"z" * 500))
    data = _write_segment(tmp_path / "1.wal", [J(1)])
    (tmp_path / "1.wal").write_bytes(data + rec[:200] + bytes(SEG - len(data) - 200))
    got, w = replay_all(tmp_path)
    assert got == [J(1)]
    assert w.damaged == 0


def test_corrupted_record_in_the_middle_is_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    records = [J(1), J(2, b"damaged body"), J(3), ["D", 1], J(4)]
    data = bytearray(_write_segment(tmp_path / "1.wal", records, tail=bytes(1000)))
    off = len(HEADER) + len(encode(records[0]))
    data[off + REC_HEAD.size + 3] ^= 0x40  # flip a bit in record 2's payload
    (tmp_path / "1.wal").write_bytes(bytes(data))
    got, w = replay_all(tmp_path)
    assert got == [records[0], *records[2:]]
    assert w.damaged == 1
    assert "damaged" in capsys.readouterr().err


def test_corrupted_record_in_an_older_segment_later_segments_survive(tmp_path: Path) -> None:
    data = bytearray(_write_segment(tmp_path / "1.wal", [J(1), J(2), J(3)]))
    data[len(HEADER) + 1] ^= 0xFF  # the first record's magic
    (tmp_path / "1.wal").write_bytes(bytes(data))
    _write_segment(tmp_path / "2.wal", [J(4), ["D", 2]])
    got, w = replay_all(tmp_path)
    assert got == [J(2), J(3), J(4), ["D", 2]]
    assert w.damaged == 1


def test_damaged_record_with_magic_in_payload_does_not_hide_later_records(
    tmp_path: Path,
) -> None:
    """Bodies are binary: a damaged record may contain the magic bytes. BUG B1."""
    records = [J(1, b"x"), J(2, b"ab\xa5\x5azz"), J(3, b"ok"), ["D", 1]]
    data = bytearray(_write_segment(tmp_path / "1.wal", records))
    off = len(HEADER) + len(encode(records[0]))
    data[off + 6] ^= 0xFF  # record 2's crc
    (tmp_path / "1.wal").write_bytes(bytes(data))
    got, w = replay_all(tmp_path)
    assert got == [records[0], records[2], records[3]]
    assert w.damaged == 1


def test_file_with_bad_header_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _write_segment(tmp_path / "1.wal", [J(1)])
    bad = bytearray(_write_segment(tmp_path / "2.wal", [J(2)]))
    bad[0:5] = b"NOPE!"
    (tmp_path / "2.wal").write_bytes(bytes(bad))
    future = bytearray(_write_segment(tmp_path / "3.wal", [J(3)]))
    future[5] = walmod.WAL_VERSION + 1  # a version this reader does not know
    (tmp_path / "3.wal").write_bytes(bytes(future))
    _write_segment(tmp_path / "4.wal", [J(4)])
    got, w = replay_all(tmp_path)
    assert got == [J(1), J(4)]
    assert w.damaged == 2
    assert capsys.readouterr().err.count("skipped") >= 2
    w.start()  # never overwrites a segment it skipped
    assert w.index == 5


def test_garbage_file_does_not_stop_start_up(tmp_path: Path) -> None:
    (tmp_path / "1.wal").write_bytes(os.urandom(5000))
    _write_segment(tmp_path / "2.wal", [J(9)])
    got, w = replay_all(tmp_path)
    assert got == [J(9)]
    assert w.damaged == 1


def test_damaged_records_are_reported_in_stats(tmp_path: Path) -> None:
    """The issue: a damaged record is skipped and counted, in a log line *and a stats field*.
    BUG B3: Wal.stats() has no such field (only binlog-* indexes and record counts)."""
    records = [J(1), J(2), J(3)]
    data = bytearray(_write_segment(tmp_path / "1.wal", records))
    data[len(HEADER) + REC_HEAD.size + 2] ^= 0x01  # record 1's payload
    (tmp_path / "1.wal").write_bytes(bytes(data))
    _, w = replay_all(tmp_path)
    assert w.damaged == 1
    stats = w.stats()
    counted = {k: v for k, v in stats.items() if "damaged" in k or "skipped" in k}
    assert list(counted.values()) == [1], stats
