"""Interoperability with kafka-python's independent implementation of record batch v2, both ways."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tierlog.records import (
    Compression,
    ControlType,
    EndTxnMarker,
    RecordBatchBuilder,
    TimestampType,
    build_control_batch,
    iter_batches,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)

kafka = pytest.importorskip("kafka")

from kafka import codec as kafka_codec  # noqa: E402
from kafka.record import MemoryRecords  # noqa: E402
from kafka.record.default_records import (  # noqa: E402
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)

_AVAILABLE = {
    Compression.NONE: lambda: True,
    Compression.GZIP: kafka_codec.has_gzip,
    Compression.SNAPPY: kafka_codec.has_snappy,
    Compression.LZ4: kafka_codec.has_lz4,
    Compression.ZSTD: kafka_codec.has_zstd,
}


@pytest.fixture(params=list(Compression), ids=lambda c: c.name.lower())
def codec(request: pytest.FixtureRequest) -> Compression:
    codec: Compression = request.param
    if not _AVAILABLE[codec]():
        pytest.skip(f"kafka-python cannot use {codec.name.lower()} here: install its library")
    return codec


def _spec(i: int) -> tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    """Record ``i`` of the test batches: nulls, empties, long values and headers in the mix."""
    key = None if i % 4 == 0 else (b"" if i % 4 == 1 else b"key-%d" % i)
    value = None if i % 5 == 0 else bytes(range(256)) * (i % 7) + b"v%d" % i
    headers: list[tuple[str, bytes | None]] = []
    if i % 3 == 1:
        headers = [("trace-id", b"%08d" % i), ("nullable", None), ("ünïcode", b"")]
    # Timestamps step forwards and backwards: the delta must be signed.
    return 1_700_000_000_000 + (i * 37) % 1000 - 300, key, value, headers


SPECS = [_spec(i) for i in range(200)]


def _theirs(codec: Compression, **state: Any) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=state.get("is_transactional", False),
        producer_id=state.get("producer_id", -1),
        producer_epoch=state.get("producer_epoch", -1),
        base_sequence=state.get("base_sequence", -1),
        batch_size=1 << 30,
    )
    for offset, (timestamp, key, value, headers) in enumerate(SPECS):
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def _ours(codec: Compression, **kwargs: Any) -> bytes:
    builder = RecordBatchBuilder(codec, **kwargs)
    for timestamp, key, value, headers in SPECS:
        builder.append(timestamp, key, value, headers)
    return builder.build()


def test_kafka_python_batches_read_by_ours(codec: Compression) -> None:
    data = _theirs(codec, producer_id=42, producer_epoch=3, base_sequence=1000)
    (batch,) = iter_batches(data)
    # kafka-python leaves compression off when it does not shrink the data; ours always
    # compresses, so only check the codec where kafka-python kept it.
    assert batch.compression in (codec, Compression.NONE)
    assert batch.base_offset == 0
    assert batch.records_count == len(SPECS)
    assert batch.last_offset_delta == len(SPECS) - 1
    assert batch.producer_id == 42
    assert batch.producer_epoch == 3
    assert batch.base_sequence == 1000
    assert batch.base_timestamp == SPECS[0][0]
    assert batch.max_timestamp == max(spec[0] for spec in SPECS)
    records = list(batch.records())
    assert len(records) == len(SPECS)
    pairs = zip(records, SPECS, strict=True)
    for offset, (record, (timestamp, key, value, headers)) in enumerate(pairs):
        assert record.offset == offset
        assert record.timestamp == timestamp
        assert record.key == key
        assert record.value == value
        assert record.headers == tuple(headers)
        assert record.sequence == 1000 + offset


def test_kafka_python_compresses_every_codec_we_read() -> None:
    """The interop runs above must really have crossed compressed data, not fallen back."""
    for codec in Compression:
        if codec is not Compression.NONE and _AVAILABLE[codec]():
            (batch,) = iter_batches(_theirs(codec))
            assert batch.compression is codec


def test_our_batches_read_by_kafka_python(codec: Compression) -> None:
    data = _ours(
        codec,
        base_offset=1_000_000,
        partition_leader_epoch=9,
        producer_id=77,
        producer_epoch=2,
        base_sequence=(1 << 31) - 100,  # the sequence wraps inside the batch
        is_transactional=True,
    )
    (batch,) = list(MemoryRecords(data))
    assert isinstance(batch, DefaultRecordBatch)
    assert batch.validate_crc()
    assert batch.compression_type == int(codec)
    assert batch.base_offset == 1_000_000
    assert batch.leader_epoch == 9
    assert batch.producer_id == 77
    assert batch.producer_epoch == 2
    assert batch.base_sequence == (1 << 31) - 100
    assert batch.last_sequence == len(SPECS) - 101
    assert batch.is_transactional
    assert not batch.is_control_batch
    assert batch.max_timestamp == max(spec[0] for spec in SPECS)
    records = list(batch)
    assert len(records) == len(SPECS)
    pairs = zip(records, SPECS, strict=True)
    for offset, (record, (timestamp, key, value, headers)) in enumerate(pairs):
        assert record.offset == 1_000_000 + offset
        assert record.timestamp == timestamp
        assert record.key == key
        assert record.value == value
        assert record.headers == headers


def test_our_sequences_match_kafka_python_after_wrapping() -> None:
    data = _ours(Compression.NONE, producer_id=1, producer_epoch=0, base_sequence=(1 << 31) - 3)
    (batch,) = iter_batches(data)
    sequences = [record.sequence for record in batch.records()]
    assert sequences[:4] == [(1 << 31) - 3, (1 << 31) - 2, (1 << 31) - 1, 0]
    assert batch.last_sequence == sequences[-1] == next(iter(MemoryRecords(data))).last_sequence


def test_header_rewrites_are_seen_by_kafka_python(codec: Compression) -> None:
    buf = bytearray(_ours(codec))
    set_base_offset(buf, 5000)
    set_partition_leader_epoch(buf, 12)
    set_max_timestamp(buf, 1_800_000_000_000)
    (batch,) = list(MemoryRecords(bytes(buf)))
    assert batch.validate_crc()
    assert batch.base_offset == 5000
    assert batch.leader_epoch == 12
    assert batch.timestamp_type == int(TimestampType.LOG_APPEND_TIME)
    records = list(batch)
    assert [r.offset for r in records] == list(range(5000, 5000 + len(SPECS)))
    assert {r.timestamp for r in records} == {1_800_000_000_000}


@pytest.mark.parametrize("control_type", list(ControlType))
def test_our_control_batches_read_by_kafka_python(control_type: ControlType) -> None:
    data = build_control_batch(
        control_type,
        producer_id=11,
        producer_epoch=4,
        coordinator_epoch=6,
        timestamp=1_700_000_000_000,
        base_offset=77,
    )
    (batch,) = list(MemoryRecords(data))
    assert batch.validate_crc()
    assert batch.is_control_batch
    assert batch.is_transactional
    (record,) = list(batch)
    assert record.offset == 77
    assert record.type == int(control_type)
    assert record.commit == (control_type is ControlType.COMMIT)
    assert record.value == b"\x00\x00\x00\x00\x00\x06"
    (ours,) = iter_batches(data)
    assert EndTxnMarker.from_batch(ours) == EndTxnMarker(control_type, 6)


def test_several_batches_in_one_buffer_both_ways() -> None:
    parts = [_theirs(Compression.GZIP), _ours(Compression.LZ4), _theirs(Compression.NONE)]
    buf = bytearray(b"".join(parts))
    position = 0
    for index, part in enumerate(parts):
        set_base_offset(buf, index * 1000, position=position)
        position += len(part)
    ours = list(iter_batches(buf))
    theirs = list(MemoryRecords(bytes(buf)))
    assert [b.base_offset for b in ours] == [b.base_offset for b in theirs] == [0, 1000, 2000]
    for our_batch, their_batch in zip(ours, theirs, strict=True):
        assert [(r.offset, r.timestamp, r.key, r.value) for r in our_batch.records()] == [
            (r.offset, r.timestamp, r.key, r.value) for r in their_batch
        ]


_their_specs = st.lists(
    st.tuples(
        st.integers(1_600_000_000_000, 1_700_000_000_000),
        st.none() | st.binary(max_size=100),
        st.none() | st.binary(max_size=100),
        st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


@settings(deadline=None, max_examples=100)
@given(st.sampled_from(list(Compression)), _their_specs)
def test_any_records_cross_both_ways(codec: Compression, specs: list[Any]) -> None:
    if not _AVAILABLE[codec]():
        pytest.skip(f"kafka-python cannot use {codec.name.lower()} here: install its library")
    ours = RecordBatchBuilder(codec)
    theirs = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 30)
    for offset, (timestamp, key, value, headers) in enumerate(specs):
        ours.append(timestamp, key, value, headers)
        theirs.append(offset, timestamp, key, value, headers)
    expected = [(o, t, k, v, list(h)) for o, (t, k, v, h) in enumerate(specs)]
    (their_view,) = list(MemoryRecords(ours.build()))
    assert their_view.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in their_view] == expected
    (our_view,) = iter_batches(bytes(theirs.build()))
    assert [
        (r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in our_view.records()
    ] == expected


def test_uncompressed_batches_are_byte_identical_to_kafka_python() -> None:
    """kafka-python leaves base offset and leader epoch at 0, as a producer sends them."""
    theirs = _theirs(Compression.NONE, producer_id=5, producer_epoch=1, base_sequence=3)
    ours = _ours(
        Compression.NONE,
        partition_leader_epoch=0,
        producer_id=5,
        producer_epoch=1,
        base_sequence=3,
    )
    assert ours == theirs
