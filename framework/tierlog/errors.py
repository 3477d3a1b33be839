"""One error hierarchy for tierlog.

Every error says whether a client may retry it (``retriable``) and carries the Kafka protocol error
code where Kafka has one (``code``), so a wire front end can answer with exactly what a Kafka client
expects. Errors that stand for a builtin condition also subclass the builtin (``ValueError``,
``LookupError``, ``FileNotFoundError``...) so ordinary ``except`` clauses keep working.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple


class RecordError(NamedTuple):
    """One record that made its batch be refused: its index in the batch and why.

    Kafka's ``ProduceResponse.RecordError``; a produce answer lists them as ``record_errors``.
    """

    batch_index: int
    message: str


class TierlogError(Exception):
    """Base of every error tierlog raises on purpose."""

    retriable: ClassVar[bool] = False
    #: Kafka protocol error code, or None where Kafka has no such error.
    code: ClassVar[int | None] = None
    #: Kafka's name for the error (``Errors.java``), for logs and the wire front end.
    kafka_name: ClassVar[str | None] = None
    #: The records of a refused batch that were at fault, for the produce answer.
    record_errors: tuple[RecordError, ...] = ()


class RetriableError(TierlogError):
    """A condition that goes away by itself: the client retries with backoff."""

    retriable = True


# --- errors a broker answers per partition -----------------------------------------------------


class UnknownServerError(TierlogError):
    code, kafka_name = -1, "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(TierlogError):
    code, kafka_name = 1, "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(RetriableError):
    """Bytes that are not a valid record batch; says where and why."""

    code, kafka_name = 2, "CORRUPT_MESSAGE"

    def __init__(
        self,
        reason: str,
        *,
        position: int | None = None,
        record_errors: tuple[RecordError, ...] = (),
    ) -> None:
        self.reason = reason
        self.position = position
        self.record_errors = record_errors
        where = f" at byte {position}" if position is not None else ""
        super().__init__(f"corrupt record batch{where}: {reason}")


class UnknownTopicOrPartitionError(RetriableError):
    code, kafka_name = 3, "UNKNOWN_TOPIC_OR_PARTITION"


class LeaderNotAvailableError(RetriableError):
    code, kafka_name = 5, "LEADER_NOT_AVAILABLE"


class NotLeaderOrFollowerError(RetriableError):
    code, kafka_name = 6, "NOT_LEADER_OR_FOLLOWER"


class RequestTimedOutError(RetriableError):
    code, kafka_name = 7, "REQUEST_TIMED_OUT"


class BrokerNotAvailableError(RetriableError):
    """No broker with that id is reachable (never started, stopped, or not serving yet)."""

    code, kafka_name = 8, "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(RetriableError):
    code, kafka_name = 9, "REPLICA_NOT_AVAILABLE"


class RecordTooLargeError(TierlogError):
    code, kafka_name = 10, "MESSAGE_TOO_LARGE"


class StaleControllerEpochError(TierlogError):
    """A controller request (LeaderAndIsr, StopReplica) from an older controller than the
    broker knows; nothing in it is applied."""

    code, kafka_name = 11, "STALE_CONTROLLER_EPOCH"


class InvalidTopicError(TierlogError, ValueError):
    code, kafka_name = 17, "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(TierlogError):
    code, kafka_name = 18, "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(RetriableError):
    code, kafka_name = 19, "NOT_ENOUGH_REPLICAS"


class NotEnoughReplicasAfterAppendError(RetriableError):
    code, kafka_name = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


class InvalidRequiredAcksError(TierlogError, ValueError):
    code, kafka_name = 21, "INVALID_REQUIRED_ACKS"


class TopicAuthorizationFailedError(TierlogError):
    """The client may not do this to the topic (in tierlog: delete an internal topic)."""

    code, kafka_name = 29, "TOPIC_AUTHORIZATION_FAILED"


class InvalidTimestampError(TierlogError, ValueError):
    """A produced record's timestamp is outside what the topic accepts; ``record_errors`` names
    the records."""

    code, kafka_name = 32, "INVALID_TIMESTAMP"

    def __init__(self, message: str, *, record_errors: tuple[RecordError, ...] = ()) -> None:
        self.record_errors = record_errors
        super().__init__(message)


class TopicExistsError(TierlogError):
    code, kafka_name = 36, "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(TierlogError, ValueError):
    code, kafka_name = 37, "INVALID_PARTITIONS"


class InvalidReplicationFactorError(TierlogError, ValueError):
    code, kafka_name = 38, "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(TierlogError, ValueError):
    """A replica list that cannot be used: empty, a broker twice, or a broker the cluster lacks."""

    code, kafka_name = 39, "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(TierlogError, ValueError):
    """A configuration key, value or combination that is not allowed; names the key."""

    code, kafka_name = 40, "INVALID_CONFIG"

    def __init__(self, message: str, *, key: str | None = None, value: object = None) -> None:
        self.key = key
        self.value = value
        super().__init__(message)


class ConfigFileError(InvalidConfigError):
    """A configuration file that cannot be used at all: missing, a directory, unreadable, not
    UTF-8 text, not valid TOML or ``.properties``, nested too deep. The message names the file."""

    def __init__(self, path: str, problem: str, *, key: str | None = None) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}", key=key)


class NotControllerError(RetriableError):
    """The request went to a broker that is not (or no longer) the controller; the client
    looks the controller up again and retries there."""

    code, kafka_name = 41, "NOT_CONTROLLER"


class InvalidRequestError(TierlogError, ValueError):
    code, kafka_name = 42, "INVALID_REQUEST"


class NetworkError(BrokerNotAvailableError):
    """The connection to a broker broke mid-request, or it answered with bytes that make no
    sense; the connection is dropped and the request may be sent again. A kind of
    BrokerNotAvailableError, which every sender already handles as "try again later"."""

    code, kafka_name = 13, "NETWORK_EXCEPTION"


class UnsupportedVersionError(TierlogError):
    """No version of an API is served by both ends of a connection."""

    code, kafka_name = 35, "UNSUPPORTED_VERSION"


class StaleBrokerEpochError(TierlogError):
    """A request from an earlier life of a broker (its epoch is not the registered one)."""

    code, kafka_name = 77, "STALE_BROKER_EPOCH"


class InvalidUpdateVersionError(InvalidRequestError):
    """An AlterPartition based on a partition epoch that is no longer current."""

    code, kafka_name = 95, "INVALID_UPDATE_VERSION"


class UnknownTopicIdError(RetriableError):
    code, kafka_name = 100, "UNKNOWN_TOPIC_ID"


class PolicyViolationError(TierlogError):
    code, kafka_name = 44, "POLICY_VIOLATION"


class OutOfOrderSequenceError(TierlogError):
    code, kafka_name = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceError(TierlogError):
    code, kafka_name = 46, "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(TierlogError):
    code, kafka_name = 47, "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(TierlogError):
    code, kafka_name = 48, "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(TierlogError):
    """A transaction marker came from a coordinator older than one already seen."""

    code, kafka_name = 52, "TRANSACTION_COORDINATOR_FENCED"


class KafkaStorageError(RetriableError):
    """The local log directory failed (I/O error); the partition is offline on this broker."""

    code, kafka_name = 56, "KAFKA_STORAGE_ERROR"


class LogDirLockedError(TierlogError):
    """Another process, or another broker of this one, holds the lock of a log directory.

    As in Kafka, one directory serves one broker at a time; the message names the directory and
    the holder (pid and host) as the holder wrote them into the lock file.
    """


class FetchSessionIdNotFoundError(RetriableError):
    """An incremental fetch named a fetch session the broker does not have (tierlog opens
    none): the client falls back to a full fetch."""

    code, kafka_name = 70, "FETCH_SESSION_ID_NOT_FOUND"


class FencedLeaderEpochError(RetriableError):
    """The request carried a leader epoch older than the replica's."""

    code, kafka_name = 74, "FENCED_LEADER_EPOCH"


