"""Administering tierlog with each client library's admin API, over the wire: create, expand
and delete topics, describe and alter configs, delete records, elect leaders."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioResourceType
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import ConfigResource as KafkaConfigResource
from kafka.admin import ConfigResourceType as KafkaResourceType
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KafkaNewPartitions
from kafka.admin import NewTopic as KafkaNewTopic
from tierlog.cluster import EmbeddedCluster

from tests.waiting import wait_until

WAIT = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    data = tmp_path_factory.mktemp("admin")
    with EmbeddedCluster(3, data, {"listeners": "PLAINTEXT://127.0.0.1:0"}, listen=True) as c:
        yield c


def _produce(cluster: EmbeddedCluster, topic: str, count: int, partition: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    for n in range(count):
        producer.send(topic, value=b"%d" % n, partition=partition)
    producer.flush()
    producer.close()


def _partitions(cluster: EmbeddedCluster, topic: str) -> int | None:
    found = cluster.controller.image().topic(topic)
    return None if found is None else len(found.partitions)


def _topic_configs(cluster: EmbeddedCluster, topic: str) -> dict[str, str]:
    found = cluster.controller.image().topic(topic)
    assert found is not None
    return dict(found.configs)


def _log_start(cluster: EmbeddedCluster, topic: str, partition: int = 0) -> int:
    reg = cluster.controller.image().topic(topic)
    assert reg is not None
    leader = cluster.broker(reg.partitions[partition].leader)
    hosted = next(
        tp for tp in leader.hosted_partitions() if tp.topic == topic and tp.partition == partition
    )
    replica = leader.partition(hosted)
    assert replica is not None
    return int(replica.log.log_start_offset)


def test_confluent_kafka_admin(cluster: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic("confluent", 2, 3)]).values():
        future.result(WAIT)
    assert _partitions(cluster, "confluent") == 2
    for future in admin.create_partitions([NewPartitions("confluent", 4)]).values():
        future.result(WAIT)
    assert _partitions(cluster, "confluent") == 4

    resource = ConfigResource(
        "topic",
        "confluent",
        incremental_configs=[
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(WAIT)
    assert _topic_configs(cluster, "confluent") == {"retention.ms": "86400000"}
    (described,) = admin.describe_configs([ConfigResource("topic", "confluent")]).values()
    assert described.result(WAIT)["retention.ms"].value == "86400000"

    _produce(cluster, "confluent", 10)
    (deleted,) = admin.delete_records([TopicPartition("confluent", 0, 6)]).values()
    assert deleted.result(WAIT).low_watermark == 6
    assert _log_start(cluster, "confluent") == 6

    # The preferred replica leads already: Kafka's answer is ELECTION_NOT_NEEDED.
    elected = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("confluent", 0)])
    ((partition, error),) = elected.result(WAIT).items()
    assert (partition.topic, partition.partition) == ("confluent", 0)
    assert error is not None and error.code() == 84

    for future in admin.delete_topics(["confluent"]).values():
        future.result(WAIT)
    wait_until(lambda: _partitions(cluster, "confluent") is None, "the topic deleted")


def test_kafka_python_admin(cluster: EmbeddedCluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_topics([KafkaNewTopic("kafka-python", 2, 3)])
        assert _partitions(cluster, "kafka-python") == 2
        admin.create_partitions({"kafka-python": KafkaNewPartitions(total_count=3)})
        assert _partitions(cluster, "kafka-python") == 3
        admin.alter_configs(
            [
                KafkaConfigResource(
                    KafkaResourceType.TOPIC, "kafka-python", configs={"retention.ms": "3600000"}
                )
            ]
        )
        assert _topic_configs(cluster, "kafka-python") == {"retention.ms": "3600000"}
        described = admin.describe_configs(
            [KafkaConfigResource(KafkaResourceType.TOPIC, "kafka-python")]
        )
        assert "3600000" in repr(described)
        _produce(cluster, "kafka-python", 10)
        admin.delete_records({KafkaTopicPartition("kafka-python", 0): 4})
        assert _log_start(cluster, "kafka-python") == 4
        answer = admin.elect_leaders(0, {"kafka-python": [0]}, raise_errors=False)
        ((partition,),) = (r.partition_result for r in answer.replica_election_results)
        assert (partition.partition_id, partition.error_code) == (0, 84)  # ELECTION_NOT_NEEDED
        admin.delete_topics(["kafka-python"])
        wait_until(lambda: _partitions(cluster, "kafka-python") is None, "the topic deleted")
    finally:
        admin.close()


def test_aiokafka_admin(cluster: EmbeddedCluster) -> None:
    async def administer() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([AioNewTopic("aiokafka", 2, 3)])
            assert _partitions(cluster, "aiokafka") == 2
            await admin.create_partitions({"aiokafka": AioNewPartitions(total_count=5)})
            assert _partitions(cluster, "aiokafka") == 5
            await admin.alter_configs(
                [AioConfigResource(AioResourceType.TOPIC, "aiokafka", {"segment.ms": "7200000"})]
            )
            assert _topic_configs(cluster, "aiokafka") == {"segment.ms": "7200000"}
            described = await admin.describe_configs(
                [AioConfigResource(AioResourceType.TOPIC, "aiokafka")]
            )
            assert "7200000" in repr(described)
            _produce(cluster, "aiokafka", 10)
            low = await admin.delete_records(
                {AioTopicPartition("aiokafka", 0): RecordsToDelete(before_offset=3)}
            )
            assert low == {AioTopicPartition("aiokafka", 0): 3}
            await admin.delete_topics(["aiokafka"])
        finally:
            await admin.close()

    asyncio.run(administer())
    wait_until(lambda: _partitions(cluster, "aiokafka") is None, "the topic deleted")


def test_a_preferred_election_brings_leadership_back_to_the_first_replica(tmp_path: Path) -> None:
    config = {"listeners": "PLAINTEXT://127.0.0.1:0", "replica.lag.time.max.ms": "2000"}
    with EmbeddedCluster(3, tmp_path, config, listen=True) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics([NewTopic("elected", 1, 3)]).values():
            future.result(WAIT)

        def registration() -> Any:
            topic = cluster.controller.image().topic("elected")
            assert topic is not None
            return topic.partitions[0]

        preferred = registration().replicas[0]
        cluster.stop_broker(preferred)
        wait_until(lambda: registration().leader not in (preferred, -1), "a new leader")
        cluster.start_broker(preferred)
        wait_until(lambda: preferred in registration().isr, "the preferred replica back in sync")
        assert registration().leader != preferred

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        elected = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elected", 0)])
        assert list(elected.result(WAIT).values()) == [None]
        assert registration().leader == preferred
