"""Reading batches and rewriting headers in place, through the public API."""

from __future__ import annotations

import itertools
import mmap
from pathlib import Path

import pytest
from tierlog.errors import CorruptRecordError
from tierlog.records import (
    HEADER_SIZE,
    BatchHeader,
    Compression,
    ControlType,
    EndTxnMarker,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    build_control_batch,
    control_type_id,
    iter_batches,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)

from .strategies import build

SPECS = [(1000 + i, b"k%d" % i, b"v" * i, ()) for i in range(10)]


def _log(*codecs: Compression) -> bytes:
    """Consecutive batches of 10 records, as a log segment holds them."""
    parts = []
    for index, codec in enumerate(codecs):
        parts.append(build(SPECS, codec, base_offset=10 * index))
    return b"".join(parts)


def test_iter_batches_walks_a_log_of_mixed_codecs() -> None:
    log = _log(*Compression)
    batches = list(iter_batches(log))
    assert [b.compression for b in batches] == list(Compression)
    assert [b.base_offset for b in batches] == [0, 10, 20, 30, 40]
    assert batches[0].position == 0
    for before, after in itertools.pairwise(batches):
        assert after.position == before.end_position
        assert before.next_offset == after.base_offset
    assert batches[-1].end_position == len(log)
    offsets = [r.offset for b in batches for r in b.records()]
    assert offsets == list(range(50))


def test_iter_batches_from_a_position_and_over_every_buffer_type() -> None:
    log = _log(Compression.NONE, Compression.GZIP)
    second = BatchHeader.parse(log).end_position
    for buf in (log, bytearray(log), memoryview(log)):
        (batch,) = iter_batches(buf, second)
        assert batch.base_offset == 10
        assert batch.position == second
        assert bytes(batch.raw) == log[second:]


def test_iter_batches_reads_an_mmap(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_log(Compression.LZ4, Compression.NONE))
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        batches = list(iter_batches(mapped))
        assert [len(list(b.records())) for b in batches] == [10, 10]
        del batches  # views into the map must go before it closes


def test_header_parse_needs_only_the_header() -> None:
    batch = build(SPECS)
    header = BatchHeader.parse(batch[:HEADER_SIZE])
    assert header.size_in_bytes == len(batch)
    assert header.records_count == 10
    with pytest.raises(CorruptRecordError, match="truncated batch"):
        header.validate()


def test_empty_buffer_has_no_batches() -> None:
    assert list(iter_batches(b"")) == []


def test_record_batch_views_share_the_buffer() -> None:
    buf = bytearray(build(SPECS))
    (batch,) = iter_batches(buf)
    assert batch.raw.obj is buf
    assert batch.payload.nbytes == len(buf) - HEADER_SIZE


def test_partial_tail_is_corrupt_unless_allowed() -> None:
    log = _log(Compression.NONE, Compression.ZSTD)
    first_end = BatchHeader.parse(log).end_position
    for cut in (first_end + 5, first_end + HEADER_SIZE, len(log) - 1):
        with pytest.raises(CorruptRecordError, match="truncated batch") as info:
            list(iter_batches(log[:cut]))
        assert info.value.position == first_end
        assert [b.base_offset for b in iter_batches(log[:cut], allow_partial_tail=True)] == [0]


def test_log_append_time_batches_give_every_record_the_max_timestamp() -> None:
    builder = RecordBatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME)
    builder.append(5, None, b"a")
    builder.append(9, None, b"b")
    (batch,) = iter_batches(builder.build())
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [9, 9]


def test_delete_horizon_is_the_base_timestamp() -> None:
    builder = RecordBatchBuilder(delete_horizon_ms=5000)
    builder.append(7000, b"k", None)
    builder.append(4000, b"k2", None)
    (batch,) = iter_batches(builder.build())
    assert batch.has_delete_horizon
    assert batch.delete_horizon_ms == batch.base_timestamp == 5000
    assert [r.timestamp for r in batch.records()] == [7000, 4000]


def test_explicit_offsets_leave_gaps_like_a_compacted_batch() -> None:
    builder = RecordBatchBuilder(base_offset=100)
    assert builder.append(1, b"a", b"1", offset=100) == 100
    assert builder.append(1, b"b", b"2", offset=104) == 104
    assert builder.append(1, b"c", b"3") == 105
    assert len(builder) == 3
    (batch,) = iter_batches(builder.build())
    assert batch.last_offset_delta == 5
    assert batch.records_count == 3
    assert [r.offset for r in batch.records()] == [100, 104, 105]


def test_records_iteration_is_repeatable() -> None:
    (batch,) = iter_batches(build(SPECS, Compression.SNAPPY))
    assert list(batch) == list(batch.records())
    assert all(isinstance(r, Record) for r in batch)


