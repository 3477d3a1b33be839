"""Decoding segments into Arrow batches: every column, the filters, transactions and corruption.

These tests need no Spark session. Expected rows come from the specs the batches were built from,
from kafka-python's independent reader, and from the core's ``RecordBatch.records()``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tierlog.errors import CorruptRecordError
from tierlog.records import (
    Compression,
    ControlType,
    TimestampType,
    build_control_batch,
    iter_batches,
    set_max_timestamp,
)
from tierlog.records.varint import encode_varlong
from tierlog_spark import decode
from tierlog_spark.decode import SCHEMA, decode_segment

from tests.spark.segments import (
    INTERLEAVED,
    P_ABORTS,
    P_COMMITS,
    T0,
    Spec,
    marker,
    record_batch,
    spec,
    transactional,
)


def _decode(data: bytes, **kwargs: Any) -> list[pa.RecordBatch]:
    kwargs = {"topic": "orders", "partition": 3, "segment_id": "seg-7", **kwargs}
    return list(decode_segment(data, **kwargs))


def _rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    """The decoded rows as dicts, timestamps as epoch milliseconds and headers as tuples."""
    table = pa.Table.from_batches(batches, schema=SCHEMA)
    table = table.set_column(3, "timestamp", table.column("timestamp").cast(pa.int64()))
    rows = table.to_pylist()
    for row in rows:
        row["headers"] = [(h["key"], h["value"]) for h in row["headers"]]
    return rows


def _core_rows(data: bytes) -> list[tuple[Any, ...]]:
    """What the core's record-at-a-time reader yields for ``data``, as decoded columns."""
    rows = []
    for batch in iter_batches(data):
        if batch.is_control:
            continue
        for record in batch.records():
            rows.append(
                (
                    record.offset,
                    record.timestamp,
                    record.key,
                    record.value,
                    list(record.headers),
                    record.sequence,
                )
            )
    return rows


def _as_core_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (r["offset"], r["timestamp"], r["key"], r["value"], r["headers"], r["sequence"])
        for r in rows
    ]


@pytest.fixture(params=list(Compression), ids=lambda c: c.name.lower())
def codec(request: pytest.FixtureRequest) -> Compression:
    codec: Compression = request.param
    return codec


# --- every column ---------------------------------------------------------------------------


def test_the_schema_has_the_documented_columns_in_order() -> None:
    assert SCHEMA.names == [
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "headers",
        "leader_epoch",
        "producer_id",
        "producer_epoch",
        "sequence",
        "is_transactional",
        "segment_id",
    ]
    assert SCHEMA.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert SCHEMA.field("headers").type.value_type == pa.struct(
        [pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]
    )


def test_every_column_equals_what_was_built(codec: Compression) -> None:
    idempotent = [spec(i) for i in range(40)]
    plain = [spec(i) for i in range(40, 70)]
    transactional = [spec(i) for i in range(70, 75)]
    data = b"".join(
        [
            record_batch(
                idempotent,
                codec,
                base_offset=100,
                producer_id=42,
                producer_epoch=3,
                base_sequence=(1 << 31) - 10,  # the sequence wraps inside the batch
                partition_leader_epoch=5,
            ),
            record_batch(plain, codec, base_offset=140, partition_leader_epoch=6),
            record_batch(
                transactional,
                codec,
                base_offset=170,
                producer_id=9,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
                partition_leader_epoch=6,
            ),
            build_control_batch(
                ControlType.COMMIT, producer_id=9, producer_epoch=0, timestamp=T0, base_offset=175
            ),
        ]
    )
    batches = _decode(data)
    assert all(batch.schema == SCHEMA for batch in batches)
    rows = _rows(batches)

    expected = []
    for offset, (timestamp, key, value, headers) in enumerate(
        idempotent + plain + transactional, start=100
    ):
        if offset < 140:
            epoch, producer, producer_epoch, sequence = 5, 42, 3, (1 << 31) - 10 + offset - 100
            sequence = sequence - (1 << 31) if sequence > (1 << 31) - 1 else sequence
        elif offset < 170:
            epoch, producer, producer_epoch, sequence = 6, -1, -1, -1
        else:
            epoch, producer, producer_epoch, sequence = 6, 9, 0, offset - 170
        expected.append(
            {
                "topic": "orders",
                "partition": 3,
                "offset": offset,
                "timestamp": timestamp,
                "timestamp_type": "CreateTime",
                "key": key,
                "value": value,
                "headers": headers,
                "leader_epoch": epoch,
                "producer_id": producer,
                "producer_epoch": producer_epoch,
                "sequence": sequence,
                "is_transactional": offset >= 170,
                "segment_id": "seg-7",
            }
        )
    assert rows == expected


