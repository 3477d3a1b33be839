"""The broker's requests and responses, field for field as in Kafka's protocol.

Every class mirrors one Kafka message (``clients/src/main/resources/common/message/*.json``) with
the field names in snake_case, so a Kafka wire front end is a pure codec on top of these and a
Kafka operator reads them without a glossary. Record sets are raw bytes (concatenated record
batches v2); error codes are ints, taken from :mod:`tierlog.errors` (``SomeError.code``), 0 for
none. Sequences are tuples so messages stay frozen and hashable; any iterable is accepted.

What is left out on purpose: fetch sessions (every fetch is a full fetch, ``session_id`` 0; an
incremental one is answered FETCH_SESSION_ID_NOT_FOUND), rack awareness and
authorized-operations bitmaps, which no part of tierlog uses yet. Field values are checked by
the handlers (see ``request_validation.py``), not here: a malformed value must get its error
code, not an exception.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, ClassVar

import attrs

from ..model import ZERO_UUID, Uuid


def _tuple(items: Iterable[Any]) -> tuple[Any, ...]:
    # Not generic on purpose: mypy's attrs plugin cannot bind a generic converter's type variable.
    return tuple(items)


def _optional_tuple(items: Iterable[Any] | None) -> tuple[Any, ...] | None:
    return None if items is None else tuple(items)


def _bytes(data: bytes | bytearray | memoryview) -> bytes:
    return bytes(data)


NONE: int = 0
"""The error code meaning success."""

CONSUMER_REPLICA_ID: int = -1
"""``replica_id`` of an ordinary client; brokers send their own id."""

NO_LEADER: int = -1
UNKNOWN_OFFSET: int = -1
UNKNOWN_EPOCH: int = -1
NO_TIMESTAMP: int = -1


class IsolationLevel(enum.IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class Acks(enum.IntEnum):
    NONE = 0
    LEADER = 1
    ALL = -1


class OffsetSpec(enum.IntEnum):
    """The special ``timestamp`` values of a list-offsets partition (KIP-734, KIP-1005)."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3
    EARLIEST_LOCAL = -4
    LATEST_TIERED = -5


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(enum.IntEnum):
    """Where a described config value comes from (``DescribeConfigsResponse.config_source``)."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigType(enum.IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterConfigOp(enum.IntEnum):
    """``IncrementalAlterConfigsRequest`` operation types."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


# --- Produce (api key 0) -----------------------------------------------------------------------


@attrs.frozen
class PartitionProduceData:
    index: int
    records: bytes = attrs.field(converter=_bytes, repr=lambda r: f"<{len(r)} bytes>")


