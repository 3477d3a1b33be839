"""Idempotent and transactional producers through ``PartitionLog``; leader epochs."""

from __future__ import annotations

from pathlib import Path

import pytest
from tierlog.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from tierlog.log import (
    AbortedTxn,
    AppendOrigin,
    FetchIsolation,
    PartitionLog,
    TransactionIndex,
    files,
)
from tierlog.records import ControlType

from .conftest import LogFactory
from .support import batch, batches_of, file_names, idempotent, marker, read_all

COORDINATOR = AppendOrigin.COORDINATOR


@pytest.fixture
def log(tmp_path: Path, make_log: LogFactory) -> PartitionLog:
    return make_log(tmp_path / "t-0")


def test_a_retried_batch_is_answered_with_its_original_offsets(log: PartitionLog) -> None:
    first = log.append_as_leader(idempotent(7, 0, 3), leader_epoch=0)
    log.append_as_leader(batch(2), leader_epoch=0)
    second = log.append_as_leader(idempotent(7, 3, 2), leader_epoch=0)
    before = read_all(log)
    retry = log.append_as_leader(idempotent(7, 0, 3), leader_epoch=0)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    retry = log.append_as_leader(idempotent(7, 3, 2), leader_epoch=0)
    assert (retry.first_offset, retry.last_offset) == (5, 6) == (second.first_offset, 6)
    assert read_all(log) == before
    assert log.log_end_offset == 7


def test_out_of_order_sequence_is_rejected_without_side_effects(log: PartitionLog) -> None:
    log.append_as_leader(idempotent(7, 0, 3), leader_epoch=0)
    before, end = read_all(log), log.log_end_offset
    with pytest.raises(OutOfOrderSequenceError, match="5 \\(incoming\\), 2"):
        log.append_as_leader(idempotent(7, 5), leader_epoch=0)
    assert read_all(log) == before and log.log_end_offset == end
    # The producer continues where it really was.
    assert log.append_as_leader(idempotent(7, 3), leader_epoch=0).first_offset == end


def test_fenced_producer_epoch_is_rejected_without_side_effects(log: PartitionLog) -> None:
    log.append_as_leader(idempotent(7, 0, epoch=1), leader_epoch=0)
    log.append_as_leader(idempotent(7, 0, epoch=2), leader_epoch=0)
    before = read_all(log)
    with pytest.raises(InvalidProducerEpochError, match="epoch 1 of producer 7"):
        log.append_as_leader(idempotent(7, 1, epoch=1), leader_epoch=0)
    assert read_all(log) == before
    entry = log.producer_state_manager.last_entry(7)
    assert entry is not None and entry.producer_epoch == 2 and entry.last_seq == 0


def test_a_rejected_batch_in_a_multi_batch_append_writes_nothing(log: PartitionLog) -> None:
    log.append_as_leader(idempotent(7, 0), leader_epoch=0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent(8, 0) + idempotent(7, 9), leader_epoch=0)
    assert log.log_end_offset == 1
    assert log.producer_state_manager.last_entry(8) is None


def test_commit_and_abort_markers_and_the_lso(log: PartitionLog) -> None:
    log.append_as_leader(batch(2), leader_epoch=0)  # 0-1
    t1 = log.append_as_leader(idempotent(1, 0, 2, transactional=True), leader_epoch=0)  # 2-3
    t2 = log.append_as_leader(idempotent(2, 0, 2, transactional=True), leader_epoch=0)  # 4-5
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset == t1.first_offset == 2
    assert log.last_stable_offset == 2
    abort = log.append_as_leader(marker(ControlType.ABORT, 1), 0, COORDINATOR)  # 6
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == t2.first_offset == 4
    commit = log.append_as_leader(marker(ControlType.COMMIT, 2), 0, COORDINATOR)  # 7
    assert log.last_stable_offset == 4  # the commit marker is not below the HW yet
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.log_end_offset == 8
    assert (abort.first_offset, commit.first_offset) == (6, 7)
    # Only the aborted transaction is in the segment's .txnindex, in Kafka's 34-byte format.
    index = TransactionIndex(log.directory / files.txn_index_file_name(0), 0)
    assert index.all_aborted() == [AbortedTxn(1, 2, 6, 4)]
    assert (log.directory / files.txn_index_file_name(0)).stat().st_size == 34
    index.close()


