"""The thread that reads the internal metadata topic into per-partition caches.

One task per broker. It consumes the metadata partitions that hold events of the user
partitions this broker leads or follows, and applies each event to its user partition's
``RemoteLogMetadataCache``. Lookups and writes of the metadata manager read those caches under
the task's lock.

Readiness (KIP-1007): a user partition is ready once its metadata partition has been consumed
up to the end offset seen when the partition was assigned, or at once if that metadata partition
is empty. Until then lookups for it answer ``RemoteStorageNotReadyError``; lookups for a partition
that is not assigned, or whose remote metadata was deleted, answer ``RemoteResourceNotFoundError``.

Re-reading: a metadata partition is shared by many user partitions. When a newly assigned user
partition needs events from further back than the partition's current position, the task seeks
back, and each user partition remembers the first offset it still needs (``start``), so events
it already applied are not applied twice.

Checkpoint: every ``checkpoint_interval_ms`` and at close, the caches of ready partitions are
written with the offset they reflect. On restart a partition found there starts from its saved
cache and its metadata partition is read only from that offset on. A corrupt checkpoint is
logged and ignored (the topic is replayed).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from ..client import Consumer, ConsumerRecord
from ..errors import (
    InvalidStateTransitionError,
    MetadataFormatError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageNotReadyError,
    RetriableError,
    TierlogError,
)
from ..model import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    TopicPartition,
    check_transition,
)
from .cache import RemoteLogMetadataCache
from .checkpoint import PartitionSnapshot, read_checkpoint, write_checkpoint
from .serde import decode_event

log = logging.getLogger(__name__)

_POLL_MS = 100


@attrs.define(eq=False)
class HeldPartition:
    """What the task holds for one user partition."""

    cache: RemoteLogMetadataCache
    metadata_partition: int
    #: The first offset of the metadata partition whose events are still to be applied here.
    start: int
    delete_state: RemotePartitionDeleteMetadata | None = None
    #: The end offset to reach before the partition is ready; None once ready, -1 while unknown.
    ready_at: int | None = -1

    @property
    def ready(self) -> bool:
        return self.ready_at is None

    @property
    def live_delete_state(self) -> RemotePartitionDeleteMetadata | None:
        """The deletion under way, if any; after FINISHED a new deletion may start (MARKED)."""
        return None if self.deleted else self.delete_state

    @property
    def deleted(self) -> bool:
        """DELETE_PARTITION_FINISHED was applied: the partition's metadata is gone for good."""
        state = self.delete_state
        return (
            state is not None
            and state.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED
        )


