"""Partition reassignment (KIP-455) as steps on one partition's registration.

While a partition moves, its replicas are the target followed by the replicas leaving,
``adding_replicas`` the targets that were not replicas before and ``removing_replicas`` those
leaving. Once every target is in the ISR the reassignment settles on the targets; a leader not
among them hands over to the first live in-sync target, with a new leader epoch. Cancelling goes
back to the replicas from before. The controller applies these steps under its lock, saves and
publishes the result, and tells the brokers; nothing here sends or stores anything.
"""

from __future__ import annotations

from collections.abc import Set

import attrs

from ..errors import InvalidReplicaAssignmentError, NoReassignmentInProgressError
from ..model import TopicPartition
from . import protocol as p
from .image import PartitionRegistration


def started(
    tp: TopicPartition,
    reg: PartitionRegistration,
    target: tuple[int, ...],
    cluster_brokers: tuple[int, ...],
) -> PartitionRegistration | None:
    """``reg`` moving to ``target``, or None when nothing changes.

    A reassignment already under way counts with all its replicas as the current ones, so the
    new target replaces it.
    """
    if not target:
        raise InvalidReplicaAssignmentError(f"{tp}: the target replica list is empty")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignmentError(f"{tp}: {list(target)} lists a broker twice")
    unknown = [b for b in target if b not in cluster_brokers]
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"{tp}: brokers {unknown} are not in the cluster (brokers: {list(cluster_brokers)})"
        )
    if target == reg.replicas and not reg.reassigning:
        return None
    removing = tuple(b for b in reg.replicas if b not in target)
    return attrs.evolve(
        reg,
        replicas=(*target, *removing),
        adding_replicas=tuple(b for b in target if b not in reg.replicas),
        removing_replicas=removing,
        partition_epoch=reg.partition_epoch + 1,
    )


def cancelled(
    tp: TopicPartition, reg: PartitionRegistration, live: Set[int]
) -> PartitionRegistration:
    """``reg`` back on the replicas from before its reassignment (the replicas that were being
    added are ``reg.adding_replicas``, for the caller to stop)."""
    if not reg.reassigning:
        raise NoReassignmentInProgressError(f"{tp}: no reassignment is in progress")
    original = tuple(b for b in reg.replicas if b not in reg.adding_replicas)
    isr = tuple(b for b in reg.isr if b in original)
    if not isr:
        raise InvalidReplicaAssignmentError(
            f"{tp}: only added replicas {list(reg.isr)} are in sync; cancelling would "
            "leave no in-sync replica (reassign to them instead)"
        )
    return settled(reg, original, isr, live)


def completed(reg: PartitionRegistration, live: Set[int]) -> PartitionRegistration | None:
    """``reg`` settled on its targets if it is reassigning and every target is in sync."""
    if not reg.reassigning:
        return None
    target = reg.target_replicas
    if not set(target) <= set(reg.isr):
        return None
    return settled(reg, target, tuple(b for b in reg.isr if b in target), live)


def settled(
    reg: PartitionRegistration, replicas: tuple[int, ...], isr: tuple[int, ...], live: Set[int]
) -> PartitionRegistration:
    """The reassignment ended on ``replicas``; a leader not among them hands over to the first
    live in-sync one, with a new leader epoch."""
    leader, leader_epoch = reg.leader, reg.leader_epoch
    if leader not in replicas:
        leader = next((b for b in replicas if b in isr and b in live), p.NO_LEADER)
        leader_epoch += 1
    return PartitionRegistration(
        replicas=replicas,
        isr=isr,
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=reg.partition_epoch + 1,
    )


def ongoing(
    reg: PartitionRegistration | None, partition: int
) -> p.OngoingPartitionReassignment | None:
    """ListPartitionReassignments' answer for one partition; None when it is not moving."""
    if reg is None or not reg.reassigning:
        return None
    return p.OngoingPartitionReassignment(
        partition, reg.replicas, reg.adding_replicas, reg.removing_replicas
    )
