"""The in-process transport and the faults tests inject into it, request by request."""

from __future__ import annotations

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    BrokerNotAvailableError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from tierlog.server import protocol as p
from tierlog.server.transport import FaultMatch

from .conftest import Client, batch, values


def produce_request(topic: str, records: bytes) -> p.ProduceRequest:
    return p.ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[p.TopicProduceData(topic, [p.PartitionProduceData(0, records)])],
    )


def to_topic(name: str) -> FaultMatch:
    def match(_broker: int, request: p.Request) -> bool:
        return isinstance(request, p.ProduceRequest) and request.topic_data[0].name == name

    return match


@pytest.fixture
def two_topics(client: Client) -> tuple[int, int]:
    """Topics 'hit' and 'spared', both led by broker 0."""
    for name in ("hit", "spared"):
        request = p.CreateTopicsRequest(
            [p.CreatableTopic(name, assignments=[p.CreatableReplicaAssignment(0, [0])])]
        )
        assert client.transport.send(0, request).topics[0].error_code == p.NONE
    return client.leader("hit"), client.leader("spared")


def test_drop_loses_only_the_matched_requests(client: Client, two_topics: object) -> None:
    fault = client.transport.faults.add(to_topic("hit"), drop=True)

    with pytest.raises(RequestTimedOutError):
        client.transport.send(0, produce_request("hit", batch(1)))
    spared = client.transport.send(0, produce_request("spared", batch(1)))

    assert fault.hits == 1
    assert spared.responses[0].partition_responses[0].error_code == p.NONE
    assert client.fetch("hit").high_watermark == 0
    assert client.fetch("spared").high_watermark == 1


def test_error_answers_matched_requests_until_removed(client: Client, two_topics: object) -> None:
    fault = client.transport.faults.add(to_topic("hit"), error=KafkaStorageError)

    with pytest.raises(KafkaStorageError):
        client.transport.send(0, produce_request("hit", batch(1)))
    client.transport.faults.remove(fault)
    after = client.transport.send(0, produce_request("hit", batch(1, tag="after")))

    assert after.responses[0].partition_responses[0].base_offset == 0
    assert values(client.fetch("hit").records) == [b"after-0"]


def test_times_limits_how_many_requests_a_fault_affects(client: Client, two_topics: object) -> None:
    error = KafkaStorageError("disk gone")
    fault = client.transport.faults.add(to_topic("hit"), error=error, times=1)

    with pytest.raises(KafkaStorageError) as raised:
        client.transport.send(0, produce_request("hit", batch(1)))
    second = client.transport.send(0, produce_request("hit", batch(1)))

    assert raised.value is error
    assert fault.hits == 1
    assert second.responses[0].partition_responses[0].error_code == p.NONE


def test_delay_still_delivers(client: Client, two_topics: object) -> None:
    fault = client.transport.faults.add(to_topic("hit"), delay_ms=20)

    response = client.transport.send(0, produce_request("hit", batch(1)))

    assert fault.hits == 1
    assert response.responses[0].partition_responses[0].error_code == p.NONE
    assert client.fetch("hit").high_watermark == 1


def test_delay_beyond_the_request_timeout_is_not_delivered(
    client: Client, two_topics: object
) -> None:
    client.transport.faults.add(to_topic("hit"), delay_ms=10_000)

    with pytest.raises(RequestTimedOutError):
        client.transport.send(0, produce_request("hit", batch(1)), timeout_ms=10)

    assert client.fetch("hit").high_watermark == 0


def test_unknown_and_stopped_brokers_are_not_available(cluster: EmbeddedCluster) -> None:
    with pytest.raises(BrokerNotAvailableError):
        cluster.transport.send(9, p.MetadataRequest())
    cluster.stop_broker(2)

    with pytest.raises(BrokerNotAvailableError):
        cluster.transport.send(2, p.MetadataRequest())
    assert cluster.transport.node_ids() == (0, 1)


def test_controller_traffic_goes_through_the_transport(
    cluster: EmbeddedCluster, client: Client
) -> None:
    lost = client.transport.faults.add(
        lambda broker, request: broker == 2 and isinstance(request, p.LeaderAndIsrRequest),
        drop=True,
    )
    request = p.CreateTopicsRequest(
        [p.CreatableTopic("late", assignments=[p.CreatableReplicaAssignment(0, [2])])]
    )
    assert client.transport.send(0, request).topics[0].error_code == p.NONE
    before = client.transport.send(2, produce_request("late", batch(1)))
    client.transport.faults.remove(lost)

    cluster.restart_broker(2)
    after = client.transport.send(2, produce_request("late", batch(1)))

    assert lost.hits == 1
    assert before.responses[0].partition_responses[0].error_code == NotLeaderOrFollowerError.code
    assert after.responses[0].partition_responses[0].error_code == p.NONE
