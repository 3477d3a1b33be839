"""Deep checks of a producer's record batches, made before the leader appends them.

The append path's header checks (length, magic, CRC) show that a batch arrived as its producer
wrote it, not that it can be read. A batch whose records section holds a byte too many, fewer
records than its count, or a ``lastOffsetDelta`` of a million passes them; acknowledged, it
stops every consumer that reads past it, or moves the log end by whatever its header claims.
Kafka's leader decodes every produced batch for this reason (``LogValidator``), and so does
tierlog's, with Kafka's rules and error codes:

* CORRUPT_MESSAGE (``CorruptRecordError``) when the records cannot be framed: a record length
  that disagrees with its fields, a key, value or header running past its record, a count the
  records do not match, bytes left over, a compressed section that does not decompress or would
  decompress to more than ``max_decompressed_size`` (never expanded past it: snappy, lz4 and
  zstd are refused from the sizes their framing declares, gzip once its output passes the cap);
* INVALID_RECORD (``InvalidRecordError``) when a well-framed batch breaks a rule for what a
  client may write: no records, a count its offset range disagrees with, offset deltas other
  than 0, 1, 2..., a control batch, a producer id without a sequence (or a transaction without
  a producer id), a record without a key on a compacted topic;
* INVALID_TIMESTAMP (``InvalidTimestampError``) for a CreateTime further from the broker's clock
  than ``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms``, and for a
  producer claiming LogAppendTime, which only the broker may set.

Before any of that, a produce request must hold exactly one batch per partition, of magic 2
and with base offset 0 (``check_produce_partition_data``; INVALID_RECORD otherwise).

Problems with single records are collected over the whole batch and reported as
``record_errors`` (index in the batch, message), as Kafka's ProduceResponse v8+ carries them;
framing errors stop at the first one and name its record the same way. Nothing is rewritten
here: the caller learns the largest record timestamp, which the header must carry (Kafka
rewrites a wrong one rather than refusing the batch).

Each record costs one pass of a tight loop over its varints; keys and values are skipped, never
copied. Followers and recovery do not come here: they copy what a leader already validated.
"""

from __future__ import annotations

import struct

import attrs

from ..errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, RecordError
from ._buffers import ReadableBuffer, byte_view
from .batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MIN_RECORD_SIZE,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchFields,
    TimestampType,
)
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, decompress
from .varint import INT64_MAX, INT64_MIN, decode_varint, decode_varlong

_UINT64_MASK = (1 << 64) - 1
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_CODECS = tuple(Compression)
#: The smallest record body after its length: attributes, timestamp delta, offset delta, key
#: length, value length and header count, one byte each.
_MIN_BODY = MIN_RECORD_SIZE - 1
_MIN_DECOMPRESSED_CAP = 1 << 20
#: How many record errors an exception message quotes (every one is in ``record_errors``).
_QUOTED_ERRORS = 3


def check_produce_partition_data(records: ReadableBuffer) -> None:
    """What a produce request (v3+) must hold for one partition: exactly one batch, of magic 2,
    with base offset 0 (Kafka's ``ProduceRequest.validateRecords`` and the base-offset rule of
    ``UnifiedLog.analyzeAndValidateRecords``). Raises InvalidRecordError.

    Only the framing fields are read; the log checks the batch itself.
    """
    view = byte_view(records)
    size = len(view)
    if not size:
        raise InvalidRecordError("a produce request needs a record batch for every partition")
    if size > MAGIC_OFFSET and view[MAGIC_OFFSET] in (0, 1):
        raise InvalidRecordError(
            f"produce requests carry record batches of magic {MAGIC} only, not magic "
            f"{view[MAGIC_OFFSET]}"
        )
    if size >= LOG_OVERHEAD:
        base_offset, length = _OFFSET_AND_LENGTH.unpack_from(view)
        if length >= 0 and LOG_OVERHEAD + length < size:
            raise InvalidRecordError(
                "produce requests carry exactly one record batch per partition; "
                f"{size - LOG_OVERHEAD - length} bytes follow the first batch"
            )
        if base_offset:
            raise InvalidRecordError(
                f"the base offset of a produced batch must be 0, not {base_offset}"
            )


