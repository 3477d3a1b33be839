"""The group coordinator's APIs on the wire: the versions served and the shapes converted.

The coordinator's types (``groups/protocol.py``) hold each message's newest shape; the older
shapes are converted here: FindCoordinator before v4 asks for one key and is answered with one
coordinator, LeaveGroup before v3 names one member and answers at the top level, OffsetFetch
before v8 asks for one group, and DescribeGroups before v6 shows an unknown group as Dead with
no error. A coordinator's address is the one its broker advertises on the listener the client
used; a coordinator with none there is not available to this client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
from kafka.protocol.api_message import ApiMessage

from ..groups import protocol as gp
from .codec import MESSAGES, from_wire, to_wire

if TYPE_CHECKING:
    from .apis import RequestContext

_COORDINATOR_NOT_AVAILABLE = 15
_GROUP_ID_NOT_FOUND = 69
#: DescribeGroups v6 (KIP-1043) answers an unknown group GROUP_ID_NOT_FOUND; before, Dead.
_DESCRIBE_NOT_FOUND_VERSION = 6


def _response_class(key: int, version: int) -> Any:
    return MESSAGES[key][1][version]


def _ask(ctx: RequestContext, request: gp.GroupRequest) -> Any:
    """The broker's answer, typed for the group response the request gets."""
    answer: Any = ctx.broker.handle(request)
    return answer


def find_coordinator(ctx: RequestContext, message: Any) -> ApiMessage:
    keys = message.coordinator_keys if ctx.version >= 4 else [message.key]
    key_type = message.key_type if ctx.version >= 1 else gp.CoordinatorType.GROUP
    answer = _ask(ctx, gp.FindCoordinatorRequest(key_type, keys))
    endpoints = ctx.endpoints.snapshot(ctx.listener)
    coordinators = []
    for found in answer.coordinators:
        if found.error_code == 0:
            endpoint = endpoints.get(found.node_id)
            if endpoint is None:
                found = attrs.evolve(
                    found,
                    node_id=-1,
                    error_code=_COORDINATOR_NOT_AVAILABLE,
                    error_message=f"broker {found.node_id} has no {ctx.listener} listener",
                )
            else:
                found = attrs.evolve(found, host=endpoint.host, port=endpoint.port)
        coordinators.append(found)
    response = _response_class(10, ctx.version)
    if ctx.version >= 4:
        return to_wire(gp.FindCoordinatorResponse(coordinators), response)
    only = coordinators[0]
    return response(
        error_code=only.error_code,
        error_message=only.error_message,
        node_id=only.node_id,
        host=only.host,
        port=only.port,
    )


def join_group(ctx: RequestContext, message: Any) -> ApiMessage:
    request = from_wire(message, gp.JoinGroupRequest)
    host = ctx.peer.rsplit(":", 1)[0] if ctx.peer else ""
    request = attrs.evolve(
        request,
        rebalance_timeout_ms=message.rebalance_timeout_ms if ctx.version >= 1 else -1,
        client_id=ctx.client_id or "",
        client_host=f"/{host}",
        api_version=ctx.version,
    )
    answer = _ask(ctx, request)
    if ctx.version < 7 and answer.protocol_name is None:
        answer = attrs.evolve(answer, protocol_name="")
    return to_wire(answer, _response_class(11, ctx.version))


def leave_group(ctx: RequestContext, message: Any) -> ApiMessage:
    if ctx.version >= 3:
        request = from_wire(message, gp.LeaveGroupRequest)
    else:
        request = gp.LeaveGroupRequest(message.group_id, [gp.MemberIdentity(message.member_id)])
    answer = _ask(ctx, request)
    if ctx.version < 3 and answer.error_code == 0 and answer.members:
        answer = attrs.evolve(answer, error_code=answer.members[0].error_code)
    return to_wire(answer, _response_class(13, ctx.version))


def offset_fetch(ctx: RequestContext, message: Any) -> ApiMessage:
    if ctx.version >= 8:
        request = from_wire(message, gp.OffsetFetchRequest)
    else:
        topics = (
            None
            if message.topics is None
            else [gp.OffsetFetchRequestTopics(t.name, t.partition_indexes) for t in message.topics]
        )
        request = gp.OffsetFetchRequest(
            [gp.OffsetFetchRequestGroup(message.group_id, topics)],
            require_stable=bool(ctx.version >= 7 and message.require_stable),
        )
    answer = _ask(ctx, request)
    response = _response_class(9, ctx.version)
    if ctx.version >= 8:
        return to_wire(answer, response)
    return to_wire(answer.groups[0], response)


def offset_commit(ctx: RequestContext, message: Any) -> ApiMessage:
    request = attrs.evolve(from_wire(message, gp.OffsetCommitRequest), api_version=ctx.version)
    return to_wire(_ask(ctx, request), _response_class(8, ctx.version))


def describe_groups(ctx: RequestContext, message: Any) -> ApiMessage:
    answer = _ask(ctx, from_wire(message, gp.DescribeGroupsRequest))
    if ctx.version < _DESCRIBE_NOT_FOUND_VERSION:
        answer = attrs.evolve(
            answer,
            groups=[
                attrs.evolve(g, error_code=0, error_message=None)
                if g.error_code == _GROUP_ID_NOT_FOUND
                else g
                for g in answer.groups
            ],
        )
    return to_wire(answer, _response_class(15, ctx.version))


def generic(broker_request: type[Any]) -> Any:
    """Converts by field name both ways, as most group APIs need."""
    key = broker_request.API_KEY

    def handle(ctx: RequestContext, message: Any) -> ApiMessage:
        answer = _ask(ctx, from_wire(message, broker_request))
        return to_wire(answer, _response_class(key, ctx.version))

    return handle


#: (api key, min version, max version, handler) of each group API.
GROUP_APIS: tuple[tuple[int, int, int, Any], ...] = (
    (8, 2, 9, offset_commit),
    (9, 1, 9, offset_fetch),
    (10, 0, 6, find_coordinator),
    (11, 0, 9, join_group),
    (12, 0, 4, generic(gp.HeartbeatRequest)),
    (13, 0, 5, leave_group),
    (14, 0, 5, generic(gp.SyncGroupRequest)),
    (15, 0, 6, describe_groups),
    (16, 0, 5, generic(gp.ListGroupsRequest)),
    (42, 0, 2, generic(gp.DeleteGroupsRequest)),
    (47, 0, 0, generic(gp.OffsetDeleteRequest)),
)
