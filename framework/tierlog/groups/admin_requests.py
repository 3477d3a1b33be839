"""ListGroups, DescribeGroups and DeleteGroups, for groups of every type.

ListGroups answers for the shards this broker leads (an admin client asks every broker);
while one of them loads it answers COORDINATOR_LOAD_IN_PROGRESS with the groups it has.
DescribeGroups answers an unknown group GROUP_ID_NOT_FOUND (Kafka 4; the wire front end shows
it to clients before v6 as Dead with no members and no error, as Kafka did).
DeleteGroups removes a group with no members and all its offsets (tombstones for each).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import (
    CoordinatorLoadInProgressError,
    GroupIdNotFoundError,
    NonEmptyGroupError,
    TierlogError,
    error_code_of,
)
from . import protocol as gp
from .dispatch import register_handler
from .group import GroupState
from .offsets import OffsetStore
from .shard import ShardState

if TYPE_CHECKING:
    from .runtime import GroupCoordinator

NONE = 0


def list_groups(
    coordinator: GroupCoordinator, request: gp.ListGroupsRequest
) -> gp.ListGroupsResponse:
    states = {s.lower() for s in request.states_filter}
    types = {t.lower() for t in request.types_filter}
    error = NONE
    listed = []
    for shard in coordinator.shards():
        with shard.lock:
            if shard.state is ShardState.LOADING:
                error = CoordinatorLoadInProgressError.code or 14
                continue
            if shard.state is ShardState.CLOSED:
                continue
            for group in shard.groups.values():
                if group.is_dead():
                    continue
                entry = group.listed()
                if states and entry.group_state.lower() not in states:
                    continue
                if types and entry.group_type.lower() not in types:
                    continue
                listed.append(entry)
    return gp.ListGroupsResponse(error, sorted(listed, key=lambda g: g.group_id))


def describe_groups(
    coordinator: GroupCoordinator, request: gp.DescribeGroupsRequest
) -> gp.DescribeGroupsResponse:
    return gp.DescribeGroupsResponse([_describe(coordinator, g) for g in request.groups])


def _describe(coordinator: GroupCoordinator, group_id: str) -> gp.DescribedGroup:
    try:
        with coordinator.locked_shard(group_id) as shard:
            group = shard.groups.get(group_id)
            if group is None or group.is_dead():
                raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
            return group.describe()
    except TierlogError as err:
        return gp.DescribedGroup(
            group_id, error_code_of(err), group_state=GroupState.DEAD.value, error_message=str(err)
        )


def delete_groups(
    coordinator: GroupCoordinator, request: gp.DeleteGroupsRequest
) -> gp.DeleteGroupsResponse:
    return gp.DeleteGroupsResponse(
        [gp.DeletableGroupResult(g, _delete(coordinator, g)) for g in request.groups_names]
    )


def _delete(coordinator: GroupCoordinator, group_id: str) -> int:
    try:
        with coordinator.locked_shard(group_id) as shard:
            group = shard.groups.get(group_id)
            has_offsets = shard.offsets.has_offsets(group_id)
            if (group is None or group.is_dead()) and not has_offsets:
                raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
            if group is not None and not group.is_empty():
                raise NonEmptyGroupError(f"group {group_id!r} still has members")
            records = [
                OffsetStore.record(group_id, tp, None) for tp in shard.offsets.of_group(group_id)
            ]
            if group is not None:
                records += group.tombstones()
            shard.append(records)
            deleted = shard.offsets.remove_group(group_id)
            if coordinator.metrics is not None:
                coordinator.metrics.offset_deletions.mark(len(deleted))
            removed = shard.groups.pop(group_id, None)
            if removed is not None:
                removed.close(GroupIdNotFoundError.code or 69)
        return NONE
    except TierlogError as err:
        return error_code_of(err)


def _list_error(_request: gp.ListGroupsRequest, code: int, _message: str) -> gp.ListGroupsResponse:
    return gp.ListGroupsResponse(code)


def _describe_error(
    request: gp.DescribeGroupsRequest, code: int, message: str
) -> gp.DescribeGroupsResponse:
    return gp.DescribeGroupsResponse(
        [gp.DescribedGroup(g, code, error_message=message) for g in request.groups]
    )


def _delete_error(
    request: gp.DeleteGroupsRequest, code: int, _message: str
) -> gp.DeleteGroupsResponse:
    return gp.DeleteGroupsResponse([gp.DeletableGroupResult(g, code) for g in request.groups_names])


register_handler(gp.ListGroupsRequest, list_groups, _list_error)
register_handler(gp.DescribeGroupsRequest, describe_groups, _describe_error)
register_handler(gp.DeleteGroupsRequest, delete_groups, _delete_error)
