"""The built-in in-memory RemoteLogMetadataManager, driven through the runtime's SPI facade."""

from __future__ import annotations

import importlib
import threading

import pytest
from tierlog.errors import InvalidStateTransitionError, RemoteResourceNotFoundError
from tierlog.metadata import InMemoryRemoteLogMetadataManager
from tierlog.model import (
    CustomMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    Uuid,
)
from tierlog.plugins import BUILTIN_PLUGINS, ROLE_METADATA, TierlogPluginManager
from tierlog.spi import RemoteLogMetadataManager

from .support import (
    DELETE_FINISHED,
    DELETE_STARTED,
    FINISHED,
    OTHER_TIP,
    RLMM_HOOKS,
    STARTED,
    TIP,
    Segments,
    make_plugin_manager_with_memory,
    metadata_facade,
)

MARKED = RemotePartitionDeleteState.DELETE_PARTITION_MARKED
PARTITION_DELETE_STARTED = RemotePartitionDeleteState.DELETE_PARTITION_STARTED
PARTITION_DELETE_FINISHED = RemotePartitionDeleteState.DELETE_PARTITION_FINISHED


def listed(
    rlmm: RemoteLogMetadataManager, epoch: int | None = None, tip: TopicIdPartition = TIP
) -> list[RemoteLogSegmentMetadata]:
    return list(rlmm.list_remote_log_segments(tip, epoch))


def partition_delete(
    state: RemotePartitionDeleteState, tip: TopicIdPartition = TIP
) -> RemotePartitionDeleteMetadata:
    return RemotePartitionDeleteMetadata(tip, state, event_timestamp_ms=1, broker_id=0)


def snapshot(rlmm: RemoteLogMetadataManager, epochs: range, offsets: range) -> object:
    """Everything a caller can observe about TIP for these epochs and offsets."""
    return (
        sorted(map(repr, listed(rlmm))),
        {e: listed(rlmm, e) for e in epochs},
        {e: rlmm.highest_offset_for_epoch(TIP, e) for e in epochs},
        {(e, o): rlmm.remote_log_segment_metadata(TIP, e, o) for e in epochs for o in offsets},
    )


def state_id(value: object) -> str:
    """Test ids: a state's name, or a path of states joined by '>' ('new' when empty)."""
    if isinstance(value, tuple):
        return ">".join(state.name for state in value) or "new"
    return str(getattr(value, "name", value))


# --- plugin registration ------------------------------------------------------------------


def test_is_a_complete_metadata_provider(
    plugin_manager: TierlogPluginManager, manager: InMemoryRemoteLogMetadataManager
) -> None:
    hooks = plugin_manager.implemented_hooks(manager)
    assert set(hooks) == {*RLMM_HOOKS, "tierlog_close"}
    assert not any(hooks.values()), "no hook is a wrapper"
    assert plugin_manager.providers(ROLE_METADATA) == [plugin_manager.get_name(manager)]


def test_builtin_target_names_the_plugin_class() -> None:
    target = "tierlog.metadata.memory:InMemoryRemoteLogMetadataManager"
    assert BUILTIN_PLUGINS.get("memory", target) == target
    module, _, attribute = target.partition(":")
    plugin_class = getattr(importlib.import_module(module), attribute)
    assert plugin_class is InMemoryRemoteLogMetadataManager


def test_an_unknown_partition_is_not_found(rlmm: RemoteLogMetadataManager) -> None:
    """As Kafka's managers: a partition never added, led nor followed is unknown, not empty."""
    stranger = TopicIdPartition.of(Uuid.random(), "stranger", 0)
    lookups = [
        lambda: rlmm.remote_log_segment_metadata(stranger, 0, 0),
        lambda: rlmm.highest_offset_for_epoch(stranger, 0),
        lambda: listed(rlmm, tip=stranger),
        lambda: listed(rlmm, 0, tip=stranger),
        lambda: rlmm.remote_log_size(stranger, 0),
        lambda: rlmm.next_segment_with_txn_index(stranger, 0, 0),
    ]
    for lookup in lookups:
        with pytest.raises(RemoteResourceNotFoundError):
            lookup()
    assert rlmm.is_ready(stranger) is True  # nothing to load: never "not ready"


