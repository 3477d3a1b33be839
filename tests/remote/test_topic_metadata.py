"""The topic-based metadata manager inside a running broker, through the runtime's SPI facade.

The contract tests written for the in-memory manager run here too (imported below), so both
managers give the same answers; the tests after them cover what only a manager backed by the
internal topic has: the topic itself, restarts with and without the checkpoint, metadata
partitions shared by several user partitions, and events it cannot read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tierlog.client import Consumer, Producer
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    InvalidConfigError,
    InvalidStateTransitionError,
    InvalidTopicError,
    RemoteResourceNotFoundError,
    TopicAuthorizationFailedError,
)
from tierlog.metadata.checkpoint import CHECKPOINT_FILE_NAME
from tierlog.metadata.keys import event_key
from tierlog.metadata.partitioner import metadata_partition
from tierlog.metadata.serde import decode_event, encode_event
from tierlog.metadata.topic_based import TopicBasedRemoteLogMetadataManager
from tierlog.model import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    TopicIdPartition,
    TopicPartition,
    Uuid,
)
from tierlog.server import protocol as p
from tierlog.spi import RemoteLogMetadataManager

from tests.metadata.support import (
    DELETE_FINISHED,
    DELETE_STARTED,
    FINISHED,
    OTHER_TIP,
    STARTED,
    TIP,
    Segments,
)
from tests.metadata.test_memory_manager import (  # noqa: F401 - collected here as well
    test_adding_a_known_segment_again_is_rejected_once_it_moved_on,
    test_copy_may_be_abandoned_and_deleted,
    test_duplicate_upload_supersedes_the_older,
    test_highest_offset_only_grows,
    test_invalid_partition_delete_step_is_rejected,
    test_invalid_transition_is_rejected_and_changes_nothing,
    test_lifecycle_over_several_epochs,
    test_listing_is_sorted_by_start_offset,
    test_next_segment_with_txn_index_walks_forward_within_the_epoch,
    test_overlapping_uploads_serve_the_newer_range,
    test_partition_delete_finished_forgets_the_partition,
    test_partitions_are_independent,
    test_repeating_a_state_is_a_harmless_retry,
    test_retried_finish_does_not_bring_back_a_superseded_upload,
    test_reupload_below_the_highest_offset_supersedes_nothing,
    test_same_start_larger_upload_supersedes,
    test_segment_spanning_epochs_answers_each_epoch_for_its_own_range,
    test_superseded_segment_is_deleted_without_disturbing_the_newer,
    test_superset_upload_supersedes_every_covered_segment,
    test_update_for_an_unknown_segment_is_not_found,
)
from tests.server.conftest import batch
from tests.waiting import wait_until

from .conftest import tiered_settings

TOPIC = "__remote_log_metadata"


def topic_settings(tmp_path: Path, partitions: int = 3, **extra: object) -> dict[str, object]:
    return tiered_settings(
        tmp_path / "remote",
        **{
            "remote.log.metadata.manager.name": "topic",
            "rlmm.config.remote.log.metadata.topic.num.partitions": partitions,
            **extra,
        },
    )


def manager_of(cluster: EmbeddedCluster, broker_id: int = 0) -> TopicBasedRemoteLogMetadataManager:
    host = cluster.broker(broker_id).plugin_host
    assert host is not None
    plugin = host.plugin_manager.get_plugin("topic")
    assert isinstance(plugin, TopicBasedRemoteLogMetadataManager)
    return plugin


def facade_of(cluster: EmbeddedCluster, broker_id: int = 0) -> RemoteLogMetadataManager:
    host = cluster.broker(broker_id).plugin_host
    assert host is not None
    return host.metadata


def hold(rlmm: RemoteLogMetadataManager, *partitions: TopicIdPartition) -> None:
    """Make the broker hold ``partitions`` (as after becoming their leader) and wait until ready."""
    rlmm.on_partition_leadership_changes(frozenset(partitions), frozenset())
    wait_until(lambda: all(rlmm.is_ready(tp) for tp in partitions), "metadata ready")


def answers(rlmm: RemoteLogMetadataManager, tip: TopicIdPartition) -> dict[str, Any]:
    """Every lookup's answer for a partition, to compare two managers' states."""
    listed = list(rlmm.list_remote_log_segments(tip))
    epochs = sorted({e for s in listed for e, _ in s.segment_leader_epochs})
    offsets = sorted({o for s in listed for o in (s.start_offset, s.end_offset)})
    return {
        "all": sorted(listed, key=lambda s: (s.start_offset, str(s.remote_log_segment_id.id))),
        "by_epoch": {e: list(rlmm.list_remote_log_segments(tip, e)) for e in epochs},
        "highest": {e: rlmm.highest_offset_for_epoch(tip, e) for e in epochs},
        "lookups": {
            (e, o): rlmm.remote_log_segment_metadata(tip, e, o) for e in epochs for o in offsets
        },
        "size": {e: rlmm.remote_log_size(tip, e) for e in epochs},
    }


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(1, tmp_path / "data", topic_settings(tmp_path)) as running:
        assert manager_of(running).wait_initialized(30)
        yield running


@pytest.fixture
def rlmm(cluster: EmbeddedCluster) -> RemoteLogMetadataManager:
    facade = facade_of(cluster)
    hold(facade, TIP, OTHER_TIP)
    return facade


@pytest.fixture
def segments(rlmm: RemoteLogMetadataManager) -> Segments:
    return Segments(rlmm)


# --- the internal topic -------------------------------------------------------------------


def test_internal_topic_is_created_with_its_settings(cluster: EmbeddedCluster) -> None:
    image = cluster.controller.image().topic(TOPIC)
    assert image is not None
    assert len(image.partitions) == 3
    assert image.configs["retention.ms"] == "-1"
    assert image.configs["remote.storage.enable"] == "false"
    assert image.configs["cleanup.policy"] == "compact"


def test_clients_cannot_delete_write_or_break_the_topic_and_tiering_goes_on(
    cluster: EmbeddedCluster, rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    before = segments.upload(0, 99)
    send = cluster.transport.send
    topic = cluster.controller.image().topic(TOPIC)
    assert topic is not None

    deleted = send(0, p.DeleteTopicsRequest([TOPIC])).responses[0]
    forged = send(
        topic.partitions[0].leader,
        p.ProduceRequest(
            1, 5000, [p.TopicProduceData(TOPIC, [p.PartitionProduceData(0, batch())])]
        ),
    ).responses[0]
    trimmed = send(
        0, p.DeleteRecordsRequest([p.DeleteRecordsTopic(TOPIC, [p.DeleteRecordsPartition(0, -1)])])
    ).topics[0]
    compacted = send(
        0,
        p.IncrementalAlterConfigsRequest(
            [
                p.AlterConfigsResource(
                    p.ResourceType.TOPIC,
                    TOPIC,
                    [p.AlterableConfig("cleanup.policy", p.AlterConfigOp.SET, "delete")],
                )
            ]
        ),
    ).responses[0]

    assert deleted.error_code == TopicAuthorizationFailedError.code
    assert forged.partition_responses[0].error_code == InvalidTopicError.code
    assert trimmed.partitions[0].error_code == InvalidTopicError.code
    assert compacted.error_code == InvalidConfigError.code
    after = segments.upload(100, 199)  # published through the runtime's own path
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) == before
    assert rlmm.remote_log_segment_metadata(TIP, 0, 150) == after
    test_internal_topic_is_created_with_its_settings(cluster)


def test_events_go_to_the_documented_metadata_partition(
    cluster: EmbeddedCluster, rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    done = segments.upload(0, 99)
    segments.upload(0, 9, partition=OTHER_TIP)
    consumer = Consumer(cluster.transport, {"auto.offset.reset": "earliest"})
    consumer.assign(TopicPartition(TOPIC, mp) for mp in range(3))
    events: dict[int, list[Any]] = {}
    deadline_records = 4
    while sum(map(len, events.values())) < deadline_records:
        for record in consumer.poll(1000):
            events.setdefault(record.partition, []).append(decode_event(record.value or b""))
    consumer.close()
    expected = metadata_partition(TIP, 3)
    mine = [e for e in events[expected] if e.remote_log_segment_id.topic_id_partition == TIP]
    assert [type(e) for e in mine] == [RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate]
    assert mine[0].remote_log_segment_id == done.remote_log_segment_id
    assert mine[1].state is FINISHED
    other = metadata_partition(OTHER_TIP, 3)
    assert any(e.remote_log_segment_id.topic_id_partition == OTHER_TIP for e in events[other])


def test_a_partition_count_that_differs_from_the_topic_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with EmbeddedCluster(1, tmp_path / "data", topic_settings(tmp_path, 3)) as running:
        assert manager_of(running).wait_initialized(30)
    settings = topic_settings(tmp_path, 5)
    with caplog.at_level(logging.ERROR), EmbeddedCluster(1, tmp_path / "data", settings) as c:
        manager = manager_of(c)
        wait_until(lambda: manager.initialization_error is not None, "initialization to fail")
        assert isinstance(manager.initialization_error, InvalidConfigError)
        assert "has 3 partitions" in str(manager.initialization_error)
        assert not manager.initialized
        assert not facade_of(c).is_ready(TIP)
    assert any("Tiering is stopped" in r.getMessage() for r in caplog.records)


def test_add_takes_only_copy_segment_started(
    cluster: EmbeddedCluster, rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    with pytest.raises(InvalidStateTransitionError):  # the hook itself, past the facade's check
        manager_of(cluster).tierlog_add_remote_log_segment_metadata(
            remote_log_segment_metadata=segments.new(0, 99, state=FINISHED)
        )
    assert list(rlmm.list_remote_log_segments(TIP)) == []


def test_remote_log_size_sums_every_listed_segment_of_the_epoch(
    rlmm: RemoteLogMetadataManager, segments: Segments
) -> None:
    segments.upload(0, 99, size=1_000)
    segments.upload(100, 199, {0: 100, 1: 150}, size=2_000)
    segments.add(200, 299, {1: 200}, size=400)
    segments.move(segments.upload(300, 399, {1: 300}, size=30), DELETE_STARTED)
    segments.move(segments.upload(400, 499, {1: 400}, size=5), DELETE_STARTED, DELETE_FINISHED)
    segments.upload(0, 99, partition=OTHER_TIP, size=7)
    assert [rlmm.remote_log_size(TIP, epoch) for epoch in range(3)] == [3_000, 2_430, 0]


def test_a_partition_not_held_is_not_found_and_its_events_are_published(
    rlmm: RemoteLogMetadataManager,
) -> None:
    """Only a held partition that is loading is "not ready"; any other is unknown here, and a
    write for it is published for the broker that will hold it (as Kafka's manager does)."""
    stranger = TopicIdPartition.of(Uuid.random(), "elsewhere", 0)
    assert not rlmm.is_ready(stranger)
    with pytest.raises(RemoteResourceNotFoundError, match="neither leads nor follows"):
        rlmm.highest_offset_for_epoch(stranger, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        list(rlmm.list_remote_log_segments(stranger, None))
    with pytest.raises(RemoteResourceNotFoundError):
        rlmm.remote_log_size(stranger, 0)
    segments = Segments(rlmm)
    finished = segments.upload(0, 9, partition=stranger, size=10)
    hold(rlmm, stranger)
    assert list(rlmm.list_remote_log_segments(stranger, None)) == [finished]
    assert rlmm.remote_log_size(stranger, 0) == 10


# --- restarts -----------------------------------------------------------------------------


def _populate(segments: Segments) -> None:
    s0 = segments.upload(0, 99, {0: 0})
    segments.upload(100, 199, {0: 100, 1: 150})
    segments.upload(150, 249, {1: 150})  # supersedes part of the one before
    segments.add(250, 299, {1: 250})  # still copying
    segments.move(s0, DELETE_STARTED, DELETE_FINISHED)
    segments.upload(0, 49, partition=OTHER_TIP)


@pytest.mark.parametrize("checkpoint", [True, False], ids=["checkpoint", "cold"])
def test_restart_rebuilds_identical_answers(tmp_path: Path, checkpoint: bool) -> None:
    with EmbeddedCluster(1, tmp_path / "data", topic_settings(tmp_path)) as running:
        assert manager_of(running).wait_initialized(30)
        before_rlmm = facade_of(running)
        hold(before_rlmm, TIP, OTHER_TIP)
        _populate(Segments(before_rlmm))
        before = {tip: answers(before_rlmm, tip) for tip in (TIP, OTHER_TIP)}
    saved = tmp_path / "data" / "broker-0" / "logs" / CHECKPOINT_FILE_NAME
    assert saved.exists(), "close writes the checkpoint"
    if not checkpoint:
        saved.unlink()
    with EmbeddedCluster(1, tmp_path / "data", topic_settings(tmp_path)) as running:
        assert manager_of(running).wait_initialized(30)
        after_rlmm = facade_of(running)
        hold(after_rlmm, TIP, OTHER_TIP)
        assert {tip: answers(after_rlmm, tip) for tip in (TIP, OTHER_TIP)} == before
        # and it carries on from there
        Segments(after_rlmm).upload(300, 399, {2: 300})
        assert after_rlmm.highest_offset_for_epoch(TIP, 2) == 399


def test_a_corrupt_checkpoint_is_ignored_and_the_topic_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with EmbeddedCluster(1, tmp_path / "data", topic_settings(tmp_path)) as running:
        assert manager_of(running).wait_initialized(30)
        rlmm = facade_of(running)
        hold(rlmm, TIP, OTHER_TIP)
        _populate(Segments(rlmm))
        before = answers(rlmm, TIP)
    saved = tmp_path / "data" / "broker-0" / "logs" / CHECKPOINT_FILE_NAME
    saved.write_bytes(saved.read_bytes()[:-7] + b"garbage")
    settings = topic_settings(tmp_path)
    with caplog.at_level(logging.WARNING), EmbeddedCluster(1, tmp_path / "data", settings) as c:
        assert manager_of(c).wait_initialized(30)
        rlmm = facade_of(c)
        hold(rlmm, TIP)
        assert answers(rlmm, TIP) == before
    assert any("checkpoint" in r.getMessage() for r in caplog.records)


# --- several user partitions on one metadata partition ------------------------------------


def test_partitions_sharing_a_metadata_partition_registered_before_and_after(
    tmp_path: Path,
) -> None:
    """One metadata partition for all: a partition registered later replays the events it
    needs from further back, without applying anything twice for the ones already held."""
    third = TopicIdPartition.of(Uuid.random(), "third", 0)
    empty = TopicIdPartition.of(Uuid.random(), "empty", 0)
    settings = topic_settings(tmp_path, 1)
    with EmbeddedCluster(1, tmp_path / "data", settings) as running:
        assert manager_of(running).wait_initialized(30)
        rlmm = facade_of(running)
        hold(rlmm, TIP, OTHER_TIP, third)
        segments = Segments(rlmm)
        _populate(segments)
        segments.upload(0, 9, partition=third)
        expected = {tip: answers(rlmm, tip) for tip in (TIP, OTHER_TIP, third)}
    (tmp_path / "data" / "broker-0" / "logs" / CHECKPOINT_FILE_NAME).unlink()

    with EmbeddedCluster(1, tmp_path / "data", settings) as running:
        assert manager_of(running).wait_initialized(30)
        rlmm = facade_of(running)
        hold(rlmm, TIP)  # registered first: reads the whole metadata partition
        assert answers(rlmm, TIP) == expected[TIP]
        assert not rlmm.is_ready(OTHER_TIP)
        Segments(rlmm).upload(500, 599, {3: 500})  # the shared partition moves on
        expected[TIP] = answers(rlmm, TIP)

        hold(rlmm, OTHER_TIP, third, empty)  # registered after their events were published
        assert answers(rlmm, OTHER_TIP) == expected[OTHER_TIP]
        assert answers(rlmm, third) == expected[third]
        assert answers(rlmm, TIP) == expected[TIP], "nothing applied twice"
        assert list(rlmm.list_remote_log_segments(empty)) == []


# --- unreadable events --------------------------------------------------------------------


def test_an_event_in_an_unknown_format_is_skipped_with_an_error(
    cluster: EmbeddedCluster,
    rlmm: RemoteLogMetadataManager,
    segments: Segments,
    caplog: pytest.LogCaptureFixture,
) -> None:
    future_version = bytes([99]) + encode_event(segments.new(0, 9))[1:]
    # As a newer runtime's writer would: only the internal path may write the topic.
    producer = Producer(cluster.transport, internal_topics_allowed=True)
    target = metadata_partition(TIP, 3)
    sent = producer.send(TOPIC, future_version, key=b"newer", partition=target).result(timeout=30)
    producer.close()
    with caplog.at_level(logging.ERROR):
        done = segments.upload(10, 19)  # consumed after the unreadable one
    assert rlmm.remote_log_segment_metadata(TIP, 0, 15) == done
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"offset {sent.offset}" in m and "99" in m for m in messages), messages


def test_an_invalid_transition_in_the_topic_is_dropped_with_a_log_line(
    cluster: EmbeddedCluster,
    rlmm: RemoteLogMetadataManager,
    segments: Segments,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Replayed events were already published: an invalid one is logged and skipped, as
    Kafka's cache does, while the same transition asked for directly keeps raising."""
    started = segments.add(0, 9)
    jump = segments.update(started, DELETE_FINISHED)  # COPY_SEGMENT_STARTED cannot go there
    producer = Producer(cluster.transport, internal_topics_allowed=True)
    sent = producer.send(
        TOPIC, encode_event(jump), key=event_key(jump), partition=metadata_partition(TIP, 3)
    )
    offset = sent.result(timeout=30).offset
    producer.close()
    with caplog.at_level(logging.WARNING):
        done = segments.move(started, FINISHED)  # consumed after the invalid one
    assert rlmm.remote_log_segment_metadata(TIP, 0, 5) == done
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"offset {offset}" in m and "DELETE_SEGMENT_FINISHED" in m for m in messages)
    with pytest.raises(InvalidStateTransitionError):
        rlmm.update_remote_log_segment_metadata(segments.update(done, STARTED))
    assert rlmm.remote_log_segment_metadata(TIP, 0, 5) == done


def test_events_replayed_for_a_newly_held_partition_that_do_not_apply_are_logged(
    cluster: EmbeddedCluster, rlmm: RemoteLogMetadataManager, caplog: pytest.LogCaptureFixture
) -> None:
    """Replaying history, an update whose add is gone and an invalid transition are each
    dropped with a log line, and the rest of the history still applies."""
    later = TopicIdPartition.of(Uuid.random(), "later", 0)
    segments = Segments(rlmm)
    orphan = segments.new(0, 9, partition=later)
    started = segments.new(10, 19, partition=later)
    kept = segments.new(20, 29, partition=later)
    producer = Producer(cluster.transport, internal_topics_allowed=True)
    target = metadata_partition(later, 3)
    for event in (
        segments.update(orphan, FINISHED),
        started,
        segments.update(started, DELETE_FINISHED),
        kept,
    ):
        producer.send(TOPIC, encode_event(event), key=event_key(event), partition=target).result(
            timeout=30
        )
    producer.close()
    with caplog.at_level(logging.WARNING):
        hold(rlmm, later)
    assert list(rlmm.list_remote_log_segments(later, None)) == [started, kept]
    messages = [r.getMessage() for r in caplog.records]
    assert any(str(orphan.remote_log_segment_id) in m for m in messages), messages
    assert any("DELETE_SEGMENT_FINISHED" in m and "later" in m for m in messages), messages


def test_a_partition_it_starts_leading_is_ready_only_after_catching_up_again(
    cluster: EmbeddedCluster,
) -> None:
    """A new leader must see what its predecessor tiered before deciding what is left to tier;
    a leadership it already had changes nothing."""
    rlmm = facade_of(cluster)
    rlmm.on_partition_leadership_changes(frozenset(), frozenset({TIP}))
    wait_until(lambda: rlmm.is_ready(TIP), "ready as a follower")
    rlmm.on_partition_leadership_changes(frozenset({TIP}), frozenset())
    assert not rlmm.is_ready(TIP)
    wait_until(lambda: rlmm.is_ready(TIP), "ready as the leader")
    rlmm.on_partition_leadership_changes(frozenset({TIP}), frozenset())
    assert rlmm.is_ready(TIP)
