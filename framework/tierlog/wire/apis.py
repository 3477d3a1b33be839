"""Every API the listener serves: its versions, and how its wire message maps to the broker's.

The table :data:`APIS` is what ApiVersions advertises, exactly: an API or version not in it is
never decoded (the connection is closed, as Kafka does), so what is advertised is what is
implemented and tested. Each entry converts the codec's request into the broker's own request
type (``server/protocol.py``), lets the broker answer it, and converts the answer back; the
broker's types share Kafka's field names, so most entries are the generic conversion, and the
few fields that differ are patched here, next to the API they belong to.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata.api_versions import ApiVersionsResponse

from ..errors import LeaderNotAvailableError
from ..groups import consumer_protocol as cgp
from ..server import protocol as p
from .codec import MESSAGES, from_wire, to_wire
from .endpoints import EndpointDirectory
from .group_apis import GROUP_APIS
from .inter_broker_apis import INTER_BROKER_APIS, INTER_BROKER_KEYS
from .metrics import error_name

if TYPE_CHECKING:
    from ..server.broker import Broker

log = logging.getLogger(__name__)

_LEADER_NOT_AVAILABLE = LeaderNotAvailableError.code or 5


class ConnectionClosed(Exception):
    """The connection must close; the message says why, for the log."""


@attrs.frozen
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Broker
    endpoints: EndpointDirectory
    listener: str
    version: int
    client_id: str | None
    peer: str


Handler = Callable[[RequestContext, Any], ApiMessage | None]


@attrs.frozen
class Api:
    """One API: the versions served and the handler (None answer: send nothing, acks=0)."""

    key: int
    min_version: int
    max_version: int
    handler: Handler

    @property
    def name(self) -> str:
        name: str = MESSAGES[self.key][0].name
        return name.removesuffix("Request")

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


def _response_class(key: int, version: int) -> Any:
    return MESSAGES[key][1][version]


def _generic(
    broker_request: type[Any],
    *,
    patch_request: Callable[[RequestContext, Any, Any], Any] | None = None,
    patch_response: Callable[[RequestContext, Any, Any], Any] | None = None,
) -> Handler:
    """A handler that converts by field name, with optional patches before and after."""
    key = broker_request.API_KEY

    def handle(ctx: RequestContext, message: Any) -> ApiMessage:
        request = from_wire(message, broker_request)
        if patch_request is not None:
            request = patch_request(ctx, message, request)
        answer = ctx.broker.handle(request)
        wire = to_wire(answer, _response_class(key, ctx.version))
        if patch_response is not None:
            wire = patch_response(ctx, answer, wire)
        return wire

    return handle


# --- ApiVersions ---------------------------------------------------------------------------


def api_versions_response(
    version: int, error_code: int = 0, hidden: frozenset[int] = frozenset()
) -> ApiMessage:
    """Every API in :data:`APIS` with its range (KIP-511: ``error_code`` 35 and version 0 when
    the client asked for a version this broker does not serve), but the ``hidden`` keys."""
    response_class = ApiVersionsResponse[version]
    return response_class(
        error_code=error_code,
        api_keys=[
            response_class.ApiVersion(
                api_key=api.key, min_version=api.min_version, max_version=api.max_version
            )
            for api in sorted(APIS.values(), key=lambda a: a.key)
            if api.key not in hidden
        ],
        throttle_time_ms=0,
    )


def _api_versions(ctx: RequestContext, _message: Any) -> ApiMessage:
    return api_versions_response(ctx.version, hidden=_disabled_apis(ctx))


def _disabled_apis(ctx: RequestContext) -> frozenset[int]:
    """The APIs switched off by configuration: the consumer group protocol's, unless
    ``group.coordinator.rebalance.protocols`` lists consumer (a client then uses classic); the
    inter-broker ones, unless the broker is a node of a multi-process cluster."""
    disabled = frozenset() if ctx.broker.inter_broker_enabled else INTER_BROKER_KEYS
    if "consumer" in ctx.broker.config.get_list("group.coordinator.rebalance.protocols"):
        return disabled
    return disabled | _CONSUMER_PROTOCOL_APIS


# --- Produce -------------------------------------------------------------------------------

ADMIN_CLIENT_ID = "__admin_client"
"""The client id whose produce may append to internal topics: Kafka's own rule
(``internalTopicsAllowed = clientId == "__admin_client"``), which the runtime of a
multi-process cluster relies on to write its internal topics on another broker. Like Kafka,
tierlog does not authenticate it: any client that names itself so may write them."""


def _produce(ctx: RequestContext, message: Any) -> ApiMessage | None:
    for topic in message.topic_data:
        for partition in topic.partition_data:
            if partition.records is None:
                partition.records = b""
    request = from_wire(message, p.ProduceRequest)
    handle = ctx.broker.handle
    if ctx.client_id == ADMIN_CLIENT_ID:
        handle = ctx.broker.handle_internal_produce  # type: ignore[assignment]
    if request.acks == p.Acks.NONE:
        # Appended as acks=1 is (the leader alone), so the results exist to act on; the
        # client is sent nothing.
        answer = handle(attrs.evolve(request, acks=p.Acks.LEADER))
        assert isinstance(answer, p.ProduceResponse)
        _close_on_failure(answer)
        return None
    return to_wire(handle(request), _response_class(0, ctx.version))


def _create_topics(ctx: RequestContext, message: Any) -> ApiMessage:
    """CreateTopics; from ``__admin_client`` (a broker of a multi-process cluster creating an
    internal topic through the controller) internal names are allowed, as the runtime's own."""
    request = from_wire(message, p.CreateTopicsRequest)
    internal = ctx.client_id == ADMIN_CLIENT_ID and ctx.broker.inter_broker_enabled
    answer = (
        ctx.broker.controller.create_topics(request, internal_allowed=True)
        if internal
        else ctx.broker.handle(request)
    )
    return to_wire(answer, _response_class(19, ctx.version))


