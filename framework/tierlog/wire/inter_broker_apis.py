"""The APIs brokers of a multi-process cluster send each other, and their wire conversions.

The controller sends LeaderAndIsr, StopReplica and UpdateMetadata to every broker; brokers
send AlterPartition, AllocateProducerIds and ControlledShutdown to the controller. They are
served only where ``broker.inter_broker_enabled`` is set (a ZooKeeper-mode node): anywhere
else ApiVersions does not list them and a request for one closes the connection, as for an
API never served, so a client cannot move replicas or leaders of an embedded cluster.

The newest versions group partitions by topic (and LeaderAndIsr answers by topic id) where the
broker's own types list them flat; the conversions both ways live here, used by the listener's
handlers and by :class:`~tierlog.wire.network_transport.NetworkTransport`, which sends them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafka.protocol.api_message import ApiMessage

from ..model import ZERO_UUID, Uuid
from ..server import protocol as p
from .codec import MESSAGES, from_wire, to_wire

if TYPE_CHECKING:
    from .apis import RequestContext

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
CONTROLLED_SHUTDOWN, ALTER_PARTITION, ALLOCATE_PRODUCER_IDS = 7, 56, 67

#: The inter-broker APIs: (key, lowest version served, highest version served).
INTER_BROKER_VERSIONS: tuple[tuple[int, int, int], ...] = (
    (LEADER_AND_ISR, 7, 7),
    (STOP_REPLICA, 4, 4),
    (UPDATE_METADATA, 8, 8),
    (CONTROLLED_SHUTDOWN, 3, 3),
    (ALTER_PARTITION, 3, 3),
    (ALLOCATE_PRODUCER_IDS, 0, 0),
)
INTER_BROKER_KEYS = frozenset(key for key, _, _ in INTER_BROKER_VERSIONS)


def _request_class(key: int, version: int) -> Any:
    return MESSAGES[key][0][version]


def _response_class(key: int, version: int) -> Any:
    return MESSAGES[key][1][version]


def _wire_uuid(value: Uuid) -> uuid.UUID | None:
    return None if value == ZERO_UUID else uuid.UUID(bytes=value.value)


def _uuid(value: uuid.UUID | None) -> Uuid:
    return ZERO_UUID if value is None else Uuid(value.bytes)


# --- LeaderAndIsr ------------------------------------------------------------------------------


def leader_and_isr_to_wire(
    request: p.LeaderAndIsrRequest,
    version: int,
    *,
    leader_address: Callable[[int], tuple[str, int] | None] = lambda _: None,
) -> Any:
    """``request`` as the wire message; live leaders are listed at ``leader_address``."""
    wire = _request_class(LEADER_AND_ISR, version)
    topic_ids = dict(request.topic_ids)
    by_topic: dict[str, list[p.LeaderAndIsrPartitionState]] = {}
    for state in request.partition_states:
        by_topic.setdefault(state.topic_name, []).append(state)
    live_leaders = []
    for broker_id in request.live_leaders:
        host, port = leader_address(broker_id) or ("", -1)
        live_leaders.append(
            wire.LeaderAndIsrLiveLeader(broker_id=broker_id, host_name=host, port=port)
        )
    return wire(
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        request_type=request.type,
        topic_states=[
            wire.LeaderAndIsrTopicState(
                topic_name=name,
                topic_id=_wire_uuid(topic_ids.get(name, ZERO_UUID)),
                partition_states=[
                    wire.LeaderAndIsrPartitionState(
                        partition_index=s.partition_index,
                        controller_epoch=request.controller_epoch,
                        leader=s.leader,
                        leader_epoch=s.leader_epoch,
                        isr=list(s.isr),
                        partition_epoch=s.partition_epoch,
                        replicas=list(s.replicas),
                        adding_replicas=list(s.adding_replicas),
                        removing_replicas=list(s.removing_replicas),
                        is_new=s.is_new,
                    )
                    for s in states
                ],
            )
            for name, states in by_topic.items()
        ],
        live_leaders=live_leaders,
    )


def leader_and_isr_from_wire(message: Any) -> p.LeaderAndIsrRequest:
    states = [
        p.LeaderAndIsrPartitionState(
            topic_name=topic.topic_name,
            partition_index=s.partition_index,
            leader=s.leader,
            leader_epoch=s.leader_epoch,
            isr=s.isr,
            partition_epoch=s.partition_epoch,
            replicas=s.replicas,
            is_new=s.is_new,
            adding_replicas=s.adding_replicas or (),
            removing_replicas=s.removing_replicas or (),
        )
        for topic in message.topic_states
        for s in topic.partition_states
    ]
    return p.LeaderAndIsrRequest(
        controller_id=message.controller_id,
        controller_epoch=message.controller_epoch,
        partition_states=states,
        topic_ids=[
            (topic.topic_name, _uuid(topic.topic_id))
            for topic in message.topic_states
            if topic.topic_id is not None
        ],
        live_leaders=[leader.broker_id for leader in message.live_leaders],
        type=message.request_type,
    )


def leader_and_isr_response_to_wire(
    answer: p.LeaderAndIsrResponse, topic_ids: Iterable[tuple[str, Uuid]], version: int
) -> Any:
    """The answer grouped by topic id, as v5+ sends it (a topic without an id gets the zero
    id: only a request naming none has one)."""
    wire = _response_class(LEADER_AND_ISR, version)
    ids = dict(topic_ids)
    by_topic: dict[Uuid, list[Any]] = {}
    for error in answer.partition_errors:
        by_topic.setdefault(ids.get(error.topic_name, ZERO_UUID), []).append(
            wire.LeaderAndIsrPartitionError(
                partition_index=error.partition_index, error_code=error.error_code
            )
        )
    return wire(
        error_code=answer.error_code,
        topics=[
            wire.LeaderAndIsrTopicError(topic_id=_wire_uuid(topic_id), partition_errors=errors)
            for topic_id, errors in by_topic.items()
        ],
    )


def leader_and_isr_response_from_wire(
    message: Any, request: p.LeaderAndIsrRequest
) -> p.LeaderAndIsrResponse:
    """The answer with topic names again, from the ids ``request`` sent."""
    names = {topic_id: name for name, topic_id in request.topic_ids}
    return p.LeaderAndIsrResponse(
        error_code=message.error_code,
        partition_errors=[
            p.LeaderAndIsrPartitionError(
                names.get(_uuid(topic.topic_id), ""), error.partition_index, error.error_code
            )
            for topic in message.topics
            for error in topic.partition_errors
        ],
    )


# --- StopReplica -------------------------------------------------------------------------------


def stop_replica_to_wire(request: p.StopReplicaRequest, version: int) -> Any:
    wire = _request_class(STOP_REPLICA, version)
    by_topic: dict[str, list[Any]] = {}
    for s in request.partition_states:
        by_topic.setdefault(s.topic_name, []).append(
            wire.StopReplicaTopicState.StopReplicaPartitionState(
                partition_index=s.partition_index,
                leader_epoch=s.leader_epoch,
                delete_partition=s.delete_partition,
            )
        )
    return wire(
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        topic_states=[
            wire.StopReplicaTopicState(topic_name=name, partition_states=states)
            for name, states in by_topic.items()
        ],
    )


def stop_replica_from_wire(message: Any) -> p.StopReplicaRequest:
    return p.StopReplicaRequest(
        controller_id=message.controller_id,
        controller_epoch=message.controller_epoch,
        partition_states=[
            p.StopReplicaPartitionState(
                topic.topic_name, s.partition_index, s.leader_epoch, s.delete_partition
            )
            for topic in message.topic_states
            for s in topic.partition_states
        ],
    )


# --- UpdateMetadata ----------------------------------------------------------------------------


def update_metadata_from_wire(message: Any) -> p.UpdateMetadataRequest:
    """The generic conversion, with tierlog's tagged arrays absent read as empty."""
    for topic in message.topic_states:
        topic.topic_configs = topic.topic_configs or []
        for state in topic.partition_states:
            state.offline_replicas = state.offline_replicas or []
            state.adding_replicas = state.adding_replicas or []
            state.removing_replicas = state.removing_replicas or []
    for broker in message.live_brokers:
        broker.endpoints = broker.endpoints or []
    message.broker_configs = message.broker_configs or []
    request: p.UpdateMetadataRequest = from_wire(message, p.UpdateMetadataRequest)
    return request