class UnknownLeaderEpochError(RetriableError):
    """The request carried a leader epoch newer than the replica knows."""

    code, kafka_name = 75, "UNKNOWN_LEADER_EPOCH"


class OffsetNotAvailableError(RetriableError):
    code, kafka_name = 78, "OFFSET_NOT_AVAILABLE"


class PreferredLeaderNotAvailableError(RetriableError):
    """A preferred leader election found the preferred replica down or out of the ISR."""

    code, kafka_name = 80, "PREFERRED_LEADER_NOT_AVAILABLE"


class EligibleLeadersNotAvailableError(RetriableError):
    """An election found no live replica that may lead."""

    code, kafka_name = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE"


class ElectionNotNeededError(RetriableError):
    """The partition already has the leader the election would give it."""

    code, kafka_name = 84, "ELECTION_NOT_NEEDED"


class NoReassignmentInProgressError(TierlogError):
    """A reassignment was cancelled for a partition that has none under way."""

    code, kafka_name = 85, "NO_REASSIGNMENT_IN_PROGRESS"


class InvalidRecordError(TierlogError, ValueError):
    """A produced batch is well formed but breaks a rule for what clients may write (a count
    its offsets disagree with, a control batch, a missing key on a compacted topic...)."""

    code, kafka_name = 87, "INVALID_RECORD"

    def __init__(self, message: str, *, record_errors: tuple[RecordError, ...] = ()) -> None:
        self.record_errors = record_errors
        super().__init__(message)


