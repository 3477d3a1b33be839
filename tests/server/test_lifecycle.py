"""Startup states, the plugin lifecycle around them, restarts clean and unclean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tierlog
from tierlog.cluster import EmbeddedCluster
from tierlog.config import BrokerConfig
from tierlog.coordination.file_store import FileMetadataStore
from tierlog.errors import (
    BrokerNotAvailableError,
    InvalidConfigError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    PluginCallError,
)
from tierlog.log import files
from tierlog.model import TopicPartition
from tierlog.records import Compression
from tierlog.server import protocol as p
from tierlog.server.broker import Broker, BrokerState
from tierlog.server.controller import Controller
from tierlog.server.transport import InProcessTransport

from .conftest import Client, batch, values


class Recorder:
    """A plugin that records each lifecycle call with the broker state it saw."""

    def __init__(self, fail_in: str | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.broker: Broker | None = None
        self.ready_brokers: list[int] = []
        self.fail_in = fail_in

    def _record(self, phase: str, state: Any = None) -> None:
        self.calls.append((phase, state))
        if phase == self.fail_in:
            raise RuntimeError(f"recorder fails in {phase}")

    @tierlog.hookimpl
    def tierlog_configure(self, config: Any, context: Any) -> None:
        self._record("configure")

    @tierlog.hookimpl
    def tierlog_register_metrics(self, metrics: Any) -> None:
        self._record("register_metrics")

    @tierlog.hookimpl
    def tierlog_on_broker_ready(self, broker: Broker) -> None:
        self.broker = broker
        self.ready_brokers.append(broker.broker_id)
        led = [tp for tp in broker.hosted_partitions() if broker.partition(tp).is_leader]  # type: ignore[union-attr]
        self._record("on_broker_ready", (broker.state, len(led)))

    @tierlog.hookimpl
    def tierlog_close(self) -> None:
        self._record("close", self.broker.state if self.broker else None)


def test_startup_states_in_order_with_the_plugin_lifecycle(tmp_path: Path) -> None:
    with EmbeddedCluster(1, tmp_path) as cluster:
        Client(cluster).create("before", partitions=2)
    recorder = Recorder()
    transport = InProcessTransport()
    store = FileMetadataStore(tmp_path / "controller")
    controller = Controller(BrokerConfig.from_mapping({}), store, transport, [0])
    config = BrokerConfig.from_mapping(
        {"broker.id": 0, "log.dirs": [str(tmp_path / "broker-0" / "logs")]}
    )
    broker = Broker(config, controller, extra_plugins={"recorder": recorder})
    states: list[BrokerState] = []
    broker.add_state_listener(lambda _broker, state: states.append(state))
    transport.register(broker)

    broker.start()
    serving = list(states)
    broker.stop()

    assert serving == [BrokerState.STARTING, BrokerState.RECOVERING_LOGS, BrokerState.SERVING]
    assert states[3:] == [BrokerState.SHUTTING_DOWN, BrokerState.STOPPED]
    assert recorder.calls == [
        ("configure", None),
        ("register_metrics", None),
        ("on_broker_ready", (BrokerState.SERVING, 2)),
        ("close", BrokerState.SHUTTING_DOWN),
    ]
    assert recorder.broker is broker


def test_broker_ready_fires_once_per_broker_start(tmp_path: Path) -> None:
    recorder = Recorder()
    with EmbeddedCluster(3, tmp_path, extra_plugins={"recorder": recorder}) as cluster:
        cluster.restart_broker(1)
        ready = [state for phase, state in recorder.calls if phase == "on_broker_ready"]
        ready_brokers = list(recorder.ready_brokers)

    # One plugin object is shared by every broker: three starts and one restart.
    assert ready_brokers == [0, 1, 2, 1]
    assert all(state == BrokerState.SERVING for state, _led in ready)


def test_a_failing_plugin_stops_startup_cleanly(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(1, tmp_path, extra_plugins={"bad": Recorder(fail_in="configure")})

    with pytest.raises(PluginCallError, match="configure"):
        cluster.start()

    assert cluster.broker(0).state is BrokerState.STOPPED
    assert cluster.transport.node_ids() == ()


def test_clean_restart_of_a_cluster_keeps_topics_ids_configs_and_data(tmp_path: Path) -> None:
    with EmbeddedCluster(3, tmp_path) as cluster:
        client = Client(cluster)
        ids = {
            "single": client.create("single", partitions=3).topic_id,
            "triple": client.create("triple", 2, 3, retention_ms="86400000").topic_id,
        }
        for partition in range(3):
            client.produce("single", partition, batch(2, tag=f"s{partition}"))
        client.produce("triple", 1, batch(3, compression=Compression.GZIP, tag="t"))
        epochs = {t.name: [x.leader_epoch for x in t.partitions] for t in client.metadata().topics}

    with EmbeddedCluster(3, tmp_path) as cluster:
        client = Client(cluster)
        metadata = client.metadata()
        assert {t.name: t.topic_id for t in metadata.topics} == ids
        for topic in metadata.topics:
            for part in topic.partitions:
                assert part.error_code == p.NONE
                assert part.leader_epoch > epochs[topic.name][part.partition_index]
        for partition in range(3):
            assert values(client.fetch("single", partition).records) == [
                f"s{partition}-0".encode(),
                f"s{partition}-1".encode(),
            ]
        assert values(client.fetch("triple", 1).records) == [b"t-0", b"t-1", b"t-2"]
        assert client.produce("triple", 1, batch(1)).base_offset == 3
        retention = p.DescribeConfigsRequest(
            [p.DescribeConfigsResource(p.ResourceType.TOPIC, "triple", ["retention.ms"])]
        )
        described = client.transport.send(0, retention).results[0].configs[0]
        assert described.value == "86400000"


def test_a_stopped_leader_leaves_its_partitions_leaderless_until_it_returns(
    cluster: EmbeddedCluster, client: Client
) -> None:
    request = p.CreateTopicsRequest(
        [p.CreatableTopic("pinned", assignments=[p.CreatableReplicaAssignment(0, [1, 2])])]
    )
    client.transport.send(0, request)
    client.produce("pinned", 0, batch(2))
    # Broker 2 leaves the ISR by stopping first, so once 1 stops no in-sync replica is left
    # and, unclean election being off, the returning 2 may not lead.
    cluster.stop_broker(2)
    cluster.stop_broker(1)
    cluster.start_broker(2)
    on_follower = client.transport.send(
        2, p.ListOffsetsRequest([p.ListOffsetsTopic("pinned", [p.ListOffsetsPartition(0, -1)])])
    )
    on_other = client.transport.send(
        0, p.ListOffsetsRequest([p.ListOffsetsTopic("pinned", [p.ListOffsetsPartition(0, -1)])])
    )
    with pytest.raises(BrokerNotAvailableError):
        client.transport.send(1, p.MetadataRequest())
    cluster.start_broker(1)

    assert on_follower.topics[0].partitions[0].error_code == NotLeaderOrFollowerError.code
    assert on_other.topics[0].partitions[0].error_code == LeaderNotAvailableError.code
    assert client.leader("pinned") == 1
    assert client.metadata("pinned").topics[0].partitions[0].leader_epoch == 2
    assert client.list_offset("pinned", p.OffsetSpec.LATEST).offset == 2


def test_unclean_stop_recovers_the_log_on_restart(cluster: EmbeddedCluster, client: Client) -> None:
    client.create("crashy", replication_factor=1)
    leader = client.leader("crashy")
    client.produce("crashy", 0, batch(3, tag="before"))
    directory = cluster.broker(leader).partition(TopicPartition("crashy", 0)).directory  # type: ignore[union-attr]

    cluster.stop_broker(leader, clean=False)
    assert not (directory / files.CLEAN_SHUTDOWN_MARKER).exists()
    cluster.start_broker(leader)

    assert values(client.fetch("crashy").records) == [b"before-0", b"before-1", b"before-2"]
    assert client.produce("crashy", 0, batch(1)).base_offset == 3


def test_clean_stop_leaves_the_clean_shutdown_marker(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("tidy")
    leader = client.leader("tidy")
    directory = cluster.broker(leader).partition(TopicPartition("tidy", 0)).directory  # type: ignore[union-attr]

    cluster.stop_broker(leader)

    assert (directory / files.CLEAN_SHUTDOWN_MARKER).exists()


def test_data_of_another_cluster_is_refused(tmp_path: Path) -> None:
    with EmbeddedCluster(1, tmp_path, {"cluster.id": "first"}) as cluster:
        Client(cluster).create("mine")

    with pytest.raises(InvalidConfigError, match="first"):
        EmbeddedCluster(1, tmp_path, {"cluster.id": "second"}).start()
    with EmbeddedCluster(1, tmp_path) as cluster:
        assert cluster.controller.cluster_id == "first"
        assert [t.name for t in Client(cluster).metadata().topics] == ["mine"]
