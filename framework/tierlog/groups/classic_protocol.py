"""The classic protocol's requests: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

Kafka's ``GroupMetadataManager`` for classic groups, request by request: a first JoinGroup gets
its member id (KIP-394), a known member's join starts or joins a rebalance
(``classic_rebalance.py``), a static member's rejoin replaces its old member id (KIP-345), the
leader's SyncGroup is written to ``__consumer_offsets`` before any member gets its assignment,
and Heartbeat and LeaveGroup check the member and its generation.

Everything here runs under the shard's lock; a handler returns either its answer or a future
the caller waits on outside the lock.
"""

from __future__ import annotations

import logging
import uuid
from concurrent.futures import Future

import attrs

from ..errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    TierlogError,
    UnknownMemberIdError,
    error_code_of,
)
from . import protocol as gp
from .classic_group import ClassicGroup, ClassicMember, now_ms
from .classic_rebalance import (
    NONE,
    REBALANCING,
    UNKNOWN_MEMBER,
    current_generation,
    expire_pending,
    join_error,
    maybe_complete_join,
    prepare_rebalance,
    remove_member_and_rebalance,
    reset_and_answer_syncs,
    schedule_heartbeat,
)
from .group import GroupState
from .shard import CoordinatorShard

log = logging.getLogger(__name__)

#: JoinGroup v9 (KIP-814): a static leader rejoining may be told to skip the assignment.
_SKIP_ASSIGNMENT_VERSION = 9

JoinAnswer = gp.JoinGroupResponse | Future[gp.JoinGroupResponse]
SyncAnswer = gp.SyncGroupResponse | Future[gp.SyncGroupResponse]


def validate_join(request: gp.JoinGroupRequest, min_session: int, max_session: int) -> None:
    """What is wrong with a JoinGroup before its group is looked at."""
    if not request.group_id:
        raise InvalidGroupIdError("a group id must not be empty")
    if not min_session <= request.session_timeout_ms <= max_session:
        raise InvalidSessionTimeoutError(
            f"session timeout {request.session_timeout_ms} ms is outside "
            f"[group.min.session.timeout.ms {min_session}, "
            f"group.max.session.timeout.ms {max_session}]"
        )
    if not request.protocol_type or not request.protocols:
        raise InconsistentGroupProtocolError("a member must name a protocol type and protocols")


# --- JoinGroup -------------------------------------------------------------------------------


def join_group(
    shard: CoordinatorShard, group: ClassicGroup, req: gp.JoinGroupRequest
) -> JoinAnswer:
    protocols = tuple((p.name, p.metadata) for p in req.protocols)
    if group.is_dead():
        return join_error(CoordinatorNotAvailableError.code or 15, req.member_id)
    if not group.supports(req.protocol_type, protocols):
        return join_error(InconsistentGroupProtocolError.code or 23, req.member_id)
    if not req.member_id:
        return _join_unknown_member(shard, group, req, protocols)
    return _join_known_member(shard, group, req, protocols)


def _new_member(
    req: gp.JoinGroupRequest, member_id: str, protocols: tuple[tuple[str, bytes], ...]
) -> ClassicMember:
    rebalance = (
        req.rebalance_timeout_ms if req.rebalance_timeout_ms >= 0 else (req.session_timeout_ms)
    )
    return ClassicMember(
        member_id,
        req.group_instance_id,
        req.client_id,
        req.client_host,
        rebalance,
        req.session_timeout_ms,
        req.protocol_type,
        protocols,
    )


def _join_unknown_member(
    shard: CoordinatorShard,
    group: ClassicGroup,
    req: gp.JoinGroupRequest,
    protocols: tuple[tuple[str, bytes], ...],
) -> JoinAnswer:
    instance = req.group_instance_id
    if instance is not None and instance in group.static_members:
        return _rejoin_static_member(shard, group, req, protocols)
    if len(group.members) + len(group.pending_members) >= shard.runtime.group_max_size:
        return join_error(GroupMaxSizeReachedError.code or 81)
    member_id = f"{instance or req.client_id}-{uuid.uuid4()}"
    if instance is None and req.api_version >= 4:
        # KIP-394: the member learns its id first, so a retried join cannot add a ghost.
        group.pending_members.add(member_id)
        shard.schedule(
            ("pending", group.group_id, member_id),
            req.session_timeout_ms,
            lambda: expire_pending(shard, group, member_id),
        )
        return join_error(MemberIdRequiredError.code or 79, member_id)
    return _add_member_and_rebalance(shard, group, _new_member(req, member_id, protocols))


