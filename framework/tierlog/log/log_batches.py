"""Reading a whole log back batch by batch, through the public read path (tools and tests)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..records import RecordBatch

if TYPE_CHECKING:
    from .partition_log import PartitionLog


def iter_log_batches(
    log: PartitionLog, start: int = 0, chunk: int = 1 << 20
) -> Iterator[RecordBatch]:
    """Every batch from ``start`` to the log end, validated (tools and tests)."""
    offset = max(start, log.local_log_start_offset)
    while offset < log.log_end_offset:
        info = log.read(offset, chunk)
        if not info.records:
            break
        view = memoryview(info.records)
        position = 0
        while position < len(view):
            batch = RecordBatch.parse(view, position)
            batch.validate()
            yield batch
            position = batch.end_position
        offset = info.next_offset