def test_a_held_partition_without_uploads_answers_nothing(rlmm: RemoteLogMetadataManager) -> None:
    assert rlmm.remote_log_segment_metadata(TIP, 0, 0) is None
    assert rlmm.highest_offset_for_epoch(TIP, 0) is None
    assert listed(rlmm) == []
    assert rlmm.remote_log_size(TIP, 0) == 0
    assert rlmm.next_segment_with_txn_index(TIP, 0, 0) is None


# --- lifecycle ----------------------------------------------------------------------------


def test_lifecycle_over_several_epochs(rlmm: RemoteLogMetadataManager, segments: Segments) -> None:
    plan = [
        (0, 99, {0: 0}),
        (100, 199, {0: 100, 1: 150}),
        (200, 299, {1: 200, 2: 250}),
        (300, 399, {2: 300}),
    ]
    highest: dict[int, int] = {}
    finished = []
    for start, end, epochs in plan:
        started = segments.add(start, end, epochs)
        ranges = {e: (s, started.end_offset_for_epoch(e)) for e, s in epochs.items()}
        for epoch, (first, last) in ranges.items():
            assert rlmm.remote_log_segment_metadata(TIP, epoch, first) is None
            assert rlmm.remote_log_segment_metadata(TIP, epoch, last) is None
            assert started in listed(rlmm, epoch)
            assert rlmm.highest_offset_for_epoch(TIP, epoch) == highest.get(epoch)
        assert started in listed(rlmm)

        done = segments.move(started, FINISHED)
        finished.append(done)
        for epoch, (first, last) in ranges.items():
            assert last is not None
            assert rlmm.remote_log_segment_metadata(TIP, epoch, first) == done
            assert rlmm.remote_log_segment_metadata(TIP, epoch, last) == done
            assert done in listed(rlmm, epoch)
            assert started not in listed(rlmm, epoch)
            highest[epoch] = last
            assert rlmm.highest_offset_for_epoch(TIP, epoch) == last

    s0, s1, s2, s3 = finished
    assert listed(rlmm, 0) == [s0, s1]
    assert listed(rlmm, 1) == [s1, s2]
    assert listed(rlmm, 2) == [s2, s3]
    assert listed(rlmm, 3) == []
    assert listed(rlmm) == [s0, s1, s2, s3]
    assert highest == {0: 149, 1: 249, 2: 399}

    deleting = segments.move(s1, DELETE_STARTED)
    assert rlmm.remote_log_segment_metadata(TIP, 0, 120) is None
    assert rlmm.remote_log_segment_metadata(TIP, 1, 160) is None
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) == s0
    assert listed(rlmm, 0) == [s0, deleting]
    assert listed(rlmm, 1) == [deleting, s2]
    assert deleting.state is DELETE_STARTED

    segments.move(deleting, DELETE_FINISHED)
    assert listed(rlmm, 0) == [s0]
    assert listed(rlmm, 1) == [s2]
    assert listed(rlmm) == [s0, s2, s3]
    assert {e: rlmm.highest_offset_for_epoch(TIP, e) for e in highest} == highest


