"""The copy task: tier a leader's rolled segments, oldest first, with Kafka's metadata protocol.

Each segment goes COPY_SEGMENT_STARTED (published before any byte is uploaded, so every object
written is referenced: a crash leaves a dangling segment retention deletes in time, see
``expiration``), then the upload of the segment with its indexes, producer snapshot and
leader-epoch checkpoint, then COPY_SEGMENT_FINISHED with the plugin's custom metadata. Only
FINISHED segments are ever read or counted; local retention waits for them. An upload that fails
for good is deleted at once; one that fails retriably stays dangling.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CustomMetadataSizeLimitExceededError, RetriableRemoteStorageError
from ..log import LeaderEpochCache, PartitionLog, UploadableSegment, write_empty_snapshot
from ..model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from . import metrics as m

if TYPE_CHECKING:
    from .manager import PartitionTasks, RemoteLogManager

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def find_highest_remote_offset(
    rlm: RemoteLogManager, plog: PartitionLog, tip: TopicIdPartition
) -> int:
    """The highest tiered offset of this log's epoch lineage (-1: none), newest epoch first.

    An epoch's remote end is clamped to where the epoch ends locally, so data a deposed leader
    tiered beyond this replica's lineage is never taken as tiered.
    """
    entries = plog.leader_epoch_cache.entries()
    for index in range(len(entries) - 1, -1, -1):
        epoch = entries[index].epoch
        highest = rlm.metadata.highest_offset_for_epoch(tip, epoch)
        if highest is None:
            continue
        if index + 1 < len(entries):
            highest = min(highest, entries[index + 1].start_offset - 1)
        return highest
    return -1


def candidates(plog: PartitionLog) -> list[UploadableSegment]:
    """Rolled segments below the LSO, above the tiered offset, and not below the log start."""
    start = plog.log_start_offset
    return [s for s in plog.segments_eligible_for_upload() if s.end_offset >= start]


def record_lag(rlm: RemoteLogManager, plog: PartitionLog) -> None:
    """RemoteCopyLagBytes/Segments: rolled segments only on the local disk."""
    highest = plog.highest_offset_in_remote_storage
    local_only = [s for s in plog.segments() if s.base_offset > highest and not s.is_active]
    tp = plog.topic_partition
    rlm.metrics.gauge(m.COPY_LAG_BYTES, tp).set(sum(s.size_in_bytes for s in local_only))
    rlm.metrics.gauge(m.COPY_LAG_SEGMENTS, tp).set(len(local_only))


def copy_log_segments(rlm: RemoteLogManager, task: PartitionTasks) -> int:
    """One run of the copy task for one partition; returns the number of segments tiered."""
    plog = task.partition.log
    tip = task.topic_id_partition
    if not task.initialized:
        plog.highest_offset_in_remote_storage = find_highest_remote_offset(rlm, plog, tip)
        task.initialized = True
    copied = 0
    # the lag is known before the first upload ends, and shrinks with each one
    record_lag(rlm, plog)
    try:
        for segment in candidates(plog):
            if not rlm.uploads_allowed(task):
                break
            if segment.end_offset <= plog.highest_offset_in_remote_storage:
                continue
            copy_segment(rlm, task, plog, tip, segment)
            copied += 1
            record_lag(rlm, plog)
    finally:
        record_lag(rlm, plog)
    return copied


def started_metadata(
    tip: TopicIdPartition,
    segment: UploadableSegment,
    broker_id: int,
    epoch_cache: LeaderEpochCache,
) -> RemoteLogSegmentMetadata:
    """COPY_SEGMENT_STARTED for an upload of ``segment`` by ``broker_id``, under a new id.

    A segment with no epochs of its own (written before leader epochs) takes the epoch its
    log's cache gives its base offset, so every remote segment names a lineage.
    """
    epochs = [(e.epoch, e.start_offset) for e in segment.leader_epochs]
    if not epochs:
        epoch = epoch_cache.epoch_for_offset(segment.base_offset)
        epochs = [(0 if epoch is None else epoch, segment.base_offset)]
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(tip),
        start_offset=segment.base_offset,
        end_offset=segment.end_offset,
        max_timestamp_ms=segment.max_timestamp,
        broker_id=broker_id,
        event_timestamp_ms=now_ms(),
        segment_size_in_bytes=segment.size_in_bytes,
        segment_leader_epochs=epochs,
        txn_idx_empty=segment.txn_index_path is None,
    )


def copy_segment(
    rlm: RemoteLogManager,
    task: PartitionTasks,
    plog: PartitionLog,
    tip: TopicIdPartition,
    segment: UploadableSegment,
) -> RemoteLogSegmentMetadata:
    """STARTED, upload, FINISHED for one segment; inputs are complete before STARTED."""
    tp = plog.topic_partition
    scratch: Path | None = None
    snapshot = segment.producer_snapshot
    if snapshot is None:
        scratch = Path(tempfile.mkdtemp(prefix="snapshot-", dir=rlm.scratch_dir))
        snapshot = write_empty_snapshot(scratch, segment.end_offset + 1)
        log.warning(
            "%s: segment %d has no producer snapshot at offset %d; tiering it with an empty "
            "snapshot (idempotent producers that wrote before offset %d are treated as expired "
            "by a replica that rebuilds from it)",
            tp,
            segment.base_offset,
            segment.end_offset + 1,
            segment.end_offset + 1,
        )
        rlm.metrics.meter(m.EMPTY_SNAPSHOTS, tp).mark()
    try:
        data = segment.to_log_segment_data(snapshot)
        started = started_metadata(tip, segment, rlm.broker_id, plog.leader_epoch_cache)
        rlm.copy_quota.acquire(segment.size_in_bytes, rlm.stop_event)
        segment_id = started.remote_log_segment_id
        rlm.segments_being_copied.add(segment_id)
        try:
            rlm.metadata.add_remote_log_segment_metadata(started)
            rlm.metrics.meter(m.COPY_REQUESTS, tp).mark()
            try:
                custom = rlm.storage.copy_log_segment_data(started, data)
            except RetriableRemoteStorageError:
                raise
            except Exception:
                rlm.delete_remote_segment(started, count=False)
                raise
            if custom is not None:
                try:
                    custom.check_size(rlm.custom_metadata_max_bytes)
                except CustomMetadataSizeLimitExceededError:
                    would_be = started.create_with_updates(
                        RemoteLogSegmentMetadataUpdate(
                            segment_id,
                            now_ms(),
                            custom,
                            RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                            rlm.broker_id,
                        )
                    )
                    rlm.delete_remote_segment(would_be, count=False)
                    task.cancelled = True
                    raise
            if rlm.crashed:
                raise RetriableRemoteStorageError(
                    f"{tp}: the broker crashed while segment {segment_id.id} was uploaded; it "
                    "stays COPY_SEGMENT_STARTED until retention deletes it"
                )
            update = RemoteLogSegmentMetadataUpdate(
                segment_id,
                now_ms(),
                custom,
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                rlm.broker_id,
            )
            rlm.metadata.update_remote_log_segment_metadata(update)
        finally:
            rlm.segments_being_copied.discard(segment_id)
        rlm.metrics.meter(m.COPY_BYTES, tp).mark(segment.size_in_bytes)
        plog.highest_offset_in_remote_storage = segment.end_offset
        return started.create_with_updates(update)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
