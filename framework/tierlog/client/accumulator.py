"""The producer's record accumulator: records wait here, batched per partition, for the sender.

A batch is sent when it is full (``batch.size``), when it has waited ``linger.ms``, or at once on
``flush`` and ``close``. Each partition has at most one batch in flight: the next one waits until
the broker has answered the one before, so a retry can never overtake or be overtaken by a later
batch and sequence numbers stay in order on the broker without relying on its reordering window.
The batch keeps its bytes once built, so every retry sends exactly what the first attempt sent
and the broker recognises it as a duplicate when the first attempt was in fact appended.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future

import attrs

from ..model import TopicPartition
from ..records import HEADER_SIZE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from .records import RecordMetadata

HeaderPairs = tuple[tuple[str, bytes | None], ...]

#: The most a record's framing can add to its key, value and headers: length, attributes,
#: timestamp delta and offset delta varints, plus the key, value and header-count varints.
_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5


def estimate_record_size(key: bytes | None, value: bytes | None, headers: HeaderPairs) -> int:
    """An upper bound of a record's size inside a batch, as Kafka's producer estimates it."""
    size = _RECORD_OVERHEAD + len(key or b"") + len(value or b"")
    for name, header_value in headers:
        size += 10 + len(name.encode("utf-8")) + len(header_value or b"")
    return size


@attrs.define(eq=False)
class PendingRecord:
    """A record handed to ``send`` and the future its caller waits on."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: HeaderPairs
    future: Future[RecordMetadata]


@attrs.define(eq=False)
class ProducerBatch:
    """The records of one partition that travel together, and their delivery state."""

    tp: TopicPartition
    created: float
    deadline: float
    records: list[PendingRecord] = attrs.field(factory=list)
    size: int = HEADER_SIZE
    closed: bool = False
    attempts: int = 0
    retry_at: float = 0.0
    #: The batch as sent; fixed at the first attempt so that retries are byte-identical.
    payload: bytes | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    #: The error of the latest failed attempt, reported as the cause if the batch expires.
    last_error: BaseException | None = None

    def __len__(self) -> int:
        return len(self.records)


class RecordAccumulator:
    """Per-partition queues of batches, and the rules for when a batch is ready to send.

    All methods are thread-safe; ``condition`` wakes the sender when something changed.
    """

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        delivery_timeout_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._batch_size = batch_size
        self._linger = linger_ms / 1000
        self._delivery_timeout = delivery_timeout_ms / 1000
        self._clock = clock
        self.condition = threading.Condition()
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._in_flight: set[TopicPartition] = set()
        self._flushing = 0
        self._closing = False

    def append(self, tp: TopicPartition, record: PendingRecord) -> bool:
        """Queues ``record``; True when it started a new batch (the previous one closed)."""
        size = estimate_record_size(record.key, record.value, record.headers)
        with self.condition:
            queue = self._queues.setdefault(tp, deque())
            last = queue[-1] if queue else None
            started = False
            if (
                last is None
                or last.closed
                or (last.records and last.size + size > self._batch_size)
            ):
                if last is not None:
                    last.closed = True
                now = self._clock()
                last = ProducerBatch(tp, now, now + self._delivery_timeout)
                queue.append(last)
                started = True
            last.records.append(record)
            last.size += size
            if last.size >= self._batch_size:
                last.closed = True
            self.condition.notify_all()
            return started

    def ready(self) -> tuple[list[ProducerBatch], float | None]:
        """The batches to send now (marked in flight), and how long until another may be.

        A partition's head batch is ready when it is closed (full, or followed by another),
        lingered long enough, due for a retry, or when a flush or close is under way.
        """
        now = self._clock()
        ready: list[ProducerBatch] = []
        wait: float | None = None
        with self.condition:
            hurry = self._flushing > 0 or self._closing
            for tp, queue in self._queues.items():
                if not queue or tp in self._in_flight:
                    continue
                head = queue[0]
                if head.attempts or head.closed or len(queue) > 1 or hurry:
                    due = head.retry_at
                else:
                    due = max(head.created + self._linger, head.retry_at)
                due = min(due, head.deadline)
                if due <= now:
                    self._in_flight.add(tp)
                    head.closed = True
                    ready.append(head)
                else:
                    wait = due - now if wait is None else min(wait, due - now)
            return ready, wait

    def retry_later(self, batch: ProducerBatch, delay_s: float) -> None:
        """Puts ``batch`` back at the head of its partition, due again after ``delay_s``."""
        with self.condition:
            batch.retry_at = self._clock() + delay_s
            self._in_flight.discard(batch.tp)
            self.condition.notify_all()

    def done(self, batch: ProducerBatch) -> None:
        """Removes a completed (delivered or failed) batch, letting its partition move on."""
        with self.condition:
            queue = self._queues.get(batch.tp)
            if queue and queue[0] is batch:
                queue.popleft()
                if not queue:
                    del self._queues[batch.tp]
            self._in_flight.discard(batch.tp)
            self.condition.notify_all()

    def batches(self) -> Iterator[ProducerBatch]:
        """Every batch not yet completed (a snapshot)."""
        with self.condition:
            snapshot = [batch for queue in self._queues.values() for batch in queue]
        return iter(snapshot)

    def futures(self) -> list[Future[RecordMetadata]]:
        """The futures of every record not yet completed."""
        return [record.future for batch in self.batches() for record in batch.records]

    def is_empty(self) -> bool:
        with self.condition:
            return not self._queues

    def begin_flush(self) -> None:
        with self.condition:
            self._flushing += 1
            self.condition.notify_all()

    def end_flush(self) -> None:
        with self.condition:
            self._flushing -= 1

    def begin_close(self) -> None:
        with self.condition:
            self._closing = True
            self.condition.notify_all()

    def drain_all(self) -> list[ProducerBatch]:
        """Takes every batch out, for failing them when the producer is closed by force."""
        with self.condition:
            batches = [batch for queue in self._queues.values() for batch in queue]
            self._queues.clear()
            self._in_flight.clear()
            self.condition.notify_all()
            return batches


def complete_batch(batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
    """Completes every record future of ``batch`` with its offset (-1 when unknown)."""
    for index, record in enumerate(batch.records):
        offset = base_offset + index if base_offset >= 0 else -1
        timestamp = log_append_time if log_append_time >= 0 else record.timestamp
        metadata = RecordMetadata(
            batch.tp.topic,
            batch.tp.partition,
            offset,
            timestamp,
            -1 if record.key is None else len(record.key),
            -1 if record.value is None else len(record.value),
        )
        if not record.future.done():
            record.future.set_result(metadata)


def fail_batch(batch: ProducerBatch, error: BaseException) -> None:
    """Fails every record future of ``batch`` with ``error``."""
    fail_records(batch.records, error)


def fail_records(records: Iterable[PendingRecord], error: BaseException) -> None:
    for record in records:
        if not record.future.done():
            record.future.set_exception(error)
