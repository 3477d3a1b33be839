"""Kafka's wire format, through kafka-python's generated ``kafka.protocol`` classes.

The codec is kafka-python's (pinned exactly in ``constraints.txt``); this module is the thin
edge around it: peek a frame's header, decode a request, encode a response, and convert between
its message objects and the broker's own request types (``server/protocol.py``). The broker's
types mirror Kafka's JSON schemas field for field in snake_case, as kafka-python's do, so one
generic conversion by field name covers every API; the handlers in ``apis.py`` patch what
differs.
"""

from __future__ import annotations

import struct
import types
import typing
import uuid
from collections.abc import Iterator
from functools import cache
from typing import Any, NamedTuple

import attrs
from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

from ..model import ZERO_UUID, Uuid
from .schemas import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)

#: api key -> (request class, response class), for every API the listener can decode.
MESSAGES: dict[int, tuple[type[ApiMessage], type[ApiMessage]]] = {
    request.API_KEY: (request, response)
    for request, response in (
        (ProduceRequest, ProduceResponse),
        (FetchRequest, FetchResponse),
        (ListOffsetsRequest, ListOffsetsResponse),
        (MetadataRequest, MetadataResponse),
        (FindCoordinatorRequest, FindCoordinatorResponse),
        (ApiVersionsRequest, ApiVersionsResponse),
        (CreateTopicsRequest, CreateTopicsResponse),
        (DeleteTopicsRequest, DeleteTopicsResponse),
        (DeleteRecordsRequest, DeleteRecordsResponse),
        (InitProducerIdRequest, InitProducerIdResponse),
        (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
        (DescribeConfigsRequest, DescribeConfigsResponse),
        (AlterConfigsRequest, AlterConfigsResponse),
        (CreatePartitionsRequest, CreatePartitionsResponse),
        (ElectLeadersRequest, ElectLeadersResponse),
        (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
        (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
        (ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
        (DescribeClusterRequest, DescribeClusterResponse),
        # The group coordinator (tierlog.groups).
        (OffsetCommitRequest, OffsetCommitResponse),
        (OffsetFetchRequest, OffsetFetchResponse),
        (JoinGroupRequest, JoinGroupResponse),
        (HeartbeatRequest, HeartbeatResponse),
        (LeaveGroupRequest, LeaveGroupResponse),
        (SyncGroupRequest, SyncGroupResponse),
        (DescribeGroupsRequest, DescribeGroupsResponse),
        (ListGroupsRequest, ListGroupsResponse),
        (DeleteGroupsRequest, DeleteGroupsResponse),
        (OffsetDeleteRequest, OffsetDeleteResponse),
        (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
        (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
        # Between brokers of a multi-process cluster (inter_broker_apis.py).
        (LeaderAndIsrRequest, LeaderAndIsrResponse),
        (StopReplicaRequest, StopReplicaResponse),
        (UpdateMetadataRequest, UpdateMetadataResponse),
        (ControlledShutdownRequest, ControlledShutdownResponse),
        (AlterPartitionRequest, AlterPartitionResponse),
        (AllocateProducerIdsRequest, AllocateProducerIdsResponse),
    )
}

_HEADER = struct.Struct(">hhi")
HEADER_PREFIX_SIZE = _HEADER.size


class FrameError(ValueError):
    """A frame that cannot be read as the request its header names."""


@attrs.frozen
class RequestHeader:
    """What the first bytes of every request say, readable before the body is decoded."""

    api_key: int
    api_version: int
    correlation_id: int


def peek_header(frame: bytes) -> RequestHeader:
    """The api key, version and correlation id at the start of a request frame."""
    if len(frame) < HEADER_PREFIX_SIZE:
        raise FrameError(f"a request needs at least {HEADER_PREFIX_SIZE} bytes, got {len(frame)}")
    return RequestHeader(*_HEADER.unpack_from(frame))


def decode_request(frame: bytes, header: RequestHeader) -> tuple[ApiMessage, str | None]:
    """The request in ``frame`` and the client id of its header.

    :raises FrameError: truncated or malformed, or with a null where the schema allows none
        (bytes after the request are ignored).
    """
    request_class = MESSAGES[header.api_key][0]
    try:
        message = request_class.decode(frame, version=header.api_version, header=True)
    except FrameError:
        raise
    except Exception as err:  # the codec raises whatever its parser met
        raise FrameError(
            f"cannot decode {request_class.__name__} v{header.api_version}: "
            f"{type(err).__name__}: {err}"
        ) from None
    _check_nulls(message, header.api_version, request_class.__name__)
    client_id = message.header.client_id
    return message, client_id if isinstance(client_id, str) else None


def _check_nulls(message: Any, version: int, path: str) -> None:
    """Kafka refuses a null where the schema allows none (``non-nullable field ... was
    serialized as null``); the codec reads one as None, which no handler expects."""
    message_class: Any = type(message)
    for name, nullable, nested, is_array, tagged in _null_rules(message_class, version):
        value = getattr(message, name)
        if value is None:
            if not nullable and not tagged:
                raise FrameError(f"non-nullable field {path}.{name} is null (v{version})")
        elif nested and is_array:
            for item in value:
                _check_nulls(item, version, f"{path}.{name}")
        elif nested:
            _check_nulls(value, version, f"{path}.{name}")


@cache
def _null_rules(message_class: Any, version: int) -> tuple[tuple[str, bool, bool, bool, bool], ...]:
    """(name, nullable, is a struct, is an array, is tagged) of each field at ``version`` that
    has a null on the wire: strings, bytes, arrays and structs (the codec reads the all-zero
    uuid as None too, but that is a value, not a null). A tagged field may be absent, and then
    holds its default, null or not; one that is present is checked within like any other."""
    return tuple(
        (
            field.name,
            bool(field.nullable_for_version_q(version)),
            bool(field.is_struct() or field.is_struct_array()),
            bool(field.is_array()),
            bool(field.tagged_field_q(version)),
        )
        for field in message_class._struct._fields
        if field.for_version_q(version)
        and (field.is_array() or field.is_struct() or field.type_str in _NULLABLE_KINDS)
    )


_NULLABLE_KINDS = frozenset({"string", "bytes", "records"})


def encode_response(response: ApiMessage, version: int, correlation_id: int) -> bytes:
    """A size-prefixed response frame, its header matching the request's version."""
    response.API_VERSION = version
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


# --- the errors in a response ---------------------------------------------------------------


class ResponseError(NamedTuple):
    """One ``error_code`` of a response, with the topic and partition it answers for (None
    for the request as a whole) and its ``error_message`` if the version has one. A tuple:
    every answer has some, and they are made on every request."""

    code: int
    topic: str | None = None
    partition: int | None = None
    message: str | None = None


_TOPIC_FIELDS = frozenset({"name", "topic"})
_PARTITION_FIELDS = frozenset({"partition_index", "index", "partition"})
_TOPIC, _PARTITION, _CODE, _MESSAGE, _NESTED, _NESTED_ARRAY = range(6)


def response_errors(message: Any, topic: str | None = None) -> Iterator[ResponseError]:
    """Every error code in ``message``, NONE included (Kafka's ErrorsPerSec counts it too),
    depth first; a struct's code is for the topic named on it or above it."""
    partition = code = text = None
    message_class: Any = type(message)
    for name, role in _error_fields(message_class):
        value = getattr(message, name, None)
        if value is None:
            continue
        if role == _TOPIC:
            if isinstance(value, str):
                topic = value
        elif role == _PARTITION:
            if isinstance(value, int):
                partition = value
        elif role == _CODE:
            code = value
        elif role == _MESSAGE:
            text = value
        elif role == _NESTED_ARRAY:
            for item in value:
                yield from response_errors(item, topic)
        else:
            yield from response_errors(value, topic)
    if isinstance(code, int):
        yield ResponseError(code, topic, partition, text if isinstance(text, str) else None)


@cache
def _error_fields(message_class: Any) -> tuple[tuple[str, int], ...]:
    """The fields of a codec class that name, locate or hold an error, or nest structs."""
    struct = getattr(message_class, "_struct", None)
    if struct is None:
        return ()
    fields = []
    for field in struct._fields:
        if field.is_struct_array():
            fields.append((field.name, _NESTED_ARRAY))
        elif field.is_struct():
            fields.append((field.name, _NESTED))
        elif field.name in _TOPIC_FIELDS:
            fields.append((field.name, _TOPIC))
        elif field.name in _PARTITION_FIELDS:
            fields.append((field.name, _PARTITION))
        elif field.name == "error_code":
            fields.append((field.name, _CODE))
        elif field.name == "error_message":
            fields.append((field.name, _MESSAGE))
    return tuple(fields)


# --- conversion between the codec's messages and the broker's types -----------------------


def to_wire(value: Any, wire_class: Any) -> Any:
    """``value`` (a broker type, an attrs instance) as ``wire_class``, field by field by name.

    Fields the wire class has and ``value`` lacks keep the codec's defaults; fields the version
    being encoded does not carry are dropped by the codec.
    """
    kwargs = {}
    for name, field, nested in _wire_fields(wire_class):
        if not hasattr(value, name):
            continue
        kwargs[name] = _wire_value(getattr(value, name), field, nested)
    return wire_class(**kwargs)


@cache
def _wire_fields(wire_class: Any) -> tuple[tuple[str, Any, Any], ...]:
    """Each field of a codec class with the class of its nested struct (None if plain)."""
    fields = []
    for field in wire_class._struct._fields:
        nested = None
        if field.is_struct_array() or field.is_struct():
            nested = getattr(field, "data_class", None)
            if nested is None:
                inner = field.array_of if field.is_struct_array() else field
                nested = getattr(wire_class, inner._json["type"].removeprefix("[]"))
        fields.append((field.name, field, nested))
    return tuple(fields)


def _wire_value(value: Any, field: Any, nested: Any) -> Any:
    if value is None:
        return None
    if nested is not None:
        if field.is_struct_array():
            return [to_wire(item, nested) for item in value]
        return to_wire(value, nested)
    if isinstance(value, Uuid):
        return None if value == ZERO_UUID else uuid.UUID(bytes=value.value)
    if isinstance(value, tuple):
        return list(value)
    return value


def from_wire(message: Any, broker_class: type[Any]) -> Any:
    """``message`` (a codec object) as ``broker_class``, field by field by name; fields the
    message does not have keep the broker type's defaults."""
    kwargs = {}
    for name, kind in _field_kinds(broker_class):  # type: ignore[arg-type]
        if not hasattr(message, name):
            continue
        kwargs[name] = _broker_value(getattr(message, name), kind)
    return broker_class(**kwargs)


def _broker_value(value: Any, kind: Any) -> Any:
    if kind is Uuid:
        return ZERO_UUID if value is None else Uuid(value.bytes)
    if value is None:
        return None
    if isinstance(kind, type) and attrs.has(kind):
        return from_wire(value, kind)
    if isinstance(kind, tuple):
        return tuple(_broker_value(item, kind[0]) for item in value)
    return value


@cache
def _field_kinds(broker_class: type[Any]) -> tuple[tuple[str, Any], ...]:
    """Each attrs field of ``broker_class`` with what it holds: a nested broker type, ``Uuid``,
    ``(element kind,)`` for a tuple, or None for a plain value."""
    hints = typing.get_type_hints(broker_class)
    return tuple((field.name, _kind(hints[field.name])) for field in attrs.fields(broker_class))


def _kind(hint: Any) -> Any:
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    origin = typing.get_origin(hint)
    if origin is tuple:
        return (_kind(args[0]),)
    if origin in (typing.Union, types.UnionType) and args:
        return _kind(args[0])
    if hint is Uuid or (isinstance(hint, type) and attrs.has(hint)):
        return hint
    return None
