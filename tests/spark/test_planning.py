"""Planning reads from remote log metadata: every tiered offset once, from the upload in service.

No Spark session is needed: the caches are built here event by event, as the metadata topic
would replay them.
"""

from __future__ import annotations

import itertools

from tierlog.metadata.cache import RemoteLogMetadataCache
from tierlog.model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    Uuid,
)
from tierlog_spark.planning import Bounds, plan_reads, tiered_ranges

TIP = TopicIdPartition.of(Uuid.random(), "orders", 0)
_clock = itertools.count(1_000)


def _upload(
    cache: RemoteLogMetadataCache,
    start: int,
    end: int,
    epochs: dict[int, int] | None = None,
    *,
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
    max_timestamp: int = 0,
    txn_idx_empty: bool = True,
) -> RemoteLogSegmentMetadata:
    """A segment uploaded to ``cache`` and moved to ``state``."""
    metadata = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(cache.topic_id_partition),
        start,
        end,
        max_timestamp,
        0,
        next(_clock),
        100,
        epochs or {0: start},
        txn_idx_empty=txn_idx_empty,
    )
    cache.add_copy_in_progress_segment(metadata)
    for target in RemoteLogSegmentState:
        if target.value > state.value or target is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            continue
        update = RemoteLogSegmentMetadataUpdate(
            metadata.remote_log_segment_id, next(_clock), None, target, 0
        )
        cache.update_remote_log_segment_metadata(update)
    return metadata


def _spans(cache: RemoteLogMetadataCache) -> list[tuple[int, int, RemoteLogSegmentId]]:
    return [
        (r.first_offset, r.last_offset, r.segment.remote_log_segment_id)
        for r in tiered_ranges(cache)
    ]


def _id(metadata: RemoteLogSegmentMetadata) -> RemoteLogSegmentId:
    return metadata.remote_log_segment_id


def test_contiguous_segments_are_read_one_range_each() -> None:
    cache = RemoteLogMetadataCache(TIP)
    a, b = _upload(cache, 0, 49), _upload(cache, 50, 99)
    assert _spans(cache) == [(0, 49, _id(a)), (50, 99, _id(b))]


def test_only_finished_segments_are_read() -> None:
    cache = RemoteLogMetadataCache(TIP)
    done = _upload(cache, 0, 49)
    _upload(cache, 50, 99, state=RemoteLogSegmentState.COPY_SEGMENT_STARTED)
    _upload(cache, 100, 149, state=RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
    assert _spans(cache) == [(0, 49, _id(done))]


def test_a_superseded_upload_is_not_read() -> None:
    cache = RemoteLogMetadataCache(TIP)
    _upload(cache, 0, 49)
    again = _upload(cache, 0, 49)
    later = _upload(cache, 50, 99)
    assert _spans(cache) == [(0, 49, _id(again)), (50, 99, _id(later))]


def test_an_upload_of_the_same_start_serves_both_its_epochs_as_one_range() -> None:
    cache = RemoteLogMetadataCache(TIP)
    first = _upload(cache, 0, 49)
    _upload(cache, 50, 99)
    new_leader = _upload(cache, 50, 120, {0: 50, 1: 70})
    assert _spans(cache) == [(0, 49, _id(first)), (50, 120, _id(new_leader))]


def test_a_leader_that_truncated_and_uploaded_again_replaces_the_old_tail() -> None:
    cache = RemoteLogMetadataCache(TIP)
    a = _upload(cache, 0, 49)
    b = _upload(cache, 50, 99)  # epoch 0 tiered up to 99; the new leader kept only up to 79
    c = _upload(cache, 80, 130, {1: 80})
    assert _spans(cache) == [(0, 49, _id(a)), (50, 79, _id(b)), (80, 130, _id(c))]


def test_a_segment_holding_several_epochs_is_one_range() -> None:
    cache = RemoteLogMetadataCache(TIP)
    both = _upload(cache, 0, 99, {0: 0, 2: 40, 3: 60})
    assert _spans(cache) == [(0, 99, _id(both))]


def test_bounds_cut_ranges_and_skip_segments_older_than_the_minimum_timestamp() -> None:
    cache = RemoteLogMetadataCache(TIP)
    _upload(cache, 0, 49, max_timestamp=1_000)
    b = _upload(cache, 50, 99, max_timestamp=2_000)
    c = _upload(cache, 100, 149, max_timestamp=3_000)
    planned = plan_reads({TIP: cache}, bounds=Bounds(first_offset=20, last_offset=120))
    assert [(r.first_offset, r.last_offset) for r in planned] == [(20, 49), (50, 99), (100, 120)]
    planned = plan_reads({TIP: cache}, bounds=Bounds(min_timestamp=1_500))
    assert [_id(r.segment) for r in planned] == [_id(b), _id(c)]
    assert plan_reads({TIP: cache}, bounds=Bounds(first_offset=10, last_offset=9)) == []


def test_topics_and_partitions_choose_what_is_planned() -> None:
    other = TopicIdPartition.of(TIP.topic_id, "orders", 1)
    elsewhere = TopicIdPartition.of(Uuid.random(), "payments", 0)
    caches = {tip: RemoteLogMetadataCache(tip) for tip in (TIP, other, elsewhere)}
    for cache in caches.values():
        _upload(cache, 0, 9)
    planned = plan_reads(caches, topics={"orders"}, partitions={1})
    assert [r.topic_id_partition for r in planned] == [other]
    assert len(plan_reads(caches)) == 3


def test_a_recreated_topic_is_read_under_its_newest_id() -> None:
    old = TopicIdPartition.of(Uuid.random(), "orders", 0)
    new = TopicIdPartition.of(Uuid.random(), "orders", 0)
    caches = {old: RemoteLogMetadataCache(old), new: RemoteLogMetadataCache(new)}
    _upload(caches[old], 0, 9)
    _upload(caches[new], 0, 4)
    assert [r.topic_id_partition for r in plan_reads(caches)] == [new]


def test_read_committed_ranges_carry_the_later_transaction_indexes() -> None:
    cache = RemoteLogMetadataCache(TIP)
    _upload(cache, 0, 9, txn_idx_empty=True)
    b = _upload(cache, 10, 19, txn_idx_empty=False)
    _upload(cache, 20, 29, txn_idx_empty=True)
    d = _upload(cache, 30, 39, txn_idx_empty=False)
    planned = plan_reads({TIP: cache}, read_committed=True)
    chains = [[_id(s) for s in r.txn_segments] for r in planned]
    assert chains == [[_id(b), _id(d)], [_id(b), _id(d)], [_id(d)], [_id(d)]]
    assert all(r.txn_segments == () for r in plan_reads({TIP: cache}))
