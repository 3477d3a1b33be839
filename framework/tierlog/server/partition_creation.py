"""What a CreatePartitions may ask for, and where the new partitions go.

Kafka's rules (``ReplicationControlManager.createPartitions``), each answered for its topic:

- The topic must exist (UNKNOWN_TOPIC_OR_PARTITION) and not be internal: INVALID_REQUEST.
  Kafka leaves internal topics to its authorizer; tierlog has none, and growing
  ``__remote_log_metadata`` would move where every partition's metadata lives.
- ``count`` must be above the current count: INVALID_PARTITIONS.
- Manual ``assignments`` give one replica list per new partition, each with the topic's
  replication factor, of brokers of the cluster, each once, and at least one live:
  INVALID_REPLICA_ASSIGNMENT otherwise. Without them the new partitions are placed
  round-robin over the live brokers as CreateTopics places a topic's, with the topic's
  replication factor (INVALID_REPLICATION_FACTOR if too few brokers are alive).
- The partition limits of CreateTopics apply to the partitions added (POLICY_VIOLATION).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import BrokerConfig
from ..errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
)
from . import protocol as p
from .image import TopicImage
from .internal_topics import is_internal
from .topic_creation import check_partition_limits, check_replica_brokers


def plan_new_partitions(
    topic: TopicImage,
    wanted: p.CreatePartitionsTopic,
    config: BrokerConfig,
    brokers: frozenset[int],
    live: Sequence[int],
    *,
    existing: int,
    requested: int,
) -> list[tuple[int, ...]]:
    """The replicas of each partition to add to ``topic``; raises the error to answer.

    ``existing`` is the cluster's partition count now and ``requested`` the partitions that
    earlier topics of the same request add.
    """
    if is_internal(topic.name):
        raise InvalidRequestError(
            f"internal topic {topic.name!r} belongs to the runtime: no partitions can be "
            "added to it"
        )
    current = len(topic.partitions)
    if wanted.count < current:
        raise InvalidPartitionsError(
            f"Topic currently has {current} partitions, which is higher than the requested "
            f"{wanted.count}."
        )
    if wanted.count == current:
        raise InvalidPartitionsError(f"Topic already has {current} partitions.")
    added = wanted.count - current
    factor = len(topic.partitions[0].target_replicas)
    if wanted.assignments is not None:
        if len(wanted.assignments) != added:
            raise InvalidReplicaAssignmentError(
                f"Attempted to add {added} additional partition(s), but only "
                f"{len(wanted.assignments)} assignment(s) were specified."
            )
        check_partition_limits(added, config, existing, requested)
        return [
            _checked_replicas(current + i, a.broker_ids, factor, brokers, frozenset(live))
            for i, a in enumerate(wanted.assignments)
        ]
    if factor > len(live):
        raise InvalidReplicationFactorError(
            f"the topic's replication factor {factor} is larger than the {len(live)} "
            "available brokers"
        )
    check_partition_limits(added, config, existing, requested)
    return [
        tuple(live[(existing + index + j) % len(live)] for j in range(factor))
        for index in range(added)
    ]


def _checked_replicas(
    index: int,
    replicas: tuple[int, ...],
    factor: int,
    brokers: frozenset[int],
    live: frozenset[int],
) -> tuple[int, ...]:
    if len(replicas) != factor:
        raise InvalidReplicaAssignmentError(
            f"partition {index} is assigned {len(replicas)} replicas, but the topic's "
            f"replication factor is {factor}"
        )
    check_replica_brokers(index, replicas, brokers)
    if not live.intersection(replicas):
        raise InvalidReplicaAssignmentError(
            f"no broker of partition {index} ({list(replicas)}) is alive"
        )
    return replicas
