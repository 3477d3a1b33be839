"""The group coordinator's metrics, with Kafka's group and names (``GroupCoordinatorMetrics``).

Group ``group-coordinator-metrics``: ``group-count`` (tag ``protocol``: ``classic``) and
``offset-count``, over the shards this broker coordinates; meters ``offset-commit-rate``,
``offset-expiration-rate``, ``offset-deletion-rate`` and ``group-completed-rebalance-rate``
(Kafka's rate and count pairs: a meter holds both).
"""

from __future__ import annotations

from collections.abc import Callable

from ..metrics import MetricName, MetricsRegistry

METRICS_GROUP = "group-coordinator-metrics"


class CoordinatorMetrics:
    def __init__(
        self,
        registry: MetricsRegistry,
        classic_groups: Callable[[], int],
        offsets: Callable[[], int],
    ) -> None:
        self._registry = registry
        self._names = [
            MetricName(METRICS_GROUP, "group-count", {"protocol": "classic"}),
            MetricName(METRICS_GROUP, "offset-count"),
        ]
        registry.gauge(self._names[0], classic_groups)
        registry.gauge(self._names[1], offsets)
        meters = {
            name: MetricName(METRICS_GROUP, name)
            for name in (
                "offset-commit-rate",
                "offset-expiration-rate",
                "offset-deletion-rate",
                "group-completed-rebalance-rate",
            )
        }
        self._names += meters.values()
        self.offset_commits = registry.meter(meters["offset-commit-rate"])
        self.offset_expirations = registry.meter(meters["offset-expiration-rate"])
        self.offset_deletions = registry.meter(meters["offset-deletion-rate"])
        self.rebalances = registry.meter(meters["group-completed-rebalance-rate"])

    def close(self) -> None:
        for name in self._names:
            self._registry.remove(name)
