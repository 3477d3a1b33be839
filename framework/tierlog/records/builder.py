"""Building record batches (magic 2) byte for byte as Kafka's Java producer lays them out.

Producers, tests and benchmarks use ``RecordBatchBuilder``: append records, then ``build()`` the
batch. The rules Kafka's ``MemoryRecordsBuilder`` enforces are enforced here too (offsets increase,
transactional batches need a producer id, timestamps are non-negative or -1), so a batch built here
is one a Kafka broker would accept.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from .batch import (
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    TimestampType,
    crc32c,
)
from .compression import Compression, compress
from .varint import INT32_MAX, INT64_MAX, encode_unsigned, encoded_varints

#: baseOffset, batchLength, partitionLeaderEpoch, magic, crc: the part before the CRC's coverage.
_PREFIX = struct.Struct(">qiibI")
#: attributes through recordsCount: the header part the CRC covers.
_COVERED = struct.Struct(">hiqqqhii")
_NULL = b"\x01"  # zig-zag varint -1: a null key, value or header value
_ZERO = b"\x00"

BytesLike = bytes | bytearray | memoryview
_cached_varint = encoded_varints.get


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is outside [{low}, {high}]")


class RecordBatchBuilder:
    """Collects records and builds one v2 record batch.

    Offsets are consecutive from ``base_offset`` unless ``append`` is given explicit, increasing
    offsets (as a compacted batch has). The first record's timestamp becomes the base timestamp,
    unless ``delete_horizon_ms`` is set: then that is stored instead and the delete-horizon bit
    is set, as Kafka's log cleaner does. ``compression_level`` None means the codec's default.
    """

    __slots__ = (
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_compression",
        "_compression_level",
        "_count",
        "_last_offset_delta",
        "_max_timestamp",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_records",
    )

    def __init__(
        self,
        compression: Compression = Compression.NONE,
        *,
        base_offset: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        delete_horizon_ms: int | None = None,
        compression_level: int | None = None,
    ) -> None:
        compression = Compression(compression)
        timestamp_type = TimestampType(timestamp_type)
        _check_range("base_offset", base_offset, 0, INT64_MAX)
        _check_range("producer_id", producer_id, -(1 << 63), INT64_MAX)
        _check_range("producer_epoch", producer_epoch, -(1 << 15), (1 << 15) - 1)
        _check_range("base_sequence", base_sequence, -(1 << 31), INT32_MAX)
        _check_range("partition_leader_epoch", partition_leader_epoch, -(1 << 31), INT32_MAX)
        if is_transactional and producer_id == NO_PRODUCER_ID:
            raise ValueError("a transactional batch needs a producer id")
        if producer_id != NO_PRODUCER_ID:
            if producer_epoch == NO_PRODUCER_EPOCH:
                raise ValueError("a batch with a producer id needs a producer epoch")
            if base_sequence < 0 and not is_control:
                raise ValueError("a batch with a producer id needs a base sequence")
        attributes = int(compression)
        if timestamp_type is TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if is_control:
            attributes |= CONTROL_MASK
        if delete_horizon_ms is not None:
            _check_range("delete_horizon_ms", delete_horizon_ms, 0, INT64_MAX)
            attributes |= DELETE_HORIZON_MASK
        self._attributes = attributes
        self._compression = compression
        self._compression_level = compression_level
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._partition_leader_epoch = partition_leader_epoch
        self._base_timestamp = delete_horizon_ms
        self._max_timestamp = NO_TIMESTAMP
        self._last_offset_delta = -1
        self._count = 0
        self._records = bytearray()

    def append(
        self,
        timestamp: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Iterable[tuple[str, BytesLike | None]] = (),
        *,
        offset: int | None = None,
    ) -> int:
        """Adds a record; returns its offset.

        ``timestamp`` is in epoch milliseconds (-1: none). ``offset`` defaults to the one after
        the last record's.
        """
        if type(timestamp) is not int or not NO_TIMESTAMP <= timestamp <= INT64_MAX:
            _reject_timestamp(timestamp)
        if offset is None:
            offset_delta = self._last_offset_delta + 1
        else:
            offset_delta = offset - self._base_offset
            if offset_delta <= self._last_offset_delta:
                raise ValueError(
                    f"offset {offset} does not follow the last offset "
                    f"{self._base_offset + self._last_offset_delta}"
                )
        if offset_delta > INT32_MAX:
            raise ValueError(f"offset {self._base_offset + offset_delta} is too far from the base")
        base_timestamp = self._base_timestamp
        if base_timestamp is None:
            base_timestamp = self._base_timestamp = timestamp
        timestamp_delta = timestamp - base_timestamp
        if timestamp_delta > INT64_MAX:  # wraps as Java's long arithmetic does; reads undo it
            timestamp_delta -= 1 << 64

        cached = _cached_varint
        zz = (timestamp_delta << 1) ^ (timestamp_delta >> 63)
        timestamp_part = cached(zz) or encode_unsigned(zz)
        zz = offset_delta << 1
        offset_part = cached(zz) or encode_unsigned(zz)
        if key is None:
            key_prefix = _NULL
            key = b""
        else:
            if type(key) is not bytes:
                key = _bytes_like("key", key)
            zz = len(key) << 1
            key_prefix = cached(zz) or encode_unsigned(zz)
        if value is None:
            value_prefix = _NULL
            value = b""
        else:
            if type(value) is not bytes:
                value = _bytes_like("value", value)
            zz = len(value) << 1
            value_prefix = cached(zz) or encode_unsigned(zz)
        header_part = _encode_headers(headers) if headers else _ZERO
        zz = (
            1
            + len(timestamp_part)
            + len(offset_part)
            + len(key_prefix)
            + len(key)
            + len(value_prefix)
            + len(value)
            + len(header_part)
        ) << 1
        out = self._records
        out += cached(zz) or encode_unsigned(zz)
        out += _ZERO  # record attributes
        out += timestamp_part
        out += offset_part
        out += key_prefix
        out += key
        out += value_prefix
        out += value
        out += header_part

        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._last_offset_delta = offset_delta
        self._count += 1
        return self._base_offset + offset_delta

    def __len__(self) -> int:
        """The number of records appended so far."""
        return self._count

    @property
    def uncompressed_size(self) -> int:
        """The size the batch would have without compression: header plus records so far."""
        return HEADER_SIZE + len(self._records)

    def build(self) -> bytes:
        """The finished batch: header, CRC and (compressed) records."""
        if not self._count:
            raise ValueError("a record batch needs at least one record")
        if self._compression is Compression.NONE:
            payload: bytes | bytearray = self._records
        else:
            payload = compress(self._compression, self._records, self._compression_level)
        base_timestamp = self._base_timestamp
        assert base_timestamp is not None
        covered = _COVERED.pack(
            self._attributes,
            self._last_offset_delta,
            base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._count,
        )
        batch_length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
        if batch_length > INT32_MAX:
            raise ValueError(f"a batch of {batch_length} bytes is too large")
        crc = crc32c(payload, crc32c(covered))
        prefix = _PREFIX.pack(
            self._base_offset,
            batch_length,
            self._partition_leader_epoch,
            MAGIC,
            crc,
        )
        return b"".join((prefix, covered, payload))


def _reject_timestamp(timestamp: object) -> None:
    if type(timestamp) is not int:
        raise TypeError(f"timestamp must be an int, not {type(timestamp).__name__}")
    raise ValueError(f"invalid timestamp {timestamp}: epoch milliseconds, or -1 for none")


def _bytes_like(name: str, data: object) -> bytes | bytearray | memoryview:
    """``data`` as a flat byte sequence, or TypeError if it is not bytes-like."""
    if isinstance(data, bytearray):
        return data
    if isinstance(data, memoryview):
        return data if data.format == "B" and data.ndim == 1 else data.cast("B")
    if isinstance(data, bytes):
        return data
    raise TypeError(f"{name} must be bytes-like or None, not {type(data).__name__}")


def _encode_headers(headers: Iterable[tuple[str, BytesLike | None]]) -> bytes:
    out = bytearray()
    count = 0
    for key, value in headers:
        if not isinstance(key, str):
            raise TypeError(f"header keys are str, not {type(key).__name__}")
        encoded_key = key.encode("utf-8")
        out += encode_unsigned(len(encoded_key) << 1)
        out += encoded_key
        if value is None:
            out += _NULL
        else:
            flat = _bytes_like("header value", value)
            out += encode_unsigned(len(flat) << 1)
            out += flat
        count += 1
    return encode_unsigned(count << 1) + out
