"""Decoding a tiered log segment into Arrow record batches: the Spark data source's read path.

A segment is a sequence of Kafka record batches (v2). Batches are walked with the core's header
functions (every batch walked is CRC-checked, as a Kafka consumer does) and decompressed with the
core's codecs; whole batches are skipped by header where the offset or timestamp range, a control
marker or an aborted transaction rules them out.

Records are decoded column by column rather than record by record. Python only finds where each
record starts, which takes one varint read per record; the fields inside the records are parsed
with Arrow compute kernels over all records of up to ``max_rows`` at once, and keys, values and
headers are gathered straight from the decompressed bytes into Arrow buffers. Anything the
columnar parser does not accept (corrupt bytes, but also legal oddities such as a record with
very many headers) is decoded again by the core's ``RecordBatch.records()``, which either yields
the same rows more slowly or raises the exact ``CorruptRecordError``.
"""

from __future__ import annotations

import array
import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from tierlog.errors import CorruptRecordError
from tierlog.records import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    LOG_OVERHEAD,
    Compression,
    ControlType,
    RecordBatch,
    check_batch,
    control_type_id,
    decompress,
    read_batch_fields,
)
from tierlog.records.varint import decode_varint

__all__ = ["SCHEMA", "decode_segment"]

HEADER_TYPE = pa.struct([pa.field("key", pa.string(), nullable=False), ("value", pa.binary())])

SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("timestamp_type", pa.string(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", pa.list_(HEADER_TYPE), nullable=False),
        pa.field("leader_epoch", pa.int32(), nullable=False),
        pa.field("producer_id", pa.int64(), nullable=False),
        pa.field("producer_epoch", pa.int16(), nullable=False),
        pa.field("sequence", pa.int32(), nullable=False),
        pa.field("is_transactional", pa.bool_(), nullable=False),
        pa.field("segment_id", pa.string(), nullable=False),
    ]
)

_RECORDS_OFFSET = 61
_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
_MIN_RECORD_BODY = 6
_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
#: Zero bytes after the records, so a varint read near the end stays inside the buffer.
_PADDING = bytes(16)
#: A group of batches is decoded once it holds this many bytes, whatever its row count: the
#: binary columns' 32-bit offsets must not overflow.
_MAX_GROUP_BYTES = 256 << 20
#: Records with more headers than this go to the core's decoder: the columnar parser loops once
#: per header slot.
_MAX_COLUMNAR_HEADERS = 64
_TIMESTAMP_TYPES = pa.array(["CreateTime", "LogAppendTime"], pa.string())


def decode_segment(
    data: bytes | memoryview,
    *,
    topic: str,
    partition: int,
    segment_id: str,
    start_offset: int = 0,
    end_offset: int | None = None,
    min_timestamp: int | None = None,
    max_timestamp: int | None = None,
    aborted: Iterable[tuple[int, int]] = (),
    read_committed: bool = False,
    max_rows: int = 65536,
) -> Iterator[pa.RecordBatch]:
    """The records of one segment's bytes as Arrow batches of ``SCHEMA``, in offset order.

    Rows are the data records with ``start_offset <= offset <= end_offset`` and
    ``min_timestamp <= timestamp <= max_timestamp`` (bounds that are None do not filter); control
    records are never rows. ``aborted`` lists ``(producer_id, first_offset)`` of the aborted
    transactions touching the segment, as its transaction index holds them; with
    ``read_committed`` their records are dropped exactly as a Kafka consumer drops them. Every
    batch but the last holds ``max_rows`` rows.

    Raises CorruptRecordError, naming the segment and the byte position, for bytes that are not
    valid record batches.
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be positive, not {max_rows}")
    reader = _SegmentReader(
        topic,
        partition,
        segment_id,
        start_offset,
        end_offset,
        min_timestamp,
        max_timestamp,
        sorted((first, producer) for producer, first in aborted) if read_committed else None,
    )
    return _in_batches_of(reader.read(data, max_rows), max_rows)


def _in_batches_of(batches: Iterator[pa.RecordBatch], max_rows: int) -> Iterator[pa.RecordBatch]:
    """``batches`` re-cut so that all but the last hold exactly ``max_rows`` rows."""
    carry: pa.RecordBatch | None = None
    for batch in batches:
        if carry is not None:
            batch = pa.concat_batches([carry, batch])
            carry = None
        while batch.num_rows >= max_rows:
            yield batch.slice(0, max_rows)
            batch = batch.slice(max_rows)
        if batch.num_rows:
            carry = batch
    if carry is not None:
        yield carry


class _Unsupported(Exception):
    """The columnar parser refuses a group; the core's decoder decides what it holds."""


