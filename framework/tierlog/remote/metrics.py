"""The remote log manager's metrics, under Kafka's names so dashboards carry over.

Per-partition meters and gauges carry ``topic`` and ``partition`` tags (Kafka's
BrokerTopicMetrics tags them by topic; a partition tag costs nothing here and helps tests).
"""

from __future__ import annotations

from collections.abc import Callable

from ..metrics import MetricName, MetricsRegistry
from ..metrics.kinds import Gauge, Meter, Timer
from ..model import TopicPartition

TOPIC_GROUP = "BrokerTopicMetrics"
RLM_GROUP = "RemoteLogManager"
READER_GROUP = "RemoteStorageThreadPool"
DELAYED_GROUP = "DelayedRemoteFetchMetrics"
DELAYED_LIST_OFFSETS_GROUP = "DelayedRemoteListOffsetsMetrics"

COPY_BYTES = "RemoteCopyBytesPerSec"
COPY_REQUESTS = "RemoteCopyRequestsPerSec"
COPY_ERRORS = "RemoteCopyErrorsPerSec"
COPY_LAG_BYTES = "RemoteCopyLagBytes"
COPY_LAG_SEGMENTS = "RemoteCopyLagSegments"
FETCH_BYTES = "RemoteFetchBytesPerSec"
FETCH_REQUESTS = "RemoteFetchRequestsPerSec"
FETCH_ERRORS = "RemoteFetchErrorsPerSec"
DELETE_REQUESTS = "RemoteDeleteRequestsPerSec"
DELETE_ERRORS = "RemoteDeleteErrorsPerSec"
LOG_SIZE_BYTES = "RemoteLogSizeBytes"
METADATA_COUNT = "RemoteLogMetadataCount"
EMPTY_SNAPSHOTS = "EmptyProducerSnapshotsCreated"
READER_QUEUE_SIZE = "RemoteLogReaderTaskQueueSize"
READER_ACTIVE_THREADS = "RemoteLogReaderActiveThreads"
FETCH_TIME = "RemoteLogReaderFetchRateAndTimeMs"
EXPIRES = "ExpiresPerSec"

_PER_PARTITION = (
    COPY_BYTES,
    COPY_REQUESTS,
    COPY_ERRORS,
    COPY_LAG_BYTES,
    COPY_LAG_SEGMENTS,
    FETCH_BYTES,
    FETCH_REQUESTS,
    FETCH_ERRORS,
    DELETE_REQUESTS,
    DELETE_ERRORS,
    LOG_SIZE_BYTES,
    METADATA_COUNT,
    EMPTY_SNAPSHOTS,
)


def _tags(tp: TopicPartition) -> dict[str, str]:
    return {"topic": tp.topic, "partition": str(tp.partition)}


class RemoteMetrics:
    """Creates the remote metrics on first use and removes a partition's when it goes."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = registry

    def meter(self, name: str, tp: TopicPartition) -> Meter:
        return self.registry.meter(MetricName(TOPIC_GROUP, name, _tags(tp)))

    def gauge(self, name: str, tp: TopicPartition) -> Gauge:
        return self.registry.gauge(MetricName(TOPIC_GROUP, name, _tags(tp)))

    def broker_gauge(self, group: str, name: str, fn: Callable[[], int | float]) -> Gauge:
        return self.registry.gauge(MetricName(group, name), fn)

    def broker_meter(self, group: str, name: str) -> Meter:
        return self.registry.meter(MetricName(group, name))

    def timer(self, group: str, name: str) -> Timer:
        return self.registry.timer(MetricName(group, name))

    def remove_partition(self, tp: TopicPartition) -> None:
        for name in _PER_PARTITION:
            self.registry.remove(MetricName(TOPIC_GROUP, name, _tags(tp)))

    def remove_broker(self) -> None:
        for group, name in (
            (READER_GROUP, READER_QUEUE_SIZE),
            (READER_GROUP, READER_ACTIVE_THREADS),
        ):
            self.registry.remove(MetricName(group, name))