# --- the listener's handlers -------------------------------------------------------------------


def _served(ctx: RequestContext, name: str) -> None:
    """Closes the connection unless this broker talks to other brokers over the wire."""
    from .apis import ConnectionClosed  # apis.py lists these handlers in its table

    if not ctx.broker.inter_broker_enabled:
        raise ConnectionClosed(
            f"{name} is served only by a broker of a multi-process cluster, and broker "
            f"{ctx.broker.broker_id} is not one"
        )


def _leader_and_isr(ctx: RequestContext, message: Any) -> ApiMessage:
    _served(ctx, "LeaderAndIsr")
    request = leader_and_isr_from_wire(message)
    answer = ctx.broker.handle(request)
    assert isinstance(answer, p.LeaderAndIsrResponse)
    wire: ApiMessage = leader_and_isr_response_to_wire(answer, request.topic_ids, ctx.version)
    return wire


def _stop_replica(ctx: RequestContext, message: Any) -> ApiMessage:
    _served(ctx, "StopReplica")
    answer = ctx.broker.handle(stop_replica_from_wire(message))
    wire: ApiMessage = to_wire(answer, _response_class(STOP_REPLICA, ctx.version))
    return wire


def _update_metadata(ctx: RequestContext, message: Any) -> ApiMessage:
    _served(ctx, "UpdateMetadata")
    answer = ctx.broker.handle(update_metadata_from_wire(message))
    wire: ApiMessage = to_wire(answer, _response_class(UPDATE_METADATA, ctx.version))
    return wire


def _to_controller(key: int, name: str, broker_type: type[Any]) -> Callable[..., ApiMessage]:
    """A request for the controller: converted by field name, answered by the broker."""

    def handle(ctx: RequestContext, message: Any) -> ApiMessage:
        _served(ctx, name)
        answer = ctx.broker.handle(from_wire(message, broker_type))
        wire: ApiMessage = to_wire(answer, _response_class(key, ctx.version))
        return wire

    return handle


#: (key, lowest version, highest version, handler) of each inter-broker API, for ``APIS``.
INTER_BROKER_APIS: tuple[tuple[int, int, int, Callable[..., ApiMessage | None]], ...] = (
    (LEADER_AND_ISR, 7, 7, _leader_and_isr),
    (STOP_REPLICA, 4, 4, _stop_replica),
    (UPDATE_METADATA, 8, 8, _update_metadata),
    (
        CONTROLLED_SHUTDOWN,
        3,
        3,
        _to_controller(CONTROLLED_SHUTDOWN, "ControlledShutdown", p.ControlledShutdownRequest),
    ),
    (
        ALTER_PARTITION,
        3,
        3,
        _to_controller(ALTER_PARTITION, "AlterPartition", p.AlterPartitionRequest),
    ),
    (
        ALLOCATE_PRODUCER_IDS,
        0,
        0,
        _to_controller(ALLOCATE_PRODUCER_IDS, "AllocateProducerIds", p.AllocateProducerIdsRequest),
    ),
)
