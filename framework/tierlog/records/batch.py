"""Reading Kafka record batches (magic 2) in place: the header, its checks, and the records.

A batch is a 61-byte big-endian header followed by its records, compressed as one block when
attributes bits 0-2 say so. The CRC-32C covers everything from the attributes (byte 21) to the end,
so a broker can assign the base offset and partition leader epoch (bytes 0-20) without touching it.

The broker's append path needs only ``BatchHeader``: ``parse`` reads the fixed header straight
from the buffer (one ``struct`` call, no copy) and ``validate`` checks length, magic and CRC
without decoding a record. Consumers iterate ``RecordBatch.records()``, which decompresses on
demand and yields ``Record`` tuples.

Error positions are byte positions in the buffer the caller passed in: the batch's first byte
for problems with a batch as a whole, the offending record for records of an uncompressed batch.
Records of a compressed batch have no position in the buffer, so their errors carry the batch's
position and name the byte within the decompressed records.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import NamedTuple, Self, TypeAlias

import crc32c as _crc32c

from ..errors import CorruptRecordError
from ._buffers import ReadableBuffer, WritableBuffer, byte_view
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, decompress
from .varint import decode_varint, decode_varlong

# --- layout -----------------------------------------------------------------------------------

MAGIC = 2
#: baseOffset + batchLength: the bytes before the length's count starts.
LOG_OVERHEAD = 12
#: The fixed header; Kafka calls it RECORD_BATCH_OVERHEAD.
HEADER_SIZE = 61

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_OFFSET = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

#: The smallest record: one byte each for length, attributes, timestamp delta, offset delta,
#: key length, value length and header count.
MIN_RECORD_SIZE = 7
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_INT32_MAX = (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_UINT64_MASK = (1 << 64) - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")
_unpack_header = _HEADER.unpack_from
_crc32c_of = _crc32c.crc32c
_CODECS = tuple(Compression)

assert _HEADER.size == HEADER_SIZE


class TimestampType(enum.IntEnum):
    """Attributes bit 3: who set the timestamps (the producer, or the broker on append)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


Header: TypeAlias = tuple[str, bytes | None]


class Record(NamedTuple):
    """One record as a consumer sees it.

    A tuple rather than an attrs class: decoding builds one per record, and a tuple is the
    cheapest immutable value Python can build.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    #: The producer sequence number, or -1 when the batch has none.
    sequence: int


def crc32c(data: ReadableBuffer, value: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing from ``value``: the checksum batches carry."""
    return int(_crc32c.crc32c(data, value))


# --- the append path's header functions ----------------------------------------------------

#: The 13 fixed header fields in header order, as stored: base offset, batch length, partition
#: leader epoch, magic, CRC, attributes, last offset delta, base timestamp, max timestamp,
#: producer id, producer epoch, base sequence, records count. A plain tuple, straight from
#: ``unpack_from``: the append path handles every produced batch, and wrapping the tuple in a
#: named tuple would cost more than reading it.
BatchFields: TypeAlias = tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]


def read_batch_fields(view: memoryview, position: int) -> BatchFields:
    """The header of the batch at ``position``, with exactly ``BatchHeader.parse``'s checks.

    ``view`` must be a flat byte view (``byte_view``) and ``position`` not negative.
    """
    available = len(view) - position
    if available >= HEADER_SIZE:
        fields: BatchFields = _unpack_header(view, position)
        if fields[3] != MAGIC:
            raise _bad_magic(fields[3], position)
        if fields[1] < _MIN_BATCH_LENGTH:
            raise _short_length(fields[1], position)
        return fields
    if available > MAGIC_OFFSET and view[position + MAGIC_OFFSET] != MAGIC:
        magic = view[position + MAGIC_OFFSET]
        raise _bad_magic(magic - 256 if magic > 127 else magic, position)
    if available >= LOG_OVERHEAD:
        (length,) = _INT32.unpack_from(view, position + LENGTH_OFFSET)
        if length < _MIN_BATCH_LENGTH:
            raise _short_length(length, position)
    raise CorruptRecordError(
        f"truncated batch header: {max(available, 0)} of {HEADER_SIZE} bytes", position=position
    )