def test_copy_may_be_abandoned_and_deleted(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    started = segments.add(0, 99)
    deleting = segments.move(started, DELETE_STARTED)
    assert listed(rlmm, 0) == [deleting]
    assert rlmm.remote_log_segment_metadata(TIP, 0, 10) is None
    assert rlmm.highest_offset_for_epoch(TIP, 0) is None
    segments.move(deleting, DELETE_FINISHED)
    assert listed(rlmm) == []


def test_segment_spanning_epochs_answers_each_epoch_for_its_own_range(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    segment = segments.upload(0, 99, {0: 0, 1: 40, 3: 80})
    expected = {
        (0, 0): segment,
        (0, 39): segment,
        (0, 40): None,
        (1, 39): None,
        (1, 40): segment,
        (1, 79): segment,
        (1, 80): None,
        (2, 50): None,
        (3, 80): segment,
        (3, 99): segment,
        (3, 100): None,
    }
    assert {key: rlmm.remote_log_segment_metadata(TIP, *key) for key in expected} == expected
    assert [rlmm.highest_offset_for_epoch(TIP, e) for e in range(4)] == [39, 79, None, 99]
    assert [listed(rlmm, e) for e in range(4)] == [[segment], [segment], [], [segment]]


def test_partitions_are_independent(rlmm: RemoteLogMetadataManager, segments: Segments) -> None:
    mine = segments.upload(0, 99)
    theirs = segments.upload(0, 49, partition=OTHER_TIP)
    assert rlmm.remote_log_segment_metadata(TIP, 0, 70) == mine
    assert rlmm.remote_log_segment_metadata(OTHER_TIP, 0, 70) is None
    assert rlmm.highest_offset_for_epoch(OTHER_TIP, 0) == 49
    assert listed(rlmm, tip=OTHER_TIP) == [theirs]
    assert listed(rlmm, 0) == [mine]


def test_listing_is_sorted_by_start_offset(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    late = segments.upload(200, 299)
    copying = segments.add(300, 399)
    early = segments.upload(0, 99)
    middle = segments.move(segments.upload(100, 199), DELETE_STARTED)
    assert listed(rlmm, 0) == [early, middle, late, copying]
    assert listed(rlmm) == [early, middle, late, copying]


# --- re-uploads by a new leader ------------------------------------------------------------


def test_duplicate_upload_supersedes_the_older(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    older = segments.upload(0, 99)
    newer = segments.upload(0, 99)
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) == newer
    assert set(map(repr, listed(rlmm, 0))) == {repr(older), repr(newer)}
    assert rlmm.highest_offset_for_epoch(TIP, 0) == 99


def test_same_start_larger_upload_supersedes(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    older = segments.upload(0, 99)
    newer = segments.upload(0, 149)
    for offset in (0, 50, 99, 149):
        assert rlmm.remote_log_segment_metadata(TIP, 0, offset) == newer
    assert listed(rlmm, 0) == [older, newer]
    assert rlmm.highest_offset_for_epoch(TIP, 0) == 149


def test_superset_upload_supersedes_every_covered_segment(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    old = [segments.upload(10, 49), segments.upload(50, 99), segments.upload(100, 149)]
    superset = segments.upload(5, 160)
    for offset in (5, 10, 60, 120, 160):
        assert rlmm.remote_log_segment_metadata(TIP, 0, offset) == superset
    assert listed(rlmm, 0) == [superset, *old]
    assert rlmm.highest_offset_for_epoch(TIP, 0) == 160


def test_overlapping_uploads_serve_the_newer_range(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    # The old leader tiered 10-90; the new leader, lagging behind, tiers 5-100 and then 101-200.
    old = segments.upload(10, 90)
    first = segments.upload(5, 100)
    second = segments.upload(101, 200)
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) == first
    assert rlmm.remote_log_segment_metadata(TIP, 0, 95) == first
    assert rlmm.remote_log_segment_metadata(TIP, 0, 150) == second
    assert listed(rlmm, 0) == [first, old, second]


def test_reupload_below_the_highest_offset_supersedes_nothing(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    s0 = segments.upload(0, 99)
    s1 = segments.upload(100, 199)
    inner = segments.upload(50, 149)
    assert rlmm.remote_log_segment_metadata(TIP, 0, 10) == s0
    assert rlmm.remote_log_segment_metadata(TIP, 0, 60) == inner
    assert rlmm.remote_log_segment_metadata(TIP, 0, 120) == s1
    assert rlmm.highest_offset_for_epoch(TIP, 0) == 199


def test_superseded_segment_is_deleted_without_disturbing_the_newer(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    older = segments.upload(0, 99)
    newer = segments.upload(0, 99)
    segments.move(older, DELETE_STARTED, DELETE_FINISHED)
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) == newer
    assert listed(rlmm, 0) == [newer]

    segments.move(newer, DELETE_STARTED)
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) is None, "the older is not served again"


def test_highest_offset_only_grows(rlmm: RemoteLogMetadataManager, segments: Segments) -> None:
    first = segments.upload(0, 99)
    second = segments.upload(100, 199)
    assert rlmm.highest_offset_for_epoch(TIP, 0) == 199
    for segment in (second, first):
        segments.move(segment, DELETE_STARTED, DELETE_FINISHED)
        assert rlmm.highest_offset_for_epoch(TIP, 0) == 199
    assert listed(rlmm) == []
    assert rlmm.remote_log_segment_metadata(TIP, 0, 150) is None

    segments.add(200, 299)
    assert rlmm.highest_offset_for_epoch(TIP, 0) == 199, "a copy in progress counts for nothing"
    segments.upload(0, 49)
    assert rlmm.highest_offset_for_epoch(TIP, 0) == 199, "a lower upload does not lower it"


# --- invalid events -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ((), DELETE_FINISHED),
        ((FINISHED,), DELETE_FINISHED),
        ((DELETE_STARTED,), FINISHED),
        ((FINISHED, DELETE_STARTED), FINISHED),
    ],
    ids=state_id,
)
def test_invalid_transition_is_rejected_and_changes_nothing(
    rlmm: RemoteLogMetadataManager,
    segments: Segments,
    path: tuple[RemoteLogSegmentState, ...],
    target: RemoteLogSegmentState,
) -> None:
    segments.upload(0, 99)
    segment = segments.move(segments.add(100, 199, {0: 100, 1: 150}), *path)
    before = snapshot(rlmm, range(3), range(0, 220, 10))

    with pytest.raises(InvalidStateTransitionError, match=target.name):
        rlmm.update_remote_log_segment_metadata(segments.update(segment, target))

    assert snapshot(rlmm, range(3), range(0, 220, 10)) == before


def test_add_takes_only_copy_segment_started(
    plugin_manager: TierlogPluginManager, rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    finished = segments.new(0, 99, state=FINISHED)
    with pytest.raises(InvalidStateTransitionError):
        plugin_manager.hook.tierlog_add_remote_log_segment_metadata(
            remote_log_segment_metadata=finished
        )
    assert listed(rlmm) == []
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) is None


def test_adding_a_known_segment_again_is_rejected_once_it_moved_on(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    started = segments.add(0, 99)
    done = segments.move(started, FINISHED)
    with pytest.raises(InvalidStateTransitionError):
        rlmm.add_remote_log_segment_metadata(started)
    assert listed(rlmm) == [done]
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) == done


def test_repeating_a_state_is_a_harmless_retry(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    started = segments.add(0, 99)
    rlmm.add_remote_log_segment_metadata(started)
    assert listed(rlmm, 0) == [started]

    done = segments.move(started, FINISHED)
    later = segments.upload(100, 199)
    retry = segments.update(done, FINISHED, CustomMetadata(b"bucket-2"))
    rlmm.update_remote_log_segment_metadata(retry)
    refreshed = done.create_with_updates(retry)
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) == refreshed
    assert listed(rlmm, 0) == [refreshed, later]

    deleting = segments.move(refreshed, DELETE_STARTED, DELETE_STARTED)
    assert listed(rlmm, 0) == [deleting, later]
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) is None


def test_retried_finish_does_not_bring_back_a_superseded_upload(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    older = segments.upload(0, 99)
    newer = segments.upload(0, 99)
    segments.move(older, FINISHED)
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) == newer


def test_update_for_an_unknown_segment_is_not_found(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    never_added = segments.new(0, 99)
    with pytest.raises(RemoteResourceNotFoundError):
        rlmm.update_remote_log_segment_metadata(segments.update(never_added, FINISHED))

    segments.upload(100, 199)
    with pytest.raises(RemoteResourceNotFoundError):
        rlmm.update_remote_log_segment_metadata(segments.update(never_added, FINISHED))

    gone = segments.move(segments.upload(200, 299), DELETE_STARTED, DELETE_FINISHED)
    with pytest.raises(RemoteResourceNotFoundError):
        rlmm.update_remote_log_segment_metadata(segments.update(gone, DELETE_FINISHED))


# --- partition deletion -------------------------------------------------------------------


def test_partition_delete_finished_forgets_the_partition(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    kept = segments.upload(0, 49, partition=OTHER_TIP)
    segment = segments.upload(0, 99)
    rlmm.put_remote_partition_delete_metadata(partition_delete(MARKED))
    rlmm.put_remote_partition_delete_metadata(partition_delete(MARKED))
    rlmm.put_remote_partition_delete_metadata(partition_delete(PARTITION_DELETE_STARTED))
    segments.move(segment, DELETE_STARTED, DELETE_FINISHED)  # segments go while it is deleted
    still_there = segments.upload(100, 199)
    assert listed(rlmm) == [still_there]

    rlmm.put_remote_partition_delete_metadata(partition_delete(PARTITION_DELETE_FINISHED))
    for lookup in (
        lambda: listed(rlmm),
        lambda: rlmm.remote_log_size(TIP, 0),
        lambda: rlmm.highest_offset_for_epoch(TIP, 0),
        lambda: rlmm.remote_log_segment_metadata(TIP, 0, 150),
    ):
        with pytest.raises(RemoteResourceNotFoundError):  # forgotten, as in Kafka: not empty
            lookup()
    with pytest.raises(RemoteResourceNotFoundError):
        rlmm.update_remote_log_segment_metadata(segments.update(still_there, DELETE_STARTED))
    assert listed(rlmm, tip=OTHER_TIP) == [kept]

    rlmm.put_remote_partition_delete_metadata(partition_delete(MARKED))  # a new deletion
    fresh = segments.upload(0, 9)
    assert listed(rlmm) == [fresh]


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ((), PARTITION_DELETE_STARTED),
        ((), PARTITION_DELETE_FINISHED),
        ((MARKED,), PARTITION_DELETE_FINISHED),
        ((MARKED, PARTITION_DELETE_STARTED), MARKED),
        ((MARKED, PARTITION_DELETE_STARTED, PARTITION_DELETE_FINISHED), PARTITION_DELETE_STARTED),
    ],
    ids=state_id,
)
def test_invalid_partition_delete_step_is_rejected(
    rlmm: RemoteLogMetadataManager,
    segments: Segments,
    path: tuple[RemotePartitionDeleteState, ...],
    target: RemotePartitionDeleteState,
) -> None:
    for state in path:
        rlmm.put_remote_partition_delete_metadata(partition_delete(state))
    segment = segments.upload(0, 99)

    with pytest.raises(InvalidStateTransitionError, match=target.name):
        rlmm.put_remote_partition_delete_metadata(partition_delete(target))

    assert listed(rlmm) == [segment], "a rejected step deletes nothing"
    if PARTITION_DELETE_STARTED in path and target is not PARTITION_DELETE_STARTED:
        rlmm.put_remote_partition_delete_metadata(partition_delete(PARTITION_DELETE_FINISHED))
        with pytest.raises(RemoteResourceNotFoundError):  # the deletion continued to its end
            listed(rlmm)


# --- transaction index and size -----------------------------------------------------------


def test_next_segment_with_txn_index_walks_forward_within_the_epoch(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    segments.upload(0, 99)
    segments.upload(100, 199)
    with_txn = segments.upload(200, 299, txn_idx_empty=False)
    also_txn = segments.upload(300, 399, txn_idx_empty=False)
    segments.upload(400, 499, {0: 400, 1: 450})
    next_epoch = segments.upload(500, 599, {1: 500}, txn_idx_empty=False)
    segments.add(600, 699, {1: 600}, txn_idx_empty=False)

    assert rlmm.next_segment_with_txn_index(TIP, 0, 0) == with_txn
    assert rlmm.next_segment_with_txn_index(TIP, 0, 150) == with_txn
    assert rlmm.next_segment_with_txn_index(TIP, 0, 299) == with_txn
    assert rlmm.next_segment_with_txn_index(TIP, 0, 300) == also_txn
    assert rlmm.next_segment_with_txn_index(TIP, 0, 400) is None, "epoch 1 is not walked"
    assert rlmm.next_segment_with_txn_index(TIP, 1, 450) == next_epoch
    assert rlmm.next_segment_with_txn_index(TIP, 1, 600) is None, "still copying"
    assert rlmm.next_segment_with_txn_index(TIP, 2, 0) is None


def test_next_segment_with_txn_index_agrees_with_the_runtime_default(
    plugin_manager: TierlogPluginManager, rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    without = metadata_facade(
        plugin_manager, [h for h in RLMM_HOOKS if h != "tierlog_next_segment_with_txn_index"]
    )
    segments.upload(0, 99)
    gap_before = segments.upload(100, 199)
    segments.upload(200, 299, txn_idx_empty=False)
    segments.upload(300, 399, {0: 300, 1: 350})
    segments.upload(400, 499, {1: 400}, txn_idx_empty=False)
    segments.move(gap_before, DELETE_STARTED)

    for epoch in (0, 1):
        for offset in range(0, 520, 25):
            assert rlmm.next_segment_with_txn_index(TIP, epoch, offset) == (
                without.next_segment_with_txn_index(TIP, epoch, offset)
            ), (epoch, offset)


def test_remote_log_size_sums_every_listed_segment_of_the_epoch(
    plugin_manager: TierlogPluginManager, rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    segments.upload(0, 99, size=1_000)
    spanning = segments.upload(100, 199, {0: 100, 1: 150}, size=2_000)
    segments.add(200, 299, {1: 200}, size=400)
    segments.move(segments.upload(300, 399, {1: 300}, size=30), DELETE_STARTED)
    gone = segments.upload(400, 499, {1: 400}, size=5)
    segments.move(gone, DELETE_STARTED, DELETE_FINISHED)
    segments.upload(0, 99, partition=OTHER_TIP, size=7)

    sizes = [rlmm.remote_log_size(TIP, epoch) for epoch in range(3)]
    assert sizes == [3_000, 2_430, 0]

    without = metadata_facade(
        plugin_manager, [h for h in RLMM_HOOKS if h != "tierlog_remote_log_size"]
    )
    assert [without.remote_log_size(TIP, epoch) for epoch in range(3)] == sizes
    segments.move(spanning, DELETE_STARTED, DELETE_FINISHED)
    assert [rlmm.remote_log_size(TIP, epoch) for epoch in range(3)] == [1_000, 430, 0]


# --- partition assignment and lifecycle ---------------------------------------------------


def test_leadership_changes_keep_what_is_known(
    manager: InMemoryRemoteLogMetadataManager,
    rlmm: RemoteLogMetadataManager,
    segments: Segments,
) -> None:
    segment = segments.upload(0, 99)
    rlmm.on_partition_leadership_changes(frozenset({TIP}), frozenset({OTHER_TIP}))
    assert manager.held_partitions() == {TIP, OTHER_TIP}
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) == segment
    assert listed(rlmm, tip=OTHER_TIP) == []
    assert rlmm.is_ready(TIP) and rlmm.is_ready(OTHER_TIP)

    rlmm.on_partition_leadership_changes(frozenset(), frozenset({TIP}))
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) == segment


def test_stopped_partitions_are_forgotten(
    manager: InMemoryRemoteLogMetadataManager,
    rlmm: RemoteLogMetadataManager,
    segments: Segments,
) -> None:
    segment = segments.upload(0, 99)
    kept = segments.upload(0, 99, partition=OTHER_TIP)
    rlmm.put_remote_partition_delete_metadata(partition_delete(MARKED))
    rlmm.on_stop_partitions(frozenset({TIP}))

    assert manager.held_partitions() == {OTHER_TIP}
    with pytest.raises(RemoteResourceNotFoundError):
        listed(rlmm)
    with pytest.raises(RemoteResourceNotFoundError):
        rlmm.highest_offset_for_epoch(TIP, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        rlmm.update_remote_log_segment_metadata(segments.update(segment, DELETE_STARTED))
    with pytest.raises(InvalidStateTransitionError):
        rlmm.put_remote_partition_delete_metadata(partition_delete(PARTITION_DELETE_STARTED))
    assert listed(rlmm, tip=OTHER_TIP) == [kept]


def test_close_releases_everything(
    plugin_manager: TierlogPluginManager,
    manager: InMemoryRemoteLogMetadataManager,
    rlmm: RemoteLogMetadataManager,
    segments: Segments,
) -> None:
    segments.upload(0, 99)
    rlmm.put_remote_partition_delete_metadata(partition_delete(MARKED, tip=OTHER_TIP))
    plugin_manager.hook.tierlog_close()
    assert manager.held_partitions() == frozenset()
    with pytest.raises(RemoteResourceNotFoundError):
        listed(rlmm)
    with pytest.raises(InvalidStateTransitionError):  # the deletion in progress is forgotten too
        rlmm.put_remote_partition_delete_metadata(
            partition_delete(PARTITION_DELETE_STARTED, tip=OTHER_TIP)
        )


def test_each_instance_has_its_own_state(segments: Segments) -> None:
    first, second = (
        metadata_facade(make_plugin_manager_with_memory(InMemoryRemoteLogMetadataManager()))
        for _ in range(2)
    )
    first.add_remote_log_segment_metadata(segments.new(0, 99))
    assert len(listed(first)) == 1
    with pytest.raises(RemoteResourceNotFoundError):
        listed(second)


# --- threads ------------------------------------------------------------------------------


def test_concurrent_writers_and_readers(rlmm: RemoteLogMetadataManager, segments: Segments) -> None:
    writers, per_writer = 4, 50
    start = threading.Barrier(writers + 1)
    done = threading.Event()
    failures: list[BaseException] = []

    def write(index: int) -> None:
        try:
            start.wait()
            for n in range(per_writer):
                base = (n * writers + index) * 10
                segment = segments.upload(base, base + 9)
                if n % 5 == 0:
                    segments.move(segment, DELETE_STARTED, DELETE_FINISHED)
        except BaseException as err:  # reported by the main thread
            failures.append(err)

    def read() -> None:
        try:
            start.wait()
            while not done.is_set():
                for segment in rlmm.list_remote_log_segments(TIP, 0):
                    assert segment.state in (STARTED, FINISHED, DELETE_STARTED)
                rlmm.remote_log_size(TIP, 0)
        except BaseException as err:
            failures.append(err)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    reader = threading.Thread(target=read)
    for thread in [*threads, reader]:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    reader.join()

    assert failures == []
    kept = listed(rlmm, 0)
    assert len(kept) == writers * per_writer * 4 // 5
    assert all(s.state is FINISHED for s in kept)
    assert rlmm.highest_offset_for_epoch(TIP, 0) == writers * per_writer * 10 - 1
    for segment in kept:
        assert rlmm.remote_log_segment_metadata(TIP, 0, segment.start_offset) == segment
