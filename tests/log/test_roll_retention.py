"""Segment roll triggers, retention, delete-records, truncation, flush policy, tiering hooks."""

from __future__ import annotations

from pathlib import Path

import pytest
from tierlog.config import resolve_topic_config
from tierlog.errors import OffsetOutOfRangeError
from tierlog.log import (
    EpochEntry,
    FetchIsolation,
    LeaderEpochCheckpointFile,
    LogConfig,
    PartitionLog,
    files,
)
from tierlog.records import ControlType

from .conftest import LogFactory
from .support import (
    T0,
    Clock,
    all_batches,
    batch,
    batches_of,
    file_names,
    idempotent,
    marker,
    read_all,
    segment_bases,
)

#: One 100-byte record per batch; segments of TWO such batches.
SIZE = len(batch(1, value_size=100))
TWO = SIZE * 2

# --- roll -------------------------------------------------------------------------------------


def test_roll_on_segment_bytes(tmp_path: Path, make_log: LogFactory) -> None:
    size = len(batch(1, value_size=100))
    log = make_log(tmp_path / "t-0", {"segment.bytes": size * 3})
    for i in range(10):
        log.append_as_leader(batch(1, value_size=100, tag=i), leader_epoch=0)
    assert segment_bases(log) == [0, 3, 6, 9]
    assert [s.size_in_bytes for s in log.segments()] == [size * 3] * 3 + [size]
    # A single batch larger than a segment still goes in, alone.
    log.append_as_leader(batch(1, value_size=1000), leader_epoch=0)
    assert segment_bases(log) == [0, 3, 6, 9, 10]


