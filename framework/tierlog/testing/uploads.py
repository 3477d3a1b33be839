"""Segment metadata for metadata-manager tests, and the state changes the runtime makes to it.

The copy task adds COPY_SEGMENT_STARTED and moves it to COPY_SEGMENT_FINISHED; the expiration
task moves it through DELETE_SEGMENT_STARTED to DELETE_SEGMENT_FINISHED. ``Uploads`` makes those
calls through the facade and returns the metadata as the manager should now hold it, so a test
compares the manager's answers with values it can compute.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from ..model import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from ..spi import RemoteLogMetadataManager

STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
DELETE_STARTED = RemoteLogSegmentState.DELETE_SEGMENT_STARTED
DELETE_FINISHED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED


class Uploads:
    """Makes segment metadata for ``partition`` and drives it through its states."""

    def __init__(self, rlmm: RemoteLogMetadataManager, partition: TopicIdPartition) -> None:
        self.rlmm = rlmm
        self.partition = partition
        self._clock = itertools.count(1_000)

    def new(
        self,
        start: int,
        end: int,
        epochs: Mapping[int, int] | None = None,
        *,
        partition: TopicIdPartition | None = None,
        size: int | None = None,
        txn_idx_empty: bool = True,
        state: RemoteLogSegmentState = STARTED,
    ) -> RemoteLogSegmentMetadata:
        """Metadata for a fresh upload of offsets ``[start, end]``; epoch 0 unless ``epochs``."""
        return RemoteLogSegmentMetadata(
            remote_log_segment_id=RemoteLogSegmentId.generate_new(partition or self.partition),
            start_offset=start,
            end_offset=end,
            max_timestamp_ms=end,
            broker_id=1,
            event_timestamp_ms=next(self._clock),
            segment_size_in_bytes=end - start + 1 if size is None else size,
            segment_leader_epochs=epochs if epochs is not None else {0: start},
            state=state,
            txn_idx_empty=txn_idx_empty,
        )

    def update(
        self,
        metadata: RemoteLogSegmentMetadata,
        state: RemoteLogSegmentState,
        custom_metadata: CustomMetadata | None = None,
    ) -> RemoteLogSegmentMetadataUpdate:
        return RemoteLogSegmentMetadataUpdate(
            remote_log_segment_id=metadata.remote_log_segment_id,
            event_timestamp_ms=next(self._clock),
            custom_metadata=custom_metadata,
            state=state,
            broker_id=2,
        )

    def add(
        self,
        start: int,
        end: int,
        epochs: Mapping[int, int] | None = None,
        *,
        partition: TopicIdPartition | None = None,
        size: int | None = None,
        txn_idx_empty: bool = True,
    ) -> RemoteLogSegmentMetadata:
        """Record a COPY_SEGMENT_STARTED upload; return its metadata."""
        metadata = self.new(
            start, end, epochs, partition=partition, size=size, txn_idx_empty=txn_idx_empty
        )
        self.rlmm.add_remote_log_segment_metadata(metadata)
        return metadata

    def move(
        self, metadata: RemoteLogSegmentMetadata, *states: RemoteLogSegmentState
    ) -> RemoteLogSegmentMetadata:
        """Apply updates to ``states`` in order; return the metadata the manager now holds."""
        for state in states:
            update = self.update(metadata, state)
            self.rlmm.update_remote_log_segment_metadata(update)
            metadata = metadata.create_with_updates(update)
        return metadata

    def upload(
        self,
        start: int,
        end: int,
        epochs: Mapping[int, int] | None = None,
        *,
        partition: TopicIdPartition | None = None,
        size: int | None = None,
        txn_idx_empty: bool = True,
    ) -> RemoteLogSegmentMetadata:
        """A complete upload: COPY_SEGMENT_STARTED, then COPY_SEGMENT_FINISHED."""
        added = self.add(
            start, end, epochs, partition=partition, size=size, txn_idx_empty=txn_idx_empty
        )
        return self.move(added, FINISHED)
