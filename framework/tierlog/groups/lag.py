"""Consumer lag as a broker metric, per group and partition.

Kafka's brokers do not export lag; operators run an exporter next to them that polls committed
offsets and log-end offsets (kafka_exporter's ``kafka_consumergroup_lag{consumergroup, topic,
partition}``, Burrow, kafka-lag-exporter). The group coordinator already holds the committed
offsets, so each broker exports the same figures for the groups it coordinates:

* ``MetricName("ConsumerGroup", "Lag", {"consumergroup", "topic", "partition"})``: the
  partition's high watermark minus the group's committed offset (what
  ``kafka-consumer-groups.sh --describe`` shows as LAG). In Prometheus it reads
  ``tierlog_consumergroup_lag{consumergroup=..., topic=..., partition=...}``, the exporter's
  series under tierlog's prefix, so existing dashboards and alerts carry over.
* ``MetricName("ConsumerGroup", "CurrentOffset", ...)``: the committed offset itself.

The figures are refreshed every :data:`REFRESH_INTERVAL_S` seconds (one ListOffsets per
partition leader, as an exporter would) and on :meth:`ConsumerLagMetrics.refresh`; a group whose
offsets are deleted or expire, or whose coordinator moves to another broker, drops out at the
next refresh.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import defaultdict
from typing import TYPE_CHECKING, Final

from ..metrics import MetricName
from ..model import TopicPartition
from ..server import protocol as p
from .shard import ShardState

if TYPE_CHECKING:
    from ..metrics.registry import MetricsScope
    from .runtime import GroupCoordinator

log = logging.getLogger(__name__)

__all__ = ["METRICS_GROUP", "REFRESH_INTERVAL_S", "ConsumerLagMetrics"]

METRICS_GROUP: Final = "ConsumerGroup"
REFRESH_INTERVAL_S: Final = 5.0

_Key = tuple[str, TopicPartition]


class ConsumerLagMetrics:
    """Keeps one lag and one committed-offset gauge per (group, partition) this broker
    coordinates, refreshed in a thread of its own."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        metrics: MetricsScope,
        interval_s: float = REFRESH_INTERVAL_S,
    ) -> None:
        self._coordinator = coordinator
        self._metrics = metrics
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._committed: dict[_Key, int] = {}
        self._ends: dict[TopicPartition, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"consumer-lag-{coordinator.broker_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with self._lock:
            for key in list(self._committed):
                self._drop(key)
            self._committed.clear()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.refresh()
            except Exception:  # a metric must never take the broker down
                log.exception("refreshing consumer lag failed; trying again later")

    # --- the figures --------------------------------------------------------------------------

    def refresh(self) -> None:
        """Reads the committed offsets of every group coordinated here and the log-end offsets
        of their partitions, then adds, updates and removes gauges to match."""
        committed = self._committed_offsets()
        ends = self._log_end_offsets({tp for _group, tp in committed})
        with self._lock:
            for key in set(self._committed) - set(committed):
                self._drop(key)
            added = set(committed) - set(self._committed)
            self._committed, self._ends = committed, ends
            for key in added:
                self._register(key)

    def lag(self, group_id: str, tp: TopicPartition) -> int | None:
        """The last refreshed lag, or None if unknown (no committed offset, no log end)."""
        with self._lock:
            offset = self._committed.get((group_id, tp))
            end = self._ends.get(tp)
        return None if offset is None or end is None else end - offset

    def _committed_offsets(self) -> dict[_Key, int]:
        found: dict[_Key, int] = {}
        for shard in self._coordinator.shards():
            with shard.lock:
                if shard.state is not ShardState.ACTIVE:
                    continue
                for group_id in shard.offsets.groups():
                    for tp, committed in shard.offsets.of_group(group_id).items():
                        found[(group_id, tp)] = committed.offset
        return found

    def _log_end_offsets(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks, asked of each partition's leader with one ListOffsets."""
        controller = self._coordinator.broker.controller
        image = controller.image()
        by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for tp in partitions:
            topic = image.topic(tp.topic)
            if topic is None or tp.partition >= len(topic.partitions):
                continue
            leader = topic.partitions[tp.partition].leader
            if leader >= 0:
                by_leader[leader][tp.topic].append(tp.partition)
        ends: dict[TopicPartition, int] = {}
        for leader, topics in by_leader.items():
            request = p.ListOffsetsRequest(
                [
                    p.ListOffsetsTopic(
                        name, [p.ListOffsetsPartition(i, p.OffsetSpec.LATEST) for i in indexes]
                    )
                    for name, indexes in topics.items()
                ]
            )
            try:
                response = controller.transport.send(leader, request, timeout_ms=5000)
            except Exception as err:  # the leader may be stopping; its partitions wait a round
                log.debug("consumer lag: ListOffsets to broker %d failed: %s", leader, err)
                continue
            for topic_response in response.topics:
                for part in topic_response.partitions:
                    if part.error_code == p.NONE and part.offset >= 0:
                        ends[TopicPartition(topic_response.name, part.partition_index)] = (
                            part.offset
                        )
        return ends

    # --- gauges -------------------------------------------------------------------------------

    @staticmethod
    def _names(key: _Key) -> tuple[MetricName, MetricName]:
        group_id, tp = key
        tags = {"consumergroup": group_id, "topic": tp.topic, "partition": tp.partition}
        return (
            MetricName(METRICS_GROUP, "Lag", tags),
            MetricName(METRICS_GROUP, "CurrentOffset", tags),
        )

    def _register(self, key: _Key) -> None:
        lag_name, offset_name = self._names(key)
        self._metrics.gauge(lag_name, lambda: self._lag_value(key))
        self._metrics.gauge(offset_name, lambda: self._offset_value(key))

    def _drop(self, key: _Key) -> None:
        for name in self._names(key):
            self._metrics.remove(name)

    def _lag_value(self, key: _Key) -> float:
        value = self.lag(*key)
        return math.nan if value is None else value  # NaN: the log end is not known yet

    def _offset_value(self, key: _Key) -> float:
        with self._lock:
            return self._committed.get(key, math.nan)
