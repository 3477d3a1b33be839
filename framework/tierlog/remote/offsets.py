"""ListOffsets over the remote tier: by timestamp and for the largest timestamp.

The log start offset already covers remote data (EARLIEST), and the highest tiered offset is the
log's to answer (LATEST_TIERED); what needs the remote tier is a search by time in data that is
no longer local. Segments are tried oldest first by their recorded max timestamp; within one,
the remote time index (from the index cache) gives a starting position and the records are
scanned from there.

Such a search reads remote storage, so the broker runs it on the reader pool (KIP-1075) and
decides up front, from offsets alone, whether a lookup may need it at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..log import MAX_TIMESTAMP, PartitionLog, TimestampAndOffset, is_search_by_time
from ..model import RemoteLogSegmentMetadata, RemoteLogSegmentState, TopicIdPartition
from ..records import iter_batches
from .reader import iter_stream_batches

if TYPE_CHECKING:
    from .manager import RemoteLogManager


def _finished(
    rlm: RemoteLogManager, plog: PartitionLog, tip: TopicIdPartition
) -> list[RemoteLogSegmentMetadata]:
    start = plog.log_start_offset
    return sorted(
        (
            s
            for s in rlm.metadata.list_remote_log_segments(tip)
            if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED and s.end_offset >= start
        ),
        key=lambda s: s.start_offset,
    )


def _scan(
    rlm: RemoteLogManager,
    segment: RemoteLogSegmentMetadata,
    timestamp: int,
    start_offset: int,
    *,
    exact: bool,
) -> TimestampAndOffset | None:
    indexes = rlm.index_cache.get(segment)
    hint = indexes.lookup_timestamp(timestamp)
    position = 0 if hint is None else indexes.lookup_offset(hint)
    with rlm.storage.fetch_log_segment(segment, position) as stream:
        for header, data in iter_stream_batches(stream):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            for batch in iter_batches(data):
                for record in batch.records():
                    if record.offset < start_offset:
                        continue
                    hit = record.timestamp == timestamp if exact else record.timestamp >= timestamp
                    if hit:
                        return TimestampAndOffset(
                            record.timestamp, record.offset, batch.partition_leader_epoch
                        )
    return None


def remote_offset_for_timestamp(
    rlm: RemoteLogManager, plog: PartitionLog, tip: TopicIdPartition, timestamp: int
) -> TimestampAndOffset | None:
    """The first remote record at or after ``timestamp``; None: search the local log."""
    local_start = plog.local_log_start_offset
    for segment in _finished(rlm, plog, tip):
        if segment.max_timestamp_ms < timestamp:
            continue
        if segment.start_offset >= local_start:
            return None
        found = _scan(rlm, segment, timestamp, plog.log_start_offset, exact=False)
        if found is not None:
            return found
    return None


def remote_max_timestamp(
    rlm: RemoteLogManager, plog: PartitionLog, tip: TopicIdPartition
) -> TimestampAndOffset | None:
    """The first record with the largest timestamp among remote-only segments."""
    local_start = plog.local_log_start_offset
    remote_only = [s for s in _finished(rlm, plog, tip) if s.start_offset < local_start]
    if not remote_only:
        return None
    best = max(remote_only, key=lambda s: s.max_timestamp_ms)
    return _scan(rlm, best, best.max_timestamp_ms, plog.log_start_offset, exact=True)


def needs_remote_search(plog: PartitionLog, timestamp: int) -> bool:
    """Whether a lookup of ``timestamp`` may have to read remote-only data.

    Decided from offsets, without a metadata call, so the request thread can answer every
    other lookup at once: only a search by time (or for the largest timestamp) on a tiered
    log holding records below its local log start can need the remote tier.
    """
    return (
        (is_search_by_time(timestamp) or timestamp == MAX_TIMESTAMP)
        and plog.config.remote_storage_enable
        and plog.log_start_offset < plog.local_log_start_offset
    )


def offset_for_timestamp_across_tiers(
    rlm: RemoteLogManager, plog: PartitionLog, tip: TopicIdPartition, timestamp: int
) -> TimestampAndOffset | None:
    """ListOffsets for a time or MAX_TIMESTAMP over both tiers: remote first, then local."""
    if timestamp == MAX_TIMESTAMP:
        remote = remote_max_timestamp(rlm, plog, tip)
        local = plog.offset_for_timestamp(timestamp)
        if remote is not None and (local is None or remote.timestamp >= local.timestamp):
            return remote
        return local
    remote = remote_offset_for_timestamp(rlm, plog, tip, timestamp)
    return remote if remote is not None else plog.offset_for_timestamp(timestamp)
