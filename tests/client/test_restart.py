"""A clean cluster restart keeps every acknowledged record, topic id and config."""

from __future__ import annotations

from pathlib import Path

from tierlog.client import Admin, Consumer, NewTopic, Producer
from tierlog.client.admin import AlterConfig, ConfigResource

from .conftest import FAST_CLIENT, by_position, consume, partitions_of, start_cluster


def test_clean_restart_preserves_everything(tmp_path: Path) -> None:
    data_dir = tmp_path / "cluster"
    cluster = start_cluster(data_dir)
    try:
        with Admin(cluster.transport, FAST_CLIENT) as admin:
            ids = admin.create_topics(
                [
                    NewTopic("durable", 3, 3),
                    NewTopic("other", 1, 2, configs={"retention.ms": "86400000"}),
                ]
            )
            admin.alter_configs(
                {ConfigResource.topic("durable"): [AlterConfig("retention.bytes", "123456789")]}
            )
        with Producer(cluster.transport, {**FAST_CLIENT, "compression.type": "lz4"}) as producer:
            futures = [
                producer.send("durable", f"v{i}".encode(), key=f"k{i}".encode()) for i in range(300)
            ]
            futures.append(producer.send("other", b"only"))
            producer.flush()
            sent = {(m.partition, m.offset): m for m in (f.result() for f in futures[:-1])}
    finally:
        cluster.stop()

    cluster = start_cluster(data_dir)
    try:
        with Admin(cluster.transport, FAST_CLIENT) as admin:
            assert admin.list_topics() == {"durable", "other"}
            topics = admin.describe_topics(["durable", "other"])
            assert {name: info.topic_id for name, info in topics.items()} == ids
            assert topics["durable"].num_partitions == 3
            resource = ConfigResource.topic("durable")
            configs = admin.describe_configs([resource, ConfigResource.topic("other")])
            assert configs[resource]["retention.bytes"].value == "123456789"
            assert configs[ConfigResource.topic("other")]["retention.ms"].value == "86400000"
        consumer = Consumer(cluster.transport, {**FAST_CLIENT, "auto.offset.reset": "earliest"})
        try:
            consumer.assign(partitions_of("durable", 3) + partitions_of("other", 1))
            received = consume(consumer, 301)
        finally:
            consumer.close()
        durable = by_position(r for r in received if r.topic == "durable")
        assert set(durable) == set(sent)
        for position, record in durable.items():
            assert record.value is not None and record.key is not None
            assert record.key == b"k" + record.value[1:]
            assert sent[position].timestamp == record.timestamp
        assert [r.value for r in received if r.topic == "other"] == [b"only"]
        # New writes continue after the old ones.
        with Producer(cluster.transport, FAST_CLIENT) as producer:
            meta = producer.send("other", b"after").result()
        assert meta.offset == 1
    finally:
        cluster.stop()
