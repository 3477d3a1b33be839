"""Checks of request fields a handler cannot answer well by itself, with Kafka's error codes.

A request object is well typed, but its values come from the network: negative sizes and
indexes, ids outside their wire types, names that would leave a log directory. Each check
here raises (or returns) the error Kafka gives that value, before it reaches a log, a path or
a purgatory; the handlers call them per partition, so one bad field fails only its partition.

What Kafka answers, and where tierlog answers more precisely:

- Fetch: an unknown ``isolation_level`` or a negative ``max_bytes`` fails the whole request
  with INVALID_REQUEST in the top-level error code (as Kafka's ``FetchRequest.getErrorResponse``),
  and an incremental fetch (session epoch other than 0 or -1) with FETCH_SESSION_ID_NOT_FOUND,
  as Kafka's ``FetchManager.newContext`` answers for a session it does not hold (tierlog holds
  none). A negative ``partition_max_bytes`` is INVALID_REQUEST for its partition: Kafka passes
  it on to ``LogSegment.read``, which throws, and answers UNKNOWN_SERVER_ERROR; tierlog names
  the field instead. A negative partition index is UNKNOWN_TOPIC_OR_PARTITION (Kafka's metadata
  cache knows no such partition); a negative ``fetch_offset`` is the log's
  OFFSET_OUT_OF_RANGE. Negative ``max_wait_ms`` and ``min_bytes`` mean "answer now", as in
  Kafka. A ``replica_id`` that is not a replica of the partition is NOT_LEADER_OR_FOLLOWER
  (Kafka's ``Partition.followerReplicaOrThrow``), so no client reads past the high watermark
  or moves it by posing as a follower.
- ListOffsets: an unknown ``isolation_level`` is INVALID_REQUEST per partition (Kafka cannot
  even parse it). A timestamp below -5 is a time like any other, as in Kafka's
  ``UnifiedLog.fetchOffsetByTimestamp``: it finds the first record.
- DeleteRecords: a topic whose cleanup policy does not delete is POLICY_VIOLATION, as in
  Kafka's ``Partition.deleteRecordsOnLeader``; an offset below 0 (other than -1, the high
  watermark) or past the high watermark is the log's OFFSET_OUT_OF_RANGE.
- WriteTxnMarkers: a producer id, producer epoch or coordinator epoch outside its wire type
  (int64 and int16, not negative; int32) is INVALID_REQUEST for every partition of the marker:
  no coordinator sends one, and none may reach the log.
- InitProducerId: a ``producer_id`` without a ``producer_epoch`` or the other way round is
  INVALID_REQUEST, as in Kafka's ``KafkaApis.handleInitProducerIdRequest``; so is either
  outside its wire type (int64, int16), since no producer holds such an id.
- LeaderAndIsr and StopReplica: a request from an older controller is STALE_CONTROLLER_EPOCH
  as a whole (Kafka's ``ReplicaManager``); a partition with an illegal topic name (the name
  becomes a directory) is INVALID_TOPIC_EXCEPTION, one with a negative index
  UNKNOWN_TOPIC_OR_PARTITION, and a LeaderAndIsr partition whose topic has no id or whose
  epochs are not int32 values a controller gives (0 and up) INVALID_REQUEST. Beyond that their
  content is trusted, as in Kafka, where only the controller may send them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..config import TopicConfig
from ..errors import (
    FetchSessionIdNotFoundError,
    InvalidRequestError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
    StaleControllerEpochError,
    UnknownTopicOrPartitionError,
)
from ..model import Uuid
from . import protocol as p
from .image import ClusterImage
from .partition import Partition
from .topics import validate_topic_name

INT16_MAX: Final = (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MAX: Final = (1 << 63) - 1

_ISOLATION_LEVELS: Final = frozenset(int(level) for level in p.IsolationLevel)
_FULL_FETCH_EPOCHS: Final = frozenset({0, -1})


def check_partition_index(topic: str, index: int) -> None:
    """A negative index names no partition: UNKNOWN_TOPIC_OR_PARTITION."""
    if index < 0:
        raise UnknownTopicOrPartitionError(f"unknown topic or partition {topic}-{index}")


def check_isolation_level(level: int) -> None:
    if level not in _ISOLATION_LEVELS:
        raise InvalidRequestError(f"isolation_level must be 0 or 1, got {level}")


# --- Fetch ------------------------------------------------------------------------------------


def check_fetch_request(request: p.FetchRequest) -> None:
    """The request-level fields; an error here fails the whole request."""
    check_isolation_level(request.isolation_level)
    if request.max_bytes < 0:
        raise InvalidRequestError(f"max_bytes must not be negative, got {request.max_bytes}")
    if request.session_epoch not in _FULL_FETCH_EPOCHS:
        raise FetchSessionIdNotFoundError(
            f"fetch session {request.session_id} (epoch {request.session_epoch}) does not "
            f"exist: this broker answers full fetches only (session epoch 0 or -1)"
        )


def fetch_partition_error(fetch: p.FetchPartition) -> int:
    """The error code a malformed fetch partition gets before any read, or NONE."""
    if fetch.partition < 0:
        return UnknownTopicOrPartitionError.code or -1
    if fetch.partition_max_bytes < 0:
        return InvalidRequestError.code or -1
    return p.NONE


def check_fetching_replica(partition: Partition, replica_id: int) -> None:
    """A fetch with a broker's ``replica_id`` must come from a replica of the partition."""
    if replica_id >= 0 and replica_id not in partition.replicas:
        raise NotLeaderOrFollowerError(
            f"broker {replica_id} is not a replica of {partition.topic_partition} "
            f"(replicas: {list(partition.replicas)})"
        )


