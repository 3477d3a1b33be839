"""The domain values that cross the plugin SPI, named and shaped as in Kafka's tiered storage API.

All values are frozen attrs classes: validated on construction, immutable, hashable, and changed
only through named methods (``create_with_updates``) or ``attrs.evolve``. A Kafka operator should
recognise every name here.
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from .errors import (
    CustomMetadataSizeLimitExceededError,
    InvalidStateTransitionError,
)

# --- identifiers -------------------------------------------------------------------------------


@attrs.frozen(order=True)
class Uuid:
    """Kafka's 128-bit id, written as 22 characters of URL-safe base64 without padding."""

    value: bytes = attrs.field(repr=False)

    @value.validator
    def _check(self, _attribute: object, value: bytes) -> None:
        if not isinstance(value, bytes) or len(value) != 16:
            raise ValueError(f"a Uuid is 16 bytes, got {value!r}")

    @classmethod
    def random(cls) -> Uuid:
        """A fresh random id; like Kafka, never one whose text starts with '-' or the zero id."""
        while True:
            candidate = cls(uuid.uuid4().bytes)
            if candidate != ZERO_UUID and not str(candidate).startswith("-"):
                return candidate

    @classmethod
    def from_string(cls, text: str) -> Uuid:
        """Parse Kafka's text form (22 base64url characters)."""
        if not isinstance(text, str) or len(text) != 22:
            raise ValueError(f"a Uuid string is 22 base64url characters, got {text!r}")
        try:
            raw = base64.urlsafe_b64decode(text + "==")
        except (ValueError, TypeError) as err:
            raise ValueError(f"not a Uuid: {text!r}") from err
        if len(raw) != 16 or base64.urlsafe_b64encode(raw).decode().rstrip("=") != text:
            raise ValueError(f"not a Uuid: {text!r}")
        return cls(raw)

    @classmethod
    def from_longs(cls, most_significant: int, least_significant: int) -> Uuid:
        """From Java's two signed 64-bit halves."""
        mask = (1 << 64) - 1
        return cls(
            (most_significant & mask).to_bytes(8, "big")
            + (least_significant & mask).to_bytes(8, "big")
        )

    @property
    def most_significant_bits(self) -> int:
        return int.from_bytes(self.value[:8], "big", signed=True)

    @property
    def least_significant_bits(self) -> int:
        return int.from_bytes(self.value[8:], "big", signed=True)

    def __str__(self) -> str:
        return base64.urlsafe_b64encode(self.value).decode().rstrip("=")

    def __repr__(self) -> str:
        return f"Uuid({str(self)!r})"


ZERO_UUID = Uuid(bytes(16))


