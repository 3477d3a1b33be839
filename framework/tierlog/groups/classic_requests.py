"""The classic protocol's requests as the coordinator receives them: find the shard and the
group, run the protocol step under the shard's lock, wait for a pending answer outside it."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from ..errors import (
    InconsistentGroupProtocolError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from ..wire.peer import peer_connected
from . import classic_protocol as cp
from . import protocol as gp
from .classic_group import ClassicGroup
from .dispatch import register_handler

if TYPE_CHECKING:
    from .runtime import GroupCoordinator
    from .shard import CoordinatorShard

T = TypeVar("T")

#: Added to the longest wait a protocol step can take, before a waiting join gives up.
_WAIT_MARGIN_MS = 5000
#: How often a waiting join or sync looks whether its client is still connected.
_PEER_CHECK_S = 1.0


def _await(answer: T | Future[T], timeout_ms: int, expired: T) -> T:
    """The answer once the rebalance gives it; ``expired`` after ``timeout_ms``, or as soon as
    the client has hung up (the member stays until its timeouts remove it, as in Kafka, but no
    thread waits on its behalf)."""
    if not isinstance(answer, Future):
        return answer
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        left = deadline - time.monotonic()
        try:
            return answer.result(timeout=max(0.0, min(left, _PEER_CHECK_S)))
        except concurrent.futures.TimeoutError:
            if left <= _PEER_CHECK_S or not peer_connected():
                return expired


def _classic(shard: CoordinatorShard, group_id: str) -> ClassicGroup | None:
    group = shard.groups.get(group_id)
    if group is not None and not isinstance(group, ClassicGroup):
        raise InconsistentGroupProtocolError(
            f"group {group_id!r} is a {group.group_type.value} group"
        )
    return group


@contextmanager
def _existing_group(
    coordinator: GroupCoordinator, group_id: str
) -> Iterator[tuple[CoordinatorShard, ClassicGroup]]:
    """The shard and classic group ``group_id`` names, under the shard's lock: the preamble of
    every step but a join, which alone may create the group."""
    with coordinator.locked_shard(group_id) as shard:
        group = _classic(shard, group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {group_id!r} does not exist")
        yield shard, group


def _replace_empty_group_of_another_type(shard: CoordinatorShard, group_id: str) -> None:
    """An empty group of another protocol gives way to a classic join (its offsets stay), as
    in Kafka 4; one with members does not."""
    group = shard.groups.get(group_id)
    if group is not None and not isinstance(group, ClassicGroup) and group.is_empty():
        shard.append(group.tombstones())
        del shard.groups[group_id]


def join_group(coordinator: GroupCoordinator, request: gp.JoinGroupRequest) -> gp.JoinGroupResponse:
    cp.validate_join(
        request, coordinator.min_session_timeout_ms, coordinator.max_session_timeout_ms
    )
    shard = coordinator.shard_for(request.group_id)
    with shard.lock:
        shard.check_active()
        _replace_empty_group_of_another_type(shard, request.group_id)
        group = _classic(shard, request.group_id)
        if group is None:
            if request.member_id:
                raise UnknownMemberIdError(
                    f"group {request.group_id!r} does not exist, so neither does member "
                    f"{request.member_id!r}"
                )
            group = ClassicGroup(request.group_id, created_ms=cp.now_ms())
            shard.groups[request.group_id] = group
        answer = cp.join_group(shard, group, request)
    rebalance = max(request.rebalance_timeout_ms, request.session_timeout_ms)
    wait = rebalance + coordinator.initial_rebalance_delay_ms + _WAIT_MARGIN_MS
    return _await(
        answer,
        wait,
        gp.JoinGroupResponse(RebalanceInProgressError.code or 27, member_id=request.member_id),
    )


def sync_group(coordinator: GroupCoordinator, request: gp.SyncGroupRequest) -> gp.SyncGroupResponse:
    with _existing_group(coordinator, request.group_id) as (shard, group):
        answer = cp.sync_group(shard, group, request)
        member = group.members.get(request.member_id)
        wait = (member.rebalance_timeout_ms if member else 0) + _WAIT_MARGIN_MS
    return _await(answer, wait, gp.SyncGroupResponse(RebalanceInProgressError.code or 27))


def heartbeat(coordinator: GroupCoordinator, request: gp.HeartbeatRequest) -> gp.HeartbeatResponse:
    with _existing_group(coordinator, request.group_id) as (shard, group):
        return cp.heartbeat(shard, group, request)


def leave_group(
    coordinator: GroupCoordinator, request: gp.LeaveGroupRequest
) -> gp.LeaveGroupResponse:
    with _existing_group(coordinator, request.group_id) as (shard, group):
        return cp.leave_group(shard, group, request)


def _join_error(request: gp.JoinGroupRequest, code: int, _message: str) -> gp.JoinGroupResponse:
    return gp.JoinGroupResponse(code, member_id=request.member_id)


def _sync_error(_request: gp.SyncGroupRequest, code: int, _message: str) -> gp.SyncGroupResponse:
    return gp.SyncGroupResponse(code)


def _heartbeat_error(
    _request: gp.HeartbeatRequest, code: int, _message: str
) -> gp.HeartbeatResponse:
    return gp.HeartbeatResponse(code)


def _leave_error(_request: gp.LeaveGroupRequest, code: int, _message: str) -> gp.LeaveGroupResponse:
    return gp.LeaveGroupResponse(code)


register_handler(gp.JoinGroupRequest, join_group, _join_error)
register_handler(gp.SyncGroupRequest, sync_group, _sync_error)
register_handler(gp.HeartbeatRequest, heartbeat, _heartbeat_error)
register_handler(gp.LeaveGroupRequest, leave_group, _leave_error)
