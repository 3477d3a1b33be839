"""The remote log manager's metrics, under Kafka's names with topic and partition tags."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.waiting import wait_until

from .conftest import Tiered


def test_copy_fetch_delete_and_pool_metrics(make_tiered: Callable[..., Tiered]) -> None:
    tiered = make_tiered(1)
    tiered.client.create(
        "t",
        segment_bytes="4096",
        remote_storage_enable="true",
        local_retention_bytes="1",
        retention_bytes=str(6 * 4096),
    )
    tiered.fill("t", 40)
    plog = tiered.log("t")
    wait_until(lambda: plog.log_start_offset > 0, "remote retention ran")
    wait_until(lambda: plog.local_log_start_offset > plog.log_start_offset, "remote-only data")
    # retention may still be moving the log start: a client would retry from the new one
    wait_until(
        lambda: tiered.client.fetch("t", 0, plog.log_start_offset).records,
        "a fetch from the log start",
    )
    registry = tiered.cluster.broker(0).plugin_host.metrics  # type: ignore[union-attr]

    def value(name: str, group: str = "BrokerTopicMetrics") -> object:
        return registry.value(group, name, topic="t", partition="0")

    copied = value("RemoteCopyBytesPerSec")
    assert copied["count"] > 0  # type: ignore[index]
    assert value("RemoteCopyRequestsPerSec")["count"] > 0  # type: ignore[index]
    assert value("RemoteFetchRequestsPerSec")["count"] >= 1  # type: ignore[index]
    assert value("RemoteFetchBytesPerSec")["count"] > 0  # type: ignore[index]
    assert value("RemoteDeleteRequestsPerSec")["count"] >= 1  # type: ignore[index]
    wait_until(lambda: value("RemoteLogMetadataCount") == len(tiered.finished("t")), "count")
    wait_until(
        lambda: (
            value("RemoteLogSizeBytes")
            == sum(s.segment_size_in_bytes for s in tiered.finished("t"))
        ),
        "remote size",
    )
    # every rolled segment is tiered in the end: nothing is left only on the local disk
    wait_until(lambda: value("RemoteCopyLagSegments") == 0, "no segment lagging")
    assert value("RemoteCopyLagBytes") == 0
    assert registry.value("RemoteStorageThreadPool", "RemoteLogReaderTaskQueueSize") == 0
    assert registry.value("RemoteStorageThreadPool", "RemoteLogReaderActiveThreads") == 0


def test_copy_lag_is_reported_while_the_first_upload_is_still_running(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(1)
    tiered.history.copy_delay = 120.0  # every upload waits until the test releases them
    tiered.client.create("t", segment_bytes="4096")
    tiered.fill("t", 12)
    # tiering starts once the backlog is complete, so the first run sees every rolled segment
    tiered.alter("t", remote_storage_enable="true")
    registry = tiered.cluster.broker(0).plugin_host.metrics  # type: ignore[union-attr]

    def lag(name: str) -> object:
        try:
            return registry.value("BrokerTopicMetrics", name, topic="t", partition="0")
        except KeyError:  # not reported yet
            return None

    rolled = len([s for s in tiered.log("t").segments() if not s.is_active])
    assert rolled >= 2
    wait_until(lambda: lag("RemoteCopyLagSegments") is not None, "the lag reported")
    assert lag("RemoteCopyLagSegments") == rolled
    assert lag("RemoteCopyLagBytes") > 0  # type: ignore[operator]
    assert not tiered.history.of("copy")  # no upload has ended yet
    tiered.history.release.set()
    wait_until(lambda: lag("RemoteCopyLagSegments") == 0, "every rolled segment tiered")
    assert lag("RemoteCopyLagBytes") == 0
    assert len(tiered.history.of("copy")) >= rolled


def test_a_brokers_metrics_are_read_from_the_cluster_by_name_and_tags(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = make_tiered(2)
    tiered.client.create(
        "t", segment_bytes="4096", replication_factor=2, remote_storage_enable="true"
    )
    tiered.fill("t", 12)
    leader = tiered.client.leader("t", 0)
    cluster = tiered.cluster

    def copies_counted() -> bool:
        """Whether the leader finished a copy: its bytes are counted when it ends (the request
        when it starts), and the meter appears with the first."""
        counted = cluster.metrics(
            leader, "BrokerTopicMetrics", "RemoteCopyBytesPerSec", topic="t", partition=0
        )
        return any(value["count"] for value in counted.values())  # type: ignore[index]

    wait_until(copies_counted, "a copy counted")
    requests = cluster.metric(
        leader, "BrokerTopicMetrics", "RemoteCopyRequestsPerSec", topic="t", partition=0
    )
    assert requests["count"] > 0  # type: ignore[index]
    copied = cluster.metric(
        leader, "BrokerTopicMetrics", "RemoteCopyBytesPerSec", topic="t", partition=0
    )
    assert copied["count"] > 0  # type: ignore[index]
    of_topic = cluster.metrics(leader, "BrokerTopicMetrics", topic="t")
    assert {name.name for name in of_topic} >= {"RemoteCopyBytesPerSec", "RemoteCopyLagBytes"}
    assert all(name.tag_dict["topic"] == "t" for name in of_topic)
    assert cluster.metrics(leader, "RemoteStorageThreadPool")
    with pytest.raises(KeyError, match="RemoteCopyBytesPerSec"):
        cluster.metric(leader, "BrokerTopicMetrics", "RemoteCopyBytesPerSec", topic="other")
    follower = next(b for b in cluster.broker_ids if b != leader)
    cluster.stop_broker(follower)
    with pytest.raises(KeyError, match="not running"):
        cluster.metrics(follower)
