"""The leader-epoch checkpoint file and the leader-epoch cache (Kafka's LeaderEpochFileCache)."""

from __future__ import annotations

import itertools
import logging
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tierlog.errors import KafkaStorageError
from tierlog.log.epoch_cache import (
    EpochEntry,
    LeaderEpochCache,
    LeaderEpochCheckpointFile,
)

E = EpochEntry


@pytest.fixture
def checkpoint(tmp_path: Path) -> LeaderEpochCheckpointFile:
    return LeaderEpochCheckpointFile.in_directory(tmp_path)


@pytest.fixture
def cache(checkpoint: LeaderEpochCheckpointFile) -> LeaderEpochCache:
    return LeaderEpochCache(checkpoint)


def cache_with(*entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache()
    for epoch, start_offset in entries:
        cache.assign(epoch, start_offset)
    return cache


# --- the checkpoint file -------------------------------------------------------------------------


def test_reads_a_checkpoint_written_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\n3\n0 0\n4 1200\n7  98765432101\n")
    assert LeaderEpochCheckpointFile(path).read() == [E(0, 0), E(4, 1200), E(7, 98765432101)]


def test_writes_the_text_kafka_writes(checkpoint: LeaderEpochCheckpointFile) -> None:
    checkpoint.write([E(1, 0), E(3, 57)])
    assert checkpoint.path.name == "leader-epoch-checkpoint"
    assert checkpoint.path.read_bytes() == b"0\n2\n1 0\n3 57\n"
    assert not list(checkpoint.path.parent.glob("*.tmp"))


def test_encode_decode_are_the_remote_index_text() -> None:
    text = LeaderEpochCheckpointFile.encode([E(2, 5)])
    assert text == b"0\n1\n2 5\n"
    assert LeaderEpochCheckpointFile.decode(text) == [E(2, 5)]
    assert LeaderEpochCheckpointFile.encode([]) == b"0\n0\n"


def test_missing_or_empty_checkpoints_hold_nothing(tmp_path: Path) -> None:
    assert LeaderEpochCheckpointFile(tmp_path / "absent").read() == []
    assert LeaderEpochCheckpointFile.decode(b"") == []
    assert LeaderEpochCheckpointFile.decode(b"0\n") == []
    assert LeaderEpochCheckpointFile.decode(b"0\r\n1\r\n3 9\r\n") == [E(3, 9)]


@pytest.mark.parametrize(
    "text,line,why",
    [
        (b"1\n0\n", 1, "unknown version 1"),
        (b"zero\n0\n", 1, "not an integer"),
        (b"0\ntwo\n", 2, "not an integer"),
        (b"0\n1\n5\n", 3, "expected '<epoch> <start offset>'"),
        (b"0\n1\n5 6 7\n", 3, "expected '<epoch> <start offset>'"),
        (b"0\n2\n5 6\n7 x8\n", 4, "not an integer"),
        (b"0\n1\n5 1_000\n", 3, "not an integer"),
        (b"0\n1\n2147483648 0\n", 3, "out of range"),
        (b"0\n2\n5 6\n\n", 4, "expected '<epoch> <start offset>'"),
    ],
)
def test_malformed_lines_name_the_file_and_line(
    tmp_path: Path, text: bytes, line: int, why: str
) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(text)
    with pytest.raises(KafkaStorageError) as info:
        LeaderEpochCheckpointFile(path).read()
    message = str(info.value)
    assert str(path) in message
    assert f"line {line}" in message
    assert why in message


def test_a_count_that_does_not_match_the_entries_is_malformed(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\n3\n1 0\n2 10\n")
    with pytest.raises(KafkaStorageError, match="declares 3 entries, 2 follow") as info:
        LeaderEpochCheckpointFile(path).read()
    assert str(path) in str(info.value)


def test_text_that_is_not_utf8_is_malformed() -> None:
    with pytest.raises(KafkaStorageError, match="remote index x: not UTF-8"):
        LeaderEpochCheckpointFile.decode(b"0\n1\n\xff 0\n", source="remote index x")


# --- assign -----------------------------------------------------------------------------------


def test_assign_records_the_epoch_and_checkpoints_it(
    cache: LeaderEpochCache, checkpoint: LeaderEpochCheckpointFile
) -> None:
    cache.assign(2, 10)
    assert cache.latest_epoch == 2
    assert cache.latest_entry == cache.earliest_entry == E(2, 10)
    assert cache.entries() == [E(2, 10)]
    assert checkpoint.read() == [E(2, 10)]
    assert LeaderEpochCache(checkpoint).entries() == [E(2, 10)]


def test_reassigning_the_latest_epoch_at_a_later_offset_changes_nothing(
    cache: LeaderEpochCache, checkpoint: LeaderEpochCheckpointFile
) -> None:
    cache.assign(2, 6)
    checkpoint.path.unlink()
    cache.assign(2, 7)
    cache.assign(2, 6)
    assert cache.entries() == [E(2, 6)]
    assert not checkpoint.path.exists()  # nothing changed, so nothing was written


def test_reassigning_the_latest_epoch_at_an_earlier_offset_moves_it_back() -> None:
    cache = cache_with((2, 10))
    cache.assign(2, 9)
    assert cache.entries() == [E(2, 9)]


def test_an_entry_starting_before_later_epochs_replaces_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = cache_with((1, 0), (2, 10), (3, 20))
    with caplog.at_level(logging.WARNING, logger="tierlog.log.epoch_cache"):
        cache.assign(4, 15)
    assert cache.entries() == [E(1, 0), E(2, 10), E(4, 15)]
    assert "truncated conflicting entries" in caplog.text


def test_an_older_epoch_at_a_later_offset_removes_the_newer_epochs() -> None:
    cache = cache_with((1, 5), (2, 6))
    cache.assign(1, 7)
    assert cache.entries() == [E(1, 7)]
    assert cache.end_offset_for(2, 100) == (-1, -1)


def test_an_epoch_that_wrote_nothing_is_replaced_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = cache_with((1, 0), (2, 10))
    with caplog.at_level(logging.WARNING, logger="tierlog.log.epoch_cache"):
        cache.assign(3, 10)
    assert cache.entries() == [E(1, 0), E(3, 10)]
    assert caplog.text == ""


@pytest.mark.parametrize("epoch,start_offset", [(-1, 0), (0, -1)])
def test_negative_epochs_and_offsets_are_rejected(epoch: int, start_offset: int) -> None:
    cache = cache_with((1, 0))
    with pytest.raises(ValueError, match="invalid partition leader epoch entry"):
        cache.assign(epoch, start_offset)
    assert cache.entries() == [E(1, 0)]


def test_assign_entries_checkpoints_once(
    cache: LeaderEpochCache, checkpoint: LeaderEpochCheckpointFile
) -> None:
    remote = LeaderEpochCheckpointFile.decode(b"0\n3\n0 0\n2 40\n5 90\n")
    cache.assign_entries(remote)
    assert cache.entries() == remote
    assert checkpoint.read() == remote


def test_the_cache_loads_its_checkpoint(checkpoint: LeaderEpochCheckpointFile) -> None:
    checkpoint.path.write_bytes(b"0\n2\n3 0\n6 44\n")
    cache = LeaderEpochCache(checkpoint)
    assert cache.entries() == [E(3, 0), E(6, 44)]
    assert cache.latest_epoch == 6


# --- OffsetsForLeaderEpoch ---------------------------------------------------------------------


def test_end_offset_of_the_latest_epoch_is_the_log_end() -> None:
    cache = cache_with((2, 6), (3, 10))
    assert cache.end_offset_for(3, 42) == (3, 42)


def test_end_offset_of_an_earlier_epoch_is_the_next_epochs_start() -> None:
    cache = cache_with((0, 0), (1, 7), (2, 15))
    assert cache.end_offset_for(0, 30) == (0, 7)
    assert cache.end_offset_for(1, 30) == (1, 15)


def test_an_epoch_missing_from_the_cache_answers_the_epoch_below_it() -> None:
    cache = cache_with((0, 3), (4, 20), (8, 31))
    assert cache.end_offset_for(2, 50) == (0, 20)
    assert cache.end_offset_for(5, 50) == (4, 31)
    assert cache.end_offset_for(7, 50) == (4, 31)


def test_an_epoch_below_the_earliest_answers_the_earliest_start() -> None:
    cache = cache_with((5, 11), (6, 12))
    assert cache.end_offset_for(4, 100) == (4, 11)


@pytest.mark.parametrize(
    "entries,requested",
    [
        ((), 0),  # nothing cached
        (((2, 6),), -1),  # undefined epoch requested
        (((2, 6), (3, 9)), 4),  # above the latest epoch
    ],
)
def test_undefined_end_offsets(entries: tuple[tuple[int, int], ...], requested: int) -> None:
    assert cache_with(*entries).end_offset_for(requested, 100) == (-1, -1)


# --- truncation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "end_offset,expected",
    [
        (12, [E(2, 6), E(3, 8), E(4, 11)]),
        (11, [E(2, 6), E(3, 8)]),
        (9, [E(2, 6), E(3, 8)]),
        (8, [E(2, 6)]),
        (0, []),
        (-1, [E(2, 6), E(3, 8), E(4, 11)]),
    ],
)
def test_truncate_from_end(
    checkpoint: LeaderEpochCheckpointFile, end_offset: int, expected: list[EpochEntry]
) -> None:
    cache = LeaderEpochCache(checkpoint)
    cache.assign_entries([E(2, 6), E(3, 8), E(4, 11)])
    cache.truncate_from_end(end_offset)
    assert cache.entries() == expected
    assert checkpoint.read() == expected


@pytest.mark.parametrize(
    "start_offset,expected",
    [
        (-1, [E(2, 6), E(3, 8), E(4, 11)]),
        (5, [E(2, 6), E(3, 8), E(4, 11)]),
        (6, [E(2, 6), E(3, 8), E(4, 11)]),
        (7, [E(2, 7), E(3, 8), E(4, 11)]),
        (8, [E(3, 8), E(4, 11)]),
        (10, [E(3, 10), E(4, 11)]),
        (11, [E(4, 11)]),
        (25, [E(4, 25)]),
    ],
)
def test_truncate_from_start_keeps_the_epoch_current_at_the_new_start(
    checkpoint: LeaderEpochCheckpointFile, start_offset: int, expected: list[EpochEntry]
) -> None:
    cache = LeaderEpochCache(checkpoint)
    cache.assign_entries([E(2, 6), E(3, 8), E(4, 11)])
    cache.truncate_from_start(start_offset)
    assert cache.entries() == expected
    assert checkpoint.read() == expected


def test_truncating_an_empty_cache_does_nothing(cache: LeaderEpochCache) -> None:
    cache.truncate_from_start(7)
    cache.truncate_from_end(7)
    assert cache.entries() == []
    assert cache.latest_epoch is None and cache.earliest_entry is None


def test_clear_and_flush(cache: LeaderEpochCache, checkpoint: LeaderEpochCheckpointFile) -> None:
    cache.assign_entries([E(1, 0), E(2, 5)])
    cache.clear_and_flush()
    assert cache.is_empty() and len(cache) == 0
    assert checkpoint.path.read_bytes() == b"0\n0\n"


# --- lookups ------------------------------------------------------------------------------------


def test_epoch_for_offset() -> None:
    cache = cache_with((0, 10), (1, 20), (5, 30))
    assert cache.epoch_for_offset(5) is None
    assert cache.epoch_for_offset(10) == 0
    assert cache.epoch_for_offset(19) == 0
    assert cache.epoch_for_offset(20) == 1
    assert cache.epoch_for_offset(25) == 1
    assert cache.epoch_for_offset(30) == 5
    assert cache.epoch_for_offset(10**12) == 5


def test_previous_and_next_epochs() -> None:
    cache = cache_with((2, 10), (4, 15), (9, 30))
    assert cache.previous_epoch() == 4
    assert cache.previous_epoch(9) == 4
    assert cache.previous_epoch(5) == 4
    assert cache.previous_epoch(2) is None
    assert cache.previous_entry(4) == E(2, 10)
    assert cache.next_epoch(-1) == 2
    assert cache.next_epoch(4) == 9
    assert cache.next_epoch(9) is None
    assert cache.epoch_entry(4) == E(4, 15)
    assert cache.epoch_entry(3) is None
    assert cache_with((2, 10)).previous_epoch() is None
    assert LeaderEpochCache().previous_epoch() is None


@pytest.mark.parametrize(
    "start,end,expected",
    [
        (0, 9, [E(0, 0)]),
        (0, 10, [E(0, 0), E(1, 10)]),
        (12, 25, [E(1, 12), E(3, 20)]),
        (12, 19, [E(1, 12)]),
        (20, 34, [E(3, 20)]),
        (20, 35, [E(3, 20), E(5, 35)]),
        (40, 60, [E(5, 40)]),
        (-1, 15, [E(0, 0), E(1, 10)]),
    ],
)
def test_entries_in_range_are_a_segments_leader_epochs(
    start: int, end: int, expected: list[EpochEntry]
) -> None:
    cache = cache_with((0, 0), (1, 10), (3, 20), (5, 35))
    assert cache.entries_in_range(start, end) == expected
    assert cache.entries() == [E(0, 0), E(1, 10), E(3, 20), E(5, 35)]  # untouched


def test_clone_with_checkpoint_writes_only_the_new_file(tmp_path: Path) -> None:
    original_file = LeaderEpochCheckpointFile(tmp_path / "a")
    original = LeaderEpochCache(original_file)
    original.assign(1, 0)
    clone = original.clone_with_checkpoint(LeaderEpochCheckpointFile(tmp_path / "b"))
    assert clone.entries() == [E(1, 0)]
    clone.assign(2, 9)
    assert original.entries() == [E(1, 0)]
    assert original_file.read() == [E(1, 0)]
    assert LeaderEpochCheckpointFile(tmp_path / "b").read() == [E(1, 0), E(2, 9)]


# --- invariants -------------------------------------------------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 200)),
        st.tuples(st.just("from_end"), st.integers(-1, 200), st.just(0)),
        st.tuples(st.just("from_start"), st.integers(-1, 200), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_entries_stay_ordered_and_checkpointed(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, int]]
) -> None:
    checkpoint = LeaderEpochCheckpointFile(tmp_path_factory.mktemp("epochs") / "checkpoint")
    cache = LeaderEpochCache(checkpoint)
    for op, a, b in ops:
        if op == "assign":
            cache.assign(a, b)
            # The assigned epoch is always the latest afterwards (or it already was).
            assert cache.latest_epoch == a
        elif op == "from_end":
            cache.truncate_from_end(a)
            latest = cache.latest_entry
            assert a < 0 or latest is None or latest.start_offset < a
        else:
            cache.truncate_from_start(a)
            earliest = cache.earliest_entry
            assert a < 0 or earliest is None or earliest.start_offset >= a
        entries = cache.entries()
        for before, after in itertools.pairwise(entries):
            assert before.epoch < after.epoch
            assert before.start_offset < after.start_offset
    assert LeaderEpochCache(checkpoint).entries() == cache.entries()
    if checkpoint.path.exists():
        assert checkpoint.read() == cache.entries()


@given(
    st.lists(
        st.builds(EpochEntry, st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=20
    )
)
def test_checkpoint_text_round_trips(entries: list[EpochEntry]) -> None:
    assert LeaderEpochCheckpointFile.decode(LeaderEpochCheckpointFile.encode(entries)) == entries


def test_concurrent_readers_see_a_consistent_cache(checkpoint: LeaderEpochCheckpointFile) -> None:
    cache = LeaderEpochCache(checkpoint)
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while not done.is_set():
                entries = cache.entries()
                assert entries == sorted(entries)
                assert len({e.start_offset for e in entries}) == len(entries)
                epoch, end_offset = cache.end_offset_for(150, 10**9)
                assert (epoch == -1) == (end_offset == -1)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for thread in readers:
        thread.start()
    for epoch in range(200):
        cache.assign(epoch, epoch * 10)
        if epoch % 10 == 9:
            cache.truncate_from_end(epoch * 10 - 5)
    done.set()
    for thread in readers:
        thread.join()
    assert errors == []
    assert checkpoint.read() == cache.entries()
