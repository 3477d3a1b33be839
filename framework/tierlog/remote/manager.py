"""The remote log manager: per-partition copy and expiration tasks, remote reads, cleanup.

The broker starts one when ``remote.log.storage.system.enable`` is true and tells it about
leadership changes and partitions that stop or are deleted. A scheduler thread hands each led
partition's copy and expiration task, every ``remote.log.manager.task.interval.ms``, to the
copier and expiration pools; a partition whose task failed waits with its own exponential
backoff (``remote.log.manager.task.retry.*``), so one failing partition never delays another.
Tasks check the topic's switches on every run, so enabling tiering on an existing topic tiers
its old segments from the next run, and ``remote.log.copy.disable`` stops copying at once.
A follower whose leader keeps its fetch offset only remotely restarts on what
``aux_state_below`` fetches: the leader epochs and producer snapshot of the segment below.
"""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import attrs

from ..config import BrokerConfig
from ..errors import (
    OffsetOutOfRangeError,
    RemoteResourceNotFoundError,
    RetriableError,
    RetriableRemoteStorageError,
    TierlogError,
)
from ..host import PluginHost
from ..log import EpochEntry, LeaderEpochCheckpointFile, PartitionLog, TimestampAndOffset
from ..model import (
    IndexType,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    TopicPartition,
    Uuid,
)
from ..server.internal_topics import is_internal
from . import metrics as m
from .copy import copy_log_segments, find_highest_remote_offset, now_ms
from .copy_slot import CopySlot, HandBack
from .expiration import expire_remote_segments
from .index_cache import RemoteIndexCache
from .offsets import needs_remote_search, offset_for_timestamp_across_tiers
from .partition_deletion import PartitionDeletions
from .quota import RateQuota
from .reader import ReaderPool, RemoteFetchResult, collect_aborted_transactions, read_remote

log = logging.getLogger(__name__)


class Partition(Protocol):
    """The replica the manager works on (the broker's ``Partition``)."""

    @property
    def log(self) -> PartitionLog: ...

    @property
    def topic_id(self) -> Uuid | None: ...

    @property
    def topic_partition(self) -> TopicPartition: ...


SCRATCH_DIR_NAME = "remote-log-scratch"
"""Where empty producer snapshots are written before upload (under the first log dir)."""

TopicSwitch = Callable[[str, str], bool]
"""``(topic, key)`` → a boolean topic config the log config does not carry."""


@attrs.define(eq=False)
class Backoff:
    """Kafka's exponential backoff with jitter: 0.5 s doubling up to 30 s by default."""

    initial_ms: int
    max_ms: int
    jitter: float
    failures: int = 0

    def next_delay_ms(self) -> int:
        if self.failures == 0:
            return 0
        base = min(self.max_ms, self.initial_ms * 2 ** (self.failures - 1))
        spread = base * self.jitter
        return max(0, int(base + random.uniform(-spread, spread)))


@attrs.define(eq=False)
class PartitionTasks:
    """One partition's task state on this broker."""

    partition: Partition
    topic_id_partition: TopicIdPartition
    leader: bool
    copy_backoff: Backoff
    expire_backoff: Backoff
    initialized: bool = False
    #: Whether the log was checked for lineage a lost checkpoint took (``restore_lineage``).
    lineage_checked: bool = False
    cancelled: bool = False
    copy_due: float = 0.0
    expire_due: float = 0.0
    copy_running: bool = False
    expire_running: bool = False