def test_log_append_time_batches_give_every_record_the_batch_timestamp(codec: Compression) -> None:
    create_time = record_batch([spec(i) for i in range(5)], codec)
    append_time = bytearray(record_batch([spec(i) for i in range(5, 9)], codec, base_offset=5))
    set_max_timestamp(append_time, T0 + 12345, timestamp_type=TimestampType.LOG_APPEND_TIME)
    rows = _rows(_decode(create_time + bytes(append_time)))
    assert [r["timestamp_type"] for r in rows] == ["CreateTime"] * 5 + ["LogAppendTime"] * 4
    assert [r["timestamp"] for r in rows[5:]] == [T0 + 12345] * 4
    assert [r["timestamp"] for r in rows[:5]] == [spec(i)[0] for i in range(5)]


def test_rows_match_kafka_pythons_independent_reader(codec: Compression) -> None:
    kafka_codec = pytest.importorskip("kafka.codec")
    default_records = pytest.importorskip("kafka.record.default_records")
    available = {
        Compression.NONE: lambda: True,
        Compression.GZIP: kafka_codec.has_gzip,
        Compression.SNAPPY: kafka_codec.has_snappy,
        Compression.LZ4: kafka_codec.has_lz4,
        Compression.ZSTD: kafka_codec.has_zstd,
    }
    if not available[codec]():
        pytest.skip(f"kafka-python cannot use {codec.name.lower()} here")
    segment = []
    for base in range(0, 300, 100):
        builder = default_records.DefaultRecordBatchBuilder(
            magic=2,
            compression_type=int(codec),
            is_transactional=False,
            producer_id=77,
            producer_epoch=1,
            base_sequence=base,
            batch_size=1 << 30,
        )
        for offset in range(base, base + 100):
            timestamp, key, value, headers = spec(offset)
            builder.append(
                offset - base, timestamp=timestamp, key=key, value=value, headers=headers
            )
        batch = bytearray(builder.build())
        batch[0:8] = base.to_bytes(8, "big")  # the base offset, which the CRC does not cover
        segment.append(bytes(batch))
    data = b"".join(segment)

    theirs = []
    for raw in segment:
        batch = default_records.DefaultRecordBatch(raw)
        for record in batch:
            theirs.append(
                (
                    record.offset,
                    record.timestamp,
                    record.key,
                    record.value,
                    [(k, v) for k, v in record.headers],
                )
            )
    rows = _rows(_decode(data, max_rows=128))
    assert [
        (r["offset"], r["timestamp"], r["key"], r["value"], r["headers"]) for r in rows
    ] == theirs
    assert {(r["producer_id"], r["producer_epoch"]) for r in rows} == {(77, 1)}
    assert [r["sequence"] for r in rows] == list(range(300))


def test_long_varints_and_extreme_values_decode() -> None:
    specs: list[Spec] = [
        (T0, b"k" * 70, b"v" * 20_000, [("h" * 200, b"x" * 9000)]),  # 2- and 3-byte lengths
        (-1, None, b"", []),  # no timestamp: a 6-byte negative delta
        ((1 << 62), b"", None, []),  # a 9-byte delta
        (0, b"\x00", b"\xff" * 64, [("", None)] * 3),
    ]
    data = record_batch(
        specs, base_offset=(1 << 40), producer_id=(1 << 50), producer_epoch=32767, base_sequence=5
    )
    rows = _rows(_decode(data))
    assert _as_core_rows(rows) == _core_rows(data)
    assert [r["offset"] for r in rows] == [(1 << 40) + i for i in range(4)]
    assert rows[0]["producer_id"] == 1 << 50


def test_records_with_many_headers_decode_through_the_core(codec: Compression) -> None:
    headers = [(f"h{i}", bytes([i])) for i in range(100)]
    data = record_batch([(T0, b"k", b"v", headers), (T0, None, None, [])], codec)
    rows = _rows(_decode(data))
    assert rows[0]["headers"] == headers
    assert rows[1]["headers"] == []


