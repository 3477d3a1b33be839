"""Which remote segments to read, and which offsets of each, so every tiered offset is read once.

A partition's remote metadata can hold more than its log: uploads a newer upload superseded,
and ranges an earlier leader tiered that a new leader re-uploaded after truncation. The plan
keeps what a Kafka consumer would be served: within a leader epoch, the finished segment the
metadata cache refers the offset to; across epochs, the higher epoch from its first offset on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping

import attrs
from tierlog.log.txn_index import AbortedTxn
from tierlog.metadata.cache import RemoteLogMetadataCache
from tierlog.model import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    Uuid,
)

__all__ = ["Bounds", "SegmentRange", "plan_reads", "tiered_ranges", "within"]

log = logging.getLogger(__name__)

#: How many later segments with a transaction index a range carries for read_committed.
MAX_TXN_INDEX_LOOKAHEAD = 32


@attrs.frozen
class Bounds:
    """The offsets and timestamps a query wants; every bound is inclusive, None is open."""

    first_offset: int = 0
    last_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None

    def narrow(
        self,
        *,
        first_offset: int | None = None,
        last_offset: int | None = None,
        min_timestamp: int | None = None,
        max_timestamp: int | None = None,
    ) -> Bounds:
        """These bounds and the given ones both holding."""
        return Bounds(
            self.first_offset if first_offset is None else max(self.first_offset, first_offset),
            _tighter(self.last_offset, last_offset, min),
            _tighter(self.min_timestamp, min_timestamp, max),
            _tighter(self.max_timestamp, max_timestamp, min),
        )

    @property
    def is_empty(self) -> bool:
        return (self.last_offset is not None and self.last_offset < self.first_offset) or (
            self.min_timestamp is not None
            and self.max_timestamp is not None
            and self.max_timestamp < self.min_timestamp
        )


def _tighter(current: int | None, new: int | None, pick: Callable[[int, int], int]) -> int | None:
    if current is None:
        return new
    return current if new is None else pick(current, new)


@attrs.frozen
class SegmentRange:
    """Offsets ``first_offset..last_offset`` of one remote segment, to be read in one task.

    ``txn_segments`` are this and the later segments of the partition that have a transaction
    index: an aborted transaction's ABORT marker, and so its index entry, may lie in a later
    segment than its records, or in one not tiered yet (``local_aborted``).
    """

    segment: RemoteLogSegmentMetadata
    first_offset: int
    last_offset: int
    txn_segments: tuple[RemoteLogSegmentMetadata, ...] = ()
    #: Aborted transactions of the partition known from the brokers' local indexes.
    local_aborted: frozenset[AbortedTxn] = frozenset()
    #: The bytes of the segment to fetch: from a batch boundary, to a last byte (None: the end).
    start_position: int = 0
    end_position: int | None = None

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.segment.topic_id_partition


def tiered_ranges(cache: RemoteLogMetadataCache) -> list[SegmentRange]:
    """The partition's tiered log as disjoint ranges in offset order (see the module doc)."""
    pieces: dict[int, list[tuple[int, int, RemoteLogSegmentMetadata]]] = {}
    for segment in cache.list_all_remote_log_segments():
        if segment.state is not RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            continue
        for epoch, start in segment.segment_leader_epochs:
            served = cache.remote_log_segment_metadata(epoch, start)
            if served is None or served.remote_log_segment_id != segment.remote_log_segment_id:
                continue  # superseded in this epoch
            end = segment.end_offset_for_epoch(epoch)
            assert end is not None
            pieces.setdefault(epoch, []).append((start, end, segment))

    kept: list[tuple[int, int, RemoteLogSegmentMetadata]] = []
    limit: int | None = None  # where the lowest higher epoch starts
    for epoch in sorted(pieces, reverse=True):
        ordered = sorted(pieces[epoch], key=lambda piece: piece[0])
        for index, (start, end, segment) in enumerate(ordered):
            if index + 1 < len(ordered):  # a lookup goes to the segment starting last
                end = min(end, ordered[index + 1][0] - 1)
            if limit is not None:
                end = min(end, limit - 1)
            if start <= end:
                kept.append((start, end, segment))
        epoch_start = ordered[0][0]
        limit = epoch_start if limit is None else min(limit, epoch_start)

    ranges: list[SegmentRange] = []
    for start, end, segment in sorted(kept, key=lambda piece: piece[0]):
        previous = ranges[-1] if ranges else None
        if (
            previous is not None
            and previous.segment.remote_log_segment_id == segment.remote_log_segment_id
            and previous.last_offset + 1 == start
        ):
            ranges[-1] = attrs.evolve(previous, last_offset=end)
        else:
            ranges.append(SegmentRange(segment, start, end))
    return ranges


