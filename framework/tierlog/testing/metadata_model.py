"""A reference model of one partition's remote log metadata, for property-based checks.

The model knows only what the SPI promises, written as plainly as possible: segments by id with
their current metadata, and each epoch's highest tiered offset. The metadata contract drives a
manager and this model with the same random operations and compares every answer after each
step, so a third-party manager (SQL, object-store manifests...) is checked on sequences nobody
wrote by hand. Segments never overlap here, so no upload supersedes another.
"""

from __future__ import annotations

import attrs

from ..model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)

__all__ = ["MetadataModel"]

FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
DELETE_FINISHED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED


@attrs.define
class MetadataModel:
    """What a correct manager answers for one partition after the operations applied so far."""

    #: Live segments (not DELETE_SEGMENT_FINISHED), by id, as the manager must now hold them.
    segments: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = attrs.field(factory=dict)
    #: The highest offset ever tiered per epoch; deletions never lower it.
    highest: dict[int, int] = attrs.field(factory=dict)

    def allows(self, segment_id: RemoteLogSegmentId, target: RemoteLogSegmentState) -> bool:
        current = self.segments.get(segment_id)
        return current is not None and RemoteLogSegmentState.is_valid_transition(
            current.state, target
        )

    def added(self, metadata: RemoteLogSegmentMetadata) -> None:
        self.segments[metadata.remote_log_segment_id] = metadata

    def moved(self, metadata: RemoteLogSegmentMetadata) -> None:
        """``metadata`` is the segment after an accepted update."""
        segment_id = metadata.remote_log_segment_id
        if metadata.state is DELETE_FINISHED:
            del self.segments[segment_id]
            return
        self.segments[segment_id] = metadata
        if metadata.state is FINISHED:
            for epoch, _start in metadata.segment_leader_epochs:
                end = metadata.end_offset_for_epoch(epoch)
                assert end is not None
                self.highest[epoch] = max(self.highest.get(epoch, end), end)

    # --- the answers -----------------------------------------------------------------------

    def listed(self, epoch: int | None = None) -> list[RemoteLogSegmentMetadata]:
        """Live segments (of ``epoch``), by start offset."""
        found = [
            s
            for s in self.segments.values()
            if epoch is None or s.end_offset_for_epoch(epoch) is not None
        ]
        return sorted(found, key=lambda s: s.start_offset)

    def lookup(self, epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """The finished segment holding ``offset`` within ``epoch``."""
        for segment in self.segments.values():
            if segment.state is not FINISHED:
                continue
            start = segment.leader_epochs.get(epoch)
            end = segment.end_offset_for_epoch(epoch)
            if start is not None and end is not None and start <= offset <= end:
                return segment
        return None

    def size(self, epoch: int) -> int:
        return sum(s.segment_size_in_bytes for s in self.listed(epoch))
