"""Control batches: the COMMIT and ABORT markers that end a transaction.

A transaction coordinator ends a transaction by writing a control batch (transactional and control
bits set, no sequence) holding one record: key = version int16 + type int16 (0 ABORT, 1 COMMIT),
value = version int16 + the coordinator epoch int32. Consumers in read_committed mode use the
markers to drop aborted records, and the log uses them to build its transaction index.
"""

from __future__ import annotations

import enum
import struct

import attrs

from ..errors import CorruptRecordError
from .batch import NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE, Record, RecordBatch, TimestampType
from .builder import RecordBatchBuilder
from .compression import Compression

CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    """The control record types of transaction markers (Kafka's ``ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1


def control_type_id(record: Record) -> int:
    """The type id in a control record's key (0 ABORT, 1 COMMIT; KRaft uses others)."""
    key = record.key
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(
            f"control record key must hold at least {_KEY.size} bytes, "
            f"not {0 if key is None else len(key)}"
        )
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    return int(type_id)


@attrs.frozen
class EndTxnMarker:
    """A COMMIT or ABORT marker and the coordinator epoch that wrote it."""

    control_type: ControlType = attrs.field(converter=ControlType)
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type is ControlType.COMMIT

    @classmethod
    def from_record(cls, record: Record) -> EndTxnMarker:
        """Reads the marker from a control record; CorruptRecordError if it is not one."""
        type_id = control_type_id(record)
        if type_id not in (ControlType.ABORT, ControlType.COMMIT):
            raise CorruptRecordError(f"control record type {type_id} is not a transaction marker")
        value = record.value
        if value is None or len(value) < _END_TXN_VALUE.size:
            raise CorruptRecordError(
                f"transaction marker value must hold at least {_END_TXN_VALUE.size} bytes, "
                f"not {0 if value is None else len(value)}"
            )
        version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
        if version < 0:
            raise CorruptRecordError(f"invalid transaction marker version {version}")
        return cls(ControlType(type_id), coordinator_epoch)

    @classmethod
    def from_batch(cls, batch: RecordBatch) -> EndTxnMarker:
        """Reads the marker a control batch carries; CorruptRecordError if it carries none."""
        if not batch.is_control:
            raise CorruptRecordError("not a control batch", position=batch.position)
        for record in batch.records():
            try:
                return cls.from_record(record)
            except CorruptRecordError as err:
                raise CorruptRecordError(err.reason, position=batch.position) from err
        raise CorruptRecordError("control batch holds no record", position=batch.position)


def build_control_batch(
    control_type: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch holding one COMMIT or ABORT marker, laid out as Kafka writes one."""
    control_type = ControlType(control_type)
    if producer_id < 0:
        raise ValueError("a transaction marker needs a producer id")
    builder = RecordBatchBuilder(
        Compression.NONE,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        timestamp_type=TimestampType.CREATE_TIME,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(
        timestamp,
        _KEY.pack(CONTROL_KEY_VERSION, control_type),
        _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
    )
    return builder.build()
