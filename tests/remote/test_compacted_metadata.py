"""``__remote_log_metadata`` is compacted: keyed events, tombstones after a finished deletion,
a replay bounded by the live segments once the log cleaner has run, and a topic written before
events were keyed rewritten once without losing what it describes."""

from __future__ import annotations

from pathlib import Path

import pytest
from tierlog.client import Consumer, Producer
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import RemoteResourceNotFoundError
from tierlog.metadata.checkpoint import CHECKPOINT_FILE_NAME
from tierlog.metadata.keys import event_key, partition_keys, segment_keys
from tierlog.metadata.serde import MetadataEvent, decode_event, encode_event
from tierlog.model import (
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    TopicPartition,
    Uuid,
)

from tests.metadata.support import (
    DELETE_FINISHED,
    DELETE_STARTED,
    FINISHED,
    OTHER_TIP,
    STARTED,
    TIP,
    Segments,
)
from tests.waiting import wait_until

from .test_topic_metadata import TOPIC, answers, facade_of, hold, manager_of, topic_settings

Record = tuple[int, bytes | None, bytes | None]


def _records(cluster: EmbeddedCluster) -> list[Record]:
    """(offset, key, value) of every record of the one metadata partition."""
    tp = TopicPartition(TOPIC, 0)
    consumer = Consumer(cluster.transport, {"auto.offset.reset": "earliest"})
    consumer.assign([tp])
    (end,) = consumer.end_offsets([tp]).values()
    found: list[Record] = []
    while consumer.position(tp) < end:
        found += [(r.offset, r.key, r.value) for r in consumer.poll(500)]
    consumer.close()
    return found


def _compacted(records: list[Record]) -> list[Record]:
    """What a cleaner leaves once every tombstone is past its delete horizon."""
    latest = {key: offset for offset, key, _ in records}
    return [r for r in records if latest[r[1]] == r[0] and r[2] is not None]


def _delete(
    tip: TopicIdPartition, state: RemotePartitionDeleteState
) -> RemotePartitionDeleteMetadata:
    return RemotePartitionDeleteMetadata(tip, state, 1_700_000_000_000, 0)


def test_events_are_keyed_and_a_finished_deletion_is_followed_by_its_tombstones(
    tmp_path: Path,
) -> None:
    with EmbeddedCluster(1, tmp_path / "data", topic_settings(tmp_path, 1)) as cluster:
        assert manager_of(cluster).wait_initialized(30)
        rlmm = facade_of(cluster)
        hold(rlmm, TIP, OTHER_TIP)
        segments = Segments(rlmm)
        gone = segments.upload(0, 99)
        segments.move(gone, DELETE_STARTED, DELETE_FINISHED)
        kept = segments.upload(100, 199)
        orphaned = segments.upload(0, 49, partition=OTHER_TIP)  # never deleted on its own
        for state in RemotePartitionDeleteState:
            rlmm.put_remote_partition_delete_metadata(_delete(OTHER_TIP, state))
        records = _records(cluster)

    events = [(key, decode_event(value)) for _, key, value in records if value is not None]
    assert all(key == event_key(event) for key, event in events)
    tombstones = [key for _, key, value in records if value is None]
    assert tombstones == segment_keys(gone.remote_log_segment_id) + partition_keys(
        OTHER_TIP, [orphaned.remote_log_segment_id]
    )
    survivors: list[MetadataEvent] = [decode_event(v or b"") for _, _, v in _compacted(records)]
    assert [(e.remote_log_segment_id, e.state) for e in survivors] == [  # type: ignore[union-attr]
        (kept.remote_log_segment_id, state) for state in (STARTED, FINISHED)
    ]


