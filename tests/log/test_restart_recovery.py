"""Opening a log again: after a clean shutdown everything is as it was; after an unclean one the
torn tail is cut, indexes are rebuilt and producer state is replayed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tierlog.config import resolve_topic_config
from tierlog.log import AbortedTxn, AppendOrigin, FetchIsolation, PartitionLog, files
from tierlog.log.log_config import LogConfig
from tierlog.log.partition_log import LOADED_INDEX_LIMIT
from tierlog.records import ControlType

from .conftest import LogFactory
from .support import (
    T0,
    all_batches,
    batch,
    batches_of,
    file_names,
    idempotent,
    marker,
    read_all,
    segment_bases,
)

CONFIG = {"segment.bytes": 2000, "index.interval.bytes": 200}


def _populate(log: PartitionLog) -> None:
    for i in range(30):
        log.append_as_leader(batch(2, value_size=60, timestamp=T0 + i, tag=i), leader_epoch=i // 10)
        if i % 7 == 0:
            log.append_as_leader(idempotent(5, i // 7, value_size=60), leader_epoch=i // 10)
    log.append_as_leader(idempotent(8, 0, 2, transactional=True), leader_epoch=2)
    log.append_as_leader(marker(ControlType.ABORT, 8), 2, AppendOrigin.COORDINATOR)
    log.append_as_leader(idempotent(9, 0, 1, transactional=True), leader_epoch=2)
    log.update_high_watermark(log.log_end_offset)


def _state(log: PartitionLog) -> tuple[object, ...]:
    producers = log.producer_state_manager
    return (
        read_all(log),
        segment_bases(log),
        log.log_start_offset,
        log.log_end_offset,
        log.high_watermark,
        log.last_stable_offset,
        log.leader_epoch_cache.entries(),
        {pid: (e.producer_epoch, e.last_seq) for pid, e in producers.active_producers().items()},
        producers.ongoing_transactions(),
        log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED).aborted_transactions,
        log.offset_for_timestamp(T0 + 17),
    )


def test_clean_restart_preserves_everything(tmp_path: Path, make_log: LogFactory) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, CONFIG)
    _populate(log)
    before = _state(log)
    log.close()
    assert files.CLEAN_SHUTDOWN_MARKER in file_names(directory)
    reopened = make_log(directory, CONFIG)
    assert files.CLEAN_SHUTDOWN_MARKER not in file_names(directory)
    assert _state(reopened) == before
    assert reopened.recovery_point == reopened.log_end_offset
    assert reopened.producer_state_manager.last_entry(9) is not None
    # The producer carries on from where it was, so a retry is still recognised.
    assert reopened.append_as_leader(idempotent(5, 4, value_size=60), leader_epoch=2).duplicate


def _unclean(directory: Path) -> None:
    """What a crash leaves: no clean-shutdown marker (the log was closed to release files)."""
    (directory / files.CLEAN_SHUTDOWN_MARKER).unlink()
    (directory / files.RECOVERY_POINT_CHECKPOINT).unlink()


def test_unclean_restart_rebuilds_the_same_state(tmp_path: Path, make_log: LogFactory) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, CONFIG)
    _populate(log)
    before = _state(log)
    log.close()
    _unclean(directory)
    for name in file_names(directory):
        if name.endswith((".index", ".timeindex", ".snapshot", ".txnindex")):
            (directory / name).unlink()
    reopened = make_log(directory, CONFIG)
    assert _state(reopened) == before
    for base in segment_bases(reopened):
        assert (directory / files.offset_index_file_name(base)).exists()


@pytest.mark.parametrize("cut", [1, 12, 60, 61, 100])
def test_a_torn_tail_is_cut_at_the_last_whole_batch(
    tmp_path: Path, make_log: LogFactory, cut: int
) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, CONFIG)
    _populate(log)
    last = all_batches(log)[-1]
    log.append_as_leader(batch(3, value_size=80), leader_epoch=2)
    data = read_all(log)
    active = directory / files.log_file_name(segment_bases(log)[-1])
    log.close()
    _unclean(directory)
    size = active.stat().st_size
    os.truncate(active, size - cut)
    reopened = make_log(directory, CONFIG)
    assert reopened.log_end_offset == last.next_offset
    assert read_all(reopened) == data[: len(read_all(reopened))]
    assert all_batches(reopened)[-1].base_offset == last.base_offset
    assert reopened.append_as_leader(batch(1), leader_epoch=2).first_offset == last.next_offset


def test_garbage_after_the_tail_and_in_the_middle_is_cut(
    tmp_path: Path, make_log: LogFactory
) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, CONFIG)
    _populate(log)
    bases = segment_bases(log)
    keep = all_batches(log, bases[2])
    log.close()
    _unclean(directory)
    victim = directory / files.log_file_name(bases[2])
    raw = bytearray(victim.read_bytes())
    second = keep[0].size_in_bytes
    raw[second + 30] ^= 0x55  # inside the second batch of the third segment: CRC mismatch
    victim.write_bytes(bytes(raw))
    reopened = make_log(directory, CONFIG)
    # Everything from the corrupt batch on is gone, including the later segments.
    assert segment_bases(reopened) == bases[:3]
    assert reopened.log_end_offset == keep[0].next_offset
    for batch_ in all_batches(reopened):
        batch_.validate()
    assert not [n for n in file_names(directory) if n.startswith(files.offset_prefix(bases[3]))]


def test_aborted_transactions_are_recovered_into_the_txn_index(
    tmp_path: Path, make_log: LogFactory
) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, CONFIG)
    log.append_as_leader(idempotent(3, 0, 2, transactional=True), leader_epoch=0)
    log.append_as_leader(batch(1), leader_epoch=0)
    log.append_as_leader(marker(ControlType.ABORT, 3), 0, AppendOrigin.COORDINATOR)
    log.close()
    _unclean(directory)
    (directory / files.txn_index_file_name(0)).unlink()
    reopened = make_log(directory, CONFIG)
    reopened.update_high_watermark(reopened.log_end_offset)
    info = reopened.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert info.aborted_transactions == (AbortedTxn(3, 0, 3, 4),)
    assert (directory / files.txn_index_file_name(0)).stat().st_size == 34


def test_a_corrupt_index_is_rebuilt_even_after_a_clean_shutdown(
    tmp_path: Path, make_log: LogFactory
) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, CONFIG)
    _populate(log)
    before = _state(log)
    log.close()
    index = directory / files.offset_index_file_name(0)
    index.write_bytes(index.read_bytes()[:-3])  # not a multiple of 8
    reopened = make_log(directory, CONFIG)
    assert _state(reopened) == before
    assert index.stat().st_size % 8 == 0 and index.stat().st_size > 0


def test_leftover_files_are_removed(tmp_path: Path, make_log: LogFactory) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, CONFIG)
    log.append_as_leader(batch(1), leader_epoch=0)
    log.close()
    for name in (
        files.log_file_name(500) + files.DELETED_SUFFIX,
        files.log_file_name(600) + files.CLEANED_SUFFIX,
        files.log_file_name(700) + files.SWAP_SUFFIX,
        files.offset_index_file_name(900),
        "leader-epoch-checkpoint.tmp",
    ):
        (directory / name).write_bytes(b"junk")
    reopened = make_log(directory, CONFIG)
    assert segment_bases(reopened) == [0]
    assert file_names(directory) == sorted(
        [
            files.log_file_name(0),
            files.offset_index_file_name(0),
            files.time_index_file_name(0),
            files.LEADER_EPOCH_CHECKPOINT,
            files.RECOVERY_POINT_CHECKPOINT,
            files.LOG_START_OFFSET_CHECKPOINT,
            "replication-offset-checkpoint",
            files.offset_prefix(1) + ".snapshot",
        ]
    )


def test_reads_see_nothing_beyond_what_was_recovered(tmp_path: Path, make_log: LogFactory) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, CONFIG)
    for i in range(5):
        log.append_as_leader(batch(2, tag=i), leader_epoch=0)
    log.close()
    _unclean(directory)
    with open(directory / files.log_file_name(0), "ab") as file:
        file.write(batch(2)[:40])
    reopened = make_log(directory, CONFIG)
    assert [b.base_offset for b in batches_of(read_all(reopened))] == [0, 2, 4, 6, 8]


def test_the_largest_timestamp_is_exact_after_a_restart(
    tmp_path: Path, make_log: LogFactory
) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, {"index.interval.bytes": 100_000})  # no index entries at all
    for ts in (T0 + 5, T0 + 50, T0 + 7):
        log.append_as_leader(batch(1, timestamp=ts), leader_epoch=0)
    log.close()
    reopened = make_log(directory, {"index.interval.bytes": 100_000})
    newest = reopened.offset_for_timestamp(-3)
    assert newest is not None and (newest.timestamp, newest.offset) == (T0 + 50, 1)


def test_an_index_found_corrupt_when_loaded_is_rebuilt(
    tmp_path: Path, make_log: LogFactory
) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, CONFIG)
    _populate(log)
    before = _state(log)
    log.close()
    index = directory / files.offset_index_file_name(0)
    entries = bytearray(index.read_bytes())
    assert len(entries) >= 24
    entries[8:16], entries[16:24] = entries[16:24], entries[8:16]  # out of order, right size
    index.write_bytes(bytes(entries))
    reopened = make_log(directory, CONFIG)
    assert _state(reopened) == before
    assert index.read_bytes() != bytes(entries)


def test_only_a_few_rolled_segments_keep_their_indexes_loaded(
    tmp_path: Path, make_log: LogFactory
) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, {"segment.bytes": 300, "index.interval.bytes": 10})
    for i in range(40):
        log.append_as_leader(batch(2, value_size=100, tag=i), leader_epoch=0)
    assert log.segment_count > LOADED_INDEX_LIMIT + 5
    data = read_all(log)
    assert sum(s.indexes_loaded for s in log.segments()) <= LOADED_INDEX_LIMIT + 1
    log.close()
    reopened = make_log(directory, {"segment.bytes": 300, "index.interval.bytes": 10})
    assert [s.indexes_loaded for s in reopened.segments()] == [False] * (
        reopened.segment_count - 1
    ) + [True]
    assert read_all(reopened) == data
    assert sum(s.indexes_loaded for s in reopened.segments()) <= LOADED_INDEX_LIMIT + 1


def test_a_new_log_writes_nothing_to_recover_and_a_crash_right_after_loses_nothing(
    tmp_path: Path, make_log: LogFactory
) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, CONFIG)
    # Creating thousands of replicas must be cheap: no snapshot of an empty state, no
    # checkpoint of a recovery point that is the log start anyway.
    assert not any(name.endswith(".snapshot") for name in file_names(directory))
    assert files.RECOVERY_POINT_CHECKPOINT not in file_names(directory)
    _populate(log)
    before = _state(log)
    # A crash: the files stay as they are, without the clean-shutdown marker.
    log.close()
    _unclean(directory)

    reopened = make_log(directory, CONFIG)

    assert _state(reopened) == before


TIERED = LogConfig.from_topic_config(
    resolve_topic_config(
        {**CONFIG, "remote.storage.enable": True, "local.retention.bytes": 1, "retention.ms": -1},
        {"remote.log.storage.system.enable": True},
    )
)


def _tiered_with_local_start_raised(directory: Path, make_log: LogFactory) -> PartitionLog:
    """A tiered log whose first segments went by local retention, as if tiered already."""
    log = make_log(directory, TIERED)
    _populate(log)
    log.highest_offset_in_remote_storage = log.segments()[2].base_offset - 1
    log.delete_old_segments()
    return log


def test_the_log_start_of_a_log_that_kept_its_checkpoint_never_follows_remote_metadata(
    tmp_path: Path, make_log: LogFactory
) -> None:
    # Remote metadata that has not shown every segment yet must not move the log start past
    # records remote storage holds: only a lost checkpoint is repaired from it.
    log = _tiered_with_local_start_raised(tmp_path / "t-0", make_log)
    assert log.log_start_offset == 0 < log.local_log_start_offset

    log.restore_remote_lineage(log.local_log_start_offset, ())

    assert log.log_start_offset == 0
    assert not log.log_start_lost


def test_a_lost_log_start_checkpoint_is_repaired_from_remote_metadata(
    tmp_path: Path, make_log: LogFactory
) -> None:
    directory = tmp_path / "t-0"
    log = _tiered_with_local_start_raised(directory, make_log)
    local_start = log.local_log_start_offset
    log.close()
    (directory / files.LOG_START_OFFSET_CHECKPOINT).unlink()
    reopened = make_log(directory, TIERED)
    assert reopened.log_start_lost and reopened.log_start_offset == 0

    reopened.restore_remote_lineage(local_start - 5, ())

    assert reopened.log_start_offset == local_start - 5
    assert not reopened.log_start_lost
