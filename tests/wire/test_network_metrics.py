"""Kafka's request and network metrics, counted by the listener as clients use it."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

from kafka.protocol.metadata.metadata import MetadataRequest
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.metrics import MetricName
from tierlog.metrics.prometheus import prometheus_text

from .raw import RawClient


def test_requests_errors_and_connections_are_counted_with_kafkas_names_and_tags(
    make_listening: Callable[..., EmbeddedCluster],
) -> None:
    cluster = make_listening()
    Admin(cluster.transport).create_topics([NewTopic("t", 1, 1)])
    with RawClient.to(cluster) as one, RawClient.to(cluster) as two:
        for _ in range(3):
            one.call(MetadataRequest(topics=None), 12)
        unknown = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="missing")],
            allow_auto_topic_creation=False,
        )
        two.call(unknown, 9)
        assert (
            cluster.metric(0, "socket-server-metrics", "connection-count", listener="PLAINTEXT")
            == 2
        )

    requests = cluster.metric(0, "RequestMetrics", "RequestsPerSec", request="Metadata", version=12)
    assert isinstance(requests, dict) and requests["count"] == 3
    v9 = cluster.metric(0, "RequestMetrics", "RequestsPerSec", request="Metadata", version=9)
    assert isinstance(v9, dict) and v9["count"] == 1
    errors = cluster.metric(
        0, "RequestMetrics", "ErrorsPerSec", request="Metadata", error="UNKNOWN_TOPIC_OR_PARTITION"
    )
    assert isinstance(errors, dict) and errors["count"] == 1
    for timer in ("TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs", "ResponseSendTimeMs"):
        value = cluster.metric(0, "RequestMetrics", timer, request="Metadata")
        assert isinstance(value, dict) and value["count"] == 4, timer
    created = cluster.metric(
        0, "socket-server-metrics", "connection-creation-rate", listener="PLAINTEXT"
    )
    assert isinstance(created, dict) and created["count"] == 2
    idle = cluster.metric(0, "SocketServer", "NetworkProcessorAvgIdlePercent")
    assert isinstance(idle, float) and 0.0 <= idle <= 1.0

    broker = cluster.broker(0)
    assert broker.plugin_host is not None
    text = prometheus_text(broker.plugin_host.metrics)
    assert (
        'tierlog_requestmetrics_requestspersec_total{request="Metadata",version="12"} 3.0' in text
    )
    assert MetricName("RequestMetrics", "TotalTimeMs", {"request": "Metadata"}) in (
        broker.plugin_host.metrics
    )


def test_every_request_frame_read_whole_is_counted_whether_or_not_it_decodes(
    make_listening: Callable[..., EmbeddedCluster],
) -> None:
    """Kafka's selector counts a completed receive (``request-rate``, ``incoming-byte-rate``)
    before anything parses it; a frame cut short is no receive."""
    cluster = make_listening()
    with RawClient.to(cluster) as good:
        good.call(MetadataRequest(topics=None), 12)
    undecodable = struct.pack(">hhih", 3, 12, 1, -1) + b"\xff" * 10
    with RawClient.to(cluster) as bad:
        bad.sock.sendall(struct.pack(">i", len(undecodable)) + undecodable)
        assert bad.sock.recv(10) == b""  # closed, after the frame was read whole
    with RawClient.to(cluster) as cut:
        cut.sock.sendall(struct.pack(">i", 100) + b"x" * 10)
        cut.sock.shutdown(socket.SHUT_WR)
        assert cut.sock.recv(10) == b""
    requests = cluster.metric(0, "socket-server-metrics", "request-rate", listener="PLAINTEXT")
    assert isinstance(requests, dict) and requests["count"] == 2
    size = cluster.metric(0, "socket-server-metrics", "incoming-byte-rate", listener="PLAINTEXT")
    metadata = MetadataRequest(topics=None)
    metadata.API_VERSION = 12
    metadata.with_header(correlation_id=1, client_id="raw-test")
    expected = len(metadata.encode(header=True, framed=True)) + 4 + len(undecodable)
    assert isinstance(size, dict) and size["count"] == expected
