"""The plugin's metrics: traffic, request latency, errors and retries per topic and partition,
and the chunk cache's statistics.

Names live in the ``RemoteStorageManager`` group; the host's view adds ``plugin`` and ``role``
tags. Per-partition metrics are created once and kept, so the hot read path does not pay for a
registry lookup per call. No storage option ever becomes part of a name or a tag.
"""

from __future__ import annotations

import threading
from typing import Final

from tierlog.metrics import Counter, Meter, MetricName, MetricsRegistry, MetricsView, Timer
from tierlog.model import TopicIdPartition

GROUP: Final = "RemoteStorageManager"
OPERATIONS: Final = ("put", "get", "delete")


class PartitionMetrics:
    """Every metric of one topic partition."""

    def __init__(self, scope: MetricsView, tags: dict[str, str | int]) -> None:
        def name(metric: str, **extra: str) -> MetricName:
            return MetricName(GROUP, metric, {**tags, **extra})

        self.bytes_uploaded: Meter = scope.meter(name("BytesUploaded"))
        self.objects_uploaded: Meter = scope.meter(name("ObjectsUploaded"))
        self.bytes_fetched: Meter = scope.meter(name("BytesFetched"))
        self.objects_fetched: Meter = scope.meter(name("ObjectsFetched"))
        self.objects_deleted: Meter = scope.meter(name("ObjectsDeleted"))
        self.bytes_deleted: Meter = scope.meter(name("BytesDeleted"))
        self.segment_copy_time: Timer = scope.timer(name("SegmentCopyTimeMs"))
        self.cache_hits: Counter = scope.counter(name("ChunkCacheHits"))
        self.cache_misses: Counter = scope.counter(name("ChunkCacheMisses"))
        self.prefetched_chunks: Counter = scope.counter(name("PrefetchedChunks"))
        self.request_time: dict[str, Timer] = {
            op: scope.timer(name("RequestTimeMs", operation=op)) for op in OPERATIONS
        }
        self.errors: dict[str, Counter] = {
            op: scope.counter(name("RequestErrors", operation=op)) for op in OPERATIONS
        }
        self.retries: dict[str, Counter] = {
            op: scope.counter(name("RequestRetries", operation=op)) for op in OPERATIONS
        }


class StorageMetrics:
    """Creates per-partition metrics on first use; rebinds to the host's view when it comes."""

    def __init__(self, scope: MetricsView | None = None) -> None:
        self._lock = threading.Lock()
        self._scope = scope if scope is not None else MetricsRegistry().view()
        self._partitions: dict[TopicIdPartition, PartitionMetrics] = {}
        self.cache_evictions: Counter = self._scope.counter(
            MetricName(GROUP, "ChunkCacheEvictions")
        )

    @property
    def scope(self) -> MetricsView:
        return self._scope

    def bind(self, scope: MetricsView) -> None:
        """Start recording into ``scope`` (the view the host hands the plugin)."""
        with self._lock:
            self._scope = scope
            self._partitions = {}
            self.cache_evictions = scope.counter(MetricName(GROUP, "ChunkCacheEvictions"))

    def partition(self, topic_id_partition: TopicIdPartition) -> PartitionMetrics:
        found = self._partitions.get(topic_id_partition)
        if found is not None:
            return found
        with self._lock:
            found = self._partitions.get(topic_id_partition)
            if found is None:
                found = PartitionMetrics(
                    self._scope,
                    {
                        "topic": topic_id_partition.topic,
                        "partition": topic_id_partition.partition,
                    },
                )
                self._partitions[topic_id_partition] = found
            return found

    def cache_gauges(self, size_bytes: object, entries: object) -> None:
        """Register the cache's size and entry-count gauges (functions read at export)."""
        self._scope.gauge(MetricName(GROUP, "ChunkCacheSizeBytes"), size_bytes)  # type: ignore[arg-type]
        self._scope.gauge(MetricName(GROUP, "ChunkCacheEntries"), entries)  # type: ignore[arg-type]