class ConsumerTask:
    """Consumes the metadata partitions of the assigned user partitions; see the module doc."""

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        partition_for: Callable[[TopicIdPartition], int],
        *,
        checkpoint_path: Path | None,
        checkpoint_interval_ms: int,
        name: str = "rlmm-consumer",
    ) -> None:
        self._consumer = consumer
        self._topic = topic
        self._partition_for = partition_for
        self._checkpoint_path = checkpoint_path
        self._checkpoint_interval_s = checkpoint_interval_ms / 1000
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self._wanted: set[TopicIdPartition] = set()
        self._assignment_changed = False
        self._held: dict[TopicIdPartition, HeldPartition] = {}
        #: Next offset to read per metadata partition (what has been consumed so far).
        self._positions: dict[int, int] = {}
        self._closing = False
        self._snapshots = self._load_checkpoint()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    # --- control ------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stops consuming and wakes every waiting write (they fail); ``close`` still to come."""
        with self.lock:
            self._closing = True
            self._changed.notify_all()

    def close(self) -> None:
        """Stops the thread, then writes a last checkpoint."""
        self.stop()
        if self._thread.is_alive():
            self._thread.join()
        self._checkpoint()
        self._consumer.close()

    def add_assignments(self, partitions: Iterable[TopicIdPartition]) -> None:
        with self.lock:
            before = len(self._wanted)
            self._wanted.update(partitions)
            if len(self._wanted) != before:
                self._assignment_changed = True
                self._changed.notify_all()

    def catch_up(self, partitions: Iterable[TopicIdPartition]) -> None:
        """Makes held partitions not ready again until the events published so far (up to the
        metadata partition's end now) are applied: a broker that starts leading one must see
        the segments its predecessor finished before deciding what is left to tier, or it
        uploads them a second time."""
        with self.lock:
            changed = False
            for partition in partitions:
                held = self._held.get(partition)
                if held is not None and held.ready:
                    held.ready_at = -1
                    changed = True
            if changed:
                self._changed.notify_all()

    def remove_assignments(self, partitions: Iterable[TopicIdPartition]) -> None:
        with self.lock:
            before = len(self._wanted)
            self._wanted.difference_update(partitions)
            if len(self._wanted) != before:
                self._assignment_changed = True
                self._changed.notify_all()

    # --- what the manager reads (call with ``lock`` held) --------------------------------------

    def held(self, partition: TopicIdPartition) -> HeldPartition:
        """The partition's state, for a lookup.

        :raises RemoteResourceNotFoundError: this broker does not hold the partition, or its
            remote metadata was deleted (DELETE_PARTITION_FINISHED).
        :raises RemoteStorageNotReadyError: the partition is held but still loading.
        """
        held = self.held_for_write(partition)
        if held is None:
            raise RemoteResourceNotFoundError(
                f"remote log metadata of {partition} is not held by this broker: it neither "
                "leads nor follows the partition"
            )
        if held.deleted:
            raise RemoteResourceNotFoundError(f"the remote log metadata of {partition} was deleted")
        return held

    def assigned(self, partition: TopicIdPartition) -> bool:
        """Whether this broker leads or follows ``partition`` (loaded or not)."""
        return partition in self._wanted

    def held_for_write(self, partition: TopicIdPartition) -> HeldPartition | None:
        """The partition's state to check a write against, or None if it is not held here (the
        event is then published unchecked, for whichever broker is assigned it).

        :raises RemoteStorageNotReadyError: the partition is held but still loading.
        """
        if not self.assigned(partition):
            return None
        held = self._held.get(partition)
        if held is None:
            raise RemoteStorageNotReadyError(
                f"remote log metadata of {partition} is not loaded yet"
            )
        if not held.ready:
            raise RemoteStorageNotReadyError(
                f"remote log metadata of {partition} is still loading from metadata partition "
                f"{held.metadata_partition}"
            )
        return held

    def is_ready(self, partition: TopicIdPartition) -> bool:
        held = self._held.get(partition)
        return held is not None and held.ready

    def ready_partitions(self) -> frozenset[TopicIdPartition]:
        with self.lock:
            return frozenset(tip for tip, held in self._held.items() if held.ready)

    def wait_until_consumed(self, metadata_partition: int, offset: int, timeout_s: float) -> None:
        """Returns once the record at ``offset`` of ``metadata_partition`` has been applied.

        :raises RemoteStorageError: the partition is not consumed here, or not in time.
        """
        deadline = time.monotonic() + timeout_s
        with self.lock:
            while self._positions.get(metadata_partition, -1) <= offset:
                if self._closing:
                    raise RemoteStorageError("the remote log metadata manager is closing")
                if not any(h.metadata_partition == metadata_partition for h in self._held.values()):
                    raise RemoteStorageError(
                        f"metadata partition {metadata_partition} is not consumed by this broker"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RemoteStorageError(
                        f"the event at offset {offset} of {self._topic}-{metadata_partition} was "
                        f"not consumed within {timeout_s * 1000:.0f} ms"
                    )
                self._changed.wait(remaining)

    # --- the loop -----------------------------------------------------------------------------

    def _run(self) -> None:
        next_checkpoint = time.monotonic() + self._checkpoint_interval_s
        failures = 0
        while True:
            try:
                with self.lock:
                    while not self._closing and not self._wanted and not self._held:
                        self._changed.wait()
                    if self._closing:
                        return
                    changed, self._assignment_changed = self._assignment_changed, False
                if changed:
                    try:
                        self._reassign()
                    except BaseException:
                        with self.lock:  # try the whole reassignment again next round
                            self._assignment_changed = True
                        raise
                self._find_end_offsets()
                if self._held:
                    records = self._consumer.poll(_POLL_MS)
                    self._apply(records)
                failures = 0
            except RetriableError as err:
                failures += 1
                log.debug("remote log metadata consumer will retry: %s", err)
                self._pause(min(0.05 * failures, 1.0))
            except Exception:
                failures += 1
                log.exception("remote log metadata consumer failed; retrying")
                self._pause(min(0.1 * failures, 2.0))
            if time.monotonic() >= next_checkpoint:
                self._checkpoint()
                next_checkpoint = time.monotonic() + self._checkpoint_interval_s

    def _pause(self, seconds: float) -> None:
        with self.lock:
            if not self._closing:
                self._changed.wait(seconds)

    def _reassign(self) -> None:
        with self.lock:
            wanted = set(self._wanted)
            for gone in set(self._held) - wanted:
                del self._held[gone]
            added = []
            for tip in wanted - set(self._held):
                metadata_partition = self._partition_for(tip)
                snapshot = self._snapshots.pop(tip, None)
                held = None
                if snapshot is not None:
                    held = _restored(tip, metadata_partition, snapshot)
                if held is None:
                    cache = RemoteLogMetadataCache(tip, initialized=False)
                    held = HeldPartition(cache, metadata_partition, 0)
                self._held[tip] = held
                added.append(held)
            in_use = sorted({h.metadata_partition for h in self._held.values()})
            for metadata_partition in list(self._positions):
                if metadata_partition not in in_use:
                    del self._positions[metadata_partition]
            # Where each metadata partition must be read from for the newcomers.
            rewind: dict[int, int] = {}
            for held in added:
                current = rewind.get(held.metadata_partition)
                rewind[held.metadata_partition] = (
                    held.start if current is None else min(current, held.start)
                )
            for metadata_partition, target in rewind.items():
                position = self._positions.get(metadata_partition)
                if position is not None and position <= target:
                    continue
                if position is not None:  # partitions already reading it keep their place
                    for held in self._held.values():
                        if held.metadata_partition == metadata_partition and held not in added:
                            held.start = max(held.start, position)
                self._positions[metadata_partition] = target
        self._consumer.assign(TopicPartition(self._topic, mp) for mp in in_use)
        with self.lock:
            for metadata_partition, target in rewind.items():
                if self._positions.get(metadata_partition) == target:
                    self._consumer.seek(TopicPartition(self._topic, metadata_partition), target)

    def _find_end_offsets(self) -> None:
        """The end offsets newly assigned partitions must reach; marks the caught-up ready."""
        with self.lock:
            unknown = {h.metadata_partition for h in self._held.values() if h.ready_at == -1}
        if not unknown:
            return
        tps = [TopicPartition(self._topic, mp) for mp in sorted(unknown)]
        ends = self._consumer.end_offsets(tps)
        begins = self._consumer.beginning_offsets(tps)
        with self.lock:
            for held in self._held.values():
                if held.ready_at != -1:
                    continue
                tp = TopicPartition(self._topic, held.metadata_partition)
                end, begin = ends.get(tp), begins.get(tp)
                if end is None or begin is None:
                    continue
                held.ready_at = end
                if begin >= end:
                    held.start = max(held.start, end)
                    position = self._positions.get(held.metadata_partition, 0)
                    self._positions[held.metadata_partition] = max(position, end)
            self._mark_ready()

    def _apply(self, records: list[ConsumerRecord]) -> None:
        with self.lock:
            for record in records:
                metadata_partition, offset = record.partition, record.offset
                self._positions[metadata_partition] = offset + 1
                if record.value is None:
                    continue  # a tombstone: what it deletes was already applied before it
                try:
                    event = decode_event(record.value)
                except MetadataFormatError as err:
                    log.error(
                        "skipping unreadable remote log metadata event at %s-%d offset %d: %s",
                        self._topic,
                        metadata_partition,
                        offset,
                        err,
                    )
                    continue
                if isinstance(event, RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate):
                    tip = event.remote_log_segment_id.topic_id_partition
                else:
                    tip = event.topic_id_partition
                held = self._held.get(tip)
                if held is None or offset < held.start:
                    continue
                if _already_past(held, event):
                    log.debug("%s: skipping a repeated event at offset %d", tip, offset)
                    continue
                try:
                    _apply_event(held, event)
                except (InvalidStateTransitionError, RemoteResourceNotFoundError) as err:
                    log.warning(
                        "%s: ignoring remote log metadata event at offset %d: %s", tip, offset, err
                    )
            self._mark_ready()
            self._changed.notify_all()

    def _mark_ready(self) -> None:
        for held in self._held.values():
            if held.ready_at is None or held.ready_at == -1:
                continue
            consumed = max(held.start, self._positions.get(held.metadata_partition, 0))
            if consumed >= held.ready_at:
                held.ready_at = None
                held.cache.mark_initialized()

    # --- checkpoint ---------------------------------------------------------------------------

    def _load_checkpoint(self) -> dict[TopicIdPartition, PartitionSnapshot]:
        if self._checkpoint_path is None:
            return {}
        try:
            return read_checkpoint(self._checkpoint_path)
        except (MetadataFormatError, OSError) as err:
            log.warning("ignoring the remote log metadata checkpoint, replaying the topic: %s", err)
            return {}

    def _checkpoint(self) -> None:
        if self._checkpoint_path is None:
            return
        with self.lock:
            snapshots = []
            for tip, held in self._held.items():
                if not held.ready:
                    continue
                segments, epochs = held.cache.snapshot()
                consumed = max(held.start, self._positions.get(held.metadata_partition, 0))
                snapshots.append(
                    PartitionSnapshot(tip, consumed - 1, segments, epochs, held.delete_state)
                )
            # Saved partitions that are not held now stay saved for a later assignment.
            snapshots.extend(s for tip, s in self._snapshots.items() if tip not in self._held)
        try:
            write_checkpoint(self._checkpoint_path, snapshots)
        except (OSError, ValueError, TierlogError) as err:
            log.warning("cannot write the remote log metadata checkpoint: %s", err)


def _restored(
    tip: TopicIdPartition, metadata_partition: int, snapshot: PartitionSnapshot
) -> HeldPartition | None:
    """The partition as its checkpoint saved it, or None (it is then replayed) if the saved
    state does not hold together."""
    try:
        cache = RemoteLogMetadataCache.restore(
            tip, snapshot.segments, snapshot.epochs, initialized=False
        )
    except ValueError as err:
        log.warning("%s: ignoring its checkpointed remote log metadata: %s", tip, err)
        return None
    return HeldPartition(
        cache, metadata_partition, snapshot.consumed_offset + 1, snapshot.delete_state
    )


def _already_past(
    held: HeldPartition,
    event: RemoteLogSegmentMetadata
    | RemoteLogSegmentMetadataUpdate
    | RemotePartitionDeleteMetadata,
) -> bool:
    """Whether what ``event`` describes is already in a later state here.

    Such an event repeats history already applied: the live state that an unkeyed topic was
    rewritten with when it turned compacted (see ``migration``) follows the events it came from.
    """
    if isinstance(event, RemotePartitionDeleteMetadata):
        current = held.live_delete_state
        return current is not None and current.state.value > event.state.value
    existing = held.cache.segment(event.remote_log_segment_id)
    return existing is not None and existing.state.value > event.state.value


def _apply_event(
    held: HeldPartition,
    event: RemoteLogSegmentMetadata
    | RemoteLogSegmentMetadataUpdate
    | RemotePartitionDeleteMetadata,
) -> None:
    if isinstance(event, RemoteLogSegmentMetadata):
        held.cache.add_copy_in_progress_segment(event)
        held.delete_state = None if held.deleted else held.delete_state  # it starts afresh
    elif isinstance(event, RemoteLogSegmentMetadataUpdate):
        held.cache.update_remote_log_segment_metadata(event)
    else:
        current = held.live_delete_state
        check_transition(current.state if current is not None else None, event.state)
        if event.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
            held.cache = RemoteLogMetadataCache(
                held.cache.topic_id_partition, initialized=held.cache.is_initialized
            )
        held.delete_state = event
