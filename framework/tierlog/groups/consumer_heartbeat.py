"""ConsumerGroupHeartbeat: one member's join, heartbeat, reconciliation step or leave (KIP-848).

Every heartbeat runs the same three steps as Kafka's coordinator: update the member (its
subscription changing, or the subscribed topics changing, moves the group epoch); recompute
the target assignment with the group's assignor if the group epoch is past the assignment
epoch; move the member one step towards its target (``consumer_reconciliation.py``). The
outcome is records to append (the group changes only when they are replayed), the answer, and
what to do with the member's session and rebalance timers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import attrs

from ..errors import (
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)
from ..model import Uuid
from . import consumer_records as cr
from .consumer_group import ConsumerGroup
from .consumer_member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from .consumer_protocol import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from .consumer_reconciliation import reconcile
from .consumer_target import (
    TopicsView,
    subscription_metadata,
    target_assignment,
)
from .consumer_validation import check_member_epoch, validate
from .records import CoordinatorRecord

log = logging.getLogger(__name__)


@attrs.frozen
class ConsumerGroupSettings:
    """The broker's ``group.consumer.*`` settings a heartbeat needs."""

    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    """The server-side assignors offered; the first is the default."""


@attrs.define
class HeartbeatOutcome:
    """What one heartbeat (or a timer's fencing) does."""

    records: list[CoordinatorRecord]
    response: ConsumerGroupHeartbeatResponse
    arm_session: str | None = None
    """The member whose session timer restarts."""
    arm_rebalance: tuple[str, int, int] | None = None
    """(member, epoch, timeout ms): fence the member if it is still revoking at that epoch."""
    disarm: list[str] = attrs.field(factory=list)
    """Members whose timers all stop (they left, or were replaced)."""
    disarm_rebalance: list[str] = attrs.field(factory=list)


def _owned(request: ConsumerGroupHeartbeatRequest) -> dict[Uuid, frozenset[int]] | None:
    if request.topic_partitions is None:
        return None
    return {tp.topic_id: frozenset(tp.partitions) for tp in request.topic_partitions}


def heartbeat(
    group: ConsumerGroup | None,
    request: ConsumerGroupHeartbeatRequest,
    settings: ConsumerGroupSettings,
    topics: TopicsView,
    new_member_id: str,
) -> HeartbeatOutcome:
    """The outcome of ``request`` on ``group`` (None: no such group; one is made on a join).

    :param new_member_id: the id to give a v0 member joining without one.
    :raises TierlogError: the error to answer.
    """
    validate(request, settings.assignors)
    if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group {request.group_id} not found.")
        return leave(group, request, topics)
    joining = request.member_epoch == JOIN_EPOCH
    if group is None:
        if not joining:
            raise GroupIdNotFoundError(f"Consumer group {request.group_id} not found.")
        group = ConsumerGroup(request.group_id, settings.assignors[0])
    member_id = request.member_id or new_member_id
    if len(group.members) >= settings.max_size and (
        not request.member_id or member_id not in group.members
    ):
        raise GroupMaxSizeReachedError(
            f"The consumer group has reached its maximum capacity of {settings.max_size} members."
        )
    owned = _owned(request)
    records: list[CoordinatorRecord] = []
    outcome = HeartbeatOutcome(records, ConsumerGroupHeartbeatResponse())
    replaced: ConsumerGroupMember | None = None
    if request.instance_id is None:
        member = _dynamic_member(group, member_id, request.member_epoch, owned)
    else:
        member, replaced = _static_member(
            group, member_id, request.member_epoch, request.instance_id, owned
        )
    members = dict(group.members)
    targets = {m: dict(t) for m, t in group.target.items()}
    if replaced is not None:
        records += cr.member_tombstones(group.group_id, replaced.member_id)
        records.append(
            cr.target_member_record(group.group_id, member_id, group.target_of(replaced.member_id))
        )
        records.append(cr.current_assignment_record(group.group_id, member))
        del members[replaced.member_id]
        targets[member_id] = targets.pop(replaced.member_id, {})
        outcome.disarm.append(replaced.member_id)

    updated = attrs.evolve(
        member,
        instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms
        ),
        server_assignor=(
            request.server_assignor
            if request.server_assignor is not None
            else member.server_assignor
        ),
        subscribed_topic_names=(
            tuple(sorted(set(request.subscribed_topic_names)))
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            # The empty pattern is how a client says it subscribes to none.
            request.subscribed_topic_regex or None
            if request.subscribed_topic_regex is not None
            else member.subscribed_topic_regex
        ),
        client_id=request.client_id,
        client_host=request.client_host,
    )
    bump = False
    existing = group.members.get(member_id)
    if existing is None or updated != member:
        records.append(cr.member_record(group.group_id, updated))
        bump = (
            (existing is None and replaced is None)
            or updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
        )
    members[member_id] = updated
    metadata = subscription_metadata(members.values(), topics)
    if metadata != group.subscription_metadata:
        bump = True
        records.append(cr.subscription_metadata_record(group.group_id, metadata))
    group_epoch = group.group_epoch
    if bump:
        group_epoch += 1
        records.append(cr.group_epoch_record(group.group_id, group_epoch))
        log.info("consumer group %s: group epoch %d", group.group_id, group_epoch)

    target_epoch = group.assignment_epoch
    if group_epoch > target_epoch:
        targets = target_assignment(
            group, members, targets, metadata, topics, settings.assignors[0], records
        )
        target_epoch = group_epoch
        records.append(cr.target_epoch_record(group.group_id, target_epoch))

    ignore = {member_id} | ({replaced.member_id} if replaced is not None else set())

    def partition_epoch(topic: Uuid, partition: int) -> int:
        holder = group.partition_holders.get((topic, partition))
        if holder is None or holder[0] in ignore:
            return -1
        return holder[1]

    reconciled = updated
    if not updated.is_reconciled_to(target_epoch):
        reconciled = reconcile(
            updated, target_epoch, targets.get(member_id, {}), partition_epoch, owned
        )
    if reconciled != updated or (existing is None and replaced is None):
        records.append(cr.current_assignment_record(group.group_id, reconciled))
        if reconciled.state == MemberState.UNREVOKED_PARTITIONS:
            outcome.arm_rebalance = (
                member_id,
                reconciled.member_epoch,
                reconciled.rebalance_timeout_ms,
            )
        else:
            outcome.disarm_rebalance.append(member_id)
    outcome.arm_session = member_id
    full = joining or (
        request.rebalance_timeout_ms != -1
        and request.subscribed_topic_names is not None
        and owned is not None
    )
    assignment = None
    if full or reconciled.assigned != member.assigned:
        assignment = Assignment(
            [TopicPartitions(topic, sorted(parts)) for topic, parts in reconciled.assigned]
        )
    outcome.response = ConsumerGroupHeartbeatResponse(
        member_id=member_id,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        assignment=assignment,
    )
    return outcome


