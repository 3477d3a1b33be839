"""Deleting a tiered topic: one broker removes its remote data, once, and retries until done."""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable

import pytest
from tierlog.client import Admin
from tierlog.errors import RemoteResourceNotFoundError, RemoteStorageNotReadyError
from tierlog.model import RemoteLogSegmentState, TopicIdPartition, TopicPartition

from tests.waiting import wait_until

from .conftest import Tiered

SEGMENT = "4096"


def _tiered_topic(tiered: Tiered) -> dict[TopicIdPartition, int]:
    """A replicated tiered topic with data in both tiers; its partitions and their leaders."""
    tiered.client.create("t", 2, 3, segment_bytes=SEGMENT, remote_storage_enable="true")
    for partition in (0, 1):
        tiered.fill("t", 20, partition=partition)
    wait_until(lambda: tiered.finished("t", 0) and tiered.finished("t", 1), "both tiered")
    leaders = {}
    for partition in (0, 1):
        broker = tiered.broker_for("t", partition)
        replica = broker.partition(TopicPartition("t", partition))
        assert replica is not None and replica.topic_id is not None
        leaders[TopicIdPartition(replica.topic_id, replica.topic_partition)] = broker.broker_id
    return leaders


def _metadata_left(tiered: Tiered, tips: list[TopicIdPartition]) -> list[object]:
    """Segments any broker's metadata manager still lists for ``tips``."""
    left: list[object] = []
    for broker_id in tiered.cluster.broker_ids:
        host = tiered.cluster.broker(broker_id).plugin_host
        assert host is not None
        for tip in tips:
            with contextlib.suppress(RemoteResourceNotFoundError, RemoteStorageNotReadyError):
                left += [
                    s
                    for s in host.metadata.list_remote_log_segments(tip)
                    if s.state is not RemoteLogSegmentState.DELETE_SEGMENT_FINISHED
                ]
    return left


def test_only_the_leader_deletes_a_deleted_topics_remote_data_and_nothing_is_left(
    make_tiered: Callable[..., Tiered], caplog: pytest.LogCaptureFixture
) -> None:
    tiered = make_tiered(3)
    leaders = _tiered_topic(tiered)
    caplog.set_level(logging.WARNING, logger="tierlog")
    with Admin(tiered.cluster.transport) as admin:
        admin.delete_topics(["t"])
    wait_until(lambda: not tiered.remote_objects(), "remote storage emptied")
    wait_until(lambda: not _metadata_left(tiered, list(leaders)), "no metadata left")
    copied = Counter(e.segment_id for e in tiered.history.of("copy"))
    deletes = tiered.history.of("delete")
    assert Counter(e.segment_id for e in deletes) == copied, "every segment deleted exactly once"
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not problems, [r.getMessage() for r in problems]


def test_a_failed_remote_deletion_is_retried_until_the_bucket_is_empty(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(
        3,
        **{
            "remote.log.manager.task.retry.backoff.ms": 50,
            "remote.log.manager.task.retry.backoff.max.ms": 200,
        },
    )
    leaders = _tiered_topic(tiered)
    tiered.history.fail_deletes = 3
    with Admin(tiered.cluster.transport) as admin:
        admin.delete_topics(["t"])
    wait_until(lambda: not tiered.remote_objects(), "remote storage emptied after retries")
    wait_until(lambda: not _metadata_left(tiered, list(leaders)), "no metadata left")
    assert tiered.history.fail_deletes == 0, "the injected failures were hit"
    for broker_id in tiered.cluster.broker_ids:
        rlm = tiered.cluster.broker(broker_id).remote_log_manager
        assert rlm is not None
        wait_until(lambda rlm=rlm: not rlm.partition_deletions.pending(), "no deletion pending")
