"""A real embedded cluster on real files, and helpers that speak the protocol to it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.records import (
    Compression,
    RecordBatchBuilder,
    iter_batches,
)
from tierlog.server import protocol as p

#: Record timestamps start here: "now", so broker-written markers do not roll segments by age.
T0 = int(time.time() * 1000)


def batch(
    count: int = 1,
    *,
    timestamp: int = T0,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    value_size: int = 20,
    tag: str = "v",
) -> bytes:
    """A batch of ``count`` records valued ``<tag>-0``, ``<tag>-1``..., timestamps from T0."""
    builder = RecordBatchBuilder(
        compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
    )
    for i in range(count):
        builder.append(timestamp + i, b"k", f"{tag}-{i}".encode().ljust(value_size, b"."))
    return builder.build()


def values(records: bytes) -> list[bytes]:
    """Every data record's value in ``records``, control batches skipped."""
    return [
        bytes(r.value or b"").rstrip(b".")
        for b in iter_batches(records)
        if not b.is_control
        for r in b.records()
    ]


def offsets(records: bytes) -> list[int]:
    return [r.offset for b in iter_batches(records) if not b.is_control for r in b.records()]


class Client:
    """Sends protocol requests to the right broker of a cluster, as a thin test client."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster
        self.transport = cluster.transport

    def any_broker(self) -> int:
        return self.transport.node_ids()[0]

    def create(
        self, name: str, partitions: int = 1, replication_factor: int = 1, **configs: str
    ) -> p.CreatableTopicResult:
        request = p.CreateTopicsRequest(
            [
                p.CreatableTopic(
                    name,
                    partitions,
                    replication_factor,
                    configs=[
                        p.CreatableTopicConfig(k.replace("_", "."), v) for k, v in configs.items()
                    ],
                )
            ]
        )
        result = self.transport.send(self.any_broker(), request).topics[0]
        assert result.error_code == p.NONE, result.error_message
        return result

    def metadata(self, *names: str) -> p.MetadataResponse:
        topics = [p.MetadataRequestTopic(n) for n in names] if names else None
        return self.transport.send(self.any_broker(), p.MetadataRequest(topics))

    def leader(self, topic: str, partition: int = 0) -> int:
        response = self.metadata(topic)
        return response.topics[0].partitions[partition].leader_id

    def produce(
        self, topic: str, partition: int, records: bytes, *, acks: int = -1
    ) -> p.PartitionProduceResponse:
        request = p.ProduceRequest(
            acks=acks,
            timeout_ms=5000,
            topic_data=[p.TopicProduceData(topic, [p.PartitionProduceData(partition, records)])],
        )
        response = self.transport.send(self.leader(topic, partition), request)
        return response.responses[0].partition_responses[0]

    def end_transaction(self, topic: str, partition: int, producer_id: int, *, commit: bool) -> int:
        """WriteTxnMarkers, as a transaction coordinator sends it; returns the error code."""
        request = p.WriteTxnMarkersRequest(
            [
                p.WritableTxnMarker(
                    producer_id, 0, commit, [p.WritableTxnMarkerTopic(topic, [partition])]
                )
            ]
        )
        response = self.transport.send(self.leader(topic, partition), request)
        return response.markers[0].topics[0].partitions[0].error_code

    def fetch(
        self,
        topic: str,
        partition: int = 0,
        offset: int = 0,
        *,
        max_bytes: int = 1 << 20,
        isolation_level: int = p.IsolationLevel.READ_UNCOMMITTED,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
    ) -> p.FetchPartitionData:
        request = p.FetchRequest(
            [p.FetchTopic(topic, [p.FetchPartition(partition, offset, max_bytes)])],
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            isolation_level=isolation_level,
        )
        response = self.transport.send(self.leader(topic, partition), request)
        return response.responses[0].partitions[0]

    def list_offset(
        self,
        topic: str,
        timestamp: int,
        partition: int = 0,
        *,
        isolation_level: int = p.IsolationLevel.READ_UNCOMMITTED,
    ) -> p.ListOffsetsPartitionResponse:
        request = p.ListOffsetsRequest(
            [p.ListOffsetsTopic(topic, [p.ListOffsetsPartition(partition, timestamp)])],
            isolation_level=isolation_level,
        )
        response = self.transport.send(self.leader(topic, partition), request)
        return response.topics[0].partitions[0]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """Three brokers, as the issue asks of tests."""
    with EmbeddedCluster(3, tmp_path / "data") as running:
        yield running


@pytest.fixture
def client(cluster: EmbeddedCluster) -> Client:
    return Client(cluster)
