"""The read path: whole batches from the one holding a fetch offset, bounded by an isolation.

Kafka's ``LocalLog.read``. Apart from ``PartitionLog`` because every consumer and follower fetch
runs it: the log's lock is held only to find the segment and the position where the read must
stop; the file is read without it (the segment stays retained, so retention deleting it
meanwhile cannot close it under the read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import OffsetOutOfRangeError
from .results import FetchDataInfo, FetchIsolation, LogOffsetMetadata
from .txn_index import AbortedTxn

if TYPE_CHECKING:
    from .partition_log import PartitionLog


def read(
    plog: PartitionLog,
    fetch_offset: int,
    max_bytes: int,
    isolation: FetchIsolation,
    min_one_message: bool,
) -> FetchDataInfo:
    """See :meth:`PartitionLog.read`."""
    with plog._lock:
        plog._check_open()
        end = plog._next_offset
        if fetch_offset > end or fetch_offset < plog._local_log_start_offset:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is out of range for {plog._topic_partition}: the "
                f"local log holds [{plog._local_log_start_offset}, {end})"
            )
        if isolation is FetchIsolation.LOG_END:
            bound = end
        elif isolation is FetchIsolation.HIGH_WATERMARK:
            bound = plog._high_watermark
        else:
            bound = plog.last_stable_offset
        aborted_none: tuple[AbortedTxn, ...] | None = (
            () if isolation is FetchIsolation.TXN_COMMITTED else None
        )
        if fetch_offset >= bound:
            return FetchDataInfo(LogOffsetMetadata(fetch_offset), b"", False, aborted_none)
        bound_base, bound_position = position_of(plog, bound)
        segments = plog._segments
        index = plog._segment_index(fetch_offset)
        location = None
        segment = segments[index]
        while True:
            location = plog._touch(segment).translate_offset(fetch_offset)
            if location is not None or index + 1 >= len(segments):
                break
            index += 1
            segment = segments[index]
        if location is None or segment.base_offset > bound_base:
            return FetchDataInfo(LogOffsetMetadata(fetch_offset), b"", False, aborted_none)
        max_position = bound_position if segment.base_offset == bound_base else segment.size
        segment.retain()
    try:
        result = segment.read(
            fetch_offset,
            max_bytes,
            max_position,
            min_one_message=min_one_message,
            start=location,
        )
    finally:
        with plog._lock:
            segment.release()
    assert result is not None
    aborted = None
    if isolation is FetchIsolation.TXN_COMMITTED:
        upper = result.next_offset if result.records else fetch_offset
        aborted = collect_aborted_txns(plog, fetch_offset, upper)
    return FetchDataInfo(
        result.offset_metadata,
        result.records,
        result.first_entry_incomplete,
        aborted,
        result.next_offset,
    )


def position_of(plog: PartitionLog, offset: int) -> tuple[int, int]:
    """(segment base, byte position) where reads bounded by ``offset`` must stop; the last
    answer is cached, since consecutive fetches mostly share their bound (the high watermark)."""
    cached = plog._bound_cache
    if cached is not None and cached[0] == offset:
        return cached[1], cached[2]
    if offset >= plog._next_offset:
        active = plog._active
        return active.base_offset, active.size
    segment = plog._touch(plog._segments[plog._segment_index(offset)])
    location = segment.translate_offset(offset)
    position = segment.size if location is None else location.position
    plog._bound_cache = (offset, segment.base_offset, position)
    return segment.base_offset, position


def collect_aborted_txns(plog: PartitionLog, start: int, upper: int) -> tuple[AbortedTxn, ...]:
    """The aborted transactions overlapping offsets ``[start, upper)``, from the transaction
    indexes of the segments from the one holding ``start`` until an index says it is complete."""
    with plog._lock:
        found: list[AbortedTxn] = []
        for segment in plog._segments[plog._segment_index(start) :]:
            result = segment.txn_index.collect_aborted_txns(start, upper)
            found.extend(result.aborted)
            if result.is_complete:
                break
        return tuple(found)
