"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

Kafka's ``GroupMetadataManager`` for classic groups, request by request. Joining members wait
(on a future) until the rebalance completes: when every known member has rejoined, or at the
longest rebalance timeout, or for a new group at the end of ``group.initial.rebalance.delay.ms``
(extended by one more delay, up to the rebalance timeout, while members keep arriving). Members
that did not rejoin leave the group; the generation moves on; the leader receives every member's
metadata and sends back the assignment with SyncGroup, which is written to
``__consumer_offsets`` before any member is answered. A member that does not heartbeat within
its session timeout is removed and the group rebalances.

Everything here runs under the shard's lock; a handler returns either its answer or a future
the caller waits on outside the lock.
"""

from __future__ import annotations

import logging
import uuid
from concurrent.futures import Future

from ..errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    TierlogError,
    UnknownMemberIdError,
    error_code_of,
)
from . import protocol as gp
from .classic_group import ClassicGroup, ClassicMember, now_ms
from .group import GroupState
from .records import GROUP_METADATA_KEY_VERSION, GroupMetadataKey, GroupMetadataValue
from .shard import CoordinatorShard, register_load_hook, register_replayer

log = logging.getLogger(__name__)

NONE = 0
_UNKNOWN_MEMBER = UnknownMemberIdError.code or 25
_REBALANCING = RebalanceInProgressError.code or 27

JoinAnswer = gp.JoinGroupResponse | Future[gp.JoinGroupResponse]
SyncAnswer = gp.SyncGroupResponse | Future[gp.SyncGroupResponse]


def _join_error(err: TierlogError | int, member_id: str = "") -> gp.JoinGroupResponse:
    code = err if isinstance(err, int) else error_code_of(err)
    return gp.JoinGroupResponse(code, member_id=member_id, protocol_name=None)


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
        return _join_error(CoordinatorNotAvailableError.code or 15, req.member_id)
    if not group.supports(req.protocol_type, protocols):
        return _join_error(InconsistentGroupProtocolError.code or 23, req.member_id)
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
        return _join_error(GroupMaxSizeReachedError.code or 81)
    member_id = f"{instance or req.client_id}-{uuid.uuid4()}"
    if instance is None and req.api_version >= 4:
        # KIP-394: the member learns its id first, so a retried join cannot add a ghost.
        group.pending_members.add(member_id)
        shard.schedule(
            ("pending", group.group_id, member_id),
            req.session_timeout_ms,
            lambda: _expire_pending(shard, group, member_id),
        )
        return _join_error(MemberIdRequiredError.code or 79, member_id)
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
        return _join_error(err, member_id)
    member = group.members.get(member_id)
    if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
        return _join_error(_UNKNOWN_MEMBER, member_id)
    state = group.state
    if state is GroupState.PREPARING_REBALANCE:
        return _update_member_and_wait(shard, group, member, req, protocols)
    if state is GroupState.COMPLETING_REBALANCE:
        if member.matches(protocols):
            # The member missed its answer: the same one again.
            return _current_generation(group, member, skip_assignment=False)
        answer = _update_member_and_wait(shard, group, member, req, protocols)
        prepare_rebalance(shard, group, f"member {member_id} changed its metadata")
        return answer
    # Stable: the leader rejoining, or a member with new metadata, starts a rebalance.
    if member_id == group.leader_id or not member.matches(protocols):
        answer = _update_member_and_wait(shard, group, member, req, protocols)
        prepare_rebalance(shard, group, f"member {member_id} rejoined")
        return answer
    _schedule_heartbeat(shard, group, member)
    return _current_generation(group, member, skip_assignment=False)


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
        member.awaiting_join.set_result(_join_error(_REBALANCING, member.member_id))
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
    member.is_new = True
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
    """KIP-345: a static member back under a new member id takes the old one's place; with
    nothing changed in a stable group, without a rebalance."""
    instance = req.group_instance_id
    assert instance is not None
    old_id = group.static_members[instance]
    new_id = f"{instance}-{uuid.uuid4()}"
    old_member = group.members[old_id]
    unchanged = old_member.matches(protocols)
    shard.cancel(("hb", group.group_id, old_id))
    member = group.replace_static_member(instance, old_id, new_id)
    member.client_id, member.client_host = req.client_id, req.client_host
    member.session_timeout_ms = req.session_timeout_ms
    if req.rebalance_timeout_ms >= 0:
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
    if group.state is GroupState.STABLE and unchanged:
        try:
            shard.append([group.metadata_record()])
        except TierlogError as err:
            group.replace_static_member(instance, new_id, old_id)
            return _join_error(err)
        _schedule_heartbeat(shard, group, member)
        is_leader = group.leader_id == new_id
        return _current_generation(group, member, skip_assignment=is_leader)
    return (
        _update_member_and_wait(shard, group, member, req, protocols)
        if (group.state is GroupState.PREPARING_REBALANCE)
        else _rebalance_with(shard, group, member, req, protocols)
    )


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


def _current_generation(
    group: ClassicGroup, member: ClassicMember, *, skip_assignment: bool
) -> gp.JoinGroupResponse:
    is_leader = member.member_id == group.leader_id
    return gp.JoinGroupResponse(
        NONE,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        skip_assignment=skip_assignment,
        member_id=member.member_id,
        members=_member_list(group) if is_leader else (),
    )


def _member_list(group: ClassicGroup) -> list[gp.JoinGroupResponseMember]:
    return [
        gp.JoinGroupResponseMember(
            m.member_id, m.metadata(group.protocol_name), m.group_instance_id
        )
        for m in group.members.values()
    ]


# --- the rebalance ----------------------------------------------------------------------------


def prepare_rebalance(shard: CoordinatorShard, group: ClassicGroup, reason: str) -> None:
    """Starts a rebalance: waits for members to rejoin (a new group: the initial delay)."""
    log.info("group %s: preparing to rebalance (%s)", group.group_id, reason)
    if group.state is GroupState.COMPLETING_REBALANCE:
        _reset_and_answer_syncs(group, _REBALANCING)
    shard.cancel(("sync", group.group_id))
    key = ("join", group.group_id)
    if group.state is GroupState.EMPTY:
        initial = shard.runtime.initial_rebalance_delay_ms
        timeout = group.rebalance_timeout_ms()
        delay = min(initial, timeout)
        remaining = max(timeout - initial, 0)
        group.initial_delay_active = True
        group.new_member_added = False
        group.transition(GroupState.PREPARING_REBALANCE)
        shard.schedule(key, delay, lambda: _initial_delay_over(shard, group, remaining))
        return
    group.initial_delay_active = False
    group.transition(GroupState.PREPARING_REBALANCE)
    shard.schedule(key, group.rebalance_timeout_ms(), lambda: complete_join(shard, group))
    maybe_complete_join(shard, group)


def _initial_delay_over(shard: CoordinatorShard, group: ClassicGroup, remaining: int) -> None:
    if group.state is not GroupState.PREPARING_REBALANCE or not group.initial_delay_active:
        return
    if group.new_member_added and remaining > 0:
        group.new_member_added = False
        delay = min(shard.runtime.initial_rebalance_delay_ms, remaining)
        left = max(remaining - delay, 0)
        shard.schedule(
            ("join", group.group_id), delay, lambda: _initial_delay_over(shard, group, left)
        )
        return
    complete_join(shard, group)


def maybe_complete_join(shard: CoordinatorShard, group: ClassicGroup) -> None:
    if (
        group.state is GroupState.PREPARING_REBALANCE
        and not group.initial_delay_active
        and group.all_members_joined()
    ):
        complete_join(shard, group)


def complete_join(shard: CoordinatorShard, group: ClassicGroup) -> None:
    """Forms the next generation from the members that rejoined and answers their joins."""
    if group.state is not GroupState.PREPARING_REBALANCE:
        return
    group.initial_delay_active = False
    shard.cancel(("join", group.group_id))
    for member in [m for m in group.members.values() if m.awaiting_join is None]:
        log.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
        _remove(shard, group, member)
    group.generation_id += 1
    if not group.members:
        group.protocol_name = None
        group.transition(GroupState.EMPTY)
        try:
            shard.append([group.metadata_record()])
        except TierlogError as err:
            log.warning("group %s: storing the empty group failed: %s", group.group_id, err)
        return
    group.protocol_name = group.select_protocol()
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members))
    group.transition(GroupState.COMPLETING_REBALANCE)
    log.info(
        "group %s: generation %d with %d members, leader %s",
        group.group_id,
        group.generation_id,
        len(group.members),
        group.leader_id,
    )
    for member in group.members.values():
        future, member.awaiting_join = member.awaiting_join, None
        member.is_new = False
        if future is not None and not future.done():
            future.set_result(_current_generation(group, member, skip_assignment=False))
        _schedule_heartbeat(shard, group, member)
    generation = group.generation_id
    shard.schedule(
        ("sync", group.group_id),
        group.rebalance_timeout_ms(),
        lambda: _sync_timed_out(shard, group, generation),
    )


def _sync_timed_out(shard: CoordinatorShard, group: ClassicGroup, generation: int) -> None:
    """The leader did not send the assignment in time: members not syncing leave."""
    if group.state is not GroupState.COMPLETING_REBALANCE or group.generation_id != generation:
        return
    for member in [m for m in group.members.values() if m.awaiting_sync is None]:
        _remove(shard, group, member)
    prepare_rebalance(shard, group, "the assignment did not arrive within the rebalance timeout")


def _reset_and_answer_syncs(group: ClassicGroup, code: int) -> None:
    for member in group.members.values():
        member.assignment = b""
        future, member.awaiting_sync = member.awaiting_sync, None
        if future is not None and not future.done():
            future.set_result(gp.SyncGroupResponse(code))


def _remove(shard: CoordinatorShard, group: ClassicGroup, member: ClassicMember) -> None:
    shard.cancel(("hb", group.group_id, member.member_id))
    group.remove_member(member.member_id)
    if member.awaiting_join is not None and not member.awaiting_join.done():
        member.awaiting_join.set_result(_join_error(_UNKNOWN_MEMBER, member.member_id))
    if member.awaiting_sync is not None and not member.awaiting_sync.done():
        member.awaiting_sync.set_result(gp.SyncGroupResponse(_UNKNOWN_MEMBER))


def remove_member_and_rebalance(
    shard: CoordinatorShard, group: ClassicGroup, member: ClassicMember, reason: str
) -> None:
    _remove(shard, group, member)
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        prepare_rebalance(shard, group, reason)
    elif group.state is GroupState.PREPARING_REBALANCE:
        maybe_complete_join(shard, group)


# --- sessions --------------------------------------------------------------------------------


def _schedule_heartbeat(
    shard: CoordinatorShard, group: ClassicGroup, member: ClassicMember
) -> None:
    member_id = member.member_id
    shard.schedule(
        ("hb", group.group_id, member_id),
        member.session_timeout_ms,
        lambda: _session_expired(shard, group, member_id),
    )


def _session_expired(shard: CoordinatorShard, group: ClassicGroup, member_id: str) -> None:
    member = group.members.get(member_id)
    if member is None or shard.groups.get(group.group_id) is not group:
        return
    if member.awaiting_join is not None or member.awaiting_sync is not None:
        _schedule_heartbeat(shard, group, member)  # waiting on us, so alive
        return
    log.info("group %s: member %s's session timed out", group.group_id, member_id)
    remove_member_and_rebalance(shard, group, member, f"member {member_id} timed out")


def _expire_pending(shard: CoordinatorShard, group: ClassicGroup, member_id: str) -> None:
    if member_id in group.pending_members:
        group.pending_members.discard(member_id)
        maybe_complete_join(shard, group)


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
        return gp.SyncGroupResponse(_REBALANCING)
    _schedule_heartbeat(shard, group, member)
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
            _reset_and_answer_syncs(group, error_code_of(err))
            prepare_rebalance(shard, group, f"storing the assignment failed: {err}")
            return future
        shard.cancel(("sync", group.group_id))
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
    _schedule_heartbeat(shard, group, member)
    if group.state is GroupState.PREPARING_REBALANCE:
        return gp.HeartbeatResponse(_REBALANCING)
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
                code = _UNKNOWN_MEMBER
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
                code = _UNKNOWN_MEMBER
        results.append(gp.MemberResponse(identity.member_id, instance, code))
    return gp.LeaveGroupResponse(NONE, results)


# --- loading ---------------------------------------------------------------------------------


def _replay_group_metadata(shard: CoordinatorShard, key: bytes, value: bytes | None) -> None:
    group_id = GroupMetadataKey.decode(key).group
    if value is None:
        existing = shard.groups.get(group_id)
        if isinstance(existing, ClassicGroup):
            del shard.groups[group_id]
        return
    shard.groups[group_id] = ClassicGroup.from_metadata(group_id, GroupMetadataValue.decode(value))


def _arm_loaded_groups(shard: CoordinatorShard) -> None:
    """Members of a loaded group must heartbeat within their session, as after a join."""
    for group in shard.groups.values():
        if isinstance(group, ClassicGroup):
            for member in group.members.values():
                _schedule_heartbeat(shard, group, member)


register_replayer(GROUP_METADATA_KEY_VERSION, _replay_group_metadata)
register_load_hook(_arm_loaded_groups)

__all__ = [
    "complete_join",
    "heartbeat",
    "join_group",
    "leave_group",
    "now_ms",
    "prepare_rebalance",
    "sync_group",
    "validate_join",
]
