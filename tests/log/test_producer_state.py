"""Producer state: idempotence, transactions, snapshots (Kafka's ProducerStateManager)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tierlog.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from tierlog.log.producer_state import (
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerStateEntry,
    ProducerStateManager,
    TxnMetadata,
)
from tierlog.log.snapshot import SnapshotEntry, read_snapshot_file, snapshot_file_name
from tierlog.log.txn_index import AbortedTxn, TransactionIndex
from tierlog.records import (
    NO_SEQUENCE,
    ControlType,
    EndTxnMarker,
    RecordBatch,
    RecordBatchBuilder,
    build_control_batch,
)

PID = 42
NOW = 1_700_000_000_000
INT32_MAX = 2**31 - 1
CLIENT, REPLICATION, COORDINATOR = (
    AppendOrigin.CLIENT,
    AppendOrigin.REPLICATION,
    AppendOrigin.COORDINATOR,
)


@pytest.fixture
def manager(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, producer_id_expiration_ms=60_000)


def data_batch(
    producer_id: int,
    epoch: int,
    sequence: int,
    *,
    count: int = 1,
    transactional: bool = False,
    timestamp: int = NOW,
) -> RecordBatch:
    builder = RecordBatchBuilder(
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
    )
    for i in range(count):
        builder.append(timestamp + i, None, b"v")
    return RecordBatch.parse(builder.build())


def append(
    manager: ProducerStateManager,
    producer_id: int,
    epoch: int,
    sequence: int,
    offset: int,
    *,
    count: int = 1,
    transactional: bool = False,
    origin: AppendOrigin = CLIENT,
    timestamp: int = NOW,
) -> None:
    """What the log does for one data batch written at ``offset``."""
    batch = data_batch(
        producer_id, epoch, sequence, count=count, transactional=transactional, timestamp=timestamp
    )
    info = manager.prepare_update(producer_id, origin)
    info.append_data_batch(batch, offset)
    manager.update(info)
    manager.update_map_end_offset(offset + count)


def end_txn(
    manager: ProducerStateManager,
    producer_id: int,
    epoch: int,
    control_type: ControlType,
    offset: int,
    *,
    coordinator_epoch: int = 0,
    origin: AppendOrigin = COORDINATOR,
    txn_index: TransactionIndex | None = None,
) -> CompletedTxn | None:
    """What the log does for a marker batch written at ``offset``."""
    batch = RecordBatch.parse(
        build_control_batch(
            control_type,
            producer_id=producer_id,
            producer_epoch=epoch,
            timestamp=NOW,
            coordinator_epoch=coordinator_epoch,
        )
    )
    info = manager.prepare_update(producer_id, origin)
    completed = info.append(batch, offset)
    manager.update(info)
    if completed is not None:
        lso = manager.last_stable_offset(completed)
        if completed.is_aborted and txn_index is not None:
            txn_index.append(
                AbortedTxn(
                    completed.producer_id, completed.first_offset, completed.last_offset, lso
                )
            )
        manager.complete_txn(completed)
    manager.update_map_end_offset(offset + 1)
    return completed


def entry(manager: ProducerStateManager, producer_id: int = PID) -> ProducerStateEntry:
    found = manager.last_entry(producer_id)
    assert found is not None
    return found


# --- sequences and epochs ------------------------------------------------------------------------


def test_sequences_must_follow_each_other(manager: ProducerStateManager) -> None:
    append(manager, PID, 0, 0, 0)
    append(manager, PID, 0, 1, 1)
    before = manager.active_producers()
    with pytest.raises(OutOfOrderSequenceError, match="1 \\(incoming\\), 1"):
        append(manager, PID, 0, 1, 2)  # a duplicate not answered from the cache is out of order
    with pytest.raises(OutOfOrderSequenceError):
        append(manager, PID, 0, 5, 2)  # a gap
    assert manager.active_producers() == before
    assert entry(manager).last_seq == 1
    assert entry(manager).last_data_offset == 1


def test_an_older_producer_epoch_is_rejected_and_changes_nothing(
    manager: ProducerStateManager,
) -> None:
    append(manager, PID, 3, 0, 0)
    append(manager, PID, 4, 0, 1)
    before = manager.active_producers()
    with pytest.raises(InvalidProducerEpochError, match="epoch 3 of producer 42 at offset 2"):
        append(manager, PID, 3, 1, 2)
    assert manager.active_producers() == before
    assert entry(manager).producer_epoch == 4


def test_a_new_epoch_must_restart_at_sequence_zero(manager: ProducerStateManager) -> None:
    append(manager, PID, 0, 0, 0, count=3)
    with pytest.raises(OutOfOrderSequenceError, match="a new epoch must start at 0"):
        append(manager, PID, 1, 3, 3)
    append(manager, PID, 1, 0, 3)
    assert (entry(manager).producer_epoch, entry(manager).last_seq) == (1, 0)
    assert len(entry(manager).batch_metadata) == 1  # the older epoch's batches are forgotten


def test_an_unknown_producer_may_start_at_any_sequence(manager: ProducerStateManager) -> None:
    append(manager, PID, 5, 17, 100)  # its earlier records were deleted by retention
    append(manager, PID, 5, 18, 101)
    assert entry(manager).first_seq == 17


def test_sequences_wrap_at_int32_max(manager: ProducerStateManager) -> None:
    append(manager, PID, 2, INT32_MAX, 10, origin=REPLICATION)
    append(manager, PID, 2, 0, 11)
    assert (entry(manager).first_seq, entry(manager).last_seq) == (INT32_MAX, 0)
    with pytest.raises(OutOfOrderSequenceError):
        append(manager, PID, 2, 0, 12)


def test_a_wrap_must_go_to_zero(manager: ProducerStateManager) -> None:
    append(manager, PID, 2, INT32_MAX, 10, origin=REPLICATION)
    with pytest.raises(OutOfOrderSequenceError):
        append(manager, PID, 2, 1, 11)


def test_a_batch_whose_sequences_wrap(manager: ProducerStateManager) -> None:
    append(manager, PID, 2, INT32_MAX - 10, 2000, count=21, origin=REPLICATION)
    assert entry(manager).batch_metadata == (
        BatchMetadata(
            first_seq=INT32_MAX - 10,
            last_seq=9,
            last_offset=2020,
            offset_delta=20,
            timestamp=NOW + 20,
        ),
    )
    assert entry(manager).first_data_offset == 2000
    append(manager, PID, 2, 10, 2021)


def test_replication_trusts_the_leader(
    manager: ProducerStateManager, caplog: pytest.LogCaptureFixture
) -> None:
    append(manager, PID, 1, 0, 0, origin=REPLICATION)
    append(manager, PID, 1, 9, 1, origin=REPLICATION)  # a gap the leader accepted
    with caplog.at_level(logging.WARNING, logger="tierlog.log.producer_state"):
        append(manager, PID, 0, 3, 2, origin=REPLICATION)  # an older epoch is only logged
    assert "older than its last seen epoch 1" in caplog.text
    assert (entry(manager).producer_epoch, entry(manager).last_seq) == (0, 3)


def test_coordinator_appends_check_epochs_but_not_sequences(manager: ProducerStateManager) -> None:
    append(manager, PID, 1, 0, 0, origin=COORDINATOR)
    append(manager, PID, 1, 7, 1, origin=COORDINATOR)
    with pytest.raises(InvalidProducerEpochError):
        append(manager, PID, 0, 8, 2, origin=COORDINATOR)


def test_prepare_update_does_not_change_the_manager(manager: ProducerStateManager) -> None:
    info = manager.prepare_update(PID, CLIENT)
    info.append_data_batch(data_batch(PID, 0, 0, count=6), 15)
    assert manager.last_entry(PID) is None
    manager.update(info)
    info = manager.prepare_update(PID, CLIENT)
    info.append_data_batch(data_batch(PID, 0, 6, count=5), 26)
    assert (entry(manager).last_seq, entry(manager).last_data_offset) == (5, 20)
    manager.update(info)
    assert (entry(manager).first_seq, entry(manager).last_seq) == (0, 10)
    assert entry(manager).last_data_offset == 30


def test_several_batches_in_one_append(manager: ProducerStateManager) -> None:
    append(manager, PID, 0, 0, 0)
    info = manager.prepare_update(PID, CLIENT)
    info.append_data_batch(data_batch(PID, 0, 1, count=2), 1)
    info.append_data_batch(data_batch(PID, 0, 3, count=2), 3)
    with pytest.raises(OutOfOrderSequenceError):  # checked against the batch before it
        info.append_data_batch(data_batch(PID, 0, 3, count=2), 5)
    manager.update(info)
    assert [b.last_offset for b in entry(manager).batch_metadata] == [0, 2, 4]


def test_update_rejects_the_no_producer_id(manager: ProducerStateManager) -> None:
    with pytest.raises(ValueError, match="invalid producer id -1"):
        manager.update(manager.prepare_update(-1, CLIENT))


# --- duplicates -----------------------------------------------------------------------------------


def test_duplicates_are_found_among_the_last_five_batches(manager: ProducerStateManager) -> None:
    for i in range(6):  # batches of 2 records: sequences 0-1, 2-3, ... 10-11 at offsets 0..11
        append(manager, PID, 0, 2 * i, 2 * i, count=2)
    assert manager.find_duplicate_batch(data_batch(PID, 0, 0, count=2)) is None  # evicted
    for i in range(1, 6):
        duplicate = manager.find_duplicate_batch(data_batch(PID, 0, 2 * i, count=2))
        assert duplicate is not None
        assert (duplicate.first_offset, duplicate.last_offset) == (2 * i, 2 * i + 1)
    assert manager.find_duplicate_batch(data_batch(PID, 0, 4, count=1)) is None  # other range
    assert manager.find_duplicate_batch(data_batch(PID, 1, 4, count=2)) is None  # other epoch
    assert manager.find_duplicate_batch(data_batch(PID + 1, 0, 4, count=2)) is None


# --- transactions ---------------------------------------------------------------------------------


def test_a_transaction_holds_back_the_stable_offset_until_replicated(
    manager: ProducerStateManager,
) -> None:
    assert manager.first_unstable_offset() is None
    append(manager, PID, 0, 0, 99, transactional=True)
    append(manager, PID, 0, 1, 100, transactional=True)
    assert entry(manager).current_txn_first_offset == 99
    assert manager.first_unstable_offset() == manager.first_undecided_offset() == 99
    assert manager.ongoing_transactions() == [TxnMetadata(PID, 99)]

    completed = end_txn(manager, PID, 0, ControlType.COMMIT, 101, coordinator_epoch=4)
    assert completed == CompletedTxn(PID, 99, 101, is_aborted=False)
    assert manager.ongoing_transactions() == []
    assert manager.first_undecided_offset() is None
    assert manager.first_unstable_offset() == 99  # the marker is not below the HW yet
    manager.on_high_watermark_updated(101)
    assert manager.first_unstable_offset() == 99
    manager.on_high_watermark_updated(102)
    assert manager.first_unstable_offset() is None
    assert entry(manager).current_txn_first_offset is None
    assert entry(manager).coordinator_epoch == 4
    assert entry(manager).last_seq == 1  # the marker keeps the batches for duplicate checks


def test_a_non_transactional_batch_inside_a_transaction(manager: ProducerStateManager) -> None:
    append(manager, PID, 0, 0, 0, transactional=True)
    before = manager.active_producers()
    with pytest.raises(InvalidTxnStateError, match="transaction from offset 0 is still open"):
        append(manager, PID, 0, 1, 1)
    assert manager.active_producers() == before


def test_an_abort_becomes_an_index_entry_with_the_lso(
    manager: ProducerStateManager, tmp_path: Path
) -> None:
    with TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0) as index:
        append(manager, 1, 0, 0, 10, transactional=True)
        append(manager, 2, 0, 0, 12, transactional=True)
        append(manager, 1, 0, 1, 13, transactional=True)
        aborted = end_txn(manager, 1, 0, ControlType.ABORT, 15, txn_index=index)
        assert aborted == CompletedTxn(1, 10, 15, is_aborted=True)
        assert index.all_aborted() == [AbortedTxn(1, 10, 15, 12)]  # producer 2 is still open
        assert manager.first_undecided_offset() == 12
        committed = end_txn(manager, 2, 0, ControlType.COMMIT, 16, txn_index=index)
        assert committed == CompletedTxn(2, 12, 16, is_aborted=False)
        assert index.all_aborted() == [AbortedTxn(1, 10, 15, 12)]
        assert index.collect_aborted_txns(11, 14).aborted == [AbortedTxn(1, 10, 15, 12)]


def test_the_lso_of_the_last_open_transaction_is_after_its_marker(
    manager: ProducerStateManager,
) -> None:
    append(manager, PID, 0, 0, 5, transactional=True)
    info = manager.prepare_update(PID, COORDINATOR)
    completed = info.append_end_txn_marker(EndTxnMarker(ControlType.ABORT, 0), 0, 8, NOW)
    assert completed is not None
    assert manager.last_stable_offset(completed) == 9


def test_a_marker_without_a_transaction_completes_nothing(manager: ProducerStateManager) -> None:
    assert end_txn(manager, PID, 2, ControlType.COMMIT, 27, coordinator_epoch=1) is None
    state = entry(manager)
    assert (state.producer_epoch, state.last_seq, state.coordinator_epoch) == (2, NO_SEQUENCE, 1)
    # Fencing still works when the marker is all that is known of the producer...
    with pytest.raises(InvalidProducerEpochError):
        append(manager, PID, 0, 0, 28)
    # ...and the producer must restart its sequence.
    with pytest.raises(OutOfOrderSequenceError):
        append(manager, PID, 2, 17, 28)
    append(manager, PID, 2, 0, 28)


def test_a_marker_with_a_bumped_epoch_resets_the_sequence(manager: ProducerStateManager) -> None:
    append(manager, PID, 0, 0, 0, transactional=True)
    append(manager, PID, 0, 1, 1, transactional=True)
    end_txn(manager, PID, 1, ControlType.ABORT, 2)
    state = entry(manager)
    assert (state.producer_epoch, state.first_seq, state.last_seq) == (1, NO_SEQUENCE, NO_SEQUENCE)
    assert state.current_txn_first_offset is None
    with pytest.raises(OutOfOrderSequenceError):
        append(manager, PID, 1, 2, 3, transactional=True)
    with pytest.raises(OutOfOrderSequenceError):
        append(manager, PID, 2, 2, 3, transactional=True)
    append(manager, PID, 1, 0, 3, transactional=True)


def test_a_marker_from_an_older_producer_epoch_is_rejected(manager: ProducerStateManager) -> None:
    append(manager, PID, 3, 0, 0, transactional=True)
    with pytest.raises(InvalidProducerEpochError):
        end_txn(manager, PID, 2, ControlType.COMMIT, 1)
    assert manager.ongoing_transactions() == [TxnMetadata(PID, 0)]


def test_a_zombie_coordinator_is_fenced(manager: ProducerStateManager) -> None:
    append(manager, PID, 0, 0, 0, transactional=True)
    end_txn(manager, PID, 0, ControlType.COMMIT, 1, coordinator_epoch=5)
    append(manager, PID, 0, 1, 2, transactional=True)
    fenced = r"coordinator epoch 4 .* older than .* 5"
    with pytest.raises(TransactionCoordinatorFencedError, match=fenced):
        end_txn(manager, PID, 0, ControlType.ABORT, 3, coordinator_epoch=4)
    assert manager.ongoing_transactions() == [TxnMetadata(PID, 2)]
    # A replica copies whatever the leader accepted.
    completed = end_txn(
        manager, PID, 0, ControlType.ABORT, 3, coordinator_epoch=4, origin=REPLICATION
    )
    assert completed == CompletedTxn(PID, 2, 3, is_aborted=True)


# --- snapshots ------------------------------------------------------------------------------------


def build_mixed_state(manager: ProducerStateManager) -> None:
    append(manager, 1, 0, 0, 0, count=3)
    append(manager, 1, 0, 3, 3, count=2)
    append(manager, 2, 5, 0, 5, transactional=True)
    append(manager, 3, 1, 0, 6, transactional=True)
    end_txn(manager, 3, 1, ControlType.ABORT, 7, coordinator_epoch=9)
    append(manager, 4, 0, 0, 8, transactional=True)


def test_a_snapshot_reloads_to_the_same_state(
    manager: ProducerStateManager, tmp_path: Path
) -> None:
    build_mixed_state(manager)
    path = manager.take_snapshot()
    assert path == tmp_path / "00000000000000000009.snapshot"
    assert manager.latest_snapshot_offset() == manager.oldest_snapshot_offset() == 9
    assert manager.snapshot_file(9) == path
    assert manager.snapshot_file(8) is None
    assert sorted(read_snapshot_file(path), key=lambda e: e.producer_id) == [
        SnapshotEntry(1, 0, 4, 4, 1, NOW + 1, -1, -1),
        SnapshotEntry(2, 5, 0, 5, 0, NOW, -1, 5),
        SnapshotEntry(3, 1, 0, 6, 0, NOW, 9, -1),
        SnapshotEntry(4, 0, 0, 8, 0, NOW, -1, 8),
    ]

    reloaded = ProducerStateManager(tmp_path, producer_id_expiration_ms=60_000)
    reloaded.truncate_and_reload(0, 9, NOW)
    assert reloaded.map_end_offset == 9

    def saved(m: ProducerStateManager) -> dict[int, SnapshotEntry]:
        return {pid: e.to_snapshot_entry() for pid, e in m.active_producers().items()}

    assert saved(reloaded) == saved(manager)
    assert reloaded.ongoing_transactions() == manager.ongoing_transactions()
    assert reloaded.first_unstable_offset() == 5
    # Producer 1 goes on where it left off; its last batch is still recognised as a duplicate.
    assert reloaded.find_duplicate_batch(data_batch(1, 0, 3, count=2)) is not None
    append(reloaded, 1, 0, 5, 9)
    with pytest.raises(OutOfOrderSequenceError):
        append(reloaded, 2, 5, 3, 10, transactional=True)


def test_no_snapshot_when_nothing_moved(manager: ProducerStateManager, tmp_path: Path) -> None:
    assert manager.take_snapshot() is None
    append(manager, PID, 0, 0, 0)
    assert manager.take_snapshot() is not None
    assert manager.take_snapshot() is None
    assert manager.snapshot_offsets() == [1]
    assert [p.name for p in tmp_path.iterdir()] == [snapshot_file_name(1)]


def snapshots_at_each_offset(manager: ProducerStateManager, count: int) -> None:
    for sequence in range(count):
        append(manager, PID, 0, sequence, sequence)
        manager.take_snapshot()


def test_truncate_and_reload_drops_snapshots_out_of_range(manager: ProducerStateManager) -> None:
    snapshots_at_each_offset(manager, 5)
    assert manager.snapshot_offsets() == [1, 2, 3, 4, 5]
    manager.truncate_and_reload(1, 3, NOW)
    assert manager.snapshot_offsets() == [2, 3]
    assert manager.map_end_offset == 3
    assert entry(manager).last_seq == 2  # the state at offset 3; the log replays from there


def test_truncate_and_reload_keeps_the_state_when_the_end_is_unchanged(
    manager: ProducerStateManager,
) -> None:
    snapshots_at_each_offset(manager, 3)
    append(manager, PID, 0, 3, 3)
    manager.truncate_and_reload(2, 4, NOW)
    assert manager.snapshot_offsets() == [3]
    assert entry(manager).last_seq == 3
    assert manager.map_end_offset == 4


def test_a_corrupt_latest_snapshot_falls_back_to_the_previous_one(
    manager: ProducerStateManager, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    snapshots_at_each_offset(manager, 4)
    latest = tmp_path / snapshot_file_name(4)
    data = bytearray(latest.read_bytes())
    data[-1] ^= 0xFF
    latest.write_bytes(bytes(data))

    reloaded = ProducerStateManager(tmp_path, producer_id_expiration_ms=60_000)
    with caplog.at_level(logging.WARNING, logger="tierlog.log.producer_state"):
        reloaded.truncate_and_reload(0, 10, NOW)
    assert "CRC mismatch" in caplog.text and str(latest) in caplog.text
    assert not latest.exists()
    assert reloaded.snapshot_offsets() == [1, 2, 3]
    assert reloaded.map_end_offset == 3  # the caller replays the log from offset 3
    assert entry(reloaded).last_seq == 2


def test_with_every_snapshot_corrupt_the_state_starts_at_the_log_start(
    manager: ProducerStateManager, tmp_path: Path
) -> None:
    snapshots_at_each_offset(manager, 2)
    for path in tmp_path.iterdir():
        path.write_bytes(b"\x00\x01garbage")
    reloaded = ProducerStateManager(tmp_path)
    reloaded.truncate_and_reload(0, 10, NOW)
    assert reloaded.map_end_offset == 0
    assert reloaded.is_empty()
    assert list(tmp_path.iterdir()) == []


def test_expired_producers_are_removed_unless_a_transaction_is_open(
    manager: ProducerStateManager,
) -> None:
    append(manager, 1, 0, 0, 0, timestamp=NOW)
    append(manager, 2, 0, 0, 1, transactional=True, timestamp=NOW)
    append(manager, 3, 0, 0, 2, timestamp=NOW + 30_000)
    manager.remove_expired_producers(NOW + 59_999)
    assert sorted(manager.active_producers()) == [1, 2, 3]
    manager.remove_expired_producers(NOW + 60_000)
    assert sorted(manager.active_producers()) == [2, 3]
    assert manager.producer_id_count == 2
    # An expired producer starts over as an unknown one.
    append(manager, 1, 0, 7, 3)
    assert entry(manager, 1).first_seq == 7


def test_expired_producers_are_not_loaded(manager: ProducerStateManager, tmp_path: Path) -> None:
    append(manager, 1, 0, 0, 0, timestamp=NOW)
    append(manager, 2, 0, 0, 1, timestamp=NOW + 50_000)
    append(manager, 3, 0, 0, 2, transactional=True, timestamp=NOW)
    manager.take_snapshot()
    reloaded = ProducerStateManager(tmp_path, producer_id_expiration_ms=60_000)
    reloaded.truncate_and_reload(0, 3, NOW + 70_000)
    assert sorted(reloaded.active_producers()) == [2, 3]


def test_producers_survive_the_log_start_moving_past_them(
    manager: ProducerStateManager, tmp_path: Path
) -> None:
    append(manager, 1, 0, 0, 0)
    append(manager, 2, 0, 0, 1)
    manager.take_snapshot()
    reloaded = ProducerStateManager(tmp_path)
    reloaded.truncate_and_reload(1, 2, NOW)
    assert sorted(reloaded.active_producers()) == [1, 2]
    assert entry(reloaded, 1).last_data_offset == 0


def test_first_unstable_offset_after_truncation(manager: ProducerStateManager) -> None:
    append(manager, PID, 0, 0, 99, transactional=True)
    manager.take_snapshot()  # at 100, transaction open
    end_txn(manager, PID, 0, ControlType.COMMIT, 105)
    manager.on_high_watermark_updated(106)
    assert manager.first_unstable_offset() is None
    manager.take_snapshot()  # at 106, transaction ended
    append(manager, PID, 0, 1, 106)
    manager.truncate_and_reload(0, 106, NOW)
    assert manager.first_unstable_offset() is None
    manager.truncate_and_reload(0, 100, NOW)
    assert manager.first_unstable_offset() == 99


def test_delete_snapshots_below(manager: ProducerStateManager, tmp_path: Path) -> None:
    snapshots_at_each_offset(manager, 3)
    manager.delete_snapshots_below(3)
    assert manager.snapshot_offsets() == [3]
    assert [p.name for p in tmp_path.iterdir()] == [snapshot_file_name(3)]
    manager.delete_snapshots_below(4)
    assert manager.snapshot_offsets() == []
    assert manager.latest_snapshot_offset() is None and manager.oldest_snapshot_offset() is None


def test_truncate_fully_and_start_at(manager: ProducerStateManager, tmp_path: Path) -> None:
    snapshots_at_each_offset(manager, 2)
    append(manager, PID, 0, 2, 2, transactional=True)
    manager.truncate_fully_and_start_at(50)
    assert list(tmp_path.iterdir()) == []
    assert manager.is_empty() and manager.active_producers() == {}
    assert manager.first_unstable_offset() is None
    assert manager.map_end_offset == 50
    append(manager, PID, 0, 0, 50)
    assert manager.take_snapshot() == tmp_path / snapshot_file_name(51)


def test_a_follower_loads_the_snapshot_of_a_remote_segment(
    manager: ProducerStateManager, tmp_path: Path
) -> None:
    build_mixed_state(manager)
    remote_copy = manager.take_snapshot()
    assert remote_copy is not None
    uploaded = remote_copy.read_bytes()

    follower_dir = tmp_path / "follower"
    follower_dir.mkdir()
    follower = ProducerStateManager(follower_dir)
    append(follower, 77, 0, 0, 0)
    follower.take_snapshot()
    follower.truncate_fully_and_start_at(9)
    (follower_dir / snapshot_file_name(9)).write_bytes(uploaded)
    follower.truncate_fully_and_reload_snapshots()
    follower.truncate_and_reload(0, 9, NOW)
    assert sorted(follower.active_producers()) == [1, 2, 3, 4]
    assert follower.map_end_offset == 9
    assert follower.first_unstable_offset() == 5


def test_remove_stray_snapshots_keeps_the_clean_shutdown_snapshot(
    manager: ProducerStateManager,
) -> None:
    snapshots_at_each_offset(manager, 6)  # snapshots at 1..6
    manager.remove_stray_snapshots([0, 2, 4])
    assert manager.snapshot_offsets() == [2, 4, 6]


def test_remove_stray_snapshots_below_the_last_segment(manager: ProducerStateManager) -> None:
    snapshots_at_each_offset(manager, 3)  # snapshots at 1..3
    manager.remove_stray_snapshots([0, 2, 5])
    assert manager.snapshot_offsets() == [2]


def test_the_manager_finds_existing_snapshots(
    manager: ProducerStateManager, tmp_path: Path
) -> None:
    snapshots_at_each_offset(manager, 2)
    (tmp_path / "00000000000000000001.log").write_bytes(b"")
    assert ProducerStateManager(tmp_path).snapshot_offsets() == [1, 2]
    assert ProducerStateManager(tmp_path / "missing").snapshot_offsets() == []