class RemoteLogManager:
    """Tiers led partitions, expires remote data, and serves reads below the local log start."""

    def __init__(
        self,
        config: BrokerConfig,
        host: PluginHost,
        broker_id: int,
        log_dir: Path,
        topic_switch: TopicSwitch,
    ) -> None:
        self.config = config
        self.host = host
        self.broker_id = broker_id
        self.storage = host.storage
        self.metadata = host.metadata
        self.metrics = m.RemoteMetrics(host.metrics)
        self._topic_switch = topic_switch
        self.stop_event = threading.Event()
        #: Set when the broker starts to stop: no new upload begins (``stop_copying``).
        self.copying_stopped = threading.Event()
        #: Set when the broker stops as by a crash: uploads still under way record nothing more.
        self.crashed = False
        self.segments_being_copied: set[RemoteLogSegmentId] = set()
        self.scratch_dir = log_dir / SCRATCH_DIR_NAME
        shutil.rmtree(self.scratch_dir, ignore_errors=True)
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        self.index_cache = RemoteIndexCache(
            log_dir, self.storage, config.get_int("remote.log.index.file.cache.total.size.bytes")
        )
        self.copy_quota = RateQuota(
            config.get_int("remote.log.manager.copy.max.bytes.per.second"),
            config.get_int("remote.log.manager.copy.quota.window.num"),
            config.get_int("remote.log.manager.copy.quota.window.size.seconds"),
        )
        self.fetch_quota = RateQuota(
            config.get_int("remote.log.manager.fetch.max.bytes.per.second"),
            config.get_int("remote.log.manager.fetch.quota.window.num"),
            config.get_int("remote.log.manager.fetch.quota.window.size.seconds"),
        )
        self.reader_pool = ReaderPool(
            config.get_int("remote.log.reader.threads"),
            config.get_int("remote.log.reader.max.pending.tasks"),
        )
        pool = config.get_int("remote.log.manager.thread.pool.size")
        copiers = config.get_int("remote.log.manager.copier.thread.pool.size")
        expirers = config.get_int("remote.log.manager.expiration.thread.pool.size")
        self._copiers = ThreadPoolExecutor(
            copiers if copiers > 0 else pool, thread_name_prefix="rlm-copy-thread-pool"
        )
        self._expirers = ThreadPoolExecutor(
            expirers if expirers > 0 else pool, thread_name_prefix="rlm-expiration-thread-pool"
        )
        self._tasks: dict[TopicIdPartition, PartitionTasks] = {}
        #: Replaced tasks (a leadership change) whose last run is still under way.
        self._retired: list[PartitionTasks] = []
        self.partition_deletions = PartitionDeletions(
            self.metadata,
            self.delete_remote_partition,
            broker_id,
            initial_backoff_ms=config.get_int("remote.log.manager.task.retry.backoff.ms"),
            max_backoff_ms=config.get_int("remote.log.manager.task.retry.backoff.max.ms"),
        )
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self.metrics.broker_gauge(m.READER_GROUP, m.READER_QUEUE_SIZE, self._queue_size)
        self.metrics.broker_gauge(m.READER_GROUP, m.READER_ACTIVE_THREADS, self._active_readers)
        self.expired_fetches = self.metrics.broker_meter(m.DELAYED_GROUP, m.EXPIRES)
        self.expired_list_offsets = self.metrics.broker_meter(
            m.DELAYED_LIST_OFFSETS_GROUP, m.EXPIRES
        )
        self.fetch_timer = self.metrics.timer(m.RLM_GROUP, m.FETCH_TIME)
        self._scheduler = threading.Thread(
            target=self._schedule_loop, name=f"rlm-scheduler-{broker_id}", daemon=True
        )
        self._scheduler.start()

    # --- settings read on every use (dynamic) ---------------------------------------------

    @property
    def stopping(self) -> bool:
        return self.stop_event.is_set()

    @property
    def task_interval_s(self) -> float:
        return self.config.get_int("remote.log.manager.task.interval.ms") / 1000

    @property
    def custom_metadata_max_bytes(self) -> int:
        return self.config.get_int("remote.log.metadata.custom.metadata.max.bytes")

    def _queue_size(self) -> int:
        return self.reader_pool.queue_size

    def _active_readers(self) -> int:
        return self.reader_pool.active_threads

    def _backoff(self) -> Backoff:
        return Backoff(
            self.config.get_int("remote.log.manager.task.retry.backoff.ms"),
            self.config.get_int("remote.log.manager.task.retry.backoff.max.ms"),
            self.config.get_float("remote.log.manager.task.retry.jitter"),
        )

    # --- leadership -----------------------------------------------------------------------

    def on_leadership_change(
        self, leaders: Sequence[Partition], followers: Sequence[Partition]
    ) -> None:
        """Schedules tasks for new leaders, and only follower bookkeeping for followers."""
        # Internal topics (the metadata topic itself) are never tiered.
        led = {self._tip(p): p for p in leaders if _tierable(p)}
        followed = {self._tip(p): p for p in followers if _tierable(p)}
        if not led and not followed:
            return
        self.metadata.on_partition_leadership_changes(frozenset(led), frozenset(followed))
        with self._lock:
            for tip, partition in [*led.items(), *followed.items()]:
                leader = tip in led
                current = self._tasks.get(tip)
                if (
                    current is not None
                    and current.partition is partition
                    and current.leader == leader
                ):
                    continue
                if current is not None:
                    # As Kafka cancels a leader's copy task when it becomes a follower: the
                    # upload under way ends, but no further segment is uploaded by a replica
                    # that no longer leads (the new leader tiers from where it finds the
                    # metadata, and leaves the segment still being uploaded here alone).
                    current.cancelled = True
                    if current.copy_running or current.expire_running:
                        self._retired.append(current)
                if not leader:
                    self.metrics.remove_partition(tip.topic_partition)
                self._tasks[tip] = PartitionTasks(
                    partition, tip, leader, self._backoff(), self._backoff()
                )
            self._wake.notify_all()

    @staticmethod
    def _tip(partition: Partition) -> TopicIdPartition:
        assert partition.topic_id is not None
        return TopicIdPartition(partition.topic_id, partition.topic_partition)

    def stop_partition(self, partition: Partition, *, delete_remote: bool) -> None:
        """The partition leaves this broker; ``delete_remote`` (its topic was deleted and this
        broker is the one to clean up) deletes its remote data, retrying until done."""
        if partition.topic_id is None:
            return
        tip = self._tip(partition)
        with self._lock:
            tasks = self._tasks.pop(tip, None)
            if tasks is not None:
                tasks.cancelled = True
                if tasks.copy_running or tasks.expire_running:
                    self._retired.append(tasks)
            # A copy finishing after the cleanup would leave an orphan upload behind.
            self._wake.wait_for(lambda: not self._running(tip), timeout=60)
        self.metrics.remove_partition(tip.topic_partition)
        if delete_remote:
            self.partition_deletions.delete(tip)  # stops the partition in metadata once done
        else:
            self.metadata.on_stop_partitions(frozenset({tip}))

    def delete_remote_partition(self, tip: TopicIdPartition) -> int:
        """Deletes every remote segment of a partition and its metadata; returns how many."""
        segments = [
            s
            for s in self.metadata.list_remote_log_segments(tip)
            if s.state is not RemoteLogSegmentState.DELETE_SEGMENT_FINISHED
        ]
        for segment in segments:
            try:
                self.delete_remote_segment(segment)
            except RemoteResourceNotFoundError:
                # Deleting is idempotent: what is already gone needs no second pass.
                log.debug("%s: %s was already gone", tip, segment.remote_log_segment_id)
        return len(segments)

    # --- deletion -------------------------------------------------------------------------

    def delete_remote_segment(
        self, segment: RemoteLogSegmentMetadata, *, count: bool = True
    ) -> None:
        """DELETE_SEGMENT_STARTED, delete the objects, DELETE_SEGMENT_FINISHED."""
        tp = segment.topic_id_partition.topic_partition
        if segment.state is not RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
            self._update(segment, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
        if count:
            self.metrics.meter(m.DELETE_REQUESTS, tp).mark()
        try:
            self.storage.delete_log_segment_data(segment)
        except Exception:
            if count:
                self.metrics.meter(m.DELETE_ERRORS, tp).mark()
            raise
        self._update(segment, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)
        self.index_cache.remove(segment.remote_log_segment_id)

    def _update(self, segment: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> None:
        self.metadata.update_remote_log_segment_metadata(
            segment.update_to(state, self.broker_id, now_ms())
        )

    # --- scheduling -----------------------------------------------------------------------

    def wake(self) -> None:
        """Runs every partition's tasks now instead of at the next interval."""
        with self._lock:
            for tasks in self._tasks.values():
                tasks.copy_due = tasks.expire_due = 0.0
            self._wake.notify_all()

    def _schedule_loop(self) -> None:
        while not self.stopping:
            with self._lock:
                now = time.monotonic()
                due = [t for t in self._tasks.values() if not t.cancelled]
                waits = [self.task_interval_s]
                for tasks in due:
                    if not tasks.copy_running and tasks.copy_due <= now:
                        tasks.copy_running = True
                        self._submit(self._copiers, self._run_copy, tasks)
                    if tasks.leader and not tasks.expire_running and tasks.expire_due <= now:
                        tasks.expire_running = True
                        self._submit(self._expirers, self._run_expiration, tasks)
                    waits += [max(0.0, tasks.copy_due - now), max(0.0, tasks.expire_due - now)]
                positive = [w for w in waits if w > 0]
                self._wake.wait(min(positive) if positive else self.task_interval_s)

    def _running(self, tip: TopicIdPartition) -> bool:
        """Whether a copy or expiration of ``tip`` is under way (call with the lock held)."""
        current = self._tasks.get(tip)
        return any(
            t.copy_running or t.expire_running
            for t in [*self._retired, *([current] if current is not None else [])]
            if t.topic_id_partition == tip
        )

    def _submit(
        self, pool: ThreadPoolExecutor, fn: Callable[[PartitionTasks], None], tasks: PartitionTasks
    ) -> None:
        with contextlib.suppress(RuntimeError):  # the pool is shutting down
            pool.submit(fn, tasks)

    def _finish(
        self, tasks: PartitionTasks, *, copy: bool, failed: bool, waiting: bool = False
    ) -> None:
        """Schedules the next run: after a backoff if this one failed, soon if it waited for
        something (metadata loading, the copy slot), else after the task interval."""
        with self._lock:
            backoff = tasks.copy_backoff if copy else tasks.expire_backoff
            backoff.failures = backoff.failures + 1 if failed else 0
            if failed:
                delay = backoff.next_delay_ms() / 1000
            elif waiting:
                delay = min(self.task_interval_s, backoff.initial_ms / 1000)
            else:
                delay = self.task_interval_s
            due = time.monotonic() + delay
            if copy:
                tasks.copy_running, tasks.copy_due = False, due
            else:
                tasks.expire_running, tasks.expire_due = False, due
            if tasks in self._retired and not (tasks.copy_running or tasks.expire_running):
                self._retired.remove(tasks)
            self._wake.notify_all()

    def stop_copying(self, timeout_s: float) -> None:
        """The broker is about to stop and hand its leaderships over: no new upload starts,
        and those under way get ``timeout_s`` to finish while the broker still serves, so
        their COPY_SEGMENT_FINISHED is published and the next leader does not upload the same
        offsets again. A crash passes 0: it waits for nothing."""
        self.copying_stopped.set()
        if timeout_s <= 0:
            # A crashed process could publish nothing after its death, so neither may an upload
            # of it still running here: its segment stays dangling until retention takes it.
            self.crashed = True
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while any(t.copy_running for t in [*self._tasks.values(), *self._retired]):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if timeout_s > 0:
                        log.warning("stopping with uploads still under way after %.0fs", timeout_s)
                    return
                self._wake.wait(remaining)

    def uploads_allowed(self, tasks: PartitionTasks) -> bool:
        """Whether a new upload may begin for ``tasks``: not once the broker stops or starts
        handing its leaderships over, nor for a partition whose tasks were cancelled. Every
        uploader (the copy task, bulk tiering jobs) asks before each segment."""
        return not (self.stopping or self.copying_stopped.is_set() or tasks.cancelled)

    def _remote_enabled(self, tasks: PartitionTasks) -> bool:
        plog = tasks.partition.log
        return not plog.closed and plog.config.remote_storage_enable

    def _run_copy(self, tasks: PartitionTasks) -> None:
        failed = waiting = False
        tp = tasks.topic_id_partition.topic_partition
        slot: CopySlot | None = None
        try:
            if not self.uploads_allowed(tasks) or not self._remote_enabled(tasks):
                return
            plog = tasks.partition.log
            self._check_lineage(tasks)
            if not tasks.leader:
                plog.highest_offset_in_remote_storage = find_highest_remote_offset(
                    self, plog, tasks.topic_id_partition
                )
                return
            if plog.config.remote_log_copy_disable:
                return
            if not self.metadata.is_ready(tasks.topic_id_partition):
                waiting = True
                return
            slot = CopySlot.try_acquire(plog.directory)
            if slot is None:
                log.debug("%s: another process holds the copy slot; copying later", tp)
                waiting = True
                return
            if self._take_back(tasks):
                copy_log_segments(self, tasks)
            else:
                waiting = True
        except RetriableError as err:
            failed = True
            log.debug("%s: copy will be retried: %s", tp, err)
        except RemoteResourceNotFoundError as err:
            failed = True
            if not self._metadata_forgotten(tasks):
                self.metrics.meter(m.COPY_ERRORS, tp).mark()
                log.warning("%s: copying to remote storage failed: %s", tp, err)
        except Exception as err:
            failed = True
            self.metrics.meter(m.COPY_ERRORS, tp).mark()
            if not tasks.partition.log.closed:
                log.warning("%s: copying to remote storage failed: %s", tp, err)
        finally:
            if slot is not None:
                slot.release()
            self._finish(tasks, copy=True, failed=failed, waiting=waiting)

    def _take_back(self, tasks: PartitionTasks) -> bool:
        """Whether the copy may run after a job in another process held the slot (see
        ``copy_slot``): only once this broker's metadata shows what the job tiered, and from
        the tiered offset the metadata gives, not the one this process last knew."""
        plog = tasks.partition.log
        note = HandBack.read(plog.directory)
        if note is None:
            return True
        if note.leader_epoch != plog.leader_epoch_cache.latest_epoch:
            HandBack.clear(plog.directory)  # an earlier leadership's: read from the metadata
            tasks.initialized = False
            return True
        highest = find_highest_remote_offset(self, plog, tasks.topic_id_partition)
        if highest < note.must_reach:
            log.info(
                "%s: waiting for the remote log metadata to show offset %d tiered by a job "
                "(it shows %d) before copying again",
                plog.topic_partition,
                note.must_reach,
                highest,
            )
            return False
        plog.highest_offset_in_remote_storage = highest
        tasks.initialized = True
        HandBack.clear(plog.directory)
        return True

    def _run_expiration(self, tasks: PartitionTasks) -> None:
        failed = False
        tp = tasks.topic_id_partition.topic_partition
        try:
            if self.stopping or tasks.cancelled or tasks.partition.log.closed:
                return
            plog = tasks.partition.log
            if not self.metadata.is_ready(tasks.topic_id_partition):
                return
            self._check_lineage(tasks)
            if not plog.config.remote_storage_enable:
                delete = self._topic_switch(tp.topic, "remote.log.delete.on.disable")
                if delete and self.delete_remote_partition(tasks.topic_id_partition):
                    plog.delete_records(min(plog.local_log_start_offset, plog.high_watermark))
                return
            expire_remote_segments(self, tasks, keep_dangling=self._slot_held_elsewhere(plog))
        except Exception as err:
            failed = True
            forgotten = isinstance(err, RemoteResourceNotFoundError) and self._metadata_forgotten(
                tasks
            )
            if not (tasks.partition.log.closed or forgotten):
                log.warning("%s: remote retention failed: %s", tp, err)
        finally:
            self._finish(tasks, copy=False, failed=failed)

    def _metadata_forgotten(self, tasks: PartitionTasks) -> bool:
        """Whether the metadata manager no longer knows the partition: its topic was deleted
        (DELETE_PARTITION_FINISHED, perhaps by another broker) and this replica is about to be
        stopped, or it already was. Its tasks then have nothing to do; that is no failure."""
        if tasks.partition.log.closed or tasks.cancelled:
            return True
        try:
            self.metadata.list_remote_log_segments(tasks.topic_id_partition)
        except RemoteResourceNotFoundError:
            log.debug(
                "%s: remote log metadata is gone; waiting to be stopped", tasks.topic_id_partition
            )
            return True
        except TierlogError:
            return False
        return False

    def _check_lineage(self, tasks: PartitionTasks) -> None:
        """Once per leadership, before the first copy or expiration decides anything."""
        if not tasks.lineage_checked and self.metadata.is_ready(tasks.topic_id_partition):
            self.restore_lineage(tasks.partition)
            tasks.lineage_checked = True

    def restore_lineage(self, partition: Partition) -> None:
        """Gives back to a replica whose checkpoints were lost what it knew of its remote data.

        Without ``log-start-offset-checkpoint`` a tiered log starts at 0 and rises here to
        where remote storage starts; without ``leader-epoch-checkpoint`` it knows only the
        epochs of its local batches, and those of offsets only remote storage holds come from
        the remote segments' metadata. Before that, copying would upload tiered ranges again
        and retention would judge tiered segments foreign. A healthy replica is left as it is:
        its log start only rises here when its checkpoint was lost, so metadata that has not
        shown every segment yet can never move the start of a log past acknowledged records.
        """
        plog = partition.log
        if not plog.config.remote_storage_enable or not self.is_ready(partition):
            return
        log_start, local_start = plog.log_start_offset, plog.local_log_start_offset
        if log_start >= local_start:
            return
        earliest = plog.leader_epoch_cache.earliest_entry
        finished = sorted(
            (
                s
                for s in self.metadata.list_remote_log_segments(self._tip(partition))
                if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            ),
            key=lambda s: (s.start_offset, s.end_offset),
        )
        # No finished segment is no evidence of where remote storage starts: the log start
        # stays where it is rather than rise past data the metadata has not shown yet.
        remote_start = min((s.start_offset for s in finished), default=log_start)
        if earliest is not None and earliest.start_offset <= max(log_start, remote_start):
            if log_start < remote_start:
                plog.restore_remote_lineage(remote_start, ())
            return
        first_known = plog.log_end_offset if earliest is None else earliest.start_offset
        target = first_known - 1
        holding = [s for s in finished if s.start_offset <= target <= s.end_offset]
        entries: list[EpochEntry] = []
        if holding:
            # The newest lineage's segment, as for a follower's bootstrap; those before it
            # say where the earlier epochs began.
            segment = max(holding, key=lambda s: _epoch_at(s, target))
            entries = [
                EpochEntry(epoch, start)
                for s in [*(s for s in finished if s.end_offset < segment.start_offset), segment]
                for epoch, start in s.segment_leader_epochs
            ]
        plog.restore_remote_lineage(remote_start, entries)

    # --- reads ----------------------------------------------------------------------------

    # --- copy slots, for bulk tiering jobs ------------------------------------------------

    def led_partitions(self) -> dict[TopicIdPartition, PartitionTasks]:
        """The tiered partitions this broker leads now, with their task state."""
        with self._lock:
            return {
                tip: tasks
                for tip, tasks in self._tasks.items()
                if tasks.leader and not tasks.cancelled
            }

    @contextlib.contextmanager
    def copy_slot(self, tip: TopicIdPartition, timeout_s: float) -> Iterator[PartitionTasks]:
        """Holds the partition's copy slot: the copy task does not run for it meanwhile.

        A job that tiers segments itself (a bulk upload) takes the slot so that the segments it
        uploads are never copied twice. The slot's lock file is taken too (``copy_slot``
        module), so no job in another process uploads meanwhile. Waits at most ``timeout_s``
        for a running copy, and for another process's hold, to end.

        :raises LookupError: this broker does not hold the partition.
        :raises TimeoutError: the running copy or another process's hold did not end in time.
        """
        with self._lock:
            tasks = self._tasks.get(tip)
            if tasks is None:
                raise LookupError(f"{tip}: not a tiered partition of broker {self.broker_id}")
            if not self._wake.wait_for(lambda: not tasks.copy_running, timeout=timeout_s):
                raise TimeoutError(f"{tip}: the running copy did not end in {timeout_s} s")
            tasks.copy_running = True
        try:
            slot = CopySlot.acquire(tasks.partition.log.directory, timeout_s)
        except BaseException:
            self._finish(tasks, copy=True, failed=False)
            raise
        if slot is None:
            self._finish(tasks, copy=True, failed=False)
            raise TimeoutError(f"{tip}: another process holds the copy slot")
        try:
            with slot:
                if self._take_back(tasks):
                    yield tasks
                else:
                    raise TimeoutError(f"{tip}: the metadata does not show a job's uploads yet")
        finally:
            self._finish(tasks, copy=True, failed=False)

    @staticmethod
    def _slot_held_elsewhere(plog: PartitionLog) -> bool:
        """Whether another process (a tiering job) holds the copy slot: its uploads under way
        look dangling here, and must not be deleted under it."""
        try:
            slot = CopySlot.try_acquire(plog.directory)
        except OSError:
            return False
        if slot is None:
            return True
        slot.release()
        return False

    def is_ready(self, partition: Partition) -> bool:
        """Whether the partition's remote metadata is loaded (KIP-1007); False: answer retriably."""
        return partition.topic_id is None or self.metadata.is_ready(self._tip(partition))

    def in_remote_range(self, partition: Partition, offset: int) -> bool:
        """Whether a fetch at ``offset`` is for data only the remote tier holds."""
        plog = partition.log
        return (
            plog.config.remote_storage_enable
            and plog.log_start_offset <= offset < plog.local_log_start_offset
        )

    def read(
        self,
        partition: Partition,
        fetch_offset: int,
        max_bytes: int,
        *,
        min_one_message: bool,
        committed: bool = False,
    ) -> RemoteFetchResult:
        """Reads from the remote tier on the calling thread (the reader pool calls this)."""
        tp = partition.topic_partition
        self.metrics.meter(m.FETCH_REQUESTS, tp).mark()
        started = time.perf_counter()
        if partition.log.leader_epoch_cache.epoch_for_offset(fetch_offset) is None:
            self.restore_lineage(partition)  # a lost checkpoint, before the tasks repaired it
        try:
            result = read_remote(
                self.storage,
                self.metadata,
                self.index_cache,
                self._tip(partition),
                partition.log.leader_epoch_cache.epoch_for_offset,
                fetch_offset,
                max_bytes,
                min_one_message=min_one_message,
            )
            if committed:
                plog = partition.log
                upper = result.next_offset if result.records else fetch_offset
                result = attrs.evolve(
                    result,
                    aborted_transactions=collect_aborted_transactions(
                        self.metadata,
                        self.index_cache,
                        self._tip(partition),
                        fetch_offset,
                        upper,
                        plog.collect_aborted_transactions,
                        plog.local_log_start_offset,
                    ),
                )
        except TierlogError as err:
            if not isinstance(err, OffsetOutOfRangeError):  # a client's bad offset, not ours
                self.metrics.meter(m.FETCH_ERRORS, tp).mark()
            raise
        except Exception:
            self.metrics.meter(m.FETCH_ERRORS, tp).mark()
            raise
        self.fetch_timer.update((time.perf_counter() - started) * 1000)
        self.metrics.meter(m.FETCH_BYTES, tp).mark(len(result.records))
        self.fetch_quota.record(len(result.records))
        return result

    def async_read(
        self,
        partition: Partition,
        fetch_offset: int,
        max_bytes: int,
        *,
        min_one_message: bool,
        committed: bool = False,
    ) -> Future[RemoteFetchResult]:
        """Queues a read on the reader pool; RemoteStorageQueueFullError if it is full."""
        return self.reader_pool.submit(
            lambda: self.read(
                partition,
                fetch_offset,
                max_bytes,
                min_one_message=min_one_message,
                committed=committed,
            )
        )

    # --- follower bootstrap ---------------------------------------------------------------

    def aux_state_below(self, partition: Partition, local_log_start: int) -> RemoteAuxState:
        """What a follower needs to start at the leader's ``local_log_start``: the remote
        segment ending just below it, the leader epochs up to there and its producer snapshot.

        Raises RetriableRemoteStorageError while the metadata is loading or no finished
        segment holds ``local_log_start - 1`` yet (the follower tries again later).
        """
        if not self.is_ready(partition):
            raise RetriableRemoteStorageError(
                f"remote log metadata of {partition.topic_partition} is not ready yet"
            )
        tip = self._tip(partition)
        target = local_log_start - 1
        finished = sorted(
            (
                s
                for s in self.metadata.list_remote_log_segments(tip)
                if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            ),
            key=lambda s: (s.start_offset, s.end_offset),
        )
        holding = [s for s in finished if s.start_offset <= target <= s.end_offset]
        if not holding:
            raise RetriableRemoteStorageError(
                f"no remote segment of {partition.topic_partition} holds offset {target}"
            )
        # Of segments holding the offset (an unclean election may leave two), the newest
        # lineage's: the one whose epoch at the offset is the highest.
        segment = max(holding, key=lambda s: _epoch_at(s, target))
        with self.storage.fetch_index(segment, IndexType.LEADER_EPOCH) as stream:
            own = LeaderEpochCheckpointFile.decode(stream.read(), source=str(segment))
        with self.storage.fetch_index(segment, IndexType.PRODUCER_SNAPSHOT) as stream:
            snapshot = bytes(stream.read())
        # The segment's index holds only its own epochs; the earlier segments say where the
        # epochs before it began, so the rebuilt cache starts where the leader's does.
        earlier = [
            EpochEntry(epoch, start)
            for s in finished
            if s.end_offset < segment.start_offset
            for epoch, start in s.segment_leader_epochs
        ]
        return RemoteAuxState(segment, (*earlier, *own), snapshot)

    # --- list offsets ---------------------------------------------------------------------

    def needs_remote_search(self, partition: Partition, timestamp: int) -> bool:
        """Whether ListOffsets for ``timestamp`` must wait for a lookup on the reader pool."""
        return partition.topic_id is not None and needs_remote_search(partition.log, timestamp)

    def offset_for_timestamp(
        self, partition: Partition, timestamp: int
    ) -> TimestampAndOffset | None:
        """ListOffsets over both tiers on the calling thread (the reader pool calls this)."""
        return offset_for_timestamp_across_tiers(
            self, partition.log, self._tip(partition), timestamp
        )

    def async_offset_for_timestamp(
        self, partition: Partition, timestamp: int
    ) -> Future[TimestampAndOffset | None]:
        """Queues the lookup on the fetches' reader pool; RemoteStorageQueueFullError if full."""
        return self.reader_pool.submit(lambda: self.offset_for_timestamp(partition, timestamp))

    # --- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Stops the tasks and readers; in-flight plugin calls finish first."""
        self.stop_event.set()
        with self._lock:
            self._wake.notify_all()
        self._scheduler.join()
        self.partition_deletions.close()
        self._copiers.shutdown(wait=True, cancel_futures=True)
        self._expirers.shutdown(wait=True, cancel_futures=True)
        self.reader_pool.shutdown()
        self.index_cache.close()
        shutil.rmtree(self.scratch_dir, ignore_errors=True)
        self.metrics.remove_broker()
        with self._lock:
            tps = [t.topic_id_partition.topic_partition for t in self._tasks.values()]
            self._tasks.clear()
        for tp in tps:
            self.metrics.remove_partition(tp)


@attrs.frozen
class RemoteAuxState:
    """The remote segment a follower restarts after, with its epochs and producer snapshot."""

    segment: RemoteLogSegmentMetadata
    leader_epochs: tuple[EpochEntry, ...]
    producer_snapshot: bytes


def _epoch_at(segment: RemoteLogSegmentMetadata, offset: int) -> int:
    return max((e for e, start in segment.segment_leader_epochs if start <= offset), default=-1)


def _tierable(partition: Partition) -> bool:
    return partition.topic_id is not None and not is_internal(partition.topic_partition.topic)