# --- DeleteRecords ----------------------------------------------------------------------------


def check_records_deletable(partition: Partition, config: TopicConfig) -> None:
    """Only a topic whose cleanup policy deletes may have its start moved (Kafka's
    ``Partition.deleteRecordsOnLeader``): POLICY_VIOLATION otherwise."""
    policy = config["cleanup.policy"]
    assert isinstance(policy, tuple)
    if "delete" not in policy:
        raise PolicyViolationError(
            f"records of {partition.topic_partition} cannot be deleted: its cleanup.policy is "
            f"{','.join(policy)}"
        )


# --- WriteTxnMarkers --------------------------------------------------------------------------


def check_txn_marker(marker: p.WritableTxnMarker) -> None:
    if not 0 <= marker.producer_id <= INT64_MAX:
        raise InvalidRequestError(
            f"producer_id must be in [0, {INT64_MAX}], got {marker.producer_id}"
        )
    if not 0 <= marker.producer_epoch <= INT16_MAX:
        raise InvalidRequestError(
            f"producer_epoch must be in [0, {INT16_MAX}], got {marker.producer_epoch}"
        )
    if not INT32_MIN <= marker.coordinator_epoch <= INT32_MAX:
        raise InvalidRequestError(
            f"coordinator_epoch must be an int32, got {marker.coordinator_epoch}"
        )


# --- InitProducerId ---------------------------------------------------------------------------


def check_init_producer_id(request: p.InitProducerIdRequest) -> None:
    """An id and epoch come together or not at all (Kafka's ``handleInitProducerIdRequest``),
    and within their wire types."""
    given = (request.producer_id != -1, request.producer_epoch != -1)
    if given[0] != given[1]:
        raise InvalidRequestError(
            f"producer_id {request.producer_id} and producer_epoch {request.producer_epoch}: "
            "give both or neither"
        )
    if given[0] and not (
        0 <= request.producer_id <= INT64_MAX and 0 <= request.producer_epoch <= INT16_MAX
    ):
        raise InvalidRequestError(
            f"producer_id {request.producer_id} and producer_epoch {request.producer_epoch} "
            f"must be in [0, {INT64_MAX}] and [0, {INT16_MAX}]"
        )


# --- LeaderAndIsr, StopReplica ----------------------------------------------------------------


def check_controller_epoch(controller_epoch: int, image: ClusterImage) -> None:
    if controller_epoch < image.controller_epoch:
        raise StaleControllerEpochError(
            f"controller epoch {controller_epoch} is older than the current "
            f"{image.controller_epoch}"
        )


def check_replica_state(topic: str, index: int) -> None:
    """A partition named by the controller must be one this broker could host on disk."""
    validate_topic_name(topic, internal_allowed=True)
    check_partition_index(topic, index)


def check_leader_and_isr_state(state: p.LeaderAndIsrPartitionState) -> None:
    """The epochs a replica will record must be int32 values a controller can give."""
    check_replica_state(state.topic_name, state.partition_index)
    for name, epoch in (
        ("leader_epoch", state.leader_epoch),
        ("partition_epoch", state.partition_epoch),
    ):
        if not 0 <= epoch <= INT32_MAX:
            raise InvalidRequestError(f"{name} must be in [0, {INT32_MAX}], got {epoch}")


def topic_id_of(topic: str, topic_ids: Mapping[str, Uuid]) -> Uuid:
    """The id a LeaderAndIsr gives ``topic``; a replica cannot be created without one."""
    topic_id = topic_ids.get(topic)
    if topic_id is None:
        raise InvalidRequestError(f"the request gives no topic id for {topic!r}")
    return topic_id