class ProducerFencedError(TierlogError):
    code, kafka_name = 90, "PRODUCER_FENCED"


class OffsetMovedToTieredStorageError(TierlogError):
    """The offset is below the leader's local log start; only followers ever get this."""

    code, kafka_name = 109, "OFFSET_MOVED_TO_TIERED_STORAGE"


class FencedMemberEpochError(TierlogError):
    """A consumer-protocol member's epoch is not the coordinator's (KIP-848): it must give up
    its partitions and join again."""

    code, kafka_name = 110, "FENCED_MEMBER_EPOCH"


class UnreleasedInstanceIdError(TierlogError):
    """A static member joined under an instance id another member still holds (KIP-848)."""

    code, kafka_name = 111, "UNRELEASED_INSTANCE_ID"


class UnsupportedAssignorError(TierlogError):
    """A member asked for a server-side assignor the coordinator does not have."""

    code, kafka_name = 112, "UNSUPPORTED_ASSIGNOR"


class StaleMemberEpochError(TierlogError):
    """An offset commit carried a member epoch older than the member's (KIP-848)."""

    code, kafka_name = 113, "STALE_MEMBER_EPOCH"


class InvalidRegularExpressionError(TierlogError, ValueError):
    """A consumer-protocol subscription's topic pattern does not compile."""

    code, kafka_name = 128, "INVALID_REGULAR_EXPRESSION"


class MismatchedEndpointTypeError(TierlogError):
    """A DescribeCluster asked a broker for the controllers' endpoints."""

    code, kafka_name = 114, "MISMATCHED_ENDPOINT_TYPE"


class UnsupportedEndpointTypeError(TierlogError):
    code, kafka_name = 115, "UNSUPPORTED_ENDPOINT_TYPE"


# --- consumer groups: answered by the group coordinator ----------------------------------------


class CoordinatorLoadInProgressError(RetriableError):
    """The coordinator is still reading its partition of ``__consumer_offsets``."""

    code, kafka_name = 14, "COORDINATOR_LOAD_IN_PROGRESS"


class CoordinatorNotAvailableError(RetriableError):
    code, kafka_name = 15, "COORDINATOR_NOT_AVAILABLE"


class NotCoordinatorError(RetriableError):
    """This broker does not lead the group's partition of ``__consumer_offsets``."""

    code, kafka_name = 16, "NOT_COORDINATOR"


class IllegalGenerationError(TierlogError):
    code, kafka_name = 22, "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(TierlogError):
    code, kafka_name = 23, "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(TierlogError, ValueError):
    code, kafka_name = 24, "INVALID_GROUP_ID"


class UnknownMemberIdError(TierlogError):
    code, kafka_name = 25, "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(TierlogError, ValueError):
    code, kafka_name = 26, "INVALID_SESSION_TIMEOUT"


class InvalidCommitOffsetSizeError(TierlogError):
    code, kafka_name = 28, "INVALID_COMMIT_OFFSET_SIZE"


class RebalanceInProgressError(TierlogError):
    code, kafka_name = 27, "REBALANCE_IN_PROGRESS"


class OffsetMetadataTooLargeError(TierlogError, ValueError):
    code, kafka_name = 12, "OFFSET_METADATA_TOO_LARGE"


class NonEmptyGroupError(TierlogError):
    code, kafka_name = 68, "NON_EMPTY_GROUP"


class GroupIdNotFoundError(TierlogError, LookupError):
    code, kafka_name = 69, "GROUP_ID_NOT_FOUND"


class MemberIdRequiredError(TierlogError):
    """KIP-394: a first JoinGroup gets its member id and must join again with it."""

    code, kafka_name = 79, "MEMBER_ID_REQUIRED"


class FencedInstanceIdError(TierlogError):
    """Another member now holds this ``group.instance.id`` (KIP-345)."""

    code, kafka_name = 82, "FENCED_INSTANCE_ID"


class GroupMaxSizeReachedError(TierlogError):
    code, kafka_name = 81, "GROUP_MAX_SIZE_REACHED"


