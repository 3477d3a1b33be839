"""One partition of ``__consumer_offsets`` as its leader's coordinator holds it.

A shard owns the groups and committed offsets whose group ids map to its partition. It is
created when this broker becomes the partition's leader, LOADING while it replays the
partition's records (requests get COORDINATOR_LOAD_IN_PROGRESS), ACTIVE once replayed, and
CLOSED when leadership moves away (requests get NOT_COORDINATOR; members waiting for an answer
get it too).

State changes are written before they are answered: :meth:`append` produces the records with
acks=all through the broker's internal path and returns once they are committed, or raises the
coordinator error Kafka maps the write failure to. Every method runs under :attr:`lock`.

Records are replayed by the key version they start with; :func:`register_replayer` adds a
record type (key versions 0-2 are Kafka's offset commits and classic group metadata; later
ones belong to other group types).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from ..errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CorruptRecordError,
    KafkaStorageError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordListTooLargeError,
    RecordTooLargeError,
    RequestTimedOutError,
    TierlogError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from ..log.results import FetchIsolation
from ..model import TopicPartition
from ..records import RecordBatchBuilder, iter_batches
from ..server import protocol as p
from ..server.internal_topics import CONSUMER_OFFSETS_TOPIC
from .classic_group import ClassicGroup, now_ms
from .group import Group
from .offsets import CommittedOffset, OffsetStore
from .records import (
    OFFSET_COMMIT_KEY_VERSIONS,
    CoordinatorRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    key_version,
)

if TYPE_CHECKING:
    from .runtime import GroupCoordinator

log = logging.getLogger(__name__)

Replayer = Callable[["CoordinatorShard", bytes, bytes | None], None]
_REPLAYERS: dict[int, Replayer] = {}
LoadHook = Callable[["CoordinatorShard"], None]
_LOAD_HOOKS: list[LoadHook] = []


def register_replayer(key_version: int, replayer: Replayer) -> None:
    """Replays records whose key starts with ``key_version`` (at load: ``value`` None is a
    tombstone)."""
    _REPLAYERS[key_version] = replayer


def register_load_hook(hook: LoadHook) -> None:
    """Runs ``hook(shard)`` under the shard's lock once it has loaded (to arm its timers)."""
    _LOAD_HOOKS.append(hook)


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


#: Produce errors and the coordinator errors Kafka answers for them.
_WRITE_ERRORS: dict[type[TierlogError], type[TierlogError]] = {
    UnknownTopicOrPartitionError: CoordinatorNotAvailableError,
    NotEnoughReplicasError: CoordinatorNotAvailableError,
    NotEnoughReplicasAfterAppendError: CoordinatorNotAvailableError,
    RequestTimedOutError: CoordinatorNotAvailableError,
    NotLeaderOrFollowerError: NotCoordinatorError,
    KafkaStorageError: NotCoordinatorError,
    RecordTooLargeError: UnknownServerError,
    RecordListTooLargeError: UnknownServerError,
}


