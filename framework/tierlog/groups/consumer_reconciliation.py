"""Moving one member from what it owns towards its target assignment (KIP-848 reconciliation).

A member never gets a partition another member still holds, and never moves to a new epoch
while it holds a partition the target gives away: it first revokes (staying at its epoch, in
UNREVOKED_PARTITIONS), then takes its new epoch and whatever of its target is free, waiting in
UNRELEASED_PARTITIONS for the rest. So no partition is consumed by two members of one epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from ..model import Uuid
from .consumer_member import ConsumerGroupMember, MemberState, TopicPartitions

PartitionEpoch = Callable[[Uuid, int], int]
"""The epoch of the member holding a partition, -1 when nobody does."""


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: TopicPartitions,
    partition_epoch: PartitionEpoch,
    owned: Mapping[Uuid, frozenset[int]] | None,
) -> ConsumerGroupMember:
    """The member after one heartbeat that reported ``owned`` (None: not reported)."""
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _still_owns(
    owned: Mapping[Uuid, frozenset[int]] | None, revoking: Mapping[Uuid, frozenset[int]]
) -> bool:
    """Whether the member may still hold any of ``revoking``: it does unless it says not."""
    if owned is None:
        return True
    return any(parts & revoking.get(topic, frozenset()) for topic, parts in owned.items())


def _next(
    member: ConsumerGroupMember,
    epoch: int,
    target_epoch: int,
    target: TopicPartitions,
    partition_epoch: PartitionEpoch,
    owned: Mapping[Uuid, frozenset[int]] | None,
) -> ConsumerGroupMember:
    current = member.assigned_partitions
    keep: dict[Uuid, frozenset[int]] = {}
    revoke: dict[Uuid, frozenset[int]] = {}
    take: dict[Uuid, frozenset[int]] = {}
    unreleased = False
    for topic in set(target) | set(current):
        wanted = target.get(topic, frozenset())
        has = current.get(topic, frozenset())
        keep[topic] = has & wanted
        revoke[topic] = has - wanted
        free = frozenset(p for p in wanted - has if partition_epoch(topic, p) == -1)
        unreleased = unreleased or len(free) < len(wanted - has)
        take[topic] = free
    revoke = {t: p for t, p in revoke.items() if p}
    if revoke and _still_owns(owned, revoke):
        return attrs.evolve(
            member.with_epoch(epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=keep,
            pending_revocation=revoke,
        )
    assigned = {t: keep.get(t, frozenset()) | take.get(t, frozenset()) for t in keep}
    return attrs.evolve(
        member.with_epoch(target_epoch),
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned=assigned,
        pending_revocation={},
    )