def _dynamic_member(
    group: ConsumerGroup,
    member_id: str,
    epoch: int,
    owned: Mapping[Uuid, frozenset[int]] | None,
) -> ConsumerGroupMember:
    existing = group.members.get(member_id)
    if epoch == JOIN_EPOCH:
        # A member joining again under its id (after being fenced) starts afresh.
        if existing is None:
            return ConsumerGroupMember(member_id)
        return attrs.evolve(
            existing,
            member_epoch=0,
            previous_member_epoch=0,
            state=MemberState.STABLE,
            assigned={},
            pending_revocation={},
        )
    if existing is None:
        raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
    check_member_epoch(existing, epoch, owned)
    return existing


def _static_member(
    group: ConsumerGroup,
    member_id: str,
    epoch: int,
    instance_id: str,
    owned: Mapping[Uuid, frozenset[int]] | None,
) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
    """The member, and the member it replaces (a static member coming back under a new id)."""
    existing = group.static_member(instance_id)
    if epoch == JOIN_EPOCH:
        if existing is None or existing.member_id == member_id:
            return _dynamic_member(group, member_id, epoch, owned), None
        if existing.member_epoch != STATIC_LEAVE_EPOCH:
            raise UnreleasedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} cannot join the group "
                f"because the instance id is owned by member {existing.member_id}."
            )
        successor = attrs.evolve(
            existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
        )
        return successor, existing
    if existing is None:
        raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        raise FencedInstanceIdError(
            f"Static member {member_id} with instance id {instance_id} was fenced by member "
            f"{existing.member_id}."
        )
    check_member_epoch(existing, epoch, owned)
    return existing, None


def leave(
    group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest, topics: TopicsView
) -> HeartbeatOutcome:
    """A member leaving (epoch -1), or a static member stepping out for now (epoch -2)."""
    response = ConsumerGroupHeartbeatResponse(
        member_id=request.member_id, member_epoch=request.member_epoch
    )
    if request.instance_id is None:
        member = group.members.get(request.member_id)
        if member is None:
            raise UnknownMemberIdError(
                f"Member {request.member_id} is not a member of group {group.group_id}."
            )
        log.info("consumer group %s: member %s left", group.group_id, request.member_id)
        return fence(group, member, topics, response)
    member = group.static_member(request.instance_id)
    if member is None:
        raise UnknownMemberIdError(f"Instance id {request.instance_id} is unknown.")
    if member.member_id != request.member_id:
        raise FencedInstanceIdError(
            f"Static member {request.member_id} with instance id {request.instance_id} was "
            f"fenced by member {member.member_id}."
        )
    if request.member_epoch == LEAVE_EPOCH:
        return fence(group, member, topics, response)
    away = attrs.evolve(member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={})
    return HeartbeatOutcome(
        [cr.current_assignment_record(group.group_id, away)],
        response,
        disarm_rebalance=[member.member_id],
    )


def fence(
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    topics: TopicsView,
    response: ConsumerGroupHeartbeatResponse | None = None,
) -> HeartbeatOutcome:
    """Removes ``member`` (it left, or its session or rebalance timeout passed): its records
    go, the group epoch moves so the others are given its partitions."""
    records = cr.member_tombstones(group.group_id, member.member_id)
    others = [m for m in group.members.values() if m.member_id != member.member_id]
    metadata = subscription_metadata(others, topics)
    if metadata != group.subscription_metadata:
        records.append(cr.subscription_metadata_record(group.group_id, metadata))
    records.append(cr.group_epoch_record(group.group_id, group.group_epoch + 1))
    return HeartbeatOutcome(
        records,
        response or ConsumerGroupHeartbeatResponse(),
        disarm=[member.member_id],
    )
