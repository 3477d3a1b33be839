"""One replica of one partition on one broker: its log, its role, its leader epoch.

The broker asks a replica to append, read and answer offsets; the replica checks that it may
(leader or follower, leader epoch the caller expects) and keeps the high watermark.

As leader, a replica tracks every follower as Kafka's ``Partition`` does: the offset each one
last fetched from (its log end) and when it was last caught up. The high watermark is the
minimum log end over the ISR. A follower that catches up to the high watermark (and to the start
of this leader's epoch) is proposed for the ISR; one that has not caught up for
``replica.lag.time.max.ms`` is proposed for removal. Proposals are returned as
:class:`IsrChange` for the broker to send to the controller: the replica never calls out while
holding its lock, and applies the controller's answer with :meth:`Partition.complete_isr_change`.

As follower, a replica appends what its fetcher brings (batches keep the leader's offsets and
epochs) and takes the leader's high watermark, bounded by its own log end.
"""

from __future__ import annotations

import enum
import shutil
import threading
import time
from pathlib import Path

import attrs

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
from .image import IsrChange

PARTITION_METADATA_FILE = "partition.metadata"
"""Kafka's file naming the topic id a partition directory belongs to (KIP-516)."""
#: How long a leader waits after a refused ISR change before it proposes one again.
ISR_CHANGE_RETRY_BACKOFF_MS = 500


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


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@attrs.define
class FollowerState:
    """What a leader knows of one follower (Kafka's ``Replica`` state)."""

    log_end_offset: int = p.UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end: int = p.UNKNOWN_OFFSET
    last_fetch_ms: int = 0