def test_the_columnar_decoder_and_the_cores_agree(
    codec: Compression, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"".join(
        record_batch([spec(i) for i in range(base, base + 25)], codec, base_offset=base)
        for base in range(0, 100, 25)
    )
    kwargs = {"start_offset": 10, "end_offset": 90, "min_timestamp": T0 - 200, "max_rows": 17}
    columnar = _decode(data, **kwargs)

    def refuse(self: Any, group: Any) -> pa.RecordBatch:
        raise decode._Unsupported

    monkeypatch.setattr(decode._SegmentReader, "_decode_columnar", refuse)
    core = _decode(data, **kwargs)
    assert [b.num_rows for b in core] == [b.num_rows for b in columnar]
    assert _rows(core) == _rows(columnar)


def test_valid_segments_never_fall_back_to_the_core(
    codec: Compression, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(self: Any, group: Any) -> pa.RecordBatch:
        raise AssertionError("the columnar decoder refused a valid group")

    monkeypatch.setattr(decode._SegmentReader, "_decode_with_core", forbidden)
    data = b"".join(
        record_batch([spec(i) for i in range(base, base + 30)], codec, base_offset=base)
        for base in range(0, 90, 30)
    )
    large = record_batch(
        [(T0 + i * 60_000, b"k", bytes(20_000 + i), []) for i in range(5)], codec, base_offset=90
    )
    rows = _rows(_decode(data + large, start_offset=5, max_timestamp=T0 + 500))
    expected = [i for i in range(5, 90) if spec(i)[0] <= T0 + 500] + [90]
    assert [r["offset"] for r in rows] == expected
    rows = _rows(_decode(large))
    assert [len(r["value"]) for r in rows] == [20_000 + i for i in range(5)]


# --- filters --------------------------------------------------------------------------------


def _three_batches(codec: Compression = Compression.NONE) -> bytes:
    return b"".join(
        record_batch([spec(i) for i in range(base, base + 10)], codec, base_offset=base)
        for base in (0, 10, 20)
    )


@pytest.mark.parametrize(
    ("start", "end"), [(0, None), (3, None), (10, 19), (5, 24), (29, 29), (30, None), (0, 0)]
)
def test_offsets_outside_the_range_are_filtered_out(
    codec: Compression, start: int, end: int | None
) -> None:
    rows = _rows(_decode(_three_batches(codec), start_offset=start, end_offset=end))
    high = 29 if end is None else end
    assert [r["offset"] for r in rows] == list(range(start, high + 1))


@pytest.mark.parametrize(("low", "high"), [(None, T0), (T0, None), (T0 - 100, T0 + 100)])
def test_timestamps_outside_the_range_are_filtered_out(
    codec: Compression, low: int | None, high: int | None
) -> None:
    rows = _rows(_decode(_three_batches(codec), min_timestamp=low, max_timestamp=high))
    expected = [
        i
        for i in range(30)
        if (low is None or spec(i)[0] >= low) and (high is None or spec(i)[0] <= high)
    ]
    assert 0 < len(expected) < 30
    assert [r["offset"] for r in rows] == expected


def _with_garbage_records(batch: bytes) -> bytes:
    """``batch`` with its first record's key length made nonsense and the CRC recomputed, so
    only decoding its records can tell."""
    damaged = bytearray(batch)
    damaged[61 + 4] = 0x7E  # record length (2 bytes), attributes, timestamp delta: key length
    fields = next(iter_batches(bytes(batch)))
    set_max_timestamp(
        damaged, fields.max_timestamp, timestamp_type=TimestampType.CREATE_TIME, check_crc=False
    )
    return bytes(damaged)


def test_batches_outside_the_range_are_skipped_without_decoding_their_records() -> None:
    garbage = _with_garbage_records(record_batch([spec(i) for i in range(10)], base_offset=10))
    data = (
        record_batch([spec(i) for i in range(10)])
        + garbage
        + record_batch([spec(0)], base_offset=20)
    )
    with pytest.raises(CorruptRecordError):
        _decode(data)
    assert [r["offset"] for r in _rows(_decode(data, end_offset=9))] == list(range(10))
    assert [r["offset"] for r in _rows(_decode(data, start_offset=20))] == [20]
    late = max(spec(i)[0] for i in range(10)) + 1
    assert [r["offset"] for r in _rows(_decode(data, min_timestamp=late))] == []


def test_control_batches_are_never_rows() -> None:
    data = b"".join(
        [
            record_batch(
                [spec(0), spec(1)],
                producer_id=1,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
            ),
            build_control_batch(
                ControlType.COMMIT, producer_id=1, producer_epoch=0, timestamp=T0, base_offset=2
            ),
            record_batch([spec(3)], base_offset=3),
        ]
    )
    for read_committed in (False, True):
        rows = _rows(_decode(data, read_committed=read_committed))
        assert [r["offset"] for r in rows] == [0, 1, 3]


# --- transactions ---------------------------------------------------------------------------


def test_read_committed_drops_exactly_the_aborted_transaction() -> None:
    rows = _rows(_decode(INTERLEAVED, aborted=[(P_ABORTS, 3)], read_committed=True))
    assert [r["offset"] for r in rows] == [0, 1, 2, 6, 7, 12, 13, 15, 16]
    assert [r["producer_id"] for r in rows] == [P_COMMITS] * 5 + [P_ABORTS] * 2 + [-1] * 2


def test_read_uncommitted_keeps_every_data_record() -> None:
    everything = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 16]
    rows = _rows(_decode(INTERLEAVED, aborted=[(P_ABORTS, 3)]))
    assert [r["offset"] for r in rows] == everything
    rows = _rows(_decode(INTERLEAVED, read_committed=True))  # nothing was aborted
    assert [r["offset"] for r in rows] == everything


def test_an_aborted_transaction_begun_in_an_earlier_segment_is_dropped() -> None:
    data = b"".join(
        [
            transactional(P_ABORTS, 50, 2, 7),  # the end of a transaction begun at 40
            marker(ControlType.ABORT, P_ABORTS, 52),
            transactional(P_ABORTS, 53, 1, 9),
            marker(ControlType.COMMIT, P_ABORTS, 54),
        ]
    )
    rows = _rows(_decode(data, aborted=[(P_ABORTS, 40)], read_committed=True))
    assert [r["offset"] for r in rows] == [53]


def test_read_committed_with_a_start_offset_past_the_abort_marker() -> None:
    # The ABORT marker at 11 lies before the range; it must still close P_ABORTS's transaction.
    rows = _rows(
        _decode(INTERLEAVED, aborted=[(P_ABORTS, 3)], read_committed=True, start_offset=12)
    )
    assert [r["offset"] for r in rows] == [12, 13, 15, 16]
    rows = _rows(_decode(INTERLEAVED, aborted=[(P_ABORTS, 3)], read_committed=True, start_offset=4))
    assert [r["offset"] for r in rows] == [6, 7, 12, 13, 15, 16]


# --- corruption -----------------------------------------------------------------------------


def test_a_flipped_byte_fails_the_crc_naming_the_segment_and_position(codec: Compression) -> None:
    data = bytearray(_three_batches(codec))
    second = list(iter_batches(bytes(data)))[1].position
    data[second + 30] ^= 0x01  # the base timestamp, which the CRC covers
    with pytest.raises(CorruptRecordError, match=r"seg-7: CRC") as info:
        _decode(bytes(data))
    assert info.value.position == second


@pytest.mark.parametrize("cut", [1, 30, 61, 100])
def test_a_truncated_segment_is_corrupt(cut: int) -> None:
    data = _three_batches()
    with pytest.raises(CorruptRecordError, match="seg-7") as info:
        _decode(data[:-cut])
    assert info.value.position is not None


def test_garbage_records_under_a_valid_crc_are_corrupt_with_their_position() -> None:
    first = record_batch([spec(i) for i in range(5)])
    data = first + _with_garbage_records(record_batch([spec(i) for i in range(5)], base_offset=5))
    with pytest.raises(CorruptRecordError, match="seg-7") as info:
        _decode(data)
    assert info.value.position is not None and info.value.position >= len(first)


def test_corrupt_compressed_records_are_corrupt() -> None:
    batch = bytearray(record_batch([spec(i) for i in range(20)], Compression.ZSTD))
    batch[70:80] = bytes(10)
    _restamp(batch)
    with pytest.raises(CorruptRecordError, match="seg-7") as info:
        _decode(bytes(batch))
    assert info.value.position == 0


def _restamp(data: bytearray) -> None:
    """Recomputes the CRC of every whole batch in ``data``."""
    position = 0
    while position + 61 <= len(data):
        length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
        end = position + 12 + length
        if length < 49 or end > len(data):
            return
        max_timestamp = int.from_bytes(data[position + 35 : position + 43], "big", signed=True)
        log_append = data[position + 22] & 0x08
        try:
            set_max_timestamp(
                data,
                max_timestamp,
                timestamp_type=TimestampType(1 if log_append else 0),
                position=position,
                check_crc=False,
            )
        except CorruptRecordError:  # a mutated magic: nothing to restamp
            return
        position = end


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_segments_decode_like_the_core_or_are_corrupt(data: st.DataObject) -> None:
    codec = data.draw(st.sampled_from([Compression.NONE, Compression.NONE, Compression.GZIP]))
    segment = bytearray(
        b"".join(
            record_batch([spec(i) for i in range(base, base + 6)], codec, base_offset=base)
            for base in (0, 6)
        )
    )
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(61, len(segment) - 1))
        segment[index] = data.draw(st.integers(0, 255))
    _restamp(segment)
    try:
        expected = _core_rows(bytes(segment))
    except CorruptRecordError:
        with pytest.raises(CorruptRecordError, match="seg-7"):
            _decode(bytes(segment), start_offset=-(1 << 63))
    else:
        rows = _rows(_decode(bytes(segment), start_offset=-(1 << 63)))
        assert _as_core_rows(rows) == expected


