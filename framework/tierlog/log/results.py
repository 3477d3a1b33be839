"""The values the partition log hands back: where an offset lives, what an append did, what a
read found. Named as in Kafka (``LogOffsetMetadata``, ``LogAppendInfo``, ``FetchDataInfo``) so
the broker code above reads like Kafka's.

The three built on every append or read are named tuples rather than attrs classes: a tuple is
the cheapest immutable value Python builds, and these are built tens of thousands of times a
second.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import attrs

from ..records import NO_TIMESTAMP

if TYPE_CHECKING:
    from .txn_index import AbortedTxn

UNKNOWN_OFFSET = -1


class FetchIsolation(enum.Enum):
    """How far a read may go: Kafka's ``FetchIsolation``.

    Followers read up to the log end, consumers up to the high watermark, and ``read_committed``
    consumers up to the last stable offset (with the aborted transactions they must skip).
    """

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


class LogOffsetMetadata(NamedTuple):
    """An offset and, when known, where it is: the segment's base and the batch's position."""

    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position: int = UNKNOWN_OFFSET

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == UNKNOWN_OFFSET


class LogAppendInfo(NamedTuple):
    """What an append did: the offsets it used (or, for a duplicate, the original ones).

    ``duplicate`` is true when an idempotent producer retried a batch the log already holds:
    nothing was written and ``first_offset``/``last_offset`` are the original batch's.
    ``log_append_time`` is the broker time stamped on the batches, or -1 under CreateTime.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    valid_bytes: int
    shallow_count: int
    records_count: int
    duplicate: bool = False

    @property
    def num_messages(self) -> int:
        return self.last_offset - self.first_offset + 1


class FetchDataInfo(NamedTuple):
    """The answer to a read: whole record batches and, for read_committed, the aborted txns.

    ``records`` holds only complete batches. ``first_entry_incomplete`` says the first batch at
    the fetch offset did not fit in the byte limit (without ``min_one_message``), so nothing
    was returned. ``aborted_transactions`` is None unless the read was ``TXN_COMMITTED``.
    ``next_offset`` is where the next sequential read starts (-1 when nothing was returned).
    """

    fetch_offset_metadata: LogOffsetMetadata
    records: bytes | memoryview
    first_entry_incomplete: bool = False
    aborted_transactions: tuple[AbortedTxn, ...] | None = None
    next_offset: int = -1

    @property
    def size_in_bytes(self) -> int:
        return len(self.records)


@attrs.frozen
class TimestampAndOffset:
    """ListOffsets' answer: a record's timestamp, its offset, and the epoch that wrote it."""

    timestamp: int
    offset: int
    leader_epoch: int | None = None


NO_TIMESTAMP_AND_OFFSET = TimestampAndOffset(NO_TIMESTAMP, UNKNOWN_OFFSET)


@attrs.frozen
class SegmentInfo:
    """A segment as the log's owner sees it (for tools, metrics and tests)."""

    base_offset: int
    size_in_bytes: int
    log_path: Path
    is_active: bool
    #: Whether the segment's indexes are in memory now (at most ``LOADED_INDEX_LIMIT`` rolled
    #: segments' are).
    indexes_loaded: bool
