"""What tiered storage may copy: the rolled segments below the LSO, with every file they need.

Kafka's ``RemoteLogManager`` gathers these files itself; here the log hands them out as one
value, so the remote tier never reaches into the log's segments and the choice of which ones
qualify stays next to the log's offsets.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ..model import LogSegmentData
from .epoch_cache import EpochEntry, LeaderEpochCheckpointFile

if TYPE_CHECKING:
    from .partition_log import PartitionLog


@attrs.frozen
class UploadableSegment:
    """A rolled segment that tiered storage may copy, with every file it needs.

    ``producer_snapshot`` is the snapshot named by the next segment's base offset, None when
    the log has none (data written before snapshots were taken at every roll).
    """

    base_offset: int
    end_offset: int
    size_in_bytes: int
    max_timestamp: int
    log_path: Path
    offset_index_path: Path
    time_index_path: Path
    txn_index_path: Path | None
    producer_snapshot: Path | None
    leader_epochs: tuple[EpochEntry, ...]

    @property
    def leader_epoch_checkpoint(self) -> bytes:
        """The leader-epoch checkpoint text cut to this segment (its LEADER_EPOCH index)."""
        return LeaderEpochCheckpointFile.encode(self.leader_epochs)

    def to_log_segment_data(self, producer_snapshot: Path | None = None) -> LogSegmentData:
        """The files as ``copy_log_segment_data`` takes them.

        ``producer_snapshot`` overrides (or supplies a missing) snapshot; ValueError if there
        is none at all.
        """
        snapshot = producer_snapshot or self.producer_snapshot
        if snapshot is None:
            raise ValueError(
                f"segment {self.base_offset} has no producer snapshot at offset "
                f"{self.end_offset + 1}; supply one"
            )
        return LogSegmentData(
            log_segment=self.log_path,
            offset_index=self.offset_index_path,
            time_index=self.time_index_path,
            transaction_index=self.txn_index_path,
            producer_snapshot_index=snapshot,
            leader_epoch_index=self.leader_epoch_checkpoint,
        )


def segments_eligible_for_upload(plog: PartitionLog) -> list[UploadableSegment]:
    """``PartitionLog.segments_eligible_for_upload``, with the log's lock held."""
    lso = plog.last_stable_offset
    found = []
    for index, segment in enumerate(plog._segments[:-1]):
        next_base = plog._bases[index + 1]
        end_offset = next_base - 1
        if next_base > lso:
            break
        if end_offset <= plog._highest_offset_in_remote_storage or segment.size == 0:
            continue
        txn_path = segment.txn_index.path
        found.append(
            UploadableSegment(
                base_offset=segment.base_offset,
                end_offset=end_offset,
                size_in_bytes=segment.size,
                max_timestamp=plog._touch(segment).max_timestamp_so_far,
                log_path=segment.log_path,
                offset_index_path=segment.offset_index.path,
                time_index_path=segment.time_index.path,
                txn_index_path=None if segment.txn_index.is_empty() else txn_path,
                producer_snapshot=plog._producer_state.snapshot_file(next_base),
                leader_epochs=tuple(
                    plog._epoch_cache.entries_in_range(segment.base_offset, end_offset)
                ),
            )
        )
    return found