# --- batching -------------------------------------------------------------------------------


@pytest.mark.parametrize("max_rows", [1, 7, 10, 29, 30, 1000])
def test_max_rows_splits_preserve_every_row_in_order(codec: Compression, max_rows: int) -> None:
    data = _three_batches(codec)
    batches = _decode(data, max_rows=max_rows, start_offset=2)
    sizes = [batch.num_rows for batch in batches]
    assert all(size == max_rows for size in sizes[:-1])
    assert 0 < sizes[-1] <= max_rows
    assert [r["offset"] for r in _rows(batches)] == list(range(2, 30))


def test_an_empty_segment_or_range_yields_no_batches() -> None:
    assert _decode(b"") == []
    assert _decode(_three_batches(), start_offset=100) == []


def test_max_rows_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_rows"):
        decode_segment(b"", topic="t", partition=0, segment_id="s", max_rows=0)


# --- round trip -----------------------------------------------------------------------------

_nullable_bytes = st.one_of(st.none(), st.binary(max_size=200))
_record_specs = st.tuples(
    st.one_of(st.integers(T0 - 100_000, T0 + 100_000), st.just(-1), st.integers(0, (1 << 63) - 1)),
    _nullable_bytes,
    _nullable_bytes,
    st.lists(st.tuples(st.text(max_size=10), _nullable_bytes), max_size=3),
)


