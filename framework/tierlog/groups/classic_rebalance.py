"""The classic group's rebalance: the timed half of the protocol.

A rebalance starts (:func:`prepare_rebalance`) when members join, leave or time out; it waits for
the members to rejoin (a new group first waits out ``group.initial.rebalance.delay.ms``, once
more while members keep arriving, within the rebalance timeout), then :func:`complete_join`
forms the next generation from those that did and answers their JoinGroups; the leader's
assignment must arrive within the rebalance timeout. Sessions are the other clock: a member
that does not heartbeat within its session timeout is removed, and the group rebalances.

Everything here runs under the shard's lock, from request handlers or timer tasks. Loading a
shard replays group records here too and arms the loaded members' sessions.
"""

from __future__ import annotations

import logging

from ..errors import RebalanceInProgressError, TierlogError, UnknownMemberIdError, error_code_of
from . import protocol as gp
from .classic_group import ClassicGroup, ClassicMember
from .group import GroupState
from .records import GROUP_METADATA_KEY_VERSION, GroupMetadataKey, GroupMetadataValue
from .shard import CoordinatorShard, register_load_hook, register_replayer

log = logging.getLogger(__name__)

NONE = 0
UNKNOWN_MEMBER = UnknownMemberIdError.code or 25
REBALANCING = RebalanceInProgressError.code or 27


def join_error(err: TierlogError | int, member_id: str = "") -> gp.JoinGroupResponse:
    code = err if isinstance(err, int) else error_code_of(err)
    return gp.JoinGroupResponse(code, member_id=member_id, protocol_name=None)


def current_generation(
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
        reset_and_answer_syncs(group, REBALANCING)
    shard.cancel(("sync", group.group_id))
    group.pending_sync.clear()
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
    # Dynamic members that did not rejoin are gone; static ones keep their place (KIP-345).
    for member in [
        m for m in group.members.values() if m.awaiting_join is None and m.group_instance_id is None
    ]:
        log.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
        _remove(shard, group, member)
    joined = [m.member_id for m in group.members.values() if m.awaiting_join is not None]
    if group.members and not joined:
        log.warning("group %s: no member rejoined; waiting again", group.group_id)
        shard.schedule(
            ("join", group.group_id),
            group.rebalance_timeout_ms(),
            lambda: complete_join(shard, group),
        )
        return
    if group.leader_id not in joined and joined:
        group.leader_id = joined[0]
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
    group.transition(GroupState.COMPLETING_REBALANCE)
    if shard.runtime.metrics is not None:
        shard.runtime.metrics.rebalances.mark()
    log.info(
        "group %s: generation %d with %d members, leader %s",
        group.group_id,
        group.generation_id,
        len(group.members),
        group.leader_id,
    )
    group.pending_sync = set(group.members)
    for member in group.members.values():
        future, member.awaiting_join = member.awaiting_join, None
        if future is not None and not future.done():
            future.set_result(current_generation(group, member, skip_assignment=False))
        schedule_heartbeat(shard, group, member)
    generation = group.generation_id
    shard.schedule(
        ("sync", group.group_id),
        group.rebalance_timeout_ms(),
        lambda: _sync_timed_out(shard, group, generation),
    )


def _sync_timed_out(shard: CoordinatorShard, group: ClassicGroup, generation: int) -> None:
    """Members of the generation that never sent SyncGroup within the rebalance timeout (the
    leader with the assignment, or a follower for its share) leave, and the group rebalances."""
    if group.generation_id != generation or not group.pending_sync:
        return
    if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
        return
    missing = sorted(group.pending_sync)
    for member_id in missing:
        _remove(shard, group, group.members[member_id])
    prepare_rebalance(shard, group, f"no SyncGroup from {', '.join(missing)} in time")


def reset_and_answer_syncs(group: ClassicGroup, code: int) -> None:
    for member in group.members.values():
        member.assignment = b""
        future, member.awaiting_sync = member.awaiting_sync, None
        if future is not None and not future.done():
            future.set_result(gp.SyncGroupResponse(code))


def _remove(shard: CoordinatorShard, group: ClassicGroup, member: ClassicMember) -> None:
    shard.cancel(("hb", group.group_id, member.member_id))
    group.remove_member(member.member_id)
    if member.awaiting_join is not None and not member.awaiting_join.done():
        member.awaiting_join.set_result(join_error(UNKNOWN_MEMBER, member.member_id))
    if member.awaiting_sync is not None and not member.awaiting_sync.done():
        member.awaiting_sync.set_result(gp.SyncGroupResponse(UNKNOWN_MEMBER))


def remove_member_and_rebalance(
    shard: CoordinatorShard, group: ClassicGroup, member: ClassicMember, reason: str
) -> None:
    _remove(shard, group, member)
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        prepare_rebalance(shard, group, reason)
    elif group.state is GroupState.PREPARING_REBALANCE:
        maybe_complete_join(shard, group)


# --- sessions --------------------------------------------------------------------------------


def schedule_heartbeat(shard: CoordinatorShard, group: ClassicGroup, member: ClassicMember) -> None:
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
        schedule_heartbeat(shard, group, member)  # waiting on us, so alive
        return
    log.info("group %s: member %s's session timed out", group.group_id, member_id)
    remove_member_and_rebalance(shard, group, member, f"member {member_id} timed out")


def expire_pending(shard: CoordinatorShard, group: ClassicGroup, member_id: str) -> None:
    if member_id in group.pending_members:
        group.pending_members.discard(member_id)
        maybe_complete_join(shard, group)


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
                schedule_heartbeat(shard, group, member)


register_replayer(GROUP_METADATA_KEY_VERSION, _replay_group_metadata)
register_load_hook(_arm_loaded_groups)
