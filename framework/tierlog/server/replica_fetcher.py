"""Replica fetchers: how a follower copies its leaders' logs (Kafka's ReplicaFetcherManager).

A broker has one :class:`ReplicaFetcherManager`. It runs up to ``num.replica.fetchers``
:class:`ReplicaFetcherThread` per source broker; a partition goes to the thread its hash
picks, so one thread serves many partitions and sends one FetchRequest for all of them.

A partition added to a thread (a new leader or leader epoch) first *truncates*: it asks the
leader OffsetsForLeaderEpoch for its own latest epoch and cuts its log where the leader's copy
of that epoch ends, so divergent, never-committed records go away. It then *fetches*: appends
what the leader sends, as it is, and takes the leader's high watermark.

Failure isolation (KIP-461): when truncating or appending raises a storage error or anything
unexpected, or the leader answers FENCED_LEADER_EPOCH for the epoch this fetcher holds, the
partition is marked failed and dropped from its thread; the thread keeps serving the others.
``FailedPartitionsCount`` counts failed partitions; one is cleared when a LeaderAndIsr with a
new leader epoch re-adds it, or when the replica is stopped or deleted. A thread whose last
partition fails ends cleanly and leaves the manager; it is not dead. ``DeadThreadCount``
counts threads that died of an exception escaping their loop (a bug), as Kafka's does.
``MaxLag`` is the largest gap between a leader's high watermark (from its last answer, as
Kafka measures it) and the follower's fetch offset.

OFFSET_OUT_OF_RANGE makes the follower ask the leader where its log starts and ends
(ListOffsets as a replica): a leader log ending before ours truncates ours there, one starting
after ours restarts ours empty at the leader's start. Other per-partition errors (not leader,
unknown epoch, a lost request) back the partition off for ``replica.fetch.backoff.ms``.

OFFSET_MOVED_TO_TIERED_STORAGE (the follower's offset is below the leader's local log start,
in data only remote storage holds) rebuilds the follower from the remote tier, as Kafka's
TierStateMachine does: it asks the leader where its local log starts (ListOffsets
EARLIEST_LOCAL) and restarts its own log there, with the leader epochs and the producer state
of the remote segment ending just below (through this broker's RemoteLogManager). It does not
copy the tiered data: a replica that leads later reads it from remote storage. While the
remote metadata is still loading, or that segment is not found, it backs off and tries again.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import attrs

from ..config import BrokerConfig
from ..errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
    TierlogError,
)
from ..metrics import MetricName, MetricsRegistry
from ..model import TopicPartition
from . import protocol as p
from .partition import Partition
from .transport import Transport

if TYPE_CHECKING:
    from ..remote.manager import RemoteLogManager

log = logging.getLogger(__name__)

METRICS_GROUP = "ReplicaFetcherManager"
CLIENT_ID = "Replica"
FAILED_PARTITIONS_COUNT = "FailedPartitionsCount"
DEAD_THREAD_COUNT = "DeadThreadCount"
MAX_LAG = "MaxLag"

_FENCED = FencedLeaderEpochError.code
_OUT_OF_RANGE = OffsetOutOfRangeError.code
_MOVED_TO_TIERED = OffsetMovedToTieredStorageError.code

PartitionLookup = Callable[[TopicPartition], Partition | None]


class FetchPhase(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    #: The leader answered OFFSET_OUT_OF_RANGE: find where its log now starts and ends.
    OUT_OF_RANGE = "out of range"
    #: The leader answered OFFSET_MOVED_TO_TIERED_STORAGE: rebuild from the remote tier.
    MOVED_TO_TIERED = "moved to tiered storage"


@attrs.frozen
class InitialFetchState:
    """Where a partition starts fetching: from whom, at which leader epoch and offset."""

    leader_id: int
    leader_epoch: int
    fetch_offset: int


@attrs.define
class PartitionFetchState:
    fetch_offset: int
    leader_epoch: int
    phase: FetchPhase = FetchPhase.TRUNCATING
    delayed_until: float = 0.0
    lag: int = 0

    def ready(self, now: float) -> bool:
        return self.delayed_until <= now


class FailedPartitions:
    """The partitions marked failed on this broker (shared by all its fetcher threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failed: set[TopicPartition] = set()

    def add(self, tp: TopicPartition) -> None:
        with self._lock:
            self._failed.add(tp)

    def remove_all(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            self._failed.difference_update(tps)

    def __contains__(self, tp: object) -> bool:
        with self._lock:
            return tp in self._failed

    def __len__(self) -> int:
        with self._lock:
            return len(self._failed)

    def snapshot(self) -> frozenset[TopicPartition]:
        with self._lock:
            return frozenset(self._failed)


class ReplicaFetcherThread(threading.Thread):
    """Fetches a set of partitions from one leader broker, in one request per round."""

    def __init__(self, manager: ReplicaFetcherManager, source_broker: int, fetcher_id: int):
        super().__init__(
            name=f"ReplicaFetcherThread-{fetcher_id}-{source_broker}@{manager.broker_id}",
            daemon=True,
        )
        self.manager = manager
        self.source_broker = source_broker
        self.fetcher_id = fetcher_id
        self._cond = threading.Condition(threading.RLock())
        self._states: dict[TopicPartition, PartitionFetchState] = {}
        self._running = True
        self._emptied_by_failures = False
        #: The thread ended with an exception escaping its loop (Kafka's isThreadFailed).
        self.failed = False

    # --- the partition set (any thread) ---------------------------------------------------

    def add_partitions(self, initial: Mapping[TopicPartition, InitialFetchState]) -> None:
        with self._cond:
            for tp, state in initial.items():
                self._states[tp] = PartitionFetchState(state.fetch_offset, state.leader_epoch)
            self._cond.notify_all()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Stops fetching ``tps``; once this returns nothing more is appended for them."""
        with self._cond:
            for tp in tps:
                self._states.pop(tp, None)

    def partitions(self) -> dict[TopicPartition, PartitionFetchState]:
        with self._cond:
            return {tp: attrs.evolve(state) for tp, state in self._states.items()}

    def partition_count(self) -> int:
        with self._cond:
            return len(self._states)

    def max_lag(self) -> int:
        with self._cond:
            return max((s.lag for s in self._states.values()), default=0)

    def initiate_shutdown(self) -> None:
        with self._cond:
            self._running = False
            self._cond.notify_all()

    def shutdown(self) -> None:
        self.initiate_shutdown()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()

    @property
    def running(self) -> bool:
        return self._running

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while self._running:
                worked = (
                    self._truncate()
                    | self._reset_out_of_range()
                    | self._build_from_remote()
                    | self._fetch()
                )
                if not worked:
                    self._idle()
                if self._emptied_by_failures and self.manager.retire_if_idle(self):
                    break
        except BaseException:
            self.failed = True
            log.exception("%s died", self.name)

    def _idle(self) -> None:
        with self._cond:
            if not self._running:
                return
            now = time.monotonic()
            delays = [s.delayed_until - now for s in self._states.values()]
            timeout = max(0.001, min(delays)) if delays else 0.5
            self._cond.wait(min(timeout, 0.5))

    def _backoff(self, tps: Iterable[TopicPartition]) -> None:
        until = time.monotonic() + self.manager.config.get_int("replica.fetch.backoff.ms") / 1000
        with self._cond:
            for tp in tps:
                state = self._states.get(tp)
                if state is not None:
                    state.delayed_until = until

    def _mark_failed(self, tp: TopicPartition, why: str, err: BaseException | None = None) -> None:
        """KIP-461: drop ``tp`` from this thread and count it failed; the others carry on."""
        with self._cond:
            self._states.pop(tp, None)
            self.manager.failed_partitions.add(tp)
            if not self._states:
                self._emptied_by_failures = True
        log.error(
            "broker %d: replica fetch of %s failed (%s); it stays failed until its next "
            "leader epoch",
            self.manager.broker_id,
            tp,
            why,
            exc_info=err,
        )

    def _current(self, tp: TopicPartition, sent: PartitionFetchState) -> PartitionFetchState | None:
        """The partition's state if it is still the one a request was sent for."""
        state = self._states.get(tp)
        if (
            state is None
            or state.leader_epoch != sent.leader_epoch
            or state.fetch_offset != sent.fetch_offset
            or state.phase is not sent.phase
        ):
            return None
        return state

    def _on_fenced(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        partition = self.manager.lookup(tp)
        if partition is not None and partition.leader_epoch == state.leader_epoch:
            self._mark_failed(tp, f"leader fenced epoch {state.leader_epoch}")
        else:
            self._backoff([tp])

    # --- truncation -----------------------------------------------------------------------

    def _due(self, phase: FetchPhase) -> dict[TopicPartition, PartitionFetchState]:
        """Copies of the states in ``phase`` whose backoff is over: each phase's step works
        on these outside the lock and checks them against the live state afterwards."""
        now = time.monotonic()
        with self._cond:
            return {
                tp: attrs.evolve(s)
                for tp, s in self._states.items()
                if s.phase is phase and s.ready(now)
            }

    def _truncate(self) -> bool:
        pending = self._due(FetchPhase.TRUNCATING)
        if not pending:
            return False
        asks: dict[TopicPartition, int] = {}
        for tp, sent in pending.items():
            partition = self.manager.lookup(tp)
            with self._cond:
                state = self._current(tp, sent)
                if state is None:
                    continue
                if partition is None:
                    self._mark_failed(tp, "the replica is gone")
                    continue
                latest = partition.log.latest_epoch
                if latest is None:
                    # No epochs to compare: only what is known committed is kept.
                    self._finish_truncation(tp, state, partition, partition.high_watermark)
                else:
                    asks[tp] = latest
        if not asks:
            return True
        by_topic: dict[str, list[p.OffsetForLeaderPartition]] = {}
        for tp, epoch in asks.items():
            by_topic.setdefault(tp.topic, []).append(
                p.OffsetForLeaderPartition(tp.partition, epoch, pending[tp].leader_epoch)
            )
        request = p.OffsetsForLeaderEpochRequest(
            [p.OffsetForLeaderTopic(t, parts) for t, parts in by_topic.items()],
            replica_id=self.manager.broker_id,
        )
        try:
            response = self.manager.transport.send(self.source_broker, request)
        except TierlogError as err:
            log.info("%s: OffsetsForLeaderEpoch failed: %s", self.name, err)
            self._backoff(asks)
            return True
        for topic in response.topics:
            for answer in topic.partitions:
                tp = TopicPartition(topic.topic, answer.partition)
                if tp in asks:
                    self._apply_epoch_answer(tp, pending[tp], asks[tp], answer)
        return True

    def _apply_epoch_answer(
        self,
        tp: TopicPartition,
        sent: PartitionFetchState,
        asked_epoch: int,
        answer: p.EpochEndOffset,
    ) -> None:
        partition = self.manager.lookup(tp)
        with self._cond:
            state = self._current(tp, sent)
            if state is None:
                return
            if partition is None:
                self._mark_failed(tp, "the replica is gone")
                return
            if answer.error_code == _FENCED:
                self._on_fenced(tp, state)
                return
            if answer.error_code != p.NONE:
                self._backoff([tp])
                return
            log_end = partition.log.log_end_offset
            if answer.end_offset == p.UNKNOWN_OFFSET:
                self._finish_truncation(tp, state, partition, partition.high_watermark)
                return
            if answer.leader_epoch == p.UNKNOWN_EPOCH:
                self._finish_truncation(tp, state, partition, min(answer.end_offset, log_end))
                return
            own_epoch, own_end = partition.log.end_offset_for_epoch(answer.leader_epoch)
            if own_epoch == p.UNKNOWN_EPOCH:
                self._finish_truncation(tp, state, partition, min(answer.end_offset, log_end))
            elif own_epoch != answer.leader_epoch:
                # This log never had the leader's epoch: cut where our older epoch ends and ask
                # again for the epoch now latest.
                self._truncate_partition(tp, state, partition, min(own_end, log_end))
            else:
                self._finish_truncation(
                    tp, state, partition, min(own_end, answer.end_offset, log_end)
                )

    def _truncate_partition(
        self, tp: TopicPartition, state: PartitionFetchState, partition: Partition, offset: int
    ) -> bool:
        try:
            partition.truncate_to(offset)
        except Exception as err:
            self._mark_failed(tp, f"truncating to {offset}: {err}", err)
            return False
        state.fetch_offset = partition.log.log_end_offset
        return True

    def _finish_truncation(
        self, tp: TopicPartition, state: PartitionFetchState, partition: Partition, offset: int
    ) -> None:
        if self._truncate_partition(tp, state, partition, offset):
            state.phase = FetchPhase.FETCHING
            log.debug("%s: %s truncated to %d, fetching", self.name, tp, state.fetch_offset)

    # --- out of range ---------------------------------------------------------------------

    def _leader_offsets(
        self, pending: Mapping[TopicPartition, PartitionFetchState], *specs: int
    ) -> list[dict[TopicPartition, int]] | None:
        """The leader's offsets of ``pending`` for each of ``specs``; None, with the partitions
        backed off, when a ListOffsets fails."""
        try:
            return [self._list_offsets(pending, spec) for spec in specs]
        except TierlogError as err:
            log.info("%s: ListOffsets failed: %s", self.name, err)
            self._backoff(pending)
            return None

    def _reset_out_of_range(self) -> bool:
        """Kafka's out-of-range handling: a leader log ending before ours truncates ours to
        its end; one starting after ours empties ours to start where the leader's does."""
        pending = self._due(FetchPhase.OUT_OF_RANGE)
        if not pending:
            return False
        answers = self._leader_offsets(pending, p.OffsetSpec.LATEST, p.OffsetSpec.EARLIEST)
        if answers is None:
            return True
        ends, starts = answers
        for tp, sent in pending.items():
            partition = self.manager.lookup(tp)
            with self._cond:
                state = self._current(tp, sent)
                if state is None:
                    continue
                if partition is None:
                    self._mark_failed(tp, "the replica is gone")
                    continue
                end, start = ends.get(tp), starts.get(tp)
                if end is None or start is None:
                    self._backoff([tp])
                    continue
                own_end = partition.log.log_end_offset
                if end < own_end:
                    self._finish_truncation(tp, state, partition, end)
                elif start > own_end:
                    try:
                        partition.truncate_fully_and_start_at(start)
                    except Exception as err:
                        self._mark_failed(tp, f"restarting the log at {start}: {err}", err)
                        continue
                    state.fetch_offset = start
                    state.phase = FetchPhase.FETCHING
                else:
                    state.phase = FetchPhase.FETCHING
                    self._backoff([tp])
        return True

    # --- moved to tiered storage -----------------------------------------------------------

    def _build_from_remote(self) -> bool:
        """Kafka's TierStateMachine: restart the log at the leader's local log start on the
        epochs and producer state remote storage holds for the offsets below it."""
        pending = self._due(FetchPhase.MOVED_TO_TIERED)
        if not pending:
            return False
        rlm = self.manager.remote_log_manager
        if rlm is None:
            log.warning(
                "broker %d: cannot rebuild %s from remote storage: "
                "remote.log.storage.system.enable is false",
                self.manager.broker_id,
                sorted(pending),
            )
            self._backoff(pending)
            return True
        answers = self._leader_offsets(pending, p.OffsetSpec.EARLIEST_LOCAL, p.OffsetSpec.EARLIEST)
        if answers is None:
            return True
        local_starts, starts = answers
        for tp, sent in pending.items():
            partition = self.manager.lookup(tp)
            local_start, start = local_starts.get(tp), starts.get(tp)
            if partition is None or local_start is None or start is None:
                self._backoff([tp])
                continue
            if local_start <= partition.log.log_end_offset:
                # The leader holds our fetch offset locally again: nothing to rebuild.
                with self._cond:
                    state = self._current(tp, sent)
                    if state is not None:
                        state.phase = FetchPhase.FETCHING
                continue
            try:
                aux = rlm.aux_state_below(partition, local_start)
            except Exception as err:
                log.info("%s: cannot rebuild %s from remote storage yet: %s", self.name, tp, err)
                self._backoff([tp])
                continue
            next_offset = aux.segment.end_offset + 1
            with self._cond:
                if self._current(tp, sent) is None:
                    continue
                try:
                    partition.log.start_from_remote(
                        next_offset,
                        min(start, next_offset),
                        aux.leader_epochs,
                        aux.producer_snapshot,
                    )
                    partition.log.highest_offset_in_remote_storage = aux.segment.end_offset
                except Exception as err:
                    self._mark_failed(tp, f"restarting the log at {next_offset}: {err}", err)
                    continue
                state = self._states[tp]
                state.fetch_offset = next_offset
                state.phase = FetchPhase.FETCHING
            log.info(
                "%s: %s rebuilt from remote segment %s, fetching from %d",
                self.name,
                tp,
                aux.segment.remote_log_segment_id,
                next_offset,
            )
        return True

    def _list_offsets(
        self, states: Mapping[TopicPartition, PartitionFetchState], spec: int
    ) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[p.ListOffsetsPartition]] = {}
        for tp, state in states.items():
            by_topic.setdefault(tp.topic, []).append(
                p.ListOffsetsPartition(tp.partition, spec, state.leader_epoch)
            )
        request = p.ListOffsetsRequest(
            [p.ListOffsetsTopic(topic, parts) for topic, parts in by_topic.items()],
            replica_id=self.manager.broker_id,
        )
        response = self.manager.transport.send(self.source_broker, request)
        return {
            TopicPartition(topic.name, part.partition_index): part.offset
            for topic in response.topics
            for part in topic.partitions
            if part.error_code == p.NONE and part.offset >= 0
        }

    # --- fetching -------------------------------------------------------------------------

    def _fetch(self) -> bool:
        config = self.manager.config
        sent = self._due(FetchPhase.FETCHING)
        if not sent:
            return False
        max_bytes = config.get_int("replica.fetch.max.bytes")
        by_topic: dict[str, list[p.FetchPartition]] = {}
        for tp, state in sent.items():
            partition = self.manager.lookup(tp)
            start = p.UNKNOWN_OFFSET if partition is None else partition.log_start_offset
            by_topic.setdefault(tp.topic, []).append(
                p.FetchPartition(
                    tp.partition,
                    state.fetch_offset,
                    max_bytes,
                    current_leader_epoch=state.leader_epoch,
                    log_start_offset=start,
                )
            )
        request = p.FetchRequest(
            [p.FetchTopic(topic, parts) for topic, parts in by_topic.items()],
            replica_id=self.manager.broker_id,
            max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
            min_bytes=1,
            max_bytes=config.get_int("replica.fetch.response.max.bytes"),
        )
        try:
            response = self.manager.transport.send(
                self.source_broker, request, timeout_ms=config.get_int("request.timeout.ms")
            )
        except TierlogError as err:
            log.info("%s: fetch from broker %d failed: %s", self.name, self.source_broker, err)
            self._backoff(sent)
            return True
        if response.error_code != p.NONE:
            self._backoff(sent)
            return True
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                if tp in sent:
                    self._process(tp, sent[tp], data)
        return True

    def _process(
        self, tp: TopicPartition, sent: PartitionFetchState, data: p.FetchPartitionData
    ) -> None:
        partition = self.manager.lookup(tp)
        with self._cond:
            state = self._current(tp, sent)
            if state is None:
                return
            if partition is None:
                self._mark_failed(tp, "the replica is gone")
                return
            if data.error_code == p.NONE:
                try:
                    partition.append_records_to_follower(
                        data.records, state.fetch_offset, data.high_watermark, data.log_start_offset
                    )
                except NotLeaderOrFollowerError:
                    # The replica's role is changing: its LeaderAndIsr removes it from here.
                    self._backoff([tp])
                    return
                except Exception as err:
                    self._mark_failed(tp, f"appending at {state.fetch_offset}: {err}", err)
                    return
                state.fetch_offset = partition.log.log_end_offset
                state.lag = max(0, data.high_watermark - state.fetch_offset)
            elif data.error_code == _FENCED:
                self._on_fenced(tp, state)
            elif data.error_code == _OUT_OF_RANGE:
                state.phase = FetchPhase.OUT_OF_RANGE
            elif data.error_code == _MOVED_TO_TIERED:
                state.phase = FetchPhase.MOVED_TO_TIERED
            else:
                log.debug("%s: %s fetch error %d", self.name, tp, data.error_code)
                self._backoff([tp])


class ReplicaFetcherManager:
    """The fetcher threads of one broker, keyed by (source broker, fetcher id)."""

    def __init__(
        self,
        broker_id: int,
        config: BrokerConfig,
        transport: Transport,
        lookup: PartitionLookup,
        metrics: MetricsRegistry | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.transport = transport
        self.lookup = lookup
        #: Set by the broker when remote storage is on: rebuilds followers from the remote tier.
        self.remote_log_manager: RemoteLogManager | None = None
        self.failed_partitions = FailedPartitions()
        self._lock = threading.Lock()
        self._threads: dict[tuple[int, int], ReplicaFetcherThread] = {}
        self._dead_threads = 0
        #: Set by :meth:`shutdown`: a LeaderAndIsr arriving later starts no thread.
        self._closed = False
        self._metrics = metrics
        self._metric_names = [
            MetricName(METRICS_GROUP, name, {"clientId": CLIENT_ID})
            for name in (FAILED_PARTITIONS_COUNT, DEAD_THREAD_COUNT, MAX_LAG)
        ]
        if metrics is not None:
            failed, dead, lag = self._metric_names
            metrics.gauge(failed, lambda: len(self.failed_partitions))
            metrics.gauge(dead, self.dead_thread_count)
            metrics.gauge(lag, self.max_lag)

    def fetcher_id(self, tp: TopicPartition) -> int:
        """The thread (per source broker) serving ``tp``: stable across runs, unlike hash()."""
        return (31 * zlib.crc32(tp.topic.encode()) + tp.partition) % self.config.get_int(
            "num.replica.fetchers"
        )

    def add_fetcher_for_partitions(
        self, initial: Mapping[TopicPartition, InitialFetchState]
    ) -> None:
        """Starts fetching ``initial`` (truncating first); clears them from the failed set.
        Nothing starts once the manager is shut down (the broker is stopping)."""
        with self._lock:
            if self._closed:
                return
            self.failed_partitions.remove_all(initial)
            for thread in self._threads.values():
                thread.remove_partitions(initial)
            groups: dict[tuple[int, int], dict[TopicPartition, InitialFetchState]] = {}
            for tp, state in initial.items():
                groups.setdefault((state.leader_id, self.fetcher_id(tp)), {})[tp] = state
            for key, states in groups.items():
                current = self._threads.get(key)
                if current is None or not current.is_alive() or not current.running:
                    if current is not None and current.failed:
                        self._dead_threads += 1
                    current = ReplicaFetcherThread(self, *key)
                    self._threads[key] = current
                    current.start()
                current.add_partitions(states)

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Stops fetching ``tps`` (leading now, stopped, deleted); clears their failures."""
        doomed = list(tps)
        with self._lock:
            for thread in self._threads.values():
                thread.remove_partitions(doomed)
            self.failed_partitions.remove_all(doomed)

    def shutdown_idle_threads(self) -> None:
        """Stops the threads left with no partitions (cleanly: they are not dead)."""
        with self._lock:
            idle = [
                key
                for key, thread in self._threads.items()
                if thread.partition_count() == 0 and not thread.failed
            ]
            threads = [self._threads.pop(key) for key in idle]
        for thread in threads:
            thread.shutdown()

    def retire_if_idle(self, thread: ReplicaFetcherThread) -> bool:
        """Called by a thread whose partitions all failed: it leaves if it is still empty."""
        with self._lock:
            key = (thread.source_broker, thread.fetcher_id)
            if self._threads.get(key) is not thread or thread.partition_count() != 0:
                thread._emptied_by_failures = False
                return False
            del self._threads[key]
            thread.initiate_shutdown()
            return True

    def threads(self) -> dict[tuple[int, int], ReplicaFetcherThread]:
        with self._lock:
            return dict(self._threads)

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        for thread in self.threads().values():
            state = thread.partitions().get(tp)
            if state is not None:
                return state
        return None

    def dead_thread_count(self) -> int:
        with self._lock:
            alive_failed = sum(1 for t in self._threads.values() if t.failed)
            return self._dead_threads + alive_failed

    def max_lag(self) -> int:
        return max((t.max_lag() for t in self.threads().values()), default=0)

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads.values())
            self._threads.clear()
        for thread in threads:
            thread.initiate_shutdown()
        for thread in threads:
            thread.shutdown()
        if self._metrics is not None:
            for name in self._metric_names:
                self._metrics.remove(name)