def test_read_committed_stops_at_the_lso_and_lists_aborted_txns(log: PartitionLog) -> None:
    log.append_as_leader(idempotent(1, 0, 2, transactional=True), leader_epoch=0)  # 0-1
    log.append_as_leader(batch(1), leader_epoch=0)  # 2
    log.update_high_watermark(log.log_end_offset)
    committed = log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert committed.records == b"" and committed.aborted_transactions == ()
    log.append_as_leader(marker(ControlType.ABORT, 1), 0, COORDINATOR)  # 3
    log.append_as_leader(idempotent(2, 0, 1, transactional=True), leader_epoch=0)  # 4
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 4
    committed = log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert [b.base_offset for b in batches_of(committed.records)] == [0, 2, 3]
    assert committed.aborted_transactions == (AbortedTxn(1, 0, 3, 4),)
    assert log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK).aborted_transactions is None
    # A read that ends before the aborted transaction started does not list it.
    later = log.read(4, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert later.records == b"" and later.aborted_transactions == ()


def test_a_non_transactional_write_inside_a_transaction_is_rejected(log: PartitionLog) -> None:
    log.append_as_leader(idempotent(1, 0, transactional=True), leader_epoch=0)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(idempotent(1, 1), leader_epoch=0)
    assert log.log_end_offset == 1


def test_a_zombie_coordinator_marker_is_fenced(log: PartitionLog) -> None:
    log.append_as_leader(idempotent(1, 0, transactional=True), leader_epoch=0)
    log.append_as_leader(marker(ControlType.COMMIT, 1, coordinator_epoch=5), 0, COORDINATOR)
    log.append_as_leader(idempotent(1, 1, transactional=True), leader_epoch=0)
    with pytest.raises(TransactionCoordinatorFencedError, match="coordinator epoch 4"):
        log.append_as_leader(marker(ControlType.ABORT, 1, coordinator_epoch=4), 0, COORDINATOR)
    assert log.log_end_offset == 3


def test_leader_epochs_are_assigned_on_append_and_checkpointed(
    tmp_path: Path, make_log: LogFactory
) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory)
    for epoch in (0, 0, 2, 2, 5):
        log.append_as_leader(batch(2), leader_epoch=epoch)
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries()] == [
        (0, 0),
        (2, 4),
        (5, 8),
    ]
    text = (directory / files.LEADER_EPOCH_CHECKPOINT).read_text()
    assert text == "0\n3\n0 0\n2 4\n5 8\n"
    assert log.end_offset_for_epoch(2) == (2, 8)
    assert log.end_offset_for_epoch(5) == (5, 10)
    assert log.end_offset_for_epoch(3) == (2, 8)
    assert [b.partition_leader_epoch for b in batches_of(read_all(log))] == [0, 0, 2, 2, 5]


def test_producer_state_is_snapshotted_at_roll_and_restored_at_restart(
    tmp_path: Path, make_log: LogFactory
) -> None:
    directory = tmp_path / "t-0"
    log = make_log(directory, {"segment.bytes": 500})
    for seq in range(0, 30, 3):
        log.append_as_leader(idempotent(42, seq, 3, value_size=50), leader_epoch=0)
    log.append_as_leader(idempotent(43, 0, 1, transactional=True), leader_epoch=0)
    bases = [s.base_offset for s in log.segments()]
    assert len(bases) > 2
    snapshots = [n for n in file_names(directory) if n.endswith(".snapshot")]
    # One snapshot per roll, named by the new segment's base offset.
    assert snapshots == [files.offset_prefix(b) + ".snapshot" for b in bases[1:]]
    log.close()
    assert files.offset_prefix(31) + ".snapshot" in file_names(directory)

    reopened = make_log(directory, {"segment.bytes": 500})
    entry = reopened.producer_state_manager.last_entry(42)
    assert entry is not None and entry.last_seq == 29
    assert reopened.first_unstable_offset == 30
    retry = reopened.append_as_leader(idempotent(42, 27, 3, value_size=50), leader_epoch=0)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (27, 29)
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append_as_leader(idempotent(42, 31), leader_epoch=0)
    assert reopened.append_as_leader(idempotent(42, 30), leader_epoch=0).first_offset == 31