class _Group:
    """Consecutive batches whose records are decoded together."""

    __slots__ = ("batches", "rows", "sections", "segment", "size")

    def __init__(self, segment: memoryview) -> None:
        #: The segment's bytes, for the core's decoder to re-read batches from.
        self.segment = segment
        #: (position, fields) of each batch.
        self.batches: list[tuple[int, Any]] = []
        #: The decompressed records section of each batch.
        self.sections: list[bytes | memoryview] = []
        self.rows = 0
        self.size = 0


class _SegmentReader:
    """One ``decode_segment`` call: walks the batches, groups them and decodes each group."""

    __slots__ = (
        "aborted",
        "end_offset",
        "filtered",
        "max_timestamp",
        "min_timestamp",
        "partition",
        "segment_id",
        "start_offset",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        segment_id: str,
        start_offset: int,
        end_offset: int | None,
        min_timestamp: int | None,
        max_timestamp: int | None,
        aborted: list[tuple[int, int]] | None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.segment_id = segment_id
        self.start_offset = start_offset
        self.end_offset = _INT64_MAX if end_offset is None else end_offset
        self.min_timestamp = min_timestamp
        self.max_timestamp = max_timestamp
        self.aborted = aborted
        #: Whether records must be checked against the ranges: the batch headers alone decide
        #: only which batches to skip, and a batch straddling a bound has records on both sides.
        self.filtered = (
            start_offset > 0
            or end_offset is not None
            or (min_timestamp, max_timestamp) != (None, None)
        )

    def read(self, data: bytes | memoryview, max_rows: int) -> Iterator[pa.RecordBatch]:
        try:
            yield from self._read(data, max_rows)
        except CorruptRecordError as err:
            raise CorruptRecordError(
                f"segment {self.segment_id}: {err.reason}", position=err.position
            ) from err

    def _read(self, data: bytes | memoryview, max_rows: int) -> Iterator[pa.RecordBatch]:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        end = len(view)
        start_offset, end_offset = self.start_offset, self.end_offset
        min_timestamp, max_timestamp = self.min_timestamp, self.max_timestamp
        aborted = self.aborted
        next_aborted = 0
        open_aborted: set[int] = set()
        group = _Group(view)
        position = 0
        while position < end:
            fields = read_batch_fields(view, position)
            check_batch(view, position, fields)
            batch_position = position
            position += LOG_OVERHEAD + fields[1]
            base_offset = fields[0]
            if base_offset > end_offset:
                break
            last_offset = base_offset + fields[6]
            attributes = fields[5]
            producer_id = fields[9]
            if aborted is not None and producer_id >= 0:
                # Kafka's CompletedFetch: a transaction is open from its first offset until
                # its producer's ABORT marker, and transactional batches of a producer with
                # an open aborted transaction are dropped.
                while next_aborted < len(aborted) and aborted[next_aborted][0] <= last_offset:
                    open_aborted.add(aborted[next_aborted][1])
                    next_aborted += 1
                if attributes & _CONTROL_MASK:
                    if _is_abort_marker(view, batch_position):
                        open_aborted.discard(producer_id)
                    continue
                if attributes & _TRANSACTIONAL_MASK and producer_id in open_aborted:
                    continue
            if attributes & _CONTROL_MASK or last_offset < start_offset:
                continue
            batch_max_timestamp = fields[8]
            if min_timestamp is not None and batch_max_timestamp < min_timestamp:
                continue
            log_append_time = attributes & _LOG_APPEND_TIME_MASK
            if (
                log_append_time
                and max_timestamp is not None
                and batch_max_timestamp > max_timestamp
            ):
                continue
            section = _records_section(view, batch_position, fields)
            group.batches.append((batch_position, fields))
            group.sections.append(section)
            group.rows += fields[12]
            group.size += len(section)
            if group.rows >= max_rows or group.size >= _MAX_GROUP_BYTES:
                yield self._decode(group)
                group = _Group(view)
        if group.batches:
            yield self._decode(group)

    def _decode(self, group: _Group) -> pa.RecordBatch:
        try:
            return self._decode_columnar(group)
        except (_Unsupported, pa.ArrowException):
            pass
        try:
            return self._decode_with_core(group)
        except (pa.ArrowException, OverflowError) as err:
            raise CorruptRecordError(
                f"records that do not fit the schema: {err}", position=group.batches[0][0]
            ) from err

    # --- the columnar decoder -------------------------------------------------------------

    def _decode_columnar(self, group: _Group) -> pa.RecordBatch:
        buffer = b"".join([*group.sections, _PADDING])
        ends = array.array("q")
        run_ends: list[int] = []
        origin = 0
        for section, (_, fields) in zip(group.sections, group.batches, strict=True):
            origin += len(section)
            if _find_record_ends(buffer, origin - len(section), fields[12], ends) != origin:
                raise _Unsupported
            run_ends.append(len(ends))
        count = len(ends)
        if not count:
            return _empty_batch()
        u8 = pa.Array.from_buffers(pa.uint8(), len(buffer), [None, pa.py_buffer(buffer)])
        end = pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(ends)])
        start = pa.concat_arrays([pa.array([0], pa.int64()), end.slice(0, count - 1)])

        size, body = _varints(u8, start, 5)
        if not pc.all(pc.equal(pc.add(body, size), end)).as_py():
            raise _Unsupported
        if pc.min(size).as_py() < _MIN_RECORD_BODY:
            raise _Unsupported
        timestamp_delta, at = _varints(u8, pc.add(body, 1), 10)
        offset_delta, at = _varints(u8, at, 5)
        key_length, key_start = _varints(u8, at, 5)
        at = _skip(key_start, key_length, end, nullable=True)
        value_length, value_start = _varints(u8, at, 5)
        at = _skip(value_start, value_length, end, nullable=True)
        headers = _Headers(u8, at, end)

        run_end_array = pa.array(run_ends, pa.int64())

        def per_batch(values: Sequence[int], type_: pa.DataType) -> pa.Array:
            if len(set(values)) == 1:
                return pa.repeat(pa.scalar(values[0], type_), count)
            encoded = pa.RunEndEncodedArray.from_arrays(run_end_array, pa.array(values, type_))
            return pc.run_end_decode(encoded)

        batches = [fields for _, fields in group.batches]
        offset = pc.add_checked(per_batch([f[0] for f in batches], pa.int64()), offset_delta)
        log_append_time = [bool(f[5] & _LOG_APPEND_TIME_MASK) for f in batches]
        timestamp = pc.add(per_batch([f[7] for f in batches], pa.int64()), timestamp_delta)
        if any(log_append_time):
            timestamp = pc.if_else(
                per_batch(log_append_time, pa.bool_()),
                per_batch([f[8] for f in batches], pa.int64()),
                timestamp,
            )
        base_sequences = [f[11] for f in batches]
        if max(base_sequences) < 0:
            sequence = pa.repeat(pa.scalar(-1, pa.int32()), count)
        else:
            base_sequence = per_batch(base_sequences, pa.int64())
            sequence = pc.add(base_sequence, offset_delta)
            sequence = pc.if_else(
                pc.greater(sequence, _INT32_MAX), pc.subtract(sequence, 1 << 31), sequence
            )
            sequence = pc.if_else(pc.less(base_sequence, 0), -1, sequence).cast(pa.int32())
        leader_epoch = per_batch([f[2] for f in batches], pa.int32())
        producer_id = per_batch([f[9] for f in batches], pa.int64())
        producer_epoch = per_batch([f[10] for f in batches], pa.int16())
        transactional = per_batch([bool(f[5] & _TRANSACTIONAL_MASK) for f in batches], pa.bool_())
        timestamp_type = per_batch(log_append_time, pa.bool_())

        keep: pa.Array | None = None
        kept: pa.Array | None = None
        if self.filtered:
            keep = self._in_range(offset, timestamp)
            if pc.all(keep).as_py():
                keep = None
            else:
                kept = pc.indices_nonzero(keep)
                count = len(kept)

        def rows(array: pa.Array) -> pa.Array:
            return array if kept is None else pc.take(array, kept)

        if any(log_append_time):
            timestamp_types = pc.take(_TIMESTAMP_TYPES, rows(timestamp_type).cast(pa.int8()))
        else:
            timestamp_types = pa.repeat(_TIMESTAMP_TYPES[0], count)
        columns = [
            pa.repeat(pa.scalar(self.topic, pa.string()), count),
            pa.repeat(pa.scalar(self.partition, pa.int32()), count),
            rows(offset),
            rows(timestamp).cast(SCHEMA.field("timestamp").type),
            timestamp_types,
            _gather(u8, rows(key_start), rows(key_length)),
            _gather(u8, rows(value_start), rows(value_length)),
            headers.column(keep, kept),
            rows(leader_epoch),
            rows(producer_id),
            rows(producer_epoch),
            rows(sequence),
            rows(transactional),
            pa.repeat(pa.scalar(self.segment_id, pa.string()), count),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)

    def _in_range(self, offset: pa.Array, timestamp: pa.Array) -> pa.Array:
        keep = pc.and_(
            pc.greater_equal(offset, self.start_offset), pc.less_equal(offset, self.end_offset)
        )
        if self.min_timestamp is not None:
            keep = pc.and_(keep, pc.greater_equal(timestamp, self.min_timestamp))
        if self.max_timestamp is not None:
            keep = pc.and_(keep, pc.less_equal(timestamp, self.max_timestamp))
        return keep

    # --- the core's decoder ----------------------------------------------------------------

    def _decode_with_core(self, group: _Group) -> pa.RecordBatch:
        """The group decoded record by record; raises the core's error for corrupt records."""
        columns: list[list[Any]] = [[] for _ in SCHEMA]
        (_, _, offsets, timestamps, types, keys, values, headers) = columns[:8]
        (epochs, producer_ids, producer_epochs, sequences, transactional) = columns[8:13]
        low, high = self.start_offset, self.end_offset
        min_timestamp, max_timestamp = self.min_timestamp, self.max_timestamp
        for position, fields in group.batches:
            batch = RecordBatch.parse(group.segment, position)
            timestamp_type = "LogAppendTime" if fields[5] & _LOG_APPEND_TIME_MASK else "CreateTime"
            for record in batch.records():
                offset, timestamp = record.offset, record.timestamp
                if not low <= offset <= high:
                    continue
                if min_timestamp is not None and timestamp < min_timestamp:
                    continue
                if max_timestamp is not None and timestamp > max_timestamp:
                    continue
                offsets.append(offset)
                timestamps.append(timestamp)
                types.append(timestamp_type)
                keys.append(record.key)
                values.append(record.value)
                headers.append(list(record.headers))
                epochs.append(fields[2])
                producer_ids.append(fields[9])
                producer_epochs.append(fields[10])
                sequences.append(record.sequence)
                transactional.append(bool(fields[5] & _TRANSACTIONAL_MASK))
        count = len(offsets)
        columns[0] = [self.topic] * count
        columns[1] = [self.partition] * count
        columns[13] = [self.segment_id] * count
        arrays = [
            pa.array(column, field.type if field.name != "timestamp" else pa.int64())
            for column, field in zip(columns, SCHEMA, strict=True)
        ]
        arrays[3] = arrays[3].cast(SCHEMA.field("timestamp").type)
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def _records_section(view: memoryview, position: int, fields: Any) -> bytes | memoryview:
    """The batch's records section, decompressed; errors carry the batch's position."""
    section = view[position + _RECORDS_OFFSET : position + LOG_OVERHEAD + fields[1]]
    codec = fields[5] & _COMPRESSION_MASK
    if not codec:
        return section
    try:
        data = decompress(Compression(codec), section, max_size=DEFAULT_MAX_DECOMPRESSED_SIZE)
    except CorruptRecordError as err:
        raise CorruptRecordError(err.reason, position=position) from err
    if fields[12] > len(data) // (_MIN_RECORD_BODY + 1):
        raise CorruptRecordError(
            f"record count {fields[12]} cannot fit in a {len(data)}-byte records section",
            position=position,
        )
    return data


