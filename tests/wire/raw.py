"""A raw Kafka protocol client for tests: one socket, kafka-python's message classes, nothing
else between the test and the listener."""

from __future__ import annotations

import socket
import struct
from types import TracebackType
from typing import Any, Self

from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.producer.produce import ProduceRequest
from tierlog.cluster import EmbeddedCluster


class RawClient:
    """Sends requests at chosen versions and decodes the answers."""

    def __init__(self, address: str, timeout: float = 20.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation = 0

    @classmethod
    def to(cls, cluster: EmbeddedCluster, broker_id: int = 0) -> RawClient:
        endpoint = cluster.endpoints.snapshot()[broker_id]
        return cls(f"{endpoint.host}:{endpoint.port}")

    def send(self, request: Any, version: int) -> None:
        self._correlation += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self._correlation, client_id="raw-test")
        self.sock.sendall(request.encode(header=True, framed=True))

    def call(self, request: Any, version: int) -> Any:
        """``request`` at ``version``; the decoded response (its correlation id checked)."""
        self.send(request, version)
        response_class = request.header.get_response_class()
        response = response_class.decode(self.read_frame(), version=version, header=True)
        assert response.header.correlation_id == self._correlation
        return response

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def produce_request(topic: str, records: bytes | None, partition: int = 0, acks: int = -1) -> Any:
    """A Produce of one batch to one partition."""
    r = ProduceRequest
    return r(
        transactional_id=None,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            r.TopicProduceData(
                name=topic,
                partition_data=[
                    r.TopicProduceData.PartitionProduceData(index=partition, records=records)
                ],
            )
        ],
    )


def fetch_request(
    topic: str,
    offset: int,
    *,
    max_wait_ms: int = 0,
    partition: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
) -> Any:
    """A sessionless consumer Fetch of one partition."""
    f = FetchRequest
    return f(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            f.FetchTopic(
                topic=topic,
                partitions=[
                    f.FetchTopic.FetchPartition(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