def test_the_cleaned_topic_replays_only_the_live_segments(tmp_path: Path) -> None:
    """Ten retention cycles later, the cleaned topic holds the live segments' events only, and
    a cold restart rebuilds every answer from them; a fully deleted partition replays nothing."""
    empty_later = TopicIdPartition.of(Uuid.random(), "emptied", 0)
    settings = topic_settings(tmp_path, 1, **{"log.cleaner.backoff.ms": 50})
    with EmbeddedCluster(1, tmp_path / "data", settings) as cluster:
        assert manager_of(cluster).wait_initialized(30)
        cluster.controller.alter_topic_configs(
            TOPIC,
            {
                "segment.bytes": "8192",
                "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "0",
            },
        )
        rlmm = facade_of(cluster)
        hold(rlmm, TIP, empty_later)
        segments = Segments(rlmm)
        live = []
        for cycle in range(10):  # each cycle tiers 5 segments and expires the 5 before them
            base = cycle * 500
            uploaded = [segments.upload(base + n * 100, base + n * 100 + 99) for n in range(5)]
            for old in live:
                segments.move(old, DELETE_STARTED, DELETE_FINISHED)
            live = uploaded
            for n in range(3):
                done = segments.upload(base + n * 10, base + n * 10 + 9, partition=empty_later)
                segments.move(done, DELETE_STARTED, DELETE_FINISHED)
        before = answers(rlmm, TIP)
        hold(rlmm, OTHER_TIP)
        plog = cluster.broker(0).partition(TopicPartition(TOPIC, 0)).log  # type: ignore[union-attr]
        written = plog.log_end_offset
        # Two cleanings: the first sets the tombstones' delete horizon, a later one drops them.
        # Each needs a rolled segment to clean: writes of a partition made and deleted roll one.
        for _ in range(2):
            dirty_from = plog.segments()[-1].base_offset
            while plog.segments()[-1].base_offset == dirty_from:
                done = segments.upload(0, 9, partition=OTHER_TIP)
                segments.move(done, DELETE_STARTED, DELETE_FINISHED)
            rolled = plog.segments()[-1].base_offset
            wait_until(lambda r=rolled: (plog.cleaner_checkpoint or 0) >= r, "a cleaning", 60)
        records = _records(cluster)
        clean_below = plog.cleaner_checkpoint or 0
    assert len(records) < written / 4
    cleaned = [r for r in records if r[0] < clean_below]
    described = {decode_event(v).topic_id_partition for _, _, v in cleaned if v is not None}
    assert described <= {TIP}, "only the live segments of TIP are left in the cleaned part"
    assert sum(v is not None for _, _, v in cleaned) <= 2 * len(live)
    emptied = empty_later.topic_id.value
    assert not [k for _, k, _ in cleaned if k and k[1:17] == emptied], "its tombstones went too"

    (tmp_path / "data" / "broker-0" / "logs" / CHECKPOINT_FILE_NAME).unlink()
    with EmbeddedCluster(1, tmp_path / "data", settings) as cluster:
        assert manager_of(cluster).wait_initialized(30)
        rlmm = facade_of(cluster)
        hold(rlmm, TIP, empty_later)
        assert answers(rlmm, TIP) == before
        assert list(rlmm.list_remote_log_segments(empty_later)) == []


def test_a_topic_written_before_events_were_keyed_is_rewritten_then_compacted(
    tmp_path: Path,
) -> None:
    marked = TopicIdPartition.of(Uuid.random(), "marked", 0)
    segments = Segments()
    gone, kept, copying, other = (
        segments.new(0, 99),
        segments.new(100, 199),
        segments.new(200, 299),
        segments.new(0, 9, partition=OTHER_TIP),
    )
    history: list[MetadataEvent] = [
        gone,
        segments.update(gone, FINISHED),
        kept,
        segments.update(gone, DELETE_STARTED),
        segments.update(kept, FINISHED),
        segments.update(gone, DELETE_FINISHED),
        other,
        copying,
        _delete(marked, RemotePartitionDeleteState.DELETE_PARTITION_MARKED),
        *(_delete(OTHER_TIP, state) for state in RemotePartitionDeleteState),
    ]
    # As an earlier version left it: a delete-policy topic of unkeyed events.
    with EmbeddedCluster(1, tmp_path / "data") as cluster:
        cluster.controller.create_topic(
            TOPIC, 1, 1, {"cleanup.policy": "delete", "retention.ms": "-1"}, internal=True
        )
        producer = Producer(cluster.transport, internal_topics_allowed=True)
        for event in history:
            producer.send(TOPIC, encode_event(event), partition=0).result(timeout=30)
        producer.close()

    live = [history[i] for i in (2, 4, 7, 8)]  # kept twice, copying, the marked partition
    with EmbeddedCluster(1, tmp_path / "data", topic_settings(tmp_path, 1)) as cluster:
        assert manager_of(cluster).wait_initialized(30)
        image = cluster.controller.image().topic(TOPIC)
        assert image is not None and image.configs["cleanup.policy"] == "compact"
        records = _records(cluster)
        assert [decode_event(v or b"") for _, _, v in records[: len(history)]] == history
        rewritten = records[len(history) :]
        assert [(k, decode_event(v or b"")) for _, k, v in rewritten] == [
            (event_key(e), e) for e in live
        ]
        rlmm = facade_of(cluster)
        hold(rlmm, TIP, OTHER_TIP, marked)  # replays the old events, then their repeats
        expected = answers(rlmm, TIP)
        assert [s.remote_log_segment_id for s in expected["all"]] == [
            kept.remote_log_segment_id,
            copying.remote_log_segment_id,
        ]
        with pytest.raises(RemoteResourceNotFoundError, match="deleted"):
            list(rlmm.list_remote_log_segments(OTHER_TIP))

    # Once the cleaner has dropped the unkeyed events, the repeats alone give the same answers.
    with EmbeddedCluster(1, tmp_path / "again", topic_settings(tmp_path, 1)) as cluster:
        assert manager_of(cluster).wait_initialized(30)
        producer = Producer(cluster.transport, internal_topics_allowed=True)
        for _, key, value in rewritten:
            producer.send(TOPIC, value, key=key, partition=0).result(timeout=30)
        producer.close()
        rlmm = facade_of(cluster)
        hold(rlmm, TIP, OTHER_TIP, marked)
        assert answers(rlmm, TIP) == expected
        assert list(rlmm.list_remote_log_segments(OTHER_TIP)) == []
    # And a second start finds the topic compacted and leaves it as it is.
    with EmbeddedCluster(1, tmp_path / "data", topic_settings(tmp_path, 1)) as cluster:
        assert manager_of(cluster).wait_initialized(30)
        assert len(_records(cluster)) == len(records)
