"""Kafka's request and network metrics for the wire listener, with Kafka's groups and tags.

* ``RequestMetrics``: ``RequestsPerSec{request,version}`` (meter), ``ErrorsPerSec{request,error}``
  (meter, one mark per error code in a response, NONE included, as Kafka counts), and the
  timers ``TotalTimeMs``, ``RequestQueueTimeMs``, ``LocalTimeMs``, ``ResponseSendTimeMs``
  ``{request}`` in milliseconds.
* ``socket-server-metrics{listener}``: ``connection-count`` (gauge),
  ``connection-creation-rate`` (meter), ``request-rate`` and ``incoming-byte-rate`` (meters:
  every request frame read whole, and its bytes, size prefix included, as Kafka's selector
  counts a completed receive, whether or not it then decodes).
* ``SocketServer``: ``NetworkProcessorAvgIdlePercent``: the share of the connection threads'
  time spent waiting for the next request, since the gauge was last read (1.0 = all idle).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from kafka.errors import for_code

from ..metrics import MetricName, MetricsRegistry

REQUEST_METRICS = "RequestMetrics"
SOCKET_SERVER_METRICS = "socket-server-metrics"
SOCKET_SERVER = "SocketServer"


def error_name(code: int) -> str:
    """Kafka's name of an error code (``NOT_LEADER_OR_FOLLOWER``); ``NONE`` for 0."""
    if code == 0:
        return "NONE"
    name = getattr(for_code(code), "message", None)
    return name if isinstance(name, str) and name else f"UNKNOWN_{code}"


def error_codes(message: Any) -> Iterator[int]:
    """Every ``error_code`` anywhere in a codec message."""
    struct = getattr(type(message), "_struct", None)
    if struct is None:
        return
    for field in struct._fields:
        value = getattr(message, field.name, None)
        if field.name == "error_code" and isinstance(value, int):
            yield value
        elif value is not None and field.is_struct_array():
            for item in value:
                yield from error_codes(item)
        elif value is not None and field.is_struct():
            yield from error_codes(value)


class NetworkMetrics:
    """The listener's metrics in one registry."""

    def __init__(self, registry: MetricsRegistry, listener: str) -> None:
        self.registry = registry
        self._listener_tags = {"listener": listener}
        self._lock = threading.Lock()
        self._connections = 0
        self._idle_s = 0.0
        self._busy_s = 0.0
        registry.gauge(
            MetricName(SOCKET_SERVER_METRICS, "connection-count", self._listener_tags),
            lambda: self._connections,
        )
        self._creation = registry.meter(
            MetricName(SOCKET_SERVER_METRICS, "connection-creation-rate", self._listener_tags)
        )
        self._received = registry.meter(
            MetricName(SOCKET_SERVER_METRICS, "request-rate", self._listener_tags)
        )
        self._received_bytes = registry.meter(
            MetricName(SOCKET_SERVER_METRICS, "incoming-byte-rate", self._listener_tags)
        )
        registry.gauge(
            MetricName(SOCKET_SERVER, "NetworkProcessorAvgIdlePercent"), self._idle_share
        )

    def connection_opened(self) -> None:
        with self._lock:
            self._connections += 1
        self._creation.mark()

    def connection_closed(self) -> None:
        with self._lock:
            self._connections -= 1

    def received(self, frame_size: int) -> None:
        """A request frame of ``frame_size`` bytes (prefix excluded) was read whole."""
        self._received.mark()
        self._received_bytes.mark(frame_size + 4)

    def waited(self, idle_s: float, busy_s: float) -> None:
        """A connection thread waited ``idle_s`` for a request and then worked ``busy_s``."""
        with self._lock:
            self._idle_s += idle_s
            self._busy_s += busy_s

    def _idle_share(self) -> float:
        with self._lock:
            idle, busy = self._idle_s, self._busy_s
            self._idle_s = self._busy_s = 0.0
        total = idle + busy
        return 1.0 if total <= 0 else idle / total

    def request_done(
        self,
        request: str,
        version: int,
        response: Any,
        *,
        queue_ms: float,
        local_ms: float,
        send_ms: float,
    ) -> None:
        registry = self.registry
        registry.meter(
            MetricName(REQUEST_METRICS, "RequestsPerSec", {"request": request, "version": version})
        ).mark()
        tags = {"request": request}
        registry.timer(MetricName(REQUEST_METRICS, "RequestQueueTimeMs", tags)).update(queue_ms)
        registry.timer(MetricName(REQUEST_METRICS, "LocalTimeMs", tags)).update(local_ms)
        registry.timer(MetricName(REQUEST_METRICS, "ResponseSendTimeMs", tags)).update(send_ms)
        registry.timer(MetricName(REQUEST_METRICS, "TotalTimeMs", tags)).update(
            queue_ms + local_ms + send_ms
        )
        if response is not None:
            for code in error_codes(response):
                registry.meter(
                    MetricName(
                        REQUEST_METRICS,
                        "ErrorsPerSec",
                        {"request": request, "error": error_name(code)},
                    )
                ).mark()

    def close(self) -> None:
        """Drops the connection gauges (request meters stay with the broker's registry)."""
        for name in (
            MetricName(SOCKET_SERVER_METRICS, "connection-count", self._listener_tags),
            MetricName(SOCKET_SERVER_METRICS, "connection-creation-rate", self._listener_tags),
            MetricName(SOCKET_SERVER_METRICS, "request-rate", self._listener_tags),
            MetricName(SOCKET_SERVER_METRICS, "incoming-byte-rate", self._listener_tags),
            MetricName(SOCKET_SERVER, "NetworkProcessorAvgIdlePercent"),
        ):
            self.registry.remove(name)


def elapsed_ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0
