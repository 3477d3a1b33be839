"""The per-partition remote segment cache every metadata manager builds its answers from.

One ``RemoteLogMetadataCache`` holds what is known about one user partition's remote segments and
answers the read path's questions (which finished segment holds an offset in an epoch, how far an
epoch is tiered, what is left to clean up). Managers differ only in where events come from: the
in-memory manager applies them as they are called, a topic-based manager as it consumes them.

Neither class here locks: the manager that owns a cache serialises access to it.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import RemoteResourceNotFoundError
from ..model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    check_transition,
)

if TYPE_CHECKING:
    from .checkpoint import EpochSnapshot

__all__ = ["RemoteLogLeaderEpochState", "RemoteLogMetadataCache"]

log = logging.getLogger(__name__)


class RemoteLogLeaderEpochState:
    """What one leader epoch's share of the remote log looks like.

    Only COPY_SEGMENT_FINISHED segments are *referenced*: indexed by the offset at which this epoch
    starts inside them, so a floor lookup finds the segment serving an offset. Every other live
    segment of the epoch is *unreferenced* (still copying, being deleted, or superseded by a newer
    upload of the same range) and is kept only so listings still show it for clean-up.
    """

    def __init__(self) -> None:
        self._start_offsets: list[int] = []  # sorted keys of _offset_to_id
        self._offset_to_id: dict[int, RemoteLogSegmentId] = {}
        self._unreferenced: set[RemoteLogSegmentId] = set()
        self._highest_log_offset: int | None = None

    @property
    def highest_log_offset(self) -> int | None:
        """The last offset of this epoch ever tiered; deletions never lower it, so the copy task
        never re-uploads what it already copied."""
        return self._highest_log_offset

    @property
    def unreferenced_segment_ids(self) -> frozenset[RemoteLogSegmentId]:
        return frozenset(self._unreferenced)

    @property
    def referenced_segment_ids(self) -> list[RemoteLogSegmentId]:
        """Finished segments serving this epoch, by the offset the epoch starts at in them."""
        return [self._offset_to_id[offset] for offset in self._start_offsets]

    def segment_ids(self) -> set[RemoteLogSegmentId]:
        """Every live segment holding this epoch, referenced or not."""
        return set(self._offset_to_id.values()) | self._unreferenced

    def floor_segment_id(self, offset: int) -> RemoteLogSegmentId | None:
        """The finished segment whose share of this epoch starts at or below ``offset``.

        The caller still has to check that ``offset`` is not past the epoch's end in it.
        """
        index = bisect.bisect_right(self._start_offsets, offset)
        return self._offset_to_id[self._start_offsets[index - 1]] if index else None

    def handle_copy_started(self, segment_id: RemoteLogSegmentId) -> None:
        self._unreferenced.add(segment_id)

    def handle_copy_finished(
        self, start_offset: int, segment_id: RemoteLogSegmentId, epoch_end_offset: int
    ) -> None:
        """Serve the epoch's ``[start_offset, epoch_end_offset]`` from ``segment_id``.

        A new leader may re-upload a range an earlier leader already tiered, as one segment that
        covers several old ones or overlaps them. Old entries starting inside the new range are
        unreferenced when the new segment reaches at least as far as anything tiered so far, so
        lookups go to the newer upload; the old ones stay listed until they are deleted.
        """
        while (
            self._start_offsets
            and self._start_offsets[-1] >= start_offset
            and self._highest_log_offset is not None
            and self._highest_log_offset <= epoch_end_offset
        ):
            superseded = self._offset_to_id.pop(self._start_offsets.pop())
            self._unreferenced.add(superseded)

        replaced = self._offset_to_id.get(start_offset)
        if replaced is None:
            bisect.insort(self._start_offsets, start_offset)
        elif replaced != segment_id:
            self._unreferenced.add(replaced)
        self._offset_to_id[start_offset] = segment_id
        self._unreferenced.discard(segment_id)
        if self._highest_log_offset is None or epoch_end_offset > self._highest_log_offset:
            self._highest_log_offset = epoch_end_offset

    def handle_delete_started(self, start_offset: int, segment_id: RemoteLogSegmentId) -> None:
        """Stop serving the segment, but keep it listed so a failed delete is retried."""
        if self._offset_to_id.get(start_offset) == segment_id:
            del self._offset_to_id[start_offset]
            self._start_offsets.remove(start_offset)
        self._unreferenced.add(segment_id)

    def handle_delete_finished(self, segment_id: RemoteLogSegmentId) -> None:
        self._unreferenced.discard(segment_id)


class RemoteLogMetadataCache:
    """All live remote segments of one partition, indexed per leader epoch.

    Holds every segment until it reaches DELETE_SEGMENT_FINISHED. What each state is visible to:

    * COPY_SEGMENT_STARTED: listings only, so a failed upload is found and cleaned up;
    * COPY_SEGMENT_FINISHED: listings and ``remote_log_segment_metadata`` (unless a newer upload
      of the same range superseded it);
    * DELETE_SEGMENT_STARTED: listings only, so a failed delete is retried;
    * DELETE_SEGMENT_FINISHED: nothing; the segment is forgotten.

    Epoch states are kept once created, even when empty, because they carry the epoch's highest
    tiered offset, which must survive the deletion of the segments that set it.

    A cache starts *initialized* unless a manager must first replay history into it; while it is
    not, an update for an unknown segment is dropped with a log line instead of rejected, because
    the event that added the segment may already be gone from the history being replayed.
    """

    def __init__(self, topic_id_partition: TopicIdPartition, *, initialized: bool = True) -> None:
        self.topic_id_partition = topic_id_partition
        self._id_to_metadata: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = {}
        self._epochs: dict[int, RemoteLogLeaderEpochState] = {}
        self._initialized = initialized

    def __repr__(self) -> str:
        return (
            f"RemoteLogMetadataCache({self.topic_id_partition}, "
            f"segments={len(self._id_to_metadata)}, epochs={sorted(self._epochs)})"
        )

    # --- readiness -------------------------------------------------------------------------

    @property
    def is_initialized(self) -> bool:
        return self._initialized

    def mark_initialized(self) -> None:
        """The history is replayed: from now on an update for an unknown segment is an error."""
        self._initialized = True

    # --- events ----------------------------------------------------------------------------

    def add_copy_in_progress_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Record a segment whose upload has started (state COPY_SEGMENT_STARTED).

        Adding the same id again while it is still copying is a retry and replaces the record.

        :raises InvalidStateTransitionError: the metadata is in another state, or the id is
            already past COPY_SEGMENT_STARTED.
        """
        self._check_partition(metadata.topic_id_partition)
        segment_id = metadata.remote_log_segment_id
        existing = self._id_to_metadata.get(segment_id)
        check_transition(existing.state if existing is not None else None, metadata.state)
        if existing is not None:  # a retried add: drop the earlier attempt's entries
            for epoch, _start in existing.segment_leader_epochs:
                self._epochs[epoch].handle_delete_finished(segment_id)
        for epoch, _start in metadata.segment_leader_epochs:
            self._epoch_state(epoch).handle_copy_started(segment_id)
        self._id_to_metadata[segment_id] = metadata

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """Move a known segment to a new state.

        Repeating the current state is a retry: it only refreshes the event fields (broker,
        time, custom metadata), so a retried COPY_SEGMENT_FINISHED of an upload that a newer one
        superseded does not put the old upload back in service.

        :raises RemoteResourceNotFoundError: the segment id is unknown (only once initialized).
        :raises InvalidStateTransitionError: the state machine forbids the move; nothing changes.
        """
        self._check_partition(update.topic_id_partition)
        segment_id = update.remote_log_segment_id
        existing = self._id_to_metadata.get(segment_id)
        if existing is None:
            if not self._initialized:
                log.warning(
                    "%s: dropping a %s update of unknown segment %s while replaying history",
                    self.topic_id_partition,
                    update.state.name,
                    segment_id,
                )
                return
            raise RemoteResourceNotFoundError(f"no remote log segment metadata for {segment_id}")
        check_transition(existing.state, update.state)
        updated = existing.create_with_updates(update)
        if existing.state is update.state:
            self._id_to_metadata[segment_id] = updated
            return

        target = update.state
        if target is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            for epoch, start in updated.segment_leader_epochs:
                end = updated.end_offset_for_epoch(epoch)
                assert end is not None
                self._epoch_state(epoch).handle_copy_finished(start, segment_id, end)
            self._id_to_metadata[segment_id] = updated
        elif target is RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
            for epoch, start in updated.segment_leader_epochs:
                self._epoch_state(epoch).handle_delete_started(start, segment_id)
            self._id_to_metadata[segment_id] = updated
        elif target is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            for epoch, _start in updated.segment_leader_epochs:
                self._epoch_state(epoch).handle_delete_finished(segment_id)
            del self._id_to_metadata[segment_id]
        else:  # pragma: no cover - check_transition rules out a move back to COPY_SEGMENT_STARTED
            raise AssertionError(f"unexpected target state {target}")

    # --- queries ---------------------------------------------------------------------------

    def segment(self, segment_id: RemoteLogSegmentId) -> RemoteLogSegmentMetadata | None:
        """The live segment with this id, in whatever state, or None."""
        return self._id_to_metadata.get(segment_id)

    def remote_log_segment_metadata(
        self, leader_epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """The finished segment holding ``offset`` within ``leader_epoch``, or None.

        A segment can hold several epochs; it only answers for the offsets of ``leader_epoch``
        inside it, so an offset written under the next epoch is never served for this one.
        """
        state = self._epochs.get(leader_epoch)
        segment_id = state.floor_segment_id(offset) if state is not None else None
        if segment_id is None:
            return None
        metadata = self._id_to_metadata[segment_id]
        epoch_end = metadata.end_offset_for_epoch(leader_epoch)
        return metadata if epoch_end is not None and offset <= epoch_end else None

    def highest_offset_for_epoch(self, leader_epoch: int) -> int | None:
        state = self._epochs.get(leader_epoch)
        return state.highest_log_offset if state is not None else None

    def list_remote_log_segments(self, leader_epoch: int) -> list[RemoteLogSegmentMetadata]:
        """Live segments holding ``leader_epoch`` (served or not), by start offset."""
        state = self._epochs.get(leader_epoch)
        if state is None:
            return []
        return _by_start_offset(self._id_to_metadata[i] for i in state.segment_ids())

    def list_all_remote_log_segments(self) -> list[RemoteLogSegmentMetadata]:
        """Every live segment of the partition, by start offset."""
        return _by_start_offset(self._id_to_metadata.values())

    def remote_log_size(self, leader_epoch: int) -> int:
        """Bytes of the segments listed for ``leader_epoch``; a segment counts in each epoch."""
        return sum(m.segment_size_in_bytes for m in self.list_remote_log_segments(leader_epoch))

    def next_segment_with_txn_index(
        self, leader_epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """The first finished segment from ``offset`` on in ``leader_epoch`` with a transaction
        index, walking contiguous segments of the epoch; a gap or the epoch's end stops the walk.
        """
        segment = self.remote_log_segment_metadata(leader_epoch, offset)
        while segment is not None and segment.txn_idx_empty:
            epoch_end = segment.end_offset_for_epoch(leader_epoch)
            assert epoch_end is not None
            segment = self.remote_log_segment_metadata(leader_epoch, epoch_end + 1)
        return segment

    # --- checkpoints -----------------------------------------------------------------------

    def snapshot(self) -> tuple[tuple[RemoteLogSegmentMetadata, ...], tuple[EpochSnapshot, ...]]:
        """The live segments and each epoch's served segments and highest offset: enough for
        ``restore`` to rebuild this cache exactly, without replaying the events."""
        from .checkpoint import EpochSnapshot

        epochs = tuple(
            EpochSnapshot(
                epoch,
                state.highest_log_offset,
                tuple((o, state._offset_to_id[o].id) for o in state._start_offsets),
            )
            for epoch, state in sorted(self._epochs.items())
        )
        return tuple(self._id_to_metadata.values()), epochs

    @classmethod
    def restore(
        cls,
        topic_id_partition: TopicIdPartition,
        segments: Iterable[RemoteLogSegmentMetadata],
        epochs: Iterable[EpochSnapshot],
        *,
        initialized: bool = True,
    ) -> RemoteLogMetadataCache:
        """The cache ``snapshot`` described. Segments of an epoch that it does not serve are
        its unreferenced ones.

        :raises ValueError: the snapshot refers to a segment it does not hold, or holds one of
            another partition.
        """
        cache = cls(topic_id_partition, initialized=initialized)
        by_uuid: dict[object, RemoteLogSegmentId] = {}
        id_to_metadata = cache._id_to_metadata
        epoch_state = cache._epoch_state
        for metadata in segments:  # runs once per segment at start-up: kept lean
            segment_id = metadata.remote_log_segment_id
            if segment_id.topic_id_partition is not topic_id_partition:
                cache._check_partition(segment_id.topic_id_partition)
            id_to_metadata[segment_id] = metadata
            by_uuid[segment_id.id] = segment_id
            for epoch, _start in metadata.segment_leader_epochs:
                epoch_state(epoch)._unreferenced.add(segment_id)
        for saved in epochs:
            state = cache._epoch_state(saved.leader_epoch)
            state._highest_log_offset = saved.highest_log_offset
            for offset, uuid in saved.referenced:
                served = by_uuid.get(uuid)
                if served is None:
                    raise ValueError(f"epoch {saved.leader_epoch} serves unknown segment {uuid}")
                state._start_offsets.append(offset)
                state._offset_to_id[offset] = served
                state._unreferenced.discard(served)
            state._start_offsets.sort()
        return cache

    # --- helpers ---------------------------------------------------------------------------

    def _epoch_state(self, leader_epoch: int) -> RemoteLogLeaderEpochState:
        state = self._epochs.get(leader_epoch)
        if state is None:
            state = self._epochs[leader_epoch] = RemoteLogLeaderEpochState()
        return state

    def _check_partition(self, topic_id_partition: TopicIdPartition) -> None:
        if topic_id_partition != self.topic_id_partition:
            raise ValueError(
                f"event for {topic_id_partition} applied to the cache of {self.topic_id_partition}"
            )


def _by_start_offset(
    segments: Iterable[RemoteLogSegmentMetadata],
) -> list[RemoteLogSegmentMetadata]:
    return sorted(
        segments,
        key=lambda m: (m.start_offset, m.end_offset, m.remote_log_segment_id),
    )