@st.composite
def _segments(draw: st.DrawFn) -> tuple[bytes, list[list[Spec]]]:
    batches = draw(st.lists(st.lists(_record_specs, min_size=1, max_size=20), max_size=5))
    codec = draw(st.sampled_from(list(Compression)))
    out = []
    offset = 0
    for specs in batches:
        producer = draw(st.sampled_from([-1, 5]))
        out.append(
            record_batch(
                specs,
                codec,
                base_offset=offset,
                producer_id=producer,
                producer_epoch=-1 if producer < 0 else 2,
                base_sequence=-1 if producer < 0 else draw(st.integers(0, (1 << 31) - 1)),
            )
        )
        offset += len(specs) + draw(st.integers(0, 3))
    return b"".join(out), batches


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_segments(), st.integers(1, 40))
def test_round_trip(segment: tuple[bytes, list[list[Spec]]], max_rows: int) -> None:
    data, batches = segment
    rows = _rows(_decode(data, max_rows=max_rows))
    specs = [spec for specs in batches for spec in specs]
    assert [(r["timestamp"], r["key"], r["value"], r["headers"]) for r in rows] == [
        (timestamp, key, value, list(headers)) for timestamp, key, value, headers in specs
    ]
    assert _as_core_rows(rows) == _core_rows(data)


@given(
    st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=1, max_size=50),
    st.sampled_from([5, 10]),
)
def test_columnar_varints_decode_like_the_cores(values: list[int], max_bytes: int) -> None:
    if max_bytes == 5:
        values = [v >> 32 for v in values]
    encoded = [encode_varlong(v) for v in values]
    buffer = b"".join(encoded) + bytes(16)
    positions = [sum(len(e) for e in encoded[:i]) for i in range(len(values))]
    u8 = pa.array(buffer, pa.uint8())
    decoded, after = decode._varints(u8, pa.array(positions, pa.int64()), max_bytes)
    assert decoded.to_pylist() == values
    assert after.to_pylist() == [p + len(e) for p, e in zip(positions, encoded, strict=True)]
