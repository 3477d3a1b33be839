"""Kafka record batches (format v2, magic 2), byte-compatible with Kafka's own.

The broker's append path uses the header functions ``validate_batch_at`` and ``stamp_batch``
(what ``BatchHeader.parse``, ``validate`` and the in-place rewrites do, without building a header
object per batch) and ``set_max_timestamp``; a leader also checks a producer's records with
``validation.validate_produced_batch`` before it appends them.
Consumers use ``iter_batches`` and ``RecordBatch.records()``; producers, tests and benchmarks use
``RecordBatchBuilder`` and ``build_control_batch``. Malformed input of any kind raises
``tierlog.errors.CorruptRecordError`` with the byte position and reason.
"""

from __future__ import annotations

from .batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchFields,
    BatchHeader,
    Header,
    Record,
    RecordBatch,
    TimestampType,
    check_batch,
    crc32c,
    iter_batches,
    read_batch_fields,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
    stamp_batch,
    validate_batch_at,
)
from .builder import RecordBatchBuilder
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress, decompress
from .control import ControlType, EndTxnMarker, build_control_batch, control_type_id

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchFields",
    "BatchHeader",
    "Compression",
    "ControlType",
    "EndTxnMarker",
    "Header",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "TimestampType",
    "build_control_batch",
    "check_batch",
    "compress",
    "control_type_id",
    "crc32c",
    "decompress",
    "iter_batches",
    "read_batch_fields",
    "set_base_offset",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "stamp_batch",
    "validate_batch_at",
]
