"""Writing a batch again with only some of its records, as Kafka's ``MemoryRecords.filterTo``.

A rewritten batch keeps what identifies it: its base offset and last offset (so the offsets of
a producer's batches and its last sequence stay as they were), its producer id, epoch and base
sequence, its partition leader epoch, codec, timestamp type and transactional and control flags.
Only the records and, when tombstones or an emptied transaction's marker are kept, the delete
horizon (KIP-534: stored as the base timestamp, flagged in the attributes) change. A batch kept
only for its producer's state is written as a bare header with no records.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from ...records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    Compression,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    crc32c,
)

_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
_CRC_AT = 17
_ATTRIBUTES_AT = 21
#: attributes, last offset delta, base timestamp, max timestamp, producer id, producer epoch,
#: base sequence, record count.
_COVERED = struct.Struct(">hiqqqhii")
_PREFIX = struct.Struct(">qiibI")
#: Attribute bits a bare header keeps: timestamp type, transactional, control.
_KEPT_ATTRIBUTES = 0x08 | 0x10 | 0x20


def retained_batch(
    batch: RecordBatch, records: Sequence[Record], delete_horizon_ms: int | None
) -> bytes:
    """``batch`` holding only ``records`` (at least one), with ``delete_horizon_ms`` if set."""
    builder = RecordBatchBuilder(
        batch.compression,
        base_offset=batch.base_offset,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        timestamp_type=batch.timestamp_type,
        partition_leader_epoch=batch.partition_leader_epoch,
        delete_horizon_ms=delete_horizon_ms,
    )
    for record in records:
        builder.append(
            record.timestamp, record.key, record.value, record.headers, offset=record.offset
        )
    data = bytearray(builder.build())
    if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
        struct.pack_into(">q", data, 35, batch.max_timestamp)
    _LAST_OFFSET_DELTA.pack_into(data, _LAST_OFFSET_DELTA_AT, batch.last_offset_delta)
    struct.pack_into(">I", data, _CRC_AT, crc32c(memoryview(data)[_ATTRIBUTES_AT:]))
    return bytes(data)


def empty_batch(batch: RecordBatch) -> bytes:
    """A header-only copy of ``batch``: its offsets, producer fields and max timestamp."""
    attributes = (batch.attributes & _KEPT_ATTRIBUTES) | int(Compression.NONE)
    covered = _COVERED.pack(
        attributes,
        batch.last_offset_delta,
        batch.max_timestamp,
        batch.max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        0,
    )
    prefix = _PREFIX.pack(
        batch.base_offset,
        HEADER_SIZE - LOG_OVERHEAD,
        batch.partition_leader_epoch,
        MAGIC,
        crc32c(covered),
    )
    return prefix + covered
