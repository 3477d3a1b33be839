"""The built-in RemoteLogMetadataManager that keeps remote log metadata in an internal topic.

Every event (a segment's metadata, its updates, a partition's deletion) is published to
``__remote_log_metadata``, a topic the runtime hosts itself, on the metadata partition
``metadata_partition(user partition)`` (see ``partitioner.py``; Kafka's mapping). Each broker
consumes the metadata partitions of the user partitions it leads or follows and answers lookups
from what it consumed, so the metadata outlives the process and is shared by every replica.

The topic is compacted: each event is keyed by the segment (or partition) and the state it
records, and a finished deletion is followed by tombstones for every key of what it deleted
(see ``keys.py``), so the topic, and a broker's replay of it, are bounded by the live remote
segments rather than by history. A topic written before events were keyed is rewritten once
(``migration.py``).

Lifecycle (KIP-1197): ``tierlog_configure`` only parses settings. ``tierlog_on_broker_ready``
starts the initialization thread, which creates the internal topic if it is missing, checks its
partition count, reaches it through the runtime and starts the producer and the consumer task.
Attempts are retried every ``initialization.retry.interval.ms`` for at most
``initialization.retry.max.timeout.ms``, counted from broker-ready, so a slow start-up (long log
recovery) cannot use the budget up. If the budget runs out, the manager reports a fatal error
for tiering: every partition stays not ready, so nothing is copied or expired and no local
segment that was never tiered is deleted, while local data is still served.

Writes are read-your-writes: a call returns once this broker's own consumer applied the event,
so the next lookup sees it. Before that, each write is checked against the current state and an
invalid transition is refused without publishing anything. A write for a partition this broker
does not hold is published unchecked and not waited for: as in Kafka, the broker assigned the
partition applies it when it consumes the metadata partition.

Lookups for a partition this broker does not hold, or whose remote metadata was deleted
(DELETE_PARTITION_FINISHED), raise ``RemoteResourceNotFoundError``; the retriable
``RemoteStorageNotReadyError`` is only for a held partition that is still loading.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from pathlib import Path
from typing import Any

from .. import hookimpl
from ..client import Consumer, Producer
from ..config import ConfigDef
from ..errors import (
    InvalidConfigError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageNotReadyError,
    RetriableRemoteStorageError,
    TierlogError,
    TopicExistsError,
)
from ..model import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    check_transition,
)
from .checkpoint import CHECKPOINT_FILE_NAME
from .consumer_task import ConsumerTask
from .keys import event_key, partition_keys, segment_keys
from .migration import migrate_to_compacted
from .partitioner import metadata_partition
from .serde import MetadataEvent, encode_event
from .topic_config import TOPIC_NAME, TopicBasedConfig, config_def

log = logging.getLogger(__name__)

__all__ = ["TopicBasedRemoteLogMetadataManager"]


class TopicBasedRemoteLogMetadataManager:
    """The ``topic`` metadata manager; see the module docstring."""

    def __init__(self) -> None:
        self._config: TopicBasedConfig | None = None
        self._broker_id = 0
        self._checkpoint_path: Path | None = None
        self._lock = threading.Lock()
        self._pending: set[TopicIdPartition] = set()
        #: The partitions this broker leads, as the latest leadership changes said.
        self._led: set[TopicIdPartition] = set()
        self._task: ConsumerTask | None = None
        self._producer: Producer | None = None
        self._init_thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._initialized = threading.Event()
        #: Why initialization gave up, once it has; tiering is stopped on this broker then.
        self.initialization_error: BaseException | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    @hookimpl
    def tierlog_config_definitions(self) -> ConfigDef:
        return config_def()

    @hookimpl
    def tierlog_configure(self, config: Mapping[str, Any], context: Any) -> None:
        """Parse the slice; no I/O (the topic is only reachable once the broker serves)."""
        self._broker_id = context.broker_id
        self._config = TopicBasedConfig.from_mapping(config, broker_id=context.broker_id)
        if context.log_dirs:
            self._checkpoint_path = Path(context.log_dirs[0]) / CHECKPOINT_FILE_NAME

    @hookimpl
    def tierlog_on_broker_ready(self, broker: Any) -> None:
        """Start initializing; the retry budget starts now (KIP-1197)."""
        if self._init_thread is not None:
            return
        broker.add_state_listener(self._on_broker_state)
        self._init_thread = threading.Thread(
            target=self._initialize,
            args=(broker,),
            name=f"rlmm-init-{self._broker_id}",
            daemon=True,
        )
        self._init_thread.start()

    def _on_broker_state(self, _broker: Any, state: Any) -> None:
        """Once the broker stops serving, nothing it could consume will come: writes waiting
        for their event to be consumed give up now instead of at ``consume.wait.ms``."""
        if getattr(state, "name", None) == "SHUTTING_DOWN":
            self._closing.set()
            task = self._task
            if task is not None:
                task.stop()

    @hookimpl
    def tierlog_close(self) -> None:
        self._closing.set()
        if self._init_thread is not None:
            self._init_thread.join()
        with self._lock:
            task, self._task = self._task, None
            producer, self._producer = self._producer, None
        if producer is not None:
            # Every write waiting on it has already been told it failed (the broker is
            # stopping); what is still queued gets a moment, not a minute, to be delivered.
            producer.close(timeout=1)
        if task is not None:
            task.close()

    @property
    def initialized(self) -> bool:
        return self._initialized.is_set()

    def wait_initialized(self, timeout: float) -> bool:
        """Whether initialization finished within ``timeout`` seconds (for tools and tests)."""
        return self._initialized.wait(timeout)

    def _initialize(self, broker: Any) -> None:
        config = self._settings()
        started = time.monotonic()
        deadline = started + config.init_retry_max_timeout_ms / 1000
        attempts = 0
        last_error: BaseException | None = None
        while not self._closing.is_set():
            attempts += 1
            try:
                self._start(broker, config)
                log.info(
                    "broker %d: remote log metadata manager ready after %d attempt(s), %.0f ms",
                    self._broker_id,
                    attempts,
                    (time.monotonic() - started) * 1000,
                )
                return
            except InvalidConfigError as err:
                self._fail(err, started)  # retrying cannot fix a partition-count mismatch
                return
            except Exception as err:
                last_error = err
                log.debug("remote log metadata manager initialization attempt failed: %s", err)
            if time.monotonic() >= deadline:
                self._fail(last_error, started)
                return
            self._closing.wait(config.init_retry_interval_ms / 1000)

    def _fail(self, error: BaseException | None, started: float) -> None:
        self.initialization_error = error
        log.error(
            "broker %d: the remote log metadata manager could not initialize within %d ms "
            "(%s). Tiering is stopped on this broker: no segment is copied to or expired "
            "from remote storage, remote reads answer not ready, local data is still served "
            "and local segments that were never tiered are kept.",
            self._broker_id,
            (time.monotonic() - started) * 1000,
            error,
        )

    def attach(self, transport: Any, timeout_s: float) -> None:
        """Starts the manager in a process that is no broker (a tool such as the Spark tier
        job), reaching a running cluster through ``transport``: it then publishes and consumes
        as a broker's manager does. The brokers own the topic, so it must exist, with the
        configured partition count; it is neither created nor rewritten here.

        :raises RemoteStorageError: the topic could not be reached within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._start_consuming(transport, self._settings())
                return
            except TierlogError as err:
                if not err.retriable or time.monotonic() >= deadline:
                    raise RemoteStorageError(f"cannot reach {TOPIC_NAME}: {err}") from err
            time.sleep(0.2)

    def _start(self, broker: Any, config: TopicBasedConfig) -> None:
        self._ensure_topic(broker, config)
        # A topic written before events were keyed is rewritten once, then compacted.
        migrate_to_compacted(broker.controller, config, config.init_retry_max_timeout_ms / 1000)
        self._start_consuming(broker.controller.transport, config)

    def _start_consuming(self, transport: Any, config: TopicBasedConfig) -> None:
        consumer = Consumer(transport, dict(config.consumer))
        try:
            seen = consumer.partitions_for(TOPIC_NAME)  # reached through the runtime
            if len(seen) != config.num_partitions:
                raise RetriableRemoteStorageError(
                    f"{TOPIC_NAME} shows {len(seen)} partitions, expected {config.num_partitions}"
                )
            task = ConsumerTask(
                consumer,
                TOPIC_NAME,
                lambda tip: metadata_partition(tip, config.num_partitions),
                checkpoint_path=self._checkpoint_path,
                checkpoint_interval_ms=config.checkpoint_interval_ms,
                name=f"rlmm-consumer-{self._broker_id}",
            )
        except BaseException:
            consumer.close()
            raise
        producer = Producer(
            transport,
            {"linger.ms": "0", "max.block.ms": "10000", **config.producer},
            internal_topics_allowed=True,
        )
        with self._lock:
            if self._closing.is_set():
                producer.close(timeout=0)
                consumer.close()
                return
            self._task, self._producer = task, producer
            task.add_assignments(self._pending)
            self._pending.clear()
            task.start()
            self._initialized.set()

    @staticmethod
    def _ensure_topic(broker: Any, config: TopicBasedConfig) -> None:
        controller = broker.controller
        existing = controller.image().topics.get(TOPIC_NAME)
        if existing is None:
            replication = config.replication_factor
            if not broker.inter_broker_enabled:
                # An embedded cluster knows all its brokers: a smaller one gets a smaller
                # factor. Brokers of a multi-process cluster may still be starting, so the
                # creation waits for them (retried), as Kafka's does.
                replication = min(replication, len(controller.broker_ids))
            try:
                controller.create_topic(
                    TOPIC_NAME,
                    config.num_partitions,
                    replication,
                    config.topic_configs(),
                    internal=True,
                )
                return
            except TopicExistsError:
                existing = controller.image().topics.get(TOPIC_NAME)
        if existing is not None and len(existing.partitions) != config.num_partitions:
            raise InvalidConfigError(
                f"{TOPIC_NAME} has {len(existing.partitions)} partitions but "
                f"remote.log.metadata.topic.num.partitions is {config.num_partitions}; "
                "user partitions would map to other metadata partitions",
                key="remote.log.metadata.topic.num.partitions",
                value=config.num_partitions,
            )

    def _settings(self) -> TopicBasedConfig:
        if self._config is None:
            self._config = TopicBasedConfig.from_mapping({}, broker_id=self._broker_id)
        return self._config

    def _lookup_task(self, partition: TopicIdPartition) -> ConsumerTask:
        """The consumer task to answer a lookup for ``partition`` from.

        Before the task runs, only a partition this broker was assigned is "not ready"; any
        other is unknown here.
        """
        with self._lock:
            task, pending = self._task, partition in self._pending
        if task is None and not pending:
            raise RemoteResourceNotFoundError(
                f"remote log metadata of {partition} is not held by this broker"
            )
        return self._ready_task()

    def _ready_task(self) -> ConsumerTask:
        task = self._task
        if task is None:
            if self.initialization_error is not None:
                raise RemoteStorageNotReadyError(
                    "the remote log metadata manager failed to initialize: "
                    f"{self.initialization_error}"
                )
            raise RemoteStorageNotReadyError("the remote log metadata manager is initializing")
        return task

    # --- writes -------------------------------------------------------------------------------

    def _publish(
        self,
        partition: TopicIdPartition,
        event: MetadataEvent,
        tombstones: Iterable[bytes] = (),
    ) -> None:
        """Publishes ``event`` under its key, then a tombstone for each of ``tombstones``
        (the keys a finished deletion makes dead), and waits for the event to be applied."""
        task, producer = self._ready_task(), self._producer
        assert producer is not None
        if self._closing.is_set():
            raise RetriableRemoteStorageError(
                f"not publishing remote log metadata of {partition}: the broker is stopping"
            )
        config = self._settings()
        target = metadata_partition(partition, config.num_partitions)
        timeout_s = config.consume_wait_ms / 1000
        future = producer.send(
            TOPIC_NAME, encode_event(event), key=event_key(event), partition=target
        )
        # After the event, in order (one idempotent producer): a replay meeting them has
        # already applied the deletion.
        dead = [producer.send(TOPIC_NAME, None, key=key, partition=target) for key in tombstones]
        deadline = time.monotonic() + timeout_s
        while True:  # short waits, so a broker that starts stopping releases the caller
            try:
                written = future.result(timeout=min(0.1, max(deadline - time.monotonic(), 0)))
                break
            except FutureTimeoutError:
                if self._closing.is_set():
                    raise RetriableRemoteStorageError(
                        f"publishing remote log metadata of {partition} stopped: the broker "
                        "is stopping"
                    ) from None
                if time.monotonic() >= deadline:
                    raise RetriableRemoteStorageError(
                        f"publishing remote log metadata of {partition} was not acknowledged "
                        f"within {config.consume_wait_ms} ms"
                    ) from None
            except TierlogError as err:
                kind = RetriableRemoteStorageError if err.retriable else RemoteStorageError
                raise kind(f"publishing remote log metadata of {partition} failed: {err}") from err
        for tombstone in dead:
            _await_tombstone(tombstone, max(deadline - time.monotonic(), 0))
        with task.lock:
            assigned = task.assigned(partition)
        if assigned:
            task.wait_until_consumed(target, written.offset, max(deadline - time.monotonic(), 0))
        # Otherwise the event is published for the broker that will be assigned the partition:
        # its consumer applies it then, as Kafka's does.

    @hookimpl
    def tierlog_add_remote_log_segment_metadata(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata
    ) -> None:
        metadata = remote_log_segment_metadata
        partition = metadata.topic_id_partition
        task = self._ready_task()
        with task.lock:
            held = task.held_for_write(partition)
            existing = held.cache.segment(metadata.remote_log_segment_id) if held else None
            check_transition(existing.state if existing is not None else None, metadata.state)
        self._publish(partition, metadata)

    @hookimpl
    def tierlog_update_remote_log_segment_metadata(
        self, remote_log_segment_metadata_update: RemoteLogSegmentMetadataUpdate
    ) -> None:
        update = remote_log_segment_metadata_update
        partition = update.topic_id_partition
        task = self._ready_task()
        with task.lock:
            held = task.held_for_write(partition)
            if held is not None:
                existing = held.cache.segment(update.remote_log_segment_id)
                if existing is None:
                    raise RemoteResourceNotFoundError(
                        f"no remote log segment metadata for {update.remote_log_segment_id}"
                    )
                check_transition(existing.state, update.state)
        dead: list[bytes] = []
        if update.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            dead = segment_keys(update.remote_log_segment_id)
        self._publish(partition, update, dead)

    @hookimpl
    def tierlog_put_remote_partition_delete_metadata(
        self, remote_partition_delete_metadata: RemotePartitionDeleteMetadata
    ) -> None:
        event = remote_partition_delete_metadata
        task = self._ready_task()
        with task.lock:
            held = task.held_for_write(event.topic_id_partition)
            current = held.live_delete_state if held is not None else None
            check_transition(current.state if current is not None else None, event.state)
            dead: list[bytes] = []
            if event.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                listed = held.cache.list_all_remote_log_segments() if held is not None else ()
                dead = partition_keys(
                    event.topic_id_partition, (m.remote_log_segment_id for m in listed)
                )
        self._publish(event.topic_id_partition, event, dead)

    # --- lookups ------------------------------------------------------------------------------

    @hookimpl
    def tierlog_remote_log_segment_metadata(
        self, topic_id_partition: TopicIdPartition, epoch_for_offset: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        task = self._lookup_task(topic_id_partition)
        with task.lock:
            cache = task.held(topic_id_partition).cache
            return cache.remote_log_segment_metadata(epoch_for_offset, offset)

    @hookimpl
    def tierlog_highest_offset_for_epoch(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int
    ) -> int | None:
        task = self._lookup_task(topic_id_partition)
        with task.lock:
            return task.held(topic_id_partition).cache.highest_offset_for_epoch(leader_epoch)

    @hookimpl
    def tierlog_list_remote_log_segments(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int | None
    ) -> Iterator[RemoteLogSegmentMetadata]:
        task = self._lookup_task(topic_id_partition)
        with task.lock:
            cache = task.held(topic_id_partition).cache
            if leader_epoch is None:
                return iter(cache.list_all_remote_log_segments())
            return iter(cache.list_remote_log_segments(leader_epoch))

    @hookimpl
    def tierlog_remote_log_size(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int
    ) -> int:
        task = self._lookup_task(topic_id_partition)
        with task.lock:
            return task.held(topic_id_partition).cache.remote_log_size(leader_epoch)

    @hookimpl
    def tierlog_next_segment_with_txn_index(
        self, topic_id_partition: TopicIdPartition, epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        task = self._lookup_task(topic_id_partition)
        with task.lock:
            cache = task.held(topic_id_partition).cache
            return cache.next_segment_with_txn_index(epoch, offset)

    @hookimpl
    def tierlog_is_ready(self, topic_id_partition: TopicIdPartition) -> bool:
        task = self._task
        if task is None:
            return False
        with task.lock:
            return task.is_ready(topic_id_partition)

    # --- assignment ---------------------------------------------------------------------------

    @hookimpl
    def tierlog_on_partition_leadership_changes(
        self,
        leader_partitions: frozenset[TopicIdPartition],
        follower_partitions: frozenset[TopicIdPartition],
    ) -> None:
        """Leaders and followers alike consume the partitions' metadata; a partition this
        broker starts leading is ready again only once what was published for it before is
        applied (as Kafka's copy task waits on ``isReady``)."""
        partitions = leader_partitions | follower_partitions
        with self._lock:
            newly_led = leader_partitions - self._led
            self._led = set(leader_partitions) | (self._led - follower_partitions)
            if self._task is None:
                self._pending.update(partitions)
                return
            task = self._task
        task.add_assignments(partitions)
        task.catch_up(newly_led)

    @hookimpl
    def tierlog_on_stop_partitions(self, partitions: frozenset[TopicIdPartition]) -> None:
        with self._lock:
            self._led.difference_update(partitions)
            if self._task is None:
                self._pending.difference_update(partitions)
                return
            task = self._task
        task.remove_assignments(partitions)


def _await_tombstone(future: Future[Any], timeout_s: float) -> None:
    """A lost tombstone only leaves dead records in the topic (replays skip them): logged, and
    the write it follows still succeeds."""
    try:
        future.result(timeout=timeout_s)
    except (FutureTimeoutError, TierlogError) as err:
        log.warning(
            "a tombstone for deleted remote log metadata was not written (%s): the records it "
            "stood for stay in %s",
            err or "not acknowledged in time",
            TOPIC_NAME,
        )