def _close_on_failure(answer: p.ProduceResponse) -> None:
    """An acks=0 producer hears of nothing but a closed connection, so a failed acks=0 produce
    closes it, as Kafka does: the client then refreshes its metadata and learns of the trouble."""
    for topic in answer.responses:
        for partition in topic.partition_responses:
            if partition.error_code != p.NONE:
                raise ConnectionClosed(
                    f"acks=0 produce to {topic.name}-{partition.index} failed with "
                    f"{error_name(partition.error_code)}: {partition.error_message}"
                )


# --- Fetch ---------------------------------------------------------------------------------


def _fetch_response(ctx: RequestContext, answer: p.FetchResponse, wire: Any) -> Any:
    """The broker's diverging epoch is an OffsetForLeaderEpoch result; the wire's has two fields."""
    for topic, wire_topic in zip(answer.responses, wire.responses, strict=True):
        for partition, wire_partition in zip(topic.partitions, wire_topic.partitions, strict=True):
            diverging = partition.diverging_epoch
            wire_partition.diverging_epoch = (
                None
                if diverging is None
                else type(wire_partition).EpochEndOffset(
                    epoch=diverging.leader_epoch, end_offset=diverging.end_offset
                )
            )
    return wire


# --- Metadata ------------------------------------------------------------------------------


def _metadata_request(ctx: RequestContext, message: Any, request: p.MetadataRequest) -> Any:
    if ctx.version == 0 and not message.topics:
        return attrs.evolve(request, topics=None)  # v0: an empty list means every topic
    if ctx.version < 4:
        return attrs.evolve(request, allow_auto_topic_creation=True)
    return request


def _metadata_response(ctx: RequestContext, answer: p.MetadataResponse, wire: Any) -> Any:
    """Brokers at their advertised addresses; a partition whose leader is not among them (its
    listener is down, the broker stopping) has no leader a client could reach:
    LEADER_NOT_AVAILABLE, as Kafka answers while a leader is being elected."""
    wire.brokers = _advertised(ctx, wire.brokers, "node_id")
    listed = {broker.node_id for broker in wire.brokers}
    for topic in wire.topics:
        for partition in topic.partitions:
            if partition.error_code == 0 and partition.leader_id not in listed:
                partition.error_code = _LEADER_NOT_AVAILABLE
                partition.leader_id = p.NO_LEADER
    return wire


def _advertised(ctx: RequestContext, brokers: list[Any], id_field: str) -> list[Any]:
    """``brokers`` (wire objects) at the addresses their listeners advertise on the listener
    this request came in on; a broker with no such listener is left out."""
    endpoints = ctx.endpoints.snapshot(ctx.listener)
    listed = []
    for broker in brokers:
        endpoint = endpoints.get(getattr(broker, id_field))
        if endpoint is not None:
            broker.host, broker.port = endpoint.host, endpoint.port
            listed.append(broker)
    return listed


# --- AlterConfigs --------------------------------------------------------------------------


