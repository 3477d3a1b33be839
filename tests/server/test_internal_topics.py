"""Internal topics belong to the runtime: clients read them, and cannot delete, write or break them.

The topics are created here as the runtime creates its own (``Controller.create_topic`` with
``internal=True``); the runtime's writers reach them through ``Transport.send_internal``.
"""

from __future__ import annotations

import pytest
from tierlog.client import Producer
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    InvalidConfigError,
    InvalidTopicError,
    TopicAuthorizationFailedError,
    TopicExistsError,
)
from tierlog.server import protocol as p
from tierlog.server.internal_topics import INTERNAL_TOPICS, is_internal

from .conftest import Client, batch, values

METADATA = "__remote_log_metadata"
OFFSETS = "__consumer_offsets"
TOPIC = p.ResourceType.TOPIC


@pytest.fixture
def internal(cluster: EmbeddedCluster, client: Client) -> Client:
    """The metadata topic, created by the runtime with its configs, holding one event."""
    configs = {"cleanup.policy": "compact", "retention.ms": "-1", "remote.storage.enable": "false"}
    cluster.controller.create_topic(METADATA, 1, 3, configs, internal=True)
    request = p.ProduceRequest(
        -1, 5000, [p.TopicProduceData(METADATA, [p.PartitionProduceData(0, batch(1))])]
    )
    answer = client.transport.send_internal(client.leader(METADATA), request)
    assert answer.responses[0].partition_responses[0].error_code == p.NONE
    return client


def alter(client: Client, name: str, *changes: tuple[str, int, str | None]) -> int:
    resource = p.AlterConfigsResource(
        TOPIC, name, [p.AlterableConfig(k, op, v) for k, op, v in changes]
    )
    response = client.transport.send(0, p.IncrementalAlterConfigsRequest([resource]))
    return response.responses[0].error_code


def still_there(client: Client) -> None:
    """The topic, its configs and its acknowledged event are all unchanged."""
    topic = client.metadata(METADATA).topics[0]
    assert (topic.error_code, topic.is_internal) == (p.NONE, True)
    assert values(client.fetch(METADATA).records) == [b"v-0"]
    describe = p.DescribeConfigsRequest([p.DescribeConfigsResource(TOPIC, METADATA)])
    configs = {c.name: c.value for c in client.transport.send(0, describe).results[0].configs}
    assert (configs["cleanup.policy"], configs["remote.storage.enable"]) == ("compact", "false")


def test_one_list_says_which_topics_are_internal() -> None:
    assert {METADATA, OFFSETS, "__transaction_state"} == INTERNAL_TOPICS
    assert not is_internal("__reserved_but_not_internal")
    assert not is_internal("orders")


def test_metadata_flags_internal_topics(cluster: EmbeddedCluster, client: Client) -> None:
    cluster.controller.create_topic(OFFSETS, 1, 1, internal=True)
    cluster.controller.create_topic("__runtime_scratch", 1, 1, internal=True)
    client.create("orders")

    flags = {t.name: t.is_internal for t in client.metadata().topics}

    assert flags == {OFFSETS: True, "__runtime_scratch": False, "orders": False}


@pytest.mark.parametrize("by_id", [False, True], ids=["by-name", "by-id"])
def test_clients_cannot_delete_an_internal_topic(internal: Client, by_id: bool) -> None:
    topic_id = internal.metadata(METADATA).topics[0].topic_id
    internal.create("user-topic")
    doomed = [p.DeleteTopicState(None, topic_id)] if by_id else [p.DeleteTopicState(METADATA)]
    request = p.DeleteTopicsRequest(topics=[*doomed, p.DeleteTopicState("user-topic")])

    response = internal.transport.send(1, request)

    codes = [r.error_code for r in response.responses]
    assert codes == [TopicAuthorizationFailedError.code, p.NONE]
    assert response.responses[0].error_message and METADATA in response.responses[0].error_message
    still_there(internal)


def test_clients_cannot_produce_to_an_internal_topic(internal: Client) -> None:
    answer = internal.produce(METADATA, 0, batch(1, tag="forged"))

    assert answer.error_code == InvalidTopicError.code
    assert answer.error_message and "internal topic" in answer.error_message
    still_there(internal)


def test_only_the_internal_path_of_a_producer_writes_internal_topics(
    cluster: EmbeddedCluster, internal: Client
) -> None:
    client_side = Producer(cluster.transport, {"max.block.ms": 5000})
    runtime_side = Producer(cluster.transport, {"max.block.ms": 5000}, internal_topics_allowed=True)
    try:
        with pytest.raises(InvalidTopicError, match="internal topic"):
            client_side.send(METADATA, b"forged", key=b"k", partition=0).result(timeout=30)
        written = runtime_side.send(METADATA, b"event", key=b"k", partition=0).result(timeout=30)
    finally:
        client_side.close()
        runtime_side.close()

    assert written.offset == 1
    assert values(internal.fetch(METADATA).records) == [b"v-0", b"event"]


def test_clients_cannot_delete_records_of_an_internal_topic(internal: Client) -> None:
    request = p.DeleteRecordsRequest(
        [p.DeleteRecordsTopic(METADATA, [p.DeleteRecordsPartition(0, -1)])]
    )

    answer = internal.transport.send(internal.leader(METADATA), request)

    assert answer.topics[0].partitions[0].error_code == InvalidTopicError.code
    still_there(internal)


@pytest.mark.parametrize(
    "change",
    [
        ("cleanup.policy", p.AlterConfigOp.SET, "delete"),
        ("cleanup.policy", p.AlterConfigOp.APPEND, "delete"),
        ("cleanup.policy", p.AlterConfigOp.DELETE, None),
        ("remote.storage.enable", p.AlterConfigOp.SET, "true"),
        ("remote.storage.enable", p.AlterConfigOp.DELETE, None),
    ],
    ids=["delete", "append-delete", "delete-policy", "tier-it", "delete-tiering"],
)
def test_configs_the_runtime_depends_on_cannot_change(
    internal: Client, change: tuple[str, int, str | None]
) -> None:
    resource = p.AlterConfigsResource(TOPIC, METADATA, [p.AlterableConfig(*change)])
    request = p.IncrementalAlterConfigsRequest([resource])

    answer = internal.transport.send(0, request).responses[0]

    assert answer.error_code == InvalidConfigError.code
    assert answer.error_message and change[0] in answer.error_message
    still_there(internal)


def test_other_configs_of_internal_topics_can_be_tuned(internal: Client) -> None:
    code = alter(
        internal,
        METADATA,
        ("segment.bytes", p.AlterConfigOp.SET, "1048576"),
        ("cleanup.policy", p.AlterConfigOp.SET, "compact"),
    )

    assert code == p.NONE
    describe = p.DescribeConfigsRequest([p.DescribeConfigsResource(TOPIC, METADATA)])
    configs = {c.name: c.value for c in internal.transport.send(0, describe).results[0].configs}
    assert configs["segment.bytes"] == "1048576"
    still_there(internal)


def test_clients_cannot_create_internal_topics(internal: Client) -> None:
    request = p.CreateTopicsRequest(
        [p.CreatableTopic(METADATA, 1, 1), p.CreatableTopic("__transaction_state", 1, 1)]
    )

    results = internal.transport.send(0, request).topics

    assert [r.error_code for r in results] == [TopicExistsError.code, InvalidTopicError.code]
    assert internal.metadata("__transaction_state").topics[0].error_code != p.NONE
    still_there(internal)