def max_decompressed_size_for(max_message_bytes: int) -> int:
    """The decompression cap for a topic whose batches may take ``max_message_bytes``.

    A compression ratio of 64 (at least 1 MiB), but never more than consumers decompress
    (``DEFAULT_MAX_DECOMPRESSED_SIZE``): a batch they would refuse must not be accepted.
    """
    return min(DEFAULT_MAX_DECOMPRESSED_SIZE, max(_MIN_DECOMPRESSED_CAP, 64 * max_message_bytes))


@attrs.frozen
class ValidationRules:
    """The topic settings a produced batch is checked against (Kafka's topic config names)."""

    #: ``message.timestamp.type``: under LogAppendTime record timestamps are not checked, the
    #: broker replaces them.
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    #: ``message.timestamp.before.max.ms``: how far in the past a CreateTime may be.
    timestamp_before_max_ms: int = INT64_MAX
    #: ``message.timestamp.after.max.ms``: how far in the future a CreateTime may be.
    timestamp_after_max_ms: int = 3_600_000
    #: ``cleanup.policy`` includes ``compact``: every record needs a key.
    compacted: bool = False
    #: The most bytes a compressed records section may decompress to.
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE


def validate_produced_batch(
    view: memoryview, position: int, fields: BatchFields, rules: ValidationRules, now: int
) -> int:
    """Checks every record of the client batch at ``position``; returns its largest record
    timestamp (-1 if it has none), the max timestamp its header must carry.

    ``fields`` are the batch's from ``validate_batch_at``, which has checked its header and CRC.
    ``now`` is the broker's clock in epoch milliseconds. Raises CorruptRecordError,
    InvalidRecordError or InvalidTimestampError, the last two with ``record_errors`` when
    single records are at fault.
    """
    _check_header_rules(fields, position)
    count = fields[12]
    attributes = fields[5]
    start = position + RECORDS_OFFSET
    stop = position + LOG_OVERHEAD + fields[1]
    codec = attributes & COMPRESSION_MASK
    if codec:
        try:
            data = decompress(
                _CODECS[codec], view[start:stop], max_size=rules.max_decompressed_size
            )
        except CorruptRecordError as err:
            raise CorruptRecordError(err.reason, position=position) from None
    else:
        data = view[start:stop].tobytes()
    min_delta, max_delta, record_errors = _scan_records(
        data, count, rules.compacted, position, bool(codec)
    )
    max_timestamp = NO_TIMESTAMP
    bad_timestamps = False
    if attributes & TIMESTAMP_TYPE_MASK or rules.timestamp_type is TimestampType.CREATE_TIME:
        if attributes & TIMESTAMP_TYPE_MASK:
            # Only the broker stamps LogAppendTime; Kafka refuses a producer's claim per record.
            low, high = 0, -1
        else:
            # Clamped to a long's range: timestamps within them need no wrapping.
            low = max(now - rules.timestamp_before_max_ms, INT64_MIN)
            high = min(now + rules.timestamp_after_max_ms, INT64_MAX)
        base_timestamp = fields[7]
        if low <= base_timestamp + min_delta and base_timestamp + max_delta <= high:
            max_timestamp = base_timestamp + max_delta
        else:
            max_timestamp, late = _check_timestamps(data, count, base_timestamp, low, high)
            if late:
                record_errors = sorted((record_errors or []) + late)
                bad_timestamps = True
    if record_errors:
        _refuse(record_errors, bad_timestamps, position)
    return max_timestamp