def _is_abort_marker(view: memoryview, position: int) -> bool:
    """Whether the control batch at ``position`` is an ABORT marker (Kafka's check)."""
    for record in RecordBatch.parse(view, position).records():
        try:
            return control_type_id(record) == ControlType.ABORT
        except CorruptRecordError as err:
            raise CorruptRecordError(err.reason, position=position) from err
    return False


def _find_record_ends(data: bytes, position: int, count: int, ends: array.array[int]) -> int:
    """Appends where each of ``count`` records from ``position`` on ends; returns the last end.

    This is the one loop over records in Python, so it reads only the record lengths, and those
    of one or two bytes without their sign: the columnar parser re-reads and checks them all.
    Returns -1 where ``data`` runs out or a longer length is corrupt.
    """
    append = ends.append
    try:
        for _ in range(count):
            b = data[position]
            if b < 0x80:
                position += 1 + (b >> 1)
            else:
                c = data[position + 1]
                if c < 0x80:
                    position += 2 + ((b - 0x80 + (c << 7)) >> 1)
                else:
                    size, position = decode_varint(data, position)
                    if size < 0:
                        return -1
                    position += size
            append(position)
    except (IndexError, CorruptRecordError):
        return -1
    return position


def _varints(u8: pa.Array, at: pa.Array, max_bytes: int) -> tuple[pa.Array, pa.Array]:
    """The zig-zag varints at positions ``at`` of ``u8`` (int64), and the positions after them.

    Raises _Unsupported for a varint longer than ``max_bytes`` or wider than its type.
    """
    first = pc.take(u8, at).cast(pa.int64())
    if not len(first):
        return first, at
    if pc.max(first).as_py() < 0x80:
        zz = first
        after = pc.add(at, 1)
    else:
        at_second = pc.add(at, 1)
        second = pc.take(u8, at_second).cast(pa.int64())
        more = pc.greater_equal(first, 0x80)
        if pc.any(pc.and_(more, pc.greater_equal(second, 0x80))).as_py():
            return _long_varints(u8, at, max_bytes)
        zz = pc.add(first, pc.if_else(more, pc.subtract(pc.shift_left(second, 7), 0x80), 0))
        after = pc.add(at_second, more.cast(pa.int64()))
    return _unzigzag(zz), after


