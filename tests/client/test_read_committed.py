"""read_committed filtering over fetched batches built here as a broker stores them."""

from __future__ import annotations

from tierlog.client.records import visible_batches
from tierlog.records import (
    ControlType,
    RecordBatchBuilder,
    build_control_batch,
    iter_batches,
)
from tierlog.server.protocol import AbortedTransaction


def _txn_batch(base_offset: int, producer_id: int, sequence: int, *values: bytes) -> bytes:
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        is_transactional=True,
    )
    for value in values:
        builder.append(1000, None, value)
    return builder.build()


def _plain_batch(base_offset: int, *values: bytes) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset)
    for value in values:
        builder.append(1000, None, value)
    return builder.build()


def _marker(control: ControlType, offset: int, producer_id: int) -> bytes:
    return build_control_batch(
        control, producer_id=producer_id, producer_epoch=0, timestamp=1000, base_offset=offset
    )


# Offsets: 0-1 aborted txn of 7, 2-3 committed txn of 8 interleaved, 4 plain, 5 ABORT(7),
# 6 COMMIT(8), 7 a later committed txn of 7 that must not be dropped, 8 COMMIT(7).
LOG = b"".join(
    [
        _txn_batch(0, 7, 0, b"a0", b"a1"),
        _txn_batch(2, 8, 0, b"c2", b"c3"),
        _plain_batch(4, b"p4"),
        _marker(ControlType.ABORT, 5, 7),
        _marker(ControlType.COMMIT, 6, 8),
        _txn_batch(7, 7, 2, b"c7"),
        _marker(ControlType.COMMIT, 8, 7),
    ]
)
ABORTED = [AbortedTransaction(producer_id=7, first_offset=0)]


def _values(read_committed: bool, aborted: list[AbortedTransaction] | None) -> list[bytes | None]:
    return [
        record.value
        for batch in visible_batches(iter_batches(LOG), aborted, read_committed=read_committed)
        for record in batch.records()
    ]


def test_read_committed_drops_aborted_records_and_markers() -> None:
    assert _values(True, ABORTED) == [b"c2", b"c3", b"p4", b"c7"]


def test_read_uncommitted_keeps_aborted_records_but_never_markers() -> None:
    assert _values(False, ABORTED) == [b"a0", b"a1", b"c2", b"c3", b"p4", b"c7"]


def test_without_aborted_transactions_everything_is_committed() -> None:
    assert _values(True, None) == [b"a0", b"a1", b"c2", b"c3", b"p4", b"c7"]


def test_an_abort_listed_after_the_fetched_range_drops_nothing() -> None:
    later = [AbortedTransaction(producer_id=7, first_offset=100)]
    assert _values(True, later) == [b"a0", b"a1", b"c2", b"c3", b"p4", b"c7"]
