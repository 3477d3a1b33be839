"""Deleting a deleted topic's remote data: once, by one broker, retried until it is done.

When a tiered topic is deleted, every replica hears of it, but only the partition's last leader
(or, when no leader was alive, the lowest-numbered live replica) removes the remote data: two
brokers deleting the same segments race each other's state transitions. The deletion walks
Kafka's partition-delete states (DELETE_PARTITION_MARKED, _STARTED, every segment deleted,
DELETE_PARTITION_FINISHED, after which the metadata manager forgets the partition). A step that
fails is retried with backoff from where it stopped, until it succeeds or the broker stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import attrs

from ..model import (
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from ..spi import RemoteLogMetadataManager

log = logging.getLogger(__name__)

#: Deletes every remote segment of a partition not deleted yet (already gone counts as done).
DeleteSegments = Callable[[TopicIdPartition], object]
State = RemotePartitionDeleteState


@attrs.define(eq=False)
class _Pending:
    topic_id_partition: TopicIdPartition
    #: The last state published; None before DELETE_PARTITION_MARKED.
    published: State | None = None
    failures: int = 0
    due: float = 0.0


class PartitionDeletions:
    """The remote partition deletions this broker owns, each retried until it completes."""

    def __init__(
        self,
        metadata: RemoteLogMetadataManager,
        delete_segments: DeleteSegments,
        broker_id: int,
        *,
        initial_backoff_ms: int,
        max_backoff_ms: int,
    ) -> None:
        self._metadata = metadata
        self._delete_segments = delete_segments
        self._broker_id = broker_id
        self._initial_backoff_s = initial_backoff_ms / 1000
        self._max_backoff_s = max_backoff_ms / 1000
        self._pending: dict[TopicIdPartition, _Pending] = {}
        self._lock = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def pending(self) -> frozenset[TopicIdPartition]:
        with self._lock:
            return frozenset(self._pending)

    def delete(self, tip: TopicIdPartition) -> bool:
        """Deletes the partition's remote data now; on failure keeps retrying in the
        background. Returns whether it is already done."""
        with self._lock:
            pending = self._pending.setdefault(tip, _Pending(tip))
        if self._attempt(pending):
            return True
        with self._lock:
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(
                    target=self._retry_loop,
                    name=f"remote-partition-deletion-{self._broker_id}",
                    daemon=True,
                )
                self._thread.start()
            self._lock.notify_all()
        return False

    def close(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _retry_loop(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                now = time.monotonic()
                due = [p for p in self._pending.values() if p.due <= now]
                if not due:
                    waits = [p.due - now for p in self._pending.values()]
                    self._lock.wait(min(waits, default=1.0))
                    continue
            for pending in due:
                self._attempt(pending)

    def _attempt(self, pending: _Pending) -> bool:
        tip = pending.topic_id_partition
        try:
            self._run(pending)
        except Exception as err:
            pending.failures += 1
            delay = min(self._max_backoff_s, self._initial_backoff_s * 2 ** (pending.failures - 1))
            pending.due = time.monotonic() + delay
            log.warning(
                "%s: deleting remote data failed (attempt %d), retrying in %.1f s: %s",
                tip,
                pending.failures,
                delay,
                err,
            )
            return False
        with self._lock:
            self._pending.pop(tip, None)
        log.info("%s: remote data deleted", tip)
        return True

    def _run(self, pending: _Pending) -> None:
        tip = pending.topic_id_partition
        if pending.published is None:
            self._publish(pending, State.DELETE_PARTITION_MARKED)
        if pending.published is State.DELETE_PARTITION_MARKED:
            self._publish(pending, State.DELETE_PARTITION_STARTED)
        if pending.published is State.DELETE_PARTITION_STARTED:
            # Once FINISHED is published the manager no longer knows the partition's segments
            # (lookups raise RemoteResourceNotFoundError), so a retry skips straight to the stop.
            self._delete_segments(tip)
            self._publish(pending, State.DELETE_PARTITION_FINISHED)
        self._metadata.on_stop_partitions(frozenset({tip}))

    def _publish(self, pending: _Pending, state: State) -> None:
        self._metadata.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(
                pending.topic_id_partition, state, time.time_ns() // 1_000_000, self._broker_id
            )
        )
        pending.published = state