# --- in-place rewrites --------------------------------------------------------------------------


def test_base_offset_and_leader_epoch_rewrites_keep_the_crc() -> None:
    log = bytearray(_log(Compression.NONE, Compression.GZIP))
    second = BatchHeader.parse(log).end_position
    crc_before = bytes(log[17:21])
    set_base_offset(log, 7_000_000_000, position=second)
    set_partition_leader_epoch(log, 42, position=second)
    set_partition_leader_epoch(log, 41)
    assert bytes(log[17:21]) == crc_before
    first, again = iter_batches(log)  # validates both CRCs
    assert (first.base_offset, first.partition_leader_epoch) == (0, 41)
    assert (again.base_offset, again.partition_leader_epoch) == (7_000_000_000, 42)
    assert [r.offset for r in again.records()][:2] == [7_000_000_000, 7_000_000_001]


def test_log_append_time_rewrite_recomputes_the_crc() -> None:
    buf = bytearray(build(SPECS, Compression.ZSTD))
    set_max_timestamp(buf, 1_900_000_000_000)
    (batch,) = iter_batches(buf)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 1_900_000_000_000
    assert batch.compression is Compression.ZSTD
    assert {r.timestamp for r in batch.records()} == {1_900_000_000_000}

    set_max_timestamp(buf, 1009, timestamp_type=TimestampType.CREATE_TIME)
    (batch,) = iter_batches(buf)
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert [r.timestamp for r in batch.records()] == [1000 + i for i in range(10)]


def test_max_timestamp_rewrite_refuses_to_bless_a_corrupt_batch() -> None:
    buf = bytearray(build(SPECS))
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        set_max_timestamp(buf, 5)
    set_max_timestamp(buf, 5, check_crc=False)  # the caller says it validated already
    BatchHeader.parse(buf).validate()


def test_rewrites_need_a_writable_v2_batch() -> None:
    data = build(SPECS)
    with pytest.raises(TypeError, match="read-only"):
        set_base_offset(memoryview(data), 1)
    with pytest.raises(CorruptRecordError, match="magic"):
        set_base_offset(bytearray(HEADER_SIZE), 1)


# --- control batches ----------------------------------------------------------------------------


@pytest.mark.parametrize("control_type", list(ControlType))
def test_control_batch_round_trip(control_type: ControlType) -> None:
    data = build_control_batch(
        control_type,
        producer_id=9,
        producer_epoch=2,
        coordinator_epoch=17,
        timestamp=1234,
        base_offset=55,
        partition_leader_epoch=3,
    )
    (batch,) = iter_batches(data)
    assert batch.is_control and batch.is_transactional
    assert batch.base_sequence == -1
    assert (batch.producer_id, batch.producer_epoch) == (9, 2)
    assert batch.partition_leader_epoch == 3
    (record,) = batch.records()
    assert record.offset == 55
    assert record.timestamp == 1234
    assert record.key == b"\x00\x00\x00" + bytes([control_type])
    assert control_type_id(record) == control_type
    marker = EndTxnMarker.from_batch(batch)
    assert marker == EndTxnMarker(control_type, 17)
    assert marker.is_commit == (control_type is ControlType.COMMIT)


def test_end_txn_marker_refuses_what_is_not_one() -> None:
    (plain,) = iter_batches(build(SPECS))
    with pytest.raises(CorruptRecordError, match="not a control batch"):
        EndTxnMarker.from_batch(plain)
    with pytest.raises(CorruptRecordError, match="at least 4 bytes"):
        control_type_id(Record(0, 0, b"\x00", None, (), -1))
    with pytest.raises(CorruptRecordError, match="version -1"):
        control_type_id(Record(0, 0, b"\xff\xff\x00\x01", None, (), -1))
    with pytest.raises(CorruptRecordError, match="not a transaction marker"):
        EndTxnMarker.from_record(Record(0, 0, b"\x00\x00\x00\x03", b"\x00" * 6, (), -1))
    with pytest.raises(CorruptRecordError, match="at least 6 bytes"):
        EndTxnMarker.from_record(Record(0, 0, b"\x00\x00\x00\x01", b"\x00", (), -1))


def test_control_batch_needs_a_producer() -> None:
    with pytest.raises(ValueError, match="producer id"):
        build_control_batch(ControlType.COMMIT, producer_id=-1, producer_epoch=0, timestamp=1)


def test_repr_names_the_batch() -> None:
    (batch,) = iter_batches(build(SPECS))
    assert repr(batch).startswith("RecordBatch(position=0, base_offset=0")
    assert isinstance(batch, RecordBatch)