def test_roll_on_segment_ms_by_record_time(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(tmp_path / "t-0", {"segment.ms": 1000})
    log.append_as_leader(batch(1, timestamp=T0), leader_epoch=0)
    log.append_as_leader(batch(1, timestamp=T0 + 1000), leader_epoch=0)
    assert segment_bases(log) == [0]
    log.append_as_leader(batch(1, timestamp=T0 + 1001), leader_epoch=0)
    assert segment_bases(log) == [0, 2]


def test_roll_on_segment_ms_by_wall_time_without_timestamps(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    log = make_log(tmp_path / "t-0", {"segment.ms": 1000}, clock)
    log.append_as_leader(batch(1, timestamp=-1), leader_epoch=0)
    clock.advance(1000)
    log.append_as_leader(batch(1, timestamp=-1), leader_epoch=0)
    assert segment_bases(log) == [0]
    clock.advance(1)
    log.append_as_leader(batch(1, timestamp=-1), leader_epoch=0)
    assert segment_bases(log) == [0, 2]


def test_roll_on_a_full_index(tmp_path: Path, make_log: LogFactory) -> None:
    # Room for 3 offset-index entries (the time index keeps one slot for the roll).
    log = make_log(tmp_path / "t-0", {"segment.index.bytes": 36, "index.interval.bytes": 0})
    for i in range(12):
        log.append_as_leader(batch(1, timestamp=T0 + i, tag=i), leader_epoch=0)
    assert segment_bases(log) == [0, 3, 6, 9]
    log.close()
    for base in (0, 3, 6):
        assert (tmp_path / "t-0" / files.time_index_file_name(base)).stat().st_size == 2 * 12
        assert (tmp_path / "t-0" / files.offset_index_file_name(base)).stat().st_size == 2 * 8


def test_roll_on_relative_offset_overflow(tmp_path: Path, make_log: LogFactory) -> None:
    leader = make_log(tmp_path / "l-0")
    leader.append_as_leader(batch(1), leader_epoch=0)
    follower = make_log(tmp_path / "f-0")
    follower.append_as_follower(read_all(leader))
    far = bytearray(batch(1))
    far[0:8] = (1 << 31).to_bytes(8, "big")  # base offset: not covered by the CRC
    follower.append_as_follower(far)
    assert segment_bases(follower) == [0, 1 << 31]
    assert [b.base_offset for b in all_batches(follower)] == [0, 1 << 31]


def test_explicit_roll_and_fsync_advance_the_recovery_point(
    tmp_path: Path, make_log: LogFactory
) -> None:
    log = make_log(tmp_path / "t-0")
    log.append_as_leader(batch(3), leader_epoch=0)
    assert log.recovery_point == 0
    assert log.roll() == 3
    assert log.recovery_point == 3
    assert log.roll() == 3  # an empty active segment is not rolled again
    text = (tmp_path / "t-0" / files.RECOVERY_POINT_CHECKPOINT).read_text()
    assert text == "0\n1\nt 0 3\n"


# --- flush policy ------------------------------------------------------------------------------


def test_flush_messages_flushes_every_n_records(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(tmp_path / "t-0", {"flush.messages": 5})
    log.append_as_leader(batch(3), leader_epoch=0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(2), leader_epoch=0)
    assert log.recovery_point == 5
    log.append_as_leader(batch(1), leader_epoch=0)
    assert log.recovery_point == 5


def test_flush_ms_flushes_after_the_interval(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    log = make_log(tmp_path / "t-0", {"flush.ms": 1000}, clock)
    log.append_as_leader(batch(2), leader_epoch=0)
    assert log.recovery_point == 0
    assert not log.maybe_flush()
    clock.advance(1000)
    assert log.maybe_flush()
    assert log.recovery_point == 2
    log.append_as_leader(batch(1), leader_epoch=0)
    clock.advance(1000)
    log.append_as_leader(batch(1), leader_epoch=0)  # an append past the interval flushes too
    assert log.recovery_point == 4


# --- retention ---------------------------------------------------------------------------------


def test_retention_by_time_deletes_whole_old_segments(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock(T0)
    log = make_log(
        tmp_path / "t-0",
        {"segment.bytes": TWO, "file.delete.delay.ms": 0, "retention.ms": 5000},
        clock,
    )
    for i in range(12):
        log.append_as_leader(batch(1, value_size=100, timestamp=T0 + 1000 * i), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    bases = segment_bases(log)
    assert bases == [0, 2, 4, 6, 8, 10]
    clock.now = T0 + 11_000
    # Newest records at 1 s, 3 s and 5 s are more than 5 s old at 11 s; the one at 7 s is not.
    assert log.delete_old_segments() == 3
    assert segment_bases(log) == [6, 8, 10]
    assert log.log_start_offset == log.local_log_start_offset == 6
    assert not any(n.startswith(files.offset_prefix(0)) for n in file_names(tmp_path / "t-0"))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 1000)
    clock.now = T0 + 1_000_000
    assert log.delete_old_segments() == 2
    assert segment_bases(log) == [10]  # never the active segment


def test_retention_by_size(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(
        tmp_path / "t-0",
        {"segment.bytes": TWO, "file.delete.delay.ms": 0, "retention.bytes": SIZE * 5},
    )
    for i in range(12):
        log.append_as_leader(batch(1, value_size=100, tag=i), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 3
    assert segment_bases(log) == [6, 8, 10]
    assert log.size == SIZE * 6


def test_retention_keeps_segments_above_the_high_watermark(
    tmp_path: Path, make_log: LogFactory
) -> None:
    log = make_log(
        tmp_path / "t-0", {"segment.bytes": TWO, "file.delete.delay.ms": 0, "retention.ms": 0}
    )
    for i in range(12):
        log.append_as_leader(batch(1, value_size=100, timestamp=T0 - 10**7 + i), leader_epoch=0)
    log.update_high_watermark(5)
    log.delete_old_segments()
    assert segment_bases(log) == [4, 6, 8, 10]


def test_deleted_segments_wait_for_file_delete_delay(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock(T0)
    directory = tmp_path / "t-0"
    log = make_log(
        directory,
        {"segment.bytes": TWO, "file.delete.delay.ms": 500, "retention.ms": 10},
        clock,
    )
    for i in range(4):
        log.append_as_leader(batch(1, value_size=100, timestamp=T0 - 1000 + i), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 1
    assert files.log_file_name(0) + files.DELETED_SUFFIX in file_names(directory)
    clock.advance(500)
    log.maybe_flush()
    assert not [n for n in file_names(directory) if n.endswith(files.DELETED_SUFFIX)]


def test_tiered_local_retention_waits_for_the_copy(tmp_path: Path, make_log: LogFactory) -> None:
    topic = resolve_topic_config(
        {
            "segment.bytes": TWO,
            "file.delete.delay.ms": 0,
            "remote.storage.enable": True,
            "local.retention.ms": 0,
            "retention.ms": -1,
        },
        {"remote.log.storage.system.enable": True},
    )
    log = make_log(tmp_path / "t-0", LogConfig.from_topic_config(topic))
    for i in range(8):
        log.append_as_leader(batch(1, value_size=100, timestamp=T0 - 10**6 + i), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 0  # nothing is in remote storage yet
    uploadable = log.segments_eligible_for_upload()
    assert [(u.base_offset, u.end_offset) for u in uploadable] == [(0, 1), (2, 3), (4, 5)]
    log.highest_offset_in_remote_storage = 3
    assert [u.base_offset for u in log.segments_eligible_for_upload()] == [4]
    assert log.delete_old_segments() == 2
    assert segment_bases(log) == [4, 6]
    assert log.log_start_offset == 0 and log.local_log_start_offset == 4


def _tiered_log(make_log: LogFactory, directory: Path, *, tiered: bool) -> PartitionLog:
    topic = resolve_topic_config(
        {
            "segment.bytes": 1024 * 1024,
            "file.delete.delay.ms": 0,
            "remote.storage.enable": tiered,
            "local.retention.ms": 0,
            "retention.ms": -1 if tiered else 0,
        },
        {"remote.log.storage.system.enable": True},
    )
    log = make_log(directory, LogConfig.from_topic_config(topic))
    for i in range(3):
        log.append_as_leader(batch(1, value_size=100, timestamp=T0 - 10**6 + i), leader_epoch=0)
    return log


def test_a_tiered_log_rolls_its_active_segment_once_local_retention_holds_for_it(
    tmp_path: Path, make_log: LogFactory
) -> None:
    """KAFKA-15047: otherwise the newest records of a quiet partition never leave the disk."""
    log = _tiered_log(make_log, tmp_path / "t-0", tiered=True)
    log.update_high_watermark(log.log_end_offset)
    assert segment_bases(log) == [0]
    assert log.delete_old_segments() == 0  # rolled, not deleted: it is not tiered yet
    assert segment_bases(log) == [0, 3]
    assert [(u.base_offset, u.end_offset) for u in log.segments_eligible_for_upload()] == [(0, 2)]
    log.highest_offset_in_remote_storage = 2
    assert log.delete_old_segments() == 1
    assert segment_bases(log) == [3] and log.local_log_start_offset == 3
    assert log.log_start_offset == 0
    assert log.delete_old_segments() == 0
    assert segment_bases(log) == [3], "an empty active segment is never rolled"


def test_the_active_segment_is_not_rolled_above_the_high_watermark_or_untiered(
    tmp_path: Path, make_log: LogFactory
) -> None:
    above = _tiered_log(make_log, tmp_path / "above-0", tiered=True)
    above.update_high_watermark(2)
    assert above.delete_old_segments() == 0
    assert segment_bases(above) == [0], "records not yet replicated stay in the active segment"
    local = _tiered_log(make_log, tmp_path / "local-0", tiered=False)
    local.update_high_watermark(local.log_end_offset)
    assert local.delete_old_segments() == 0
    assert segment_bases(local) == [0], "without tiering the active segment is kept"


def test_delete_records_moves_the_log_start_offset(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(tmp_path / "t-0", {"segment.bytes": TWO, "file.delete.delay.ms": 0})
    for i in range(10):
        log.append_as_leader(batch(1, value_size=100, tag=i), leader_epoch=i)
    log.update_high_watermark(7)
    with pytest.raises(OffsetOutOfRangeError, match="high watermark is 7"):
        log.delete_records(8)
    assert log.delete_records(5) == 5
    assert log.log_start_offset == log.local_log_start_offset == 5
    assert segment_bases(log) == [4, 6, 8]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 1000)
    assert batches_of(log.read(5, 1000).records)[0].base_offset == 5
    assert log.offset_for_timestamp(-2).offset == 5  # type: ignore[union-attr]
    assert log.leader_epoch_cache.entries()[0] == EpochEntry(5, 5)
    assert log.delete_records(3) == 5  # never backwards
    log.close()
    text = (tmp_path / "t-0" / files.LOG_START_OFFSET_CHECKPOINT).read_text()
    assert text == "0\n1\nt 0 5\n"
    reopened = make_log(tmp_path / "t-0", {"segment.bytes": TWO})
    assert reopened.log_start_offset == 5


# --- truncation --------------------------------------------------------------------------------


def test_truncate_to_removes_the_tail(tmp_path: Path, make_log: LogFactory) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, {"segment.bytes": TWO, "file.delete.delay.ms": 0})
    for i in range(10):
        log.append_as_leader(batch(1, value_size=100, tag=i), leader_epoch=i // 3)
    log.append_as_leader(idempotent(9, 0, 1, transactional=True), leader_epoch=3)  # 10
    log.append_as_leader(marker(ControlType.ABORT, 9), leader_epoch=3, origin=_coordinator())
    log.update_high_watermark(log.log_end_offset)
    before = read_all(log)
    assert not log.truncate_to(12)
    assert log.truncate_to(5)
    assert log.log_end_offset == 5 == log.high_watermark
    assert segment_bases(log) == [0, 2, 4]
    assert read_all(log) == before[: len(read_all(log))]
    assert [b.base_offset for b in all_batches(log)] == [0, 1, 2, 3, 4]
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries()] == [(0, 0), (1, 3)]
    assert log.producer_state_manager.last_entry(9) is None
    assert not [n for n in file_names(directory) if n.endswith(".txnindex")]
    # The log carries on from the truncation point.
    assert log.append_as_leader(batch(1), leader_epoch=4).first_offset == 5


def test_truncate_fully_and_start_at(tmp_path: Path, make_log: LogFactory) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, {"segment.bytes": TWO, "file.delete.delay.ms": 0})
    for i in range(6):
        log.append_as_leader(idempotent(1, i, value_size=100), leader_epoch=1)
    log.truncate_fully_and_start_at(100)
    assert segment_bases(log) == [100]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert log.leader_epoch_cache.entries() == []
    assert log.producer_state_manager.last_entry(1) is None
    assert log.append_as_leader(batch(1), leader_epoch=2).first_offset == 100
    names = file_names(directory)
    assert files.log_file_name(100) in names and files.log_file_name(0) not in names


def test_uploadable_segments_carry_their_files(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(tmp_path / "t-0", {"segment.bytes": TWO})
    for i in range(7):
        log.append_as_leader(batch(1, value_size=100, tag=i), leader_epoch=i // 2)
    log.update_high_watermark(5)
    (first, second) = log.segments_eligible_for_upload()
    assert (first.base_offset, first.end_offset, second.end_offset) == (0, 1, 3)
    assert first.producer_snapshot == tmp_path / "t-0" / "00000000000000000002.snapshot"
    assert first.producer_snapshot.exists()
    assert second.leader_epochs == (EpochEntry(1, 2),)
    assert LeaderEpochCheckpointFile.decode(second.leader_epoch_checkpoint) == [EpochEntry(1, 2)]
    data = first.to_log_segment_data()
    assert data.log_segment.read_bytes() == read_all(log)[: first.size_in_bytes]
    assert data.offset_index.exists() and data.time_index.exists()
    assert data.transaction_index is None


def _coordinator() -> object:
    from tierlog.log import AppendOrigin

    return AppendOrigin.COORDINATOR


def test_isolation_levels_share_one_read_path(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(tmp_path / "t-0")
    log.append_as_leader(batch(2), leader_epoch=0)
    log.update_high_watermark(2)
    for isolation in FetchIsolation:
        assert [b.base_offset for b in batches_of(log.read(0, 100, isolation).records)] == [0]
