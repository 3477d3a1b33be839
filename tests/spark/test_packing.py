"""Packing segment ranges into tasks: order kept, every range once, shares of the bytes."""

from __future__ import annotations

import pytest
from tierlog.model import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition, Uuid
from tierlog_spark.packing import pack_ranges, range_bytes
from tierlog_spark.planning import SegmentRange

TIP = TopicIdPartition.of(Uuid.random(), "orders", 0)


def _ranges(*sizes: int) -> list[SegmentRange]:
    ranges, offset = [], 0
    for size in sizes:
        metadata = RemoteLogSegmentMetadata(
            RemoteLogSegmentId.generate_new(TIP), offset, offset + 9, 0, 0, 0, size, {0: offset}
        )
        ranges.append(SegmentRange(metadata, offset, offset + 9))
        offset += 10
    return ranges


@pytest.mark.parametrize(
    ("sizes", "min_tasks", "max_bytes", "expected"),
    [
        ([100] * 24, 4, 1 << 20, [6, 6, 6, 6]),  # equal shares
        ([100] * 24, 1, 1000, [10, 10, 4]),  # the byte cap wins over one task
        ([100] * 3, 8, 1 << 20, [1, 1, 1]),  # fewer ranges than tasks wanted
        ([5000, 10, 10, 10], 2, 1 << 20, [1, 3]),  # a big range alone
        ([10, 10, 5000, 10], 2, 1 << 20, [2, 1, 1]),
    ],
)
def test_ranges_are_grouped_in_order_by_share_of_bytes(
    sizes: list[int], min_tasks: int, max_bytes: int, expected: list[int]
) -> None:
    ranges = _ranges(*sizes)
    tasks = pack_ranges(ranges, min_tasks=min_tasks, max_bytes=max_bytes)
    assert [len(task) for task in tasks] == expected
    assert [planned for task in tasks for planned in task] == ranges


def test_a_range_cut_by_positions_counts_only_its_bytes() -> None:
    (whole,) = _ranges(1000)
    cut = SegmentRange(whole.segment, 3, 5, start_position=200, end_position=450)
    assert range_bytes(whole) == 1000
    assert range_bytes(cut) == 250


def test_nothing_to_pack_gives_no_task() -> None:
    assert pack_ranges([], min_tasks=4, max_bytes=100) == []


def test_a_nonpositive_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        pack_ranges(_ranges(10), min_tasks=0, max_bytes=100)
