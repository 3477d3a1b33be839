"""The consumer-protocol groups' metrics, with Kafka 4's names (``GroupCoordinatorMetrics``).

Group ``group-coordinator-metrics``: ``group-count`` tagged ``protocol=consumer`` (beside the
classic count), ``consumer-group-count`` tagged ``state`` (Empty, Assigning, Reconciling,
Stable, Dead), over the shards this broker coordinates; and the meter
``consumer-group-rebalance-rate`` (rate and count), one for every group epoch bump.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..metrics import MetricName, MetricsRegistry
from .consumer_group import ConsumerGroup, ConsumerGroupState
from .metrics import METRICS_GROUP
from .shard import ShardState

if TYPE_CHECKING:
    from .shard import CoordinatorShard


class ConsumerGroupMetrics:
    def __init__(
        self, registry: MetricsRegistry, shards: Callable[[], list[CoordinatorShard]]
    ) -> None:
        self._registry = registry
        self._shards = shards
        total = MetricName(METRICS_GROUP, "group-count", {"protocol": "consumer"})
        registry.gauge(total, lambda: sum(1 for _ in self._groups()))
        self._names = [total]
        for state in ConsumerGroupState:
            name = MetricName(METRICS_GROUP, "consumer-group-count", {"state": state.value})
            registry.gauge(name, self._counter(state))
            self._names.append(name)
        rebalances = MetricName(METRICS_GROUP, "consumer-group-rebalance-rate")
        self.rebalances = registry.meter(rebalances)
        self._names.append(rebalances)

    def _groups(self) -> Iterator[ConsumerGroup]:
        for shard in self._shards():
            if shard.state is ShardState.ACTIVE:
                for group in list(shard.groups.values()):
                    if isinstance(group, ConsumerGroup):
                        yield group

    def _counter(self, state: ConsumerGroupState) -> Callable[[], int]:
        return lambda: sum(1 for g in self._groups() if g.state is state)

    def close(self) -> None:
        for name in self._names:
            self._registry.remove(name)
