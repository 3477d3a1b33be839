"""The built-in RemoteLogMetadataManager that keeps everything in this process's memory.

It is the reference implementation the runtime's tests run against, and enough for a single
broker that does not need its remote-log metadata to outlive the process. Nothing is persisted or
shared: each runtime gets its own instance, and a restart forgets every remote segment.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import attrs

from .. import hookimpl
from ..errors import RemoteResourceNotFoundError
from ..model import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    check_transition,
)
from .cache import RemoteLogMetadataCache

__all__ = ["InMemoryRemoteLogMetadataManager"]


@attrs.define(eq=False)
class InMemoryRemoteLogMetadataManager:
    """A RemoteLogMetadataManager plugin backed by one ``RemoteLogMetadataCache`` per partition.

    Every write is applied before the hook returns, so the caller's next lookup sees it. Unlike
    Kafka's caches, which log and drop an invalid state transition because they replay events
    that were already published, this manager is called directly by the runtime: it rejects the
    event with ``InvalidStateTransitionError`` and changes nothing, so the caller's bug surfaces
    where it happens.

    Lookups for a partition the manager does not hold (never added, led nor followed, stopped,
    or forgotten by DELETE_PARTITION_FINISHED) raise ``RemoteResourceNotFoundError``, as Kafka's
    do. There is nothing to load, so every partition is always ready and the "not ready" error
    is never raised.

    One lock guards all state; the runtime calls from its request, copy and expiration threads.
    """

    _caches: dict[TopicIdPartition, RemoteLogMetadataCache] = attrs.field(factory=dict, init=False)
    _partition_deletes: dict[TopicIdPartition, RemotePartitionDeleteMetadata] = attrs.field(
        factory=dict, init=False
    )
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)

    # --- writes ----------------------------------------------------------------------------

    @hookimpl
    def tierlog_add_remote_log_segment_metadata(
        self, remote_log_segment_metadata: RemoteLogSegmentMetadata
    ) -> None:
        """Record a new upload; the partition's cache is created on its first segment."""
        partition = remote_log_segment_metadata.topic_id_partition
        with self._lock:
            cache = self._caches.get(partition)
            if cache is None:
                cache = RemoteLogMetadataCache(partition)
            cache.add_copy_in_progress_segment(remote_log_segment_metadata)
            self._caches[partition] = cache  # only once the add was accepted

    @hookimpl
    def tierlog_update_remote_log_segment_metadata(
        self, remote_log_segment_metadata_update: RemoteLogSegmentMetadataUpdate
    ) -> None:
        update = remote_log_segment_metadata_update
        with self._lock:
            cache = self._caches.get(update.topic_id_partition)
            if cache is None:
                raise RemoteResourceNotFoundError(
                    f"no remote log segment metadata for {update.remote_log_segment_id}"
                )
            cache.update_remote_log_segment_metadata(update)

    @hookimpl
    def tierlog_put_remote_partition_delete_metadata(
        self, remote_partition_delete_metadata: RemotePartitionDeleteMetadata
    ) -> None:
        """Track a partition deletion; DELETE_PARTITION_FINISHED forgets the partition, so a
        topic re-created later starts from an empty state."""
        event = remote_partition_delete_metadata
        partition = event.topic_id_partition
        with self._lock:
            current = self._partition_deletes.get(partition)
            check_transition(current.state if current is not None else None, event.state)
            if event.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                self._partition_deletes.pop(partition, None)
                self._caches.pop(partition, None)
            else:
                self._partition_deletes[partition] = event

    # --- lookups ---------------------------------------------------------------------------

    @hookimpl
    def tierlog_remote_log_segment_metadata(
        self, topic_id_partition: TopicIdPartition, epoch_for_offset: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        with self._lock:
            return self._cache(topic_id_partition).remote_log_segment_metadata(
                epoch_for_offset, offset
            )

    @hookimpl
    def tierlog_highest_offset_for_epoch(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int
    ) -> int | None:
        with self._lock:
            return self._cache(topic_id_partition).highest_offset_for_epoch(leader_epoch)

    @hookimpl
    def tierlog_list_remote_log_segments(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int | None
    ) -> Iterator[RemoteLogSegmentMetadata]:
        """A snapshot taken under the lock, so the caller may iterate while others write."""
        with self._lock:
            cache = self._cache(topic_id_partition)
            if leader_epoch is None:
                return iter(cache.list_all_remote_log_segments())
            return iter(cache.list_remote_log_segments(leader_epoch))

    @hookimpl
    def tierlog_remote_log_size(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int
    ) -> int:
        with self._lock:
            return self._cache(topic_id_partition).remote_log_size(leader_epoch)

    @hookimpl
    def tierlog_next_segment_with_txn_index(
        self, topic_id_partition: TopicIdPartition, epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        with self._lock:
            return self._cache(topic_id_partition).next_segment_with_txn_index(epoch, offset)

    def _cache(self, partition: TopicIdPartition) -> RemoteLogMetadataCache:
        cache = self._caches.get(partition)
        if cache is None:
            raise RemoteResourceNotFoundError(f"no remote log metadata for {partition}")
        return cache

    @hookimpl
    def tierlog_is_ready(self, topic_id_partition: TopicIdPartition) -> bool:
        """Always True: the state is in memory, there is nothing to load first."""
        return True

    # --- partition assignment and lifecycle ------------------------------------------------

    @hookimpl
    def tierlog_on_partition_leadership_changes(
        self,
        leader_partitions: frozenset[TopicIdPartition],
        follower_partitions: frozenset[TopicIdPartition],
    ) -> None:
        """Start holding the partitions; what is already held is kept."""
        with self._lock:
            for partition in leader_partitions | follower_partitions:
                self._caches.setdefault(partition, RemoteLogMetadataCache(partition))

    @hookimpl
    def tierlog_on_stop_partitions(self, partitions: frozenset[TopicIdPartition]) -> None:
        """Forget the partitions. With no durable copy, their remote segments are no longer known
        here: the runtime deletes a deleted topic's remote data before stopping it."""
        with self._lock:
            for partition in partitions:
                self._caches.pop(partition, None)
                self._partition_deletes.pop(partition, None)

    @hookimpl
    def tierlog_close(self) -> None:
        with self._lock:
            self._caches.clear()
            self._partition_deletes.clear()

    def held_partitions(self) -> frozenset[TopicIdPartition]:
        """Partitions this manager currently holds state for (for tests and diagnostics)."""
        with self._lock:
            return frozenset(self._caches)