def _check_header_rules(fields: BatchFields, position: int) -> None:
    """Kafka's ``validateBatch`` for a client's batch: what the header alone can break."""
    count = fields[12]
    last_offset_delta = fields[6]
    attributes = fields[5]
    if count <= 0:
        raise InvalidRecordError(
            f"the batch at byte {position} declares {count} records; a produced batch needs one"
        )
    if last_offset_delta + 1 != count:
        raise InvalidRecordError(
            f"inconsistent batch at byte {position}: lastOffsetDelta {last_offset_delta} "
            f"spans {last_offset_delta + 1} offsets, but the batch declares {count} records"
        )
    if attributes & CONTROL_MASK:
        raise InvalidRecordError(
            f"clients may not write control records (the batch at byte {position})"
        )
    producer_id = fields[9]
    if producer_id > NO_PRODUCER_ID:
        if fields[11] < 0:
            raise InvalidRecordError(
                f"invalid sequence number {fields[11]} in the batch at byte {position} "
                f"of producer id {producer_id}"
            )
    elif attributes & TRANSACTIONAL_MASK:
        raise InvalidRecordError(
            f"the transactional batch at byte {position} carries no producer id"
        )


def _scan_records(
    data: bytes, count: int, compacted: bool, batch_position: int, compressed: bool
) -> tuple[int, int, list[RecordError] | None]:
    """Walks ``count`` records through ``data`` and checks that they use exactly all of it.

    Returns the smallest and largest timestamp delta, and the records breaking a rule (keys,
    offsets) if any; raises CorruptRecordError for records that cannot be framed. Written for
    speed: varints of one and two bytes are decoded inline, longer ones by ``decode_varint``;
    nothing is sliced out, and timestamps are checked by the caller from the two deltas.
    """
    end = len(data)
    pos = 0
    index = 0
    min_delta = INT64_MAX
    max_delta = INT64_MIN
    record_errors: list[RecordError] | None = None
    found = count
    try:
        for index in range(count):
            if pos >= end:
                found = index
                break
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
            if size < 6:  # _MIN_BODY, as a literal: this runs for every record
                raise CorruptRecordError(
                    f"record length {size} is less than the {_MIN_BODY}-byte minimum"
                )
            if record_end > end:
                raise CorruptRecordError(
                    f"record length {size} overruns the {end - pos} bytes left"
                )
            # The record attributes (no bits are defined) are skipped.
            b = data[pos + 1]
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                c = data[pos + 2]
                if c < 0x80:
                    b += (c << 7) - 0x80
                    timestamp_delta = (b >> 1) ^ -(b & 1)
                    pos += 3
                else:
                    timestamp_delta, pos = decode_varlong(data, pos + 1)
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
                pos += length
                if pos > record_end:
                    raise CorruptRecordError(f"key length {length} overruns its record")
            elif length != -1:
                raise CorruptRecordError(f"negative key length {length}")
            elif compacted:
                if record_errors is None:
                    record_errors = []
                record_errors.append(
                    RecordError(index, "a compacted topic cannot accept a record without a key")
                )
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
                pos += length
                if pos > record_end:
                    raise CorruptRecordError(f"value length {length} overruns its record")
            elif length != -1:
                raise CorruptRecordError(f"negative value length {length}")
            if data[pos]:
                pos = _skip_headers(data, pos, record_end)
            else:
                pos += 1
            if pos != record_end:
                raise CorruptRecordError(
                    f"record length {size} disagrees with its fields, "
                    f"which take {pos - record_end + size} bytes"
                )
            if offset_delta != index:
                if record_errors is None:
                    record_errors = []
                record_errors.append(
                    RecordError(
                        index,
                        f"offset delta {offset_delta} where {index} was expected: inner record "
                        "offsets must be consecutive from 0",
                    )
                )
            if timestamp_delta > max_delta:
                max_delta = timestamp_delta
            if timestamp_delta < min_delta:
                min_delta = timestamp_delta
    except IndexError:
        raise _located("truncated record", index, batch_position, compressed) from None
    except UnicodeDecodeError:
        raise _located("header key is not valid UTF-8", index, batch_position, compressed) from None
    except CorruptRecordError as err:
        raise _located(err.reason, index, batch_position, compressed) from None
    if found != count:
        raise CorruptRecordError(
            f"the batch declares {count} records but its {'decompressed ' if compressed else ''}"
            f"records section holds {found}",
            position=batch_position,
        )
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} bytes left over after the {count} records the batch declares",
            position=batch_position,
        )
    return min_delta, max_delta, record_errors