class CoordinatorShard:
    def __init__(self, runtime: GroupCoordinator, partition: int, leader_epoch: int) -> None:
        self.runtime = runtime
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.topic_partition = TopicPartition(CONSUMER_OFFSETS_TOPIC, partition)
        self.lock = threading.RLock()
        self.state = ShardState.LOADING
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.loaded_records = 0

    def __repr__(self) -> str:
        return f"CoordinatorShard({self.topic_partition}, epoch {self.leader_epoch}, {self.state})"

    # --- state --------------------------------------------------------------------------------

    def check_active(self) -> None:
        """Raises what a request reaching this shard must be answered, unless it is active."""
        if self.state is ShardState.LOADING:
            raise CoordinatorLoadInProgressError(
                f"{self.topic_partition} is loading on broker {self.runtime.broker_id}"
            )
        if self.state is ShardState.CLOSED:
            raise NotCoordinatorError(
                f"broker {self.runtime.broker_id} no longer leads {self.topic_partition}"
            )

    def close(self) -> None:
        """Leadership moved: no request is served from now on (NOT_COORDINATOR), timers stop.
        Call :meth:`release_members` next, where waiting for the lock is allowed."""
        self.state = ShardState.CLOSED  # without the lock: a write may hold it a while
        self.runtime.timer.cancel_where(self._owns)

    def release_members(self) -> None:
        """Answers every member still waiting NOT_COORDINATOR, and forgets the groups."""
        with self.lock:
            self.state = ShardState.CLOSED
            for group in self.groups.values():
                group.close(NotCoordinatorError.code or 16)
            self.groups.clear()

    def _owns(self, key: Hashable) -> bool:
        return (
            isinstance(key, tuple)
            and len(key) > 1
            and key[0] == self.partition
            and (key[1] == self.leader_epoch)
        )

    # --- timers -------------------------------------------------------------------------------

    def schedule(self, key: Hashable, delay_ms: float, task: Callable[[], None]) -> None:
        """Runs ``task`` under the lock after ``delay_ms`` while the shard is active; a later
        schedule under the same key replaces it."""

        def run() -> None:
            with self.lock:
                if self.state is ShardState.ACTIVE:
                    task()

        self.runtime.timer.schedule((self.partition, self.leader_epoch, key), delay_ms, run)

    def cancel(self, key: Hashable) -> None:
        self.runtime.timer.cancel((self.partition, self.leader_epoch, key))

    # --- groups and offsets -------------------------------------------------------------------

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def committed_offsets(self) -> dict[str, dict[TopicPartition, CommittedOffset]]:
        """Every group's committed offsets (for lag metrics and tools)."""
        with self.lock:
            return {group: self.offsets.of_group(group) for group in self.offsets.groups()}

    def group_ids(self) -> set[str]:
        """Groups known here: with a group record, or only with offsets (simple commits)."""
        with self.lock:
            return set(self.groups) | set(self.offsets.groups())

    # --- writes -------------------------------------------------------------------------------

    def append(self, records: Sequence[CoordinatorRecord]) -> None:
        """Writes ``records`` as one batch with acks=all; returns once committed.

        :raises NotCoordinatorError, CoordinatorNotAvailableError, ...: Kafka's mapping of
            the write's failure.
        """
        if not records:
            return
        self.check_active()
        builder = RecordBatchBuilder()
        timestamp = now_ms()
        for record in records:
            builder.append(timestamp, record.key, record.value)
        timeout_ms = self.runtime.commit_timeout_ms
        request = p.ProduceRequest(
            p.Acks.ALL,
            timeout_ms,
            [
                p.TopicProduceData(
                    CONSUMER_OFFSETS_TOPIC,
                    [p.PartitionProduceData(self.partition, builder.build())],
                )
            ],
        )
        try:
            response = self.runtime.send_internal(request, timeout_ms)
        except TierlogError as err:
            raise CoordinatorNotAvailableError(
                f"writing to {self.topic_partition} failed: {err}"
            ) from err
        answer = response.responses[0].partition_responses[0]
        if answer.error_code != p.NONE:
            error = error_for_code(answer.error_code)
            mapped = _WRITE_ERRORS.get(error, error)
            message = f"writing to {self.topic_partition} failed with {error.kafka_name}"
            if answer.error_message:
                message += f": {answer.error_message}"
            if error in (RecordTooLargeError, RecordListTooLargeError):
                raise mapped(message) from error(message)  # commits answer their own code
            raise mapped(message)

    # --- loading ------------------------------------------------------------------------------

    def load(self) -> None:
        """Replays the partition from its log start to its end, then becomes active."""
        partition = self.runtime.hosted_partition(self.topic_partition)
        if partition is None:
            raise NotCoordinatorError(f"{self.topic_partition} is not hosted here")
        partition_log = partition.log
        position = partition_log.log_start_offset
        end = partition_log.log_end_offset
        buffer = self.runtime.load_buffer_size
        while position < end:
            with self.lock:
                if self.state is ShardState.CLOSED:
                    return
            info = partition_log.read(position, buffer, FetchIsolation.LOG_END)
            if not len(info.records):
                break
            with self.lock:
                for batch in iter_batches(info.records, allow_partial_tail=True):
                    if batch.base_offset >= end:
                        position = end
                        break
                    position = batch.next_offset
                    if batch.is_control:
                        continue
                    for record in batch:
                        if record.key is None:
                            continue
                        self._replay(record.key, record.value)
                        self.loaded_records += 1
        with self.lock:
            if self.state is ShardState.CLOSED:
                return
            self.state = ShardState.ACTIVE
            for hook in _LOAD_HOOKS:
                hook(self)

    def _replay(self, key: bytes, value: bytes | None) -> None:
        try:
            version = key_version(key)
            replayer = _REPLAYERS.get(version)
            if replayer is None:
                log.warning("%s: skipping a record of unknown key version %d", self, version)
                return
            replayer(self, key, value)
        except CorruptRecordError as err:
            log.error("%s: skipping an unreadable record: %s", self, err)


def _replay_offset_commit(shard: CoordinatorShard, key: bytes, value: bytes | None) -> None:
    commit_key = OffsetCommitKey.decode(key)
    tp = TopicPartition(commit_key.topic, commit_key.partition)
    if value is None:
        shard.offsets.remove(commit_key.group, tp)
        return
    shard.offsets.put(commit_key.group, tp, CommittedOffset.of(OffsetCommitValue.decode(value)))


def _recreate_simple_groups(shard: CoordinatorShard) -> None:
    """Offsets left without a group record of any type: an empty classic group holds them, as
    Kafka recreates one (after every record is replayed, so no order of records matters)."""
    for group_id in shard.offsets.groups():
        if group_id not in shard.groups:
            shard.groups[group_id] = ClassicGroup(group_id)


for _version in OFFSET_COMMIT_KEY_VERSIONS:
    register_replayer(_version, _replay_offset_commit)
register_load_hook(_recreate_simple_groups)
