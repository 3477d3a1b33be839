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


def read_back(
    cluster: EmbeddedCluster | str, topic: str, partitions: int
) -> dict[int, list[bytes]]:
    """Every record of ``topic`` from the start to the high watermark (as of now), by
    partition, in offset order; through ``cluster``'s listeners or the given servers."""
    servers = cluster if isinstance(cluster, str) else cluster.bootstrap_servers
    consumer = KafkaConsumer(
        bootstrap_servers=servers,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    assigned = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(assigned)
    ends = consumer.end_offsets(assigned)
    read: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        for _ in range(100):
            if all(consumer.position(tp) >= ends[tp] for tp in assigned):
                break
            for tp, records in consumer.poll(timeout_ms=200).items():
                read[tp.partition] += [record.value for record in records]
        else:
            raise AssertionError(f"{topic} could not be read to its end {ends}")
    finally:
        consumer.close()
    return read
