"""Cutting a segment range into tasks along its offset index: no record lost, none read twice."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tierlog.model import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition, Uuid
from tierlog.records import RecordBatchBuilder
from tierlog_spark.decode import SCHEMA, decode_segment
from tierlog_spark.planning import SegmentRange
from tierlog_spark.splitting import split_range

BASE = 1_000
TIP = TopicIdPartition.of(Uuid.random(), "orders", 0)


def _segment(interval: int = 300) -> tuple[bytes, list[tuple[int, int]]]:
    """A segment of 40 batches of 1-4 records, and its index with an entry every ``interval``
    bytes, written the way a log segment writes it: (last offset of the append, its position)."""
    data = b""
    entries: list[tuple[int, int]] = []
    offset, since = BASE, 0
    for n in range(40):
        count = 1 + n % 4
        builder = RecordBatchBuilder(base_offset=offset)
        for i in range(count):
            builder.append(0, None, b"record-%d" % (offset + i) * 3)
        batch = builder.build()
        if since > interval:
            entries.append((offset + count - 1, len(data)))
            since = 0
        data += batch
        since += len(batch)
        offset += count
    return data, entries


def _range(data: bytes, first: int, last: int) -> SegmentRange:
    metadata = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(TIP), BASE, BASE + 99, 0, 0, 0, len(data), {0: BASE}
    )
    return SegmentRange(metadata, first, last)


def _offsets(data: bytes, planned: SegmentRange) -> list[int]:
    end = None if planned.end_position is None else planned.end_position + 1
    batches = decode_segment(
        data[planned.start_position : end],
        topic="orders",
        partition=0,
        segment_id="s",
        start_offset=planned.first_offset,
        end_offset=planned.last_offset,
    )
    return pa.Table.from_batches(list(batches), schema=SCHEMA).column("offset").to_pylist()


@pytest.mark.parametrize("interval", [0, 300])
def test_tasks_cover_the_range_exactly_once_whatever_the_bounds_and_sizes(interval: int) -> None:
    data, entries = _segment(interval)
    last_offset = BASE + 99
    assert len(entries) > 5
    for first in range(BASE, last_offset + 1, 5):
        for last in (first, first + 1, first + 3, BASE + 60, last_offset):
            if last < first or last > last_offset:
                continue
            for max_bytes in (1, 250, 700, 1 << 20):
                tasks = split_range(_range(data, first, last), entries, max_bytes)
                read = [offset for task in tasks for offset in _offsets(data, task)]
                assert read == list(range(first, last + 1)), (first, last, max_bytes, tasks)


def test_small_windows_give_several_tasks_and_bounds_skip_bytes() -> None:
    data, entries = _segment()
    tasks = split_range(_range(data, BASE, BASE + 99), entries, 500)
    assert len(tasks) > 3
    assert tasks[0].start_position == 0 and tasks[-1].end_position is None
    (middle,) = split_range(_range(data, BASE + 50, BASE + 60), entries, 1 << 20)
    assert middle.start_position > 0
    assert middle.end_position is not None and middle.end_position < len(data) - 1


def test_without_an_index_the_range_is_read_whole() -> None:
    data, _ = _segment()
    planned = _range(data, BASE + 10, BASE + 20)
    assert split_range(planned, [], 1) == [planned]
