"""The producer: ``send`` returns a future; a sender thread batches, delivers and retries.

Semantics follow Kafka's Java producer. Records are batched per partition (``batch.size``,
``linger.ms``) and compressed per batch (``compression.type``). Retriable errors are retried with
exponential backoff until ``delivery.timeout.ms``; any other error fails the batch's futures with
the tierlog error for the broker's code.

Idempotence (on by default) makes retries safe: every batch carries the producer id, epoch and a
per-partition sequence number, and a retry resends the very same bytes, so a broker that had
already appended the first attempt answers with the original offsets instead of writing the
records twice. The sender thread asks a broker for the producer id and epoch (InitProducerId)
before it builds the first batch, retrying retriable errors with backoff, so no two producers of
a cluster share an id. When a batch that took a sequence number fails for good, the producer
bumps its epoch, which restarts every partition's sequence at 0 (as Kafka's idempotent producer
does since KIP-360) so the gap it leaves can never stall later batches; once the epoch is
spent it asks for a new id, naming the one it had.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import Any

from ..errors import (
    BrokerNotAvailableError,
    DuplicateSequenceError,
    LeaderNotAvailableError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    RetriableError,
    TierlogError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from ..model import TopicPartition
from ..records import HEADER_SIZE, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, RecordBatchBuilder
from ..server import protocol as p
from ..server.topics import validate_topic_name
from ..server.transport import Transport
from .accumulator import (
    HeaderPairs,
    PendingRecord,
    ProducerBatch,
    RecordAccumulator,
    complete_batch,
    estimate_record_size,
    fail_batch,
    fail_records,
)
from .backoff import ExponentialBackoff
from .config import ProducerConfig, coerce_config
from .errors import ClientClosedError, DeliveryTimeoutError
from .metadata import MetadataCache, PartitionInfo, topic_error
from .partitioner import StickyPartitioner, partition_for_key
from .records import RecordMetadata

log = logging.getLogger(__name__)

_MAX_EPOCH = (1 << 15) - 1
_INT32_MAX = (1 << 31) - 1


def _bytes_or_none(name: str, data: object) -> bytes | None:
    if data is None:
        return None
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"{name} must be bytes-like or None, not {type(data).__name__}")


def _headers(headers: Iterable[tuple[str, Any]]) -> HeaderPairs:
    result = []
    for name, value in headers:
        if not isinstance(name, str):
            raise TypeError(f"header names are str, not {type(name).__name__}")
        result.append((name, _bytes_or_none(f"header {name!r}", value)))
    return tuple(result)


class Producer:
    """Publishes records to tierlog topics (Kafka's ``KafkaProducer``).

    ``send`` is thread-safe and returns at once with a future of :class:`RecordMetadata`; call
    ``flush`` to wait for everything sent so far, and ``close`` to deliver the rest and stop.

    ``internal_topics_allowed`` is for the runtime's own writers (the topic-based metadata
    manager): their produces travel the transport's internal path, the only one that may
    append to internal topics. It is not a config key, so no configuration file can set it.
    """

    def __init__(
        self,
        transport: Transport,
        config: ProducerConfig | Mapping[str, Any] | None = None,
        *,
        internal_topics_allowed: bool = False,
    ) -> None:
        self._config = config = coerce_config(config, ProducerConfig)
        self._transport = transport
        self._internal_topics_allowed = internal_topics_allowed
        self._metadata = MetadataCache(
            transport,
            request_timeout_ms=config.request_timeout_ms,
            max_age_ms=config.metadata_max_age_ms,
        )
        self._accumulator = RecordAccumulator(
            batch_size=config.batch_size,
            linger_ms=config.linger_ms,
            delivery_timeout_ms=config.delivery_timeout_ms,
        )
        self._backoff = ExponentialBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._sticky = StickyPartitioner(config.batch_size)
        self._producer_id = NO_PRODUCER_ID
        self._producer_epoch = NO_PRODUCER_EPOCH
        #: The id and epoch to name in the next InitProducerId (KIP-360), once one was spent.
        self._spent_id = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        self._init_failures = 0
        self._sequences: dict[TopicPartition, int] = defaultdict(int)
        self._closed = False
        self._force_close = False
        self._thread = threading.Thread(
            target=self._run,
            name="tierlog-producer-sender" + (f"-{config.client_id}" if config.client_id else ""),
            daemon=True,
        )
        self._thread.start()

    @property
    def config(self) -> ProducerConfig:
        return self._config

    @property
    def producer_id(self) -> int:
        """The id idempotent batches carry: -1 without idempotence, and until the broker gave
        one (before the first batch is sent)."""
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    # --- the caller's side --------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp: int | None = None,
    ) -> Future[RecordMetadata]:
        """Queues a record; the future completes when the broker acknowledged it (or failed).

        Errors the broker or metadata give (an unknown or illegal topic, a record too large)
        come back through the future; wrong argument types and a partition the topic does not
        have raise at once, as in Kafka.
        """
        if self._closed:
            raise ClientClosedError("cannot send after the producer was closed")
        future: Future[RecordMetadata] = Future()
        key = _bytes_or_none("key", key)
        value = _bytes_or_none("value", value)
        header_pairs = _headers(headers)
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        elif not isinstance(timestamp, int) or timestamp < -1:
            raise ValueError(f"timestamp must be epoch milliseconds or -1, not {timestamp!r}")
        try:
            num_partitions = self._wait_for_topic(topic)
        except TierlogError as err:
            future.set_exception(err)
            return future
        size = HEADER_SIZE + estimate_record_size(key, value, header_pairs)
        if size > self._config.max_request_size:
            future.set_exception(
                RecordTooLargeError(
                    f"the record is {size} bytes when serialized, more than max.request.size "
                    f"({self._config.max_request_size})"
                )
            )
            return future
        keyless = partition is None and key is None
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, num_partitions)
            else:
                partition = self._sticky.partition(topic, num_partitions)
        elif not 0 <= partition < num_partitions:
            raise ValueError(
                f"partition {partition} is not in the range [0, {num_partitions - 1}] "
                f"of topic {topic!r}"
            )
        tp = TopicPartition(topic, partition)
        record = PendingRecord(timestamp, key, value, header_pairs, future)
        self._accumulator.append(tp, record)
        if keyless:
            self._sticky.on_append(topic, num_partitions, partition, size)
        return future

    def _wait_for_topic(self, topic: str) -> int:
        """The topic's partition count, waiting up to ``max.block.ms`` for its metadata."""
        validate_topic_name(topic, internal_allowed=True)
        deadline = time.monotonic() + self._config.max_block_ms / 1000
        attempts = 0
        while True:
            info = self._metadata.topic(topic)
            if info is not None and not self._metadata.is_stale(topic):
                return info.num_partitions
            with contextlib.suppress(RetriableError):
                self._metadata.refresh([topic])
            info = self._metadata.topic(topic)
            if info is not None:
                return info.num_partitions
            code = self._metadata.topic_error(topic)
            if code != p.NONE and not error_for_code(code).retriable:
                raise topic_error(topic, code)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if code in (p.NONE, UnknownTopicOrPartitionError.code):
                    raise UnknownTopicOrPartitionError(
                        f"topic {topic!r} not present in metadata after "
                        f"{self._config.max_block_ms} ms"
                    )
                raise topic_error(topic, code)
            time.sleep(min(remaining, self._backoff.backoff(attempts) / 1000))
            attempts += 1

    def partitions_for(self, topic: str) -> tuple[PartitionInfo, ...]:
        """The topic's partitions with their leaders, waiting up to ``max.block.ms``."""
        self._wait_for_topic(topic)
        info = self._metadata.topic(topic)
        return () if info is None else info.partitions

    def flush(self, timeout: float | None = None) -> None:
        """Sends everything queued at once, ignoring ``linger.ms``, and waits for the answers.

        Raises TimeoutError if ``timeout`` seconds pass first. Failures are reported by the
        futures, not here.
        """
        futures = self._accumulator.futures()
        self._accumulator.begin_flush()
        try:
            _, pending = wait_futures(futures, timeout)
        finally:
            self._accumulator.end_flush()
        if pending:
            raise TimeoutError(f"{len(pending)} records were not delivered within {timeout} s")

    def close(self, timeout: float | None = None) -> None:
        """Delivers what is queued, then stops the sender thread.

        After ``timeout`` seconds the records still queued are failed with ClientClosedError
        and the thread is stopped anyway. Calling close again does nothing.
        """
        self._closed = True
        self._accumulator.begin_close()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._force_close = True
            with self._accumulator.condition:
                self._accumulator.condition.notify_all()
            self._thread.join()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the sender thread --------------------------------------------------------------------

    def _run(self) -> None:
        accumulator = self._accumulator
        while True:
            with accumulator.condition:
                if self._force_close:
                    break
                if self._closed and accumulator.is_empty():
                    break
                ready, wait = accumulator.ready()
                if not ready:
                    accumulator.condition.wait(wait)
                    continue
            try:
                self._send(ready)
            except Exception as err:  # a bug must fail the records, not hang their futures
                log.exception("producer sender failed")
                for batch in ready:
                    fail_batch(batch, err)
                    accumulator.done(batch)
        for batch in accumulator.drain_all():
            fail_batch(batch, ClientClosedError("the producer was closed before delivery"))

    def _send(self, batches: list[ProducerBatch]) -> None:
        if not self._has_producer_id(batches):
            return
        now = time.monotonic()
        by_leader: dict[int, list[ProducerBatch]] = defaultdict(list)
        unknown: set[str] = set()
        for batch in batches:
            if now >= batch.deadline:
                self._fail(batch, self._expired(batch, now, batch.last_error))
                continue
            leader = self._metadata.leader(batch.tp)
            if leader is None or self._metadata.is_stale(batch.tp.topic):
                unknown.add(batch.tp.topic)
            else:
                by_leader[leader.leader].append(batch)
        if unknown:
            with contextlib.suppress(RetriableError):
                self._metadata.refresh(unknown)
            for batch in batches:
                if batch.tp.topic in unknown and now < batch.deadline:
                    leader = self._metadata.leader(batch.tp)
                    if leader is None:
                        code = self._metadata.topic_error(batch.tp.topic)
                        batch.last_error = (
                            topic_error(batch.tp.topic, code)
                            if code != p.NONE
                            else LeaderNotAvailableError(f"no leader for {batch.tp}")
                        )
                        self._accumulator.retry_later(batch, self._config.retry_backoff_ms / 1000)
                    else:
                        by_leader[leader.leader].append(batch)
        for broker_id, group in by_leader.items():
            for request_batches in self._split_by_size(group):
                self._send_to(broker_id, request_batches)

    def _has_producer_id(self, batches: list[ProducerBatch]) -> bool:
        """Whether batches can be built: without idempotence always; with it once a broker has
        given the producer its id. Until then a retriable failure puts ``batches`` back for
        a later try (with backoff) and any other fails them."""
        if not self._config.enable_idempotence or self._producer_id >= 0:
            return True
        error = self._init_producer_id()
        if error is None:
            self._init_failures = 0
            return True
        if not error.retriable:
            for batch in batches:
                self._fail(batch, error)
            return False
        delay = self._backoff.backoff(self._init_failures) / 1000
        self._init_failures += 1
        now = time.monotonic()
        for batch in batches:
            batch.last_error = error
            if now + delay >= batch.deadline:
                self._fail(batch, self._expired(batch, now, error))
            else:
                self._accumulator.retry_later(batch, delay)
        return False

    def _init_producer_id(self) -> TierlogError | None:
        """One InitProducerId to a reachable broker; returns the error if it failed."""
        nodes = self._metadata.node_ids()
        if not nodes:
            return BrokerNotAvailableError("no broker is reachable to get a producer id from")
        node = nodes[self._init_failures % len(nodes)]
        spent_id, spent_epoch = self._spent_id
        request = p.InitProducerIdRequest(producer_id=spent_id, producer_epoch=spent_epoch)
        try:
            response = self._transport.send(
                node, request, timeout_ms=self._config.request_timeout_ms
            )
        except TierlogError as err:
            return err
        if response.error_code != p.NONE:
            cls = error_for_code(response.error_code)
            return cls(f"{cls.kafka_name} getting a producer id from broker {node}")
        self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
        self._sequences.clear()
        log.debug("producer id %d, epoch %d", self._producer_id, self._producer_epoch)
        return None

    def _split_by_size(self, batches: list[ProducerBatch]) -> list[list[ProducerBatch]]:
        """Groups batches into requests of at most ``max.request.size`` bytes each."""
        requests: list[list[ProducerBatch]] = []
        current: list[ProducerBatch] = []
        size = 0
        for batch in batches:
            payload = self._payload(batch)
            if payload is None:
                continue
            if current and size + len(payload) > self._config.max_request_size:
                requests.append(current)
                current, size = [], 0
            current.append(batch)
            size += len(payload)
        if current:
            requests.append(current)
        return requests

    def _payload(self, batch: ProducerBatch) -> bytes | None:
        """The batch's bytes, built (and its sequence taken) at its first attempt only."""
        if batch.payload is not None:
            return batch.payload
        if self._producer_id >= 0:
            batch.producer_id = self._producer_id
            batch.producer_epoch = self._producer_epoch
            batch.base_sequence = self._sequences[batch.tp]
        try:
            builder = RecordBatchBuilder(
                self._config.compression_type,
                producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence,
            )
            for record in batch.records:
                builder.append(record.timestamp, record.key, record.value, record.headers)
            batch.payload = builder.build()
        except (ValueError, TypeError, TierlogError) as err:
            batch.base_sequence = -1
            self._fail(batch, err)
            return None
        if self._producer_id >= 0:
            self._sequences[batch.tp] = (batch.base_sequence + len(batch)) & _INT32_MAX
        return batch.payload

    def _send_to(self, broker_id: int, batches: list[ProducerBatch]) -> None:
        topics: dict[str, list[p.PartitionProduceData]] = defaultdict(list)
        for batch in batches:
            assert batch.payload is not None
            topics[batch.tp.topic].append(p.PartitionProduceData(batch.tp.partition, batch.payload))
        request = p.ProduceRequest(
            acks=self._config.acks,
            timeout_ms=self._config.request_timeout_ms,
            topic_data=[p.TopicProduceData(name, parts) for name, parts in topics.items()],
        )
        for batch in batches:
            batch.attempts += 1
        send = (
            self._transport.send_internal if self._internal_topics_allowed else self._transport.send
        )
        try:
            response = send(broker_id, request, timeout_ms=self._config.request_timeout_ms)
        except RetriableError as err:
            for batch in batches:
                self._metadata.mark_stale(batch.tp.topic)
                self._retry_or_fail(batch, err)
            return
        except TierlogError as err:
            for batch in batches:
                self._fail(batch, err)
            return
        if self._config.acks == 0:
            for batch in batches:
                complete_batch(batch, -1, -1)
                self._accumulator.done(batch)
            return
        answers = {
            (topic.name, part.index): part
            for topic in response.responses
            for part in topic.partition_responses
        }
        for batch in batches:
            answer = answers.get((batch.tp.topic, batch.tp.partition))
            if answer is None:
                self._retry_or_fail(
                    batch, UnknownTopicOrPartitionError(f"no answer for {batch.tp} from broker")
                )
            else:
                self._handle_answer(batch, answer)

    def _handle_answer(self, batch: ProducerBatch, answer: p.PartitionProduceResponse) -> None:
        code = answer.error_code
        if code == p.NONE:
            complete_batch(batch, answer.base_offset, answer.log_append_time_ms)
            self._accumulator.done(batch)
            return
        if code == DuplicateSequenceError.code:
            complete_batch(batch, -1, answer.log_append_time_ms)
            self._accumulator.done(batch)
            return
        cls = error_for_code(code)
        detail = f": {answer.error_message}" if answer.error_message else ""
        error = cls(f"{cls.kafka_name} producing to {batch.tp}{detail}")
        if cls.retriable:
            self._metadata.mark_stale(batch.tp.topic)
            self._retry_or_fail(batch, error)
        else:
            # As Kafka's producer does: a record the broker named fails with its own reason.
            for record_error in answer.record_errors:
                if 0 <= record_error.batch_index < len(batch.records):
                    reason = record_error.batch_index_error_message or answer.error_message
                    fail_records(
                        [batch.records[record_error.batch_index]],
                        cls(
                            f"{cls.kafka_name} producing to {batch.tp}: record "
                            f"{record_error.batch_index} was refused: {reason}"
                        ),
                    )
            self._fail(batch, error)

    def _retry_or_fail(self, batch: ProducerBatch, error: TierlogError) -> None:
        batch.last_error = error
        now = time.monotonic()
        delay = self._backoff.backoff(batch.attempts - 1) / 1000
        if batch.attempts > self._config.retries:
            self._fail(batch, error)
        elif now + delay >= batch.deadline:
            self._fail(batch, self._expired(batch, now, error))
        else:
            log.debug("retrying %s after %s (attempt %d)", batch.tp, error, batch.attempts)
            self._accumulator.retry_later(batch, delay)

    def _expired(
        self, batch: ProducerBatch, now: float, cause: BaseException | None = None
    ) -> DeliveryTimeoutError:
        error = DeliveryTimeoutError(
            f"expiring {len(batch)} record(s) for {batch.tp}: "
            f"{(now - batch.created) * 1000:.0f} ms has passed since batch creation"
            + (f" (last error: {cause})" if cause else "")
        )
        error.__cause__ = cause
        return error

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        fail_batch(batch, error)
        self._accumulator.done(batch)
        sequenced = batch.base_sequence >= 0 and batch.producer_epoch == self._producer_epoch
        if sequenced or isinstance(error, OutOfOrderSequenceError):
            self._bump_epoch()

    def _bump_epoch(self) -> None:
        """A new epoch restarts every sequence at 0, past any gap a failed batch left."""
        if self._producer_id < 0:
            return
        if self._producer_epoch >= _MAX_EPOCH:
            # Spent: the next batch waits for a new id (see _has_producer_id).
            self._spent_id = (self._producer_id, self._producer_epoch)
            self._producer_id, self._producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        else:
            self._producer_epoch += 1
        self._sequences.clear()
