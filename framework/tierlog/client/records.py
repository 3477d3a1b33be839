"""What the client hands back: delivered-record metadata, consumed records, and the
read_committed filter that decides which fetched batches a consumer may see.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

import attrs

from ..model import TopicPartition
from ..records import ControlType, Header, RecordBatch, TimestampType, control_type_id
from ..server.protocol import AbortedTransaction


@attrs.frozen
class RecordMetadata:
    """Where a produced record landed (Kafka's ``RecordMetadata``).

    ``offset`` is -1 when ``acks=0``: the producer never learns it.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@attrs.frozen
class ConsumerRecord:
    """One record as ``Consumer.poll`` returns it (Kafka's ``ConsumerRecord``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    #: The leader epoch of the batch, or None when the batch carries none.
    leader_epoch: int | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def visible_batches(
    batches: Iterable[RecordBatch],
    aborted: Iterable[AbortedTransaction] | None,
    *,
    read_committed: bool,
) -> Iterator[RecordBatch]:
    """The data batches a consumer may return, in order; control batches are never returned."""
    for batch, visible in classify_batches(batches, aborted, read_committed=read_committed):
        if visible:
            yield batch


def classify_batches(
    batches: Iterable[RecordBatch],
    aborted: Iterable[AbortedTransaction] | None,
    *,
    read_committed: bool,
) -> Iterator[tuple[RecordBatch, bool]]:
    """Every batch with whether a consumer may return its records.

    Control batches are never visible. With ``read_committed``, a transactional batch is not
    visible while its producer has an aborted transaction open: as Kafka's consumer does, the
    fetch response's aborted list is walked in offset order, opening a producer's abort when a
    batch reaches that transaction's first offset and closing it at the producer's ABORT marker.
    The broker caps read_committed fetches at the last stable offset, so an open transaction is
    never fetched. Invisible batches are still yielded so the consumer can move past them.
    """
    pending = [(txn.first_offset, txn.producer_id) for txn in aborted or ()]
    heapq.heapify(pending)
    aborting: set[int] = set()
    for batch in batches:
        if read_committed and batch.has_producer_id:
            while pending and pending[0][0] <= batch.last_offset:
                aborting.add(heapq.heappop(pending)[1])
            if batch.is_control:
                if _is_abort_marker(batch):
                    aborting.discard(batch.producer_id)
                yield batch, False
                continue
            if batch.is_transactional and batch.producer_id in aborting:
                yield batch, False
                continue
        yield batch, not batch.is_control


def _is_abort_marker(batch: RecordBatch) -> bool:
    for record in batch.records():
        return control_type_id(record) == ControlType.ABORT
    return False