@attrs.frozen
class TopicProduceData:
    name: str
    partition_data: tuple[PartitionProduceData, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class ProduceRequest:
    API_KEY: ClassVar[int] = 0

    acks: int
    timeout_ms: int
    topic_data: tuple[TopicProduceData, ...] = attrs.field(converter=_tuple)
    transactional_id: str | None = None


@attrs.frozen
class BatchIndexAndErrorMessage:
    batch_index: int
    batch_index_error_message: str | None = None


@attrs.frozen
class PartitionProduceResponse:
    index: int
    error_code: int = NONE
    base_offset: int = UNKNOWN_OFFSET
    log_append_time_ms: int = NO_TIMESTAMP
    log_start_offset: int = UNKNOWN_OFFSET
    record_errors: tuple[BatchIndexAndErrorMessage, ...] = attrs.field(default=(), converter=_tuple)
    error_message: str | None = None


@attrs.frozen
class TopicProduceResponse:
    name: str
    partition_responses: tuple[PartitionProduceResponse, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class ProduceResponse:
    """With ``acks=0`` Kafka sends no response; tierlog answers with an empty one."""

    responses: tuple[TopicProduceResponse, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- Fetch (api key 1) -------------------------------------------------------------------------


@attrs.frozen
class FetchPartition:
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = UNKNOWN_EPOCH
    last_fetched_epoch: int = UNKNOWN_EPOCH
    log_start_offset: int = UNKNOWN_OFFSET


@attrs.frozen
class FetchTopic:
    topic: str
    partitions: tuple[FetchPartition, ...] = attrs.field(converter=_tuple)
    topic_id: Uuid = ZERO_UUID


@attrs.frozen
class FetchRequest:
    API_KEY: ClassVar[int] = 1

    topics: tuple[FetchTopic, ...] = attrs.field(converter=_tuple)
    replica_id: int = CONSUMER_REPLICA_ID
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    isolation_level: int = IsolationLevel.READ_UNCOMMITTED
    session_id: int = 0
    session_epoch: int = -1


@attrs.frozen
class AbortedTransaction:
    producer_id: int
    first_offset: int


@attrs.frozen
class EpochEndOffset:
    """Also the per-partition result of OffsetsForLeaderEpoch."""

    partition: int
    error_code: int = NONE
    leader_epoch: int = UNKNOWN_EPOCH
    end_offset: int = UNKNOWN_OFFSET


@attrs.frozen
class LeaderIdAndEpoch:
    leader_id: int = NO_LEADER
    leader_epoch: int = UNKNOWN_EPOCH


@attrs.frozen
class FetchPartitionData:
    partition_index: int
    error_code: int = NONE
    high_watermark: int = UNKNOWN_OFFSET
    last_stable_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    diverging_epoch: EpochEndOffset | None = None
    current_leader: LeaderIdAndEpoch | None = None
    aborted_transactions: tuple[AbortedTransaction, ...] | None = attrs.field(
        default=None, converter=_optional_tuple
    )
    preferred_read_replica: int = -1
    records: bytes = attrs.field(default=b"", converter=_bytes, repr=lambda r: f"<{len(r)} bytes>")


@attrs.frozen
class FetchableTopicResponse:
    topic: str
    partitions: tuple[FetchPartitionData, ...] = attrs.field(converter=_tuple)
    topic_id: Uuid = ZERO_UUID


@attrs.frozen
class FetchResponse:
    responses: tuple[FetchableTopicResponse, ...] = attrs.field(converter=_tuple)
    error_code: int = NONE
    throttle_time_ms: int = 0
    session_id: int = 0


# --- ListOffsets (api key 2) -------------------------------------------------------------------


@attrs.frozen
class ListOffsetsPartition:
    """``timestamp`` is a time in ms or one of :class:`OffsetSpec`."""

    partition_index: int
    timestamp: int
    current_leader_epoch: int = UNKNOWN_EPOCH


@attrs.frozen
class ListOffsetsTopic:
    name: str
    partitions: tuple[ListOffsetsPartition, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class ListOffsetsRequest:
    API_KEY: ClassVar[int] = 2

    topics: tuple[ListOffsetsTopic, ...] = attrs.field(converter=_tuple)
    replica_id: int = CONSUMER_REPLICA_ID
    isolation_level: int = IsolationLevel.READ_UNCOMMITTED


@attrs.frozen
class ListOffsetsPartitionResponse:
    partition_index: int
    error_code: int = NONE
    timestamp: int = NO_TIMESTAMP
    offset: int = UNKNOWN_OFFSET
    leader_epoch: int = UNKNOWN_EPOCH


@attrs.frozen
class ListOffsetsTopicResponse:
    name: str
    partitions: tuple[ListOffsetsPartitionResponse, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class ListOffsetsResponse:
    topics: tuple[ListOffsetsTopicResponse, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- Metadata (api key 3) ----------------------------------------------------------------------


@attrs.frozen
class MetadataRequestTopic:
    name: str | None
    topic_id: Uuid = ZERO_UUID


@attrs.frozen
class MetadataRequest:
    """``topics=None`` asks for every topic, an empty tuple for none (brokers only)."""

    API_KEY: ClassVar[int] = 3

    topics: tuple[MetadataRequestTopic, ...] | None = attrs.field(
        default=None, converter=_optional_tuple
    )
    allow_auto_topic_creation: bool = False


@attrs.frozen
class MetadataResponseBroker:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen
class MetadataResponsePartition:
    partition_index: int
    error_code: int = NONE
    leader_id: int = NO_LEADER
    leader_epoch: int = UNKNOWN_EPOCH
    replica_nodes: tuple[int, ...] = attrs.field(default=(), converter=_tuple)
    isr_nodes: tuple[int, ...] = attrs.field(default=(), converter=_tuple)
    offline_replicas: tuple[int, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class MetadataResponseTopic:
    name: str | None
    error_code: int = NONE
    topic_id: Uuid = ZERO_UUID
    is_internal: bool = False
    partitions: tuple[MetadataResponsePartition, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class MetadataResponse:
    brokers: tuple[MetadataResponseBroker, ...] = attrs.field(converter=_tuple)
    cluster_id: str | None
    controller_id: int
    topics: tuple[MetadataResponseTopic, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- CreateTopics (api key 19) -----------------------------------------------------------------


@attrs.frozen
class CreatableReplicaAssignment:
    partition_index: int
    broker_ids: tuple[int, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class CreatableTopicConfig:
    name: str
    value: str | None


@attrs.frozen
class CreatableTopic:
    """``num_partitions``/``replication_factor`` of -1 take the broker defaults
    (``num.partitions``, ``default.replication.factor``); ``assignments`` excludes both."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[CreatableReplicaAssignment, ...] = attrs.field(default=(), converter=_tuple)
    configs: tuple[CreatableTopicConfig, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class CreateTopicsRequest:
    API_KEY: ClassVar[int] = 19

    topics: tuple[CreatableTopic, ...] = attrs.field(converter=_tuple)
    timeout_ms: int = 30_000
    validate_only: bool = False


@attrs.frozen
class CreatableTopicConfigs:
    name: str
    value: str | None
    read_only: bool = False
    config_source: int = ConfigSource.UNKNOWN
    is_sensitive: bool = False


@attrs.frozen
class CreatableTopicResult:
    name: str
    topic_id: Uuid = ZERO_UUID
    error_code: int = NONE
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[CreatableTopicConfigs, ...] | None = attrs.field(
        default=None, converter=_optional_tuple
    )


@attrs.frozen
class CreateTopicsResponse:
    topics: tuple[CreatableTopicResult, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- DeleteTopics (api key 20) -----------------------------------------------------------------


@attrs.frozen
class DeleteTopicState:
    """A topic to delete by name or, with ``name=None``, by id (DeleteTopics v6)."""

    name: str | None
    topic_id: Uuid = ZERO_UUID


@attrs.frozen
class DeleteTopicsRequest:
    API_KEY: ClassVar[int] = 20

    topic_names: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    timeout_ms: int = 30_000
    topics: tuple[DeleteTopicState, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class DeletableTopicResult:
    name: str | None
    topic_id: Uuid = ZERO_UUID
    error_code: int = NONE
    error_message: str | None = None


@attrs.frozen
class DeleteTopicsResponse:
    responses: tuple[DeletableTopicResult, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- DeleteRecords (api key 21) ----------------------------------------------------------------


@attrs.frozen
class DeleteRecordsPartition:
    """``offset`` -1 means the high watermark."""

    partition_index: int
    offset: int


@attrs.frozen
class DeleteRecordsTopic:
    name: str
    partitions: tuple[DeleteRecordsPartition, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class DeleteRecordsRequest:
    API_KEY: ClassVar[int] = 21

    topics: tuple[DeleteRecordsTopic, ...] = attrs.field(converter=_tuple)
    timeout_ms: int = 30_000


@attrs.frozen
class DeleteRecordsPartitionResult:
    partition_index: int
    low_watermark: int = UNKNOWN_OFFSET
    error_code: int = NONE


@attrs.frozen
class DeleteRecordsTopicResult:
    name: str
    partitions: tuple[DeleteRecordsPartitionResult, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class DeleteRecordsResponse:
    topics: tuple[DeleteRecordsTopicResult, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- InitProducerId (api key 22) -------------------------------------------------------------


@attrs.frozen
class InitProducerIdRequest:
    """A producer asks for its id and epoch. ``producer_id``/``producer_epoch`` name the ones
    it has when it asks again to bump its epoch (KIP-360); -1 both on a first call."""

    API_KEY: ClassVar[int] = 22

    transactional_id: str | None = None
    transaction_timeout_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1


@attrs.frozen
class InitProducerIdResponse:
    error_code: int = NONE
    producer_id: int = -1
    producer_epoch: int = -1
    throttle_time_ms: int = 0


# --- OffsetForLeaderEpoch (api key 23) ---------------------------------------------------------


@attrs.frozen
class OffsetForLeaderPartition:
    partition: int
    leader_epoch: int
    current_leader_epoch: int = UNKNOWN_EPOCH


@attrs.frozen
class OffsetForLeaderTopic:
    topic: str
    partitions: tuple[OffsetForLeaderPartition, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class OffsetsForLeaderEpochRequest:
    API_KEY: ClassVar[int] = 23

    topics: tuple[OffsetForLeaderTopic, ...] = attrs.field(converter=_tuple)
    replica_id: int = CONSUMER_REPLICA_ID


@attrs.frozen
class OffsetForLeaderTopicResult:
    topic: str
    partitions: tuple[EpochEndOffset, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class OffsetsForLeaderEpochResponse:
    topics: tuple[OffsetForLeaderTopicResult, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- WriteTxnMarkers (api key 27) -------------------------------------------------------------


@attrs.frozen
class WritableTxnMarkerTopic:
    name: str
    partition_indexes: tuple[int, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class WritableTxnMarker:
    """One transaction's end: ``transaction_result`` True commits it, False aborts it."""

    producer_id: int
    producer_epoch: int
    transaction_result: bool
    topics: tuple[WritableTxnMarkerTopic, ...] = attrs.field(converter=_tuple)
    coordinator_epoch: int = 0


@attrs.frozen
class WriteTxnMarkersRequest:
    """Sent by a transaction coordinator to each partition leader to end a transaction."""

    API_KEY: ClassVar[int] = 27

    markers: tuple[WritableTxnMarker, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class WritableTxnMarkerPartitionResult:
    partition_index: int
    error_code: int = NONE


@attrs.frozen
class WritableTxnMarkerTopicResult:
    name: str
    partitions: tuple[WritableTxnMarkerPartitionResult, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class WritableTxnMarkerResult:
    producer_id: int
    topics: tuple[WritableTxnMarkerTopicResult, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class WriteTxnMarkersResponse:
    markers: tuple[WritableTxnMarkerResult, ...] = attrs.field(converter=_tuple)


# --- DescribeConfigs (api key 32) --------------------------------------------------------------


@attrs.frozen
class DescribeConfigsResource:
    """``resource_name`` is the topic name, or the broker id as text ('' for the default)."""

    resource_type: int
    resource_name: str
    configuration_keys: tuple[str, ...] | None = attrs.field(
        default=None, converter=_optional_tuple
    )


@attrs.frozen
class DescribeConfigsRequest:
    API_KEY: ClassVar[int] = 32

    resources: tuple[DescribeConfigsResource, ...] = attrs.field(converter=_tuple)
    include_synonyms: bool = False
    include_documentation: bool = False


@attrs.frozen
class DescribeConfigsSynonym:
    name: str
    value: str | None
    source: int


@attrs.frozen
class DescribeConfigsResourceResult:
    """One config entry; ``value`` is None for sensitive configs, as in Kafka.

    ``is_default`` is DescribeConfigs v0's flag, kept alongside ``config_source`` (v1+) because
    it is what most callers want to know.
    """

    name: str
    value: str | None
    read_only: bool = False
    is_default: bool = False
    config_source: int = ConfigSource.UNKNOWN
    is_sensitive: bool = False
    synonyms: tuple[DescribeConfigsSynonym, ...] = attrs.field(default=(), converter=_tuple)
    config_type: int = ConfigType.UNKNOWN
    documentation: str | None = None


@attrs.frozen
class DescribeConfigsResult:
    resource_type: int
    resource_name: str
    error_code: int = NONE
    error_message: str | None = None
    configs: tuple[DescribeConfigsResourceResult, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class DescribeConfigsResponse:
    results: tuple[DescribeConfigsResult, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- CreatePartitions (api key 37) ------------------------------------------------------------


@attrs.frozen
class CreatePartitionsAssignment:
    """The replicas of one new partition."""

    broker_ids: tuple[int, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class CreatePartitionsTopic:
    """Grow topic ``name`` to ``count`` partitions; ``assignments`` (one per new partition)
    places them, None lets the controller place them."""

    name: str
    count: int
    assignments: tuple[CreatePartitionsAssignment, ...] | None = attrs.field(
        default=None, converter=_optional_tuple
    )


@attrs.frozen
class CreatePartitionsRequest:
    API_KEY: ClassVar[int] = 37

    topics: tuple[CreatePartitionsTopic, ...] = attrs.field(converter=_tuple)
    timeout_ms: int = 30_000
    validate_only: bool = False


@attrs.frozen
class CreatePartitionsTopicResult:
    name: str
    error_code: int = NONE
    error_message: str | None = None


@attrs.frozen
class CreatePartitionsResponse:
    results: tuple[CreatePartitionsTopicResult, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- ElectLeaders (api key 43) ----------------------------------------------------------------


class ElectionType(enum.IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


@attrs.frozen
class TopicPartitions:
    topic: str
    partitions: tuple[int, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class ElectLeadersRequest:
    """``topic_partitions`` None asks for every partition of the cluster."""

    API_KEY: ClassVar[int] = 43

    election_type: int = ElectionType.PREFERRED
    topic_partitions: tuple[TopicPartitions, ...] | None = attrs.field(
        default=None, converter=_optional_tuple
    )
    timeout_ms: int = 60_000


@attrs.frozen
class PartitionResult:
    partition_id: int
    error_code: int = NONE
    error_message: str | None = None


@attrs.frozen
class ReplicaElectionResult:
    topic: str
    partition_result: tuple[PartitionResult, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class ElectLeadersResponse:
    error_code: int = NONE
    replica_election_results: tuple[ReplicaElectionResult, ...] = attrs.field(
        default=(), converter=_tuple
    )
    throttle_time_ms: int = 0


# --- IncrementalAlterConfigs (api key 44) ------------------------------------------------------


@attrs.frozen
class AlterableConfig:
    name: str
    config_operation: int
    value: str | None = None


@attrs.frozen
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class IncrementalAlterConfigsRequest:
    API_KEY: ClassVar[int] = 44

    resources: tuple[AlterConfigsResource, ...] = attrs.field(converter=_tuple)
    validate_only: bool = False


@attrs.frozen
class AlterConfigsResourceResponse:
    resource_type: int
    resource_name: str
    error_code: int = NONE
    error_message: str | None = None


@attrs.frozen
class IncrementalAlterConfigsResponse:
    responses: tuple[AlterConfigsResourceResponse, ...] = attrs.field(converter=_tuple)
    throttle_time_ms: int = 0


# --- AlterPartitionReassignments (api key 45), ListPartitionReassignments (46) -----------------


@attrs.frozen
class ReassignablePartition:
    """The replicas ``partition_index`` should end on; None cancels its reassignment."""

    partition_index: int
    replicas: tuple[int, ...] | None = attrs.field(default=None, converter=_optional_tuple)


@attrs.frozen
class ReassignableTopic:
    name: str
    partitions: tuple[ReassignablePartition, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class AlterPartitionReassignmentsRequest:
    API_KEY: ClassVar[int] = 45

    topics: tuple[ReassignableTopic, ...] = attrs.field(converter=_tuple)
    timeout_ms: int = 60_000


@attrs.frozen
class ReassignablePartitionResponse:
    partition_index: int
    error_code: int = NONE
    error_message: str | None = None


@attrs.frozen
class ReassignableTopicResponse:
    name: str
    partitions: tuple[ReassignablePartitionResponse, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class AlterPartitionReassignmentsResponse:
    responses: tuple[ReassignableTopicResponse, ...] = attrs.field(converter=_tuple)
    error_code: int = NONE
    error_message: str | None = None
    throttle_time_ms: int = 0


@attrs.frozen
class ListPartitionReassignmentsTopics:
    name: str
    partition_indexes: tuple[int, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class ListPartitionReassignmentsRequest:
    """``topics`` None lists every partition with a reassignment under way."""

    API_KEY: ClassVar[int] = 46

    topics: tuple[ListPartitionReassignmentsTopics, ...] | None = attrs.field(
        default=None, converter=_optional_tuple
    )
    timeout_ms: int = 60_000


@attrs.frozen
class OngoingPartitionReassignment:
    partition_index: int
    replicas: tuple[int, ...] = attrs.field(converter=_tuple)
    adding_replicas: tuple[int, ...] = attrs.field(converter=_tuple)
    removing_replicas: tuple[int, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class OngoingTopicReassignment:
    name: str
    partitions: tuple[OngoingPartitionReassignment, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class ListPartitionReassignmentsResponse:
    topics: tuple[OngoingTopicReassignment, ...] = attrs.field(converter=_tuple)
    error_code: int = NONE
    error_message: str | None = None
    throttle_time_ms: int = 0


# --- DescribeCluster (api key 60) -------------------------------------------------------------


class EndpointType(enum.IntEnum):
    """Whose endpoints a DescribeCluster asks for (KIP-919)."""

    BROKER = 1
    CONTROLLER = 2


CLUSTER_AUTHORIZED_OPERATIONS_OMITTED: int = -(1 << 31)
"""``cluster_authorized_operations`` when not asked for (Kafka's ``Integer.MIN_VALUE``)."""


@attrs.frozen
class DescribeClusterRequest:
    API_KEY: ClassVar[int] = 60

    include_cluster_authorized_operations: bool = False
    endpoint_type: int = EndpointType.BROKER


@attrs.frozen
class DescribeClusterBroker:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@attrs.frozen
class DescribeClusterResponse:
    error_code: int = NONE
    error_message: str | None = None
    endpoint_type: int = EndpointType.BROKER
    cluster_id: str = ""
    controller_id: int = -1
    brokers: tuple[DescribeClusterBroker, ...] = attrs.field(default=(), converter=_tuple)
    cluster_authorized_operations: int = CLUSTER_AUTHORIZED_OPERATIONS_OMITTED
    throttle_time_ms: int = 0


# --- controller to broker (LeaderAndIsr 4, StopReplica 5) -------------------------------------


@attrs.frozen
class LeaderAndIsrPartitionState:
    topic_name: str
    partition_index: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...] = attrs.field(converter=_tuple)
    partition_epoch: int = 0
    replicas: tuple[int, ...] = attrs.field(default=(), converter=_tuple)
    is_new: bool = False
    adding_replicas: tuple[int, ...] = attrs.field(default=(), converter=_tuple)
    removing_replicas: tuple[int, ...] = attrs.field(default=(), converter=_tuple)


LEADER_AND_ISR_INCREMENTAL: int = 0
LEADER_AND_ISR_FULL: int = 1


@attrs.frozen
class LeaderAndIsrRequest:
    """Tells one broker which replicas to host and whether each leads or follows.

    A ``type`` of LEADER_AND_ISR_FULL lists every replica the broker hosts (KIP-516): the broker
    deletes any other partition directory it finds, e.g. of a topic deleted while it was down.
    """

    API_KEY: ClassVar[int] = 4

    controller_id: int
    controller_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...] = attrs.field(converter=_tuple)
    topic_ids: tuple[tuple[str, Uuid], ...] = attrs.field(default=(), converter=_tuple)
    live_leaders: tuple[int, ...] = attrs.field(default=(), converter=_tuple)
    type: int = LEADER_AND_ISR_INCREMENTAL


@attrs.frozen
class LeaderAndIsrPartitionError:
    topic_name: str
    partition_index: int
    error_code: int = NONE


@attrs.frozen
class LeaderAndIsrResponse:
    error_code: int = NONE
    partition_errors: tuple[LeaderAndIsrPartitionError, ...] = attrs.field(
        default=(), converter=_tuple
    )


@attrs.frozen
class StopReplicaPartitionState:
    topic_name: str
    partition_index: int
    leader_epoch: int = UNKNOWN_EPOCH
    delete_partition: bool = False


@attrs.frozen
class StopReplicaRequest:
    """Stops replicas on one broker; with ``delete_partition`` their log dirs are removed."""

    API_KEY: ClassVar[int] = 5

    controller_id: int
    controller_epoch: int
    partition_states: tuple[StopReplicaPartitionState, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class StopReplicaPartitionError:
    topic_name: str
    partition_index: int
    error_code: int = NONE


@attrs.frozen
class StopReplicaResponse:
    error_code: int = NONE
    partition_errors: tuple[StopReplicaPartitionError, ...] = attrs.field(
        default=(), converter=_tuple
    )


# --- UpdateMetadata (api key 6) ----------------------------------------------------------------


@attrs.frozen
class UpdateMetadataEndpoint:
    """One listener of a live broker; ``security_protocol`` is Kafka's id (0: PLAINTEXT)."""

    port: int
    host: str
    listener: str
    security_protocol: int = 0


@attrs.frozen
class UpdateMetadataBroker:
    id: int
    endpoints: tuple[UpdateMetadataEndpoint, ...] = attrs.field(default=(), converter=_tuple)
    rack: str | None = None


@attrs.frozen
class UpdateMetadataConfig:
    name: str
    value: str


@attrs.frozen
class UpdateMetadataPartitionState:
    """``zk_version`` is the partition epoch (Kafka's name from ZooKeeper mode)."""

    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...] = attrs.field(converter=_tuple)
    zk_version: int = 0
    replicas: tuple[int, ...] = attrs.field(default=(), converter=_tuple)
    offline_replicas: tuple[int, ...] = attrs.field(default=(), converter=_tuple)
    adding_replicas: tuple[int, ...] = attrs.field(default=(), converter=_tuple)
    removing_replicas: tuple[int, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class UpdateMetadataTopicState:
    topic_name: str
    topic_id: Uuid
    partition_states: tuple[UpdateMetadataPartitionState, ...] = attrs.field(converter=_tuple)
    topic_configs: tuple[UpdateMetadataConfig, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class UpdateMetadataBrokerConfigs:
    """The dynamic configs of one broker (``resource_name`` its id as text, '' the default)."""

    resource_name: str
    configs: tuple[UpdateMetadataConfig, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class UpdateMetadataRequest:
    """The controller's whole image, pushed to a broker of a multi-process cluster.

    Kafka's fields, and tierlog's (tagged on the wire): ``cluster_id``, each topic's
    ``topic_configs``, ``broker_configs`` and each partition's adding and removing replicas, so
    that the broker rebuilds exactly the image the controller holds (``update_metadata.py``).
    """

    API_KEY: ClassVar[int] = 6

    controller_id: int
    controller_epoch: int
    topic_states: tuple[UpdateMetadataTopicState, ...] = attrs.field(converter=_tuple)
    live_brokers: tuple[UpdateMetadataBroker, ...] = attrs.field(converter=_tuple)
    broker_epoch: int = -1
    cluster_id: str | None = None
    broker_configs: tuple[UpdateMetadataBrokerConfigs, ...] = attrs.field(
        default=(), converter=_tuple
    )


@attrs.frozen
class UpdateMetadataResponse:
    error_code: int = NONE


# --- ControlledShutdown (api key 7) ------------------------------------------------------------


@attrs.frozen
class ControlledShutdownRequest:
    """A broker about to stop asks the controller to move its leaderships away first."""

    API_KEY: ClassVar[int] = 7

    broker_id: int
    broker_epoch: int = -1


@attrs.frozen
class RemainingPartition:
    topic_name: str
    partition_index: int


@attrs.frozen
class ControlledShutdownResponse:
    """``remaining_partitions``: those the broker still leads (it may retry, then stop)."""

    error_code: int = NONE
    remaining_partitions: tuple[RemainingPartition, ...] = attrs.field(default=(), converter=_tuple)


# --- AlterPartition (api key 56) ---------------------------------------------------------------


@attrs.frozen
class BrokerState:
    broker_id: int
    broker_epoch: int = -1


@attrs.frozen
class AlterPartitionPartitionData:
    partition_index: int
    leader_epoch: int
    new_isr_with_epochs: tuple[BrokerState, ...] = attrs.field(converter=_tuple)
    partition_epoch: int = 0
    leader_recovery_state: int = 0


@attrs.frozen
class AlterPartitionTopicData:
    topic_id: Uuid
    partitions: tuple[AlterPartitionPartitionData, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class AlterPartitionRequest:
    """A leader asks the controller for a new ISR (version 3: topics by id, members with
    their broker epochs)."""

    API_KEY: ClassVar[int] = 56

    broker_id: int
    topics: tuple[AlterPartitionTopicData, ...] = attrs.field(converter=_tuple)
    broker_epoch: int = -1


@attrs.frozen
class AlterPartitionPartitionResult:
    partition_index: int
    error_code: int = NONE
    leader_id: int = NO_LEADER
    leader_epoch: int = UNKNOWN_EPOCH
    isr: tuple[int, ...] = attrs.field(default=(), converter=_tuple)
    leader_recovery_state: int = 0
    partition_epoch: int = -1


@attrs.frozen
class AlterPartitionTopicResult:
    topic_id: Uuid
    partitions: tuple[AlterPartitionPartitionResult, ...] = attrs.field(converter=_tuple)


@attrs.frozen
class AlterPartitionResponse:
    error_code: int = NONE
    topics: tuple[AlterPartitionTopicResult, ...] = attrs.field(default=(), converter=_tuple)
    throttle_time_ms: int = 0


# --- AllocateProducerIds (api key 67) ----------------------------------------------------------


@attrs.frozen
class AllocateProducerIdsRequest:
    """A broker asks the controller for a block of producer ids to hand out."""

    API_KEY: ClassVar[int] = 67

    broker_id: int
    broker_epoch: int = -1


@attrs.frozen
class AllocateProducerIdsResponse:
    error_code: int = NONE
    producer_id_start: int = -1
    producer_id_len: int = 0
    throttle_time_ms: int = 0


Request = (
    ProduceRequest
    | FetchRequest
    | ListOffsetsRequest
    | MetadataRequest
    | CreateTopicsRequest
    | DeleteTopicsRequest
    | DeleteRecordsRequest
    | InitProducerIdRequest
    | OffsetsForLeaderEpochRequest
    | WriteTxnMarkersRequest
    | DescribeConfigsRequest
    | CreatePartitionsRequest
    | ElectLeadersRequest
    | IncrementalAlterConfigsRequest
    | AlterPartitionReassignmentsRequest
    | ListPartitionReassignmentsRequest
    | DescribeClusterRequest
    | LeaderAndIsrRequest
    | StopReplicaRequest
    | UpdateMetadataRequest
    | ControlledShutdownRequest
    | AlterPartitionRequest
    | AllocateProducerIdsRequest
)
"""Every request a broker handles."""

Response = (
    ProduceResponse
    | FetchResponse
    | ListOffsetsResponse
    | MetadataResponse
    | CreateTopicsResponse
    | DeleteTopicsResponse
    | DeleteRecordsResponse
    | InitProducerIdResponse
    | OffsetsForLeaderEpochResponse
    | WriteTxnMarkersResponse
    | DescribeConfigsResponse
    | CreatePartitionsResponse
    | ElectLeadersResponse
    | IncrementalAlterConfigsResponse
    | AlterPartitionReassignmentsResponse
    | ListPartitionReassignmentsResponse
    | DescribeClusterResponse
    | LeaderAndIsrResponse
    | StopReplicaResponse
    | UpdateMetadataResponse
    | ControlledShutdownResponse
    | AlterPartitionResponse
    | AllocateProducerIdsResponse
)
"""Every response a broker gives."""
