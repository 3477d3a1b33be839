"""Turning a ``__remote_log_metadata`` topic written before events were keyed into a compacted one.

Earlier versions published every event without a key to a topic with ``cleanup.policy=delete``.
A log cleaner drops records without a key (Kafka's does), so switching such a topic to
``compact`` as it stands would lose the history of segments still in remote storage. Before the
switch, the first broker to initialize against such a topic therefore reads every metadata
partition to its end, works out which events still describe something live (what compaction of
the keyed events would keep: see ``keys``) and publishes those again, keyed and in their original
order, then sets ``cleanup.policy=compact``. A replay of the topic from the start meets the old
events first and then their repeats, which change nothing (the consumer skips an event its
segment is already past, and a repeat of the current state is a retry); once the cleaner has
removed the unkeyed records, only the keyed repeats remain, which rebuild the same state.

The rewrite runs under one lock per cluster controller before any broker's manager starts, so
nothing else writes the topic meanwhile, and later brokers find the topic compacted and skip it.
If it fails half-way it is simply run again: the repeats it already wrote are repeats too.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

from ..client import Consumer, Producer
from ..errors import MetadataFormatError, RetriableRemoteStorageError
from ..model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteState,
    TopicIdPartition,
    TopicPartition,
)
from .keys import event_key, partition_keys, segment_keys
from .serde import decode_event
from .topic_config import TOPIC_NAME, TopicBasedConfig

log = logging.getLogger(__name__)

__all__ = ["is_compacted", "migrate_to_compacted"]

_locks: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()


def _lock_for(controller: Any) -> threading.Lock:
    with _locks_guard:
        lock = _locks.get(controller)
        if lock is None:
            lock = _locks[controller] = threading.Lock()
        return lock


def is_compacted(controller: Any) -> bool:
    """Whether the topic exists with a cleanup policy that compacts it."""
    image = controller.image().topics.get(TOPIC_NAME)
    if image is None:
        return False
    policy = str(image.configs.get("cleanup.policy", "delete"))
    return "compact" in (part.strip() for part in policy.split(","))


def migrate_to_compacted(controller: Any, config: TopicBasedConfig, timeout_s: float) -> int:
    """Rewrites the live events of an uncompacted topic keyed and compacts it; returns how
    many events were published again (0 if the topic already compacts)."""
    with _lock_for(controller):
        if controller.image().topics.get(TOPIC_NAME) is None or is_compacted(controller):
            return 0
        started = time.monotonic()
        live, read = _live_events(controller.transport, config, started + timeout_s)
        _republish(controller.transport, config, live)
        controller.alter_topic_configs(TOPIC_NAME, {"cleanup.policy": "compact"})
        count = sum(len(events) for events in live.values())
        log.info(
            "%s: %d of %d events describe live remote data and were published again keyed; "
            "the topic is compacted from now on (%.0f ms)",
            TOPIC_NAME,
            count,
            read,
            (time.monotonic() - started) * 1000,
        )
        return count


def _live_events(
    transport: Any, config: TopicBasedConfig, deadline: float
) -> tuple[dict[int, list[tuple[bytes, bytes]]], int]:
    """Per metadata partition, the (key, value) of each live event in offset order, and how
    many records were read."""
    consumer = Consumer(transport, dict(config.consumer))
    try:
        tps = [TopicPartition(TOPIC_NAME, n) for n in range(config.num_partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        ends = consumer.end_offsets(tps)
        states = {tp.partition: _PartitionHistory() for tp in tps}
        read = 0
        pending = {tp for tp in tps if ends[tp] > 0}
        while pending:
            if time.monotonic() >= deadline:
                raise RetriableRemoteStorageError(
                    f"reading {TOPIC_NAME} to rewrite it keyed did not finish in time"
                )
            for record in consumer.poll(100):
                read += 1
                if record.value is not None and record.offset < ends[record.topic_partition]:
                    states[record.partition].apply(record.offset, record.value)
            pending = {tp for tp in pending if consumer.position(tp) < ends[tp]}
    finally:
        consumer.close()
    return {mp: history.live() for mp, history in states.items()}, read


class _PartitionHistory:
    """One metadata partition's events, less those a finished deletion made dead."""

    def __init__(self) -> None:
        self._live: dict[bytes, tuple[int, bytes]] = {}
        self._segments: dict[TopicIdPartition, set[RemoteLogSegmentId]] = {}

    def apply(self, offset: int, value: bytes) -> None:
        try:
            event = decode_event(value)
        except MetadataFormatError as err:
            log.error("skipping an unreadable event at offset %d: %s", offset, err)
            return
        key = event_key(event)
        self._live[key] = (offset, value)
        if isinstance(event, RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate):
            segment_id = event.remote_log_segment_id
            self._segments.setdefault(segment_id.topic_id_partition, set()).add(segment_id)
            if event.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
                self._drop(segment_keys(segment_id))
                self._segments[segment_id.topic_id_partition].discard(segment_id)
        elif event.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
            tip = event.topic_id_partition
            self._drop(partition_keys(tip, self._segments.pop(tip, ())))

    def _drop(self, keys: list[bytes]) -> None:
        for key in keys:
            self._live.pop(key, None)

    def live(self) -> list[tuple[bytes, bytes]]:
        ordered = sorted(self._live.items(), key=lambda item: item[1][0])
        return [(key, value) for key, (_offset, value) in ordered]


def _republish(
    transport: Any, config: TopicBasedConfig, live: dict[int, list[tuple[bytes, bytes]]]
) -> None:
    producer = Producer(
        transport,
        {"linger.ms": "5", "max.block.ms": "10000", **config.producer},
        internal_topics_allowed=True,
    )
    try:
        futures = [
            producer.send(TOPIC_NAME, value, key=key, partition=mp)
            for mp, events in sorted(live.items())
            for key, value in events
        ]
        producer.flush()
        for future in futures:
            future.result(timeout=config.consume_wait_ms / 1000)
    finally:
        producer.close(timeout=1)
