"""The per-partition cache and its per-epoch state: the bookkeeping behind every lookup."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tierlog.errors import InvalidStateTransitionError, RemoteResourceNotFoundError
from tierlog.metadata import RemoteLogLeaderEpochState, RemoteLogMetadataCache
from tierlog.model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)

from .support import (
    DELETE_FINISHED,
    DELETE_STARTED,
    FINISHED,
    OTHER_TIP,
    STARTED,
    TIP,
    Segments,
)


def new_id() -> RemoteLogSegmentId:
    return RemoteLogSegmentId.generate_new(TIP)


@pytest.fixture
def make() -> Segments:
    """Builds values only: these tests drive the cache directly."""
    return Segments()


# --- one epoch ----------------------------------------------------------------------------


def test_empty_epoch_state() -> None:
    state = RemoteLogLeaderEpochState()
    assert state.referenced_segment_ids == []
    assert state.unreferenced_segment_ids == frozenset()
    assert state.segment_ids() == set()
    assert state.highest_log_offset is None
    assert state.floor_segment_id(0) is None


def test_epoch_state_tracks_a_segment_through_its_states() -> None:
    state = RemoteLogLeaderEpochState()
    segment = new_id()
    state.handle_copy_started(segment)
    assert state.unreferenced_segment_ids == {segment}
    assert state.floor_segment_id(50) is None

    state.handle_copy_finished(10, segment, 99)
    assert state.referenced_segment_ids == [segment]
    assert state.unreferenced_segment_ids == frozenset()
    assert (state.floor_segment_id(9), state.floor_segment_id(10)) == (None, segment)
    assert state.floor_segment_id(1_000) == segment, "the caller checks the epoch's end"
    assert state.highest_log_offset == 99

    state.handle_delete_started(10, segment)
    assert state.referenced_segment_ids == []
    assert state.unreferenced_segment_ids == {segment}
    state.handle_delete_finished(segment)
    assert state.segment_ids() == set()
    assert state.highest_log_offset == 99


def test_epoch_state_keeps_entries_sorted_whatever_the_finish_order() -> None:
    state = RemoteLogLeaderEpochState()
    ids = {start: new_id() for start in (0, 100, 200, 300)}
    state.handle_copy_finished(200, ids[200], 299)
    state.handle_copy_finished(0, ids[0], 99)
    state.handle_copy_finished(300, ids[300], 399)
    state.handle_copy_finished(100, ids[100], 199)
    assert state.referenced_segment_ids == [ids[0], ids[100], ids[200], ids[300]]
    assert [state.floor_segment_id(o) for o in (0, 150, 299, 500)] == [
        ids[0],
        ids[100],
        ids[200],
        ids[300],
    ]
    assert state.highest_log_offset == 399


def test_epoch_state_supersedes_entries_a_newer_upload_covers() -> None:
    state = RemoteLogLeaderEpochState()
    old = [new_id(), new_id(), new_id()]
    for index, segment in enumerate(old):
        state.handle_copy_finished(index * 50, segment, index * 50 + 49)
    newer = new_id()
    state.handle_copy_started(newer)
    state.handle_copy_finished(40, newer, 149)
    assert state.referenced_segment_ids == [old[0], newer]
    assert state.unreferenced_segment_ids == {old[1], old[2]}


def test_epoch_state_replacing_a_start_offset_unreferences_the_old_entry() -> None:
    state = RemoteLogLeaderEpochState()
    first, second, smaller = new_id(), new_id(), new_id()
    state.handle_copy_finished(0, first, 99)
    state.handle_copy_finished(100, second, 199)
    state.handle_copy_finished(0, smaller, 49)  # ends below the highest offset: no pop
    assert state.referenced_segment_ids == [smaller, second]
    assert state.unreferenced_segment_ids == {first}
    assert state.highest_log_offset == 199


def test_epoch_state_delete_started_leaves_a_newer_mapping_alone() -> None:
    state = RemoteLogLeaderEpochState()
    older, newer = new_id(), new_id()
    state.handle_copy_finished(0, older, 99)
    state.handle_copy_finished(0, newer, 99)
    state.handle_delete_started(0, older)
    assert state.referenced_segment_ids == [newer]
    assert state.unreferenced_segment_ids == {older}


# --- the partition cache ------------------------------------------------------------------


def test_cache_answers_with_the_current_metadata(make: Segments) -> None:
    cache = RemoteLogMetadataCache(TIP)
    started = make.new(0, 99, {0: 0, 2: 60})
    cache.add_copy_in_progress_segment(started)
    assert cache.list_remote_log_segments(2) == [started]
    assert cache.remote_log_segment_metadata(0, 10) is None

    update = make.update(started, FINISHED)
    cache.update_remote_log_segment_metadata(update)
    finished = started.create_with_updates(update)
    assert cache.remote_log_segment_metadata(2, 60) == finished
    assert cache.list_remote_log_segments(0) == cache.list_all_remote_log_segments() == [finished]
    assert (cache.highest_offset_for_epoch(0), cache.highest_offset_for_epoch(2)) == (59, 99)
    assert cache.list_remote_log_segments(1) == []


def test_cache_rejects_events_of_another_partition(make: Segments) -> None:
    cache = RemoteLogMetadataCache(TIP)
    foreign = make.new(0, 99, partition=OTHER_TIP)
    with pytest.raises(ValueError, match="applied to the cache"):
        cache.add_copy_in_progress_segment(foreign)
    with pytest.raises(ValueError, match="applied to the cache"):
        cache.update_remote_log_segment_metadata(make.update(foreign, FINISHED))
    assert cache.list_all_remote_log_segments() == []


def test_uninitialized_cache_drops_updates_for_unknown_segments(make: Segments) -> None:
    cache = RemoteLogMetadataCache(TIP, initialized=False)
    assert not cache.is_initialized
    orphan = make.new(0, 99)
    cache.update_remote_log_segment_metadata(make.update(orphan, DELETE_FINISHED))
    assert cache.list_all_remote_log_segments() == []

    cache.mark_initialized()
    assert cache.is_initialized
    with pytest.raises(RemoteResourceNotFoundError):
        cache.update_remote_log_segment_metadata(make.update(orphan, DELETE_FINISHED))


def test_uninitialized_cache_still_checks_transitions(make: Segments) -> None:
    cache = RemoteLogMetadataCache(TIP, initialized=False)
    segment = make.new(0, 99)
    cache.add_copy_in_progress_segment(segment)
    with pytest.raises(InvalidStateTransitionError):
        cache.update_remote_log_segment_metadata(make.update(segment, DELETE_FINISHED))
    assert cache.list_all_remote_log_segments() == [segment]


def test_retried_add_replaces_the_earlier_attempt(make: Segments) -> None:
    cache = RemoteLogMetadataCache(TIP)
    first = make.new(0, 99, {0: 0, 1: 50})
    retry = RemoteLogSegmentMetadata(
        remote_log_segment_id=first.remote_log_segment_id,
        start_offset=0,
        end_offset=79,
        max_timestamp_ms=79,
        broker_id=2,
        event_timestamp_ms=first.event_timestamp_ms + 1,
        segment_size_in_bytes=80,
        segment_leader_epochs={0: 0, 2: 40},
    )
    cache.add_copy_in_progress_segment(first)
    cache.add_copy_in_progress_segment(retry)
    assert cache.list_all_remote_log_segments() == [retry]
    assert cache.list_remote_log_segments(1) == []
    assert cache.list_remote_log_segments(2) == [retry]


def test_lookups_are_exact_without_reuploads(make: Segments) -> None:
    cache = RemoteLogMetadataCache(TIP)
    layout = [(0, 9, {0: 0}), (10, 29, {0: 10, 1: 20}), (30, 39, {1: 30}), (40, 49, {3: 40})]
    finished = []
    for start, end, epochs in layout:
        segment = make.new(start, end, epochs)
        cache.add_copy_in_progress_segment(segment)
        update = make.update(segment, FINISHED)
        cache.update_remote_log_segment_metadata(update)
        finished.append(segment.create_with_updates(update))
    for epoch in range(4):
        for offset in range(55):
            expected = [m for m in finished if holds(m, epoch, offset)]
            assert cache.remote_log_segment_metadata(epoch, offset) == (
                expected[0] if expected else None
            ), (epoch, offset)


def test_segment_states_visible_to_each_query(make: Segments) -> None:
    cache = RemoteLogMetadataCache(TIP)
    segment = make.new(0, 9)
    visible = {}
    for state in (STARTED, FINISHED, DELETE_STARTED, DELETE_FINISHED):
        if state is STARTED:
            cache.add_copy_in_progress_segment(segment)
        else:
            update = make.update(segment, state)
            cache.update_remote_log_segment_metadata(update)
            segment = segment.create_with_updates(update)
        visible[state] = (
            cache.remote_log_segment_metadata(0, 5) is not None,
            bool(cache.list_remote_log_segments(0)),
            bool(cache.list_all_remote_log_segments()),
        )
    assert visible == {
        STARTED: (False, True, True),
        FINISHED: (True, True, True),
        DELETE_STARTED: (False, True, True),
        DELETE_FINISHED: (False, False, False),
    }


# --- properties over random event sequences -----------------------------------------------


@st.composite
def segment_shapes(draw: st.DrawFn) -> tuple[int, int, dict[int, int], int, bool]:
    """A segment's offsets, epochs (each starting at a distinct offset), size and txn flag."""
    epochs = sorted(draw(st.sets(st.integers(0, 3), min_size=1, max_size=3)))
    start = draw(st.integers(0, 60))
    end = start + len(epochs) - 1 + draw(st.integers(0, 25))
    later = len(epochs) - 1
    starts = (
        draw(st.sets(st.integers(start + 1, end), min_size=later, max_size=later)) if later else ()
    )
    epoch_starts = [start, *sorted(starts)]
    size = draw(st.integers(0, 1_000))
    return start, end, dict(zip(epochs, epoch_starts, strict=True)), size, draw(st.booleans())


