"""The gauges operators watch for replication and the controller, under Kafka's names.

``kafka.server:type=ReplicaManager``: ``UnderReplicatedPartitions`` (partitions led here whose
ISR is smaller than their replica set), ``UnderMinIsrPartitionCount`` (led here, with fewer in
sync than ``min.insync.replicas``: acks=all produces fail), ``LeaderCount`` and
``PartitionCount`` (replicas hosted). ``kafka.controller:type=KafkaController``:
``ActiveControllerCount`` (1 on the broker whose process holds the controller role, 0 on the
others: summed over a healthy cluster it is exactly 1), and, on that broker only, as in Kafka,
``OfflinePartitionsCount`` (partitions with no live leader), ``GlobalTopicCount`` and
``GlobalPartitionCount``. Every value is computed when read, from the broker's hosted replicas
and the image it holds, so a gauge can never lag behind what the broker itself answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..metrics import MetricName, MetricsRegistry
from . import protocol as p

if TYPE_CHECKING:
    from .broker import Broker

REPLICA_MANAGER = "ReplicaManager"
KAFKA_CONTROLLER = "KafkaController"


def register_replica_metrics(broker: Broker, metrics: MetricsRegistry) -> None:
    """Registers the gauges on the broker's registry (which goes with its plugin host)."""
    gauges = {
        MetricName(REPLICA_MANAGER, "UnderReplicatedPartitions"): lambda: _under_replicated(broker),
        MetricName(REPLICA_MANAGER, "UnderMinIsrPartitionCount"): lambda: _under_min_isr(broker),
        MetricName(REPLICA_MANAGER, "LeaderCount"): lambda: sum(
            1 for partition in broker.hosted_replicas() if partition.is_leader
        ),
        MetricName(REPLICA_MANAGER, "PartitionCount"): lambda: len(broker.hosted_replicas()),
        MetricName(KAFKA_CONTROLLER, "ActiveControllerCount"): lambda: int(
            holds_controller_role(broker)
        ),
        MetricName(KAFKA_CONTROLLER, "OfflinePartitionsCount"): lambda: _offline(broker),
        MetricName(KAFKA_CONTROLLER, "GlobalTopicCount"): lambda: _global(broker, topics=True),
        MetricName(KAFKA_CONTROLLER, "GlobalPartitionCount"): lambda: _global(broker, topics=False),
    }
    for name, read in gauges.items():
        metrics.gauge(name, read)


def holds_controller_role(broker: Broker) -> bool:
    """Whether the controller runs in this broker's stead: in a multi-process cluster, while
    its process holds the role; in an embedded one, for the broker the image names."""
    if broker.inter_broker_enabled:
        return broker.active_controller is not None
    return broker.controller.image().controller_id == broker.broker_id


def _under_replicated(broker: Broker) -> int:
    return sum(
        1
        for partition in broker.hosted_replicas()
        if partition.is_leader and len(partition.in_sync_replicas()) < len(partition.replicas)
    )


def _under_min_isr(broker: Broker) -> int:
    image = broker.controller.image()
    count = 0
    for partition in broker.hosted_replicas():
        if not partition.is_leader:
            continue
        minimum = broker.topic_config(image.topic(partition.topic_partition.topic))[
            "min.insync.replicas"
        ]
        assert isinstance(minimum, int)
        if len(partition.in_sync_replicas()) < minimum:
            count += 1
    return count


def _offline(broker: Broker) -> int:
    if not holds_controller_role(broker):
        return 0
    image = broker.controller.image()
    return sum(
        1
        for topic in image.topics.values()
        for reg in topic.partitions
        if reg.leader == p.NO_LEADER or reg.leader not in image.live_brokers
    )


def _global(broker: Broker, *, topics: bool) -> int:
    if not holds_controller_role(broker):
        return 0
    image = broker.controller.image()
    if topics:
        return len(image.topics)
    return sum(len(topic.partitions) for topic in image.topics.values())
