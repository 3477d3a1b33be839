"""One replica of one partition on one broker: its log, its role, its leader epoch.

The broker asks a replica to append, read and answer offsets; the replica checks that it may
(leader or follower, leader epoch the caller expects) and keeps the high watermark. Without
replication the only in-sync replica is the leader itself, so the high watermark is the log
end after every append; :meth:`Partition._high_watermark_candidate` is where replication will
take the minimum over the ISR instead.
"""

from __future__ import annotations

import enum
import shutil
import threading
from pathlib import Path

from ..errors import (
    FencedLeaderEpochError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from ..log import AppendOrigin, FetchDataInfo, FetchIsolation, LogAppendInfo, PartitionLog
from ..log.checkpoint import write_atomically
from ..model import TopicPartition, Uuid
from . import protocol as p

PARTITION_METADATA_FILE = "partition.metadata"
"""Kafka's file naming the topic id a partition directory belongs to (KIP-516)."""


def read_partition_metadata(directory: Path) -> Uuid | None:
    """The topic id recorded in a partition directory, or None if there is none (or it is bad)."""
    try:
        text = (directory / PARTITION_METADATA_FILE).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            try:
                return Uuid.from_string(value.strip())
            except ValueError:
                return None
    return None


def write_partition_metadata(directory: Path, topic_id: Uuid) -> None:
    write_atomically(
        directory / PARTITION_METADATA_FILE, f"version: 0\ntopic_id: {topic_id}\n".encode()
    )


class ReplicaRole(enum.Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


class Partition:
    """A hosted replica. Thread-safe: role changes and appends are serialised."""

    def __init__(self, log: PartitionLog, topic_id: Uuid | None, broker_id: int) -> None:
        self.log = log
        self.topic_id = topic_id
        self.broker_id = broker_id
        self.role = ReplicaRole.NONE
        self.leader_id = p.NO_LEADER
        self.leader_epoch = p.UNKNOWN_EPOCH
        self.partition_epoch = 0
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self._lock = threading.RLock()

    @property
    def topic_partition(self) -> TopicPartition:
        return self.log.topic_partition

    @property
    def directory(self) -> Path:
        return self.log.directory

    @property
    def is_leader(self) -> bool:
        return self.role is ReplicaRole.LEADER

    # --- role changes (LeaderAndIsr) ------------------------------------------------------

    def make_leader(self, state: p.LeaderAndIsrPartitionState, topic_id: Uuid) -> None:
        """Become leader at ``state.leader_epoch``; new appends are stamped with that epoch."""
        with self._lock:
            self._record_topic_id(topic_id)
            self._apply(state, ReplicaRole.LEADER)
            self.log.leader_epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
            self._maybe_increment_high_watermark()

    def make_follower(self, state: p.LeaderAndIsrPartitionState, topic_id: Uuid) -> None:
        """Follow ``state.leader``; replication (a later step) fetches from it."""
        with self._lock:
            self._record_topic_id(topic_id)
            self._apply(state, ReplicaRole.FOLLOWER)

    def make_offline(self) -> None:
        """Stop leading or following (the broker shuts down); reads now fail as not-leader."""
        with self._lock:
            self.role = ReplicaRole.NONE

    def _apply(self, state: p.LeaderAndIsrPartitionState, role: ReplicaRole) -> None:
        self.role = role
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = state.replicas
        self.isr = state.isr

    def _record_topic_id(self, topic_id: Uuid) -> None:
        if self.topic_id != topic_id:
            write_partition_metadata(self.directory, topic_id)
            self.topic_id = topic_id

    def is_stale_leader_and_isr(self, state: p.LeaderAndIsrPartitionState) -> bool:
        """A LeaderAndIsr older than what this replica already applied (Kafka ignores it)."""
        return state.leader_epoch < self.leader_epoch

    # --- checks ---------------------------------------------------------------------------

    def check_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's leader-epoch fencing: the caller's epoch must be this replica's (or -1)."""
        if current_leader_epoch == p.UNKNOWN_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.topic_partition}: leader epoch {current_leader_epoch} is older than "
                f"the current {self.leader_epoch}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{self.topic_partition}: leader epoch {current_leader_epoch} is newer than "
                f"the current {self.leader_epoch}"
            )

    def check_leader(self, current_leader_epoch: int = p.UNKNOWN_EPOCH) -> None:
        if self.role is not ReplicaRole.LEADER:
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} is not the leader of {self.topic_partition} "
                f"(leader: {self.leader_id})"
            )
        self.check_epoch(current_leader_epoch)

    # --- data -----------------------------------------------------------------------------

    def append_records_to_leader(
        self, records: bytes, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> LogAppendInfo:
        """Appends batches at the current leader epoch; advances the HW.

        ``origin`` COORDINATOR is for transaction markers, which clients may not write.
        """
        with self._lock:
            self.check_leader()
            info = self.log.append_as_leader(records, self.leader_epoch, origin)
            self._maybe_increment_high_watermark()
            return info

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        *,
        min_one_message: bool,
    ) -> FetchDataInfo:
        return self.log.read(fetch_offset, max_bytes, isolation, min_one_message=min_one_message)

    def in_sync_replicas(self) -> tuple[int, ...]:
        """The ISR as this leader tracks it: only itself until followers replicate."""
        return (self.broker_id,) if self.is_leader else ()

    def _high_watermark_candidate(self) -> int:
        """Seam for replication: the minimum log end over the ISR; here the leader's own."""
        return self.log.log_end_offset

    def _maybe_increment_high_watermark(self) -> None:
        if self.is_leader:
            self.log.update_high_watermark(self._high_watermark_candidate())

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    # --- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        self.log.close()

    def delete(self) -> None:
        """Closes the log and removes its directory (topic deleted or replica moved away)."""
        with self._lock:
            self.log.close()
            directory = self.directory
            doomed = directory.with_name(f"{directory.name}.{Uuid.random()}-delete")
            try:
                directory.rename(doomed)
                shutil.rmtree(doomed)
            except OSError as err:
                raise KafkaStorageError(f"cannot delete {directory}: {err}") from err
