"""Appending and reading through ``PartitionLog``: offsets, whole batches, limits, bad input."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from tierlog.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidRequestError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from tierlog.log import FetchIsolation, PartitionLog, files
from tierlog.records import (
    HEADER_SIZE,
    Compression,
    ControlType,
    RecordBatchBuilder,
    TimestampType,
)

from .conftest import LogFactory
from .support import (
    T0,
    Clock,
    all_batches,
    all_values,
    batch,
    batches_of,
    file_names,
    marker,
    read_all,
)


@pytest.fixture
def log(tmp_path: Path, make_log: LogFactory) -> PartitionLog:
    return make_log(tmp_path / "orders-0")


@pytest.mark.parametrize("compression", list(Compression))
def test_round_trip_with_every_codec(
    tmp_path: Path, compression: Compression, make_log: LogFactory
) -> None:
    log = make_log(tmp_path / "t-0")
    sent = [batch(5, compression=compression, tag=i) for i in range(10)]
    infos = [log.append_as_leader(data, leader_epoch=0) for data in sent]
    assert [(i.first_offset, i.last_offset) for i in infos] == [
        (5 * n, 5 * n + 4) for n in range(10)
    ]
    stored = all_batches(log)
    assert [b.base_offset for b in stored] == list(range(0, 50, 5))
    assert all(b.compression is compression for b in stored)
    assert [r.offset for b in stored for r in b.records()] == list(range(50))
    assert all_values(log) == [
        f"{n}:{i}:".encode().ljust(20, b"x") for n in range(10) for i in range(5)
    ]
    # Only the offset and epoch changed: the rest of each batch is byte-identical.
    for original, kept in zip(sent, stored, strict=True):
        assert bytes(kept.raw)[HEADER_SIZE - 40 :] == original[HEADER_SIZE - 40 :]
    log.close()


def test_offsets_and_epochs_are_assigned_in_place(log: PartitionLog) -> None:
    data = bytearray(batch(3))
    info = log.append_as_leader(data, leader_epoch=7)
    assert info.first_offset == 0 and info.last_offset == 2
    (stored,) = batches_of(data)
    assert stored.partition_leader_epoch == 7
    assert bytes(all_batches(log)[0].raw) == bytes(data)
    info = log.append_as_leader(batch(2), leader_epoch=7)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (3, 4, 5)


def test_append_info_reports_timestamps_and_counts(log: PartitionLog) -> None:
    builder = RecordBatchBuilder()
    for ts in (T0 + 5, T0 + 9, T0 + 1):
        builder.append(ts, None, b"v")
    info = log.append_as_leader(builder.build() + batch(2, timestamp=T0), leader_epoch=0)
    assert (info.first_offset, info.last_offset) == (0, 4)
    assert info.max_timestamp == T0 + 9
    assert info.offset_of_max_timestamp == 2
    assert info.log_append_time == -1
    assert (info.shallow_count, info.records_count, info.num_messages) == (2, 5, 5)
    assert not info.duplicate


def test_log_append_time_stamps_the_batch(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock(T0 + 12345)
    log = make_log(tmp_path / "t-0", {"message.timestamp.type": "LogAppendTime"}, clock)
    info = log.append_as_leader(batch(3, timestamp=T0), leader_epoch=0)
    assert info.log_append_time == T0 + 12345 == info.max_timestamp
    (stored,) = all_batches(log)
    assert stored.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in stored.records()] == [T0 + 12345] * 3


def test_reads_return_whole_batches_within_the_limit(log: PartitionLog) -> None:
    sizes = [len(batch(4, tag=i)) for i in range(10)]
    for i in range(10):
        log.append_as_leader(batch(4, tag=i), leader_epoch=0)
    info = log.read(0, sizes[0] * 3 + 10)
    assert [b.base_offset for b in batches_of(info.records)] == [0, 4, 8]
    assert info.next_offset == 12
    # An offset inside a batch returns that whole batch, as Kafka does.
    info = log.read(6, sizes[0] * 2)
    assert [b.base_offset for b in batches_of(info.records)] == [4, 8]
    assert info.fetch_offset_metadata.message_offset == 6
    assert info.fetch_offset_metadata.relative_position == sizes[0]


def test_min_one_message_returns_an_oversized_first_batch(log: PartitionLog) -> None:
    log.append_as_leader(batch(4, value_size=500), leader_epoch=0)
    log.append_as_leader(batch(4, value_size=500), leader_epoch=0)
    whole = log.read(0, 10, min_one_message=True)
    assert [b.base_offset for b in batches_of(whole.records)] == [0]
    none = log.read(0, 10, min_one_message=False)
    assert none.records == b""
    assert none.first_entry_incomplete


def test_reading_at_the_end_is_empty_and_past_it_is_out_of_range(log: PartitionLog) -> None:
    log.append_as_leader(batch(2), leader_epoch=0)
    assert log.read(2, 1000).records == b""
    with pytest.raises(OffsetOutOfRangeError, match="offset 3 is out of range"):
        log.read(3, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)


def test_high_watermark_bounds_consumer_reads(log: PartitionLog) -> None:
    for i in range(5):
        log.append_as_leader(batch(2, tag=i), leader_epoch=0)
    assert log.read(0, 10_000, FetchIsolation.HIGH_WATERMARK).records == b""
    assert log.update_high_watermark(6) == 6
    data = log.read(0, 10_000, FetchIsolation.HIGH_WATERMARK).records
    assert [b.base_offset for b in batches_of(data)] == [0, 2, 4]
    assert len(batches_of(log.read(0, 10_000).records)) == 5
    # The high watermark never leaves [log start, log end].
    assert log.update_high_watermark(99) == 10
    log.high_watermark = -5
    assert log.high_watermark == 0


def test_reads_span_segments_one_segment_at_a_time(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(tmp_path / "t-0", {"segment.bytes": 1000})
    for i in range(20):
        log.append_as_leader(batch(2, value_size=100, tag=i), leader_epoch=0)
    assert log.segment_count > 3
    data = read_all(log)
    assert [b.base_offset for b in batches_of(data)] == list(range(0, 40, 2))
    second = log.segments()[1].base_offset
    info = log.read(second - 1, 1 << 20)
    assert batches_of(info.records)[-1].next_offset == second


def test_index_is_sparse_by_index_interval_bytes(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(tmp_path / "t-0", {"index.interval.bytes": 1000})
    size = len(batch(1, value_size=200))
    for i in range(100):
        log.append_as_leader(batch(1, value_size=200, tag=i), leader_epoch=0)
    log.close()
    index = (tmp_path / "t-0" / files.offset_index_file_name(0)).read_bytes()
    entries = [struct.unpack_from(">ii", index, n) for n in range(0, len(index), 8)]
    # An entry once more than index.interval.bytes were written since the last one.
    every = 1000 // size + 1
    assert len(entries) == (100 - 1) // every
    assert [position for _, position in entries] == [every * size * n for n in range(1, 25)]
    assert [offset for offset, _ in entries] == [every * n for n in range(1, 25)]
    dense = make_log(tmp_path / "u-0", {"index.interval.bytes": 0})
    for i in range(10):
        dense.append_as_leader(batch(1, tag=i), leader_epoch=0)
    dense.close()
    assert len((tmp_path / "u-0" / files.offset_index_file_name(0)).read_bytes()) == 9 * 8


def test_offset_for_timestamp(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(tmp_path / "t-0", {"segment.bytes": 600, "index.interval.bytes": 50})
    for i in range(30):
        log.append_as_leader(batch(3, timestamp=T0 + 100 * i), leader_epoch=i // 10)
    assert log.segment_count > 2
    found = log.offset_for_timestamp(T0 + 1001)
    assert found is not None
    assert (found.timestamp, found.offset, found.leader_epoch) == (T0 + 1001, 31, 1)
    between = log.offset_for_timestamp(T0 + 1050)
    assert between is not None and (between.timestamp, between.offset) == (T0 + 1100, 33)
    first = log.offset_for_timestamp(0)
    assert first is not None and first.offset == 0
    assert log.offset_for_timestamp(T0 + 10_000) is None
    assert log.offset_for_timestamp(-2).offset == 0  # type: ignore[union-attr]
    assert log.offset_for_timestamp(-1).offset == 90  # type: ignore[union-attr]
    newest = log.offset_for_timestamp(-3)
    assert newest is not None and (newest.timestamp, newest.offset) == (T0 + 2902, 89)
    assert log.offset_for_timestamp(-5) is None


# --- bad input: the right error, and the log unchanged -----------------------------------------


def _unchanged(log: PartitionLog, before: bytes, directory: Path, names: list[str]) -> None:
    assert read_all(log) == before
    assert file_names(directory) == names
    assert log.log_end_offset == len(all_values(log))


@pytest.fixture
def filled(tmp_path: Path, make_log: LogFactory) -> tuple[PartitionLog, Path]:
    directory = tmp_path / "t-0"
    log = make_log(directory)
    for i in range(3):
        log.append_as_leader(batch(2, tag=i), leader_epoch=0)
    return log, directory


def test_corrupt_crc_is_rejected(filled: tuple[PartitionLog, Path]) -> None:
    log, directory = filled
    before, names = read_all(log), file_names(directory)
    bad = bytearray(batch(2))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        log.append_as_leader(bytes(batch(1)) + bytes(bad), leader_epoch=0)
    _unchanged(log, before, directory, names)


def test_truncated_batch_is_rejected(filled: tuple[PartitionLog, Path]) -> None:
    log, directory = filled
    before, names = read_all(log), file_names(directory)
    with pytest.raises(CorruptRecordError, match="truncated"):
        log.append_as_leader(batch(3)[:-5], leader_epoch=0)
    with pytest.raises(CorruptRecordError, match="truncated batch header"):
        log.append_as_leader(batch(3)[:30], leader_epoch=0)
    _unchanged(log, before, directory, names)


def test_bad_magic_is_rejected(filled: tuple[PartitionLog, Path]) -> None:
    log, directory = filled
    before, names = read_all(log), file_names(directory)
    bad = bytearray(batch(1))
    bad[16] = 1
    with pytest.raises(CorruptRecordError, match="unsupported magic 1"):
        log.append_as_leader(bad, leader_epoch=0)
    _unchanged(log, before, directory, names)


def test_oversized_batch_is_rejected(tmp_path: Path, make_log: LogFactory) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, {"max.message.bytes": 1000})
    log.append_as_leader(batch(1), leader_epoch=0)
    before, names = read_all(log), file_names(directory)
    with pytest.raises(RecordTooLargeError, match=r"more than max.message.bytes \(1000\)"):
        log.append_as_leader(batch(1) + batch(1, value_size=2000), leader_epoch=0)
    _unchanged(log, before, directory, names)


def test_clients_cannot_write_control_batches(filled: tuple[PartitionLog, Path]) -> None:
    log, directory = filled
    before, names = read_all(log), file_names(directory)
    with pytest.raises(InvalidRecordError, match="control records"):
        log.append_as_leader(marker(ControlType.COMMIT, 5), leader_epoch=0)
    _unchanged(log, before, directory, names)


def test_an_older_leader_epoch_is_fenced(filled: tuple[PartitionLog, Path]) -> None:
    log, directory = filled
    log.append_as_leader(batch(1), leader_epoch=3)
    before, names = read_all(log), file_names(directory)
    with pytest.raises(FencedLeaderEpochError, match="leader epoch 2 is older than epoch 3"):
        log.append_as_leader(batch(1), leader_epoch=2)
    _unchanged(log, before, directory, names)


def test_read_only_input_is_copied_not_rejected(log: PartitionLog) -> None:
    data = batch(2)
    log.append_as_leader(memoryview(data), leader_epoch=0)
    log.append_as_leader(data, leader_epoch=0)
    assert [b.base_offset for b in all_batches(log)] == [0, 2]
    assert data == batch(2)


def test_empty_input_appends_nothing(log: PartitionLog) -> None:
    info = log.append_as_leader(b"", leader_epoch=0)
    assert info.shallow_count == 0 and log.log_end_offset == 0


def test_follower_append_keeps_offsets_and_epochs(tmp_path: Path, make_log: LogFactory) -> None:
    leader = make_log(tmp_path / "t-0")
    follower = make_log(tmp_path / "f-0")
    for epoch in (1, 1, 4):
        leader.append_as_leader(batch(3, tag=epoch), leader_epoch=epoch)
    data = read_all(leader)
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 8)
    assert read_all(follower) == data
    assert [(e.epoch, e.start_offset) for e in follower.leader_epoch_cache.entries()] == [
        (1, 0),
        (4, 6),
    ]
    with pytest.raises(InvalidRequestError, match="does not follow"):
        follower.append_as_follower(data)
    assert read_all(follower) == data


def test_closed_log_refuses_work(log: PartitionLog) -> None:
    log.close()
    log.close()
    with pytest.raises(Exception, match="closed"):
        log.append_as_leader(batch(1), leader_epoch=0)