def check_batch(view: memoryview, position: int, fields: BatchFields) -> None:
    """``BatchHeader.validate`` for fields from ``read_batch_fields``: the whole batch is in
    ``view``, its CRC matches, its codec is known and its counts are sane.

    The CRC runs over a slice of ``view``, never a copy.
    """
    end = position + LOG_OVERHEAD + fields[1]
    if end > len(view):
        raise CorruptRecordError(
            f"truncated batch: the header declares {LOG_OVERHEAD + fields[1]} bytes, "
            f"{len(view) - position} are present",
            position=position,
        )
    computed = _crc32c_of(view[position + ATTRIBUTES_OFFSET : end])
    if computed != fields[4]:
        raise CorruptRecordError(
            f"CRC mismatch: stored 0x{fields[4]:08x}, computed 0x{computed:08x}",
            position=position,
        )
    codec = fields[5] & COMPRESSION_MASK
    if codec >= len(_CODECS):
        raise CorruptRecordError(f"unknown compression codec {codec}", position=position)
    count = fields[12]
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}", position=position)
    if fields[6] < 0:
        raise CorruptRecordError(f"negative last offset delta {fields[6]}", position=position)
    if not codec:
        _check_count_fits(count, fields[1] - _MIN_BATCH_LENGTH, position)