def plan_reads(
    caches: Mapping[TopicIdPartition, RemoteLogMetadataCache],
    *,
    topics: Collection[str] | None = None,
    partitions: Collection[int] | None = None,
    bounds: Bounds = Bounds(),
    read_committed: bool = False,
) -> list[SegmentRange]:
    """The ranges to read for the wanted partitions within ``bounds``, by partition and offset.

    A topic name seen with several topic ids (deleted and created again) is read under the id
    whose metadata was written last, since an offline reader cannot ask the controller.
    """
    if bounds.is_empty:
        return []
    chosen = _current_topic_ids(caches)
    planned: list[SegmentRange] = []
    for tip in sorted(caches, key=lambda t: (t.topic, t.partition)):
        if topics is not None and tip.topic not in topics:
            continue
        if partitions is not None and tip.partition not in partitions:
            continue
        if chosen[tip.topic] != tip.topic_id:
            continue
        ranges = tiered_ranges(caches[tip])
        if read_committed:
            ranges = _with_txn_segments(ranges)
        planned.extend(within(ranges, bounds))
    return planned


def within(ranges: Iterable[SegmentRange], bounds: Bounds) -> Iterable[SegmentRange]:
    """``ranges`` cut to ``bounds``; those left empty are dropped."""
    for planned in ranges:
        if bounds.min_timestamp is not None and (
            planned.segment.max_timestamp_ms < bounds.min_timestamp
        ):
            continue
        first = max(planned.first_offset, bounds.first_offset)
        last = planned.last_offset
        if bounds.last_offset is not None:
            last = min(last, bounds.last_offset)
        if first <= last:
            yield attrs.evolve(planned, first_offset=first, last_offset=last)


def _with_txn_segments(ranges: list[SegmentRange]) -> list[SegmentRange]:
    with_index = [
        (index, planned.segment)
        for index, planned in enumerate(ranges)
        if not planned.segment.txn_idx_empty
    ]
    result = []
    for index, planned in enumerate(ranges):
        chain: list[RemoteLogSegmentMetadata] = []
        for position, segment in with_index:
            if position < index or segment in chain:
                continue
            chain.append(segment)
            if len(chain) == MAX_TXN_INDEX_LOOKAHEAD:
                break
        result.append(attrs.evolve(planned, txn_segments=tuple(chain)))
    return result


def _current_topic_ids(
    caches: Mapping[TopicIdPartition, RemoteLogMetadataCache],
) -> dict[str, Uuid]:
    """Per topic name, the topic id whose remote metadata was written last."""
    written: dict[str, dict[Uuid, int]] = {}
    for tip, cache in caches.items():
        last = max((s.event_timestamp_ms for s in cache.list_all_remote_log_segments()), default=-1)
        ids = written.setdefault(tip.topic, {})
        ids[tip.topic_id] = max(ids.get(tip.topic_id, -1), last)
    chosen = {}
    for topic, ids in written.items():
        chosen[topic] = max(ids, key=lambda topic_id: (ids[topic_id], str(topic_id)))
        if len(ids) > 1:
            log.warning(
                "topic %s has remote data under %d topic ids; reading the newest, %s",
                topic,
                len(ids),
                chosen[topic],
            )
    return chosen
