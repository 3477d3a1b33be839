"""``LogSegment``: reads by offset, the recovery scanner on damaged files, truncation."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tierlog.log import LogSegment
from tierlog.records import BatchHeader, Compression, RecordBatch, iter_batches, set_base_offset

from .support import T0, batch

BASE = 50


def _segment(directory: Path, interval: int = 100) -> LogSegment:
    return LogSegment.create(directory, BASE, index_interval_bytes=interval, max_index_size=4096)


def _fill(segment: LogSegment, sizes: list[int]) -> list[bytes]:
    """Appends one batch per size (records count varies with it); returns the stored bytes."""
    written = []
    offset = BASE
    for n, count in enumerate(sizes):
        data = bytearray(batch(count, timestamp=T0 + 10 * n, compression=Compression(n % 5)))
        set_base_offset(data, offset)
        header = BatchHeader.parse(data)
        segment.append(data, [(header.last_offset, header.max_timestamp, len(data))])
        written.append(bytes(data))
        offset = header.next_offset
    return written


def test_read_translates_offsets_through_the_index(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    written = _fill(segment, [3] * 20)
    assert segment.offset_index.entries > 5
    for offset in range(BASE, BASE + 60):
        result = segment.read(offset, 10_000)
        assert result is not None
        first = RecordBatch.parse(result.records)
        assert first.base_offset <= offset <= first.last_offset
        assert bytes(result.records) == b"".join(written[(offset - BASE) // 3 :])
    assert segment.read(BASE + 60, 100) is None
    assert segment.read_next_offset() == BASE + 60
    segment.close()


def test_read_respects_max_position(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    written = _fill(segment, [2] * 5)
    limit = len(written[0]) * 2 + 5
    result = segment.read(BASE, 10_000, max_position=limit)
    assert result is not None and bytes(result.records) == written[0] + written[1]
    segment.close()


def test_find_offset_by_timestamp_decodes_only_the_right_batch(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    _fill(segment, [4] * 10)
    found = segment.find_offset_by_timestamp(T0 + 52)
    assert found is not None and (found.timestamp, found.offset) == (T0 + 52, BASE + 22)
    assert segment.find_offset_by_timestamp(T0 + 100) is None
    assert segment.largest_timestamp == T0 + 93
    segment.close()


def test_truncate_to_cuts_at_the_batch_holding_the_offset(tmp_path: Path) -> None:
    segment = _segment(tmp_path, interval=0)
    written = _fill(segment, [3] * 6)
    assert segment.truncate_to(BASE + 7) == sum(map(len, written[2:]))
    assert segment.read_all() == b"".join(written[:2])
    assert segment.read_next_offset() == BASE + 6
    assert all(e.offset < BASE + 7 for e in segment.offset_index.entries_as_absolute())
    segment.close()


sizes_strategy = st.lists(st.integers(1, 6), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(sizes_strategy, st.data())
def test_recovery_cuts_a_truncated_file_at_the_last_whole_batch(
    sizes: list[int], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        segment = _segment(directory)
        written = _fill(segment, sizes)
        expected_indexes = segment.offset_index.entries_as_absolute()
        segment.close()
        whole = b"".join(written)
        cut = data.draw(st.integers(0, len(whole)), label="cut")
        os.truncate(directory / "00000000000000000050.log", cut)
        reopened = LogSegment.open(directory, BASE, index_interval_bytes=100, max_index_size=4096)
        kept, total = [], 0
        for piece in written:
            if total + len(piece) > cut:
                break
            kept.append(piece)
            total += len(piece)
        assert reopened.recover() == cut - total
        assert reopened.read_all() == b"".join(kept)
        ends = [RecordBatch.parse(p).next_offset for p in kept]
        assert reopened.read_next_offset() == (ends[-1] if ends else BASE)
        # The rebuilt index is what appending built, up to what is left.
        assert reopened.offset_index.entries_as_absolute() == [
            e for e in expected_indexes if e.position < total
        ]
        reopened.close()


@settings(max_examples=60, deadline=None)
@given(sizes_strategy, st.data())
def test_recovery_stops_at_the_first_corrupt_byte(sizes: list[int], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        segment = _segment(directory)
        written = _fill(segment, sizes)
        segment.close()
        raw = bytearray(b"".join(written))
        where = data.draw(st.integers(0, len(raw) - 1), label="where")
        flip = data.draw(st.integers(1, 255), label="flip")
        raw[where] ^= flip
        (directory / "00000000000000000050.log").write_bytes(bytes(raw))
        reopened = LogSegment.open(directory, BASE, index_interval_bytes=100, max_index_size=4096)
        reopened.recover()
        survivors = reopened.read_all()
        # Whatever survives is a prefix of the file made of whole, valid batches...
        assert bytes(raw).startswith(survivors)
        for kept in iter_batches(survivors):
            kept.validate()
        # ...holding every batch before the damaged one. The damaged batch itself survives
        # only if the damage is where the CRC does not reach: the base offset (bytes 0-7) or
        # the partition leader epoch (bytes 12-15).
        start = 0
        for piece in written:
            if start + len(piece) > where:
                break
            start += len(piece)
        assert len(survivors) >= start
        if not (where - start < 8 or 12 <= where - start < 16):
            assert len(survivors) == start
        reopened.close()


def test_recovery_rejects_offsets_that_go_backwards(tmp_path: Path) -> None:
    segment = _segment(tmp_path)
    written = _fill(segment, [2, 2, 2])
    segment.close()
    bad = bytearray(written[2])
    set_base_offset(bad, BASE)  # not covered by the CRC, but it repeats earlier offsets
    (tmp_path / "00000000000000000050.log").write_bytes(written[0] + written[1] + bytes(bad))
    reopened = LogSegment.open(tmp_path, BASE, index_interval_bytes=100, max_index_size=4096)
    assert reopened.recover() == len(bad)
    assert reopened.read_next_offset() == BASE + 4
    reopened.close()


@pytest.mark.parametrize("cut", [0, 1, 61])
def test_recovery_of_an_almost_empty_file(tmp_path: Path, cut: int) -> None:
    segment = _segment(tmp_path)
    _fill(segment, [1])
    segment.close()
    os.truncate(tmp_path / "00000000000000000050.log", cut)
    reopened = LogSegment.open(tmp_path, BASE, index_interval_bytes=100, max_index_size=4096)
    assert reopened.recover() == cut
    assert reopened.size == 0
    reopened.close()


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=25),
    timestamps=st.lists(st.integers(-1, 50), min_size=25, max_size=25),
    pieces=st.booleans(),
)
def test_append_batch_is_append_of_one_batch(
    sizes: list[int], timestamps: list[int], pieces: bool
) -> None:
    """The single-batch fast path stores, indexes and tracks exactly what ``append`` does."""
    with tempfile.TemporaryDirectory() as tmp:
        one, many = Path(tmp) / "one", Path(tmp) / "many"
        one.mkdir()
        many.mkdir()
        fast, general = _segment(one), _segment(many)
        offset = BASE
        for n, count in enumerate(sizes):
            data = bytearray(batch(count, timestamp=T0 + timestamps[n]))
            set_base_offset(data, offset)
            header = BatchHeader.parse(data)
            # Timestamps go up and down, and some batches carry none.
            max_timestamp = -1 if timestamps[n] < 0 else header.max_timestamp
            general.append(bytes(data), [(header.last_offset, max_timestamp, len(data))])
            records = [data[:20], memoryview(data)[20:]] if pieces else data
            fast.append_batch(records, header.last_offset, max_timestamp)
            offset = header.next_offset
        assert fast.read_all() == general.read_all()
        assert fast.size == general.size
        for index in ("offset_index", "time_index"):
            assert (
                getattr(fast, index).entries_as_absolute()
                == getattr(general, index).entries_as_absolute()
            )
        assert fast.max_timestamp_so_far == general.max_timestamp_so_far
        assert fast.offset_of_max_timestamp_so_far == general.offset_of_max_timestamp_so_far
        assert fast.is_full == general.is_full
        fast.close()
        general.close()