def validate_batch_at(view: memoryview, position: int, max_size: int) -> BatchFields:
    """``read_batch_fields`` then ``check_batch`` in one call: the append path's only check.

    A batch larger than ``max_size`` bytes is returned after the header checks alone, for the
    caller to refuse: its size is the error to report, as when ``validate`` came after a size
    check. A valid batch costs one ``unpack_from`` and one CRC; anything else is passed to the
    two functions above, which raise the error they would have raised.
    """
    available = len(view) - position
    if available >= HEADER_SIZE:
        fields: BatchFields = _unpack_header(view, position)
        length = fields[1]
        size = LOG_OVERHEAD + length
        if fields[3] == MAGIC and length >= _MIN_BATCH_LENGTH and size <= available:
            if size > max_size:
                return fields
            codec = fields[5] & COMPRESSION_MASK
            count = fields[12]
            if (
                _crc32c_of(view[position + ATTRIBUTES_OFFSET : position + size]) == fields[4]
                and codec < len(_CODECS)
                and count >= 0
                and fields[6] >= 0
                and (codec or count <= (length - _MIN_BATCH_LENGTH) // MIN_RECORD_SIZE)
            ):
                return fields
    fields = read_batch_fields(view, position)
    if LOG_OVERHEAD + fields[1] <= max_size:
        check_batch(view, position, fields)
    return fields


def stamp_batch(
    buf: WritableBuffer, position: int, fields: BatchFields, base_offset: int, leader_epoch: int
) -> None:
    """Sets the base offset and partition leader epoch of the batch at ``position`` in place.

    One ``pack_into`` writes both, with the batch length between them rewritten unchanged; the
    CRC covers none of the three. ``fields`` are the batch's from ``read_batch_fields``.
    """
    _OFFSET_LENGTH_EPOCH.pack_into(buf, position, base_offset, fields[1], leader_epoch)


def _bad_magic(magic: int, position: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"unsupported magic {magic}: only record batch v2 (magic {MAGIC}) is supported",
        position=position,
    )


def _short_length(length: int, position: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"batch length {length} is smaller than the {_MIN_BATCH_LENGTH}-byte minimum",
        position=position,
    )


# --- the header -------------------------------------------------------------------------------


class BatchHeader:
    """The fixed header of one batch, read in place from a buffer.

    ``parse`` checks only what it must to read the header sensibly (61 bytes, magic 2, a length
    of at least the header's); the rest of the batch need not be in the buffer yet, so a reader
    can learn ``size_in_bytes`` first. ``validate`` checks the whole batch.
    """

    __slots__ = ("_fields", "_position", "_view")

    _view: memoryview
    _position: int
    _fields: BatchFields

    @classmethod
    def parse(cls, buf: ReadableBuffer, position: int = 0) -> Self:
        """Reads the header of the batch starting at ``position`` in ``buf``.

        Raises CorruptRecordError if fewer than 61 bytes remain, the magic is not 2, or the
        batch length is smaller than a header.
        """
        view = byte_view(buf)
        if position < 0:
            raise ValueError(f"negative position {position}")
        fields = read_batch_fields(view, position)
        header = object.__new__(cls)
        header._view = view
        header._position = position
        header._fields = fields
        return header

    # The stored fields, in header order.

    @property
    def base_offset(self) -> int:
        return self._fields[0]

    @property
    def batch_length(self) -> int:
        """Bytes after the length field; the batch takes ``12 + batch_length`` bytes."""
        return self._fields[1]

    @property
    def partition_leader_epoch(self) -> int:
        return self._fields[2]

    @property
    def magic(self) -> int:
        return self._fields[3]

    @property
    def crc(self) -> int:
        """The stored CRC-32C (see ``validate`` for the check)."""
        return self._fields[4]

    @property
    def attributes(self) -> int:
        return self._fields[5]

    @property
    def last_offset_delta(self) -> int:
        return self._fields[6]

    @property
    def base_timestamp(self) -> int:
        """The first record's timestamp, or the delete horizon when ``has_delete_horizon``."""
        return self._fields[7]

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp, or the broker's append time under LOG_APPEND_TIME."""
        return self._fields[8]

    @property
    def producer_id(self) -> int:
        return self._fields[9]

    @property
    def producer_epoch(self) -> int:
        return self._fields[10]

    @property
    def base_sequence(self) -> int:
        return self._fields[11]

    @property
    def records_count(self) -> int:
        return self._fields[12]

    # Derived values.

    @property
    def position(self) -> int:
        """Where the batch starts in the buffer it was parsed from."""
        return self._position

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self._fields[1]

    @property
    def end_position(self) -> int:
        """Where the next batch starts in the buffer."""
        return self._position + LOG_OVERHEAD + self._fields[1]

    @property
    def last_offset(self) -> int:
        return self._fields[0] + self._fields[6]

    @property
    def next_offset(self) -> int:
        return self._fields[0] + self._fields[6] + 1

    @property
    def compression(self) -> Compression:
        codec = self._fields[5] & COMPRESSION_MASK
        if codec >= len(_CODECS):
            raise CorruptRecordError(f"unknown compression codec {codec}", position=self._position)
        return _CODECS[codec]

    @property
    def timestamp_type(self) -> TimestampType:
        if self._fields[5] & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self._fields[5] & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self._fields[5] & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self._fields[5] & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner may drop this batch's tombstones and markers, if it set a horizon."""
        return self._fields[7] if self._fields[5] & DELETE_HORIZON_MASK else None

    @property
    def has_producer_id(self) -> bool:
        return self._fields[9] > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """The sequence of the last record (wrapping past int32 max as Kafka does), or -1."""
        base = self._fields[11]
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return _increment_sequence(base, self._fields[6])

    @property
    def raw(self) -> memoryview:
        """The whole batch, as a view into the buffer (no copy)."""
        self._require_complete()
        return self._view[self._position : self.end_position]

    @property
    def payload(self) -> memoryview:
        """The records section as stored (compressed or not), as a view into the buffer."""
        self._require_complete()
        return self._view[self._position + RECORDS_OFFSET : self.end_position]

    def compute_crc(self) -> int:
        """The CRC-32C of the batch's bytes from the attributes to the end."""
        self._require_complete()
        return crc32c(self._view[self._position + ATTRIBUTES_OFFSET : self.end_position])

    def validate(self) -> None:
        """Checks the whole batch without decoding records; raises CorruptRecordError.

        Checks that the batch is complete in the buffer, its CRC, its codec, a non-negative
        record count and last offset delta, and, for an uncompressed batch, that the count fits
        in the records section.
        """
        check_batch(self._view, self._position, self._fields)

    def _require_complete(self) -> None:
        available = len(self._view) - self._position
        size = LOG_OVERHEAD + self._fields[1]
        if size > available:
            raise CorruptRecordError(
                f"truncated batch: the header declares {size} bytes, {available} are present",
                position=self._position,
            )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(position={self._position}, base_offset={self.base_offset}, "
            f"last_offset_delta={self.last_offset_delta}, records_count={self.records_count}, "
            f"size_in_bytes={self.size_in_bytes}, attributes=0x{self.attributes:02x})"
        )


class RecordBatch(BatchHeader):
    """A whole batch in a buffer: the header fields plus its records, decoded on demand."""

    __slots__ = ()

    def records(
        self, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> Iterator[Record]:
        """The batch's records, decompressing the records section first if needed.

        Nothing is decompressed or decoded before this is called, and records are decoded one
        at a time as the iterator is consumed. ``max_decompressed_size`` caps the decompressed
        records section; a batch that would exceed it is rejected as corrupt, not expanded.
        """
        self._require_complete()
        position = self._position
        fields = self._fields
        count = fields[12]
        if count < 0:
            raise CorruptRecordError(f"negative record count {count}", position=position)
        codec = self.compression
        start = position + RECORDS_OFFSET
        section = self._view[start : position + LOG_OVERHEAD + fields[1]]
        origin: int | None
        if codec is Compression.NONE:
            data = bytes(section)
            origin = start
        else:
            try:
                data = decompress(codec, section, max_size=max_decompressed_size)
            except CorruptRecordError as err:
                raise CorruptRecordError(err.reason, position=position) from err
            origin = None
        _check_count_fits(count, len(data), position)
        log_append_time = fields[8] if fields[5] & TIMESTAMP_TYPE_MASK else None
        return _decode_records(
            data, count, fields[0], fields[7], log_append_time, fields[11], origin, position
        )

    def __iter__(self) -> Iterator[Record]:
        return self.records()


def iter_batches(
    buf: ReadableBuffer,
    position: int = 0,
    *,
    validate: bool = True,
    allow_partial_tail: bool = False,
) -> Iterator[RecordBatch]:
    """The batches in ``buf`` from ``position`` on, as views into it (no copies).

    Each batch is checked with ``RecordBatch.validate`` unless ``validate`` is false. A buffer
    that ends inside a batch is corrupt, unless ``allow_partial_tail`` is set: then the cut
    batch ends the iteration quietly, as it does for a Kafka consumer reading a fetch response.
    """
    view = byte_view(buf)
    end = len(view)
    while position < end:
        remaining = end - position
        if allow_partial_tail and (
            remaining < HEADER_SIZE
            or LOG_OVERHEAD + _INT32.unpack_from(view, position + LENGTH_OFFSET)[0] > remaining
        ):
            return
        batch = RecordBatch.parse(view, position)
        if validate:
            batch.validate()
        else:
            batch._require_complete()
        yield batch
        position = batch.end_position


# --- rewriting a header in place ----------------------------------------------------------------


def set_base_offset(buf: WritableBuffer, base_offset: int, *, position: int = 0) -> None:
    """Assigns the batch's base offset in place; the CRC does not cover it."""
    view = _writable(BatchHeader.parse(buf, position))
    _INT64.pack_into(view, position + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: WritableBuffer, epoch: int, *, position: int = 0) -> None:
    """Stamps the leader epoch the batch was appended under, in place; the CRC does not cover it."""
    view = _writable(BatchHeader.parse(buf, position))
    _INT32.pack_into(view, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buf: WritableBuffer,
    max_timestamp: int,
    *,
    timestamp_type: TimestampType = TimestampType.LOG_APPEND_TIME,
    position: int = 0,
    check_crc: bool = True,
) -> None:
    """Sets the timestamp type and max timestamp in place and recomputes the CRC.

    This is how a broker stamps LOG_APPEND_TIME on a batch without decoding it: every record's
    timestamp then reads as ``max_timestamp``. Both fields are covered by the CRC, so the old
    CRC is checked first (unless ``check_crc`` is false because the caller just validated the
    batch): recomputing it over corrupt bytes would make them look valid.
    """
    header = BatchHeader.parse(buf, position)
    view = _writable(header)
    if check_crc:
        header.validate()
    else:
        header._require_complete()
    attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    _INT16.pack_into(view, position + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(view, position + MAX_TIMESTAMP_OFFSET, max_timestamp)
    crc = crc32c(view[position + ATTRIBUTES_OFFSET : header.end_position])
    _UINT32.pack_into(view, position + CRC_OFFSET, crc)


def _writable(header: BatchHeader) -> memoryview:
    view = header._view
    if view.readonly:
        raise TypeError("the buffer is read-only; rewrite batches in a bytearray or writable mmap")
    return view


# --- records ----------------------------------------------------------------------------------


def _increment_sequence(sequence: int, increment: int) -> int:
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def _check_count_fits(count: int, section_size: int, position: int) -> None:
    if count > section_size // MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"record count {count} cannot fit in a {section_size}-byte records section",
            position=position,
        )


def _decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    base_sequence: int,
    origin: int | None,
    batch_position: int,
) -> Iterator[Record]:
    """Yields ``count`` records from ``data`` and checks that exactly ``data`` was used.

    Written for speed: varints of one and two bytes are decoded inline, and records are built with
    ``tuple.__new__``. Errors are raised with positions relative to ``data`` and mapped to the
    caller's buffer at the end.
    """
    new_record = tuple.__new__
    end = len(data)
    pos = 0
    record_start = 0
    sequenced = base_sequence >= 0
    sequence = NO_SEQUENCE
    timestamp = log_append_time if log_append_time is not None else 0
    headers: tuple[Header, ...] = ()
    try:
        for _ in range(count):
            record_start = pos
            b = data[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b += (c << 7) - 0x80
                    size = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    size, pos = decode_varint(data, pos)
            record_end = pos + size
            if size < MIN_RECORD_SIZE - 1 or record_end > end:
                raise CorruptRecordError(
                    f"record length {size} is less than the {MIN_RECORD_SIZE - 1}-byte minimum"
                    if size < MIN_RECORD_SIZE - 1
                    else f"record length {size} overruns the {end - pos} bytes left",
                    position=record_start,
                )
            pos += 1  # record attributes: no bits are defined
            b = data[pos]
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b += (c << 7) - 0x80
                    timestamp_delta = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    timestamp_delta, pos = decode_varlong(data, pos)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b += (c << 7) - 0x80
                    offset_delta = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    offset_delta, pos = decode_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b += (c << 7) - 0x80
                    length = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    length, pos = decode_varint(data, pos)
            if length >= 0:
                if pos + length > record_end:
                    raise _overrun("key", length, record_start)
                key: bytes | None = data[pos : pos + length]
                pos += length
            elif length == -1:
                key = None
            else:
                raise CorruptRecordError(f"negative key length {length}", position=record_start)
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    b += (c << 7) - 0x80
                    length = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    length, pos = decode_varint(data, pos)
            if length >= 0:
                if pos + length > record_end:
                    raise _overrun("value", length, record_start)
                value: bytes | None = data[pos : pos + length]
                pos += length
            elif length == -1:
                value = None
            else:
                raise CorruptRecordError(f"negative value length {length}", position=record_start)
            b = data[pos]
            if b == 0:
                headers = ()
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos, record_end, record_start)
            if pos != record_end:
                raise CorruptRecordError(
                    f"record length {size} disagrees with its fields, "
                    f"which take {pos - record_end + size} bytes",
                    position=record_start,
                )
            if log_append_time is None:
                timestamp = base_timestamp + timestamp_delta
                if not _INT64_MIN <= timestamp <= _INT64_MAX:  # wrap as Java's long does
                    timestamp = ((timestamp - _INT64_MIN) & _UINT64_MASK) + _INT64_MIN
            if sequenced:  # wraps past int32 max, as Kafka's incrementSequence does
                sequence = base_sequence + offset_delta
                if sequence > _INT32_MAX:
                    sequence -= 1 << 31
            yield new_record(
                Record, (base_offset + offset_delta, timestamp, key, value, headers, sequence)
            )
        if pos != end:
            raise CorruptRecordError(
                f"{end - pos} bytes left over after the {count} records the header declares",
                position=pos,
            )
    except IndexError:
        raise _located(
            CorruptRecordError("truncated record", position=record_start), origin, batch_position
        ) from None
    except UnicodeDecodeError:
        raise _located(
            CorruptRecordError("header key is not valid UTF-8", position=record_start),
            origin,
            batch_position,
        ) from None
    except CorruptRecordError as err:
        raise _located(err, origin, batch_position) from None


def _decode_headers(
    data: bytes, pos: int, record_end: int, record_start: int
) -> tuple[tuple[Header, ...], int]:
    count, pos = decode_varint(data, pos)
    # Each header takes at least two bytes, which bounds the loop by the record's size.
    if count < 0 or count > (record_end - pos) // 2:
        raise CorruptRecordError(f"bad header count {count}", position=record_start)
    headers = []
    for _ in range(count):
        length, pos = decode_varint(data, pos)
        if length < 0:
            raise CorruptRecordError(f"negative header key length {length}", position=record_start)
        if pos + length > record_end:
            raise _overrun("header key", length, record_start)
        key = data[pos : pos + length].decode("utf-8")
        pos += length
        length, pos = decode_varint(data, pos)
        if length >= 0:
            if pos + length > record_end:
                raise _overrun("header value", length, record_start)
            value: bytes | None = data[pos : pos + length]
            pos += length
        elif length == -1:
            value = None
        else:
            raise CorruptRecordError(
                f"negative header value length {length}", position=record_start
            )
        headers.append((key, value))
    return tuple(headers), pos


def _overrun(what: str, length: int, record_start: int) -> CorruptRecordError:
    return CorruptRecordError(f"{what} length {length} overruns its record", position=record_start)


def _located(
    err: CorruptRecordError, origin: int | None, batch_position: int
) -> CorruptRecordError:
    """``err`` (positioned within the records section) repositioned in the caller's buffer."""
    relative = err.position or 0
    if origin is not None:
        return CorruptRecordError(err.reason, position=origin + relative)
    return CorruptRecordError(
        f"{err.reason} (at byte {relative} of the decompressed records)", position=batch_position
    )
