"""The topic-based metadata manager's start-up behaviours, in a running cluster.

KIP-1197: initialization starts at broker-ready, so a slow start-up does not eat its retry
budget; when it really fails, tiering stops and nothing else does. KIP-1007: after a restart,
while a partition's metadata is still being read back, only requests that need it fail, with a
retriable error, and clients carry on once it is loaded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tierlog import hookimpl
from tierlog.client import Consumer, NoOffsetForPartitionError
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import RemoteStorageNotReadyError, error_for_code
from tierlog.metadata.checkpoint import CHECKPOINT_FILE_NAME
from tierlog.model import TopicIdPartition, TopicPartition
from tierlog.server import protocol as p

from tests.server.conftest import Client, batch, offsets
from tests.waiting import wait_until

from .test_topic_metadata import facade_of, manager_of, topic_settings

METADATA_TOPIC = "__remote_log_metadata"
NOT_READY = RemoteStorageNotReadyError.wire_fallback_code


class SlowStart:
    """A plugin that takes its time to configure, as one loading credentials might."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    @hookimpl
    def tierlog_configure(self, config: Any, context: Any) -> None:
        time.sleep(self.seconds)


def _metadata_topic_requested(_broker: int, request: p.Request) -> bool:
    return isinstance(request, p.MetadataRequest) and any(
        t.name == METADATA_TOPIC for t in request.topics or ()
    )


def _metadata_topic_fetched(_broker: int, request: p.Request) -> bool:
    return isinstance(request, p.FetchRequest) and any(
        t.topic == METADATA_TOPIC for t in request.topics
    )


def _tip(cluster: EmbeddedCluster, topic: str, partition: int) -> TopicIdPartition:
    image = cluster.controller.image().topic(topic)
    assert image is not None
    return TopicIdPartition(image.topic_id, TopicPartition(topic, partition))


# --- KIP-1197 -----------------------------------------------------------------------------


def test_a_start_up_longer_than_the_retry_budget_still_initializes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    budget_ms = 300
    settings = topic_settings(
        tmp_path,
        **{"rlmm.config.remote.log.metadata.initialization.retry.max.timeout.ms": budget_ms},
    )
    cluster = EmbeddedCluster(
        1, tmp_path / "data", settings, extra_plugins={"slow": SlowStart(3 * budget_ms / 1000)}
    )
    with caplog.at_level(logging.DEBUG, logger="tierlog"):
        began = time.monotonic()
        cluster.start()
        try:
            start_up_ms = (time.monotonic() - began) * 1000
            assert start_up_ms > budget_ms, "the start-up must outlast the budget"
            manager = manager_of(cluster)
            assert manager.wait_initialized(30)
            assert manager.initialization_error is None
        finally:
            cluster.stop()
    complaints = [
        r for r in caplog.records if r.name.startswith("tierlog.metadata") and r.levelno >= 30
    ]
    assert complaints == []
    attempts = [r for r in caplog.records if "initialization attempt failed" in r.getMessage()]
    assert attempts == [], "the first attempt, made once the broker serves, succeeds"


