"""``listeners`` and ``advertised.listeners``: Kafka's syntax, and what Metadata advertises."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka.protocol.metadata.metadata import MetadataRequest
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import InvalidConfigError
from tierlog.wire.endpoints import Endpoint, parse_listeners, parse_protocol_map

from .raw import RawClient

KAFKA_MAP = parse_protocol_map("PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:PLAINTEXT")


def test_listeners_parse_names_hosts_and_ports() -> None:
    parsed = parse_listeners(
        ["PLAINTEXT://127.0.0.1:9092", "internal://:0", "PLAINTEXT2://[::1]:9094"],
        {**KAFKA_MAP, "PLAINTEXT2": "PLAINTEXT"},
    )
    assert parsed == (
        Endpoint("PLAINTEXT", "127.0.0.1", 9092),
        Endpoint("INTERNAL", "", 0),
        Endpoint("PLAINTEXT2", "::1", 9094),
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("127.0.0.1:9092", "is not NAME://host:port"),
        ("PLAINTEXT://127.0.0.1", "is not NAME://host:port"),
        ("PLAINTEXT://127.0.0.1:70000", "port 70000 > 65535"),
        ("SSL://127.0.0.1:9093", "security protocol SSL is not supported"),
        ("OTHER://127.0.0.1:9093", "listener name OTHER is not in listener.security.protocol.map"),
    ],
)
def test_a_bad_listener_is_a_config_error_naming_it(value: str, problem: str) -> None:
    with pytest.raises(InvalidConfigError, match=problem) as caught:
        parse_listeners([value], KAFKA_MAP)
    assert value in str(caught.value)


def test_a_listener_named_twice_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="names listener PLAINTEXT twice"):
        parse_listeners(["PLAINTEXT://:1", "PLAINTEXT://:2"], KAFKA_MAP)


def test_metadata_advertises_advertised_listeners_and_the_bound_port(
    make_listening: Callable[..., EmbeddedCluster],
) -> None:
    cluster = make_listening(advertised_listeners="PLAINTEXT://broker.example:0")
    bound = cluster.listener(0).bound[0]
    assert bound.port != 0
    with RawClient(f"127.0.0.1:{bound.port}") as raw:
        response = raw.call(MetadataRequest(topics=None), 12)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (0, "broker.example", bound.port)
    ]


def test_each_broker_of_a_cluster_listens_on_its_own_port_and_sees_all_the_others(
    make_listening: Callable[..., EmbeddedCluster],
) -> None:
    cluster = make_listening(3)
    endpoints = cluster.endpoints.snapshot()
    assert sorted(endpoints) == [0, 1, 2]
    assert len({e.port for e in endpoints.values()}) == 3
    assert cluster.bootstrap_servers == ",".join(f"127.0.0.1:{endpoints[i].port}" for i in range(3))
    with RawClient.to(cluster, 2) as raw:
        response = raw.call(MetadataRequest(topics=None), 12)
    assert sorted(b.node_id for b in response.brokers) == [0, 1, 2]

    cluster.stop_broker(1)
    with RawClient.to(cluster, 0) as raw:
        response = raw.call(MetadataRequest(topics=None), 12)
    assert sorted(b.node_id for b in response.brokers) == [0, 2]


def test_a_port_in_use_fails_the_start_naming_the_listener(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        cluster = EmbeddedCluster(
            1, tmp_path, {"listeners": f"PLAINTEXT://127.0.0.1:{port}"}, listen=True
        )
        with pytest.raises(OSError, match=f"cannot listen on PLAINTEXT://127.0.0.1:{port}"):
            cluster.start()


def test_a_partition_whose_leader_does_not_listen_has_no_leader_in_metadata(
    make_listening: Callable[..., EmbeddedCluster],
) -> None:
    """A client told of a leader it has no address for cannot reach it: LEADER_NOT_AVAILABLE."""
    cluster = make_listening(2)
    Admin(cluster.transport).create_topics(
        [NewTopic("t", -1, -1, replica_assignment={0: (0,), 1: (1,)})]
    )
    cluster.listener(0).stop()
    with RawClient.to(cluster, 1) as raw:
        response = raw.call(MetadataRequest(topics=None), 12)
    assert [b.node_id for b in response.brokers] == [1]
    (topic,) = response.topics
    assert sorted((q.partition_index, q.error_code, q.leader_id) for q in topic.partitions) == [
        (0, 5, -1),
        (1, 0, 1),
    ]
