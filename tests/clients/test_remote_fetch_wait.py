"""KIP-1018 as a Kafka client sees it: with remote storage slower than
``remote.fetch.max.wait.ms``, a consumer's fetch of remote data is answered empty at that wait
(no error, no stall); raising the wait through a real admin client (IncrementalAlterConfigs)
lets the slow reads through."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from tierlog.cluster import EmbeddedCluster

from tests.remote.conftest import StorageHistory
from tests.waiting import wait_until

from .conftest import (
    TIERED_TOPIC,
    OpenConsumer,
    Stored,
    assert_same_records,
    create_topic,
    end_offsets,
    fill,
    listening,
    make_records,
    meter_count,
    wait_offloaded,
)

WAIT_KEY = "remote.fetch.max.wait.ms"
#: Each remote segment read takes this long: far beyond the wait the broker starts with.
STORAGE_DELAY_S = 0.3
SHORT_WAIT_MS = 40


@attrs.frozen
class SlowTier:
    cluster: EmbeddedCluster
    history: StorageHistory
    acked: list[Stored]
    local_start: int

    def expired(self) -> int:
        return meter_count(self.cluster, 0, "DelayedRemoteFetchMetrics", "ExpiresPerSec")

    def fetches(self) -> int:
        return meter_count(self.cluster, 0, "RequestMetrics", "RequestsPerSec", request="Fetch")


@pytest.fixture
def slow_tier(tmp_path: Path) -> Iterator[SlowTier]:
    """A partition with a few segments only in the remote tier, whose reads are slow."""
    history = StorageHistory()
    cluster = listening(
        tmp_path / "data",
        remote_dir=tmp_path / "remote",
        plugins={"history": history},
        **{WAIT_KEY: SHORT_WAIT_MS},
    )
    with cluster:
        create_topic(cluster, "t", 1, configs=TIERED_TOPIC)
        acked = fill(cluster, "t", make_records(140, tag="slow"))
        (local_start,) = wait_offloaded(cluster, "t", 1).values()
        history.fetch_delay = STORAGE_DELAY_S
        try:
            yield SlowTier(cluster, history, acked, local_start)
        finally:
            history.release.set()  # no storage call outlives the test


def test_a_remote_fetch_slower_than_the_wait_is_answered_empty_without_an_error(
    slow_tier: SlowTier, open_consumer: OpenConsumer
) -> None:
    expired, fetches = slow_tier.expired(), slow_tier.fetches()
    consumer = open_consumer("confluent-kafka", slow_tier.cluster.bootstrap_servers)
    consumer.assign({("t", 0): 0})

    # Several answers while every storage read is still running: each fetch came back at the
    # wait, not when its read finished. Any consumer error would fail read_for.
    wait_until(lambda: slow_tier.expired() >= expired + 3, "remote fetches to expire")
    assert consumer.read_for(0.5) == []
    assert slow_tier.fetches() >= fetches + 3


def test_raising_the_remote_wait_with_an_admin_client_lets_slow_reads_through(
    slow_tier: SlowTier, open_consumer: OpenConsumer
) -> None:
    bootstrap = slow_tier.cluster.bootstrap_servers
    expired = slow_tier.expired()
    consumer = open_consumer("confluent-kafka", bootstrap)
    consumer.assign({("t", 0): 0})
    wait_until(lambda: slow_tier.expired() > expired, "a remote fetch to expire")

    admin = AdminClient({"bootstrap.servers": bootstrap})
    raised = ConfigEntry(WAIT_KEY, "20000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[raised])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)

    assert slow_tier.cluster.broker(0).config[WAIT_KEY] == 20000
    described = ConfigResource(ResourceType.BROKER, "0")
    configs = admin.describe_configs([described])[described].result(timeout=30)
    assert configs[WAIT_KEY].value == "20000"
    # The same consumer, still fetching: its next remote reads are waited for.
    assert_same_records(consumer.read(end_offsets(slow_tier.acked)), slow_tier.acked)
    assert slow_tier.history.of("fetch"), "the records came through the slow storage"