class UnstableOffsetCommitError(RetriableError):
    code, kafka_name = 88, "UNSTABLE_OFFSET_COMMIT"


class GroupSubscribedToTopicError(TierlogError):
    code, kafka_name = 86, "GROUP_SUBSCRIBED_TO_TOPIC"


# --- remote storage: raised by storage and metadata plugins ----------------------------------


class RemoteStorageError(TierlogError):
    """A remote storage or remote metadata operation failed; the cause is chained."""


class RetriableRemoteStorageError(RemoteStorageError, RetriableError):
    """A remote failure worth retrying (throttling, a dropped connection, a timeout).

    A copy that fails this way leaves its partial upload in place for the next attempt and is
    not counted as a copy error.
    """


class RemoteStorageNotReadyError(RetriableRemoteStorageError):
    """Remote-log metadata for a partition this broker holds is still being rebuilt (KIP-1007).

    A remote storage error, as Kafka's ``RemoteStorageNotReadyException`` is, so a caller that
    catches storage errors catches it too. Kafka never assigned it a protocol code; a Kafka wire
    front end answers ``wire_fallback_code`` (REPLICA_NOT_AVAILABLE), which every Kafka client
    already retries.
    """

    kafka_name = "REMOTE_STORAGE_NOT_READY"
    wire_fallback_code: ClassVar[int] = 9


class RemoteResourceNotFoundError(RemoteStorageError, FileNotFoundError):
    """The remote object, index or segment metadata does not exist."""


class CustomMetadataSizeLimitExceededError(RemoteStorageError):
    """A storage plugin returned custom metadata larger than allowed."""


class RemoteStorageQueueFullError(RetriableError):
    """The remote reader pool's queue is full: the fetch is retried, never queued without bound."""


# --- model ------------------------------------------------------------------------------------


class InvalidStateTransitionError(TierlogError, ValueError):
    """A metadata state change that the state machine does not allow."""


class MetadataFormatError(TierlogError, ValueError):
    """A remote log metadata event or checkpoint that cannot be decoded."""


# --- plugins and lifecycle -------------------------------------------------------------------


class PluginError(TierlogError):
    """Base of errors about finding, choosing or running plugins."""


class PluginLoadError(PluginError, ImportError):
    """An entry point failed to import; names the entry point and its distribution."""

    def __init__(self, entry_point: str, distribution: str, cause: BaseException) -> None:
        self.entry_point = entry_point
        self.distribution = distribution
        super().__init__(
            f"cannot load tierlog plugin {entry_point!r} from distribution {distribution!r}: "
            f"{type(cause).__name__}: {cause}"
        )


class BackendNotFoundError(PluginError, LookupError):
    """The configuration names a provider that is not installed; lists the installed ones."""


class DuplicateProviderError(PluginError):
    """Two plugins claim the same role or name; names both."""


class LifecycleError(PluginError, RuntimeError):
    """A lifecycle step called out of order, twice, or after close."""


class PluginCallError(PluginError):
    """A plugin raised in a lifecycle phase; names the plugin and the phase, chains the cause."""

    def __init__(self, plugin: str, phase: str, cause: BaseException) -> None:
        self.plugin = plugin
        self.phase = phase
        super().__init__(f"plugin {plugin!r} failed in {phase}: {type(cause).__name__}: {cause}")


class MetricKindError(TierlogError, TypeError):
    """A metric name is already registered as another kind (e.g. a meter asked for as a gauge)."""

    def __init__(self, name: object, existing: str, requested: str) -> None:
        self.name = name
        self.existing = existing
        self.requested = requested
        super().__init__(f"metric {name} is already registered as a {existing}, not a {requested}")


def error_code_of(err: BaseException) -> int:
    """The Kafka error code to answer for ``err``: its own, or UNKNOWN_SERVER_ERROR."""
    if isinstance(err, TierlogError) and err.code is not None:
        return err.code
    return -1  # UnknownServerError.code


def error_for_code(code: int) -> type[TierlogError]:
    """The error class for a Kafka protocol error code (UnknownServerError if none matches)."""
    return _BY_CODE.get(code, UnknownServerError)


def _all_subclasses(cls: type[TierlogError]) -> list[type[TierlogError]]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_all_subclasses(sub))
    return found


#: The class that declares each code (a subclass that only inherits one is not its owner).
_BY_CODE: dict[int, type[TierlogError]] = {
    c.code: c for c in _all_subclasses(TierlogError) if c.code is not None and "code" in vars(c)
}