@attrs.frozen
class FetchStateUpdate:
    """What recording a follower fetch did: the high watermark moved, an ISR change to send."""

    high_watermark_changed: bool
    isr_change: IsrChange | None = None


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
        self._followers: dict[int, FollowerState] = {}
        self._leader_epoch_start_offset = 0
        self._isr_change_pending = False
        #: After a refused ISR change, no new one is proposed before this (monotonic ms).
        self._isr_retry_after_ms = 0
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

    def make_leader(self, state: p.LeaderAndIsrPartitionState, topic_id: Uuid) -> bool:
        """Become leader at ``state.leader_epoch``; new appends are stamped with that epoch.

        Returns whether the high watermark moved. The same epoch again (an ISR change) only
        updates the ISR; a new epoch starts tracking every follower afresh, the ISR members as
        caught up now (Kafka gives them a full ``replica.lag.time.max.ms`` to fetch).
        """
        with self._lock:
            self._record_topic_id(topic_id)
            new_epoch = not self.is_leader or state.leader_epoch != self.leader_epoch
            self._apply(state, ReplicaRole.LEADER)
            if new_epoch:
                now = _now_ms()
                self._followers = {
                    replica: FollowerState(last_caught_up_ms=now if replica in state.isr else 0)
                    for replica in state.replicas
                    if replica != self.broker_id
                }
                self._leader_epoch_start_offset = self.log.log_end_offset
                self._isr_change_pending = False
                self._isr_retry_after_ms = 0
                self.log.leader_epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
            else:
                # Replicas added or removed by a reassignment.
                self._followers = {
                    replica: self._followers.get(replica) or FollowerState()
                    for replica in state.replicas
                    if replica != self.broker_id
                }
            return self._maybe_increment_high_watermark()

    def make_follower(self, state: p.LeaderAndIsrPartitionState, topic_id: Uuid) -> bool:
        """Follow ``state.leader``; returns whether the leader or its epoch changed (then the
        broker restarts this replica's fetch, truncating first)."""
        with self._lock:
            self._record_topic_id(topic_id)
            changed = (
                self.role is not ReplicaRole.FOLLOWER
                or state.leader != self.leader_id
                or state.leader_epoch != self.leader_epoch
            )
            self._apply(state, ReplicaRole.FOLLOWER)
            self._followers = {}
            self._isr_change_pending = False
            return changed

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
        return (state.leader_epoch, state.partition_epoch) < (
            self.leader_epoch,
            self.partition_epoch,
        )

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
        """The caller's epoch is checked first, as Kafka does: a follower fetching with an
        epoch older than this replica's (leader or not) learns it is fenced."""
        if self.role is not ReplicaRole.NONE:
            self.check_epoch(current_leader_epoch)
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
        """The ISR as this leader knows it (committed by the controller); empty unless leader."""
        with self._lock:
            return self.isr if self.is_leader else ()

    def _high_watermark_candidate(self) -> int:
        """The minimum log end over the ISR (a follower not heard of yet holds it back)."""
        candidate = self.log.log_end_offset
        for replica in self.isr:
            if replica == self.broker_id:
                continue
            follower = self._followers.get(replica)
            end = p.UNKNOWN_OFFSET if follower is None else follower.log_end_offset
            candidate = min(candidate, end)
        return candidate

    def _maybe_increment_high_watermark(self) -> bool:
        """Moves a leader's high watermark forward (never back); returns whether it moved."""
        if not self.is_leader:
            return False
        candidate = self._high_watermark_candidate()
        if candidate <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(candidate)
        return True

    # --- replication, leader side ---------------------------------------------------------

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, now_ms: int | None = None
    ) -> FetchStateUpdate:
        """Records that follower ``replica_id`` fetched from ``fetch_offset`` (its log end).

        Kafka's rule for "caught up": the fetch reached the leader's log end as it was at this
        fetch, or reached the leader's log end as it was at the previous fetch (then the
        follower was caught up at that earlier time). An offset past the leader's log end is no
        follower's log end and is ignored: it must not move the high watermark (Kafka reads
        before it records, and that read fails with OFFSET_OUT_OF_RANGE).
        """
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            follower = self._followers.get(replica_id)
            if not self.is_leader or follower is None:
                return FetchStateUpdate(False)
            leader_end = self.log.log_end_offset
            if not 0 <= fetch_offset <= leader_end:
                return FetchStateUpdate(False)
            if fetch_offset >= leader_end:
                follower.last_caught_up_ms = max(follower.last_caught_up_ms, now)
            elif fetch_offset >= follower.last_fetch_leader_log_end:
                follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
            follower.log_end_offset = fetch_offset
            follower.last_fetch_leader_log_end = leader_end
            follower.last_fetch_ms = now
            change = None
            if (
                replica_id not in self.isr
                and self._may_propose(now)
                and fetch_offset >= self.log.high_watermark
                and fetch_offset >= self._leader_epoch_start_offset
            ):
                change = self._propose((*self.isr, replica_id))
            return FetchStateUpdate(self._maybe_increment_high_watermark(), change)

    def isr_shrink_proposal(self, max_lag_ms: int, now_ms: int | None = None) -> IsrChange | None:
        """The ISR without the followers that have not caught up for ``max_lag_ms``, if any."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            if not self.is_leader or not self._may_propose(now):
                return None
            leader_end = self.log.log_end_offset
            lagging = {
                replica
                for replica in self.isr
                if replica != self.broker_id
                and (follower := self._followers.get(replica)) is not None
                and follower.log_end_offset != leader_end
                and now - follower.last_caught_up_ms > max_lag_ms
            }
            if not lagging:
                return None
            return self._propose(tuple(r for r in self.isr if r not in lagging))

    def _may_propose(self, now_ms: int) -> bool:
        return not self._isr_change_pending and now_ms >= self._isr_retry_after_ms

    def _propose(self, isr: tuple[int, ...]) -> IsrChange:
        self._isr_change_pending = True
        return IsrChange(self.leader_epoch, self.partition_epoch, isr)

    def complete_isr_change(
        self, change: IsrChange, isr: tuple[int, ...] | None, partition_epoch: int
    ) -> bool:
        """Applies the controller's answer to ``change`` (``isr`` None: refused); returns
        whether the high watermark moved."""
        with self._lock:
            if change.leader_epoch != self.leader_epoch:
                return False
            self._isr_change_pending = False
            if isr is None:
                # Refused (a stale epoch, the controller moving): the answer usually comes with
                # new metadata, so the same change is not asked again at once.
                self._isr_retry_after_ms = _now_ms() + ISR_CHANGE_RETRY_BACKOFF_MS
                return False
            if partition_epoch <= self.partition_epoch or not self.is_leader:
                return False
            self.isr = isr
            self.partition_epoch = partition_epoch
            return self._maybe_increment_high_watermark()

    def follower_log_end_offset(self, replica_id: int) -> int:
        """The log end a leader last saw follower ``replica_id`` fetch from (-1: unknown)."""
        with self._lock:
            follower = self._followers.get(replica_id)
            return p.UNKNOWN_OFFSET if follower is None else follower.log_end_offset

    # --- replication, follower side -------------------------------------------------------

    def append_records_to_follower(
        self,
        records: bytes,
        fetch_offset: int,
        leader_high_watermark: int,
        leader_log_start_offset: int = p.UNKNOWN_OFFSET,
    ) -> None:
        """Appends what the leader sent from ``fetch_offset`` and takes its high watermark and
        log start offset.

        Raises NotLeaderOrFollowerError when this replica no longer follows, RuntimeError when
        the log end moved away from the offset the data was fetched for, and whatever the log
        raises (KafkaStorageError on an I/O failure).
        """
        with self._lock:
            if self.role is not ReplicaRole.FOLLOWER:
                raise NotLeaderOrFollowerError(
                    f"broker {self.broker_id} no longer follows {self.topic_partition}"
                )
            if fetch_offset != self.log.log_end_offset:
                raise RuntimeError(
                    f"{self.topic_partition}: fetched from {fetch_offset} but the log ends at "
                    f"{self.log.log_end_offset}"
                )
            if records:
                self.log.append_as_follower(records)
            if leader_high_watermark >= 0:
                self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset))
            # The leader's log start moved (DeleteRecords, retention): follow it up to the HW.
            start = min(leader_log_start_offset, self.log.high_watermark)
            if start > self.log.log_start_offset:
                self.log.delete_records(start)

    def truncate_to(self, offset: int) -> None:
        """Removes everything from ``offset`` on (a follower diverged from its leader)."""
        with self._lock:
            self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self._lock:
            self.log.truncate_fully_and_start_at(offset)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def high_watermark_known(self) -> bool:
        """Whether this leader's high watermark is proven for its epoch (Kafka's KIP-207).

        A new leader starts from the high watermark it checkpointed, which after a crash can
        be far below what the previous leader had committed. It is only known once it has
        reached the offset this epoch began at: everything before that is then committed.
        Until then "the end of the log" must not be answered, or a reader that trusts it (the
        remote log metadata consumer above all) would take a stale end for the real one.
        """
        with self._lock:
            return self.log.high_watermark >= self._leader_epoch_start_offset

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