def _check_timestamps(
    data: bytes, count: int, base_timestamp: int, low: int, high: int
) -> tuple[int, list[RecordError]]:
    """The largest timestamp of records already framed, and those outside ``[low, high]``.

    A timestamp of -1 (none) is not checked, as in Kafka; ``low > high`` refuses every record
    (a producer claiming LogAppendTime). Timestamps wrap as Java's long arithmetic does.
    """
    max_timestamp = NO_TIMESTAMP
    late = []
    pos = 0
    for index in range(count):
        size, pos = decode_varint(data, pos)
        record_end = pos + size
        timestamp_delta, _ = decode_varlong(data, pos + 1)
        timestamp = base_timestamp + timestamp_delta
        if not INT64_MIN <= timestamp <= INT64_MAX:
            timestamp = ((timestamp - INT64_MIN) & _UINT64_MASK) + INT64_MIN
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        if low > high or (not low <= timestamp <= high and timestamp != NO_TIMESTAMP):
            late.append(RecordError(index, _timestamp_error(timestamp, low, high)))
        pos = record_end
    return max_timestamp, late


def _skip_headers(data: bytes, pos: int, record_end: int) -> int:
    """The position after the headers at ``pos`` (their count first), each checked."""
    count, pos = decode_varint(data, pos)
    # Each header takes at least two bytes, which bounds the loop by the record's size.
    if count < 0 or count > (record_end - pos) // 2:
        raise CorruptRecordError(f"bad header count {count}")
    for _ in range(count):
        length, pos = decode_varint(data, pos)
        if length < 0:
            raise CorruptRecordError(f"negative header key length {length}")
        if pos + length > record_end:
            raise CorruptRecordError(f"header key length {length} overruns its record")
        data[pos : pos + length].decode("utf-8")  # consumers decode it: it must be UTF-8
        pos += length
        length, pos = decode_varint(data, pos)
        if length >= 0:
            pos += length
            if pos > record_end:
                raise CorruptRecordError(f"header value length {length} overruns its record")
        elif length != -1:
            raise CorruptRecordError(f"negative header value length {length}")
    return pos


def _timestamp_error(timestamp: int, low: int, high: int) -> str:
    if low > high:
        return "producers may not set the LogAppendTime timestamp type; the broker sets it"
    return f"timestamp {timestamp} is out of range: it must be within [{low}, {high}]"


def _located(reason: str, index: int, batch_position: int, compressed: bool) -> CorruptRecordError:
    """A framing error of record ``index``, positioned at its batch and listed as its record's."""
    where = f"record {index} of the {'decompressed ' if compressed else ''}batch"
    return CorruptRecordError(
        f"{where}: {reason}",
        position=batch_position,
        record_errors=(RecordError(index, reason),),
    )


def _refuse(record_errors: list[RecordError], bad_timestamps: bool, batch_position: int) -> None:
    errors = tuple(record_errors)
    quoted = "; ".join(f"record {e.batch_index}: {e.message}" for e in errors[:_QUOTED_ERRORS])
    more = f" (and {len(errors) - _QUOTED_ERRORS} more)" if len(errors) > _QUOTED_ERRORS else ""
    summary = f"{len(errors)} record(s) of the batch at byte {batch_position} refused: {quoted}"
    if bad_timestamps:
        raise InvalidTimestampError(f"invalid timestamps: {summary}{more}", record_errors=errors)
    raise InvalidRecordError(f"invalid records: {summary}{more}", record_errors=errors)
