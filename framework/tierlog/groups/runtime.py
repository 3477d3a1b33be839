"""The group coordinator of one broker: a shard per ``__consumer_offsets`` partition it leads.

LeaderAndIsr tells it which partitions this broker now leads (:meth:`on_leadership_change`):
a new leader's shard loads in the background, one partition at a time in order (requests to
it meanwhile get COORDINATOR_LOAD_IN_PROGRESS); a partition led elsewhere now drops its shard
(NOT_COORDINATOR, also to members waiting for an answer). Requests are routed by group id to
the shard of the group's partition (``partitioner.py``).

Offset retention runs here too: every ``offsets.retention.check.interval.ms`` the offsets of
empty groups older than ``offsets.retention.minutes`` (and of topics no member of a consumer
group subscribes to) are deleted with tombstones, and empty groups left with no offsets go too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    NotCoordinatorError,
    TierlogError,
    TopicExistsError,
    error_code_of,
)
from ..model import TopicPartition
from ..server import protocol as p
from ..server.internal_topics import CONSUMER_OFFSETS_TOPIC
from . import (
    admin_requests,
    classic_requests,
    consumer_requests,
    find_coordinator,
    offset_requests,
)
from .consumer_metrics import ConsumerGroupMetrics
from .dispatch import ROUTES
from .group import GroupType
from .metrics import CoordinatorMetrics
from .offsets import CommittedOffset
from .partitioner import group_partition
from .records import MAX_KEY_STRING_BYTES
from .retention import delete_offsets_of_topics, expire_offsets
from .shard import CoordinatorShard, ShardState
from .timer import Timer

if TYPE_CHECKING:
    from ..server.broker import Broker
    from ..server.image import ClusterImage
    from ..server.partition import Partition

log = logging.getLogger(__name__)

#: Handler modules register their requests on import; named so the imports are not unused.
HANDLER_MODULES = (
    admin_requests,
    classic_requests,
    consumer_requests,
    find_coordinator,
    offset_requests,
)


class GroupCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.broker_id = broker.broker_id
        self.config = broker.config
        self.timer = Timer(f"group-coordinator-{self.broker_id}")
        self._lock = threading.Lock()
        self._shards: dict[int, CoordinatorShard] = {}
        self._loader = ThreadPoolExecutor(1, thread_name_prefix=f"group-loader-{self.broker_id}")
        self._closed = False
        host = broker.plugin_host
        self.metrics: CoordinatorMetrics | None = None
        self.consumer_metrics: ConsumerGroupMetrics | None = None
        if host is not None:
            self.metrics = CoordinatorMetrics(
                host.metrics, self._count_classic_groups, self._count_offsets
            )
            self.consumer_metrics = ConsumerGroupMetrics(host.metrics, self.shards)
        self._schedule_retention()
        #: Topics as last seen, so the offsets of a deleted one are deleted too.
        self._topics = set(broker.controller.image().topics)
        self._unsubscribe = broker.controller.subscribe(self._on_metadata)

    # --- configuration ------------------------------------------------------------------------

    def _int(self, key: str) -> int:
        return self.config.get_int(key)

    @property
    def commit_timeout_ms(self) -> int:
        return self._int("offsets.commit.timeout.ms")

    @property
    def load_buffer_size(self) -> int:
        return self._int("offsets.load.buffer.size")

    @property
    def group_max_size(self) -> int:
        return self._int("group.max.size")

    @property
    def initial_rebalance_delay_ms(self) -> int:
        return self._int("group.initial.rebalance.delay.ms")

    @property
    def min_session_timeout_ms(self) -> int:
        return self._int("group.min.session.timeout.ms")

    @property
    def max_session_timeout_ms(self) -> int:
        return self._int("group.max.session.timeout.ms")

    @property
    def offset_metadata_max_bytes(self) -> int:
        return self._int("offset.metadata.max.bytes")

    @property
    def offsets_retention_ms(self) -> int:
        return self._int("offsets.retention.minutes") * 60_000

    def num_partitions(self) -> int:
        """Partitions of ``__consumer_offsets``: as created, else as configured."""
        topic = self.broker.controller.image().topic(CONSUMER_OFFSETS_TOPIC)
        if topic is not None:
            return len(topic.partitions)
        return self._int("offsets.topic.num.partitions")

    def partition_for(self, group_id: str) -> int:
        return group_partition(group_id, self.num_partitions())

    # --- the broker ---------------------------------------------------------------------------

    def send_internal(self, request: p.ProduceRequest, timeout_ms: int) -> p.ProduceResponse:
        transport = self.broker.controller.transport
        return transport.send_internal(self.broker_id, request, timeout_ms=timeout_ms)

    def hosted_partition(self, tp: TopicPartition) -> Partition | None:
        return self.broker.partition(tp)

    def ensure_offsets_topic(self) -> None:
        """Creates ``__consumer_offsets`` the first time a group needs it, as Kafka does."""
        controller = self.broker.controller
        if controller.image().topic(CONSUMER_OFFSETS_TOPIC) is not None:
            return
        live = len(controller.live_brokers())
        replication = self._int("offsets.topic.replication.factor")
        if not self.broker.inter_broker_enabled:
            # As for the metadata topic: only a cluster that knows all its brokers shrinks it.
            replication = min(replication, max(live, 1))
        configs = {
            "cleanup.policy": "compact",
            "remote.storage.enable": "false",
            "segment.bytes": str(self._int("offsets.topic.segment.bytes")),
        }
        try:
            controller.create_topic(
                CONSUMER_OFFSETS_TOPIC,
                self._int("offsets.topic.num.partitions"),
                replication,
                configs,
                internal=True,
            )
            log.info(
                "broker %d: created %s (replication factor %d)",
                self.broker_id,
                CONSUMER_OFFSETS_TOPIC,
                replication,
            )
        except TopicExistsError:
            pass
        except TierlogError as err:
            raise CoordinatorNotAvailableError(
                f"cannot create {CONSUMER_OFFSETS_TOPIC}: {err}"
            ) from err

    # --- shards -------------------------------------------------------------------------------

    def shards(self) -> list[CoordinatorShard]:
        with self._lock:
            return list(self._shards.values())

    def shard(self, partition: int) -> CoordinatorShard | None:
        with self._lock:
            return self._shards.get(partition)

    def shard_for(self, group_id: str) -> CoordinatorShard:
        """The active shard holding ``group_id``, or the error to answer."""
        size = len(group_id.encode())
        if size > MAX_KEY_STRING_BYTES:
            # Record keys hold the id as a 16-bit length string; a longer id could never be kept.
            raise InvalidGroupIdError(
                f"a group id must be at most {MAX_KEY_STRING_BYTES} bytes in UTF-8, not {size}"
            )
        partition = self.partition_for(group_id)
        shard = self.shard(partition)
        if shard is None:
            registration = self.broker.controller.image().registration(
                TopicPartition(CONSUMER_OFFSETS_TOPIC, partition)
            )
            if registration is not None and registration.leader == self.broker_id:
                # Led here, and the leadership not yet taken over: the shard is about to load.
                raise CoordinatorLoadInProgressError(
                    f"group {group_id!r} ({CONSUMER_OFFSETS_TOPIC}-{partition}) is loading "
                    f"on broker {self.broker_id}"
                )
            raise NotCoordinatorError(
                f"broker {self.broker_id} is not the coordinator of group {group_id!r} "
                f"({CONSUMER_OFFSETS_TOPIC}-{partition})"
            )
        shard.check_active()
        return shard

    @contextlib.contextmanager
    def locked_shard(self, group_id: str) -> Iterator[CoordinatorShard]:
        """The active shard holding ``group_id``, under its lock: the preamble of every request
        about one group (the shard may have unloaded between finding and locking it)."""
        if not group_id:
            raise InvalidGroupIdError("a group id must not be empty")
        shard = self.shard_for(group_id)
        with shard.lock:
            shard.check_active()
            yield shard

    def committed_offsets(self) -> dict[str, dict[TopicPartition, CommittedOffset]]:
        """Every group coordinated here with its committed offsets (for lag metrics): the
        active shards' groups; one group lives in one shard."""
        found: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        for shard in self.shards():
            if shard.state is ShardState.ACTIVE:
                found.update(shard.committed_offsets())
        return found

    def _count_classic_groups(self) -> int:
        shards = [s for s in self.shards() if s.state is ShardState.ACTIVE]
        return sum(
            1 for s in shards for g in list(s.groups.values()) if g.group_type is GroupType.CLASSIC
        )

    def _count_offsets(self) -> int:
        shards = [s for s in self.shards() if s.state is ShardState.ACTIVE]
        return sum(s.offsets.count() for s in shards)

    def on_leadership_change(self, leaders: list[Partition], followers: list[Partition]) -> None:
        """Loads the offsets partitions this broker now leads; drops those it follows."""
        for partition in followers:
            if partition.topic_partition.topic == CONSUMER_OFFSETS_TOPIC:
                self._unload(partition.topic_partition.partition)
        for partition in leaders:
            tp = partition.topic_partition
            if tp.topic != CONSUMER_OFFSETS_TOPIC:
                continue
            with self._lock:
                if self._closed:
                    return
                current = self._shards.get(tp.partition)
                if current is not None and current.leader_epoch == partition.leader_epoch:
                    continue
                shard = CoordinatorShard(self, tp.partition, partition.leader_epoch)
                self._shards[tp.partition] = shard
            if current is not None:
                self._close(current)
            self._loader.submit(self._load, shard)

    def on_partition_removed(self, tp: TopicPartition) -> None:
        if tp.topic == CONSUMER_OFFSETS_TOPIC:
            self._unload(tp.partition)

    def _unload(self, partition: int) -> None:
        with self._lock:
            shard = self._shards.pop(partition, None)
        if shard is not None:
            log.info("broker %d: unloading %s", self.broker_id, shard.topic_partition)
            self._close(shard)

    def _close(self, shard: CoordinatorShard) -> None:
        """Stops ``shard`` now; its waiting members are answered from the loader thread, so a
        LeaderAndIsr never waits for a write that holds the shard's lock."""
        shard.close()
        try:
            self._loader.submit(shard.release_members)
        except RuntimeError:  # shutting down
            shard.release_members()

    def _load(self, shard: CoordinatorShard) -> None:
        try:
            shard.load()
            log.info(
                "broker %d: loaded %s (%d records, %d groups)",
                self.broker_id,
                shard.topic_partition,
                shard.loaded_records,
                len(shard.groups),
            )
        except Exception:
            log.exception("broker %d: loading %s failed", self.broker_id, shard.topic_partition)
            with self._lock:
                if self._shards.get(shard.partition) is shard:
                    del self._shards[shard.partition]
            shard.close()
            shard.release_members()

    def wait_loaded(self, timeout_s: float = 30.0) -> bool:
        """Waits until no shard is loading (for tools and tests)."""
        future = self._loader.submit(lambda: None)
        try:
            future.result(timeout=timeout_s)
        except Exception:
            return False
        return all(s.state is not ShardState.LOADING for s in self.shards())

    def shutdown(self) -> None:
        self._unsubscribe()
        with self._lock:
            self._closed = True
            shards = list(self._shards.values())
            self._shards.clear()
        for shard in shards:
            shard.close()
        self._loader.shutdown(wait=False, cancel_futures=True)
        for shard in shards:
            shard.release_members()
        self.timer.close()
        if self.metrics is not None:
            self.metrics.close()
        if self.consumer_metrics is not None:
            self.consumer_metrics.close()

    # --- requests -----------------------------------------------------------------------------

    def handle(self, request: Any) -> Any:
        route = ROUTES.get(type(request))
        if route is None:
            raise TypeError(f"the group coordinator does not answer {type(request).__name__}")
        try:
            return route.handle(self, request)
        except Exception as err:
            if not isinstance(err, TierlogError):
                log.exception("broker %d: %s failed", self.broker_id, type(request).__name__)
            return route.error(request, error_code_of(err), str(err) or type(err).__name__)

    # --- deleted topics -----------------------------------------------------------------------

    def _on_metadata(self, image: ClusterImage) -> None:
        """A topic was deleted: its committed offsets go too, as Kafka's coordinator removes
        them (``onPartitionsDeleted``). Written from the loader thread, never the caller's."""
        current = set(image.topics)
        deleted, self._topics = self._topics - current, current
        if deleted:
            with contextlib.suppress(RuntimeError):  # shutting down: nothing to do
                self._loader.submit(self._delete_offsets_of, deleted)

    def _delete_offsets_of(self, topics: set[str]) -> None:
        for shard in self.shards():
            try:
                removed = delete_offsets_of_topics(shard, topics)
            except TierlogError as err:
                log.warning("%s: offsets of deleted topics kept for now: %s", shard, err)
                continue
            if removed and self.metrics is not None:
                self.metrics.offset_deletions.mark(removed)

    # --- offset retention ---------------------------------------------------------------------

    def _schedule_retention(self) -> None:
        self.timer.schedule(
            ("retention",), self._int("offsets.retention.check.interval.ms"), self._retention
        )

    def _retention(self) -> None:
        try:
            for shard in self.shards():
                try:
                    expired = expire_offsets(shard, self.offsets_retention_ms)
                    if self.metrics is not None:
                        self.metrics.offset_expirations.mark(expired)
                except TierlogError as err:
                    log.info("%s: offset expiry deferred: %s", shard, err)
        finally:
            self._schedule_retention()
