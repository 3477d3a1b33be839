"""A broker process that restarts reopens its logs with their topics' stored configs.

In a multi-process cluster no image has reached a starting broker when it opens its logs, so the
topic configs come from ZooKeeper. A tiered log opened with the broker's defaults instead would
take its first local offset for its log start and no longer serve what only remote storage
holds, although every record was acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from tierlog.coordination.zookeeper_server import ZooKeeperEnsemble
from tierlog.log import files
from tierlog.model import TopicPartition
from tierlog.testing.processes import ProcessCluster, wait_until

from .conftest import tiered_settings
from .workload import CLIENT_LOG, bucket_manifests, create_topic, read_partition, watermarks

TOPIC = "ledger"
RECORDS = 600


@pytest.fixture
def lone_broker(
    tmp_path: Path, single_zookeeper: ZooKeeperEnsemble, bucket: Path
) -> Iterator[ProcessCluster]:
    settings = {
        **tiered_settings(bucket),
        "log.retention.check.interval.ms": 500,
        "offsets.topic.replication.factor": 1,
        "rlmm.config.remote.log.metadata.topic.replication.factor": 1,
    }
    with ProcessCluster(
        tmp_path / "brokers", single_zookeeper.connect_string, 1, settings=settings
    ) as running:
        yield running


def _first_local_offset(cluster: ProcessCluster) -> int:
    directory = cluster.broker(0).log_dir / files.log_dir_name(TopicPartition(TOPIC, 0))
    return min(
        files.offset_from_file_name(p.name)
        for p in directory.iterdir()
        if files.is_segment_file(p.name, files.LOG_SUFFIX)
    )


def _log_start(cluster: ProcessCluster) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers(),
            "group.id": "probe",
            "logger": CLIENT_LOG,
        }
    )
    try:
        return watermarks(consumer, TOPIC, 0)[0]
    finally:
        consumer.close()


@pytest.mark.parametrize("stop", ["kill", "terminate"])
def test_a_restarted_broker_serves_a_tiered_log_from_its_remote_start(
    lone_broker: ProcessCluster, bucket: Path, stop: str
) -> None:
    cluster = lone_broker
    create_topic(
        cluster,
        TOPIC,
        1,
        replication_factor=1,
        **{"remote.storage.enable": "true", "segment.bytes": 4096, "local.retention.ms": 500},
    )
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all", "logger": CLIENT_LOG}
    )
    for n in range(RECORDS):
        producer.produce(TOPIC, b"r%05d" % n + bytes(40), partition=0)
    assert producer.flush(60) == 0
    wait_until(
        lambda: _first_local_offset(cluster) > 0 and bucket_manifests(bucket, TOPIC),
        60,
        "segments tiered and deleted from the local disk",
    )
    assert _log_start(cluster) == 0

    getattr(cluster.broker(0), stop)()
    cluster.restart(0)

    first_local = _first_local_offset(cluster)
    assert first_local > 0, "the restarted broker still holds the first segment locally"
    assert _log_start(cluster) == 0, f"the log start rose to a local offset ({first_local})"
    records = read_partition(cluster.bootstrap_servers(), TOPIC, 0)
    assert sorted(records) == list(range(RECORDS))
    assert all(value.startswith(f"r{o:05d}") for o, value in records.items())
