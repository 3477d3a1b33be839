"""The cleaner and producers: aborted data goes, committed data is compacted like any other,
markers stay while their transaction has data and until their delete horizon, the last stable
offset bounds a round, and producer state survives the batches compaction removes."""

from __future__ import annotations

from pathlib import Path

from tierlog.log import AppendOrigin, FetchIsolation, PartitionLog
from tierlog.records import ControlType, RecordBatch

from .cleaner_support import COMPACTED, cleaner_for, entries, keyed
from .conftest import LogFactory
from .support import Clock, all_batches, marker

RETENTION = 1000


def _markers(log: PartitionLog) -> list[tuple[int, int]]:
    """(producer id, control type) of every marker in the log."""
    found = []
    for batch in all_batches(log):
        if batch.is_control:
            for record in batch.records():
                assert record.key is not None
                found.append((batch.producer_id, int.from_bytes(record.key[2:4], "big")))
    return found


def _txn(log: PartitionLog, producer_id: int, sequence: int, pairs: list, epoch: int = 0) -> int:  # type: ignore[type-arg]
    info = log.append_as_leader(
        keyed(
            pairs,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
            transactional=True,
        ),
        0,
    )
    return info.first_offset


def _end(log: PartitionLog, producer_id: int, control: ControlType) -> None:
    log.append_as_leader(marker(control, producer_id), 0, AppendOrigin.COORDINATOR)
    log.update_high_watermark(log.log_end_offset)


def test_aborted_data_goes_committed_stays_and_spent_markers_go_after_their_horizon(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    log = make_log(tmp_path / "t-0", COMPACTED, clock)
    _txn(log, 7, 0, [(b"a", b"committed-a"), (b"b", b"committed-b")])
    _end(log, 7, ControlType.COMMIT)
    _txn(log, 8, 0, [(b"a", b"aborted-a"), (b"c", b"aborted-c")])
    _end(log, 8, ControlType.ABORT)
    # Producer 8 carries on, so the aborted batch is not its last.
    _txn(log, 8, 2, [(b"d", b"committed-d")])
    _end(log, 8, ControlType.COMMIT)
    log.append_as_leader(keyed([(b"a", b"plain-a")]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    cleaner = cleaner_for(lambda: [log], clock)
    assert cleaner.clean_once()
    kept = [(key, value) for _, key, value in entries(log)]
    assert kept == [(b"b", b"committed-b"), (b"d", b"committed-d"), (b"a", b"plain-a")]
    # Every marker is still there: the ABORT one's data was only just removed.
    assert _markers(log) == [(7, 1), (8, 0), (8, 1)]
    committed = log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert {txn.producer_id for txn in committed.aborted_transactions or ()} == {8}
    # As in Kafka, the next round (new data makes the log dirty) finds the ABORT marker with
    # no data left and gives it a delete horizon; the round after the horizon drops it.
    log.append_as_leader(keyed([(b"z", b"later")]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    assert cleaner.clean_once()
    assert _markers(log) == [(7, 1), (8, 0), (8, 1)]
    clock.advance(RETENTION)
    assert cleaner.clean_once()
    # The COMMIT markers stay: their transactions still have data.
    assert _markers(log) == [(7, 1), (8, 1)]
    assert [(key, value) for _, key, value in entries(log)] == [*kept, (b"z", b"later")]


def test_a_round_stops_at_the_last_stable_offset(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    log = make_log(tmp_path / "t-0", COMPACTED, clock)
    log.append_as_leader(keyed([(b"x", b"old")]), 0)
    open_at = _txn(log, 9, 0, [(b"y", b"open")])
    log.append_as_leader(keyed([(b"x", b"new")]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    assert log.last_stable_offset == open_at
    cleaner = cleaner_for(lambda: [log], clock)
    cleaner.clean_once()
    assert (log.cleaner_checkpoint or 0) <= open_at
    assert [value for _, _, value in entries(log)] == [b"old", b"open", b"new"]
    _end(log, 9, ControlType.COMMIT)
    log.roll()
    assert cleaner.clean_once()
    assert [value for _, _, value in entries(log)] == [b"open", b"new"]


def test_producer_state_survives_compaction_and_a_restart(
    tmp_path: Path, make_log: LogFactory
) -> None:
    clock = Clock()
    directory = tmp_path / "t-0"
    log = make_log(directory, COMPACTED, clock)
    for sequence in range(6):
        log.append_as_leader(
            keyed(
                [(b"same", f"v{sequence}".encode())],
                producer_id=5,
                producer_epoch=0,
                base_sequence=sequence,
            ),
            0,
        )
    # Another producer overwrites the key, so producer 5's last batch has nothing to keep.
    log.append_as_leader(keyed([(b"same", b"other")]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    cleaner_for(lambda: [log], clock).clean_once()
    batches = [b for b in all_batches(log) if b.producer_id == 5]
    # Only producer 5's last batch is left, emptied: it holds the last sequence.
    assert [(b.base_sequence, b.records_count) for b in batches] == [(5, 0)]
    assert entries(log) == [(6, b"same", b"other")]
    # A follower copying the cleaned log takes the emptied batch and the producer with it.
    follower = make_log(tmp_path / "follower" / "t-0", COMPACTED, clock)
    follower.append_as_follower(log.read(0, 1 << 20).records)
    assert entries(follower) == entries(log)
    last = follower.producer_state_manager.last_entry(5)
    assert last is not None and last.last_seq == 5
    log.close()
    reopened = PartitionLog.open(directory, COMPACTED, clock=clock)
    try:
        retry = keyed([(b"same", b"v5")], producer_id=5, producer_epoch=0, base_sequence=5)
        assert reopened.append_as_leader(retry, 0).duplicate
        following = keyed([(b"same", b"v6")], producer_id=5, producer_epoch=0, base_sequence=6)
        assert not reopened.append_as_leader(following, 0).duplicate
    finally:
        reopened.close()


def test_an_emptied_batch_is_a_valid_batch(tmp_path: Path, make_log: LogFactory) -> None:
    clock = Clock()
    log = make_log(tmp_path / "t-0", COMPACTED, clock)
    log.append_as_leader(
        keyed([(b"k", b"1"), (b"j", b"1")], producer_id=3, producer_epoch=1, base_sequence=0), 0
    )
    log.append_as_leader(keyed([(b"k", b"2"), (b"j", b"2")]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    cleaner_for(lambda: [log], clock).clean_once()
    empty: RecordBatch = all_batches(log)[0]
    empty.validate()
    assert (empty.base_offset, empty.last_offset, empty.records_count) == (0, 1, 0)
    assert (empty.producer_id, empty.producer_epoch, empty.last_sequence) == (3, 1, 1)
    assert list(empty.records()) == []
