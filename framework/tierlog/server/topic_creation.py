"""What a CreateTopics may ask for: partition counts, replication factors, manual replica
assignments, and the partition limits.

Kafka's rules (``ReplicationControlManager.createTopic`` and
``validateManualPartitionAssignment``), in Kafka's order:

- With ``assignments``, ``num_partitions`` and ``replication_factor`` must both be -1
  (INVALID_REQUEST). The partitions must be numbered 0..n-1, each once; every replica list must
  be non-empty, name brokers of the cluster, each once, all lists of the same length, and hold
  at least one live broker: INVALID_REPLICA_ASSIGNMENT otherwise.
- Without, ``replication_factor`` must be above 0 or -1 (``default.replication.factor``):
  INVALID_REPLICATION_FACTOR; ``num_partitions`` above 0 or -1 (``num.partitions``):
  INVALID_PARTITIONS; and there must be as many live brokers as replicas:
  INVALID_REPLICATION_FACTOR.

Then the limits, checked on the count alone before anything is allocated, so a request for
2**31 partitions costs nothing: ``max.partitions.per.request`` over all the topics of one
request and ``max.partitions`` over the cluster, both POLICY_VIOLATION naming the limit (the
error a KRaft controller gives an operation larger than it allows).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from ..config import BrokerConfig
from ..errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    PolicyViolationError,
)
from . import protocol as p


def plan_replicas(
    topic: p.CreatableTopic,
    config: BrokerConfig,
    brokers: Iterable[int],
    live: Sequence[int],
    *,
    existing: int,
    requested: int,
) -> list[tuple[int, ...]]:
    """The replicas of each partition of ``topic``, placed round-robin over ``live`` unless
    the topic gives them; raises the error to answer.

    ``existing`` is the cluster's partition count now (topics created by this request
    included) and ``requested`` what earlier topics of the same request asked for.
    """
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise InvalidRequestError(
                "give either assignments or num_partitions/replication_factor, not both"
            )
        check_partition_limits(len(topic.assignments), config, existing, requested)
        return check_assignments(topic.assignments, frozenset(brokers), frozenset(live))
    factor = topic.replication_factor
    if factor == 0 or factor < -1:
        raise InvalidReplicationFactorError(
            f"replication factor must be larger than 0, or -1 for the default, got {factor}"
        )
    partitions = topic.num_partitions
    if partitions == 0 or partitions < -1:
        raise InvalidPartitionsError(
            f"number of partitions must be larger than 0, or -1 for the default, got {partitions}"
        )
    if factor == -1:
        factor = config.get_int("default.replication.factor")
    if partitions == -1:
        partitions = config.get_int("num.partitions")
    if factor > len(live):
        raise InvalidReplicationFactorError(
            f"replication factor {factor} is larger than the {len(live)} available brokers"
        )
    check_partition_limits(partitions, config, existing, requested)
    start = existing
    return [
        tuple(live[(start + index + j) % len(live)] for j in range(factor))
        for index in range(partitions)
    ]


def check_partition_limits(count: int, config: BrokerConfig, existing: int, requested: int) -> None:
    per_request = config.get_int("max.partitions.per.request")
    if requested + count > per_request:
        raise PolicyViolationError(
            f"{count} partitions (with {requested} more earlier in the request) exceed "
            f"max.partitions.per.request = {per_request}"
        )
    total = config.get_int("max.partitions")
    if existing + count > total:
        raise PolicyViolationError(
            f"{count} more partitions would give the cluster {existing + count}, more than "
            f"max.partitions = {total}"
        )


def check_assignments(
    assignments: Sequence[p.CreatableReplicaAssignment],
    brokers: frozenset[int],
    live: frozenset[int],
) -> list[tuple[int, ...]]:
    """Manual replica assignments in partition order, if Kafka would take them."""
    by_index: dict[int, tuple[int, ...]] = {}
    factor: int | None = None
    for assignment in assignments:
        index, replicas = assignment.partition_index, tuple(assignment.broker_ids)
        if index in by_index:
            raise InvalidReplicaAssignmentError(f"partition {index} is assigned more than once")
        if not replicas:
            raise InvalidReplicaAssignmentError(f"partition {index} has an empty replica list")
        check_replica_brokers(index, replicas, brokers)
        if factor is not None and len(replicas) != factor:
            raise InvalidReplicaAssignmentError(
                f"partition {index} has {len(replicas)} replicas, the partitions before it {factor}"
            )
        factor = len(replicas)
        if not live.intersection(replicas):
            raise InvalidReplicaAssignmentError(
                f"no broker of partition {index} ({list(replicas)}) is alive"
            )
        by_index[index] = replicas
    if sorted(by_index) != list(range(len(by_index))):
        raise InvalidReplicaAssignmentError("partitions must be numbered 0, 1, 2... without gaps")
    return [by_index[i] for i in range(len(by_index))]


def check_replica_brokers(index: int, replicas: Sequence[int], brokers: Collection[int]) -> None:
    """An assignment names only brokers the cluster has, each once."""
    unknown = sorted(b for b in set(replicas) if b not in brokers)
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"partition {index} names brokers {unknown}, which the cluster does not have "
            f"(brokers: {sorted(brokers)})"
        )
    if len(set(replicas)) != len(replicas):
        raise InvalidReplicaAssignmentError(
            f"partition {index} names a broker more than once: {list(replicas)}"
        )
