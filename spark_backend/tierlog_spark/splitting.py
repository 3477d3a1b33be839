"""Cutting big segment ranges into several tasks along the segment's offset index.

A task can start reading at any batch boundary, and the offset index lists batch positions:
an entry ``(offset, position)`` is written for the batches appended at ``position``, of which
``offset`` is the last. So batches before ``position`` hold only offsets below ``offset``, and
batches from ``position`` on only offsets above the previous entry's. That bounds the bytes a
range needs (a read starting mid-segment skips the bytes before it) and gives cut points for
tasks of about ``max_bytes`` each. The records a task decodes are the batches between its byte
positions, within the range's offsets, so the tasks of a range never share a record.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from tierlog.errors import RemoteResourceNotFoundError
from tierlog.log.index_file import as_int32_columns
from tierlog.model import IndexType
from tierlog.spi import RemoteStorageManager

from .planning import SegmentRange

__all__ = ["index_entries", "split_range", "split_ranges"]

#: Below this size a segment is read whole: fetching its index would cost more than it saves.
MIN_BYTES_TO_SEEK = 1 << 20


def split_ranges(
    ranges: list[SegmentRange], storage: Callable[[], RemoteStorageManager], max_bytes: int
) -> list[SegmentRange]:
    """``ranges`` with those worth it cut by their segment's offset index; ``storage`` is called
    only if an index is needed."""
    result: list[SegmentRange] = []
    for planned in ranges:
        segment = planned.segment
        size = segment.segment_size_in_bytes
        bounded = planned.first_offset > segment.start_offset or (
            planned.last_offset < segment.end_offset
        )
        if size > max_bytes or (bounded and size > MIN_BYTES_TO_SEEK):
            entries = index_entries(storage(), planned)
            result.extend(split_range(planned, entries, max_bytes))
        else:
            result.append(planned)
    return result


def index_entries(storage: RemoteStorageManager, planned: SegmentRange) -> list[tuple[int, int]]:
    """The segment's offset index as (absolute offset, position), or [] if it has none."""
    segment = planned.segment
    try:
        stream = storage.fetch_index(segment, IndexType.OFFSET)
    except RemoteResourceNotFoundError:
        return []
    try:
        data = bytes(stream.read())
    finally:
        stream.close()
    relative, positions = as_int32_columns(data[: len(data) - len(data) % 8])
    entries: list[tuple[int, int]] = []
    for delta, position in zip(relative, positions, strict=True):
        offset = segment.start_offset + delta
        if entries and (offset <= entries[-1][0] or position <= entries[-1][1]):
            break  # the zeroed tail of a preallocated index
        entries.append((offset, position))
    return entries


def split_range(
    planned: SegmentRange, entries: list[tuple[int, int]], max_bytes: int
) -> list[SegmentRange]:
    """``planned`` as tasks over byte windows of about ``max_bytes`` (see the module doc)."""
    start = 0
    end: int | None = None
    for offset, position in entries:
        if offset <= planned.first_offset:
            start = position
    for index, (offset, _position) in enumerate(entries[:-1]):
        if offset >= planned.last_offset:
            end = entries[index + 1][1] - 1
            break
    cuts = [
        position
        for _offset, position in entries
        if position > start and (end is None or position <= end)
    ]
    windows: list[tuple[int, int | None]] = []
    window_start = start
    for position in cuts:
        if position - window_start >= max_bytes:
            windows.append((window_start, position - 1))
            window_start = position
    windows.append((window_start, end))
    return [
        attrs.evolve(planned, start_position=first, end_position=last) for first, last in windows
    ]
