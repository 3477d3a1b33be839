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
import re
from collections.abc import Iterable, Mapping
from typing import Protocol

import attrs

from ..errors import (
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)
from ..model import Uuid
from . import consumer_records as cr
from .assignors import ASSIGNORS, MemberSpec
from .consumer_group import ConsumerGroup, TopicMetadata
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


class TopicsView(Protocol):
    """The cluster's topics as the coordinator sees them."""

    def topic(self, name: str) -> TopicMetadata | None: ...

    def names(self) -> Iterable[str]:
        """Every topic a regular expression may match (internal topics left out)."""
        ...


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


def validate(request: ConsumerGroupHeartbeatRequest, settings: ConsumerGroupSettings) -> None:
    """Kafka's checks on a heartbeat before the group is looked at."""
    if not request.group_id:
        raise InvalidRequestError("GroupId can't be empty.")
    if request.instance_id == "":
        raise InvalidRequestError("InstanceId can't be empty.")
    if request.rack_id == "":
        raise InvalidRequestError("RackId can't be empty.")
    epoch = request.member_epoch
    if epoch > 0 or epoch == LEAVE_EPOCH:
        if not request.member_id:
            raise InvalidRequestError("MemberId can't be empty.")
    elif epoch == JOIN_EPOCH:
        if request.api_version >= 1 and not request.member_id:
            raise InvalidRequestError("MemberId can't be empty.")
        if request.rebalance_timeout_ms == -1:
            raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or request.topic_partitions:
            raise InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
        if not request.subscribed_topic_names and not request.subscribed_topic_regex:
            raise InvalidRequestError(
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif epoch == STATIC_LEAVE_EPOCH:
        if not request.member_id:
            raise InvalidRequestError("MemberId can't be empty.")
        if request.instance_id is None:
            raise InvalidRequestError("InstanceId can't be null.")
    else:
        raise InvalidRequestError(f"MemberEpoch {epoch} is invalid.")
    assignor = request.server_assignor
    if assignor is not None and assignor not in settings.assignors:
        raise UnsupportedAssignorError(
            f"ServerAssignor {assignor} is not supported. Supported assignors: "
            f"{', '.join(settings.assignors)}."
        )
    if request.subscribed_topic_regex:
        compile_regex(request.subscribed_topic_regex)


def compile_regex(pattern: str) -> re.Pattern[str]:
    """A subscription pattern, matched against whole topic names as Kafka's RE2/J does."""
    try:
        return re.compile(pattern)
    except re.error as err:
        raise InvalidRegularExpressionError(
            f"SubscribedTopicRegex {pattern!r} is not a valid regular expression: {err}"
        ) from None


def _owned(request: ConsumerGroupHeartbeatRequest) -> dict[Uuid, frozenset[int]] | None:
    if request.topic_partitions is None:
        return None
    return {tp.topic_id: frozenset(tp.partitions) for tp in request.topic_partitions}


def _is_subset(
    owned: Mapping[Uuid, frozenset[int]] | None, of: Mapping[Uuid, frozenset[int]]
) -> bool:
    if owned is None:
        return False
    return all(parts <= of.get(topic, frozenset()) for topic, parts in owned.items())


def _check_epoch(
    member: ConsumerGroupMember, epoch: int, owned: Mapping[Uuid, frozenset[int]] | None
) -> None:
    """A member is fenced if it is ahead of the coordinator, or behind it unless it is one
    epoch behind with nothing it should not have (the answer moving it on was lost)."""
    if epoch > member.member_epoch:
        raise FencedMemberEpochError(
            f"The consumer group member has a greater member epoch ({epoch}) than the one known "
            f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
            "partitions and rejoin."
        )
    if epoch < member.member_epoch and (
        epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned_partitions)
    ):
        raise FencedMemberEpochError(
            f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
            f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
            "partitions and rejoin."
        )


def subscribed_names(member: ConsumerGroupMember, topics: TopicsView) -> set[str]:
    """The topics a member subscribes to: its names and whatever its pattern matches."""
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        pattern = compile_regex(member.subscribed_topic_regex)
        names.update(name for name in topics.names() if pattern.fullmatch(name))
    return names


def subscription_metadata(
    members: Iterable[ConsumerGroupMember], topics: TopicsView
) -> dict[str, TopicMetadata]:
    """The existing topics some member subscribes to, as they are now."""
    wanted: set[str] = set()
    for member in members:
        wanted |= subscribed_names(member, topics)
    found = {}
    for name in sorted(wanted):
        meta = topics.topic(name)
        if meta is not None:
            found[name] = meta
    return found


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
    validate(request, settings)
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
        targets = _assign(group, members, targets, metadata, topics, settings, records)
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
    _check_epoch(existing, epoch, owned)
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
    _check_epoch(existing, epoch, owned)
    return existing, None


def _assign(
    group: ConsumerGroup,
    members: Mapping[str, ConsumerGroupMember],
    targets: dict[str, dict[Uuid, frozenset[int]]],
    metadata: Mapping[str, TopicMetadata],
    topics: TopicsView,
    settings: ConsumerGroupSettings,
    records: list[CoordinatorRecord],
) -> dict[str, dict[Uuid, frozenset[int]]]:
    """The new target assignment, with a record for each member whose target changed."""
    votes: dict[str, int] = {}
    for member in members.values():
        if member.server_assignor:
            votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
    name = min(votes, key=lambda n: (-votes[n], n)) if votes else settings.assignors[0]
    assignor = ASSIGNORS[name]
    specs = {
        member_id: MemberSpec(
            frozenset(
                metadata[topic].topic_id
                for topic in subscribed_names(member, topics)
                if topic in metadata
            ),
            targets.get(member_id, {}),
            member.instance_id,
            member.rack_id,
        )
        for member_id, member in members.items()
    }
    counts = {meta.topic_id: meta.num_partitions for meta in metadata.values()}
    result = assignor.assign(specs, counts)
    for member_id in sorted(result):
        if result[member_id] != targets.get(member_id, {}) or member_id not in targets:
            records.append(cr.target_member_record(group.group_id, member_id, result[member_id]))
    return dict(result)


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