def _join_known_member(
    shard: CoordinatorShard,
    group: ClassicGroup,
    req: gp.JoinGroupRequest,
    protocols: tuple[tuple[str, bytes], ...],
) -> JoinAnswer:
    member_id = req.member_id
    if member_id in group.pending_members:
        group.pending_members.discard(member_id)
        shard.cancel(("pending", group.group_id, member_id))
        return _add_member_and_rebalance(shard, group, _new_member(req, member_id, protocols))
    try:
        group.check_static(member_id, req.group_instance_id)
    except FencedInstanceIdError as err:
        return join_error(err, member_id)
    member = group.members.get(member_id)
    if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
        return join_error(UNKNOWN_MEMBER, member_id)
    state = group.state
    if state is GroupState.PREPARING_REBALANCE:
        return _update_member_and_wait(shard, group, member, req, protocols)
    if state is GroupState.COMPLETING_REBALANCE:
        if member.matches(protocols):
            # The member missed its answer: the same one again.
            return current_generation(group, member, skip_assignment=False)
        answer = _update_member_and_wait(shard, group, member, req, protocols)
        prepare_rebalance(shard, group, f"member {member_id} changed its metadata")
        return answer
    # Stable: the leader rejoining, or a member with new metadata, starts a rebalance.
    if member_id == group.leader_id or not member.matches(protocols):
        answer = _update_member_and_wait(shard, group, member, req, protocols)
        prepare_rebalance(shard, group, f"member {member_id} rejoined")
        return answer
    schedule_heartbeat(shard, group, member)
    return current_generation(group, member, skip_assignment=False)


def _update_member_and_wait(
    shard: CoordinatorShard,
    group: ClassicGroup,
    member: ClassicMember,
    req: gp.JoinGroupRequest,
    protocols: tuple[tuple[str, bytes], ...],
) -> Future[gp.JoinGroupResponse]:
    member.protocols = protocols
    member.session_timeout_ms = req.session_timeout_ms
    if req.rebalance_timeout_ms >= 0:
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
    if member.awaiting_join is not None and not member.awaiting_join.done():
        member.awaiting_join.set_result(join_error(REBALANCING, member.member_id))
    future: Future[gp.JoinGroupResponse] = Future()
    member.awaiting_join = future
    if group.state is GroupState.PREPARING_REBALANCE:
        maybe_complete_join(shard, group)
    return future


def _add_member_and_rebalance(
    shard: CoordinatorShard, group: ClassicGroup, member: ClassicMember
) -> Future[gp.JoinGroupResponse]:
    future: Future[gp.JoinGroupResponse] = Future()
    member.awaiting_join = future
    if group.state is GroupState.PREPARING_REBALANCE and group.initial_delay_active:
        group.new_member_added = True
    group.add_member(member)
    if group.state is GroupState.PREPARING_REBALANCE:
        maybe_complete_join(shard, group)
    else:
        prepare_rebalance(shard, group, f"member {member.member_id} joined")
    return future


def _rejoin_static_member(
    shard: CoordinatorShard,
    group: ClassicGroup,
    req: gp.JoinGroupRequest,
    protocols: tuple[tuple[str, bytes], ...],
) -> JoinAnswer:
    """KIP-345: a static member back under a new member id takes the old one's place; in a
    stable group whose protocol stays the same, without a rebalance."""
    instance = req.group_instance_id
    assert instance is not None
    old_id = group.static_members[instance]
    new_id = f"{instance}-{uuid.uuid4()}"
    current_leader = group.leader_id
    shard.cancel(("hb", group.group_id, old_id))
    member = group.replace_static_member(instance, old_id, new_id)
    previous = (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms)
    member.protocols = protocols
    member.client_id, member.client_host = req.client_id, req.client_host
    member.session_timeout_ms = req.session_timeout_ms
    if req.rebalance_timeout_ms >= 0:
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
    if group.state is GroupState.STABLE and group.protocol_name == group.select_protocol():
        try:
            shard.append([group.metadata_record()])
        except TierlogError as err:
            member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = previous
            schedule_heartbeat(shard, group, group.replace_static_member(instance, new_id, old_id))
            return join_error(err)
        schedule_heartbeat(shard, group, member)
        if req.api_version >= _SKIP_ASSIGNMENT_VERSION:
            # The leader keeps its assignment: it gets the members but need not assign.
            is_leader = group.leader_id == new_id
            return current_generation(group, member, skip_assignment=is_leader)
        # Older leaders would assign again: each rejoined member is told it follows.
        return attrs.evolve(
            current_generation(group, member, skip_assignment=False),
            leader=current_leader or "",
            members=(),
        )
    if group.state is GroupState.PREPARING_REBALANCE:
        return _update_member_and_wait(shard, group, member, req, protocols)
    return _rebalance_with(shard, group, member, req, protocols)


