"""ListOffsets on the local log: Kafka's special timestamps and the search by time.

The special values are part of the protocol (``ListOffsetsRequest``), shared by the log, the
broker and the remote tier, so they live apart from the log that answers most of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..records import NO_TIMESTAMP
from .results import TimestampAndOffset

if TYPE_CHECKING:
    from .partition_log import PartitionLog

#: ListOffsets' special timestamps (Kafka's ``ListOffsetsRequest``).
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3
EARLIEST_LOCAL_TIMESTAMP: Final = -4
LATEST_TIERED_TIMESTAMP: Final = -5


def is_search_by_time(timestamp: int) -> bool:
    """Whether ListOffsets searches ``timestamp`` as a time: every value but the special ones
    (a time before 1970 as well, which finds the first record, as in Kafka)."""
    return timestamp >= 0 or timestamp < LATEST_TIERED_TIMESTAMP


def offset_for_timestamp(plog: PartitionLog, timestamp: int) -> TimestampAndOffset | None:
    """``PartitionLog.offset_for_timestamp``, with the log's lock held."""
    epochs = plog._epoch_cache
    if timestamp == EARLIEST_TIMESTAMP:
        offset = plog._log_start_offset
        return TimestampAndOffset(NO_TIMESTAMP, offset, epochs.epoch_for_offset(offset))
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        offset = plog._local_log_start_offset
        return TimestampAndOffset(NO_TIMESTAMP, offset, epochs.epoch_for_offset(offset))
    if timestamp == LATEST_TIMESTAMP:
        return TimestampAndOffset(NO_TIMESTAMP, plog._next_offset, epochs.latest_epoch)
    if timestamp == MAX_TIMESTAMP:
        best = max(plog._segments, key=lambda s: plog._touch(s).max_timestamp_so_far)
        if best.max_timestamp_so_far < 0:
            return None
        return best.find_offset_by_timestamp(best.max_timestamp_so_far, plog._log_start_offset)
    if not is_search_by_time(timestamp):
        return None
    for segment in plog._segments:
        if plog._touch(segment).largest_timestamp >= timestamp:
            found = segment.find_offset_by_timestamp(timestamp, plog._log_start_offset)
            if found is not None:
                return found
    return None
