"""The listener with kafka-python's own client and raw frames: what any Kafka client sees first."""

from __future__ import annotations

import select
import socket
import struct
from collections.abc import Callable

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.wire import APIS
from tierlog.wire.inter_broker_apis import INTER_BROKER_KEYS

from .raw import RawClient, fetch_request


def _connect(cluster: EmbeddedCluster) -> socket.socket:
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def test_kafka_python_produces_and_reads_back_every_record(
    make_listening: Callable[..., EmbeddedCluster],
) -> None:
    cluster = make_listening()
    Admin(cluster.transport).create_topics([NewTopic("t", 2, 1)])
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=False, acks="all"
    )
    sent = {(b"k%d" % i, b"v%d" % i) for i in range(500)}
    for key, value in sorted(sent):
        producer.send("t", key=key, value=value)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=None,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    consumer.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
    got = {(m.key, m.value) for m in consumer}
    consumer.close()
    assert got == sent


def test_api_versions_advertises_exactly_the_served_table(
    make_listening: Callable[..., EmbeddedCluster],
) -> None:
    cluster = make_listening()
    with _connect(cluster) as sock:
        request = ApiVersionsRequest[3](client_software_name="test", client_software_version="1")
        request.with_header(correlation_id=7, client_id="t")
        sock.sendall(request.encode(header=True, framed=True))
        response = ApiVersionsResponse.decode(_read_frame(sock), version=3, header=True)
    assert response.header.correlation_id == 7
    assert response.error_code == 0
    advertised = {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}
    served = {key: a for key, a in APIS.items() if key not in INTER_BROKER_KEYS}
    assert advertised == {key: (a.min_version, a.max_version) for key, a in served.items()}


def test_an_api_versions_request_newer_than_served_gets_the_v0_fallback(
    make_listening: Callable[..., EmbeddedCluster],
) -> None:
    """KIP-511: UNSUPPORTED_VERSION (35) in a v0 body, with the served ranges to retry within."""
    cluster = make_listening()
    with _connect(cluster) as sock:
        # ApiVersions v9, which nobody serves: header v2, no body the broker need understand.
        header = struct.pack(">hhih", 18, 9, 11, 1) + b"c" + b"\x00"
        sock.sendall(struct.pack(">i", len(header)) + header)
        frame = _read_frame(sock)
    response = ApiVersionsResponse.decode(frame, version=0, header=True)
    assert response.header.correlation_id == 11
    assert response.error_code == 35
    assert {a.api_key for a in response.api_keys} == set(APIS)


def test_requests_on_one_connection_are_answered_in_order_and_a_long_poll_blocks_no_other(
    make_listening: Callable[..., EmbeddedCluster],
) -> None:
    cluster = make_listening()
    Admin(cluster.transport).create_topics([NewTopic("idle", 1, 1)])
    with RawClient.to(cluster) as waiting, RawClient.to(cluster) as other:
        # A long poll on an empty partition, then a Metadata request behind it, pipelined.
        waiting.send(fetch_request("idle", 0, max_wait_ms=3000), 12)
        waiting.send(MetadataRequest(topics=None), 12)
        # Another connection is served while the long poll waits.
        answered = other.call(MetadataRequest(topics=None), 12)
        assert [t.name for t in answered.topics] == ["idle"]
        assert not _readable(waiting.sock)  # nothing answered yet on the waiting connection
        # Then the long poll's answer comes first, the Metadata answer second.
        first = FetchResponse.decode(waiting.read_frame(), version=12, header=True)
        second = MetadataResponse.decode(waiting.read_frame(), version=12, header=True)
    assert first.header.correlation_id == 1
    assert second.header.correlation_id == 2
    assert first.responses[0].partitions[0].records == b""


def _readable(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


def test_long_polls_hold_no_request_slot(make_listening: Callable[..., EmbeddedCluster]) -> None:
    """``queued.max.requests`` bounds requests read and not yet handled, as Kafka's request
    queue does: consumers waiting in long polls never starve another connection."""
    cluster = make_listening(queued_max_requests=2)
    Admin(cluster.transport).create_topics([NewTopic("idle", 1, 1)])
    with RawClient.to(cluster) as one, RawClient.to(cluster) as two, RawClient.to(cluster) as third:
        one.send(fetch_request("idle", 0, max_wait_ms=3000), 12)
        two.send(fetch_request("idle", 0, max_wait_ms=3000), 12)
        answered = third.call(MetadataRequest(topics=None), 12)
        assert [t.name for t in answered.topics] == ["idle"]
        assert not _readable(one.sock) and not _readable(two.sock)  # both still waiting
        for waiting in (one, two):
            response = FetchResponse.decode(waiting.read_frame(), version=12, header=True)
            assert response.responses[0].partitions[0].records == b""