def _alter_configs(ctx: RequestContext, message: Any) -> ApiMessage:
    """The legacy, whole-set AlterConfigs (aiokafka's only way) as the incremental one: every
    key given is SET, every dynamic key set now and not given is DELETEd, as Kafka replaces a
    resource's whole dynamic configuration."""
    image = ctx.broker.controller.image()
    resources = []
    for resource in message.resources:
        given = {config.name: config.value for config in resource.configs}
        if resource.resource_type == p.ResourceType.TOPIC:
            topic = image.topic(resource.resource_name)
            current = {} if topic is None else topic.configs
        else:
            current = image.broker_configs.get(resource.resource_name, {})
        ops = [p.AlterableConfig(name, p.AlterConfigOp.SET, value) for name, value in given.items()]
        ops += [
            p.AlterableConfig(name, p.AlterConfigOp.DELETE) for name in current if name not in given
        ]
        resources.append(
            p.AlterConfigsResource(resource.resource_type, resource.resource_name, ops)
        )
    answer = ctx.broker.handle(p.IncrementalAlterConfigsRequest(resources, message.validate_only))
    return to_wire(answer, _response_class(33, ctx.version))


# --- DescribeCluster -----------------------------------------------------------------------


def _describe_cluster_response(
    ctx: RequestContext, answer: p.DescribeClusterResponse, wire: Any
) -> Any:
    wire.brokers = _advertised(ctx, wire.brokers, "broker_id")
    return wire


# --- ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) ------------------------------

_CONSUMER_PROTOCOL_APIS = frozenset({68, 69})
_UNSUPPORTED_VERSION = 35


def _client_host(peer: str) -> str:
    """Kafka's form of a client's address in a group: the host with a leading slash."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


def _consumer_group_heartbeat(ctx: RequestContext, message: Any) -> ApiMessage:
    if _CONSUMER_PROTOCOL_APIS & _disabled_apis(ctx):
        return _response_class(68, ctx.version)(
            error_code=_UNSUPPORTED_VERSION,
            error_message="the consumer group protocol is not enabled on this broker",
            member_epoch=-1,
            heartbeat_interval_ms=0,
        )
    request = attrs.evolve(
        from_wire(message, cgp.ConsumerGroupHeartbeatRequest),
        client_id=ctx.client_id or "",
        client_host=_client_host(ctx.peer),
        api_version=ctx.version,
    )
    return to_wire(ctx.broker.handle(request), _response_class(68, ctx.version))


def _consumer_group_describe(ctx: RequestContext, message: Any) -> ApiMessage:
    request = from_wire(message, cgp.ConsumerGroupDescribeRequest)
    return to_wire(ctx.broker.handle(request), _response_class(69, ctx.version))


APIS: dict[int, Api] = {
    api.key: api
    for api in (
        Api(0, 3, 11, _produce),
        Api(1, 4, 12, _generic(p.FetchRequest, patch_response=_fetch_response)),
        Api(2, 1, 9, _generic(p.ListOffsetsRequest)),
        Api(
            3,
            0,
            12,
            _generic(
                p.MetadataRequest,
                patch_request=_metadata_request,
                patch_response=_metadata_response,
            ),
        ),
        Api(18, 0, 4, _api_versions),
        Api(19, 0, 7, _create_topics),
        Api(20, 0, 6, _generic(p.DeleteTopicsRequest)),
        Api(21, 0, 2, _generic(p.DeleteRecordsRequest)),
        Api(22, 0, 4, _generic(p.InitProducerIdRequest)),
        Api(23, 2, 4, _generic(p.OffsetsForLeaderEpochRequest)),
        Api(32, 0, 4, _generic(p.DescribeConfigsRequest)),
        Api(33, 0, 2, _alter_configs),
        Api(37, 0, 3, _generic(p.CreatePartitionsRequest)),
        Api(43, 0, 2, _generic(p.ElectLeadersRequest)),
        Api(44, 0, 1, _generic(p.IncrementalAlterConfigsRequest)),
        Api(45, 0, 0, _generic(p.AlterPartitionReassignmentsRequest)),
        Api(46, 0, 0, _generic(p.ListPartitionReassignmentsRequest)),
        Api(
            60,
            0,
            1,
            _generic(p.DescribeClusterRequest, patch_response=_describe_cluster_response),
        ),
        # The group coordinator's APIs (group_apis.py).
        *(Api(key, low, high, handler) for key, low, high, handler in GROUP_APIS),
        Api(68, 0, 1, _consumer_group_heartbeat),
        Api(69, 0, 1, _consumer_group_describe),
        # Between brokers of a multi-process cluster only (inter_broker_apis.py).
        *(Api(key, low, high, handler) for key, low, high, handler in INTER_BROKER_APIS),
    )
}
"""api key -> what is served of it."""
