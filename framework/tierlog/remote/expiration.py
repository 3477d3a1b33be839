"""The expiration task: remote retention on the leader, and cleanup of what copies left behind.

Retention covers both tiers: by time (a segment's newest record), by size (local-only bytes plus
the remote bytes of the current lineage) and by log start offset (DeleteRecords). The log start
offset moves *before* any data is deleted, so a reader never sees an offset that is about to
vanish. Segments written under an epoch this replica's lineage does not contain (a deposed
leader's) are deleted too, and deletions that failed half way (DELETE_SEGMENT_STARTED) are
retried.

A COPY_SEGMENT_STARTED segment this broker is not copying is *dangling*, as Kafka calls it: its
upload was abandoned (a crash, a failed copy) or is still under way on another broker, the
previous leader, which goes on with the upload it began after losing the leadership. Nothing in
the metadata tells the two apart, so, as in Kafka, a dangling segment is left alone until
retention reaches it: once the log start offset has passed its end, its newest record is older
than ``retention.ms``, or it lies wholly before the lineage's first epoch. Deleting it sooner
would let a running upload land after the deletion, leaving objects no metadata refers to. A
segment this broker is copying is never deleted.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..log import EpochEntry, PartitionLog
from ..model import RemoteLogSegmentMetadata, RemoteLogSegmentState
from . import metrics as m

if TYPE_CHECKING:
    from .manager import PartitionTasks, RemoteLogManager

log = logging.getLogger(__name__)

State = RemoteLogSegmentState


def within_lineage(
    segment: RemoteLogSegmentMetadata, lineage: list[EpochEntry], log_end_offset: int
) -> bool:
    """Whether every epoch of ``segment`` (from the lineage's first on) matches the lineage."""
    if not lineage:
        return False
    starts = {e.epoch: e.start_offset for e in lineage}
    epochs = [e.epoch for e in lineage]
    pairs = [(ep, off) for ep, off in segment.segment_leader_epochs if ep >= epochs[0]]
    if not pairs or segment.segment_leader_epochs[-1][0] > epochs[-1]:
        return False
    for index, (epoch, offset) in enumerate(pairs):
        if epoch not in starts:
            return False
        if epoch != epochs[0] and offset < starts[epoch]:
            return False
        end = pairs[index + 1][1] - 1 if index + 1 < len(pairs) else segment.end_offset
        position = epochs.index(epoch)
        if position + 1 < len(epochs) and end >= lineage[position + 1].start_offset:
            return False
    return segment.end_offset < log_end_offset


def expire_remote_segments(
    rlm: RemoteLogManager, task: PartitionTasks, *, keep_dangling: bool = False
) -> int:
    """One run of the expiration task for one partition; returns segments deleted.

    ``keep_dangling``: a job in another process is uploading (it holds the copy slot), so no
    COPY_SEGMENT_STARTED segment is taken for an abandoned one this time.
    """
    plog = task.partition.log
    tip = task.topic_id_partition
    tp = plog.topic_partition
    segments = sorted(
        rlm.metadata.list_remote_log_segments(tip), key=lambda s: (s.start_offset, s.end_offset)
    )
    live = [s for s in segments if s.state is not State.DELETE_SEGMENT_FINISHED]
    finished = [s for s in live if s.state is State.COPY_SEGMENT_FINISHED]
    rlm.metrics.gauge(m.METADATA_COUNT, tp).set(len(live))
    rlm.metrics.gauge(m.LOG_SIZE_BYTES, tp).set(sum(s.segment_size_in_bytes for s in finished))
    if not live:
        return 0
    doomed = [s for s in live if s.state is State.DELETE_SEGMENT_STARTED]
    new_start = plog.log_start_offset
    doomed_finished, new_start = _breached(plog, finished, new_start)
    if new_start > plog.log_start_offset:
        plog.delete_records(min(new_start, plog.high_watermark))
    dangling = [s for s in live if s.state is State.COPY_SEGMENT_STARTED]
    if not keep_dangling:
        doomed += _expired_dangling(rlm, plog, dangling)
    deleted = 0
    for segment in [*doomed, *doomed_finished]:
        if rlm.stopping:
            break
        rlm.delete_remote_segment(segment)
        deleted += 1
    if deleted:
        remaining = [s for s in finished if s not in doomed_finished]
        rlm.metrics.gauge(m.METADATA_COUNT, tp).set(len(live) - deleted)
        rlm.metrics.gauge(m.LOG_SIZE_BYTES, tp).set(sum(s.segment_size_in_bytes for s in remaining))
    return deleted


def _expired_dangling(
    rlm: RemoteLogManager, plog: PartitionLog, dangling: list[RemoteLogSegmentMetadata]
) -> list[RemoteLogSegmentMetadata]:
    """Dangling COPY_SEGMENT_STARTED segments that retention has reached: wholly below the log
    start offset (after this run moved it), wholly before the lineage's first epoch, or older
    than ``retention.ms``. Segments this broker is copying are never among them."""
    if not dangling:
        return []
    log_start = plog.log_start_offset
    lineage = plog.leader_epoch_cache.entries()
    first_epoch = lineage[0].epoch if lineage else None
    retention_ms = plog.config.retention_ms
    cutoff = time.time_ns() // 1_000_000 - retention_ms if retention_ms >= 0 else -1
    expired = []
    for segment in dangling:
        if segment.remote_log_segment_id in rlm.segments_being_copied:
            continue
        epochs = [epoch for epoch, _start in segment.segment_leader_epochs]
        below_start = segment.end_offset < log_start and (
            first_epoch is None or all(epoch <= first_epoch for epoch in epochs)
        )
        before_lineage = first_epoch is not None and all(epoch < first_epoch for epoch in epochs)
        by_time = cutoff >= 0 and segment.max_timestamp_ms < cutoff
        if below_start or before_lineage or by_time:
            expired.append(segment)
    return expired


def _breached(
    plog: PartitionLog, finished: list[RemoteLogSegmentMetadata], log_start: int
) -> tuple[list[RemoteLogSegmentMetadata], int]:
    """Finished segments to delete, oldest first, and the log start offset that implies."""
    config = plog.config
    lineage = plog.leader_epoch_cache.entries()
    end = plog.log_end_offset
    valid = [s for s in finished if within_lineage(s, lineage, end)]
    # Without a lineage (nothing written yet) nothing can be judged foreign.
    doomed = [s for s in finished if lineage and s not in valid and s.end_offset < end]
    cutoff = time.time_ns() // 1_000_000 - config.retention_ms if config.retention_ms >= 0 else -1
    excess = -1
    if config.retention_bytes >= 0:
        highest = plog.highest_offset_in_remote_storage
        local_only = sum(s.size_in_bytes for s in plog.segments() if s.base_offset > highest)
        total = local_only + sum(s.segment_size_in_bytes for s in valid)
        excess = total - config.retention_bytes
    for segment in valid:
        if segment.end_offset < log_start:
            doomed.append(segment)
            continue
        by_time = cutoff >= 0 and segment.max_timestamp_ms < cutoff
        by_size = excess > 0 and segment.segment_size_in_bytes <= excess
        if not (by_time or by_size):
            break
        excess -= segment.segment_size_in_bytes
        doomed.append(segment)
        log_start = max(log_start, segment.end_offset + 1)
    return doomed, log_start
