"""The offset index and time index: Kafka's byte formats, lookups, truncation, sanity checks."""

from __future__ import annotations

import struct
import tempfile
from bisect import bisect_right
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tierlog.errors import KafkaStorageError
from tierlog.log import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset

BASE = 1000


def _offset_index(directory: Path, entries: list[tuple[int, int]], size: int = 4096) -> OffsetIndex:
    index = OffsetIndex(directory / "00000000000000001000.index", BASE, size)
    index.create()
    for offset, position in entries:
        index.append(offset, position)
    return index


@st.composite
def offset_entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    gaps = draw(st.lists(st.integers(1, 1 << 20), max_size=60))
    steps = draw(st.lists(st.integers(0, 1 << 16), min_size=len(gaps), max_size=len(gaps)))
    entries, offset, position = [], BASE, 0
    for gap, step in zip(gaps, steps, strict=True):
        offset += gap
        position += step
        entries.append((offset, position))
    return entries


@given(offset_entries(), st.integers(0, 1 << 24))
def test_offset_index_file_is_kafkas_format_and_lookups_bisect(
    entries: list[tuple[int, int]], target: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        index = _offset_index(Path(tmp), entries, size=8 * 100)
        index.flush()
        data = index.path.read_bytes()
        assert data == b"".join(struct.pack(">ii", o - BASE, p) for o, p in entries)
        reloaded = OffsetIndex(index.path, BASE, 8 * 100)
        reloaded.sanity_check()
        target += BASE - 10
        offsets = [o for o, _ in entries]
        n = bisect_right(offsets, target)
        expected = OffsetPosition(*entries[n - 1]) if n else OffsetPosition(BASE, 0)
        assert reloaded.lookup(target) == expected == index.lookup(target)
        assert reloaded.entries_as_absolute() == [OffsetPosition(*e) for e in entries]


@given(offset_entries(), st.integers(0, 1 << 24))
def test_offset_index_truncation_drops_entries_at_and_above(
    entries: list[tuple[int, int]], cut: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        index = _offset_index(Path(tmp), entries)
        index.flush()
        index.truncate_to(BASE + cut)
        index.flush()
        kept = [e for e in entries if e[0] < BASE + cut]
        assert index.entries_as_absolute() == [OffsetPosition(*e) for e in kept]
        assert index.path.stat().st_size == 8 * len(kept)


def test_offset_index_refuses_bad_appends_and_reports_fullness(tmp_path: Path) -> None:
    index = _offset_index(tmp_path, [(BASE + 5, 100)], size=16)
    with pytest.raises(ValueError, match="does not follow"):
        index.append(BASE + 5, 200)
    with pytest.raises(ValueError, match="does not follow"):
        index.append(BASE + 6, 50)
    with pytest.raises(ValueError, match="does not fit"):
        index.append(BASE + (1 << 31), 300)
    assert not index.is_full
    index.append(BASE + 9, 300)
    assert index.is_full
    with pytest.raises(ValueError, match="is full"):
        index.append(BASE + 10, 400)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x00" * 12, "not a multiple"),
        (struct.pack(">ii", 5, 10) + struct.pack(">ii", 5, 20), "out of order"),
        (struct.pack(">ii", 5, 10) + struct.pack(">ii", 6, 5), "out of order"),
        (struct.pack(">ii", -1, 0), "below the segment"),
    ],
)
def test_offset_index_sanity_check_names_the_problem(
    tmp_path: Path, data: bytes, reason: str
) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(data)
    with pytest.raises(KafkaStorageError, match=rf"corrupt offset index .*{reason}"):
        OffsetIndex(path, BASE, 4096).sanity_check()


def test_offset_index_sanity_check_bounds_positions_by_the_log(tmp_path: Path) -> None:
    index = _offset_index(tmp_path, [(BASE + 1, 500)])
    index.flush()
    with pytest.raises(KafkaStorageError, match="past the segment's end 400"):
        OffsetIndex(index.path, BASE, 4096).sanity_check(limit=400)


@st.composite
def time_entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    steps = draw(st.lists(st.tuples(st.integers(1, 10**6), st.integers(0, 1000)), max_size=60))
    entries, timestamp, offset = [], 1_600_000_000_000, BASE
    for dt, do in steps:
        timestamp += dt
        offset += do
        entries.append((timestamp, offset))
    return entries


@given(time_entries(), st.integers(1_600_000_000_000 - 10, 1_600_000_000_000 + 10**8))
def test_time_index_file_is_kafkas_format_and_lookups_bisect(
    entries: list[tuple[int, int]], target: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        index = TimeIndex(Path(tmp) / "00000000000000001000.timeindex", BASE, 12 * 100)
        index.create()
        for timestamp, offset in entries:
            index.maybe_append(timestamp, offset)
            index.maybe_append(timestamp, offset)  # not newer: ignored
        index.flush()
        data = index.path.read_bytes()
        assert data == b"".join(struct.pack(">qi", t, o - BASE) for t, o in entries)
        reloaded = TimeIndex(index.path, BASE, 12 * 100)
        reloaded.sanity_check()
        stamps = [t for t, _ in entries]
        n = bisect_right(stamps, target)
        expected = TimestampOffset(*entries[n - 1]) if n else TimestampOffset(-1, BASE)
        assert reloaded.lookup(target) == expected
        last = TimestampOffset(*entries[-1]) if entries else TimestampOffset(-1, BASE)
        assert reloaded.last_entry == last


def test_time_index_keeps_a_slot_for_the_final_entry(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000001000.timeindex", BASE, 36)
    index.create()
    index.maybe_append(10, BASE + 1)
    assert not index.is_full
    index.maybe_append(20, BASE + 2)
    assert index.is_full
    with pytest.raises(ValueError, match="is full"):
        index.maybe_append(30, BASE + 3)
    index.maybe_append(30, BASE + 3, skip_full_check=True)
    assert index.entries == 3
    with pytest.raises(ValueError, match="goes back"):
        index.maybe_append(40, BASE + 2, skip_full_check=True)
    index.truncate_to(BASE + 2)
    assert index.entries_as_absolute() == [TimestampOffset(10, BASE + 1)]


def test_time_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    path.write_bytes(struct.pack(">qi", 20, 1) + struct.pack(">qi", 10, 2))
    with pytest.raises(KafkaStorageError, match=r"corrupt time index .*out of order"):
        TimeIndex(path, BASE, 4096).sanity_check()
    path.write_bytes(b"\x00" * 13)
    with pytest.raises(KafkaStorageError, match="not a multiple of the 12-byte"):
        TimeIndex(path, BASE, 4096).sanity_check()
