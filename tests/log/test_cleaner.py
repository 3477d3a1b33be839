"""The log cleaner on one log: what a round keeps, at which offsets, and how readers see it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tierlog.log import FetchIsolation, PartitionLog, files
from tierlog.log.cleaner import OffsetMap
from tierlog.records import Compression, TimestampType, iter_batches

from .cleaner_support import COMPACTED, cleaner_for, entries, keyed, transient_files
from .conftest import LogFactory
from .support import T0, Clock, all_batches


def _fill(log: PartitionLog, rounds: int, keys: int = 5) -> dict[bytes, tuple[int, bytes]]:
    """``rounds`` values of each of ``keys`` keys, two records a batch; returns the latest."""
    latest: dict[bytes, tuple[int, bytes]] = {}
    for r in range(rounds):
        for k in range(0, keys, 2):
            pairs = [
                (f"k{j}".encode(), f"r{r}-k{j}".encode().ljust(30, b"."))
                for j in range(k, min(k + 2, keys))
            ]
            first = log.append_as_leader(keyed(pairs), 0).first_offset
            for i, (key, value) in enumerate(pairs):
                assert value is not None
                latest[key] = (first + i, value)
    log.update_high_watermark(log.log_end_offset)
    return latest


def test_only_the_latest_record_of_each_key_stays_at_its_offset(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    log = make_log(tmp_path / "c-0", COMPACTED, clock)
    latest = _fill(log, rounds=20)
    log.roll()
    size_before = log.size
    assert cleaner_for(lambda: [log], clock).clean_once()
    kept = entries(log)
    assert kept == sorted((offset, key, value) for key, (offset, value) in latest.items())
    assert log.size < size_before / 5
    assert log.cleaner_checkpoint == log.log_end_offset
    # Offsets are where they were: a log start of 0, an end that did not move.
    assert log.log_start_offset == 0 and log.log_end_offset == 100
    log.close()
    reopened = PartitionLog.open(tmp_path / "c-0", COMPACTED, clock=clock)
    try:
        assert entries(reopened) == kept
        assert reopened.cleaner_checkpoint == 100
        assert transient_files(tmp_path / "c-0") == []
    finally:
        reopened.close()


def test_the_active_segment_is_never_cleaned(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    log = make_log(tmp_path / "c-0", {**COMPACTED, "segment.bytes": 1 << 20}, clock)
    _fill(log, rounds=10)
    assert log.segment_count == 1
    before = entries(log)
    assert not cleaner_for(lambda: [log], clock).clean_once()
    assert entries(log) == before


def test_a_fetch_at_a_cleaned_away_offset_gets_the_next_batch(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    log = make_log(tmp_path / "c-0", COMPACTED, clock)
    latest = _fill(log, rounds=10)
    log.roll()
    cleaner_for(lambda: [log], clock).clean_once()
    survivors = sorted(offset for offset, _ in latest.values())
    for offset in range(0, survivors[-1] + 1):
        info = log.read(offset, 1 << 20, FetchIsolation.HIGH_WATERMARK)
        first = next(iter_batches(info.records))
        records = [r.offset for r in first.records()]
        assert first.last_offset >= offset
        assert min(o for o in survivors if o >= offset) == min(o for o in records if o >= offset)


def test_a_follower_copies_a_cleaned_log_gaps_and_all(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    leader = make_log(tmp_path / "c-0", COMPACTED, clock)
    _fill(leader, rounds=10)
    leader.roll()
    _fill(leader, rounds=1)
    cleaner_for(lambda: [leader], clock).clean_once()
    follower = make_log(tmp_path / "f" / "c-0", COMPACTED, clock)
    offset = 0
    while offset < leader.log_end_offset:
        info = leader.read(offset, 300)
        follower.append_as_follower(info.records)
        offset = info.next_offset
    assert entries(follower) == entries(leader)
    assert follower.log_end_offset == leader.log_end_offset


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD, Compression.LZ4])
def test_rewritten_batches_keep_their_offsets_codec_and_producer_fields(
    tmp_path: Path, make_log: LogFactory, compression: Compression
) -> None:
    clock = Clock()
    log = make_log(tmp_path / "c-0", COMPACTED, clock)
    first = log.append_as_leader(
        keyed(
            [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")],
            compression=compression,
            producer_id=41,
            producer_epoch=2,
            base_sequence=0,
        ),
        0,
    ).first_offset
    log.append_as_leader(keyed([(b"b", b"2")]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    cleaner_for(lambda: [log], clock).clean_once()
    rewritten = all_batches(log)[0]
    assert rewritten.base_offset == first and rewritten.last_offset == first + 2
    assert rewritten.compression is compression
    assert (rewritten.producer_id, rewritten.producer_epoch, rewritten.base_sequence) == (41, 2, 0)
    assert rewritten.last_sequence == 2
    assert [(r.offset, r.key) for r in rewritten.records()] == [(0, b"a"), (2, b"c")]


def test_log_append_time_batches_keep_their_timestamp(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    config = {**COMPACTED, "message.timestamp.type": "LogAppendTime"}
    log = make_log(tmp_path / "c-0", config, clock)
    log.append_as_leader(keyed([(b"a", b"1"), (b"b", b"1")]), 0)
    clock.advance(5)
    log.append_as_leader(keyed([(b"a", b"2")]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    cleaner_for(lambda: [log], clock).clean_once()
    batches = all_batches(log)
    assert batches[0].timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batches[0].max_timestamp == T0
    assert [r.timestamp for r in batches[0].records()] == [T0]
    assert entries(log) == [(1, b"b", b"1"), (2, b"a", b"2")]


def test_tombstones_stay_until_their_delete_horizon(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    log = make_log(tmp_path / "c-0", COMPACTED, clock)
    log.append_as_leader(keyed([(b"a", b"1"), (b"b", b"1")]), 0)
    log.append_as_leader(keyed([(b"a", None)]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    cleaner = cleaner_for(lambda: [log], clock)
    assert cleaner.clean_once()
    assert entries(log) == [(1, b"b", b"1"), (2, b"a", None)]
    tombstone_batch = all_batches(log)[-1]
    assert tombstone_batch.delete_horizon_ms == T0 + COMPACTED["delete.retention.ms"]  # type: ignore[operator]
    clock.advance(999)
    assert not cleaner.clean_once()  # nothing dirty, horizon not reached
    assert entries(log) == [(1, b"b", b"1"), (2, b"a", None)]
    clock.advance(1)
    assert cleaner.clean_once()  # the horizon passed: a round just to drop it
    assert entries(log) == [(1, b"b", b"1")]
    assert log.log_end_offset == 3


def test_a_full_offset_map_cleans_in_several_rounds(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    log = make_log(tmp_path / "c-0", COMPACTED, clock)
    latest = _fill(log, rounds=4, keys=40)
    log.roll()
    # 24 bytes a key at a load factor of 1: room for 30 of the 40 keys.
    cleaner = cleaner_for(
        lambda: [log], clock, dedupe_buffer_size=30 * 24, io_buffer_load_factor=1.0
    )
    assert OffsetMap(30 * 24, 1.0).capacity == 30
    rounds = 0
    while cleaner.clean_once():
        rounds += 1
        assert rounds < 20
    assert rounds > 1
    assert entries(log) == sorted((offset, key, value) for key, (offset, value) in latest.items())


def test_records_without_a_key_are_dropped_as_kafka_does(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    plain = make_log(tmp_path / "c-0", {**COMPACTED, "cleanup.policy": "delete"}, clock)
    plain.append_as_leader(keyed([(b"a", b"1")]), 0)
    from tierlog.records import RecordBatchBuilder

    builder = RecordBatchBuilder()
    builder.append(T0, None, b"keyless")
    plain.append_as_leader(builder.build(), 0)
    plain.update_high_watermark(plain.log_end_offset)
    plain.roll()
    plain.update_config({**COMPACTED})
    assert cleaner_for(lambda: [plain], clock).clean_once()
    assert entries(plain) == [(0, b"a", b"1")]


def test_compact_alone_keeps_old_segments_that_compact_delete_removes(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    for policy, survives in (("compact", True), ("compact,delete", False)):
        log = make_log(
            tmp_path / f"{policy.replace(',', '_')}-0",
            {**COMPACTED, "cleanup.policy": policy, "retention.ms": 1000},
            clock,
        )
        _fill(log, rounds=5)
        log.roll()
        clock.advance(10_000)
        deleted = log.delete_old_segments()
        assert (deleted == 0) is survives
        assert (log.log_start_offset == 0) is survives


def test_leftover_cleaned_files_are_removed_at_open(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    directory = tmp_path / "c-0"
    log = make_log(directory, COMPACTED, clock)
    _fill(log, rounds=5)
    log.close()
    (directory / (files.log_file_name(0) + files.CLEANED_SUFFIX)).write_bytes(b"half")
    (directory / (files.offset_index_file_name(0) + files.SWAP_SUFFIX)).write_bytes(b"")
    reopened = make_log(directory, COMPACTED, clock)
    assert transient_files(directory) == []
    assert len(entries(reopened)) == 25