def _non_negative(_instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative integer, got {value!r}")


def _is_int(_instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{attribute.name} must be an integer, got {value!r}")


@attrs.frozen(order=True)
class TopicPartition:
    """A partition of a topic by name."""

    topic: str = attrs.field()
    partition: int = attrs.field(validator=_non_negative)

    @topic.validator
    def _check_topic(self, _attribute: object, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError(f"topic must be a non-empty string, got {value!r}")

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@attrs.frozen(order=True)
class TopicIdPartition:
    """A partition of a topic by id and name: ids tell a re-created topic from the old one."""

    topic_id: Uuid = attrs.field(validator=attrs.validators.instance_of(Uuid))
    topic_partition: TopicPartition = attrs.field(
        validator=attrs.validators.instance_of(TopicPartition)
    )

    @classmethod
    def of(cls, topic_id: Uuid, topic: str, partition: int) -> TopicIdPartition:
        return cls(topic_id, TopicPartition(topic, partition))

    @property
    def topic(self) -> str:
        return self.topic_partition.topic

    @property
    def partition(self) -> int:
        return self.topic_partition.partition

    def __str__(self) -> str:
        return f"{self.topic_id}:{self.topic_partition}"


@attrs.frozen(order=True)
class RemoteLogSegmentId:
    """Identifies one upload of a segment: a re-upload of the same offsets gets a new id."""

    topic_id_partition: TopicIdPartition = attrs.field(
        validator=attrs.validators.instance_of(TopicIdPartition)
    )
    id: Uuid = attrs.field(validator=attrs.validators.instance_of(Uuid))

    @classmethod
    def generate_new(cls, topic_id_partition: TopicIdPartition) -> RemoteLogSegmentId:
        return cls(topic_id_partition, Uuid.random())

    def __str__(self) -> str:
        return f"{self.topic_id_partition}:{self.id}"


# --- states ------------------------------------------------------------------------------------


class RemoteLogSegmentState(enum.Enum):
    """Lifecycle of a remote segment; the value is Kafka's wire id."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @classmethod
    def for_id(cls, state_id: int) -> RemoteLogSegmentState:
        try:
            return cls(state_id)
        except ValueError:
            raise ValueError(f"unknown remote log segment state id {state_id!r}") from None

    @staticmethod
    def is_valid_transition(
        source: RemoteLogSegmentState | None, target: RemoteLogSegmentState
    ) -> bool:
        """Kafka's rules: a new segment starts copying; repeats are fine; deletion is final."""
        if source is None:
            return target is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        if source is target:
            return True
        return target in _SEGMENT_TRANSITIONS[source]


_SEGMENT_TRANSITIONS = {
    RemoteLogSegmentState.COPY_SEGMENT_STARTED: {
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
        RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
    },
    RemoteLogSegmentState.COPY_SEGMENT_FINISHED: {RemoteLogSegmentState.DELETE_SEGMENT_STARTED},
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED: {RemoteLogSegmentState.DELETE_SEGMENT_FINISHED},
    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED: set(),
}


class RemotePartitionDeleteState(enum.Enum):
    """Lifecycle of deleting a whole partition's remote data; the value is Kafka's wire id."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @classmethod
    def for_id(cls, state_id: int) -> RemotePartitionDeleteState:
        try:
            return cls(state_id)
        except ValueError:
            raise ValueError(f"unknown remote partition delete state id {state_id!r}") from None

    @staticmethod
    def is_valid_transition(
        source: RemotePartitionDeleteState | None, target: RemotePartitionDeleteState
    ) -> bool:
        if source is None:
            return target is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        return target.value in (source.value, source.value + 1)


def check_transition(
    source: RemoteLogSegmentState | RemotePartitionDeleteState | None,
    target: RemoteLogSegmentState | RemotePartitionDeleteState,
) -> None:
    """Raise InvalidStateTransitionError unless ``source -> target`` is allowed."""
    machine = type(target)
    if source is not None and type(source) is not machine:
        raise InvalidStateTransitionError(f"cannot move from {source} to {target}")
    if not machine.is_valid_transition(source, target):  # type: ignore[arg-type]
        start = source.name if source is not None else "(new)"
        raise InvalidStateTransitionError(
            f"invalid {machine.__name__} transition {start} -> {target.name}"
        )


# --- metadata ----------------------------------------------------------------------------------


@attrs.frozen
class CustomMetadata:
    """Opaque bytes a storage plugin returns from a copy and gets back with every later call.

    Kafka caps it (``remote.log.metadata.custom.metadata.max.bytes``, default 128) because it is
    stored with every metadata event.
    """

    DEFAULT_MAX_BYTES = 128

    value: bytes = attrs.field(converter=bytes)

    def check_size(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if len(self.value) > max_bytes:
            raise CustomMetadataSizeLimitExceededError(
                f"custom metadata is {len(self.value)} bytes; the limit "
                f"(remote.log.metadata.custom.metadata.max.bytes) is {max_bytes}"
            )


def _epochs(value: Mapping[int, int] | Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    if type(value) is tuple and len(value) == 1:  # the common case, already in shape
        (pair,) = value
        if type(pair) is tuple and len(pair) == 2 and type(pair[0]) is type(pair[1]) is int:
            return value
    pairs = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((int(epoch), int(offset)) for epoch, offset in pairs))


_SEGMENT_INTEGERS = (
    "start_offset",
    "end_offset",
    "max_timestamp_ms",
    "broker_id",
    "event_timestamp_ms",
    "segment_size_in_bytes",
)
_SEGMENT_NON_NEGATIVE = ("start_offset", "end_offset", "segment_size_in_bytes")


@attrs.frozen
class RemoteLogSegmentMetadata:
    """Everything known about one remote segment upload (Kafka's RemoteLogSegmentMetadata).

    ``segment_leader_epochs`` maps each leader epoch in the segment to its first offset there,
    kept as sorted ``(epoch, offset)`` pairs so the value stays hashable;
    ``leader_epochs`` gives it as a dict.
    """

    # Checked in __attrs_post_init__, in one pass: brokers build hundreds of thousands of these
    # when they load remote log metadata, and one call costs a fraction of ten validators.
    remote_log_segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...] = attrs.field(converter=_epochs)
    custom_metadata: CustomMetadata | None = None
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    txn_idx_empty: bool = False

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.remote_log_segment_id, RemoteLogSegmentId):
            raise TypeError(
                "remote_log_segment_id must be a RemoteLogSegmentId, got "
                f"{self.remote_log_segment_id!r}"
            )
        start, end, size = self.start_offset, self.end_offset, self.segment_size_in_bytes
        if not (
            type(start) is type(end) is type(size) is int
            and type(self.max_timestamp_ms) is type(self.broker_id) is int
            and type(self.event_timestamp_ms) is int
            and start >= 0
            and end >= 0
            and size >= 0
        ):
            self._check_integers()  # the slow path names the field
        if self.custom_metadata is not None and not isinstance(
            self.custom_metadata, CustomMetadata
        ):
            raise TypeError(
                f"custom_metadata must be a CustomMetadata or None, got {self.custom_metadata!r}"
            )
        if not isinstance(self.state, RemoteLogSegmentState):
            raise TypeError(f"state must be a RemoteLogSegmentState, got {self.state!r}")
        if not isinstance(self.txn_idx_empty, bool):
            raise TypeError(f"txn_idx_empty must be a bool, got {self.txn_idx_empty!r}")
        if self.end_offset < self.start_offset:
            raise ValueError(
                f"end_offset {self.end_offset} is below start_offset {self.start_offset}"
            )
        if not self.segment_leader_epochs:
            raise ValueError("segment_leader_epochs must not be empty")
        previous = None
        for epoch, offset in self.segment_leader_epochs:
            if epoch < 0:
                raise ValueError(f"leader epoch must be non-negative, got {epoch}")
            if not self.start_offset <= offset <= self.end_offset:
                raise ValueError(
                    f"leader epoch {epoch} starts at offset {offset}, outside the segment "
                    f"[{self.start_offset}, {self.end_offset}]"
                )
            if previous is not None and offset < previous:
                raise ValueError("leader epoch start offsets must not decrease as epochs grow")
            previous = offset

    def _check_integers(self) -> None:
        for name in _SEGMENT_INTEGERS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        for name in _SEGMENT_NON_NEGATIVE:
            value = getattr(self, name)
            if value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition

    @property
    def leader_epochs(self) -> dict[int, int]:
        """Epoch → first offset of that epoch in this segment, in epoch order."""
        return dict(self.segment_leader_epochs)

    def end_offset_for_epoch(self, epoch: int) -> int | None:
        """The last offset of ``epoch`` inside this segment, or None if the epoch is not in it."""
        pairs = self.segment_leader_epochs
        for index, (candidate, _start) in enumerate(pairs):
            if candidate == epoch:
                return pairs[index + 1][1] - 1 if index + 1 < len(pairs) else self.end_offset
        return None

    def update_to(
        self, state: RemoteLogSegmentState, broker_id: int, event_timestamp_ms: int
    ) -> RemoteLogSegmentMetadataUpdate:
        """The event that moves this segment to ``state``, keeping its custom metadata."""
        return RemoteLogSegmentMetadataUpdate(
            self.remote_log_segment_id,
            event_timestamp_ms,
            self.custom_metadata,
            state,
            broker_id,
        )

    def create_with_updates(
        self, update: RemoteLogSegmentMetadataUpdate
    ) -> RemoteLogSegmentMetadata:
        """Apply an update event: offsets, size and epochs stay, the event fields are taken."""
        if update.remote_log_segment_id != self.remote_log_segment_id:
            raise ValueError(
                f"update for segment {update.remote_log_segment_id} applied to "
                f"{self.remote_log_segment_id}"
            )
        return attrs.evolve(
            self,
            broker_id=update.broker_id,
            event_timestamp_ms=update.event_timestamp_ms,
            custom_metadata=update.custom_metadata,
            state=update.state,
        )


@attrs.frozen
class RemoteLogSegmentMetadataUpdate:
    """A state change of an existing remote segment; never back to COPY_SEGMENT_STARTED."""

    remote_log_segment_id: RemoteLogSegmentId = attrs.field(
        validator=attrs.validators.instance_of(RemoteLogSegmentId)
    )
    event_timestamp_ms: int = attrs.field(validator=_is_int)
    custom_metadata: CustomMetadata | None = attrs.field(
        validator=attrs.validators.optional(attrs.validators.instance_of(CustomMetadata))
    )
    state: RemoteLogSegmentState = attrs.field(
        validator=attrs.validators.instance_of(RemoteLogSegmentState)
    )
    broker_id: int = attrs.field(validator=_is_int)

    def __attrs_post_init__(self) -> None:
        if self.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise InvalidStateTransitionError(
                "an update cannot move a segment to COPY_SEGMENT_STARTED; "
                "add new segment metadata instead"
            )

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition


@attrs.frozen
class RemotePartitionDeleteMetadata:
    """A step in deleting all remote data of a partition."""

    topic_id_partition: TopicIdPartition = attrs.field(
        validator=attrs.validators.instance_of(TopicIdPartition)
    )
    state: RemotePartitionDeleteState = attrs.field(
        validator=attrs.validators.instance_of(RemotePartitionDeleteState)
    )
    event_timestamp_ms: int = attrs.field(validator=_is_int)
    broker_id: int = attrs.field(validator=_is_int)


# --- segment data handed to a storage plugin ---------------------------------------------------


class IndexType(enum.Enum):
    """The auxiliary data stored beside a segment, in Kafka's order."""

    OFFSET = "OFFSET"
    TIMESTAMP = "TIMESTAMP"
    PRODUCER_SNAPSHOT = "PRODUCER_SNAPSHOT"
    TRANSACTION = "TRANSACTION"
    LEADER_EPOCH = "LEADER_EPOCH"

    @property
    def suffix(self) -> str:
        """The file suffix Kafka gives this data locally."""
        return _INDEX_SUFFIXES[self]


_INDEX_SUFFIXES = {
    IndexType.OFFSET: ".index",
    IndexType.TIMESTAMP: ".timeindex",
    IndexType.PRODUCER_SNAPSHOT: ".snapshot",
    IndexType.TRANSACTION: ".txnindex",
    IndexType.LEADER_EPOCH: ".leader-epoch-checkpoint",
}


def _path(value: str | Path) -> Path:
    if value is None:
        raise ValueError("a required segment file path is missing")
    return Path(value)


def _optional_path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


@attrs.frozen
class LogSegmentData:
    """The files of one rolled segment, as handed to ``copy_log_segment_data``.

    Only the transaction index is optional; the leader-epoch data is the checkpoint text itself
    (bytes), cut to the segment, not a file path.
    """

    log_segment: Path = attrs.field(converter=_path)
    offset_index: Path = attrs.field(converter=_path)
    time_index: Path = attrs.field(converter=_path)
    transaction_index: Path | None = attrs.field(converter=_optional_path)
    producer_snapshot_index: Path = attrs.field(converter=_path)
    leader_epoch_index: bytes = attrs.field(validator=attrs.validators.instance_of(bytes))

    def index_path(self, index_type: IndexType) -> Path | None:
        """The local file of an index type (None for no transaction index, and for LEADER_EPOCH)."""
        return {
            IndexType.OFFSET: self.offset_index,
            IndexType.TIMESTAMP: self.time_index,
            IndexType.PRODUCER_SNAPSHOT: self.producer_snapshot_index,
            IndexType.TRANSACTION: self.transaction_index,
            IndexType.LEADER_EPOCH: None,
        }[index_type]