def _rebalance_with(
    shard: CoordinatorShard,
    group: ClassicGroup,
    member: ClassicMember,
    req: gp.JoinGroupRequest,
    protocols: tuple[tuple[str, bytes], ...],
) -> Future[gp.JoinGroupResponse]:
    future = _update_member_and_wait(shard, group, member, req, protocols)
    prepare_rebalance(shard, group, f"static member {member.group_instance_id} rejoined")
    return future


# --- SyncGroup -------------------------------------------------------------------------------


def sync_group(
    shard: CoordinatorShard, group: ClassicGroup, req: gp.SyncGroupRequest
) -> SyncAnswer:
    try:
        _validate_member(group, req.member_id, req.group_instance_id, req.generation_id)
    except TierlogError as err:
        return gp.SyncGroupResponse(error_code_of(err))
    if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
        req.protocol_name is not None and req.protocol_name != group.protocol_name
    ):
        return gp.SyncGroupResponse(InconsistentGroupProtocolError.code or 23)
    member = group.members[req.member_id]
    if group.state is GroupState.PREPARING_REBALANCE:
        return gp.SyncGroupResponse(REBALANCING)
    schedule_heartbeat(shard, group, member)
    group.pending_sync.discard(req.member_id)
    if not group.pending_sync:
        shard.cancel(("sync", group.group_id))
    if group.state is GroupState.STABLE:
        return _sync_answer(group, member)
    future: Future[gp.SyncGroupResponse] = Future()
    member.awaiting_sync = future
    if req.member_id == group.leader_id:
        given = {a.member_id: a.assignment for a in req.assignments}
        for m in group.members.values():
            m.assignment = given.get(m.member_id, b"")
        try:
            shard.append([group.metadata_record()])
        except TierlogError as err:
            reset_and_answer_syncs(group, error_code_of(err))
            prepare_rebalance(shard, group, f"storing the assignment failed: {err}")
            return future
        group.transition(GroupState.STABLE)
        for m in group.members.values():
            waiting, m.awaiting_sync = m.awaiting_sync, None
            if waiting is not None and not waiting.done():
                waiting.set_result(_sync_answer(group, m))
    return future


def _sync_answer(group: ClassicGroup, member: ClassicMember) -> gp.SyncGroupResponse:
    return gp.SyncGroupResponse(NONE, member.assignment, group.protocol_type, group.protocol_name)


def _validate_member(
    group: ClassicGroup, member_id: str, instance: str | None, generation: int
) -> None:
    if group.state in (GroupState.EMPTY, GroupState.DEAD):
        raise UnknownMemberIdError(f"group {group.group_id} has no members")
    group.check_static(member_id, instance)
    if member_id not in group.members:
        raise UnknownMemberIdError(f"member {member_id!r} is not in group {group.group_id}")
    if generation != group.generation_id:
        raise IllegalGenerationError(
            f"generation {generation} of group {group.group_id} is not the current one "
            f"({group.generation_id})"
        )


# --- Heartbeat -------------------------------------------------------------------------------


def heartbeat(
    shard: CoordinatorShard, group: ClassicGroup, req: gp.HeartbeatRequest
) -> gp.HeartbeatResponse:
    try:
        _validate_member(group, req.member_id, req.group_instance_id, req.generation_id)
    except TierlogError as err:
        return gp.HeartbeatResponse(error_code_of(err))
    member = group.members[req.member_id]
    schedule_heartbeat(shard, group, member)
    if group.state is GroupState.PREPARING_REBALANCE:
        return gp.HeartbeatResponse(REBALANCING)
    return gp.HeartbeatResponse(NONE)


# --- LeaveGroup ------------------------------------------------------------------------------


def leave_group(
    shard: CoordinatorShard, group: ClassicGroup, req: gp.LeaveGroupRequest
) -> gp.LeaveGroupResponse:
    results = []
    for identity in req.members:
        code = NONE
        instance = identity.group_instance_id
        target: str | None = identity.member_id
        if instance is not None:
            holder = group.static_members.get(instance)
            if holder is None:
                code = UNKNOWN_MEMBER
            elif identity.member_id and identity.member_id != holder:
                code = FencedInstanceIdError.code or 82
            target = holder
        if code == NONE and target is not None:
            if target in group.pending_members:
                group.pending_members.discard(target)
                shard.cancel(("pending", group.group_id, target))
                maybe_complete_join(shard, group)
            elif target in group.members:
                remove_member_and_rebalance(
                    shard,
                    group,
                    group.members[target],
                    f"member {target} left" + (f" ({identity.reason})" if identity.reason else ""),
                )
            else:
                code = UNKNOWN_MEMBER
        results.append(gp.MemberResponse(identity.member_id, instance, code))
    return gp.LeaveGroupResponse(NONE, results)


__all__ = [
    "heartbeat",
    "join_group",
    "leave_group",
    "now_ms",
    "prepare_rebalance",
    "sync_group",
    "validate_join",
]