def holds(segment: RemoteLogSegmentMetadata, epoch: int, offset: int) -> bool:
    """Whether ``offset`` was written under ``epoch`` in this segment."""
    end = segment.end_offset_for_epoch(epoch)
    return end is not None and segment.leader_epochs[epoch] <= offset <= end


def observe(cache: RemoteLogMetadataCache) -> object:
    return (
        cache.list_all_remote_log_segments(),
        [cache.list_remote_log_segments(e) for e in range(4)],
        [cache.highest_offset_for_epoch(e) for e in range(4)],
        [cache.remote_log_segment_metadata(e, o) for e in range(4) for o in range(0, 90, 3)],
    )


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_random_event_sequences_keep_the_cache_consistent(data: st.DataObject) -> None:
    builder = Segments()
    cache = RemoteLogMetadataCache(TIP)
    live: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = {}
    highest: dict[int, int] = {}
    states = list(RemoteLogSegmentState)

    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        if not live or data.draw(st.booleans(), label="add"):
            start, end, epochs, size, txn_empty = data.draw(segment_shapes(), label="segment")
            segment = builder.new(start, end, epochs, size=size, txn_idx_empty=txn_empty)
            cache.add_copy_in_progress_segment(segment)
            live[segment.remote_log_segment_id] = segment
        else:
            segment = data.draw(st.sampled_from(list(live.values())), label="target")
            target = data.draw(st.sampled_from(states[1:]), label="state")
            update = builder.update(segment, target)
            if not RemoteLogSegmentState.is_valid_transition(segment.state, target):
                before = observe(cache)
                with pytest.raises(InvalidStateTransitionError):
                    cache.update_remote_log_segment_metadata(update)
                assert observe(cache) == before
                continue
            cache.update_remote_log_segment_metadata(update)
            segment = segment.create_with_updates(update)
            if target is DELETE_FINISHED:
                del live[segment.remote_log_segment_id]
            else:
                live[segment.remote_log_segment_id] = segment
            if target is FINISHED:
                for epoch, _start in segment.segment_leader_epochs:
                    end_for_epoch = segment.end_offset_for_epoch(epoch)
                    assert end_for_epoch is not None
                    highest[epoch] = max(highest.get(epoch, -1), end_for_epoch)

        by_start = sorted(live.values(), key=lambda m: m.start_offset)
        assert cache.list_all_remote_log_segments() == sorted(
            by_start, key=lambda m: (m.start_offset, m.end_offset, m.remote_log_segment_id)
        )
        for epoch in range(4):
            listed = cache.list_remote_log_segments(epoch)
            assert sorted(listed, key=repr) == sorted(
                (m for m in by_start if epoch in m.leader_epochs), key=repr
            )
            assert [m.start_offset for m in listed] == sorted(m.start_offset for m in listed)
            assert cache.highest_offset_for_epoch(epoch) == highest.get(epoch)
            assert cache.remote_log_size(epoch) == sum(m.segment_size_in_bytes for m in listed)
            for offset in range(0, 90):
                found = cache.remote_log_segment_metadata(epoch, offset)
                if found is not None:
                    assert found.state is FINISHED
                    assert live[found.remote_log_segment_id] == found
                    assert holds(found, epoch, offset)
                txn = cache.next_segment_with_txn_index(epoch, offset)
                if txn is not None:
                    assert txn.state is FINISHED and not txn.txn_idx_empty
                    assert epoch in txn.leader_epochs and txn.end_offset >= offset
