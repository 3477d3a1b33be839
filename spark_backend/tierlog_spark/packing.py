"""Packing segment ranges into tasks.

Every Spark task of a Python data source costs tens of milliseconds beyond its records (a round
trip to a Python worker, the reader unpickled, Arrow streams opened), so one task per small
segment spends more time on tasks than on records. Consecutive ranges are packed into tasks of
about an equal share of the bytes to read: at least ``min_tasks`` of them where there are that
many ranges, so every core still has work, and none above ``max_bytes`` unless one range alone
is (``splitting`` cuts big segments first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .planning import SegmentRange

__all__ = ["pack_ranges", "range_bytes"]


def range_bytes(planned: SegmentRange) -> int:
    """The bytes a task fetches for ``planned`` (at least 1, so empty ranges still count)."""
    end = planned.end_position
    if end is None:
        end = planned.segment.segment_size_in_bytes
    return max(end - planned.start_position, 1)


def pack_ranges(
    ranges: Sequence[SegmentRange], *, min_tasks: int, max_bytes: int
) -> list[tuple[SegmentRange, ...]]:
    """``ranges``, in their order, grouped into tasks (see the module doc)."""
    if min_tasks < 1 or max_bytes < 1:
        raise ValueError(f"min_tasks and max_bytes must be positive: {min_tasks}, {max_bytes}")
    sizes = [range_bytes(planned) for planned in ranges]
    share = min(max_bytes, math.ceil(sum(sizes) / min_tasks))
    tasks: list[tuple[SegmentRange, ...]] = []
    current: list[SegmentRange] = []
    filled = 0
    for planned, size in zip(ranges, sizes, strict=True):
        if current and filled + size > share:
            tasks.append(tuple(current))
            current, filled = [], 0
        current.append(planned)
        filled += size
    if current:
        tasks.append(tuple(current))
    return tasks