def test_a_log_recovery_longer_than_the_retry_budget_still_initializes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's own case: after a crash the broker spends longer recovering its logs than
    the whole initialization budget; the budget only starts once the broker serves."""
    budget_ms = 30
    settings = topic_settings(
        tmp_path,
        **{
            "rlmm.config.remote.log.metadata.initialization.retry.max.timeout.ms": budget_ms,
            "rlmm.config.remote.log.metadata.initialization.retry.interval.ms": 5,
        },
    )
    cluster = EmbeddedCluster(1, tmp_path / "data", settings)
    cluster.start()
    try:
        client = Client(cluster)
        client.create("big", 24, segment_bytes=str(1 << 30))
        for n in range(6000):  # many partitions and batches: recovery re-reads every batch
            assert client.produce("big", n % 24, batch(1, tag=f"b{n}")).error_code == p.NONE
        cluster.stop_broker(0, clean=False)
        with caplog.at_level(logging.INFO, logger="tierlog"):
            cluster.start_broker(0)
            manager = manager_of(cluster)
            assert manager.wait_initialized(30)
        assert manager.initialization_error is None
    finally:
        cluster.stop()
    states = {
        r.getMessage(): r.created
        for r in caplog.records
        if r.name == "tierlog.server.broker" and r.getMessage().startswith("broker 0: ")
    }
    recovery_ms = (states["broker 0: serving"] - states["broker 0: recovering logs"]) * 1000
    assert recovery_ms > budget_ms, (
        f"recovery took {recovery_ms:.0f} ms: not longer than the budget"
    )
    complaints = [
        r for r in caplog.records if r.name.startswith("tierlog.metadata") and r.levelno >= 30
    ]
    assert complaints == []


def test_when_initialization_fails_tiering_stops_and_local_data_is_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = topic_settings(
        tmp_path,
        **{
            "rlmm.config.remote.log.metadata.initialization.retry.max.timeout.ms": 400,
            "rlmm.config.remote.log.metadata.initialization.retry.interval.ms": 50,
        },
    )
    cluster = EmbeddedCluster(1, tmp_path / "data", settings)
    unreachable = cluster.transport.faults.add(_metadata_topic_requested, drop=True)
    with caplog.at_level(logging.ERROR), cluster:
        manager = manager_of(cluster)
        wait_until(lambda: manager.initialization_error is not None, "initialization to fail")
        assert unreachable.hits > 1, "it retried within the budget"
        client = Client(cluster)
        client.create(
            "t", segment_bytes="2048", remote_storage_enable="true", local_retention_bytes="1"
        )
        for n in range(20):
            assert client.produce("t", 0, batch(10, tag=f"b{n}", value_size=100)).error_code == 0
        time.sleep(0.5)  # several copy and retention rounds (both run every 50 ms)
        plog = cluster.broker(0).partition(TopicPartition("t", 0))
        assert plog is not None
        assert plog.log.local_log_start_offset == 0, "nothing untiered was deleted locally"
        assert len(plog.log.segments()) > 5
        assert not list((tmp_path / "remote").rglob("*.log*")), "nothing was tiered"
        fetched = client.fetch("t", 0, 0)
        assert fetched.error_code == p.NONE
        assert offsets(fetched.records)[0] == 0
        assert not facade_of(cluster).is_ready(_tip(cluster, "t", 0))
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("Tiering is stopped on this broker" in m for m in errors), errors


# --- KIP-1007 -----------------------------------------------------------------------------


@pytest.fixture
def restarted(tmp_path: Path) -> Iterator[tuple[EmbeddedCluster, Any]]:
    """A broker leading 4 tiered partitions restarted with its metadata reads slowed down.

    Returns the cluster and the fault (remove it to let the metadata load).
    """
    settings = topic_settings(tmp_path)
    with EmbeddedCluster(1, tmp_path / "data", settings) as cluster:
        client = Client(cluster)
        client.create(
            "t",
            4,
            segment_bytes="2048",
            remote_storage_enable="true",
            local_retention_bytes="1",
        )
        client.create("plain")
        for partition in range(4):
            for n in range(20):
                produced = client.produce("t", partition, batch(10, tag=f"b{n}", value_size=100))
                assert produced.error_code == p.NONE
        assert client.produce("plain", 0, batch(5)).error_code == p.NONE
        broker = cluster.broker(0)
        for partition in range(4):
            replica = broker.partition(TopicPartition("t", partition))
            assert replica is not None
            wait_until(lambda r=replica: r.log.local_log_start_offset > 50, "tiered")
    (tmp_path / "data" / "broker-0" / "logs" / CHECKPOINT_FILE_NAME).unlink()

    cluster = EmbeddedCluster(1, tmp_path / "data", settings)
    slow = cluster.transport.faults.add(_metadata_topic_fetched, delay_ms=2000)
    cluster.start()
    try:
        assert manager_of(cluster).wait_initialized(30)
        yield cluster, slow
    finally:
        cluster.transport.faults.clear()
        cluster.stop()


def test_while_loading_only_what_needs_remote_metadata_fails_retriably(
    restarted: tuple[EmbeddedCluster, Any],
) -> None:
    cluster, slow = restarted
    client = Client(cluster)
    tips = [_tip(cluster, "t", n) for n in range(4)]
    rlmm = facade_of(cluster)
    assert not any(rlmm.is_ready(tip) for tip in tips)
    replica = cluster.broker(0).partition(TopicPartition("t", 0))
    assert replica is not None
    local_start = replica.log.segments()[-1].base_offset  # the active segment stays local

    request = p.FetchRequest(
        [
            p.FetchTopic("t", [p.FetchPartition(0, 0, 1 << 20)]),
            p.FetchTopic("plain", [p.FetchPartition(0, 0, 1 << 20)]),
        ],
        max_wait_ms=0,
    )
    remote, local = (t.partitions[0] for t in cluster.transport.send(0, request).responses)
    assert remote.error_code == NOT_READY and error_for_code(remote.error_code).retriable
    assert local.error_code == p.NONE and len(offsets(local.records)) == 5
    same_partition_local = client.fetch("t", 0, local_start)
    assert same_partition_local.error_code == p.NONE
    assert offsets(same_partition_local.records)[0] == local_start
    for spec in (p.OffsetSpec.EARLIEST, p.OffsetSpec.LATEST, p.OffsetSpec.LATEST_TIERED):
        assert client.list_offset("t", spec).error_code == NOT_READY
    assert client.list_offset("plain", p.OffsetSpec.EARLIEST).error_code == p.NONE

    cluster.transport.faults.remove(slow)
    wait_until(lambda: all(rlmm.is_ready(tip) for tip in tips), "metadata loaded")
    for partition in range(4):
        assert offsets(client.fetch("t", partition, 0).records)[0] == 0
        for spec in (p.OffsetSpec.EARLIEST, p.OffsetSpec.LATEST, p.OffsetSpec.LATEST_TIERED):
            assert client.list_offset("t", spec, partition).error_code == p.NONE


def _consume(consumer: Consumer, tp: TopicPartition, until: int, out: list[int]) -> None:
    deadline = time.monotonic() + 60
    while (not out or out[-1] < until) and time.monotonic() < deadline:
        out.extend(r.offset for r in consumer.poll(200))


def test_consumers_retry_until_ready_for_every_reset_policy(
    restarted: tuple[EmbeddedCluster, Any],
) -> None:
    cluster, slow = restarted
    client = Client(cluster)
    tp = TopicPartition("t", 1)
    end = client.list_offset("plain", p.OffsetSpec.LATEST).offset  # noqa: F841 - warms metadata

    earliest = Consumer(cluster.transport, {"auto.offset.reset": "earliest"})
    latest = Consumer(cluster.transport, {"auto.offset.reset": "latest"})
    none = Consumer(cluster.transport, {"auto.offset.reset": "none"})
    for consumer in (earliest, latest, none):
        consumer.assign([tp])
    with pytest.raises(NoOffsetForPartitionError):
        none.position(tp, timeout_ms=0)
    none.seek(tp, 0)  # an explicit position in remote data: fetched once ready

    got_earliest: list[int] = []
    got_none: list[int] = []
    readers = [
        threading.Thread(target=_consume, args=(earliest, tp, 199, got_earliest)),
        threading.Thread(target=_consume, args=(none, tp, 199, got_none)),
    ]
    for reader in readers:
        reader.start()
    time.sleep(0.3)
    assert got_earliest == [] and got_none == [], "nothing is served before ready"
    cluster.transport.faults.remove(slow)
    for reader in readers:
        reader.join()
    assert got_earliest == list(range(200))
    assert got_none == list(range(200))

    assert latest.position(tp, timeout_ms=30_000) == 200  # retried through not-ready
    assert client.produce("t", 1, batch(3, tag="new")).error_code == p.NONE
    got_latest: list[int] = []
    _consume(latest, tp, 202, got_latest)
    assert got_latest == [200, 201, 202]
    for consumer in (earliest, latest, none):
        consumer.close()