def _long_varints(u8: pa.Array, at: pa.Array, max_bytes: int) -> tuple[pa.Array, pa.Array]:
    """``_varints`` for varints of any length, one byte position per round.

    The arithmetic stays in uint64 with uint64 operands: Arrow would otherwise compute in int64,
    where a shift by 63 is out of range.
    """

    def u64(value: int) -> pa.Scalar:
        return pa.scalar(value, pa.uint64())

    first = pc.take(u8, at)
    zz = pc.bit_wise_and(first, 0x7F).cast(pa.uint64())
    more = pc.greater_equal(first, 0x80)
    length = pc.add(more.cast(pa.int64()), 1)
    shift = 7
    while pc.any(more).as_py():
        if shift >= 7 * max_bytes:
            raise _Unsupported
        byte = pc.take(u8, pc.add(at, shift // 7))
        bits = pc.bit_wise_and(byte, 0x7F).cast(pa.uint64())
        if shift == 63 and pc.max(pc.if_else(more, bits, u64(0))).as_py() > 1:
            raise _Unsupported
        zz = pc.if_else(more, pc.bit_wise_or(zz, pc.shift_left(bits, u64(shift))), zz)
        more = pc.and_(more, pc.greater_equal(byte, 0x80))
        length = pc.add(length, more.cast(pa.int64()))
        shift += 7
    if max_bytes == 5 and pc.max(zz).as_py() >> 32:
        raise _Unsupported
    half = pc.shift_right(zz, u64(1)).cast(pa.int64())
    sign = pc.bit_wise_and(zz, u64(1)).cast(pa.int64())
    return pc.bit_wise_xor(half, pc.negate(sign)), pc.add(at, length)


def _unzigzag(zz: pa.Array) -> pa.Array:
    """Zig-zag values below 2**63 decoded (int64)."""
    return pc.bit_wise_xor(pc.shift_right(zz, 1), pc.negate(pc.bit_wise_and(zz, 1)))


def _skip(start: pa.Array, length: pa.Array, end: pa.Array, *, nullable: bool) -> pa.Array:
    """Where a field of ``length`` bytes at ``start`` ends; _Unsupported if it overruns its
    record or has a negative length (other than -1, null, when ``nullable``)."""
    if len(length) and pc.min(length).as_py() < (-1 if nullable else 0):
        raise _Unsupported
    after = pc.add(start, pc.max_element_wise(length, 0))
    if len(after) and not pc.all(pc.less_equal(after, end)).as_py():
        raise _Unsupported
    return after


def _gather(u8: pa.Array, start: pa.Array, length: pa.Array) -> pa.Array:
    """A binary array of the ``length`` bytes at each ``start`` of ``u8``; -1 is null.

    The fields lie in the buffer in order and apart, so their starts and ends interleaved are
    the offsets of a binary array over the whole buffer whose even elements are the fields and
    odd elements the bytes between them; Arrow's ``take`` of the even elements copies the fields
    out in one pass.
    """
    count = len(start)
    if not count:
        return pa.array([], pa.binary())
    valid = pc.greater_equal(length, 0)
    end = pc.add(start, pc.max_element_wise(length, 0))
    interleaving, evens = _interleaving(count)
    offsets = pc.take(pa.concat_arrays([start, end]), interleaving).cast(pa.int32())
    spans = pa.Array.from_buffers(
        pa.binary(), 2 * count - 1, [None, offsets.buffers()[1], u8.buffers()[1]]
    )
    fields = pc.take(spans, evens)
    nulls = count - pc.sum(valid.cast(pa.int64())).as_py()
    if not nulls:
        return fields
    return pa.Array.from_buffers(
        pa.binary(),
        count,
        [pa.concat_arrays([valid]).buffers()[1], *fields.buffers()[1:]],
        null_count=nulls,
    )


@functools.lru_cache(maxsize=4)
def _interleaving(count: int) -> tuple[pa.Array, pa.Array]:
    """The indices that interleave two concatenated arrays of ``count`` (0, count, 1, ...),
    and the even indices below ``2 * count``; groups mostly have the same size, so cached."""
    index = pa.array(range(2 * count), pa.int64())
    interleaving = pc.add(pc.shift_right(index, 1), pc.multiply(pc.bit_wise_and(index, 1), count))
    return interleaving, pc.multiply(index.slice(0, count), 2)


class _Headers:
    """Every record's headers, parsed column by column, one header slot at a time."""

    __slots__ = ("count", "entries", "u8")

    def __init__(self, u8: pa.Array, at: pa.Array, end: pa.Array) -> None:
        self.u8 = u8
        count, after = _varints(u8, at, 5)
        self.count = count
        #: owner record, key start, key length, value start, value length of every header,
        #: in record order; None when no record has headers.
        self.entries: list[pa.Array] | None = None
        if not len(count) or pc.max(count).as_py() == 0:
            if len(count) and not pc.all(pc.equal(after, end)).as_py():
                raise _Unsupported
            return
        if pc.min(count).as_py() < 0 or pc.max(count).as_py() > _MAX_COLUMNAR_HEADERS:
            raise _Unsupported
        # Each header takes at least two bytes; records without headers end after the count.
        room = pc.subtract(end, after)
        has_headers = pc.greater(count, 0)
        if not pc.all(pc.less_equal(pc.multiply(count, 2), room)).as_py():
            raise _Unsupported
        if not pc.all(pc.or_(has_headers, pc.equal(room, 0))).as_py():
            raise _Unsupported
        owner = pc.indices_nonzero(has_headers)
        position, left, stop = (pc.take(a, owner) for a in (after, count, end))
        parts: list[tuple[pa.Array, ...]] = []
        slot = 0
        while len(position):
            key_length, key_start = _varints(u8, position, 5)
            position = _skip(key_start, key_length, stop, nullable=False)
            value_length, value_start = _varints(u8, position, 5)
            position = _skip(value_start, value_length, stop, nullable=True)
            parts.append((owner, key_start, key_length, value_start, value_length))
            slot += 1
            more = pc.greater(left, slot)
            if not pc.all(pc.or_(more, pc.equal(position, stop))).as_py():
                raise _Unsupported
            owner, position, left, stop = (
                pc.filter(a, more) for a in (owner, position, left, stop)
            )
        columns = [pa.concat_arrays([part[i] for part in parts]) for i in range(5)]
        # Headers lie in the buffer in record order, then slot order.
        order = pc.sort_indices(columns[1])
        self.entries = [pc.take(column, order) for column in columns]

    def column(self, keep: pa.Array | None, kept: pa.Array | None) -> pa.Array:
        """The headers column of the records ``kept`` (all when None; ``keep`` is its mask)."""
        entries = self.entries
        if entries is None:
            offsets = pa.repeat(
                pa.scalar(0, pa.int32()), 1 + (len(self.count) if kept is None else len(kept))
            )
            values = pa.StructArray.from_arrays(
                [pa.array([], pa.string()), pa.array([], pa.binary())], fields=list(HEADER_TYPE)
            )
        else:
            count = self.count if kept is None else pc.take(self.count, kept)
            offsets = pa.concat_arrays(
                [pa.array([0], pa.int32()), pc.cumulative_sum(count.cast(pa.int32()))]
            )
            if keep is not None:
                mask = pc.take(keep, entries[0])
                entries = [pc.filter(column, mask) for column in entries]
            _, key_start, key_length, value_start, value_length = entries
            values = pa.StructArray.from_arrays(
                [
                    _gather(self.u8, key_start, key_length).cast(pa.string()),
                    _gather(self.u8, value_start, value_length),
                ],
                fields=list(HEADER_TYPE),
            )
        return pa.ListArray.from_arrays(offsets, values, type=SCHEMA.field("headers").type)


def _empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=SCHEMA)
