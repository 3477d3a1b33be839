"""Records produced with acks=all and read back whole, with kafka-python: what abuse of a
listener must never lose."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from tierlog.cluster import EmbeddedCluster


def produce_acked(
    cluster: EmbeddedCluster, topic: str, partitions: int, count: int
) -> dict[int, list[bytes]]:
    """``count`` records spread over the partitions of ``topic``, each acknowledged by the ISR;
    the values by partition, in the order they were written."""
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, acks="all", enable_idempotence=False
    )
    written: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    futures = []
    for n in range(count):
        value = b"%s record %d" % (topic.encode(), n)
        futures.append(producer.send(topic, value=value, partition=n % partitions))
        written[n % partitions].append(value)
    producer.flush()
    producer.close()
    for future in futures:
        assert future.succeeded(), future.exception
    return written


def read_back(cluster: EmbeddedCluster, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every record of ``topic`` from the start, by partition, in offset order."""
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=None,
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    read: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for message in consumer:
        read[message.partition].append(message.value)
    consumer.close()
    return read
